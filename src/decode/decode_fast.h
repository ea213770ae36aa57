/*-------------------------------------------------------------------------
 *
 * decode_fast.h
 *	  The conversions of the common text forms of timestamps, integers,
 *	  short decimals and text that skip the columns' input functions.
 *
 * Each accepts only text that the type's input function reads to the same
 * value whatever the session's settings, and returns false for anything
 * else: the caller then runs the input function (decode_input), which
 * also makes the errors.  They are inline functions so that the formats'
 * loops over a message's values (decode_json.c, decode_csv.c) convert most
 * values without a call; decode_input (decode_value.c) tries them first
 * too.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_DECODE_FAST_H
#define STREAMWIN_DECODE_FAST_H

#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "decode_value.h"

static inline bool parse_short_decimal(const char *s, int len, int maxdigits, int maxscale,
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
 * parse_decimal_integer
 *		An optional '-' and 1 to maxdigits decimal digits, nothing else: the
 *		shape of almost every integer in JSON and CSV, read to the value the
 *		integer input functions give it.  maxdigits keeps every such value
 *		within the type's range, so nothing here can overflow.  For anything
 *		else (spaces, '+', more digits, not an integer) it returns false and
 *		the caller uses the input function, which also raises the errors.
 */
static inline bool
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
static inline bool
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

/* the value of the two decimal digits at p, or -1 */
static inline int
two_digits(const char *p)
{
	unsigned int d1 = (unsigned char) p[0] - '0';
	unsigned int d2 = (unsigned char) p[1] - '0';

	return d1 <= 9 && d2 <= 9 ? (int) (d1 * 10 + d2) : -1;
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
 * the error messages.  The date and time have a fixed layout, so their
 * digits are read at their places, two at a time.
 */
static inline bool
parse_iso_timestamptz(const char *s, int len, TimestampTz *result)
{
	const char *p = s + 19;
	const char *end = s + len;
	int			century,
				yy,
				year,
				month,
				day,
				hour,
				minute,
				second;
	int64		fraction = 0;
	int			offset = 0;

	/* "YYYY-MM-DDTHH:MM:SS" and at least a one-letter zone */
	if (len < 20 ||
		s[4] != '-' || s[7] != '-' ||
		(s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
		s[13] != ':' || s[16] != ':')
		return false;
	century = two_digits(s);
	yy = two_digits(s + 2);
	month = two_digits(s + 5);
	day = two_digits(s + 8);
	hour = two_digits(s + 11);
	minute = two_digits(s + 14);
	second = two_digits(s + 17);
	if ((century | yy | month | day | hour | minute | second) < 0)
		return false;
	year = century * 100 + yy;
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

		if (end - p < 2 || (oh = two_digits(p)) < 0)
			return false;
		p += 2;
		/* then minutes, after a colon or not, or nothing */
		if (p < end && *p == ':' && end - p > 1)
			p++;
		if (p < end)
		{
			if (end - p < 2 || (om = two_digits(p)) < 0)
				return false;
			p += 2;
		}
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
 * decode_fast
 *		The value of column for its text chars/len (not NUL-terminated) in
 *		*value, if the column's fast path (column->fast) reads the text;
 *		else false.  Text values are allocated by decode_text_alloc.
 */
static inline bool
decode_fast(DecodeState *state, const DecodeColumn *column, const char *chars, int len,
			Datum *value)
{
	TimestampTz ts;
	int64		n;
	int			scale;
	bool		negative;

	switch (column->fast)
	{
		case DECODE_FAST_NONE:
			return false;
		case DECODE_FAST_TIMESTAMPTZ:
			if (!parse_iso_timestamptz(chars, len, &ts))
				return false;
			*value = TimestampTzGetDatum(ts);
			return true;
		case DECODE_FAST_INT2:
			if (!parse_decimal_integer(chars, len, 4, &n))
				return false;
			*value = Int16GetDatum((int16) n);
			return true;
		case DECODE_FAST_INT4:
			if (!parse_decimal_integer(chars, len, 9, &n))
				return false;
			*value = Int32GetDatum((int32) n);
			return true;
		case DECODE_FAST_INT8:
			if (!parse_decimal_integer(chars, len, 18, &n))
				return false;
			*value = Int64GetDatum(n);
			return true;
		case DECODE_FAST_FLOAT4:
			{
				float4		f;

				if (!parse_short_decimal(chars, len, 7, 10, &n, &scale, &negative))
					return false;
				f = (float4) n / float4_powers_of_ten[scale];
				*value = Float4GetDatum(negative ? -f : f);
				return true;
			}
		case DECODE_FAST_FLOAT8:
			{
				float8		f;

				if (!parse_short_decimal(chars, len, 15, 22, &n, &scale, &negative))
					return false;
				f = (float8) n / float8_powers_of_ten[scale];
				*value = Float8GetDatum(negative ? -f : f);
				return true;
			}
		case DECODE_FAST_TEXT:
			/* the payload holds no NUL byte */
			*value = decode_text_copy(&state->text, chars, len);
			return true;
	}
	return false;
}

#endif							/* STREAMWIN_DECODE_FAST_H */
