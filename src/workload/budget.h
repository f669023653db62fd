/*-------------------------------------------------------------------------
 *
 * budget.h
 *	  Shared budgets: trees of workloads, the counts of every level, the
 *	  order of grants between children, and re-parenting (budget.c).
 *
 * budget.c writes the tree fields of the slots (shmem.h has the table) and
 * the running counts of budgets; slot.c, the owner of the entries, calls it
 * whenever a leaf's counts change, and asks it which leaf's next waiter to
 * serve (bulkhead_next_waiter: the head, or with max_bypass the newest).
 * Every function expects the caller to hold the tree's lock (the lock in
 * force of any of its slots) exclusively, except
 * bulkhead_budget_restructure, which takes the locks itself; none throws
 * while it holds a lock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_BUDGET_H
#define BULKHEAD_BUDGET_H

#include "workload/entry_list.h"
#include "workload/keys.h"
#include "workload/rank.h"
#include "shmem/shmem.h"

/* How deep a tree may be: a root and three levels under it */
#define BULKHEAD_MAX_DEPTH		4

static inline BulkheadSlot *
bulkhead_slot_at(int slotno)
{
	return &bulkhead_shared->slots[slotno];
}

static inline int
bulkhead_slot_index(const BulkheadSlot *slot)
{
	return (int) (slot - bulkhead_shared->slots);
}

/* Is slot in a tree of budgets (it has a parent or children)? */
static inline bool
bulkhead_in_tree(const BulkheadSlot *slot)
{
	return slot->in_tree;
}

/* Permits a child holds now beyond its reservation (0 for a root) */
static inline int
bulkhead_budget_borrowed(const BulkheadSlot *slot)
{
	if (slot->parent < 0 || slot->running <= slot->config.reserved)
		return 0;
	return slot->running - slot->config.reserved;
}

/* Has the shared part of budget parent room for one more borrowed permit? */
static inline bool
bulkhead_budget_shared_room(const BulkheadSlot *parent)
{
	return parent->config.shadow ||
		parent->shared_used < parent->current_limit - parent->reserved_sum;
}

/* May slot (one more permit of its subtree) take one at its parent's level? */
static inline bool
bulkhead_budget_room_at_parent(const BulkheadSlot *slot, const BulkheadSlot *parent)
{
	return slot->running < slot->config.reserved ||
		bulkhead_budget_shared_room(parent);
}

static inline bool
bulkhead_budget_under_limit(const BulkheadSlot *slot)
{
	return slot->config.shadow || slot->running < slot->current_limit;
}

/*
 * The waiter of slot (which has some) that is served next.  The head, in
 * arrival order; with max_bypass, the newest (the process that ran last,
 * whose memory is still warm in the caches), unless the head has waited
 * max_bypass: then the head, so that none is passed over for longer.  In a
 * keyed workload (tenants), the next of the least served key (keys.c), or
 * NULL when every key that waits is at its cap.  While some waiter carries
 * an importance or a boost (prio_waiting), the same rule among the waiters
 * of the top rank (rank.c).
 */
static inline BulkheadEntry *
bulkhead_next_waiter(const BulkheadSlot *slot, TimestampTz now)
{
	BulkheadEntry *head;

	if (unlikely(slot->keyed))
		return bulkhead_keys_next_waiter(slot, now);
	/* 1.5: some waiter carries an importance or a boost: by rank (rank.c) */
	if (unlikely(slot->prio_waiting > 0))
		return bulkhead_rank_next(slot->waiters.head, false,
								  slot->config.max_bypass_us, now);
	head = entry_at(slot->waiters.head);

	if (likely(slot->config.max_bypass_us == 0) ||
		now - head->queued_at >= slot->config.max_bypass_us)
		return head;
	return entry_at(slot->waiters.tail);
}

extern BulkheadSlot *bulkhead_budget_root(BulkheadSlot *slot);
extern bool bulkhead_budget_path_free(BulkheadSlot *slot);
extern void bulkhead_budget_adjust(BulkheadSlot *slot, int drunning,
								   int dqueued, bool count, TimestampTz now);
extern int	bulkhead_budget_pick(BulkheadSlot *slot, TimestampTz now);
extern void bulkhead_budget_reconfigure(BulkheadSlot *slot,
										const BulkheadConfig *old,
										TimestampTz now);
extern void bulkhead_budget_count_move(BulkheadSlot *from, BulkheadSlot *to);

/* The worker's load: make the trees those of new_parent[] (slot indexes) */
extern bool bulkhead_budget_restructure(const int *new_parent);

#endif							/* BULKHEAD_BUDGET_H */
