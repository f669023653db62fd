/*-------------------------------------------------------------------------
 *
 * lane_modes.c
 *	  The lanes mode of bulkhead_stress (-D lanes): statement rules and
 *	  lanes' settings caps (1.3) under load.  Clients connected as a plain
 *	  role, classified into a web lane by a session rule, run transactions
 *	  mixing cheap and costly statements, writes and utilities, so that the
 *	  statement rules take their automatic permits in other lanes and MOVE
 *	  them there mid-transaction; with savepoints, rollbacks to savepoint,
 *	  failing statements, SET LOCAL, statement timeouts, cancels,
 *	  terminations and limit changes.  One thread per client, blocking
 *	  libpq calls, plus a changer, a chaos thread and a monitor, each on its
 *	  own connection (the three as the conninfo's superuser, exempt from
 *	  classification).
 *
 * The lanes (created afresh at the start, left in place at the end):
 *
 *	 ln_web    the session's lane (a session rule: role ln_client); caps
 *	           temp_file_limit (1GB)
 *	 ln_heavy  costly statements (a statement rule: min_cost 100, any
 *	           session); caps work_mem (1MB), max_parallel_workers_per_gather
 *	           (0) and jit (off)
 *	 ln_maint  utilities (command {utility}, role ln_client); caps
 *	           maintenance_work_mem (2MB), work_mem (2MB),
 *	           max_parallel_maintenance_workers (0); a lock_timeout guard
 *	           of 2 s
 *	 ln_write  writes (command {insert,update,delete}, role ln_client); caps
 *	           work_mem (3MB) and hash_mem_multiplier (1.5)
 *
 * and two statement rules that must never match (an application_name the
 * clients do not use).  The rules come before any other the cluster has
 * (positions 9001-9010) and are deleted at the end, so that later modes'
 * clients (superusers with bulkhead.exempt_superuser off) meet none.
 *
 * A statement's cost is known to the tool: ln_heavy(ms), a PL/pgSQL
 * function of COST 100000, costs 250 where it appears; everything else a
 * client runs plans under 30 (the own-rows subquery below costs 15).  So
 * each statement's lane is known in advance: a costly SELECT (also a
 * costly UPDATE, position 9001 before 9004; EXPLAIN ANALYZE of it; a
 * prepared one, custom or generic plan) goes to ln_heavy, an UPDATE ... RETURNING
 * to ln_write, ANALYZE / COMMENT / VACUUM to ln_maint, the rest (cheap
 * SELECTs, EXPLAIN without ANALYZE, a cheap function that runs a costly
 * query inside: nested queries are not matched) to ln_web when the
 * transaction holds no permit yet, else nowhere (the permit stays).
 * Multi-statement query strings (one implicit transaction) move too.
 *
 * What every client statement returns, and is checked on: the settings a
 * lane caps (current_setting of each, and the lock_timeout guard) and the
 * client's own rows of bulkhead_activity.  The client keeps what it
 * believes its transaction holds: nothing, or the permit in lane L, moved
 * from lane F (or not moved): exactly one row, running, scope auto, in the
 * lane the model says (moved_from: the lane it came from by its last
 * move, NULL after a fresh grant), and each setting at the smaller of the
 * session's own value (or the transaction's SET LOCAL) and that lane's cap
 * (jit: off wins; lock_timeout: the guard); inside the costly function the
 * same work_mem as outside it.  After an error the model may not know: a
 * 53B01 / 53B02 leaves nothing (a failed move returns the old permit
 * first), a cancel or a timeout leaves the permit where it was, nothing,
 * or in the new lane, and the next statement's rows say which (they must
 * be one of those).  A 53B01 / 53B02 from a statement that had nothing to
 * wait for (its permit was where it stays) is a violation, as is a 40P01
 * (a client holds at most one permit and returns it before a move waits:
 * no cycle can form).  ROLLBACK TO SAVEPOINT leaves the permit where it is
 * (automatic permits belong to the top-level transaction).  SHOW inside a
 * transaction (no permit needed, capped as a utility) gives the same
 * capped value.  After every transaction, and after an autocommit VACUUM
 * or ANALYZE (capped for the session over its internal commits), SHOW of
 * the settings gives the session's own values back.
 *
 * The changer changes one lane's max_running and max_queued every
 * 200-600 ms (max_running 0 now and then: a pause), each change to a pair
 * other than the one in force, and waits until the monitor has seen it.
 * The chaos thread cancels a client every 5-25 ms and terminates one every
 * 0.3-1.2 s.
 *
 * The monitor reads, in one statement, bulkhead_stats, bulkhead_activity
 * (counted per lane) and bulkhead_stats again (the three branches of a
 * UNION ALL: Append runs them in order, and each row carries
 * clock_timestamp(), checked).  On every stats row: current_limit =
 * max_running (nothing is adaptive), (max_running, max_queued) is the
 * pair in force or the one the changer just set, queued > 0 implies
 * running >= current_limit (a release, a move out and a raise serve the
 * queue at once), and against the lane's previous read: running <= the
 * highest of its previous value and the limits in force between the two
 * reads (at most one change between them: the old and the new limit), and
 * running + queued likewise against limit + max_queued (a statement's move
 * is a wait in the new lane, never a grant past its limit; a lowered limit
 * leaves holders above it, who may not grow); counters never go down.  In
 * a quiet window (both stats reads of a lane show the same running,
 * queued and counters: see bulkhead_stress.c for why the activity read in
 * between then saw that very state): running and queued = the lane's
 * running and queued rows of bulkhead_activity; no backend twice in a
 * lane.
 *
 * At the end: within 10 s running and queued are 0 in every lane and
 * bulkhead_activity has no row of them; per lane acquired + moved_in =
 * released + moved_out (a move counts out in the old lane; its grant
 * counts in, not acquired, in the new one; a failed move counts out only),
 * and summed over the lanes likewise; and each lane's moved_in, moved_out
 * and acquired at least the moves and fresh grants the clients saw their
 * own statements make (a statement whose rows show it moved from where the
 * model knew the permit was, or took it fresh).  A statement that runs for 20 s (the
 * clients' statement_timeout) is a violation.  A run in which no permit
 * moved into each of heavy, maint and write, no cap was checked in each
 * lane, or (runs of 5 s or more) nothing was cancelled, rejected or timed
 * out, is a tool error.
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

/*---- the lanes ----*/

enum
{
	L_WEB, L_HEAVY, L_MAINT, L_WRITE, NL
};

static const char *const lname[NL] = {"ln_web", "ln_heavy", "ln_maint", "ln_write"};

#define LANE_PATTERN "'^ln_'"
#define ROLE "ln_client"
#define NONE_LANE (-1)			/* the transaction holds no permit */
#define FROM_UNKNOWN (-2)		/* moved_from not known to the model */

/* the settings each client statement returns */
enum
{
	S_WORK_MEM, S_HASH_MEM, S_PER_GATHER, S_JIT, S_MAINT_MEM, S_TEMP_FILE,
	S_LOCK_TIMEOUT, NS
};

static const char *const sname[NS] = {
	"work_mem", "hash_mem_multiplier", "max_parallel_workers_per_gather", "jit",
	"maintenance_work_mem", "temp_file_limit", "lock_timeout"
};

/* in the setting's base unit (kB, ms, a number; jit 1 on, 0 off) */
#define NO_CAP (-1.0)
#define UNLIMITED 1e300

static const double lane_cap[NL][NS] = {
	[L_WEB] = {NO_CAP, NO_CAP, NO_CAP, NO_CAP, NO_CAP, 1048576, NO_CAP},
	[L_HEAVY] = {1024, NO_CAP, 0, 0, NO_CAP, NO_CAP, NO_CAP},
	[L_MAINT] = {2048, NO_CAP, NO_CAP, NO_CAP, 2048, NO_CAP, 2000},
	[L_WRITE] = {3072, 1.5, NO_CAP, NO_CAP, NO_CAP, NO_CAP, NO_CAP},
};

static const char *const lane_settings[NL] = {
	"'{temp_file_limit=1GB}'",
	"'{work_mem=1MB,max_parallel_workers_per_gather=0,jit=off}'",
	"'{maintenance_work_mem=2MB,work_mem=2MB,max_parallel_maintenance_workers=0}'",
	"'{work_mem=3MB,hash_mem_multiplier=1.5}'",
};

/* initial limits; the changer's ranges */
static const int initial_mr[NL] = {8, 3, 2, 4};
static const int initial_mq[NL] = {32, 24, 12, 16};
static const int queue_timeout_ms[NL] = {100, 300, 300, 150};
static const int max_mr[NL] = {12, 5, 3, 6};
static const int max_mq[NL] = {48, 32, 16, 24};

/*---- shared state ----*/

static const char *conninfo;	/* the superuser's */
static char client_conninfo[1024];
static uint64_t seed;
static int	nclients;
static int64_t end_at;
static volatile int stop_all;

static int *client_pid;

/* the definitions: [0] the one before, [1] the one in force or just set */
static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static int	cfg_mr[NL][2];
static int	cfg_mq[NL][2];
static int	expected_pairs[NL][2];	/* the changer's, until the monitor saw it */

/*---- counters (added to with tc_add) ----*/

/* what the clients run */
enum
{
	K_CHEAP, K_COSTLY, K_WRITE, K_COSTLY_WRITE, K_NESTED, K_PREP_CHEAP,
	K_PREP_COSTLY, K_MULTI_TO_HEAVY, K_MULTI_FROM_HEAVY, K_MULTI_CHAIN,
	K_UTILITY, K_VACUUM, K_EXPLAIN, K_EXPLAIN_ANALYZE, K_FAIL_CHEAP,
	K_FAIL_COSTLY, K_SHOW, K_SET_LOCAL, K_SAVEPOINT, K_ROLLBACK_TO,
	K_RELEASE, K_BEGIN, K_END, K_SESSION_SET, K_SESSION_SHOW, K_CLEANUP, NK
};

