/*-------------------------------------------------------------------------
 *
 * feedback.h
 *	  Memory grants (1.5): grant feedback.  What each memory node of a
 *	  statement used, noted per (queryid, workload) when it ends, and the
 *	  request of its next runs worked out from it: a high percentile of
 *	  recent runs with a margin; a run that spilled raises the request
 *	  toward the limit; one that used less than half lowers it; a
 *	  statement whose grants swing is left at its limit.  Memory used
 *	  outside the nodes' limits (an aggregate's value, an ARRAY sublink) is
 *	  requested from the second run on (plan->extra).  The notes survive a
 *	  clean restart (a file the worker writes at its exit and reads at its
 *	  start).  Nothing is looked up or noted while no memory limit is set.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_FEEDBACK_H
#define BULKHEAD_FEEDBACK_H

#include "memory/memplan.h"

/*
 * Before a grant: the nodes of plan (plan->queryid, plan->slotno) that
 * earlier runs noted get their request from the notes (source feedback, or
 * limit for a statement whose grants swing), within [floor, limit]; others
 * keep their estimate.  plan->extra is set from the notes.  Never throws
 * after taking its lock.
 */
extern void bulkhead_feedback_apply(BulkheadMemPlan *plan);

/*
 * At a statement's end: what its nodes used (peak, spilled), noted.  Never
 * throws after taking its lock.
 */
extern void bulkhead_feedback_note(const BulkheadMemPlan *plan);

/*---- GUC variables ----*/
extern int	bulkhead_feedback_statements;	/* bulkhead.feedback_statements */

/* The setting, the shared memory (bulkhead.c) */
extern void bulkhead_feedback_init(void);
extern void bulkhead_feedback_shmem_request(void);
extern void bulkhead_feedback_shmem_startup(void);

/* The postmaster's on_shmem_exit: the notes saved at a clean shutdown */
extern void bulkhead_feedback_save(int code, Datum arg);

#endif							/* BULKHEAD_FEEDBACK_H */
