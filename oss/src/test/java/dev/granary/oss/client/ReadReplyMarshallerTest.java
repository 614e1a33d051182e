package dev.granary.oss.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import dev.granary.oss.proto.ReadBlockReply;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/** The reply marshaller against protobuf's own encoding, unknown fields and bad input. */
class ReadReplyMarshallerTest {
    private static byte[] bytes(ByteBuffer b) {
        byte[] a = new byte[b.remaining()];
        b.get(b.position(), a);
        return a;
    }

    @Test
    void parsesWhatProtobufWrites() {
        byte[] data = new byte[70_000];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 31 + 7);
        }
        byte[] msg = ReadBlockReply.newBuilder().setData(ByteString.copyFrom(data)).build().toByteArray();
        ByteBuffer got = new ReadReplyMarshaller().parse(new java.io.ByteArrayInputStream(msg));
        assertTrue(got.hasArray());
        assertEquals(0, got.position());
        assertArrayEquals(data, bytes(got));
        // an empty reply (a read at or past the end of the block) has no field at all
        byte[] empty = ReadBlockReply.getDefaultInstance().toByteArray();
        assertEquals(0, empty.length);
        assertEquals(0, new ReadReplyMarshaller().parse(new java.io.ByteArrayInputStream(empty)).remaining());
    }

    @Test
    void skipsUnknownFieldsAroundTheData() throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        CodedOutputStream c = CodedOutputStream.newInstance(out);
        c.writeUInt64(7, 12345);           // a varint field a newer OSS might add
        c.writeBytes(1, ByteString.copyFromUtf8("block bytes"));
        c.writeString(9, "trailer");       // a length-delimited one after it
        c.writeFixed32(10, 42);
        c.flush();
        ByteBuffer got = ReadReplyMarshaller.dataField(out.toByteArray());
        assertEquals("block bytes", new String(bytes(got), java.nio.charset.StandardCharsets.UTF_8));
    }

    @Test
    void aTruncatedMessageIsAnErrorNotShortData() {
        byte[] msg = ReadBlockReply.newBuilder().setData(ByteString.copyFrom(new byte[1000])).build().toByteArray();
        byte[] cut = java.util.Arrays.copyOf(msg, msg.length - 10);
        assertThrows(IOException.class, () -> ReadReplyMarshaller.dataField(cut));
        assertThrows(UncheckedIOException.class, () -> new ReadReplyMarshaller().parse(new java.io.ByteArrayInputStream(cut)));
    }
}
