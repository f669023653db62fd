/*-------------------------------------------------------------------------
 *
 * bulkhead_stress.c
 *	  Stress test of the bulkhead extension: many clients driven by one
 *	  thread through libpq's non-blocking API, with random acquires (session,
 *	  transaction, try), random waits, work, commits, rollbacks, savepoint
 *	  rollbacks, cancels, terminations and limit changes, against several
 *	  workloads at once, while a monitor connection checks the invariants of
 *	  DESIGN.md every few milliseconds.
 *
 *	  bulkhead_stress [-c clients] [-t seconds] [-d conninfo] [-w w1,w2,w3]
 *	                  [-A w1,...] [-s seed] [-m monitor_ms] [-C cancel_ms]
 *	                  [-K terminate_ms] [-L limit_ms] [-P pause_pct]
 *	                  [-X lock_pct] [-v]
 *	  bulkhead_stress -D nocycle|cycle|guards|budgets|holds|tenants|lanes|memory [-c clients]
 *	                  [-t seconds] [-d conninfo] [-s seed]
 *
 * The -D modes are described in deadlock_modes.c, guard_modes.c,
 * budget_modes.c, hold_modes.c, tenant_modes.c, lane_modes.c and
 * memory_modes.c.
 *
 * The workloads must exist (enforce mode) in the database of the conninfo,
 * which must be bulkhead.database; some may be adaptive.  The tool resets
 * their statistics when they are idle, runs, restores their definitions
 * (max_running, max_queued, adaptive, min_running), and checks at the end
 * that nothing is running or queued and that acquired = released.  Exit
 * status: 0 when no violation was seen, 1 on a violation, 2 on a setup or
 * tool error.
 *
 * How the monitor checks soundly (one statement per sample):
 *
 *	 SELECT <bulkhead_stats>            -- part 1 (s1)
 *	 UNION ALL SELECT <bulkhead_activity counted per workload>   -- part 2 (a)
 *	 UNION ALL SELECT <bulkhead_stats>  -- part 3 (s2)
 *
 * Append runs its children in order; each part also carries clock_timestamp()
 * and the tool checks that the parts were read in that order.  Every
 * bulkhead_stats row is read under its workload's lock, so each row is one
 * state of the workload: its configuration, current_limit (L), running (R)
 * and queued (Q).
 *
 * The limit checks follow from slot.c (the only writer of a slot), its
 * callers permit.c, local.c, loader.c and adaptive.c:
 *
 * - R grows only by a grant (admission, or bulkhead_grant_waiters), which
 *   happens only while R < L: after it, R <= L.  R + Q grows only by an
 *   admission, which happens only while R + Q < L + max_queued.  Lowering L
 *   preempts no one.  So between two reads of a workload, R can end above
 *   max(R before, the highest L in force in between) only by a bug, and
 *   R + Q likewise against max(R + Q before, the highest L + max_queued).
 *   The monitor checks exactly that, with an upper bound of the highest L
 *   in between (check_stats_row): L changes only when the worker loads a
 *   changed row (at most once between two reads: the tool changes a
 *   workload again only after the monitor has seen its previous change
 *   applied) and, for an adaptive workload, at the worker's decisions,
 *   within [min_running, max_running].  Between two reads less than 50 ms
 *   apart the worker decided at most once (SINGLE_DECISION_US says why),
 *   so the bound is the limits read and the one the load sets; across a
 *   longer span of an adaptive workload it is max_running.
 * - Per row: a workload that is not adaptive has L = max_running; an
 *   adaptive one has L in [min_running, max_running], or 0 when
 *   max_running = 0 (paused); and Q > 0 implies R >= L (a release hands its
 *   permit over at once, a raised limit serves waiters at once).
 *
 * The activity rows are read under the same lock but at another moment, so
 * "running = number of running rows" is only comparable when nothing
 * happened in between.  In slot.c every change of running or
 * queued either bumps one of the monotonic counters (acquired, released,
 * cancelled, timed_out, rejected_full, deadlocks) under the same lock, or is
 * an enqueue (queued + 1) or a grant by the worker after a limit rise
 * (queued - 1, running + 1: a load or an adaptive decision).  So when s1 and
 * s2 show the same counters, running and queued for a workload, running
 * could only have grown in between and did not, and queued could then only
 * have grown and did not: the activity read between them saw exactly that
 * state, and must match it.  Samples that are not quiet are counted as
 * skipped, never as violations.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
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

#define MAX_WORKLOADS	8
#define MAX_STEPS		16
#define MAX_SHOWN_VIOLATIONS 40

/*---- options ----*/
static int	opt_clients = 64;
static int	opt_seconds = 60;
static const char *opt_conninfo = "";
static char *opt_workloads = NULL;
static uint64_t opt_seed = 0;
static int	opt_monitor_ms = 2;
static int	opt_cancel_ms = 10;		/* mean interval between cancels */
static int	opt_terminate_ms = 200; /* mean interval between terminations */
static int	opt_limit_ms = 1000;	/* mean interval between limit changes, per
									 * workload */
static int	opt_pause_pct = 8;		/* limit changes that pause (max_running 0) */
static int	opt_lock_pct = 40;		/* work on adaptive workloads under a lock */
static int	opt_think_ms = 3;		/* max pause between two operations */
static int	opt_backoff_ms = 20;	/* max pause after a rejection or timeout */
static bool opt_verbose = false;
static char *opt_toggle = NULL;	/* -A: workloads switched adaptive on/off */
static const char *opt_deadlock_mode = NULL;	/* -D: see deadlock_modes.c */

/*---- workloads ----*/
static int	nworkloads = 0;
static char wname[MAX_WORKLOADS][64];
static char wlit[MAX_WORKLOADS][140];	/* as an SQL literal */

/* What the tool sets of a workload's row in bulkhead_workload */
typedef struct WConfig
{
	int			max_running;
	int			max_queued;
	int			min_running;
	bool		adaptive;
} WConfig;

static WConfig orig_cfg[MAX_WORKLOADS];	/* at the start, restored at the end */
static bool may_toggle[MAX_WORKLOADS];	/* -A: adaptive switched on and off */
static int	queue_timeout_ms[MAX_WORKLOADS];

/*---- time and randomness ----*/
static int64_t t_start;

/* monotonic microseconds (deadlock_modes.c uses it too) */
int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double
elapsed_s(void)
{
	return (double) (now_us() - t_start) / 1e6;
}

static uint64_t rng_state;

static uint64_t
rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

/* uniform in [0, n) */
static int
rnd(int n)
{
	return n <= 1 ? 0 : (int) (rng() % (uint64_t) n);
}

/* percent chance */
static bool
chance(int pct)
{
	return rnd(100) < pct;
}

/* a random interval around mean_ms (uniform in [mean/2, 3 mean/2]), in us */
static int64_t
around_us(int mean_ms)
{
	int64_t		mean = (int64_t) mean_ms * 1000;

	return mean / 2 + (int64_t) (rng() % (uint64_t) (mean + 1));
}

/*---- violations and tool errors ----*/
static long violations = 0;
static long tool_errors = 0;

static void
report_line(const char *what, const char *fmt, va_list ap)
{
	printf("[%8.3f s] %s: ", elapsed_s(), what);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
}

/* count one more problem of a kind; print the first few of each kind */
static void
report_counted(long *count, const char *what, const char *fmt, va_list ap)
{
	(*count)++;
	if (*count <= MAX_SHOWN_VIOLATIONS)
		report_line(what, fmt, ap);
}

static void
violation(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	report_counted(&violations, "VIOLATION", fmt, ap);
	va_end(ap);
}

static void
tool_error(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	report_counted(&tool_errors, "TOOL ERROR", fmt, ap);
	va_end(ap);
}

static void
note(const char *fmt,...)
{
	va_list		ap;

	if (!opt_verbose)
		return;
	va_start(ap, fmt);
	report_line("note", fmt, ap);
	va_end(ap);
}

