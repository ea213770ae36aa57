/*-------------------------------------------------------------------------
 *
 * decode_csv.c
 *	  The CSV message format: one RFC 4180 record per message, fields in
 *	  column order.
 *
 * Fields are separated by commas.  A field may be enclosed in double
 * quotes, and then may contain commas, line breaks and quotes (written
 * twice).  One line break (LF or CRLF) after the record is ignored; any
 * other unquoted line break means the message holds more than one record,
 * which is an error.  Like COPY ... CSV, an unquoted empty field is NULL and
 * a quoted empty field ("") is the empty string.
 *
 * Being strict where RFC 4180 is (a quote inside an unquoted field, text
 * after a closing quote, an unterminated quote are errors) costs nothing
 * and sends a record that was probably cut or mis-joined to the dead
 * letters instead of quietly shifting its fields.
 *
 * src/decode/decode_csv.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "decode_bytes.h"
#include "decode_csv.h"
#include "decode_fast.h"

static const char *csv_field_count_error(DecodeState *state,
										 int nfields);


/*
 * The first byte at or after q (before end) that ends or breaks an unquoted
 * field: ',', '"', CR or LF; end if there is none.  A word at a time
 * (decode_bytes.h), the last few bytes one by one.
 */
static inline const char *
unquoted_stop(const char *q, const char *end)
{
#ifdef DECODE_WORDWISE
	while (end - q >= 8)
	{
		uint64		v = bytes_load8(q);
		uint64		stops = bytes_equal(v, ',') | bytes_equal(v, '"') |
			bytes_equal(v, '\n') | bytes_equal(v, '\r');

		if (stops != 0)
			return q + bytes_first(stops);
		q += 8;
	}
#endif
	while (q < end && *q != ',' && *q != '"' && *q != '\n' && *q != '\r')
		q++;
	return q;
}


/*
 * decode_csv_message
 *		Decode one CSV record into values/nulls (see decoder_decode for the
 *		contract).  The payload has passed decode_verify_encoding(), so the
 *		byte-wise search for '"', ',', CR and LF cannot hit the inside of a
 *		multibyte character.
 */
const char *
decode_csv_message(DecodeState *state, const char *payload, int len,
				   Datum *values, bool *nulls)
{
	const char *p = payload;
	const char *end = payload + len;
	int			nfields = 0;

	if (len == 0)
		return pstrdup("empty message");

	/* one line break ending the record is not part of it */
	if (end[-1] == '\n')
	{
		end--;
		if (end > p && end[-1] == '\r')
			end--;
	}

	for (;;)
	{
		DecodeSpan	span;
		int			field = nfields + 1;	/* 1-based, for messages */

		span.quoted = false;
		span.escaped = false;

		if (p < end && *p == '"')
		{
			const char *q = p + 1;

			/* find the closing quote, stepping over doubled ones */
			for (;;)
			{
				q = memchr(q, '"', end - q);
				if (q == NULL)
					return psprintf("field %d: unterminated quoted field starting at byte %d",
									field, (int) (p - payload));
				if (q + 1 < end && q[1] == '"')
				{
					span.escaped = true;
					q += 2;
					continue;
				}
				break;
			}
			span.quoted = true;
			span.start = p + 1;
			span.len = q - (p + 1);
			p = q + 1;
			if (p < end && *p != ',')
			{
				if (*p == '\r' || *p == '\n')
					return psprintf("field %d: line break after the closing quote at byte %d; a message must hold exactly one CSV record",
									field, (int) (p - payload));
				return psprintf("field %d: unexpected character after the closing quote at byte %d",
								field, (int) (p - payload));
			}
		}
		else
		{
			const char *q = unquoted_stop(p, end);

			if (q < end && *q == '"')
				return psprintf("field %d: quote character at byte %d inside an unquoted field",
								field, (int) (q - payload));
			if (q < end && (*q == '\n' || *q == '\r'))
				return psprintf("field %d: unquoted line break at byte %d; a message must hold exactly one CSV record",
								field, (int) (q - payload));
			span.start = p;
			span.len = q - p;
			p = q;
		}

		/* keep counting past the columns, to report how many there were */
		if (nfields < state->ncolumns)
			state->spans[nfields] = span;
		nfields++;

		if (p >= end)
			break;
		Assert(*p == ',');
		p++;
	}

	if (nfields != state->ncolumns)
		return csv_field_count_error(state, nfields);

	for (int i = 0; i < state->ncolumns; i++)
	{
		DecodeColumn *column = &state->columns[i];
		DecodeSpan *span = &state->spans[i];
		const char *chars = span->start;
		int			textlen = span->len;

		state->cur_column = column;
		state->cur_field = i + 1;

		if (!span->quoted && span->len == 0)
		{
			values[column->attindex] = decode_input(state, column, NULL, 0);
			nulls[column->attindex] = true;
			continue;
		}
		if (span->escaped)
		{
			StringInfo	buf = &state->scratch;
			const char *s = span->start;
			const char *send = span->start + span->len;

			/* drop the first quote of every doubled pair */
			resetStringInfo(buf);
			while (s < send)
			{
				const char *q = memchr(s, '"', send - s);

				if (q == NULL)
				{
					appendBinaryStringInfo(buf, s, send - s);
					break;
				}
				appendBinaryStringInfo(buf, s, q + 1 - s);
				s = q + 2;
			}
			chars = buf->data;
			textlen = buf->len;
		}
		if (!decode_fast(state, column, chars, textlen, &values[column->attindex]))
			values[column->attindex] = decode_input_function(state, column, chars, textlen);
		nulls[column->attindex] = false;
	}
	state->cur_column = NULL;
	state->cur_field = 0;
	return NULL;
}

static const char *
csv_field_count_error(DecodeState *state, int nfields)
{
	return psprintf("expected %d %s, found %d",
					state->ncolumns,
					state->ncolumns == 1 ? "field" : "fields",
					nfields);
}
