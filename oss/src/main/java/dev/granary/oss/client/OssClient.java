package dev.granary.oss.client;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import dev.granary.oss.BlockIo;
import dev.granary.oss.OssConfig;
import dev.granary.oss.proto.DeleteBlocksRequest;
import dev.granary.oss.proto.DropCacheReply;
import dev.granary.oss.proto.DropCacheRequest;
import dev.granary.oss.proto.LocateBlockReply;
import dev.granary.oss.proto.LocateBlockRequest;
import dev.granary.oss.proto.ObjectStorageServiceGrpc;
import dev.granary.oss.proto.OssStatusReply;
import dev.granary.oss.proto.OssStatusRequest;
import dev.granary.oss.proto.ReadBlockRequest;
import dev.granary.oss.proto.SignPutReply;
import dev.granary.oss.proto.SignPutRequest;
import dev.granary.oss.proto.WriteBlockRequest;
import io.grpc.Deadline;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link BlockIo} over gRPC to a list of OSSes. OST {@code i} is routed to OSS {@code i % n};
 * when that OSS answers UNAVAILABLE (down, restarting, or its S3 unreachable) the call is retried
 * on the next OSS in the list after a short backoff (50 ms × attempt), at most
 * {@code maxAttempts} times in all, since any OSS can serve any OST. Blocks are immutable and
 * keyed by the writer, so retrying a write is safe.
 *
 * <p>Failures complete the future exceptionally with {@link FileNotFoundException} when the OSS
 * answers NOT_FOUND, else with {@link OssException} (an IOException carrying the gRPC code); the
 * message names the OST, block and OSS address.
 *
 * <p>The futures complete on gRPC's transport thread: a caller must not chain blocking work on
 * them with the synchronous {@code then*} methods (use the {@code *Async} forms with its own executor).
 */
public final class OssClient implements BlockIo {
    private static final Logger LOG = LoggerFactory.getLogger(OssClient.class);
    /** Default attempts per call over all OSSes. */
    public static final int DEFAULT_MAX_ATTEMPTS = 4;
    /** Default deadline of one call (all its attempts together). */
    public static final Duration DEFAULT_DEADLINE = Duration.ofSeconds(120);

    private final int maxMessageBytes;
    private final int maxAttempts;
    private final Duration deadline;
    private final Map<String, ManagedChannel> channels = new HashMap<>();
    private volatile List<String> addresses;
    private final ScheduledExecutorService retryTimer;

    /** A client with defaults (128 MiB messages, 4 attempts, 120 s deadline per call) for {@code addresses} (host:port). */
    public OssClient(List<String> addresses) {
        this(addresses, OssConfig.DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_ATTEMPTS, DEFAULT_DEADLINE);
    }

