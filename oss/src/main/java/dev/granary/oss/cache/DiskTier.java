package dev.granary.oss.cache;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.HexFormat;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The OSS read cache's second tier: copies of blocks and chunks on a local disk, for datasets
 * larger than the OSS's memory. One file per cached piece, weighed in bytes (Caffeine, W-TinyLFU
 * eviction; an evicted piece's file is deleted).
 *
 * <p>A piece is written after it was fetched from S3, by one background thread (the read that
 * fetched it does not wait; when the disk falls behind, pieces are skipped, never queued without
 * bound). A write goes to a temporary file renamed into place, so a crash never leaves a partial
 * piece under a valid name. Each file carries a CRC32C of its bytes, checked on every read: a piece
 * that fails the check (or cannot be read) is deleted and reported as absent, so the caller fetches
 * it from S3 again; a damaged disk costs GETs, never wrong bytes.
 *
 * <p>A write that fails (a full disk, the folder removed, an I/O error) is logged once and pauses
 * the writes for {@link #WRITE_PAUSE_NS} (30 s); pieces offered meanwhile are skipped, and the next
 * warning says how many. Reads go on. So a full disk costs one line per pause, not one per piece.
 *
 * <p>The folder survives restarts: {@link #open} indexes the pieces already there (their checksums
 * are checked when read). Blocks are immutable, so a piece never goes stale; it is dropped with its
 * block ({@link #invalidate}) or by eviction.
 *
 * <p>File layout: magic {@code GRNC} (4 bytes), flags (4: bit 0 = the piece is the whole block),
 * data length (4), CRC32C of the data (4), then the data. Name: {@code <ost>_<block key as hex>_<chunk>}
 * (chunk -1: the whole block).
 */
public final class DiskTier implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DiskTier.class);
    private static final int MAGIC = 0x47524e43; // "GRNC"
    private static final int HEADER = 16;
    private static final String TMP = ".tmp-";
    /** Pieces waiting to be written at most; more are skipped (a cache may miss). */
    private static final int WRITE_QUEUE = 64;
    /** How long writes pause after one fails, ns. */
    static final long WRITE_PAUSE_NS = TimeUnit.SECONDS.toNanos(30);

    /** A piece read back: its bytes, and whether it is the whole block. */
    public record Piece(byte[] data, boolean whole) {}

    private final Path dir;
    private final long maxBytes;
    private final Cache<String, Integer> index;
    private final ThreadPoolExecutor writer;
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong damaged = new AtomicLong();
    /** Pieces handed to the writer and not yet written (or given up). */
    private final AtomicInteger pending = new AtomicInteger();
    /** Writes that failed (attempts, not pieces skipped during a pause). */
    private final AtomicLong writeFailures = new AtomicLong();
    /** Pieces skipped because writes were paused, since the last warning. */
    private final AtomicLong skippedWhilePaused = new AtomicLong();
    /** System.nanoTime() until which writes are paused (0: not paused). */
    private volatile long pausedUntilNs;

    private DiskTier(Path dir, long maxBytes) {
        this.dir = dir;
        this.maxBytes = maxBytes;
        this.index = Caffeine.newBuilder()
                .maximumWeight(maxBytes)
                .weigher((String name, Integer size) -> size + HEADER)
                .evictionListener((String name, Integer size, RemovalCause cause) -> delete(name))
                .executor(Runnable::run)
                .build();
        this.writer = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS, new ArrayBlockingQueue<>(WRITE_QUEUE), r -> {
            Thread t = new Thread(r, "oss-disk-cache");
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * Opens (creating it if missing) the disk tier in {@code dir}, holding at most {@code maxBytes}
     * (file headers included), and indexes the pieces a previous run left there; leftover temporary
     * files are deleted.
     *
     * @throws IllegalArgumentException when {@code maxBytes} is not positive, or the folder cannot be
     *                                  created or listed (the message names it and why)
     */
    public static DiskTier open(Path dir, long maxBytes) {
        if (maxBytes <= 0) {
            throw new IllegalArgumentException("disk cache size must be > 0 bytes, got " + maxBytes);
        }
        DiskTier t = new DiskTier(dir, maxBytes);
        try {
            Files.createDirectories(dir);
            try (DirectoryStream<Path> files = Files.newDirectoryStream(dir)) {
                for (Path p : files) {
                    String name = p.getFileName().toString();
                    if (name.contains(TMP)) {
                        Files.deleteIfExists(p);
                    } else if (Files.isRegularFile(p)) {
                        long size = Files.size(p);
                        if (size >= HEADER) {
                            t.index.put(name, Math.toIntExact(size - HEADER));
                        }
                    }
                }
            }
        } catch (IOException e) {
            t.close();
            // no cause: callers report the innermost message, and this one names the setting
            throw new IllegalArgumentException("disk cache folder " + dir + " is not usable: " + reason(e));
        }
        return t;
    }

    /** Whether the piece {@code chunk} (-1: the whole block) of block {@code key} of OST {@code ost} is indexed (not read). */
    public boolean contains(int ost, String key, long chunk) {
        return index.asMap().containsKey(name(ost, key, chunk));
    }

    /**
     * The piece {@code chunk} (-1: the whole block) of block {@code key} of OST {@code ost}, or null
     * when it is not on disk or fails its checksum (then it is deleted). Blocking file read.
     */
    public Piece get(int ost, String key, long chunk) {
        String name = name(ost, key, chunk);
        if (index.getIfPresent(name) == null) {
            return null;
        }
        // the header, then the data straight into the array handed out (no second copy)
        try (FileChannel fc = FileChannel.open(dir.resolve(name), StandardOpenOption.READ)) {
            long size = fc.size();
            ByteBuffer h = ByteBuffer.allocate(HEADER);
            if (size < HEADER || !readFully(fc, h) || h.flip().getInt() != MAGIC) {
                return drop(name, "has no valid header");
            }
            int flags = h.getInt();
            int length = h.getInt();
            int crc = h.getInt();
            byte[] data = new byte[Math.max(0, length)];
            if (length != size - HEADER || !readFully(fc, ByteBuffer.wrap(data))) {
                return drop(name, "is " + (size - HEADER) + " bytes, its header says " + length);
            }
            CRC32C c = new CRC32C();
            c.update(data, 0, length);
            if ((int) c.getValue() != crc) {
                return drop(name, "fails its CRC32C");
            }
            hits.incrementAndGet();
            return new Piece(data, (flags & 1) != 0);
        } catch (NoSuchFileException e) {
            index.invalidate(name);
            return null;
        } catch (IOException e) {
            return drop(name, "cannot be read: " + e.getMessage());
        }
    }

    /** Fills {@code b} from {@code fc}; false when the file ends first. */
    private static boolean readFully(FileChannel fc, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            if (fc.read(b) < 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * Writes a piece in the background (the caller must not modify {@code data} afterwards). Skipped
     * when the writer is {@link #WRITE_QUEUE} pieces behind or the piece alone is larger than the tier.
     */
    public void putAsync(int ost, String key, long chunk, byte[] data, boolean whole) {
        if ((long) data.length + HEADER > maxBytes) {
            return;
        }
        long until = pausedUntilNs;
        if (until != 0 && System.nanoTime() - until < 0) {
            skippedWhilePaused.incrementAndGet(); // a write failed moments ago: do not try again yet
            return;
        }
        String name = name(ost, key, chunk);
        pending.incrementAndGet();
        try {
            writer.execute(() -> {
                try {
                    write(name, data, whole);
                } finally {
                    pending.decrementAndGet();
                }
            });
        } catch (RejectedExecutionException e) {
            pending.decrementAndGet(); // the writer is behind: this piece is not kept
        }
    }

    private void write(String name, byte[] data, boolean whole) {
        CRC32C c = new CRC32C();
        c.update(data, 0, data.length);
        ByteBuffer header = ByteBuffer.allocate(HEADER).putInt(MAGIC).putInt(whole ? 1 : 0).putInt(data.length)
                .putInt((int) c.getValue());
        Path tmp = dir.resolve(name + TMP + Thread.currentThread().threadId());
        try {
            try (var out = Files.newOutputStream(tmp)) {
                out.write(header.array());
                out.write(data);
            }
            Files.move(tmp, dir.resolve(name), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            index.put(name, data.length);
        } catch (IOException e) {
            writeFailures.incrementAndGet();
            pausedUntilNs = System.nanoTime() + WRITE_PAUSE_NS;
            long skipped = skippedWhilePaused.getAndSet(0);
            LOG.warn("disk cache: cannot write {} in {}: {}; disk cache writes paused for {} s{}", name, dir, reason(e),
                    TimeUnit.NANOSECONDS.toSeconds(WRITE_PAUSE_NS),
                    skipped > 0 ? " (" + skipped + " pieces were skipped in the last pause)" : "");
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // the next open deletes leftover temporary files
            }
        }
    }

    /** Writes that failed so far (each pauses the writes; tests and diagnostics). */
    long writeFailures() {
        return writeFailures.get();
    }

    /** Ends a pause of the writes now (tests). */
    void resumeWrites() {
        pausedUntilNs = 0;
    }

    /** Drops the piece {@code chunk} (-1: the whole block) of block {@code key} of OST {@code ost}. */
    public void invalidate(int ost, String key, long chunk) {
        String name = name(ost, key, chunk);
        if (index.getIfPresent(name) != null) {
            index.invalidate(name);
            delete(name);
        }
    }

    /** Drops every piece (files included); pieces being written when it runs may stay. */
    public void invalidateAll() {
        for (String name : index.asMap().keySet()) {
            index.invalidate(name);
            delete(name);
        }
    }

    /** Bytes the tier holds now (data and headers). */
    public long weightedBytes() {
        index.cleanUp();
        return index.policy().eviction().map(e -> e.weightedSize().orElse(0L)).orElse(0L);
    }

    /** Reads answered from disk. */
    public long hits() {
        return hits.get();
    }

    /** Pieces found damaged (header, length or CRC32C) or unreadable, and deleted. */
    public long damaged() {
        return damaged.get();
    }

    /** Waits until the pieces queued so far are written (tests and shutdown), at most {@code timeoutMs}. */
    public void flush(long timeoutMs) {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (pending.get() > 0 && System.nanoTime() < end) {
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Stops the writer after the pieces queued so far (waits up to 10 s); files stay for the next open. */
    @Override
    public void close() {
        writer.shutdown();
        try {
            writer.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private Piece drop(String name, String why) {
        damaged.incrementAndGet();
        LOG.warn("disk cache: {} in {} {}; deleted, the block is read from S3 again", name, dir, why);
        index.invalidate(name);
        delete(name);
        return null;
    }

    private void delete(String name) {
        try {
            Files.deleteIfExists(dir.resolve(name));
        } catch (IOException e) {
            LOG.warn("disk cache: cannot delete {} in {}: {}", name, dir, e.getMessage());
        }
    }

    /** Why a file operation failed, without repeating the path (FileSystemException's reason). */
    private static String reason(IOException e) {
        if (e instanceof FileSystemException f) {
            return f.getReason() != null ? f.getReason() : f.getClass().getSimpleName() + " " + f.getFile();
        }
        return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
    }

    private static String name(int ost, String key, long chunk) {
        return ost + "_" + HexFormat.of().formatHex(key.getBytes(StandardCharsets.UTF_8)) + "_" + chunk;
    }
}
