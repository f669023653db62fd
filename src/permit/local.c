/*-------------------------------------------------------------------------
 *
 * local.c
 *	  The permits of this backend, its wait, and when they end: at
 *	  transaction or subtransaction end for transaction scope, at exit for
 *	  everything.
 *
 * bulkhead_local[i] mirrors this backend's shared entry i (backend-local
 * memory, no lock); the shared entry is changed through slot.c, under its
 * slot's lock.  The callbacks here run in states where nothing may be
 * thrown (commit, abort, exit); the release paths they call never throw.
 *
 * A waiter whose wait ends by an error (cancel, statement_timeout,
 * terminate) is cleaned up by bulkhead_wait_cleanup(), called from the
 * abort and exit callbacks: if the permit was handed over meanwhile, it is
 * passed on to the next waiter.
 *
 * Owns backend-local state only (bulkhead_local[], bulkhead_nheld, the
 * wait index, keep_auto_over_commits); the shared entries are changed
 * through slot.c.  Called by permit.c, permitfuncs.c, transparent.c and bulkhead.c
 * (init); calls slot.c, guard.c, deadlock.c and deadlockfree.c, and tells
 * bulkhead_statements and the wait log of a wait ended by an error or a
 * deadlock (outcome.h).
 *
 *-------------------------------------------------------------------------
 */
#include "permit/local.h"
#include "guards/caps.h"
#include "deadlock/deadlock.h"
#include "record/outcome.h"
#include "deadlock/deadlockfree.h"
#include "guards/guard.h"
#include "workload/slot.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "utils/memutils.h"
#include "utils/portal.h"

BulkheadLocalPermit *bulkhead_local = NULL;

/* How many of bulkhead_local[] are held: lets the common cases skip a loop */
int			bulkhead_nheld = 0;

/* The lanes' caps in force: the smallest of each over the permits held */
BulkheadCaps bulkhead_caps_in_force;

/* Local index of the entry this backend is waiting on, or -1 */
static int	my_wait_index = -1;

/* The workload it waits in (a grant may be moved before the waiter wakes) */
static int	my_wait_slot = -1;

/*
 * A top-level utility that may commit internally holds the gate permit
 * across its own commits (transparent.c sets this around it): a commit then keeps
 * the automatic permit.
 */
static bool keep_auto_over_commits = false;

int
bulkhead_wait_index(void)
{
	return my_wait_index;
}

/*
 * permit.c: the wait begins (li, in workload slotno), or ends with a grant
 * or a timeout (-1, -1)
 */
void
bulkhead_set_wait_index(int li, int slotno)
{
	my_wait_index = li;
	my_wait_slot = slotno;
}

void
bulkhead_keep_auto_over_commits(bool keep)
{
	keep_auto_over_commits = keep;
}

static void release_entry(int li, bool moved);

/* Restore the session guards after session permits were released */
static void
restore_guards(void)
{
	bulkhead_restore_session_guards(bulkhead_local,
									bulkhead_shared->permits_per_backend);
}

/*
 * Record a permit just granted (entry li, of slot slotno) as this backend's
 * own, with the guards its workload had at the grant.  Caller holds
 * slot->lock.
 */
void
bulkhead_local_record_grant(int li, const BulkheadSlot *slot, int slotno,
							BulkheadScope scope)
{
	BulkheadLocalPermit *permit = &bulkhead_local[li];

	permit->held = true;
	bulkhead_nheld++;
	permit->scope = scope;
	/* an automatic permit belongs to the top-level transaction */
	permit->subid = scope == BULKHEAD_SCOPE_AUTO ? TopSubTransactionId :
		GetCurrentSubTransactionId();
	permit->workload = slotno;
	strlcpy(permit->name, slot->name, NAMEDATALEN);
	permit->statement_timeout_ms = slot->config.statement_timeout_ms;
	permit->lock_timeout_ms = slot->config.lock_timeout_ms;
	permit->idle_timeout_ms = slot->config.idle_timeout_ms;
	permit->acquired_in = GetCurrentStatementStartTimestamp();
	permit->caps.mask = slot->config.caps.mask;
	if (unlikely(permit->caps.mask != 0))
		memcpy(permit->caps.value, slot->config.caps.value,
			   sizeof(permit->caps.value));
	if (unlikely((permit->caps.mask | bulkhead_caps_in_force.mask) != 0))
		bulkhead_local_caps_changed();
}

/*
 * The permits held (or their lanes' caps) changed: work out the caps in
 * force again.  Never throws.
 */
