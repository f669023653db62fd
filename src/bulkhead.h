/*-------------------------------------------------------------------------
 *
 * bulkhead.h
 *	  Shared declarations of the bulkhead extension: shared-memory layout,
 *	  GUC variables and the functions the source files call on each other.
 *
 * Shared state and its locks
 * --------------------------
 * BulkheadShared (one per cluster) holds a directory of workload slots and
 * a table of permit entries, BULKHEAD_PERMITS_PER_BACKEND per PGPROC.
 *
 * - The directory lock (shared->dir_lock) protects, in every slot: in_use,
 *   name, and the assignment of a slot to a name.  The worker takes it
 *   exclusively to add or remove workloads; a backend takes it shared to
 *   look a name up.  A slot's name never changes while any permit entry
 *   points at the slot (the slot stays in_use until it is drained).
 * - Each slot's own LWLock (slot->lock) protects everything else in the
 *   slot: config, defined, running, queued, the holders and waiters lists,
 *   stats, and every permit entry linked into those lists (state, since,
 *   queued_at, the link itself).  Lock order: dir_lock before a slot lock;
 *   never two slot locks at once.
 * - A permit entry's workload field is set by its owner backend, under the
 *   slot lock of the workload it names, while the entry is free; it is
 *   cleared (-1) under that same lock when the entry is unlinked.
 * - slot->current_limit, the limit every grant decision uses, is written by
 *   the worker only (worker.c at a load, adaptive.c for adaptive
 *   workloads), under the slot lock like the rest of the slot.  After a
 *   lowering, running may exceed it until holders release: nothing is
 *   preempted and nothing new is granted meanwhile.
 * - shared->config_requested and shared->prepared_change are atomic;
 *   worker_procno is written by the worker only (at start and exit) and
 *   read without a lock (an aligned int).
 * - shared->deadlock_checker is atomic: the PGPROC number + 1 of the one
 *   backend running a deadlock check, 0 when none does (deadlock.c).  It
 *   is taken by compare-and-swap, never waited for, and is not a lock: no
 *   LWLock is held while it is.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_H
#define BULKHEAD_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "port/atomics.h"
#include "storage/lwlock.h"

/* This backend's PGPROC number (PG 17 replaced pgprocno by MyProcNumber) */
#if PG_VERSION_NUM >= 170000
#define BULKHEAD_MY_PROCNO		MyProcNumber
#define BULKHEAD_PROCNO(proc)	GetNumberFromPGProc(proc)
#else
#define BULKHEAD_MY_PROCNO		(MyProc->pgprocno)
#define BULKHEAD_PROCNO(proc)	((proc)->pgprocno)
#endif

/* The library's version: the newest SQL version it serves (bulkhead.control) */
#define BULKHEAD_VERSION		"1.2"

#define BULKHEAD_NAME_MAXLEN	63	/* bytes, without the terminator */
#define BULKHEAD_MAX_ROLES		16
#define BULKHEAD_HIST_BUCKETS	256 /* see stats.c */

/* A guard that is NULL in the table (leave the session's value alone) */
#define BULKHEAD_NO_GUARD		(-1)

/*---- GUC variables (bulkhead.c) ----*/
extern char *bulkhead_database;
extern int	bulkhead_max_workloads;
extern int	bulkhead_max_permits_per_backend;
extern bool bulkhead_allow_session_permits;

/* Permit scope, as shown in bulkhead_activity.scope */
typedef enum BulkheadScope
{
	BULKHEAD_SCOPE_SESSION,
	BULKHEAD_SCOPE_XACT,
	BULKHEAD_SCOPE_AUTO
} BulkheadScope;

/* State of a permit entry in shared memory */
typedef enum BulkheadEntryState
{
	BULKHEAD_ENTRY_FREE = 0,
	BULKHEAD_ENTRY_WAITING,		/* linked in slot->waiters */
	BULKHEAD_ENTRY_GRANTED		/* linked in slot->holders */
} BulkheadEntryState;

/* A workload's configuration, as the worker read it from the table */
typedef struct BulkheadConfig
{
	int			max_running;
	int			max_queued;
	int64		queue_timeout_us;
	int			statement_timeout_ms;	/* or BULKHEAD_NO_GUARD */
	int			lock_timeout_ms;	/* or BULKHEAD_NO_GUARD */
	int			idle_timeout_ms;	/* or BULKHEAD_NO_GUARD */
	bool		shadow;
	bool		adaptive;		/* the worker sets slot->current_limit */
	int			min_running;	/* its floor (when max_running >= 1) */
	int			nroles;			/* 0 = any role may acquire */
	char		roles[BULKHEAD_MAX_ROLES][NAMEDATALEN];
} BulkheadConfig;

