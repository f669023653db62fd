"""Tests of bulkhead.admit() against a real, preloaded server (psycopg 3,
psycopg_pool).  test/clients/run.sh runs them with BULKHEAD_DSN set.

Each test has its own workload, so the figures of bulkhead_stats are its
own; the server's view is read on a separate autocommit connection that
never takes a permit.
"""

import datetime
import os
import threading
import time

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

import bulkhead

DSN = os.environ.get("BULKHEAD_DSN")
if not DSN:
    raise RuntimeError("set BULKHEAD_DSN")
# the same database through PgBouncer (transaction pooling)
PGBOUNCER_DSN = os.environ.get("BULKHEAD_PGBOUNCER_DSN")


# doc/clients.md example: a report, admitted by the "reports" workload.
def count_tables(pool):
    try:
        with pool.connection() as conn:
            with bulkhead.admit(conn, "reports", wait="200ms"):
                n = conn.execute("SELECT count(*) FROM pg_class").fetchone()[0]
        return f"tables: {n}"
    except bulkhead.Full:
        # 53B01: every permit and queue slot is taken: shed this request
        # (say, HTTP 503 with Retry-After) or retry later, with backoff
        return "busy, try again later"
    except bulkhead.TimedOut:
        # 53B02: queued 200 ms without a permit: the work holding the
        # permits is slow; do not retry at once
        return "too slow right now"
    # any other error propagates; psycopg.errors.QueryCanceled (57014) from
    # the block means a guard of the workload (its statement_timeout) fired


# doc/clients.md example: the same report for one tenant (a key) of the workload.
def count_tables_for(pool, tenant):
    with pool.connection() as conn:
        # the workload serves its tenants in turn, the least served first
        with bulkhead.admit(conn, "reports", wait="200ms", key=tenant):
            return conn.execute("SELECT count(*) FROM pg_class").fetchone()[0]


@pytest.fixture(scope="module")
def admin():
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS py_items")
        conn.execute("CREATE TABLE py_items (x int)")
        yield conn


@pytest.fixture
def pools():
    made = []

    def make(size):
        pool = ConnectionPool(DSN, min_size=size, max_size=size, timeout=30)
        pool.wait(timeout=30)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.close()


@pytest.fixture
def threads():
    started = []

    def start(target):
        t = threading.Thread(target=target, daemon=True)
        t.start()
        started.append(t)
        return t

    yield start
    for t in started:
        t.join(30)
        assert not t.is_alive(), "a test thread did not end"


def define(admin, name, max_running, max_queued, queue_timeout, statement_timeout=None,
           max_running_per_key=None, max_queued_per_key=None):
    admin.execute(
        """INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
                                          statement_timeout, max_running_per_key,
                                          max_queued_per_key)
           VALUES (%s, %s, %s, %s::interval, %s::interval, %s::int, %s::int)
           ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,
               max_queued = excluded.max_queued, queue_timeout = excluded.queue_timeout,
               statement_timeout = excluded.statement_timeout,
               max_running_per_key = excluded.max_running_per_key,
               max_queued_per_key = excluded.max_queued_per_key""",
        (name, max_running, max_queued, queue_timeout, statement_timeout,
         max_running_per_key, max_queued_per_key))
    deadline = time.monotonic() + 10
    while admin.execute(
            "SELECT count(*) FROM bulkhead_stats WHERE workload = %s"
            " AND max_running = %s AND max_queued = %s",
            (name, max_running, max_queued)).fetchone()[0] != 1:
        assert time.monotonic() < deadline, f"workload {name} not loaded"
        time.sleep(0.02)
    admin.execute("SELECT bulkhead_stats_reset(%s)", (name,))


def stat(admin, workload, column):
    return admin.execute(f"SELECT {column} FROM bulkhead_stats WHERE workload = %s",
                         (workload,)).fetchone()[0]


