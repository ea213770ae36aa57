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
#include "catalog/namespace.h"
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
#include "utils/varlena.h"
#include "utils/xid8.h"
#include "access/table.h"
#include "access/genam.h"

#include "catalog.h"
#include "join.h"
#include "options.h"
#include "sql_function.h"
#include "state_store.h"

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
	catalog_check_version();
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
	src->kind = spi_text(tup, desc, 9);
	src->format = spi_text(tup, desc, 6);
	d = spi_datum(tup, desc, 10, &isnull);
	src->source_table = isnull ? InvalidOid : DatumGetObjectId(d);
	src->slot_name = spi_text(tup, desc, 11);
	d = spi_datum(tup, desc, 7, &isnull);
	src->options = isnull ? NULL : DatumGetJsonbPCopy(d);
	src->owner = DatumGetObjectId(spi_datum(tup, desc, 8, &isnull));
	parse_source_options(src, src->options);
	return src;
}

#define SOURCE_COLUMNS \
	"SELECT source_id, name, relation, brokers, topic, format, options, owner, kind, " \
	"       source_table, slot_name " \
	"FROM streamwin.source_catalog "

/*
 * catalog_canonical_name
 *		The name of a query or source as streamwin records and shows it:
 *		read as PostgreSQL reads a possibly schema-qualified table name
 *		given as text ('name'::regclass), unquoted parts folded to lower case and quoted ones kept as written
 *		(each cut to an identifier's length), then written back quoted
 *		where needed, as regclass shows a relation.  'MixedCase' and
 *		'mixedcase' are mixedcase; '"MixedCase"' is "MixedCase";
 *		'Analytics.Sales' is analytics.sales.  NULL if name is no valid name.
 */
char *
catalog_canonical_name(const char *name)
{
	char	   *copy = pstrdup(name);
	List	   *parts;
	ListCell   *lc;
	StringInfoData buf;

	bool		quote_all = quote_all_identifiers;

	if (!SplitIdentifierString(copy, '.', &parts) || parts == NIL)
		return NULL;
	initStringInfo(&buf);

	/*
	 * Quoted where needed whatever the session's quote_all_identifiers: a
	 * query created with it on is found by its name with it off.
	 */
	quote_all_identifiers = false;
	PG_TRY();
	{
		foreach(lc, parts)
			appendStringInfo(&buf, "%s%s", buf.len ? "." : "", quote_identifier(lfirst(lc)));
	}
	PG_FINALLY();
	{
		quote_all_identifiers = quote_all;
	}
	PG_END_TRY();
	return buf.data;
}

/*
 * streamwin_canonical_name(name): catalog_canonical_name from SQL, for the
 * update script that records older names in that form (not part of the
 * installed interface: the script creates and drops its function).
 */
STREAMWIN_SQL_FUNCTION(streamwin_canonical_name);

Datum
streamwin_canonical_name(PG_FUNCTION_ARGS)
{
	char	   *canonical = catalog_canonical_name(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	if (canonical == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(canonical));
}

/*
 * catalog_new_name
 *		The canonical name of a new query or source (its relation takes the
 *		name too); an error if name is no valid name.
 */
char *
catalog_new_name(const char *name, const char *kind)
{
	char	   *canonical = catalog_canonical_name(name);

	if (canonical == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid %s name \"%s\"", kind, name),
				 errdetail("A %s's name is the name of its table, as in SQL: unquoted, it is folded to lower case; double-quoted, it is kept as written.", kind),
				 errhint("For example: orders_per_minute, analytics.orders_per_minute, or \"Orders per minute\" in double quotes.")));
	return canonical;
}

/*
 * Look an object up by name; NULL if missing and missing_ok, else an error.
 * The name as given first, then its canonical form: a name that the update
 * to 0.5 kept as written (its canonical form was another object's) is
 * found by that spelling.
 */
