/*-------------------------------------------------------------------------
 *
 * historyfile.c
 *	  bulkhead_history's ring across a clean restart: saved to
 *	  pg_stat/bulkhead_history.stat by the postmaster at a clean shutdown,
 *	  read back (then removed) when it makes the shared memory, as the
 *	  statistics are (statsfile.c); after a crash the ring starts empty.
 *
 * File layout: magic, format, sizeof(HistoryRow), count; then count
 * intervals, each followed by its rows.  Format 2 (1.5) has the boost
 * counters in its rows; a file of format 1 (1.4) is read too, its rows'
 * boosts zero, so that an update of the library keeps the history.
 *
 * Each row read back is checked (1.5): a count, a p99 or a peak that its
 * field cannot hold (a negative count, a NaN, more running than the
 * server has permits: a damaged file) drops that row, with a LOG line
 * naming the file, the row and what was wrong; the other rows are kept.
 *
 * At the postmaster's start (restore) and clean shutdown (save) nothing
 * else runs, and no lock is taken.  Owns no state (the ring is history.c's,
 * which calls here).  Calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "views/historyfile.h"

#include <math.h>

#include "pgstat.h"
#include "storage/fd.h"
#include "utils/timestamp.h"

#define HISTORY_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/bulkhead_history.stat"
#define HISTORY_FILE_TMP	HISTORY_FILE ".tmp"
#define HISTORY_MAGIC		0x42484831	/* "BHH1" */
#define HISTORY_FORMAT		2			/* 1.5; 1: 1.4's, read too */

/* A row of format 1 (1.4): the counters up to memory_waits */
typedef struct HistoryRowV1
{
	char		workload[NAMEDATALEN];
	int64		count[C_MEMORY_WAITS + 1];
	double		wait_p99_us;
	double		hold_p99_us;
	int32		peak_running;
	int32		peak_queued;
	int64		peak_memory_granted;
} HistoryRowV1;

/* Read a row of format 1 into row, its later counters zero */
static bool
read_row_v1(FILE *file, HistoryRow *row)
{
	HistoryRowV1 old;

	if (fread(&old, sizeof(old), 1, file) != 1)
		return false;
	memset(row, 0, sizeof(HistoryRow));
	memcpy(row->workload, old.workload, NAMEDATALEN);
	memcpy(row->count, old.count, sizeof(old.count));
	row->wait_p99_us = old.wait_p99_us;
	row->hold_p99_us = old.hold_p99_us;
	row->peak_running = old.peak_running;
	row->peak_queued = old.peak_queued;
	row->peak_memory_granted = old.peak_memory_granted;
	return true;
}

/*
 * At a clean shutdown (the postmaster's on_shmem_exit, history.c): write
 * the ring, oldest interval first (the layout: see the header).
 */
void
bulkhead_historyfile_save(BulkheadHistory *history)
{
	uint32		header[4];
	FILE	   *file;
	int			n;

	file = AllocateFile(HISTORY_FILE_TMP, PG_BINARY_W);
	if (file == NULL)
		goto error;
	header[0] = HISTORY_MAGIC;
	header[1] = HISTORY_FORMAT;
	header[2] = sizeof(HistoryRow);
	header[3] = history->count;
	if (fwrite(header, sizeof(header), 1, file) != 1)
		goto error;
	for (n = 0; n < history->count; n++)
	{
		int			i = (history->next - history->count + n + history->length) %
			history->length;
		HistoryInterval *interval = &history->intervals[i];

		if (fwrite(interval, sizeof(HistoryInterval), 1, file) != 1 ||
			fwrite(&history->rows[i * history->nslots], sizeof(HistoryRow),
				   interval->nrows, file) != (size_t) interval->nrows)
			goto error;
	}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(HISTORY_FILE_TMP, HISTORY_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", HISTORY_FILE_TMP)));
	if (file)
		FreeFile(file);
	unlink(HISTORY_FILE_TMP);
}

/* The names of a row's counts, as the view's columns */
static const char *const count_names[NCOUNTS] = {
	"acquired", "released", "rejected_full", "timed_out", "cancelled",
	"moved_in", "moved_out", "memory_waits", "boosts", "boosts_borrowed"
};

/* A p99 read back is -1 (none) or a duration up to the histogram's top */
static bool
p99_valid(const char *name, double v, const HistoryLimits *limits,
		  char *why, size_t len)
{
	if (v == -1 || (v >= 0 && v <= limits->max_p99_us))
		return true;
	if (isnan(v) || isinf(v) || v < 0)
		snprintf(why, len, "%s %s is not a duration", name,
				 isnan(v) ? "NaN" : isinf(v) ? "infinite" : "negative");
	else
		snprintf(why, len, "%s %.0f microseconds is out of range (at most %.0f)",
				 name, v, limits->max_p99_us);
	return false;
}

static bool
peak_valid(const char *name, int64 v, int64 max, char *why, size_t len)
{
	if (v >= 0 && v <= max)
		return true;
	snprintf(why, len, "%s " INT64_FORMAT " is out of range (0 to " INT64_FORMAT ")",
			 name, v, max);
	return false;
}

/*
 * Is a row read back within what its fields can mean?  Counts: none below
 * 0, none above one event per microsecond of the interval per backend;
 * p99s: -1 (none) or a duration a histogram can give; peaks: what this
 * server's permits (and its memory settings) allow.  If not, why says what.
 */
static bool
row_valid(const HistoryRow *row, const HistoryInterval *interval,
		  const HistoryLimits *limits, char *why, size_t len)
{
	double		max_events = ((double) (interval->end - interval->start) + 1.0) *
		limits->backends;
	int			c;

	for (c = 0; c < NCOUNTS; c++)
	{
		if (row->count[c] >= 0 && (double) row->count[c] <= max_events)
			continue;
		snprintf(why, len, "%s " INT64_FORMAT " is out of range (0 to %.0f)",
				 count_names[c], row->count[c], max_events);
		return false;
	}
	return p99_valid("wait_p99", row->wait_p99_us, limits, why, len) &&
		p99_valid("hold_p99", row->hold_p99_us, limits, why, len) &&
		peak_valid("peak_running", row->peak_running, limits->permits, why, len) &&
		peak_valid("peak_queued", row->peak_queued, limits->permits, why, len) &&
		peak_valid("peak_memory_granted", row->peak_memory_granted,
				   limits->max_memory, why, len);
}

/* A row dropped: a LOG line naming the file, the row and what was wrong */
static void
log_dropped(const HistoryRow *row, const HistoryInterval *interval,
			const char *why)
{
	ereport(LOG,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("ignoring a row of bulkhead history file \"%s\"", HISTORY_FILE),
			 errdetail("Workload \"%s\" in the interval ending at %s: %s.",
					   row->workload, timestamptz_to_str(interval->end), why)));
}

