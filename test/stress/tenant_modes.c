/*-------------------------------------------------------------------------
 *
 * tenant_modes.c
 *	  The tenants mode of bulkhead_stress (-D tenants): callers name keys
 *	  (tenants) out of 10,000, most of them short-lived, on two workloads
 *	  with small limits and per-key caps, while cancels and terminations
 *	  come from outside and a monitor checks the keys in use against the
 *	  workloads' counts.  One thread per client, blocking libpq calls, plus
 *	  a chaos thread and a monitor, each on its own connection.
 *
 * The workloads (created afresh at the start, left in place at the end):
 *
 *	 tk_a      max_running 4, max_queued 20, queue_timeout 60 ms,
 *	           max_running_per_key 2, max_queued_per_key 2
 *	 tk_b      max_running 2, max_queued 10, queue_timeout 40 ms,
 *	           max_running_per_key NULL, max_queued_per_key 1
 *	 tk_probe  max_running bulkhead.max_keys + 1, max_queued 0; used only at
 *	           the end (the key table's capacity, see check_key_table)
 *
 * The keys: 10,000 names, "hot-0".."hot-7" (30% of the keyed calls),
 * 192 warm ones (15%; some with a quote, a non-ASCII letter, or 63 bytes
 * long, the most a key may have) and 9,800 cold ones ("k200".."k9999",
 * 55%, uniform: each is used now and then, and is in use for one call).
 * So the hot keys meet their caps and queue behind themselves, and the
 * cold ones enter and leave the key table all the time.
 *
 * Clients pick a workload (tk_a 60%, tk_b 40%) and an operation:
 *
 * - session: bulkhead_acquire(w, t, key), work, bulkhead_release(w); a
 *   quarter of them in a transaction that commits or rolls back before the
 *   release (the permit survives);
 * - try: bulkhead_try_acquire(w, t, key), work and release if true;
 * - transaction: BEGIN, bulkhead_acquire_xact(w, t, key) or
 *   bulkhead_try_acquire_xact, work, COMMIT or ROLLBACK;
 * - unkeyed: the 2-argument functions, or a NULL or empty key (no key),
 *   session or transaction: the workload's callers without a key compete
 *   with its keys;
 * - transparent: SET bulkhead.workload = w, then BEGIN, SET LOCAL
 *   bulkhead.key (a key, or '' for none), work (the gate takes the
 *   permit as that key), COMMIT or ROLLBACK; or SET bulkhead.key at
 *   session level and one statement; then RESET bulkhead.workload;
 * - nested: a session permit of tk_a as one key and a transaction permit
 *   of tk_b as another, bulkhead_release_all (must return 1), COMMIT;
 * - savepoint: BEGIN, SAVEPOINT, bulkhead_acquire_xact(w, t, key), work,
 *   ROLLBACK TO SAVEPOINT (the permit must go) or RELEASE SAVEPOINT (it
 *   must stay), COMMIT.
 *
 * Wait bounds: NULL (the workload's queue_timeout), '0', 1-40 ms or
 * 100-300 ms; work: pg_sleep of 0-12 ms, now and then 20-60 ms.  So queues
 * form, keys hit max_running_per_key and max_queued_per_key (53B01 at
 * once), waits time out (53B02), and a new key meets a full key table
 * (53400) when bulkhead.max_keys is small (run.sh sets 24).  Before
 * giving a permit back a client looks, two times in five, at its own rows:
 * one running row in the workload, with the key it named (NULL for no
 * key), and for a key a row of bulkhead_keys with running >= 1 (its own
 * permit keeps the key in use, so both reads must show it).  After an
 * error it rolls back, gives back its session permits and checks it has no
 * row left (tree_common.c).  The chaos thread cancels every 5-25 ms (a
 * waiter, a holder, or any client) and terminates one every 0.3-1.2 s (a
 * waiter, a holder, or any client; it reconnects).  One second in every
 * five is calm (see in_calm_phase): a few clients on two hot keys of tk_a,
 * so that the workload runs under its limit while a key at its cap waits.
 *
 * The monitor reads, in one statement, bulkhead_stats (s1), bulkhead_keys
 * (k), bulkhead_activity (a) and bulkhead_stats again (s2), as the four
 * branches of a UNION ALL (Append runs them in order; each row carries
 * clock_timestamp() and the order is checked).  Each view reads a
 * workload under its lock, so each shows one state of it, but the four
 * reads show different instants.  Checked on every read by itself:
 *
 * - k, per key: running >= 0, queued >= 0, not both 0 (a key with nothing
 *   held or waiting is freed at once), running <= max_running_per_key,
 *   queued <= max_queued_per_key, oldest_wait_ms set exactly when queued
 *   > 0, no key twice in a workload, every key one a client names; per
 *   workload: its keys' running adds up to at most max_running, running +
 *   queued to at most max_running + max_queued, and it has at most
 *   bulkhead.max_keys keys;
 * - a, per workload: running rows <= max_running, all rows <= max_running +
 *   max_queued, no backend twice, per key running rows <=
 *   max_running_per_key and queued rows <= max_queued_per_key; no wait of
 *   more than 10 s (every wait is bounded by 300 ms at most);
 * - s1, s2: running <= current_limit = max_running, running + queued <=
 *   max_running + max_queued (nothing changes the limits in this mode).
 *
 * Checked across reads only in a quiet window of a workload: when s1 and
 * s2 show the same running, queued, acquired, released, cancelled,
 * timed_out, rejected_full, deadlocks, moved_in and moved_out.  In slot.c
 * every change of a workload's entries (and with them of its keys' counts,
 * keys.c) bumps one of those counters under the workload's lock, except
 * an enqueue (queued + 1) and the grant of a waiter (queued - 1, running +
 * 1), which comes with the release or cancel that frees the permit or, at
 * a load or a reap, grants nothing unless a permit was free beside an
 * eligible waiter (the check below).  With all counters and running the
 * same, no release happened, so no grant (running would have grown), so
 * no enqueue (queued would have grown): k and a saw the very state of s1
 * and s2.  Then:
 *
 * - s.running = running rows of a, s.queued = queued rows;
 * - per key of k: running and queued = its rows of a; every key of a row
 *   of a is in k; the keys' running adds up to at most s.running and their
 *   queued to at most s.queued (exactly, with a's rows without a key);
 * - no permit free beside an eligible waiter: if s.running < max_running
 *   and s.queued > 0, no caller without a key waits (their group has no
 *   cap) and every key that has waiters is at max_running_per_key (a
 *   release, a cancelled wait, serves the least served waiting key under
 *   its cap while a permit is free).
 *
 * When every workload's window is quiet the keys of all workloads are of
 * one instant, and their count is checked against bulkhead.max_keys too.
 * Samples that are not quiet are counted, never reported.
 *
 * At the end: every client disconnects; within 10 s running and queued are
 * 0, and bulkhead_keys and bulkhead_activity have no row of these
 * workloads; acquired = released per workload.  Then the key table's
 * capacity (check_key_table): bulkhead.max_keys sessions each take a
 * permit of tk_probe as a key of their own (all must succeed: no entry of
 * the table was lost), one more key fails with 53400 while a caller
 * without a key still gets in, and once they are gone bulkhead_keys is
 * empty.  A statement that runs 20 s (the clients' statement_timeout)
 * hung: a violation.  A run in which no permit was taken as a key, none
 * without a key (in a run of 30 s or more), or no caller met
 * max_queued_per_key, is a tool error (the mix was not exercised).
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
	W_A, W_B, W_PROBE, NW
};

static const char *const wname[NW] = {"tk_a", "tk_b", "tk_probe"};

#define WORKLOAD_PATTERN "'^tk_'"

typedef struct Cfg
{
	int			max_running;
	int			max_queued;
	int			queue_timeout_ms;
	int			run_per_key;	/* 0: NULL (no cap) */
	int			queued_per_key; /* -1: NULL (no cap) */
} Cfg;

/* tk_probe's max_running is set from bulkhead.max_keys at the start */
static Cfg	cfg[NW] = {
	[W_A] = {4, 20, 60, 2, 2},
	[W_B] = {2, 10, 40, 0, 1},
	[W_PROBE] = {1, 0, 10, 0, -1},
};

/* the workloads the clients use */
#define NCW 2

/*---- the keys ----*/

#define NKEYS 10000
#define NHOT 8
#define NWARM 192
#define KEY_MAXLEN 63			/* BULKHEAD_KEY_MAXLEN */

static char key_names[NKEYS][KEY_MAXLEN + 1];
static unsigned char key_used[NKEYS];	/* named by a client */
static unsigned char key_seen[NKEYS];	/* seen in bulkhead_keys */

/* name -> id: open addressing, a power of two above twice NKEYS */
#define KEY_HASH_SIZE 32768
static int	key_hash[KEY_HASH_SIZE];

static uint32_t
fnv(const char *s)
{
	uint32_t	h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char) *s) * 16777619u;
	return h;
}

