package dev.granary.tools.cli;

import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.OssInfo;
import dev.granary.mds.proto.OstInfo;
import dev.granary.mds.proto.StatFsReply;
import dev.granary.raft.PeerStatus;
import dev.granary.raft.RaftKvClient;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.config.Sizes;
import java.util.concurrent.Callable;
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
        try (RaftKvClient raft = new RaftKvClient(cfg.cluster, Nodes.peers(cfg))) {
            for (PeerStatus p : raft.peerStatus()) {
                System.out.println("  MDS " + p.id() + "  " + p.address() + "  " + p.role()
                        + (p.reachable() ? "  term " + p.term() + "  applied " + p.appliedIndex() + "  committed "
                                + p.committedIndex() + "  snapshot " + p.snapshotIndex() : "  (" + p.error().orElse("") + ")"));
            }
        }
        try (MdsClient mds = Nodes.mdsClient(cfg)) {
            StatFsReply s = mds.statfs(Nodes.ROOT);
            for (OstInfo o : mds.listOsts(Nodes.ROOT)) {
                System.out.println("  OST " + o.getIndex() + "  " + o.getEndpoint() + "  bucket " + o.getBucket() + "  prefix '" + o.getPrefix() + "'");
            }
            for (OssInfo o : mds.listOss(Nodes.ROOT)) {
                System.out.println("  OSS " + o.getAddress());
            }
            System.out.println("  used " + Sizes.format(s.getUsedBytes()) + " in " + s.getUsedInodes() + " inodes");
        }
        return 0;
    }
}
