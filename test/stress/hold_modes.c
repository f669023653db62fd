/*-------------------------------------------------------------------------
 *
 * hold_modes.c
 *	  The holds mode of bulkhead_stress (-D holds): runaway holders.  Clients
 *	  hold permits for random times around their workload's max_hold while
 *	  the background worker logs, cancels, terminates and moves the ones
 *	  that hold too long.  One thread per client, blocking libpq calls, plus
 *	  a changer, a chaos thread and a monitor, each on its own connection.
 *
 * The workloads (created afresh at the start, left in place at the end):
 *
 *	 hp_log     on_max_hold log                     (always log)
 *	 hp_cancel  on_max_hold cancel                  (always cancel)
 *	 hp_term    on_max_hold terminate               (always terminate)
 *	 hp_move    on_max_hold move, to hp_slow mostly (always move)
 *	 hp_slow    the plain move target: a small limit (the changer sets it to
 *	            0..3), a statement_timeout guard of 1.5 s, and a max_hold of
 *	            its own whose action the changer picks at random
 *	 ht_root (budget): ht_a ht_b ht_c
 *	   ht_a     on_max_hold move, to its sibling ht_b mostly (always move)
 *	   ht_b     the move target in the tree (limit 1..3, reserved 1), an
 *	            action of its own picked at random
 *	   ht_c     an action picked at random
 *
 * Every max_hold is between 50 and 500 ms (the changer changes it; the
 * workloads whose action it picks at random have none now and then).
 * move_to is changed too: hp_move to hp_slow, ht_b or hp_log; ht_a to ht_b,
 * ht_c or hp_slow; a random action's move_to any other workload that takes
 * permits (so a permit moved into hp_slow or ht_b meets a max_hold that
 * moves again: a move must never chain).  hp_slow and ht_b are also taken
 * directly by clients, so the moves into them find them at or over their
 * limit at times, and the changer lowers and raises their limits (hp_slow's
 * to 0 now and then).
 *
 * Clients pick a workload and hold its permit for a time drawn around its
 * max_hold as last set (some shorter, most around it, some 2-4 times, a few
 * 4-8 times longer, at most 3 s): by session (bulkhead_acquire ...
 * bulkhead_release, by the name taken), by transaction
 * (bulkhead_acquire_xact, commit or rollback) or automatically
 * (bulkhead.workload set, one statement or a block).  The hold is a
 * statement (pg_sleep), two or three shorter ones (move_to's guard applies
 * from the next statement), or idle: the client sleeps, idle in its
 * transaction for transaction and automatic permits.  Before giving a
 * permit back a client looks at its own row in bulkhead_activity: one
 * running row, in the workload it took, or moved (moved_from = the workload
 * it took, workload another one): a moved_from other than the workload
 * taken is a move that chained, a violation (a look that catches the
 * permit mid-move, in 0 or 2 rows, is taken again: see check_own).
 * 57014 (the worker's cancel, the chaos thread's, move_to's
 * statement_timeout) and a terminated connection are expected: the client
 * rolls back, gives back its session permits, checks it holds nothing, or
 * reconnects.  The chaos thread
 * cancels a random client every 20-80 ms and terminates one every
 * 0.5-2 s.  The changer changes one workload every 200-500 ms: a hold
 * setting (max_hold, on_max_hold, move_to), or a limit of a move target
 * (then it waits until the monitor has seen the limit), and one change in
 * twenty is one the constraints must refuse (23514).
 *
 * The monitor reads bulkhead_stats in a loop (the rows of ht_root's tree
 * are one state of it; the plain ones each one state of their own).  Per
 * sample:
 *
 * - ht_root's running is its children's added up, its queued 0;
 *   current_limit = max_running (nothing is adaptive); borrowed =
 *   max(0, running - reserved) (0 for the root);
 * - (a) running <= current_limit, (b) ht_root's children borrow no more
 *   than its shared part, (c) running + queued <= current_limit +
 *   max_queued, at every level, by the epoch rule of budget_modes.c with
 *   moves in it: a level's epoch is a run of samples in which
 *   current_limit, max_queued, reserved and the moved_in of every workload
 *   of its subtree (itself included) stay the same.  A move puts a permit
 *   into move_to beyond its limit and bounds (and into its budget); a
 *   lowered limit leaves holders above it; nothing else does.  Within an
 *   epoch a level grows only by grants made while it is under its bounds,
 *   so once seen within a bound in an epoch, a sample of that epoch out of
 *   it is a violation, and a sample over a bound may not show more than
 *   the previous one or the bound, whichever is higher (a move_to over its
 *   limit grants nothing until it is back under);
 * - the moves rule, from one sample to the next whatever their epochs: a
 *   level shows at most the highest of its previous value, its old bound
 *   and its new one, plus the permits moved into its subtree meanwhile
 *   (moved_in grows by one per move: grants stop at the bound, only moves
 *   go beyond it);
 * - no permit free beside a waiter (a move out serves the queue at once).
 *
 * At the end: every client disconnects; within 10 s running and queued are
 * 0 everywhere and bulkhead_activity has no row of these workloads; per
 * workload that takes permits acquired + moved_in = released + moved_out
 * (a permit granted in w and moved is released in move_to), over_hold >=
 * moved_out; summed over them acquired = released and moved_in =
 * moved_out; ht_root's acquired and released are its leaves' added up.
 * A statement that runs for 20 s (the clients' statement_timeout) is a
 * violation (a hang).  A run in which a moving workload moved nothing, or
 * a cancelling or terminating one saw no holder past its max_hold, is a
 * tool error (the mix was not exercised).
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
	W_LOG, W_CANCEL, W_TERM, W_MOVE, W_SLOW, W_ROOT, W_A, W_B, W_C, NW
};

static const char *const wname[NW] = {
	"hp_log", "hp_cancel", "hp_term", "hp_move", "hp_slow", "ht_root", "ht_a",
	"ht_b", "ht_c"
};

#define WORKLOAD_PATTERN "'^h[pt]_'"

/* the budget; every other workload takes permits */
static bool
is_budget(int w)
{
	return w == W_ROOT;
}

