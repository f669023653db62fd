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

#include "access/tableam.h"
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/trigger.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "storage/lmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

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

/*
 * After an INSERT or UPDATE: refuse more rows than shared memory has slots
 * for.  Writers are serialised (ShareUpdateExclusiveLock conflicts with
 * itself, not with the writers' RowExclusiveLock, and is held to commit),
 * and the rows are counted with the latest snapshot, so that two concurrent
 * inserts cannot both see room for one more, whatever the isolation level.
 * The count is a plain scan: it runs no SQL, so neither the caller's
 * search_path nor its privileges come into play.
 */
static void
check_row_count(Relation rel)
{
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *tuple;
	int64		rows = 0;

	LockRelationOid(RelationGetRelid(rel), ShareUpdateExclusiveLock);
	CommandCounterIncrement();	/* this statement's own rows count too */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snapshot, 0, NULL);
	tuple = table_slot_create(rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, tuple))
		rows++;
	ExecDropSingleTupleTableSlot(tuple);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);

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
