package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.tools.prereq.Prerequisites;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The rows of docs/SEMANTICS.md through one real FUSE mount of a MiniCluster (3 MDS, 2 OSS,
 * embedded S3). Each scenario is a Python script of POSIX calls ({@code posix_semantics.py}
 * in the test resources: stdlib {@code os}, {@code errno}, {@code mmap}, {@code ctypes}) that
 * prints one line per call, the value or the errno name; it runs in a fresh directory on the
 * mount and in one on the local filesystem, and the two outputs must be equal line for line.
 * Key lines are also asserted literally, so a scenario cannot pass by doing nothing. Calls that
 * SEMANTICS.md documents as different from Linux (mknod of FIFOs, fallocate, renameat2 flags,
 * st_blocks, atime, statfs figures) are checked on Granary alone against the documented values.
 */
class PosixSemanticsTest {
    static final String PY = "/usr/bin/python3";

    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static Path mnt;
    static Path local;
    static Path script;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Assumptions.assumeTrue(Files.isExecutable(Path.of(PY)), "SKIPPED: no " + PY);
        Prerequisites.ensureFuse();
        // uid 1000 runs some scenarios: it must be able to walk down to both directories.
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
        cluster = MiniCluster.start(tmp.resolve("cluster"));
        mnt = tmp.resolve("mnt");
        cluster.mount(mnt);
        local = Files.createDirectories(tmp.resolve("local"));
        script = tmp.resolve("posix_semantics.py");
        try (InputStream in = PosixSemanticsTest.class.getResourceAsStream("/posix_semantics.py")) {
            Files.copy(in, script);
        }
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rw-r--r--"));
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    /** Runs one scenario in {@code dir} (as root, or as uid/gid 1000 with no groups); returns its output. */
    static String run(String scenario, Path dir, boolean asUser1000, String... more) throws Exception {
        return runAs(asUser1000 ? "setpriv --reuid 1000 --regid 1000 --clear-groups " : "", scenario, dir, more);
    }

    /** Runs one scenario in {@code dir} behind the command prefix {@code as} ("" for root, or a setpriv call). */
    static String runAs(String as, String scenario, Path dir, String... more) throws Exception {
        String cmd = as + PY + " " + script + " " + scenario + " '" + dir + "'";
        for (String m : more) {
            cmd += " '" + m + "'";
        }
        return Shell.ok(tmp, cmd);
    }

    /** Fresh directories {@code local/name} and {@code mnt/name}; on Granary with 64 KiB stripes if asked. */
    static Path[] dirs(String name, boolean smallStripes) throws Exception {
        Path l = Files.createDirectory(local.resolve(name));
        Path g = Files.createDirectory(mnt.resolve(name));
        if (smallStripes) {
            String layout = Shell.ok(tmp, PY + " -c \"import os, sys; os.setxattr(sys.argv[1], 'granary.layout', b'stripe_size=65536');"
                    + " print(os.getxattr(sys.argv[1], 'granary.layout').decode())\" '" + g + "'");
            assertTrue(layout.contains("stripe_size=65536"), layout);
        }
        return new Path[] {l, g};
    }

    /** Runs {@code scenario} locally and on Granary, asserts equal outputs, returns the output. */
    static String compare(String scenario, boolean smallStripes) throws Exception {
        Path[] d = dirs(scenario, smallStripes);
        String expected = run(scenario, d[0], false);
        String actual = run(scenario, d[1], false);
        assertEquals(expected, actual, scenario + ": local filesystem (expected) vs Granary (actual)");
        return actual;
    }

    /** Asserts that {@code out} has each of {@code lines} as a whole line. */
    static void hasLines(String out, String... lines) {
        List<String> got = out.lines().toList();
        for (String l : lines) {
            assertTrue(got.contains(l), "missing line \"" + l + "\" in:\n" + out);
        }
    }

