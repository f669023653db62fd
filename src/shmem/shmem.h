/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  The shared-memory layout of bulkhead and its lock protocol; finding
 *	  a workload's slot; asking the worker to reload (shmem.c).
 *
 * BulkheadShared (one per cluster) holds a directory of workload slots and
 * a table of permit entries, permits_per_backend per PGPROC.  Each piece of
 * it has one owning module, its only writer:
 *
 *   piece                                     lock              owner
 *   ----------------------------------------  ----------------  ----------
 *   slot: in_use, name                        dir_lock + slot   slot.c
 *   slot: defined, restored, config           slot->lock        slot.c
 *   slot: current_limit                       slot->lock        slot.c
 *   slot: running, queued, holders, waiters   slot->lock        slot.c
 *   slot: stats                               slot->lock        slot.c, and
 *         rejections at admission                               admit.c
 *   slot: sample_peak_running, _queued        slot->lock        slot.c (a
 *         (1.4: highest since the history's last sample)        budget's:
 *                                                               budget.c)
 *   slot: dl_holders ... dl_prover            slot->lock        deadlockfree.c
 *   slot: lock (the lock in force)            see below         budget.c
 *   slot: parent, first_child, next_sibling   slot->lock        budget.c
 *   slot: sub_queued, reserved_sum,           slot->lock        budget.c
 *         shared_used, service(_floor), served_at,
 *         granted_at; running of a budget,
 *         and its acquired, released, moved_*
 *   every permit entry                        its slot's lock   slot.c
 *   shared->moved[] (per entry)               its slot's lock   slot.c
 *   slot: keyed, first_key, nokey, key_floor  slot->lock        keys.c
 *   a key in use (shared->keys[k]), and       its slot's lock   keys.c
 *         shared->entry_keys[] (per entry)
 *   shared: key_free and a free key's next    key_free_lock     keys.c
 *   shared->entry_prio[] (per entry), and     its slot's lock   slot.c (the
 *         slot: prio_waiting (1.5)                              owner sets
 *                                                               its free
 *                                                               entry's)
 *   shared: config_loaded, rows_pending       dir_lock          loader.c
 *   shared: config_requested, prepared_change atomic            shmem.c
 *   shared: worker_procno                     none (see below)  shmem.c
 *   shared: deadlock_checker                  atomic            deadlock.c
 *   shared: planning_lanes (a hint), loads    atomic            loader.c
 *   shared: sizes, lock pointers, arrays      set at start      shmem.c
 *
 * Other modules read under the lock named, and call the owner to change
 * anything.  The owners' functions that need a slot lock expect the caller
 * to hold it (a backend takes one lock per acquire or release).
 *
 * - The directory lock (shared->dir_lock) protects, in every slot: in_use,
 *   name, and the assignment of a slot to a name.  It is taken exclusively
 *   to add or remove workloads (the worker), shared to look a name up.  A
 *   slot's name never changes while any permit entry points at the slot
 *   (the slot stays in_use until it is drained).
 * - Each slot's lock in force (slot->lock) protects everything else in the
 *   slot and every permit entry linked into its lists (state, since,
 *   queued_at, the links).  Lock order: dir_lock before a slot lock; a
 *   backend never holds two slot locks at once.
 * - Shared budgets (budget.c): the lock in force of every slot of a tree of
 *   budgets is the own lock of the tree's root; a workload outside any tree
 *   is its own root, so it keeps its own lock.  One lock per tree: a grant
 *   checks and changes the counts of every level of its path under the one
 *   lock it takes, so no level is ever seen or left over its limit half-way,
 *   and no order between levels' locks exists to get wrong.  Trees are
 *   independent, and a workload outside any tree costs what it did.
 * - slot->lock changes only when the tree changes (the worker re-parents, or
 *   frees a slot that was in a tree).  The worker then holds both the old
 *   and the new lock: it moves every slot of the trees it changes, one old
 *   tree at a time, onto shared->transit_lock, which it holds throughout;
 *   re-parents under that one lock; and moves each slot onto the own lock
 *   of its new root, one new tree at a time.  So it never holds more than
 *   dir_lock and two other locks, however many trees change (a process may
 *   hold at most 200 LWLocks), and it is the only process that holds two
 *   slot locks, so no order with a backend's can deadlock.  Everyone
 *   takes a slot's lock with bulkhead_slot_lock(), which reads slot->lock,
 *   takes it and checks that it is still the one in force (else it retries):
 *   holding the lock in force, slot->lock cannot change, so releasing
 *   slot->lock releases what was taken.
 * - A permit entry's workload field is set by its owner backend's call to
 *   slot.c, under the slot lock of the workload it names, while the entry
 *   is free; it is cleared (-1) under that same lock when the entry is
 *   unlinked.  The worker may move a holder to another workload (runaway
 *   holders, runaway.c), holding the locks of both: so the owner, to release,
 *   reads the field, takes that slot's lock and checks the field again.
 * - slot->current_limit is the limit every grant decision uses: the
 *   configured max_running, or the adaptive limit.  After a lowering,
 *   running may exceed it until holders release: nothing is preempted and
 *   nothing new is granted meanwhile.
 * - worker_procno is written by the worker only (at start and exit, through
 *   shmem.c) and read without a lock (an aligned int).
 * - deadlock_checker: the PGPROC number + 1 of the one backend running a
 *   deadlock check, 0 when none does.  It is taken by compare-and-swap,
 *   never waited for, and is not a lock: no LWLock is held while it is.
 *
 * Called by every module that reads shared state; calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_SHMEM_H
#define BULKHEAD_SHMEM_H

#include "shmem/base.h"
#include "shmem/stats.h"

#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

#define BULKHEAD_MAX_ROLES		16

/* A guard that is NULL in the table (leave the session's value alone) */
#define BULKHEAD_NO_GUARD		(-1)

/*---- GUC variables (shmem.c): where the worker reads, how big this is ----*/
extern char *bulkhead_database;
extern int	bulkhead_max_workloads;
extern int	bulkhead_max_permits_per_backend;
extern int	bulkhead_max_keys;

/* The longest key (tenants, keys.c), in bytes: as a workload name */
#define BULKHEAD_KEY_MAXLEN		(NAMEDATALEN - 1)

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

/*
 * Lanes (1.3, caps.c): the settings a workload caps for the statements run
 * while one of its permits is held.  One bit of mask per setting capped;
 * values in the setting's base unit (kB for memory, a count of workers,
 * the multiplier, 0 for jit = off).  A lane that sets temp_file_limit = -1
 * or jit = on caps nothing there (its bit stays clear).
 */
typedef enum BulkheadCapSetting
{
	BULKHEAD_CAP_WORK_MEM = 0,
	BULKHEAD_CAP_HASH_MEM_MULTIPLIER,
	BULKHEAD_CAP_MAINTENANCE_WORK_MEM,
	BULKHEAD_CAP_TEMP_FILE_LIMIT,
	BULKHEAD_CAP_PARALLEL_PER_GATHER,
	BULKHEAD_CAP_PARALLEL_MAINTENANCE,
	BULKHEAD_CAP_JIT,
	BULKHEAD_NUM_CAPS
} BulkheadCapSetting;

/* The caps that change how a statement is planned, not only run */
#define BULKHEAD_PLANNING_CAPS \
	((1 << BULKHEAD_CAP_WORK_MEM) | (1 << BULKHEAD_CAP_HASH_MEM_MULTIPLIER) | \
	 (1 << BULKHEAD_CAP_PARALLEL_PER_GATHER) | (1 << BULKHEAD_CAP_JIT))

typedef struct BulkheadCaps
{
	uint8		mask;			/* 1 << BulkheadCapSetting per setting capped */
	double		value[BULKHEAD_NUM_CAPS];
} BulkheadCaps;

/* The longest value of a lane setting, as written, that is kept */
#define BULKHEAD_CAP_TEXTLEN	32

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
	bool		budget;			/* 1.2: some row names it as its parent: no
								 * permit of its own, whether or not its
								 * children are in its tree yet (or still) */
	int			min_running;	/* its floor (when max_running >= 1) */
	int64		max_hold_us;	/* 1.2: how long a permit may be held; 0:
								 * no limit */
	uint8		on_max_hold;	/* 1.2: BulkheadHoldAction */
	int			reserved;		/* 1.2: permits of the parent kept for this
								 * subtree alone */
	int			weight;			/* 1.2: share of the parent's shared part */
	int			nroles;			/* 0 = any role may acquire */
	char		roles[BULKHEAD_MAX_ROLES][NAMEDATALEN];
	char		parent[NAMEDATALEN];	/* 1.2: the budget drawn from, or "" */
	char		move_to[NAMEDATALEN];	/* 1.2: for BULKHEAD_HOLD_MOVE */
	/* after roles: admission's copy of the config (permit.c) leaves it out */
	int64		max_bypass_us;	/* 1.2: the newest waiter is served first,
								 * but none that has waited this long is
								 * passed over; 0: strict FIFO */
	int			max_running_per_key;	/* 1.2: 0: no cap */
	int			max_queued_per_key; /* 1.2: -1: no cap */
	BulkheadCaps caps;			/* 1.3: the lane's settings */
	char		cap_text[BULKHEAD_NUM_CAPS][BULKHEAD_CAP_TEXTLEN];	/* as written */
	int64		max_memory;		/* 1.4: bytes its statements may be granted
								 * at once (a budget: its subtree's); -1:
								 * no limit */
	int64		memory_timeout_us;	/* 1.4: the wait for a grant before a
									 * statement runs with less */
	char		max_memory_text[BULKHEAD_CAP_TEXTLEN];	/* as written; "": NULL */
} BulkheadConfig;

