/*-------------------------------------------------------------------------
 *
 * caps.c
 *	  Lanes that cap settings (1.3): bulkhead_workload.settings, a text[] of
 *	  'name=value' for the settings that bound one statement's resources.
 *	  While a permit of the lane is held, every statement starts with each
 *	  listed setting at the smaller of the lane's value and the session's
 *	  (jit: off wins; several permits: the smallest cap wins).
 *
 * A cap is applied as a function's SET clause is (fmgr_security_definer):
 * a new GUC nesting level, the values set with GUC_ACTION_SAVE, the level
 * popped by AtEOXact_GUC when the phase ends, or by the (sub)transaction's
 * abort on an error.  The session's own values are never changed, so a
 * SET by the user can lower a cap for later statements but never raise
 * one (a set_config() inside a capped statement lasts for that statement,
 * as inside a function with a SET clause).  transparent.c applies the caps around
 * a statement's planning and each executor phase and around a utility: a
 * phase nested in one (a function's query) finds the values lowered
 * already and changes nothing.
 *
 * A top-level utility that may commit internally (VACUUM, CREATE INDEX
 * CONCURRENTLY, ...) would lose a nesting level at its first commit: there
 * the caps are set for the session and the session's values put back when
 * it ends, as RESET when they were the reset values (so that a reload or
 * ALTER ROLE applies again).  After an error the values are put back at
 * the session's next statement (this module's xact callback keeps them
 * pending until a transaction that put them back commits).
 *
 * Owns no shared state: the lanes' caps are in the slots' config (slot.c),
 * the caps in force in local.c.  Its backend-local state is the session
 * values kept aside for such a utility.  The settings are parsed and
 * checked in capsparse.c.  Called by capsparse.c, local.c (combining),
 * hooks.c and utility.c (applying), lanes.c and views.c (showing); calls
 * no module.
 *
 *-------------------------------------------------------------------------
 */
#include "guards/caps.h"

#include <ctype.h>
#include <float.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/execdesc.h"
#include "jit/jit.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "optimizer/cost.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

static const struct
{
	const char *name;
	BulkheadCapKind kind;
}			cap_settings[BULKHEAD_NUM_CAPS] =
{
	[BULKHEAD_CAP_WORK_MEM] = {"work_mem", CAP_INT},
	[BULKHEAD_CAP_HASH_MEM_MULTIPLIER] = {"hash_mem_multiplier", CAP_REAL},
	[BULKHEAD_CAP_MAINTENANCE_WORK_MEM] = {"maintenance_work_mem", CAP_INT},
	[BULKHEAD_CAP_TEMP_FILE_LIMIT] = {"temp_file_limit", CAP_INT},
	[BULKHEAD_CAP_PARALLEL_PER_GATHER] = {"max_parallel_workers_per_gather", CAP_INT},
	[BULKHEAD_CAP_PARALLEL_MAINTENANCE] = {"max_parallel_maintenance_workers", CAP_INT},
	[BULKHEAD_CAP_JIT] = {"jit", CAP_BOOL},
};

const char *
bulkhead_cap_name(int i)
{
	return cap_settings[i].name;
}

BulkheadCapKind
bulkhead_cap_kind(int i)
{
	return cap_settings[i].kind;
}

/* The value in force now, in the cap's terms (no limit: the largest) */
static double
current_value(int i)
{
	switch ((BulkheadCapSetting) i)
	{
		case BULKHEAD_CAP_WORK_MEM:
			return work_mem;
		case BULKHEAD_CAP_HASH_MEM_MULTIPLIER:
			return hash_mem_multiplier;
		case BULKHEAD_CAP_MAINTENANCE_WORK_MEM:
			return maintenance_work_mem;
		case BULKHEAD_CAP_TEMP_FILE_LIMIT:
			return temp_file_limit < 0 ? DBL_MAX : temp_file_limit;
		case BULKHEAD_CAP_PARALLEL_PER_GATHER:
			return max_parallel_workers_per_gather;
		case BULKHEAD_CAP_PARALLEL_MAINTENANCE:
			return max_parallel_maintenance_workers;
		case BULKHEAD_CAP_JIT:
			return jit_enabled ? 1 : 0;
		case BULKHEAD_NUM_CAPS:
			break;
	}
	return DBL_MAX;
}

/* The settings of caps that are above it now: a mask */
static uint8
to_lower(const BulkheadCaps *caps, uint8 which)
{
	uint8		lower = 0;
	int			i;

	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
		if ((caps->mask & which & (1 << i)) && caps->value[i] < current_value(i))
			lower |= 1 << i;
	return lower;
}

