/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The triggers on bulkhead_workload and bulkhead_rule: changes are
 *	  accepted only in bulkhead.database and up to bulkhead.max_workloads
 *	  (bulkhead.max_rules) rows, and a committed change wakes the worker
 *	  (never a rolled-back one).
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"
#include "rules.h"

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
PG_FUNCTION_INFO_V1(bulkhead_rule_changed);

/* A configuration table and what its trigger says about it */
typedef struct ConfigTable
{
	const char *function;		/* the trigger function */
	const char *table;
	const char *what;			/* "workloads", "rules" */
	const char *limit_setting;
	int			limit;
} ConfigTable;

static void
check_database(const ConfigTable *ct)
{
	char	   *current = get_database_name(MyDatabaseId);

	if (current == NULL || strcmp(current, bulkhead_database) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("bulkhead %s can only be changed in database \"%s\"",
						ct->what, bulkhead_database),
				 errdetail("The setting \"bulkhead.database\" names the database whose %s table defines the %s; this is database \"%s\".",
						   ct->table, ct->what, current ? current : "?"),
				 errhint("Connect to database \"%s\" to change %s.",
						 bulkhead_database, ct->what)));
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
check_row_count(Relation rel, const ConfigTable *ct)
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

	if (rows > ct->limit)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many bulkhead %s", ct->what),
				 errdetail("%s would hold %lld rows; shared memory has room for %d.",
						   ct->table, (long long) rows, ct->limit),
				 errhint("Raise \"%s\" and restart the server.",
						 ct->limit_setting)));
}

/* BEFORE and AFTER ... FOR EACH STATEMENT trigger on a configuration table */
static Datum
config_table_changed(FunctionCallInfo fcinfo, const ConfigTable *ct)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s() must be called as a statement trigger",
						ct->function)));
	bulkhead_check_loaded();

	if (TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		check_database(ct);
	else
	{
		if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
			TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
			check_row_count(trigdata->tg_relation, ct);
		bulkhead_request_reload_at_commit();
	}
	return PointerGetDatum(NULL);
}

Datum
bulkhead_workload_changed(PG_FUNCTION_ARGS)
{
	ConfigTable ct = {"bulkhead_workload_changed", "bulkhead_workload",
	"workloads", "bulkhead.max_workloads", bulkhead_max_workloads};

	return config_table_changed(fcinfo, &ct);
}

Datum
bulkhead_rule_changed(PG_FUNCTION_ARGS)
{
	ConfigTable ct = {"bulkhead_rule_changed", "bulkhead_rule",
	"rules", "bulkhead.max_rules", bulkhead_max_rules};

	return config_table_changed(fcinfo, &ct);
}
