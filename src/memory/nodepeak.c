/*-------------------------------------------------------------------------
 *
 * nodepeak.c
 *	  Memory grants (1.5): what each memory node of a statement used.
 *	  (Being written: reads nothing yet.)
 *
 *-------------------------------------------------------------------------
 */
#include "memory/nodepeak.h"

#include "executor/execdesc.h"

void
bulkhead_nodepeak_read(QueryDesc *queryDesc, BulkheadMemPlan *plan)
{
}

void
bulkhead_nodepeak_sample_agg(PlanState *ps, BulkheadMemNode *node)
{
}
