/*-------------------------------------------------------------------------
 *
 * grantqueue.c
 *	  Memory grants: the waiters' queue and its order (1.4's arrival order,
 *	  1.5's ranks).  One list of the server's waiters, linked through
 *	  backends[] in arrival order; the order it is served in is worked out
 *	  at each serve, since aging changes it as time passes.
 *
 * Order.  Freed memory serves the waiters by rank, then in the order they
 * began to wait.  The rank (importance.h) is BULKHEAD_RANK_BOOSTED for a
 * lock holder someone waits for (grants.c asks while it waits), else the
 * importance its wait carries (taken when it began), raised one step per
 * bulkhead.aging_interval of waiting, up to high.  A waiter that cannot be
 * served blocks, for every waiter after it in that order, its own workload
 * (so that a later or lower-ranked, smaller request of the same workload
 * does not overtake it) and each level where it is short (so that nothing
 * after it takes what it waits for); a waiter of another tree, where
 * memory is free, is served.
 *
 * Small requests (1.5).  A request under bulkhead.small_memory_request
 * (as requested, before a level's limit cuts it) is served while it fits
 * at every level of its path and the server's, even when a larger one
 * waits before it, as SQL Server's small-query semaphore: a new one is
 * granted at once when it fits (the walk is not even made), a queued one
 * when it fits at a serve, in its place in the order above, whatever the
 * waiters before it block.  Whether a wait is small is decided when it
 * begins (its backend's setting then; a reload changes the waits that
 * begin after it).  A small waiter that does not fit blocks what it is
 * short of, as any other, so that a larger one after it does not take what
 * it waits for.  The hard bound is unchanged (nothing is granted that does
 * not fit), and so is the order among the others.  Starvation: a stream of
 * small requests that keeps a level's memory in use can keep a larger
 * waiter from being served; its wait still ends at its memory_timeout, and
 * it runs then with what is free, shrunk (grants.c).  What the smalls hold
 * at once is at most their running statements times the threshold.
 *
 * Cost.  With every waiter normal and none boosted (nranked 0), ranks fall
 * as arrival rises (an older waiter has aged at least as much), so the
 * order is arrival's: the list is walked once, as in 1.4, with no clock
 * read.  Otherwise once per rank, from the highest down.
 *
 * Everything here but bulkhead_grants_queue_ready (this backend's scratch,
 * allocated before the lock by an acquire or the end of a load) runs with
 * the grants' lock held exclusively (grants.h) and throws nothing.  Called
 * by grants.c; calls grantlevel.c and importance.h (the rank).
 *
 *-------------------------------------------------------------------------
 */
#include "memory/grantqueue.h"
#include "workload/importance.h"

#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/*---- GUC variables ----*/

/* bulkhead.small_memory_request, kB: 1MB; 0 turns it off */
int			bulkhead_small_memory_request_kb = 1024;

/* Scratch of this backend for the queue's order: a stamp per level */
static uint32 *marks = NULL;
static uint32 stamp = 0;

#define SERVER_MARK(g)	((g)->nslots)

/* Does waiter b count in nranked (an order other than arrival's)? */
static inline bool
ranked(const MemBackend *b)
{
	return b->importance != BULKHEAD_IMPORTANCE_NORMAL ||
		b->boost != BULKHEAD_BOOST_NONE;
}

void
bulkhead_grants_queue_push(int procno)
{
	MemBackend *b = &bulkhead_grants_shared->backends[procno];

	b->small = bulkhead_grants_small(b->want_requested);
	b->prev = bulkhead_grants_shared->tail;
	b->next = -1;
	if (bulkhead_grants_shared->tail >= 0)
		bulkhead_grants_shared->backends[bulkhead_grants_shared->tail].next = procno;
	else
		bulkhead_grants_shared->head = procno;
	bulkhead_grants_shared->tail = procno;
	if (ranked(b))
		bulkhead_grants_shared->nranked++;
}

void
bulkhead_grants_queue_remove(int procno)
{
	MemBackend *b = &bulkhead_grants_shared->backends[procno];

	if (b->prev >= 0)
		bulkhead_grants_shared->backends[b->prev].next = b->next;
	else
		bulkhead_grants_shared->head = b->next;
	if (b->next >= 0)
		bulkhead_grants_shared->backends[b->next].prev = b->prev;
	else
		bulkhead_grants_shared->tail = b->prev;
	b->prev = b->next = -1;
	if (ranked(b))
		bulkhead_grants_shared->nranked--;
}

void
bulkhead_grants_queue_boost(int procno, int boost)
{
	MemBackend *b = &bulkhead_grants_shared->backends[procno];

	if (ranked(b))
		bulkhead_grants_shared->nranked--;
	b->boost = (uint8) boost;
	if (ranked(b))
		bulkhead_grants_shared->nranked++;
}

