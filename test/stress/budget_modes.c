/*-------------------------------------------------------------------------
 *
 * budget_modes.c
 *	  The budgets mode of bulkhead_stress (-D budgets): shared budgets
 *	  (trees of workloads) under load while their shape changes.  One thread
 *	  per client, blocking libpq calls, plus a changer, a chaos thread and a
 *	  monitor, each on its own connection.
 *
 * The workloads (created afresh at the start, left in place at the end):
 *
 *	 bs_root (budget)                         bt_root (budget)     bs_solo
 *	   bs_m1 (budget): bs_l1 bs_l2 bs_l3        bt_a bt_b bt_c     (alone)
 *	   bs_m2 (budget): bs_l4 bs_l5 bs_l6
 *	   bs_r1 bs_r2 (leaves right under the root)
 *
 * Clients acquire and release permits of the leaves at random: session
 * (bulkhead_acquire / _release, also nested with a transaction permit of
 * another leaf and given back by bulkhead_release_all), transaction
 * (bulkhead_acquire_xact, commit or rollback; under a savepoint rolled back
 * or released), try_ variants with small timeouts, automatic permits
 * (bulkhead.workload set to a leaf), and now and then an acquire of a budget
 * (it must fail with 42809).  The chaos thread cancels clients with
 * pg_cancel_backend every few milliseconds and terminates one with
 * pg_terminate_backend now and then (it reconnects).  The changer changes
 * one row of bulkhead_workload every 200-500 ms, always keeping the
 * constraints valid: reservations up and down, weights, a leaf moved between
 * bs_m1, bs_m2 and bs_root, limits of budgets and leaves lowered and raised;
 * and now and then it tries a change the constraints must refuse (a sum of
 * reservations over the parent's max_running, a limit under its children's
 * reservations, a weight out of range, a cycle).  It waits, after each
 * change, until the monitor has seen it in bulkhead_stats before it makes
 * the next one.
 *
 * The monitor reads bulkhead_stats in a loop.  The rows of one tree are
 * read under one lock, so they are one state of that tree; the checks are
 * per tree, on that state:
 *
 * - sums: a budget's running is its children's added up, and its queued
 *   is 0 (callers wait at the leaves: a budget shows its own waiters only,
 *   and no budget here ever was a leaf with waiters); borrowed =
 *   max(0, running - reserved) (0 for a root);
 *   current_limit = max_running (no workload here is adaptive);
 * - (a) running <= current_limit, at every level;
 * - (b) no reservation lent: for each budget P, sum over its children c of
 *   max(0, running_c - reserved_c) <= max(0, current_limit_P - sum of
 *   reserved_c);
 * - (c) running + queued <= current_limit + max_queued, at every level
 *   (admission);
 * - no permit idle while someone waits: a leaf with queued > 0 has a level
 *   on its path where no permit is free (the level at its limit, or over
 *   its reservation with its parent's shared part used up).  A release
 *   hands its permit over under the tree's lock and a raised limit serves
 *   the waiters at once, so a state read under that lock never shows a
 *   free permit beside a waiter.
 *
 * A lowered limit, a reservation changed and a leaf moved with its holders
 * may leave a level out of (a), (b) or (c): nothing is preempted.  Hence the
 * epoch rule.  A level's epoch is a maximal run of consecutive samples in
 * which the tuple (current_limit, parent, reserved, max_queued, and for
 * every workload in its subtree: its parent and reserved) stays the same.
 * Within an epoch, running of a level grows only by grants under it, made
 * only while the level is under its limit; the borrowed sum of a budget
 * grows only by grants that find room in its shared part; running + queued
 * only by admissions under the bound.  (Moving a leaf changes the subtree
 * of the budgets it leaves and joins, so their epochs; this is why the
 * subtree, not only the children, is in the tuple: a grandchild moved from
 * bs_m1 to bs_m2 can raise the root's borrowed sum without any grant.)  So:
 *
 * - once a level has been seen within a bound in an epoch, a later sample
 *   of the same epoch out of it is a violation;
 * - in an epoch, a sample over a bound may not show more than the previous
 *   sample, or the bound, whichever is higher (nothing is granted under a
 *   level over its limit until it is back under it).
 *
 * The changer waits for the monitor to see each change before making the
 * next, so a tuple cannot change and change back between two samples: an
 * unchanged tuple between samples means an unchanged configuration.
 *
 * At the end: every client disconnects; within 10 s running and queued are
 * 0 everywhere and bulkhead_activity has no row of these workloads; for
 * every leaf acquired = released.  A statement that runs for 20 s (the
 * clients' statement_timeout) is a violation (a hang).
 *
 * Exit status: 0 without a violation, 1 on a violation, 2 on a set-up or
 * tool error.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "deadlock_modes.h"
#include "tree_common.h"

/*---- the workloads ----*/

enum
{
	W_ROOT, W_M1, W_M2, W_L1, W_L2, W_L3, W_L4, W_L5, W_L6, W_R1, W_R2,
	W_TROOT, W_TA, W_TB, W_TC, W_SOLO, NW
};

static const char *const wname[NW] = {
	"bs_root", "bs_m1", "bs_m2", "bs_l1", "bs_l2", "bs_l3", "bs_l4", "bs_l5",
	"bs_l6", "bs_r1", "bs_r2", "bt_root", "bt_a", "bt_b", "bt_c", "bs_solo"
};

/* the tree of each workload (moves stay within a tree) */
static const int wtree[NW] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2};
#define NTREES 3

/* budgets always keep a child; the others are leaves, which clients acquire */
static bool
is_budget(int w)
{
	return w == W_ROOT || w == W_M1 || w == W_M2 || w == W_TROOT;
}

/* leaves the changer moves between bs_m1, bs_m2 and bs_root */
static bool
is_movable(int w)
{
	return (w >= W_L1 && w <= W_L6) || w == W_R1 || w == W_R2;
}

/* What the tool sets of a workload's row */
typedef struct Cfg
{
	int			parent;			/* index, -1 for none */
	int			max_running;
	int			max_queued;
	int			reserved;
	int			weight;
} Cfg;

