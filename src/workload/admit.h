/*-------------------------------------------------------------------------
 *
 * admit.h
 *	  The admission decision for a backend's acquire, under the slot lock
 *	  (admit.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_ADMIT_H
#define BULKHEAD_ADMIT_H

#include "shmem/shmem.h"

/* What admission decided for a caller, under the slot lock */
typedef enum BulkheadAdmit
{
	BULKHEAD_ADMIT_GRANTED,		/* the permit is taken at once */
	BULKHEAD_ADMIT_QUEUED,		/* the caller waits in the FIFO */
	BULKHEAD_ADMIT_FULL,		/* B+Q taken: rejected at once */
	BULKHEAD_ADMIT_ZERO_WAIT,	/* a wait was needed, and none was allowed */
	BULKHEAD_ADMIT_CHECK_ROLES,	/* check the roles (no lock), then decide again */
	BULKHEAD_ADMIT_BUDGET,		/* a budget: permits are taken of its leaves */
	BULKHEAD_ADMIT_KEY_FULL,	/* the key's max_queued_per_key are waiting */
	BULKHEAD_ADMIT_NO_KEY_ROOM	/* a new key, and bulkhead.max_keys in use */
} BulkheadAdmit;

extern BulkheadAdmit bulkhead_admit(BulkheadSlot *slot, int slotno,
									BulkheadEntry *entry, BulkheadScope scope,
									const BulkheadConfig *config, int limit,
									int64 timeout_us, bool roles_checked,
									const char *key, TimestampTz now);

#endif							/* BULKHEAD_ADMIT_H */