    @Test
    void openCreateExclTruncAppendAndNames() throws Exception {
        String out = compare("open", false);
        hasLines(out,
                "O_CREAT|O_EXCL of an existing file: EEXIST",
                "O_CREAT|O_EXCL of an existing directory: EEXIST",
                "O_TRUNC: ok (0, b'abc')",
                "open of a missing file: ENOENT",
                "open of a directory for writing: EISDIR",
                "open below a file: ENOTDIR",
                "read(2) of a directory: EISDIR",
                "create a 255-byte name: ok",
                "create a 256-byte name: ENAMETOOLONG",
                "create a 255-byte UTF-8 name (127 x e-acute + a): ok",
                "create a 256-byte UTF-8 name (128 x e-acute): ENAMETOOLONG",
                "mkdir .: EEXIST",
                "mkdir ..: EEXIST",
                "mkdir with a missing parent: ENOENT",
                "mkdir below a file: ENOTDIR",
                "open of an empty path: ENOENT",
                "select/poll of a regular file (ready to read and write): ok (1, 1)");
        assertTrue(out.contains("O_APPEND: ok (5, 300008, b'abcXY"), out);
    }

    /**
     * Names are bytes (POSIX: any byte but '/' and NUL): Latin-1, invalid UTF-8, control bytes and a
     * newline are created, listed, stat'ed, read, renamed, linked, symlinked (as targets too) and
     * unlinked exactly as on a local filesystem, and a UTF-8 name stays a different name from its
     * Latin-1 look-alike. Before names were carried as bytes, every undecodable byte arrived as
     * U+FFFD and such names could not be created.
     */
    @Test
    void namesThatAreNotUtf8BehaveAsOnALocalFilesystem() throws Exception {
        String out = compare("byte_names", false);
        hasLines(out,
                "create b'bad-\\xff\\xfe': ok",
                "a 255-byte name of 0xff bytes: ok",
                "a 256-byte name of 0xff bytes: ENAMETOOLONG",
                "readlink: ok b'dir-\\xfe/in-\\xfd'",
                "read through the link: ok b'inside'",
                "the UTF-8 twin of a Latin-1 name is another name: ENOENT",
                "nlink: ok 2");
    }

    @Test
    void sparseFileHolesReadAsZerosAcrossStripes() throws Exception {
        String out = compare("sparse", true);
        hasLines(out,
                "size: ok 327695",
                "holes read as zeros: ok (True, True)",
                "pread across a stripe boundary in a hole: ok True",
                "pread at EOF: ok b''",
                "ftruncate up then one byte in the middle: ok (196609, 196608, b'Z')",
                "8 MiB hole then 4 bytes: ok (8388612, True, b'tail')");
    }

    @Test
    void truncateDownAndUpAcrossAStripeBoundary() throws Exception {
        String out = compare("truncate", true);
        hasLines(out,
                "truncate(2) down inside the last stripe: ok (300000, True)",
                "truncate(2) down across a stripe boundary: ok 65636",
                "kept bytes and zeros after down then up: ok (393216, True, True)",
                "truncate(2) down to exactly one stripe: ok True",
                "ftruncate up: ok (131073, True)",
                "truncate(2) of a directory: EISDIR",
                "ftruncate of a read-only descriptor: EINVAL");
    }

    @Test
    void renameRules() throws Exception {
        String out = compare("rename", false);
        hasLines(out,
                "rename a directory onto a non-empty directory: ENOTEMPTY",
                "rename a file onto a directory: EISDIR",
                "rename a directory onto a file: ENOTDIR",
                "rename a directory into its own subtree: EINVAL",
                "rename a file replaces a file: ok (b'one', False)",
                "rename a directory replaces an empty directory: ok (['sub'], False)",
                "nlink of p1 and p2 after: ok (2, 3)",
                "rename onto another hard link of the same file keeps both: ok ['f2', 'f3']");
    }

    @Test
    void unlinkRmdirAndMknodOfARegularFile() throws Exception {
        String out = compare("remove", false);
        hasLines(out,
                "unlink of a directory: EISDIR",
                "rmdir of a file: ENOTDIR",
                "rmdir of a non-empty directory: ENOTEMPTY",
                "mknod of a regular file: ok -rw-------",
                "listing: ok ['full', 'reg']");
    }