/* What the worker does to a holder past max_hold (runaway holders, 1.2) */
typedef enum BulkheadHoldAction
{
	BULKHEAD_HOLD_LOG = 0,
	BULKHEAD_HOLD_CANCEL,
	BULKHEAD_HOLD_TERMINATE,
	BULKHEAD_HOLD_MOVE
} BulkheadHoldAction;

/* A list of permit entries linked by index (entry_list.h) */
#define BULKHEAD_NO_ENTRY		(-1)
typedef struct BulkheadEntryList
{
	int32		head;			/* entry index, or BULKHEAD_NO_ENTRY */
	int32		tail;
} BulkheadEntryList;

/*
 * Tenants (keys.c): the callers of one key of a workload, or (nokey) its
 * callers without a key while some key is in use.  Waiters are linked
 * through shared->entry_keys[], beside the slot's own waiters list, which
 * keeps every waiter in arrival order.
 */
typedef struct BulkheadKeyGroup
{
	int			running;		/* its holders */
	int			queued;			/* its waiters */
	BulkheadEntryList waiters;	/* linked by entry_keys[].prev / next */
	double		service;		/* permit-us held, accumulated to served_at */
	TimestampTz served_at;
	TimestampTz granted_at;		/* its last grant; 0: none yet */
} BulkheadKeyGroup;

