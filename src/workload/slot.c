/*-------------------------------------------------------------------------
 *
 * slot.c
 *	  The only writer of a workload slot: its definition, limit, counts,
 *	  holders and waiters lists, the permit entries linked into them, and
 *	  its statistics.
 *
 * Every function here expects the caller to hold the slot's lock
 * exclusively (and the directory lock for a change of name or in_use, see
 * shmem.h) and never throws, so that no error can leave a slot half
 * changed: decisions are made under the lock, errors are raised by the
 * caller after it has released the lock, when the slot is whole again.
 *
 * A release hands its permit straight to the next waiter, the head (or
 * with max_bypass the newest, see budget.h): the entry moves from waiters
 * to holders and the running count does not drop; then it sets that one
 * backend's latch: bulkhead_slot_serve records whom to wake, and the caller
 * wakes them once the lock is released.  The waiter only looks at its
 * entry's state, so a newcomer that finds waiters never takes a permit
 * before them; it queues (and with max_bypass is served first).
 *
 * In a keyed workload (tenants) each entry also belongs to its key's group
 * (keys.c), which every link, unlink and grant here keeps up to date; the
 * next waiter is then the least served key's.  1.5: while some waiter
 * has a priority (prio_waiting, kept exact here), the first by rank (rank.c).
 *
 * Called by admit.c (linking an admitted entry), local.c and permit.c (a
 * backend's own permits), waitgraph.c (holders stamp), deadlockfree.c (waking
 * waiters), loader.c and adaptive.c (definitions and limits), worker.c
 * (the reaper), views.c (stats reset), statsfile.c (restore), grants.c
 * (memory grants' figures) and history.c (peaks); calls stats.c, budget.c,
 * blockers.c, keys.c, rank.c and slotstats.c.
 *
 *-------------------------------------------------------------------------
 */
#include "workload/slot.h"
#include "workload/budget.h"
#include "workload/blockers.h"
#include "workload/entry_list.h"
#include "workload/keys.h"
#include "workload/rank.h"
#include "workload/slotstats.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

/*
 * Hand free permits to the waiters, oldest first, or newest first within
 * max_bypass (bulkhead_next_waiter); in a tree of budgets: the tree's, in
 * the order budget.c gives.  With wakeups given
 * (initialised to n = 0), the first BULKHEAD_WAKE_BATCH granted are recorded
 * there for the caller to wake with bulkhead_wake() after releasing the
 * lock; any others, and all of them when wakeups is NULL (rare paths: limit
 * raised, reaper), are woken at once.
 */
static inline void
waiter_to_holders(BulkheadSlot *slot, BulkheadEntry *entry, TimestampTz now)
{
	if (unlikely(slot->keyed))
		bulkhead_keys_granted(slot, entry, now);
	entry_list_delete(&slot->waiters, entry);
	if (unlikely(slot->prio_waiting > 0) &&
		bulkhead_prio_marked(bulkhead_entry_prio(entry)))
		slot->prio_waiting--;
	entry->state = BULKHEAD_ENTRY_GRANTED;
	entry->since = now;
	entry_list_push_tail(&slot->holders, entry);
	if (bulkhead_in_tree(slot))
		bulkhead_budget_adjust(slot, 1, -1, true, now);
	else
	{
		slot->queued--;
		bulkhead_slot_running_up(slot);
	}
}

static bool
grant_next(BulkheadSlot *slot, TimestampTz now, BulkheadWakeups *wakeups)
{
	BulkheadEntry *entry = bulkhead_next_waiter(slot, now);

	if (entry == NULL)
		return false;			/* keyed: every waiting key at its cap */
	waiter_to_holders(slot, entry, now);
	/* the state is set before the latch (see latch.h) */
	if (wakeups != NULL && wakeups->n < BULKHEAD_WAKE_BATCH)
		wakeups->procnos[wakeups->n++] = bulkhead_entry_procno(entry);
	else
		SetLatch(&GetPGProcByNumber(bulkhead_entry_procno(entry))->procLatch);
	return true;
}

void
bulkhead_slot_serve(BulkheadSlot *slot, BulkheadWakeups *wakeups)
{
	TimestampTz now = 0;

	if (bulkhead_in_tree(slot))
	{
		int			next;

		/* budget.c picks, at every level, whose waiter is next */
		now = GetCurrentTimestamp();
		while ((next = bulkhead_budget_pick(slot, now)) >= 0)
			(void) grant_next(bulkhead_slot_at(next), now, wakeups);
		return;
	}
	while (!entry_list_is_empty(&slot->waiters) &&
		   (slot->config.shadow || slot->running < slot->current_limit))
	{
		if (now == 0)
			now = GetCurrentTimestamp();
		if (!grant_next(slot, now, wakeups))
			break;
	}
}

