/*-------------------------------------------------------------------------
 *
 * permitfuncs.c
 *	  SQL entry points for permits: argument checks, then permit.c (taking)
 *	  and local.c (returning).
 *
 * Owns no shared state, and the setting bulkhead.allow_session_permits.
 * Called by PostgreSQL's function manager, and by bulkhead.c (init) and
 * views.c (the workload name argument).
 *
 *-------------------------------------------------------------------------
 */
#include "permit/permitfuncs.h"
#include "guards/guard.h"
#include "permit/local.h"
#include "permit/permit.h"

#include <math.h>

#include "access/xact.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"				/* VARDATA_ANY and friends moved here in 16 */
#endif

PG_FUNCTION_INFO_V1(bulkhead_acquire);
PG_FUNCTION_INFO_V1(bulkhead_acquire_xact);
PG_FUNCTION_INFO_V1(bulkhead_try_acquire);
PG_FUNCTION_INFO_V1(bulkhead_try_acquire_xact);
PG_FUNCTION_INFO_V1(bulkhead_release);
PG_FUNCTION_INFO_V1(bulkhead_release_all);

/*---- GUC variables ----*/
bool		bulkhead_allow_session_permits = true;
char	   *bulkhead_key = NULL;

/*
 * bulkhead.key: at most BULKHEAD_KEY_MAXLEN bytes, valid in the database's
 * encoding (a connection option is not checked by the server, and the key
 * is shown in bulkhead_activity and bulkhead_keys, whose readers would fail
 * to convert it).  Before a database is chosen (postgresql.conf read by the
 * postmaster) the encoding is SQL_ASCII, which takes any byte.
 */
static bool
check_key(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL)
		return true;
	if (strlen(*newval) > BULKHEAD_KEY_MAXLEN)
	{
		GUC_check_errdetail("A key has at most %d bytes; this one has %d.",
							BULKHEAD_KEY_MAXLEN, (int) strlen(*newval));
		return false;
	}
	if (!pg_verifymbstr(*newval, strlen(*newval), true))
	{
		GUC_check_errdetail("A key must be valid in the database encoding (%s).",
							GetDatabaseEncodingName());
		return false;
	}
	return true;
}

/* From _PG_init */
void
bulkhead_functions_init(void)
{
	DefineCustomBoolVariable("bulkhead.allow_session_permits",
							 "Whether this session may take session-scoped permits.",
							 "Turn it off (ALTER ROLE / ALTER DATABASE ... SET) for "
							 "connections made through a transaction-pooling proxy.",
							 &bulkhead_allow_session_permits,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("bulkhead.key",
							   "The key (tenant) this session's transparent admission acquires as.",
							   "Keys are served in turn within a workload. Empty: no key. "
							   "Behind a transaction-pooling proxy, use SET LOCAL in each transaction.",
							   &bulkhead_key,
							   "",
							   PGC_USERSET,
							   0,
							   check_key, NULL, NULL);
}

/* The key that transparent admission acquires as, or NULL for none */
const char *
bulkhead_session_key(void)
{
	return bulkhead_key != NULL && bulkhead_key[0] != '\0' ? bulkhead_key : NULL;
}

/*
 * The key argument argno (absent from the 1.1 declarations), checked, into
 * key (BULKHEAD_KEY_MAXLEN + 1 bytes); false when it is NULL or empty: no
 * key.
 */
static bool
key_arg(FunctionCallInfo fcinfo, int argno, char *key)
{
	text	   *t;
	int			len;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return false;
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		return false;
	if (len > BULKHEAD_KEY_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key is too long"),
				 errdetail("A key has at most %d bytes; this one has %d.",
						   BULKHEAD_KEY_MAXLEN, len)));
	memcpy(key, VARDATA_ANY(t), len);
	key[len] = '\0';
	if (strlen(key) != (size_t) len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key must not contain a zero byte")));
	return true;
}

/* Workload name argument argno, checked, into name (NAMEDATALEN bytes) */
void
bulkhead_workload_name_arg(FunctionCallInfo fcinfo, int argno, char *name)
{
	text	   *t;
	int			len;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("workload name must not be null")));
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workload name must not be empty")));
	if (len > BULKHEAD_NAME_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workload name is too long"),
				 errdetail("A workload name has at most %d bytes; this one has %d.",
						   BULKHEAD_NAME_MAXLEN, len)));
	memcpy(name, VARDATA_ANY(t), len);
	name[len] = '\0';
}

