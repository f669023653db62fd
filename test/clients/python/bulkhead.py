"""bulkhead.py: admission by the bulkhead extension for psycopg 3.

One file, no dependency but psycopg: copy it into your application.

    import bulkhead

    with pool.connection() as conn:
        with bulkhead.admit(conn, "reports", wait="200ms"):
            rows = conn.execute("SELECT ...").fetchall()

        # as a tenant: the workload serves its keys in turn, least served first
        with bulkhead.admit(conn, "reports", wait="200ms", key=tenant_id):
            ...

admit() opens a transaction on conn (conn.transaction()), takes a
transaction-scoped permit of the workload with bulkhead_acquire_xact, and
runs the block inside that transaction.  Leaving the block commits; an
exception rolls back and propagates (raise psycopg.Rollback to roll back
quietly).  Either way PostgreSQL returns the permit at the transaction's
end: nothing is ever released by hand, and the permit cannot outlive the
block, even behind a transaction-pooling proxy (PgBouncer
pool_mode = transaction).

key: None or "" (no key), or the caller's key (a tenant, a customer), a
str: the workload's max_running_per_key and max_queued_per_key apply to
it.  A key is passed to bulkhead_acquire_xact(workload, timeout, key),
which needs bulkhead 1.2; without one, admit() calls
bulkhead_acquire_xact(workload, timeout) as it always did.

If the workload does not admit the caller, the block does not run:
  SQLSTATE 53B01 (every permit and queue slot taken,
                  or the key's max_queued_per_key)    -> bulkhead.Full
  SQLSTATE 53B02 (waited `wait` without a permit)     -> bulkhead.TimedOut
both subclasses of bulkhead.Rejected, a psycopg.OperationalError.  Every
other error passes through unchanged; a guard of the workload firing inside
the block (its statement_timeout) is psycopg.errors.QueryCanceled (57014).

wait: None (the workload's queue_timeout), an interval string ("200ms",
"2 s"), a datetime.timedelta, or a number of seconds.  The workload's guards
apply from the statement after the acquire, i.e. to the whole block.
"""

import contextlib
import datetime

import psycopg
from psycopg.pq import TransactionStatus

__all__ = ["admit", "Rejected", "Full", "TimedOut", "SQLSTATE_FULL", "SQLSTATE_TIMED_OUT"]

SQLSTATE_FULL = "53B01"
SQLSTATE_TIMED_OUT = "53B02"


class Rejected(psycopg.OperationalError):
    """The workload did not admit the caller; the block did not run.
    .key is the caller's key, or None if it named none."""

    def __init__(self, workload, cause, key=None):
        super().__init__(str(cause))
        self.workload = workload
        self.cause = cause
        self.key = key

    @property
    def diag(self):
        return self.cause.diag


class Full(Rejected):
    """53B01: every permit and queue slot is taken, or the caller's key has
    max_queued_per_key callers waiting already; rejected without waiting.
    Back off and retry later, or shed the work."""

    sqlstate = SQLSTATE_FULL


class TimedOut(Rejected):
    """53B02: queued for the whole wait without a permit: the work holding
    the permits is too slow.  Do not retry at once."""

    sqlstate = SQLSTATE_TIMED_OUT


def _interval(wait):
    if wait is None or isinstance(wait, (str, datetime.timedelta)):
        return wait
    if isinstance(wait, (int, float)) and not isinstance(wait, bool):
        return datetime.timedelta(seconds=wait)
    raise TypeError(f"wait must be None, str, timedelta or a number, not {type(wait).__name__}")


@contextlib.contextmanager
def admit(conn, workload, wait=None, *, key=None):
    """Run the block in a new transaction on conn, holding a permit of workload
    (as the caller of key, if one is given)."""
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be None or str, not {type(key).__name__}")
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise psycopg.ProgrammingError(
            "bulkhead.admit() opens the transaction itself: the connection is already "
            "in a transaction (commit or roll back first, or use an autocommit connection)")
    # only a key passes the key argument (bulkhead 1.2): without one, the
    # call is the one every version of the extension has
    if key:
        sql = "SELECT bulkhead_acquire_xact(%s, %s::interval, %s)"
        params = (workload, _interval(wait), key)
    else:
        sql = "SELECT bulkhead_acquire_xact(%s, %s::interval)"
        params = (workload, _interval(wait))
        key = None
    with conn.transaction() as tx:
        try:
            conn.execute(sql, params)
        except psycopg.Error as e:
            if e.sqlstate == SQLSTATE_FULL:
                raise Full(workload, e, key) from e
            if e.sqlstate == SQLSTATE_TIMED_OUT:
                raise TimedOut(workload, e, key) from e
            raise
        yield tx