def assert_idle(admin, workload):
    assert stat(admin, workload, "running") == 0
    assert stat(admin, workload, "queued") == 0
    assert admin.execute("SELECT count(*) FROM bulkhead_activity WHERE workload = %s",
                         (workload,)).fetchone()[0] == 0


def hold_permit(pool, workload, held, release, result):
    """A thread body: hold a permit of workload until release is set."""
    def body():
        with pool.connection() as conn:
            with bulkhead.admit(conn, workload, wait="5s"):
                held.set()
                assert release.wait(30)
                result.append(conn.execute("SELECT 42").fetchone()[0])
    return body


def test_full_rejected_at_once(admin, pools, threads):
    """Pool of 2, B=1 Q=0: while one block holds the permit, a second is
    rejected with bulkhead.Full at once; the first returns its result."""
    w = "py_full"
    define(admin, w, 1, 0, "5s")
    pool = pools(2)
    held, release, result = threading.Event(), threading.Event(), []
    holder = threads(hold_permit(pool, w, held, release, result))
    assert held.wait(30)
    assert stat(admin, w, "running") == 1

    ran = False
    with pool.connection() as conn:
        t0 = time.monotonic()
        with pytest.raises(bulkhead.Full) as exc:
            with bulkhead.admit(conn, w, wait="5s"):
                ran = True
        elapsed = time.monotonic() - t0
        assert conn.info.transaction_status == TransactionStatus.IDLE
    assert not ran, "the block of a rejected caller ran"
    assert elapsed < 1.0, f"rejected after {elapsed:.3f} s, not at once (wait was 5 s)"
    assert exc.value.sqlstate == "53B01"
    assert exc.value.diag.sqlstate == "53B01"
    assert exc.value.workload == w
    assert isinstance(exc.value, bulkhead.Rejected)
    assert isinstance(exc.value, psycopg.OperationalError)

    release.set()
    holder.join(30)
    assert result == [42]
    assert_idle(admin, w)
    assert stat(admin, w, "acquired") == 1
    assert stat(admin, w, "rejected_full") == 1
    assert stat(admin, w, "released") == 1


def test_commit_returns_permit(admin):
    w = "py_commit"
    define(admin, w, 1, 0, "1s")
    with psycopg.connect(DSN) as conn:
        with bulkhead.admit(conn, w, wait="200ms") as tx:
            assert isinstance(tx, psycopg.Transaction)
            assert stat(admin, w, "running") == 1
            conn.execute("INSERT INTO py_items VALUES (1)")
        assert conn.info.transaction_status == TransactionStatus.IDLE
    assert admin.execute("SELECT count(*) FROM py_items WHERE x = 1").fetchone()[0] == 1
    assert_idle(admin, w)
    assert stat(admin, w, "released") == 1


def test_exception_rolls_back(admin):
    """An exception in the block rolls back, returns the permit, and
    propagates unchanged; psycopg.Rollback rolls back quietly."""
    w = "py_rollback"
    define(admin, w, 1, 0, "1s")
    with psycopg.connect(DSN, autocommit=True) as conn:
        boom = ValueError("boom")
        with pytest.raises(ValueError) as exc:
            with bulkhead.admit(conn, w, wait="200ms"):
                conn.execute("INSERT INTO py_items VALUES (2)")
                raise boom
        assert exc.value is boom
        assert_idle(admin, w)

        with pytest.raises(psycopg.errors.DivisionByZero):
            with bulkhead.admit(conn, w, wait="200ms"):
                conn.execute("INSERT INTO py_items VALUES (2)")
                conn.execute("SELECT 1/0")
        assert_idle(admin, w)

        with bulkhead.admit(conn, w, wait="200ms"):
            conn.execute("INSERT INTO py_items VALUES (2)")
            raise psycopg.Rollback()
        assert conn.info.transaction_status == TransactionStatus.IDLE
    assert admin.execute("SELECT count(*) FROM py_items WHERE x = 2").fetchone()[0] == 0
    assert_idle(admin, w)
    assert stat(admin, w, "acquired") == 3
    assert stat(admin, w, "released") == 3


