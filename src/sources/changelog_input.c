/*-------------------------------------------------------------------------
 *
 * changelog_input.c
 *	  A Kafka message with an envelope as the rows of changes it makes (see
 *	  "Changelogs" in source.h).
 *
 * batch_input.c hands every message of a changelog source here, and does
 * the rest as for any row: the metadata columns (both rows of a message
 * have the message's), the event time, late rows and dead letters.
 *
 *	 debezium	a Debezium change event (decoder_decode_debezium): op c or r
 *				makes its "after" row (+1); u its "before" row (-1), then
 *				its "after" row (+1); d its "before" row (-1); a tombstone
 *				(a null value, which follows a delete) makes nothing.  A
 *				row that leaves one of the source's key columns NULL is a
 *				dead letter.  With key columns (a keyed decoder: its query
 *				keeps each key's row, op_upsert.c), the rows are an
 *				upsert's instead, the "before" row read for its key alone:
 *				c, r and u make their "after" row, the key's new version
 *				(+1), after a deletion of the "before" row's key when an
 *				update changed the key; d a deletion of the "before" row's
 *				key (-1); a tombstone a deletion of its message key's.  So
 *				an update needs no "before" row, a delete's may hold the
 *				key alone (Debezium without REPLICA IDENTITY FULL), a
 *				compacted topic's tombstone deletes its key, and an event
 *				delivered twice changes nothing the second time.  Op t (a truncate) deletes every key: one row
 *				of the change column 0, all others NULL (without key
 *				columns the batch fails: nothing kept can be retracted).
 *	 upsert		the value, decoded in the source's format, is the new row of
 *				the message key (+1); a null value deletes the key: a row of
 *				the key columns, every other column NULL (-1).  The key
 *				columns come from the key: a JSON object's members by name,
 *				or for one key column the key's text when it is not an
 *				object; for a source of Avro by a schema registry, the key
 *				decoded as Avro (Confluent's wire format) by its own writer
 *				schema, a record of the key columns or, for one key column,
 *				its value; a message without a key, or whose key leaves a key
 *				column NULL, is a dead letter.  These rows are not the
 *				changes yet: the upsert operator (op_upsert.c), which keeps
 *				each key's last row, turns them into the exact retraction
 *				of that row and the new one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

#include "changelog_input.h"
#include "datum_image.h"
#include "jsonb_util.h"
#include "spi_util.h"

struct ChangeDecoder
{
	SourceEnvelope envelope;
	bool		keyed;			/* rows of an upsert: see the file header */
	MessageDecoder *values;		/* of the message's value */
	TupleDesc	desc;			/* the source's row type */
	const char *source;			/* its name */
	SourceReader *reader;		/* its partitions: a truncate needs one */
	int			natts;
	int			change_index;	/* the change column's, 0-based */
	Datum	   *row_values[2];	/* the rows of a message, natts each */
	bool	   *row_nulls[2];
	/* upsert: the key columns, read from the message key */
	int			nkeys;
	int		   *key_index;		/* per key column, its index in the row */
	const char **key_names;
	MessageDecoder *key_json;	/* a JSON object of the key columns */
	MessageDecoder *key_text;	/* one key column: the key's text, or NULL */
	int			nplaceholders;	/* what Debezium's placeholder reads as, per */
	int		   *placeholder_col;	/* column whose type takes it */
	Datum	   *placeholder;
	MessageDecoder *key_avro;	/* Avro keys (schema registry), or NULL */
	Datum	   *key_values;
	bool	   *key_nulls;
};

/* The index of column name in desc, or -1. */
static int
column_index(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), name) == 0)
			return i;
	return -1;
}

SourceMetadata *
changelog_decode_map(const SourceInfo *src, TupleDesc desc, SourceEnvelope envelope,
					 List *key_columns)
{
	SourceMetadata *map = source_metadata_map(src, desc);
	AttrNumber	change = source_change_attno(desc);
	ListCell   *lc;

	if (envelope == ENVELOPE_APPEND)
		return map;
	if (map == NULL)
		map = palloc0(sizeof(SourceMetadata) * desc->natts);
	if (change == 0)
		elog(ERROR, "streamwin: changelog source \"%s\" has no column %s", src->name, CHANGE_COLUMN);
	map[change - 1] = SOURCE_META_ENVELOPE;
	if (envelope != ENVELOPE_UPSERT)
		return map;
	foreach(lc, key_columns)
	{
		int			i = column_index(desc, strVal(lfirst(lc)));

		if (i < 0)
			elog(ERROR, "streamwin: key column \"%s\" of source \"%s\" is not one of its columns",
				 strVal(lfirst(lc)), src->name);
		map[i] = SOURCE_META_ENVELOPE;
	}
	return map;
}

