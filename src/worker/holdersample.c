/*-------------------------------------------------------------------------
 *
 * holdersample.c
 *	  What the holders of an adaptive workload are doing, sampled by the
 *	  worker for the "holders" law (adaptive.c).
 *
 * From the wait event its PGPROC shows, a holder is:
 *
 * - on a CPU or ready for one: no wait event; or a holder granted less than
 *	 JUST_GRANTED_MS ago that still shows bulkhead's own queue event
 *	 (PG_WAIT_EXTENSION before 17, the custom "BulkheadQueue" event since)
 *	 because it has not run yet, and has no permit entry waiting;
 * - waiting outside the server's CPUs, its work going on elsewhere: for its
 *	 client, for I/O, for a timeout or another process (ClientRead,
 *	 DataFileRead, pg_sleep, SyncRep), and any other wait of class Extension:
 *	 postgres_fdw or dblink waiting for a remote server, or the queue of
 *	 another workload (the same event as ours, told apart by the backend's
 *	 entry that waits; its state is read without its slot's lock, a byte
 *	 read whole, for an estimate);
 * - blocked: waiting for an LWLock or a buffer pin, or for a heavyweight
 *	 lock that a holder of this workload holds in a conflicting mode (a hot
 *	 row, say): fewer holders would mean less of that;
 * - stuck: waiting for a heavyweight lock that no holder of this workload
 *	 holds in a conflicting mode, so its blocker is elsewhere (an operator's
 *	 ALTER TABLE, another workload, a session idle in transaction).
 *	 Admitting fewer cannot relieve that, and admitting more only queues
 *	 more on that lock, so a stuck holder neither lowers the limit nor
 *	 raises it (see holders_target).
 *
 * Telling blocked from stuck needs the lock's holders: when a sample finds
 * a holder waiting for a heavyweight lock (and only then), the worker takes
 * the lock manager's partition locks in shared mode, once for all such
 * holders of the workload, and looks through each awaited LOCK's PROCLOCKs
 * for one that a holder of the workload (or its lock group) holds in a
 * mode that conflicts with the awaited one, as GetBlockerStatusData
 * (pg_blocking_pids) does for one backend; a waiter whose awaited LOCK and
 * mode are those of the previous one reuses its answer.  Only the granted
 * modes are looked at, not the waiters queued ahead (a holder queued behind
 * another holder that waits is blocked by whatever that one waits for).
 * Holding the partition locks for a few microseconds a hundred times a
 * second, only while holders wait for heavyweight locks, costs less than
 * one pg_blocking_pids call per holder; and deciding per sample (rather
 * than once per decision) classifies the samples taken as a blocking ends
 * as well as those taken while it lasts.
 *
 * Locking: a sample reads the holders list (and each holder's entry) under
 * the slot lock in shared mode, and each holder's wait_event_info without a
 * lock (pg_stat_activity reads it so too: a 4-byte value read whole).  The
 * lock manager's partition locks are taken after the slot lock is released,
 * never with it; a holder's PGPROC (waitLock, waitLockMode,
 * lockGroupLeader) and the LOCK's PROCLOCKs are read under all of them, as
 * lock.c's GetBlockerStatusData does.
 *
 * Owns no shared state (its scratch space is the worker's).  Called by
 * adaptive.c only.
 *
 *-------------------------------------------------------------------------
 */
#include "worker/holdersample.h"
#include "workload/budget.h"
#include "workload/blockers.h"
#include "workload/entry_list.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* Wait event classes (the top byte of wait_event_info) */
#define WAIT_CLASS(info)		((info) & 0xFF000000U)
#define CLASS_LWLOCK			0x01000000U
#define CLASS_LOCK				0x03000000U
#define CLASS_BUFFERPIN			0x04000000U
#define CLASS_EXTENSION			0x07000000U

/* A holder granted this recently may still show the queue's wait event */
#define JUST_GRANTED_MS			50