static void
fatal(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "bulkhead_stress: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

/*---- statements a client sends ----*/
typedef enum StepKind
{
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_SAVEPOINT,
	ST_ROLLBACK_TO,
	ST_RELEASE_SP,
	ST_ACQ,						/* bulkhead_acquire */
	ST_ACQ_X,					/* bulkhead_acquire_xact */
	ST_TRY,						/* bulkhead_try_acquire */
	ST_TRY_X,					/* bulkhead_try_acquire_xact */
	ST_WORK,					/* pg_sleep(0..20 ms) */
	ST_REL,						/* bulkhead_release */
	ST_REL_ALL,					/* bulkhead_release_all */
	ST_VERIFY,					/* own rows of bulkhead_activity */
	ST__COUNT
} StepKind;

static const char *const step_names[ST__COUNT] = {
	"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "ROLLBACK TO SAVEPOINT",
	"RELEASE SAVEPOINT", "bulkhead_acquire", "bulkhead_acquire_xact",
	"bulkhead_try_acquire", "bulkhead_try_acquire_xact", "work (pg_sleep)",
	"bulkhead_release", "bulkhead_release_all", "verify own permits"
};

typedef struct StepStats
{
	long		sent;
	long		ok;				/* try: true */
	long		ok_false;		/* try: false */
	long		full;			/* 53B01 */
	long		timeout;		/* 53B02 */
	long		cancelled;		/* 57014 */
	long		killed;			/* connection ended (terminate) */
	long		other;			/* unexpected errors (violations) */
} StepStats;

static StepStats step_stats[ST__COUNT];

typedef enum Scenario
{
	SC_SESSION,
	SC_SESSION_IN_XACT,
	SC_XACT,
	SC_SAVEPOINT,
	SC_TRY,
	SC_TRY_XACT,
	SC_NESTED,
	SC__COUNT
} Scenario;

static const char *const scenario_names[SC__COUNT] = {
	"session: acquire, work, release",
	"session in a transaction: begin, acquire, work, commit/rollback, release",
	"transaction: begin, acquire_xact, work, commit/rollback",
	"savepoint: begin, [acquire_xact], savepoint, acquire_xact, work, rollback to/release savepoint, commit/rollback",
	"try: try_acquire, work, release",
	"try transaction: begin, try_acquire_xact, work, commit/rollback",
	"nested: acquire A, try_acquire B, work, release B/A or release_all",
};

static long scenario_count[SC__COUNT];
static long locked_work = 0;	/* work steps under a workload's lock */
static long ops_done = 0;
static long error_paths = 0;

/*---- chaos counters ----*/
static long cancels_waiting = 0;
static long cancels_working = 0;
static long cancel_failures = 0;
static long terminates_sent = 0;
static long reconnects = 0;
static long connect_failures = 0;
static long limit_updates = 0;
static long limit_lowered = 0;
static long limit_updates_adaptive = 0;	/* of a workload adaptive before or after */
static long limit_pauses = 0;
static long limit_resumes = 0;
static long limit_min_changes = 0;
static long adaptive_on = 0;
static long adaptive_off = 0;

/*---- client-side checks ----*/
static long checks_verify = 0;
static long checks_release = 0;
static long checks_release_all = 0;
static int64_t max_acquire_overrun = 0;
static long stuck_statements = 0;

/*---- clients ----*/
typedef struct Step
{
	StepKind	kind;
	int			w;				/* workload, or -1 */
	int			needs;			/* skip unless this workload is held, or -1 */
	int			arg_ms;			/* timeout (-1: default, -2: omitted) / work */
	bool		lock;			/* work: under the lock of workload needs */
} Step;

typedef enum ClientState
{
	CS_DEAD,					/* waits for wake_at, then connects */
	CS_CONNECTING,
	CS_READY,					/* connected, next op at wake_at */
	CS_BUSY,					/* a statement in flight */
	CS_DONE
} ClientState;

typedef struct Client
{
	int			id;
	ClientState st;
	PGconn	   *conn;
	PGcancel   *cancel;
	int			pid;
	PostgresPollingStatusType cpoll;
	int64_t		wake_at;
	int64_t		sent_at;
	bool		flush_pending;
	PGresult   *res;			/* first result of the statement in flight */

	Step		steps[MAX_STEPS];
	int			nsteps;
	int			cur;
	bool		in_sp;			/* inside the scenario's savepoint */
	bool		error_path;
	int			error_chain;
	bool		final_step;		/* the final verification was scripted */
	bool		stuck_reported;
	bool		backoff;		/* rejected or timed out: pause longer */

	/* what the client believes it holds (bit per workload) */
	unsigned	sure_s;			/* session permits surely held */
	unsigned	maybe_s;		/* session permits perhaps held */
	unsigned	sure_x;			/* transaction permits held */
	unsigned	sp_x;			/* ... of them, taken after the savepoint */
} Client;

static Client *clients;
static bool stopping = false;
static volatile sig_atomic_t interrupted = 0;

static void
on_signal(int sig)
{
	interrupted = 1;
}

static int
popcount(unsigned x)
{
	return __builtin_popcount(x);
}

static void
client_lost(Client *c, bool count_reconnect)
{
	if (c->res)
		PQclear(c->res);
	c->res = NULL;
	if (c->cancel)
		PQfreeCancel(c->cancel);
	c->cancel = NULL;
	if (c->conn)
		PQfinish(c->conn);
	c->conn = NULL;
	c->pid = 0;
	c->sure_s = c->maybe_s = c->sure_x = c->sp_x = 0;
	c->nsteps = c->cur = 0;
	c->in_sp = false;
	c->error_path = false;
	c->error_chain = 0;
	c->flush_pending = false;
	c->backoff = false;
	if (stopping)
		c->st = CS_DONE;
	else
	{
		if (count_reconnect)
			reconnects++;
		c->st = CS_DEAD;
		c->wake_at = now_us() + rnd(5000);
	}
}

static const char *conn_keywords[] = {"dbname", "application_name", "fallback_application_name", NULL};

static PGconn *
start_connect(const char *appname)
{
	const char *values[] = {opt_conninfo, appname, "bulkhead_stress", NULL};

	return PQconnectStartParams(conn_keywords, values, 1);
}

static void
client_connect(Client *c)
{
	c->conn = start_connect("bulkhead_stress client");
	if (c->conn == NULL || PQstatus(c->conn) == CONNECTION_BAD)
	{
		connect_failures++;
		if (c->conn)
			PQfinish(c->conn);
		c->conn = NULL;
		c->st = CS_DEAD;
		c->wake_at = now_us() + 50000;
		return;
	}
	c->st = CS_CONNECTING;
	c->cpoll = PGRES_POLLING_WRITING;
}

static void client_advance(Client *c);

/* Notices (and a FATAL that arrives between statements) are not printed */
static long notices = 0;

static void
count_notice(void *arg, const char *message)
{
	notices++;
}

static void
client_connect_poll(Client *c)
{
	c->cpoll = PQconnectPoll(c->conn);
	if (c->cpoll == PGRES_POLLING_FAILED)
	{
		connect_failures++;
		note("client %d: connection failed: %s", c->id, PQerrorMessage(c->conn));
		PQfinish(c->conn);
		c->conn = NULL;
		if (stopping)
			c->st = CS_DONE;
		else
		{
			c->st = CS_DEAD;
			c->wake_at = now_us() + 20000 + rnd(30000);
		}
		return;
	}
	if (c->cpoll != PGRES_POLLING_OK)
		return;
	if (PQsetnonblocking(c->conn, 1) != 0)
		fatal("PQsetnonblocking failed");
	PQsetNoticeProcessor(c->conn, count_notice, NULL);
	c->pid = PQbackendPID(c->conn);
	c->cancel = PQgetCancel(c->conn);
	c->st = CS_READY;
	c->wake_at = now_us() + rnd(opt_think_ms * 1000 + 1);
}

/*---- scripts ----*/
static void
push(Client *c, StepKind kind, int w, int needs, int arg_ms)
{
	Step	   *s;

	if (c->nsteps >= MAX_STEPS)
		fatal("script too long");
	s = &c->steps[c->nsteps++];
	s->kind = kind;
	s->w = w;
	s->needs = needs;
	s->arg_ms = arg_ms;
	/*
	 * Work under a permit of a workload that is or may become adaptive
	 * takes, at times, a lock of that workload: its holders then wait for
	 * each other as on a hot row, which is what makes the worker lower the
	 * limit (adaptive.c counts a holder waiting for a lock as blocked).
	 */
	s->lock = kind == ST_WORK && needs >= 0 &&
		(orig_cfg[needs].adaptive || may_toggle[needs]) && chance(opt_lock_pct);
	if (s->lock)
		locked_work++;
}

/* a wait bound for acquire: default queue_timeout, zero, or 1..40 ms */
static int
acquire_timeout(void)
{
	int			r = rnd(100);

	if (r < 20)
		return -1;
	if (r < 30)
		return 0;
	return 1 + rnd(40);
}

/* for try_acquire: omitted (default '0'), zero, or 1..30 ms */
static int
try_timeout(void)
{
	int			r = rnd(100);

	if (r < 40)
		return -2;
	if (r < 50)
		return 0;
	return 1 + rnd(30);
}

static int
work_ms(void)
{
	return rnd(21);
}

static void
build_op(Client *c)
{
	int			w = rnd(nworkloads);
	int			w2 = (w + 1 + rnd(nworkloads - 1)) % nworkloads;
	int			r = rnd(100);
	Scenario	sc;

	c->nsteps = c->cur = 0;
	c->error_path = false;
	c->error_chain = 0;
	c->in_sp = false;

	if (r < 18)
		sc = SC_SESSION;
	else if (r < 26)
		sc = SC_SESSION_IN_XACT;
	else if (r < 46)
		sc = SC_XACT;
	else if (r < 58)
		sc = SC_SAVEPOINT;
	else if (r < 74)
		sc = SC_TRY;
	else if (r < 86)
		sc = SC_TRY_XACT;
	else
		sc = nworkloads > 1 ? SC_NESTED : SC_SESSION;
	scenario_count[sc]++;

	switch (sc)
	{
		case SC_SESSION:
			push(c, ST_ACQ, w, -1, acquire_timeout());
			push(c, ST_WORK, -1, w, work_ms());
			push(c, ST_REL, w, w, 0);
			break;
		case SC_SESSION_IN_XACT:
			push(c, ST_BEGIN, -1, -1, 0);
			push(c, ST_ACQ, w, -1, acquire_timeout());
			push(c, ST_WORK, -1, w, work_ms());
			push(c, chance(50) ? ST_COMMIT : ST_ROLLBACK, -1, -1, 0);
			if (chance(30))
				push(c, ST_VERIFY, -1, -1, 0);	/* the session permit is kept */
			push(c, ST_REL, w, w, 0);
			break;
		case SC_XACT:
			push(c, ST_BEGIN, -1, -1, 0);
			push(c, ST_ACQ_X, w, -1, acquire_timeout());
			push(c, ST_WORK, -1, w, work_ms());
			if (chance(20))
				push(c, ST_VERIFY, -1, -1, 0);
			push(c, chance(60) ? ST_COMMIT : ST_ROLLBACK, -1, -1, 0);
			if (chance(20))
				push(c, ST_VERIFY, -1, -1, 0);
			break;
		case SC_SAVEPOINT:
			push(c, ST_BEGIN, -1, -1, 0);
			if (nworkloads > 1 && chance(50))
				push(c, ST_ACQ_X, w2, -1, acquire_timeout());
			push(c, ST_SAVEPOINT, -1, -1, 0);
			push(c, ST_ACQ_X, w, -1, acquire_timeout());
			push(c, ST_WORK, -1, w, work_ms());
			push(c, chance(70) ? ST_ROLLBACK_TO : ST_RELEASE_SP, -1, -1, 0);
			push(c, ST_VERIFY, -1, -1, 0);
			push(c, ST_WORK, -1, -1, work_ms() / 2);
			push(c, chance(60) ? ST_COMMIT : ST_ROLLBACK, -1, -1, 0);
			if (chance(20))
				push(c, ST_VERIFY, -1, -1, 0);
			break;
		case SC_TRY:
			push(c, ST_TRY, w, -1, try_timeout());
			push(c, ST_WORK, -1, w, work_ms());
			push(c, ST_REL, w, w, 0);
			break;
		case SC_TRY_XACT:
			push(c, ST_BEGIN, -1, -1, 0);
			push(c, ST_TRY_X, w, -1, try_timeout());
			push(c, ST_WORK, -1, w, work_ms());
			if (chance(20))
				push(c, ST_VERIFY, -1, -1, 0);
			push(c, chance(60) ? ST_COMMIT : ST_ROLLBACK, -1, -1, 0);
			break;
		case SC_NESTED:
			push(c, ST_ACQ, w, -1, acquire_timeout());
			push(c, ST_TRY, w2, w, try_timeout());
			push(c, ST_WORK, -1, w, work_ms());
			if (chance(20))
				push(c, ST_VERIFY, -1, -1, 0);
			if (chance(50))
				push(c, ST_REL_ALL, -1, -1, 0);
			else
			{
				push(c, ST_REL, w2, w2, 0);
				push(c, ST_REL, w, w, 0);
			}
			break;
		case SC__COUNT:
			break;
	}
}

/*
 * After an error: roll back an open transaction, release every session
 * permit the client holds or may hold, and check its own permits.
 */
static void
build_error_path(Client *c)
{
	error_paths++;
	c->nsteps = c->cur = 0;
	c->error_path = true;
	c->in_sp = false;
	if (PQtransactionStatus(c->conn) != PQTRANS_IDLE)
		push(c, ST_ROLLBACK, -1, -1, 0);
	if (c->sure_s | c->maybe_s)
		push(c, ST_REL_ALL, -1, -1, 0);
	if (chance(50))
		push(c, ST_VERIFY, -1, -1, 0);
}

static void
timeout_arg(char *buf, size_t n, int ms)
{
	if (ms == -2)
		buf[0] = '\0';
	else if (ms == -1)
		snprintf(buf, n, ", NULL");
	else if (ms == 0)
		snprintf(buf, n, ", '0'");
	else
		snprintf(buf, n, ", '%d ms'", ms);
}

static void
step_sql(const Step *s, char *buf, size_t n)
{
	char		t[32];

	switch (s->kind)
	{
		case ST_BEGIN:
			snprintf(buf, n, "BEGIN");
			break;
		case ST_COMMIT:
			snprintf(buf, n, "COMMIT");
			break;
		case ST_ROLLBACK:
			snprintf(buf, n, "ROLLBACK");
			break;
		case ST_SAVEPOINT:
			snprintf(buf, n, "SAVEPOINT s");
			break;
		case ST_ROLLBACK_TO:
			snprintf(buf, n, "ROLLBACK TO SAVEPOINT s");
			break;
		case ST_RELEASE_SP:
			snprintf(buf, n, "RELEASE SAVEPOINT s");
			break;
		case ST_ACQ:
		case ST_ACQ_X:
			timeout_arg(t, sizeof(t), s->arg_ms);
			snprintf(buf, n, "SELECT bulkhead_acquire%s(%s%s)",
					 s->kind == ST_ACQ_X ? "_xact" : "", wlit[s->w], t);
			break;
		case ST_TRY:
		case ST_TRY_X:
			timeout_arg(t, sizeof(t), s->arg_ms);
			snprintf(buf, n, "SELECT bulkhead_try_acquire%s(%s%s)",
					 s->kind == ST_TRY_X ? "_xact" : "", wlit[s->w], t);
			break;
		case ST_WORK:
			if (s->lock)
				snprintf(buf, n, "SELECT pg_advisory_xact_lock(4242, %d), pg_sleep(%d / 1000.0)",
						 s->needs, s->arg_ms);
			else
				snprintf(buf, n, "SELECT pg_sleep(%d / 1000.0)", s->arg_ms);
			break;
		case ST_REL:
			snprintf(buf, n, "SELECT bulkhead_release(%s)", wlit[s->w]);
			break;
		case ST_REL_ALL:
			snprintf(buf, n, "SELECT bulkhead_release_all()");
			break;
		case ST_VERIFY:
			snprintf(buf, n,
					 "SELECT string_agg(workload || ':' || scope || ':' || state, ','"
					 " ORDER BY workload COLLATE \"C\")"
					 " FROM bulkhead_activity WHERE pid = pg_backend_pid()");
			break;
		case ST__COUNT:
			break;
	}
}

/* What VERIFY must return, from what the client believes it holds */
static void
expected_own(Client *c, char *buf, size_t n)
{
	int			order[MAX_WORKLOADS];
	int			i,
				j;
	size_t		len = 0;

	for (i = 0; i < nworkloads; i++)
		order[i] = i;
	for (i = 1; i < nworkloads; i++)
		for (j = i; j > 0 && strcmp(wname[order[j - 1]], wname[order[j]]) > 0; j--)
		{
			int			tmp = order[j];

			order[j] = order[j - 1];
			order[j - 1] = tmp;
		}
	buf[0] = '\0';
	for (i = 0; i < nworkloads; i++)
	{
		int			w = order[i];
		const char *scope = NULL;

		if (c->sure_s & (1u << w))
			scope = "session";
		else if (c->sure_x & (1u << w))
			scope = "transaction";
		if (scope)
			len += snprintf(buf + len, n - len, "%s%s:%s:running",
							len ? "," : "", wname[w], scope);
	}
}

static bool
step_runnable(Client *c, const Step *s)
{
	if (s->kind == ST_VERIFY && c->maybe_s)
		return false;			/* not knowable exactly */
	if (s->needs < 0)
		return true;
	if (s->kind == ST_REL)
		return (c->sure_s & (1u << s->needs)) != 0;
	return ((c->sure_s | c->sure_x) & (1u << s->needs)) != 0;
}

static void
client_send(Client *c)
{
	char		sql[512];
	Step	   *s = &c->steps[c->cur];
	int			rc;

	step_sql(s, sql, sizeof(sql));
	step_stats[s->kind].sent++;
	if (!PQsendQuery(c->conn, sql))
	{
		if (PQstatus(c->conn) == CONNECTION_BAD)
		{
			step_stats[s->kind].killed++;
			client_lost(c, true);
			return;
		}
		tool_error("client %d: PQsendQuery: %s", c->id, PQerrorMessage(c->conn));
		client_lost(c, true);
		return;
	}
	c->st = CS_BUSY;
	c->sent_at = now_us();
	rc = PQflush(c->conn);
	if (rc < 0)
	{
		step_stats[s->kind].killed++;
		client_lost(c, true);
		return;
	}
	c->flush_pending = rc == 1;
}

static void
client_advance(Client *c)
{
	for (;;)
	{
		while (c->cur < c->nsteps && !step_runnable(c, &c->steps[c->cur]))
			c->cur++;
		if (c->cur < c->nsteps)
		{
			client_send(c);
			return;
		}
		/* the script is done */
		if (c->nsteps > 0 && !c->error_path && !c->final_step)
			ops_done++;
		if (c->final_step)
		{
			client_lost(c, false);	/* CS_DONE while stopping */
			c->st = CS_DONE;
			return;
		}
		if (stopping)
		{
			c->nsteps = c->cur = 0;
			c->error_path = false;
			if (PQtransactionStatus(c->conn) != PQTRANS_IDLE)
			{
				violation("client %d: a transaction is still open at the end of an operation", c->id);
				push(c, ST_ROLLBACK, -1, -1, 0);
			}
			if (c->sure_s | c->maybe_s)
			{
				violation("client %d: session permits still held at the end of an operation", c->id);
				push(c, ST_REL_ALL, -1, -1, 0);
			}
			push(c, ST_VERIFY, -1, -1, 0);
			c->final_step = true;
			continue;
		}
		c->nsteps = c->cur = 0;
		c->st = CS_READY;
		/* like a client that backs off after 53B01/53B02 (or try = false) */
		c->wake_at = now_us() + (c->backoff ? 1000 + rnd(opt_backoff_ms * 1000) :
								 rnd(opt_think_ms * 1000 + 1));
		c->backoff = false;
		return;
	}
}

static bool
is_fatal_result(PGresult *res)
{
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

	return sev && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0);
}

