/*-------------------------------------------------------------------------
 *
 * grants.c
 *	  Memory grants (1.4): the one owner of the memory counters.  A
 *	  statement's request is granted when it fits at every level of its
 *	  path (its workload, the budgets above it, the server) and no earlier
 *	  waiter is short at one of them; otherwise it waits, its permit held,
 *	  in one queue of the server's waiters kept in arrival order.
 *
 * Order (grantqueue.c).  Freed memory serves the waiters by rank, then in
 * the order they began to wait: a lock holder someone waits for first,
 * then by the importance its wait carries (bulkhead.importance, or its
 * rule's, when the wait began), raised one step per
 * bulkhead.aging_interval of waiting.  A waiter that cannot be served
 * blocks, for every waiter after it in that order, its own workload (so
 * that a later, smaller request of the same workload does not overtake it)
 * and each level where it is short (so that nothing after it takes what it
 * waits for); a waiter of another tree, where memory is free, is served.
 * With every waiter normal and none boosted, that is 1.4's arrival order,
 * worked out as 1.4 did.  A small request (1.5: under
 * bulkhead.small_memory_request) is not held up so: it is served whenever
 * it fits, even when a larger one waits, which still runs at its
 * memory_timeout, shrunk to what is free then.  A request larger than a level's max_memory is
 * cut to it first, and one that exceeds a level even so (the floors of a
 * shrunk statement) is granted once that level has nothing granted.
 *
 * A queued lock holder (1.5).  A waiter asks, from its wait's start and
 * then every tenth of deadlock_timeout, with no LWLock held, whether its
 * transaction holds a heavyweight lock another backend waits for
 * (lockholder.h).  While it does, its wait is boosted: ranked above every
 * importance, served ahead when memory frees (counted once per wait as a
 * boost, and written to the wait log); when nobody waits on it any more,
 * the boost is dropped.  Still waited on at its deadlock_timeout (from the
 * wait's start), it is granted what is free, never below its floors (64 kB
 * a node), counted at every level even past max_memory: borrowed, counted
 * as such and as shrunk.  Its grant is returned as any other.  So an
 * inversion through the memory queue lasts at most deadlock_timeout plus
 * the holder's statement, and passes a level's bound by its floors alone.
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
 * the lock is released, the boosts' too.  Nothing here throws while the
 * lock is held.
 *
 * A grant's levels are its workload's and the budgets above it as they are
 * when it is counted (grantlevel.c: the levels' arithmetic); grantstate.c
 * holds the rest: the shared memory, the worker's definitions, what the
 * views read.  Called by memory.c (the statements), loader.c and worker.c
 * (serving the waiters after a load or a reload of bulkhead.max_memory);
 * calls grantlevel.c, grantqueue.c (the queue's order), slot.c and
 * slotstats.c (statistics), reqtotal.c (shrinking), importance.c (a wait's
 * importance), lockholder.c (is this waiter waited on) and waitlog.c (a
 * boost's line).
 *
 *-------------------------------------------------------------------------
 */
#include "memory/grants.h"
#include "memory/grantlevel.h"
#include "memory/grantqueue.h"
#include "memory/reqtotal.h"
#include "deadlock/lockholder.h"
#include "record/waitlog.h"
#include "workload/importance.h"
#include "workload/slot.h"
#include "workload/slotstats.h"

#include "access/xact.h"
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

/* The workload a wait is charged to, for its counting after the lock */
typedef struct WaitCharge
{
	int			slotno;			/* -1: none */
	const char *name;			/* its name when the wait began */
} WaitCharge;

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
		want = bulkhead_reqtotal_shrink(req, avail, &outcome->setting_kb);
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

/*---- A queued lock holder (1.5) ----*/

/*
 * How often a waiter asks whether it holds a lock someone waits for.  A
 * transaction that has written (its transaction id's lock is what the
 * writers of its rows wait for): a tenth of deadlock_timeout, so that a
 * holder is found (and served ahead) within a tenth of it, and its grant
 * over the limit comes at most a tenth after its deadlock_timeout; never
 * more often than every 10 ms, since an ask takes the lock manager's 16
 * partition locks (shared) whenever some backend waits for a heavyweight
 * lock.  One that has not written (a table's or an advisory lock): every
 * deadlock_timeout, so that a waiter of a read-only statement adds few
 * wake-ups.  With bulkhead.boost_lock_holders off: never.  Only waiters ask.
 */
