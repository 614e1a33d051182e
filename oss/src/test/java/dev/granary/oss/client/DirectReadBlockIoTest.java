package dev.granary.oss.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.oss.server.OssServer;
import java.io.FileNotFoundException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link DirectReadBlockIo} against an OSS over gRPC loopback and a real embedded S3Proxy, which
 * checks the signatures of the URLs the OSS hands out.
 */
class DirectReadBlockIoTest extends DirectIoFixture {
    private DirectReadBlockIo client(OssServer server) {
        OssClient oss = ossClient(server);
        return closing(new DirectReadBlockIo(oss, Duration.ofSeconds(10), 4));
    }

    /** An OSS over a bucket of its own named {@code bucket}, holding {@code block} as {@code key}. */
    private OssServer serverHolding(String bucket, String key, byte[] block) throws Exception {
        S3ObjectStore store = closing(S3ObjectStore.open(s3.config("direct", bucket)));
        store.put(key, block);
        return server(store);
    }

    /**
     * The first client of a cold block reads it from S3 itself; the second reads it through the
     * OSS, which then holds it; the third is served from the OSS's memory.
     */
    @Test
    void theFirstReaderOfAColdBlockGetsItFromS3AndLaterOnesFromTheOssCache() throws Exception {
        byte[] block = random(1_500_000, 1);
        OssServer server = serverHolding("shared", "b1", block);
        DirectReadBlockIo first = client(server);
        assertArrayEquals(Arrays.copyOfRange(block, 1000, 201_000), first.read(0, "b1", 1000, 200_000).get(20, TimeUnit.SECONDS));
        assertArrayEquals(Arrays.copyOfRange(block, 1_400_000, block.length), first.read(0, "b1", 1_400_000, 200_000).get());
        assertArrayEquals(new byte[0], first.read(0, "b1", block.length, 10).get(), "a range past the end is empty");
        assertEquals(2, first.directGets());
        assertEquals(0, server.s3Gets(), "the OSS sent no GET");
        assertEquals(0, DirectS3Deadline.pending(), "deadlines left after the GETs returned");

        DirectReadBlockIo second = client(server);
        assertArrayEquals(block, second.read(0, "b1", 0, block.length).get());
        assertEquals(0, second.directGets(), "another client's block: through the OSS");
        long ossGets = server.s3Gets();
        assertEquals(1, ossGets);

        DirectReadBlockIo third = client(server);
        assertArrayEquals(Arrays.copyOfRange(block, 7, 70_007), third.read(0, "b1", 7, 70_000).get());
        assertEquals(0, third.directGets());
        assertEquals(ossGets, server.s3Gets(), "served from the OSS cache");
    }

    /**
     * A client that asks again for a block it was reading straight from S3 (its remembered URL
     * expired, or two of its threads missed at once) is the same client, not "a later one": it
     * gets a URL again, and only another client reads the block through the OSS. Before, the OSS
     * remembered only that the block had been located: a client whose URL entry expired (after
     * 7.5 min) re-located within the OSS's 10 minutes and read every such block through the OSS,
     * which fetched it whole from S3 first (AU of 4 simulated accelerators 99% -> 60-80%).
     */
    @Test
    void theSameClientAskingAgainKeepsReadingFromS3AndAnotherClientGoesThroughTheOss() throws Exception {
        byte[] block = random(600_000, 3);
        OssServer server = serverHolding("again", "b2", block);
        DirectReadBlockIo first = client(server);
        assertArrayEquals(Arrays.copyOfRange(block, 0, 100_000), first.read(0, "b2", 0, 100_000).get(20, TimeUnit.SECONDS));
        first.forgetLocations(); // as when its URLs' half validity is over
        List<CompletableFuture<byte[]>> again = new ArrayList<>();
        for (int i = 0; i < 4; i++) { // threads of the one client missing at once
            again.add(first.read(0, "b2", 100_000L * (i + 1), 100_000));
        }
        for (int i = 0; i < 4; i++) {
            assertArrayEquals(Arrays.copyOfRange(block, 100_000 * (i + 1), 100_000 * (i + 2)), again.get(i).get(20, TimeUnit.SECONDS));
        }
        assertEquals(5, first.directGets(), "every read of the one client straight from S3");
        assertEquals(0, first.fallbacks());
        assertEquals(0, server.s3Gets(), "the OSS fetched nothing");

        DirectReadBlockIo other = client(server);
        assertArrayEquals(Arrays.copyOfRange(block, 500_000, 600_000), other.read(0, "b2", 500_000, 100_000).get(20, TimeUnit.SECONDS));
        assertEquals(0, other.directGets(), "another client's block: through the OSS");
        assertEquals(1, server.s3Gets());
    }

