/*-------------------------------------------------------------------------
 *
 * explainopt.h
 *	  EXPLAIN (ANALYZE, BULKHEAD) on PostgreSQL 18 and later (explainopt.c):
 *	  a statement's workload, lane and memory grant, and per memory node
 *	  its limit, request, grant and peak.
 *
 * Owns no shared state.  Called by bulkhead.c (init); calls memory.c,
 * lanes.c and shmem.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_EXPLAINOPT_H
#define BULKHEAD_EXPLAINOPT_H

#include "shmem/base.h"

/*
 * Register the option BULKHEAD and chain EXPLAIN's per-plan and per-node
 * hooks (18 and later; before 18 EXPLAIN has no options of extensions, and
 * this does nothing)
 */
extern void bulkhead_explain_init(void);

#endif							/* BULKHEAD_EXPLAINOPT_H */