static HeapTuple
lookup_by_name(const char *sql, const char *name, bool missing_ok, const char *kind,
			   const char *plural, TupleDesc *desc)
{
	HeapTuple	tup = catalog_lookup(sql, TEXTOID, CStringGetTextDatum(name), desc);
	char	   *canonical = catalog_canonical_name(name);

	if (tup == NULL && canonical != NULL && strcmp(canonical, name) != 0)
		tup = catalog_lookup(sql, TEXTOID, CStringGetTextDatum(canonical), desc);

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
catalog_get_source_by_id(int32 source_id, bool missing_ok)
{
	TupleDesc	desc;
	HeapTuple	tup = catalog_lookup(SOURCE_COLUMNS "WHERE source_id = $1",
									 INT4OID, Int32GetDatum(source_id), &desc);

	if (tup == NULL)
	{
		if (missing_ok)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source %d does not exist", source_id)));
	}
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
	"SELECT query_id, name, NULL, owner, output_mode, " \
	"       extract(epoch from watermark_delay) * 1000000, " \
	"       extract(epoch from trigger_interval) * 1000000, " \
	"       extract(epoch from coalesce((options->>'idle_timeout')::interval, '30 seconds')) * 1000000, " \
	"       desired_state = 'running', result_table, state_table, plan, checkpoint_table, " \
	"       coalesce((options->>'capture_late_rows')::boolean, false), NULL, " \
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

/*
 * A source's start (start_lsn, snapshot_xid) from columns lsn_col and
 * xid_col of a row of streamwin.query_sources.
 */
static void
source_start_read(QuerySourceInfo *qs, HeapTuple tup, TupleDesc desc, int lsn_col, int xid_col)
{
	bool		isnull;
	Datum		d;

	d = spi_datum(tup, desc, lsn_col, &isnull);
	qs->start_lsn = isnull ? InvalidXLogRecPtr : (XLogRecPtr) DatumGetInt64(d);
	d = spi_datum(tup, desc, xid_col, &isnull);
	qs->snapshot_xid = isnull ? InvalidTransactionId :
		XidFromFullTransactionId(DatumGetFullTransactionId(d));
}

/*
 * The query's sources (streamwin.query_sources), with each one's event
 * time from the plan: source 0's is the plan's "event_time", a join's
 * sides' are in its join plan.
 */
static void
query_sources_read(QueryInfo *q, Jsonb *plan)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(q->query_id)};
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	catalog_exec("SELECT source_index, source_id, start_lsn, join_table, join_checkpoint, snapshot_xid "
				 "FROM streamwin.query_sources WHERE query_id = $1 ORDER BY source_index",
				 1, types, args, NULL, 0);
	if (SPI_processed < 1 || SPI_processed > QUERY_MAX_SOURCES)
		elog(ERROR, "streamwin: query \"%s\" has " UINT64_FORMAT " sources in streamwin.query_sources",
			 q->name, (uint64) SPI_processed);
	q->nsources = (int) SPI_processed;
	for (int i = 0; i < q->nsources; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		QuerySourceInfo *qs = &q->sources[i];
		bool		isnull;
		Datum		d;

		if (DatumGetInt32(spi_datum(tup, desc, 1, &isnull)) != i)
			elog(ERROR, "streamwin: the sources of query \"%s\" are not numbered from 0", q->name);
		qs->source_id = DatumGetInt32(spi_datum(tup, desc, 2, &isnull));
		source_start_read(qs, tup, desc, 3, 6);
		d = spi_datum(tup, desc, 4, &isnull);
		qs->join_table = isnull ? InvalidOid : DatumGetObjectId(d);
		d = spi_datum(tup, desc, 5, &isnull);
		qs->join_checkpoint = isnull ? InvalidOid : DatumGetObjectId(d);
	}
	SPI_finish();
	MemoryContextSwitchTo(caller);
	if (q->join != NULL)
		for (int i = 0; i < q->nsources; i++)
			q->sources[i].event_time_expr = q->join->sides[i].event_time_expr;
	else
		q->sources[0].event_time_expr = jsonb_get_text(plan, "event_time");
}

/*
 * A table of the query that its plan names (in schema streamwin, by name:
 * a dump and restore keeps names, not oids); InvalidOid if it is gone (see
 * catalog_require_query_tables), so that the query can still be dropped.
 */
static Oid
plan_table(Jsonb *plan, const char *member)
{
	return get_relname_relid(jsonb_get_text(plan, member),
							 get_namespace_oid("streamwin", false));
}

/* See catalog.h */
void
catalog_require_query_tables(const QueryInfo *q)
{
	if (q->upsert_store != NULL &&
		(!OidIsValid(q->upsert_table) || !OidIsValid(q->upsert_checkpoint)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the upsert table of query \"%s\" or its checkpoint table does not exist", q->name),
				 errdetail("The upsert table keeps the last row of each key of its source; it was dropped or moved out of schema streamwin."),
				 errhint("Drop the query and create it again.")));
}

