/*-------------------------------------------------------------------------
 *
 * guard_modes.c
 *	  The guards mode of bulkhead_stress (-D guards): one thread per client,
 *	  blocking libpq calls.
 *
 * Each client mixes, at random, session permits (acquired and released in
 * and out of transactions, committed or rolled back), transaction permits,
 * gated transactions (bulkhead.workload, scope 'auto', switched on and off),
 * SET LOCAL and plain SET of the four guarded settings, and savepoints
 * (SAVEPOINT, ROLLBACK TO, RELEASE, nested).  The client keeps a model of
 * what the settings must be under the rules of src/guards/guard.c, and after every
 * step reads all four with SHOW (one round trip) and compares: a difference
 * is a violation.  Outside a transaction the current value is the
 * session-level value, so each transaction's end checks that one too.
 *
 * The model, per setting (values in ms, 0 = no limit):
 *	 S		the session-level value;
 *	 O		the local overlay in force in the transaction, or NONE (S shows);
 *	 saved	per open savepoint, the overlay when it was made (ROLLBACK TO
 *			brings it back);
 *	 and the session guard bookkeeping: active, set_value, base.
 * Session acquire (guard g): if active and S != set_value the user set it:
 * inactive.  wanted = min(S, g); if wanted != S and not active: base = S,
 * active.  S = wanted; set_value = wanted if active.  Session release: if
 * active: S != set_value: inactive; else S = base lowered by the remaining
 * session permits' guards (inactive if none).  Transaction permit: O =
 * min(current, g).  Automatic permit (first statement of a gated
 * transaction that does work): O = min(current, g), and each saved overlay
 * = min(saved or S, g).  SET LOCAL v: O = v.  Plain SET (outside
 * transactions only: a plain SET inside one and a rollback is the case
 * guard.c does not handle): S = v.  COMMIT / ROLLBACK: O = NONE.
 *
 * The guards and the values set are minutes long, so that no timeout fires
 * during the run.  The workloads admit everyone (max_running 10000): this
 * mode tests the settings, not the queues.
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

#define NSET		4			/* guarded settings */
#define NWL			4			/* workloads: three explicit, one gating */
#define AUTO_WL		3			/* the gating workload's index */
#define MAX_SP		4			/* savepoints open at most */
#define NONE		(-1)
#define SESSION_ONLY 3			/* idle_session_timeout: session permits only */

static const char *const setting[NSET] = {
	"statement_timeout", "lock_timeout",
	"idle_in_transaction_session_timeout", "idle_session_timeout"
};

static const char *const wl_name[NWL] = {"gs_a", "gs_b", "gs_c", "gs_auto"};

/*
 * Guards in ms (0: none) for statement, lock, idle: idle is both
 * idle_in_transaction_session_timeout and, for session permits,
 * idle_session_timeout
 */
static const int wl_guard[NWL][3] = {
	{7 * 60000, 3 * 60000, 50 * 60000},
	{5 * 60000, 0, 40 * 60000},
	{0, 2 * 60000, 0},
	{6 * 60000, 4 * 60000, 45 * 60000},
};

/* values the clients set themselves */
static const int set_values[] = {0, 90000, 4 * 60000, 8 * 60000, 3600000};
#define NVALUES (int) (sizeof(set_values) / sizeof(set_values[0]))

static const char *conninfo;
static int64_t end_at;

/* counters, under counters_lock */
static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;
static long n_steps;
static long n_checks;
static long n_transactions;
static long n_violations;
static long n_tool_errors;

/* The model of one client's session */
typedef struct Model
{
	int			S[NSET];
	int			O[NSET];
	int			saved[MAX_SP][NSET];
	int			nsp;			/* savepoints open */
	bool		active[NSET];
	int			set_value[NSET];
	int			base[NSET];
	int			reset[NSET];	/* the value RESET gives (read at connect) */
	bool		session_held[NWL];
	int			xact_level[NWL];	/* -1: not held, else savepoints open at acquire */
	bool		in_xact;
	bool		gated;			/* bulkhead.workload = gs_auto */
	bool		auto_held;
	/* for the report of a violation: the steps of this transaction */
	char		trail[2048];
} Model;

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

static int
pick(uint64_t *state, int n)
{
	return (int) (rng(state) % (uint64_t) n);
}

static int
combine(int value, int guard)
{
	if (guard <= 0)
		return value;
	if (value <= 0)
		return guard;
	return value < guard ? value : guard;
}