/*
 * The timeout argument in microseconds, counted as extract(epoch ...)
 * counts (a month is 30 days, a year 365.25 days); huge values saturate.
 * NULL means the workload's queue_timeout.
 */
static int64
timeout_arg(FunctionCallInfo fcinfo, bool *use_default)
{
	Interval   *iv;
	double		usec;

	*use_default = PG_ARGISNULL(1);
	if (*use_default)
		return 0;
	iv = PG_GETARG_INTERVAL_P(1);
	usec = (double) iv->time +
		((double) iv->day +
		 (double) (iv->month / MONTHS_PER_YEAR) * DAYS_PER_YEAR +
		 (double) (iv->month % MONTHS_PER_YEAR) * DAYS_PER_MONTH) *
		(double) USECS_PER_DAY;
	if (usec < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must not be negative")));
	if (usec >= (double) PG_INT64_MAX / 2)
		return PG_INT64_MAX / 2;
	return (int64) ceil(usec);
}

/*
 * Permits belong to the backend that takes them: a parallel worker's would
 * end with the worker, and the leader would not know of it.  Refused as
 * PostgreSQL refuses advisory locks during a parallel operation (a function
 * that calls these from a parallel-safe wrapper gets here).
 */
static void
refuse_in_parallel_mode(void)
{
	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot take or return bulkhead permits during a parallel operation"),
				 errhint("Call the bulkhead functions outside parallel queries: they are PARALLEL UNSAFE, and so must be any function that calls them.")));
}

static bool
acquire_common(FunctionCallInfo fcinfo, BulkheadScope scope, bool try_only)
{
	char		name[NAMEDATALEN];
	char		key[BULKHEAD_KEY_MAXLEN + 1];
	bool		keyed;
	bool		use_default;
	int64		timeout_us;

	bulkhead_check_loaded();
	refuse_in_parallel_mode();
	bulkhead_workload_name_arg(fcinfo, 0, name);
	timeout_us = timeout_arg(fcinfo, &use_default);
	keyed = key_arg(fcinfo, 2, key);
	if (scope == BULKHEAD_SCOPE_SESSION && !bulkhead_allow_session_permits)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("session permits are not allowed in this session"),
				 errdetail("The setting \"bulkhead.allow_session_permits\" is off: behind a transaction-pooling proxy, a session permit would stay with the server connection after the transaction."),
				 errhint("Use bulkhead_acquire_xact() or bulkhead_try_acquire_xact() in a transaction.")));
	return bulkhead_acquire_permit(name, keyed ? key : NULL, timeout_us,
								   use_default, scope, try_only, NULL, NULL);
}

Datum
bulkhead_acquire(PG_FUNCTION_ARGS)
{
	(void) acquire_common(fcinfo, BULKHEAD_SCOPE_SESSION, false);
	PG_RETURN_VOID();
}

Datum
bulkhead_acquire_xact(PG_FUNCTION_ARGS)
{
	(void) acquire_common(fcinfo, BULKHEAD_SCOPE_XACT, false);
	PG_RETURN_VOID();
}

Datum
bulkhead_try_acquire(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire_common(fcinfo, BULKHEAD_SCOPE_SESSION, true));
}

Datum
bulkhead_try_acquire_xact(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire_common(fcinfo, BULKHEAD_SCOPE_XACT, true));
}

Datum
bulkhead_release(PG_FUNCTION_ARGS)
{
	char		name[NAMEDATALEN];
	int			li;

	bulkhead_check_loaded();
	refuse_in_parallel_mode();
	bulkhead_workload_name_arg(fcinfo, 0, name);
	li = bulkhead_local_index_by_name(name);
	if (li < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("permit of workload \"%s\" is not held by this session", name)));
	if (bulkhead_local[li].scope != BULKHEAD_SCOPE_SESSION)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("permit of workload \"%s\" is held for the transaction", name),
				 errdetail("A transaction permit is released when its transaction ends.")));
	bulkhead_release_entry(li);
	bulkhead_restore_session_guards(bulkhead_local,
										bulkhead_shared->permits_per_backend);
	PG_RETURN_VOID();
}

Datum
bulkhead_release_all(PG_FUNCTION_ARGS)
{
	int			released;

	bulkhead_check_loaded();
	refuse_in_parallel_mode();
	released = bulkhead_release_session_permits();
	if (released > 0)
		bulkhead_restore_session_guards(bulkhead_local,
										bulkhead_shared->permits_per_backend);
	PG_RETURN_INT32(released);
}