static const char *const kname[NK] = {
	"cheap", "costly", "write", "costly write", "nested costly", "prepared cheap",
	"prepared costly", "multi: cheap; costly", "multi: costly; cheap",
	"multi: cheap; write; costly", "utility", "autocommit vacuum/analyze",
	"explain", "explain analyze", "failing cheap", "failing costly", "show",
	"set local", "savepoint", "rollback to savepoint", "release savepoint",
	"begin", "commit/rollback", "session set", "session show", "cleanup rollback"
};

/* the lane each kind's statement rules choose (-1: none matches) */
static const int ktarget[NK] = {
	[K_CHEAP] = -1, [K_COSTLY] = L_HEAVY, [K_WRITE] = L_WRITE,
	[K_COSTLY_WRITE] = L_HEAVY, [K_NESTED] = -1, [K_PREP_CHEAP] = -1,
	[K_PREP_COSTLY] = L_HEAVY, [K_MULTI_TO_HEAVY] = L_HEAVY,
	[K_MULTI_FROM_HEAVY] = L_HEAVY, [K_MULTI_CHAIN] = L_HEAVY,
	[K_UTILITY] = L_MAINT, [K_VACUUM] = L_MAINT, [K_EXPLAIN] = -1,
	[K_EXPLAIN_ANALYZE] = L_HEAVY, [K_FAIL_CHEAP] = -1, [K_FAIL_COSTLY] = L_HEAVY,
};

/* statement outcomes */
typedef enum LOutcome
{
	LO_OK, LO_FULL, LO_TIMEOUT, LO_CANCEL, LO_STMT_TIMEOUT, LO_LOCK_TIMEOUT,
	LO_DEADLOCK, LO_DIV0, LO_GONE, LO_HUNG, LO_OTHER, NLO
} LOutcome;

static const char *const oname[NLO] = {
	"ok", "53B01", "53B02", "cancelled", "statement_timeout", "lock_timeout",
	"40P01", "22012", "killed", "hung(20s)", "other"
};

static long n_stmt[NK][NLO];
static long n_ops_auto;
static long n_ops_block;
static long n_blocks_committed;
static long n_blocks_rolled_back;
static long n_lane_checks;
static long n_lane_resolved;	/* checks after an error left the model unsure */
static long n_moves_seen[NL];	/* statements seen in a lane, moved into it */
static long n_moved_in_seen[NL];	/* moves a statement was seen to make into a lane */
static long n_moved_out_seen[NL];	/* ... out of a lane */
static long n_fresh_seen[NL];	/* fresh grants (not moved) a statement was seen to take */
static long n_caps_checked[NL];
static long n_show_checks;
static long n_session_checks;
static long n_session_skipped;
static long n_cancels_sent;
static long n_terminates_sent;
static long n_reconnects;
static long n_outcome_tc[NOUTCOMES];	/* tree_common's (unused here) */

enum
{
	CH_UP, CH_DOWN, CH_PAUSE, CH_QUEUE, NCH
};
static const char *const change_name[NCH] = {"raised", "lowered", "paused (0)", "max_queued only"};
static long n_changes[NCH];
static long n_change_wait_ms_max;

/* monitor */
static long n_samples;
static long n_bound_checks;
static long n_over_limit;		/* reads of a lane above its limit (allowed after a lowering) */
static long n_quiet[NL];
static long n_quiet_skipped;
static int	max_over[NL];

/* violations by kind */
enum
{
	V_OVER_LIMIT, V_ADMISSION, V_IDLE, V_CONFIG, V_COUNTERS, V_QUIET, V_ACTIVITY,
	V_END, V_LANE, V_CAP, V_SESSION, V_REJECT, V_DEADLOCK, V_HANG, V_CLIENT, NV
};
static const char *const v_name[NV] = {
	"(a) running over the limits in force", "(c) running + queued over limit + max_queued",
	"permit free while the lane has waiters", "a definition the tool did not set",
	"a counter went down", "running/queued differ from bulkhead_activity (quiet window)",
	"a backend twice in a lane's activity", "end state",
	"statement in the wrong lane (own rows)", "a setting not capped as the lane says",
	"session's own value not back", "53B01/53B02 from a statement with nothing to wait for",
	"40P01 where no cycle can form", "statement hung", "client"
};
static long n_viol[NV];

/*---- values of the settings ----*/

typedef struct Values
{
	double		v[NS];
	char		text[NS][24];
} Values;

/* the value shown (or set) in its base unit; false if unreadable */
static bool
parse_value(int s, const char *text, double *out)
{
	char	   *end;
	double		n;

	if (s == S_JIT)
	{
		if (strcmp(text, "on") == 0)
			*out = 1;
		else if (strcmp(text, "off") == 0)
			*out = 0;
		else
			return false;
		return true;
	}
	n = strtod(text, &end);
	if (end == text)
		return false;
	if (s == S_HASH_MEM || s == S_PER_GATHER)
	{
		*out = n;
		return *end == '\0';
	}
	if (s == S_LOCK_TIMEOUT)
	{
		if (n == 0 && *end == '\0')
			*out = UNLIMITED;
		else if (strcmp(end, "ms") == 0 || *end == '\0')
			*out = n;
		else if (strcmp(end, "s") == 0)
			*out = n * 1000;
		else if (strcmp(end, "min") == 0)
			*out = n * 60000;
		else if (strcmp(end, "h") == 0)
			*out = n * 3600000;
		else
			return false;
		return true;
	}
	/* memory, in kB; temp_file_limit -1: no limit */
	if (s == S_TEMP_FILE && n < 0)
		*out = UNLIMITED;
	else if (strcmp(end, "kB") == 0 || *end == '\0')
		*out = n;
	else if (strcmp(end, "MB") == 0)
		*out = n * 1024;
	else if (strcmp(end, "GB") == 0)
		*out = n * 1024 * 1024;
	else if (strcmp(end, "TB") == 0)
		*out = n * 1024 * 1024 * 1024;
	else
		return false;
	return true;
}

static void
set_value(Values *vals, int s, const char *text)
{
	double		v = 0;

	if (!parse_value(s, text, &v))
	{
		tc_tool_error("cannot read \"%s\" as a value of %s", text, sname[s]);
		return;
	}
	vals->v[s] = v;
	snprintf(vals->text[s], sizeof(vals->text[s]), "%s", text);
}

/* what setting s shows in lane (NONE_LANE: no permit) over the values vals */
static double
expected_value(int s, int lane, const Values *vals)
{
	double		cap = lane >= 0 ? lane_cap[lane][s] : NO_CAP;

	if (cap < 0 || vals->v[s] <= cap)
		return vals->v[s];
	return cap;
}

static bool
same_value(double a, double b)
{
	double		d = a > b ? a - b : b - a;
	double		m = a > 0 ? a : -a;

	return d <= 1e-9 * (m > 1 ? m : 1);
}

/* the session values a client picks at connect (and SET later) */
static const char *const session_choices[NS][4] = {
	[S_WORK_MEM] = {"512kB", "1536kB", "4MB", "16MB"},
	[S_HASH_MEM] = {"1", "2", "2", "1"},
	[S_PER_GATHER] = {"0", "2", "2", "2"},
	[S_JIT] = {"on", "on", "off", "on"},
	[S_MAINT_MEM] = {"1MB", "64MB", "64MB", "1MB"},
};

/* the values a SET LOCAL picks */
static const char *const local_choices[NS][3] = {
	[S_WORK_MEM] = {"64kB", "8MB", "1536kB"},
	[S_HASH_MEM] = {"1", "3", "1.25"},
	[S_PER_GATHER] = {"0", "4", "1"},
	[S_JIT] = {"on", "off", "on"},
	[S_MAINT_MEM] = {"1MB", "128MB", "3MB"},
};

/* settings a client may SET (temp_file_limit needs a superuser; the guard's never) */
static bool
user_settable(int s)
{
	return s != S_TEMP_FILE && s != S_LOCK_TIMEOUT;
}

/*---- a client ----*/

#define NCOLS 9					/* payload, the NS settings, own rows */
#define OWN_COL (NCOLS - 1)
#define MAX_SP 3

typedef struct LClient
{
	int			id;
	PGconn	   *conn;
	uint64_t	rs;
	Values		session;
	Values		local;			/* in a transaction block: with SET LOCAL */
	bool		in_block;
	int			nsp;
	Values		sp_vals[MAX_SP];	/* local values at each savepoint */
	/* the model of the transaction's permit */
	bool		known;
	int			lane;			/* known: the lane, or NONE_LANE */
	int			from;			/* known: moved from, -1 not moved, FROM_UNKNOWN */
	unsigned	cands;			/* not known: bit lane + 1 for each possibility */
	bool		busy;			/* met a full queue or a timeout: back off */
} LClient;

typedef struct Res
{
	int			ntuples;
	int			ncols;
	char		val[NCOLS][200];
	char		err[600];
} Res;

#define OWN_SQL \
	"(SELECT string_agg(workload || '/' || state || '/' || scope || '/' ||" \
	" coalesce(moved_from, '-'), ',' ORDER BY workload)" \
	" FROM bulkhead_activity WHERE pid = pg_backend_pid())"
#define SETS_SQL \
	"current_setting('work_mem'), current_setting('hash_mem_multiplier')," \
	" current_setting('max_parallel_workers_per_gather'), current_setting('jit')," \
	" current_setting('maintenance_work_mem'), current_setting('temp_file_limit')," \
	" current_setting('lock_timeout')"
#define TAIL_SQL SETS_SQL ", " OWN_SQL

