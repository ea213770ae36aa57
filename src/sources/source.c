/*-------------------------------------------------------------------------
 *
 * source.c
 *	  What every kind of source shares: the view that makes a source usable
 *	  as a relation, the rows of the batch being processed, registering and
 *	  dropping a source, and opening a query's reader (source.h).
 *
 * A source named "orders" is a view
 *		SELECT * FROM streamwin.source_rows(<id>) AS s(<its columns>)
 * so that queries over it are parsed, type-checked and planned by
 * PostgreSQL like queries over any table.  source_rows() returns the rows
 * of the batch the current backend is processing (set through
 * source_set_batch_input) and nothing otherwise: reading a source outside
 * a batch is harmless and empty.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "parser/parse_type.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/varlena.h"

#include "catalog.h"
#include "options.h"
#include "source.h"
#include "spi_util.h"
#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_drop_source);
STREAMWIN_SQL_FUNCTION(streamwin_source_rows);

/*
 * source_tupdesc
 *		A copy of the row type of a source's view, in CurrentMemoryContext.
 */
TupleDesc
source_tupdesc(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = CreateTupleDescCopy(RelationGetDescr(rel));

	relation_close(rel, AccessShareLock);
	return desc;
}

/* See source.h; which source lost its view, rather than which OID cannot be opened. */
void
source_check_view(const SourceInfo *src)
{
	if (get_rel_name(src->relation) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the view of source \"%s\" no longer exists", src->name),
				 errdetail("It was dropped by hand; the source's rows have its columns."),
				 errhint("Drop the source's queries and the source with streamwin.drop_query() and streamwin.drop_source(), then create them again.")));
}

/*
 * streamwin.source_rows(source_id) RETURNS SETOF record: the body of every
 * source view.  The batch statements do not call it: the planner puts the
 * scan of source_scan.c in its place, which reads the same rows without
 * copying them into a tuplestore.  It runs for what that scan does not
 * replace (an UPDATE ... FROM a source, whose row mark needs the source's
 * whole row) and with streamwin.enable_source_scan off.
 */
Datum
streamwin_source_rows(PG_FUNCTION_ARGS)
{
	int32		source_id = PG_GETARG_INT32(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	bool		numbered = PG_NARGS() > 1 && PG_GETARG_BOOL(1);
	BatchInput *input = batch_scope_input(source_id);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (input == NULL)
		return (Datum) 0;
	batch_rows_check_type(input->desc, rsinfo->setDesc, numbered ? INT4OID : InvalidOid,
						  psprintf("source %d", source_id));
	/*
	 * Rows made a chunk at a time (BatchInput.refill) come chunk by chunk:
	 * only a join's pairs, which no statement numbers.
	 */
	Assert(!numbered || input->refill == NULL);
	for (bool more = input->refill == NULL || input->refill(input, true); more;
		 more = input->refill != NULL && input->refill(input, false))
	{
		if (!numbered)
		{
			for (int i = 0; i < input->nrows; i++)
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, input->rows[i],
									 BATCH_ROW_NULLS(input->rows[i], input->natts));
		}
		else
		{
			/* (position, columns...): the expected row type has one more column */
			int			natts = input->natts;
			Datum	   *values = palloc(sizeof(Datum) * (natts + 1));
			bool	   *nulls = palloc(sizeof(bool) * (natts + 1));

			for (int i = 0; i < input->nrows; i++)
			{
				values[0] = Int32GetDatum(i);
				nulls[0] = false;
				memcpy(values + 1, input->rows[i], natts * sizeof(Datum));
				memcpy(nulls + 1, BATCH_ROW_NULLS(input->rows[i], natts), natts * sizeof(bool));
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			}
		}
	}
	return (Datum) 0;
}

/* The column types each kind of message metadata may go into */
static const struct
{
	SourceMetadata kind;
	const char *name;
	Oid			types[2];
	const char *types_text;
}			metadata_types[] = {
	{SOURCE_META_PARTITION, "partition", {INT4OID, INT8OID}, "integer or bigint"},
	{SOURCE_META_OFFSET, "offset", {INT8OID, LSNOID}, "bigint or pg_lsn"},
	{SOURCE_META_TIMESTAMP, "timestamp", {TIMESTAMPTZOID, TIMESTAMPOID}, "timestamptz or timestamp"},
	{SOURCE_META_KEY, "key", {TEXTOID, BYTEAOID}, "text or bytea"},
	{SOURCE_META_HEADERS, "headers", {JSONBOID, JSONOID}, "jsonb or json"},
};

/*
 * source_metadata_map
 *		Per attribute of desc (a source's row type), what it holds if the
 *		source's option "metadata" fills it from the message (or a table
 *		source's transaction) rather than its payload, or NULL if the option
 *		names no column.  Raises an error
 *		for a column that is not in desc or whose type cannot hold it.
 */
