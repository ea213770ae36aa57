/*-------------------------------------------------------------------------
 *
 * decode_logical.h
 *	  Kafka Connect's logical types (decode_logical.c): the text a column's
 *	  input function takes for a value Kafka Connect encodes, such as a
 *	  timestamp as microseconds since the epoch or a decimal as base64.
 *
 * Beside decode_value.c at the bottom of decoding: the formats call it,
 * it calls none of them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_LOGICAL_H
#define STREAMWIN_DECODE_LOGICAL_H

#include "lib/stringinfo.h"

/* How a column's value is encoded, when a schema says it is one of these */
typedef enum LogicalKind
{
	LOGICAL_NONE = 0,			/* the value as it is */
	LOGICAL_TIMESTAMP,			/* an integer: units since 1970-01-01 UTC */
	LOGICAL_DATE,				/* an integer: days since 1970-01-01 */
	LOGICAL_TIME,				/* an integer: units since midnight */
	LOGICAL_DURATION,			/* an integer: microseconds */
	LOGICAL_DECIMAL,			/* base64 of the unscaled value, a fixed scale */
	LOGICAL_VARIABLE_DECIMAL,	/* {"scale": n, "value": base64} */
	LOGICAL_JSON,				/* a string holding a JSON document */
	LOGICAL_BYTES				/* base64 of the bytes */
} LogicalKind;

/*
 * What Debezium's PostgreSQL connector writes for a timestamp of
 * 'infinity' and of '-infinity', in any unit (JSON and Avro alike)
 */
#define DEBEZIUM_TIMESTAMP_INFINITY INT64CONST(9223372036825200000)
#define DEBEZIUM_TIMESTAMP_MINUS_INFINITY (-INT64CONST(9223372036832400000))

/* One column's logical type, from the schema of the message it is in */
typedef struct LogicalField
{
	uint8		kind;			/* LogicalKind */
	uint8		digits;			/* TIMESTAMP, TIME: 3 (ms), 6 (us) or 9 (ns) */
	bool		at_midnight;	/* DATE into a timestamp column */
	int32		scale;			/* DECIMAL */
	const char *name;			/* the schema's name for it, for errors */
} LogicalField;

extern LogicalKind logical_kind_for(const char *name, const char *type, Oid column_type,
									uint8 *digits, bool *at_midnight);
extern const char *logical_integer_text(const LogicalField *f, const char *number, int len,
										StringInfo out);
extern const char *logical_decimal_text(const LogicalField *f, const char *base64, int len,
										int32 scale, StringInfo out);
extern const char *logical_decimal_bytes_text(const LogicalField *f, const uint8 *bytes, int n,
											  int64 scale, StringInfo out);
extern const char *logical_bytes_text(const LogicalField *f, const char *base64, int len,
									  StringInfo out);
extern void decimal_bytes_text(const uint8 *p, int n, int scale, StringInfo buf);

#endif							/* STREAMWIN_DECODE_LOGICAL_H */
