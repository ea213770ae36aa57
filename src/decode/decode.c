/*-------------------------------------------------------------------------
 *
 * decode.c
 *	  Message format dispatch, decoder set-up, and the text format.
 *
 * This file is the top of decoding and its interface (decode.h): the names
 * of the formats, the creation-time validation of a source's columns,
 * building a decoder, the encoding check every payload goes through, and
 * the hand-over of each message to its format.  The JSON, CSV and Avro
 * parsers live in decode_json.c, decode_csv.c and decode_avro.c (whose
 * schemas the functions at the end of this file add); the text format is
 * small enough to live here.  A Debezium change event in JSON is taken
 * apart by decode_envelope.c, and each of its row images decoded here as a
 * message; one in Avro is read whole by decode_avro.c.  All of them convert
 * values with decode_input() (decode_value.c), at the bottom; none of them
 * calls back up here.
 *
 * src/decode/decode.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "decode.h"
#include "decode_avro.h"
#include "decode_bytes.h"
#include "decode_connect.h"
#include "decode_csv.h"
#include "decode_envelope.h"
#include "decode_json.h"
#include "decode_value.h"

/*
 * The scratch buffer grows to the largest field seen.  Past this size it is
 * given back after the message, so that one huge message does not pin its
 * size in the long-lived decoder context for the life of the worker.
 */
#define DECODE_SCRATCH_KEEP		(64 * 1024)

/*
 * A decoder: the format, and what the format's parser works on (state).
 * Other modules see only the pointer (decode.h).
 */
struct MessageDecoder
{
	SourceFormat format;
	MemoryContext mcxt;			/* holds the decoder, lives as long */
	int			natts;			/* length of values/nulls */
	const char **names;			/* per column: its name */
	const char *part;			/* the part of the message being decoded, for
								 * the error context: NULL (the payload),
								 * "key", "\"after\"", ... */
	const char *part_default;	/* decoder_set_part's */
	DecodeState state;			/* the columns, per-message spans, scratch */
	ConnectSchema *connect;		/* the last Kafka Connect schema read, or NULL */
	bool		null_payload;	/* decoder_null_payload */

	/*
	 * A decoded message sets every attribute: the format sets each column
	 * (every format does, Avro the columns its writer schema lacks to
	 * NULL), and no attribute is dropped or metadata.  Then a row needs no
	 * clearing before it is decoded.  (A Debezium event's two images are
	 * cleared first whatever this says: an op fills one or both.)
	 */
	bool		fills_all;
};

static const char *decode_verify_encoding(MessageDecoder *decoder,
										  const char *payload, int len);
static void decode_column_errcontext(void *arg);
static const char *decode_connect_value(MessageDecoder *decoder, const char *payload, int len,
										Datum *values, bool *nulls);
static const ConnectSchema *connect_schema(MessageDecoder *decoder, const DecodeSpan *schema);
static const LogicalField *connect_row_fields(MessageDecoder *decoder, const DecodeSpan *schema);
static const char *decode_text_message(DecodeState *state,
									   const char *payload, int len,
									   Datum *values, bool *nulls);


/*
 * source_format_from_name
 *		Map a format name as users write it ('json', 'csv', 'text', in any
 *		case) to a SourceFormat.
 *
 * Raises an error for anything else, so it doubles as the validation of the
 * "format" argument of the source creation functions.
 */
SourceFormat
source_format_from_name(const char *name)
{
	if (name != NULL)
	{
		if (pg_strcasecmp(name, "json") == 0)
			return SOURCE_FORMAT_JSON;
		if (pg_strcasecmp(name, "csv") == 0)
			return SOURCE_FORMAT_CSV;
		if (pg_strcasecmp(name, "text") == 0)
			return SOURCE_FORMAT_TEXT;
		if (pg_strcasecmp(name, "avro") == 0)
			return SOURCE_FORMAT_AVRO;
	}

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unrecognized source format \"%s\"",
					name ? name : "(null)"),
			 errhint("Valid formats are \"json\", \"csv\", \"text\" and \"avro\".")));
	pg_unreachable();
}

