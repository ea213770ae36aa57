/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Reading streamwin's catalog tables into SourceInfo / QueryInfo, and
 *	  the role switch used for catalog bookkeeping.
 *
 * The catalog tables are not writable (and source_catalog not readable) by
 * ordinary roles: sources may hold credentials, and offsets must only move
 * through a batch.  streamwin's C functions therefore switch to the
 * extension's owner for the few statements that touch the catalog, and
 * run everything that touches user data (source rows, joined tables,
 * result and state tables) as the calling role or the query's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "access/table.h"
#include "access/genam.h"

#include "streamwin.h"
#include "source.h"
#include "kafka_source.h"

static Oid	extension_owner_cache = InvalidOid;
static bool catalog_version_checked = false;

/*
 * Read the streamwin row of pg_extension: its owner, and (if version is not
 * NULL) its installed version, palloc'd.
 */
static Oid
read_extension(char **version)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("streamwin"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"streamwin\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION streamwin.")));
	owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	if (version)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		*version = isnull ? pstrdup("?") : TextDatumGetCString(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/*
 * The owner of the streamwin extension in this database.  Cached per
 * backend: an extension's owner changes only through ALTER EXTENSION ...
 * OWNER, which streamwin does not support.
 */
static Oid
extension_owner(void)
{
	if (!OidIsValid(extension_owner_cache))
		extension_owner_cache = read_extension(NULL);
	return extension_owner_cache;
}

/*
 * The library reads and writes the catalog of one extension version.  A
 * package upgrade replaces the library at once, while each database's
 * catalog stays at its old version until ALTER EXTENSION streamwin UPDATE:
 * until then, say so, instead of failing on a column that is not there.
 * Once it matches it stays so for the life of the backend (a downgrade is
 * not possible).
 */
static void
check_catalog_version(void)
{
	char	   *version;

	if (catalog_version_checked)
		return;
	(void) read_extension(&version);
	if (strcmp(version, STREAMWIN_CATALOG_VERSION) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("streamwin's catalog in this database is at version %s, but its library needs version %s",
						version, STREAMWIN_CATALOG_VERSION),
				 errdetail("The streamwin library was upgraded; the extension's catalog was not."),
				 errhint("Run ALTER EXTENSION streamwin UPDATE in this database.")));
	catalog_version_checked = true;
}

/*
 * catalog_enter / catalog_leave
 *		Run the statements between them as the extension owner.  An error in
 *		between needs no catalog_leave: transaction (and subtransaction)
 *		abort restores the user id.
 */
void
catalog_enter(CatalogRole *save)
{
	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	SetUserIdAndSecContext(extension_owner(),
						   save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
catalog_leave(CatalogRole *save)
{
	SetUserIdAndSecContext(save->saved_userid, save->saved_sec_context);
}

/*
 * catalog_check_owner
 *		Only the owner of a source or query (or a member of the owning role,
 *		or a superuser) may change it.
 */
void
catalog_check_owner(Oid owner, const char *kind, const char *name)
{
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of %s \"%s\"", kind, name)));
}

/*
 * interval_to_usec
 *		A duration setting (watermark delay, trigger interval, idle timeout)
 *		as microseconds; months have no fixed length and are refused.
 */
int64
interval_to_usec(const Interval *iv, const char *what)
{
	if (iv->month != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not contain months or years", what),
				 errhint("Use days instead, for example interval '30 days'.")));
	return iv->time + (int64) iv->day * USECS_PER_DAY;
}

/*
 * jsonb_get_text
 *		The text of a top-level key of a jsonb object (strings unquoted), or
 *		NULL when absent or JSON null.
 */
char *
jsonb_get_text(Jsonb *jb, const char *key)
{
	JsonbValue	k;
	JsonbValue *v;

	if (jb == NULL || !JB_ROOT_IS_OBJECT(jb))
		return NULL;
	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	v = findJsonbValueFromContainer(&jb->root, JB_FOBJECT, &k);
	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type == jbvNumeric)
		return DatumGetCString(DirectFunctionCall1(numeric_out,
												   NumericGetDatum(v->val.numeric)));
	if (v->type == jbvBool)
		return pstrdup(v->val.boolean ? "true" : "false");
	/* a container: its JSON text */
	return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
}

/*
 * catalog_lock_query
 *		Wait for, then hold until the end of the transaction, the lock that
 *		lets one batch of the query run at a time (and that drop_query and
 *		reset_query take to wait for a batch in progress).  An advisory lock
 *		rather than a row lock on the query's catalog row: a row lock needs a
 *		transaction id and writes WAL, so every empty batch of every idle
 *		query, ten a second on a 100 ms trigger, cost a transaction id, a
 *		WAL record and a commit to flush.
 */
