/*-------------------------------------------------------------------------
 *
 * slotstats.h
 *	  A workload slot's statistics beyond the permits' own path (slotstats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_SLOTSTATS_H
#define BULKHEAD_SLOTSTATS_H

#include "shmem/shmem.h"

/* bulkhead_stats_reset(): clear the cumulative figures (caller holds the lock) */
extern void bulkhead_slot_reset_stats(BulkheadSlot *slot);
/* Memory grants (1.4): a wait began, ended or shrunk, at every level */
extern void bulkhead_slot_count_memory(BulkheadSlot *slot, bool began,
									   bool waited, uint64 wait_us, bool shrunk);
/*
 * A wait of this workload was served ahead of its queue as a lock holder
 * (borrowed false: once per wait), or then over the limit (borrowed true)
 */
extern void bulkhead_slot_count_boost(BulkheadSlot *slot, bool borrowed);
/* At shared-memory creation: the figures saved at the last clean shutdown */
extern void bulkhead_slot_restore(BulkheadSlot *slot, const char *name,
								  const BulkheadStats *stats);
/* The history's sample (history.c): the peaks since the last one */
extern void bulkhead_slot_take_peaks(BulkheadSlot *slot, int *running,
									 int *queued);

/* Runaway holders (the worker, runaway.c): a holder past max_hold */
extern void bulkhead_slot_note_over_hold(BulkheadSlot *slot);

#endif							/* BULKHEAD_SLOTSTATS_H */
