/*-------------------------------------------------------------------------
 *
 * adaptive.c
 *	  The limit of an adaptive workload, set by the background worker.
 *
 * Every BULKHEAD_SAMPLE_MS the worker looks at what each holder of an
 * adaptive workload is doing (bulkhead_adaptive_sample), and every
 * BULKHEAD_DECIDE_MS it sets the workload's current_limit from what it saw
 * (bulkhead_adaptive_decide).  Nothing here runs in a backend: the fast
 * path of acquire and release neither measures nor records anything for
 * it, and reads only current_limit, where it read max_running before.
 *
 * Two control laws are built, chosen by bulkhead.adaptive_law;
 * test/bench/results.md compares them and says why "holders" is the
 * default.
 *
 * "holders": the limit follows the number of holders that do useful work.
 * From the wait event its PGPROC shows, a holder is:
 *
 * - on a CPU or ready for one: no wait event; or a holder granted less than
 *	 JUST_GRANTED_MS ago that still shows bulkhead's own queue event
 *	 (PG_WAIT_EXTENSION before 17, the custom "BulkheadQueue" event since)
 *	 because it has not run yet, and has no permit entry waiting;
 * - waiting outside the server's CPUs, its work going on elsewhere: for its
 *	 client, for I/O, for a timeout or another process (ClientRead,
 *	 DataFileRead, pg_sleep, SyncRep), and any other wait of class Extension:
 *	 postgres_fdw or dblink waiting for a remote server, or the queue of
 *	 another workload (the same event as ours, told apart by the backend's
 *	 entry that waits; its state is read without its slot's lock, a byte
 *	 read whole, for an estimate);
 * - blocked: waiting for an LWLock or a buffer pin, or for a heavyweight
 *	 lock that a holder of this workload holds in a conflicting mode (a hot
 *	 row, say): fewer holders would mean less of that;
 * - stuck: waiting for a heavyweight lock that no holder of this workload
 *	 holds in a conflicting mode, so its blocker is elsewhere (an operator's
 *	 ALTER TABLE, another workload, a session idle in transaction).
 *	 Admitting fewer cannot relieve that, and admitting more only queues
 *	 more on that lock, so a stuck holder neither lowers the limit nor
 *	 raises it (see holders_target).
 *
 * Telling blocked from stuck needs the lock's holders: when a sample finds
 * a holder waiting for a heavyweight lock (and only then), the worker takes
 * the lock manager's partition locks in shared mode, once for all such
 * holders of the workload, and looks through each awaited LOCK's PROCLOCKs
 * for one that a holder of the workload (or its lock group) holds in a
 * mode that conflicts with the awaited one, as GetBlockerStatusData
 * (pg_blocking_pids) does for one backend; a waiter whose awaited LOCK and
 * mode are those of the previous one reuses its answer.  Only the granted
 * modes are looked at, not the waiters queued ahead (a holder queued behind
 * another holder that waits is blocked by whatever that one waits for).
 * Holding the partition locks for a few microseconds a hundred times a
 * second, only while holders wait for heavyweight locks, costs less than
 * one pg_blocking_pids call per holder; and deciding per sample (rather
 * than once per decision) classifies the samples taken as a blocking ends
 * as well as those taken while it lasts.
 *
 * With n CPUs (the worker's own CPU affinity, which it shares with the
 * postmaster, lowered to a cgroup's CPU quota where one is set: see
 * cpu_count), a sample counts as useful min(n, holders on or ready for a
 * CPU) plus the holders waiting outside; the blocked ones queue for a lock
 * or a CPU, and a higher limit would only add to them.  The limit is
 * HOLDERS_MARGIN times an estimate of the useful count, rounded up, so it
 * settles where about one holder in ten waits for a lock or a CPU.  The
 * estimate falls with the average over about a second (HOLDERS_DECAY), but
 * rises at once to a decision window's average that is higher: a limit
 * whose holders are all useful grows by HOLDERS_MARGIN per decision (a
 * tenth per 200 ms, at least one permit), as README.md says and TAP test
 * 130 checks, where an average alone would drag the old, lower windows
 * along and grow at a fifth of that pace.  Stuck holders count as useful
 * for a lowering (so they do not lower the limit) and as not useful for a
 * raise (so they do not raise it either).  It is measured on the holders as
 * they are, so it works the same whether the limit is enforced or not,
 * which is what shadow mode needs.
 *
 * A holder that waits for its client counts as useful, which is right for
 * a client that works between its statements, but a client program slowed
 * by many connections of its own (pgbench at 128, say) keeps more holders
 * waiting for it the higher the limit: started high, the estimate would
 * stay high.  So a workload that becomes adaptive starts low, at 2 * n
 * (within its bounds), and climbs while its holders are useful.
 *
 * "climb": a hill climb on throughput (permits released per second).  It
 * measures a while at the limit, moves the limit, measures again, keeps
 * the direction while throughput grows by more than the noise (up) or
 * does not fall by more than it (down), and turns otherwise; steps double
 * while the direction holds.  It prefers the lower of two limits that
 * perform alike.  It learns only from its own moves, so in shadow mode,
 * where the limit changes nothing, it holds the limit.
 *
 * Both: a limit that no caller waited for during a decision's window (the
 * load is light, or gone) is left as it is, so that a light load is never
 * throttled and an idle workload keeps what it learnt; the limit stays within
 * [min_running, max_running]; a change follows the rules of a manual one
 * (raising serves the queue at once, lowering preempts no one); and a
 * change by more than a factor of two, or one that reaches min_running or
 * max_running, is logged with the figures that caused it.
 *
 * Locking: the worker is the only writer of current_limit and takes the
 * slot lock exclusively to change it; samples read the holders list (and
 * each holder's entry) under the slot lock in shared mode, and each
 * holder's wait_event_info without a lock (pg_stat_activity reads it so
 * too: a 4-byte value read whole).  The lock manager's partition locks are
 * taken after the slot lock is released, never with it; a holder's PGPROC
 * (waitLock, waitLockMode, lockGroupLeader) and the LOCK's PROCLOCKs are
 * read under all of them, as lock.c's GetBlockerStatusData does.  The laws'
 * state is the worker's own memory: a restarted worker starts measuring
 * afresh from the limit in force, which shared memory kept.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"
#include "entry_list.h"

#include <math.h>
#include <sched.h>

#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* Wait event classes (the top byte of wait_event_info) */
#define WAIT_CLASS(info)		((info) & 0xFF000000U)
#define CLASS_LWLOCK			0x01000000U
#define CLASS_LOCK				0x03000000U
#define CLASS_BUFFERPIN			0x04000000U
#define CLASS_EXTENSION			0x07000000U