/*
 * Scratch space of a sample, allocated before any lock is taken: the
 * PGPROC numbers of one slot's holders that wait for a heavyweight lock,
 * and a mark per PGPROC telling the slot's holders apart
 * (holder_mark[procno] == mark_stamp), so that no array needs clearing.
 */
static int *lock_waiters = NULL;
static uint32 *holder_mark = NULL;
static uint32 mark_stamp = 0;

/* The wait event of a backend queued by bulkhead (permit.c's) */
static uint32 queue_event = 0;

/*
 * Of the last sample's nwaiters holders that showed a heavyweight lock
 * wait, how many are stuck: wait for a lock that no holder of the
 * workload (the PGPROCs marked with mark_stamp, or their lock groups)
 * holds in a conflicting mode.  See the header.  Called with no lock held.
 */
int
bulkhead_count_stuck(int nwaiters)
{
	LOCK	   *last_lock = NULL;
	LOCKMODE	last_mode = NoLock;
	PGPROC	   *last_leader = NULL;
	bool		last_stuck = false;
	int			stuck = 0;
	int			i;

	for (i = 0; i < NUM_LOCK_PARTITIONS; i++)
		LWLockAcquire(LockHashPartitionLockByIndex(i), LW_SHARED);

	for (i = 0; i < nwaiters; i++)
	{
		PGPROC	   *proc = GetPGProcByNumber(lock_waiters[i]);
		PGPROC	   *leader = proc->lockGroupLeader ? proc->lockGroupLeader : proc;
		LOCK	   *lock = proc->waitLock;
		LOCKMODE	mode = proc->waitLockMode;
		LOCKMASK	conflicts;
		bool		is_stuck = true;

		/* granted since the sample: it was blocked, by whom is unknown */
		if (lock == NULL)
			continue;
		if (lock == last_lock && mode == last_mode && leader == last_leader)
		{
			stuck += last_stuck ? 1 : 0;
			continue;
		}
		conflicts = GetLocksMethodTable(lock)->conflictTab[mode];
#if PG_VERSION_NUM >= 160000
		{
			dlist_iter	iter;

			dlist_foreach(iter, &lock->procLocks)
			{
				PROCLOCK   *pl = dlist_container(PROCLOCK, lockLink, iter.cur);
				int			procno = BULKHEAD_PROCNO(pl->groupLeader);

				if (pl->groupLeader != leader &&
					(pl->holdMask & conflicts) != 0 &&
					procno >= 0 && procno < bulkhead_shared->nbackends &&
					holder_mark[procno] == mark_stamp)
				{
					is_stuck = false;
					break;
				}
			}
		}
#else
		{
			PROCLOCK   *pl;

			pl = (PROCLOCK *) SHMQueueNext(&lock->procLocks, &lock->procLocks,
										   offsetof(PROCLOCK, lockLink));
			while (pl != NULL)
			{
				int			procno = BULKHEAD_PROCNO(pl->groupLeader);

				if (pl->groupLeader != leader &&
					(pl->holdMask & conflicts) != 0 &&
					procno >= 0 && procno < bulkhead_shared->nbackends &&
					holder_mark[procno] == mark_stamp)
				{
					is_stuck = false;
					break;
				}
				pl = (PROCLOCK *) SHMQueueNext(&lock->procLocks, &pl->lockLink,
											   offsetof(PROCLOCK, lockLink));
			}
		}
#endif
		last_lock = lock;
		last_mode = mode;
		last_leader = leader;
		last_stuck = is_stuck;
		stuck += is_stuck ? 1 : 0;
	}

	for (i = NUM_LOCK_PARTITIONS; --i >= 0;)
		LWLockRelease(LockHashPartitionLockByIndex(i));
	return stuck;
}

/*
 * Whether backend procno waits in a bulkhead queue (for some workload).
 * The entries' states are read without their slots' locks: a byte read
 * whole, for an estimate (see the header).
 */
