/*-------------------------------------------------------------------------
 *
 * bulkhead.c
 *	  Module load: GUCs, shared-memory hooks and the background worker.
 *
 * bulkhead must be loaded through shared_preload_libraries: it needs shared
 * memory, LWLocks and a background worker.  Loaded any other way, it defines
 * nothing and every SQL function reports that it is not preloaded.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"
#include "rules.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#if PG_VERSION_NUM >= 180000
PG_MODULE_MAGIC_EXT(.name = "bulkhead", .version = BULKHEAD_VERSION);
#else
PG_MODULE_MAGIC;
#endif

PGDLLEXPORT void _PG_init(void);

/*---- GUC variables ----*/
char	   *bulkhead_database = NULL;
int			bulkhead_max_workloads = 64;
int			bulkhead_max_permits_per_backend = 8;
bool		bulkhead_allow_session_permits = true;

/*---- Saved hook values ----*/
#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

#if PG_VERSION_NUM >= 150000
static void
bulkhead_shmem_request_hook(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	bulkhead_shmem_request();
	bulkhead_rules_shmem_request();
}
#endif

static void
bulkhead_shmem_startup_hook(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	bulkhead_shmem_startup();
	bulkhead_rules_shmem_startup();
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomStringVariable("bulkhead.database",
							   "Database whose bulkhead_workload table defines the workloads.",
							   NULL,
							   &bulkhead_database,
							   "postgres",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("bulkhead.max_workloads",
							"Maximum number of workloads kept in shared memory.",
							NULL,
							&bulkhead_max_workloads,
							64, 1, 10000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bulkhead.max_permits_per_backend",
							"Maximum number of permits one session may hold or await at once.",
							NULL,
							&bulkhead_max_permits_per_backend,
							8, 1, 1000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("bulkhead.allow_session_permits",
							 "Whether this session may take session-scoped permits.",
							 "Turn it off (ALTER ROLE / ALTER DATABASE ... SET) for "
							 "connections made through a transaction-pooling proxy.",
							 &bulkhead_allow_session_permits,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	bulkhead_gate_init();
	bulkhead_adaptive_init();
	bulkhead_rules_init();

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("bulkhead");
#else
	EmitWarningsOnPlaceholders("bulkhead");
#endif

#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = bulkhead_shmem_request_hook;
#else
	bulkhead_shmem_request();
	bulkhead_rules_shmem_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = bulkhead_shmem_startup_hook;

	bulkhead_register_worker();
	bulkhead_register_callbacks();
}
