/*-------------------------------------------------------------------------
 *
 * hooks.c
 *	  Where statements pass: the planner, the executor's phases and
 *	  ProcessUtility.  Here a statement meets the gate (gate.c) and the
 *	  caps of its lanes (caps.c); statement.c tells which of these calls is
 *	  the client's statement.
 *
 * The gate.  The early gate comes when the planner starts on a client's
 * top-level statement; then ExecutorStart and ProcessUtility (a cached
 * plan, a utility); ExecutorRun too, for a portal resumed after its
 * transaction lost its permit (a failed move, then ROLLBACK TO SAVEPOINT).
 * Without statement rules the transaction's permit is taken before
 * planning.  With them, each top-level statement is planned first (while
 * it is, the queries the planner runs take no permit) and matched after:
 * its cost is its plan's, a statement whose plan comes from the cache is
 * matched when its executor starts, with that plan's cost, and a plan the
 * user may not run is not matched at all (its cost would tell what
 * pg_stats hides), the session's workload applies.  The transaction's
 * first statement is planned under the caps of the session's workload,
 * and planned again (from a copy of its query, kept only while a lane its
 * statement rules may send it to caps such settings: lanes.c) if the lane
 * it takes caps the planner's settings otherwise.
 *
 * Caps.  While permits with lanes' settings are held, the planning of a
 * top-level statement, each executor phase and each utility runs with the
 * caps in force (caps.c): a phase nested in another finds them set already.
 * Not capped: transaction control, SET and RESET (which change the
 * session's own values), DISCARD, CALL and DO (a procedure may commit: its
 * statements are capped one by one), EXECUTE and EXPLAIN (the statement
 * they run is); a top-level utility outside a transaction block that may
 * commit internally is capped for the session instead (caps.c).  A
 * statement whose plan was made before its lane was known (a cached plan,
 * the first statement's EXECUTE or EXPLAIN ANALYZE) has its parallel
 * workers lowered to the cap of max_parallel_workers_per_gather when its
 * executor starts.
 *
 * Memory grants (1.4).  A statement's executor start is where it is
 * granted its memory (memory.c), after its lane is known and before the
 * standard start, and its end where the grant is returned; a statement
 * that runs shrunk has its work_mem lowered around each phase, as a cap.
 * A utility that uses maintenance_work_mem is granted it for its run.
 *
 * Owns no state of its own but the hooks' previous values.  Called by
 * bulkhead.c (init); calls gate.c, lanes.c, caps.c, memory.c, statement.c, rules.c,
 * local.c, follow.c and statements.c (a statement's call, 1.4).
 *
 *-------------------------------------------------------------------------
 */
#include "hooks.h"
#include "caps.h"
#include "follow.h"
#include "gate.h"
#include "lanes.h"
#include "local.h"
#include "memory.h"
#include "rules.h"
#include "statement.h"
#include "statements.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/snapmgr.h"

/* The planner hook's arguments, which 19 extends */
#if PG_VERSION_NUM >= 190000
#define PLANNER_PARAMS	Query *parse, const char *query_string, \
	int cursorOptions, ParamListInfo boundParams, ExplainState *es
#define PLANNER_ARGS(q)	(q), query_string, cursorOptions, boundParams, es
#else
#define PLANNER_PARAMS	Query *parse, const char *query_string, \
	int cursorOptions, ParamListInfo boundParams
#define PLANNER_ARGS(q)	(q), query_string, cursorOptions, boundParams
#endif

/* ExecutorRun's arguments, which 18 shortened */
#if PG_VERSION_NUM >= 180000
#define RUN_PARAMS	QueryDesc *queryDesc, ScanDirection direction, uint64 count
#define RUN_ARGS	queryDesc, direction, count
#else
#define RUN_PARAMS	QueryDesc *queryDesc, ScanDirection direction, \
	uint64 count, bool execute_once
#define RUN_ARGS	queryDesc, direction, count, execute_once
#endif

