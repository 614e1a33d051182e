package dev.granary.client.vfs;

import java.time.Duration;

/**
 * Settings of one Granary client (one mount).
 *
 * @param cacheTimeout     how long a cached dentry (parent inode + name → inode) or attribute
 *                         set stays valid, and the kernel's {@code entry_timeout} (the kernel's
 *                         {@code attr_timeout} is 0: it asks this client, which answers from its cache).
 *                         Default 1 s. This is the window in which a change made by another client
 *                         (another node) may stay invisible here, exactly as NFS's {@code actimeo}.
 *                         Local mutations invalidate the caches at once. Data follows close-to-open
 *                         consistency independently of this value.
 * @param readaheadStripes how many stripes beyond the current one a sequential reader keeps in
 *                         flight per open file (default 4; 0 disables readahead)
 * @param maxDirtyBytes    bytes of write buffers all open files of this client may hold together
 *                         (default 256 MiB). A writer that would exceed it blocks until uploads
 *                         free memory (backpressure), it never fails with out-of-memory
 * @param ioThreads        threads used to assemble reads and run read-modify-write uploads (default 8)
 * @param readdirPageSize  entries fetched from the MDS per readdir page (default 1024)
 * @param allowOther       mount with {@code -o allow_other} so uids other than the mounter may use the
 *                         mount (training jobs run as ordinary users while root mounts). Default true;
 *                         applied only when mounting as root or when /etc/fuse.conf has
 *                         {@code user_allow_other}. Granary (the MDS and this client) then checks
 *                         POSIX permissions with each caller's uid/gid
 * @param fuseMaxRead      {@code -o max_read} in bytes (default 1 MiB)
 * @param fuseMaxWrite     {@code -o max_write} in bytes (default 1 MiB; needs {@code big_writes})
 * @param inlineMax        a file whose size at close (or fsync) is at most this many bytes keeps its
 *                         data inline in the MDS (data on MDS, as Lustre's DoM): no S3 PUT when it is
 *                         written, and open returns its bytes, so reading it costs no data round
 *                         trip. Default 256 KiB; 0 disables; at most 1 MiB (the MDS's limit)
 * @param keepCache        keep the kernel page cache of a file across opens while it holds the version
 *                         of the file each open reads from the MDS (close-to-open revalidation; FUSE
 *                         {@code keep_cache}). Default true
 * @param openAfterLookup  an open that follows a lookup of the same small file (at most one stripe)
 *                         within this time uses the attributes and extent map that lookup fetched
 *                         instead of a second MDS read. The kernel sends LOOKUP then OPEN for one
 *                         open(2), as NFS uses the attributes of the LOOKUP done for an open.
 *                         Default 2 ms; 0 disables (every open reads the MDS)
 * @param lockLease        lease of this client's advisory locks (fcntl, flock) in the MDS: renewed
 *                         every third of it while locks are held; when a client dies its locks are
 *                         released this long after its last renewal. Default 15 s; 1 s to 10 min
 * @param stataheadMax     statahead (after Lustre's): when lookups in one directory miss the cache
 *                         twice within {@code cacheTimeout}, the client fetches the directory's entries
 *                         with their attributes in pages (readdir plus) and answers the following
 *                         lookups from its cache, as stat loops and shuffled DataLoaders make them.
 *                         At most this many entries per fetch (default 32768; 0 disables). Cached
 *                         entries follow {@code cacheTimeout} like any other
 * @param deferredUnlink   unlink(2) of a file whose entry and attributes this client has cached
 *                         returns once checked here (permissions, not a directory) and its removal
 *                         is sent to the MDS in the background, batched with the others (as CephFS's
 *                         {@code nowsync}). This client sees the file gone at once; other clients see
 *                         it when the batch commits (milliseconds); an error the MDS answers later
 *                         is logged and returned by the next fsync of the directory, and the entry
 *                         reappears. A crash loses removals not yet sent (fsync of the directory
 *                         waits for them). Another client can still open a removed file that long:
 *                         code that tells another node "deleted" (a barrier after removing an old
 *                         checkpoint) must fsync the directory first. Default false (opt-in)
 * @param deferredCreate   O_CREAT|O_TRUNC opens without O_EXCL answered by this client and sent to the
 *                         MDS with the file's first commit ({@link DeferredCreates}). Default true
 * @param maxReadaheadBytes bytes of read windows (stripes fetched ahead for sequential readers, and
 *                         the stripe each one reads) all open files of this client may hold together
 *                         (default 256 MiB; 0 disables readahead). Readahead that would exceed it is
 *                         not started ({@link ReadaheadBudget}): many readers get shorter windows, the
 *                         client never runs out of memory
 * @param dirLease         directory leases ({@link DirLeases}): a client making or removing files one
 *                         after another in a directory takes its lease, and then answers the creates
 *                         ({@code O_EXCL} ones too) and unlinks there itself and sends them in batches, while the MDS keeps
 *                         other clients out of the directory until the lease is recalled or runs out
 *                         (they wait meanwhile, at most 15 s if this client died). Needs
 *                         {@code deferredCreate}. Default true
 * @param packMax          small-file packing: a file whose size at close (or fsync) is above
 *                         {@code inlineMax} and at most this many bytes (and within stripe 0) is not
 *                         uploaded as a block of its own: the files this client closes together go
 *                         into one block (a pack, at most {@link #PACK_BYTES}) with one S3 PUT, and
 *                         their extents point into it ({@link PackWriter}). Default 0 (off: on this
 *                         machine a file read from a shared pack cost 15-25% more than from its own
 *                         block); 1 MiB halves the PUTs of files above {@code inlineMax}
 * @param stripeFillReads  whole-stripe fills for dense random readers ({@link DenseRandomReads}): the
 *                         random read of a stripe that is this client's {@code stripeFillReads}-th
 *                         (within 60 s of each other) fetches the stripe whole and stores it in the
 *                         kernel's page cache, where the stripe's later reads find it. 0 (default)
 *                         is off: every random read fetches its own range. It pays when random
 *                         readers end up reading most of each stripe (fio's 128 KiB reads of every
 *                         block: 1.6-1.8x the IOPS with 2); it loses when they read part of it (half
 *                         of the blocks: 0.6-0.75x; a quarter: 0.3x), as the bytes not read cost
 *                         S3 and this client as much as those read
 * @param fuseBinding      how the mount talks to the kernel ({@link FuseBinding}): default
 *                         {@link FuseBinding#AUTO}, Granary's own /dev/fuse binding when running as
 *                         root, jnr-fuse over libfuse2 otherwise
 * @param dataAhead        data-ahead ({@link DataAhead}): once statahead read a directory and files
 *                         of it are being opened, the maps of its small files (inline bytes) are
 *                         fetched in bulk ahead of the opens, which then revalidate them with the
 *                         MDS without reading them again; held maps take at most half of
 *                         {@code maxReadaheadBytes}. Needs statahead, readahead and inline data on.
 *                         Default true
 */
