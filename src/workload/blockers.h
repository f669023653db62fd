/*-------------------------------------------------------------------------
 *
 * blockers.h
 *	  Whom the waiters of a workload wait for (blockers.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_BLOCKERS_H
#define BULKHEAD_BLOCKERS_H

#include "shmem/shmem.h"

extern int	bulkhead_budget_blocker(BulkheadSlot *slot);
extern int	bulkhead_budget_blockers(BulkheadSlot *slot, int *pids, int *procnos);

/* What the holders a waiter of slot waits for look like now (a stamp) */
extern uint64 bulkhead_holders_stamp(BulkheadSlot *slot);

/* Every permit entry held in the subtree of top (top's own too) */
typedef void (*BulkheadHolderFn) (BulkheadEntry *entry, void *arg);
extern void bulkhead_budget_foreach_holder(BulkheadSlot *top,
										   BulkheadHolderFn fn, void *arg);

#endif							/* BULKHEAD_BLOCKERS_H */
