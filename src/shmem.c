/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Shared-memory layout of bulkhead: the workload directory and the
 *	  per-backend permit entries, and name lookup in the directory.
 *
 * Which lock protects which field is written down in bulkhead.h.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"
#include "entry_list.h"

#include "access/twophase.h"
#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

BulkheadShared *bulkhead_shared = NULL;

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
	size = add_size(size, mul_size(mul_size(bulkhead_backend_count(),
											bulkhead_max_permits_per_backend),
								   sizeof(BulkheadEntry)));
	return size;
}

/* Called from shmem_request_hook (PG 15+) or _PG_init (earlier) */
void
bulkhead_shmem_request(void)
{
	RequestAddinShmemSpace(bulkhead_shmem_size());
	/* one lock per workload slot, plus the directory lock */
	RequestNamedLWLockTranche("bulkhead", bulkhead_max_workloads + 1);
}

/*
 * Called from shmem_startup_hook: at postmaster start and again after a
 * crash re-initialisation, when all the state starts empty.
 */
void
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
		shared->nslots = bulkhead_max_workloads;
		shared->permits_per_backend = bulkhead_max_permits_per_backend;
		shared->nbackends = bulkhead_backend_count();
		shared->config_loaded = false;
		pg_atomic_init_u64(&shared->config_requested, 0);
		pg_atomic_init_u32(&shared->prepared_change, 0);
		shared->worker_procno = -1;
		pg_atomic_init_u32(&shared->deadlock_checker, 0);

		ptr = (char *) shared + MAXALIGN(sizeof(BulkheadShared));
		shared->slots = (BulkheadSlot *) ptr;
		ptr += MAXALIGN(mul_size(shared->nslots, sizeof(BulkheadSlot)));
		shared->entries = (BulkheadEntry *) ptr;

		for (i = 0; i < shared->nslots; i++)
		{
			BulkheadSlot *slot = &shared->slots[i];

			memset(slot, 0, sizeof(BulkheadSlot));
			slot->lock = &locks[i].lock;
			entry_list_init(&slot->holders);
			entry_list_init(&slot->waiters);
		}

		nentries = shared->nbackends * shared->permits_per_backend;
		for (i = 0; i < nentries; i++)
		{
			memset(&shared->entries[i], 0, sizeof(BulkheadEntry));
			shared->entries[i].prev = BULKHEAD_NO_ENTRY;
			shared->entries[i].next = BULKHEAD_NO_ENTRY;
			shared->entries[i].workload = -1;
		}

		/* statistics saved at the last clean shutdown (none after a crash) */
		bulkhead_stats_restore();
	}
	LWLockRelease(AddinShmemInitLock);

	/* the postmaster saves the statistics when it shuts down */
	if (!IsUnderPostmaster)
		on_shmem_exit(bulkhead_stats_save, (Datum) 0);
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
