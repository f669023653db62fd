/*-------------------------------------------------------------------------
 *
 * feedback.c
 *	  Memory grants (1.5): grant feedback (feedback.h).  When a statement
 *	  ends, what its memory nodes used is noted per (queryid, workload); its
 *	  next runs ask from the notes (feedbackrule.c has the rules).
 *
 * Which statement.  The key is the plan's queryid and the name of the
 * workload it is charged to ("" outside any workload), as in
 * bulkhead_statements: a workload renamed, or deleted and made again
 * under another name, starts over; a slot given to another workload does
 * not inherit its old workload's notes, since the name is the key, not the
 * slot.  The name is read under the slot's lock (the statement holds a
 * permit there, so the slot keeps its name), once per statement: the key
 * found when its grant is worked out is kept for its end.
 *
 * Shared state and its lock
 * -------------------------
 * BulkheadFeedback and its hash table of BulkheadFeedbackNotes (shmem
 * "bulkhead feedback", bulkhead.feedback_statements entries) are this
 * module's alone:
 *
 * - lock (an LWLock of its own, tranche "bulkhead feedback"): held shared
 *   to look notes up (a statement's grant) and to read them all (the
 *   view); exclusive to note a run (every field of an entry), to make an
 *   entry, to evict the least used when the table is full (victims[] is
 *   its scratch), and to reset.
 * - max and the pointers are set when the shared memory is made.
 *
 * Nothing is allocated or thrown while lock is held (HASH_ENTER_NULL, an
 * eviction into victims[], the rules' arithmetic), so a note is safe at
 * any executor end.
 *
 * Size and eviction: bulkhead.feedback_statements entries (PGC_POSTMASTER,
 * default 1000, 0: no feedback); when full, the least used 5% (at least
 * 10) are evicted, as bulkhead_statements does; a note adds one to an
 * entry's usage and an eviction lowers the kept ones' by 1%.
 *
 * Across a clean restart: the postmaster saves every entry at its clean
 * shutdown and reads them back when it makes the shared memory
 * (feedbackfile.c).
 *
 * Nothing is looked up or noted while no memory limit is set: memory.c
 * calls here only for a statement it grants or measures, which it does
 * only then.
 *
 * Owns BulkheadFeedback and its table, the setting
 * bulkhead.feedback_statements and a backend-local cache of recent keys.
 * Called by memory.c (apply, note), bulkhead.c (init, shared memory, the
 * save) and PostgreSQL's function manager (the view, the reset); calls
 * shmem.c (a slot's name), feedbackrule.c and feedbackfile.c.
 *
 *-------------------------------------------------------------------------
 */
#include "memory/feedback.h"
#include "memory/feedbackfile.h"
#include "memory/feedbackrule.h"
#include "shmem/shmem.h"

#include "catalog/pg_authid.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(bulkhead_statement_memory);
PG_FUNCTION_INFO_V1(bulkhead_statement_memory_reset);

/*---- GUC variables ----*/
int			bulkhead_feedback_statements = 1000;

#define USAGE_DECAY			0.99
#define EVICT_PERCENT		5
#define EVICT_MIN			10
#define RECENT_KEYS			4

/* The table's header (shmem "bulkhead feedback") */
typedef struct BulkheadFeedback
{
	LWLock	   *lock;			/* set at start; protects the table */
	int			max;			/* entries of the table; set at start */
	BulkheadFeedbackNotes **victims;	/* max: an eviction's scratch, used
										 * under lock held exclusively */
} BulkheadFeedback;

static BulkheadFeedback *fb = NULL;
static HTAB *table = NULL;

/* The keys of the statements granted last (backend-local) */
typedef struct RecentKey
{
	const BulkheadMemPlan *plan;
	BulkheadFeedbackKey key;
} RecentKey;

static RecentKey recent[RECENT_KEYS];
static int	recent_next = 0;

static uint32
key_hash(const void *key, Size keysize)
{
	const BulkheadFeedbackKey *k = key;

	return hash_combine(hash_bytes_uint32((uint32) k->queryid) ^
						(uint32) ((uint64) k->queryid >> 32), k->name_hash);
}

/*---- Settings and shared memory ----*/

