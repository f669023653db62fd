/*-------------------------------------------------------------------------
 *
 * caps.h
 *	  Lanes that cap settings (1.3): a workload's settings, parsed and
 *	  checked, combined over the permits held, and applied to each statement
 *	  run while they are held (caps.c).
 *
 * Owns no shared state.  A workload's caps are kept in its slot's config
 * (slot.c writes them, under the slot lock) and copied into this backend's
 * record of a permit at its grant (local.c); local.c keeps the caps in
 * force, the smallest of each setting over the permits held.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_CAPS_H
#define BULKHEAD_CAPS_H

#include "shmem/shmem.h"

#include "fmgr.h"
#include "utils/array.h"

/* The kind of value a setting takes */
typedef enum BulkheadCapKind
{
	CAP_INT,
	CAP_REAL,
	CAP_BOOL
} BulkheadCapKind;

/* The name of setting i (BulkheadCapSetting), as guc.c knows it, its kind */
extern const char *bulkhead_cap_name(int i);
extern BulkheadCapKind bulkhead_cap_kind(int i);

/* into: the smaller of each setting capped by into or by caps */
extern void bulkhead_caps_combine(BulkheadCaps *into, const BulkheadCaps *caps);

/*
 * Around a statement's planning or an executor phase: the settings that
 * caps (the caps in force) lowers are set as a function's SET clause sets
 * them, in a new GUC nesting level, which bulkhead_caps_leave pops (an
 * error pops it with the (sub)transaction, a commit with the transaction).
 * The frame's level is 0 when nothing needed lowering.
 */
typedef struct BulkheadCapsFrame
{
	int			level;			/* the GUC nesting level, 0: none */
	uint64		ends;			/* transactions ended before it was made */
} BulkheadCapsFrame;

extern BulkheadCapsFrame bulkhead_caps_enter_slow(const BulkheadCaps *caps);
extern void bulkhead_caps_leave_slow(BulkheadCapsFrame frame);

/* (inline: without caps in force, the common case, they cost a test) */
static inline BulkheadCapsFrame
bulkhead_caps_enter(const BulkheadCaps *caps)
{
	BulkheadCapsFrame none = {0, 0};

	if (likely(caps->mask == 0))
		return none;
	return bulkhead_caps_enter_slow(caps);
}

static inline void
bulkhead_caps_leave(BulkheadCapsFrame frame)
{
	if (unlikely(frame.level > 0))
		bulkhead_caps_leave_slow(frame);
}

/*
 * A client's top-level statement: the caps set once for its phases, in a
 * level kept open while the next statements run under the same caps (see
 * caps.c); closed before a top-level utility runs.  Returns a frame for
 * bulkhead_caps_leave: none, unless the phase runs inside a GUC level not
 * ours (then it gets a level of its own, as a nested phase does).
 */
extern bool bulkhead_caps_framed;
extern BulkheadCapsFrame bulkhead_caps_statement_slow(const BulkheadCaps *caps);
extern void bulkhead_caps_statement_close(void);

/* (inline: without caps and without a frame, the common case, a test) */
static inline BulkheadCapsFrame
bulkhead_caps_statement(const BulkheadCaps *caps)
{
	BulkheadCapsFrame none = {0, 0};

	if (likely(caps->mask == 0 && !bulkhead_caps_framed))
		return none;
	return bulkhead_caps_statement_slow(caps);
}

/*
 * A top-level utility that may commit internally (VACUUM, CREATE INDEX
 * CONCURRENTLY, ...) would pop a GUC nesting level at its first commit:
 * there the caps are set for the session instead, and the session's own
 * values restored once it ends (after an error: at the next statement).
 */
extern bool bulkhead_caps_enter_session(const BulkheadCaps *caps);
extern void bulkhead_caps_leave_session(bool failed);
extern void bulkhead_caps_restore_pending(void);

/*
 * A plan made before its lane capped max_parallel_workers_per_gather (a
 * cached one, or one planned before its lane was known) runs with at most
 * the cap's workers per Gather.
 */
struct QueryDesc;
extern void bulkhead_caps_parallel_workers(struct QueryDesc *queryDesc,
										   const BulkheadCaps *caps);


/* Do caps a and b differ in what the planner uses? */
extern bool bulkhead_caps_planning_differ(const BulkheadCaps *a,
										  const BulkheadCaps *b);

/* From _PG_init */
extern void bulkhead_caps_init(void);

#endif							/* BULKHEAD_CAPS_H */