void
bulkhead_local_caps_changed(void)
{
	int			i;

	memset(&bulkhead_caps_in_force, 0, sizeof(BulkheadCaps));
	if (bulkhead_nheld == 0)
		return;
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (bulkhead_local[i].held && bulkhead_local[i].caps.mask != 0)
			bulkhead_caps_combine(&bulkhead_caps_in_force, &bulkhead_local[i].caps);
}

/*
 * Return a permit this backend holds (local index li): the entry leaves
 * the holders and the next waiter, if any, is served.  moved: it leaves for
 * another workload (a statement's lane, 1.3), counted as moved_out.  Never
 * throws.
 */
void
bulkhead_release_entry(int li)
{
	release_entry(li, false);
}

void
bulkhead_release_entry_moved(int li)
{
	release_entry(li, true);
}

static void
release_entry(int li, bool moved)
{
	BulkheadLocalPermit *permit = &bulkhead_local[li];
	BulkheadEntry *entry = bulkhead_my_entry(li);
	BulkheadSlot *slot;
	TimestampTz now = bulkhead_stats_clock();
	BulkheadWakeups wakeups = {0};
	bool		drained;
	int			slotno;

	Assert(permit->held);
	/* its workload, or the one the worker moved it to */
	slot = bulkhead_lock_entry_slot(entry, &slotno);
	drained = bulkhead_slot_release(slot, entry, now, &wakeups, moved);
	LWLockRelease(slot->lock);
	bulkhead_wake(&wakeups);
	if (drained)
		bulkhead_request_reload();

	permit->held = false;
	bulkhead_nheld--;
	if (unlikely(permit->caps.mask != 0))
		bulkhead_local_caps_changed();
}

/*
 * End this backend's wait, if one is under way, after an error or at exit.
 * A permit handed over meanwhile is passed on to the next waiter: the caller
 * saw an error, so it does not hold the permit.  Idempotent; never throws.
 */
void
bulkhead_wait_cleanup(void)
{
	BulkheadEntry *entry;
	BulkheadSlot *slot;
	int			slotno;
	BulkheadWakeups wakeups = {0};
	bool		drained;
	TimestampTz queued_at;
	char		name[NAMEDATALEN];

	if (my_wait_index < 0)
		return;
	entry = bulkhead_my_entry(my_wait_index);
	/* a grant just made may have been moved already */
	slot = bulkhead_lock_entry_slot(entry, &slotno);
	queued_at = entry->queued_at;
	strlcpy(name, slot->name, NAMEDATALEN);
	drained = bulkhead_slot_cancel_wait(slot, entry, &wakeups);
	LWLockRelease(slot->lock);
	bulkhead_wake(&wakeups);

	my_wait_index = -1;
	/* the proof is the workload's it waited in, wherever the grant went */
	bulkhead_proof_wait_over(my_wait_slot >= 0 ? my_wait_slot : slotno);
	my_wait_slot = -1;
	if (drained)
		bulkhead_request_reload();

	/*
	 * What it did (1.4): a wait cancelled.  Last, once the wait is over:
	 * nothing here can be thrown but an out-of-memory while a log line is
	 * formatted, and that leaves nothing to clean up again.
	 */
	bulkhead_observe_wait(name, BULKHEAD_WAIT_CANCELLED,
						  GetCurrentTimestamp() - queued_at, false, false);
}

/*
 * End this backend's wait because the deadlock check found it deadlocked,
 * if it still stands as the check saw it (holders_stamp; see
 * bulkhead_slot_end_wait_deadlocked).  Returns false, changing nothing,
 * otherwise.  Never throws.
 */
bool
bulkhead_end_wait_deadlocked(uint64 holders_stamp)
{
	BulkheadEntry *entry;
	BulkheadSlot *slot;
	int			slotno;
	BulkheadWakeups wakeups = {0};
	bool		ended;
	bool		drained;
	TimestampTz queued_at;
	char		name[NAMEDATALEN];

	if (my_wait_index < 0)
		return false;
	entry = bulkhead_my_entry(my_wait_index);
	slot = bulkhead_lock_entry_slot(entry, &slotno);
	queued_at = entry->queued_at;
	strlcpy(name, slot->name, NAMEDATALEN);
	ended = bulkhead_slot_end_wait_deadlocked(slot, entry, holders_stamp,
											  &wakeups, &drained);
	LWLockRelease(slot->lock);
	bulkhead_wake(&wakeups);

	if (ended)
	{
		my_wait_index = -1;
		my_wait_slot = -1;
		bulkhead_proof_wait_over(slotno);
	}
	if (drained)
		bulkhead_request_reload();
	/* what it did (1.4), once the wait is over: the caller raises 40P01 */
	if (ended)
		bulkhead_observe_wait(name, BULKHEAD_WAIT_DEADLOCK,
							  GetCurrentTimestamp() - queued_at, false, true);
	return ended;
}

