/*-------------------------------------------------------------------------
 *
 * feedbackrule.c
 *	  Memory grants (1.5): the rules of grant feedback, from the notes of
 *	  one (queryid, workload) to its next run's request.
 *
 * Per memory node (bytes of one copy):
 *
 * - A run in memory notes its peak; the last 4 such peaks are kept.  The
 *   next request is the largest of them (with 4 runs kept, their 90th
 *   percentile by nearest rank) x 1.25, unless the request of the run
 *   already lay within [1.1, 1.5] x it: then it is kept, so that small
 *   changes of use do not move it every run.  So a run that used less than
 *   1/1.5 of its request lowers it (less than half, certainly), and after
 *   three runs of the same use a node asks at most 1.5x what it used.
 * - A run that spilled raises the request toward the limit: to twice what
 *   it asked, or to 1.25 x what it would have needed in memory, guessed as
 *   its grant plus twice what it wrote to disk (a row on disk takes about
 *   half of what it takes in a sort's memory), whichever is more.  That
 *   guess stands among the peaks until a run in memory measures the real
 *   one (then the guesses go).
 * - A node whose peak is unknown (memplan.h, nodepeak.c) and did not spill
 *   keeps its estimate.
 * - A request is never above the node's limit, nor below 64 kB.
 *
 * Swinging: a spill right after a lowering means the lowering was wrong.
 * The second time a node of the statement does that, the statement is left
 * at its limits (source 'l') until its notes are reset (or its plan
 * changes, or it is evicted).
 *
 * Outside the nodes: the largest of the last 4 runs' extra_peak x 1.25,
 * from the second run on, when it reaches 1 MB (below, it is the
 * executor's own state and small values, which every plan has).
 *
 * A plan whose memory nodes changed (another kind at a plan_node_id, or
 * other ids) starts over.  Owns no state; calls no module.  Called by
 * feedback.c under its lock.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/feedbackrule.h"

#include "common/hashfn.h"

#define FEEDBACK_MARGIN		1.25	/* over the highest recent peak */
#define FEEDBACK_KEEP_LOW	1.1		/* a request within [LOW, HIGH] x the */
#define FEEDBACK_KEEP_HIGH	1.5		/* highest recent peak is kept */
#define FEEDBACK_DISK_FACTOR 2.0	/* memory per byte written to disk */
#define FEEDBACK_SWINGS		2		/* spills after a lowering: to limit */
#define FEEDBACK_EXTRA_MIN	(1024.0 * 1024.0)	/* extra asked from 1 MB */
#define FEEDBACK_FLOOR		(64.0 * 1024.0)

int
bulkhead_feedback_nodes_of(const BulkheadMemPlan *plan, int *index)
{
	int			n = 0;
	int			i;

	for (i = 0; i < plan->nnodes && n < BULKHEAD_FEEDBACK_NODES; i++)
		if (plan->nodes[i].kind != BULKHEAD_MEM_GATHER)
			index[n++] = i;
	return n;
}

bool
bulkhead_feedback_same_plan(const BulkheadFeedbackNotes *notes,
							const BulkheadMemPlan *plan)
{
	int			index[BULKHEAD_FEEDBACK_NODES];
	int			n = bulkhead_feedback_nodes_of(plan, index);
	int			i;

	if (n != notes->nnodes)
		return false;
	for (i = 0; i < n; i++)
		if (notes->nodes[i].plan_node_id != plan->nodes[index[i]].plan_node_id ||
			notes->nodes[i].kind != plan->nodes[index[i]].kind)
			return false;
	return true;
}

void
bulkhead_feedback_start_over(BulkheadFeedbackNotes *notes, const BulkheadMemPlan *plan)
{
	int			index[BULKHEAD_FEEDBACK_NODES];
	int			n = bulkhead_feedback_nodes_of(plan, index);
	int			i;

	notes->nnodes = n;
	notes->swinging = false;
	notes->swings = 0;
	notes->runs = 0;
	notes->spills = 0;
	notes->peak_used = -1;
	notes->request = 0;
	notes->source = BULKHEAD_SOURCE_ESTIMATE;
	notes->nextra = 0;
	notes->extra_next = 0;
	notes->extra = 0;
	memset(notes->extra_peaks, 0, sizeof(notes->extra_peaks));
	memset(notes->nodes, 0, sizeof(notes->nodes));
	for (i = 0; i < n; i++)
	{
		notes->nodes[i].plan_node_id = plan->nodes[index[i]].plan_node_id;
		notes->nodes[i].kind = plan->nodes[index[i]].kind;
		notes->nodes[i].last_peak = -1;
	}
}