static void
client_result(Client *c, PGresult *res)
{
	Step	   *s = &c->steps[c->cur];
	StepStats  *st = &step_stats[s->kind];
	unsigned	bit = s->w >= 0 ? 1u << s->w : 0;
	ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	c->st = CS_READY;			/* no statement in flight */
	c->stuck_reported = false;

	/* how long a wait for a permit took beyond its bound (information) */
	if (s->kind == ST_ACQ || s->kind == ST_ACQ_X || s->kind == ST_TRY || s->kind == ST_TRY_X)
	{
		int			bound = s->arg_ms == -1 ? queue_timeout_ms[s->w] :
		s->arg_ms == -2 ? 0 : s->arg_ms;
		int64_t		over = now_us() - c->sent_at - (int64_t) bound * 1000;

		if (over > max_acquire_overrun)
			max_acquire_overrun = over;
	}

	if (res == NULL || PQstatus(c->conn) == CONNECTION_BAD || is_fatal_result(res))
	{
		const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

		/* terminated: 57P01; anything else that ends a connection is a bug */
		if (state && strcmp(state, "57P01") != 0 && strncmp(state, "08", 2) != 0)
			violation("client %d: %s ended the connection with %s: %s",
					  c->id, step_names[s->kind], state,
					  PQresultErrorMessage(res));
		st->killed++;
		client_lost(c, true);
		return;
	}

	if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
	{
		const char *v = (status == PGRES_TUPLES_OK && PQntuples(res) > 0) ?
		PQgetvalue(res, 0, 0) : "";
		bool		isnull = (status == PGRES_TUPLES_OK && PQntuples(res) > 0) ?
		PQgetisnull(res, 0, 0) : true;

		c->error_chain = 0;
		switch (s->kind)
		{
			case ST_ACQ:
				c->sure_s |= bit;
				st->ok++;
				break;
			case ST_ACQ_X:
				c->sure_x |= bit;
				if (c->in_sp)
					c->sp_x |= bit;
				st->ok++;
				break;
			case ST_TRY:
			case ST_TRY_X:
				if (strcmp(v, "t") == 0)
				{
					st->ok++;
					if (s->kind == ST_TRY)
						c->sure_s |= bit;
					else
					{
						c->sure_x |= bit;
						if (c->in_sp)
							c->sp_x |= bit;
					}
				}
				else
				{
					st->ok_false++;
					c->backoff = true;
				}
				break;
			case ST_SAVEPOINT:
				c->in_sp = true;
				c->sp_x = 0;
				st->ok++;
				break;
			case ST_ROLLBACK_TO:
				c->sure_x &= ~c->sp_x;
				c->sp_x = 0;
				c->in_sp = false;	/* later steps are not under it */
				st->ok++;
				break;
			case ST_RELEASE_SP:
				c->sp_x = 0;
				c->in_sp = false;
				st->ok++;
				break;
			case ST_REL:
				checks_release++;
				c->sure_s &= ~bit;
				st->ok++;
				break;
			case ST_REL_ALL:
				{
					int			n = atoi(v);
					int			lo = popcount(c->sure_s);
					int			hi = popcount(c->sure_s | c->maybe_s);

					checks_release_all++;
					if (n < lo || n > hi)
						violation("client %d (pid %d): bulkhead_release_all() released %d permits, expected %d..%d",
								  c->id, c->pid, n, lo, hi);
					c->sure_s = c->maybe_s = 0;
					st->ok++;
					break;
				}
			case ST_VERIFY:
				{
					char		expect[MAX_WORKLOADS * 100];

					checks_verify++;
					expected_own(c, expect, sizeof(expect));
					if (strcmp(isnull ? "" : v, expect) != 0)
						violation("client %d (pid %d): own permits in bulkhead_activity are \"%s\", expected \"%s\"",
								  c->id, c->pid, isnull ? "" : v, expect);
					st->ok++;
					break;
				}
			default:
				st->ok++;
				break;
		}
		if (PQtransactionStatus(c->conn) == PQTRANS_IDLE)
		{
			c->sure_x = c->sp_x = 0;
			c->in_sp = false;
		}
		c->cur++;
		client_advance(c);
		return;
	}

	/* an error */
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		bool		expected = false;

		if (state == NULL)
			state = "?????";
		if (strcmp(state, "57014") == 0)
		{
			/* a cancel (ours, possibly racing into the next statement) or a guard */
			st->cancelled++;
			expected = true;
			if (s->kind == ST_ACQ || s->kind == ST_TRY)
				c->maybe_s |= bit;	/* cancel just after the grant: kept */
			else if (s->kind == ST_REL)
			{
				c->maybe_s |= bit;
				c->sure_s &= ~bit;
			}
			else if (s->kind == ST_REL_ALL)
			{
				c->maybe_s |= c->sure_s;
				c->sure_s = 0;
			}
		}
		else if ((s->kind == ST_ACQ || s->kind == ST_ACQ_X) &&
				 strcmp(state, "53B01") == 0)
		{
			st->full++;
			expected = true;
			c->backoff = true;
		}
		else if ((s->kind == ST_ACQ || s->kind == ST_ACQ_X) &&
				 strcmp(state, "53B02") == 0)
		{
			st->timeout++;
			expected = true;
			c->backoff = true;
		}
		if (!expected)
		{
			st->other++;
			violation("client %d (pid %d): %s failed unexpectedly with %s: %s",
					  c->id, c->pid, step_names[s->kind], state,
					  PQresultErrorMessage(res));
			if (s->kind == ST_REL)
			{
				/* not held after all: do not release it again */
				c->sure_s &= ~bit;
			}
		}
		if (PQtransactionStatus(c->conn) == PQTRANS_IDLE)
		{
			c->sure_x = c->sp_x = 0;
			c->in_sp = false;
		}
		if (++c->error_chain > 10)
		{
			tool_error("client %d: too many errors in a row; reconnecting", c->id);
			client_lost(c, true);
			return;
		}
		build_error_path(c);
		client_advance(c);
	}
}

