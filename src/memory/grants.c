/*-------------------------------------------------------------------------
 *
 * grants.c
 *	  Memory grants (1.4): the one owner of the memory counters.  A
 *	  statement's request is granted when it fits at every level of its
 *	  path (its workload, the budgets above it, the server) and no earlier
 *	  waiter is short at one of them; otherwise it waits, its permit held,
 *	  in one queue of the server's waiters kept in arrival order.
 *
 * Order.  Freed memory serves the waiters in the order they began to
 * wait.  A waiter that cannot be served blocks, for every later waiter,
 * its own workload (so that a later, smaller request of the same workload
 * does not overtake it) and each level where it is short (so that nothing
 * later takes what it waits for); a later waiter of another tree, where
 * memory is free, is served.  A request larger than a level's max_memory
 * is cut to it first, and one that exceeds a level even so (the floors of
 * a shrunk statement) is granted once that level has nothing granted.
 *
 * After its timeout a waiter takes what is free then, shrunk to it, never
 * an error; so does a statement that may not wait (a nested one, while its
 * backend holds a grant: memory waits then never wait on each other), and
 * a statement outside any workload, which never waits (no administrator
 * gave it a timeout or a place in a queue) and while others wait takes only
 * its floor, so that it never holds up the workloads' statements.  A
 * workload in shadow mode is granted what it asks at once, counted at
 * every level (it is memory in use), and counted as a wait where it would
 * have waited; a budget in shadow mode bounds nothing.
 *
 * All of it under one LWLock of its own (see grants.h for the fields): a
 * grant or a release is one lock round trip, and a grant's path is walked
 * in this module's copy of the trees, so that no slot lock is taken under
 * it.  The workloads' cumulative figures are counted through slot.c after
 * the lock is released.  Nothing here throws while the lock is held.
 *
 * A grant's levels are its workload's and the budgets above it as they are
 * when it is counted (grantlevel.c: the levels' arithmetic); grantstate.c
 * holds the rest: the shared memory, the worker's definitions, what the
 * views read.  Called by memory.c (the statements), loader.c and worker.c
 * (serving the waiters after a load or a reload of bulkhead.max_memory);
 * calls grantlevel.c, slot.c (statistics) and memreq.c (shrinking).
 *
 *-------------------------------------------------------------------------
 */
#include "memory/grants.h"
#include "memory/grantlevel.h"
#include "workload/slot.h"
#include "workload/slotstats.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* This backend waits (for the cleanup after an error) */
static bool my_wait = false;

/* Scratch of this backend for the queue's order: a stamp per level */
static uint32 *marks = NULL;
static uint32 stamp = 0;

#define SERVER_MARK(g)	((g)->nslots)
#define WAKE_BATCH		16

typedef struct Wakeups
{
	int			n;
	int			procnos[WAKE_BATCH];
} Wakeups;

/*---- The waiters' queue, and its order (caller holds the lock) ----*/

static void
queue_push(int procno)
{
	MemBackend *b = &bulkhead_grants_shared->backends[procno];

	b->prev = bulkhead_grants_shared->tail;
	b->next = -1;
	if (bulkhead_grants_shared->tail >= 0)
		bulkhead_grants_shared->backends[bulkhead_grants_shared->tail].next = procno;
	else
		bulkhead_grants_shared->head = procno;
	bulkhead_grants_shared->tail = procno;
}

static void
queue_remove(int procno)
{
	MemBackend *b = &bulkhead_grants_shared->backends[procno];

	if (b->prev >= 0)
		bulkhead_grants_shared->backends[b->prev].next = b->next;
	else
		bulkhead_grants_shared->head = b->next;
	if (b->next >= 0)
		bulkhead_grants_shared->backends[b->next].prev = b->prev;
	else
		bulkhead_grants_shared->tail = b->prev;
	b->prev = b->next = -1;
}

