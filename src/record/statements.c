/*-------------------------------------------------------------------------
 *
 * statements.c
 *	  bulkhead_statements (1.4): what admission did to each statement, per
 *	  (queryid, workload), and bulkhead_statements_reset().  From 1.5 an
 *	  entry is kept per role and database that ran the statement too (the
 *	  view shows a role only the queryids and requests of its own roles'
 *	  entries: statementsview.c).
 *
 * The queryid is the client's top-level statement's, as
 * pg_stat_activity.query_id shows it (pgstat_get_my_query_id): computed by
 * PostgreSQL when compute_query_id is on, or auto with a module that asks
 * for it (pg_stat_statements), and reported while track_activities is on.
 * A statement without one (0) is not counted.  No text is kept: the view
 * joins pg_stat_statements on (queryid, userid, dbid).
 *
 * What is counted, while bulkhead.track_statements is on:
 * - calls: a top-level statement starts holding a permit of the workload
 *   (after the gate: at its executor start, or its ProcessUtility); a
 *   statement run while permits of several workloads are held counts in
 *   each;
 * - waits, wait time (total, max): waits for a permit of the workload
 *   that ended, whatever their end (granted, timed out, cancelled,
 *   deadlocked): the time the statement spent queued;
 * - rejected (53B01), timed_out (53B02, after a wait or when none was
 *   allowed), whether raised or answered false by a try_ function;
 * - moved_in: its permit moved into the workload by a statement rule (1.3);
 * - max_memory_requested, shrunk: its memory grants (memory.c tells them).
 *
 * The table is pg_stat_statements' kind: a fixed number of entries
 * (bulkhead.max_statements); when it is full, the least used 5% (at least
 * 10) are evicted.  An entry's usage grows by one with each thing counted
 * in it, and every eviction lowers the usage of those it keeps by 1%, so
 * that entries used long ago give way to those in use now.  The figures
 * are not kept across a restart.
 *
 * A call costs one lock round trip on the table (shared), a hash lookup
 * and the entry's spinlock; the key of each permit held (its workload's
 * name) is kept per permit in backend-local memory while the permit is the
 * same grant, so that the statements of a transaction after its first
 * find it ready.
 *
 * Owns BulkheadStatements and its table (statements.h says which lock
 * protects what), the backend-local keys of its permits, and the settings
 * bulkhead.track_statements and bulkhead.max_statements.  Called by
 * hooks.c (calls), permit.c and local.c (admission, through outcome.h),
 * bulkhead.c (init), memory.c (grants), statementsview.c (the view's
 * reads, a batch at a time) and PostgreSQL's function manager (the
 * reset); calls shmem.c.
 *
 *-------------------------------------------------------------------------
 */
#include "record/statements.h"
#include "shmem/shmem.h"

#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(bulkhead_statements_reset);

/*---- GUC variables ----*/
bool		bulkhead_track_statements = false;
int			bulkhead_max_statements = 5000;

#define USAGE_DECAY			0.99	/* kept entries' usage at an eviction */
#define EVICT_PERCENT		5
#define EVICT_MIN			10

typedef BulkheadStatementKey StatementKey;
typedef BulkheadStatementCounts StatementCounts;

typedef struct StatementEntry
{
	StatementKey key;			/* first: the hash key */
	slock_t		mutex;			/* protects counts and usage */
	double		usage;
	StatementCounts counts;
} StatementEntry;

typedef struct BulkheadStatements
{
	LWLock	   *lock;
	int			max;			/* entries of the table */
	StatementEntry **victims;	/* max: scratch of an eviction */
} BulkheadStatements;

static BulkheadStatements *stmts = NULL;
static HTAB *table = NULL;

/*
 * This backend's cache of the keys of its permits' workloads (queryid
 * left out), one per permit entry: valid while the entry is the same grant
 * (since) in the same slot, whose name cannot change while the entry
 * points at it.  A transaction's automatic permit is a new grant: its
 * first statement fills the key, the others of the transaction use it.
 */
typedef struct HeldKey
{
	TimestampTz since;			/* 0: nothing cached */
	int			workload;
	StatementKey key;
} HeldKey;

static HeldKey *held_keys = NULL;

static uint32
name_hash(const char *name)
{
	return hash_bytes((const unsigned char *) name, strlen(name));
}

static uint32
key_hash(const void *key, Size keysize)
{
	const StatementKey *k = key;

	return hash_combine(hash_combine(hash_bytes_uint32((uint32) k->queryid) ^
									 (uint32) ((uint64) k->queryid >> 32),
									 hash_bytes_uint32(k->userid) ^ k->dbid),
						k->name_hash);
}

