/*-------------------------------------------------------------------------
 *
 * tree_common.c
 *	  Helpers shared by the budgets, holds, tenants and lanes modes of
 *	  bulkhead_stress (budget_modes.c, hold_modes.c, tenant_modes.c,
 *	  lane_modes.c); see tree_common.h.
 *
 *-------------------------------------------------------------------------
 */
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

int64_t		tc_t_start;
long		tc_n_tool_errors;

/* What tc_init was given */
static struct
{
	TcKind		kind;
	const char *conninfo;
	long	   *n_viol;
	const char *const *v_name;
	int			v_hang;
	int			v_client;
	long	   *n_outcome;
	int		   *client_pid;
	long	   *n_reconnects;
}			tc_mode;

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

void
tc_init(TcKind kind, const char *conninfo, long *n_viol,
		const char *const *v_name, int v_hang, int v_client,
		long *n_outcome, int *client_pid, long *n_reconnects)
{
	tc_mode.kind = kind;
	tc_mode.conninfo = conninfo;
	tc_mode.n_viol = n_viol;
	tc_mode.v_name = v_name;
	tc_mode.v_hang = v_hang;
	tc_mode.v_client = v_client;
	tc_mode.n_outcome = n_outcome;
	tc_mode.client_pid = client_pid;
	tc_mode.n_reconnects = n_reconnects;
}

long
tc_add(long *counter, long n)
{
	return __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

double
tc_elapsed_s(void)
{
	return (now_us() - tc_t_start) / 1e6;
}

/* one line: "[time] what kind: message", whole among the threads' */
static void
report(const char *what, const char *kind, const char *fmt, va_list ap)
{
	pthread_mutex_lock(&report_lock);
	printf("[%8.3f s] %s%s: ", tc_elapsed_s(), what, kind);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	pthread_mutex_unlock(&report_lock);
}

void
tc_violation(int kind, const char *fmt,...)
{
	va_list		ap;
	long		n = tc_add(&tc_mode.n_viol[kind], 1);

	if (n > TC_MAX_SHOWN)
		return;
	va_start(ap, fmt);
	report("VIOLATION ", tc_mode.v_name[kind], fmt, ap);
	va_end(ap);
}

void
tc_tool_error(const char *fmt,...)
{
	va_list		ap;
	long		n = tc_add(&tc_n_tool_errors, 1);

	if (n > TC_MAX_SHOWN)
		return;
	va_start(ap, fmt);
	report("TOOL ERROR", "", fmt, ap);
	va_end(ap);
}

uint64_t
tc_rng(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

int
tc_pick(uint64_t *s, int n)
{
	return n <= 1 ? 0 : (int) (tc_rng(s) % (uint64_t) n);
}

int
tc_between(uint64_t *s, int lo, int hi)
{
	return hi <= lo ? lo : lo + tc_pick(s, hi - lo + 1);
}

bool
tc_chance(uint64_t *s, int pct)
{
	return tc_pick(s, 100) < pct;
}

void
tc_sleep_ms(int ms)
{
	if (ms > 0)
		usleep((useconds_t) ms * 1000);
}

int
tc_windex(const char *const *names, int n, const char *name)
{
	int			w;

	for (w = 0; w < n; w++)
		if (strcmp(names[w], name) == 0)
			return w;
	return -1;
}

/* the clients' ROLLBACK outside a transaction warns: not on our output */
static void
quiet(void *arg, const char *message)
{
}

PGconn *
tc_connect_or_die(const char *conninfo)
{
	int			tries;

	for (tries = 0; tries < 50; tries++)
	{
		PGconn	   *conn = PQconnectdb(conninfo);

		if (PQstatus(conn) == CONNECTION_OK)
		{
			PQsetNoticeProcessor(conn, quiet, NULL);
			return conn;
		}
		if (tries == 49)
		{
			fprintf(stderr, "bulkhead_stress: connection failed: %s", PQerrorMessage(conn));
			exit(2);
		}
		PQfinish(conn);
		tc_sleep_ms(100);
	}
	return NULL;
}

void
tc_setup_exec(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "bulkhead_stress: set-up failed: %s: %s", sql, PQresultErrorMessage(res));
		exit(2);
	}
	PQclear(res);
}

