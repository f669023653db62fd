/*-------------------------------------------------------------------------
 *
 * deadlock.c
 *	  When a permit waiter checks for a deadlock, and the verdict of a check.
 *
 * A permit waiter checks for itself, after deadlock_timeout of waiting and
 * then for as long as it waits (a permit wait, unlike a lock wait, can
 * become deadlocked long after it began: when the last holder that could
 * still release starts to wait).  The search and the rule are in
 * waitgraph.c; this file decides when a search is needed and returns what
 * it found.  The wait it finds deadlocked is ended by its caller (permit.c,
 * through local.c and slot.c); the caller then concludes the check.
 *
 * Owns the deadlock_checker token in shared memory; the workload's proof
 * (the slots' dl_ fields) is deadlockfree.c's; everything else it only reads.
 * Called by permit.c (the check) and local.c (the token at exit).
 *
 * When the search runs
 * --------------------
 * A search calls pg_blocking_pids, which takes every lock-partition lock,
 * for each backend of the graph that waits for a lock: with hundreds of
 * waiters whose holders wait for locks, searching every deadlock_timeout in
 * every waiter would sweep the lock table thousands of times a second.  So
 * every deadlock_timeout a waiter first makes a cheap test (no
 * pg_blocking_pids, no token), and searches only when the test fails:
 *   A. Some holder of its workload can move: it waits neither for a permit
 *      nor for a lock (PGPROC->waitLock unset), or it is gone.  Then no
 *      waiter of the workload is deadlocked at that moment.
 *   B. Its last search found nothing, and every backend of that search's
 *      graph is still in the same state: the same permit wait with the same
 *      holders (the stamp), the same lock wait (PGPROC->waitStart, with
 *      waitLock set), or still waiting for nothing.  Then the graph, and so
 *      the answer, is the same, but for one thing these states do not show:
 *      a lock waiter whose blockers grow while it keeps waiting (a requester
 *      that already holds a conflicting lock is queued ahead of it, or
 *      PostgreSQL's detector reorders the queue; blockers that leave can
 *      only shrink the stuck set).  For that, B holds only for a back-off
 *      interval after the last proof that the wait could end: it starts at
 *      deadlock_timeout and doubles after each search that finds nothing
 *      without a change having been seen, up to 30 x deadlock_timeout but
 *      at most 10 s (at least deadlock_timeout).
 *   C. The workload's slot holds a proof, less than the workload's back-off
 *      interval old, made with the same holders in the same states (what
 *      each waits for, as in B): a search (of any waiter of the workload)
 *      whose root was in Prog shows that some holder could move, so that no
 *      waiter of the workload was deadlocked when it began.  The search
 *      writes that into the slot (dl_holders, dl_holder_states,
 *      dl_proved_at; dl_interval_us doubles, as B's, with each such search
 *      while the holders stay the same); a search whose root is stuck
 *      withdraws it, so that the other waiters search for themselves.  So
 *      hundreds of waiters of one workload share a search rather than run
 *      one each.  B's back-off also ends at the slot's interval when that
 *      proof is more recent than the waiter's own.
 * The waiter whose search made the workload's proof (the prover,
 * dl_prover) goes on testing every deadlock_timeout.  The others, when
 * they skip on that proof (B on the slot's interval, or C), sleep until it
 * would expire plus one deadlock_timeout (by which time the prover has
 * renewed it), not for one deadlock_timeout: hundreds of waiters then wake
 * a few times a back-off cap rather than every deadlock_timeout.  They are
 * woken at once (their latch, and a changed dl_proved_at that the wait loop
 * sees) when a search withdraws the proof (any search whose root is stuck,
 * whatever holders the proof was made for), and the head waiter is made the
 * prover and woken when the prover's wait ends (granted, timed out,
 * cancelled, deadlocked, or its backend exits).  The prover itself never
 * skips on C: it watches its whole graph (B), or searches (deadlockfree.c).
 * Completeness stays: a deadlock, once formed at time D, lasts, so from D
 * on no test A passes, no search proves anything, and no proof is dated
 * after D; B and C hold for at most the back-off cap after the last proof.
 * A state change that closes it at a holder of the waiter's workload (a
 * holder that starts to wait, holders that change) fails A and C at the
 * next test of every waiter, and one in a backend of a waiter's last graph
 * fails that waiter's B: its search then finds the deadlock, or finds its
 * own root stuck and withdraws the workload's proof (waking the waiters
 * that sleep on it).  The prover is always among the waiters that test
 * every deadlock_timeout, and its own root is stuck whenever a waiter of
 * its workload is deadlocked (they wait for the same holders).  So a
 * deadlock is
 * found within about deadlock_timeout of being closed (plus the waits for
 * the checker token) when the change that closes it is at a holder, or in
 * the last graph of a waiter of the workload that still waits, as in the
 * usual cycles (a holder or a waiter that starts to wait for the other);
 * otherwise, as when a lock waiter's blockers grow (B), within the cap plus
 * deadlock_timeout.
 *
 * Cost: nothing on the fast path.  The test reads each holder's PGPROC and
 * permit entries, and the PGPROCs of the last graph, without locks but for
 * the slot lock (shared) of each permit wait in it.  A search reads the
 * holders of each permit waited for (slot locks shared, one at a time) and
 * calls pg_blocking_pids (all lock-partition locks) for each backend that
 * waits for a lock; no bulkhead LWLock is held meanwhile.  The search visits
 * each backend once (at most one node per PGPROC).
 *
 *-------------------------------------------------------------------------
 *-------------------------------------------------------------------------
 */
