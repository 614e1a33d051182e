package dev.granary.client.fuse.kernel;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The kernel's nodes as paths, for serving a path-based filesystem on the node-id protocol: the
 * table libfuse2's path API keeps (fuse.c: {@code struct node}, its id and name hash tables,
 * {@code lookup_node}, {@code forget_node}, {@code remove_node}, {@code rename_node},
 * {@code get_path}). A node is made by the first LOOKUP (or create) that answers a name and
 * counts the kernel's references ({@code nlookup}); FORGET drops them, and the node goes once
 * none is left. An unlinked node keeps its id (the kernel may still send requests for it, for
 * open files) but has no path. Node ids start at 2 (1 is the root) and are never reused within
 * a generation. Thread-safe: one lock, held for table updates and path building only.
 */
public final class PathNodes {
    /** The root's node id (FUSE_ROOT_ID). */
    public static final long ROOT = 1;

    private static final class Node {
        final long id;
        Node parent;
        String name; // null once unlinked
        long nlookup;
        int openCount;
        boolean hidden;

        Node(long id, Node parent, String name) {
            this.id = id;
            this.parent = parent;
            this.name = name;
        }
    }

    private record Key(long parent, String name) {}

    private final Map<Long, Node> byId = new HashMap<>();
    private final Map<Key, Node> byName = new HashMap<>();
    private long nextId = ROOT + 1;

    public PathNodes() {
        Node root = new Node(ROOT, null, "");
        root.nlookup = 1; // never forgotten
        byId.put(ROOT, root);
    }

    /**
     * The node of {@code name} in directory node {@code parent}, made when missing, with one more
     * kernel reference (a LOOKUP, MKNOD, MKDIR, SYMLINK, LINK or CREATE reply about to be sent).
     *
     * @return its node id
     * @throws IllegalArgumentException when {@code parent} is not a known node (ENOENT for the caller)
     */
    public synchronized long lookup(long parent, String name) {
        Node p = byId.get(parent);
        if (p == null) {
            throw new IllegalArgumentException("no node " + parent);
        }
        Key k = new Key(parent, name);
        Node n = byName.get(k);
        if (n == null) {
            n = new Node(nextId++, p, name);
            byId.put(n.id, n);
            byName.put(k, n);
        }
        n.nlookup++;
        return n.id;
    }

    /**
     * FORGET: the kernel dropped {@code count} references to {@code nodeid}; the node goes (its
     * name too, if it still has one) when none is left. Unknown ids are ignored.
     */
    public synchronized void forget(long nodeid, long count) {
        Node n = byId.get(nodeid);
        if (n == null || nodeid == ROOT) {
            return;
        }
        n.nlookup -= Math.min(count, n.nlookup);
        if (n.nlookup == 0) {
            byId.remove(nodeid);
            if (n.name != null) {
                byName.remove(new Key(n.parent.id, n.name), n);
            }
        }
    }

    /**
     * The path of {@code nodeid} from the root ("/" for the root, "/a/b" below it), or null when
     * the node is unknown or it, or a directory above it, was unlinked.
     */
    public synchronized String path(long nodeid) {
        Node n = byId.get(nodeid);
        return n == null ? null : pathLocked(n);
    }

    private String pathLocked(Node n) {
        if (n.id == ROOT) {
            return "/";
        }
        List<String> names = new ArrayList<>();
        for (Node x = n; x.id != ROOT; x = x.parent) {
            if (x.name == null || x.parent == null) {
                return null;
            }
            names.add(x.name);
        }
        StringBuilder b = new StringBuilder();
        for (int i = names.size() - 1; i >= 0; i--) {
            b.append('/').append(names.get(i));
        }
        return b.toString();
    }

    /** The path of {@code name} in directory node {@code parent}, or null as {@link #path}. */
    public String childPath(long parent, String name) {
        String p = path(parent);
        return p == null ? null : p.equals("/") ? "/" + name : p + "/" + name;
    }

    /**
     * UNLINK or RMDIR of {@code name} in {@code parent} succeeded: the node it named keeps its id
     * but has no path any more.
     */
    public synchronized void removed(long parent, String name) {
        Node n = byName.remove(new Key(parent, name));
        if (n != null) {
            n.name = null;
        }
    }

    /**
     * RENAME of {@code oldName} in {@code oldParent} to {@code newName} in {@code newParent}
     * succeeded: a node the new name held is unlinked, and the moved node (if the table holds
     * it) takes the new name, so the paths of everything below it follow.
     */
    public synchronized void renamed(long oldParent, String oldName, long newParent, String newName) {
        if (oldParent == newParent && oldName.equals(newName)) {
            return; // rename(2) of a name onto itself changes nothing
        }
        Node moved = byName.remove(new Key(oldParent, oldName));
        Node replaced = byName.remove(new Key(newParent, newName));
        if (replaced != null && replaced != moved) {
            replaced.name = null;
        }
        Node np = byId.get(newParent);
        if (moved != null && np != null) {
            moved.parent = np;
            moved.name = newName;
            byName.put(new Key(newParent, newName), moved);
        } else if (moved != null) {
            moved.name = null;
        }
    }

    /** An OPEN or CREATE of {@code nodeid} succeeded (libfuse2 counts a node's open handles). */
    public synchronized void opened(long nodeid) {
        Node n = byId.get(nodeid);
        if (n != null) {
            n.openCount++;
        }
    }

    /**
     * A RELEASE of {@code nodeid} was served; returns the node's path when that was its last open
     * handle and the node is hidden (its hidden name is then to be removed, as fuse.c's
     * {@code fuse_do_release}), else null.
     */
    public synchronized String released(long nodeid) {
        Node n = byId.get(nodeid);
        if (n == null) {
            return null;
        }
        n.openCount = Math.max(0, n.openCount - 1);
        if (n.openCount == 0 && n.hidden) {
            n.hidden = false;
            return pathLocked(n);
        }
        return null;
    }

    /** Whether the node named {@code name} in {@code parent} has open handles (fuse.c's {@code is_open}). */
    public synchronized boolean isOpen(long parent, String name) {
        Node n = byName.get(new Key(parent, name));
        return n != null && n.openCount > 0;
    }

    /** The node id of {@code name} in {@code parent}, or -1 when the table holds no such name. */
    public synchronized long find(long parent, String name) {
        Node n = byName.get(new Key(parent, name));
        return n == null ? -1 : n.id;
    }

    /**
     * {@code name} in {@code parent} was renamed to {@code hiddenName} in the same directory
     * because it was open (fuse.c's {@code hide_node}): the node takes the hidden name and is
     * marked hidden, so its last RELEASE removes it ({@link #released}).
     */
    public void hidden(long parent, String name, String hiddenName) {
        synchronized (this) {
            renamed(parent, name, parent, hiddenName);
            Node n = byName.get(new Key(parent, hiddenName));
            if (n != null) {
                n.hidden = true;
            }
        }
    }

    /** Nodes known besides the root (diagnostics, tests). */
    public synchronized int size() {
        return byId.size() - 1;
    }
}