/* Set setting i to value (action: SAVE for a level, SET for the session) */
static void
set_cap(int i, double value, GucAction action)
{
	char		buf[64];

	if (cap_settings[i].kind == CAP_REAL)
		snprintf(buf, sizeof(buf), "%.17g", value);
	else if (cap_settings[i].kind == CAP_BOOL)
		strlcpy(buf, value > 0 ? "on" : "off", sizeof(buf));
	else
		snprintf(buf, sizeof(buf), "%d", (int) value);
	(void) set_config_option(cap_settings[i].name, buf, PGC_SUSET,
							 PGC_S_SESSION, action, true, 0, false);
}

/*---- The caps in force ----*/

void
bulkhead_caps_combine(BulkheadCaps *into, const BulkheadCaps *caps)
{
	int			i;

	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
	{
		if (!(caps->mask & (1 << i)))
			continue;
		if (!(into->mask & (1 << i)) || caps->value[i] < into->value[i])
			into->value[i] = caps->value[i];
		into->mask |= 1 << i;
	}
}

/* Transactions ended in this backend: a frame's level is gone with its own */
static uint64 xact_ends = 0;

BulkheadCapsFrame
bulkhead_caps_enter_slow(const BulkheadCaps *caps)
{
	BulkheadCapsFrame frame = {0, 0};
	uint8		lower;
	int			i;

	if (caps->mask == 0)
		return frame;
	lower = to_lower(caps, caps->mask);
	if (lower == 0)
		return frame;
	frame.ends = xact_ends;
	frame.level = NewGUCNestLevel();
	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
		if (lower & (1 << i))
			set_cap(i, caps->value[i], GUC_ACTION_SAVE);
	return frame;
}

/*
 * Pop the frame's level, unless the transaction it was made in has ended
 * meanwhile: a statement that committed internally (one not known to, as
 * ALTER DATABASE ... SET TABLESPACE) had its commit pop it already.
 */
void
bulkhead_caps_leave_slow(BulkheadCapsFrame frame)
{
	if (frame.ends == xact_ends)
		AtEOXact_GUC(true, frame.level);
}

/*---- The statement's frame ----*/

/*
 * The level a client's top-level statement runs its phases in: made at the
 * first phase that needs it, kept over the statement's later phases and
 * over the next statements that run under the same caps, so that a
 * statement pays one nesting level and one set_config per setting lowered
 * (a frame per phase cost about three times that).  Gone with its
 * transaction (whose end pops every level), or with the abort of the
 * subtransaction it was made in; popped before a top-level utility runs
 * (SET, SHOW, COMMIT, ...: they see and change the session's own values),
 * and when the caps in force change.  A set_config() by a statement that
 * raised a setting above its cap is lowered again at the next phase, in a
 * new frame.
 * It is ours only while it is the innermost GUC nesting level above the
 * (sub)transaction's own: it is made only there (a top-level phase that
 * runs inside a level not ours, a deferred trigger's query in a function
 * with a SET clause at an implicit commit, gets a frame of its own for the
 * phase instead), and popped only while nothing is above it (else a
 * function's SET clause would be undone under it: a SECURITY DEFINER's
 * search_path).
 */
bool		bulkhead_caps_framed = false;	/* statement_frame.open */

static struct
{
	bool		open;
	int			level;
	uint64		ends;			/* xact_ends when it was made */
	SubTransactionId subid;		/* the subtransaction it was made in */
	BulkheadCaps caps;
}			statement_frame;

static bool
same_caps(const BulkheadCaps *a, const BulkheadCaps *b)
{
	int			i;

	if (a->mask != b->mask)
		return false;
	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
		if ((a->mask & (1 << i)) && a->value[i] != b->value[i])
			return false;
	return true;
}

/*
 * Is level the innermost GUC nesting level?  (One made and popped at once
 * tells: the level after it.  On 15 the pop visits every setting: this
 * is asked only where a frame is popped.)
 */
static bool
innermost(int level)
{
	int			next = NewGUCNestLevel();

	AtEOXact_GUC(true, next);
	return next == level + 1;
}

/*
 * Pop the statement's frame if it is still there and innermost.  Returns
 * false when a level not ours is above it (it stays, to be popped later).
 */
