/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The triggers on bulkhead_workload and bulkhead_rule: changes are
 *	  accepted only in bulkhead.database and up to bulkhead.max_workloads
 *	  (bulkhead.max_rules) rows, and a committed change wakes the worker
 *	  (never a rolled-back one).  Also how the extension's own tables are
 *	  found by OID, for the triggers and for the worker.
 *
 * Only the extension's own tables count: a table is the extension's when
 * it is a member of extension "bulkhead" (pg_depend, deptype 'e').  A
 * table of the same name that someone else made (in a schema where PUBLIC
 * may create, say, next to a 1.0 install that has no bulkhead_rule) is
 * neither read by the worker nor accepted by the trigger functions.
 *
 * A change committed with COMMIT PREPARED is not seen at its PREPARE, and
 * the COMMIT PREPARED may run in any backend: at PREPARE the backend sets
 * shared->prepared_change (shmem.c), and the worker polls every second
 * until no prepared transaction is left in its database (loader.c).
 *
 * Owns no shared state: it asks the worker to reload through shmem.c.
 * Called by loader.c (the lookups) and by the triggers; reads the settings
 * of shmem.c and rules.c; has the trees of budgets checked (treecheck.c);
 * tells the row count only to who may count the rows (disclose.c).  Also
 * the check of a rule's importance (1.5), by importance.c's names.
 *
 *-------------------------------------------------------------------------
 */
#include "config/catalog.h"
#include "acl/disclose.h"
#include "config/rules.h"
#include "config/treecheck.h"
#include "workload/importance.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "storage/lmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(bulkhead_workload_changed);
PG_FUNCTION_INFO_V1(bulkhead_rule_changed);
PG_FUNCTION_INFO_V1(bulkhead_check_importance);

/* A configuration table and what its trigger says about it */
typedef struct ConfigTable
{
	const char *function;		/* the trigger function */
	const char *table;
	const char *what;			/* "workloads", "rules" */
	const char *limit_setting;
	int			limit;
	Oid		   *verified;		/* the table's OID once checked, see below */
} ConfigTable;

/*
 * The OIDs of bulkhead_workload and bulkhead_rule once this backend found
 * them to be the extension's own (InvalidOid: not checked yet).  Cleared by
 * any invalidation of the relation (a DROP EXTENSION drops the tables).
 */
static Oid	verified_workload_table = InvalidOid;
static Oid	verified_rule_table = InvalidOid;
static bool relcache_callback_registered = false;

/* A committed change of a configuration table must wake the worker */
static bool reload_at_commit = false;
static bool xact_callback_registered = false;

/*---- The extension's own tables ----*/

/*
 * Look up extension "bulkhead" in this database: its OID, schema and
 * version (palloc'd).  False if it is not installed.
 */
bool
bulkhead_find_extension(BulkheadExtension *ext)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname,
				BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("bulkhead"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_extension form = (Form_pg_extension) GETSTRUCT(tuple);
		bool		isnull;
		Datum		version;

		ext->oid = form->oid;
		ext->namespace = form->extnamespace;
		version = heap_getattr(tuple, Anum_pg_extension_extversion,
							   RelationGetDescr(rel), &isnull);
		ext->version = isnull ? pstrdup("") : TextDatumGetCString(version);
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/* Is the extension's SQL version at least major.minor? */
bool
bulkhead_version_at_least(const BulkheadExtension *ext, int major, int minor)
{
	int			vmajor;
	int			vminor;

	if (sscanf(ext->version, "%d.%d", &vmajor, &vminor) != 2)
		return false;
	return vmajor > major || (vmajor == major && vminor >= minor);
}

/* Is relid a plain table that is a member of extension extoid? */
static bool
is_member_table(Oid relid, Oid extoid)
{
	return OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_RELATION &&
		getExtensionOfObject(RelationRelationId, relid) == extoid;
}

/*
 * The OID of the extension's own table relname (in the extension's schema,
 * a member of the extension), or InvalidOid if it has none: a relation of
 * that name that is not the extension's does not count.
 */
Oid
bulkhead_extension_table(const BulkheadExtension *ext, const char *relname)
{
	Oid			relid = get_relname_relid(relname, ext->namespace);

	return is_member_table(relid, ext->oid) ? relid : InvalidOid;
}

/* The schema-qualified, quoted name of relid, for a query */
char *
bulkhead_qualified_table_name(Oid relid)
{
	char	   *relname = get_rel_name(relid);
	char	   *nspname = get_namespace_name(get_rel_namespace(relid));

	if (relname == NULL || nspname == NULL)
		elog(ERROR, "cache lookup failed for relation %u", relid);
	return quote_qualified_identifier(nspname, relname);
}

/*
 * Check that relid has column attname of type typid.  A missing column is
 * an error unless missing_ok (then false is returned); a column of another
 * type always is.
 */
bool
bulkhead_check_column(Oid relid, const char *attname, Oid typid, bool missing_ok)
{
	AttrNumber	attnum = get_attnum(relid, attname);
	Oid			found;

	if (attnum == InvalidAttrNumber)
	{
		if (missing_ok)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist",
						attname, get_rel_name(relid)),
				 errdetail("The bulkhead worker reads the columns that its extension's version created."),
				 errhint("Drop and re-create the extension, or restore the column.")));
	}
	found = get_atttype(relid, attnum);
	if (found != typid)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of table \"%s\" has type %s, not %s",
						attname, get_rel_name(relid),
						format_type_be(found), format_type_be(typid)),
				 errdetail("The bulkhead worker reads the columns that its extension's version created."),
				 errhint("Restore the column's type, or drop and re-create the extension.")));
	return true;
}

