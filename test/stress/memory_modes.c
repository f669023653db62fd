/*-------------------------------------------------------------------------
 *
 * memory_modes.c
 *	  The memory mode of bulkhead_stress (-D memory): memory grants (1.4)
 *	  under load.  Clients run statements that need memory (sorts and hash
 *	  aggregates over generate_series, cursors held open across
 *	  statements, functions whose queries need memory while the outer
 *	  statement holds a grant, CREATE INDEX on a temporary table for
 *	  maintenance_work_mem, statements failing inside their sort) in
 *	  workloads with a max_memory and outside any workload under
 *	  bulkhead.max_memory, while a changer changes the limits, a chaos
 *	  thread cancels and terminates, and a monitor checks the bounds.  One
 *	  thread per client, blocking libpq calls, plus a changer, a chaos thread
 *	  and a monitor, each on its own connection.
 *
 * The workloads (created afresh at the start, left in place at the end):
 *
 *	 mg_a       enforce, max_memory 8MB, memory_timeout 100 ms
 *	 mg_b       enforce, 4MB, 20 ms
 *	 mg_root    a budget, 12MB (its subtree's grants), memory_timeout NULL
 *	   mg_c1    enforce, 8MB, 200 ms
 *	   mg_c2    enforce, no max_memory of its own (its budget's bounds it)
 *	 mg_sh      shadow mode, 2MB: never waits, may pass its limit
 *	 mg_marker  takes no statement: the changer's marker (see below)
 *
 * and bulkhead.max_memory, 48MB at the start (ALTER SYSTEM, reset at the
 * end).  Every workload takes up to clients + 8 permits (the permits are
 * not what this mode tests: a 53B01 or 53B02 is rare, and allowed).
 *
 * The clients (superusers, bulkhead.exempt_superuser off; enable_sort off,
 * so that a GROUP BY is a hash aggregate whatever work_mem; no parallel
 * plans) run operations: each picks a home (a workload, or none: the
 * server's limit only), a way to be in it (a session permit, a
 * transaction's permit, an automatic one with bulkhead.workload), a
 * work_mem (64kB-16MB) and a maintenance_work_mem (1MB-32MB), and runs 1-6
 * steps, in a transaction block or not: a sort or a hash aggregate of
 * 100-2,000 rows or 20,000-120,000, a function whose query sorts while the
 * outer statement holds a grant (sometimes failing inside: 22012), a sort
 * failing on a division by zero, CREATE INDEX on the client's temporary
 * table; in a block also a cursor (WITH HOLD or not) declared, fetched
 * from, held while the client sleeps and runs other steps, closed or left
 * to the end of the transaction, savepoints rolled back to or released,
 * and a SET LOCAL statement_timeout of 5-40 ms now and then (outside any
 * workload, a statement never waits for memory).  After
 * an error the client rolls back, resets bulkhead.workload, gives back its
 * permits, closes its cursors and checks that bulkhead_activity shows no
 * row of its own; after a terminate it reconnects and waits until its old
 * backend is gone.  Every 10th clean operation ends with that check too.
 *
 * The allowance.  A statement may pass a limit by its floor: shrunk (after
 * its memory_timeout, or at once when it may not wait: a nested one, one
 * while its backend holds a grant, one outside any workload), it is granted what is free but never
 * less than its request at work_mem = 64kB (maintenance_work_mem 1MB),
 * which bulkhead_classify gives; one larger than a level's limit even so
 * is granted when that level holds nothing.  So at any moment a level's
 * memory_granted is at most its max_memory plus the floors of the grants
 * it holds (by induction over grants.c: a grant at once fits, or finds the
 * level empty and is cut to at most max(limit, floor); one shrunk to what
 * is free adds at most its floor beyond the limit; a release takes away at
 * least its own floor).  A statement of a workload in shadow mode is
 * granted its whole request at once: at the server's level (and at every
 * level above it: mg_sh is in no tree) it counts by its request.  At the
 * start the tool works out, per kind of statement, its floor (the largest
 * of bulkhead_classify's request at each work_mem the clients use, scaled
 * to 64kB: the plan's memory nodes at 64kB each, whatever plan that
 * work_mem gives) and its largest request (at 16MB, or 32MB of
 * maintenance_work_mem).  Before it sends a statement that may be granted
 * memory, a client publishes that statement's floor (and its request) at
 * the level it is charged to (its home; the server's only, for the
 * clean-up's check), the inner query's as well for a function; it takes
 * them back only once the statement has returned (a cursor's: once it is
 * closed, or the operation ended), after a terminate only once its old
 * backend is gone from pg_stat_get_activity (its exit returns the
 * grants).  The monitor resets the published peaks before it sends a
 * sample and reads them after: the allowance of a level is the peaks of the
 * clients charged to its subtree added up, which is at most (the
 * statements running there) x (the largest floor).  The monitor's own
 * statement is charged to the server too (its functions' scans): outside
 * any workload it never waits, and takes its own grant, read in the same
 * sample, off the server's figure.  The changer's and the chaos thread's
 * statements request nothing (checked at the start with bulkhead_classify,
 * as every statement without memory nodes that the clients send).
 *
 * Lowered limits (nothing is preempted).  Each level's limits possibly in
 * force are the value the tool set last and every older one not yet
 * retired; the bound is the highest of them (no limit: no bound).  The
 * changer adds the new value before it writes it (so a raise counts from
 * the moment it may apply) and the old one stays until it is retired by
 * the epoch rule: operations (a client's loop iteration, from its first
 * statement to its last, clean-up included) carry the epoch in force when
 * they began; once the change is known to be applied the changer bumps the
 * epoch to B, and the old value retires when no operation of an epoch
 * before B is left.  Known to be applied:
 *
 * - a workload's max_memory: the worker's load shows the row in
 *   bulkhead_stats (the slots) before it gives grants.c its copy, so
 *   seeing the new value proves nothing; the changer then changes the
 *   marker's max_queued, and once the monitor sees that, a later load has
 *   run, so the earlier one finished.  Every grant made under the old
 *   limit was made before then, for a statement of an operation begun
 *   before B (a waiter served by someone else's release waited, so its
 *   operation had begun).
 * - bulkhead.max_memory: a setting of each backend, re-read when it gets
 *   SIGHUP and next reads a command; the releasing backend's value serves
 *   the waiters.  The changer bumps the epoch once the monitor's own
 *   bulkhead_memory shows the new value (the postmaster has signalled every
 *   backend by then).  Phase 1: once every operation begun before it has
 *   ended, no backend can grant or serve with the old value (a command read
 *   after the signal runs with the new one; outside operations a client
 *   sends only its connection's set-up, which neither takes nor returns a
 *   grant).  But a waiter served before that by a backend with
 *   the old value may belong to a later operation: phase 2 bumps the epoch
 *   again and waits for the operations begun before then to end too.  The
 *   worker serves the waiters on a reload as well; it re-reads the setting
 *   on its next loop, long before two phases of operations end.
 *
 * The monitor samples in one statement every 2 ms: bulkhead_stats of the
 * mg_ workloads, bulkhead_memory (the server), bulkhead_memory_activity()
 * and bulkhead_activity's memory columns.  Per sample:
 *
 * - at each level in enforce mode (mg_a, mg_b, mg_root, mg_c1, mg_c2) with
 *   a bound: memory_granted <= bound + allowance; at the server, when on,
 *   memory_granted (less the monitor's own grant) <= bound + allowance
 *   (the shadow clients' requests, everyone else's floors; a shadow
 *   request may grow past the published one by feedback: the grants mg_sh's
 *   backends hold, read just before and after the server's row, count
 *   when they are larger);
 * - memory_granted >= 0, memory_waiting >= 0 everywhere, memory_waiting at
 *   most the clients that published a statement there; the max_memory
 *   shown is one the tool set and has not retired;
 * - per backend (bulkhead_memory_activity(), bulkhead_activity): granted
 *   <= requested, both >= 0.
 *
 * At the end: every client gone, memory_granted = 0 and memory_waiting =
 * 0 at every level and at the server (the sample's own grant aside),
 * bulkhead_memory_activity() shows no other backend, bulkhead_activity no
 * row of an mg_ workload.  A statement that runs for 20 s (the clients'
 * statement_timeout) hung: a violation.  In a run of 5 s or more, no memory
 * wait, no shrunk statement, no 22012 or no cancel is a tool error (the
 * mix was not exercised).
 *
 * Exit status: 0 without a violation, 1 on a violation, 2 on a set-up or
 * tool error.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <math.h>
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

/*---- the workloads and levels ----*/

enum
{
	W_A, W_B, W_ROOT, W_C1, W_C2, W_SH, W_MARK, NW
};

#define LV_NONE		NW			/* a statement of no workload: the server's */
#define NLV			(NW + 1)
#define L_SERVER	NW			/* lim[L_SERVER]: bulkhead.max_memory */

static const char *const wname[NW] = {
	"mg_a", "mg_b", "mg_root", "mg_c1", "mg_c2", "mg_sh", "mg_marker"
};

#define WORKLOAD_PATTERN "'^mg_'"

static const int wparent[NW] = {-1, -1, -1, W_ROOT, W_ROOT, -1, -1};

