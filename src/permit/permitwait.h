/*-------------------------------------------------------------------------
 *
 * permitwait.h
 *	  The wait for a permit's hand-off: the deadlock check's verdict, and a
 *	  queued lock holder served first (permitwait.c).
 *
 * Called by permit.c, for every wait for a permit: an explicit acquire,
 * transparent admission, a statement's move between lanes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_PERMITWAIT_H
#define BULKHEAD_PERMITWAIT_H

#include "shmem/shmem.h"

#include "datatype/timestamp.h"

extern bool bulkhead_wait_for_permit(BulkheadSlot *slot, int slotno, int li,
									 BulkheadScope scope, const char *name,
									 TimestampTz queued_at, int64 timeout_us,
									 bool try_only, const char *moved_from);

/* 53B02: no permit of workload name within timeout_us */
extern void bulkhead_report_permit_timeout(const char *name, int64 timeout_us);

#endif							/* BULKHEAD_PERMITWAIT_H */
