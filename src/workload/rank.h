/*-------------------------------------------------------------------------
 *
 * rank.h
 *	  Importance within a queue (1.5): the waiter of a list that is served
 *	  next by rank, and the entries' priorities (rank.c).
 *
 * A queue whose slot has prio_waiting > 0 (some waiter carries an
 * importance other than normal, or a lock holder's boost) is served by
 * rank (importance.h): the highest rank first; among the waiters of the
 * top rank, the queue's own rule (arrival, or max_bypass's newest unless
 * the oldest of them has waited max_bypass).  While prio_waiting is 0 no
 * one calls here: the queue keeps its order at no added cost.
 *
 * Reads the entries of a list under the lock of the slot they are linked
 * into (the caller holds it).  Owns no state.  Called by budget.h's
 * bulkhead_next_waiter (a workload's queue) and keys.c (a key's queue).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_RANK_H
#define BULKHEAD_RANK_H

#include "workload/entry_list.h"
#include "shmem/shmem.h"

#include "datatype/timestamp.h"

/* An entry's priorities (shmem.h: protected like the entry) */
static inline BulkheadEntryPrio *
bulkhead_entry_prio(const BulkheadEntry *entry)
{
	return &bulkhead_shared->entry_prio[entry - bulkhead_shared->entries];
}

/* Does a waiter with these priorities count in its slot's prio_waiting? */
static inline bool
bulkhead_prio_marked(const BulkheadEntryPrio *prio)
{
	return prio->importance != BULKHEAD_IMPORTANCE_NORMAL ||
		prio->boost != BULKHEAD_BOOST_NONE;
}

/*
 * The waiter served next of the list that starts at entry index head, in
 * arrival order: linked by the entries' own links (a slot's waiters), or
 * with key_links by shared->entry_keys[] (a key group's waiters).  Caller
 * holds the lock of the slot the list belongs to.
 */
extern BulkheadEntry *bulkhead_rank_next(int32 head, bool key_links,
										 int64 max_bypass_us, TimestampTz now);

#endif							/* BULKHEAD_RANK_H */