/* initial max_memory (kB, -1: none) and memory_timeout (ms, -1: NULL) */
static const int initial_kb[NW] = {8192, 4096, 12288, 8192, -1, 2048, -1};
static const int initial_timeout_ms[NW] = {100, 20, -1, 200, 50, 100, -1};
#define INITIAL_SERVER_KB 49152

/* the homes of operations: the leaves that take permits, and none */
static const int homes[] = {W_A, W_B, W_C1, W_C2, W_SH, LV_NONE};
#define NHOMES ((int) (sizeof(homes) / sizeof(homes[0])))

/* is lv in the subtree of level w (itself included)? */
static bool
in_subtree(int lv, int w)
{
	while (lv >= 0 && lv < NW)
	{
		if (lv == w)
			return true;
		lv = wparent[lv];
	}
	return false;
}

/* levels in enforce mode with statements: checked */
static bool
checked_level(int w)
{
	return w != W_SH && w != W_MARK;
}

/*---- the kinds of statements that may be granted memory ----*/

enum
{
	K_SORT, K_SORT_BIG, K_HASH, K_HASH_BIG, K_FUNC, K_FUNC_FAIL, K_INNER,
	K_DIV0, K_CURSOR, K_HOLD_CURSOR, K_INDEX, K_CHECK, NK
};

static const char *const kname[NK] = {
	"sort", "sort (big)", "hash aggregate", "hash aggregate (big)",
	"function (nested sort)", "function failing inside", "(its inner query)",
	"sort failing (22012)", "cursor", "cursor WITH HOLD", "CREATE INDEX",
	"own-rows check"
};

/* what bulkhead_classify plans for each kind (a representative) */
static const char *const krep[NK] = {
	"SELECT count(*) FROM (SELECT g FROM generate_series(1, 1000) g ORDER BY g DESC) s",
	"SELECT count(*) FROM (SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC) s",
	"SELECT count(*) FROM (SELECT g % 500 AS k, count(*) FROM generate_series(1, 1000) g GROUP BY 1) s",
	"SELECT count(*) FROM (SELECT g % 100000 AS k, count(*) FROM generate_series(1, 200000) g GROUP BY 1) s",
	"SELECT sum(mg_inner(g, 1000, 0)) FROM (SELECT g FROM generate_series(1, 3) g ORDER BY g) s",
	"SELECT sum(mg_inner(g, 1000, 5)) FROM (SELECT g FROM generate_series(1, 3) g ORDER BY g) s",
	"SELECT count(*) FROM (SELECT x / (x - 0) AS y FROM generate_series(1, 1000) x ORDER BY 1 DESC) t",
	"SELECT count(*) FROM (SELECT 1 / (g - 500) AS x FROM generate_series(1, 1000) g ORDER BY 1) s",
	"SELECT g FROM generate_series(1, 1000) g ORDER BY g",
	"SELECT g FROM generate_series(1, 1000) g ORDER BY g",
	"CREATE INDEX mg_tmp_i ON mg_tmp (a)",
	"SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid()"
};

#define CHECK_SQL "SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid()"

/* the work_mem (and maintenance_work_mem) values the clients use, kB */
static const int wm_kb[] = {64, 256, 1024, 4096, 16384};
#define NWM ((int) (sizeof(wm_kb) / sizeof(wm_kb[0])))
static const int mwm_kb[] = {1024, 4096, 16384, 32768};
#define NMWM ((int) (sizeof(mwm_kb) / sizeof(mwm_kb[0])))

static int64_t kfloor[NK];		/* bytes */
static int64_t kfull[NK];		/* the largest request, bytes */

/* statements the clients send that must request nothing */
static const char *const no_memory_sql[] = {
	"SELECT bulkhead_acquire('mg_a')",
	"SELECT bulkhead_acquire_xact('mg_a')",
	"SELECT bulkhead_release('mg_a')",
	"SELECT bulkhead_release_all()",
	"SELECT pg_stat_get_activity(1) IS NOT NULL",
	"SELECT pg_sleep(0.001)",
	"SELECT pg_cancel_backend(1)",
	"UPDATE bulkhead_workload SET max_memory = '1MB', memory_timeout = '1ms' WHERE name = 'mg_a'",
	"UPDATE bulkhead_workload SET max_queued = 1 WHERE name = 'mg_marker'",
	"SELECT pg_reload_conf()",
	"INSERT INTO mg_tmp SELECT generate_series(1, 5000)",
	"DROP INDEX IF EXISTS mg_tmp_i",
	"FETCH 10 FROM mg_x"
};

/*---- shared state ----*/

static const char *conninfo;
static uint64_t seed;
static int	nclients;
static int64_t end_at;
static int	stop_all;

/* one lock for the published floors, the epochs and the limits */
static pthread_mutex_t mlock = PTHREAD_MUTEX_INITIALIZER;

/* What a client has published (under mlock) */
typedef struct Part
{
	int64_t		epoch;			/* its operation's, 0: none under way */
	int64_t		floor[NLV];		/* floors of the statements it may hold */
	int64_t		full[NLV];		/* their requests */
	int64_t		pk_floor[NLV];	/* the highest since the monitor's reset */
	int64_t		pk_full[NLV];
	int			nstmt[NLV];		/* statements published */
	int			pk_nstmt[NLV];
} Part;

static Part *parts;
static int64_t epoch_now = 1;

/* A level's limits possibly in force (kB; -1: none) */
#define MAX_PEND 32
typedef struct Pend
{
	int64_t		kb;
	int64_t		b;				/* retired once no operation before b is left */
	int			phases;			/* epochs still to wait for */
	bool		applied;		/* known to be applied: b is set */
} Pend;

typedef struct Lim
{
	int64_t		cur;
	int			npend;
	Pend		pend[MAX_PEND];
} Lim;

static Lim	lim[NW + 1];		/* [L_SERVER]: bulkhead.max_memory */

/*---- counters ----*/

typedef enum MOut
{
	MO_OK, MO_FULL, MO_TIMEOUT, MO_CANCEL, MO_STMT_TIMEOUT, MO_DIV0, MO_GONE,
	MO_HUNG, MO_OTHER, NMO
} MOut;

static const char *const oname[NMO] = {
	"ok", "53B01", "53B02", "cancelled", "statement_timeout", "22012",
	"killed", "hung", "other"
};

static long n_kind[NK][NMO];	/* memory statements by kind and outcome */
static long n_stmts;			/* every statement the clients sent */
static long n_ops;
static long n_ops_block;
static long n_ops_home[NHOMES];
static long n_errors_paths;
static long n_own_checks;
static long n_reconnects;
static long n_cancels_sent;
static long n_terminates_sent;
static long n_outcome_tc[NOUTCOMES];
static int *client_pid;

enum
{
	CH_W_UP, CH_W_DOWN, CH_W_TO_NONE, CH_W_FROM_NONE, CH_W_TIMEOUT,
	CH_S_UP, CH_S_DOWN, CH_S_OFF, CH_S_ON, NCH
};
static const char *const change_name[NCH] = {
	"workload raised", "workload lowered", "workload to no limit",
	"workload from no limit", "memory_timeout only", "server raised",
	"server lowered", "server off", "server on"
};
static long n_changes[NCH];
static long n_change_wait_ms_max;

static long n_samples;
static long n_bound_checks;
static long n_over_limit;		/* reads past the limit in force (allowed) */
static long n_over_old;			/* ... past the newest, within an older one */
static long n_retired;
static int64_t retire_ms_max;	/* longest from applied to retired */
static int64_t max_excess[NW + 1];	/* bytes over the bound, at most */

enum
{
	V_BOUND, V_SERVER, V_NEGATIVE, V_WAITING, V_SHOWN, V_BACKEND, V_END,
	V_CLIENT, V_HANG, NV
};
static const char *const v_name[NV] = {
	"workload bound", "server bound", "negative figure", "waiting",
	"limit shown", "backend granted > requested", "end", "client", "hang"
};
static long n_viol[NV];

/*---- the published floors ----*/

static void
publish_op_begin(int i)
{
	pthread_mutex_lock(&mlock);
	if (parts[i].epoch == 0)
		parts[i].epoch = epoch_now;
	pthread_mutex_unlock(&mlock);
}

static void
publish_add(int i, int lv, int kind, int sign)
{
	Part	   *p = &parts[i];

	pthread_mutex_lock(&mlock);
	p->floor[lv] += sign * kfloor[kind];
	p->full[lv] += sign * kfull[kind];
	p->nstmt[lv] += sign;
	if (p->floor[lv] > p->pk_floor[lv])
		p->pk_floor[lv] = p->floor[lv];
	if (p->full[lv] > p->pk_full[lv])
		p->pk_full[lv] = p->full[lv];
	if (p->nstmt[lv] > p->pk_nstmt[lv])
		p->pk_nstmt[lv] = p->nstmt[lv];
	pthread_mutex_unlock(&mlock);
}

static void
publish_op_end(int i)
{
	Part	   *p = &parts[i];
	int			lv;

	pthread_mutex_lock(&mlock);
	for (lv = 0; lv < NLV; lv++)
	{
		p->floor[lv] = 0;
		p->full[lv] = 0;
		p->nstmt[lv] = 0;
	}
	p->epoch = 0;
	pthread_mutex_unlock(&mlock);
}

/*---- the limits possibly in force (caller holds mlock) ----*/

