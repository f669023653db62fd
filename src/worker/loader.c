/*-------------------------------------------------------------------------
 *
 * loader.c
 *	  The worker's load: making shared memory match the configuration
 *	  tables, which tables.c reads.
 *
 * A load that fails (a table locked for longer than lock_timeout, a
 * recovery conflict on a standby) leaves shared memory as it was and is
 * tried again at the worker's next tick.
 *
 * Owns shared->config_loaded and shared->rows_pending (under dir_lock);
 * changes slots through slot.c, the rule set through rules.c and the
 * memory grants' limits (1.4) through grants.c.  Called
 * by worker.c only.
 *
 *-------------------------------------------------------------------------
 */
#include "worker/loader.h"
#include "worker/adaptive.h"
#include "workload/budget.h"
#include "memory/grants.h"
#include "config/rules.h"
#include "workload/slot.h"
#include "config/tables.h"
#include "memory/grantstate.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"

/* Caller holds dir_lock exclusively.  Slot of name (defined or not), or -1 */
static int
slot_of(const char *name)
{
	int			i;

	for (i = 0; i < bulkhead_shared->nslots; i++)
		if (bulkhead_shared->slots[i].in_use &&
			strcmp(bulkhead_shared->slots[i].name, name) == 0)
			return i;
	return -1;
}

static int
free_slot(void)
{
	int			i;

	for (i = 0; i < bulkhead_shared->nslots; i++)
		if (!bulkhead_shared->slots[i].in_use)
			return i;
	return -1;
}

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/*
 * Mark the rows that some row names as its parent: budgets, by the table.
 * Admission refuses them (42809) from the moment they are defined, before
 * their children join their tree at link_trees(), and after the children
 * left it (a budget renamed: its old name stays defined until the rules
 * are replaced), so a budget's name never takes permits as a leaf for an
 * instant, nor holds one when its children arrive.
 */
static void
mark_budgets(WorkloadRow *rows, int nrows)
{
	const char **parents = palloc(sizeof(char *) * Max(nrows, 1));
	int			n = 0;
	int			r;

	for (r = 0; r < nrows; r++)
		if (rows[r].config.parent[0] != '\0')
			parents[n++] = rows[r].config.parent;
	qsort(parents, n, sizeof(char *), compare_names);
	for (r = 0; r < nrows; r++)
	{
		const char *name = rows[r].name;

		rows[r].config.budget = n > 0 &&
			bsearch(&name, parents, n, sizeof(char *), compare_names) != NULL;
	}
	pfree(parents);
}

/* memory_timeout, NULL: queue_timeout */
static int64
grants_timeout(const BulkheadConfig *config)
{
	return config->memory_timeout_us >= 0 ?
		config->memory_timeout_us : config->queue_timeout_us;
}

/*
 * Define row in its slot (free: a new one), its memory limits and its
 * place under its budget's slot first (its statements may start at once);
 * false if no slot is free.  Caller holds dir_lock exclusively.
 */
static bool
define_row(WorkloadRow *row)
{
	int			s = slot_of(row->name);
	int			parent = row->config.parent[0] != '\0' ?
		slot_of(row->config.parent) : -1;
	BulkheadSlot *slot;

	if (s < 0 && (s = free_slot()) < 0)
		return false;
	slot = &bulkhead_shared->slots[s];
	bulkhead_grants_prepare(s, row->name, row->config.max_memory,
							grants_timeout(&row->config), row->config.shadow,
							parent);
	bulkhead_slot_lock(slot, LW_EXCLUSIVE);
	bulkhead_slot_define(slot, row->name, &row->config,
						 bulkhead_limit_at_load(slot, &row->config));
	LWLockRelease(slot->lock);
	return true;
}

/*
 * Define the workloads of rows that placed[] does not mark yet: update
 * those that have a slot, put new ones into free slots, and mark them in
 * placed[].  A budget before its children (a pass per level of a tree, the
 * rest in the last), so that a child's grants count under its budget from
 * its first statement.  Returns how many found no free slot.  Caller
 * holds dir_lock exclusively.
 */
static int
define_rows(WorkloadRow *rows, int nrows, bool *placed)
{
	bool	   *tried = palloc0(sizeof(bool) * Max(nrows, 1));
	int			skipped = 0;
	int			pass;
	int			r;

	for (pass = 0; pass <= BULKHEAD_MAX_DEPTH; pass++)
	{
		for (r = 0; r < nrows; r++)
		{
			const char *parent = rows[r].config.parent;

			if (placed[r] || tried[r])
				continue;
			if (pass < BULKHEAD_MAX_DEPTH && parent[0] != '\0' &&
				slot_of(parent) < 0)
				continue;		/* its budget is not placed yet */
			tried[r] = true;
			if (define_row(&rows[r]))
				placed[r] = true;
			else
				skipped++;
		}
	}
	pfree(tried);
	return skipped;
}