static int64
holder_ask_us(void)
{
	if (!bulkhead_boost_lock_holders)
		return PG_INT64_MAX / 4;
	if (!TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return (int64) DeadlockTimeout * 1000;
	return (int64) Max(10, DeadlockTimeout / 10) * 1000;
}

/*
 * Count a boost of a wait (borrowed: its grant over the limit) in its
 * workload's figures, and a boost ahead in the wait log (a loan's line is
 * the caller's, once the grant is recorded: see BulkheadGrantOutcome).
 * After the grants' lock.
 */
static void
count_boost(const WaitCharge *charge, bool borrowed, int64 wait_us)
{
	if (charge->slotno >= 0 && charge->name[0] != '\0')
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[charge->slotno];

		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
		if (bulkhead_slot_matches(slot, charge->name))
			bulkhead_slot_count_boost(slot, borrowed);
		LWLockRelease(slot->lock);
	}
	if (!borrowed)
		bulkhead_waitlog_boost(charge->slotno, true, false, Max(wait_us, 0));
}

/*
 * Is this waiter a lock holder someone waits for?  Asked with no LWLock
 * held.  Waited on: its wait is boosted, served ahead of every other (at
 * once if what it waits for is free); no longer: the boost is dropped.
 * Returns whether it is waited on; *boosted: whether this ask boosted it.
 */
static bool
ask_holder(MemBackend *me, bool *boosted)
{
	bool		waited_on = bulkhead_lock_waited_on();
	int			boost = waited_on ? BULKHEAD_BOOST_AHEAD : BULKHEAD_BOOST_NONE;
	MemWakeups w = {0};

	*boosted = false;
	/* (written by this backend alone, under the lock: read without it) */
	if (me->boost == boost)
		return waited_on;
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	if (me->state == MEM_WAITING)
	{
		bulkhead_grants_queue_boost(BULKHEAD_MY_PROCNO, boost);
		bulkhead_grants_serve(&w);	/* it may go now, or those it blocked */
		*boosted = waited_on;
	}
	LWLockRelease(bulkhead_grants_shared->lock);
	bulkhead_grants_wake_all(&w);
	return waited_on;
}

/*
 * The end of a wait: granted, or still queued and then granted what is
 * free now, shrunk to it, never below its floors (past the limit if need
 * be): at its memory_timeout, or as a lock holder still waited on at its
 * deadlock_timeout (borrow).  Returns whether it borrowed so.
 */
static bool
finish_wait(MemBackend *me, const BulkheadMemRequest *req, bool borrow,
			BulkheadGrant *grant, BulkheadGrantOutcome *outcome)
{
	MemWakeups w = {0};
	bool		borrowed = false;

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	if (me->state == MEM_WAITING)
	{
		bulkhead_grants_queue_remove(BULKHEAD_MY_PROCNO);
		bulkhead_grants_count_waiting(&me->wait, -1);
		me->held += take_free(&me->wait, req, me->want, false, outcome);
		if (borrow)
		{
			me->boost = BULKHEAD_BOOST_BORROWED;	/* (no longer queued) */
			borrowed = true;
		}
		bulkhead_grants_serve(&w);	/* those it blocked may go */
	}
	*grant = me->wait;
	me->state = MEM_IDLE;
	my_wait = false;
	LWLockRelease(bulkhead_grants_shared->lock);
	bulkhead_grants_wake_all(&w);
	return borrowed;
}

/*
 * Wait for the grant of this backend's queued request (see acquire),
 * asking from its start, every holder_ask_us, whether it holds a lock
 * someone waits for (see ask_holder); one still waited on at its
 * deadlock_timeout borrows (finish_wait).
 */
