/*-------------------------------------------------------------------------
 *
 * explainopt.c
 *	  EXPLAIN (ANALYZE, BULKHEAD) on PostgreSQL 18 and later: what admission
 *	  did for the statement explained.  After the plan: the workload it ran
 *	  in, the statement rule that sent it there (its lane), and its memory
 *	  grant (requested, granted, the wait for it, whether it ran shrunk).
 *	  Under each memory node of the plan: its kind, its limit, its request
 *	  and where the request came from (the plan's estimate, earlier runs'
 *	  feedback, or its limit), its grant (the limit it ran with) and what it
 *	  used (peak) and whether it spilled.
 *
 * When each part runs.  ExplainOnePlan runs the statement (ExecutorRun and
 * ExecutorFinish), prints the plan, node by node (the per-node hook), then
 * its summary (the per-plan hook), and only then ends the executor: the
 * statement still holds its grant and its nodes are alive throughout.  So
 * the first node printed reads what the nodes used (memory.c, nodepeak.c),
 * once per plan; the statement's own end reads them again for feedback.
 *
 * Without ANALYZE nothing is printed: the statement does not run, a
 * statement rule does not match it (EXPLAIN without ANALYZE matches none),
 * so its lane, its settings there and thus its request are not known;
 * bulkhead_classify(query) answers that question for the next statement.
 *
 * Owns no state but the option's, kept in each ExplainState.  Called by
 * bulkhead.c (init) and by EXPLAIN's hooks; calls memory.c (the running
 * statement's grant and nodes), lanes.c (the statement rule that matches)
 * and shmem.c (a workload's name).
 *
 *-------------------------------------------------------------------------
 */
#include "views/explainopt.h"

#if PG_VERSION_NUM >= 180000

#include <math.h>

#include "memory/memory.h"
#include "memory/memplan.h"
#include "shmem/shmem.h"
#include "statement/lanes.h"

#include "commands/defrem.h"
#include "commands/explain.h"
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#include "nodes/execnodes.h"

/* The option's state in one ExplainState */
typedef struct BulkheadExplain
{
	bool		enabled;		/* BULKHEAD or BULKHEAD true */
	const PlannedStmt *read;	/* the plan whose nodes' peaks were read */
} BulkheadExplain;

static int	explain_id = -1;
static explain_per_plan_hook_type prev_per_plan_hook = NULL;
static explain_per_node_hook_type prev_per_node_hook = NULL;

static const char *const kind_names[BULKHEAD_MEM_NUM_KINDS] = {
	[BULKHEAD_MEM_SORT] = "sort",
	[BULKHEAD_MEM_INCSORT] = "incremental sort",
	[BULKHEAD_MEM_MATERIAL] = "material",
	[BULKHEAD_MEM_WINDOWAGG] = "window",
	[BULKHEAD_MEM_CTE] = "cte",
	[BULKHEAD_MEM_FUNCTIONSCAN] = "function scan",
	[BULKHEAD_MEM_TABLEFUNC] = "table function",
	[BULKHEAD_MEM_BITMAP] = "bitmap",
	[BULKHEAD_MEM_HASH] = "hash",
	[BULKHEAD_MEM_MEMOIZE] = "memoize",
	[BULKHEAD_MEM_AGG] = "aggregate",
	[BULKHEAD_MEM_RECURSIVE] = "recursive union",
	[BULKHEAD_MEM_GATHER] = "workers",
};

/* Bytes in kB, rounded up, as EXPLAIN shows memory */
static int64
kilobytes(double bytes)
{
	return bytes <= 0 ? 0 : (int64) ceil(bytes / 1024.0);
}

static const char *
source_name(char source)
{
	switch (source)
	{
		case BULKHEAD_SOURCE_FEEDBACK:
			return "feedback";
		case BULKHEAD_SOURCE_LIMIT:
			return "limit";
		default:
			return "estimate";
	}
}

/* EXPLAIN (BULKHEAD [boolean]): the value is a boolean, as EXPLAIN's own */
static void
option_handler(ExplainState *es, DefElem *opt, ParseState *pstate)
{
	BulkheadExplain *state = GetExplainExtensionState(es, explain_id);

	if (state == NULL)
	{
		state = palloc0(sizeof(BulkheadExplain));
		SetExplainExtensionState(es, explain_id, state);
	}
	state->enabled = defGetBoolean(opt);
}

/* The option's state when it asks for output here, else NULL */
static BulkheadExplain *
wanted(ExplainState *es)
{
	BulkheadExplain *state = GetExplainExtensionState(es, explain_id);

	if (state == NULL || !state->enabled || !es->analyze)
		return NULL;
	return state;
}

/* Workload slotno's name into name; false if none */
static bool
workload_name(int slotno, char *name)
{
	BulkheadSlot *slot;
	bool		found;

	if (bulkhead_shared == NULL || slotno < 0 || slotno >= bulkhead_shared->nslots)
		return false;
	slot = &bulkhead_shared->slots[slotno];
	bulkhead_slot_lock(slot, LW_SHARED);
	found = slot->in_use;
	if (found)
		strlcpy(name, slot->name, NAMEDATALEN);
	LWLockRelease(slot->lock);
	return found;
}

/*
 * The lane: "rule N" when the first statement rule that matches the
 * statement (as the gate matched it when its executor started) names the
 * workload it runs in; "none" when no statement rule sent it there (it runs
 * in its transaction's workload).
 */
static char *
lane_of(const PlannedStmt *stmt, const char *workload)
{
	const char *lane;
	int32		position = 0;

	if (workload == NULL || stmt->planTree == NULL)
		return pstrdup("none");
	lane = bulkhead_lane_of(bulkhead_statement_kind(stmt->commandType), true,
							stmt->planTree->total_cost, &position);
	if (lane == NULL || strcmp(lane, workload) != 0)
		return pstrdup("none");
	return psprintf("rule %d", position);
}