/* Read what arrived for a client with a statement in flight */
static void
client_input(Client *c)
{
	if (!PQconsumeInput(c->conn))
	{
		/* the connection broke: collect what libpq has, then give up */
		PGresult   *r;
		PGresult   *res;

		while ((r = PQgetResult(c->conn)) != NULL)
		{
			if (c->res == NULL)
				c->res = r;
			else
				PQclear(r);
			if (PQstatus(c->conn) == CONNECTION_BAD)
				break;
		}
		/* client_result() sees CONNECTION_BAD and checks why it ended */
		res = c->res;
		c->res = NULL;
		client_result(c, res);
		if (res)
			PQclear(res);
		return;
	}
	while (!PQisBusy(c->conn))
	{
		PGresult   *r = PQgetResult(c->conn);

		if (r == NULL)
		{
			PGresult   *res = c->res;

			c->res = NULL;
			client_result(c, res);
			if (res)
				PQclear(res);
			return;
		}
		if (c->res == NULL)
			c->res = r;
		else
			PQclear(r);
		if (PQstatus(c->conn) == CONNECTION_BAD)
		{
			PGresult   *res = c->res;

			c->res = NULL;
			client_result(c, res);
			if (res)
				PQclear(res);
			return;
		}
	}
}

/*---- monitor ----*/
typedef struct StatsRow
{
	bool		present;
	bool		enforce;
	int64_t		max_running,
				max_queued,
				running,
				queued,
				acquired,
				released,
				cancelled,
				timed_out,
				rejected_full,
				deadlocks,
				current_limit;
	int64_t		t_lo;			/* the read happened at or after this */
	int64_t		t_hi;			/* and at or before this (server clock, us) */
} StatsRow;

typedef struct ActRow
{
	int64_t		running,
				queued,
				dup;
	int64_t		t_us;
	bool		present;
} ActRow;

/*
 * Below this span between two reads of an adaptive workload (server clock:
 * from the earliest the first read can have happened to the latest the
 * second can), the worker made at most one decision in between.  Its loop
 * (worker.c) decides only when 200 ms (BULKHEAD_DECIDE_MS) have passed
 * since the clock reading at the top of the loop of its previous decision;
 * two decisions within a span shorter than 50 ms would need the earlier
 * one to come more than 150 ms after its own loop's clock reading (a load,
 * a reap and a sample are milliseconds).  Longer spans are checked against
 * max_running, which bounds whatever the decisions did.
 */
#define SINGLE_DECISION_US	50000
#define LIMIT_SEEN_MAX		256

typedef struct WState
{
	/* the previous read of the workload's bulkhead_stats row */
	bool		have_prev;
	bool		counted;		/* a read compared with a previous one */
	int64_t		prev_running;
	int64_t		prev_queued;
	int64_t		prev_limit;
	WConfig		prev_cfg;
	int64_t		prev_t_lo;

	/* figures */
	bool		was_over;		/* the previous row had running > current_limit */
	long		transient_samples;
	long		transient_episodes;
	long		spans_single;	/* adaptive spans checked against current_limit */
	long		spans_long;		/* ... against max_running (long spans) */
	long		worker_up;		/* changes of current_limit by the worker seen */
	long		worker_down;
	long		reads_adaptive;
	int64_t		limit_lo,		/* current_limit seen while adaptive */
				limit_hi;
	bool		limit_seen[LIMIT_SEEN_MAX];
} WState;

static WState wstate[MAX_WORKLOADS];

/*
 * The configuration in shared memory as the monitor last saw it, and a
 * change the tool made that the monitor has not seen yet.  The next change
 * of that workload waits for it, so that the worker applies at most one
 * change of a workload between two reads of it.  Every change gives
 * (max_running, max_queued), which bulkhead_stats shows, a value other
 * than the one in force: a row shows the new pair only once the worker has
 * copied the whole new row (adaptive and min_running with it) into shared
 * memory, under the same lock as the row's other columns.
 */
static WConfig cur_cfg[MAX_WORKLOADS];
static WConfig pend_cfg[MAX_WORKLOADS];
static bool limit_pending[MAX_WORKLOADS];
static int64_t pending_since[MAX_WORKLOADS];
static int64_t max_apply_us = 0;
static PGconn *monitor;
static bool monitor_busy = false;
static int64_t monitor_sent_at = 0;
static int64_t monitor_last_done = 0;
static int64_t monitor_max_gap = 0;
static long monitor_long_gaps = 0;	/* over 50 ms */
static PGresult *monitor_res = NULL;

static long samples = 0;
static long checks_running = 0;
static long checks_sum = 0;
static long checks_bounds = 0;
static long checks_conserving = 0;
static long checks_config = 0;
static long checks_activity = 0;
static long checks_dup = 0;
static long nonquiet = 0;
static long transient_mismatch = 0;

static const char *monitor_sql =
"SELECT 1 AS part, workload, max_running::int8, max_queued::int8,"
" running::int8, queued::int8, acquired, released, cancelled, timed_out,"
" rejected_full, deadlocks, current_limit::int8, mode = 'enforce' AS enforce,"
" (extract(epoch FROM clock_timestamp()) * 1000000)::int8 AS t,"
" (extract(epoch FROM statement_timestamp()) * 1000000)::int8 AS t0"
" FROM bulkhead_stats"
" UNION ALL"
" SELECT 2, workload, 0, 0, count(*) FILTER (WHERE state = 'running'),"
" count(*) FILTER (WHERE state = 'queued'), count(*) - count(DISTINCT pid),"
" 0, 0, 0, 0, 0, 0, true, max((extract(epoch FROM clock_timestamp()) * 1000000)::int8), 0"
" FROM bulkhead_activity GROUP BY workload"
" UNION ALL"
" SELECT 3, workload, max_running, max_queued, running, queued, acquired,"
" released, cancelled, timed_out, rejected_full, deadlocks, current_limit,"
" mode = 'enforce', (extract(epoch FROM clock_timestamp()) * 1000000)::int8, 0"
" FROM bulkhead_stats";

static int
workload_index(const char *name)
{
	int			i;

	for (i = 0; i < nworkloads; i++)
		if (strcmp(wname[i], name) == 0)
			return i;
	return -1;
}

static int64_t
max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

static bool
same_pair(const WConfig *a, int64_t max_running, int64_t max_queued)
{
	return a->max_running == max_running && a->max_queued == max_queued;
}

/*
 * The limit the worker puts in force when it loads row cfg into a slot
 * whose configuration was old and limit was limit (bulkhead_limit_at_load()
 * in adaptive.c), or -1 when the worker chooses its starting point within
 * [min_running, max_running]: a workload that becomes adaptive or resumes
 * from a pause (the start is the worker's to choose, and has changed).
 */
static int64_t
limit_at_load(int64_t limit, const WConfig *old, const WConfig *cfg)
{
	if (!cfg->adaptive || cfg->max_running == 0)
		return cfg->max_running;
	if (!old->adaptive || limit < 1)
		return -1;
	return max64(cfg->min_running,
				 limit < cfg->max_running ? limit : cfg->max_running);
}

static void
describe_cfg(const WConfig *c, char *buf, size_t n)
{
	snprintf(buf, n, "%d/%d%s", c->max_running, c->max_queued,
			 c->adaptive ? ", adaptive" : "");
	if (c->adaptive)
		snprintf(buf + strlen(buf), n - strlen(buf), " min %d", c->min_running);
}

/*
 * The checks on one bulkhead_stats row (one state of the workload, copied
 * under its lock), alone and against the previous read of the workload.
 */