/* the highest limit possibly in force, kB; -1: none */
static int64_t
bound_kb(int l)
{
	int64_t		b = lim[l].cur;
	int			k;

	for (k = 0; k < lim[l].npend && b >= 0; k++)
		if (lim[l].pend[k].kb < 0 || lim[l].pend[k].kb > b)
			b = lim[l].pend[k].kb;
	return b;
}

static bool
possibly_in_force(int l, int64_t kb)
{
	int			k;

	if (lim[l].cur == kb)
		return true;
	for (k = 0; k < lim[l].npend; k++)
		if (lim[l].pend[k].kb == kb)
			return true;
	return false;
}

/* the changer, before it writes the new value */
static void
limit_set(int l, int64_t kb)
{
	Lim		   *m = &lim[l];

	if (m->npend == MAX_PEND)
	{
		/* full (a long operation holds them back): merge the two oldest */
		Pend	   *a = &m->pend[0];
		Pend	   *b = &m->pend[1];

		b->kb = (a->kb < 0 || b->kb < 0) ? -1 : (a->kb > b->kb ? a->kb : b->kb);
		memmove(&m->pend[0], &m->pend[1], sizeof(Pend) * (MAX_PEND - 1));
		m->npend--;
	}
	m->pend[m->npend].kb = m->cur;
	m->pend[m->npend].applied = false;
	m->pend[m->npend].phases = 0;
	m->pend[m->npend].b = 0;
	m->npend++;
	m->cur = kb;
}

/* the changer, once the change is known to be applied: the epoch moves on */
static void
limit_applied(int l, int phases)
{
	Lim		   *m = &lim[l];
	int			k;

	for (k = 0; k < m->npend; k++)
		if (!m->pend[k].applied)
		{
			m->pend[k].applied = true;
			m->pend[k].phases = phases;
			m->pend[k].b = ++epoch_now;
		}
}

/* a change that failed: what was set before is in force */
static void
limit_undo(int l)
{
	Lim		   *m = &lim[l];

	if (m->npend > 0 && !m->pend[m->npend - 1].applied)
	{
		m->cur = m->pend[m->npend - 1].kb;
		m->npend--;
	}
}

/* has every operation begun before epoch b ended? */
static bool
drained(int64_t b)
{
	int			i;

	for (i = 0; i < nclients; i++)
		if (parts[i].epoch != 0 && parts[i].epoch < b)
			return false;
	return true;
}

/* the monitor, before each sample: retire the old values drained */
static void
retire_drained(int64_t *applied_at)
{
	int			l;
	int			k;

	for (l = 0; l <= L_SERVER; l++)
	{
		Lim		   *m = &lim[l];

		for (k = 0; k < m->npend;)
		{
			Pend	   *p = &m->pend[k];

			if (p->applied && drained(p->b))
			{
				if (--p->phases > 0)
				{
					p->b = ++epoch_now;
					k++;
					continue;
				}
				{
					int64_t		ms = (now_us() - applied_at[l]) / 1000;

					if (ms > retire_ms_max)
						retire_ms_max = ms;
				}
				n_retired++;
				memmove(p, p + 1, sizeof(Pend) * (m->npend - k - 1));
				m->npend--;
				continue;
			}
			k++;
		}
	}
}

/*---- the clients ----*/

typedef struct MClient
{
	int			id;
	PGconn	   *conn;
	uint64_t	rs;
	int			pid;
	char		err[600];
	char		val[64];
	int			ntuples;
	bool		busy;			/* a 53B01/53B02: pause longer */
	int			ncursors;		/* opened in this operation */
	int			cur_kind[8];
	char		cur_name[8][32];
	bool		cur_open[8];	/* usable (its floor stays published anyway) */
	bool		cur_after_sp[8];	/* declared inside the savepoint */
	int			home;			/* level the op's statements are charged to */
	bool		in_sp;			/* inside the operation's savepoint */
	int			clean_ops;
} MClient;

static MOut
classify_res(MClient *c, PGresult *res, int64_t t0)
{
	ExecStatusType st = PQresultStatus(res);
	const char *state;
	const char *msg;

	c->err[0] = '\0';
	c->val[0] = '\0';
	c->ntuples = 0;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
	{
		if (st == PGRES_TUPLES_OK)
		{
			c->ntuples = PQntuples(res);
			if (c->ntuples > 0 && PQnfields(res) > 0)
				snprintf(c->val, sizeof(c->val), "%s", PQgetvalue(res, 0, 0));
		}
		return MO_OK;
	}
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	msg = PQresultErrorMessage(res);
	snprintf(c->err, sizeof(c->err), "%s: %s", state ? state : "-----", msg ? msg : "");
	if (PQstatus(c->conn) == CONNECTION_BAD || state == NULL)
		return MO_GONE;
	if (strcmp(state, "53B01") == 0)
		return MO_FULL;
	if (strcmp(state, "53B02") == 0)
		return MO_TIMEOUT;
	if (strcmp(state, "57014") == 0)
	{
		if (msg && strstr(msg, "statement timeout"))
			return now_us() - t0 >= (int64_t) (TC_CLIENT_STATEMENT_TIMEOUT_S - 1) * 1000000 ?
				MO_HUNG : MO_STMT_TIMEOUT;
		return MO_CANCEL;
	}
	if (strcmp(state, "22012") == 0)
		return MO_DIV0;
	if (strcmp(state, "57P01") == 0)
		return MO_GONE;
	return MO_OTHER;
}

/* run sql; kind >= 0: a memory statement of that kind (counted) */
static MOut
run(MClient *c, int kind, const char *sql)
{
	int64_t		t0 = now_us();
	PGresult   *res = PQexec(c->conn, sql);
	MOut		o = classify_res(c, res, t0);

	PQclear(res);
	tc_add(&n_stmts, 1);
	if (kind >= 0)
		tc_add(&n_kind[kind][o], 1);
	if (o == MO_FULL || o == MO_TIMEOUT)
		c->busy = true;
	if (o == MO_HUNG)
		tc_violation(V_HANG, "client %d: %s: %s", c->id, sql, c->err);
	else if (o == MO_OTHER)
		tc_tool_error("client %d: %s: %s", c->id, sql, c->err);
	return o;
}

static void
client_connect(MClient *c)
{
	char		sql[1024];

	for (;;)
	{
		PGresult   *res;
		bool		ok;

		c->conn = tc_connect_or_die(conninfo);
		snprintf(sql, sizeof(sql),
				 "SET statement_timeout = '%ds'; SET bulkhead.exempt_superuser = off;"
				 " SET enable_sort = off; SET max_parallel_workers_per_gather = 0;"
				 " SET max_parallel_maintenance_workers = 0; SET jit = off;"
				 " CREATE TEMP TABLE mg_tmp (a int);"
				 " INSERT INTO mg_tmp SELECT generate_series(1, 5000)",
				 TC_CLIENT_STATEMENT_TIMEOUT_S);
		res = PQexec(c->conn, sql);
		ok = PQresultStatus(res) == PGRES_COMMAND_OK;
		PQclear(res);
		if (ok)
			break;
		/* a cancel or a terminate between connecting and setting up: again */
		PQfinish(c->conn);
	}
	c->pid = PQbackendPID(c->conn);
	__atomic_store_n(&client_pid[c->id], c->pid, __ATOMIC_RELAXED);
}

/*
 * The backend went (terminated): reconnect, then wait until the old one
 * is gone (its exit returns its grants) before the operation may end.
 */
static void
client_reconnect(MClient *c)
{
	int			old = c->pid;
	char		sql[96];
	int			tries;

	__atomic_store_n(&client_pid[c->id], 0, __ATOMIC_RELAXED);
	PQfinish(c->conn);
	tc_add(&n_reconnects, 1);
	client_connect(c);
	snprintf(sql, sizeof(sql), "SELECT pg_stat_get_activity(%d) IS NOT NULL", old);
	for (tries = 0; tries < 2000; tries++)
	{
		MOut		o = run(c, -1, sql);

		if (o == MO_OK && c->ntuples == 0)
			return;
		if (o == MO_GONE)
		{
			/* terminated again: the older one is waited for below too */
			__atomic_store_n(&client_pid[c->id], 0, __ATOMIC_RELAXED);
			PQfinish(c->conn);
			tc_add(&n_reconnects, 1);
			client_connect(c);
		}
		tc_sleep_ms(5);
	}
	tc_tool_error("client %d: its old backend %d was still there after 10 s", c->id, old);
}

/* after an error: nothing left open, no permit, no row of its own */
static void
cleanup(MClient *c)
{
	int			tries;

	tc_add(&n_errors_paths, 1);
	for (tries = 0; tries < 100; tries++)
	{
		MOut		o;

		if ((o = run(c, -1, "ROLLBACK")) != MO_OK ||
			(o = run(c, -1, "RESET bulkhead.workload")) != MO_OK ||
			(o = run(c, -1, "CLOSE ALL")) != MO_OK ||
			(o = run(c, -1, "SELECT bulkhead_release_all()")) != MO_OK)
		{
			if (o == MO_GONE)
			{
				client_reconnect(c);
				return;
			}
			continue;			/* a cancel: again */
		}
		/* no permit left: the check is charged to the server only */
		publish_add(c->id, LV_NONE, K_CHECK, 1);
		o = run(c, K_CHECK, CHECK_SQL);
		publish_add(c->id, LV_NONE, K_CHECK, -1);
		if (o == MO_GONE)
		{
			client_reconnect(c);
			return;
		}
		if (o != MO_OK)
			continue;
		tc_add(&n_own_checks, 1);
		if (strcmp(c->val, "0") != 0)
			tc_violation(V_CLIENT, "client %d: after ROLLBACK, CLOSE ALL and bulkhead_release_all, %s rows of its own in bulkhead_activity",
						 c->id, c->val);
		return;
	}
	tc_tool_error("client %d: clean-up did not succeed in 100 tries; reconnecting", c->id);
	client_reconnect(c);
}

