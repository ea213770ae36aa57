/*-------------------------------------------------------------------------
 *
 * decode.h
 *	  Decoding of source message payloads (JSON, CSV, text, Avro) into rows.
 *
 * A source has a message format and a column list (the TupleDesc of the
 * relation that stands for the source).  Every message payload becomes the
 * values of one row of that column list.  Decoding is on the hot path, so
 * everything that needs the catalogs is resolved once, in decoder_create(),
 * and decoder_decode() does no catalog access, builds no parse tree and
 * copies as little as it can.
 *
 * A message that is malformed never raises an error: decoder_decode()
 * returns a description of the problem, which the caller files in
 * streamwin.dead_letters together with the payload.  Only the column types'
 * input functions (int4in, timestamptz_in, ...) may still throw, on values
 * that are well-formed for the format but not for the type; the caller
 * catches those with a subtransaction.
 *
 * Error strings quote byte positions as 0-based offsets into the payload
 * ("at byte 17"), so that they cannot be confused with Kafka offsets.
 *
 * src/decode/decode.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_H
#define STREAMWIN_DECODE_H

#include "access/tupdesc.h"
#include "fmgr.h"
#include "lib/stringinfo.h"

/* Message formats a source may declare */
typedef enum SourceFormat
{
	SOURCE_FORMAT_JSON,			/* one JSON object per message */
	SOURCE_FORMAT_CSV,			/* one RFC 4180 record per message */
	SOURCE_FORMAT_TEXT,			/* the whole payload is the only column */
	SOURCE_FORMAT_AVRO			/* Avro binary, by writer schemas */
} SourceFormat;

/*
 * What a column of a Kafka source holds when it is not read from the
 * payload (the source option "metadata"): the message's partition, offset,
 * timestamp, key or headers.  Decoders skip such columns: a JSON key of that name is
 * ignored, and CSV fields and the text payload go to the other columns.
 */
typedef enum SourceMetadata
{
	SOURCE_META_NONE = 0,
	SOURCE_META_PARTITION,
	SOURCE_META_OFFSET,
	SOURCE_META_TIMESTAMP,
	SOURCE_META_KEY,
	SOURCE_META_HEADERS,
	SOURCE_META_ENVELOPE		/* filled by a Kafka envelope: a changelog's
								 * change column, an upsert source's key
								 * columns (read from the message's key) */
} SourceMetadata;

extern SourceFormat source_format_from_name(const char *name);
extern const char *source_format_name(SourceFormat format);

/* meta: per attribute of desc, or NULL when no column holds metadata */
extern void decoder_check_columns(SourceFormat format, TupleDesc desc,
								  const SourceMetadata *meta);

/*
 * A decoder, opaque: its definition is decode.c's, and what the formats
 * share is in decode_value.h, private to src/decode*.c.
 */
typedef struct MessageDecoder MessageDecoder;

extern MessageDecoder *decoder_create(SourceFormat format, TupleDesc desc,
									  const SourceMetadata *meta);
extern const char *decoder_decode(MessageDecoder *decoder,
								  const char *payload, size_t len,
								  Datum *values, bool *nulls);

/*
 * decoder_null_payload
 *		Whether the message decoder_decode last read was Kafka Connect's
 *		wrapper of a null payload ({"schema": ..., "payload": null}).
 */
extern bool decoder_null_payload(MessageDecoder *decoder);

/*
 * decoder_set_part
 *		Name the part of a message the decoder reads ("key"), for the error
 *		context of values the column types refuse; NULL: its payload.
 */
extern void decoder_set_part(MessageDecoder *decoder, const char *part);

/*
 * decoder_set_value_memory
 *		Until called again, carve the text values the decoder makes from
 *		blocks of cxt instead of a palloc each; NULL: palloc them again.
 *		The values then live exactly as long as cxt, and one must never be
 *		pfree'd alone.  The caller sets NULL before cxt is reset or
 *		deleted (or before any other decoding): the decoder forgets the
 *		rest of its block.
 */
extern void decoder_set_value_memory(MessageDecoder *decoder, MemoryContext cxt);

