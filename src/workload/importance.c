/*-------------------------------------------------------------------------
 *
 * importance.c
 *	  Importance within a queue (1.5): the settings bulkhead.importance
 *	  and bulkhead.aging_interval, and the importance a wait carries.
 *
 * Who may set bulkhead.importance
 * -------------------------------
 * It is meant to be set as bulkhead.workload is, by a superuser, and yet a
 * plain role may lower its own.  So it is PGC_USERSET, and its check hook
 * refuses (42501) a plain role's value above what it may have, by where
 * the value comes from:
 *   - postgresql.conf, the command line, ALTER SYSTEM, and ALTER ROLE or
 *     DATABASE ... SET when the session starts: accepted (set by a
 *     superuser, or by a plain role under the rule for "a stored value"
 *     below, checked when it was stored);
 *   - a connection's options (PGOPTIONS, "options=-c ..."): applied before
 *     the role's and database's own settings, which they then override, so
 *     the importance the role would have is not known yet: a plain role may
 *     give only low there;
 *   - a value being stored (CREATE FUNCTION ... SET), checked with source
 *     PGC_S_TEST: a plain role may store at most its own importance (the
 *     value RESET would give it);
 *   - ALTER ROLE or DATABASE ... SET / RESET: PostgreSQL lets a role change
 *     its own settings and a database's owner the database's, and applies
 *     them unchecked when a session starts, so a plain role could store a
 *     higher value, or remove the lower one a superuser stored.  So the
 *     ProcessUtility hook asks bulkhead_importance_check_alter() first: a
 *     plain role may store only low there (which can raise nothing), and
 *     may not RESET it, nor RESET ALL where it is stored;
 *   - SET, SET LOCAL, a function's SET clause as it runs, RESET: a plain
 *     role may choose at most the value RESET would give it.
 * A parallel worker takes its leader's value unchecked (the leader's was).
 * Superuser is judged as PostgreSQL judges PGC_SUSET settings: by the
 * current user (a SECURITY DEFINER function runs as its owner).
 *
 * No shared state.  Calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "workload/importance.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/table.h"
#include "catalog/pg_database.h"	/* get_database_oid from 19 on */
#include "catalog/pg_db_role_setting.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"

int			bulkhead_importance = BULKHEAD_IMPORTANCE_NORMAL;
int			bulkhead_aging_interval_ms = 10000;
bool		bulkhead_boost_lock_holders = true;

/* The importance the statement's rule sets, or BULKHEAD_IMPORTANCE_UNSET */
static int	rule_importance = BULKHEAD_IMPORTANCE_UNSET;

static const struct config_enum_entry importance_options[] = {
	{"low", BULKHEAD_IMPORTANCE_LOW, false},
	{"normal", BULKHEAD_IMPORTANCE_NORMAL, false},
	{"high", BULKHEAD_IMPORTANCE_HIGH, false},
	{NULL, 0, false}
};

const char *
bulkhead_importance_name(int importance)
{
	if (importance < BULKHEAD_IMPORTANCE_LOW ||
		importance > BULKHEAD_IMPORTANCE_HIGH)
		return NULL;
	return importance_options[importance].name;
}

int
bulkhead_importance_parse(const char *name)
{
	int			i;

	for (i = 0; importance_options[i].name != NULL; i++)
		if (pg_strcasecmp(name, importance_options[i].name) == 0)
			return importance_options[i].val;
	return BULKHEAD_IMPORTANCE_UNSET;
}

/* The value RESET would give this session (its ceiling as a plain role) */
static int
reset_importance(void)
{
	const char *reset = GetConfigOptionResetString("bulkhead.importance");
	int			value = reset != NULL ? bulkhead_importance_parse(reset) :
		BULKHEAD_IMPORTANCE_UNSET;

	return value == BULKHEAD_IMPORTANCE_UNSET ? BULKHEAD_IMPORTANCE_NORMAL : value;
}

