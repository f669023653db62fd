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
 * - The permit is transaction-scoped: PostgreSQL returns it at COMMIT or
 *   ROLLBACK, so nothing here ever releases it by hand, and it is safe
 *   behind a transaction-pooling proxy (PgBouncer pool_mode = transaction).
 * - Any failure (of the acquire, of the work, of the commit) rolls back.
 * - SQLSTATE 53B01 (admission full) -> Bulkhead.FullException,
 *   53B02 (waited too long)         -> Bulkhead.TimedOutException;
 *   both are Bulkhead.RejectedException, an SQLTransientException.  The
 *   work did not run.  Every other exception, the work's own included,
 *   is passed on unchanged (a guard firing inside the work is PostgreSQL's
 *   57014, query_canceled).
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

        RejectedException(String workload, SQLException cause) {
            super(cause.getMessage(), cause.getSQLState(), cause.getErrorCode(), cause);
            this.workload = workload;
        }

        public String getWorkload() {
            return workload;
        }
    }

    /**
     * 53B01: every permit and queue slot of the workload is taken.  Rejected
     * at once, whatever the wait.  Back off and retry later, or shed the work.
     */
    public static final class FullException extends RejectedException {
        private static final long serialVersionUID = 1L;

        FullException(String workload, SQLException cause) {
            super(workload, cause);
        }
    }

    /**
     * 53B02: queued for the whole wait without getting a permit: the work
     * holding the permits is too slow.  Do not retry at once.
     */
    public static final class TimedOutException extends RejectedException {
        private static final long serialVersionUID = 1L;

        TimedOutException(String workload, SQLException cause) {
            super(workload, cause);
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
        Objects.requireNonNull(dataSource, "dataSource");
        try (Connection conn = dataSource.getConnection()) {
            return inTransaction(conn, workload, wait, work);
        }
    }

    /**
     * The same on a connection the caller owns, which must not be in a
     * transaction already.  Its auto-commit setting is restored afterwards.
     */
    public static <T> T inTransaction(Connection conn, String workload, Duration wait,
                                      Work<T> work) throws SQLException {
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
            acquire(conn, workload, wait);
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

    private static void acquire(Connection conn, String workload, Duration wait)
            throws SQLException {
        String sql = wait == null
                ? "SELECT bulkhead_acquire_xact(?)"
                : "SELECT bulkhead_acquire_xact(?, make_interval(secs => ?))";
        try (PreparedStatement ps = conn.prepareStatement(sql)) {
            ps.setString(1, workload);
            if (wait != null) {
                ps.setDouble(2, wait.getSeconds() + wait.getNano() / 1e9);
            }
            ps.execute();
        } catch (SQLException e) {
            if (SQLSTATE_FULL.equals(e.getSQLState())) {
                throw new FullException(workload, e);
            }
            if (SQLSTATE_TIMED_OUT.equals(e.getSQLState())) {
                throw new TimedOutException(workload, e);
            }
            throw e;
        }
    }
}
