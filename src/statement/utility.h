/*-------------------------------------------------------------------------
 *
 * utility.h
 *	  The ProcessUtility hook (utility.c).  Called by hooks.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_UTILITY_H
#define BULKHEAD_UTILITY_H

#include "shmem/base.h"

extern void bulkhead_utility_init(void);

#endif							/* BULKHEAD_UTILITY_H */
