/*-------------------------------------------------------------------------
 *
 * grantpath.h
 *	  Memory grants (1.4): one grant a statement holds, and the levels it
 *	  was counted at (grants.c adds and subtracts it there).
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
	int			npath;			/* levels counted (0: the server only) */
	int16		path[BULKHEAD_MEM_PATH];
	uint32		gens[BULKHEAD_MEM_PATH];
} BulkheadGrant;

#endif							/* BULKHEAD_GRANTPATH_H */
