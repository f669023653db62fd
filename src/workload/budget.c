/*-------------------------------------------------------------------------
 *
 * budget.c
 *	  Shared budgets: the counts of every level of a tree of workloads, the
 *	  rule that says whether a leaf may be granted a permit, the order in
 *	  which waiting children are served, and re-parenting.
 *
 * A workload with children is a budget: its limit bounds the permits held
 * in its whole subtree (its running counts them all).  A child c of budget
 * P keeps config.reserved of P's permits for its subtree alone; the rest of
 * P's limit, S = limit - reserved_sum, is shared, and c uses
 * max(0, running_c - reserved_c) of it (P->shared_used sums that over the
 * children).  A permit is free for leaf L when at L and at every node X on
 * its path to the root, X is under its own limit and (X is under its
 * reservation, or the shared part of X's parent has room).
 *
 * Atomicity.  All the slots of a tree share one lock (shmem.h): whoever
 * grants, releases, cancels, times out, reaps or reconfigures holds it, and
 * changes every level of the path before releasing it.  So there is no
 * instant at which a level was granted past its limit, whatever the
 * interleaving; and there is no order of locks between levels to keep.
 * Re-parenting (the worker) first moves every tree it changes onto one
 * lock it holds throughout (shmem.h), so a subtree moves between trees in
 * one step, holding at most three LWLocks however many trees change.
 *
 * Serving.  After every change under the lock, slot.c serves the tree: it
 * asks bulkhead_budget_pick() for the leaf whose head waiter gets the next
 * free permit, until none can be granted.  So no waiter that could be
 * granted is ever left waiting while the lock is free, and a newcomer that
 * finds its path free takes nothing a waiter could have had.  The order
 * (DESIGN.md): at each budget, first a child under its reservation (the
 * oldest head waiter among them); else the child least served for its
 * weight; ties to the child granted least recently, then to the oldest
 * head waiter.  FIFO within a leaf, or with max_bypass newest first
 * (budget.h); a leaf with max_bypass still competes by its oldest waiter.
 *
 * Service.  A child's service is the permit-time it has borrowed (beyond
 * its reservation) divided by its weight, accumulated at each change of its
 * running count (O(1) per level per grant or release).  A child that goes
 * from idle (nothing held, nothing waiting in its subtree) to active is
 * raised to the smallest service among its active siblings, or, when none
 * is active, to the budget's service_floor (the service of the last child
 * that went idle, never lowered), so no credit is banked while idle, and
 * no debt either: a child that ran alone for an hour, then rested while
 * every sibling did, comes back level with the first to return.  (DESIGN.md says "already waiting"; a sibling that
 * holds permits without waiting competes too, and not raising to it would
 * let a returning child take every contested permit until it caught up.)
 *
 * Writes the tree fields of the slots (shmem.h), the running counts of
 * budgets and their counters (acquired, released, moved_in, moved_out:
 * at every level acquired + moved_in = released + moved_out + running),
 * and a slot's reserved and weight when they change.  Called by
 * slot.c (counts, serving, reconfiguring), blockers.c (the tree's shape),
 * loader.c (re-parenting); calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#include "workload/budget.h"
#include "workload/entry_list.h"

#include "utils/timestamp.h"

static inline BulkheadSlot *
parent_of(const BulkheadSlot *slot)
{
	return slot->parent >= 0 ? bulkhead_slot_at(slot->parent) : NULL;
}

static inline bool
idle(const BulkheadSlot *slot)
{
	return slot->running == 0 && slot->sub_queued == 0;
}

static inline int
weight_of(const BulkheadSlot *slot)
{
	return Max(slot->config.weight, 1);
}

/* A child's service at now, without changing it */
static double
service_at(const BulkheadSlot *slot, TimestampTz now)
{
	double		service = slot->service;

	if (now > slot->served_at)
		service += (double) bulkhead_budget_borrowed(slot) *
			(double) (now - slot->served_at) / weight_of(slot);
	return service;
}

/* Bring a child's service up to now (before its running count changes) */
static void
accumulate(BulkheadSlot *slot, TimestampTz now)
{
	slot->service = service_at(slot, now);
	if (now > slot->served_at)
		slot->served_at = now;
}

