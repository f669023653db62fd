/*-------------------------------------------------------------------------
 *
 * lockholder.c
 *	  Is this backend a lock holder someone waits for (1.5)?
 *
 * A transaction waiting in a queue (for a permit, or for memory) keeps the
 * locks its earlier statements took, and whoever waits for those waits for
 * that queue too: a priority inversion.  The waits ask here, from time to
 * time, whether that is so, and are then served first.
 *
 * The answer is pg_blocking_pids() turned around: over every backend that
 * waits for a heavyweight lock, is one of the lock's PROCLOCKs ours (our
 * lock group's) with a granted mode that conflicts with the awaited one?
 * Only granted modes count, as for a hard edge of the wait graph
 * (waitgraph.c): a waiter queued behind us but not blocked by us is not
 * waiting for us.  Row locks count through the transaction id's lock the
 * blocked backend waits for.  A fast-path lock is never waited for (a
 * conflicting request first moves it into the main table), so the main
 * table is enough.
 *
 * Cost: a scan of the PGPROCs' waitLock without a lock (a pointer read
 * whole; a hint), and only when some backend waits for a heavyweight lock,
 * every partition lock in shared mode, as GetBlockerStatusData does, with
 * PGPROCs and PROCLOCKs read under them.
 *
 * bulkhead.boost_lock_holders off: never (1.4's order).
 *
 * Owns no state.  Reads importance.c's setting.
 *
 *-------------------------------------------------------------------------
 */
#include "deadlock/lockholder.h"
#include "workload/importance.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"

/* Does lock (a waiter awaits mode on it) have a PROCLOCK of leader's that conflicts? */
static bool
held_against(LOCK *lock, LOCKMODE mode, PGPROC *leader)
{
	LOCKMASK	conflicts = GetLocksMethodTable(lock)->conflictTab[mode];

#if PG_VERSION_NUM >= 160000
	dlist_iter	iter;

	dlist_foreach(iter, &lock->procLocks)
	{
		PROCLOCK   *pl = dlist_container(PROCLOCK, lockLink, iter.cur);

		if (pl->groupLeader == leader && (pl->holdMask & conflicts) != 0)
			return true;
	}
#else
	PROCLOCK   *pl;

	pl = (PROCLOCK *) SHMQueueNext(&lock->procLocks, &lock->procLocks,
								   offsetof(PROCLOCK, lockLink));
	while (pl != NULL)
	{
		if (pl->groupLeader == leader && (pl->holdMask & conflicts) != 0)
			return true;
		pl = (PROCLOCK *) SHMQueueNext(&lock->procLocks, &pl->lockLink,
									   offsetof(PROCLOCK, lockLink));
	}
#endif
	return false;
}

bool
bulkhead_lock_waited_on(void)
{
	PGPROC	   *leader;
	bool		found = false;
	bool		any = false;
	uint32		n = ProcGlobal->allProcCount;
	uint32		i;

	if (MyProc == NULL || !bulkhead_boost_lock_holders)
		return false;
	leader = MyProc->lockGroupLeader ? MyProc->lockGroupLeader : MyProc;

	/* a hint: does anyone wait for a heavyweight lock at all? */
	for (i = 0; i < n && !any; i++)
		any = *((LOCK *volatile *) &ProcGlobal->allProcs[i].waitLock) != NULL;
	if (!any)
		return false;

	for (i = 0; i < NUM_LOCK_PARTITIONS; i++)
		LWLockAcquire(LockHashPartitionLockByIndex(i), LW_SHARED);
	for (i = 0; i < n && !found; i++)
	{
		PGPROC	   *proc = &ProcGlobal->allProcs[i];
		PGPROC	   *their = proc->lockGroupLeader ? proc->lockGroupLeader : proc;

		if (proc->waitLock == NULL || their == leader)
			continue;
		found = held_against(proc->waitLock, proc->waitLockMode, leader);
	}
	for (i = NUM_LOCK_PARTITIONS; i-- > 0;)
		LWLockRelease(LockHashPartitionLockByIndex(i));
	return found;
}
