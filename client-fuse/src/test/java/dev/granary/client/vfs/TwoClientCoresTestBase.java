package dev.granary.client.vfs;

import static dev.granary.client.vfs.GranaryVfs.O_CREAT;
import static dev.granary.client.vfs.GranaryVfs.O_EXCL;
import static dev.granary.client.vfs.GranaryVfs.O_WRONLY;

import dev.granary.mds.proto.MdsRequest.OpCase;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;

/**
 * Two client cores ({@code a} and {@code b}, two mounts' worth, default configuration) over one
 * {@link LocalCluster}, and a directory of their own per test, named after it, striped in 64 KiB
 * stripes ({@code dir}).
 */
abstract class TwoClientCoresTestBase extends LocalClusterTestBase {
    /** The flags of an exclusive create for writing, as open(2) with O_CREAT|O_EXCL sends them. */
    static final int EXCL = O_CREAT | O_WRONLY | O_EXCL;
    GranaryVfs a, b;
    String dir;

    @BeforeEach
    void setUpClients(TestInfo info) {
        a = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        b = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        dir = "/" + info.getTestMethod().orElseThrow().getName();
        cluster.stripedDir(a, dir, 64 * 1024);
    }

    @AfterEach
    void closeClients() {
        a.close();
        b.close();
    }

    /** MDS requests of kind {@code op} sent so far by every client of the cluster. */
    long calls(OpCase op) {
        return cluster.mdsCalls.computeIfAbsent(op, k -> new java.util.concurrent.atomic.AtomicLong()).get();
    }
}