static double
clamp_request(double bytes, const BulkheadMemNode *mn)
{
	double		floor_b = Min(FEEDBACK_FLOOR, mn->limit);

	return Max(Min(bytes, mn->limit), floor_b);
}

static void
push_peak(BulkheadFeedbackNode *fn, int64 bytes)
{
	fn->peaks[fn->next] = bytes;
	fn->next = (fn->next + 1) % BULKHEAD_FEEDBACK_RUNS;
	if (fn->npeaks < BULKHEAD_FEEDBACK_RUNS)
		fn->npeaks++;
}

static int64
highest(const int64 *values, int n)
{
	int64		top = 0;
	int			i;

	for (i = 0; i < n; i++)
		top = Max(top, values[i]);
	return top;
}

/* The request after a run of mn, whose notes are fn; 0: its estimate */
static double
node_request(BulkheadFeedbackNode *fn, const BulkheadMemNode *mn)
{
	double		asked = mn->request;
	double		top;

	if (mn->spilled)
	{
		double		had = (double) mn->run_kb * 1024.0;
		double		guess = had + FEEDBACK_DISK_FACTOR * (double) Max(mn->spill_bytes, 0);

		push_peak(fn, (int64) Min(guess, (double) PG_INT64_MAX / 4));
		fn->guessed = true;
		return clamp_request(Max(2.0 * asked, FEEDBACK_MARGIN * guess), mn);
	}
	if (mn->peak < 0)
		return (double) fn->request;
	if (fn->guessed)
	{
		/* a measure replaces the guesses (and the peaks before them) */
		fn->npeaks = 0;
		fn->next = 0;
		fn->guessed = false;
	}
	push_peak(fn, mn->peak);
	top = (double) highest(fn->peaks, fn->npeaks);
	if (asked >= FEEDBACK_KEEP_LOW * top && asked <= FEEDBACK_KEEP_HIGH * top)
		return clamp_request(asked, mn);
	return clamp_request(FEEDBACK_MARGIN * top, mn);
}

/* One node's run noted; a swing counted in notes */
static void
note_node(BulkheadFeedbackNotes *notes, BulkheadFeedbackNode *fn,
		  const BulkheadMemNode *mn)
{
	double		next;
	int			move;

	fn->last_peak = mn->peak;
	fn->copies = mn->copies;
	fn->processes = 1 + Max(mn->workers, 0);
	if (mn->copies <= 0)
		return;					/* an Agg measured only: nothing to ask */
	next = node_request(fn, mn);
	if (next <= 0)
		return;
	move = next > mn->request * 1.01 ? 1 : next < mn->request * 0.99 ? -1 : 0;
	if (move > 0 && mn->spilled && fn->last_move < 0 && notes->swings < 255)
		notes->swings++;
	if (move != 0)
		fn->last_move = (int8) move;
	fn->request = (int64) next;
}

/* What the next run asks (the view's), and from where */
static void
sum_request(BulkheadFeedbackNotes *notes, const BulkheadMemPlan *plan)
{
	double		bytes = plan->fixed + (double) notes->extra;
	bool		fed = notes->extra > 0;
	int			i;
	int			k = 0;

	for (i = 0; i < plan->nnodes; i++)
	{
		const BulkheadMemNode *mn = &plan->nodes[i];
		double		one = mn->estimate;

		if (mn->kind == BULKHEAD_MEM_GATHER)
			continue;
		if (notes->swinging)
			one = mn->limit;
		else if (k < notes->nnodes && notes->nodes[k].request > 0)
		{
			one = clamp_request((double) notes->nodes[k].request, mn);
			fed = true;
		}
		k++;
		if (mn->copies > 0)
			bytes += one * mn->copies * (1 + Max(mn->workers, 0));
	}
	notes->request = (int64) Min(bytes, (double) PG_INT64_MAX / 4);
	notes->source = notes->swinging ? BULKHEAD_SOURCE_LIMIT :
		fed ? BULKHEAD_SOURCE_FEEDBACK : BULKHEAD_SOURCE_ESTIMATE;
}

