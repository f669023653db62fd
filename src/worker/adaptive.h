/*-------------------------------------------------------------------------
 *
 * adaptive.h
 *	  The worker's control of adaptive limits (adaptive.c).  Called by
 *	  worker.c (sample, decide) and loader.c (the limit at a load).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_ADAPTIVE_H
#define BULKHEAD_ADAPTIVE_H

#include "shmem/shmem.h"

extern int	bulkhead_adaptive_law;

extern void bulkhead_adaptive_init(void);
extern int	bulkhead_limit_at_load(const BulkheadSlot *slot,
								   const BulkheadConfig *config);
extern bool bulkhead_adaptive_sample(void);
extern void bulkhead_adaptive_decide(void);

#endif							/* BULKHEAD_ADAPTIVE_H */
