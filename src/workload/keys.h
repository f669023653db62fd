/*-------------------------------------------------------------------------
 *
 * keys.h
 *	  Tenants: the keys of a workload in use, their caps, and the order in
 *	  which they are served (keys.c).
 *
 * keys.c writes a slot's tenant fields, the keys in use and the per-entry
 * key links (shmem.h has the table of owners); slot.c, the owner of the
 * entries, calls it whenever an entry of a keyed slot joins or leaves its
 * lists, and asks it which waiter is served next.  Every function expects
 * the caller to hold the slot's lock (in force) exclusively, except
 * bulkhead_keys_name, which needs it shared; none throws.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_KEYS_H
#define BULKHEAD_KEYS_H

#include "shmem/shmem.h"

/* A key not found among slot's keys in use */
#define BULKHEAD_NO_KEY			(-1)

static inline BulkheadKey *
bulkhead_key_at(int32 k)
{
	return &bulkhead_shared->keys[k];
}

/* The key of entry (an index; BULKHEAD_NO_KEY for none) */
static inline int32
bulkhead_entry_key(const BulkheadEntry *entry)
{
	return bulkhead_shared->entry_keys[entry - bulkhead_shared->entries].key;
}

/*
 * May key k of slot be granted one more permit (under max_running_per_key)?
 * In shadow mode the cap, a limit of the workload's own, is not enforced.
 */
static inline bool
bulkhead_key_under_cap(const BulkheadSlot *slot, int32 k)
{
	return k == BULKHEAD_NO_KEY || slot->config.shadow ||
		slot->config.max_running_per_key <= 0 ||
		bulkhead_key_at(k)->group.running < slot->config.max_running_per_key;
}

/* May one more caller of key k of slot wait (under max_queued_per_key)? */
static inline bool
bulkhead_key_may_queue(const BulkheadSlot *slot, int32 k)
{
	return k == BULKHEAD_NO_KEY || slot->config.max_queued_per_key < 0 ||
		bulkhead_key_at(k)->group.queued < slot->config.max_queued_per_key;
}

/* Has key k of slot callers waiting (FIFO within a key)? */
static inline bool
bulkhead_key_has_waiters(int32 k)
{
	return k != BULKHEAD_NO_KEY && bulkhead_key_at(k)->group.queued > 0;
}

extern uint32 bulkhead_key_hash(const char *key);
extern int32 bulkhead_keys_find(const BulkheadSlot *slot, const char *key,
								uint32 hash);
extern int32 bulkhead_keys_create(BulkheadSlot *slot, int slotno,
								  const char *key, uint32 hash,
								  TimestampTz now);
extern void bulkhead_keys_link(BulkheadSlot *slot, BulkheadEntry *entry,
							   int32 k, bool granted, TimestampTz now);
extern void bulkhead_keys_unlink(BulkheadSlot *slot, BulkheadEntry *entry,
								 TimestampTz now);
extern int	bulkhead_keys_drop_idle(BulkheadSlot *slot);
extern BulkheadEntry *bulkhead_keys_next_waiter(const BulkheadSlot *slot,
												TimestampTz now);
extern void bulkhead_keys_granted(BulkheadSlot *slot, BulkheadEntry *entry,
								  TimestampTz now);

#endif							/* BULKHEAD_KEYS_H */
