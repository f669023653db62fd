/*-------------------------------------------------------------------------
 *
 * grantstate.c
 *	  Memory grants (1.4): the shared memory of grants.c, the worker's
 *	  copy of each workload's limit and place in its tree, what the views
 *	  read, and the settings.  grants.c makes and returns the grants.
 *
 * The locks are grants.h's; everything here takes the one LWLock for what
 * it reads or writes, and nothing here throws while it holds it.  Called by
 * bulkhead.c (shared memory, settings), loader.c (the load), memory.c
 * (whether a limit is set), history.c (the peaks), memviews.c and views.c;
 * calls grantlevel.c (the shared structure, the levels' arithmetic).
 *
 *-------------------------------------------------------------------------
 */
#include "memory/grantstate.h"
#include "memory/grantlevel.h"
#include "memory/grants.h"
#include "memory/memreq.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

/*---- Shared memory ----*/

static Size
grants_size(void)
{
	Size		size = MAXALIGN(sizeof(BulkheadGrants));

	size = add_size(size, MAXALIGN(mul_size(bulkhead_max_workloads, sizeof(MemLevel))));
	size = add_size(size, mul_size(bulkhead_backend_count(), sizeof(MemBackend)));
	return size;
}

void
bulkhead_grants_shmem_request(void)
{
	RequestAddinShmemSpace(grants_size());
	RequestNamedLWLockTranche("bulkhead grants", 1);
}

static void
init_level(MemLevel *level)
{
	memset(level, 0, sizeof(MemLevel));
	level->max_memory = -1;
	level->parent = -1;
}

