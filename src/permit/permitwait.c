/*-------------------------------------------------------------------------
 *
 * permitwait.c
 *	  The wait for a permit's hand-off (every wait for a permit: acquire,
 *	  transparent admission, a move between lanes), its deadlock checks,
 *	  and a queued lock holder served first (1.5).
 *
 * A queued caller waits on its latch for the hand-off (slot.c sets the
 * entry GRANTED, then the latch); every deadlock_timeout it runs the
 * deadlock check (deadlock.c) and acts on its verdict.  Until the wait
 * ends, an error thrown here (cancel, statement_timeout, terminate) is
 * cleaned up by local.c's abort and exit callbacks.
 *
 * A queued lock holder is served first (DESIGN.md, 1.5)
 * ------------------------------------------------------
 * A waiter whose transaction holds a heavyweight lock that another backend
 * waits for (lockholder.c) is served ahead of its queue: its entry's boost
 * is AHEAD, which ranks it above any importance (rank.c), counted once per
 * wait.  A transaction that has written (it has a transaction id, whose
 * lock every writer of its rows waits for) asks every Max(10 ms,
 * deadlock_timeout / 10) of waiting, with no LWLock held: often enough that
 * a holder is ahead within a tenth of the deadlock_timeout that bounds the
 * inversion, rarely enough that a waiter costs little (the check reads the
 * PGPROCs' waitLock, and takes the lock manager's partition locks shared
 * only while some backend waits for a heavyweight lock).  One that has not
 * written (its locks, if any, are a table's or advisory) asks at its
 * deadlock checks only, when it wakes anyway: most waiters, read-only or
 * at their transaction's start, add no wake-up.  With
 * bulkhead.boost_lock_holders off, nobody asks.  A poll that finds no one
 * waiting on it any more drops the boost: it lasts only while someone
 * waits on it.
 *
 * The deadlock check keeps priority: a deadlock raises 40P01 as before.
 * The first check (deadlock_timeout after the wait's start, then every
 * deadlock_timeout) that began after the waiter was found waited on, and
 * decided by itself that there is no deadlock (deadlock.h: not on another
 * waiter's proof), grants it over the limit if it is still waited on,
 * holds no borrowed permit already, its workload has none lent out
 * (BORROWED, slot.c: a workload passes its limit by one at most; another
 * holder stays ahead, and is served next): running passes the limit by one
 * and nothing is handed on until it is back under.  The permit is held as
 * its scope says (a session's until released, past the transaction whose
 * locks justified the loan: the workload stays one over its limit until
 * then, doc/priorities.md says so).  So a
 * holder waited on from the start borrows at deadlock_timeout, and one
 * waited on later at its next check at the latest.  The grant is then taken up as any
 * other (the entry is GRANTED) at the top of the loop.  Shadow mode never
 * waits, so never boosts.
 *
 * Owns backend-local state only.  Called by permit.c; calls slot.c,
 * local.c, deadlock.c, deadlockfree.c, lockholder.c, guard.c, and tells
 * bulkhead_statements and the wait log what the wait did (outcome.h).
 *
 *-------------------------------------------------------------------------
 */
#include "permit/permitwait.h"
#include "deadlock/deadlock.h"
#include "deadlock/deadlockfree.h"
#include "deadlock/lockholder.h"
#include "guards/guard.h"
#include "permit/local.h"
#include "workload/importance.h"
#include "record/outcome.h"
#include "workload/slot.h"

#include "miscadmin.h"
#include "access/xact.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"	/* pgstat.h includes it only up to 18 */

#define ERRCODE_BULKHEAD_TIMEOUT	MAKE_SQLSTATE('5','3','B','0','2')

/* The shortest interval between two polls of a lock holder, in ms */
#define HOLDER_POLL_MIN_MS	10

/* A wait's state as a lock holder (see the header) */
typedef struct HolderWait
{
	TimestampTz next_poll;		/* when to ask again */
	bool		ahead;			/* the entry is boosted now */
	bool		counted;		/* this wait's boost is counted */
	TimestampTz waited_since;	/* the first poll that found it waited on
								 * (since the last that did not); 0: not */
	TimestampTz cleared_at;		/* the start of the last deadlock check that
								 * decided there was no deadlock; 0: none */
} HolderWait;