    @Test
    void symlinksReadlinkAndLoops() throws Exception {
        String out = compare("symlink", false);
        hasLines(out,
                "open of a symlink loop: ELOOP",
                "path through a loop: ELOOP",
                "readlink of a file: EINVAL",
                "symlink onto an existing name: EEXIST",
                "symlink with a 4095-byte target: ok (True, 4095)",
                "read through a directory symlink: ok b'through the link'");
    }

    @Test
    void utimensatWithExplicitNowAndOmittedTimes() throws Exception {
        String out = compare("times", false);
        hasLines(out,
                "os.utime with ns: ok (1600000000123456789, 1500000000987654321)",
                "UTIME_OMIT both: ok True",
                "explicit both with utimensat: ok (1300000000000000007, 1200000000000000009)",
                "os.utime now: ok (True, True)",
                "utime sets ctime to now: ok (True, True)");
    }

    @Test
    void utimensatWithOneTimeOmittedSetsTheOther() throws Exception {
        String out = compare("times_omit", false);
        hasLines(out,
                "UTIME_OMIT atime, explicit mtime: ok (1600000000123456789, 1400000000000000005)",
                "UTIME_NOW atime, UTIME_OMIT mtime: ok (True, 1400000000000000005)",
                "touch -m (atime unchanged): ok (0, '', True, 1612325106250000000)",
                "touch -a: ok (0, '', (1546300800500000000, 1612325106250000000))");
    }

    /**
     * The kernel caches attributes for attr_timeout (1 s): a stat before a change must not hide
     * the change from a stat after it on the same client. Before flush and fsync made the kernel
     * forget the attributes, a stat while the file was open cached the mtime from before the
     * append (the client sets the new one at the commit), and the stat after close showed it.
     */
    @Test
    void ownChangesShowInStatAtOnce() throws Exception {
        String out = compare("own_changes", false);
        hasLines(out, "size while open: ok 110", "mtime while open, before close: the write set it: ok True",
                "size and mtime after append and close: ok (110, True)",
                "mtime after close is the one the open file showed: ok True",
                "mtime after pwrite and fsync, still open: ok True",
                "size after truncate: ok 7",
                "mode after chmod: ok 0o600",
                "mtime after utime: ok 2000.0");
    }

    @Test
    void directoryNlinkAndHardLinksAcrossDirectories() throws Exception {
        String out = compare("nlink", false);
        hasLines(out,
                "nlink of a new directory: ok 2",
                "nlink after 3 subdirectories and a file: ok 5",
                "nlink after rmdir: ok 4",
                "link across directories: ok (2, b'data')",
                "a third name: ok 3",
                "link of a directory: EPERM",
                "unlink two names, the third still reads: ok b'data'",
                "stat of the last name after its data changed through it: ok (7, b'changed')");
    }

    @Test
    void chmodChownAndPermissionsOfAnotherUid() throws Exception {
        Path[] d = dirs("perm", false);
        String expectedRoot = run("perm_root", d[0], false);
        assertEquals(expectedRoot, run("perm_root", d[1], false), "as root: local (expected) vs Granary (actual)");
        hasLines(expectedRoot,
                "chown by root clears suid and sgid: ok ('0o755', 1001)",
                "mkdir in a setgid directory: ok (1000, '2')",
                "a write by root keeps set-user-ID: ok 0o4755");
        String expectedUser = run("perm_user", d[0], true);
        assertEquals(expectedUser, run("perm_user", d[1], true), "as uid 1000: local (expected) vs Granary (actual)");
        hasLines(expectedUser,
                "whoami: ok (1000, 1000, [])",
                "a write-only write clears set-user-ID and set-group-ID: ok ('0o755', b'xy')",
                "an append clears set-user-ID and set-group-ID: ok ('0o755', b'xy')",
                "a read-write write clears set-user-ID: ok 0o755",
                "a write keeps set-group-ID of a file without group execute: ok 0o2664",
                "read a 0600 root file: EACCES",
                "open a 0644 root file for writing: EACCES",
                "create in a 0755 root directory: EACCES",
                "chmod a root file: EPERM",
                "chown its own file to root: EPERM",
                "non-root chmod g+s of its file in a group it is not in: ok 0o640",
                "explicit times on a 0666 root file: EPERM",
                "sticky: unlink a root file: EPERM",
                "sticky: rename a root file: EPERM");
        assertEquals(String.join("\n",
                "get granary.layout of a root directory: ok True",
                // the kernel refuses first (default_permissions: setting an xattr outside
                // user.* needs write permission), before Granary's owner check (EPERM)
                "set granary.layout of a root directory: EACCES",
                "set granary.layout of its own file with data: EBUSY",
                "set granary.layout of its own empty file: ok True",
                "set a bad granary.layout: EINVAL", ""), run("layout_user", d[1], true));
    }