/* The source's key columns (none: nkeys 0): their names and places. */
static void
key_columns_find(ChangeDecoder *cd, SourceReader *rd)
{
	List	   *keys = rd->ops->key_columns(rd->source);
	ListCell   *lc;
	int			k = 0;

	cd->nkeys = list_length(keys);
	cd->key_index = palloc(sizeof(int) * Max(cd->nkeys, 1));
	cd->key_names = palloc(sizeof(char *) * Max(cd->nkeys, 1));
	foreach(lc, keys)
	{
		cd->key_names[k] = strVal(lfirst(lc));
		cd->key_index[k] = column_index(rd->desc, cd->key_names[k]);
		if (cd->key_index[k] < 0)
			elog(ERROR, "streamwin: key column \"%s\" of source \"%s\" is not one of its columns",
				 cd->key_names[k], rd->source->name);
		k++;
	}
}

/* The key columns' decoders: a row type of those columns alone. */
static void
key_decoders_create(ChangeDecoder *cd, SourceReader *rd)
{
	TupleDesc	key_desc;

	if (cd->nkeys == 0)
		elog(ERROR, "streamwin: upsert source \"%s\" has no key columns", rd->source->name);
	key_desc = CreateTemplateTupleDesc(cd->nkeys);
	for (int k = 0; k < cd->nkeys; k++)
		TupleDescCopyEntry(key_desc, k + 1, rd->desc, cd->key_index[k] + 1);
	if (source_format_from_name(rd->source->format) == SOURCE_FORMAT_AVRO &&
		option_value(rd->source->options, "schema_registry") != NULL)
	{
		cd->key_avro = decoder_create(SOURCE_FORMAT_AVRO, key_desc, NULL);
		decoder_set_part(cd->key_avro, "key");
	}
	cd->key_json = decoder_create(SOURCE_FORMAT_JSON, key_desc, NULL);
	decoder_set_part(cd->key_json, "key");
	if (cd->nkeys == 1)
	{
		cd->key_text = decoder_create(SOURCE_FORMAT_TEXT, key_desc, NULL);
		decoder_set_part(cd->key_text, "key");
	}
	cd->key_values = palloc(sizeof(Datum) * cd->nkeys);
	cd->key_nulls = palloc(sizeof(bool) * cd->nkeys);
}

/*
 * What Debezium writes for a value it did not have: a large (TOASTed) value
 * an update left unchanged, in a table whose REPLICA IDENTITY is not FULL
 * (its option unavailable.value.placeholder, this by default): this text,
 * these bytes for a bytea (base64 in JSON, which a bytea column without the
 * schema's logical type takes as its text).
 */
#define DEBEZIUM_UNAVAILABLE "__debezium_unavailable_value"
#define DEBEZIUM_UNAVAILABLE_BASE64 "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="

/* An input function's call: its arguments, and the value it gives */
typedef struct InputCall
{
	Form_pg_attribute att;
	const char *text;
	Datum		value;
} InputCall;

static void
input_call(void *arg)
{
	InputCall  *in = arg;
	Oid			func;
	Oid			ioparam;

	getTypeInputInfo(in->att->atttypid, &func, &ioparam);
	in->value = OidInputFunctionCall(func, (char *) in->text, ioparam, in->att->atttypmod);
}

/*
 * Column att's value read from text, as its input function reads it with
 * its typmod (a char(n) pads it), if it takes the text: in a subtransaction,
 * once per decoder.
 */