void
bulkhead_grants_queue_ready(void)
{
	if (marks == NULL)
		marks = MemoryContextAllocZero(TopMemoryContext,
									   sizeof(uint32) * (bulkhead_grants_shared->nslots + 1));
}

static void
marks_begin(void)
{
	Assert(marks != NULL);
	if (++stamp == 0)
	{
		memset(marks, 0, sizeof(uint32) * (bulkhead_grants_shared->nslots + 1));
		stamp = 1;
	}
}

static bool
blocked(const BulkheadGrant *g)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int			i;

	if (marks[SERVER_MARK(bulkhead_grants_shared)] == stamp)
		return true;
	for (i = 0; i < n; i++)
		if (marks[path[i]] == stamp)
			return true;
	return false;
}

/* A waiter not served blocks its workload and where it is short */
static void
mark_unserved(const BulkheadGrant *g, int64 bytes)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int			i;

	if (n == 0 || short_of(&bulkhead_grants_shared->server,
						   bulkhead_grants_server_max(), bytes, false))
		marks[SERVER_MARK(bulkhead_grants_shared)] = stamp;
	for (i = 0; i < n; i++)
	{
		MemLevel   *level = &bulkhead_grants_shared->levels[path[i]];

		if (i == 0 || short_of(level, level->max_memory, bytes, false))
			marks[path[i]] = stamp;
	}
}

static void
wake_later(MemWakeups *w, int procno)
{
	if (w->n < MEM_WAKE_BATCH)
		w->procnos[w->n++] = procno;
	else
		SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

void
bulkhead_grants_wake_all(MemWakeups *w)
{
	int			i;

	for (i = 0; i < w->n; i++)
		SetLatch(&GetPGProcByNumber(w->procnos[i])->procLatch);
	w->n = 0;
}

/* Waiter p's wait is granted whole */
static void
grant_waiter(int p, MemWakeups *w)
{
	MemBackend *b = &bulkhead_grants_shared->backends[p];

	bulkhead_grants_queue_remove(p);
	bulkhead_grants_count_waiting(&b->wait, -1);
	bulkhead_grants_add_along(&b->wait, b->want);
	b->wait.bytes = b->want;
	b->held += b->want;
	pg_write_barrier();
	b->state = MEM_GRANTED;
	wake_later(w, p);
}

/*
 * One pass over the list in arrival order, visiting the waiters of rank
 * (all when rank < 0): each is served when it fits and nothing before it
 * blocks it (w NULL: only looked at), else marks what it blocks.
 */
static void
visit(int rank, TimestampTz now, MemWakeups *w)
{
	int			p = bulkhead_grants_shared->head;

	while (p >= 0)
	{
		MemBackend *b = &bulkhead_grants_shared->backends[p];
		int			next = b->next;

		if (rank < 0 ||
			bulkhead_importance_rank(b->importance, b->boost, b->queued_at, now) == rank)
		{
			if ((b->small || !blocked(&b->wait)) &&
				bulkhead_grants_fits(&b->wait, b->want, false))
			{
				if (w != NULL)
					grant_waiter(p, w);
			}
			else
				mark_unserved(&b->wait, b->want);
		}
		p = next;
	}
}

/*
 * Visit the waiters ranked min_rank or above in the order they are served
 * (see the header: arrival's alone, in one pass, when nothing is ranked
 * and min_rank is at most normal).
 */
static void
walk(int min_rank, MemWakeups *w)
{
	TimestampTz now;
	int			r;

	marks_begin();
	if (bulkhead_grants_shared->nranked == 0 && min_rank <= BULKHEAD_IMPORTANCE_NORMAL)
	{
		visit(-1, 0, w);
		return;
	}
	now = GetCurrentTimestamp();
	for (r = BULKHEAD_RANK_BOOSTED; r >= min_rank; r--)
		visit(r, now, w);
}

bool
bulkhead_grants_queue_blocks(const BulkheadGrant *g, int64 bytes,
							 int64 requested, bool shadow_too, int importance)
{
	if (bulkhead_grants_small(requested))
		return !bulkhead_grants_fits(g, bytes, shadow_too);
	walk(importance, NULL);
	return blocked(g) || !bulkhead_grants_fits(g, bytes, shadow_too);
}

void
bulkhead_grants_serve(MemWakeups *w)
{
	walk(BULKHEAD_IMPORTANCE_LOW, w);
}

/*---- Settings ----*/

void
bulkhead_grants_queue_init(void)
{
	DefineCustomIntVariable("bulkhead.small_memory_request",
							"Memory requests under this size are granted while they fit, even when a larger request waits.",
							"0 turns it off: every request waits behind the waiters before it.",
							&bulkhead_small_memory_request_kb,
							1024, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}
