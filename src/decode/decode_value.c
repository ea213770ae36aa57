/*-------------------------------------------------------------------------
 *
 * decode_value.c
 *	  A column's value from its text in a message: the column's input
 *	  function, resolved once, and fast paths for the common text forms of
 *	  timestamps, integers, short decimals and text.
 *
 * The bottom of decoding (see decode_value.h): the formats (decode_json.c,
 * decode_csv.c, the text format in decode.c) find each value's text and
 * call decode_input(); this file calls none of them.
 *
 * src/decode/decode_value.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "decode_fast.h"
#include "decode_value.h"

static DecodeFastPath fast_path_for(Oid type, int32 typmod);
static bool type_reads_clock(Oid type);
static bool names_clock(const char *text);

/*
 * decode_column_init
 *		Fill column, the decoder's column for attribute attr (at index
 *		attindex of the row): its name, its type's name, and the type's
 *		input function with its cache space in mcxt, the decoder's memory
 *		context, so that for example domain_in keeps its constraint cache
 *		across messages.  Must be called inside a transaction (catalog
 *		access), with mcxt current.
 */
void
decode_column_init(DecodeColumn *column, int attindex, Form_pg_attribute attr,
				   MemoryContext mcxt)
{
	Oid			typinput;
	Oid			basetype;

	column->attindex = attindex;
	column->name = pstrdup(NameStr(attr->attname));
	column->namelen = strlen(column->name);
	column->typname = format_type_with_typemod(attr->atttypid,
											   attr->atttypmod);
	column->typmod = attr->atttypmod;
	column->typid = attr->atttypid;
	getTypeInputInfo(attr->atttypid, &typinput, &column->typioparam);
	fmgr_info_cxt(typinput, &column->inproc, mcxt);

	/*
	 * JSON values of json columns are passed on as JSON text.  A domain over
	 * json or jsonb is still JSON for that purpose; its input function
	 * (domain_in) checks the constraints.
	 */
	basetype = getBaseType(attr->atttypid);
	column->basetype = basetype;
	column->is_json = (basetype == JSONOID || basetype == JSONBOID);
	column->fast = fast_path_for(attr->atttypid, attr->atttypmod);
	column->reads_clock = type_reads_clock(attr->atttypid);
}

/*
 * Does the input function of a value of this type read the clock?  Those
 * of date, time and timestamp read 'now', 'today', 'tomorrow' and
 * 'yesterday' as of the transaction's start; so do those of the arrays,
 * ranges, multiranges, domains and row types that hold them.
 */
static bool
type_reads_clock(Oid type)
{
	Oid			inner;

	check_stack_depth();
	type = getBaseType(type);
	switch (type)
	{
		case DATEOID:
		case TIMEOID:
		case TIMETZOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return true;
		default:
			break;
	}
	if (OidIsValid(inner = get_element_type(type)) ||
		OidIsValid(inner = get_range_subtype(type)) ||
		OidIsValid(inner = get_multirange_range(type)))
		return type_reads_clock(inner);
	if (type_is_rowtype(type) && type != RECORDOID)
	{
		TupleDesc	desc = lookup_rowtype_tupdesc(type, -1);
		bool		reads = false;

		for (int i = 0; i < desc->natts && !reads; i++)
			if (!TupleDescAttr(desc, i)->attisdropped)
				reads = type_reads_clock(TupleDescAttr(desc, i)->atttypid);
		ReleaseTupleDesc(desc);
		return reads;
	}
	return false;
}

/*
 * Does the text hold one of the words date and time input reads off the
 * clock, as a word of its own, in any case?  A conservative test: a word
 * that only a text field of a row type holds counts too.
 */
static bool
names_clock(const char *text)
{
	static const char *const words[] = {"now", "today", "tomorrow", "yesterday"};
	const char *p = text;

	while (*p != '\0')
	{
		const char *start;
		size_t		len;

		if (!isalpha((unsigned char) *p))
		{
			p++;
			continue;
		}
		start = p;
		while (isalpha((unsigned char) *p))
			p++;
		len = p - start;
		for (int i = 0; i < (int) lengthof(words); i++)
			if (len == strlen(words[i]) && pg_strncasecmp(start, words[i], len) == 0)
				return true;
	}
	return false;
}

/*
 * decode_input
 *		Run a column's input function on a value found in the message.
 *
 * text/len is the value's text, not NUL-terminated; it is copied into the
 * decoder's scratch buffer to terminate it.  If text is already
 * state->scratch.data (a parser unescaped it there), it is used as is.
 * text == NULL stands for SQL NULL: the input function still gets the call
 * so that a domain's NOT NULL constraint is checked.  The input function
 * may raise an error; state->cur_column should be set so that the error
 * context names the column.
 */
Datum
decode_input(DecodeState *state, DecodeColumn *column,
			 const char *chars, int len)
{
	if (chars != NULL && column->fast != DECODE_FAST_NONE)
	{
		Datum		value;

		if (decode_fast(state, column, chars, len, &value))
			return value;
	}
	return decode_input_function(state, column, chars, len);
}

/*
 * decode_input_function
 *		decode_input without the fast path: for a parser that tried
 *		decode_fast itself, in line, and was declined (the value is one the
 *		fast path leaves to the type, which it need not be asked again).
 */
Datum
decode_input_function(DecodeState *state, DecodeColumn *column,
					  const char *chars, int len)
{
	StringInfo	buf = &state->scratch;

	if (chars != NULL && chars != buf->data)
	{
		resetStringInfo(buf);
		appendBinaryStringInfo(buf, chars, len);
	}

	/*
	 * A value that means the time it is decoded would be another in a
	 * replay, or in a run_batch of the same messages later: a dead letter.
	 */
	if (chars != NULL && column->reads_clock && names_clock(buf->data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_DATETIME_FORMAT),
				 errmsg("value \"%s\" of type %s reads the clock", buf->data, column->typname),
				 errdetail("'now', 'today', 'tomorrow' and 'yesterday' mean another time each time a message is decoded, "
						   "and a batch decodes the same messages again after a crash.")));
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