/*
 * Mark undefined the workloads that are not among rows: they admit no one
 * new, and a slot is freed once its last permit and waiter are gone.
 * seen[] has room for every slot.  Caller holds dir_lock exclusively.
 */
static void
undefine_others(WorkloadRow *rows, int nrows, bool *seen)
{
	BulkheadShared *shared = bulkhead_shared;
	int			r;
	int			i;

	memset(seen, 0, sizeof(bool) * shared->nslots);
	for (r = 0; r < nrows; r++)
	{
		int			s = slot_of(rows[r].name);

		if (s >= 0)
			seen[s] = true;
	}

	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];

		if (!slot->in_use || seen[i])
			continue;
		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
		bulkhead_slot_undefine(slot);
		LWLockRelease(slot->lock);
	}
}

/*
 * The parent each in-use slot should have (-1: a root) into new_parent[]:
 * a defined workload's is the slot of its parent row; a deleted one stays
 * where it is until nothing is held or awaited in it, then leaves its tree
 * (to be freed).  A chain deeper than BULKHEAD_MAX_DEPTH or a cycle (the
 * table's triggers refuse both; a defence only) makes the slot a root.
 * Caller holds dir_lock exclusively.
 */
static void
plan_trees(int *new_parent)
{
	BulkheadShared *shared = bulkhead_shared;
	bool		changed;
	int			i;

	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];

		new_parent[i] = -1;
		if (!slot->in_use)
			continue;
		if (slot->defined)
		{
			if (slot->config.parent[0] != '\0')
				new_parent[i] = slot_of(slot->config.parent);
		}
		else if (slot->running > 0 || slot->queued > 0 ||
				 slot->sub_queued > 0 || slot->first_child >= 0)
			new_parent[i] = slot->parent;
	}
	do
	{
		changed = false;
		for (i = 0; i < shared->nslots; i++)
		{
			int			depth = 1;
			int			s = i;

			while (new_parent[s] >= 0 && depth <= BULKHEAD_MAX_DEPTH)
			{
				s = new_parent[s];
				depth++;
			}
			if (depth > BULKHEAD_MAX_DEPTH)
			{
				ereport(LOG,
						(errmsg("bulkhead: workload \"%s\" is placed at the top of its own tree",
								shared->slots[i].name),
						 errdetail("Its parents form a cycle or a tree deeper than %d levels.",
								   BULKHEAD_MAX_DEPTH)));
				new_parent[i] = -1;
				changed = true;
			}
		}
	} while (changed);
}

/*
 * Make the trees of budgets those of the definitions, then serve every tree
 * (re-parenting may have made room anywhere).  Caller holds dir_lock
 * exclusively.
 */
static void
link_trees(void)
{
	BulkheadShared *shared = bulkhead_shared;
	int		   *new_parent = palloc(sizeof(int) * shared->nslots);
	int			i;

	plan_trees(new_parent);
	if (bulkhead_budget_restructure(new_parent))
	{
		for (i = 0; i < shared->nslots; i++)
		{
			BulkheadSlot *slot = &shared->slots[i];

			if (!slot->in_use || slot->parent >= 0)
				continue;
			bulkhead_slot_lock(slot, LW_EXCLUSIVE);
			bulkhead_slot_serve(slot, NULL);
			LWLockRelease(slot->lock);
		}
	}
	pfree(new_parent);
}

/*
 * Memory grants (1.4): grantstate.c's copy of each slot's limit, shadow mode
 * and place in its tree, made once the trees are linked; then its waiters
 * that fit are served.  A deleted workload keeps its limit and its place
 * (plan_trees keeps it under its budget) while anything is held or awaited
 * in it, as its permits do; a freed slot's level is emptied.  One lock at
 * a time: the slot's, then grants.c's.
 */
static void
publish_grants(void)
{
	BulkheadShared *shared = bulkhead_shared;
	int			i;

	/* the slots that serve another workload first: see grantstate.h */
	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];
		char		name[NAMEDATALEN];
		bool		in_use;

		bulkhead_slot_lock(slot, LW_SHARED);
		in_use = slot->in_use;
		if (in_use)
			strlcpy(name, slot->name, NAMEDATALEN);
		LWLockRelease(slot->lock);
		if (in_use)
			bulkhead_grants_claim(i, name);
	}
	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];
		char		name[NAMEDATALEN];
		bool		in_use;
		int64		max_memory = -1;
		int64		timeout_us = 0;
		bool		shadow = false;
		int			parent = -1;

		bulkhead_slot_lock(slot, LW_SHARED);
		in_use = slot->in_use;
		if (in_use)
		{
			strlcpy(name, slot->name, NAMEDATALEN);
			max_memory = slot->config.max_memory;
			timeout_us = grants_timeout(&slot->config);
			shadow = slot->config.shadow;
			parent = slot->parent;
		}
		LWLockRelease(slot->lock);
		if (in_use)
			bulkhead_grants_define(i, name, max_memory, timeout_us, shadow, parent);
		else
			bulkhead_grants_undefine(i);
	}
	bulkhead_grants_loaded();
}