/* the start: the sums of reservations fit (root 3+2+1+0 <= 12, ...) */
static const Cfg initial_cfg[NW] = {
	[W_ROOT] = {-1, 12, 1000, 0, 100},
	[W_M1] = {W_ROOT, 8, 1000, 3, 300},
	[W_M2] = {W_ROOT, 8, 1000, 2, 100},
	[W_L1] = {W_M1, 3, 4, 1, 100},
	[W_L2] = {W_M1, 2, 6, 1, 200},
	[W_L3] = {W_M1, 4, 3, 0, 100},
	[W_L4] = {W_M2, 3, 4, 1, 100},
	[W_L5] = {W_M2, 2, 5, 0, 50},
	[W_L6] = {W_M2, 4, 4, 0, 100},
	[W_R1] = {W_ROOT, 3, 4, 1, 100},
	[W_R2] = {W_ROOT, 4, 6, 0, 100},
	[W_TROOT] = {-1, 4, 1000, 0, 100},
	[W_TA] = {W_TROOT, 3, 4, 1, 300},
	[W_TB] = {W_TROOT, 2, 4, 1, 100},
	[W_TC] = {W_TROOT, 4, 4, 0, 100},
	[W_SOLO] = {-1, 2, 4, 0, 100},
};

#define LEAF_QUEUE_TIMEOUT_MS 30
#define MAX_BUDGET_LIMIT 16
#define MAX_LEAF_LIMIT 6
#define MAX_RESERVED 4

/*---- shared state ----*/

static const char *conninfo;
static uint64_t seed;
static int	nclients;
static int64_t end_at;
static volatile int stop_all;	/* the clients have ended: the monitor ends */

static int *client_pid;			/* backend pid of each client, 0 if none */

/* counters, added to with __atomic */
enum
{
	OP_SESSION, OP_TRY, OP_XACT, OP_TRY_XACT, OP_NESTED, OP_SAVEPOINT,
	OP_AUTO, OP_BUDGET, NOPS
};
static const char *const op_name[NOPS] = {
	"session", "try_session", "xact", "try_xact", "nested", "savepoint",
	"auto", "budget(42809)"
};
static long n_ops[NOPS];

/* the outcomes this mode can see (no guard here: no O_GUARD) */
static const char *const outcome_name[NOUTCOMES] = {
	[O_OK] = "ok", [O_FULL] = "full", [O_TIMEOUT] = "timeout",
	[O_CANCEL] = "cancelled", [O_DEADLOCK] = "deadlock",
	[O_WRONGTYPE] = "42809", [O_GONE] = "killed", [O_HUNG] = "hung(20s)",
	[O_OTHER] = "other"
};
static long n_outcome[NOUTCOMES];
static long n_try_false;
static long n_cancels_sent;
static long n_terminates_sent;
static long n_reconnects;

enum
{
	CH_RESERVE, CH_WEIGHT, CH_MOVE, CH_BUDGET_LIMIT, CH_LEAF_LIMIT, CH_INVALID,
	NCH
};
static const char *const change_name[NCH] = {
	"reserved", "weight", "move", "budget limit", "leaf limit", "refused"
};
static long n_changes[NCH];
static long n_reserved_up, n_reserved_down, n_limit_up, n_limit_down;
static long n_moves_to_root, n_moves_to_mid;
static long n_change_waits_ms_max;

/* monitor figures */
static long n_samples;
static long n_level_checks;
static long n_epochs;
static long n_over_allowed;		/* samples out of a bound not yet seen within it */

/* violations by kind */
enum
{
	V_OVER_LIMIT, V_LENT, V_ADMISSION, V_GREW, V_IDLE, V_SUMS, V_END,
	V_CLIENT, V_REFUSAL, V_HANG, NV
};
static const char *const v_name[NV] = {
	"(a) over its limit", "(b) reservation lent", "(c) over limit + max_queued",
	"grew while over a bound", "permit free while a leaf waits",
	"sums / borrowed / current_limit", "end state", "client (permits held)",
	"a change the constraints must refuse was accepted", "statement hung"
};
static long n_viol[NV];

/* The changer's change waiting to be seen by the monitor (tc_wait_seen) */
static Cfg expected[NW];

/*---- configurations ----*/

static int
child_reserved_sum(const Cfg *c, int p, int except)
{
	int			w;
	int			sum = 0;

	for (w = 0; w < NW; w++)
		if (c[w].parent == p && w != except)
			sum += c[w].reserved;
	return sum;
}

static int
nchildren(const Cfg *c, int p)
{
	int			w;
	int			n = 0;

	for (w = 0; w < NW; w++)
		if (c[w].parent == p)
			n++;
	return n;
}

/* the constraints of the table, as the tool keeps them */
static bool
cfg_valid(const Cfg *c)
{
	int			w;

	for (w = 0; w < NW; w++)
	{
		/* a paused workload (max_running 0) keeps its reservation */
		if (c[w].reserved < 0 ||
			(c[w].max_running > 0 && c[w].reserved > c[w].max_running))
			return false;
		if (c[w].weight < 1 || c[w].weight > 10000)
			return false;
		if (child_reserved_sum(c, w, -1) > c[w].max_running)
			return false;
		/* the budgets keep a child, so that no budget becomes a leaf */
		if (is_budget(w) && nchildren(c, w) == 0)
			return false;
	}
	return true;
}

/*---- statements ----*/

/* a client's statement, counted; an unexpected outcome is reported */
static Outcome
step(TcClient *c, const char *sql, char *val, size_t vallen)
{
	return tc_step2(c, sql, val, NULL, vallen);
}

static int
random_leaf(uint64_t *rs)
{
	for (;;)
	{
		int			w = tc_pick(rs, NW);

		if (!is_budget(w))
			return w;
	}
}

/* a wait bound: NULL (the workload's queue_timeout), or 0-40 ms */
static void
random_timeout(uint64_t *rs, char *buf, size_t len, int max_ms)
{
	if (tc_chance(rs, 30))
		snprintf(buf, len, "NULL");
	else
		snprintf(buf, len, "'%d ms'", tc_pick(rs, max_ms + 1));
}

