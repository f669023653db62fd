/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The "bulkhead" background worker: loads bulkhead_workload into shared
 *	  memory, serves waiters when a limit grows, and frees the permits of
 *	  backends that are gone without releasing them.
 *
 * The worker connects to bulkhead.database.  It reads bulkhead_rule (rules.c)
 * with bulkhead_workload, in the same snapshot: only the extension's own
 * tables, found by OID (catalog.c), never a user's function.  It reloads
 * when a committed change asks for it (shared->config_requested, bumped at
 * commit by the table's trigger, and our latch), and also by polling: every
 * second on a hot standby, where changes arrive through WAL replay and fire
 * no trigger, and while a prepared transaction may hold a change (its
 * COMMIT PREPARED fires nothing either), and every ten seconds on a primary
 * as a safety net.
 *
 * A load that fails (a table locked for longer than lock_timeout, a
 * recovery conflict on a standby) leaves shared memory as it was and is
 * tried again at the next tick; the reaper and the adaptive limits go on
 * meanwhile.
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
/* on a standby, and while a prepared transaction may hold a change */
#define BULKHEAD_POLL_FAST_MS		1000
/* how long a load waits for a lock on a table before it gives up */
#define BULKHEAD_LOAD_LOCK_TIMEOUT	"100ms"

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

static void apply_config(WorkloadRow *rows, int nrows,
						 const BulkheadRuleList *rules, bool loaded);

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
	apply_config(NULL, 0, &no_rules, false);
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
	Datum		name;

	memset(row, 0, sizeof(WorkloadRow));
	/* NOT NULL in the table; the other columns read NULL as 0 */
	name = SPI_getbinval(tuple, desc, 1, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a row of table \"bulkhead_workload\" has no name")));
	strlcpy(row->name, TextDatumGetCString(name), NAMEDATALEN);
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
 * The columns read from bulkhead_workload, in the order of the query in
 * read_table; the last two are new in 1.1 (adaptive limits).
 */
static const struct
{
	const char *name;
	Oid			type;
}			workload_columns[] =
{
	{"name", TEXTOID},
	{"max_running", INT4OID},
	{"max_queued", INT4OID},
	{"queue_timeout", INTERVALOID},
	{"statement_timeout", INTERVALOID},
	{"lock_timeout", INTERVALOID},
	{"idle_timeout", INTERVALOID},
	{"mode", TEXTOID},
	{"roles", TEXTARRAYOID},
	{"adaptive", BOOLOID},
	{"min_running", INT4OID}
};

#define NUM_WORKLOAD_COLUMNS	((int) lengthof(workload_columns))
#define NUM_1_0_COLUMNS			(NUM_WORKLOAD_COLUMNS - 2)

/*
 * Has the extension's table the columns of 1.1's adaptive limit?  An
 * extension still at 1.0 (not updated yet) has not: its workloads are not
 * adaptive.  Every column read must have the type its version created.
 */
static bool
check_workload_columns(Oid relid)
{
	bool		adaptive;
	int			i;

	for (i = 0; i < NUM_1_0_COLUMNS; i++)
		(void) bulkhead_check_column(relid, workload_columns[i].name,
									 workload_columns[i].type, false);
	adaptive = bulkhead_check_column(relid, "adaptive", BOOLOID, true);
	if (adaptive)
		(void) bulkhead_check_column(relid, "min_running", INT4OID, false);
	return adaptive;
}

/*
 * Is a transaction prepared in this database?  One that changed a
 * configuration table is loaded only once COMMIT PREPARED made it visible,
 * so the worker polls while any is left (see catalog.c).  The caller is
 * connected to SPI and has a snapshot pushed.
 */
static bool
prepared_xacts_exist(void)
{
	char		query[256];
	bool		isnull;

	snprintf(query, sizeof(query),
			 "SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0"
			 " FROM pg_catalog.pg_prepared_xact() p"
			 " WHERE p.dbid OPERATOR(pg_catalog.=) '%u'::pg_catalog.oid",
			 MyDatabaseId);
	if (SPI_execute(query, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not look up the prepared transactions");
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
									  SPI_tuptable->tupdesc, 1, &isnull));
}

/* The worker cleared shared->prepared_change and has not yet looked again */
static bool prepared_check_pending = false;

/*
 * Read the table (if the extension exists in this database) into rows, and
 * the rules into rules_out, allocated in the caller's memory context.
 * Returns the number of rows.
 *
 * Only the extension's own tables are read (members of the extension,
 * found by OID, not by name), and only after their columns were checked to
 * have the types the extension's version created.  The queries run under
 * search_path = pg_catalog, pg_temp and name every function, operator and
 * type with its schema besides, so that nothing a user made is ever run
 * here: the worker runs as the bootstrap superuser.
 */
