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
 * (bulkhead.max_memory, waiting up to bulkhead.memory_timeout).  Not
 * charged at all: what runs in a process other than a client backend
 * (parallel workers are counted in their leader's request), EXPLAIN
 * without ANALYZE, and everything while no memory limit is set anywhere.
 *
 * A statement that holds a grant never waits for another: while this
 * backend holds one (an outer statement, an open cursor), a statement is
 * granted what is free at once, shrunk to it.  So memory waits never wait
 * on one another.
 *
 * Shrunk.  A statement granted less than it requested runs with work_mem
 * (a utility, maintenance_work_mem) lowered to fit its grant, never below
 * 64 kB (1 MB): a cap added to its lanes' caps, applied around each of
 * its executor's phases as they are (caps.c).
 *
 * Ends.  Its executor's end returns a grant; an error returns what the
 * failed (sub)transaction's statements held (an executor that failed
 * never reaches its end), a commit what is left, the exit everything.  A
 * wait ended by an error is cleaned up by grants.c.
 *
 * Owns backend-local state only: held[], the grants this backend holds.
 * Called by hooks.c and bulkhead.c; calls grants.c, memreq.c, local.c and
 * caps.c.
 *
 *-------------------------------------------------------------------------
 */
#include "memory.h"
#include "caps.h"
#include "grants.h"
#include "local.h"
#include "memreq.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
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
	int64		requested;
	BulkheadGrant grant;
	BulkheadCaps caps;			/* shrunk: the caps it runs with */
} HeldGrant;

static HeldGrant *held = NULL;	/* TopMemoryContext */
static int	nheld = 0;
static int	maxheld = 0;
static bool exit_registered = false;

int			bulkhead_memory_nshrunk = 0;

/* Return held[i] and take it out of the list.  Never throws. */
static void
release_at(int i)
{
	bulkhead_grants_release(&held[i].grant, held[i].requested);
	if (held[i].shrunk)
		bulkhead_memory_nshrunk--;
	nheld--;
	if (i < nheld)
		memmove(&held[i], &held[i + 1], sizeof(HeldGrant) * (nheld - i));
}

/* The newest grant of owner, or -1 */
static int
find(const void *owner)
{
	int			i;

	for (i = nheld - 1; i >= 0; i--)
		if (held[i].owner == owner)
			return i;
	return -1;
}

static void
memory_exit(int code, Datum arg)
{
	bulkhead_grants_wait_cleanup();
	while (nheld > 0)
		release_at(nheld - 1);
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
	if (nheld < maxheld)
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
static int
charged_slot(void)
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
 * Grant req to a statement of workload slotno, owned by owner; returns the
 * caps to run it with.
 */
static const BulkheadCaps *
grant(const void *owner, bool utility, int slotno, const BulkheadMemRequest *req,
	  const BulkheadCaps *in_force)
{
	BulkheadGrantOutcome outcome;
	HeldGrant  *h;
	int			stale = find(owner);
	bool		may_wait;

	/* a record of the same address is a failed executor's, left behind */
	if (stale >= 0)
		release_at(stale);
	make_room();
	may_wait = nheld == 0;
	h = &held[nheld];
	bulkhead_grants_acquire(slotno, req, may_wait,
							(int64) bulkhead_memory_timeout_ms * 1000,
							&h->grant, &outcome);
	h->owner = owner;
	h->utility = utility;
	h->subid = GetCurrentSubTransactionId();
	h->requested = bulkhead_memreq_bytes(req);
	h->shrunk = outcome.setting_kb < req->setting_kb;
	nheld++;
	if (!h->shrunk)
		return in_force;
	bulkhead_memory_nshrunk++;
	h->caps = *in_force;
	{
		BulkheadCaps lowered = {0};
		int			cap = req->maintenance ? BULKHEAD_CAP_MAINTENANCE_WORK_MEM :
			BULKHEAD_CAP_WORK_MEM;

		lowered.mask = 1 << cap;
		lowered.value[cap] = outcome.setting_kb;
		bulkhead_caps_combine(&h->caps, &lowered);
	}
	return &h->caps;
}

/* May this process's statement be charged at all? */
static bool
chargeable(void)
{
	return MyBackendType == B_BACKEND && !IsParallelWorker() &&
		bulkhead_shared != NULL;
}

const BulkheadCaps *
bulkhead_memory_start(QueryDesc *queryDesc, int eflags, const BulkheadCaps *in_force)
{
	BulkheadMemRequest req;
	int			slotno;

	if (likely(!bulkhead_grants_active()) || !chargeable() ||
		(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		return in_force;
	slotno = charged_slot();
	if (!bulkhead_grants_limited(slotno))
		return in_force;
	bulkhead_memreq_plan(queryDesc->plannedstmt,
						 (int) bulkhead_caps_value(in_force, BULKHEAD_CAP_WORK_MEM),
						 bulkhead_caps_value(in_force, BULKHEAD_CAP_HASH_MEM_MULTIPLIER),
						 &req);
	if (req.units <= 0 && req.fixed <= 0)
		return in_force;		/* no memory node: no lock */
	return grant(queryDesc, false, slotno, &req, in_force);
}

const BulkheadCaps *
bulkhead_memory_caps_slow(QueryDesc *queryDesc, const BulkheadCaps *in_force)
{
	int			i = find(queryDesc);

	return i >= 0 && held[i].shrunk ? &held[i].caps : in_force;
}

void
bulkhead_memory_end(QueryDesc *queryDesc)
{
	int			i;

	if (likely(nheld == 0) || (i = find(queryDesc)) < 0)
		return;
	release_at(i);
}

const BulkheadCaps *
bulkhead_memory_utility_start(Node *stmt, const BulkheadCaps *in_force)
{
	BulkheadMemRequest req;
	int			slotno;

	if (likely(!bulkhead_grants_active()) || !chargeable())
		return in_force;
	slotno = charged_slot();
	if (!bulkhead_grants_limited(slotno) ||
		!bulkhead_memreq_utility(stmt,
								 (int) bulkhead_caps_value(in_force, BULKHEAD_CAP_MAINTENANCE_WORK_MEM),
								 (int) bulkhead_caps_value(in_force, BULKHEAD_CAP_PARALLEL_MAINTENANCE),
								 &req))
		return in_force;
	return grant(stmt, true, slotno, &req, in_force);
}

void
bulkhead_memory_utility_end(Node *stmt)
{
	bulkhead_memory_end((QueryDesc *) stmt);
}

/* Release the grants of subtransaction subid, or all (but utilities') */
static void
release_where(bool all, SubTransactionId subid, bool keep_utility)
{
	int			i;

	for (i = nheld - 1; i >= 0; i--)
		if ((all || held[i].subid == subid) &&
			!(keep_utility && held[i].utility))
			release_at(i);
}

static void
memory_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			bulkhead_grants_wait_cleanup();
			if (nheld > 0)
				release_where(true, InvalidSubTransactionId, false);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			/* a utility that commits internally keeps its grant */
			if (nheld > 0)
				release_where(true, InvalidSubTransactionId, true);
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
			bulkhead_grants_wait_cleanup();
			if (nheld > 0)
				release_where(false, mySubid, false);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			for (i = 0; i < nheld; i++)
				if (held[i].subid == mySubid)
					held[i].subid = parentSubid;
			break;
		default:
			break;
	}
}

void
bulkhead_memory_init(void)
{
	RegisterXactCallback(memory_xact_callback, NULL);
	RegisterSubXactCallback(memory_subxact_callback, NULL);
}
