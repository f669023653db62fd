/*-------------------------------------------------------------------------
 *
 * bulkhead.h
 *	  The extension's entry (bulkhead.c): _PG_init, which PostgreSQL calls
 *	  when it loads the library.  No module calls it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_BULKHEAD_H
#define BULKHEAD_BULKHEAD_H

#include "shmem/base.h"

extern PGDLLEXPORT void _PG_init(void);

#endif							/* BULKHEAD_BULKHEAD_H */
