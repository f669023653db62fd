/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The trigger on bulkhead_workload: changes are accepted only in
 *	  bulkhead.database and up to bulkhead.max_workloads rows, and a
 *	  committed change wakes the worker (never a rolled-back one).
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"

#include "commands/dbcommands.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

PG_FUNCTION_INFO_V1(bulkhead_workload_changed);

static void
check_database(void)
{
	char	   *current = get_database_name(MyDatabaseId);

	if (current == NULL || strcmp(current, bulkhead_database) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("bulkhead workloads can only be changed in database \"%s\"",
						bulkhead_database),
				 errdetail("The setting \"bulkhead.database\" names the database whose bulkhead_workload table defines the workloads; this is database \"%s\".",
						   current ? current : "?"),
				 errhint("Connect to database \"%s\" to change workloads.",
						 bulkhead_database)));
}

static void
check_row_count(Relation rel)
{
	char	   *query;
	int64		rows;
	bool		isnull;

	query = psprintf("SELECT count(*) FROM %s",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
	SPI_connect();
	if (SPI_execute(query, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not count the rows of bulkhead_workload");
	rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();

	if (rows > bulkhead_max_workloads)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many bulkhead workloads"),
				 errdetail("bulkhead_workload would hold %lld rows; shared memory has room for %d.",
						   (long long) rows, bulkhead_max_workloads),
				 errhint("Raise \"bulkhead.max_workloads\" and restart the server.")));
}

/* BEFORE and AFTER ... FOR EACH STATEMENT trigger on bulkhead_workload */
Datum
bulkhead_workload_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("bulkhead_workload_changed() must be called as a statement trigger")));
	bulkhead_check_loaded();

	if (TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		check_database();
	else
	{
		if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
			TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
			check_row_count(trigdata->tg_relation);
		bulkhead_request_reload_at_commit();
	}
	return PointerGetDatum(NULL);
}
