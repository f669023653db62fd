/*-------------------------------------------------------------------------
 *
 * nodepeak.c
 *	  Memory grants (1.5): what each memory node of a statement used, read
 *	  before its executor ends (its nodes alive, as EXPLAIN ANALYZE reads
 *	  them), and what it used outside the nodes' limits.
 *
 * Per kind, the peak of one copy (bytes), whether it spilled, and what it
 * wrote to disk (PG-MEMORY.md, "What each node used"):
 *
 *   Sort            tuplesort_get_stats: memory (the bytes its limit is
 *                   counted in) or, spilled, disk (its tapes)
 *   Incremental     the larger of its two sorts' (full and prefix)
 *   Hash            spacePeak; spilled when it ran in batches (nbatch > 1),
 *                   the other batches' share written: spacePeak x (nbatch-1)
 *   Agg             hash_mem_peak and hash_disk_used (hashed, mixed); an
 *                   Agg's per-group sorts end with their groups: unknown
 *   Memoize         mem_peak (set when it evicted), else mem_used; spilled
 *                   when it evicted or overflowed
 *   Material, CTE, WindowAgg, TableFunc, RecursiveUnion
 *                   18+: tuplestore_get_stats (lifetime maximum; once on
 *                   disk its figure is the file's, so the memory peak is
 *                   then its grant).  15-17: no figure (peak -1, unknown);
 *                   spilled when the store is not in memory now (WindowAgg's
 *                   buffer is gone after its last partition: unknown)
 *   FunctionScan    its stores are private to nodeFunctionscan.c: unknown
 *   Bitmap          the bitmap is private to tidbitmap.c: peak unknown;
 *                   spilled when it went lossy (lossy pages > 0)
 *
 * A spilled node's peak is at least its grant (it spilled because its
 * grant was full).  Only this backend's copies are seen: a node a Gather's
 * workers run alone (the leader not participating) is unknown.
 *
 * Outside the nodes (plan->extra_peak), a lower bound, cheap to take:
 * - each Agg's transition values (its aggcontexts), sampled after each of
 *   its calls (when a group's values are at their largest: a group's
 *   context is reset only when the next group begins);
 * - what es_query_cxt's own blocks (not its children: the sorts', hash
 *   tables', 18+ stores' contexts) hold at the end beyond what its nodes
 *   keep there (a bitmap; 15-17, a tuplestore, counted at its grant): an
 *   uncorrelated ARRAY sublink's array, and the executor's own state.
 *   A correlated ARRAY sublink's arrays are freed row by row: not seen.
 *
 * Never throws: reads fields, and the memory contexts' counters.  (18+:
 * tuplestore_get_stats of a store that went to disk asks its temporary
 * file's size, which PostgreSQL reports as an error only when the file
 * system fails.)
 *
 * Owns no state.  Called by memory.c (at a statement's end) and
 * nodelimit.c (an Agg's values); calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/nodepeak.h"

#include "executor/execdesc.h"
#include "executor/hashjoin.h"
#include "nodes/nodeFuncs.h"
#include "utils/memutils.h"
#include "utils/tuplesort.h"
#include "utils/tuplestore.h"

/* What one store, sort or table shows */
typedef struct Reading
{
	int64		peak;			/* -1: unknown */
	bool		spilled;
	int64		disk;
} Reading;

static void
read_sort(Tuplesortstate *ts, Reading *r)
{
	TuplesortInstrumentation stats;

	if (ts == NULL)
		return;
	tuplesort_get_stats(ts, &stats);
	if (stats.spaceType == SORT_SPACE_TYPE_DISK)
	{
		r->spilled = true;
		r->disk = Max(r->disk, stats.spaceUsed * 1024);
	}
	else
		r->peak = Max(r->peak, stats.spaceUsed * 1024);
}

static void
read_store(Tuplestorestate *store, Reading *r)
{
	if (store == NULL)
		return;
#if PG_VERSION_NUM >= 180000
	{
		char	   *type = NULL;
		int64		bytes = 0;

		tuplestore_get_stats(store, &type, &bytes);
		if (type != NULL && strcmp(type, "Disk") == 0)
		{
			r->spilled = true;
			r->disk = Max(r->disk, bytes);
		}
		else
			r->peak = Max(r->peak, bytes);
	}
#else
	if (!tuplestore_in_memory(store))
		r->spilled = true;
#endif
}

static void
read_hash(HashJoinTable table, Reading *r)
{
	if (table == NULL)
		return;
	r->peak = (int64) table->spacePeak;
	if (table->nbatch > 1)
	{
		r->spilled = true;
		r->disk = (int64) table->spacePeak * (table->nbatch - 1);
	}
}

static void
read_agg(AggState *agg, Reading *r)
{
	if (agg->aggstrategy != AGG_HASHED && agg->aggstrategy != AGG_MIXED)
		return;
	if (agg->hash_mem_peak > 0)
		r->peak = (int64) agg->hash_mem_peak;
	if (agg->hash_disk_used > 0 || agg->hash_batches_used > 1)
	{
		r->spilled = true;
		r->disk = (int64) agg->hash_disk_used * 1024;
	}
}

static void
read_memoize(MemoizeState *m, Reading *r)
{
	r->peak = (int64) (m->stats.mem_peak > 0 ? m->stats.mem_peak : m->mem_used);
	if (m->stats.cache_evictions > 0 || m->stats.cache_overflows > 0)
		r->spilled = true;
}

static void
read_bitmap(BitmapHeapScanState *b, Reading *r)
{
#if PG_VERSION_NUM >= 180000
	r->spilled = b->stats.lossy_pages > 0;
#else
	r->spilled = b->lossy_pages > 0;
#endif
}