/*
 * source_format_name
 *		The canonical (lowercase) name of a format, as stored in catalogs and
 *		shown to users.  The result is a constant string.
 */
const char *
source_format_name(SourceFormat format)
{
	switch (format)
	{
		case SOURCE_FORMAT_JSON:
			return "json";
		case SOURCE_FORMAT_CSV:
			return "csv";
		case SOURCE_FORMAT_TEXT:
			return "text";
		case SOURCE_FORMAT_AVRO:
			return "avro";
	}
	elog(ERROR, "unrecognized source format: %d", (int) format);
	pg_unreachable();
}

/*
 * decoder_check_columns
 *		Check, when a source is created, that its columns can be decoded in
 *		the given format; raise an error with a hint otherwise.
 *
 * Checked, for the columns read from the payload (not those meta says hold
 * message metadata): there is at least one; the text format has exactly
 * one; every column type is a complete type with an input function (no
 * shell types, no pseudo-types).  Must be called inside a transaction, as
 * it reads pg_type.  decoder_create() repeats the check, so a decoder is
 * never built for a column list that could not work.
 */
void
decoder_check_columns(SourceFormat format, TupleDesc desc, const SourceMetadata *meta)
{
	int			ncolumns = 0;
	int			nmeta = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		HeapTuple	tup;
		Form_pg_type typ;

		if (attr->attisdropped)
			continue;
		if (meta && meta[i] != SOURCE_META_NONE)
		{
			nmeta++;
			continue;
		}
		ncolumns++;

		tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(attr->atttypid));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for type %u", attr->atttypid);
		typ = (Form_pg_type) GETSTRUCT(tup);

		if (!typ->typisdefined)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("column \"%s\" has type %s, which is only a shell",
							NameStr(attr->attname),
							format_type_be(attr->atttypid)),
					 errhint("Complete the type definition before using it in a source.")));
		if (typ->typtype == TYPTYPE_PSEUDO)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("column \"%s\" has pseudo-type %s",
							NameStr(attr->attname),
							format_type_be(attr->atttypid)),
					 errhint("Source columns need a type whose values can be read from text.")));
		if (!OidIsValid(typ->typinput))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("column \"%s\" has type %s, which has no input function",
							NameStr(attr->attname),
							format_type_be(attr->atttypid)),
					 errhint("Source columns need a type whose values can be read from text.")));

		ReleaseSysCache(tup);
	}

	if (ncolumns == 0 && nmeta > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("every column of the source holds message metadata"),
				 errdetail("A source needs a column for what the message payload carries."),
				 errhint("Declare one, for example \"line text\" with format \"text\".")));
	if (ncolumns == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a source needs at least one column"),
				 errhint("Declare the columns the messages carry, for example \"order_id bigint, region text\".")));

	if (format == SOURCE_FORMAT_TEXT && ncolumns != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("format \"text\" requires exactly one column"),
				 errdetail("The column list has %d columns read from the message payload.", ncolumns),
				 errhint("Declare a single column such as \"line text\", or use format \"json\" or \"csv\" for several columns.")));
}

/*
 * decoder_create
 *		Build a decoder for messages of the given format into tuples of desc.
 *
 * Everything the hot path needs is resolved here: the input function of
 * every column (decode_column_init), the names JSON keys are matched
 * against, and the scratch buffers.  The decoder is
 * allocated in CurrentMemoryContext, which must live as long as the decoder
 * is used; it keeps no reference to desc.  Must be called inside a
 * transaction (catalog access); raises an error if decoder_check_columns()
 * would.
 */
