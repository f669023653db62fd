/*-------------------------------------------------------------------------
 *
 * permit.c
 *	  Admission, FIFO waiting and hand-off of permits.
 *
 * Everything that changes a workload's running/queued counts happens under
 * the slot's LWLock and never throws while holding it: decisions are made
 * under the lock, errors are raised after it is released, when shared state
 * is already complete again.
 *
 * A release hands its permit straight to the head waiter (the entry moves
 * from waiters to holders and the running count does not drop), then sets
 * that one backend's latch.  The waiter only looks at its entry's state, so
 * a newcomer can never overtake it.  A waiter whose wait ends by an error
 * (cancel, statement_timeout, terminate) is cleaned up by
 * bulkhead_wait_cleanup(), called from the abort and exit callbacks: if the
 * permit was handed over meanwhile, it is passed on to the next waiter.
 *
 * This file is the only writer of slot state.  The deadlock check
 * (deadlock.c) only reads it and decides; a wait it finds deadlocked is
 * ended here, by bulkhead_end_wait_deadlocked().
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"
#include "deadlock.h"
#include "entry_list.h"

#include <math.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* Custom SQLSTATEs of DESIGN.md */
#define ERRCODE_BULKHEAD_FULL		MAKE_SQLSTATE('5','3','B','0','1')
#define ERRCODE_BULKHEAD_TIMEOUT	MAKE_SQLSTATE('5','3','B','0','2')

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

/* Local index of the entry this backend is waiting on, or -1 */
static int	my_wait_index = -1;

/* Backend-local cache: workload name -> slot index (verified under lock) */
typedef struct SlotCacheEntry
{
	char		name[NAMEDATALEN];
	int			slot;
} SlotCacheEntry;

static HTAB *slot_cache = NULL;

/* The last name looked up, in front of slot_cache (a loop names one workload) */
static char last_name[NAMEDATALEN];
static int	last_slot = -1;

static BulkheadEntry *
my_entry(int local_index)
{
	return &bulkhead_backend_entries(BULKHEAD_MY_PROCNO)[local_index];
}

static int
entry_procno(BulkheadEntry *entry)
{
	return entry_index(entry) / bulkhead_shared->permits_per_backend;
}

bool
bulkhead_waiting(void)
{
	return my_wait_index >= 0;
}

/* Caller holds slot->lock.  Is slot the defined workload called name? */
static bool
slot_matches(BulkheadSlot *slot, const char *name)
{
	return slot->in_use && slot->defined && strcmp(slot->name, name) == 0;
}

/* Slot index for name, from the cache when it is there; -1 if unknown */
static int
lookup_slot(const char *name, bool use_cache)
{
	SlotCacheEntry *ce;
	bool		found;
	int			slot;

	if (slot_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = NAMEDATALEN;
		ctl.entrysize = sizeof(SlotCacheEntry);
		ctl.hcxt = TopMemoryContext;
		slot_cache = hash_create("bulkhead slot cache", 64, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}

	if (use_cache)
	{
		if (last_slot >= 0 && strcmp(last_name, name) == 0)
			return last_slot;
		ce = hash_search(slot_cache, name, HASH_FIND, NULL);
		if (ce)
		{
			strlcpy(last_name, name, NAMEDATALEN);
			last_slot = ce->slot;
			return ce->slot;
		}
	}

	slot = bulkhead_find_slot(name);
	if (slot >= 0)
	{
		ce = hash_search(slot_cache, name, HASH_ENTER, &found);
		ce->slot = slot;
	}
	else
		hash_search(slot_cache, name, HASH_REMOVE, NULL);
	strlcpy(last_name, name, NAMEDATALEN);
	last_slot = slot;
	return slot;
}

static void
report_unknown_workload(const char *name)
{
	if (!bulkhead_shared->config_loaded)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("workload \"%s\" does not exist", name),
				 errdetail("The bulkhead background worker has not loaded the workload definitions yet."),
				 errhint("Check that database \"%s\" (the setting \"bulkhead.database\") exists and has the bulkhead extension.",
						 bulkhead_database)));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("workload \"%s\" does not exist", name)));
}

/*
 * Is the user a member of one of these roles? (may throw)  The user is the
 * current one for an explicit acquire, and for the gate's permit (scope
 * 'auto') the session's own one, which classified the session (rules.c):
 * the gate can be reached first inside a SECURITY DEFINER function that the
 * planner runs before the calling statement starts.
 */
