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
 * A session permit outlives the rollback of the transaction that took it,
 * and its release is not undone by a rollback either; PostgreSQL, though,
 * reverts a SET at rollback.  So after a session-scope change the value is
 * made to survive the abort of the transactions (and subtransactions and
 * function SET clauses) under way, by writing it into their saved prior
 * values: what guc.c itself does for a value set at PGC_S_OVERRIDE.
 *
 * statement_timeout is armed when a statement starts, so a guard applies
 * from the statement after the one that acquired the permit.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"

#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
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
	struct config_generic *record;	/* guc.c's entry, looked up once */
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

/* How many of guards[] are active (lets the common case skip the loop) */
static int	active_guards = 0;

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

static struct config_generic *
guc_record(GuardSetting *g)
{
	if (g->record == NULL)
	{
#if PG_VERSION_NUM >= 160000
		g->record = find_option(g->name, false, false, ERROR);
#else
		struct config_generic **vars = get_guc_variables();
		int			n = GetNumConfigOptions();
		int			i;

		for (i = 0; i < n && g->record == NULL; i++)
			if (strcmp(vars[i]->name, g->name) == 0)
				g->record = vars[i];
		if (g->record == NULL)
			elog(ERROR, "setting \"%s\" not found", g->name);
#endif
	}
	return g->record;
}

/*
 * Let the current value of g survive the abort of every transaction level
 * under way: each stacked prior value (and a SET value masked by SET LOCAL)
 * becomes the current one.  Integer settings without "extra" data only.
 */
static void
survive_rollback(GuardSetting *g)
{
	struct config_generic *rec = guc_record(g);
	GucStack   *stack;

	for (stack = rec->stack; stack != NULL; stack = stack->prev)
	{
		stack->prior.val.intval = *g->value;
		stack->source = rec->source;
		stack->scontext = rec->scontext;
		stack->srole = rec->srole;
		if (stack->state == GUC_SET_LOCAL)
		{
			stack->masked.val.intval = *g->value;
			stack->masked_scontext = rec->scontext;
			stack->masked_srole = rec->srole;
		}
	}
}

/* Set g (value NULL: RESET) for the transaction, or for the session */
static void
set_guard(GuardSetting *g, const char *value, bool local)
{
	(void) set_config_option(g->name, value, PGC_USERSET, PGC_S_SESSION,
							 local ? GUC_ACTION_LOCAL : GUC_ACTION_SET,
							 true, 0, false);
	if (!local)
		survive_rollback(g);
}

static void
set_guard_ms(GuardSetting *g, int ms, bool local)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%d", ms);
	set_guard(g, buf, local);
}

/* Apply a just-granted permit's guards */
void
bulkhead_apply_guards(BulkheadLocalPermit *permit)
{
	bool		local = permit->scope != BULKHEAD_SCOPE_SESSION;
	int			kind;

	/* the common case, a workload without guards: nothing to combine */
	if (permit->statement_timeout_ms <= 0 && permit->lock_timeout_ms <= 0 &&
		permit->idle_timeout_ms <= 0)
		return;

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
			active_guards++;
		}
		set_guard_ms(g, wanted, local);
		if (!local)
			g->set_value = wanted;
	}
}

/* After session permits were released: recompute or restore each setting */
void
bulkhead_restore_session_guards(void)
{
	int			kind;

	if (active_guards == 0)
		return;
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
			active_guards--;
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
					set_guard_ms(g, wanted, false);
				g->set_value = wanted;
				continue;
			}
			set_guard(g, g->base_string, false);
			g->active = false;
			active_guards--;
		}
		if (g->base_string)
			pfree(g->base_string);
		g->base_string = NULL;
	}
}
