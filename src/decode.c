/*-------------------------------------------------------------------------
 *
 * decode.c
 *	  Message format dispatch, decoder set-up, and the text format.
 *
 * This file owns what all formats share: the names of the formats, the
 * creation-time validation of a source's columns, building a decoder (the
 * only place that touches the catalogs), the encoding check every payload
 * goes through, and the call of a column's input function.  The JSON and
 * CSV parsers live in decode_json.c and decode_csv.c; the text format is
 * small enough to live here.
 *
 * src/decode.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "decode.h"

/*
 * The scratch buffer grows to the largest field seen.  Past this size it is
 * given back after the message, so that one huge message does not pin its
 * size in the long-lived decoder context for the life of the worker.
 */
#define DECODE_SCRATCH_KEEP		(64 * 1024)

static void decode_column_errcontext(void *arg);
static const char *decode_text_message(MessageDecoder *decoder,
									   const char *payload, int len,
									   Datum *values, bool *nulls);


static DecodeFastPath fast_path_for(Oid type, int32 typmod);
static bool parse_iso_timestamptz(const char *s, int len, TimestampTz *result);
static bool parse_decimal_integer(const char *s, int len, int maxdigits, int64 *result);
static bool parse_short_decimal(const char *s, int len, int maxdigits, int maxscale,
								int64 *digits, int *scale, bool *negative);

/*
 * Powers of ten that float4 and float8 hold exactly (5^10 < 2^24 and
 * 5^22 < 2^53), for the division of parse_short_decimal's digits.
 */
static const float4 float4_powers_of_ten[] = {
	1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f
};
static const float8 float8_powers_of_ten[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
};

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
	}

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unrecognized source format \"%s\"",
					name ? name : "(null)"),
			 errhint("Valid formats are \"json\", \"csv\" and \"text\".")));
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
 * every column (with its cache space in the decoder's context, so that for
 * example domain_in keeps its constraint cache across messages), the names
 * JSON keys are matched against, and the scratch buffers.  The decoder is
 * allocated in CurrentMemoryContext, which must live as long as the decoder
 * is used; it keeps no reference to desc.  Must be called inside a
 * transaction (catalog access); raises an error if decoder_check_columns()
 * would.
 */
MessageDecoder *
decoder_create(SourceFormat format, TupleDesc desc, const SourceMetadata *meta)
{
	MessageDecoder *decoder;
	int			ncolumns = 0;

	decoder_check_columns(format, desc, meta);

	decoder = palloc0(sizeof(MessageDecoder));
	decoder->format = format;
	decoder->mcxt = CurrentMemoryContext;
	decoder->encoding = GetDatabaseEncoding();
	decoder->natts = desc->natts;
	decoder->columns = palloc0(sizeof(DecodeColumn) * desc->natts);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		DecodeColumn *column;
		Oid			typinput;
		Oid			basetype;

		if (attr->attisdropped || (meta && meta[i] != SOURCE_META_NONE))
			continue;

		column = &decoder->columns[ncolumns++];
		column->attindex = i;
		column->name = pstrdup(NameStr(attr->attname));
		column->namelen = strlen(column->name);
		column->typname = format_type_with_typemod(attr->atttypid,
												   attr->atttypmod);
		column->typmod = attr->atttypmod;
		getTypeInputInfo(attr->atttypid, &typinput, &column->typioparam);
		fmgr_info_cxt(typinput, &column->inproc, decoder->mcxt);

		/*
		 * JSON values of json columns are passed on as JSON text.  A domain
		 * over json or jsonb is still JSON for that purpose; its input
		 * function (domain_in) checks the constraints.
		 */
		basetype = getBaseType(attr->atttypid);
		column->is_json = (basetype == JSONOID || basetype == JSONBOID);
		column->fast = fast_path_for(attr->atttypid, attr->atttypmod);
	}
	decoder->ncolumns = ncolumns;
	decoder->spans = palloc0(sizeof(DecodeSpan) * ncolumns);
	decoder->missing = palloc0(sizeof(int64) * Max(ncolumns, 1));
	decoder->names = palloc(sizeof(char *) * Max(ncolumns, 1));
	for (int i = 0; i < ncolumns; i++)
		decoder->names[i] = decoder->columns[i].name;
	initStringInfo(&decoder->scratch);

	if (format == SOURCE_FORMAT_JSON)
		decode_json_init(decoder);

	return decoder;
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
 * per batch.
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
	ErrorContextCallback errcallback;
	const char *error;

	for (int i = 0; i < decoder->natts; i++)
	{
		values[i] = (Datum) 0;
		nulls[i] = true;
	}

	/*
	 * Every byte of the payload may have to fit in one text value, which
	 * needs a terminating NUL and a varlena header inside MaxAllocSize.
	 */
	if (len > MaxAllocSize - VARHDRSZ - 1)
		return psprintf("message too large: %zu bytes, at most %d are supported",
						len, (int) (MaxAllocSize - VARHDRSZ - 1));
	if (payload == NULL)
	{
		if (len > 0)
			return pstrdup("message has no payload");
		payload = "";
	}

	error = decode_verify_encoding(decoder, payload, (int) len);
	if (error != NULL)
		return error;

	errcallback.callback = decode_column_errcontext;
	errcallback.arg = decoder;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	decoder->cur_column = NULL;
	decoder->cur_field = 0;

	switch (decoder->format)
	{
		case SOURCE_FORMAT_JSON:
			error = decode_json_message(decoder, payload, (int) len,
										values, nulls);
			break;
		case SOURCE_FORMAT_CSV:
			error = decode_csv_message(decoder, payload, (int) len,
									   values, nulls);
			break;
		case SOURCE_FORMAT_TEXT:
			error = decode_text_message(decoder, payload, (int) len,
										values, nulls);
			break;
	}

	error_context_stack = errcallback.previous;
	decoder->cur_column = NULL;

	if (decoder->scratch.maxlen > DECODE_SCRATCH_KEEP)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(decoder->mcxt);

		pfree(decoder->scratch.data);
		initStringInfo(&decoder->scratch);
		MemoryContextSwitchTo(oldcxt);
	}

	if (error != NULL)
	{
		/* half-decoded values must not be mistaken for a tuple */
		for (int i = 0; i < decoder->natts; i++)
		{
			values[i] = (Datum) 0;
			nulls[i] = true;
		}
	}
	return error;
}

