/*-------------------------------------------------------------------------
 *
 * memreq.c
 *	  Memory grants (1.4): a statement's request, the memory its plan may
 *	  use by PostgreSQL's own limits.
 *
 * The request of a plan is the sum over its tree, init plans and subplans
 * included, of each memory node's limit, times the processes that run it
 * (under a Gather or Gather Merge: its planned workers, plus the leader
 * unless the Gather is single-copy):
 *
 *   work_mem                       Sort, Material, WindowAgg, a CTE scan
 *                                  (once per CTE, its store is shared), a
 *                                  table-function scan, a bitmap index
 *                                  scan, each function of a function scan,
 *                                  each ordered or DISTINCT aggregate per
 *                                  grouping set, each sort of a chain of
 *                                  grouping sets
 *   2 x work_mem                   Incremental Sort (a full and a prefix
 *                                  sort may both be alive), RecursiveUnion
 *                                  (its working and intermediate tables)
 *   work_mem x hash_mem_multiplier Hash (a Parallel Hash's shared table is
 *                                  sized for all its participants), a
 *                                  hashed or mixed Agg (its grouping sets'
 *                                  tables share one limit), Memoize
 *
 * and, for the hash tables PostgreSQL never bounds at run time (a hashed
 * SetOp, a hashed SubPlan, RecursiveUnion's table of a UNION), the
 * planner's estimate of the table: its groups (rows, for a SubPlan) times
 * MAXALIGN(width) + MAXALIGN(SizeofMinimalTupleHeader).  That part is the
 * request's fixed part: a lower work_mem does not shrink it.
 *
 * SubPlans are found in the expressions of each node (its target list and
 * qual, its init plans, a join's quals, an index scan's, a Result's
 * constant qual, a Limit's, a WindowAgg's offsets) with the processes of
 * the node that holds them; a subplan of the statement found nowhere else
 * is counted once, by the leader.
 *
 * A workload's max_memory is parsed here too, as a memory setting takes a
 * value (bulkhead_check_memory, the table's check, and the worker's load).
 *
 * A utility's request is utilreq.c's.
 *
 * Owns no state.  Called by memory.c, lanes.c, tables.c and the table's
 * check; calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/memreq.h"

#include <math.h>

#include "access/htup_details.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

PG_FUNCTION_INFO_V1(bulkhead_check_memory);

/* The longest max_memory kept as written (shmem.h's BulkheadConfig) */
#define BULKHEAD_LIMIT_TEXTLEN	BULKHEAD_CAP_TEXTLEN

typedef struct Walk
{
	const PlannedStmt *stmt;
	double		hash_mult;
	double		units;
	double		fixed;
	int			nodes;
	bool	   *subplan_seen;	/* per entry of stmt->subplans */
	Bitmapset  *ctes;			/* ctePlanIds counted */
} Walk;

static void walk_plan(Walk *w, Plan *plan, int procs);

/* A hash table that never spills: the planner's estimate of its size */
static double
table_estimate(double groups, int width)
{
	return Max(groups, 1.0) *
		(MAXALIGN(Max(width, 0)) + MAXALIGN(SizeofMinimalTupleHeader));
}

static void
count(Walk *w, double units, int procs)
{
	w->units += units * procs;
	w->nodes += procs;
}

/* The subplan of plan_id (1-based), once, with procs processes */
static void
walk_subplan(Walk *w, int plan_id, int procs)
{
	Plan	   *sub;

	if (plan_id < 1 || plan_id > list_length(w->stmt->subplans) ||
		w->subplan_seen[plan_id - 1])
		return;
	w->subplan_seen[plan_id - 1] = true;
	sub = (Plan *) list_nth(w->stmt->subplans, plan_id - 1);
	if (sub != NULL)
		walk_plan(w, sub, procs);
}

typedef struct ExprWalk
{
	Walk	   *w;
	int			procs;
} ExprWalk;

static bool
expr_walker(Node *node, ExprWalk *ew)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubPlan))
	{
		SubPlan    *sp = (SubPlan *) node;

		if (sp->useHashTable && sp->plan_id >= 1 &&
			sp->plan_id <= list_length(ew->w->stmt->subplans) &&
			!ew->w->subplan_seen[sp->plan_id - 1] &&
			list_nth(ew->w->stmt->subplans, sp->plan_id - 1) != NULL)
		{
			Plan	   *sub = (Plan *) list_nth(ew->w->stmt->subplans, sp->plan_id - 1);

			ew->w->fixed += table_estimate(sub->plan_rows, sub->plan_width) * ew->procs;
			ew->w->nodes += ew->procs;
		}
		walk_subplan(ew->w, sp->plan_id, ew->procs);
		/* its arguments may hold SubPlans too */
	}
	return expression_tree_walker(node, expr_walker, (void *) ew);
}

