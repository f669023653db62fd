/*-------------------------------------------------------------------------
 *
 * nodelimit.c
 *	  Memory grants (1.5): each memory node of a granted statement runs with
 *	  its limit lowered to its grant (memplan.h says where each is set).
 *
 * After the executor started, the nodes that set a limit get a wrapper
 * around their ExecProcNode (its ExecProcNodeReal: ExecProcNodeFirst and
 * instrumentation still run first).  The wrapper sets work_mem to the
 * node's grant and hash_mem_multiplier to 1 for the call, and puts back
 * what was there.  A sort, a store, a hash join's table, a bitmap, an
 * Agg's per-group sorts and spills read them then.  A Memoize's and a
 * hashed Agg's limit fixed at their start is lowered in place.  A Gather's
 * first call (when its workers are launched, and take the leader's
 * settings) runs with the settings set through the GUC machinery, at a
 * nesting level of their own, since a worker receives only settings whose
 * source is not the default.
 *
 * Error paths.  A wrapper's settings are written straight into the
 * variables (a GUC nesting level per call would cost more than the node).
 * An error that leaves a wrapper does not put them back; so each wrapper
 * call is recorded on a stack with its subtransaction, and an abort puts
 * back the settings of the outermost call begun in the aborted
 * (sub)transaction, before the GUC machinery undoes its own levels (the
 * transaction's callbacks run first: xact.c).
 *
 * Owns backend-local state only: wrapped[], the nodes wrapped now, and
 * calls[], the wrapper calls under way.  Called by memory.c; calls
 * nodepeak.c (an Agg's values sampled after each call).
 *
 *-------------------------------------------------------------------------
 */
#include "memory/nodelimit.h"
#include "memory/nodepeak.h"

#include <limits.h>

#include "access/xact.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

/* A node wrapped now */
typedef struct Wrapped
{
	PlanState  *ps;
	ExecProcNodeMtd real;		/* its own ExecProcNodeReal */
	BulkheadMemNode *node;		/* its memory node (run_kb) */
	const void *owner;			/* its statement */
} Wrapped;

/* A wrapper call under way: what it put aside */
typedef struct Call
{
	int			work_mem;
	double		hash_mem_multiplier;
	int			wrote;			/* the work_mem it set */
	SubTransactionId subid;
} Call;

static Wrapped *wrapped = NULL;	/* TopMemoryContext */
static int	nwrapped = 0;
static int	maxwrapped = 0;
static Call *calls = NULL;		/* TopMemoryContext */
static int	ncalls = 0;
static int	maxcalls = 0;

/*
 * The settings an abort put back, to put back again after the GUC's own
 * abort if that wrote what a wrapper had set (work_mem one of wrote[] or
 * within [wrote_min, wrote_max] past MAX_WROTE, hash_mem_multiplier 1)
 */
#define MAX_WROTE 16
bool		bulkhead_nodelimit_pending = false;
static int	pending_work_mem;
static double pending_hash_mem_multiplier;
static int	pending_wrote[MAX_WROTE];
static int	npending_wrote;
static int	wrote_min;
static int	wrote_max;

static Wrapped *
find(PlanState *ps)
{
	int			i;

	for (i = nwrapped - 1; i >= 0; i--)
		if (wrapped[i].ps == ps)
			return &wrapped[i];
	elog(FATAL, "bulkhead: a memory node's wrapper lost its node");
	return NULL;				/* keep compiler quiet */
}

/* Room for one more call (before it is recorded: this may throw) */
static void
calls_room(void)
{
	if (ncalls < maxcalls)
		return;
	maxcalls = Max(maxcalls * 2, 16);
	calls = calls == NULL ?
		MemoryContextAlloc(TopMemoryContext, sizeof(Call) * maxcalls) :
		repalloc(calls, sizeof(Call) * maxcalls);
}

static TupleTableSlot *gather_exec(PlanState *ps);

static TupleTableSlot *
limited_exec(PlanState *ps)
{
	Wrapped    *w = find(ps);
	BulkheadMemNode *node = w->node;
	TupleTableSlot *slot;
	Call	   *c;

	if (node->copies <= 0)
	{
		/* an Agg with no limit of its own: its values measured only */
		slot = w->real(ps);
		bulkhead_nodepeak_sample_agg(ps, node);
		return slot;
	}
	calls_room();
	c = &calls[ncalls];
	c->work_mem = work_mem;
	c->hash_mem_multiplier = hash_mem_multiplier;
	c->subid = GetCurrentSubTransactionId();
	c->wrote = Max(node->run_kb, 64);
	ncalls++;
	work_mem = c->wrote;
	hash_mem_multiplier = 1.0;
	slot = w->real(ps);
	ncalls--;
	work_mem = calls[ncalls].work_mem;
	hash_mem_multiplier = calls[ncalls].hash_mem_multiplier;
	if (node->kind == BULKHEAD_MEM_AGG)
		bulkhead_nodepeak_sample_agg(ps, node);
	return slot;
}

