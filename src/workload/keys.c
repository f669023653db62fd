/*-------------------------------------------------------------------------
 *
 * keys.c
 *	  Tenants: fair sharing inside a workload.  A caller may name a key (a
 *	  tenant); the permits of the workload go to its keys in turn, the
 *	  least served first, in arrival order within a key, with a cap per key
 *	  on permits (max_running_per_key) and on waiting callers
 *	  (max_queued_per_key).
 *
 * The groups.  While some key of a workload is in use, the workload is
 * keyed: each of its entries belongs to one group, its key's, or (a caller
 * that named no key) the workload's nokey group, which competes as one more
 * key and has no cap.  Each group counts its holders and waiters and links
 * its waiters in arrival order (through shared->entry_keys[], beside the
 * slot's own waiters list, which keeps every waiter in arrival order for
 * the views, the deadlock check and the timeouts).  A workload with no key
 * in use is not keyed and none of this runs: its acquire and release test
 * one flag (slot->keyed) more.
 *
 * The order (DESIGN.md): the rule of shared budgets with equal weights and
 * no reservation.  A group's service is the permit-time it has held
 * (permit-microseconds, accumulated at each change of its running count);
 * the next permit goes to the waiting group under its cap with the least
 * service, ties to the group granted least recently, then to the oldest
 * head waiter.  A group that becomes active (a new key, or nokey after it
 * was idle) starts at the least service of the active groups, or when none
 * is active at key_floor (the service of the last group to go idle), so no
 * credit is banked while idle; a new key's arrival counts as its last grant
 * for the ties, so a group that waited before it goes first.  So a key that arrives beside one with
 * hundreds queued is served at the next grant: it starts level with the
 * busy key, which has been accruing service since.
 *
 * The table.  shared->keys has bulkhead.max_keys entries for all workloads;
 * a key takes one from the free list when it becomes active and gives it
 * back once it has nothing held or waiting, so memory is bounded by the
 * keys in use at once, never by the keys seen over time.  A key that goes
 * idle having held more permit-time than the least served active group
 * keeps its entry (idle, not listed in bulkhead_keys) until that debt is
 * paid (the others catch up) or no group of its workload is active; when
 * the table is full, a new key of the same workload takes it over, and a
 * new key of another workload has such keys of every workload freed
 * (bulkhead_keys_drop_idle, permit.c) before it fails.  Without
 * that, a tenant whose key goes idle between its transactions (one client,
 * back to back) would come back "least served" at each, ahead of a tenant
 * with a standing queue, for ever.  A key is
 * found by walking its workload's keys in use, comparing a hash first: a
 * keyed acquire and each grant of a keyed workload cost O(keys in use in
 * that workload), which the choice of the least served needs anyway.
 *
 * Locking (shmem.h): a key in use and the entry links of a slot's entries
 * are protected by the slot's lock in force; the free list by the spinlock
 * key_free_lock, held for a push or a pop only (never with another).
 *
 * Called by slot.c (admission, grants, unlinking, moves), budget.c and
 * budget.h (the next waiter of a keyed leaf), views.c (reading), permit.c
 * (a full table: bulkhead_keys_drop_idle); calls rank.c (1.5: a key's
 * waiters by rank, while some waiter of the slot carries a priority).
 *
 *-------------------------------------------------------------------------
 */
#include "workload/keys.h"
#include "workload/entry_list.h"
#include "workload/rank.h"

#include "common/hashfn.h"
#include "storage/spin.h"

static inline BulkheadEntryKey *
link_of(int32 e)
{
	return &bulkhead_shared->entry_keys[e];
}

/* The group an entry of keyed slot belongs to */
static inline BulkheadKeyGroup *
group_of(BulkheadSlot *slot, int32 k)
{
	return k == BULKHEAD_NO_KEY ? &slot->nokey : &bulkhead_key_at(k)->group;
}

static void
group_push(BulkheadKeyGroup *g, int32 e)
{
	BulkheadEntryKey *l = link_of(e);

	l->prev = g->waiters.tail;
	l->next = BULKHEAD_NO_ENTRY;
	if (g->waiters.tail == BULKHEAD_NO_ENTRY)
		g->waiters.head = e;
	else
		link_of(g->waiters.tail)->next = e;
	g->waiters.tail = e;
}

static void
group_delete(BulkheadKeyGroup *g, int32 e)
{
	BulkheadEntryKey *l = link_of(e);

	if (l->prev == BULKHEAD_NO_ENTRY)
		g->waiters.head = l->next;
	else
		link_of(l->prev)->next = l->next;
	if (l->next == BULKHEAD_NO_ENTRY)
		g->waiters.tail = l->prev;
	else
		link_of(l->next)->prev = l->prev;
	l->prev = l->next = BULKHEAD_NO_ENTRY;
}

