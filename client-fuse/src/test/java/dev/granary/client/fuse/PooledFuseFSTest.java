package dev.granary.client.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jnr.ffi.Memory;
import jnr.ffi.Pointer;
import jnr.ffi.Runtime;
import org.junit.jupiter.api.Test;

/**
 * PooledFuseFS's rewrite of libfuse2's INIT reply, on memory laid out as the kernel's and
 * libfuse2's structs (linux/fuse.h). That the kernel then sends 1 MiB reads is
 * FuseMountTest#readsReachGranaryInRequestsOfMaxRead.
 */
class PooledFuseFSTest {
    private static final Runtime RT = Runtime.getSystemRuntime();
    private static final int FUSE_MAX_PAGES = 1 << 22;
    private static final int FUSE_PARALLEL_DIROPS = 1 << 18;

    /** An INIT request (in header + fuse_init_in with {@code kernelFlags}) of protocol 7.19's 16 bytes. */
    private static Pointer initRequest(int kernelFlags) {
        Pointer req = Memory.allocateDirect(RT, 40 + 16, true);
        req.putInt(0, 56);
        req.putInt(4, 26);        // FUSE_INIT
        req.putLong(8, 77);       // unique
        req.putInt(40, 7);        // major
        req.putInt(44, 45);       // minor
        req.putInt(48, 131072);   // max_readahead
        req.putInt(52, kernelFlags);
        return req;
    }

    /** libfuse2's reply: out header (error {@code error}) and its 24-byte fuse_init_out. */
    private static Pointer initReply(int error, long unique) {
        Pointer header = Memory.allocateDirect(RT, 16, true);
        header.putInt(0, 16 + 24);
        header.putInt(4, error);
        header.putLong(8, unique);
        Pointer arg = Memory.allocateDirect(RT, 24, true);
        arg.putInt(0, 7);
        arg.putInt(4, 19);
        arg.putInt(8, 131072);
        arg.putInt(12, 0x433);    // libfuse2's flags
        arg.putShort(16, (short) 12);
        arg.putShort(18, (short) 9);
        arg.putInt(20, 131072);   // max_write
        Pointer iov = Memory.allocateDirect(RT, 32, true);
        iov.putPointer(0, header);
        iov.putLong(8, 16);
        iov.putPointer(16, arg);
        iov.putLong(24, 24);
        return iov;
    }

