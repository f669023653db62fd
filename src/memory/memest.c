/*-------------------------------------------------------------------------
 *
 * memest.c
 *	  Memory grants (1.5): what a memory node is expected to use, from the
 *	  planner's estimates of its rows and width, in bytes (one copy, before
 *	  the margin).
 *
 * The sizes follow what each node keeps per row (64-bit, the server's
 * MAXALIGN):
 *
 *   a sorted row       MAXALIGN(width) + MAXALIGN(minimal tuple header)
 *                      + 24 (its SortTuple) + 16 (its chunk's header)
 *   a stored row       MAXALIGN(width) + MAXALIGN(minimal tuple header)
 *                      + 8 (its pointer) + 16 (its chunk's header)
 *   a hashed row       MAXALIGN(width) + MAXALIGN(minimal tuple header)
 *                      + 16 (a hash join's tuple header), plus a bucket
 *                      pointer per row
 *   a group            MAXALIGN(width) + MAXALIGN(minimal tuple header)
 *                      + its transition values (the planner's
 *                      transitionSpace) + 16 (its chunk's header) + 2 x 16
 *                      (its per-group state and that chunk's header)
 *                      + 2 x 24 (its hash entry, at a fill of one half)
 *   a bitmap's page    80 (a page entry and its share of the table)
 *
 * and their rows:
 *
 *   Sort, Incremental Sort   its input's rows; under a Limit of constant
 *                            count (and offset), a top-N sort keeps at
 *                            most 2 x bound + 1
 *   Material, WindowAgg      its input's rows
 *   CteScan                  the CTE's plan's rows
 *   FunctionScan             its rows (each function's own store)
 *   TableFuncScan            its rows
 *   a bitmap                 its index scan's rows (a page each at worst)
 *   Hash                     its input's rows (a parallel hash: all
 *                            participants' rows, rows_total)
 *   Memoize                  its estimated entries x the rows of a lookup
 *   Agg, hashed              its groups
 *   Agg, ordered aggregates  its input's rows per group
 *   RecursiveUnion           its rows
 *
 * Owns no state; calls no module.  Called by memreq.c.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/memest.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type_d.h"

#define SORT_ROW_EXTRA		(24 + 16)
#define STORE_ROW_EXTRA		(8 + 16)
#define HASH_ROW_EXTRA		16
#define GROUP_EXTRA			(16 + 16 + 16 + 2 * 24)
#define BITMAP_PAGE_BYTES	80

static double
row_bytes(int width, int extra)
{
	return (double) (MAXALIGN(Max(width, 0)) + MAXALIGN(SizeofMinimalTupleHeader) + extra);
}

static double
rows_of(Plan *plan)
{
	return plan == NULL ? 1.0 : Max(plan->plan_rows, 1.0);
}

double
bulkhead_memest_sort(double rows, int width, double bound)
{
	if (bound > 0 && rows > 2 * bound + 1)
		rows = 2 * bound + 1;
	return Max(rows, 1.0) * row_bytes(width, SORT_ROW_EXTRA);
}

double
bulkhead_memest_store(double rows, int width)
{
	return Max(rows, 1.0) * row_bytes(width, STORE_ROW_EXTRA);
}

double
bulkhead_memest_hash(double rows, int width)
{
	return Max(rows, 1.0) * (row_bytes(width, HASH_ROW_EXTRA) + sizeof(void *));
}

double
bulkhead_memest_groups(double groups, int width, double transition_space)
{
	return Max(groups, 1.0) *
		(row_bytes(width, GROUP_EXTRA) + MAXALIGN((Size) Max(transition_space, 0.0)));
}

double
bulkhead_memest_bitmap(double rows)
{
	return Max(rows, 1.0) * BITMAP_PAGE_BYTES;
}

/* A Limit's constant count plus offset: the bound of a sort below it */
double
bulkhead_memest_limit_bound(Limit *limit)
{
	Const	   *count = (Const *) limit->limitCount;
	Const	   *offset = (Const *) limit->limitOffset;
	double		bound;

	if (count == NULL || !IsA(count, Const) || count->constisnull ||
		count->consttype != INT8OID)
		return 0;
	bound = (double) DatumGetInt64(count->constvalue);
	if (offset != NULL)
	{
		if (!IsA(offset, Const) || offset->consttype != INT8OID)
			return 0;
		if (!offset->constisnull)
			bound += (double) DatumGetInt64(offset->constvalue);
	}
	return bound > 0 ? bound : 0;
}

/* A node's rows: the Sort's and the Material's are their input's */
double
bulkhead_memest_node(Plan *plan, int kind, double bound)
{
	switch (kind)
	{
		case BULKHEAD_MEM_SORT:
		case BULKHEAD_MEM_INCSORT:
			return bulkhead_memest_sort(rows_of(plan->lefttree), plan->plan_width, bound);
		case BULKHEAD_MEM_MATERIAL:
		case BULKHEAD_MEM_WINDOWAGG:
			return bulkhead_memest_store(rows_of(plan->lefttree),
										 plan->lefttree ? plan->lefttree->plan_width :
										 plan->plan_width);
		case BULKHEAD_MEM_FUNCTIONSCAN:
		case BULKHEAD_MEM_TABLEFUNC:
		case BULKHEAD_MEM_RECURSIVE:
		case BULKHEAD_MEM_CTE:
			return bulkhead_memest_store(rows_of(plan), plan->plan_width);
		case BULKHEAD_MEM_BITMAP:
			return bulkhead_memest_bitmap(rows_of(plan));
		case BULKHEAD_MEM_HASH:
			{
				Hash	   *hash = (Hash *) plan;
				double		rows = rows_of(plan->lefttree);

				if (plan->parallel_aware && hash->rows_total > 0)
					rows = hash->rows_total;
				return bulkhead_memest_hash(rows, plan->plan_width);
			}
		case BULKHEAD_MEM_MEMOIZE:
			{
				Memoize    *m = (Memoize *) plan;
				double		entries = m->est_entries > 0 ? (double) m->est_entries :
				rows_of(plan);

				return entries * (bulkhead_memest_store(rows_of(plan->lefttree),
														plan->plan_width) + 64);
			}
		default:
			return 0;
	}
}