#include "deadlock/deadlock.h"
#include "deadlock/deadlockfree.h"
#include "deadlock/waitgraph.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/*
 * A checker that finds the token taken tests again after this long (or
 * deadlock_timeout if shorter).  Not much sooner: the search under way often
 * answers for it too (test C), and hundreds of waiters polling the token
 * every few milliseconds while a search runs would cost more than the
 * search.
 */
#define BUSY_RETRY_MS	100

/* What the last check did (both passes), for its DEBUG1 line */
static int	checked_backends;
static int	lock_queries;

/* A backend of the last search's graph, for test B */
typedef struct MemoNode
{
	int			procno;
	int			pid;
	uint64		state;
} MemoNode;

/*
 * What this backend remembers of its current permit wait between checks
 * (backend-local; test A, B and C in the header).
 */
typedef struct CheckMemo
{
	uint64		wait_id;		/* the wait it is about; 0 before the first */
	bool		valid;			/* nodes: the last search's graph, unchanged
								 * since (as far as the checks saw) */
	int			nnodes;
	MemoNode   *nodes;			/* one per PGPROC at most */
	TimestampTz proved_at;		/* last proof that this wait could end */
	int64		backoff_us;		/* B holds until proved_at + backoff_us */
	bool		forced;			/* this search runs only for the back-off */
	bool		must_search;	/* saw its graph change: C does not apply */
	int		   *pids;			/* the holders of the wait just read */
	int		   *procnos;
	int		   *scratch_pids;	/* for state_of */
	int		   *scratch_procnos;
} CheckMemo;

static CheckMemo memo;

/*
 * What the root's holders wait for, as test C compares it: a sum over them
 * of their states (state_of); 0 if one of them was read in passing.
 */
static uint64
holder_states(WaitGraph *g)
{
	WaitNode   *root = &g->nodes[0];
	uint64		sum = 0;
	int			e;

	for (e = root->first_edge; e < root->first_edge + root->nedges; e++)
	{
		WaitNode   *h = &g->nodes[g->edges[e]];

		if (h->unsure)
			return 0;
		sum += bulkhead_mix64(h->state ^ (uint64) h->procno);
	}
	return sum;
}

/* Remember graph g, whose search found nothing, for test B */
static void
remember_graph(WaitGraph *g)
{
	int			n;

	memo.valid = false;
	for (n = 0; n < g->nnodes; n++)
	{
		if (g->nodes[n].unsure)
			return;
		memo.nodes[n].procno = g->nodes[n].procno;
		memo.nodes[n].pid = g->nodes[n].pid;
		memo.nodes[n].state = g->nodes[n].state;
	}
	memo.nnodes = g->nnodes;
	memo.valid = g->nnodes > 0 && g->nodes[0].kind == NODE_PERMIT;
}

/*
 * Search twice; if both passes find this backend deadlocked in the same
 * waits, return the cycle, and in *holders the holders stamp the second
 * pass saw.  A search that began at start and finds nothing is remembered
 * for the tests.
 */
