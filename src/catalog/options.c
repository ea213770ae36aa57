/*-------------------------------------------------------------------------
 *
 * options.c
 *	  The options and settings of sources and queries: parsed from their
 *	  jsonb and intervals, checked at creation with the same code that
 *	  reads them later, so that what creation accepts is what runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "options.h"

/*
 * interval_to_usec
 *		A duration setting (watermark delay, trigger interval, idle timeout)
 *		as microseconds; months have no fixed length and are refused.
 */
int64
interval_to_usec(const Interval *iv, const char *what)
{
	int64		usec;

	if (iv->month != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not contain months or years", what),
				 errhint("Use days instead, for example interval '30 days'.")));
	if (pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &usec) ||
		pg_add_s64_overflow(usec, iv->time, &usec))
		ereport(ERROR,
				(errcode(ERRCODE_INTERVAL_FIELD_OVERFLOW),
				 errmsg("%s is out of range", what),
				 errhint("Durations of streamwin's settings are microseconds in a bigint, about 292,000 years.")));
	return usec;
}

/*
 * A duration setting at most max_days long (see MAX_TRIGGER_DAYS and
 * MAX_EVENT_TIME_DAYS).
 */
void
check_duration_at_most(const Interval *iv, const char *what, int max_days, const char *hint)
{
	if (interval_to_usec(iv, what) > (int64) max_days * USECS_PER_DAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at most %d days", what, max_days),
				 errhint("%s", hint)));
}

/* Option "metadata": {"column": "partition" | "offset" | "timestamp" | "key" | "headers", ...} */
static void
parse_metadata_option(SourceInfo *src, Jsonb *options)
{
	static const char *const kinds[] = {"partition", "offset", "timestamp", "key", "headers", NULL};
	JsonbValue *v = option_value(options, "metadata");
	JsonbIterator *it;
	JsonbValue	item;
	JsonbIteratorToken tok;
	char	   *column = NULL;
	int			cap = 4;

	if (v == NULL)
		return;
	if (!OPTION_IS_OBJECT(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"metadata\" must be an object naming columns"),
				 errhint("For example: {\"metadata\": {\"kafka_ts\": \"timestamp\", \"kafka_key\": \"key\"}}.")));
	src->metadata_columns = palloc(sizeof(char *) * cap);
	src->metadata_kinds = palloc(sizeof(SourceMetadata) * cap);
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
	{
		int			kind = -1;

		if (tok == WJB_KEY)
		{
			column = pnstrdup(item.val.string.val, item.val.string.len);
			/* (a longer name would be cut in the source's view, and not found) */
			if (item.val.string.len >= NAMEDATALEN)
				ereport(ERROR,
						(errcode(ERRCODE_NAME_TOO_LONG),
						 errmsg("option \"metadata\" names column \"%s\", longer than %d bytes",
								column, NAMEDATALEN - 1),
						 errhint("Give the column a shorter name.")));
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (item.type == jbvString)
			for (int i = 0; kinds[i] != NULL; i++)
				if (strlen(kinds[i]) == (size_t) item.val.string.len &&
					strncmp(kinds[i], item.val.string.val, item.val.string.len) == 0)
					kind = i;
		if (kind < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"metadata\" gives column \"%s\" an unknown kind of message metadata", column),
					 errhint("Use \"partition\", \"offset\", \"timestamp\", \"key\" or \"headers\".")));
		if (src->nmetadata == cap)
		{
			cap *= 2;
			src->metadata_columns = repalloc(src->metadata_columns, sizeof(char *) * cap);
			src->metadata_kinds = repalloc(src->metadata_kinds, sizeof(SourceMetadata) * cap);
		}
		src->metadata_columns[src->nmetadata] = column;
		src->metadata_kinds[src->nmetadata] = (SourceMetadata) (SOURCE_META_PARTITION + kind);
		src->nmetadata++;
	}
}

static void
invalid_timezone(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for option \"timezone\": \"%s\"", name),
			 errdetail("Timestamps without a zone offset in the messages are read in this zone."),
			 errhint("Use a name from pg_timezone_names, for example \"UTC\" or \"Europe/Berlin\".")));
}


/*
 * source_timezone_name
 *		At a source's creation: the zone name of option "timezone" as
 *		pg_timezone_names spells it (matched without regard to case).  A
 *		POSIX zone specification such as "9" or "XYZ-3" is refused: its
 *		offset counts west of Greenwich, the opposite of ISO 8601 and of
 *		SET TIME ZONE 9.  Reads every zone file: for creation only.
 */
