/*-------------------------------------------------------------------------
 *
 * decode_json.c
 *	  The JSON message format: one JSON object per message, keys matched to
 *	  column names.
 *
 * The payload is checked against RFC 8259 strictly (no comments, no
 * trailing commas, no trailing garbage, only the escapes the RFC defines)
 * by a hand-written single-pass scanner.  It builds nothing: for each
 * top-level key that names a column it records where the value's text is,
 * and only when the whole message has been found well-formed are the values
 * handed to the columns' input functions.  Strings are unescaped only when
 * they contain a backslash, nested values are skipped with an explicit
 * stack (never recursion) and a depth limit.
 *
 * Why not PostgreSQL's own parser (pg_parse_json): it needs a lexer per
 * message, copies every de-escaped token and dispatches callbacks per key,
 * while this scanner reads each byte once and allocates nothing for a
 * well-formed message but the values themselves.  Streams are mostly small
 * messages, where that overhead would be a large share of the cost.
 *
 * Value mapping: null -> NULL; a string -> its unescaped text; a number ->
 * its literal text; true/false -> "true"/"false"; objects and arrays only
 * for json/jsonb columns.  json/jsonb columns get the raw JSON text of any
 * value, so a string stays a JSON string.  Missing keys are NULL (and
 * counted per column, so that a batch can report them), unknown keys are
 * ignored, and when a key repeats, the last one wins (as in jsonb).  A
 * message whose schema gives a column a logical type (state->logical: a
 * row in Kafka Connect's wrapper, or a Debezium event's) has that column's
 * value converted first (decode_logical.c): a timestamp's integer, a
 * decimal's base64, a VariableScaleDecimal's object, a Json string's
 * document.  A message that names no column at all is left to its caller,
 * which may find the wrapper in it (state->unwrap).
 *
 * src/decode/decode_json.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "decode_bytes.h"
#include "decode_fast.h"
#include "decode_json.h"
#include "decode_logical.h"

/* JSON nesting deeper than this is rejected (never recursed into) */
#define DECODE_JSON_MAX_DEPTH	1000

/* character classes, see json_cc */
#define CC_SPACE		0x01	/* JSON whitespace: space, tab, LF, CR */
#define CC_STRSTOP		0x02	/* stops a string scan: '"', '\\', < 0x20 */
#define CC_WORD			0x04	/* may not follow a number or literal */
#define CC_DIGIT		0x08

static uint8 json_cc[256];
static bool json_cc_ready = false;

/* State of one scan; positions are reported relative to start */
typedef struct JsonScan
{
	const char *start;
	const char *end;
	int			encoding;
	const char *error;			/* set when a scan function returns NULL */
} JsonScan;

static const char *json_error(JsonScan *scan, const char *at,
							  const char *fmt,...) pg_attribute_printf(3, 4);
static const char *json_describe(JsonScan *scan, const char *at);
static const char *scan_string(JsonScan *scan, const char *p, bool *escaped);
static const char *scan_number(JsonScan *scan, const char *p);
static const char *scan_literal(JsonScan *scan, const char *p,
								const char *word, int wordlen);
static const char *scan_member_key(JsonScan *scan, const char *p,
								   const char **key, int *keylen,
								   bool *escaped);
static const char *scan_value(JsonScan *scan, const char *p, uint8 *kind);
static const char *json_unescape(DecodeState *state, const char *p,
								 const char *end, StringInfo out);
static int	hex4(const char *p, const char *end);
static int	match_key(DecodeState *state, const char *key, int keylen,
					  int *next);
static int	match_name(const char *const *names, int nnames, const char *key,
					   int keylen);
static const char *logical_text(DecodeState *state, const LogicalField *f,
								const DecodeSpan *span, StringInfo out);


static inline uint32
key_hash(const char *key, int len)
{
	/* FNV-1a: column names are short, and this is cheap and good enough */
	uint32		h = 2166136261u;

	for (int i = 0; i < len; i++)
		h = (h ^ (unsigned char) key[i]) * 16777619u;
	return h;
}

/*
 * How much of the text at p (len bytes) to quote in an error message: at
 * most NAMEDATALEN bytes, cut at a character boundary so that the message
 * stays valid in the database encoding (it is stored as text).
 */
static inline int
clip_len(JsonScan *scan, const char *p, int len)
{
	if (len <= NAMEDATALEN)
		return len;
	return pg_encoding_mbcliplen(scan->encoding, p, len, NAMEDATALEN);
}

static inline const char *
skip_space(const char *p, const char *end)
{
	while (p < end && (json_cc[(unsigned char) *p] & CC_SPACE))
		p++;
	return p;
}

/*
 * The first byte at or after q (before end) that stops a string scan: '"',
 * '\\' or a control character (CC_STRSTOP); end if there is none.  Strings
 * are most of a message's bytes, so they are searched a word at a time
 * (decode_bytes.h), the last few bytes one by one.
 */
static inline const char *
string_stop(const char *q, const char *end)
{
#ifdef DECODE_WORDWISE
	while (end - q >= 8)
	{
		uint64		v = bytes_load8(q);
		uint64		stops = bytes_equal(v, '"') | bytes_equal(v, '\\') | bytes_below(v, 0x20);

		if (stops != 0)
			return q + bytes_first(stops);
		q += 8;
	}
#endif
	while (q < end && !(json_cc[(unsigned char) *q] & CC_STRSTOP))
		q++;
	return q;
}

