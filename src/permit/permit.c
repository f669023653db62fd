/*-------------------------------------------------------------------------
 *
 * permit.c
 *	  Taking a permit: admission, then the wait (permitwait.c).
 *
 * The decision is made under the slot's LWLock, by slot.c, which links
 * this backend's entry as it decides; errors are raised here after the
 * lock is released, when shared state is complete again.  A queued caller
 * waits for the hand-off in permitwait.c (deadlock checks, a lock holder
 * served first).  Before admission the free entry takes the importance
 * its wait would carry (1.5, importance.c).
 *
 * Owns no shared state: it changes slots through slot.c and this backend's
 * permits through local.c; disclose.c says whether a budget's children may
 * be named to the caller; what an acquire did is told to bulkhead_statements
 * and the wait log (outcome.h).  Called by permitfuncs.c and transparent.c;
 * calls permitwait.c for the wait, importance.c for its importance.
 *
 *-------------------------------------------------------------------------
 */
#include "permit/permit.h"
#include "acl/disclose.h"
#include "guards/guard.h"
#include "permit/local.h"
#include "permit/permitwait.h"
#include "workload/admit.h"
#include "workload/importance.h"
#include "workload/slot.h"
#include "workload/budget.h"
#include "workload/keys.h"
#include "record/outcome.h"

#include <math.h>

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* Custom SQLSTATEs of DESIGN.md */
#define ERRCODE_BULKHEAD_FULL		MAKE_SQLSTATE('5','3','B','0','1')

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

/* A budget's children asked a permit of, for the hint (filled by admit) */
static char budget_children[4 * (NAMEDATALEN + 4) + 8];

static void
note_children(const BulkheadSlot *slot)
{
	int			c;
	int			n = 0;

	budget_children[0] = '\0';
	for (c = slot->first_child; c >= 0; c = bulkhead_slot_at(c)->next_sibling)
	{
		if (n == 4)
		{
			strlcat(budget_children, ", ...", sizeof(budget_children));
			break;
		}
		if (n++ > 0)
			strlcat(budget_children, ", ", sizeof(budget_children));
		strlcat(budget_children, "\"", sizeof(budget_children));
		strlcat(budget_children, bulkhead_slot_at(c)->name, sizeof(budget_children));
		strlcat(budget_children, "\"", sizeof(budget_children));
	}
}

/* A caller of key was rejected by the key's max_queued_per_key */
static void
report_key_full(const char *name, const char *key, const BulkheadConfig *config)
{
	ereport(ERROR,
			(errcode(ERRCODE_BULKHEAD_FULL),
			 errmsg("key \"%s\" of workload \"%s\" is full", key, name),
			 errdetail("The key has %d callers waiting already (max_queued_per_key).",
					   config->max_queued_per_key),
			 errhint("Retry later with backoff, or shed this work.")));
}

static void
report_no_key_room(const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("too many bulkhead keys in use"),
			 errdetail("Key \"%s\" is new, and all %d entries of the key table are taken by keys holding or awaiting permits.",
					   key, bulkhead_shared->nkeys),
			 errhint("Raise \"bulkhead.max_keys\" (currently %d), or retry once keys in use are released.",
					 bulkhead_shared->nkeys)));
}

/*
 * A budget's children are named only to a user who may read them in
 * bulkhead_stats (disclose.c): the user whose roles admission checks.
 * (While the worker loads a new budget, its children may not be in its
 * tree yet: none to name.)
 */
