package dev.granary.oss.server;

import com.google.protobuf.UnsafeByteOperations;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.ObjectStoreException;
import dev.granary.objbacker.RequestCounters;
import dev.granary.oss.OssConfig;
import dev.granary.oss.cache.BlockCache;
import dev.granary.oss.cache.DiskTier;
import dev.granary.oss.proto.DeleteBlocksReply;
import dev.granary.oss.proto.DeleteBlocksRequest;
import dev.granary.oss.proto.DropCacheReply;
import dev.granary.oss.proto.DropCacheRequest;
import dev.granary.oss.proto.LocateBlockReply;
import dev.granary.oss.proto.LocateBlockRequest;
import dev.granary.oss.proto.ObjectStorageServiceGrpc;
import dev.granary.oss.proto.OssStatusReply;
import dev.granary.oss.proto.OssStatusRequest;
import dev.granary.oss.proto.ReadBlockReply;
import dev.granary.oss.proto.ReadBlockRequest;
import dev.granary.oss.proto.SignPutReply;
import dev.granary.oss.proto.SignPutRequest;
import dev.granary.oss.proto.WriteBlockReply;
import dev.granary.oss.proto.WriteBlockRequest;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The OSS: a gRPC server ({@code ObjectStorageService} of oss.proto, Netty transport) that reads
 * and writes blocks of the OSTs it serves, through their {@link ObjectStore}s and a shared
 * {@link BlockCache}. It keeps nothing durable; any OSS can serve any OST.
 *
 * <p>A read served from the cache is answered on the transport thread. Handlers hand every other call to a bounded thread pool ({@link OssConfig#executorThreads()}
 * threads, queue of 4096 calls) so that blocking S3 calls never run on a Netty event loop; a full
 * queue answers RESOURCE_EXHAUSTED.
 *
 * <p>Status codes: unknown OST, empty key, bad range → INVALID_ARGUMENT; missing block →
 * NOT_FOUND; S3 access denied → PERMISSION_DENIED; missing bucket → FAILED_PRECONDITION; S3
 * unreachable → UNAVAILABLE; other S3 failures → INTERNAL. Each with a one-line message naming the
 * OST and block.
 */
public final class OssServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(OssServer.class);
    private static final int QUEUE_CAPACITY = 4096;

    private final OssConfig config;
    private final Map<Integer, ObjectStore> osts;
    private final BlockCache cache;
    private final DiskTier disk;
    private final ThreadPoolExecutor executor;
    private final Server server;

    private OssServer(OssConfig config, Map<Integer, ObjectStore> osts) {
        this.config = config;
        this.osts = Map.copyOf(osts);
        this.disk = config.diskCacheDir() == null ? null : DiskTier.open(config.diskCacheDir(), config.diskCacheMaxBytes());
        this.cache = new BlockCache(config.cacheMaxBytes(), config.maxCachedBlockBytes(), BlockCache.DEFAULT_CHUNK_BYTES, disk);
        AtomicInteger n = new AtomicInteger();
        this.executor = new ThreadPoolExecutor(config.executorThreads(), config.executorThreads(), 60, TimeUnit.SECONDS,
                new ArrayBlockingQueue<>(QUEUE_CAPACITY), r -> {
                    Thread t = new Thread(r, "oss-io-" + n.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        this.executor.allowCoreThreadTimeOut(true);
        this.server = NettyServerBuilder.forAddress(new InetSocketAddress(config.host(), config.port()))
                .maxInboundMessageSize(config.maxMessageBytes())
                .flowControlWindow(OssConfig.FLOW_CONTROL_WINDOW)
                .directExecutor()
                .addService(new Service())
                .build();
    }

    /**
     * Starts an OSS serving {@code osts} (OST index → its store) on {@code config.host():port}.
     * The stores stay owned by the caller ({@link #close()} does not close them).
     *
     * @throws IllegalArgumentException on an empty OST map or a negative OST index
     * @throws UncheckedIOException     when the port cannot be bound
     */
    public static OssServer start(OssConfig config, Map<Integer, ObjectStore> osts) {
        if (config == null || osts == null || osts.isEmpty()) {
            throw new IllegalArgumentException("an OSS needs a config and at least one OST");
        }
        for (Integer ost : osts.keySet()) {
            if (ost == null || ost < 0) {
                throw new IllegalArgumentException("OST index must be >= 0, got " + ost);
            }
        }
        OssServer s = new OssServer(config, osts);
        try {
            s.server.start();
        } catch (IOException e) {
            s.executor.shutdownNow();
            if (s.disk != null) {
                s.disk.close();
            }
            throw new UncheckedIOException("OSS cannot listen on " + config.host() + ":" + config.port() + ": " + e.getMessage(), e);
        }
        LOG.info("OSS serving OSTs {} on {}:{}", new TreeMap<>(s.osts).keySet(), config.host(), s.port());
        return s;
    }

    /** The bound TCP port (the chosen one when the config said 0). */
    public int port() {
        return server.getPort();
    }

    /** {@code host:port} clients use to reach this OSS. */
    public String address() {
        return config.host() + ":" + port();
    }

    /** The shared read cache. */
    public BlockCache cache() {
        return cache;
    }

    /** S3 GETs issued by all OST stores of this OSS so far. */
    public long s3Gets() {
        return osts.values().stream().map(ObjectStore::counters).mapToLong(c -> c.gets.get()).sum();
    }

    /** S3 PUTs (single or multipart) issued by all OST stores of this OSS so far. */
    public long s3Puts() {
        return osts.values().stream().map(ObjectStore::counters).mapToLong((RequestCounters c) -> c.puts.get()).sum();
    }

    /**
     * Stops accepting calls, waits up to 5 s for running ones, then stops the executor and the disk
     * tier's writer (after the pieces it has queued).
     */
    @Override
    public void close() {
        server.shutdown();
        try {
            if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
                server.shutdownNow();
                server.awaitTermination(2, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            server.shutdownNow();
            Thread.currentThread().interrupt();
        }
        executor.shutdownNow();
        if (disk != null) {
            disk.close();
        }
    }

    private ObjectStore store(int ost) {
        ObjectStore store = osts.get(ost);
        if (store == null) {
            throw Status.INVALID_ARGUMENT
                    .withDescription("OST " + ost + " is not served by this OSS (it serves " + new TreeMap<>(osts).keySet() + ")")
                    .asRuntimeException();
        }
        return store;
    }

    private static void checkKey(int ost, String key) {
        if (key.isEmpty()) {
            throw Status.INVALID_ARGUMENT.withDescription("empty block key for OST " + ost).asRuntimeException();
        }
    }

    /** Runs {@code work} on the bounded executor and answers {@code out} with its result or a status. */
    private <T> void submit(StreamObserver<T> out, String what, Callable<T> work) {
        try {
            executor.execute(() -> {
                T reply;
                try {
                    reply = work.call();
                } catch (StatusRuntimeException e) {
                    out.onError(e);
                    return;
                } catch (ObjectStoreException e) {
                    out.onError(toStatus(e, what).asRuntimeException());
                    return;
                } catch (Throwable e) {
                    LOG.warn("{} failed", what, e);
                    out.onError(Status.INTERNAL.withDescription(what + ": " + e).asRuntimeException());
                    return;
                }
                out.onNext(reply);
                out.onCompleted();
            });
        } catch (RejectedExecutionException e) {
            out.onError(Status.RESOURCE_EXHAUSTED.withDescription("OSS busy: " + QUEUE_CAPACITY + " calls queued; " + what)
                    .asRuntimeException());
        }
    }

    /** Maps an object store failure kind to a gRPC status. */
    static Status toStatus(ObjectStoreException e, String what) {
        Status s = switch (e.kind()) {
            case NOT_FOUND -> Status.NOT_FOUND;
            case ACCESS_DENIED -> Status.PERMISSION_DENIED;
            case NO_SUCH_BUCKET -> Status.FAILED_PRECONDITION;
            case UNREACHABLE -> Status.UNAVAILABLE;
            case INVALID -> Status.INVALID_ARGUMENT;
            case OTHER -> Status.INTERNAL;
        };
        return s.withDescription(what + ": " + e.getMessage());
    }

    /** A block of an OST, as remembered by {@link #located}. */
    private record LocatedKey(int ost, String key) {}

    /** How long a block whose URL this OSS handed out counts as being read by some client. */
    static final java.time.Duration LOCATED_FOR = java.time.Duration.ofMinutes(10);

    /**
     * Blocks this OSS signed a URL for within {@link #LOCATED_FOR}, and the client it signed it
     * for (its id in LocateBlock; empty when it sent none): that client reads the block straight
     * from S3, and gets a URL again when it asks again; another client reads it through this OSS,
     * so it lands in the read cache for the rest.
     */
    private final com.github.benmanes.caffeine.cache.Cache<LocatedKey, com.google.protobuf.ByteString> located =
            com.github.benmanes.caffeine.cache.Caffeine.newBuilder().executor(Runnable::run).maximumSize(1_000_000).expireAfterWrite(LOCATED_FOR).build();

    /**
     * Whether {@code client} is the one reading block {@code k} straight from S3: no client was
     * within {@link #LOCATED_FOR} (it is now, from now), or it was this same named client (its
     * window starts over). An anonymous (empty) client is never the same as an earlier ask.
     */
    private boolean locatedBy(LocatedKey k, com.google.protobuf.ByteString client) {
        com.google.protobuf.ByteString prev = located.asMap().putIfAbsent(k, client);
        if (prev == null) {
            return true;
        }
        if (!client.isEmpty() && prev.equals(client)) {
            located.put(k, client); // a write: its window starts over
            return true;
        }
        return false;
    }

    private final class Service extends ObjectStorageServiceGrpc.ObjectStorageServiceImplBase {
        @Override
        public void writeBlock(WriteBlockRequest req, StreamObserver<WriteBlockReply> out) {
            int ost = req.getOst();
            String key = req.getKey();
            submit(out, "write of block " + key + " on OST " + ost, () -> {
                ObjectStore store = store(ost);
                checkKey(ost, key);
                byte[] data = req.getData().toByteArray();
                store.put(key, data);
                cache.put(ost, key, data);
                return WriteBlockReply.newBuilder().setLength(data.length).build();
            });
        }

        @Override
        public void readBlock(ReadBlockRequest req, StreamObserver<ReadBlockReply> out) {
            int ost = req.getOst();
            String key = req.getKey();
            long offset = req.getOffset();
            int length = req.getLength();
            ObjectStore store;
            byte[] hit;
            try {
                store = store(ost);
                checkKey(ost, key);
                if (offset < 0 || length < 0 || length > config.maxMessageBytes() - 1024) {
                    throw Status.INVALID_ARGUMENT.withDescription("bad range offset=" + Long.toUnsignedString(offset)
                            + " length=" + Integer.toUnsignedString(length) + " of block " + key + " on OST " + ost
                            + " (at most " + (config.maxMessageBytes() - 1024) + " bytes per read)").asRuntimeException();
                }
                // A cache hit needs no S3 call: answer on this (transport) thread, without the
                // hand-off to the executor and back.
                hit = cache.readIfCached(ost, key, offset, length, false);
            } catch (StatusRuntimeException e) {
                out.onError(e);
                return;
            }
            if (hit != null) {
                out.onNext(reply(hit));
                out.onCompleted();
                return;
            }
            submit(out, "read of block " + key + " on OST " + ost,
                    () -> reply(cache.readShared(ost, store, key, offset, length)));
        }

        @Override
        public void locateBlock(LocateBlockRequest req, StreamObserver<LocateBlockReply> out) {
            int ost = req.getOst();
            String key = req.getKey();
            try {
                ObjectStore store = store(ost);
                checkKey(ost, key);
                if (cache.holdsWhole(ost, key)) {
                    out.onNext(LocateBlockReply.newBuilder().setCached(true).build());
                } else if (!locatedBy(new LocatedKey(ost, key), req.getClient())) {
                    // another client wants it within LOCATED_FOR: read it through this OSS, which
                    // keeps it in its cache for the others (the shared read cache of a training
                    // cluster whose nodes read the same data)
                    out.onNext(LocateBlockReply.getDefaultInstance());
                } else {
                    String url = store.presignGet(key, urlTtl(req.getTtlSeconds())).toString();
                    out.onNext(LocateBlockReply.newBuilder().setUrl(url).build());
                }
                out.onCompleted();
            } catch (StatusRuntimeException e) {
                out.onError(e);
            } catch (UnsupportedOperationException e) {
                out.onError(Status.UNIMPLEMENTED.withDescription("OST " + ost + ": " + e.getMessage()).asRuntimeException());
            } catch (ObjectStoreException e) {
                out.onError(toStatus(e, "signing a URL of block " + key + " on OST " + ost).asRuntimeException());
            }
        }

        @Override
        public void signPut(SignPutRequest req, StreamObserver<SignPutReply> out) {
            int ost = req.getOst();
            String key = req.getKey();
            try {
                ObjectStore store = store(ost);
                checkKey(ost, key);
                String url;
                try {
                    url = store.presignPut(key, urlTtl(req.getTtlSeconds())).toString();
                } catch (UnsupportedOperationException e) {
                    url = ""; // the client writes through this OSS (WriteBlock)
                }
                out.onNext(SignPutReply.newBuilder().setUrl(url).build());
                out.onCompleted();
            } catch (StatusRuntimeException e) {
                out.onError(e);
            } catch (ObjectStoreException e) {
                out.onError(toStatus(e, "signing a PUT URL of block " + key + " on OST " + ost).asRuntimeException());
            }
        }

        /** The validity of a signed URL a client asked for {@code seconds}: 0 means 15 min; at most 7 days (S3's bound), at least 1 s. */
        private static java.time.Duration urlTtl(int seconds) {
            return java.time.Duration.ofSeconds(Math.max(1, Math.min(seconds == 0 ? 900 : seconds, 7 * 86400)));
        }

        /** The reply carrying {@code data} without a copy (cached arrays are never modified). */
        private static ReadBlockReply reply(byte[] data) {
            return ReadBlockReply.newBuilder().setData(UnsafeByteOperations.unsafeWrap(data)).build();
        }

        @Override
        public void deleteBlocks(DeleteBlocksRequest req, StreamObserver<DeleteBlocksReply> out) {
            int ost = req.getOst();
            submit(out, "delete of " + req.getKeysCount() + " blocks on OST " + ost, () -> {
                ObjectStore store = store(ost);
                for (String key : req.getKeysList()) {
                    checkKey(ost, key);
                }
                for (String key : req.getKeysList()) {
                    cache.invalidate(ost, key);
                }
                store.deleteAll(req.getKeysList()); // one S3 request per 1,000 keys
                for (String key : req.getKeysList()) {
                    cache.invalidate(ost, key); // a read that raced the delete may have cached it again
                }
                return DeleteBlocksReply.newBuilder().setDeleted(req.getKeysCount()).build();
            });
        }

        @Override
        public void dropCache(DropCacheRequest req, StreamObserver<DropCacheReply> out) {
            long dropped = cache.invalidateAll();
            LOG.info("read cache dropped on request: {} bytes", dropped);
            out.onNext(DropCacheReply.newBuilder().setDroppedBytes(dropped).build());
            out.onCompleted();
        }

        @Override
        public void status(OssStatusRequest req, StreamObserver<OssStatusReply> out) {
            cache.cleanUp();
            OssStatusReply.Builder b = OssStatusReply.newBuilder()
                    .addAllOsts(new TreeMap<>(osts).keySet())
                    .setCacheBytes(cache.weightedBytes())
                    .setCacheHits(cache.hits())
                    .setCacheMisses(cache.misses())
                    .setS3Gets(s3Gets())
                    .setS3Puts(s3Puts());
            if (disk != null) {
                b.setDiskCache(true).setDiskCacheBytes(disk.weightedBytes()).setDiskCacheHits(disk.hits());
            }
            out.onNext(b.build());
            out.onCompleted();
        }
    }
}
