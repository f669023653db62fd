/*-------------------------------------------------------------------------
 *
 * utilreq.c
 *	  Memory grants (1.4): a utility statement's request.
 *
 * A utility that builds or rebuilds indexes, or sorts a table, runs with
 * maintenance_work_mem in the leader and in each parallel maintenance
 * worker: CREATE INDEX (not CREATE TABLE's own, on its new, empty table),
 * REINDEX, CLUSTER (19's REPACK), VACUUM, REFRESH MATERIALIZED VIEW
 * without CONCURRENTLY (a new heap, its indexes rebuilt), and an ALTER
 * TABLE that builds an index (ADD PRIMARY KEY, UNIQUE, EXCLUDE, a column
 * with one of those) or rewrites the table and so rebuilds its indexes.
 * Whether an ALTER TABLE rewrites is decided as PostgreSQL does, where the
 * statement's parse tree and the catalogs say it before it runs: ALTER
 * COLUMN TYPE, SET EXPRESSION (of a stored column), SET LOGGED or
 * UNLOGGED, SET ACCESS METHOD (of a table with storage), and a column
 * added with a default that is not a constant (it may be volatile: its
 * function is not looked up), a serial, a stored generated column, an
 * identity, or a domain with constraints.  Only a relation with storage,
 * or a partitioned table whose partitions the subcommand reaches, is
 * charged: not a foreign table, a view or a composite type (ALTER TYPE is
 * an ALTER TABLE).  The relation is looked up without a lock (the
 * statement takes its own next): a race makes at most a wrong charge.
 *
 * Owns no state.  Called by memory.c and lanes.c; calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/utilreq.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "nodes/parsenodes.h"
#include "parser/parse_type.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

/* Does constraint def (of an ALTER TABLE) build an index? */
static bool
builds_index(Node *def)
{
	Constraint *con;

	if (def == NULL || !IsA(def, Constraint))
		return false;
	con = (Constraint *) def;
	return (con->contype == CONSTR_PRIMARY || con->contype == CONSTR_UNIQUE ||
			con->contype == CONSTR_EXCLUSION) && con->indexname == NULL;
}

/* A constant, or a cast of one: a default that never rewrites the table */
static bool
is_constant(Node *expr)
{
	if (expr != NULL && IsA(expr, TypeCast))
		expr = ((TypeCast *) expr)->arg;
	return expr != NULL && IsA(expr, A_Const);
}

/* A virtual generated column (18 on): computed when read, never stored */
static bool
generated_virtual(Constraint *con)
{
#if PG_VERSION_NUM >= 180000
	return con->generated_kind == ATTRIBUTE_GENERATED_VIRTUAL;
#else
	return false;
#endif
}

/*
 * A serial type (its default, nextval(), is volatile) or a domain with
 * constraints (each row is checked: the table is rewritten), as the
 * column's type is read before the parse analysis of the ALTER TABLE.
 */
static bool
type_rewrites(TypeName *type_name)
{
	Oid			typid;

	if (type_name == NULL)
		return false;
	if (list_length(type_name->names) == 1 && !type_name->pct_type)
	{
		const char *name = strVal(linitial(type_name->names));

		if (strcmp(name, "smallserial") == 0 || strcmp(name, "serial2") == 0 ||
			strcmp(name, "serial") == 0 || strcmp(name, "serial4") == 0 ||
			strcmp(name, "bigserial") == 0 || strcmp(name, "serial8") == 0)
			return true;
	}
	typid = LookupTypeNameOid(NULL, type_name, true);
	if (!OidIsValid(typid) || get_typtype(typid) != TYPTYPE_DOMAIN)
		return false;
#if PG_VERSION_NUM >= 190000
	{
		bool		has_volatile;

		return DomainHasConstraints(typid, &has_volatile);
	}
#else
	return DomainHasConstraints(typid);
#endif
}

/*
 * Does a column added by ALTER TABLE build an index (PRIMARY KEY, UNIQUE)
 * or rewrite the table?
 */
