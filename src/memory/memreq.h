/*-------------------------------------------------------------------------
 *
 * memreq.h
 *	  Memory grants (1.4): what a statement requests, from its plan, by
 *	  PostgreSQL's own limits (memreq.c; a utility command's: utilreq.h).
 *
 * A request is kept in two parts: the part that follows work_mem (or
 * maintenance_work_mem for a utility), units kB of it per kB of the
 * setting, so that a statement can be shrunk by lowering the setting; and
 * a fixed part, the planner's estimates of the hash tables that never
 * spill (a hashed SetOp or SubPlan, RecursiveUnion's), which lowering
 * work_mem does not shrink.
 *
 * Owns no state.  Called by memory.c (each statement) and lanes.c
 * (bulkhead_classify(query)); calls no module.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MEMREQ_H
#define BULKHEAD_MEMREQ_H

#include "shmem/shmem.h"

#include "memory/memplan.h"
#include "nodes/plannodes.h"

/* The lowest value a shrunk statement's setting is given, in kB */
#define BULKHEAD_MEM_FLOOR_KB		64	/* work_mem's own minimum */
#define BULKHEAD_MAINT_FLOOR_KB		1024	/* maintenance_work_mem's */

/* A node's request from the plan's estimates: what they say, times this */
#define BULKHEAD_ESTIMATE_MARGIN	1.5

typedef struct BulkheadMemRequest
{
	bool		maintenance;	/* a utility: the setting is
								 * maintenance_work_mem, else work_mem */
	int			setting_kb;		/* the setting's value the statement runs with
								 * (its lane's caps applied) */
	double		units;			/* kB requested per kB of the setting: the sum
								 * over the memory nodes of their processes,
								 * times hash_mem_multiplier for hashing */
	double		fixed;			/* bytes that do not follow the setting */
	double		extra;			/* bytes asked beyond the nodes (feedback:
								 * memory outside them), dropped first when
								 * the statement is shrunk: never a floor */
	int			nodes;			/* memory nodes (each one's processes counted) */
} BulkheadMemRequest;

/* The request shrunk, in bytes, with the setting at setting_kb: no extra */
static inline double
bulkhead_memreq_bytes_at(const BulkheadMemRequest *req, int setting_kb)
{
	return req->units * (double) setting_kb * 1024.0 + req->fixed;
}

/* The whole request in bytes */
static inline int64
bulkhead_memreq_bytes(const BulkheadMemRequest *req)
{
	return (int64) Min(bulkhead_memreq_bytes_at(req, req->setting_kb) + req->extra,
					   (double) (PG_INT64_MAX / 4));
}


/*
 * The memory nodes of plan run with work_mem at work_mem_kb and
 * hash_mem_multiplier at hash_mult: each one's limit, and its request from
 * the plan's estimates (palloc'd in the current context).
 */
extern void bulkhead_memreq_build(const PlannedStmt *plan, int work_mem_kb,
								  double hash_mult, BulkheadMemPlan *mp);

/*
 * A workload's max_memory as written ('700MB', '2GB', a number of kB) in
 * bytes; false, reported at elevel (22023), for a value a memory setting
 * refuses or one below 64 kB.
 */
extern bool bulkhead_memreq_parse_limit(const char *text, const char *workload,
										int elevel, int64 *bytes);

#endif							/* BULKHEAD_MEMREQ_H */
