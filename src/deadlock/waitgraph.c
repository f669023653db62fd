/*-------------------------------------------------------------------------
 *
 * waitgraph.c
 *	  Deadlocks through permits: the wait graph, the rule that finds a
 *	  deadlock in it, and bulkhead_blocking_pids().
 *
 * PostgreSQL's deadlock detector sees heavyweight-lock waits only; a wait
 * for a permit is a latch wait, invisible to it.  So a permit waiter checks
 * for itself (deadlock.c says when); this file is the search it runs.  It
 * only reads shared state and returns what it found: deadlock.c gives the
 * verdict, and the wait it finds deadlocked is ended through local.c and
 * slot.c, the owners of that state.
 *
 * The wait graph
 * --------------
 * Its nodes are backends; its edges say who waits for whom:
 *   - a backend queued for a permit of workload w waits for every backend
 *     holding a permit of w (read under w's slot lock); in a tree of
 *     budgets, of the subtree of the lowest level of w's path that has no
 *     room (see bulkhead_budget_blocker, and why a few extra holders can
 *     only delay a report, never make a false one);
 *   - a backend waiting for a heavyweight lock waits for the backends that
 *     pg_blocking_pids() names (hard and soft edges, lock groups merged);
 *   - any other backend waits for nothing here: it can make progress.
 * The two kinds of edges do not mean the same.  A lock waiter goes on only
 * once every backend blocking it has moved; a permit waiter could go on as
 * soon as any one holder releases (the order of the queue, FIFO or
 * max_bypass's, decides which waiter gets that permit, see below).
 *
 * The rule
 * --------
 * Let Prog be the smallest set of backends such that
 *   (a) a backend that waits for nothing is in Prog;
 *   (b) a permit waiter is in Prog if some holder of its workload is in Prog,
 *       or it has no holder at all (a grant in flight, a limit being raised);
 *   (c) a lock waiter is in Prog if all of its blockers are in Prog.
 * A backend outside Prog is stuck: it cannot move before another stuck
 * backend does, so none of them can move first.  Permit waiter W is
 * deadlocked when W is stuck and every current holder of W's workload
 * reaches W by edges between stuck backends: every holder is blocked,
 * directly or through others, by W itself.
 *
 * Sound (a report is a real deadlock, W on a cycle).  Holders of W's
 * workload are the only backends that can give W a permit (a release hands
 * the permit to the next waiter; with running >= current_limit, checked
 * last, nothing else grants).  If they are all stuck, none releases, so W
 * waits whatever the order; and each holder's path back to W closes a cycle
 * through W.  Only an outside action (cancel, timeout, terminate, a raised
 * limit) could end it, as for a lock-manager deadlock.
 *
 * Complete (for counting semaphores with hand-off, in any order of the
 * waiters: FIFO, or max_bypass's newest first).  Take a state in
 * which W's wait can never end and every holder waits, through others, for
 * W.  Every backend on those paths is stuck (induction on how Prog is built:
 * none of them can be the first to enter it), so the rule holds and W's
 * next search reports it ("When the search runs" below says how soon that
 * is).  The order matters only while some holder can still move: its
 * release serves the next waiter, which may not be W; then W is not deadlocked
 * yet, and the search that runs after the last such holder has become
 * stuck finds it.  Waiters ahead of W need no
 * edge: they cannot take a permit from holders that never release.
 * What the rule leaves out, on purpose: a holder stuck in a cycle that does
 * not pass through W (say a lock-only cycle, broken by PostgreSQL's own
 * detector): W is not failed for it; once that cycle is broken the holder
 * moves or the next check finds a cycle through W.  Every cycle through a
 * permit contains a permit waiter, so checking in permit waiters finds every
 * such cycle.  A parallel worker's lock wait shows as its leader's only
 * through pg_blocking_pids of the leader: a leader that waits for its
 * workers (not for a lock) counts as free, so a cycle through a parallel
 * worker is not found (never a false report).
 *
 * No false report from a moving graph
 * ------------------------------------
 * The search does not see one consistent snapshot: each backend is read at
 * its own moment, as the lock manager would if it did not hold all its
 * partition locks.  A holder that has just released, a grant in flight or a
 * holder about to commit could then look stuck.  So:
 *   1. A found deadlock is searched again from scratch (a second pass, all
 *      of its reads after all reads of the first).
 *   2. Each stuck backend of the second pass must have the same stamp in
 *      both passes: for a permit waiter, the same entry queued at the same
 *      instant and the same holder entries granted at the same instants; for
 *      a lock waiter, the same waitStart (PGPROC's start of this lock wait,
 *      read before and after pg_blocking_pids) and the same blockers.  A
 *      wait that ended and began again between the passes, or a holder that
 *      released and took a permit again, changes its stamp.  The stuck
 *      backends must also have been read in the same order in both passes.
 *      Then, for any instant T between the passes: every stuck backend X
 *      waited, in one wait, from its first read to its second, so at T;
 *      a stuck blocker B of X held at T what it held at X's reads: B's own
 *      wait spans from its first read (before T) to its second (after T);
 *      B was read on the same side of X in both passes, so one of X's two
 *      reads falls within that span; and a backend that waits takes and
 *      gives up no lock and no permit.  No holder can have come and gone
 *      either: those read in both passes did not release, so no permit was
 *      free (unless a limit was raised and lowered again in between).  So
 *      the deadlock was there, whole, at T, and a deadlock stays until
 *      someone outside it acts.  (Left aside: two different waits with
 *      equal 64-bit stamps, and PostgreSQL's detector reordering a lock
 *      queue, which changes soft edges, between the passes.)
 *   3. Last, under W's own slot lock, slot.c confirms that W's entry is
 *      still WAITING (a grant meanwhile makes it GRANTED: never reported),
 *      that the holders are those of the second pass, and that no permit is
 *      free; only then does it unlink W's entry.
 * Exactly one member of a cycle fails: checks run one at a time (the
 * deadlock_checker token in shared memory, taken by compare-and-swap; a
 * backend that finds it taken tests again after 100 ms, or deadlock_timeout
 * if shorter), and the victim ends its wait before it gives the token up,
 * so the next checker sees it as a backend that can move (it is about to
 * raise its error).
 *
 * Owns no shared state: it reads the slots (each under its lock, shared;
 * never two at once) and PGPROCs, and builds its graph in the caller's
 * memory context.  Called by deadlock.c, and by the server for
 * bulkhead_blocking_pids.
 *
 *-------------------------------------------------------------------------
 */
