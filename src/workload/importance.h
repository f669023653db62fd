/*-------------------------------------------------------------------------
 *
 * importance.h
 *	  Importance within a queue (1.5): the setting bulkhead.importance,
 *	  the aging of a waiter's importance, and the rank a queue is served
 *	  by (importance.c).
 *
 * A queue (a workload's, a key's, the memory waiters') serves its waiters
 * by rank, then in its own order (arrival, or max_bypass's): a lock holder
 * served first (BULKHEAD_RANK_BOOSTED) above any importance; then the
 * importance the wait carries, raised one step per bulkhead.aging_interval
 * of waiting, up to high, so that a low waiter is never passed forever.
 * Budgets' weights and keys' turns are decided first, between workloads
 * and keys: importance orders waiters within the share they compete for.
 *
 * The importance a wait carries is the statement's rule's when its rule
 * sets one (bulkhead_importance_set_rule, rules.c), else the setting's.
 * bulkhead.importance is set by a superuser (postgresql.conf, ALTER ROLE
 * or DATABASE ... SET); a plain role may lower its own with SET, never
 * raise it (importance.c's check hook says how).
 *
 * Owns no shared state (the entries' priorities are slot.c's, the memory
 * waiters' grants.c's).  Calls no module.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_IMPORTANCE_H
#define BULKHEAD_IMPORTANCE_H

#include "shmem/shmem.h"

#include "datatype/timestamp.h"
#include "nodes/nodes.h"

/* The rank of a lock holder served ahead of its queue: above high */
#define BULKHEAD_RANK_BOOSTED	(BULKHEAD_IMPORTANCE_HIGH + 1)

/* A rule that sets no importance */
#define BULKHEAD_IMPORTANCE_UNSET	(-1)

/* The settings (PGC_USERSET with a check; PGC_SIGHUP) */
extern int	bulkhead_importance;
extern int	bulkhead_aging_interval_ms;
extern bool bulkhead_boost_lock_holders;	/* PGC_SIGHUP; off: 1.4's
											 * order, for comparison */

/* From _PG_init: define the settings */
extern void bulkhead_importance_init(void);

/*
 * The importance this backend's next wait carries: the rule's of its
 * statement if set, else bulkhead.importance.
 */
extern int	bulkhead_importance_current(void);

/*
 * The importance the rule that classified the statement under way sets
 * (BULKHEAD_IMPORTANCE_UNSET: none; the setting's then).
 */
extern void bulkhead_importance_set_rule(int importance);

/*
 * The ProcessUtility hook's check of ALTER ROLE / DATABASE ... SET and
 * RESET (see importance.c's header): 42501 when a plain role would store
 * an importance above low, or remove one.  Other statements pass.
 */
extern void bulkhead_importance_check_alter(Node *stmt);

/* "low", "normal", "high" (NULL for a value out of range) */
extern const char *bulkhead_importance_name(int importance);

/* A name's importance, or BULKHEAD_IMPORTANCE_UNSET when it is none */
extern int	bulkhead_importance_parse(const char *name);

/*
 * The rank of a waiter that carries importance (and boost) and has waited
 * since queued_at: higher is served first.  Aging raises it one step per
 * bulkhead.aging_interval, up to high; a boosted lock holder is above all.
 */
static inline int
bulkhead_importance_rank(int importance, int boost, TimestampTz queued_at,
						 TimestampTz now)
{
	int64		interval_us;
	int64		steps;

	if (boost != BULKHEAD_BOOST_NONE)
		return BULKHEAD_RANK_BOOSTED;
	if (importance >= BULKHEAD_IMPORTANCE_HIGH)
		return BULKHEAD_IMPORTANCE_HIGH;
	interval_us = (int64) bulkhead_aging_interval_ms * 1000;
	steps = (now > queued_at && interval_us > 0) ?
		(now - queued_at) / interval_us : 0;
	if (steps >= BULKHEAD_IMPORTANCE_HIGH - importance)
		return BULKHEAD_IMPORTANCE_HIGH;
	return importance + (int) steps;
}

#endif							/* BULKHEAD_IMPORTANCE_H */