/*
 * A child becomes active: no credit for the time it was idle.  Its service
 * is raised to the smallest of its active siblings'.
 */
static void
raise_service(BulkheadSlot *slot, BulkheadSlot *parent, TimestampTz now)
{
	int			c;
	bool		found = false;
	double		least = 0;

	for (c = parent->first_child; c >= 0; c = bulkhead_slot_at(c)->next_sibling)
	{
		BulkheadSlot *sibling = bulkhead_slot_at(c);
		double		service;

		if (sibling == slot || idle(sibling))
			continue;
		service = service_at(sibling, now);
		if (!found || service < least)
			least = service;
		found = true;
	}
	/* none active: where the last one to go idle had got to */
	if (!found)
		least = parent->service_floor;
	if (slot->service < least)
		slot->service = least;
}

/* The root of slot's tree (slot itself outside any tree) */
BulkheadSlot *
bulkhead_budget_root(BulkheadSlot *slot)
{
	while (slot->parent >= 0)
		slot = bulkhead_slot_at(slot->parent);
	return slot;
}

/* Is a permit free for a leaf: at every level of its path (see the header)? */
bool
bulkhead_budget_path_free(BulkheadSlot *slot)
{
	for (;;)
	{
		BulkheadSlot *parent = parent_of(slot);

		if (!bulkhead_budget_under_limit(slot))
			return false;
		if (parent == NULL)
			return true;
		if (!bulkhead_budget_room_at_parent(slot, parent))
			return false;
		slot = parent;
	}
}

/*
 * Apply a change of running (drunning) and of waiters (dsub) in the subtree
 * of slot to slot and every level above it: accumulate each child's service
 * before its count changes, raise a child that becomes active, keep each
 * budget's shared_used, and note a grant (granted_at) when grant.
 */
static void
propagate(BulkheadSlot *slot, int drunning, int dsub, bool grant,
		  TimestampTz now)
{
	for (; slot != NULL; slot = parent_of(slot))
	{
		BulkheadSlot *parent = parent_of(slot);
		int			borrowed = 0;
		bool		was_idle = idle(slot);

		if (parent != NULL)
		{
			borrowed = bulkhead_budget_borrowed(slot);
			accumulate(slot, now);
		}
		slot->running += drunning;
		slot->sub_queued += dsub;
		if (parent != NULL)
		{
			if (was_idle && !idle(slot))
				raise_service(slot, parent, now);
			else if (!was_idle && idle(slot) &&
					 slot->service > parent->service_floor)
				parent->service_floor = slot->service;
			parent->shared_used += bulkhead_budget_borrowed(slot) - borrowed;
		}
		if (grant)
			slot->granted_at = now;
		if (slot->running > slot->stats.peak_running)
			slot->stats.peak_running = slot->running;
		if (slot->running > slot->sample_peak_running)
			slot->sample_peak_running = slot->running;
	}
}

/*
 * A leaf of a tree (or a budget, for its own entries) changes: drunning
 * permits more or fewer, dqueued waiters more or fewer.  A waiter granted
 * is (+1, -1).  Every level of the path is changed here, under the tree's
 * lock.  With count (a grant, or a holder leaving: not a move), the budgets
 * above count it in their acquired or released (the leaf counts its own:
 * slot.c).
 */
void
bulkhead_budget_adjust(BulkheadSlot *slot, int drunning, int dqueued,
					   bool count, TimestampTz now)
{
	BulkheadSlot *budget;

	slot->queued += dqueued;
	if (slot->queued > slot->stats.peak_queued)
		slot->stats.peak_queued = slot->queued;
	if (slot->queued > slot->sample_peak_queued)
		slot->sample_peak_queued = slot->queued;
	propagate(slot, drunning, dqueued, drunning > 0, now);
	for (budget = parent_of(slot); count && drunning != 0 && budget != NULL;
		 budget = parent_of(budget))
	{
		if (drunning > 0)
			budget->stats.acquired++;
		else
			budget->stats.released++;
	}
}

