package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every scenario of {@link FuseEndToEndTest} on mounts served by jnr-fuse over libfuse2
 * ({@code client.fuse_binding: jnr}, what a non-root mount uses) instead of Granary's /dev/fuse
 * binding (root's default): the same callbacks behind another binding must give the same POSIX
 * answers.
 */
@ExtendWith(JnrBinding.class)
class FuseEndToEndJnrBindingTest extends FuseEndToEndTest {
    @Test
    void theMountIsOnJnrFuse() {
        assertTrue(JnrBinding.mountsSinceStart() >= 1, "mounts on jnr-fuse: " + JnrBinding.mountsSinceStart());
    }
}
