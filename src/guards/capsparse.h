/*-------------------------------------------------------------------------
 *
 * capsparse.h
 *	  Lanes that cap settings (1.3): a workload's settings parsed and
 *	  checked (capsparse.c).  Called by tables.c (the worker's load).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_CAPSPARSE_H
#define BULKHEAD_CAPSPARSE_H

#include "guards/caps.h"

#include "utils/array.h"

/*
 * Parse settings (a text[] of 'name=value', as the column holds) into caps
 * and, if text is not NULL, the values as written.  An entry that is not
 * one of the settings a lane caps, or whose value the setting refuses, is
 * reported at elevel (22023, PostgreSQL's own message as detail): ERROR
 * for the table's check, WARNING for the worker's load, which then leaves
 * that entry out.  workload names the row in the message.
 */
extern void bulkhead_caps_parse(ArrayType *settings, const char *workload,
								int elevel, BulkheadCaps *caps,
								char written[][BULKHEAD_CAP_TEXTLEN]);

#endif							/* BULKHEAD_CAPSPARSE_H */
