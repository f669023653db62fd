/*-------------------------------------------------------------------------
 *
 * slot.h
 *	  A workload slot's state and the permit entries in its lists (slot.c).
 *
 * slot.c is the only writer of a slot's name and definition, its counts,
 * its holders and waiters lists and the entries linked into them, its
 * limit and its statistics (shmem.h has the table of owners).  Callers
 * hold the locks each function names: a slot's lock exclusively for every
 * change (dir_lock too for the directory), so that a backend's acquire or
 * release takes one lock once.  Nothing here throws.
 *
 * Called by admit.c (linking an admitted entry), local.c and permit.c (a
 * backend's own permits), waitgraph.c (holders stamp), deadlockfree.c (waking
 * waiters), loader.c and adaptive.c (definitions and limits), worker.c
 * (the reaper), views.c (stats reset), statsfile.c (restore), history.c
 * (the peaks of an interval).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_SLOT_H
#define BULKHEAD_SLOT_H

#include "workload/budget.h"
#include "workload/entry_list.h"
#include "shmem/shmem.h"

#include "miscadmin.h"

/*
 * Backends granted a permit under a slot lock, to be woken once the lock is
 * released: a waiter woken while the lock is still held would run, find the
 * lock taken and sleep again on it, two context switches per hand-off.
 */
#define BULKHEAD_WAKE_BATCH		8
typedef struct BulkheadWakeups
{
	int			n;
	int			procnos[BULKHEAD_WAKE_BATCH];
} BulkheadWakeups;

/* Caller holds slot->lock.  Is slot the defined workload called name? */
static inline bool
bulkhead_slot_matches(const BulkheadSlot *slot, const char *name)
{
	return slot->in_use && slot->defined && strcmp(slot->name, name) == 0;
}

/* A backend's acquire, wait and release (caller holds slot->lock) */
extern void bulkhead_slot_link_slow(BulkheadSlot *slot, BulkheadEntry *entry,
									int32 k, bool granted, TimestampTz now);
extern void bulkhead_slot_count_grant(BulkheadSlot *slot, BulkheadEntry *entry);
extern void bulkhead_slot_time_out(BulkheadSlot *slot, BulkheadEntry *entry);
extern bool bulkhead_slot_release(BulkheadSlot *slot, BulkheadEntry *entry,
								  TimestampTz now, BulkheadWakeups *wakeups,
								  bool moved);
extern void bulkhead_slot_note_moved(BulkheadSlot *slot, BulkheadEntry *entry,
									 const char *from);
extern bool bulkhead_slot_cancel_wait(BulkheadSlot *slot, BulkheadEntry *entry,
									  BulkheadWakeups *wakeups);
extern bool bulkhead_slot_end_wait_deadlocked(BulkheadSlot *slot,
											  BulkheadEntry *entry,
											  uint64 holders_stamp,
											  BulkheadWakeups *wakeups,
											  bool *drained);
extern void bulkhead_slot_drop_entry(BulkheadSlot *slot, BulkheadEntry *entry);

/*
 * A queued lock holder is served first (1.5): this backend's waiting entry
 * is served ahead of its queue (ahead), or no longer; or granted over the
 * limit (borrow).  With count, the boost is counted (once per wait).  Both
 * return false, changing nothing, when the entry no longer waits.
 */
extern bool bulkhead_slot_boost(BulkheadSlot *slot, BulkheadEntry *entry,
								bool ahead, bool count);
extern bool bulkhead_slot_borrow(BulkheadSlot *slot, BulkheadEntry *entry,
								 bool count, TimestampTz now);

/* May a waiter of slot borrow now (caller holds slot->lock)?  One at a time */
static inline bool
bulkhead_slot_may_borrow(const BulkheadSlot *slot)
{
	return slot->borrowed_now == 0;
}

/*
 * Before admission, this backend's free entry takes the importance its
 * wait will carry, without a boost.  No lock: the entry is free, and the
 * slot lock taken to link it orders these writes before any read (shmem.h).
 */
static inline void
bulkhead_slot_prepare_prio(BulkheadEntry *entry, int importance)
{
	BulkheadEntryPrio *prio = bulkhead_entry_prio(entry);

	Assert(entry->state == BULKHEAD_ENTRY_FREE);
	prio->importance = (uint8) importance;
	prio->boost = BULKHEAD_BOOST_NONE;
}

/*
 * Does this backend (PGPROC number procno) hold a borrowed permit?  Read
 * without a lock: only the owner sets BORROWED on its entries, and only
 * the freeing of the entry clears it, so the owner reads its own writes.
 */
static inline bool
bulkhead_backend_has_borrowed(int procno)
{
	BulkheadEntry *entries = bulkhead_backend_entries(procno);
	int			i;

	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
		if (entries[i].state == BULKHEAD_ENTRY_GRANTED &&
			bulkhead_entry_prio(&entries[i])->boost == BULKHEAD_BOOST_BORROWED)
			return true;
	return false;
}

/* Serving the queue, and waking whom it served (after the lock) */
extern void bulkhead_slot_serve(BulkheadSlot *slot, BulkheadWakeups *wakeups);
extern void bulkhead_wake_all(BulkheadWakeups *wakeups);
extern int	bulkhead_slot_wake_waiters(BulkheadSlot *slot, bool all);

static inline void
bulkhead_wake(BulkheadWakeups *wakeups)
{
	if (wakeups->n > 0)
		bulkhead_wake_all(wakeups);
}

/* Runaway holders (the worker, runaway.c) */
extern void bulkhead_slot_move(BulkheadSlot *from, BulkheadSlot *to, int tono,
							   BulkheadEntry *entry, TimestampTz now,
							   BulkheadWakeups *wakeups);

/* The worker's and the SQL functions' changes */
extern void bulkhead_slot_set_limit(BulkheadSlot *slot, int limit);
extern void bulkhead_slot_define(BulkheadSlot *slot, const char *name,
								 const BulkheadConfig *config, int limit);
extern void bulkhead_slot_undefine(BulkheadSlot *slot);
extern int	bulkhead_slot_reap(BulkheadSlot *slot);

/*
 * entry, free, starts holding or waiting (of key k: keyed slots only).
 * slot.c's, inline for admission (admit.c): a workload outside any tree
 * and without keys links its entry without a call.
 */
static inline void
bulkhead_slot_link(BulkheadSlot *slot, int slotno, BulkheadEntry *entry,
				   BulkheadScope scope, BulkheadEntryState state, int32 k,
				   TimestampTz now)
{
	Assert(entry->state == BULKHEAD_ENTRY_FREE);
	entry->workload = slotno;
	entry->pid = MyProcPid;
	entry->scope = scope;
	entry->state = state;
	entry->queued_at = now;
	entry->since = now;
	/* 1.5: a waiter with a priority makes its queue be served by rank */
	if (state == BULKHEAD_ENTRY_WAITING &&
		unlikely(bulkhead_prio_marked(bulkhead_entry_prio(entry))))
		slot->prio_waiting++;
	if (unlikely(bulkhead_in_tree(slot) | slot->keyed))
		bulkhead_slot_link_slow(slot, entry, k, state == BULKHEAD_ENTRY_GRANTED,
								now);
	else if (state == BULKHEAD_ENTRY_GRANTED)
	{
		entry_list_push_tail(&slot->holders, entry);
		bulkhead_slot_running_up(slot);
	}
	else
	{
		entry_list_push_tail(&slot->waiters, entry);
		bulkhead_slot_queued_up(slot);
	}
}

#endif							/* BULKHEAD_SLOT_H */
