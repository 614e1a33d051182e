package dev.granary.mds.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.FsException;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.GetAttrRequest;
import dev.granary.mds.proto.LookupRequest;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * RequestCombiner's logic over a scripted sender (who sends what, in which batch; getattrs stand in
 * for mutations in the write tests: the combiner looks at no request but a batch_write), and the
 * MDS's answer to a batch_read through the local transport. RaftMdsTest runs both kinds through
 * real Ratis.
 */
class RequestCombinerTest {
    @TempDir
    Path tmp;

    private static MdsRequest getattr(long ino) {
        return MdsRequest.newBuilder().setGetattr(GetAttrRequest.newBuilder().setIno(ino)).build();
    }

    /** Answers getattr(ino) with attr.ino = ino, ino 13 with ENOENT; a batch request by request. */
    private static MdsResponse answer(MdsRequest r) {
        if (r.hasBatchRead() || r.hasBatchWrite()) {
            MdsResponse.Builder b = MdsResponse.newBuilder().setStatus(Status.OK);
            (r.hasBatchRead() ? r.getBatchRead().getRequestsList() : r.getBatchWrite().getRequestsList())
                    .forEach(one -> b.addBatch(one.hasBatchWrite() ? MdsResponse.newBuilder().setStatus(Status.EINVAL).build() : answer(one)));
            return b.build();
        }
        long ino = r.getGetattr().getIno();
        return ino == 13 ? MdsResponse.newBuilder().setStatus(Status.ENOENT).build()
                : MdsResponse.newBuilder().setStatus(Status.OK).setAttr(Attr.newBuilder().setIno(ino)).build();
    }

    /**
     * A scripted sender: records each request and the thread that sent it, holds getattr(1) until
     * {@link #release} (so that later reads queue behind it), and answers with {@code answer}.
     */
    private static final class Script implements Function<MdsRequest, MdsResponse> {
        final List<MdsRequest> sent = java.util.Collections.synchronizedList(new ArrayList<>());
        final List<String> senders = java.util.Collections.synchronizedList(new ArrayList<>());
        final CountDownLatch held = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final Function<MdsRequest, MdsResponse> answer;

        Script(Function<MdsRequest, MdsResponse> answer) {
            this.answer = answer;
        }

        @Override
        public MdsResponse apply(MdsRequest r) {
            sent.add(r);
            senders.add(Thread.currentThread().getName());
            if (r.hasGetattr() && r.getGetattr().getIno() == 1) {
                held.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
            return answer.apply(r);
        }

        void awaitHeld() throws InterruptedException {
            assertTrue(held.await(10, TimeUnit.SECONDS), "getattr(1) reached the sender");
        }
    }

