package dev.granary.mds.client;

import dev.granary.mds.FsException;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Status;

/**
 * ENOENT from a lookup of an absent name in an existing directory, with that directory's
 * attributes from the same read: a client that creates the name next (a deferred create) takes
 * the directory's layout, owner and mode from them rather than from a cache another client's
 * {@code setstripe} or {@code chmod} may have outdated.
 */
public final class NoEntryException extends FsException {
    private final Attr parent;

    /** ENOENT with {@code message}; {@code parent} is the directory's attributes. */
    public NoEntryException(String message, Attr parent) {
        super(Status.ENOENT, message);
        this.parent = parent;
    }

    /** The directory's attributes as the lookup read them. */
    public Attr parent() {
        return parent;
    }
}
