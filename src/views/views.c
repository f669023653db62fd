/*-------------------------------------------------------------------------
 *
 * views.c
 *	  bulkhead_stats, bulkhead_activity and bulkhead_stats_reset.
 *
 * Each workload is read under its slot lock held shared, so a row never
 * shows a half-made change; the workloads of one tree of budgets are read
 * under one hold of its lock (they share it), so their counts add up;
 * different trees are read one after the other.
 *
 * Owns no shared state: the statistics are reset through slot.c.  Called by
 * PostgreSQL's function manager only.
 *
 *-------------------------------------------------------------------------
 */
#include "views/views.h"
#include "permit/permitfuncs.h"
#include "guards/caps.h"
#include "acl/disclose.h"
#include "memory/grants.h"
#include "workload/entry_list.h"
#include "workload/slot.h"
#include "workload/slotstats.h"
#include "workload/budget.h"
#include "memory/grantstate.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"	/* funcapi.h includes it only up to 18 */

PG_FUNCTION_INFO_V1(bulkhead_stats);
PG_FUNCTION_INFO_V1(bulkhead_activity);
PG_FUNCTION_INFO_V1(bulkhead_keys);
PG_FUNCTION_INFO_V1(bulkhead_lane_settings);
PG_FUNCTION_INFO_V1(bulkhead_stats_reset_all);
PG_FUNCTION_INFO_V1(bulkhead_stats_reset);

/*
 * Room for every column of every version's bulkhead_stats.  Each version
 * only appends columns (1.1: deadlocks, the 25th), and a row is formed with
 * the calling function's own result descriptor, so an installed 1.0 (24
 * columns) keeps working with this library: the columns it does not declare
 * are left out.  Keep it so: a new column goes at the end, here and in the
 * OUT list of the newest install script.
 */
#define STATS_COLS		33

#if PG_VERSION_NUM < 150000
/* PG 13/14: the materialize-mode set-up that PG 15 calls InitMaterializedSRF */
static void
InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext old;
	TupleDesc	tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	MemoryContextSwitchTo(old);
}
#endif
#define ACTIVITY_COLS	8		/* 1.0 and 1.1: 6 */

static Datum
ms_datum(uint64 usec)
{
	return Float8GetDatum((double) usec / 1000.0);
}

/*
 * A percentile column: NULL when nothing was measured.  A bucket's midpoint
 * may lie above the largest value measured: max_us caps it when known.
 */
static void
percentile_column(const BulkheadHistogram *hist, double p, uint64 max_us,
				  Datum *value, bool *isnull)
{
	double		usec = bulkhead_hist_percentile(hist, p);

	if (max_us > 0 && usec > (double) max_us)
		usec = (double) max_us;
	*isnull = usec < 0;
	*value = Float8GetDatum(usec / 1000.0);
}

static const char *
scope_name(uint8 scope)
{
	switch (scope)
	{
		case BULKHEAD_SCOPE_SESSION:
			return "session";
		case BULKHEAD_SCOPE_XACT:
			return "transaction";
		default:
			return "auto";
	}
}

/* A lane's settings as a text[] of 'name=value' (NULL: none) */
static Datum
settings_datum(const BulkheadConfig *config, bool *isnull)
{
	Datum		elems[BULKHEAD_NUM_CAPS];
	int			n = 0;
	int			i;

	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
		if (config->cap_text[i][0] != '\0')
			elems[n++] = CStringGetTextDatum(psprintf("%s=%s", bulkhead_cap_name(i),
													  config->cap_text[i]));
	*isnull = n == 0;
	if (n == 0)
		return (Datum) 0;
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false,
										   TYPALIGN_INT));
}

/*
 * Copy every slot, those of one tree under one hold of the tree's lock: a
 * tree's rows are one snapshot (its levels' counts add up), different trees
 * are read one after the other.  done[] has room for every slot.
 */
static void
copy_slots(BulkheadSlot *copies, bool *done)
{
	int			n = bulkhead_shared->nslots;
	int			i;
	int			j;

	memset(done, 0, sizeof(bool) * n);
	for (i = 0; i < n; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		LWLock	   *lock;

		if (done[i])
			continue;
		bulkhead_slot_lock(slot, LW_SHARED);
		lock = slot->lock;
		/* held, lock stays the lock in force of exactly its tree's slots */
		for (j = i; j < n; j++)
		{
			if (done[j] || bulkhead_shared->slots[j].lock != lock)
				continue;
			memcpy(&copies[j], &bulkhead_shared->slots[j], sizeof(BulkheadSlot));
			done[j] = true;
		}
		LWLockRelease(lock);
	}
}