/* The state of a query of an upsert source, if it has one. */
static void
query_upsert_read(QueryInfo *q, Jsonb *plan)
{
	q->upsert_store = store_plan_read(plan, "upsert_store");
	if (q->upsert_store == NULL)
		return;
	q->upsert_side = atoi(jsonb_get_text(plan, "upsert_side"));
	q->upsert_table = plan_table(plan, "upsert_table");
	q->upsert_checkpoint = plan_table(plan, "upsert_checkpoint");
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
	d = spi_datum(tup, desc, 16, &isnull);
	q->dedup_table = isnull ? InvalidOid : DatumGetObjectId(d);
	d = spi_datum(tup, desc, 17, &isnull);
	q->dedup_checkpoint = isnull ? InvalidOid : DatumGetObjectId(d);

	q->aggregate = strcmp(jsonb_get_text(plan, "kind"), "aggregate") == 0;
	q->windowed = jsonb_get_text(plan, "window") != NULL;
	q->session_windows = q->windowed && strcmp(jsonb_get_text(plan, "window"), "session") == 0;
	if (q->windowed)
	{
		q->window_size_us = strtoll(jsonb_get_text(plan, "window_size_us"), NULL, 10);
		q->window_slide_us = strtoll(jsonb_get_text(plan, "window_slide_us"), NULL, 10);
	}
	plan_read_statements(plan, q->sql);
	if (jsonb_get_text(plan, "dedup_side") != NULL)
		q->dedup_side = atoi(jsonb_get_text(plan, "dedup_side"));
	q->dedup_batch_column = jsonb_get_text(plan, "dedup_batch_column");
	q->dedup_time_column = jsonb_get_text(plan, "dedup_time_column");
	q->source_key = jsonb_get_text(plan, "source_key");
	q->result_name = jsonb_get_text(plan, "result_name");
	for (int i = 0; i < QUERY_MAX_SOURCES; i++)
		q->source_view_names[i] = jsonb_get_text(plan, psprintf("source_view_name_%d", i));
	q->store = store_plan_read(plan, "store");
	q->dedup_store = store_plan_read(plan, "dedup_store");
	query_upsert_read(q, plan);
	q->join = join_plan_read(plan);
	query_sources_read(q, plan);
	return q;
}

/* See catalog.h */
QueryInfo *
catalog_get_owned_query(FunctionCallInfo fcinfo, int nargs, const char *const *args)
{
	char	   *name;
	QueryInfo  *q;

	check_args_not_null(fcinfo, nargs, args);
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	q = catalog_get_query(name, false);
	catalog_check_owner(q->owner, "query", name);
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

/* --- sources ------------------------------------------------------------- */

int32
catalog_insert_source(const char *name, const char *kind, const char *brokers,
					  const char *topic, const char *format, const char *columns,
					  Jsonb *options, const char *timezone, Oid table, const char *slot_name)
{
	Oid			types[11] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, OIDOID,
	TEXTOID, OIDOID, TEXTOID, TEXTOID};
	Datum		args[11];
	char		nulls[11];
	bool		isnull;
	int32		source_id;

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(name);
	args[1] = brokers ? CStringGetTextDatum(brokers) : (Datum) 0;
	nulls[1] = brokers ? ' ' : 'n';
	args[2] = topic ? CStringGetTextDatum(topic) : (Datum) 0;
	nulls[2] = topic ? ' ' : 'n';
	args[3] = CStringGetTextDatum(format);
	args[4] = CStringGetTextDatum(columns);
	args[5] = JsonbPGetDatum(options);
	args[6] = ObjectIdGetDatum(GetUserId());
	args[7] = CStringGetTextDatum(kind);
	args[8] = ObjectIdGetDatum(table);
	nulls[8] = OidIsValid(table) ? ' ' : 'n';
	args[9] = slot_name ? CStringGetTextDatum(slot_name) : (Datum) 0;
	nulls[9] = slot_name ? ' ' : 'n';
	args[10] = CStringGetTextDatum(timezone);
	SPI_connect();
	catalog_exec("INSERT INTO streamwin.source_catalog "
				 "(name, relation, kind, brokers, topic, format, columns, options, owner, "
				 " source_table, slot_name) "
				 "VALUES ($1, 0, $8, $2, $3, $4, $5, "
				 "$6 OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('timezone', $11), $7, $9, $10) "
				 "RETURNING source_id",
				 11, types, args, nulls, 1);
	source_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
											&isnull));
	SPI_finish();
	return source_id;
}

void
catalog_set_source_relation(int32 source_id, Oid relid)
{
	Oid			types[2] = {OIDOID, INT4OID};
	Datum		args[2] = {ObjectIdGetDatum(relid), Int32GetDatum(source_id)};

	SPI_connect();
	catalog_exec("UPDATE streamwin.source_catalog SET relation = $1 WHERE source_id = $2",
				 2, types, args, NULL, 0);
	SPI_finish();
}