static inline bool
group_idle(const BulkheadKeyGroup *g)
{
	return g->running == 0 && g->queued == 0;
}

/* A group's service at now, without changing it */
static inline double
service_at(const BulkheadKeyGroup *g, TimestampTz now)
{
	if (now <= g->served_at)
		return g->service;
	return g->service + (double) g->running * (double) (now - g->served_at);
}

/* Bring a group's service up to now (before its running count changes) */
static inline void
accumulate(BulkheadKeyGroup *g, TimestampTz now)
{
	g->service = service_at(g, now);
	if (now > g->served_at)
		g->served_at = now;
}

/*
 * The least service of slot's active groups but except; key_floor if none
 * (then *any, if given, is false)
 */
static double
least_active_any(const BulkheadSlot *slot, const BulkheadKeyGroup *except,
				 TimestampTz now, bool *any)
{
	bool		found = false;
	double		least = 0;
	int32		k;

	if (&slot->nokey != except && !group_idle(&slot->nokey))
	{
		least = service_at(&slot->nokey, now);
		found = true;
	}
	for (k = slot->first_key; k >= 0; k = bulkhead_key_at(k)->next)
	{
		const BulkheadKeyGroup *g = &bulkhead_key_at(k)->group;
		double		service;

		if (g == except || group_idle(g))
			continue;
		service = service_at(g, now);
		if (!found || service < least)
			least = service;
		found = true;
	}
	if (any != NULL)
		*any = found;
	return found ? least : slot->key_floor;
}

static inline double
least_active(const BulkheadSlot *slot, const BulkheadKeyGroup *except,
			 TimestampTz now)
{
	return least_active_any(slot, except, now, NULL);
}

/* A group becomes active: no credit for the time it was idle */
static void
activate(BulkheadSlot *slot, BulkheadKeyGroup *g, TimestampTz now)
{
	double		least = least_active(slot, g, now);

	if (g->service < least)
		g->service = least;
	g->served_at = now;
}

/* A group goes idle: where it had got to is the floor of the next */
static void
went_idle(BulkheadSlot *slot, const BulkheadKeyGroup *g)
{
	if (g->service > slot->key_floor)
		slot->key_floor = g->service;
}

/*
 * slot gets its first key in use: every entry it has (none named a key)
 * joins the nokey group, its waiters in arrival order.
 */
static void
enter_keyed(BulkheadSlot *slot, TimestampTz now)
{
	BulkheadKeyGroup *g = &slot->nokey;
	BulkheadEntry *entry;

	memset(g, 0, sizeof(BulkheadKeyGroup));
	entry_list_init(&g->waiters);
	entry_list_foreach(entry, &slot->holders)
		g->running++;
	entry_list_foreach(entry, &slot->waiters)
	{
		g->queued++;
		group_push(g, entry_index(entry));
	}
	g->served_at = now;
	slot->key_floor = 0;
	slot->keyed = true;
}

/* A key of slot kept idle for its debt, or -1 */
static int32
idle_key(const BulkheadSlot *slot)
{
	int32		k;

	for (k = slot->first_key; k >= 0; k = bulkhead_key_at(k)->next)
		if (group_idle(&bulkhead_key_at(k)->group))
			return k;
	return -1;
}

/* Take key k of slot, idle, out of slot's keys */
static void
unlink_key(BulkheadSlot *slot, int32 k)
{
	BulkheadKey *key = bulkhead_key_at(k);
	int32	   *link;

	went_idle(slot, &key->group);
	for (link = &slot->first_key; *link >= 0; link = &bulkhead_key_at(*link)->next)
	{
		if (*link == k)
		{
			*link = key->next;
			break;
		}
	}
	key->workload = -1;
	key->name[0] = '\0';
}

/* Give key k of slot, idle, back to the free list */
static void
free_key(BulkheadSlot *slot, int32 k)
{
	BulkheadKey *key = bulkhead_key_at(k);

	unlink_key(slot, k);
	SpinLockAcquire(&bulkhead_shared->key_free_lock);
	key->next = bulkhead_shared->key_free;
	bulkhead_shared->key_free = k;
	SpinLockRelease(&bulkhead_shared->key_free_lock);

	/* the last key gone: the slot costs what an unkeyed one does again */
	if (slot->first_key < 0)
		slot->keyed = false;
}

