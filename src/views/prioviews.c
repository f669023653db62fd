/*-------------------------------------------------------------------------
 *
 * prioviews.c
 *	  Priorities (1.5) as the views show them: each permit's importance
 *	  and boost (joined into bulkhead_activity) and each workload's boost
 *	  counters (joined into bulkhead_stats).
 *
 * As memviews.c, the functions here keep the columns of bulkhead_stats()
 * and bulkhead_activity() those of 1.2, so that the update replaces the
 * views (keeping their privileges) rather than dropping them.  An entry's
 * priority (shared->entry_prio[]) is read under its slot's lock held
 * shared, together with the entry it belongs to, as bulkhead_activity()
 * reads the entry: a row is never half-made, but the two functions read
 * a moment apart.
 *
 * What a row shows of importance: for a waiter, the rank it has now, as
 * its queue would serve it (the importance its wait carries, raised by
 * aging: bulkhead_importance_rank without the boost, which has a column
 * of its own); for a holder, the importance its wait carried.
 *
 * A row in state 'waiting for memory' shows the importance that wait
 * carries (grantstate.c's read of the memory waiters), and a memory
 * grant's boost counts as the row's.
 *
 * Owns no state.  Called by PostgreSQL's function manager only; calls
 * shmem.c, importance.c, disclose.c and grantstate.c.
 *
 *-------------------------------------------------------------------------
 */
#include "views/prioviews.h"
#include "acl/disclose.h"
#include "memory/grantstate.h"
#include "workload/entry_list.h"
#include "workload/importance.h"

#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"	/* funcapi.h includes it only up to 18 */

PG_FUNCTION_INFO_V1(bulkhead_priority_stats);
PG_FUNCTION_INFO_V1(bulkhead_priority_activity);

/*
 * bulkhead_priority_stats(): per defined workload, since stats_reset, the
 * waits served ahead of their queue as lock holders, and of those, the ones
 * served over the limit.
 */
Datum
bulkhead_priority_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		char		name[NAMEDATALEN];
		uint64		boosts;
		uint64		borrowed;
		Datum		values[3];
		bool		nulls[3] = {0};

		bulkhead_slot_lock(slot, LW_SHARED);
		if (!slot->in_use || !slot->defined)
		{
			LWLockRelease(slot->lock);
			continue;
		}
		strlcpy(name, slot->name, NAMEDATALEN);
		boosts = slot->stats.boosts;
		borrowed = slot->stats.borrowed;
		LWLockRelease(slot->lock);

		values[0] = CStringGetTextDatum(name);
		values[1] = Int64GetDatum((int64) boosts);
		values[2] = Int64GetDatum((int64) borrowed);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* One backend's priority in one workload, copied out under the slot lock */
typedef struct PrioRow
{
	int			pid;
	int			procno;			/* the owner's PGPROC */
	int			importance;		/* a waiter's: its rank by now */
	bool		boosted;
	bool		borrowed;
} PrioRow;

/*
 * Add the entries of list (waiting: ranked by now) to rows[0..n), one row
 * per backend: a backend with two permits of the workload (a session's and
 * a transaction's) shows the higher importance, and a boost of either, so
 * that the view's join on (pid, workload) never doubles a row.  Caller
 * holds the slot's lock.
 */
static int
copy_prio(BulkheadEntryList *list, bool waiting, TimestampTz now,
		  PrioRow *rows, int n)
{
	BulkheadEntry *entry;

	entry_list_foreach(entry, list)
	{
		const BulkheadEntryPrio *prio = &bulkhead_shared->entry_prio[entry_index(entry)];
		int			importance = waiting ?
			bulkhead_importance_rank(prio->importance, BULKHEAD_BOOST_NONE,
									 entry->queued_at, now) :
			prio->importance;
		int			r;

		for (r = 0; r < n && rows[r].pid != entry->pid; r++)
			;
		if (r == n)
		{
			rows[n].pid = entry->pid;
			rows[n].procno = entry_index(entry) / bulkhead_shared->permits_per_backend;
			rows[n].importance = importance;
			rows[n].boosted = rows[n].borrowed = false;
			n++;
		}
		rows[r].importance = Max(rows[r].importance, importance);
		rows[r].boosted |= prio->boost != BULKHEAD_BOOST_NONE;
		rows[r].borrowed |= prio->boost == BULKHEAD_BOOST_BORROWED;
	}
	return n;
}

/*
 * A backend's memory wait (or the grant it came from) charged to workload
 * slotno: while it waits, the row shows the importance that wait carries;
 * and a lock holder's boost of the memory grant counts as the row's.
 */
static void
apply_memory(PrioRow *row, int slotno, const BulkheadMemBackendRow *mem, int nmem)
{
	int			m;

	for (m = 0; m < nmem; m++)
	{
		if (mem[m].pid != row->pid || mem[m].slot != slotno)
			continue;
		if (mem[m].waiting)
			row->importance = mem[m].importance;
		row->boosted |= mem[m].boost != BULKHEAD_BOOST_NONE;
		row->borrowed |= mem[m].boost == BULKHEAD_BOOST_BORROWED;
	}
}

/* Emit rows[0..n) of workload name, those the current user may see */
static void
put_rows(ReturnSetInfo *rsinfo, const char *name, const PrioRow *rows, int n,
		 bool see_all)
{
	int			r;

	for (r = 0; r < n; r++)
	{
		Datum		values[5];
		bool		nulls[5] = {0};
		const char *importance = bulkhead_importance_name(rows[r].importance);

		if (!bulkhead_may_see_backend(rows[r].pid, rows[r].procno, see_all))
			continue;
		values[0] = Int32GetDatum(rows[r].pid);
		values[1] = CStringGetTextDatum(name);
		nulls[2] = importance == NULL;
		values[2] = nulls[2] ? (Datum) 0 : CStringGetTextDatum(importance);
		values[3] = BoolGetDatum(rows[r].boosted);
		values[4] = BoolGetDatum(rows[r].borrowed);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * bulkhead_priority_activity(): per backend and workload it holds or
 * awaits a permit of, of the backends the current user may see (as
 * bulkhead_activity()), its importance (see the header), whether it was
 * served ahead of its queue as a lock holder (or is being served so), for
 * a permit or for the memory its statement waits for, and whether it holds
 * a permit or a grant borrowed over the limit.
 */
Datum
bulkhead_priority_activity(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nentries = bulkhead_shared->nbackends * bulkhead_shared->permits_per_backend;
	PrioRow    *rows;
	BulkheadMemBackendRow *mem;
	int			nmem;
	bool		see_all;
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rows = palloc(sizeof(PrioRow) * nentries);
	mem = palloc(sizeof(BulkheadMemBackendRow) * bulkhead_shared->nbackends);
	/* the memory waits first, under the grants' lock alone */
	nmem = bulkhead_grants_backends(mem, bulkhead_shared->nbackends);
	see_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		char		name[NAMEDATALEN];
		TimestampTz now = GetCurrentTimestamp();
		int			n;
		int			r;

		bulkhead_slot_lock(slot, LW_SHARED);
		if (!slot->in_use)
		{
			LWLockRelease(slot->lock);
			continue;
		}
		strlcpy(name, slot->name, NAMEDATALEN);
		n = copy_prio(&slot->holders, false, now, rows, 0);
		n = copy_prio(&slot->waiters, true, now, rows, n);
		LWLockRelease(slot->lock);

		for (r = 0; r < n; r++)
			apply_memory(&rows[r], i, mem, nmem);
		put_rows(rsinfo, name, rows, n, see_all);
	}
	pfree(mem);
	pfree(rows);
	return (Datum) 0;
}
