/*-------------------------------------------------------------------------
 *
 * lanes.c
 *	  Statement rules (1.3): a row of bulkhead_rule with min_cost or
 *	  command chooses the lane (workload) of a statement by what it is: its
 *	  kind (select, insert, update, delete, merge, utility) and its plan's
 *	  estimated total cost, the top plan node's total_cost as EXPLAIN shows
 *	  it.  Its other columns (role, database, application_name,
 *	  client_addr) filter by session: those were matched once per session
 *	  (rules.c), so a statement pays a comparison per statement rule that
 *	  can match its session, and nothing when there is none.
 *
 * A utility has no cost: only command matches it.  EXECUTE and EXPLAIN
 * ANALYZE are matched as the statement they run (when its executor
 * starts, with its plan's cost: a cached generic plan's cost is its
 * plan's); EXPLAIN without ANALYZE matches nothing.
 *
 * bulkhead_classify(query) plans a query without running it and answers
 * which workload it would take, and why, as the gate would choose for the
 * calling session's next statement: inside a transaction block that holds
 * its automatic permit already, a query that matches no statement rule
 * stays where that permit is (source 'transaction').  DECLARE and COPY
 * (query) TO are classified as they run: as utilities (the gate matches
 * them before their query is planned), with the memory request of their
 * query, planned as they plan it (a cursor with its options), whose grant
 * is taken when its executor starts.
 *
 * Before a statement's lane is known it is planned under the caps of the
 * lane it most likely takes (the session's workload, for the
 * transaction's first statement), and its query kept for a second
 * planning only while one of its statement rules' lanes caps the
 * planner's settings (worked out again when the rules or the workloads
 * were loaded anew).
 *
 * Owns a backend-local cache (whether such a lane is reachable).  Called
 * by transparent.c, hooks.c and the SQL function; calls rules.c, caps.c, local.c
 * (the transaction's permit, for bulkhead_classify(query)) and reads the
 * slots (shmem.h) under their locks.
 *
 *-------------------------------------------------------------------------
 */
#include "statement/lanes.h"
#include "guards/caps.h"
#include "permit/local.h"
#include "memory/memory.h"
#include "memory/memreq.h"
#include "memory/memplan.h"
#include "memory/memory.h"
#include "memory/utilreq.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "rewrite/rewriteHandler.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(bulkhead_classify_query);

uint8
bulkhead_statement_kind(CmdType command)
{
	switch (command)
	{
		case CMD_SELECT:
			return BULKHEAD_CMD_SELECT;
		case CMD_INSERT:
			return BULKHEAD_CMD_INSERT;
		case CMD_UPDATE:
			return BULKHEAD_CMD_UPDATE;
		case CMD_DELETE:
			return BULKHEAD_CMD_DELETE;
		case CMD_MERGE:
			return BULKHEAD_CMD_MERGE;
		case CMD_UTILITY:
			return BULKHEAD_CMD_UTILITY;
		default:
			return 0;
	}
}

/* Is this EXPLAIN one that runs its statement (ANALYZE)? */
static bool
explain_analyzes(ExplainStmt *stmt)
{
	ListCell   *lc;
	bool		analyze = false;

	foreach(lc, stmt->options)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		/* (a bad value raises the error EXPLAIN would) */
		if (strcmp(opt->defname, "analyze") == 0)
			analyze = defGetBoolean(opt);
	}
	return analyze;
}

/* Utility statements that run without a permit */
bool
bulkhead_utility_needs_no_permit(Node *stmt)
{
	switch (nodeTag(stmt))
	{
		case T_TransactionStmt:
		case T_VariableSetStmt:
		case T_VariableShowStmt:
		case T_DiscardStmt:
		case T_ListenStmt:
		case T_UnlistenStmt:
		case T_PrepareStmt:
		case T_DeallocateStmt:
		case T_ClosePortalStmt:
			return true;
		default:
			return false;
	}
}

