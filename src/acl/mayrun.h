/*-------------------------------------------------------------------------
 *
 * mayrun.h
 *	  May the current user run a plan?  The executor's own privilege check
 *	  of its range table, without an error: for what would show a plan's
 *	  estimates (a lane chosen by cost, 1.3; a memory request, 1.4), which
 *	  a user who may not read its tables must not learn.
 *
 * A header of one inline function, no state.  Called by toplevel.c and
 * memory.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MAYRUN_H
#define BULKHEAD_MAYRUN_H

#include "shmem/base.h"

#include "executor/executor.h"
#include "nodes/plannodes.h"

static inline bool
bulkhead_may_run(const PlannedStmt *plan)
{
#if PG_VERSION_NUM >= 160000
	return ExecCheckPermissions(plan->rtable, plan->permInfos, false);
#else
	return ExecCheckRTPerms(plan->rtable, false);
#endif
}

#endif							/* BULKHEAD_MAYRUN_H */