/* The useful holders are multiplied by this before rounding up */
#define HOLDERS_MARGIN			1.1
/* Per decision, the old samples' weight (a time constant of about 1 s) */
#define HOLDERS_DECAY			0.8
/* A holder granted this recently may still show the queue's wait event */
#define JUST_GRANTED_MS			50
/* "climb": relative throughput change taken as noise, and its window */
#define CLIMB_NOISE				0.04
#define CLIMB_SETTLE_DECISIONS	1	/* skipped after a move */
#define CLIMB_MEASURE_DECISIONS 2
/* How often the CPU count is read again (a cgroup quota can change) */
#define CPU_COUNT_REFRESH_MS	10000

typedef enum AdaptiveLaw
{
	ADAPTIVE_LAW_HOLDERS,
	ADAPTIVE_LAW_CLIMB
} AdaptiveLaw;

static const struct config_enum_entry adaptive_law_options[] = {
	{"holders", ADAPTIVE_LAW_HOLDERS, false},
	{"climb", ADAPTIVE_LAW_CLIMB, false},
	{NULL, 0, false}
};

int			bulkhead_adaptive_law = ADAPTIVE_LAW_HOLDERS;

/* Developer setting: where /proc and the cgroup files are read (tests) */
static char *cgroup_root = NULL;

/* The worker's figures for one adaptive workload slot */
typedef struct AdaptiveState
{
	bool		active;			/* slot was adaptive at the last look */
	char		name[NAMEDATALEN];	/* whose figures these are */
	int			law;			/* the law they were gathered for */

	/* this decision window's samples */
	int			samples;		/* those taken while callers waited */
	int			on_cpu;			/* sum of min(ncpu, holders on or ready for a CPU) */
	int			off_cpu;		/* sum of holders waiting on the outside */
	int			blocked;		/* sum of holders blocked by the workload */
	int			stuck;			/* sum of holders blocked from elsewhere */
	bool		binding;		/* someone waited (or would have, in shadow) */

	/* "holders": decayed sums over past windows, stuck holders as useful */
	double		useful_acc;
	double		samples_acc;

	/* "climb" */
	TimestampTz window_start;
	uint64		released_at_start;
	int			decisions;		/* since the last move */
	int			prev_limit;		/* where the last window measured */
	double		prev_rate;		/* its throughput, 0 = none yet */
	int			direction;		/* +1 or -1 */
	int			step;
} AdaptiveState;

static AdaptiveState *states = NULL;

/*
 * Scratch space of a sample, allocated with states (before any lock is
 * taken): the PGPROC numbers of one slot's holders that wait for a
 * heavyweight lock, and a mark per PGPROC telling the slot's holders apart
 * (holder_mark[procno] == mark_stamp), so that no array needs clearing.
 */
static int *lock_waiters = NULL;
static uint32 *holder_mark = NULL;
static uint32 mark_stamp = 0;

