/*
 * LaneTest.java: bulkhead 1.3's lanes through pgJDBC, that is through the
 * extended protocol (Parse, Bind, Execute): statement rules that send a
 * costly statement to a heavy lane whose settings cap work_mem and the
 * like, with server-side prepared statements (prepareThreshold), their
 * cached generic plans, and pgJDBC's autosave modes (a savepoint before
 * each statement, rolled back to when it fails).  JUnit 5, run by
 * test/clients/run.sh with -Dbulkhead.jdbc.url=jdbc:postgresql://...
 *
 * Role bh_jdbc_lane's transactions take lane_web; its statements whose plan
 * costs 100000 or more take lane_heavy (jdbc_lane_costly() makes a plan cost
 * 250000 and returns at once).  Every statement reads back, in itself, the
 * permit its session holds and the values of the settings a lane caps.  The
 * server's figures are read on the superuser's connection, which the rules
 * do not gate.
 */
package bulkhead;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class LaneTest {

    static final String URL = System.getProperty("bulkhead.jdbc.url");
    static final String ROLE = "bh_jdbc_lane";
    static final String WEB = "lane_web";
    static final String HEAVY = "lane_heavy";
    /** work_mem hash_mem_multiplier max_parallel_workers_per_gather jit */
    static final String SESSION_CAPS = "4MB 2 2 on";
    static final String HEAVY_CAPS = "1MB 1 0 off";
    /** What a statement sees of itself: the permit held, the settings, its value. */
    static final String SEEN = "SELECT jdbc_lane_held() || ' | ' || jdbc_lane_caps() || ' | ' ||"
            + " CASE WHEN ? THEN jdbc_lane_costly() ELSE 0 END";
    static Connection admin;

    @BeforeAll
    static void setUp() throws Exception {
        if (URL == null) {
            throw new IllegalStateException("set -Dbulkhead.jdbc.url");
        }
        admin = DriverManager.getConnection(URL);
        tearDownObjects();
        exec("INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, settings)"
                + " VALUES ('" + WEB + "', 4, 4, '5s', NULL),"
                + " ('" + HEAVY + "', 1, 1, '300ms',"
                + " '{work_mem=1MB,hash_mem_multiplier=1,max_parallel_workers_per_gather=0,jit=off}')");
        exec("CREATE ROLE " + ROLE + " LOGIN");
        exec("INSERT INTO bulkhead_rule (position, role, workload) VALUES (9101, '" + ROLE + "', '" + WEB + "')");
        exec("INSERT INTO bulkhead_rule (position, role, workload, min_cost)"
                + " VALUES (9102, '" + ROLE + "', '" + HEAVY + "', 100000)");
        exec("CREATE FUNCTION jdbc_lane_costly() RETURNS int LANGUAGE plpgsql COST 100000000"
                + " AS $$ BEGIN RETURN 1; END $$");
        exec("CREATE FUNCTION jdbc_lane_caps() RETURNS text LANGUAGE sql STABLE AS $$"
                + " SELECT concat_ws(' ', current_setting('work_mem'), current_setting('hash_mem_multiplier'),"
                + " current_setting('max_parallel_workers_per_gather'), current_setting('jit')) $$");
        exec("CREATE FUNCTION jdbc_lane_held() RETURNS text LANGUAGE sql AS $$"
                + " SELECT coalesce(string_agg(workload || '/' || scope || coalesce(' from ' || moved_from, ''),"
                + " ', ' ORDER BY workload), 'nothing') FROM bulkhead_activity WHERE pid = pg_backend_pid() $$");
        exec("CREATE TABLE jdbc_lane_t (x int)");
        exec("INSERT INTO jdbc_lane_t VALUES (1)");
        exec("GRANT ALL ON jdbc_lane_t TO " + ROLE);
        // the worker has loaded the lanes and the rules
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        try (Connection c = DriverManager.getConnection(URL); Statement st = c.createStatement()) {
            st.execute("SET bulkhead.exempt_superuser = off");
            st.execute("SET ROLE " + ROLE);
            while (!(HEAVY.equals(string(c, "SELECT workload FROM bulkhead_classify('SELECT jdbc_lane_costly()')"))
                    && WEB.equals(string(c, "SELECT workload FROM bulkhead_classify('SELECT 1')")))) {
                assertTrue(System.nanoTime() < deadline, "the lanes were not loaded");
                Thread.sleep(20);
            }
        }
    }

    @AfterAll
    static void tearDown() throws SQLException {
        tearDownObjects();
        admin.close();
    }

    static void tearDownObjects() throws SQLException {
        exec("DELETE FROM bulkhead_rule WHERE position IN (9101, 9102)");
        exec("DELETE FROM bulkhead_workload WHERE name IN ('" + WEB + "', '" + HEAVY + "')");
        exec("DROP TABLE IF EXISTS jdbc_lane_t");
        exec("DROP FUNCTION IF EXISTS jdbc_lane_costly(), jdbc_lane_caps(), jdbc_lane_held()");
        exec("DROP ROLE IF EXISTS " + ROLE);
    }

    @BeforeEach
    void resetFigures() throws SQLException {
        exec("SELECT bulkhead_stats_reset('" + WEB + "'), bulkhead_stats_reset('" + HEAVY + "')");
    }

    // ---- helpers -------------------------------------------------------

    static void exec(String sql) throws SQLException {
        try (Statement st = admin.createStatement()) {
            st.execute(sql);
        }
    }

    static String string(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            assertTrue(rs.next(), "no row: " + sql);
            return rs.getString(1);
        }
    }

    static long stat(String workload, String column) throws SQLException {
        return Long.parseLong(string(admin,
                "SELECT " + column + " FROM bulkhead_stats WHERE workload = '" + workload + "'"));
    }

    /** A connection of the role, with pgJDBC's options (URL parameters). */
    static Connection connect(String options) throws SQLException {
        return DriverManager.getConnection(URL.substring(0, URL.indexOf('?')) + "?user=" + ROLE + "&" + options);
    }

    /** One execution of the prepared statement SEEN. */
    static String seen(PreparedStatement ps, boolean costly) throws SQLException {
        ps.setBoolean(1, costly);
        try (ResultSet rs = ps.executeQuery()) {
            assertTrue(rs.next());
            return rs.getString(1);
        }
    }

    /** The permit the connection's session holds, and its settings, seen by a statement. */
    static String held(Connection c) throws SQLException {
        return string(c, "SELECT jdbc_lane_held() || ' | ' || jdbc_lane_caps()");
    }

    /**
     * The session's server-side prepared statements of text sql ('?' as
     * pgJDBC sends it, '$1'): how many, and how often their generic plan ran.
     */
    static String preparedOnServer(Connection c, String sql) throws SQLException {
        return string(c, "SELECT count(*) || ' prepared, generic plans ' || coalesce(sum(generic_plans), 0)"
                + " FROM pg_prepared_statements WHERE statement = '"
                + sql.replace("?", "$1").replace("'", "''") + "'");
    }

    /** Every lane's figures pair up, and running is the permits really held. */
    static void assertPaired() throws SQLException {
        assertEquals("", string(admin, "SELECT coalesce(string_agg(workload, ','), '') FROM bulkhead_stats s"
                + " WHERE workload IN ('" + WEB + "', '" + HEAVY + "')"
                + " AND (acquired + moved_in <> released + moved_out + running"
                + " OR running <> (SELECT count(*) FROM bulkhead_activity a"
                + " WHERE a.workload = s.workload AND a.state = 'running'))"),
                "lanes whose acquired + moved_in <> released + moved_out + running, or running <> permits held");
    }

    static void assertIdle() throws SQLException {
        assertEquals("0 0", string(admin, "SELECT sum(running) || ' ' || sum(queued) FROM bulkhead_stats"
                + " WHERE workload IN ('" + WEB + "', '" + HEAVY + "')"), "running, queued");
        assertPaired();
    }

    // ---- the tests ------------------------------------------------------

    /**
     * A server-side prepared statement (named, after prepareThreshold) with
     * custom plans: the cheap execution stays in web, the costly one moves
     * the transaction's permit to heavy, and runs with heavy's caps; the
     * permit stays there for the rest of the transaction.
     */
    @Test
    void costlyPreparedStatementMovesToHeavyWithItsCaps() throws Exception {
        try (Connection c = connect("prepareThreshold=1");
             PreparedStatement ps = c.prepareStatement(SEEN)) {
            for (int i = 0; i < 3; i++) {
                assertEquals("lane_web/auto | " + SESSION_CAPS + " | 0", seen(ps, false), "autocommit, cheap");
                assertEquals("lane_heavy/auto | " + HEAVY_CAPS + " | 1", seen(ps, true), "autocommit, costly");
            }
            assertEquals("1 prepared, generic plans 0", preparedOnServer(c, SEEN),
                    "a named statement on the server, run with custom plans");
            c.setAutoCommit(false);
            assertEquals("lane_web/auto | " + SESSION_CAPS + " | 0", seen(ps, false));
            assertEquals("lane_heavy/auto from lane_web | " + HEAVY_CAPS + " | 1", seen(ps, true),
                    "the costly execution moves the permit");
            assertEquals("lane_heavy/auto from lane_web | " + HEAVY_CAPS + " | 0", seen(ps, false),
                    "the permit stays in heavy for the transaction");
            c.commit();
            assertEquals("lane_web/auto | " + SESSION_CAPS + " | 0", seen(ps, false), "the next transaction");
            c.commit();
        }
        assertIdle();
        assertEquals(1, stat(WEB, "moved_out"));
        assertEquals(1, stat(HEAVY, "moved_in"));
        assertEquals(3, stat(HEAVY, "acquired"));
    }

    /**
     * With plan_cache_mode = force_generic_plan the server runs the
     * statement's cached generic plan, whose cost is the costly branch's:
     * even the execution that a custom plan would make cheap goes to heavy.
     */
    @Test
    void genericPlanIsMatchedByItsCost() throws Exception {
        try (Connection c = connect("prepareThreshold=1&options=-c%20plan_cache_mode%3Dforce_generic_plan");
             PreparedStatement ps = c.prepareStatement(SEEN)) {
            for (int i = 0; i < 4; i++) {
                assertEquals("lane_heavy/auto | " + HEAVY_CAPS + " | 0", seen(ps, false), "execution " + i);
            }
            assertEquals("1 prepared, generic plans 4", preparedOnServer(c, SEEN));
        }
        assertIdle();
        assertEquals(4, stat(HEAVY, "acquired"));
        assertEquals(1, stat(WEB, "acquired"), "the look at pg_prepared_statements");
    }

    /** A cheap prepared statement stays in web, uncapped, however often it runs. */
    @Test
    void cheapPreparedStatementStaysInWeb() throws Exception {
        String cheap = "SELECT jdbc_lane_held() || ' | ' || jdbc_lane_caps() || ' | ' || ?::int";
        try (Connection c = connect("prepareThreshold=1");
             PreparedStatement ps = c.prepareStatement(cheap)) {
            for (int i = 0; i < 10; i++) {
                ps.setInt(1, i);
                try (ResultSet rs = ps.executeQuery()) {
                    assertTrue(rs.next());
                    assertEquals("lane_web/auto | " + SESSION_CAPS + " | " + i, rs.getString(1), "execution " + i);
                }
            }
            assertEquals(10, stat(WEB, "acquired"));
            assertEquals(0, stat(HEAVY, "acquired"));
            assertEquals("1 prepared, generic plans 5", preparedOnServer(c, cheap),
                    "a named statement, whose generic plan ran from the 6th execution");
        }
        assertIdle();
    }

    /**
     * plan_cache_mode = auto: at the 6th execution the server plans the
     * generic plan once to learn its cost, finds it costlier than the custom
     * plans, and runs a custom plan (generic_plans stays 0).  The lane is
     * chosen by the plan that runs: every execution here is cheap, in web.
     * (Fails with bulkhead 1.3 as of this writing: the generic plan, planned
     * at Bind through the planner hook only to be costed, is matched and
     * sends the 6th execution to heavy.)
     */
    @Test
    void genericPlanCostedButNotRunChoosesNoLane() throws Exception {
        StringBuilder lanes = new StringBuilder();
        try (Connection c = connect("prepareThreshold=1");
             PreparedStatement ps = c.prepareStatement(SEEN)) {
            for (int i = 1; i <= 8; i++) {
                String s = seen(ps, false);
                lanes.append(i == 1 ? "" : ",").append(s.substring(0, s.indexOf('/')));
                assertTrue(s.endsWith(" | 0"), s);
            }
            assertEquals(8, stat(WEB, "acquired") + stat(HEAVY, "acquired"));
            assertEquals("1 prepared, generic plans 0", preparedOnServer(c, SEEN),
                    "the generic plan never ran");
        }
        assertEquals("lane_web,lane_web,lane_web,lane_web,lane_web,lane_web,lane_web,lane_web",
                lanes.toString(), "the lane of each execution");
        assertIdle();
    }

    /**
     * autosave=always: a costly statement that fails is rolled back to its
     * savepoint by the driver; the transaction goes on holding heavy's permit,
     * with heavy's caps, and the session's values are back after it.  Also
     * when the failing statement is the one that took the permit.
     */
    @Test
    void autosaveAlwaysFailingStatementKeepsPermitAndCaps() throws Exception {
        try (Connection c = connect("prepareThreshold=1&autosave=always");
             PreparedStatement ps = c.prepareStatement(SEEN);
             PreparedStatement fails = c.prepareStatement("SELECT 1 / (jdbc_lane_costly() - ?)")) {
            fails.setInt(1, 1);
            c.setAutoCommit(false);
            assertEquals("lane_web/auto | " + SESSION_CAPS + " | 0", seen(ps, false));
            assertEquals("lane_heavy/auto from lane_web | " + HEAVY_CAPS + " | 1", seen(ps, true));
            SQLException e = assertThrows(SQLException.class, fails::executeQuery);
            assertEquals("22012", e.getSQLState(), e.toString());
            assertEquals("lane_heavy/auto from lane_web | " + HEAVY_CAPS, held(c), "after the failure");
            c.commit();
            assertEquals("lane_web/auto | " + SESSION_CAPS, held(c), "the next transaction");
            c.commit();

            // the failing costly statement takes the transaction's permit
            e = assertThrows(SQLException.class, fails::executeQuery);
            assertEquals("22012", e.getSQLState(), e.toString());
            assertEquals("lane_heavy/auto | " + HEAVY_CAPS, held(c), "the permit it took stays");
            c.rollback();
            assertEquals("lane_web/auto | " + SESSION_CAPS, held(c));
            c.commit();
        }
        assertIdle();
    }

    /**
     * autosave=always: a move that fails (heavy's one permit held, its wait
     * times out: 53B02) leaves the transaction with no permit; the driver
     * rolls back to the savepoint and the next statement takes web's again.
     */
    @Test
    void autosaveAlwaysFailedMove() throws Exception {
        try (Connection holder = DriverManager.getConnection(URL);
             Connection c = connect("prepareThreshold=1&autosave=always");
             PreparedStatement ps = c.prepareStatement(SEEN)) {
            string(holder, "SELECT bulkhead_acquire('" + HEAVY + "')::text");
            c.setAutoCommit(false);
            assertEquals("lane_web/auto | " + SESSION_CAPS + " | 0", seen(ps, false));
            SQLException e = assertThrows(SQLException.class, () -> seen(ps, true));
            assertEquals("53B02", e.getSQLState(), e.toString());
            assertEquals(1, stat(HEAVY, "timed_out"));
            assertEquals("lane_web/auto | " + SESSION_CAPS + " | 0", seen(ps, false),
                    "the transaction goes on, in web again");
            c.commit();
            string(holder, "SELECT bulkhead_release('" + HEAVY + "')::text");
        }
        assertIdle();
        assertEquals(2, stat(WEB, "acquired"));
        assertEquals(1, stat(WEB, "moved_out"));
        assertEquals(0, stat(HEAVY, "moved_in"));
    }

    /**
     * autosave=conservative: a server-side prepared costly statement whose
     * cached plan no longer fits (the table's column changed type) fails at
     * Bind, is rolled back to its savepoint and run again by the driver: it
     * runs once, in heavy, capped.
     */
    @Test
    void autosaveConservativeReplansInHeavy() throws Exception {
        String sql = "SELECT *, jdbc_lane_held() || ' | ' || jdbc_lane_caps() FROM jdbc_lane_t"
                + " WHERE jdbc_lane_costly() = ?";
        try (Connection c = connect("prepareThreshold=1&autosave=conservative");
             PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setInt(1, 1);
            c.setAutoCommit(false);
            for (int i = 0; i < 2; i++) {
                try (ResultSet rs = ps.executeQuery()) {
                    assertTrue(rs.next());
                    assertEquals("lane_heavy/auto | " + HEAVY_CAPS, rs.getString(2));
                }
            }
            c.commit();
            exec("ALTER TABLE jdbc_lane_t ALTER COLUMN x TYPE bigint");
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next());
                assertEquals(1L, rs.getLong(1));
                assertEquals("lane_heavy/auto | " + HEAVY_CAPS, rs.getString(2), "run again, in heavy");
            }
            assertEquals("lane_heavy/auto | " + HEAVY_CAPS, held(c));
            c.commit();
            assertEquals("lane_web/auto | " + SESSION_CAPS, held(c));
            c.commit();
        } finally {
            exec("ALTER TABLE jdbc_lane_t ALTER COLUMN x TYPE int");
        }
        assertIdle();
        assertEquals(2, stat(HEAVY, "acquired"));
        assertEquals(0, stat(HEAVY, "cancelled") + stat(HEAVY, "timed_out"));
    }
}