def test_statement_timeout_inside_work(admin, pools):
    """The workload's statement_timeout ends slow work with 57014; the permit
    is returned and the next block on the same connection runs normally."""
    w = "py_guard"
    define(admin, w, 1, 0, "1s", "300ms")
    pool = pools(1)
    with pool.connection() as conn:
        pid = conn.info.backend_pid
        t0 = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled) as exc:
            with bulkhead.admit(conn, w, wait="200ms"):
                conn.execute("SELECT pg_sleep(5)")
        elapsed = time.monotonic() - t0
        assert exc.value.sqlstate == "57014"
        assert elapsed < 3, f"the guard fired after {elapsed:.3f} s"
        assert_idle(admin, w)
    with pool.connection() as conn:
        assert conn.info.backend_pid == pid
        with bulkhead.admit(conn, w, wait="200ms"):
            conn.execute("SELECT pg_sleep(0.05)")
            inside = conn.execute("SHOW statement_timeout").fetchone()[0]
        assert inside == "300ms"
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "0"
        conn.rollback()
    assert_idle(admin, w)
    assert stat(admin, w, "acquired") == 2
    assert stat(admin, w, "released") == 2


def test_wait_expires_and_failures_leak_nothing(admin, pools, threads):
    """A wait that runs out gives bulkhead.TimedOut; 100 consecutive failing
    blocks leave running = 0."""
    w = "py_wait"
    define(admin, w, 1, 10, "5s", "100ms")
    pool = pools(2)
    held, release, result = threading.Event(), threading.Event(), []
    holder = threads(hold_permit(pool, w, held, release, result))
    assert held.wait(30)

    with pool.connection() as conn:
        t0 = time.monotonic()
        with pytest.raises(bulkhead.TimedOut) as exc:
            with bulkhead.admit(conn, w, wait="200ms"):
                pytest.fail("the block ran")
        elapsed = time.monotonic() - t0
        assert exc.value.sqlstate == "53B02"
        assert 0.19 <= elapsed < 3, f"timed out after {elapsed:.3f} s (wait was 200 ms)"
        assert stat(admin, w, "timed_out") == 1

        failures = 0
        # 100 consecutive failing blocks: 40 expired waits while the permit is held ...
        waits = [0, "5ms", datetime.timedelta(milliseconds=3), 0.002]
        for i in range(40):
            try:
                with bulkhead.admit(conn, w, wait=waits[i % 4]):
                    pytest.fail("the block ran")
            except bulkhead.TimedOut:
                failures += 1
        release.set()
        holder.join(30)
        assert result == [42]
        # ... then 60 blocks whose work fails in three ways
        for i in range(60):
            try:
                with bulkhead.admit(conn, w, wait=1):
                    if i % 3 == 0:
                        raise KeyError("application error")
                    elif i % 3 == 1:
                        conn.execute("SELECT 1/0")
                    else:
                        conn.execute("SELECT pg_sleep(1)")    # the guard fires: 57014
            except (KeyError, psycopg.errors.DivisionByZero, psycopg.errors.QueryCanceled):
                failures += 1
        assert failures == 100
        with bulkhead.admit(conn, w):
            assert conn.execute("SELECT 9").fetchone()[0] == 9
    assert_idle(admin, w)
    assert stat(admin, w, "timed_out") == 41
    assert stat(admin, w, "acquired") == 62
    assert stat(admin, w, "released") == 62
    assert stat(admin, w, "cancelled") == 0


