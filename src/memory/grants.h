/*-------------------------------------------------------------------------
 *
 * grants.h
 *	  Memory grants (1.4): the memory granted to running statements, per
 *	  workload (a budget's for its whole subtree) and for the server, the
 *	  statements waiting for theirs, served by rank, then arrival (grants.c,
 *	  grantqueue.c: importance, aging, a queued lock holder first).  The
 *	  shared memory, the worker's load and the views' reads are
 *	  grantstate.h's; the levels' arithmetic grantlevel.h's.
 *
 * Shared state and its lock
 * -------------------------
 * BulkheadGrants (one per cluster, shmem "bulkhead grants") belongs to the
 * grants modules alone (grants.c, grantqueue.c, grantlevel.c,
 * grantstate.c); every field
 * below is protected by its one LWLock (tranche "bulkhead grants") but
 * those marked otherwise.  The worker takes it with the slots' directory
 * lock held (bulkhead_grants_prepare); no one takes the directory's lock
 * or a slot's while holding it.
 *
 * - levels[slot]: one per workload slot.  max_memory, parent, shadow and
 *   name are written by the worker's load (bulkhead_grants_prepare before
 *   the slot takes its workload, bulkhead_grants_define after), a copy of
 *   the table and of the trees of budgets (a deleted workload's kept while
 *   its slot is in use), so that a grant walks its path under this lock
 *   alone; generation changes when the slot is given to another workload
 *   (a grant made before then no longer counts there).  granted and
 *   waiting are the level's subtree's, changed by grants and releases, and
 *   moved along with a workload the load puts under another budget (a
 *   grant is counted and returned along its path as it is then).  limited
 *   (written under the lock, read without it: an aligned bool, a hint)
 *   says whether the level or one above it has a max_memory.
 * - server: bulkhead.max_memory's level, and its figures (the server's
 *   statistics, reset by bulkhead_stats_reset()).
 * - backends[procno]: what the backend using that PGPROC holds and awaits,
 *   for bulkhead_activity and the waiters' queue: its waiting request and
 *   path are written by the backend itself, its state by the backend or by
 *   whoever grants its wait (then its granted figures too).  Its importance
 *   (taken at each request, the one its wait carries) and its boost (set
 *   to none when a wait begins, to ahead or none while it waits as it
 *   finds itself a lock holder waited on or not, to borrowed when it is
 *   granted over the limit, to none when its last grant is returned or its
 *   wait ends in an error with nothing held) are written by the backend
 *   itself under the lock, read under it by whoever serves the queue and
 *   by the views; the backend alone reads its own boost without it.
 * - waiters (head, tail): the backends waiting, in arrival order (their
 *   procnos, linked through backends[]); nranked: how many of them are not
 *   normal or are boosted (0: the queue is served in arrival order).
 * - nlimits (atomic): the workloads with a max_memory, written by the
 *   worker's load, read without the lock: with none and bulkhead.max_memory
 *   off, a statement costs nothing.
 *
 * A workload's cumulative memory figures (memory_waits, memory_shrunk,
 * the wait histogram) are in its slot's statistics (slot.c writes them,
 * under the slot's lock), counted at every level of its tree.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_GRANTS_H
#define BULKHEAD_GRANTS_H

#include "memory/grantlevel.h"
#include "memory/memreq.h"

/* How a request was served */
typedef struct BulkheadGrantOutcome
{
	int			setting_kb;		/* the setting to run with (lowered when
								 * shrunk) */
	bool		waited;			/* it waited (shadow: would have) */
	bool		queued;			/* it waited in the queue (not shadow) */
	bool		shrunk;			/* it runs with less than it requested */
	int64		wait_us;		/* how long it waited */
	bool		borrowed;		/* a lock holder granted beyond the limit
								 * (1.5): counted already; the caller
								 * writes the wait log's line once it has
								 * recorded the grant (a line may throw) */
} BulkheadGrantOutcome;

/*
 * The grant of a statement of workload slotno (-1: none, the server's
 * limit only) requesting req: at once when it fits at every level and no
 * waiter served before it is short at one of them; else it waits, by
 * rank then arrival (a lock holder someone waits for first: over the
 * limit, at its floors, at its deadlock_timeout), up to the
 * workload's memory_timeout (may_wait false, or in shadow mode: never),
 * then is granted what is free, shrunk to it.  A statement outside any
 * workload never waits: it is granted what is free (the floor only, while
 * others wait).  Never an error but the interrupts' (a cancel,
 * statement_timeout, a terminate while it waits: the abort or exit then
 * calls bulkhead_grants_wait_cleanup).
 */
extern void bulkhead_grants_acquire(int slotno, const BulkheadMemRequest *req,
									bool may_wait, BulkheadGrant *grant,
									BulkheadGrantOutcome *outcome);
/* Return a grant (its memory serves the waiters).  Never throws. */
extern void bulkhead_grants_release(BulkheadGrant *grant, int64 requested);
/* End a wait under way after an error or at exit.  Never throws. */
extern void bulkhead_grants_wait_cleanup(void);

/* The end of the worker's load (grantstate.h has its steps) */
extern void bulkhead_grants_loaded(void);

#endif							/* BULKHEAD_GRANTS_H */
