/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The "bulkhead" background worker (worker.c).  Registered by
 *	  bulkhead.c; started by the postmaster.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_WORKER_H
#define BULKHEAD_WORKER_H

#include "shmem/base.h"

extern void bulkhead_register_worker(void);
PGDLLEXPORT void bulkhead_worker_main(Datum arg);

#endif							/* BULKHEAD_WORKER_H */