BulkheadLaneUtility
bulkhead_lane_utility(Node *stmt)
{
	if (IsA(stmt, ExecuteStmt))
		return BULKHEAD_LANE_DEFER;
	if (IsA(stmt, ExplainStmt))
		return explain_analyzes((ExplainStmt *) stmt) ?
			BULKHEAD_LANE_DEFER : BULKHEAD_LANE_NONE;
	return BULKHEAD_LANE_UTILITY;
}

/* The first statement rule of this session that matches, or NULL */
static const BulkheadRule *
first_match(uint8 kind, bool has_cost, double cost)
{
	const BulkheadRule *rules;
	int			n;
	int			i;

	rules = bulkhead_statement_rules(&n);
	for (i = 0; i < n; i++)
	{
		const BulkheadRule *rule = &rules[i];

		if (rule->commands != 0 && (rule->commands & kind) == 0)
			continue;
		if (rule->has_min_cost && (!has_cost || cost < rule->min_cost))
			continue;
		return rule;
	}
	return NULL;
}

const char *
bulkhead_lane_of(uint8 kind, bool has_cost, double cost, int32 *position)
{
	const BulkheadRule *rule = first_match(kind, has_cost, cost);

	if (rule == NULL)
		return NULL;
	*position = rule->position;
	return rule->workload;
}

/*
 * Does the cost of a plan of kind choose its lane (the first rule that
 * matches it is one of min_cost)?  Then the plan's cost shows through the
 * lane, and for a plan the user may not run, the caller matches it as one
 * without a cost (no min_cost rule matches it): whatever its cost, the same
 * lane.
 */
bool
bulkhead_lane_by_cost(uint8 kind, double cost)
{
	const BulkheadRule *rule = first_match(kind, true, cost);

	return rule != NULL && rule->has_min_cost;
}

/*---- Planning before the lane is known ----*/

/* The caps of workload name, read under its lock; false if unknown */
static bool
workload_caps(const char *name, BulkheadCaps *out)
{
	int			slotno = bulkhead_find_slot(name);
	BulkheadSlot *slot;
	bool		found;

	if (slotno < 0)
		return false;
	slot = &bulkhead_shared->slots[slotno];
	bulkhead_slot_lock(slot, LW_SHARED);
	found = slot->in_use && slot->defined && strcmp(slot->name, name) == 0;
	if (found)
		*out = slot->config.caps;
	LWLockRelease(slot->lock);
	return found;
}

/*
 * May a statement rule of this session send a statement to a lane whose
 * settings cap what the planner uses?  Then its query is copied before it
 * is planned, in case its lane calls for planning it again.  Worked out
 * again when the session's rules or the workloads were loaded anew.
 */
bool
bulkhead_planning_lane_reachable(void)
{
	static uint64 seen_rules = PG_UINT64_MAX;
	static uint64 seen_loads = PG_UINT64_MAX;
	static bool reachable = false;
	const BulkheadRule *rules;
	uint64		loads;
	int			n;
	int			i;

	if (pg_atomic_read_u32(&bulkhead_shared->planning_lanes) == 0)
		return false;
	rules = bulkhead_statement_rules(&n);
	loads = pg_atomic_read_u64(&bulkhead_shared->loads);
	if (bulkhead_statement_rules_version() == seen_rules && loads == seen_loads)
		return reachable;
	reachable = false;
	for (i = 0; i < n && !reachable; i++)
	{
		BulkheadCaps caps;

		if (workload_caps(rules[i].workload, &caps) &&
			(caps.mask & BULKHEAD_PLANNING_CAPS) != 0)
			reachable = true;
	}
	seen_rules = bulkhead_statement_rules_version();
	seen_loads = loads;
	return reachable;
}

/*
 * The caps to plan a top-level statement under before its lane is known:
 * those in force, and for the transaction's first statement, those of the
 * workload the session would take without a statement rule (the lane most
 * statements take: then they are planned once).
 */
