/*-------------------------------------------------------------------------
 *
 * hooks.h
 *	  The planner, executor and utility hooks (hooks.c).  Called by
 *	  bulkhead.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_HOOKS_H
#define BULKHEAD_HOOKS_H

#include "shmem/base.h"

extern void bulkhead_hooks_init(void);

#endif							/* BULKHEAD_HOOKS_H */