    /**
     * The execute bit and directory search as Linux has them: execve(2) and access(X_OK) need an
     * x bit of the caller's class (owner, else group incl. supplementary groups, else other; the
     * class is chosen first), root gets X_OK on a regular file only if some x bit is set and
     * always on a directory, an execute-only binary runs without read permission, and every
     * component of a path needs search permission. As root, then as uid 1000 (gid 1000,
     * supplementary group 1001), each compared line by line with the local filesystem.
     */
    @Test
    void executeBitAndDirectorySearchOfRootAndAnotherUid() throws Exception {
        Path[] d = dirs("exec", false);
        String expectedRoot = run("exec_root", d[0], false);
        assertEquals(expectedRoot, run("exec_root", d[1], false), "as root: local (expected) vs Granary (actual)");
        hasLines(expectedRoot,
                "root: access X_OK of a 0644 file: EACCES",
                "root: execve of a 0644 file: EACCES",
                "root: access X_OK of a 0001 file: ok",
                "root: execve of a 0744 file: ok (0, 'ran')",
                "root: access X_OK of a 0000 directory: ok");
        String user = "setpriv --reuid 1000 --regid 1000 --groups 1001 ";
        String expectedUser = runAs(user, "exec_user", d[0]);
        assertEquals(expectedUser, runAs(user, "exec_user", d[1]), "as uid 1000: local (expected) vs Granary (actual)");
        hasLines(expectedUser,
                "whoami: ok (1000, 1000, [1001])",
                "execve of x755: ok (0, 'ran')",
                "access X_OK of x744: EACCES",
                "execve of x744: EACCES",
                "execve of x750_g1001: ok (0, 'ran')",
                "execve of x750_g1002: EACCES",
                "execve of x707_g1000: EACCES",
                "execve of x070_own: EACCES",
                "execve of a 0711 binary (execute without read): ok (0, '')",
                "read d700/inner/g (two components): EACCES",
                "execve of d700/x755: EACCES",
                "stat of d744/f: EACCES",
                "listdir of d744: ok ['f', 'inner', 'x755']",
                "read d711/inner/g (two components): ok b'deep'",
                "listdir of d711: EACCES");
    }

    @Test
    void utimeNowByANonOwnerNeedsOnlyWritePermission() throws Exception {
        Path[] d = dirs("perm-utime", false);
        run("perm_root", d[0], false);
        run("perm_root", d[1], false);
        String expected = run("utime_user", d[0], true);
        assertEquals(String.join("\n", "UTIME_NOW on a 0666 root file: ok", "UTIME_NOW on a 0644 root file: EACCES", ""), expected);
        assertEquals(expected, run("utime_user", d[1], true), "as uid 1000: local (expected) vs Granary (actual)");
    }

    /**
     * Each name of a hard link has its own kernel inode (libfuse2 path API); while the kernel
     * cached attributes (attr_timeout 1 s), a stale, smaller size of one name cut reads of data
     * written through another. The kernel now keeps no attributes of a file with several names
     * (PooledFuseFS.limitAttributeCaching), and every open makes it forget the file's attributes.
     */
    @Test
    void writeThroughOneHardLinkIsReadInFullThroughAnother() throws Exception {
        String out = compare("link_write", false);
        hasLines(out, "O_TRUNC write through the second name, read through the first: ok b'new bytes'",
                "O_TRUNC write through the third name, read through the first: ok b'longer new bytes'");
    }