#include "deadlock/waitgraph.h"
#include "workload/budget.h"
#include "workload/blockers.h"
#include "workload/entry_list.h"
#include "workload/slot.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

PG_FUNCTION_INFO_V1(bulkhead_blocking_pids);

/*
 * Is backend pid (PGPROC number procno) queued for a permit?  If so, copy
 * the pids of its workload's holders into pids and their PGPROC numbers
 * into procnos (room for one per PGPROC each) and describe the wait in
 * *wait.  Takes the workload's slot lock shared.
 */
bool
bulkhead_read_permit_wait(int procno, int pid, int *pids, int *procnos,
				 PermitWait *wait)
{
	BulkheadEntry *entries = bulkhead_backend_entries(procno);
	int			i;

	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
	{
		volatile BulkheadEntry *e = &entries[i];
		int			slotno = e->workload;
		BulkheadSlot *slot;
		bool		found = false;

		if (slotno < 0 || e->state != BULKHEAD_ENTRY_WAITING)
			continue;
		slot = &bulkhead_shared->slots[slotno];
		bulkhead_slot_lock(slot, LW_SHARED);
		if (e->workload == slotno && e->state == BULKHEAD_ENTRY_WAITING &&
			e->pid == pid)
		{
			/* its holders; in a tree, see bulkhead_budget_blocker() */
			wait->nholders = bulkhead_budget_blockers(slot, pids, procnos);
			wait->slotno = slotno;
			wait->holders_stamp = bulkhead_holders_stamp(slot);
			wait->wait_id = bulkhead_mix64(((uint64) entry_index(&entries[i]) << 1) ^
								  bulkhead_mix64((uint64) e->queued_at));
			wait->stamp = wait->wait_id + wait->holders_stamp;
			wait->dl_holders = slot->dl_holders;
			wait->dl_holder_states = slot->dl_holder_states;
			wait->dl_proved_at = slot->dl_proved_at;
			wait->dl_interval_us = slot->dl_interval_us;
			wait->dl_prover = slot->dl_prover;
			strlcpy(wait->workload, slot->name, NAMEDATALEN);
			found = true;
		}
		LWLockRelease(slot->lock);
		if (found)
			return true;		/* a backend waits for one permit at most */
	}
	return false;
}

