package dev.granary.raft;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The test clusters' port picker never gives one port twice (two peers with one address). */
class FreePortTest {
    @Test
    void aThousandPortsAreAllDifferent() throws Exception {
        Set<Integer> ports = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            ports.add(TestCluster.freePort());
        }
        // bind(0) alone repeats ports: 929 of 1,000 were distinct here before the picker remembered them
        assertEquals(1000, ports.size());
    }
}