static bool
role_allowed(int nroles, char roles[][NAMEDATALEN], BulkheadScope scope)
{
	Oid			user = scope == BULKHEAD_SCOPE_AUTO ? GetOuterUserId() : GetUserId();
	int			i;

	for (i = 0; i < nroles; i++)
	{
		Oid			role = get_role_oid(roles[i], true);

		if (OidIsValid(role) && is_member_of_role(user, role))
			return true;
	}
	return false;
}

/*
 * Hand free permits to the head waiters, oldest first.  Caller holds
 * slot->lock exclusively.  With wakeups given (initialised to n = 0), the
 * first BULKHEAD_WAKE_BATCH granted are recorded there for the caller to
 * wake with bulkhead_wake() after releasing the lock; any others, and all of
 * them when wakeups is NULL (rare paths: limit raised, reaper), are woken
 * at once.
 */
void
bulkhead_grant_waiters(BulkheadSlot *slot, BulkheadWakeups *wakeups)
{
	TimestampTz now = 0;

	while (!entry_list_is_empty(&slot->waiters) &&
		   (slot->config.shadow || slot->running < slot->current_limit))
	{
		BulkheadEntry *entry;

		if (now == 0)
			now = GetCurrentTimestamp();
		entry = entry_at(slot->waiters.head);
		entry_list_delete(&slot->waiters, entry);
		slot->queued--;
		entry->state = BULKHEAD_ENTRY_GRANTED;
		entry->since = now;
		entry_list_push_tail(&slot->holders, entry);
		slot->running++;
		if (slot->running > slot->stats.peak_running)
			slot->stats.peak_running = slot->running;
		/* the state is set before the latch (see latch.h) */
		if (wakeups != NULL && wakeups->n < BULKHEAD_WAKE_BATCH)
			wakeups->procnos[wakeups->n++] = entry_procno(entry);
		else
			SetLatch(&GetPGProcByNumber(entry_procno(entry))->procLatch);
	}
}

/*
 * Wake the backends bulkhead_grant_waiters() recorded; call after releasing
 * the slot lock.  A woken backend that has meanwhile seen its grant, or
 * even exited, takes at worst a spurious wakeup, which every latch wait
 * tolerates.
 */
void
bulkhead_wake_all(BulkheadWakeups *wakeups)
{
	int			i;

	for (i = 0; i < wakeups->n; i++)
		SetLatch(&GetPGProcByNumber(wakeups->procnos[i])->procLatch);
	wakeups->n = 0;
}

/*
 * Remove an entry from its slot's list and free it.  The caller holds
 * slot->lock exclusively and then calls bulkhead_grant_waiters().
 */
void
bulkhead_unlink_entry(BulkheadSlot *slot, BulkheadEntry *entry)
{
	if (entry->state == BULKHEAD_ENTRY_WAITING)
	{
		entry_list_delete(&slot->waiters, entry);
		slot->queued--;
	}
	else
	{
		entry_list_delete(&slot->holders, entry);
		slot->running--;
	}
	entry->state = BULKHEAD_ENTRY_FREE;
	entry->workload = -1;
	entry->pid = 0;
}

/*
 * Caller holds slot->lock.  Did the last permit of a deleted workload just
 * go, while the worker has rows waiting for a free slot?  Then the worker is
 * told to load them now rather than at its next poll.
 */
static bool
slot_drained(BulkheadSlot *slot)
{
	return !slot->defined && slot->running == 0 && slot->queued == 0 &&
		bulkhead_shared->rows_pending;
}

/* Caller holds slot->lock: entry starts holding or waiting */
static void
link_entry(BulkheadSlot *slot, int slotno, BulkheadEntry *entry,
		   BulkheadScope scope, BulkheadEntryState state, TimestampTz now)
{
	Assert(entry->state == BULKHEAD_ENTRY_FREE);
	entry->workload = slotno;
	entry->pid = MyProcPid;
	entry->scope = scope;
	entry->state = state;
	entry->queued_at = now;
	entry->since = now;
	if (state == BULKHEAD_ENTRY_GRANTED)
	{
		entry_list_push_tail(&slot->holders, entry);
		slot->running++;
		if (slot->running > slot->stats.peak_running)
			slot->stats.peak_running = slot->running;
	}
	else
	{
		entry_list_push_tail(&slot->waiters, entry);
		slot->queued++;
		if (slot->queued > slot->stats.peak_queued)
			slot->stats.peak_queued = slot->queued;
	}
}

/*
 * Caller holds slot->lock and entry was just granted: count it and record
 * the permit as this backend's own.
 */