static void
check_stats_row(int w, const StatsRow *r, const char *which)
{
	WState	   *ws = &wstate[w];
	WConfig		cfg;
	int64_t		R = r->running,
				Q = r->queued,
				L = r->current_limit;

	if (!r->enforce)
	{
		violation("workload %s is not in enforce mode", wname[w]);
		return;
	}

	/* which configuration the row shows: the one in force, or the next */
	checks_config++;
	if (limit_pending[w] && same_pair(&pend_cfg[w], r->max_running, r->max_queued))
	{
		int64_t		d = now_us() - pending_since[w];

		cur_cfg[w] = pend_cfg[w];
		limit_pending[w] = false;
		if (d > max_apply_us)
			max_apply_us = d;
	}
	if (!same_pair(&cur_cfg[w], r->max_running, r->max_queued))
	{
		char		c1[64];

		describe_cfg(&cur_cfg[w], c1, sizeof(c1));
		violation("workload %s (%s): bulkhead_stats shows max_running %" PRId64
				  ", max_queued %" PRId64 ", neither the row in force (%s) nor the"
				  " one the tool set since", wname[w], which,
				  r->max_running, r->max_queued, c1);
		ws->have_prev = false;
		return;
	}
	cfg = cur_cfg[w];

	if (R < 0 || Q < 0)
		violation("workload %s (%s): running %" PRId64 ", queued %" PRId64 " below zero",
				  wname[w], which, R, Q);

	/* current_limit within its bounds */
	checks_bounds++;
	if (!cfg.adaptive)
	{
		if (L != cfg.max_running)
			violation("workload %s (%s): current_limit %" PRId64 " but max_running %d"
					  " (not adaptive)", wname[w], which, L, cfg.max_running);
	}
	else if (cfg.max_running == 0)
	{
		if (L != 0)
			violation("workload %s (%s): current_limit %" PRId64 " while paused"
					  " (adaptive, max_running 0)", wname[w], which, L);
	}
	else if (L < cfg.min_running || L > cfg.max_running)
		violation("workload %s (%s): current_limit %" PRId64 " outside [min_running %d,"
				  " max_running %d] (adaptive)", wname[w], which, L,
				  cfg.min_running, cfg.max_running);

	/* a permit is never free while someone is queued */
	checks_conserving++;
	if (Q > 0 && R < L)
		violation("workload %s (%s): %" PRId64 " queued while only %" PRId64
				  " permits are held, current_limit %" PRId64,
				  wname[w], which, Q, R, L);

	if (cfg.adaptive)
	{
		ws->reads_adaptive++;
		if (ws->reads_adaptive == 1 || L < ws->limit_lo)
			ws->limit_lo = L;
		if (ws->reads_adaptive == 1 || L > ws->limit_hi)
			ws->limit_hi = L;
		if (L >= 0 && L < LIMIT_SEEN_MAX)
			ws->limit_seen[L] = true;
	}

	/* running (R + Q) grew only up to a limit (+ max_queued) in force */
	if (ws->have_prev)
	{
		const WConfig *o = &ws->prev_cfg;
		bool		changed = !same_pair(o, cfg.max_running, cfg.max_queued);
		bool		adaptive = o->adaptive || cfg.adaptive;
		bool		single = r->t_hi - ws->prev_t_lo < SINGLE_DECISION_US;
		int64_t		L0 = ws->prev_limit;
		int64_t		y = changed ? limit_at_load(L0, o, &cfg) : L0;
		bool		y_known = y >= 0;
		int64_t		l_hi,
					s_hi;

		/*
		 * The limits in force between the reads: L0 until the load of the
		 * changed row, if any, which sets y (at most max_running when the
		 * worker chooses it); the worker's decisions move the limit of an
		 * adaptive workload within its bounds, to L at the end.
		 */
		if (!y_known)
			y = cfg.max_running;
		l_hi = max64(max64(L0, L), y);
		s_hi = max64(max64(L0 + o->max_queued, L + cfg.max_queued),
					 y + cfg.max_queued);
		if (adaptive)
		{
			bool		any_before = o->adaptive && (changed || !single);
			bool		any_after = cfg.adaptive && !single;

			/*
			 * One decision at most (a short span): with the row unchanged it
			 * moved L0 to L; with a changed row it came after the load (y to
			 * L), or before it, from L0 to anything within the old bounds.
			 * Several decisions (a long span): anything within the bounds.
			 */
			if (any_before)
			{
				l_hi = max64(l_hi, o->max_running);
				s_hi = max64(s_hi, o->max_running + o->max_queued);
			}
			if (any_after)
			{
				l_hi = max64(l_hi, cfg.max_running);
				s_hi = max64(s_hi, cfg.max_running + cfg.max_queued);
			}
			if (single)
				ws->spans_single++;
			else
				ws->spans_long++;
		}

		checks_running++;
		if (R > max64(ws->prev_running, l_hi))
			violation("workload %s (%s): running grew from %" PRId64 " to %" PRId64
					  " above every limit in force meanwhile (current_limit %" PRId64
					  " then %" PRId64 ", at most %" PRId64 " in between; max_running %d"
					  " then %d)", wname[w], which, ws->prev_running, R, L0, L, l_hi,
					  o->max_running, cfg.max_running);
		checks_sum++;
		if (R + Q > max64(ws->prev_running + ws->prev_queued, s_hi))
			violation("workload %s (%s): running + queued grew from %" PRId64 " to %" PRId64
					  " above every current_limit + max_queued in force meanwhile (%" PRId64
					  " + %d then %" PRId64 " + %d, at most %" PRId64 " in between)",
					  wname[w], which, ws->prev_running + ws->prev_queued, R + Q,
					  L0, o->max_queued, L, cfg.max_queued, s_hi);

		/* the worker's changes: L moved without a load, or not as the load would */
		if (adaptive && ws->counted && y_known && L != y)
		{
			if (L > y)
				ws->worker_up++;
			else
				ws->worker_down++;
		}
		ws->counted = true;
	}

	/* information: above a lowered limit, draining */
	if (R > L)
	{
		if (!ws->was_over)
			ws->transient_episodes++;
		ws->transient_samples++;
		ws->was_over = true;
	}
	else
		ws->was_over = false;

	ws->have_prev = true;
	ws->prev_running = R;
	ws->prev_queued = Q;
	ws->prev_limit = L;
	ws->prev_cfg = cfg;
	ws->prev_t_lo = r->t_lo;
}

static void
monitor_process(PGresult *res)
{
	StatsRow	s1[MAX_WORKLOADS],
				s2[MAX_WORKLOADS];
	ActRow		a[MAX_WORKLOADS];
	int64_t		t0 = INT64_MAX,
				t1_max = INT64_MIN,
				t2_min = INT64_MAX,
				t2_max = INT64_MIN,
				t3_min = INT64_MAX;
	int			i,
				w;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		tool_error("monitor query failed: %s", PQresultErrorMessage(res));
		return;
	}
	memset(s1, 0, sizeof(s1));
	memset(s2, 0, sizeof(s2));
	memset(a, 0, sizeof(a));
	for (i = 0; i < PQntuples(res); i++)
	{
		int			part = atoi(PQgetvalue(res, i, 0));
		int64_t		v[11];
		int64_t		t = atoll(PQgetvalue(res, i, 14));
		int			k;

		w = workload_index(PQgetvalue(res, i, 1));
		for (k = 0; k < 11; k++)
			v[k] = atoll(PQgetvalue(res, i, 2 + k));
		if (part == 1)
		{
			int64_t		ts = atoll(PQgetvalue(res, i, 15));

			t0 = ts < t0 ? ts : t0;
			t1_max = t > t1_max ? t : t1_max;
		}
		else if (part == 2)
		{
			t2_min = t < t2_min ? t : t2_min;
			t2_max = t > t2_max ? t : t2_max;
		}
		else
			t3_min = t < t3_min ? t : t3_min;
		if (w < 0)
			continue;
		if (part == 1 || part == 3)
		{
			StatsRow   *r = part == 1 ? &s1[w] : &s2[w];

			r->present = true;
			r->max_running = v[0];
			r->max_queued = v[1];
			r->running = v[2];
			r->queued = v[3];
			r->acquired = v[4];
			r->released = v[5];
			r->cancelled = v[6];
			r->timed_out = v[7];
			r->rejected_full = v[8];
			r->deadlocks = v[9];
			r->current_limit = v[10];
			r->enforce = strcmp(PQgetvalue(res, i, 13), "t") == 0;
			r->t_hi = t;
		}
		else
		{
			a[w].present = true;
			a[w].running = v[2];
			a[w].queued = v[3];
			a[w].dup = v[4];
			a[w].t_us = t;
		}
	}
	/* the parts were read in order (the soundness of the quiet check) */
	if (t1_max > (t2_min == INT64_MAX ? t3_min : t2_min) ||
		(t2_max != INT64_MIN && t2_max > t3_min) || t0 > t1_max)
		tool_error("monitor parts were not read in order (%" PRId64 ", %" PRId64 ", %" PRId64
				   "..%" PRId64 ", %" PRId64 ")", t0, t1_max, t2_min, t2_max, t3_min);

	/*
	 * When each row was read: part 1 after the statement arrived, part 3
	 * after parts 1 and 2 were done; each before its own clock_timestamp()
	 * (bulkhead_stats materialises its rows before they are projected).
	 */
	for (w = 0; w < nworkloads; w++)
	{
		s1[w].t_lo = t0;
		s2[w].t_lo = t2_max > t1_max ? t2_max : t1_max;
	}

	samples++;
	for (w = 0; w < nworkloads; w++)
	{
		bool		quiet;

		if (!s1[w].present || !s2[w].present)
		{
			tool_error("workload %s is missing from bulkhead_stats", wname[w]);
			wstate[w].have_prev = false;
			continue;
		}
		check_stats_row(w, &s1[w], "sample");

		checks_dup++;
		if (a[w].dup > 0)
			violation("workload %s: %" PRId64 " backends appear more than once in bulkhead_activity",
					  wname[w], a[w].dup);

		quiet = s1[w].running == s2[w].running &&
			s1[w].queued == s2[w].queued &&
			s1[w].acquired == s2[w].acquired &&
			s1[w].released == s2[w].released &&
			s1[w].cancelled == s2[w].cancelled &&
			s1[w].timed_out == s2[w].timed_out &&
			s1[w].rejected_full == s2[w].rejected_full &&
			s1[w].deadlocks == s2[w].deadlocks;
		if (quiet)
		{
			checks_activity++;
			if (a[w].running != s1[w].running || a[w].queued != s1[w].queued)
				violation("workload %s: bulkhead_stats shows running %" PRId64
						  ", queued %" PRId64 " (twice, unchanged counters) but bulkhead_activity"
						  " has %" PRId64 " running and %" PRId64 " queued rows",
						  wname[w], s1[w].running, s1[w].queued,
						  a[w].running, a[w].queued);
		}
		else
		{
			nonquiet++;
			if (a[w].running != s1[w].running || a[w].queued != s1[w].queued)
				transient_mismatch++;
		}

		check_stats_row(w, &s2[w], "sample, second read");
	}
}

static void
monitor_send(void)
{
	if (!PQsendQuery(monitor, monitor_sql))
		fatal("monitor: %s", PQerrorMessage(monitor));
	if (PQflush(monitor) < 0)
		fatal("monitor: %s", PQerrorMessage(monitor));
	monitor_busy = true;
	monitor_sent_at = now_us();
}

static void
monitor_input(void)
{
	if (!PQconsumeInput(monitor))
		fatal("monitor connection lost: %s", PQerrorMessage(monitor));
	while (!PQisBusy(monitor))
	{
		PGresult   *r = PQgetResult(monitor);

		if (r == NULL)
		{
			int64_t		now = now_us();

			if (monitor_res)
				monitor_process(monitor_res);
			PQclear(monitor_res);
			monitor_res = NULL;
			monitor_busy = false;
			if (monitor_last_done && now - monitor_last_done > monitor_max_gap)
				monitor_max_gap = now - monitor_last_done;
			if (monitor_last_done && now - monitor_last_done > 50000)
			{
				monitor_long_gaps++;
				note("monitor: %.1f ms since the previous sample (query took %.1f ms)",
					 (now - monitor_last_done) / 1000.0, (now - monitor_sent_at) / 1000.0);
			}
			monitor_last_done = now;
			return;
		}
		if (monitor_res == NULL)
			monitor_res = r;
		else
			PQclear(r);
	}
}

/*---- admin connection: limit changes and terminations ----*/
static PGconn *admin;
static bool admin_busy = false;
static PGresult *admin_res = NULL;
static int64_t next_limit_at[MAX_WORKLOADS];
static int64_t next_terminate_at;
static int64_t next_cancel_at;
static long term_waiting = 0,
			term_working = 0,
			term_other = 0;

static void
admin_send(const char *sql)
{
	if (!PQsendQuery(admin, sql))
		fatal("admin: %s", PQerrorMessage(admin));
	if (PQflush(admin) < 0)
		fatal("admin: %s", PQerrorMessage(admin));
	admin_busy = true;
}

static void
admin_input(void)
{
	if (!PQconsumeInput(admin))
		fatal("admin connection lost: %s", PQerrorMessage(admin));
	while (!PQisBusy(admin))
	{
		PGresult   *r = PQgetResult(admin);

		if (r == NULL)
		{
			if (admin_res && PQresultStatus(admin_res) != PGRES_COMMAND_OK &&
				PQresultStatus(admin_res) != PGRES_TUPLES_OK)
				tool_error("admin statement failed: %s", PQresultErrorMessage(admin_res));
			PQclear(admin_res);
			admin_res = NULL;
			admin_busy = false;
			return;
		}
		if (admin_res == NULL)
			admin_res = r;
		else
			PQclear(r);
	}
}

static bool
is_waiting_step(StepKind k)
{
	return k == ST_ACQ || k == ST_ACQ_X || k == ST_TRY || k == ST_TRY_X;
}

