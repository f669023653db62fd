/*-------------------------------------------------------------------------
 *
 * deadlock.c
 *	  Deadlocks through permits: the check a permit waiter runs after
 *	  deadlock_timeout, and bulkhead_blocking_pids().
 *
 * PostgreSQL's deadlock detector sees heavyweight-lock waits only; a wait
 * for a permit is a latch wait, invisible to it.  So a permit waiter checks
 * for itself, after deadlock_timeout of waiting and then for as long as it
 * waits (a permit wait, unlike a lock wait, can become deadlocked long after
 * it began: when the last holder that could still release starts to wait).
 * The search itself ("the full check") runs only when what it would read
 * may have changed; see "When the search runs" below.
 * This file only reads shared state and decides; the wait it finds
 * deadlocked is ended by permit.c (bulkhead_end_wait_deadlocked), the only
 * writer of slot state.
 *
 * The wait graph
 * --------------
 * Its nodes are backends; its edges say who waits for whom:
 *   - a backend queued for a permit of workload w waits for every backend
 *     holding a permit of w (read under w's slot lock);
 *   - a backend waiting for a heavyweight lock waits for the backends that
 *     pg_blocking_pids() names (hard and soft edges, lock groups merged);
 *   - any other backend waits for nothing here: it can make progress.
 * The two kinds of edges do not mean the same.  A lock waiter goes on only
 * once every backend blocking it has moved; a permit waiter could go on as
 * soon as any one holder releases (FIFO decides which waiter gets that
 * permit, see below).
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
 * the permit to the head waiter; with running >= current_limit, checked last,
 * nothing else grants).  If they are all stuck, none releases, so W waits
 * whatever the FIFO order; and each holder's path back to W closes a cycle
 * through W.  Only an outside action (cancel, timeout, terminate, a raised
 * limit) could end it, as for a lock-manager deadlock.
 *
 * Complete (for counting semaphores with FIFO hand-off).  Take a state in
 * which W's wait can never end and every holder waits, through others, for
 * W.  Every backend on those paths is stuck (induction on how Prog is built:
 * none of them can be the first to enter it), so the rule holds and W's
 * next search reports it ("When the search runs" below says how soon that
 * is).  FIFO matters only while some holder can still move: its release
 * serves the head waiter, which may not be W; then W is not deadlocked
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
 *   3. Last, under W's own slot lock, permit.c confirms that W's entry is
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
 * Completeness stays: a deadlock, once formed at time D, lasts, so from D
 * on no test A passes, no search proves anything, and no proof is dated
 * after D; B and C hold for at most the back-off cap after the last proof.
 * A state change that closes it at a holder of the waiter's workload (a
 * holder that starts to wait, holders that change) fails A and C at the
 * next test of every waiter, and one in a backend of a waiter's last graph
 * fails that waiter's B: its search then finds the deadlock, or finds its
 * own root stuck and withdraws the workload's proof.  So a deadlock is
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
 */
#include "bulkhead.h"
#include "deadlock.h"
#include "entry_list.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(bulkhead_blocking_pids);

/*
 * A checker that finds the token taken tests again after this long (or
 * deadlock_timeout if shorter).  Not much sooner: the search under way often
 * answers for it too (test C), and hundreds of waiters polling the token
 * every few milliseconds while a search runs would cost more than the
 * search.
 */
#define BUSY_RETRY_MS	100

/* The back-off of test B: 30 x deadlock_timeout, at most 10 s */
#define BACKOFF_FACTOR	30
#define BACKOFF_MAX_MS	10000

/* What the last check did (both passes), for its DEBUG1 line */
static int	checked_backends;
static int	lock_queries;

typedef enum NodeKind
{
	NODE_FREE,					/* waits for nothing we know of */
	NODE_PERMIT,				/* queued for a permit */
	NODE_LOCK					/* waiting for a heavyweight lock */
} NodeKind;