static planner_hook_type prev_planner = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorRun_hook_type prev_ExecutorRun = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * Has this statement statement rules to meet?  Only a client backend's
 * (not a parallel worker's, a walsender's, a background worker's), and
 * then one atomic read when the rule set has none.
 */
static inline bool
lanes_here(void)
{
	return bulkhead_gate_applies() && bulkhead_lanes_apply();
}

/* The next planner, at one more nesting level */
static PlannedStmt *
plan_next(PLANNER_PARAMS)
{
	PlannedStmt *result;

	bulkhead_nesting++;
	PG_TRY();
	{
		if (prev_planner)
			result = prev_planner(PLANNER_ARGS(parse));
		else
			result = standard_planner(PLANNER_ARGS(parse));
	}
	PG_FINALLY();
	{
		bulkhead_nesting--;
	}
	PG_END_TRY();
	return result;
}

/* The same with caps in force (an error pops their level with the abort) */
static PlannedStmt *
plan_capped(const BulkheadCaps *caps, PLANNER_PARAMS)
{
	BulkheadCapsFrame frame = bulkhead_caps_enter(caps);
	PlannedStmt *result = plan_next(PLANNER_ARGS(parse));

	bulkhead_caps_leave(frame);
	return result;
}

/*
 * Plan a statement whose permit is not taken yet: the queries the planner
 * runs take none meanwhile.
 */
static PlannedStmt *
plan_unmatched(const BulkheadCaps *caps, PLANNER_PARAMS)
{
	PlannedStmt *result;
	bool		was = bulkhead_planning_unmatched;

	bulkhead_planning_unmatched = true;
	PG_TRY();
	{
		result = plan_capped(caps, PLANNER_ARGS(parse));
	}
	PG_FINALLY();
	{
		bulkhead_planning_unmatched = was;
	}
	PG_END_TRY();
	return result;
}

/*
 * May the plan's cost choose its lane?  Not for a plan the user may not
 * run, when its cost would (the lane would tell its cost, and so the
 * statistics pg_stats hides): it is matched as a plan without a cost.  The
 * privileges are checked only then (the executor checks them anyway).
 */
static bool
cost_may_show(PlannedStmt *plan)
{
	return !bulkhead_lane_by_cost(bulkhead_statement_kind(plan->commandType),
								  plan->planTree->total_cost) ||
		bulkhead_may_run(plan);
}

/*
 * A client's top-level statement with statement rules: planned, matched,
 * its permit taken or moved (without the planning snapshot, as the early
 * gate waits), and planned again if its lane's caps change the planner's
 * settings from those it was planned under.
 */
static PlannedStmt *
plan_and_match(PLANNER_PARAMS)
{
	Query	   *copy = NULL;
	BulkheadCaps planned_under;
	PlannedStmt *result;
	bool		given_up = false;

	bulkhead_local_follow_moves();
	if (bulkhead_generic_planning(parse, query_string, boundParams))
		return plan_unmatched(&bulkhead_caps_in_force, PLANNER_ARGS(parse));
	if (bulkhead_planning_lane_reachable())
		copy = copyObject(parse);
	planned_under = bulkhead_planning_caps(&bulkhead_caps_in_force,
										   !bulkhead_gate_passed());
	result = plan_unmatched(&planned_under, PLANNER_ARGS(parse));
	(void) bulkhead_gate_statement(bulkhead_statement_kind(result->commandType),
								   cost_may_show(result), result->planTree->total_cost,
								   IsolationUsesXactSnapshot() ? NULL : &given_up);
	if (given_up)
		PushActiveSnapshot(GetTransactionSnapshot());
	if (copy != NULL && bulkhead_caps_planning_differ(&planned_under, &bulkhead_caps_in_force))
		result = plan_capped(&bulkhead_caps_in_force, PLANNER_ARGS(copy));
	bulkhead_statement_matched(query_string, result);
	return result;
}

/*
 * The planner: a client's top-level statement meets the gate here.  Any
 * planning runs with the caps in force.
 */
static PlannedStmt *
hooks_planner(PLANNER_PARAMS)
{
	if (bulkhead_planning_is_top(query_string))
	{
		bulkhead_caps_restore_pending();
		if (lanes_here())
			return plan_and_match(PLANNER_ARGS(parse));
		if (!bulkhead_gate_passed())
		{
			bool		given_up = false;

			bulkhead_gate_transaction(IsolationUsesXactSnapshot() ? NULL : &given_up);
			if (given_up)
				PushActiveSnapshot(GetTransactionSnapshot());
		}
	}
	return plan_capped(&bulkhead_caps_in_force, PLANNER_ARGS(parse));
}

/*
 * The gate at an executor start: the client's statement not matched when
 * planned (a cached plan, or what EXECUTE or EXPLAIN ANALYZE runs) meets
 * the statement rules; else the transaction's first statement takes the
 * session's workload, unless the start is one the planner runs for a
 * statement that is not matched yet.
 */
static void
gate_executor_start(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *plan = queryDesc->plannedstmt;

	if (lanes_here() && bulkhead_statement_to_match(queryDesc, eflags))
		(void) bulkhead_gate_statement(bulkhead_statement_kind(plan->commandType),
									   cost_may_show(plan), plan->planTree->total_cost,
									   NULL);
	else if (!bulkhead_planning_unmatched)
		(void) bulkhead_gate_transaction(NULL);
}

/* The next ExecutorStart, Run, Finish, at one more nesting level */
static void
start_next(QueryDesc *queryDesc, int eflags)
{
	bulkhead_nesting++;
	PG_TRY();
	{
		if (prev_ExecutorStart)
			prev_ExecutorStart(queryDesc, eflags);
		else
			standard_ExecutorStart(queryDesc, eflags);
	}
	PG_FINALLY();
	{
		bulkhead_nesting--;
	}
	PG_END_TRY();
}

static void
run_next(RUN_PARAMS)
{
	bulkhead_nesting++;
	PG_TRY();
	{
		if (prev_ExecutorRun)
			prev_ExecutorRun(RUN_ARGS);
		else
			standard_ExecutorRun(RUN_ARGS);
	}
	PG_FINALLY();
	{
		bulkhead_nesting--;
	}
	PG_END_TRY();
}

static void
finish_next(QueryDesc *queryDesc)
{
	bulkhead_nesting++;
	PG_TRY();
	{
		if (prev_ExecutorFinish)
			prev_ExecutorFinish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
	}
	PG_FINALLY();
	{
		bulkhead_nesting--;
	}
	PG_END_TRY();
}

static void
hooks_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	BulkheadCapsFrame frame;

	bulkhead_caps_restore_pending();
	bulkhead_local_follow_moves();
	gate_executor_start(queryDesc, eflags);
	bulkhead_statements_count_call(bulkhead_nesting == 0);	/* 1.4 */
	bulkhead_caps_parallel_workers(queryDesc, &bulkhead_caps_in_force);
	/* its memory grant (1.4), before the nodes that fix their limit here */
	frame = bulkhead_caps_enter(bulkhead_memory_start(queryDesc, eflags,
													  &bulkhead_caps_in_force));
	start_next(queryDesc, eflags);
	bulkhead_caps_leave(frame);
}