char *
catalog_source_readers(int32 source_id, bool lock_row)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	MemoryContext caller = CurrentMemoryContext;
	char	   *names;

	SPI_connect();

	/*
	 * The source's row first, locked: a create_query over it that has not
	 * committed holds its key (the foreign key of query_sources), and is
	 * waited for, so that its query is among the readers (else the drop
	 * would fail on the foreign key, saying nothing of the query)
	 */
	if (lock_row)
		catalog_exec("SELECT FROM streamwin.source_catalog WHERE source_id = $1 FOR UPDATE",
					 1, types, args, NULL, 0);
	catalog_exec("SELECT pg_catalog.string_agg(q.name, ', ' ORDER BY q.name) "
				 "FROM streamwin.query_catalog q WHERE q.query_id IN "
				 "(SELECT query_id FROM streamwin.query_sources WHERE source_id = $1)",
				 1, types, args, NULL, 1);
	names = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	names = names ? MemoryContextStrdup(caller, names) : NULL;
	SPI_finish();
	return names;
}

void
catalog_delete_source(const SourceInfo *src)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		args[2] = {Int32GetDatum(src->source_id), CStringGetTextDatum(src->name)};

	SPI_connect();
	catalog_exec("DELETE FROM streamwin.source_catalog WHERE source_id = $1",
				 1, types, args, NULL, 0);
	catalog_exec("DELETE FROM streamwin.dead_letter_log WHERE source = $2",
				 2, types, args, NULL, 0);
	SPI_finish();
}

List *
catalog_source_slots(void)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *slots = NIL;

	SPI_connect();
	catalog_exec("SELECT slot_name FROM streamwin.source_catalog WHERE slot_name IS NOT NULL "
				 "ORDER BY source_id", 0, NULL, NULL, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);

		slots = lappend(slots, pstrdup(SPI_getvalue(SPI_tuptable->vals[i],
													 SPI_tuptable->tupdesc, 1)));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return slots;
}

/* --- queries ------------------------------------------------------------- */

/*
 * The lock first (catalog_lock_query), then this statement, whose snapshot
 * sees what the batch before committed.
 */
#define QUERY_POSITION_SQL \
	"SELECT last_batch_id, watermark, last_batch_at, state_batch_id, " \
	"coalesce(checkpoint_batch_id, 0), xmin, desired_state = 'running' " \
	"FROM streamwin.query_catalog WHERE query_id = $1"

bool
catalog_read_position(int32 query_id, bool lock_row, QueryPosition *pos)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(query_id)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;

	catalog_exec(lock_row ? QUERY_POSITION_SQL " FOR UPDATE" : QUERY_POSITION_SQL,
				 1, types, args, NULL, 1);
	if (SPI_processed != 1)
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	pos->last_batch_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	d = SPI_getbinval(tup, desc, 2, &isnull);
	pos->has_watermark = !isnull;
	pos->watermark = isnull ? 0 : DatumGetTimestampTz(d);
	d = SPI_getbinval(tup, desc, 3, &isnull);
	pos->has_last_batch_at = !isnull;
	pos->last_batch_at = isnull ? 0 : DatumGetTimestampTz(d);
	pos->state_batch_id = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
	pos->checkpoint_batch_id = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	pos->xmin = DatumGetTransactionId(SPI_getbinval(tup, desc, 6, &isnull));
	pos->desired_running = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
	return true;
}

void
catalog_reread_query(const QueryInfo *q, bool lock_row, QueryPosition *pos)
{
	bool		found;

	SPI_connect();
	found = catalog_read_position(q->query_id, lock_row, pos);
	SPI_finish();
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" was dropped by another session meanwhile", q->name)));
}

/* One int8 of the query's catalog row, by a constant statement; 0 if NULL. */
static int64
query_int8(const char *sql, int32 query_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(query_id)};
	bool		isnull = true;
	int64		v;

	SPI_connect();
	catalog_exec(sql, 1, types, args, NULL, 1);
	if (SPI_processed != 1)
		elog(ERROR, "streamwin: query %d is not in the catalog", query_id);
	/* read before SPI_finish frees the row (int8 is by reference on 32 bits) */
	v = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return isnull ? 0 : v;
}

int64
catalog_query_last_batch(int32 query_id)
{
	return query_int8("SELECT last_batch_id FROM streamwin.query_catalog WHERE query_id = $1",
					  query_id);
}

int64
catalog_checkpoint_batch(int32 query_id)
{
	return query_int8("SELECT checkpoint_batch_id FROM streamwin.query_catalog WHERE query_id = $1",
					  query_id);
}

/*
 * A control function's write found no row of its query: another session
 * dropped it while the function waited for the row (READ COMMITTED reads
 * the row's last version).  Said, rather than reported as done.
 */
static void
query_row_gone(uint64 processed)
{
	if (processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the query was dropped by another session meanwhile"),
				 errhint("See streamwin.queries for the queries of this database.")));
}

/*
 * A constant statement on the query's catalog row ($1: its id), with args
 * from $2 on; returns the number of rows it processed.
 */