/* The guard workload w puts on setting k for a permit of this scope */
static int
guard_of(int w, int k, bool session)
{
	if (k == SESSION_ONLY)
		return session ? wl_guard[w][2] : 0;
	return wl_guard[w][k];
}

static int
current(const Model *m, int k)
{
	return m->O[k] == NONE ? m->S[k] : m->O[k];
}

static void
trail(Model *m, const char *step)
{
	size_t		len = strlen(m->trail);

	if (len + strlen(step) + 3 < sizeof(m->trail))
		snprintf(m->trail + len, sizeof(m->trail) - len, "%s; ", step);
}

/* "90s", "4min", "500ms", "0" as SHOW prints them -> ms; -2 if unreadable */
static int
parse_ms(const char *s)
{
	char	   *end;
	long		v = strtol(s, &end, 10);

	if (end == s)
		return -2;
	if (strcmp(end, "") == 0 || strcmp(end, "ms") == 0)
		return (int) v;
	if (strcmp(end, "s") == 0)
		return (int) (v * 1000);
	if (strcmp(end, "min") == 0)
		return (int) (v * 60000);
	if (strcmp(end, "h") == 0)
		return (int) (v * 3600000);
	if (strcmp(end, "d") == 0)
		return (int) (v * 86400000);
	return -2;
}

/* Run sql, which must succeed; false (and a tool error) if it did not */
static bool
run_ok(PGconn *conn, Model *m, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	bool		ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
		PQresultStatus(res) == PGRES_TUPLES_OK;

	if (m != NULL)
		trail(m, sql);
	if (!ok)
		complain(&n_tool_errors, "unexpected error", "%s: %s", sql,
				 PQresultErrorMessage(res));
	PQclear(res);
	count(&n_steps, 1);
	return ok;
}

/* Run sql returning one boolean, which must be true */
static bool
run_true(PGconn *conn, Model *m, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	bool		ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		strcmp(PQgetvalue(res, 0, 0), "t") == 0;

	trail(m, sql);
	if (!ok)
		complain(&n_tool_errors, "unexpected result", "%s: %s%s", sql,
				 PQresultErrorMessage(res),
				 PQresultStatus(res) == PGRES_TUPLES_OK ? "(not true)" : "");
	PQclear(res);
	count(&n_steps, 1);
	return ok;
}

/* SHOW the four settings, compare with the model; false on a tool error */
static bool
check(PGconn *conn, Model *m, const char *after)
{
	PGresult   *res;
	int			k = 0;
	bool		ok = true;
	char		seen[NSET][32];

	if (!PQsendQuery(conn, "SHOW statement_timeout; SHOW lock_timeout;"
					 " SHOW idle_in_transaction_session_timeout; SHOW idle_session_timeout"))
	{
		complain(&n_tool_errors, "tool error", "send: %s", PQerrorMessage(conn));
		return false;
	}
	while ((res = PQgetResult(conn)) != NULL)
	{
		if (PQresultStatus(res) != PGRES_TUPLES_OK || k >= NSET)
		{
			complain(&n_tool_errors, "tool error", "SHOW: %s", PQresultErrorMessage(res));
			ok = false;
		}
		else
			snprintf(seen[k++], sizeof(seen[0]), "%s", PQgetvalue(res, 0, 0));
		PQclear(res);
	}
	if (!ok || k != NSET)
		return false;
	count(&n_checks, 1);
	for (k = 0; k < NSET; k++)
	{
		if (parse_ms(seen[k]) != current(m, k))
		{
			complain(&n_violations, "VIOLATION",
					 "after %s: %s is %s, the rules say %d ms (session-level %d ms%s)\n    steps: %s",
					 after, setting[k], seen[k], current(m, k), m->S[k],
					 m->in_xact ? ", in a transaction" : "", m->trail);
			return true;
		}
	}
	return true;
}

/*---- the model's transitions ----*/

static void
model_session_acquire(Model *m, int w)
{
	int			k;

	m->session_held[w] = true;
	for (k = 0; k < NSET; k++)
	{
		int			g = guard_of(w, k, true);
		int			wanted;

		if (g <= 0)
			continue;
		if (m->active[k] && m->S[k] != m->set_value[k])
			m->active[k] = false;
		wanted = combine(m->S[k], g);
		if (wanted != m->S[k] && !m->active[k])
		{
			m->base[k] = m->S[k];
			m->active[k] = true;
		}
		m->S[k] = wanted;
		if (m->active[k])
			m->set_value[k] = wanted;
	}
}