/*
 * The wait event a queued backend shows in pg_stat_activity: type
 * "Extension"; PG 17 lets it have a name of its own.
 */
static uint32
queue_wait_event(void)
{
#if PG_VERSION_NUM >= 170000
	static uint32 event = 0;

	if (event == 0)
		event = WaitEventExtensionNew("BulkheadQueue");
	return event;
#else
	return PG_WAIT_EXTENSION;
#endif
}

void
bulkhead_report_permit_timeout(const char *name, int64 timeout_us)
{
	ereport(ERROR,
			(errcode(ERRCODE_BULKHEAD_TIMEOUT),
			 errmsg("timed out waiting for a permit of workload \"%s\"", name),
			 timeout_us % 1000 == 0 ?
			 errdetail("No permit was granted within %lld ms.",
					   (long long) (timeout_us / 1000)) :
			 errdetail("No permit was granted within %.3f ms.",
					   (double) timeout_us / 1000.0),
			 errhint("The workload's permits are saturated; do not retry at once.")));
}

/*
 * Is this backend waited on as a lock holder?  Then its entry is served
 * ahead (counted once per wait), or with may_borrow granted over the limit;
 * when no longer waited on, the boost is dropped.  Called with no LWLock
 * held (lockholder.c takes the lock manager's); takes the slot lock once.
 */
static void
poll_lock_holder(HolderWait *hw, BulkheadSlot *slot, int slotno,
				 BulkheadEntry *entry, TimestampTz queued_at, TimestampTz now)
{
	bool		waited_on;
	bool		borrow;
	bool		count;
	bool		done;

	hw->next_poll = !bulkhead_boost_lock_holders ? PG_INT64_MAX :
		!TransactionIdIsValid(GetTopTransactionIdIfAny()) ?
		TimestampTzPlusMilliseconds(now, DeadlockTimeout) :
		TimestampTzPlusMilliseconds(now, Max(HOLDER_POLL_MIN_MS, DeadlockTimeout / 10));
	waited_on = bulkhead_lock_waited_on();
	if (!waited_on)
		hw->waited_since = 0;
	else if (hw->waited_since == 0)
		hw->waited_since = now;
	if (!waited_on && !hw->ahead)
		return;
	/* a loan only after a check that saw it waited on found no deadlock */
	borrow = waited_on && hw->cleared_at > hw->waited_since &&
		!bulkhead_backend_has_borrowed(BULKHEAD_MY_PROCNO);
	count = waited_on && !hw->counted;
	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	borrow = borrow && bulkhead_slot_may_borrow(slot);
	if (borrow)
		done = bulkhead_slot_borrow(slot, entry, count, now);
	else
		done = bulkhead_slot_boost(slot, entry, waited_on, count);
	LWLockRelease(slot->lock);
	if (!done)
		return;					/* granted meanwhile */
	hw->ahead = waited_on;
	if (count)
		hw->counted = true;
	/* the wait log, after the lock: one line for a boost, one for a loan */
	if (borrow)
		bulkhead_waitlog_boost(slotno, false, true, now - queued_at);
	else if (count)
		bulkhead_waitlog_boost(slotno, false, false, now - queued_at);
}

/*
 * Under the slot lock, the entry found granted: the grant is taken up
 * (counted, recorded as this backend's), the lock released, the guards
 * applied.
 */
static void
take_grant(BulkheadSlot *slot, int slotno, int li, BulkheadScope scope,
		   const char *name, int64 waited_us, const char *moved_from)
{
	BulkheadEntry *entry = bulkhead_my_entry(li);

	bulkhead_slot_count_grant(slot, entry);
	if (moved_from != NULL)
		bulkhead_slot_note_moved(slot, entry, moved_from);
	bulkhead_local_record_grant(li, slot, slotno, scope);
	bulkhead_set_wait_index(-1, -1);
	LWLockRelease(slot->lock);
	bulkhead_proof_wait_over(slotno);
	bulkhead_observe_granted(name, waited_us, moved_from != NULL);
	bulkhead_apply_guards(&bulkhead_local[li]);
}

/*
 * Run the deadlock check that is due; on a verdict of deadlock the wait is
 * ended (if it still stands) and 40P01 raised.  A check that reached a
 * verdict of no deadlock lets a lock holder borrow.  Returns the next check.
 */
