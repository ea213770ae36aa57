/*-------------------------------------------------------------------------
 *
 * source.c
 *	  create_kafka_source / create_table_source / drop_source, and the view
 *	  that makes a source usable as a relation.
 *
 * A source named "orders" is a view
 *		SELECT * FROM streamwin.source_rows(<id>) AS s(<its columns>)
 * so that queries over it are parsed, type-checked and planned by
 * PostgreSQL like queries over any table.  source_rows() returns the rows
 * of the batch the current backend is processing (set by batch.c through
 * source_set_batch_input) and nothing otherwise: reading a source outside
 * a batch is harmless and empty.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

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
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/varlena.h"

#include "streamwin.h"
#include "source.h"
#include "table_source.h"

PG_FUNCTION_INFO_V1(streamwin_create_kafka_source);
PG_FUNCTION_INFO_V1(streamwin_create_table_source);
PG_FUNCTION_INFO_V1(streamwin_drop_source);
PG_FUNCTION_INFO_V1(streamwin_source_rows);

static BatchInput *current_input = NULL;

/*
 * source_set_batch_input
 *		Make the source's view return these rows in this backend (NULL: none).
 *		The caller owns the memory and must clear the input before freeing it,
 *		also on error.
 */
void
source_set_batch_input(BatchInput *input)
{
	current_input = input;
}

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

/*
 * streamwin.source_rows(source_id) RETURNS SETOF record: the body of every
 * source view.
 */
Datum
streamwin_source_rows(PG_FUNCTION_ARGS)
{
	int32		source_id = PG_GETARG_INT32(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	bool		numbered = PG_NARGS() > 1 && PG_GETARG_BOOL(1);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (current_input == NULL || current_input->source_id != source_id)
		return (Datum) 0;
	if (!numbered)
	{
		for (int i = 0; i < current_input->ntuples; i++)
			tuplestore_puttuple(rsinfo->setResult, current_input->tuples[i]);
	}
	else
	{
		/* (position, columns...): the expected row type has one more column */
		int			natts = rsinfo->setDesc->natts;
		Datum	   *values = palloc(sizeof(Datum) * natts);
		bool	   *nulls = palloc(sizeof(bool) * natts);
		TupleDesc	rowdesc = CreateTupleDescCopy(rsinfo->setDesc);

		/* the source's own columns: the expected ones after the first */
		for (int a = 1; a < natts; a++)
			TupleDescCopyEntry(rowdesc, a, rsinfo->setDesc, a + 1);
		rowdesc->natts = natts - 1;
		for (int i = 0; i < current_input->ntuples; i++)
		{
			values[0] = Int32GetDatum(i);
			nulls[0] = false;
			heap_deform_tuple(current_input->tuples[i], rowdesc, values + 1, nulls + 1);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/*
 * Parse a column definition list ("a bigint, b text") with PostgreSQL's own
 * grammar, by parsing it as the body of a CREATE TABLE.  Everything but
 * plain column definitions is refused, so the text cannot smuggle other
 * clauses in; the view is then built from the resolved types, never from
 * the user's text.
 */
static List *
parse_column_list(const char *columns, List **typmods_out, List **names_out)
{
	StringInfoData sql;
	List	   *raw;
	CreateStmt *stmt;
	ListCell   *lc;
	List	   *types = NIL;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE streamwin_columns (%s)", columns);
	PG_TRY();
	{
		raw = raw_parser(sql.data, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		/* the position refers to our wrapper, so report it plainly */
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid column list: \"%s\"", columns),
				 errhint("Write the columns as in CREATE TABLE, for example 'order_id bigint, region text, event_time timestamptz'.")));
	}
	PG_END_TRY();

	if (list_length(raw) != 1 ||
		!IsA(linitial_node(RawStmt, raw)->stmt, CreateStmt))
		goto invalid;
	stmt = (CreateStmt *) linitial_node(RawStmt, raw)->stmt;
	if (stmt->inhRelations != NIL || stmt->partspec != NULL ||
		stmt->partbound != NULL || stmt->ofTypename != NULL ||
		stmt->options != NIL || stmt->tablespacename != NULL ||
		stmt->accessMethod != NULL || stmt->oncommit != ONCOMMIT_NOOP ||
		stmt->tableElts == NIL)
		goto invalid;

	foreach(lc, stmt->tableElts)
	{
		ColumnDef  *col = (ColumnDef *) lfirst(lc);
		Oid			typid;
		int32		typmod;

		if (!IsA(col, ColumnDef) || col->constraints != NIL)
			goto invalid;
		typenameTypeIdAndMod(NULL, col->typeName, &typid, &typmod);
		if (get_typtype(typid) == TYPTYPE_PSEUDO)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("column \"%s\" cannot be of pseudo-type %s",
							col->colname, format_type_be(typid))));
		for (ListCell *prev = list_head(*names_out); prev != NULL;
			 prev = lnext(*names_out, prev))
			if (strcmp(strVal(lfirst(prev)), col->colname) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" specified more than once", col->colname)));
		types = lappend_oid(types, typid);
		*typmods_out = lappend_int(*typmods_out, typmod);
		*names_out = lappend(*names_out, makeString(col->colname));
	}
	return types;

