/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The "bulkhead" background worker: loads bulkhead_workload into shared
 *	  memory, serves waiters when a limit grows, and frees the permits of
 *	  backends that are gone without releasing them.
 *
 * The worker connects to bulkhead.database.  It reads bulkhead_rule (rules.c)
 * with bulkhead_workload, in the same snapshot.  It reloads when a committed
 * change asks for it (shared->config_requested, bumped at commit by the
 * table's trigger, and our latch), and also by polling: every second on a
 * hot standby, where changes arrive through WAL replay and fire no trigger,
 * and every ten seconds on a primary as a safety net.
 *
 * It exits on SIGTERM with status 1, so the postmaster starts it again
 * after bgw_restart_time; shared memory (and every permit in it) is
 * untouched meanwhile.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"
#include "entry_list.h"
#include "rules.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
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
#define BULKHEAD_POLL_STANDBY_MS	1000

/* One row of the table, as read by load_config() */
typedef struct WorkloadRow
{
	char		name[NAMEDATALEN];
	BulkheadConfig config;
} WorkloadRow;

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

/* Ask the worker to reload the table (called at commit of a change) */
void
bulkhead_signal_worker(void)
{
	int			procno;

	pg_atomic_fetch_add_u64(&bulkhead_shared->config_requested, 1);
	procno = bulkhead_shared->worker_procno;
	if (procno >= 0)
		SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

static void apply_rows(WorkloadRow *rows, int nrows, bool loaded);

/* The worker reached its database: the definitions it loads are current */
static bool worker_connected = false;

static void
worker_exit(int code, Datum arg)
{
	bulkhead_shared->worker_procno = -1;
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
	BulkheadRuleList no_rules = {0, NULL};

	if (worker_connected)
		return;
	LWLockAcquire(bulkhead_shared->dir_lock, LW_EXCLUSIVE);
	apply_rows(NULL, 0, false);
	LWLockRelease(bulkhead_shared->dir_lock);
	bulkhead_rules_apply(&no_rules);
}

/* Milliseconds guard column: NULL -> no guard */
static int
guard_column(HeapTuple tuple, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		return BULKHEAD_NO_GUARD;
	/* a setting holds at most INT_MAX ms */
	return (int) Min(DatumGetFloat8(d), (double) INT_MAX);
}

static void
read_row(HeapTuple tuple, TupleDesc desc, WorkloadRow *row)
{
	BulkheadConfig *c = &row->config;
	bool		isnull;
	Datum		roles;

	memset(row, 0, sizeof(WorkloadRow));
	strlcpy(row->name, TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull)),
			NAMEDATALEN);
	c->max_running = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
	c->max_queued = DatumGetInt32(SPI_getbinval(tuple, desc, 3, &isnull));
	c->queue_timeout_us = (int64) Min(DatumGetFloat8(SPI_getbinval(tuple, desc, 4, &isnull)),
									  (double) (PG_INT64_MAX / 2));
	c->statement_timeout_ms = guard_column(tuple, desc, 5);
	c->lock_timeout_ms = guard_column(tuple, desc, 6);
	c->idle_timeout_ms = guard_column(tuple, desc, 7);
	c->shadow = DatumGetBool(SPI_getbinval(tuple, desc, 8, &isnull));
	c->adaptive = DatumGetBool(SPI_getbinval(tuple, desc, 10, &isnull));
	c->min_running = DatumGetInt32(SPI_getbinval(tuple, desc, 11, &isnull));

	roles = SPI_getbinval(tuple, desc, 9, &isnull);
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		int			i;

		deconstruct_array(DatumGetArrayTypeP(roles), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &nulls, &n);
		for (i = 0; i < n && c->nroles < BULKHEAD_MAX_ROLES; i++)
			if (!nulls[i])
				strlcpy(c->roles[c->nroles++], TextDatumGetCString(elems[i]),
						NAMEDATALEN);
	}
}

/*
 * Has the table the columns of 1.1's adaptive limit?  An extension still at
 * 1.0 (not updated yet) has not: its workloads are not adaptive.  The
 * caller is connected to SPI.
 */
