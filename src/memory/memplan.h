/*-------------------------------------------------------------------------
 *
 * memplan.h
 *	  Memory grants (1.5, requests by use): a statement's memory nodes,
 *	  each with its limit, what it is expected to use, what it asks, what
 *	  it runs with, and afterwards what it used.
 *
 * A memory node's limit is what PostgreSQL lets it use at the statement's
 * settings (1.4's request of it).  Its request is what it is expected to
 * use, never above its limit, never below 64 kB: from the plan's estimates
 * with a margin (memreq.c) or from what earlier runs of the same (queryid,
 * workload) used (feedback.c).  It then runs with its limit lowered to what
 * it was granted (nodelimit.c), so that an estimate too low spills and never
 * passes its grant.  When the statement ends, what each node used is read
 * (nodepeak.c) and noted (feedback.c).
 *
 * Where a node's limit is set (hold):
 *   RUN     around its own ExecProcNode (a Sort, a Material, ...), and for
 *           a hash table, its HashJoin's; for a bitmap, its BitmapHeapScan's
 *           (held_by names the node wrapped)
 *   PATCHED its limit field is lowered after ExecutorStart (a hashed Agg's
 *           hash_mem_limit, a Memoize's mem_limit), and its own ExecProcNode
 *           runs at its grant (an Agg's spills, its per-group sorts)
 *   START   fixed when the executor starts (a CTE's store, a recursive
 *           union's, a grouping-sets Agg's first sort): all such nodes of a
 *           statement share one limit, the statement's start_kb
 *
 * Under a Gather, a node runs in the leader (when it participates) at its
 * own grant, and in each planned worker at its Gather's grant (the largest
 * of the nodes below it: a worker's settings are the leader's at its
 * Gather's first call).
 *
 * Backend-local, palloc'd in the memory context of the statement's grant
 * (memory.c).  Types only; no module of its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MEMPLAN_H
#define BULKHEAD_MEMPLAN_H

#include "shmem/base.h"

/* The kinds of memory nodes (shown by EXPLAIN, kept by feedback) */
typedef enum BulkheadMemKind
{
	BULKHEAD_MEM_SORT,			/* Sort, top-N included */
	BULKHEAD_MEM_INCSORT,		/* Incremental Sort */
	BULKHEAD_MEM_MATERIAL,
	BULKHEAD_MEM_WINDOWAGG,
	BULKHEAD_MEM_CTE,			/* a CTE's shared store (its first CteScan) */
	BULKHEAD_MEM_FUNCTIONSCAN,
	BULKHEAD_MEM_TABLEFUNC,
	BULKHEAD_MEM_BITMAP,		/* the bitmaps under a BitmapHeapScan */
	BULKHEAD_MEM_HASH,			/* a hash join's inner table */
	BULKHEAD_MEM_MEMOIZE,
	BULKHEAD_MEM_AGG,			/* hash tables and per-group sorts */
	BULKHEAD_MEM_RECURSIVE,		/* RecursiveUnion's two stores */
	BULKHEAD_MEM_GATHER,		/* not a memory node: its workers' limit */
	BULKHEAD_MEM_NUM_KINDS
} BulkheadMemKind;

typedef enum BulkheadMemHold
{
	BULKHEAD_HOLD_RUN,
	BULKHEAD_HOLD_PATCHED,
	BULKHEAD_HOLD_START
} BulkheadMemHold;

/* Where a request came from (bulkhead_classify's memory_source) */
#define BULKHEAD_SOURCE_ESTIMATE	'e'
#define BULKHEAD_SOURCE_FEEDBACK	'f'
#define BULKHEAD_SOURCE_LIMIT		'l'

typedef struct BulkheadMemNode
{
	int			plan_node_id;	/* the memory node (a Hash's own id) */
	int			held_by;		/* plan_node_id of the node whose
								 * ExecProcNode sets its limit */
	uint8		kind;			/* BulkheadMemKind */
	uint8		hold;			/* BulkheadMemHold */
	char		source;			/* BULKHEAD_SOURCE_* of request */
	bool		leader;			/* the leader (this backend) runs it */
	int			gather;			/* index in nodes[] of the Gather above it,
								 * -1 for none */
	int			workers;		/* planned workers that run it too */
	double		copies;			/* limits of it alive at once in one
								 * process (2 for an incremental sort, one
								 * per function of a function scan, ...) */
	double		limit;			/* bytes per copy at the statement's
								 * settings: PostgreSQL's bound */
	double		estimate;		/* bytes per copy by the plan, margin
								 * included, within [floor, limit] */
	double		request;		/* bytes per copy asked (source) */
	int			run_kb;			/* per copy: the limit it runs with (its
								 * grant), kB */
	/* read at its end (nodepeak.c) */
	int64		peak;			/* bytes one copy used at most; -1: unknown */
	bool		spilled;		/* it went to disk (or evicted, lossified) */
	int64		value_peak;		/* an Agg: bytes of its transition values
								 * at most (outside its limit); -1 unknown */
	int64		spill_bytes;	/* bytes one copy wrote to disk (a sort's
								 * tapes, a hash table's batches), 0: none
								 * or unknown */
} BulkheadMemNode;

typedef struct BulkheadMemPlan
{
	int			nnodes;
	int			maxnodes;
	BulkheadMemNode *nodes;
	double		fixed;			/* bytes of the hash tables that never spill
								 * (a hashed SetOp or SubPlan, a recursive
								 * UNION's): the planner's estimates */
	double		extra;			/* bytes requested for memory outside the
								 * nodes' limits (an aggregate's value, an
								 * ARRAY sublink), from earlier runs */
	int			start_kb;		/* work_mem while the executor starts */
	int			started_kb;		/* ... as it was then (hash_mem_multiplier 1) */
	uint64		queryid;		/* 0: none (feedback needs one) */
	int			slotno;			/* the workload charged, -1 none */
	bool		unbounded;		/* it may use memory no limit bounds (an
								 * Agg's values, an ARRAY sublink): measured
								 * even when it requests nothing */
	/* its grant (memory.c) */
	int64		requested;		/* bytes asked */
	int64		granted;		/* bytes granted (0: measured only) */
	int64		wait_us;		/* its wait for memory, 0 none */
	bool		shrunk;			/* granted less than asked */
	/* a statement whose grant went with an aborted subtransaction, its
	 * executor perhaps resumed still (memory.c): kept until the transaction
	 * ends */
	const void *orphan_owner;
	struct BulkheadMemPlan *orphan_next;
	/* read at its end (nodepeak.c) */
	int64		extra_peak;		/* bytes used outside the nodes; -1 unknown */
} BulkheadMemPlan;

#endif							/* BULKHEAD_MEMPLAN_H */