static void
bulkhead_backend_exit(int code, Datum arg)
{
	int			i;

	bulkhead_deadlock_exit();
	bulkhead_wait_cleanup();
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (bulkhead_local[i].held)
			bulkhead_release_entry(i);
}

/*
 * Free entries that a previous owner of our PGPROC left behind.  Normal
 * exits release everything, so this is a safety net (as is the worker's
 * reaper, which may get there first: both re-check under the slot lock).
 */
static void
reclaim_stale_entries(void)
{
	BulkheadEntry *entries = bulkhead_backend_entries(BULKHEAD_MY_PROCNO);
	int			i;

	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
	{
		int			slotno = entries[i].workload;
		BulkheadSlot *slot;

		if (slotno < 0)
			continue;
		slot = &bulkhead_shared->slots[slotno];
		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
		if (entries[i].workload == slotno && entries[i].pid != MyProcPid)
		{
			bulkhead_slot_drop_entry(slot, &entries[i]);
			bulkhead_slot_serve(slot, NULL);
		}
		LWLockRelease(slot->lock);
	}
}

/* First use of permits in this backend: local state and exit callback */
void
bulkhead_backend_init(void)
{
	if (bulkhead_local != NULL)
		return;
	bulkhead_check_loaded();
	if (MyProc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("bulkhead permits can only be used by a regular backend")));

	reclaim_stale_entries();
	bulkhead_local = MemoryContextAllocZero(TopMemoryContext,
											sizeof(BulkheadLocalPermit) *
											bulkhead_shared->permits_per_backend);
	before_shmem_exit(bulkhead_backend_exit, (Datum) 0);
}

int
bulkhead_free_local_index(void)
{
	BulkheadEntry *entries = bulkhead_backend_entries(BULKHEAD_MY_PROCNO);
	int			i;

	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (!bulkhead_local[i].held && entries[i].workload < 0)
			return i;
	return -1;
}

int
bulkhead_local_index_by_slot(int slot)
{
	int			i;

	if (bulkhead_nheld == 0)
		return -1;
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (bulkhead_local[i].held && bulkhead_local[i].workload == slot)
			return i;
	return -1;
}

/* The local index of this transaction's automatic permit, or -1 */
int
bulkhead_local_auto_index(void)
{
	int			i;

	if (bulkhead_local == NULL || bulkhead_nheld == 0)
		return -1;
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (bulkhead_local[i].held && bulkhead_local[i].scope == BULKHEAD_SCOPE_AUTO)
			return i;
	return -1;
}

int
bulkhead_local_index_by_name(const char *name)
{
	int			i;

	if (bulkhead_local == NULL || bulkhead_nheld == 0)
		return -1;
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (bulkhead_local[i].held && strcmp(bulkhead_local[i].name, name) == 0)
			return i;
	return -1;
}

/* Release every session permit; returns how many */
int
bulkhead_release_session_permits(void)
{
	int			released = 0;
	int			i;

	if (bulkhead_local == NULL)
		return 0;
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
	{
		if (bulkhead_local[i].held &&
			bulkhead_local[i].scope == BULKHEAD_SCOPE_SESSION)
		{
			bulkhead_release_entry(i);
			released++;
		}
	}
	return released;
}

/*
 * DISCARD ALL: end the session permits, as DISCARD ALL ends the session's
 * advisory locks.  Connection poolers run it when a client leaves
 * (PgBouncer's server_reset_query), so a permit the client did not release
 * is not handed on with the connection.  DISCARD ALL has already reset the
 * guards' settings, which bulkhead_restore_session_guards leaves alone.
 */
void
bulkhead_discard_session_permits(void)
{
	if (bulkhead_shared == NULL || bulkhead_local == NULL)
		return;
	if (bulkhead_release_session_permits() > 0)
		restore_guards();
}

/* An explicit transaction permit (automatic ones end at PREPARE) */
static bool
holds_transaction_permit(void)
{
	int			i;

	if (bulkhead_nheld == 0)
		return false;
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (bulkhead_local[i].held &&
			bulkhead_local[i].scope == BULKHEAD_SCOPE_XACT)
			return true;
	return false;
}

/*
 * Release transaction permits; all of them, or those of one subxact; the
 * automatic one too unless keep_auto.
 */
