/*-------------------------------------------------------------------------
 *
 * tree_common.h
 *	  Helpers shared by the budgets mode (budget_modes.c) and the holds mode
 *	  (hold_modes.c) of bulkhead_stress: counters, the report of violations
 *	  and tool errors, the per-thread random numbers, and connecting.
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
#include <stdint.h>

#include <libpq-fe.h>

/* at most this many violations of one kind, or tool errors, are printed */
#define TC_MAX_SHOWN 40

/* when the run started (now_us()); set by the mode */
extern int64_t tc_t_start;

/* tool errors reported so far */
extern long tc_n_tool_errors;

/* the mode's violation counters and names, indexed by kind */
extern void tc_report_init(long *n_viol, const char *const *v_name);

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

#endif							/* TREE_COMMON_H */
