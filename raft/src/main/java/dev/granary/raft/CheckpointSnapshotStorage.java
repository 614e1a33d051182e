package dev.granary.raft;

import java.io.File;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.ratis.server.protocol.TermIndex;
import org.apache.ratis.server.storage.FileInfo;
import org.apache.ratis.server.storage.RaftStorage;
import org.apache.ratis.statemachine.SnapshotRetentionPolicy;
import org.apache.ratis.statemachine.StateMachineStorage;
import org.apache.ratis.statemachine.impl.FileListSnapshotInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Layout of the state machine directory of one peer ({@code <group>/sm/} in Ratis' storage) and
 * the Raft snapshots in it:
 *
 * <pre>
 *   sm/db/                          the live RocksDB
 *   sm/snapshots/snapshot.T_I/      RocksDB checkpoint taken at term T, log index I (hard links)
 *   sm/snapshot-tmp/                where Ratis receives a snapshot sent by the leader
 * </pre>
 *
 * <p>Ratis' built-in snapshot transfer sends the files listed by {@link #getLatestSnapshot()}
 * relative to {@link #getSnapshotDir()}; the follower receives them into {@link #getTmpDir()} and
 * then renames the received directory to its own {@code sm/snapshots/}. Files named {@code *.md5}
 * are the digests Ratis writes next to received files; they are not part of a checkpoint.
 */
final class CheckpointSnapshotStorage implements StateMachineStorage {
    private static final Logger LOG = LoggerFactory.getLogger(CheckpointSnapshotStorage.class);
    private static final Pattern SNAPSHOT_NAME = Pattern.compile("snapshot\\.(\\d+)_(\\d+)");
    /** Snapshots kept: the newest plus one older, so a transfer in progress is less often cut off. */
    static final int SNAPSHOTS_RETAINED = 2;

    private volatile Path smDir;
    private volatile FileListSnapshotInfo latest;

    @Override
    public void init(RaftStorage raftStorage) throws IOException {
        smDir = raftStorage.getStorageDir().getStateMachineDir().toPath();
        Files.createDirectories(snapshotsDir());
        Files.createDirectories(tmpDir());
        reloadLatest();
    }

    @Override
    public void format() throws IOException {
        // Nothing to do: directories are created in init.
    }

    /** The state machine directory ({@code <group>/sm}). */
    Path smDir() {
        return smDir;
    }

    /** The live RocksDB directory. */
    Path dbDir() {
        return smDir.resolve("db");
    }

    /** Parent of all snapshot directories. */
    Path snapshotsDir() {
        return smDir.resolve("snapshots");
    }

    private Path tmpDir() {
        return smDir.resolve("snapshot-tmp");
    }

    @Override
    public File getSnapshotDir() {
        return snapshotsDir().toFile();
    }

    @Override
    public File getTmpDir() {
        return tmpDir().toFile();
    }

    /** Directory of the snapshot at (term, index). */
    Path snapshotDir(long term, long index) {
        return snapshotsDir().resolve("snapshot." + term + "_" + index);
    }

    @Override
    public FileListSnapshotInfo getLatestSnapshot() {
        return latest;
    }

    /** Directory of the latest snapshot, if any. */
    Optional<Path> latestSnapshotDir() {
        FileListSnapshotInfo info = latest;
        if (info == null) {
            return Optional.empty();
        }
        return Optional.of(snapshotDir(info.getTerm(), info.getIndex()));
    }

    /** Re-reads the snapshots directory (after a snapshot was taken or installed). */
    synchronized void reloadLatest() throws IOException {
        Optional<Snap> newest = listSnapshots().stream().max(Comparator.comparingLong(Snap::index));
        if (newest.isEmpty()) {
            latest = null;
            return;
        }
        Snap s = newest.get();
        List<FileInfo> files = new ArrayList<>();
        for (Path f : checkpointFiles(s.dir())) {
            files.add(new FileInfo(f, null)); // digest computed while sending
        }
        latest = new FileListSnapshotInfo(files, TermIndex.valueOf(s.term(), s.index()));
    }

    /** Regular files of a checkpoint directory, without Ratis' *.md5 digest files, sorted by name. */
    static List<Path> checkpointFiles(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(Files::isRegularFile)
                    .filter(p -> !p.getFileName().toString().endsWith(".md5"))
                    .sorted()
                    .toList();
        }
    }

    /**
     * Called by Ratis' state machine updater after each snapshot. Any failure is an IOException
     * (the directory streams' unchecked ones included): Ratis logs that once, while an unchecked
     * exception would send its updater into an endless retry loop (see {@link KvStateMachine#takeSnapshot}).
     */
    @Override
    public void cleanupOldSnapshots(SnapshotRetentionPolicy policy) throws IOException {
        try {
            deleteOldSnapshots(SNAPSHOTS_RETAINED);
        } catch (RuntimeException e) {
            throw new IOException("cleanup of old snapshots in " + snapshotsDir() + " failed: " + e.getMessage(), e);
        }
    }

    /** Deletes all but the {@code keep} newest snapshot directories and leftover temp dirs. */
    synchronized void deleteOldSnapshots(int keep) throws IOException {
        List<Snap> snaps = new ArrayList<>(listSnapshots());
        snaps.sort(Comparator.comparingLong(Snap::index).reversed());
        for (int i = keep; i < snaps.size(); i++) {
            deleteRecursively(snaps.get(i).dir());
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(snapshotsDir(), ".checkpoint-*")) {
            for (Path p : ds) {
                deleteRecursively(p);
            }
        }
    }

    private List<Snap> listSnapshots() throws IOException {
        List<Snap> out = new ArrayList<>();
        if (!Files.isDirectory(snapshotsDir())) {
            return out;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(snapshotsDir())) {
            for (Path p : ds) {
                Matcher m = SNAPSHOT_NAME.matcher(p.getFileName().toString());
                if (m.matches() && Files.isDirectory(p)) {
                    out.add(new Snap(Long.parseLong(m.group(1)), Long.parseLong(m.group(2)), p));
                }
            }
        }
        return out;
    }

    /**
     * Builds {@code target} as a database directory from a checkpoint: SST files (immutable) are
     * hard-linked, everything else copied, so the snapshot stays untouched by the live database.
     */
    static void materialize(Path checkpoint, Path target) throws IOException {
        Files.createDirectories(target);
        for (Path f : checkpointFiles(checkpoint)) {
            Path dst = target.resolve(f.getFileName().toString());
            if (f.getFileName().toString().endsWith(".sst")) {
                try {
                    Files.createLink(dst, f);
                    continue;
                } catch (IOException | UnsupportedOperationException e) {
                    LOG.debug("hard link of {} failed, copying: {}", f, e.toString());
                }
            }
            Files.copy(f, dst, StandardCopyOption.REPLACE_EXISTING);
        }
    }

    /** Deletes a file tree if present. */
    static void deleteRecursively(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    private record Snap(long term, long index, Path dir) {}
}
