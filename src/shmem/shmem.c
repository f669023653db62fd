/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Shared-memory layout of bulkhead: the workload directory and the
 *	  per-backend permit entries, name lookup in the directory, and the
 *	  reload protocol between the tables' triggers and the worker.
 *
 * Which module writes which field, under which lock, is written down in
 * shmem.h.  This file creates the structures and owns config_requested,
 * prepared_change and worker_procno; it calls no other module, and every
 * module that reads shared state calls it.
 *
 *-------------------------------------------------------------------------
 */
#include "shmem/shmem.h"

#include "access/twophase.h"
#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

BulkheadShared *bulkhead_shared = NULL;

/*---- GUC variables ----*/
char	   *bulkhead_database = NULL;
int			bulkhead_max_workloads = 64;
int			bulkhead_max_permits_per_backend = 8;
int			bulkhead_max_keys = 4096;

/* From _PG_init: the settings that place and size shared memory */
void
bulkhead_shmem_init(void)
{
	DefineCustomStringVariable("bulkhead.database",
							   "Database whose bulkhead_workload table defines the workloads.",
							   NULL,
							   &bulkhead_database,
							   "postgres",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("bulkhead.max_workloads",
							"Maximum number of workloads kept in shared memory.",
							NULL,
							&bulkhead_max_workloads,
							64, 1, 10000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bulkhead.max_permits_per_backend",
							"Maximum number of permits one session may hold or await at once.",
							NULL,
							&bulkhead_max_permits_per_backend,
							8, 1, 1000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bulkhead.max_keys",
							"Maximum number of keys (tenants) holding or awaiting permits at once, over all workloads.",
							NULL,
							&bulkhead_max_keys,
							4096, 1, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
}

/* PGPROCs that may own entries: the same count as InitProcGlobal's */
int
bulkhead_backend_count(void)
{
#if PG_VERSION_NUM >= 150000
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
#else
	/* before 15 the request runs in _PG_init, where MaxBackends is still 0 */
	return MaxConnections + autovacuum_max_workers + 1 +
		max_worker_processes + max_wal_senders +
		NUM_AUXILIARY_PROCS + max_prepared_xacts;
#endif
}

static Size
bulkhead_shmem_size(void)
{
	Size		size;

	size = MAXALIGN(sizeof(BulkheadShared));
	size = add_size(size, MAXALIGN(mul_size(bulkhead_max_workloads,
											sizeof(BulkheadSlot))));
	size = add_size(size, MAXALIGN(mul_size(mul_size(bulkhead_backend_count(),
													 bulkhead_max_permits_per_backend),
											sizeof(BulkheadEntry))));
	size = add_size(size, MAXALIGN(mul_size(mul_size(bulkhead_backend_count(),
													 bulkhead_max_permits_per_backend),
											sizeof(BulkheadMoved))));
	size = add_size(size, MAXALIGN(mul_size(bulkhead_max_keys,
											sizeof(BulkheadKey))));
	size = add_size(size, MAXALIGN(mul_size(mul_size(bulkhead_backend_count(),
													 bulkhead_max_permits_per_backend),
											sizeof(BulkheadEntryKey))));
	size = add_size(size, mul_size(mul_size(bulkhead_backend_count(),
											bulkhead_max_permits_per_backend),
								   sizeof(BulkheadEntryPrio)));
	return size;
}

/* Called from shmem_request_hook (PG 15+) or _PG_init (earlier) */
void
bulkhead_shmem_request(void)
{
	RequestAddinShmemSpace(bulkhead_shmem_size());
	/*
	 * one lock per workload slot, plus the directory lock and the lock the
	 * worker moves trees of budgets under (budget.c)
	 */
	RequestNamedLWLockTranche("bulkhead", bulkhead_max_workloads + 2);
}

/* Every permit entry's own pieces start free: no key, normal, no boost */
static void
init_entries(BulkheadShared *shared, int nentries)
{
	int			i;

	for (i = 0; i < nentries; i++)
	{
		shared->entry_keys[i].key = -1;
		shared->entry_keys[i].prev = shared->entry_keys[i].next = -1;
		shared->entry_prio[i].importance = BULKHEAD_IMPORTANCE_NORMAL;
		shared->entry_prio[i].boost = BULKHEAD_BOOST_NONE;
	}
}

/*
 * Called from shmem_startup_hook: at postmaster start and again after a
 * crash re-initialisation, when all the state starts empty.  Returns true
 * when it created the structures (false when they existed already).
 */
bool
bulkhead_shmem_startup(void)
{
	bool		found;
	LWLockPadded *locks;
	char	   *ptr;
	int			i;
	int			nentries;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bulkhead_shared = ShmemInitStruct("bulkhead", bulkhead_shmem_size(), &found);
	if (!found)
	{
		BulkheadShared *shared = bulkhead_shared;

		memset(shared, 0, sizeof(BulkheadShared));
		locks = GetNamedLWLockTranche("bulkhead");
		shared->dir_lock = &locks[bulkhead_max_workloads].lock;
		shared->transit_lock = &locks[bulkhead_max_workloads + 1].lock;
		shared->nslots = bulkhead_max_workloads;
		shared->permits_per_backend = bulkhead_max_permits_per_backend;
		shared->nbackends = bulkhead_backend_count();
		shared->config_loaded = false;
		pg_atomic_init_u64(&shared->config_requested, 0);
		pg_atomic_init_u32(&shared->prepared_change, 0);
		shared->worker_procno = -1;
		pg_atomic_init_u32(&shared->deadlock_checker, 0);
		pg_atomic_init_u32(&shared->planning_lanes, 0);
		pg_atomic_init_u64(&shared->loads, 0);

		ptr = (char *) shared + MAXALIGN(sizeof(BulkheadShared));
		shared->slots = (BulkheadSlot *) ptr;
		ptr += MAXALIGN(mul_size(shared->nslots, sizeof(BulkheadSlot)));
		shared->entries = (BulkheadEntry *) ptr;
		nentries = shared->nbackends * shared->permits_per_backend;
		ptr += MAXALIGN(mul_size(nentries, sizeof(BulkheadEntry)));
		shared->moved = (BulkheadMoved *) ptr;
		memset(shared->moved, 0, mul_size(nentries, sizeof(BulkheadMoved)));
		ptr += MAXALIGN(mul_size(nentries, sizeof(BulkheadMoved)));
		shared->keys = (BulkheadKey *) ptr;
		ptr += MAXALIGN(mul_size(bulkhead_max_keys, sizeof(BulkheadKey)));
		shared->entry_keys = (BulkheadEntryKey *) ptr;
		ptr += MAXALIGN(mul_size(nentries, sizeof(BulkheadEntryKey)));
		shared->entry_prio = (BulkheadEntryPrio *) ptr;
		shared->nkeys = bulkhead_max_keys;
		SpinLockInit(&shared->key_free_lock);
		for (i = 0; i < shared->nkeys; i++)
		{
			memset(&shared->keys[i], 0, sizeof(BulkheadKey));
			shared->keys[i].workload = -1;
			shared->keys[i].next = i + 1 < shared->nkeys ? i + 1 : -1;
		}
		shared->key_free = 0;
		init_entries(shared, nentries);

		for (i = 0; i < shared->nslots; i++)
		{
			BulkheadSlot *slot = &shared->slots[i];

			memset(slot, 0, sizeof(BulkheadSlot));
			slot->own_lock = &locks[i].lock;
			slot->lock = slot->own_lock;
			slot->parent = slot->first_child = slot->next_sibling = -1;
			slot->first_key = -1;
			/* empty holders and waiters lists (entry_list.h) */
			slot->holders.head = slot->holders.tail = BULKHEAD_NO_ENTRY;
			slot->waiters.head = slot->waiters.tail = BULKHEAD_NO_ENTRY;
		}

		nentries = shared->nbackends * shared->permits_per_backend;
		for (i = 0; i < nentries; i++)
		{
			memset(&shared->entries[i], 0, sizeof(BulkheadEntry));
			shared->entries[i].prev = BULKHEAD_NO_ENTRY;
			shared->entries[i].next = BULKHEAD_NO_ENTRY;
			shared->entries[i].workload = -1;
		}
	}
	LWLockRelease(AddinShmemInitLock);
	return !found;
}

/* Raise 55000 unless the library was preloaded */
void
bulkhead_check_loaded(void)
{
	if (bulkhead_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("bulkhead must be loaded via \"shared_preload_libraries\""),
				 errhint("Add bulkhead to the \"shared_preload_libraries\" setting and restart the server.")));
}

/*
 * Slot index of the defined workload called name, or -1.  The result is a
 * hint: the caller re-checks defined and name under the slot's lock.
 */
int
bulkhead_find_slot(const char *name)
{
	BulkheadShared *shared = bulkhead_shared;
	int			found = -1;
	int			i;

	LWLockAcquire(shared->dir_lock, LW_SHARED);
	for (i = 0; i < shared->nslots; i++)
	{
		if (shared->slots[i].in_use && strcmp(shared->slots[i].name, name) == 0)
		{
			found = i;
			break;
		}
	}
	LWLockRelease(shared->dir_lock);
	return found;
}

/*
 * bulkhead_slot_lock() found the lock it took no longer in force (the
 * worker moved the slot to another tree meanwhile): take the new one.
 */
void
bulkhead_slot_lock_retry(BulkheadSlot *slot, LWLockMode mode)
{
	for (;;)
	{
		LWLock	   *lock = *((LWLock *volatile *) &slot->lock);

		LWLockAcquire(lock, mode);
		if (*((LWLock *volatile *) &slot->lock) == lock)
			return;
		LWLockRelease(lock);
	}
}

/*
 * Ask the worker to reload the tables: at the commit of a change (catalog.c),
 * or when the last permit of a deleted workload went while rows wait for a
 * free slot (slot.c's callers).  Never throws.
 */
void
bulkhead_request_reload(void)
{
	int			procno;

	pg_atomic_fetch_add_u64(&bulkhead_shared->config_requested, 1);
	procno = bulkhead_shared->worker_procno;
	if (procno >= 0)
		SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

/* How many reloads were asked for so far (the worker compares) */
uint64
bulkhead_reload_requests(void)
{
	return pg_atomic_read_u64(&bulkhead_shared->config_requested);
}

/*
 * A change of a table was prepared (PREPARE TRANSACTION): its COMMIT
 * PREPARED fires no trigger, so the worker polls while one may be left.
 */
void
bulkhead_note_prepared_change(void)
{
	pg_atomic_write_u32(&bulkhead_shared->prepared_change, 1);
}

/* The worker: was a prepared change noted?  Clears the note. */
bool
bulkhead_take_prepared_change(void)
{
	return pg_atomic_exchange_u32(&bulkhead_shared->prepared_change, 0) != 0;
}

/* The worker: is a prepared change noted (it polls fast meanwhile)? */
bool
bulkhead_prepared_change_pending(void)
{
	return pg_atomic_read_u32(&bulkhead_shared->prepared_change) != 0;
}

/* The worker's PGPROC number, set at its start, -1 at its exit */
void
bulkhead_set_worker(int procno)
{
	bulkhead_shared->worker_procno = procno;
}
