/*-------------------------------------------------------------------------
 *
 * waitgraph.h
 *	  The wait graph through permits and heavyweight locks, the rule that
 *	  finds a deadlock in it, and its report (waitgraph.c).
 *
 * Owns no shared state: it reads the slots (each under its lock, shared)
 * and PGPROCs, and builds its graph in the caller's memory context.
 * Called by deadlock.c (the check) and for bulkhead_blocking_pids.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_WAITGRAPH_H
#define BULKHEAD_WAITGRAPH_H

#include "shmem/shmem.h"

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
	int			nread;			/* backends read (for the DEBUG1 line) */
	int			nlock_queries;	/* pg_blocking_pids calls, likewise */
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
	int32		dl_prover;
	char		workload[NAMEDATALEN];
} PermitWait;

/* The cycle to report: node indexes from the root back to it */
typedef struct DeadlockCycle
{
	int			n;
	WaitNode   *nodes;			/* n + 1: the last one is the root again */
} DeadlockCycle;

extern bool bulkhead_read_permit_wait(int procno, int pid, int *pids,
									  int *procnos, PermitWait *wait);
extern uint64 bulkhead_wait_state(int procno, int pid, int *pids, int *procnos);
extern WaitGraph *bulkhead_build_graph(void);
extern bool bulkhead_graph_deadlocked(WaitGraph *g);
extern bool bulkhead_graph_same_waits(WaitGraph *first, WaitGraph *second);
extern DeadlockCycle *bulkhead_graph_cycle(WaitGraph *g);
/* PG 18 replaced pg_attribute_noreturn() with pg_noreturn */
#if PG_VERSION_NUM >= 180000
pg_noreturn extern void bulkhead_report_deadlock(DeadlockCycle *cycle);
#else
extern void bulkhead_report_deadlock(DeadlockCycle *cycle) pg_attribute_noreturn();
#endif

#endif							/* BULKHEAD_WAITGRAPH_H */
