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
 *
 * Owns no state.  Called by PostgreSQL's function manager; calls
 * statements.c and shmem.c.
 *
 *-------------------------------------------------------------------------
 */
#include "record/statementsview.h"
#include "shmem/shmem.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"	/* funcapi.h includes it only up to 18 */

PG_FUNCTION_INFO_V1(bulkhead_statements);

#define STATEMENTS_BATCH	1000	/* entries copied per hold of the lock */
#define STATEMENTS_COLS		11

static Datum
ms_datum(int64 usec)
{
	return Float8GetDatum((double) usec / 1000.0);
}

static void
put_row(ReturnSetInfo *rsinfo, const BulkheadStatementCopy *copy)
{
	const BulkheadStatementCounts *c = &copy->counts;
	Datum		values[STATEMENTS_COLS];
	bool		nulls[STATEMENTS_COLS] = {0};
	int			col = 0;

	values[col++] = Int64GetDatum(copy->key.queryid);
	values[col++] = CStringGetTextDatum(copy->key.workload);
	values[col++] = Int64GetDatum(c->calls);
	values[col++] = Int64GetDatum(c->waits);
	values[col++] = ms_datum(c->wait_time_total_us);
	values[col++] = ms_datum(c->wait_time_max_us);
	values[col++] = Int64GetDatum(c->rejected);
	values[col++] = Int64GetDatum(c->timed_out);
	values[col++] = Int64GetDatum(c->moved_in);
	values[col++] = Int64GetDatum(c->max_memory_requested);
	values[col++] = Int64GetDatum(c->shrunk);
	Assert(col == STATEMENTS_COLS);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * bulkhead_statements(): every entry, a batch at a time, in the order of
 * their keys.
 */
Datum
bulkhead_statements(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BulkheadStatementCopy *copies;
	BulkheadStatementKey after;
	int			n;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	copies = palloc(sizeof(BulkheadStatementCopy) * 2 * STATEMENTS_BATCH);
	n = bulkhead_statements_copy(copies, STATEMENTS_BATCH, NULL);
	for (;;)
	{
		int			i;

		for (i = 0; i < n; i++)
			put_row(rsinfo, &copies[i]);
		if (n < STATEMENTS_BATCH)
			break;
		after = copies[n - 1].key;
		n = bulkhead_statements_copy(copies, STATEMENTS_BATCH, &after);
	}
	pfree(copies);
	return (Datum) 0;
}
