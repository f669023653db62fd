/*
 * Bulkhead.java: run a unit of work in one transaction, admitted by the
 * bulkhead extension (bulkhead_acquire_xact).  One file, no dependency but
 * JDBC: copy it into your application (and change the package).
 *
 *   String name = Bulkhead.inTransaction(dataSource, "reports",
 *           Duration.ofMillis(200), conn -> {
 *       try (PreparedStatement ps = conn.prepareStatement("SELECT ...")) {
 *           ...
 *       }
 *   });
 *
 * With a key (a tenant: the workload serves its keys in turn, the least
 * served first), the same with the key before the work:
 *
 *   Bulkhead.inTransaction(dataSource, "reports", Duration.ofMillis(200),
 *           tenantId, conn -> ...);
 *
 * - The permit is transaction-scoped: PostgreSQL returns it at COMMIT or
 *   ROLLBACK, so nothing here ever releases it by hand, and it is safe
 *   behind a transaction-pooling proxy (PgBouncer pool_mode = transaction).
 * - Any failure (of the acquire, of the work, of the commit) rolls back.
 * - A key (null or "": none) is passed to bulkhead_acquire_xact(workload,
 *   timeout, key), which needs bulkhead 1.2; without a key the helper calls
 *   bulkhead_acquire_xact(workload[, timeout]) as it always did, which
 *   every version has.
 * - SQLSTATE 53B01 (admission full) -> Bulkhead.FullException,
 *   53B02 (waited too long)         -> Bulkhead.TimedOutException;
 *   both are Bulkhead.RejectedException, an SQLTransientException.  The
 *   work did not run.  With a key, 53B01 may also be the key's own limit
 *   (max_queued_per_key): the message says which.  Every other exception,
 *   the work's own included, is passed on unchanged (a guard firing inside
 *   the work is PostgreSQL's 57014, query_canceled).
 * - The workload's guards (statement_timeout, lock_timeout, idle_timeout)
 *   apply from the statement after the acquire, which is why the acquire
 *   is a statement of its own.
 */
package bulkhead;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.SQLTransientException;
import java.time.Duration;
import java.util.Objects;
import javax.sql.DataSource;

public final class Bulkhead {

    public static final String SQLSTATE_FULL = "53B01";
    public static final String SQLSTATE_TIMED_OUT = "53B02";

    /** The unit of work: runs inside the transaction that holds the permit. */
    @FunctionalInterface
    public interface Work<T> {
        T run(Connection conn) throws SQLException;
    }

    /** The unit of work was not admitted; it did not run. */
    public abstract static class RejectedException extends SQLTransientException {
        private static final long serialVersionUID = 1L;
        private final String workload;
        private final String key;

        RejectedException(String workload, String key, SQLException cause) {
            super(cause.getMessage(), cause.getSQLState(), cause.getErrorCode(), cause);
            this.workload = workload;
            this.key = key;
        }

        public String getWorkload() {
            return workload;
        }

        /** The key the caller named, or null if it named none. */
        public String getKey() {
            return key;
        }
    }

    /**
     * 53B01: every permit and queue slot of the workload is taken, or the
     * caller's key has max_queued_per_key callers waiting already.  Rejected
     * at once, whatever the wait.  Back off and retry later, or shed the work.
     */
    public static final class FullException extends RejectedException {
        private static final long serialVersionUID = 1L;

        FullException(String workload, String key, SQLException cause) {
            super(workload, key, cause);
        }
    }

    /**
     * 53B02: queued for the whole wait without getting a permit: the work
     * holding the permits is too slow.  Do not retry at once.
     */
    public static final class TimedOutException extends RejectedException {
        private static final long serialVersionUID = 1L;

        TimedOutException(String workload, String key, SQLException cause) {
            super(workload, key, cause);
        }
    }

    private Bulkhead() {
    }

    /**
     * Take a connection from dataSource, begin a transaction, take a permit
     * of workload (waiting up to wait; null = the workload's queue_timeout),
     * run work, commit, and return its result.  On any failure, roll back
     * (which returns the permit) and throw.
     */
    public static <T> T inTransaction(DataSource dataSource, String workload, Duration wait,
                                      Work<T> work) throws SQLException {
        return inTransaction(dataSource, workload, wait, null, work);
    }

    /**
     * The same as the caller of key (a tenant; null or "": no key): the
     * workload serves its keys in turn, the least served first, and its
     * max_running_per_key and max_queued_per_key apply to each key.
     */
    public static <T> T inTransaction(DataSource dataSource, String workload, Duration wait,
                                      String key, Work<T> work) throws SQLException {
        Objects.requireNonNull(dataSource, "dataSource");
        try (Connection conn = dataSource.getConnection()) {
            return inTransaction(conn, workload, wait, key, work);
        }
    }

    /**
     * The same on a connection the caller owns, which must not be in a
     * transaction already.  Its auto-commit setting is restored afterwards.
     */
    public static <T> T inTransaction(Connection conn, String workload, Duration wait,
                                      Work<T> work) throws SQLException {
        return inTransaction(conn, workload, wait, null, work);
    }

    /** The same on a connection the caller owns, as the caller of key. */
    public static <T> T inTransaction(Connection conn, String workload, Duration wait,
                                      String key, Work<T> work) throws SQLException {
        Objects.requireNonNull(conn, "conn");
        Objects.requireNonNull(workload, "workload");
        Objects.requireNonNull(work, "work");
        if (wait != null && wait.isNegative()) {
            throw new IllegalArgumentException("wait must not be negative");
        }
        boolean autoCommit = conn.getAutoCommit();
        if (autoCommit) {
            conn.setAutoCommit(false);
        }
        try {
            acquire(conn, workload, wait, key);
            T result = work.run(conn);
            conn.commit();
            return result;
        } catch (Throwable failure) {
            try {
                conn.rollback();
            } catch (SQLException rollbackFailure) {
                failure.addSuppressed(rollbackFailure);
            }
            throw failure;
        } finally {
            if (autoCommit) {
                try {
                    conn.setAutoCommit(true);
                } catch (SQLException ignored) {
                    // a broken connection: the pool discards it
                }
            }
        }
    }

    private static void acquire(Connection conn, String workload, Duration wait, String key)
            throws SQLException {
        // Only a key passes the key argument (bulkhead 1.2): without one,
        // the call is the one every version of the extension has.
        boolean keyed = key != null && !key.isEmpty();
        StringBuilder sql = new StringBuilder("SELECT bulkhead_acquire_xact(?");
        if (wait != null) {
            sql.append(", make_interval(secs => ?)");
        } else if (keyed) {
            sql.append(", NULL");    // the workload's queue_timeout
        }
        sql.append(keyed ? ", ?)" : ")");
        try (PreparedStatement ps = conn.prepareStatement(sql.toString())) {
            int param = 1;
            ps.setString(param++, workload);
            if (wait != null) {
                ps.setDouble(param++, wait.getSeconds() + wait.getNano() / 1e9);
            }
            if (keyed) {
                ps.setString(param, key);
            }
            ps.execute();
        } catch (SQLException e) {
            String named = keyed ? key : null;
            if (SQLSTATE_FULL.equals(e.getSQLState())) {
                throw new FullException(workload, named, e);
            }
            if (SQLSTATE_TIMED_OUT.equals(e.getSQLState())) {
                throw new TimedOutException(workload, named, e);
            }
            throw e;
        }
    }
}