/*
 * Wake the backends bulkhead_slot_serve() recorded; call after releasing
 * the slot lock.  A woken backend that has meanwhile seen its grant, or
 * even exited, takes at worst a spurious wakeup, which every latch wait
 * tolerates.
 */
void
bulkhead_wake_all(BulkheadWakeups *wakeups)
{
	int			i;

	for (i = 0; i < wakeups->n; i++)
		SetLatch(&GetPGProcByNumber(wakeups->procnos[i])->procLatch);
	wakeups->n = 0;
}

/*
 * Set the latch of every waiter (all), or of the head waiter only: the
 * deadlock check's waiters that sleep on a proof are told it is gone.
 * Returns the head waiter's PGPROC number, or -1 when nobody waits.
 */
int
bulkhead_slot_wake_waiters(BulkheadSlot *slot, bool all)
{
	BulkheadEntry *entry;
	int			head = -1;

	entry_list_foreach(entry, &slot->waiters)
	{
		int			procno = bulkhead_entry_procno(entry);

		SetLatch(&GetPGProcByNumber(procno)->procLatch);
		if (head < 0)
			head = procno;
		if (!all)
			break;
	}
	return head;
}

/*
 * In a tree, or a keyed slot, an entry leaves its list: its key's counts
 * and every level's follow
 */
static pg_noinline void
unlink_slow(BulkheadSlot *slot, BulkheadEntry *entry)
{
	bool		waiting = entry->state == BULKHEAD_ENTRY_WAITING;
	TimestampTz now = GetCurrentTimestamp();

	if (slot->keyed)
		bulkhead_keys_unlink(slot, entry, now);
	entry_list_delete(waiting ? &slot->waiters : &slot->holders, entry);
	if (bulkhead_in_tree(slot))
		bulkhead_budget_adjust(slot, waiting ? 0 : -1, waiting ? -1 : 0, true,
							   now);
	else if (waiting)
		slot->queued--;
	else
		slot->running--;
}

/* Remove an entry from its list and free it (with prio_waiting, no boost) */
static inline void
unlink_entry(BulkheadSlot *slot, BulkheadEntry *entry)
{
	if (unlikely(slot->prio_waiting > 0) &&
		entry->state == BULKHEAD_ENTRY_WAITING &&
		bulkhead_prio_marked(bulkhead_entry_prio(entry)))
		slot->prio_waiting--;
	if (unlikely(bulkhead_entry_prio(entry)->boost == BULKHEAD_BOOST_BORROWED))
		slot->borrowed_now--;
	bulkhead_entry_prio(entry)->boost = BULKHEAD_BOOST_NONE;
	if (unlikely(bulkhead_in_tree(slot) | slot->keyed))
		unlink_slow(slot, entry);
	else if (entry->state == BULKHEAD_ENTRY_WAITING)
	{
		entry_list_delete(&slot->waiters, entry);
		slot->queued--;
	}
	else
	{
		entry_list_delete(&slot->holders, entry);
		slot->running--;
	}
	entry->state = BULKHEAD_ENTRY_FREE;
	entry->workload = -1;
	entry->pid = 0;
}

/*
 * Did the last permit of a deleted workload just go, while the worker has
 * rows waiting for a free slot, or while the workload is still in a tree
 * (the worker takes it out)?  Then the caller asks the worker to load now
 * (bulkhead_request_reload) rather than at its next poll.
 */
static bool
slot_drained(BulkheadSlot *slot)
{
	return !slot->defined && slot->running == 0 && slot->queued == 0 &&
		(bulkhead_shared->rows_pending || bulkhead_in_tree(slot));
}

/*
 * Has anyone a permit freed in slot could go to?  Outside a tree, its own
 * waiters; in a tree of budgets, any waiter of the tree (a permit released
 * in one leaf may be the one a sibling's waiter waits for).
 */
static inline bool
waiters_to_serve(BulkheadSlot *slot)
{
	if (unlikely(bulkhead_in_tree(slot)))
		return bulkhead_budget_root(slot)->sub_queued > 0;
	return !entry_list_is_empty(&slot->waiters);
}

