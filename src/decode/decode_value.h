/*-------------------------------------------------------------------------
 *
 * decode_value.h
 *	  What the message formats share, and only they (src/decode*.c): a
 *	  source's columns with their input functions, where each value sits
 *	  in the message being decoded, and the conversion of a value's text
 *	  into the column's type (decode_value.c).
 *
 * The layers of decoding: decode.c (decode.h, the interface) builds a
 * decoder and hands each message to its format, decode_json.c,
 * decode_csv.c or the text format; the formats find the values and
 * convert them with decode_input().  A Debezium event's parts
 * (decode_envelope.c) and a Kafka Connect schema (decode_connect.c) are
 * read with the JSON format's scanner, and values the schema gives a
 * logical type get their text from decode_logical.c, beside this file.
 * Each file calls only the ones below it; this one calls none of them but
 * decode_text.c, at the bottom, which gives the text values their memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_VALUE_H
#define STREAMWIN_DECODE_VALUE_H

#include "access/tupdesc.h"
#include "fmgr.h"
#include "lib/stringinfo.h"

#include "decode_text.h"

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
	Oid			typid;			/* the column's type */
	Oid			basetype;		/* its base type, if it is a domain */
	Oid			typioparam;
	int32		typmod;
	bool		is_json;		/* json, jsonb, or a domain over them */
	bool		plain_key;		/* JSON: the name is written as it is in a
								 * key (has no '"', '\\' or control
								 * character) */
	bool		key_in_words;	/* JSON: key_words hold '"name":' */
	uint64		key_words[2];	/* its bytes as two little-endian words */
	uint64		key_masks[2];	/* which bytes of them it has */
	DecodeFastPath fast;		/* how decode_input may skip the input
								 * function */
	bool		reads_clock;	/* its input function reads 'now', 'today',
								 * 'tomorrow' and 'yesterday' off the clock */
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

/*
 * What a format's parser reads and writes: the columns read from the
 * payload, where each value sits in the message at hand, the scratch text
 * for input functions, and what the error context reports.  Part of a
 * MessageDecoder (decode.c), which also knows the format.
 */
typedef struct DecodeState
{
	int			encoding;		/* database encoding */
	int			ncolumns;		/* non-dropped columns */
	DecodeColumn *columns;		/* ncolumns entries, in attribute order */
	DecodeSpan *spans;			/* per-message scratch, ncolumns entries */
	int64	   *missing;		/* per column: messages without its key */
	StringInfoData scratch;		/* NUL-terminated text for input functions */

	/* the Avro format's schemas and plans (decode_avro.c), else NULL */
	struct AvroDecoder *avro;

	/*
	 * JSON: per column, how the message's schema says its value is encoded
	 * (decode_logical.h), or NULL: every value as it is.  Set for each
	 * message by the one who decodes it.
	 */
	const struct LogicalField *logical;
	StringInfoData logical_text;	/* the text of a value converted so */

	/*
	 * JSON: a message that names no column may be a value in Kafka
	 * Connect's wrapper; the format then says so (decode_json_wrapped)
	 * instead of decoding it.  Set for each message too.
	 */
	bool		unwrap;

	/* JSON key lookup: open-addressing table of column indexes, -1 = free */
	int		   *keyhash;
	uint32		keyhash_mask;
	uint64		key_lengths;	/* bit n: a column name is n bytes long */

	/* what the error context callback reports, set while converting */
	DecodeColumn *cur_column;
	int			cur_field;		/* CSV field number (1-based), else 0 */

	/* where its text values go (decode_text.h) */
	DecodeTextSpace text;
} DecodeState;

extern void decode_column_init(DecodeColumn *column, int attindex, Form_pg_attribute attr,
							   MemoryContext mcxt);
extern Datum decode_input(DecodeState *state, DecodeColumn *column,
						  const char *chars, int len);
extern Datum decode_input_function(DecodeState *state, DecodeColumn *column,
								   const char *chars, int len);

#endif							/* STREAMWIN_DECODE_VALUE_H */