const char *
source_timezone_name(const char *name)
{
	pg_tzenum  *dir = pg_tzenumerate_start();
	pg_tz	   *tz;
	const char *found = NULL;

	while (found == NULL && (tz = pg_tzenumerate_next(dir)) != NULL)
		if (pg_strcasecmp(pg_get_timezone_name(tz), name) == 0)
			found = pstrdup(pg_get_timezone_name(tz));
	pg_tzenumerate_end(dir);
	if (found == NULL)
		invalid_timezone(name);
	return found;
}

/* streamwin.max_records_per_batch: a source's default max_records_per_batch */
int			streamwin_default_max_records = 100000;

void
parse_source_options(SourceInfo *src, Jsonb *options)
{
	char	   *start = jsonb_get_text(options, "starting_offsets");
	char	   *maxrec = jsonb_get_text(options, "max_records_per_batch");
	char	   *timezone = jsonb_get_text(options, "timezone");

	src->starting_offset = START_EARLIEST;
	if (start != NULL)
	{
		if (strcmp(start, "earliest") == 0)
			src->starting_offset = START_EARLIEST;
		else if (strcmp(start, "latest") == 0)
			src->starting_offset = START_LATEST;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"starting_offsets\": \"%s\"", start),
					 errhint("Use \"earliest\" or \"latest\".")));
	}

	src->max_records_option = 0;
	if (maxrec != NULL)
	{
		char	   *end;
		long		n = strtol(maxrec, &end, 10);

		if (*end != '\0' || n < 1 || n > 10000000)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"max_records_per_batch\": \"%s\"", maxrec),
					 errhint("Use an integer between 1 and 10000000.")));
		src->max_records_option = (int32) n;
	}

	/*
	 * As recorded: source_timezone_name checked it at creation (an update
	 * may have recorded the zone of a session, whatever it was).  Not
	 * checked again here: a zone the server's time zone data no longer
	 * has would make the source impossible even to drop; a batch, whose
	 * TimeZone it becomes, fails saying which.
	 */
	src->timezone = timezone != NULL ? timezone : SOURCE_DEFAULT_TIMEZONE;

	src->nmetadata = 0;
	if (options == NULL || !JB_ROOT_IS_OBJECT(options))
		return;
	parse_metadata_option(src, options);
}

/*
 * check_trigger_interval / check_idle_timeout
 *		create_query's and alter_query's checks of their settings.
 */
void
check_trigger_interval(const Interval *iv)
{
	if (interval_to_usec(iv, "trigger_interval") < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trigger_interval must not be negative"),
				 errhint("Use '0' to run a batch as soon as data arrives.")));
	/* (a worker waits for it in milliseconds, an int) */
	check_duration_at_most(iv, "trigger_interval", MAX_TRIGGER_DAYS,
						   "A query run less often than that: create it with start => false and run its "
						   "batches from a scheduler (pg_cron, say) with streamwin.run_available().");
}

void
check_idle_timeout(const Interval *iv)
{
	if (interval_to_usec(iv, "idle_timeout") <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idle_timeout must be positive"),
				 errhint("For example, interval '30 seconds'.")));
	check_duration_at_most(iv, "idle_timeout", MAX_EVENT_TIME_DAYS,
						   "For example, interval '30 seconds'.");
}

/*
 * validate_query_options
 *		create_query's options: known keys, and valid values.
 */
void
validate_query_options(Jsonb *options)
{
	static const char *const valid[] = {"idle_timeout", "capture_late_rows", "event_time",
	"dedup_without_watermark", "join_state_unbounded", NULL};
	char	   *idle;

	jsonb_check_keys(options, valid, "query");
	{
		const char *bools[] = {"capture_late_rows", "dedup_without_watermark", "join_state_unbounded"};

		for (int i = 0; i < (int) lengthof(bools); i++)
		{
			char	   *v = jsonb_get_text(options, bools[i]);

			if (v != NULL && strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"%s\" must be true or false", bools[i]),
						 errhint("For example: {\"%s\": true}.", bools[i])));
		}
	}
	idle = jsonb_get_text(options, "idle_timeout");
	if (idle != NULL)
	{
		MemoryContext cxt = CurrentMemoryContext;
		Datum		value = (Datum) 0;

		/*
		 * A malformed value is named as the option's.  The error caught is
		 * replaced by another at once, which aborts the transaction as the
		 * first would have.
		 */
		PG_TRY();
		{
			value = DirectFunctionCall3(interval_in, CStringGetDatum(idle),
										ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		}
		PG_CATCH();
		{
			ErrorData  *e;

			MemoryContextSwitchTo(cxt);
			e = CopyErrorData();
			FlushErrorState();
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"idle_timeout\" is not an interval: \"%s\"", idle),
					 errdetail("%s", e->message),
					 errhint("For example: {\"idle_timeout\": \"30 seconds\"}.")));
		}
		PG_END_TRY();
		check_idle_timeout(DatumGetIntervalP(value));
	}
}
