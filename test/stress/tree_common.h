/*-------------------------------------------------------------------------
 *
 * tree_common.h
 *	  Helpers shared by the budgets, holds, tenants and lanes modes of
 *	  bulkhead_stress (budget_modes.c, hold_modes.c, tenant_modes.c,
 *	  lane_modes.c): counters, the report of violations and tool errors,
 *	  the per-thread random numbers, connecting and set-up statements.
 *
 * One mode runs per process, so the report state (tc_t_start, the
 * violation counters, tc_n_tool_errors) is kept here once, for the mode
 * that runs; the mode sets it up with tc_report_init before its threads
 * start.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TREE_COMMON_H
#define TREE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

/* at most this many violations of one kind, or tool errors, are printed */
#define TC_MAX_SHOWN 40

/* when the run started (now_us()); set by the mode */
extern int64_t tc_t_start;

/* tool errors reported so far */
extern long tc_n_tool_errors;

/* The mode that runs */
typedef enum TcKind
{
	TC_BUDGETS,					/* 40P01 and 42809 are O_DEADLOCK and
								 * O_WRONGTYPE; every statement_timeout is a
								 * hang (no guard is set) */
	TC_HOLDS					/* 40P01 and 42809 are O_OTHER; a
								 * statement_timeout before the clients' own
								 * is a guard's (O_GUARD) */
} TcKind;

/*
 * Set up before the mode reports anything or connects a client: the mode's
 * violation counters and names (v_hang: the kind of a statement that hung,
 * v_client: of a client's own rows left after its clean-up), the counters
 * of the clients' outcomes, each client's backend pid (0 if none) and the
 * count of reconnections, all kept by the mode.
 */
extern void tc_init(TcKind kind, const char *conninfo, long *n_viol,
					const char *const *v_name, int v_hang, int v_client,
					long *n_outcome, int *client_pid, long *n_reconnects);

/* counters, added to with __atomic; returns the new value */
extern long tc_add(long *counter, long n);

/* seconds since tc_t_start */
extern double tc_elapsed_s(void);

/* count and (the first TC_MAX_SHOWN of a kind) print a violation */
extern void tc_violation(int kind, const char *fmt,...);

/* count and (the first TC_MAX_SHOWN) print a tool error */
extern void tc_tool_error(const char *fmt,...);

/* per-thread xorshift64* */
extern uint64_t tc_rng(uint64_t *s);

/* uniform in [0, n) */
extern int	tc_pick(uint64_t *s, int n);

/* uniform in [lo, hi] */
extern int	tc_between(uint64_t *s, int lo, int hi);

/* true with pct percent */
extern bool tc_chance(uint64_t *s, int pct);

extern void tc_sleep_ms(int ms);

/* the index of name in names[0..n-1], -1 if absent */
extern int	tc_windex(const char *const *names, int n, const char *name);

/* a connection, with notices silenced; exits with status 2 after 50 failures */
extern PGconn *tc_connect_or_die(const char *conninfo);

/* run a set-up statement; exits with status 2 if it fails */
extern void tc_setup_exec(PGconn *conn, const char *sql);

/*
 * Wait (10 s at most) until sql answers true; else exit with status 2,
 * saying what was not loaded
 */
extern void tc_setup_wait(PGconn *conn, const char *sql, const char *what);

/*
 * At the end: a violation of kind if bulkhead_activity still shows a row of
 * a workload whose name matches pattern (a regular expression, quoted as
 * an SQL literal)
 */
extern void tc_no_activity_left(PGconn *conn, const char *pattern, int kind);

/*---- the clients' statements ----*/

/* the clients' statement_timeout: a statement that runs this long hung */
#define TC_CLIENT_STATEMENT_TIMEOUT_S 20

/* The outcome of a statement (each mode names those it can see) */
typedef enum Outcome
{
	O_OK, O_FULL, O_TIMEOUT, O_CANCEL, O_DEADLOCK, O_WRONGTYPE, O_GUARD,
	O_GONE, O_HUNG, O_OTHER, NOUTCOMES
} Outcome;

typedef struct TcClient
{
	int			id;
	PGconn	   *conn;
	uint64_t	rs;
	bool		gated;			/* bulkhead.workload is set */
} TcClient;

/*
 * Run sql; classify the result.  With val, the first column of the first
 * row (if any) is copied there; with val2, the second.
 */
extern Outcome tc_run2(PGconn *conn, const char *sql, char *val, char *val2,
					   size_t vallen, char *err, size_t errlen);
extern Outcome tc_run(PGconn *conn, const char *sql, char *val, size_t vallen,
					  char *err, size_t errlen);

/* a client's statement, counted; an unexpected outcome is reported */
extern Outcome tc_step2(TcClient *c, const char *sql, char *val, char *val2,
						size_t vallen);
extern Outcome tc_step(TcClient *c, const char *sql);

extern void tc_client_connect(TcClient *c);
extern void tc_client_reconnect(TcClient *c);

/*
 * After an error: roll back, leave the gate, give back every session
 * permit, and check that this backend holds or awaits nothing.
 */
extern void tc_client_cleanup(TcClient *c);

/* the number of this backend's rows in bulkhead_activity, -1 on an error */
extern int	tc_own_rows(TcClient *c, Outcome *o);

/*---- the client and chaos threads ----*/

/* How a mode's clients run */
typedef struct TcClientWay
{
	Outcome		(*op) (TcClient *c);	/* one operation, at random */
	int			check_every;	/* after every this many clean operations:
								 * no row of its own in bulkhead_activity */
	int			pause_ms;		/* longest pause between two operations */
	int			pause_busy_ms;	/* ... after a full queue or a timeout */
} TcClientWay;

/* Client id's loop until end_at (now_us()); its random numbers from seed */
extern void tc_client_run(int id, uint64_t seed, int64_t end_at,
						  const TcClientWay *way);

/* How a mode's chaos thread cancels and terminates the clients */
typedef struct TcChaosWay
{
	int			terminate_min_ms;	/* between two terminations */
	int			terminate_max_ms;
	int			pause_min_ms;	/* between two cancels */
	int			pause_max_ms;
} TcChaosWay;

/* The chaos thread's loop until end_at, over nclients clients */
extern void tc_chaos_run(uint64_t seed, int64_t end_at, int nclients,
						 const TcChaosWay *way, long *n_cancels_sent,
						 long *n_terminates_sent);

/*---- the changer's change waiting to be seen by the monitor ----*/

/*
 * The changer: copy len bytes of change into the mode's expected (under the
 * lock the monitor takes), then wait until the monitor has seen it, at most
 * 10 s.  The longest wait, in ms, is kept in *wait_ms_max.  Returns whether
 * the monitor saw it.
 */
extern bool tc_wait_seen(void *expected, const void *change, size_t len,
						 long *wait_ms_max);

/*
 * The monitor, after each sample: if a change is waiting and shows(rows,
 * expected) says the sample shows it, wake the changer.
 */
extern void tc_check_seen(bool (*shows) (const void *rows, const void *expected),
						  const void *rows, const void *expected);

#endif							/* TREE_COMMON_H */
