/*-------------------------------------------------------------------------
 *
 * priority_modes.c
 *	  The priority mode of bulkhead_stress (-D priority, 1.5): importance
 *	  and queued lock holders served first.  One thread per client,
 *	  blocking libpq calls.
 *
 * Workloads: pr_plain (2 permits), pr_keyed (2 permits, 1 per key, keys
 * k0..k3) and a budget pr_pool (2 permits) over the leaves pr_leaf_a and
 * pr_leaf_b (2 each).  Each client runs transactions at a random
 * importance (SET LOCAL bulkhead.importance, low / normal / high): a
 * "holder" client first updates a random row of pr_rows, then takes a
 * transaction permit of a random workload (so it waits in the queue while
 * it holds a row lock others may wait for: it is served ahead and, after
 * its deadlock check (deadlock_timeout 50 ms), over the limit); a "plain"
 * client takes the permit first, then updates a row (so holders of permits
 * wait for the lock holders' rows).  Work of 0-20 ms, then COMMIT; some
 * transactions run under a statement_timeout of 5-60 ms (cancels of
 * waiters and of holders, boosted or not), and a killer thread terminates
 * a random holder client every 300 ms (its permits are returned at exit).
 * Real cycles (a plain client holding a permit waits for the row of a
 * holder client that waits for that permit) end with 40P01.
 *
 * Violations: a workload (any level of the tree, or a key) running more
 * than its limit plus the number of holder clients (only they may borrow,
 * at most one permit each, one transaction permit at a time); an error
 * other than 40P01, 57014 (cancel, statement_timeout), 53B02, 40001 or a
 * lost connection; and at the end any permit held or awaited, any key
 * left, or a workload whose acquired + moved_in differs from released +
 * moved_out.
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

#define PR_ROWS			8
#define PR_LIMIT		2
#define MAX_CLIENTS		1024

static const char *conninfo;
static int64_t end_at;
static int	nholders;			/* clients 0 .. nholders - 1 update first */
static int	pids[MAX_CLIENTS];	/* the clients' backends, 0: none */

static const char *workloads[] = {"pr_plain", "pr_keyed", "pr_leaf_a", "pr_leaf_b"};
static const char *importances[] = {"low", "normal", "high"};

/* counters, under counters_lock */
static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;
static long n_transactions;
static long n_deadlocks;
static long n_cancels;
static long n_terminated;
static long n_checks;
static long n_violations;
static long n_tool_errors;

static void
count(long *counter)
{
	pthread_mutex_lock(&counters_lock);
	(*counter)++;
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
	PQclear(res);
	return conn;
}

/*
 * Run sql; returns false when it failed.  An expected failure (deadlock,
 * cancel, timeout, a lost connection) is counted; any other is a violation.
 */
static bool
run(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	const char *code;
	bool		ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

	if (!ok)
	{
		code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (PQstatus(conn) != CONNECTION_OK)
			;					/* terminated: the caller reconnects */
		else if (code != NULL && strcmp(code, "40P01") == 0)
			count(&n_deadlocks);
		else if (code != NULL && (strcmp(code, "57014") == 0 ||
								  strcmp(code, "53B02") == 0 ||
								  strcmp(code, "40001") == 0 ||
								  strcmp(code, "25P02") == 0))
			count(&n_cancels);
		else
			complain(&n_violations, "VIOLATION", "unexpected error: %s: %s", sql,
					 PQresultErrorMessage(res));
	}
	PQclear(res);
	return ok;
}

static long
run_value(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long		v = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		complain(&n_tool_errors, "tool error", "%s: %s", sql, PQresultErrorMessage(res));
	else if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return v;
}