/* One workload slot; see the header for who writes what, under which lock */
typedef struct BulkheadSlot
{
	LWLock	   *lock;			/* the lock in force: own_lock of the tree's
								 * root (see the header) */
	LWLock	   *own_lock;		/* this slot's lock (named tranche), set at
								 * start */

	/* protected by shared->dir_lock (writes also hold lock) */
	bool		in_use;			/* assigned to name */
	char		name[NAMEDATALEN];

	/* protected by lock */
	bool		defined;		/* present in the table at the last load */
	bool		restored;		/* stats read back at start, table not read yet */
	BulkheadConfig config;
	int			current_limit;	/* the limit in force: config.max_running,
								 * or the worker's choice when adaptive */
	int			running;		/* entries in holders; for a budget, its
								 * whole subtree's */
	int			queued;			/* entries in waiters (its own) */
	BulkheadEntryList holders;	/* GRANTED entries */
	BulkheadEntryList waiters;	/* WAITING entries, in arrival order */
	BulkheadStats stats;

	/*
	 * Protected by lock, written by deadlockfree.c only: the last deadlock check
	 * of a waiter here that found its wait able to end, which every waiter
	 * of this workload may rely on while the holders stay the same.
	 */
	uint64		dl_holders;		/* the holders stamp it saw */
	uint64		dl_holder_states;	/* what the holders waited for; 0: unsure */
	TimestampTz dl_proved_at;	/* when it began; 0: none, or withdrawn */
	int64		dl_interval_us; /* how long it may be relied on */
	int32		dl_prover;		/* PGPROC number + 1 of the waiter whose
								 * search made it, who keeps checking while
								 * the others sleep on it; 0: none */

	/*
	 * Shared budgets, protected by lock (the tree's), written by budget.c.
	 * Outside any tree: parent = first_child = -1 and the rest unused.
	 */
	bool		in_tree;		/* parent >= 0 || first_child >= 0: the one
								 * test on the fast path */
	int16		parent;			/* slot index of the budget, or -1 */
	int16		first_child;	/* children, linked by next_sibling */
	int16		next_sibling;
	int			sub_queued;		/* waiters in the subtree, its own too */
	int			reserved_sum;	/* a budget: its children's reserved */
	int			shared_used;	/* a budget: sum over its children of
								 * max(0, running - reserved) */
	double		service;		/* as a child: borrowed permit-us / weight,
								 * accumulated up to served_at */
	double		service_floor;	/* a budget: the service of the last child
								 * that went idle (never lowered) */
	TimestampTz served_at;
	TimestampTz granted_at;		/* last grant in the subtree; 0: never */

	/*
	 * Tenants, protected by lock, written by keys.c.  Without keys in use
	 * (keyed false, first_key -1) the rest is unused.
	 */
	bool		keyed;			/* some key of this slot is in use: the one
								 * test on the fast path */
	int32		first_key;		/* its keys in use, linked by next */
	BulkheadKeyGroup nokey;		/* while keyed: its callers without a key */
	double		key_floor;		/* service of the last group that went idle */

	/*
	 * History (1.4), protected by lock: the highest running and queued since
	 * the worker's last sample (history.c), raised with the statistics'
	 * peaks (bulkhead_slot_running_up, bulkhead_slot_queued_up), read and
	 * started again from the counts of the moment by
	 * bulkhead_slot_take_peaks (slot.c).
	 */
	int			sample_peak_running;
	int			sample_peak_queued;

	/*
	 * Priorities (1.5), protected by lock, written by slot.c: its waiters
	 * whose entry_prio is not (normal, no boost).  While 0, the queue is
	 * served in arrival order (or max_bypass's) without looking at any
	 * importance: a workload that uses neither pays nothing.
	 */
	int			prio_waiting;

	/*
	 * Protected by lock, written by slot.c: its holders of a permit borrowed
	 * over the limit by a lock holder (1.5).  At most one: a workload passes
	 * its limit by one permit at most, however many of its waiters hold
	 * locks others wait for (the others are served ahead, in turn).
	 */
	int			borrowed_now;
} BulkheadSlot;

