/*-------------------------------------------------------------------------
 *
 * capsparse.c
 *	  Lanes that cap settings (1.3): a workload's settings, 'name=value'
 *	  entries as pg_db_role_setting.setconfig has them, parsed and checked
 *	  by PostgreSQL's own verdict on each value: the table's check
 *	  (bulkhead_check_settings, 22023 with PostgreSQL's message as detail)
 *	  and the worker's load (a bad entry warned about and left out).
 *
 * Owns no state.  Called by tables.c (the load) and the table's check;
 * calls caps.c (the settings' names and kinds).
 *
 *-------------------------------------------------------------------------
 */
#include "guards/capsparse.h"

#include <ctype.h>

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"

PG_FUNCTION_INFO_V1(bulkhead_check_settings);

/*---- Parsing and checking 'name=value' ----*/

/* Copy [from, to) without surrounding blanks into buf (size bytes) */
static void
trimmed(const char *from, const char *to, char *buf, Size size)
{
	while (from < to && isspace((unsigned char) *from))
		from++;
	while (to > from && isspace((unsigned char) to[-1]))
		to--;
	strlcpy(buf, from, Min(size, (Size) (to - from) + 1));
}

/*
 * PostgreSQL's own verdict on value for setting name, without changing
 * anything: NULL if it takes it, else its message.  The check cannot have
 * changed any state before it threw (changeVal false, a setting that
 * exists), so the error is simply discarded.
 */
static char *
refusal(const char *name, const char *value)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *volatile message = NULL;

	PG_TRY();
	{
		(void) set_config_option(name, value, PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_SET, false, ERROR, false);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		message = edata->message ? pstrdup(edata->message) : pstrdup("invalid value");
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return message;
}

#define REPORT_SETTING(elevel, entry, workload, detail) \
	ereport(elevel, \
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE), \
			 errmsg("invalid setting \"%s\" for workload \"%s\"", entry, workload), \
			 detail))

/*
 * One entry 'name=value' into caps (and text); false when it is reported
 * (at an elevel below ERROR) and left out.  seen: the settings met so far.
 */
static bool
parse_entry(const char *entry, const char *workload, int elevel,
			BulkheadCaps *caps, char written[][BULKHEAD_CAP_TEXTLEN], uint8 *seen)
{
	const char *eq = strchr(entry, '=');
	char		name[NAMEDATALEN];
	char		value[256];
	char	   *message;
	double		v = 0;
	int			i;

	if (eq == NULL)
	{
		REPORT_SETTING(elevel, entry, workload,
					   errdetail("A setting is written name=value."));
		return false;
	}
	trimmed(entry, eq, name, sizeof(name));
	for (i = 0; name[i]; i++)
		name[i] = pg_ascii_tolower((unsigned char) name[i]);
	for (i = 0; i < BULKHEAD_NUM_CAPS; i++)
		if (strcmp(name, bulkhead_cap_name(i)) == 0)
			break;
	if (i == BULKHEAD_NUM_CAPS)
	{
		REPORT_SETTING(elevel, entry, workload,
					   errdetail("A lane caps only work_mem, hash_mem_multiplier, maintenance_work_mem, temp_file_limit, max_parallel_workers_per_gather, max_parallel_maintenance_workers and jit."));
		return false;
	}
	if (*seen & (1 << i))
	{
		REPORT_SETTING(elevel, entry, workload,
					   errdetail("Setting \"%s\" is given more than once.", name));
		return false;
	}
	trimmed(eq + 1, eq + 1 + strlen(eq + 1), value, sizeof(value));
	if (strlen(value) >= BULKHEAD_CAP_TEXTLEN)
	{
		REPORT_SETTING(elevel, entry, workload,
					   errdetail("A value has at most %d bytes.", BULKHEAD_CAP_TEXTLEN - 1));
		return false;
	}
	message = refusal(name, value);
	if (message != NULL)
	{
		REPORT_SETTING(elevel, entry, workload, errdetail("%s", message));
		return false;
	}

	/* taken by the setting: its value in its base unit */
	if (bulkhead_cap_kind(i) == CAP_INT)
	{
		int			n = 0;

		(void) parse_int(value, &n, GetConfigOptionFlags(name, false), NULL);
		v = n;
	}
	else if (bulkhead_cap_kind(i) == CAP_REAL)
		(void) parse_real(value, &v, GetConfigOptionFlags(name, false), NULL);
	else
	{
		bool		b = true;

		(void) parse_bool(value, &b);
		v = b ? 1 : 0;
	}
	*seen |= 1 << i;
	if (written != NULL)
		strlcpy(written[i], value, BULKHEAD_CAP_TEXTLEN);
	/* no limit (temp_file_limit = -1) and jit = on cap nothing */
	if ((i == BULKHEAD_CAP_TEMP_FILE_LIMIT && v < 0) ||
		(i == BULKHEAD_CAP_JIT && v > 0))
		return true;
	caps->mask |= 1 << i;
	caps->value[i] = v;
	return true;
}

void
bulkhead_caps_parse(ArrayType *settings, const char *workload, int elevel,
					BulkheadCaps *caps, char written[][BULKHEAD_CAP_TEXTLEN])
{
	Datum	   *elems;
	bool	   *nulls;
	uint8		seen = 0;
	int			n;
	int			i;

	memset(caps, 0, sizeof(BulkheadCaps));
	if (written != NULL)
		memset(written, 0, sizeof(char) * BULKHEAD_NUM_CAPS * BULKHEAD_CAP_TEXTLEN);
	if (settings == NULL)
		return;
	if (ARR_NDIM(settings) > 1)
		ereport(elevel,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings of workload \"%s\" must be a one-dimensional array", workload)));
	deconstruct_array(settings, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	for (i = 0; i < n; i++)
	{
		if (nulls[i])
		{
			ereport(elevel,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("settings of workload \"%s\" must not contain nulls", workload)));
			continue;
		}
		(void) parse_entry(TextDatumGetCString(elems[i]), workload, elevel,
						   caps, written, &seen);
	}
}

/*
 * bulkhead_check_settings(settings text[], workload text): the table's
 * check of a row's settings.  Raises 22023 for an entry a lane cannot
 * take; true otherwise.
 */
Datum
bulkhead_check_settings(PG_FUNCTION_ARGS)
{
	BulkheadCaps caps;
	char	   *workload;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	workload = PG_ARGISNULL(1) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	bulkhead_caps_parse(PG_GETARG_ARRAYTYPE_P(0), workload, ERROR, &caps, NULL);
	PG_RETURN_BOOL(true);
}