/*
 * decode_json_init
 *		Prepare a decoder for the JSON format: the character class table
 *		(once per process) and the hash table that maps keys to columns.
 *		Called by decoder_create(), in the decoder's memory context.
 */
void
decode_json_init(DecodeState *state)
{
	uint32		size = 8;

	if (!json_cc_ready)
	{
		for (int c = 0; c < 0x20; c++)
			json_cc[c] |= CC_STRSTOP;
		json_cc['"'] |= CC_STRSTOP;
		json_cc['\\'] |= CC_STRSTOP;
		json_cc[' '] |= CC_SPACE;
		json_cc['\t'] |= CC_SPACE;
		json_cc['\n'] |= CC_SPACE;
		json_cc['\r'] |= CC_SPACE;
		for (int c = '0'; c <= '9'; c++)
			json_cc[c] |= CC_DIGIT | CC_WORD;
		for (int c = 'a'; c <= 'z'; c++)
			json_cc[c] |= CC_WORD;
		for (int c = 'A'; c <= 'Z'; c++)
			json_cc[c] |= CC_WORD;
		json_cc['.'] |= CC_WORD;
		json_cc['+'] |= CC_WORD;
		json_cc['-'] |= CC_WORD;
		json_cc['_'] |= CC_WORD;
		for (int c = 0x80; c < 0x100; c++)
			json_cc[c] |= CC_WORD;
		json_cc_ready = true;
	}

	/* (used only for values a message's schema gives a logical type) */
	initStringInfo(&state->logical_text);

	/* at most half full, so that probe sequences stay short */
	while (size < (uint32) state->ncolumns * 2)
		size *= 2;
	state->keyhash = palloc(sizeof(int) * size);
	state->keyhash_mask = size - 1;
	for (uint32 i = 0; i < size; i++)
		state->keyhash[i] = -1;

	for (int i = 0; i < state->ncolumns; i++)
	{
		DecodeColumn *column = &state->columns[i];
		uint32		h;

		StaticAssertStmt(NAMEDATALEN <= 64, "a name's length must fit key_lengths");
		state->key_lengths |= UINT64CONST(1) << column->namelen;
		column->plain_key = true;
		for (int j = 0; j < column->namelen; j++)
			if (json_cc[(unsigned char) column->name[j]] & CC_STRSTOP)
				column->plain_key = false;

		/* '"name":' in two words, for match_next_key, if it fits */
		column->key_in_words = false;
#ifdef DECODE_WORDWISE
		if (column->plain_key && column->namelen >= 0 && column->namelen + 3 <= 16)
		{
			char		pattern[16];
			int			patlen = column->namelen + 3;

			memset(pattern, 0, sizeof(pattern));
			pattern[0] = '"';
			memcpy(pattern + 1, column->name, column->namelen);
			pattern[column->namelen + 1] = '"';
			pattern[column->namelen + 2] = ':';
			for (int w = 0; w < 2; w++)
			{
				int			nbytes = Max(0, Min(8, patlen - 8 * w));

				column->key_words[w] = bytes_load8(pattern + 8 * w);
				column->key_masks[w] = nbytes == 8 ? ~UINT64CONST(0) :
					(UINT64CONST(1) << (8 * nbytes)) - 1;
			}
			column->key_in_words = true;
		}
#endif

		h = key_hash(column->name, column->namelen) & state->keyhash_mask;

		while (state->keyhash[h] >= 0)
			h = (h + 1) & state->keyhash_mask;
		state->keyhash[h] = i;
	}
}

/*
 * plain_number_end
 *		The end of the number at p if it is written -?[1-9][0-9]*(\.[0-9]+)?
 *		or -?0(\.[0-9]+)? and followed by a byte that may follow a number
 *		(not CC_WORD), the common shapes; else NULL, and scan_number decides
 *		(exponents, and the errors).
 */
static inline const char *
plain_number_end(const char *p, const char *end)
{
	const char *q = p;

	if (*q == '-')
		q++;
	if (q >= end || !(json_cc[(unsigned char) *q] & CC_DIGIT))
		return NULL;
	if (*q++ != '0')
		while (q < end && (json_cc[(unsigned char) *q] & CC_DIGIT))
			q++;
	if (q < end && *q == '.')
	{
		q++;
		if (q >= end || !(json_cc[(unsigned char) *q] & CC_DIGIT))
			return NULL;
		while (q < end && (json_cc[(unsigned char) *q] & CC_DIGIT))
			q++;
	}
	if (q < end && (json_cc[(unsigned char) *q] & CC_WORD))
		return NULL;
	return q;
}

/*
 * match_next_key
 *		The member key at p, if it is the name of column next written as it
 *		is (no escapes), followed by ':': *col = next, *key and *keylen its
 *		text, and the position of the value (whitespace skipped) returned.
 *		Otherwise *col stays -1 and p is returned, for scan_member_key.
 *
 * Producers write keys in the order of the columns nearly always, so most
 * keys are found by one comparison with the name expected, without
 * scanning the key as a string first or hashing it.  A name that needs
 * escaping in JSON (plain_key false) is left to the general path, so that
 * a match here is always the match scan_member_key and match_key make.
 */