/*
 * Check the column types of a query's result before its values are read
 * (a can't-happen once bulkhead_check_column passed, unless the table was
 * altered in between).
 */
void
bulkhead_check_result_types(TupleDesc desc, const Oid *types, int n,
							const char *what)
{
	int			i;

	if (desc->natts != n)
		elog(ERROR, "reading %s returned %d columns instead of %d",
			 what, desc->natts, n);
	for (i = 0; i < n; i++)
		if (TupleDescAttr(desc, i)->atttypid != types[i])
			elog(ERROR, "column %d read from %s has type %s instead of %s",
				 i + 1, what, format_type_be(TupleDescAttr(desc, i)->atttypid),
				 format_type_be(types[i]));
}

static void
config_relcache_callback(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == verified_workload_table)
		verified_workload_table = InvalidOid;
	if (!OidIsValid(relid) || relid == verified_rule_table)
		verified_rule_table = InvalidOid;
}

/*
 * The trigger functions fire only on the extension's own tables: attached
 * to any other table, they would let whoever writes to it wake the worker
 * at each commit (and count that table's rows against the limit).  The
 * check is not one of privileges (a superuser is refused too; EXECUTE on
 * the functions is what privileges decide), hence 55000.
 */
static void
check_own_table(Relation rel, const ConfigTable *ct)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			extoid;

	if (relid == *ct->verified)
		return;
	extoid = get_extension_oid("bulkhead", true);
	if (!OidIsValid(extoid) || !is_member_table(relid, extoid) ||
		strcmp(RelationGetRelationName(rel), ct->table) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("function %s() can only fire on table \"%s\" of extension \"bulkhead\"",
						ct->function, ct->table),
				 errdetail("It was fired by a trigger on table \"%s\".",
						   RelationGetRelationName(rel)),
				 errhint("Drop the trigger on table \"%s\".",
						 RelationGetRelationName(rel))));
	if (!relcache_callback_registered)
	{
		CacheRegisterRelcacheCallback(config_relcache_callback, (Datum) 0);
		relcache_callback_registered = true;
	}
	*ct->verified = relid;
}

/*---- Waking the worker ----*/

static void
catalog_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (reload_at_commit)
			{
				reload_at_commit = false;
				bulkhead_request_reload();
			}
			break;
		case XACT_EVENT_PREPARE:

			/*
			 * Nothing is visible yet, and the COMMIT PREPARED may come from
			 * any backend: the worker polls every second while prepared
			 * transactions exist (worker.c).
			 */
			if (reload_at_commit)
			{
				reload_at_commit = false;
				bulkhead_note_prepared_change();
				bulkhead_request_reload();
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			reload_at_commit = false;
			break;
		default:
			break;
	}
}

static void
request_reload_at_commit(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(catalog_xact_callback, NULL);
		xact_callback_registered = true;
	}
	reload_at_commit = true;
}

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
#if PG_VERSION_NUM >= 190000	/* 19 adds the scan's flags */
	scan = table_beginscan(rel, snapshot, 0, NULL, SO_NONE);
#else
	scan = table_beginscan(rel, snapshot, 0, NULL);
#endif
	tuple = table_slot_create(rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, tuple))
		rows++;
	ExecDropSingleTupleTableSlot(tuple);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);

	if (rows <= ct->limit)
		return;
	/* the count only to a role that may count the rows (disclose.c) */
	if (!bulkhead_may_read_rows(rel, NULL, 0))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many bulkhead %s", ct->what),
				 errdetail("Shared memory has room for %d rows of %s.",
						   ct->limit, ct->table),
				 errhint("Raise \"%s\" and restart the server.",
						 ct->limit_setting)));
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
	check_own_table(trigdata->tg_relation, ct);

	if (TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		check_database(ct);
	else
	{
		if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
			TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		{
			check_row_count(trigdata->tg_relation, ct);
			/* under the lock check_row_count took, its rows made visible */
			if (ct->verified == &verified_workload_table)
				bulkhead_check_trees(trigdata->tg_relation);
		}
		request_reload_at_commit();
	}
	return PointerGetDatum(NULL);
}

Datum
bulkhead_workload_changed(PG_FUNCTION_ARGS)
{
	ConfigTable ct = {"bulkhead_workload_changed", "bulkhead_workload",
	"workloads", "bulkhead.max_workloads", bulkhead_max_workloads,
	&verified_workload_table};

	return config_table_changed(fcinfo, &ct);
}

Datum
bulkhead_rule_changed(PG_FUNCTION_ARGS)
{
	ConfigTable ct = {"bulkhead_rule_changed", "bulkhead_rule",
	"rules", "bulkhead.max_rules", bulkhead_max_rules,
	&verified_rule_table};

	return config_table_changed(fcinfo, &ct);
}

/*
 * bulkhead_check_importance(importance text) (1.5): the check of a rule's
 * importance.  Raises 22023 for a value that is not an importance; true
 * otherwise (NULL: the session's bulkhead.importance).
 */
Datum
bulkhead_check_importance(PG_FUNCTION_ARGS)
{
	char	   *value;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	value = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (bulkhead_importance_parse(value) == BULKHEAD_IMPORTANCE_UNSET)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid importance \"%s\" for a rule", value),
				 errhint("Use low, normal or high, or NULL for the session's bulkhead.importance.")));
	PG_RETURN_BOOL(true);
}