MessageDecoder *
decoder_create(SourceFormat format, TupleDesc desc, const SourceMetadata *meta)
{
	MessageDecoder *decoder;
	DecodeState *state;
	int			ncolumns = 0;

	decoder_check_columns(format, desc, meta);

	decoder = palloc0(sizeof(MessageDecoder));
	state = &decoder->state;
	decoder->format = format;
	decoder->mcxt = CurrentMemoryContext;
	state->encoding = GetDatabaseEncoding();
	decoder->natts = desc->natts;
	state->columns = palloc0(sizeof(DecodeColumn) * desc->natts);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped || (meta && meta[i] != SOURCE_META_NONE))
			continue;
		decode_column_init(&state->columns[ncolumns++], i, attr, decoder->mcxt);
	}
	state->ncolumns = ncolumns;
	decoder->fills_all = ncolumns == desc->natts;
	state->spans = palloc0(sizeof(DecodeSpan) * ncolumns);
	state->missing = palloc0(sizeof(int64) * Max(ncolumns, 1));
	decoder->names = palloc(sizeof(char *) * Max(ncolumns, 1));
	for (int i = 0; i < ncolumns; i++)
		decoder->names[i] = state->columns[i].name;
	initStringInfo(&state->scratch);

	if (format == SOURCE_FORMAT_JSON)
		decode_json_init(state);
	if (format == SOURCE_FORMAT_AVRO)
		decode_avro_init(state, decoder->mcxt);

	return decoder;
}

/*
 * decoder_set_part
 *		Name the part of the message the decoder reads (its "key"), for the
 *		error context of values the column types refuse; NULL: the payload.
 *		part must live as long as the decoder.
 */
void
decoder_set_part(MessageDecoder *decoder, const char *part)
{
	decoder->part_default = part;
}

void
decoder_set_value_memory(MessageDecoder *decoder, MemoryContext cxt)
{
	decode_text_space_set(&decoder->state.text, cxt);
}

/* Every column of values/nulls NULL. */
static void
decode_all_null(MessageDecoder *decoder, Datum *values, bool *nulls)
{
	for (int i = 0; i < decoder->natts; i++)
	{
		values[i] = (Datum) 0;
		nulls[i] = true;
	}
}

/*
 * What every message must be before its format looks at it: small enough
 * for one text value, valid in the database encoding, without a NUL byte.
 * A payload of NULL with len 0 is the empty message.  NULL, or the error.
 */
static const char *
decode_check_payload(MessageDecoder *decoder, const char **payload, size_t len)
{
	/*
	 * Every byte of the payload may have to fit in one text value, which
	 * needs a terminating NUL and a varlena header inside MaxAllocSize.
	 */
	if (len > MaxAllocSize - VARHDRSZ - 1)
		return psprintf("message too large: %zu bytes, at most %d are supported",
						len, (int) (MaxAllocSize - VARHDRSZ - 1));
	if (*payload == NULL)
	{
		if (len > 0)
			return pstrdup("message has no payload");
		*payload = "";
	}
	/* Avro is binary: its strings are checked one by one */
	if (decoder->format == SOURCE_FORMAT_AVRO)
		return NULL;
	return decode_verify_encoding(decoder, *payload, (int) len);
}

/* A message's large value leaves no large buffer behind for the next */
static void
shrink_scratch(MessageDecoder *decoder)
{
	DecodeState *state = &decoder->state;
	StringInfo	buffers[2] = {&state->scratch, &state->logical_text};

	for (int i = 0; i < (int) lengthof(buffers); i++)
		if (buffers[i]->data != NULL && buffers[i]->maxlen > DECODE_SCRATCH_KEEP)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(decoder->mcxt);

			pfree(buffers[i]->data);
			initStringInfo(buffers[i]);
			MemoryContextSwitchTo(oldcxt);
		}
}

/*
 * The decoding of a payload that passed decode_check_payload by its format,
 * as decoder_decode's contract says; part: what of the message it is, for
 * the error context (NULL: the whole payload); logical: the logical types a
 * Kafka Connect schema gives its columns (NULL: none); unwrap: whether a
 * JSON message that names no column is returned as decode_json_wrapped.
 */

