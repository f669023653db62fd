/*-------------------------------------------------------------------------
 *
 * local.h
 *	  This backend's own permits, its wait, and when they end (local.c).
 *
 * Owns backend-local state only: bulkhead_local[] (one element per shared
 * permit entry of this backend, no lock needed), the count of held ones,
 * the index of the entry it waits on, and the transaction, subtransaction
 * and exit callbacks that end permits.  The shared entries themselves are
 * changed through slot.c.  Called by permit.c, permitfuncs.c, transparent.c
 * and bulkhead.c (init).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_LOCAL_H
#define BULKHEAD_LOCAL_H

#include "guards/localpermit.h"
#include "shmem/shmem.h"

#include "miscadmin.h"
#include "storage/proc.h"

extern BulkheadLocalPermit *bulkhead_local;
extern int	bulkhead_nheld;		/* how many of bulkhead_local[] are held */
extern BulkheadCaps bulkhead_caps_in_force;	/* lanes' caps over those held */
extern void bulkhead_local_caps_changed(void);

/* This backend's shared entry for local index li */
static inline BulkheadEntry *
bulkhead_my_entry(int li)
{
	return &bulkhead_backend_entries(BULKHEAD_MY_PROCNO)[li];
}

extern void bulkhead_local_init(void);
extern void bulkhead_backend_init(void);
extern int	bulkhead_free_local_index(void);
extern int	bulkhead_local_index_by_slot(int slot);
extern int	bulkhead_local_index_by_name(const char *name);
extern int	bulkhead_local_auto_index(void);
extern void bulkhead_local_record_grant(int li, const BulkheadSlot *slot,
										int slotno, BulkheadScope scope);

/* The wait under way: the local index of its entry, or -1 */
extern int	bulkhead_wait_index(void);
extern void bulkhead_set_wait_index(int li, int slotno);
extern void bulkhead_wait_cleanup(void);
extern bool bulkhead_end_wait_deadlocked(uint64 holders_stamp);

extern void bulkhead_release_entry(int li);
extern void bulkhead_release_entry_moved(int li);
extern int	bulkhead_release_session_permits(void);
extern void bulkhead_discard_session_permits(void);
extern void bulkhead_keep_auto_over_commits(bool keep);

/*
 * Take the lock of the slot that entry (this backend's) is linked into now:
 * the worker may move a holder to another workload (runaway.c) while we wait
 * for the lock, so the field is read again once it is held.  Returns the
 * slot, its lock held exclusively, and its index in *slotno.
 */
static inline BulkheadSlot *
bulkhead_lock_entry_slot(BulkheadEntry *entry, int *slotno)
{
	for (;;)
	{
		int			w = *((volatile int16 *) &entry->workload);
		BulkheadSlot *slot = &bulkhead_shared->slots[w];

		Assert(w >= 0);
		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
		if (likely(entry->workload == w))
		{
			*slotno = w;
			return slot;
		}
		LWLockRelease(slot->lock);
	}
}

#endif							/* BULKHEAD_LOCAL_H */