static void
wait_for_grant(MemBackend *me, const BulkheadMemRequest *req, int64 timeout_us,
			   const WaitCharge *charge, BulkheadGrant *grant,
			   BulkheadGrantOutcome *outcome)
{
	TimestampTz deadline = me->queued_at +
		Min(timeout_us, PG_INT64_MAX - me->queued_at);
	TimestampTz borrow_at = me->queued_at + (int64) DeadlockTimeout * 1000;
	TimestampTz next_ask = me->queued_at;
	uint32		wait_event = memory_wait_event();
	bool		counted = false;
	bool		borrow = false;

	for (;;)
	{
		TimestampTz now;
		long		sleep_ms;
		bool		boosted;

		CHECK_FOR_INTERRUPTS();
		now = GetCurrentTimestamp();
		if (now >= next_ask)
		{
			borrow = ask_holder(me, &boosted) && now >= borrow_at;
			next_ask = now + holder_ask_us();
			if (boosted && !counted)
			{
				counted = true; /* once per wait */
				count_boost(charge, false, now - me->queued_at);
			}
		}
		pg_read_barrier();
		if (*((volatile uint8 *) &me->state) == MEM_GRANTED || now >= deadline ||
			borrow)
		{
			outcome->wait_us = now > me->queued_at ? now - me->queued_at : 0;
			if (finish_wait(me, req, borrow, grant, outcome))
			{
				count_boost(charge, true, outcome->wait_us);
				outcome->borrowed = true;
			}
			return;
		}
		sleep_ms = (long) Min((Min(deadline, next_ask) - now + 999) / 1000, (int64) INT_MAX);
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
	int			importance = bulkhead_importance_current();
	WaitCharge	charge = {slotno, name};

	memset(outcome, 0, sizeof(BulkheadGrantOutcome));
	outcome->setting_kb = req->setting_kb;
	bulkhead_grants_queue_ready();	/* (before the lock: it may throw) */

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
	me->importance = (uint8) importance;

	/* a request larger than a level's limit is cut to it */
	cut = bulkhead_grants_free_along(grant, true);
	if (want > cut && !shadow)
	{
		want = bulkhead_reqtotal_shrink(req, cut, &outcome->setting_kb);
		outcome->shrunk = true;
	}
	queue = bulkhead_grants_shared->head >= 0 ?
		bulkhead_grants_queue_blocks(grant, want, requested, shadow, importance) :
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
		me->boost = BULKHEAD_BOOST_NONE;
		me->state = MEM_WAITING;
		bulkhead_grants_queue_push(BULKHEAD_MY_PROCNO);
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
	wait_for_grant(me, req, timeout_us, &charge, grant, outcome);

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
	MemWakeups w = {0};

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	bulkhead_grants_add_along(grant, -grant->bytes);
	me->held = Max(me->held - grant->bytes, 0);
	me->requested = Max(me->requested - requested, 0);
	if (me->held == 0)
		me->boost = BULKHEAD_BOOST_NONE;	/* its boosted grant is over */
	grant->bytes = 0;
	if (bulkhead_grants_shared->head >= 0)
		bulkhead_grants_serve(&w);
	LWLockRelease(bulkhead_grants_shared->lock);
	bulkhead_grants_wake_all(&w);
}

void
bulkhead_grants_wait_cleanup(void)
{
	MemBackend *me;
	MemWakeups w = {0};

	if (!my_wait)
		return;
	me = &bulkhead_grants_shared->backends[BULKHEAD_MY_PROCNO];
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	if (me->state == MEM_WAITING)
	{
		bulkhead_grants_queue_remove(BULKHEAD_MY_PROCNO);
		bulkhead_grants_count_waiting(&me->wait, -1);
	}
	else if (me->state == MEM_GRANTED)
	{
		/* granted as the error came: passed on */
		bulkhead_grants_add_along(&me->wait, -me->want);
		me->held = Max(me->held - me->want, 0);
	}
	me->requested = Max(me->requested - me->want_requested, 0);
	if (me->held == 0)
		me->boost = BULKHEAD_BOOST_NONE;	/* its boosted wait is over */
	me->state = MEM_IDLE;
	my_wait = false;
	if (bulkhead_grants_shared->head >= 0)
		bulkhead_grants_serve(&w);
	LWLockRelease(bulkhead_grants_shared->lock);
	bulkhead_grants_wake_all(&w);
}

/*
 * After a load (or a reload of bulkhead.max_memory): the hints worked out
 * again, and the waiters that fit now served.
 */
void
bulkhead_grants_loaded(void)
{
	MemWakeups w = {0};

	bulkhead_grants_queue_ready();	/* (before the lock: it may throw) */
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	bulkhead_grants_mark_limits();
	if (bulkhead_grants_shared->head >= 0)
		bulkhead_grants_serve(&w);
	LWLockRelease(bulkhead_grants_shared->lock);
	bulkhead_grants_wake_all(&w);
}