static void
admin_tick(int64_t now)
{
	int			w;
	char		sql[2048];

	if (admin_busy || stopping)
		return;
	for (w = 0; w < nworkloads; w++)
	{
		const WConfig *c = &cur_cfg[w];
		const WConfig *o = &orig_cfg[w];
		WConfig		n;
		int			top_b = o->max_running * 2 > 2 ? o->max_running * 2 : 2;
		int			top_q = o->max_queued * 2 > 1 ? o->max_queued * 2 : 1;
		int			r;

		if (now < next_limit_at[w] || limit_pending[w])
			continue;
		next_limit_at[w] = now + around_us(opt_limit_ms);
		n = *c;
		if (c->max_running == 0)
		{
			/* the pause ends: a new limit, perhaps a new queue */
			n.max_running = 1 + rnd(top_b);
			if (chance(50))
				n.max_queued = rnd(top_q + 1);
			limit_resumes++;
		}
		else if (chance(opt_pause_pct))
		{
			n.max_running = 0;
			limit_pauses++;
		}
		else
		{
			r = rnd(3);
			if (r != 1)
				n.max_running = 1 + rnd(top_b);
			if (r != 0)
				n.max_queued = rnd(top_q + 1);
		}
		if (may_toggle[w] && chance(25))
		{
			n.adaptive = !n.adaptive;
			if (n.adaptive)
				adaptive_on++;
			else
				adaptive_off++;
		}
		/*
		 * min_running: at most max_running (unless paused), moved now and
		 * then, mostly in the lower half so that the worker has room, at
		 * times up to max_running (the limit is then fixed)
		 */
		if (n.max_running >= 1 &&
			(n.min_running > n.max_running ||
			 ((o->adaptive || may_toggle[w]) && chance(40))))
			n.min_running = chance(10) ? n.max_running :
				1 + rnd((n.max_running + 1) / 2);
		if (n.min_running != c->min_running)
			limit_min_changes++;
		/* a pair other than the one in force, so that the monitor sees the change */
		if (n.max_running == c->max_running && n.max_queued == c->max_queued)
			n.max_queued = n.max_queued > 0 ? n.max_queued - 1 : n.max_queued + 1;

		if (n.max_running < c->max_running ||
			n.max_running + n.max_queued < c->max_running + c->max_queued)
			limit_lowered++;
		if (n.adaptive || c->adaptive)
			limit_updates_adaptive++;
		limit_updates++;
		pend_cfg[w] = n;
		limit_pending[w] = true;
		pending_since[w] = now;
		snprintf(sql, sizeof(sql),
				 "UPDATE bulkhead_workload SET max_running = %d, max_queued = %d,"
				 " min_running = %d, adaptive = %s WHERE name = %s",
				 n.max_running, n.max_queued, n.min_running,
				 n.adaptive ? "true" : "false", wlit[w]);
		note("limits of %s: %d/%d, min %d%s", wname[w], n.max_running, n.max_queued,
			 n.min_running, n.adaptive ? ", adaptive" : "");
		admin_send(sql);
		return;
	}
	if (now >= next_terminate_at)
	{
		int			tries;

		next_terminate_at = now + around_us(opt_terminate_ms);
		for (tries = 0; tries < 8; tries++)
		{
			Client	   *c = &clients[rnd(opt_clients)];

			if (c->pid == 0 || (c->st != CS_BUSY && c->st != CS_READY))
				continue;
			if (c->st == CS_BUSY && is_waiting_step(c->steps[c->cur].kind))
				term_waiting++;
			else if (c->st == CS_BUSY && c->steps[c->cur].kind == ST_WORK)
				term_working++;
			else
				term_other++;
			terminates_sent++;
			snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)", c->pid);
			admin_send(sql);
			return;
		}
	}
}

/* Cancel a random client that waits for a permit or works */
static void
chaos_cancel(int64_t now)
{
	int		   *cand;
	int			ncand = 0;
	bool		want_waiting = chance(50);
	int			pass;
	char		errbuf[256];

	if (stopping || now < next_cancel_at)
		return;
	next_cancel_at = now + around_us(opt_cancel_ms);
	cand = malloc(sizeof(int) * opt_clients);
	for (pass = 0; pass < 2 && ncand == 0; pass++, want_waiting = !want_waiting)
	{
		int			i;

		for (i = 0; i < opt_clients; i++)
		{
			Client	   *c = &clients[i];
			StepKind	k;

			if (c->st != CS_BUSY || c->cancel == NULL)
				continue;
			k = c->steps[c->cur].kind;
			if (want_waiting ? (is_waiting_step(k) && now - c->sent_at >= 500)
				: k == ST_WORK)
				cand[ncand++] = i;
		}
		if (ncand > 0)
		{
			Client	   *c = &clients[cand[rnd(ncand)]];

			if (!PQcancel(c->cancel, errbuf, sizeof(errbuf)))
				cancel_failures++;
			else if (want_waiting)
				cancels_waiting++;
			else
				cancels_working++;
		}
	}
	free(cand);
}

/*---- setup and the end ----*/
static PGconn *
connect_blocking(const char *appname)
{
	const char *values[] = {opt_conninfo, appname, "bulkhead_stress", NULL};
	PGconn	   *conn = PQconnectdbParams(conn_keywords, values, 1);

	if (PQstatus(conn) != CONNECTION_OK)
		fatal("could not connect: %s", PQerrorMessage(conn));
	return conn;
}

static PGresult *
exec_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_TUPLES_OK &&
		PQresultStatus(res) != PGRES_COMMAND_OK)
		fatal("%s: %s", sql, PQresultErrorMessage(res));
	return res;
}

/* Wait (up to timeout_s) until every workload of ours is idle */
static bool
wait_idle(PGconn *conn, double timeout_s, char *why, size_t whylen)
{
	int64_t		deadline = now_us() + (int64_t) (timeout_s * 1e6);

	for (;;)
	{
		PGresult   *res = exec_ok(conn, "SELECT workload, running, queued FROM bulkhead_stats");
		bool		idle = true;
		int			i;

		why[0] = '\0';
		for (i = 0; i < PQntuples(res); i++)
		{
			if (workload_index(PQgetvalue(res, i, 0)) < 0)
				continue;
			if (atoi(PQgetvalue(res, i, 1)) != 0 || atoi(PQgetvalue(res, i, 2)) != 0)
			{
				idle = false;
				snprintf(why + strlen(why), whylen - strlen(why), " %s: running %s, queued %s;",
						 PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
			}
		}
		PQclear(res);
		if (idle)
			return true;
		if (now_us() > deadline)
			return false;
		usleep(10000);
	}
}

static void
setup(void)
{
	char		sql[2048];
	char		why[2048];
	int			w;

	admin = connect_blocking("bulkhead_stress admin");
	monitor = connect_blocking("bulkhead_stress monitor");

	for (w = 0; w < nworkloads; w++)
	{
		PGresult   *res;
		int64_t		deadline = now_us() + 10 * 1000000;

		/* the row as the worker loaded it (current_limit = max_running if fixed) */
		snprintf(sql, sizeof(sql),
				 "SELECT w.max_running, w.max_queued, s.mode,"
				 " ceil(extract(epoch FROM w.queue_timeout) * 1000)::int,"
				 " w.adaptive, w.min_running,"
				 " s.max_running = w.max_running AND s.max_queued = w.max_queued"
				 " AND (w.adaptive OR s.current_limit = w.max_running)"
				 " FROM bulkhead_workload w JOIN bulkhead_stats s ON s.workload = w.name"
				 " WHERE w.name = %s", wlit[w]);
		for (;;)
		{
			res = exec_ok(admin, sql);
			if (PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 6), "t") == 0)
				break;
			if (now_us() > deadline)
				fatal("workload \"%s\" is not defined in bulkhead_workload and loaded as it is there (bulkhead_stats)",
					  wname[w]);
			PQclear(res);
			usleep(50000);
		}
		orig_cfg[w].max_running = atoi(PQgetvalue(res, 0, 0));
		orig_cfg[w].max_queued = atoi(PQgetvalue(res, 0, 1));
		if (strcmp(PQgetvalue(res, 0, 2), "enforce") != 0)
			fatal("workload \"%s\" is in %s mode; the stress test needs enforce",
				  wname[w], PQgetvalue(res, 0, 2));
		queue_timeout_ms[w] = atoi(PQgetvalue(res, 0, 3));
		orig_cfg[w].adaptive = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
		orig_cfg[w].min_running = atoi(PQgetvalue(res, 0, 5));
		cur_cfg[w] = orig_cfg[w];
		PQclear(res);
	}

	/* reset the figures only when idle: a permit held across would count */
	if (!wait_idle(admin, 10, why, sizeof(why)))
		fatal("the workloads are not idle:%s", why);
	for (w = 0; w < nworkloads; w++)
	{
		snprintf(sql, sizeof(sql), "SELECT bulkhead_stats_reset(%s)", wlit[w]);
		PQclear(exec_ok(admin, sql));
	}
	if (!wait_idle(admin, 0, why, sizeof(why)))
		fatal("a workload was used during the stats reset:%s", why);

	/*
	 * The monitor's first read of each workload is compared with this
	 * state: idle, at the limit in force now, at a time long before (so
	 * that an adaptive limit may have moved anywhere within its bounds).
	 */
	for (w = 0; w < nworkloads; w++)
	{
		PGresult   *res;
		WState	   *ws = &wstate[w];

		snprintf(sql, sizeof(sql),
				 "SELECT current_limit FROM bulkhead_stats WHERE workload = %s", wlit[w]);
		res = exec_ok(admin, sql);
		if (PQntuples(res) != 1)
			fatal("workload \"%s\" is missing from bulkhead_stats", wname[w]);
		ws->have_prev = true;
		ws->counted = false;
		ws->prev_running = 0;
		ws->prev_queued = 0;
		ws->prev_limit = atoll(PQgetvalue(res, 0, 0));
		ws->prev_cfg = orig_cfg[w];
		ws->prev_t_lo = INT64_MIN / 2;
		PQclear(res);
	}

	PQsetNoticeProcessor(admin, count_notice, NULL);
	PQsetNoticeProcessor(monitor, count_notice, NULL);
	if (PQsetnonblocking(admin, 1) != 0 || PQsetnonblocking(monitor, 1) != 0)
		fatal("PQsetnonblocking failed");
}

/* Wait for the in-flight statement of a connection, discarding it */
static void
drain(PGconn *conn, void (*input) (void), bool *busy)
{
	while (*busy)
	{
		struct pollfd pfd = {.fd = PQsocket(conn),.events = POLLIN};

		if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
			fatal("poll: %s", strerror(errno));
		input();
	}
}

