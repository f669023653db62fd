/*-------------------------------------------------------------------------
 *
 * historyfile.h
 *	  bulkhead_history's ring saved at a clean shutdown and restored at the
 *	  next start (historyfile.c), for history.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_HISTORYFILE_H
#define BULKHEAD_HISTORYFILE_H

#include "views/historyring.h"

/*
 * What a row read back may hold (history.c fills it in from this server's
 * settings): a row outside them is dropped, with a LOG line.
 */
typedef struct HistoryLimits
{
	int			backends;		/* processes that may count: at most one
								 * event each per microsecond of an interval */
	int			permits;		/* permit entries: the most running or
								 * queued at once */
	double		max_p99_us;		/* the largest value a histogram gives */
	int64		max_memory;		/* the most bytes granted at once */
} HistoryLimits;

/* The postmaster, nothing else running: at a clean shutdown, at its start */
extern void bulkhead_historyfile_save(BulkheadHistory *history);
extern void bulkhead_historyfile_restore(BulkheadHistory *history,
										 const HistoryLimits *limits);

#endif							/* BULKHEAD_HISTORYFILE_H */
