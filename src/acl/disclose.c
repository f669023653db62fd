/*-------------------------------------------------------------------------
 *
 * disclose.c
 *	  What an error may tell its caller about workloads other than the one
 *	  it named: their names and figures, only to a role that may read them
 *	  anyway.
 *
 * The table's trigger checks rules across every row of bulkhead_workload
 * (treecheck.c, catalog.c), whoever wrote the statement, and an acquire of
 * a budget hints at its children (permit.c).  A role may be allowed to
 * write some rows without reading others (an operator's grants of
 * INSERT or UPDATE without SELECT, column privileges, row-level security),
 * or to take permits without reading bulkhead_stats (an operator may
 * revoke it from PUBLIC).  So, as PostgreSQL decides for the key values in
 * a constraint's error (ri_ReportViolation, BuildIndexValueDescription):
 * the rows of the table are shown only when row-level security does not
 * apply to the role and it has SELECT on the table or on every column
 * shown; the children of a budget only to a role that may read
 * bulkhead_stats.  Others get the same SQLSTATE with a message that names
 * no other workload.
 *
 * And which backends a view shows the current user (views.c, memviews.c):
 * those pg_stat_activity would.
 *
 * Reads the catalogs only (called on error paths, in a transaction); owns
 * no state; calls no other module.  Called by treecheck.c, catalog.c,
 * permit.c, views.c and memviews.c.
 *
 *-------------------------------------------------------------------------
 */
#include "acl/disclose.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "parser/parse_relation.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

/*
 * May the current user read columns of every row of rel (ncolumns 0: the
 * rows themselves, as count(*) does: any column)?  Not while row-level
 * security applies to it, whatever its policies: rows it may not see could
 * be among those named.  Else with SELECT on the table, or on each column.
 */
bool
bulkhead_may_read_rows(Relation rel, const char *const *columns, int ncolumns)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			user = GetUserId();
	int			i;

	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;
	if (pg_class_aclcheck(relid, user, ACL_SELECT) == ACLCHECK_OK)
		return true;
	if (ncolumns == 0)
		return pg_attribute_aclcheck_all(relid, user, ACL_SELECT,
										 ACLMASK_ANY) == ACLCHECK_OK;
	for (i = 0; i < ncolumns; i++)
	{
		AttrNumber	att = attnameAttNum(rel, columns[i], false);

		if (att == InvalidAttrNumber ||
			pg_attribute_aclcheck(relid, att, user, ACL_SELECT) != ACLCHECK_OK)
			return false;
	}
	return true;
}

/* The schema of extension bulkhead in this database, or InvalidOid */
static Oid
extension_schema(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			schema = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname,
				BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("bulkhead"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return schema;
}

/*
 * May user read bulkhead_stats in this database (SELECT on the view, and
 * EXECUTE on the function behind it, which runs as the caller)?  False
 * where the extension is not installed.
 */
bool
bulkhead_may_read_stats(Oid user)
{
	Oid			schema = extension_schema();
	Oid			view;
	Oid			func;
	char	   *schema_name;

	if (!OidIsValid(schema) || (schema_name = get_namespace_name(schema)) == NULL)
		return false;
	view = get_relname_relid("bulkhead_stats", schema);
	if (!OidIsValid(view) ||
		pg_class_aclcheck(view, user, ACL_SELECT) != ACLCHECK_OK)
		return false;
	func = LookupFuncName(list_make2(makeString(schema_name),
									 makeString(pstrdup("bulkhead_stats"))),
						  0, NULL, true);
	if (!OidIsValid(func))
		return false;
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(ProcedureRelationId, func, user, ACL_EXECUTE) == ACLCHECK_OK;
#else
	return pg_proc_aclcheck(func, user, ACL_EXECUTE) == ACLCHECK_OK;
#endif
}

/*
 * May the current user see the backend pid (that used PGPROC procno) in a
 * view?  pg_stat_activity's rule: members of pg_read_all_stats (see_all)
 * see every backend, others those of roles whose privileges they have (the
 * role a backend logged in as); and every backend sees its own rows,
 * whatever role it has set.  A backend that has gone (or whose PGPROC now
 * serves another pid) is shown only to the former.
 */
bool
bulkhead_may_see_backend(int pid, int procno, bool see_all)
{
	PGPROC	   *proc;
	Oid			role;

	if (see_all || pid == MyProcPid)
		return true;
	proc = GetPGProcByNumber(procno);
	role = proc->roleId;
	pg_read_barrier();
	if (proc->pid != pid || !OidIsValid(role))
		return false;
	return has_privs_of_role(GetUserId(), role);
}