static Outcome
work(TcClient *c)
{
	char		sql[64];

	snprintf(sql, sizeof(sql), "SELECT pg_sleep(%d / 1000.0)", tc_pick(&c->rs, 16));
	return step(c, sql, NULL, 0);
}

/*
 * One random operation.  Returns O_OK when it ran to its end, else the
 * outcome of the statement that ended it (the caller cleans up).
 */
static Outcome
client_op(TcClient *c)
{
	uint64_t   *rs = &c->rs;
	int			r = tc_pick(rs, 100);
	int			w = random_leaf(rs);
	char		sql[256];
	char		t[32];
	char		val[64];
	Outcome		o;
	int			n;

	if (r < 22)
	{
		/* session permit */
		tc_add(&n_ops[OP_SESSION], 1);
		random_timeout(rs, t, sizeof(t), 40);
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire('%s', %s)", wname[w], t);
		if ((o = step(c, sql, NULL, 0)) != O_OK)
			return o;
		if (tc_chance(rs, 30))
		{
			/* also inside a transaction that rolls back: the permit stays */
			if ((o = step(c, "BEGIN", NULL, 0)) != O_OK || (o = work(c)) != O_OK ||
				(o = step(c, "ROLLBACK", NULL, 0)) != O_OK)
				return o;
		}
		else if ((o = work(c)) != O_OK)
			return o;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wname[w]);
		o = step(c, sql, NULL, 0);
		if (o == O_OTHER)
			tc_violation(V_CLIENT, "client %d: the release of a permit it holds failed (%s)", c->id, sql);
		return o;
	}
	if (r < 36)
	{
		/* try, session */
		tc_add(&n_ops[OP_TRY], 1);
		snprintf(sql, sizeof(sql), "SELECT bulkhead_try_acquire('%s', '%d ms')", wname[w],
				 tc_chance(rs, 50) ? 0 : tc_between(rs, 1, 10));
		if ((o = step(c, sql, val, sizeof(val))) != O_OK)
			return o;
		if (strcmp(val, "t") != 0)
		{
			tc_add(&n_try_false, 1);
			return O_OK;
		}
		if ((o = work(c)) != O_OK)
			return o;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wname[w]);
		o = step(c, sql, NULL, 0);
		if (o == O_OTHER)
			tc_violation(V_CLIENT, "client %d: the release of a permit it holds failed (%s)", c->id, sql);
		return o;
	}
	if (r < 58)
	{
		/* transaction permit, acquire or try */
		bool		try = tc_chance(rs, 35);

		tc_add(&n_ops[try ? OP_TRY_XACT : OP_XACT], 1);
		if ((o = step(c, "BEGIN", NULL, 0)) != O_OK)
			return o;
		if (try)
			snprintf(sql, sizeof(sql), "SELECT bulkhead_try_acquire_xact('%s', '%d ms')", wname[w],
					 tc_chance(rs, 50) ? 0 : tc_between(rs, 1, 10));
		else
		{
			random_timeout(rs, t, sizeof(t), 40);
			snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire_xact('%s', %s)", wname[w], t);
		}
		if ((o = step(c, sql, val, sizeof(val))) != O_OK)
			return o;
		if (try && strcmp(val, "t") != 0)
			tc_add(&n_try_false, 1);
		else if ((o = work(c)) != O_OK)
			return o;
		return step(c, tc_chance(rs, 50) ? "COMMIT" : "ROLLBACK", NULL, 0);
	}
	if (r < 70)
	{
		/* a session permit of one leaf and a transaction permit of another */
		int			w2;

		tc_add(&n_ops[OP_NESTED], 1);
		do
			w2 = random_leaf(rs);
		while (w2 == w);
		random_timeout(rs, t, sizeof(t), 30);
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire('%s', %s)", wname[w], t);
		if ((o = step(c, sql, NULL, 0)) != O_OK)
			return o;
		if ((o = step(c, "BEGIN", NULL, 0)) != O_OK)
			return o;
		random_timeout(rs, t, sizeof(t), 30);
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire_xact('%s', %s)", wname[w2], t);
		if ((o = step(c, sql, NULL, 0)) != O_OK || (o = work(c)) != O_OK ||
			(o = step(c, "COMMIT", NULL, 0)) != O_OK)
			return o;
		if (tc_chance(rs, 50))
		{
			if ((o = step(c, "SELECT bulkhead_release_all()", val, sizeof(val))) != O_OK)
				return o;
			if (strcmp(val, "1") != 0)
				tc_violation(V_CLIENT, "client %d: bulkhead_release_all() gave %s, holding one session permit (%s)",
						  c->id, val, wname[w]);
			return O_OK;
		}
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wname[w]);
		o = step(c, sql, NULL, 0);
		if (o == O_OTHER)
			tc_violation(V_CLIENT, "client %d: the release of a permit it holds failed (%s)", c->id, sql);
		return o;
	}
	if (r < 80)
	{
		/* a transaction permit under a savepoint, rolled back or released */
		bool		rollback = tc_chance(rs, 50);

		tc_add(&n_ops[OP_SAVEPOINT], 1);
		if ((o = step(c, "BEGIN", NULL, 0)) != O_OK || (o = step(c, "SAVEPOINT s", NULL, 0)) != O_OK)
			return o;
		random_timeout(rs, t, sizeof(t), 30);
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire_xact('%s', %s)", wname[w], t);
		if ((o = step(c, sql, NULL, 0)) != O_OK || (o = work(c)) != O_OK)
			return o;
		if ((o = step(c, rollback ? "ROLLBACK TO SAVEPOINT s" : "RELEASE SAVEPOINT s", NULL, 0)) != O_OK)
			return o;
		n = tc_own_rows(c, &o);
		if (o != O_OK)
			return o;
		if (n != (rollback ? 0 : 1))
			tc_violation(V_CLIENT, "client %d: %d rows of its own in bulkhead_activity after %s of a savepoint holding a permit of %s",
					  c->id, n, rollback ? "a rollback" : "the release", wname[w]);
		return step(c, tc_chance(rs, 50) ? "COMMIT" : "ROLLBACK", NULL, 0);
	}
	if (r < 96)
	{
		/* automatic permits: bulkhead.workload */
		int			i;
		int			nstmt = tc_between(rs, 1, 3);
		bool		block = tc_chance(rs, 60);

		tc_add(&n_ops[OP_AUTO], 1);
		snprintf(sql, sizeof(sql), "SET bulkhead.workload = '%s'", wname[w]);
		if ((o = step(c, sql, NULL, 0)) != O_OK)
			return o;
		c->gated = true;
		if (block && (o = step(c, "BEGIN", NULL, 0)) != O_OK)
			return o;
		for (i = 0; i < nstmt; i++)
			if ((o = work(c)) != O_OK)
				return o;
		if (block && (o = step(c, "COMMIT", NULL, 0)) != O_OK)
			return o;
		if ((o = step(c, "RESET bulkhead.workload", NULL, 0)) != O_OK)
			return o;
		c->gated = false;
		return O_OK;
	}
	/* a budget: never acquired directly */
	{
		static const int budgets[] = {W_ROOT, W_M1, W_M2, W_TROOT};
		int			b = budgets[tc_pick(rs, 4)];

		tc_add(&n_ops[OP_BUDGET], 1);
		snprintf(sql, sizeof(sql), tc_chance(rs, 50) ? "SELECT bulkhead_acquire('%s', '0')" :
				 "SELECT bulkhead_try_acquire('%s')", wname[b]);
		o = step(c, sql, NULL, 0);
		if (o == O_OK)
		{
			tc_violation(V_CLIENT, "client %d: %s succeeded on a budget", c->id, sql);
			return O_OTHER;		/* clean up: release what it got */
		}
		return o == O_WRONGTYPE ? O_OK : o;
	}
}