static uint64
query_update(const char *sql, int32 query_id, int nargs, Oid *types, Datum *args,
			 const char *nulls)
{
	uint64		processed;

	Oid			all_types[4] = {INT4OID};
	Datum		all_args[4] = {Int32GetDatum(query_id)};
	char		all_nulls[4] = {' ', ' ', ' ', ' '};

	Assert(nargs < (int) lengthof(all_args));
	for (int i = 0; i < nargs; i++)
	{
		all_types[i + 1] = types[i];
		all_args[i + 1] = args[i];
		all_nulls[i + 1] = nulls != NULL ? nulls[i] : ' ';
	}
	SPI_connect();
	catalog_exec(sql, nargs + 1, all_types, all_args, all_nulls, 0);
	processed = SPI_processed;
	SPI_finish();
	return processed;
}

void
catalog_set_desired_state(int32 query_id, const char *state)
{
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(state)};

	query_row_gone(query_update("UPDATE streamwin.query_catalog SET desired_state = $2, "
								"status = CASE WHEN $2 = 'running' THEN 'ok' ELSE status END "
								"WHERE query_id = $1", query_id, 1, types, args, NULL));
}

void
catalog_alter_query(int32 query_id, bool has_trigger, Datum trigger_interval,
					const char *idle_timeout)
{
	Oid			types[2] = {INTERVALOID, TEXTOID};
	Datum		args[2] = {trigger_interval,
	idle_timeout ? CStringGetTextDatum(idle_timeout) : (Datum) 0};
	char		nulls[2] = {has_trigger ? ' ' : 'n', idle_timeout ? ' ' : 'n'};

	query_row_gone(query_update("UPDATE streamwin.query_catalog "
								"SET trigger_interval = coalesce($2, trigger_interval), "
								"options = CASE WHEN $3 IS NULL THEN options "
								"ELSE options || jsonb_build_object('idle_timeout', $3) END "
								"WHERE query_id = $1", query_id, 2, types, args, nulls));
}

void
catalog_delete_query(int32 query_id, const char *name)
{
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};

	query_row_gone(query_update("DELETE FROM streamwin.query_catalog WHERE query_id = $1",
								query_id, 0, NULL, NULL, NULL));
	query_update("DELETE FROM streamwin.progress_log WHERE query = $2",
				 query_id, 1, types, args, NULL);
	query_update("DELETE FROM streamwin.late_row_log WHERE query = $2",
				 query_id, 1, types, args, NULL);
	query_update("DELETE FROM streamwin.state_alive WHERE query_id = $1",
				 query_id, 0, NULL, NULL, NULL);
}

void
catalog_reset_query(int32 query_id)
{
	query_update("DELETE FROM streamwin.query_offsets WHERE query_id = $1",
				 query_id, 0, NULL, NULL, NULL);
	query_update("DELETE FROM streamwin.query_checkpoints WHERE query_id = $1",
				 query_id, 0, NULL, NULL, NULL);
	/* the rows read again are judged again: a row late before may not be */
	query_update("DELETE FROM streamwin.late_row_log WHERE query = "
				 "(SELECT name FROM streamwin.query_catalog WHERE query_id = $1)",
				 query_id, 0, NULL, NULL, NULL);
	query_update("UPDATE streamwin.query_catalog SET watermark = NULL, status = 'ok', "
				 "last_error = NULL, last_error_at = NULL, consecutive_failures = 0, "
				 "checkpoint_batch_id = NULL, checkpoint_watermark = NULL, "
				 "state_batch_id = last_batch_id "
				 "WHERE query_id = $1", query_id, 0, NULL, NULL, NULL);
}

void
catalog_record_batch(int32 query_id, int64 batch_id, bool has_watermark, TimestampTz watermark)
{
	Oid			types[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		args[2] = {Int64GetDatum(batch_id), TimestampTzGetDatum(watermark)};
	char		nulls[2] = {' ', has_watermark ? ' ' : 'n'};

	query_update("UPDATE streamwin.query_catalog SET last_batch_id = $2, state_batch_id = $2, "
				 "last_batch_at = pg_catalog.clock_timestamp(), watermark = $3, "
				 "status = 'ok', consecutive_failures = 0 WHERE query_id = $1",
				 query_id, 2, types, args, nulls);
}

void
catalog_clear_failure(int32 query_id)
{
	query_update("UPDATE streamwin.query_catalog SET status = 'ok', consecutive_failures = 0, "
				 "last_batch_at = pg_catalog.clock_timestamp() "
				 "WHERE query_id = $1 AND status = 'failed'", query_id, 0, NULL, NULL, NULL);
}

void
catalog_record_version_mismatch(const char *mismatch)
{
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(mismatch)};
	RoleSwitch	role;
	int			rc;

	SPI_connect();
	catalog_enter(&role);
	rc = SPI_execute_with_args("UPDATE streamwin.query_catalog SET status = 'failed', last_error = $1, "
							   "last_error_at = pg_catalog.clock_timestamp() "
							   "WHERE desired_state = 'running' AND last_error IS DISTINCT FROM $1",
							   1, types, args, NULL, false, 0);
	catalog_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin: could not record the catalog's version on its queries: %s",
			 SPI_result_code_string(rc));
	SPI_finish();
}