/* after the session permits in released[] were released */
static void
model_session_restore(Model *m)
{
	int			k;
	int			w;

	for (k = 0; k < NSET; k++)
	{
		bool		guarded = false;
		int			to;

		if (!m->active[k])
			continue;
		if (m->S[k] != m->set_value[k])
		{
			m->active[k] = false;
			continue;
		}
		to = m->base[k];
		for (w = 0; w < NWL; w++)
			if (m->session_held[w] && guard_of(w, k, true) > 0)
			{
				to = combine(to, guard_of(w, k, true));
				guarded = true;
			}
		m->S[k] = to;
		if (guarded)
			m->set_value[k] = to;
		else
			m->active[k] = false;
	}
}

static void
model_xact_acquire(Model *m, int w)
{
	int			k;

	m->xact_level[w] = m->nsp;
	for (k = 0; k < NSET; k++)
		if (guard_of(w, k, false) > 0)
			m->O[k] = combine(current(m, k), guard_of(w, k, false));
}

/* a statement that does work: a gated transaction takes its permit first */
static void
model_work(Model *m)
{
	int			k;
	int			j;

	if (!m->gated || !m->in_xact || m->auto_held)
		return;
	m->auto_held = true;
	for (k = 0; k < NSET; k++)
	{
		int			g = guard_of(AUTO_WL, k, false);

		if (g <= 0)
			continue;
		m->O[k] = combine(current(m, k), g);
		for (j = 0; j < m->nsp; j++)
			m->saved[j][k] = combine(m->saved[j][k] == NONE ? m->S[k] : m->saved[j][k], g);
	}
}

static void
model_end_xact(Model *m)
{
	int			w;
	int			k;

	for (k = 0; k < NSET; k++)
		m->O[k] = NONE;
	for (w = 0; w < NWL; w++)
		m->xact_level[w] = -1;
	m->nsp = 0;
	m->in_xact = false;
	m->auto_held = false;
}

/*---- the client ----*/

static PGconn *
connect_client(Model *m)
{
	PGconn	   *conn = PQconnectdb(conninfo);
	int			w;
	int			k;

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "connection failed: %s", PQerrorMessage(conn));
		exit(2);
	}
	memset(m, 0, sizeof(*m));
	for (k = 0; k < NSET; k++)
		m->O[k] = NONE;
	for (w = 0; w < NWL; w++)
		m->xact_level[w] = -1;
	if (!run_ok(conn, NULL, "SET bulkhead.exempt_superuser = off") ||
		!run_ok(conn, NULL, "RESET bulkhead.workload"))
		exit(2);
	/* the server's defaults for the four settings */
	for (k = 0; k < NSET; k++)
	{
		char		sql[128];
		PGresult   *res;

		snprintf(sql, sizeof(sql), "SHOW %s", setting[k]);
		res = PQexec(conn, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK ||
			(m->S[k] = parse_ms(PQgetvalue(res, 0, 0))) < 0)
		{
			fprintf(stderr, "%s: %s", sql, PQresultErrorMessage(res));
			exit(2);
		}
		m->reset[k] = m->S[k];
		PQclear(res);
	}
	return conn;
}

/* A random explicit workload that this session does not hold, or -1 */
static int
free_workload(uint64_t *rs, const Model *m)
{
	int			start = pick(rs, AUTO_WL);
	int			i;

	for (i = 0; i < AUTO_WL; i++)
	{
		int			w = (start + i) % AUTO_WL;

		if (!m->session_held[w] && m->xact_level[w] < 0)
			return w;
	}
	return -1;
}

static int
held_session_workload(uint64_t *rs, const Model *m)
{
	int			start = pick(rs, NWL);
	int			i;

	for (i = 0; i < NWL; i++)
		if (m->session_held[(start + i) % NWL])
			return (start + i) % NWL;
	return -1;
}

