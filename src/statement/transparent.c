/*-------------------------------------------------------------------------
 *
 * transparent.c
 *	  Transparent admission: with bulkhead.workload set (by a superuser:
 *	  ALTER ROLE / ALTER DATABASE ... SET, or postgresql.conf), or a rule
 *	  that classifies the session, every top-level transaction of a client
 *	  backend takes a permit of that workload (scope 'auto') before its
 *	  first statement that does work, and returns it when the transaction
 *	  ends.  With statement rules (1.3), the statement itself chooses the
 *	  lane: its kind and planned cost.
 *
 * hooks.c calls here from the planner, ExecutorStart and ProcessUtility.
 * The first statement of a transaction to reach them is a top-level one
 * (statements run by functions come later, inside it), but for the
 * transactions a procedure starts when it commits: their first statement
 * is the procedure's, and takes the session's workload.  Once the
 * transaction holds a permit of the workload, of any scope, nothing more
 * is done until it ends; but with statement rules,
 * each top-level statement is matched against them, and one that a rule
 * sends to another workload moves the transaction's permit there
 * (permit.c): the old permit is returned as the wait begins, the wait is
 * an ordinary one in the new workload, and the permit stays there for the
 * rest of the transaction.  A statement that matches no statement rule
 * leaves the permit where it is.
 *
 * The early gate (hooks.c) comes first for most statements: when the
 * planner starts on a client's top-level statement.  There, in READ
 * COMMITTED, the only snapshot the transaction holds is the one taken for
 * analysis and planning, and nothing uses it after planning: the portal
 * takes its own for execution.  So a caller that must queue gives it up for
 * the wait (permit.c) and a fresh one is pushed.  A queue of callers then
 * holds back no xmin horizon, and the statement sees the data as of when
 * its permit came.  In REPEATABLE READ and SERIALIZABLE the first snapshot
 * is the transaction's, and it is kept.  With statement rules the
 * statement is planned first (its cost is known only then) and waits
 * after, the same way.  A statement that is not planned on its way to
 * ExecutorStart (a cached generic plan, EXECUTE of a prepared statement)
 * waits holding its snapshot; so does a utility.
 *
 * Not gated: transaction control, SET/SHOW/RESET, DISCARD, LISTEN/UNLISTEN,
 * PREPARE/DEALLOCATE, CLOSE; aborted transactions (only ROLLBACK can run);
 * processes other than client backends (autovacuum, background and
 * parallel workers, walsenders); superusers while
 * bulkhead.exempt_superuser is on.  A statement rule sends any session it
 * matches, whether bulkhead.workload or a rule classifies it or nothing
 * does (its role, database, application_name and client_addr filter).
 *
 * Owns no shared state: it classifies the session (rules.c) and the
 * statement (lanes.c), publishes the classification, and takes or moves
 * the permit through permit.c.  Its state is this backend's (whether the
 * transaction passed the gate, whether a utility holds the permit across
 * its commits), reset by its own transaction callback.  Called by hooks.c.
 *
 *-------------------------------------------------------------------------
 */
#include "statement/transparent.h"
#include "permit/permitfuncs.h"
#include "guards/guard.h"
#include "statement/lanes.h"
#include "permit/local.h"
#include "permit/permit.h"
#include "config/rules.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "replication/walsender.h"
#include "utils/timeout.h"

/* This transaction already holds its gate permit (reset at its end) */
static bool gate_passed = false;

/*
 * A top-level utility statement that may commit internally is running with
 * the gate permit (CREATE INDEX CONCURRENTLY, VACUUM, ...): its commits end
 * neither the permit nor the gate's pass; the permit goes at the first
 * transaction end after the statement, or at its abort.
 */
static bool holding_for_utility = false;

/*
 * After the statement's permit was taken or moved: its guard's
 * statement_timeout (or the lifting of the old one's) counts for this
 * statement from now, the wait in the queue not counted against it.
 */
static void
arm_statement_timeout(int before)
{
	if (StatementTimeout == before)
		return;
	if (StatementTimeout > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);
	else
		disable_timeout(STATEMENT_TIMEOUT, false);
}

