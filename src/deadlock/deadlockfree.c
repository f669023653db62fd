/*-------------------------------------------------------------------------
 *
 * deadlockfree.c
 *	  A workload's shared proof that none of its waiters was deadlocked
 *	  (test C of deadlock.c), and the sleeps of the waiters that rely on it.
 *
 * A deadlock search whose root was in Prog publishes the proof in its
 * workload's slot and makes its searcher the prover, which goes on testing
 * every deadlock_timeout; the other waiters skip their searches on it and
 * sleep until it would expire.  A search whose root is stuck withdraws it
 * and wakes them; a prover whose wait ends passes the testing on to the
 * head waiter.  deadlock.c's header says why detection stays complete.
 *
 * Owns the slots' dl_ fields (dl_holders, dl_holder_states, dl_proved_at,
 * dl_interval_us, dl_prover), written under the slot lock held
 * exclusively; a waiter reads dl_proved_at without the lock only as a hint
 * (bulkhead_proof_next_check).  Called by deadlock.c, permit.c (the
 * wait loop) and local.c (the end of a wait).
 *
 *-------------------------------------------------------------------------
 */
#include "deadlock/deadlockfree.h"
#include "workload/slot.h"

#include "storage/proc.h"
#include "utils/timestamp.h"

/* The back-off of test B: 30 x deadlock_timeout, at most 10 s */
#define BACKOFF_FACTOR	30
#define BACKOFF_MAX_MS	10000

/* The workload whose proof this waiter sleeps on, and that proof's date */
static int	sleeping_slot = -1;
static TimestampTz sleeping_on = 0;

/* A deadlock check begins: the sleep on a proof is over */
void
bulkhead_proof_check_begins(void)
{
	sleeping_slot = -1;
}

/* The interval of test B that follows interval_us */
int64
bulkhead_proof_next_interval(int64 interval_us)
{
	int64		dt = (int64) DeadlockTimeout * 1000;
	int64		cap = Max(dt, Min(dt * BACKOFF_FACTOR,
								  (int64) BACKOFF_MAX_MS * 1000));

	return Min(Max(interval_us * 2, dt), cap);
}

/*
 * The search began at start and found this wait able to end (its root in
 * Prog: some holder can move): write that into the slot, for test C of the
 * other waiters.  The workload's interval doubles while its holders stay.
 */
void
bulkhead_publish_proof(int slotno, uint64 holders, uint64 states, TimestampTz start)
{
	BulkheadSlot *slot = &bulkhead_shared->slots[slotno];

	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	/* this backend becomes the one that keeps checking (the prover) */
	slot->dl_prover = BULKHEAD_MY_PROCNO + 1;
	if (slot->dl_holders != holders || slot->dl_interval_us == 0)
	{
		slot->dl_holders = holders;
		slot->dl_holder_states = states;
		slot->dl_interval_us = (int64) DeadlockTimeout * 1000;
		slot->dl_proved_at = start;
	}
	else if (start > slot->dl_proved_at)
	{
		slot->dl_holder_states = states;
		slot->dl_interval_us = bulkhead_proof_next_interval(slot->dl_interval_us);
		slot->dl_proved_at = start;
	}
	LWLockRelease(slot->lock);
}

/*
 * The search found this wait stuck (its root not in Prog): no holder of the
 * workload could be shown to move.  Withdraw the workload's proof, and wake
 * the waiters that sleep on it, so that they search for themselves (a
 * waiter of the workload may be deadlocked now).  Whatever holders the
 * proof was made for: one made for holders since gone is one the sleepers
 * still sleep on (they have not looked).  Waiters sleep only on a proof
 * that is there (a proof goes only here), so with none there is nobody to
 * wake: searches that keep finding their roots stuck, as in a lasting
 * state where every holder waits, then wake no one.
 */
void
bulkhead_withdraw_proof(int slotno)
{
	BulkheadSlot *slot = &bulkhead_shared->slots[slotno];

	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	if (slot->dl_proved_at != 0)
	{
		slot->dl_proved_at = 0;
		slot->dl_prover = 0;
		bulkhead_slot_wake_waiters(slot, true);
	}
	LWLockRelease(slot->lock);
}

/*
 * This backend's wait for a permit of workload slotno is over (granted,
 * timed out, cancelled, ended by a deadlock, or the backend exits).  If it
 * was the workload's prover, nobody checks at deadlock_timeout any more:
 * the head waiter is made the prover in its place and woken (its wait loop
 * sees that it is the prover now), to check (and search, and prove) every
 * deadlock_timeout and, when its own wait ends, to pass that on in turn (it
 * may be granted before it has searched at all); the proof stays, and the
 * others go on sleeping on it.  Call without a lock held, after the wait
 * was ended under the slot lock; never throws.
 */
void
bulkhead_proof_wait_over(int slotno)
{
	BulkheadSlot *slot = &bulkhead_shared->slots[slotno];
	int32		me = BULKHEAD_MY_PROCNO + 1;

	sleeping_slot = -1;

	/*
	 * A look without the lock first: dl_prover is set to this backend only
	 * under the slot lock while it waits there (its own search, or a
	 * hand-off to it as the head waiter), so before its wait was ended under
	 * that lock; that write is seen here.
	 */
	if (*((volatile int32 *) &slot->dl_prover) != me)
		return;
	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	if (slot->dl_prover == me)
	{
		int			head = bulkhead_slot_wake_waiters(slot, false);

		slot->dl_prover = head >= 0 ? head + 1 : 0;
	}
	LWLockRelease(slot->lock);
}

/*
 * When a waiter that skipped its search on the workload's proof (B or C)
 * checks next: the prover every deadlock_timeout, any other once the proof
 * would have expired, plus a deadlock_timeout for the prover to renew it
 * (woken earlier if it is withdrawn, or if the prover leaves).
 */
TimestampTz
bulkhead_sleep_on_proof(const PermitWait *root, TimestampTz now)
{
	TimestampTz next = TimestampTzPlusMilliseconds(now, DeadlockTimeout);

	if (root->dl_prover == BULKHEAD_MY_PROCNO + 1)
		return next;
	sleeping_slot = root->slotno;
	sleeping_on = root->dl_proved_at;
	return Max(next, TimestampTzPlusMilliseconds(root->dl_proved_at +
												 root->dl_interval_us,
												 DeadlockTimeout));
}

/*
 * The wait loop, woken before its next check is due: if the proof this
 * waiter sleeps on was withdrawn or renewed (its dl_proved_at changed), or
 * this waiter was made the prover, the check is due now.  Reads without
 * the lock: a change seen late is seen at the next wakeup, or at the check
 * the sleep ends with.
 */
TimestampTz
bulkhead_proof_next_check(TimestampTz next_check, TimestampTz now)
{
	BulkheadSlot *slot;

	if (sleeping_slot < 0 || next_check <= now)
		return next_check;
	slot = &bulkhead_shared->slots[sleeping_slot];
	if (*((volatile TimestampTz *) &slot->dl_proved_at) == sleeping_on &&
		*((volatile int32 *) &slot->dl_prover) != BULKHEAD_MY_PROCNO + 1)
		return next_check;
	sleeping_slot = -1;
	return now;
}
