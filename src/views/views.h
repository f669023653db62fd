/*-------------------------------------------------------------------------
 *
 * views.h
 *	  bulkhead_stats, bulkhead_activity, bulkhead_keys, the lanes' settings
 *	  and the statistics' reset (views.c): SQL-callable functions only,
 *	  which PostgreSQL's function manager calls; no module calls them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_VIEWS_H
#define BULKHEAD_VIEWS_H

#include "shmem/base.h"

extern PGDLLEXPORT Datum bulkhead_stats(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_activity(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_keys(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_lane_settings(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_stats_reset_all(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum bulkhead_stats_reset(PG_FUNCTION_ARGS);

#endif							/* BULKHEAD_VIEWS_H */
