/*-------------------------------------------------------------------------
 *
 * waitlog.h
 *	  The wait log (1.4): a LOG line for each permit or memory wait longer
 *	  than bulkhead.log_min_wait, and for each 53B01 / 53B02 with
 *	  bulkhead.log_rejections, rate-limited server-wide (waitlog.c).
 *
 * Shared state
 * ------------
 * BulkheadWaitLog (one per cluster, shmem "bulkhead wait log") is
 * waitlog.c's alone, and takes no lock: its two fields are atomics.
 * - tat: the rate limit, a token bucket kept as the time at which it
 *   would be full again (microseconds, as TimestampTz), moved forward by
 *   compare-and-swap by each line that is written;
 * - suppressed: lines not written for the rate limit since the worker
 *   last reported them (fetch-add; the worker takes it by exchange).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_WAITLOG_H
#define BULKHEAD_WAITLOG_H

#include "shmem/base.h"

#include "datatype/timestamp.h"

/*---- GUC variables (waitlog.c) ----*/
extern int	bulkhead_log_min_wait;	/* ms; -1: off */
extern bool bulkhead_log_rejections;
extern int	bulkhead_log_max_rate;	/* lines per second, server-wide */

/* How a wait for a permit ended */
typedef enum BulkheadWaitOutcome
{
	BULKHEAD_WAIT_GRANTED,
	BULKHEAD_WAIT_TIMED_OUT,	/* 53B02 (or false, for a try_ function) */
	BULKHEAD_WAIT_CANCELLED,	/* a cancel, statement_timeout, terminate */
	BULKHEAD_WAIT_DEADLOCK		/* 40P01 */
} BulkheadWaitOutcome;

extern void bulkhead_waitlog_init(void);
extern void bulkhead_waitlog_shmem_request(void);
extern void bulkhead_waitlog_shmem_startup(void);

/*
 * A wait for a permit of workload ended after wait_us; raised: the caller
 * is about to raise the outcome's error (not a try_ function's false).
 * No lock may be held by the caller.
 */
extern void bulkhead_waitlog_permit(const char *workload,
									BulkheadWaitOutcome outcome,
									int64 wait_us, bool raised);
/* Admission rejected a caller at once: 53B01 (full), or 53B02 (no wait allowed) */
extern void bulkhead_waitlog_rejected(const char *workload, bool full);

/*
 * Memory grants (1.4), for grants.c or memory.c to call once a statement
 * that waited for its memory grant has it (no lock held): slotno is the
 * workload it is charged to (-1: none, the server's limit only), in which
 * this backend holds a permit; wait_us how long it waited; shrunk whether
 * it runs with less than it requested (its memory_timeout passed).
 */
extern void bulkhead_waitlog_memory(int slotno, int64 wait_us, bool shrunk);

/*
 * Priorities (1.5): a wait (for a permit of workload slotno, or for a
 * memory grant charged to it; -1: none) was served ahead of its queue
 * because this backend holds a lock another backend waits for; borrowed:
 * over the limit (a borrowed permit, or memory at its floors).  wait_us:
 * how long it had waited.  Written whenever the wait log is on
 * (bulkhead.log_min_wait >= 0), whatever the wait's length: a boost is
 * rare and always worth a line.  No lock may be held by the caller.
 */
extern void bulkhead_waitlog_boost(int slotno, bool memory, bool borrowed,
								   int64 wait_us);

/* The worker, at each turn: a line for what the rate limit suppressed */
extern void bulkhead_waitlog_tick(TimestampTz now);

#endif							/* BULKHEAD_WAITLOG_H */
