/*-------------------------------------------------------------------------
 *
 * waitlog.c
 *	  The wait log (1.4): LOG lines for long waits and for rejections, in
 *	  a stable key=value form, rate-limited server-wide.
 *
 * The lines.  Each is one LOG message that starts with "bulkhead:
 * event=NAME", goes on with key=value fields (a value with anything but
 * letters, digits and ._-:+ quoted in double quotes, with \" and \\ inside)
 * and ends with "statement: TEXT" when the statement is known, as
 * log_min_duration_statement's "duration: ... statement: ..." does:
 *
 *   bulkhead: event=wait workload=reports outcome=granted wait_ms=1234.567 queryid=0 statement: SELECT ...
 *   bulkhead: event=rejected workload=reports sqlstate=53B01 queryid=0 statement: ...
 *   bulkhead: event=timed_out workload=reports sqlstate=53B02 wait_ms=0.000 queryid=0 statement: ...
 *   bulkhead: event=memory_wait workload=reports outcome=shrunk wait_ms=5000.123 queryid=0 statement: ...
 *   bulkhead: event=suppressed lines=120 seconds=1.0 log_max_rate=10
 *
 * A wait (outcome granted, timed_out, cancelled or deadlock) is logged
 * when it lasted bulkhead.log_min_wait or more; a 53B01 or 53B02 raised
 * when bulkhead.log_rejections is on, once (a timed-out wait logged as a
 * wait is not logged again).  A try_ function's false is no error and is
 * not logged as one.  The statement is debug_query_string (the client's
 * query string); in an abort callback, where PostgreSQL has cleared it
 * already, pg_stat_activity's text of the backend's query.  The message
 * hides the STATEMENT and CONTEXT lines PostgreSQL would add, so that
 * every line has the same shape; the SQLSTATE is the message's own (%e in
 * log_line_prefix): 53B01, 53B02 or 40P01, else 00000.
 *
 * The rate limit.  At most bulkhead.log_max_rate lines a second are
 * written, server-wide, with bursts of as many: a token bucket in shared
 * memory (its full time, moved by compare-and-swap: no lock), which every
 * backend asks before it writes a line.  A line refused is counted; the
 * background worker writes how many were, at most once a second, as the
 * line event=suppressed.
 *
 * Owns BulkheadWaitLog (waitlog.h) and the settings bulkhead.log_min_wait,
 * bulkhead.log_rejections and bulkhead.log_max_rate.  Called by permit.c
 * and local.c (through outcome.h), worker.c (the suppressed lines),
 * bulkhead.c (init), grants.c or memory.c (memory waits); calls shmem.c.
 *
 *-------------------------------------------------------------------------
 */
#include "record/waitlog.h"
#include "shmem/shmem.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

/*---- GUC variables ----*/
int			bulkhead_log_min_wait = -1;
bool		bulkhead_log_rejections = false;
int			bulkhead_log_max_rate = 10;

#define ERRCODE_BULKHEAD_FULL		MAKE_SQLSTATE('5','3','B','0','1')
#define ERRCODE_BULKHEAD_TIMEOUT	MAKE_SQLSTATE('5','3','B','0','2')

/* The suppressed lines are reported at most this often (the worker) */
#define SUPPRESSED_REPORT_MS	1000

typedef struct BulkheadWaitLog
{
	pg_atomic_uint64 tat;		/* the bucket is full again at this time */
	pg_atomic_uint64 suppressed;	/* lines refused, not reported yet */
} BulkheadWaitLog;

static BulkheadWaitLog *waitlog = NULL;

/* The worker's last report of suppressed lines */
static TimestampTz last_report = 0;

/*---- Settings and shared memory ----*/

