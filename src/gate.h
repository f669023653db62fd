/*-------------------------------------------------------------------------
 *
 * gate.h
 *	  Transparent admission: the executor and utility hooks (gate.c).
 *	  Called by bulkhead.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_GATE_H
#define BULKHEAD_GATE_H

#include "base.h"

extern void bulkhead_gate_init(void);

#endif							/* BULKHEAD_GATE_H */
