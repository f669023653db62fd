/*-------------------------------------------------------------------------
 *
 * grantlevel.c
 *	  Memory grants (1.4): the levels' counters along a grant's path, its
 *	  workload, the budgets above it as they are now, and the server.
 *	  The arithmetic of grants.c (the decisions, the queue) and of
 *	  grantstate.c (a load that moves a workload to another budget); every
 *	  function here is called with the grants' lock held, and none throws.
 *
 * Owns the grants' shared memory pointer and bulkhead.max_memory's
 * variable (defined in grantstate.c's init).  Called by grants.c and
 * grantstate.c; calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/grantlevel.h"

int			bulkhead_max_memory_kb = -1;

BulkheadGrants *bulkhead_grants_shared = NULL;

/*
 * The levels a grant counts at now: its workload (unless the slot serves
 * another since) and the budgets above it as they are now (a workload that
 * moves to another budget carries its subtree's figures there:
 * bulkhead_grants_reparent).  Returns how many, into path.
 */
int
bulkhead_grants_path_of(const BulkheadGrant *g, int16 *path)
{
	int			s = g->slot;
	int			n = 0;

	if (s < 0 || bulkhead_grants_shared->levels[s].generation != g->generation)
		return 0;
	while (s >= 0 && n < BULKHEAD_MEM_PATH)
	{
		path[n++] = (int16) s;
		s = bulkhead_grants_shared->levels[s].parent;
	}
	return n;
}

void
bulkhead_grants_make_path(int slotno, BulkheadGrant *g)
{
	g->bytes = 0;
	g->slot = (int16) slotno;
	g->generation = slotno >= 0 ? bulkhead_grants_shared->levels[slotno].generation : 0;
}

/*
 * Would bytes fit at every level of g's path?  shadow_too: at levels in
 * shadow mode as well.
 */
bool
bulkhead_grants_fits(const BulkheadGrant *g, int64 bytes, bool shadow_too)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int			i;

	if (short_of(&bulkhead_grants_shared->server, bulkhead_grants_server_max(),
				 bytes, false))
		return false;
	for (i = 0; i < n; i++)
	{
		MemLevel   *level = &bulkhead_grants_shared->levels[path[i]];

		if (short_of(level, level->max_memory, bytes, shadow_too))
			return false;
	}
	return true;
}

/* The most that is free at every level; the smallest limit, for cut */
int64
bulkhead_grants_free_along(const BulkheadGrant *g, bool cut)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int64		smax = bulkhead_grants_server_max();
	int64		avail = PG_INT64_MAX;
	int			i;

	if (smax >= 0)
		avail = cut ? smax : Max(smax - bulkhead_grants_shared->server.granted, 0);
	for (i = 0; i < n; i++)
	{
		MemLevel   *level = &bulkhead_grants_shared->levels[path[i]];

		if (bounds(level, level->max_memory, false))
			avail = Min(avail, cut ? level->max_memory :
						Max(level->max_memory - level->granted, 0));
	}
	return avail;
}

void
bulkhead_grants_add_along(const BulkheadGrant *g, int64 bytes)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int			i;

	add_to(&bulkhead_grants_shared->server, bytes);
	for (i = 0; i < n; i++)
		add_to(&bulkhead_grants_shared->levels[path[i]], bytes);
}

void
bulkhead_grants_count_waiting(const BulkheadGrant *g, int delta)
{
	int16		path[BULKHEAD_MEM_PATH];
	int			n = bulkhead_grants_path_of(g, path);
	int			i;

	bulkhead_grants_shared->server.waiting += delta;
	for (i = 0; i < n; i++)
		bulkhead_grants_shared->levels[path[i]].waiting += delta;
}

/*
 * Level slotno leaves the budgets above it for
 * new_parent's: the figures of its subtree (granted, waiting) go with it,
 * so that each grant is counted where its workload is now, and its
 * release, which walks the path as it is then, takes it back there.
 */
void
bulkhead_grants_reparent(int slotno, int new_parent)
{
	MemLevel   *levels = bulkhead_grants_shared->levels;
	MemLevel   *level = &levels[slotno];
	int			depth = 0;
	int			s;

	for (s = level->parent; s >= 0 && depth++ < BULKHEAD_MEM_PATH; s = levels[s].parent)
	{
		levels[s].granted = Max(levels[s].granted - level->granted, 0);
		levels[s].waiting = Max(levels[s].waiting - level->waiting, 0);
	}
	level->parent = (int16) new_parent;
	depth = 0;
	for (s = new_parent; s >= 0 && depth++ < BULKHEAD_MEM_PATH; s = levels[s].parent)
	{
		add_to(&levels[s], level->granted);
		levels[s].waiting += level->waiting;
	}
}

/* Is level slotno above (or at) level of, along of's path as it is now? */
bool
bulkhead_grants_above(int slotno, int of)
{
	int			depth = 0;
	int			s;

	for (s = of; s >= 0 && depth++ < BULKHEAD_MEM_PATH; s = bulkhead_grants_shared->levels[s].parent)
		if (s == slotno)
			return true;
	return false;
}

/*
 * The hints read without the lock: each level's limited (a max_memory at
 * it or above), and how many defined levels have a max_memory.
 */
void
bulkhead_grants_mark_limits(void)
{
	MemLevel   *levels = bulkhead_grants_shared->levels;
	uint32		nlimits = 0;
	int			i;

	for (i = 0; i < bulkhead_grants_shared->nslots; i++)
	{
		int			s = i;
		int			depth = 0;
		bool		limited = false;

		if (levels[i].defined && levels[i].max_memory >= 0)
			nlimits++;
		while (s >= 0 && depth++ < BULKHEAD_MEM_PATH && !limited)
		{
			limited = levels[s].defined && levels[s].max_memory >= 0;
			s = levels[s].parent;
		}
		levels[i].limited = limited;
	}
	pg_atomic_write_u32(&bulkhead_grants_shared->nlimits, nlimits);
}