static void
hooks_ExecutorRun(RUN_PARAMS)
{
	BulkheadCapsFrame frame;

	/* a portal resumed in a transaction that lost its permit since */
	if (bulkhead_nesting == 0 && !bulkhead_gate_passed())
		(void) bulkhead_gate_transaction(NULL);
	frame = bulkhead_caps_enter(bulkhead_memory_caps(queryDesc, &bulkhead_caps_in_force));
	run_next(RUN_ARGS);
	bulkhead_caps_leave(frame);
}

/*
 * ExecutorFinish runs what a statement leaves to its end (AFTER triggers,
 * data-modifying CTEs): nothing a plain SELECT has, which is not capped.
 */
static void
hooks_ExecutorFinish(QueryDesc *queryDesc)
{
	BulkheadCapsFrame frame = {0, 0};

	if (queryDesc->operation != CMD_SELECT ||
		queryDesc->plannedstmt->hasModifyingCTE)
		frame = bulkhead_caps_enter(bulkhead_memory_caps(queryDesc,
														 &bulkhead_caps_in_force));
	finish_next(queryDesc);
	bulkhead_caps_leave(frame);
}

/* The executor's end returns the statement's memory grant (1.4) */
static void
hooks_ExecutorEnd(QueryDesc *queryDesc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	bulkhead_memory_end(queryDesc);
}