/* One step in a transaction; false on a tool error */
static bool
xact_step(PGconn *conn, Model *m, uint64_t *rs)
{
	char		sql[256];
	int			r = pick(rs, 100);
	int			k = pick(rs, NSET);
	int			w;

	sql[0] = '\0';
	if (r < 22)
	{
		/* SET LOCAL */
		int			v = set_values[pick(rs, NVALUES)];

		snprintf(sql, sizeof(sql), "SET LOCAL %s = %d", setting[k], v);
		if (!run_ok(conn, m, sql))
			return false;
		m->O[k] = v;
	}
	else if (r < 36)
	{
		if (m->nsp >= MAX_SP)
			return true;
		snprintf(sql, sizeof(sql), "SAVEPOINT sp%d", m->nsp);
		if (!run_ok(conn, m, sql))
			return false;
		memcpy(m->saved[m->nsp], m->O, sizeof(m->O));
		m->nsp++;
	}
	else if (r < 46)
	{
		/* ROLLBACK TO a savepoint j: levels above it end, it stays */
		int			j;

		if (m->nsp == 0)
			return true;
		j = pick(rs, m->nsp);
		snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT sp%d", j);
		if (!run_ok(conn, m, sql))
			return false;
		memcpy(m->O, m->saved[j], sizeof(m->O));
		m->nsp = j + 1;
		for (w = 0; w < NWL; w++)
			if (m->xact_level[w] > j)
				m->xact_level[w] = -1;
	}
	else if (r < 53)
	{
		int			j;

		if (m->nsp == 0)
			return true;
		j = pick(rs, m->nsp);
		snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT sp%d", j);
		if (!run_ok(conn, m, sql))
			return false;
		m->nsp = j;
		for (w = 0; w < NWL; w++)
			if (m->xact_level[w] > j)
				m->xact_level[w] = j;
	}
	else if (r < 68)
	{
		/* transaction permit */
		w = free_workload(rs, m);
		if (w < 0)
			return true;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_try_acquire_xact('%s')", wl_name[w]);
		model_work(m);
		if (!run_true(conn, m, sql))
			return false;
		model_xact_acquire(m, w);
	}
	else if (r < 78)
	{
		/* session permit, in the transaction */
		w = free_workload(rs, m);
		if (w < 0)
			return true;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_try_acquire('%s')", wl_name[w]);
		model_work(m);
		if (!run_true(conn, m, sql))
			return false;
		model_session_acquire(m, w);
	}
	else if (r < 88)
	{
		w = held_session_workload(rs, m);
		if (w < 0)
			return true;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wl_name[w]);
		model_work(m);
		if (!run_ok(conn, m, sql))
			return false;
		m->session_held[w] = false;
		model_session_restore(m);
	}
	else
	{
		/* work */
		model_work(m);
		if (!run_ok(conn, m, "SELECT 1"))
			return false;
	}
	return check(conn, m, sql[0] ? sql : "a step");
}

/* One step outside transactions, or a whole transaction; false on error */
static bool
client_step(PGconn *conn, Model *m, uint64_t *rs)
{
	char		sql[256];
	int			r = pick(rs, 100);
	int			w;
	int			k;

	m->trail[0] = '\0';
	sql[0] = '\0';
	if (r < 12)
	{
		w = free_workload(rs, m);
		if (w < 0)
			return true;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_try_acquire('%s')", wl_name[w]);
		if (!run_true(conn, m, sql))
			return false;
		model_session_acquire(m, w);
	}
	else if (r < 22)
	{
		w = held_session_workload(rs, m);
		if (w < 0)
			return true;
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release('%s')", wl_name[w]);
		if (!run_ok(conn, m, sql))
			return false;
		m->session_held[w] = false;
		model_session_restore(m);
	}
	else if (r < 25)
	{
		snprintf(sql, sizeof(sql), "SELECT bulkhead_release_all()");
		if (!run_ok(conn, m, sql))
			return false;
		memset(m->session_held, 0, sizeof(m->session_held));
		model_session_restore(m);
	}
	else if (r < 33)
	{
		/* plain SET, or RESET, outside a transaction */
		int			v = set_values[pick(rs, NVALUES)];

		k = pick(rs, NSET);
		if (pick(rs, 4) == 0)
		{
			snprintf(sql, sizeof(sql), "RESET %s", setting[k]);
			v = m->reset[k];
		}
		else
			snprintf(sql, sizeof(sql), "SET %s = %d", setting[k], v);
		if (!run_ok(conn, m, sql))
			return false;
		m->S[k] = v;
	}
	else if (r < 37)
	{
		m->gated = !m->gated;
		snprintf(sql, sizeof(sql), m->gated ? "SET bulkhead.workload = 'gs_auto'" :
				 "RESET bulkhead.workload");
		if (!run_ok(conn, m, sql))
			return false;
	}
	else
	{
		/* a transaction */
		int			nsteps = 1 + pick(rs, 12);
		int			i;
		bool		commit = pick(rs, 2) == 0;

		if (!run_ok(conn, m, "BEGIN"))
			return false;
		m->in_xact = true;
		for (i = 0; i < nsteps; i++)
			if (!xact_step(conn, m, rs))
				return false;
		if (!run_ok(conn, m, commit ? "COMMIT" : "ROLLBACK"))
			return false;
		model_end_xact(m);
		count(&n_transactions, 1);
		snprintf(sql, sizeof(sql), "%s", commit ? "COMMIT" : "ROLLBACK");
	}
	return check(conn, m, sql[0] ? sql : "a step");
}