static void
marks_begin(void)
{
	if (marks == NULL)
		marks = MemoryContextAllocZero(TopMemoryContext,
									   sizeof(uint32) * (bulkhead_grants_shared->nslots + 1));
	if (++stamp == 0)
	{
		memset(marks, 0, sizeof(uint32) * (bulkhead_grants_shared->nslots + 1));
		stamp = 1;
	}
}

static bool
blocked(const BulkheadGrant *g)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int			i;

	if (marks[SERVER_MARK(bulkhead_grants_shared)] == stamp)
		return true;
	for (i = 0; i < n; i++)
		if (marks[path[i]] == stamp)
			return true;
	return false;
}

/* A waiter not served blocks its workload and where it is short */
static void
mark_unserved(const BulkheadGrant *g, int64 bytes)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int			i;

	if (n == 0 || short_of(&bulkhead_grants_shared->server,
						   bulkhead_grants_server_max(), bytes, false))
		marks[SERVER_MARK(bulkhead_grants_shared)] = stamp;
	for (i = 0; i < n; i++)
	{
		MemLevel   *level = &bulkhead_grants_shared->levels[path[i]];

		if (i == 0 || short_of(level, level->max_memory, bytes, false))
			marks[path[i]] = stamp;
	}
}

/*
 * Would a new request of g's path, for bytes, have to wait behind the
 * queue (shadow_too: were its levels in shadow mode enforced)?  Marks what
 * the waiters block.
 */
static bool
queue_blocks(const BulkheadGrant *g, int64 bytes, bool shadow_too)
{
	int			p;

	marks_begin();
	for (p = bulkhead_grants_shared->head; p >= 0; p = bulkhead_grants_shared->backends[p].next)
	{
		MemBackend *b = &bulkhead_grants_shared->backends[p];

		if (blocked(&b->wait) || !bulkhead_grants_fits(&b->wait, b->want, false))
			mark_unserved(&b->wait, b->want);
	}
	return blocked(g) || !bulkhead_grants_fits(g, bytes, shadow_too);
}

