/*-------------------------------------------------------------------------
 *
 * tables.h
 *	  Reading the configuration tables for the worker's load (tables.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_TABLES_H
#define BULKHEAD_TABLES_H

#include "config/rules.h"

/* One row of bulkhead_workload */
typedef struct WorkloadRow
{
	char		name[NAMEDATALEN];
	BulkheadConfig config;
} WorkloadRow;

/*
 * In a transaction: read both tables, if the extension exists in this
 * database, into memory of the caller's context.  Returns the number of
 * workload rows.
 */
extern int	bulkhead_read_tables(WorkloadRow **rows_out,
								 BulkheadRuleList *rules_out);
extern void bulkhead_tables_read_failed(void);

#endif							/* BULKHEAD_TABLES_H */
