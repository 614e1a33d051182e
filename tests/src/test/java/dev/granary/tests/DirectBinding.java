package dev.granary.tests;

import dev.granary.client.fuse.FuseMount;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Runs a test class's mounts on Granary's /dev/fuse binding ({@code -Dgranary.fuse.binding=direct},
 * {@code client/fuse/kernel}): sets the property before the class's {@code @BeforeAll} methods
 * mount (extensions' callbacks run first) and clears it after the class, so the classes after it
 * mount on jnr-fuse again. {@link #mountsSinceStart()} tells that the mounts really were direct.
 */
final class DirectBinding implements BeforeAllCallback, AfterAllCallback {
    private static volatile long before;

    @Override
    public void beforeAll(ExtensionContext context) {
        before = FuseMount.directMounts();
        System.setProperty("granary.fuse.binding", "direct");
    }

    @Override
    public void afterAll(ExtensionContext context) {
        System.clearProperty("granary.fuse.binding");
    }

    /** Mounts made on the /dev/fuse binding since the class started. */
    static long mountsSinceStart() {
        return FuseMount.directMounts() - before;
    }
}