static void
release_transaction_permits(bool only_subxact, SubTransactionId subid,
							bool keep_auto)
{
	int			i;

	for (i = 0; i < bulkhead_shared->permits_per_backend && bulkhead_nheld > 0; i++)
	{
		BulkheadLocalPermit *permit = &bulkhead_local[i];

		if (permit->held && permit->scope != BULKHEAD_SCOPE_SESSION &&
			!(keep_auto && permit->scope == BULKHEAD_SCOPE_AUTO) &&
			(!only_subxact || permit->subid == subid))
			bulkhead_release_entry(i);
	}
}

/*
 * Return the session permits that the failing statement took (DESIGN.md,
 * "Permits and failed statements"): the caller saw an error, so it must
 * hold nothing.  Called at the abort of the transaction (every such
 * permit), or of a subtransaction (those taken in it, or in one of its
 * committed children), while the statement that took them is still the
 * current one: statement_timestamp() tells statements apart (each message
 * of the protocol is a statement; the statements of one multi-statement
 * query string are one).  Once that statement has completed, an abort
 * leaves the permit alone, as it leaves a session advisory lock.  Returns
 * how many were released.  Never throws.
 */
static int
release_failed_statement_permits(bool only_subxact, SubTransactionId subid)
{
	TimestampTz statement = GetCurrentStatementStartTimestamp();
	int			released = 0;
	int			i;

	for (i = 0; i < bulkhead_shared->permits_per_backend && bulkhead_nheld > 0; i++)
	{
		BulkheadLocalPermit *permit = &bulkhead_local[i];

		if (permit->held && permit->scope == BULKHEAD_SCOPE_SESSION &&
			permit->acquired_in == statement &&
			(!only_subxact || permit->subid == subid))
		{
			bulkhead_release_entry(i);
			released++;
		}
	}
	return released;
}

/*
 * Is the abort under way a rollback that was asked for, with no error, while
 * the statement goes on?  A ROLLBACK or ROLLBACK TO SAVEPOINT statement (of
 * the same query string as the acquire) runs its abort with the block in a
 * "failed" state ('E'), which an abort for an error never shows; and a
 * ROLLBACK in a procedure (CALL, DO) aborts the whole transaction while the
 * procedure's portal is still active, whereas an error that fails the
 * statement has marked that portal failed (PortalRun) before the abort.
 * Such a rollback leaves session permits alone, as it leaves session
 * advisory locks; if the statement fails later, a later abort returns them.
 */
static bool
rollback_without_error(bool whole_transaction)
{
	if (TransactionBlockStatusCode() == 'E')
		return true;
	return whole_transaction && ActivePortal != NULL &&
		ActivePortal->status == PORTAL_ACTIVE;
}

static void
bulkhead_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (bulkhead_local != NULL && holds_transaction_permit())
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("cannot PREPARE a transaction that holds a bulkhead transaction permit"),
						 errdetail("Transaction permits end with their transaction and cannot be passed to a prepared transaction.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			{
				/* a utility that commits internally keeps its gate permit */
				bool		keep_auto = event != XACT_EVENT_PREPARE &&
					keep_auto_over_commits;

				if (bulkhead_local != NULL)
					release_transaction_permits(false, InvalidSubTransactionId,
												keep_auto);
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			if (bulkhead_local != NULL)
			{
				bulkhead_wait_cleanup();
				release_transaction_permits(false, InvalidSubTransactionId, false);
				if (!rollback_without_error(true) &&
					release_failed_statement_permits(false, InvalidSubTransactionId) > 0)
					restore_guards();
			}
			break;
		default:
			break;
	}
}

static void
bulkhead_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int			i;

	if (bulkhead_local == NULL)
		return;
	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			bulkhead_wait_cleanup();
			release_transaction_permits(true, mySubid, false);
			if (!rollback_without_error(false) &&
				release_failed_statement_permits(true, mySubid) > 0)
				restore_guards();
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			/* the parent takes over, as with advisory locks */
			for (i = 0; i < bulkhead_shared->permits_per_backend && bulkhead_nheld > 0; i++)
				if (bulkhead_local[i].held && bulkhead_local[i].subid == mySubid)
					bulkhead_local[i].subid = parentSubid;
			break;
		default:
			break;
	}
}

/* From _PG_init: inherited by every backend the postmaster forks */
void
bulkhead_local_init(void)
{
	RegisterXactCallback(bulkhead_xact_callback, NULL);
	RegisterSubXactCallback(bulkhead_subxact_callback, NULL);
}