/*
 * In a tree, or a keyed slot, an entry joins a list: its key's (k, or
 * BULKHEAD_NO_KEY) counts and every level's follow
 */
pg_noinline void
bulkhead_slot_link_slow(BulkheadSlot *slot, BulkheadEntry *entry, int32 k,
						bool granted, TimestampTz now)
{
	entry_list_push_tail(granted ? &slot->holders : &slot->waiters, entry);
	if (slot->keyed)
		bulkhead_keys_link(slot, entry, k, granted, now);
	if (bulkhead_in_tree(slot))
		bulkhead_budget_adjust(slot, granted ? 1 : 0, granted ? 0 : 1, true,
							   now);
	else if (granted)
		bulkhead_slot_running_up(slot);
	else
		bulkhead_slot_queued_up(slot);
}

/* entry was just granted (at once or after a wait): count it */
void
bulkhead_slot_count_grant(BulkheadSlot *slot, BulkheadEntry *entry)
{
	uint64		waited = 0;

	if (entry->since > entry->queued_at)
		waited = entry->since - entry->queued_at;
	slot->stats.acquired++;
	bulkhead_stats_add_wait(&slot->stats, waited);
}

/* A waiter's deadline passed: it leaves the queue */
void
bulkhead_slot_time_out(BulkheadSlot *slot, BulkheadEntry *entry)
{
	unlink_entry(slot, entry);
	slot->stats.timed_out++;
}

/*
 * A statement's move to another lane (1.3) left leaf (out) or was granted
 * in leaf (in): bulkhead_budget_adjust counted a release or a grant at the
 * budgets above, which count a move instead, as the leaf does.  (A budget
 * above both ends counts both, moved_out and moved_in: the two ends are
 * changed under two locks, one after the other.)
 */
static void
count_lane_move(BulkheadSlot *leaf, bool out)
{
	BulkheadSlot *budget;

	for (budget = leaf; budget->parent >= 0;)
	{
		budget = &bulkhead_shared->slots[budget->parent];
		if (out)
		{
			budget->stats.released--;
			budget->stats.moved_out++;
		}
		else
		{
			budget->stats.acquired--;
			budget->stats.moved_in++;
		}
	}
}

/*
 * A holder returns its permit (held since entry->since, returned at now):
 * the next waiter, if any, is served.  Returns whether the slot drained.
 */
bool
bulkhead_slot_release(BulkheadSlot *slot, BulkheadEntry *entry,
					  TimestampTz now, BulkheadWakeups *wakeups, bool moved)
{
	/* a statement's move to another lane (1.3) is no release of the work */
	if (unlikely(moved))
		slot->stats.moved_out++;
	else
		slot->stats.released++;
	bulkhead_stats_add_hold(&slot->stats, now > entry->since ? now - entry->since : 0);
	unlink_entry(slot, entry);
	if (unlikely(moved) && bulkhead_in_tree(slot))
		count_lane_move(slot, true);
	if (waiters_to_serve(slot))
		bulkhead_slot_serve(slot, wakeups);
	return slot_drained(slot);
}

/*
 * A wait ends by an error (cancel, statement_timeout, terminate): a permit
 * handed over meanwhile is passed on to the next waiter.  Returns whether
 * the slot drained.
 */
bool
bulkhead_slot_cancel_wait(BulkheadSlot *slot, BulkheadEntry *entry,
						  BulkheadWakeups *wakeups)
{
	slot->stats.cancelled++;
	unlink_entry(slot, entry);
	if (waiters_to_serve(slot))
		bulkhead_slot_serve(slot, wakeups);
	return slot_drained(slot);
}

/*
 * Is a permit free for waiter entry of slot?  In a keyed slot, not while its
 * key is at max_running_per_key: only a release by that key's holders can
 * serve it, whatever is free for other keys.
 */
static bool
permit_free_for(BulkheadSlot *slot, BulkheadEntry *entry)
{
	if (!(bulkhead_in_tree(slot) ? bulkhead_budget_path_free(slot) :
		  (slot->config.shadow || slot->running < slot->current_limit)))
		return false;
	return !slot->keyed || bulkhead_key_under_cap(slot, bulkhead_entry_key(entry));
}

/*
 * End a wait that the deadlock check found deadlocked, after a last check
 * that it still stands as the search saw it: still WAITING (never granted
 * meanwhile), the same holders (holders_stamp) and no free permit for it.
 * Returns false, changing nothing, when one of these fails.
 */
