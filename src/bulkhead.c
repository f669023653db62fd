/*-------------------------------------------------------------------------
 *
 * bulkhead.c
 *	  Module load: each module's settings, the shared-memory hooks and the
 *	  background worker.
 *
 * bulkhead must be loaded through shared_preload_libraries: it needs shared
 * memory, LWLocks and a background worker.  Loaded any other way, it defines
 * nothing and every SQL function reports that it is not preloaded.
 *
 * The top of the module graph: it calls each module's init and nothing
 * calls it.
 *
 *-------------------------------------------------------------------------
 */
#include "bulkhead.h"
#include "worker/adaptive.h"
#include "worker/cpus.h"
#include "permit/permitfuncs.h"
#include "memory/grants.h"
#include "views/history.h"
#include "statement/hooks.h"
#include "permit/local.h"
#include "config/rules.h"
#include "shmem/shmem.h"
#include "record/statements.h"
#include "workload/statsfile.h"
#include "workload/importance.h"
#include "record/waitlog.h"
#include "worker/worker.h"
#include "memory/grantstate.h"
#include "memory/grantqueue.h"
#include "memory/memory.h"
#include "memory/feedback.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#if PG_VERSION_NUM >= 180000
PG_MODULE_MAGIC_EXT(.name = "bulkhead", .version = BULKHEAD_VERSION);
#else
PG_MODULE_MAGIC;
#endif

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
	bulkhead_grants_shmem_request();
	bulkhead_history_shmem_request();
	bulkhead_statements_shmem_request();
	bulkhead_waitlog_shmem_request();
	bulkhead_feedback_shmem_request();
}
#endif

static void
bulkhead_shmem_startup_hook(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	/* statistics saved at the last clean shutdown (none after a crash) */
	if (bulkhead_shmem_startup())
		bulkhead_statsfile_restore();
	bulkhead_rules_shmem_startup();
	bulkhead_grants_shmem_startup();
	/* and the history saved then too (1.4) */
	if (bulkhead_history_shmem_startup())
		bulkhead_history_restore();
	bulkhead_statements_shmem_startup();
	bulkhead_waitlog_shmem_startup();
	/* and grant feedback's notes (1.5) */
	bulkhead_feedback_shmem_startup();

	/* the postmaster saves the statistics and the history when it shuts down */
	if (!IsUnderPostmaster)
	{
		on_shmem_exit(bulkhead_statsfile_save, (Datum) 0);
		on_shmem_exit(bulkhead_history_save, (Datum) 0);
		on_shmem_exit(bulkhead_feedback_save, (Datum) 0);
	}
}

/* Each module defines its settings and installs its hooks and callbacks */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	bulkhead_shmem_init();
	bulkhead_functions_init();
	bulkhead_rules_init();
	bulkhead_importance_init();
	bulkhead_grants_init();
	bulkhead_grants_queue_init();
	bulkhead_memory_settings_init();
	bulkhead_history_init();
	bulkhead_statements_init();
	bulkhead_waitlog_init();
	bulkhead_feedback_init();
	bulkhead_adaptive_init();
	bulkhead_cpus_init();

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
	bulkhead_grants_shmem_request();
	bulkhead_history_shmem_request();
	bulkhead_statements_shmem_request();
	bulkhead_waitlog_shmem_request();
	bulkhead_feedback_shmem_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = bulkhead_shmem_startup_hook;

	bulkhead_register_worker();
	bulkhead_local_init();
	bulkhead_hooks_init();
}