    /** Waits (at most 10 s) until {@code n} reads are queued in {@code c}. */
    private static void awaitQueued(RequestCombiner c, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (c.queuedForTests() < n && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertEquals(n, c.queuedForTests(), "reads queued behind the one in flight");
    }

    @Test
    void aLoneReadGoesOutAloneAndReadsQueuedBehindItGoOutAsOneBatchSentByTheFirstOfThem() throws Exception {
        Script send = new Script(RequestCombinerTest::answer);
        RequestCombiner c = new RequestCombiner(RequestCombiner.Kind.READS, send, 1);
        assertEquals(7, c.call(getattr(7)).getAttr().getIno());
        assertEquals(List.of(getattr(7)), send.sent, "a lone read: sent as it is");

        ExecutorService pool = Executors.newFixedThreadPool(6, r -> new Thread(r, "reader-" + System.nanoTime()));
        try {
            Future<MdsResponse> first = pool.submit(() -> c.call(getattr(1)));
            send.awaitHeld();
            List<Future<MdsResponse>> later = new ArrayList<>();
            for (long ino : new long[] {2, 3, 13, 4, 5}) {
                later.add(pool.submit(() -> c.call(getattr(ino))));
            }
            awaitQueued(c, 5);
            send.release.countDown();
            assertEquals(1, first.get(10, TimeUnit.SECONDS).getAttr().getIno());
            long[] want = {2, 3, 13, 4, 5};
            for (int i = 0; i < 5; i++) {
                MdsResponse got = later.get(i).get(10, TimeUnit.SECONDS);
                if (want[i] == 13) {
                    assertEquals(Status.ENOENT, got.getStatus(), "an error status reaches only its own caller");
                } else {
                    assertEquals(Status.OK, got.getStatus());
                    assertEquals(want[i], got.getAttr().getIno());
                }
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(3, send.sent.size(), send.sent.toString());
        MdsRequest batch = send.sent.get(2);
        assertTrue(batch.hasBatchRead());
        assertEquals(5, batch.getBatchRead().getRequestsCount());
        assertEquals(List.of(2L, 3L, 4L, 5L, 13L),
                batch.getBatchRead().getRequestsList().stream().map(r -> r.getGetattr().getIno()).sorted().toList());
        assertTrue(!send.senders.get(2).equals(send.senders.get(1)), "the batch is sent by a queued reader, not by the thread whose read returned");
        assertEquals(5, c.batchedRequests());
        assertEquals(1, c.batches());
    }

    private static MdsRequest batchWrite(MdsRequest... rs) {
        return MdsRequest.newBuilder().setBatchWrite(dev.granary.mds.proto.BatchWriteRequest.newBuilder().addAllRequests(List.of(rs))).build();
    }

    /**
     * Mutations queued behind one in flight go out as one batch_write; a caller's own batch_write
     * is spliced in whole and in order (never nested: the MDS refuses a batch inside a batch), and
     * each caller gets its own answer: a plain mutation its response, a batch_write caller a
     * response whose batch holds its requests' answers.
     */
    @Test
    void queuedMutationsGoOutAsOneBatchWriteWithACallersBatchSplicedIn() throws Exception {
        Script send = new Script(RequestCombinerTest::answer);
        RequestCombiner c = new RequestCombiner(RequestCombiner.Kind.WRITES, send, 1);
        assertEquals(List.of(9L), c.call(batchWrite(getattr(9))).getBatchList().stream().map(r -> r.getAttr().getIno()).toList(),
                "a lone batch_write: sent as it is");
        assertEquals(batchWrite(getattr(9)), send.sent.get(0));
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            Future<MdsResponse> first = pool.submit(() -> c.call(getattr(1)));
            send.awaitHeld();
            Future<MdsResponse> a = pool.submit(() -> c.call(getattr(2)));
            awaitQueued(c, 1);
            Future<MdsResponse> b = pool.submit(() -> c.call(batchWrite(getattr(3), getattr(13), getattr(4))));
            awaitQueued(c, 2);
            Future<MdsResponse> d = pool.submit(() -> c.call(getattr(5)));
            awaitQueued(c, 3);
            send.release.countDown();
            assertEquals(1, first.get(10, TimeUnit.SECONDS).getAttr().getIno());
            assertEquals(2, a.get(10, TimeUnit.SECONDS).getAttr().getIno());
            MdsResponse mine = b.get(10, TimeUnit.SECONDS);
            assertEquals(Status.OK, mine.getStatus());
            assertEquals(List.of(Status.OK, Status.ENOENT, Status.OK), mine.getBatchList().stream().map(MdsResponse::getStatus).toList(),
                    "the batch_write caller gets its three answers, in order, the error among them");
            assertEquals(3, mine.getBatch(0).getAttr().getIno());
            assertEquals(4, mine.getBatch(2).getAttr().getIno());
            assertEquals(5, d.get(10, TimeUnit.SECONDS).getAttr().getIno());
        } finally {
            pool.shutdownNow();
        }
        assertEquals(3, send.sent.size(), send.sent.toString());
        assertEquals(batchWrite(getattr(2), getattr(3), getattr(13), getattr(4), getattr(5)), send.sent.get(2),
                "one batch_write, in arrival order, the caller's batch spliced in");
        assertEquals(3, c.batchedRequests());
        assertEquals(1, c.batches());
    }

    /** A batch stops before 2 MiB of requests: the rest waits for the next round trip. */
    @Test
    void aBatchStaysWithinItsByteLimit() throws Exception {
        Script send = new Script(RequestCombinerTest::answer);
        RequestCombiner c = new RequestCombiner(RequestCombiner.Kind.READS, send, 1);
        // 1.5 MiB requests (a caller's groups list stands in for inline bytes)
        java.util.function.LongFunction<MdsRequest> big = ino -> {
            var caller = dev.granary.mds.proto.Caller.newBuilder();
            for (int i = 0; i < 1_500_000 / 3; i++) { // 3 bytes each (varint, packed)
                caller.addGids(100_000);
            }
            return getattr(ino).toBuilder().setCaller(caller).build();
        };
        assertTrue(big.apply(2).getSerializedSize() > 1_400_000 && big.apply(2).getSerializedSize() < (1 << 21));
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<MdsResponse>> all = new ArrayList<>();
            all.add(pool.submit(() -> c.call(getattr(1))));
            send.awaitHeld();
            MdsRequest[] queued = {big.apply(2), big.apply(3), getattr(4)};
            for (int i = 0; i < queued.length; i++) {
                MdsRequest q = queued[i];
                all.add(pool.submit(() -> c.call(q)));
                awaitQueued(c, i + 1);
            }
            send.release.countDown();
            for (int i = 0; i < all.size(); i++) {
                assertEquals(i + 1, all.get(i).get(10, TimeUnit.SECONDS).getAttr().getIno());
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(3, send.sent.size(), "the lone read, then [2], then [3, 4]: " + send.sent.size());
        assertEquals(2, send.sent.get(1).getGetattr().getIno(), "2 + 3 would pass 2 MiB: 2 goes alone");
        assertEquals(List.of(3L, 4L), send.sent.get(2).getBatchRead().getRequestsList().stream().map(r -> r.getGetattr().getIno()).toList());
    }

    /**
     * A reader with an interrupt pending that must send a batch does not fail the other readers in
     * it (the Raft client gives up on an interrupted caller, as the scripted sender does here), and
     * keeps its interrupt.
     */
    @Test
    void anInterruptedReaderSendsTheBatchForTheOthersAndKeepsItsInterrupt() throws Exception {
        Script send = new Script(r -> {
            if (Thread.currentThread().isInterrupted()) {
                throw new FsException(Status.EIO, "MDS read failed: interrupted while waiting for its reply");
            }
            return answer(r);
        });
        RequestCombiner c = new RequestCombiner(RequestCombiner.Kind.READS, send, 1);
        ExecutorService pool = Executors.newFixedThreadPool(3);
        try {
            Future<MdsResponse> first = pool.submit(() -> c.call(getattr(1)));
            send.awaitHeld();
            Future<Boolean[]> interrupted = pool.submit(() -> {
                Thread.currentThread().interrupt();
                MdsResponse r = c.call(getattr(2));
                return new Boolean[] {r.getAttr().getIno() == 2, Thread.interrupted()};
            });
            awaitQueued(c, 1);
            Future<MdsResponse> other = pool.submit(() -> c.call(getattr(3)));
            awaitQueued(c, 2);
            send.release.countDown();
            assertEquals(1, first.get(10, TimeUnit.SECONDS).getAttr().getIno());
            assertEquals(3, other.get(10, TimeUnit.SECONDS).getAttr().getIno(), "the other reader's read did not fail");
            Boolean[] got = interrupted.get(10, TimeUnit.SECONDS);
            assertTrue(got[0], "the interrupted reader got its answer");
            assertTrue(got[1], "and still has its interrupt");
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aTransportFailureFailsEveryReadOfItsBatch() throws Exception {
        FsException down = new FsException(Status.EIO, "MDS read failed: no leader");
        Script send = new Script(r -> {
            if (r.hasBatchRead()) {
                throw down;
            }
            return answer(r);
        });
        RequestCombiner c = new RequestCombiner(RequestCombiner.Kind.READS, send, 1);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            Future<MdsResponse> first = pool.submit(() -> c.call(getattr(1)));
            send.awaitHeld();
            List<Future<MdsResponse>> later = new ArrayList<>();
            for (long ino = 2; ino <= 4; ino++) {
                long i = ino;
                later.add(pool.submit(() -> c.call(getattr(i))));
            }
            awaitQueued(c, 3);
            send.release.countDown();
            assertEquals(1, first.get(10, TimeUnit.SECONDS).getAttr().getIno());
            for (Future<MdsResponse> f : later) {
                var e = assertThrows(java.util.concurrent.ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
                assertSame(down, e.getCause());
            }
        } finally {
            pool.shutdownNow();
        }
        // the combiner is usable again
        assertEquals(Status.OK, c.call(getattr(9)).getStatus());
    }

    @Test
    void theMdsAnswersABatchReadRequestByRequest() {
        try (LocalMdsTransport t = LocalMdsTransport.open(tmp.resolve("db")); MdsClient mds = new MdsClient(t)) {
            long d = mds.mkdir(LocalMdsTransportTest.ROOT, MdsClient.ROOT_INO, "d".getBytes(StandardCharsets.UTF_8), 0755).getIno();
            MdsRequest lookupD = MdsRequest.newBuilder().setLookup(LookupRequest.newBuilder().setParent(MdsClient.ROOT_INO)
                    .setName(com.google.protobuf.ByteString.copyFromUtf8("d"))).build();
            MdsRequest lookupMissing = MdsRequest.newBuilder().setLookup(LookupRequest.newBuilder().setParent(MdsClient.ROOT_INO)
                    .setName(com.google.protobuf.ByteString.copyFromUtf8("missing"))).build();
            MdsRequest nested = MdsRequest.newBuilder().setBatchRead(dev.granary.mds.proto.BatchReadRequest.newBuilder().addRequests(lookupD)).build();
            MdsRequest mkdir = MdsRequest.newBuilder().setMkdir(dev.granary.mds.proto.MkdirRequest.newBuilder().setParent(MdsClient.ROOT_INO)
                    .setName(com.google.protobuf.ByteString.copyFromUtf8("e")).setMode(0755)).build();
            MdsResponse all = t.read(MdsRequest.newBuilder().setBatchRead(dev.granary.mds.proto.BatchReadRequest.newBuilder()
                    .addRequests(lookupD).addRequests(lookupMissing).addRequests(nested).addRequests(mkdir)).build());
            assertEquals(Status.OK, all.getStatus());
            assertEquals(4, all.getBatchCount());
            assertEquals(Status.OK, all.getBatch(0).getStatus());
            assertEquals(d, all.getBatch(0).getAttr().getIno());
            assertEquals(Status.ENOENT, all.getBatch(1).getStatus());
            assertEquals(Status.EINVAL, all.getBatch(2).getStatus(), "no batch inside a batch");
            assertEquals(Status.EINVAL, all.getBatch(3).getStatus(), "a mutation in a batch of reads");
            assertThrows(FsException.class, () -> mds.lookup(LocalMdsTransportTest.ROOT, MdsClient.ROOT_INO, "e".getBytes(StandardCharsets.UTF_8)),
                    "the mkdir in the batch did nothing");
        }
    }

}
