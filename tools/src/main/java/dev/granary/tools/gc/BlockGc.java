package dev.granary.tools.gc;

import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.GcBlock;
import dev.granary.oss.BlockIo;
import java.time.Duration;
import dev.granary.mds.client.LocalMdsTransport;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The block garbage collector: deletes from the OSTs the blocks the namespace freed (an
 * overwritten stripe's old block, the stripes a truncate cut away, the blocks of an unlinked
 * file), then drops their records from the MDS's GC queue.
 *
 * <p>A block is deleted no sooner than {@code grace} after it was freed: a reader that opened the
 * file before the free still holds the old extent map and reads the old block meanwhile (NFS's
 * close-to-open gives it no newer view). The rule of DESIGN.md ("Free", ZFS's dead list) also
 * keeps a block some snapshot still sees; Granary has no snapshots yet, so every freed block goes
 * after the grace. Blocks of an OST whose delete failed (OSS or S3 down) keep their records and
 * are tried again by the next pass; a record whose block the live tree still references (the
 * MDS's safety net, never expected) is dropped without deleting the block.
 *
 * <p>One pass reads the queue in pages of {@value #PAGE} records (one linearizable MDS read each),
 * sends one delete per OST per page (the OSS deletes the S3 objects and drops them from its read
 * caches), and drops the deleted records in one Raft write per page. Deletes and drops are
 * idempotent, so two workers at once (an old leader's and a new one's) waste work but lose nothing.
 */
public final class BlockGc implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(BlockGc.class);
    /** Records per gc_list page, and at most the keys of one delete request. */
    public static final int PAGE = 1000;
    private static final Caller ROOT = Caller.newBuilder().setUid(0).setGid(0).build();

    private final MdsClient mds;
    private final BlockIo blocks;
    private final Duration grace;
    private final LongSupplier clockNs;
    private ScheduledExecutorService timer;

    /** What one pass did: blocks deleted, records left for the next pass (delete failed), records dropped without a delete (still referenced). */
    public record Pass(long deleted, long failed, long referenced) {}

    /**
     * A collector using {@code mds} (root identity) and {@code blocks} (the OSSes), deleting blocks
     * freed at least {@code grace} ago by the wall clock.
     */
    public BlockGc(MdsClient mds, BlockIo blocks, Duration grace) {
        this(mds, blocks, grace, LocalMdsTransport::systemNanos);
    }

    /** As above, with {@code clockNs} (ns since the Unix epoch) as the clock. */
    public BlockGc(MdsClient mds, BlockIo blocks, Duration grace, LongSupplier clockNs) {
        this.mds = mds;
        this.blocks = blocks;
        this.grace = grace;
        this.clockNs = clockNs;
    }

    /** The time before which a block freed is past {@code grace} at {@code nowNs} (both ns since the Unix epoch). */
    public static long deadBeforeNs(long nowNs, Duration grace) {
        return nowNs - grace.toNanos();
    }

    /**
     * Runs one pass over the queue: every block freed before now minus the grace is deleted (or
     * left for the next pass when its OST's delete fails).
     *
     * @throws FsException from the MDS (no leader after the Raft client's retries)
     */
    public Pass runPass() {
        long deadBefore = deadBeforeNs(clockNs.getAsLong(), grace);
        long deleted = 0, failed = 0, referenced = 0;
        long from = 0;
        for (;;) {
            MdsClient.GcPage page = mds.gcList(ROOT, from, PAGE, deadBefore);
            if (page.blocks().isEmpty()) {
                break;
            }
            List<Long> done = new ArrayList<>();
            Map<Integer, List<GcBlock>> byOst = new LinkedHashMap<>();
            for (GcBlock b : page.blocks()) {
                if (b.getStillReferenced()) {
                    LOG.warn("GC record {} names block {} of OST {} that inode {} stripe {} still references: record dropped, block kept",
                            b.getSeq(), b.getBlockKey(), b.getOst(), Long.toUnsignedString(b.getIno()), b.getStripeIndex());
                    done.add(b.getSeq());
                    referenced++;
                } else {
                    byOst.computeIfAbsent(b.getOst(), k -> new ArrayList<>()).add(b);
                }
            }
            Map<Integer, CompletableFuture<Void>> deletes = new LinkedHashMap<>();
            byOst.forEach((ost, list) -> deletes.put(ost, startDelete(ost, list.stream().map(GcBlock::getBlockKey).toList())));
            for (var en : deletes.entrySet()) {
                List<GcBlock> list = byOst.get(en.getKey());
                try {
                    en.getValue().join();
                    list.forEach(b -> done.add(b.getSeq()));
                    deleted += list.size();
                } catch (CompletionException e) {
                    failed += list.size();
                    LOG.warn("GC: delete of {} blocks on OST {} failed, kept for the next pass: {}", list.size(), en.getKey(),
                            e.getCause() == null ? e.toString() : e.getCause().getMessage());
                }
            }
            if (!done.isEmpty()) {
                mds.gcDone(ROOT, done);
            }
            from = page.blocks().get(page.blocks().size() - 1).getSeq() + 1;
            if (!page.more()) {
                break;
            }
        }
        if (deleted + failed + referenced > 0) {
            LOG.info("GC pass: {} blocks deleted, {} left for the next pass, {} records of referenced blocks dropped", deleted, failed, referenced);
        }
        return new Pass(deleted, failed, referenced);
    }

    private CompletableFuture<Void> startDelete(int ost, List<String> keys) {
        try {
            return blocks.delete(ost, keys);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * Runs a pass every {@code interval} on a daemon thread while {@code active} holds when the
     * pass is due (an MDS process runs the passes only while its peer leads). A failed pass is
     * logged and the next one tries again.
     *
     * @throws IllegalStateException when already started
     */
    public synchronized void start(Duration interval, BooleanSupplier active) {
        if (timer != null) {
            throw new IllegalStateException("GC worker already started");
        }
        timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "granary-gc");
            t.setDaemon(true);
            return t;
        });
        long ms = Math.max(1, interval.toMillis());
        timer.scheduleWithFixedDelay(() -> {
            try {
                if (active.getAsBoolean()) {
                    runPass();
                }
            } catch (RuntimeException e) {
                LOG.warn("GC pass failed, the next one tries again: {}", e.getMessage());
            }
        }, ms, ms, TimeUnit.MILLISECONDS);
    }

    /** Stops the worker (a pass under way is interrupted at its next MDS or OSS call); the clients stay open. */
    @Override
    public synchronized void close() {
        if (timer != null) {
            timer.shutdownNow();
            try {
                timer.awaitTermination(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
