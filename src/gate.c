/*-------------------------------------------------------------------------
 *
 * gate.c
 *	  Transparent admission: with bulkhead.workload set (by a superuser:
 *	  ALTER ROLE / ALTER DATABASE ... SET, or postgresql.conf), every
 *	  top-level transaction of a client backend takes a permit of that
 *	  workload (scope 'auto') before its first statement that does work, and
 *	  returns it when the transaction ends.
 *
 * The gate sits in ExecutorStart (plannable statements) and ProcessUtility
 * (utility statements).  The first statement of a transaction to reach
 * either hook is always a top-level one: statements run by functions and
 * procedures come later, inside it.  Once the transaction holds a permit of
 * the workload, of any scope, nothing more is done until it ends; so a
 * procedure that commits gets a new permit for each new transaction.
 *
 * An early gate comes first for most statements: when the planner starts
 * on a client's top-level statement (a simple query, or the Bind message
 * of the extended protocol when it plans: an unnamed statement, or a
 * custom plan).  There, in READ COMMITTED, the only snapshot the
 * transaction holds is the one taken for analysis and planning (and a
 * Bind's parameters, already converted), and nothing uses it after
 * planning: the portal takes its own for execution.  So a caller that
 * must queue gives it up for the wait (permit.c) and a fresh one is pushed
 * for the planner.  A queue of callers then holds back no xmin horizon,
 * which would keep VACUUM and HOT pruning from removing the dead rows of
 * every other workload for as long as the longest wait, and the statement
 * sees the data as of when its permit came, not as of when it queued.  In
 * REPEATABLE READ and SERIALIZABLE the first snapshot is the
 * transaction's, and it is kept.  A statement that is not planned on its
 * way to ExecutorStart (a cached generic plan, EXECUTE of a prepared
 * statement) waits holding its snapshot, as before; so does a utility.  A
 * Parse message alone plans nothing and takes no permit.
 *
 * Not gated: transaction control, SET/SHOW/RESET, DISCARD, LISTEN/UNLISTEN,
 * PREPARE/DEALLOCATE, CLOSE; aborted transactions (only ROLLBACK can run);
 * processes other than client backends (autovacuum, background and
 * parallel workers, walsenders); superusers while
 * bulkhead.exempt_superuser is on.  Sessions that a rule sends to a workload
 * are gated exactly as those sent by bulkhead.workload.
 *
 * Owns no shared state: it classifies the session (rules.c), publishes the
 * classification, and takes the permit through permit.c.  Its state is
 * this backend's (whether the transaction passed the gate), reset by its
 * own transaction callback.  Called by bulkhead.c (init) only.
 *
 *-------------------------------------------------------------------------
 */
#include "gate.h"
#include "follow.h"
#include "functions.h"
#include "local.h"
#include "permit.h"
#include "rules.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "replication/walsender.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

/* This transaction already holds its gate permit (reset at its end) */
static bool gate_passed = false;

/*
 * A top-level utility statement that may commit internally is running with
 * the gate permit (CREATE INDEX CONCURRENTLY, VACUUM, ...): its commits end
 * neither the permit nor the gate's pass; the permit goes at the first
 * transaction end after the statement, or at its abort.
 */
static bool holding_for_utility = false;

static planner_hook_type prev_planner = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* Utility statements that run without a permit */
static bool
utility_needs_no_permit(Node *stmt)
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

/*
 * Take the permit of the workload a rule chose.  The worker defines a new
 * workload before it replaces the rules and undefines an old one after
 * (loader.c), but this session may have classified itself just before the
 * rules changed: if the workload is unknown by now, classify again and, if
 * the rules now send the session elsewhere, try that workload once.  The
 * error caught is raised by the lookup, with no lock held and nothing
 * changed yet, so it is simply discarded.
 */
