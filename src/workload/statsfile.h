/*-------------------------------------------------------------------------
 *
 * statsfile.h
 *	  Saving the workloads' statistics at a clean shutdown and reading them
 *	  back at the next start (statsfile.c).  Called by bulkhead.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_STATSFILE_H
#define BULKHEAD_STATSFILE_H

#include "shmem/base.h"

extern void bulkhead_statsfile_restore(void);
extern void bulkhead_statsfile_save(int code, Datum arg);

#endif							/* BULKHEAD_STATSFILE_H */