/*
 * When proc's current lock wait began (0 if it waits for no lock, or has not
 * said yet).  waitStart is set after waitLock and cleared with it when the
 * lock is granted, but left as it is when the wait fails (lock.c,
 * RemoveFromWaitQueue): it counts only while waitLock is set.  PG 13 has no
 * such field: 1 stands for "some wait".
 */
static uint64
lock_wait_start(PGPROC *proc)
{
	volatile PGPROC *vproc = proc;

	if (vproc->waitLock == NULL)
		return 0;
#if PG_VERSION_NUM >= 140000
	return pg_atomic_read_u64(&proc->waitStart);
#else
	return 1;
#endif
}

/*
 * The state of a lock wait that began at start, for test B: never 0 (that
 * is "waits for nothing") and unlike a permit wait's stamp.
 */
static uint64
lock_state(uint64 start)
{
	return bulkhead_mix64(start ^ UINT64CONST(0x6c6f636b77616974)) | 1;
}

/*
 * What backend pid (PGPROC number procno) waits for, as test B compares it:
 * its permit wait's stamp, lock_state() of its lock wait, 0 when it waits
 * for neither, 1 when procno is no longer pid's.  pids and procnos are
 * scratch (one per PGPROC).
 */
uint64
bulkhead_wait_state(int procno, int pid, int *pids, int *procnos)
{
	volatile PGPROC *proc = GetPGProcByNumber(procno);
	PermitWait	wait;
	uint64		start;

	if (proc->pid != pid)
		return 1;
	if (bulkhead_read_permit_wait(procno, pid, pids, procnos, &wait))
		return wait.stamp;
	start = lock_wait_start(GetPGProcByNumber(procno));
	return start != 0 ? lock_state(start) : 0;
}

/* PGPROC number of a live backend, or -1 */
static int
procno_of_pid(int pid)
{
	PGPROC	   *proc;

	if (pid <= 0)
		return -1;
	proc = BackendPidGetProc(pid);
	if (proc == NULL)
		return -1;
	return BULKHEAD_PROCNO(proc);
}

/* The node of backend pid, added if new; -1 if pid is no live backend */
static int
node_of_pid(WaitGraph *g, int pid)
{
	int			procno = procno_of_pid(pid);
	WaitNode   *node;

	if (procno < 0 || procno >= bulkhead_shared->nbackends)
		return -1;
	if (g->node_of[procno] >= 0)
		return g->nodes[g->node_of[procno]].pid == pid ? g->node_of[procno] : -1;
	node = &g->nodes[g->nnodes];
	memset(node, 0, sizeof(WaitNode));
	node->pid = pid;
	node->procno = procno;
	node->dist = -1;
	g->node_of[procno] = g->nnodes;
	return g->nnodes++;
}

static void
add_edge(WaitGraph *g, int from, int to)
{
	if (g->nedges == g->max_edges)
	{
		g->max_edges *= 2;
		g->edges = repalloc(g->edges, sizeof(int) * g->max_edges);
	}
	g->edges[g->nedges++] = to;
	g->nodes[from].nedges++;
}

