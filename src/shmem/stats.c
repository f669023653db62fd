/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Fixed-size log-scale histograms of durations, and clearing a
 *	  workload's cumulative statistics.  Pure arithmetic on the caller's
 *	  BulkheadStats: no shared state of its own, no lock taken.
 *
 * A duration in microseconds v falls in bucket v itself when v < 8.  Above
 * that, each power of two [2^e, 2^(e+1)) is split into 8 equal buckets, so
 * a bucket's width is 1/8 of its lower bound and its midpoint is within
 * 1/16 (6.25%) of any value in it.  256 buckets reach 2^34 us (4.7 hours);
 * longer durations land in the last bucket.  The caller holds the lock
 * that protects the histogram (the workload's slot lock).
 *
 * Called by slot.c (counting), views.c (percentiles); calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "shmem/stats.h"

#include <math.h>

#include "port/pg_bitutils.h"
#include "utils/timestamp.h"

#define SUB_BUCKETS		8
#define SUB_BITS		3

pg_attribute_unused()		/* in a BULKHEAD_NO_LATENCY_STATS build */
static int
bucket_of(uint64 usec)
{
	int			e;
	int			b;

	if (usec < SUB_BUCKETS)
		return (int) usec;
	e = pg_leftmost_one_pos64(usec);	/* >= SUB_BITS */
	b = SUB_BUCKETS + (e - SUB_BITS) * SUB_BUCKETS +
		(int) ((usec >> (e - SUB_BITS)) & (SUB_BUCKETS - 1));
	return Min(b, BULKHEAD_HIST_BUCKETS - 1);
}

/* Midpoint of a bucket, in microseconds */
static double
bucket_value(int b)
{
	int			e;
	uint64		low;
	uint64		width;

	if (b < SUB_BUCKETS)
		return (double) b;
	e = (b - SUB_BUCKETS) / SUB_BUCKETS + SUB_BITS;
	width = UINT64CONST(1) << (e - SUB_BITS);
	low = (uint64) (SUB_BUCKETS + (b - SUB_BUCKETS) % SUB_BUCKETS) * width;
	return (double) low + (double) width / 2.0;
}

/* A wait that ended with a permit.  Caller holds the slot lock. */
void
bulkhead_stats_add_wait(BulkheadStats *stats, uint64 usec)
{
#ifndef BULKHEAD_NO_LATENCY_STATS
	stats->wait_time_total_us += usec;
	if (usec > stats->wait_time_max_us)
		stats->wait_time_max_us = usec;
	stats->wait_hist.count[bucket_of(usec)]++;
#endif
}

/* How long a released permit was held.  Caller holds the slot lock. */
void
bulkhead_stats_add_hold(BulkheadStats *stats, uint64 usec)
{
#ifndef BULKHEAD_NO_LATENCY_STATS
	stats->hold_time_total_us += usec;
	stats->hold_hist.count[bucket_of(usec)]++;
#endif
}

/* One duration into a histogram (memory waits, 1.4) */
void
bulkhead_hist_add(BulkheadHistogram *hist, uint64 usec)
{
	hist->count[bucket_of(usec)]++;
}

/* The p-quantile (0 < p <= 1) in microseconds, or -1 when empty */
double
bulkhead_hist_percentile(const BulkheadHistogram *hist, double p)
{
	uint64		total = 0;
	uint64		rank;
	uint64		seen = 0;
	int			b;

	for (b = 0; b < BULKHEAD_HIST_BUCKETS; b++)
		total += hist->count[b];
	if (total == 0)
		return -1;
	rank = (uint64) ceil(p * (double) total);
	if (rank < 1)
		rank = 1;
	for (b = 0; b < BULKHEAD_HIST_BUCKETS; b++)
	{
		seen += hist->count[b];
		if (seen >= rank)
			return bucket_value(b);
	}
	return bucket_value(BULKHEAD_HIST_BUCKETS - 1);
}

void
bulkhead_stats_clear(BulkheadStats *stats)
{
	memset(stats, 0, sizeof(BulkheadStats));
	stats->stats_reset = GetCurrentTimestamp();
}
