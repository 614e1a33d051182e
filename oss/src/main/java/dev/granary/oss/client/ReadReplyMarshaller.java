package dev.granary.oss.client;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.WireFormat;
import dev.granary.oss.proto.ObjectStorageServiceGrpc;
import dev.granary.oss.proto.ReadBlockReply;
import dev.granary.oss.proto.ReadBlockRequest;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;

/**
 * Client-side gRPC marshaller of {@code ReadBlock}'s reply ({@link ReadBlockReply} of oss.proto)
 * that yields the block bytes as a heap {@link ByteBuffer} over the received message itself: one
 * copy out of the transport's buffers and nothing more.
 *
 * <p>gRPC's protobuf marshaller parses messages above 4 MiB (a 4 MiB stripe plus its field
 * header) through a stream decoder that allocates, zeroes and copies the payload in pieces, and
 * the {@code bytes} field is then copied again; on a cold sequential read that is two extra
 * copies of every byte on a 2-core client. Here the message is read into one array and the
 * {@code data} field (field 1, length-delimited) is returned as a slice of it, so the FUSE layer
 * copies straight from it into the kernel's reply buffer. Unknown fields are skipped, as
 * protobuf does (wire format: protobuf encoding guide).
 *
 * <p>The buffer is array-backed ({@link ByteBuffer#hasArray()}), position 0; callers must not
 * modify it. The request side keeps gRPC's protobuf marshaller.
 */
final class ReadReplyMarshaller implements MethodDescriptor.Marshaller<ByteBuffer> {
    /** {@code ReadBlock} with this reply marshaller: same service, method name and request. */
    static final MethodDescriptor<ReadBlockRequest, ByteBuffer> READ_BLOCK = ObjectStorageServiceGrpc.getReadBlockMethod()
            .toBuilder(ProtoUtils.marshaller(ReadBlockRequest.getDefaultInstance()), new ReadReplyMarshaller())
            .build();

    private static final ByteBuffer EMPTY = ByteBuffer.wrap(new byte[0]);

    @Override
    public InputStream stream(ByteBuffer data) { // the client never sends a reply; for completeness
        return ReadBlockReply.newBuilder().setData(com.google.protobuf.ByteString.copyFrom(data.duplicate())).build()
                .toByteString().newInput();
    }

    /**
     * The {@code data} field of a serialized {@link ReadBlockReply} read from {@code in}.
     *
     * @throws UncheckedIOException when the stream fails or the message is malformed (gRPC turns
     *                              it into an INTERNAL status of the call)
     */
    @Override
    public ByteBuffer parse(InputStream in) {
        try {
            byte[] msg = readAll(in);
            return dataField(msg);
        } catch (IOException e) {
            throw new UncheckedIOException("bad ReadBlockReply: " + e.getMessage(), e);
        }
    }

    /** The {@code data} field of serialized reply {@code msg}, as a slice of {@code msg} (empty if absent). */
    static ByteBuffer dataField(byte[] msg) throws IOException {
        CodedInputStream cis = CodedInputStream.newInstance(msg);
        ByteBuffer data = EMPTY;
        for (int tag = cis.readTag(); tag != 0; tag = cis.readTag()) {
            if (WireFormat.getTagFieldNumber(tag) == ReadBlockReply.DATA_FIELD_NUMBER
                    && WireFormat.getTagWireType(tag) == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                int len = cis.readRawVarint32();
                int start = cis.getTotalBytesRead();
                if (len < 0 || start + len > msg.length) {
                    throw new IOException("data field of " + len + " bytes at " + start + " past the end of a "
                            + msg.length + "-byte message");
                }
                cis.skipRawBytes(len);
                data = ByteBuffer.wrap(msg, start, len).slice(); // the last occurrence wins, as in protobuf
            } else if (!cis.skipField(tag)) {
                break;
            }
        }
        return data;
    }

    private static byte[] readAll(InputStream in) throws IOException {
        if (in instanceof KnownLength) { // gRPC's received message: its exact size is known
            int n = in.available();
            byte[] msg = new byte[n];
            int at = 0;
            while (at < n) {
                int r = in.read(msg, at, n - at);
                if (r < 0) {
                    throw new IOException("message ended after " + at + " of " + n + " bytes");
                }
                at += r;
            }
            int next = in.read();
            if (next < 0) {
                return msg;
            }
            byte[] rest = in.readAllBytes(); // more than announced: keep it all
            byte[] all = new byte[n + 1 + rest.length];
            System.arraycopy(msg, 0, all, 0, n);
            all[n] = (byte) next;
            System.arraycopy(rest, 0, all, n + 1, rest.length);
            return all;
        }
        return in.readAllBytes();
    }
}
