/*-------------------------------------------------------------------------
 *
 * prioviews.h
 *	  Priorities (1.5) in the views (prioviews.c): the importance and
 *	  boost columns of bulkhead_activity and the boost counters of
 *	  bulkhead_stats.  SQL-callable functions only, which PostgreSQL's
 *	  function manager calls; no module calls them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_PRIOVIEWS_H
#define BULKHEAD_PRIOVIEWS_H

#include "shmem/base.h"

extern PGDLLEXPORT Datum bulkhead_priority_stats(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_priority_activity(PG_FUNCTION_ARGS);

#endif							/* BULKHEAD_PRIOVIEWS_H */