void
catalog_lock_query(int32 query_id)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, STREAMWIN_LOCK_SPACE, (uint32) query_id, 5);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * catalog_exec
 *		Run one of streamwin's own statements on its catalog, as the
 *		extension owner, with a plan prepared once per backend and kept: the
 *		per-batch bookkeeping (locking the query, offsets, progress) would
 *		otherwise be parsed and planned again for every batch.  `sql` must be
 *		a constant text, which identifies the plan.  Errors if the statement
 *		fails; returns the SPI result code.  Must be called inside SPI.
 */
typedef struct CatalogPlan
{
	const char *sql;
	SPIPlanPtr	plan;
	struct CatalogPlan *next;
} CatalogPlan;

static CatalogPlan *catalog_plans = NULL;

int
catalog_exec(const char *sql, int nargs, Oid *types, Datum *args, const char *nulls,
			 long count)
{
	CatalogPlan *p;
	CatalogRole role;
	int			rc;

	for (p = catalog_plans; p != NULL; p = p->next)
		if (p->sql == sql || strcmp(p->sql, sql) == 0)
			break;
	if (p == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

		if (plan == NULL)
			elog(ERROR, "streamwin: could not prepare \"%s\": %s", sql,
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		p = MemoryContextAlloc(TopMemoryContext, sizeof(CatalogPlan));
		p->sql = MemoryContextStrdup(TopMemoryContext, sql);
		p->plan = plan;
		p->next = catalog_plans;
		catalog_plans = p;
	}
	catalog_enter(&role);
	rc = SPI_execute_plan(p->plan, args, nulls, false, count);
	catalog_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin catalog statement failed (%s): %s", SPI_result_code_string(rc), sql);
	return rc;
}

/* --- reading rows ------------------------------------------------------ */

static char *
spi_text(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

static Datum
spi_datum(HeapTuple tup, TupleDesc desc, int col, bool *isnull)
{
	return SPI_getbinval(tup, desc, col, isnull);
}

/*
 * Run a catalog lookup returning at most one row, as the extension owner.
 * Not read-only: run_available runs many batches in one statement, and a
 * read-only SPI call would reuse the statement's snapshot, blind to what the
 * previous batch wrote.
 * The row is copied into the caller's memory context.  Returns NULL when no
 * row matched.
 */
static HeapTuple
catalog_lookup(const char *sql, Oid argtype, Datum arg, TupleDesc *desc_out)
{
	MemoryContext caller = CurrentMemoryContext;
	HeapTuple	result = NULL;

	/* every source and query is read here first */
	check_catalog_version();
	SPI_connect();
	catalog_exec(sql, 1, &argtype, &arg, NULL, 2);
	if (SPI_processed > 1)
		elog(ERROR, "streamwin catalog lookup returned " UINT64_FORMAT " rows",
			 (uint64) SPI_processed);
	if (SPI_processed == 1)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);

		result = heap_copytuple(SPI_tuptable->vals[0]);
		*desc_out = CreateTupleDescCopy(SPI_tuptable->tupdesc);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return result;
}

/* The value of source option name, or NULL if absent or JSON null. */
static JsonbValue *
option_value(Jsonb *options, const char *name)
{
	JsonbValue	k;
	JsonbValue *v;

	k.type = jbvString;
	k.val.string.val = (char *) name;
	k.val.string.len = strlen(name);
	v = findJsonbValueFromContainer(&options->root, JB_FOBJECT, &k);
	return v != NULL && v->type != jbvNull ? v : NULL;
}

/* Is an option's value a JSON object (else an array or a scalar)? */
#define OPTION_IS_OBJECT(v) ((v)->type == jbvBinary && JsonContainerIsObject((v)->val.binary.data))

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

void
parse_source_options(SourceInfo *src, Jsonb *options)
{
	char	   *start = jsonb_get_text(options, "starting_offsets");
	char	   *maxrec = jsonb_get_text(options, "max_records_per_batch");
	JsonbValue *v;

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

	src->max_records_per_batch = streamwin_default_max_records;
	if (maxrec != NULL)
	{
		char	   *end;
		long		n = strtol(maxrec, &end, 10);

		if (*end != '\0' || n < 1 || n > 10000000)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"max_records_per_batch\": \"%s\"", maxrec),
					 errhint("Use an integer between 1 and 10000000.")));
		src->max_records_per_batch = (int32) n;
	}

	src->npartitions = 0;
	src->partitions = NULL;
	src->nkafka_props = 0;
	src->nmetadata = 0;
	if (options == NULL || !JB_ROOT_IS_OBJECT(options))
		return;
	parse_metadata_option(src, options);

	v = option_value(options, "partitions");
	if (v != NULL)
	{
		JsonbIterator *it;
		JsonbValue	elem;
		JsonbIteratorToken tok;
		int			cap = 16;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"partitions\" must be an array of partition numbers"),
					 errhint("For example: {\"partitions\": [0, 1, 2]}.")));
		src->partitions = palloc(sizeof(int32) * cap);
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
		{
			int64		p;

			if (tok != WJB_ELEM)
				continue;
			if (elem.type != jbvNumeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"partitions\" must be an array of partition numbers")));
			p = DatumGetInt64(DirectFunctionCall1(numeric_int8,
												  NumericGetDatum(elem.val.numeric)));
			if (p < 0 || p > PG_INT32_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("partition number %lld is out of range", (long long) p)));
			if (src->npartitions == cap)
			{
				cap *= 2;
				src->partitions = repalloc(src->partitions, sizeof(int32) * cap);
			}
			src->partitions[src->npartitions++] = (int32) p;
		}
		if (src->npartitions == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"partitions\" must not be empty"),
					 errhint("Leave the option out to read every partition.")));
	}

	v = option_value(options, "kafka");
	if (v != NULL)
	{
		JsonbIterator *it;
		JsonbValue	item;
		JsonbIteratorToken tok;
		int			cap = 8;
		char	   *key = NULL;

		if (!OPTION_IS_OBJECT(v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"kafka\" must be an object of librdkafka properties"),
					 errhint("For example: {\"kafka\": {\"fetch.max.bytes\": \"1048576\"}}.")));
		src->kafka_keys = palloc(sizeof(char *) * cap);
		src->kafka_values = palloc(sizeof(char *) * cap);
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
				key = pnstrdup(item.val.string.val, item.val.string.len);
			else if (tok == WJB_VALUE)
			{
				char	   *value;

				if (item.type == jbvString)
					value = pnstrdup(item.val.string.val, item.val.string.len);
				else if (item.type == jbvNumeric)
					value = DatumGetCString(DirectFunctionCall1(numeric_out,
																NumericGetDatum(item.val.numeric)));
				else if (item.type == jbvBool)
					value = pstrdup(item.val.boolean ? "true" : "false");
				else
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("librdkafka property \"%s\" must be a string, number or boolean", key)));
				if (src->nkafka_props == cap)
				{
					cap *= 2;
					src->kafka_keys = repalloc(src->kafka_keys, sizeof(char *) * cap);
					src->kafka_values = repalloc(src->kafka_values, sizeof(char *) * cap);
				}
				src->kafka_keys[src->nkafka_props] = key;
				src->kafka_values[src->nkafka_props] = value;
				src->nkafka_props++;
			}
		}
	}
}