static bool
statement_frame_pop(void)
{
	if (!statement_frame.open)
		return true;
	if (statement_frame.ends == xact_ends)
	{
		if (!innermost(statement_frame.level))
			return false;
		AtEOXact_GUC(true, statement_frame.level);
	}
	statement_frame.open = bulkhead_caps_framed = false;
	return true;
}

BulkheadCapsFrame
bulkhead_caps_statement_slow(const BulkheadCaps *caps)
{
	BulkheadCapsFrame frame = {0, 0};
	uint8		lower;
	int			i;

	if (statement_frame.open && statement_frame.ends != xact_ends)
		statement_frame.open = bulkhead_caps_framed = false;	/* popped by its
																 * transaction */
	if (statement_frame.open && !same_caps(&statement_frame.caps, caps) &&
		!statement_frame_pop())
		return bulkhead_caps_enter(caps);
	if (caps->mask == 0)
		return frame;
	lower = to_lower(caps, caps->mask);
	if (lower == 0)
		return frame;			/* (in its frame: nothing was raised) */

	/*
	 * In its frame, a statement raised a setting (set_config()): that SET
	 * is popped with the frame into the session's own values, as a SET in
	 * a function with a SET clause outlives the function; a new frame lowers
	 * it again.  (Lowering it in the old frame would turn the frame's saved
	 * value into the SET's, and the cap would outlive the frame.)
	 */
	if (!statement_frame_pop())
		return bulkhead_caps_enter_slow(caps);
	frame.ends = xact_ends;
	frame.level = NewGUCNestLevel();
	if (frame.level == GetCurrentTransactionNestLevel() + 1)
	{
		statement_frame.level = frame.level;
		statement_frame.ends = xact_ends;
		statement_frame.subid = GetCurrentSubTransactionId();
		statement_frame.caps = *caps;
		statement_frame.open = bulkhead_caps_framed = true;
		frame.level = 0;		/* the statement's, not the phase's */
	}
	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
		if (lower & (1 << i))
			set_cap(i, caps->value[i], GUC_ACTION_SAVE);
	return frame;
}

void
bulkhead_caps_statement_close(void)
{
	(void) statement_frame_pop();
}

/* Lower the workers of each Gather and Gather Merge in plan to at most n */
static void
lower_workers(Plan *plan, int n)
{
	ListCell   *lc;
	List	   *children = NIL;

	if (plan == NULL)
		return;
	check_stack_depth();
	switch (nodeTag(plan))
	{
		case T_Gather:
			((Gather *) plan)->num_workers = Min(((Gather *) plan)->num_workers, n);
			break;
		case T_GatherMerge:
			((GatherMerge *) plan)->num_workers = Min(((GatherMerge *) plan)->num_workers, n);
			break;
		case T_Append:
			children = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_BitmapAnd:
			children = ((BitmapAnd *) plan)->bitmapplans;
			break;
		case T_BitmapOr:
			children = ((BitmapOr *) plan)->bitmapplans;
			break;
		case T_SubqueryScan:
			lower_workers(((SubqueryScan *) plan)->subplan, n);
			break;
		case T_CustomScan:
			children = ((CustomScan *) plan)->custom_plans;
			break;
		default:
			break;
	}
	foreach(lc, children)
		lower_workers((Plan *) lfirst(lc), n);
	lower_workers(plan->lefttree, n);
	lower_workers(plan->righttree, n);
}

/*
 * A plan made before its lane capped max_parallel_workers_per_gather (a
 * cached one; the first statement's EXECUTE or EXPLAIN ANALYZE) runs with
 * at most the cap's workers per Gather: at 0, without parallel mode (a
 * Gather then runs its plan in the leader); above, from a copy of the plan
 * (not the cache's) whose Gathers ask for fewer workers.
 */
void
bulkhead_caps_parallel_workers(QueryDesc *queryDesc, const BulkheadCaps *caps)
{
	PlannedStmt *copy;
	int			cap = caps->value[BULKHEAD_CAP_PARALLEL_PER_GATHER];
	ListCell   *lc;

	if (!(caps->mask & (1 << BULKHEAD_CAP_PARALLEL_PER_GATHER)) ||
		!queryDesc->plannedstmt->parallelModeNeeded)
		return;
	if (cap == 0)
	{
		copy = palloc(sizeof(PlannedStmt));
		*copy = *queryDesc->plannedstmt;
		copy->parallelModeNeeded = false;
	}
	else
	{
		copy = copyObject(queryDesc->plannedstmt);
		lower_workers(copy->planTree, cap);
		foreach(lc, copy->subplans)
			lower_workers((Plan *) lfirst(lc), cap);
	}
	queryDesc->plannedstmt = copy;
}

