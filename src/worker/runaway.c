/*-------------------------------------------------------------------------
 *
 * runaway.c
 *	  Runaway holders: the worker's check of the permits held longer than
 *	  their workload's max_hold, and what it does to them.
 *
 * Every BULKHEAD_HOLD_CHECK_MS the worker looks at the holders of every
 * workload with a max_hold, under the slot's lock, and acts once per
 * permit (a permit is an entry and the instant it was granted: acted[]
 * remembers, per entry, the grant it acted on):
 *   log        a LOG line;
 *   cancel     SIGINT to the holder's process group, as pg_cancel_backend
 *              sends: its statement ends with 57014, and the permit comes
 *              back by the normal path (its scope's end, or the failed
 *              statement's rule).  A holder idle (waiting for its client,
 *              in a transaction or not) has no statement to cancel: nothing
 *              is sent, and the LOG line says that idle_timeout is the tool
 *              for it;
 *   terminate  SIGTERM, as pg_terminate_backend: the backend's exit returns
 *              the permit;
 *   move       the permit moves to move_to (slot.c): the work goes on, the
 *              old workload's queue is served at once, and the holder
 *              applies move_to's guards at its next statement (local.c).
 * Nothing releases a permit from outside while its work goes on.
 *
 * Racing the holder's release: signals are sent under the slot lock, after
 * checking that the entry is still granted with the same since and that
 * its PGPROC still belongs to the entry's pid; a release that comes first
 * leaves nothing to act on, one that comes after finds the entry as the
 * worker left it.  A move takes the locks of both workloads (address
 * order; the worker is the only process that holds two slot locks) and
 * checks the entry again; the holder's release reads entry->workload, takes
 * that slot's lock and checks the field again (local.c).
 *
 * Owns the worker-local acted[]; changes slots through slot.c.  Called by
 * worker.c only.
 *
 *-------------------------------------------------------------------------
 */
#include "worker/runaway.h"
#include "workload/entry_list.h"
#include "workload/slot.h"
#include "workload/slotstats.h"

#include <signal.h>

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* Per entry: the since of the grant the worker acted on */
static TimestampTz *acted = NULL;

/* One holder past max_hold, seen under the slot lock */
typedef struct Overdue
{
	int			entry;			/* index in shared->entries */
	int			pid;
	TimestampTz since;
	bool		idle;			/* idle in transaction: nothing to cancel */
} Overdue;

static Overdue *overdue = NULL;

static void
signal_holder(int pid, int sig)
{
	/* as pg_signal_backend: the backend's whole process group (setsid) */
#ifndef WIN32
	(void) kill(-pid, sig);
#else
	(void) kill(pid, sig);
#endif
}

/*
 * Under slot's lock: the holders past max_hold not acted on yet, into
 * overdue[], counted and marked; for cancel and terminate, signalled.
 * Returns how many.
 */
static int
find_overdue(BulkheadSlot *slot, TimestampTz now)
{
	BulkheadEntry *entry;
	int			n = 0;

	entry_list_foreach(entry, &slot->holders)
	{
		int			index = entry - bulkhead_shared->entries;
		PGPROC	   *proc = GetPGProcByNumber(bulkhead_entry_procno(entry));
		Overdue    *o;

		if (now - entry->since < slot->config.max_hold_us ||
			acted[index] == entry->since)
			continue;
		acted[index] = entry->since;
		bulkhead_slot_note_over_hold(slot);
		o = &overdue[n++];
		o->entry = index;
		o->pid = entry->pid;
		o->since = entry->since;
		o->idle = *((volatile uint32 *) &proc->wait_event_info) == WAIT_EVENT_CLIENT_READ;
		if (proc->pid != entry->pid)
			continue;			/* exiting: its exit returns the permit */
		if (slot->config.on_max_hold == BULKHEAD_HOLD_CANCEL && !o->idle)
			signal_holder(entry->pid, SIGINT);
		else if (slot->config.on_max_hold == BULKHEAD_HOLD_TERMINATE)
			signal_holder(entry->pid, SIGTERM);
	}
	return n;
}

/*
 * Move the overdue holders of slot fromno to the workload named to: both
 * slots' locks (one if they share a tree), each entry checked again.
 * Returns how many moved, or -1 when to cannot take them.
 */