BulkheadCaps
bulkhead_planning_caps(const BulkheadCaps *in_force, bool first)
{
	BulkheadCaps caps = *in_force;
	BulkheadClassification class;
	BulkheadCaps session;

	if (!first || pg_atomic_read_u32(&bulkhead_shared->planning_lanes) == 0)
		return caps;			/* (no workload caps a planner setting) */
	bulkhead_classify_session(&class);
	if (class.workload != NULL && workload_caps(class.workload, &session))
		bulkhead_caps_combine(&caps, &session);
	return caps;
}

/*---- bulkhead_classify(query) ----*/

/*
 * Plan q as the statement that runs it would (cursor options: a cursor's
 * own, CURSOR_OPT_PARALLEL_OK for a plain statement and COPY's query), and
 * describe it: its kind, its cost, its plan for its memory.
 */
static void
describe_plan(Query *q, const char *query, int cursor_options, uint8 *kind,
			  bool *has_cost, double *cost, PlannedStmt **plan_out)
{
	PlannedStmt *plan;

#if PG_VERSION_NUM >= 190000
	plan = pg_plan_query(q, query, cursor_options, NULL, NULL);
#else
	plan = pg_plan_query(q, query, cursor_options, NULL);
#endif
	/* as EXPLAIN does: the caller must be allowed to run it */
#if PG_VERSION_NUM >= 160000
	(void) ExecCheckPermissions(plan->rtable, plan->permInfos, true);
#else
	(void) ExecCheckRTPerms(plan->rtable, true);
#endif
	*kind = bulkhead_statement_kind(plan->commandType);
	*has_cost = true;
	*cost = plan->planTree->total_cost;
	*plan_out = plan;
}

/*
 * A cursor's query, as DECLARE runs it (PerformCursorOpen): analysed with
 * the DECLARE, rewritten now, planned with the cursor's options (a fast
 * start, SCROLL's Materialize on top, no parallel plan).  false: not a
 * single SELECT after the rewrite (DECLARE would fail), a utility then.
 */
static bool
describe_cursor(DeclareCursorStmt *cursor, const char *query, uint8 *kind,
				bool *has_cost, double *cost, PlannedStmt **plan_out)
{
	List	   *rewritten;
	Query	   *q;

	rewritten = QueryRewrite(castNode(Query, copyObject(cursor->query)));
	if (list_length(rewritten) != 1)
		return false;
	q = linitial_node(Query, rewritten);
	if (q->commandType != CMD_SELECT)
		return false;
	describe_plan(q, query, cursor->options, kind, has_cost, cost, plan_out);
	return true;
}

/*
 * The kind and cost of the statement that stmt runs, and its plan (or its
 * utility command) for its memory; false: none matches (nor runs).  EXPLAIN
 * ANALYZE is described as the query it runs; DECLARE and COPY (query) TO as
 * utilities with the plan of the query they run.
 */
