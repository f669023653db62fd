/*-------------------------------------------------------------------------
 *
 * memory.c
 *	  Memory grants (1.4), this backend's side.  When a statement's
 *	  executor starts (after its lane is known, before the standard start,
 *	  since several nodes fix their limit there), its plan's request is
 *	  granted, at once or after a wait; when it ends, the grant is returned.
 *	  A utility that uses maintenance_work_mem (CREATE INDEX, REINDEX,
 *	  CLUSTER, VACUUM) is granted it for its whole run, its own commits
 *	  included.
 *
 * Which workload.  A statement is charged to the transaction's automatic
 * permit's workload (where it is now); without one, to the permit this
 * backend took last; without any, to the server's limit alone
 * (bulkhead.max_memory), where it never waits: it is granted what is free,
 * and while others wait only its floor.  Not
 * charged at all: what runs in a process other than a client backend
 * (parallel workers are counted in their leader's request), EXPLAIN
 * without ANALYZE, and everything while no memory limit is set anywhere.
 *
 * A statement that holds a grant never waits for another: while this
 * backend holds one (an outer statement, an open cursor), a statement is
 * granted what is free at once, shrunk to it.  So memory waits never wait
 * on one another.
 *
 * Held to it.  A statement runs each of its executor's phases with the
 * values its grant was worked out with, as caps (caps.c): work_mem and
 * hash_mem_multiplier (a utility, maintenance_work_mem and its parallel
 * workers) lowered to fit its grant when it runs shrunk, never below 64 kB
 * (1 MB), and never raised above them by a SET between its phases (a
 * cursor's FETCH after a SET work_mem).  A set_config() inside one of its
 * phases is beyond reach: the nodes that begin after it in that phase see
 * it (doc/memory.md says so).
 *
 * Ends.  Its executor's end returns a grant; an error returns what the
 * failed (sub)transaction's statements held and what was running in it (a
 * cursor whose FETCH failed in a savepoint: a failed portal never reaches
 * its executor's end), a commit what is left, the exit everything.  A wait
 * ended by an error is cleaned up by grants.c.
 *
 * Owns backend-local state only: held[], the grants this backend holds.
 * Called by hooks.c, utility.c and lanes.c; calls grants.c and
 * grantstate.c, memreq.c and utilreq.c, local.c, mayrun.h (may the user
 * run the plan?), and statements.c and waitlog.c (what a grant met, 1.4).
 *
 *-------------------------------------------------------------------------
 */
#include "memory/memory.h"

#include <math.h>

#include "guards/caps.h"
#include "memory/grants.h"
#include "permit/local.h"
#include "memory/memreq.h"
#include "acl/mayrun.h"
#include "record/statements.h"
#include "record/waitlog.h"
#include "memory/grantstate.h"
#include "memory/utilreq.h"
#include "memory/memplan.h"
#include "memory/reqtotal.h"
#include "memory/nodelimit.h"
#include "memory/nodepeak.h"
#include "memory/feedback.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"
#include "utils/memutils.h"

/* One grant this backend holds */
typedef struct HeldGrant
{
	const void *owner;			/* its QueryDesc, or its utility's Node */
	bool		utility;		/* held over its utility's own commits */
	bool		shrunk;
	SubTransactionId subid;		/* where it was granted */
	SubTransactionId active_in; /* a phase of it runs, begun in this
								 * subtransaction; Invalid: none */
	bool		granted;		/* false: measured only (it requested
								 * nothing, 1.5) */
	bool		started;		/* its executor's start returned */
	int64		requested;
	double		asked[BULKHEAD_NUM_CAPS];	/* the settings asked with */
	BulkheadGrant grant;
	BulkheadCaps pins;			/* the settings it runs with */
	BulkheadCaps start_pins;	/* ... while its executor starts */
	BulkheadMemPlan *plan;		/* a statement's nodes (1.5), or NULL;
								 * TopMemoryContext */
} HeldGrant;

static HeldGrant *held = NULL;	/* TopMemoryContext */
static BulkheadMemPlan *pending = NULL; /* a plan built, not yet held */
static int	maxheld = 0;
static bool exit_registered = false;