void
bulkhead_feedback_rule_note(BulkheadFeedbackNotes *notes, const BulkheadMemPlan *plan)
{
	int			index[BULKHEAD_FEEDBACK_NODES];
	int			n = bulkhead_feedback_nodes_of(plan, index);
	bool		spilled = false;
	double		used = 0;
	int			i;

	if (!bulkhead_feedback_same_plan(notes, plan))
		bulkhead_feedback_start_over(notes, plan);
	notes->runs++;
	for (i = 0; i < n; i++)
	{
		const BulkheadMemNode *mn = &plan->nodes[index[i]];

		note_node(notes, &notes->nodes[i], mn);
		spilled |= mn->spilled;
		if (mn->peak > 0 && mn->copies > 0)
			used += (double) mn->peak * mn->copies;
	}
	if (spilled)
		notes->spills++;
	if (plan->extra_peak >= 0)
	{
		double		top;

		notes->extra_peaks[notes->extra_next] = plan->extra_peak;
		notes->extra_next = (notes->extra_next + 1) % BULKHEAD_FEEDBACK_RUNS;
		if (notes->nextra < BULKHEAD_FEEDBACK_RUNS)
			notes->nextra++;
		top = (double) highest(notes->extra_peaks, notes->nextra);
		notes->extra = top >= FEEDBACK_EXTRA_MIN ? (int64) (FEEDBACK_MARGIN * top) : 0;
		used += (double) plan->extra_peak;
	}
	notes->peak_used = (int64) Min(used, (double) PG_INT64_MAX / 4);
	if (notes->swings >= FEEDBACK_SWINGS)
		notes->swinging = true;
	sum_request(notes, plan);
}

void
bulkhead_feedback_rule_apply(const BulkheadFeedbackNotes *notes, BulkheadMemPlan *plan)
{
	int			index[BULKHEAD_FEEDBACK_NODES];
	int			n = bulkhead_feedback_nodes_of(plan, index);
	int			i;

	plan->extra = (double) notes->extra;
	if (notes->swinging)
	{
		for (i = 0; i < plan->nnodes; i++)
		{
			BulkheadMemNode *mn = &plan->nodes[i];

			if (mn->kind == BULKHEAD_MEM_GATHER || mn->copies <= 0)
				continue;
			mn->request = mn->limit;
			mn->source = BULKHEAD_SOURCE_LIMIT;
		}
		return;
	}
	for (i = 0; i < n; i++)
	{
		BulkheadMemNode *mn = &plan->nodes[index[i]];

		if (notes->nodes[i].request <= 0 || mn->copies <= 0)
			continue;
		mn->request = clamp_request((double) notes->nodes[i].request, mn);
		mn->source = BULKHEAD_SOURCE_FEEDBACK;
	}
}

bool
bulkhead_feedback_notes_sound(const BulkheadFeedbackNotes *notes)
{
	int			i;

	if (memchr(notes->key.workload, '\0', NAMEDATALEN) == NULL ||
		notes->key.name_hash != hash_bytes((const unsigned char *) notes->key.workload,
										   strlen(notes->key.workload)) ||
		notes->nnodes < 0 || notes->nnodes > BULKHEAD_FEEDBACK_NODES ||
		notes->nextra > BULKHEAD_FEEDBACK_RUNS ||
		notes->extra_next >= BULKHEAD_FEEDBACK_RUNS ||
		notes->runs < 0 || notes->spills < 0 || notes->extra < 0 ||
		notes->request < 0 ||
		(notes->source != BULKHEAD_SOURCE_ESTIMATE &&
		 notes->source != BULKHEAD_SOURCE_FEEDBACK &&
		 notes->source != BULKHEAD_SOURCE_LIMIT))
		return false;
	for (i = 0; i < notes->nnodes; i++)
	{
		const BulkheadFeedbackNode *fn = &notes->nodes[i];

		if (fn->kind >= BULKHEAD_MEM_NUM_KINDS || fn->npeaks > BULKHEAD_FEEDBACK_RUNS ||
			fn->next >= BULKHEAD_FEEDBACK_RUNS || fn->request < 0 ||
			fn->last_move < -1 || fn->last_move > 1)
			return false;
	}
	return true;
}