static void
walk_exprs(Walk *w, Node *exprs, int procs)
{
	ExprWalk	ew = {w, procs};

	(void) expr_walker(exprs, &ew);
}

/* The ordered or DISTINCT aggregates of an Agg, and its grouping sets */
typedef struct OrderedCount
{
	int			n;
} OrderedCount;

static bool
ordered_walker(Node *node, OrderedCount *oc)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		Aggref	   *aggref = (Aggref *) node;

		if ((aggref->aggorder != NIL || aggref->aggdistinct != NIL)
#if PG_VERSION_NUM >= 160000
			&& !aggref->aggpresorted
#endif
			)
			oc->n++;
		return false;			/* (an aggregate's arguments hold none) */
	}
	return expression_tree_walker(node, ordered_walker, (void *) oc);
}

static void
count_agg(Walk *w, Agg *agg, int procs)
{
	OrderedCount oc = {0};
	int			sets = Max(list_length(agg->groupingSets), 1);
	ListCell   *lc;

	if (agg->aggstrategy == AGG_HASHED || agg->aggstrategy == AGG_MIXED)
		count(w, w->hash_mult, procs);
	(void) ordered_walker((Node *) agg->plan.targetlist, &oc);
	(void) ordered_walker((Node *) agg->plan.qual, &oc);
	foreach(lc, agg->chain)
	{
		Agg		   *link = (Agg *) lfirst(lc);

		/* a sorted phase of grouping sets sorts its input again */
		if (link->plan.lefttree != NULL && IsA(link->plan.lefttree, Sort))
			count(w, 1, procs);
		sets = Max(sets, list_length(link->groupingSets));
	}
	if (oc.n > 0)
		count(w, (double) oc.n * sets, procs);
}

/* What a node itself may use (not its children) */
static void
count_node(Walk *w, Plan *plan, int procs)
{
	switch (nodeTag(plan))
	{
		case T_Sort:
		case T_Material:
		case T_WindowAgg:
		case T_TableFuncScan:
		case T_BitmapIndexScan:
			count(w, 1, procs);
			break;
		case T_IncrementalSort:
			count(w, 2, procs);
			break;
		case T_FunctionScan:
			count(w, Max(list_length(((FunctionScan *) plan)->functions), 1), procs);
			break;
		case T_CteScan:
			if (!bms_is_member(((CteScan *) plan)->ctePlanId, w->ctes))
			{
				w->ctes = bms_add_member(w->ctes, ((CteScan *) plan)->ctePlanId);
				count(w, 1, procs);
			}
			break;
		case T_Hash:
		case T_Memoize:
			count(w, w->hash_mult, procs);
			break;
		case T_Agg:
			count_agg(w, (Agg *) plan, procs);
			break;
		case T_SetOp:
			if (((SetOp *) plan)->strategy == SETOP_HASHED)
			{
				w->fixed += table_estimate((double) ((SetOp *) plan)->numGroups,
										   plan->plan_width) * procs;
				w->nodes += procs;
			}
			break;
		case T_RecursiveUnion:
			count(w, 2, procs);
			if (((RecursiveUnion *) plan)->numCols > 0)
				w->fixed += table_estimate((double) ((RecursiveUnion *) plan)->numGroups,
										   plan->plan_width) * procs;
			break;
		default:
			break;
	}
}

/* The expressions of a node that may hold SubPlans */
static void
node_exprs(Walk *w, Plan *plan, int procs)
{
	walk_exprs(w, (Node *) plan->initPlan, procs);
	walk_exprs(w, (Node *) plan->targetlist, procs);
	walk_exprs(w, (Node *) plan->qual, procs);
	switch (nodeTag(plan))
	{
		case T_Result:
			walk_exprs(w, ((Result *) plan)->resconstantqual, procs);
			break;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			walk_exprs(w, (Node *) ((Join *) plan)->joinqual, procs);
			break;
		case T_IndexScan:
			walk_exprs(w, (Node *) ((IndexScan *) plan)->indexqual, procs);
			break;
		case T_BitmapHeapScan:
			walk_exprs(w, (Node *) ((BitmapHeapScan *) plan)->bitmapqualorig, procs);
			break;
		case T_FunctionScan:
			walk_exprs(w, (Node *) ((FunctionScan *) plan)->functions, procs);
			break;
		case T_ValuesScan:
			walk_exprs(w, (Node *) ((ValuesScan *) plan)->values_lists, procs);
			break;
		case T_Limit:
			walk_exprs(w, ((Limit *) plan)->limitOffset, procs);
			walk_exprs(w, ((Limit *) plan)->limitCount, procs);
			break;
		case T_WindowAgg:
			walk_exprs(w, ((WindowAgg *) plan)->startOffset, procs);
			walk_exprs(w, ((WindowAgg *) plan)->endOffset, procs);
			break;
		default:
			break;
	}
}

