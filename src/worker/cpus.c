/*-------------------------------------------------------------------------
 *
 * cpus.c
 *	  How many CPUs the server may use, for the adaptive limits: the
 *	  worker's CPU affinity, lowered to a cgroup's CPU quota where one is
 *	  set.
 *
 * Owns no shared state: the count is the worker's own.  Called by
 * adaptive.c only; calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#include "worker/cpus.h"

#include <math.h>
#include <sched.h>

#include "utils/guc.h"
#include "utils/timestamp.h"

/* How often the CPU count is read again (a cgroup quota can change) */
#define CPU_COUNT_REFRESH_MS	10000

/* Developer setting: where /proc and the cgroup files are read (tests) */
static char *cgroup_root = NULL;

/* The CPU count in use, when it was read, and the one last logged */
static int	ncpu_cached = 0;
static TimestampTz ncpu_read_at = 0;
static int	ncpu_logged = 0;
static int	ncpu_affinity = 0;
static double ncpu_quota = 0;

/* From _PG_init: a hidden developer setting for the tests of the cgroups */
void
bulkhead_cpus_init(void)
{
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
 * The process's cgroup in each hierarchy (/proc/self/cgroup, lines of
 * "id:controllers:path"): the v2 one into v2_path, the v1 one that has the
 * cpu controller into v1_path, each CG_PATH_MAX bytes; *v1 and *v2 say
 * whether each was found.
 */
static void
process_cgroups(char *v1_path, bool *v1, char *v2_path, bool *v2)
{
	char		path[CG_PATH_MAX];
	char		line[CG_LINE_MAX];
	FILE	   *f;

	*v1 = false;
	*v2 = false;
	if (!cg_path(path, "/proc/self/cgroup") || (f = fopen(path, "r")) == NULL)
		return;
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
			*v2 = true;
		}
		else if (cg_list_has(controllers, "cpu"))
		{
			strcpy(v1_path, cgpath);
			*v1 = true;
		}
	}
	fclose(f);
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
	char		v1_path[CG_PATH_MAX];
	char		v2_path[CG_PATH_MAX];
	bool		v1;
	bool		v2;
	FILE	   *f;
	double		best = 0;

	process_cgroups(v1_path, &v1, v2_path, &v2);
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
int
bulkhead_cpu_count(bool refresh)
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
void
bulkhead_log_cpu_count(void)
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