static void
record_grant(BulkheadSlot *slot, int slotno, int local_index,
			 BulkheadScope scope)
{
	BulkheadEntry *entry = my_entry(local_index);
	BulkheadLocalPermit *permit = &bulkhead_local[local_index];
	uint64		waited = 0;

	if (entry->since > entry->queued_at)
		waited = entry->since - entry->queued_at;
	slot->stats.acquired++;
	bulkhead_stats_add_wait(&slot->stats, waited);

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
}

/* limit: the limit in force when the caller was rejected */
static void
report_full(const char *name, int limit, const BulkheadConfig *config)
{
	ereport(ERROR,
			(errcode(ERRCODE_BULKHEAD_FULL),
			 errmsg("workload \"%s\" is full", name),
			 limit == 0 ?
			 errdetail("The workload is paused (max_running is 0) and all %d queue slots are taken.",
					   config->max_queued) :
			 errdetail("All %d permits are held and all %d queue slots are taken.",
					   limit, config->max_queued),
			 errhint("Retry later with backoff, or shed this work.")));
}

static void
report_timeout(const char *name, int64 timeout_us)
{
	ereport(ERROR,
			(errcode(ERRCODE_BULKHEAD_TIMEOUT),
			 errmsg("timed out waiting for a permit of workload \"%s\"", name),
			 timeout_us % 1000 == 0 ?
			 errdetail("No permit became free within %lld ms.",
					   (long long) (timeout_us / 1000)) :
			 errdetail("No permit became free within %.3f ms.",
					   (double) timeout_us / 1000.0),
			 errhint("The workload's permits are saturated; do not retry at once.")));
}

/* What admission decided for a caller, under the slot lock */
typedef enum AdmitOutcome
{
	ADMIT_GRANTED,				/* the permit is taken at once */
	ADMIT_QUEUED,				/* the caller waits in the FIFO */
	ADMIT_FULL,					/* B+Q taken: rejected at once */
	ADMIT_ZERO_WAIT,			/* a wait was needed, and none was allowed */
	ADMIT_CHECK_ROLES			/* check the roles (no lock), then decide again */
} AdmitOutcome;

/*
 * The admission decision of DESIGN.md, counting what it decides.  Caller
 * holds slot->lock exclusively; config is the slot's configuration and
 * limit its current_limit.  max_queued counts against the limit in force,
 * not against max_running: the queue stays as long as the operator set it
 * whatever the limit, so a lowered limit sheds load at once rather than
 * queueing it for longer.
 */
static AdmitOutcome
decide_admission(BulkheadSlot *slot, const BulkheadConfig *config, int limit,
				 int64 timeout_us, bool roles_checked)
{
	if (config->nroles > 0 && !roles_checked)
		return ADMIT_CHECK_ROLES;
	if (config->shadow)
	{
		/* grant at once, but count what enforce mode would have done */
		if (slot->running >= (int64) limit + config->max_queued)
			slot->stats.shadow_rejected++;
		else if (slot->running >= limit)
			slot->stats.shadow_queued++;
		return ADMIT_GRANTED;
	}
	if ((int64) slot->running + slot->queued >= (int64) limit + config->max_queued)
	{
		slot->stats.rejected_full++;
		return ADMIT_FULL;
	}
	if (slot->queued == 0 && slot->running < limit)
		return ADMIT_GRANTED;
	if (timeout_us <= 0)
	{
		slot->stats.timed_out++;
		return ADMIT_ZERO_WAIT;
	}
	return ADMIT_QUEUED;
}

/*
 * The local index for a new permit of workload slotno, or -1 when the
 * transaction already holds it through bulkhead.workload (and the caller
 * asks for a transaction permit).  Raises when the permit is held or awaited
 * already, or no entry is free.
 */
static int
new_permit_index(const char *name, int slotno, BulkheadScope scope)
{
	int			li = bulkhead_local_index_by_slot(slotno);

	if (li >= 0 && bulkhead_local[li].scope == BULKHEAD_SCOPE_AUTO)
	{
		/* the transaction already holds it, through bulkhead.workload */
		if (scope != BULKHEAD_SCOPE_SESSION)
			return -1;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("permit of workload \"%s\" is already held for this transaction", name),
				 errdetail("The setting \"bulkhead.workload\" makes every transaction of this session hold it."),
				 errhint("Use bulkhead_acquire_xact, or acquire a session permit of another workload.")));
	}
	if (li >= 0 ||
		(my_wait_index >= 0 && my_entry(my_wait_index)->workload == slotno))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("permit of workload \"%s\" is already held by this session", name),
				 errdetail("A session holds at most one permit per workload.")));
	li = bulkhead_free_local_index();
	if (li < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many bulkhead permits held by this session"),
				 errhint("Release a permit, or raise \"bulkhead.max_permits_per_backend\" (currently %d).",
						 bulkhead_shared->permits_per_backend)));
	return li;
}