int			bulkhead_memory_nheld = 0;
int			bulkhead_memory_request = BULKHEAD_REQUEST_USE;

static void
free_plan(BulkheadMemPlan *mp)
{
	if (mp != NULL)
		bulkhead_nodelimit_release(NULL, mp, false);
}

/*
 * Return held[i] and take it out of the list (orphan: its nodes kept until
 * the transaction ends).  Never throws.
 */
static void
release_at(int i, bool orphan)
{
	if (held[i].granted)
		bulkhead_grants_release(&held[i].grant, held[i].requested);
	if (held[i].plan != NULL)
		bulkhead_nodelimit_release(held[i].owner, held[i].plan, orphan);
	bulkhead_memory_nheld--;
	if (i < bulkhead_memory_nheld)
		memmove(&held[i], &held[i + 1], sizeof(HeldGrant) * (bulkhead_memory_nheld - i));
}

/* The newest grant of owner, or -1 */
static int
find(const void *owner)
{
	int			i;

	for (i = bulkhead_memory_nheld - 1; i >= 0; i--)
		if (held[i].owner == owner)
			return i;
	return -1;
}

static void
memory_exit(int code, Datum arg)
{
	bulkhead_grants_wait_cleanup();
	while (bulkhead_memory_nheld > 0)
		release_at(bulkhead_memory_nheld - 1, false);
	bulkhead_nodelimit_xact_end();
}

/* Room for one more grant (before any is taken: this may throw) */
static void
make_room(void)
{
	if (!exit_registered)
	{
		before_shmem_exit(memory_exit, (Datum) 0);
		exit_registered = true;
	}
	if (bulkhead_memory_nheld < maxheld)
		return;
	maxheld = Max(maxheld * 2, 8);
	held = held == NULL ?
		MemoryContextAlloc(TopMemoryContext, sizeof(HeldGrant) * maxheld) :
		repalloc(held, sizeof(HeldGrant) * maxheld);
}

/*
 * The workload a statement is charged to: the automatic permit's, where it
 * is now; else the permit taken last; -1 without any.
 */
int
bulkhead_memory_charged_slot(void)
{
	TimestampTz latest = 0;
	int			chosen = -1;
	int			i;

	if (bulkhead_local == NULL || bulkhead_nheld == 0)
		return -1;
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
	{
		BulkheadLocalPermit *p = &bulkhead_local[i];

		if (!p->held)
			continue;
		if (p->scope == BULKHEAD_SCOPE_AUTO)
			return *((volatile int16 *) &bulkhead_my_entry(i)->workload);
		if (chosen < 0 || p->acquired_in >= latest)
		{
			chosen = *((volatile int16 *) &bulkhead_my_entry(i)->workload);
			latest = p->acquired_in;
		}
	}
	return chosen;
}

/*
 * Grant req to a statement of workload slotno, owned by owner, asked with
 * settings (a, b): work_mem and hash_mem_multiplier, or for a utility
 * maintenance_work_mem and its parallel workers.  Returns the record, the
 * settings to hold it to in its pins.  A statement's plan (pending, taken
 * over here) gets its nodes' limits; with nothing to request it is only
 * measured (no lock).
 */
