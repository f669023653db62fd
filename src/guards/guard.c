/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  The workload's timeouts, applied while one of its permits is held.
 *
 * A guard lowers a timeout setting: when both the guard and the session's
 * value are non-zero the smaller applies; a zero value (no limit) takes the
 * guard.
 *
 * Two values of a setting matter here.  The current value is what SHOW
 * gives now.  The session-level value is what the session itself set (SET,
 * or the default RESET would restore): what the setting will be once the
 * current transaction commits.  The two differ while a SET LOCAL (or a
 * function's SET clause, or a transaction permit's guard) is in force.
 * guc.c keeps, per setting, a stack of the values to restore at the end of
 * each transaction nesting level; session_value() reads the session-level
 * value out of it.  The rules:
 *
 * Session permits work on the session-level value.  At acquire it becomes
 * the smaller of it and the guard; a SET LOCAL in force in the current
 * transaction stays in force until it ends, then the guarded session value
 * shows.  A session permit outlives the rollback of the transaction (or
 * savepoint) that took it, and its release is not undone by a rollback
 * either, so the new value is also written into every value of the stack
 * that a rollback would bring back as the session's value.  When the last
 * session permit with a guard on the setting is released, the value the
 * session had before comes back (as RESET when it was the reset value, so
 * a later ALTER ROLE or reload applies again); with permits left, the
 * smaller of that value and their guards.  If the session set the setting
 * itself meanwhile (a plain SET that is in force), it is left as the user
 * set it.
 *
 * Transaction permits (bulkhead_acquire_xact) work on the current value:
 * SET LOCAL of the smaller of it and the guard, which PostgreSQL undoes at
 * commit, at abort, and at the rollback of the savepoint that took the
 * permit (which releases the permit too).  The SET LOCAL is made even when
 * the value does not change, so that the release of a session permit later
 * in the transaction does not lift the current value above the guard: like
 * any SET LOCAL, it stays in force until its transaction ends.
 *
 * Automatic permits (bulkhead.workload, rules) belong to the top-level
 * transaction, and may be taken inside a savepoint (pgJDBC's autosave and
 * psql's ON_ERROR_ROLLBACK run every statement in one).  Their guard is
 * applied to the current value and to every value that a ROLLBACK TO
 * SAVEPOINT would bring back, and the value from before the transaction
 * comes back at its end: as a SET LOCAL made at the top level, before the
 * savepoints (and, like a transaction permit's, made even when no value
 * changes).
 *
 * Not handled: a session permit acquired or released in a transaction that
 * had already SET the setting plainly, and then rolls back: the value the
 * rollback brings back is guarded (never raised), but may stay guarded after
 * the release.
 *
 * statement_timeout is armed when a statement starts, so a guard applies
 * from the statement after the one that acquired the permit (transparent.c arms it
 * for the statement that takes an automatic permit).
 *
 * Owns no shared state: this session's settings (through guc.c) and its
 * own record of what it changed (guards[], active_guards).  Called by
 * permit.c (a grant), local.c and permitfuncs.c (after releases); it is told
 * about the permits it works for and calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#include "guards/guard.h"

#include "access/xact.h"
#include "miscadmin.h"
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
	bool		active;			/* session permits guard it */
	int			set_value;		/* the session-level value we set */
	int			base_value;		/* the session-level value before */
	bool		base_reset;		/* ... was the reset value: restore by RESET */
} GuardSetting;

static GuardSetting guards[NUM_GUARDS] = {
	{"statement_timeout", &StatementTimeout},
	{"lock_timeout", &LockTimeout},
	{"idle_in_transaction_session_timeout", &IdleInTransactionSessionTimeout},
	{"idle_session_timeout", &IdleSessionTimeout},
};

/* How many of guards[] are active (lets the common case skip the loop) */
static int	active_guards = 0;

/*
 * A change of the session-level values of a setting: either each value is
 * lowered to the guard (guard > 0), or each value equal to match becomes to
 * (the reset value, with its source, when reset).
 */
typedef struct SessionChange
{
	int			guard;
	int			match;
	int			to;
	bool		reset;
} SessionChange;

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
 * The reset value of an integer setting's record: PostgreSQL 19 keeps the
 * fields of each type in a union inside config_generic, where earlier
 * versions made config_generic the first member of config_int.
 */
static int
int_reset_val(struct config_generic *rec)
{
#if PG_VERSION_NUM >= 190000
	return rec->_int.reset_val;
#else
	return ((struct config_int *) rec)->reset_val;
#endif
}

/*
 * The session-level value of g.  guc.c's stack has an entry per nesting
 * level (transaction, savepoint, function with SET clauses) that changed the
 * setting, the newest on top; an entry's prior value is the value below its
 * level.  Going down from the current value: a level whose last change was
 * a plain SET holds the session-level value; one that SET LOCAL after a SET
 * keeps the SET value aside (masked); at a level that only made local
 * changes, the value below it counts.  Integer settings only.
 */
