package dev.granary.client.fuse.kernel;

/**
 * A filesystem served on the FUSE kernel protocol by node id (libfuse's "low-level" shape, without
 * libfuse): each method serves one request. It returns 0 after appending its reply's payload to
 * {@code reply} (nothing for an empty reply), or a negative errno (then nothing it appended is
 * sent). Methods run on the session's threads, several at once. Every method not overridden
 * answers ENOSYS, which the kernel remembers for most opcodes.
 */
public interface LowLevelFs {
    /**
     * The INIT flags to ask for, among those the kernel offers ({@code kernelFlags},
     * {@link FuseKernel#ASYNC_READ} ...).
     */
    default int initFlags(int kernelFlags) {
        return kernelFlags & (FuseKernel.ASYNC_READ | FuseKernel.BIG_WRITES | FuseKernel.PARALLEL_DIROPS | FuseKernel.MAX_PAGES);
    }

    /**
     * The second word of INIT flags to ask for (linux/fuse.h's flags2, with FUSE_INIT_EXT) among
     * those the kernel offers; called only when it offers the word.
     */
    default int initFlags2(int kernelFlags2) {
        return 0;
    }

    /** LOOKUP of {@code name} in directory {@code parent}: an {@link FuseReply#entry} and its attr, or -ENOENT. */
    default int lookup(FuseRequest req, long parent, String name, FuseReply reply) {
        return -FuseKernel.ENOSYS;
    }

    /** FORGET: the kernel dropped {@code nlookup} of its references to {@code nodeid} (no reply). */
    default void forget(long nodeid, long nlookup) {}

    /** GETATTR of {@code nodeid} ({@code fh} when the kernel passed an open handle, else -1): {@link FuseReply#attrOut} and attr. */
    default int getattr(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        return -FuseKernel.ENOSYS;
    }

    /** OPEN of {@code nodeid} with open(2)'s {@code flags}: {@link FuseReply#open}. */
    default int open(FuseRequest req, long nodeid, int flags, FuseReply reply) {
        return -FuseKernel.ENOSYS;
    }

    /** READ of at most {@code size} bytes at {@code offset}: the bytes (fewer only at the end of the file). */
    default int read(FuseRequest req, long nodeid, long fh, long offset, int size, FuseReply reply) {
        return -FuseKernel.ENOSYS;
    }

    /** FLUSH (each close(2) of a descriptor of the handle). */
    default int flush(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        return 0;
    }

    /** RELEASE: the handle's last descriptor closed. */
    default int release(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        return 0;
    }

    /** OPENDIR: {@link FuseReply#open}. */
    default int opendir(FuseRequest req, long nodeid, int flags, FuseReply reply) {
        return -FuseKernel.ENOSYS;
    }

    /** READDIR from {@code offset} (0, or an entry's next offset): {@link FuseReply#dirent}s within {@code size} bytes. */
    default int readdir(FuseRequest req, long nodeid, long fh, long offset, int size, FuseReply reply) {
        return -FuseKernel.ENOSYS;
    }

    /** RELEASEDIR. */
    default int releasedir(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        return 0;
    }

    /**
     * Any other request (SETATTR, MKDIR, WRITE, ...): the file system reads its arguments from
     * {@code req} (linux/fuse.h's structs, after the in header) itself. ENOSYS unless overridden.
     */
    default int other(FuseRequest req, FuseReply reply) {
        return -FuseKernel.ENOSYS;
    }

    /**
     * INTERRUPT of request {@code unique} (the caller got a signal): a request still waiting may
     * end early with EINTR. The default lets every request run to its end.
     */
    default void interrupt(long unique) {
    }

    /** STATFS: {@code struct fuse_kstatfs} (80 bytes). */
    default int statfs(FuseRequest req, long nodeid, FuseReply reply) {
        for (int i = 0; i < FuseKernel.STATFS_OUT_BYTES / 8; i++) {
            reply.putLong(0);
        }
        return 0;
    }
}