static const char *
decode_payload(MessageDecoder *decoder, const char *part, const char *payload, int len,
			   const LogicalField *logical, bool unwrap, Datum *values, bool *nulls)
{
	DecodeState *state = &decoder->state;
	ErrorContextCallback errcallback;
	const char *error = NULL;

	errcallback.callback = decode_column_errcontext;
	errcallback.arg = decoder;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	decoder->part = part;
	state->cur_column = NULL;
	state->cur_field = 0;
	state->logical = logical;
	state->unwrap = unwrap;

	switch (decoder->format)
	{
		case SOURCE_FORMAT_JSON:
			error = decode_json_message(state, payload, len, values, nulls);
			break;
		case SOURCE_FORMAT_CSV:
			error = decode_csv_message(state, payload, len, values, nulls);
			break;
		case SOURCE_FORMAT_TEXT:
			error = decode_text_message(state, payload, len, values, nulls);
			break;
		case SOURCE_FORMAT_AVRO:
			error = decode_avro_message(state, payload, len, values, nulls);
			break;
	}

	error_context_stack = errcallback.previous;
	state->cur_column = NULL;

	shrink_scratch(decoder);

	/* half-decoded values must not be mistaken for a tuple */
	if (error != NULL)
		decode_all_null(decoder, values, nulls);
	return error;
}

/*
 * decoder_decode
 *		Decode one message payload into values/nulls.
 *
 * values and nulls have desc->natts entries (of the desc the decoder was
 * built for); dropped attributes come out NULL.  The payload need not be
 * NUL-terminated and may hold any bytes; it is only read, and only during
 * the call.  Datums of pass-by-reference types are allocated by the input
 * functions in CurrentMemoryContext, which the caller is expected to reset
 * per batch; text values are carved from blocks of the memory the caller
 * gave, if it did (decoder_set_value_memory).
 *
 * Returns NULL on success.  If the message is malformed, returns an error
 * message (palloc'd in CurrentMemoryContext) for streamwin.dead_letters and
 * sets every column NULL.  The column types' input functions may raise
 * errors for values they reject (for example "invalid input syntax for type
 * integer"); those carry an error context line naming the key or field, and
 * the caller must catch them (subtransaction) if the stream is to go on.
 */
const char *
decoder_decode(MessageDecoder *decoder, const char *payload, size_t len,
			   Datum *values, bool *nulls)
{
	const char *error;

	decoder->null_payload = false;
	/* a failed message gets them all NULL below */
	if (!decoder->fills_all)
		decode_all_null(decoder, values, nulls);
	error = decode_check_payload(decoder, &payload, len);
	if (error != NULL)
	{
		decode_all_null(decoder, values, nulls);
		return error;
	}
	error = decode_payload(decoder, decoder->part_default, payload, (int) len, NULL, true, values,
						   nulls);
	if (error == decode_json_wrapped)
		error = decode_connect_value(decoder, payload, (int) len, values, nulls);
	return error;
}

/*
 * A JSON message that names none of the columns, which may be a value in
 * Kafka Connect's wrapper (decode_json_wrapped): {"schema": {...},
 * "payload": {...}} is its payload's row, whose values are read by the
 * schema's logical types (a Kafka Connect source connector's rows, or
 * Debezium's after its ExtractNewRecordState transform); anything else is
 * what it is, a message without the columns' keys.
 */
static const char *
decode_connect_value(MessageDecoder *decoder, const char *payload, int len, Datum *values,
					 bool *nulls)
{
	static const char *const wrapper[2] = {"schema", "payload"};
	DecodeSpan	m[2];

	/* scanned once already: this finds its members, it cannot fail */
	if (decode_json_members(&decoder->state, payload, len, 2, wrapper, m) != NULL)
		elog(ERROR, "streamwin: a scanned JSON message fails a second scan");
	if ((m[0].kind != DJ_OBJECT && m[0].kind != DJ_NULL) || m[1].kind != DJ_OBJECT)
	{
		/* a null value with its schema: what a tombstone is to an upsert */
		decoder->null_payload = (m[0].kind == DJ_OBJECT || m[0].kind == DJ_NULL) &&
			m[1].kind == DJ_NULL;
		return decode_payload(decoder, decoder->part_default, payload, len, NULL, false, values,
							  nulls);
	}
	return decode_payload(decoder, decoder->part_default, m[1].start, m[1].len,
						  connect_row_fields(decoder, &m[0]), false, values, nulls);
}

/*
 * What the wrapper's schema (an object, or not: none) gives the columns:
 * the decoder's schema cache, read, or NULL
 */
static const ConnectSchema *
connect_schema(MessageDecoder *decoder, const DecodeSpan *schema)
{
	if (schema->kind != DJ_OBJECT)
		return NULL;
	if (decoder->connect == NULL)
		decoder->connect = connect_schema_create(decoder->mcxt);
	connect_schema_read(&decoder->state, decoder->connect, schema);
	return decoder->connect;
}