/* a memory statement of kind (and its inner query's floor for a function) */
static MOut
mem_step(MClient *c, int kind, const char *sql)
{
	MOut		o;
	bool		nested = kind == K_FUNC || kind == K_FUNC_FAIL;

	publish_add(c->id, c->home, kind, 1);
	if (nested)
		publish_add(c->id, c->home, K_INNER, 1);
	o = run(c, kind, sql);
	/* returned: its executor ended (or its transaction aborted) */
	if (o != MO_GONE)
	{
		publish_add(c->id, c->home, kind, -1);
		if (nested)
			publish_add(c->id, c->home, K_INNER, -1);
	}
	return o;
}

static int
rows_small(MClient *c)
{
	return tc_between(&c->rs, 100, 2000);
}

static int
rows_big(MClient *c)
{
	return tc_between(&c->rs, 20000, 120000);
}

/* one step that needs memory, picked at random (in a block: cursors too) */
static MOut
memory_statement(MClient *c, bool in_block)
{
	char		sql[512];
	int			r = tc_pick(&c->rs, in_block ? 100 : 84);
	int			n;

	if (r < 22)
	{
		bool		big = tc_chance(&c->rs, 35);

		n = big ? rows_big(c) : rows_small(c);
		snprintf(sql, sizeof(sql),
				 "SELECT count(*) FROM (SELECT g FROM generate_series(1, %d) g ORDER BY g DESC) s", n);
		return mem_step(c, big ? K_SORT_BIG : K_SORT, sql);
	}
	if (r < 40)
	{
		bool		big = tc_chance(&c->rs, 35);

		n = big ? rows_big(c) : rows_small(c);
		snprintf(sql, sizeof(sql),
				 "SELECT count(*) FROM (SELECT g %% %d AS k, count(*) FROM generate_series(1, %d) g GROUP BY 1) s",
				 n / 2 + 1, n);
		return mem_step(c, big ? K_HASH_BIG : K_HASH, sql);
	}
	if (r < 56)
	{
		bool		fail = tc_chance(&c->rs, 20);

		n = tc_chance(&c->rs, 30) ? rows_big(c) / 4 : rows_small(c);
		snprintf(sql, sizeof(sql),
				 "SELECT sum(mg_inner(g, %d, %d)) FROM (SELECT g FROM generate_series(1, 3) g ORDER BY g) s",
				 n, fail ? 5 : 0);
		return mem_step(c, fail ? K_FUNC_FAIL : K_FUNC, sql);
	}
	if (r < 66)
	{
		n = tc_chance(&c->rs, 50) ? rows_big(c) : rows_small(c);
		snprintf(sql, sizeof(sql),
				 "SELECT count(*) FROM (SELECT 1 / (g - %d) AS x FROM generate_series(1, %d) g ORDER BY 1) s",
				 n - tc_pick(&c->rs, 50), n);
		return mem_step(c, K_DIV0, sql);
	}
	if (r < 76)
	{
		MOut		o = run(c, -1, "DROP INDEX IF EXISTS mg_tmp_i");

		if (o != MO_OK)
			return o;
		o = mem_step(c, K_INDEX, "CREATE INDEX mg_tmp_i ON mg_tmp (a)");
		if (o != MO_OK)
			return o;
		return run(c, -1, "DROP INDEX mg_tmp_i");
	}
	if (r < 84)
	{
		/* a pause (idle, or idle in the transaction with its cursors) */
		snprintf(sql, sizeof(sql), "SELECT pg_sleep(%d / 1000.0)", tc_between(&c->rs, 1, 15));
		return run(c, -1, sql);
	}
	/* in a block: a cursor (held across the next steps) */
	if (c->ncursors < 8)
	{
		int			k = c->ncursors;
		bool		hold = tc_chance(&c->rs, 30);
		MOut		o;

		snprintf(c->cur_name[k], sizeof(c->cur_name[k]), "mg_cur%d", k);
		n = tc_chance(&c->rs, 40) ? rows_big(c) / 2 : rows_small(c);
		snprintf(sql, sizeof(sql),
				 "DECLARE %s CURSOR %sFOR SELECT g FROM generate_series(1, %d) g ORDER BY g",
				 c->cur_name[k], hold ? "WITH HOLD " : "", n);
		c->cur_kind[k] = hold ? K_HOLD_CURSOR : K_CURSOR;
		/* its floor stays published until it is closed, or the op ends */
		publish_add(c->id, c->home, c->cur_kind[k], 1);
		c->cur_open[k] = true;
		c->cur_after_sp[k] = c->in_sp;
		c->ncursors++;
		o = run(c, c->cur_kind[k], sql);
		if (o != MO_OK)
		{
			c->cur_open[k] = false;
			return o;
		}
		snprintf(sql, sizeof(sql), "FETCH %d FROM %s", tc_between(&c->rs, 1, 50), c->cur_name[k]);
		return run(c, -1, sql);
	}
	return MO_OK;
}

/* fetch from or close an open cursor of this operation */
static MOut
cursor_step(MClient *c)
{
	char		sql[96];
	int			k;
	int			tries;

	for (tries = 0; tries < 8; tries++)
	{
		k = tc_pick(&c->rs, c->ncursors > 0 ? c->ncursors : 1);
		if (c->ncursors > 0 && c->cur_open[k])
			break;
	}
	if (c->ncursors == 0 || !c->cur_open[k])
		return MO_OK;
	if (tc_chance(&c->rs, 50))
	{
		snprintf(sql, sizeof(sql), "FETCH %d FROM %s", tc_between(&c->rs, 1, 200), c->cur_name[k]);
		return run(c, -1, sql);
	}
	snprintf(sql, sizeof(sql), "CLOSE %s", c->cur_name[k]);
	{
		MOut		o = run(c, -1, sql);

		if (o == MO_OK)
		{
			c->cur_open[k] = false;
			publish_add(c->id, c->home, c->cur_kind[k], -1);
		}
		return o;
	}
}

/*
 * After ROLLBACK TO SAVEPOINT (back) the cursors declared inside it are
 * gone, after an error (all) every cursor may be failed; after RELEASE
 * they belong to the transaction.  Their floors stay published until the
 * operation ends (a grant is returned by then).
 */
static void
forget_cursors(MClient *c, bool back, bool all)
{
	int			k;

	for (k = 0; k < c->ncursors; k++)
	{
		if (back && (all || c->cur_after_sp[k]))
			c->cur_open[k] = false;
		c->cur_after_sp[k] = false;
	}
}

static bool
is_error(MOut o)
{
	return o != MO_OK;
}

/*
 * One operation: a home, a way into it, settings, 1-6 steps, the end.
 * Returns MO_OK if it ended cleanly, else the outcome that ended it (the
 * caller cleans up).
 */