    /**
     * An answer that trickles in (a byte every 300 ms, each well within the socket timeout) is
     * aborted when {@code io_timeout} (2 s here) has passed since the GET started, and the range
     * is read through the OSS: the same bytes. Without the whole-request deadline this GET took
     * 300 s (the same kind of fault as a PUT blocked in a socket write, helper-found 2026-12-07).
     */
    @Test
    void aGetWhoseAnswerTricklesInIsAbortedAtTheTimeoutAndReadThroughTheOss() throws Exception {
        int trickling = tricklingServer(1000).getLocalPort();
        S3ObjectStore real = closing(S3ObjectStore.open(s3.config("direct", "trickle")));
        byte[] block = random(50_000, 9);
        real.put("t1", block);
        OssServer server = server(rewritingUrls(real, u -> toPort(u, trickling)));
        OssClient oss = ossClient(server);
        DirectReadBlockIo io = closing(new DirectReadBlockIo(oss, Duration.ofSeconds(2), 4));
        long t0 = System.nanoTime();
        assertArrayEquals(Arrays.copyOfRange(block, 0, 1000), io.read(0, "t1", 0, 1000).get(30, TimeUnit.SECONDS));
        double seconds = (System.nanoTime() - t0) / 1e9;
        assertTrue(seconds >= 1.9 && seconds < 15, "aborted at the 2 s deadline, then read through the OSS: " + seconds + " s");
        assertEquals(0, io.directGets());
        assertEquals(1, io.fallbacks());
        assertEquals(1, server.s3Gets(), "the OSS read the block");
    }

    @Test
    void aMissingBlockFailsWithFileNotFoundLikeThroughTheOss() throws Exception {
        S3ObjectStore store = closing(S3ObjectStore.open(s3.config("direct", "missing")));
        DirectReadBlockIo io = client(server(store));
        ExecutionException e = assertThrows(ExecutionException.class, () -> io.read(0, "nothing-here", 0, 100).get(20, TimeUnit.SECONDS));
        assertInstanceOf(FileNotFoundException.class, e.getCause(), e.toString());
        assertEquals(0, io.fallbacks());
    }

    /**
     * S3 unreachable from the client (the URLs point at a closed port): every read still returns
     * the right bytes through the OSS, and after three failed GETs in a row the client stops
     * trying for a while instead of paying a failed connection per read.
     */
    @Test
    void whenS3IsUnreachableFromTheClientReadsGoThroughTheOssAndDirectGetsPause() throws Exception {
        S3ObjectStore real = closing(S3ObjectStore.open(s3.config("direct", "unreachable")));
        ObjectStore signsBadUrls = rewritingUrls(real, DirectIoFixture::toClosedPort);
        List<byte[]> blocks = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            blocks.add(random(100_000 + i, 10 + i));
            real.put("u" + i, blocks.get(i));
        }
        DirectReadBlockIo io = client(server(signsBadUrls));
        for (int i = 0; i < 6; i++) {
            assertArrayEquals(blocks.get(i), io.read(0, "u" + i, 0, 200_000).get(30, TimeUnit.SECONDS), "block " + i);
        }
        assertEquals(0, io.directGets());
        assertEquals(DirectReadBlockIo.FAILURES_TO_PAUSE, io.fallbacks(), "no direct GET tried once paused");
    }
}
