/*
 * BulkheadTest.java: the Bulkhead helper against a real, preloaded server,
 * through HikariCP (and a plain PGSimpleDataSource).  JUnit 5, run by
 * test/clients/run.sh with -Dbulkhead.jdbc.url=jdbc:postgresql://...
 *
 * Each test has its own workload, so the figures of bulkhead_stats are its
 * own; the server's view (bulkhead_stats, bulkhead_activity) is read on a
 * separate connection that never takes a permit.
 */
package bulkhead;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;
import org.postgresql.ds.PGSimpleDataSource;

class BulkheadTest {

    static final String URL = System.getProperty("bulkhead.jdbc.url");
    /** The same database through PgBouncer (transaction pooling). */
    static final String PGBOUNCER_URL = System.getProperty("bulkhead.pgbouncer.url");
    static Connection admin;
    final List<AutoCloseable> closeAfter = new ArrayList<>();

    @BeforeAll
    static void connect() throws SQLException {
        if (URL == null) {
            throw new IllegalStateException("set -Dbulkhead.jdbc.url");
        }
        admin = DriverManager.getConnection(URL);
        exec("DROP TABLE IF EXISTS jdbc_items");
        exec("CREATE TABLE jdbc_items (x int)");
    }

    @AfterAll
    static void disconnect() throws SQLException {
        admin.close();
    }

    @AfterEach
    void closeResources() throws Exception {
        for (AutoCloseable c : closeAfter) {
            c.close();
        }
        closeAfter.clear();
    }

    // ---- helpers -------------------------------------------------------

    static void exec(String sql) throws SQLException {
        try (Statement st = admin.createStatement()) {
            st.execute(sql);
        }
    }