/* ... to a row's columns */
static const LogicalField *
connect_row_fields(MessageDecoder *decoder, const DecodeSpan *schema)
{
	const ConnectSchema *cs = connect_schema(decoder, schema);

	return cs ? cs->row : NULL;
}

/*
 * decoder_null_payload (see decode.h): a null value with its schema, which
 * an upsert source reads as a tombstone, others as the message it is,
 * without the columns' keys
 */
bool
decoder_null_payload(MessageDecoder *decoder)
{
	return decoder->null_payload;
}

/*
 * NULL if a Connect schema of a plain key value is one whose JSON is the
 * value's text (a number, a boolean, a string); else why not: bytes are
 * base64, and a logical type (a name: Decimal, Timestamp, ...) has a
 * text of its own, neither read here.
 */
static const char *
plain_connect_schema(MessageDecoder *decoder, const DecodeSpan *schema)
{
	static const char *const members[2] = {"type", "name"};
	static const char *const plain[] = {"int8", "int16", "int32", "int64", "float32", "float64",
	"boolean", "string"};
	DecodeSpan	m[2];
	const char *error = decode_json_members(&decoder->state, schema->start, schema->len, 2, members, m);
	char	   *type;

	if (error != NULL)
		return error;
	if (m[1].kind != DJ_MISSING && m[1].kind != DJ_NULL)
		return "the key's Kafka Connect schema has a logical type (a \"name\"), which a key that is a plain value is not read by";
	if ((m[0].kind != DJ_STRING && m[0].kind != DJ_STRING_ESCAPED) ||
		(type = decode_json_string(&decoder->state, &m[0])) == NULL)
		return "the key's Kafka Connect schema has no \"type\" string";
	for (int i = 0; i < (int) lengthof(plain); i++)
		if (strcmp(type, plain[i]) == 0)
			return NULL;
	return psprintf("the key's Kafka Connect schema is of type \"%s\", which a key that is a plain value is not read as", type);
}

const char *
decoder_decode_key(MessageDecoder *decoder, MessageDecoder *scalar, const char *key, size_t len,
				   Datum *values, bool *nulls)
{
	static const char *const wrapper[2] = {"schema", "payload"};
	DecodeSpan	m[2];
	const char *error;

	if (decoder->format != SOURCE_FORMAT_JSON)
		return decoder_decode(decoder, key, len, values, nulls);
	if (!decoder->fills_all)
		decode_all_null(decoder, values, nulls);
	error = decode_check_payload(decoder, &key, len);
	if (error == NULL)
		error = decode_json_members(&decoder->state, key, (int) len, 2, wrapper, m);
	if (error != NULL)
	{
		decode_all_null(decoder, values, nulls);
		return error;
	}
	/*
	 * Connect's wrapper: a schema object (or null) and the key's object,
	 * whose values the schema gives their logical types as a row's
	 */
	if ((m[0].kind == DJ_OBJECT || m[0].kind == DJ_NULL) && m[1].kind == DJ_OBJECT)
		return decode_payload(decoder, decoder->part_default, m[1].start, m[1].len,
							  connect_row_fields(decoder, &m[0]), false, values, nulls);

	/*
	 * ... or around one plain value (Connect's ExtractField on the key), the
	 * text of a key of one column: a string's unescaped, a number's as
	 * written
	 */
	if ((m[0].kind == DJ_OBJECT || m[0].kind == DJ_NULL) && scalar != NULL &&
		(m[1].kind == DJ_STRING || m[1].kind == DJ_STRING_ESCAPED || m[1].kind == DJ_NUMBER ||
		 m[1].kind == DJ_TRUE || m[1].kind == DJ_FALSE))
	{
		char	   *text;

		if (m[0].kind == DJ_OBJECT && (error = plain_connect_schema(decoder, &m[0])) != NULL)
			return error;
		text = m[1].kind == DJ_STRING || m[1].kind == DJ_STRING_ESCAPED ?
			decode_json_string(&decoder->state, &m[1]) : pnstrdup(m[1].start, m[1].len);
		if (text == NULL)
			return "the key's payload string has no text form";
		return decoder_decode(scalar, text, strlen(text), values, nulls);
	}
	return decode_payload(decoder, decoder->part_default, key, (int) len, NULL, false, values,
						  nulls);
}