static bool
input_value(Form_pg_attribute att, const char *text, Datum *value)
{
	InputCall	in = {att, text, (Datum) 0};
	ErrorData  *edata = run_in_subtransaction(input_call, &in);

	if (edata != NULL)
	{
		int			category = ERRCODE_TO_CATEGORY(edata->sqlerrcode);

		/*
		 * Not the type's answer but the environment's: a cancel, a
		 * timeout, a shutdown, a lock not had, a deadlock, memory or I/O.
		 * Taken for a refusal, the decoder, kept with the runner, would let
		 * the placeholder through as a value for good.
		 */
		if (category == ERRCODE_OPERATOR_INTERVENTION || category == ERRCODE_INSUFFICIENT_RESOURCES ||
			category == ERRCODE_SYSTEM_ERROR || category == ERRCODE_INTERNAL_ERROR ||
			category == ERRCODE_TRANSACTION_ROLLBACK || category == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
			ReThrowError(edata);
		FreeErrorData(edata);
		return false;
	}
	*value = in.value;
	return true;
}

/*
 * The values Debezium's placeholder reads as in the source's columns:
 * each column whose type takes its text (text, char(n), name, xml,
 * tsvector, a domain of them...), a json or jsonb column as a JSON string,
 * a bytea column as its bytes and as its base64 text.  A column whose type
 * refuses the text makes the event a dead letter by itself.
 */
static void
placeholders_find(ChangeDecoder *cd)
{
	cd->placeholder_col = palloc(sizeof(int) * cd->natts * 2);
	cd->placeholder = palloc(sizeof(Datum) * cd->natts * 2);
	for (int i = 0; i < cd->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(cd->desc, i);
		Oid			base;
		Datum		v;

		if (att->attisdropped || i == cd->change_index)
			continue;
		base = getBaseType(att->atttypid);
		if (base == JSONOID || base == JSONBOID)
		{
			if (input_value(att, "\"" DEBEZIUM_UNAVAILABLE "\"", &v))
			{
				cd->placeholder_col[cd->nplaceholders] = i;
				cd->placeholder[cd->nplaceholders++] = v;
			}
			continue;
		}
		if (base == BYTEAOID)
		{
			bytea	   *b = palloc(VARHDRSZ + strlen(DEBEZIUM_UNAVAILABLE));

			SET_VARSIZE(b, VARHDRSZ + strlen(DEBEZIUM_UNAVAILABLE));
			memcpy(VARDATA(b), DEBEZIUM_UNAVAILABLE, strlen(DEBEZIUM_UNAVAILABLE));
			cd->placeholder_col[cd->nplaceholders] = i;
			cd->placeholder[cd->nplaceholders++] = PointerGetDatum(b);
			b = palloc(VARHDRSZ + strlen(DEBEZIUM_UNAVAILABLE_BASE64));
			SET_VARSIZE(b, VARHDRSZ + strlen(DEBEZIUM_UNAVAILABLE_BASE64));
			memcpy(VARDATA(b), DEBEZIUM_UNAVAILABLE_BASE64, strlen(DEBEZIUM_UNAVAILABLE_BASE64));
			cd->placeholder_col[cd->nplaceholders] = i;
			cd->placeholder[cd->nplaceholders++] = PointerGetDatum(b);
			continue;
		}
		if (input_value(att, DEBEZIUM_UNAVAILABLE, &v))
		{
			cd->placeholder_col[cd->nplaceholders] = i;
			cd->placeholder[cd->nplaceholders++] = v;
		}
	}
}

ChangeDecoder *
change_decoder_create(SourceReader *rd, MessageDecoder *values, bool keyed)
{
	ChangeDecoder *cd = palloc0(sizeof(ChangeDecoder));

	Assert(rd->envelope != ENVELOPE_APPEND);
	Assert(keyed || rd->envelope != ENVELOPE_UPSERT);
	cd->envelope = rd->envelope;
	cd->keyed = keyed;
	cd->values = values;
	cd->desc = rd->desc;
	cd->source = rd->source->name;
	cd->reader = rd;
	cd->natts = rd->desc->natts;
	cd->change_index = source_change_attno(rd->desc) - 1;
	if (cd->change_index < 0)
		elog(ERROR, "streamwin: changelog source \"%s\" has no column %s", rd->source->name,
			 CHANGE_COLUMN);
	for (int r = 0; r < 2; r++)
	{
		cd->row_values[r] = palloc(sizeof(Datum) * cd->natts);
		cd->row_nulls[r] = palloc(sizeof(bool) * cd->natts);
	}
	/* (only Debezium writes the placeholder) */
	if (cd->envelope == ENVELOPE_DEBEZIUM)
		placeholders_find(cd);
	key_columns_find(cd, rd);
	if (cd->keyed && cd->nkeys == 0)
		elog(ERROR, "streamwin: changelog source \"%s\" has no key columns", rd->source->name);
	/* a keyed Debezium source reads a tombstone's key too */
	if (cd->envelope == ENVELOPE_UPSERT || cd->keyed)
		key_decoders_create(cd, rd);
	return cd;
}

bool
change_decoder_keyed(ChangeDecoder *cd)
{
	return cd->keyed;
}

/* Row r of the buffers as the next row of out, with its change. */
static void
add_row(ChangeDecoder *cd, ChangeRows *out, int r, int16 change)
{
	cd->row_values[r][cd->change_index] = Int16GetDatum(change);
	cd->row_nulls[r][cd->change_index] = false;
	out->values[out->nrows] = cd->row_values[r];
	out->nulls[out->nrows] = cd->row_nulls[r];
	out->nrows++;
}

/* Row r of the buffers as its key's deletion: every other column NULL. */
static void
key_only(ChangeDecoder *cd, int r)
{
	for (int i = 0; i < cd->natts; i++)
	{
		bool		is_key = false;

		for (int k = 0; k < cd->nkeys; k++)
			is_key = is_key || cd->key_index[k] == i;
		if (!is_key)
		{
			cd->row_values[r][i] = (Datum) 0;
			cd->row_nulls[r][i] = true;
		}
	}
}

/* Do rows 0 and 1 of the buffers have the same key, byte for byte? */
static bool
same_key(ChangeDecoder *cd)
{
	for (int k = 0; k < cd->nkeys; k++)
	{
		Form_pg_attribute att = TupleDescAttr(cd->desc, cd->key_index[k]);
		int			i = cd->key_index[k];

		if (!datumIsEqual(cd->row_values[0][i], cd->row_values[1][i], att->attbyval, att->attlen))
			return false;
	}
	return true;
}

/*
 * A truncate event: with key columns, one row of the change column 0 and
 * every other column NULL, which the upsert operator turns into the
 * retraction of every key's row; without, no row kept can be retracted,
 * and the batch fails (the queries stop at the event until reset); and so
 * it does on a topic of several partitions.
 */
static const char *
truncate_rows(ChangeDecoder *cd, const SourceRow *m, ChangeRows *out)
{
	/* (a source with key columns whose query predates keeping their rows) */
	if (!cd->keyed)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("Debezium source \"%s\" has a truncate event at partition %d, offset " INT64_FORMAT,
						cd->source, m->partition, m->offset),
				 cd->nkeys == 0 ?
				 errdetail("Without key_columns the source keeps no rows, so its queries cannot retract the rows the truncate deleted.") :
				 errdetail("The query was created before streamwin kept the rows of a Debezium source's keys, so it cannot retract the rows the truncate deleted."),
				 cd->nkeys == 0 ?
				 errhint("Give the source key_columns and create its queries again, or reset them (streamwin.reset_query) to start after the event, from a new snapshot of the table.") :
				 errhint("Create the query again, or reset it (streamwin.reset_query) to start after the event, from a new snapshot of the table.")));

	/*
	 * A truncate event has no key, so Kafka puts it in any partition, and
	 * only within one is it in order with the table's other events: over
	 * several, which rows it deleted is unknown (an insert after it may come
	 * first from another partition, an update before it after).
	 */
	if (cd->reader->nparts > 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("Debezium source \"%s\" has a truncate event at partition %d, offset " INT64_FORMAT,
						cd->source, m->partition, m->offset),
				 errdetail("The source reads %d partitions of the topic, and a truncate event is in order with the table's other events only within one, so which rows it deleted is not known.",
						   cd->reader->nparts),
				 errhint("Reset the source's queries (streamwin.reset_query) to start after the event, from a new snapshot of the table; "
						 "a table that is truncated needs a topic of one partition.")));
	for (int i = 0; i < cd->natts; i++)
	{
		cd->row_values[0][i] = (Datum) 0;
		cd->row_nulls[0][i] = true;
	}
	out->kind = 'T';
	add_row(cd, out, 0, 0);
	return NULL;
}

