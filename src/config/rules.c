/*-------------------------------------------------------------------------
 *
 * rules.c
 *	  Classification rules: bulkhead_rule routes sessions to workloads by
 *	  role, database, application_name and client address.
 *
 * The worker reads the table in the same transaction (and snapshot) as
 * bulkhead_workload (loader.c) and replaces the rule set in shared memory
 * here, bumping its generation only when the set changed.  A client backend classifies itself
 * at its first transaction and again only when something it matched on may
 * have changed: the rules' generation, GetOuterUserId() (SET ROLE, SET
 * SESSION AUTHORIZATION) or application_name.  Its database and client
 * address do not change within a session.  In steady state a transaction
 * costs one atomic read, one comparison of user ids and one strcmp.
 *
 * The user classified is the outer one, which SET ROLE changes but a
 * SECURITY DEFINER function does not: the first statement of a transaction
 * to reach the gate can be one run inside such a function (the planner
 * evaluates an IMMUTABLE function with constant arguments before the
 * statement that calls it starts), and the transaction is the caller's.
 *
 * An evaluation copies the rules under the rule lock held shared and
 * matches outside it: role membership and LIKE may read catalogs and may
 * throw.  The first matching session rule in position order wins.  A
 * statement rule (1.3: min_cost or command set) classifies no session: the
 * evaluation keeps, in order, those whose session columns match, and
 * lanes.c matches each statement against them (kind and cost only).  With
 * none in the set, a statement costs one atomic read.
 *
 * Owns the rule set and the classification records in shared memory
 * (which lock protects which field is written down in rules.h), and the
 * settings bulkhead.workload, bulkhead.exempt_superuser and
 * bulkhead.max_rules.  Called by loader.c (the set), transparent.c (classifying
 * and publishing) and catalog.c (max_rules); calls shmem.c, and
 * importance.c (1.5: the gate's classification sets the importance
 * its waits carry).
 *
 *-------------------------------------------------------------------------
 */
#include "config/rules.h"
#include "workload/importance.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"	/* get_database_name from 19 on */
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(bulkhead_classify);
PG_FUNCTION_INFO_V1(bulkhead_classify_pid);
PG_FUNCTION_INFO_V1(bulkhead_rule_evaluations);

StaticAssertDecl(offsetof(BulkheadRule, client_addr) % sizeof(int32) == 0,
				 "an inet kept in a rule must be aligned as a varlena header");

/*---- GUC variables ----*/
int			bulkhead_max_rules = 64;
char	   *bulkhead_gate_workload = NULL;
bool		bulkhead_exempt_superuser = true;

static BulkheadRuleSet *bulkhead_rules = NULL;

/*---- This session's classification by the rules (backend-local) ----*/
static bool cache_valid = false;
static uint64 cache_generation;
static Oid	cache_userid;
static char *cache_appname = NULL;	/* TopMemoryContext */
static bool cache_matched;
static int32 cache_position;
static char cache_workload[NAMEDATALEN];
static int	cache_importance;	/* 1.5: the rule's, or UNSET */

/* The statement rules that match the session (TopMemoryContext) */
static uint64 cache_version = 0;	/* evaluations of this session */
static BulkheadRule *cache_statement = NULL;
static int	cache_nstatement = 0;
static int	cache_statement_room = 0;

/* What the session matches on that never changes (TopMemoryContext) */
static bool session_known = false;
static char *session_database;
static inet *session_addr;		/* NULL: a Unix-socket session */

/* What this backend last published in its record */
static bool published = false;
static BulkheadClassSource published_source;
static int32 published_position;
static char published_workload[NAMEDATALEN];

static Size
rules_shmem_size(void)
{
	Size		size;

	size = MAXALIGN(add_size(offsetof(BulkheadRuleSet, rules),
							 mul_size(bulkhead_max_rules, sizeof(BulkheadRule))));
	size = add_size(size, mul_size(bulkhead_backend_count(),
								   sizeof(BulkheadClassRecord)));
	return size;
}