/*
 * Wait for the hand-off of the permit that entry li waits for (queued at
 * queued_at, until deadline).  Returns true once granted; on timeout, false
 * if try_only, else raises 53B02.  After deadlock_timeout of waiting, and
 * every deadlock_timeout after, deadlock.c checks whether the wait can end;
 * if not, it ends the wait (bulkhead_end_wait_deadlocked) and raises 40P01.
 *
 * Until my_wait_index is cleared, an error thrown here (cancel,
 * statement_timeout, terminate) is cleaned up by bulkhead_wait_cleanup()
 * from the abort or exit callbacks.
 */
static bool
wait_for_permit(BulkheadSlot *slot, int slotno, int li, BulkheadScope scope,
				const char *name, TimestampTz queued_at, int64 timeout_us,
				bool try_only)
{
	BulkheadEntry *entry = my_entry(li);
	TimestampTz deadline = queued_at + Min(timeout_us, PG_INT64_MAX - queued_at);
	TimestampTz next_check = TimestampTzPlusMilliseconds(queued_at, DeadlockTimeout);
	uint32		wait_event = queue_wait_event();

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
			LWLockAcquire(slot->lock, LW_EXCLUSIVE);
			if (entry->state == BULKHEAD_ENTRY_GRANTED)
			{
				record_grant(slot, slotno, li, scope);
				my_wait_index = -1;
				LWLockRelease(slot->lock);
				bulkhead_apply_guards(&bulkhead_local[li]);
				return true;
			}
			if (now >= deadline)
			{
				bulkhead_unlink_entry(slot, entry);
				slot->stats.timed_out++;
				my_wait_index = -1;
				LWLockRelease(slot->lock);
				if (try_only)
					return false;
				report_timeout(name, timeout_us);
			}
			LWLockRelease(slot->lock);
		}

		if (now >= next_check)
		{
			/* raises 40P01 once it has ended the wait; else wait on */
			next_check = bulkhead_deadlock_check(now);
			now = GetCurrentTimestamp();
		}

		wake_at = Min(deadline, next_check);
		sleep_ms = wake_at > now ?
			(long) Min((wake_at - now + 999) / 1000, (int64) INT_MAX) : 0;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, wait_event);
		ResetLatch(MyLatch);
	}
	pg_unreachable();
}

/*
 * End this backend's wait because deadlock.c found it deadlocked: unlink the
 * entry and count it in deadlocks, under the slot lock, after a last check
 * that the wait still stands as the search saw it: still WAITING (never
 * granted meanwhile), the same holders (holders_stamp, see
 * bulkhead_holders_stamp), and no free permit.  Returns false, changing
 * nothing, when one of these fails.  Never throws.
 */
bool
bulkhead_end_wait_deadlocked(uint64 holders_stamp)
{
	BulkheadEntry *entry;
	BulkheadSlot *slot;
	BulkheadWakeups wakeups = {0};
	bool		ended = false;
	bool		drained = false;

	if (my_wait_index < 0)
		return false;
	entry = my_entry(my_wait_index);
	slot = &bulkhead_shared->slots[entry->workload];

	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	if (entry->state == BULKHEAD_ENTRY_WAITING &&
		!slot->config.shadow &&
		slot->running >= slot->current_limit &&
		bulkhead_holders_stamp(slot) == holders_stamp)
	{
		slot->stats.deadlocks++;
		bulkhead_unlink_entry(slot, entry);
		if (!entry_list_is_empty(&slot->waiters))
			bulkhead_grant_waiters(slot, &wakeups);
		drained = slot_drained(slot);
		ended = true;
	}
	LWLockRelease(slot->lock);
	bulkhead_wake(&wakeups);

	if (ended)
		my_wait_index = -1;
	if (drained)
		bulkhead_signal_worker();
	return ended;
}

/*
 * Take a permit of workload name for this backend, waiting up to timeout_us
 * (or the workload's queue_timeout when use_default_timeout).
 *
 * Returns true once the permit is held.  When full or timed out, returns
 * false if try_only, else raises 53B01 / 53B02.  Other failures always
 * raise (40P01 for a deadlock).  On return, the permit's guards are applied.
 */
