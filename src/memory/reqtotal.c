/*-------------------------------------------------------------------------
 *
 * reqtotal.c
 *	  Memory grants (1.5): the request a statement's memory nodes add up
 *	  to, and their limits when it is granted less.
 *
 * Each node asks its request per copy, in each process that runs it.  The
 * nodes whose limit is fixed when the executor starts share one limit, the
 * largest of their requests; a Gather's workers run every node below it at
 * the largest request below it (a worker takes the leader's settings at
 * the Gather's first call).  Granted less, every node's limit is scaled as
 * much, never below 64 kB (a floor per node, as 1.4's); what feedback
 * asks beyond the nodes is dropped first, so it is never part of a floor.
 *
 * Owns no state; calls no module.  Called by memory.c.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/reqtotal.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/guc.h"

/* bytes as kB, rounded up */
static int
to_kb(double bytes)
{
	return (int) Min(ceil(bytes / 1024.0), (double) MAX_KILOBYTES);
}

/*
 * The request of mp's nodes as they ask now: the start nodes share the
 * largest of their requests, a Gather's workers the largest below it.
 * Sets each node's run_kb to its request, and mp->start_kb.
 */
void
bulkhead_reqtotal_total(BulkheadMemPlan *mp, BulkheadMemRequest *req)
{
	double		bytes = 0;
	int			start_kb = 0;
	int			max_kb = 0;
	int			i;

	req->nodes = 0;
	for (i = 0; i < mp->nnodes; i++)
	{
		BulkheadMemNode *n = &mp->nodes[i];

		n->run_kb = to_kb(n->request);
		if (n->hold == BULKHEAD_HOLD_START && n->copies > 0)
			start_kb = Max(start_kb, n->run_kb);
	}
	for (i = 0; i < mp->nnodes; i++)
	{
		BulkheadMemNode *n = &mp->nodes[i];

		if (n->hold == BULKHEAD_HOLD_START && n->copies > 0)
			n->run_kb = start_kb;
		if (n->gather >= 0 && n->copies > 0)
			mp->nodes[n->gather].run_kb = Max(mp->nodes[n->gather].run_kb, n->run_kb);
	}
	for (i = 0; i < mp->nnodes; i++)
	{
		BulkheadMemNode *n = &mp->nodes[i];

		if (n->kind == BULKHEAD_MEM_GATHER || n->copies <= 0)
			continue;
		/*
		 * Below a Gather, the leader's copy too at the Gather's limit: the
		 * leader may run it inside the Gather's first call, at its settings
		 */
		if (n->gather >= 0)
			bytes += n->copies * (1 + n->workers) *
				(double) mp->nodes[n->gather].run_kb * 1024.0;
		else
			bytes += n->copies * (double) n->run_kb * 1024.0;
		max_kb = Max(max_kb, n->run_kb);
		req->nodes += (int) Min(n->copies * (1 + n->workers), (double) INT_MAX / 4);
	}
	mp->start_kb = start_kb > 0 ? start_kb : mp->start_kb;
	req->maintenance = false;
	req->setting_kb = Max(max_kb, 1);
	req->units = bytes / 1024.0 / req->setting_kb;
	req->fixed = mp->fixed;
	req->extra = mp->extra;
}

void
bulkhead_reqtotal_at_limits(BulkheadMemPlan *mp)
{
	int			i;

	for (i = 0; i < mp->nnodes; i++)
	{
		mp->nodes[i].request = mp->nodes[i].limit;
		mp->nodes[i].source = BULKHEAD_SOURCE_LIMIT;
	}
}

/*
 * The limits mp's nodes run with when its request was granted at setting_kb
 * (of req->setting_kb): each scaled as much, never below the floor
 */
void
bulkhead_reqtotal_assign(BulkheadMemPlan *mp, const BulkheadMemRequest *req, int setting_kb)
{
	double		f;
	int			i;

	if (setting_kb >= req->setting_kb)
		return;
	f = (double) setting_kb / (double) req->setting_kb;
	for (i = 0; i < mp->nnodes; i++)
	{
		BulkheadMemNode *n = &mp->nodes[i];

		n->run_kb = Max((int) floor(n->run_kb * f), Min(BULKHEAD_MEM_FLOOR_KB, n->run_kb));
	}
	mp->start_kb = Max((int) floor(mp->start_kb * f),
					   Min(BULKHEAD_MEM_FLOOR_KB, mp->start_kb));
}


int
bulkhead_reqtotal_fit(const BulkheadMemRequest *req, int64 avail)
{
	int			floor_kb = req->maintenance ? BULKHEAD_MAINT_FLOOR_KB :
		BULKHEAD_MEM_FLOOR_KB;
	double		kb;

	if (req->units <= 0)
		return req->setting_kb;
	kb = floor(((double) avail - req->fixed) / 1024.0 / req->units);
	if (kb >= req->setting_kb)
		return req->setting_kb;
	return (int) Max(kb, (double) Min(floor_kb, req->setting_kb));
}

int64
bulkhead_reqtotal_shrink(const BulkheadMemRequest *req, int64 avail, int *setting_kb)
{
	int			s = Min(*setting_kb, bulkhead_reqtotal_fit(req, avail));
	double		bytes = bulkhead_memreq_bytes_at(req, s);

	/* nodes at their own setting: of the extra, what is left in avail */
	if (s >= req->setting_kb)
		bytes += Min(req->extra, Max((double) avail - bytes, 0.0));
	*setting_kb = s;
	return (int64) bytes;
}