/* the parent of each workload (fixed) */
static const int wparent[NW] = {-1, -1, -1, -1, -1, -1, W_ROOT, W_ROOT, W_ROOT};

/* actions, as on_max_hold spells them */
enum
{
	A_LOG, A_CANCEL, A_TERMINATE, A_MOVE, NA
};
static const char *const action_name[NA] = {"log", "cancel", "terminate", "move"};

/* What the tool sets of a workload's row */
typedef struct Cfg
{
	int			max_running;
	int			max_queued;
	int			reserved;
	int			max_hold_ms;	/* 0: NULL */
	int			action;
	int			move_to;		/* index, -1 for NULL */
} Cfg;

/* insertion order: move targets and parents first */
static const int insert_order[NW] = {W_SLOW, W_LOG, W_CANCEL, W_TERM, W_MOVE, W_ROOT, W_B, W_C, W_A};

static const Cfg initial_cfg[NW] = {
	[W_LOG] = {3, 6, 0, 200, A_LOG, -1},
	[W_CANCEL] = {3, 6, 0, 150, A_CANCEL, -1},
	[W_TERM] = {2, 4, 0, 300, A_TERMINATE, -1},
	[W_MOVE] = {3, 6, 0, 100, A_MOVE, W_SLOW},
	[W_SLOW] = {2, 4, 0, 500, A_LOG, -1},
	[W_ROOT] = {6, 1000, 0, 0, A_LOG, -1},
	[W_A] = {3, 4, 1, 120, A_MOVE, W_B},
	[W_B] = {2, 4, 1, 0, A_LOG, -1},
	[W_C] = {3, 4, 0, 250, A_CANCEL, -1},
};

/* how often clients pick each workload (per cent; the budget never) */
static const int pick_weight[NW] = {
	[W_LOG] = 12, [W_CANCEL] = 12, [W_TERM] = 8, [W_MOVE] = 16, [W_SLOW] = 12,
	[W_ROOT] = 0, [W_A] = 16, [W_B] = 12, [W_C] = 12
};

#define QUEUE_TIMEOUT_MS 200
#define SLOW_STATEMENT_TIMEOUT "1500ms"
#define MAX_HOLD_MS 3000

/*---- shared state ----*/

static const char *conninfo;
static uint64_t seed;
static int	nclients;
static int64_t end_at;
static volatile int stop_all;	/* the clients have ended: the monitor ends */

static int *client_pid;			/* backend pid of each client, 0 if none */
static int	hold_ms_now[NW];	/* max_hold as last set (clients read it) */

/* counters, added to with __atomic */
enum
{
	OP_SESSION, OP_XACT, OP_AUTO, NOPS
};
static const char *const op_name[NOPS] = {"session", "transaction", "automatic"};
static long n_ops[NOPS];

enum
{
	H_BUSY, H_SPLIT, H_IDLE, H_MIXED, NHOLDS
};
static const char *const hold_name[NHOLDS] = {
	"one statement", "split in statements", "idle", "statement then idle"
};
static long n_holds[NHOLDS];
static long n_hold_class[4];	/* shorter, around, 2-4x, 4-8x max_hold */
static long n_idle_in_xact;

/* the outcomes this mode can see (40P01 and 42809 are "other" here) */
static const char *const outcome_name[NOUTCOMES] = {
	[O_OK] = "ok", [O_FULL] = "full", [O_TIMEOUT] = "timeout",
	[O_CANCEL] = "cancelled", [O_GUARD] = "statement_timeout (guard)",
	[O_GONE] = "killed", [O_HUNG] = "hung(20s)", [O_OTHER] = "other"
};
static long n_outcome[NOUTCOMES];
static long n_cancels_sent;
static long n_terminates_sent;
static long n_reconnects;
static long n_seen_moved;		/* a client saw its permit moved */
static long n_seen_own;			/* ... or still in its workload */
static long n_seen_mid_move;	/* ... or in 0 or 2 rows (read mid-move) */

enum
{
	CH_MAX_HOLD, CH_ACTION, CH_MOVE_TO, CH_LIMIT, CH_INVALID, NCH
};
static const char *const change_name[NCH] = {
	"max_hold", "on_max_hold", "move_to", "limit of a move target", "refused"
};
static long n_changes[NCH];
static long n_limit_up, n_limit_down, n_limit_zero;
static long n_change_waits_ms_max;

/* monitor figures */
static long n_samples;
static long n_level_checks;
static long n_epochs;
static long n_over_allowed;		/* samples out of a bound not yet seen within it */
static long n_over_limit_samples;	/* samples of a level over its limit */
static int	max_over[NW];		/* most a level was seen over its limit */

/* violations by kind */
enum
{
	V_OVER_LIMIT, V_LENT, V_ADMISSION, V_GREW, V_MOVES, V_IDLE, V_SUMS, V_END,
	V_CLIENT, V_CHAIN, V_REFUSAL, V_HANG, NV
};
static const char *const v_name[NV] = {
	"(a) over its limit", "(b) reservation lent", "(c) over limit + max_queued",
	"grew while over a bound", "over a bound by more than the moves into it",
	"permit free while a workload waits",
	"sums / borrowed / current_limit", "end state", "client (permits held)",
	"a move chained or a permit shown wrong", "a change the constraints must refuse was accepted",
	"statement hung"
};
static long n_viol[NV];

/* The changer's limits waiting to be seen by the monitor (tc_wait_seen) */
static int	expected_limit[NW];

/*---- statements ----*/

static int
random_workload(uint64_t *rs)
{
	int			r = tc_pick(rs, 100);
	int			w;

	for (w = 0; w < NW; w++)
	{
		if (r < pick_weight[w])
			return w;
		r -= pick_weight[w];
	}
	return W_LOG;
}

