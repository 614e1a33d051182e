package dev.granary.mds.client;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.granary.mds.FsException;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import dev.granary.raft.PeerSpec;
import dev.granary.raft.RaftKvClient;
import dev.granary.raft.RaftStateMachineException;
import dev.granary.raft.RaftUnavailableException;
import java.util.List;
import java.util.Objects;

/**
 * An {@link MdsTransport} over a Raft group of MDS peers: mutations through the Raft log
 * ({@link RaftKvClient#write}), reads linearizable ({@link RaftKvClient#read}). Thread-safe.
 * Transport failures become {@link FsException} with {@link Status#EIO} (the cause attached): no
 * leader within the client's retry budget, or a peer refusing the request (stopped after a failed
 * apply); the write may or may not have been applied in the first case.
 */
public final class RaftMdsTransport implements MdsTransport {
    /** Raft reads in flight at most per transport; reads arriving meanwhile are batched ({@link ReadCombiner}). */
    static final int READS_IN_FLIGHT = 1;

    private final RaftKvClient client;
    private final boolean ownsClient;
    private final ReadCombiner reads = new ReadCombiner(this::readOnce, READS_IN_FLIGHT);

    /** Uses {@code client}; closes it on {@link #close()} when {@code ownsClient}. */
    public RaftMdsTransport(RaftKvClient client, boolean ownsClient) {
        this.client = Objects.requireNonNull(client, "client");
        this.ownsClient = ownsClient;
    }

    /** Connects to the MDS group {@code clusterName} of {@code peers} with the default retry budget. */
    public static RaftMdsTransport connect(String clusterName, List<PeerSpec> peers) {
        return new RaftMdsTransport(new RaftKvClient(clusterName, peers), true);
    }

    /** {@inheritDoc} @throws FsException EIO when the group is unavailable or refuses the request */
    @Override
    public MdsResponse write(MdsRequest request) {
        try {
            return parse(client.write(request.toByteArray()));
        } catch (RaftUnavailableException | RaftStateMachineException e) {
            throw new FsException(Status.EIO, "MDS write failed: " + e.getMessage(), e);
        }
    }

    /**
     * {@inheritDoc} Concurrent reads of several threads share Raft reads ({@link ReadCombiner}).
     *
     * @throws FsException EIO when the group is unavailable or refuses the request
     */
    @Override
    public MdsResponse read(MdsRequest request) {
        return reads.read(request);
    }

    /** Reads that went out in batches with other threads' reads, and those batches (tests, status). */
    public long[] batchedReads() {
        return new long[] {reads.batchedReads(), reads.batches()};
    }

    private MdsResponse readOnce(MdsRequest request) {
        try {
            return parse(client.read(request.toByteArray()));
        } catch (RaftUnavailableException | RaftStateMachineException e) {
            throw new FsException(Status.EIO, "MDS read failed: " + e.getMessage(), e);
        }
    }

    private static MdsResponse parse(byte[] reply) {
        try {
            return MdsResponse.parseFrom(reply);
        } catch (InvalidProtocolBufferException e) {
            throw new FsException(Status.EIO, "malformed MdsResponse from the MDS: " + e.getMessage(), e);
        }
    }

    /** Closes the Raft client if owned. */
    @Override
    public void close() {
        if (ownsClient) {
            client.close();
        }
    }
}
