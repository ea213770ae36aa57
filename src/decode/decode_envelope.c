/*-------------------------------------------------------------------------
 *
 * decode_envelope.c
 *	  The parts of a Debezium change event: its op and where its row images
 *	  are.
 *
 * A Debezium event is a JSON object such as
 *		{"before": {...}, "after": {...}, "op": "u", "source": {...}, "ts_ms": 1}
 * or the same object as the "payload" of Kafka Connect's JSON converter
 * with schemas, {"schema": {...}, "payload": {...}}.  This finds the op,
 * the spans of the "before" and "after" objects and of the wrapper's
 * schema with the JSON format's own scanner (decode_json.c), so there is
 * no second JSON parser, and converts nothing: decode.c decodes each image
 * as a message of the source's columns, with the logical types the schema
 * gives them (decode_connect.c).
 *
 * src/decode/decode_envelope.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "decode_envelope.h"
#include "decode_json.h"

/* The members of an event that matter; "payload" and "schema" only at the top. */
enum
{
	MEMBER_OP,
	MEMBER_BEFORE,
	MEMBER_AFTER,
	MEMBER_PAYLOAD,
	MEMBER_SCHEMA,
	NMEMBERS
};
static const char *const event_members[NMEMBERS] = {"op", "before", "after", "payload", "schema"};

/* Why an image the op needs is not there, or NULL if it is an object. */
static const char *
image_error(const char *name, char op, const DecodeSpan *image)
{
	if (image->kind == DJ_OBJECT)
		return NULL;
	if (image->kind == DJ_MISSING || image->kind == DJ_NULL)
		return psprintf("Debezium event with op \"%c\" has no \"%s\" row", op, name);
	return psprintf("\"%s\" of a Debezium event must be an object, found %s", name,
					decode_json_kind_name(image->kind));
}

/*
 * decode_debezium_event
 *		Find the op of the Debezium event in payload (one of 'c', 'r', 'u',
 *		'd', 't') and the spans of its "before" and "after" images, each an
 *		object if the op needs it: 'd' the one before, 'c', 'r' and 'u' the
 *		one after, 't' (a truncate) none; 'u' may have a "before" object, or none (missing or null: what
 *		Debezium sends without REPLICA IDENTITY FULL), which its caller
 *		judges.  A wrapper whose "payload" is null is a tombstone: *op is 0.
 *		*schema: the wrapper's "schema" (kind DJ_MISSING without one), which
 *		describes the images' fields (decode_connect.c).
 *		Returns NULL, or why the event is malformed (not JSON, no op, an op of
 *		another kind, an image the op needs missing or not an object).  The
 *		payload has passed the encoding check; state is a JSON decoder's.
 */
const char *
decode_debezium_event(DecodeState *state, const char *payload, int len, char *op,
					  DecodeSpan *before, DecodeSpan *after, DecodeSpan *schema)
{
	DecodeSpan	m[NMEMBERS];
	const char *error;
	const DecodeSpan *op_span = &m[MEMBER_OP];
	char	   *text;

	*op = 0;
	schema->kind = DJ_MISSING;
	error = decode_json_members(state, payload, len, NMEMBERS, event_members, m);
	if (error != NULL)
		return error;
	if (op_span->kind == DJ_MISSING && m[MEMBER_PAYLOAD].kind != DJ_MISSING)
	{
		DecodeSpan	wrapped = m[MEMBER_PAYLOAD];

		/* Kafka Connect's wrapper: the event is its payload */
		if (wrapped.kind == DJ_NULL)
			return NULL;
		if (wrapped.kind != DJ_OBJECT)
			return psprintf("\"payload\" of a Debezium event must be an object, found %s",
							decode_json_kind_name(wrapped.kind));
		/* scanned once already: this finds its members, it cannot fail */
		error = decode_json_members(state, wrapped.start, wrapped.len, MEMBER_PAYLOAD,
									event_members, m);
		if (error != NULL)
			return error;
		*schema = m[MEMBER_SCHEMA];
	}
	if (op_span->kind == DJ_MISSING || op_span->kind == DJ_NULL)
		return pstrdup("Debezium event without \"op\"");
	if (op_span->kind != DJ_STRING && op_span->kind != DJ_STRING_ESCAPED)
		return psprintf("\"op\" of a Debezium event must be a string, found %s",
						decode_json_kind_name(op_span->kind));
	text = decode_json_string(state, op_span);
	if (text == NULL || strlen(text) != 1 || strchr("crudt", text[0]) == NULL)
		return psprintf("unknown Debezium op \"%.*s\": only \"c\", \"r\", \"u\", \"d\" and \"t\" change rows",
						text ? pg_mbcliplen(text, strlen(text), 16) : 0, text ? text : "");
	*before = m[MEMBER_BEFORE];
	*after = m[MEMBER_AFTER];
	if (text[0] == 'd' ||
		(text[0] == 'u' && before->kind != DJ_MISSING && before->kind != DJ_NULL))
		error = image_error("before", text[0], before);
	if (error == NULL && text[0] != 'd' && text[0] != 't')
		error = image_error("after", text[0], after);
	if (error == NULL)
		*op = text[0];
	return error;
}