static void
report_budget(const char *name, BulkheadScope scope)
{
	bool		named = budget_children[0] != '\0' &&
		bulkhead_may_read_stats(scope == BULKHEAD_SCOPE_AUTO ?
								GetOuterUserId() : GetUserId());

	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("workload \"%s\" is a budget", name),
			 errdetail("Permits are taken of the workloads under a budget, not of the budget itself."),
			 scope == BULKHEAD_SCOPE_AUTO ?
			 (named ?
			  errhint("Name one of its children in \"bulkhead.workload\" or in the rule that classified the session: %s.",
					  budget_children) :
			  errhint("Name one of its children in \"bulkhead.workload\" or in the rule that classified the session.")) :
			 (named ?
			  errhint("Acquire a permit of one of its children: %s.", budget_children) :
			  errhint("Acquire a permit of one of its children."))));
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
		(bulkhead_wait_index() >= 0 &&
		 bulkhead_my_entry(bulkhead_wait_index())->workload == slotno))
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
 * Admission under the slot lock: the slot of name (the cached one, or
 * looked up afresh when it was reassigned), the decision, and this
 * backend's entry li linked as decided.  *config and *limit are copies for
 * use after the lock is released; *now is the arrival.  Raises 42704 for
 * an unknown workload, before anything changed.
 */
static BulkheadAdmit
admit(const char *name, const char *key, BulkheadScope scope,
	  int64 *timeout_us,
	  bool use_default_timeout, bool roles_checked, int *slotno, int *li,
	  BulkheadConfig *config, int *limit, TimestampTz *now,
	  const char *moved_from)
{
	BulkheadSlot *slot;
	BulkheadAdmit outcome;
	bool		from_cache = true;

	for (;;)
	{
		*slotno = lookup_slot(name, from_cache);
		if (*slotno < 0)
			report_unknown_workload(name);
		slot = &bulkhead_shared->slots[*slotno];
		*li = new_permit_index(name, *slotno, scope);
		if (*li < 0)
			return BULKHEAD_ADMIT_GRANTED;	/* held through bulkhead.workload */

		/* 1.5: the importance its wait carries, set while the entry is free */
		bulkhead_slot_prepare_prio(bulkhead_my_entry(*li),
								   bulkhead_importance_current());
		*now = GetCurrentTimestamp();
		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
		if (bulkhead_slot_matches(slot, name))
			break;
		LWLockRelease(slot->lock);
		if (!from_cache)
			report_unknown_workload(name);
		/* the cached slot was reassigned: look the name up afresh */
		from_cache = false;
	}

	/* the role names (1 KiB) are copied only for the role check */
	memcpy(config, &slot->config, offsetof(BulkheadConfig, roles));
	if (config->nroles > 0 && !roles_checked)
		memcpy(config->roles, slot->config.roles,
			   sizeof(config->roles[0]) * config->nroles);
	if (use_default_timeout)
		*timeout_us = config->queue_timeout_us;
	*limit = slot->current_limit;
	outcome = bulkhead_admit(slot, *slotno, bulkhead_my_entry(*li), scope,
							 config, *limit, *timeout_us, roles_checked,
							 key, *now);
	if (unlikely(moved_from != NULL) &&
		(outcome == BULKHEAD_ADMIT_GRANTED || outcome == BULKHEAD_ADMIT_QUEUED))
		bulkhead_slot_note_moved(slot, bulkhead_my_entry(*li), moved_from);
	if (outcome == BULKHEAD_ADMIT_GRANTED)
		bulkhead_local_record_grant(*li, slot, *slotno, scope);
	else if (outcome == BULKHEAD_ADMIT_QUEUED)
		bulkhead_set_wait_index(*li, *slotno);
	else if (outcome == BULKHEAD_ADMIT_BUDGET)
		note_children(slot);
	else if (outcome == BULKHEAD_ADMIT_KEY_FULL)
		config->max_queued_per_key = slot->config.max_queued_per_key;	/* 53B01 */
	LWLockRelease(slot->lock);
	return outcome;
}

/*
 * The key table is full (53400): keys kept idle for their debts (keys.c),
 * in every workload, give their entries back, so that 53400 means what it
 * says: every entry is taken by a key holding or awaiting permits.  Called
 * with no lock held; takes one slot lock at a time.  Returns how many keys
 * were freed.
 */
static int
free_idle_keys(void)
{
	int			freed = 0;
	int			i;

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];

		/*
		 * Read without the lock, a hint: a slot that is not keyed has no
		 * key, and one keyed meanwhile has only keys in use.
		 */
		if (!slot->keyed)
			continue;
		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
		freed += bulkhead_keys_drop_idle(slot);
		LWLockRelease(slot->lock);
	}
	return freed;
}