static LOutcome
classify(LClient *c, PGresult *res, int64_t t0, Res *out)
{
	ExecStatusType st = PQresultStatus(res);
	const char *state;
	const char *msg;
	int			i;

	out->ntuples = 0;
	out->ncols = 0;
	out->err[0] = '\0';
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
	{
		if (st == PGRES_TUPLES_OK)
		{
			out->ntuples = PQntuples(res);
			out->ncols = PQnfields(res) < NCOLS ? PQnfields(res) : NCOLS;
			for (i = 0; i < out->ncols && out->ntuples > 0; i++)
				snprintf(out->val[i], sizeof(out->val[i]), "%s",
						 PQgetisnull(res, 0, i) ? "(null)" : PQgetvalue(res, 0, i));
		}
		return LO_OK;
	}
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	msg = PQresultErrorMessage(res);
	snprintf(out->err, sizeof(out->err), "%s: %s", state ? state : "-----", msg ? msg : "");
	if (PQstatus(c->conn) == CONNECTION_BAD || state == NULL)
		return LO_GONE;
	if (strcmp(state, "53B01") == 0)
		return LO_FULL;
	if (strcmp(state, "53B02") == 0)
		return LO_TIMEOUT;
	if (strcmp(state, "57014") == 0)
	{
		if (msg && strstr(msg, "statement timeout"))
			return now_us() - t0 >= (int64_t) (TC_CLIENT_STATEMENT_TIMEOUT_S - 1) * 1000000 ?
				LO_HUNG : LO_STMT_TIMEOUT;
		return LO_CANCEL;
	}
	if (strcmp(state, "55P03") == 0)
		return LO_LOCK_TIMEOUT;
	if (strcmp(state, "40P01") == 0)
		return LO_DEADLOCK;
	if (strcmp(state, "22012") == 0)
		return LO_DIV0;
	if (strcmp(state, "57P01") == 0)
		return LO_GONE;
	return LO_OTHER;
}

/* count the outcome of kind; report what must not happen */
static LOutcome
counted(LClient *c, int kind, const char *sql, LOutcome o, const Res *r)
{
	tc_add(&n_stmt[kind][o], 1);
	if (o == LO_FULL || o == LO_TIMEOUT)
		c->busy = true;
	if (o == LO_HUNG)
		tc_violation(V_HANG, "client %d: %s: %s", c->id, sql, r->err);
	else if (o == LO_DEADLOCK)
		tc_violation(V_DEADLOCK, "client %d: %s: %s", c->id, sql, r->err);
	else if (o == LO_OTHER)
		tc_tool_error("client %d: %s: %s", c->id, sql, r->err);
	return o;
}

static LOutcome
run(LClient *c, int kind, const char *sql, Res *r)
{
	int64_t		t0 = now_us();
	PGresult   *res = PQexec(c->conn, sql);
	LOutcome	o = classify(c, res, t0, r);

	PQclear(res);
	return counted(c, kind, sql, o, r);
}

static LOutcome
run_prepared(LClient *c, int kind, const char *name, int param, Res *r)
{
	char		p[16];
	const char *values[1] = {p};
	int64_t		t0 = now_us();
	PGresult   *res;
	LOutcome	o;

	snprintf(p, sizeof(p), "%d", param);
	res = PQexecPrepared(c->conn, name, 1, values, NULL, NULL, 0);
	o = classify(c, res, t0, r);
	PQclear(res);
	return counted(c, kind, name, o, r);
}

static void
pick_session_values(LClient *c)
{
	int			s;

	for (s = 0; s < NS; s++)
		if (user_settable(s))
			set_value(&c->session, s, session_choices[s][tc_pick(&c->rs, 4)]);
	set_value(&c->session, S_TEMP_FILE, "-1");
	set_value(&c->session, S_LOCK_TIMEOUT, "0");
}

static void
model_none(LClient *c)
{
	c->known = true;
	c->lane = NONE_LANE;
	c->from = -1;
	c->cands = 0;
}

static void
client_connect(LClient *c)
{
	char		sql[1024];
	Res			r;
	int			s;
	size_t		off;

	for (;;)
	{
		PGresult   *res;
		bool		ok;

		c->conn = tc_connect_or_die(client_conninfo);
		pick_session_values(c);
		off = snprintf(sql, sizeof(sql), "SET statement_timeout = '%ds'",
					   TC_CLIENT_STATEMENT_TIMEOUT_S);
		for (s = 0; s < NS; s++)
			if (user_settable(s))
				off += snprintf(sql + off, sizeof(sql) - off, "; SET %s = '%s'", sname[s],
								c->session.text[s]);
		res = PQexec(c->conn, sql);
		ok = classify(c, res, now_us(), &r) == LO_OK;
		PQclear(res);
		if (ok)
		{
			res = PQprepare(c->conn, "ln_cheap",
							"SELECT pg_sleep($1::int / 1000.0), " TAIL_SQL, 1, NULL);
			ok = PQresultStatus(res) == PGRES_COMMAND_OK;
			PQclear(res);
		}
		if (ok)
		{
			res = PQprepare(c->conn, "ln_costly", "SELECT ln_heavy($1::int), " TAIL_SQL, 1, NULL);
			ok = PQresultStatus(res) == PGRES_COMMAND_OK;
			PQclear(res);
		}
		if (ok)
			break;
		/* a cancel or a terminate between connecting and setting up: again */
		PQfinish(c->conn);
	}
	c->in_block = false;
	c->nsp = 0;
	c->local = c->session;
	model_none(c);
	__atomic_store_n(&client_pid[c->id], PQbackendPID(c->conn), __ATOMIC_RELAXED);
}

static void
client_reconnect(LClient *c)
{
	__atomic_store_n(&client_pid[c->id], 0, __ATOMIC_RELAXED);
	PQfinish(c->conn);
	tc_add(&n_reconnects, 1);
	client_connect(c);
}

/*---- the model of the transaction's permit ----*/

static const char *
lane_text(int lane)
{
	if (lane == NONE_LANE)
		return "nothing";
	if (lane == FROM_UNKNOWN)
		return "(unknown)";
	return lname[lane];
}

/* what a statement whose rules choose target (or -1) leaves: lane, from */
static void
predict(int lane, int from, int target, int *el, int *ef)
{
	if (target >= 0 && target != lane)
	{
		*el = target;
		*ef = lane;				/* NONE_LANE (-1): a fresh grant, not moved */
	}
	else if (target >= 0 || lane != NONE_LANE)
	{
		*el = lane;
		*ef = from;
	}
	else
	{
		*el = L_WEB;			/* the session's lane */
		*ef = -1;
	}
}

/* does the statement (target) have to wait for a permit, in some case? */
static bool
may_wait(const LClient *c, int target)
{
	int			l;

	if (c->known)
		return (target >= 0 && target != c->lane) || (target < 0 && c->lane == NONE_LANE);
	for (l = -1; l < NL; l++)
		if ((c->cands & (1u << (l + 1))) &&
			((target >= 0 && target != l) || (target < 0 && l == NONE_LANE)))
			return true;
	return false;
}

/* a statement of target passed its gate (no rows to see it): the model follows */
static void
model_passed(LClient *c, int target)
{
	int			el,
				ef;
	unsigned	next = 0;
	int			l;

	if (c->known)
	{
		predict(c->lane, c->from, target, &el, &ef);
		c->lane = el;
		c->from = ef;
		return;
	}
	for (l = -1; l < NL; l++)
		if (c->cands & (1u << (l + 1)))
		{
			predict(l, FROM_UNKNOWN, target, &el, &ef);
			next |= 1u << (el + 1);
		}
	c->cands = next;
	for (l = -1; l < NL; l++)
		if (next == 1u << (l + 1))
		{
			c->known = true;
			c->lane = l;
			c->from = FROM_UNKNOWN;
		}
}

/* a statement of target failed somewhere: before, in or after its gate */
static void
model_unsure(LClient *c, int target)
{
	unsigned	cands = c->known ? 1u << (c->lane + 1) : c->cands;
	int			l;
	int			el,
				ef;

	cands |= 1u;				/* nothing: a wait that failed */
	for (l = -1; l < NL; l++)
		if (cands & (1u << (l + 1)))
		{
			predict(l, FROM_UNKNOWN, target, &el, &ef);
			cands |= 1u << (el + 1);
		}
	c->known = false;
	c->cands = cands;
}

/* "lane/state/scope/from" -> lane, from; false if not one such row */
static bool
parse_own(const char *text, int *lane, int *from, char *state, char *scope)
{
	char		buf[200];
	char	   *part[4];
	char	   *p;
	int			i;

	if (strchr(text, ',') != NULL)
		return false;
	snprintf(buf, sizeof(buf), "%s", text);
	p = buf;
	for (i = 0; i < 4; i++)
	{
		part[i] = p;
		p = strchr(p, '/');
		if (i < 3)
		{
			if (p == NULL)
				return false;
			*p++ = '\0';
		}
	}
	*lane = tc_windex(lname, NL, part[0]);
	*from = strcmp(part[3], "-") == 0 ? -1 : tc_windex(lname, NL, part[3]);
	snprintf(state, 16, "%s", part[1]);
	snprintf(scope, 16, "%s", part[2]);
	return *lane >= 0 && (*from >= -1) && !(strcmp(part[3], "-") != 0 && *from < 0);
}

static const Values *
current_values(const LClient *c)
{
	return c->in_block ? &c->local : &c->session;
}

/* the settings of a row (columns 1..NS) against lane's caps over the values in force */
static void
check_caps(LClient *c, const Res *r, int lane, const char *what)
{
	const Values *vals = current_values(c);
	int			s;

	for (s = 0; s < NS; s++)
	{
		double		shown;
		double		want = expected_value(s, lane, vals);

		if (!parse_value(s, r->val[1 + s], &shown))
		{
			tc_tool_error("client %d: %s: %s read as \"%s\"", c->id, what, sname[s], r->val[1 + s]);
			continue;
		}
		if (!same_value(shown, want))
			tc_violation(V_CAP, "client %d: %s in %s: %s = %s, expected %g (its %s value %s, the lane's cap %g)",
						 c->id, what, lane_text(lane), sname[s], r->val[1 + s],
						 want >= UNLIMITED ? -1 : want, c->in_block ? "transaction's" : "session's",
						 vals->text[s], lane_cap[lane][s]);
	}
	tc_add(&n_caps_checked[lane], 1);
}

/*
 * A row of a client statement whose rules chose target: its own row of
 * bulkhead_activity against the model, then its settings against the lane
 * it ran in; the model takes what it saw.
 */