static void
final_checks(void)
{
	char		sql[2048];
	char		why[2048];
	PGresult   *res;
	int			w;
	int			i;

	drain(monitor, monitor_input, &monitor_busy);
	drain(admin, admin_input, &admin_busy);
	PQsetnonblocking(admin, 0);

	/* restore the definitions */
	for (w = 0; w < nworkloads; w++)
	{
		snprintf(sql, sizeof(sql),
				 "UPDATE bulkhead_workload SET max_running = %d, max_queued = %d,"
				 " min_running = %d, adaptive = %s WHERE name = %s",
				 orig_cfg[w].max_running, orig_cfg[w].max_queued,
				 orig_cfg[w].min_running, orig_cfg[w].adaptive ? "true" : "false",
				 wlit[w]);
		PQclear(exec_ok(admin, sql));
	}

	/* every client has ended: nothing may stay running or queued */
	if (!wait_idle(admin, 10, why, sizeof(why)))
		violation("10 s after every client ended, permits are still held or awaited:%s", why);

	res = exec_ok(admin, "SELECT count(*) FROM bulkhead_activity");
	if (atoi(PQgetvalue(res, 0, 0)) != 0)
		violation("bulkhead_activity still has %s rows after every client ended",
				  PQgetvalue(res, 0, 0));
	PQclear(res);

	res = exec_ok(admin,
				  "SELECT workload, acquired, released, rejected_full, timed_out, cancelled,"
				  " peak_running, peak_queued, running, queued,"
				  " round(wait_p99_ms::numeric, 2), round(hold_p50_ms::numeric, 2)"
				  " FROM bulkhead_stats ORDER BY workload");
	printf("\nfinal bulkhead_stats (since the reset at the start):\n");
	printf("  %-16s %9s %9s %9s %9s %9s %5s %5s %5s %5s %8s %8s\n",
		   "workload", "acquired", "released", "rej_full", "timed_out",
		   "cancelled", "peakR", "peakQ", "run", "queue", "wait_p99", "hold_p50");
	for (i = 0; i < PQntuples(res); i++)
	{
		if (workload_index(PQgetvalue(res, i, 0)) < 0)
			continue;
		printf("  %-16s %9s %9s %9s %9s %9s %5s %5s %5s %5s %8s %8s\n",
			   PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
			   PQgetvalue(res, i, 3), PQgetvalue(res, i, 4), PQgetvalue(res, i, 5),
			   PQgetvalue(res, i, 6), PQgetvalue(res, i, 7), PQgetvalue(res, i, 8),
			   PQgetvalue(res, i, 9), PQgetvalue(res, i, 10), PQgetvalue(res, i, 11));
		if (strcmp(PQgetvalue(res, i, 1), PQgetvalue(res, i, 2)) != 0)
			violation("workload %s: acquired %s != released %s at the end",
					  PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
	}
	PQclear(res);
}

/* Changes of current_limit by the worker that the monitor saw, all workloads */
static long
worker_changes(void)
{
	long		n = 0;
	int			w;

	for (w = 0; w < nworkloads; w++)
		n += wstate[w].worker_up + wstate[w].worker_down;
	return n;
}

static void
print_summary(double runtime)
{
	int			k;
	long		nsteps = 0;
	long		checks;

	for (k = 0; k < ST__COUNT; k++)
		nsteps += step_stats[k].sent;
	checks = checks_running + checks_sum + checks_bounds + checks_conserving +
		checks_config + checks_activity + checks_dup + checks_verify +
		checks_release + checks_release_all;

	{
		long		started = 0;

		for (k = 0; k < SC__COUNT; k++)
			started += scenario_count[k];
		printf("\noperations: %ld started, %ld completed without an error,"
			   " %ld error paths (rollback, release_all, verify)\n",
			   started, ops_done, error_paths);
	}
	for (k = 0; k < SC__COUNT; k++)
		printf("  %8ld  %s\n", scenario_count[k], scenario_names[k]);
	printf("  (%ld work steps under the lock of an adaptive workload)\n", locked_work);
	printf("\nstatements (%ld sent):\n", nsteps);
	printf("  %-26s %8s %8s %7s %7s %7s %9s %6s %5s\n",
		   "", "sent", "ok/true", "false", "full", "timeout", "cancelled", "killed", "other");
	for (k = 0; k < ST__COUNT; k++)
	{
		StepStats  *s = &step_stats[k];

		printf("  %-26s %8ld %8ld %7ld %7ld %7ld %9ld %6ld %5ld\n", step_names[k],
			   s->sent, s->ok, s->ok_false, s->full, s->timeout, s->cancelled,
			   s->killed, s->other);
	}
	printf("\nchaos: %ld cancels of waiting clients, %ld of working clients (%ld failed to send);\n"
		   "       %ld terminations (%ld waiting, %ld working, %ld between statements), %ld reconnects"
		   " (%ld connection attempts failed);\n"
		   "       %ld limit changes by the tool (%ld lowering max_running or the sum, %ld pauses"
		   " (max_running 0) and %ld resumes,\n"
		   "       %ld on workloads adaptive before or after, adaptive switched on %ld and off %ld times,"
		   " min_running changed %ld times;\n"
		   "       seen applied after at most %.0f ms)\n",
		   cancels_waiting, cancels_working, cancel_failures,
		   terminates_sent, term_waiting, term_working, term_other, reconnects,
		   connect_failures, limit_updates, limit_lowered, limit_pauses, limit_resumes,
		   limit_updates_adaptive, adaptive_on, adaptive_off, limit_min_changes,
		   max_apply_us / 1000.0);
	printf("\nmonitor: %ld samples (every %d ms; longest gap %.1f ms, %ld gaps over 50 ms),"
		   " one statement each: stats, activity, stats\n",
		   samples, opt_monitor_ms, monitor_max_gap / 1000.0, monitor_long_gaps);
	printf("  %10ld  the row shows the definition in force or the one the tool set next\n",
		   checks_config);
	printf("  %10ld  current_limit = max_running (fixed), in [min_running, max_running]"
		   " (adaptive), 0 (adaptive, paused)\n", checks_bounds);
	printf("  %10ld  running grew only up to a current_limit in force since the previous read\n",
		   checks_running);
	printf("  %10ld  running + queued grew only up to a current_limit + max_queued in force"
		   " (likewise)\n", checks_sum);
	printf("  %10ld  no free permit while someone is queued (queued > 0: running >= current_limit)\n",
		   checks_conserving);
	printf("  %10ld  no backend twice in a workload's bulkhead_activity rows\n", checks_dup);
	printf("  %10ld  running/queued = bulkhead_activity rows, in quiet windows"
		   " (%ld windows not quiet, skipped; %ld of them differed)\n",
		   checks_activity, nonquiet, transient_mismatch);
	{
		int			w;

		for (w = 0; w < nworkloads; w++)
		{
			WState	   *ws = &wstate[w];

			printf("  workload %s: %ld reads above current_limit (draining after a lowering),"
				   " %ld episodes\n",
				   wname[w], ws->transient_samples, ws->transient_episodes);
			if (ws->reads_adaptive > 0)
			{
				int			v,
							distinct = 0;

				for (v = 0; v < LIMIT_SEEN_MAX; v++)
					distinct += ws->limit_seen[v];
				printf("    adaptive in %ld reads: the worker changed current_limit %ld times"
					   " (%ld up, %ld down), %d values seen in [%" PRId64 ", %" PRId64 "];\n"
					   "    %ld spans between reads checked against current_limit, %ld longer"
					   " than %d ms against max_running\n",
					   ws->reads_adaptive, ws->worker_up + ws->worker_down,
					   ws->worker_up, ws->worker_down, distinct, ws->limit_lo,
					   ws->limit_hi, ws->spans_single, ws->spans_long,
					   SINGLE_DECISION_US / 1000);
			}
		}
	}
	printf("clients: %ld own-permit checks against bulkhead_activity, %ld releases of held permits,"
		   " %ld release_all counts checked;\n"
		   "         slowest acquire: %.1f ms beyond its timeout; %ld statements stuck for 10 s\n",
		   checks_verify, checks_release, checks_release_all,
		   max_acquire_overrun / 1000.0, stuck_statements);
	printf("\ninvariant checks: %ld\n", checks);
	printf("violations: %ld\n", violations);
	if (tool_errors)
		printf("tool errors: %ld\n", tool_errors);
	printf("runtime: %.1f s\n", runtime);
	printf("summary: %ld operations, %ld limit changes by the tool (%ld on adaptive workloads),"
		   " %ld by the worker, %ld violations\n",
		   ops_done, limit_updates, limit_updates_adaptive, worker_changes(), violations);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: bulkhead_stress [-c clients] [-t seconds] [-d conninfo] [-w w1,w2,...]\n"
			"                       [-A w1,...] [-s seed] [-m monitor_ms] [-C cancel_ms]\n"
			"                       [-K terminate_ms] [-L limit_ms] [-P pause_pct] [-X lock_pct]\n"
			"                       [-T think_ms] [-B backoff_ms] [-v]\n"
			"       bulkhead_stress -D nocycle|cycle|guards|budgets|holds|tenants|lanes|memory|priority\n"
			"                       [-c clients] [-t seconds] [-d conninfo] [-s seed]\n"
			"  -c  clients (default 64)            -t  seconds (default 60)\n"
			"  -d  libpq conninfo (default: PG* environment)\n"
			"  -w  workloads, comma-separated (default stress_a,stress_b,stress_c)\n"
			"  -A  of those, the workloads whose limit changes also switch adaptive on/off\n"
			"  -s  random seed (default: from the clock)\n"
			"  -m  monitor sampling interval, ms (default 2)\n"
			"  -C  mean interval between cancels, ms (default 10)\n"
			"  -K  mean interval between terminations, ms (default 200)\n"
			"  -L  mean interval between limit changes of a workload, ms (default 1000)\n"
			"  -P  percent of limit changes that pause the workload (max_running 0;\n"
			"      the next change resumes it) (default 8)\n"
			"  -X  percent of the work under a permit of an adaptive workload (or one of -A)\n"
			"      that takes that workload's lock, pg_advisory_xact_lock (default 40)\n"
			"  -T  longest pause between two operations of a client, ms (default 3)\n"
			"  -B  longest pause after a rejection or a timeout, ms (default 20)\n"
			"  -v  verbose\n"
			"  -D  deadlock mode instead (deadlock_modes.c): nocycle (no cycle can form,\n"
			"      no 40P01 may be seen) or cycle (cycles built on purpose, one victim each);\n"
			"      or guards (guard_modes.c): session, transaction and automatic permits\n"
			"      with SET LOCAL and savepoints, each step checked against the rules\n"
			"      of the guarded settings; or budgets (budget_modes.c): trees of shared\n"
			"      budgets reshaped under load, each tree's bounds checked per epoch; or\n"
			"      holds (hold_modes.c): permits held around max_hold while the worker\n"
			"      logs, cancels, terminates and moves the runaway ones; or tenants\n"
			"      (tenant_modes.c): callers of 10,000 keys under per-key caps, the keys\n"
			"      in use checked against the workloads' counts; or lanes (lane_modes.c):\n"
			"      statement rules moving a plain role's permits between lanes that cap\n"
			"      settings, each statement's lane and settings checked; or memory\n"
			"      (memory_modes.c): statements granted memory under max_memory and\n"
			"      bulkhead.max_memory changed under load, the grants' bounds checked\n");
	exit(2);
}

static int
positive(const char *s, int min)
{
	char	   *end;
	long		v = strtol(s, &end, 10);

	if (*end != '\0' || v < min || v > 1000000)
		usage();
	return (int) v;
}