static TimestampTz
check_deadlock(HolderWait *hw, TimestampTz now)
{
	BulkheadDeadlockVerdict verdict;
	TimestampTz next_check;

	next_check = bulkhead_deadlock_check(now, &verdict);
	if (verdict.cycle != NULL)
		/* raises 40P01 once the wait is ended; else wait on */
		bulkhead_deadlock_conclude(&verdict,
								   bulkhead_end_wait_deadlocked(verdict.holders_stamp));
	else if (verdict.decided)
	{
		hw->cleared_at = now;
		if (hw->waited_since != 0)
			hw->next_poll = 0;	/* ask now: a loan may be due */
	}
	return next_check;
}

/*
 * Wait for the hand-off of the permit that entry li waits for (queued at
 * queued_at, until deadline).  Returns true once granted; on timeout, false
 * if try_only, else raises 53B02.  After deadlock_timeout of waiting, and
 * as long as it waits, deadlock.c checks whether the wait can end; on a
 * verdict of deadlock the wait is ended (if it still stands) and 40P01
 * raised.  A lock holder is served first (see the header).
 *
 * Until the wait index is cleared, an error thrown here (cancel,
 * statement_timeout, terminate) is cleaned up by bulkhead_wait_cleanup()
 * from the abort or exit callbacks (local.c).
 */
bool
bulkhead_wait_for_permit(BulkheadSlot *slot, int slotno, int li,
						 BulkheadScope scope, const char *name,
						 TimestampTz queued_at, int64 timeout_us,
						 bool try_only, const char *moved_from)
{
	BulkheadEntry *entry = bulkhead_my_entry(li);
	TimestampTz deadline = queued_at + Min(timeout_us, PG_INT64_MAX - queued_at);
	TimestampTz next_check = TimestampTzPlusMilliseconds(queued_at, DeadlockTimeout);
	uint32		wait_event = queue_wait_event();
	HolderWait	hw = {0};

	for (;;)
	{
		TimestampTz now;
		TimestampTz wake_at;
		long		sleep_ms;

		/*
		 * Interrupts first: a cancel that arrives with the hand-off wins, so
		 * the error is raised while we still wait, the cleanup passes the
		 * permit on, and the caller that sees the error does not hold it.
		 */
		CHECK_FOR_INTERRUPTS();

		/*
		 * A look without the lock first, as ProcSleep reads its wait status:
		 * only a grant or the deadline needs the lock, and hundreds of
		 * waiters woken for their deadlock checks then do not queue up on
		 * it.  The granter sets the state before our latch (and ResetLatch
		 * is a barrier), so a grant missed here wakes the next WaitLatch at
		 * once; the lock decides.
		 */
		now = GetCurrentTimestamp();
		pg_read_barrier();
		if (*((volatile uint8 *) &entry->state) == BULKHEAD_ENTRY_GRANTED ||
			now >= deadline)
		{
			bulkhead_slot_lock(slot, LW_EXCLUSIVE);
			if (entry->state == BULKHEAD_ENTRY_GRANTED)
			{
				take_grant(slot, slotno, li, scope, name, now - queued_at,
						   moved_from);
				return true;
			}
			if (now >= deadline)
			{
				bulkhead_slot_time_out(slot, entry);
				bulkhead_set_wait_index(-1, -1);
				LWLockRelease(slot->lock);
				bulkhead_proof_wait_over(slotno);
				bulkhead_observe_timed_out(name, now - queued_at, !try_only);
				if (try_only)
					return false;
				bulkhead_report_permit_timeout(name, timeout_us);
			}
			LWLockRelease(slot->lock);
		}

		next_check = bulkhead_proof_next_check(next_check, now);
		if (now >= next_check)
		{
			next_check = check_deadlock(&hw, now);
			now = GetCurrentTimestamp();
		}
		if (now >= hw.next_poll)
		{
			poll_lock_holder(&hw, slot, slotno, entry, queued_at, now);
			if (*((volatile uint8 *) &entry->state) == BULKHEAD_ENTRY_GRANTED)
				continue;		/* borrowed: taken up at the top */
		}

		wake_at = Min(Min(deadline, next_check), hw.next_poll);
		sleep_ms = wake_at > now ?
			(long) Min((wake_at - now + 999) / 1000, (int64) INT_MAX) : 0;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, wait_event);
		ResetLatch(MyLatch);
	}
	pg_unreachable();
}
