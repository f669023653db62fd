/*-------------------------------------------------------------------------
 *
 * holds.h
 *	  Runaway holders: the worker's check of permits held past max_hold
 *	  (holds.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_HOLDS_H
#define BULKHEAD_HOLDS_H

#include "shmem.h"

/* How often the worker looks, at least, while a workload has a max_hold */
#define BULKHEAD_HOLD_CHECK_MS	50

extern bool bulkhead_check_holds(void);

#endif							/* BULKHEAD_HOLDS_H */