/* how long to hold a permit of w: around its max_hold as last set */
static int
hold_time(uint64_t *rs, int w)
{
	int			mh = __atomic_load_n(&hold_ms_now[w], __ATOMIC_RELAXED);
	int			r = tc_pick(rs, 100);
	int			ms;
	int			class;

	if (mh <= 0)
		mh = 200;
	if (r < 30)
	{
		class = 0;
		ms = mh * tc_between(rs, 10, 80) / 100;
	}
	else if (r < 70)
	{
		class = 1;
		ms = mh * tc_between(rs, 80, 150) / 100;
	}
	else if (r < 92)
	{
		class = 2;
		ms = mh * tc_between(rs, 200, 400) / 100;
	}
	else
	{
		class = 3;
		ms = mh * tc_between(rs, 400, 800) / 100;
	}
	tc_add(&n_hold_class[class], 1);
	return ms > MAX_HOLD_MS ? MAX_HOLD_MS : ms;
}

static Outcome
sleep_stmt(TcClient *c, int ms)
{
	char		sql[64];

	snprintf(sql, sizeof(sql), "SELECT pg_sleep(%d / 1000.0)", ms);
	return tc_step(c, sql);
}

/*
 * Hold for ms: one statement, two or three, idle (the client sleeps; in a
 * transaction when in_xact), or a statement then idle
 */
static Outcome
hold(TcClient *c, int ms, bool in_xact)
{
	uint64_t   *rs = &c->rs;
	int			kind = tc_pick(rs, 100);
	Outcome		o;
	int			i;
	int			n;

	if (kind < 40)
	{
		tc_add(&n_holds[H_BUSY], 1);
		return sleep_stmt(c, ms);
	}
	if (kind < 65)
	{
		tc_add(&n_holds[H_SPLIT], 1);
		n = tc_between(rs, 2, 3);
		for (i = 0; i < n; i++)
			if ((o = sleep_stmt(c, ms / n)) != O_OK)
				return o;
		return O_OK;
	}
	if (in_xact)
		tc_add(&n_idle_in_xact, 1);
	if (kind < 85)
	{
		tc_add(&n_holds[H_IDLE], 1);
		tc_sleep_ms(ms);
		return O_OK;
	}
	tc_add(&n_holds[H_MIXED], 1);
	if ((o = sleep_stmt(c, ms / 2)) != O_OK)
		return o;
	tc_sleep_ms(ms - ms / 2);
	return O_OK;
}

/*
 * The client's own permit, taken in w, as bulkhead_activity shows it: one
 * running row, in w or moved from w (a move never chains).  The view reads
 * the workloads one after the other, each under its own lock, so a permit
 * that moves meanwhile may show in both or in neither: such a look (its
 * count not 1) is counted and taken again, up to 5 times.
 */
static Outcome
check_own(TcClient *c, int w)
{
	char		val[320];
	char		where[128];
	char		from[128];
	char	   *bar;
	char	   *bar2;
	Outcome		o;
	int			tries;

	for (tries = 0;; tries++)
	{
		if ((o = tc_step2(c, "SELECT count(*) || '|' || coalesce(min(workload || '/' || state), '')"
					   " || '|' || coalesce(min(moved_from), '(null)')"
					   " FROM bulkhead_activity WHERE pid = pg_backend_pid()",
					   val, NULL, sizeof(val))) != O_OK)
			return o;
		bar = strchr(val, '|');
		bar2 = bar ? strchr(bar + 1, '|') : NULL;
		if (bar == NULL || bar2 == NULL)
		{
			tc_tool_error("client %d: bulkhead_activity read as \"%s\"", c->id, val);
			return O_OK;
		}
		*bar = '\0';
		*bar2 = '\0';
		if (strcmp(val, "1") == 0)
			break;
		tc_add(&n_seen_mid_move, 1);
		if (tries == 4)
		{
			tc_violation(V_CLIENT, "client %d: holding one permit of %s, %s rows of its own in bulkhead_activity, 5 looks in a row",
					  c->id, wname[w], val);
			return O_OK;
		}
	}
	snprintf(where, sizeof(where), "%s", bar + 1);
	snprintf(from, sizeof(from), "%s", bar2 + 1);
	if (strcmp(from, "(null)") == 0)
	{
		char		want[128];

		snprintf(want, sizeof(want), "%s/running", wname[w]);
		tc_add(&n_seen_own, 1);
		if (strcmp(where, want) != 0)
			tc_violation(V_CHAIN, "client %d: its permit of %s shows as %s without moved_from",
					  c->id, wname[w], where);
	}
	else
	{
		char	   *slash = strchr(where, '/');
		int			now_in;

		tc_add(&n_seen_moved, 1);
		if (slash)
			*slash = '\0';
		now_in = tc_windex(wname, NW, where);
		if (strcmp(from, wname[w]) != 0)
			tc_violation(V_CHAIN, "client %d: its permit of %s shows in %s, moved from %s: a move chained",
					  c->id, wname[w], where, from);
		else if (now_in < 0 || now_in == w || is_budget(now_in) || !slash ||
				 strcmp(slash + 1, "running") != 0)
			tc_violation(V_CHAIN, "client %d: its permit of %s moved to %s/%s",
					  c->id, wname[w], where, slash ? slash + 1 : "?");
	}
	return O_OK;
}

