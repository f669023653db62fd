/*-------------------------------------------------------------------------
 *
 * feedback.c
 *	  Memory grants (1.5): grant feedback (feedback.h).
 *	  (Being written: notes nothing yet.)
 *
 *-------------------------------------------------------------------------
 */
#include "memory/feedback.h"

void
bulkhead_feedback_apply(BulkheadMemPlan *plan)
{
}

void
bulkhead_feedback_note(const BulkheadMemPlan *plan)
{
}
