package dev.granary.objbacker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.http.ContentStreamProvider;
import software.amazon.awssdk.http.SdkHttpMethod;
import software.amazon.awssdk.http.SdkHttpRequest;
import software.amazon.awssdk.http.auth.aws.signer.AwsV4FamilyHttpSigner;
import software.amazon.awssdk.http.auth.aws.signer.AwsV4HttpSigner;
import software.amazon.awssdk.http.auth.spi.signer.HttpSigner;
import software.amazon.awssdk.http.auth.spi.signer.SignedRequest;
import software.amazon.awssdk.identity.spi.AwsCredentialsIdentity;

/**
 * Which endpoints get unsigned payloads, and what the signer puts in the request. That S3Proxy
 * accepts the requests signed so (PUT, multipart, wrong keys refused) is {@link S3ObjectStoreTest}:
 * every one of its requests goes to the embedded server on a loopback port.
 */
class LoopbackPayloadSigningTest {
    private static final byte[] BODY = "a block's bytes".getBytes(StandardCharsets.UTF_8);

    @Test
    void onlyPlainHttpToALoopbackAddressOnAnExplicitPortGoesUnsigned() {
        assertTrue(LoopbackPayloadSigning.unsignedOn(URI.create("http://127.0.0.1:19000")));
        assertTrue(LoopbackPayloadSigning.unsignedOn(URI.create("http://127.0.0.5:9000/")));
        assertTrue(LoopbackPayloadSigning.unsignedOn(URI.create("http://localhost:9000")));
        assertTrue(LoopbackPayloadSigning.unsignedOn(URI.create("http://[::1]:9000")));
        // https: the SDK already sends no payload hash; its signing stays as it is
        assertFalse(LoopbackPayloadSigning.unsignedOn(URI.create("https://127.0.0.1:19000")));
        // another host: the signed payload protects the body on the wire
        assertFalse(LoopbackPayloadSigning.unsignedOn(URI.create("http://10.1.2.3:9000")));
        assertFalse(LoopbackPayloadSigning.unsignedOn(URI.create("http://192.0.2.1:19000")));
        assertFalse(LoopbackPayloadSigning.unsignedOn(URI.create("http://no-such-host.invalid:9000")));
        // default ports: the Host header would differ between the two schemes
        assertFalse(LoopbackPayloadSigning.unsignedOn(URI.create("http://127.0.0.1")));
        assertFalse(LoopbackPayloadSigning.unsignedOn(URI.create("http://127.0.0.1:80")));
        assertFalse(LoopbackPayloadSigning.unsignedOn(URI.create("http://127.0.0.1:443")));
        assertFalse(LoopbackPayloadSigning.unsignedOn(null));
    }

    @Test
    void aLoopbackPutIsSignedWithAnUnsignedPayloadAndStillGoesOverHttp() {
        SignedRequest signed = sign("http://127.0.0.1:19000");
        assertEquals("UNSIGNED-PAYLOAD", signed.request().firstMatchingHeader("x-amz-content-sha256").orElseThrow());
        assertEquals("http", signed.request().protocol());
        assertEquals(19000, signed.request().port());
        assertEquals("127.0.0.1:19000", signed.request().firstMatchingHeader("Host").orElseThrow());
        assertTrue(signed.request().firstMatchingHeader("Authorization").orElseThrow().startsWith("AWS4-HMAC-SHA256 "));
    }

    @Test
    void aPutToAnotherHostOverHttpKeepsTheBodysSha256() throws Exception {
        SignedRequest signed = sign("http://192.0.2.1:19000");
        String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(BODY));
        assertEquals(sha, signed.request().firstMatchingHeader("x-amz-content-sha256").orElseThrow());
        assertEquals("http", signed.request().protocol());
    }

    /** Signs a PUT of {@link #BODY} to {@code endpoint} as S3ObjectStore's client would. */
    private static SignedRequest sign(String endpoint) {
        URI uri = URI.create(endpoint);
        HttpSigner<AwsCredentialsIdentity> signer = LoopbackPayloadSigning.forEndpoint(uri).signer();
        SdkHttpRequest request = SdkHttpRequest.builder()
                .method(SdkHttpMethod.PUT)
                .protocol(uri.getScheme())
                .host(uri.getHost())
                .port(uri.getPort())
                .encodedPath("/bucket/ost0/block")
                .putHeader("Content-Length", Integer.toString(BODY.length))
                .build();
        return signer.sign(r -> r
                .identity(AwsCredentialsIdentity.create("test-access", "test-secret-key"))
                .request(request)
                .payload(ContentStreamProvider.fromByteArray(BODY))
                .putProperty(AwsV4FamilyHttpSigner.SERVICE_SIGNING_NAME, "s3")
                .putProperty(AwsV4HttpSigner.REGION_NAME, "us-east-1")
                .putProperty(AwsV4FamilyHttpSigner.DOUBLE_URL_ENCODE, false)
                .putProperty(AwsV4FamilyHttpSigner.NORMALIZE_PATH, false)
                .putProperty(AwsV4FamilyHttpSigner.PAYLOAD_SIGNING_ENABLED, false)
                .putProperty(HttpSigner.SIGNING_CLOCK, Clock.fixed(Instant.parse("2026-12-03T00:00:00Z"), ZoneOffset.UTC)));
    }
}
