/*-------------------------------------------------------------------------
 *
 * bulkhead.h
 *	  What every module of the bulkhead extension uses: the library's
 *	  version, the length of a workload name, this backend's PGPROC number.
 *
 * Each module has a header of its own declaring its API; README.md's
 * "How it works" has the module map, and test/structure/modules.allowed
 * the calls allowed between modules (test/structure/run.sh checks them).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_H
#define BULKHEAD_H

#include "postgres.h"

/* This backend's PGPROC number (PG 17 replaced pgprocno by MyProcNumber) */
#if PG_VERSION_NUM >= 170000
#define BULKHEAD_MY_PROCNO		MyProcNumber
#define BULKHEAD_PROCNO(proc)	GetNumberFromPGProc(proc)
#else
#define BULKHEAD_MY_PROCNO		(MyProc->pgprocno)
#define BULKHEAD_PROCNO(proc)	((proc)->pgprocno)
#endif

/* The library's version: the newest SQL version it serves (bulkhead.control) */
#define BULKHEAD_VERSION		"1.2"

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

#endif							/* BULKHEAD_H */
