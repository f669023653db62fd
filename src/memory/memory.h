/*-------------------------------------------------------------------------
 *
 * memory.h
 *	  Memory grants (1.4), this backend's side: each statement's request
 *	  when its executor starts (or a utility's when it runs), the grants it
 *	  holds, and the values each runs with (memory.c).
 *
 * Owns backend-local state only (the grants this backend holds); the
 * shared counters are grants.c's.  Called by hooks.c, lanes.c and
 * bulkhead.c (init); calls grants.c, memreq.c, local.c (the workload a
 * statement is charged to) and caps.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MEMORY_H
#define BULKHEAD_MEMORY_H

#include "shmem/shmem.h"

#include "nodes/nodes.h"

struct QueryDesc;

/* bulkhead.memory_request (1.5): what memory nodes request */
typedef enum BulkheadMemoryRequest
{
	BULKHEAD_REQUEST_USE,		/* what they are expected to use */
	BULKHEAD_REQUEST_LIMIT		/* their limits (1.4) */
} BulkheadMemoryRequest;

extern int	bulkhead_memory_request;

/* Grants this backend holds (the fast path tests it) */
extern int	bulkhead_memory_nheld;

/*
 * A statement's executor starts: its request is granted (it may wait for
 * it).  Returns the settings its grant was worked out with, to hold it to
 * in each of its phases (work_mem and hash_mem_multiplier: lowered when it
 * runs shrunk, and never raised above what was granted, whatever a SET
 * does meanwhile), or NULL when it holds no grant.
 */
extern const BulkheadCaps *bulkhead_memory_start(struct QueryDesc *queryDesc,
												 int eflags);
extern const BulkheadCaps *bulkhead_memory_pins_slow(struct QueryDesc *queryDesc);

/* The same for a later phase (run, finish) of queryDesc: NULL if none */
static inline const BulkheadCaps *
bulkhead_memory_pins(struct QueryDesc *queryDesc)
{
	if (likely(bulkhead_memory_nheld == 0))
		return NULL;
	return bulkhead_memory_pins_slow(queryDesc);
}

extern void bulkhead_memory_started_slow(struct QueryDesc *queryDesc);
extern void bulkhead_memory_ending_slow(struct QueryDesc *queryDesc);

/* queryDesc's executor started: its memory nodes held to their grants (1.5) */
static inline void
bulkhead_memory_started(struct QueryDesc *queryDesc)
{
	if (unlikely(bulkhead_memory_nheld > 0))
		bulkhead_memory_started_slow(queryDesc);
}

/* Its executor is about to end: what its nodes used, noted (1.5) */
static inline void
bulkhead_memory_ending(struct QueryDesc *queryDesc)
{
	if (unlikely(bulkhead_memory_nheld > 0))
		bulkhead_memory_ending_slow(queryDesc);
}

/* The memory nodes of a running statement of stmt (EXPLAIN), or NULL */
struct PlannedStmt;
extern const struct BulkheadMemPlan *bulkhead_memory_plan_of(const struct PlannedStmt *stmt);

/*
 * What a statement of plan would request in workload slotno (-1: none),
 * worked out with work_mem wm and hash_mem_multiplier hm, and where most
 * of it comes from (memplan.h's BULKHEAD_SOURCE_*): bulkhead_classify
 */
extern int64 bulkhead_memory_request_of(const struct PlannedStmt *plan, int wm, double hm,
										int slotno, char *source);

/* A phase of queryDesc's executor returned normally */
extern void bulkhead_memory_phase_done(struct QueryDesc *queryDesc);

/* Its executor ended: the grant is returned */
extern void bulkhead_memory_end(struct QueryDesc *queryDesc);

/*
 * A utility statement that builds indexes or sorts a table (CREATE INDEX,
 * REINDEX, CLUSTER, VACUUM, an ALTER TABLE that adds an index): its
 * maintenance_work_mem's grant, held over its own commits until
 * bulkhead_memory_utility_end; the settings to hold it to, or NULL.
 */
extern const BulkheadCaps *bulkhead_memory_utility_start(Node *stmt, int context);
extern void bulkhead_memory_utility_end(Node *stmt);

/*
 * The value of a memory setting (BULKHEAD_CAP_WORK_MEM, ...) that the
 * statement running now asked for, before its grant shrank it; live when
 * it runs unshrunk (bulkhead_classify(query) reports as the caller's next
 * statement would run).
 */
extern double bulkhead_memory_asked(int cap, double live);

/* bulkhead.memory_request (before the prefix is reserved) */
extern void bulkhead_memory_settings_init(void);
extern void bulkhead_memory_init(void);

#endif							/* BULKHEAD_MEMORY_H */
