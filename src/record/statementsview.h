/*-------------------------------------------------------------------------
 *
 * statementsview.h
 *	  bulkhead_statements, the view (statementsview.c): the table of
 *	  statements.c read a batch at a time.  SQL functions only: nothing
 *	  is declared for the other modules.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_STATEMENTSVIEW_H
#define BULKHEAD_STATEMENTSVIEW_H

#include "record/statements.h"

#endif							/* BULKHEAD_STATEMENTSVIEW_H */