static MOut
operation(MClient *c)
{
	char		sql[256];
	int			h = tc_pick(&c->rs, NHOMES);
	int			home = homes[h];
	int			way = home == LV_NONE ? 0 : tc_between(&c->rs, 1, 3);	/* 1 session, 2 xact, 3 auto */
	bool		block = way == 2 || tc_chance(&c->rs, 55);
	int			nsteps = tc_between(&c->rs, 1, block ? 6 : 3);
	int			i;
	MOut		o;

	tc_add(&n_ops_home[h], 1);
	c->home = home;
	c->ncursors = 0;
	c->in_sp = false;
	snprintf(sql, sizeof(sql), "SET work_mem = '%dkB'; SET maintenance_work_mem = '%dkB'",
			 wm_kb[tc_pick(&c->rs, NWM)], mwm_kb[tc_pick(&c->rs, NMWM)]);
	if ((o = run(c, -1, sql)) != MO_OK)
		return o;
	if (way == 1)
	{
		snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire('%s')", wname[home]);
		if ((o = run(c, -1, sql)) != MO_OK)
			return o;
	}
	else if (way == 3)
	{
		snprintf(sql, sizeof(sql), "SET bulkhead.workload = '%s'", wname[home]);
		if ((o = run(c, -1, sql)) != MO_OK)
			return o;
	}
	if (block)
	{
		tc_add(&n_ops_block, 1);
		if ((o = run(c, -1, "BEGIN")) != MO_OK)
			return o;
		if (way == 2)
		{
			snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire_xact('%s')", wname[home]);
			if ((o = run(c, -1, sql)) != MO_OK)
				return o;
		}
		if (tc_chance(&c->rs, 12))
		{
			snprintf(sql, sizeof(sql), "SET LOCAL statement_timeout = '%dms'", tc_between(&c->rs, 5, 40));
			if ((o = run(c, -1, sql)) != MO_OK)
				return o;
		}
	}
	for (i = 0; i < nsteps; i++)
	{
		int			r = tc_pick(&c->rs, 100);

		if (block && !c->in_sp && r < 12)
		{
			if ((o = run(c, -1, "SAVEPOINT mg_sp")) != MO_OK)
				return o;
			c->in_sp = true;
			continue;
		}
		if (block && c->in_sp && r < 20)
		{
			bool		back = tc_chance(&c->rs, 50);

			if ((o = run(c, -1, back ? "ROLLBACK TO SAVEPOINT mg_sp" :
						 "RELEASE SAVEPOINT mg_sp")) != MO_OK)
				return o;
			forget_cursors(c, back, false);
			c->in_sp = false;
			continue;
		}
		if (block && c->ncursors > 0 && r < 35)
			o = cursor_step(c);
		else
			o = memory_statement(c, block);
		if (is_error(o))
		{
			/* inside a savepoint, the transaction goes on after an error */
			if (c->in_sp && o != MO_GONE && o != MO_HUNG && o != MO_OTHER &&
				tc_chance(&c->rs, 70))
			{
				MOut		o2 = run(c, -1, "ROLLBACK TO SAVEPOINT mg_sp");

				if (o2 != MO_OK)
					return o2;
				/* a cursor run in the failed subtransaction failed with it */
				forget_cursors(c, true, true);
				continue;
			}
			return o;
		}
	}
	if (block)
	{
		if ((o = run(c, -1, tc_chance(&c->rs, 70) ? "COMMIT" : "ROLLBACK")) != MO_OK)
			return o;
		/* the cursors WITH HOLD outlive a commit */
		if (c->ncursors > 0 && (o = run(c, -1, "CLOSE ALL")) != MO_OK)
			return o;
	}
	if (way == 1)
	{
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wname[home]);
		if ((o = run(c, -1, sql)) != MO_OK)
			return o;
	}
	else if (way == 3 && (o = run(c, -1, "RESET bulkhead.workload")) != MO_OK)
		return o;
	/* every 10th clean operation: nothing of its own left */
	if (++c->clean_ops % 10 == 0)
	{
		publish_add(c->id, LV_NONE, K_CHECK, 1);
		o = run(c, K_CHECK, CHECK_SQL);
		if (o == MO_GONE)
			return o;
		publish_add(c->id, LV_NONE, K_CHECK, -1);
		if (o != MO_OK)
			return o;
		tc_add(&n_own_checks, 1);
		if (strcmp(c->val, "0") != 0)
			tc_violation(V_CLIENT, "client %d: %s rows of its own in bulkhead_activity after an operation ended cleanly",
						 c->id, c->val);
	}
	return MO_OK;
}

static void *
client_main(void *arg)
{
	MClient		c;

	memset(&c, 0, sizeof(c));
	c.id = (int) (intptr_t) arg;
	c.rs = seed ^ ((uint64_t) (c.id + 1) * UINT64_C(0x9e3779b97f4a7c15));
	if (c.rs == 0)
		c.rs = 1;
	client_connect(&c);
	while (now_us() < end_at)
	{
		MOut		o;

		/* an operation: its statements and, after an error, the clean-up */
		publish_op_begin(c.id);
		o = operation(&c);
		tc_add(&n_ops, 1);
		if (o == MO_GONE)
			client_reconnect(&c);
		else if (o != MO_OK)
			cleanup(&c);
		publish_op_end(c.id);
		tc_sleep_ms(tc_pick(&c.rs, c.busy ? 20 : 3));
		c.busy = false;
	}
	publish_op_begin(c.id);
	cleanup(&c);
	publish_op_end(c.id);
	__atomic_store_n(&client_pid[c.id], 0, __ATOMIC_RELAXED);
	PQfinish(c.conn);
	return NULL;
}

/*---- chaos ----*/

static void *
chaos_main(void *arg)
{
	static const TcChaosWay way = {300, 1200, 10, 40};

	tc_chaos_run(seed, end_at, nclients, &way, &n_cancels_sent, &n_terminates_sent);
	return arg;
}

/*---- the monitor's sample ----*/

typedef struct MRow
{
	bool		present;
	int64_t		kb;				/* max_memory shown, -1: none */
	int64_t		granted;
	int64_t		waiting;
	int64_t		max_queued;
} MRow;

/* at most this many mg_sh backends are read per sample (else: a tool error) */
#define MAX_SH 512

typedef struct Sample
{
	MRow		w[NW];
	MRow		server;
	int64_t		own;			/* the sample's own grant */
	int			others;			/* other backends in bulkhead_memory_activity() */
	int			nsh;			/* mg_sh's backends, read before and after */
	int			sh_pid[MAX_SH];	/* the server's row: each one's largest */
	int64_t		sh_granted[MAX_SH]; /* grant in the two reads */
} Sample;

/* what the changer waits for the monitor to see */
typedef struct Expect
{
	int			level;			/* a workload, L_SERVER, or W_MARK (max_queued) */
	int64_t		value;
} Expect;

static Expect expected;

#define MONITOR_SQL \
	"SELECT 1, workload, max_memory, memory_granted, memory_waiting::int8, max_queued::int8" \
	" FROM bulkhead_stats WHERE workload ~ " WORKLOAD_PATTERN \
	" UNION ALL SELECT 5, pid::text, workload, memory_requested, memory_granted, 0::int8" \
	" FROM bulkhead_memory_activity() WHERE workload = 'mg_sh'" \
	" UNION ALL SELECT 2, 'server', max_memory, memory_granted, memory_waiting::int8, 0::int8" \
	" FROM bulkhead_memory" \
	" UNION ALL SELECT 5, pid::text, workload, memory_requested, memory_granted, 0::int8" \
	" FROM bulkhead_memory_activity() WHERE workload = 'mg_sh'" \
	" UNION ALL SELECT 3, pid::text, workload, memory_requested, memory_granted," \
	" (pid = pg_backend_pid())::int::int8 FROM bulkhead_memory_activity()" \
	" UNION ALL SELECT 4, pid::text, workload, memory_requested, memory_granted, 0::int8" \
	" FROM bulkhead_activity WHERE memory_requested IS NOT NULL OR memory_granted IS NOT NULL"

/* a memory size as a setting shows it (a bare number is kB); NULL: -1 */
static int64_t
parse_kb(const char *text, bool isnull)
{
	char	   *end;
	double		v;

	if (isnull)
		return -1;
	v = strtod(text, &end);
	while (*end == ' ')
		end++;
	if (*end == '\0' || strcmp(end, "kB") == 0)
		return (int64_t) v;
	if (strcmp(end, "B") == 0)
		return (int64_t) (v / 1024);
	if (strcmp(end, "MB") == 0)
		return (int64_t) (v * 1024);
	if (strcmp(end, "GB") == 0)
		return (int64_t) (v * 1024 * 1024);
	if (strcmp(end, "TB") == 0)
		return (int64_t) (v * 1024 * 1024 * 1024);
	tc_tool_error("monitor: cannot read the memory size \"%s\"", text);
	return -2;
}

static bool
read_sample(PGconn *conn, Sample *s, bool report)
{
	PGresult   *res = PQexec(conn, MONITOR_SQL);
	int			i;

	memset(s, 0, sizeof(Sample));
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
		const char *name = PQgetvalue(res, i, 1);
		int64_t		a = PQgetisnull(res, i, 3) ? -1 : strtoll(PQgetvalue(res, i, 3), NULL, 10);
		int64_t		b = PQgetisnull(res, i, 4) ? -1 : strtoll(PQgetvalue(res, i, 4), NULL, 10);
		int64_t		x = strtoll(PQgetvalue(res, i, 5), NULL, 10);

		if (part == 1 || part == 2)
		{
			MRow	   *r;
			int			w = tc_windex(wname, NW, name);

			if (part == 1 && w < 0)
				continue;
			r = part == 1 ? &s->w[w] : &s->server;
			r->present = true;
			r->kb = parse_kb(PQgetvalue(res, i, 2), PQgetisnull(res, i, 2));
			r->granted = a;
			r->waiting = b;
			r->max_queued = x;
		}
		else if (part == 5)
		{
			/* a shadow backend: its largest grant in the two reads */
			int			pid = atoi(name);
			int			k;

			for (k = 0; k < s->nsh && s->sh_pid[k] != pid; k++)
				;
			if (k == MAX_SH)
			{
				tc_tool_error("monitor: more than %d backends in mg_sh", MAX_SH);
				continue;
			}
			if (k == s->nsh)
			{
				s->nsh++;
				s->sh_pid[k] = pid;
				s->sh_granted[k] = 0;
			}
			if (b > s->sh_granted[k])
				s->sh_granted[k] = b;
		}
		else if (part == 3 || part == 4)
		{
			/* a backend: requested a, granted b */
			if (part == 3 && x == 1)
			{
				s->own = b;
				continue;
			}
			if (part == 3)
				s->others++;
			if (report && (a < 0 || b < 0 || b > a))
				tc_violation(V_BACKEND, "%s: backend %s (workload %s): memory_requested %" PRId64
							 ", memory_granted %" PRId64,
							 part == 3 ? "bulkhead_memory_activity()" : "bulkhead_activity",
							 name, PQgetisnull(res, i, 2) ? "none" : PQgetvalue(res, i, 2), a, b);
		}
	}
	PQclear(res);
	return true;
}

