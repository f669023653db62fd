/*-------------------------------------------------------------------------
 *
 * deadlockfree.h
 *	  A workload's shared proof that none of its waiters was deadlocked,
 *	  and the sleeps of the waiters that rely on it (deadlockfree.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_DEADLOCKFREE_H
#define BULKHEAD_DEADLOCKFREE_H

#include "deadlock/waitgraph.h"

/* deadlock.c: the proof of a search, and what relies on it */
extern int64 bulkhead_proof_next_interval(int64 interval_us);
extern void bulkhead_publish_proof(int slotno, uint64 holders, uint64 states,
								   TimestampTz start);
extern void bulkhead_withdraw_proof(int slotno);
extern TimestampTz bulkhead_sleep_on_proof(const PermitWait *root,
										   TimestampTz now);
extern void bulkhead_proof_check_begins(void);

/* permit.c: the wait loop was woken: is the next check due now? */
extern TimestampTz bulkhead_proof_next_check(TimestampTz next_check,
											 TimestampTz now);

/* local.c and permit.c: this backend's wait is over (never throws) */
extern void bulkhead_proof_wait_over(int slotno);

#endif							/* BULKHEAD_DEADLOCKFREE_H */
