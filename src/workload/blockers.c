/*-------------------------------------------------------------------------
 *
 * blockers.c
 *	  Whom the waiters of a workload wait for: its holders, or in a tree of
 *	  budgets the holders of the subtree where a permit is missing; their
 *	  stamp, and every holder of a subtree.
 *
 * Reads only, under the lock of the slot's tree (shared at least).  Called
 * by slot.c (the deadlock verdict's last check), waitgraph.c (the wait
 * graph, bulkhead_blocking_pids) and holdersample.c (an adaptive budget's
 * holders); calls budget.c (the tree's shape).
 *
 *-------------------------------------------------------------------------
 */
#include "workload/blockers.h"
#include "workload/budget.h"
#include "workload/entry_list.h"

/*
 * The waiters of a leaf wait for the holders whose release could give them
 * a permit: those of the subtree of the lowest level of the path at which a
 * permit is not free (that level at its limit: its subtree; its parent's
 * shared part full: the parent's subtree, where the borrowers are).  When
 * the path is free (a grant in flight), the leaf's own holders, as outside
 * a tree.  Returns that slot's index.
 *
 * The subtree may hold a few permits whose release would only refill a
 * sibling's reservation.  For deadlock detection (waitgraph.c) an extra
 * holder can only delay a report, never make a false one: a waiter is
 * stuck only when all of its holders are, and reported only when all of
 * them lead back to it.
 */
int
bulkhead_budget_blocker(BulkheadSlot *slot)
{
	BulkheadSlot *level = slot;

	for (;;)
	{
		BulkheadSlot *parent = level->parent >= 0 ? bulkhead_slot_at(level->parent) : NULL;

		if (!bulkhead_budget_under_limit(level))
			return bulkhead_slot_index(level);
		if (parent == NULL)
			return bulkhead_slot_index(slot);
		if (!bulkhead_budget_room_at_parent(level, parent))
			return bulkhead_slot_index(parent);
		level = parent;
	}
}

/* Collecting a waiter's holders: each backend once */
typedef struct HolderList
{
	int		   *pids;
	int		   *procnos;
	int			n;
	bool		dedupe;			/* in a tree, a backend may hold permits of
								 * several leaves */
} HolderList;

static void
add_holder(BulkheadEntry *holder, void *arg)
{
	HolderList *list = arg;
	int			procno = bulkhead_entry_procno(holder);
	int			i;

	for (i = 0; list->dedupe && i < list->n; i++)
		if (list->procnos[i] == procno)
			return;
	list->pids[list->n] = holder->pid;
	list->procnos[list->n++] = procno;
}

/*
 * The backends that slot's waiters wait for, each once, into pids and
 * procnos (room for one per PGPROC): outside a tree, its holders; in a
 * tree, see bulkhead_budget_blocker.  Returns how many.
 */
int
bulkhead_budget_blockers(BulkheadSlot *slot, int *pids, int *procnos)
{
	HolderList	list = {pids, procnos, 0, bulkhead_in_tree(slot)};

	bulkhead_budget_foreach_holder(bulkhead_slot_at(bulkhead_budget_blocker(slot)),
								   add_holder, &list);
	return list.n;
}

/* Every entry held in top's subtree, top's own too (depth-first) */
void
bulkhead_budget_foreach_holder(BulkheadSlot *top, BulkheadHolderFn fn,
							   void *arg)
{
	BulkheadEntry *entry;
	int			c;

	entry_list_foreach(entry, &top->holders)
		fn(entry, arg);
	for (c = top->first_child; c >= 0; c = bulkhead_slot_at(c)->next_sibling)
		bulkhead_budget_foreach_holder(bulkhead_slot_at(c), fn, arg);
}

/*
 * A value that changes when the holders change (who holds, and since when):
 * the deadlock check compares what it saw with what is.  Caller holds
 * slot->lock, shared at least.
 */
static inline uint64
holder_stamp(BulkheadEntry *entry)
{
	return bulkhead_mix64(((uint64) entry_index(entry) << 1 | 1) ^
						  bulkhead_mix64((uint64) entry->since));
}

static void
add_holder_stamp(BulkheadEntry *entry, void *arg)
{
	*(uint64 *) arg += holder_stamp(entry);
}

uint64
bulkhead_holders_stamp(BulkheadSlot *slot)
{
	BulkheadEntry *entry;
	uint64		stamp = 0;

	/* in a tree: the holders its waiters wait for (budget.c) */
	if (bulkhead_in_tree(slot))
	{
		bulkhead_budget_foreach_holder(bulkhead_slot_at(bulkhead_budget_blocker(slot)),
									   add_holder_stamp, &stamp);
		return stamp;
	}
	/* a sum: independent of the order of the list */
	entry_list_foreach(entry, &slot->holders)
		stamp += holder_stamp(entry);
	return stamp;
}