void
catalog_record_failure(int32 query_id, const char *message)
{
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(message)};

	query_update("UPDATE streamwin.query_catalog SET status = 'failed', last_error = $2, "
				 "last_error_at = pg_catalog.clock_timestamp(), "
				 "consecutive_failures = consecutive_failures + 1 WHERE query_id = $1",
				 query_id, 1, types, args, NULL);
}

void
catalog_set_state_batch(int32 query_id, int64 batch_id)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(batch_id)};

	query_update("UPDATE streamwin.query_catalog SET state_batch_id = $2 WHERE query_id = $1",
				 query_id, 1, types, args, NULL);
}

void
catalog_record_checkpoint(int32 query_id, int64 batch_id, bool has_watermark,
						  TimestampTz watermark)
{
	Oid			types[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		args[2] = {Int64GetDatum(batch_id), TimestampTzGetDatum(watermark)};
	char		nulls[2] = {' ', has_watermark ? ' ' : 'n'};

	query_update("UPDATE streamwin.query_catalog SET checkpoint_batch_id = $2, "
				 "checkpoint_watermark = $3 WHERE query_id = $1",
				 query_id, 2, types, args, nulls);
}

void
catalog_running_queries(List **query_ids, List **owners)
{
	MemoryContext caller = CurrentMemoryContext;

	*query_ids = NIL;
	*owners = NIL;
	SPI_connect();
	catalog_exec("SELECT query_id, owner FROM streamwin.query_catalog "
				 "WHERE desired_state = 'running'", 0, NULL, NULL, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		MemoryContext spi = MemoryContextSwitchTo(caller);

		*query_ids = lappend_int(*query_ids,
								 DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 1, &isnull)));
		*owners = lappend_oid(*owners,
							  DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 2, &isnull)));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
}

/* --- table sources ------------------------------------------------------- */

/*
 * Where each query of a table source must be able to read from: with
 * UNLOGGED state, its checkpoint's position (crash recovery replays from
 * there), else its stored position; a query that has not run yet, its
 * start.  $1 is the source's id.
 */
#define QUERY_READ_FROM \
	"CASE WHEN q.state_table IS NOT NULL OR q.dedup_table IS NOT NULL " \
	"          OR EXISTS (SELECT FROM streamwin.query_sources j " \
	"                     WHERE j.query_id = q.query_id AND j.join_table IS NOT NULL) " \
	"     THEN coalesce(c.next_offset, qs.start_lsn) " \
	"     ELSE coalesce(o.next_offset, qs.start_lsn) END"
#define QUERIES_OF_SOURCE \
	"FROM streamwin.query_sources qs " \
	"JOIN streamwin.query_catalog q ON q.query_id = qs.query_id " \
	"LEFT JOIN streamwin.query_offsets o ON o.query_id = qs.query_id " \
	"     AND o.source_index = qs.source_index AND o.partition = 0 " \
	"LEFT JOIN streamwin.query_checkpoints c ON c.query_id = qs.query_id " \
	"     AND c.source_index = qs.source_index AND c.partition = 0 " \
	"WHERE qs.source_id = $1"

bool
catalog_source_unread(int32 source_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	bool		unread;

	SPI_connect();
	catalog_exec("SELECT 1 FROM streamwin.source_catalog s WHERE s.source_id = $1 "
				 "AND NOT EXISTS (SELECT 1 FROM streamwin.query_sources q WHERE q.source_id = $1)",
				 1, types, args, NULL, 1);
	unread = SPI_processed == 1;
	SPI_finish();
	return unread;
}

bool
catalog_table_source_now(int32 source_id, char **slot_name, bool *has_retained,
						 XLogRecPtr *retained)
{
	Oid			types[2] = {INT4OID, BOOLOID};
	Datum		args[2] = {Int32GetDatum(source_id), BoolGetDatum(retained != NULL)};
	MemoryContext caller = CurrentMemoryContext;
	bool		found;

	SPI_connect();
	catalog_exec("SELECT s.slot_name, CASE WHEN $2 THEN "
				 "  (SELECT min(" QUERY_READ_FROM ") " QUERIES_OF_SOURCE ") END "
				 "FROM streamwin.source_catalog s WHERE s.source_id = $1",
				 2, types, args, NULL, 1);
	found = SPI_processed == 1;
	if (found)
	{
		char	   *slot = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

		*slot_name = slot ? MemoryContextStrdup(caller, slot) : NULL;
		if (retained != NULL)
		{
			*has_retained = !isnull;
			*retained = isnull ? InvalidXLogRecPtr : (XLogRecPtr) DatumGetInt64(d);
		}
	}
	SPI_finish();
	return found;
}

