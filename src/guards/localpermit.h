/*-------------------------------------------------------------------------
 *
 * localpermit.h
 *	  The record this backend keeps of each of its permits: what local.c
 *	  keeps in bulkhead_local[], and what guard.c reads to apply a
 *	  workload's guards (the lane's settings it carries, local.c combines
 *	  through caps.c).
 *
 * A type only, so that guard.c needs nothing of local.c (and local.c,
 * which calls guard.c, nothing that includes it back).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_LOCALPERMIT_H
#define BULKHEAD_LOCALPERMIT_H

#include "shmem/shmem.h"

#include "datatype/timestamp.h"

typedef struct BulkheadLocalPermit
{
	bool		held;			/* granted to this backend */
	BulkheadScope scope;
	SubTransactionId subid;		/* transaction scope: owning subxact */
	int			workload;		/* slot index */
	char		name[NAMEDATALEN];
	int			statement_timeout_ms;	/* guards copied at grant */
	int			lock_timeout_ms;
	int			idle_timeout_ms;
	TimestampTz acquired_in;	/* statement_timestamp() of the statement that
								 * took it: a session permit is returned if
								 * that statement fails (local.c) */
	BulkheadCaps caps;			/* the lane's settings, copied at grant (only
								 * values whose mask bit is set) */
} BulkheadLocalPermit;

#endif							/* BULKHEAD_LOCALPERMIT_H */