/* One backend of the wait graph */
typedef struct WaitNode
{
	int			pid;
	int			procno;
	NodeKind	kind;
	bool		progress;		/* in Prog (see the header) */
	int			dist;			/* edges to the root through stuck nodes, or -1 */
	uint64		stamp;			/* identifies the wait and its edges */
	uint64		state;			/* its state as test B reads it (state_of) */
	bool		unsure;			/* read in passing: B cannot vouch for it */
	int			first_edge;		/* in WaitGraph.edges */
	int			nedges;
	char		workload[NAMEDATALEN];	/* NODE_PERMIT */
} WaitNode;

/* The graph reachable from this backend (node 0) */
typedef struct WaitGraph
{
	int			nnodes;
	WaitNode   *nodes;			/* at most one per PGPROC */
	int		   *node_of;		/* PGPROC number -> node, or -1 */
	int			nedges;
	int			max_edges;
	int		   *edges;			/* target nodes */
	int		   *pids;			/* scratch: one permit wait's holders */
	int		   *procnos;		/* scratch: and their PGPROC numbers */
	uint64		root_holders;	/* holders stamp of the root's workload */
	int			root_slot;		/* the root's workload */
} WaitGraph;

/* The permit wait of one backend, as read under its slot lock */
typedef struct PermitWait
{
	int			slotno;
	int			nholders;
	uint64		wait_id;		/* the entry and its arrival */
	uint64		stamp;			/* the same, and the holders */
	uint64		holders_stamp;
	/* the slot's dl_ fields: the workload's last proof */
	uint64		dl_holders;
	uint64		dl_holder_states;
	TimestampTz dl_proved_at;
	int64		dl_interval_us;
	char		workload[NAMEDATALEN];
} PermitWait;

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