invalid:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
			 errmsg("invalid column list: \"%s\"", columns),
			 errdetail("Only column names and types are allowed; constraints and table clauses are not."),
			 errhint("Write the columns as in CREATE TABLE, for example 'order_id bigint, region text, event_time timestamptz'.")));
	return NIL;					/* keep compiler quiet */
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
		if (TupleDescAttr(desc, attno)->atttypid != metadata_types[t].types[0] &&
			TupleDescAttr(desc, attno)->atttypid != metadata_types[t].types[1])
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
static char *
quote_qualified_name(const char *name)
{
	List	   *parts = stringToQualifiedNameList(name);
	RangeVar   *rv = makeRangeVarFromNameList(parts);

	return rv->schemaname ? quote_qualified_identifier(rv->schemaname, rv->relname)
		: pstrdup(quote_identifier(rv->relname));
}

/*
 * Record a source in the catalog and create its view (owned by the caller,
 * in the caller's current schema) with the given columns; returns the
 * view's oid.  Inside SPI.
 */
static Oid
source_register(const char *name, const char *kind, const char *brokers, const char *topic,
				Oid table, const char *slot_name, const char *format, const char *columns,
				Jsonb *options, List *types, List *typmods, List *names)
{
	StringInfoData sql;
	int32		source_id;
	Oid			relid;
	CatalogRole role;
	Oid			argtypes[10] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, OIDOID,
	TEXTOID, OIDOID, TEXTOID};
	Datum		args[10];
	char		nulls[10];
	ListCell   *lt,
			   *lm,
			   *ln;
	bool		first = true;

	/* the catalog row first: the view's body needs the source id */
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
	catalog_enter(&role);
	if (SPI_execute_with_args("INSERT INTO streamwin.source_catalog "
							  "(name, relation, kind, brokers, topic, format, columns, options, owner, "
							  " source_table, slot_name) "
							  "VALUES ($1, 0, $8, $2, $3, $4, $5, $6, $7, $9, $10) RETURNING source_id",
							  10, argtypes, args, nulls, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert into streamwin.source_catalog");
	source_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											SPI_tuptable->tupdesc, 1, &(bool) {false}));
	catalog_leave(&role);

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE VIEW %s AS SELECT * FROM streamwin.source_rows(%d) AS s(",
					 quote_qualified_name(name), source_id);
	forthree(lt, types, lm, typmods, ln, names)
	{
		appendStringInfo(&sql, "%s%s %s", first ? "" : ", ",
						 quote_identifier(strVal(lfirst(ln))),
						 format_type_with_typemod(lfirst_oid(lt), lfirst_int(lm)));
		first = false;
	}
	appendStringInfoChar(&sql, ')');
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create the view of source \"%s\"", name);
	CommandCounterIncrement();

	relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							 NoLock, false);
	argtypes[0] = OIDOID;
	argtypes[1] = INT4OID;
	args[0] = ObjectIdGetDatum(relid);
	args[1] = Int32GetDatum(source_id);
	catalog_enter(&role);
	if (SPI_execute_with_args("UPDATE streamwin.source_catalog SET relation = $1 WHERE source_id = $2",
							  2, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update streamwin.source_catalog");
	catalog_leave(&role);
	return relid;
}

/*
 * streamwin.create_kafka_source(name, brokers, topic, columns, format, options)
 */
Datum
streamwin_create_kafka_source(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *brokers;
	char	   *topic;
	char	   *columns;
	char	   *format_name;
	Jsonb	   *options;
	SourceFormat format;
	List	   *types;
	List	   *typmods = NIL;
	List	   *names = NIL;
	Oid			relid;

	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("arguments of create_kafka_source must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	brokers = text_to_cstring(PG_GETARG_TEXT_PP(1));
	topic = text_to_cstring(PG_GETARG_TEXT_PP(2));
	columns = text_to_cstring(PG_GETARG_TEXT_PP(3));
	format_name = text_to_cstring(PG_GETARG_TEXT_PP(4));
	options = PG_GETARG_JSONB_P(5);

	if (brokers[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("brokers must not be empty"),
				 errhint("Give a comma-separated list of host:port, for example 'localhost:9092'.")));
	if (topic[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic must not be empty")));
	format = source_format_from_name(format_name);
	source_options_validate(options);
	types = parse_column_list(columns, &typmods, &names);

	SPI_connect();
	if (catalog_get_source(name, true) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("source \"%s\" already exists", name)));
	relid = source_register(name, "kafka", brokers, topic, InvalidOid, NULL,
							source_format_name(format), columns, options, types, typmods, names);
	{
		SourceInfo	parsed;
		TupleDesc	desc = source_tupdesc(relid);

		parse_source_options(&parsed, options);
		decoder_check_columns(format, desc, source_metadata_map(&parsed, desc));
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * A table source's "metadata" columns come after the table's: the commit
 * time of the row's transaction (timestamp: timestamptz), its commit LSN
 * (offset: pg_lsn) and the row's number within it (partition: integer).
 * A row has no key or headers.
 */
static void
add_table_metadata_columns(const SourceInfo *src, StringInfo columns, List **types,
						   List **typmods, List **names)
{
	for (int m = 0; m < src->nmetadata; m++)
	{
		const char *column = src->metadata_columns[m];
		Oid			type;
		ListCell   *lc;

		switch (src->metadata_kinds[m])
		{
			case SOURCE_META_TIMESTAMP:
				type = TIMESTAMPTZOID;
				break;
			case SOURCE_META_OFFSET:
				type = LSNOID;
				break;
			case SOURCE_META_PARTITION:
				type = INT4OID;
				break;
			default:
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("a table source has no message %s for column \"%s\"",
								src->metadata_kinds[m] == SOURCE_META_KEY ? "key" : "headers", column),
						 errhint("A table source's \"metadata\" may name the commit \"timestamp\", the commit LSN (\"offset\") and the row's number in its transaction (\"partition\").")));
		}
		foreach(lc, *names)
			if (strcmp(strVal(lfirst(lc)), column) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("option \"metadata\" names column \"%s\", which the table has already", column),
						 errhint("Choose another name for the metadata column.")));
		*types = lappend_oid(*types, type);
		*typmods = lappend_int(*typmods, -1);
		*names = lappend(*names, makeString(pstrdup(column)));
		appendStringInfo(columns, ", %s %s", quote_identifier(column), format_type_be(type));
	}
}

/*
 * streamwin.create_table_source(name, relation, options): the rows inserted
 * into a table, through a logical replication slot of the source's own.
 * The source's columns are the table's, by name and type, as of now.
 */
Datum
streamwin_create_table_source(PG_FUNCTION_ARGS)
{
	static const char *const valid[] = {"starting_offsets", "max_records_per_batch", "metadata", NULL};
	char	   *name;
	Oid			table;
	Jsonb	   *options;
	SourceInfo	tmp;
	Relation	rel;
	TupleDesc	desc;
	List	   *types = NIL;
	List	   *typmods = NIL;
	List	   *names = NIL;
	StringInfoData columns;
	char	   *slot;

	for (int i = 0; i < 3; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("arguments of create_table_source must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	table = PG_GETARG_OID(1);
	options = PG_GETARG_JSONB_P(2);

	table_source_check_relation(table);
	jsonb_check_keys(options, valid, "table source");
	parse_source_options(&tmp, options);

	/* the table's columns, as the source's */
	initStringInfo(&columns);
	rel = relation_open(table, AccessShareLock);
	desc = RelationGetDescr(rel);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (att->attisdropped)
			continue;
		types = lappend_oid(types, att->atttypid);
		typmods = lappend_int(typmods, att->atttypmod);
		names = lappend(names, makeString(pstrdup(NameStr(att->attname))));
		appendStringInfo(&columns, "%s%s %s", columns.len ? ", " : "",
						 quote_identifier(NameStr(att->attname)),
						 format_type_with_typemod(att->atttypid, att->atttypmod));
	}
	relation_close(rel, AccessShareLock);
	add_table_metadata_columns(&tmp, &columns, &types, &typmods, &names);
	if (types == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("table \"%s\" has no columns", get_rel_name(table))));

	SPI_connect();
	if (catalog_get_source(name, true) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("source \"%s\" already exists", name)));
	/* before anything is written: PostgreSQL requires it of slot creation */
	slot = source_slot_create();
	source_register(name, "table", NULL, NULL, table, slot, "row", columns.data, options,
					types, typmods, names);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * streamwin.drop_source(name): drop the source's view and catalog row.
 * Queries reading the source must be dropped first.
 */
Datum
streamwin_drop_source(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	SourceInfo *src;
	CatalogRole role;
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1];
	char	   *relname;

	SPI_connect();
	src = catalog_get_source(name, false);
	catalog_check_owner(src->owner, "source", name);

	args[0] = Int32GetDatum(src->source_id);
	catalog_enter(&role);
	if (SPI_execute_with_args("SELECT string_agg(quote_ident(name), ', ' ORDER BY name) "
							  "FROM streamwin.query_catalog WHERE source_id = $1",
							  1, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read streamwin.query_catalog");
	{
		bool		isnull;
		Datum		users = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("cannot drop source \"%s\" because queries read it", name),
					 errdetail("Queries reading the source: %s.", TextDatumGetCString(users)),
					 errhint("Drop those queries first with streamwin.drop_query().")));
	}
	/* the slot goes when the drop commits: nothing is left holding WAL */
	if (src->kind == SOURCE_TABLE)
		source_slot_drop_at_commit(src->slot_name);
	if (SPI_execute_with_args("DELETE FROM streamwin.source_catalog WHERE source_id = $1",
							  1, argtypes, args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from streamwin.source_catalog");
	argtypes[0] = TEXTOID;
	args[0] = CStringGetTextDatum(name);
	if (SPI_execute_with_args("DELETE FROM streamwin.dead_letter_log WHERE source = $1",
							  1, argtypes, args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete the dead letters of source \"%s\"", name);
	catalog_leave(&role);

	/* the view may already be gone if the user dropped it by hand */
	relname = get_rel_name(src->relation);
	if (relname != NULL)
	{
		char	   *sql = psprintf("DROP VIEW %s",
								   quote_qualified_identifier(get_namespace_name(get_rel_namespace(src->relation)),
															  relname));

		if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not drop the view of source \"%s\"", name);
	}
	SPI_finish();
	PG_RETURN_VOID();
}
