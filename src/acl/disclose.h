/*-------------------------------------------------------------------------
 *
 * disclose.h
 *	  What an error may tell its caller about workloads other than the one
 *	  it named (disclose.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_DISCLOSE_H
#define BULKHEAD_DISCLOSE_H

#include "shmem/base.h"

#include "utils/relcache.h"

extern bool bulkhead_may_read_rows(Relation rel, const char *const *columns,
								   int ncolumns);
extern bool bulkhead_may_read_stats(Oid user);
extern bool bulkhead_may_see_backend(int pid, int procno, bool see_all);

#endif							/* BULKHEAD_DISCLOSE_H */