def test_twenty_threads_pool_of_ten_never_more_than_three(admin, pools, threads):
    w = "py_conc"
    define(admin, w, 3, 100, "30s")
    pool = pools(10)
    nthreads, units = 20, 15
    lock = threading.Lock()
    in_work = [0, 0]       # now, max
    done = []
    seen = {"running": 0, "activity": 0, "samples": 0}
    stop = threading.Event()

    def monitor():
        with psycopg.connect(DSN, autocommit=True) as m:
            while not stop.is_set():
                r, a = m.execute(
                    "SELECT (SELECT running FROM bulkhead_stats WHERE workload = %s),"
                    " (SELECT count(*) FROM bulkhead_activity"
                    "   WHERE workload = %s AND state = 'running')", (w, w)).fetchone()
                seen["running"] = max(seen["running"], r)
                seen["activity"] = max(seen["activity"], a)
                seen["samples"] += 1
                time.sleep(0.002)

    def worker():
        n = 0
        for _ in range(units):
            with pool.connection() as conn:
                with bulkhead.admit(conn, w):
                    with lock:
                        in_work[0] += 1
                        in_work[1] = max(in_work[1], in_work[0])
                    try:
                        conn.execute("SELECT pg_sleep(0.01)")
                    finally:
                        with lock:
                            in_work[0] -= 1
                n += 1
        done.append(n)

    mon = threads(monitor)
    try:
        workers = [threads(worker) for _ in range(nthreads)]
        for t in workers:
            t.join(120)
    finally:
        stop.set()
    mon.join(10)

    assert sum(done) == nthreads * units
    assert seen["samples"] > 20, seen
    assert seen["running"] <= 3, seen
    assert seen["activity"] <= 3, seen
    assert in_work[1] <= 3
    assert stat(admin, w, "peak_running") == 3    # exact; 3 shows the limit was reached
    assert stat(admin, w, "acquired") == nthreads * units
    assert (stat(admin, w, "rejected_full") + stat(admin, w, "timed_out")
            + stat(admin, w, "cancelled")) == 0
    assert_idle(admin, w)
    print(f"[psycopg concurrency] {sum(done)} blocks, {seen['samples']} samples, "
          f"max running seen {seen['running']}, activity {seen['activity']}, "
          f"in work {in_work[1]}, peak_queued {stat(admin, w, 'peak_queued')}")


def test_refuses_a_connection_already_in_a_transaction(admin):
    """admit() must open the transaction: inside an open one, the permit
    would outlive the block (psycopg would use a savepoint)."""
    w = "py_intrans"
    define(admin, w, 1, 0, "1s")
    with psycopg.connect(DSN) as conn:    # not autocommit
        conn.execute("SELECT 1")          # opens a transaction
        with pytest.raises(psycopg.ProgrammingError):
            with bulkhead.admit(conn, w):
                pytest.fail("the block ran")
        assert stat(admin, w, "acquired") == 0
        conn.rollback()
        with bulkhead.admit(conn, w):     # idle again: fine
            assert stat(admin, w, "running") == 1
        assert conn.info.transaction_status == TransactionStatus.IDLE
    assert_idle(admin, w)
    with pytest.raises(TypeError):
        with bulkhead.admit(admin, w, wait=[1]):
            pass


def keys_of(conn, workload):
    """The keys of workload's rows in bulkhead_activity, as conn sees them:
    "key:state" by key, "-" for no key."""
    return conn.execute(
        "SELECT coalesce(string_agg(coalesce(key, '-') || ':' || state, ','"
        "                           ORDER BY key COLLATE \"C\" NULLS FIRST), '')"
        " FROM bulkhead_activity WHERE workload = %s", (workload,)).fetchone()[0]


