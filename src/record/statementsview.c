/*-------------------------------------------------------------------------
 *
 * statementsview.c
 *	  bulkhead_statements, the view: what admission did per statement and
 *	  workload (statements.c keeps it), read in bounded memory.
 *
 * The table may hold bulkhead.max_statements entries (up to INT_MAX / 2):
 * a read never allocates in proportion to it.  It copies a batch of
 * entries at a time under the table's lock (bulkhead_statements_copy, in
 * the order of their keys), makes their tuples after the lock is released,
 * and asks for the batch after the last key it made.  An entry made or
 * evicted between two batches is shown or not, as a read of
 * pg_stat_statements' table at another moment would; none is shown twice.
 * A reader sees the queryid and the memory figures of its own roles'
 * entries only, unless it may read all statistics (Reader, below).
 *
 * Owns no state.  Called by PostgreSQL's function manager; calls
 * statements.c and shmem.c.
 *
 *-------------------------------------------------------------------------
 */
#include "record/statementsview.h"
#include "shmem/shmem.h"

#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"	/* funcapi.h includes it only up to 18 */

PG_FUNCTION_INFO_V1(bulkhead_statements);
PG_FUNCTION_INFO_V1(bulkhead_statements_by_role);

#define STATEMENTS_BATCH	1000	/* entries copied per hold of the lock */
#define STATEMENTS_COLS_1_4	11
#define STATEMENTS_COLS		13	/* 1.5: userid and dbid appended */

/*
 * What the reader may see of a row: pg_stat_statements' rule.  The
 * queryid and the memory figures of the statements of a role whose
 * privileges it has (has_privs_of_role: itself, a role it inherits from),
 * or of every role with pg_read_all_stats (a superuser has both); NULL for
 * the others.  A request tells what the planner estimated for a table the
 * reader may not read, which pg_stats would hide; a queryid ties a row to
 * another role's statement, as pg_stat_statements does not.  The other
 * figures are the workload's, which bulkhead_stats shows to every role.
 */
typedef struct Reader
{
	Oid			reader;			/* the current user */
	bool		all;			/* it may read all statistics */
	Oid			last_userid;	/* the last row's role, and its answer */
	bool		last_shown;
} Reader;

static bool
reader_shown(Reader *r, Oid userid)
{
	if (r->all)
		return true;
	if (userid != r->last_userid)
	{
		r->last_userid = userid;
		r->last_shown = has_privs_of_role(r->reader, userid);
	}
	return r->last_shown;
}

static Datum
ms_datum(int64 usec)
{
	return Float8GetDatum((double) usec / 1000.0);
}

/* A row: 1.4's columns, then (ncols 13) userid and dbid */
static void
put_row(ReturnSetInfo *rsinfo, int ncols, Reader *r,
		const BulkheadStatementCopy *copy)
{
	const BulkheadStatementCounts *c = &copy->counts;
	bool		shown = reader_shown(r, copy->key.userid);
	Datum		values[STATEMENTS_COLS];
	bool		nulls[STATEMENTS_COLS] = {0};
	int			col = 0;

	nulls[col] = !shown;
	values[col++] = Int64GetDatum(copy->key.queryid);
	values[col++] = CStringGetTextDatum(copy->key.workload);
	values[col++] = Int64GetDatum(c->calls);
	values[col++] = Int64GetDatum(c->waits);
	values[col++] = ms_datum(c->wait_time_total_us);
	values[col++] = ms_datum(c->wait_time_max_us);
	values[col++] = Int64GetDatum(c->rejected);
	values[col++] = Int64GetDatum(c->timed_out);
	values[col++] = Int64GetDatum(c->moved_in);
	nulls[col] = !shown;
	values[col++] = Int64GetDatum(c->max_memory_requested);
	nulls[col] = !shown;
	values[col++] = Int64GetDatum(c->shrunk);
	if (ncols == STATEMENTS_COLS)
	{
		values[col++] = ObjectIdGetDatum(copy->key.userid);
		values[col++] = ObjectIdGetDatum(copy->key.dbid);
	}
	Assert(col == ncols);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * Every entry, a batch at a time, in the order of their keys, as the
 * current user may see it; ncols: the columns of the SQL function.
 */
static void
read_statements(FunctionCallInfo fcinfo, int ncols)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BulkheadStatementCopy *copies;
	BulkheadStatementKey after;
	Reader		r = {0};
	int			n;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != ncols)
		elog(ERROR, "bulkhead_statements: the function returns %d columns, not %d",
			 rsinfo->setDesc->natts, ncols);
	r.reader = GetUserId();
	r.all = has_privs_of_role(r.reader, ROLE_PG_READ_ALL_STATS);
	r.last_userid = InvalidOid;
	copies = palloc(sizeof(BulkheadStatementCopy) * 2 * STATEMENTS_BATCH);
	n = bulkhead_statements_copy(copies, STATEMENTS_BATCH, NULL);
	for (;;)
	{
		int			i;

		for (i = 0; i < n; i++)
			put_row(rsinfo, ncols, &r, &copies[i]);
		if (n < STATEMENTS_BATCH)
			break;
		after = copies[n - 1].key;
		n = bulkhead_statements_copy(copies, STATEMENTS_BATCH, &after);
	}
	pfree(copies);
}

/* bulkhead_statements() (1.4's view): 1.4's columns */
Datum
bulkhead_statements(PG_FUNCTION_ARGS)
{
	read_statements(fcinfo, STATEMENTS_COLS_1_4);
	return (Datum) 0;
}

/* bulkhead_statements_by_role() (1.5's view): userid and dbid appended */
Datum
bulkhead_statements_by_role(PG_FUNCTION_ARGS)
{
	read_statements(fcinfo, STATEMENTS_COLS);
	return (Datum) 0;
}
