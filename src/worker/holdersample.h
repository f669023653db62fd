/*-------------------------------------------------------------------------
 *
 * holdersample.h
 *	  Samples of what an adaptive workload's holders are doing (holdersample.c).
 *	  Called by adaptive.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_HOLDERSAMPLE_H
#define BULKHEAD_HOLDERSAMPLE_H

#include "shmem/shmem.h"

/* One sample of one workload's holders */
typedef struct BulkheadHolderSample
{
	char		name[NAMEDATALEN];	/* the workload sampled */
	int			on_cpu;			/* on a CPU or ready for one */
	int			off_cpu;		/* waiting outside the server's CPUs */
	int			blocked;		/* waiting for an LWLock or a buffer pin */
	int			nwaiters;		/* waiting for a heavyweight lock */
	bool		binding;		/* callers waited (or would have, in shadow) */
} BulkheadHolderSample;

extern void bulkhead_holders_prepare(void);
extern bool bulkhead_sample_holders(BulkheadSlot *slot, TimestampTz now,
									BulkheadHolderSample *out);
extern int	bulkhead_count_stuck(int nwaiters);

#endif							/* BULKHEAD_HOLDERSAMPLE_H */
