/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  Extension "bulkhead" in this database and its own tables (members of
 *	  the extension: pg_depend, deptype 'e'), found by OID for the worker's
 *	  loader and the tables' triggers (catalog.c).  Called in a
 *	  transaction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_CATALOG_H
#define BULKHEAD_CATALOG_H

#include "shmem/shmem.h"

#include "access/tupdesc.h"

typedef struct BulkheadExtension
{
	Oid			oid;
	Oid			namespace;		/* its schema */
	char	   *version;		/* extversion, palloc'd */
} BulkheadExtension;

extern bool bulkhead_find_extension(BulkheadExtension *ext);
extern bool bulkhead_version_at_least(const BulkheadExtension *ext,
									  int major, int minor);
extern Oid	bulkhead_extension_table(const BulkheadExtension *ext,
									 const char *relname);
extern char *bulkhead_qualified_table_name(Oid relid);
extern bool bulkhead_check_column(Oid relid, const char *attname, Oid typid,
								  bool missing_ok);
extern void bulkhead_check_result_types(TupleDesc desc, const Oid *types, int n,
										const char *what);

#endif							/* BULKHEAD_CATALOG_H */
