/*-------------------------------------------------------------------------
 *
 * deadlock.h
 *	  Deadlocks through permits: the check a permit waiter runs after
 *	  deadlock_timeout, and its verdict (deadlock.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_DEADLOCK_H
#define BULKHEAD_DEADLOCK_H

#include "shmem/base.h"

#include "datatype/timestamp.h"

/* What a check found */
typedef struct BulkheadDeadlockVerdict
{
	struct DeadlockCycle *cycle;	/* NULL: no deadlock found */
	bool		decided;		/* 1.5: this check itself found a cycle, or
								 * none in the graph as it is now (its search,
								 * or a holder that can move, or its own
								 * proof, the graph unchanged); false when it
								 * relied on the workload's proof, could not
								 * run (another check under way), or the
								 * wait had ended */
	uint64		holders_stamp;	/* the holders the search saw */
	MemoryContext cxt;			/* the check's memory, with the cycle */
	int64		took_us;		/* how long the search took, for its log line */
} BulkheadDeadlockVerdict;

/*
 * Run one deadlock check for this backend's current permit wait.  Returns
 * when the next check is due.  A verdict with a cycle must be concluded:
 * end the wait if it still stands (bulkhead_end_wait_deadlocked), then
 * bulkhead_deadlock_conclude(), which raises 40P01 if the wait was ended.
 * Call without any LWLock held.
 */
extern TimestampTz bulkhead_deadlock_check(TimestampTz now,
										   BulkheadDeadlockVerdict *verdict);
extern void bulkhead_deadlock_conclude(BulkheadDeadlockVerdict *verdict,
									   bool ended);

/* At backend exit: give up the checker token if this backend has it */
extern void bulkhead_deadlock_exit(void);

#endif							/* BULKHEAD_DEADLOCK_H */