/*
 * Move the transaction's automatic permit (local index li) to workload name
 * (1.3, a statement's lane): it goes back to its workload (moved_out there,
 * waiters served at once), its guards are lifted, then name's is taken by
 * an ordinary acquire (queue_timeout, FIFO, 53B01 / 53B02, deadlocks, the
 * session's key), counted as moved_in.  A failure leaves neither held.
 * The transaction permits held keep their guards: they are applied again
 * after the lifting, which may have lifted a value one of them had set.
 */
static void
move_permit(int li, const char *name, const char *key, bool *snapshot_given_up)
{
	BulkheadLocalPermit old = bulkhead_local[li];
	int			statement_timeout = StatementTimeout;
	char		from[NAMEDATALEN];
	int			i;

	Assert(old.held && old.scope == BULKHEAD_SCOPE_AUTO);

	/*
	 * Where it is now (old.name is where it was taken: max_hold may have
	 * moved it since).  A slot's name does not change while an entry of
	 * ours is in it (shmem.h).
	 */
	strlcpy(from, bulkhead_shared->slots[old.workload].name, NAMEDATALEN);
	bulkhead_release_entry_moved(li);
	bulkhead_lift_guards(&old);
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
	{
		BulkheadLocalPermit held = bulkhead_local[i];

		if (!held.held || held.scope != BULKHEAD_SCOPE_XACT)
			continue;
		held.scope = BULKHEAD_SCOPE_AUTO;	/* at every level, as movedpermit.c */
		bulkhead_apply_guards(&held);
	}
	/* the old workload's statement_timeout does not cut the wait short */
	arm_statement_timeout(statement_timeout);
	(void) bulkhead_acquire_permit(name, key, 0, true, BULKHEAD_SCOPE_AUTO,
								   false, snapshot_given_up, from);
}

/* Is this backend, in this state, one the gate applies to? */
bool
bulkhead_gate_applies(void)
{
	return MyBackendType == B_BACKEND && !am_walsender && !IsParallelWorker() &&
		!IsAbortedTransactionBlockState() && bulkhead_shared != NULL;
}

/*
 * Take the automatic permit of workload (a move of the one at local index
 * move_li, when >= 0).  The worker defines a new workload before it
 * replaces the rules and undefines an old one after (loader.c), but this
 * session may have matched a rule just before the rules changed: the
 * caller gets false when the workload is unknown by now, and tries again
 * with the rules as they are.  The error caught is raised by the lookup,
 * with no lock held and nothing changed yet (a move's old permit is
 * returned by then, and recorded so), so it is simply discarded.
 */
static bool
acquire_or_move(const char *workload, int move_li, bool *snapshot_given_up)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool unknown = false;

	PG_TRY();
	{
		if (move_li >= 0)
			move_permit(move_li, workload, bulkhead_session_key(),
						snapshot_given_up);
		else
			(void) bulkhead_acquire_permit(workload, bulkhead_session_key(), 0,
										   true, BULKHEAD_SCOPE_AUTO, false,
										   snapshot_given_up, NULL);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		if (geterrcode() != ERRCODE_UNDEFINED_OBJECT)
			PG_RE_THROW();
		FlushErrorState();
		unknown = true;
	}
	PG_END_TRY();
	return !unknown;
}

/*
 * The transaction's permit, of the workload the session is classified to,
 * or of lane (a statement rule's, at position).  Returns once the
 * transaction holds it, or when the session is not gated.  If the workload
 * turns out unknown (see acquire_or_move), the classification is done once
 * more and its answer taken, or the unknown workload reported.
 */