bool
catalog_source_furthest_behind(int32 source_id, char **query, char **state, bool *has_pos,
							   XLogRecPtr *pos)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	MemoryContext caller = CurrentMemoryContext;
	bool		found;

	SPI_connect();
	catalog_exec("SELECT q.name, CASE WHEN q.desired_state = 'stopped' THEN 'stopped' "
				 "                    WHEN q.status = 'failed' THEN 'failed' ELSE 'running' END, "
				 "       " QUERY_READ_FROM " AS pos "
				 QUERIES_OF_SOURCE " ORDER BY pos NULLS FIRST, q.name LIMIT 1",
				 1, types, args, NULL, 1);
	found = SPI_processed == 1;
	if (found)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, 3, &isnull);

		*query = MemoryContextStrdup(caller, SPI_getvalue(tup, desc, 1));
		*state = MemoryContextStrdup(caller, SPI_getvalue(tup, desc, 2));
		*has_pos = !isnull;
		*pos = isnull ? InvalidXLogRecPtr : (XLogRecPtr) DatumGetInt64(d);
	}
	SPI_finish();
	return found;
}

void
catalog_set_query_start(int32 query_id, int source_index, XLogRecPtr start_lsn)
{
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		args[2] = {Int64GetDatum((int64) start_lsn), Int32GetDatum(source_index)};

	/* this transaction writes a changelog's start rows: see query_sources */
	query_update("UPDATE streamwin.query_sources SET start_lsn = $2, "
				 "snapshot_xid = pg_catalog.pg_current_xact_id() "
				 "WHERE query_id = $1 AND source_index = $3",
				 query_id, 2, types, args, NULL);
}

void
catalog_reread_query_starts(QueryInfo *q)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(q->query_id)};

	SPI_connect();
	catalog_exec("SELECT source_index, start_lsn, snapshot_xid "
				 "FROM streamwin.query_sources WHERE query_id = $1",
				 1, types, args, NULL, 0);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		bool		isnull;
		int			i = DatumGetInt32(spi_datum(tup, SPI_tuptable->tupdesc, 1, &isnull));

		if (i >= 0 && i < q->nsources)
			source_start_read(&q->sources[i], tup, SPI_tuptable->tupdesc, 2, 3);
	}
	SPI_finish();
}

char *
catalog_source_slot(int32 source_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	MemoryContext caller = CurrentMemoryContext;
	char	   *slot = NULL;

	SPI_connect();
	catalog_exec("SELECT slot_name FROM streamwin.source_catalog WHERE source_id = $1",
				 1, types, args, NULL, 1);
	if (SPI_processed == 1)
		slot = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	slot = slot ? MemoryContextStrdup(caller, slot) : NULL;
	SPI_finish();
	return slot;
}

void
catalog_set_source_slot(int32 source_id, const char *slot_name)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		args[2] = {Int32GetDatum(source_id), CStringGetTextDatum(slot_name)};

	SPI_connect();
	catalog_exec("UPDATE streamwin.source_catalog SET slot_name = $2 WHERE source_id = $1",
				 2, types, args, NULL, 0);
	SPI_finish();
}

bool
catalog_source_wal_warned(int32 source_id, bool warned)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(source_id)};
	bool		found;

	SPI_connect();
	catalog_exec(warned ?
				 "UPDATE streamwin.source_catalog SET wal_warned_at = pg_catalog.clock_timestamp() "
				 "WHERE source_id = $1" :
				 "UPDATE streamwin.source_catalog SET wal_warned_at = NULL WHERE source_id = $1",
				 1, types, args, NULL, 0);
	found = SPI_processed > 0;
	SPI_finish();
	return found;
}

void
catalog_source_queries_warned(int32 source_id, const char *message)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		args[2] = {Int32GetDatum(source_id), CStringGetTextDatum(message)};

	SPI_connect();
	catalog_exec("UPDATE streamwin.query_catalog SET last_error = $2, "
				 "last_error_at = pg_catalog.clock_timestamp() "
				 "WHERE query_id IN (SELECT query_id FROM streamwin.query_sources WHERE source_id = $1) "
				 "AND status = 'ok'",
				 2, types, args, NULL, 0);
	SPI_finish();
}