/* What ps (the node's own plan state) shows of node */
static void
read_node(PlanState *ps, BulkheadMemNode *node)
{
	Reading		r = {-1, false, 0};

	switch (node->kind)
	{
		case BULKHEAD_MEM_SORT:
			if (IsA(ps, SortState))
				read_sort((Tuplesortstate *) ((SortState *) ps)->tuplesortstate, &r);
			break;
		case BULKHEAD_MEM_INCSORT:
			if (IsA(ps, IncrementalSortState))
			{
				read_sort(((IncrementalSortState *) ps)->fullsort_state, &r);
				read_sort(((IncrementalSortState *) ps)->prefixsort_state, &r);
			}
			break;
		case BULKHEAD_MEM_MATERIAL:
			if (IsA(ps, MaterialState))
				read_store(((MaterialState *) ps)->tuplestorestate, &r);
			break;
		case BULKHEAD_MEM_CTE:
			if (IsA(ps, CteScanState) && ((CteScanState *) ps)->leader != NULL)
				read_store(((CteScanState *) ps)->leader->cte_table, &r);
			break;
		case BULKHEAD_MEM_WINDOWAGG:
			if (IsA(ps, WindowAggState))
				read_store(((WindowAggState *) ps)->buffer, &r);
			break;
		case BULKHEAD_MEM_TABLEFUNC:
			if (IsA(ps, TableFuncScanState))
				read_store(((TableFuncScanState *) ps)->tupstore, &r);
			break;
		case BULKHEAD_MEM_RECURSIVE:
			if (IsA(ps, RecursiveUnionState))
			{
				read_store(((RecursiveUnionState *) ps)->working_table, &r);
				read_store(((RecursiveUnionState *) ps)->intermediate_table, &r);
			}
			break;
		case BULKHEAD_MEM_HASH:
			if (IsA(ps, HashState))
				read_hash(((HashState *) ps)->hashtable, &r);
			break;
		case BULKHEAD_MEM_AGG:
			if (IsA(ps, AggState))
				read_agg((AggState *) ps, &r);
			break;
		case BULKHEAD_MEM_MEMOIZE:
			if (IsA(ps, MemoizeState))
				read_memoize((MemoizeState *) ps, &r);
			break;
		case BULKHEAD_MEM_BITMAP:
			if (IsA(ps, BitmapHeapScanState))
				read_bitmap((BitmapHeapScanState *) ps, &r);
			break;
		default:
			return;
	}
	/* it spilled because its grant was full: it used that much at least */
	if (r.spilled)
		r.peak = Max(r.peak, (int64) node->run_kb * 1024);
	node->peak = r.peak;
	node->spilled = r.spilled;
	node->spill_bytes = r.disk;
}

typedef struct PeakWalk
{
	BulkheadMemPlan *plan;
	int64		in_query_cxt;	/* bytes its nodes keep in es_query_cxt */
} PeakWalk;

static bool
peak_walker(PlanState *ps, PeakWalk *pw)
{
	int			i;

	if (ps == NULL)
		return false;
	for (i = 0; i < pw->plan->nnodes; i++)
	{
		BulkheadMemNode *node = &pw->plan->nodes[i];

		if (node->plan_node_id != ps->plan->plan_node_id ||
			node->kind == BULKHEAD_MEM_GATHER)
			continue;
		read_node(ps, node);
		/* a bitmap (and, 15-17, a store) lives in es_query_cxt's blocks */
		if (node->kind == BULKHEAD_MEM_BITMAP
#if PG_VERSION_NUM < 180000
			|| node->kind == BULKHEAD_MEM_MATERIAL || node->kind == BULKHEAD_MEM_CTE ||
			node->kind == BULKHEAD_MEM_WINDOWAGG || node->kind == BULKHEAD_MEM_TABLEFUNC ||
			node->kind == BULKHEAD_MEM_RECURSIVE ||
			node->kind == BULKHEAD_MEM_FUNCTIONSCAN
#endif
			)
			pw->in_query_cxt += (int64) (node->copies * node->run_kb) * 1024;
		if (node->kind == BULKHEAD_MEM_AGG && node->value_peak > 0)
			pw->plan->extra_peak += node->value_peak;
		break;
	}
	return planstate_tree_walker(ps, peak_walker, (void *) pw);
}

void
bulkhead_nodepeak_read(QueryDesc *queryDesc, BulkheadMemPlan *plan)
{
	PeakWalk	pw = {plan, 0};
	EState	   *estate = queryDesc->estate;
	ListCell   *lc;
	int64		own;

	plan->extra_peak = 0;
	if (queryDesc->planstate == NULL || estate == NULL)
	{
		plan->extra_peak = -1;
		return;
	}
	(void) peak_walker(queryDesc->planstate, &pw);
	foreach(lc, estate->es_subplanstates)
		(void) peak_walker((PlanState *) lfirst(lc), &pw);
	own = (int64) MemoryContextMemAllocated(estate->es_query_cxt, false);
	if (own > pw.in_query_cxt)
		plan->extra_peak += own - pw.in_query_cxt;
}

void
bulkhead_nodepeak_sample_agg(PlanState *ps, BulkheadMemNode *node)
{
	AggState   *agg = (AggState *) ps;
	int64		bytes = 0;
	int			i;

	if (!IsA(ps, AggState) || agg->aggcontexts == NULL ||
		agg->aggstrategy == AGG_HASHED)
		return;
	for (i = 0; i < agg->maxsets; i++)
		if (agg->aggcontexts[i] != NULL)
			bytes += (int64) MemoryContextMemAllocated(agg->aggcontexts[i]->ecxt_per_tuple_memory,
													   true);
	if (bytes > node->value_peak)
		node->value_peak = bytes;
}