void
tc_setup_wait(PGconn *conn, const char *sql, const char *what)
{
	int			i;

	for (i = 0; i < 1000; i++)
	{
		PGresult   *res = PQexec(conn, sql);
		bool		ok = PQresultStatus(res) == PGRES_TUPLES_OK &&
			strcmp(PQgetvalue(res, 0, 0), "t") == 0;

		PQclear(res);
		if (ok)
			return;
		tc_sleep_ms(10);
	}
	fprintf(stderr, "bulkhead_stress: set-up failed: %s not loaded\n", what);
	exit(2);
}

void
tc_no_activity_left(PGconn *conn, const char *pattern, int kind)
{
	char		sql[256];
	PGresult   *res;

	snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM bulkhead_activity WHERE workload ~ %s", pattern);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		tc_tool_error("end: %s", PQresultErrorMessage(res));
	else if (atoi(PQgetvalue(res, 0, 0)) != 0)
		tc_violation(kind, "%s rows of bulkhead_activity left after the clients ended",
					 PQgetvalue(res, 0, 0));
	PQclear(res);
}

/*---- the clients' statements ----*/

/*
 * Run sql; classify the result.  With val, the first column of the first
 * row (if any) is copied there; with val2, the second.  In the holds mode a
 * statement_timeout that fired after less than the clients' own 20 s is a
 * guard's (after a move or a direct acquire); one after 20 s is a hang.  In
 * the budgets mode no guard is set: every statement_timeout is a hang.
 */
Outcome
tc_run2(PGconn *conn, const char *sql, char *val, char *val2, size_t vallen,
		char *err, size_t errlen)
{
	int64_t		t0 = now_us();
	PGresult   *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	const char *state;
	const char *msg;
	Outcome		o;

	if (val)
		val[0] = '\0';
	if (val2)
		val2[0] = '\0';
	if (err)
		err[0] = '\0';
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
	{
		if (val && st == PGRES_TUPLES_OK && PQntuples(res) > 0)
			snprintf(val, vallen, "%s", PQgetvalue(res, 0, 0));
		if (val2 && st == PGRES_TUPLES_OK && PQntuples(res) > 0 && PQnfields(res) > 1)
			snprintf(val2, vallen, "%s", PQgetisnull(res, 0, 1) ? "(null)" : PQgetvalue(res, 0, 1));
		PQclear(res);
		return O_OK;
	}
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	msg = PQresultErrorMessage(res);
	if (err)
		snprintf(err, errlen, "%s: %s", state ? state : "-----", msg ? msg : "");
	if (PQstatus(conn) == CONNECTION_BAD || state == NULL)
		o = O_GONE;
	else if (strcmp(state, "53B01") == 0)
		o = O_FULL;
	else if (strcmp(state, "53B02") == 0)
		o = O_TIMEOUT;
	else if (strcmp(state, "57014") == 0)
	{
		if (msg && strstr(msg, "statement timeout"))
			o = tc_mode.kind == TC_BUDGETS ||
				now_us() - t0 >= (int64_t) (TC_CLIENT_STATEMENT_TIMEOUT_S - 1) * 1000000 ?
				O_HUNG : O_GUARD;
		else
			o = O_CANCEL;
	}
	else if (tc_mode.kind == TC_BUDGETS && strcmp(state, "40P01") == 0)
		o = O_DEADLOCK;
	else if (tc_mode.kind == TC_BUDGETS && strcmp(state, "42809") == 0)
		o = O_WRONGTYPE;
	else if (strcmp(state, "57P01") == 0)
		o = O_GONE;
	else
		o = O_OTHER;
	PQclear(res);
	return o;
}

Outcome
tc_run(PGconn *conn, const char *sql, char *val, size_t vallen, char *err, size_t errlen)
{
	return tc_run2(conn, sql, val, NULL, vallen, err, errlen);
}

