package dev.granary.oss;

import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.ObjectStoreException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.function.Supplier;

/**
 * {@link BlockIo} straight over the OSTs' {@link ObjectStore}s (no gRPC, no cache): each call
 * runs on {@code executor}. For tests of code above BlockIo against real S3, and for tools that
 * hold the bucket credentials themselves.
 *
 * <p>Failures complete exceptionally with {@link FileNotFoundException} (missing block) or
 * {@link IOException} (unknown OST, S3 failure), the message naming the OST and block. The
 * stores and the executor stay owned by the caller.
 */
public final class DirectBlockIo implements BlockIo {
    private final Map<Integer, ObjectStore> osts;
    private final Executor executor;

    /** @param osts OST index → its store; @param executor runs the blocking S3 calls */
    public DirectBlockIo(Map<Integer, ObjectStore> osts, Executor executor) {
        if (osts == null || executor == null) {
            throw new IllegalArgumentException("DirectBlockIo needs an OST map and an executor");
        }
        this.osts = Map.copyOf(osts);
        this.executor = executor;
    }

    @Override
    public CompletableFuture<Void> write(int ost, String key, byte[] data) {
        return run("write of block " + key + " on OST " + ost, ost, store -> {
            store.put(key, data);
            return null;
        });
    }

    @Override
    public CompletableFuture<byte[]> read(int ost, String key, long offset, int length) {
        return run("read of block " + key + " on OST " + ost, ost, store -> store.get(key, offset, length));
    }

    @Override
    public CompletableFuture<Void> delete(int ost, List<String> keys) {
        return run("delete of " + keys.size() + " blocks on OST " + ost, ost, store -> {
            store.deleteAll(keys);
            return null;
        });
    }

    private interface Op<T> {
        T apply(ObjectStore store) throws IOException;
    }

    private <T> CompletableFuture<T> run(String what, int ost, Op<T> op) {
        Supplier<T> task = () -> {
            ObjectStore store = osts.get(ost);
            try {
                if (store == null) {
                    throw new IOException(what + ": unknown OST " + ost + " (known: " + new java.util.TreeSet<>(osts.keySet()) + ")");
                }
                return op.apply(store);
            } catch (ObjectStoreException e) {
                IOException io = e.kind() == ObjectStoreException.Kind.NOT_FOUND
                        ? new FileNotFoundException(what + ": " + e.getMessage())
                        : new IOException(what + ": " + e.kind() + ": " + e.getMessage());
                io.initCause(e);
                throw new CompletionException(io);
            } catch (IOException e) {
                throw new CompletionException(e);
            }
        };
        return CompletableFuture.supplyAsync(task, executor);
    }

    /** Does nothing: the stores and the executor belong to the caller. */
    @Override
    public void close() {
    }
}