/*
 * jsonb_check_keys
 *		Options are a JSON object whose top-level keys must be among `valid`
 *		(NULL-terminated): unknown keys are refused, so that a typo is not
 *		silently ignored.  `what` names them in messages ("source", "query").
 */
void
jsonb_check_keys(Jsonb *options, const char *const *valid, const char *what)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;
	StringInfoData list;

	if (!JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s options must be a JSON object", what)));
	it = JsonbIteratorInit(&options->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_OBJECT || tok == WJB_BEGIN_ARRAY)
			depth++;
		else if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY)
			depth--;
		else if (tok == WJB_KEY && depth == 1)
		{
			char	   *key = pnstrdup(v.val.string.val, v.val.string.len);
			bool		known = false;

			for (const char *const *k = valid; *k != NULL; k++)
				known = known || strcmp(*k, key) == 0;
			if (known)
				continue;
			initStringInfo(&list);
			for (const char *const *k = valid; *k != NULL; k++)
				appendStringInfo(&list, "%s%s", k == valid ? "" : k[1] ? ", " : " and ", *k);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown %s option \"%s\"", what, key),
					 errhint("Valid options are %s.", list.data)));
		}
	}
}

/*
 * source_options_validate
 *		Check a source's options at creation time, with the same parser the
 *		workers use.
 */
void
source_options_validate(Jsonb *options)
{
	static const char *const valid[] = {"starting_offsets", "max_records_per_batch",
	"partitions", "kafka", "metadata", NULL};
	SourceInfo	tmp;

	jsonb_check_keys(options, valid, "source");
	parse_source_options(&tmp, options);
	/* librdkafka's own checks, and the properties streamwin reserves */
	kafka_validate_properties(tmp.nkafka_props, tmp.kafka_keys, tmp.kafka_values);
}

