/*-------------------------------------------------------------------------
 *
 * feedbackfile.c
 *	  Grant feedback's notes across a clean restart: saved to
 *	  pg_stat/bulkhead_feedback.stat by the postmaster at a clean shutdown,
 *	  read back (then removed) when it makes the shared memory, as the
 *	  statistics (statsfile.c) and the history (historyfile.c) are; after a
 *	  crash the notes start empty.
 *
 * File layout: a header of four uint32 (magic, format, the size of a row,
 * the count of rows), then the rows, each a BulkheadFeedbackNotes and the
 * CRC-32C of its bytes.  A file whose header is not this library's is
 * ignored with a LOG line.  Each row is checked on its own: its CRC, then
 * its fields (bulkhead_feedback_notes_sound); a damaged row is dropped with
 * a LOG line and the next one is read.  A short file keeps the rows before
 * its end.
 *
 * At the postmaster's start (restore) and clean shutdown (save) nothing
 * else runs, and no lock is taken.  Owns no state (the table is
 * feedback.c's, which calls here); calls feedbackrule.c (a row's check).
 *
 *-------------------------------------------------------------------------
 */
#include "memory/feedbackfile.h"

#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"

#define FEEDBACK_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/bulkhead_feedback.stat"
#define FEEDBACK_FILE_TMP	FEEDBACK_FILE ".tmp"
#define FEEDBACK_MAGIC		0x42484631	/* "BHF1" */
#define FEEDBACK_FORMAT		1

typedef struct SavedRow
{
	BulkheadFeedbackNotes notes;
	pg_crc32c	crc;
} SavedRow;

static pg_crc32c
row_crc(const BulkheadFeedbackNotes *notes)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, notes, sizeof(BulkheadFeedbackNotes));
	FIN_CRC32C(crc);
	return crc;
}

void
bulkhead_feedbackfile_save(HTAB *table)
{
	uint32		header[4];
	HASH_SEQ_STATUS seq;
	BulkheadFeedbackNotes *e;
	FILE	   *file;

	file = AllocateFile(FEEDBACK_FILE_TMP, PG_BINARY_W);
	if (file == NULL)
		goto error;
	header[0] = FEEDBACK_MAGIC;
	header[1] = FEEDBACK_FORMAT;
	header[2] = sizeof(SavedRow);
	header[3] = (uint32) hash_get_num_entries(table);
	if (fwrite(header, sizeof(header), 1, file) != 1)
		goto error;
	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		SavedRow	row;

		memset(&row, 0, sizeof(row));
		row.notes = *e;
		row.crc = row_crc(&row.notes);
		if (fwrite(&row, sizeof(row), 1, file) != 1)
		{
			hash_seq_term(&seq);
			goto error;
		}
	}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(FEEDBACK_FILE_TMP, FEEDBACK_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", FEEDBACK_FILE_TMP)));
	if (file)
		FreeFile(file);
	unlink(FEEDBACK_FILE_TMP);
}

/* One row read into table; false when it was dropped */
static bool
restore_row(HTAB *table, const SavedRow *row, uint32 n)
{
	BulkheadFeedbackNotes *e;
	bool		found;

	if (row->crc != row_crc(&row->notes) ||
		!bulkhead_feedback_notes_sound(&row->notes))
	{
		ereport(LOG,
				(errmsg("dropping damaged row %u of bulkhead feedback file \"%s\"",
						n + 1, FEEDBACK_FILE)));
		return false;
	}
	e = hash_search(table, &row->notes.key, HASH_ENTER_NULL, &found);
	if (e == NULL || found)
		return false;
	*e = row->notes;
	return true;
}

void
bulkhead_feedbackfile_restore(HTAB *table, int max)
{
	uint32		header[4];
	FILE	   *file;
	uint32		n;
	uint32		kept = 0;

	file = AllocateFile(FEEDBACK_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", FEEDBACK_FILE)));
		return;
	}
	if (fread(header, sizeof(header), 1, file) != 1 ||
		header[0] != FEEDBACK_MAGIC || header[1] != FEEDBACK_FORMAT ||
		header[2] != sizeof(SavedRow))
	{
		ereport(LOG,
				(errmsg("ignoring bulkhead feedback file \"%s\": it is corrupt or from another version",
						FEEDBACK_FILE)));
		header[3] = 0;
	}
	for (n = 0; n < header[3] && kept < (uint32) max; n++)
	{
		SavedRow	row;

		if (fread(&row, sizeof(row), 1, file) != 1)
		{
			ereport(LOG,
					(errmsg("bulkhead feedback file \"%s\" ends after %u of its %u rows",
							FEEDBACK_FILE, n, header[3])));
			break;
		}
		if (restore_row(table, &row, n))
			kept++;
	}
	FreeFile(file);
	unlink(FEEDBACK_FILE);
}
