/*-------------------------------------------------------------------------
 *
 * tables.c
 *	  Reading the configuration tables, bulkhead_workload and bulkhead_rule,
 *	  for the worker's load (loader.c).
 *
 * Only the extension's own tables are read (members of the extension,
 * found by OID, not by name: catalog.c), and only after their columns were
 * checked to have the types the extension's version created.  The queries
 * run under search_path = pg_catalog, pg_temp and name every function,
 * operator and type with its schema besides, so that nothing a user made
 * is ever run here: the worker runs as the bootstrap superuser.
 *
 * Owns no shared state; takes (and may give back) the note of a prepared
 * change through shmem.c.  Called by loader.c only.
 *
 *-------------------------------------------------------------------------
 */
#include "config/tables.h"
#include "config/catalog.h"
#include "guards/capsparse.h"
#include "memory/memreq.h"
#include "workload/importance.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/inet.h"
#include "utils/snapmgr.h"

/* A text column into a name-sized buffer; false if NULL */
static bool
text_column(HeapTuple tuple, TupleDesc desc, int col, char *buf)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		return false;
	strlcpy(buf, TextDatumGetCString(d), NAMEDATALEN);
	return true;
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

/* Microseconds of an interval column > 0: NULL -> 0, else at least 1 */
static int64
positive_us_column(HeapTuple tuple, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		return 0;
	return (int64) Max(Min(DatumGetFloat8(d), (double) (PG_INT64_MAX / 2)), 1.0);
}

static void
read_row(HeapTuple tuple, TupleDesc desc, WorkloadRow *row)
{
	BulkheadConfig *c = &row->config;
	bool		isnull;
	Datum		roles;
	Datum		name;
	char		action[NAMEDATALEN];

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
	(void) text_column(tuple, desc, 12, c->parent);
	c->reserved = DatumGetInt32(SPI_getbinval(tuple, desc, 13, &isnull));
	c->weight = DatumGetInt32(SPI_getbinval(tuple, desc, 14, &isnull));
	c->max_hold_us = positive_us_column(tuple, desc, 15);	/* 0: no limit */
	if (text_column(tuple, desc, 16, action))
		c->on_max_hold = strcmp(action, "cancel") == 0 ? BULKHEAD_HOLD_CANCEL :
			strcmp(action, "terminate") == 0 ? BULKHEAD_HOLD_TERMINATE :
			strcmp(action, "move") == 0 ? BULKHEAD_HOLD_MOVE : BULKHEAD_HOLD_LOG;
	(void) text_column(tuple, desc, 17, c->move_to);
	c->max_bypass_us = positive_us_column(tuple, desc, 18);	/* 0: FIFO */
	c->max_running_per_key = DatumGetInt32(SPI_getbinval(tuple, desc, 19, &isnull));
	if (isnull)
		c->max_running_per_key = 0; /* no cap */
	c->max_queued_per_key = DatumGetInt32(SPI_getbinval(tuple, desc, 20, &isnull));
	if (isnull)
		c->max_queued_per_key = -1; /* no cap */

	/* 1.3: the lane's settings (checked when written; a bad one is left out) */
	{
		Datum		settings = SPI_getbinval(tuple, desc, 21, &isnull);

		if (!isnull)
			bulkhead_caps_parse(DatumGetArrayTypeP(settings), row->name, WARNING,
								&c->caps, c->cap_text);
	}

	/* 1.4: memory grants (a bad max_memory, refused when written: none) */
	c->max_memory = -1;
	if (text_column(tuple, desc, 22, action) &&
		bulkhead_memreq_parse_limit(action, row->name, WARNING, &c->max_memory))
		strlcpy(c->max_memory_text, action, BULKHEAD_CAP_TEXTLEN);
	name = SPI_getbinval(tuple, desc, 23, &isnull);	/* memory_timeout */
	c->memory_timeout_us = isnull ? -1 :
		(int64) Min(DatumGetFloat8(name), (double) (PG_INT64_MAX / 2));

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
 * read_table; adaptive and min_running are new in 1.1 (adaptive limits),
 * the next nine in 1.2 (shared budgets, runaway holders, max_bypass,
 * tenants), settings in 1.3 (lanes), max_memory and memory_timeout in
 * 1.4 (memory grants).
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
	{"min_running", INT4OID},
	{"parent", TEXTOID},
	{"reserved", INT4OID},
	{"weight", INT4OID},
	{"max_hold", INTERVALOID},
	{"on_max_hold", TEXTOID},
	{"move_to", TEXTOID},
	{"max_bypass", INTERVALOID},
	{"max_running_per_key", INT4OID},
	{"max_queued_per_key", INT4OID},
	{"settings", TEXTARRAYOID},
	{"max_memory", TEXTOID},
	{"memory_timeout", INTERVALOID}
};