static SourceInfo *
source_from_row(HeapTuple tup, TupleDesc desc)
{
	SourceInfo *src = palloc0(sizeof(SourceInfo));
	bool		isnull;
	Datum		d;

	src->source_id = DatumGetInt32(spi_datum(tup, desc, 1, &isnull));
	src->name = spi_text(tup, desc, 2);
	src->relation = DatumGetObjectId(spi_datum(tup, desc, 3, &isnull));
	src->brokers = spi_text(tup, desc, 4);
	src->topic = spi_text(tup, desc, 5);
	src->kind = strcmp(spi_text(tup, desc, 9), "table") == 0 ? SOURCE_TABLE : SOURCE_KAFKA;
	if (src->kind == SOURCE_KAFKA)
		src->format = source_format_from_name(spi_text(tup, desc, 6));
	else
	{
		src->source_table = DatumGetObjectId(spi_datum(tup, desc, 10, &isnull));
		src->slot_name = spi_text(tup, desc, 11);
	}
	d = spi_datum(tup, desc, 7, &isnull);
	src->owner = DatumGetObjectId(spi_datum(tup, desc, 8, &isnull));
	parse_source_options(src, isnull ? NULL : DatumGetJsonbP(d));
	return src;
}

#define SOURCE_COLUMNS \
	"SELECT source_id, name, relation, brokers, topic, format, options, owner, kind, " \
	"       source_table, slot_name " \
	"FROM streamwin.source_catalog "

/* Look an object up by name; NULL if missing and missing_ok, else an error. */
static HeapTuple
lookup_by_name(const char *sql, const char *name, bool missing_ok, const char *kind,
			   const char *plural, TupleDesc *desc)
{
	HeapTuple	tup = catalog_lookup(sql, TEXTOID, CStringGetTextDatum(name), desc);

	if (tup == NULL && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s \"%s\" does not exist", kind, name),
				 errhint("See streamwin.%s for the %s of this database.", plural, plural)));
	return tup;
}

SourceInfo *
catalog_get_source(const char *name, bool missing_ok)
{
	TupleDesc	desc;
	HeapTuple	tup = lookup_by_name(SOURCE_COLUMNS "WHERE name = $1", name, missing_ok,
									 "source", "sources", &desc);

	return tup ? source_from_row(tup, desc) : NULL;
}

SourceInfo *
catalog_get_source_by_id(int32 source_id)
{
	TupleDesc	desc;
	HeapTuple	tup = catalog_lookup(SOURCE_COLUMNS "WHERE source_id = $1",
									 INT4OID, Int32GetDatum(source_id), &desc);

	if (tup == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source %d does not exist", source_id)));
	return source_from_row(tup, desc);
}

SourceInfo *
catalog_get_source_by_relation(Oid relid)
{
	TupleDesc	desc;
	HeapTuple	tup = catalog_lookup(SOURCE_COLUMNS "WHERE relation = $1",
									 OIDOID, ObjectIdGetDatum(relid), &desc);

	return tup ? source_from_row(tup, desc) : NULL;
}

#define QUERY_COLUMNS \
	"SELECT query_id, name, source_id, owner, output_mode, " \
	"       extract(epoch from watermark_delay) * 1000000, " \
	"       extract(epoch from trigger_interval) * 1000000, " \
	"       extract(epoch from coalesce((options->>'idle_timeout')::interval, '30 seconds')) * 1000000, " \
	"       desired_state = 'running', result_table, state_table, plan, checkpoint_table, " \
	"       coalesce((options->>'capture_late_rows')::boolean, false), start_lsn, " \
	"       dedup_table, dedup_checkpoint " \
	"FROM streamwin.query_catalog "

static int64
numeric_usec(HeapTuple tup, TupleDesc desc, int col, bool *isnull)
{
	Datum		d = spi_datum(tup, desc, col, isnull);

	if (*isnull)
		return 0;
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, d));
}

