package dev.granary.raft;

/** Ascending iterator over one column family. Not thread-safe; close it when done. */
public interface KvIterator extends AutoCloseable {
    /** True while positioned on an entry. */
    boolean valid();

    /** Key of the current entry; only while {@link #valid()}. */
    byte[] key();

    /** Value of the current entry; only while {@link #valid()}. */
    byte[] value();

    /** Moves to the next entry. */
    void next();

    @Override
    void close();
}
