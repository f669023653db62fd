/*-------------------------------------------------------------------------
 *
 * grantqueue.h
 *	  Memory grants (1.5): the waiters' queue and the order it is served in
 *	  (grantqueue.c): by rank (a queued lock holder first, then importance,
 *	  raised by aging), then arrival.  The half of grants.c that serves;
 *	  the locks are grants.h's: every function here but
 *	  bulkhead_grants_queue_ready, bulkhead_grants_queue_init and
 *	  bulkhead_grants_small is called with the grants' lock held
 *	  (exclusive), and none of those throws.  Small requests (1.5,
 *	  bulkhead.small_memory_request) are served while they fit, even when
 *	  a larger one waits.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_GRANTQUEUE_H
#define BULKHEAD_GRANTQUEUE_H

#include "memory/grantlevel.h"

/* The waiters served under the lock, woken after it (their latches) */
#define MEM_WAKE_BATCH		16

typedef struct MemWakeups
{
	int			n;
	int			procnos[MEM_WAKE_BATCH];
} MemWakeups;

/*---- GUC variables ----*/
extern int	bulkhead_small_memory_request_kb;	/* bulkhead.small_memory_request;
												 * 0: off */

/* Define bulkhead.small_memory_request (from _PG_init) */
extern void bulkhead_grants_queue_init(void);

/*
 * Is a request of requested bytes small (under
 * bulkhead.small_memory_request): served while it fits, even when a larger
 * one waits?  Read by the requesting backend, any lock or none.
 */
static inline bool
bulkhead_grants_small(int64 requested)
{
	return bulkhead_small_memory_request_kb > 0 &&
		requested < (int64) bulkhead_small_memory_request_kb * 1024;
}

/*
 * This backend's scratch for the queue's order, allocated once: called
 * before the lock is taken (it may throw), by whatever serves or joins the
 * queue next (an acquire; the worker's end of a load).
 */
extern void bulkhead_grants_queue_ready(void);

/*
 * Link backend procno (its wait, want_requested, importance, queued_at
 * set) at the tail; whether its request is small is decided here
 */
extern void bulkhead_grants_queue_push(int procno);
/* Unlink a waiter (served, timed out, cancelled) */
extern void bulkhead_grants_queue_remove(int procno);
/* A waiter's boost (BULKHEAD_BOOST_NONE or _AHEAD) changes */
extern void bulkhead_grants_queue_boost(int procno, int boost);

/*
 * Would a new request of g's path for bytes (cut; requested as asked),
 * carrying importance, have to wait behind the waiters ranked at least as
 * high (shadow_too: were its levels in shadow mode enforced)?  A small one
 * (bulkhead_grants_small) waits only if it does not fit.
 */
extern bool bulkhead_grants_queue_blocks(const BulkheadGrant *g, int64 bytes,
										 int64 requested, bool shadow_too,
										 int importance);

/* Serve the waiters that may go now, in order; their wakeups into w */
extern void bulkhead_grants_serve(MemWakeups *w);

/* After the lock: wake those served.  Never throws. */
extern void bulkhead_grants_wake_all(MemWakeups *w);

#endif							/* BULKHEAD_GRANTQUEUE_H */
