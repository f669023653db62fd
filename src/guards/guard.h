/*-------------------------------------------------------------------------
 *
 * guard.h
 *	  A workload's timeouts, applied to the session while one of its
 *	  permits is held (guard.c).
 *
 * Owns no shared state: only this backend's settings (through guc.c) and
 * its own record of what it changed.  It is told about permits by its
 * callers (permit.c at a grant; local.c and permitfuncs.c after releases)
 * and calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_GUARD_H
#define BULKHEAD_GUARD_H

#include "guards/localpermit.h"

extern void bulkhead_apply_guards(const BulkheadLocalPermit *permit);
extern void bulkhead_lift_guards(const BulkheadLocalPermit *permit);
extern void bulkhead_restore_session_guards(const BulkheadLocalPermit *permits,
											int n);

#endif							/* BULKHEAD_GUARD_H */