/* Read what node n waits for and add its edges (new nodes go at the end) */
static void
expand_node(WaitGraph *g, int n)
{
	WaitNode   *node = &g->nodes[n];
	int			pid = node->pid;
	PGPROC	   *proc = GetPGProcByNumber(node->procno);
	PermitWait	wait;
	uint64		start;
	ArrayType  *blockers;
	Datum	   *bpids;
	int			nblockers;
	int			i;

	node->first_edge = g->nedges;
	node->kind = NODE_FREE;
	node->progress = true;
	node->state = 0;
	g->nread++;

	if (bulkhead_read_permit_wait(node->procno, pid, g->pids, g->procnos, &wait))
	{
		node->kind = NODE_PERMIT;
		node->progress = wait.nholders == 0;
		node->stamp = wait.stamp;
		node->state = wait.stamp;
		strlcpy(node->workload, wait.workload, NAMEDATALEN);
		if (n == 0)
		{
			g->root_holders = wait.holders_stamp;
			g->root_slot = wait.slotno;
		}
		for (i = 0; i < wait.nholders; i++)
		{
			int			t = node_of_pid(g, g->pids[i]);

			/* a holder that is gone: the reaper frees its permit */
			if (t < 0)
				node->progress = true;
			else
				add_edge(g, n, t);
		}
		return;
	}
	if (n == 0)
		return;					/* this backend was granted meanwhile */

	/*
	 * Only a backend that waits for a lock itself is worth asking about (a
	 * lock group's leader that waits for its workers counts as free).
	 */
	start = lock_wait_start(proc);
	if (start == 0)
		return;
	g->nlock_queries++;
	blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids,
													  Int32GetDatum(pid)));
	deconstruct_array(blockers, INT4OID, sizeof(int32), true, TYPALIGN_INT,
					  &bpids, NULL, &nblockers);
	/*
	 * A lock wait that just began or ended counts as free: see it next time
	 * (and test B must not vouch for a state read in passing).
	 */
	if (nblockers == 0 || lock_wait_start(proc) != start || proc->pid != pid)
	{
		node->unsure = true;
		return;
	}

	node->kind = NODE_LOCK;
	node->progress = false;
	node->state = lock_state(start);
	node->stamp = bulkhead_mix64((uint64) start);
	for (i = 0; i < nblockers; i++)
	{
		int			bpid = DatumGetInt32(bpids[i]);
		int			t = node_of_pid(g, bpid);

		node->stamp += bulkhead_mix64((uint64) (uint32) bpid << 1 | 1);
		/* a blocker that is no backend (a prepared transaction) is left out */
		if (t >= 0)
			add_edge(g, n, t);
	}
}

/* Build the graph reachable from this backend, and the rule's sets */
WaitGraph *
bulkhead_build_graph(void)
{
	WaitGraph  *g = palloc0(sizeof(WaitGraph));
	int			nb = bulkhead_shared->nbackends;
	bool		changed;
	int			n;

	g->nodes = palloc(sizeof(WaitNode) * nb);
	g->node_of = palloc(sizeof(int) * nb);
	memset(g->node_of, -1, sizeof(int) * nb);
	g->max_edges = 64;
	g->edges = palloc(sizeof(int) * g->max_edges);
	g->pids = palloc(sizeof(int) * nb);
	g->procnos = palloc(sizeof(int) * nb);
	g->root_slot = -1;

	/* node 0: this backend; then breadth first, each backend once */
	if (node_of_pid(g, MyProcPid) != 0)
		return g;
	for (n = 0; n < g->nnodes; n++)
		expand_node(g, n);

	/* Prog, the smallest fixpoint of (a)-(c) */
	do
	{
		changed = false;
		for (n = 0; n < g->nnodes; n++)
		{
			WaitNode   *node = &g->nodes[n];
			bool		any = false;
			bool		all = true;
			int			e;

			if (node->progress)
				continue;
			for (e = node->first_edge; e < node->first_edge + node->nedges; e++)
			{
				if (g->nodes[g->edges[e]].progress)
					any = true;
				else
					all = false;
			}
			if (node->kind == NODE_PERMIT ? any : all)
			{
				node->progress = true;
				changed = true;
			}
		}
	} while (changed);

	/* distances to the root through stuck nodes */
	g->nodes[0].dist = 0;
	do
	{
		changed = false;
		for (n = 1; n < g->nnodes; n++)
		{
			WaitNode   *node = &g->nodes[n];
			int			e;

			if (node->progress)
				continue;
			for (e = node->first_edge; e < node->first_edge + node->nedges; e++)
			{
				WaitNode   *t = &g->nodes[g->edges[e]];

				if (!t->progress && t->dist >= 0 &&
					(node->dist < 0 || t->dist + 1 < node->dist))
				{
					node->dist = t->dist + 1;
					changed = true;
				}
			}
		}
	} while (changed);
	return g;
}

/* The rule: this backend is stuck and every holder reaches it back */
bool
bulkhead_graph_deadlocked(WaitGraph *g)
{
	WaitNode   *root;
	int			e;

	if (g->nnodes == 0)
		return false;
	root = &g->nodes[0];
	if (root->kind != NODE_PERMIT || root->progress || root->nedges == 0)
		return false;
	for (e = root->first_edge; e < root->first_edge + root->nedges; e++)
		if (g->nodes[g->edges[e]].dist < 0)
			return false;
	return true;
}