static bool
describe(RawStmt *raw, const char *query, uint8 *kind, bool *has_cost,
		 double *cost, PlannedStmt **plan_out, Node **utility_out)
{
	Oid		   *types = NULL;
	int			ntypes = 0;
	List	   *queries;
	Query	   *q;
	RawStmt    *inner = NULL;

	*has_cost = false;
	if (IsA(raw->stmt, ExplainStmt))
	{
		if (!explain_analyzes((ExplainStmt *) raw->stmt))
			return false;
		inner = makeNode(RawStmt);
		inner->stmt = ((ExplainStmt *) raw->stmt)->query;
	}
	else if (IsA(raw->stmt, CopyStmt) && ((CopyStmt *) raw->stmt)->query != NULL)
	{
		/* COPY (query) TO: its query analysed and planned alone (BeginCopyTo) */
		inner = makeNode(RawStmt);
		inner->stmt = copyObject(((CopyStmt *) raw->stmt)->query);
	}
	if (inner != NULL)
	{
		bool		described;

		inner->stmt_location = raw->stmt_location;
		inner->stmt_len = raw->stmt_len;
		described = describe(inner, query, kind, has_cost, cost, plan_out, utility_out);
		/* COPY takes its permit as a utility, as it runs; its query's plan asks */
		if (described && IsA(raw->stmt, CopyStmt))
		{
			*kind = BULKHEAD_CMD_UTILITY;
			*has_cost = false;
		}
		return described;
	}

	/* parameters ($1, ...) are allowed, their types deduced */
	queries = pg_analyze_and_rewrite_varparams(raw, query, &types, &ntypes, NULL);
	if (list_length(queries) != 1)
	{
		*kind = BULKHEAD_CMD_UTILITY;	/* a rule's rewrite into several */
		return true;
	}
	q = linitial_node(Query, queries);
	if (q->commandType != CMD_UTILITY)
	{
		describe_plan(q, query, CURSOR_OPT_PARALLEL_OK, kind, has_cost, cost,
					  plan_out);
		return true;
	}
	if (IsA(q->utilityStmt, ExecuteStmt))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("bulkhead_classify cannot classify EXECUTE"),
				 errhint("Classify the prepared statement's query itself.")));
	/* DECLARE takes its permit as a utility, as it runs; its query's plan asks */
	if (IsA(q->utilityStmt, DeclareCursorStmt) &&
		describe_cursor((DeclareCursorStmt *) q->utilityStmt, query, kind,
						has_cost, cost, plan_out))
	{
		*kind = BULKHEAD_CMD_UTILITY;
		*has_cost = false;
		return true;
	}
	*kind = BULKHEAD_CMD_UTILITY;
	*utility_out = q->utilityStmt;
	return true;
}

/*
 * A memory setting's value for a statement run now under caps: the value
 * the calling statement asked for (before its own grant shrank it: the
 * caller's next statement would not run shrunk), capped.
 */
static double
runs_with(const BulkheadCaps *caps, int i, double live)
{
	double		value = bulkhead_memory_asked(i, live);

	if ((caps->mask & (1 << i)) && caps->value[i] < value)
		return caps->value[i];
	return value;
}

/*
 * The memory (bytes) a statement of plan (or utility) would request in
 * workload (NULL: none), as it would run there: with the caps in force and
 * the workload's (1.4, memory grants).  0 for one that runs nothing.
 */
static int64
memory_of(PlannedStmt *plan, Node *utility, const char *workload, const char **source)
{
	BulkheadCaps caps = bulkhead_caps_in_force;
	BulkheadCaps lane;
	BulkheadMemRequest req;
	int64		bytes;
	char		from;

	*source = NULL;
	if (workload != NULL && workload_caps(workload, &lane))
		bulkhead_caps_combine(&caps, &lane);
	if (plan != NULL)
	{
		bytes = bulkhead_memory_request_of(plan,
										   (int) runs_with(&caps, BULKHEAD_CAP_WORK_MEM, work_mem),
										   runs_with(&caps, BULKHEAD_CAP_HASH_MEM_MULTIPLIER,
													 hash_mem_multiplier),
										   workload ? bulkhead_find_slot(workload) : -1,
										   &from);
		if (bytes > 0)
			*source = from == BULKHEAD_SOURCE_FEEDBACK ? "feedback" :
				from == BULKHEAD_SOURCE_LIMIT ? "limit" : "estimate";
		return bytes;
	}
	if (utility == NULL ||
		!bulkhead_memreq_utility(utility, PROCESS_UTILITY_TOPLEVEL,
								 (int) runs_with(&caps, BULKHEAD_CAP_MAINTENANCE_WORK_MEM,
												 maintenance_work_mem),
								 (int) runs_with(&caps, BULKHEAD_CAP_PARALLEL_MAINTENANCE,
												 max_parallel_maintenance_workers),
								 &req))
		return 0;
	*source = "limit";			/* a utility asks its maintenance_work_mem */
	return bulkhead_memreq_bytes(&req);
}

/*
 * An error in the query (its syntax, a relation it names) points into the
 * query, as an error in a function's query does, not into the statement
 * that calls bulkhead_classify.
 */
