/*-------------------------------------------------------------------------
 *
 * decode_logical.c
 *	  Kafka Connect's logical types: the text a column's input function
 *	  takes for a value that Kafka Connect, or Debezium, encodes.
 *
 * Kafka Connect's JSON converter writes a timestamp as a number of
 * milliseconds (Debezium: micro- or nanoseconds) since the epoch, a date
 * as days, a decimal as base64 of its unscaled digits, and says so only in
 * the schema that travels with each message ({"schema": ..., "payload":
 * ...}).  Debezium's PostgreSQL connector writes every timestamp, date,
 * time and numeric column so by default.  Given what the schema names a
 * value (a LogicalField, from decode_connect.c), this makes the text the
 * column's type reads: ISO 8601 for times, in UTC; the decimal's digits
 * with its scale; the bytes in hex.  The input function then converts it
 * as it converts any text, so a column's typmod, domain and range apply
 * as they do to text in a message.
 *
 * A LogicalField applies only to the column types it names (a timestamp
 * to timestamp and timestamptz, a decimal to numbers, ...): a bigint
 * column given a MicroTimestamp keeps the integer.  Timestamps are UTC in
 * both timestamp types: Debezium writes a timestamp without time zone as
 * if its wall clock were UTC, and a batch's result never depends on the
 * session's TimeZone.
 *
 * src/decode/decode_logical.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/base64.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "mb/pg_wchar.h"
#include "utils/datetime.h"

#include "decode_logical.h"

/* The names this knows, and what each encodes */
static const struct
{
	const char *name;
	LogicalKind kind;
	uint8		digits;			/* of a second, for times */
}			logical_names[] =
{
	{"org.apache.kafka.connect.data.Timestamp", LOGICAL_TIMESTAMP, 3},
	{"io.debezium.time.Timestamp", LOGICAL_TIMESTAMP, 3},
	{"io.debezium.time.MicroTimestamp", LOGICAL_TIMESTAMP, 6},
	{"io.debezium.time.NanoTimestamp", LOGICAL_TIMESTAMP, 9},
	{"org.apache.kafka.connect.data.Date", LOGICAL_DATE, 0},
	{"io.debezium.time.Date", LOGICAL_DATE, 0},
	{"org.apache.kafka.connect.data.Time", LOGICAL_TIME, 3},
	{"io.debezium.time.Time", LOGICAL_TIME, 3},
	{"io.debezium.time.MicroTime", LOGICAL_TIME, 6},
	{"io.debezium.time.NanoTime", LOGICAL_TIME, 9},
	{"io.debezium.time.MicroDuration", LOGICAL_DURATION, 6},
	{"org.apache.kafka.connect.data.Decimal", LOGICAL_DECIMAL, 0},
	{"io.debezium.data.VariableScaleDecimal", LOGICAL_VARIABLE_DECIMAL, 0},
	{"io.debezium.data.Json", LOGICAL_JSON, 0},
};

/*
 * A decimal's unscaled value may have at most this many bytes: the
 * conversion to digits takes time in the square of the bytes, and 4096
 * bytes are about 9,860 digits, more than a numeric column's typmod allows.
 */
#define LOGICAL_DECIMAL_MAX_BYTES 4096
/* and a scale at most this far from 0 (numeric's largest display scale) */
#define LOGICAL_SCALE_MAX 1000

static const int64 ten_to[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
100000000, 1000000000};

/* How much of text (len bytes) an error quotes: 64 bytes at most, whole characters */
static int
clip(const char *text, int len)
{
	return len <= 64 ? len : pg_mbcliplen(text, len, 64);
}

/*
 * logical_kind_for
 *		What a column of type column_type (a domain's base type) does with a
 *		value whose schema has this name (NULL: none) and type: LOGICAL_NONE
 *		to read it as it is.  *digits: of a second, for times; *at_midnight:
 *		a date for a timestamp column.
 */
