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
 * Owns no state.  Called by PostgreSQL's function manager only; calls
 * shmem.c, importance.c and disclose.c.
 *
 *-------------------------------------------------------------------------
 */
#include "views/prioviews.h"
#include "acl/disclose.h"
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

/* One entry's priority, copied out under the slot lock */
typedef struct PrioRow
{
	int			pid;
	int			procno;			/* the owner's PGPROC */
	int			importance;		/* a waiter's: its rank by now */
	uint8		boost;
} PrioRow;

/* Copy the entries of list (waiting: ranked by now); caller holds the lock */
static int
copy_prio(BulkheadEntryList *list, bool waiting, TimestampTz now,
		  PrioRow *rows, int n)
{
	BulkheadEntry *entry;

	entry_list_foreach(entry, list)
	{
		const BulkheadEntryPrio *prio = &bulkhead_shared->entry_prio[entry_index(entry)];

		rows[n].pid = entry->pid;
		rows[n].procno = entry_index(entry) / bulkhead_shared->permits_per_backend;
		rows[n].boost = prio->boost;
		rows[n].importance = waiting ?
			bulkhead_importance_rank(prio->importance, BULKHEAD_BOOST_NONE,
									 entry->queued_at, now) :
			prio->importance;
		n++;
	}
	return n;
}

/*
 * bulkhead_priority_activity(): per permit held or awaited, of the
 * backends the current user may see (as bulkhead_activity()), its
 * importance (see the header), whether it was served ahead of its queue as
 * a lock holder (or is being served so), and whether it holds a permit
 * borrowed over the limit.
 */
Datum
bulkhead_priority_activity(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PrioRow    *rows;
	bool		see_all;
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rows = palloc(sizeof(PrioRow) *
				  bulkhead_shared->nbackends * bulkhead_shared->permits_per_backend);
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
			values[3] = BoolGetDatum(rows[r].boost != BULKHEAD_BOOST_NONE);
			values[4] = BoolGetDatum(rows[r].boost == BULKHEAD_BOOST_BORROWED);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	pfree(rows);
	return (Datum) 0;
}
