/*-------------------------------------------------------------------------
 *
 * decode_connect.c
 *	  The logical types a Kafka Connect schema gives the fields of a row:
 *	  of a message's payload, or of a Debezium event's row images.
 *
 * Kafka Connect's JSON converter with schemas (its default) wraps each
 * value as {"schema": {...}, "payload": {...}}.  A row's schema (a source
 * connector's, or Debezium's after its ExtractNewRecordState transform) is
 * a struct of one field per column.  The schema of a Debezium event is a
 * struct whose "fields" describe "before", "after", "source", "op" and so
 * on; "before" and "after" are structs again, one field per column of the
 * captured table:
 *
 *		{"type": "int64", "optional": false,
 *		 "name": "io.debezium.time.MicroTimestamp", "field": "created_at"}
 *		{"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
 *		 "parameters": {"scale": "2"}, "field": "amount"}
 *
 * Only the schema says that the integer 1767225600000000 is a timestamp:
 * this reads, for each column of the source, the field of its name in the
 * struct and in each image's struct, and the logical type it gives the column
 * (logical_kind_for), which decode_json.c then converts.  A field of
 * another name, type or column type, and a schema of another shape, leave
 * the value as it is.
 *
 * Every message carries its schema, the same one message after message:
 * the last one read is kept with what it gave, and a message whose schema
 * has the same bytes costs a comparison.
 *
 * src/decode/decode_connect.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "decode_connect.h"
#include "decode_json.h"

/* The members read from a schema, of a struct and of one of its fields */
enum
{
	SCHEMA_FIELD,
	SCHEMA_TYPE,
	SCHEMA_NAME,
	SCHEMA_FIELDS,
	SCHEMA_PARAMETERS,
	SCHEMA_NMEMBERS
};
static const char *const schema_members[SCHEMA_NMEMBERS] =
{"field", "type", "name", "fields", "parameters"};
static const char *const parameter_members[] = {"scale"};

ConnectSchema *
connect_schema_create(MemoryContext parent)
{
	ConnectSchema *cache = MemoryContextAllocZero(parent, sizeof(ConnectSchema));

	cache->cxt = AllocSetContextCreate(parent, "streamwin Kafka Connect schema",
									   ALLOCSET_SMALL_SIZES);
	return cache;
}

/* The text of a string member, or NULL if it is not one (or holds \u0000) */
static char *
member_string(DecodeState *state, const DecodeSpan *span)
{
	if (span->kind != DJ_STRING && span->kind != DJ_STRING_ESCAPED)
		return NULL;
	return decode_json_string(state, span);
}

/* A decimal's scale: its "parameters"' "scale", a string or a number; false without one */
static bool
decimal_scale(DecodeState *state, const DecodeSpan *parameters, int32 *scale)
{
	DecodeSpan	m[1];
	char	   *text;
	char	   *end;
	long		v;

	if (parameters->kind != DJ_OBJECT ||
		decode_json_members(state, parameters->start, parameters->len, 1, parameter_members, m) != NULL)
		return false;
	if (m[0].kind == DJ_NUMBER)
		text = pnstrdup(m[0].start, m[0].len);
	else if ((text = member_string(state, &m[0])) == NULL)
		return false;
	errno = 0;
	v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < PG_INT32_MIN || v > PG_INT32_MAX)
		return false;
	*scale = (int32) v;
	return true;
}

/*
 * The logical type of each column of the state in an image's struct
 * schema, whose "fields" are at fields: an array of the columns, or NULL
 * if none has one.
 */
static LogicalField *
image_fields(DecodeState *state, const DecodeSpan *fields)
{
	LogicalField *columns = NULL;
	DecodeSpan *elements;
	int			n = decode_json_elements(state, fields, &elements);

	for (int e = 0; e < n; e++)
	{
		DecodeSpan	m[SCHEMA_NMEMBERS];
		char	   *field;
		char	   *name;
		LogicalField f = {0};
		int			col = -1;

		if (elements[e].kind != DJ_OBJECT ||
			decode_json_members(state, elements[e].start, elements[e].len, SCHEMA_NMEMBERS,
								schema_members, m) != NULL ||
			(field = member_string(state, &m[SCHEMA_FIELD])) == NULL)
			continue;
		for (int i = 0; i < state->ncolumns && col < 0; i++)
			if (strcmp(state->columns[i].name, field) == 0)
				col = i;
		if (col < 0)
			continue;
		name = member_string(state, &m[SCHEMA_NAME]);
		f.kind = logical_kind_for(name, member_string(state, &m[SCHEMA_TYPE]),
								  state->columns[col].basetype, &f.digits, &f.at_midnight);
		/* a Decimal without its scale is not one this can read */
		if (f.kind == LOGICAL_DECIMAL && !decimal_scale(state, &m[SCHEMA_PARAMETERS], &f.scale))
			f.kind = LOGICAL_NONE;
		if (f.kind == LOGICAL_NONE)
			continue;
		f.name = name != NULL ? name : "bytes";
		if (columns == NULL)
			columns = palloc0(sizeof(LogicalField) * state->ncolumns);
		columns[col] = f;
	}
	return columns;
}

/*
 * connect_schema_read
 *		What the wrapper's schema (an object) gives the columns: cache->row
 *		where the payload is the row (a struct of the columns' fields), and
 *		cache->before and cache->after in each row image of a Debezium
 *		event, per column of the state (NULL: the values as they are).  The
 *		cache keeps them until a message brings another schema.
 */
void
connect_schema_read(DecodeState *state, ConnectSchema *cache, const DecodeSpan *schema)
{
	MemoryContext old;
	DecodeSpan	m[SCHEMA_NMEMBERS];
	DecodeSpan *elements;
	int			n;

	Assert(schema->kind == DJ_OBJECT);
	if (cache->text != NULL && cache->len == schema->len &&
		memcmp(cache->text, schema->start, schema->len) == 0)
		return;
	MemoryContextReset(cache->cxt);
	cache->text = NULL;
	cache->row = NULL;
	cache->before = NULL;
	cache->after = NULL;
	old = MemoryContextSwitchTo(cache->cxt);
	if (decode_json_members(state, schema->start, schema->len, SCHEMA_NMEMBERS, schema_members, m) == NULL &&
		m[SCHEMA_FIELDS].kind == DJ_ARRAY)
	{
		cache->row = image_fields(state, &m[SCHEMA_FIELDS]);
		n = decode_json_elements(state, &m[SCHEMA_FIELDS], &elements);
		for (int e = 0; e < n; e++)
		{
			DecodeSpan	f[SCHEMA_NMEMBERS];
			char	   *field;

			if (elements[e].kind != DJ_OBJECT ||
				decode_json_members(state, elements[e].start, elements[e].len, SCHEMA_NMEMBERS,
									schema_members, f) != NULL ||
				f[SCHEMA_FIELDS].kind != DJ_ARRAY ||
				(field = member_string(state, &f[SCHEMA_FIELD])) == NULL)
				continue;
			if (strcmp(field, "before") == 0)
				cache->before = image_fields(state, &f[SCHEMA_FIELDS]);
			else if (strcmp(field, "after") == 0)
				cache->after = image_fields(state, &f[SCHEMA_FIELDS]);
		}
	}
	cache->text = pnstrdup(schema->start, schema->len);
	cache->len = schema->len;
	MemoryContextSwitchTo(old);
}
