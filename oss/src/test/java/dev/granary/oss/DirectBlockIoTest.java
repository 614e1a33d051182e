package dev.granary.oss;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.objbacker.EmbeddedS3;
import dev.granary.objbacker.S3ObjectStore;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DirectBlockIoTest {
    @TempDir
    Path tmp;

    @Test
    void readWriteDeleteOverRealS3() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try (EmbeddedS3 s3 = EmbeddedS3.start(tmp.resolve("s3"), 0, "ak", "sk-direct");
             S3ObjectStore ost0 = S3ObjectStore.open(s3.config("direct", "ost0"))) {
            ost0.ensureBucket();
            try (DirectBlockIo io = new DirectBlockIo(Map.of(0, ost0), pool)) {
                io.write(0, "b1", new byte[] {1, 2, 3, 4}).get();
                assertArrayEquals(new byte[] {2, 3}, io.read(0, "b1", 1, 2).get());
                io.delete(0, List.of("b1")).get();
                ExecutionException e = assertThrows(ExecutionException.class, () -> io.read(0, "b1", 0, 4).get());
                assertInstanceOf(FileNotFoundException.class, e.getCause());
                e = assertThrows(ExecutionException.class, () -> io.read(3, "b1", 0, 4).get());
                assertInstanceOf(IOException.class, e.getCause());
                assertTrue(e.getCause().getMessage().contains("unknown OST 3"), e.getCause().getMessage());
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