    @Test
    void theInitReplyAsksForLargerRequestsAndParallelDirectoryOpsKeepingLibfusesFields() {
        Pointer iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb), initReply(0, 77), 256, true);
        assertNotNull(iov);
        Pointer header = iov.getPointer(0);
        Pointer arg = iov.getPointer(16);
        assertEquals(16, iov.getLong(8));
        assertEquals(64, iov.getLong(24));
        assertEquals(16 + 64, header.getInt(0), "the header's length covers the longer reply");
        assertEquals(0, header.getInt(4));
        assertEquals(77, header.getLong(8));
        assertEquals(7, arg.getInt(0));
        assertEquals(19, arg.getInt(4));
        assertEquals(131072, arg.getInt(8));
        assertEquals(0x433 | FUSE_MAX_PAGES | FUSE_PARALLEL_DIROPS, arg.getInt(12));
        assertEquals(12, arg.getShort(16));
        assertEquals(9, arg.getShort(18));
        assertEquals(131072, arg.getInt(20));
        assertEquals(0, arg.getInt(24), "time_gran 0: the kernel keeps its own");
        assertEquals(256, arg.getShort(28));
        assertEquals(0, arg.getInt(32), "nothing else set");
    }

    @Test
    void eachFlagIsAskedForOnlyWhenTheKernelOffersIt() {
        Pointer iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb & ~FUSE_PARALLEL_DIROPS), initReply(0, 77), 256, true);
        assertEquals(0x433 | FUSE_MAX_PAGES, iov.getPointer(16).getInt(12), "a kernel without FUSE_PARALLEL_DIROPS");
        iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb & ~FUSE_MAX_PAGES), initReply(0, 77), 256, true);
        assertEquals(0x433 | FUSE_PARALLEL_DIROPS, iov.getPointer(16).getInt(12), "a kernel without FUSE_MAX_PAGES");
        assertEquals(0, iov.getPointer(16).getShort(28), "no max_pages without the flag");
        iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb), initReply(0, 77), 32, true);
        assertEquals(0x433 | FUSE_PARALLEL_DIROPS, iov.getPointer(16).getInt(12), "max_read of 32 pages asks for no more");
        iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb), initReply(0, 77), 256, false);
        assertEquals(0x433 | FUSE_MAX_PAGES, iov.getPointer(16).getInt(12), "serial directory operations asked for");
    }

    /** An INIT request of today's 64-byte fuse_init_in: {@code kernelFlags}, then {@code flags2} at byte 16. */
    private static Pointer initRequest(int kernelFlags, int flags2) {
        Pointer req = Memory.allocateDirect(RT, 40 + 64, true);
        Pointer old = initRequest(kernelFlags);
        for (int i = 0; i < 56; i++) {
            req.putByte(i, old.getByte(i));
        }
        req.putInt(0, 104);
        req.putInt(56, flags2);
        return req;
    }

    /**
     * FUSE_DIRECT_IO_ALLOW_MMAP (bit 36: bit 4 of flags2, with FUSE_INIT_EXT in flags) is asked
     * for when the kernel offers it, so that "a+" descriptors can be direct_io and still be mapped
     * shared; not when the request is too short to carry flags2 or the kernel does not offer it.
     */
    @Test
    void directIoMappingsAreAskedForWhenTheKernelOffersThem() {
        int ext = 1 << 30;
        Pointer iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb, 0x7f), initReply(0, 77), 256, true);
        Pointer arg = iov.getPointer(16);
        assertEquals(0x433 | FUSE_MAX_PAGES | FUSE_PARALLEL_DIROPS | ext, arg.getInt(12));
        assertEquals(1 << 4, arg.getInt(32), "only FUSE_DIRECT_IO_ALLOW_MMAP in flags2");
        assertTrue(PooledFuseFS.directIoAllowsMmap(iov));
        iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb, 0x7f & ~(1 << 4)), initReply(0, 77), 256, true);
        assertEquals(0x433 | FUSE_MAX_PAGES | FUSE_PARALLEL_DIROPS, iov.getPointer(16).getInt(12), "not offered: no FUSE_INIT_EXT either");
        assertEquals(0, iov.getPointer(16).getInt(32));
        assertFalse(PooledFuseFS.directIoAllowsMmap(iov));
        iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb & ~ext, 0x7f), initReply(0, 77), 256, true);
        assertFalse(PooledFuseFS.directIoAllowsMmap(iov), "flags2 is not there without FUSE_INIT_EXT");
        assertFalse(PooledFuseFS.directIoAllowsMmap(PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb), initReply(0, 77), 256, true)),
                "a 7.19 request carries no flags2");
        iov = PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb & ~FUSE_MAX_PAGES & ~FUSE_PARALLEL_DIROPS, 1 << 4), initReply(0, 77), 32, true);
        assertNotNull(iov, "asked for alone");
        assertTrue(PooledFuseFS.directIoAllowsMmap(iov));
    }

    @Test
    void theReplyIsLeftAloneWhenItCannotApply() {
        assertNull(PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb & ~FUSE_MAX_PAGES & ~FUSE_PARALLEL_DIROPS),
                initReply(0, 77), 256, true), "a kernel with neither flag");
        assertNull(PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb), initReply(0, 77), 32, false), "nothing to ask for");
        assertNull(PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb), initReply(-71, 77), 256, true), "an error reply");
        assertNull(PooledFuseFS.extendInitReply(RT, initRequest(0x73fffffb), initReply(0, 78), 256, true), "another request's reply");
    }

    @Test
    void requestPagesFollowMaxRead() {
        assertEquals(256, PooledFuseFS.requestPages(new String[] {"-o", "max_read=1048576", "-o", "max_write=1048576"}));
        assertEquals(64, PooledFuseFS.requestPages(new String[] {"-o", "big_writes,max_read=262144,max_write=1048576"}));
        assertEquals(256, PooledFuseFS.requestPages(new String[] {"-o", "max_read=8388608"}), "at most 256 pages");
        assertEquals(32, PooledFuseFS.requestPages(new String[] {"-o", "max_write=1048576"}), "max_read unset: the kernel's 32");
        assertEquals(32, PooledFuseFS.requestPages(new String[] {"-o", "max_read=lots"}));
    }
}