SourceMetadata *
source_metadata_map(const SourceInfo *src, TupleDesc desc)
{
	SourceMetadata *map;

	if (src->nmetadata == 0)
		return NULL;
	map = palloc0(sizeof(SourceMetadata) * desc->natts);
	for (int m = 0; m < src->nmetadata; m++)
	{
		const char *column = src->metadata_columns[m];
		int			attno = -1;
		int			t = 0;

		while (metadata_types[t].kind != src->metadata_kinds[m])
			t++;
		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, i)->attname), column) == 0)
				attno = i;
		if (attno < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("option \"metadata\" names column \"%s\", which is not in the source's column list",
							column),
					 errhint("Declare it with the other columns, for example \"%s %s\".",
							 column, format_type_be(metadata_types[t].types[0]))));
		/* an Avro source's keys are Avro too: a column of any type holds them */
		if (TupleDescAttr(desc, attno)->atttypid != metadata_types[t].types[0] &&
			TupleDescAttr(desc, attno)->atttypid != metadata_types[t].types[1] &&
			!(src->metadata_kinds[m] == SOURCE_META_KEY && source_keys_are_avro(src)))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" holds the message's %s, so its type must be %s",
							column, metadata_types[t].name, metadata_types[t].types_text),
					 errdetail("It is declared as %s.", format_type_be(TupleDescAttr(desc, attno)->atttypid))));
		map[attno] = src->metadata_kinds[m];
	}
	return map;
}

/* Quote a possibly schema-qualified name for SQL. */

Oid
source_register(const char *name, const char *kind, const char *brokers, const char *topic,
				Oid table, const char *slot_name, const char *format, const char *columns,
				Jsonb *options, List *types, List *typmods, List *collations, List *names,
				bool changelog)
{
	StringInfoData sql;
	int32		source_id;
	Oid			relid;
	ListCell   *lt,
			   *lm,
			   *lc,
			   *ln;
	bool		first = true;
	SourceInfo	parsed;

	/*
	 * The zone the source's batches run in is recorded with its options (as
	 * pg_timezone_names spells it), the default too: what a source was
	 * created with stays, whatever later versions take as default.
	 */
	parse_source_options(&parsed, options);
	if (jsonb_get_text(options, "timezone") != NULL)
		parsed.timezone = source_timezone_name(parsed.timezone);

	/* recorded as PostgreSQL names the view: 'Orders' is orders */
	name = catalog_new_name(name, "source");
	foreach(ln, names)
		if (strcmp(strVal(lfirst(ln)), CHANGE_COLUMN) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_RESERVED_NAME),
					 errmsg("column name \"%s\" is reserved", CHANGE_COLUMN),
					 errdetail("A changelog source's view has a column of that name, which says whether a row is added or retracted."),
					 errhint("Rename the column.")));

	/* the catalog row first: the view's body needs the source id */
	source_id = catalog_insert_source(name, kind, brokers, topic, format, columns, options,
									  parsed.timezone, table, slot_name);

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE VIEW %s AS SELECT * FROM streamwin.source_rows(%d) AS s(",
					 quote_name_text(name), source_id);
	forfour(lt, types, lm, typmods, lc, collations, ln, names)
	{
		Oid			collation = lfirst_oid(lc);

		appendStringInfo(&sql, "%s%s %s", first ? "" : ", ",
						 quote_identifier(strVal(lfirst(ln))),
						 format_type_with_typemod(lfirst_oid(lt), lfirst_int(lm)));
		/* a query over the source orders and compares as over the table */
		if (OidIsValid(collation) && collation != get_typcollation(lfirst_oid(lt)))
			appendStringInfo(&sql, " COLLATE %s", generate_collation_name(collation));
		first = false;
	}
	if (changelog)
		appendStringInfo(&sql, ", %s pg_catalog.int2", CHANGE_COLUMN);
	appendStringInfoChar(&sql, ')');
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create the view of source \"%s\"", name);
	CommandCounterIncrement();

	relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							 NoLock, false);
	catalog_set_source_relation(source_id, relid);
	return relid;
}

/*
 * streamwin.drop_source(name): drop the source's view and catalog row.
 * Queries reading the source must be dropped first.
 */