Datum
bulkhead_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nslots = bulkhead_shared ? bulkhead_shared->nslots : 0;
	BulkheadSlot *copies;
	bool	   *done;
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	copies = palloc(sizeof(BulkheadSlot) * nslots);
	done = palloc(sizeof(bool) * nslots);
	copy_slots(copies, done);

	for (i = 0; i < nslots; i++)
	{
		BulkheadSlot *copy = &copies[i];
		BulkheadStats *st = &copy->stats;
		Datum		values[STATS_COLS];
		bool		nulls[STATS_COLS];
		int			c = 0;

		if (!copy->in_use || !copy->defined)
			continue;

		memset(nulls, 0, sizeof(nulls));
		values[c++] = CStringGetTextDatum(copy->name);
		values[c++] = CStringGetTextDatum(copy->config.shadow ? "shadow" : "enforce");
		values[c++] = Int32GetDatum(copy->config.max_running);
		values[c++] = Int32GetDatum(copy->config.max_queued);
		values[c++] = Int32GetDatum(copy->running);
		/*
		 * Its own waiters: a budget's callers wait at its leaves (a budget
		 * has some of its own only if they queued before it became one), so
		 * running + queued <= limit + max_queued holds at every level
		 */
		values[c++] = Int32GetDatum(copy->queued);
		values[c++] = Int64GetDatum((int64) st->acquired);
		values[c++] = Int64GetDatum((int64) st->rejected_full);
		values[c++] = Int64GetDatum((int64) st->timed_out);
		values[c++] = Int64GetDatum((int64) st->cancelled);
		values[c++] = Int64GetDatum((int64) st->released);
		values[c++] = Int64GetDatum((int64) st->shadow_queued);
		values[c++] = Int64GetDatum((int64) st->shadow_rejected);
		values[c++] = Int32GetDatum(st->peak_running);
		values[c++] = Int32GetDatum(st->peak_queued);
		values[c++] = ms_datum(st->wait_time_total_us);
		values[c++] = ms_datum(st->wait_time_max_us);
		percentile_column(&st->wait_hist, 0.50, st->wait_time_max_us, &values[c], &nulls[c]), c++;
		percentile_column(&st->wait_hist, 0.95, st->wait_time_max_us, &values[c], &nulls[c]), c++;
		percentile_column(&st->wait_hist, 0.99, st->wait_time_max_us, &values[c], &nulls[c]), c++;
		values[c++] = ms_datum(st->hold_time_total_us);
		percentile_column(&st->hold_hist, 0.50, 0, &values[c], &nulls[c]), c++;
		percentile_column(&st->hold_hist, 0.99, 0, &values[c], &nulls[c]), c++;
		values[c++] = TimestampTzGetDatum(st->stats_reset);
		/* 1.1 */
		values[c++] = Int64GetDatum((int64) st->deadlocks);
		values[c++] = Int32GetDatum(copy->current_limit);
		/* 1.2: shared budgets (the parent as the tree is now) */
		nulls[c] = copy->parent < 0;
		values[c] = nulls[c] ? (Datum) 0 :
			CStringGetTextDatum(copies[copy->parent].name);
		c++;
		values[c++] = Int32GetDatum(copy->config.reserved);
		values[c++] = Int32GetDatum(Max(copy->config.weight, 1));
		values[c++] = Int32GetDatum(bulkhead_budget_borrowed(copy));
		values[c++] = Int64GetDatum((int64) st->over_hold);
		values[c++] = Int64GetDatum((int64) st->moved_out);
		values[c++] = Int64GetDatum((int64) st->moved_in);
		Assert(c <= STATS_COLS);
		Assert(rsinfo->setDesc->natts <= c);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(copies);
	pfree(done);
	return (Datum) 0;
}