static inline const char *
match_next_key(DecodeState *state, const char *p, const char *end, int next,
			   const char **key, int *keylen, int *col)
{
	DecodeColumn *column = &state->columns[next];
	int			len = column->namelen;
	const char *q;

#ifdef DECODE_WORDWISE
	/* '"name":' without whitespace, compared as two words */
	if (column->key_in_words && end - p >= 16 &&
		(bytes_load8(p) & column->key_masks[0]) == column->key_words[0] &&
		(bytes_load8(p + 8) & column->key_masks[1]) == column->key_words[1])
	{
		*key = p + 1;
		*keylen = len;
		*col = next;
		return skip_space(p + len + 3, end);
	}
#endif
	if (!column->plain_key || end - p < len + 2 || p[0] != '"' || p[len + 1] != '"')
		return p;
	for (int i = 0; i < len; i++)
		if (p[i + 1] != column->name[i])
			return p;
	q = skip_space(p + len + 2, end);
	if (q >= end || *q != ':')
		return p;
	*key = p + 1;
	*keylen = len;
	*col = next;
	return skip_space(q + 1, end);
}

/*
 * scan_object
 *		Scan the payload as exactly one JSON object and record where the
 *		values of the members it looks for are: with names NULL, the keys
 *		that name columns, into state->spans (*containers: one of them is an
 *		object or an array); else the members named names[0..nnames), into
 *		spans.  Returns NULL, or the error.
 */
static const char *
scan_object(DecodeState *state, const char *payload, int len, int nnames,
			const char *const *names, DecodeSpan *spans, bool *containers)
{
	JsonScan	scan;
	const char *p;
	const char *end = payload + len;
	int			next = 0;

	if (len == 0)
		return pstrdup("empty message");

	scan.start = payload;
	scan.end = end;
	scan.encoding = state->encoding;
	scan.error = NULL;

	/* the message must be exactly one object */
	p = skip_space(payload, end);
	if (p >= end || *p != '{')
	{
		const char *found;

		if (p >= end)
			found = "only whitespace";
		else if (*p == '[')
			found = "an array";
		else if (*p == '"')
			found = "a string";
		else if (*p == '-' || (json_cc[(unsigned char) *p] & CC_DIGIT))
			found = "a number";
		else if (*p == 't' && end - p >= 4 && memcmp(p, "true", 4) == 0)
			found = "true";
		else if (*p == 'f' && end - p >= 5 && memcmp(p, "false", 5) == 0)
			found = "false";
		else if (*p == 'n' && end - p >= 4 && memcmp(p, "null", 4) == 0)
			found = "null";
		else
			found = json_describe(&scan, p);
		json_error(&scan, p, "expected a JSON object, found %s", found);
		return scan.error;
	}

	p = skip_space(p + 1, end);
	if (p < end && *p == '}')
		p++;
	else
	{
		for (;;)
		{
			const char *key;
			int			keylen;
			bool		escaped;
			const char *value;
			uint8		kind;
			int			col;

			col = -1;
			if (names == NULL && next < state->ncolumns)
				p = match_next_key(state, p, end, next, &key, &keylen, &col);
			if (col >= 0)
			{
				next = col + 1;
				escaped = false;
			}
			else
			{
				p = scan_member_key(&scan, p, &key, &keylen, &escaped);
				if (p == NULL)
					return scan.error;
			}
			value = p;

			/*
			 * Strings and numbers directly: scan_value would take the same
			 * steps after a dispatch and the set-up for nested values.
			 */
			if (p < end && *p == '"')
			{
				const char *q = string_stop(p + 1, end);
				bool		value_escaped;

				/* without escapes the first stop is the closing quote */
				if (q < end && *q == '"')
				{
					p = q + 1;
					kind = DJ_STRING;
				}
				else
				{
					p = scan_string(&scan, p, &value_escaped);
					kind = value_escaped ? DJ_STRING_ESCAPED : DJ_STRING;
				}
			}
			else if (p < end && (*p == '-' || (json_cc[(unsigned char) *p] & CC_DIGIT)))
			{
				const char *q = plain_number_end(p, end);

				p = q != NULL ? q : scan_number(&scan, p);
				kind = DJ_NUMBER;
			}
			else
				p = scan_value(&scan, p, &kind);
			if (p == NULL)
				return scan.error;

			if (col >= 0)
				 /* matched by match_next_key */ ;
			else if (!escaped)
				col = names == NULL ? match_key(state, key, keylen, &next) :
					match_name(names, nnames, key, keylen);
			else
			{
				/*
				 * Rare: compare the unescaped key.  A key that has no text
				 * form (\u0000, a lone surrogate) cannot name a column, so it
				 * is simply unknown.
				 */
				resetStringInfo(&state->scratch);
				if (json_unescape(state, key, key + keylen,
								  &state->scratch) != NULL)
					col = -1;
				else if (names == NULL)
					col = match_key(state, state->scratch.data,
									state->scratch.len, &next);
				else
					col = match_name(names, nnames, state->scratch.data,
									 state->scratch.len);
			}
			if (col >= 0)
			{
				DecodeSpan *span = &(names == NULL ? state->spans : spans)[col];

				span->start = value;
				span->len = p - value;
				span->kind = kind;
				if (kind == DJ_OBJECT || kind == DJ_ARRAY)
					*containers = true;
			}

			p = skip_space(p, end);
			if (p < end && *p == ',')
			{
				p = skip_space(p + 1, end);
				if (p < end && *p == '}')
				{
					json_error(&scan, p, "trailing comma before \"}\"");
					return scan.error;
				}
				continue;
			}
			if (p < end && *p == '}')
			{
				p++;
				break;
			}
			json_error(&scan, p, "expected \",\" or \"}\" after the value of key \"%.*s\", found %s",
					   clip_len(&scan, key, keylen), key,
					   json_describe(&scan, p));
			return scan.error;
		}
	}

	p = skip_space(p, end);
	if (p < end)
	{
		json_error(&scan, p, "expected the end of the message after the object, found %s",
				   json_describe(&scan, p));
		return scan.error;
	}
	return NULL;
}