Datum
streamwin_drop_source(PG_FUNCTION_ARGS)
{
	static const char *const args[] = {"the source name"};
	char	   *name;
	SourceInfo *src;
	char	   *readers;

	check_args_not_null(fcinfo, 1, args);
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	SPI_connect();
	src = catalog_get_source(name, false);
	catalog_check_owner(src->owner, "source", name);

	/*
	 * Queries that read it already refuse the drop at once, before it
	 * queues for the view, which every batch of theirs would then wait
	 * behind.  Else the view before the row: a create_query over the
	 * source holds the view from its parse on, and its row of
	 * query_sources takes the row's key.  Taking the row first, the drop
	 * would wait for the view while the create_query waits for the row (a
	 * deadlock); so it waits for the create_query, and then counts its
	 * query a reader.
	 */
	readers = catalog_source_readers(src->source_id, false);
	if (readers == NULL)
	{
		LockRelationOid(src->relation, AccessExclusiveLock);
		readers = catalog_source_readers(src->source_id, true);
	}
	if (readers != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop source \"%s\" because queries read it", name),
				 errdetail("Queries reading the source: %s.", readers),
				 errhint("Drop those queries first with streamwin.drop_query().")));
	/* e.g. a table source's slot goes when the drop commits */
	if (source_ops(src)->dropped)
		source_ops(src)->dropped(src);
	catalog_delete_source(src);

	/* the view may already be gone if the user dropped it by hand */
	if (get_rel_name(src->relation) != NULL)
		spi_run(psprintf("DROP VIEW %s", qualified_relname(src->relation)));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * source_change_attno
 *		A changelog source's row type ends with CHANGE_COLUMN (see source.h);
 *		its attribute number, or 0 for an append stream.
 */
AttrNumber
source_change_attno(TupleDesc desc)
{
	Form_pg_attribute last;

	if (desc->natts == 0)
		return 0;
	last = TupleDescAttr(desc, desc->natts - 1);
	if (last->attisdropped || strcmp(NameStr(last->attname), CHANGE_COLUMN) != 0)
		return 0;
	Assert(last->atttypid == INT2OID);
	return desc->natts;
}

/*
 * source_row_deform
 *		A table source's row (its payload a tuple) into values/nulls of desc.
 *		A changelog row copied from the table as is stops before the change
 *		column: its change is the SourceRow's.  Columns the tuple lacks are
 *		NULL (metadata columns, which the caller fills).
 */
void
source_row_deform(TupleDesc desc, AttrNumber change_attno, const SourceRow *row,
				  Datum *values, bool *nulls)
{
	HeapTupleData tuple;

	tuple_from_body(&tuple, row->payload, row->len);
	heap_deform_tuple(&tuple, desc, values, nulls);
	if (change_attno > 0 && HeapTupleHeaderGetNatts(tuple.t_data) < change_attno)
	{
		values[change_attno - 1] = Int16GetDatum(row->change);
		nulls[change_attno - 1] = false;
	}
}

/* --- the source interface ------------------------------------------------ */

/* Every kind of source; a new kind is one file and one line here. */
static const SourceOps *const source_kinds[] = {
	&kafka_source_ops,
	&table_source_ops,
};

const SourceOps *
source_ops(const SourceInfo *src)
{
	for (int i = 0; i < (int) lengthof(source_kinds); i++)
		if (strcmp(source_kinds[i]->kind, src->kind) == 0)
			return source_kinds[i];
	elog(ERROR, "streamwin: source \"%s\" is of unknown kind \"%s\"", src->name, src->kind);
	pg_unreachable();
}

SourceReader *
source_reader_open(SourceInfo *src, QueryInfo *q, int source_index, MemoryContext parent,
				   bool in_worker)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "streamwin source reader",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	SourceReader *rd = palloc0(sizeof(SourceReader));

	rd->ops = source_ops(src);
	rd->source = src;
	rd->query = q;
	rd->source_index = source_index;
	rd->qsource = &q->sources[source_index];
	rd->cxt = cxt;
	rd->in_worker = in_worker;
	source_check_view(src);
	rd->desc = source_tupdesc(src->relation);
	PG_TRY();
	{
		rd->ops->open(rd);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		source_reader_close(rd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	return rd;
}

void
source_reader_close(SourceReader *rd)
{
	if (rd == NULL)
		return;
	rd->ops->close(rd);
	MemoryContextDelete(rd->cxt);
}

int
source_part_index(SourceReader *rd, int32 partition)
{
	/* few partitions, looked up once per row: a linear scan from a guess */
	if (partition >= 0 && partition < rd->nparts && rd->parts[partition].partition == partition)
		return partition;
	for (int i = 0; i < rd->nparts; i++)
		if (rd->parts[i].partition == partition)
			return i;
	return -1;
}

/* Refuse the name of a source that exists (inside SPI). */
void
source_check_new_name(const char *name)
{
	catalog_lock_new_name('s', name);
	if (catalog_get_source(name, true) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("source \"%s\" already exists", name)));
}

/*
 * source_keys_are_avro
 *		Are the source's message keys Avro in Confluent's wire format (a
 *		source of format avro with a schema registry), which a key metadata
 *		column of another type than bytea holds decoded?
 */
bool
source_keys_are_avro(const SourceInfo *src)
{
	return src->format != NULL && strcmp(src->format, "avro") == 0 &&
		option_value(src->options, "schema_registry") != NULL;
}

char *
source_key_names(List *names)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, names)
		appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", quote_identifier(strVal(lfirst(lc))));
	return buf.data;
}
