/*-------------------------------------------------------------------------
 *
 * base.h
 *	  The ground floor of the bulkhead extension: what every module uses
 *	  (the library's version, the length of a workload name, this backend's
 *	  PGPROC number, the export rules of a hidden library, a hash mix).
 *
 * It includes no header of the project, and every module's header includes
 * it, directly or through the headers it includes, so the graph of
 * #include between modules has no cycle (test/structure/run.sh checks it).
 * Each module declares what it offers the others in a header of its own
 * name; test/structure/modules.allowed lists the calls allowed between
 * modules, test/structure/folders the order of the folders.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_BASE_H
#define BULKHEAD_BASE_H

/*
 * The library is built with -fvisibility=hidden (the Makefile), as
 * PostgreSQL 16 and later build every extension: the modules' functions
 * and variables are then called directly by each other, not through the
 * PLT and GOT, and only what the server looks up (PG_FUNCTION_INFO_V1
 * functions, _PG_init, the worker's entry point, the magic block) is
 * exported, through PGDLLEXPORT.  PostgreSQL 15 defines PGDLLEXPORT as
 * nothing unless it is defined first, as here.  Every source file includes
 * this header (through its module's header) before any other.
 */
#ifndef PGDLLEXPORT
#define PGDLLEXPORT __attribute__((visibility("default")))
#endif

#include "postgres.h"

#include "fmgr.h"

/*
 * Before 16, PG_FUNCTION_INFO_V1 marks only the info function PGDLLEXPORT,
 * not the SQL-callable function itself: declare it exported here, as 16's
 * macro does, so that the server finds it in a library built hidden.
 */
#if PG_VERSION_NUM < 160000
#undef PG_FUNCTION_INFO_V1
#define PG_FUNCTION_INFO_V1(funcname) \
extern PGDLLEXPORT Datum funcname(PG_FUNCTION_ARGS); \
extern PGDLLEXPORT const Pg_finfo_record * CppConcat(pg_finfo_,funcname)(void); \
const Pg_finfo_record * \
CppConcat(pg_finfo_,funcname) (void) \
{ \
	static const Pg_finfo_record my_finfo = { 1 }; \
	return &my_finfo; \
} \
extern int no_such_variable
#endif

/* This backend's PGPROC number (PG 17 replaced pgprocno by MyProcNumber) */
#if PG_VERSION_NUM >= 170000
#define BULKHEAD_MY_PROCNO		MyProcNumber
#define BULKHEAD_PROCNO(proc)	GetNumberFromPGProc(proc)
#else
#define BULKHEAD_MY_PROCNO		(MyProc->pgprocno)
#define BULKHEAD_PROCNO(proc)	((proc)->pgprocno)
#endif

/* The library's version: the newest SQL version it serves (bulkhead.control) */
#define BULKHEAD_VERSION		"1.5"

#define BULKHEAD_NAME_MAXLEN	63	/* bytes, without the terminator */

/* A 64-bit mix (splitmix64's finaliser), so that stamps rarely collide */
static inline uint64
bulkhead_mix64(uint64 x)
{
	x ^= x >> 30;
	x *= UINT64CONST(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64CONST(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

#endif							/* BULKHEAD_BASE_H */