static const char *decode_key(ChangeDecoder *cd, const SourceRow *m, Datum *values, bool *nulls);

/*
 * The tombstone Debezium sends after a delete, with the deleted row's key:
 * a keyed source deletes that key's row, if it has one.  Once compacted, a
 * topic may hold a key's tombstone alone, its delete event gone: without
 * this, a query reading it then kept the row.  After the delete event, the
 * key has no row, and this changes nothing.  A key that does not hold the
 * key columns (an Avro key without a registry to read it by) leaves the
 * tombstone skipped, as any tombstone was before.
 */
static const char *
tombstone_rows(ChangeDecoder *cd, const SourceRow *m, ChangeRows *out)
{
	/*
	 * An Avro source without a registry has no schema to read an Avro key
	 * by, and its bytes may read as some key's text (id 25's one byte, 0x32,
	 * as "2"): such a tombstone is skipped, not trusted.
	 */
	if (cd->key_avro == NULL &&
		source_format_from_name(cd->reader->source->format) == SOURCE_FORMAT_AVRO)
		return NULL;
	for (int i = 0; i < cd->natts; i++)
	{
		cd->row_values[0][i] = (Datum) 0;
		cd->row_nulls[0][i] = true;
	}
	if (decode_key(cd, m, cd->row_values[0], cd->row_nulls[0]) != NULL)
		return NULL;
	out->kind = 'd';
	add_row(cd, out, 0, -1);
	return NULL;
}