/* One transaction of client c */
static void
transaction(PGconn *conn, int c, uint64_t *state)
{
	bool		holder = c < nholders;
	int			w = (int) (rng(state) % 4);
	int			row = (int) (rng(state) % PR_ROWS) + 1;
	bool		timed = rng(state) % 8 == 0;
	char		sql[256];
	char		acquire[160];
	bool		ok;

	if (w == 1)
		snprintf(acquire, sizeof(acquire),
				 "SELECT bulkhead_acquire_xact('pr_keyed', '60s', key => 'k%d')",
				 (int) (rng(state) % 4));
	else
		snprintf(acquire, sizeof(acquire),
				 "SELECT bulkhead_acquire_xact('%s', '60s')", workloads[w]);
	snprintf(sql, sizeof(sql), "UPDATE pr_rows SET v = v + 1 WHERE id = %d", row);

	ok = run(conn, "BEGIN");
	if (ok && timed)
	{
		char		t[80];

		snprintf(t, sizeof(t), "SET LOCAL statement_timeout = '%dms'",
				 5 + (int) (rng(state) % 56));
		ok = run(conn, t);
	}
	if (ok)
	{
		char		imp[80];

		snprintf(imp, sizeof(imp), "SET LOCAL bulkhead.importance = '%s'",
				 importances[rng(state) % 3]);
		ok = run(conn, imp);
	}
	if (ok)
		ok = run(conn, holder ? sql : acquire);
	if (ok)
		ok = run(conn, holder ? acquire : sql);
	if (ok)
	{
		char		s[64];

		snprintf(s, sizeof(s), "SELECT pg_sleep(%f)", (double) (rng(state) % 21) / 1000.0);
		ok = run(conn, s);
	}
	if (PQstatus(conn) == CONNECTION_OK)
		run(conn, ok ? "COMMIT" : "ROLLBACK");
	if (ok)
		count(&n_transactions);
}

static void *
client(void *arg)
{
	int			c = (int) (intptr_t) arg;
	uint64_t	state = (uint64_t) (c + 1) * UINT64_C(0x9e3779b97f4a7c15) + (uint64_t) now_us();
	PGconn	   *conn = connect_db();

	__atomic_store_n(&pids[c], PQbackendPID(conn), __ATOMIC_SEQ_CST);
	while (now_us() < end_at)
	{
		transaction(conn, c, &state);
		if (PQstatus(conn) != CONNECTION_OK)
		{
			count(&n_terminated);
			__atomic_store_n(&pids[c], 0, __ATOMIC_SEQ_CST);
			PQfinish(conn);
			conn = connect_db();
			__atomic_store_n(&pids[c], PQbackendPID(conn), __ATOMIC_SEQ_CST);
		}
	}
	__atomic_store_n(&pids[c], 0, __ATOMIC_SEQ_CST);
	PQfinish(conn);
	return NULL;
}

/* Every 300 ms, terminate a random holder client that holds or awaits */
static void *
killer(void *arg)
{
	PGconn	   *conn = connect_db();
	uint64_t	state = (uint64_t) now_us() | 1;
	char		sql[256];

	while (now_us() < end_at)
	{
		int			pid = __atomic_load_n(&pids[rng(&state) % nholders], __ATOMIC_SEQ_CST);

		usleep(300000);
		if (pid == 0)
			continue;
		snprintf(sql, sizeof(sql),
				 "SELECT count(pg_terminate_backend(pid)) FROM bulkhead_activity"
				 " WHERE pid = %d AND workload LIKE 'pr\\_%%'", pid);
		(void) run_value(conn, sql);
	}
	PQfinish(conn);
	return NULL;
}

/* The bound of every level, every few milliseconds */
static void *
monitor(void *arg)
{
	PGconn	   *conn = connect_db();
	char		sql[1024];
	char		keys_sql[512];

	snprintf(keys_sql, sizeof(keys_sql),
			 "SELECT coalesce(string_agg(key || ' running ' || running, ', '), '')"
			 " FROM bulkhead_keys WHERE workload = 'pr_keyed' AND running > 1 + %d",
			 nholders);
	snprintf(sql, sizeof(sql),
			 "SELECT coalesce(string_agg(workload || ' running ' || running || ' limit ' || current_limit, ', '), '')"
			 " FROM bulkhead_stats WHERE workload LIKE 'pr\\_%%' AND running > current_limit + %d",
			 nholders);
	while (now_us() < end_at)
	{
		PGresult   *res = PQexec(conn, sql);

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			complain(&n_tool_errors, "tool error", "%s", PQresultErrorMessage(res));
		else if (PQgetvalue(res, 0, 0)[0] != '\0')
			complain(&n_violations, "VIOLATION", "over the limit plus the lock holders: %s",
					 PQgetvalue(res, 0, 0));
		PQclear(res);
		res = PQexec(conn, keys_sql);
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQgetvalue(res, 0, 0)[0] != '\0')
			complain(&n_violations, "VIOLATION", "a key over its cap: %s", PQgetvalue(res, 0, 0));
		PQclear(res);
		count(&n_checks);
		usleep(5000);
	}
	PQfinish(conn);
	return NULL;
}

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