/* One memory node's line (text) or group (the other formats) */
static void
show_node(const BulkheadMemNode *node, ExplainState *es)
{
	const char *kind = node->kind < BULKHEAD_MEM_NUM_KINDS ?
		kind_names[node->kind] : "unknown";
	int64		copies = (int64) ceil(node->copies);

	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		ExplainIndentText(es);
		appendStringInfo(es->str,
						 "Bulkhead Memory: %s  Limit: " INT64_FORMAT "kB  Request: "
						 INT64_FORMAT "kB (%s)  Grant: %dkB",
						 kind, kilobytes(node->limit), kilobytes(node->request),
						 source_name(node->source), node->run_kb);
		if (node->peak >= 0)
			appendStringInfo(es->str, "  Peak: " INT64_FORMAT "kB",
							 kilobytes((double) node->peak));
		if (node->spilled)
			appendStringInfoString(es->str, "  Spilled: true");
		if (copies > 1)
			appendStringInfo(es->str, "  Copies: " INT64_FORMAT, copies);
		if (node->workers > 0)
			appendStringInfo(es->str, "  Workers: %d", node->workers);
		appendStringInfoChar(es->str, '\n');
		return;
	}
	ExplainOpenGroup("Bulkhead Memory", "Bulkhead Memory", true, es);
	ExplainPropertyText("Kind", kind, es);
	ExplainPropertyInteger("Limit", "kB", kilobytes(node->limit), es);
	ExplainPropertyInteger("Request", "kB", kilobytes(node->request), es);
	ExplainPropertyText("Request Source", source_name(node->source), es);
	ExplainPropertyInteger("Grant", "kB", node->run_kb, es);
	if (node->peak >= 0)
		ExplainPropertyInteger("Peak", "kB", kilobytes((double) node->peak), es);
	ExplainPropertyBool("Spilled", node->spilled, es);
	ExplainPropertyInteger("Copies", NULL, copies, es);
	ExplainPropertyInteger("Workers", NULL, node->workers, es);
	ExplainCloseGroup("Bulkhead Memory", "Bulkhead Memory", true, es);
}

/*
 * Per node: the memory node of this plan node, if any (a hash join's table
 * is its Hash node's).  The first node printed reads what the statement's
 * nodes used.
 */
static void
explain_per_node(PlanState *planstate, List *ancestors,
				 const char *relationship, const char *plan_name,
				 ExplainState *es)
{
	BulkheadExplain *state;
	const PlannedStmt *stmt;
	const BulkheadMemPlan *mp;
	int			id;

	if (prev_per_node_hook)
		prev_per_node_hook(planstate, ancestors, relationship, plan_name, es);
	if ((state = wanted(es)) == NULL || planstate->state == NULL)
		return;
	stmt = planstate->state->es_plannedstmt;
	mp = bulkhead_memory_plan_of(stmt, state->read != stmt);
	state->read = stmt;
	if (mp == NULL)
		return;
	id = planstate->plan->plan_node_id;
	for (int i = 0; i < mp->nnodes; i++)
		if (mp->nodes[i].plan_node_id == id)
		{
			show_node(&mp->nodes[i], es);
			break;
		}
}

/* Per plan: its workload, its lane, its grant */
static void
explain_per_plan(PlannedStmt *plannedstmt, IntoClause *into, ExplainState *es,
				 const char *queryString, ParamListInfo params,
				 QueryEnvironment *queryEnv)
{
	const BulkheadMemPlan *mp;
	char		name[NAMEDATALEN];
	const char *workload = NULL;

	if (prev_per_plan_hook)
		prev_per_plan_hook(plannedstmt, into, es, queryString, params, queryEnv);
	if (wanted(es) == NULL)
		return;
	mp = bulkhead_memory_plan_of(plannedstmt, false);
	if (workload_name(mp != NULL ? mp->slotno : bulkhead_memory_charged_slot(), name))
		workload = name;

	ExplainOpenGroup("Bulkhead", "Bulkhead", true, es);
	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		ExplainIndentText(es);
		appendStringInfoString(es->str, "Bulkhead:\n");
		es->indent++;
	}
	if (workload != NULL)
		ExplainPropertyText("Workload", workload, es);
	ExplainPropertyText("Lane", lane_of(plannedstmt, workload), es);
	if (mp != NULL)
	{
		ExplainPropertyInteger("Memory Requested", "kB",
							   kilobytes((double) mp->requested), es);
		ExplainPropertyInteger("Memory Granted", "kB",
							   kilobytes((double) mp->granted), es);
		ExplainPropertyFloat("Memory Wait", "ms", mp->wait_us / 1000.0, 3, es);
		ExplainPropertyBool("Memory Shrunk", mp->shrunk, es);
	}
	if (es->format == EXPLAIN_FORMAT_TEXT)
		es->indent--;
	ExplainCloseGroup("Bulkhead", "Bulkhead", true, es);
}

void
bulkhead_explain_init(void)
{
	explain_id = GetExplainExtensionId("bulkhead");
#if PG_VERSION_NUM >= 190000
	RegisterExtensionExplainOption("bulkhead", option_handler,
								   GUCCheckBooleanExplainOption);
#else
	RegisterExtensionExplainOption("bulkhead", option_handler);
#endif
	prev_per_plan_hook = explain_per_plan_hook;
	explain_per_plan_hook = explain_per_plan;
	prev_per_node_hook = explain_per_node_hook;
	explain_per_node_hook = explain_per_node;
}

#else							/* PG_VERSION_NUM < 180000 */

void
bulkhead_explain_init(void)
{
}

#endif
