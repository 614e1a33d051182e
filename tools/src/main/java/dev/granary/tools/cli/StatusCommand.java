package dev.granary.tools.cli;

import dev.granary.mds.client.LocalMdsTransport;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.namespace.Namespace;
import dev.granary.mds.proto.OssInfo;
import dev.granary.mds.proto.OstInfo;
import dev.granary.mds.proto.StatFsReply;
import dev.granary.oss.client.OssClient;
import dev.granary.oss.proto.OssStatusReply;
import dev.granary.raft.PeerStatus;
import dev.granary.raft.RaftKvClient;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.config.Sizes;
import dev.granary.tools.gc.BlockGc;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

/** {@code granary status}: each MDS peer's Raft role and log position, then what the MDS knows: OSTs, OSSes and usage. */
@Command(name = "status", mixinStandardHelpOptions = true,
        description = {"Print each MDS peer's Raft role and log indices, the registered OSTs and OSSes and the namespace usage.", "",
                "Example:  granary status -c granary-data/granary.yaml"})
public final class StatusCommand implements Callable<Integer> {
    @Mixin
    ConfigOption config;

    @Override
    public Integer call() {
        GranaryConfig cfg = config.load();
        System.out.println("cluster " + cfg.cluster + ": " + cfg.mds.size() + " MDS peers");
        boolean any = false;
        List<PeerStatus> peers;
        try (RaftKvClient raft = new RaftKvClient(cfg.cluster, Nodes.peers(cfg))) {
            peers = raft.peerStatus();
            for (PeerStatus p : peers) {
                any |= p.reachable();
                System.out.println("  MDS " + p.id() + "  " + p.address() + "  " + p.role()
                        + (p.reachable() ? "  term " + p.term() + "  applied " + p.appliedIndex() + "  committed "
                                + p.committedIndex() + "  snapshot " + p.snapshotIndex() : "  (" + p.error().orElse("") + ")"));
            }
        }
        if (!any) { // the peers were probed just above: not again through Nodes.requireReachableMds
            throw Nodes.noMdsReachable(cfg, "status", peers);
        }
        try (MdsClient mds = Nodes.mdsClient(cfg)) {
            StatFsReply s = mds.statfs(Nodes.ROOT);
            for (OstInfo o : mds.listOsts(Nodes.ROOT)) {
                System.out.println("  OST " + o.getIndex() + "  " + o.getEndpoint() + "  bucket " + o.getBucket() + "  prefix '" + o.getPrefix() + "'");
            }
            List<String> oss = mds.listOss(Nodes.ROOT).stream().map(OssInfo::getAddress).toList();
            if (!oss.isEmpty()) {
                try (OssClient client = new OssClient(oss)) {
                    for (String a : oss) {
                        System.out.println("  OSS " + a + "  " + ossLine(client, a));
                    }
                }
            }
            System.out.println("  used " + Sizes.format(s.getUsedBytes()) + " in " + s.getUsedInodes() + " inodes");
            System.out.println("  GC  " + gcLine(mds, cfg));
        }
        return 0;
    }

    /**
     * The GC queue: freed blocks waiting for deletion, and how many of them are past
     * {@code gc.grace} (the next pass deletes those); counted up to one page each
     * ({@link Namespace#GC_LIST_MAX}, shown as "10000+").
     */
    private static String gcLine(MdsClient mds, GranaryConfig cfg) {
        long deadBefore = BlockGc.deadBeforeNs(LocalMdsTransport.systemNanos(), Sizes.parseDuration(cfg.gc.grace));
        MdsClient.GcPage all = mds.gcList(Nodes.ROOT, 0, 0, Long.MAX_VALUE);
        MdsClient.GcPage due = mds.gcList(Nodes.ROOT, 0, 0, deadBefore);
        return "queue " + count(all) + " freed blocks, " + count(due) + " freed more than gc.grace (" + cfg.gc.grace
                + ") ago; " + (Sizes.parseDuration(cfg.gc.interval).isZero() ? "no timed passes (gc.interval 0s)"
                : "a pass every " + cfg.gc.interval + " on the MDS leader");
    }

    private static String count(MdsClient.GcPage p) {
        return p.blocks().size() + (p.more() ? "+" : "");
    }

    /** The read cache and S3 request counters of one OSS, or why it could not be asked. */
    private static String ossLine(OssClient client, String address) {
        try {
            OssStatusReply r = client.status(address).join();
            return "cache " + Sizes.format(r.getCacheBytes()) + "  hits " + r.getCacheHits() + "  misses "
                    + r.getCacheMisses() + (r.getDiskCache() ? "  disk cache " + Sizes.format(r.getDiskCacheBytes()) + "  disk hits "
                    + r.getDiskCacheHits() : "") + "  S3 GETs " + r.getS3Gets() + "  PUTs " + r.getS3Puts();
        } catch (CompletionException e) {
            return "(unreachable: " + Nodes.rootMessage(e) + ")";
        }
    }
}