static void
setup(PGconn *conn)
{
	int			i;

	setup_exec(conn, "CREATE TABLE IF NOT EXISTS pr_rows (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0)");
	setup_exec(conn, "INSERT INTO pr_rows (id) SELECT generate_series(1, 8) ON CONFLICT DO NOTHING");
	setup_exec(conn, "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
			   " max_running_per_key) VALUES ('pr_plain', 2, 1000, '60s', NULL),"
			   " ('pr_keyed', 2, 1000, '60s', 1), ('pr_pool', 2, 1000, '60s', NULL)"
			   " ON CONFLICT (name) DO NOTHING");
	setup_exec(conn, "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)"
			   " VALUES ('pr_leaf_a', 2, 1000, '60s', 'pr_pool'), ('pr_leaf_b', 2, 1000, '60s', 'pr_pool')"
			   " ON CONFLICT (name) DO NOTHING");
	for (i = 0; i < 3000; i++)
	{
		if (run_value(conn, "SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'pr\\_%'"
					  " AND (parent = 'pr_pool' OR parent IS NULL)") == 5 &&
			run_value(conn, "SELECT count(*) FROM bulkhead_stats WHERE parent = 'pr_pool'") == 2)
			break;
		usleep(10000);
	}
	if (i == 3000)
	{
		fprintf(stderr, "set-up failed: the workloads pr_* were not loaded\n");
		exit(2);
	}
	setup_exec(conn, "SELECT bulkhead_stats_reset(workload) FROM bulkhead_stats WHERE workload LIKE 'pr\\_%'");
}

/* At the end: every permit returned, every key gone, the figures paired */
static void
final_checks(PGconn *conn)
{
	long		left;
	int			i;

	/* terminated backends may still be exiting: give them a while */
	for (i = 0; i < 500; i++)
	{
		left = run_value(conn, "SELECT count(*) FROM bulkhead_activity WHERE workload LIKE 'pr\\_%'");
		if (left == 0)
			break;
		usleep(10000);
	}
	if (left != 0)
		complain(&n_violations, "VIOLATION", "%ld permits held or awaited at the end", left);
	if (run_value(conn, "SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'pr\\_%'"
				  " AND (running <> 0 OR queued <> 0)") != 0)
		complain(&n_violations, "VIOLATION", "a workload not at rest at the end");
	if (run_value(conn, "SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'pr\\_%'"
				  " AND acquired + moved_in <> released + moved_out") != 0)
		complain(&n_violations, "VIOLATION", "acquired + moved_in <> released + moved_out at the end");
	if (run_value(conn, "SELECT count(*) FROM bulkhead_keys WHERE workload = 'pr_keyed'"
				  " AND (running <> 0 OR queued <> 0)") != 0)
		complain(&n_violations, "VIOLATION", "a key holds or waits at the end");
	printf("priority: %ld transactions, %ld deadlocks (40P01), %ld cancelled or timed out,"
		   " %ld clients terminated, %ld checks, acquired %ld\n",
		   n_transactions, n_deadlocks, n_cancels, n_terminated, n_checks,
		   run_value(conn, "SELECT sum(acquired) FROM bulkhead_stats WHERE workload LIKE 'pr\\_leaf%'"
					 " OR workload IN ('pr_plain', 'pr_keyed')"));
}

int
priority_stress_main(int clients, int seconds, const char *conninfo_)
{
	PGconn	   *conn;
	pthread_t	threads[MAX_CLIENTS + 2];
	int			i;

	conninfo = conninfo_;
	if (clients < 2)
		clients = 2;
	if (clients > MAX_CLIENTS)
		clients = MAX_CLIENTS;
	nholders = clients / 2;
	conn = connect_db();
	setup(conn);
	end_at = now_us() + (int64_t) seconds * 1000000;
	for (i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, client, (void *) (intptr_t) i);
	pthread_create(&threads[clients], NULL, monitor, NULL);
	pthread_create(&threads[clients + 1], NULL, killer, NULL);
	for (i = 0; i < clients + 2; i++)
		pthread_join(threads[i], NULL);
	final_checks(conn);
	setup_exec(conn, "DELETE FROM bulkhead_workload WHERE parent = 'pr_pool'");
	setup_exec(conn, "DELETE FROM bulkhead_workload WHERE name IN ('pr_plain', 'pr_keyed', 'pr_pool')");
	PQfinish(conn);
	printf("%ld violations, %ld tool errors\n", n_violations, n_tool_errors);
	return n_violations > 0 || n_tool_errors > 0 ? 1 : 0;
}
