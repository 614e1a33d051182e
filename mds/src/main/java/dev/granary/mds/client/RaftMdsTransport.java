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
    /** Raft reads in flight at most per transport; reads arriving meanwhile are batched ({@link RequestCombiner}). */
    static final int READS_IN_FLIGHT = 1;
    /** Raft writes in flight at most per transport; mutations arriving meanwhile share the next log entry ({@link RequestCombiner}). */
    static final int WRITES_IN_FLIGHT = 1;

    private final RaftKvClient client;
    private final boolean ownsClient;
    private final RequestCombiner reads = new RequestCombiner(RequestCombiner.Kind.READS, this::readOnce, READS_IN_FLIGHT);
    private final RequestCombiner writes = new RequestCombiner(RequestCombiner.Kind.WRITES, this::writeOnce, WRITES_IN_FLIGHT);

    /** Uses {@code client}; closes it on {@link #close()} when {@code ownsClient}. */
    public RaftMdsTransport(RaftKvClient client, boolean ownsClient) {
        this.client = Objects.requireNonNull(client, "client");
        this.ownsClient = ownsClient;
    }

    /** Connects to the MDS group {@code clusterName} of {@code peers} with the default retry budget. */
    public static RaftMdsTransport connect(String clusterName, List<PeerSpec> peers) {
        return new RaftMdsTransport(new RaftKvClient(clusterName, peers), true);
    }

    /**
     * {@inheritDoc} Concurrent mutations of several threads share Raft log entries (group commit,
     * {@link RequestCombiner}); each is committed when its call returns.
     *
     * @throws FsException EIO when the group is unavailable or refuses the request
     */
    @Override
    public MdsResponse write(MdsRequest request) {
        return writes.call(request);
    }

    private MdsResponse writeOnce(MdsRequest request) {
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
        return reads.call(request);
    }

    /**
     * {@inheritDoc} Here: straight to the Raft client, beside the batched reads, any number in flight.
     *
     * @throws FsException EIO when the group is unavailable or refuses the request
     */
    @Override
    public MdsResponse readBulk(MdsRequest request) {
        return readOnce(request);
    }

    /** Reads that went out in batches with other threads' reads, and those batches (tests, status). */
    public long[] batchedReads() {
        return new long[] {reads.batchedRequests(), reads.batches()};
    }

    /** Mutations that went out in batch_writes with other threads' mutations, and those batches (tests, status). */
    public long[] batchedWrites() {
        return new long[] {writes.batchedRequests(), writes.batches()};
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