/* Is budget on the path from slot up to its root (slot itself included)? */
static bool
on_path(const BulkheadSlot *budget, const BulkheadSlot *slot)
{
	for (; slot != NULL; slot = parent_of(slot))
		if (slot == budget)
			return true;
	return false;
}

/*
 * The worker moved a holder from leaf from to leaf to (runaway holders;
 * bulkhead_budget_adjust counted neither end): the budgets above from that
 * are not above to count it in moved_out, those above to that are not
 * above from in moved_in.  A budget above both keeps the permit in its
 * subtree: no move there.  So at every level acquired + moved_in =
 * released + moved_out + running.
 */
void
bulkhead_budget_count_move(BulkheadSlot *from, BulkheadSlot *to)
{
	BulkheadSlot *budget;

	for (budget = parent_of(from); budget != NULL; budget = parent_of(budget))
		if (!on_path(budget, to))
			budget->stats.moved_out++;
	for (budget = parent_of(to); budget != NULL; budget = parent_of(budget))
		if (!on_path(budget, from))
			budget->stats.moved_in++;
}

/* The candidate a budget's children offer, compared by the grant order */
typedef struct Candidate
{
	int			slotno;			/* whose head waiter; -1: none */
	bool		reserved;		/* the child offering it is under its
								 * reservation */
	double		service;		/* that child's service */
	TimestampTz granted_at;		/* that child's last grant */
	TimestampTz head_at;		/* the head waiter's arrival */
} Candidate;

static bool
better(const Candidate *a, const Candidate *b)
{
	if (b->slotno < 0)
		return true;
	if (a->reserved != b->reserved)
		return a->reserved;
	if (!a->reserved)
	{
		if (a->service != b->service)
			return a->service < b->service;
		if (a->granted_at != b->granted_at)
			return a->granted_at < b->granted_at;
	}
	return a->head_at < b->head_at;
}

/*
 * The slot in slot's subtree whose head waiter gets the next permit, with
 * slot itself admitted by the levels above it; -1 when none may be
 * granted.  *head_at is the arrival of that slot's head waiter (its
 * oldest), even when max_bypass has the slot serve its newest: max_bypass
 * reorders a slot's own waiters, not the order between siblings.  A
 * budget's own waiters (callers queued before it became one) come first.
 */
static int
pick(BulkheadSlot *slot, TimestampTz now, TimestampTz *head_at)
{
	Candidate	best = {-1};
	int			c;

	if (slot->sub_queued == 0 || !bulkhead_budget_under_limit(slot))
		return -1;
	/*
	 * Its own waiters first, unless it is keyed and every key that waits is
	 * at its cap: then none of them can be granted, and a budget's children
	 * (it may have become one while they waited) are looked at as if it had
	 * none; a leaf has no children and offers none.
	 */
	if (slot->queued > 0 &&
		(!slot->keyed || bulkhead_keys_next_waiter(slot, now) != NULL))
	{
		*head_at = entry_at(slot->waiters.head)->queued_at;
		return bulkhead_slot_index(slot);
	}
	for (c = slot->first_child; c >= 0; c = bulkhead_slot_at(c)->next_sibling)
	{
		BulkheadSlot *child = bulkhead_slot_at(c);
		Candidate	cand;

		if (child->sub_queued == 0 || !bulkhead_budget_room_at_parent(child, slot))
			continue;
		cand.slotno = pick(child, now, &cand.head_at);
		if (cand.slotno < 0)
			continue;
		cand.reserved = child->running < child->config.reserved;
		cand.service = service_at(child, now);
		cand.granted_at = child->granted_at;
		if (better(&cand, &best))
			best = cand;
	}
	if (best.slotno >= 0)
		*head_at = best.head_at;
	return best.slotno;
}

/*
 * The slot whose head waiter is served next in slot's tree, or -1 when no
 * waiter of the tree can be granted now.
 */
int
bulkhead_budget_pick(BulkheadSlot *slot, TimestampTz now)
{
	TimestampTz head_at;

	return pick(bulkhead_budget_root(slot), now, &head_at);
}

/*
 * The worker's load changes slot's reservation or weight (to those of
 * config): its parent's sums follow, and its service is accumulated under
 * the old values first.  Writes config->reserved and ->weight into the slot
 * (slot.c copies the rest).
 */
