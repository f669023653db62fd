/*-------------------------------------------------------------------------
 *
 * loader.h
 *	  The worker's load of the configuration tables into shared memory
 *	  (loader.c).  Called by worker.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_LOADER_H
#define BULKHEAD_LOADER_H

#include "shmem/base.h"

/* Load the tables; false (shared memory kept as it was) on an error */
extern bool bulkhead_load_config(void);
/* Define no workload and no rule (the worker found no database) */
extern void bulkhead_unload_config(void);

#endif							/* BULKHEAD_LOADER_H */