bool
bulkhead_slot_end_wait_deadlocked(BulkheadSlot *slot, BulkheadEntry *entry,
								  uint64 holders_stamp,
								  BulkheadWakeups *wakeups, bool *drained)
{
	*drained = false;
	if (entry->state != BULKHEAD_ENTRY_WAITING ||
		permit_free_for(slot, entry) ||
		bulkhead_holders_stamp(slot) != holders_stamp)
		return false;
	slot->stats.deadlocks++;
	unlink_entry(slot, entry);
	if (waiters_to_serve(slot))
		bulkhead_slot_serve(slot, wakeups);
	*drained = slot_drained(slot);
	return true;
}

/*
 * Free the entry of a process that is gone (the reaper, or a backend that
 * finds its PGPROC's entries left behind), counting it as released or
 * cancelled.  The caller serves the queue after.
 */
void
bulkhead_slot_drop_entry(BulkheadSlot *slot, BulkheadEntry *entry)
{
	if (entry->state == BULKHEAD_ENTRY_GRANTED)
		slot->stats.released++;
	else
		slot->stats.cancelled++;
	unlink_entry(slot, entry);
}

/* See slot.h; caller holds slot->lock exclusively */
bool
bulkhead_slot_boost(BulkheadSlot *slot, BulkheadEntry *entry, bool ahead,
					bool count)
{
	BulkheadEntryPrio *prio = bulkhead_entry_prio(entry);
	bool		was = bulkhead_prio_marked(prio);

	if (entry->state != BULKHEAD_ENTRY_WAITING)
		return false;
	prio->boost = ahead ? BULKHEAD_BOOST_AHEAD : BULKHEAD_BOOST_NONE;
	slot->prio_waiting += (int) bulkhead_prio_marked(prio) - (int) was;
	if (ahead && count)
		bulkhead_slot_count_boost(slot, false);
	return true;
}

/*
 * See slot.h.  running passes the limit by one (every level, its key's group:
 * a grant's paths); serving checks the limits, so hands nothing on over them.
 */
bool
bulkhead_slot_borrow(BulkheadSlot *slot, BulkheadEntry *entry, bool count,
					 TimestampTz now)
{
	if (!bulkhead_slot_boost(slot, entry, true, count))
		return false;
	waiter_to_holders(slot, entry, now);
	bulkhead_entry_prio(entry)->boost = BULKHEAD_BOOST_BORROWED;
	slot->borrowed_now++;
	bulkhead_slot_count_boost(slot, true);
	return true;
}

/*
 * Move holder entry of slot from (index fromno) to slot to (index tono):
 * its work goes on, but it counts in to from now on, even beyond to's
 * limit (to grants nothing new until it is back under), and from's queue
 * is served at once.  The caller (the worker) holds the locks of both
 * (one lock when they share a tree).  The entry remembers where it came
 * from (shared->moved) for bulkhead_activity.  Each end counts it in
 * moved_out / moved_in, and so do the budgets it leaves or joins
 * (budget.c): at every level, acquired + moved_in = released + moved_out
 * + running.
 */
void
bulkhead_slot_move(BulkheadSlot *from, BulkheadSlot *to, int tono,
				   BulkheadEntry *entry, TimestampTz now,
				   BulkheadWakeups *wakeups)
{
	BulkheadMoved *moved = &bulkhead_shared->moved[entry_index(entry)];

	Assert(entry->state == BULKHEAD_ENTRY_GRANTED);
	if (bulkhead_entry_prio(entry)->boost == BULKHEAD_BOOST_BORROWED)
		from->borrowed_now--;	/* in to, an ordinary holder over its limit */
	bulkhead_entry_prio(entry)->boost = BULKHEAD_BOOST_NONE;
	if (from->keyed)
		bulkhead_keys_unlink(from, entry, now);	/* its key stays behind */
	entry_list_delete(&from->holders, entry);
	if (bulkhead_in_tree(from))
		bulkhead_budget_adjust(from, -1, 0, false, now);
	else
		from->running--;
	entry_list_push_tail(&to->holders, entry);
	if (to->keyed)
		bulkhead_keys_link(to, entry, BULKHEAD_NO_KEY, true, now);
	if (bulkhead_in_tree(to))
		bulkhead_budget_adjust(to, 1, 0, false, now);
	else
		bulkhead_slot_running_up(to);
	entry->workload = (int16) tono;
	moved->since = entry->since;
	strlcpy(moved->from, from->name, NAMEDATALEN);
	from->stats.moved_out++;
	to->stats.moved_in++;
	if (bulkhead_in_tree(from) || bulkhead_in_tree(to))
		bulkhead_budget_count_move(from, to);
	bulkhead_slot_serve(from, wakeups);
}