/*
 * The characters of a string value (kind DJ_STRING or DJ_STRING_ESCAPED),
 * unescaped into the state's scratch if it has escapes: *chars, *len.
 * Returns NULL, or what it holds that no text can (\u0000).
 */
static inline const char *
string_chars(DecodeState *state, const DecodeSpan *span, const char **chars, int *len)
{
	const char *bad;

	if (span->kind == DJ_STRING)
	{
		*chars = span->start + 1;
		*len = span->len - 2;
		return NULL;
	}
	resetStringInfo(&state->scratch);
	bad = json_unescape(state, span->start + 1, span->start + span->len - 1, &state->scratch);
	*chars = state->scratch.data;
	*len = state->scratch.len;
	return bad;
}

/*
 * What decode_json_message returns, with state->unwrap, for a message that
 * names none of the columns and converts nothing: its caller may find a
 * Kafka Connect wrapper in it (decode.c).
 */
const char	decode_json_wrapped[] = "a message that names no column";

/*
 * decode_json_message
 *		Decode one JSON object into values/nulls (see decoder_decode for the
 *		contract).  The payload has passed decode_verify_encoding().
 */
const char *
decode_json_message(DecodeState *state, const char *payload, int len,
					Datum *values, bool *nulls)
{
	const char *error;
	bool		containers = false;
	bool		any_missing = false;

	for (int i = 0; i < state->ncolumns; i++)
		state->spans[i].kind = DJ_MISSING;
	error = scan_object(state, payload, len, 0, NULL, NULL, &containers);
	if (error != NULL)
		return error;
	/* (the first column is nearly always there: the rest need not be looked at) */
	if (unlikely(state->unwrap) && state->ncolumns > 0 && state->spans[0].kind == DJ_MISSING)
	{
		bool		none = true;

		for (int i = 1; i < state->ncolumns && none; i++)
			none = state->spans[i].kind == DJ_MISSING;
		if (none)
			return decode_json_wrapped;
	}

	/*
	 * The message is well-formed.  Reject containers for scalar columns
	 * before running any input function, so that the error is ours rather
	 * than whatever an earlier column's input function thought.  A column
	 * of a logical type says what it needs itself (logical_text).
	 */
	if (containers)
	{
		for (int i = 0; i < state->ncolumns; i++)
		{
			DecodeSpan *span = &state->spans[i];

			if ((span->kind == DJ_OBJECT || span->kind == DJ_ARRAY) &&
				!state->columns[i].is_json &&
				!(state->logical != NULL && state->logical[i].kind != LOGICAL_NONE))
				return psprintf("key \"%s\": expected a scalar value for column of type %s, found %s",
								state->columns[i].name,
								state->columns[i].typname,
								span->kind == DJ_OBJECT ? "an object" : "an array");
		}
	}

	for (int i = 0; i < state->ncolumns; i++)
	{
		DecodeColumn *column = &state->columns[i];
		DecodeSpan *span = &state->spans[i];
		const char *chars = span->start;
		int			textlen = span->len;

		state->cur_column = column;
		if (span->kind == DJ_MISSING || span->kind == DJ_NULL)
		{
			any_missing |= span->kind == DJ_MISSING;
			values[column->attindex] = decode_input(state, column, NULL, 0);
			nulls[column->attindex] = true;
			continue;
		}
		if (unlikely(state->logical != NULL) && state->logical[i].kind != LOGICAL_NONE)
		{
			error = logical_text(state, &state->logical[i], span, &state->logical_text);
			if (error != NULL)
				return psprintf("key \"%s\": %s", column->name, error);
			chars = state->logical_text.data;
			textlen = state->logical_text.len;
		}
		else if (!column->is_json &&
				 (span->kind == DJ_STRING || span->kind == DJ_STRING_ESCAPED))
		{
			const char *bad = string_chars(state, span, &chars, &textlen);

			if (bad != NULL)
				return psprintf("key \"%s\": the string contains %s, which cannot be converted to type %s",
								column->name, bad, column->typname);
		}
		if (!decode_fast(state, column, chars, textlen, &values[column->attindex]))
			values[column->attindex] = decode_input_function(state, column, chars, textlen);
		nulls[column->attindex] = false;
	}
	state->cur_column = NULL;

	/* a message decoded: count the keys it lacked (decoder_missing_counts) */
	if (any_missing)
		for (int i = 0; i < state->ncolumns; i++)
			if (state->spans[i].kind == DJ_MISSING)
				state->missing[i]++;
	return NULL;
}