static HeldGrant *
grant(const void *owner, bool utility, int slotno, const BulkheadMemRequest *req,
	  int cap_a, double a, int cap_b, double b)
{
	BulkheadGrantOutcome outcome;
	HeldGrant  *h;
	int			stale = find(owner);
	bool		may_wait;
	bool		measure_only = bulkhead_memreq_bytes(req) <= 0;

	/* a record of the same address is a failed executor's, left behind */
	if (stale >= 0)
		release_at(stale, false);
	make_room();
	may_wait = bulkhead_memory_nheld == 0;		/* one that holds a grant never waits */
	h = &held[bulkhead_memory_nheld];
	memset(&outcome, 0, sizeof(outcome));
	outcome.setting_kb = req->setting_kb;
	if (!measure_only)
		bulkhead_grants_acquire(slotno, req, may_wait, &h->grant, &outcome);
	h->owner = owner;
	h->utility = utility;
	h->granted = !measure_only;
	h->started = false;
	h->subid = GetCurrentSubTransactionId();
	h->active_in = h->subid;
	h->requested = measure_only ? 0 : bulkhead_memreq_bytes(req);
	h->shrunk = outcome.setting_kb < req->setting_kb;	/* its settings lowered */
	h->plan = pending;
	pending = NULL;
	memset(h->asked, 0, sizeof(h->asked));
	h->asked[cap_a] = a;
	h->asked[cap_b] = b;
	memset(&h->pins, 0, sizeof(BulkheadCaps));
	h->pins.mask = (1 << cap_a) | (1 << cap_b);
	if (h->plan == NULL)
	{
		h->pins.value[cap_a] = outcome.setting_kb;
		h->pins.value[cap_b] = b;
	}
	else
	{
		/* what no node's limit covers runs as 1.4 ran it, shrunk alike */
		bulkhead_reqtotal_assign(h->plan, req, outcome.setting_kb);
		h->pins.value[cap_a] = h->shrunk ?
			Max(floor(a * outcome.setting_kb / req->setting_kb), BULKHEAD_MEM_FLOOR_KB) : a;
		h->pins.value[cap_b] = h->shrunk ? 1.0 : b;
	}
	h->start_pins = h->pins;
	if (h->plan != NULL)
	{
		h->start_pins.value[cap_a] = Min(h->pins.value[cap_a], h->plan->start_kb);
		h->start_pins.value[cap_b] = 1.0;	/* (start limits: start_kb, or patched) */
		h->plan->requested = h->requested;
		h->plan->granted = h->granted ? h->grant.bytes : 0;
		h->plan->wait_us = outcome.queued ? outcome.wait_us : 0;
		h->plan->shrunk = outcome.shrunk;	/* its extra too */
	}
	bulkhead_memory_nheld++;
	if (measure_only)
		return h;
	/* what it met (1.4, issue 42), once the grant is held and recorded */
	bulkhead_statements_note_memory(slotno, h->requested, outcome.shrunk);
	if (outcome.queued)
		bulkhead_waitlog_memory(slotno, outcome.wait_us, outcome.shrunk);
	if (outcome.borrowed)
		bulkhead_waitlog_boost(slotno, true, true, outcome.wait_us);
	return h;
}

/* May this process's statement be charged at all? */
static bool
chargeable(void)
{
	return MyBackendType == B_BACKEND && !IsParallelWorker() &&
		bulkhead_shared != NULL;
}

/*
 * The request of a statement of plan in workload slotno, worked out with
 * settings (wm, hm), its nodes in mp (palloc'd in mp's context); false
 * for a plan with nothing to request or measure
 */
static bool
plan_request(const PlannedStmt *plan, int wm, double hm, int slotno,
			 BulkheadMemPlan *mp, BulkheadMemRequest *req)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(mp));

	bulkhead_memreq_build(plan, wm, hm, mp);
	MemoryContextSwitchTo(old);
	mp->slotno = slotno;
	memset(req, 0, sizeof(*req));
	if (mp->nnodes == 0 && mp->fixed <= 0 && !mp->unbounded)
		return false;
	if (bulkhead_memory_request == BULKHEAD_REQUEST_LIMIT)
		bulkhead_reqtotal_at_limits(mp);
	else if (mp->queryid != 0)
		bulkhead_feedback_apply(mp);
	bulkhead_reqtotal_total(mp, req);
	return true;
}

int64
bulkhead_memory_request_of(const PlannedStmt *plan, int wm, double hm, int slotno,
						   char *source)
{
	BulkheadMemPlan *mp = palloc0(sizeof(BulkheadMemPlan));
	BulkheadMemRequest req;
	int64		bytes = 0;
	int			i;

	*source = BULKHEAD_SOURCE_ESTIMATE;
	if (plan_request(plan, wm, hm, slotno, mp, &req))
		bytes = bulkhead_memreq_bytes(&req);
	/* a node at its limit says so; else one from feedback */
	if (mp->extra > 0)
		*source = BULKHEAD_SOURCE_FEEDBACK;
	for (i = 0; i < mp->nnodes; i++)
		if (mp->nodes[i].source == BULKHEAD_SOURCE_LIMIT ||
			(mp->nodes[i].source == BULKHEAD_SOURCE_FEEDBACK &&
			 *source == BULKHEAD_SOURCE_ESTIMATE))
			*source = mp->nodes[i].source;
	if (mp->nodes)
		pfree(mp->nodes);
	pfree(mp);
	return bytes;
}

