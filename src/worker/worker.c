/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The "bulkhead" background worker's main loop: it loads the
 *	  configuration tables into shared memory (loader.c), frees the permits
 *	  of backends that are gone without releasing them (slot.c), and runs
 *	  the adaptive limits (adaptive.c); at the end of each interval it
 *	  samples the workloads for bulkhead_history (history.c), and it logs
 *	  what the wait log's rate limit suppressed (waitlog.c).
 *
 * The worker connects to bulkhead.database.  It reloads when a committed
 * change asks for it (shared->config_requested, bumped at commit by the
 * table's trigger, and our latch: shmem.c), and also by polling: every
 * second on a hot standby, where changes arrive through WAL replay and fire
 * no trigger, and while a prepared transaction may hold a change (its
 * COMMIT PREPARED fires nothing either), and every ten seconds on a primary
 * as a safety net.
 *
 * A load that fails leaves shared memory as it was and is tried again at
 * the next tick; the reaper and the adaptive limits go on meanwhile.
 *
 * It exits on SIGTERM with status 1, so the postmaster starts it again
 * after bgw_restart_time; shared memory (and every permit in it) is
 * untouched meanwhile.
 *
 * Owns no shared state itself (shmem.c records its PGPROC number).  Only
 * bulkhead.c calls it, to register it.
 *
 *-------------------------------------------------------------------------
 */
#include "worker/worker.h"
#include "worker/adaptive.h"
#include "memory/grants.h"
#include "views/history.h"
#include "worker/loader.h"
#include "worker/runaway.h"
#include "workload/slot.h"
#include "record/waitlog.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#define BULKHEAD_RESTART_SECONDS	5
#define BULKHEAD_TICK_MS			1000
/*
 * With adaptive workloads: a sample of their holders every 10 ms, and a
 * decision every 200 ms.  At a few thousand permits a second, 20 samples
 * and some hundreds of releases per decision keep the estimates steady,
 * and a 10 s change of load sees 50 decisions.  A sample costs a shared
 * slot lock and a walk of the holders, about a microsecond.
 */
#define BULKHEAD_SAMPLE_MS			10
#define BULKHEAD_DECIDE_MS			200
#define BULKHEAD_POLL_PRIMARY_MS	10000
/* on a standby, and while a prepared transaction may hold a change */
#define BULKHEAD_POLL_FAST_MS		1000
/* how long a load waits for a lock on a table before it gives up */
#define BULKHEAD_LOAD_LOCK_TIMEOUT	"100ms"

void
bulkhead_register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = BULKHEAD_RESTART_SECONDS;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "bulkhead");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "bulkhead_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "bulkhead worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "bulkhead");
	RegisterBackgroundWorker(&worker);
}

/* The worker reached its database: the definitions it loads are current */
static bool worker_connected = false;

static void
worker_exit(int code, Datum arg)
{
	bulkhead_set_worker(-1);
}

/*
 * The worker could not connect to bulkhead.database (it does not exist, or
 * was dropped): the definitions in shared memory have no table behind them
 * any more, so none is kept.  Permits held and callers queued drain as after
 * a DELETE.  The next start that connects loads the table again.
 */
static void
worker_unload_unless_connected(int code, Datum arg)
{
	if (!worker_connected)
		bulkhead_unload_config();
}

/*
 * Free the entries of backends that ended without releasing them (a
 * safety net: every exit path of a backend releases its own).
 */
static void
reap_dead_backends(void)
{
	BulkheadShared *shared = bulkhead_shared;
	int			i;

	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];
		int			reaped;

		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
		reaped = bulkhead_slot_reap(slot);
		LWLockRelease(slot->lock);
		if (reaped > 0)
			ereport(LOG,
					(errmsg("bulkhead: freed %d permit entries of workload slot %d left by ended processes",
							reaped, i)));
	}
}


