/*-------------------------------------------------------------------------
 *
 * lanes.h
 *	  Statement rules (1.3): the lane a statement takes by its kind and its
 *	  planned cost (lanes.c).
 *
 * Owns no shared state: it reads this session's copy of the statement
 * rules (rules.c).  Called by transparent.c (each top-level statement), by the
 * SQL function bulkhead_classify(query) and by explainopt.c (EXPLAIN's lane).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_LANES_H
#define BULKHEAD_LANES_H

#include "config/rules.h"

#include "nodes/nodes.h"
#include "nodes/plannodes.h"

/* What a top-level utility statement is to the statement rules */
typedef enum BulkheadLaneUtility
{
	BULKHEAD_LANE_UTILITY,		/* matched as a utility (command only) */
	BULKHEAD_LANE_DEFER,		/* EXECUTE, EXPLAIN ANALYZE: the statement it
								 * runs is matched when its executor starts */
	BULKHEAD_LANE_NONE			/* EXPLAIN without ANALYZE: matches nothing */
} BulkheadLaneUtility;

/* The kind bit of a plannable statement (BULKHEAD_CMD_*), 0 if none */
extern uint8 bulkhead_statement_kind(CmdType command);
/* Utility statements that run without a permit (and match nothing) */
extern bool bulkhead_utility_needs_no_permit(Node *stmt);
extern BulkheadLaneUtility bulkhead_lane_utility(Node *stmt);

/*
 * Has this session statement rules to match its statements with?  (one
 * atomic read when the rule set has none)
 */
static inline bool
bulkhead_lanes_apply(void)
{
	int			n;

	(void) bulkhead_statement_rules(&n);
	return n > 0;
}

/*
 * The workload the first statement rule matching a statement of kind and
 * cost (has_cost false: a utility, which only command matches) names, and
 * that rule's position; NULL when none matches.  The name points at this
 * session's copy of the rules, valid until the next statement.
 */
extern const char *bulkhead_lane_of(uint8 kind, bool has_cost, double cost,
									int32 *position);
extern bool bulkhead_lane_by_cost(uint8 kind, double cost);

/*
 * Before a top-level statement's lane is known: may a statement rule of
 * this session send it to a lane that caps the planner's settings (then
 * its query is worth a copy), and the caps to plan it under (the caps in
 * force, and for the transaction's first statement, those of the session's
 * workload).
 */
extern bool bulkhead_planning_lane_reachable(void);
extern BulkheadCaps bulkhead_planning_caps(const BulkheadCaps *in_force,
										   bool first);

#endif							/* BULKHEAD_LANES_H */