/* Log-scale histogram of durations in microseconds (stats.c) */
typedef struct BulkheadHistogram
{
	uint64		count[BULKHEAD_HIST_BUCKETS];
} BulkheadHistogram;

/* Cumulative figures of one workload; reset by bulkhead_stats_reset */
typedef struct BulkheadStats
{
	uint64		acquired;
	uint64		rejected_full;
	uint64		timed_out;
	uint64		cancelled;
	uint64		released;
	uint64		shadow_queued;
	uint64		shadow_rejected;
	int			peak_running;
	int			peak_queued;
	uint64		wait_time_total_us;
	uint64		wait_time_max_us;
	uint64		hold_time_total_us;
	BulkheadHistogram wait_hist;
	BulkheadHistogram hold_hist;
	TimestampTz stats_reset;
	/* new in 1.1, last so that a 1.0 statistics file reads as a prefix */
	uint64		deadlocks;		/* waits ended with 40P01 (deadlock.c) */
} BulkheadStats;

/* A list of permit entries linked by index (entry_list.h) */
#define BULKHEAD_NO_ENTRY		(-1)
typedef struct BulkheadEntryList
{
	int32		head;			/* entry index, or BULKHEAD_NO_ENTRY */
	int32		tail;
} BulkheadEntryList;

/* One workload slot */
typedef struct BulkheadSlot
{
	LWLock	   *lock;			/* this slot's lock (named tranche) */

	/* protected by shared->dir_lock (writes also hold lock) */
	bool		in_use;			/* assigned to name */
	char		name[NAMEDATALEN];

	/* protected by lock */
	bool		defined;		/* present in the table at the last load */
	bool		restored;		/* stats read back at start, table not read yet */
	BulkheadConfig config;
	int			current_limit;	/* the limit in force: config.max_running,
								 * or the worker's choice when adaptive;
								 * written by the worker only */
	int			running;		/* entries in holders */
	int			queued;			/* entries in waiters */
	BulkheadEntryList holders;	/* GRANTED entries */
	BulkheadEntryList waiters;	/* WAITING entries, FIFO */
	BulkheadStats stats;

	/*
	 * Protected by lock, written by deadlock.c only: the last deadlock check
	 * of a waiter here that found its wait able to end, which every waiter
	 * of this workload may rely on while the holders stay the same.
	 */
	uint64		dl_holders;		/* the holders stamp it saw */
	uint64		dl_holder_states;	/* what the holders waited for; 0: unsure */
	TimestampTz dl_proved_at;	/* when it began; 0: none, or withdrawn */
	int64		dl_interval_us; /* how long it may be relied on */
} BulkheadSlot;

/*
 * One permit held or awaited by one backend; see the header for locking.
 * Kept at 32 bytes (a backend has bulkhead.max_permits_per_backend of them).
 */
typedef struct BulkheadEntry
{
	int32		prev;			/* neighbours in the slot's holders or */
	int32		next;			/* waiters list (entry_list.h) */
	int32		pid;			/* owner's pid */
	int16		workload;		/* slot index, or -1 when free */
	uint8		state;			/* BulkheadEntryState */
	uint8		scope;			/* BulkheadScope */
	TimestampTz queued_at;		/* arrival (= since for an immediate grant) */
	TimestampTz since;			/* entered its current state */
} BulkheadEntry;

StaticAssertDecl(sizeof(BulkheadEntry) == 32, "a permit entry should stay at 32 bytes");

typedef struct BulkheadShared
{
	LWLock	   *dir_lock;
	int			nslots;			/* bulkhead.max_workloads */
	int			permits_per_backend;	/* bulkhead.max_permits_per_backend */
	int			nbackends;		/* PGPROCs covered by entries */
	bool		config_loaded;	/* dir_lock: worker loaded the table once */
	bool		rows_pending;	/* dir_lock (read without it): the last load
								 * found no free slot for some rows */
	pg_atomic_uint64 config_requested;	/* bumped at commit of a change */
	pg_atomic_uint32 prepared_change;	/* 1: a change was prepared, the
										 * worker polls (catalog.c) */
	int			worker_procno;	/* -1 when no worker runs */
	pg_atomic_uint32 deadlock_checker;	/* procno + 1 of the backend that
										 * runs a deadlock check, or 0 */
	BulkheadSlot *slots;		/* nslots */
	BulkheadEntry *entries;		/* nbackends * permits_per_backend */
} BulkheadShared;

/* shmem.c */
extern BulkheadShared *bulkhead_shared;
extern void bulkhead_shmem_request(void);
extern void bulkhead_shmem_startup(void);
extern void bulkhead_check_loaded(void);
extern int	bulkhead_backend_count(void);
extern int	bulkhead_find_slot(const char *name);