/*
 * One row image of a Debezium event (its name quoted), decoded as a
 * message, its values of the logical types its schema gives them
 * converted (logical: per column, or NULL).
 */
static const char *
decode_image(MessageDecoder *decoder, const char *name, const DecodeSpan *image,
			 const LogicalField *logical, Datum *values, bool *nulls)
{
	const char *error = decode_payload(decoder, name, image->start, image->len, logical, false,
									   values, nulls);

	return error ? psprintf("%s: %s", name, error) : NULL;
}

/*
 * decoder_decode_debezium
 *		Decode one Debezium change event, JSON with or without the
 *		{"schema": ..., "payload": ...} wrapper (decode_envelope.c): *op is
 *		its op ('c', 'r', 'u', 'd', or 't', a truncate, which has none), and
 *		the row images the op has are
 *		decoded each as decoder_decode decodes a message, "before" into
 *		before_values/before_nulls ('d', and 'u' when it has one:
 *		*has_before), "after" into after_values/after_nulls ('c', 'r',
 *		'u'); the others are all NULL.  A tombstone (payload NULL, or the
 *		wrapper's "payload" null) sets *op to 0 and decodes nothing.  Returns
 *		NULL, or why the event cannot be decoded (malformed, another op, an
 *		image the op needs missing), as
 *		decoder_decode does; input functions may raise errors the same way.
 *		The decoder's format must be json, or avro (decoder_avro_set_debezium:
 *		an Avro Debezium event, a record of "op", "before" and "after").
 */
const char *
decoder_decode_debezium(MessageDecoder *decoder, const char *payload, size_t len, char *op,
						bool *has_before, Datum *before_values, bool *before_nulls,
						Datum *after_values, bool *after_nulls)
{
	DecodeSpan	before;
	DecodeSpan	after;
	DecodeSpan	schema;
	const ConnectSchema *cs;
	const LogicalField *before_logical = NULL;
	const LogicalField *after_logical = NULL;
	const char *error;

	Assert(decoder->format == SOURCE_FORMAT_JSON || decoder->format == SOURCE_FORMAT_AVRO);
	/* (the last event's images, decoded into it: what they kept is copied) */
	shrink_scratch(decoder);
	*op = 0;
	*has_before = false;
	decode_all_null(decoder, before_values, before_nulls);
	decode_all_null(decoder, after_values, after_nulls);
	if (payload == NULL && len == 0)
		return NULL;
	error = decode_check_payload(decoder, &payload, len);
	if (error == NULL && decoder->format == SOURCE_FORMAT_AVRO)
	{
		ErrorContextCallback errcallback;

		/* Avro's images are records of the event, decoded as it is read */
		errcallback.callback = decode_column_errcontext;
		errcallback.arg = decoder;
		errcallback.previous = error_context_stack;
		error_context_stack = &errcallback;
		decoder->part = NULL;
		error = decode_avro_debezium(&decoder->state, payload, (int) len, op, has_before,
									 before_values, before_nulls, after_values, after_nulls);
		error_context_stack = errcallback.previous;
		decoder->state.cur_column = NULL;
		if (error != NULL || *op == 't')
		{
			/* (a truncate's images, if it has any, are not its rows) */
			if (error != NULL)
				*op = 0;
			*has_before = false;
			decode_all_null(decoder, before_values, before_nulls);
			decode_all_null(decoder, after_values, after_nulls);
		}
		return error;
	}
	if (error == NULL)
		error = decode_debezium_event(&decoder->state, payload, (int) len, op, &before, &after,
									  &schema);
	if (error == NULL && *op != 0 && (cs = connect_schema(decoder, &schema)) != NULL)
	{
		/* the logical types of the images' fields (a timestamp's integer) */
		before_logical = cs->before;
		after_logical = cs->after;
	}
	if (error == NULL && (*op == 'd' || (*op == 'u' && before.kind == DJ_OBJECT)))
	{
		*has_before = true;
		error = decode_image(decoder, "\"before\"", &before, before_logical, before_values,
							 before_nulls);
	}
	if (error == NULL && *op != 0 && *op != 'd' && *op != 't')
		error = decode_image(decoder, "\"after\"", &after, after_logical, after_values,
							 after_nulls);
	if (error != NULL)
	{
		*op = 0;
		*has_before = false;
		decode_all_null(decoder, before_values, before_nulls);
		decode_all_null(decoder, after_values, after_nulls);
	}
	return error;
}