def test_key_reaches_the_server(admin, pools, threads):
    """The key reaches the server.  B=2, max_running_per_key 1,
    max_queued_per_key 0: while key "a" holds a permit, a second caller of
    "a" is rejected at once with bulkhead.Full (the key's 53B01), and "b" is
    served beside it; a caller with no key (None or "") is served as before.
    Inside each block, bulkhead_activity shows the caller's key."""
    w = "py_keys"
    define(admin, w, 2, 10, "5s", max_running_per_key=1, max_queued_per_key=0)
    pool = pools(2)
    held, release, inside = threading.Event(), threading.Event(), []

    def hold_a():
        with pool.connection() as conn:
            with bulkhead.admit(conn, w, wait="5s", key="a"):
                inside.append(keys_of(conn, w))
                held.set()
                assert release.wait(30)

    holder = threads(hold_a)
    assert held.wait(30)
    assert keys_of(admin, w) == "a:running"

    ran = False
    with pool.connection() as conn:
        t0 = time.monotonic()
        with pytest.raises(bulkhead.Full) as exc:
            with bulkhead.admit(conn, w, wait="5s", key="a"):
                ran = True
        elapsed = time.monotonic() - t0
        assert not ran, "the block of a rejected caller ran"
        assert elapsed < 1.0, f"rejected after {elapsed:.3f} s, not at once (wait was 5 s)"
        assert exc.value.sqlstate == "53B01"
        assert f'key "a" of workload "{w}" is full' in str(exc.value)
        assert exc.value.workload == w
        assert exc.value.key == "a"

        # another key is served beside "a", with or without a wait of its own
        with bulkhead.admit(conn, w, wait="5s", key="b"):
            assert keys_of(conn, w) == "a:running,b:running"
        with bulkhead.admit(conn, w, key="c"):
            assert keys_of(conn, w) == "a:running,c:running"
        # a key of 63 bytes is one; 64 is the server's 22023, passed on as is
        k63 = "k" * 63
        with bulkhead.admit(conn, w, key=k63):
            assert keys_of(conn, w) == f"a:running,{k63}:running"
        with pytest.raises(psycopg.errors.InvalidParameterValue) as exc:
            with bulkhead.admit(conn, w, key=k63 + "k"):
                pytest.fail("the block ran")
        assert not isinstance(exc.value, bulkhead.Rejected)
        # no key, None or "": not capped per key, no key on the server
        for no_key in ({}, {"key": None}, {"key": ""}):
            with bulkhead.admit(conn, w, wait="5s", **no_key):
                assert keys_of(conn, w) == "-:running,a:running"
        with pytest.raises(TypeError):
            with bulkhead.admit(conn, w, key=42):
                pytest.fail("the block ran")
        assert conn.info.transaction_status == TransactionStatus.IDLE

    release.set()
    holder.join(30)
    assert inside == ["a:running"], "seen from inside the block of \"a\""
    assert_idle(admin, w)
    assert stat(admin, w, "acquired") == 7
    assert stat(admin, w, "rejected_full") == 1
    assert stat(admin, w, "released") == 7


def test_without_key_the_helper_works_with_bulkhead_11(admin):
    """Without a key admit() calls bulkhead_acquire_xact(workload, timeout)
    as it always did, so it works against bulkhead 1.1, whose function has
    no key argument (in 1.2 the key is a third argument with a default): in
    a database whose extension is still at 1.1, every call without a key is
    admitted, and one with a key fails as 1.1 cannot take it (42883)."""
    w = "py_v11"
    define(admin, w, 1, 0, "1s")
    admin.execute("DROP DATABASE IF EXISTS bh_py_v11")
    admin.execute("CREATE DATABASE bh_py_v11")
    dsn = DSN.replace("dbname=postgres", "dbname=bh_py_v11")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION bulkhead VERSION '1.1'")
            calls = [{}, {"wait": "200ms"}, {"key": None}, {"wait": 0.2, "key": ""}]
            for i, kwargs in enumerate(calls):
                with bulkhead.admit(conn, w, **kwargs):
                    assert conn.execute("SELECT %s::int", (i,)).fetchone()[0] == i
            with pytest.raises(psycopg.errors.UndefinedFunction) as exc:
                with bulkhead.admit(conn, w, wait="200ms", key="a"):
                    pytest.fail("the block ran")
            assert "bulkhead_acquire_xact" in str(exc.value)
            assert conn.info.transaction_status == TransactionStatus.IDLE
    finally:
        admin.execute("DROP DATABASE bh_py_v11")
    assert_idle(admin, w)
    assert stat(admin, w, "acquired") == 4


