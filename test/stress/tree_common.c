/*-------------------------------------------------------------------------
 *
 * tree_common.c
 *	  Helpers shared by the budgets and holds modes of bulkhead_stress
 *	  (budget_modes.c, hold_modes.c); see tree_common.h.
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
#include <unistd.h>

#include <libpq-fe.h>

#include "deadlock_modes.h"
#include "tree_common.h"

int64_t		tc_t_start;
long		tc_n_tool_errors;

static long *tc_n_viol;
static const char *const *tc_v_name;

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

void
tc_report_init(long *n_viol, const char *const *v_name)
{
	tc_n_viol = n_viol;
	tc_v_name = v_name;
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

void
tc_violation(int kind, const char *fmt,...)
{
	va_list		ap;
	long		n = tc_add(&tc_n_viol[kind], 1);

	if (n > TC_MAX_SHOWN)
		return;
	pthread_mutex_lock(&report_lock);
	printf("[%8.3f s] VIOLATION %s: ", tc_elapsed_s(), tc_v_name[kind]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	pthread_mutex_unlock(&report_lock);
}

void
tc_tool_error(const char *fmt,...)
{
	va_list		ap;
	long		n = tc_add(&tc_n_tool_errors, 1);

	if (n > TC_MAX_SHOWN)
		return;
	pthread_mutex_lock(&report_lock);
	printf("[%8.3f s] TOOL ERROR: ", tc_elapsed_s());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	pthread_mutex_unlock(&report_lock);
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
