/*-------------------------------------------------------------------------
 *
 * memviews.h
 *	  Memory grants in the views (memviews.c): the memory columns of
 *	  bulkhead_stats and bulkhead_activity, and bulkhead_memory.
 *	  SQL-callable functions only, which PostgreSQL's function manager
 *	  calls; no module calls them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MEMVIEWS_H
#define BULKHEAD_MEMVIEWS_H

#include "shmem/base.h"

extern PGDLLEXPORT Datum bulkhead_memory_stats(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_memory_activity(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_memory(PG_FUNCTION_ARGS);

#endif							/* BULKHEAD_MEMVIEWS_H */
