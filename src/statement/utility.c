/*-------------------------------------------------------------------------
 *
 * utility.c
 *	  Where a utility statement passes (ProcessUtility): the gate (transparent.c),
 *	  the hold of the permit over the statement's own commits, its caps
 *	  (caps.c) and its memory grant (memory.c, 1.4).
 *
 * A top-level utility meets the statement rules (as a utility; EXECUTE
 * and EXPLAIN ANALYZE when the statement they run starts: toplevel.c),
 * else the session's workload.  The client's top-level utility (nesting
 * level 0, PROCESS_UTILITY_TOPLEVEL: not one a function runs at an
 * implicit commit) closes the caps' statement frame first: it sees, and
 * changes, the session's own values.
 *
 * Owns no state of its own but the hook's previous value.  Called by
 * hooks.c (init); calls transparent.c, lanes.c, caps.c, memory.c, toplevel.c,
 * local.c, movedpermit.c and statements.c (a statement's call, 1.4).
 *
 *-------------------------------------------------------------------------
 */
#include "statement/utility.h"
#include "workload/importance.h"
#include "guards/caps.h"
#include "permit/movedpermit.h"
#include "statement/transparent.h"
#include "statement/lanes.h"
#include "permit/local.h"
#include "memory/memory.h"
#include "memory/nodelimit.h"
#include "statement/toplevel.h"
#include "record/statements.h"

#include "access/xact.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

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
		bulkhead_lanes_here())
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
utility_hook(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		discard_all = IsA(stmt, DiscardStmt) &&
		((DiscardStmt *) stmt)->target == DISCARD_ALL;
	bool		top = context == PROCESS_UTILITY_TOPLEVEL && bulkhead_nesting == 0;
	bool		hold;
	UtilityCaps caps;
	bool		session_capped = false;
	BulkheadCapsFrame frame = {0, 0};
	const BulkheadCaps *pins;
	const BulkheadCaps *in_force = &bulkhead_caps_in_force;
	BulkheadCaps with_pins;

	/*
	 * The client's top-level utility sees, and changes, the session's own
	 * values.  (Not one a function runs at nesting level 0, a deferred
	 * trigger's at an implicit commit: it is not PROCESS_UTILITY_TOPLEVEL.)
	 */
	if (top)
		bulkhead_caps_statement_close();
	bulkhead_caps_restore_pending();
	bulkhead_nodelimit_restore();	/* (1.5) after an abort in a memory node */
	bulkhead_local_follow_moves();
	bulkhead_importance_check_alter(stmt);	/* 1.5 */
	hold = gate_utility(stmt, queryString, context);
	bulkhead_statements_count_call(top);	/* 1.4 */
	/* its memory grant (1.4), held over its own commits until its end */
	pins = bulkhead_memory_utility_start(stmt, context);
	if (pins != NULL)
	{
		with_pins = bulkhead_caps_in_force;
		bulkhead_caps_combine(&with_pins, pins);
		in_force = &with_pins;
	}
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

void
bulkhead_utility_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = utility_hook;
}
