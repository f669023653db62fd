/*-------------------------------------------------------------------------
 *
 * memviews.c
 *	  Memory grants (1.4) as the views show them: each workload's figures
 *	  (joined into bulkhead_stats), each backend's grant (joined into
 *	  bulkhead_activity) and the server's (bulkhead_memory).
 *
 * The functions here keep the columns of bulkhead_stats() and
 * bulkhead_activity() those of 1.3, so that the update replaces the views
 * (keeping their privileges) rather than dropping them.  A workload's
 * cumulative figures are read under its slot's lock, what is granted now
 * under grants.c's: a row is never half-made, but the two may be read a
 * moment apart.
 *
 * Owns no state.  Called by PostgreSQL's function manager only; calls
 * grantstate.c, stats.c and disclose.c.
 *
 *-------------------------------------------------------------------------
 */
#include "views/memviews.h"
#include "permit/permitfuncs.h"
#include "acl/disclose.h"
#include "memory/grants.h"
#include "workload/slot.h"
#include "memory/grantstate.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"	/* funcapi.h includes it only up to 18 */

PG_FUNCTION_INFO_V1(bulkhead_memory_stats);
PG_FUNCTION_INFO_V1(bulkhead_memory_activity);
PG_FUNCTION_INFO_V1(bulkhead_memory);

/* The p99 of a histogram of waits in ms; NULL when none was measured */
static Datum
p99_ms(const BulkheadHistogram *hist, bool *isnull)
{
	double		usec = bulkhead_hist_percentile(hist, 0.99);

	*isnull = usec < 0;
	return Float8GetDatum(usec / 1000.0);
}

/*
 * bulkhead_memory_stats(): per defined workload, its max_memory as
 * written, the memory granted to its (subtree's) running statements now,
 * the statements waiting now, and its cumulative waits, shrunk statements
 * and p99 of the waits.
 */
Datum
bulkhead_memory_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BulkheadHistogram *hist = palloc(sizeof(BulkheadHistogram));
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		char		name[NAMEDATALEN];
		char		limit[BULKHEAD_CAP_TEXTLEN];
		uint64		waits;
		uint64		shrunk;
		BulkheadMemFigures now;
		Datum		values[7];
		bool		nulls[7] = {0};

		bulkhead_slot_lock(slot, LW_SHARED);
		if (!slot->in_use || !slot->defined)
		{
			LWLockRelease(slot->lock);
			continue;
		}
		strlcpy(name, slot->name, NAMEDATALEN);
		strlcpy(limit, slot->config.max_memory_text, sizeof(limit));
		waits = slot->stats.memory_waits;
		shrunk = slot->stats.memory_shrunk;
		memcpy(hist, &slot->stats.memory_wait_hist, sizeof(BulkheadHistogram));
		LWLockRelease(slot->lock);
		bulkhead_grants_level(i, name, &now);

		values[0] = CStringGetTextDatum(name);
		nulls[1] = limit[0] == '\0';
		values[1] = nulls[1] ? (Datum) 0 : CStringGetTextDatum(limit);
		values[2] = Int64GetDatum(now.granted);
		values[3] = Int32GetDatum(now.waiting);
		values[4] = Int64GetDatum((int64) waits);
		values[5] = Int64GetDatum((int64) shrunk);
		values[6] = p99_ms(hist, &nulls[6]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(hist);
	return (Datum) 0;
}

/*
 * bulkhead_memory_activity(): per backend with a grant or a request under
 * way, the workload it is charged to (NULL: the server's limit only), what
 * its statements requested and were granted, and whether it waits; only
 * the backends the current user may see, as bulkhead_activity's.
 */
Datum
bulkhead_memory_activity(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			max = bulkhead_shared ? bulkhead_shared->nbackends : 0;
	BulkheadMemBackendRow *rows;
	bool		see_all;
	int			n;
	int			r;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rows = palloc(sizeof(BulkheadMemBackendRow) * Max(max, 1));
	n = bulkhead_grants_backends(rows, max);
	see_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	for (r = 0; r < n; r++)
	{
		Datum		values[5];
		bool		nulls[5] = {0};

		if (!bulkhead_may_see_backend(rows[r].pid, rows[r].procno, see_all))
			continue;
		values[0] = Int32GetDatum(rows[r].pid);
		nulls[1] = rows[r].workload[0] == '\0';
		values[1] = nulls[1] ? (Datum) 0 : CStringGetTextDatum(rows[r].workload);
		values[2] = Int64GetDatum(rows[r].requested);
		values[3] = Int64GetDatum(rows[r].granted);
		values[4] = BoolGetDatum(rows[r].waiting);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(rows);
	return (Datum) 0;
}

/*
 * bulkhead_memory(): the server's level, one row: bulkhead.max_memory
 * (NULL when off), the memory granted to every statement of the server
 * now, the statements waiting now, and the cumulative waits, shrunk
 * statements and p99 of the waits since bulkhead_stats_reset().
 */
Datum
bulkhead_memory(PG_FUNCTION_ARGS)
{
	BulkheadMemServer *server = palloc(sizeof(BulkheadMemServer));
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {0};

	bulkhead_check_loaded();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	bulkhead_grants_server(server);
	nulls[0] = server->now.max_memory < 0;
	values[0] = nulls[0] ? (Datum) 0 :
		CStringGetTextDatum(GetConfigOptionByName("bulkhead.max_memory", NULL, false));
	values[1] = Int64GetDatum(server->now.granted);
	values[2] = Int32GetDatum(server->now.waiting);
	values[3] = Int64GetDatum((int64) server->waits);
	values[4] = Int64GetDatum((int64) server->shrunk);
	values[5] = p99_ms(&server->wait_hist, &nulls[5]);
	values[6] = TimestampTzGetDatum(server->stats_reset);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}