/* The permit entries of the backend that uses PGPROC number procno */
static inline BulkheadEntry *
bulkhead_backend_entries(int procno)
{
	Assert(procno >= 0 && procno < bulkhead_shared->nbackends);
	return &bulkhead_shared->entries[procno * bulkhead_shared->permits_per_backend];
}

/* functions.c */
extern void bulkhead_workload_name_arg(FunctionCallInfo fcinfo, int argno, char *name);

/* permit.c */
extern bool bulkhead_acquire_permit(const char *name, int64 timeout_us,
									bool use_default_timeout,
									BulkheadScope scope, bool try_only);
extern void bulkhead_release_entry(int entry_index);
extern void bulkhead_wait_cleanup(void);
/*
 * Backends granted a permit under a slot lock, to be woken once the lock is
 * released: a waiter woken while the lock is still held would run, find the
 * lock taken and sleep again on it, two context switches per hand-off.
 */
#define BULKHEAD_WAKE_BATCH		8
typedef struct BulkheadWakeups
{
	int			n;
	int			procnos[BULKHEAD_WAKE_BATCH];
} BulkheadWakeups;

extern void bulkhead_grant_waiters(BulkheadSlot *slot, BulkheadWakeups *wakeups);
extern void bulkhead_wake_all(BulkheadWakeups *wakeups);

/* Wake what bulkhead_grant_waiters() recorded (after the slot lock) */
static inline void
bulkhead_wake(BulkheadWakeups *wakeups)
{
	if (wakeups->n > 0)
		bulkhead_wake_all(wakeups);
}
extern void bulkhead_unlink_entry(BulkheadSlot *slot, BulkheadEntry *entry);
extern bool bulkhead_waiting(void);
extern bool bulkhead_end_wait_deadlocked(uint64 holders_stamp);

/* scope.c: the backend's own permits */
typedef struct BulkheadLocalPermit
{
	bool		held;			/* granted to this backend */
	BulkheadScope scope;
	SubTransactionId subid;		/* transaction scope: owning subxact */
	int			workload;		/* slot index */
	char		name[NAMEDATALEN];
	int			statement_timeout_ms;	/* guards copied at grant */
	int			lock_timeout_ms;
	int			idle_timeout_ms;
	TimestampTz acquired_in;	/* statement_timestamp() of the statement that
								 * took it: a session permit is returned if
								 * that statement fails (scope.c) */
} BulkheadLocalPermit;

extern BulkheadLocalPermit *bulkhead_local;
extern int	bulkhead_nheld;		/* how many of bulkhead_local[] are held */
extern void bulkhead_backend_init(void);
extern void bulkhead_register_callbacks(void);
extern int	bulkhead_free_local_index(void);
extern int	bulkhead_local_index_by_slot(int slot);
extern int	bulkhead_local_index_by_name(const char *name);
extern int	bulkhead_release_session_permits(void);
extern void bulkhead_discard_session_permits(void);

/* gate.c */
extern char *bulkhead_gate_workload;
extern bool bulkhead_exempt_superuser;
extern void bulkhead_gate_init(void);
extern bool bulkhead_gate_reset(bool commit);

/* guard.c */
extern void bulkhead_apply_guards(BulkheadLocalPermit *permit);
extern void bulkhead_restore_session_guards(void);

/* adaptive.c: the worker's control of adaptive limits */
extern int	bulkhead_adaptive_law;
extern void bulkhead_adaptive_init(void);
extern int	bulkhead_limit_at_load(const BulkheadSlot *slot,
								   const BulkheadConfig *config);
extern bool bulkhead_adaptive_sample(void);
extern void bulkhead_adaptive_decide(void);

/* worker.c */
extern void bulkhead_register_worker(void);
extern void bulkhead_signal_worker(void);
PGDLLEXPORT void bulkhead_worker_main(Datum arg);

/*
 * stats.c.  A build with -DBULKHEAD_NO_LATENCY_STATS leaves out the wait and
 * hold timing (clock reads at release, totals, histograms): benchmarks
 * build it to measure what that timing costs.  Real builds never do.
 */
#ifdef BULKHEAD_NO_LATENCY_STATS
#define bulkhead_stats_clock()	((TimestampTz) 0)
#else
#define bulkhead_stats_clock()	GetCurrentTimestamp()
#endif
extern void bulkhead_stats_add_wait(BulkheadStats *stats, uint64 usec);
extern void bulkhead_stats_add_hold(BulkheadStats *stats, uint64 usec);
extern double bulkhead_hist_percentile(const BulkheadHistogram *hist, double p);
extern void bulkhead_stats_clear(BulkheadStats *stats);
extern void bulkhead_stats_restore(void);
extern void bulkhead_stats_save(int code, Datum arg);

#endif							/* BULKHEAD_H */