/*
 * The names: hot-N, warm ones (some with a quote, some with a non-ASCII
 * letter when the server's encoding is UTF8, some 63 bytes long), kN
 */
static void
make_keys(bool utf8)
{
	int			i;

	for (i = 0; i < NKEYS; i++)
	{
		char	   *n = key_names[i];
		uint32_t	h;

		if (i < NHOT)
			snprintf(n, KEY_MAXLEN + 1, "hot-%d", i);
		else if (i < NHOT + NWARM)
		{
			switch (i % 4)
			{
				case 0:
					snprintf(n, KEY_MAXLEN + 1, "it's-%d", i);
					break;
				case 1:
					snprintf(n, KEY_MAXLEN + 1, utf8 ? "\xc3\xa9mile-%d" : "emile-%d", i);
					break;
				case 2:
					snprintf(n, KEY_MAXLEN + 1, "long-%d-", i);
					while (strlen(n) < KEY_MAXLEN)
						strcat(n, "x");
					break;
				default:
					snprintf(n, KEY_MAXLEN + 1, "warm-%d", i);
					break;
			}
		}
		else
			snprintf(n, KEY_MAXLEN + 1, "k%d", i);
		for (h = fnv(n) & (KEY_HASH_SIZE - 1); key_hash[h] != 0; h = (h + 1) & (KEY_HASH_SIZE - 1))
			;
		key_hash[h] = i + 1;
	}
}

/* the id of a key's name, -1 if no client names it */
static int
key_id(const char *name)
{
	uint32_t	h;

	for (h = fnv(name) & (KEY_HASH_SIZE - 1); key_hash[h] != 0; h = (h + 1) & (KEY_HASH_SIZE - 1))
		if (strcmp(key_names[key_hash[h] - 1], name) == 0)
			return key_hash[h] - 1;
	return -1;
}

/*
 * Calm phases: one second in every five, only the first CALM_CLIENTS
 * clients work, on tk_a as hot-0 or hot-1, mostly 20-60 ms, so that the
 * workload runs under its limit while a key at its cap has waiters (the
 * check of a free permit beside an eligible waiter needs such states), and
 * the monitor's windows are quiet more often.
 */
#define CALM_EVERY_S 5
#define CALM_CLIENTS 6

static __thread bool calm_now;	/* this client's operation is in a calm phase */

static bool
in_calm_phase(void)
{
	return (now_us() - tc_t_start) / 1000000 % CALM_EVERY_S == CALM_EVERY_S - 1;
}

/* a key for a keyed call: hot 30%, warm 15%, cold 55%; calm: hot-0 or hot-1 */
static int
pick_key(uint64_t *rs)
{
	int			r = tc_pick(rs, 100);
	int			k;

	if (calm_now)
		k = r < 70 ? 0 : 1;		/* hot-1 less: a permit is often free */
	else if (r < 30)
		k = tc_pick(rs, NHOT);
	else if (r < 45)
		k = NHOT + tc_pick(rs, NWARM);
	else
		k = NHOT + NWARM + tc_pick(rs, NKEYS - NHOT - NWARM);
	__atomic_store_n(&key_used[k], 1, __ATOMIC_RELAXED);
	return k;
}

/* s as an SQL literal (standard_conforming_strings: quotes doubled) */
static void
lit(const char *s, char *buf, size_t len)
{
	size_t		o = 0;

	if (len < 3)
		return;
	buf[o++] = '\'';
	for (; *s && o + 3 < len; s++)
	{
		if (*s == '\'')
			buf[o++] = '\'';
		buf[o++] = *s;
	}
	buf[o++] = '\'';
	buf[o] = '\0';
}

/* err cut at its first line (libpq's messages go on with DETAIL, HINT) */
static const char *
oneline(char *err)
{
	char	   *nl = strchr(err, '\n');

	if (nl)
		*nl = '\0';
	return err;
}

/*---- shared state ----*/

static const char *conninfo;
static uint64_t seed;
static int	nclients;
static int64_t end_at;
static volatile int stop_all;	/* the clients have ended: the monitor ends */
static int	max_keys;			/* bulkhead.max_keys */

static int *client_pid;			/* backend pid of each client, 0 if none */

/* counters, added to with __atomic */
enum
{
	OP_SESSION, OP_SESSION_XACT, OP_TRY, OP_XACT, OP_TRY_XACT, OP_UNKEYED,
	OP_GATE, OP_GATE_NOKEY, OP_GATE_STMT, OP_NESTED, OP_SAVEPOINT, NOPS
};
static const char *const op_name[NOPS] = {
	"session", "session in a transaction", "try", "transaction", "try transaction",
	"unkeyed", "transparent (SET LOCAL bulkhead.key)", "transparent without a key",
	"transparent (SET bulkhead.key, one statement)", "nested", "savepoint"
};
static long n_ops[NOPS];

static const char *const outcome_name[NOUTCOMES] = {
	[O_OK] = "ok", [O_FULL] = "53B01 full", [O_TIMEOUT] = "53B02 timeout",
	[O_CANCEL] = "57014 cancelled", [O_DEADLOCK] = "40P01 deadlock",
	[O_WRONGTYPE] = "42809", [O_GUARD] = "guard", [O_GONE] = "killed",
	[O_HUNG] = "hung(20s)", [O_OTHER] = "other"
};
static long n_outcome[NOUTCOMES];
static long n_key_full;			/* 53B01 of max_queued_per_key */
static long n_no_room;			/* 53400: the key table full */
static long n_acquired_keyed;	/* permits taken as a key (calls that succeeded) */
static long n_acquired_unkeyed;

/* tries and permits taken per kind of caller: hot, warm, cold keys, none */
enum
{
	KC_HOT, KC_WARM, KC_COLD, KC_NONE, NKC
};
static const char *const kc_name[NKC] = {"hot keys", "warm keys", "cold keys", "no key"};
static long n_kc_tries[NKC];
static long n_kc_taken[NKC];
static long n_try_false;
static long n_calm_ops;			/* operations in calm phases */
static long n_looks;
static long n_reconnects;

enum
{
	T_QUEUED, T_RUNNING, T_ANY, NTARGETS
};
static const char *const target_name[NTARGETS] = {"a waiter", "a holder", "any client"};
static long n_cancels[NTARGETS];
static long n_cancel_hits[NTARGETS];
static long n_terminates[NTARGETS];
static long n_terminate_hits[NTARGETS];

/* monitor figures */
static long n_samples;
static long n_key_rows;
static long n_activity_rows;
static long n_quiet[NW];
static long n_not_quiet[NW];
static long n_all_quiet;
static long n_conserving_checks;
static int	most_keys;			/* keys in use at once (samples all quiet) */
static int	most_keys_w[NW];
static int	most_run_key;		/* most running of one key seen */
static int	most_queued_key;

/* violations by kind */
enum
{
	V_KEY_ROW, V_KEY_IDLE, V_KEY_RUN_CAP, V_KEY_QUEUE_CAP, V_KEY_DUP,
	V_KEY_SUMS, V_MAX_KEYS, V_UNKNOWN_KEY, V_STATS, V_ACTIVITY, V_AGREE,
	V_FREE_PERMIT, V_STUCK, V_CLIENT, V_END, V_TABLE, V_HANG, NV
};
static const char *const v_name[NV] = {
	"key row inconsistent", "idle key not freed", "key over max_running_per_key",
	"key over max_queued_per_key", "key twice in a workload",
	"keys' sums over the workload's bounds", "keys in use over bulkhead.max_keys",
	"a key no client named", "workload over its bounds", "bulkhead_activity",
	"keys, activity and stats disagree (quiet window)",
	"permit free beside an eligible waiter (quiet window)",
	"a wait outlived its bound by 10 s", "client (own permits)", "end state",
	"key table capacity", "statement hung"
};
static long n_viol[NV];

/*---- the clients' statements ----*/

/*
 * A client's statement, counted: as tc_step2, but 53400 (the key table
 * full) is an expected outcome here, counted apart and returned as O_FULL
 * (the client cleans up and backs off), and a 53B01 of max_queued_per_key
 * is counted apart too.
 */
static Outcome
step2(TcClient *c, const char *sql, char *val, size_t vallen)
{
	char		err[512];
	Outcome		o = tc_run2(c->conn, sql, val, NULL, vallen, err, sizeof(err));

	if (o == O_OTHER && strncmp(err, "53400", 5) == 0)
	{
		tc_add(&n_no_room, 1);
		return O_FULL;
	}
	tc_add(&n_outcome[o], 1);
	if (o == O_FULL && strstr(err, "max_queued_per_key") != NULL)
		tc_add(&n_key_full, 1);
	if (o == O_HUNG)
		tc_violation(V_HANG, "client %d: %s: %s", c->id, sql, oneline(err));
	else if (o == O_OTHER || o == O_DEADLOCK || o == O_WRONGTYPE || o == O_GUARD)
		tc_tool_error("client %d: %s: %s", c->id, sql, oneline(err));
	return o;
}