static bool
check_importance(int *newval, void **extra, GucSource source)
{
	int			ceiling;

	/* set by a superuser, or checked when it was stored (see the header) */
	if (source < PGC_S_CLIENT || IsParallelWorker() || !IsUnderPostmaster)
		return true;
	if (superuser())
		return true;
	ceiling = source == PGC_S_CLIENT ? BULKHEAD_IMPORTANCE_LOW :
		reset_importance();
	if (*newval <= ceiling)
		return true;
	GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
	GUC_check_errmsg("permission denied to raise bulkhead.importance to \"%s\"",
					 bulkhead_importance_name(*newval));
	if (source == PGC_S_CLIENT)
		GUC_check_errdetail("A connection's options may only lower it, to \"low\".");
	else
		GUC_check_errdetail("This role's importance is \"%s\"; only a superuser may raise it.",
							bulkhead_importance_name(ceiling));
	return false;
}

void
bulkhead_importance_init(void)
{
	DefineCustomEnumVariable("bulkhead.importance",
							 "Importance of this session's waits within their queue.",
							 "Higher is served first, then arrival.  Set by a superuser "
							 "(ALTER ROLE or DATABASE ... SET); a role may lower its own.",
							 &bulkhead_importance,
							 BULKHEAD_IMPORTANCE_NORMAL,
							 importance_options,
							 PGC_USERSET,
							 0,
							 check_importance, NULL, NULL);

	DefineCustomIntVariable("bulkhead.aging_interval",
							"Waiting this long raises a waiter's importance by one step.",
							"So that a low waiter is never passed over forever.",
							&bulkhead_aging_interval_ms,
							10000, 10, 24 * 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("bulkhead.boost_lock_holders",
							 "A queued lock holder that another backend waits for is served first.",
							 "Off: such a holder waits its turn, as in 1.4 (for comparison).",
							 &bulkhead_boost_lock_holders,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
}

int
bulkhead_importance_current(void)
{
	if (rule_importance != BULKHEAD_IMPORTANCE_UNSET)
		return rule_importance;
	return bulkhead_importance;
}

void
bulkhead_importance_set_rule(int importance)
{
	rule_importance = importance;
}

/* Does pg_db_role_setting hold bulkhead.importance for (database, role)? */
static bool
stored_importance(Oid database, Oid role)
{
	Relation	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(database));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(role));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true,
							  NULL, 2, keys);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		config = heap_getattr(tuple, Anum_pg_db_role_setting_setconfig,
										  RelationGetDescr(rel), &isnull);
		Datum	   *elems;
		int			nelems;
		int			i;

		if (isnull)
			continue;
		deconstruct_array(DatumGetArrayTypeP(config), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, NULL, &nelems);
		for (i = 0; i < nelems && !found; i++)
			found = pg_strncasecmp(TextDatumGetCString(elems[i]),
								   "bulkhead.importance=", 20) == 0;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

void
bulkhead_importance_check_alter(Node *stmt)
{
	VariableSetStmt *set;
	Oid			database = InvalidOid;
	Oid			role = InvalidOid;

	if (IsA(stmt, AlterRoleSetStmt))
	{
		AlterRoleSetStmt *ar = (AlterRoleSetStmt *) stmt;

		set = ar->setstmt;
		if (ar->role != NULL)
			role = get_rolespec_oid(ar->role, true);
		if (ar->database != NULL)
			database = get_database_oid(ar->database, true);
	}
	else if (IsA(stmt, AlterDatabaseSetStmt))
	{
		set = ((AlterDatabaseSetStmt *) stmt)->setstmt;
		database = get_database_oid(((AlterDatabaseSetStmt *) stmt)->dbname, true);
	}
	else
		return;
	if (superuser())
		return;
	if (set->kind == VAR_RESET_ALL)
	{
		if (!stored_importance(database, role))
			return;
	}
	else if (set->name == NULL || pg_strcasecmp(set->name, "bulkhead.importance") != 0)
		return;
	else if (set->kind == VAR_SET_VALUE && list_length(set->args) == 1 &&
			 IsA(linitial(set->args), A_Const) &&
			 IsA(&((A_Const *) linitial(set->args))->val, String) &&
			 bulkhead_importance_parse(strVal(&((A_Const *) linitial(set->args))->val)) ==
			 BULKHEAD_IMPORTANCE_LOW)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to store bulkhead.importance"),
			 errdetail("Only a superuser may store or remove a role's or a database's importance; others may only store \"low\"."),
			 errhint("SET bulkhead.importance lowers it for a session.")));
}