int64 *
decoder_missing_counts(MessageDecoder *decoder, int *ncolumns, const char *const **names)
{
	*ncolumns = decoder->state.ncolumns;
	*names = decoder->names;
	return decoder->state.missing;
}

/*
 * How many of the payload's first bytes are plain ASCII without a NUL
 * byte, which every server encoding accepts as they are (they all extend
 * ASCII): len for most payloads, answered a word at a time
 * (decode_bytes.h), at a fraction of the cost of the encoding's verifier.
 * Within a word only whether any byte is flagged matters, so the count
 * stops at the start of the first flagged 16 bytes: those before are
 * whole ASCII characters, and the verifier goes on from there.
 */
#ifdef DECODE_WORDWISE
/* Are the 16 bytes at p plain ASCII without a NUL byte? */
static inline bool
ascii16(const char *p)
{
	uint64		v = bytes_load8(p);
	uint64		w = bytes_load8(p + 8);

	/* high bits: of bytes not ASCII, or of a zero byte (bytes_below 1) */
	return (((v | w) & BYTES8(0x80)) | bytes_below(v, 1) | bytes_below(w, 1)) == 0;
}
#endif

static inline int
plain_ascii_prefix(const char *payload, int len)
{
	const char *p = payload;
	const char *end = payload + len;

#ifdef DECODE_WORDWISE
	for (; end - p >= 16; p += 16)
		if (!ascii16(p))
			return p - payload;

	/*
	 * The last few bytes of a payload of 16 or more: its last 16 bytes at
	 * once, some checked again, rather than a loop over each; a flag among
	 * them is left to the loop below, which says where.
	 */
	if (p > payload && p < end && ascii16(end - 16))
		return len;
#endif
	for (; p < end; p++)
		if ((uint8) *p >= 0x80 || *p == '\0')
			break;
	return p - payload;
}

/*
 * decode_verify_encoding
 *		Check that the payload is valid in the database encoding and holds no
 *		NUL byte (text values cannot contain one).
 *
 * Returns NULL if it is, else an error message naming the byte position
 * and the offending bytes.  Every format runs this first, so the parsers
 * may assume well-formed characters; in all server encodings the bytes of a
 * multibyte character have the high bit set, so ASCII delimiters found by a
 * byte-wise scan are always real.
 */
static const char *
decode_verify_encoding(MessageDecoder *decoder, const char *payload, int len)
{
	int			encoding = decoder->state.encoding;
	int			ascii = plain_ascii_prefix(payload, len);
	int			valid;
	int			badlen;
	StringInfoData buf;

	if (ascii == len)
		return NULL;

	/* the length of the valid prefix past the ASCII; stops at a NUL byte too */
	valid = ascii + pg_encoding_verifymbstr(encoding, payload + ascii, len - ascii);
	if (valid == len)
		return NULL;

	if (payload[valid] == '\0')
		return psprintf("message contains a NUL byte at byte %d", valid);

	initStringInfo(&buf);
	appendStringInfo(&buf, "invalid byte sequence for encoding \"%s\" at byte %d:",
					 pg_encoding_to_char(encoding), valid);
	badlen = Min(pg_encoding_mblen(encoding, payload + valid),
				 len - valid);
	for (int i = 0; i < badlen; i++)
		appendStringInfo(&buf, " 0x%02x", (unsigned char) payload[valid + i]);
	return buf.data;
}

/*
 * decode_column_errcontext
 *		Error context callback naming the key or field whose input function
 *		failed, so that the dead letter says where the bad value is.
 *		arg is the MessageDecoder.
 */
