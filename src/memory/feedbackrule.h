/*-------------------------------------------------------------------------
 *
 * feedbackrule.h
 *	  Memory grants (1.5): grant feedback's notes of one (queryid,
 *	  workload) and the rules that turn them into the next run's request
 *	  (feedbackrule.c).  Arithmetic only: the caller holds the lock of the
 *	  notes (feedback.c's), and nothing here throws.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_FEEDBACKRULE_H
#define BULKHEAD_FEEDBACKRULE_H

#include "memory/memplan.h"

#define BULKHEAD_FEEDBACK_NODES		8	/* memory nodes noted per statement
										 * (its first 8, in plan order) */
#define BULKHEAD_FEEDBACK_RUNS		4	/* recent peaks kept per node */

/* A statement's key: zero-padded, compared as bytes */
typedef struct BulkheadFeedbackKey
{
	int64		queryid;
	uint32		name_hash;		/* of workload */
	char		workload[NAMEDATALEN];	/* "": outside any workload */
} BulkheadFeedbackKey;

/* What the runs of one memory node used (in its notes: their lock) */
typedef struct BulkheadFeedbackNode
{
	int32		plan_node_id;
	uint8		kind;			/* BulkheadMemKind: another kind there is
								 * another plan */
	int8		last_move;		/* +1 raised, -1 lowered, 0 not yet */
	uint8		npeaks;			/* peaks[] filled, at most RUNS */
	uint8		next;			/* where the next peak goes */
	bool		guessed;		/* peaks[] holds a spilled run's guess */
	int64		peaks[BULKHEAD_FEEDBACK_RUNS];	/* bytes per copy */
	int64		request;		/* bytes per copy the next run asks; 0:
								 * its estimate */
	int64		last_peak;		/* the last run's, -1 unknown */
	double		copies;			/* per process, and processes */
	int32		processes;
} BulkheadFeedbackNode;

/*
 * The notes of one (queryid, workload): an entry of feedback.c's shared
 * table.  Every field is protected by that table's LWLock (tranche
 * "bulkhead feedback"): read under it shared, written under it exclusive;
 * key is set when the entry is made (exclusive) and never changes.
 */
typedef struct BulkheadFeedbackNotes
{
	BulkheadFeedbackKey key;	/* first: the hash key */
	Oid			userid;			/* who ran it last (the view's privacy) */
	int32		nnodes;
	bool		swinging;		/* left at its limit until reset */
	uint8		swings;			/* spills right after a lowering */
	int64		runs;
	int64		spills;			/* runs in which a node spilled */
	int64		peak_used;		/* the last run's bytes, all nodes and
								 * the executor's own; -1 unknown */
	int64		request;		/* what the next run asks, bytes */
	char		source;			/* BULKHEAD_SOURCE_* of request */
	uint8		nextra;
	uint8		extra_next;
	int64		extra_peaks[BULKHEAD_FEEDBACK_RUNS];
	int64		extra;			/* bytes requested outside the nodes */
	double		usage;			/* eviction: the least used go first */
	BulkheadFeedbackNode nodes[BULKHEAD_FEEDBACK_NODES];
} BulkheadFeedbackNotes;

/* The nodes of plan that feedback notes (not a Gather), at most NODES */
extern int	bulkhead_feedback_nodes_of(const BulkheadMemPlan *plan,
									   int *index);

/* Do notes describe plan's nodes (same ids, same kinds)? */
extern bool bulkhead_feedback_same_plan(const BulkheadFeedbackNotes *notes,
										const BulkheadMemPlan *plan);

/* Notes start over for plan's nodes */
extern void bulkhead_feedback_start_over(BulkheadFeedbackNotes *notes,
										 const BulkheadMemPlan *plan);

/* A run of plan noted: its peaks, its spills, the next request */
extern void bulkhead_feedback_rule_note(BulkheadFeedbackNotes *notes,
										const BulkheadMemPlan *plan);

/* A run of plan asks from notes (same plan): requests, sources, extra */
extern void bulkhead_feedback_rule_apply(const BulkheadFeedbackNotes *notes,
										 BulkheadMemPlan *plan);

/* Is a row of notes read from a file sound? */
extern bool bulkhead_feedback_notes_sound(const BulkheadFeedbackNotes *notes);

#endif							/* BULKHEAD_FEEDBACKRULE_H */
