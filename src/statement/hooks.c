/*-------------------------------------------------------------------------
 *
 * hooks.c
 *	  Where statements pass: the planner and the executor's phases (a
 *	  utility: utility.c).  Here a statement meets the gate (transparent.c), the
 *	  caps of its lanes (caps.c) and its memory grant (memory.c);
 *	  toplevel.c tells which of these calls is the client's statement.
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
 * granted its memory (memory.c), after its lane's caps are applied and
 * before the standard start, and its end where the grant is returned.
 * Each phase runs, inside its caps, with the settings its grant was worked
 * out with (lowered when it runs shrunk, never raised by a SET since), in
 * a GUC level of the phase's own.
 *
 * Owns no state of its own but the hooks' previous values.  Called by
 * bulkhead.c (init); calls transparent.c, lanes.c, caps.c, memory.c, toplevel.c,
 * rules.c, local.c, movedpermit.c, statements.c (a statement's call, 1.4) and
 * utility.c (init).
 *
 *-------------------------------------------------------------------------
 */
#include "statement/hooks.h"
#include "guards/caps.h"
#include "permit/movedpermit.h"
#include "statement/transparent.h"
#include "statement/lanes.h"
#include "permit/local.h"
#include "acl/mayrun.h"
#include "memory/memory.h"
#include "memory/nodelimit.h"
#include "config/rules.h"
#include "statement/toplevel.h"
#include "record/statements.h"
#include "statement/utility.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
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

/*
 * The caps of a phase: a phase of the client's top-level statement runs in
 * the statement's frame (caps.c: set once for its phases), a nested one in
 * a frame of its own, which finds the values lowered already and costs a
 * test.  An error pops either level with the abort.
 */
static inline BulkheadCapsFrame
caps_for_phase(const BulkheadCaps *caps, bool top)
{
	if (!top)
		return bulkhead_caps_enter(caps);
	return bulkhead_caps_statement(caps);
}

/*
 * Inside that, the settings a statement's memory grant was worked out with
 * (memory.c), when it holds one: work_mem lowered when it runs shrunk, and
 * never raised by a SET since it started.  A level of its own per phase.
 */
static inline BulkheadCapsFrame
caps_pinned(const BulkheadCaps *pins)
{
	BulkheadCapsFrame none = {0, 0};

	if (likely(pins == NULL))
		return none;
	return bulkhead_caps_enter(pins);
}

/* An executor phase of the client's statement: at level 0, in its portal */
static inline bool
executor_top(void)
{
	return bulkhead_nesting == 0 && ActivePortal != NULL;
}

/* The same with caps in force; top: the client's statement */
static PlannedStmt *
plan_capped(const BulkheadCaps *caps, bool top, PLANNER_PARAMS)
{
	BulkheadCapsFrame frame = caps_for_phase(caps, top);
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
		result = plan_capped(caps, true, PLANNER_ARGS(parse));
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
		result = plan_capped(&bulkhead_caps_in_force, true, PLANNER_ARGS(copy));
	bulkhead_statement_matched(query_string, result);
	return result;
}

/*
 * The planner: a client's top-level statement meets the gate here.  Any
 * planning runs with the caps in force.
 */
static PlannedStmt *
planner_body(PLANNER_PARAMS)
{
	bool		top = bulkhead_planning_is_top(query_string);

	if (top)
	{
		bulkhead_caps_restore_pending();
		if (bulkhead_lanes_here())
			return plan_and_match(PLANNER_ARGS(parse));
		if (!bulkhead_gate_passed())
		{
			bool		given_up = false;

			bulkhead_gate_transaction(IsolationUsesXactSnapshot() ? NULL : &given_up);
			if (given_up)
				PushActiveSnapshot(GetTransactionSnapshot());
		}
	}
	return plan_capped(&bulkhead_caps_in_force, top, PLANNER_ARGS(parse));
}

/*
 * A statement planned inside a memory node of another (a function's query
 * in a sort's input, bulkhead_classify's) is planned with the session's
 * work_mem and hash_mem_multiplier, not the ones that node runs with (1.5)
 */
static PlannedStmt *
hooks_planner(PLANNER_PARAMS)
{
	int			level;
	PlannedStmt *result;

	bulkhead_nodelimit_restore();	/* (1.5) after an abort in a memory node */
	level = bulkhead_nodelimit_enter_session();
	result = planner_body(PLANNER_ARGS(parse));
	bulkhead_nodelimit_leave_session(level);
	return result;
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

	if (bulkhead_lanes_here() && bulkhead_statement_to_match(queryDesc, eflags))
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
	BulkheadCapsFrame pinned;

	bulkhead_caps_restore_pending();
	bulkhead_nodelimit_restore();
	bulkhead_local_follow_moves();
	gate_executor_start(queryDesc, eflags);
	bulkhead_statements_count_call(executor_top());	/* 1.4 */
	bulkhead_caps_parallel_workers(queryDesc, &bulkhead_caps_in_force);
	frame = caps_for_phase(&bulkhead_caps_in_force, executor_top());
	/* its memory grant (1.4), before the nodes that fix their limit here */
	pinned = caps_pinned(bulkhead_memory_start(queryDesc, eflags));
	start_next(queryDesc, eflags);
	bulkhead_caps_leave(pinned);
	bulkhead_memory_started(queryDesc);
	bulkhead_memory_phase_done(queryDesc);
	bulkhead_caps_leave(frame);
}

static void
hooks_ExecutorRun(RUN_PARAMS)
{
	BulkheadCapsFrame frame;
	BulkheadCapsFrame pinned;

	/* a portal resumed in a transaction that lost its permit since */
	if (bulkhead_nesting == 0 && !bulkhead_gate_passed())
		(void) bulkhead_gate_transaction(NULL);
	frame = caps_for_phase(&bulkhead_caps_in_force, executor_top());
	pinned = caps_pinned(bulkhead_memory_pins(queryDesc));
	run_next(RUN_ARGS);
	bulkhead_caps_leave(pinned);
	bulkhead_memory_phase_done(queryDesc);
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
	BulkheadCapsFrame pinned = {0, 0};

	if (queryDesc->operation != CMD_SELECT ||
		queryDesc->plannedstmt->hasModifyingCTE)
	{
		frame = caps_for_phase(&bulkhead_caps_in_force, executor_top());
		pinned = caps_pinned(bulkhead_memory_pins(queryDesc));
	}
	finish_next(queryDesc);
	bulkhead_caps_leave(pinned);
	bulkhead_memory_phase_done(queryDesc);
	bulkhead_caps_leave(frame);
}

/* The executor's end returns the statement's memory grant (1.4) */
static void
hooks_ExecutorEnd(QueryDesc *queryDesc)
{
	bulkhead_memory_ending(queryDesc);	/* what its nodes used (1.5) */
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	bulkhead_memory_end(queryDesc);
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
	bulkhead_utility_init();
	RegisterXactCallback(hooks_xact_callback, NULL);
	bulkhead_gate_init();
	bulkhead_caps_init();
	bulkhead_memory_init();
}