void
bulkhead_grants_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bulkhead_grants_shared = ShmemInitStruct("bulkhead grants", grants_size(), &found);
	if (!found)
	{
		char	   *ptr = (char *) bulkhead_grants_shared + MAXALIGN(sizeof(BulkheadGrants));
		int			i;

		memset(bulkhead_grants_shared, 0, sizeof(BulkheadGrants));
		bulkhead_grants_shared->lock = &GetNamedLWLockTranche("bulkhead grants")[0].lock;
		bulkhead_grants_shared->nslots = bulkhead_max_workloads;
		bulkhead_grants_shared->nbackends = bulkhead_backend_count();
		pg_atomic_init_u32(&bulkhead_grants_shared->nlimits, 0);
		init_level(&bulkhead_grants_shared->server);
		bulkhead_grants_shared->stats_reset = GetCurrentTimestamp();
		bulkhead_grants_shared->head = bulkhead_grants_shared->tail = -1;
		bulkhead_grants_shared->levels = (MemLevel *) ptr;
		ptr += MAXALIGN(mul_size(bulkhead_grants_shared->nslots, sizeof(MemLevel)));
		bulkhead_grants_shared->backends = (MemBackend *) ptr;
		for (i = 0; i < bulkhead_grants_shared->nslots; i++)
			init_level(&bulkhead_grants_shared->levels[i]);
		for (i = 0; i < bulkhead_grants_shared->nbackends; i++)
		{
			memset(&bulkhead_grants_shared->backends[i], 0, sizeof(MemBackend));
			bulkhead_grants_shared->backends[i].slot = -1;
			bulkhead_grants_shared->backends[i].importance = BULKHEAD_IMPORTANCE_NORMAL;
			bulkhead_grants_shared->backends[i].prev = bulkhead_grants_shared->backends[i].next = -1;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*---- The worker's load ----*/

/* Caller holds the lock: level slotno serves workload name from now on */
static void
claim(int slotno, const char *name)
{
	MemLevel   *level = &bulkhead_grants_shared->levels[slotno];
	int			i;

	if (strcmp(level->name, name) == 0)
		return;

	/*
	 * Another workload: what was granted to the one before counts no more
	 * here, nor at the budgets it was under (only at the server); the
	 * workloads still under it leave it (their own definition puts them
	 * where they go)
	 */
	for (i = 0; i < bulkhead_grants_shared->nslots; i++)
		if (bulkhead_grants_shared->levels[i].parent == slotno)
			bulkhead_grants_reparent(i, -1);
	bulkhead_grants_reparent(slotno, -1);
	level->generation++;
	level->granted = 0;
	level->waiting = 0;
	level->peak = 0;
	strlcpy(level->name, name, NAMEDATALEN);
}

void
bulkhead_grants_claim(int slotno, const char *name)
{
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	claim(slotno, name);
	LWLockRelease(bulkhead_grants_shared->lock);
}

/* Level slotno's limits (its place in a tree apart); caller holds the lock */
static void
set_limits(int slotno, const char *name, int64 max_memory, int64 timeout_us,
		   bool shadow)
{
	MemLevel   *level = &bulkhead_grants_shared->levels[slotno];

	claim(slotno, name);
	level->defined = true;
	level->max_memory = max_memory;
	level->timeout_us = timeout_us;
	level->shadow = shadow;
}

void
bulkhead_grants_prepare(int slotno, const char *name, int64 max_memory,
						int64 timeout_us, bool shadow, int parent)
{
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	set_limits(slotno, name, max_memory, timeout_us, shadow);
	/* (not into a cycle: the load's trees make such a slot a root) */
	if (bulkhead_grants_shared->levels[slotno].parent != parent &&
		!bulkhead_grants_above(parent, slotno))
		bulkhead_grants_reparent(slotno, parent);
	bulkhead_grants_mark_limits();
	LWLockRelease(bulkhead_grants_shared->lock);
}

void
bulkhead_grants_define(int slotno, const char *name, int64 max_memory,
					   int64 timeout_us, bool shadow, int parent)
{
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	set_limits(slotno, name, max_memory, timeout_us, shadow);
	if (bulkhead_grants_shared->levels[slotno].parent != parent)
		bulkhead_grants_reparent(slotno, parent);	/* its subtree's figures go along */
	LWLockRelease(bulkhead_grants_shared->lock);
}

void
bulkhead_grants_undefine(int slotno)
{
	MemLevel   *level = &bulkhead_grants_shared->levels[slotno];

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	level->defined = false;
	level->max_memory = -1;
	level->shadow = false;
	if (level->parent >= 0)
		bulkhead_grants_reparent(slotno, -1);	/* a free slot's: none */
	LWLockRelease(bulkhead_grants_shared->lock);
}

bool
bulkhead_grants_active(void)
{
	return bulkhead_max_memory_kb >= 0 ||
		(bulkhead_grants_shared != NULL && pg_atomic_read_u32(&bulkhead_grants_shared->nlimits) > 0);
}

bool
bulkhead_grants_limited(int slotno)
{
	return bulkhead_max_memory_kb >= 0 ||
		(slotno >= 0 && bulkhead_grants_shared->levels[slotno].limited);
}

/*---- What the views show ----*/

void
bulkhead_grants_level(int slotno, const char *name, BulkheadMemFigures *out)
{
	MemLevel   *level = &bulkhead_grants_shared->levels[slotno];

	LWLockAcquire(bulkhead_grants_shared->lock, LW_SHARED);
	if (strcmp(level->name, name) == 0)
	{
		out->granted = level->granted;
		out->waiting = level->waiting;
		out->max_memory = level->defined ? level->max_memory : -1;
	}
	else
		memset(out, 0, sizeof(BulkheadMemFigures));
	LWLockRelease(bulkhead_grants_shared->lock);
}

int
bulkhead_grants_backends(BulkheadMemBackendRow *rows, int max)
{
	int			n = 0;
	int			i;

	LWLockAcquire(bulkhead_grants_shared->lock, LW_SHARED);
	for (i = 0; i < bulkhead_grants_shared->nbackends && n < max; i++)
	{
		MemBackend *b = &bulkhead_grants_shared->backends[i];

		if (b->requested == 0 && b->held == 0 && b->state != MEM_WAITING)
			continue;
		rows[n].pid = b->pid;
		rows[n].procno = i;
		rows[n].slot = b->slot;
		if (b->slot >= 0)
			strlcpy(rows[n].workload, bulkhead_grants_shared->levels[b->slot].name, NAMEDATALEN);
		else
			rows[n].workload[0] = '\0';
		rows[n].waiting = b->state == MEM_WAITING;
		rows[n].requested = b->requested;
		rows[n].granted = b->held;
		rows[n].importance = b->importance;
		rows[n].boost = b->boost;
		n++;
	}
	LWLockRelease(bulkhead_grants_shared->lock);
	return n;
}

void
bulkhead_grants_server(BulkheadMemServer *out)
{
	LWLockAcquire(bulkhead_grants_shared->lock, LW_SHARED);
	out->now.granted = bulkhead_grants_shared->server.granted;
	out->now.waiting = bulkhead_grants_shared->server.waiting;
	out->now.max_memory = bulkhead_grants_server_max();
	out->waits = bulkhead_grants_shared->waits;
	out->shrunk = bulkhead_grants_shared->shrunk;
	out->wait_hist = bulkhead_grants_shared->wait_hist;
	out->stats_reset = bulkhead_grants_shared->stats_reset;
	LWLockRelease(bulkhead_grants_shared->lock);
}

void
bulkhead_grants_server_reset(void)
{
	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	bulkhead_grants_shared->waits = 0;
	bulkhead_grants_shared->shrunk = 0;
	memset(&bulkhead_grants_shared->wait_hist, 0, sizeof(BulkheadHistogram));
	bulkhead_grants_shared->stats_reset = GetCurrentTimestamp();
	LWLockRelease(bulkhead_grants_shared->lock);
}

/*
 * The most granted at each level (peaks[slot], nslots of them) and the
 * server (*server) since the last call, which starts the next period from
 * what is granted now (the history, 1.4).
 */
void
bulkhead_grants_take_peaks(int64 *peaks, int64 *server)
{
	int			i;

	LWLockAcquire(bulkhead_grants_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < bulkhead_grants_shared->nslots; i++)
	{
		peaks[i] = bulkhead_grants_shared->levels[i].peak;
		bulkhead_grants_shared->levels[i].peak = bulkhead_grants_shared->levels[i].granted;
	}
	*server = bulkhead_grants_shared->server.peak;
	bulkhead_grants_shared->server.peak = bulkhead_grants_shared->server.granted;
	LWLockRelease(bulkhead_grants_shared->lock);
}

/*---- Settings ----*/

/*
 * bulkhead.max_memory is -1 (off) or at least 64 kB, as a workload's
 * max_memory is: 0 would not turn the limit off but shrink every statement
 * to its floors.
 */
static bool
check_max_memory(int *newval, void **extra, GucSource source)
{
	if (*newval == -1 || *newval >= BULKHEAD_MEM_FLOOR_KB)
		return true;
	GUC_check_errdetail("bulkhead.max_memory must be at least %d kB.",
						BULKHEAD_MEM_FLOOR_KB);
	GUC_check_errhint("Set it to -1 to turn the server's memory limit off.");
	return false;
}

void
bulkhead_grants_init(void)
{
	DefineCustomIntVariable("bulkhead.max_memory",
							"Memory the running statements of the whole server may be granted at once.",
							"-1 turns the server's limit off; otherwise at least 64 kB.",
							&bulkhead_max_memory_kb,
							-1, -1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_KB,
							check_max_memory, NULL, NULL);
}