static Outcome
step(TcClient *c, const char *sql)
{
	return step2(c, sql, NULL, 0);
}

/* a wait bound: NULL (queue_timeout), '0', 1-40 ms, 100-300 ms */
static void
random_timeout(uint64_t *rs, char *buf, size_t len)
{
	int			r = tc_pick(rs, 100);

	if (r < 25)
		snprintf(buf, len, "NULL");
	else if (r < 40)
		snprintf(buf, len, "'0'");
	else if (r < 85)
		snprintf(buf, len, "'%d ms'", tc_between(rs, 1, 40));
	else
		snprintf(buf, len, "'%d ms'", tc_between(rs, 100, 300));
}

static Outcome
work(TcClient *c)
{
	char		sql[64];
	int			ms = tc_chance(&c->rs, calm_now ? 20 : 85) ? tc_pick(&c->rs, 13) :
		tc_between(&c->rs, 20, 60);

	snprintf(sql, sizeof(sql), "SELECT pg_sleep(%d / 1000.0)", ms);
	return step(c, sql);
}

/*
 * The client's own rows: n in all, one of them running in w with key k
 * (-1: none), and for a key a row of bulkhead_keys with running >= 1.
 * The permit is the client's own, held across the read: both views must
 * show it whatever else happens.
 */
static Outcome
look(TcClient *c, int n, int w, int k)
{
	char		sql[1024];
	char		kl[2 * KEY_MAXLEN + 8];
	char		val[128];
	int			all = -1,
				mine = -1,
				key_running = -1;
	Outcome		o;

	tc_add(&n_looks, 1);
	if (k >= 0)
	{
		lit(key_names[k], kl, sizeof(kl));
		snprintf(sql, sizeof(sql),
				 "SELECT (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid())"
				 " || ' ' || (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid()"
				 " AND workload = '%s' AND state = 'running' AND key = %s)"
				 " || ' ' || (SELECT coalesce(max(running), 0) FROM bulkhead_keys"
				 " WHERE workload = '%s' AND key = %s)",
				 wname[w], kl, wname[w], kl);
	}
	else
		snprintf(sql, sizeof(sql),
				 "SELECT (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid())"
				 " || ' ' || (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid()"
				 " AND workload = '%s' AND state = 'running' AND key IS NULL) || ' 1'",
				 wname[w]);
	if ((o = step2(c, sql, val, sizeof(val))) != O_OK)
		return o;
	if (sscanf(val, "%d %d %d", &all, &mine, &key_running) != 3)
	{
		tc_tool_error("client %d: own rows read as \"%s\"", c->id, val);
		return O_OK;
	}
	if (all != n || mine != 1 || key_running < 1)
		tc_violation(V_CLIENT, "client %d: holding %d permit(s), one of %s as %s%s%s: %d rows of its own,"
					 " %d running there with that key, bulkhead_keys shows %d running for the key",
					 c->id, n, wname[w], k >= 0 ? "key \"" : "no key", k >= 0 ? key_names[k] : "",
					 k >= 0 ? "\"" : "", all, mine, key_running);
	return O_OK;
}

static int
key_class(int k)
{
	return k < 0 ? KC_NONE : k < NHOT ? KC_HOT : k < NHOT + NWARM ? KC_WARM : KC_COLD;
}

/* an acquire is about to be sent (or the gate to be passed) as key k */
static void
count_try(int k)
{
	tc_add(&n_kc_tries[key_class(k)], 1);
}

static void
count_acquired(int k)
{
	tc_add(k >= 0 ? &n_acquired_keyed : &n_acquired_unkeyed, 1);
	tc_add(&n_kc_taken[key_class(k)], 1);
}

/* the acquire call: fn(w, t, key), fn(w, t) or with a NULL or empty key */
enum
{
	KEY_NONE_2ARG = -1, KEY_NULL = -2, KEY_EMPTY = -3
};

static void
acquire_sql(char *buf, size_t len, const char *fn, int w, const char *t, int k)
{
	char		kl[2 * KEY_MAXLEN + 8];

	count_try(k);
	if (k >= 0)
	{
		lit(key_names[k], kl, sizeof(kl));
		snprintf(buf, len, "SELECT %s('%s', %s, %s)", fn, wname[w], t, kl);
	}
	else if (k == KEY_NONE_2ARG)
		snprintf(buf, len, "SELECT %s('%s', %s)", fn, wname[w], t);
	else
		snprintf(buf, len, "SELECT %s('%s', %s, %s)", fn, wname[w], t,
				 k == KEY_NULL ? "NULL" : "''");
}

/* a try function's value: held (true), or not (false, counted) */
static bool
tried(const char *val)
{
	if (strcmp(val, "t") == 0)
		return true;
	tc_add(&n_try_false, 1);
	return false;
}

/* the release of a session permit the client holds: must succeed */
static Outcome
release(TcClient *c, int w)
{
	char		sql[128];
	Outcome		o;

	snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wname[w]);
	o = step(c, sql);
	if (o == O_OTHER)
		tc_violation(V_CLIENT, "client %d: the release of a permit it holds failed (%s)", c->id, sql);
	return o;
}