public record ClientConfig(Duration cacheTimeout, int readaheadStripes, long maxDirtyBytes, int ioThreads,
                           int readdirPageSize, boolean allowOther, int fuseMaxRead, int fuseMaxWrite,
                           int inlineMax, boolean keepCache, Duration openAfterLookup, Duration lockLease,
                           int stataheadMax, boolean deferredUnlink, boolean deferredCreate, long maxReadaheadBytes,
                           boolean dirLease, int packMax, int stripeFillReads, FuseBinding fuseBinding, boolean dataAhead) {
    /** 1 MiB in bytes. */
    public static final int MIB = 1 << 20;

    /** Validates every field: IllegalArgumentException with a one-line message on bad values. */
    public ClientConfig {
        if (cacheTimeout == null || cacheTimeout.isNegative()) {
            throw new IllegalArgumentException("cacheTimeout must be >= 0, got " + cacheTimeout);
        }
        if (readaheadStripes < 0 || readaheadStripes > 256) {
            throw new IllegalArgumentException("readaheadStripes must be in [0, 256], got " + readaheadStripes);
        }
        if (maxDirtyBytes < 1) {
            throw new IllegalArgumentException("maxDirtyBytes must be >= 1 byte, got " + maxDirtyBytes);
        }
        if (ioThreads < 1 || ioThreads > 1024) {
            throw new IllegalArgumentException("ioThreads must be in [1, 1024], got " + ioThreads);
        }
        if (readdirPageSize < 1 || readdirPageSize > 100_000) {
            throw new IllegalArgumentException("readdirPageSize must be in [1, 100000], got " + readdirPageSize);
        }
        if (fuseMaxRead < 4096 || fuseMaxWrite < 4096) {
            throw new IllegalArgumentException("fuseMaxRead/fuseMaxWrite must be >= 4096 bytes");
        }
        if (openAfterLookup == null || openAfterLookup.isNegative() || openAfterLookup.compareTo(Duration.ofSeconds(1)) > 0) {
            throw new IllegalArgumentException("openAfterLookup must be in [0, 1 s], got " + openAfterLookup);
        }
        if (lockLease == null || lockLease.compareTo(Duration.ofSeconds(1)) < 0 || lockLease.compareTo(Duration.ofMinutes(10)) > 0) {
            throw new IllegalArgumentException("lockLease must be in [1 s, 10 min], got " + lockLease);
        }
        if (stataheadMax < 0 || stataheadMax > 1_000_000) {
            throw new IllegalArgumentException("stataheadMax must be in [0, 1000000] entries, got " + stataheadMax);
        }
        if (maxReadaheadBytes < 0) {
            throw new IllegalArgumentException("maxReadaheadBytes must be >= 0, got " + maxReadaheadBytes);
        }
        if (inlineMax < 0 || inlineMax > MIB) {
            throw new IllegalArgumentException("inlineMax must be in [0, 1 MiB], got " + inlineMax);
        }
        if (packMax < 0 || packMax > PACK_BYTES) {
            throw new IllegalArgumentException("packMax must be in [0, " + PACK_BYTES + "] bytes, got " + packMax);
        }
        if (stripeFillReads < 0 || stripeFillReads == 1 || stripeFillReads > 1024) {
            throw new IllegalArgumentException("stripeFillReads must be 0 (off) or in [2, 1024], got " + stripeFillReads);
        }
    }

    /** Largest pack (one block of small files closed together), bytes. */
    public static final int PACK_BYTES = 4 * MIB;

    /**
     * How a mount talks to the kernel's FUSE driver. Both serve the same {@code GranaryFuse}
     * callbacks with the same answers (docs/SEMANTICS.md); they differ in cost per request and in
     * who may mount.
     */
    public enum FuseBinding {
        /** {@link #DIRECT} when the process runs as root (it mounts with mount(2)), else {@link #JNR}. */
        AUTO,
        /**
         * Granary's binding ({@code client/fuse/kernel}): the FUSE kernel protocol read from and
         * written to /dev/fuse by Java threads, no libfuse; needs root. On this machine a no-op
         * filesystem stats 1.3-1.8x and reads 1.3-1.5x faster through it than through jnr-fuse.
         */
        DIRECT,
        /** jnr-fuse over libfuse2's path API (fusermount, so any user may mount). */
        JNR;

        /** The binding named by {@code s} ("auto", "direct", "jnr"; case-insensitive), or null. */
        public static FuseBinding parse(String s) {
            for (FuseBinding b : values()) {
                if (b.name().equalsIgnoreCase(s == null ? "" : s.trim())) {
                    return b;
                }
            }
            return null;
        }
    }

    /** A copy with another FUSE binding. */
    public ClientConfig withFuseBinding(FuseBinding b) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, b, dataAhead);
    }

    /** The same with data-ahead on or off ({@link DataAhead}). */
    public ClientConfig withDataAhead(boolean b) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, b);
    }

    /** A copy with another packing threshold (bytes; 0 disables packing). */
    public ClientConfig withPackMax(int n) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, n, stripeFillReads, fuseBinding, dataAhead);
    }

    /**
     * The defaults: 1 s caches, 4 readahead stripes, 256 MiB dirty, 8 io threads, 1024-entry pages,
     * allow_other, 1 MiB FUSE I/O, files up to 256 KiB inline, kernel page cache kept across opens,
     * statahead of up to 32768 entries, unlinks committed before they return, O_TRUNC creates deferred, 256 MiB of read windows,
     * directory leases, no packing, no whole-stripe fills, the FUSE binding chosen by who runs it.
     */
    public static ClientConfig defaults() {
        return new ClientConfig(Duration.ofSeconds(1), 4, 256L * MIB, 8, 1024, true, MIB, MIB, 256 << 10, true, Duration.ofMillis(2), Duration.ofSeconds(15), 32768, false, true, 256L * MIB, true, 0, 0, FuseBinding.AUTO, true);
    }

    /** A copy with another cache timeout. */
    public ClientConfig withCacheTimeout(Duration d) {
        return new ClientConfig(d, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another readahead window (stripes). */
    public ClientConfig withReadaheadStripes(int n) {
        return new ClientConfig(cacheTimeout, n, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another dirty-memory limit (bytes). */
    public ClientConfig withMaxDirtyBytes(long n) {
        return new ClientConfig(cacheTimeout, readaheadStripes, n, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another readdir page size (entries). */
    public ClientConfig withReaddirPageSize(int n) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, n, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with allow_other set. */
    public ClientConfig withAllowOther(boolean b) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, b, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another inline-data threshold (bytes; 0 disables). */
    public ClientConfig withInlineMax(int n) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, n, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with keep_cache on or off. */
    public ClientConfig withKeepCache(boolean b) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, b, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another open-after-lookup window (0 disables). */
    public ClientConfig withOpenAfterLookup(Duration d) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, d, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another lock lease. */
    public ClientConfig withLockLease(Duration d) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, d, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another statahead limit (entries per directory fetch; 0 disables). */
    public ClientConfig withStataheadMax(int n) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, n, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with deferred creates on or off. */
    public ClientConfig withDeferredCreate(boolean b) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, b, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with deferred unlinks on or off. */
    public ClientConfig withDeferredUnlink(boolean b) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, b, deferredCreate, maxReadaheadBytes, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with directory leases on or off. */
    public ClientConfig withDirLease(boolean b) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, b, packMax, stripeFillReads, fuseBinding, dataAhead);
    }

    /** A copy with another whole-stripe fill threshold (random reads of a stripe; 0 disables it). */
    public ClientConfig withStripeFillReads(int n) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, maxReadaheadBytes, dirLease, packMax, n, fuseBinding, dataAhead);
    }

    /** A copy with another read-window budget (bytes; 0 disables readahead). */
    public ClientConfig withMaxReadaheadBytes(long n) {
        return new ClientConfig(cacheTimeout, readaheadStripes, maxDirtyBytes, ioThreads, readdirPageSize, allowOther, fuseMaxRead, fuseMaxWrite, inlineMax, keepCache, openAfterLookup, lockLease, stataheadMax, deferredUnlink, deferredCreate, n, dirLease, packMax, stripeFillReads, fuseBinding, dataAhead);
    }
}
