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

/* The postmaster, nothing else running: at a clean shutdown, at its start */
extern void bulkhead_historyfile_save(BulkheadHistory *history);
extern void bulkhead_historyfile_restore(BulkheadHistory *history);

#endif							/* BULKHEAD_HISTORYFILE_H */