/*
 * Take a permit of workload name for this backend, as a caller of key (a
 * tenant; NULL: none, keys.c), waiting up to timeout_us
 * (or the workload's queue_timeout when use_default_timeout).
 *
 * Returns true once the permit is held.  When full or timed out, returns
 * false if try_only, else raises 53B01 / 53B02.  Other failures always
 * raise (40P01 for a deadlock).  On return, the permit's guards are applied.
 *
 * snapshot_given_up: NULL, or the early gate's (transparent.c), which has made
 * sure that the active snapshot is one that nothing uses once the call
 * returns (the one a top-level statement is planned with).  Then a caller that must queue gives that snapshot up (and the
 * catalog snapshot) before it waits, so that its wait holds back no xmin
 * horizon (VACUUM, HOT pruning) unless another snapshot of its transaction
 * does; *snapshot_given_up says so, and the gate pushes a fresh snapshot.
 * An error in the wait leaves the popped snapshot to the abort, which
 * empties the stack anyway.
 */
bool
bulkhead_acquire_permit(const char *name, const char *key, int64 timeout_us,
						bool use_default_timeout, BulkheadScope scope,
						bool try_only, bool *snapshot_given_up,
						const char *moved_from)
{
	BulkheadConfig config;
	BulkheadAdmit outcome;
	TimestampTz now = 0;
	bool		roles_checked = false;
	bool		keys_freed = false;
	int			limit;
	int			slotno;
	int			li;

	bulkhead_backend_init();

	for (;;)
	{
		outcome = admit(name, key, scope, &timeout_us, use_default_timeout,
						roles_checked, &slotno, &li, &config, &limit, &now,
						moved_from);
		if (outcome == BULKHEAD_ADMIT_NO_KEY_ROOM && !keys_freed)
		{
			/* keys kept idle for their debts give way; then once more */
			keys_freed = true;
			if (free_idle_keys() > 0)
				continue;
			break;
		}
		if (outcome != BULKHEAD_ADMIT_CHECK_ROLES)
			break;
		if (!role_allowed(config.nroles, config.roles, scope))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for workload \"%s\"", name),
					 errdetail("Only members of the workload's roles may acquire its permits.")));
		roles_checked = true;
	}

	bulkhead_observe_admit(name, outcome, moved_from != NULL, !try_only);
	if (try_only && (outcome == BULKHEAD_ADMIT_FULL || outcome == BULKHEAD_ADMIT_ZERO_WAIT ||
					 outcome == BULKHEAD_ADMIT_KEY_FULL))
		return false;
	switch (outcome)
	{
		case BULKHEAD_ADMIT_GRANTED:
			if (li >= 0)
				bulkhead_apply_guards(&bulkhead_local[li]);
			return true;
		case BULKHEAD_ADMIT_FULL:
			report_full(name, limit, &config);
			break;
		case BULKHEAD_ADMIT_ZERO_WAIT:
			bulkhead_report_permit_timeout(name, 0);
			break;
		case BULKHEAD_ADMIT_KEY_FULL:
			report_key_full(name, key, &config);
			break;
		case BULKHEAD_ADMIT_NO_KEY_ROOM:
			report_no_key_room(key);
			break;
		case BULKHEAD_ADMIT_BUDGET:
			report_budget(name, scope);
			break;
		case BULKHEAD_ADMIT_QUEUED:
		case BULKHEAD_ADMIT_CHECK_ROLES:
			break;
	}
	if (snapshot_given_up != NULL && ActiveSnapshotSet())
	{
		PopActiveSnapshot();
		InvalidateCatalogSnapshot();
		*snapshot_given_up = true;
	}
	return bulkhead_wait_for_permit(&bulkhead_shared->slots[slotno], slotno,
									li, scope, name, now, timeout_us,
									try_only, moved_from);
}
