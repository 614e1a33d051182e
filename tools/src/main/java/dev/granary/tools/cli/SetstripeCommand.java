package dev.granary.tools.cli;

import dev.granary.client.vfs.LayoutXattr;
import dev.granary.tools.UserError;
import dev.granary.tools.config.Sizes;
import dev.granary.tools.layout.NativeXattr;
import dev.granary.tools.layout.NativeXattr.XattrException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code granary setstripe}: sets the layout of a directory (inherited by files created in it)
 * or of a new, empty file, with Lustre's {@code lfs setstripe} flag names. A PATH that does not
 * exist is created as an empty file with that layout, as {@code lfs setstripe} does. Works
 * through the mount, by writing the virtual xattr {@value LayoutXattr#NAME}; the MDS checks
 * ownership (POSIX: owner or root).
 */
@Command(name = "setstripe", mixinStandardHelpOptions = true,
        description = {"Set the striping layout of a directory (the default for new files in it) or of a new file.",
                "Flags as Lustre's lfs setstripe. A missing PATH is created as an empty file.", "",
                "Example:  granary setstripe -c -1 -S 4M /mnt/train/shards",
                "          granary setstripe -c 1 -i 0 /mnt/train/small"})
public final class SetstripeCommand implements Callable<Integer> {
    @Option(names = {"-c", "--stripe-count"}, paramLabel = "COUNT",
            description = "Number of OSTs to stripe over; -1 = all OSTs.")
    Integer count;

    @Option(names = {"-S", "--stripe-size"}, paramLabel = "SIZE",
            description = "Bytes per stripe, a multiple of 64k (e.g. 1M, 4M, 64k).")
    String size;

    @Option(names = {"-i", "--stripe-index", "--stripe-offset"}, paramLabel = "FIRST_OST",
            description = "OST index of the first stripe; -1 = chosen per file (default).")
    Integer offset;

    @Parameters(paramLabel = "PATH", description = "Directory or file inside a Granary mount.")
    Path path;

    @Override
    public Integer call() {
        StringBuilder v = new StringBuilder();
        if (count != null) {
            if (count != -1 && count < 1) {
                throw new UserError("setstripe: stripe count must be -1 (all OSTs) or >= 1, got " + count);
            }
            v.append("stripe_count=").append(count).append(' ');
        }
        if (size != null) {
            long bytes;
            try {
                bytes = Sizes.parseBytes(size);
            } catch (IllegalArgumentException e) {
                throw new UserError("setstripe: stripe size: " + e.getMessage());
            }
            if (bytes <= 0 || bytes % dev.granary.mds.namespace.Namespace.STRIPE_ALIGN != 0
                    || bytes > dev.granary.mds.namespace.Namespace.MAX_STRIPE_SIZE) {
                throw new UserError("setstripe: stripe size must be a positive multiple of 64k up to 64m, got " + size);
            }
            v.append("stripe_size=").append(bytes).append(' ');
        }
        if (offset != null) {
            if (offset < -1) {
                throw new UserError("setstripe: stripe index must be -1 or an OST index, got " + offset);
            }
            v.append("stripe_offset=").append(offset).append(' ');
        }
        if (v.isEmpty()) {
            throw new UserError("setstripe: nothing to set: give -c, -S and/or -i");
        }
        boolean created = false;
        if (!Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            try {
                Files.createFile(path);
                created = true;
            } catch (java.nio.file.NoSuchFileException e) {
                throw new UserError("setstripe: cannot create " + path + ": no such directory " + path.getParent());
            } catch (IOException e) {
                throw new UserError("setstripe: cannot create " + path + ": " + e.getClass().getSimpleName() + " " + e.getMessage());
            }
        }
        try {
            NativeXattr.set(path.toString(), LayoutXattr.NAME, v.toString().trim().getBytes(StandardCharsets.US_ASCII));
        } catch (XattrException e) {
            if (created) {
                try {
                    Files.deleteIfExists(path);
                } catch (IOException ignored) {
                    // the error below is what matters
                }
            }
            throw new UserError("setstripe: " + path + ": " + explain(e.errno(), true));
        }
        return 0;
    }

    /** A one-line explanation of a failed layout xattr call. */
    static String explain(int errno, boolean set) {
        return switch (errno) {
            case 2 -> "no such file or directory";
            case 1 -> "not permitted: only the owner or root sets a layout";
            case 13 -> "permission denied";
            case 16 -> "the file already has data: its layout is fixed (copy it into a directory with the wanted layout)";
            case 22 -> set ? "invalid layout (stripe count above the number of OSTs, or an unknown OST index?)"
                    : "invalid argument";
            case 61, 95 -> "not in a Granary mount (no " + LayoutXattr.NAME + " attribute)";
            default -> dev.granary.mds.Errno.name(errno);
        };
    }
}