/*
 * decode_json_members
 *		Scan payload as one JSON object, as strictly as a message, and find
 *		the values of its members named names[0..nnames): spans[i] (kind
 *		DJ_MISSING for a name it lacks; of a repeated name, the last).
 *		Converts nothing.  Returns NULL, or what is wrong with the payload.
 *		The payload has passed decode_verify_encoding(), and the state is a
 *		JSON decoder's (decode_json_init).
 */
const char *
decode_json_members(DecodeState *state, const char *payload, int len, int nnames,
					const char *const *names, DecodeSpan *spans)
{
	bool		containers = false;

	for (int i = 0; i < nnames; i++)
		spans[i].kind = DJ_MISSING;
	return scan_object(state, payload, len, nnames, names, spans, &containers);
}

/*
 * decode_json_string
 *		The text of a string value found by decode_json_members (kind
 *		DJ_STRING or DJ_STRING_ESCAPED), in CurrentMemoryContext; NULL if it
 *		has no text form (\u0000, a lone surrogate).
 */
char *
decode_json_string(DecodeState *state, const DecodeSpan *span)
{
	StringInfoData out;

	Assert(span->kind == DJ_STRING || span->kind == DJ_STRING_ESCAPED);
	if (span->kind == DJ_STRING)
		return pnstrdup(span->start + 1, span->len - 2);
	initStringInfo(&out);
	if (json_unescape(state, span->start + 1, span->start + span->len - 1, &out) != NULL)
		return NULL;
	return out.data;
}

/*
 * decode_json_kind_name
 *		What a JSON value of kind is (DecodeJsonKind), for messages: "a
 *		string", "null", ...
 */
const char *
decode_json_kind_name(uint8 kind)
{
	switch ((DecodeJsonKind) kind)
	{
		case DJ_MISSING:
			return "nothing";
		case DJ_NULL:
			return "null";
		case DJ_STRING:
		case DJ_STRING_ESCAPED:
			return "a string";
		case DJ_NUMBER:
			return "a number";
		case DJ_TRUE:
			return "true";
		case DJ_FALSE:
			return "false";
		case DJ_OBJECT:
			return "an object";
		case DJ_ARRAY:
			return "an array";
	}
	return "a value";
}

/*
 * decode_json_elements
 *		The elements of an array found by decode_json_members (kind
 *		DJ_ARRAY), in a palloc'd array *elements; returns how many.  The
 *		array was scanned whole already, so this cannot fail.
 */
int
decode_json_elements(DecodeState *state, const DecodeSpan *array, DecodeSpan **elements)
{
	JsonScan	scan;
	const char *p = array->start + 1;
	const char *end = array->start + array->len;
	int			n = 0;
	int			max = 8;

	Assert(array->kind == DJ_ARRAY);
	scan.start = array->start;
	scan.end = end;
	scan.encoding = state->encoding;
	scan.error = NULL;
	*elements = palloc(sizeof(DecodeSpan) * max);
	for (p = skip_space(p, end); p < end && *p != ']'; p = skip_space(p, end))
	{
		DecodeSpan *e;

		if (n == max)
		{
			max *= 2;
			*elements = repalloc(*elements, sizeof(DecodeSpan) * max);
		}
		e = &(*elements)[n++];
		e->start = p;
		p = scan_value(&scan, p, &e->kind);
		if (p == NULL)
			elog(ERROR, "streamwin: a scanned JSON array fails a second scan: %s", scan.error);
		e->len = p - e->start;
		p = skip_space(p, end);
		if (p < end && *p == ',')
			p++;
	}
	return n;
}

/* The value of a number of at most 5 digits and no fraction: false if not one */
static bool
small_integer(const DecodeSpan *span, int32 *v)
{
	const char *p;
	const char *end;
	bool		negative;

	*v = 0;
	/* (a member that is missing has no text) */
	if (span->kind != DJ_NUMBER)
		return false;
	p = span->start;
	end = p + span->len;
	negative = p < end && *p == '-';
	if (span->len - negative < 1 || span->len - negative > 5)
		return false;
	for (p += negative; p < end; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
		*v = *v * 10 + (*p - '0');
	}
	if (negative)
		*v = -*v;
	return true;
}

/*
 * The text of a value that the message's schema gives logical type f, for
 * its column's input function, into out (see decode_logical.c).  Returns
 * NULL, or why the value is not one of f.
 */
