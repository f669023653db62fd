/*-------------------------------------------------------------------------
 *
 * nodepeak.h
 *	  Memory grants (1.5): what each memory node of a statement used, read
 *	  from its executor's nodes before they are freed, and what it used
 *	  outside the nodes' limits (an aggregate's transition value, an ARRAY
 *	  sublink's array).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_NODEPEAK_H
#define BULKHEAD_NODEPEAK_H

#include "memory/memplan.h"
#include "nodes/execnodes.h"

struct QueryDesc;

/*
 * Before queryDesc's executor ends (its nodes alive): each node of plan
 * gets peak (bytes one copy used at most, -1 unknown) and spilled; plan
 * gets extra_peak.  Never throws.
 */
extern void bulkhead_nodepeak_read(struct QueryDesc *queryDesc, BulkheadMemPlan *plan);

/*
 * After an Agg's ExecProcNode returned (its transition values alive):
 * what they take now, kept as node->peak's part outside the limit.
 */
extern void bulkhead_nodepeak_sample_agg(PlanState *ps, BulkheadMemNode *node);

#endif							/* BULKHEAD_NODEPEAK_H */
