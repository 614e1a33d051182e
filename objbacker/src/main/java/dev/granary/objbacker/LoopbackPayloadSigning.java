package dev.granary.objbacker;

import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.util.concurrent.CompletableFuture;
import software.amazon.awssdk.http.SdkHttpRequest;
import software.amazon.awssdk.http.auth.aws.scheme.AwsV4AuthScheme;
import software.amazon.awssdk.http.auth.aws.signer.AwsV4FamilyHttpSigner;
import software.amazon.awssdk.http.auth.spi.scheme.AuthScheme;
import software.amazon.awssdk.http.auth.spi.signer.AsyncSignRequest;
import software.amazon.awssdk.http.auth.spi.signer.AsyncSignedRequest;
import software.amazon.awssdk.http.auth.spi.signer.HttpSigner;
import software.amazon.awssdk.http.auth.spi.signer.SignRequest;
import software.amazon.awssdk.http.auth.spi.signer.SignedRequest;
import software.amazon.awssdk.identity.spi.AwsCredentialsIdentity;
import software.amazon.awssdk.identity.spi.IdentityProvider;
import software.amazon.awssdk.identity.spi.IdentityProviders;

/**
 * SigV4 without a signed payload for S3 requests over plain http to a loopback address (the
 * embedded S3 server of {@code granary quickstart}, or any S3 server on the same host).
 *
 * <p>Over http the AWS SDK always signs the payload: it hashes every PUT body with SHA-256 and
 * the server hashes it again to check the signature. That protects a body crossing a network
 * without TLS; a loopback connection crosses none. Measured on a 1 GiB write through the
 * quickstart, the two hashes were about a fifth of the Java CPU samples. Here the request is
 * signed as the SDK signs it over https, with {@code x-amz-content-sha256: UNSIGNED-PAYLOAD}
 * (S3 API: "Authenticating Requests: Using the Authorization Header (AWS Signature Version 4)",
 * unsigned payload option), and sent over http as before. The scheme, host, port, path, query
 * and headers signed are those sent: the scheme is not part of the SigV4 canonical request.
 * Requests to any other host keep the SDK's signing unchanged.
 */
final class LoopbackPayloadSigning {
    private LoopbackPayloadSigning() {}

    /**
     * The SigV4 auth scheme for a client of {@code endpoint}: the SDK's own, with payloads left
     * unsigned when the endpoint is http on a loopback address (see the class comment).
     */
    static AuthScheme<AwsCredentialsIdentity> forEndpoint(URI endpoint) {
        AwsV4AuthScheme sdk = AwsV4AuthScheme.create();
        if (!unsignedOn(endpoint)) {
            return sdk;
        }
        HttpSigner<AwsCredentialsIdentity> signer = new UnsignedPayloadSigner(sdk.signer());
        return new AuthScheme<>() {
            @Override
            public String schemeId() {
                return sdk.schemeId();
            }

            @Override
            public IdentityProvider<AwsCredentialsIdentity> identityProvider(IdentityProviders providers) {
                return sdk.identityProvider(providers);
            }

            @Override
            public HttpSigner<AwsCredentialsIdentity> signer() {
                return signer;
            }
        };
    }

    /**
     * Whether payloads to {@code endpoint} go unsigned: http (not https) to a literal loopback
     * address or to a name that resolves only to loopback addresses ({@code localhost}), on an
     * explicit port other than 80 and 443 (so the Host header signed, {@code host:port}, is the
     * one the HTTP client sends whichever scheme the signer was told).
     */
    static boolean unsignedOn(URI endpoint) {
        if (endpoint == null || !"http".equalsIgnoreCase(endpoint.getScheme()) || endpoint.getHost() == null) {
            return false;
        }
        int port = endpoint.getPort();
        if (port == -1 || port == 80 || port == 443) {
            return false;
        }
        try {
            InetAddress[] all = InetAddress.getAllByName(endpoint.getHost());
            for (InetAddress a : all) {
                if (!a.isLoopbackAddress()) {
                    return false;
                }
            }
            return all.length > 0;
        } catch (UnknownHostException e) {
            return false; // the first request will report the unknown host
        }
    }

    /** Signs an http request as the SDK signs it over https, payload unsigned; sends it over http. */
    static final class UnsignedPayloadSigner implements HttpSigner<AwsCredentialsIdentity> {
        private final HttpSigner<AwsCredentialsIdentity> sdk;

        UnsignedPayloadSigner(HttpSigner<AwsCredentialsIdentity> sdk) {
            this.sdk = sdk;
        }

        @Override
        public SignedRequest sign(SignRequest<? extends AwsCredentialsIdentity> request) {
            String scheme = request.request().protocol();
            SignRequest<? extends AwsCredentialsIdentity> asHttps = request.copy(b -> b
                    .request(withProtocol(request.request(), "https"))
                    .putProperty(AwsV4FamilyHttpSigner.PAYLOAD_SIGNING_ENABLED, false));
            SignedRequest signed = sdk.sign(asHttps);
            return signed.copy(b -> b.request(withProtocol(signed.request(), scheme)));
        }

        @Override
        public CompletableFuture<AsyncSignedRequest> signAsync(AsyncSignRequest<? extends AwsCredentialsIdentity> request) {
            String scheme = request.request().protocol();
            AsyncSignRequest<? extends AwsCredentialsIdentity> asHttps = request.copy(b -> b
                    .request(withProtocol(request.request(), "https"))
                    .putProperty(AwsV4FamilyHttpSigner.PAYLOAD_SIGNING_ENABLED, false));
            return sdk.signAsync(asHttps)
                    .thenApply(signed -> signed.copy(b -> b.request(withProtocol(signed.request(), scheme))));
        }

        /** {@code r} with {@code protocol}, same host and port. */
        private static SdkHttpRequest withProtocol(SdkHttpRequest r, String protocol) {
            return r.toBuilder().protocol(protocol).build();
        }
    }
}
