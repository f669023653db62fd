/*-------------------------------------------------------------------------
 *
 * history.c
 *	  bulkhead_history (1.4): what admission did, a row per workload per
 *	  interval, kept in a ring in shared memory.
 *
 * The background worker samples every workload at the end of each interval
 * (bulkhead.history_interval; ends on multiples of it since 2000-01-01 UTC,
 * so that minutes end at full minutes): each slot's statistics, read under
 * its lock as bulkhead_stats reads them, less the last sample's; its peaks
 * since the last sample (slot.c); the memory grants' peaks (grantstate.c).  An
 * interval's percentiles come from the difference of the histograms.  The
 * rows go into the ring (bulkhead.history_length intervals, the oldest
 * overwritten) under the ring's lock.  The acquire and release paths never
 * touch any of it: the peaks since the last sample are the one figure they
 * keep for it (slot.c).
 *
 * Figures that go backwards.  A workload's statistics start again from zero
 * when they are reset, when it is deleted and created again, and when its
 * slot is given to another workload: its stats_reset changes, or a counter
 * is below the last sample's.  The interval then counts from zero.  A slot
 * free at the last sample counts from zero if its statistics are younger
 * than this shared memory (a workload added); else (restored at start)
 * the sample is only the base of the next interval.  Rows carry the
 * workload's name, so that a slot given to another, a deletion or a rename
 * leave older rows as they were.  An interval has a row for each workload
 * defined at its end, and for each deleted one that did anything in it.
 *
 * The ring is saved at a clean shutdown and read back when the shared
 * memory is made (historyfile.c); after a crash it starts empty.  What
 * happened between the last sample and the shutdown is in no interval: the
 * first after the start begins at the start.  The ring's types are in
 * historyring.h, for historyfile.c.
 *
 * Owns BulkheadHistory (history.h says which lock protects what) and the
 * settings bulkhead.history_interval and bulkhead.history_length.  Called
 * by worker.c (the samples), bulkhead.c (init, shared memory, the file)
 * and PostgreSQL's function manager; calls slot.c, stats.c, grantstate.c,
 * shmem.c and historyfile.c.
 *
 *-------------------------------------------------------------------------
 */
#include "views/history.h"
#include "views/historyfile.h"
#include "views/historyring.h"
#include "memory/grants.h"
#include "workload/slot.h"
#include "workload/slotstats.h"
#include "memory/grantstate.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"	/* funcapi.h includes it only up to 18 */

PG_FUNCTION_INFO_V1(bulkhead_history);
PG_FUNCTION_INFO_V1(bulkhead_history_boosts);

/*---- GUC variables ----*/
int			bulkhead_history_interval = 60;
int			bulkhead_history_length = 60;

static BulkheadHistory *history = NULL;

/* The worker's next interval end, and the setting it was computed for */
static TimestampTz next_end = 0;
static int	next_end_interval = 0;

/*---- Settings and shared memory ----*/

