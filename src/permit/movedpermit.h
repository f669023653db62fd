/*-------------------------------------------------------------------------
 *
 * movedpermit.h
 *	  A moved permit follows its new workload's guards (movedpermit.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_MOVEDPERMIT_H
#define BULKHEAD_MOVEDPERMIT_H

#include "shmem/base.h"

extern void bulkhead_local_follow_moves(void);

#endif							/* BULKHEAD_MOVEDPERMIT_H */