    /**
     * @param addresses       OSS addresses, {@code host:port}; OST i goes to {@code addresses[i % n]}
     * @param maxMessageBytes largest reply accepted, bytes (a whole block must fit)
     * @param maxAttempts     attempts per call over all OSSes (>= 1)
     * @param deadline        deadline of one call, all its attempts together: a call that has not
     *                        completed by then fails with DEADLINE_EXCEEDED (a read or write of a
     *                        block never hangs longer, whatever the OSS or S3 does)
     * @throws IllegalArgumentException on an empty or malformed address list or bad limits
     */
    public OssClient(List<String> addresses, int maxMessageBytes, int maxAttempts, Duration deadline) {
        if (maxMessageBytes < OssConfig.MIB || maxAttempts < 1 || deadline == null || deadline.isNegative() || deadline.isZero()) {
            throw new IllegalArgumentException("bad OSS client limits: maxMessageBytes=" + maxMessageBytes
                    + " maxAttempts=" + maxAttempts + " deadline=" + deadline);
        }
        this.maxMessageBytes = maxMessageBytes;
        this.maxAttempts = maxAttempts;
        this.deadline = deadline;
        this.retryTimer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "oss-client-retry");
            t.setDaemon(true);
            return t;
        });
        setAddresses(addresses);
    }

    /**
     * Replaces the OSS list (routing changes at once; calls in flight finish on their channel).
     * Channels to OSSes no longer listed are shut down.
     *
     * @throws IllegalArgumentException on an empty list or an address that is not host:port
     */
    public synchronized void setAddresses(List<String> newAddresses) {
        if (newAddresses == null || newAddresses.isEmpty()) {
            throw new IllegalArgumentException("OSS address list is empty");
        }
        for (String a : newAddresses) {
            parse(a);
        }
        List<String> copy = List.copyOf(newAddresses);
        for (String a : copy) {
            channels.computeIfAbsent(a, this::open);
        }
        channels.entrySet().removeIf(e -> {
            if (!copy.contains(e.getKey())) {
                e.getValue().shutdown();
                return true;
            }
            return false;
        });
        this.addresses = copy;
    }

    /** The current OSS list. */
    public List<String> addresses() {
        return addresses;
    }

    private static int parse(String address) {
        int colon = address == null ? -1 : address.lastIndexOf(':');
        if (colon <= 0 || colon == address.length() - 1) {
            throw new IllegalArgumentException("OSS address must be host:port, got: " + address);
        }
        try {
            int port = Integer.parseInt(address.substring(colon + 1));
            if (port < 1 || port > 65535) {
                throw new NumberFormatException();
            }
            return port;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("OSS address has a bad port: " + address);
        }
    }

    private ManagedChannel open(String address) {
        int colon = address.lastIndexOf(':');
        String host = address.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        return NettyChannelBuilder.forAddress(host, parse(address))
                .usePlaintext()
                .maxInboundMessageSize(maxMessageBytes)
                // A whole block in flight without waiting for HTTP/2 window updates (default 1 MiB).
                .flowControlWindow(OssConfig.FLOW_CONTROL_WINDOW)
                // Replies are parsed and their futures completed on the transport thread: no
                // hand-off to gRPC's executor and back per call. A thread switch costs more CPU than
                // parsing a block here (cold 1 GiB read: 190-210 -> 270-290 MiB/s, 9.5 -> 6.7 CPU-s).
                // So nothing chained on these futures may block: OpenFile continues on its own executor.
                .directExecutor()
                .build();
    }

    private synchronized ObjectStorageServiceGrpc.ObjectStorageServiceFutureStub stub(String address, Deadline callDeadline) {
        ManagedChannel ch = channels.get(address);
        if (ch == null) { // removed by setAddresses meanwhile
            ch = channels.computeIfAbsent(address, this::open);
        }
        return ObjectStorageServiceGrpc.newFutureStub(ch)
                .withMaxInboundMessageSize(maxMessageBytes)
                .withMaxOutboundMessageSize(maxMessageBytes)
                .withDeadline(callDeadline);
    }

    /** Writes block {@code key} of OST {@code ost}; completes when the OSS has PUT it to S3. */
    @Override
    public CompletableFuture<Void> write(int ost, String key, byte[] data) {
        WriteBlockRequest req = WriteBlockRequest.newBuilder().setOst(ost).setKey(key)
                .setData(UnsafeByteOperations.unsafeWrap(data)).build();
        return call(ost, "write of block " + key + " on OST " + ost, stub -> stub.writeBlock(req))
                .thenApply(r -> null);
    }

    /** Reads {@code [offset, offset+length)} of block {@code key} of OST {@code ost}. */
    @Override
    public CompletableFuture<byte[]> read(int ost, String key, long offset, int length) {
        return readView(ost, key, offset, length).thenApply(b -> { // the view is a slice of the whole message
            byte[] a = new byte[b.remaining()];
            b.get(0, a);
            return a;
        });
    }

    /**
     * {@inheritDoc} Here: a heap buffer over the received reply message itself
     * ({@link ReadReplyMarshaller}), array-backed, without the copy {@link #read} may make.
     */
    @Override
    public CompletableFuture<ByteBuffer> readView(int ost, String key, long offset, int length) {
        if (offset < 0 || length < 0) {
            return CompletableFuture.failedFuture(new OssException("INVALID_ARGUMENT",
                    "bad range offset=" + offset + " length=" + length + " of block " + key + " on OST " + ost, null));
        }
        ReadBlockRequest req = ReadBlockRequest.newBuilder().setOst(ost).setKey(key).setOffset(offset).setLength(length).build();
        return call(ost, "read of block " + key + " on OST " + ost, stub -> ClientCalls.futureUnaryCall(
                stub.getChannel().newCall(ReadReplyMarshaller.READ_BLOCK, stub.getCallOptions()), req));
    }

    /**
     * Where to read block {@code key} of OST {@code ost} from (oss.proto, LocateBlock): cached at
     * its OSS, or a URL the OSS signed for a GET straight from S3, valid {@code ttlSeconds}.
     * {@code client} names the asking client (the same bytes for all its asks; empty: anonymous),
     * so that asking again for a block it reads from S3 is not taken for another client's ask.
     * Fails with {@link OssException} (UNIMPLEMENTED: the OSS cannot sign URLs for that OST).
     */
    public CompletableFuture<LocateBlockReply> locate(int ost, String key, int ttlSeconds, ByteString client) {
        LocateBlockRequest req = LocateBlockRequest.newBuilder().setOst(ost).setKey(key).setTtlSeconds(ttlSeconds)
                .setClient(client).build();
        return call(ost, "locate of block " + key + " on OST " + ost, stub -> stub.locateBlock(req));
    }

    /**
     * A URL the OSS signed for a PUT of new block {@code key} of OST {@code ost} straight to S3,
     * valid {@code ttlSeconds} (oss.proto, SignPut); empty when that OSS uploads blocks itself
     * (write the block with {@link #write}). Fails with {@link OssException} (UNIMPLEMENTED from
     * an OSS older than SignPut; INVALID_ARGUMENT for a bad key).
     */
    public CompletableFuture<String> signPut(int ost, String key, int ttlSeconds) {
        SignPutRequest req = SignPutRequest.newBuilder().setOst(ost).setKey(key).setTtlSeconds(ttlSeconds).build();
        return call(ost, "signing a PUT of block " + key + " on OST " + ost, stub -> stub.signPut(req))
                .thenApply(SignPutReply::getUrl);
    }

    /** Deletes blocks {@code keys} of OST {@code ost}; missing blocks are not an error. */
    @Override
    public CompletableFuture<Void> delete(int ost, List<String> keys) {
        DeleteBlocksRequest req = DeleteBlocksRequest.newBuilder().setOst(ost).addAllKeys(keys).build();
        return call(ost, "delete of " + keys.size() + " blocks on OST " + ost, stub -> stub.deleteBlocks(req))
                .thenApply(r -> null);
    }

    /** Status of the OSS at {@code address} (one of {@link #addresses()} or any other host:port), no retry. */
    public CompletableFuture<OssStatusReply> status(String address) {
        return once(address, "status of OSS " + address, stub -> stub.status(OssStatusRequest.getDefaultInstance()));
    }

    /**
     * Empties the read cache of the OSS at {@code address}, no retry; completes with the bytes it
     * held. Fails with {@link OssException} when the OSS is unreachable.
     */
    public CompletableFuture<Long> dropCache(String address) {
        return once(address, "drop of the read cache of OSS " + address,
                stub -> stub.dropCache(DropCacheRequest.getDefaultInstance())).thenApply(DropCacheReply::getDroppedBytes);
    }

    /** One call to the OSS at {@code address}, without retry. */
    private <T> CompletableFuture<T> once(String address, String what,
                                          Function<ObjectStorageServiceGrpc.ObjectStorageServiceFutureStub, ListenableFuture<T>> rpc) {
        CompletableFuture<T> out = new CompletableFuture<>();
        ListenableFuture<T> f;
        try {
            f = rpc.apply(stub(address, Deadline.after(deadline.toNanos(), TimeUnit.NANOSECONDS)));
        } catch (RuntimeException e) {
            out.completeExceptionally(new OssException("INTERNAL", what + ": " + e, e));
            return out;
        }
        Futures.addCallback(f, new FutureCallback<>() {
            @Override
            public void onSuccess(T r) {
                out.complete(r);
            }

            @Override
            public void onFailure(Throwable t) {
                out.completeExceptionally(toIo(Status.fromThrowable(t), what, address, t));
            }
        }, MoreExecutors.directExecutor());
        return out;
    }

    private <T> CompletableFuture<T> call(int ost, String what,
                                          Function<ObjectStorageServiceGrpc.ObjectStorageServiceFutureStub, ListenableFuture<T>> rpc) {
        CompletableFuture<T> out = new CompletableFuture<>();
        if (ost < 0) {
            out.completeExceptionally(new OssException("INVALID_ARGUMENT", what + ": OST index must be >= 0", null));
            return out;
        }
        attempt(ost, what, rpc, out, 0, Deadline.after(deadline.toNanos(), TimeUnit.NANOSECONDS));
        return out;
    }

    private <T> void attempt(int ost, String what,
                             Function<ObjectStorageServiceGrpc.ObjectStorageServiceFutureStub, ListenableFuture<T>> rpc,
                             CompletableFuture<T> out, int attempt, Deadline callDeadline) {
        List<String> list = addresses;
        String address = list.get((ost + attempt) % list.size());
        ListenableFuture<T> f;
        try {
            f = rpc.apply(stub(address, callDeadline));
        } catch (RuntimeException e) {
            out.completeExceptionally(new OssException("INTERNAL", what + " via OSS " + address + ": " + e, e));
            return;
        }
        Futures.addCallback(f, new FutureCallback<>() {
            @Override
            public void onSuccess(T r) {
                out.complete(r);
            }

            @Override
            public void onFailure(Throwable t) {
                Status s = Status.fromThrowable(t);
                if (s.getCode() == Status.Code.UNAVAILABLE && attempt + 1 < maxAttempts && !retryTimer.isShutdown()
                        && callDeadline.timeRemaining(TimeUnit.MILLISECONDS) > 50L * (attempt + 1)) {
                    LOG.debug("{} via OSS {} unavailable ({}), retrying on the next OSS", what, address, s.getDescription());
                    try {
                        retryTimer.schedule(() -> attempt(ost, what, rpc, out, attempt + 1, callDeadline), 50L * (attempt + 1), TimeUnit.MILLISECONDS);
                        return;
                    } catch (RuntimeException rejected) {
                        // closing: fall through and fail
                    }
                }
                out.completeExceptionally(toIo(s, what, address, t));
            }
        }, MoreExecutors.directExecutor());
    }

    private static IOException toIo(Status s, String what, String address, Throwable cause) {
        String desc = s.getDescription() == null ? s.getCode().name() : s.getCode() + ": " + s.getDescription();
        String message = what + " via OSS " + address + ": " + desc;
        if (s.getCode() == Status.Code.NOT_FOUND) {
            FileNotFoundException e = new FileNotFoundException(message);
            e.initCause(cause);
            return e;
        }
        return new OssException(s.getCode().name(), message, cause);
    }

    /** Shuts all channels down (waits up to 5 s) and fails nothing already completed. */
    @Override
    public void close() {
        retryTimer.shutdownNow();
        List<ManagedChannel> all;
        synchronized (this) {
            all = List.copyOf(channels.values());
            channels.clear();
        }
        for (ManagedChannel ch : all) {
            ch.shutdown();
        }
        for (ManagedChannel ch : all) {
            try {
                if (!ch.awaitTermination(5, TimeUnit.SECONDS)) {
                    ch.shutdownNow();
                }
            } catch (InterruptedException e) {
                ch.shutdownNow();
                Thread.currentThread().interrupt();
            }
        }
    }
}