static int
session_value(GuardSetting *g)
{
	int			value = *g->value;
	GucStack   *stack;

	for (stack = guc_record(g)->stack; stack != NULL; stack = stack->prev)
	{
		if (stack->state == GUC_SET)
			return value;
		if (stack->state == GUC_SET_LOCAL)
			return stack->masked.val.intval;
		/* GUC_LOCAL, GUC_SAVE: the value below this level */
		value = stack->prior.val.intval;
	}
	return value;
}

/* Is the current value of g its session-level value (no local overlay)? */
static bool
current_is_session_value(GuardSetting *g)
{
	GucStack   *top = guc_record(g)->stack;

	return top == NULL || top->state == GUC_SET;
}

/* Set g (reset: RESET) for the session, or with SET LOCAL semantics */
static void
set_guard(GuardSetting *g, int ms, bool reset, bool local)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%d", ms);
	(void) set_config_option(g->name, reset ? NULL : buf,
							 PGC_USERSET, PGC_S_SESSION,
							 local ? GUC_ACTION_LOCAL : GUC_ACTION_SET,
							 true, 0, false);
}

/* The new session-level value for old under change; false: leave old */
static bool
changed_value(const SessionChange *change, int old, int *new)
{
	if (change->guard > 0)
	{
		*new = combine(old, change->guard);
		return *new != old;
	}
	*new = change->to;
	return old == change->match;
}

/*
 * Apply change to every session-level value of g: the current value when
 * no local overlay hides it, and those kept in the stack, which a rollback
 * or a commit would make current: the bottom entry's prior value (from
 * before the transaction), the prior value of an entry above a SET level,
 * and the masked value of a SET LOCAL over a SET.  Values of local levels
 * are left alone.  The session-level value so survives the abort of the
 * transaction, savepoints and function calls under way: a session permit
 * and its release are not undone by a rollback.
 */
static void
change_session_values(GuardSetting *g, const SessionChange *change)
{
	struct config_generic *rec = guc_record(g);
	bool		reset = change->guard <= 0 && change->reset;
	SessionChange restore = *change;
	GucStack   *stack;
	int			new;

	/*
	 * A restore as RESET brings back the reset value in force now, as RESET
	 * would: a reload may have changed it since the value was saved.
	 */
	if (reset)
	{
		restore.to = int_reset_val(rec);
		change = &restore;
	}

	/*
	 * First the current value: set_config_option may throw.  Not while the
	 * (sub)transaction aborts (a release from an abort callback): nothing may
	 * throw there, and the abort makes current a value of the stack, which
	 * is changed below.
	 */
	if (IsTransactionState() && current_is_session_value(g) &&
		changed_value(change, *g->value, &new))
		set_guard(g, new, reset, false);

	/* then the stack, which cannot throw */
	for (stack = rec->stack; stack != NULL; stack = stack->prev)
	{
		if (stack->state == GUC_SET_LOCAL &&
			changed_value(change, stack->masked.val.intval, &new))
		{
			/* a masked value's source is PGC_S_SESSION (guc_tables.h) */
			stack->masked.val.intval = new;
			stack->masked_scontext = reset ? rec->reset_scontext : PGC_USERSET;
			stack->masked_srole = reset ? rec->reset_srole : GetUserId();
		}
		if ((stack->prev == NULL || stack->prev->state == GUC_SET) &&
			changed_value(change, stack->prior.val.intval, &new))
		{
			stack->prior.val.intval = new;
			stack->source = reset ? rec->reset_source : PGC_S_SESSION;
			stack->scontext = reset ? rec->reset_scontext : PGC_USERSET;
			stack->srole = reset ? rec->reset_srole : GetUserId();
		}
	}
}

/*
 * An automatic permit's guard on g: the current value, and every value a
 * ROLLBACK TO SAVEPOINT would bring back, become the smaller of themselves
 * and the guard, as if SET LOCAL had been done at the top level before the
 * savepoints.  The transaction's end restores the value from before it (or
 * the session-level value a SET in it made).
 */
static void
guard_whole_transaction(GuardSetting *g, int guard)
{
	struct config_generic *rec = guc_record(g);
	bool		was_empty = rec->stack == NULL;
	GucStack   *bottom;
	GucStack   *below = NULL;
	GucStack   *stack;

	set_guard(g, combine(*g->value, guard), false, true);
	if (was_empty)
	{
		/*
		 * The only entry, of the current level: make it the top level's, so
		 * that no ROLLBACK TO SAVEPOINT pops it (guc.c itself moves entries
		 * down a level at subtransaction commit).
		 */
		rec->stack->nest_level = 1;
		return;
	}

	/* an entry of the top level to restore the value from before */
	for (bottom = rec->stack; bottom->prev != NULL; bottom = bottom->prev)
		;
	if (bottom->nest_level > 1)
		below = MemoryContextAllocZero(TopTransactionContext, sizeof(GucStack));

	/* nothing below throws */
	if (below != NULL)
	{
		below->nest_level = 1;
		below->state = GUC_LOCAL;
		below->source = bottom->source;
		below->scontext = bottom->scontext;
		below->srole = bottom->srole;
		below->prior = bottom->prior;
		bottom->prev = below;
	}
	for (stack = rec->stack; stack->prev != NULL; stack = stack->prev)
	{
		GucStack   *lower = stack->prev;
		int			old = stack->prior.val.intval;

		/* a value of a local level that needs no lowering stays as it is */
		if (combine(old, guard) == old && lower->state != GUC_SET)
			continue;
		if (lower->state == GUC_SET)
		{
			/* keep the SET value of the lower level for its commit */
			lower->state = GUC_SET_LOCAL;
			lower->masked = stack->prior;
			lower->masked_scontext = stack->scontext;
			lower->masked_srole = stack->srole;
		}
		stack->prior.val.intval = combine(old, guard);
		stack->source = PGC_S_SESSION;
		stack->scontext = PGC_USERSET;
		stack->srole = GetUserId();
	}
}