/*
 * Why image r's row (0 before, 1 after) cannot be read: a column of the
 * source holding Debezium's placeholder (placeholders_find), which would go
 * into results as the column's value (or retract a row never added), or
 * NULL.  Columns the source does not declare are not read, whatever they
 * hold.
 */
static const char *
unavailable_value(ChangeDecoder *cd, int r, const char *image)
{
	for (int p = 0; p < cd->nplaceholders; p++)
	{
		int			i = cd->placeholder_col[p];
		Form_pg_attribute att = TupleDescAttr(cd->desc, i);

		if (cd->row_nulls[r][i] || !datum_images_equal(cd->row_values[r][i], cd->placeholder[p], att))
			continue;
		return psprintf("column \"%s\" of the \"%s\" row of a Debezium event holds Debezium's placeholder "
						"for a value it did not have (" DEBEZIUM_UNAVAILABLE "): a large value an update "
						"left unchanged, in a table whose REPLICA IDENTITY is not FULL; ALTER TABLE ... "
						"REPLICA IDENTITY FULL on the captured table makes Debezium send it",
						NameStr(att->attname), image);
	}
	return NULL;
}

static const char *
decode_debezium(ChangeDecoder *cd, const SourceRow *m, ChangeRows *out)
{
	char		op;
	bool		has_before;
	const char *error;

	error = decoder_decode_debezium(cd->values, m->payload, m->len, &op, &has_before,
									cd->row_values[0], cd->row_nulls[0],
									cd->row_values[1], cd->row_nulls[1]);
	if (error == NULL && op == 0 && cd->keyed && m->payload == NULL && m->key != NULL)
		return tombstone_rows(cd, m, out);
	if (error != NULL || op == 0)
		return error;
	if (op == 't')
		return truncate_rows(cd, m, out);
	if (op == 'u' && !has_before && !cd->keyed)
		return pstrdup(cd->nkeys == 0 ?
					   "Debezium event with op \"u\" has no \"before\" row: a source without key_columns "
					   "retracts an update's old row from it" :
					   "Debezium event with op \"u\" has no \"before\" row: a query created before streamwin "
					   "kept the rows of a Debezium source's keys retracts an update's old row from it "
					   "(create the query again)");

	if (has_before && (error = unavailable_value(cd, 0, "before")) != NULL)
		return error;
	if (op != 'd' && (error = unavailable_value(cd, 1, "after")) != NULL)
		return error;

	/*
	 * The key columns name a row: a keyed transform writes and deletes its
	 * result row by them, which a NULL would never find again.
	 */
	for (int k = 0; k < cd->nkeys; k++)
	{
		if (has_before && cd->row_nulls[0][cd->key_index[k]])
			return psprintf("Debezium event's \"before\" row has no value for key column \"%s\"",
							cd->key_names[k]);
		if (op != 'd' && cd->row_nulls[1][cd->key_index[k]])
			return psprintf("Debezium event's \"after\" row has no value for key column \"%s\"",
							cd->key_names[k]);
	}
	out->kind = op == 'c' || op == 'r' ? 'i' : op;
	if (cd->keyed)
	{
		/* the rows of an upsert: the store has the row to retract */
		if (op == 'd' || (op == 'u' && has_before && !same_key(cd)))
		{
			key_only(cd, 0);
			add_row(cd, out, 0, -1);
		}
		if (op != 'd')
			add_row(cd, out, 1, 1);
		return NULL;
	}
	if (op == 'u' || op == 'd')
		add_row(cd, out, 0, -1);
	if (op != 'd')
		add_row(cd, out, 1, 1);
	return NULL;
}