static QueryInfo *
query_from_row(HeapTuple tup, TupleDesc desc)
{
	QueryInfo  *q = palloc0(sizeof(QueryInfo));
	bool		isnull;
	char	   *mode;
	Jsonb	   *plan;
	Datum		d;

	q->query_id = DatumGetInt32(spi_datum(tup, desc, 1, &isnull));
	q->name = spi_text(tup, desc, 2);
	q->source_id = DatumGetInt32(spi_datum(tup, desc, 3, &isnull));
	q->owner = DatumGetObjectId(spi_datum(tup, desc, 4, &isnull));
	mode = spi_text(tup, desc, 5);
	q->output_mode = strcmp(mode, "append") == 0 ? OUTPUT_APPEND :
		strcmp(mode, "update") == 0 ? OUTPUT_UPDATE : OUTPUT_COMPLETE;
	q->watermark_delay_us = numeric_usec(tup, desc, 6, &isnull);
	q->has_watermark = !isnull;
	q->trigger_interval_us = numeric_usec(tup, desc, 7, &isnull);
	q->idle_timeout_us = numeric_usec(tup, desc, 8, &isnull);
	q->desired_running = DatumGetBool(spi_datum(tup, desc, 9, &isnull));
	q->result_table = DatumGetObjectId(spi_datum(tup, desc, 10, &isnull));
	q->state_table = DatumGetObjectId(spi_datum(tup, desc, 11, &isnull));
	if (isnull)
		q->state_table = InvalidOid;
	plan = DatumGetJsonbPCopy(spi_datum(tup, desc, 12, &isnull));
	q->checkpoint_table = DatumGetObjectId(spi_datum(tup, desc, 13, &isnull));
	if (isnull)
		q->checkpoint_table = InvalidOid;
	q->capture_late_rows = DatumGetBool(spi_datum(tup, desc, 14, &isnull));
	d = spi_datum(tup, desc, 15, &isnull);
	q->start_lsn = isnull ? InvalidXLogRecPtr : (XLogRecPtr) DatumGetInt64(d);
	d = spi_datum(tup, desc, 16, &isnull);
	q->dedup_table = isnull ? InvalidOid : DatumGetObjectId(d);
	d = spi_datum(tup, desc, 17, &isnull);
	q->dedup_checkpoint = isnull ? InvalidOid : DatumGetObjectId(d);

	q->aggregate = strcmp(jsonb_get_text(plan, "kind"), "aggregate") == 0;
	q->windowed = jsonb_get_text(plan, "window") != NULL;
	if (q->windowed)
	{
		q->window_size_us = strtoll(jsonb_get_text(plan, "window_size_us"), NULL, 10);
		q->window_slide_us = strtoll(jsonb_get_text(plan, "window_slide_us"), NULL, 10);
	}
	q->event_time_expr = jsonb_get_text(plan, "event_time");
	q->batch_sql = jsonb_get_text(plan, "batch_sql");
	q->close_sql = jsonb_get_text(plan, "close_sql");
	q->batch_insert_sql = jsonb_get_text(plan, "batch_insert_sql");
	q->close_insert_sql = jsonb_get_text(plan, "close_insert_sql");
	q->clear_sql = jsonb_get_text(plan, "clear_sql");
	q->dedup_sql = jsonb_get_text(plan, "dedup_sql");
	q->dedup_evict_sql = jsonb_get_text(plan, "dedup_evict_sql");
	q->refresh_sql = jsonb_get_text(plan, "refresh_sql");
	q->state_count_sql = jsonb_get_text(plan, "state_count_sql");
	return q;
}

QueryInfo *
catalog_get_query(const char *name, bool missing_ok)
{
	TupleDesc	desc;
	HeapTuple	tup = lookup_by_name(QUERY_COLUMNS "WHERE name = $1", name, missing_ok,
									 "query", "queries", &desc);

	return tup ? query_from_row(tup, desc) : NULL;
}

QueryInfo *
catalog_get_query_by_id(int32 query_id, bool missing_ok)
{
	TupleDesc	desc;
	HeapTuple	tup = catalog_lookup(QUERY_COLUMNS "WHERE query_id = $1",
									 INT4OID, Int32GetDatum(query_id), &desc);

	if (tup == NULL)
	{
		if (missing_ok)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query %d does not exist", query_id)));
	}
	return query_from_row(tup, desc);
}

/*
 * catalog_table_depends_on_extension
 *		A table streamwin creates for a query (state, checkpoint, dedup
 *		keys) depends on the extension, as an ordinary dependency: DROP
 *		EXTENSION names it and, with CASCADE, drops it.  Without that the
 *		tables outlived the extension in its schema, and a new installation,
 *		numbering its queries from 1 again, collided with them.  Not an
 *		extension member: pg_dump must still dump them.
 */
void
catalog_table_depends_on_extension(Oid relid)
{
	ObjectAddress table;
	ObjectAddress extension;

	ObjectAddressSet(table, RelationRelationId, relid);
	ObjectAddressSet(extension, ExtensionRelationId, get_extension_oid("streamwin", false));
	recordDependencyOn(&table, &extension, DEPENDENCY_NORMAL);
}
