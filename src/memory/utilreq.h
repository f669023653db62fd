/*-------------------------------------------------------------------------
 *
 * utilreq.h
 *	  Memory grants (1.4): a utility statement's request (utilreq.c).
 *	  Called by memory.c and lanes.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_UTILREQ_H
#define BULKHEAD_UTILREQ_H

#include "memory/memreq.h"

/*
 * The request of a utility statement (run in ProcessUtilityContext
 * context): maintenance_work_mem x (1 + the parallel
 * maintenance workers) for CREATE INDEX (but CREATE TABLE's own, on its
 * empty table), REINDEX, CLUSTER (and 19's REPACK), VACUUM, REFRESH
 * MATERIALIZED VIEW and an ALTER TABLE that builds an index or rewrites
 * the table; false, no request, for any other.  May look the relation up
 * in the catalogs (no lock).
 */
extern bool bulkhead_memreq_utility(Node *stmt, int context, int maintenance_kb,
									int maintenance_workers,
									BulkheadMemRequest *req);

#endif							/* BULKHEAD_UTILREQ_H */
