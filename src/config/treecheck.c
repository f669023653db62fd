/*-------------------------------------------------------------------------
 *
 * treecheck.c
 *	  The rules of the trees of budgets that one row of bulkhead_workload
 *	  cannot check alone: no cycle of parents, at most BULKHEAD_MAX_DEPTH
 *	  levels, the reservations of a budget's children within its
 *	  max_running, and no move_to naming a budget.
 *
 * Checked by the table's AFTER statement trigger (catalog.c) on the whole
 * table as it is once the trigger holds ShareUpdateExclusiveLock on it,
 * read with the latest snapshot: two concurrent transactions that each
 * make half of a cycle (or each reserve half of a budget) cannot both
 * pass, whatever their isolation level, as for the row count.  The scan
 * runs no SQL: neither the caller's search_path nor its privileges come
 * into play.  So its errors name other rows and their figures only to a
 * role that may read them (disclose.c); others are told what rule the
 * statement breaks, with the same SQLSTATE, and no other row.
 *
 * Owns no state.  Called by catalog.c only; calls disclose.c.
 *
 *-------------------------------------------------------------------------
 */
#include "config/treecheck.h"
#include "workload/budget.h"
#include "acl/disclose.h"

#include "access/htup_details.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

typedef struct TreeRow
{
	char		name[NAMEDATALEN];
	char		parent[NAMEDATALEN];	/* "" for none */
	char		move_to[NAMEDATALEN];	/* "" for none */
	int			max_running;
	int			reserved;
	int			up;				/* index of the parent row, or -1 */
} TreeRow;

static int
compare_rows(const void *a, const void *b)
{
	return strcmp(((const TreeRow *) a)->name, ((const TreeRow *) b)->name);
}

/* Index of the row called name in rows (sorted), or -1 */
static int
find_row(TreeRow *rows, int n, const char *name)
{
	TreeRow		key;
	TreeRow    *found;

	if (name[0] == '\0')
		return -1;
	strlcpy(key.name, name, NAMEDATALEN);
	found = bsearch(&key, rows, n, sizeof(TreeRow), compare_rows);
	return found ? (int) (found - rows) : -1;
}

static void
text_attr(TupleTableSlot *tuple, AttrNumber att, char *buf)
{
	bool		isnull;
	Datum		d = slot_getattr(tuple, att, &isnull);

	buf[0] = '\0';
	if (!isnull)
		text_to_cstring_buffer(DatumGetTextPP(d), buf, NAMEDATALEN);
}

/* The rows of rel (the caller's snapshot), sorted by name; *n of them */
static TreeRow *
read_rows(Relation rel, Snapshot snapshot, int *n)
{
	AttrNumber	att_name = attnameAttNum(rel, "name", false);
	AttrNumber	att_max = attnameAttNum(rel, "max_running", false);
	AttrNumber	att_parent = attnameAttNum(rel, "parent", false);
	AttrNumber	att_reserved = attnameAttNum(rel, "reserved", false);
	AttrNumber	att_move_to = attnameAttNum(rel, "move_to", false);
#if PG_VERSION_NUM >= 190000	/* 19 adds the scan's flags */
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL, SO_NONE);
#else
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
#endif
	TupleTableSlot *tuple = table_slot_create(rel, NULL);
	int			size = 64;
	TreeRow    *rows = palloc(sizeof(TreeRow) * size);
	bool		isnull;

	*n = 0;
	while (table_scan_getnextslot(scan, ForwardScanDirection, tuple))
	{
		TreeRow    *row;

		if (*n == size)
			rows = repalloc(rows, sizeof(TreeRow) * (size *= 2));
		row = &rows[(*n)++];
		text_attr(tuple, att_name, row->name);
		text_attr(tuple, att_parent, row->parent);
		text_attr(tuple, att_move_to, row->move_to);
		row->max_running = DatumGetInt32(slot_getattr(tuple, att_max, &isnull));
		row->reserved = DatumGetInt32(slot_getattr(tuple, att_reserved, &isnull));
	}
	ExecDropSingleTupleTableSlot(tuple);
	table_endscan(scan);
	qsort(rows, *n, sizeof(TreeRow), compare_rows);
	return rows;
}

/* "a -> b -> c": the path up from row i, steps rows long */
static char *
path_up(TreeRow *rows, int i, int steps)
{
	StringInfoData buf;
	int			k;

	initStringInfo(&buf);
	appendStringInfoString(&buf, rows[i].name);
	for (k = 0; k < steps && rows[i].up >= 0; k++)
	{
		i = rows[i].up;
		appendStringInfo(&buf, " -> %s", rows[i].name);
	}
	return buf.data;
}

/*
 * May the caller be told the other rows an error names: their names,
 * parents, limits, reservations, move_to (disclose.c)?  Asked only once a
 * rule is broken.
 */
static bool
disclose(Relation rel)
{
	static const char *const shown[] = {"name", "parent", "max_running",
	"reserved", "move_to"};

	return bulkhead_may_read_rows(rel, shown, lengthof(shown));
}

/* Told to a role that may not read the rows an error would name */
#define HIDDEN_DETAIL \
	errdetail("The workloads involved are named only to roles that may read every row of bulkhead_workload.")

