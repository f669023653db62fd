/*-------------------------------------------------------------------------
 *
 * deadlock_modes.c
 *	  The deadlock modes of bulkhead_stress (-D nocycle | -D cycle): one
 *	  thread per client (or per pair of clients), blocking libpq calls.
 *
 * nocycle: no cycle can form, and no 40P01 may be seen.  Each client runs
 *	 transactions that take transaction permits of one or more of the
 *	 workloads dl_nc_0 < dl_nc_1 < dl_nc_2, always in that order, and only
 *	 then lock rows of dl_rows, always in ascending id order, hold them a
 *	 while, and commit.  Every wait is for a resource ranked above all that
 *	 the waiter holds (workloads by index, then rows by id), so the wait
 *	 graph has no cycle.  The limits are small against the number of
 *	 clients, so waits in the queues last far longer than deadlock_timeout
 *	 (50 ms), and holders wait for other holders' row locks: the deadlock
 *	 check runs all the time in a graph with long chains, and must never
 *	 report.  A 40P01 is a violation.
 *
 * cycle: every cycle built is broken, with one victim.  Each thread drives
 *	 a pair of connections and builds, in turn, a lock <-> permit cycle
 *	 (A holds the permit of dl_cy_<g>_1, B has locked row 100 + <g>; B
 *	 queues for the permit and A's UPDATE of the row closes the cycle, or
 *	 A's UPDATE waits and B's acquire closes it: B must fail either way)
 *	 and a permit <-> permit cycle (A holds _1 and queues for _2, B holds _2
 *	 and closes the cycle by queuing for _1: exactly one of them fails).
 *	 Both closing steps wait until the first waiter is queued, so a cycle
 *	 forms every time.  A cycle with no victim or two is a violation, as is
 *	 a break slower than 5 s.
 *
 * Both modes end by checking, for their workloads, that nothing is running
 * or queued, that acquired = released, and (nocycle) that deadlocks is 0 or
 * (cycle) that it equals the number of victims.
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
#include <unistd.h>

#include <libpq-fe.h>

#include "deadlock_modes.h"

#define NC_WORKLOADS	3
#define NC_ROWS			16
#define DEADLOCK_TIMEOUT_MS 50
#define BREAK_LIMIT_US	5000000

static const char *conninfo;
static int64_t end_at;

/* counters, under counters_lock */
static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;
static long n_transactions;
static long n_deadlocks;		/* 40P01 seen */
static long n_other_errors;
static long n_cycles;
static long n_victims;
static long n_violations;
static long n_tool_errors;
static int64_t max_break_us;
static int64_t sum_break_us;

static void
count(long *counter, long n)
{
	pthread_mutex_lock(&counters_lock);
	*counter += n;
	pthread_mutex_unlock(&counters_lock);
}

static void
complain(long *counter, const char *what, const char *fmt,...)
{
	va_list		ap;

	pthread_mutex_lock(&counters_lock);
	(*counter)++;
	if (*counter <= 20)
	{
		fprintf(stderr, "%s: ", what);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&counters_lock);
}

/* per-thread xorshift64* */
static uint64_t
rng(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * UINT64_C(2685821657736338717);
}

static PGconn *
connect_db(void)
{
	PGconn	   *conn = PQconnectdb(conninfo);
	PGresult   *res;

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "connection failed: %s", PQerrorMessage(conn));
		exit(2);
	}
	res = PQexec(conn, "SET deadlock_timeout = '50ms'");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "SET deadlock_timeout failed: %s", PQerrorMessage(conn));
		exit(2);
	}
	PQclear(res);
	return conn;
}

/* The SQLSTATE of a failed result, "" when it succeeded */
static const char *
sqlstate_of(PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);
	const char *code;

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return "";
	code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	return code ? code : "?????";
}