/*
 * Does this top-level utility hold the gate permit for its whole run?  A
 * top-level statement outside a transaction block may commit internally
 * and go on in new transactions, which reach no hook of ours: CREATE INDEX
 * CONCURRENTLY, REINDEX ... CONCURRENTLY, DROP INDEX CONCURRENTLY, ALTER
 * TABLE ... DETACH PARTITION ... CONCURRENTLY, VACUUM, ANALYZE, CLUSTER.
 * Holding the permit over any such statement is harmless for those that do
 * not commit (the permit goes at the statement's own commit either way).
 * CALL and DO are left out on purpose: a procedure that commits takes a new
 * permit in each transaction, at its next statement.
 */
static bool
runs_outside_block(Node *stmt, ProcessUtilityContext context)
{
	return context == PROCESS_UTILITY_TOPLEVEL &&
		!IsTransactionBlock() && !IsA(stmt, CallStmt) && !IsA(stmt, DoStmt);
}

/* How a utility is capped */
typedef enum UtilityCaps
{
	CAPS_NONE,					/* not at all */
	CAPS_LEVEL,					/* in a GUC nesting level */
	CAPS_SESSION				/* for the session, over its internal commits */
} UtilityCaps;

static UtilityCaps
utility_caps(Node *stmt, ProcessUtilityContext context, const BulkheadCaps *caps)
{
	if (caps->mask == 0)
		return CAPS_NONE;
	switch (nodeTag(stmt))
	{
		case T_TransactionStmt:
		case T_VariableSetStmt:
		case T_DiscardStmt:
		case T_CallStmt:
		case T_DoStmt:
		case T_ExecuteStmt:
		case T_ExplainStmt:
			return CAPS_NONE;
		case T_VacuumStmt:
#if PG_VERSION_NUM >= 190000
		case T_RepackStmt:		/* CLUSTER and REPACK, 19 on */
#else
		case T_ClusterStmt:
#endif
		case T_ReindexStmt:
		case T_IndexStmt:
		case T_DropStmt:
		case T_AlterTableStmt:
		case T_AlterDatabaseStmt:
			return runs_outside_block(stmt, context) ? CAPS_SESSION : CAPS_LEVEL;
		default:
			return CAPS_LEVEL;
	}
}

/*
 * The gate for a utility: a top-level one meets the statement rules (as a
 * utility; EXECUTE and EXPLAIN ANALYZE when the statement they run starts;
 * EXPLAIN alone matches none) or else the session's workload.  Returns
 * whether it holds the gate permit over its own commits.
 */
