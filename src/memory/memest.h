/*-------------------------------------------------------------------------
 *
 * memest.h
 *	  Memory grants (1.5): a memory node's expected use, from the planner's
 *	  estimates (memest.c has the sizes).  Bytes of one copy, no margin.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MEMEST_H
#define BULKHEAD_MEMEST_H

#include "memory/memplan.h"
#include "nodes/plannodes.h"

/* rows sorted (bound > 0: a top-N sort's), of width bytes */
extern double bulkhead_memest_sort(double rows, int width, double bound);
/* rows kept in a tuplestore */
extern double bulkhead_memest_store(double rows, int width);
/* rows in a hash join's table */
extern double bulkhead_memest_hash(double rows, int width);
/* groups of a hash aggregate */
extern double bulkhead_memest_groups(double groups, int width, double transition_space);
/* a bitmap over rows' pages */
extern double bulkhead_memest_bitmap(double rows);

/* A Limit's constant count plus offset (the bound of a sort below it), 0 */
extern double bulkhead_memest_limit_bound(Limit *limit);

/* plan's node of kind (BulkheadMemKind), bound as for a sort */
extern double bulkhead_memest_node(Plan *plan, int kind, double bound);

#endif							/* BULKHEAD_MEMEST_H */