static bool
has_adaptive_columns(const char *schema)
{
	StringInfoData query;
	bool		isnull;
	bool		found;

	initStringInfo(&query);
	appendStringInfo(&query,
					 "SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute"
					 " WHERE attrelid = pg_catalog.to_regclass(%s)"
					 " AND attname = 'min_running' AND NOT attisdropped)",
					 quote_literal_cstr(psprintf("%s.bulkhead_workload",
												 quote_identifier(schema))));
	if (SPI_execute(query.data, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not look up the columns of %s.bulkhead_workload", schema);
	found = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
	pfree(query.data);
	return found;
}

/*
 * Read the table (if the extension exists in this database) into rows, and
 * the rules into rules_out, allocated in the caller's memory context.
 * Returns the number of rows.
 */
static int
read_table(WorkloadRow **rows_out, BulkheadRuleList *rules_out)
{
	MemoryContext caller = CurrentMemoryContext;
	WorkloadRow *rows = NULL;
	int			nrows = 0;
	static bool warned_missing = false;
	int			i;

	rules_out->nrules = 0;
	rules_out->rules = NULL;
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());

	if (SPI_execute("SELECT n.nspname FROM pg_catalog.pg_extension e"
					" JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
					" WHERE e.extname = 'bulkhead'", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the bulkhead extension");

	if (SPI_processed == 0)
	{
		if (!warned_missing)
			ereport(LOG,
					(errmsg("bulkhead: extension \"bulkhead\" is not installed in database \"%s\"; no workloads are defined",
							bulkhead_database),
					 errhint("Run CREATE EXTENSION bulkhead in database \"%s\".",
							 bulkhead_database)));
		warned_missing = true;
	}
	else
	{
		char	   *schema = SPI_getvalue(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 1);
		StringInfoData query;

		warned_missing = false;
		initStringInfo(&query);
		appendStringInfo(&query,
						 "SELECT name, max_running, max_queued,"
						 " ceil(extract(epoch FROM queue_timeout) * 1000000)::float8,"
						 " ceil(extract(epoch FROM statement_timeout) * 1000)::float8,"
						 " ceil(extract(epoch FROM lock_timeout) * 1000)::float8,"
						 " ceil(extract(epoch FROM idle_timeout) * 1000)::float8,"
						 " mode = 'shadow', roles, %s"
						 " FROM %s.bulkhead_workload ORDER BY name",
						 has_adaptive_columns(schema) ? "adaptive, min_running" :
						 "false, 1",
						 quote_identifier(schema));
		if (SPI_execute(query.data, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read %s.bulkhead_workload", schema);

		nrows = (int) SPI_processed;
		rows = MemoryContextAlloc(caller, sizeof(WorkloadRow) * Max(nrows, 1));
		for (i = 0; i < nrows; i++)
			read_row(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, &rows[i]);
		bulkhead_rules_read(schema, caller, rules_out);
	}

	SPI_finish();
	PopActiveSnapshot();
	*rows_out = rows;
	return nrows;
}

/* Caller holds dir_lock exclusively.  Slot of name (defined or not), or -1 */
static int
slot_of(const char *name)
{
	int			i;

	for (i = 0; i < bulkhead_shared->nslots; i++)
		if (bulkhead_shared->slots[i].in_use &&
			strcmp(bulkhead_shared->slots[i].name, name) == 0)
			return i;
	return -1;
}

static int
free_slot(void)
{
	int			i;

	for (i = 0; i < bulkhead_shared->nslots; i++)
		if (!bulkhead_shared->slots[i].in_use)
			return i;
	return -1;
}

/*
 * Make shared memory match the rows: update the workloads that exist, mark
 * the others undefined (they admit no one new; a slot is freed once its last
 * permit and waiter are gone), then add the new ones, so that a slot freed
 * by this load can take a new name at once.  Caller holds dir_lock
 * exclusively; loaded says whether the rows are the table's contents (false:
 * the table could not be read, nothing is defined).
 */
static void
apply_rows(WorkloadRow *rows, int nrows, bool loaded)
{
	BulkheadShared *shared = bulkhead_shared;
	int		   *slot_of_row = palloc(sizeof(int) * Max(nrows, 1));
	bool	   *seen = palloc0(sizeof(bool) * shared->nslots);
	int			skipped = 0;
	int			r;
	int			i;

	for (r = 0; r < nrows; r++)
	{
		slot_of_row[r] = slot_of(rows[r].name);
		if (slot_of_row[r] >= 0)
			seen[slot_of_row[r]] = true;
	}

	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];

		if (!slot->in_use || seen[i])
			continue;
		LWLockAcquire(slot->lock, LW_EXCLUSIVE);
		slot->defined = false;
		slot->restored = false;
		if (slot->running == 0 && slot->queued == 0)
		{
			slot->in_use = false;
			slot->name[0] = '\0';
		}
		LWLockRelease(slot->lock);
	}

	for (r = 0; r < nrows; r++)
	{
		int			s = slot_of_row[r];
		BulkheadSlot *slot;

		if (s < 0 && (s = free_slot()) < 0)
		{
			skipped++;
			continue;
		}
		slot = &shared->slots[s];
		LWLockAcquire(slot->lock, LW_EXCLUSIVE);
		if (!slot->in_use)
		{
			slot->in_use = true;
			strlcpy(slot->name, rows[r].name, NAMEDATALEN);
			bulkhead_stats_clear(&slot->stats);
		}
		else if (!slot->defined && !slot->restored &&
				 slot->running == 0 && slot->queued == 0)
		{
			/* deleted and re-created: a new workload, with fresh figures */
			bulkhead_stats_clear(&slot->stats);
		}
		slot->current_limit = bulkhead_limit_at_load(slot, &rows[r].config);
		slot->defined = true;
		slot->restored = false;
		slot->config = rows[r].config;
		/* a higher limit, or a switch to shadow mode, serves waiters now */
		bulkhead_grant_waiters(slot, NULL);
		LWLockRelease(slot->lock);
	}
	shared->config_loaded = loaded;
	shared->rows_pending = skipped > 0;

	if (skipped > 0)
		ereport(WARNING,
				(errmsg("bulkhead: %d workloads were not loaded: all %d workload slots are in use",
						skipped, shared->nslots),
				 errdetail("Slots of deleted workloads are freed when their last permit is released."),
				 errhint("Raise \"bulkhead.max_workloads\" and restart the server.")));
	pfree(slot_of_row);
	pfree(seen);
}

static void
load_config(void)
{
	WorkloadRow *rows;
	BulkheadRuleList rules;
	int			nrows;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, "loading bulkhead workloads");
	nrows = read_table(&rows, &rules);
	LWLockAcquire(bulkhead_shared->dir_lock, LW_EXCLUSIVE);
	apply_rows(rows, nrows, true);
	LWLockRelease(bulkhead_shared->dir_lock);
	/* after the workloads, so that a new rule's workload is there first */
	bulkhead_rules_apply(&rules);
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
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
		BulkheadEntryList *lists[2] = {&slot->holders, &slot->waiters};
		int			reaped = 0;
		int			l;

		LWLockAcquire(slot->lock, LW_EXCLUSIVE);
		for (l = 0; l < 2; l++)
		{
			int32		e;
			int32		next;

			for (e = lists[l]->head; e != BULKHEAD_NO_ENTRY; e = next)
			{
				BulkheadEntry *entry = entry_at(e);
				int			procno = e / shared->permits_per_backend;

				next = entry->next; /* read before the entry is unlinked */
				if (GetPGProcByNumber(procno)->pid == entry->pid)
					continue;
				reaped++;
				if (entry->state == BULKHEAD_ENTRY_GRANTED)
					slot->stats.released++;
				else
					slot->stats.cancelled++;
				bulkhead_unlink_entry(slot, entry);
			}
		}
		bulkhead_grant_waiters(slot, NULL);
		LWLockRelease(slot->lock);
		if (reaped > 0)
			ereport(LOG,
					(errmsg("bulkhead: freed %d permit entries of workload slot %d left by ended processes",
							reaped, i)));
	}
}

void
bulkhead_worker_main(Datum arg)
{
	uint64		loaded_request;
	TimestampTz last_load;
	TimestampTz last_reap = 0;
	TimestampTz last_decision = 0;
	bool		adaptive = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	before_shmem_exit(worker_unload_unless_connected, (Datum) 0);
	BackgroundWorkerInitializeConnection(bulkhead_database, NULL, 0);
	worker_connected = true;
	/* the worker's queries resolve nothing through a user's schema */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	bulkhead_shared->worker_procno = BULKHEAD_MY_PROCNO;
	before_shmem_exit(worker_exit, (Datum) 0);
	ereport(LOG,
			(errmsg("bulkhead worker started, reading workloads from database \"%s\"",
					bulkhead_database)));

	/* force a first load */
	loaded_request = pg_atomic_read_u64(&bulkhead_shared->config_requested) - 1;
	last_load = 0;

	for (;;)
	{
		uint64		requested = pg_atomic_read_u64(&bulkhead_shared->config_requested);
		int			poll_ms = RecoveryInProgress() ? BULKHEAD_POLL_STANDBY_MS :
		BULKHEAD_POLL_PRIMARY_MS;
		TimestampTz now = GetCurrentTimestamp();

		if (requested != loaded_request ||
			TimestampDifferenceExceeds(last_load, now, poll_ms))
		{
			loaded_request = requested;
			last_load = now;
			load_config();
		}
		if (TimestampDifferenceExceeds(last_reap, now, BULKHEAD_TICK_MS))
		{
			last_reap = now;
			reap_dead_backends();
		}
		adaptive = bulkhead_adaptive_sample();
		if (adaptive && TimestampDifferenceExceeds(last_decision, now, BULKHEAD_DECIDE_MS))
		{
			last_decision = now;
			bulkhead_adaptive_decide();
		}

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 adaptive ? BULKHEAD_SAMPLE_MS : BULKHEAD_TICK_MS,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}