static void *
client_main(void *arg)
{
	static const TcClientWay way = {client_op, 8, 3, 20};

	tc_client_run((int) (intptr_t) arg, seed, end_at, &way);
	return NULL;
}

/*---- chaos: cancels and terminations ----*/

static void *
chaos_main(void *arg)
{
	static const TcChaosWay way = {100, 700, 4, 20};

	tc_chaos_run(seed, end_at, nclients, &way, &n_cancels_sent, &n_terminates_sent);
	return arg;
}

/*---- the changer ----*/

static void
cfg_sql(const Cfg *c, int w, char *buf, size_t len)
{
	char		parent[80];

	if (c[w].parent < 0)
		snprintf(parent, sizeof(parent), "NULL");
	else
		snprintf(parent, sizeof(parent), "'%s'", wname[c[w].parent]);
	snprintf(buf, len,
			 "UPDATE bulkhead_workload SET parent = %s, max_running = %d, max_queued = %d,"
			 " reserved = %d, weight = %d WHERE name = '%s'",
			 parent, c[w].max_running, c[w].max_queued, c[w].reserved, c[w].weight, wname[w]);
}

/*
 * A valid random change of one row of cur into next; returns its kind, or
 * -1 if none was found
 */
static int
random_change(uint64_t *rs, const Cfg *cur, Cfg *next, int *changed)
{
	int			tries;

	for (tries = 0; tries < 200; tries++)
	{
		int			r = tc_pick(rs, 100);
		int			w = tc_pick(rs, NW);
		int			kind;
		Cfg		   *n;

		memcpy(next, cur, sizeof(Cfg) * NW);
		n = &next[w];
		if (r < 30)
		{
			/* reserved up or down, within the parent's room and its own limit */
			int			room;

			if (n->parent < 0)
				continue;
			kind = CH_RESERVE;
			room = cur[n->parent].max_running - child_reserved_sum(cur, n->parent, w);
			if (n->max_running > 0 && room > n->max_running)
				room = n->max_running;
			if (room > MAX_RESERVED)
				room = MAX_RESERVED;
			n->reserved = tc_between(rs, 0, room);
			if (n->reserved == cur[w].reserved)
				continue;
		}
		else if (r < 42)
		{
			kind = CH_WEIGHT;
			n->weight = tc_chance(rs, 10) ? (tc_chance(rs, 50) ? 1 : 10000) : tc_between(rs, 1, 1000);
			if (n->weight == cur[w].weight)
				continue;
		}
		else if (r < 65)
		{
			/* a leaf moves, keeping its reservation if it fits */
			static const int targets[] = {W_ROOT, W_M1, W_M2};
			int			to = targets[tc_pick(rs, 3)];
			int			room;

			if (!is_movable(w) || to == n->parent)
				continue;
			kind = CH_MOVE;
			n->parent = to;
			room = cur[to].max_running - child_reserved_sum(cur, to, w);
			if (n->reserved > room || tc_chance(rs, 40))
				n->reserved = tc_between(rs, 0, room < n->reserved ? room : n->reserved);
			if (n->reserved < 0)
				continue;
		}
		else if (r < 82)
		{
			/* a budget's limit: not under its children's reservations */
			int			lo;
			int			hi = MAX_BUDGET_LIMIT;

			if (!is_budget(w))
				continue;
			kind = CH_BUDGET_LIMIT;
			lo = child_reserved_sum(cur, w, -1);
			if (lo < n->reserved)
				lo = n->reserved;
			/* mostly lower than the sum of its children's limits: contention */
			if (tc_chance(rs, 20) && lo == 0)
				n->max_running = 0;
			else
				n->max_running = tc_between(rs, lo > 1 ? lo : 1, hi);
			if (n->max_running == cur[w].max_running)
				continue;
		}
		else
		{
			/* a leaf's limit, 0 (paused) now and then */
			if (is_budget(w))
				continue;
			kind = CH_LEAF_LIMIT;
			/* a paused leaf keeps its reservation */
			n->max_running = tc_chance(rs, 8) ? 0 :
				tc_between(rs, n->reserved > 1 ? n->reserved : 1, MAX_LEAF_LIMIT);
			if (n->max_running == cur[w].max_running)
				continue;
		}
		if (!cfg_valid(next))
			continue;
		*changed = w;
		return kind;
	}
	return -1;
}

