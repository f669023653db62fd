/*-------------------------------------------------------------------------
 *
 * rank.c
 *	  Importance within a queue (1.5): the waiter served next by rank.
 *
 * One walk of the queue in arrival order: the top rank, the oldest waiter
 * of that rank and the newest.  The oldest is served, or with max_bypass
 * the newest unless the oldest has waited max_bypass (the rule of
 * bulkhead_next_waiter, applied to the waiters of the top rank).  A walk
 * is O(waiters), paid only while some waiter of the queue is not (normal,
 * no boost): the slot's prio_waiting says so (slot.c keeps it exact).
 *
 * Aging is the rank function's (importance.h): a low waiter rises one step
 * per bulkhead.aging_interval, so after two intervals it ranks as high,
 * and among the high it is older than every later arrival: it is served
 * before any waiter that arrived after it, except a boosted lock holder.
 *
 * Reads entries under the caller's slot lock.  Owns no state.  Calls
 * importance.h's rank (its aging setting).
 *
 *-------------------------------------------------------------------------
 */
#include "workload/rank.h"
#include "workload/importance.h"

/* The next entry after e in its list (see bulkhead_rank_next) */
static inline int32
next_of(int32 e, bool key_links)
{
	return key_links ? bulkhead_shared->entry_keys[e].next : entry_at(e)->next;
}

BulkheadEntry *
bulkhead_rank_next(int32 head, bool key_links, int64 max_bypass_us,
				   TimestampTz now)
{
	BulkheadEntry *oldest = NULL;
	BulkheadEntry *newest = NULL;
	int			top = -1;
	int32		e;

	for (e = head; e != BULKHEAD_NO_ENTRY; e = next_of(e, key_links))
	{
		BulkheadEntry *entry = entry_at(e);
		BulkheadEntryPrio *prio = bulkhead_entry_prio(entry);
		int			rank = bulkhead_importance_rank(prio->importance,
													prio->boost,
													entry->queued_at, now);

		if (rank > top)
		{
			top = rank;
			oldest = entry;
		}
		if (rank == top)
			newest = entry;
	}
	if (oldest == NULL)
		return NULL;
	if (max_bypass_us == 0 || now - oldest->queued_at >= max_bypass_us)
		return oldest;
	return newest;
}