static void
take_permit(const char *lane, int32 position, int move_li,
			uint8 kind, bool has_cost, double cost, bool *snapshot_given_up)
{
	BulkheadClassification class;
	char		workload[NAMEDATALEN];
	int			attempt;

	for (attempt = 0;; attempt++)
	{
		if (lane != NULL)
		{
			class.source = BULKHEAD_CLASS_RULE;
			class.position = position;
			class.workload = lane;
		}
		else
			bulkhead_classify_session(&class);
		bulkhead_publish_classification(&class);
		bulkhead_rules_carry_importance(&class);
		if (class.workload == NULL ||
			bulkhead_local_index_by_name(class.workload) >= 0)
			return;				/* not gated, or it holds that one already */
		if (class.source != BULKHEAD_CLASS_RULE)
		{
			/* bulkhead.workload names it: no rule to look at again */
			(void) bulkhead_acquire_permit(class.workload, bulkhead_session_key(),
										   0, true, BULKHEAD_SCOPE_AUTO, false,
										   snapshot_given_up, NULL);
			return;
		}
		strlcpy(workload, class.workload, NAMEDATALEN);
		if (acquire_or_move(workload, move_li, snapshot_given_up))
			return;
		if (attempt > 0)
			break;
		/* a move's old permit is gone: whatever comes now is an acquire */
		move_li = -1;
		lane = bulkhead_lane_of(kind, has_cost, cost, &position);
		if (lane != NULL && strcmp(lane, workload) == 0)
			break;				/* the rules did not change: the error stands */
		if (lane == NULL)
		{
			bulkhead_classify_session(&class);
			if (class.workload != NULL && strcmp(class.workload, workload) == 0)
				break;
		}
	}
	/* raises 42704 for the workload again, now with nothing to retry */
	(void) bulkhead_acquire_permit(workload, bulkhead_session_key(), 0, true,
								   BULKHEAD_SCOPE_AUTO, false,
								   snapshot_given_up, NULL);
}

/*
 * Take the gate permit for this transaction, unless there is nothing to do.
 * Returns true when the transaction holds a gate permit (taken now or
 * before).  snapshot_given_up: see bulkhead_acquire_permit (NULL but from
 * the early gate).
 */
bool
bulkhead_gate_transaction(bool *snapshot_given_up)
{
	int			statement_timeout = StatementTimeout;

	if (gate_passed)
		return bulkhead_nheld > 0;
	if (!bulkhead_gate_applies())
		return false;
	take_permit(NULL, 0, -1, 0, false, 0, snapshot_given_up);
	arm_statement_timeout(statement_timeout);
	gate_passed = true;
	return bulkhead_nheld > 0;
}

/*
 * A top-level statement of kind (a BULKHEAD_CMD_* bit) and planned cost
 * (has_cost false: a utility) is about to run in a session with statement
 * rules: the first that matches chooses the workload of the transaction's
 * permit (taken now, if the transaction has none yet, or moved there);
 * with none, the first statement takes the session's workload as without
 * statement rules, and a later one leaves the permit where it is.  Returns
 * true when the transaction holds a gate permit.
 */
bool
bulkhead_gate_statement(uint8 kind, bool has_cost, double cost,
						bool *snapshot_given_up)
{
	const char *lane;
	int32		position = 0;
	int			auto_li;
	int			statement_timeout = StatementTimeout;

	if (!bulkhead_gate_applies())
		return false;
	lane = bulkhead_lane_of(kind, has_cost, cost, &position);
	if (lane == NULL)
		return bulkhead_gate_transaction(snapshot_given_up);
	if (bulkhead_local_index_by_name(lane) >= 0)
	{
		gate_passed = true;
		return true;			/* its permit is held already, of any scope */
	}

	/*
	 * A move returns the old permit first: should the wait fail, the
	 * transaction holds no gate permit, and its next statement (after a
	 * ROLLBACK TO SAVEPOINT) passes the gate again.
	 */
	auto_li = gate_passed ? bulkhead_local_auto_index() : -1;
	gate_passed = false;
	take_permit(lane, position, auto_li, kind, has_cost, cost, snapshot_given_up);
	arm_statement_timeout(statement_timeout);
	gate_passed = true;
	return bulkhead_nheld > 0;
}

/* Has this transaction passed the gate? */
bool
bulkhead_gate_passed(void)
{
	return gate_passed;
}

/* hooks.c: a utility holds the gate permit across its own commits */
void
bulkhead_gate_hold_for_utility(bool hold)
{
	holding_for_utility = hold;
	bulkhead_keep_auto_over_commits(hold);
}

bool
bulkhead_gate_holding_for_utility(void)
{
	return holding_for_utility;
}

/*
 * At the end of every transaction the next one must pass the gate again,
 * but for a commit inside a utility statement that holds the gate permit
 * across its own commits (local.c keeps the permit then).
 */
static void
gate_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (!holding_for_utility)
				gate_passed = false;
			break;
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			gate_passed = false;
			break;
		default:
			break;
	}
}

/* From hooks.c's init */
void
bulkhead_gate_init(void)
{
	RegisterXactCallback(gate_xact_callback, NULL);
}