void
bulkhead_waitlog_init(void)
{
	DefineCustomIntVariable("bulkhead.log_min_wait",
							"Logs each wait for a permit or a memory grant that lasts at least this long.",
							"-1 turns the wait log off; 0 logs every wait.",
							&bulkhead_log_min_wait,
							-1, -1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("bulkhead.log_rejections",
							 "Logs each caller rejected with 53B01 (full) or 53B02 (timed out).",
							 NULL,
							 &bulkhead_log_rejections,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("bulkhead.log_max_rate",
							"Most lines the wait log writes per second, server-wide.",
							"Lines beyond it are counted, and the count is logged once a second.",
							&bulkhead_log_max_rate,
							10, 1, 1000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

void
bulkhead_waitlog_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(BulkheadWaitLog)));
}

void
bulkhead_waitlog_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	waitlog = ShmemInitStruct("bulkhead wait log", sizeof(BulkheadWaitLog), &found);
	if (!found)
	{
		pg_atomic_init_u64(&waitlog->tat, 0);
		pg_atomic_init_u64(&waitlog->suppressed, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*---- The rate limit ----*/

/*
 * May a line be written now?  Each line moves the bucket's full time one
 * line's share of a second forward (from now, if it was in the past); a
 * line that would move it more than a second ahead of now is refused, and
 * counted.  Lock-free; never throws.
 */
static bool
take_token(void)
{
	int64		cost = USECS_PER_SEC / Max(bulkhead_log_max_rate, 1);
	int64		burst = cost * Max(bulkhead_log_max_rate, 1);
	int64		now = (int64) GetCurrentTimestamp();
	uint64		tat = pg_atomic_read_u64(&waitlog->tat);

	for (;;)
	{
		int64		full_at = Max((int64) tat, now) + cost;

		if (full_at - now > burst)
		{
			pg_atomic_fetch_add_u64(&waitlog->suppressed, 1);
			return false;
		}
		if (pg_atomic_compare_exchange_u64(&waitlog->tat, &tat, (uint64) full_at))
			return true;
	}
}

/*---- The lines ----*/

/* key=value, the value quoted when it holds anything but [A-Za-z0-9._:+-] */
static void
append_field(StringInfo buf, const char *key, const char *value)
{
	const char *p;
	bool		plain = value[0] != '\0';

	for (p = value; *p && plain; p++)
		plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || strchr("._:+-", *p) != NULL;
	appendStringInfo(buf, " %s=", key);
	if (plain)
	{
		appendStringInfoString(buf, value);
		return;
	}
	appendStringInfoChar(buf, '"');
	for (p = value; *p; p++)
	{
		if (*p == '"' || *p == '\\')
			appendStringInfoChar(buf, '\\');
		if (*p == '\n')
			appendStringInfoString(buf, "\\n");
		else
			appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '"');
}

/* The client's statement, or NULL when it is not known */
static const char *
statement_text(void)
{
	if (debug_query_string != NULL)
		return debug_query_string;
	/* an abort callback: PostgreSQL cleared it; pg_stat_activity's text */
	if (MyBEEntry != NULL && MyBEEntry->st_activity_raw != NULL &&
		MyBEEntry->st_activity_raw[0] != '\0')
		return pgstat_clip_activity(MyBEEntry->st_activity_raw);
	return NULL;
}

/*
 * Write one line: event, workload, then outcome and sqlstate if given,
 * wait_ms if wait_us >= 0, the queryid and the statement.  sqlerrcode is
 * the message's SQLSTATE.  Asks the rate limit first.
 */
static void
write_line(const char *event, const char *workload, const char *outcome,
		   int sqlerrcode, int64 wait_us)
{
	StringInfoData buf;
	const char *statement;

	if (!take_token())
		return;
	initStringInfo(&buf);
	appendStringInfo(&buf, "event=%s", event);
	append_field(&buf, "workload", workload);
	if (outcome != NULL)
		appendStringInfo(&buf, " outcome=%s", outcome);
	if (sqlerrcode != ERRCODE_SUCCESSFUL_COMPLETION)
		appendStringInfo(&buf, " sqlstate=%s", unpack_sql_state(sqlerrcode));
	if (wait_us >= 0)
		appendStringInfo(&buf, " wait_ms=%.3f", (double) wait_us / 1000.0);
	appendStringInfo(&buf, " queryid=%lld", (long long) pgstat_get_my_query_id());
	statement = statement_text();
	if (statement != NULL)
		appendStringInfo(&buf, " statement: %s", statement);
	ereport(LOG,
			(errcode(sqlerrcode),
			 errmsg("bulkhead: %s", buf.data),
			 errhidestmt(true),
			 errhidecontext(true)));
	pfree(buf.data);
}

static bool
wait_logged(int64 wait_us)
{
	return bulkhead_log_min_wait >= 0 &&
		wait_us >= (int64) bulkhead_log_min_wait * 1000;
}

void
bulkhead_waitlog_permit(const char *workload, BulkheadWaitOutcome outcome,
						int64 wait_us, bool raised)
{
	static const char *const names[] = {"granted", "timed_out", "cancelled", "deadlock"};
	int			codes[] = {ERRCODE_SUCCESSFUL_COMPLETION, ERRCODE_BULKHEAD_TIMEOUT,
	ERRCODE_SUCCESSFUL_COMPLETION, ERRCODE_T_R_DEADLOCK_DETECTED};

	if (waitlog == NULL)
		return;
	wait_us = Max(wait_us, 0);
	if (wait_logged(wait_us))
		write_line("wait", workload, names[outcome], codes[outcome], wait_us);
	else if (outcome == BULKHEAD_WAIT_TIMED_OUT && raised && bulkhead_log_rejections)
		write_line("timed_out", workload, NULL, ERRCODE_BULKHEAD_TIMEOUT, wait_us);
}

void
bulkhead_waitlog_rejected(const char *workload, bool full)
{
	if (waitlog == NULL || !bulkhead_log_rejections)
		return;
	if (full)
		write_line("rejected", workload, NULL, ERRCODE_BULKHEAD_FULL, -1);
	else
		write_line("timed_out", workload, NULL, ERRCODE_BULKHEAD_TIMEOUT, 0);
}

/* The name of workload slotno ("" for -1), whose permit the caller holds or awaits */
static void
slot_name(int slotno, char *name)
{
	name[0] = '\0';
	if (slotno >= 0 && bulkhead_shared != NULL && slotno < bulkhead_shared->nslots)
	{
		/* an entry of the caller's is linked there: the name stays meanwhile */
		BulkheadSlot *slot = &bulkhead_shared->slots[slotno];

		bulkhead_slot_lock(slot, LW_SHARED);
		strlcpy(name, slot->name, NAMEDATALEN);
		LWLockRelease(slot->lock);
	}
}

void
bulkhead_waitlog_memory(int slotno, int64 wait_us, bool shrunk)
{
	char		name[NAMEDATALEN];

	if (waitlog == NULL || !wait_logged(Max(wait_us, 0)))
		return;
	slot_name(slotno, name);
	write_line("memory_wait", name, shrunk ? "shrunk" : "granted",
			   ERRCODE_SUCCESSFUL_COMPLETION, Max(wait_us, 0));
}

void
bulkhead_waitlog_boost(int slotno, bool memory, bool borrowed, int64 wait_us)
{
	char		name[NAMEDATALEN];

	if (waitlog == NULL || bulkhead_log_min_wait < 0)
		return;
	slot_name(slotno, name);
	write_line(memory ? "memory_boost" : "boost", name,
			   borrowed ? "borrowed" : "ahead",
			   ERRCODE_SUCCESSFUL_COMPLETION, Max(wait_us, 0));
}

void
bulkhead_waitlog_tick(TimestampTz now)
{
	uint64		n;

	if (waitlog == NULL)
		return;
	if (last_report == 0)
	{
		/* the worker's start: lines suppressed from now on are reported */
		last_report = now;
		return;
	}
	if (!TimestampDifferenceExceeds(last_report, now, SUPPRESSED_REPORT_MS))
		return;
	n = pg_atomic_exchange_u64(&waitlog->suppressed, 0);
	if (n > 0)
		ereport(LOG,
				(errmsg("bulkhead: event=suppressed lines=%llu seconds=%.1f log_max_rate=%d",
						(unsigned long long) n,
						(double) (now - last_report) / USECS_PER_SEC,
						bulkhead_log_max_rate)));
	last_report = now;
}