/*
 * decoder_decode_debezium
 *		Decode a Debezium change event (JSON, with or without Kafka Connect's
 *		{"schema": ..., "payload": ...} wrapper): *op is 'c', 'r', 'u', 'd'
 *		or 't' (a truncate, with no images),
 *		its "before" image (for 'd', and for 'u' when it has one: Debezium
 *		leaves it out without REPLICA IDENTITY FULL; *has_before) decoded
 *		into before_values and its "after" image (for 'c', 'r' and 'u') into
 *		after_values, each exactly as decoder_decode decodes a message, the
 *		others all NULL.  A tombstone (payload NULL) sets *op to 0.  Returns
 *		NULL, or why the
 *		event cannot be decoded (not JSON, no op, another op, an image the op
 *		needs missing or not an object), as decoder_decode does.  Only for a
 *		decoder of format json, or avro after decoder_avro_set_debezium.
 */
extern const char *decoder_decode_debezium(MessageDecoder *decoder, const char *payload,
										   size_t len, char *op, bool *has_before,
										   Datum *before_values, bool *before_nulls,
										   Datum *after_values, bool *after_nulls);

/*
 * decoder_decode_key
 *		A message key, as decoder_decode decodes a message; a JSON key in
 *		Kafka Connect's {"schema": ..., "payload": {...}} wrapper (Debezium's
 *		keys with the JSON converter's schemas) is its payload's object.  A
 *		wrapper around a plain value is that value's text, decoded by scalar
 *		(a text decoder of the one key column; without one, NULL, it is the
 *		object it is).
 */
extern const char *decoder_decode_key(MessageDecoder *decoder, MessageDecoder *scalar,
									  const char *key, size_t len,
									  Datum *values, bool *nulls);

/*
 * decoder_missing_counts
 *		Per column read from the payload (*ncolumns of them, named by
 *		(*names)[i]), how many messages decoder_decode() has decoded without
 *		error whose JSON object had no key for it.  The counts are the
 *		caller's to reset (and to restore, when the messages they counted are
 *		decoded again); they stay 0 for other formats, which have no keys
 *		(a CSV record with a field too few is an error).
 */
extern int64 *decoder_missing_counts(MessageDecoder *decoder, int *ncolumns,
									 const char *const **names);

/*
 * The Avro format.  A decoder of format avro reads Confluent's wire format
 * (a magic byte 0, a 4-byte big-endian schema id, the Avro binary body) by
 * the writer schemas added under their ids, or, once
 * decoder_avro_set_plain_schema has been called, plain Avro bodies of that
 * one schema.  The decoder never fetches a schema: its caller adds the
 * schemas of a batch's ids (decoder_avro_schema_id) before decoding the
 * batch; an id it has not been given is an internal error.
 *
 * avro_schema_error: at a source's creation, NULL if json (len bytes) is a
 * valid Avro schema, else why not.  decoder_avro_set_plain_schema and
 * decoder_avro_add_schema return NULL, or why the messages of that schema
 * cannot be decoded into the decoder's columns (an invalid schema, a field
 * whose type its column cannot hold, naming both): they are dead letters
 * for that reason.  decoder_avro_add_missing: messages of schema id are
 * dead letters for reason until decoder_avro_forget_missing (once per
 * batch, so that an id the registry lacked is asked for again).  These
 * work in the decoder's memory context; the schema functions must run in
 * a transaction (types' input functions, avro-c).
 */
extern const char *avro_schema_error(const char *json, int len);
extern bool decoder_avro_schema_id(const char *payload, size_t len, int32 *id);
extern const char *decoder_avro_set_plain_schema(MessageDecoder *decoder, const char *json, int len);
extern bool decoder_avro_has_schema(MessageDecoder *decoder, int32 id);
extern const char *decoder_avro_add_schema(MessageDecoder *decoder, int32 id,
										   const char *json, int len);
extern void decoder_avro_add_missing(MessageDecoder *decoder, int32 id, const char *reason);
extern void decoder_avro_forget_missing(MessageDecoder *decoder);

/*
 * decoder_avro_set_debezium
 *		Its messages are Debezium change events, records with "op", "before"
 *		and "after" (each a record of the columns' fields, or null), for
 *		decoder_decode_debezium.  Before any schema is added.
 */
extern void decoder_avro_set_debezium(MessageDecoder *decoder);

/*
 * decoder_avro_set_whole_value
 *		For a decoder of one column: each message, whatever its writer
 *		schema (a record too), is that column's value (a message key for a
 *		key metadata column).  Before any schema is added.
 */
extern void decoder_avro_set_whole_value(MessageDecoder *decoder);

#endif							/* STREAMWIN_DECODE_H */
