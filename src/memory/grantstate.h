/*-------------------------------------------------------------------------
 *
 * grantstate.h
 *	  Memory grants (1.4): their shared memory, the worker's copy of each
 *	  workload's limit and place in its tree, and what the views read
 *	  (grantstate.c).  The locks are grants.h's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_GRANTSTATE_H
#define BULKHEAD_GRANTSTATE_H

#include "shmem/base.h"
#include "shmem/stats.h"

/* Is any memory limit set (a workload's, or the server's)?  No lock. */
extern bool bulkhead_grants_active(void);
/* Has workload slotno (or a budget above it) a max_memory?  No lock. */
extern bool bulkhead_grants_limited(int slotno);

/*
 * The worker's load: the limits, the shadow modes and the trees.  First
 * each slot that now serves another workload is claimed for it (its old
 * workload's grants leave its levels), then every slot in use defined
 * (moving a workload to another budget carries its subtree's grants there;
 * a deleted workload that still holds or awaits anything keeps its limit
 * and its place), a free one undefined.  A slot's limits and its place
 * under its budget are set (prepared) before the slot takes its workload's
 * definition, budgets before their children, so that no statement of the
 * workload runs before them; the load's end makes the places those of the
 * trees it built (a cycle made a root).
 */
extern void bulkhead_grants_claim(int slotno, const char *name);
/*
 * A slot's limits and its budget's slot (parent, -1: none), before the
 * slot takes the workload
 */
extern void bulkhead_grants_prepare(int slotno, const char *name,
									int64 max_memory, int64 timeout_us,
									bool shadow, int parent);
extern void bulkhead_grants_define(int slotno, const char *name,
								   int64 max_memory, int64 timeout_us,
								   bool shadow, int parent);
extern void bulkhead_grants_undefine(int slotno);

/* What bulkhead_memory and the views show */
typedef struct BulkheadMemFigures
{
	int64		granted;
	int			waiting;
	int64		max_memory;		/* -1: none */
} BulkheadMemFigures;

extern void bulkhead_grants_level(int slotno, const char *name,
								  BulkheadMemFigures *out);

typedef struct BulkheadMemBackendRow
{
	int			pid;
	int			procno;
	int			slot;			/* charged workload, -1: none */
	char		workload[NAMEDATALEN];	/* its name ("": none) */
	bool		waiting;
	int64		requested;
	int64		granted;
	int			importance;		/* BulkheadImportance of its last request */
	int			boost;			/* BulkheadBoost: its wait (or the one its
								 * grant came from) was a lock holder's,
								 * served ahead (AHEAD) or over the limit
								 * (BORROWED) */
} BulkheadMemBackendRow;

extern int	bulkhead_grants_backends(BulkheadMemBackendRow *rows, int max);

/* The server's figures (bulkhead_memory) and their reset */
typedef struct BulkheadMemServer
{
	BulkheadMemFigures now;
	uint64		waits;
	uint64		shrunk;
	BulkheadHistogram wait_hist;
	TimestampTz stats_reset;
} BulkheadMemServer;

extern void bulkhead_grants_server(BulkheadMemServer *out);
extern void bulkhead_grants_take_peaks(int64 *peaks, int64 *server);
extern void bulkhead_grants_server_reset(void);

/* Shared memory */
extern void bulkhead_grants_shmem_request(void);
extern void bulkhead_grants_shmem_startup(void);
extern void bulkhead_grants_init(void);

#endif							/* BULKHEAD_GRANTSTATE_H */
