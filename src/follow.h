/*-------------------------------------------------------------------------
 *
 * follow.h
 *	  A moved permit follows its new workload's guards (follow.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_FOLLOW_H
#define BULKHEAD_FOLLOW_H

extern void bulkhead_local_follow_moves(void);

#endif							/* BULKHEAD_FOLLOW_H */