/* transparent admission: bulkhead.workload, bulkhead.key */
static Outcome
gate_op(TcClient *c, int w, bool do_look)
{
	uint64_t   *rs = &c->rs;
	int			r = tc_pick(rs, 100);
	char		sql[640];
	char		kl[2 * KEY_MAXLEN + 8];
	char		val[128];
	int			k = -1;
	Outcome		o;

	snprintf(sql, sizeof(sql), "SET bulkhead.workload = '%s'", wname[w]);
	if ((o = step(c, sql)) != O_OK)
		return o;
	c->gated = true;
	if (r < 85)
	{
		/* a transaction, keyed by SET LOCAL (or none: '') */
		if (r < 70)
		{
			tc_add(&n_ops[OP_GATE], 1);
			k = pick_key(rs);
			lit(key_names[k], kl, sizeof(kl));
		}
		else
		{
			tc_add(&n_ops[OP_GATE_NOKEY], 1);
			snprintf(kl, sizeof(kl), "''");
		}
		if ((o = step(c, "BEGIN")) != O_OK)
			return o;
		snprintf(sql, sizeof(sql), "SET LOCAL bulkhead.key = %s", kl);
		if ((o = step(c, sql)) != O_OK)
			return o;
		/* the first statement that works takes the permit */
		count_try(k);
		if ((o = work(c)) != O_OK)
			return o;
		count_acquired(k);
		if (do_look && (o = look(c, 1, w, k)) != O_OK)
			return o;
		if (tc_chance(rs, 30) && (o = work(c)) != O_OK)
			return o;
		if ((o = step(c, tc_chance(rs, 75) ? "COMMIT" : "ROLLBACK")) != O_OK)
			return o;
	}
	else
	{
		/* the session's bulkhead.key, one statement that looks at itself */
		int			all,
					mine;

		tc_add(&n_ops[OP_GATE_STMT], 1);
		k = pick_key(rs);
		lit(key_names[k], kl, sizeof(kl));
		snprintf(sql, sizeof(sql), "SET bulkhead.key = %s", kl);
		if ((o = step(c, sql)) != O_OK)
			return o;
		snprintf(sql, sizeof(sql),
				 "SELECT (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid())"
				 " || ' ' || (SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid()"
				 " AND workload = '%s' AND state = 'running' AND key = %s)"
				 " FROM pg_sleep(%d / 1000.0)", wname[w], kl, tc_pick(rs, 13));
		count_try(k);
		if ((o = step2(c, sql, val, sizeof(val))) != O_OK)
			return o;
		count_acquired(k);
		tc_add(&n_looks, 1);
		if (sscanf(val, "%d %d", &all, &mine) != 2)
			tc_tool_error("client %d: own rows read as \"%s\"", c->id, val);
		else if (all != 1 || mine != 1)
			tc_violation(V_CLIENT, "client %d: a statement gated into %s as key \"%s\" sees %d rows of its own,"
						 " %d running there with that key", c->id, wname[w], key_names[k], all, mine);
		if ((o = step(c, "RESET bulkhead.key")) != O_OK)
			return o;
	}
	if ((o = step(c, "RESET bulkhead.workload")) != O_OK)
		return o;
	c->gated = false;
	return O_OK;
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
	int			w = tc_chance(rs, 60) ? W_A : W_B;
	bool		do_look = tc_chance(rs, 40);

	calm_now = in_calm_phase();
	if (calm_now)
	{
		if (c->id >= CALM_CLIENTS)
		{
			tc_sleep_ms(20);
			return O_OK;
		}
		tc_add(&n_calm_ops, 1);
		w = W_A;
	}
	char		sql[512];
	char		t[32];
	char		val[64];
	int			k;
	Outcome		o;

	random_timeout(rs, t, sizeof(t));
	if (r < 22)
	{
		/* session, maybe inside a transaction that ends before the release */
		bool		in_xact = tc_chance(rs, 25);

		tc_add(&n_ops[in_xact ? OP_SESSION_XACT : OP_SESSION], 1);
		k = pick_key(rs);
		if (in_xact && (o = step(c, "BEGIN")) != O_OK)
			return o;
		acquire_sql(sql, sizeof(sql), "bulkhead_acquire", w, t, k);
		if ((o = step(c, sql)) != O_OK)
			return o;
		count_acquired(k);
		if ((o = work(c)) != O_OK)
			return o;
		if (in_xact && (o = step(c, tc_chance(rs, 50) ? "COMMIT" : "ROLLBACK")) != O_OK)
			return o;
		if (do_look && (o = look(c, 1, w, k)) != O_OK)
			return o;
		return release(c, w);
	}
	if (r < 32)
	{
		tc_add(&n_ops[OP_TRY], 1);
		k = pick_key(rs);
		acquire_sql(sql, sizeof(sql), "bulkhead_try_acquire", w, t, k);
		if ((o = step2(c, sql, val, sizeof(val))) != O_OK)
			return o;
		if (!tried(val))
			return O_OK;
		count_acquired(k);
		if ((o = work(c)) != O_OK)
			return o;
		if (do_look && (o = look(c, 1, w, k)) != O_OK)
			return o;
		return release(c, w);
	}
	if (r < 60)
	{
		/* a transaction permit, acquire_xact or try_acquire_xact */
		bool		try = tc_chance(rs, 30);

		tc_add(&n_ops[try ? OP_TRY_XACT : OP_XACT], 1);
		k = pick_key(rs);
		if ((o = step(c, "BEGIN")) != O_OK)
			return o;
		acquire_sql(sql, sizeof(sql), try ? "bulkhead_try_acquire_xact" : "bulkhead_acquire_xact",
					w, t, k);
		if ((o = step2(c, sql, val, sizeof(val))) != O_OK)
			return o;
		if (!try || tried(val))
		{
			count_acquired(k);
			if ((o = work(c)) != O_OK)
				return o;
			if (do_look && (o = look(c, 1, w, k)) != O_OK)
				return o;
		}
		return step(c, tc_chance(rs, 70) ? "COMMIT" : "ROLLBACK");
	}
	if (r < 72)
	{
		/* no key: the 2-argument call, a NULL key or an empty one */
		int			how = tc_pick(rs, 3);
		bool		xact = tc_chance(rs, 40);

		tc_add(&n_ops[OP_UNKEYED], 1);
		k = how == 0 ? KEY_NONE_2ARG : how == 1 ? KEY_NULL : KEY_EMPTY;
		if (xact && (o = step(c, "BEGIN")) != O_OK)
			return o;
		acquire_sql(sql, sizeof(sql), xact ? "bulkhead_acquire_xact" : "bulkhead_acquire", w, t, k);
		if ((o = step(c, sql)) != O_OK)
			return o;
		count_acquired(k);
		if ((o = work(c)) != O_OK)
			return o;
		if (do_look && (o = look(c, 1, w, -1)) != O_OK)
			return o;
		if (xact)
			return step(c, tc_chance(rs, 70) ? "COMMIT" : "ROLLBACK");
		return release(c, w);
	}
	if (r < 87)
		return gate_op(c, w, do_look);
	if (r < 93)
	{
		/* nested: a session permit of tk_a, a transaction permit of tk_b */
		int			k2;
		char		t2[32];

		tc_add(&n_ops[OP_NESTED], 1);
		k = pick_key(rs);
		k2 = tc_chance(rs, 20) ? KEY_NULL : pick_key(rs);
		random_timeout(rs, t2, sizeof(t2));
		acquire_sql(sql, sizeof(sql), "bulkhead_acquire", W_A, t, k);
		if ((o = step(c, sql)) != O_OK)
			return o;
		count_acquired(k);
		if ((o = step(c, "BEGIN")) != O_OK)
			return o;
		acquire_sql(sql, sizeof(sql), "bulkhead_acquire_xact", W_B, t2, k2);
		if ((o = step(c, sql)) != O_OK)
			return o;
		count_acquired(k2);
		if ((o = work(c)) != O_OK)
			return o;
		if (do_look && (o = look(c, 2, W_B, k2 >= 0 ? k2 : -1)) != O_OK)
			return o;
		if ((o = step2(c, "SELECT bulkhead_release_all()", val, sizeof(val))) != O_OK)
			return o;
		if (strcmp(val, "1") != 0)
			tc_violation(V_CLIENT, "client %d: bulkhead_release_all() returned %s with one session permit"
						 " and one transaction permit held", c->id, val);
		if (do_look && (o = look(c, 1, W_B, k2 >= 0 ? k2 : -1)) != O_OK)
			return o;
		return step(c, tc_chance(rs, 50) ? "COMMIT" : "ROLLBACK");
	}
	{
		/* savepoint: a transaction permit taken under it */
		bool		back = tc_chance(rs, 50);
		int			n;

		tc_add(&n_ops[OP_SAVEPOINT], 1);
		k = pick_key(rs);
		if ((o = step(c, "BEGIN")) != O_OK || (o = step(c, "SAVEPOINT s")) != O_OK)
			return o;
		acquire_sql(sql, sizeof(sql), "bulkhead_acquire_xact", w, t, k);
		if ((o = step(c, sql)) != O_OK)
			return o;
		count_acquired(k);
		if ((o = work(c)) != O_OK)
			return o;
		if ((o = step(c, back ? "ROLLBACK TO SAVEPOINT s" : "RELEASE SAVEPOINT s")) != O_OK)
			return o;
		if (back)
		{
			n = tc_own_rows(c, &o);
			if (o != O_OK)
				return o;
			if (n != 0)
				tc_violation(V_CLIENT, "client %d: %d rows of its own after ROLLBACK TO SAVEPOINT"
							 " of the only permit it took", c->id, n);
		}
		else if (do_look && (o = look(c, 1, w, k)) != O_OK)
			return o;
		return step(c, tc_chance(rs, 70) ? "COMMIT" : "ROLLBACK");
	}
}

static void *
client_main(void *arg)
{
	static const TcClientWay way = {client_op, 4, 5, 20};

	tc_client_run((int) (intptr_t) arg, seed, end_at, &way);
	return NULL;
}

/*---- chaos: cancels and terminations, of waiters, holders, anyone ----*/

static void *
chaos_main(void *arg)
{
	uint64_t	rs = seed ^ UINT64_C(0x7e4a47);
	PGconn	   *conn = tc_connect_or_die(conninfo);
	int64_t		next_terminate;
	char		err[512];
	char		val[64];

	if (rs == 0)
		rs = 1;
	next_terminate = now_us() + tc_between(&rs, 300, 1200) * 1000;
	while (now_us() < end_at)
	{
		bool		terminate = now_us() >= next_terminate;
		const char *fn = terminate ? "pg_terminate_backend" : "pg_cancel_backend";
		int			r = tc_pick(&rs, 100);
		int			target = r < 40 ? T_QUEUED : r < 70 ? T_RUNNING : T_ANY;
		char		sql[320];
		bool		sent = true;

		if (target == T_ANY)
		{
			int			pid = __atomic_load_n(&client_pid[tc_pick(&rs, nclients)], __ATOMIC_RELAXED);

			if (pid == 0)
				sent = false;
			else
				snprintf(sql, sizeof(sql), "SELECT %s(%d)", fn, pid);
		}
		else
			snprintf(sql, sizeof(sql),
					 "SELECT coalesce(bool_or(%s(pid)), false) FROM (SELECT pid FROM bulkhead_activity"
					 " WHERE workload ~ " WORKLOAD_PATTERN " AND state = '%s' ORDER BY random() LIMIT 1) s",
					 fn, target == T_QUEUED ? "queued" : "running");
		if (sent)
		{
			if (tc_run(conn, sql, val, sizeof(val), err, sizeof(err)) != O_OK)
			{
				tc_tool_error("chaos: %s: %s", sql, oneline(err));
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
			}
			else
			{
				tc_add(terminate ? &n_terminates[target] : &n_cancels[target], 1);
				if (strcmp(val, "t") == 0)
					tc_add(terminate ? &n_terminate_hits[target] : &n_cancel_hits[target], 1);
			}
			if (terminate)
				next_terminate = now_us() + tc_between(&rs, 300, 1200) * 1000;
		}
		tc_sleep_ms(tc_between(&rs, 5, 25));
	}
	PQfinish(conn);
	return arg;
}

/*---- the monitor ----*/

/* the figures of a bulkhead_stats row that the monitor compares */
enum
{
	S_LIMIT, S_MAX_RUNNING, S_MAX_QUEUED, S_RUNNING, S_QUEUED, S_ACQUIRED,
	S_RELEASED, S_CANCELLED, S_TIMED_OUT, S_REJECTED, S_DEADLOCKS, S_MOVED, NS
};