/* From _PG_init, before the prefix is reserved */
void
bulkhead_rules_init(void)
{
	DefineCustomStringVariable("bulkhead.workload",
							   "Workload whose permit every transaction of the session takes.",
							   "Empty: transactions are not gated.  Only superusers may set it.",
							   &bulkhead_gate_workload,
							   "",
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("bulkhead.exempt_superuser",
							 "Superusers' transactions are not gated by bulkhead.workload or by rules.",
							 NULL,
							 &bulkhead_exempt_superuser,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("bulkhead.max_rules",
							"Maximum number of classification rules kept in shared memory.",
							NULL,
							&bulkhead_max_rules,
							64, 1, 10000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
}

void
bulkhead_rules_shmem_request(void)
{
	RequestAddinShmemSpace(rules_shmem_size());
	RequestNamedLWLockTranche("bulkhead rules", 1);
}

void
bulkhead_rules_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bulkhead_rules = ShmemInitStruct("bulkhead rules", rules_shmem_size(), &found);
	if (!found)
	{
		BulkheadRuleSet *set = bulkhead_rules;
		int			i;

		memset(set, 0, rules_shmem_size());
		set->lock = &GetNamedLWLockTranche("bulkhead rules")[0].lock;
		set->max_rules = bulkhead_max_rules;
		pg_atomic_init_u64(&set->generation, 0);
		pg_atomic_init_u64(&set->evaluations, 0);
		pg_atomic_init_u32(&set->nstatement, 0);
		set->nrecords = bulkhead_backend_count();
		set->records = (BulkheadClassRecord *)
			((char *) set + MAXALIGN(offsetof(BulkheadRuleSet, rules) +
									 sizeof(BulkheadRule) * set->max_rules));
		for (i = 0; i < set->nrecords; i++)
			pg_atomic_init_u32(&set->records[i].changecount, 0);
		set->nrules = 0;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*---- The rule set (the worker replaces it, loader.c) ----*/

/* Replace the rule set; bump the generation only if it changed */
void
bulkhead_rules_apply(const BulkheadRuleList *list)
{
	BulkheadRuleSet *set = bulkhead_rules;
	Size		bytes = sizeof(BulkheadRule) * list->nrules;

	uint32		nstatement = 0;
	int			i;

	for (i = 0; i < list->nrules; i++)
		if (bulkhead_is_statement_rule(&list->rules[i]))
			nstatement++;
	LWLockAcquire(set->lock, LW_EXCLUSIVE);
	if (set->nrules != list->nrules ||
		(bytes > 0 && memcmp(set->rules, list->rules, bytes) != 0))
	{
		if (bytes > 0)
			memcpy(set->rules, list->rules, bytes);
		set->nrules = list->nrules;
		pg_atomic_write_u32(&set->nstatement, nstatement);
		pg_atomic_fetch_add_u64(&set->generation, 1);
	}
	LWLockRelease(set->lock);
}

/*---- Classification (client backends) ----*/

/* The session's database name and client address, once per session */
static void
learn_session(void)
{
	MemoryContext old;
	char	   *database;
	Datum		addr;

	LOCAL_FCINFO(fcinfo, 0);

	if (session_known)
		return;
	database = get_database_name(MyDatabaseId);
	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	addr = inet_client_addr(fcinfo);	/* NULL over a Unix socket */

	old = MemoryContextSwitchTo(TopMemoryContext);
	session_database = pstrdup(database ? database : "");
	session_addr = fcinfo->isnull ? NULL : (inet *) PG_DETOAST_DATUM_COPY(addr);
	MemoryContextSwitchTo(old);
	session_known = true;
}

static bool
rule_matches(const BulkheadRule *rule, Oid userid, const char *appname)
{
	if (rule->has_database && strcmp(rule->database, session_database) != 0)
		return false;
	if (rule->has_client_addr &&
		(session_addr == NULL ||
		 !DatumGetBool(DirectFunctionCall2(network_subeq,
										   PointerGetDatum(session_addr),
										   PointerGetDatum(&rule->client_addr)))))
		return false;
	if (rule->has_role)
	{
		Oid			roleid = get_role_oid(rule->role, true);

		/* a superuser matches a role only by being its member */
		if (!OidIsValid(roleid) || !is_member_of_role_nosuper(userid, roleid))
			return false;
	}
	if (rule->has_application_name &&
		!DatumGetBool(DirectFunctionCall2Coll(textlike, C_COLLATION_OID,
											  CStringGetTextDatum(appname),
											  CStringGetTextDatum(rule->application_name))))
		return false;
	return true;
}

/* Match the session against the rules and cache the outcome */
static void
evaluate_rules(Oid userid, const char *appname)
{
	BulkheadRuleSet *set = bulkhead_rules;
	BulkheadRule *copy = NULL;
	int			room = 0;
	int			n;
	uint64		generation;
	int			i;

	learn_session();
	cache_valid = false;

	/* copy under the lock, allocating (which may throw) outside it */
	for (;;)
	{
		LWLockAcquire(set->lock, LW_SHARED);
		n = set->nrules;
		if (n <= room)
		{
			if (n > 0)
				memcpy(copy, set->rules, sizeof(BulkheadRule) * n);
			generation = pg_atomic_read_u64(&set->generation);
			LWLockRelease(set->lock);
			break;
		}
		LWLockRelease(set->lock);
		if (copy)
			pfree(copy);
		room = n;
		copy = palloc(sizeof(BulkheadRule) * room);
	}
	pg_atomic_fetch_add_u64(&set->evaluations, 1);

	/*
	 * The first session rule that matches classifies the session; the
	 * statement rules that match it are kept, in order, for its statements.
	 */
	cache_matched = false;
	cache_nstatement = 0;
	cache_version++;
	for (i = 0; i < n; i++)
	{
		bool		statement = bulkhead_is_statement_rule(&copy[i]);

		if (!statement && cache_matched)
			continue;
		if (!rule_matches(&copy[i], userid, appname))
			continue;
		if (statement)
		{
			if (cache_nstatement == cache_statement_room)
			{
				int			more = Max(8, cache_statement_room * 2);

				cache_statement = cache_statement == NULL ?
					MemoryContextAlloc(TopMemoryContext, sizeof(BulkheadRule) * more) :
					repalloc(cache_statement, sizeof(BulkheadRule) * more);
				cache_statement_room = more;
			}
			cache_statement[cache_nstatement++] = copy[i];
			continue;
		}
		cache_matched = true;
		cache_position = copy[i].position;
		strlcpy(cache_workload, copy[i].workload, NAMEDATALEN);
		cache_importance = copy[i].importance;
	}
	if (copy)
		pfree(copy);

	if (cache_appname)
		pfree(cache_appname);
	cache_appname = MemoryContextStrdup(TopMemoryContext, appname);
	cache_generation = generation;
	cache_userid = userid;
	cache_valid = true;
}

/* Evaluate the rules again if what the session matched on may have changed */
static void
refresh_cache(void)
{
	Oid			userid = GetOuterUserId();
	const char *appname = application_name ? application_name : "";

	if (!cache_valid ||
		pg_atomic_read_u64(&bulkhead_rules->generation) != cache_generation ||
		userid != cache_userid ||
		strcmp(appname, cache_appname) != 0)
		evaluate_rules(userid, appname);
}

/* The gate's (not bulkhead_classify()'s): waits carry the rule's importance */
void
bulkhead_rules_carry_importance(const BulkheadClassification *class)
{
	int			importance = BULKHEAD_IMPORTANCE_UNSET;

	if (class->source == BULKHEAD_CLASS_RULE && cache_matched &&
		cache_position == class->position)
		importance = cache_importance;
	else if (class->source == BULKHEAD_CLASS_RULE)
		for (int i = 0; i < cache_nstatement; i++)
			if (cache_statement[i].position == class->position)
				importance = cache_statement[i].importance;
	bulkhead_importance_set_rule(importance);
}

/*
 * Write this backend's record (only its owner ever does), for
 * bulkhead_classify(pid): the gate does at each transaction start, and
 * bulkhead_classify() for the calling session.
 */
void
bulkhead_publish_classification(const BulkheadClassification *class)
{
	BulkheadClassRecord *record;
	const char *workload = class->workload ? class->workload : "";
	int			procno = BULKHEAD_MY_PROCNO;

	if (published && published_source == class->source &&
		published_position == class->position &&
		strcmp(published_workload, workload) == 0)
		return;
	if (procno < 0 || procno >= bulkhead_rules->nrecords)
		return;

	record = &bulkhead_rules->records[procno];
	pg_atomic_fetch_add_u32(&record->changecount, 1);
	pg_write_barrier();
	record->pid = MyProcPid;
	record->source = (uint8) class->source;
	record->position = class->position;
	strlcpy(record->workload, workload, NAMEDATALEN);
	pg_write_barrier();
	pg_atomic_fetch_add_u32(&record->changecount, 1);

	published = true;
	published_source = class->source;
	published_position = class->position;
	strlcpy(published_workload, workload, NAMEDATALEN);
}

/*
 * The workload of this session's next transaction, and why.  A superuser is
 * exempt while bulkhead.exempt_superuser is on (and so never evaluates the
 * rules); a non-empty bulkhead.workload wins over the rules.  The user is
 * the outer one (see the header), for the exemption as for the rules.  out->workload
 * points at storage valid until the next call.  Changes no shared state
 * (bulkhead_publish_classification publishes it).
 */
void
bulkhead_classify_session(BulkheadClassification *out)
{
	out->source = BULKHEAD_CLASS_NONE;
	out->position = 0;
	out->workload = NULL;

	if (bulkhead_exempt_superuser && superuser_arg(GetOuterUserId()))
		out->source = BULKHEAD_CLASS_SUPERUSER;
	else if (bulkhead_gate_workload != NULL && bulkhead_gate_workload[0] != '\0')
	{
		out->source = BULKHEAD_CLASS_SETTING;
		out->workload = bulkhead_gate_workload;
	}
	else
	{
		refresh_cache();
		if (cache_matched)
		{
			out->source = BULKHEAD_CLASS_RULE;
			out->position = cache_position;
			out->workload = cache_workload;
		}
	}
}

/*
 * The statement rules that match this session (see rules.h).  With none in
 * the set, one atomic read; else the session's copy, checked as the
 * classification is (the rules' generation, the user, application_name).
 * A superuser exempt from classification is exempt from them too.
 */
const BulkheadRule *
bulkhead_statement_rules(int *n)
{
	*n = 0;
	if (likely(pg_atomic_read_u32(&bulkhead_rules->nstatement) == 0))
		return NULL;
	if (bulkhead_exempt_superuser && superuser_arg(GetOuterUserId()))
		return NULL;
	refresh_cache();
	*n = cache_nstatement;
	return cache_statement;
}

/* Which evaluation of this session's rules the last call's answer is */
uint64
bulkhead_statement_rules_version(void)
{
	return cache_version;
}

/*---- SQL functions ----*/

const char *
bulkhead_class_source_name(BulkheadClassSource source)
{
	switch (source)
	{
		case BULKHEAD_CLASS_SETTING:
			return "setting";
		case BULKHEAD_CLASS_RULE:
			return "rule";
		case BULKHEAD_CLASS_SUPERUSER:
			return "superuser";
		case BULKHEAD_CLASS_NONE:
			break;
	}
	return "none";
}

/*
 * A (workload, source, rule_position[, memory_requested, memory_source])
 * row; source NULL: all NULL.  memory_requested (1.4; < 0: NULL) and
 * memory_source (1.5) of bulkhead_classify(query) fit older installs' rows.
 */
Datum
bulkhead_classification_row(FunctionCallInfo fcinfo, const char *workload,
							const char *source, int32 position, bool has_position,
							int64 memory_requested, const char *memory_source)
{
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {true, true, true, true, true};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (source != NULL)
	{
		if (workload != NULL && workload[0] != '\0')
		{
			values[0] = CStringGetTextDatum(workload);
			nulls[0] = false;
		}
		values[1] = CStringGetTextDatum(source);
		nulls[1] = false;
		values[2] = Int32GetDatum(position);
		nulls[2] = !has_position;
		values[3] = Int64GetDatum(memory_requested);
		nulls[3] = memory_requested < 0;
		nulls[4] = memory_source == NULL || tupdesc->natts < 5;
		if (!nulls[4])
			values[4] = CStringGetTextDatum(memory_source);
	}
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/* bulkhead_classify(): the calling session's next transaction */
Datum
bulkhead_classify(PG_FUNCTION_ARGS)
{
	BulkheadClassification class;

	bulkhead_check_loaded();
	bulkhead_classify_session(&class);
	bulkhead_publish_classification(&class);
	return bulkhead_classification_row(fcinfo, class.workload, bulkhead_class_source_name(class.source),
							  class.position,
							  class.source == BULKHEAD_CLASS_RULE, -1, NULL);
}

/*
 * bulkhead_classify(pid): what another backend published at its last
 * transaction start (or its last bulkhead_classify()); all NULL for a pid
 * that is no backend or has published nothing.  Superusers only.
 */
Datum
bulkhead_classify_pid(PG_FUNCTION_ARGS)
{
	int32		pid = PG_GETARG_INT32(0);
	PGPROC	   *proc;
	BulkheadClassRecord *record;
	int32		record_pid;
	int32		position;
	uint8		source;
	char		workload[NAMEDATALEN];
	int			procno;

	bulkhead_check_loaded();
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to see the classification of another session"),
				 errdetail("Only superusers may call bulkhead_classify(pid)."),
				 errhint("Call bulkhead_classify() without arguments for your own session.")));

	proc = BackendPidGetProc(pid);
	procno = proc ? BULKHEAD_PROCNO(proc) : -1;
	if (procno < 0 || procno >= bulkhead_rules->nrecords)
		return bulkhead_classification_row(fcinfo, NULL, NULL, 0, false, -1, NULL);

	record = &bulkhead_rules->records[procno];
	for (;;)
	{
		uint32		before = pg_atomic_read_u32(&record->changecount);
		uint32		after;

		pg_read_barrier();
		record_pid = record->pid;
		source = record->source;
		position = record->position;
		memcpy(workload, record->workload, NAMEDATALEN);
		pg_read_barrier();
		after = pg_atomic_read_u32(&record->changecount);
		if (before == after && (before & 1) == 0)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	workload[NAMEDATALEN - 1] = '\0';

	if (record_pid != pid)
		return bulkhead_classification_row(fcinfo, NULL, NULL, 0, false, -1, NULL);
	return bulkhead_classification_row(fcinfo, workload,
									   bulkhead_class_source_name((BulkheadClassSource) source),
									   position, source == BULKHEAD_CLASS_RULE, -1, NULL);
}

/* How many rule evaluations all backends have made since the start */
Datum
bulkhead_rule_evaluations(PG_FUNCTION_ARGS)
{
	bulkhead_check_loaded();
	PG_RETURN_INT64((int64) pg_atomic_read_u64(&bulkhead_rules->evaluations));
}