static void
decode_column_errcontext(void *arg)
{
	MessageDecoder *decoder = (MessageDecoder *) arg;
	DecodeColumn *column = decoder->state.cur_column;

	if (column == NULL)
		return;

	if (decoder->part != NULL)
	{
		if (decoder->format == SOURCE_FORMAT_JSON)
			errcontext("JSON key \"%s\" of the message's %s", column->name, decoder->part);
		else
			errcontext("the message's %s, for column \"%s\"", decoder->part, column->name);
		return;
	}
	switch (decoder->format)
	{
		case SOURCE_FORMAT_JSON:
			errcontext("JSON key \"%s\" of the message", column->name);
			break;
		case SOURCE_FORMAT_CSV:
			errcontext("CSV field %d (column \"%s\") of the message",
					   decoder->state.cur_field, column->name);
			break;
		case SOURCE_FORMAT_TEXT:
			errcontext("message text for column \"%s\"", column->name);
			break;
		case SOURCE_FORMAT_AVRO:
			errcontext("Avro field \"%s\" of the message", column->name);
			break;
	}
}

/*
 * decode_text_message
 *		The text format: the whole payload is the value of the only column.
 *		Encoding and NUL bytes have been checked already; an empty payload
 *		is a valid (empty) value.
 */
static const char *
decode_text_message(DecodeState *state, const char *payload, int len,
					Datum *values, bool *nulls)
{
	DecodeColumn *column = &state->columns[0];

	state->cur_column = column;
	values[column->attindex] = decode_input(state, column, payload, len);
	nulls[column->attindex] = false;
	return NULL;
}

/* --- the Avro format's schemas ---------------------------------------------- */

const char *
avro_schema_error(const char *json, int len)
{
	char	   *error;

	return avro_schema_parse(json, len, &error) != NULL ? NULL : error;
}

/*
 * decoder_avro_schema_id
 *		The schema id in the Confluent header of payload, or false if it has
 *		none (too short, another magic byte, a negative id: decoding says
 *		why).
 */
bool
decoder_avro_schema_id(const char *payload, size_t len, int32 *id)
{
	const uint8 *p = (const uint8 *) payload;

	if (payload == NULL || len < 5 || p[0] != 0)
		return false;
	*id = (int32) ((uint32) p[1] << 24 | (uint32) p[2] << 16 | (uint32) p[3] << 8 | p[4]);
	return *id >= 0;
}

const char *
decoder_avro_set_plain_schema(MessageDecoder *decoder, const char *json, int len)
{
	MemoryContext old = MemoryContextSwitchTo(decoder->mcxt);
	const char *error;

	Assert(decoder->format == SOURCE_FORMAT_AVRO);
	error = decode_avro_add_schema(&decoder->state, -1, json, len);
	MemoryContextSwitchTo(old);
	return error;
}

bool
decoder_avro_has_schema(MessageDecoder *decoder, int32 id)
{
	return decode_avro_has_schema(&decoder->state, id);
}

const char *
decoder_avro_add_schema(MessageDecoder *decoder, int32 id, const char *json, int len)
{
	MemoryContext old = MemoryContextSwitchTo(decoder->mcxt);
	const char *error;

	Assert(decoder->format == SOURCE_FORMAT_AVRO && id >= 0);
	error = decode_avro_add_schema(&decoder->state, id, json, len);
	MemoryContextSwitchTo(old);
	return error;
}

void
decoder_avro_add_missing(MessageDecoder *decoder, int32 id, const char *reason)
{
	decode_avro_add_missing(&decoder->state, id, reason);
}

void
decoder_avro_set_debezium(MessageDecoder *decoder)
{
	Assert(decoder->format == SOURCE_FORMAT_AVRO);
	decode_avro_set_debezium(&decoder->state);
}

void
decoder_avro_set_whole_value(MessageDecoder *decoder)
{
	Assert(decoder->format == SOURCE_FORMAT_AVRO);
	decode_avro_set_whole_value(&decoder->state);
}

void
decoder_avro_forget_missing(MessageDecoder *decoder)
{
	decode_avro_forget_missing(&decoder->state);
}
