package dev.granary.objbacker;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import org.gaul.s3proxy.AuthenticationType;
import org.gaul.s3proxy.S3Proxy;
import org.jclouds.ContextBuilder;
import org.jclouds.blobstore.BlobStore;
import org.jclouds.blobstore.BlobStoreContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The embedded default S3 server: S3Proxy 2.6.0 in this JVM over a jclouds {@code filesystem-nio2}
 * BlobStore on a local folder. Bucket {@code b} is the folder {@code dir/b}; object {@code k} is
 * the file {@code dir/b/k}, so blocks are visible as plain files.
 *
 * <p>Listens on 127.0.0.1 only and requires AWS SigV2/SigV4 authentication with the given
 * access/secret key. Used by {@code granary quickstart} and tests.
 */
public final class EmbeddedS3 implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EmbeddedS3.class);
    /**
     * Largest signed non-chunked request S3Proxy accepts (it buffers it to check the SHA-256):
     * a part or a single PUT must fit. S3Proxy's default is 128 MiB (see NOTES.md); we keep a
     * margin above our largest part ({@link S3Config#MAX_PART_SIZE}) and default threshold.
     */
    public static final long MAX_NON_CHUNKED_REQUEST_BYTES = 256 * S3Config.MIB;
    private static final long START_TIMEOUT_MS = 30_000;

    private final Path dir;
    private final String accessKey;
    private final String secretKey;
    private final BlobStoreContext context;
    private final S3Proxy proxy;
    private final URI endpoint;

    private EmbeddedS3(Path dir, String accessKey, String secretKey, BlobStoreContext context, S3Proxy proxy, URI endpoint) {
        this.dir = dir;
        this.accessKey = accessKey;
        this.secretKey = secretKey;
        this.context = context;
        this.proxy = proxy;
        this.endpoint = endpoint;
    }

    /**
     * Starts S3Proxy on {@code 127.0.0.1:port} (0 = a free port) storing buckets under {@code dir}
     * (created when missing), and returns once the server is STARTED and accepts connections.
     *
     * @throws IllegalArgumentException on a bad port or empty keys
     * @throws IllegalStateException    when the server does not start within 30 s
     * @throws UncheckedIOException     when the folder cannot be created
     */
    public static EmbeddedS3 start(Path dir, int port, String accessKey, String secretKey) {
        if (dir == null) {
            throw new IllegalArgumentException("embedded S3 folder is missing");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("embedded S3 port must be in [0, 65535], got " + port);
        }
        if (accessKey == null || accessKey.isEmpty() || secretKey == null || secretKey.isEmpty()) {
            throw new IllegalArgumentException("embedded S3 needs a non-empty access key and secret key");
        }
        quietLogging();
        Path base = dir.toAbsolutePath().normalize();
        try {
            Files.createDirectories(base);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create embedded S3 folder " + base + ": " + e.getMessage(), e);
        }
        Properties props = new Properties();
        props.setProperty("jclouds.filesystem.basedir", base.toString());
        // jclouds wants some identity/credential even for a local folder; S3 clients authenticate
        // against S3Proxy's own awsAuthentication below.
        BlobStoreContext context = ContextBuilder.newBuilder("filesystem-nio2")
                .credentials(accessKey, secretKey)
                .overrides(props)
                .build(BlobStoreContext.class);
        S3Proxy proxy;
        try {
            proxy = S3Proxy.builder()
                    .blobStore(context.getBlobStore())
                    .endpoint(URI.create("http://127.0.0.1:" + port))
                    .awsAuthentication(AuthenticationType.AWS_V2_OR_V4, accessKey, secretKey)
                    .v4MaxNonChunkedRequestSize(MAX_NON_CHUNKED_REQUEST_BYTES)
                    .ignoreUnknownHeaders(true)
                    .build();
            proxy.start();
            long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
            while (!"STARTED".equals(proxy.getState())) {
                if (System.currentTimeMillis() > deadline || "FAILED".equals(proxy.getState())) {
                    throw new IllegalStateException("embedded S3 did not start on 127.0.0.1:" + port + " (state " + proxy.getState() + ")");
                }
                Thread.sleep(10);
            }
            int bound = proxy.getPort();
            while (!accepts(bound)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("embedded S3 does not accept connections on 127.0.0.1:" + bound);
                }
                Thread.sleep(10);
            }
            URI endpoint = URI.create("http://127.0.0.1:" + bound);
            LOG.info("embedded S3 (S3Proxy) serving {} at {}", base, endpoint);
            return new EmbeddedS3(base, accessKey, secretKey, context, proxy, endpoint);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            context.close();
            throw new IllegalStateException("interrupted while starting embedded S3", e);
        } catch (RuntimeException e) {
            context.close();
            throw e;
        } catch (Exception e) {
            context.close();
            throw new IllegalStateException("embedded S3 failed to start on 127.0.0.1:" + port + ": " + e.getMessage(), e);
        }
    }

    private static boolean accepts(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 200);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** The endpoint, {@code http://127.0.0.1:<port>}. */
    public URI endpoint() {
        return endpoint;
    }

    /** The TCP port the server listens on. */
    public int port() {
        return endpoint.getPort();
    }

    /** The base folder; bucket {@code b} is its sub-folder {@code b}. */
    public Path dir() {
        return dir;
    }

    /** The folder holding bucket {@code bucket}'s objects. */
    public Path bucketDir(String bucket) {
        return dir.resolve(bucket);
    }

    /** The access key S3 clients must use. */
    public String accessKey() {
        return accessKey;
    }

    /** The secret key S3 clients must use. */
    public String secretKey() {
        return secretKey;
    }

    /** Creates bucket {@code bucket} (its folder) when missing. */
    public void createBucket(String bucket) {
        BlobStore store = context.getBlobStore();
        if (!store.containerExists(bucket)) {
            store.createContainerInLocation(null, bucket);
        }
    }

    /** An {@link S3Config} with defaults for {@code bucket}/{@code prefix} on this server. */
    public S3Config config(String bucket, String prefix) {
        return S3Config.of(endpoint, bucket, prefix, accessKey, secretKey);
    }

    /** Stops the server and releases the BlobStore; the folder and its files stay. */
    @Override
    public void close() {
        try {
            proxy.stop();
        } catch (Exception e) {
            LOG.warn("stopping embedded S3 at {}: {}", endpoint, e.toString());
        } finally {
            context.close();
        }
    }

    /**
     * Lowers Jetty/jclouds/S3Proxy loggers to WARN when the SLF4J binding is logback and the
     * logger has no level of its own (S3Proxy ships no logging config, and Jetty then logs every
     * event at DEBUG). Uses reflection so that this module works without logback.
     */
    static void quietLogging() {
        setLevelIfUnset("org.eclipse.jetty", "WARN");
        setLevelIfUnset("org.gaul.shaded.org.eclipse.jetty", "WARN");
        setLevelIfUnset("org.gaul", "WARN");
        setLevelIfUnset("org.jclouds", "WARN");
        setLevelIfUnset("jclouds", "WARN");
    }

    private static void setLevelIfUnset(String name, String level) {
        Object logger = LoggerFactory.getLogger(name);
        if (!logger.getClass().getName().equals("ch.qos.logback.classic.Logger")) {
            return;
        }
        try {
            Class<?> levelClass = Class.forName("ch.qos.logback.classic.Level", true, logger.getClass().getClassLoader());
            if (logger.getClass().getMethod("getLevel").invoke(logger) != null) {
                return;
            }
            Object lvl = levelClass.getMethod("toLevel", String.class).invoke(null, level);
            logger.getClass().getMethod("setLevel", levelClass).invoke(logger, lvl);
        } catch (ReflectiveOperationException | RuntimeException e) {
            LOG.debug("could not set log level of {}: {}", name, e.toString());
        }
    }
}
