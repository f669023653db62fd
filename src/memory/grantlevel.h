/*-------------------------------------------------------------------------
 *
 * grantlevel.h
 *	  Memory grants (1.4): one grant a statement holds and the levels it is
 *	  counted at (grantlevel.c), and the shared structures of grants.c and
 *	  grantstate.c, the two halves of one owner (see grants.h for the
 *	  locks).  A module outside memory/ uses the type BulkheadGrant alone
 *	  (through grants.h), never the shared structures.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_GRANTLEVEL_H
#define BULKHEAD_GRANTLEVEL_H

#include "shmem/base.h"
#include "shmem/stats.h"

#include "port/atomics.h"
#include "storage/lwlock.h"

/* A workload and the budgets above it (at most 4 levels of budgets) */
#define BULKHEAD_MEM_PATH		6

/*
 * One grant a statement holds: what it added, and the workload it is
 * counted in (grants.c adds and subtracts it there, and at the budgets
 * above that workload as they are when it does)
 */
typedef struct BulkheadGrant
{
	int64		bytes;
	int16		slot;			/* its workload, -1: the server only */
	uint32		generation;		/* the workload's, when it was made: once
								 * the slot serves another, it counts at the
								 * server only */
} BulkheadGrant;

typedef enum MemState
{
	MEM_IDLE = 0,
	MEM_WAITING,				/* linked in the waiters' queue */
	MEM_GRANTED					/* its wait was granted, not seen yet */
} MemState;

typedef struct MemLevel
{
	int64		max_memory;		/* bytes; -1: no limit */
	int64		timeout_us;		/* memory_timeout, or queue_timeout */
	int16		parent;			/* slot of the budget above, -1: none */
	bool		shadow;
	bool		defined;
	bool		limited;		/* a max_memory here or above (no lock) */
	uint32		generation;
	char		name[NAMEDATALEN];
	int64		granted;		/* the subtree's */
	int			waiting;		/* the subtree's */
	int64		peak;			/* the most granted since the last
								 * bulkhead_grants_take_peaks */
} MemLevel;

typedef struct MemBackend
{
	int32		pid;
	int16		slot;			/* workload of its last request, -1: none */
	uint8		state;			/* MemState */
	int32		prev;			/* neighbours in the waiters' queue */
	int32		next;
	int64		requested;		/* its statements' requests (held, awaited) */
	int64		held;			/* bytes granted to it */
	int64		want;			/* the request it waits for (cut) */
	int64		want_requested; /* ... as requested */
	TimestampTz queued_at;
	uint8		importance;		/* BulkheadImportance of its last request
								 * (its wait's, taken when it began) */
	uint8		boost;			/* BulkheadBoost of its last wait: a lock
								 * holder served ahead, or over the limit */
	BulkheadGrant wait;			/* the path of the request it waits for */
	bool		small;			/* (1.5) its wait's request was under
								 * bulkhead.small_memory_request when it
								 * began: served while it fits, whoever
								 * waits before it.  Written by the backend
								 * itself, under the lock, as it joins the
								 * queue; read under the lock by whoever
								 * serves it */
} MemBackend;

typedef struct BulkheadGrants
{
	LWLock	   *lock;
	int			nslots;
	int			nbackends;
	pg_atomic_uint32 nlimits;	/* defined workloads with a max_memory */
	MemLevel	server;			/* max_memory unused: bulkhead.max_memory */
	uint64		waits;			/* the server's figures */
	uint64		shrunk;
	BulkheadHistogram wait_hist;
	TimestampTz stats_reset;
	int32		head;			/* the waiters, oldest first */
	int32		tail;
	int			nranked;		/* waiters not normal or boosted: 0 keeps
								 * arrival order (grantqueue.c) */
	MemLevel   *levels;			/* nslots */
	MemBackend *backends;		/* nbackends */
} BulkheadGrants;

extern BulkheadGrants *bulkhead_grants_shared;

/*---- GUC variables ----*/
extern int	bulkhead_max_memory_kb; /* bulkhead.max_memory; -1: off */

/* bulkhead.max_memory in bytes; -1: off */
static inline int64
bulkhead_grants_server_max(void)
{
	return bulkhead_max_memory_kb < 0 ? -1 : (int64) bulkhead_max_memory_kb * 1024;
}

/*---- The levels along a grant's path (grantlevel.c; caller holds the lock) ----*/

/*
 * Does level (of limit max) bound a grant?  One in shadow mode does not,
 * but when shadow_too: what it would do, enforced.
 */
static inline bool
bounds(const MemLevel *level, int64 max, bool shadow_too)
{
	return max >= 0 && (shadow_too || !level->shadow);
}

/* Is level (limit max) short of bytes (an empty level takes any)? */
static inline bool
short_of(const MemLevel *level, int64 max, int64 bytes, bool shadow_too)
{
	return bounds(level, max, shadow_too) && level->granted > 0 &&
		level->granted + bytes > max;
}

static inline void
add_to(MemLevel *level, int64 bytes)
{
	level->granted = Max(level->granted + bytes, 0);
	level->peak = Max(level->peak, level->granted);
}

extern int	bulkhead_grants_path_of(const BulkheadGrant *g, int16 *path);
extern void bulkhead_grants_make_path(int slotno, BulkheadGrant *g);
extern bool bulkhead_grants_fits(const BulkheadGrant *g, int64 bytes, bool shadow_too);
extern int64 bulkhead_grants_free_along(const BulkheadGrant *g, bool cut);
extern void bulkhead_grants_add_along(const BulkheadGrant *g, int64 bytes);
extern void bulkhead_grants_count_waiting(const BulkheadGrant *g, int delta);
/* Level slotno moves under new_parent, its subtree's figures along */
extern void bulkhead_grants_reparent(int slotno, int new_parent);
/* Is level slotno above (or at) level of? */
extern bool bulkhead_grants_above(int slotno, int of);
/* The hints: each level's limited, and nlimits */
extern void bulkhead_grants_mark_limits(void);

#endif							/* BULKHEAD_GRANTLEVEL_H */