static bool
queued_elsewhere(int procno)
{
	int			ppb = bulkhead_shared->permits_per_backend;
	int			j;

	for (j = procno * ppb; j < (procno + 1) * ppb; j++)
	{
		if (*((volatile uint8 *) &bulkhead_shared->entries[j].state) ==
			BULKHEAD_ENTRY_WAITING)
			return true;
	}
	return false;
}

/* Allocate the scratch space, before any lock is taken (it can throw) */
void
bulkhead_holders_prepare(void)
{
	/* holder_mark last: it says that both are there */
	if (holder_mark != NULL)
		return;
	if (lock_waiters == NULL)
		lock_waiters = MemoryContextAlloc(TopMemoryContext,
										  sizeof(int) * bulkhead_shared->nbackends *
										  bulkhead_shared->permits_per_backend);
	holder_mark = MemoryContextAllocZero(TopMemoryContext,
										 sizeof(uint32) * bulkhead_shared->nbackends);
	/* so is permit.c's queue event (looked up by name since PG 17) */
	if (queue_event == 0)
	{
#if PG_VERSION_NUM >= 170000
		queue_event = WaitEventExtensionNew("BulkheadQueue");
#else
		queue_event = PG_WAIT_EXTENSION;
#endif
	}
}

/*
 * One sample of slot's holders, into *out: what each one does (see the
 * header), the workload's name, and whether callers wait (or would have,
 * in shadow mode).  Takes the slot lock shared.  Returns false when the
 * slot is not a defined adaptive workload.  The holders that wait for a
 * heavyweight lock are kept for bulkhead_count_stuck().
 */
/* One holder into the sample (a backend counted once) */
typedef struct SampleArg
{
	BulkheadHolderSample *out;
	TimestampTz now;
} SampleArg;

static void
sample_holder(BulkheadEntry *entry, void *arg)
{
	SampleArg  *sa = arg;
	BulkheadHolderSample *out = sa->out;
	int			procno = bulkhead_entry_procno(entry);
	PGPROC	   *proc = GetPGProcByNumber(procno);
	uint32		info = *((volatile uint32 *) &proc->wait_event_info);

	/* a budget's: a backend may hold permits of two of its leaves */
	if (holder_mark[procno] == mark_stamp)
		return;
	holder_mark[procno] = mark_stamp;
	if (info == 0)
		out->on_cpu++;
	else if (info == queue_event && !queued_elsewhere(procno) &&
			 !TimestampDifferenceExceeds(entry->since, sa->now, JUST_GRANTED_MS))
		out->on_cpu++;			/* just granted: it has not run yet */
	else if (WAIT_CLASS(info) == CLASS_LOCK)
		lock_waiters[out->nwaiters++] = procno;
	else if (WAIT_CLASS(info) == CLASS_LWLOCK ||
			 WAIT_CLASS(info) == CLASS_BUFFERPIN)
		out->blocked++;
	else
		out->off_cpu++;			/* including Extension: another queue, a
								 * remote server */
}

bool
bulkhead_sample_holders(BulkheadSlot *slot, TimestampTz now,
						BulkheadHolderSample *out)
{
	SampleArg	sa = {out, now};

	memset(out, 0, sizeof(BulkheadHolderSample));
	/* a new stamp marks this slot's holders (0 means none) */
	if (++mark_stamp == 0)
	{
		memset(holder_mark, 0, sizeof(uint32) * bulkhead_shared->nbackends);
		mark_stamp = 1;
	}
	bulkhead_slot_lock(slot, LW_SHARED);
	if (!slot->in_use || !slot->defined || !slot->config.adaptive)
	{
		LWLockRelease(slot->lock);
		return false;
	}
	strlcpy(out->name, slot->name, NAMEDATALEN);
	/* a budget's law counts the holders of its whole subtree */
	bulkhead_budget_foreach_holder(slot, sample_holder, &sa);
	out->binding = slot->queued > 0 || slot->sub_queued > 0 ||
		(slot->config.shadow && slot->running > slot->current_limit);
	LWLockRelease(slot->lock);
	return true;
}
