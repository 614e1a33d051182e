package dev.granary.raft;

import java.util.Objects;
import java.util.regex.Pattern;

/**
 * One peer of a Raft group: its id and the {@code host:port} of its gRPC endpoint.
 *
 * @param id peer id: letters, digits, '-', '_' and '.', 1..64 characters
 * @param address {@code host:port} (port 1..65535; IPv6 hosts in brackets, e.g. {@code [::1]:9000})
 * @throws IllegalArgumentException on a malformed id or address
 */
public record PeerSpec(String id, String address) {
    private static final Pattern ID = Pattern.compile("[A-Za-z0-9._-]{1,64}");

    public PeerSpec {
        Objects.requireNonNull(id, "peer id");
        Objects.requireNonNull(address, "peer address");
        if (!ID.matcher(id).matches()) {
            throw new IllegalArgumentException("bad peer id '" + id + "': use 1-64 letters, digits, '.', '-', '_'");
        }
        int colon = address.lastIndexOf(':');
        if (colon <= 0 || colon == address.length() - 1) {
            throw new IllegalArgumentException("bad address '" + address + "' of peer " + id + ": expected host:port");
        }
        int port;
        try {
            port = Integer.parseInt(address.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad port in address '" + address + "' of peer " + id);
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("port out of range 1..65535 in address '" + address + "' of peer " + id);
        }
    }

    /** Parses {@code id=host:port}. */
    public static PeerSpec parse(String spec) {
        Objects.requireNonNull(spec, "spec");
        int eq = spec.indexOf('=');
        if (eq <= 0) {
            throw new IllegalArgumentException("bad peer spec '" + spec + "': expected id=host:port");
        }
        return new PeerSpec(spec.substring(0, eq).trim(), spec.substring(eq + 1).trim());
    }

    /** Host part of {@link #address()} (without IPv6 brackets). */
    public String host() {
        String h = address.substring(0, address.lastIndexOf(':'));
        return h.startsWith("[") && h.endsWith("]") ? h.substring(1, h.length() - 1) : h;
    }

    /** Port part of {@link #address()}. */
    public int port() {
        return Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
    }
}