static void
report_cycle(Relation rel, TreeRow *rows, int i, int steps)
{
	if (!disclose(rel))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("parents of workloads would form a cycle"),
				 HIDDEN_DETAIL,
				 errhint("A budget cannot draw from its own subtree.")));
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("parents of workload \"%s\" form a cycle", rows[i].name),
			 errdetail("Its path up: %s.", path_up(rows, i, steps)),
			 errhint("A budget cannot draw from its own subtree.")));
}

static void
report_depth(Relation rel, TreeRow *rows, int n, int i)
{
	if (!disclose(rel))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("a tree of budgets would be more than %d levels deep",
						BULKHEAD_MAX_DEPTH),
				 HIDDEN_DETAIL,
				 errhint("A tree of budgets has at most %d levels.",
						 BULKHEAD_MAX_DEPTH)));
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("workload \"%s\" is more than %d levels deep",
					rows[i].name, BULKHEAD_MAX_DEPTH),
			 errdetail("Its path up: %s.", path_up(rows, i, n)),
			 errhint("A tree of budgets has at most %d levels.",
					 BULKHEAD_MAX_DEPTH)));
}

/* Cycles first (a row on one), then depth; rows are in name order */
static void
check_shape(Relation rel, TreeRow *rows, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		int			x = rows[i].up;
		int			steps = 1;

		while (x >= 0 && x != i && steps <= n)
		{
			x = rows[x].up;
			steps++;
		}
		if (x == i)
			report_cycle(rel, rows, i, steps);
	}
	for (i = 0; i < n; i++)
	{
		int			x = i;
		int			depth = 1;

		while (rows[x].up >= 0)
		{
			x = rows[x].up;
			depth++;
		}
		if (depth > BULKHEAD_MAX_DEPTH)
			report_depth(rel, rows, n, i);
	}
}

/* The reservations of budget b's children (total) exceed its max_running */
static void
report_reservations(Relation rel, TreeRow *rows, int n, int b, int64 total)
{
	StringInfoData children;
	int			i;

	if (!disclose(rel))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("reservations under a budget would exceed its max_running"),
				 HIDDEN_DETAIL,
				 errhint("Lower the children's reserved, or raise the budget's max_running, in one statement.")));
	initStringInfo(&children);
	for (i = 0; i < n; i++)
		if (rows[i].up == b)
			appendStringInfo(&children, "%s\"%s\" (%d)",
							 children.len > 0 ? ", " : "",
							 rows[i].name, rows[i].reserved);
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("reservations under budget \"%s\" exceed its max_running",
					rows[b].name),
			 errdetail("Its children's reservations add up to %lld: %s; its max_running is %d.",
					   (long long) total, children.data, rows[b].max_running),
			 errhint("Lower the children's reserved, or raise the budget's max_running, in one statement.")));
}

/* Row i's move_to names budget to */
static void
report_move_to_budget(Relation rel, TreeRow *rows, int i, int to)
{
	if (!disclose(rel))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("a workload would move permits to a budget"),
				 HIDDEN_DETAIL,
				 errhint("Name one of the budget's children in move_to.")));
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("workload \"%s\" cannot move permits to budget \"%s\"",
					rows[i].name, rows[to].name),
			 errdetail("Permits are held of the workloads under a budget, not of the budget itself."),
			 errhint("Name one of the budget's children in move_to.")));
}

/* Each budget's children's reservations; no move_to naming a budget */
static void
check_budgets(Relation rel, TreeRow *rows, int n)
{
	int			b;
	int			i;

	for (b = 0; b < n; b++)
	{
		int64		total = 0;

		for (i = 0; i < n; i++)
			if (rows[i].up == b)
				total += rows[i].reserved;
		/* a paused budget (max_running 0) keeps its children's reservations */
		if (rows[b].max_running > 0 && total > rows[b].max_running)
			report_reservations(rel, rows, n, b, total);
	}
	for (i = 0; i < n; i++)
	{
		int			to = find_row(rows, n, rows[i].move_to);
		int			c;

		for (c = 0; to >= 0 && c < n; c++)
			if (rows[c].up == to)
				report_move_to_budget(rel, rows, i, to);
	}
}

/*
 * Check the trees of rel, bulkhead_workload of an extension at 1.2 or later
 * (with the columns parent, reserved and move_to): the caller holds
 * ShareUpdateExclusiveLock on it and made this statement's rows visible.
 */
void
bulkhead_check_trees(Relation rel)
{
	Snapshot	snapshot;
	TreeRow    *rows;
	int			n;
	int			i;

	if (attnameAttNum(rel, "parent", false) == InvalidAttrNumber ||
		attnameAttNum(rel, "move_to", false) == InvalidAttrNumber)
		return;					/* 1.1: no trees */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	rows = read_rows(rel, snapshot, &n);
	UnregisterSnapshot(snapshot);
	for (i = 0; i < n; i++)
		rows[i].up = find_row(rows, n, rows[i].parent);
	check_shape(rel, rows, n);
	check_budgets(rel, rows, n);
	pfree(rows);
}