    static long queryLong(Connection c, String sql, Object... args) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                ps.setObject(i + 1, args[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next(), "no row: " + sql);
                return rs.getLong(1);
            }
        }
    }

    static String queryString(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            assertTrue(rs.next(), "no row: " + sql);
            return rs.getString(1);
        }
    }

    /** A workload of its own, loaded by the worker, with its figures reset. */
    static void define(String name, int maxRunning, int maxQueued, String queueTimeout,
                       String statementTimeout) throws Exception {
        try (PreparedStatement ps = admin.prepareStatement(
                "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
                        + " statement_timeout) VALUES (?, ?, ?, ?::interval, ?::interval)"
                        + " ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,"
                        + " max_queued = excluded.max_queued, queue_timeout = excluded.queue_timeout,"
                        + " statement_timeout = excluded.statement_timeout")) {
            ps.setString(1, name);
            ps.setInt(2, maxRunning);
            ps.setInt(3, maxQueued);
            ps.setString(4, queueTimeout);
            ps.setString(5, statementTimeout);
            ps.execute();
        }
        awaitLoaded(name, maxRunning, maxQueued);
    }

    /**
     * A workload of its own with caps per key (tenant), loaded, figures reset.
     * The caps are in the same row as maxRunning, so they are loaded with it.
     */
    static void defineKeyed(String name, int maxRunning, int maxQueued, int maxRunningPerKey,
                            int maxQueuedPerKey) throws Exception {
        try (PreparedStatement ps = admin.prepareStatement(
                "INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,"
                        + " max_running_per_key, max_queued_per_key) VALUES (?, ?, ?, '5s', ?, ?)"
                        + " ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,"
                        + " max_queued = excluded.max_queued, queue_timeout = excluded.queue_timeout,"
                        + " max_running_per_key = excluded.max_running_per_key,"
                        + " max_queued_per_key = excluded.max_queued_per_key")) {
            ps.setString(1, name);
            ps.setInt(2, maxRunning);
            ps.setInt(3, maxQueued);
            ps.setInt(4, maxRunningPerKey);
            ps.setInt(5, maxQueuedPerKey);
            ps.execute();
        }
        awaitLoaded(name, maxRunning, maxQueued);
    }

    static void awaitLoaded(String name, int maxRunning, int maxQueued) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (queryLong(admin, "SELECT count(*) FROM bulkhead_stats WHERE workload = ?"
                + " AND max_running = ? AND max_queued = ?", name, maxRunning, maxQueued) != 1) {
            assertTrue(System.nanoTime() < deadline, "workload " + name + " not loaded");
            Thread.sleep(20);
        }
        queryLong(admin, "SELECT count(*) FROM (SELECT bulkhead_stats_reset(?)) s", name);
    }

    static long stat(String workload, String column) throws SQLException {
        return queryLong(admin, "SELECT " + column + " FROM bulkhead_stats WHERE workload = ?", workload);
    }

    static void assertIdle(String workload) throws SQLException {
        assertEquals(0, stat(workload, "running"), "running");
        assertEquals(0, stat(workload, "queued"), "queued");
        assertEquals(0, queryLong(admin, "SELECT count(*) FROM bulkhead_activity WHERE workload = ?",
                workload), "rows in bulkhead_activity");
    }

    HikariDataSource pool(int size) {
        HikariConfig cfg = new HikariConfig();
        cfg.setJdbcUrl(URL);
        cfg.setMaximumPoolSize(size);
        cfg.setMinimumIdle(size);
        cfg.setConnectionTimeout(30_000);
        cfg.setPoolName("test-pool-" + size);
        HikariDataSource ds = new HikariDataSource(cfg);
        closeAfter.add(ds);
        return ds;
    }

    ExecutorService threads(int n) {
        ExecutorService ex = Executors.newFixedThreadPool(n);
        closeAfter.add(() -> {
            ex.shutdownNow();
            assertTrue(ex.awaitTermination(30, TimeUnit.SECONDS), "threads did not end");
        });
        return ex;
    }

    static void await(CountDownLatch latch) {
        try {
            assertTrue(latch.await(30, TimeUnit.SECONDS), "latch not released");
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    static long millisSince(long t0) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    }

    /** A unit of work holding a permit of workload until release is counted down. */
    static Future<Long> holdPermit(ExecutorService ex, HikariDataSource ds, String workload,
                                   CountDownLatch held, CountDownLatch release) {
        return ex.submit(() -> Bulkhead.inTransaction(ds, workload, Duration.ofSeconds(5), c -> {
            held.countDown();
            await(release);
            return queryLong(c, "SELECT 42");
        }));
    }

    /** The same as the caller of key. */
    static Future<Long> holdPermit(ExecutorService ex, HikariDataSource ds, String workload, String key,
                                   CountDownLatch held, CountDownLatch release) {
        return ex.submit(() -> Bulkhead.inTransaction(ds, workload, Duration.ofSeconds(5), key, c -> {
            held.countDown();
            await(release);
            return queryLong(c, "SELECT 42");
        }));
    }

    // ---- the tests ------------------------------------------------------

    /** Pool of 2, B=1 Q=0: the second unit is rejected with FullException at once. */
    @Test
    void fullWorkloadRejectsAtOnce() throws Exception {
        String w = "jdbc_full";
        define(w, 1, 0, "5s", null);
        HikariDataSource ds = pool(2);
        ExecutorService ex = threads(1);
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Future<Long> first = holdPermit(ex, ds, w, held, release);
        await(held);
        assertEquals(1, stat(w, "running"));

        AtomicBoolean ran = new AtomicBoolean();
        long t0 = System.nanoTime();
        Bulkhead.FullException e = assertThrows(Bulkhead.FullException.class,
                () -> Bulkhead.inTransaction(ds, w, Duration.ofSeconds(5), c -> {
                    ran.set(true);
                    return null;
                }));
        long ms = millisSince(t0);
        assertTrue(ms < 1000, "rejected after " + ms + " ms, not at once (wait was 5 s)");
        assertFalse(ran.get(), "the work of a rejected unit ran");
        assertEquals("53B01", e.getSQLState());
        assertEquals(w, e.getWorkload());
        assertTrue(e instanceof Bulkhead.RejectedException);

        release.countDown();
        assertEquals(42L, first.get(30, TimeUnit.SECONDS));
        assertIdle(w);
        assertEquals(1, stat(w, "acquired"));
        assertEquals(1, stat(w, "rejected_full"));
        assertEquals(1, stat(w, "released"));
        // both pooled connections are usable afterwards
        for (int i = 0; i < 2; i++) {
            assertEquals(7L, (long) Bulkhead.inTransaction(ds, w, null, c -> queryLong(c, "SELECT 7")));
        }
        assertIdle(w);
    }

    /** Commit returns the permit, and the work's changes are committed. */
    @Test
    void commitReturnsPermit() throws Exception {
        String w = "jdbc_commit";
        define(w, 1, 0, "1s", null);
        HikariDataSource ds = pool(2);
        long n = Bulkhead.inTransaction(ds, w, Duration.ofMillis(200), c -> {
            assertEquals(1, stat(w, "running"));
            try (Statement st = c.createStatement()) {
                st.executeUpdate("INSERT INTO jdbc_items VALUES (1)");
            }
            return queryLong(c, "SELECT count(*) FROM jdbc_items WHERE x = 1");
        });
        assertEquals(1, n);
        assertEquals(1, queryLong(admin, "SELECT count(*) FROM jdbc_items WHERE x = 1"), "committed");
        assertIdle(w);
        assertEquals(1, stat(w, "released"));
    }

    /** An exception thrown by the work rolls back, returns the permit, and is passed on as is. */
    @Test
    void exceptionInWorkRollsBack() throws Exception {
        String w = "jdbc_rollback";
        define(w, 1, 0, "1s", null);
        HikariDataSource ds = pool(2);
        IllegalStateException boom = new IllegalStateException("boom");
        IllegalStateException thrown = assertThrows(IllegalStateException.class,
                () -> Bulkhead.inTransaction(ds, w, Duration.ofMillis(200), c -> {
                    try (Statement st = c.createStatement()) {
                        st.executeUpdate("INSERT INTO jdbc_items VALUES (2)");
                    }
                    throw boom;
                }));
        assertSame(boom, thrown);
        assertEquals(0, queryLong(admin, "SELECT count(*) FROM jdbc_items WHERE x = 2"), "rolled back");
        assertIdle(w);

        // an error of the server inside the work: passed on unchanged
        SQLException e = assertThrows(SQLException.class,
                () -> Bulkhead.inTransaction(ds, w, Duration.ofMillis(200), c -> queryLong(c, "SELECT 1/0")));
        assertEquals("22012", e.getSQLState());
        assertFalse(e instanceof Bulkhead.RejectedException);
        assertIdle(w);

        // a rollback by the work itself ends the transaction, and the permit with it
        Bulkhead.inTransaction(ds, w, Duration.ofMillis(200), c -> {
            assertEquals(1, stat(w, "running"));
            c.rollback();
            assertEquals(0, stat(w, "running"));
            return null;
        });
        assertIdle(w);
        assertEquals(3, stat(w, "acquired"));
        assertEquals(3, stat(w, "released"));
    }

    /** Any DataSource will do: PGSimpleDataSource (no pool), auto-commit restored. */
    @Test
    void plainDataSource() throws Exception {
        String w = "jdbc_plain";
        define(w, 1, 0, "1s", null);
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(URL);
        assertEquals(5L, (long) Bulkhead.inTransaction(ds, w, null, c -> queryLong(c, "SELECT 5")));
        assertThrows(RuntimeException.class, () -> Bulkhead.inTransaction(ds, w, null, c -> {
            throw new RuntimeException("x");
        }));
        try (Connection c = ds.getConnection()) {
            Bulkhead.inTransaction(c, w, Duration.ZERO, x -> null);
            assertTrue(c.getAutoCommit(), "auto-commit restored");
            assertEquals(TransactionState.IDLE,
                    c.unwrap(BaseConnection.class).getTransactionState(), "no transaction left open");
            assertEquals(0, stat(w, "running"));
            // on a connection that stays open (no pool to clean up after us),
            // a failure must still roll back and return the permit
            assertThrows(IllegalStateException.class, () -> Bulkhead.inTransaction(c, w, null, x -> {
                assertEquals(1, stat(w, "running"));
                throw new IllegalStateException("y");
            }));
            assertEquals(TransactionState.IDLE, c.unwrap(BaseConnection.class).getTransactionState());
            assertTrue(c.getAutoCommit(), "auto-commit restored");
            assertEquals(0, stat(w, "running"));
        }
        assertIdle(w);
        assertEquals(4, stat(w, "released"));
    }

    /**
     * The workload's statement_timeout (a guard) ends slow work with 57014;
     * the permit is returned, the guard is undone, and the next unit on the
     * same pooled connection runs normally.
     */
    @Test
    void statementTimeoutInsideWork() throws Exception {
        String w = "jdbc_guard";
        define(w, 1, 0, "1s", "300ms");
        HikariDataSource ds = pool(1);    // one connection: the next unit reuses it
        long pid;
        try (Connection c = ds.getConnection()) {
            pid = queryLong(c, "SELECT pg_backend_pid()");
        }
        long t0 = System.nanoTime();
        SQLException e = assertThrows(SQLException.class,
                () -> Bulkhead.inTransaction(ds, w, Duration.ofMillis(200), c -> queryLong(c,
                        "SELECT count(*) FROM pg_sleep(5)")));
        long ms = millisSince(t0);
        assertEquals("57014", e.getSQLState(), e.toString());
        assertTrue(ms < 3000, "the guard fired after " + ms + " ms");
        assertIdle(w);

        String inside = Bulkhead.inTransaction(ds, w, Duration.ofMillis(200), c -> {
            assertEquals(pid, queryLong(c, "SELECT pg_backend_pid()"), "same server connection");
            queryLong(c, "SELECT count(*) FROM pg_sleep(0.05)");
            return queryString(c, "SHOW statement_timeout");
        });
        assertEquals("300ms", inside);
        try (Connection c = ds.getConnection()) {
            assertEquals(pid, queryLong(c, "SELECT pg_backend_pid()"));
            assertEquals("0", queryString(c, "SHOW statement_timeout"), "guard undone after the unit");
        }
        assertIdle(w);
        assertEquals(2, stat(w, "acquired"));
        assertEquals(2, stat(w, "released"));
    }

    /** A wait that runs out gives TimedOutException; 100 failing units leave running = 0. */
    @Test
    void waitExpiresAndFailuresLeakNothing() throws Exception {
        String w = "jdbc_wait";
        define(w, 1, 10, "5s", "100ms");
        HikariDataSource ds = pool(2);
        ExecutorService ex = threads(1);
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Future<Long> holder = holdPermit(ex, ds, w, held, release);
        await(held);

        long t0 = System.nanoTime();
        Bulkhead.TimedOutException e = assertThrows(Bulkhead.TimedOutException.class,
                () -> Bulkhead.inTransaction(ds, w, Duration.ofMillis(200), c -> fail("work ran")));
        long ms = millisSince(t0);
        assertEquals("53B02", e.getSQLState());
        assertTrue(ms >= 190 && ms < 3000, "timed out after " + ms + " ms (wait was 200 ms)");
        assertEquals(1, stat(w, "timed_out"));

        // 100 consecutive failing units: 40 expired waits while the permit is held ...
        int failures = 0;
        for (int i = 0; i < 40; i++) {
            Duration wait = i % 2 == 0 ? Duration.ZERO : Duration.ofMillis(5);
            try {
                Bulkhead.inTransaction(ds, w, wait, c -> fail("work ran"));
            } catch (Bulkhead.TimedOutException expected) {
                failures++;
            }
        }
        release.countDown();
        assertEquals(42L, holder.get(30, TimeUnit.SECONDS));
        // ... then 60 units whose work fails in three ways
        for (int i = 0; i < 60; i++) {
            final int kind = i % 3;
            try {
                Bulkhead.inTransaction(ds, w, Duration.ofSeconds(1), c -> {
                    switch (kind) {
                        case 0:
                            throw new IllegalArgumentException("application error");
                        case 1:
                            return queryLong(c, "SELECT 1/0");                       // 22012
                        default:
                            return queryLong(c, "SELECT count(*) FROM pg_sleep(1)");  // guard, 57014
                    }
                });
            } catch (IllegalArgumentException | SQLException expected) {
                if (expected instanceof Bulkhead.RejectedException) {
                    throw expected;
                }
                failures++;
            }
        }
        assertEquals(100, failures);
        assertIdle(w);
        assertEquals(41, stat(w, "timed_out"));
        assertEquals(61, stat(w, "acquired"));
        assertEquals(61, stat(w, "released"));
        assertEquals(0, stat(w, "cancelled"));
        assertEquals(9L, (long) Bulkhead.inTransaction(ds, w, null, c -> queryLong(c, "SELECT 9")));
        assertIdle(w);
    }

    /** 20 threads through a pool of 10 with B=3: the server never shows more than 3 running. */
    @Test
    void twentyThreadsPoolOfTenNeverMoreThanThree() throws Exception {
        String w = "jdbc_conc";
        define(w, 3, 100, "30s", null);
        HikariDataSource ds = pool(10);
        int threads = 20;
        int unitsPerThread = 15;
        AtomicInteger inWork = new AtomicInteger();
        AtomicInteger maxInWork = new AtomicInteger();
        AtomicBoolean stop = new AtomicBoolean();
        long[] maxSeen = new long[3];    // running, activity rows running, samples

        Thread monitor = new Thread(() -> {
            try (Connection m = DriverManager.getConnection(URL);
                 PreparedStatement ps = m.prepareStatement(
                         "SELECT (SELECT running FROM bulkhead_stats WHERE workload = ?),"
                                 + " (SELECT count(*) FROM bulkhead_activity"
                                 + "   WHERE workload = ? AND state = 'running')")) {
                ps.setString(1, w);
                ps.setString(2, w);
                while (!stop.get()) {
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        maxSeen[0] = Math.max(maxSeen[0], rs.getLong(1));
                        maxSeen[1] = Math.max(maxSeen[1], rs.getLong(2));
                        maxSeen[2]++;
                    }
                    Thread.sleep(2);
                }
            } catch (Exception e) {
                maxSeen[2] = -1;
                e.printStackTrace();
            }
        });
        monitor.setDaemon(true);
        monitor.start();
        closeAfter.add(() -> stop.set(true));

        ExecutorService ex = threads(threads);
        List<Future<Integer>> results = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            results.add(ex.submit(() -> {
                int done = 0;
                for (int i = 0; i < unitsPerThread; i++) {
                    done += Bulkhead.inTransaction(ds, w, null, c -> {
                        int now = inWork.incrementAndGet();
                        maxInWork.accumulateAndGet(now, Math::max);
                        try {
                            queryLong(c, "SELECT count(*) FROM pg_sleep(0.01)");
                        } finally {
                            inWork.decrementAndGet();
                        }
                        return 1;
                    });
                }
                return done;
            }));
        }
        int total = 0;
        for (Future<Integer> f : results) {
            total += f.get(120, TimeUnit.SECONDS);
        }
        stop.set(true);
        monitor.join(10_000);

        assertEquals(threads * unitsPerThread, total, "units completed");
        assertTrue(maxSeen[2] > 20, "monitor samples: " + maxSeen[2]);
        assertTrue(maxSeen[0] <= 3, "bulkhead_stats.running reached " + maxSeen[0]);
        assertTrue(maxSeen[1] <= 3, "bulkhead_activity showed " + maxSeen[1] + " running");
        assertTrue(maxInWork.get() <= 3, maxInWork.get() + " units in their work at once");
        long peak = stat(w, "peak_running");
        assertEquals(3, peak, "peak_running (exact): at most 3, and 3 shows the limit was reached");
        assertEquals(threads * unitsPerThread, stat(w, "acquired"));
        assertEquals(0, stat(w, "rejected_full") + stat(w, "timed_out") + stat(w, "cancelled"));
        assertIdle(w);
        System.out.printf("  [jdbc concurrency] %d units, %d samples, max running seen %d, "
                        + "activity %d, in work %d, peak_running %d, peak_queued %d%n",
                total, maxSeen[2], maxSeen[0], maxSeen[1], maxInWork.get(), peak,
                stat(w, "peak_queued"));
    }

    // ---- keys (tenants) ----------------------------------------------------

    /**
     * The keys of the rows of workload in bulkhead_activity, as the server
     * shows them to c: "key:state" by key, "-" for no key.
     */
    static String keysOf(Connection c, String workload) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT coalesce(string_agg(coalesce(key, '-') || ':' || state, ','"
                        + " ORDER BY key COLLATE \"C\" NULLS FIRST), '')"
                        + " FROM bulkhead_activity WHERE workload = ?")) {
            ps.setString(1, workload);
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next());
                return rs.getString(1);
            }
        }
    }

    /**
     * The key reaches the server.  B=2, max_running_per_key 1,
     * max_queued_per_key 0: while key "a" holds a permit, a second caller of
     * "a" is rejected at once with FullException (the key's 53B01), and "b"
     * is served beside it; a caller with no key (null or "") is served as
     * before.  Inside each work, bulkhead_activity shows the caller's key.
     */
    @Test
    void keyReachesTheServer() throws Exception {
        String w = "jdbc_keys";
        defineKeyed(w, 2, 10, 1, 0);
        HikariDataSource ds = pool(2);
        ExecutorService ex = threads(1);
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Future<String> holder = ex.submit(() -> Bulkhead.inTransaction(ds, w, Duration.ofSeconds(5), "a",
                c -> {
                    String inside = keysOf(c, w);
                    held.countDown();
                    await(release);
                    return inside;
                }));
        await(held);
        assertEquals("a:running", keysOf(admin, w));

        AtomicBoolean ran = new AtomicBoolean();
        long t0 = System.nanoTime();
        Bulkhead.FullException e = assertThrows(Bulkhead.FullException.class,
                () -> Bulkhead.inTransaction(ds, w, Duration.ofSeconds(5), "a", c -> {
                    ran.set(true);
                    return null;
                }));
        long ms = millisSince(t0);
        assertTrue(ms < 1000, "rejected after " + ms + " ms, not at once (wait was 5 s)");
        assertFalse(ran.get(), "the work of a rejected unit ran");
        assertEquals("53B01", e.getSQLState());
        assertTrue(e.getMessage().contains("key \"a\" of workload \"" + w + "\" is full"), e.getMessage());
        assertEquals(w, e.getWorkload());
        assertEquals("a", e.getKey());

        // another key is served beside "a", with or without a wait of its own
        assertEquals("a:running,b:running",
                Bulkhead.inTransaction(ds, w, Duration.ofSeconds(5), "b", c -> keysOf(c, w)));
        assertEquals("a:running,c:running", Bulkhead.inTransaction(ds, w, null, "c", c -> keysOf(c, w)));
        // a key of 63 bytes is one; 64 is the server's 22023, passed on as is
        String k63 = "k".repeat(63);
        assertEquals("a:running," + k63 + ":running",
                Bulkhead.inTransaction(ds, w, null, k63, c -> keysOf(c, w)));
        SQLException tooLong = assertThrows(SQLException.class,
                () -> Bulkhead.inTransaction(ds, w, null, k63 + "k", c -> fail("the work ran")));
        assertEquals("22023", tooLong.getSQLState(), tooLong.toString());
        assertFalse(tooLong instanceof Bulkhead.RejectedException);
        // no key, null or "": not capped per key, no key on the server
        assertEquals("-:running,a:running",
                Bulkhead.inTransaction(ds, w, Duration.ofSeconds(5), c -> keysOf(c, w)));
        assertEquals("-:running,a:running",
                Bulkhead.inTransaction(ds, w, Duration.ofSeconds(5), null, c -> keysOf(c, w)));
        assertEquals("-:running,a:running",
                Bulkhead.inTransaction(ds, w, Duration.ofSeconds(5), "", c -> keysOf(c, w)));

        release.countDown();
        assertEquals("a:running", holder.get(30, TimeUnit.SECONDS), "seen from inside the work of \"a\"");
        assertIdle(w);
        assertEquals(7, stat(w, "acquired"));
        assertEquals(1, stat(w, "rejected_full"));
        assertEquals(7, stat(w, "released"));
    }

    /**
     * Without a key the helper calls bulkhead_acquire_xact(workload[, timeout])
     * as it always did, so it works against bulkhead 1.1, whose function has
     * no key argument (in 1.2 the key is a third argument with a default): in
     * a database whose extension is still at 1.1, every call without a key is
     * admitted, and one with a key fails as 1.1 cannot take it (42883).
     */
    @Test
    void withoutKeyTheHelperWorksWithBulkhead11() throws Exception {
        String w = "jdbc_v11";
        define(w, 1, 0, "1s", null);
        exec("DROP DATABASE IF EXISTS bh_jdbc_v11");
        exec("CREATE DATABASE bh_jdbc_v11");
        String url = URL.replace("/postgres?", "/bh_jdbc_v11?");
        try {
            try (Connection c = DriverManager.getConnection(url);
                 Statement st = c.createStatement()) {
                st.execute("CREATE EXTENSION bulkhead VERSION '1.1'");
            }
            try (Connection c = DriverManager.getConnection(url)) {
                assertEquals(1L, (long) Bulkhead.inTransaction(c, w, null, x -> queryLong(x, "SELECT 1")));
                assertEquals(2L, (long) Bulkhead.inTransaction(c, w, Duration.ofMillis(200),
                        x -> queryLong(x, "SELECT 2")));
                assertEquals(3L, (long) Bulkhead.inTransaction(c, w, null, null, x -> queryLong(x, "SELECT 3")));
                assertEquals(4L, (long) Bulkhead.inTransaction(c, w, Duration.ofMillis(200), "",
                        x -> queryLong(x, "SELECT 4")));
                SQLException e = assertThrows(SQLException.class,
                        () -> Bulkhead.inTransaction(c, w, Duration.ofMillis(200), "a", x -> fail("the work ran")));
                assertEquals("42883", e.getSQLState(), e.toString());
                assertTrue(e.getMessage().contains("bulkhead_acquire_xact"), e.getMessage());
                assertTrue(c.getAutoCommit(), "auto-commit restored");
                assertEquals(TransactionState.IDLE, c.unwrap(BaseConnection.class).getTransactionState());
            }
        } finally {
            exec("DROP DATABASE bh_jdbc_v11");
        }
        assertIdle(w);
        assertEquals(4, stat(w, "acquired"));
    }

    // ---- the examples of doc/clients.md -----------------------------------

    /** doc/clients.md example: a report, admitted by the "reports" workload. */
    static String countTables(DataSource dataSource) throws SQLException {
        try {
            long n = Bulkhead.inTransaction(dataSource, "reports", Duration.ofMillis(200), conn -> {
                try (Statement st = conn.createStatement();
                     ResultSet rs = st.executeQuery("SELECT count(*) FROM pg_class")) {
                    rs.next();
                    return rs.getLong(1);
                }
            });
            return "tables: " + n;
        } catch (Bulkhead.FullException e) {
            // 53B01: every permit and queue slot is taken: shed this request
            // (say, HTTP 503 with Retry-After) or retry later, with backoff
            return "busy, try again later";
        } catch (Bulkhead.TimedOutException e) {
            // 53B02: queued 200 ms without a permit: the work holding the
            // permits is slow; do not retry at once
            return "too slow right now";
        }
        // any other SQLException propagates; SQLSTATE 57014 from the work
        // means a guard of the workload (its statement_timeout) fired
    }

    /** doc/clients.md example: the same report for one tenant (a key) of the workload. */
    static long countTablesFor(DataSource dataSource, String tenant) throws SQLException {
        // the workload serves its tenants in turn, the least served first
        return Bulkhead.inTransaction(dataSource, "reports", Duration.ofMillis(200), tenant, conn -> {
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT count(*) FROM pg_class")) {
                rs.next();
                return rs.getLong(1);
            }
        });
    }

    /** A connection as role, gated by bulkhead.workload, with pgJDBC's autosave mode. */
    static Connection gatedConnection(String role, String autosave) throws SQLException {
        String base = URL.substring(0, URL.indexOf('?'));
        return DriverManager.getConnection(base + "?user=" + role + "&autosave=" + autosave
                + "&prepareThreshold=1");
    }

    static String scopeHeld(long pid) throws SQLException {
        try (PreparedStatement ps = admin.prepareStatement(
                "SELECT string_agg(workload || ':' || scope, ',') FROM bulkhead_activity WHERE pid = ?")) {
            ps.setLong(1, pid);
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next());
                return rs.getString(1);
            }
        }
    }

    /**
     * pgJDBC's autosave puts every statement of a transaction in a savepoint
     * and rolls back to it when the statement fails.  A transaction gated by
     * bulkhead.workload takes its permit in the first of these savepoints;
     * the rollback to it leaves the permit held (it belongs to the
     * transaction), and must leave its guard (statement_timeout 1 s) too.
     */
    @Test
    void autosaveKeepsTheGuardOfAnAutomaticPermit() throws Exception {
        String w = "jdbc_autosave";
        define(w, 4, 0, "1s", "1s");
        exec("DROP TABLE IF EXISTS jdbc_autosave_t");
        exec("CREATE TABLE jdbc_autosave_t (x int)");
        exec("INSERT INTO jdbc_autosave_t VALUES (1)");
        exec("DROP ROLE IF EXISTS bh_jdbc_gated");
        exec("CREATE ROLE bh_jdbc_gated LOGIN");
        exec("GRANT ALL ON jdbc_autosave_t TO bh_jdbc_gated");
        exec("ALTER ROLE bh_jdbc_gated SET bulkhead.workload = '" + w + "'");
        try {
            // always: the first statement, which takes the permit, fails and
            // is rolled back to its savepoint; the transaction goes on
            try (Connection c = gatedConnection("bh_jdbc_gated", "always")) {
                c.setAutoCommit(false);
                SQLException e = assertThrows(SQLException.class,
                        () -> queryLong(c, "SELECT 1 / count(*) FROM pg_class WHERE false"));
                assertEquals("22012", e.getSQLState(), e.toString());
                long pid = queryLong(c, "SELECT pg_backend_pid()");
                assertEquals(w + ":auto", scopeHeld(pid), "the permit stays for the transaction");
                assertEquals("1s", queryString(c, "SHOW statement_timeout"), "the guard stays");
                e = assertThrows(SQLException.class, () -> queryLong(c, "SELECT count(*) FROM pg_sleep(1.6)"));
                assertEquals("57014", e.getSQLState(), "the guard fires: " + e);
                // autosave rolled the failure back: the transaction is usable
                assertEquals(1, queryLong(c, "SELECT count(*) FROM jdbc_autosave_t"));
                c.commit();
                assertEquals("0", queryString(c, "SHOW statement_timeout"), "the guard ends with the transaction");
                assertEquals(null, scopeHeld(pid));
            }
            // conservative: a statement whose cached plan no longer fits is
            // rolled back to its savepoint and run again by the driver
            try (Connection c = gatedConnection("bh_jdbc_gated", "conservative")) {
                c.setAutoCommit(false);
                try (PreparedStatement ps = c.prepareStatement("SELECT * FROM jdbc_autosave_t")) {
                    for (int i = 0; i < 2; i++) {
                        try (ResultSet rs = ps.executeQuery()) {
                            assertTrue(rs.next());
                        }
                    }
                    c.commit();
                    exec("ALTER TABLE jdbc_autosave_t ALTER COLUMN x TYPE bigint");
                    try (ResultSet rs = ps.executeQuery()) {
                        assertTrue(rs.next());
                        assertEquals(1L, rs.getLong(1));
                    }
                }
                long pid = queryLong(c, "SELECT pg_backend_pid()");
                assertEquals(w + ":auto", scopeHeld(pid));
                assertEquals("1s", queryString(c, "SHOW statement_timeout"), "the guard stays");
                SQLException e = assertThrows(SQLException.class,
                        () -> queryLong(c, "SELECT count(*) FROM pg_sleep(1.6)"));
                assertEquals("57014", e.getSQLState(), "the guard fires: " + e);
                c.rollback();
                assertEquals("0", queryString(c, "SHOW statement_timeout"));
            }
        } finally {
            exec("DROP TABLE jdbc_autosave_t");
            exec("DROP OWNED BY bh_jdbc_gated");
            exec("DROP ROLE bh_jdbc_gated");
        }
        assertIdle(w);
    }

    /** The doc/clients.md example, admitted, rejected when full, and timed out. */
    @Test
    void readmeExample() throws Exception {
        define("reports", 1, 1, "5s", null);
        HikariDataSource ds = pool(3);
        assertTrue(countTables(ds).startsWith("tables: "), countTables(ds));

        ExecutorService ex = threads(2);
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Future<Long> holder = holdPermit(ex, ds, "reports", held, release);
        await(held);
        assertEquals("too slow right now", countTables(ds));     // queued, waited 200 ms

        Future<Long> waiter = ex.submit(() ->                     // takes the one queue slot
                Bulkhead.inTransaction(ds, "reports", Duration.ofSeconds(20), c -> queryLong(c, "SELECT 1")));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (stat("reports", "queued") != 1) {
            assertTrue(System.nanoTime() < deadline, "the waiter did not queue");
            Thread.sleep(5);
        }
        assertEquals("busy, try again later", countTables(ds));  // B + Q taken

        release.countDown();
        assertEquals(42L, holder.get(30, TimeUnit.SECONDS));
        assertEquals(1L, waiter.get(30, TimeUnit.SECONDS));
        assertTrue(countTables(ds).startsWith("tables: "));
        assertIdle("reports");
        assertEquals(1, stat("reports", "rejected_full"));
        assertEquals(1, stat("reports", "timed_out"));
    }

    /**
     * The keyed example of doc/clients.md: with one permit and no queue per tenant,
     * a second call of a tenant that holds a permit is rejected (53B01 of its
     * key), and another tenant is served.
     */
    @Test
    void readmeKeyExample() throws Exception {
        defineKeyed("reports", 2, 10, 1, 0);
        try {
            HikariDataSource ds = pool(2);
            ExecutorService ex = threads(1);
            CountDownLatch held = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            Future<Long> holder = holdPermit(ex, ds, "reports", "tenant-1", held, release);
            await(held);
            Bulkhead.FullException e = assertThrows(Bulkhead.FullException.class,
                    () -> countTablesFor(ds, "tenant-1"));
            assertEquals("tenant-1", e.getKey());
            assertTrue(e.getMessage().contains("key \"tenant-1\" of workload \"reports\" is full"),
                    e.getMessage());
            assertTrue(countTablesFor(ds, "tenant-2") > 0);
            release.countDown();
            assertEquals(42L, holder.get(30, TimeUnit.SECONDS));
            assertIdle("reports");
            assertEquals(2, stat("reports", "acquired"));
            assertEquals(1, stat("reports", "rejected_full"));
        } finally {
            // no caps per key for readmeExample, which may run next (its
            // define waits for a load of the row that follows this change)
            exec("UPDATE bulkhead_workload SET max_running_per_key = NULL, max_queued_per_key = NULL"
                    + " WHERE name = 'reports'");
        }
    }

    /**
     * Through PgBouncer in transaction pooling: HikariCP (10) in front of
     * PgBouncer (6 server connections), 20 threads, B=2.  pgjdbc needs
     * prepareThreshold=0 there (no named server-side statements: the next
     * transaction may run on another server connection).
     */
    @Test
    void throughPgBouncerTransactionPooling() throws Exception {
        assertTrue(PGBOUNCER_URL != null, "set -Dbulkhead.pgbouncer.url");
        String w = "jdbc_pgbouncer";
        define(w, 2, 100, "30s", null);
        HikariConfig cfg = new HikariConfig();
        cfg.setJdbcUrl(PGBOUNCER_URL + "&prepareThreshold=0");
        cfg.setMaximumPoolSize(10);
        cfg.setConnectionTimeout(30_000);
        cfg.setPoolName("test-pool-pgbouncer");
        HikariDataSource ds = new HikariDataSource(cfg);
        closeAfter.add(ds);

        AtomicBoolean stop = new AtomicBoolean();
        long[] maxSeen = new long[2];
        Thread monitor = new Thread(() -> {
            try (Connection m = DriverManager.getConnection(URL);
                 PreparedStatement ps = m.prepareStatement(
                         "SELECT (SELECT running FROM bulkhead_stats WHERE workload = ?)")) {
                ps.setString(1, w);
                while (!stop.get()) {
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        maxSeen[0] = Math.max(maxSeen[0], rs.getLong(1));
                        maxSeen[1]++;
                    }
                    Thread.sleep(2);
                }
            } catch (Exception e) {
                maxSeen[1] = -1;
                e.printStackTrace();
            }
        });
        monitor.setDaemon(true);
        monitor.start();
        closeAfter.add(() -> stop.set(true));
        ExecutorService ex = threads(20);
        List<Future<Integer>> results = new ArrayList<>();
        for (int t = 0; t < 20; t++) {
            results.add(ex.submit(() -> {
                int done = 0;
                for (int i = 0; i < 10; i++) {
                    done += Bulkhead.inTransaction(ds, w, null,
                            c -> queryLong(c, "SELECT count(*) FROM pg_sleep(0.005)")).intValue();
                }
                return done;
            }));
        }
        int total = 0;
        for (Future<Integer> f : results) {
            total += f.get(120, TimeUnit.SECONDS);
        }
        stop.set(true);
        monitor.join(10_000);
        assertEquals(200, total);
        assertTrue(maxSeen[1] > 20, "monitor samples: " + maxSeen[1]);
        assertTrue(maxSeen[0] <= 2, "running reached " + maxSeen[0]);
        assertEquals(2, stat(w, "peak_running"));
        assertEquals(200, stat(w, "acquired"));
        assertIdle(w);
    }
}
