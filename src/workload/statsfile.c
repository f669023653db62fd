/*-------------------------------------------------------------------------
 *
 * statsfile.c
 *	  The workloads' cumulative statistics across a clean restart.
 *
 * As pg_stat_statements' do, they survive a clean restart: the postmaster
 * writes them to pg_stat/bulkhead.stat when it shuts down, and reads (then
 * removes) the file when it creates shared memory.  After a crash there is
 * no file, so they start from zero.  A workload missing from the table at
 * the worker's first load loses them.
 *
 * Both run in the postmaster with nothing else running (at shared-memory
 * creation, and in its on_shmem_exit callback), so they take no lock; the
 * slots are filled through slot.c, their owner.  Called by bulkhead.c.
 *
 *-------------------------------------------------------------------------
 */
#include "workload/statsfile.h"
#include "workload/slot.h"
#include "workload/slotstats.h"

#include "pgstat.h"
#include "storage/fd.h"

#define STATS_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/bulkhead.stat"
#define STATS_FILE_TMP	STATS_FILE ".tmp"
#define STATS_MAGIC		0x42484b31	/* "BHK1" */

/* File layout: magic, sizeof(BulkheadStats), count, then count records */
typedef struct SavedStats
{
	char		name[NAMEDATALEN];
	BulkheadStats stats;
} SavedStats;

/*
 * on_shmem_exit callback of the postmaster: write every workload's figures.
 * Nothing else runs by then, so no lock is needed.
 */
void
bulkhead_statsfile_save(int code, Datum arg)
{
	BulkheadShared *shared = bulkhead_shared;
	uint32		header[3];
	FILE	   *file;
	int			i;

	/* after a crash, the figures are discarded */
	if (code != 0 || shared == NULL)
		return;

	file = AllocateFile(STATS_FILE_TMP, PG_BINARY_W);
	if (file == NULL)
		goto error;
	header[0] = STATS_MAGIC;
	header[1] = sizeof(BulkheadStats);
	header[2] = 0;
	for (i = 0; i < shared->nslots; i++)
		if (shared->slots[i].in_use && shared->slots[i].defined)
			header[2]++;
	if (fwrite(header, sizeof(header), 1, file) != 1)
		goto error;
	for (i = 0; i < shared->nslots; i++)
	{
		BulkheadSlot *slot = &shared->slots[i];
		SavedStats	rec;

		if (!slot->in_use || !slot->defined)
			continue;
		memset(&rec, 0, sizeof(rec));
		strlcpy(rec.name, slot->name, NAMEDATALEN);
		rec.stats = slot->stats;
		if (fwrite(&rec, sizeof(rec), 1, file) != 1)
			goto error;
	}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(STATS_FILE_TMP, STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", STATS_FILE_TMP)));
	if (file)
		FreeFile(file);
	unlink(STATS_FILE_TMP);
}

/*
 * At shared-memory creation (postmaster, no concurrency): put the saved
 * figures into slots, undefined until the worker reads the table; then
 * remove the file, so that a crash later on does not bring them back.
 */
void
bulkhead_statsfile_restore(void)
{
	BulkheadShared *shared = bulkhead_shared;
	uint32		header[3];
	FILE	   *file;
	uint32		n;

	file = AllocateFile(STATS_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", STATS_FILE)));
		return;
	}
	/*
	 * A file of an older library (1.0 to 1.3) holds records without the fields
	 * later versions appended to BulkheadStats: they are read as a prefix,
	 * the rest zero.
	 */
	if (fread(header, sizeof(header), 1, file) != 1 ||
		header[0] != STATS_MAGIC ||
		(header[1] != sizeof(BulkheadStats) &&
		 header[1] != offsetof(BulkheadStats, memory_waits) &&
		 header[1] != offsetof(BulkheadStats, over_hold) &&
		 header[1] != offsetof(BulkheadStats, deadlocks)))
	{
		ereport(LOG,
				(errmsg("ignoring bulkhead statistics file \"%s\": it is corrupt or from another version",
						STATS_FILE)));
		header[2] = 0;
	}
	for (n = 0; n < header[2] && (int) n < shared->nslots; n++)
	{
		BulkheadSlot *slot = &shared->slots[n];
		SavedStats	rec;

		memset(&rec, 0, sizeof(rec));
		if (fread(&rec, offsetof(SavedStats, stats) + header[1], 1, file) != 1)
			break;
		rec.name[NAMEDATALEN - 1] = '\0';
		bulkhead_slot_restore(slot, rec.name, &rec.stats);
	}
	FreeFile(file);
	unlink(STATS_FILE);
}