typedef struct SRow
{
	bool		present;
	long		v[NS];
} SRow;

typedef struct KRow
{
	int			w;				/* -1: a workload not of this mode */
	const char *key;			/* in the PGresult */
	int			running;
	int			queued;
	long		oldest_ms;		/* -1: NULL */
} KRow;

typedef struct ARow
{
	int			w;
	const char *key;			/* NULL: none */
	int			pid;
	bool		running;
	long		wait_ms;
} ARow;

#define COLS "::bigint"
#define STATS_PART(n) \
	"SELECT " #n ", (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, workload, NULL::text," \
	" current_limit" COLS ", max_running" COLS ", max_queued" COLS ", running" COLS ", queued" COLS "," \
	" acquired, released, cancelled, timed_out, rejected_full, deadlocks, moved_in + moved_out" \
	" FROM bulkhead_stats WHERE workload ~ " WORKLOAD_PATTERN

static const char *const sample_sql =
	STATS_PART(1)
	" UNION ALL SELECT 2, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, workload, key,"
	" running" COLS ", queued" COLS ", coalesce(ceil(oldest_wait_ms), -1)" COLS ", 0, 0, 0, 0, 0, 0, 0, 0, 0"
	" FROM bulkhead_keys"
	" UNION ALL SELECT 3, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, workload, key,"
	" pid" COLS ", (state = 'running')::int" COLS ", ceil(wait_ms)" COLS ", 0, 0, 0, 0, 0, 0, 0, 0, 0"
	" FROM bulkhead_activity WHERE workload ~ " WORKLOAD_PATTERN
	" UNION ALL " STATS_PART(4);

/* per workload, what one sample shows */
typedef struct WSample
{
	SRow		s1;
	SRow		s2;
	int			nkeys;
	int			key_running;	/* its keys' running, added up */
	int			key_queued;
	int			act_running;
	int			act_queued;
	int			act_running_nokey;
	int			act_queued_nokey;
} WSample;

static void
stats_row(const SRow *s, int w, const char *which)
{
	const Cfg  *cf = &cfg[w];

	if (s->v[S_LIMIT] != cf->max_running || s->v[S_MAX_RUNNING] != cf->max_running ||
		s->v[S_MAX_QUEUED] != cf->max_queued)
		tc_tool_error("monitor: %s shows current_limit %ld, max_running %ld, max_queued %ld in %s;"
					  " the mode set %d, %d", wname[w], s->v[S_LIMIT], s->v[S_MAX_RUNNING],
					  s->v[S_MAX_QUEUED], which, cf->max_running, cf->max_queued);
	if (s->v[S_RUNNING] < 0 || s->v[S_QUEUED] < 0 || s->v[S_RUNNING] > s->v[S_LIMIT] ||
		s->v[S_RUNNING] + s->v[S_QUEUED] > s->v[S_LIMIT] + s->v[S_MAX_QUEUED])
		tc_violation(V_STATS, "%s (%s): running %ld, queued %ld; current_limit %ld, max_queued %ld",
					 wname[w], which, s->v[S_RUNNING], s->v[S_QUEUED], s->v[S_LIMIT],
					 s->v[S_MAX_QUEUED]);
}

static bool
quiet(const WSample *ws)
{
	int			i;

	for (i = S_RUNNING; i < NS; i++)
		if (ws->s1.v[i] != ws->s2.v[i])
			return false;
	return true;
}

/* the state of a workload as the sample shows it, for a violation's line */
static void
state_text(const WSample *ws, const KRow *keys, int nk, int w, char *buf, size_t len)
{
	size_t		off;
	int			i;

	off = snprintf(buf, len, "stats running %ld queued %ld; activity running %d (%d without a key)"
				   " queued %d (%d without a key); keys:",
				   ws->s1.v[S_RUNNING], ws->s1.v[S_QUEUED], ws->act_running, ws->act_running_nokey,
				   ws->act_queued, ws->act_queued_nokey);
	for (i = 0; i < nk && off < len; i++)
		if (keys[i].w == w)
			off += snprintf(buf + off, len - off, " %s %d/%d", keys[i].key, keys[i].running,
							keys[i].queued);
}

