/*-------------------------------------------------------------------------
 *
 * transparent.h
 *	  Transparent admission: whether, and which, permit a transaction's
 *	  statement takes (transparent.c).  Called by hooks.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_TRANSPARENT_H
#define BULKHEAD_TRANSPARENT_H

#include "shmem/base.h"

#include "nodes/nodes.h"

extern bool bulkhead_gate_applies(void);
extern bool bulkhead_gate_transaction(bool *snapshot_given_up);
extern bool bulkhead_gate_statement(uint8 kind, bool has_cost, double cost,
									bool *snapshot_given_up);
extern bool bulkhead_gate_passed(void);
extern void bulkhead_gate_hold_for_utility(bool hold);
extern bool bulkhead_gate_holding_for_utility(void);
extern void bulkhead_gate_init(void);

#endif							/* BULKHEAD_TRANSPARENT_H */