int64 *
decoder_missing_counts(MessageDecoder *decoder, int *ncolumns, const char *const **names)
{
	*ncolumns = decoder->ncolumns;
	*names = decoder->names;
	return decoder->missing;
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
const char *
decode_verify_encoding(MessageDecoder *decoder, const char *payload, int len)
{
	int			valid;
	int			badlen;
	StringInfoData buf;

	/* returns the length of the valid prefix; stops at a NUL byte too */
	valid = pg_encoding_verifymbstr(decoder->encoding, payload, len);
	if (valid == len)
		return NULL;

	if (payload[valid] == '\0')
		return psprintf("message contains a NUL byte at byte %d", valid);

	initStringInfo(&buf);
	appendStringInfo(&buf, "invalid byte sequence for encoding \"%s\" at byte %d:",
					 pg_encoding_to_char(decoder->encoding), valid);
	badlen = Min(pg_encoding_mblen(decoder->encoding, payload + valid),
				 len - valid);
	for (int i = 0; i < badlen; i++)
		appendStringInfo(&buf, " 0x%02x", (unsigned char) payload[valid + i]);
	return buf.data;
}

/*
 * decode_input
 *		Run a column's input function on a value found in the message.
 *
 * text/len is the value's text, not NUL-terminated; it is copied into the
 * decoder's scratch buffer to terminate it.  If text is already
 * decoder->scratch.data (a parser unescaped it there), it is used as is.
 * text == NULL stands for SQL NULL: the input function still gets the call
 * so that a domain's NOT NULL constraint is checked.  The input function
 * may raise an error; decoder->cur_column should be set so that the error
 * context names the column.
 */
Datum
decode_input(MessageDecoder *decoder, DecodeColumn *column,
			 const char *chars, int len)
{
	StringInfo	buf = &decoder->scratch;

	if (chars != NULL)
	{
		TimestampTz ts;
		int64		n;
		int			scale;
		bool		negative;

		switch (column->fast)
		{
			case DECODE_FAST_NONE:
				break;
			case DECODE_FAST_TIMESTAMPTZ:
				if (parse_iso_timestamptz(chars, len, &ts))
					return TimestampTzGetDatum(ts);
				break;
			case DECODE_FAST_INT2:
				if (parse_decimal_integer(chars, len, 4, &n))
					return Int16GetDatum((int16) n);
				break;
			case DECODE_FAST_INT4:
				if (parse_decimal_integer(chars, len, 9, &n))
					return Int32GetDatum((int32) n);
				break;
			case DECODE_FAST_INT8:
				if (parse_decimal_integer(chars, len, 18, &n))
					return Int64GetDatum(n);
				break;
			case DECODE_FAST_FLOAT4:
				if (parse_short_decimal(chars, len, 7, 10, &n, &scale, &negative))
				{
					float4		f = (float4) n / float4_powers_of_ten[scale];

					return Float4GetDatum(negative ? -f : f);
				}
				break;
			case DECODE_FAST_FLOAT8:
				if (parse_short_decimal(chars, len, 15, 22, &n, &scale, &negative))
				{
					float8		f = (float8) n / float8_powers_of_ten[scale];

					return Float8GetDatum(negative ? -f : f);
				}
				break;
			case DECODE_FAST_TEXT:
				/* what textin makes of it; the payload holds no NUL byte */
				return PointerGetDatum(cstring_to_text_with_len(chars, len));
		}
	}

	if (chars != NULL && chars != buf->data)
	{
		resetStringInfo(buf);
		appendBinaryStringInfo(buf, chars, len);
	}
	return InputFunctionCall(&column->inproc,
							 chars != NULL ? buf->data : NULL,
							 column->typioparam, column->typmod);
}

/*
 * fast_path_for
 *		The fast path of decode_input for a column of this type, if any.
 *		Only the types themselves: a domain's input function also checks
 *		its constraints, and varchar(n) its length.
 */
static DecodeFastPath
fast_path_for(Oid type, int32 typmod)
{
	switch (type)
	{
		case TIMESTAMPTZOID:
			return typmod < 0 ? DECODE_FAST_TIMESTAMPTZ : DECODE_FAST_NONE;
		case INT2OID:
			return DECODE_FAST_INT2;
		case INT4OID:
			return DECODE_FAST_INT4;
		case INT8OID:
			return DECODE_FAST_INT8;
		case FLOAT4OID:
			return DECODE_FAST_FLOAT4;
		case FLOAT8OID:
			return DECODE_FAST_FLOAT8;
		case TEXTOID:
			return DECODE_FAST_TEXT;
		default:
			return DECODE_FAST_NONE;
	}
}

/*
 * parse_decimal_integer
 *		An optional '-' and 1 to maxdigits decimal digits, nothing else: the
 *		shape of almost every integer in JSON and CSV, read to the value the
 *		integer input functions give it.  maxdigits keeps every such value
 *		within the type's range, so nothing here can overflow.  For anything
 *		else (spaces, '+', more digits, not an integer) it returns false and
 *		the caller uses the input function, which also raises the errors.
 */
static bool
parse_decimal_integer(const char *s, int len, int maxdigits, int64 *result)
{
	int			scale;
	bool		negative;

	/* a short decimal without digits after a point */
	if (!parse_short_decimal(s, len, maxdigits, 0, result, &scale, &negative))
		return false;
	if (negative)
		*result = -*result;
	return true;
}

/*
 * parse_short_decimal
 *		An optional '-', digits, and optionally '.' and more digits, nothing
 *		else, of at most maxdigits digits in all and maxscale after the
 *		point: the shape of most decimals in JSON and CSV.  *digits is the
 *		value of the digits without the point, *scale the number of digits
 *		after it, *negative whether a '-' came first.  Within those limits
 *		the digits and the power of ten are exact in the floating-point type
 *		(maxdigits 7 for float4, 15 for float8), so one division, which
 *		IEEE 754 rounds correctly, and the sign give the value nearest the
 *		decimal: what float4in and float8in (strtof, strtod) give it, -0 for
 *		a '-' and zero digits included.  For anything else
 *		(exponents, '+', spaces, ".5", "Infinity", more digits) it returns
 *		false and the caller uses the input function.
 */
static bool
parse_short_decimal(const char *s, int len, int maxdigits, int maxscale,
					int64 *digits, int *scale, bool *negative)
{
	const char *p = s;
	const char *end = s + len;
	const char *point = NULL;
	int			ndigits = 0;
	int64		v = 0;

	*negative = p < end && *p == '-';
	if (*negative)
		p++;
	for (; p < end; p++)
	{
		if (*p >= '0' && *p <= '9')
		{
			if (++ndigits > maxdigits)
				return false;
			v = v * 10 + (*p - '0');
		}
		else if (*p == '.' && point == NULL && ndigits > 0)
			point = p;
		else
			return false;
	}
	if (ndigits == 0 || (point != NULL && point == end - 1))
		return false;
	*scale = point != NULL ? end - point - 1 : 0;
	if (*scale > maxscale)
		return false;
	*digits = v;
	return true;
}

/* n decimal digits at *p, advancing it; false if there are not n */
static bool
iso_digits(const char **p, const char *end, int n, int *value)
{
	int			v = 0;

	if (end - *p < n)
		return false;
	for (int i = 0; i < n; i++)
	{
		char		c = (*p)[i];

		if (c < '0' || c > '9')
			return false;
		v = v * 10 + (c - '0');
	}
	*p += n;
	*value = v;
	return true;
}

/*
 * parse_iso_timestamptz
 *		The common shape of event times in JSON and CSV, without the general
 *		date/time parser: YYYY-MM-DD, 'T' (or 't' or a space), HH:MM:SS, up
 *		to six fractional digits, and a zone 'Z' or +HH, +HHMM, +HH:MM.
 *
 * timestamptz_in costs more than the rest of a JSON message's decoding
 * (its tokenizer handles every date style and zone name there is).  This
 * accepts only text that timestamptz_in reads to the same instant whatever
 * the session's settings (an explicit zone, no rounding); for anything else
 * it returns false and the caller uses timestamptz_in, which also produces
 * the error messages.
 */
static bool
parse_iso_timestamptz(const char *s, int len, TimestampTz *result)
{
	const char *p = s;
	const char *end = s + len;
	int			year,
				month,
				day,
				hour,
				minute,
				second;
	int64		fraction = 0;
	int			offset = 0;

	if (!iso_digits(&p, end, 4, &year) || p == end || *p++ != '-' ||
		!iso_digits(&p, end, 2, &month) || p == end || *p++ != '-' ||
		!iso_digits(&p, end, 2, &day) || p == end ||
		(*p != 'T' && *p != 't' && *p != ' '))
		return false;
	p++;
	if (!iso_digits(&p, end, 2, &hour) || p == end || *p++ != ':' ||
		!iso_digits(&p, end, 2, &minute) || p == end || *p++ != ':' ||
		!iso_digits(&p, end, 2, &second))
		return false;
	if (p < end && *p == '.')
	{
		int			ndigits = 0;

		p++;
		while (p < end && *p >= '0' && *p <= '9')
		{
			if (++ndigits > 6)
				return false;	/* timestamptz_in rounds: leave it that */
			fraction = fraction * 10 + (*p++ - '0');
		}
		if (ndigits == 0)
			return false;
		for (int i = ndigits; i < 6; i++)
			fraction *= 10;
	}
	if (p == end)
		return false;			/* no zone: the session's TimeZone decides */
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-')
	{
		int			sign = *p++ == '-' ? -1 : 1;
		int			oh,
					om = 0;

		if (!iso_digits(&p, end, 2, &oh))
			return false;
		if (p < end && *p == ':')
		{
			p++;
			if (!iso_digits(&p, end, 2, &om))
				return false;
		}
		else if (p < end && !iso_digits(&p, end, 2, &om))
			return false;
		if (oh > 15 || om > 59)
			return false;
		offset = sign * (oh * SECS_PER_HOUR + om * SECS_PER_MINUTE);
	}
	else
		return false;
	if (p != end)
		return false;

	if (year < 1 || month < 1 || month > 12 || day < 1 ||
		day > day_tab[isleap(year)][month - 1] ||
		hour > 23 || minute > 59 || second > 59)
		return false;

	*result = ((int64) (date2j(year, month, day) - POSTGRES_EPOCH_JDATE) * SECS_PER_DAY +
			   hour * SECS_PER_HOUR + minute * SECS_PER_MINUTE + second - offset) *
		USECS_PER_SEC + fraction;
	return true;
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
	DecodeColumn *column = decoder->cur_column;

	if (column == NULL)
		return;

	switch (decoder->format)
	{
		case SOURCE_FORMAT_JSON:
			errcontext("JSON key \"%s\" of the message", column->name);
			break;
		case SOURCE_FORMAT_CSV:
			errcontext("CSV field %d (column \"%s\") of the message",
					   decoder->cur_field, column->name);
			break;
		case SOURCE_FORMAT_TEXT:
			errcontext("message text for column \"%s\"", column->name);
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
decode_text_message(MessageDecoder *decoder, const char *payload, int len,
					Datum *values, bool *nulls)
{
	DecodeColumn *column = &decoder->columns[0];

	decoder->cur_column = column;
	values[column->attindex] = decode_input(decoder, column, payload, len);
	nulls[column->attindex] = false;
	return NULL;
}