/* a wait bound: NULL (the workload's queue_timeout), or 0-300 ms */
static void
random_timeout(uint64_t *rs, char *buf, size_t len)
{
	if (tc_chance(rs, 50))
		snprintf(buf, len, "NULL");
	else
		snprintf(buf, len, "'%d ms'", tc_pick(rs, 301));
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
	int			w = random_workload(rs);
	int			ms = hold_time(rs, w);
	bool		look = tc_chance(rs, 50);
	char		sql[256];
	char		t[32];
	Outcome		o;

	if (r < 35)
	{
		/* session permit, released by the name taken */
		tc_add(&n_ops[OP_SESSION], 1);
		random_timeout(rs, t, sizeof(t));
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire('%s', %s)", wname[w], t);
		if ((o = tc_step(c, sql)) != O_OK)
			return o;
		if ((o = hold(c, ms, false)) != O_OK)
			return o;
		if (look && (o = check_own(c, w)) != O_OK)
			return o;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wname[w]);
		o = tc_step(c, sql);
		if (o == O_OTHER)
			tc_violation(V_CLIENT, "client %d: the release of a permit it holds failed (%s)", c->id, sql);
		return o;
	}
	if (r < 70)
	{
		/* transaction permit; idle holds are idle in transaction */
		tc_add(&n_ops[OP_XACT], 1);
		if ((o = tc_step(c, "BEGIN")) != O_OK)
			return o;
		random_timeout(rs, t, sizeof(t));
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire_xact('%s', %s)", wname[w], t);
		if ((o = tc_step(c, sql)) != O_OK)
			return o;
		if ((o = hold(c, ms, true)) != O_OK)
			return o;
		if (look && (o = check_own(c, w)) != O_OK)
			return o;
		return tc_step(c, tc_chance(rs, 70) ? "COMMIT" : "ROLLBACK");
	}
	/* automatic permits: bulkhead.workload, one statement or a block */
	tc_add(&n_ops[OP_AUTO], 1);
	snprintf(sql, sizeof(sql), "SET bulkhead.workload = '%s'", wname[w]);
	if ((o = tc_step(c, sql)) != O_OK)
		return o;
	c->gated = true;
	if (tc_chance(rs, 40))
	{
		tc_add(&n_holds[H_BUSY], 1);
		if ((o = sleep_stmt(c, ms)) != O_OK)
			return o;
	}
	else
	{
		if ((o = tc_step(c, "BEGIN")) != O_OK || (o = tc_step(c, "SELECT 1")) != O_OK)
			return o;
		if ((o = hold(c, ms, true)) != O_OK)
			return o;
		if (look && (o = check_own(c, w)) != O_OK)
			return o;
		if ((o = tc_step(c, tc_chance(rs, 70) ? "COMMIT" : "ROLLBACK")) != O_OK)
			return o;
	}
	if ((o = tc_step(c, "RESET bulkhead.workload")) != O_OK)
		return o;
	c->gated = false;
	return O_OK;
}

static void *
client_main(void *arg)
{
	static const TcClientWay way = {client_op, 4, 10, 50};

	tc_client_run((int) (intptr_t) arg, seed, end_at, &way);
	return NULL;
}

/*---- chaos: cancels and terminations from outside ----*/

static void *
chaos_main(void *arg)
{
	static const TcChaosWay way = {500, 2000, 20, 80};

	tc_chaos_run(seed, end_at, nclients, &way, &n_cancels_sent, &n_terminates_sent);
	return arg;
}

/*---- the changer ----*/

static void
cfg_sql(const Cfg *c, int w, char *buf, size_t len)
{
	char		mh[32];
	char		mt[80];

	if (c[w].max_hold_ms > 0)
		snprintf(mh, sizeof(mh), "'%d ms'", c[w].max_hold_ms);
	else
		snprintf(mh, sizeof(mh), "NULL");
	if (c[w].move_to >= 0)
		snprintf(mt, sizeof(mt), "'%s'", wname[c[w].move_to]);
	else
		snprintf(mt, sizeof(mt), "NULL");
	snprintf(buf, len,
			 "UPDATE bulkhead_workload SET max_running = %d, max_hold = %s, on_max_hold = '%s',"
			 " move_to = %s WHERE name = '%s'",
			 c[w].max_running, mh, action_name[c[w].action], mt, wname[w]);
}

/* the workloads whose action the changer keeps (they anchor the mix) */
static int
fixed_action(int w)
{
	switch (w)
	{
		case W_LOG:
			return A_LOG;
		case W_CANCEL:
			return A_CANCEL;
		case W_TERM:
			return A_TERMINATE;
		case W_MOVE:
		case W_A:
			return A_MOVE;
		default:
			return -1;
	}
}

/* a move target for w */
static int
random_target(uint64_t *rs, int w)
{
	int			r = tc_pick(rs, 100);
	int			t;

	if (w == W_MOVE)
		return r < 60 ? W_SLOW : r < 80 ? W_B : W_LOG;
	if (w == W_A)
		return r < 60 ? W_B : r < 80 ? W_C : W_SLOW;
	do
		t = tc_pick(rs, NW);
	while (t == w || is_budget(t));
	return t;
}

/* a valid random change of one row of cur into next; returns its kind */
static int
random_change(uint64_t *rs, const Cfg *cur, Cfg *next, int *changed)
{
	int			w;
	int			kind;
	Cfg		   *n;

	memcpy(next, cur, sizeof(Cfg) * NW);
	if (tc_chance(rs, 25))
	{
		/* a move target's limit: lowered under its holders, raised, 0 */
		w = tc_chance(rs, 50) ? W_SLOW : W_B;
		n = &next[w];
		do
		{
			if (w == W_SLOW)
				n->max_running = tc_chance(rs, 15) ? 0 : tc_between(rs, 1, 3);
			else
				n->max_running = tc_between(rs, 1, 3);	/* >= its reservation */
		} while (n->max_running == cur[w].max_running);
		*changed = w;
		return CH_LIMIT;
	}
	do
		w = tc_pick(rs, NW);
	while (is_budget(w));
	n = &next[w];
	*changed = w;
	if (fixed_action(w) >= 0)
	{
		if (fixed_action(w) == A_MOVE && tc_chance(rs, 50))
		{
			int			t;

			do
				t = random_target(rs, w);
			while (t == cur[w].move_to);
			n->move_to = t;
			return CH_MOVE_TO;
		}
		do
			n->max_hold_ms = tc_between(rs, 50, 500);
		while (n->max_hold_ms == cur[w].max_hold_ms);
		return CH_MAX_HOLD;
	}
	/* the others: any action, a max_hold or now and then none */
	kind = CH_ACTION;
	n->action = tc_pick(rs, NA);
	n->max_hold_ms = tc_chance(rs, 15) ? 0 : tc_between(rs, 50, 500);
	n->move_to = n->action == A_MOVE ? random_target(rs, w) : -1;
	if (n->action == cur[w].action)
		kind = n->move_to != cur[w].move_to ? CH_MOVE_TO : CH_MAX_HOLD;
	return kind;
}