static void *
guard_client(void *arg)
{
	uint64_t	rs = (uint64_t) (uintptr_t) arg * UINT64_C(0x9e3779b97f4a7c15) + 7;
	Model	   *m = calloc(1, sizeof(Model));
	PGconn	   *conn = connect_client(m);

	if (!check(conn, m, "connecting"))
		exit(2);
	while (now_us() < end_at)
	{
		if (!client_step(conn, m, &rs))
		{
			/* a tool error: start afresh on a new connection */
			PQfinish(conn);
			conn = connect_client(m);
		}
	}
	PQfinish(conn);
	free(m);
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

static long
query_long(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long		v = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	else
		complain(&n_tool_errors, "tool error", "%s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
	return v;
}

int
guard_stress_main(int clients, int seconds, const char *conninfo_arg)
{
	PGconn	   *conn;
	pthread_t  *threads;
	char		sql[1024];
	size_t		len;
	int			i;
	int64_t		t0;
	double		runtime;

	conninfo = conninfo_arg;
	conn = PQconnectdb(conninfo);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "connection failed: %s", PQerrorMessage(conn));
		return 2;
	}
	len = snprintf(sql, sizeof(sql),
				   "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
				   " statement_timeout, lock_timeout, idle_timeout) VALUES ");
	for (i = 0; i < NWL; i++)
	{
		int			g;

		len += snprintf(sql + len, sizeof(sql) - len, "%s('%s', 10000, 0, '0'",
						i ? ", " : "", wl_name[i]);
		/* no guard: NULL */
		for (g = 0; g < 3; g++)
			len += snprintf(sql + len, sizeof(sql) - len,
							wl_guard[i][g] > 0 ? ", '%d ms'" : ", NULL", wl_guard[i][g]);
		len += snprintf(sql + len, sizeof(sql) - len, ")");
	}
	snprintf(sql + len, sizeof(sql) - len, " ON CONFLICT (name) DO NOTHING");
	setup_exec(conn, sql);
	for (i = 0; i < 3000 && query_long(conn, "SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'gs\\_%'") != NWL; i++)
		usleep(10000);
	if (query_long(conn, "SELECT count(*) FROM bulkhead_stats WHERE workload LIKE 'gs\\_%'") != NWL)
	{
		fprintf(stderr, "set-up failed: the workloads gs_* were not loaded\n");
		return 2;
	}

	printf("guards mode: %d clients, %d s\n", clients, seconds);
	fflush(stdout);
	t0 = now_us();
	end_at = t0 + (int64_t) seconds * 1000000;
	threads = calloc(clients, sizeof(pthread_t));
	for (i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, guard_client, (void *) (intptr_t) (i + 1));
	for (i = 0; i < clients; i++)
		pthread_join(threads[i], NULL);
	runtime = (now_us() - t0) / 1e6;

	/* every permit came back (the clients' backends exit asynchronously) */
	for (i = 0; i < 1000 && query_long(conn, "SELECT coalesce(sum(running), 0) FROM bulkhead_stats WHERE workload LIKE 'gs\\_%'") != 0; i++)
		usleep(10000);
	if (query_long(conn, "SELECT coalesce(sum(running), 0) FROM bulkhead_stats WHERE workload LIKE 'gs\\_%'") != 0)
		complain(&n_violations, "VIOLATION", "permits of gs_* still running after the clients ended");
	PQfinish(conn);
	printf("guards: steps %ld (%.0f/s), checks %ld, transactions %ld\n",
		   n_steps, n_steps / runtime, n_checks, n_transactions);
	printf("runtime %.1f s, violations %ld, tool errors %ld\n", runtime, n_violations, n_tool_errors);
	if (n_violations > 0)
		return 1;
	return n_tool_errors > 0 ? 2 : 0;
}
