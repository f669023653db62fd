/*-------------------------------------------------------------------------
 *
 * admit.c
 *	  The admission decision of DESIGN.md for a backend's acquire: granted
 *	  at once, queued, or rejected (B + Q taken, no wait allowed, a key's
 *	  queue full, the key table full), decided and counted under the slot's
 *	  lock, with the backend's entry linked as decided.
 *
 * Three ways, the first costing what 1.0's did: a workload outside any
 * tree with no key in use and a caller without a key (the slot's own
 * counts); a leaf of a tree of budgets (its path, budget.c); a keyed
 * workload or a keyed caller (keys.c).  Nothing here throws: the caller
 * (permit.c) raises the errors once the lock is released.
 *
 * Writes the slot's counts and entries through slot.c (bulkhead_slot_link,
 * inline for the first way), the slot's statistics of rejections, and keys
 * through keys.c.  Called by permit.c; calls slot.c, budget.c, keys.c.
 *
 *-------------------------------------------------------------------------
 */
#include "workload/admit.h"
#include "workload/budget.h"
#include "workload/keys.h"
#include "workload/slot.h"

/* Wait, or fail at once when no wait is allowed */
static BulkheadAdmit
admit_wait(BulkheadSlot *slot, int slotno, BulkheadEntry *entry,
		   BulkheadScope scope, int64 timeout_us, TimestampTz now)
{
	if (timeout_us <= 0)
	{
		slot->stats.timed_out++;
		return BULKHEAD_ADMIT_ZERO_WAIT;
	}
	bulkhead_slot_link(slot, slotno, entry, scope, BULKHEAD_ENTRY_WAITING,
			   BULKHEAD_NO_KEY, now);
	return BULKHEAD_ADMIT_QUEUED;
}

/*
 * B + Q taken: is the workload full (counted in rejected_full)?  max_queued
 * counts against the limit in force (the caller's copy).  In shadow mode
 * no one is rejected, but what enforce mode would have done is counted.
 */
static inline bool
full(BulkheadSlot *slot, const BulkheadConfig *config, int limit)
{
	if (config->shadow)
	{
		if (slot->running >= (int64) limit + config->max_queued)
			slot->stats.shadow_rejected++;
		else if (slot->running >= limit)
			slot->stats.shadow_queued++;
		return false;
	}
	if ((int64) slot->running + slot->queued >= (int64) limit + config->max_queued)
	{
		slot->stats.rejected_full++;
		return true;
	}
	return false;
}

/*
 * Admission to a leaf of a tree of budgets: its own B + Q decide a
 * rejection as outside a tree; the permit is taken at once when the leaf
 * has no waiter and the whole path has room (budget.c); else the caller
 * waits.  In shadow mode the leaf's own limit is only counted, but the
 * budgets above it still decide.  Kept apart from bulkhead_admit's
 * own checks on purpose: one function for both costs a workload outside
 * any tree 7 more instructions per acquire/release pair (callgrind).
 */
static BulkheadAdmit
admit_in_tree(BulkheadSlot *slot, int slotno, BulkheadEntry *entry,
			  BulkheadScope scope, const BulkheadConfig *config, int limit,
			  int64 timeout_us, TimestampTz now)
{
	if (full(slot, config, limit))
		return BULKHEAD_ADMIT_FULL;
	if (slot->queued != 0 || !bulkhead_budget_path_free(slot))
		return admit_wait(slot, slotno, entry, scope, timeout_us, now);
	bulkhead_slot_link(slot, slotno, entry, scope, BULKHEAD_ENTRY_GRANTED,
					   BULKHEAD_NO_KEY, now);
	bulkhead_slot_count_grant(slot, entry);
	return BULKHEAD_ADMIT_GRANTED;
}

/*
 * Admission to a keyed workload, or of a caller that names a key (tenants,
 * keys.c): B + Q decide a rejection as elsewhere.  The permit is taken at
 * once when the slot (in a tree, its path) has room and the caller's group
 * (its key's callers, or without a key those without one) has no waiter
 * and is under max_running_per_key: a waiter left is one whose key is at
 * its cap (serving grants every other).  Else the caller waits, unless its
 * key has max_queued_per_key waiting already.  A new key takes an entry of
 * the key table only here, once the caller is sure to be linked with it.
 */
