/*-------------------------------------------------------------------------
 *
 * memreq.c
 *	  Memory grants: a statement's memory nodes (1.5: memplan.h), each with
 *	  its limit, the bound PostgreSQL holds it to at the statement's
 *	  settings, and what the plan's estimates say it will use (memest.c),
 *	  with a margin; and the request these add up to.
 *
 * The limits (1.4's request of each node), per copy: work_mem for a Sort, a
 * Material, a WindowAgg, a CTE's store (once per CTE), a table-function
 * scan, each bitmap of a bitmap heap scan, each function of a function
 * scan, each ordered or DISTINCT aggregate per grouping set, each sort of a
 * chain of grouping sets; two copies for an Incremental Sort and a
 * RecursiveUnion; work_mem x hash_mem_multiplier for a hash join's table, a
 * hashed or mixed Agg (one for all its grouping sets), a Memoize.  A
 * node's copies run in each process of its plan: under a Gather, the
 * leader and each planned worker.
 *
 * A node's request is its estimate times BULKHEAD_ESTIMATE_MARGIN, at least
 * the floor (64 kB), at most its limit.  The hash tables PostgreSQL never
 * bounds at run time (a hashed SetOp, a hashed SubPlan, RecursiveUnion's
 * table of a UNION) are the request's fixed part: the planner's estimate of
 * the table, groups (rows, for a SubPlan) times MAXALIGN(width) +
 * MAXALIGN(SizeofMinimalTupleHeader).
 *
 * SubPlans are found in the expressions of each node (its target list and
 * qual, its init plans, a join's quals, an index scan's, a Result's
 * constant qual, a Limit's, a WindowAgg's offsets) with the processes of
 * the node that holds them; a subplan of the statement found nowhere else
 * is counted once, by the leader.
 *
 * A workload's max_memory is parsed here too, as a memory setting takes a
 * value (bulkhead_check_memory, the table's check, and the worker's load).
 * A utility's request is utilreq.c's.
 *
 * Owns no state.  Called by memory.c, lanes.c, tables.c and the table's
 * check; calls memest.c.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/memreq.h"
#include "memory/memest.h"

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

/* Where the walk is: the processes of the nodes below, a top-N bound */
typedef struct Place
{
	int			gather;			/* index of the Gather above, -1 none */
	int			workers;		/* its planned workers */
	double		bound;			/* a Limit's count (+ offset) above a
								 * sort, 0 none */
} Place;

typedef struct Walk
{
	const PlannedStmt *stmt;
	BulkheadMemPlan *mp;
	int			work_mem_kb;
	double		hash_mult;
	bool	   *subplan_seen;	/* per entry of stmt->subplans */
	Bitmapset  *ctes;			/* ctePlanIds counted */
} Walk;

static void walk_plan(Walk *w, Plan *plan, Place place);

/* A hash table that never spills: the planner's estimate of its size */
static double
table_estimate(double groups, int width)
{
	return Max(groups, 1.0) *
		(MAXALIGN(Max(width, 0)) + MAXALIGN(SizeofMinimalTupleHeader));
}

/* A node's part that does not follow work_mem, for each of its processes */
static void
add_fixed(Walk *w, double bytes, Place place)
{
	w->mp->fixed += bytes * (1 + place.workers);
}

/*
 * A memory node of plan (held_by: the node that sets its limit) with copies
 * of limit bytes each, expected to use estimate bytes each
 */