static void
wake_later(Wakeups *w, int procno)
{
	if (w->n < WAKE_BATCH)
		w->procnos[w->n++] = procno;
	else
		SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

static void
wake_all(Wakeups *w)
{
	int			i;

	for (i = 0; i < w->n; i++)
		SetLatch(&GetPGProcByNumber(w->procnos[i])->procLatch);
	w->n = 0;
}

/* Serve the waiters that fit now, oldest first (see the header) */
static void
serve(Wakeups *w)
{
	int			p = bulkhead_grants_shared->head;

	marks_begin();
	while (p >= 0)
	{
		MemBackend *b = &bulkhead_grants_shared->backends[p];
		int			next = b->next;

		if (!blocked(&b->wait) && bulkhead_grants_fits(&b->wait, b->want, false))
		{
			queue_remove(p);
			bulkhead_grants_count_waiting(&b->wait, -1);
			bulkhead_grants_add_along(&b->wait, b->want);
			b->wait.bytes = b->want;
			b->held += b->want;
			pg_write_barrier();
			b->state = MEM_GRANTED;
			wake_later(w, p);
		}
		else
			mark_unserved(&b->wait, b->want);
		p = next;
	}
}

/*---- A statement's grant ----*/

static uint32
memory_wait_event(void)
{
#if PG_VERSION_NUM >= 170000
	static uint32 event = 0;

	if (event == 0)
		event = WaitEventExtensionNew("BulkheadMemory");
	return event;
#else
	return PG_WAIT_EXTENSION;
#endif
}

/*
 * Grant g what is free along its path (yield: nothing, the floor only),
 * shrinking req to it (a request that fits is granted whole).  Returns the
 * bytes granted.
 */
static int64
take_free(BulkheadGrant *g, const BulkheadMemRequest *req, int64 want,
		  bool yield, BulkheadGrantOutcome *outcome)
{
	int64		avail = yield ? 0 : bulkhead_grants_free_along(g, false);

	if (want > avail)
	{
		outcome->setting_kb = Min(outcome->setting_kb, bulkhead_memreq_fit(req, avail));
		want = (int64) bulkhead_memreq_bytes_at(req, outcome->setting_kb);
		outcome->shrunk = true;
	}
	bulkhead_grants_add_along(g, want);
	g->bytes = want;
	return want;
}

/* Count a workload's figures (after the lock; slot.c checks the name) */
static void
count_workload(int slotno, const char *name, bool began, uint64 wait_us,
			   bool waited, bool shrunk)
{
	BulkheadSlot *slot;

	if (slotno < 0 || name[0] == '\0' || !(began || waited || shrunk))
		return;
	slot = &bulkhead_shared->slots[slotno];
	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	if (bulkhead_slot_matches(slot, name))
		bulkhead_slot_count_memory(slot, began, waited, wait_us, shrunk);
	LWLockRelease(slot->lock);
}

/* Wait for the grant of this backend's queued request (see acquire) */
static void
wait_for_grant(MemBackend *me, const BulkheadMemRequest *req, int64 timeout_us,
			   BulkheadGrant *grant, BulkheadGrantOutcome *outcome)
{
	TimestampTz deadline = me->queued_at +
		Min(timeout_us, PG_INT64_MAX - me->queued_at);
	uint32		wait_event = memory_wait_event();
	Wakeups		w = {0};

	for (;;)
	{
		TimestampTz now;
		long		sleep_ms;

		CHECK_FOR_INTERRUPTS();
		now = GetCurrentTimestamp();
		pg_read_barrier();
		if (*((volatile uint8 *) &me->state) == MEM_GRANTED || now >= deadline)
		{
			LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
			if (me->state == MEM_WAITING)
			{
				/* its time is up: what is free now, shrunk to it */
				queue_remove(BULKHEAD_MY_PROCNO);
				bulkhead_grants_count_waiting(&me->wait, -1);
				me->held += take_free(&me->wait, req, me->want, false, outcome);
				serve(&w);		/* those it blocked may go */
			}
			*grant = me->wait;
			me->state = MEM_IDLE;
			my_wait = false;
			LWLockRelease(bulkhead_grants_shared->lock);
			wake_all(&w);
			outcome->wait_us = now > me->queued_at ? now - me->queued_at : 0;
			return;
		}
		sleep_ms = (long) Min((deadline - now + 999) / 1000, (int64) INT_MAX);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, wait_event);
		ResetLatch(MyLatch);
	}
}

/*
 * Long: the decision under the lock (shadow, at once, what is free, or a
 * wait) reads best in one piece, its counting after the lock.
 */
