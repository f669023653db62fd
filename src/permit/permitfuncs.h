/*-------------------------------------------------------------------------
 *
 * permitfuncs.h
 *	  SQL entry points for permits (permitfuncs.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_PERMITFUNCS_H
#define BULKHEAD_PERMITFUNCS_H

#include "shmem/base.h"

#include "fmgr.h"

extern bool bulkhead_allow_session_permits;
extern char *bulkhead_key;

extern const char *bulkhead_session_key(void);

extern void bulkhead_functions_init(void);
extern void bulkhead_workload_name_arg(FunctionCallInfo fcinfo, int argno,
									   char *name);

#endif							/* BULKHEAD_PERMITFUNCS_H */