/*
 * The settings a statement's request is worked out with: the session's,
 * also for a statement run inside a memory node of another (whose settings
 * that node's wrapper has lowered), with the caps in force
 */
static void
asked_settings(int *wm, double *hm)
{
	bulkhead_nodelimit_session(wm, hm);
}

const BulkheadCaps *
bulkhead_memory_start(QueryDesc *queryDesc, int eflags)
{
	BulkheadMemRequest req;
	BulkheadMemPlan *mp;
	MemoryContext old;
	int			slotno;
	int			wm;
	double		hm;

	if (likely(!bulkhead_grants_active()) || !chargeable() ||
		(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		return NULL;
	slotno = bulkhead_memory_charged_slot();
	if (!bulkhead_grants_limited(slotno))
		return NULL;
	asked_settings(&wm, &hm);
	/* (the caller applied the caps in force: these are the values it runs with) */
	free_plan(pending);
	pending = NULL;
	old = MemoryContextSwitchTo(TopMemoryContext);
	mp = palloc0(sizeof(BulkheadMemPlan));
	pending = mp;
	MemoryContextSwitchTo(old);
	if (!plan_request(queryDesc->plannedstmt, wm, hm, slotno, mp, &req))
		return NULL;			/* no memory node: no lock */

	/*
	 * Not for a plan the user may not run (the executor fails next): its
	 * request, shown and counted, would tell the planner's estimates, and
	 * so the statistics pg_stats hides
	 */
	if (!bulkhead_may_run(queryDesc->plannedstmt))
		return NULL;
	return &grant(queryDesc, false, slotno, &req, BULKHEAD_CAP_WORK_MEM, wm,
				  BULKHEAD_CAP_HASH_MEM_MULTIPLIER, hm)->start_pins;
}

void
bulkhead_memory_started_slow(QueryDesc *queryDesc)
{
	int			i;

	if ((i = find(queryDesc)) < 0 ||
		held[i].started)
		return;
	held[i].started = true;
	if (held[i].plan == NULL)
		return;
	/* the work_mem its nodes started with (the caps in force, its start pin) */
	held[i].plan->started_kb = (int) Min((double) work_mem,
										 held[i].start_pins.value[BULKHEAD_CAP_WORK_MEM]);
	bulkhead_nodelimit_install(queryDesc, held[i].plan);
}

void
bulkhead_memory_ending_slow(QueryDesc *queryDesc)
{
	int			i;
	BulkheadMemPlan *mp;

	if ((i = find(queryDesc)) < 0 ||
		(mp = held[i].plan) == NULL || !held[i].started)
		return;
	bulkhead_nodepeak_read(queryDesc, mp);
	if (mp->queryid != 0)
		bulkhead_feedback_note(mp);
}

const BulkheadMemPlan *
bulkhead_memory_plan_of(const PlannedStmt *stmt, bool read_peaks)
{
	int			i;

	for (i = bulkhead_memory_nheld - 1; i >= 0; i--)
		if (held[i].plan != NULL && !held[i].utility &&
			((const QueryDesc *) held[i].owner)->plannedstmt == stmt)
		{
			if (read_peaks && held[i].started)
				bulkhead_nodepeak_read((QueryDesc *) held[i].owner, held[i].plan);
			return held[i].plan;
		}
	return NULL;
}

const BulkheadCaps *
bulkhead_memory_pins_slow(QueryDesc *queryDesc)
{
	int			i = find(queryDesc);

	if (i < 0)
		return NULL;
	held[i].active_in = GetCurrentSubTransactionId();
	return &held[i].pins;
}

void
bulkhead_memory_phase_done(QueryDesc *queryDesc)
{
	int			i;

	if (likely(bulkhead_memory_nheld == 0) || (i = find(queryDesc)) < 0)
		return;
	held[i].active_in = InvalidSubTransactionId;
}

void
bulkhead_memory_end(QueryDesc *queryDesc)
{
	int			i;

	if (likely(bulkhead_memory_nheld == 0) || (i = find(queryDesc)) < 0)
		return;
	release_at(i, false);
}

const BulkheadCaps *
bulkhead_memory_utility_start(Node *stmt, int context)
{
	BulkheadMemRequest req;
	int			slotno;

	if (likely(!bulkhead_grants_active()) || !chargeable())
		return NULL;
	slotno = bulkhead_memory_charged_slot();
	if (!bulkhead_grants_limited(slotno) ||
		!bulkhead_memreq_utility(stmt, context, maintenance_work_mem,
								 max_parallel_maintenance_workers, &req))
		return NULL;
	free_plan(pending);
	pending = NULL;
	return &grant(stmt, true, slotno, &req,
				  BULKHEAD_CAP_MAINTENANCE_WORK_MEM, maintenance_work_mem,
				  BULKHEAD_CAP_PARALLEL_MAINTENANCE, max_parallel_maintenance_workers)->pins;
}

void
bulkhead_memory_utility_end(Node *stmt)
{
	bulkhead_memory_end((QueryDesc *) stmt);
}

double
bulkhead_memory_asked(int cap, double live)
{
	int			i;

	int			wm;
	double		hm;

	for (i = 0; i < bulkhead_memory_nheld; i++)
		if (held[i].shrunk && (held[i].pins.mask & (1 << cap)))
			return held[i].asked[cap];
	/* inside a memory node, whose wrapper lowered them (1.5) */
	bulkhead_nodelimit_session(&wm, &hm);
	if (cap == BULKHEAD_CAP_WORK_MEM && wm != work_mem)
		return Max(live, wm);
	if (cap == BULKHEAD_CAP_HASH_MEM_MULTIPLIER && hm != hash_mem_multiplier)
		return Max(live, hm);
	return live;
}

/*
 * Release the grants of subtransaction subid (and those of statements that
 * were running in it: their executors died with it), or all (but
 * utilities', which their own end returns, over their commits)
 */
static void
release_where(bool all, SubTransactionId subid, bool keep_utility)
{
	int			i;

	for (i = bulkhead_memory_nheld - 1; i >= 0; i--)
		if ((all || held[i].subid == subid || held[i].active_in == subid) &&
			!(keep_utility && held[i].utility))
			release_at(i, !all);
}

static void
memory_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			bulkhead_nodelimit_abort(true, InvalidSubTransactionId);
			bulkhead_grants_wait_cleanup();
			if (bulkhead_memory_nheld > 0)
				release_where(true, InvalidSubTransactionId, false);
			bulkhead_nodelimit_xact_end();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			/* a utility that commits internally keeps its grant */
			if (bulkhead_memory_nheld > 0)
				release_where(true, InvalidSubTransactionId, true);
			bulkhead_nodelimit_xact_end();
			break;
		default:
			break;
	}
}