static bool
shows_expected(const void *rows, const void *exp_arg)
{
	const Sample *s = rows;
	const Expect *e = exp_arg;

	if (e->level == L_SERVER)
		return s->server.present && s->server.kb == e->value;
	if (e->level == W_MARK)
		return s->w[W_MARK].present && s->w[W_MARK].max_queued == e->value;
	return s->w[e->level].present && s->w[e->level].kb == e->value;
}

static int64_t applied_at[NW + 1];

static void
check_level(int l, const MRow *r, int64_t granted, int64_t bound, int64_t cur,
			int64_t allowance, int waiters_max, const char *what)
{
	const char *name = l == L_SERVER ? "server" : wname[l];

	if (r->granted < 0 || r->waiting < 0)
		tc_violation(V_NEGATIVE, "%s: memory_granted %" PRId64 ", memory_waiting %" PRId64,
					 name, r->granted, r->waiting);
	if (r->waiting > waiters_max)
		tc_violation(V_WAITING, "%s: memory_waiting %" PRId64 " but only %d clients had a statement there",
					 name, r->waiting, waiters_max);
	if (bound < 0)
		return;
	tc_add(&n_bound_checks, 1);
	if (cur >= 0 && granted > cur * 1024)
	{
		tc_add(&n_over_limit, 1);
		if (granted <= bound * 1024 + allowance && granted > cur * 1024 + allowance)
			tc_add(&n_over_old, 1);
	}
	if (granted - bound * 1024 > max_excess[l])
		max_excess[l] = granted - bound * 1024;
	if (granted > bound * 1024 + allowance)
		tc_violation(l == L_SERVER ? V_SERVER : V_BOUND,
					 "%s: memory_granted %" PRId64 " > %s %" PRId64 " kB (the highest limit possibly in force; the newest %" PRId64
					 " kB) + allowance %" PRId64 " (the floors of the statements that may run there)",
					 name, granted, what, bound, cur, allowance);
}

static void *
monitor_main(void *arg)
{
	PGconn	   *conn = tc_connect_or_die(conninfo);
	Sample		s;
	int			i;
	int			l;
	int			lv;

	tc_setup_exec(conn, "SET statement_timeout = '20s';"
				  " SET max_parallel_workers_per_gather = 0; SET jit = off");
	while (!__atomic_load_n(&stop_all, __ATOMIC_RELAXED))
	{
		int64_t		allow[NW + 1] = {0};
		int			nwait[NW + 1] = {0};
		int64_t		bound[NW + 1];
		int64_t		cur[NW + 1];
		bool		shown_ok[NW + 1];
		int64_t		sh_full = 0;
		int64_t		sh_read = 0;

		/* t1: retire what has drained, start the peaks from now */
		pthread_mutex_lock(&mlock);
		retire_drained(applied_at);
		for (i = 0; i < nclients; i++)
			for (lv = 0; lv < NLV; lv++)
			{
				parts[i].pk_floor[lv] = parts[i].floor[lv];
				parts[i].pk_full[lv] = parts[i].full[lv];
				parts[i].pk_nstmt[lv] = parts[i].nstmt[lv];
			}
		pthread_mutex_unlock(&mlock);

		if (!read_sample(conn, &s, true))
		{
			if (PQstatus(conn) == CONNECTION_BAD)
			{
				PQfinish(conn);
				conn = tc_connect_or_die(conninfo);
				tc_setup_exec(conn, "SET statement_timeout = '20s';"
							  " SET max_parallel_workers_per_gather = 0; SET jit = off");
			}
			tc_sleep_ms(10);
			continue;
		}

		/* t2: the peaks over the sample, the limits possibly in force */
		pthread_mutex_lock(&mlock);
		for (i = 0; i < nclients; i++)
		{
			bool		any = false;

			for (lv = 0; lv < NLV; lv++)
			{
				const Part *p = &parts[i];

				if (p->pk_nstmt[lv] <= 0)
					continue;
				any = true;
				for (l = 0; l < NW; l++)
					if (in_subtree(lv, l))
					{
						allow[l] += p->pk_floor[lv];
						nwait[l]++;
					}
				if (lv == W_SH)
					sh_full += p->pk_full[lv];
				else
					allow[L_SERVER] += p->pk_floor[lv];
			}
			if (any)
				nwait[L_SERVER]++;
		}
		/*
		 * A shadow statement counts at the server by its whole request,
		 * which feedback may make larger than the one published (kfull:
		 * worked out before any run): the larger of the published ones and
		 * the grants that mg_sh's backends held in the reads before and
		 * after the server's row (a grant counted there was held in one of
		 * them, unless it began and ended between the two).
		 */
		for (i = 0; i < s.nsh; i++)
			sh_read += s.sh_granted[i];
		allow[L_SERVER] += sh_full > sh_read ? sh_full : sh_read;
		for (l = 0; l <= L_SERVER; l++)
		{
			const MRow *r = l == L_SERVER ? &s.server : &s.w[l];

			bound[l] = bound_kb(l);
			cur[l] = lim[l].cur;
			shown_ok[l] = !r->present || l == W_MARK || possibly_in_force(l, r->kb);
		}
		pthread_mutex_unlock(&mlock);

		tc_add(&n_samples, 1);
		for (l = 0; l <= L_SERVER; l++)
		{
			const MRow *r = l == L_SERVER ? &s.server : &s.w[l];

			if (!r->present)
			{
				tc_tool_error("monitor: no row for %s", l == L_SERVER ? "the server" : wname[l]);
				continue;
			}
			if (!shown_ok[l])
				tc_violation(V_SHOWN, "%s: max_memory shown %" PRId64 " kB, never set or retired (newest %" PRId64 " kB)",
							 l == L_SERVER ? "server" : wname[l], r->kb, cur[l]);
			if (l == L_SERVER)
				check_level(l, r, r->granted - s.own, bound[l], cur[l], allow[l], nwait[l],
							"bulkhead.max_memory");
			else if (checked_level(l))
				check_level(l, r, r->granted, bound[l], cur[l], allow[l], nwait[l], "max_memory");
			else if (r->granted < 0 || r->waiting < 0)
				tc_violation(V_NEGATIVE, "%s: memory_granted %" PRId64 ", memory_waiting %" PRId64,
							 wname[l], r->granted, r->waiting);
		}
		tc_check_seen(shows_expected, &s, &expected);
		tc_sleep_ms(2);
	}
	PQfinish(conn);
	return arg;
}

/*---- the changer ----*/

static void
mem_text(int64_t kb, char *buf, size_t len)
{
	if (kb < 0)
		snprintf(buf, len, "NULL");
	else
		snprintf(buf, len, "'%" PRId64 "kB'", kb);
}

/* wait until the monitor sees e (a tool error after 10 s) */
static bool
wait_seen(int level, int64_t value, const char *what)
{
	Expect		e = {level, value};

	if (!tc_wait_seen(&expected, &e, sizeof(e), &n_change_wait_ms_max))
	{
		tc_tool_error("changer: %s was not seen within 10 s", what);
		return false;
	}
	return true;
}