#define NUM_WORKLOAD_COLUMNS	((int) lengthof(workload_columns))
/* where each version's columns begin in workload_columns[] (1.0's at 0) */
#define NUM_1_0_COLUMNS			9	/* adaptive: 1.1's first */
#define FIRST_1_2_COLUMN		11	/* parent */
#define FIRST_1_3_COLUMN		20	/* settings */

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

	Assert(strcmp(workload_columns[NUM_1_0_COLUMNS].name, "adaptive") == 0);
	Assert(strcmp(workload_columns[FIRST_1_2_COLUMN].name, "parent") == 0);
	Assert(strcmp(workload_columns[FIRST_1_3_COLUMN].name, "settings") == 0);
	for (i = 0; i < NUM_1_0_COLUMNS; i++)
		(void) bulkhead_check_column(relid, workload_columns[i].name,
									 workload_columns[i].type, false);
	adaptive = bulkhead_check_column(relid, "adaptive", BOOLOID, true);
	if (adaptive)
		(void) bulkhead_check_column(relid, "min_running", INT4OID, false);
	return adaptive;
}

/*
 * Has the extension's table the columns of 1.2 (shared budgets, runaway
 * holders, max_bypass, tenants)?  One still at 1.1 has not: its workloads
 * are all roots, with no max_hold, served in strict FIFO order, with no cap
 * per key.
 */
static bool
check_1_2_columns(Oid relid)
{
	int			i;

	if (!bulkhead_check_column(relid, "parent", TEXTOID, true))
		return false;
	for (i = FIRST_1_2_COLUMN + 1; i < FIRST_1_3_COLUMN; i++)
		(void) bulkhead_check_column(relid, workload_columns[i].name,
									 workload_columns[i].type, false);
	return true;
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

/* The worker took the note of a prepared change and has not yet looked */
static bool prepared_check_pending = false;

/*
 * A change prepared, then committed: the note is cleared first, so that a
 * PREPARE after the look sets it again; looked at before the snapshot that
 * reads the tables is taken, so that a COMMIT PREPARED that ended before
 * the look is in it (the transaction is read committed, see worker.c).
 * The caller is connected to SPI.
 */
static void
look_at_prepared_changes(void)
{
	if (!bulkhead_take_prepared_change())
		return;
	prepared_check_pending = true;
	PushActiveSnapshot(GetTransactionSnapshot());
	if (prepared_xacts_exist())
		bulkhead_note_prepared_change();
	PopActiveSnapshot();
	prepared_check_pending = false;
}

/*
 * A rule's min_cost and command (columns 7 and 8; 1.3), checked when
 * written: a kind not known here matches nothing.
 */
static void
read_statement_columns(HeapTuple tuple, TupleDesc desc, BulkheadRule *rule)
{
	static const char *const kinds[] = {"select", "insert", "update", "delete",
	"merge", "utility"};
	bool		isnull;
	Datum		d;

	d = SPI_getbinval(tuple, desc, 7, &isnull);
	if (!isnull)
	{
		rule->has_min_cost = true;
		rule->min_cost = DatumGetFloat8(d);
	}
	d = SPI_getbinval(tuple, desc, 8, &isnull);
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		int			i;
		int			k;

		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &nulls, &n);
		for (i = 0; i < n; i++)
		{
			char	   *kind;

			if (nulls[i])
				continue;
			kind = TextDatumGetCString(elems[i]);
			for (k = 0; k < (int) lengthof(kinds); k++)
				if (strcmp(kind, kinds[k]) == 0)
					rule->commands |= 1 << k;
		}
		/* an array with no kind known matches no statement */
		if (rule->commands == 0)
		{
			rule->has_min_cost = true;
			rule->min_cost = get_float8_infinity();
		}
	}
}

/* One row of bulkhead_rule, as the query below reads it */
static void
read_rule(HeapTuple tuple, TupleDesc desc, BulkheadRule *rule)
{
	bool		isnull;
	Datum		addr;
	char		buf[NAMEDATALEN];

	rule->position = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	rule->has_role = text_column(tuple, desc, 2, rule->role);
	rule->has_database = text_column(tuple, desc, 3, rule->database);
	rule->has_application_name = text_column(tuple, desc, 4,
											 rule->application_name);
	addr = SPI_getbinval(tuple, desc, 5, &isnull);
	if (!isnull)
	{
		inet	   *value = DatumGetInetP(addr);	/* 4-byte header */

		if (VARSIZE(value) > sizeof(inet))
			elog(ERROR, "unexpected size of an inet value");
		memcpy(&rule->client_addr, value, VARSIZE(value));
		rule->has_client_addr = true;
	}
	(void) text_column(tuple, desc, 6, rule->workload);
	read_statement_columns(tuple, desc, rule);
	/* 1.5's importance (checked when written; an unknown one: NULL) */
	rule->importance = text_column(tuple, desc, 9, buf) ?
		bulkhead_importance_parse(buf) : BULKHEAD_IMPORTANCE_UNSET;
}

