/*-------------------------------------------------------------------------
 *
 * outcome.h
 *	  What a backend's acquire did, told to bulkhead_statements
 *	  (statements.c) and the wait log (waitlog.c), 1.4.
 *
 * A header of inline functions, no state: permit.c calls them where an
 * acquire ends other than by an immediate grant (a wait that ended, a
 * rejection, a zero-length wait, a move), local.c where a wait ends by an
 * error (cancelled) or a deadlock.  Each is called with no lock held, and
 * the immediate grant, the fast path, pays one test.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_OUTCOME_H
#define BULKHEAD_OUTCOME_H

#include "workload/admit.h"
#include "record/statements.h"
#include "record/waitlog.h"

/*
 * A wait for a permit of workload ended after wait_us; moved: the permit
 * of a statement that moved (1.3); raised: the caller raises the
 * outcome's error (a try_ function's false is none).
 */
static inline void
bulkhead_observe_wait(const char *workload, BulkheadWaitOutcome outcome,
					  int64 wait_us, bool moved, bool raised)
{
	bulkhead_statements_note_wait(workload, wait_us,
								  outcome == BULKHEAD_WAIT_TIMED_OUT,
								  moved && outcome == BULKHEAD_WAIT_GRANTED);
	bulkhead_waitlog_permit(workload, outcome, wait_us, raised);
}

static inline void
bulkhead_observe_granted(const char *workload, int64 wait_us, bool moved)
{
	bulkhead_observe_wait(workload, BULKHEAD_WAIT_GRANTED, wait_us, moved, false);
}

static inline void
bulkhead_observe_timed_out(const char *workload, int64 wait_us, bool raised)
{
	bulkhead_observe_wait(workload, BULKHEAD_WAIT_TIMED_OUT, wait_us, false, raised);
}

/* Admission's answer without a wait (raised: the caller raises its error) */
static inline void
bulkhead_observe_admit(const char *workload, BulkheadAdmit outcome,
					   bool moved, bool raised)
{
	bool		rejected;
	bool		zero_wait;

	/* the fast path: an immediate grant, no move */
	if (likely(outcome == BULKHEAD_ADMIT_GRANTED) && likely(!moved))
		return;
	rejected = outcome == BULKHEAD_ADMIT_FULL || outcome == BULKHEAD_ADMIT_KEY_FULL;
	zero_wait = outcome == BULKHEAD_ADMIT_ZERO_WAIT;
	if (!rejected && !zero_wait && outcome != BULKHEAD_ADMIT_GRANTED)
		return;
	bulkhead_statements_note_admit(workload, rejected, zero_wait,
								   outcome == BULKHEAD_ADMIT_GRANTED);
	if (raised && (rejected || zero_wait))
		bulkhead_waitlog_rejected(workload, rejected);
}

#endif							/* BULKHEAD_OUTCOME_H */
