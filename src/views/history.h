/*-------------------------------------------------------------------------
 *
 * history.h
 *	  bulkhead_history (1.4): a row per workload per interval of what
 *	  admission did, kept in a ring in shared memory (history.c).
 *
 * Shared state and its lock
 * -------------------------
 * BulkheadHistory (one per cluster, shmem "bulkhead history") is
 * history.c's alone:
 *
 * - lock (an LWLock of its own, tranche "bulkhead history") protects the
 *   ring: intervals[], rows[], next, count and written.  Only the
 *   background worker writes them (exclusive, once per interval, with the
 *   rows made before it takes the lock); bulkhead_history() copies them
 *   out under the lock held shared, a bounded batch of rows at a time
 *   (written tells it where the interval it was reading lies when it takes
 *   the lock again).  Nothing is thrown while it is held.
 * - prev[] (one per workload slot: the figures of the last sample) and
 *   last_sample are the worker's alone, read and written by it without a
 *   lock; they stay in shared memory so that a restarted worker goes on
 *   from them.
 * - length, nslots, started_at, and the array pointers are set when the
 *   shared memory is made, and read without a lock.
 * - At the postmaster's start (restore) and clean shutdown (save) nothing
 *   else runs, and no lock is taken.
 *
 * The acquire and release paths never touch any of it: the worker reads
 * each slot's statistics (under the slot's lock, as bulkhead_stats does)
 * and the memory grants' peaks, and writes the ring.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_HISTORY_H
#define BULKHEAD_HISTORY_H

#include "shmem/base.h"

#include "datatype/timestamp.h"

/*---- GUC variables (history.c) ----*/
extern int	bulkhead_history_interval;	/* seconds */
extern int	bulkhead_history_length;	/* intervals kept */

/* The settings, from _PG_init */
extern void bulkhead_history_init(void);

/* Shared memory; startup returns whether it was made (not found) */
extern void bulkhead_history_shmem_request(void);
extern bool bulkhead_history_shmem_startup(void);

/* Across a clean restart (postmaster only, nothing else running) */
extern void bulkhead_history_restore(void);
extern void bulkhead_history_save(int code, Datum arg);

/*
 * The worker, at each turn: samples when an interval's end is due, and
 * returns how many milliseconds the next end is away (its wait's bound).
 */
extern long bulkhead_history_tick(TimestampTz now);

#endif							/* BULKHEAD_HISTORY_H */