LogicalKind
logical_kind_for(const char *name, const char *type, Oid column_type, uint8 *digits,
				 bool *at_midnight)
{
	/* the column types each kind converts to (ended by InvalidOid) */
	static const Oid column_types[][7] = {
		[LOGICAL_TIMESTAMP] = {TIMESTAMPOID, TIMESTAMPTZOID},
		[LOGICAL_DATE] = {DATEOID, TIMESTAMPOID, TIMESTAMPTZOID},
		[LOGICAL_TIME] = {TIMEOID},
		[LOGICAL_DURATION] = {INTERVALOID},
		[LOGICAL_DECIMAL] = {NUMERICOID, FLOAT4OID, FLOAT8OID, INT2OID, INT4OID, INT8OID},
		[LOGICAL_VARIABLE_DECIMAL] = {NUMERICOID, FLOAT4OID, FLOAT8OID},
		[LOGICAL_JSON] = {JSONOID, JSONBOID},
		[LOGICAL_BYTES] = {BYTEAOID},
	};
	LogicalKind kind = LOGICAL_NONE;

	*digits = 0;
	*at_midnight = false;
	if (name == NULL)
		kind = type != NULL && strcmp(type, "bytes") == 0 ? LOGICAL_BYTES : LOGICAL_NONE;
	for (int i = 0; name != NULL && i < (int) lengthof(logical_names); i++)
		if (strcmp(name, logical_names[i].name) == 0)
		{
			kind = logical_names[i].kind;
			*digits = logical_names[i].digits;
			break;
		}
	for (int t = 0; kind != LOGICAL_NONE && t < (int) lengthof(column_types[0]) &&
		 OidIsValid(column_types[kind][t]); t++)
		if (column_types[kind][t] == column_type)
		{
			*at_midnight = kind == LOGICAL_DATE && column_type != DATEOID;
			return kind;
		}
	*digits = 0;
	return LOGICAL_NONE;
}

/* a / b rounded down, and the remainder that goes with it (b > 0) */
static inline int64
floor_div(int64 a, int64 b, int64 *rem)
{
	int64		q = a / b;
	int64		r = a % b;

	if (r < 0)
	{
		q--;
		r += b;
	}
	*rem = r;
	return q;
}

/*
 * The date days after 1970-01-01 as ISO 8601 into out; false if it is
 * outside the dates a timestamp can hold, which also keeps j2date's
 * argument an int.
 */
static bool
append_date(StringInfo out, int64 days, bool *bc)
{
	int			year;
	int			month;
	int			day;

	/* (the range first: days may be any int64) */
	if (days < -UNIX_EPOCH_JDATE || days > TIMESTAMP_END_JULIAN - UNIX_EPOCH_JDATE)
		return false;
	j2date((int) (days + UNIX_EPOCH_JDATE), &year, &month, &day);
	/* year 0 is 1 BC */
	*bc = year <= 0;
	appendStringInfo(out, "%04d-%02d-%02d", *bc ? 1 - year : year, month, day);
	return true;
}

/* hh:mm:ss of the seconds of a day, and the fraction of digits digits */
static void
append_time_of_day(StringInfo out, int64 seconds, int64 fraction, int digits)
{
	appendStringInfo(out, "%02d:%02d:%02d", (int) (seconds / 3600), (int) (seconds / 60 % 60),
					 (int) (seconds % 60));
	if (digits > 0)
		appendStringInfo(out, ".%0*lld", digits, (long long) fraction);
}

/*
 * logical_integer_text
 *		The text of the integer at number (len bytes, a JSON number) as a
 *		value of f, a timestamp, date, time or duration, into out.  Returns
 *		NULL, or why not: a number that is not an integer, or one outside
 *		the type's range.
 */