/* Run sql; returns its SQLSTATE ("" on success) in buf */
static void
run(PGconn *conn, const char *sql, char *state)
{
	PGresult   *res = PQexec(conn, sql);

	strcpy(state, sqlstate_of(res));
	if (state[0] != '\0' && strcmp(state, "40P01") != 0 && strcmp(state, "25P02") != 0)
		complain(&n_tool_errors, "unexpected error", "%s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
}

/* Run sql, which must succeed; returns the first value as an integer */
static long
run_value(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long		v = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
		complain(&n_tool_errors, "unexpected error", "%s: %s", sql, PQresultErrorMessage(res));
	else if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return v;
}

/* The result of a query sent with PQsendQuery: its SQLSTATE */
static void
finish(PGconn *conn, char *state)
{
	PGresult   *res;

	state[0] = '\0';
	while ((res = PQgetResult(conn)) != NULL)
	{
		if (state[0] == '\0')
			strcpy(state, sqlstate_of(res));
		PQclear(res);
	}
}

/*---- nocycle ----*/

static void *
nocycle_client(void *arg)
{
	uint64_t	state = (uint64_t) (uintptr_t) arg * UINT64_C(0x9e3779b97f4a7c15) + 1;
	PGconn	   *conn = connect_db();
	char		sql[256];
	char		st[6];

	while (now_us() < end_at)
	{
		int			mask = 1 + (int) (rng(&state) % ((1 << NC_WORKLOADS) - 1));
		int			r1 = (int) (rng(&state) % NC_ROWS) + 1;
		int			r2 = (int) (rng(&state) % NC_ROWS) + 1;
		int			hold_ms = (int) (rng(&state) % 40);
		bool		failed = false;
		int			w;

		run(conn, "BEGIN", st);
		/* permits in the global order of the workloads */
		for (w = 0; w < NC_WORKLOADS && !failed; w++)
		{
			if (!(mask & (1 << w)))
				continue;
			snprintf(sql, sizeof(sql), "SELECT bulkhead_acquire_xact('dl_nc_%d', '60s')", w);
			run(conn, sql, st);
			failed = st[0] != '\0';
		}
		/* then rows, in ascending order; hold them a while */
		if (!failed)
		{
			/* LockRows runs above the Sort: locked in ascending id order */
			snprintf(sql, sizeof(sql),
					 "SELECT count(*) FROM (SELECT id FROM dl_rows WHERE id IN (%d, %d) ORDER BY id FOR UPDATE) s",
					 r1 < r2 ? r1 : r2, r1 < r2 ? r2 : r1);
			run(conn, sql, st);
			failed = st[0] != '\0';
		}
		if (!failed)
		{
			snprintf(sql, sizeof(sql), "SELECT pg_sleep(%f)", hold_ms / 1000.0);
			run(conn, sql, st);
			failed = st[0] != '\0';
		}
		if (failed && strcmp(st, "40P01") == 0)
		{
			count(&n_deadlocks, 1);
			complain(&n_violations, "VIOLATION", "40P01 in nocycle mode (no cycle can form)");
		}
		else if (failed)
			count(&n_other_errors, 1);
		run(conn, failed ? "ROLLBACK" : "COMMIT", st);
		if (!failed)
			count(&n_transactions, 1);
	}
	PQfinish(conn);
	return NULL;
}

/*---- cycle ----*/

/* Wait until backend pid is queued for a permit (asked over conn) */
static void
await_queued(PGconn *conn, int pid)
{
	char		sql[256];
	int			i;

	snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM bulkhead_activity WHERE pid = %d AND state = 'queued'", pid);
	for (i = 0; i < 5000; i++)
	{
		if (run_value(conn, sql) == 1)
			return;
		usleep(1000);
	}
	complain(&n_tool_errors, "tool error", "process %d did not queue within 5 s", pid);
}

/* Wait until backend pid waits for a lock (asked over conn) */
static void
await_lock_wait(PGconn *conn, int pid)
{
	char		sql[256];
	int			i;

	snprintf(sql, sizeof(sql), "SELECT cardinality(pg_blocking_pids(%d))", pid);
	for (i = 0; i < 5000; i++)
	{
		if (run_value(conn, sql) > 0)
			return;
		usleep(1000);
	}
	complain(&n_tool_errors, "tool error", "process %d did not wait for a lock within 5 s", pid);
}

static void
record_break(int64_t t0, int victims, const char *what)
{
	int64_t		us = now_us() - t0;

	pthread_mutex_lock(&counters_lock);
	n_cycles++;
	n_victims += victims;
	sum_break_us += us;
	if (us > max_break_us)
		max_break_us = us;
	pthread_mutex_unlock(&counters_lock);
	if (victims != 1)
		complain(&n_violations, "VIOLATION", "%s cycle broken with %d victims", what, victims);
	if (us > BREAK_LIMIT_US)
		complain(&n_violations, "VIOLATION", "%s cycle broken after %.3f s", what, us / 1e6);
}

/* Statements of the cycle mode, for pair g */
#define ACQUIRE_1	"SELECT bulkhead_acquire_xact('dl_cy_%d_1', '60s')"
#define ACQUIRE_2	"SELECT bulkhead_acquire_xact('dl_cy_%d_2', '60s')"
#define LOCK_ROW	"UPDATE dl_rows SET v = v + 1 WHERE id = 100 + %d"

/* Send (without waiting) or run statement fmt of pair g */
static void
send_for(PGconn *conn, const char *fmt, int g)
{
	char		sql[256];

	snprintf(sql, sizeof(sql), fmt, g);
	PQsendQuery(conn, sql);
}

static void
run_for(PGconn *conn, const char *fmt, int g, char *state)
{
	send_for(conn, fmt, g);
	finish(conn, state);
}

static bool
is_deadlock(const char *state)
{
	return strcmp(state, "40P01") == 0;
}

static void *
cycle_pair(void *arg)
{
	int			g = (int) (intptr_t) arg;
	PGconn	   *a = connect_db();
	PGconn	   *b = connect_db();
	PGconn	   *watch = connect_db();
	char		sa[6];
	char		sb[6];
	int			kind = 0;

	while (now_us() < end_at)
	{
		int64_t		t0;
		const char *what;
		bool		ok;

		run_for(a, "BEGIN", g, sa);
		run_for(b, "BEGIN", g, sb);
		run_for(a, ACQUIRE_1, g, sa);
		if (kind < 2)
		{
			/*
			 * lock <-> permit, closed by the holder's UPDATE (kind 0) or by
			 * the waiter's acquire (kind 1): B must be the victim
			 */
			what = kind == 0 ? "lock-permit (holder closes)" : "lock-permit (waiter closes)";
			run_for(b, LOCK_ROW, g, sb);
			send_for(kind == 0 ? b : a, kind == 0 ? ACQUIRE_1 : LOCK_ROW, g);
			if (kind == 0)
				await_queued(watch, PQbackendPID(b));
			else
				await_lock_wait(watch, PQbackendPID(a));
			t0 = now_us();
			send_for(kind == 0 ? a : b, kind == 0 ? LOCK_ROW : ACQUIRE_1, g);
			finish(b, sb);
			finish(a, sa);
			ok = is_deadlock(sb) && sa[0] == '\0';
		}
		else
		{
			/* permit <-> permit: either one is the victim; its transaction
			 * ends with its permit, and the other one is served */
			what = "permit-permit";
			run_for(b, ACQUIRE_2, g, sb);
			send_for(a, ACQUIRE_2, g);
			await_queued(watch, PQbackendPID(a));
			t0 = now_us();
			send_for(b, ACQUIRE_1, g);
			finish(a, sa);
			finish(b, sb);
			ok = (is_deadlock(sa) && sb[0] == '\0') || (is_deadlock(sb) && sa[0] == '\0');
		}
		record_break(t0, is_deadlock(sa) + is_deadlock(sb), what);
		if (!ok)
			complain(&n_violations, "VIOLATION", "%s cycle: a ended with \"%s\", b with \"%s\"",
					 what, sa, sb);
		run_for(a, sa[0] ? "ROLLBACK" : "COMMIT", g, sa);
		run_for(b, sb[0] ? "ROLLBACK" : "COMMIT", g, sb);
		kind = (kind + 1) % 3;
	}
	PQfinish(a);
	PQfinish(b);
	PQfinish(watch);
	return NULL;
}

/*---- set-up and final checks ----*/

static void
setup_exec(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "set-up failed: %s: %s", sql, PQresultErrorMessage(res));
		exit(2);
	}
	PQclear(res);
}