/* One row of bulkhead_activity, copied out under the slot lock */
typedef struct ActivityRow
{
	int			pid;
	int			procno;			/* the owner's PGPROC */
	bool		running;
	uint8		scope;
	TimestampTz queued_at;
	TimestampTz since;
	char		moved_from[NAMEDATALEN];	/* "" unless the worker moved it */
	char		key[BULKHEAD_KEY_MAXLEN + 1];	/* "": none */
} ActivityRow;

static int
copy_list(BulkheadEntryList *list, bool running, ActivityRow *rows, int n)
{
	BulkheadEntry *entry;

	entry_list_foreach(entry, list)
	{
		rows[n].pid = entry->pid;
		rows[n].procno = entry_index(entry) / bulkhead_shared->permits_per_backend;
		rows[n].running = running;
		rows[n].scope = entry->scope;
		rows[n].queued_at = entry->queued_at;
		rows[n].since = entry->since;
		rows[n].moved_from[0] = '\0';
		rows[n].key[0] = '\0';
		if (bulkhead_entry_key(entry) != BULKHEAD_NO_KEY)
			strlcpy(rows[n].key, bulkhead_key_at(bulkhead_entry_key(entry))->name,
					sizeof(rows[n].key));
		/* moved by max_hold, or (1.3) by a statement's lane, queued or not */
		if (bulkhead_shared->moved[entry_index(entry)].since == entry->since)
			strlcpy(rows[n].moved_from,
					bulkhead_shared->moved[entry_index(entry)].from, NAMEDATALEN);
		n++;
	}
	return n;
}

/* May the current user see the backend that owns a row?  (disclose.c) */
static bool
row_visible(const ActivityRow *row, bool see_all)
{
	return bulkhead_may_see_backend(row->pid, row->procno, see_all);
}

/*
 * bulkhead_activity: one row per permit held or awaited, of the backends the
 * current user may see (row_visible).
 */