const char *
logical_integer_text(const LogicalField *f, const char *number, int len, StringInfo out)
{
	const char *p = number;
	const char *end = number + len;
	bool		negative = p < end && *p == '-';
	int64		v = 0;
	int64		unit = ten_to[f->digits];
	int64		seconds;
	int64		fraction;
	int64		days;
	bool		bc = false;

	if (negative)
		p++;
	if (p == end)
		return psprintf("%s needs an integer", f->name);
	for (; p < end; p++)
	{
		if (*p < '0' || *p > '9')
			return psprintf("%s needs an integer, found %.*s", f->name, clip(number, len), number);
		/* accumulated negative, so that the smallest int64 fits */
		if (pg_mul_s64_overflow(v, 10, &v) || pg_sub_s64_overflow(v, *p - '0', &v))
			return psprintf("%s %.*s is out of range", f->name, clip(number, len), number);
	}
	if (!negative && pg_sub_s64_overflow(0, v, &v))
		return psprintf("%s %.*s is out of range", f->name, clip(number, len), number);

	switch ((LogicalKind) f->kind)
	{
		case LOGICAL_TIMESTAMP:
			/* Debezium's PostgreSQL connector writes infinity so, in any unit */
			if (v == DEBEZIUM_TIMESTAMP_INFINITY || v == DEBEZIUM_TIMESTAMP_MINUS_INFINITY)
			{
				appendStringInfoString(out, v > 0 ? "infinity" : "-infinity");
				return NULL;
			}
			seconds = floor_div(v, unit, &fraction);
			days = floor_div(seconds, SECS_PER_DAY, &seconds);
			if (!append_date(out, days, &bc))
				return psprintf("%s %lld is out of range for a timestamp", f->name, (long long) v);
			appendStringInfoChar(out, ' ');
			append_time_of_day(out, seconds, fraction, f->digits);
			appendStringInfoString(out, bc ? "+00 BC" : "+00");
			return NULL;
		case LOGICAL_DATE:
			if (!append_date(out, v, &bc))
				return psprintf("%s %lld is out of range for a date", f->name, (long long) v);
			if (f->at_midnight)
				appendStringInfoString(out, " 00:00:00+00");
			if (bc)
				appendStringInfoString(out, " BC");
			return NULL;
		case LOGICAL_TIME:
			/* PostgreSQL's time takes 24:00:00 too */
			if (v < 0 || v / unit > SECS_PER_DAY || (v / unit == SECS_PER_DAY && v % unit != 0))
				return psprintf("%s %lld is out of range for type time", f->name, (long long) v);
			append_time_of_day(out, v / unit, v % unit, f->digits);
			return NULL;
		case LOGICAL_DURATION:
			{
				/* the magnitude as unsigned: the smallest int64 has none */
				uint64		m = negative ? -(uint64) v : (uint64) v;

				appendStringInfo(out, "%s%llu:%02d:%02d.%06d", negative ? "-" : "",
								 (unsigned long long) (m / USECS_PER_HOUR),
								 (int) (m / USECS_PER_MINUTE % 60), (int) (m / USECS_PER_SEC % 60),
								 (int) (m % USECS_PER_SEC));
				return NULL;
			}
		default:
			break;
	}
	elog(ERROR, "streamwin: logical type %d is not an integer's", f->kind);
	return NULL;
}

/* The bytes of base64 text (len bytes), in *bytes; -1 if it is not base64. */
static int
base64_bytes(const char *base64, int len, uint8 **bytes)
{
	*bytes = palloc(pg_b64_dec_len(len) + 1);
	return pg_b64_decode(base64, len, (char *) *bytes, pg_b64_dec_len(len));
}

/*
 * logical_decimal_text
 *		The decimal whose unscaled value is the two's complement big-endian
 *		integer in base64 text (len bytes), with scale digits after the
 *		point (a negative scale: zeros before it), as text into out.
 *		Returns NULL, or why not.
 */
const char *
logical_decimal_text(const LogicalField *f, const char *base64, int len, int32 scale,
					 StringInfo out)
{
	uint8	   *bytes;
	int			n = base64_bytes(base64, len, &bytes);
	const char *error;

	if (n < 0)
		return psprintf("%s needs base64 text, found \"%.*s\"", f->name, clip(base64, len), base64);
	error = logical_decimal_bytes_text(f, bytes, n, scale, out);
	pfree(bytes);
	return error;
}

/*
 * logical_decimal_bytes_text
 *		logical_decimal_text of the unscaled value's n bytes at bytes.
 */