bool
bulkhead_acquire_permit(const char *name, int64 timeout_us,
						bool use_default_timeout, BulkheadScope scope,
						bool try_only)
{
	BulkheadShared *shared = bulkhead_shared;
	BulkheadSlot *slot;
	BulkheadEntry *entry;
	BulkheadConfig config;		/* copy, for use after the lock is released */
	int			limit;			/* slot->current_limit, likewise */
	int			slotno;
	int			li;
	bool		roles_checked = false;
	bool		from_cache = true;
	TimestampTz now;
	AdmitOutcome outcome;

	bulkhead_backend_init();

retry:
	slotno = lookup_slot(name, from_cache);
	if (slotno < 0)
		report_unknown_workload(name);
	slot = &shared->slots[slotno];
	li = new_permit_index(name, slotno, scope);
	if (li < 0)
		return true;
	entry = my_entry(li);

	now = GetCurrentTimestamp();
	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	if (!slot_matches(slot, name))
	{
		LWLockRelease(slot->lock);
		if (from_cache)
		{
			/* the cached slot was reassigned: look the name up afresh */
			from_cache = false;
			goto retry;
		}
		report_unknown_workload(name);
	}
	/* the role names (1 KiB) are copied only for the role check */
	memcpy(&config, &slot->config, offsetof(BulkheadConfig, roles));
	if (config.nroles > 0 && !roles_checked)
		memcpy(config.roles, slot->config.roles, sizeof(config.roles[0]) * config.nroles);
	if (use_default_timeout)
		timeout_us = config.queue_timeout_us;

	limit = slot->current_limit;
	outcome = decide_admission(slot, &config, limit, timeout_us, roles_checked);
	if (outcome == ADMIT_GRANTED)
	{
		link_entry(slot, slotno, entry, scope, BULKHEAD_ENTRY_GRANTED, now);
		record_grant(slot, slotno, li, scope);
	}
	else if (outcome == ADMIT_QUEUED)
	{
		link_entry(slot, slotno, entry, scope, BULKHEAD_ENTRY_WAITING, now);
		my_wait_index = li;
	}
	LWLockRelease(slot->lock);

	switch (outcome)
	{
		case ADMIT_CHECK_ROLES:
			if (!role_allowed(config.nroles, config.roles, scope))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied for workload \"%s\"", name),
						 errdetail("Only members of the workload's roles may acquire its permits.")));
			roles_checked = true;
			goto retry;
		case ADMIT_FULL:
			if (try_only)
				return false;
			report_full(name, limit, &config);
			break;
		case ADMIT_ZERO_WAIT:
			if (try_only)
				return false;
			report_timeout(name, 0);
			break;
		case ADMIT_GRANTED:
			bulkhead_apply_guards(&bulkhead_local[li]);
			return true;
		case ADMIT_QUEUED:
			break;
	}
	return wait_for_permit(slot, slotno, li, scope, name, now, timeout_us,
						   try_only);
}

/*
 * Return a permit this backend holds (local index li): the entry leaves
 * the holders and the next waiter, if any, is served.  Never throws.
 */
void
bulkhead_release_entry(int li)
{
	BulkheadLocalPermit *permit = &bulkhead_local[li];
	BulkheadEntry *entry = my_entry(li);
	BulkheadSlot *slot;
	TimestampTz now = bulkhead_stats_clock();
	BulkheadWakeups wakeups = {0};
	bool		drained;

	Assert(permit->held);
	slot = &bulkhead_shared->slots[permit->workload];

	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	Assert(entry->workload == permit->workload);
	slot->stats.released++;
	bulkhead_stats_add_hold(&slot->stats, now > entry->since ? now - entry->since : 0);
	bulkhead_unlink_entry(slot, entry);
	if (!entry_list_is_empty(&slot->waiters))
		bulkhead_grant_waiters(slot, &wakeups);
	drained = slot_drained(slot);
	LWLockRelease(slot->lock);
	bulkhead_wake(&wakeups);
	if (drained)
		bulkhead_signal_worker();

	permit->held = false;
	bulkhead_nheld--;
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
	BulkheadWakeups wakeups = {0};
	bool		drained;

	if (my_wait_index < 0)
		return;
	entry = my_entry(my_wait_index);
	slot = &bulkhead_shared->slots[entry->workload];

	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	slot->stats.cancelled++;
	bulkhead_unlink_entry(slot, entry);
	if (!entry_list_is_empty(&slot->waiters))
		bulkhead_grant_waiters(slot, &wakeups);
	drained = slot_drained(slot);
	LWLockRelease(slot->lock);
	bulkhead_wake(&wakeups);

	my_wait_index = -1;
	if (drained)
		bulkhead_signal_worker();
}