/*
 * running (queued) of slot rose by one: the peaks follow, bulkhead_stats'
 * and the history's.  Caller holds slot->lock exclusively; slot.c's (and
 * budget.c's, for a budget's counts).
 */
static inline void
bulkhead_slot_running_up(BulkheadSlot *slot)
{
	slot->running++;
	if (slot->running > slot->stats.peak_running)
		slot->stats.peak_running = slot->running;
	if (slot->running > slot->sample_peak_running)
		slot->sample_peak_running = slot->running;
}

static inline void
bulkhead_slot_queued_up(BulkheadSlot *slot)
{
	slot->queued++;
	if (slot->queued > slot->stats.peak_queued)
		slot->stats.peak_queued = slot->queued;
	if (slot->queued > slot->sample_peak_queued)
		slot->sample_peak_queued = slot->queued;
}

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

/*
 * Where a holder moved by the worker (runaway holders) came from, one per
 * permit entry, valid while since equals the entry's since (a later grant
 * of the entry has another): no write on the acquire and release paths.
 * Protected like the entry (the lock of the slot it is linked into).
 */
typedef struct BulkheadMoved
{
	TimestampTz since;
	char		from[NAMEDATALEN];
} BulkheadMoved;

/*
 * Priorities (1.5, importance.h): per permit entry, the importance its wait
 * carries and whether it was served as a lock holder.  Written by the
 * owner backend while its entry is free (before it is linked: the slot
 * lock's acquire orders it before any read), then by slot.c under the
 * lock of the slot the entry is linked into; read under that lock.
 */
typedef enum BulkheadImportance
{
	BULKHEAD_IMPORTANCE_LOW = 0,
	BULKHEAD_IMPORTANCE_NORMAL,
	BULKHEAD_IMPORTANCE_HIGH
} BulkheadImportance;