const char *
logical_decimal_bytes_text(const LogicalField *f, const uint8 *bytes, int n, int64 scale,
						   StringInfo out)
{
	int			skip = 0;

	if (n == 0)
		return psprintf("%s needs at least one byte", f->name);
	/* bytes of sign extension only repeat the sign */
	while (skip < n - 1 && (bytes[skip] == 0x00 || bytes[skip] == 0xff) &&
		   (bytes[skip + 1] & 0x80) == (bytes[skip] & 0x80))
		skip++;
	if (n - skip > LOGICAL_DECIMAL_MAX_BYTES)
		return psprintf("%s has %d bytes, more than the %d streamwin reads", f->name, n - skip,
						LOGICAL_DECIMAL_MAX_BYTES);
	if (scale < -LOGICAL_SCALE_MAX || scale > LOGICAL_SCALE_MAX)
		return psprintf("%s has scale %lld, beyond the %d numeric allows", f->name,
						(long long) scale, LOGICAL_SCALE_MAX);
	decimal_bytes_text(bytes + skip, n - skip, Max((int) scale, 0), out);
	for (int64 i = scale; i < 0; i++)
		appendStringInfoChar(out, '0');
	return NULL;
}

/*
 * logical_bytes_text
 *		The bytes in base64 text (len bytes) as bytea's hex text into out.
 *		Returns NULL, or why not.
 */
const char *
logical_bytes_text(const LogicalField *f, const char *base64, int len, StringInfo out)
{
	static const char hex[] = "0123456789abcdef";
	uint8	   *bytes;
	int			n = base64_bytes(base64, len, &bytes);

	if (n < 0)
		return psprintf("bytes need base64 text, found \"%.*s\"", clip(base64, len), base64);
	enlargeStringInfo(out, 2 * n + 2);
	appendStringInfoString(out, "\\x");
	for (int i = 0; i < n; i++)
	{
		out->data[out->len++] = hex[bytes[i] >> 4];
		out->data[out->len++] = hex[bytes[i] & 15];
	}
	out->data[out->len] = '\0';
	pfree(bytes);
	return NULL;
}

/*
 * decimal_bytes_text
 *		The decimal text of the unscaled two's complement big-endian integer
 *		at p (n bytes) with scale (>= 0) digits after the point, into buf:
 *		Avro's decimals and Kafka Connect's.  Takes time in the square of n.
 */
void
decimal_bytes_text(const uint8 *p, int n, int scale, StringInfo buf)
{
	uint8	   *mag = palloc(Max(n, 1));
	bool		negative = n > 0 && (p[0] & 0x80);
	/* at most 3 digits a byte, and zeros up to the point: 0.000...1 */
	char	   *digits = palloc(n * 3 + Max(scale, 0) + 2);
	int			ndigits = 0;
	int			len = n;

	memcpy(mag, p, n);
	if (negative)
	{
		/* the magnitude: invert and add one */
		int			carry = 1;

		for (int i = n - 1; i >= 0; i--)
		{
			int			v = (uint8) ~mag[i] + carry;

			mag[i] = (uint8) v;
			carry = v >> 8;
		}
	}
	/* repeated division by ten, least significant digit first */
	while (len > 0)
	{
		int			rem = 0;
		int			lead = 0;

		for (int i = 0; i < len; i++)
		{
			int			cur = rem * 256 + mag[i];

			mag[i] = (uint8) (cur / 10);
			rem = cur % 10;
		}
		digits[ndigits++] = '0' + rem;
		while (lead < len && mag[lead] == 0)
			lead++;
		memmove(mag, mag + lead, len - lead);
		len -= lead;
	}
	while (ndigits <= scale)
		digits[ndigits++] = '0';
	if (negative)
		appendStringInfoChar(buf, '-');
	for (int i = ndigits - 1; i >= 0; i--)
	{
		appendStringInfoChar(buf, digits[i]);
		if (i == scale && scale > 0)
			appendStringInfoChar(buf, '.');
	}
	pfree(mag);
	pfree(digits);
}
