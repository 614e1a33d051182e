package dev.granary.mds.client;

import dev.granary.mds.proto.DirEntry;
import java.util.List;

/** One page of a directory listing: entries in name byte order, and whether more follow. */
public record ReadDirPage(List<DirEntry> entries, boolean more) {}
