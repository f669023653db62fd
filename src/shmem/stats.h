/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  A workload's cumulative statistics and the histograms of its wait
 *	  and hold times (stats.c).
 *
 * Owns nothing in shared memory: a BulkheadStats lives in its workload's
 * slot, and the caller holds what protects it (the slot lock, see shmem.h).
 * Called by slot.c (counting), views.c (reading) and statsfile.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_STATS_H
#define BULKHEAD_STATS_H

#include "shmem/base.h"

#include "datatype/timestamp.h"

#define BULKHEAD_HIST_BUCKETS	256 /* see stats.c */

/* Log-scale histogram of durations in microseconds */
typedef struct BulkheadHistogram
{
	uint64		count[BULKHEAD_HIST_BUCKETS];
} BulkheadHistogram;

/* Cumulative figures of one workload; reset by bulkhead_stats_reset */
typedef struct BulkheadStats
{
	uint64		acquired;
	uint64		rejected_full;
	uint64		timed_out;
	uint64		cancelled;
	uint64		released;
	uint64		shadow_queued;
	uint64		shadow_rejected;
	int			peak_running;
	int			peak_queued;
	uint64		wait_time_total_us;
	uint64		wait_time_max_us;
	uint64		hold_time_total_us;
	BulkheadHistogram wait_hist;
	BulkheadHistogram hold_hist;
	TimestampTz stats_reset;
	/* new in 1.1, last so that a 1.0 statistics file reads as a prefix */
	uint64		deadlocks;		/* waits ended with 40P01 */
	/* new in 1.2 (runaway holders), last for the same reason */
	uint64		over_hold;		/* holders that passed max_hold */
	uint64		moved_out;		/* holders moved to move_to */
	uint64		moved_in;		/* holders moved here from another */
	/* new in 1.4 (memory grants), last for the same reason */
	uint64		memory_waits;	/* statements that waited for a memory grant
								 * (in shadow mode: that would have) */
	uint64		memory_shrunk;	/* statements run with less than requested */
	BulkheadHistogram memory_wait_hist;
	/* new in 1.5 (lock holders served first), last for the same reason */
	uint64		boosts;			/* waits (for a permit or memory) served
								 * ahead of their queue as lock holders */
	uint64		borrowed;		/* of those, served over the limit: a
								 * borrowed permit, or a grant at its floors
								 * beyond max_memory */
} BulkheadStats;

/*
 * A build with -DBULKHEAD_NO_LATENCY_STATS leaves out the wait and hold
 * timing (clock reads at release, totals, histograms): benchmarks build it
 * to measure what that timing costs.  Real builds never do.
 */
#ifdef BULKHEAD_NO_LATENCY_STATS
#define bulkhead_stats_clock()	((TimestampTz) 0)
#else
#define bulkhead_stats_clock()	GetCurrentTimestamp()
#endif

extern void bulkhead_stats_add_wait(BulkheadStats *stats, uint64 usec);
extern void bulkhead_stats_add_hold(BulkheadStats *stats, uint64 usec);
extern void bulkhead_hist_add(BulkheadHistogram *hist, uint64 usec);
extern double bulkhead_hist_percentile(const BulkheadHistogram *hist, double p);
extern void bulkhead_stats_clear(BulkheadStats *stats);

#endif							/* BULKHEAD_STATS_H */