typedef enum BulkheadBoost
{
	BULKHEAD_BOOST_NONE = 0,
	BULKHEAD_BOOST_AHEAD,		/* a lock holder: served ahead of its queue */
	BULKHEAD_BOOST_BORROWED		/* a lock holder granted over the limit */
} BulkheadBoost;

typedef struct BulkheadEntryPrio
{
	uint8		importance;		/* BulkheadImportance (importance.h) */
	uint8		boost;			/* BulkheadBoost */
} BulkheadEntryPrio;

/*
 * A key in use: a tenant of workload slot, holding or waiting.  Free keys
 * are linked from shared->key_free by next, under key_free_lock; a key in
 * use is its slot's (under the slot's lock), linked from slot->first_key.
 */
typedef struct BulkheadKey
{
	int32		next;
	int16		workload;		/* slot index; -1 while free */
	uint32		hash;			/* of name, to compare fast */
	BulkheadKeyGroup group;
	char		name[BULKHEAD_KEY_MAXLEN + 1];
} BulkheadKey;

/*
 * Per permit entry: its key (index into shared->keys; -1: none), and its
 * links in its group's waiters list.  Protected like the entry.
 */
typedef struct BulkheadEntryKey
{
	int32		key;
	int32		prev;
	int32		next;
} BulkheadEntryKey;

typedef struct BulkheadShared
{
	LWLock	   *dir_lock;
	LWLock	   *transit_lock;	/* the lock in force of the slots of the
								 * trees the worker is re-parenting, held by
								 * it throughout (budget.c) */
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
	pg_atomic_uint32 planning_lanes;	/* 1.3: workloads whose settings
										 * cap what the planner uses */
	pg_atomic_uint64 loads;		/* 1.3: the worker's loads, counted (a
								 * backend's cache of workloads' caps is
								 * stale when it moved) */
	BulkheadSlot *slots;		/* nslots */
	BulkheadEntry *entries;		/* nbackends * permits_per_backend */
	BulkheadMoved *moved;		/* one per entry */
	slock_t		key_free_lock;
	int32		key_free;		/* key_free_lock: first free key, or -1 */
	int			nkeys;			/* bulkhead.max_keys */
	BulkheadKey *keys;			/* nkeys */
	BulkheadEntryKey *entry_keys;	/* one per entry */
	BulkheadEntryPrio *entry_prio;	/* 1.5: one per entry */
} BulkheadShared;

extern BulkheadShared *bulkhead_shared;

extern void bulkhead_shmem_init(void);
extern void bulkhead_shmem_request(void);
extern bool bulkhead_shmem_startup(void);
extern void bulkhead_check_loaded(void);
extern int	bulkhead_backend_count(void);
extern int	bulkhead_find_slot(const char *name);
extern void bulkhead_slot_lock_retry(BulkheadSlot *slot, LWLockMode mode);

/* The reload protocol between the tables' triggers and the worker */
extern void bulkhead_request_reload(void);
extern void bulkhead_note_prepared_change(void);
extern bool bulkhead_take_prepared_change(void);
extern bool bulkhead_prepared_change_pending(void);
extern uint64 bulkhead_reload_requests(void);
extern void bulkhead_set_worker(int procno);

/*
 * Take slot's lock in force (see the header): the lock of its tree, which
 * the worker may change while we wait for it; then the new one is taken.
 */
static inline void
bulkhead_slot_lock(BulkheadSlot *slot, LWLockMode mode)
{
	LWLock	   *lock = *((LWLock *volatile *) &slot->lock);

	LWLockAcquire(lock, mode);
	if (likely(*((LWLock *volatile *) &slot->lock) == lock))
		return;
	LWLockRelease(lock);
	bulkhead_slot_lock_retry(slot, mode);
}

/* The permit entries of the backend that uses PGPROC number procno */
static inline BulkheadEntry *
bulkhead_backend_entries(int procno)
{
	Assert(procno >= 0 && procno < bulkhead_shared->nbackends);
	return &bulkhead_shared->entries[procno * bulkhead_shared->permits_per_backend];
}

/* The PGPROC number of the backend that owns an entry */
static inline int
bulkhead_entry_procno(const BulkheadEntry *entry)
{
	return (int) (entry - bulkhead_shared->entries) /
		bulkhead_shared->permits_per_backend;
}

#endif							/* BULKHEAD_SHMEM_H */