/* Do caps a and b differ in what the planner uses? */
bool
bulkhead_caps_planning_differ(const BulkheadCaps *a, const BulkheadCaps *b)
{
	int			i;

	if ((a->mask ^ b->mask) & BULKHEAD_PLANNING_CAPS)
		return true;
	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
		if ((a->mask & BULKHEAD_PLANNING_CAPS & (1 << i)) &&
			a->value[i] != b->value[i])
			return true;
	return false;
}

/*---- Caps over a utility that may commit internally ----*/

typedef enum SessionCapState
{
	SESSION_CAP_NONE = 0,
	SESSION_CAP_SET,			/* capped for the session: to put back */
	SESSION_CAP_PUT_BACK		/* put back in this transaction, which may
								 * still abort (then SET again) */
} SessionCapState;

static struct
{
	SessionCapState state;
	bool		reset;			/* the value was the reset value: RESET */
	char	   *saved;			/* TopMemoryContext */
}			session_caps[BULKHEAD_NUM_CAPS];

/* A utility failed with caps set for the session: put back next statement */
static bool put_back_pending = false;

/* How many of session_caps[] are not SESSION_CAP_NONE */
static int	session_caps_kept = 0;

bool
bulkhead_caps_enter_session(const BulkheadCaps *caps)
{
	uint8		lower;
	int			i;

	if (caps->mask == 0)
		return false;
	bulkhead_caps_restore_pending();
	lower = to_lower(caps, caps->mask);
	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
	{
		const char *name = cap_settings[i].name;
		const char *now;

		if (!(lower & (1 << i)))
			continue;
		/*
		 * The session's own value is kept aside once: a value put back in
		 * this transaction (not committed yet) is still the one kept.
		 */
		if (session_caps[i].state == SESSION_CAP_NONE)
		{
			now = GetConfigOption(name, false, false);
			session_caps[i].saved = MemoryContextStrdup(TopMemoryContext, now);
			session_caps[i].reset = strcmp(now, GetConfigOptionResetString(name)) == 0;
			session_caps_kept++;
		}
		session_caps[i].state = SESSION_CAP_SET;
		set_cap(i, caps->value[i], GUC_ACTION_SET);
	}
	return lower != 0;
}

/* Put back the session's values kept aside */
static void
put_back(void)
{
	int			i;

	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
	{
		if (session_caps[i].state != SESSION_CAP_SET)
			continue;
		session_caps[i].state = SESSION_CAP_PUT_BACK;
		(void) set_config_option(cap_settings[i].name,
								 session_caps[i].reset ? NULL : session_caps[i].saved,
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SET,
								 true, 0, false);
	}
}

void
bulkhead_caps_leave_session(bool failed)
{
	if (failed)
		put_back_pending = true;	/* the transaction is failing */
	else
		put_back();
}

/* At the start of a statement: put back what a failed utility left */
void
bulkhead_caps_restore_pending(void)
{
	if (likely(!put_back_pending))
		return;
	if (!IsTransactionState() || IsAbortedTransactionBlockState())
		return;
	put_back_pending = false;
	put_back();
}

static void
caps_xact_callback(XactEvent event, void *arg)
{
	int			i;

	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		xact_ends++;
	if (likely(session_caps_kept == 0))
		return;					/* nothing kept aside: the common case */

	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
	{
		if (session_caps[i].state != SESSION_CAP_PUT_BACK)
			continue;
		if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PREPARE)
		{
			session_caps[i].state = SESSION_CAP_NONE;
			session_caps_kept--;
			pfree(session_caps[i].saved);
			session_caps[i].saved = NULL;
		}
		else if (event == XACT_EVENT_ABORT)
		{
			/* the abort undoes the put back: again at the next statement */
			session_caps[i].state = SESSION_CAP_SET;
			put_back_pending = true;
		}
	}
}

/*
 * The end of the subtransaction the statement's frame was made in pops it:
 * an abort, or a commit (RELEASE closes it first; a block with an
 * EXCEPTION clause in a function run at an implicit commit does not)
 */
static void
caps_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if ((event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB) &&
		statement_frame.open && mySubid <= statement_frame.subid)
		statement_frame.open = bulkhead_caps_framed = false;
}

void
bulkhead_caps_init(void)
{
	RegisterXactCallback(caps_xact_callback, NULL);
	RegisterSubXactCallback(caps_subxact_callback, NULL);
}