static void
check_row(LClient *c, const Res *r, int target, int kind, bool explicit_expect,
		  int exp_lane, int exp_from)
{
	int			ol,
				of;
	char		state[16];
	char		scope[16];
	bool		ok = false;
	char		want[160];

	if (r->ntuples < 1 || r->ncols < NCOLS)
	{
		tc_tool_error("client %d: %s returned %d rows of %d columns", c->id, kname[kind],
					  r->ntuples, r->ncols);
		model_unsure(c, target);
		return;
	}
	tc_add(&n_lane_checks, 1);
	if (!parse_own(r->val[OWN_COL], &ol, &of, state, scope) ||
		strcmp(state, "running") != 0 || strcmp(scope, "auto") != 0)
	{
		tc_violation(V_LANE, "client %d: %s: its own rows of bulkhead_activity read \"%s\" (one running automatic permit expected)",
					 c->id, kname[kind], r->val[OWN_COL]);
		model_unsure(c, target);
		c->cands = (1u << (NL + 1)) - 1;
		return;
	}
	if (explicit_expect)
	{
		ok = ol == exp_lane && of == exp_from;
		snprintf(want, sizeof(want), "%s moved from %s", lane_text(exp_lane), lane_text(exp_from));
	}
	else if (c->known)
	{
		int			el,
					ef;

		predict(c->lane, c->from, target, &el, &ef);
		ok = ol == el && (ef == FROM_UNKNOWN || of == ef);
		snprintf(want, sizeof(want), "%s moved from %s", lane_text(el), lane_text(ef));
	}
	else
	{
		int			l;
		size_t		off = snprintf(want, sizeof(want), "one of");

		tc_add(&n_lane_resolved, 1);
		for (l = -1; l < NL; l++)
		{
			int			el,
						ef;

			if (!(c->cands & (1u << (l + 1))))
				continue;
			predict(l, FROM_UNKNOWN, target, &el, &ef);
			if (ol == el && (ef == FROM_UNKNOWN || of == ef))
				ok = true;
			if (off < sizeof(want))
				off += snprintf(want + off, sizeof(want) - off, " %s", lane_text(el));
		}
	}
	if (!ok)
		tc_violation(V_LANE, "client %d: %s ran in %s (moved_from %s), expected %s",
					 c->id, kname[kind], lname[ol], lane_text(of), want);
	if (of >= 0 && of != ol)
		tc_add(&n_moves_seen[ol], 1);
	/* what this very statement did, when the model knew where it started */
	if (ok && explicit_expect && of >= 0)
	{
		tc_add(&n_moved_in_seen[ol], 1);
		tc_add(&n_moved_out_seen[of], 1);
	}
	else if (ok && !explicit_expect && c->known && c->lane >= 0 && of == c->lane && ol != c->lane)
	{
		tc_add(&n_moved_in_seen[ol], 1);
		tc_add(&n_moved_out_seen[of], 1);
	}
	else if (ok && !explicit_expect && c->known && c->lane == NONE_LANE && of == -1)
		tc_add(&n_fresh_seen[ol], 1);
	c->known = true;
	c->lane = ol;
	c->from = of;
	check_caps(c, r, ol, kname[kind]);
	/* inside the costly function: the very work_mem of the statement */
	if ((kind == K_COSTLY || kind == K_PREP_COSTLY || kind == K_NESTED ||
		 kind == K_MULTI_TO_HEAVY || kind == K_MULTI_CHAIN) &&
		strcmp(r->val[0], r->val[1 + S_WORK_MEM]) != 0)
		tc_violation(V_CAP, "client %d: %s in %s: work_mem inside the function %s, outside %s",
					 c->id, kname[kind], lname[ol], r->val[0], r->val[1 + S_WORK_MEM]);
}

/*---- the statements ----*/

static void
statement_sql(LClient *c, int kind, char *sql, size_t len)
{
	uint64_t   *rs = &c->rs;
	int			ms = tc_between(rs, 0, 3);
	int			heavy_ms = tc_between(rs, 1, 12);
	int			id = c->id * 4 + tc_pick(rs, 4);

	switch (kind)
	{
		case K_CHEAP:
			snprintf(sql, len, "SELECT pg_sleep(%d / 1000.0), " TAIL_SQL, ms);
			break;
		case K_COSTLY:
			snprintf(sql, len, "SELECT ln_heavy(%d), " TAIL_SQL, heavy_ms);
			break;
		case K_WRITE:
			snprintf(sql, len, "UPDATE ln_t SET v = v + 1 WHERE id = %d RETURNING v, " TAIL_SQL, id);
			break;
		case K_COSTLY_WRITE:
			snprintf(sql, len, "UPDATE ln_t SET v = v + 1 WHERE id = %d AND ln_heavy(%d) IS NOT NULL"
					 " RETURNING v, " TAIL_SQL, id, heavy_ms);
			break;
		case K_NESTED:
			snprintf(sql, len, "SELECT ln_nested(%d), " TAIL_SQL, heavy_ms);
			break;
		case K_MULTI_TO_HEAVY:
			snprintf(sql, len, "SELECT pg_sleep(%d / 1000.0); SELECT ln_heavy(%d), " TAIL_SQL,
					 ms, heavy_ms);
			break;
		case K_MULTI_FROM_HEAVY:
			snprintf(sql, len, "SELECT ln_heavy(%d); SELECT pg_sleep(%d / 1000.0), " TAIL_SQL,
					 heavy_ms, ms);
			break;
		case K_MULTI_CHAIN:
			snprintf(sql, len, "SELECT 1; UPDATE ln_t SET v = v + 1 WHERE id = %d;"
					 " SELECT ln_heavy(%d), " TAIL_SQL, id, heavy_ms);
			break;
		case K_UTILITY:
			if (tc_chance(rs, 60))
				snprintf(sql, len, "ANALYZE ln_c%d", c->id);
			else
				snprintf(sql, len, "COMMENT ON TABLE ln_c%d IS 'lanes %d'", c->id, tc_pick(rs, 1000));
			break;
		case K_VACUUM:
			snprintf(sql, len, "%s ln_c%d", tc_chance(rs, 50) ? "VACUUM" : "ANALYZE", c->id);
			break;
		case K_EXPLAIN:
			snprintf(sql, len, "EXPLAIN SELECT ln_heavy(%d)", heavy_ms);
			break;
		case K_EXPLAIN_ANALYZE:
			snprintf(sql, len, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)"
					 " SELECT ln_heavy(%d)", heavy_ms);
			break;
		case K_FAIL_CHEAP:
			snprintf(sql, len, "SELECT 1 / (random() * 0)::int, " TAIL_SQL);
			break;
		case K_FAIL_COSTLY:
			snprintf(sql, len, "SELECT ln_fail(%d), " TAIL_SQL, heavy_ms);
			break;
		default:
			sql[0] = '\0';
	}
}

/* kinds whose statement returns the settings and the own rows */
static bool
returns_row(int kind)
{
	switch (kind)
	{
		case K_CHEAP:
		case K_COSTLY:
		case K_WRITE:
		case K_COSTLY_WRITE:
		case K_NESTED:
		case K_PREP_CHEAP:
		case K_PREP_COSTLY:
		case K_MULTI_TO_HEAVY:
		case K_MULTI_FROM_HEAVY:
		case K_MULTI_CHAIN:
			return true;
		default:
			return false;
	}
}

/* run a statement of kind (a prepared one by its name) */
static LOutcome
run_statement(LClient *c, int kind, char *sql, size_t len, Res *r)
{
	if (kind == K_PREP_CHEAP || kind == K_PREP_COSTLY)
	{
		int			param = kind == K_PREP_CHEAP ? tc_between(&c->rs, 0, 3) : tc_between(&c->rs, 1, 12);

		snprintf(sql, len, "%s(%d)", kind == K_PREP_CHEAP ? "ln_cheap" : "ln_costly", param);
		return run_prepared(c, kind, kind == K_PREP_CHEAP ? "ln_cheap" : "ln_costly", param, r);
	}
	statement_sql(c, kind, sql, len);
	return run(c, kind, sql, r);
}

/* SHOW of setting s: the session's value (outside a block) */
static void
session_check(LClient *c, int s)
{
	char		sql[96];
	Res			r;
	LOutcome	o;
	double		shown;

	snprintf(sql, sizeof(sql), "SHOW %s", sname[s]);
	o = run(c, K_SESSION_SHOW, sql, &r);
	if (o == LO_GONE)
	{
		client_reconnect(c);
		tc_add(&n_session_skipped, 1);
		return;
	}
	if (o != LO_OK)
	{
		tc_add(&n_session_skipped, 1);
		return;
	}
	tc_add(&n_session_checks, 1);
	if (!parse_value(s, r.val[0], &shown))
		tc_tool_error("client %d: %s read as \"%s\"", c->id, sql, r.val[0]);
	else if (!same_value(shown, c->session.v[s]))
		tc_violation(V_SESSION, "client %d: %s gives %s after the transaction, the session's own value is %s",
					 c->id, sql, r.val[0], c->session.text[s]);
}

/* work_mem and one other setting, now and then all */
static void
session_checks(LClient *c)
{
	int			s;

	if (tc_chance(&c->rs, 10))
	{
		for (s = 0; s < NS; s++)
			session_check(c, s);
		return;
	}
	session_check(c, S_WORK_MEM);
	s = tc_pick(&c->rs, NS);
	if (s != S_WORK_MEM)
		session_check(c, s);
}

/* after an error: roll back until it works (or reconnect); the model is empty */
static void
cleanup(LClient *c)
{
	int			tries;
	Res			r;

	for (tries = 0; tries < 100; tries++)
	{
		LOutcome	o = run(c, K_CLEANUP, "ROLLBACK", &r);

		if (o == LO_OK)
			break;
		if (o == LO_GONE)
		{
			client_reconnect(c);
			return;
		}
	}
	if (tries == 100)
	{
		tc_tool_error("client %d: ROLLBACK did not succeed in 100 tries; reconnecting", c->id);
		client_reconnect(c);
		return;
	}
	c->in_block = false;
	c->nsp = 0;
	c->local = c->session;
	model_none(c);
}