int
main(int argc, char **argv)
{
	int			opt;
	int64_t		end_at;
	int64_t		stop_deadline = 0;
	struct pollfd *pfds;
	Client	  **pclients;
	int			i;
	double		runtime;
	char	   *tok;

	while ((opt = getopt(argc, argv, "c:t:d:w:A:s:m:C:K:L:P:X:T:B:D:vh")) != -1)
	{
		switch (opt)
		{
			case 'c':
				opt_clients = positive(optarg, 1);
				break;
			case 't':
				opt_seconds = positive(optarg, 1);
				break;
			case 'd':
				opt_conninfo = optarg;
				break;
			case 'w':
				opt_workloads = optarg;
				break;
			case 'A':
				opt_toggle = optarg;
				break;
			case 'P':
				opt_pause_pct = positive(optarg, 0);
				if (opt_pause_pct > 100)
					usage();
				break;
			case 'X':
				opt_lock_pct = positive(optarg, 0);
				if (opt_lock_pct > 100)
					usage();
				break;
			case 's':
				opt_seed = strtoull(optarg, NULL, 10);
				break;
			case 'm':
				opt_monitor_ms = positive(optarg, 0);
				break;
			case 'C':
				opt_cancel_ms = positive(optarg, 1);
				break;
			case 'K':
				opt_terminate_ms = positive(optarg, 1);
				break;
			case 'L':
				opt_limit_ms = positive(optarg, 100);
				break;
			case 'T':
				opt_think_ms = positive(optarg, 0);
				break;
			case 'B':
				opt_backoff_ms = positive(optarg, 1);
				break;
			case 'v':
				opt_verbose = true;
				break;
			case 'D':
				opt_deadlock_mode = optarg;
				break;
			default:
				usage();
		}
	}
	if (optind != argc)
		usage();
	if (opt_deadlock_mode != NULL && strcmp(opt_deadlock_mode, "budgets") == 0)
		return budget_stress_main(opt_clients, opt_seconds, opt_conninfo, opt_seed);
	if (opt_deadlock_mode != NULL && strcmp(opt_deadlock_mode, "holds") == 0)
		return hold_stress_main(opt_clients, opt_seconds, opt_conninfo, opt_seed);
	if (opt_deadlock_mode != NULL && strcmp(opt_deadlock_mode, "tenants") == 0)
		return tenant_stress_main(opt_clients, opt_seconds, opt_conninfo, opt_seed);
	if (opt_deadlock_mode != NULL && strcmp(opt_deadlock_mode, "lanes") == 0)
		return lane_stress_main(opt_clients, opt_seconds, opt_conninfo, opt_seed);
	if (opt_deadlock_mode != NULL && strcmp(opt_deadlock_mode, "memory") == 0)
		return memory_stress_main(opt_clients, opt_seconds, opt_conninfo, opt_seed);
	if (opt_deadlock_mode != NULL && strcmp(opt_deadlock_mode, "priority") == 0)
		return priority_stress_main(opt_clients, opt_seconds, opt_conninfo);
	if (opt_deadlock_mode != NULL && strcmp(opt_deadlock_mode, "guards") == 0)
		return guard_stress_main(opt_clients, opt_seconds, opt_conninfo);
	if (opt_deadlock_mode != NULL)
		return deadlock_stress_main(opt_deadlock_mode, opt_clients, opt_seconds,
									opt_conninfo);

	if (opt_workloads == NULL)
		opt_workloads = strdup("stress_a,stress_b,stress_c");
	for (tok = strtok(opt_workloads, ","); tok; tok = strtok(NULL, ","))
	{
		char	   *p = wlit[nworkloads];
		const char *q;

		if (nworkloads >= MAX_WORKLOADS)
			fatal("at most %d workloads", MAX_WORKLOADS);
		if (strlen(tok) == 0 || strlen(tok) > 63)
			fatal("bad workload name \"%s\"", tok);
		strcpy(wname[nworkloads], tok);
		*p++ = '\'';
		for (q = tok; *q; q++)
		{
			if (*q == '\'')
				*p++ = '\'';
			*p++ = *q;
		}
		*p++ = '\'';
		*p = '\0';
		nworkloads++;
	}
	if (nworkloads == 0)
		usage();
	if (opt_toggle != NULL)
	{
		for (tok = strtok(opt_toggle, ","); tok; tok = strtok(NULL, ","))
		{
			int			w = workload_index(tok);

			if (w < 0)
				fatal("-A names \"%s\", which is not one of the workloads of -w", tok);
			may_toggle[w] = true;
		}
	}

	if (opt_seed == 0)
		opt_seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 20);
	rng_state = opt_seed ? opt_seed : 1;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);

	t_start = now_us();
	setup();

	printf("bulkhead_stress: %d clients, %d s, workloads", opt_clients, opt_seconds);
	for (i = 0; i < nworkloads; i++)
	{
		char		c[64];

		describe_cfg(&orig_cfg[i], c, sizeof(c));
		printf(" %s (%s%s)", wname[i], c, may_toggle[i] ? ", switched adaptive" : "");
	}
	printf(", seed %" PRIu64 "\n", opt_seed);

	clients = calloc(opt_clients, sizeof(Client));
	pfds = calloc(opt_clients + 2, sizeof(struct pollfd));
	pclients = calloc(opt_clients + 2, sizeof(Client *));
	if (!clients || !pfds || !pclients)
		fatal("out of memory");
	for (i = 0; i < opt_clients; i++)
	{
		clients[i].id = i;
		client_connect(&clients[i]);
	}

	t_start = now_us();
	end_at = t_start + (int64_t) opt_seconds * 1000000;
	for (i = 0; i < nworkloads; i++)
		next_limit_at[i] = t_start + around_us(opt_limit_ms);
	next_terminate_at = t_start + around_us(opt_terminate_ms);
	next_cancel_at = t_start + around_us(opt_cancel_ms);
	{
		int64_t		next_progress = t_start + 10 * 1000000;

		for (;;)
		{
			int64_t		now = now_us();
			int64_t		wake = now + 100000;
			int			n = 0;
			bool		all_done = true;
			int			timeout_ms;

			if (!stopping && (now >= end_at || interrupted))
			{
				stopping = true;
				stop_deadline = now + 20 * 1000000;
				printf("[%8.3f s] stopping: clients finish their operation\n", elapsed_s());
			}
			if (now >= next_progress)
			{
				printf("[%8.3f s] %ld operations, %ld samples, %ld violations\n",
					   elapsed_s(), ops_done, samples, violations);
				next_progress += 10 * 1000000;
			}

			/* timers */
			for (i = 0; i < opt_clients; i++)
			{
				Client	   *c = &clients[i];

				if (c->st == CS_DEAD && stopping)
					c->st = CS_DONE;
				if (c->st == CS_DEAD && c->wake_at <= now)
					client_connect(c);
				else if (c->st == CS_READY && c->nsteps == 0 && (c->wake_at <= now || stopping))
				{
					if (!stopping)
						build_op(c);
					client_advance(c);
				}
				if (c->st == CS_BUSY && !c->stuck_reported &&
					now - c->sent_at > 10 * 1000000)
				{
					/* no statement of the tool may take that long */
					c->stuck_reported = true;
					stuck_statements++;
					violation("client %d (pid %d): %s has been running for 10 s",
							  c->id, c->pid, step_names[c->steps[c->cur].kind]);
				}
				if (c->st != CS_DONE)
					all_done = false;
				if ((c->st == CS_DEAD || c->st == CS_READY) && c->wake_at < wake)
					wake = c->wake_at;
			}
			if (stopping && all_done && !admin_busy)
				break;
			if (stopping && now > stop_deadline)
			{
				tool_error("clients did not finish within 20 s of the stop; closing them");
				for (i = 0; i < opt_clients; i++)
					if (clients[i].st != CS_DONE)
						client_lost(&clients[i], false);
				break;
			}
			admin_tick(now);
			chaos_cancel(now);
			if (!monitor_busy && now - monitor_sent_at >= opt_monitor_ms * 1000)
				monitor_send();

			/* poll */
			for (i = 0; i < opt_clients; i++)
			{
				Client	   *c = &clients[i];

				if (c->st == CS_CONNECTING)
				{
					pfds[n].fd = PQsocket(c->conn);
					pfds[n].events = c->cpoll == PGRES_POLLING_READING ? POLLIN : POLLOUT;
				}
				else if (c->st == CS_BUSY)
				{
					pfds[n].fd = PQsocket(c->conn);
					pfds[n].events = POLLIN | (c->flush_pending ? POLLOUT : 0);
				}
				else
					continue;
				pfds[n].revents = 0;
				pclients[n++] = c;
			}
			pfds[n].fd = PQsocket(monitor);
			pfds[n].events = monitor_busy ? POLLIN : 0;
			pfds[n].revents = 0;
			pclients[n++] = NULL;
			pfds[n].fd = PQsocket(admin);
			pfds[n].events = admin_busy ? POLLIN : 0;
			pfds[n].revents = 0;
			pclients[n++] = NULL;

			if (!monitor_busy)
			{
				int64_t		m = monitor_sent_at + opt_monitor_ms * 1000;

				if (m < wake)
					wake = m;
			}
			if (!stopping)
			{
				if (next_cancel_at < wake)
					wake = next_cancel_at;
				if (next_terminate_at < wake)
					wake = next_terminate_at;
			}
			now = now_us();
			timeout_ms = wake <= now ? 0 : (int) ((wake - now + 999) / 1000);
			if (timeout_ms > 100)
				timeout_ms = 100;
			if (poll(pfds, n, timeout_ms) < 0)
			{
				if (errno == EINTR)
					continue;
				fatal("poll: %s", strerror(errno));
			}

			for (i = 0; i < n; i++)
			{
				Client	   *c = pclients[i];

				if (pfds[i].revents == 0)
					continue;
				if (c == NULL)
				{
					if (i == n - 2 && monitor_busy)
						monitor_input();
					else if (i == n - 1 && admin_busy)
						admin_input();
					continue;
				}
				if (c->st == CS_CONNECTING)
					client_connect_poll(c);
				else if (c->st == CS_BUSY)
				{
					if (c->flush_pending && (pfds[i].revents & POLLOUT))
					{
						int			rc = PQflush(c->conn);

						if (rc < 0)
						{
							step_stats[c->steps[c->cur].kind].killed++;
							client_lost(c, true);
							continue;
						}
						c->flush_pending = rc == 1;
					}
					if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))
						client_input(c);
				}
			}
		}
	}
	runtime = elapsed_s();

	final_checks();
	{
		bool		any_adaptive = false;

		for (i = 0; i < nworkloads; i++)
			any_adaptive |= wstate[i].reads_adaptive > 0;
		/* a run long enough must show the worker at work, or it tested nothing of it */
		if (any_adaptive && runtime >= 30 && worker_changes() == 0)
			tool_error("the worker changed no adaptive workload's current_limit in %.0f s:"
					   " the run did not test the limit's changes", runtime);
	}
	print_summary(runtime);
	PQfinish(monitor);
	PQfinish(admin);
	if (violations > 0)
		printf("FAILED: %ld invariant violations\n", violations);
	else if (tool_errors > 0)
		printf("FAILED: %ld tool errors\n", tool_errors);
	else
		printf("OK: no invariant violation\n");
	return violations > 0 ? 1 : tool_errors > 0 ? 2 : 0;
}