/* a change the constraints must refuse (23514) */
static void
invalid_change(uint64_t *rs, char *sql, size_t len, const char **what)
{
	int			w;

	do
		w = tc_pick(rs, NW);
	while (is_budget(w));
	switch (tc_pick(rs, 6))
	{
		case 0:
			*what = "move_to the workload itself";
			snprintf(sql, len, "UPDATE bulkhead_workload SET on_max_hold = 'move', move_to = name,"
					 " max_hold = '100 ms' WHERE name = '%s'", wname[w]);
			break;
		case 1:
			*what = "move without move_to";
			snprintf(sql, len, "UPDATE bulkhead_workload SET on_max_hold = 'move', move_to = NULL,"
					 " max_hold = '100 ms' WHERE name = '%s'", wname[w]);
			break;
		case 2:
			*what = "move_to a budget";
			snprintf(sql, len, "UPDATE bulkhead_workload SET on_max_hold = 'move', move_to = 'ht_root',"
					 " max_hold = '100 ms' WHERE name = '%s'", wname[w]);
			break;
		case 3:
			*what = "an unknown on_max_hold";
			snprintf(sql, len, "UPDATE bulkhead_workload SET on_max_hold = 'kill' WHERE name = '%s'",
					 wname[w]);
			break;
		case 4:
			*what = "max_hold 0";
			snprintf(sql, len, "UPDATE bulkhead_workload SET max_hold = '0' WHERE name = '%s'",
					 wname[w]);
			break;
		default:
			*what = "move_to with another action";
			snprintf(sql, len, "UPDATE bulkhead_workload SET on_max_hold = 'cancel',"
					 " move_to = '%s' WHERE name = '%s'", wname[w == W_LOG ? W_SLOW : W_LOG],
					 wname[w]);
			break;
	}
}

/* wait until the monitor has seen the limits in bulkhead_stats (at most 10 s) */
static bool
wait_seen(const Cfg *exp)
{
	int			limit[NW];
	int			w;

	for (w = 0; w < NW; w++)
		limit[w] = exp[w].max_running;
	return tc_wait_seen(expected_limit, limit, sizeof(expected_limit), &n_change_waits_ms_max);
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
		if (tc_chance(&rs, 5))
		{
			const char *what;
			Outcome		o;

			invalid_change(&rs, sql, sizeof(sql), &what);
			o = tc_run(conn, sql, NULL, 0, err, sizeof(err));
			tc_add(&n_changes[CH_INVALID], 1);
			if (o == O_OK)
			{
				tc_violation(V_REFUSAL, "%s was accepted: %s", what, sql);
				/* put the rows back as the tool has them */
				for (w = 0; w < NW; w++)
				{
					if (is_budget(w))
						continue;
					cfg_sql(cur, w, sql, sizeof(sql));
					if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK)
						tc_tool_error("changer: restoring after an accepted bad change: %s: %s", sql, err);
				}
			}
			else if (o == O_GONE)
			{
				tc_tool_error("changer: connection lost: %s", err);
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
			}
			else if (strncmp(err, "23514", 5) != 0)
				tc_tool_error("changer: %s refused with %.5s, not 23514: %s", what, err, err);
			continue;
		}
		kind = random_change(&rs, cur, next, &w);
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
		if (kind == CH_LIMIT)
			tc_add(next[w].max_running == 0 ? &n_limit_zero :
				next[w].max_running > cur[w].max_running ? &n_limit_up : &n_limit_down, 1);
		__atomic_store_n(&hold_ms_now[w], next[w].max_hold_ms, __ATOMIC_RELAXED);
		memcpy(cur, next, sizeof(cur));
		if (kind == CH_LIMIT && !wait_seen(cur))
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
	int			borrowed;
	int			running;
	int			queued;
	long		acquired;
	long		released;
	long		over_hold;
	long		moved_out;
	long		moved_in;
} Row;

/* per level: its epoch and what was seen in it */
typedef struct Level
{
	bool		valid;
	char		epoch[512];
	bool		within[3];		/* (a), (b), (c) seen within in this epoch */
	bool		have_prev;
	int			prev[3];		/* running, borrowed sum, running + queued */
	/* the previous sample, whatever its epoch (the moves rule) */
	bool		have_last;
	int			last_value[3];
	int			last_bound[3];
	long		last_in;		/* moved_in of the subtree, itself included */
} Level;

static Level levels[NW];

#define STATS_SQL \
	"SELECT workload, parent, current_limit, max_running, max_queued, reserved," \
	" borrowed, running, queued, acquired, released, over_hold, moved_out, moved_in" \
	" FROM bulkhead_stats WHERE workload ~ " WORKLOAD_PATTERN

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
		if (rows[w].parent != wparent[w])
			tc_tool_error("monitor: %s has the parent %s", wname[w],
					   PQgetisnull(res, i, 1) ? "(none)" : PQgetvalue(res, i, 1));
		rows[w].limit = atoi(PQgetvalue(res, i, 2));
		rows[w].max_running = atoi(PQgetvalue(res, i, 3));
		rows[w].max_queued = atoi(PQgetvalue(res, i, 4));
		rows[w].reserved = atoi(PQgetvalue(res, i, 5));
		rows[w].borrowed = atoi(PQgetvalue(res, i, 6));
		rows[w].running = atoi(PQgetvalue(res, i, 7));
		rows[w].queued = atoi(PQgetvalue(res, i, 8));
		rows[w].acquired = atol(PQgetvalue(res, i, 9));
		rows[w].released = atol(PQgetvalue(res, i, 10));
		rows[w].over_hold = atol(PQgetvalue(res, i, 11));
		rows[w].moved_out = atol(PQgetvalue(res, i, 12));
		rows[w].moved_in = atol(PQgetvalue(res, i, 13));
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

/* budget p: the borrowed sum of its children and its shared part */
static void
shared_part(const Row *rows, int p, int *borrowed, int *shared)
{
	int			c;
	int			sum_r = 0;
	int			b = 0;

	for (c = 0; c < NW; c++)
		if (wparent[c] == p)
		{
			sum_r += rows[c].reserved;
			if (rows[c].running > rows[c].reserved)
				b += rows[c].running - rows[c].reserved;
		}
	*borrowed = b;
	*shared = rows[p].limit > sum_r ? rows[p].limit - sum_r : 0;
}