/* The wait event of a backend queued by bulkhead (permit.c's) */
static uint32 queue_event = 0;

/* The CPU count in use, when it was read, and the one last logged */
static int	ncpu_cached = 0;
static TimestampTz ncpu_read_at = 0;
static int	ncpu_logged = 0;
static int	ncpu_affinity = 0;
static double ncpu_quota = 0;

/*
 * Register bulkhead.adaptive_law (from _PG_init).  It is a setting of the
 * worker, for comparing the laws; workloads choose adaptive or not.  And a
 * hidden developer setting for the tests of the cgroup reading.
 */
void
bulkhead_adaptive_init(void)
{
	DefineCustomEnumVariable("bulkhead.adaptive_law",
							 "Control law the worker uses for adaptive workloads.",
							 "\"holders\" sizes the limit from what the holders wait for; "
							 "\"climb\" climbs the throughput curve.",
							 &bulkhead_adaptive_law,
							 ADAPTIVE_LAW_HOLDERS,
							 adaptive_law_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("bulkhead.cgroup_root",
							   "Directory under which the worker reads the process's cgroup files (developer option).",
							   "For tests: /proc/self/cgroup, /proc/self/mountinfo and the cgroup file systems "
							   "are read under this directory.  Empty means the real root.",
							   &cgroup_root,
							   "",
							   PGC_POSTMASTER,
							   GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);
}

/*
 * The cgroup CPU quota
 * --------------------
 * A container's CPU limit is most often a cgroup quota, not an affinity
 * mask: with "cpu.max" = "150000 100000" (cgroup v2) or cpu.cfs_quota_us =
 * 150000 and cpu.cfs_period_us = 100000 (v1), the server's processes get
 * 1.5 CPUs' worth of time on every CPU of the machine.  The functions
 * below find the process's cgroup in each hierarchy that has the cpu
 * controller (/proc/self/cgroup), where that hierarchy is mounted
 * (/proc/self/mountinfo), and take the smallest quota of that cgroup and
 * its ancestors up to the mount's root (a quota on a parent limits its
 * children too).  They use plain stdio and fixed buffers: they run in the
 * worker, possibly under a slot lock (bulkhead_limit_at_load), and must not
 * throw; a file that cannot be read or parsed means no quota.
 */
#define CG_PATH_MAX		1024
#define CG_LINE_MAX		4096

/* The file at path under bulkhead.cgroup_root, into buf (false if too long) */
static bool
cg_path(char *buf, const char *path)
{
	int			n = snprintf(buf, CG_PATH_MAX, "%s%s",
							 cgroup_root ? cgroup_root : "", path);

	return n > 0 && n < CG_PATH_MAX;
}

/* The first line of file path (under the root), without its newline */
static bool
cg_read_line(const char *path, char *line, int size)
{
	char		full[CG_PATH_MAX];
	FILE	   *f;
	bool		ok;

	if (!cg_path(full, path) || (f = fopen(full, "r")) == NULL)
		return false;
	ok = fgets(line, size, f) != NULL;
	fclose(f);
	if (ok)
		line[strcspn(line, "\n")] = '\0';
	return ok;
}

/* Whether comma-separated list has item */
static bool
cg_list_has(const char *list, const char *item)
{
	size_t		len = strlen(item);

	while (*list)
	{
		size_t		n = strcspn(list, ",");

		if (n == len && strncmp(list, item, len) == 0)
			return true;
		list += n;
		if (*list == ',')
			list++;
	}
	return false;
}

/*
 * The CPUs a quota allows in directory dir (under the root): from cpu.max
 * (v2: "<quota> <period>" or "max <period>") or cpu.cfs_quota_us and
 * cpu.cfs_period_us (v1: quota -1 = none).  0 if none.
 */
static double
cg_dir_quota(const char *dir, bool v2)
{
	char		path[CG_PATH_MAX];
	char		line[128];
	long long	quota;
	long long	period;

	if (v2)
	{
		if (snprintf(path, sizeof(path), "%s/cpu.max", dir) >= (int) sizeof(path) ||
			!cg_read_line(path, line, sizeof(line)) ||
			sscanf(line, "%lld %lld", &quota, &period) != 2)
			return 0;			/* absent, "max ...", or unreadable */
	}
	else
	{
		if (snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir) >= (int) sizeof(path) ||
			!cg_read_line(path, line, sizeof(line)) ||
			sscanf(line, "%lld", &quota) != 1)
			return 0;
		if (snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir) >= (int) sizeof(path) ||
			!cg_read_line(path, line, sizeof(line)) ||
			sscanf(line, "%lld", &period) != 1)
			return 0;
	}
	if (quota <= 0 || period <= 0)
		return 0;
	return (double) quota / (double) period;
}

