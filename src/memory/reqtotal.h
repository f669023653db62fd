/*-------------------------------------------------------------------------
 *
 * reqtotal.h
 *	  Memory grants (1.5): a statement's request from its memory nodes'
 *	  (reqtotal.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_REQTOTAL_H
#define BULKHEAD_REQTOTAL_H

#include "memory/memreq.h"

/* Every node asks its limit (bulkhead.memory_request = limit, as 1.4) */
extern void bulkhead_reqtotal_at_limits(BulkheadMemPlan *mp);

/*
 * The request of mp's nodes as they ask now (each node's request: estimate,
 * feedback or limit), each node's run_kb set to it, and mp->start_kb.
 */
extern void bulkhead_reqtotal_total(BulkheadMemPlan *mp, BulkheadMemRequest *req);

/* mp's nodes' limits when req was granted at setting_kb, shrunk alike */
extern void bulkhead_reqtotal_assign(BulkheadMemPlan *mp, const BulkheadMemRequest *req,
									 int setting_kb);


/*
 * The setting (kB) that makes req, shrunk (its extra dropped), fit in
 * avail bytes: the largest that does, at most the one it runs with, at
 * least the floor (so a statement that must run in less than it fits can
 * exceed avail by the floor per node, and by its fixed part).
 */
extern int	bulkhead_reqtotal_fit(const BulkheadMemRequest *req, int64 avail);

/*
 * req shrunk to avail bytes, its setting at most *setting_kb: its extra cut
 * first (what of it fits beside the nodes at their own setting is kept),
 * then its setting lowered by _fit (to *setting_kb).  Returns the bytes.
 */
extern int64 bulkhead_reqtotal_shrink(const BulkheadMemRequest *req, int64 avail,
									  int *setting_kb);

#endif							/* BULKHEAD_REQTOTAL_H */
