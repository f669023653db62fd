/*-------------------------------------------------------------------------
 *
 * toplevel.c
 *	  Which planning and which executor start is the client's top-level
 *	  statement, for the statement rules (1.3).
 *
 * A client's statement is planned outside any portal and over the very
 * string the client sent (debug_query_string), at nesting level 0: the
 * planner, ExecutorStart, ExecutorRun, ExecutorFinish and ProcessUtility
 * calls under way (hooks.c counts them, as pg_stat_statements does), so
 * that what a statement runs inside (a function's query, a trigger's, the
 * planner's evaluation of a function, a deferred constraint's check at
 * commit, which runs outside any portal) is told apart.  Its executor
 * starts at level 0 in the client's portal (its plan is one of the
 * portal's statements): that is where a cached plan, which the planner
 * never saw, is matched.  EXECUTE and EXPLAIN ANALYZE stand for the
 * statement they run: its executor starts at level 1 over the prepared
 * statement's text (EXECUTE) or the EXPLAIN's own (EXPLAIN ANALYZE).
 *
 * A statement matched when planned is not matched again when its executor
 * starts: it is known by its text and its place in it (a Bind's plan is a
 * copy of the one planned).  The planning of a generic plan of a statement
 * with parameters is not matched (GetCachedPlan may build one only to
 * compare costs, then plan a custom one): the plan that runs is, when its
 * executor starts.
 *
 * Owns backend-local state only.  Called by hooks.c.
 *
 *-------------------------------------------------------------------------
 */
#include "statement/toplevel.h"

#include "commands/defrem.h"
#include "commands/prepare.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/portal.h"

int			bulkhead_nesting = 0;
bool		bulkhead_planning_unmatched = false;

/* The top-level statement matched when planned: its text and place in it */
static bool matched = false;
static const char *matched_text;	/* the planner's query_string */
static int	matched_location;
static int	matched_len;

/* What EXECUTE or EXPLAIN ANALYZE at top level runs: its text */
static bool deferred = false;
static char *deferred_text = NULL;	/* TopMemoryContext */

bool
bulkhead_planning_is_top(const char *query_string)
{
	return bulkhead_nesting == 0 && ActivePortal == NULL &&
		query_string != NULL && query_string == debug_query_string;
}

void
bulkhead_statement_matched(const char *query_string, const PlannedStmt *plan)
{
	matched = true;
	matched_text = query_string;
	matched_location = plan->stmt_location;
	matched_len = plan->stmt_len;
}

/* Is text (and place) the statement its planning matched? */
static bool
was_matched(const QueryDesc *queryDesc)
{
	const PlannedStmt *plan = queryDesc->plannedstmt;

	return matched && plan->stmt_location == matched_location &&
		plan->stmt_len == matched_len &&
		(queryDesc->sourceText == matched_text ||
		 (queryDesc->sourceText != NULL &&
		  strcmp(queryDesc->sourceText, matched_text) == 0));
}

bool
bulkhead_statement_to_match(const QueryDesc *queryDesc, int eflags)
{
	bool		top;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return false;
	if (bulkhead_nesting == 0)
		top = ActivePortal != NULL &&
			list_member_ptr(ActivePortal->stmts, queryDesc->plannedstmt);
	else if (deferred && bulkhead_nesting == 1 && queryDesc->sourceText != NULL)
	{
		top = strcmp(queryDesc->sourceText, deferred_text) == 0;
		if (top)
			bulkhead_statement_undefer();	/* only the first */
	}
	else
		top = false;
	if (!top)
		return false;
	if (was_matched(queryDesc))
	{
		matched = false;
		return false;
	}
	return true;
}

/* The text of prepared statement name, or NULL (EXECUTE will complain) */
static const char *
prepared_text(const char *name)
{
	PreparedStatement *entry = FetchPreparedStatement(name, false);

	return entry ? entry->plansource->query_string : NULL;
}

void
bulkhead_statement_defer(Node *stmt, const char *query_string)
{
	const char *text = NULL;

	bulkhead_statement_undefer();
	if (IsA(stmt, ExecuteStmt))
		text = prepared_text(((ExecuteStmt *) stmt)->name);
	else if (IsA(stmt, ExplainStmt))
	{
		ExplainStmt *explain = (ExplainStmt *) stmt;
		Query	   *query = (Query *) explain->query;

		/* EXPLAIN ANALYZE EXECUTE runs the prepared statement's plan */
		if (IsA(query, Query) && query->commandType == CMD_UTILITY &&
			IsA(query->utilityStmt, ExecuteStmt))
			text = prepared_text(((ExecuteStmt *) query->utilityStmt)->name);
		else
			text = query_string;
	}
	if (text == NULL)
		return;
	deferred_text = MemoryContextStrdup(TopMemoryContext, text);
	deferred = true;
}

void
bulkhead_statement_undefer(void)
{
	deferred = false;
	if (deferred_text != NULL)
	{
		pfree(deferred_text);
		deferred_text = NULL;
	}
}

void
bulkhead_statement_forget(void)
{
	matched = false;
	bulkhead_statement_undefer();
}

static bool
extern_param_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return ((Param *) node)->paramkind == PARAM_EXTERN;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, extern_param_walker, context, 0);
	return expression_tree_walker(node, extern_param_walker, context);
}

bool
bulkhead_generic_planning(Query *parse, const char *query_string,
						  ParamListInfo boundParams)
{
	/* ($n is in the text of any statement with parameters) */
	return boundParams == NULL && strchr(query_string, '$') != NULL &&
		query_tree_walker(parse, extern_param_walker, NULL, 0);
}
