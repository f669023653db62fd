/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  The workload's timeouts, applied while one of its permits is held.
 *
 * A guard lowers a timeout setting: when both the guard and the session's
 * value are non-zero the smaller applies; a zero session value (no limit)
 * takes the guard.
 *
 * Transaction scope sets the value with SET LOCAL semantics, so PostgreSQL
 * itself restores it at commit, abort or rollback to savepoint.  Session
 * scope sets it for the session, remembering the value it replaced; when
 * the last session permit with that guard is released the old value comes
 * back (as RESET when it was the reset value, so a later ALTER ROLE or
 * reload applies again).  If the user changed the setting meanwhile, it is
 * left as the user set it.
 *
 * statement_timeout is armed when a statement starts, so a guard applies
 * from the statement after the one that acquired the permit.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"

#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"

typedef enum GuardKind
{
	GUARD_STATEMENT,
	GUARD_LOCK,
	GUARD_IDLE_IN_XACT,
	GUARD_IDLE_SESSION,
	NUM_GUARDS
} GuardKind;

typedef struct GuardSetting
{
	const char *name;
	int		   *value;			/* the server's variable, in ms */
	/* session scope bookkeeping */
	bool		active;			/* we changed it for a session permit */
	int			set_value;		/* what we set it to */
	int			base_value;		/* what it was before */
	char	   *base_string;	/* same, as text, or NULL to RESET */
} GuardSetting;

static GuardSetting guards[NUM_GUARDS] = {
	{"statement_timeout", &StatementTimeout},
	{"lock_timeout", &LockTimeout},
	{"idle_in_transaction_session_timeout", &IdleInTransactionSessionTimeout},
	{"idle_session_timeout", &IdleSessionTimeout},
};

/* The guard a permit puts on one setting, in ms, or <= 0 for none */
static int
guard_of(const BulkheadLocalPermit *permit, GuardKind kind)
{
	switch (kind)
	{
		case GUARD_STATEMENT:
			return permit->statement_timeout_ms;
		case GUARD_LOCK:
			return permit->lock_timeout_ms;
		case GUARD_IDLE_IN_XACT:
			return permit->idle_timeout_ms;
		case GUARD_IDLE_SESSION:
			/* idle between transactions only matters to session permits */
			return permit->scope == BULKHEAD_SCOPE_SESSION ?
				permit->idle_timeout_ms : BULKHEAD_NO_GUARD;
		default:
			return BULKHEAD_NO_GUARD;
	}
}

static int
combine(int current, int guard)
{
	if (guard <= 0)
		return current;
	if (current <= 0)
		return guard;
	return Min(current, guard);
}

static void
set_guard(const char *name, const char *value, bool local)
{
	(void) set_config_option(name, value, PGC_USERSET, PGC_S_SESSION,
							 local ? GUC_ACTION_LOCAL : GUC_ACTION_SET,
							 true, 0, false);
}

static void
set_guard_ms(const char *name, int ms, bool local)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%d", ms);
	set_guard(name, buf, local);
}

/* Apply a just-granted permit's guards */
void
bulkhead_apply_guards(BulkheadLocalPermit *permit)
{
	bool		local = permit->scope != BULKHEAD_SCOPE_SESSION;
	int			kind;

	for (kind = 0; kind < NUM_GUARDS; kind++)
	{
		GuardSetting *g = &guards[kind];
		int			current = *g->value;
		int			wanted = combine(current, guard_of(permit, kind));

		if (wanted == current)
			continue;
		if (!local && !g->active)
		{
			const char *base = GetConfigOption(g->name, false, false);
			const char *reset = GetConfigOptionResetString(g->name);

			g->base_value = current;
			g->base_string = (reset && strcmp(base, reset) == 0) ? NULL :
				MemoryContextStrdup(TopMemoryContext, base);
			g->active = true;
		}
		set_guard_ms(g->name, wanted, local);
		if (!local)
			g->set_value = wanted;
	}
}

/* After session permits were released: recompute or restore each setting */
void
bulkhead_restore_session_guards(void)
{
	int			kind;

	for (kind = 0; kind < NUM_GUARDS; kind++)
	{
		GuardSetting *g = &guards[kind];
		int			wanted;
		bool		guarded = false;
		int			i;

		if (!g->active)
			continue;
		if (*g->value != g->set_value)
		{
			/* the user (or a rollback) changed it: leave it alone */
			g->active = false;
		}
		else
		{
			wanted = g->base_value;
			for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
			{
				BulkheadLocalPermit *permit = &bulkhead_local[i];

				if (permit->held && permit->scope == BULKHEAD_SCOPE_SESSION &&
					guard_of(permit, kind) > 0)
				{
					wanted = combine(wanted, guard_of(permit, kind));
					guarded = true;
				}
			}
			if (guarded)
			{
				if (wanted != g->set_value)
					set_guard_ms(g->name, wanted, false);
				g->set_value = wanted;
				continue;
			}
			set_guard(g->name, g->base_string, false);
			g->active = false;
		}
		if (g->base_string)
			pfree(g->base_string);
		g->base_string = NULL;
	}
}