List *
catalog_source_slot_rows(const char *warned_within)
{
	Oid			types[1] = {INTERVALOID};
	Datum		args[1] = {DirectFunctionCall3(interval_in, CStringGetDatum(warned_within),
											   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1))};
	MemoryContext caller = CurrentMemoryContext;
	List	   *rows = NIL;

	SPI_connect();
	catalog_exec("SELECT source_id, name, slot_name, wal_warned_at IS NOT NULL, "
				 "       coalesce(wal_warned_at > pg_catalog.clock_timestamp() - $1, false) "
				 "FROM streamwin.source_catalog WHERE slot_name IS NOT NULL ORDER BY source_id",
				 1, types, args, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext spi = MemoryContextSwitchTo(caller);
		SourceSlotRow *row = palloc0(sizeof(SourceSlotRow));
		bool		isnull;

		row->source_id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		row->name = pstrdup(SPI_getvalue(tup, desc, 2));
		row->slot_name = pstrdup(SPI_getvalue(tup, desc, 3));
		row->warned = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		row->warned_recently = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
		rows = lappend(rows, row);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return rows;
}

/* --- new queries --------------------------------------------------------- */

int32
catalog_next_query_id(void)
{
	int32		id;
	bool		isnull;

	SPI_connect();
	catalog_exec("SELECT pg_catalog.nextval('streamwin.query_catalog_query_id_seq')::integer",
				 0, NULL, NULL, NULL, 1);
	id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return id;
}

void
catalog_insert_query(const NewQuery *nq)
{
	Oid			types[16] = {INT4OID, TEXTOID, OIDOID, TEXTOID, INTERVALOID, TEXTOID, INTERVALOID,
	TEXTARRAYOID, JSONBOID, OIDOID, OIDOID, TEXTOID, TEXTOID, OIDOID, OIDOID, OIDOID};
	Datum		args[16];
	char		nulls[16];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(nq->query_id);
	args[1] = CStringGetTextDatum(nq->name);
	args[2] = ObjectIdGetDatum(nq->owner);
	args[3] = CStringGetTextDatum(nq->query_text);
	args[4] = nq->watermark;
	nulls[4] = nq->has_watermark ? ' ' : 'n';
	args[5] = CStringGetTextDatum(nq->output_mode);
	args[6] = nq->trigger_interval;
	args[7] = nq->dedup_keys;
	nulls[7] = nq->has_dedup_keys ? ' ' : 'n';
	args[8] = JsonbPGetDatum(nq->options);
	args[9] = ObjectIdGetDatum(nq->result_table);
	args[10] = ObjectIdGetDatum(nq->state_table);
	nulls[10] = OidIsValid(nq->state_table) ? ' ' : 'n';
	args[11] = CStringGetTextDatum(nq->plan);
	args[12] = CStringGetTextDatum(nq->desired_state);
	args[13] = ObjectIdGetDatum(nq->checkpoint_table);
	nulls[13] = OidIsValid(nq->checkpoint_table) ? ' ' : 'n';
	args[14] = ObjectIdGetDatum(nq->dedup_table);
	args[15] = ObjectIdGetDatum(nq->dedup_checkpoint);
	nulls[14] = nulls[15] = OidIsValid(nq->dedup_table) ? ' ' : 'n';
	SPI_connect();
	catalog_exec("INSERT INTO streamwin.query_catalog (query_id, name, "
				 "owner, query, watermark_delay, output_mode, trigger_interval, "
				 "dedup_keys, options, result_table, state_table, plan, desired_state, "
				 "checkpoint_table, dedup_table, dedup_checkpoint) "
				 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, "
				 "$13, $14, $15, $16)",
				 16, types, args, nulls, 0);
	SPI_finish();
}

void
catalog_insert_query_source(int32 query_id, int source_index, int32 source_id, bool has_start,
							int64 start_lsn, Oid join_table, Oid join_checkpoint)
{
	Oid			types[6] = {INT4OID, INT4OID, INT4OID, INT8OID, OIDOID, OIDOID};
	Datum		args[6] = {Int32GetDatum(query_id), Int32GetDatum(source_index),
		Int32GetDatum(source_id), Int64GetDatum(start_lsn), ObjectIdGetDatum(join_table),
	ObjectIdGetDatum(join_checkpoint)};
	char		nulls[6] = {' ', ' ', ' ', has_start ? ' ' : 'n',
		OidIsValid(join_table) ? ' ' : 'n', OidIsValid(join_table) ? ' ' : 'n'};

	SPI_connect();
	/* this transaction writes a changelog's start rows: see query_sources */
	catalog_exec("INSERT INTO streamwin.query_sources (query_id, source_index, source_id, "
				 "start_lsn, join_table, join_checkpoint, snapshot_xid) "
				 "VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $4 IS NOT NULL THEN pg_catalog.pg_current_xact_id() END)",
				 6, types, args, nulls, 0);
	SPI_finish();
}