static int
move_overdue(int fromno, const char *to_name, int n, TimestampTz now)
{
	BulkheadSlot *from = &bulkhead_shared->slots[fromno];
	int			tono = bulkhead_find_slot(to_name);
	BulkheadSlot *to;
	LWLock	   *locks[2];
	BulkheadWakeups wakeups = {0};
	int			moved = 0;
	int			i;

	if (tono < 0 || tono == fromno)
		return -1;
	to = &bulkhead_shared->slots[tono];
	/* only the worker changes the locks in force: these stay as read */
	locks[0] = from->lock;
	locks[1] = to->lock;
	if ((uintptr_t) locks[0] > (uintptr_t) locks[1])
	{
		LWLock	   *l = locks[0];

		locks[0] = locks[1];
		locks[1] = l;
	}
	LWLockAcquire(locks[0], LW_EXCLUSIVE);
	if (locks[1] != locks[0])
		LWLockAcquire(locks[1], LW_EXCLUSIVE);
	if (bulkhead_slot_matches(to, to_name) && to->first_child < 0 &&
		!to->config.budget)
	{
		for (i = 0; i < n; i++)
		{
			BulkheadEntry *entry = &bulkhead_shared->entries[overdue[i].entry];

			if (entry->workload != fromno ||
				entry->state != BULKHEAD_ENTRY_GRANTED ||
				entry->since != overdue[i].since)
				continue;		/* released meanwhile */
			bulkhead_slot_move(from, to, tono, entry, now, &wakeups);
			moved++;
		}
	}
	else
		moved = -1;
	if (locks[1] != locks[0])
		LWLockRelease(locks[1]);
	LWLockRelease(locks[0]);
	bulkhead_wake(&wakeups);
	return moved;
}

static void
report(const Overdue *o, const char *name, int64 max_hold_us, uint8 action,
	   const char *move_to, TimestampTz now)
{
	long		held_ms = (long) ((now - o->since) / 1000);
	long		limit_ms = (long) (max_hold_us / 1000);

	if (action == BULKHEAD_HOLD_CANCEL && o->idle)
		ereport(LOG,
				(errmsg("bulkhead: process %d has held a permit of workload \"%s\" for %ld ms, longer than its max_hold of %ld ms",
						o->pid, name, held_ms, limit_ms),
				 errdetail("It is idle, waiting for its client: there is no statement to cancel."),
				 errhint("Set the workload's idle_timeout to end idle sessions and transactions.")));
	else
		ereport(LOG,
				(errmsg("bulkhead: process %d has held a permit of workload \"%s\" for %ld ms, longer than its max_hold of %ld ms",
						o->pid, name, held_ms, limit_ms),
				 action == BULKHEAD_HOLD_CANCEL ?
				 errdetail("Its statement is cancelled.") :
				 action == BULKHEAD_HOLD_TERMINATE ?
				 errdetail("Its process is terminated.") :
				 action == BULKHEAD_HOLD_MOVE ?
				 errdetail("The permit moves to workload \"%s\".", move_to) : 0));
}

/* The holders of workload slotno past its max_hold */
static void
check_slot(int slotno, TimestampTz now)
{
	BulkheadSlot *slot = &bulkhead_shared->slots[slotno];
	char		name[NAMEDATALEN];
	char		move_to[NAMEDATALEN];
	int64		max_hold_us;
	uint8		action;
	int			n;
	int			i;

	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	if (!slot->in_use || !slot->defined || slot->config.max_hold_us <= 0)
	{
		LWLockRelease(slot->lock);
		return;
	}
	n = find_overdue(slot, now);
	strlcpy(name, slot->name, NAMEDATALEN);
	strlcpy(move_to, slot->config.move_to, NAMEDATALEN);
	max_hold_us = slot->config.max_hold_us;
	action = slot->config.on_max_hold;
	LWLockRelease(slot->lock);

	if (n > 0 && action == BULKHEAD_HOLD_MOVE &&
		move_overdue(slotno, move_to, n, now) < 0)
	{
		ereport(LOG,
				(errmsg("bulkhead: cannot move the permits of workload \"%s\" past its max_hold to workload \"%s\"",
						name, move_to),
				 errdetail("Workload \"%s\" is not loaded, or is a budget.", move_to)));
		action = BULKHEAD_HOLD_LOG;
	}
	for (i = 0; i < n; i++)
		report(&overdue[i], name, max_hold_us, action, move_to, now);
}

/*
 * The worker's check, every BULKHEAD_HOLD_CHECK_MS.  Returns whether any
 * workload has a max_hold (the worker then wakes at least that often).
 */
bool
bulkhead_check_holds(void)
{
	int			nentries = bulkhead_shared->nbackends *
		bulkhead_shared->permits_per_backend;
	TimestampTz now = GetCurrentTimestamp();
	bool		any = false;
	int			i;

	if (acted == NULL)
	{
		acted = MemoryContextAllocZero(TopMemoryContext,
									   sizeof(TimestampTz) * nentries);
		overdue = MemoryContextAlloc(TopMemoryContext, sizeof(Overdue) * nentries);
	}
	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];

		/* a look without the lock; check_slot looks again under it */
		if (!slot->in_use || !slot->defined || slot->config.max_hold_us <= 0)
			continue;
		any = true;
		check_slot(i, now);
	}
	return any;
}