void
bulkhead_feedback_init(void)
{
	DefineCustomIntVariable("bulkhead.feedback_statements",
							"Number of (statement, workload) entries whose memory use grant feedback keeps.",
							"0 turns grant feedback off.  The least used entries are evicted when the table is full.",
							&bulkhead_feedback_statements,
							1000, 0, INT_MAX / 2,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
}

static Size
head_size(void)
{
	return add_size(MAXALIGN(sizeof(BulkheadFeedback)),
					MAXALIGN(mul_size(bulkhead_feedback_statements,
									  sizeof(BulkheadFeedbackNotes *))));
}

void
bulkhead_feedback_shmem_request(void)
{
	if (bulkhead_feedback_statements <= 0)
		return;
	RequestAddinShmemSpace(add_size(head_size(),
									hash_estimate_size(bulkhead_feedback_statements,
													   sizeof(BulkheadFeedbackNotes))));
	RequestNamedLWLockTranche("bulkhead feedback", 1);
}

void
bulkhead_feedback_shmem_startup(void)
{
	HASHCTL		info;
	bool		found;

	if (bulkhead_feedback_statements <= 0)
		return;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	fb = ShmemInitStruct("bulkhead feedback", head_size(), &found);
	if (!found)
	{
		fb->lock = &GetNamedLWLockTranche("bulkhead feedback")[0].lock;
		fb->max = bulkhead_feedback_statements;
		fb->victims = (BulkheadFeedbackNotes **)
			((char *) fb + MAXALIGN(sizeof(BulkheadFeedback)));
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(BulkheadFeedbackKey);
	info.entrysize = sizeof(BulkheadFeedbackNotes);
	info.hash = key_hash;		/* keys are compared with memcmp */
#if PG_VERSION_NUM >= 190000
	table = ShmemInitHash("bulkhead feedback table", bulkhead_feedback_statements,
						  &info, HASH_ELEM | HASH_FUNCTION);
#else
	table = ShmemInitHash("bulkhead feedback table", bulkhead_feedback_statements,
						  bulkhead_feedback_statements, &info,
						  HASH_ELEM | HASH_FUNCTION);
#endif
	LWLockRelease(AddinShmemInitLock);
	/* the postmaster, nothing else running: the notes of the last shutdown */
	if (!found && !IsUnderPostmaster)
		bulkhead_feedbackfile_restore(table, fb->max);
}

void
bulkhead_feedback_save(int code, Datum arg)
{
	/* after a crash, the notes are discarded */
	if (code == 0 && table != NULL)
		bulkhead_feedbackfile_save(table);
}

/*---- The key ----*/

/* plan's key into key; false when it has none */
static bool
make_key(const BulkheadMemPlan *plan, BulkheadFeedbackKey *key)
{
	memset(key, 0, sizeof(*key));
	key->queryid = (int64) plan->queryid;
	if (plan->slotno >= 0 && bulkhead_shared != NULL &&
		plan->slotno < bulkhead_shared->nslots)
	{
		BulkheadSlot *slot = &bulkhead_shared->slots[plan->slotno];

		/* it holds a permit there: the slot keeps its name meanwhile */
		bulkhead_slot_lock(slot, LW_SHARED);
		strlcpy(key->workload, slot->name, NAMEDATALEN);
		LWLockRelease(slot->lock);
		if (key->workload[0] == '\0')
			return false;
	}
	key->name_hash = hash_bytes((const unsigned char *) key->workload,
								strlen(key->workload));
	return key->queryid != 0;
}

/* plan's key, from the cache when its grant found it */
static bool
key_of(const BulkheadMemPlan *plan, BulkheadFeedbackKey *key)
{
	int			i;

	for (i = 1; i <= RECENT_KEYS; i++)
	{
		RecentKey  *r = &recent[(recent_next - i + RECENT_KEYS) % RECENT_KEYS];

		if (r->plan == plan && r->key.queryid == (int64) plan->queryid)
		{
			*key = r->key;
			return true;
		}
	}
	return make_key(plan, key);
}

/*---- Apply and note ----*/

void
bulkhead_feedback_apply(BulkheadMemPlan *plan)
{
	BulkheadFeedbackKey key;
	BulkheadFeedbackNotes *notes;

	bool		keyed;

	if (fb == NULL)
		return;
	keyed = make_key(plan, &key);
	/* kept for its end (a key of queryid 0 is never taken from the cache) */
	recent[recent_next].plan = plan;
	recent[recent_next].key = key;
	if (!keyed)
		recent[recent_next].key.queryid = 0;
	recent_next = (recent_next + 1) % RECENT_KEYS;
	if (!keyed)
		return;

	LWLockAcquire(fb->lock, LW_SHARED);
	notes = hash_search(table, &key, HASH_FIND, NULL);
	if (notes != NULL && notes->runs > 0 && bulkhead_feedback_same_plan(notes, plan))
		bulkhead_feedback_rule_apply(notes, plan);
	LWLockRelease(fb->lock);
}

static int
usage_cmp(const void *a, const void *b)
{
	double		ua = (*(BulkheadFeedbackNotes *const *) a)->usage;
	double		ub = (*(BulkheadFeedbackNotes *const *) b)->usage;

	return ua < ub ? -1 : ua > ub ? 1 : 0;
}

/* The table is full: the least used go.  lock held exclusively. */
static void
evict(void)
{
	HASH_SEQ_STATUS seq;
	BulkheadFeedbackNotes *e;
	int			n = 0;
	int			nvictims;
	int			i;

	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (n < fb->max)
			fb->victims[n++] = e;
	qsort(fb->victims, n, sizeof(BulkheadFeedbackNotes *), usage_cmp);
	nvictims = Min(n, Max(EVICT_MIN, n * EVICT_PERCENT / 100));
	for (i = 0; i < n; i++)
	{
		if (i < nvictims)
			hash_search(table, &fb->victims[i]->key, HASH_REMOVE, NULL);
		else
			fb->victims[i]->usage *= USAGE_DECAY;
	}
}

void
bulkhead_feedback_note(const BulkheadMemPlan *plan)
{
	BulkheadFeedbackKey key;
	BulkheadFeedbackNotes *notes;
	bool		found;
	Oid			userid = GetUserId();

	if (fb == NULL || !key_of(plan, &key))
		return;
	LWLockAcquire(fb->lock, LW_EXCLUSIVE);
	notes = hash_search(table, &key, HASH_FIND, NULL);
	if (notes == NULL)
	{
		if (hash_get_num_entries(table) >= fb->max)
			evict();
		notes = hash_search(table, &key, HASH_ENTER_NULL, &found);
		if (notes != NULL && !found)
		{
			memset((char *) notes + sizeof(BulkheadFeedbackKey), 0,
				   sizeof(BulkheadFeedbackNotes) - sizeof(BulkheadFeedbackKey));
			bulkhead_feedback_start_over(notes, plan);
		}
	}
	if (notes != NULL)
	{
		notes->usage += 1.0;
		notes->userid = userid;
		bulkhead_feedback_rule_note(notes, plan);
	}
	LWLockRelease(fb->lock);
}

/*---- The view and the reset ----*/

#define STATEMENT_MEMORY_COLS	6

/* May the caller see the notes of a statement userid ran? */
static bool
may_see(Oid userid, bool see_all)
{
	return see_all || userid == GetUserId();
}

/*
 * bulkhead_statement_memory(): each entry's last peak, spills and next
 * request, joined into bulkhead_statements by (queryid, workload).  As
 * pg_stat_statements: a role sees the statements it ran, a member of
 * pg_read_all_stats (or a superuser) all.
 */
Datum
bulkhead_statement_memory(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BulkheadFeedbackNotes *copies;
	BulkheadFeedbackNotes *e;
	HASH_SEQ_STATUS seq;
	bool		see_all;
	int			n = 0;
	int			i;

	bulkhead_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	if (fb == NULL)
		return (Datum) 0;
	see_all = superuser() || has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	copies = palloc(mul_size(sizeof(BulkheadFeedbackNotes), fb->max));
	LWLockAcquire(fb->lock, LW_SHARED);
	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (n < fb->max)
			copies[n++] = *e;
	LWLockRelease(fb->lock);

	for (i = 0; i < n; i++)
	{
		Datum		values[STATEMENT_MEMORY_COLS];
		bool		nulls[STATEMENT_MEMORY_COLS] = {0};
		char		source[2] = {copies[i].source, '\0'};
		int			col = 0;

		if (!may_see(copies[i].userid, see_all) || copies[i].runs == 0)
			continue;
		values[col++] = Int64GetDatum(copies[i].key.queryid);
		values[col++] = CStringGetTextDatum(copies[i].key.workload);
		nulls[col] = copies[i].peak_used < 0;
		values[col++] = Int64GetDatum(copies[i].peak_used);
		values[col++] = Int64GetDatum(copies[i].spills);
		values[col++] = Int64GetDatum(copies[i].request);
		values[col++] = CStringGetTextDatum(source[0] == BULKHEAD_SOURCE_LIMIT ? "limit" :
											source[0] == BULKHEAD_SOURCE_FEEDBACK ?
											"feedback" : "estimate");
		Assert(col == STATEMENT_MEMORY_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(copies);
	return (Datum) 0;
}

/* bulkhead_statement_memory_reset(): every note removed */
Datum
bulkhead_statement_memory_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS seq;
	BulkheadFeedbackNotes *e;

	bulkhead_check_loaded();
	if (fb == NULL)
		PG_RETURN_VOID();
	LWLockAcquire(fb->lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
		hash_search(table, &e->key, HASH_REMOVE, NULL);
	LWLockRelease(fb->lock);
	PG_RETURN_VOID();
}
