/*-------------------------------------------------------------------------
 *
 * statements.h
 *	  bulkhead_statements (1.4): what admission did, per (queryid,
 *	  workload, and from 1.5 the role and database that ran it), in a
 *	  fixed-size shared table (statements.c).
 *
 * Shared state and its locks
 * --------------------------
 * BulkheadStatements and its hash table (shmem "bulkhead statements", a
 * table of bulkhead.max_statements entries made by ShmemInitHash) are
 * statements.c's alone:
 *
 * - lock (an LWLock of its own, tranche "bulkhead statements"): held
 *   shared to look an entry up and to read or count in it; exclusive to
 *   create entries, to evict the least used ones when the table is full,
 *   and to reset.  victims[] (scratch for an eviction) is used under it
 *   held exclusively.
 * - Each entry's counters and usage are protected by its own spinlock
 *   (mutex), taken under lock held shared; under lock held exclusively no
 *   one else counts, and none is taken.
 * - max and the pointers are set when the shared memory is made.
 *
 * Nothing is allocated or thrown while lock is held: a full table evicts
 * into victims[], made with the table, and entries are created with
 * HASH_ENTER_NULL.  So counting is safe in an abort callback (a wait
 * cancelled) and at exit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_STATEMENTS_H
#define BULKHEAD_STATEMENTS_H

#include "shmem/base.h"

/*
 * An entry's key: zero-padded (it is hashed and compared as bytes, padding
 * included), the workload's name hash a function of the name.
 */
typedef struct BulkheadStatementKey
{
	int64		queryid;
	Oid			userid;			/* 1.5: the role that ran the statement */
	Oid			dbid;			/* 1.5: in this database */
	uint32		name_hash;		/* of workload */
	char		workload[NAMEDATALEN];
} BulkheadStatementKey;

/* An entry's figures (what one event adds, or an entry's sums) */
typedef struct BulkheadStatementCounts
{
	int64		calls;
	int64		waits;
	int64		wait_time_total_us;
	int64		wait_time_max_us;
	int64		rejected;
	int64		timed_out;
	int64		moved_in;
	int64		max_memory_requested;
	int64		shrunk;
} BulkheadStatementCounts;

/* An entry as the view reads it */
typedef struct BulkheadStatementCopy
{
	BulkheadStatementKey key;
	BulkheadStatementCounts counts;
} BulkheadStatementCopy;

/*---- GUC variables (statements.c) ----*/
extern bool bulkhead_track_statements;	/* bulkhead.track_statements */
extern int	bulkhead_max_statements;	/* bulkhead.max_statements */

extern void bulkhead_statements_init(void);
extern void bulkhead_statements_shmem_request(void);
extern void bulkhead_statements_shmem_startup(void);

/*
 * A client's top-level statement starts (hooks.c: after the gate, at its
 * executor start or its ProcessUtility): one call in each workload whose
 * permit this backend holds.  top says whether it is top-level; the one
 * test when tracking is off.
 */
extern void bulkhead_statements_count_call_slow(void);

static inline void
bulkhead_statements_count_call(bool top)
{
	if (unlikely(bulkhead_track_statements) && top)
		bulkhead_statements_count_call_slow();
}

/*
 * A wait for a permit of workload ended after wait_us (timed_out: with
 * 53B02); moved_in: granted to a statement that moved its permit there
 * (1.3, lanes).  No lock may be held by the caller.
 */
extern void bulkhead_statements_note_wait(const char *workload, int64 wait_us,
										  bool timed_out, bool moved_in);
/*
 * Admission answered at once: rejected (53B01), timed out (53B02: no wait
 * was allowed), or (moved_in) a statement's move granted at once.
 */
extern void bulkhead_statements_note_admit(const char *workload, bool rejected,
										   bool timed_out, bool moved_in);

/*
 * Memory grants (1.4), for memory.c to call once a statement's grant is
 * decided (after bulkhead_grants_acquire, no lock held): slotno is the
 * workload the statement is charged to (-1: none, nothing counted), in
 * which this backend holds a permit; requested the bytes it requested;
 * shrunk whether it runs with less.
 */
extern void bulkhead_statements_note_memory(int slotno, int64 requested,
											bool shrunk);

/*
 * The view's read (statementsview.c), a batch at a time: into out (room
 * for 2 * batch copies, allocated by the caller), the entries whose keys
 * come after *after (NULL: from the first) in the keys' order, the batch
 * first of them, in that order; returns how many (fewer than batch: the
 * last batch).  Takes lock shared, each entry's spinlock; never throws.
 */
extern int	bulkhead_statements_copy(BulkheadStatementCopy *out, int batch,
									 const BulkheadStatementKey *after);

#endif							/* BULKHEAD_STATEMENTS_H */
