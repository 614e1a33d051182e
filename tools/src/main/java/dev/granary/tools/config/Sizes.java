package dev.granary.tools.config;

import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Parses human sizes ("4MiB", "512k", "1g", "65536") to bytes and durations ("1s", "500ms") for config files and flags. */
public final class Sizes {
    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([kmgt]?)(i?b)?", Pattern.CASE_INSENSITIVE);
    private static final Pattern DURATION = Pattern.compile("(\\d+)\\s*(ms|s|m|h)?", Pattern.CASE_INSENSITIVE);

    private Sizes() {}

    /**
     * Bytes of a size string; units k/m/g/t are powers of 1024 (KiB, MiB...).
     *
     * @throws IllegalArgumentException when the string is not a size
     */
    public static long parseBytes(String s) {
        Matcher m = SIZE.matcher(s.trim());
        if (!m.matches()) {
            throw new IllegalArgumentException("not a size: '" + s + "' (examples: 4MiB, 512k, 65536)");
        }
        long n;
        try {
            n = Long.parseLong(m.group(1));
        } catch (NumberFormatException e) { // more digits than a long holds
            throw new IllegalArgumentException("size too large: '" + s + "'");
        }
        int shift = switch (m.group(2).toLowerCase(Locale.ROOT)) {
            case "k" -> 10;
            case "m" -> 20;
            case "g" -> 30;
            case "t" -> 40;
            default -> 0;
        };
        if (shift > 0 && n > (Long.MAX_VALUE >> shift)) {
            throw new IllegalArgumentException("size too large: '" + s + "'");
        }
        return n << shift;
    }

    /** A duration string: plain number = seconds; units ms, s, m, h. */
    public static Duration parseDuration(String s) {
        Matcher m = DURATION.matcher(s.trim());
        if (!m.matches()) {
            throw new IllegalArgumentException("not a duration: '" + s + "' (examples: 1s, 500ms, 2m)");
        }
        long n = Long.parseLong(m.group(1));
        String u = m.group(2) == null ? "s" : m.group(2).toLowerCase(Locale.ROOT);
        return switch (u) {
            case "ms" -> Duration.ofMillis(n);
            case "m" -> Duration.ofMinutes(n);
            case "h" -> Duration.ofHours(n);
            default -> Duration.ofSeconds(n);
        };
    }

    /** Formats bytes with a binary unit, e.g. 4194304 → "4 MiB". */
    public static String format(long bytes) {
        String[] u = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = bytes;
        int i = 0;
        while (v >= 1024 && i < u.length - 1) {
            v /= 1024;
            i++;
        }
        return (v == Math.rint(v) ? String.format(Locale.ROOT, "%d", (long) v) : String.format(Locale.ROOT, "%.1f", v)) + " " + u[i];
    }
}