/*
 * Make shared memory match the rows and the rules, in an order that never
 * leaves a rule naming a workload that is not defined (nor a child naming
 * a parent that is not), so that a rename
 * (ON UPDATE CASCADE) or a removal of a workload with its rules gives no
 * classified session a 42704: first the workloads of rows are defined (the
 * new ones too), then the rules replaced, then the workloads that are gone
 * undefined.  Rows that found no free slot take, last, the slots that this
 * load freed.  loaded says whether the rows are the table's contents
 * (false: the table could not be read, nothing is defined).  Nothing here
 * throws while a lock is held.
 */
static void
apply_config(WorkloadRow *rows, int nrows, const BulkheadRuleList *rules,
			 bool loaded)
{
	BulkheadShared *shared = bulkhead_shared;
	bool	   *placed = palloc0(sizeof(bool) * Max(nrows, 1));
	bool	   *seen = palloc(sizeof(bool) * shared->nslots);
	uint32		planning_lanes = 0;
	int			skipped;
	int			i;

	/* a hint for the planner hook: is a lane's plan worth keeping a copy? */
	for (i = 0; i < nrows; i++)
		if (rows[i].config.caps.mask & BULKHEAD_PLANNING_CAPS)
			planning_lanes++;
	pg_atomic_write_u32(&shared->planning_lanes, planning_lanes);

	mark_budgets(rows, nrows);
	LWLockAcquire(shared->dir_lock, LW_EXCLUSIVE);
	skipped = define_rows(rows, nrows, placed);
	link_trees();
	LWLockRelease(shared->dir_lock);

	bulkhead_rules_apply(rules);

	LWLockAcquire(shared->dir_lock, LW_EXCLUSIVE);
	undefine_others(rows, nrows, seen);
	/* deleted workloads that drained leave their trees, then are freed */
	link_trees();
	undefine_others(rows, nrows, seen);
	if (skipped > 0)
	{
		skipped = define_rows(rows, nrows, placed);
		link_trees();
	}
	shared->config_loaded = loaded;
	shared->rows_pending = skipped > 0;
	LWLockRelease(shared->dir_lock);
	publish_grants();
	pg_atomic_fetch_add_u64(&shared->loads, 1);

	if (skipped > 0)
		ereport(WARNING,
				(errmsg("bulkhead: %d workloads were not loaded: all %d workload slots are in use",
						skipped, shared->nslots),
				 errdetail("Slots of deleted workloads are freed when their last permit is released."),
				 errhint("Raise \"bulkhead.max_workloads\" and restart the server.")));
	pfree(placed);
	pfree(seen);
}

static void
load_config(void)
{
	WorkloadRow *rows;
	BulkheadRuleList rules;
	int			nrows;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, "loading bulkhead workloads");
	nrows = bulkhead_read_tables(&rows, &rules);
	apply_config(rows, nrows, &rules, true);
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* The last load failed: the next one is tried at the next tick */
static bool load_failing = false;

/*
 * Load the tables; on an error, keep what shared memory holds and return
 * false.  The worker's other duties (the reaper, adaptive limits) must not
 * wait for the load: a lock on a table makes the load fail after
 * lock_timeout (set at start) instead of stopping the worker, and the error
 * is caught here (as autovacuum does for a table) rather than making the
 * worker exit.  The failure is logged once until a load succeeds again.
 */
bool
bulkhead_load_config(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool loaded = true;

	PG_TRY();
	{
		load_config();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		MemoryContextSwitchTo(cxt);
		bulkhead_tables_read_failed();
		pgstat_report_activity(STATE_IDLE, NULL);
		if (!load_failing)
			ereport(LOG,
					(errcode(edata->sqlerrcode),
					 errmsg("bulkhead: could not load the workload definitions: %s",
							edata->message),
					 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
					 errhint("The definitions loaded before stay in force; the worker tries again every second.")));
		FreeErrorData(edata);
		load_failing = true;
		loaded = false;
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();

	if (loaded && load_failing)
	{
		ereport(LOG,
				(errmsg("bulkhead: the workload definitions were loaded again")));
		load_failing = false;
	}
	return loaded;
}

/*
 * The worker could not connect to bulkhead.database (it does not exist, or
 * was dropped): the definitions in shared memory have no table behind them
 * any more, so none is kept.  Permits held and callers queued drain as after
 * a DELETE.  The next start that connects loads the table again.
 */
void
bulkhead_unload_config(void)
{
	BulkheadRuleList no_rules = {0, NULL};

	apply_config(NULL, 0, &no_rules, false);
}