static bool
gate_utility(Node *stmt, const char *queryString, ProcessUtilityContext context)
{
	bool		held;

	if (bulkhead_utility_needs_no_permit(stmt) || bulkhead_planning_unmatched)
		return false;
	if (context == PROCESS_UTILITY_TOPLEVEL && bulkhead_nesting == 0 &&
		lanes_here())
	{
		switch (bulkhead_lane_utility(stmt))
		{
			case BULKHEAD_LANE_DEFER:
				bulkhead_statement_defer(stmt, queryString);
				return false;
			case BULKHEAD_LANE_UTILITY:
				held = bulkhead_gate_statement(BULKHEAD_CMD_UTILITY, false, 0, NULL);
				break;
			case BULKHEAD_LANE_NONE:
			default:
				held = bulkhead_gate_transaction(NULL);
				break;
		}
	}
	else
		held = bulkhead_gate_transaction(NULL);
	return held && !bulkhead_gate_holding_for_utility() &&
		runs_outside_block(stmt, context);
}

/*
 * The next ProcessUtility, at one more nesting level.  On an error the
 * flags go first (the hold over internal commits, what EXECUTE or EXPLAIN
 * ANALYZE stood for, the session caps, to be put back at the next
 * statement); then the abort returns the permit (local.c; at a FATAL the
 * exit callback does) and pops the caps' nesting level.
 */
static void
utility_next(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
			 ProcessUtilityContext context, ParamListInfo params,
			 QueryEnvironment *queryEnv, DestReceiver *dest,
			 QueryCompletion *qc, bool top, bool session_capped, bool hold)
{
	bulkhead_nesting++;
	PG_TRY();
	{
		if (prev_ProcessUtility)
			prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		bulkhead_nesting--;
		bulkhead_memory_utility_end(pstmt->utilityStmt);
		if (top)
			bulkhead_statement_undefer();
		if (session_capped)
			bulkhead_caps_leave_session(true);
		if (hold)
			bulkhead_gate_hold_for_utility(false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	bulkhead_nesting--;
}

/* The gate, the hold over internal commits and the caps of one utility */
static void
hooks_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		discard_all = IsA(stmt, DiscardStmt) &&
		((DiscardStmt *) stmt)->target == DISCARD_ALL;
	bool		top = bulkhead_nesting == 0;
	bool		hold;
	UtilityCaps caps;
	bool		session_capped = false;
	BulkheadCapsFrame frame = {0, 0};
	const BulkheadCaps *in_force;

	bulkhead_caps_restore_pending();
	bulkhead_local_follow_moves();
	hold = gate_utility(stmt, queryString, context);
	bulkhead_statements_count_call(top);	/* 1.4 */
	/* its memory grant (1.4), held over its own commits until its end */
	in_force = bulkhead_memory_utility_start(stmt, &bulkhead_caps_in_force);
	caps = utility_caps(stmt, context, in_force);
	if (hold)
		bulkhead_gate_hold_for_utility(true);
	if (caps == CAPS_SESSION)
		session_capped = bulkhead_caps_enter_session(in_force);
	else if (caps == CAPS_LEVEL)
		frame = bulkhead_caps_enter(in_force);
	utility_next(pstmt, queryString, readOnlyTree, context, params, queryEnv,
				 dest, qc, top, session_capped, hold);
	bulkhead_memory_utility_end(stmt);
	if (top)
		bulkhead_statement_undefer();
	bulkhead_caps_leave(frame);
	if (session_capped)
		bulkhead_caps_leave_session(false);
	if (hold)
		bulkhead_gate_hold_for_utility(false);

	/*
	 * Reached only when DISCARD ALL succeeded, which it cannot do inside a
	 * transaction block: only session permits can be held here.
	 */
	if (discard_all)
		bulkhead_discard_session_permits();
}

/* What was matched in a transaction that ended is no one's */
static void
hooks_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		bulkhead_statement_forget();
}

/* From _PG_init */
void
bulkhead_hooks_init(void)
{
	prev_planner = planner_hook;
	planner_hook = hooks_planner;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = hooks_ExecutorStart;
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = hooks_ExecutorRun;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = hooks_ExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = hooks_ExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = hooks_ProcessUtility;
	RegisterXactCallback(hooks_xact_callback, NULL);
	bulkhead_gate_init();
	bulkhead_caps_init();
	bulkhead_memory_init();
}