static void
classify_error_context(void *arg)
{
	int			position = geterrposition();

	if (position > 0)
	{
		errposition(0);
		internalerrposition(position);
		internalerrquery((const char *) arg);
	}
}

/*
 * The workload of this transaction's automatic permit, where it is now
 * (max_hold may have moved it), into name; false when the caller is not in
 * a transaction block or the block holds none.  Outside a block, the next
 * statement is a new transaction's first: this statement's permit (taken
 * for the call itself) ends with it.
 */
static bool
transaction_lane(char *name)
{
	int			li = IsTransactionBlock() ? bulkhead_local_auto_index() : -1;
	BulkheadSlot *slot;
	int			slotno;

	if (li < 0)
		return false;
	slot = bulkhead_lock_entry_slot(bulkhead_my_entry(li), &slotno);
	strlcpy(name, slot->name, NAMEDATALEN);
	LWLockRelease(slot->lock);
	return true;
}

/*
 * bulkhead_classify(query text): the workload the calling session's next
 * statement would run in if it were query, and why: source 'rule' and the
 * position of the statement rule that matches; else, inside a transaction
 * block that holds its automatic permit already (taken by an earlier
 * statement, or by this very call's), that permit's workload, source
 * 'transaction' (the statement stays there); else the session's
 * classification (bulkhead_classify()), as for a transaction's first
 * statement.  For a statement that takes no permit (BEGIN, SET, SHOW, ...)
 * source 'none' and no workload.  The query is planned, not run; planning
 * it needs the privileges running it would.
 */
Datum
bulkhead_classify_query(PG_FUNCTION_ARGS)
{
	char	   *query;
	List	   *raws;
	RawStmt    *raw;
	ErrorContextCallback context;
	uint8		kind = 0;
	bool		has_cost = false;
	double		cost = 0;
	bool		described;
	const char *lane = NULL;
	int32		position = 0;
	bool		snapshot = false;
	char		held[NAMEDATALEN];
	PlannedStmt *plan = NULL;
	Node	   *utility = NULL;
	BulkheadClassification class;
	int64		memory;
	const char *memory_source;

	bulkhead_check_loaded();
	query = text_to_cstring(PG_GETARG_TEXT_PP(0));
	context.callback = classify_error_context;
	context.arg = query;
	context.previous = error_context_stack;
	error_context_stack = &context;
	raws = pg_parse_query(query);
	if (list_length(raws) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bulkhead_classify needs exactly one statement"),
				 errdetail("The query has %d.", list_length(raws))));
	raw = linitial_node(RawStmt, raws);
	if (bulkhead_utility_needs_no_permit(raw->stmt))
	{
		/* (transaction control, SET, SHOW, ...): no workload */
		error_context_stack = context.previous;
		return bulkhead_classification_row(fcinfo, NULL, "none", 0, false, 0, NULL);
	}
	if (!ActiveSnapshotSet())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		snapshot = true;
	}
	described = describe(raw, query, &kind, &has_cost, &cost, &plan, &utility);
	if (snapshot)
		PopActiveSnapshot();
	error_context_stack = context.previous;
	if (described)
		lane = bulkhead_lane_of(kind, has_cost, cost, &position);
	if (lane != NULL)
	{
		memory = memory_of(plan, utility, lane, &memory_source);
		return bulkhead_classification_row(fcinfo, lane, "rule", position, true,
										   memory, memory_source);
	}
	if (transaction_lane(held))
	{
		memory = memory_of(plan, utility, held, &memory_source);
		return bulkhead_classification_row(fcinfo, held, "transaction", 0, false,
										   memory, memory_source);
	}
	bulkhead_classify_session(&class);
	bulkhead_publish_classification(&class);
	memory = memory_of(plan, utility, class.workload, &memory_source);
	return bulkhead_classification_row(fcinfo, class.workload,
									   bulkhead_class_source_name(class.source),
									   class.position,
									   class.source == BULKHEAD_CLASS_RULE,
									   memory, memory_source);
}