/*
 * A change the constraints must refuse (one row): fills sql and returns a
 * short description, or NULL if none fits the configuration now
 */
static const char *
invalid_change(uint64_t *rs, const Cfg *cur, char *sql, size_t len, const char **want_state)
{
	Cfg			next[NW];
	int			w = tc_pick(rs, NW);
	int			kind = tc_pick(rs, 5);

	memcpy(next, cur, sizeof(next));
	*want_state = "23514";
	switch (kind)
	{
		case 0:
			{
				/* the sum of the parent's children's reservations over its limit */
				int			room;

				if (next[w].parent < 0)
					return NULL;
				room = cur[next[w].parent].max_running - child_reserved_sum(cur, next[w].parent, w);
				next[w].reserved = room + 1 + tc_pick(rs, 2);
				if (next[w].max_running < next[w].reserved)
					next[w].max_running = next[w].reserved;
				cfg_sql(next, w, sql, len);
				return "reservations over the parent's max_running";
			}
		case 1:
			{
				/* a budget's limit under its children's reservations */
				int			sum;

				if (!is_budget(w))
					return NULL;
				sum = child_reserved_sum(cur, w, -1);
				/* sum - 1 = 0 would pause the budget, which is allowed */
				if (sum <= 1)
					return NULL;
				snprintf(sql, len, "UPDATE bulkhead_workload SET max_running = %d WHERE name = '%s'",
						 sum - 1, wname[w]);
				return "max_running under the children's reservations";
			}
		case 2:
			snprintf(sql, len, "UPDATE bulkhead_workload SET weight = %d WHERE name = '%s'",
					 tc_chance(rs, 50) ? 0 : 10001, wname[w]);
			return "weight out of 1..10000";
		case 3:
			/* (a paused workload may keep a reservation over its 0) */
			if (cur[w].max_running == 0)
				return NULL;
			snprintf(sql, len, "UPDATE bulkhead_workload SET reserved = max_running + 1 WHERE name = '%s'",
					 wname[w]);
			return "reserved over its own max_running";
		default:
			{
				/* a cycle: a budget under itself or one of its descendants */
				int			b = W_ROOT + tc_pick(rs, 3); /* bs_root, bs_m1, bs_m2 */
				int			d;
				int			tries;

				for (tries = 0; tries < 50; tries++)
				{
					d = tc_pick(rs, NW);
					for (w = d; w >= 0 && w != b; w = cur[w].parent)
						;
					if (w == b)
						break;
				}
				if (w != b)
					return NULL;
				snprintf(sql, len, "UPDATE bulkhead_workload SET parent = '%s' WHERE name = '%s'",
						 wname[d], wname[b]);
				return "a cycle";
			}
	}
}

/* wait until the monitor has seen exp in bulkhead_stats (at most 10 s) */
static bool
wait_seen(const Cfg *exp)
{
	return tc_wait_seen(expected, exp, sizeof(expected), &n_change_waits_ms_max);
}

static void *
changer_main(void *arg)
{
	uint64_t	rs = seed ^ UINT64_C(0xc4a11e);
	PGconn	   *conn = tc_connect_or_die(conninfo);
	Cfg			cur[NW];
	Cfg			next[NW];
	char		sql[512];
	char		err[512];

	if (rs == 0)
		rs = 1;
	memcpy(cur, initial_cfg, sizeof(cur));
	while (now_us() < end_at)
	{
		int			w;
		int			kind;

		tc_sleep_ms(tc_between(&rs, 200, 500));
		if (now_us() >= end_at)
			break;
		if (tc_chance(&rs, 10))
		{
			const char *want;
			const char *what = invalid_change(&rs, cur, sql, sizeof(sql), &want);
			Outcome		o;

			if (what == NULL)
				continue;
			o = tc_run(conn, sql, NULL, 0, err, sizeof(err));
			tc_add(&n_changes[CH_INVALID], 1);
			if (o == O_OK)
			{
				tc_violation(V_REFUSAL, "%s was accepted: %s", what, sql);
				/* put the row back as the tool has it */
				for (w = 0; w < NW; w++)
				{
					cfg_sql(cur, w, sql, sizeof(sql));
					if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK)
						tc_tool_error("changer: restoring after an accepted bad change: %s: %s", sql, err);
				}
				if (!wait_seen(cur))
					tc_tool_error("changer: the restored configuration was not seen in bulkhead_stats within 10 s");
			}
			else if (o == O_GONE)
			{
				tc_tool_error("changer: connection lost: %s", err);
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
			}
			else if (want != NULL && strncmp(err, want, 5) != 0)
				tc_tool_error("changer: %s refused with %.5s, not %s: %s", what, err, want, err);
			continue;
		}
		kind = random_change(&rs, cur, next, &w);
		if (kind < 0)
			continue;
		cfg_sql(next, w, sql, sizeof(sql));
		if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK)
		{
			tc_tool_error("changer: a valid change was refused: %s: %s", sql, err);
			if (PQstatus(conn) == CONNECTION_BAD)
			{
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
			}
			continue;
		}
		tc_add(&n_changes[kind], 1);
		if (kind == CH_RESERVE)
			tc_add(next[w].reserved > cur[w].reserved ? &n_reserved_up : &n_reserved_down, 1);
		if (kind == CH_BUDGET_LIMIT || kind == CH_LEAF_LIMIT)
			tc_add(next[w].max_running > cur[w].max_running ? &n_limit_up : &n_limit_down, 1);
		if (kind == CH_MOVE)
			tc_add(next[w].parent == W_ROOT ? &n_moves_to_root : &n_moves_to_mid, 1);
		memcpy(cur, next, sizeof(cur));
		if (!wait_seen(cur))
			tc_tool_error("changer: \"%s\" was not seen in bulkhead_stats within 10 s", sql);
	}
	PQfinish(conn);
	return arg;
}

/*---- the monitor ----*/

