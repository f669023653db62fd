/*-------------------------------------------------------------------------
 *
 * cpus.h
 *	  The CPUs the server may use, as the adaptive limits count them
 *	  (cpus.c).  Called by adaptive.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_CPUS_H
#define BULKHEAD_CPUS_H

#include "shmem/base.h"

extern void bulkhead_cpus_init(void);
/* Never throws; reads no file when refresh is false and a count is known */
extern int	bulkhead_cpu_count(bool refresh);
extern void bulkhead_log_cpu_count(void);

#endif							/* BULKHEAD_CPUS_H */