static void *
changer_main(void *arg)
{
	static const int64_t w_values[] = {512, 1024, 2048, 3072, 4096, 8192, 16384, 32768};
	static const int64_t s_values[] = {4096, 8192, 16384, 32768, 65536};
	static const int timeouts[] = {-1, 0, 5, 20, 50, 100, 300, 1000};
	uint64_t	rs = seed ^ UINT64_C(0x3e3a1);
	PGconn	   *conn = tc_connect_or_die(conninfo);
	char		sql[512];
	char		err[512];
	int64_t		marker = 0;

	if (rs == 0)
		rs = 1;
	while (now_us() < end_at)
	{
		bool		server = tc_chance(&rs, 30);
		int64_t		old;
		int64_t		kb;

		tc_sleep_ms(tc_between(&rs, 100, 400));
		if (now_us() >= end_at)
			break;
		if (server)
		{
			pthread_mutex_lock(&mlock);
			old = lim[L_SERVER].cur;
			pthread_mutex_unlock(&mlock);
			do
				kb = tc_chance(&rs, 12) ? -1 : s_values[tc_pick(&rs, 5)];
			while (kb == old);
			pthread_mutex_lock(&mlock);
			limit_set(L_SERVER, kb);
			pthread_mutex_unlock(&mlock);
			if (kb < 0)
				snprintf(sql, sizeof(sql), "ALTER SYSTEM RESET bulkhead.max_memory");
			else
				snprintf(sql, sizeof(sql), "ALTER SYSTEM SET bulkhead.max_memory = '%" PRId64 "kB'", kb);
			if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK ||
				tc_run(conn, "SELECT pg_reload_conf()", NULL, 0, err, sizeof(err)) != O_OK)
			{
				tc_tool_error("changer: %s: %s", sql, err);
				pthread_mutex_lock(&mlock);
				limit_undo(L_SERVER);
				pthread_mutex_unlock(&mlock);
				continue;
			}
			tc_add(&n_changes[kb < 0 ? CH_S_OFF : old < 0 ? CH_S_ON : kb > old ? CH_S_UP : CH_S_DOWN], 1);
			if (!wait_seen(L_SERVER, kb, sql))
				continue;
			pthread_mutex_lock(&mlock);
			applied_at[L_SERVER] = now_us();
			limit_applied(L_SERVER, 2);
			pthread_mutex_unlock(&mlock);
		}
		else
		{
			int			w = tc_pick(&rs, W_MARK);	/* any but the marker */
			int			t = timeouts[tc_pick(&rs, 8)];
			bool		same = tc_chance(&rs, 10);
			char		text[64];
			char		ttext[32];

			pthread_mutex_lock(&mlock);
			old = lim[w].cur;
			pthread_mutex_unlock(&mlock);
			if (same)
				kb = old;		/* memory_timeout only */
			else
				do
					kb = tc_chance(&rs, 12) ? -1 : w_values[tc_pick(&rs, 8)];
				while (kb == old);
			pthread_mutex_lock(&mlock);
			limit_set(w, kb);
			pthread_mutex_unlock(&mlock);
			mem_text(kb, text, sizeof(text));
			if (t < 0)
				snprintf(ttext, sizeof(ttext), "NULL");
			else
				snprintf(ttext, sizeof(ttext), "'%d ms'", t);
			snprintf(sql, sizeof(sql), "UPDATE bulkhead_workload SET max_memory = %s, memory_timeout = %s"
					 " WHERE name = '%s'", text, ttext, wname[w]);
			if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK)
			{
				tc_tool_error("changer: %s: %s", sql, err);
				pthread_mutex_lock(&mlock);
				limit_undo(w);
				pthread_mutex_unlock(&mlock);
				if (PQstatus(conn) == CONNECTION_BAD)
				{
					PQfinish(conn);
					conn = tc_connect_or_die(conninfo);
				}
				continue;
			}
			tc_add(&n_changes[same ? CH_W_TIMEOUT : kb < 0 ? CH_W_TO_NONE : old < 0 ? CH_W_FROM_NONE :
							  kb > old ? CH_W_UP : CH_W_DOWN], 1);
			if (!wait_seen(w, kb, sql))
				continue;
			/* a later load has run: the one that made this change finished */
			marker = marker % 1000 + 1;
			snprintf(sql, sizeof(sql), "UPDATE bulkhead_workload SET max_queued = %" PRId64
					 " WHERE name = 'mg_marker'", marker);
			if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK)
			{
				tc_tool_error("changer: %s: %s", sql, err);
				continue;
			}
			if (!wait_seen(W_MARK, marker, sql))
				continue;
			pthread_mutex_lock(&mlock);
			applied_at[w] = now_us();
			limit_applied(w, 1);
			pthread_mutex_unlock(&mlock);
		}
	}
	PQfinish(conn);
	return arg;
}

/*---- set-up ----*/

/* bulkhead_classify's request for sql with work_mem (or maintenance) kb */
static int64_t
classify_bytes(PGconn *conn, const char *sql, int kb, bool maintenance)
{
	char		set[128];
	const char *params[1] = {sql};
	PGresult   *res;
	int64_t		v;

	snprintf(set, sizeof(set), "SET %s = '%dkB'", maintenance ? "maintenance_work_mem" : "work_mem", kb);
	tc_setup_exec(conn, set);
	res = PQexecParams(conn, "SELECT memory_requested FROM bulkhead_classify($1)", 1, NULL,
					   params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
	{
		fprintf(stderr, "bulkhead_stress: set-up failed: bulkhead_classify(%s): %s", sql,
				PQresultErrorMessage(res));
		exit(2);
	}
	v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return v;
}

/*
 * Each kind's floor and largest request.  The floor is the request at
 * 64kB (1MB of maintenance_work_mem) of the plan each work_mem the clients
 * use gives: its memory nodes (request / work_mem) at 64kB each; none of
 * these plans has a part that does not shrink (a hashed SetOp or SubPlan).
 */
static void
work_out_floors(PGconn *conn)
{
	int			k;
	int			j;
	unsigned	i;

	tc_setup_exec(conn, "SET enable_sort = off; SET max_parallel_workers_per_gather = 0;"
				  " SET max_parallel_maintenance_workers = 0; SET jit = off");
	tc_setup_exec(conn, "CREATE TEMP TABLE IF NOT EXISTS mg_tmp (a int)");
	for (k = 0; k < NK; k++)
	{
		bool		maint = k == K_INDEX;
		int			n = maint ? NMWM : NWM;

		kfloor[k] = 0;
		kfull[k] = 0;
		for (j = 0; j < n; j++)
		{
			int			kb = maint ? mwm_kb[j] : wm_kb[j];
			int64_t		r = classify_bytes(conn, krep[k], kb, maint);
			int64_t		at_floor = (int64_t) ceil((double) r / kb * (maint ? 1024 : 64));

			if (r > kfull[k])
				kfull[k] = r;
			if (at_floor > kfloor[k])
				kfloor[k] = at_floor;
		}
		if (kfloor[k] <= 0)
		{
			fprintf(stderr, "bulkhead_stress: set-up failed: \"%s\" requests no memory\n", krep[k]);
			exit(2);
		}
	}
	tc_setup_exec(conn, "RESET work_mem; RESET maintenance_work_mem");
	for (i = 0; i < sizeof(no_memory_sql) / sizeof(no_memory_sql[0]); i++)
	{
		int64_t		r;

		if (strncmp(no_memory_sql[i], "FETCH", 5) == 0)
			continue;			/* runs no executor of its own */
		r = classify_bytes(conn, no_memory_sql[i], 16384, false);
		if (r != 0)
		{
			fprintf(stderr, "bulkhead_stress: set-up failed: \"%s\" requests %" PRId64
					" bytes; the tool counts it as none\n", no_memory_sql[i], r);
			exit(2);
		}
	}
	tc_setup_exec(conn, "RESET work_mem");
	printf("floors (largest requests), bytes:");
	for (k = 0; k < NK; k++)
		printf(" %s %" PRId64 " (%" PRId64 ")%s", kname[k], kfloor[k], kfull[k], k < NK - 1 ? "," : "\n");
}

static void
setup(PGconn *conn, int clients)
{
	char		sql[1024];
	char		text[64];
	int			w;

	tc_setup_exec(conn, "ALTER SYSTEM RESET bulkhead.max_memory");
	tc_setup_exec(conn, "SELECT pg_reload_conf()");
	tc_setup_exec(conn, "DELETE FROM bulkhead_workload WHERE parent ~ " WORKLOAD_PATTERN);
	tc_setup_exec(conn, "DELETE FROM bulkhead_workload WHERE name ~ " WORKLOAD_PATTERN);
	tc_setup_exec(conn, "CREATE OR REPLACE FUNCTION mg_inner(i int, n int, bad int) RETURNS bigint"
				  " LANGUAGE plpgsql AS $$ DECLARE r bigint; BEGIN"
				  " SELECT count(*) INTO r FROM (SELECT x / (x - bad) AS y FROM generate_series(1, n) x"
				  " ORDER BY 1 DESC) t; RETURN r + i; END $$");
	for (w = 0; w < NW; w++)
	{
		char		ttext[32];

		mem_text(initial_kb[w], text, sizeof(text));
		if (initial_timeout_ms[w] < 0)
			snprintf(ttext, sizeof(ttext), "NULL");
		else
			snprintf(ttext, sizeof(ttext), "'%d ms'", initial_timeout_ms[w]);
		snprintf(sql, sizeof(sql),
				 "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
				 " max_memory, memory_timeout, mode, parent) VALUES ('%s', %d, %d, '2s', %s, %s, '%s', %s)",
				 wname[w], w == W_ROOT ? 2 * clients + 16 : w == W_MARK ? 1 : clients + 8,
				 w == W_MARK ? 0 : clients, text, ttext, w == W_SH ? "shadow" : "enforce",
				 wparent[w] >= 0 ? "'mg_root'" : "NULL");
		tc_setup_exec(conn, sql);
		lim[w].cur = initial_kb[w];
		lim[w].npend = 0;
	}
	snprintf(sql, sizeof(sql), "SELECT count(*) = %d FROM bulkhead_stats WHERE workload ~ "
			 WORKLOAD_PATTERN, NW);
	tc_setup_wait(conn, sql, "the mg_ workloads were");
	snprintf(sql, sizeof(sql), "ALTER SYSTEM SET bulkhead.max_memory = '%dkB'", INITIAL_SERVER_KB);
	tc_setup_exec(conn, sql);
	tc_setup_exec(conn, "SELECT pg_reload_conf()");
	lim[L_SERVER].cur = INITIAL_SERVER_KB;
	lim[L_SERVER].npend = 0;
	/* the reload reaches this backend at its next command */
	tc_setup_wait(conn, "SELECT current_setting('bulkhead.max_memory') <> '-1'",
				  "bulkhead.max_memory was");
	work_out_floors(conn);
	tc_setup_exec(conn, "SELECT bulkhead_stats_reset()");
}

/*---- the end ----*/

static void
check_end(PGconn *conn, Sample *s)
{
	int			i;
	int			w;
	bool		idle = false;

	for (i = 0; i < 1000 && !idle; i++)
	{
		if (read_sample(conn, s, false))
		{
			idle = s->server.granted - s->own == 0 && s->server.waiting == 0 && s->others == 0;
			for (w = 0; w < NW; w++)
				if (s->w[w].granted != 0 || s->w[w].waiting != 0)
					idle = false;
		}
		if (!idle)
			tc_sleep_ms(10);
	}
	if (!idle)
	{
		for (w = 0; w < NW; w++)
			if (s->w[w].granted != 0 || s->w[w].waiting != 0)
				tc_violation(V_END, "%s: memory_granted %" PRId64 ", memory_waiting %" PRId64
							 " 10 s after the clients ended", wname[w], s->w[w].granted, s->w[w].waiting);
		if (s->server.granted - s->own != 0 || s->server.waiting != 0)
			tc_violation(V_END, "server: memory_granted %" PRId64 " (%" PRId64 " of them this statement's),"
						 " memory_waiting %" PRId64 " 10 s after the clients ended",
						 s->server.granted, s->own, s->server.waiting);
		if (s->others != 0)
			tc_violation(V_END, "bulkhead_memory_activity() shows %d other backends 10 s after the clients ended",
						 s->others);
	}
	tc_no_activity_left(conn, WORKLOAD_PATTERN, V_END);
}

/* the cumulative figures: per workload, and the server's */
static void
print_figures(PGconn *conn, long *waits, long *shrunk)
{
	PGresult   *res = PQexec(conn,
							 "SELECT workload, coalesce(max_memory, '-'), memory_waits, memory_shrunk,"
							 " coalesce(round(memory_wait_p99_ms::numeric, 1)::text, '-'), 0"
							 " FROM bulkhead_stats WHERE workload ~ " WORKLOAD_PATTERN
							 " UNION ALL SELECT 'server', coalesce(max_memory, '-'), memory_waits, memory_shrunk,"
							 " coalesce(round(memory_wait_p99_ms::numeric, 1)::text, '-'), 1 FROM bulkhead_memory"
							 " ORDER BY 6, 1");
	int			i;

	*waits = 0;
	*shrunk = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		tc_tool_error("end: %s", PQresultErrorMessage(res));
		PQclear(res);
		return;
	}
	printf("\n%-10s %10s %9s %9s %9s %12s\n", "level", "max_memory", "waits", "shrunk", "p99 ms",
		   "max excess");
	for (i = 0; i < PQntuples(res); i++)
	{
		const char *name = PQgetvalue(res, i, 0);
		int			w = tc_windex(wname, NW, name);
		int			l = strcmp(name, "server") == 0 ? L_SERVER : w;
		char		excess[32] = "-";

		if (l >= 0 && max_excess[l] > 0)
			snprintf(excess, sizeof(excess), "%" PRId64, max_excess[l]);
		printf("%-10s %10s %9s %9s %9s %12s\n", name, PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
			   PQgetvalue(res, i, 3), PQgetvalue(res, i, 4), excess);
		if (l == L_SERVER)
		{
			/* the server counts every statement's */
			*waits = atol(PQgetvalue(res, i, 2));
			*shrunk = atol(PQgetvalue(res, i, 3));
		}
	}
	PQclear(res);
}

