/*-------------------------------------------------------------------------
 *
 * decode_avro.h
 *	  The Avro format, for decode.c: writer schemas parsed from their JSON
 *	  (decode_avro_schema.c), and messages decoded by a plan resolved once
 *	  per writer schema against the source's columns (decode_avro.c).
 *
 * Private to src/decode*.c; decode.h has what other layers call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_AVRO_H
#define STREAMWIN_DECODE_AVRO_H

#include "decode_value.h"

/* The kinds of Avro types (the specification's names, in its order) */
typedef enum AvroKind
{
	AVT_NULL,
	AVT_BOOLEAN,
	AVT_INT,
	AVT_LONG,
	AVT_FLOAT,
	AVT_DOUBLE,
	AVT_BYTES,
	AVT_STRING,
	AVT_RECORD,
	AVT_ENUM,
	AVT_ARRAY,
	AVT_MAP,
	AVT_UNION,
	AVT_FIXED
} AvroKind;

/* The logical types streamwin maps to PostgreSQL types of their own */
typedef enum AvroLogical
{
	AVRO_LOGICAL_NONE,
	AVRO_LOGICAL_DATE,			/* int: days since 1970-01-01 */
	AVRO_LOGICAL_TIME_MILLIS,	/* int: ms after midnight */
	AVRO_LOGICAL_TIME_MICROS,	/* long: us after midnight */
	AVRO_LOGICAL_TIMESTAMP_MILLIS,	/* long: ms since the epoch, UTC */
	AVRO_LOGICAL_TIMESTAMP_MICROS,
	AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS,	/* long: a wall-clock time */
	AVRO_LOGICAL_LOCAL_TIMESTAMP_MICROS,
	AVRO_LOGICAL_DECIMAL,		/* bytes or fixed: unscaled two's
								 * complement, big-endian */
	AVRO_LOGICAL_UUID,			/* string */
	/* Debezium's, named by "connect.name" (see decode_avro_schema.c) */
	AVRO_LOGICAL_VARIABLE_DECIMAL,	/* record of int "scale", bytes "value" */
	AVRO_LOGICAL_JSON_TEXT		/* string: a JSON document's text */
} AvroLogical;

/*
 * One Avro type of a parsed schema.  A named type (record, enum, fixed)
 * that the schema refers to again is the same node, so a recursive record
 * is a cycle: walks over types follow the data, never the graph alone.
 */
typedef struct AvroType
{
	AvroKind	kind;
	AvroLogical logical;
	const char *name;			/* a named type's full name, else NULL */
	int			precision;		/* decimal */
	int			scale;			/* decimal */
	int			size;			/* fixed: bytes */
	int			nfields;		/* record fields, enum symbols, union
								 * branches */
	const char **names;			/* record: field names; enum: symbols */
	struct AvroType **types;	/* record: field types; union: branches */
	struct AvroType *items;		/* array: items; map: values */
	char		no_bytes;		/* may a value take no bytes: 0 not known
								 * yet, 'y', 'n', or 'w' while working it
								 * out (decode_avro.c) */
} AvroType;

/*
 * avro_schema_parse
 *		The writer schema in json (len bytes) as AvroTypes in
 *		CurrentMemoryContext, or NULL with *error set to why it is not a
 *		valid Avro schema.  Never raises an error for a bad schema.
 */
extern AvroType *avro_schema_parse(const char *json, int len, char **error);

/* The type as messages name it: "long", "long (timestamp-millis)", "record \"r\"" */
extern const char *avro_type_name(const AvroType *type);

/* decode_avro.c */
extern void decode_avro_init(DecodeState *state, MemoryContext mcxt);
extern const char *decode_avro_add_schema(DecodeState *state, int32 id,
										  const char *json, int len);
extern void decode_avro_add_missing(DecodeState *state, int32 id, const char *reason);
extern bool decode_avro_has_schema(DecodeState *state, int32 id);
extern void decode_avro_forget_missing(DecodeState *state);
extern const char *decode_avro_message(DecodeState *state, const char *payload, int len,
									   Datum *values, bool *nulls);
extern void decode_avro_set_debezium(DecodeState *state);
extern void decode_avro_set_whole_value(DecodeState *state);
extern const char *decode_avro_debezium(DecodeState *state, const char *payload, int len,
										char *op, bool *has_before,
										Datum *before_values, bool *before_nulls,
										Datum *after_values, bool *after_nulls);

#endif							/* STREAMWIN_DECODE_AVRO_H */