/*
 * The smallest quota on cgroup path cgroup (as /proc/self/cgroup shows it)
 * and its ancestors, in the hierarchy mounted at mount_point whose root is
 * mount_root (mountinfo's fourth field: not "/" when only a subtree is
 * mounted, as in a container without a cgroup namespace).  0 if none.
 */
static double
cg_hierarchy_quota(const char *cgroup, const char *mount_root,
				   const char *mount_point, bool v2)
{
	char		dir[CG_PATH_MAX];
	size_t		base;
	size_t		rootlen = strlen(mount_root);
	double		best = 0;

	/* the cgroup's path below the mount */
	if (strcmp(mount_root, "/") == 0)
		rootlen = 0;
	else if (strncmp(cgroup, mount_root, rootlen) != 0 ||
			 (cgroup[rootlen] != '\0' && cgroup[rootlen] != '/'))
		cgroup = mount_root;	/* not below it: take the mount's root */
	if (snprintf(dir, sizeof(dir), "%s%s", mount_point, cgroup + rootlen) >=
		(int) sizeof(dir))
		return 0;
	base = strlen(mount_point);
	while (strlen(dir) > 1 && dir[strlen(dir) - 1] == '/')
		dir[strlen(dir) - 1] = '\0';

	/* that cgroup, then each parent up to the mount point */
	for (;;)
	{
		double		q = cg_dir_quota(dir, v2);
		char	   *slash;

		if (q > 0 && (best == 0 || q < best))
			best = q;
		if (strlen(dir) <= base)
			break;
		slash = strrchr(dir, '/');
		if (slash == NULL || slash < dir + base)
			break;
		*slash = '\0';
	}
	return best;
}

/*
 * The server's CPU quota in CPUs (fractional), the smallest of the cgroup
 * v1 and v2 hierarchies that have the cpu controller; 0 when none is set.
 */