int
memory_stress_main(int clients, int seconds, const char *conninfo_arg, uint64_t seed_arg)
{
	PGconn	   *conn;
	pthread_t  *threads;
	pthread_t	monitor;
	pthread_t	changer;
	pthread_t	chaos;
	int			i;
	int			k;
	long		nviol = 0;
	long		nchanges = 0;
	long		mem_stmts = 0;
	long		by_outcome[NMO] = {0};
	long		waits;
	long		shrunk;
	double		runtime;
	Sample		s;

	conninfo = conninfo_arg;
	client_pid = calloc(clients, sizeof(int));
	parts = calloc(clients, sizeof(Part));
	tc_init(TC_HOLDS, conninfo, n_viol, v_name, V_HANG, V_CLIENT, n_outcome_tc,
			client_pid, &n_reconnects);
	nclients = clients;
	seed = seed_arg ? seed_arg : ((uint64_t) time(NULL) ^ ((uint64_t) getpid() << 20));
	conn = tc_connect_or_die(conninfo);
	setup(conn, clients);
	printf("memory mode: %d clients, %d s, seed %" PRIu64 "\n", clients, seconds, seed);
	fflush(stdout);

	threads = calloc(clients, sizeof(pthread_t));
	tc_t_start = now_us();
	end_at = tc_t_start + (int64_t) seconds * 1000000;
	/* the changer and chaos connect before the clients crowd the server */
	pthread_create(&monitor, NULL, monitor_main, NULL);
	pthread_create(&changer, NULL, changer_main, NULL);
	pthread_create(&chaos, NULL, chaos_main, NULL);
	tc_sleep_ms(200);
	for (i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, client_main, (void *) (intptr_t) i);
	pthread_join(chaos, NULL);
	pthread_join(changer, NULL);
	for (i = 0; i < clients; i++)
		pthread_join(threads[i], NULL);
	runtime = (now_us() - tc_t_start) / 1e6;
	/* the monitor's own statement is charged to the server: stop it first */
	__atomic_store_n(&stop_all, 1, __ATOMIC_RELAXED);
	pthread_join(monitor, NULL);
	check_end(conn, &s);
	print_figures(conn, &waits, &shrunk);
	/* later modes run without a server limit */
	tc_setup_exec(conn, "ALTER SYSTEM RESET bulkhead.max_memory");
	tc_setup_exec(conn, "SELECT pg_reload_conf()");
	PQfinish(conn);

	for (k = 0; k < NK; k++)
		for (i = 0; i < NMO; i++)
		{
			by_outcome[i] += n_kind[k][i];
			mem_stmts += n_kind[k][i];
		}
	for (i = 0; i < NCH; i++)
		nchanges += n_changes[i];
	for (i = 0; i < NV; i++)
		nviol += n_viol[i];
	printf("\noperations: %ld (%.0f/s), %ld in a transaction block; per home:", n_ops, n_ops / runtime,
		   n_ops_block);
	for (i = 0; i < NHOMES; i++)
		printf(" %s %ld%s", homes[i] == LV_NONE ? "none" : wname[homes[i]], n_ops_home[i],
			   i < NHOMES - 1 ? "," : "\n");
	printf("statements: %ld sent, %ld that may be granted memory:", n_stmts, mem_stmts);
	for (i = 0; i < NMO; i++)
		printf(" %s %ld%s", oname[i], by_outcome[i], i < NMO - 1 ? "," : "\n");
	printf("per kind: ok / 53B01 / 53B02 / cancelled / statement_timeout / 22012 / killed / other\n");
	for (k = 0; k < NK; k++)
	{
		if (k == K_INNER)
			continue;
		printf("  %-26s %7ld %6ld %6ld %6ld %6ld %6ld %6ld %6ld\n", kname[k], n_kind[k][MO_OK],
			   n_kind[k][MO_FULL], n_kind[k][MO_TIMEOUT], n_kind[k][MO_CANCEL],
			   n_kind[k][MO_STMT_TIMEOUT], n_kind[k][MO_DIV0], n_kind[k][MO_GONE],
			   n_kind[k][MO_HUNG] + n_kind[k][MO_OTHER]);
	}
	printf("clean-ups after an error %ld; own-rows checks %ld\n", n_errors_paths, n_own_checks);
	printf("chaos: %ld cancels, %ld terminations sent; %ld reconnects\n",
		   n_cancels_sent, n_terminates_sent, n_reconnects);
	printf("limit changes: %ld:", nchanges);
	for (i = 0; i < NCH; i++)
		printf(" %s %ld%s", change_name[i], n_changes[i], i < NCH - 1 ? "," : "");
	printf(" (longest wait for the monitor to see one %ld ms)\n", n_change_wait_ms_max);
	printf("monitor: %ld samples, %ld bound checks, %ld reads over the newest limit (%ld of them past it"
		   " by more than the allowance, within an older one not yet retired), %ld old limits retired"
		   " (the longest %" PRId64 " ms after it was applied)\n",
		   n_samples, n_bound_checks, n_over_limit, n_over_old, n_retired, retire_ms_max);
	printf("memory: %ld waits, %ld shrunk (server's figures)\n", waits, shrunk);
	if (seconds >= 5 && (waits == 0 || shrunk == 0 || by_outcome[MO_DIV0] == 0 ||
						 by_outcome[MO_CANCEL] == 0))
		tc_tool_error("the run saw no memory wait (%ld), no shrunk statement (%ld), no 22012 (%ld) or no cancel (%ld)",
					  waits, shrunk, by_outcome[MO_DIV0], by_outcome[MO_CANCEL]);
	printf("violations: %ld", nviol);
	for (i = 0; i < NV; i++)
		if (n_viol[i])
			printf("; %s %ld", v_name[i], n_viol[i]);
	printf("\n");
	if (tc_n_tool_errors)
		printf("tool errors: %ld\n", tc_n_tool_errors);
	printf("runtime: %.1f s\n", runtime);
	printf("summary: %ld operations, %ld statements (%ld memory), %ld waits, %ld shrunk, %ld cancels,"
		   " %ld terminations, %ld limit changes, %ld violations\n",
		   n_ops, n_stmts, mem_stmts, waits, shrunk, n_cancels_sent, n_terminates_sent, nchanges, nviol);
	if (nviol > 0)
		return 1;
	return tc_n_tool_errors > 0 ? 2 : 0;
}
