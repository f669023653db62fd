/*-------------------------------------------------------------------------
 *
 * toplevel.h
 *	  Which executor start is the client's statement (toplevel.c): the
 *	  nesting level of the planner, executor and utility calls under way,
 *	  the statement its planning matched already, and the one EXECUTE or
 *	  EXPLAIN ANALYZE stands for.
 *
 * Backend-local state only.  Called by hooks.c and utility.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_TOPLEVEL_H
#define BULKHEAD_TOPLEVEL_H

#include "shmem/base.h"
#include "statement/transparent.h"
#include "statement/lanes.h"

#include "executor/execdesc.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"

/*
 * Has this statement statement rules to meet?  Only a client backend's
 * (not a parallel worker's, a walsender's, a background worker's), and
 * then one atomic read when the rule set has none.
 */
static inline bool
bulkhead_lanes_here(void)
{
	return bulkhead_gate_applies() && bulkhead_lanes_apply();
}

/* Planner, executor and ProcessUtility calls under way (hooks.c counts) */
extern int	bulkhead_nesting;

/* Is this the planning of a client's top-level statement? */
extern bool bulkhead_planning_is_top(const char *query_string);

/*
 * While a client's statement is planned before its permit is taken, the
 * queries the planner runs (a function it evaluates) take no permit.
 */
extern bool bulkhead_planning_unmatched;

/* The top-level statement whose planning matched it */
extern void bulkhead_statement_matched(const char *query_string,
									   const PlannedStmt *plan);

/*
 * Is this executor start the client's statement, not yet matched?  (a
 * cached plan's, or the one EXECUTE or EXPLAIN ANALYZE runs)
 */
extern bool bulkhead_statement_to_match(const QueryDesc *queryDesc, int eflags);

/* EXECUTE / EXPLAIN ANALYZE at top level: the statement it runs is matched */
extern void bulkhead_statement_defer(Node *stmt, const char *query_string);
extern void bulkhead_statement_undefer(void);

/* Does this planning build a generic plan of a statement with parameters? */
extern bool bulkhead_generic_planning(Query *parse, const char *query_string,
									  ParamListInfo boundParams);

/* At the end of a transaction: what was matched is gone */
extern void bulkhead_statement_forget(void);

#endif							/* BULKHEAD_TOPLEVEL_H */
