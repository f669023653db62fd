/*-------------------------------------------------------------------------
 *
 * permit.h
 *	  Taking a permit: admission, the FIFO wait, deadlock verdicts
 *	  (permit.c).  Returning one is local.c's (bulkhead_release_entry).
 *
 * Called by permitfuncs.c (the SQL functions) and transparent.c (transparent
 * admission).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_PERMIT_H
#define BULKHEAD_PERMIT_H

#include "shmem/shmem.h"

extern bool bulkhead_acquire_permit(const char *name, const char *key,
									int64 timeout_us,
									bool use_default_timeout,
									BulkheadScope scope, bool try_only,
									bool *snapshot_given_up,
									const char *moved_from);


#endif							/* BULKHEAD_PERMIT_H */
