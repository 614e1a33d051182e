package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.fuse.FuseMount;
import dev.granary.client.fuse.PooledFuseFS;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import ru.serce.jnrfuse.struct.FileStat;

/**
 * A JVM that exits while a {@link PooledFuseFS} is still mounted leaves no mount behind (a dead
 * one answers "Transport endpoint is not connected" until someone unmounts it): the mount
 * registers a shutdown hook that unmounts, as jnr-fuse's own mount did.
 */
class PooledFuseExitTest {
    @TempDir
    Path tmp;

    /** The child JVM: mounts an empty filesystem at args[0], says so, and exits without unmounting. */
    public static final class MountAndExit {
        public static void main(String[] args) throws Exception {
            PooledFuseFS fs = new PooledFuseFS(2) {
                @Override
                public int getattr(String path, FileStat stat) {
                    if (!path.equals("/")) {
                        return -ru.serce.jnrfuse.ErrorCodes.ENOENT();
                    }
                    stat.st_mode.set(FileStat.S_IFDIR | 0755);
                    stat.st_nlink.set(2);
                    return 0;
                }
            };
            Path mp = Path.of(args[0]);
            fs.mount(mp, false, false, new String[0]);
            for (int i = 0; i < 500 && !FuseMount.isMounted(mp); i++) {
                Thread.sleep(20);
            }
            System.out.println("mounted=" + FuseMount.isMounted(mp));
            System.out.flush();
            System.exit(0);
        }
    }

    @Test
    void aJvmExitingWhileMountedLeavesNoMount() throws Exception {
        MiniCluster.assumeFuseDevice();
        Prerequisites.ensureFuse();
        Path mp = Files.createDirectories(tmp.resolve("mnt"));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(List.of(java, "--enable-native-access=ALL-UNNAMED",
                "-cp", System.getProperty("java.class.path"), MountAndExit.class.getName(), mp.toString()))
                .redirectErrorStream(true).start();
        try {
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child JVM did not exit");
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(out.contains("mounted=true"), out);
            assertEquals(0, p.exitValue(), out);
            assertFalse(FuseMount.isMounted(mp), "still mounted after the JVM exited:\n" + out);
        } finally {
            p.destroyForcibly();
            if (FuseMount.isMounted(mp)) {
                Shell.ok(tmp, "fusermount -u -z " + mp);
            }
        }
    }
}