void
bulkhead_budget_reconfigure(BulkheadSlot *slot, const BulkheadConfig *config,
							TimestampTz now)
{
	BulkheadSlot *parent = parent_of(slot);
	int			borrowed;

	if (parent != NULL)
		accumulate(slot, now);
	borrowed = bulkhead_budget_borrowed(slot);
	if (parent != NULL)
		parent->reserved_sum += config->reserved - slot->config.reserved;
	slot->config.reserved = config->reserved;
	slot->config.weight = config->weight;
	if (parent != NULL)
		parent->shared_used += bulkhead_budget_borrowed(slot) - borrowed;
}

/* Take slot out of its parent's children, and its counts out of the path */
static void
detach(BulkheadSlot *slot, TimestampTz now)
{
	BulkheadSlot *parent = parent_of(slot);
	int16	   *link;

	if (parent == NULL)
		return;
	parent->shared_used -= bulkhead_budget_borrowed(slot);
	parent->reserved_sum -= slot->config.reserved;
	for (link = &parent->first_child; *link >= 0;
		 link = &bulkhead_slot_at(*link)->next_sibling)
	{
		if (*link == bulkhead_slot_index(slot))
		{
			*link = slot->next_sibling;
			break;
		}
	}
	slot->next_sibling = -1;
	slot->parent = -1;
	propagate(parent, -slot->running, -slot->sub_queued, false, now);
	slot->in_tree = slot->first_child >= 0;
	parent->in_tree = parent->parent >= 0 || parent->first_child >= 0;
}

/* Make slot a child of parent, its counts added to every level above */
static void
attach(BulkheadSlot *slot, BulkheadSlot *parent, TimestampTz now)
{
	int			c;
	bool		found = false;
	double		least = 0;

	/*
	 * Outside any tree only queued is kept (slot.c): a slot entering one,
	 * as the child or as the parent, has only its own waiters in its
	 * subtree.  (A budget's own waiters, queued before it got its first
	 * child, are served first by pick().)
	 */
	if (!bulkhead_in_tree(slot))
		slot->sub_queued = slot->queued;
	if (!bulkhead_in_tree(parent))
		parent->sub_queued = parent->queued;

	/* its service starts at the least of its new siblings' (no credit) */
	for (c = parent->first_child; c >= 0; c = bulkhead_slot_at(c)->next_sibling)
	{
		double		service = service_at(bulkhead_slot_at(c), now);

		if (!found || service < least)
			least = service;
		found = true;
	}
	slot->service = least;
	slot->served_at = now;

	slot->parent = (int16) bulkhead_slot_index(parent);
	slot->next_sibling = parent->first_child;
	parent->first_child = (int16) bulkhead_slot_index(slot);
	slot->in_tree = parent->in_tree = true;
	parent->reserved_sum += slot->config.reserved;
	parent->shared_used += bulkhead_budget_borrowed(slot);
	propagate(parent, slot->running, slot->sub_queued, false, now);
}

/* The root slot would have after new_parent[] (loader.c checked: no cycle) */
static int
new_root(const int *new_parent, int slotno)
{
	while (new_parent[slotno] >= 0)
		slotno = new_parent[slotno];
	return slotno;
}

/*
 * Make lock the lock in force of every slot of top's subtree; the caller
 * holds it, and the one in force before (so no backend holds either).
 */
static void
set_tree_lock(BulkheadSlot *top, LWLock *lock)
{
	int			c;

	top->lock = lock;
	for (c = top->first_child; c >= 0; c = bulkhead_slot_at(c)->next_sibling)
		set_tree_lock(bulkhead_slot_at(c), lock);
}

/*
 * Move every tree that re-parenting to new_parent[] changes, the one a
 * slot leaves and the one it joins, onto the transit lock, which the
 * caller holds: one tree at a time, holding its lock while its slots'
 * lock in force changes (a backend waiting for the old lock finds the
 * transit lock in force when it gets it, and waits for that).
 */
