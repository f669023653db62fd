/*-------------------------------------------------------------------------
 *
 * rules.h
 *	  Classification rules (bulkhead_rule): the rule set in shared memory,
 *	  what the worker calls to replace it, and what the gate calls to find
 *	  the workload of this session's next transaction (rules.c).
 *
 * Shared state and its locks
 * --------------------------
 * BulkheadRuleSet (one per cluster, shmem "bulkhead rules"):
 * - lock (an LWLock of its own, tranche "bulkhead rules") protects nrules
 *   and rules[].  The worker takes it exclusively to replace the set, a
 *   backend shared to copy the set; nothing else is done under it (no
 *   catalog access, no error can be thrown while it is held).
 * - nstatement (atomic) is written by the worker under lock held
 *   exclusively, with rules[]; a backend reads it without the lock, as a
 *   hint that there is no statement rule to look at (generation tells it
 *   when its own copy of them is stale).
 * - generation (atomic) is bumped by the worker, under lock held
 *   exclusively, after rules[] changed; a backend compares it without the
 *   lock to tell whether its cached classification may be stale, and reads
 *   it under the lock together with the copy it classifies with.
 * - evaluations (atomic): how many times any backend matched its session
 *   against the rules (bulkhead_rule_evaluations()).
 * - max_rules is set at start and never changes.
 *
 * BulkheadClassRecord (one per PGPROC, after the rule array): what the
 * backend using that PGPROC publishes about its own classification, for
 * bulkhead_classify(pid).  Only its owner writes it, with no lock: it
 * makes changecount odd, writes, and makes it even again (write barriers
 * between); a reader copies the record between two reads of an even, equal
 * changecount (read barriers between), and retries otherwise, as core does
 * for PgBackendStatus.  pid says which backend wrote it (a record left by
 * an ended backend names another pid).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_RULES_H
#define BULKHEAD_RULES_H

#include "shmem/shmem.h"

#include "fmgr.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/inet.h"

/*
 * The kinds of statement a statement rule's command names (1.3), one bit
 * each: a plannable statement's commandType, or any utility.
 */
#define BULKHEAD_CMD_SELECT		0x01
#define BULKHEAD_CMD_INSERT		0x02
#define BULKHEAD_CMD_UPDATE		0x04
#define BULKHEAD_CMD_DELETE		0x08
#define BULKHEAD_CMD_MERGE		0x10
#define BULKHEAD_CMD_UTILITY	0x20

/*
 * One row of bulkhead_rule; a "has_" flag false means NULL (any).  A rule
 * with min_cost or command (1.3) is a statement rule: it chooses the lane
 * of a statement, by its kind and planned cost, among the sessions its
 * other columns match.
 */
typedef struct BulkheadRule
{
	int32		position;
	bool		has_role;
	bool		has_database;
	bool		has_application_name;
	bool		has_client_addr;
	bool		has_min_cost;
	uint8		commands;		/* BULKHEAD_CMD_* bits; 0: any (NULL) */
	int8		importance;		/* 1.5: of the waits of what it classifies
								 * (BulkheadImportance); -1: NULL, the
								 * session's bulkhead.importance */
	double		min_cost;
	char		role[NAMEDATALEN];
	char		database[NAMEDATALEN];
	char		application_name[NAMEDATALEN];	/* a LIKE pattern */
	char		workload[NAMEDATALEN];
	inet		client_addr;	/* a 4-byte-header varlena, fits as is */
} BulkheadRule;

/* What one backend publishes about itself; see the header */
typedef struct BulkheadClassRecord
{
	pg_atomic_uint32 changecount;	/* odd while the owner writes */
	int32		pid;			/* the owner, 0 before any */
	int32		position;
	uint8		source;			/* BulkheadClassSource */
	char		workload[NAMEDATALEN];
} BulkheadClassRecord;

typedef struct BulkheadRuleSet
{
	LWLock	   *lock;
	int			max_rules;		/* bulkhead.max_rules */
	pg_atomic_uint64 generation;
	pg_atomic_uint32 nstatement;	/* statement rules among rules[]: 0 lets a
									 * statement skip them without a lock */
	pg_atomic_uint64 evaluations;
	int			nrecords;		/* PGPROCs covered by records */
	BulkheadClassRecord *records;	/* each written by its owner only */
	int			nrules;			/* lock */
	BulkheadRule rules[FLEXIBLE_ARRAY_MEMBER];	/* lock; position order */
} BulkheadRuleSet;

/* Why a session's transactions take the workload they take */
typedef enum BulkheadClassSource
{
	BULKHEAD_CLASS_NONE = 0,	/* not gated */
	BULKHEAD_CLASS_SETTING,		/* bulkhead.workload */
	BULKHEAD_CLASS_RULE,		/* a row of bulkhead_rule */
	BULKHEAD_CLASS_SUPERUSER	/* exempt by bulkhead.exempt_superuser */
} BulkheadClassSource;

typedef struct BulkheadClassification
{
	BulkheadClassSource source;
	int32		position;		/* the rule's, for BULKHEAD_CLASS_RULE */
	const char *workload;		/* NULL unless SETTING or RULE */
} BulkheadClassification;

/* The rows the worker read, in its memory */
typedef struct BulkheadRuleList
{
	int			nrules;
	BulkheadRule *rules;
} BulkheadRuleList;

/* GUC variables */
extern int	bulkhead_max_rules;
extern char *bulkhead_gate_workload;	/* bulkhead.workload */
extern bool bulkhead_exempt_superuser;

extern void bulkhead_rules_init(void);
extern void bulkhead_rules_shmem_request(void);
extern void bulkhead_rules_shmem_startup(void);

/* The worker (loader.c): replace the rule set with the rows it read */
extern void bulkhead_rules_apply(const BulkheadRuleList *list);

static inline bool
bulkhead_is_statement_rule(const BulkheadRule *rule)
{
	return rule->has_min_cost || rule->commands != 0;
}

/*
 * The statement rules whose other columns match this session, in position
 * order (this session's copy, valid until the next call); *n = 0 when there
 * are none, or the session is exempt.
 */
extern const BulkheadRule *bulkhead_statement_rules(int *n);
extern uint64 bulkhead_statement_rules_version(void);

/*
 * A backend: the classification of its next transaction, and publishing it
 * (which also sets the importance its waits carry from then on: the
 * rule's, when a rule that sets one classified it; importance.c)
 */
extern void bulkhead_classify_session(BulkheadClassification *out);
extern void bulkhead_publish_classification(const BulkheadClassification *class);
/* The gate's classification: the importance its waits carry (1.5) */
extern void bulkhead_rules_carry_importance(const BulkheadClassification *class);

/* The SQL functions' row, and bulkhead_classify() (lanes.c answers with them) */
extern Datum bulkhead_classification_row(FunctionCallInfo fcinfo,
										 const char *workload,
										 const char *source, int32 position,
										 bool has_position,
										 int64 memory_requested,
										 const char *memory_source);
extern const char *bulkhead_class_source_name(BulkheadClassSource source);

#endif							/* BULKHEAD_RULES_H */