Datum
bulkhead_activity(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			max_rows = bulkhead_shared ?
		bulkhead_shared->nbackends * bulkhead_shared->permits_per_backend : 0;
	ActivityRow *rows;
	int			i;

	bool		see_all;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rows = palloc(sizeof(ActivityRow) * max_rows);
	see_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		char		name[NAMEDATALEN];
		TimestampTz now;
		int			n;
		int			r;

		bulkhead_slot_lock(slot, LW_SHARED);
		if (!slot->in_use)
		{
			LWLockRelease(slot->lock);
			continue;
		}
		strlcpy(name, slot->name, NAMEDATALEN);
		n = copy_list(&slot->holders, true, rows, 0);
		n = copy_list(&slot->waiters, false, rows, n);
		now = GetCurrentTimestamp();
		LWLockRelease(slot->lock);

		for (r = 0; r < n; r++)
		{
			Datum		values[ACTIVITY_COLS];
			bool		nulls[ACTIVITY_COLS] = {0};
			TimestampTz wait_end = rows[r].running ? rows[r].since : now;

			if (!row_visible(&rows[r], see_all))
				continue;
			values[0] = Int32GetDatum(rows[r].pid);
			values[1] = CStringGetTextDatum(name);
			values[2] = CStringGetTextDatum(rows[r].running ? "running" : "queued");
			values[3] = CStringGetTextDatum(scope_name(rows[r].scope));
			values[4] = TimestampTzGetDatum(rows[r].running ? rows[r].since : rows[r].queued_at);
			values[5] = ms_datum(wait_end > rows[r].queued_at ? wait_end - rows[r].queued_at : 0);
			/* 1.2: where a permit moved by max_hold came from */
			nulls[6] = rows[r].moved_from[0] == '\0';
			values[6] = nulls[6] ? (Datum) 0 : CStringGetTextDatum(rows[r].moved_from);
			/* 1.2: the key (tenant) it acquired as */
			nulls[7] = rows[r].key[0] == '\0';
			values[7] = nulls[7] ? (Datum) 0 : CStringGetTextDatum(rows[r].key);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/* One row of bulkhead_keys, copied out under the slot lock */
typedef struct KeyRow
{
	char		key[BULKHEAD_KEY_MAXLEN + 1];
	int			running;
	int			queued;
	TimestampTz oldest;			/* its head waiter's arrival; 0: none */
} KeyRow;

/*
 * bulkhead_keys: one row per key in use (holding or waiting), per workload.
 * Its EXECUTE is granted to pg_read_all_stats only: keys name tenants.
 */
Datum
bulkhead_keys(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KeyRow	   *rows;
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rows = palloc(sizeof(KeyRow) * bulkhead_shared->nkeys);

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		char		name[NAMEDATALEN];
		TimestampTz now;
		int32		k;
		int			n = 0;
		int			r;

		bulkhead_slot_lock(slot, LW_SHARED);
		if (!slot->in_use || !slot->keyed)
		{
			LWLockRelease(slot->lock);
			continue;
		}
		strlcpy(name, slot->name, NAMEDATALEN);
		for (k = slot->first_key; k >= 0 && n < bulkhead_shared->nkeys;
			 k = bulkhead_key_at(k)->next)
		{
			const BulkheadKey *key = bulkhead_key_at(k);

			/* a key kept idle for its debt (keys.c) is not in use */
			if (key->group.running == 0 && key->group.queued == 0)
				continue;
			strlcpy(rows[n].key, key->name, sizeof(rows[n].key));
			rows[n].running = key->group.running;
			rows[n].queued = key->group.queued;
			rows[n].oldest = key->group.queued > 0 ?
				entry_at(key->group.waiters.head)->queued_at : 0;
			n++;
		}
		now = GetCurrentTimestamp();
		LWLockRelease(slot->lock);

		for (r = 0; r < n; r++)
		{
			Datum		values[5];
			bool		nulls[5] = {0};

			values[0] = CStringGetTextDatum(name);
			values[1] = CStringGetTextDatum(rows[r].key);
			values[2] = Int32GetDatum(rows[r].running);
			values[3] = Int32GetDatum(rows[r].queued);
			nulls[4] = rows[r].oldest == 0;
			values[4] = nulls[4] ? (Datum) 0 :
				ms_datum(now > rows[r].oldest ? now - rows[r].oldest : 0);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	pfree(rows);
	return (Datum) 0;
}

/* Clear one slot's cumulative figures; false if it is not a workload */
static bool
reset_slot(BulkheadSlot *slot, const char *name)
{
	bool		done = false;

	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	if (slot->in_use && slot->defined &&
		(name == NULL || strcmp(slot->name, name) == 0))
	{
		/* current state is never reset: peaks start from it */
		bulkhead_slot_reset_stats(slot);
		done = true;
	}
	LWLockRelease(slot->lock);
	return done;
}

Datum
bulkhead_stats_reset_all(PG_FUNCTION_ARGS)
{
	int			i;

	bulkhead_check_loaded();
	for (i = 0; i < bulkhead_shared->nslots; i++)
		(void) reset_slot(&bulkhead_shared->slots[i], NULL);
	/* and the server's memory grants' figures (1.4, bulkhead_memory) */
	bulkhead_grants_server_reset();
	PG_RETURN_VOID();
}

Datum
bulkhead_stats_reset(PG_FUNCTION_ARGS)
{
	char		name[NAMEDATALEN];
	int			i;

	bulkhead_check_loaded();
	bulkhead_workload_name_arg(fcinfo, 0, name);
	for (i = 0; i < bulkhead_shared->nslots; i++)
		if (reset_slot(&bulkhead_shared->slots[i], name))
			PG_RETURN_VOID();
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("workload \"%s\" does not exist", name)));
	PG_RETURN_VOID();
}

/*
 * bulkhead_lane_settings() (1.3): each defined workload's settings, for
 * the view bulkhead_stats, which joins them to bulkhead_stats() (whose
 * columns stay those of 1.2, so an update keeps the view's privileges).
 */
Datum
bulkhead_lane_settings(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		char		name[NAMEDATALEN];
		BulkheadConfig *config = palloc(sizeof(BulkheadConfig));
		Datum		values[2];
		bool		nulls[2] = {0};

		bulkhead_slot_lock(slot, LW_SHARED);
		if (!slot->in_use || !slot->defined)
		{
			LWLockRelease(slot->lock);
			pfree(config);
			continue;
		}
		strlcpy(name, slot->name, NAMEDATALEN);
		memcpy(config->cap_text, slot->config.cap_text, sizeof(config->cap_text));
		LWLockRelease(slot->lock);

		values[0] = CStringGetTextDatum(name);
		values[1] = settings_datum(config, &nulls[1]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		pfree(config);
	}
	return (Datum) 0;
}