static void
acquire_for_rule(BulkheadClassification *class, bool *snapshot_given_up)
{
	MemoryContext cxt = CurrentMemoryContext;
	char		workload[NAMEDATALEN];
	ErrorData  *volatile edata = NULL;

	strlcpy(workload, class->workload, NAMEDATALEN);
	PG_TRY();
	{
		(void) bulkhead_acquire_permit(workload, bulkhead_session_key(), 0, true,
									   BULKHEAD_SCOPE_AUTO, false,
									   snapshot_given_up);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		if (geterrcode() != ERRCODE_UNDEFINED_OBJECT)
			PG_RE_THROW();
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();

	if (edata == NULL)
		return;					/* acquired */
	bulkhead_classify_session(class);
	bulkhead_publish_classification(class);
	if (class->workload != NULL && strcmp(class->workload, workload) == 0)
		ReThrowError(edata);	/* the rules did not move: the error stands */
	FreeErrorData(edata);
	/* no longer classified (the rule went with its workload): not gated */
	if (class->workload != NULL &&
		bulkhead_local_index_by_name(class->workload) < 0)
		(void) bulkhead_acquire_permit(class->workload, bulkhead_session_key(), 0,
									   true,
									   BULKHEAD_SCOPE_AUTO, false,
									   snapshot_given_up);
}

/*
 * Take the gate permit for this transaction, unless there is nothing to do.
 * Returns true when the transaction holds a gate permit (taken now or
 * before).  snapshot_given_up: see bulkhead_acquire_permit (NULL but from
 * the early gate).
 */
static bool
gate_transaction(bool *snapshot_given_up)
{
	BulkheadClassification class;

	if (gate_passed)
		return bulkhead_nheld > 0;
	if (MyBackendType != B_BACKEND || am_walsender || IsParallelWorker() ||
		IsAbortedTransactionBlockState() || bulkhead_shared == NULL)
		return false;

	/* bulkhead.workload, else the rules; the superuser exemption (rules.c) */
	bulkhead_classify_session(&class);
	bulkhead_publish_classification(&class);
	if (class.workload == NULL)
		return false;

	if (bulkhead_local_index_by_name(class.workload) < 0)
	{
		int			statement_timeout = StatementTimeout;

		if (class.source == BULKHEAD_CLASS_RULE)
			acquire_for_rule(&class, snapshot_given_up);
		else
			(void) bulkhead_acquire_permit(class.workload, bulkhead_session_key(), 0,
										   true,
										   BULKHEAD_SCOPE_AUTO, false,
										   snapshot_given_up);

		/*
		 * The permit is for the statement starting now: if its guard lowered
		 * statement_timeout, arm it for this statement from here (the wait
		 * in the queue does not count against it).
		 */
		if (StatementTimeout > 0 && StatementTimeout != statement_timeout)
			enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);
	}
	gate_passed = true;
	return true;
}

/*
 * At the end of every transaction the next one must pass the gate again,
 * but for a commit inside a utility statement that holds the gate permit
 * across its own commits (local.c keeps the permit then).
 */
static void
gate_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (!holding_for_utility)
				gate_passed = false;
			break;
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			gate_passed = false;
			break;
		default:
			break;
	}
}

/*
 * Does this utility statement hold the gate permit for its whole run?  A
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
holds_for_whole_utility(Node *stmt, ProcessUtilityContext context)
{
	return context == PROCESS_UTILITY_TOPLEVEL && !holding_for_utility &&
		!IsTransactionBlock() && !IsA(stmt, CallStmt) && !IsA(stmt, DoStmt);
}

/*
 * The early gate (see the header comment).  A client's top-level statement
 * is planned outside any portal (ActivePortal is set while one runs: a
 * function's queries, EXPLAIN, DECLARE, EXECUTE) and over the very string
 * the client sent (debug_query_string).  A planning nested in this one (a
 * function evaluated by the planner) comes after the gate has passed.
 */
#if PG_VERSION_NUM >= 190000
static PlannedStmt *
gate_planner(Query *parse, const char *query_string, int cursorOptions,
			 ParamListInfo boundParams, ExplainState *es)
#else
static PlannedStmt *
gate_planner(Query *parse, const char *query_string, int cursorOptions,
			 ParamListInfo boundParams)
#endif
{
	if (!gate_passed && ActivePortal == NULL && query_string != NULL &&
		query_string == debug_query_string)
	{
		bool		given_up = false;

		gate_transaction(IsolationUsesXactSnapshot() ? NULL : &given_up);
		if (given_up)
			PushActiveSnapshot(GetTransactionSnapshot());
	}
#if PG_VERSION_NUM >= 190000	/* 19 passes EXPLAIN's state on */
	if (prev_planner)
		return prev_planner(parse, query_string, cursorOptions, boundParams, es);
	return standard_planner(parse, query_string, cursorOptions, boundParams, es);
#else
	if (prev_planner)
		return prev_planner(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
#endif
}

static void
gate_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	bulkhead_local_follow_moves();
	gate_transaction(NULL);
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
next_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

static void
gate_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	bool		discard_all = IsA(pstmt->utilityStmt, DiscardStmt) &&
		((DiscardStmt *) pstmt->utilityStmt)->target == DISCARD_ALL;

	bool		hold = false;

	bulkhead_local_follow_moves();
	if (!utility_needs_no_permit(pstmt->utilityStmt))
		hold = gate_transaction(NULL) &&
			holds_for_whole_utility(pstmt->utilityStmt, context);

	if (hold)
	{
		/*
		 * On an error the flag goes first, then the abort returns the
		 * permit (local.c); at a FATAL the exit callback does.
		 */
		holding_for_utility = true;
		bulkhead_keep_auto_over_commits(true);
		PG_TRY();
		{
			next_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
		}
		PG_CATCH();
		{
			holding_for_utility = false;
			bulkhead_keep_auto_over_commits(false);
			PG_RE_THROW();
		}
		PG_END_TRY();
		holding_for_utility = false;
		bulkhead_keep_auto_over_commits(false);
	}
	else
		next_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);

	/*
	 * Reached only when DISCARD ALL succeeded, which it cannot do inside a
	 * transaction block: only session permits can be held here.
	 */
	if (discard_all)
		bulkhead_discard_session_permits();
}

/* From _PG_init */
void
bulkhead_gate_init(void)
{
	prev_planner = planner_hook;
	planner_hook = gate_planner;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = gate_ExecutorStart;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = gate_ProcessUtility;
	RegisterXactCallback(gate_xact_callback, NULL);
}