    /** st_blksize of a regular file is its stripe size, so that stdio and cp use large I/O (SEMANTICS.md). */
    @Test
    void stBlksizeIsTheStripeSize() throws Exception {
        Path g = Files.createDirectory(mnt.resolve("blksize"));
        assertEquals("st_blksize: ok 4194304\n", run("blksize", g, false));
    }

    @Test
    void xattrSetGetListRemoveAndFlags() throws Exception {
        String out = compare("xattr", false);
        hasLines(out,
                "getxattr of an absent name: ENODATA",
                "XATTR_CREATE of an existing name: EEXIST",
                "XATTR_REPLACE of an absent name: ENODATA",
                "listxattr: ok ['user.a', 'user.b', 'user.bin']",
                "removexattr of an absent name: ENODATA",
                "256-byte name: ERANGE",
                "getxattr into a small buffer: ERANGE",
                "security.capability of a new file: ENODATA",
                "get security.capability: ok True",
                "a write removes security.capability: ENODATA",
                "the write landed: ok b'xy'",
                "a write-only write removes security.capability: ENODATA",
                "the write-only write landed: ok b'xyz'");
        Path g = Files.createDirectory(mnt.resolve("xattr-limits"));
        assertEquals(String.join("\n",
                "64 KiB value: ok 65536",
                "64 KiB + 1 value: E2BIG",
                "system.posix_acl_access: ENOTSUP",
                "granary.layout is not listed: ok ['user.big']", ""), run("xattr_limits", g, false));
    }

    @Test
    void statfsFigures() throws Exception {
        Path g = Files.createDirectory(mnt.resolve("statfs"));
        assertEquals(String.join("\n",
                "f_blocks * f_frsize (1 PiB): ok " + (1L << 50),
                "f_blocks >= f_bfree >= f_bavail: ok True",
                "f_files >= f_ffree: ok (True, True)",
                "f_bsize, f_namemax: ok (True, 255)",
                "f_bfree drops by at least 2 MiB after writing 2 MiB: ok True",
                "f_ffree drops by at least 21 after 21 creates: ok True",
                "f_files - f_ffree grows by at least 21: ok True", ""), run("statfs", g, false));
    }

    @Test
    void mmapReadPrivateAndSharedMappings() throws Exception {
        String out = compare("mmap", true);
        hasLines(out,
                "mmap read: ok (3145745, '81a4392bdd5e518f', True, True)",
                "private mapping changes stay private: ok (b'PRIV', True)",
                "shared writable mapping is written back: ok (3145745, b'HELLO', b'WORLD', True, True)");
    }

    /**
     * While four threads extend a file through their own descriptors, the size a fifth
     * descriptor's fstat shows never goes down, and the bytes are right at the end; 20 runs on
     * the default 4 MiB stripe, where the writes hand the stripe's buffer from handle to handle.
     * Regression: a stat that looked at the handles while a write moved the buffer between two of
     * them, or that read the cached attributes just before a commit emptied a handle, answered a
     * smaller size (often 0) in a quarter to half of such runs; commits of one file answered out
     * of order could also leave the smaller size cached (the MDS now makes ctime grow per inode).
     */
    @Test
    void fstatSizeNeverGoesDownWhileThreadsExtendAFile() throws Exception {
        String out = compare("fstat_size", false);
        hasLines(out, "runs of four threads extending a file while a fifth fstats it, sizes that went down or bytes wrong: ok 0");
    }