/* a permit is free for w on its whole path */
static bool
path_free(const Row *rows, int w)
{
	for (; w >= 0; w = wparent[w])
	{
		int			p = wparent[w];

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

/* the rows w is compared with: its tree, or itself */
static void
state_text(const Row *rows, int w, char *buf, size_t len)
{
	size_t		off = 0;
	int			v;
	int			root = w;

	while (wparent[root] >= 0)
		root = wparent[root];
	buf[0] = '\0';
	for (v = 0; v < NW && off < len; v++)
		if (v == root || wparent[v] == root)
			off += snprintf(buf + off, len - off,
							"%s%s(L %d, r %d, run %d, q %d, borrowed %d, moved in %ld out %ld)",
							off ? " " : "", wname[v], rows[v].limit, rows[v].reserved,
							rows[v].running, rows[v].queued, rows[v].borrowed,
							rows[v].moved_in, rows[v].moved_out);
}

/*
 * One bound of one level: the epoch rule, the no-growth rule, and the moves
 * rule: from one sample to the next, whatever changed, a level over a bound
 * shows at most the higher of its previous value, the old and the new bound,
 * plus the permits moved into its subtree meanwhile (grants stop at the
 * bound; only a move goes beyond it).  in is the subtree's moved_in now.
 */
static void
check_bound(const Row *rows, int w, int which, int value, int bound, long in,
			const char *what)
{
	Level	   *lev = &levels[w];
	int			kinds[3] = {V_OVER_LIMIT, V_LENT, V_ADMISSION};
	char		text[2048];

	tc_add(&n_level_checks, 1);
	if (lev->have_last)
	{
		long		most = lev->last_value[which];

		if (lev->last_bound[which] > most)
			most = lev->last_bound[which];
		if (bound > most)
			most = bound;
		most += in - lev->last_in;
		if (value > most)
		{
			state_text(rows, w, text, sizeof(text));
			tc_violation(V_MOVES, "%s: %s %d (bound %d), was %d (bound %d); %ld moved into it since",
					  wname[w], what, value, bound, lev->last_value[which],
					  lev->last_bound[which], in - lev->last_in);
		}
	}
	lev->last_value[which] = value;
	lev->last_bound[which] = bound;
	if (value <= bound)
		lev->within[which] = true;
	else
	{
		if (lev->within[which])
		{
			state_text(rows, w, text, sizeof(text));
			tc_violation(kinds[which], "%s: %s %d > %d in an epoch where it was seen within (no move into it, no limit lowered); %s",
					  wname[w], what, value, bound, text);
		}
		else
			tc_add(&n_over_allowed, 1);
	}
	if (lev->have_prev && value > bound && value > lev->prev[which])
	{
		state_text(rows, w, text, sizeof(text));
		tc_violation(V_GREW, "%s: %s %d, was %d, over the bound %d (no move into it, no change in between); %s",
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
		int			kids = 0;
		int			want_borrowed;
		long		in;

		/* the sums, borrowed, current_limit */
		for (c = 0; c < NW; c++)
			if (wparent[c] == w)
			{
				kids++;
				sum_run += rows[c].running;
			}
		if (kids > 0 && (r->running != sum_run || r->queued != 0))
		{
			state_text(rows, w, text, sizeof(text));
			tc_violation(V_SUMS, "budget %s: running %d, queued %d; its children's running adds up to %d; %s",
					  wname[w], r->running, r->queued, sum_run, text);
		}
		want_borrowed = r->parent >= 0 && r->running > r->reserved ? r->running - r->reserved : 0;
		if (r->borrowed != want_borrowed)
			tc_violation(V_SUMS, "%s: borrowed %d, running %d, reserved %d%s",
					  wname[w], r->borrowed, r->running, r->reserved, r->parent < 0 ? " (a root)" : "");
		if (r->limit != r->max_running)
			tc_violation(V_SUMS, "%s: current_limit %d, max_running %d (not adaptive)",
					  wname[w], r->limit, r->max_running);
		if (r->running > r->limit)
		{
			tc_add(&n_over_limit_samples, 1);
			if (r->running - r->limit > max_over[w])
				max_over[w] = r->running - r->limit;
		}

		in = r->moved_in;
		for (c = 0; c < NW; c++)
			if (wparent[c] == w)
				in += rows[c].moved_in;

		/* the epoch: its bounds, and the moves into its subtree */
		off = snprintf(epoch, sizeof(epoch), "%d|%d|%d|%ld|", r->limit, r->reserved,
					   r->max_queued, r->moved_in);
		for (c = 0; c < NW && off < sizeof(epoch); c++)
			if (wparent[c] == w)
				off += snprintf(epoch + off, sizeof(epoch) - off, "%d:%d:%ld,", c,
								rows[c].reserved, rows[c].moved_in);
		if (!lev->valid || strcmp(epoch, lev->epoch) != 0)
		{
			lev->valid = true;
			strcpy(lev->epoch, epoch);
			memset(lev->within, 0, sizeof(lev->within));
			lev->have_prev = false;
			tc_add(&n_epochs, 1);
		}

		/* (a), (b), (c) */
		check_bound(rows, w, 0, r->running, r->limit, in, "running");
		if (kids > 0)
		{
			int			b;
			int			s;

			shared_part(rows, w, &b, &s);
			check_bound(rows, w, 1, b, s, in, "borrowed sum of the children (shared part)");
		}
		check_bound(rows, w, 2, r->running + r->queued, r->limit + r->max_queued, in,
					"running + queued (limit + max_queued)");
		lev->have_prev = true;
		lev->have_last = true;
		lev->last_in = in;

		/* no free permit beside a waiter */
		if (kids == 0 && r->queued > 0 && path_free(rows, w))
		{
			state_text(rows, w, text, sizeof(text));
			tc_violation(V_IDLE, "%s: %d queued, yet a permit is free on its path; %s",
					  wname[w], r->queued, text);
		}
	}
}

/* does the sample show the limits expected? */
static bool
shows_limits(const void *rows_arg, const void *expected)
{
	const Row  *rows = rows_arg;
	const int  *limit = expected;
	int			w;

	for (w = 0; w < NW; w++)
		if (rows[w].max_running != limit[w])
			return false;
	return true;
}

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
		tc_check_seen(shows_limits, rows, expected_limit);
		tc_sleep_ms(1);
	}
	PQfinish(conn);
	return arg;
}

/*---- set-up and the end ----*/

static void
setup_workloads(PGconn *conn)
{
	char		sql[768];
	int			i;
	int			w;
	Row			rows[NW];

	tc_setup_exec(conn, "DELETE FROM bulkhead_workload WHERE name ~ " WORKLOAD_PATTERN);
	for (i = 0; i < NW; i++)
	{
		const Cfg  *c;
		char		parent[80];
		char		mh[32];
		char		mt[80];

		w = insert_order[i];
		c = &initial_cfg[w];
		snprintf(parent, sizeof(parent), wparent[w] < 0 ? "NULL" : "'%s'",
				 wparent[w] < 0 ? "" : wname[wparent[w]]);
		snprintf(mh, sizeof(mh), c->max_hold_ms > 0 ? "'%d ms'" : "NULL", c->max_hold_ms);
		snprintf(mt, sizeof(mt), c->move_to >= 0 ? "'%s'" : "NULL",
				 c->move_to >= 0 ? wname[c->move_to] : "");
		snprintf(sql, sizeof(sql),
				 "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
				 " statement_timeout, parent, reserved, max_hold, on_max_hold, move_to)"
				 " VALUES ('%s', %d, %d, '%d ms', %s, %s, %d, %s, '%s', %s)",
				 wname[w], c->max_running, c->max_queued, QUEUE_TIMEOUT_MS,
				 w == W_SLOW ? "'" SLOW_STATEMENT_TIMEOUT "'" : "NULL", parent, c->reserved,
				 mh, action_name[c->action], mt);
		tc_setup_exec(conn, sql);
		hold_ms_now[w] = c->max_hold_ms;
	}
	snprintf(sql, sizeof(sql), "SELECT count(*) = %d FROM bulkhead_stats WHERE workload ~ "
			 WORKLOAD_PATTERN, NW);
	tc_setup_wait(conn, sql, "the workloads were");
	if (!read_rows(conn, rows))
	{
		fprintf(stderr, "bulkhead_stress: set-up failed: the workloads could not be read\n");
		exit(2);
	}
	for (w = 0; w < NW; w++)
	{
		/* the counts of an earlier run of the same names, if any */
		snprintf(sql, sizeof(sql), "SELECT bulkhead_stats_reset('%s')", wname[w]);
		tc_setup_exec(conn, sql);
	}
	if (!read_rows(conn, rows))
		exit(2);
	for (w = 0; w < NW; w++)
		if (rows[w].max_running != initial_cfg[w].max_running || rows[w].acquired != 0 ||
			rows[w].moved_in != 0)
		{
			fprintf(stderr, "bulkhead_stress: set-up failed: %s was not loaded as defined\n",
					wname[w]);
			exit(2);
		}
}

/* the end: all back to zero within 10 s, the accounting of every permit */
static void
check_end(PGconn *conn, Row *rows)
{
	int			i;
	int			w;
	bool		idle = false;
	long		acq = 0,
				rel = 0,
				in = 0,
				out = 0,
				leaves_acq = 0,
				leaves_rel = 0;

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
	tc_no_activity_left(conn, WORKLOAD_PATTERN, V_END);
	read_rows(conn, rows);
	printf("\n%-9s %-7s %5s %10s %10s %9s %9s %9s %8s\n", "workload", "parent", "limit",
		   "acquired", "released", "over_hold", "moved_out", "moved_in", "max_over");
	for (w = 0; w < NW; w++)
	{
		const Row  *r = &rows[w];

		printf("%-9s %-7s %5d %10ld %10ld %9ld %9ld %9ld %8d\n", wname[w],
			   wparent[w] >= 0 ? wname[wparent[w]] : "-", r->limit, r->acquired,
			   r->released, r->over_hold, r->moved_out, r->moved_in, max_over[w]);
		if (is_budget(w))
			continue;
		acq += r->acquired;
		rel += r->released;
		in += r->moved_in;
		out += r->moved_out;
		if (wparent[w] == W_ROOT)
		{
			leaves_acq += r->acquired;
			leaves_rel += r->released;
		}
		if (r->acquired + r->moved_in != r->released + r->moved_out)
			tc_violation(V_END, "%s: acquired %ld + moved_in %ld != released %ld + moved_out %ld",
					  wname[w], r->acquired, r->moved_in, r->released, r->moved_out);
		if (r->over_hold < r->moved_out)
			tc_violation(V_END, "%s: moved_out %ld > over_hold %ld", wname[w], r->moved_out,
					  r->over_hold);
		if (r->acquired == 0)
			tc_tool_error("%s: no permit was acquired in the run", wname[w]);
	}
	if (acq != rel)
		tc_violation(V_END, "summed over the workloads: acquired %ld, released %ld", acq, rel);
	if (in != out)
		tc_violation(V_END, "summed over the workloads: moved_in %ld, moved_out %ld", in, out);
	/*
	 * A budget counts a grant when it is made, a leaf when its caller takes
	 * it: a permit handed to a waiter whose wait then ends by a cancel counts
	 * in the budget's acquired and released (in the leaf's cancelled).  So
	 * the budget may count as many more grants as releases, never fewer.
	 */
	if (rows[W_ROOT].acquired - leaves_acq != rows[W_ROOT].released - leaves_rel ||
		rows[W_ROOT].acquired < leaves_acq)
		tc_violation(V_END, "ht_root: acquired %ld, released %ld; its leaves' add up to %ld, %ld",
				  rows[W_ROOT].acquired, rows[W_ROOT].released, leaves_acq, leaves_rel);
	/*
	 * A budget holds nothing of its own (no over_hold), and counts the
	 * permits moved into or out of its subtree (a move between two of its
	 * children stays in it: it counts none), so its moves are at most its
	 * children's, and its counters pair up as a leaf's do.
	 */
	if (rows[W_ROOT].over_hold != 0)
		tc_violation(V_END, "ht_root (a budget) counts holders past max_hold: %ld",
				  rows[W_ROOT].over_hold);
	if (rows[W_ROOT].acquired + rows[W_ROOT].moved_in !=
		rows[W_ROOT].released + rows[W_ROOT].moved_out)
		tc_violation(V_END, "ht_root: acquired %ld + moved_in %ld != released %ld + moved_out %ld",
				  rows[W_ROOT].acquired, rows[W_ROOT].moved_in,
				  rows[W_ROOT].released, rows[W_ROOT].moved_out);
	{
		long		child_in = 0,
					child_out = 0;

		for (w = 0; w < NW; w++)
			if (wparent[w] == W_ROOT)
			{
				child_in += rows[w].moved_in;
				child_out += rows[w].moved_out;
			}
		if (rows[W_ROOT].moved_in > child_in || rows[W_ROOT].moved_out > child_out)
			tc_violation(V_END, "ht_root counts more moves (in %ld, out %ld) than its children (in %ld, out %ld)",
					  rows[W_ROOT].moved_in, rows[W_ROOT].moved_out, child_in, child_out);
	}
	printf("summed over the workloads that take permits: acquired %ld, released %ld, moved %ld\n",
		   acq, rel, out);
	/* the mix must have been exercised */
	if (rows[W_MOVE].moved_out == 0 || rows[W_A].moved_out == 0)
		tc_tool_error("no permit was moved from hp_move (%ld) or from ht_a (%ld)",
				   rows[W_MOVE].moved_out, rows[W_A].moved_out);
	if (rows[W_CANCEL].over_hold == 0 || rows[W_TERM].over_hold == 0 || rows[W_LOG].over_hold == 0)
		tc_tool_error("no holder past max_hold in hp_log, hp_cancel or hp_term");
}

int
hold_stress_main(int clients, int seconds, const char *conninfo_arg, uint64_t seed_arg)
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
	long		over_hold = 0;
	double		runtime;
	Row			rows[NW];

	conninfo = conninfo_arg;
	client_pid = calloc(clients, sizeof(int));
	tc_init(TC_HOLDS, conninfo, n_viol, v_name, V_HANG, V_CLIENT, n_outcome,
			client_pid, &n_reconnects);
	nclients = clients;
	seed = seed_arg ? seed_arg : ((uint64_t) time(NULL) ^ ((uint64_t) getpid() << 20));
	conn = tc_connect_or_die(conninfo);
	setup_workloads(conn);
	printf("holds mode: %d clients, %d s, seed %" PRIu64 "\n", clients, seconds, seed);
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
	check_end(conn, rows);
	__atomic_store_n(&stop_all, 1, __ATOMIC_RELAXED);
	pthread_join(monitor, NULL);
	PQfinish(conn);

	for (i = 0; i < NOPS; i++)
		ops += n_ops[i];
	for (i = 0; i < NCH; i++)
		nchanges += i == CH_INVALID ? 0 : n_changes[i];
	for (i = 0; i < NV; i++)
		nviol += n_viol[i];
	for (i = 0; i < NW; i++)
		over_hold += rows[i].over_hold;
	printf("\noperations: %ld (%.0f/s):", ops, ops / runtime);
	for (i = 0; i < NOPS; i++)
		printf(" %s %ld%s", op_name[i], n_ops[i], i < NOPS - 1 ? "," : "\n");
	printf("holds:");
	for (i = 0; i < NHOLDS; i++)
		printf(" %s %ld,", hold_name[i], n_holds[i]);
	printf(" of them idle in a transaction %ld; by length: under max_hold %ld, around it %ld,"
		   " 2-4x %ld, 4-8x %ld\n", n_idle_in_xact, n_hold_class[0], n_hold_class[1],
		   n_hold_class[2], n_hold_class[3]);
	printf("statements:");
	for (i = 0; i < NOUTCOMES; i++)
		if (outcome_name[i] != NULL)
			printf(" %s %ld%s", outcome_name[i], n_outcome[i], i < NOUTCOMES - 1 ? "," : "\n");
	printf("own permit looked at: in its workload %ld, moved %ld; looks taken again (the permit"
		   " moved while bulkhead_activity read the workloads: 0 or 2 rows) %ld\n",
		   n_seen_own, n_seen_moved, n_seen_mid_move);
	printf("chaos: %ld cancels, %ld terminations sent; %ld reconnects\n",
		   n_cancels_sent, n_terminates_sent, n_reconnects);
	printf("changes: %ld:", nchanges);
	for (i = 0; i < NCH; i++)
		printf(" %s %ld%s", change_name[i], n_changes[i], i < NCH - 1 ? "," : "");
	printf(" (limits up %ld, down %ld, to 0 %ld; longest wait for the monitor to see a limit %ld ms)\n",
		   n_limit_up, n_limit_down, n_limit_zero, n_change_waits_ms_max);
	printf("monitor: %ld samples, %ld bound checks, %ld epochs, %ld samples of a level over its limit,"
		   " %ld samples out of a bound in an epoch not yet seen within it (allowed)\n",
		   n_samples, n_level_checks, n_epochs, n_over_limit_samples, n_over_allowed);
	printf("violations: %ld", nviol);
	for (i = 0; i < NV; i++)
		if (n_viol[i])
			printf("; %s %ld", v_name[i], n_viol[i]);
	printf("\n");
	if (tc_n_tool_errors)
		printf("tool errors: %ld\n", tc_n_tool_errors);
	printf("runtime: %.1f s\n", runtime);
	printf("summary: %ld operations, %ld over max_hold, %ld moved, %ld changes, %ld violations\n",
		   ops, over_hold, rows[W_MOVE].moved_out + rows[W_A].moved_out + rows[W_LOG].moved_out +
		   rows[W_CANCEL].moved_out + rows[W_TERM].moved_out + rows[W_SLOW].moved_out +
		   rows[W_B].moved_out + rows[W_C].moved_out, nchanges, nviol);
	if (nviol > 0)
		return 1;
	return tc_n_tool_errors > 0 ? 2 : 0;
}