static BulkheadMemNode *
add_node(Walk *w, int id, int held_by, int kind, int hold, double copies,
		 double limit, double estimate, Place place)
{
	BulkheadMemPlan *mp = w->mp;
	BulkheadMemNode *n;
	double		floor_b = Min((double) BULKHEAD_MEM_FLOOR_KB * 1024.0, limit);

	if (mp->nnodes == mp->maxnodes)
	{
		mp->maxnodes = Max(mp->maxnodes * 2, 8);
		mp->nodes = mp->nodes == NULL ?
			palloc(sizeof(BulkheadMemNode) * mp->maxnodes) :
			repalloc(mp->nodes, sizeof(BulkheadMemNode) * mp->maxnodes);
	}
	n = &mp->nodes[mp->nnodes++];
	memset(n, 0, sizeof(*n));
	n->plan_node_id = id;
	n->held_by = held_by;
	n->kind = kind;
	n->hold = hold;
	n->leader = true;
	n->gather = place.gather;
	n->workers = place.workers;
	n->copies = copies;
	n->limit = limit;
	n->estimate = Max(Min(estimate * BULKHEAD_ESTIMATE_MARGIN, limit), floor_b);
	n->request = n->estimate;
	n->source = BULKHEAD_SOURCE_ESTIMATE;
	n->peak = -1;
	n->value_peak = -1;
	return n;
}

static double
work_mem_bytes(Walk *w)
{
	return (double) w->work_mem_kb * 1024.0;
}

static double
hash_mem_bytes(Walk *w)
{
	return (double) w->work_mem_kb * 1024.0 * w->hash_mult;
}

/* The subplan of plan_id (1-based), once, with place's processes */
static void
walk_subplan(Walk *w, int plan_id, Place place)
{
	Plan	   *sub;

	if (plan_id < 1 || plan_id > list_length(w->stmt->subplans) ||
		w->subplan_seen[plan_id - 1])
		return;
	w->subplan_seen[plan_id - 1] = true;
	sub = (Plan *) list_nth(w->stmt->subplans, plan_id - 1);
	place.bound = 0;
	if (sub != NULL)
		walk_plan(w, sub, place);
}

typedef struct ExprWalk
{
	Walk	   *w;
	Place		place;
} ExprWalk;

static bool
expr_walker(Node *node, ExprWalk *ew)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubPlan))
	{
		SubPlan    *sp = (SubPlan *) node;
		Plan	   *sub = NULL;

		if (sp->plan_id >= 1 && sp->plan_id <= list_length(ew->w->stmt->subplans))
			sub = (Plan *) list_nth(ew->w->stmt->subplans, sp->plan_id - 1);
		if (sub != NULL && !ew->w->subplan_seen[sp->plan_id - 1])
		{
			if (sp->useHashTable)
				add_fixed(ew->w, table_estimate(sub->plan_rows, sub->plan_width),
						  ew->place);
			/* an array built from its rows: measured, requested from feedback */
			if (sp->subLinkType == ARRAY_SUBLINK)
				ew->w->mp->unbounded = true;
		}
		walk_subplan(ew->w, sp->plan_id, ew->place);
		/* its arguments may hold SubPlans too */
	}
	return expression_tree_walker(node, expr_walker, (void *) ew);
}

static void
walk_exprs(Walk *w, Node *exprs, Place place)
{
	ExprWalk	ew;

	ew.w = w;
	ew.place = place;
	(void) expr_walker(exprs, &ew);
}

/* The ordered or DISTINCT aggregates of an Agg */
static bool
ordered_walker(Node *node, int *n)
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
			(*n)++;
		return false;			/* (an aggregate's arguments hold none) */
	}
	return expression_tree_walker(node, ordered_walker, (void *) n);
}

/*
 * An Agg: its hash tables (one limit for all its grouping sets), its
 * ordered aggregates' sorts (one per aggregate and grouping set, of a
 * group's rows), its chain's sorts (of all its input).  An Agg with none
 * is kept too, with no copy: its aggregates' values are measured.
 */
