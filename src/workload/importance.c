/*-------------------------------------------------------------------------
 *
 * importance.c
 *	  Importance within a queue (1.5): the settings bulkhead.importance
 *	  and bulkhead.aging_interval, and the importance a wait carries.
 *
 * Who may set bulkhead.importance
 * -------------------------------
 * It is meant to be set as bulkhead.workload is, by a superuser, and yet a
 * plain role may lower its own.  So it is PGC_USERSET, and its check hook
 * refuses (42501) a plain role's value above what it may have, by where
 * the value comes from:
 *   - postgresql.conf, the command line, ALTER SYSTEM, and ALTER ROLE or
 *     DATABASE ... SET when the session starts: accepted (set by a
 *     superuser, or by a plain role under the rule for "a stored value"
 *     below, checked when it was stored);
 *   - a connection's options (PGOPTIONS, "options=-c ..."): applied before
 *     the role's and database's own settings, which they then override, so
 *     the importance the role would have is not known yet: a plain role may
 *     give only low there;
 *   - a value being stored (ALTER ROLE or DATABASE ... SET, CREATE
 *     FUNCTION ... SET), checked with source PGC_S_TEST: a plain role may
 *     store at most its own importance (the value RESET would give it);
 *   - SET, SET LOCAL, a function's SET clause as it runs, RESET: a plain
 *     role may choose at most the value RESET would give it.
 * A parallel worker takes its leader's value unchecked (the leader's was).
 * Superuser is judged as PostgreSQL judges PGC_SUSET settings: by the
 * current user (a SECURITY DEFINER function runs as its owner).
 *
 * No shared state.  Calls no module.
 *
 *-------------------------------------------------------------------------
 */
#include "workload/importance.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "utils/guc.h"

int			bulkhead_importance = BULKHEAD_IMPORTANCE_NORMAL;
int			bulkhead_aging_interval_ms = 10000;
bool		bulkhead_boost_lock_holders = true;

/* The importance the statement's rule sets, or BULKHEAD_IMPORTANCE_UNSET */
static int	rule_importance = BULKHEAD_IMPORTANCE_UNSET;

static const struct config_enum_entry importance_options[] = {
	{"low", BULKHEAD_IMPORTANCE_LOW, false},
	{"normal", BULKHEAD_IMPORTANCE_NORMAL, false},
	{"high", BULKHEAD_IMPORTANCE_HIGH, false},
	{NULL, 0, false}
};

const char *
bulkhead_importance_name(int importance)
{
	if (importance < BULKHEAD_IMPORTANCE_LOW ||
		importance > BULKHEAD_IMPORTANCE_HIGH)
		return NULL;
	return importance_options[importance].name;
}

int
bulkhead_importance_parse(const char *name)
{
	int			i;

	for (i = 0; importance_options[i].name != NULL; i++)
		if (pg_strcasecmp(name, importance_options[i].name) == 0)
			return importance_options[i].val;
	return BULKHEAD_IMPORTANCE_UNSET;
}

/* The value RESET would give this session (its ceiling as a plain role) */
static int
reset_importance(void)
{
	const char *reset = GetConfigOptionResetString("bulkhead.importance");
	int			value = reset != NULL ? bulkhead_importance_parse(reset) :
		BULKHEAD_IMPORTANCE_UNSET;

	return value == BULKHEAD_IMPORTANCE_UNSET ? BULKHEAD_IMPORTANCE_NORMAL : value;
}

static bool
check_importance(int *newval, void **extra, GucSource source)
{
	int			ceiling;

	/* set by a superuser, or checked when it was stored (see the header) */
	if (source < PGC_S_CLIENT || IsParallelWorker() || !IsUnderPostmaster)
		return true;
	if (superuser())
		return true;
	ceiling = source == PGC_S_CLIENT ? BULKHEAD_IMPORTANCE_LOW :
		reset_importance();
	if (*newval <= ceiling)
		return true;
	GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
	GUC_check_errmsg("permission denied to raise bulkhead.importance to \"%s\"",
					 bulkhead_importance_name(*newval));
	if (source == PGC_S_CLIENT)
		GUC_check_errdetail("A connection's options may only lower it, to \"low\".");
	else
		GUC_check_errdetail("This role's importance is \"%s\"; only a superuser may raise it.",
							bulkhead_importance_name(ceiling));
	return false;
}

void
bulkhead_importance_init(void)
{
	DefineCustomEnumVariable("bulkhead.importance",
							 "Importance of this session's waits within their queue.",
							 "Higher is served first, then arrival.  Set by a superuser "
							 "(ALTER ROLE or DATABASE ... SET); a role may lower its own.",
							 &bulkhead_importance,
							 BULKHEAD_IMPORTANCE_NORMAL,
							 importance_options,
							 PGC_USERSET,
							 0,
							 check_importance, NULL, NULL);

	DefineCustomIntVariable("bulkhead.aging_interval",
							"Waiting this long raises a waiter's importance by one step.",
							"So that a low waiter is never passed over forever.",
							&bulkhead_aging_interval_ms,
							10000, 10, 24 * 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("bulkhead.boost_lock_holders",
							 "A queued lock holder that another backend waits for is served first.",
							 "Off: such a holder waits its turn, as in 1.4 (for comparison).",
							 &bulkhead_boost_lock_holders,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
}

int
bulkhead_importance_current(void)
{
	if (rule_importance != BULKHEAD_IMPORTANCE_UNSET)
		return rule_importance;
	return bulkhead_importance;
}

void
bulkhead_importance_set_rule(int importance)
{
	rule_importance = importance;
}