/*---- autocommit statements ----*/

static void
autocommit_op(LClient *c)
{
	static const int weights[][2] = {
		{K_CHEAP, 22}, {K_COSTLY, 14}, {K_WRITE, 10}, {K_COSTLY_WRITE, 4},
		{K_NESTED, 5}, {K_PREP_CHEAP, 6}, {K_PREP_COSTLY, 8},
		{K_MULTI_TO_HEAVY, 6}, {K_MULTI_FROM_HEAVY, 4}, {K_MULTI_CHAIN, 4},
		{K_VACUUM, 8}, {K_EXPLAIN, 3}, {K_EXPLAIN_ANALYZE, 3}, {K_FAIL_CHEAP, 3}
	};
	int			r = tc_pick(&c->rs, 100);
	int			kind = K_CHEAP;
	size_t		i;
	char		sql[1024];
	Res			res;
	LOutcome	o;

	for (i = 0; i < sizeof(weights) / sizeof(weights[0]); i++)
	{
		if (r < weights[i][1])
		{
			kind = weights[i][0];
			break;
		}
		r -= weights[i][1];
	}
	tc_add(&n_ops_auto, 1);
	model_none(c);
	o = run_statement(c, kind, sql, sizeof(sql), &res);
	if (o == LO_GONE)
	{
		client_reconnect(c);
		return;
	}
	if (o == LO_OK && returns_row(kind))
	{
		switch (kind)
		{
			case K_MULTI_TO_HEAVY:
				check_row(c, &res, L_HEAVY, kind, true, L_HEAVY, L_WEB);
				break;
			case K_MULTI_FROM_HEAVY:
				check_row(c, &res, L_HEAVY, kind, true, L_HEAVY, -1);
				break;
			case K_MULTI_CHAIN:
				check_row(c, &res, L_HEAVY, kind, true, L_HEAVY, L_WRITE);
				break;
			default:
				check_row(c, &res, ktarget[kind], kind, false, 0, 0);
		}
	}
	else if (o == LO_DIV0 && kind != K_FAIL_CHEAP)
		tc_tool_error("client %d: %s: %s", c->id, sql, res.err);
	else if (o == LO_OK && kind == K_FAIL_CHEAP)
		tc_tool_error("client %d: %s succeeded", c->id, sql);
	model_none(c);
	/* a utility capped for the session over its internal commits: put back */
	if (kind == K_VACUUM)
	{
		session_check(c, S_MAINT_MEM);
		session_check(c, S_WORK_MEM);
	}
	else if (tc_chance(&c->rs, 10))
		session_check(c, tc_pick(&c->rs, NS));
}

/*---- transactions ----*/

/* the steps of a transaction block */
static int
block_kind(LClient *c)
{
	static const int weights[][2] = {
		{K_CHEAP, 20}, {K_COSTLY, 13}, {K_WRITE, 10}, {K_COSTLY_WRITE, 3},
		{K_NESTED, 4}, {K_PREP_CHEAP, 4}, {K_PREP_COSTLY, 5}, {K_UTILITY, 8},
		{K_EXPLAIN, 2}, {K_EXPLAIN_ANALYZE, 3}, {K_FAIL_CHEAP, 2}, {K_FAIL_COSTLY, 2},
		{K_SHOW, 6}, {K_SET_LOCAL, 6}, {K_SAVEPOINT, 6}, {K_ROLLBACK_TO, 4},
		{K_RELEASE, 2}
	};
	for (;;)
	{
		int			r = tc_pick(&c->rs, 100);
		int			kind = K_CHEAP;
		size_t		i;

		for (i = 0; i < sizeof(weights) / sizeof(weights[0]); i++)
		{
			if (r < weights[i][1])
			{
				kind = weights[i][0];
				break;
			}
			r -= weights[i][1];
		}
		/* failing statements only under a savepoint; SHOW only when sure */
		if ((kind == K_FAIL_CHEAP || kind == K_FAIL_COSTLY || kind == K_ROLLBACK_TO ||
			 kind == K_RELEASE) && c->nsp == 0)
			continue;
		if (kind == K_SAVEPOINT && c->nsp == MAX_SP)
			continue;
		if (kind == K_SHOW && !c->known)
			continue;
		return kind;
	}
}

/*
 * The transaction failed at a statement: roll back to a savepoint (the
 * block goes on: returns true) or end it
 */
static bool
after_error(LClient *c, LOutcome o)
{
	char		sql[64];
	Res			r;
	int			j;

	if (o == LO_GONE)
	{
		client_reconnect(c);
		return false;
	}
	if (c->nsp > 0 && tc_chance(&c->rs, 75))
	{
		j = tc_between(&c->rs, 1, c->nsp);
		snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT s%d", j);
		o = run(c, K_ROLLBACK_TO, sql, &r);
		if (o == LO_OK)
		{
			c->nsp = j;
			c->local = c->sp_vals[j - 1];
			return true;
		}
		if (o == LO_GONE)
		{
			client_reconnect(c);
			return false;
		}
	}
	cleanup(c);
	session_checks(c);
	return false;
}

/* one step of a block; false when the block ended */
static bool
block_step(LClient *c)
{
	int			kind = block_kind(c);
	char		sql[1024];
	Res			r;
	LOutcome	o;
	int			target = kind < NK ? ktarget[kind] : -1;

	switch (kind)
	{
		case K_SHOW:
			{
				int			s = tc_pick(&c->rs, NS);
				double		shown;
				double		want = expected_value(s, c->lane, &c->local);

				snprintf(sql, sizeof(sql), "SHOW %s", sname[s]);
				o = run(c, kind, sql, &r);
				if (o != LO_OK)
					return after_error(c, o);
				tc_add(&n_show_checks, 1);
				if (!parse_value(s, r.val[0], &shown))
					tc_tool_error("client %d: %s read as \"%s\"", c->id, sql, r.val[0]);
				else if (!same_value(shown, want))
					tc_violation(V_CAP, "client %d: %s in %s gives %s, expected %g (the transaction's value %s)",
								 c->id, sql, lane_text(c->lane), r.val[0],
								 want >= UNLIMITED ? -1 : want, c->local.text[s]);
				return true;
			}
		case K_SET_LOCAL:
			{
				int			s;
				const char *v;

				do
					s = tc_pick(&c->rs, NS);
				while (!user_settable(s));
				v = local_choices[s][tc_pick(&c->rs, 3)];
				snprintf(sql, sizeof(sql), "SET LOCAL %s = '%s'", sname[s], v);
				o = run(c, kind, sql, &r);
				if (o != LO_OK)
					return after_error(c, o);
				set_value(&c->local, s, v);
				return true;
			}
		case K_SAVEPOINT:
			snprintf(sql, sizeof(sql), "SAVEPOINT s%d", c->nsp + 1);
			o = run(c, kind, sql, &r);
			if (o != LO_OK)
				return after_error(c, o);
			c->sp_vals[c->nsp++] = c->local;
			return true;
		case K_ROLLBACK_TO:
			{
				int			j = tc_between(&c->rs, 1, c->nsp);

				snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT s%d", j);
				o = run(c, kind, sql, &r);
				if (o != LO_OK)
					return after_error(c, o);
				c->nsp = j;
				c->local = c->sp_vals[j - 1];
				return true;
			}
		case K_RELEASE:
			{
				int			j = tc_between(&c->rs, 1, c->nsp);

				snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT s%d", j);
				o = run(c, kind, sql, &r);
				if (o != LO_OK)
					return after_error(c, o);
				c->nsp = j - 1;
				return true;
			}
		default:
			break;
	}

	/* a statement that meets the gate */
	o = run_statement(c, kind, sql, sizeof(sql), &r);
	switch (o)
	{
		case LO_OK:
			if (kind == K_FAIL_CHEAP || kind == K_FAIL_COSTLY)
				tc_tool_error("client %d: %s succeeded", c->id, sql);
			if (returns_row(kind))
				check_row(c, &r, target, kind, false, 0, 0);
			else
				model_passed(c, target);
			return true;
		case LO_DIV0:
			if (kind != K_FAIL_CHEAP && kind != K_FAIL_COSTLY)
				tc_tool_error("client %d: %s: %s", c->id, sql, r.err);
			model_passed(c, target);	/* it failed running, past its gate */
			return after_error(c, o);
		case LO_FULL:
		case LO_TIMEOUT:
			if (!may_wait(c, target))
				tc_violation(V_REJECT, "client %d: %s: %s (its permit was in %s already)",
							 c->id, sql, r.err, c->known ? lane_text(c->lane) : "(unknown)");
			/* a failed wait (a move's old permit is returned first) */
			model_none(c);
			return after_error(c, o);
		default:
			model_unsure(c, target);
			return after_error(c, o);
	}
}

static void
block_op(LClient *c)
{
	Res			r;
	LOutcome	o;
	int			steps = tc_between(&c->rs, 2, 8);
	int			i;
	char		sql[96];
	bool		commit;

	tc_add(&n_ops_block, 1);
	o = run(c, K_BEGIN, "BEGIN", &r);
	if (o != LO_OK)
	{
		if (o == LO_GONE)
			client_reconnect(c);
		else
			cleanup(c);
		return;
	}
	c->in_block = true;
	c->nsp = 0;
	c->local = c->session;
	model_none(c);
	if (tc_chance(&c->rs, 15))
	{
		/* a statement timeout for the block's statements (not a value checked) */
		snprintf(sql, sizeof(sql), "SET LOCAL statement_timeout = '%dms'", tc_between(&c->rs, 5, 60));
		if ((o = run(c, K_SET_LOCAL, sql, &r)) != LO_OK)
		{
			after_error(c, o);
			return;
		}
	}
	for (i = 0; i < steps; i++)
		if (!block_step(c))
			return;
	commit = tc_chance(&c->rs, 70);
	o = run(c, K_END, commit ? "COMMIT" : "ROLLBACK", &r);
	if (o == LO_GONE)
	{
		client_reconnect(c);
		return;
	}
	if (o != LO_OK)
	{
		cleanup(c);
		session_checks(c);
		return;
	}
	tc_add(commit ? &n_blocks_committed : &n_blocks_rolled_back, 1);
	c->in_block = false;
	c->nsp = 0;
	c->local = c->session;
	model_none(c);
	session_checks(c);
}

