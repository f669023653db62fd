/*-------------------------------------------------------------------------
 *
 * memory.h
 *	  Memory grants (1.4), this backend's side: each statement's request
 *	  when its executor starts (or a utility's when it runs), the grants it
 *	  holds, and the caps that run a shrunk one with less (memory.c).
 *
 * Owns backend-local state only (the grants this backend holds); the
 * shared counters are grants.c's.  Called by hooks.c and bulkhead.c
 * (init); calls grants.c, memreq.c, local.c (the workload a statement is
 * charged to) and caps.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MEMORY_H
#define BULKHEAD_MEMORY_H

#include "shmem.h"

#include "nodes/nodes.h"

struct QueryDesc;

/* Held grants that run shrunk (the fast path tests it) */
extern int	bulkhead_memory_nshrunk;

/*
 * A statement's executor starts: its request is granted (it may wait for
 * it), and the caps to run its phases with returned: in_force, or a copy
 * with work_mem lowered when it runs shrunk.
 */
extern const BulkheadCaps *bulkhead_memory_start(struct QueryDesc *queryDesc,
												 int eflags,
												 const BulkheadCaps *in_force);
extern const BulkheadCaps *bulkhead_memory_caps_slow(struct QueryDesc *queryDesc,
													 const BulkheadCaps *in_force);

/* The caps for a later phase (run, finish) of queryDesc */
static inline const BulkheadCaps *
bulkhead_memory_caps(struct QueryDesc *queryDesc, const BulkheadCaps *in_force)
{
	if (likely(bulkhead_memory_nshrunk == 0))
		return in_force;
	return bulkhead_memory_caps_slow(queryDesc, in_force);
}

/* Its executor ended: the grant is returned */
extern void bulkhead_memory_end(struct QueryDesc *queryDesc);

/*
 * A utility statement (CREATE INDEX, REINDEX, CLUSTER, VACUUM): its
 * maintenance_work_mem's grant, held over its own commits until
 * bulkhead_memory_utility_end; the caps to run it with (lowered when
 * shrunk).
 */
extern const BulkheadCaps *bulkhead_memory_utility_start(Node *stmt,
														 const BulkheadCaps *in_force);
extern void bulkhead_memory_utility_end(Node *stmt);

extern void bulkhead_memory_init(void);

#endif							/* BULKHEAD_MEMORY_H */