/* the checks of one sample (see the head of the file) */
static void
check_sample(PGresult *res)
{
	int			n = PQntuples(res);
	KRow	   *keys = calloc(n + 1, sizeof(KRow));
	ARow	   *act = calloc(n + 1, sizeof(ARow));
	WSample		ws[NW];
	int			nk = 0,
				na = 0;
	int			total_keys = 0;
	int			other_keys = 0;
	int			last_part = 0;
	long		last_ts = 0;
	int			i,
				j,
				w;
	bool		all_quiet = true;
	char		text[4096];

	if (keys == NULL || act == NULL)
	{
		fprintf(stderr, "bulkhead_stress: out of memory\n");
		exit(2);
	}
	memset(ws, 0, sizeof(ws));
	for (i = 0; i < n; i++)
	{
		int			part = atoi(PQgetvalue(res, i, 0));
		long		ts = atol(PQgetvalue(res, i, 1));
		const char *wn = PQgetvalue(res, i, 2);
		bool		nokey = PQgetisnull(res, i, 3);
		const char *key = nokey ? NULL : PQgetvalue(res, i, 3);
		long		v[NS - S_LIMIT];
		int			c;

		if (part < last_part || ts < last_ts)
		{
			tc_tool_error("monitor: the parts of a sample were not read in order (part %d at %ld after part %d at %ld)",
						  part, ts, last_part, last_ts);
			goto done;
		}
		last_part = part;
		last_ts = ts;
		for (c = 0; c < NS; c++)
			v[c] = atol(PQgetvalue(res, i, 4 + c));
		w = tc_windex(wname, NW, wn);
		if (part == 1 || part == 4)
		{
			SRow	   *s;

			if (w < 0)
				continue;
			s = part == 1 ? &ws[w].s1 : &ws[w].s2;
			s->present = true;
			memcpy(s->v, v, sizeof(s->v));
		}
		else if (part == 2)
		{
			KRow	   *kr = &keys[nk++];

			total_keys++;
			kr->w = w;
			kr->key = key ? key : "";
			kr->running = (int) v[0];
			kr->queued = (int) v[1];
			kr->oldest_ms = v[2];
			if (w < 0)
				other_keys++;
		}
		else if (part == 3)
		{
			ARow	   *ar;

			if (w < 0)
				continue;
			ar = &act[na++];
			ar->w = w;
			ar->key = key;
			ar->pid = (int) v[0];
			ar->running = v[1] == 1;
			ar->wait_ms = v[2];
		}
	}
	for (w = 0; w < NW; w++)
		if (!ws[w].s1.present || !ws[w].s2.present)
		{
			tc_tool_error("monitor: %s is not in bulkhead_stats", wname[w]);
			goto done;
		}
	tc_add(&n_samples, 1);
	tc_add(&n_key_rows, nk);
	tc_add(&n_activity_rows, na);

	/* bulkhead_stats, each row by itself */
	for (w = 0; w < NW; w++)
	{
		stats_row(&ws[w].s1, w, "first read");
		stats_row(&ws[w].s2, w, "second read");
	}

	/* bulkhead_keys, each row by itself, then per workload */
	for (i = 0; i < nk; i++)
	{
		KRow	   *kr = &keys[i];
		const Cfg  *cf;
		int			id;

		if (kr->w < 0)
			continue;
		cf = &cfg[kr->w];
		ws[kr->w].nkeys++;
		ws[kr->w].key_running += kr->running;
		ws[kr->w].key_queued += kr->queued;
		if (kr->running > most_run_key)
			most_run_key = kr->running;
		if (kr->queued > most_queued_key)
			most_queued_key = kr->queued;
		id = key_id(kr->key);
		if (id < 0)
			tc_violation(V_UNKNOWN_KEY, "%s: key \"%s\" (%d running, %d queued) is in bulkhead_keys;"
						 " no client names it", wname[kr->w], kr->key, kr->running, kr->queued);
		else
			key_seen[id] = 1;
		if (kr->running < 0 || kr->queued < 0 || (kr->oldest_ms >= 0) != (kr->queued > 0))
			tc_violation(V_KEY_ROW, "%s: key \"%s\": running %d, queued %d, oldest_wait_ms %s",
						 wname[kr->w], kr->key, kr->running, kr->queued,
						 kr->oldest_ms >= 0 ? "set" : "NULL");
		if (kr->running == 0 && kr->queued == 0)
			tc_violation(V_KEY_IDLE, "%s: key \"%s\" is in bulkhead_keys with nothing running or queued",
						 wname[kr->w], kr->key);
		if (cf->run_per_key > 0 && kr->running > cf->run_per_key)
			tc_violation(V_KEY_RUN_CAP, "%s: key \"%s\" has %d running, max_running_per_key %d",
						 wname[kr->w], kr->key, kr->running, cf->run_per_key);
		if (cf->queued_per_key >= 0 && kr->queued > cf->queued_per_key)
			tc_violation(V_KEY_QUEUE_CAP, "%s: key \"%s\" has %d queued, max_queued_per_key %d",
						 wname[kr->w], kr->key, kr->queued, cf->queued_per_key);
		if (kr->oldest_ms > 10000)
			tc_violation(V_STUCK, "%s: key \"%s\": its oldest waiter has waited %ld ms",
						 wname[kr->w], kr->key, kr->oldest_ms);
		for (j = 0; j < i; j++)
			if (keys[j].w == kr->w && strcmp(keys[j].key, kr->key) == 0)
				tc_violation(V_KEY_DUP, "%s: key \"%s\" is in bulkhead_keys twice", wname[kr->w], kr->key);
	}
	for (w = 0; w < NW; w++)
	{
		const Cfg  *cf = &cfg[w];

		if (ws[w].nkeys > most_keys_w[w])
			most_keys_w[w] = ws[w].nkeys;
		if (ws[w].key_running > cf->max_running ||
			ws[w].key_running + ws[w].key_queued > cf->max_running + cf->max_queued)
		{
			state_text(&ws[w], keys, nk, w, text, sizeof(text));
			tc_violation(V_KEY_SUMS, "%s: its keys add up to %d running, %d queued; max_running %d,"
						 " max_queued %d; %s", wname[w], ws[w].key_running, ws[w].key_queued,
						 cf->max_running, cf->max_queued, text);
		}
		if (ws[w].nkeys > max_keys)
			tc_violation(V_MAX_KEYS, "%s has %d keys in use; bulkhead.max_keys is %d",
						 wname[w], ws[w].nkeys, max_keys);
	}

	/* bulkhead_activity, per workload */
	for (i = 0; i < na; i++)
	{
		ARow	   *ar = &act[i];
		const Cfg  *cf = &cfg[ar->w];
		int			same_run = 0,
					same_q = 0;

		if (ar->running)
		{
			ws[ar->w].act_running++;
			if (ar->key == NULL)
				ws[ar->w].act_running_nokey++;
		}
		else
		{
			ws[ar->w].act_queued++;
			if (ar->key == NULL)
				ws[ar->w].act_queued_nokey++;
			if (ar->wait_ms > 10000)
				tc_violation(V_STUCK, "%s: pid %d has waited %ld ms (key %s)", wname[ar->w], ar->pid,
							 ar->wait_ms, ar->key ? ar->key : "none");
		}
		for (j = 0; j < i; j++)
			if (act[j].w == ar->w && act[j].pid == ar->pid)
				tc_violation(V_ACTIVITY, "%s: pid %d has two rows in bulkhead_activity", wname[ar->w], ar->pid);
		if (ar->key == NULL)
			continue;
		if (key_id(ar->key) < 0)
			tc_violation(V_UNKNOWN_KEY, "%s: pid %d holds or awaits as key \"%s\"; no client names it",
						 wname[ar->w], ar->pid, ar->key);
		/* the rows of its key, counted at the key's first row */
		for (j = 0; j < i; j++)
			if (act[j].w == ar->w && act[j].key != NULL && strcmp(act[j].key, ar->key) == 0)
				break;
		if (j < i)
			continue;
		for (j = i; j < na; j++)
			if (act[j].w == ar->w && act[j].key != NULL && strcmp(act[j].key, ar->key) == 0)
			{
				if (act[j].running)
					same_run++;
				else
					same_q++;
			}
		if (cf->run_per_key > 0 && same_run > cf->run_per_key)
			tc_violation(V_KEY_RUN_CAP, "%s: %d running rows of key \"%s\" in bulkhead_activity,"
						 " max_running_per_key %d", wname[ar->w], same_run, ar->key, cf->run_per_key);
		if (cf->queued_per_key >= 0 && same_q > cf->queued_per_key)
			tc_violation(V_KEY_QUEUE_CAP, "%s: %d queued rows of key \"%s\" in bulkhead_activity,"
						 " max_queued_per_key %d", wname[ar->w], same_q, ar->key, cf->queued_per_key);
	}
	for (w = 0; w < NW; w++)
	{
		const Cfg  *cf = &cfg[w];

		if (ws[w].act_running > cf->max_running ||
			ws[w].act_running + ws[w].act_queued > cf->max_running + cf->max_queued)
			tc_violation(V_ACTIVITY, "%s: %d running and %d queued rows in bulkhead_activity;"
						 " max_running %d, max_queued %d", wname[w], ws[w].act_running,
						 ws[w].act_queued, cf->max_running, cf->max_queued);
	}

	/* in a quiet window: stats, keys and activity are of one state */
#define STATE_TEXT() (text[0] ? text : (state_text(s, keys, nk, w, text, sizeof(text)), text))
	for (w = 0; w < NW; w++)
	{
		WSample    *s = &ws[w];
		const Cfg  *cf = &cfg[w];
		long		run = s->s1.v[S_RUNNING];
		long		q = s->s1.v[S_QUEUED];
		bool		bad = false;

		if (!quiet(s))
		{
			tc_add(&n_not_quiet[w], 1);
			all_quiet = false;
			continue;
		}
		tc_add(&n_quiet[w], 1);
		text[0] = '\0';
		if (s->act_running != run || s->act_queued != q)
			bad = true;
		if (s->key_running > run || s->key_queued > q ||
			s->key_running + s->act_running_nokey != run || s->key_queued + s->act_queued_nokey != q)
			bad = true;
		if (bad)
			tc_violation(V_AGREE, "%s: the counts differ; %s", wname[w], STATE_TEXT());
		/* per key: its rows of bulkhead_activity */
		for (i = 0; i < nk; i++)
		{
			int			ar = 0,
						aq = 0;

			if (keys[i].w != w)
				continue;
			for (j = 0; j < na; j++)
				if (act[j].w == w && act[j].key != NULL && strcmp(act[j].key, keys[i].key) == 0)
				{
					if (act[j].running)
						ar++;
					else
						aq++;
				}
			if (ar != keys[i].running || aq != keys[i].queued)
				tc_violation(V_AGREE, "%s: key \"%s\" shows %d running, %d queued in bulkhead_keys;"
							 " bulkhead_activity has %d running, %d queued rows of it; %s",
							 wname[w], keys[i].key, keys[i].running, keys[i].queued, ar, aq, STATE_TEXT());
		}
		for (j = 0; j < na; j++)
		{
			if (act[j].w != w || act[j].key == NULL)
				continue;
			for (i = 0; i < nk; i++)
				if (keys[i].w == w && strcmp(keys[i].key, act[j].key) == 0)
					break;
			if (i == nk)
				tc_violation(V_AGREE, "%s: pid %d %s as key \"%s\", which is not in bulkhead_keys; %s",
							 wname[w], act[j].pid, act[j].running ? "holds" : "waits", act[j].key, STATE_TEXT());
		}
		/* no permit free beside a waiter that may take it */
		if (run < cf->max_running && q > 0)
		{
			tc_add(&n_conserving_checks, 1);
			if (s->act_queued_nokey > 0)
				tc_violation(V_FREE_PERMIT, "%s: %ld of %d permits held, and %d callers without a key wait; %s",
							 wname[w], run, cf->max_running, s->act_queued_nokey, STATE_TEXT());
			for (i = 0; i < nk; i++)
				if (keys[i].w == w && keys[i].queued > 0 &&
					(cf->run_per_key == 0 || keys[i].running < cf->run_per_key))
					tc_violation(V_FREE_PERMIT, "%s: %ld of %d permits held, and key \"%s\" (%d running,"
								 " cap %d) has %d waiting; %s", wname[w], run, cf->max_running,
								 keys[i].key, keys[i].running, cf->run_per_key, keys[i].queued, STATE_TEXT());
		}
	}
#undef STATE_TEXT
	if (all_quiet)
	{
		tc_add(&n_all_quiet, 1);
		if (total_keys > most_keys)
			most_keys = total_keys;
		if (total_keys > max_keys)
			tc_violation(V_MAX_KEYS, "%d keys in use (%d of other workloads); bulkhead.max_keys is %d",
						 total_keys, other_keys, max_keys);
	}
done:
	free(keys);
	free(act);
}

static void *
monitor_main(void *arg)
{
	PGconn	   *conn = tc_connect_or_die(conninfo);

	while (!__atomic_load_n(&stop_all, __ATOMIC_RELAXED))
	{
		PGresult   *res = PQexec(conn, sample_sql);

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			tc_tool_error("monitor: %s", PQresultErrorMessage(res));
			PQclear(res);
			if (PQstatus(conn) == CONNECTION_BAD)
			{
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
			}
			tc_sleep_ms(10);
			continue;
		}
		check_sample(res);
		PQclear(res);
		tc_sleep_ms(1);
	}
	PQfinish(conn);
	return arg;
}

