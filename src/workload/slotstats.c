/*-------------------------------------------------------------------------
 *
 * slotstats.c
 *	  A workload slot's statistics: counted beyond the permits' own path
 *	  (memory grants, lock holders served first), reset, restored at start,
 *	  and the history's peaks.
 *
 * Part of the slot's one writer (slot.h's header): each function expects
 * the caller to hold the slot's lock exclusively (restore: the postmaster,
 * alone) and never throws.  Called by grants.c (memory figures), the
 * permit and memory waits (boosts), views.c (stats reset), statsfile.c
 * (restore) and history.c (peaks); calls stats.c.
 *
 *-------------------------------------------------------------------------
 */
#include "workload/slotstats.h"

/* bulkhead_stats_reset: clear the cumulative figures; peaks start from now */
void
bulkhead_slot_reset_stats(BulkheadSlot *slot)
{
	bulkhead_stats_clear(&slot->stats);
	slot->stats.peak_running = slot->running;
	slot->stats.peak_queued = slot->queued;
}

/* Memory grants (1.4, grants.c): a wait began, ended or shrunk, per level */
void
bulkhead_slot_count_memory(BulkheadSlot *slot, bool began, bool waited,
						   uint64 wait_us, bool shrunk)
{
	for (;; slot = &bulkhead_shared->slots[slot->parent])
	{
		slot->stats.memory_waits += began ? 1 : 0;
		slot->stats.memory_shrunk += shrunk ? 1 : 0;
		if (waited)
			bulkhead_hist_add(&slot->stats.memory_wait_hist, wait_us);
		if (slot->parent < 0)
			break;
	}
}

/*
 * Priorities (1.5): a wait of this workload (for a permit, or for memory
 * charged to it) was served ahead of its queue as a lock holder (borrowed
 * false: counted in boosts, once per wait), or then served over the limit
 * (borrowed true: counted in borrowed); at every level of its tree.
 */
void
bulkhead_slot_count_boost(BulkheadSlot *slot, bool borrowed)
{
	for (;; slot = &bulkhead_shared->slots[slot->parent])
	{
		if (borrowed)
			slot->stats.borrowed++;
		else
			slot->stats.boosts++;
		if (slot->parent < 0)
			break;
	}
}

/*
 * At shared-memory creation (postmaster, nothing else runs yet): a
 * workload's figures saved at the last clean shutdown, in a slot that stays
 * undefined until the worker reads the table.
 */
void
bulkhead_slot_restore(BulkheadSlot *slot, const char *name,
					  const BulkheadStats *stats)
{
	slot->in_use = true;
	slot->defined = false;
	slot->restored = true;
	strlcpy(slot->name, name, NAMEDATALEN);
	slot->stats = *stats;
}

/* The history's sample (the worker): the peaks since the last, then now's */
void
bulkhead_slot_take_peaks(BulkheadSlot *slot, int *running, int *queued)
{
	*running = slot->sample_peak_running;
	*queued = slot->sample_peak_queued;
	slot->sample_peak_running = slot->running;
	slot->sample_peak_queued = slot->queued;
}

/* The worker found a holder of slot past max_hold (counted once per permit) */
void
bulkhead_slot_note_over_hold(BulkheadSlot *slot)
{
	slot->stats.over_hold++;
}