/* Connect, set the worker's own settings, and say that it runs */
static void
worker_start(void)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	before_shmem_exit(worker_unload_unless_connected, (Datum) 0);
	BackgroundWorkerInitializeConnection(bulkhead_database, NULL, 0);
	worker_connected = true;
	/* the worker's queries resolve nothing through a user's schema */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	/* a lock on a table fails the load, which is tried again (loader.c) */
	SetConfigOption("lock_timeout", BULKHEAD_LOAD_LOCK_TIMEOUT, PGC_SUSET,
					PGC_S_OVERRIDE);
	/* each snapshot taken sees what committed before it (tables.c) */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);

	bulkhead_set_worker(BULKHEAD_MY_PROCNO);
	before_shmem_exit(worker_exit, (Datum) 0);
	ereport(LOG,
			(errmsg("bulkhead worker started, reading workloads from database \"%s\"",
					bulkhead_database)));
}

/* What the main loop remembers between its turns */
typedef struct WorkerClock
{
	uint64		loaded_request; /* the reload requests counted at the last */
	bool		load_pending;	/* a load was asked for, not done */
	bool		load_failed;	/* the last load failed */
	TimestampTz last_load;
	TimestampTz last_reap;
	TimestampTz last_decision;
	TimestampTz last_hold_check;
	bool		holds;			/* a workload has a max_hold */
	long		history_ms;		/* until the history's next interval ends */
} WorkerClock;

/* One turn of the loop; returns whether an adaptive workload is defined */
static bool
worker_turn(WorkerClock *clock)
{
	uint64		requested = bulkhead_reload_requests();
	bool		poll_fast = RecoveryInProgress() ||
		bulkhead_prepared_change_pending();
	int			poll_ms = poll_fast ? BULKHEAD_POLL_FAST_MS :
	BULKHEAD_POLL_PRIMARY_MS;
	TimestampTz now = GetCurrentTimestamp();
	bool		adaptive;

	if (requested != clock->loaded_request)
	{
		clock->loaded_request = requested;
		clock->load_pending = true;
	}
	/* after a failure, no more than one try per tick */
	if ((clock->load_pending &&
		 (!clock->load_failed ||
		  TimestampDifferenceExceeds(clock->last_load, now, BULKHEAD_TICK_MS))) ||
		TimestampDifferenceExceeds(clock->last_load, now, poll_ms))
	{
		clock->last_load = now;
		clock->load_failed = !bulkhead_load_config();
		clock->load_pending = clock->load_failed;
	}
	if (TimestampDifferenceExceeds(clock->last_reap, now, BULKHEAD_TICK_MS))
	{
		clock->last_reap = now;
		reap_dead_backends();
	}
	if (TimestampDifferenceExceeds(clock->last_hold_check, now, BULKHEAD_HOLD_CHECK_MS))
	{
		clock->last_hold_check = now;
		clock->holds = bulkhead_check_holds();
	}
	/* 1.4: the history's samples, the wait log's suppressed lines */
	clock->history_ms = bulkhead_history_tick(now);
	bulkhead_waitlog_tick(now);
	adaptive = bulkhead_adaptive_sample();
	if (adaptive &&
		TimestampDifferenceExceeds(clock->last_decision, now, BULKHEAD_DECIDE_MS))
	{
		clock->last_decision = now;
		bulkhead_adaptive_decide();
	}
	return adaptive;
}

void
bulkhead_worker_main(Datum arg)
{
	WorkerClock clock = {0};

	worker_start();
	clock.loaded_request = bulkhead_reload_requests();
	clock.load_pending = true;

	/*
	 * A transaction prepared before a restart (or crash, or on the primary
	 * this standby follows) set no flag in this shared memory, yet its
	 * COMMIT PREPARED fires nothing either: the first load looks for
	 * prepared transactions, and the worker polls fast while any is left.
	 */
	bulkhead_note_prepared_change();

	for (;;)
	{
		bool		adaptive = worker_turn(&clock);
		long		timeout = adaptive ? BULKHEAD_SAMPLE_MS :
			clock.holds ? BULKHEAD_HOLD_CHECK_MS : BULKHEAD_TICK_MS;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(timeout, clock.history_ms), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* bulkhead.max_memory may have risen: serve its waiters */
			bulkhead_grants_loaded();
		}
	}
}
