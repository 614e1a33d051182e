package dev.granary.tests;

import dev.granary.client.fuse.FuseMount;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Runs a test class's mounts on jnr-fuse over libfuse2 ({@code -Dgranary.fuse.binding=jnr}), the
 * binding of non-root mounts, where root's default is Granary's /dev/fuse binding: sets the
 * property before the class's {@code @BeforeAll} methods mount (extensions' callbacks run first)
 * and clears it after the class, so the classes after it mount on the default again.
 * {@link #mountsSinceStart()} tells that the mounts really were on jnr-fuse.
 */
final class JnrBinding implements BeforeAllCallback, AfterAllCallback {
    private static volatile long before;

    @Override
    public void beforeAll(ExtensionContext context) {
        before = FuseMount.jnrMounts();
        System.setProperty("granary.fuse.binding", "jnr");
    }

    @Override
    public void afterAll(ExtensionContext context) {
        System.clearProperty("granary.fuse.binding");
    }

    /** Mounts made on jnr-fuse since the class started. */
    static long mountsSinceStart() {
        return FuseMount.jnrMounts() - before;
    }
}
