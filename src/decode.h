/*-------------------------------------------------------------------------
 *
 * decode.h
 *	  Decoding of source message payloads (JSON, CSV, text) into rows.
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
 * src/decode.h
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
	SOURCE_FORMAT_TEXT			/* the whole payload is the only column */
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
	SOURCE_META_HEADERS
} SourceMetadata;

extern SourceFormat source_format_from_name(const char *name);
extern const char *source_format_name(SourceFormat format);

/* meta: per attribute of desc, or NULL when no column holds metadata */
extern void decoder_check_columns(SourceFormat format, TupleDesc desc,
								  const SourceMetadata *meta);

typedef struct MessageDecoder MessageDecoder;

extern MessageDecoder *decoder_create(SourceFormat format, TupleDesc desc,
									  const SourceMetadata *meta);
extern const char *decoder_decode(MessageDecoder *decoder,
								  const char *payload, size_t len,
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
 * ---------------------------------------------------------------------
 * Everything below is private to src/decode*.c.  Other modules use only
 * the functions above and must not look inside a MessageDecoder.
 * ---------------------------------------------------------------------
 */

/* JSON nesting deeper than this is rejected (never recursed into) */
#define DECODE_JSON_MAX_DEPTH	1000

/*
 * Column types whose common text forms decode_input converts itself,
 * leaving the input function the rest (and the error messages)
 */
typedef enum DecodeFastPath
{
	DECODE_FAST_NONE = 0,
	DECODE_FAST_TIMESTAMPTZ,	/* timestamptz without typmod: ISO 8601 */
	DECODE_FAST_INT2,			/* plain decimal integers */
	DECODE_FAST_INT4,
	DECODE_FAST_INT8,
	DECODE_FAST_FLOAT4,			/* plain decimals of few digits */
	DECODE_FAST_FLOAT8,
	DECODE_FAST_TEXT			/* text: the characters as they are */
} DecodeFastPath;

/* One non-dropped column of the source, with its input function resolved */
typedef struct DecodeColumn
{
	int			attindex;		/* index into values/nulls */
	const char *name;			/* column name (JSON key to match) */
	int			namelen;		/* strlen(name) */
	const char *typname;		/* type name, for error strings */
	Oid			typioparam;
	int32		typmod;
	bool		is_json;		/* json, jsonb, or a domain over them */
	DecodeFastPath fast;		/* how decode_input may skip the input
								 * function */
	FmgrInfo	inproc;			/* the type's input function */
} DecodeColumn;

/* Kinds of JSON values found for a column (DJ_MISSING: key absent) */
typedef enum DecodeJsonKind
{
	DJ_MISSING = 0,
	DJ_NULL,
	DJ_STRING,					/* a string without escapes */
	DJ_STRING_ESCAPED,			/* a string with at least one backslash */
	DJ_NUMBER,
	DJ_TRUE,
	DJ_FALSE,
	DJ_OBJECT,
	DJ_ARRAY
} DecodeJsonKind;

/*
 * Where a column's value sits in the payload.  For JSON, start/len cover the
 * raw JSON text of the value (strings include their quotes); for CSV they
 * cover the field text (without quotes), and "quoted"/"escaped" tell how it
 * was written.
 */
typedef struct DecodeSpan
{
	const char *start;
	int			len;
	uint8		kind;			/* DecodeJsonKind, JSON only */
	bool		quoted;			/* CSV only: field was double-quoted */
	bool		escaped;		/* CSV only: field contains "" */
} DecodeSpan;

struct MessageDecoder
{
	SourceFormat format;
	MemoryContext mcxt;			/* holds the decoder, lives as long */
	int			encoding;		/* database encoding */
	int			natts;			/* length of values/nulls */
	int			ncolumns;		/* non-dropped columns */
	DecodeColumn *columns;		/* ncolumns entries, in attribute order */
	DecodeSpan *spans;			/* per-message scratch, ncolumns entries */
	int64	   *missing;		/* per column: messages without its key */
	const char **names;			/* per column: its name */
	StringInfoData scratch;		/* NUL-terminated text for input functions */

	/* JSON key lookup: open-addressing table of column indexes, -1 = free */
	int		   *keyhash;
	uint32		keyhash_mask;

	/* what the error context callback reports, set while converting */
	DecodeColumn *cur_column;
	int			cur_field;		/* CSV field number (1-based), else 0 */
};

/* decode.c */
extern const char *decode_verify_encoding(MessageDecoder *decoder,
										  const char *payload, int len);
extern Datum decode_input(MessageDecoder *decoder, DecodeColumn *column,
						  const char *chars, int len);

/* decode_json.c */
extern void decode_json_init(MessageDecoder *decoder);
extern const char *decode_json_message(MessageDecoder *decoder,
									   const char *payload, int len,
									   Datum *values, bool *nulls);

/* decode_csv.c */
extern const char *decode_csv_message(MessageDecoder *decoder,
									  const char *payload, int len,
									  Datum *values, bool *nulls);

#endif							/* STREAMWIN_DECODE_H */