/*
 * The wrapped nodes below a Gather whose ExecProcNode its first call set
 * again (a parallel-aware hash join, for the leader: ExecHashJoinInitializeDSM)
 * are wrapped again, their entries kept
 */
static bool
rewrap_walker(PlanState *ps, void *context)
{
	int			i;

	if (ps == NULL)
		return false;
	if (ps->ExecProcNodeReal != limited_exec && ps->ExecProcNodeReal != gather_exec)
	{
		for (i = nwrapped - 1; i >= 0; i--)
		{
			if (wrapped[i].ps != ps)
				continue;
			wrapped[i].real = ps->ExecProcNodeReal;
			ps->ExecProcNodeReal = wrapped[i].node->kind == BULKHEAD_MEM_GATHER ?
				gather_exec : limited_exec;
			break;
		}
	}
	return planstate_tree_walker(ps, rewrap_walker, context);
}

/* Set a GUC at the current nesting level */
static void
set_setting(const char *name, const char *value)
{
	(void) set_config_option(name, value, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * A Gather: at its first call its workers are launched with the leader's
 * settings, so they are set through the GUC machinery there
 */
static TupleTableSlot *
gather_exec(PlanState *ps)
{
	Wrapped    *w = find(ps);
	bool		first;
	int			level;
	char		buf[32];
	TupleTableSlot *slot;

	first = IsA(ps, GatherState) ? !((GatherState *) ps)->initialized :
		!((GatherMergeState *) ps)->initialized;
	if (!first)
		return w->real(ps);
	level = NewGUCNestLevel();
	snprintf(buf, sizeof(buf), "%d", Max(w->node->run_kb, 64));
	set_setting("work_mem", buf);
	set_setting("hash_mem_multiplier", "1");
	slot = w->real(ps);
	AtEOXact_GUC(true, level);
	/* a parallel-aware node below may have set its ExecProcNode again */
	(void) rewrap_walker(ps, NULL);
	return slot;
}

/*
 * A Memoize's and a hashed Agg's limits, fixed at their start (with
 * work_mem at started_kb, hash_mem_multiplier 1), set to the node's grant:
 * a Memoize's is its limit, a hashed Agg's are scaled alike (its memory
 * limit leaves room for its spill partitions' buffers when it expects to
 * spill)
 */
static void
patch(PlanState *ps, BulkheadMemNode *node, int started_kb)
{
	double		bytes = (double) Max(node->run_kb, 64) * 1024.0;

	if (node->copies <= 0)
		return;
	if (IsA(ps, MemoizeState))
		((MemoizeState *) ps)->mem_limit = (uint64) bytes;
	else if (IsA(ps, AggState) && ((AggState *) ps)->hash_mem_limit > 0)
	{
		AggState   *agg = (AggState *) ps;
		double		scale = bytes / ((double) Max(started_kb, 64) * 1024.0);

		agg->hash_mem_limit = (Size) Max((double) agg->hash_mem_limit * scale, 64.0 * 1024);
		agg->hash_ngroups_limit = (uint64) Max((double) agg->hash_ngroups_limit * scale, 1.0);
	}
}

typedef struct Install
{
	BulkheadMemPlan *mp;
	const void *owner;
} Install;

static void
wrap(PlanState *ps, BulkheadMemNode *node, const void *owner)
{
	Wrapped    *w;

	if (ps->ExecProcNodeReal == limited_exec || ps->ExecProcNodeReal == gather_exec)
		return;					/* (a plan state reached twice) */
	w = &wrapped[nwrapped++];
	w->ps = ps;
	w->real = ps->ExecProcNodeReal;
	w->node = node;
	w->owner = owner;
	ps->ExecProcNodeReal = node->kind == BULKHEAD_MEM_GATHER ? gather_exec :
		limited_exec;
}

static bool
install_walker(PlanState *ps, Install *in)
{
	int			i;

	if (ps == NULL)
		return false;
	for (i = 0; i < in->mp->nnodes; i++)
	{
		BulkheadMemNode *node = &in->mp->nodes[i];

		if (node->held_by != ps->plan->plan_node_id)
			continue;
		patch(ps, node, in->mp->started_kb);	/* (a Memoize's, a hashed Agg's) */
		wrap(ps, node, in->owner);
		break;
	}
	return planstate_tree_walker(ps, install_walker, (void *) in);
}

void
bulkhead_nodelimit_install(QueryDesc *queryDesc, BulkheadMemPlan *mp)
{
	Install		in = {mp, queryDesc};
	int			need = nwrapped + mp->nnodes;
	ListCell   *lc;

	if (mp->nnodes == 0 || queryDesc->planstate == NULL)
		return;
	/* room for every node, once, before any is wrapped */
	if (need > maxwrapped)
	{
		maxwrapped = Max(need, Max(maxwrapped * 2, 16));
		wrapped = wrapped == NULL ?
			MemoryContextAlloc(TopMemoryContext, sizeof(Wrapped) * maxwrapped) :
			repalloc(wrapped, sizeof(Wrapped) * maxwrapped);
	}
	(void) install_walker(queryDesc->planstate, &in);
	/* the subplans no expression of the tree reaches */
	foreach(lc, queryDesc->estate->es_subplanstates)
		(void) install_walker((PlanState *) lfirst(lc), &in);
}

void
bulkhead_nodelimit_remove(const void *owner)
{
	int			i;
	int			kept = 0;

	for (i = 0; i < nwrapped; i++)
	{
		if (wrapped[i].owner == owner)
			continue;
		wrapped[kept++] = wrapped[i];
	}
	nwrapped = kept;
}

int
bulkhead_nodelimit_enter_session(void)
{
	int			level;
	char		buf[64];

	if (likely(ncalls == 0) ||
		(work_mem == calls[0].work_mem &&
		 hash_mem_multiplier == calls[0].hash_mem_multiplier))
		return -1;
	level = NewGUCNestLevel();
	snprintf(buf, sizeof(buf), "%d", calls[0].work_mem);
	set_setting("work_mem", buf);
	snprintf(buf, sizeof(buf), "%.17g", calls[0].hash_mem_multiplier);
	set_setting("hash_mem_multiplier", buf);
	return level;
}

void
bulkhead_nodelimit_leave_session(int level)
{
	if (level >= 0)
		AtEOXact_GUC(true, level);
}

void
bulkhead_nodelimit_session(int *wm, double *hm)
{
	*wm = ncalls > 0 ? calls[0].work_mem : work_mem;
	*hm = ncalls > 0 ? calls[0].hash_mem_multiplier : hash_mem_multiplier;
}

/* What calls[first...] put aside and set, for bulkhead_nodelimit_restore */
static void
note_pending(int first)
{
	int			i;

	pending_work_mem = calls[first].work_mem;
	pending_hash_mem_multiplier = calls[first].hash_mem_multiplier;
	npending_wrote = 0;
	wrote_min = INT_MAX;
	wrote_max = 0;
	for (i = first; i < ncalls; i++)
	{
		if (npending_wrote < MAX_WROTE)
			pending_wrote[npending_wrote++] = calls[i].wrote;
		wrote_min = Min(wrote_min, calls[i].wrote);
		wrote_max = Max(wrote_max, calls[i].wrote);
	}
	bulkhead_nodelimit_pending = true;
}

/* Is v a work_mem a wrapper of the aborted calls set? */
static bool
was_written(int v)
{
	int			i;

	for (i = 0; i < npending_wrote; i++)
		if (pending_wrote[i] == v)
			return true;
	/* (past MAX_WROTE calls, their range) */
	return npending_wrote == MAX_WROTE && v >= wrote_min && v <= wrote_max;
}

void
bulkhead_nodelimit_abort(bool all, SubTransactionId subid)
{
	int			i;

	for (i = 0; i < ncalls; i++)
	{
		if (all || calls[i].subid >= subid)
		{
			work_mem = calls[i].work_mem;
			hash_mem_multiplier = calls[i].hash_mem_multiplier;
			/*
			 * A GUC level pushed inside one of these calls (a function's SET
			 * clause, a Gather's first call) saved a wrapper's value as its
			 * prior, which the GUC's own abort, next, puts back: put these
			 * back again at the next statement (before anything reads them)
			 */
			note_pending(i);
			ncalls = i;
			break;
		}
	}
}

void
bulkhead_nodelimit_restore_slow(void)
{
	bulkhead_nodelimit_pending = false;
	if (ncalls > 0)
		return;					/* (a wrapper runs: it puts back its own) */
	/* what the GUC's abort wrote back, when it was a wrapper's value */
	if (was_written(work_mem))
		work_mem = pending_work_mem;
	if (hash_mem_multiplier == 1.0)
		hash_mem_multiplier = pending_hash_mem_multiplier;
}

/*---- Statements whose grants went with an aborted subtransaction ----*/

/*
 * Their executors may still be resumed in the transaction (a lazily
 * evaluated SQL function's, from 18 on): their nodes stay wrapped, with
 * their plans, until it ends.  Chained through the plans: never allocates.
 */
static BulkheadMemPlan *orphans = NULL;

void
bulkhead_nodelimit_release(const void *owner, BulkheadMemPlan *mp, bool orphan)
{
	if (orphan)
	{
		mp->orphan_owner = owner;
		mp->orphan_next = orphans;
		orphans = mp;
		return;
	}
	if (owner != NULL)
		bulkhead_nodelimit_remove(owner);
	if (mp->nodes)
		pfree(mp->nodes);
	pfree(mp);
}

void
bulkhead_nodelimit_xact_end(void)
{
	while (orphans != NULL)
	{
		BulkheadMemPlan *mp = orphans;

		orphans = mp->orphan_next;
		bulkhead_nodelimit_release(mp->orphan_owner, mp, false);
	}
}
