package dev.granary.client.fuse;

import java.util.HashMap;
import java.util.Map;

/**
 * Gives the kernel one node per file version behind a name, where libfuse2's path API gives it
 * one node per name. libfuse2 keeps a node for each name it has answered a lookup of, and
 * answers every later lookup of that name with the same node id, whichever file the name holds
 * by then. When another client replaces the file behind a name (write a temporary file, rename it
 * over the name), this client's kernel therefore kept one inode for both files: one size and one
 * page cache. A descriptor opened on the old file then read at most the new file's size (a short
 * read) or the new file's cached pages, and {@code fstat} showed the other file's size (measured:
 * 11 short reads and 9 wrong sizes in 10,543 reads while another client replaced the file 419
 * times).
 *
 * <p>Here each reply that hands the kernel a node, of any file type (LOOKUP, CREATE, MKNOD,
 * LINK), goes through {@link #onEntry}: while the libfuse node holds the
 * inode it held before, the kernel gets the node id it already has; when it holds another inode
 * (of the same type or not: Linux marks an inode whose node id comes back with another type bad,
 * and every descriptor on it fails with EIO), the kernel gets a new node id (a <em>virtual</em>
 * one, from {@link #FIRST_VIRTUAL} up), so it makes a new inode and keeps the old one, with its
 * size and pages, for the descriptors still open on the old file. Requests
 * the kernel sends on a virtual node go to libfuse under the libfuse node's id
 * ({@link #toLibfuse}); FORGETs are counted ({@link #forget}) so that an entry lives exactly as
 * long as the kernel holds the node (each entry reply is one lookup; the kernel forgets them,
 * linux/fuse.h). libfuse counts the lookups of its node as the sum over the kernel's nodes, as
 * before.
 *
 * <p>Thread-safe. Node ids are the kernel's (u64); inode numbers are Granary's (the mount uses
 * {@code use_ino}, so replies carry them).
 */
final class NodeVersions {
    /**
     * The first virtual node id. libfuse 2.9 numbers its nodes below 2^32 (fuse.c, next_id), so
     * ids from 2^48 up never meet one of libfuse's.
     */
    static final long FIRST_VIRTUAL = 1L << 48;

    /** A node the kernel holds: the libfuse node it stands for, the inode it showed, its lookups. */
    private static final class Held {
        final long libfuseNode;
        final long ino;
        long lookups;

        Held(long libfuseNode, long ino) {
            this.libfuseNode = libfuseNode;
            this.ino = ino;
        }
    }

    /** Kernel node id -> what it stands for (every node an entry reply handed out, any file type). */
    private final Map<Long, Held> held = new HashMap<>();
    /** libfuse node id -> the kernel node id showing the file it holds now. */
    private final Map<Long, Long> current = new HashMap<>();
    private long nextVirtual = FIRST_VIRTUAL;

    /**
     * Records an entry reply handing the kernel libfuse's node {@code libfuseNode} holding the
     * file {@code ino} (of any type), and returns the node id to send instead: {@code libfuseNode}
     * itself, the kernel node already showing {@code ino} for it, or a new virtual id when the
     * name now holds another file than the kernel has for it.
     */
    synchronized long onEntry(long libfuseNode, long ino) {
        Long shown = current.get(libfuseNode);
        if (shown == null && !held.containsKey(libfuseNode)) {
            shown = libfuseNode; // first sight: the kernel gets libfuse's own id
            held.put(libfuseNode, new Held(libfuseNode, ino));
        } else if (shown == null) {
            shown = libfuseNode; // only old lookups of this very id remain; is it the same file?
        }
        Held h = held.get(shown);
        if (h == null || h.ino != ino) {
            shown = nextVirtual++;
            h = new Held(libfuseNode, ino);
            held.put(shown, h);
        }
        h.lookups++;
        current.put(libfuseNode, shown);
        return shown;
    }

    /**
     * The libfuse node id for a node id the kernel sent: itself below {@link #FIRST_VIRTUAL};
     * for a virtual one, the libfuse node it stands for, or -1 when unknown (it was forgotten:
     * the kernel never sends that).
     */
    long toLibfuse(long kernelNode) {
        if (kernelNode < FIRST_VIRTUAL) {
            return kernelNode;
        }
        synchronized (this) {
            Held h = held.get(kernelNode);
            return h == null ? -1 : h.libfuseNode;
        }
    }

    /** The inode the kernel node shows, or -1 when it is not a tracked node. */
    synchronized long inoOf(long kernelNode) {
        Held h = held.get(kernelNode);
        return h == null ? -1 : h.ino;
    }

    /**
     * The kernel nodes that show inode {@code ino}: one per name of it the kernel holds (libfuse2
     * gives each name its own node), and the nodes kept for descriptors of it. A scan of every
     * tracked node, for the rare calls that change a file's link count through one of several
     * names.
     */
    synchronized long[] nodesShowing(long ino) {
        return held.entrySet().stream().filter(e -> e.getValue().ino == ino).mapToLong(Map.Entry::getKey).toArray();
    }

    /**
     * The kernel forgot {@code lookups} lookups of {@code kernelNode} (FORGET, BATCH_FORGET);
     * returns the libfuse node id to forward them to (as {@link #toLibfuse}).
     */
    synchronized long forget(long kernelNode, long lookups) {
        Held h = held.get(kernelNode);
        if (h == null) {
            return kernelNode < FIRST_VIRTUAL ? kernelNode : -1;
        }
        h.lookups -= lookups;
        if (h.lookups <= 0) {
            held.remove(kernelNode);
            current.remove(h.libfuseNode, kernelNode);
        }
        return h.libfuseNode;
    }

    /** Kernel nodes tracked (tests, diagnostics). */
    synchronized int size() {
        return held.size();
    }
}