/*---- set-up and the end ----*/

/* the first value of a query, into buf; exits on an error */
static void
setup_value(PGconn *conn, const char *sql, char *buf, size_t len)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		fprintf(stderr, "bulkhead_stress: set-up failed: %s: %s", sql, PQresultErrorMessage(res));
		exit(2);
	}
	snprintf(buf, len, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
}

static void
setup_workloads(PGconn *conn)
{
	char		sql[768];
	char		val[128];
	char		rk[16];
	char		qk[16];
	int			w;

	setup_value(conn, "SHOW bulkhead.max_keys", val, sizeof(val));
	max_keys = atoi(val);
	if (max_keys < 1)
	{
		fprintf(stderr, "bulkhead_stress: set-up failed: bulkhead.max_keys is \"%s\"\n", val);
		exit(2);
	}
	cfg[W_PROBE].max_running = max_keys + 1;
	setup_value(conn, "SHOW server_encoding", val, sizeof(val));
	make_keys(strcmp(val, "UTF8") == 0);

	tc_setup_exec(conn, "DELETE FROM bulkhead_workload WHERE name ~ " WORKLOAD_PATTERN);
	for (w = 0; w < NW; w++)
	{
		const Cfg  *c = &cfg[w];

		snprintf(rk, sizeof(rk), c->run_per_key > 0 ? "%d" : "NULL", c->run_per_key);
		snprintf(qk, sizeof(qk), c->queued_per_key >= 0 ? "%d" : "NULL", c->queued_per_key);
		snprintf(sql, sizeof(sql),
				 "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
				 " max_running_per_key, max_queued_per_key) VALUES ('%s', %d, %d, '%d ms', %s, %s)",
				 wname[w], c->max_running, c->max_queued, c->queue_timeout_ms, rk, qk);
		tc_setup_exec(conn, sql);
	}
	snprintf(sql, sizeof(sql),
			 "SELECT count(*) = 3 FROM bulkhead_stats WHERE (workload, max_running, max_queued) IN"
			 " (('%s', %d, %d), ('%s', %d, %d), ('%s', %d, %d))",
			 wname[0], cfg[0].max_running, cfg[0].max_queued, wname[1], cfg[1].max_running,
			 cfg[1].max_queued, wname[2], cfg[2].max_running, cfg[2].max_queued);
	tc_setup_wait(conn, sql, "the workloads were");
	for (w = 0; w < NW; w++)
	{
		/* the counts of an earlier run of the same names, if any */
		snprintf(sql, sizeof(sql), "SELECT bulkhead_stats_reset('%s')", wname[w]);
		tc_setup_exec(conn, sql);
	}
	setup_value(conn, "SELECT count(*) FROM bulkhead_keys", val, sizeof(val));
	if (atoi(val) != 0)
	{
		fprintf(stderr, "bulkhead_stress: set-up failed: %s keys in use before the run\n", val);
		exit(2);
	}
}

/* the end: all back to zero within 10 s, the accounting of every permit */
static void
check_end(PGconn *conn)
{
	int			i;
	int			w;
	bool		idle = false;
	PGresult   *res = NULL;
	const char *sql =
		"SELECT workload, running, queued, acquired, released, cancelled, timed_out, rejected_full,"
		" (SELECT count(*) FROM bulkhead_keys k WHERE k.workload = s.workload),"
		" (SELECT count(*) FROM bulkhead_activity a WHERE a.workload = s.workload)"
		" FROM bulkhead_stats s WHERE workload ~ " WORKLOAD_PATTERN " ORDER BY workload";

	for (i = 0; i < 1000 && !idle; i++)
	{
		if (res)
			PQclear(res);
		res = PQexec(conn, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != NW)
		{
			tc_tool_error("end: %s", PQresultErrorMessage(res));
			PQclear(res);
			return;
		}
		idle = true;
		for (w = 0; w < NW; w++)
			if (atol(PQgetvalue(res, w, 1)) != 0 || atol(PQgetvalue(res, w, 2)) != 0 ||
				atol(PQgetvalue(res, w, 8)) != 0 || atol(PQgetvalue(res, w, 9)) != 0)
				idle = false;
		if (!idle)
			tc_sleep_ms(10);
	}
	printf("\n%-9s %8s %8s %10s %10s %10s %10s %10s %5s %9s\n", "workload", "running", "queued",
		   "acquired", "released", "cancelled", "timed_out", "rejected", "keys", "activity");
	for (w = 0; w < NW; w++)
	{
		const char *name = PQgetvalue(res, w, 0);
		long		acq = atol(PQgetvalue(res, w, 3));
		long		rel = atol(PQgetvalue(res, w, 4));

		printf("%-9s %8s %8s %10s %10s %10s %10s %10s %5s %9s\n", name, PQgetvalue(res, w, 1),
			   PQgetvalue(res, w, 2), PQgetvalue(res, w, 3), PQgetvalue(res, w, 4),
			   PQgetvalue(res, w, 5), PQgetvalue(res, w, 6), PQgetvalue(res, w, 7),
			   PQgetvalue(res, w, 8), PQgetvalue(res, w, 9));
		if (!idle && (atol(PQgetvalue(res, w, 1)) != 0 || atol(PQgetvalue(res, w, 2)) != 0 ||
					  atol(PQgetvalue(res, w, 8)) != 0 || atol(PQgetvalue(res, w, 9)) != 0))
			tc_violation(V_END, "%s: running %s, queued %s, %s keys in bulkhead_keys, %s rows in"
						 " bulkhead_activity 10 s after the clients ended", name,
						 PQgetvalue(res, w, 1), PQgetvalue(res, w, 2), PQgetvalue(res, w, 8),
						 PQgetvalue(res, w, 9));
		if (acq != rel)
			tc_violation(V_END, "%s: acquired %ld, released %ld with nothing held", name, acq, rel);
		if (strcmp(name, wname[W_PROBE]) != 0 && acq == 0)
			tc_tool_error("%s: no permit was acquired in the run", name);
	}
	PQclear(res);
	if (!idle)
	{
		/* name the keys left over */
		res = PQexec(conn, "SELECT workload || '/' || key || ' ' || running || '/' || queued"
					 " FROM bulkhead_keys LIMIT 20");
		if (PQresultStatus(res) == PGRES_TUPLES_OK)
			for (i = 0; i < PQntuples(res); i++)
				tc_violation(V_END, "key left in bulkhead_keys: %s", PQgetvalue(res, i, 0));
		PQclear(res);
	}
}

/*
 * The key table's capacity: with nothing else in use, bulkhead.max_keys
 * sessions each take a permit of tk_probe as a key of their own (a key
 * lost by the table would make one of them fail with 53400), then one more
 * key must fail with 53400, while a caller without a key gets in; once
 * all are gone, no key is left.  Skipped (said so) when the table is too
 * large to fill with sessions.
 */
static void
check_key_table(PGconn *conn)
{
	PGconn	  **s;
	char		sql[256];
	char		err[512];
	char		val[64];
	int			i;
	int			got = 0;
	Outcome		o;

	if (max_keys > 256)
	{
		printf("key table: bulkhead.max_keys is %d, too many sessions to fill it: not checked\n", max_keys);
		return;
	}
	s = calloc(max_keys + 1, sizeof(PGconn *));
	for (i = 0; i <= max_keys; i++)
	{
		s[i] = tc_connect_or_die(conninfo);
		if (tc_run(s[i], "SET bulkhead.exempt_superuser = off", NULL, 0, err, sizeof(err)) != O_OK)
			tc_tool_error("key table: %s", oneline(err));
	}
	for (i = 0; i < max_keys; i++)
	{
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire('%s', '0', 'probe-%d')", wname[W_PROBE], i);
		if ((o = tc_run(s[i], sql, NULL, 0, err, sizeof(err))) == O_OK)
			got++;
		else if (strncmp(err, "53400", 5) == 0)
			tc_violation(V_TABLE, "key %d of %d: %s (with no other key in use: entries of the table were lost)",
						 i + 1, max_keys, oneline(err));
		else
			tc_tool_error("key table: %s: %s", sql, oneline(err));
	}
	snprintf(sql, sizeof(sql), "SELECT count(*) FILTER (WHERE running = 1 AND queued = 0) || '/' || count(*)"
			 " FROM bulkhead_keys");
	o = tc_run(conn, sql, val, sizeof(val), err, sizeof(err));
	snprintf(sql, sizeof(sql), "%d/%d", got, got);
	if (o != O_OK)
		tc_tool_error("key table: %s", oneline(err));
	else if (strcmp(val, sql) != 0)
		tc_violation(V_TABLE, "%d keys taken one permit each; bulkhead_keys shows (1 running)/(all) = %s",
					 got, val);
	snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire('%s', '0', 'probe-extra')", wname[W_PROBE]);
	o = tc_run(s[max_keys], sql, NULL, 0, err, sizeof(err));
	if (got == max_keys && strncmp(err, "53400", 5) != 0)
		tc_violation(V_TABLE, "key %d with bulkhead.max_keys = %d: %s", max_keys + 1, max_keys,
					 o == O_OK ? "acquired" : oneline(err));
	if (o != O_OK)
	{
		tc_run(s[max_keys], "ROLLBACK", NULL, 0, err, sizeof(err));
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire('%s', '0')", wname[W_PROBE]);
		if (tc_run(s[max_keys], sql, NULL, 0, err, sizeof(err)) != O_OK)
			tc_violation(V_TABLE, "a caller without a key, the key table full: %s", oneline(err));
	}
	for (i = 0; i <= max_keys; i++)
	{
		if (i % 2 == 0)
			tc_run(s[i], "SELECT bulkhead_release_all()", NULL, 0, err, sizeof(err));
		PQfinish(s[i]);			/* the others release at exit */
	}
	free(s);
	for (i = 0; i < 1000; i++)
	{
		if (tc_run(conn, "SELECT count(*) FROM bulkhead_keys", val, sizeof(val), err, sizeof(err)) == O_OK &&
			strcmp(val, "0") == 0)
			break;
		tc_sleep_ms(10);
	}
	if (strcmp(val, "0") != 0)
		tc_violation(V_TABLE, "%s keys in bulkhead_keys 10 s after the probe's sessions ended", val);
	printf("key table: %d of %d keys taken at once (bulkhead.max_keys), key %d refused with 53400%s\n",
		   got, max_keys, max_keys + 1, n_viol[V_TABLE] ? " (see the violations)" : "; all freed after");
}