void
bulkhead_grants_acquire(int slotno, const BulkheadMemRequest *req,
						bool may_wait, BulkheadGrant *grant,
						BulkheadGrantOutcome *outcome)
{
	MemBackend *me = &bulkhead_grants_shared->backends[BULKHEAD_MY_PROCNO];
	int64		requested = bulkhead_memreq_bytes(req);
	int64		want = requested;
	int64		timeout_us = 0;
	int64		cut;
	bool		shadow = false;
	bool		queue;
	bool		waits = false;
	char		name[NAMEDATALEN] = "";

	memset(outcome, 0, sizeof(BulkheadGrantOutcome));
	outcome->setting_kb = req->setting_kb;

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	bulkhead_grants_make_path(slotno, grant);
	if (slotno >= 0)
	{
		MemLevel   *level = &bulkhead_grants_shared->levels[slotno];

		strlcpy(name, level->name, NAMEDATALEN);
		shadow = level->shadow;
		timeout_us = level->timeout_us;
	}
	me->pid = MyProcPid;
	me->slot = (int16) slotno;
	me->requested += requested;

	/* a request larger than a level's limit is cut to it */
	cut = bulkhead_grants_free_along(grant, true);
	if (want > cut && !shadow)
	{
		outcome->setting_kb = bulkhead_memreq_fit(req, cut);
		want = (int64) bulkhead_memreq_bytes_at(req, outcome->setting_kb);
		outcome->shrunk = true;
	}
	queue = bulkhead_grants_shared->head >= 0 ? queue_blocks(grant, want, shadow) :
		!bulkhead_grants_fits(grant, want, shadow);
	if (shadow || !queue)
	{
		/* at once: it fits, or a shadow workload's (counted if it would wait) */
		outcome->waited = shadow && queue;
		bulkhead_grants_add_along(grant, want);
		grant->bytes = want;
		me->held += want;
	}
	else if (!may_wait || slotno < 0 || timeout_us <= 0)
	{
		/*
		 * What is free, at once.  Outside any workload, nothing while others
		 * wait (only the floor): such a statement never waits, and never
		 * takes what a waiter waits for.
		 */
		me->held += take_free(grant, req, want,
							  slotno < 0 && bulkhead_grants_shared->head >= 0,
							  outcome);
	}
	else
	{
		me->want = want;
		me->want_requested = requested;
		me->wait = *grant;
		me->queued_at = GetCurrentTimestamp();
		me->state = MEM_WAITING;
		queue_push(BULKHEAD_MY_PROCNO);
		bulkhead_grants_count_waiting(grant, 1);
		bulkhead_grants_shared->waits++;
		my_wait = true;
		waits = true;
		outcome->waited = true;
		outcome->queued = true;
	}
	if (outcome->shrunk && !waits)
		bulkhead_grants_shared->shrunk++;
	LWLockRelease(bulkhead_grants_shared->lock);

	/*
	 * (waits, not me->state: a release may serve the wait as soon as the
	 * lock is released, and then only the wait's own path takes it)
	 */
	if (!waits)
	{
		count_workload(slotno, name, outcome->waited, 0, false, outcome->shrunk);
		return;
	}
	count_workload(slotno, name, true, 0, false, false);
	wait_for_grant(me, req, timeout_us, grant, outcome);

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	bulkhead_hist_add(&bulkhead_grants_shared->wait_hist, (uint64) outcome->wait_us);
	if (outcome->shrunk)
		bulkhead_grants_shared->shrunk++;
	LWLockRelease(bulkhead_grants_shared->lock);
	count_workload(slotno, name, false, (uint64) outcome->wait_us, true, outcome->shrunk);
}

void
bulkhead_grants_release(BulkheadGrant *grant, int64 requested)
{
	MemBackend *me = &bulkhead_grants_shared->backends[BULKHEAD_MY_PROCNO];
	Wakeups		w = {0};

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	bulkhead_grants_add_along(grant, -grant->bytes);
	me->held = Max(me->held - grant->bytes, 0);
	me->requested = Max(me->requested - requested, 0);
	grant->bytes = 0;
	if (bulkhead_grants_shared->head >= 0)
		serve(&w);
	LWLockRelease(bulkhead_grants_shared->lock);
	wake_all(&w);
}

void
bulkhead_grants_wait_cleanup(void)
{
	MemBackend *me;
	Wakeups		w = {0};

	if (!my_wait)
		return;
	me = &bulkhead_grants_shared->backends[BULKHEAD_MY_PROCNO];
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	if (me->state == MEM_WAITING)
	{
		queue_remove(BULKHEAD_MY_PROCNO);
		bulkhead_grants_count_waiting(&me->wait, -1);
	}
	else if (me->state == MEM_GRANTED)
	{
		/* granted as the error came: passed on */
		bulkhead_grants_add_along(&me->wait, -me->want);
		me->held = Max(me->held - me->want, 0);
	}
	me->requested = Max(me->requested - me->want_requested, 0);
	me->state = MEM_IDLE;
	my_wait = false;
	if (bulkhead_grants_shared->head >= 0)
		serve(&w);
	LWLockRelease(bulkhead_grants_shared->lock);
	wake_all(&w);
}

/*
 * After a load (or a reload of bulkhead.max_memory): the hints worked out
 * again, and the waiters that fit now served.
 */
void
bulkhead_grants_loaded(void)
{
	Wakeups		w = {0};

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	bulkhead_grants_mark_limits();
	if (bulkhead_grants_shared->head >= 0)
		serve(&w);
	LWLockRelease(bulkhead_grants_shared->lock);
	wake_all(&w);
}