/* a plain SET of one of the session's values */
static void
session_set(LClient *c)
{
	int			s;
	const char *v;
	char		sql[96];
	Res			r;
	LOutcome	o;

	do
		s = tc_pick(&c->rs, NS);
	while (!user_settable(s));
	v = session_choices[s][tc_pick(&c->rs, 4)];
	snprintf(sql, sizeof(sql), "SET %s = '%s'", sname[s], v);
	o = run(c, K_SESSION_SET, sql, &r);
	if (o == LO_OK)
	{
		set_value(&c->session, s, v);
		c->local = c->session;
	}
	else if (o == LO_GONE)
		client_reconnect(c);
}

static void *
client_main(void *arg)
{
	LClient		c;

	memset(&c, 0, sizeof(c));
	c.id = (int) (intptr_t) arg;
	c.rs = seed ^ ((uint64_t) (c.id + 1) * UINT64_C(0x9e3779b97f4a7c15));
	if (c.rs == 0)
		c.rs = 1;
	client_connect(&c);
	while (now_us() < end_at)
	{
		int			r = tc_pick(&c.rs, 100);

		if (r < 5)
			session_set(&c);
		else if (r < 45)
			autocommit_op(&c);
		else
			block_op(&c);
		/* a pause; longer after a full queue or a timeout */
		tc_sleep_ms(tc_pick(&c.rs, c.busy ? 20 : 3));
		c.busy = false;
	}
	/* end: nothing left open */
	cleanup(&c);
	__atomic_store_n(&client_pid[c.id], 0, __ATOMIC_RELAXED);
	PQfinish(c.conn);
	return NULL;
}

/*---- chaos and the changer ----*/

static void *
chaos_main(void *arg)
{
	static const TcChaosWay way = {300, 1200, 5, 25};

	tc_chaos_run(seed, end_at, nclients, &way, &n_cancels_sent, &n_terminates_sent);
	return arg;
}

typedef struct LRow
{
	bool		present;
	int			max_running;
	int			max_queued;
	int			limit;
	int			running;
	int			queued;
	long		acquired;
	long		released;
	long		cancelled;
	long		timed_out;
	long		rejected_full;
	long		deadlocks;
	long		moved_in;
	long		moved_out;
	int64_t		ts;
} LRow;

typedef struct LAct
{
	bool		present;
	int			running;
	int			queued;
	int			pids;
	int			rows;
	int64_t		ts;
} LAct;

/* does the sample (the second stats read) show the expected pairs? */
static bool
shows_pairs(const void *rows_arg, const void *expected)
{
	const LRow *rows = rows_arg;
	const int (*pairs)[2] = expected;
	int			l;

	for (l = 0; l < NL; l++)
		if (rows[l].max_running != pairs[l][0] || rows[l].max_queued != pairs[l][1])
			return false;
	return true;
}

static void *
changer_main(void *arg)
{
	uint64_t	rs = seed ^ UINT64_C(0x1a7e5);
	PGconn	   *conn = tc_connect_or_die(conninfo);
	char		sql[256];
	char		err[512];

	if (rs == 0)
		rs = 1;
	while (now_us() < end_at)
	{
		int			l = tc_pick(&rs, NL);
		int			mr;
		int			mq;
		int			cur_mr;
		int			cur_mq;
		int			pairs[NL][2];
		int			i;

		tc_sleep_ms(tc_between(&rs, 200, 600));
		if (now_us() >= end_at)
			break;
		pthread_mutex_lock(&cfg_lock);
		cur_mr = cfg_mr[l][1];
		cur_mq = cfg_mq[l][1];
		pthread_mutex_unlock(&cfg_lock);
		do
		{
			mr = tc_chance(&rs, 6) ? 0 : tc_between(&rs, 1, max_mr[l]);
			mq = tc_between(&rs, 0, max_mq[l]);
		} while (mr == cur_mr && mq == cur_mq);
		pthread_mutex_lock(&cfg_lock);
		cfg_mr[l][0] = cur_mr;
		cfg_mq[l][0] = cur_mq;
		cfg_mr[l][1] = mr;
		cfg_mq[l][1] = mq;
		for (i = 0; i < NL; i++)
		{
			pairs[i][0] = cfg_mr[i][1];
			pairs[i][1] = cfg_mq[i][1];
		}
		pthread_mutex_unlock(&cfg_lock);
		snprintf(sql, sizeof(sql), "UPDATE bulkhead_workload SET max_running = %d, max_queued = %d"
				 " WHERE name = '%s'", mr, mq, lname[l]);
		if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK)
		{
			tc_tool_error("changer: %s: %s", sql, err);
			pthread_mutex_lock(&cfg_lock);
			cfg_mr[l][1] = cur_mr;
			cfg_mq[l][1] = cur_mq;
			pthread_mutex_unlock(&cfg_lock);
			if (PQstatus(conn) == CONNECTION_BAD)
			{
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
			}
			continue;
		}
		tc_add(&n_changes[mr == 0 ? CH_PAUSE : mr > cur_mr ? CH_UP : mr < cur_mr ? CH_DOWN : CH_QUEUE], 1);
		if (!tc_wait_seen(expected_pairs, pairs, sizeof(expected_pairs), &n_change_wait_ms_max))
			tc_tool_error("changer: \"%s\" was not seen in bulkhead_stats within 10 s", sql);
	}
	PQfinish(conn);
	return arg;
}

/*---- the monitor ----*/

#define STATS_PART(n) \
	"SELECT " #n " AS part, workload, max_running, max_queued, current_limit, running, queued," \
	" acquired, released, cancelled, timed_out, rejected_full, deadlocks, moved_in, moved_out," \
	" (extract(epoch FROM clock_timestamp()) * 1000000)::int8" \
	" FROM bulkhead_stats WHERE workload ~ " LANE_PATTERN

#define MONITOR_SQL \
	STATS_PART(1) \
	" UNION ALL SELECT 2, workload, (count(*) FILTER (WHERE state = 'running'))::int," \
	" (count(*) FILTER (WHERE state = 'queued'))::int, count(DISTINCT pid)::int, count(*)::int, 0," \
	" 0, 0, 0, 0, 0, 0, 0, 0, (extract(epoch FROM clock_timestamp()) * 1000000)::int8" \
	" FROM bulkhead_activity WHERE workload ~ " LANE_PATTERN " GROUP BY workload" \
	" UNION ALL " STATS_PART(3)

