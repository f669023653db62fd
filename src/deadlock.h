/*-------------------------------------------------------------------------
 *
 * deadlock.h
 *	  Deadlocks through permits: the check a permit waiter runs after
 *	  deadlock_timeout, and bulkhead_blocking_pids (deadlock.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_DEADLOCK_H
#define BULKHEAD_DEADLOCK_H

#include "bulkhead.h"

/*
 * Run one deadlock check for this backend's current permit wait.  Raises
 * 40P01 when the wait is deadlocked (the wait is ended first, through
 * permit.c); otherwise returns when the next check is due.  Call without
 * any LWLock held.
 */
extern TimestampTz bulkhead_deadlock_check(TimestampTz now);

/* Caller holds slot->lock: a value that changes when the holders change */
extern uint64 bulkhead_holders_stamp(BulkheadSlot *slot);

/* At backend exit: give up the checker token if this backend has it */
extern void bulkhead_deadlock_exit(void);

#endif							/* BULKHEAD_DEADLOCK_H */
