/*-------------------------------------------------------------------------
 *
 * grantpath.h
 *	  Memory grants (1.4): one grant a statement holds, and the workload it
 *	  is counted in (grants.c adds and subtracts it there, and at the
 *	  budgets above that workload as they are when it does).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_GRANTPATH_H
#define BULKHEAD_GRANTPATH_H

#include "base.h"

/* A workload and the budgets above it (at most 4 levels of budgets) */
#define BULKHEAD_MEM_PATH		6

/* One grant a statement holds: what it added, and where */
typedef struct BulkheadGrant
{
	int64		bytes;
	int16		slot;			/* its workload, -1: the server only */
	uint32		generation;		/* the workload's, when it was made: once
								 * the slot serves another, it counts at the
								 * server only */
} BulkheadGrant;

#endif							/* BULKHEAD_GRANTPATH_H */