/* Does the key (keylen bytes) start, past JSON whitespace, with an object? */
static bool
key_is_object(const char *key, size_t keylen)
{
	for (size_t i = 0; i < keylen; i++)
	{
		if (key[i] == '{')
			return true;
		if (key[i] != ' ' && key[i] != '\t' && key[i] != '\n' && key[i] != '\r')
			return false;
	}
	return false;
}

/* The key columns of an upsert's message, from its key, into values/nulls. */
static const char *
decode_key(ChangeDecoder *cd, const SourceRow *m, Datum *values, bool *nulls)
{
	const char *error;

	if (m->key == NULL)
		return pstrdup("message has no key, which an upsert source's rows need");
	if (cd->key_avro != NULL)
		error = decoder_decode(cd->key_avro, m->key, m->keylen, cd->key_values, cd->key_nulls);
	else if (key_is_object(m->key, m->keylen))
		error = decoder_decode_key(cd->key_json, cd->key_text, m->key, m->keylen, cd->key_values,
								   cd->key_nulls);
	else if (cd->key_text != NULL)
		error = decoder_decode(cd->key_text, m->key, m->keylen, cd->key_values, cd->key_nulls);
	else
		return pstrdup("message key is not a JSON object, which it must be for several key columns");
	if (error != NULL)
		return psprintf("message key: %s", error);
	for (int k = 0; k < cd->nkeys; k++)
	{
		if (cd->key_nulls[k])
			return psprintf("message key has no value for key column \"%s\"", cd->key_names[k]);
		values[cd->key_index[k]] = cd->key_values[k];
		nulls[cd->key_index[k]] = false;
	}
	return NULL;
}

static const char *
decode_upsert(ChangeDecoder *cd, const SourceRow *m, ChangeRows *out)
{
	Datum	   *values = cd->row_values[0];
	bool	   *nulls = cd->row_nulls[0];
	const char *error = NULL;
	bool		tombstone = m->payload == NULL;

	if (!tombstone)
	{
		error = decoder_decode(cd->values, m->payload, m->len, values, nulls);
		/* Kafka Connect's null value with its schema deletes, as a null value */
		tombstone = error == NULL && decoder_null_payload(cd->values);
	}
	if (tombstone)
	{
		for (int i = 0; i < cd->natts; i++)
		{
			values[i] = (Datum) 0;
			nulls[i] = true;
		}
	}
	if (error == NULL)
		error = decode_key(cd, m, values, nulls);
	if (error != NULL)
		return error;
	out->kind = tombstone ? 't' : 'v';
	add_row(cd, out, 0, tombstone ? -1 : 1);
	return NULL;
}

const char *
change_decode(ChangeDecoder *cd, const SourceRow *m, ChangeRows *out)
{
	out->kind = 0;
	out->nrows = 0;
	if (cd->envelope == ENVELOPE_DEBEZIUM)
		return decode_debezium(cd, m, out);
	return decode_upsert(cd, m, out);
}

MessageDecoder *
change_decoder_avro_keys(ChangeDecoder *cd)
{
	return cd->key_avro;
}