/* Define the workloads named by like (a LIKE pattern) and wait for them */
static void
setup_mode(PGconn *conn, const char *insert, const char *like, int n)
{
	char		sql[512];
	int			i;

	setup_exec(conn, "CREATE TABLE IF NOT EXISTS dl_rows (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0)");
	setup_exec(conn, "INSERT INTO dl_rows (id) SELECT generate_series(1, 200) ON CONFLICT DO NOTHING");
	setup_exec(conn, insert);
	snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM bulkhead_stats WHERE workload LIKE '%s'", like);
	for (i = 0; i < 3000 && run_value(conn, sql) != n; i++)
		usleep(10000);
	if (run_value(conn, sql) != n)
	{
		fprintf(stderr, "set-up failed: the workloads %s were not loaded\n", like);
		exit(2);
	}
	snprintf(sql, sizeof(sql),
			 "SELECT bulkhead_stats_reset(workload) FROM bulkhead_stats WHERE workload LIKE '%s'", like);
	setup_exec(conn, sql);
}

static void
final_checks(PGconn *conn, const char *like, long want_deadlocks)
{
	char		sql[512];
	PGresult   *res;

	snprintf(sql, sizeof(sql),
			 "SELECT coalesce(sum(running), 0), coalesce(sum(queued), 0), coalesce(sum(acquired), 0),"
			 " coalesce(sum(released), 0), coalesce(sum(deadlocks), 0), coalesce(sum(cancelled), 0),"
			 " coalesce(sum(timed_out), 0), coalesce(max(wait_time_max_ms), 0), coalesce(sum(rejected_full), 0)"
			 " FROM bulkhead_stats WHERE workload LIKE '%s'", like);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		complain(&n_tool_errors, "tool error", "%s", PQresultErrorMessage(res));
		PQclear(res);
		return;
	}
	printf("workloads %s: running %s, queued %s, acquired %s, released %s, deadlocks %s,"
		   " cancelled %s, timed_out %s, rejected_full %s, longest wait %s ms\n",
		   like, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
		   PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4), PQgetvalue(res, 0, 5),
		   PQgetvalue(res, 0, 6), PQgetvalue(res, 0, 8), PQgetvalue(res, 0, 7));
	if (strcmp(PQgetvalue(res, 0, 0), "0") != 0 || strcmp(PQgetvalue(res, 0, 1), "0") != 0)
		complain(&n_violations, "VIOLATION", "running/queued not back to 0 at the end");
	if (strcmp(PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3)) != 0)
		complain(&n_violations, "VIOLATION", "acquired != released at the end");
	if (strtol(PQgetvalue(res, 0, 4), NULL, 10) != want_deadlocks)
		complain(&n_violations, "VIOLATION", "bulkhead_stats.deadlocks is %s, expected %ld",
				 PQgetvalue(res, 0, 4), want_deadlocks);
	PQclear(res);
}

