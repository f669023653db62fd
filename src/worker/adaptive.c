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
 * holdersample.c samples what each holder does: on a CPU (or ready for one),
 * waiting outside the server's CPUs, blocked (by the workload itself), or
 * stuck (blocked from elsewhere).
 *
 * With n CPUs (the worker's own CPU affinity, which it shares with the
 * postmaster, lowered to a cgroup's CPU quota where one is set: see
 * cpus.c), a sample counts as useful min(n, holders on or ready for a
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
 * Locking: the worker changes a limit through slot.c (bulkhead_slot_set_limit),
 * under the slot lock held exclusively; holdersample.c says how it samples.
 * The laws' state is the worker's own memory: a restarted worker starts
 * measuring afresh from the limit in force, which shared memory kept.
 *
 * Owns no shared state.  Called by worker.c (sample, decide) and loader.c
 * (the limit at a load).
 *
 *-------------------------------------------------------------------------
 */
#include "worker/adaptive.h"
#include "worker/cpus.h"
#include "worker/holdersample.h"
#include "workload/slot.h"

#include <math.h>

#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"


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
 * Register bulkhead.adaptive_law (from _PG_init).  It is a setting of the
 * worker, for comparing the laws; workloads choose adaptive or not.
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
		limit = 2 * bulkhead_cpu_count(false);
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
state_of(int i, const char *name)
{
	AdaptiveState *st;

	st = &states[i];
	if (!st->active || st->law != bulkhead_adaptive_law ||
		strcmp(st->name, name) != 0)
		reset_state(st, name);
	return st;
}

/*
 * Take one sample of every adaptive workload's holders.  Returns whether
 * any workload is adaptive (the worker then keeps sampling).
 */
bool
bulkhead_adaptive_sample(void)
{
	int			ncpu = bulkhead_cpu_count(true);
	TimestampTz now = GetCurrentTimestamp();
	bool		any = false;
	int			i;

	bulkhead_log_cpu_count();

	/* allocated before any slot lock is taken: an allocation can throw */
	bulkhead_holders_prepare();
	if (states == NULL)
		states = MemoryContextAllocZero(TopMemoryContext,
										sizeof(AdaptiveState) * bulkhead_shared->nslots);

	for (i = 0; i < bulkhead_shared->nslots; i++)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[i];
		BulkheadHolderSample sample;
		AdaptiveState *st;
		int			stuck = 0;

		/* unlocked peek: a slot that is not adaptive costs no lock */
		if (!slot->in_use || !slot->config.adaptive)
		{
			states[i].active = false;
			continue;
		}
		if (!bulkhead_sample_holders(slot, now, &sample))
			continue;
		any = true;
		st = state_of(i, sample.name);

		/*
		 * Only a sample taken while callers wait (or would, in shadow mode)
		 * says something about the limit: one taken at rest, or as a burst
		 * begins, would drag the estimate down.
		 */
		if (!sample.binding)
			continue;
		if (sample.nwaiters > 0 && st->law == ADAPTIVE_LAW_HOLDERS)
			stuck = bulkhead_count_stuck(sample.nwaiters);
		st->binding = true;
		st->samples++;
		st->on_cpu += Min(sample.on_cpu, ncpu);
		st->off_cpu += sample.off_cpu;
		st->blocked += sample.blocked + sample.nwaiters - stuck;
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
		bulkhead_slot_lock(slot, LW_EXCLUSIVE);
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
			/* raising serves the queue now; lowering preempts no one */
			bulkhead_slot_set_limit(slot, target);
			fig.running = slot->running;
			fig.queued = slot->first_child >= 0 ? slot->sub_queued : slot->queued;
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