/*---- Settings and shared memory ----*/

void
bulkhead_statements_init(void)
{
	DefineCustomBoolVariable("bulkhead.track_statements",
							 "Counts what admission did per statement (queryid) and workload, in bulkhead_statements.",
							 "Needs query identifiers: compute_query_id = on, or auto with pg_stat_statements loaded.",
							 &bulkhead_track_statements,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("bulkhead.max_statements",
							"Number of (statement, workload) entries bulkhead_statements keeps.",
							"The least used entries are evicted when the table is full.",
							&bulkhead_max_statements,
							5000, 100, INT_MAX / 2,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
}

static Size
statements_size(void)
{
	Size		size = MAXALIGN(sizeof(BulkheadStatements));

	size = add_size(size, MAXALIGN(mul_size(bulkhead_max_statements,
											sizeof(StatementEntry *))));
	return add_size(size, hash_estimate_size(bulkhead_max_statements,
											 sizeof(StatementEntry)));
}

void
bulkhead_statements_shmem_request(void)
{
	RequestAddinShmemSpace(statements_size());
	RequestNamedLWLockTranche("bulkhead statements", 1);
}

void
bulkhead_statements_shmem_startup(void)
{
	HASHCTL		info;
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stmts = ShmemInitStruct("bulkhead statements",
							MAXALIGN(sizeof(BulkheadStatements)) +
							MAXALIGN(sizeof(StatementEntry *) * bulkhead_max_statements),
							&found);
	if (!found)
	{
		stmts->lock = &GetNamedLWLockTranche("bulkhead statements")[0].lock;
		stmts->max = bulkhead_max_statements;
		stmts->victims = (StatementEntry **)
			((char *) stmts + MAXALIGN(sizeof(BulkheadStatements)));
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(StatementKey);
	info.entrysize = sizeof(StatementEntry);
	info.hash = key_hash;		/* keys are compared with memcmp */
#if PG_VERSION_NUM >= 190000
	table = ShmemInitHash("bulkhead statements table", bulkhead_max_statements,
						  &info, HASH_ELEM | HASH_FUNCTION);
#else
	table = ShmemInitHash("bulkhead statements table",
						  bulkhead_max_statements, bulkhead_max_statements,
						  &info, HASH_ELEM | HASH_FUNCTION);
#endif
	LWLockRelease(AddinShmemInitLock);
}

/*---- Counting ----*/

static int
usage_cmp(const void *a, const void *b)
{
	double		ua = (*(StatementEntry *const *) a)->usage;
	double		ub = (*(StatementEntry *const *) b)->usage;

	return ua < ub ? -1 : ua > ub ? 1 : 0;
}

/*
 * The table is full: evict the least used entries, and lower the usage of
 * the others.  Caller holds lock exclusively.  Allocates nothing (victims[]
 * is in shared memory; pg_qsort works in place), never throws.
 */
static void
evict(void)
{
	HASH_SEQ_STATUS seq;
	StatementEntry *e;
	int			n = 0;
	int			nvictims;
	int			i;

	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (n < stmts->max)
			stmts->victims[n++] = e;
	}
	qsort(stmts->victims, n, sizeof(StatementEntry *), usage_cmp);
	nvictims = Min(n, Max(EVICT_MIN, n * EVICT_PERCENT / 100));
	for (i = 0; i < n; i++)
	{
		if (i < nvictims)
			hash_search(table, &stmts->victims[i]->key, HASH_REMOVE, NULL);
		else
			stmts->victims[i]->usage *= USAGE_DECAY;
	}
}

static void
add_counts(StatementEntry *e, const StatementCounts *c)
{
	e->usage += 1.0;
	e->counts.calls += c->calls;
	e->counts.waits += c->waits;
	e->counts.wait_time_total_us += c->wait_time_total_us;
	e->counts.wait_time_max_us = Max(e->counts.wait_time_max_us,
									 c->wait_time_max_us);
	e->counts.rejected += c->rejected;
	e->counts.timed_out += c->timed_out;
	e->counts.moved_in += c->moved_in;
	e->counts.max_memory_requested = Max(e->counts.max_memory_requested,
										 c->max_memory_requested);
	e->counts.shrunk += c->shrunk;
}

/*
 * The role and database of the statement: the outer role (a SECURITY
 * DEFINER function the statement calls does not change it), as the
 * queryid is the client's top-level statement's, which that role ran.
 */
static void
key_set_user(StatementKey *key)
{
	key->userid = GetOuterUserId();
	key->dbid = MyDatabaseId;
}

/* The key of (queryid, workload): zero-padded, with the name's hash */
static void
make_key(StatementKey *key, int64 queryid, const char *workload)
{
	memset(key, 0, sizeof(StatementKey));
	key->queryid = queryid;
	key_set_user(key);
	strlcpy(key->workload, workload, NAMEDATALEN);
	key->name_hash = name_hash(key->workload);
}

/*
 * Count c in the entry of key, made if it is missing (and room made for
 * it).  Takes lock, shared or (to make the entry) exclusive; never throws.
 */
static void
count(const StatementKey *key, const StatementCounts *c)
{
	StatementEntry *e;

	LWLockAcquire(stmts->lock, LW_SHARED);
	e = hash_search(table, key, HASH_FIND, NULL);
	if (e != NULL)
	{
		SpinLockAcquire(&e->mutex);
		add_counts(e, c);
		SpinLockRelease(&e->mutex);
		LWLockRelease(stmts->lock);
		return;
	}
	LWLockRelease(stmts->lock);

	LWLockAcquire(stmts->lock, LW_EXCLUSIVE);
	e = hash_search(table, key, HASH_FIND, NULL);
	if (e == NULL)
	{
		bool		found;

		if (hash_get_num_entries(table) >= stmts->max)
			evict();
		e = hash_search(table, key, HASH_ENTER_NULL, &found);
		if (e != NULL && !found)
		{
			SpinLockInit(&e->mutex);
			e->usage = 0;
			memset(&e->counts, 0, sizeof(StatementCounts));
		}
	}
	/* exclusively held: no one else counts, no spinlock needed */
	if (e != NULL)
		add_counts(e, c);
	LWLockRelease(stmts->lock);
}

/* The statement's queryid, or 0 when there is none or nothing is counted */
static int64
counted_queryid(void)
{
	if (!bulkhead_track_statements || stmts == NULL)
		return 0;
	return (int64) pgstat_get_my_query_id();
}

/*
 * The key of the workload that entry (this backend's, granted) holds a
 * permit of, into held.  The worker may move a holder to another workload
 * (runaway.c), under the slot locks, so the name is copied without a lock
 * and kept only if the entry still is the same grant in the same slot
 * after the copy: while the entry points at the slot, the slot keeps its
 * name (shmem.h).
 */
static bool
held_key(BulkheadEntry *entry, HeldKey *held)
{
	volatile BulkheadEntry *v = entry;
	int			w = v->workload;
	TimestampTz since = v->since;

	held->since = 0;
	if (w < 0 || w >= bulkhead_shared->nslots)
		return false;
	pg_read_barrier();
	memset(&held->key, 0, sizeof(StatementKey));
	strlcpy(held->key.workload, bulkhead_shared->slots[w].name, NAMEDATALEN);
	pg_read_barrier();
	if (v->workload != w || v->since != since ||
		v->state != BULKHEAD_ENTRY_GRANTED || held->key.workload[0] == '\0')
		return false;
	held->key.name_hash = name_hash(held->key.workload);
	held->workload = w;
	held->since = since;
	return true;
}

void
bulkhead_statements_count_call_slow(void)
{
	static const StatementCounts one_call = {.calls = 1};
	int64		queryid = counted_queryid();
	BulkheadEntry *entries;
	int			i;

	if (queryid == 0 || bulkhead_shared == NULL || MyProc == NULL)
		return;
	if (held_keys == NULL)
		held_keys = MemoryContextAllocZero(TopMemoryContext,
										   sizeof(HeldKey) * bulkhead_shared->permits_per_backend);
	/* this backend's own entries: only it links or unlinks them */
	entries = bulkhead_backend_entries(BULKHEAD_MY_PROCNO);
	for (i = 0; i < bulkhead_shared->permits_per_backend; i++)
	{
		BulkheadEntry *entry = &entries[i];
		HeldKey    *held = &held_keys[i];

		if (entry->state != BULKHEAD_ENTRY_GRANTED || entry->pid != MyProcPid)
			continue;
		/* another grant, or moved by the worker: the key afresh */
		if ((held->since != entry->since || held->workload != entry->workload) &&
			!held_key(entry, held))
			continue;
		held->key.queryid = queryid;
		key_set_user(&held->key);	/* a SET ROLE keeps the grant */
		count(&held->key, &one_call);
	}
}

/* Count c for the current statement in workload (none without a queryid) */
static void
note(const char *workload, StatementCounts *c)
{
	StatementKey key;
	int64		queryid = counted_queryid();

	if (queryid == 0)
		return;
	make_key(&key, queryid, workload);
	count(&key, c);
}

void
bulkhead_statements_note_wait(const char *workload, int64 wait_us,
							  bool timed_out, bool moved_in)
{
	StatementCounts c = {0};

	c.waits = 1;
	c.wait_time_total_us = c.wait_time_max_us = Max(wait_us, 0);
	c.timed_out = timed_out ? 1 : 0;
	c.moved_in = moved_in ? 1 : 0;
	note(workload, &c);
}

void
bulkhead_statements_note_admit(const char *workload, bool rejected,
							   bool timed_out, bool moved_in)
{
	StatementCounts c = {0};

	c.rejected = rejected ? 1 : 0;
	c.timed_out = timed_out ? 1 : 0;
	c.moved_in = moved_in ? 1 : 0;
	note(workload, &c);
}

void
bulkhead_statements_note_memory(int slotno, int64 requested, bool shrunk)
{
	StatementCounts c = {0};
	BulkheadSlot *slot;
	char		name[NAMEDATALEN];

	if (counted_queryid() == 0 || slotno < 0 || bulkhead_shared == NULL ||
		slotno >= bulkhead_shared->nslots)
		return;
	/* the caller holds a permit there: the slot keeps its name meanwhile */
	slot = &bulkhead_shared->slots[slotno];
	bulkhead_slot_lock(slot, LW_SHARED);
	strlcpy(name, slot->name, NAMEDATALEN);
	LWLockRelease(slot->lock);
	if (name[0] == '\0')
		return;
	c.max_memory_requested = Max(requested, 0);
	c.shrunk = shrunk ? 1 : 0;
	note(name, &c);
}

/*---- The view's reads and the reset ----*/

/* The order of keys the view reads in: queryid, role, database, workload */
static int
key_cmp(const StatementKey *a, const StatementKey *b)
{
	if (a->queryid != b->queryid)
		return a->queryid < b->queryid ? -1 : 1;
	if (a->userid != b->userid)
		return a->userid < b->userid ? -1 : 1;
	if (a->dbid != b->dbid)
		return a->dbid < b->dbid ? -1 : 1;
	return strcmp(a->workload, b->workload);
}

static int
copy_cmp(const void *a, const void *b)
{
	return key_cmp(&((const BulkheadStatementCopy *) a)->key,
				   &((const BulkheadStatementCopy *) b)->key);
}

/*
 * A batch of the table, the smallest keys after *after: every entry is
 * looked at, those past the batch's cut are skipped at once; out, when it
 * fills (2 * batch), is sorted and cut to batch, which lowers the cut.  A
 * read of n entries costs n / batch passes of the table, each under lock
 * held shared; it allocates nothing (out is the caller's, qsort sorts in
 * place) and never throws.
 */
int
bulkhead_statements_copy(BulkheadStatementCopy *out, int batch,
						 const BulkheadStatementKey *after)
{
	HASH_SEQ_STATUS seq;
	StatementEntry *e;
	StatementKey cut;
	bool		cut_set = false;
	int			n = 0;

	LWLockAcquire(stmts->lock, LW_SHARED);
	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if ((after != NULL && key_cmp(&e->key, after) <= 0) ||
			(cut_set && key_cmp(&e->key, &cut) >= 0))
			continue;
		out[n].key = e->key;
		SpinLockAcquire(&e->mutex);
		out[n].counts = e->counts;
		SpinLockRelease(&e->mutex);
		if (++n == 2 * batch)
		{
			qsort(out, n, sizeof(BulkheadStatementCopy), copy_cmp);
			n = batch;
			cut = out[batch - 1].key;
			cut_set = true;
		}
	}
	LWLockRelease(stmts->lock);
	qsort(out, n, sizeof(BulkheadStatementCopy), copy_cmp);
	return Min(n, batch);
}

/* bulkhead_statements_reset(): every entry removed */
Datum
bulkhead_statements_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS seq;
	StatementEntry *e;

	bulkhead_check_loaded();
	LWLockAcquire(stmts->lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
		hash_search(table, &e->key, HASH_REMOVE, NULL);
	LWLockRelease(stmts->lock);
	PG_RETURN_VOID();
}