static const char *
logical_text(DecodeState *state, const LogicalField *f, const DecodeSpan *span, StringInfo out)
{
	static const char *const decimal_members[] = {"scale", "value"};
	DecodeSpan	m[2];
	const char *chars;
	int			len;
	const char *bad;
	int32		scale = f->scale;

	resetStringInfo(out);
	switch ((LogicalKind) f->kind)
	{
		case LOGICAL_TIMESTAMP:
		case LOGICAL_DATE:
		case LOGICAL_TIME:
		case LOGICAL_DURATION:
			if (span->kind != DJ_NUMBER)
				return psprintf("%s needs an integer, found %s", f->name,
								decode_json_kind_name(span->kind));
			return logical_integer_text(f, span->start, span->len, out);
		case LOGICAL_VARIABLE_DECIMAL:
			if (span->kind != DJ_OBJECT)
				return psprintf("%s needs an object of \"scale\" and \"value\", found %s", f->name,
								decode_json_kind_name(span->kind));
			/* scanned once already: this finds its members, it cannot fail */
			if (decode_json_members(state, span->start, span->len, 2, decimal_members, m) != NULL)
				elog(ERROR, "streamwin: a scanned JSON object fails a second scan");
			if (!small_integer(&m[0], &scale))
				return psprintf("%s needs an integer \"scale\" of at most 5 digits", f->name);
			if (m[1].kind != DJ_STRING && m[1].kind != DJ_STRING_ESCAPED)
				return psprintf("%s needs a string \"value\", found %s", f->name,
								decode_json_kind_name(m[1].kind));
			span = &m[1];
			/* FALLTHROUGH */
		case LOGICAL_DECIMAL:
		case LOGICAL_BYTES:
		case LOGICAL_JSON:
			if (span->kind != DJ_STRING && span->kind != DJ_STRING_ESCAPED)
				return psprintf("%s needs a string, found %s", f->name,
								decode_json_kind_name(span->kind));
			bad = string_chars(state, span, &chars, &len);
			if (bad != NULL)
				return psprintf("%s: the string contains %s", f->name, bad);
			if (f->kind == LOGICAL_BYTES)
				return logical_bytes_text(f, chars, len, out);
			if (f->kind == LOGICAL_JSON)
			{
				appendBinaryStringInfo(out, chars, len);
				return NULL;
			}
			return logical_decimal_text(f, chars, len, scale, out);
		case LOGICAL_NONE:
			break;
	}
	elog(ERROR, "streamwin: no text for logical type %d", f->kind);
	return NULL;
}

/* The index of the name that key is in names[0..nnames), or -1. */
static int
match_name(const char *const *names, int nnames, const char *key, int keylen)
{
	for (int i = 0; i < nnames; i++)
		if (strncmp(names[i], key, keylen) == 0 && names[i][keylen] == '\0')
			return i;
	return -1;
}

/*
 * match_key
 *		Return the index of the column named key, or -1.
 *
 * Producers almost always write keys in the same order, so the column after
 * the previous match (*next) is tried before the hash table.
 */
static int
match_key(DecodeState *state, const char *key, int keylen, int *next)
{
	int			i = *next;
	uint32		h;

	if (i < state->ncolumns &&
		state->columns[i].namelen == keylen &&
		memcmp(state->columns[i].name, key, keylen) == 0)
	{
		*next = i + 1;
		return i;
	}

	/* no column name is that long (most unknown keys end here) */
	if (keylen >= NAMEDATALEN || !(state->key_lengths & (UINT64CONST(1) << keylen)))
		return -1;

	h = key_hash(key, keylen) & state->keyhash_mask;
	while ((i = state->keyhash[h]) >= 0)
	{
		if (state->columns[i].namelen == keylen &&
			memcmp(state->columns[i].name, key, keylen) == 0)
		{
			*next = i + 1;
			return i;
		}
		h = (h + 1) & state->keyhash_mask;
	}
	return -1;
}

/*
 * json_error
 *		Record "invalid JSON at byte N: <message>" as the scan's error and
 *		return NULL, so that scan functions can "return json_error(...)".
 */
static const char *
json_error(JsonScan *scan, const char *at, const char *fmt,...)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "invalid JSON at byte %d: ", (int) (at - scan->start));
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	scan->error = buf.data;
	return NULL;
}

/*
 * json_describe
 *		Say what was found at a position, for error messages: the end of the
 *		message, a quoted printable character, or the hex code of a control
 *		character.
 */
static const char *
json_describe(JsonScan *scan, const char *at)
{
	unsigned char c;

	if (at >= scan->end)
		return "end of message";
	c = (unsigned char) *at;
	if (c == '"')
		return "a string";
	if (c < 0x20 || c == 0x7f)
		return psprintf("control character 0x%02x", c);
	if (c >= 0x80)
	{
		/* the payload's encoding was verified, so this is a whole character */
		int			l = Min(pg_encoding_mblen(scan->encoding, at),
							(int) (scan->end - at));

		return psprintf("\"%.*s\"", l, at);
	}
	return psprintf("\"%c\"", c);
}

/*
 * scan_member_key
 *		Scan '"key" :' of an object member at p (whitespace before it already
 *		skipped).  Returns the position of the value (whitespace skipped), and
 *		the raw key text (without quotes, possibly escaped) through key and
 *		keylen.
 */
static const char *
scan_member_key(JsonScan *scan, const char *p, const char **key, int *keylen,
				bool *escaped)
{
	const char *q;

	if (p >= scan->end || *p != '"')
		return json_error(scan, p, "expected a string key, found %s",
						  json_describe(scan, p));
	q = scan_string(scan, p, escaped);
	if (q == NULL)
		return NULL;
	*key = p + 1;
	*keylen = (q - 1) - (p + 1);

	q = skip_space(q, scan->end);
	if (q >= scan->end || *q != ':')
		return json_error(scan, q, "expected \":\" after key \"%.*s\", found %s",
						  clip_len(scan, *key, *keylen), *key,
						  json_describe(scan, q));
	return skip_space(q + 1, scan->end);
}

/*
 * Inside a nested object, skip a member's key and colon: nested values are
 * only stepped over, their keys are not columns.  NULL on a syntax error.
 */
