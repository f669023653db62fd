/*-------------------------------------------------------------------------
 *
 * lockholder.h
 *	  Is this backend a lock holder someone waits for (1.5)?  A queued
 *	  lock holder is served first (lockholder.c).
 *
 * Owns no state.  Called by the waits for a permit (permit/) and for a
 * memory grant (memory/); reads importance.h's bulkhead.boost_lock_holders.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_LOCKHOLDER_H
#define BULKHEAD_LOCKHOLDER_H

#include "shmem/base.h"

/*
 * Whether this backend (or its lock group) holds a heavyweight lock in a
 * mode that conflicts with the mode another backend waits for on it.
 * Takes the lock manager's partition locks in shared mode, and only when
 * some backend waits for a heavyweight lock; call it with no LWLock held.
 * Never throws.
 */
extern bool bulkhead_lock_waited_on(void);

#endif							/* BULKHEAD_LOCKHOLDER_H */