static bool
read_sample(PGconn *conn, LRow *s1, LAct *act, LRow *s2)
{
	PGresult   *res = PQexec(conn, MONITOR_SQL);
	int			i;
	int			l;
	int			last_part = 1;

	memset(s1, 0, sizeof(LRow) * NL);
	memset(s2, 0, sizeof(LRow) * NL);
	memset(act, 0, sizeof(LAct) * NL);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		if (PQstatus(conn) != CONNECTION_BAD)
			tc_tool_error("monitor: %s", PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	for (i = 0; i < PQntuples(res); i++)
	{
		int			part = atoi(PQgetvalue(res, i, 0));
		int64_t		ts = strtoll(PQgetvalue(res, i, 15), NULL, 10);

		l = tc_windex(lname, NL, PQgetvalue(res, i, 1));
		if (l < 0)
			continue;
		if (part < last_part)
			tc_tool_error("monitor: the parts of a sample came out of order");
		last_part = part;
		if (part == 2)
		{
			if (act[l].present)
				tc_violation(V_ACTIVITY, "%s appears twice in the activity counts", lname[l]);
			act[l].present = true;
			act[l].running = atoi(PQgetvalue(res, i, 2));
			act[l].queued = atoi(PQgetvalue(res, i, 3));
			act[l].pids = atoi(PQgetvalue(res, i, 4));
			act[l].rows = atoi(PQgetvalue(res, i, 5));
			act[l].ts = ts;
		}
		else
		{
			LRow	   *r = part == 1 ? &s1[l] : &s2[l];

			if (r->present)
				tc_violation(V_CONFIG, "%s appears twice in bulkhead_stats", lname[l]);
			r->present = true;
			r->max_running = atoi(PQgetvalue(res, i, 2));
			r->max_queued = atoi(PQgetvalue(res, i, 3));
			r->limit = atoi(PQgetvalue(res, i, 4));
			r->running = atoi(PQgetvalue(res, i, 5));
			r->queued = atoi(PQgetvalue(res, i, 6));
			r->acquired = atol(PQgetvalue(res, i, 7));
			r->released = atol(PQgetvalue(res, i, 8));
			r->cancelled = atol(PQgetvalue(res, i, 9));
			r->timed_out = atol(PQgetvalue(res, i, 10));
			r->rejected_full = atol(PQgetvalue(res, i, 11));
			r->deadlocks = atol(PQgetvalue(res, i, 12));
			r->moved_in = atol(PQgetvalue(res, i, 13));
			r->moved_out = atol(PQgetvalue(res, i, 14));
			r->ts = ts;
		}
	}
	PQclear(res);
	for (l = 0; l < NL; l++)
		if (!s1[l].present || !s2[l].present)
		{
			tc_tool_error("monitor: %s is not in bulkhead_stats", lname[l]);
			return false;
		}
	return true;
}

static void
row_text(const LRow *r, char *buf, size_t len)
{
	snprintf(buf, len, "max_running %d, max_queued %d, current_limit %d, running %d, queued %d,"
			 " acquired %ld, released %ld, moved_in %ld, moved_out %ld",
			 r->max_running, r->max_queued, r->limit, r->running, r->queued, r->acquired,
			 r->released, r->moved_in, r->moved_out);
}

/* one read of lane l, against its previous read */
static void
check_read(int l, const LRow *r, const LRow *prev, const char *which)
{
	char		now_text[256];
	char		prev_text[256];
	bool		known_pair;
	int			bound;

	row_text(r, now_text, sizeof(now_text));
	if (r->limit != r->max_running)
		tc_violation(V_CONFIG, "%s (%s): current_limit %d, max_running %d (not adaptive): %s",
					 lname[l], which, r->limit, r->max_running, now_text);
	pthread_mutex_lock(&cfg_lock);
	known_pair = (r->max_running == cfg_mr[l][0] && r->max_queued == cfg_mq[l][0]) ||
		(r->max_running == cfg_mr[l][1] && r->max_queued == cfg_mq[l][1]);
	pthread_mutex_unlock(&cfg_lock);
	if (!known_pair)
		tc_violation(V_CONFIG, "%s (%s): max_running %d, max_queued %d, not a pair the tool set lately",
					 lname[l], which, r->max_running, r->max_queued);
	if (r->running < 0 || r->queued < 0)
		tc_violation(V_COUNTERS, "%s (%s): %s", lname[l], which, now_text);
	if (r->queued > 0 && r->running < r->limit)
		tc_violation(V_IDLE, "%s (%s): %d queued with %d running under the limit %d: %s",
					 lname[l], which, r->queued, r->running, r->limit, now_text);
	if (r->running > r->limit)
	{
		tc_add(&n_over_limit, 1);
		if (r->running - r->limit > max_over[l])
			max_over[l] = r->running - r->limit;
	}
	if (!prev->present)
		return;
	row_text(prev, prev_text, sizeof(prev_text));
	tc_add(&n_bound_checks, 1);
	/* (a): grants only under a limit in force between the two reads */
	bound = prev->running;
	if (prev->limit > bound)
		bound = prev->limit;
	if (r->limit > bound)
		bound = r->limit;
	if (r->running > bound)
		tc_violation(V_OVER_LIMIT, "%s (%s): running %d > the most it may show (%d): was %s; now %s",
					 lname[l], which, r->running, bound, prev_text, now_text);
	/* (c): admissions only under limit + max_queued */
	bound = prev->running + prev->queued;
	if (prev->limit + prev->max_queued > bound)
		bound = prev->limit + prev->max_queued;
	if (r->limit + r->max_queued > bound)
		bound = r->limit + r->max_queued;
	if (r->running + r->queued > bound)
		tc_violation(V_ADMISSION, "%s (%s): running + queued %d > the most it may show (%d): was %s; now %s",
					 lname[l], which, r->running + r->queued, bound, prev_text, now_text);
	if (r->acquired < prev->acquired || r->released < prev->released ||
		r->cancelled < prev->cancelled || r->timed_out < prev->timed_out ||
		r->rejected_full < prev->rejected_full || r->deadlocks < prev->deadlocks ||
		r->moved_in < prev->moved_in || r->moved_out < prev->moved_out)
		tc_violation(V_COUNTERS, "%s (%s): was %s; now %s", lname[l], which, prev_text, now_text);
}

static bool
quiet(const LRow *a, const LRow *b)
{
	return a->running == b->running && a->queued == b->queued &&
		a->acquired == b->acquired && a->released == b->released &&
		a->cancelled == b->cancelled && a->timed_out == b->timed_out &&
		a->rejected_full == b->rejected_full && a->deadlocks == b->deadlocks &&
		a->moved_in == b->moved_in && a->moved_out == b->moved_out;
}

static void *
monitor_main(void *arg)
{
	PGconn	   *conn = tc_connect_or_die(conninfo);
	LRow		prev[NL];
	LRow		s1[NL];
	LRow		s2[NL];
	LAct		act[NL];
	int			l;

	memset(prev, 0, sizeof(prev));
	while (!__atomic_load_n(&stop_all, __ATOMIC_RELAXED))
	{
		if (!read_sample(conn, s1, act, s2))
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
		for (l = 0; l < NL; l++)
		{
			if (s1[l].ts > s2[l].ts || (act[l].present && (act[l].ts < s1[l].ts || act[l].ts > s2[l].ts)))
				tc_tool_error("monitor: %s: the reads of a sample are not in order", lname[l]);
			check_read(l, &s1[l], &prev[l], "first read");
			check_read(l, &s2[l], &s1[l], "second read");
			if (act[l].present && act[l].pids != act[l].rows)
				tc_violation(V_ACTIVITY, "%s: %d rows of bulkhead_activity for %d backends",
							 lname[l], act[l].rows, act[l].pids);
			if (quiet(&s1[l], &s2[l]))
			{
				tc_add(&n_quiet[l], 1);
				if (act[l].running != s1[l].running || act[l].queued != s1[l].queued)
				{
					char		text[256];

					row_text(&s1[l], text, sizeof(text));
					tc_violation(V_QUIET, "%s: bulkhead_activity shows %d running, %d queued; bulkhead_stats before and after: %s",
								 lname[l], act[l].running, act[l].queued, text);
				}
			}
			else
				tc_add(&n_quiet_skipped, 1);
			prev[l] = s2[l];
		}
		tc_check_seen(shows_pairs, s2, expected_pairs);
		tc_sleep_ms(2);
	}
	PQfinish(conn);
	return arg;
}

/*---- set-up and the end ----*/

static void
setup(PGconn *conn, int clients)
{
	char		sql[1024];
	int			l;
	int			i;

	tc_setup_exec(conn, "DELETE FROM bulkhead_rule WHERE workload ~ " LANE_PATTERN);
	tc_setup_exec(conn, "DELETE FROM bulkhead_workload WHERE name ~ " LANE_PATTERN);
	tc_setup_exec(conn, "DO $$ BEGIN CREATE ROLE " ROLE " LOGIN;"
			   " EXCEPTION WHEN duplicate_object THEN NULL; END $$");
	tc_setup_exec(conn, "DROP TABLE IF EXISTS ln_t");
	tc_setup_exec(conn, "CREATE TABLE ln_t (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)");
	snprintf(sql, sizeof(sql), "INSERT INTO ln_t (id) SELECT g FROM generate_series(0, %d) g",
			 clients * 4);
	tc_setup_exec(conn, sql);
	tc_setup_exec(conn, "ALTER TABLE ln_t OWNER TO " ROLE);
	tc_setup_exec(conn, "ANALYZE ln_t");
	for (i = 0; i < clients; i++)
	{
		snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS ln_c%d; CREATE TABLE ln_c%d (id int);"
				 " INSERT INTO ln_c%d SELECT generate_series(1, 10); ALTER TABLE ln_c%d OWNER TO " ROLE,
				 i, i, i, i);
		tc_setup_exec(conn, sql);
	}
	/* costly: COST 100000 x cpu_operator_cost 0.0025 = 250 */
	tc_setup_exec(conn, "CREATE OR REPLACE FUNCTION ln_heavy(ms int) RETURNS text LANGUAGE plpgsql"
			   " VOLATILE COST 100000 AS $$ BEGIN PERFORM pg_sleep(ms / 1000.0);"
			   " RETURN current_setting('work_mem'); END $$");
	tc_setup_exec(conn, "CREATE OR REPLACE FUNCTION ln_fail(ms int) RETURNS int LANGUAGE plpgsql"
			   " VOLATILE COST 100000 AS $$ BEGIN PERFORM pg_sleep(ms / 1000.0);"
			   " RETURN 1 / (ms - ms); END $$");
	/* cheap (COST 100: 0.25), a costly query inside (nested: not matched) */
	tc_setup_exec(conn, "CREATE OR REPLACE FUNCTION ln_nested(ms int) RETURNS text LANGUAGE plpgsql"
			   " VOLATILE AS $$ DECLARE r text; BEGIN SELECT ln_heavy(ms) INTO r; RETURN r; END $$");
	for (l = 0; l < NL; l++)
	{
		snprintf(sql, sizeof(sql),
				 "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
				 " lock_timeout, settings) VALUES ('%s', %d, %d, '%d ms', %s, %s)",
				 lname[l], initial_mr[l], initial_mq[l], queue_timeout_ms[l],
				 l == L_MAINT ? "'2s'" : "NULL", lane_settings[l]);
		tc_setup_exec(conn, sql);
		cfg_mr[l][0] = cfg_mr[l][1] = initial_mr[l];
		cfg_mq[l][0] = cfg_mq[l][1] = initial_mq[l];
	}
	tc_setup_exec(conn, "INSERT INTO bulkhead_rule (position, role, application_name, workload, min_cost, command) VALUES"
			   " (9001, NULL, NULL, 'ln_heavy', 100, NULL),"
			   " (9002, NULL, 'ln-nomatch%', 'ln_maint', NULL, '{select}'),"
			   " (9003, '" ROLE "', NULL, 'ln_maint', NULL, '{utility}'),"
			   " (9004, '" ROLE "', NULL, 'ln_write', NULL, '{insert,update,delete}'),"
			   " (9005, NULL, 'ln-nomatch%', 'ln_write', 0, NULL),"
			   " (9010, '" ROLE "', NULL, 'ln_web', NULL, NULL)");
	snprintf(sql, sizeof(sql), "SELECT count(*) = %d FROM bulkhead_stats WHERE workload ~ "
			 LANE_PATTERN " AND settings IS NOT NULL", NL);
	tc_setup_wait(conn, sql, "the lanes were");
	for (l = 0; l < NL; l++)
	{
		snprintf(sql, sizeof(sql), "SELECT bulkhead_stats_reset('%s')", lname[l]);
		tc_setup_exec(conn, sql);
	}
}

/* the rules loaded: a client's costly statement is classified to ln_heavy */
static void
wait_rules_loaded(void)
{
	PGconn	   *conn = tc_connect_or_die(client_conninfo);

	tc_setup_wait(conn, "SELECT (SELECT workload FROM bulkhead_classify('SELECT ln_heavy(1)')) = 'ln_heavy'"
				  " AND (SELECT workload FROM bulkhead_classify('ANALYZE ln_t')) = 'ln_maint'"
				  " AND (SELECT workload FROM bulkhead_classify('SELECT 1')) = 'ln_web'",
				  "the statement rules were");
	PQfinish(conn);
}