static void
walk_list(Walk *w, List *plans, int procs)
{
	ListCell   *lc;

	foreach(lc, plans)
		walk_plan(w, (Plan *) lfirst(lc), procs);
}

static void
walk_plan(Walk *w, Plan *plan, int procs)
{
	if (plan == NULL)
		return;
	check_stack_depth();
	count_node(w, plan, procs);
	node_exprs(w, plan, procs);
	switch (nodeTag(plan))
	{
		case T_Gather:
			{
				Gather	   *g = (Gather *) plan;

				procs = g->single_copy ? Max(g->num_workers, 1) : g->num_workers + 1;
			}
			break;
		case T_GatherMerge:
			procs = ((GatherMerge *) plan)->num_workers + 1;
			break;
		case T_Append:
			walk_list(w, ((Append *) plan)->appendplans, procs);
			break;
		case T_MergeAppend:
			walk_list(w, ((MergeAppend *) plan)->mergeplans, procs);
			break;
		case T_BitmapAnd:
			walk_list(w, ((BitmapAnd *) plan)->bitmapplans, procs);
			break;
		case T_BitmapOr:
			walk_list(w, ((BitmapOr *) plan)->bitmapplans, procs);
			break;
		case T_SubqueryScan:
			walk_plan(w, ((SubqueryScan *) plan)->subplan, procs);
			break;
		case T_CustomScan:
			walk_list(w, ((CustomScan *) plan)->custom_plans, procs);
			break;
		default:
			break;
	}
	walk_plan(w, plan->lefttree, procs);
	walk_plan(w, plan->righttree, procs);
}

void
bulkhead_memreq_plan(const PlannedStmt *plan, int work_mem_kb, double hash_mult,
					 BulkheadMemRequest *req)
{
	Walk		w;
	int			nsub = list_length(plan->subplans);
	int			i;

	memset(&w, 0, sizeof(w));
	w.stmt = plan;
	w.hash_mult = hash_mult;
	w.subplan_seen = nsub > 0 ? palloc0(sizeof(bool) * nsub) : NULL;
	walk_plan(&w, plan->planTree, 1);
	/* a subplan found in no expression walked: once, by the leader */
	for (i = 0; i < nsub; i++)
		walk_subplan(&w, i + 1, 1);
	if (w.subplan_seen)
		pfree(w.subplan_seen);
	bms_free(w.ctes);

	req->maintenance = false;
	req->setting_kb = work_mem_kb;
	req->units = w.units;
	req->fixed = w.fixed;
	req->nodes = w.nodes;
}

int
bulkhead_memreq_fit(const BulkheadMemRequest *req, int64 avail)
{
	int			floor_kb = req->maintenance ? BULKHEAD_MAINT_FLOOR_KB :
		BULKHEAD_MEM_FLOOR_KB;
	double		kb;

	if (req->units <= 0)
		return req->setting_kb;
	kb = floor(((double) avail - req->fixed) / 1024.0 / req->units);
	if (kb >= req->setting_kb)
		return req->setting_kb;
	return (int) Max(kb, (double) Min(floor_kb, req->setting_kb));
}

/*---- max_memory ----*/

bool
bulkhead_memreq_parse_limit(const char *text, const char *workload, int elevel,
							int64 *bytes)
{
	const char *hint = NULL;
	int			kb = 0;
	bool		parsed = strlen(text) < BULKHEAD_LIMIT_TEXTLEN &&
		parse_int(text, &kb, GUC_UNIT_KB, &hint);

	if (!parsed && strlen(text) >= BULKHEAD_LIMIT_TEXTLEN)
		hint = "max_memory is written in at most 31 bytes.";
	if (!parsed || kb < BULKHEAD_MEM_FLOOR_KB)
	{
		ereport(elevel,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid max_memory \"%s\" for workload \"%s\"", text, workload),
				 parsed ? errdetail("max_memory is at least %d kB.", BULKHEAD_MEM_FLOOR_KB) :
				 hint ? errdetail("%s", hint) :
				 errdetail("A memory size is a number of kB, or a number with a unit: B, kB, MB, GB or TB."),
				 errhint("Write it as a memory setting takes it, for example '700MB' or '2GB'.")));
		return false;
	}
	*bytes = (int64) kb * 1024;
	return true;
}

/*
 * bulkhead_check_memory(max_memory text, workload text): the table's check
 * of a row's max_memory.  Raises 22023 for a value a memory setting would
 * refuse, or below 64 kB; true otherwise (NULL: no limit).
 */
Datum
bulkhead_check_memory(PG_FUNCTION_ARGS)
{
	int64		bytes;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	(void) bulkhead_memreq_parse_limit(text_to_cstring(PG_GETARG_TEXT_PP(0)),
									   PG_ARGISNULL(1) ? "" :
									   text_to_cstring(PG_GETARG_TEXT_PP(1)),
									   ERROR, &bytes);
	PG_RETURN_BOOL(true);
}