static bool
column_builds_index(Node *def)
{
	ColumnDef  *col;
	ListCell   *c;

	if (def == NULL || !IsA(def, ColumnDef))
		return false;
	col = (ColumnDef *) def;
	if (col->identity != 0 || type_rewrites(col->typeName))
		return true;
	foreach(c, col->constraints)
	{
		Constraint *con = lfirst_node(Constraint, c);

		if (builds_index((Node *) con) || con->contype == CONSTR_IDENTITY ||
			(con->contype == CONSTR_GENERATED && !generated_virtual(con)) ||
			(con->contype == CONSTR_DEFAULT && !is_constant(con->raw_expr)))
			return true;
	}
	return false;
}

#if PG_VERSION_NUM >= 170000
/* Is column name of relid a virtual generated one (18 on)? */
static bool
column_virtual(Oid relid, const char *name)
{
#if PG_VERSION_NUM >= 180000
	HeapTuple	tuple = SearchSysCacheAttName(relid, name);
	bool		is_virtual = false;

	if (HeapTupleIsValid(tuple))
	{
		is_virtual = ((Form_pg_attribute) GETSTRUCT(tuple))->attgenerated ==
			ATTRIBUTE_GENERATED_VIRTUAL;
		ReleaseSysCache(tuple);
	}
	return is_virtual;
#else
	return false;
#endif
}
#endif

/* Does subcommand cmd of an ALTER TABLE of relid (relkind) build an index? */
static bool
command_builds_index(AlterTableCmd *cmd, Oid relid, char relkind)
{
	switch (cmd->subtype)
	{
		case AT_AddConstraint:
			return builds_index(cmd->def);
		case AT_AddColumn:
			return column_builds_index(cmd->def);
		case AT_AlterColumnType:
			return true;
#if PG_VERSION_NUM >= 170000
		case AT_SetExpression:
			return !column_virtual(relid, cmd->name);
#endif
		case AT_SetLogged:
		case AT_SetUnLogged:
		case AT_SetAccessMethod:
			/* a partitioned table's own: a default for its partitions */
			return relkind != RELKIND_PARTITIONED_TABLE;
		default:
			return false;
	}
}

/*
 * Does an ALTER TABLE build or rebuild an index?  Charged whether or not
 * the table has an index.
 */
static bool
alter_builds_index(AlterTableStmt *stmt)
{
	Oid			relid;
	char		relkind;
	ListCell   *lc;

	if (stmt->relation == NULL)
		return false;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return false;			/* the statement fails, or has nothing to do */
	relkind = get_rel_relkind(relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_MATVIEW &&
		relkind != RELKIND_PARTITIONED_TABLE)
		return false;
	foreach(lc, stmt->cmds)
	{
		if (command_builds_index(lfirst_node(AlterTableCmd, lc), relid, relkind))
			return true;
	}
	return false;
}

bool
bulkhead_memreq_utility(Node *stmt, int context, int maintenance_kb,
						int maintenance_workers, BulkheadMemRequest *req)
{
	switch (nodeTag(stmt))
	{
		case T_IndexStmt:
			/* CREATE TABLE's own indexes: built on the table it makes, empty */
			if (context == PROCESS_UTILITY_SUBCOMMAND)
				return false;
			break;
		case T_ReindexStmt:
#if PG_VERSION_NUM >= 190000
		case T_RepackStmt:		/* CLUSTER and REPACK, 19 on */
#else
		case T_ClusterStmt:
#endif
			break;
		case T_VacuumStmt:
			if (!((VacuumStmt *) stmt)->is_vacuumcmd)
				return false;	/* ANALYZE alone */
			break;
		case T_AlterTableStmt:
			if (!alter_builds_index((AlterTableStmt *) stmt))
				return false;
			break;
		case T_RefreshMatViewStmt:
			/* a new heap, its indexes rebuilt (CONCURRENTLY: none) */
			if (((RefreshMatViewStmt *) stmt)->concurrent)
				return false;
			break;
		default:
			return false;
	}
	req->maintenance = true;
	req->setting_kb = maintenance_kb;
	req->units = 1 + Max(maintenance_workers, 0);
	req->fixed = 0;
	req->extra = 0;
	req->nodes = (int) req->units;
	return true;
}
