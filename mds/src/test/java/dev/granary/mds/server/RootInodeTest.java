package dev.granary.mds.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.google.protobuf.ByteString;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.MkdirRequest;
import dev.granary.mds.proto.Status;
import dev.granary.mds.schema.MdsSchema;
import dev.granary.mds.schema.proto.InodeRecord;
import dev.granary.raft.KvTxn;
import dev.granary.raft.RocksKv;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The state machine stops looking the root inode up once an entry found it, and looks again in a
 * database it is given afresh ({@link MdsStateMachine#databaseOpened}, as after a Raft snapshot
 * install): the first entry applied to an empty database always makes the root there.
 */
class RootInodeTest {
    @TempDir
    Path tmp;

    private static long apply(MdsStateMachine sm, RocksKv kv, long index, String name) throws Exception {
        MdsRequest r = MdsRequest.newBuilder().setNowNs(1_000_000L * index).setMkdir(MkdirRequest.newBuilder()
                .setParent(MdsSchema.ROOT_INO).setName(ByteString.copyFromUtf8(name)).setMode(0755)).build();
        KvTxn t = kv.newTxn();
        MdsResponse reply = MdsResponse.parseFrom(sm.apply(index, r.toByteArray(), t));
        kv.commit(t, 1, index);
        assertEquals(Status.OK, reply.getStatus(), "mkdir " + name);
        return reply.getAttr().getIno();
    }

    @Test
    void theRootIsMadeInEveryDatabaseTheStateMachineIsGiven() throws Exception {
        MdsStateMachine sm = new MdsStateMachine();
        try (RocksKv a = RocksKv.open(tmp.resolve("a"), sm.columnFamilies());
             RocksKv b = RocksKv.open(tmp.resolve("b"), sm.columnFamilies())) {
            sm.databaseOpened();
            assertNull(MdsSchema.getInode(a, MdsSchema.ROOT_INO, MdsSchema.FIRST_EPOCH), "empty database");
            apply(sm, a, 1, "x");
            apply(sm, a, 2, "y"); // finds the root: looked up no more
            InodeRecord rootA = MdsSchema.getInode(a, MdsSchema.ROOT_INO, MdsSchema.FIRST_EPOCH);
            assertNotNull(rootA);
            assertEquals(4, rootA.getNlink(), "the root of a holds x and y");

            sm.databaseOpened(); // b replaces a, as a snapshot install replaces the database
            apply(sm, b, 1, "z");
            InodeRecord rootB = MdsSchema.getInode(b, MdsSchema.ROOT_INO, MdsSchema.FIRST_EPOCH);
            assertNotNull(rootB, "the first entry applied to b made its root");
            assertEquals(3, rootB.getNlink(), "the root of b holds z");
            assertEquals(040755, rootB.getMode());
            // made by the entry with all its times = the entry's; a root read as missing and then
            // changed by the mkdir would keep an atime of 0 (a replica diverging from the others)
            assertEquals(1_000_000L, rootB.getAtimeNs(), "root atime");
        }
    }
}