/*
 * Read one saved interval into the ring (the oldest is overwritten), its
 * rows checked one by one: a row out of range is dropped, the others kept.
 * False when the file ends early (or its interval cannot be one).
 */
static bool
restore_interval(BulkheadHistory *history, FILE *file, uint32 format,
				 const HistoryLimits *limits)
{
	HistoryInterval interval;
	HistoryRow *rows = &history->rows[(Size) history->next * history->nslots];
	HistoryRow	row;
	int			kept = 0;
	int			r;

	if (fread(&interval, sizeof(interval), 1, file) != 1 || interval.nrows < 0 ||
		interval.end < interval.start)
		return false;
	for (r = 0; r < interval.nrows; r++)
	{
		char		why[160];

		if (!(format == 1 ? read_row_v1(file, &row) :
			  fread(&row, sizeof(HistoryRow), 1, file) == 1))
		{
			/*
			 * The rows went where the oldest interval kept lies when the
			 * ring is full: that one is gone too (the oldest is next - count)
			 */
			if (history->count == history->length && kept > 0)
				history->count--;
			return false;
		}
		row.workload[NAMEDATALEN - 1] = '\0';
		if (!row_valid(&row, &interval, limits, why, sizeof(why)))
			log_dropped(&row, &interval, why);
		/* with a lower bulkhead.max_workloads, the rows beyond are lost */
		else if (kept < history->nslots)
			rows[kept++] = row;
	}
	interval.nrows = kept;
	history->intervals[history->next] = interval;
	history->next = (history->next + 1) % history->length;
	if (history->count < history->length)
		history->count++;
	return true;
}

/*
 * At shared-memory creation (postmaster, no concurrency): the intervals
 * saved at the last clean shutdown, the newest bulkhead.history_length of
 * them; then the file is removed, so that a crash later on does not bring
 * them back.
 */
void
bulkhead_historyfile_restore(BulkheadHistory *history,
							 const HistoryLimits *limits)
{
	uint32		header[4];
	FILE	   *file;
	uint32		n;

	file = AllocateFile(HISTORY_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", HISTORY_FILE)));
		return;
	}
	if (fread(header, sizeof(header), 1, file) != 1 ||
		header[0] != HISTORY_MAGIC ||
		!((header[1] == HISTORY_FORMAT && header[2] == sizeof(HistoryRow)) ||
		  (header[1] == 1 && header[2] == sizeof(HistoryRowV1))))
	{
		ereport(LOG,
				(errmsg("ignoring bulkhead history file \"%s\": it is corrupt or from another version",
						HISTORY_FILE)));
		header[3] = 0;
	}
	for (n = 0; n < header[3]; n++)
	{
		if (!restore_interval(history, file, header[1], limits))
		{
			ereport(LOG,
					(errmsg("bulkhead history file \"%s\" ends early: %u of its %u intervals were read",
							HISTORY_FILE, n, header[3])));
			break;
		}
	}
	FreeFile(file);
	unlink(HISTORY_FILE);
}