static const char *
skip_member_key(JsonScan *scan, const char *p)
{
	const char *key;
	int			keylen;
	bool		escaped;

	return scan_member_key(scan, p, &key, &keylen, &escaped);
}

/*
 * scan_value
 *		Scan the JSON value at p and return the position just after it; set
 *		*kind to what it is.
 *
 * Objects and arrays are walked iteratively with an explicit stack of the
 * closing brackets still expected.  The top-level object of the message
 * counts as one level, hence the limit of DECODE_JSON_MAX_DEPTH - 1 here.
 */
static const char *
scan_value(JsonScan *scan, const char *p, uint8 *kind)
{
	const char *end = scan->end;
	char		closers[DECODE_JSON_MAX_DEPTH];
	int			depth = 0;

	if (p < end && *p == '{')
		*kind = DJ_OBJECT;
	else if (p < end && *p == '[')
		*kind = DJ_ARRAY;

	for (;;)
	{
		/* p is at the start of a value, whitespace skipped */
		if (p >= end)
			return json_error(scan, p, "expected a value, found end of message");

		switch (*p)
		{
			case '{':
			case '[':
				if (depth >= DECODE_JSON_MAX_DEPTH - 1)
					return json_error(scan, p, "nesting depth exceeds %d",
									  DECODE_JSON_MAX_DEPTH);
				closers[depth++] = (*p == '{') ? '}' : ']';
				p = skip_space(p + 1, end);
				if (p < end && *p == closers[depth - 1])
				{
					/* empty container: a complete value */
					p++;
					depth--;
					break;
				}
				if (closers[depth - 1] == '}' && (p = skip_member_key(scan, p)) == NULL)
					return NULL;
				/* on to the first element's value */
				continue;

			case '"':
				{
					bool		escaped;

					p = scan_string(scan, p, &escaped);
					if (depth == 0)
						*kind = escaped ? DJ_STRING_ESCAPED : DJ_STRING;
				}
				break;

			case 't':
				p = scan_literal(scan, p, "true", 4);
				if (depth == 0)
					*kind = DJ_TRUE;
				break;

			case 'f':
				p = scan_literal(scan, p, "false", 5);
				if (depth == 0)
					*kind = DJ_FALSE;
				break;

			case 'n':
				p = scan_literal(scan, p, "null", 4);
				if (depth == 0)
					*kind = DJ_NULL;
				break;

			case '-':
			case '0':
			case '1':
			case '2':
			case '3':
			case '4':
			case '5':
			case '6':
			case '7':
			case '8':
			case '9':
				p = scan_number(scan, p);
				if (depth == 0)
					*kind = DJ_NUMBER;
				break;

			default:
				return json_error(scan, p, "expected a value, found %s",
								  json_describe(scan, p));
		}
		if (p == NULL)
			return NULL;

		/*
		 * A value has ended.  Close the containers it completes, and find the
		 * start of the next element if there is one.
		 */
		for (;;)
		{
			if (depth == 0)
				return p;

			p = skip_space(p, end);
			if (p < end && *p == ',')
			{
				p = skip_space(p + 1, end);
				if (p < end && *p == closers[depth - 1])
					return json_error(scan, p, "trailing comma before \"%c\"",
									  closers[depth - 1]);
				if (closers[depth - 1] == '}' && (p = skip_member_key(scan, p)) == NULL)
					return NULL;
				break;
			}
			if (p < end && *p == closers[depth - 1])
			{
				p++;
				depth--;
				continue;
			}
			return json_error(scan, p, "expected \",\" or \"%c\", found %s",
							  closers[depth - 1], json_describe(scan, p));
		}
	}
}

/*
 * hex4
 *		The value of the four hex digits at p, or -1 if there are not four.
 */
