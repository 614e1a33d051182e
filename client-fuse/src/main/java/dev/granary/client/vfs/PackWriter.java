package dev.granary.client.vfs;

import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import dev.granary.oss.BlockIo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * Small-file packing (DESIGN.md: a block may hold "a packed run of small ones"): the small files
 * this client closes (or fsyncs) together go into one block, a pack, uploaded with one S3 PUT, and
 * are committed in one Raft entry (mds.proto CommitPackRequest), each file's extent pointing at its
 * bytes inside the pack. So writing many small files costs one PUT per pack instead of one per
 * file, and the bucket stays the primary copy of their data (not the MDS, as with inline data).
 *
 * <p>Group commit, per OST (a pack lives on one OST): a file that arrives while no pack of its OST
 * is being written starts one at once, holding just the files waiting then; files that arrive while
 * a pack is uploading or committing wait and go together in the next (at most
 * {@link ClientConfig#PACK_BYTES}). The caller that starts a pack writes it and every waiting file
 * of it is answered when its commit is; then the first waiting caller writes the next. A close
 * returns, as before, once its data is in S3 and committed on a Raft majority.
 *
 * <p>Thread-safe. Errors: an upload failure fails every file of the pack (EIO, from the caller's
 * commit); each file's commit has its own status (EAGAIN when its stripe changed since its writer
 * read it, ENOENT when it was removed meanwhile).
 */
final class PackWriter {
    /** One file waiting for a pack. */
    private static final class Pending {
        final byte[] data;
        final int len;
        final long ino;
        /** The file's commit_extents request, given its packed extent. */
        final Function<Extent, MdsRequest> commitFor;
        /** Completes with the file's commit answer and packed extent (or the pack's failure). */
        final CompletableFuture<Done> done = new CompletableFuture<>();
        /** Completes when this caller is to write the next pack of its lane. */
        final CompletableFuture<Void> turn = new CompletableFuture<>();

        Pending(byte[] data, int len, long ino, Function<Extent, MdsRequest> commitFor) {
            this.data = data;
            this.len = len;
            this.ino = ino;
            this.commitFor = commitFor;
        }
    }

    /** A file's commit answer and the packed extent it was committed with. */
    record Done(MdsResponse response, Extent extent) {}

    /** The files waiting for one OST's next pack, and whether a pack of it is being written. */
    private static final class Lane {
        final List<Pending> waiting = new ArrayList<>();
        boolean busy;
    }

    private final MdsClient mds;
    /** Sends a commit_pack after the deferred creates of its files (inode numbers): returns its answer. */
    private final BiFunction<List<Long>, MdsRequest, MdsResponse> send;
    private final BlockIo blockIo;
    private final int packBytes;
    private final Map<Integer, Lane> lanes = new HashMap<>();
    private final AtomicLong packs = new AtomicLong();
    private final AtomicLong files = new AtomicLong();

    /**
     * Packs of at most {@code packBytes} (at least one file each), uploaded through {@code blockIo},
     * committed through {@code mds} by {@code send}, which sends the creates of the files still
     * deferred in the same Raft entry first.
     */
    PackWriter(MdsClient mds, BlockIo blockIo, int packBytes, BiFunction<List<Long>, MdsRequest, MdsResponse> send) {
        this.mds = mds;
        this.send = send;
        this.blockIo = blockIo;
        this.packBytes = packBytes;
    }

    /**
     * Writes the first {@code len} bytes of {@code data} (file {@code ino}, stripe 0 on OST
     * {@code ost}) in a pack and commits it with the request {@code commitFor} builds from its
     * packed extent; blocks until that commit was answered. Returns the answer (its own status:
     * the caller handles errnos) and the extent.
     *
     * @throws FsException EIO when the pack's upload failed; the MDS client's errors
     *     when the commit_pack itself failed (every file of the pack gets them)
     */
    Done commit(int ost, long ino, byte[] data, int len, Function<Extent, MdsRequest> commitFor) {
        Pending me = new Pending(data, len, ino, commitFor);
        Lane lane;
        boolean lead;
        synchronized (lanes) {
            lane = lanes.computeIfAbsent(ost, k -> new Lane());
            lane.waiting.add(me);
            lead = !lane.busy;
            if (lead) {
                lane.busy = true;
            }
        }
        while (true) {
            if (lead) {
                writeNext(ost, lane); // takes this file too: it is first in line
            } else {
                try {
                    CompletableFuture.anyOf(me.done, me.turn).join();
                } catch (CompletionException e) {
                    // the pack failed: answered below
                }
            }
            if (me.done.isDone()) {
                try {
                    return me.done.join();
                } catch (CompletionException e) {
                    throw e.getCause() instanceof RuntimeException r ? r : e;
                }
            }
            lead = me.turn.isDone();
        }
    }

    /**
     * Takes the waiting files of {@code lane} (up to a pack's bytes), writes and commits their pack,
     * answers each, then hands the lane to the first file still waiting (or marks it idle).
     */
    private void writeNext(int ost, Lane lane) {
        List<Pending> batch = new ArrayList<>();
        synchronized (lanes) {
            long bytes = 0;
            while (!lane.waiting.isEmpty() && (batch.isEmpty() || bytes + lane.waiting.get(0).len <= packBytes)) {
                Pending p = lane.waiting.remove(0);
                bytes += p.len;
                batch.add(p);
            }
        }
        try {
            write(ost, batch);
        } catch (RuntimeException e) {
            for (Pending p : batch) {
                p.done.completeExceptionally(e);
            }
        } finally {
            synchronized (lanes) {
                if (lane.waiting.isEmpty()) {
                    lane.busy = false;
                } else {
                    lane.waiting.get(0).turn.complete(null); // it writes the next pack
                }
            }
        }
    }

    /** Uploads one pack of {@code batch} and commits it; answers every file of it. */
    private void write(int ost, List<Pending> batch) {
        int total = 0;
        for (Pending p : batch) {
            total += p.len;
        }
        byte[] block = new byte[total];
        List<Extent> extents = new ArrayList<>(batch.size());
        List<MdsRequest> commits = new ArrayList<>(batch.size());
        String key = BlockKeys.newPackKey(batch.get(0).ino);
        int at = 0;
        for (Pending p : batch) {
            System.arraycopy(p.data, 0, block, at, p.len);
            Extent e = Extent.newBuilder().setStripeIndex(0).setOst(ost).setBlockKey(key).setBlockOffset(at).setLength(p.len)
                    .setPacked(true).build();
            extents.add(e);
            commits.add(p.commitFor.apply(e));
            at += p.len;
        }
        try {
            blockIo.write(ost, key, block).join();
        } catch (CompletionException e) {
            throw new FsException(Status.EIO, "upload of pack " + key + " (" + batch.size() + " files) to OST "
                    + ost + " failed: " + GranaryVfs.rootMessage(e));
        }
        List<Long> inos = new ArrayList<>(batch.size());
        for (Pending p : batch) {
            inos.add(p.ino);
        }
        List<MdsResponse> answers = MdsClient.check(send.apply(inos, mds.commitPackRequest(ost, key, total, commits))).getBatchList();
        if (answers.size() != batch.size()) {
            throw new FsException(Status.EIO, "the MDS answered " + answers.size() + " of the " + batch.size()
                    + " commits of pack " + key);
        }
        packs.incrementAndGet();
        files.addAndGet(batch.size());
        for (int i = 0; i < batch.size(); i++) {
            batch.get(i).done.complete(new Done(answers.get(i), extents.get(i)));
        }
    }

    /** Packs written and files committed in them so far (tests, diagnostics). */
    long[] counters() {
        return new long[] {packs.get(), files.get()};
    }
}
