package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every scenario of {@link FuseEndToEndTest} on mounts served by Granary's /dev/fuse binding
 * ({@code client/fuse/kernel}: the FUSE kernel protocol from Java, no libfuse;
 * {@code -Dgranary.fuse.binding=direct}) instead of jnr-fuse over libfuse2: the same callbacks
 * behind another binding must give the same POSIX answers.
 */
@ExtendWith(DirectBinding.class)
class FuseEndToEndDirectBindingTest extends FuseEndToEndTest {
    @Test
    void theMountIsOnTheDevFuseBinding() {
        assertTrue(DirectBinding.mountsSinceStart() >= 1, "mounts on the /dev/fuse binding: " + DirectBinding.mountsSinceStart());
    }
}