static int
hex4(const char *p, const char *end)
{
	int			v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		char		c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * scan_string
 *		Validate the string whose opening quote is at p; return the position
 *		after its closing quote.  *escaped tells whether it has a backslash
 *		(and so needs json_unescape to get its text).
 *
 * Like the RFC's grammar and PostgreSQL's json type, this accepts any four
 * hex digits after \u: \u0000 and unpaired UTF-16 surrogates are valid JSON
 * and only become an error when the string has to be turned into text
 * (json_unescape), so that they do not kill a message in a key nobody reads.
 */
static const char *
scan_string(JsonScan *scan, const char *p, bool *escaped)
{
	const char *end = scan->end;
	const char *q = p + 1;

	*escaped = false;
	for (;;)
	{
		q = string_stop(q, end);
		if (q >= end)
			return json_error(scan, p, "unterminated string");
		if (*q == '"')
			return q + 1;
		if (*q != '\\')
			return json_error(scan, q, "unescaped control character 0x%02x in a string",
							  (unsigned char) *q);

		*escaped = true;
		if (q + 1 >= end)
			return json_error(scan, p, "unterminated string");
		switch (q[1])
		{
			case '"':
			case '\\':
			case '/':
			case 'b':
			case 'f':
			case 'n':
			case 'r':
			case 't':
				q += 2;
				break;
			case 'u':
				if (hex4(q + 2, end) < 0)
					return json_error(scan, q, "\"\\u\" must be followed by four hexadecimal digits");
				q += 6;
				break;
			default:
				return json_error(scan, q, "invalid escape sequence: backslash followed by %s",
								  json_describe(scan, q + 1));
		}
	}
}

/*
 * scan_number
 *		Validate the number at p against the JSON grammar
 *		-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and return the position
 *		after it.  A letter, digit or dot right after it ("01", "1.2.3",
 *		"1x") makes it invalid rather than the start of the next token.
 */
static const char *
scan_number(JsonScan *scan, const char *p)
{
	const char *end = scan->end;
	const char *q = p;

#define IS_DIGIT(ptr) ((ptr) < end && (json_cc[(unsigned char) *(ptr)] & CC_DIGIT))

	if (*q == '-')
		q++;
	if (q < end && *q == '0')
		q++;
	else if (IS_DIGIT(q))
	{
		while (IS_DIGIT(q))
			q++;
	}
	else
		return json_error(scan, p, "invalid number: expected a digit after \"-\"");

	if (q < end && *q == '.')
	{
		q++;
		if (!IS_DIGIT(q))
			return json_error(scan, p, "invalid number: expected a digit after the decimal point");
		while (IS_DIGIT(q))
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E'))
	{
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (!IS_DIGIT(q))
			return json_error(scan, p, "invalid number: expected a digit in the exponent");
		while (IS_DIGIT(q))
			q++;
	}
	if (q < end && (json_cc[(unsigned char) *q] & CC_WORD))
		return json_error(scan, p, "invalid number: \"%.*s\" followed by %s",
						  clip_len(scan, p, q - p), p,
						  json_describe(scan, q));
#undef IS_DIGIT

	return q;
}

/*
 * scan_literal
 *		Check that the word at p is exactly "true", "false" or "null".
 */
static const char *
scan_literal(JsonScan *scan, const char *p, const char *word, int wordlen)
{
	const char *end = scan->end;

	if (end - p < wordlen || memcmp(p, word, wordlen) != 0 ||
		(end - p > wordlen && (json_cc[(unsigned char) p[wordlen]] & CC_WORD)))
	{
		int			l = 0;

		while (p + l < end && l < 20 && (json_cc[(unsigned char) p[l]] & CC_WORD) &&
			   !(((unsigned char) p[l]) & 0x80))
			l++;
		return json_error(scan, p, "invalid literal \"%.*s\", expected \"%s\"",
						  Max(l, 1), p, word);
	}
	return p + wordlen;
}

/*
 * json_unescape
 *		Append the text of the string content [p, end) (between the quotes,
 *		already validated by scan_string) to out, resolving escapes.
 *
 * Returns NULL on success, or, if the string has no text form, a phrase
 * saying why for the caller's error message: \u0000 (no PostgreSQL text can
 * hold NUL) or an unpaired UTF-16 surrogate.  \u escapes become UTF-8
 * directly in a UTF8 database, and also in a SQL_ASCII one (which takes
 * bytes as they come, and JSON is UTF-8 by definition); in other databases
 * they are converted to the database encoding, which raises an error if the
 * character has no equivalent there.
 */
static const char *
json_unescape(DecodeState *state, const char *p, const char *end,
			  StringInfo out)
{
	while (p < end)
	{
		const char *bs = memchr(p, '\\', end - p);
		unsigned char buf[MAX_UNICODE_EQUIVALENT_STRING + 1];
		pg_wchar	cp;

		if (bs == NULL)
		{
			appendBinaryStringInfo(out, p, end - p);
			break;
		}
		appendBinaryStringInfo(out, p, bs - p);

		switch (bs[1])
		{
			case 'b':
				appendStringInfoChar(out, '\b');
				break;
			case 'f':
				appendStringInfoChar(out, '\f');
				break;
			case 'n':
				appendStringInfoChar(out, '\n');
				break;
			case 'r':
				appendStringInfoChar(out, '\r');
				break;
			case 't':
				appendStringInfoChar(out, '\t');
				break;
			case 'u':
				cp = hex4(bs + 2, end);
				if (is_utf16_surrogate_first(cp))
				{
					int			low = -1;

					if (end - bs >= 12 && bs[6] == '\\' && bs[7] == 'u')
						low = hex4(bs + 8, end);
					if (low < 0 || !is_utf16_surrogate_second(low))
						return psprintf("an unpaired Unicode surrogate \\u%04X", cp);
					cp = surrogate_pair_to_codepoint(cp, low);
					bs += 6;
				}
				else if (is_utf16_surrogate_second(cp))
					return psprintf("an unpaired Unicode surrogate \\u%04X", cp);
				if (cp == 0)
					return "\\u0000";
				if (cp < 0x80)
					appendStringInfoChar(out, (char) cp);
				else if (state->encoding == PG_UTF8 ||
						 state->encoding == PG_SQL_ASCII)
				{
					unicode_to_utf8(cp, buf);
					appendBinaryStringInfo(out, (char *) buf,
										   pg_utf_mblen(buf));
				}
				else
				{
					pg_unicode_to_server(cp, buf);
					appendStringInfoString(out, (char *) buf);
				}
				p = bs + 6;
				continue;
			default:
				/* '"', '\\' and '/' stand for themselves */
				appendStringInfoChar(out, bs[1]);
				break;
		}
		p = bs + 2;
	}
	return NULL;
}
