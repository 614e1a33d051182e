package dev.granary.objbacker;

import java.util.concurrent.atomic.AtomicLong;

/** Counts S3 requests by type (for benchmarks: requests per file written and read). */
public final class RequestCounters {
    public final AtomicLong puts = new AtomicLong();
    public final AtomicLong gets = new AtomicLong();
    public final AtomicLong deletes = new AtomicLong();
    public final AtomicLong lists = new AtomicLong();
    public final AtomicLong heads = new AtomicLong();
    public final AtomicLong multipartParts = new AtomicLong();
    public final AtomicLong retries = new AtomicLong();

    @Override
    public String toString() {
        return "puts=" + puts + " gets=" + gets + " deletes=" + deletes + " lists=" + lists
                + " heads=" + heads + " parts=" + multipartParts + " retries=" + retries;
    }
}