static DeadlockCycle *
find_deadlock(TimestampTz start, uint64 *holders)
{
	WaitGraph  *first;
	WaitGraph  *second;

	memo.valid = false;
	memo.must_search = false;
	first = bulkhead_build_graph();
	checked_backends += first->nread;
	lock_queries += first->nlock_queries;
	if (!bulkhead_graph_deadlocked(first))
	{
		remember_graph(first);
		memo.proved_at = start;
		memo.backoff_us = memo.forced ? bulkhead_proof_next_interval(memo.backoff_us) :
			(int64) DeadlockTimeout * 1000;
		if (first->nnodes > 0 && first->root_slot >= 0)
		{
			if (first->nodes[0].progress)
				bulkhead_publish_proof(first->root_slot, first->root_holders,
							  holder_states(first), start);
			else
				bulkhead_withdraw_proof(first->root_slot);
		}
		return NULL;
	}
	second = bulkhead_build_graph();
	checked_backends += second->nread;
	lock_queries += second->nlock_queries;
	if (!bulkhead_graph_deadlocked(second) ||
		!bulkhead_graph_same_waits(first, second))
		return NULL;
	*holders = second->root_holders;
	return bulkhead_graph_cycle(second);
}


static bool
take_token(void)
{
	uint32		expected = 0;

	return pg_atomic_compare_exchange_u32(&bulkhead_shared->deadlock_checker,
										  &expected, BULKHEAD_MY_PROCNO + 1);
}

/* Give up the checker token if this backend has it (also at exit) */
void
bulkhead_deadlock_exit(void)
{
	uint32		mine = BULKHEAD_MY_PROCNO + 1;

	(void) pg_atomic_compare_exchange_u32(&bulkhead_shared->deadlock_checker,
										  &mine, 0);
}

/*
 * Test A: can some holder of the wait just read move (it waits neither for
 * a permit nor for a lock, or it is gone)?  If not, *states is what they
 * wait for, as holder_states() sums it, for test C.
 */
static bool
some_holder_free(PermitWait *root, uint64 *states)
{
	int			i;

	*states = 0;
	for (i = 0; i < root->nholders; i++)
	{
		int			procno = memo.procnos[i];
		int			pid = memo.pids[i];
		uint64		state;

		state = bulkhead_wait_state(procno, pid, memo.scratch_pids, memo.scratch_procnos);
		/* waits for nothing (0), or gone (1): the reaper frees its permit */
		if (state <= 1)
			return true;
		*states += bulkhead_mix64(state ^ (uint64) procno);
	}
	return false;
}

/*
 * Test B's first half: is every backend of the last search's graph still
 * in the state that search read?  (The root's state is root->stamp.)
 */
static bool
graph_unchanged(PermitWait *root)
{
	int			n;

	if (!memo.valid || memo.nodes[0].state != root->stamp)
		return false;
	for (n = 1; n < memo.nnodes; n++)
	{
		MemoNode   *node = &memo.nodes[n];

		if (bulkhead_wait_state(node->procno, node->pid, memo.scratch_pids,
					 memo.scratch_procnos) !=
			node->state)
			return false;
	}
	return true;
}

/*
 * May this check skip the search (tests A, B and C in the header)?  root is
 * this backend's wait, just read.  Sets memo.forced when the search is due
 * to the back-off only, and *until to when the next check is due.
 */
static bool
may_skip_search(PermitWait *root, TimestampTz now, TimestampTz *until,
				bool *decided)
{
	bool		same_holders = root->dl_proved_at != 0 &&
		root->dl_holders == root->holders_stamp;
	bool		unchanged;
	uint64		states;

	memo.forced = false;
	*decided = true;			/* unless it relies on the workload's proof */
	*until = TimestampTzPlusMilliseconds(now, DeadlockTimeout);
	unchanged = graph_unchanged(root);
	if (memo.valid && !unchanged)
		memo.must_search = true;	/* until a search has run */
	if (!unchanged)
		memo.valid = false;		/* B stays off until the next search */

	/* B, on this waiter's own proof, or on the workload's */
	if (unchanged && now < memo.proved_at + memo.backoff_us)
		return true;
	if (unchanged &&
		same_holders && now < root->dl_proved_at + root->dl_interval_us)
	{
		*decided = false;
		*until = bulkhead_sleep_on_proof(root, now);
		return true;
	}

	/* A: a holder that can move is proof enough, whatever B says */
	if (some_holder_free(root, &states))
	{
		memo.proved_at = now;
		return true;
	}

	/*
	 * C; not when this waiter has seen its graph change since its last
	 * search: then it is the one that must search (the proof may not cover
	 * what it saw); nor by the prover, which keeps the proof and must watch
	 * its whole graph (B), not only the holders' states (C)
	 */
	if (!memo.must_search &&
		root->dl_prover != BULKHEAD_MY_PROCNO + 1 &&
		same_holders && states != 0 && states == root->dl_holder_states &&
		now < root->dl_proved_at + root->dl_interval_us)
	{
		*decided = false;
		*until = bulkhead_sleep_on_proof(root, now);
		return true;
	}

	memo.forced = unchanged;
	return false;
}