/*
 * Has idle group g held more permit-time than the least served active
 * group of slot?  A key that goes idle with such a debt is kept (idle,
 * out of bulkhead_keys) until the others catch up: freed at once, it
 * would come back at the least served group's level, and a tenant whose
 * every transaction finds its key gone (one client, back to back) would be
 * "least served" at each, ahead of a tenant with a standing queue.
 */
static bool
key_has_debt(const BulkheadSlot *slot, const BulkheadKeyGroup *g,
			 TimestampTz now)
{
	bool		any;
	double		least = least_active_any(slot, g, now, &any);

	return any && g->service > least;
}

/*
 * Free the idle keys of slot kept for their debt once it is paid (the
 * least served active group has caught up), and all of them once no group
 * of slot is active (then no one owes anyone: a group that comes back
 * starts level with the first to return, as budgets' children do).
 */
static void
forget_paid_debts(BulkheadSlot *slot, TimestampTz now)
{
	bool		any;
	double		least = least_active_any(slot, NULL, now, &any);
	int32		k;
	int32		next;

	for (k = slot->first_key; k >= 0; k = next)
	{
		BulkheadKeyGroup *g = &bulkhead_key_at(k)->group;

		next = bulkhead_key_at(k)->next;	/* read before it is freed */
		if (group_idle(g) && (!any || g->service <= least))
			free_key(slot, k);
	}
}

/*
 * The key table is full: give back every key of slot kept idle for its
 * debt, paid or not (the debt is forgotten, as when a new key of slot takes
 * such an entry over).  Keys take entries of the table only while they hold
 * or wait (DESIGN.md): a key kept for its debt must never be why a new key
 * of another workload fails, nor keep its entry while its own workload has
 * no unlink to free it (one long holder).  Returns how many were freed.
 */
int
bulkhead_keys_drop_idle(BulkheadSlot *slot)
{
	int			freed = 0;
	int32		k;
	int32		next;

	for (k = slot->first_key; k >= 0; k = next)
	{
		next = bulkhead_key_at(k)->next;	/* read before it is freed */
		if (group_idle(&bulkhead_key_at(k)->group))
		{
			free_key(slot, k);
			freed++;
		}
	}
	return freed;
}

uint32
bulkhead_key_hash(const char *key)
{
	return hash_bytes((const unsigned char *) key, (int) strlen(key));
}

/* The key in use of slot called key (hash: its hash), or BULKHEAD_NO_KEY */
int32
bulkhead_keys_find(const BulkheadSlot *slot, const char *key, uint32 hash)
{
	int32		k;

	for (k = slot->first_key; k >= 0; k = bulkhead_key_at(k)->next)
	{
		const BulkheadKey *entry = bulkhead_key_at(k);

		if (entry->hash == hash && strcmp(entry->name, key) == 0)
			return k;
	}
	return BULKHEAD_NO_KEY;
}

/*
 * A new key of slot (index slotno), for a caller that is linked with it at
 * once (bulkhead_keys_link): an entry of the free list, or BULKHEAD_NO_KEY
 * when the table is full.  The slot becomes keyed if it was not.
 */
int32
bulkhead_keys_create(BulkheadSlot *slot, int slotno, const char *name,
					 uint32 hash, TimestampTz now)
{
	BulkheadKey *key;
	int32		k;

	SpinLockAcquire(&bulkhead_shared->key_free_lock);
	k = bulkhead_shared->key_free;
	if (k >= 0)
		bulkhead_shared->key_free = bulkhead_key_at(k)->next;
	SpinLockRelease(&bulkhead_shared->key_free_lock);
	if (k < 0)
	{
		/* the table is full: a key of this slot kept for its debt gives way */
		k = idle_key(slot);
		if (k < 0)
			return BULKHEAD_NO_KEY;
		unlink_key(slot, k);
	}

	if (!slot->keyed)
		enter_keyed(slot, now);
	key = bulkhead_key_at(k);
	key->workload = (int16) slotno;
	key->hash = hash;
	strlcpy(key->name, name, sizeof(key->name));
	memset(&key->group, 0, sizeof(BulkheadKeyGroup));
	entry_list_init(&key->group.waiters);
	key->group.service = least_active(slot, NULL, now);
	key->group.served_at = now;

	/*
	 * A key never granted counts its arrival as its last grant, for the
	 * ties: it starts level with the least served group in use, and that
	 * group, if it waits, holds nothing, so its service stays put.  Were a
	 * new key "never granted", it would win that tie, and so would the
	 * next new key, and the next: a stream of new keys would starve a
	 * group that waited before them (a repeat tenant, the callers without
	 * a key).
	 */
	key->group.granted_at = now;
	key->next = slot->first_key;
	slot->first_key = k;
	return k;
}