static void
check_end(PGconn *conn, LRow *rows)
{
	int			i;
	int			l;
	bool		idle = false;
	LRow		s1[NL];
	LAct		act[NL];
	long		acq = 0,
				rel = 0,
				in = 0,
				out = 0;

	for (i = 0; i < 1000; i++)
	{
		if (read_sample(conn, s1, act, rows))
		{
			idle = true;
			for (l = 0; l < NL; l++)
				if (rows[l].running != 0 || rows[l].queued != 0)
					idle = false;
			if (idle)
				break;
		}
		tc_sleep_ms(10);
	}
	if (!idle)
		for (l = 0; l < NL; l++)
			if (rows[l].running != 0 || rows[l].queued != 0)
				tc_violation(V_END, "%s: running %d, queued %d 10 s after the clients ended",
							 lname[l], rows[l].running, rows[l].queued);
	tc_no_activity_left(conn, LANE_PATTERN, V_END);
	printf("\n%-9s %5s %9s %9s %9s %9s %9s %9s %9s %8s\n", "lane", "limit", "acquired",
		   "released", "moved_in", "moved_out", "rejected", "timed_out", "cancelled", "max_over");
	for (l = 0; l < NL; l++)
	{
		const LRow *r = &rows[l];

		printf("%-9s %5d %9ld %9ld %9ld %9ld %9ld %9ld %9ld %8d\n", lname[l], r->limit,
			   r->acquired, r->released, r->moved_in, r->moved_out, r->rejected_full,
			   r->timed_out, r->cancelled, max_over[l]);
		acq += r->acquired;
		rel += r->released;
		in += r->moved_in;
		out += r->moved_out;
		if (r->acquired + r->moved_in != r->released + r->moved_out)
			tc_violation(V_END, "%s: acquired %ld + moved_in %ld != released %ld + moved_out %ld",
						 lname[l], r->acquired, r->moved_in, r->released, r->moved_out);
		/* the counters count at least what the clients saw happen */
		if (r->moved_in < n_moved_in_seen[l] || r->moved_out < n_moved_out_seen[l] ||
			r->acquired < n_fresh_seen[l])
			tc_violation(V_END, "%s: moved_in %ld, moved_out %ld, acquired %ld; the clients saw at least %ld moves in, %ld out, %ld fresh grants",
						 lname[l], r->moved_in, r->moved_out, r->acquired, n_moved_in_seen[l],
						 n_moved_out_seen[l], n_fresh_seen[l]);
	}
	if (acq + in != rel + out)
		tc_violation(V_END, "summed over the lanes: acquired %ld + moved_in %ld != released %ld + moved_out %ld",
					 acq, in, rel, out);
	if (in > out)
		tc_violation(V_END, "summed over the lanes: moved_in %ld > moved_out %ld", in, out);
	printf("summed over the lanes: acquired %ld, released %ld, moved out %ld, moved in %ld"
		   " (%ld moves failed: out of a lane, never granted in the next)\n",
		   acq, rel, out, in, out - in);
	for (l = L_HEAVY; l < NL; l++)
		if (rows[l].moved_in == 0)
			tc_tool_error("no permit moved into %s in the run", lname[l]);
	if (rows[L_WEB].moved_out == 0)
		tc_tool_error("no permit moved out of ln_web in the run");
}

int
lane_stress_main(int clients, int seconds, const char *conninfo_arg, uint64_t seed_arg)
{
	PGconn	   *conn;
	pthread_t  *threads;
	pthread_t	monitor;
	pthread_t	changer;
	pthread_t	chaos;
	int			i;
	int			k;
	int			l;
	long		ops;
	long		nviol = 0;
	long		nchanges = 0;
	long		stmts = 0;
	long		by_outcome[NLO] = {0};
	double		runtime;
	LRow		rows[NL];

	conninfo = conninfo_arg;
	snprintf(client_conninfo, sizeof(client_conninfo), "%s user=" ROLE, conninfo);
	client_pid = calloc(clients, sizeof(int));
	tc_init(TC_HOLDS, conninfo, n_viol, v_name, V_HANG, V_CLIENT, n_outcome_tc,
			client_pid, &n_reconnects);
	nclients = clients;
	seed = seed_arg ? seed_arg : ((uint64_t) time(NULL) ^ ((uint64_t) getpid() << 20));
	conn = tc_connect_or_die(conninfo);
	setup(conn, clients);
	wait_rules_loaded();
	printf("lanes mode: %d clients, %d s, seed %" PRIu64 "\n", clients, seconds, seed);
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
	/* later modes' clients (superusers, exempt off) must meet no statement rule */
	tc_setup_exec(conn, "DELETE FROM bulkhead_rule WHERE workload ~ " LANE_PATTERN);
	PQfinish(conn);

	ops = n_ops_auto + n_ops_block;
	for (k = 0; k < NK; k++)
		for (i = 0; i < NLO; i++)
		{
			by_outcome[i] += n_stmt[k][i];
			stmts += n_stmt[k][i];
		}
	for (i = 0; i < NCH; i++)
		nchanges += n_changes[i];
	for (i = 0; i < NV; i++)
		nviol += n_viol[i];
	printf("\noperations: %ld (%.0f/s): autocommit statements %ld, transaction blocks %ld"
		   " (committed %ld, rolled back %ld, the rest ended by an error)\n",
		   ops, ops / runtime, n_ops_auto, n_ops_block, n_blocks_committed, n_blocks_rolled_back);
	printf("statements: %ld:", stmts);
	for (i = 0; i < NLO; i++)
		printf(" %s %ld%s", oname[i], by_outcome[i], i < NLO - 1 ? "," : "\n");
	printf("per kind: ok / 53B01 / 53B02 / cancelled / statement_timeout / 22012 / killed / other\n");
	for (k = 0; k < NK; k++)
	{
		long		rest = n_stmt[k][LO_LOCK_TIMEOUT] + n_stmt[k][LO_DEADLOCK] +
			n_stmt[k][LO_HUNG] + n_stmt[k][LO_OTHER];

		printf("  %-28s %7ld %6ld %6ld %6ld %6ld %6ld %6ld %6ld\n", kname[k], n_stmt[k][LO_OK],
			   n_stmt[k][LO_FULL], n_stmt[k][LO_TIMEOUT], n_stmt[k][LO_CANCEL],
			   n_stmt[k][LO_STMT_TIMEOUT], n_stmt[k][LO_DIV0], n_stmt[k][LO_GONE], rest);
	}
	printf("checks: own rows %ld (%ld after an error left the model unsure), settings per lane:",
		   n_lane_checks, n_lane_resolved);
	for (l = 0; l < NL; l++)
		printf(" %s %ld%s", lname[l], n_caps_checked[l], l < NL - 1 ? "," : "");
	printf("; statements seen moved into:");
	for (l = 0; l < NL; l++)
		printf(" %s %ld%s", lname[l], n_moves_seen[l], l < NL - 1 ? "," : "");
	printf("; SHOW in a transaction %ld; session values after %ld (%ld skipped: cancelled)\n",
		   n_show_checks, n_session_checks, n_session_skipped);
	printf("seen made by the statement itself: moves in");
	for (l = 0; l < NL; l++)
		printf(" %s %ld%s", lname[l], n_moved_in_seen[l], l < NL - 1 ? "," : "");
	printf("; fresh grants");
	for (l = 0; l < NL; l++)
		printf(" %s %ld%s", lname[l], n_fresh_seen[l], l < NL - 1 ? "," : "\n");
	printf("chaos: %ld cancels, %ld terminations sent; %ld reconnects\n",
		   n_cancels_sent, n_terminates_sent, n_reconnects);
	printf("limit changes: %ld:", nchanges);
	for (i = 0; i < NCH; i++)
		printf(" %s %ld%s", change_name[i], n_changes[i], i < NCH - 1 ? "," : "");
	printf(" (longest wait for the monitor to see one %ld ms)\n", n_change_wait_ms_max);
	printf("monitor: %ld samples, %ld bound checks, %ld reads of a lane over its limit (after a lowering),"
		   " quiet windows:", n_samples, n_bound_checks, n_over_limit);
	for (l = 0; l < NL; l++)
		printf(" %s %ld%s", lname[l], n_quiet[l], l < NL - 1 ? "," : "");
	printf(" (%ld not quiet)\n", n_quiet_skipped);
	for (l = 0; l < NL; l++)
		if (n_caps_checked[l] == 0)
			tc_tool_error("no statement's settings were checked in %s", lname[l]);
	/*
	 * A queue timeout needs a queue slow to drain: 6 s runs saw from 0 to
	 * 590 of them (isolation lane_move makes one for sure), so only a
	 * longer run must see one.
	 */
	if ((seconds >= 5 && (by_outcome[LO_FULL] == 0 || by_outcome[LO_CANCEL] == 0)) ||
		(seconds >= 30 && by_outcome[LO_TIMEOUT] == 0))
		tc_tool_error("the run saw no 53B01 (%ld), no 53B02 (%ld) or no cancel (%ld)",
					  by_outcome[LO_FULL], by_outcome[LO_TIMEOUT], by_outcome[LO_CANCEL]);
	printf("violations: %ld", nviol);
	for (i = 0; i < NV; i++)
		if (n_viol[i])
			printf("; %s %ld", v_name[i], n_viol[i]);
	printf("\n");
	if (tc_n_tool_errors)
		printf("tool errors: %ld\n", tc_n_tool_errors);
	printf("runtime: %.1f s\n", runtime);
	printf("summary: %ld operations, %ld statements, %ld moved, %ld limit changes, %ld violations\n",
		   ops, stmts, rows[L_WEB].moved_out + rows[L_HEAVY].moved_out + rows[L_MAINT].moved_out +
		   rows[L_WRITE].moved_out, nchanges, nviol);
	if (nviol > 0)
		return 1;
	return tc_n_tool_errors > 0 ? 2 : 0;
}