/*
 * Did every stuck backend of the second pass stay in the same wait, and was
 * it read in the same order relative to the others in both passes?
 */
bool
bulkhead_graph_same_waits(WaitGraph *first, WaitGraph *second)
{
	int			last = -1;
	int			n;

	for (n = 0; n < second->nnodes; n++)
	{
		WaitNode   *node = &second->nodes[n];
		int			m;

		if (node->progress)
			continue;
		m = first->node_of[node->procno];
		if (m <= last || first->nodes[m].pid != node->pid ||
			first->nodes[m].kind != node->kind ||
			first->nodes[m].stamp != node->stamp)
			return false;
		last = m;
	}
	return true;
}

/* The cycle to report, from the root back to it */
DeadlockCycle *
bulkhead_graph_cycle(WaitGraph *g)
{
	DeadlockCycle *cycle = palloc(sizeof(DeadlockCycle));
	int			cur = 0;

	cycle->nodes = palloc(sizeof(WaitNode) * (g->nnodes + 1));
	cycle->n = 0;
	do
	{
		WaitNode   *node = &g->nodes[cur];
		int			best = -1;
		int			e;

		cycle->nodes[cycle->n++] = *node;
		for (e = node->first_edge; e < node->first_edge + node->nedges; e++)
		{
			int			t = g->edges[e];

			if (!g->nodes[t].progress && g->nodes[t].dist >= 0 &&
				(best < 0 || g->nodes[t].dist < g->nodes[best].dist))
				best = t;
		}
		Assert(best >= 0);
		cur = best;
	} while (cur != 0 && cycle->n < g->nnodes);
	cycle->nodes[cycle->n] = g->nodes[0];
	return cycle;
}

/* Raise 40P01, in the form of PostgreSQL's DeadLockReport */
void
bulkhead_report_deadlock(DeadlockCycle *cycle)
{
	StringInfoData client;
	StringInfoData log;
	int			i;

	initStringInfo(&client);
	initStringInfo(&log);
	for (i = 0; i < cycle->n; i++)
	{
		WaitNode   *node = &cycle->nodes[i];

		if (i > 0)
			appendStringInfoChar(&client, '\n');
		if (node->kind == NODE_PERMIT)
			appendStringInfo(&client,
							 "Process %d waits for a permit of workload \"%s\"; blocked by process %d.",
							 node->pid, node->workload, cycle->nodes[i + 1].pid);
		else
			appendStringInfo(&client,
							 "Process %d waits for a lock; blocked by process %d.",
							 node->pid, cycle->nodes[i + 1].pid);
	}
	appendStringInfoString(&log, client.data);
	for (i = 0; i < cycle->n; i++)
	{
		const char *query =
			pgstat_get_backend_current_activity(cycle->nodes[i].pid, false);

		appendStringInfo(&log, "\nProcess %d: %s", cycle->nodes[i].pid, query);
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
			 errmsg("deadlock detected"),
			 errdetail_internal("%s", client.data),
			 errdetail_log("%s", log.data),
			 errhint("Acquire permits of several workloads in one fixed order, and take a permit before locking rows.")));
}

/*
 * bulkhead_blocking_pids(pid): for a backend queued for a permit, the pids
 * holding that workload's permits; an empty array for any other backend.
 */
Datum
bulkhead_blocking_pids(PG_FUNCTION_ARGS)
{
	int			pid = PG_GETARG_INT32(0);
	int			procno;
	int		   *pids;
	int		   *procnos;
	Datum	   *elems;
	PermitWait	wait;
	int			i;

	bulkhead_check_loaded();
	pids = palloc(sizeof(int) * bulkhead_shared->nbackends);
	procnos = palloc(sizeof(int) * bulkhead_shared->nbackends);
	elems = palloc(sizeof(Datum) * bulkhead_shared->nbackends);
	wait.nholders = 0;
	procno = procno_of_pid(pid);
	if (procno < 0 || procno >= bulkhead_shared->nbackends ||
		!bulkhead_read_permit_wait(procno, pid, pids, procnos, &wait))
		wait.nholders = 0;
	for (i = 0; i < wait.nholders; i++)
		elems[i] = Int32GetDatum(pids[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, wait.nholders, INT4OID,
										  sizeof(int32), true, TYPALIGN_INT));
}