static void
memory_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	int			i;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			bulkhead_nodelimit_abort(false, mySubid);
			bulkhead_grants_wait_cleanup();
			if (bulkhead_memory_nheld > 0)
				release_where(false, mySubid, false);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			for (i = 0; i < bulkhead_memory_nheld; i++)
			{
				if (held[i].subid == mySubid)
					held[i].subid = parentSubid;
				if (held[i].active_in == mySubid)
					held[i].active_in = parentSubid;
			}
			break;
		default:
			break;
	}
}

static const struct config_enum_entry request_options[] = {
	{"use", BULKHEAD_REQUEST_USE, false},
	{"limit", BULKHEAD_REQUEST_LIMIT, false},
	{NULL, 0, false}
};

void
bulkhead_memory_settings_init(void)
{
	DefineCustomEnumVariable("bulkhead.memory_request",
							 "What a statement's memory nodes request: what they are expected to use, or their limits.",
							 "use: the plan's estimates, then what earlier runs used (1.5); "
							 "limit: the most each node may use at the statement's settings (1.4).",
							 &bulkhead_memory_request,
							 BULKHEAD_REQUEST_USE, request_options,
							 PGC_SUSET, 0, NULL, NULL, NULL);
}

void
bulkhead_memory_init(void)
{
	RegisterXactCallback(memory_xact_callback, NULL);
	RegisterSubXactCallback(memory_subxact_callback, NULL);
}