Outcome
tc_step2(TcClient *c, const char *sql, char *val, char *val2, size_t vallen)
{
	char		err[512];
	Outcome		o = tc_run2(c->conn, sql, val, val2, vallen, err, sizeof(err));

	tc_add(&tc_mode.n_outcome[o], 1);
	if (o == O_HUNG)
		tc_violation(tc_mode.v_hang, "client %d: %s: %s", c->id, sql, err);
	else if (o == O_OTHER)
		tc_tool_error("client %d: %s: %s", c->id, sql, err);
	return o;
}

Outcome
tc_step(TcClient *c, const char *sql)
{
	return tc_step2(c, sql, NULL, NULL, 0);
}

void
tc_client_connect(TcClient *c)
{
	char		err[512];
	char		sql[96];

	snprintf(sql, sizeof(sql), "SET statement_timeout = '%ds'", TC_CLIENT_STATEMENT_TIMEOUT_S);
	for (;;)
	{
		c->conn = tc_connect_or_die(tc_mode.conninfo);
		c->gated = false;
		if (tc_run(c->conn, "SET bulkhead.exempt_superuser = off", NULL, 0, err, sizeof(err)) == O_OK &&
			tc_run(c->conn, sql, NULL, 0, err, sizeof(err)) == O_OK)
			break;
		/* a terminate or a cancel between connecting and setting up: again */
		PQfinish(c->conn);
	}
	__atomic_store_n(&tc_mode.client_pid[c->id], PQbackendPID(c->conn), __ATOMIC_RELAXED);
}

void
tc_client_reconnect(TcClient *c)
{
	__atomic_store_n(&tc_mode.client_pid[c->id], 0, __ATOMIC_RELAXED);
	PQfinish(c->conn);
	tc_add(tc_mode.n_reconnects, 1);
	tc_client_connect(c);
}

/* Returns only once done (reconnecting if the backend went) */
void
tc_client_cleanup(TcClient *c)
{
	int			tries;
	char		val[64];
	char		err[512];

	for (tries = 0; tries < 100; tries++)
	{
		Outcome		o;

		if ((o = tc_run(c->conn, "ROLLBACK", NULL, 0, err, sizeof(err))) != O_OK)
			goto retry;
		if (c->gated)
		{
			if ((o = tc_run(c->conn, "RESET bulkhead.workload", NULL, 0, err, sizeof(err))) != O_OK)
				goto retry;
			c->gated = false;
		}
		if ((o = tc_run(c->conn, "SELECT bulkhead_release_all()", NULL, 0, err, sizeof(err))) != O_OK)
			goto retry;
		if ((o = tc_run(c->conn, "SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid()",
						val, sizeof(val), err, sizeof(err))) != O_OK)
			goto retry;
		if (strcmp(val, "0") != 0)
			tc_violation(tc_mode.v_client, "client %d: after ROLLBACK and bulkhead_release_all, %s rows of its own in bulkhead_activity",
						 c->id, val);
		return;
retry:
		if (o == O_GONE)
		{
			tc_client_reconnect(c);
			return;
		}

		/*
		 * A cancel (the chaos thread's, a late one of the worker), the
		 * gate's automatic permit refused, a guard's timeout: again
		 */
		if (o != O_CANCEL && o != O_FULL && o != O_TIMEOUT && o != O_GUARD)
			tc_tool_error("client %d: clean-up: %s", c->id, err);
	}
	tc_tool_error("client %d: clean-up did not succeed in 100 tries; reconnecting", c->id);
	tc_client_reconnect(c);
}

int
tc_own_rows(TcClient *c, Outcome *o)
{
	char		val[64];

	*o = tc_step2(c, "SELECT count(*) FROM bulkhead_activity WHERE pid = pg_backend_pid()",
				  val, NULL, sizeof(val));
	return *o == O_OK ? atoi(val) : -1;
}

/*---- the client and chaos threads ----*/

