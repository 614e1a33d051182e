package dev.granary.mds.client;

import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.DirEntry;
import java.util.List;

/**
 * One page of a directory listing: entries in name byte order, whether more follow, and the
 * directory's attributes as of the same read ({@code dir}, null from an MDS that does not send
 * them). The directory's {@code ctime_ns} moves with every change of its entries (the MDS's
 * {@code Namespace.touchDir}, strictly increasing), so it versions the listing.
 */
public record ReadDirPage(List<DirEntry> entries, boolean more, Attr dir) {}
