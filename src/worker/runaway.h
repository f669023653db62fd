/*-------------------------------------------------------------------------
 *
 * runaway.h
 *	  Runaway holders: the worker's check of permits held past max_hold
 *	  (runaway.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_RUNAWAY_H
#define BULKHEAD_RUNAWAY_H

#include "shmem/shmem.h"

/* How often the worker looks, at least, while a workload has a max_hold */
#define BULKHEAD_HOLD_CHECK_MS	50

extern bool bulkhead_check_holds(void);

#endif							/* BULKHEAD_RUNAWAY_H */
