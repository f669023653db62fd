/*-------------------------------------------------------------------------
 *
 * feedbackfile.h
 *	  Grant feedback's notes across a clean restart (feedbackfile.c), for
 *	  feedback.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_FEEDBACKFILE_H
#define BULKHEAD_FEEDBACKFILE_H

#include "memory/feedbackrule.h"

#include "utils/hsearch.h"

/*
 * The postmaster, nothing else running: every entry of table written at a
 * clean shutdown; read back (at most max) when it makes the shared memory
 */
extern void bulkhead_feedbackfile_save(HTAB *table);
extern void bulkhead_feedbackfile_restore(HTAB *table, int max);

#endif							/* BULKHEAD_FEEDBACKFILE_H */