static pg_noinline BulkheadAdmit
admit_keyed(BulkheadSlot *slot, int slotno, BulkheadEntry *entry,
			BulkheadScope scope, const BulkheadConfig *config, int limit,
			int64 timeout_us, const char *key, TimestampTz now)
{
	bool		in_tree = bulkhead_in_tree(slot);
	uint32		hash = key != NULL ? bulkhead_key_hash(key) : 0;
	int32		k = BULKHEAD_NO_KEY;
	bool		grant;

	if (full(slot, config, limit))
		return BULKHEAD_ADMIT_FULL;
	if (key != NULL)
		k = bulkhead_keys_find(slot, key, hash);
	if (in_tree)
		grant = bulkhead_budget_path_free(slot);
	else
		grant = config->shadow || slot->running < limit;
	/* shadow mode outside a tree grants everyone: it counts only */
	if (grant && (in_tree || !config->shadow))
	{
		if (key == NULL)
			grant = slot->nokey.queued == 0;
		else if (k != BULKHEAD_NO_KEY)
			grant = !bulkhead_key_has_waiters(k) &&
				bulkhead_key_under_cap(slot, k);
	}
	if (!grant)
	{
		/*
		 * slot's config: the caller's copy stops before the roles.  In
		 * shadow mode (in a tree: the budgets above make it wait) the cap on
		 * a key's waiters, the leaf's own, rejects no one.
		 */
		if (key != NULL && !slot->config.shadow &&
			slot->config.max_queued_per_key >= 0 &&
			(k == BULKHEAD_NO_KEY ? 0 : bulkhead_key_at(k)->group.queued) >=
			slot->config.max_queued_per_key)
		{
			slot->stats.rejected_full++;
			return BULKHEAD_ADMIT_KEY_FULL;
		}
		if (timeout_us <= 0)
		{
			slot->stats.timed_out++;
			return BULKHEAD_ADMIT_ZERO_WAIT;
		}
	}
	if (key != NULL && k == BULKHEAD_NO_KEY)
	{
		k = bulkhead_keys_create(slot, slotno, key, hash, now);
		if (k == BULKHEAD_NO_KEY)
			return BULKHEAD_ADMIT_NO_KEY_ROOM;
	}
	bulkhead_slot_link(slot, slotno, entry, scope,
			   grant ? BULKHEAD_ENTRY_GRANTED : BULKHEAD_ENTRY_WAITING, k, now);
	if (!grant)
		return BULKHEAD_ADMIT_QUEUED;
	bulkhead_slot_count_grant(slot, entry);
	return BULKHEAD_ADMIT_GRANTED;
}

/*
 * The admission decision of DESIGN.md for this backend's free entry,
 * counting what it decides, and the entry linked as it decides (granted or
 * queued).  config is the slot's configuration and limit its current_limit
 * (the caller's copies, for its messages).  max_queued counts against the
 * limit in force, not against max_running: the queue stays as long as the
 * operator set it whatever the limit, so a lowered limit sheds load at once
 * rather than queueing it for longer.
 */
BulkheadAdmit
bulkhead_admit(BulkheadSlot *slot, int slotno, BulkheadEntry *entry,
			   BulkheadScope scope, const BulkheadConfig *config, int limit,
			   int64 timeout_us, bool roles_checked, const char *key,
			   TimestampTz now)
{
	/*
	 * A budget (by the table, config->budget: its children may not be in
	 * its tree yet while the worker loads a rename, or may have left it)
	 * takes the way of a tree; roles first: a non-member is not told it is
	 * a budget, nor its children.
	 */
	if (unlikely(bulkhead_in_tree(slot) | config->budget))
	{
		if (config->nroles > 0 && !roles_checked)
			return BULKHEAD_ADMIT_CHECK_ROLES;
		if (slot->first_child >= 0 || config->budget)
			return BULKHEAD_ADMIT_BUDGET;
		if (key != NULL || slot->keyed)
			return admit_keyed(slot, slotno, entry, scope, config, limit,
							   timeout_us, key, now);
		return admit_in_tree(slot, slotno, entry, scope, config, limit,
							 timeout_us, now);
	}
	if (config->nroles > 0 && !roles_checked)
		return BULKHEAD_ADMIT_CHECK_ROLES;
	if (unlikely((key != NULL) | slot->keyed))
		return admit_keyed(slot, slotno, entry, scope, config, limit,
						   timeout_us, key, now);
	if (full(slot, config, limit))
		return BULKHEAD_ADMIT_FULL;
	/* shadow mode grants at once */
	if (!config->shadow && (slot->queued != 0 || slot->running >= limit))
		return admit_wait(slot, slotno, entry, scope, timeout_us, now);
	bulkhead_slot_link(slot, slotno, entry, scope, BULKHEAD_ENTRY_GRANTED,
					   BULKHEAD_NO_KEY, now);
	bulkhead_slot_count_grant(slot, entry);
	return BULKHEAD_ADMIT_GRANTED;
}