static void
move_onto_transit(const int *new_parent, LWLock *transit)
{
	int			i;

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = bulkhead_slot_at(i);
		BulkheadSlot *roots[2];
		int			k;

		if (new_parent[i] == slot->parent)
			continue;
		/* the tree it leaves, and the one it joins (as they are now) */
		roots[0] = bulkhead_budget_root(slot);
		roots[1] = bulkhead_budget_root(bulkhead_slot_at(new_root(new_parent, i)));
		for (k = 0; k < 2; k++)
		{
			LWLock	   *lock = roots[k]->own_lock;

			/* a root's lock in force is its own, or transit once moved */
			if (roots[k]->lock == transit)
				continue;
			LWLockAcquire(lock, LW_EXCLUSIVE);
			set_tree_lock(roots[k], transit);
			LWLockRelease(lock);
		}
	}
}

/*
 * Re-parenting carried permits with the subtrees it moved: a budget whose
 * subtree holds more than before (before[], the running of each slot on
 * the transit lock, the only ones that changed) counts them in moved_in,
 * one that holds fewer in moved_out, as for a holder moved by max_hold
 * (bulkhead_budget_count_move); a budget above both the old and the new
 * place sees no change.  So at every level acquired + moved_in = released
 * + moved_out + running still holds.  (A moved slot's own running does not
 * change: it takes its holders along.)
 */
static void
count_carried(const int *before, LWLock *transit)
{
	int			i;

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = bulkhead_slot_at(i);
		int			d;

		if (slot->lock != transit)
			continue;
		d = slot->running - before[i];
		if (d > 0)
			slot->stats.moved_in += d;
		else if (d < 0)
			slot->stats.moved_out += -d;
	}
}

/*
 * The worker's load (dir_lock held exclusively): make every in-use slot's
 * parent new_parent[slot] (-1: a root), which loader.c checked (no cycle,
 * depth at most BULKHEAD_MAX_DEPTH, free slots -1).  Every tree changed,
 * old and new, is first moved onto the transit lock, which is held from
 * start to end (move_onto_transit).  Then the subtrees move and the counts
 * of every level follow, under that one lock; last, each tree's slots get
 * the own lock of its root, one tree at a time.  To backends the whole
 * change is one step, and the worker holds at most three LWLocks, however
 * many trees change.  Returns whether anything changed (the caller then
 * serves every tree).  Throws only before it takes a lock (out of memory).
 */
bool
bulkhead_budget_restructure(const int *new_parent)
{
	int			nslots = bulkhead_shared->nslots;
	LWLock	   *transit = bulkhead_shared->transit_lock;
	bool		changed = false;
	int		   *before;
	TimestampTz now;
	int			i;

	for (i = 0; i < nslots; i++)
		if (new_parent[i] != bulkhead_slot_at(i)->parent)
			changed = true;
	if (!changed)
		return false;
	before = palloc(sizeof(int) * nslots);

	LWLockAcquire(transit, LW_EXCLUSIVE);
	move_onto_transit(new_parent, transit);
	/* only the worker changes the locks in force: read without a lock */
	for (i = 0; i < nslots; i++)
		before[i] = bulkhead_slot_at(i)->lock == transit ?
			bulkhead_slot_at(i)->running : 0;

	now = GetCurrentTimestamp();
	for (i = 0; i < nslots; i++)
		if (new_parent[i] != bulkhead_slot_at(i)->parent)
			detach(bulkhead_slot_at(i), now);
	for (i = 0; i < nslots; i++)
		if (new_parent[i] >= 0 && bulkhead_slot_at(i)->parent < 0)
			attach(bulkhead_slot_at(i), bulkhead_slot_at(new_parent[i]), now);
	count_carried(before, transit);

	/* every tree on the transit lock gets its root's own lock */
	for (i = 0; i < nslots; i++)
	{
		BulkheadSlot *root;

		if (bulkhead_slot_at(i)->lock != transit)
			continue;
		root = bulkhead_budget_root(bulkhead_slot_at(i));
		LWLockAcquire(root->own_lock, LW_EXCLUSIVE);
		set_tree_lock(root, root->own_lock);
		LWLockRelease(root->own_lock);
	}
	LWLockRelease(transit);
	pfree(before);
	return true;
}