static int
read_table(WorkloadRow **rows_out, BulkheadRuleList *rules_out)
{
	MemoryContext caller = CurrentMemoryContext;
	WorkloadRow *rows = NULL;
	int			nrows = 0;
	static bool warned_missing = false;
	BulkheadExtension ext;
	int			i;

	rules_out->nrules = 0;
	rules_out->rules = NULL;
	SPI_connect();

	/*
	 * A change prepared, then committed: cleared first, so that a PREPARE
	 * after the look sets it again; looked at before the snapshot that reads
	 * the tables is taken, so that a COMMIT PREPARED that ended before the
	 * look is in it (the transaction is read committed, see below).
	 */
	if (pg_atomic_exchange_u32(&bulkhead_shared->prepared_change, 0) != 0)
	{
		prepared_check_pending = true;
		PushActiveSnapshot(GetTransactionSnapshot());
		if (prepared_xacts_exist())
			pg_atomic_write_u32(&bulkhead_shared->prepared_change, 1);
		PopActiveSnapshot();
		prepared_check_pending = false;
	}

	PushActiveSnapshot(GetTransactionSnapshot());

	if (!bulkhead_find_extension(&ext))
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
		Oid			relid = bulkhead_extension_table(&ext, "bulkhead_workload");
		Oid			types[NUM_WORKLOAD_COLUMNS];
		bool		adaptive;
		StringInfoData query;

		warned_missing = false;
		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("extension \"bulkhead\" has no table \"bulkhead_workload\""),
					 errhint("Drop and re-create the extension.")));
		adaptive = check_workload_columns(relid);
		for (i = 0; i < NUM_WORKLOAD_COLUMNS; i++)
			types[i] = workload_columns[i].type;
		/* the queries' intervals are read as float8 */
		for (i = 3; i <= 6; i++)
			types[i] = FLOAT8OID;
		types[7] = BOOLOID;

		initStringInfo(&query);
		appendStringInfo(&query,
						 "SELECT name, max_running, max_queued,"
						 " pg_catalog.ceil(EXTRACT(epoch FROM queue_timeout) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.float8,"
						 " pg_catalog.ceil(EXTRACT(epoch FROM statement_timeout) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8,"
						 " pg_catalog.ceil(EXTRACT(epoch FROM lock_timeout) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8,"
						 " pg_catalog.ceil(EXTRACT(epoch FROM idle_timeout) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8,"
						 " mode OPERATOR(pg_catalog.=) 'shadow'::pg_catalog.text, roles, %s"
						 " FROM %s ORDER BY name",
						 adaptive ? "adaptive, min_running" :
						 "false, 1",
						 bulkhead_qualified_table_name(relid));
		if (SPI_execute(query.data, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read table \"bulkhead_workload\"");
		bulkhead_check_result_types(SPI_tuptable->tupdesc, types,
									NUM_WORKLOAD_COLUMNS, "bulkhead_workload");

		nrows = (int) SPI_processed;
		rows = MemoryContextAlloc(caller, sizeof(WorkloadRow) * Max(nrows, 1));
		for (i = 0; i < nrows; i++)
			read_row(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, &rows[i]);
		bulkhead_rules_read(&ext, caller, rules_out);
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
 * Define the workloads of rows that placed[] does not mark yet: update
 * those that have a slot, put new ones into free slots, and mark them in
 * placed[].  Returns how many found no free slot.  Caller holds dir_lock
 * exclusively.
 */
static int
define_rows(WorkloadRow *rows, int nrows, bool *placed)
{
	BulkheadShared *shared = bulkhead_shared;
	int			skipped = 0;
	int			r;

	for (r = 0; r < nrows; r++)
	{
		int			s;
		BulkheadSlot *slot;

		if (placed[r])
			continue;
		if ((s = slot_of(rows[r].name)) < 0 && (s = free_slot()) < 0)
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
		placed[r] = true;
	}
	return skipped;
}

/*
 * Mark undefined the workloads that are not among rows: they admit no one
 * new, and a slot is freed once its last permit and waiter are gone.
 * seen[] has room for every slot.  Caller holds dir_lock exclusively.
 */
static void
undefine_others(WorkloadRow *rows, int nrows, bool *seen)
{
	BulkheadShared *shared = bulkhead_shared;
	int			r;
	int			i;

	memset(seen, 0, sizeof(bool) * shared->nslots);
	for (r = 0; r < nrows; r++)
	{
		int			s = slot_of(rows[r].name);

		if (s >= 0)
			seen[s] = true;
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
}

/*
 * Make shared memory match the rows and the rules, in an order that never
 * leaves a rule naming a workload that is not defined, so that a rename
 * (ON UPDATE CASCADE) or a removal of a workload with its rules gives no
 * classified session a 42704: first the workloads of rows are defined (the
 * new ones too), then the rules replaced, then the workloads that are gone
 * undefined.  Rows that found no free slot take, last, the slots that this
 * load freed.  loaded says whether the rows are the table's contents
 * (false: the table could not be read, nothing is defined).  Nothing here
 * throws while a lock is held.
 */
static void
apply_config(WorkloadRow *rows, int nrows, const BulkheadRuleList *rules,
			 bool loaded)
{
	BulkheadShared *shared = bulkhead_shared;
	bool	   *placed = palloc0(sizeof(bool) * Max(nrows, 1));
	bool	   *seen = palloc(sizeof(bool) * shared->nslots);
	int			skipped;

	LWLockAcquire(shared->dir_lock, LW_EXCLUSIVE);
	skipped = define_rows(rows, nrows, placed);
	LWLockRelease(shared->dir_lock);

	bulkhead_rules_apply(rules);

	LWLockAcquire(shared->dir_lock, LW_EXCLUSIVE);
	undefine_others(rows, nrows, seen);
	if (skipped > 0)
		skipped = define_rows(rows, nrows, placed);
	shared->config_loaded = loaded;
	shared->rows_pending = skipped > 0;
	LWLockRelease(shared->dir_lock);

	if (skipped > 0)
		ereport(WARNING,
				(errmsg("bulkhead: %d workloads were not loaded: all %d workload slots are in use",
						skipped, shared->nslots),
				 errdetail("Slots of deleted workloads are freed when their last permit is released."),
				 errhint("Raise \"bulkhead.max_workloads\" and restart the server.")));
	pfree(placed);
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
	apply_config(rows, nrows, &rules, true);
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* The last load failed: the next one is tried at the next tick */
static bool load_failing = false;

/*
 * Load the tables; on an error, keep what shared memory holds and return
 * false.  The worker's other duties (the reaper, adaptive limits) must not
 * wait for the load: a lock on a table makes the load fail after
 * lock_timeout (set at start) instead of stopping the worker, and the error
 * is caught here (as autovacuum does for a table) rather than making the
 * worker exit.  The failure is logged once until a load succeeds again.
 */
static bool
try_load_config(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool loaded = true;

	PG_TRY();
	{
		load_config();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		MemoryContextSwitchTo(cxt);
		/* the look at prepared transactions is done again next time */
		if (prepared_check_pending)
		{
			pg_atomic_write_u32(&bulkhead_shared->prepared_change, 1);
			prepared_check_pending = false;
		}
		pgstat_report_activity(STATE_IDLE, NULL);
		if (!load_failing)
			ereport(LOG,
					(errcode(edata->sqlerrcode),
					 errmsg("bulkhead: could not load the workload definitions: %s",
							edata->message),
					 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
					 errhint("The definitions loaded before stay in force; the worker tries again every second.")));
		FreeErrorData(edata);
		load_failing = true;
		loaded = false;
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();

	if (loaded && load_failing)
	{
		ereport(LOG,
				(errmsg("bulkhead: the workload definitions were loaded again")));
		load_failing = false;
	}
	return loaded;
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
	bool		load_pending = true;	/* a load was asked for, not done */
	TimestampTz last_load = 0;
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
	/* a lock on a table fails the load, which is tried again (see above) */
	SetConfigOption("lock_timeout", BULKHEAD_LOAD_LOCK_TIMEOUT, PGC_SUSET,
					PGC_S_OVERRIDE);
	/* each snapshot taken sees what committed before it (read_table) */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);

	bulkhead_shared->worker_procno = BULKHEAD_MY_PROCNO;
	before_shmem_exit(worker_exit, (Datum) 0);
	ereport(LOG,
			(errmsg("bulkhead worker started, reading workloads from database \"%s\"",
					bulkhead_database)));

	loaded_request = pg_atomic_read_u64(&bulkhead_shared->config_requested);

	/*
	 * A transaction prepared before a restart (or crash, or on the primary
	 * this standby follows) set no flag in this shared memory, yet its
	 * COMMIT PREPARED fires nothing either: the first load looks for
	 * prepared transactions, and the worker polls fast while any is left.
	 */
	pg_atomic_write_u32(&bulkhead_shared->prepared_change, 1);

	for (;;)
	{
		uint64		requested = pg_atomic_read_u64(&bulkhead_shared->config_requested);
		bool		poll_fast = RecoveryInProgress() ||
			pg_atomic_read_u32(&bulkhead_shared->prepared_change) != 0;
		int			poll_ms = poll_fast ? BULKHEAD_POLL_FAST_MS :
		BULKHEAD_POLL_PRIMARY_MS;
		TimestampTz now = GetCurrentTimestamp();

		if (requested != loaded_request)
		{
			loaded_request = requested;
			load_pending = true;
		}
		/* after a failure, no more than one try per tick */
		if ((load_pending &&
			 (!load_failing ||
			  TimestampDifferenceExceeds(last_load, now, BULKHEAD_TICK_MS))) ||
			TimestampDifferenceExceeds(last_load, now, poll_ms))
		{
			last_load = now;
			load_pending = !try_load_config();
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