def test_readme_example(admin, pools, threads):
    """The doc/clients.md example, admitted, timed out, and rejected when full."""
    define(admin, "reports", 1, 1, "5s")
    pool = pools(3)
    assert count_tables(pool).startswith("tables: ")

    held, release, result = threading.Event(), threading.Event(), []
    holder = threads(hold_permit(pool, "reports", held, release, result))
    assert held.wait(30)
    assert count_tables(pool) == "too slow right now"         # queued, waited 200 ms

    def waiter():                                             # takes the one queue slot
        with pool.connection() as conn:
            with bulkhead.admit(conn, "reports", wait="20s"):
                result.append(conn.execute("SELECT 1").fetchone()[0])
    waiting = threads(waiter)
    deadline = time.monotonic() + 10
    while stat(admin, "reports", "queued") != 1:
        assert time.monotonic() < deadline, "the waiter did not queue"
        time.sleep(0.005)
    assert count_tables(pool) == "busy, try again later"      # B + Q taken

    release.set()
    holder.join(30)
    waiting.join(30)
    assert sorted(result) == [1, 42]
    assert count_tables(pool).startswith("tables: ")
    assert_idle(admin, "reports")
    assert stat(admin, "reports", "rejected_full") == 1
    assert stat(admin, "reports", "timed_out") == 1


def test_readme_key_example(admin, pools, threads):
    """The keyed example of doc/clients.md: with one permit and no queue per tenant,
    a second call of a tenant that holds a permit is rejected (53B01 of its
    key), and another tenant is served."""
    define(admin, "reports", 2, 10, "5s", max_running_per_key=1, max_queued_per_key=0)
    pool = pools(2)
    held, release = threading.Event(), threading.Event()

    def hold():
        with pool.connection() as conn:
            with bulkhead.admit(conn, "reports", wait="5s", key="tenant-1"):
                held.set()
                assert release.wait(30)

    holder = threads(hold)
    assert held.wait(30)
    with pytest.raises(bulkhead.Full) as exc:
        count_tables_for(pool, "tenant-1")
    assert exc.value.key == "tenant-1"
    assert 'key "tenant-1" of workload "reports" is full' in str(exc.value)
    assert count_tables_for(pool, "tenant-2") > 0
    release.set()
    holder.join(30)
    assert_idle(admin, "reports")
    assert stat(admin, "reports", "acquired") == 2
    assert stat(admin, "reports", "rejected_full") == 1


def test_through_pgbouncer_transaction_pooling(admin, threads):
    """psycopg_pool (10) in front of PgBouncer (6 server connections,
    transaction pooling), 20 threads, B=2.  psycopg needs
    prepare_threshold=None there: no named server-side statements."""
    assert PGBOUNCER_DSN, "set BULKHEAD_PGBOUNCER_DSN"
    w = "py_pgbouncer"
    define(admin, w, 2, 100, "30s")
    seen = {"running": 0, "samples": 0}
    stop = threading.Event()
    done = []

    def monitor():
        with psycopg.connect(DSN, autocommit=True) as m:
            while not stop.is_set():
                r = m.execute("SELECT running FROM bulkhead_stats WHERE workload = %s",
                              (w,)).fetchone()[0]
                seen["running"] = max(seen["running"], r)
                seen["samples"] += 1
                time.sleep(0.002)

    with ConnectionPool(PGBOUNCER_DSN, min_size=10, max_size=10, timeout=30,
                        kwargs={"prepare_threshold": None}) as pool:
        def worker():
            n = 0
            for _ in range(10):
                with pool.connection() as conn:
                    with bulkhead.admit(conn, w):
                        conn.execute("SELECT pg_sleep(0.005)")
                n += 1
            done.append(n)

        mon = threads(monitor)
        try:
            workers = [threads(worker) for _ in range(20)]
            for t in workers:
                t.join(120)
        finally:
            stop.set()
        mon.join(10)
    assert sum(done) == 200
    assert seen["samples"] > 20, seen
    assert seen["running"] <= 2, seen
    assert stat(admin, w, "peak_running") == 2
    assert stat(admin, w, "acquired") == 200
    assert_idle(admin, w)