/*
 * entry, just linked into keyed slot's holders (granted) or waiters, joins
 * key k's group (BULKHEAD_NO_KEY: nokey).  A holder moved in by the worker
 * (runaway holders) joins nokey as granted too.
 */
void
bulkhead_keys_link(BulkheadSlot *slot, BulkheadEntry *entry, int32 k,
				   bool granted, TimestampTz now)
{
	BulkheadKeyGroup *g = group_of(slot, k);
	bool		was_idle = group_idle(g);

	Assert(slot->keyed);
	link_of(entry_index(entry))->key = k;
	accumulate(g, now);
	if (granted)
	{
		g->running++;
		g->granted_at = now;
	}
	else
	{
		g->queued++;
		group_push(g, entry_index(entry));
	}
	/*
	 * A group coming back (nokey, or a key kept idle with its debt) is
	 * raised to the least served active group, never lowered; a new key
	 * was placed when created.
	 */
	if (was_idle)
		activate(slot, g, now);
}

/*
 * entry of keyed slot leaves its list (a release, a wait that ends, a move
 * out): it leaves its group, and a key left with nothing is freed.
 */
void
bulkhead_keys_unlink(BulkheadSlot *slot, BulkheadEntry *entry,
					 TimestampTz now)
{
	int32		e = entry_index(entry);
	int32		k = link_of(e)->key;
	BulkheadKeyGroup *g = group_of(slot, k);

	Assert(slot->keyed);
	accumulate(g, now);
	if (entry->state == BULKHEAD_ENTRY_WAITING)
	{
		g->queued--;
		group_delete(g, e);
	}
	else
		g->running--;
	link_of(e)->key = BULKHEAD_NO_KEY;
	if (group_idle(g))
	{
		if (k == BULKHEAD_NO_KEY)
			went_idle(slot, g);
		else if (!key_has_debt(slot, g, now))
			free_key(slot, k);
	}
	forget_paid_debts(slot, now);
}

/* Is group a served before group b (both waiting, under their caps)? */
static bool
before(const BulkheadKeyGroup *a, double service_a,
	   const BulkheadKeyGroup *b, double service_b)
{
	if (service_a != service_b)
		return service_a < service_b;
	if (a->granted_at != b->granted_at)
		return a->granted_at < b->granted_at;
	return entry_at(a->waiters.head)->queued_at <
		entry_at(b->waiters.head)->queued_at;
}

/*
 * The waiter of keyed slot served next: the least served waiting group
 * under its cap, and in it the head (or with max_bypass, the newest unless
 * the head has waited max_bypass).  NULL when every waiting group is at its
 * cap.  The caller checks the limits of the slot and of its path.
 */
BulkheadEntry *
bulkhead_keys_next_waiter(const BulkheadSlot *slot, TimestampTz now)
{
	const BulkheadKeyGroup *best = NULL;
	double		best_service = 0;
	BulkheadEntry *head;
	int32		k;

	if (slot->nokey.queued > 0)
	{
		best = &slot->nokey;
		best_service = service_at(best, now);
	}
	for (k = slot->first_key; k >= 0; k = bulkhead_key_at(k)->next)
	{
		const BulkheadKeyGroup *g = &bulkhead_key_at(k)->group;
		double		service;

		if (g->queued == 0 || !bulkhead_key_under_cap(slot, k))
			continue;
		service = service_at(g, now);
		if (best == NULL || before(g, service, best, best_service))
		{
			best = g;
			best_service = service;
		}
	}
	if (best == NULL)
		return NULL;
	/* 1.5: by rank within the key's waiters (rank.c) */
	if (unlikely(slot->prio_waiting > 0))
		return bulkhead_rank_next(best->waiters.head, true,
								  slot->config.max_bypass_us, now);
	head = entry_at(best->waiters.head);
	if (slot->config.max_bypass_us == 0 ||
		now - head->queued_at >= slot->config.max_bypass_us)
		return head;
	return entry_at(best->waiters.tail);
}

/* A waiter of keyed slot was granted (slot.c moved it to the holders) */
void
bulkhead_keys_granted(BulkheadSlot *slot, BulkheadEntry *entry,
					  TimestampTz now)
{
	int32		e = entry_index(entry);
	BulkheadKeyGroup *g = group_of(slot, link_of(e)->key);

	accumulate(g, now);
	g->queued--;
	group_delete(g, e);
	g->running++;
	g->granted_at = now;
}