/*
 * The DEBUG1 line of a check that searched (took_us long); may throw, so
 * never called with the checker token held.  test/bench/deadlock_check.sh
 * reads it to time the check.
 */
static void
log_check(int64 took_us)
{
	elog(DEBUG1, "bulkhead deadlock check: %d backends read, %d lock waits asked about, %lld us%s",
		 checked_backends, lock_queries, (long long) took_us,
		 memo.forced ? " (back-off)" : "");
}

/* The memo's arrays, once per backend: room for one entry per PGPROC */
static void
allocate_memo(void)
{
	int			nb = bulkhead_shared->nbackends;
	int		   *ints;

	/* the node array last: it says that all are there */
	ints = MemoryContextAlloc(TopMemoryContext, sizeof(int) * nb * 4);
	memo.pids = ints;
	memo.procnos = ints + nb;
	memo.scratch_pids = ints + 2 * nb;
	memo.scratch_procnos = ints + 3 * nb;
	memo.nodes = MemoryContextAlloc(TopMemoryContext, sizeof(MemoNode) * nb);
}

/*
 * One deadlock check of this backend's current permit wait (see the header
 * for when it searches).  Returns when the next check is due.  When it
 * found the wait deadlocked, verdict->cycle is set and this backend still
 * has the checker token: the caller ends the wait if it still stands
 * (local.c) and then calls bulkhead_deadlock_conclude().  Call without any
 * LWLock held.
 */
TimestampTz
bulkhead_deadlock_check(TimestampTz now, BulkheadDeadlockVerdict *verdict)
{
	MemoryContext cxt;
	MemoryContext old;
	DeadlockCycle *volatile cycle = NULL;
	TimestampTz done;
	TimestampTz until;
	PermitWait	root;

	verdict->cycle = NULL;
	verdict->decided = false;
	bulkhead_proof_check_begins();
	if (memo.nodes == NULL)
		allocate_memo();

	/* this backend's wait, and whether it is a new one */
	if (!bulkhead_read_permit_wait(BULKHEAD_MY_PROCNO, MyProcPid, memo.pids,
								   memo.procnos, &root))
		return TimestampTzPlusMilliseconds(now, DeadlockTimeout);	/* granted */
	if (root.wait_id != memo.wait_id)
	{
		memo.wait_id = root.wait_id;
		memo.valid = false;
		memo.must_search = false;
		memo.proved_at = 0;
		memo.backoff_us = (int64) DeadlockTimeout * 1000;
	}
	if (may_skip_search(&root, now, &until, &verdict->decided))
		return until;

	verdict->decided = false;
	if (!take_token())
		return TimestampTzPlusMilliseconds(now, Min(BUSY_RETRY_MS, DeadlockTimeout));
	verdict->decided = true;
	checked_backends = 0;
	lock_queries = 0;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "bulkhead deadlock check",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		cycle = find_deadlock(now, &verdict->holders_stamp);
	}
	PG_CATCH();
	{
		bulkhead_deadlock_exit();
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	done = GetCurrentTimestamp();

	/*
	 * Nothing that can throw may run while the token is held outside the
	 * PG_TRY above: the token would stay taken until this backend exits,
	 * and no deadlock would be found meanwhile.  An elog, even at DEBUG1,
	 * can (errfinish checks for interrupts when the message is sent), so
	 * the line is logged after the token is given up, here or in
	 * bulkhead_deadlock_conclude.
	 */
	if (cycle != NULL)
	{
		/* the token stays until the caller has ended the wait (conclude) */
		verdict->cycle = cycle;
		verdict->cxt = cxt;
		verdict->took_us = done - now;
	}
	else
	{
		bulkhead_deadlock_exit();
		log_check(done - now);
		MemoryContextDelete(cxt);
	}
	return TimestampTzPlusMilliseconds(done, DeadlockTimeout);
}

/*
 * After a check that found a deadlock: ended says whether the caller ended
 * the wait (it still stood).  The token is given up only now, so that the
 * next checker sees the victim as a backend that can move; then, if the
 * wait was ended, 40P01 is raised (the error frees the check's memory with
 * its parent).
 */
void
bulkhead_deadlock_conclude(BulkheadDeadlockVerdict *verdict, bool ended)
{
	bulkhead_deadlock_exit();
	log_check(verdict->took_us);
	if (ended)
		bulkhead_report_deadlock(verdict->cycle);
	MemoryContextDelete(verdict->cxt);
	verdict->cycle = NULL;
}