static void
count_agg(Walk *w, Agg *agg, Place place)
{
	Plan	   *plan = &agg->plan;
	Plan	   *input = plan->lefttree;
	double		in_rows = input ? Max(input->plan_rows, 1.0) : 1.0;
	int			in_width = input ? input->plan_width : plan->plan_width;
	bool		hashed = agg->aggstrategy == AGG_HASHED || agg->aggstrategy == AGG_MIXED;
	int			ordered = 0;
	int			sets = Max(list_length(agg->groupingSets), 1);
	int			chain_sorts = 0;
	double		copies = 0;
	double		estimate = 0;
	ListCell   *lc;

	(void) ordered_walker((Node *) plan->targetlist, &ordered);
	(void) ordered_walker((Node *) plan->qual, &ordered);
	foreach(lc, agg->chain)
	{
		Agg		   *link = (Agg *) lfirst(lc);

		/* a sorted phase of grouping sets sorts its input again */
		if (link->plan.lefttree != NULL && IsA(link->plan.lefttree, Sort))
			chain_sorts++;
		sets = Max(sets, list_length(link->groupingSets));
	}
	if (hashed)
	{
		copies += 1;
		estimate = bulkhead_memest_groups((double) agg->numGroups, plan->plan_width,
										  (double) agg->transitionSpace);
	}
	if (ordered > 0)
	{
		double		groups = agg->aggstrategy == AGG_PLAIN ? 1.0 :
		Max((double) agg->numGroups, 1.0);

		copies += (double) ordered * sets;
		estimate = Max(estimate, bulkhead_memest_sort(in_rows / groups, in_width, 0));
	}
	if (chain_sorts > 0)
	{
		copies += chain_sorts;
		estimate = Max(estimate, bulkhead_memest_sort(in_rows, in_width, 0));
	}
	w->mp->unbounded = true;	/* its aggregates' values are measured */
	add_node(w, plan->plan_node_id, plan->plan_node_id, BULKHEAD_MEM_AGG,
			 chain_sorts > 0 ? BULKHEAD_HOLD_START :
			 hashed ? BULKHEAD_HOLD_PATCHED : BULKHEAD_HOLD_RUN,
			 copies, hashed ? hash_mem_bytes(w) : work_mem_bytes(w), estimate, place);
}

/*
 * The bitmaps a bitmap heap scan builds: each index scan's, but one under
 * a BitmapOr adds into the OR's own (nodeBitmapOr.c)
 */
static void
count_bitmaps(Plan *plan, bool in_or, double *copies, double *rows)
{
	ListCell   *lc;
	List	   *kids = NIL;

	if (plan == NULL)
		return;
	check_stack_depth();
	if (IsA(plan, BitmapIndexScan))
	{
		*copies += in_or ? 0 : 1;
		*rows = Max(*rows, plan->plan_rows);
		return;
	}
	if (IsA(plan, BitmapOr))
	{
		*copies += 1;
		kids = ((BitmapOr *) plan)->bitmapplans;
	}
	else if (IsA(plan, BitmapAnd))
		kids = ((BitmapAnd *) plan)->bitmapplans;
	foreach(lc, kids)
		count_bitmaps((Plan *) lfirst(lc), IsA(plan, BitmapOr), copies, rows);
}

/* A CTE's store, once for all its scans: the rows of the CTE's plan */
static void
count_cte(Walk *w, CteScan *scan, Place place)
{
	int			cte = scan->ctePlanId;
	Plan	   *sub = cte >= 1 && cte <= list_length(w->stmt->subplans) ?
	(Plan *) list_nth(w->stmt->subplans, cte - 1) : NULL;

	if (bms_is_member(cte, w->ctes))
		return;
	w->ctes = bms_add_member(w->ctes, cte);
	add_node(w, scan->scan.plan.plan_node_id, scan->scan.plan.plan_node_id,
			 BULKHEAD_MEM_CTE, BULKHEAD_HOLD_START, 1, work_mem_bytes(w),
			 bulkhead_memest_node(sub ? sub : &scan->scan.plan, BULKHEAD_MEM_CTE, 0),
			 place);
}