int
deadlock_stress_main(const char *mode, int clients, int seconds,
					 const char *conninfo_arg)
{
	PGconn	   *conn;
	pthread_t  *threads;
	int			nthreads;
	bool		cycle = strcmp(mode, "cycle") == 0;
	int			i;
	int64_t		t0;
	double		runtime;

	if (!cycle && strcmp(mode, "nocycle") != 0)
	{
		fprintf(stderr, "unknown deadlock mode \"%s\" (nocycle or cycle)\n", mode);
		return 2;
	}
	conninfo = conninfo_arg;
	conn = connect_db();
	if (cycle)
	{
		char		insert[8192];
		size_t		len;

		nthreads = clients / 2 > 0 ? clients / 2 : 1;
		if (nthreads > 24)
			nthreads = 24;		/* two workloads each, within max_workloads */
		len = snprintf(insert, sizeof(insert),
					   "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout) VALUES ");
		for (i = 0; i < nthreads; i++)
			len += snprintf(insert + len, sizeof(insert) - len,
							"%s('dl_cy_%d_1', 1, 4, '60s'), ('dl_cy_%d_2', 1, 4, '60s')",
							i ? ", " : "", i, i);
		snprintf(insert + len, sizeof(insert) - len, " ON CONFLICT (name) DO NOTHING");
		setup_mode(conn, insert, "dl\\_cy\\_%", nthreads * 2);
	}
	else
	{
		nthreads = clients;
		setup_mode(conn,
				   "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout) VALUES"
				   " ('dl_nc_0', 4, 1000, '60s'), ('dl_nc_1', 2, 1000, '60s'), ('dl_nc_2', 2, 1000, '60s')"
				   " ON CONFLICT (name) DO NOTHING",
				   "dl\\_nc\\_%", NC_WORKLOADS);
	}

	printf("deadlock mode %s: %d %s, %d s, deadlock_timeout %d ms\n", mode, nthreads,
		   cycle ? "pairs of clients (+1 watcher each)" : "clients", seconds,
		   DEADLOCK_TIMEOUT_MS);
	fflush(stdout);
	t0 = now_us();
	end_at = t0 + (int64_t) seconds * 1000000;
	threads = calloc(nthreads, sizeof(pthread_t));
	for (i = 0; i < nthreads; i++)
		pthread_create(&threads[i], NULL, cycle ? cycle_pair : nocycle_client,
					   (void *) (intptr_t) i);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	runtime = (now_us() - t0) / 1e6;

	if (cycle)
	{
		final_checks(conn, "dl\\_cy\\_%", n_victims);
		printf("cycles built %ld, victims %ld, break time mean %.1f ms, max %.1f ms\n",
			   n_cycles, n_victims,
			   n_cycles ? sum_break_us / 1000.0 / n_cycles : 0.0, max_break_us / 1000.0);
	}
	else
	{
		final_checks(conn, "dl\\_nc\\_%", 0);
		printf("transactions %ld (%.0f/s), 40P01 %ld, other errors %ld\n",
			   n_transactions, n_transactions / runtime, n_deadlocks, n_other_errors);
	}
	PQfinish(conn);
	printf("runtime %.1f s, violations %ld, tool errors %ld\n", runtime, n_violations, n_tool_errors);
	if (n_violations > 0)
		return 1;
	return n_tool_errors > 0 ? 2 : 0;
}
