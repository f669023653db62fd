/*-------------------------------------------------------------------------
 *
 * movedpermit.c
 *	  A permit the worker moved to another workload (runaway holders,
 *	  runaway.c) takes its new workload's guards at the holder's next
 *	  statement.
 *
 * Owns a backend-local mark (the statement that last looked); changes this
 * backend's record of its permits (local.h) and its settings through
 * guard.c.  Called by transparent.c (its ExecutorStart and ProcessUtility hooks);
 * calls local.c and guard.c.
 *
 *-------------------------------------------------------------------------
 */
#include "permit/movedpermit.h"
#include "guards/guard.h"
#include "permit/local.h"

#include "access/xact.h"
#include "utils/timeout.h"

/*
 * At the start of a statement: did the worker move one of our permits to
 * another workload (runaway holders, runaway.c)?  Then it follows its new
 * workload: the guards (and the lane's settings) become move_to's, from
 * this statement on (applied
 * as at a grant; then a session permit's are worked out again as after a
 * release, so that the old workload's stricter guard no longer holds the
 * setting down; a transaction or automatic permit's guard can only lower
 * the setting until the transaction ends).  The look without a lock costs
 * a compare per held permit; the lock is taken only for a permit that
 * moved.
 *
 * Called from the ExecutorStart and ProcessUtility hooks, which also run
 * for the queries nested in a statement (a function's, a DO block's): a
 * move is followed once per statement, at the first hook call of the
 * statement (statement_timestamp() tells statements apart), so that a
 * statement moved while it runs is not cancelled by move_to's
 * statement_timeout armed in the middle of it.  Not while the transaction
 * block has failed (the ROLLBACK that ends it): the settings cannot be
 * changed then, and the statement after it follows the move.
 */
void
bulkhead_local_follow_moves(void)
{
	static TimestampTz followed_statement = 0;
	TimestampTz statement = GetCurrentStatementStartTimestamp();
	int			statement_timeout = StatementTimeout;
	bool		session = false;
	bool		moved = false;
	int			li;

	if (statement == followed_statement)
		return;					/* a query nested in the statement */
	if (!IsTransactionState())
		return;					/* the next statement looks again */
	followed_statement = statement;
	if (bulkhead_nheld == 0)
		return;
	for (li = 0; li < bulkhead_shared->permits_per_backend; li++)
	{
		BulkheadLocalPermit *permit = &bulkhead_local[li];
		BulkheadEntry *entry = bulkhead_my_entry(li);
		BulkheadLocalPermit applied;
		BulkheadSlot *slot;
		int			slotno;

		if (!permit->held ||
			*((volatile int16 *) &entry->workload) == permit->workload)
			continue;
		slot = bulkhead_lock_entry_slot(entry, &slotno);
		permit->workload = slotno;
		permit->statement_timeout_ms = slot->config.statement_timeout_ms;
		permit->lock_timeout_ms = slot->config.lock_timeout_ms;
		permit->idle_timeout_ms = slot->config.idle_timeout_ms;
		permit->caps = slot->config.caps;	/* move_to's lane settings too */
		LWLockRelease(slot->lock);
		moved = true;
		if (permit->scope == BULKHEAD_SCOPE_SESSION)
			session = true;

		/*
		 * A transaction permit's guard, applied now, may be at a deeper
		 * savepoint than the one that took the permit: it is applied as an
		 * automatic permit's, to every level of the transaction, so that a
		 * ROLLBACK TO SAVEPOINT that keeps the permit keeps the guard (one
		 * that releases the permit leaves it until the transaction ends).
		 */
		applied = *permit;
		if (applied.scope == BULKHEAD_SCOPE_XACT)
			applied.scope = BULKHEAD_SCOPE_AUTO;
		bulkhead_apply_guards(&applied);
	}
	if (moved)
		bulkhead_local_caps_changed();
	if (session)
		bulkhead_restore_session_guards(bulkhead_local,
										bulkhead_shared->permits_per_backend);

	/*
	 * statement_timeout was armed when the statement started, with the value
	 * of then: arm it again, or disarm it when there is none any more.
	 */
	if (moved && StatementTimeout != statement_timeout)
	{
		if (StatementTimeout > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);
		else
			disable_timeout(STATEMENT_TIMEOUT, false);
	}
}