/* What a node itself may use (not its children) */
static void
count_node(Walk *w, Plan *plan, Place place)
{
	int			id = plan->plan_node_id;
	int			kind = -1;
	int			hold = BULKHEAD_HOLD_RUN;
	double		copies = 1;
	double		limit = work_mem_bytes(w);

	switch (nodeTag(plan))
	{
		case T_Sort:
			kind = BULKHEAD_MEM_SORT;
			break;
		case T_IncrementalSort:
			kind = BULKHEAD_MEM_INCSORT;
			copies = 2;
			break;
		case T_Material:
			kind = BULKHEAD_MEM_MATERIAL;
			break;
		case T_WindowAgg:
			kind = BULKHEAD_MEM_WINDOWAGG;
			break;
		case T_TableFuncScan:
			kind = BULKHEAD_MEM_TABLEFUNC;
			break;
		case T_FunctionScan:
			kind = BULKHEAD_MEM_FUNCTIONSCAN;
			copies = Max(list_length(((FunctionScan *) plan)->functions), 1);
			break;
		case T_CteScan:
			count_cte(w, (CteScan *) plan, place);
			return;
		case T_BitmapHeapScan:
			{
				double		bitmaps = 0;
				double		rows = 1;

				count_bitmaps(plan->lefttree, false, &bitmaps, &rows);
				add_node(w, id, id, BULKHEAD_MEM_BITMAP, BULKHEAD_HOLD_RUN, bitmaps,
						 limit, bulkhead_memest_bitmap(rows), place);
			}
			return;
		case T_HashJoin:
			if (plan->righttree != NULL && IsA(plan->righttree, Hash))
				add_node(w, plan->righttree->plan_node_id, id, BULKHEAD_MEM_HASH,
						 BULKHEAD_HOLD_RUN, 1, hash_mem_bytes(w),
						 bulkhead_memest_node(plan->righttree, BULKHEAD_MEM_HASH, 0),
						 place);
			return;
		case T_Memoize:
			kind = BULKHEAD_MEM_MEMOIZE;
			hold = BULKHEAD_HOLD_PATCHED;
			limit = hash_mem_bytes(w);
			break;
		case T_Agg:
			count_agg(w, (Agg *) plan, place);
			return;
		case T_SetOp:
			if (((SetOp *) plan)->strategy == SETOP_HASHED)
				add_fixed(w, table_estimate((double) ((SetOp *) plan)->numGroups,
											plan->plan_width), place);
			return;
		case T_RecursiveUnion:
			if (((RecursiveUnion *) plan)->numCols > 0)
				add_fixed(w, table_estimate((double) ((RecursiveUnion *) plan)->numGroups,
											plan->plan_width), place);
			kind = BULKHEAD_MEM_RECURSIVE;
			hold = BULKHEAD_HOLD_START;
			copies = 2;
			break;
		default:
			return;
	}
	add_node(w, id, id, kind, hold, copies, limit,
			 bulkhead_memest_node(plan, kind, place.bound), place);
}

/* The expressions of a node that may hold SubPlans */
static void
node_exprs(Walk *w, Plan *plan, Place place)
{
	walk_exprs(w, (Node *) plan->initPlan, place);
	walk_exprs(w, (Node *) plan->targetlist, place);
	walk_exprs(w, (Node *) plan->qual, place);
	switch (nodeTag(plan))
	{
		case T_Result:
			walk_exprs(w, ((Result *) plan)->resconstantqual, place);
			break;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			walk_exprs(w, (Node *) ((Join *) plan)->joinqual, place);
			break;
		case T_IndexScan:
			walk_exprs(w, (Node *) ((IndexScan *) plan)->indexqual, place);
			break;
		case T_BitmapHeapScan:
			walk_exprs(w, (Node *) ((BitmapHeapScan *) plan)->bitmapqualorig, place);
			break;
		case T_FunctionScan:
			walk_exprs(w, (Node *) ((FunctionScan *) plan)->functions, place);
			break;
		case T_ValuesScan:
			walk_exprs(w, (Node *) ((ValuesScan *) plan)->values_lists, place);
			break;
		case T_Limit:
			walk_exprs(w, ((Limit *) plan)->limitOffset, place);
			walk_exprs(w, ((Limit *) plan)->limitCount, place);
			break;
		case T_WindowAgg:
			walk_exprs(w, ((WindowAgg *) plan)->startOffset, place);
			walk_exprs(w, ((WindowAgg *) plan)->endOffset, place);
			break;
		default:
			break;
	}
}