/* A 64-bit mix (splitmix64's finaliser), so that stamps rarely collide */
static uint64
mix64(uint64 x)
{
	x ^= x >> 30;
	x *= UINT64CONST(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64CONST(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

uint64
bulkhead_holders_stamp(BulkheadSlot *slot)
{
	BulkheadEntry *entry;
	uint64		stamp = 0;

	/* a sum: independent of the order of the list */
	entry_list_foreach(entry, &slot->holders)
		stamp += mix64(((uint64) entry_index(entry) << 1 | 1) ^
					   mix64((uint64) entry->since));
	return stamp;
}

/*
 * Is backend pid (PGPROC number procno) queued for a permit?  If so, copy
 * the pids of its workload's holders into pids and their PGPROC numbers
 * into procnos (room for one per PGPROC each) and describe the wait in
 * *wait.  Takes the workload's slot lock shared.
 */
static bool
read_permit_wait(int procno, int pid, int *pids, int *procnos,
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
		LWLockAcquire(slot->lock, LW_SHARED);
		if (e->workload == slotno && e->state == BULKHEAD_ENTRY_WAITING &&
			e->pid == pid)
		{
			BulkheadEntry *holder;

			wait->nholders = 0;
			entry_list_foreach(holder, &slot->holders)
			{
				pids[wait->nholders] = holder->pid;
				procnos[wait->nholders++] =
					entry_index(holder) / bulkhead_shared->permits_per_backend;
			}
			wait->slotno = slotno;
			wait->holders_stamp = bulkhead_holders_stamp(slot);
			wait->wait_id = mix64(((uint64) entry_index(&entries[i]) << 1) ^
								  mix64((uint64) e->queued_at));
			wait->stamp = wait->wait_id + wait->holders_stamp;
			wait->dl_holders = slot->dl_holders;
			wait->dl_holder_states = slot->dl_holder_states;
			wait->dl_proved_at = slot->dl_proved_at;
			wait->dl_interval_us = slot->dl_interval_us;
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
	return mix64(start ^ UINT64CONST(0x6c6f636b77616974)) | 1;
}

/*
 * What backend pid (PGPROC number procno) waits for, as test B compares it:
 * its permit wait's stamp, lock_state() of its lock wait, 0 when it waits
 * for neither, 1 when procno is no longer pid's.  pids and procnos are
 * scratch (one per PGPROC).
 */
static uint64
state_of(int procno, int pid, int *pids, int *procnos)
{
	volatile PGPROC *proc = GetPGProcByNumber(procno);
	PermitWait	wait;
	uint64		start;

	if (proc->pid != pid)
		return 1;
	if (read_permit_wait(procno, pid, pids, procnos, &wait))
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
	checked_backends++;

	if (read_permit_wait(node->procno, pid, g->pids, g->procnos, &wait))
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
	lock_queries++;
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
	node->stamp = mix64((uint64) start);
	for (i = 0; i < nblockers; i++)
	{
		int			bpid = DatumGetInt32(bpids[i]);
		int			t = node_of_pid(g, bpid);

		node->stamp += mix64((uint64) (uint32) bpid << 1 | 1);
		/* a blocker that is no backend (a prepared transaction) is left out */
		if (t >= 0)
			add_edge(g, n, t);
	}
}

/* Build the graph reachable from this backend, and the rule's sets */
static WaitGraph *
build_graph(void)
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
static bool
is_deadlocked(WaitGraph *g)
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
static bool
same_waits(WaitGraph *first, WaitGraph *second)
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

/* The cycle to report: node indexes from the root back to it */
typedef struct DeadlockCycle
{
	int			n;
	WaitNode   *nodes;			/* n + 1: the last one is the root again */
} DeadlockCycle;

static DeadlockCycle *
cycle_of(WaitGraph *g)
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

/* The interval of test B that follows interval_us */
static int64
next_interval(int64 interval_us)
{
	int64		dt = (int64) DeadlockTimeout * 1000;
	int64		cap = Max(dt, Min(dt * BACKOFF_FACTOR,
								  (int64) BACKOFF_MAX_MS * 1000));

	return Min(Max(interval_us * 2, dt), cap);
}

/*
 * The search began at start and found this wait able to end (its root in
 * Prog: some holder can move): write that into the slot, for test C of the
 * other waiters.  The workload's interval doubles while its holders stay.
 */
static void
publish_proof(int slotno, uint64 holders, uint64 states, TimestampTz start)
{
	BulkheadSlot *slot = &bulkhead_shared->slots[slotno];

	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	if (slot->dl_holders != holders || slot->dl_interval_us == 0)
	{
		slot->dl_holders = holders;
		slot->dl_holder_states = states;
		slot->dl_interval_us = (int64) DeadlockTimeout * 1000;
		slot->dl_proved_at = start;
	}
	else if (start > slot->dl_proved_at)
	{
		slot->dl_holder_states = states;
		slot->dl_interval_us = next_interval(slot->dl_interval_us);
		slot->dl_proved_at = start;
	}
	LWLockRelease(slot->lock);
}

/*
 * The search found this wait stuck (its root not in Prog): no holder of the
 * workload could be shown to move.  Withdraw the workload's proof for these
 * holders, so that the other waiters search for themselves (a waiter of the
 * workload may be deadlocked now).
 */
static void
withdraw_proof(int slotno, uint64 holders)
{
	BulkheadSlot *slot = &bulkhead_shared->slots[slotno];

	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	if (slot->dl_holders == holders)
		slot->dl_proved_at = 0;
	LWLockRelease(slot->lock);
}

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
		sum += mix64(h->state ^ (uint64) h->procno);
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
 * waits, have permit.c end the wait.  Returns the cycle when it did.  A
 * search that began at start and finds nothing is remembered for the tests.
 */
static DeadlockCycle *
find_deadlock(TimestampTz start)
{
	WaitGraph  *first;
	WaitGraph  *second;

	memo.valid = false;
	memo.must_search = false;
	first = build_graph();
	if (!is_deadlocked(first))
	{
		remember_graph(first);
		memo.proved_at = start;
		memo.backoff_us = memo.forced ? next_interval(memo.backoff_us) :
			(int64) DeadlockTimeout * 1000;
		if (first->nnodes > 0 && first->root_slot >= 0)
		{
			if (first->nodes[0].progress)
				publish_proof(first->root_slot, first->root_holders,
							  holder_states(first), start);
			else
				withdraw_proof(first->root_slot, first->root_holders);
		}
		return NULL;
	}
	second = build_graph();
	if (!is_deadlocked(second) || !same_waits(first, second))
		return NULL;
	if (!bulkhead_end_wait_deadlocked(second->root_holders))
		return NULL;
	return cycle_of(second);
}

/* Raise 40P01, in the form of PostgreSQL's DeadLockReport */
static void
report_deadlock(DeadlockCycle *cycle)
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

static bool
take_token(void)
{
	uint32		expected = 0;

	return pg_atomic_compare_exchange_u32(&bulkhead_shared->deadlock_checker,
										  &expected, BULKHEAD_MY_PROCNO + 1);
}

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

		state = state_of(procno, pid, memo.scratch_pids, memo.scratch_procnos);
		/* waits for nothing (0), or gone (1): the reaper frees its permit */
		if (state <= 1)
			return true;
		*states += mix64(state ^ (uint64) procno);
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

		if (state_of(node->procno, node->pid, memo.scratch_pids,
					 memo.scratch_procnos) !=
			node->state)
			return false;
	}
	return true;
}

/*
 * May this check skip the search (tests A, B and C in the header)?  root is
 * this backend's wait, just read.  Sets memo.forced when the search is due
 * to the back-off only.
 */
static bool
may_skip_search(PermitWait *root, TimestampTz now)
{
	bool		same_holders = root->dl_proved_at != 0 &&
		root->dl_holders == root->holders_stamp;
	bool		unchanged;
	uint64		states;

	memo.forced = false;
	unchanged = graph_unchanged(root);
	if (memo.valid && !unchanged)
		memo.must_search = true;	/* until a search has run */
	if (!unchanged)
		memo.valid = false;		/* B stays off until the next search */

	/* B */
	if (unchanged &&
		(now < memo.proved_at + memo.backoff_us ||
		 (same_holders && now < root->dl_proved_at + root->dl_interval_us)))
		return true;

	/* A: a holder that can move is proof enough, whatever B says */
	if (some_holder_free(root, &states))
	{
		memo.proved_at = now;
		return true;
	}

	/*
	 * C; not when this waiter has seen its graph change since its last
	 * search: then it is the one that must search (the proof may not cover
	 * what it saw)
	 */
	if (!memo.must_search &&
		same_holders && states != 0 && states == root->dl_holder_states &&
		now < root->dl_proved_at + root->dl_interval_us)
		return true;

	memo.forced = unchanged;
	return false;
}

TimestampTz
bulkhead_deadlock_check(TimestampTz now)
{
	MemoryContext cxt;
	MemoryContext old;
	DeadlockCycle *volatile cycle = NULL;
	TimestampTz done;
	PermitWait	root;

	if (memo.nodes == NULL)
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

	/* this backend's wait, and whether it is a new one */
	if (!read_permit_wait(BULKHEAD_MY_PROCNO, MyProcPid, memo.pids,
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
	if (may_skip_search(&root, now))
		return TimestampTzPlusMilliseconds(now, DeadlockTimeout);

	if (!take_token())
		return TimestampTzPlusMilliseconds(now, Min(BUSY_RETRY_MS, DeadlockTimeout));
	checked_backends = 0;
	lock_queries = 0;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "bulkhead deadlock check",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		cycle = find_deadlock(now);
	}
	PG_FINALLY();
	{
		bulkhead_deadlock_exit();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	/* test/bench/deadlock_check.sh reads this to time the check */
	done = GetCurrentTimestamp();
	elog(DEBUG1, "bulkhead deadlock check: %d backends read, %d lock waits asked about, %lld us%s",
		 checked_backends, lock_queries, (long long) (done - now),
		 memo.forced ? " (back-off)" : "");

	/* the wait is over: the error frees cxt with its parent */
	if (cycle != NULL)
		report_deadlock(cycle);
	MemoryContextDelete(cxt);
	return TimestampTzPlusMilliseconds(done, DeadlockTimeout);
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
		!read_permit_wait(procno, pid, pids, procnos, &wait))
		wait.nholders = 0;
	for (i = 0; i < wait.nholders; i++)
		elems[i] = Int32GetDatum(pids[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, wait.nholders, INT4OID,
										  sizeof(int32), true, TYPALIGN_INT));
}