void
tc_client_run(int id, uint64_t seed, int64_t end_at, const TcClientWay *way)
{
	TcClient	c;
	int			ops = 0;

	memset(&c, 0, sizeof(c));
	c.id = id;
	c.rs = seed ^ ((uint64_t) (c.id + 1) * UINT64_C(0x9e3779b97f4a7c15));
	if (c.rs == 0)
		c.rs = 1;
	tc_client_connect(&c);
	while (now_us() < end_at)
	{
		Outcome		o = way->op(&c);

		if (o == O_GONE)
			tc_client_reconnect(&c);
		else if (o != O_OK)
			tc_client_cleanup(&c);
		else if (++ops % way->check_every == 0)
		{
			/* now and then: nothing held after a clean operation */
			Outcome		o2;
			int			n = tc_own_rows(&c, &o2);

			if (o2 == O_OK && n != 0)
				tc_violation(tc_mode.v_client, "client %d: %d rows of its own in bulkhead_activity after an operation ended cleanly",
							 c.id, n);
			else if (o2 == O_GONE)
				tc_client_reconnect(&c);
		}
		if (o == O_FULL || o == O_TIMEOUT)
			tc_sleep_ms(tc_pick(&c.rs, way->pause_busy_ms + 1));
		else
			tc_sleep_ms(tc_pick(&c.rs, way->pause_ms + 1));
	}
	/* end: give back everything, check, leave */
	tc_client_cleanup(&c);
	__atomic_store_n(&tc_mode.client_pid[c.id], 0, __ATOMIC_RELAXED);
	PQfinish(c.conn);
}

void
tc_chaos_run(uint64_t seed, int64_t end_at, int nclients,
			 const TcChaosWay *way, long *n_cancels_sent,
			 long *n_terminates_sent)
{
	uint64_t	rs = seed ^ UINT64_C(0xc4a05);
	PGconn	   *conn = tc_connect_or_die(tc_mode.conninfo);
	int64_t		next_terminate = now_us() +
		tc_between(&rs, way->terminate_min_ms, way->terminate_max_ms) * 1000;
	char		err[512];

	if (rs == 0)
		rs = 1;
	while (now_us() < end_at)
	{
		int			i = tc_pick(&rs, nclients);
		int			pid = __atomic_load_n(&tc_mode.client_pid[i], __ATOMIC_RELAXED);
		bool		terminate = now_us() >= next_terminate;
		char		sql[96];

		if (pid != 0)
		{
			snprintf(sql, sizeof(sql), "SELECT %s(%d)",
					 terminate ? "pg_terminate_backend" : "pg_cancel_backend", pid);
			if (tc_run(conn, sql, NULL, 0, err, sizeof(err)) != O_OK)
			{
				tc_tool_error("chaos: %s: %s", sql, err);
				PQfinish(conn);
				conn = tc_connect_or_die(tc_mode.conninfo);
			}
			tc_add(terminate ? n_terminates_sent : n_cancels_sent, 1);
			if (terminate)
				next_terminate = now_us() +
					tc_between(&rs, way->terminate_min_ms, way->terminate_max_ms) * 1000;
		}
		tc_sleep_ms(tc_between(&rs, way->pause_min_ms, way->pause_max_ms));
	}
	PQfinish(conn);
}

/*---- the changer's change waiting to be seen by the monitor ----*/

static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_cond = PTHREAD_COND_INITIALIZER;
static bool pending;			/* the mode's expected not yet seen */

bool
tc_wait_seen(void *expected, const void *change, size_t len, long *wait_ms_max)
{
	struct timespec deadline;
	int64_t		t0 = now_us();
	bool		seen;
	long		ms;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	pthread_mutex_lock(&sync_lock);
	memcpy(expected, change, len);
	pending = true;
	while (pending)
		if (pthread_cond_timedwait(&sync_cond, &sync_lock, &deadline) != 0)
			break;
	seen = !pending;
	pending = false;
	pthread_mutex_unlock(&sync_lock);
	ms = (long) ((now_us() - t0) / 1000);
	if (ms > *wait_ms_max)
		*wait_ms_max = ms;
	return seen;
}

void
tc_check_seen(bool (*shows) (const void *rows, const void *expected),
			  const void *rows, const void *expected)
{
	pthread_mutex_lock(&sync_lock);
	if (pending && shows(rows, expected))
	{
		pending = false;
		pthread_cond_signal(&sync_cond);
	}
	pthread_mutex_unlock(&sync_lock);
}