static void
walk_list(Walk *w, List *plans, Place place)
{
	ListCell   *lc;

	foreach(lc, plans)
		walk_plan(w, (Plan *) lfirst(lc), place);
}

/* A Gather's workers: its own node, whose limit the workers take */
static Place
enter_gather(Walk *w, Plan *plan, int workers, Place place)
{
	BulkheadMemNode *g;

	g = add_node(w, plan->plan_node_id, plan->plan_node_id, BULKHEAD_MEM_GATHER,
				 BULKHEAD_HOLD_RUN, 0, work_mem_bytes(w), 0, place);
	place.gather = w->mp->nnodes - 1;
	place.workers = Max(workers, 0);
	(void) g;
	return place;
}

static void
walk_plan(Walk *w, Plan *plan, Place place)
{
	Place		below = place;

	if (plan == NULL)
		return;
	check_stack_depth();
	count_node(w, plan, place);
	below.bound = 0;
	node_exprs(w, plan, below);
	switch (nodeTag(plan))
	{
		case T_Gather:
			below = enter_gather(w, plan, ((Gather *) plan)->num_workers, place);
			break;
		case T_GatherMerge:
			below = enter_gather(w, plan, ((GatherMerge *) plan)->num_workers, place);
			break;
		case T_Limit:
			below.bound = bulkhead_memest_limit_bound((Limit *) plan);
			break;
		case T_Result:
			/* a bound passes a projection (as ExecSetTupleBound's does) */
			if (((Result *) plan)->resconstantqual == NULL && plan->qual == NIL)
				below.bound = place.bound;
			break;
		case T_Append:
			walk_list(w, ((Append *) plan)->appendplans, place);
			break;
		case T_MergeAppend:
			walk_list(w, ((MergeAppend *) plan)->mergeplans, place);
			break;
		case T_SubqueryScan:
			walk_plan(w, ((SubqueryScan *) plan)->subplan, place);
			break;
		case T_CustomScan:
			walk_list(w, ((CustomScan *) plan)->custom_plans, below);
			break;
		case T_BitmapHeapScan:
			return;				/* its bitmaps are counted, no SubPlan below */
		default:
			break;
	}
	if (IsA(plan, Gather) || IsA(plan, GatherMerge))
		below.bound = place.bound;
	walk_plan(w, plan->lefttree, below);
	walk_plan(w, plan->righttree, below);
}

void
bulkhead_memreq_build(const PlannedStmt *plan, int work_mem_kb, double hash_mult,
					  BulkheadMemPlan *mp)
{
	Walk		w;
	Place		top = {-1, 0, 0};
	int			nsub = list_length(plan->subplans);
	int			i;

	memset(mp, 0, sizeof(*mp));
	mp->queryid = plan->queryId;
	mp->slotno = -1;
	mp->extra_peak = -1;
	memset(&w, 0, sizeof(w));
	w.stmt = plan;
	w.mp = mp;
	w.work_mem_kb = work_mem_kb;
	w.hash_mult = hash_mult;
	w.subplan_seen = nsub > 0 ? palloc0(sizeof(bool) * nsub) : NULL;
	walk_plan(&w, plan->planTree, top);
	/* a subplan found in no expression walked: once, by the leader */
	for (i = 0; i < nsub; i++)
		walk_subplan(&w, i + 1, top);
	if (w.subplan_seen)
		pfree(w.subplan_seen);
	bms_free(w.ctes);
	mp->start_kb = work_mem_kb;
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
