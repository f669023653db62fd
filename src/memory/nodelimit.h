/*-------------------------------------------------------------------------
 *
 * nodelimit.h
 *	  Memory grants (1.5): a granted statement's memory nodes held to their
 *	  grants while they run (nodelimit.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_NODELIMIT_H
#define BULKHEAD_NODELIMIT_H

#include "memory/memplan.h"

#include "executor/execdesc.h"

/*
 * After queryDesc's executor started: its memory nodes (mp, which must
 * live until the executor ends) wrapped, their start limits lowered
 */
extern void bulkhead_nodelimit_install(QueryDesc *queryDesc, BulkheadMemPlan *mp);

/*
 * The grant of owner (NULL: none wrapped) is returned: its nodes forgotten
 * and mp (TopMemoryContext) freed; orphan, a grant that went with an
 * aborted subtransaction whose executor may still be resumed: both kept
 * until the transaction ends (bulkhead_nodelimit_xact_end).  Never throw.
 */
extern void bulkhead_nodelimit_release(const void *owner, BulkheadMemPlan *mp,
									   bool orphan);
extern void bulkhead_nodelimit_xact_end(void);

/* The executor of owner (a QueryDesc) ended or died: its nodes forgotten */
extern void bulkhead_nodelimit_remove(const void *owner);

/*
 * work_mem and hash_mem_multiplier as they were before the first memory
 * node under way lowered them (as they are, when none is under way)
 */
extern void bulkhead_nodelimit_session(int *wm, double *hm);

/*
 * Inside a memory node (its wrapper lowered the settings): the session's
 * set at a GUC level of their own, until bulkhead_nodelimit_leave_session
 * (level, -1 for none); errors pop it with the (sub)transaction
 */
extern int	bulkhead_nodelimit_enter_session(void);
extern void bulkhead_nodelimit_leave_session(int level);

/* An abort's settings to put back again (the GUC's abort ran since) */
extern bool bulkhead_nodelimit_pending;
extern void bulkhead_nodelimit_restore_slow(void);

/*
 * At a statement's start (its planning, its executor's start, a utility):
 * the settings an abort inside a memory node put back are put back again,
 * over what the GUC's own abort wrote after it
 */
static inline void
bulkhead_nodelimit_restore(void)
{
	if (unlikely(bulkhead_nodelimit_pending))
		bulkhead_nodelimit_restore_slow();
}

/*
 * A (sub)transaction aborts (all: the transaction): the settings the
 * wrapper calls under way in it put aside are put back.  Never throws.
 */
extern void bulkhead_nodelimit_abort(bool all, SubTransactionId subid);

#endif							/* BULKHEAD_NODELIMIT_H */
