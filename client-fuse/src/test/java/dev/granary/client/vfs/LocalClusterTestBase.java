package dev.granary.client.vfs;

import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;

/** One {@link LocalCluster} (embedded S3, local MDS) per test class, shared by its tests. */
abstract class LocalClusterTestBase {
    @TempDir
    static Path tmp;
    static LocalCluster cluster;

    @BeforeAll
    static void start() {
        cluster = new LocalCluster(tmp);
    }

    @AfterAll
    static void stop() {
        cluster.close();
    }
}
