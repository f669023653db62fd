/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Fixed-size log-scale histograms of durations, and clearing a
 *	  workload's cumulative statistics.
 *
 * A duration in microseconds v falls in bucket v itself when v < 8.  Above
 * that, each power of two [2^e, 2^(e+1)) is split into 8 equal buckets, so
 * a bucket's width is 1/8 of its lower bound and its midpoint is within
 * 1/16 (6.25%) of any value in it.  256 buckets reach 2^34 us (4.7 hours);
 * longer durations land in the last bucket.  The caller holds the lock
 * that protects the histogram (the workload's slot lock).
 *
 * The cumulative statistics survive a clean restart, as pg_stat_statements'
 * do: the postmaster writes them to pg_stat/bulkhead.stat when it shuts
 * down, and reads (then removes) the file when it creates shared memory.
 * After a crash there is no file, so they start from zero.  A workload
 * missing from the table at the worker's first load loses them.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"

#include <math.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "storage/fd.h"
#include "utils/timestamp.h"

#define STATS_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/bulkhead.stat"
#define STATS_FILE_TMP	STATS_FILE ".tmp"
#define STATS_MAGIC		0x42484b31	/* "BHK1" */

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

/* File layout: magic, sizeof(BulkheadStats), count, then count records */
typedef struct SavedStats
{
	char		name[NAMEDATALEN];
	BulkheadStats stats;
} SavedStats;

/*
 * on_shmem_exit callback of the postmaster: write every workload's figures.
 * Nothing else runs by then, so no lock is needed.
 */
void
bulkhead_stats_save(int code, Datum arg)
{
	BulkheadShared *shared = bulkhead_shared;
	uint32		header[3];
	FILE	   *file;
	int			i;

	/* after a crash, the figures are discarded */
	if (code != 0 || shared == NULL)
		return;

	file = AllocateFile(STATS_FILE_TMP, PG_BINARY_W);
	if (file == NULL)
		goto error;
	header[0] = STATS_MAGIC;
	header[1] = sizeof(BulkheadStats);
	header[2] = 0;
	for (i = 0; i < shared->nslots; i++)
		if (shared->slots[i].in_use && shared->slots[i].defined)
			header[2]++;
	if (fwrite(header, sizeof(header), 1, file) != 1)
		goto error;
	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];
		SavedStats	rec;

		if (!slot->in_use || !slot->defined)
			continue;
		memset(&rec, 0, sizeof(rec));
		strlcpy(rec.name, slot->name, NAMEDATALEN);
		rec.stats = slot->stats;
		if (fwrite(&rec, sizeof(rec), 1, file) != 1)
			goto error;
	}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(STATS_FILE_TMP, STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", STATS_FILE_TMP)));
	if (file)
		FreeFile(file);
	unlink(STATS_FILE_TMP);
}

/*
 * At shared-memory creation (postmaster, no concurrency): put the saved
 * figures into slots, undefined until the worker reads the table; then
 * remove the file, so that a crash later on does not bring them back.
 */
void
bulkhead_stats_restore(void)
{
	BulkheadShared *shared = bulkhead_shared;
	uint32		header[3];
	FILE	   *file;
	uint32		n;

	file = AllocateFile(STATS_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", STATS_FILE)));
		return;
	}
	/*
	 * A file of the 1.0 library holds records without the fields 1.1
	 * appended to BulkheadStats: they are read as a prefix, the rest zero.
	 */
	if (fread(header, sizeof(header), 1, file) != 1 ||
		header[0] != STATS_MAGIC ||
		(header[1] != sizeof(BulkheadStats) &&
		 header[1] != offsetof(BulkheadStats, deadlocks)))
	{
		ereport(LOG,
				(errmsg("ignoring bulkhead statistics file \"%s\": it is corrupt or from another version",
						STATS_FILE)));
		header[2] = 0;
	}
	for (n = 0; n < header[2] && (int) n < shared->nslots; n++)
	{
		BulkheadSlot *slot = &shared->slots[n];
		SavedStats	rec;

		memset(&rec, 0, sizeof(rec));
		if (fread(&rec, offsetof(SavedStats, stats) + header[1], 1, file) != 1)
			break;
		rec.name[NAMEDATALEN - 1] = '\0';
		slot->in_use = true;
		slot->defined = false;
		slot->restored = true;
		strlcpy(slot->name, rec.name, NAMEDATALEN);
		slot->stats = rec.stats;
	}
	FreeFile(file);
	unlink(STATS_FILE);
}
