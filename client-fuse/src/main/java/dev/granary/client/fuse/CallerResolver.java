package dev.granary.client.fuse;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.proto.Caller;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * Builds the {@link Caller} of a FUSE request: uid and gid from the FUSE context, supplementary
 * groups from the "Groups:" line of {@code /proc/<pid>/status} (libfuse2 does not pass them),
 * cached per pid for a short time (a pid's groups rarely change; pids are reused only after the
 * process exits). When the file cannot be read (process gone, other pid namespace) the caller
 * has no supplementary groups: permission checks may then deny, never wrongly allow.
 */
public final class CallerResolver {
    private final Cache<Long, int[]> groupsByPid;

    /** Caches a pid's groups for {@code ttl}. */
    public CallerResolver(Duration ttl) {
        this.groupsByPid = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(ttl).maximumSize(10_000).build();
    }

    /** The caller for a request of ({@code uid}, {@code gid}, {@code pid}). */
    public Caller resolve(long uid, long gid, long pid) {
        Caller.Builder b = Caller.newBuilder().setUid((int) uid).setGid((int) gid);
        if (pid > 0) {
            for (int g : groupsByPid.get(pid, CallerResolver::readGroups)) {
                b.addGids(g);
            }
        }
        return b.build();
    }

    /** Supplementary groups of {@code pid} from /proc, or none when unreadable. */
    static int[] readGroups(long pid) {
        try {
            List<String> lines = Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"));
            for (String line : lines) {
                if (line.startsWith("Groups:")) {
                    String rest = line.substring("Groups:".length()).trim();
                    if (rest.isEmpty()) {
                        return new int[0];
                    }
                    String[] parts = rest.split("\\s+");
                    int[] out = new int[parts.length];
                    for (int i = 0; i < parts.length; i++) {
                        out[i] = (int) Long.parseLong(parts[i]);
                    }
                    return out;
                }
            }
        } catch (IOException | RuntimeException e) {
            // the process may have exited: no supplementary groups
        }
        return new int[0];
    }
}