void
bulkhead_history_init(void)
{
	DefineCustomIntVariable("bulkhead.history_interval",
							"Length of an interval of bulkhead_history.",
							"The background worker samples every workload at the end of each interval.",
							&bulkhead_history_interval,
							60, 1, 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("bulkhead.history_length",
							"Number of intervals bulkhead_history keeps.",
							"The oldest interval is overwritten by the newest.",
							&bulkhead_history_length,
							60, 1, 1440,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
}

static Size
history_size(void)
{
	Size		size = MAXALIGN(sizeof(BulkheadHistory));

	size = add_size(size, MAXALIGN(mul_size(bulkhead_history_length,
											sizeof(HistoryInterval))));
	size = add_size(size, MAXALIGN(mul_size(mul_size(bulkhead_history_length,
													 bulkhead_max_workloads),
											sizeof(HistoryRow))));
	return add_size(size, mul_size(bulkhead_max_workloads, sizeof(HistoryPrev)));
}

void
bulkhead_history_shmem_request(void)
{
	RequestAddinShmemSpace(history_size());
	RequestNamedLWLockTranche("bulkhead history", 1);
}

bool
bulkhead_history_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	history = ShmemInitStruct("bulkhead history", history_size(), &found);
	if (!found)
	{
		char	   *ptr = (char *) history + MAXALIGN(sizeof(BulkheadHistory));

		/*
		 * The rows are left as they are (zero pages, or whatever): only the
		 * rows an interval counts are read, once written.  So a large ring
		 * costs address space, not memory, until it fills.
		 */
		memset(history, 0, MAXALIGN(sizeof(BulkheadHistory)) +
			   MAXALIGN(sizeof(HistoryInterval) * bulkhead_history_length));
		history->lock = &GetNamedLWLockTranche("bulkhead history")[0].lock;
		history->length = bulkhead_history_length;
		history->nslots = bulkhead_max_workloads;
		history->started_at = GetCurrentTimestamp();
		history->intervals = (HistoryInterval *) ptr;
		ptr += MAXALIGN(sizeof(HistoryInterval) * history->length);
		history->rows = (HistoryRow *) ptr;
		ptr += MAXALIGN(sizeof(HistoryRow) * history->length * history->nslots);
		history->prev = (HistoryPrev *) ptr;
		memset(history->prev, 0, sizeof(HistoryPrev) * history->nslots);
	}
	LWLockRelease(AddinShmemInitLock);
	return !found;
}

/*---- Sampling (the worker) ----*/

/* A slot's figures, copied under its lock */
typedef struct SlotSample
{
	bool		in_use;
	bool		defined;
	char		name[NAMEDATALEN];
	int			peak_running;
	int			peak_queued;
	BulkheadStats stats;
} SlotSample;

static void
read_slot(int i, SlotSample *s)
{
	BulkheadSlot *slot = &bulkhead_shared->slots[i];

	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	s->in_use = slot->in_use;
	s->defined = slot->defined;
	if (s->in_use)
	{
		strlcpy(s->name, slot->name, NAMEDATALEN);
		memcpy(&s->stats, &slot->stats, sizeof(BulkheadStats));
	}
	/* a free slot's peaks start again too, for its next workload */
	bulkhead_slot_take_peaks(slot, &s->peak_running, &s->peak_queued);
	LWLockRelease(slot->lock);
}

static void
counts_of(const BulkheadStats *st, uint64 *count)
{
	count[C_ACQUIRED] = st->acquired;
	count[C_RELEASED] = st->released;
	count[C_REJECTED_FULL] = st->rejected_full;
	count[C_TIMED_OUT] = st->timed_out;
	count[C_CANCELLED] = st->cancelled;
	count[C_MOVED_IN] = st->moved_in;
	count[C_MOVED_OUT] = st->moved_out;
	count[C_MEMORY_WAITS] = st->memory_waits;
	count[C_BOOSTS] = st->boosts;		/* 1.5 */
	count[C_BORROWED] = st->borrowed;
}

/* The p99 of what cur holds beyond prev (all of cur when from_zero) */
static double
p99_since(const BulkheadHistogram *cur, const BulkheadHistogram *prev,
		  bool from_zero)
{
	BulkheadHistogram diff;
	int			b;

	for (b = 0; b < BULKHEAD_HIST_BUCKETS; b++)
		diff.count[b] = from_zero || cur->count[b] < prev->count[b] ?
			cur->count[b] : cur->count[b] - prev->count[b];
	return bulkhead_hist_percentile(&diff, 0.99);
}

/* The counts and percentiles of row: cur (s, count) less prev, or from zero */
static void
make_row_counts(const HistoryPrev *prev, const SlotSample *s,
				const uint64 *count, bool from_zero, HistoryRow *row)
{
	const BulkheadStats *st = &s->stats;
	int			k;

	memset(row, 0, sizeof(HistoryRow));
	strlcpy(row->workload, s->name, NAMEDATALEN);
	for (k = 0; k < NCOUNTS; k++)
		row->count[k] = (int64) (from_zero ? count[k] : count[k] - prev->count[k]);
	row->wait_p99_us = p99_since(&st->wait_hist, &prev->wait_hist, from_zero);
	/* a bucket's midpoint may lie above the longest wait measured */
	if (st->wait_time_max_us > 0 && row->wait_p99_us > (double) st->wait_time_max_us)
		row->wait_p99_us = (double) st->wait_time_max_us;
	row->hold_p99_us = p99_since(&st->hold_hist, &prev->hold_hist, from_zero);
}

/* A slot's row of the interval ending now (s less prev; prev := s): any? */
static bool
make_row(HistoryPrev *prev, const SlotSample *s, int64 peak_memory,
		 HistoryRow *row)
{
	const BulkheadStats *st = &s->stats;
	uint64		count[NCOUNTS];
	bool		from_zero;
	bool		base_only;
	bool		active = false;
	int			k;

	if (!s->in_use)
	{
		prev->valid = false;
		return false;
	}
	counts_of(st, count);
	from_zero = !prev->valid || st->stats_reset != prev->stats_reset;
	for (k = 0; k < NCOUNTS && !from_zero; k++)
		from_zero = count[k] < prev->count[k];
	/* statistics from before this shared memory (restored): only a base */
	base_only = !prev->valid && st->stats_reset < history->started_at;

	if (!base_only)
		make_row_counts(prev, s, count, from_zero, row);
	prev->valid = true;
	prev->stats_reset = st->stats_reset;
	memcpy(prev->count, count, sizeof(count));
	prev->wait_hist = st->wait_hist;
	prev->hold_hist = st->hold_hist;
	if (base_only)
		return false;
	row->peak_running = s->peak_running;
	row->peak_queued = s->peak_queued;
	row->peak_memory_granted = peak_memory;
	for (k = 0; k < NCOUNTS && !active; k++)
		active = row->count[k] != 0;
	return s->defined || active || s->peak_running > 0 ||
		s->peak_queued > 0 || peak_memory > 0;
}

/*
 * End the interval under way at now: every slot sampled, one lock at a
 * time, its row made outside the lock; then the interval written into the
 * ring under the ring's lock (nothing allocated or thrown while it is
 * held).  An interval without rows (no workload) is not kept.
 */
static void
sample(TimestampTz now)
{
	int			nslots = history->nslots;
	int64	   *peaks = palloc(sizeof(int64) * Max(nslots, bulkhead_shared->nslots));
	HistoryRow *rows = palloc(sizeof(HistoryRow) * nslots);
	SlotSample *s = palloc(sizeof(SlotSample));
	int64		server_peak;
	int			nrows = 0;
	int			i;

	bulkhead_grants_take_peaks(peaks, &server_peak);
	for (i = 0; i < nslots; i++)
	{
		read_slot(i, s);
		if (make_row(&history->prev[i], s, peaks[i], &rows[nrows]))
			nrows++;
	}

	if (nrows > 0)
	{
		HistoryInterval *interval;

		LWLockAcquire(history->lock, LW_EXCLUSIVE);
		interval = &history->intervals[history->next];
		interval->start = history->last_sample != 0 ?
			history->last_sample : history->started_at;
		interval->end = now;
		interval->nrows = nrows;
		memcpy(&history->rows[(Size) history->next * nslots], rows,
			   sizeof(HistoryRow) * nrows);
		history->next = (history->next + 1) % history->length;
		history->written++;
		if (history->count < history->length)
			history->count++;
		LWLockRelease(history->lock);
	}
	history->last_sample = now;
	pfree(peaks);
	pfree(rows);
	pfree(s);
}

/* The first end of an interval after now (a multiple of the interval) */
static TimestampTz
end_after(TimestampTz now)
{
	int64		interval_us = (int64) bulkhead_history_interval * USECS_PER_SEC;

	return (now / interval_us + 1) * interval_us;
}

long
bulkhead_history_tick(TimestampTz now)
{
	if (history == NULL)
		return 1000;
	if (next_end == 0 || next_end_interval != bulkhead_history_interval)
	{
		/* the worker's start, or a new interval (a reload) */
		next_end_interval = bulkhead_history_interval;
		next_end = end_after(now);
	}
	if (now >= next_end)
	{
		sample(now);
		next_end = end_after(now);
	}
	return (long) Max((next_end - now + 999) / 1000, 1);
}

/*---- Across a clean restart (historyfile.c) ----*/

void
bulkhead_history_save(int code, Datum arg)
{
	/* after a crash, the history is discarded */
	if (code == 0 && history != NULL)
		bulkhead_historyfile_save(history);
}

/*
 * The intervals saved at the last clean shutdown, each row checked against
 * what this server can count: its backends, its permit entries, the top of
 * a histogram, and twice the largest max_memory a memory setting can take
 * (grants pass a level's max_memory by 64 kB per node of a shrunk
 * statement only).
 */
void
bulkhead_history_restore(void)
{
	HistoryLimits limits;
	BulkheadHistogram top;

	memset(&top, 0, sizeof(top));
	top.count[BULKHEAD_HIST_BUCKETS - 1] = 1;
	limits.backends = bulkhead_shared->nbackends;
	limits.permits = bulkhead_shared->nbackends * bulkhead_shared->permits_per_backend;
	limits.max_p99_us = bulkhead_hist_percentile(&top, 0.99);
	limits.max_memory = (int64) MAX_KILOBYTES * 1024 * 2;
	bulkhead_historyfile_restore(history, &limits);
	/* the n-th interval written lies at n % length (nothing else runs) */
	history->written = history->next + (history->next < history->count ? history->length : 0);
}

/*---- The view ----*/

#define HISTORY_COLS	16

static void
put_row(ReturnSetInfo *rsinfo, const HistoryInterval *interval,
		const HistoryRow *row)
{
	Datum		values[HISTORY_COLS];
	bool		nulls[HISTORY_COLS] = {0};
	int			c = 0;
	int			k;

	values[c++] = CStringGetTextDatum(row->workload);
	values[c++] = TimestampTzGetDatum(interval->start);
	values[c++] = TimestampTzGetDatum(interval->end);
	for (k = 0; k < C_MEMORY_WAITS; k++)
		values[c++] = Int64GetDatum(row->count[k]);
	nulls[c] = row->wait_p99_us < 0;	/* no wait ended in it */
	values[c++] = Float8GetDatum(row->wait_p99_us / 1000.0);
	nulls[c] = row->hold_p99_us < 0;
	values[c++] = Float8GetDatum(row->hold_p99_us / 1000.0);
	values[c++] = Int32GetDatum(row->peak_running);
	values[c++] = Int32GetDatum(row->peak_queued);
	values[c++] = Int64GetDatum(row->peak_memory_granted);
	values[c++] = Int64GetDatum(row->count[C_MEMORY_WAITS]);
	Assert(c == HISTORY_COLS);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * A reader of the ring: a batch of rows at a time, so that a read never
 * allocates in proportion to the ring (bulkhead.history_length *
 * bulkhead.max_workloads rows: 14 million at most, over 2 GB).
 */
#define HISTORY_BATCH	1024	/* rows copied per hold of the lock */

typedef struct HistoryReader
{
	uint64		seq;			/* the interval being read: the seq-th written */
	int			next_row;		/* its first row not yet copied */
	HistoryInterval interval;	/* its copy */
	int			nrows;			/* rows copied into rows[] */
	HistoryRow	rows[HISTORY_BATCH];
} HistoryReader;

/*
 * The next batch of rows, oldest interval first, copied under the ring's
 * lock held shared (nothing allocated or thrown while it is held).  An
 * interval the worker overwrote since the last batch is skipped (the ring
 * moved on: the read goes on from its oldest interval).  False when no
 * row is left.
 */
static bool
read_batch(HistoryReader *rd)
{
	bool		found = false;

	LWLockAcquire(history->lock, LW_SHARED);
	if (rd->seq < history->written - history->count)
	{
		rd->seq = history->written - history->count;
		rd->next_row = 0;
	}
	for (; rd->seq < history->written; rd->seq++, rd->next_row = 0)
	{
		int			i = (int) (rd->seq % history->length);
		const HistoryInterval *interval = &history->intervals[i];

		if (rd->next_row >= interval->nrows)
			continue;
		rd->interval = *interval;
		rd->nrows = Min(interval->nrows - rd->next_row, HISTORY_BATCH);
		memcpy(rd->rows, &history->rows[(Size) i * history->nslots + rd->next_row],
			   sizeof(HistoryRow) * rd->nrows);
		rd->next_row += rd->nrows;
		found = true;
		break;
	}
	LWLockRelease(history->lock);
	return found;
}

/*
 * bulkhead_history(): every row of the ring, oldest interval first; the
 * tuples are made after the ring's lock is released, a batch at a time.
 */
Datum
bulkhead_history(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HistoryReader *rd;
	int			r;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rd = palloc0(sizeof(HistoryReader));
	while (read_batch(rd))
	{
		for (r = 0; r < rd->nrows; r++)
			put_row(rsinfo, &rd->interval, &rd->rows[r]);
	}
	pfree(rd);
	return (Datum) 0;
}

/*
 * bulkhead_history_boosts() (1.5): the boost counters of every row of the
 * ring, which the view sums per workload and interval and joins to
 * bulkhead_history()'s (bulkhead_history() keeps the columns of 1.4, so
 * that the update replaces the view, keeping its privileges).  A workload
 * deleted and made again while its last permits drained has two rows in
 * an interval: the view's sum makes one of them, so that its join never
 * doubles a row.
 */
Datum
bulkhead_history_boosts(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HistoryReader *rd;
	int			r;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rd = palloc0(sizeof(HistoryReader));
	while (read_batch(rd))
	{
		for (r = 0; r < rd->nrows; r++)
		{
			Datum		values[4];
			bool		nulls[4] = {0};

			values[0] = CStringGetTextDatum(rd->rows[r].workload);
			values[1] = TimestampTzGetDatum(rd->interval.start);
			values[2] = Int64GetDatum(rd->rows[r].count[C_BOOSTS]);
			values[3] = Int64GetDatum(rd->rows[r].count[C_BORROWED]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	pfree(rd);
	return (Datum) 0;
}