/* The columns read from bulkhead_rule, in the order of the query below */
static const struct
{
	const char *name;
	Oid			type;
}			rule_columns[] =
{
	{"position", INT4OID},
	{"role", TEXTOID},
	{"database", TEXTOID},
	{"application_name", TEXTOID},
	{"client_addr", INETOID},
	{"workload", TEXTOID},
	{"min_cost", FLOAT8OID},
	{"command", TEXTARRAYOID},
	{"importance", TEXTOID}
};

/* the columns checked for every version; then 1.3's two, 1.5's one */
#define NUM_RULE_COLUMNS	((int) lengthof(rule_columns))
#define NUM_1_1_RULE_COLUMNS	(NUM_RULE_COLUMNS - 3)

/*
 * Read bulkhead_rule of the extension, if it has one: only its own table
 * (a member of the extension, from 1.1 on), so that a relation of that name
 * made by someone else next to a 1.0 install is never read, nor a function
 * of theirs run; and only columns of the types 1.1 created.  The caller is
 * connected to SPI, with the snapshot it read bulkhead_workload with;
 * out->rules is allocated in cxt, zeroed, so that two equal sets compare
 * equal bytewise.
 */
static void
read_rules(const BulkheadExtension *ext, MemoryContext cxt,
		   BulkheadRuleList *out)
{
	static bool warned_truncated = false;
	StringInfoData query;
	Oid			relid;
	Oid			types[NUM_RULE_COLUMNS];
	bool		statement;
	int			n;
	int			i;

	out->nrules = 0;
	out->rules = NULL;

	if (!bulkhead_version_at_least(ext, 1, 1))
		return;					/* 1.0 has no rules */
	relid = bulkhead_extension_table(ext, "bulkhead_rule");
	if (!OidIsValid(relid))
		return;

	for (i = 0; i < NUM_RULE_COLUMNS; i++)
	{
		if (i < NUM_1_1_RULE_COLUMNS)
			(void) bulkhead_check_column(relid, rule_columns[i].name,
										 rule_columns[i].type, false);
		types[i] = rule_columns[i].type;
	}

	/* 1.3: statement rules */
	statement = bulkhead_check_column(relid, "min_cost", FLOAT8OID, true);
	if (statement)
		(void) bulkhead_check_column(relid, "command", TEXTARRAYOID, false);

	/* the columns' types are all of pg_catalog: their ordering is too */
	initStringInfo(&query);
	appendStringInfo(&query,
					 "SELECT position, role, database, application_name,"
					 " client_addr, workload, %s, %s FROM %s ORDER BY position",
					 statement ? "min_cost, command" :
					 "NULL::pg_catalog.float8, NULL::pg_catalog.text[]",
					 bulkhead_check_column(relid, "importance", TEXTOID, true) ?
					 "importance" : "NULL::pg_catalog.text",	/* 1.5 */
					 bulkhead_qualified_table_name(relid));
	if (SPI_execute(query.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read table \"bulkhead_rule\"");
	bulkhead_check_result_types(SPI_tuptable->tupdesc, types,
								NUM_RULE_COLUMNS, "bulkhead_rule");

	n = (int) SPI_processed;
	if (n > bulkhead_max_rules)
	{
		/* only where the triggers did not run: a standby set lower */
		if (!warned_truncated)
			ereport(WARNING,
					(errmsg("bulkhead: only the first %d of %d rules were loaded",
							bulkhead_max_rules, n),
					 errhint("Raise \"bulkhead.max_rules\" and restart the server.")));
		warned_truncated = true;
		n = bulkhead_max_rules;
	}
	else
		warned_truncated = false;

	out->rules = MemoryContextAllocZero(cxt, sizeof(BulkheadRule) * Max(n, 1));
	for (i = 0; i < n; i++)
		read_rule(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, &out->rules[i]);
	out->nrules = n;
}

/*
 * Read the extension's bulkhead_workload (its own table, its columns of
 * the types its version created) into *rows_out, allocated in cxt.
 * Returns the number of rows.  The caller is connected to SPI, with a
 * snapshot pushed.
 */
static int
read_workloads(const BulkheadExtension *ext, MemoryContext cxt,
			   WorkloadRow **rows_out)
{
	Oid			relid = bulkhead_extension_table(ext, "bulkhead_workload");
	Oid			types[NUM_WORKLOAD_COLUMNS];
	bool		adaptive;
	bool		budgets;
	bool		lanes;
	bool		memory;
	StringInfoData query;
	WorkloadRow *rows;
	int			nrows;
	int			i;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("extension \"bulkhead\" has no table \"bulkhead_workload\""),
				 errhint("Drop and re-create the extension.")));
	adaptive = check_workload_columns(relid);
	budgets = check_1_2_columns(relid);
	lanes = bulkhead_check_column(relid, "settings", TEXTARRAYOID, true);
	memory = bulkhead_check_column(relid, "max_memory", TEXTOID, true);
	if (memory)
		(void) bulkhead_check_column(relid, "memory_timeout", INTERVALOID, false);
	for (i = 0; i < NUM_WORKLOAD_COLUMNS; i++)
		types[i] = workload_columns[i].type;
	/* the queries' intervals are read as float8 */
	for (i = 3; i <= 6; i++)
		types[i] = FLOAT8OID;
	types[7] = BOOLOID;
	types[14] = FLOAT8OID;		/* max_hold */
	types[17] = FLOAT8OID;		/* max_bypass */
	types[22] = FLOAT8OID;		/* memory_timeout */

	initStringInfo(&query);
	appendStringInfo(&query,
					 "SELECT name, max_running, max_queued,"
					 " pg_catalog.ceil(EXTRACT(epoch FROM queue_timeout) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.float8,"
					 " pg_catalog.ceil(EXTRACT(epoch FROM statement_timeout) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8,"
					 " pg_catalog.ceil(EXTRACT(epoch FROM lock_timeout) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8,"
					 " pg_catalog.ceil(EXTRACT(epoch FROM idle_timeout) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8,"
					 " mode OPERATOR(pg_catalog.=) 'shadow'::pg_catalog.text, roles, %s, %s, %s, %s"
					 " FROM %s ORDER BY name",
					 adaptive ? "adaptive, min_running" :
					 "false, 1",
					 budgets ? "parent, reserved, weight,"
					 " pg_catalog.ceil(EXTRACT(epoch FROM max_hold) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.float8,"
					 " on_max_hold, move_to,"
					 " pg_catalog.ceil(EXTRACT(epoch FROM max_bypass) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.float8,"
					 " max_running_per_key, max_queued_per_key" :
					 "NULL::pg_catalog.text, 0, 100, NULL::pg_catalog.float8,"
					 " 'log'::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.float8,"
					 " NULL::pg_catalog.int4, NULL::pg_catalog.int4",
					 lanes ? "settings" : "NULL::pg_catalog.text[]",
					 memory ? "max_memory,"
					 " pg_catalog.ceil(EXTRACT(epoch FROM memory_timeout) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.float8" :
					 "NULL::pg_catalog.text, NULL::pg_catalog.float8",
					 bulkhead_qualified_table_name(relid));
	if (SPI_execute(query.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read table \"bulkhead_workload\"");
	bulkhead_check_result_types(SPI_tuptable->tupdesc, types,
								NUM_WORKLOAD_COLUMNS, "bulkhead_workload");

	nrows = (int) SPI_processed;
	rows = MemoryContextAlloc(cxt, sizeof(WorkloadRow) * Max(nrows, 1));
	for (i = 0; i < nrows; i++)
		read_row(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, &rows[i]);
	*rows_out = rows;
	return nrows;
}

/*
 * Read the table (if the extension exists in this database) into rows, and
 * the rules into rules_out, allocated in the caller's memory context.
 * Returns the number of rows.  Only the extension's own tables, their
 * columns checked first (see the header).
 */
int
bulkhead_read_tables(WorkloadRow **rows_out, BulkheadRuleList *rules_out)
{
	MemoryContext caller = CurrentMemoryContext;
	WorkloadRow *rows = NULL;
	int			nrows = 0;
	static bool warned_missing = false;
	BulkheadExtension ext;

	rules_out->nrules = 0;
	rules_out->rules = NULL;
	SPI_connect();

	look_at_prepared_changes();

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
		warned_missing = false;
		nrows = read_workloads(&ext, caller, &rows);
		read_rules(&ext, caller, rules_out);
	}

	SPI_finish();
	PopActiveSnapshot();
	*rows_out = rows;
	return nrows;
}

/*
 * A load failed (its transaction aborted): a look at the prepared
 * transactions that did not finish is done again next time.
 */
void
bulkhead_tables_read_failed(void)
{
	if (prepared_check_pending)
	{
		bulkhead_note_prepared_change();
		prepared_check_pending = false;
	}
}