typedef struct Row
{
	bool		present;
	int			parent;
	int			limit;
	int			max_running;
	int			max_queued;
	int			reserved;
	int			weight;
	int			borrowed;
	int			running;
	int			queued;
	long		acquired;
	long		released;
} Row;

/* per level: its epoch and what was seen in it */
typedef struct Level
{
	bool		valid;
	char		epoch[512];
	bool		within[3];		/* (a), (b), (c) seen within in this epoch */
	bool		have_prev;
	int			prev[3];		/* running, borrowed sum, running + queued */
} Level;

static Level levels[NW];

#define STATS_SQL \
	"SELECT workload, parent, current_limit, max_running, max_queued, reserved, weight," \
	" borrowed, running, queued, acquired, released FROM bulkhead_stats" \
	" WHERE workload ~ '^b[st]_'"

static bool
read_rows(PGconn *conn, Row *rows)
{
	PGresult   *res = PQexec(conn, STATS_SQL);
	int			i;
	int			w;

	memset(rows, 0, sizeof(Row) * NW);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		tc_tool_error("monitor: %s", PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	for (i = 0; i < PQntuples(res); i++)
	{
		w = tc_windex(wname, NW, PQgetvalue(res, i, 0));
		if (w < 0)
			continue;
		if (rows[w].present)
			tc_violation(V_SUMS, "%s appears twice in bulkhead_stats", wname[w]);
		rows[w].present = true;
		rows[w].parent = PQgetisnull(res, i, 1) ? -1 : tc_windex(wname, NW, PQgetvalue(res, i, 1));
		if (!PQgetisnull(res, i, 1) && rows[w].parent < 0)
			tc_tool_error("monitor: %s has the unknown parent %s", wname[w], PQgetvalue(res, i, 1));
		rows[w].limit = atoi(PQgetvalue(res, i, 2));
		rows[w].max_running = atoi(PQgetvalue(res, i, 3));
		rows[w].max_queued = atoi(PQgetvalue(res, i, 4));
		rows[w].reserved = atoi(PQgetvalue(res, i, 5));
		rows[w].weight = atoi(PQgetvalue(res, i, 6));
		rows[w].borrowed = atoi(PQgetvalue(res, i, 7));
		rows[w].running = atoi(PQgetvalue(res, i, 8));
		rows[w].queued = atoi(PQgetvalue(res, i, 9));
		rows[w].acquired = atol(PQgetvalue(res, i, 10));
		rows[w].released = atol(PQgetvalue(res, i, 11));
	}
	PQclear(res);
	for (w = 0; w < NW; w++)
		if (!rows[w].present)
		{
			tc_tool_error("monitor: %s is not in bulkhead_stats", wname[w]);
			return false;
		}
	return true;
}

/* is a an ancestor of w (or w itself) in rows? */
static bool
under(const Row *rows, int w, int a)
{
	int			depth;

	for (depth = 0; w >= 0 && depth <= NW; depth++, w = rows[w].parent)
		if (w == a)
			return true;
	return false;
}

/* budget p: the borrowed sum of its children and its shared part */
static void
shared_part(const Row *rows, int p, int *borrowed, int *shared)
{
	int			c;
	int			sum_r = 0;
	int			b = 0;

	for (c = 0; c < NW; c++)
		if (rows[c].parent == p)
		{
			sum_r += rows[c].reserved;
			if (rows[c].running > rows[c].reserved)
				b += rows[c].running - rows[c].reserved;
		}
	*borrowed = b;
	*shared = rows[p].limit > sum_r ? rows[p].limit - sum_r : 0;
}

/* a permit is free for leaf w on its whole path */
static bool
path_free(const Row *rows, int w)
{
	int			depth;

	for (depth = 0; w >= 0 && depth <= NW; depth++, w = rows[w].parent)
	{
		int			p = rows[w].parent;

		if (rows[w].running >= rows[w].limit)
			return false;
		if (p >= 0 && rows[w].running >= rows[w].reserved)
		{
			int			b;
			int			s;

			shared_part(rows, p, &b, &s);
			if (b >= s)
				return false;
		}
	}
	return true;
}

static void
tree_text(const Row *rows, int tree, char *buf, size_t len)
{
	size_t		off = 0;
	int			w;

	buf[0] = '\0';
	for (w = 0; w < NW && off < len; w++)
		if (wtree[w] == tree)
			off += snprintf(buf + off, len - off, "%s%s(parent %s, L %d, r %d, run %d, q %d, borrowed %d)",
							off ? " " : "", wname[w], rows[w].parent >= 0 ? wname[rows[w].parent] : "-",
							rows[w].limit, rows[w].reserved, rows[w].running, rows[w].queued,
							rows[w].borrowed);
}

/* one bound of one level: the epoch rule and the no-growth rule */
static void
check_bound(const Row *rows, int w, int which, int value, int bound, const char *what)
{
	Level	   *lev = &levels[w];
	int			kinds[3] = {V_OVER_LIMIT, V_LENT, V_ADMISSION};
	char		text[2048];

	tc_add(&n_level_checks, 1);
	if (value <= bound)
		lev->within[which] = true;
	else
	{
		if (lev->within[which])
		{
			tree_text(rows, wtree[w], text, sizeof(text));
			tc_violation(kinds[which], "%s: %s %d > %d in an epoch where it was seen within; tree: %s",
					  wname[w], what, value, bound, text);
		}
		else
			tc_add(&n_over_allowed, 1);
	}
	if (lev->have_prev && value > bound && value > lev->prev[which])
	{
		tree_text(rows, wtree[w], text, sizeof(text));
		tc_violation(V_GREW, "%s: %s %d, was %d, over the bound %d (no change in between); tree: %s",
				  wname[w], what, value, lev->prev[which], bound, text);
	}
	lev->prev[which] = value;
}

static void
check_sample(const Row *rows)
{
	int			w;
	char		text[2048];

	for (w = 0; w < NW; w++)
	{
		const Row  *r = &rows[w];
		Level	   *lev = &levels[w];
		char		epoch[512];
		size_t		off;
		int			c;
		int			sum_run = 0;
		int			sum_q = 0;
		int			kids = 0;
		int			want_borrowed;
		int			b = 0;
		int			s = 0;

		/* the sums, borrowed, current_limit */
		for (c = 0; c < NW; c++)
			if (rows[c].parent == w)
			{
				kids++;
				sum_run += rows[c].running;
				sum_q += rows[c].queued;
				if (wtree[c] != wtree[w])
					tc_tool_error("monitor: %s moved to another tree (under %s)", wname[c], wname[w]);
			}
		if (kids > 0 && (r->running != sum_run || r->queued != 0))
		{
			tree_text(rows, wtree[w], text, sizeof(text));
			tc_violation(V_SUMS, "budget %s: running %d, queued %d; its children add up to %d (and %d queued), a budget queues none itself; tree: %s",
					  wname[w], r->running, r->queued, sum_run, sum_q, text);
		}
		want_borrowed = r->parent >= 0 && r->running > r->reserved ? r->running - r->reserved : 0;
		if (r->borrowed != want_borrowed)
			tc_violation(V_SUMS, "%s: borrowed %d, running %d, reserved %d%s",
					  wname[w], r->borrowed, r->running, r->reserved, r->parent < 0 ? " (a root)" : "");
		if (r->limit != r->max_running)
			tc_violation(V_SUMS, "%s: current_limit %d, max_running %d (not adaptive)",
					  wname[w], r->limit, r->max_running);

		/* the epoch */
		off = snprintf(epoch, sizeof(epoch), "%d|%d|%d|%d|", r->limit, r->parent, r->reserved,
					   r->max_queued);
		for (c = 0; c < NW && off < sizeof(epoch); c++)
			if (c != w && under(rows, c, w))
				off += snprintf(epoch + off, sizeof(epoch) - off, "%d:%d:%d,", c, rows[c].parent,
								rows[c].reserved);
		if (!lev->valid || strcmp(epoch, lev->epoch) != 0)
		{
			lev->valid = true;
			strcpy(lev->epoch, epoch);
			memset(lev->within, 0, sizeof(lev->within));
			lev->have_prev = false;
			tc_add(&n_epochs, 1);
		}

		/* (a), (b), (c) */
		check_bound(rows, w, 0, r->running, r->limit, "running");
		if (kids > 0)
		{
			shared_part(rows, w, &b, &s);
			check_bound(rows, w, 1, b, s, "borrowed sum of the children (shared part)");
		}
		check_bound(rows, w, 2, r->running + r->queued, r->limit + r->max_queued,
					"running + queued (limit + max_queued)");
		lev->have_prev = true;

		/* no free permit beside a waiter */
		if (kids == 0 && r->queued > 0 && path_free(rows, w))
		{
			tree_text(rows, wtree[w], text, sizeof(text));
			tc_violation(V_IDLE, "%s: %d queued, yet a permit is free on its path; tree: %s",
					  wname[w], r->queued, text);
		}
	}
}

/* does the sample show the configuration exp? */
static bool
shows(const void *rows_arg, const void *exp_arg)
{
	const Row  *rows = rows_arg;
	const Cfg  *exp = exp_arg;
	int			w;

	for (w = 0; w < NW; w++)
		if (rows[w].parent != exp[w].parent || rows[w].max_running != exp[w].max_running ||
			rows[w].max_queued != exp[w].max_queued || rows[w].reserved != exp[w].reserved ||
			rows[w].weight != exp[w].weight)
			return false;
	return true;
}

static Row last_rows[NW];

static void *
monitor_main(void *arg)
{
	PGconn	   *conn = tc_connect_or_die(conninfo);
	Row			rows[NW];

	while (!__atomic_load_n(&stop_all, __ATOMIC_RELAXED))
	{
		if (!read_rows(conn, rows))
		{
			if (PQstatus(conn) == CONNECTION_BAD)
			{
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
			}
			tc_sleep_ms(10);
			continue;
		}
		tc_add(&n_samples, 1);
		check_sample(rows);
		memcpy(last_rows, rows, sizeof(rows));
		tc_check_seen(shows, rows, expected);
		tc_sleep_ms(1);
	}
	PQfinish(conn);
	return arg;
}

/*---- set-up and the end ----*/

static void
setup_tree(PGconn *conn)
{
	char		sql[512];
	int			depth;
	int			w;
	int			i;
	Row			rows[NW];

	tc_setup_exec(conn, "DELETE FROM bulkhead_workload WHERE name ~ '^b[st]_'");
	/* parents first: roots, then their children, then theirs */
	for (depth = 0; depth < 3; depth++)
		for (w = 0; w < NW; w++)
		{
			int			d = 0;
			int			a;
			char		parent[80];

			for (a = initial_cfg[w].parent; a >= 0; a = initial_cfg[a].parent)
				d++;
			if (d != depth)
				continue;
			if (initial_cfg[w].parent < 0)
				snprintf(parent, sizeof(parent), "NULL");
			else
				snprintf(parent, sizeof(parent), "'%s'", wname[initial_cfg[w].parent]);
			snprintf(sql, sizeof(sql),
					 "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
					 " parent, reserved, weight) VALUES ('%s', %d, %d, '%d ms', %s, %d, %d)",
					 wname[w], initial_cfg[w].max_running, initial_cfg[w].max_queued,
					 LEAF_QUEUE_TIMEOUT_MS, parent, initial_cfg[w].reserved, initial_cfg[w].weight);
			tc_setup_exec(conn, sql);
		}
	for (i = 0; i < 1000; i++)
	{
		PGresult   *res = PQexec(conn, "SELECT count(*) FROM bulkhead_stats WHERE workload ~ '^b[st]_'");
		bool		all = PQresultStatus(res) == PGRES_TUPLES_OK &&
			atoi(PQgetvalue(res, 0, 0)) == NW;

		PQclear(res);
		if (all)
			break;
		tc_sleep_ms(10);
	}
	if (!read_rows(conn, rows) || !shows(rows, initial_cfg))
	{
		fprintf(stderr, "bulkhead_stress: set-up failed: the tree was not loaded as defined\n");
		exit(2);
	}
}

/* the end: all back to zero within 10 s, acquired = released per leaf */
static void
check_end(PGconn *conn)
{
	Row			rows[NW];
	int			i;
	int			w;
	bool		idle = false;

	for (i = 0; i < 1000; i++)
	{
		if (read_rows(conn, rows))
		{
			idle = true;
			for (w = 0; w < NW; w++)
				if (rows[w].running != 0 || rows[w].queued != 0)
					idle = false;
			if (idle)
				break;
		}
		tc_sleep_ms(10);
	}
	if (!idle)
		for (w = 0; w < NW; w++)
			if (rows[w].running != 0 || rows[w].queued != 0)
				tc_violation(V_END, "%s: running %d, queued %d 10 s after the clients ended",
						  wname[w], rows[w].running, rows[w].queued);
	tc_no_activity_left(conn, "'^b[st]_'", V_END);
	read_rows(conn, rows);
	printf("\n%-8s %-8s %5s %3s %6s %10s %10s\n", "workload", "parent", "limit", "r", "weight",
		   "acquired", "released");
	for (w = 0; w < NW; w++)
	{
		printf("%-8s %-8s %5d %3d %6d %10ld %10ld\n", wname[w],
			   rows[w].parent >= 0 ? wname[rows[w].parent] : "-", rows[w].limit,
			   rows[w].reserved, rows[w].weight, rows[w].acquired, rows[w].released);
		if (!is_budget(w) && rows[w].acquired != rows[w].released)
			tc_violation(V_END, "%s: acquired %ld, released %ld", wname[w], rows[w].acquired,
					  rows[w].released);
		if (!is_budget(w) && rows[w].acquired == 0)
			tc_tool_error("%s: no permit was acquired in the run", wname[w]);
	}
}

int
budget_stress_main(int clients, int seconds, const char *conninfo_arg, uint64_t seed_arg)
{
	PGconn	   *conn;
	pthread_t  *threads;
	pthread_t	monitor;
	pthread_t	changer;
	pthread_t	chaos;
	int			i;
	long		ops = 0;
	long		nviol = 0;
	long		nchanges = 0;
	double		runtime;

	conninfo = conninfo_arg;
	client_pid = calloc(clients, sizeof(int));
	tc_init(TC_BUDGETS, conninfo, n_viol, v_name, V_HANG, V_CLIENT, n_outcome,
			client_pid, &n_reconnects);
	nclients = clients;
	seed = seed_arg ? seed_arg : ((uint64_t) time(NULL) ^ ((uint64_t) getpid() << 20));
	conn = tc_connect_or_die(conninfo);
	setup_tree(conn);
	printf("budgets mode: %d clients, %d s, seed %" PRIu64 "\n", clients, seconds, seed);
	fflush(stdout);

	threads = calloc(clients, sizeof(pthread_t));
	tc_t_start = now_us();
	end_at = tc_t_start + (int64_t) seconds * 1000000;
	pthread_create(&monitor, NULL, monitor_main, NULL);
	for (i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, client_main, (void *) (intptr_t) i);
	pthread_create(&changer, NULL, changer_main, NULL);
	pthread_create(&chaos, NULL, chaos_main, NULL);
	pthread_join(chaos, NULL);
	pthread_join(changer, NULL);
	for (i = 0; i < clients; i++)
		pthread_join(threads[i], NULL);
	runtime = (now_us() - tc_t_start) / 1e6;
	/* the monitor keeps checking while the permits come back */
	check_end(conn);
	__atomic_store_n(&stop_all, 1, __ATOMIC_RELAXED);
	pthread_join(monitor, NULL);
	PQfinish(conn);

	for (i = 0; i < NOPS; i++)
		ops += n_ops[i];
	for (i = 0; i < NCH; i++)
		nchanges += i == CH_INVALID ? 0 : n_changes[i];
	for (i = 0; i < NV; i++)
		nviol += n_viol[i];
	printf("\noperations: %ld (%.0f/s):", ops, ops / runtime);
	for (i = 0; i < NOPS; i++)
		printf(" %s %ld%s", op_name[i], n_ops[i], i < NOPS - 1 ? "," : "\n");
	printf("statements:");
	for (i = 0; i < NOUTCOMES; i++)
		if (outcome_name[i] != NULL)
			printf(" %s %ld%s", outcome_name[i], n_outcome[i], i < NOUTCOMES - 1 ? "," : "");
	printf("; try_ false %ld\n", n_try_false);
	printf("chaos: %ld cancels, %ld terminations sent; %ld reconnects\n",
		   n_cancels_sent, n_terminates_sent, n_reconnects);
	printf("changes: %ld:", nchanges);
	for (i = 0; i < NCH; i++)
		printf(" %s %ld%s", change_name[i], n_changes[i], i < NCH - 1 ? "," : "");
	printf(" (reserved up %ld down %ld, limits up %ld down %ld, moves to the root %ld, to a mid budget %ld;"
		   " longest wait for the monitor to see a change %ld ms)\n",
		   n_reserved_up, n_reserved_down, n_limit_up, n_limit_down, n_moves_to_root,
		   n_moves_to_mid, n_change_waits_ms_max);
	printf("monitor: %ld samples, %ld bound checks, %ld epochs, %ld samples out of a bound"
		   " in an epoch not yet seen within it (allowed)\n",
		   n_samples, n_level_checks, n_epochs, n_over_allowed);
	printf("violations: %ld", nviol);
	for (i = 0; i < NV; i++)
		if (n_viol[i])
			printf("; %s %ld", v_name[i], n_viol[i]);
	printf("\n");
	if (tc_n_tool_errors)
		printf("tool errors: %ld\n", tc_n_tool_errors);
	printf("runtime: %.1f s\n", runtime);
	printf("summary: %ld operations, %ld changes, %ld violations\n", ops, nchanges, nviol);
	if (nviol > 0)
		return 1;
	return tc_n_tool_errors > 0 ? 2 : 0;
}
