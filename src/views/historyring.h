/*-------------------------------------------------------------------------
 *
 * historyring.h
 *	  The ring of bulkhead_history in shared memory (history.c owns it,
 *	  historyfile.c saves and restores it): its types only.  history.h
 *	  says which lock protects what.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_HISTORYRING_H
#define BULKHEAD_HISTORYRING_H

#include "shmem/stats.h"

#include "datatype/timestamp.h"
#include "storage/lwlock.h"

/* The counters of a row, in the order of the view's columns */
enum
{
	C_ACQUIRED,
	C_RELEASED,
	C_REJECTED_FULL,
	C_TIMED_OUT,
	C_CANCELLED,
	C_MOVED_IN,
	C_MOVED_OUT,
	C_MEMORY_WAITS,				/* bulkhead_history()'s last column */
	C_BOOSTS,					/* 1.5: bulkhead_history_boosts()'s */
	C_BORROWED,
	NCOUNTS
};

/* One workload in one interval */
typedef struct HistoryRow
{
	char		workload[NAMEDATALEN];
	int64		count[NCOUNTS]; /* during the interval */
	double		wait_p99_us;	/* of the waits that ended in it; -1: none */
	double		hold_p99_us;	/* of the holds that ended in it; -1: none */
	int32		peak_running;	/* highest during the interval */
	int32		peak_queued;
	int64		peak_memory_granted;	/* bytes */
} HistoryRow;

typedef struct HistoryInterval
{
	TimestampTz start;
	TimestampTz end;
	int32		nrows;
} HistoryInterval;

/* A slot's figures at the last sample (the worker's) */
typedef struct HistoryPrev
{
	bool		valid;
	TimestampTz stats_reset;
	uint64		count[NCOUNTS];
	BulkheadHistogram wait_hist;
	BulkheadHistogram hold_hist;
} HistoryPrev;

typedef struct BulkheadHistory
{
	LWLock	   *lock;
	int			length;			/* intervals in the ring */
	int			nslots;			/* rows per interval at most */
	TimestampTz started_at;		/* when this shared memory was made */
	/* protected by lock */
	int			next;			/* where the next interval goes */
	int			count;			/* intervals kept, <= length */
	uint64		written;		/* intervals ever put in the ring (1.5): the
								 * n-th lies at n % length while n >=
								 * written - count, so that a reader that
								 * lets go of the lock finds its place */
	HistoryInterval *intervals; /* length */
	HistoryRow *rows;			/* length * nslots: interval i's at i * nslots;
								 * only an interval's nrows first are set */
	/* the worker's alone */
	TimestampTz last_sample;	/* end of the last interval; 0: none yet */
	HistoryPrev *prev;			/* nslots */
} BulkheadHistory;

#endif							/* BULKHEAD_HISTORYRING_H */