    /**
     * Writes through several descriptors of one file in one process land in time order, whatever
     * the order of close and fsync (regression: closing the later writer first lost its bytes to
     * the earlier writer's whole-stripe commit), also mixed with an O_APPEND descriptor,
     * ftruncate and reopens over 64 KiB stripes; four threads writing interleaved 4 KiB chunks
     * through their own descriptors (regression: their racing uploads lost bytes).
     */
    @Test
    void writesThroughSeveralDescriptorsLandInTimeOrder() throws Exception {
        String out = compare("descriptors", true);
        hasLines(out,
                "100-byte file: the later write through B wins, B closed first: ok (100, b'ddddddddddcc', b'ccccc')",
                "153600-byte file: the later write through B wins, B closed first: ok (153600, b'ddddddddddcc', b'ccccc.....')",
                "read through B after fsync(B): ok b'ddddddddddcc'",
                "a third descriptor reads both writes: ok b'ddddddddddcc'",
                "after both closes: ok b'ddddddddddcc'",
                "disjoint writes in one stripe through two descriptors: ok (b'AAAAAAAAAA..', b'..BBBBBaaaaa..', b'..AAAAAAAAAA..', 'c6d5cbed0b99e2cb')",
                "four descriptors writing interleaved chunks: ok (1048576, b'AAAABBBB', 'd833054ba7a8b548')",
                "four threads writing interleaved chunks through their own descriptors: ok (16777216, 'fb9212d74e14452a')",
                "runs of four threads closing their descriptors while the others write, with a byte wrong: ok 0",
                "mix: the file after all closes: ok (472957, 'ad53b6123c065407')");
        assertTrue(out.lines().filter(l -> l.startsWith("mix step")).count() >= 50, out);
    }

    /** A store through a shared mapping of an O_APPEND descriptor changes bytes in place (regression: the page was appended). */
    @Test
    void sharedMappingOfAnAppendDescriptorWritesInPlace() throws Exception {
        hasLines(compare("mmap_append", false),
                "shared mapping of an O_APPEND descriptor: ok (74, b'012MMAPWRTabcdef0123', b'ef+tail+more')");
    }

    /** An unsaved write through one name is read at once through another name whose old pages were cached (helper-found). */
    @Test
    void anUnsavedWriteThroughOneNameIsReadThroughTheOther() throws Exception {
        String want = "b'bcXXXXXXXXXXXXXXXXtu'";
        hasLines(compare("link_unsaved", false),
                "8192 bytes: an unsaved write through one name, read through the other: ok " + want,
                "8192 bytes: after its close: ok " + want,
                "1048576 bytes: an unsaved write through one name, read through the other: ok " + want,
                "1048576 bytes: after its close: ok " + want);
    }

    @Test
    void readdirOf2000EntriesIsCompleteAndInByteOrder() throws Exception {
        String out = compare("readdir", false);
        hasLines(out,
                "entries: ok (2000, 2000, True)",
                "nlink of the directory: ok 2002",
                "after removing 500: ok (1500, True)",
                "listdir of a file: ENOTDIR");
        assertEquals("byte order: ok True\n", run("listdir_order", mnt.resolve("readdir"), false));
    }

    /**
     * readdir(3) gives each entry's type and inode number as a local filesystem does, so
     * {@code os.walk} and {@code find} need no stat per entry (helper-found: every entry came
     * with DT_UNKNOWN and d_ino 4294967295).
     */
    @Test
    void readdirGivesEachEntrysTypeAndInode() throws Exception {
        hasLines(compare("dirent_types", false),
                "types: ok [('f', 'DT_REG'), ('hard', 'DT_REG'), ('ln', 'DT_LNK'), ('sub', 'DT_DIR')]",
                "d_ino is st_ino: ok True");
    }

    /** What SEMANTICS.md documents as unsupported or different from Linux, on Granary alone. */
    @Test
    void documentedDifferencesFailLoudly() throws Exception {
        Path g = Files.createDirectory(mnt.resolve("unsupported"));
        assertEquals(String.join("\n",
                "fallocate: ENOTSUP",
                "ioctl FS_IOC_GETFLAGS: ENOTTY",
                "mkfifo: EPERM",
                "mknod of a character device: EPERM",
                "renameat2 RENAME_NOREPLACE onto an existing name: EEXIST",
                "renameat2 RENAME_NOREPLACE onto a new name: EINVAL",
                "renameat2 RENAME_EXCHANGE: EINVAL",
                "st_blocks = ceil(size/512): ok 1",
                "st_blocks counts holes: ok 20481",
                "reads do not update atime: ok True",
                "rmdir of a directory with an unlinked file still open: ENOTEMPTY",
                "rmdir once that file is closed: ok",
                "rmdir of the mount root: EBUSY", ""), run("unsupported", g, false, mnt.toString()));
    }
}