/*
 * entry (this backend's, just linked into slot, waiting or granted) is the
 * permit a statement moved from workload from (1.3, lanes): it shows where
 * it came from in bulkhead_activity, and its grant counts as moved_in, not
 * acquired (its old workload counted moved_out).  Caller holds slot->lock.
 */
void
bulkhead_slot_note_moved(BulkheadSlot *slot, BulkheadEntry *entry,
						 const char *from)
{
	BulkheadMoved *moved = &bulkhead_shared->moved[entry_index(entry)];

	moved->since = entry->since;
	strlcpy(moved->from, from, NAMEDATALEN);
	if (entry->state == BULKHEAD_ENTRY_GRANTED)
	{
		slot->stats.acquired--;
		slot->stats.moved_in++;
		if (bulkhead_in_tree(slot))
			count_lane_move(slot, false);
	}
}

/* A new limit: raising it serves the queue now; lowering preempts no one */
void
bulkhead_slot_set_limit(BulkheadSlot *slot, int limit)
{
	int			old = slot->current_limit;

	slot->current_limit = limit;
	if (limit > old)
		bulkhead_slot_serve(slot, NULL);
}

/*
 * The worker's load: slot takes workload name (it has it already, or was
 * free) with config and limit.  A higher limit, or a switch to shadow
 * mode, serves waiters now.  Caller holds dir_lock and slot->lock
 * exclusively.
 */
void
bulkhead_slot_define(BulkheadSlot *slot, const char *name,
					 const BulkheadConfig *config, int limit)
{
	if (!slot->in_use)
	{
		slot->in_use = true;
		strlcpy(slot->name, name, NAMEDATALEN);
		bulkhead_stats_clear(&slot->stats);
		slot->sample_peak_running = slot->sample_peak_queued = 0;
	}
	else if (!slot->defined && !slot->restored &&
			 slot->running == 0 && slot->queued == 0)
	{
		/* deleted and re-created: a new workload, with fresh figures */
		bulkhead_stats_clear(&slot->stats);
	}
	if (slot->config.reserved != config->reserved ||
		slot->config.weight != config->weight)
		bulkhead_budget_reconfigure(slot, config, GetCurrentTimestamp());
	slot->current_limit = limit;
	slot->defined = true;
	slot->restored = false;
	slot->config = *config;
	bulkhead_slot_serve(slot, NULL);
}

/*
 * The workload is gone from the table: it admits no one new, and the slot
 * is freed once its last permit and waiter are gone (here, or at the load
 * after).  Caller holds dir_lock and slot->lock exclusively.
 */
void
bulkhead_slot_undefine(BulkheadSlot *slot)
{
	slot->defined = false;
	slot->restored = false;
	if (slot->parent >= 0 && slot->config.reserved != 0)
	{
		/* a deleted workload keeps no reservation: its holders borrow */
		BulkheadConfig none = slot->config;

		none.reserved = 0;
		bulkhead_budget_reconfigure(slot, &none, GetCurrentTimestamp());
		bulkhead_slot_serve(slot, NULL);
	}
	if (slot->running == 0 && slot->queued == 0 && !bulkhead_in_tree(slot))
	{
		slot->in_use = false;
		slot->name[0] = '\0';
	}
}

/*
 * The reaper: free the entries of processes that ended without releasing
 * them (a safety net: every exit path of a backend releases its own), then
 * serve the queue.  Returns how many entries it freed.
 */
int
bulkhead_slot_reap(BulkheadSlot *slot)
{
	BulkheadEntryList *lists[2] = {&slot->holders, &slot->waiters};
	int			reaped = 0;
	int			l;

	for (l = 0; l < 2; l++)
	{
		int32		e;
		int32		next;

		for (e = lists[l]->head; e != BULKHEAD_NO_ENTRY; e = next)
		{
			BulkheadEntry *entry = entry_at(e);

			next = entry->next; /* read before the entry is unlinked */
			if (GetPGProcByNumber(bulkhead_entry_procno(entry))->pid == entry->pid)
				continue;
			reaped++;
			bulkhead_slot_drop_entry(slot, entry);
		}
	}
	bulkhead_slot_serve(slot, NULL);
	return reaped;
}