static double
cgroup_cpu_quota(void)
{
	char		path[CG_PATH_MAX];
	char		line[CG_LINE_MAX];
	char		v1_path[CG_PATH_MAX] = "";
	char		v2_path[CG_PATH_MAX] = "";
	bool		v1 = false;
	bool		v2 = false;
	FILE	   *f;
	double		best = 0;

	/* the process's cgroup in each hierarchy: "id:controllers:path" */
	if (!cg_path(path, "/proc/self/cgroup") || (f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *controllers = strchr(line, ':');
		char	   *cgpath;

		if (controllers == NULL)
			continue;
		*controllers++ = '\0';
		if ((cgpath = strchr(controllers, ':')) == NULL)
			continue;
		*cgpath++ = '\0';
		cgpath[strcspn(cgpath, "\n")] = '\0';
		if (strlen(cgpath) >= CG_PATH_MAX)
			continue;
		if (strcmp(line, "0") == 0 && *controllers == '\0')
		{
			strcpy(v2_path, cgpath);
			v2 = true;
		}
		else if (cg_list_has(controllers, "cpu"))
		{
			strcpy(v1_path, cgpath);
			v1 = true;
		}
	}
	fclose(f);
	if (!v1 && !v2)
		return 0;

	/*
	 * Where they are mounted: "id parent dev root mount_point options
	 * [optional fields] - fstype source super_options".  (Mount points with
	 * a space, escaped as \040, are not handled: they do not match.)
	 */
	if (!cg_path(path, "/proc/self/mountinfo") || (f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *field[6];
		char	   *sep;
		char	   *save = NULL;
		char	   *fstype;
		char	   *superopts;
		int			i;
		double		q = 0;

		sep = strstr(line, " - ");
		if (sep == NULL)
			continue;
		*sep = '\0';
		for (i = 0; i < 6; i++)
		{
			field[i] = strtok_r(i == 0 ? line : NULL, " ", &save);
			if (field[i] == NULL)
				break;
		}
		if (i < 6)
			continue;
		save = NULL;
		fstype = strtok_r(sep + 3, " \n", &save);
		(void) strtok_r(NULL, " \n", &save);	/* source */
		superopts = strtok_r(NULL, " \n", &save);
		if (fstype == NULL)
			continue;
		if (v2 && strcmp(fstype, "cgroup2") == 0)
		{
			q = cg_hierarchy_quota(v2_path, field[3], field[4], true);
			v2 = false;			/* the first mount will do */
		}
		else if (v1 && strcmp(fstype, "cgroup") == 0 && superopts != NULL &&
				 cg_list_has(superopts, "cpu"))
		{
			q = cg_hierarchy_quota(v1_path, field[3], field[4], false);
			v1 = false;
		}
		if (q > 0 && (best == 0 || q < best))
			best = q;
	}
	fclose(f);
	return best;
}

/*
 * The CPUs the server may use: those of this process's affinity mask (the
 * worker shares it with the postmaster), or fewer if a cgroup quota allows
 * less CPU time (rounded up: 1.5 CPUs count as 2).  Read again every
 * CPU_COUNT_REFRESH_MS, or only if never read when refresh is false (a
 * caller that holds a slot lock: this never throws, see above, but need not
 * read files under the lock).
 */
static int
cpu_count(bool refresh)
{
	TimestampTz now = GetCurrentTimestamp();
	cpu_set_t	set;
	int			n;

	if (ncpu_cached > 0 &&
		(!refresh ||
		 !TimestampDifferenceExceeds(ncpu_read_at, now, CPU_COUNT_REFRESH_MS)))
		return ncpu_cached;

	n = 1;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		n = CPU_COUNT(&set);
	ncpu_affinity = n;
	ncpu_quota = cgroup_cpu_quota();
	if (ncpu_quota > 0)
		n = Max(Min(n, (int) ceil(ncpu_quota - 1e-9)), 1);
	ncpu_cached = n;
	ncpu_read_at = now;
	return n;
}

/* Log the CPU count when it is first read and when it changes */
static void
log_cpu_count(void)
{
	char		quota[64];

	if (ncpu_cached == ncpu_logged)
		return;
	ncpu_logged = ncpu_cached;
	if (ncpu_quota > 0)
		snprintf(quota, sizeof(quota), "%.2f CPUs", ncpu_quota);
	else
		strlcpy(quota, "none", sizeof(quota));
	ereport(LOG,
			(errmsg("bulkhead: adaptive limits count %d CPUs", ncpu_cached),
			 errdetail("CPU affinity: %d CPUs; cgroup CPU quota: %s.",
					   ncpu_affinity, quota)));
}

/*
 * The limit to put in force when the worker loads config into slot (whose
 * lock the caller holds exclusively).  A workload that is not adaptive runs
 * at max_running; one that becomes adaptive (or comes out of a pause)
 * starts at twice the server's CPUs, within its bounds (see the header);
 * one that was adaptive already keeps its limit, moved into the new bounds.
 * After a worker restart the slot is still adaptive in shared memory, so
 * the limit is kept; after a server restart it starts afresh.
 */
int
bulkhead_limit_at_load(const BulkheadSlot *slot, const BulkheadConfig *config)
{
	bool		was_adaptive = slot->in_use && slot->defined &&
		slot->config.adaptive;
	int			limit = slot->current_limit;

	if (!config->adaptive || config->max_running == 0)
		return config->max_running;
	if (!was_adaptive || limit < 1)
		limit = 2 * cpu_count(false);
	return Max(config->min_running, Min(limit, config->max_running));
}

static void
reset_state(AdaptiveState *st, const char *name)
{
	memset(st, 0, sizeof(AdaptiveState));
	st->active = true;
	strlcpy(st->name, name, NAMEDATALEN);
	st->law = bulkhead_adaptive_law;
	st->direction = -1;
	st->step = 1;
}

/* This worker's state for slot i, reset when the slot changed hands */
static AdaptiveState *
state_of(int i, const BulkheadSlot *slot)
{
	AdaptiveState *st;

	st = &states[i];
	if (!st->active || st->law != bulkhead_adaptive_law ||
		strcmp(st->name, slot->name) != 0)
		reset_state(st, slot->name);
	return st;
}

/*
 * Of the nwaiters holders in lock_waiters, which all showed a heavyweight
 * lock wait, how many are stuck: wait for a lock that no holder of the
 * workload (the PGPROCs marked with mark_stamp, or their lock groups)
 * holds in a conflicting mode.  See the header.  Called with no lock held.
 */
static int
count_stuck(int nwaiters)
{
	LOCK	   *last_lock = NULL;
	LOCKMODE	last_mode = NoLock;
	PGPROC	   *last_leader = NULL;
	bool		last_stuck = false;
	int			stuck = 0;
	int			i;

	for (i = 0; i < NUM_LOCK_PARTITIONS; i++)
		LWLockAcquire(LockHashPartitionLockByIndex(i), LW_SHARED);

	for (i = 0; i < nwaiters; i++)
	{
		PGPROC	   *proc = GetPGProcByNumber(lock_waiters[i]);
		PGPROC	   *leader = proc->lockGroupLeader ? proc->lockGroupLeader : proc;
		LOCK	   *lock = proc->waitLock;
		LOCKMODE	mode = proc->waitLockMode;
		LOCKMASK	conflicts;
		bool		is_stuck = true;

		/* granted since the sample: it was blocked, by whom is unknown */
		if (lock == NULL)
			continue;
		if (lock == last_lock && mode == last_mode && leader == last_leader)
		{
			stuck += last_stuck ? 1 : 0;
			continue;
		}
		conflicts = GetLocksMethodTable(lock)->conflictTab[mode];
#if PG_VERSION_NUM >= 160000
		{
			dlist_iter	iter;

			dlist_foreach(iter, &lock->procLocks)
			{
				PROCLOCK   *pl = dlist_container(PROCLOCK, lockLink, iter.cur);
				int			procno = BULKHEAD_PROCNO(pl->groupLeader);

				if (pl->groupLeader != leader &&
					(pl->holdMask & conflicts) != 0 &&
					procno >= 0 && procno < bulkhead_shared->nbackends &&
					holder_mark[procno] == mark_stamp)
				{
					is_stuck = false;
					break;
				}
			}
		}
#else
		{
			PROCLOCK   *pl;

			pl = (PROCLOCK *) SHMQueueNext(&lock->procLocks, &lock->procLocks,
										   offsetof(PROCLOCK, lockLink));
			while (pl != NULL)
			{
				int			procno = BULKHEAD_PROCNO(pl->groupLeader);

				if (pl->groupLeader != leader &&
					(pl->holdMask & conflicts) != 0 &&
					procno >= 0 && procno < bulkhead_shared->nbackends &&
					holder_mark[procno] == mark_stamp)
				{
					is_stuck = false;
					break;
				}
				pl = (PROCLOCK *) SHMQueueNext(&lock->procLocks, &pl->lockLink,
											   offsetof(PROCLOCK, lockLink));
			}
		}
#endif
		last_lock = lock;
		last_mode = mode;
		last_leader = leader;
		last_stuck = is_stuck;
		stuck += is_stuck ? 1 : 0;
	}

	for (i = NUM_LOCK_PARTITIONS; --i >= 0;)
		LWLockRelease(LockHashPartitionLockByIndex(i));
	return stuck;
}

/*
 * Whether backend procno waits in a bulkhead queue (for some workload).
 * The entries' states are read without their slots' locks: a byte read
 * whole, for an estimate (see the header).
 */
static bool
queued_elsewhere(int procno)
{
	int			ppb = bulkhead_shared->permits_per_backend;
	int			j;

	for (j = procno * ppb; j < (procno + 1) * ppb; j++)
	{
		if (*((volatile uint8 *) &bulkhead_shared->entries[j].state) ==
			BULKHEAD_ENTRY_WAITING)
			return true;
	}
	return false;
}

/*
 * Take one sample of every adaptive workload's holders.  Returns whether
 * any workload is adaptive (the worker then keeps sampling).
 */
bool
bulkhead_adaptive_sample(void)
{
	int			ncpu = cpu_count(true);
	TimestampTz now = GetCurrentTimestamp();
	bool		any = false;
	int			i;

	log_cpu_count();

	/* allocated before any slot lock is taken: an allocation can throw */
	if (states == NULL)
	{
		/* states last: it says the other two are there */
		if (lock_waiters == NULL)
			lock_waiters = MemoryContextAlloc(TopMemoryContext,
											  sizeof(int) * bulkhead_shared->nbackends *
											  bulkhead_shared->permits_per_backend);
		if (holder_mark == NULL)
			holder_mark = MemoryContextAllocZero(TopMemoryContext,
												 sizeof(uint32) * bulkhead_shared->nbackends);
		states = MemoryContextAllocZero(TopMemoryContext,
										sizeof(AdaptiveState) * bulkhead_shared->nslots);
	}
	/* so is permit.c's queue event (looked up by name since PG 17) */
	if (queue_event == 0)
	{
#if PG_VERSION_NUM >= 170000
		queue_event = WaitEventExtensionNew("BulkheadQueue");
#else
		queue_event = PG_WAIT_EXTENSION;
#endif
	}

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		BulkheadEntry *entry;
		AdaptiveState *st;
		int			on_cpu = 0;
		int			off_cpu = 0;
		int			blocked = 0;
		int			nwaiters = 0;
		int			stuck = 0;
		bool		binding;

		/* unlocked peek: a slot that is not adaptive costs no lock */
		if (!slot->in_use || !slot->config.adaptive)
		{
			states[i].active = false;
			continue;
		}
		/* a new stamp marks this slot's holders (0 means none) */
		if (++mark_stamp == 0)
		{
			memset(holder_mark, 0, sizeof(uint32) * bulkhead_shared->nbackends);
			mark_stamp = 1;
		}
		LWLockAcquire(slot->lock, LW_SHARED);
		if (!slot->in_use || !slot->defined || !slot->config.adaptive)
		{
			LWLockRelease(slot->lock);
			continue;
		}
		any = true;
		st = state_of(i, slot);
		entry_list_foreach(entry, &slot->holders)
		{
			int			procno = entry_index(entry) /
				bulkhead_shared->permits_per_backend;
			PGPROC	   *proc = GetPGProcByNumber(procno);
			uint32		info = *((volatile uint32 *) &proc->wait_event_info);

			holder_mark[procno] = mark_stamp;
			if (info == 0)
				on_cpu++;
			else if (info == queue_event && !queued_elsewhere(procno) &&
					 !TimestampDifferenceExceeds(entry->since, now, JUST_GRANTED_MS))
				on_cpu++;		/* just granted: it has not run yet */
			else if (WAIT_CLASS(info) == CLASS_LOCK)
				lock_waiters[nwaiters++] = procno;
			else if (WAIT_CLASS(info) == CLASS_LWLOCK ||
					 WAIT_CLASS(info) == CLASS_BUFFERPIN)
				blocked++;
			else
				off_cpu++;		/* including Extension: another queue, a
								 * remote server */
		}
		binding = slot->queued > 0 ||
			(slot->config.shadow && slot->running > slot->current_limit);
		LWLockRelease(slot->lock);

		/*
		 * Only a sample taken while callers wait (or would, in shadow mode)
		 * says something about the limit: one taken at rest, or as a burst
		 * begins, would drag the estimate down.
		 */
		if (!binding)
			continue;
		if (nwaiters > 0 && st->law == ADAPTIVE_LAW_HOLDERS)
			stuck = count_stuck(nwaiters);
		st->binding = true;
		st->samples++;
		st->on_cpu += Min(on_cpu, ncpu);
		st->off_cpu += off_cpu;
		st->blocked += blocked + nwaiters - stuck;
		st->stuck += stuck;
	}
	return any;
}

/*
 * "holders": the limit from the useful holders, with margin (see the
 * header).  *useful is the estimate the decision used.
 */
static int
holders_target(AdaptiveState *st, int current, double *useful)
{
	double		window_free;	/* this window, stuck holders not useful */
	double		estimate;		/* decayed, stuck holders useful */
	double		raise;
	double		lower;

	window_free = (double) (st->on_cpu + st->off_cpu) / st->samples;
	st->useful_acc = st->useful_acc * HOLDERS_DECAY +
		st->on_cpu + st->off_cpu + st->stuck;
	st->samples_acc = st->samples_acc * HOLDERS_DECAY + st->samples;
	estimate = st->useful_acc / st->samples_acc;

	/* a window above the estimate is the estimate from now on */
	if (window_free > estimate)
	{
		estimate = window_free;
		st->useful_acc = estimate * st->samples_acc;
	}
	*useful = estimate;

	/*
	 * Raise on the holders useful without the stuck ones, lower on the
	 * estimate with them.  Hysteresis: a target close to the limit in force
	 * keeps it, so that an estimate near a whole number does not flip the
	 * limit at each decision.
	 */
	raise = window_free * HOLDERS_MARGIN;
	lower = estimate * HOLDERS_MARGIN;
	if (raise > current + 0.05)
		return (int) ceil(raise);
	if (lower <= current - 0.75)
		return Max((int) ceil(lower), 1);
	return current;
}

/* "climb": the next limit, once a window has measured the current one */
static int
climb_target(AdaptiveState *st, const BulkheadSlot *slot, int current,
			 TimestampTz now, double *rate_out)
{
	uint64		released = slot->stats.released;
	double		rate;
	int			next;

	*rate_out = 0;
	if (slot->config.shadow)
		return current;			/* the limit changes nothing to learn from */
	if (++st->decisions <= CLIMB_SETTLE_DECISIONS ||
		st->window_start == 0 || released < st->released_at_start)
	{
		/* let a move take effect, then start the window */
		st->window_start = now;
		st->released_at_start = released;
		st->binding = false;
		return current;
	}
	if (st->decisions < CLIMB_SETTLE_DECISIONS + CLIMB_MEASURE_DECISIONS + 1)
		return current;

	rate = (double) (released - st->released_at_start) * 1e6 /
		(double) Max(now - st->window_start, 1);
	*rate_out = rate;
	st->decisions = 0;
	if (!st->binding)
	{
		/* nobody waited: this window says nothing about a lower limit */
		st->prev_rate = 0;
		return current;
	}
	if (st->prev_rate > 0 && st->prev_limit != current)
	{
		bool		went_up = current > st->prev_limit;
		bool		keep = went_up ? rate > st->prev_rate * (1 + CLIMB_NOISE) :
			rate >= st->prev_rate * (1 - CLIMB_NOISE);

		if (keep)
			st->step *= 2;
		else
		{
			st->direction = went_up ? -1 : 1;
			st->step = 1;
		}
	}
	st->prev_rate = rate;
	st->prev_limit = current;
	next = current + st->direction * st->step;
	if (st->direction < 0 && st->step > current / 2)
		next = current - Max(current / 2, 1);	/* at most halve at once */
	return next;
}

/* What a decision saw, for the log */
typedef struct DecisionFigures
{
	double		useful;			/* "holders": useful holders, averaged */
	double		rate;			/* "climb": this window's throughput */
	double		prev_rate;		/* and the one before, at prev_limit */
	int			prev_limit;
	/* the slot at the change, copied under its lock */
	int			running;
	int			queued;
	int			min_running;
	int			max_running;
} DecisionFigures;

/*
 * Log a change by more than a factor of two, or one that reaches a bound
 * (after the slot lock is released).
 */
static void
log_change(const char *name, const AdaptiveState *st, int from, int to,
		   const DecisionFigures *fig)
{
	double		n = Max(st->samples, 1);

	if (!(to > 2 * from || 2 * to < from ||
		  to == fig->min_running || to == fig->max_running))
		return;
	if (st->law == ADAPTIVE_LAW_HOLDERS)
		ereport(LOG,
				(errmsg("bulkhead: workload \"%s\": adaptive limit changed from %d to %d",
						name, from, to),
				 errdetail("Holders per sample: %.1f on a CPU, %.1f waiting outside the server, %.1f blocked, %.1f waiting for a lock held outside the workload; %.2f useful (estimate); %d running, %d queued; bounds [%d, %d].",
						   st->on_cpu / n, st->off_cpu / n, st->blocked / n,
						   st->stuck / n,
						   fig->useful, fig->running, fig->queued,
						   fig->min_running, fig->max_running)));
	else
		ereport(LOG,
				(errmsg("bulkhead: workload \"%s\": adaptive limit changed from %d to %d",
						name, from, to),
				 errdetail("Throughput %.0f permits/s at limit %d, %.0f at limit %d before; %d running, %d queued; bounds [%d, %d].",
						   fig->rate, from, fig->prev_rate, fig->prev_limit,
						   fig->running, fig->queued,
						   fig->min_running, fig->max_running)));
}

/*
 * Set the limit of every adaptive workload from its samples since the last
 * decision.
 */
void
bulkhead_adaptive_decide(void)
{
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	if (states == NULL)
		return;
	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		AdaptiveState *st = &states[i];
		DecisionFigures fig = {0};
		int			current;
		int			target;

		if (!st->active)
			continue;
		LWLockAcquire(slot->lock, LW_EXCLUSIVE);
		if (!slot->in_use || !slot->defined || !slot->config.adaptive ||
			strcmp(slot->name, st->name) != 0)
		{
			LWLockRelease(slot->lock);
			st->active = false;
			continue;
		}
		current = slot->current_limit;
		if (slot->config.max_running == 0 || st->samples == 0)
			target = current;	/* paused, or nothing seen yet */
		else if (st->law == ADAPTIVE_LAW_HOLDERS && !st->binding)
		{
			/* a load that leaves the limit unused says nothing about it */
			st->useful_acc = 0;
			st->samples_acc = 0;
			target = current;
		}
		else if (st->law == ADAPTIVE_LAW_HOLDERS)
			target = holders_target(st, current, &fig.useful);
		else
		{
			fig.prev_rate = st->prev_rate;
			fig.prev_limit = st->prev_limit;
			target = climb_target(st, slot, current, now, &fig.rate);
		}

		/* a light load is not throttled: see the header */
		if (!st->binding)
			target = current;
		if (slot->config.max_running > 0)
			target = Max(slot->config.min_running,
						 Min(target, slot->config.max_running));

		if (target != current)
		{
			slot->current_limit = target;
			/* raising serves the queue now; lowering preempts no one */
			if (target > current)
				bulkhead_grant_waiters(slot, NULL);
			fig.running = slot->running;
			fig.queued = slot->queued;
			fig.min_running = slot->config.min_running;
			fig.max_running = slot->config.max_running;
		}
		LWLockRelease(slot->lock);
		elog(DEBUG1, "bulkhead: workload \"%s\": adaptive limit %d, next %d (%d samples: %d holders on a CPU, %d outside, %d blocked, %d stuck; %.2f useful (estimate); %.0f permits/s, %.0f before at limit %d; %s)",
			 st->name, current, target, st->samples, st->on_cpu, st->off_cpu,
			 st->blocked, st->stuck, fig.useful, fig.rate, fig.prev_rate, fig.prev_limit,
			 st->binding ? "callers waited" : "no caller waited");
		if (target != current)
			log_change(st->name, st, current, target, &fig);

		/* the next window */
		st->samples = 0;
		st->on_cpu = 0;
		st->off_cpu = 0;
		st->blocked = 0;
		st->stuck = 0;
		if (st->law == ADAPTIVE_LAW_HOLDERS || st->decisions == 0)
			st->binding = false;
	}
}