int
tenant_stress_main(int clients, int seconds, const char *conninfo_arg, uint64_t seed_arg)
{
	PGconn	   *conn;
	pthread_t  *threads;
	pthread_t	monitor;
	pthread_t	chaos;
	int			i;
	int			w;
	long		ops = 0;
	long		nviol = 0;
	long		used = 0,
				seen = 0;
	long		cancels = 0,
				terminates = 0;
	double		runtime;

	conninfo = conninfo_arg;
	client_pid = calloc(clients, sizeof(int));
	tc_init(TC_BUDGETS, conninfo, n_viol, v_name, V_HANG, V_CLIENT, n_outcome,
			client_pid, &n_reconnects);
	nclients = clients;
	seed = seed_arg ? seed_arg : ((uint64_t) time(NULL) ^ ((uint64_t) getpid() << 20));
	conn = tc_connect_or_die(conninfo);
	setup_workloads(conn);
	printf("tenants mode: %d clients, %d s, %d keys, bulkhead.max_keys %d, seed %" PRIu64 "\n",
		   clients, seconds, NKEYS, max_keys, seed);
	for (w = 0; w < NCW; w++)
	{
		char		rk[16];
		char		qk[16];

		snprintf(rk, sizeof(rk), cfg[w].run_per_key > 0 ? "%d" : "NULL", cfg[w].run_per_key);
		snprintf(qk, sizeof(qk), cfg[w].queued_per_key >= 0 ? "%d" : "NULL", cfg[w].queued_per_key);
		printf("  %s: max_running %d, max_queued %d, queue_timeout %d ms, max_running_per_key %s,"
			   " max_queued_per_key %s\n", wname[w], cfg[w].max_running, cfg[w].max_queued,
			   cfg[w].queue_timeout_ms, rk, qk);
	}
	fflush(stdout);

	threads = calloc(clients, sizeof(pthread_t));
	tc_t_start = now_us();
	end_at = tc_t_start + (int64_t) seconds * 1000000;
	pthread_create(&monitor, NULL, monitor_main, NULL);
	for (i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, client_main, (void *) (intptr_t) i);
	pthread_create(&chaos, NULL, chaos_main, NULL);
	pthread_join(chaos, NULL);
	for (i = 0; i < clients; i++)
		pthread_join(threads[i], NULL);
	runtime = (now_us() - tc_t_start) / 1e6;
	/* the monitor keeps checking while the permits come back */
	check_end(conn);
	__atomic_store_n(&stop_all, 1, __ATOMIC_RELAXED);
	pthread_join(monitor, NULL);
	check_key_table(conn);
	PQfinish(conn);

	for (i = 0; i < NOPS; i++)
		ops += n_ops[i];
	for (i = 0; i < NV; i++)
		nviol += n_viol[i];
	for (i = 0; i < NKEYS; i++)
	{
		used += key_used[i];
		seen += key_seen[i];
	}
	for (i = 0; i < NTARGETS; i++)
	{
		cancels += n_cancels[i];
		terminates += n_terminates[i];
	}
	printf("\noperations: %ld (%.0f/s; %ld in calm phases):", ops, ops / runtime, n_calm_ops);
	for (i = 0; i < NOPS; i++)
		printf(" %s %ld%s", op_name[i], n_ops[i], i < NOPS - 1 ? "," : "\n");
	printf("permits taken: %ld as a key, %ld without one; try_ calls that returned false: %ld\n",
		   n_acquired_keyed, n_acquired_unkeyed, n_try_false);
	printf("  taken of tried, by caller:");
	for (i = 0; i < NKC; i++)
		printf(" %s %ld of %ld (%.1f%%)%s", kc_name[i], n_kc_taken[i], n_kc_tries[i],
			   n_kc_tries[i] ? 100.0 * n_kc_taken[i] / n_kc_tries[i] : 0.0, i < NKC - 1 ? "," : "\n");
	printf("statements:");
	for (i = 0; i < NOUTCOMES; i++)
		if (n_outcome[i] > 0 || i == O_OK || i == O_FULL || i == O_TIMEOUT || i == O_CANCEL || i == O_GONE)
			printf(" %s %ld,", outcome_name[i], n_outcome[i]);
	printf(" 53400 key table full %ld\n", n_no_room);
	printf("  of the 53B01: %ld of max_queued_per_key, %ld of the workload's queue\n",
		   n_key_full, n_outcome[O_FULL] - n_key_full);
	printf("keys: %ld of %d named by the clients, %ld seen in bulkhead_keys; at most %d in use at once"
		   " (in samples quiet everywhere; in one read %s %d, %s %d), at most %d running and %d queued"
		   " of one key\n",
		   used, NKEYS, seen, most_keys, wname[W_A], most_keys_w[W_A], wname[W_B], most_keys_w[W_B],
		   most_run_key, most_queued_key);
	printf("chaos: %ld cancels (", cancels);
	for (i = 0; i < NTARGETS; i++)
		printf("%s %ld, %ld reached%s", target_name[i], n_cancels[i], n_cancel_hits[i],
			   i < NTARGETS - 1 ? "; " : ")");
	printf(", %ld terminations (", terminates);
	for (i = 0; i < NTARGETS; i++)
		printf("%s %ld, %ld reached%s", target_name[i], n_terminates[i], n_terminate_hits[i],
			   i < NTARGETS - 1 ? "; " : ")");
	printf("; %ld reconnects\n", n_reconnects);
	printf("clients: %ld looks at their own permit (bulkhead_activity and bulkhead_keys)\n", n_looks);
	printf("monitor: %ld samples, %ld key rows, %ld activity rows; quiet windows %s %ld (%ld not),"
		   " %s %ld (%ld not), all workloads %ld; %ld checks of a free permit beside waiters\n",
		   n_samples, n_key_rows, n_activity_rows, wname[W_A], n_quiet[W_A], n_not_quiet[W_A],
		   wname[W_B], n_quiet[W_B], n_not_quiet[W_B], n_all_quiet, n_conserving_checks);
	printf("violations: %ld", nviol);
	for (i = 0; i < NV; i++)
		if (n_viol[i])
			printf("; %s %ld", v_name[i], n_viol[i]);
	printf("\n");
	/*
	 * The mix must have been exercised.  (Callers without a key get few
	 * permits beside a stream of new keys: a short run may see none.)
	 */
	if (n_acquired_keyed == 0 || (n_acquired_unkeyed == 0 && runtime >= 30))
		tc_tool_error("no permit was taken as a key (%ld) or without one (%ld)",
					  n_acquired_keyed, n_acquired_unkeyed);
	if (n_key_full == 0 && runtime >= 5)
		tc_tool_error("no caller met max_queued_per_key in %.0f s", runtime);
	if (tc_n_tool_errors)
		printf("tool errors: %ld\n", tc_n_tool_errors);
	printf("runtime: %.1f s\n", runtime);
	printf("summary: %ld operations, %ld keys named, %ld 53B01 (%ld of a key), %ld 53B02, %ld 53400,"
		   " %ld cancels, %ld terminations, %ld violations\n",
		   ops, used, n_outcome[O_FULL], n_key_full, n_outcome[O_TIMEOUT], n_no_room, cancels,
		   terminates, nviol);
	if (nviol > 0)
		return 1;
	return tc_n_tool_errors > 0 ? 2 : 0;
}