/*
 * An automatic permit leaves its workload for another (1.3: a statement's
 * lane): its guards no longer hold.  What guard_whole_transaction lowered
 * to the guard (the current value, and the values a ROLLBACK TO SAVEPOINT
 * would bring back, but the one from before the transaction, which it
 * never lowers) goes back to the session-level value, as if SET LOCAL at
 * the top level; a value the guard did not make (one a SET LOCAL of the
 * user made smaller, say) stays.  The new workload's guards are applied
 * by its grant.  Integer settings only; never lifts another permit's
 * guard above it: the caller applies the guards of the permits it still
 * holds (they are lowered again by bulkhead_apply_guards).
 */
void
bulkhead_lift_guards(const BulkheadLocalPermit *permit)
{
	int			kind;

	for (kind = 0; kind < NUM_GUARDS; kind++)
	{
		GuardSetting *g = &guards[kind];
		int			guard = guard_of(permit, kind);
		struct config_generic *rec;
		GucStack   *stack;
		int			base;

		if (guard <= 0)
			continue;
		rec = guc_record(g);
		base = session_value(g);
		if (base == guard)
			continue;			/* nothing was lowered */
		if (*g->value == guard)
			set_guard(g, base, false, true);
		for (stack = rec->stack; stack != NULL && stack->prev != NULL;
			 stack = stack->prev)
		{
			if (stack->prior.val.intval == guard)
				stack->prior.val.intval = base;
		}
	}
}

/* Apply a just-granted permit's guards */
void
bulkhead_apply_guards(const BulkheadLocalPermit *permit)
{
	int			kind;

	/* the common case, a workload without guards: nothing to combine */
	if (permit->statement_timeout_ms <= 0 && permit->lock_timeout_ms <= 0 &&
		permit->idle_timeout_ms <= 0)
		return;

	for (kind = 0; kind < NUM_GUARDS; kind++)
	{
		GuardSetting *g = &guards[kind];
		int			guard = guard_of(permit, kind);
		int			before;
		int			wanted;
		SessionChange change = {0};

		if (guard <= 0)
			continue;
		switch (permit->scope)
		{
			case BULKHEAD_SCOPE_XACT:
				/* SET LOCAL at the level of the subtransaction that took it */
				set_guard(g, combine(*g->value, guard), false, true);
				break;
			case BULKHEAD_SCOPE_AUTO:
				guard_whole_transaction(g, guard);
				break;
			case BULKHEAD_SCOPE_SESSION:
				before = session_value(g);
				if (g->active && before != g->set_value)
				{
					/* the user set it meanwhile: that is the value to restore */
					g->active = false;
					active_guards--;
				}
				wanted = combine(before, guard);
				change.guard = guard;
				change_session_values(g, &change);
				if (wanted != before && !g->active)
				{
					g->base_value = before;
					g->base_reset =
						before == int_reset_val(guc_record(g));
					g->active = true;
					active_guards++;
				}
				if (g->active)
					g->set_value = wanted;
				break;
		}
	}
}

/*
 * After session permits were released: recompute or restore each setting
 * from the session permits still held among permits[0..n-1] (the backend's
 * own, local.c).  Safe in an abort callback too (a release by the abort
 * path): there only the saved values change, which the abort then makes
 * current.
 */
void
bulkhead_restore_session_guards(const BulkheadLocalPermit *permits, int n)
{
	int			kind;

	if (active_guards == 0)
		return;
	for (kind = 0; kind < NUM_GUARDS; kind++)
	{
		GuardSetting *g = &guards[kind];
		SessionChange change = {0};
		bool		guarded = false;
		int			i;

		if (!g->active)
			continue;
		if (session_value(g) != g->set_value)
		{
			/* the user (or DISCARD ALL) set it: leave it alone */
			g->active = false;
			active_guards--;
			continue;
		}

		change.match = g->set_value;
		change.to = g->base_value;
		for (i = 0; i < n; i++)
		{
			const BulkheadLocalPermit *permit = &permits[i];

			if (permit->held && permit->scope == BULKHEAD_SCOPE_SESSION &&
				guard_of(permit, kind) > 0)
			{
				change.to = combine(change.to, guard_of(permit, kind));
				guarded = true;
			}
		}
		change.reset = !guarded && g->base_reset;
		if (change.to != g->set_value || change.reset)
			change_session_values(g, &change);
		if (guarded)
			g->set_value = change.to;
		else
		{
			g->active = false;
			active_guards--;
		}
	}
}
