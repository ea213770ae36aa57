/*-------------------------------------------------------------------------
 *
 * decode_avro.c
 *	  The Avro format: binary bodies decoded by a plan resolved once per
 *	  writer schema against the source's columns.
 *
 * A source's columns play the reader schema of Avro's schema resolution:
 * a writer field fills the column of its name, a column no field names is
 * NULL (and counted, as a JSON message's missing key is), a field no
 * column names is skipped.  Which writer types a column can hold is
 * decided once, when the schema is first met (decode_avro_add_schema):
 * Avro's promotions (int to long, float or double; long to float or
 * double; float to double; string and bytes either way), the logical
 * types to PostgreSQL's date, time, timestamp, timestamptz, numeric and
 * uuid, enums to text, fixed to bytea, a union's null branch to NULL, and
 * any type to a json or jsonb column, as JSON.  A string also fills a
 * column of any other type but the integers, floats and boolean through
 * the type's input function, as in the JSON format.  A field whose type the column cannot hold makes every
 * message of that schema a dead letter, naming the field and both types.
 * A writer schema that is not a record fills a decoder of one column (a
 * message key of type long, for the key column of an upsert source), as
 * any schema does for a decoder told that a message is its one column's
 * value (a key metadata column).  For a Debezium source the writer schema
 * is the change event's envelope: its "op", and its "before" and "after"
 * records, each resolved against the columns.
 *
 * Decoding then walks the plan's fields over the body, making each value's
 * Datum directly (no intermediate tree, no text for numbers and times).
 * Each field's way of being read is chosen with the plan (AvroFieldOp):
 * the shapes most topics have (a skipped primitive, an int, long, double,
 * string or timestamp into its plain column, either alone or in a union
 * with null) by a case of their own, the rest by the general reader.  A
 * decoded message sets every column, those its schema lacks to NULL: the
 * caller (decode.c) does not clear a row first.
 * avro-c's generic values, the alternative, cost as much per event as all
 * of this decoding before a single Datum is made
 * (test/bench/avro-results.md).  Every read is bounds-checked: a
 * truncated or malformed body is reported, never read past.
 *
 * Schemas are kept per schema id (Confluent's wire format: a magic byte 0,
 * a 4-byte big-endian schema id, then the body) or, for a source with
 * option "avro_schema", as the one plan of plain bodies.  The caller
 * (batch_input.c) adds the schemas of a batch's ids before decoding it;
 * this file never fetches anything.
 *
 * src/decode/decode_avro.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "common/shortest_dec.h"
#include "mb/pg_wchar.h"
#include "port/pg_bitutils.h"
#include "utils/ascii.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "decode_avro.h"
#include "decode_logical.h"

/* Values nest deeper than this in a message: malformed (and the stack safe) */
#define AVRO_MAX_DEPTH	200

/* a json column's text buffer is kept for the next message up to this size */
#define AVRO_JSON_KEEP	(64 * 1024)

/* What kind of PostgreSQL value a column is, for the writer types it holds */
typedef enum AvroTarget
{
	TARGET_BOOL,
	TARGET_INT2,
	TARGET_INT4,
	TARGET_INT8,
	TARGET_FLOAT4,
	TARGET_FLOAT8,
	TARGET_NUMERIC,
	TARGET_BYTEA,
	TARGET_UUID,
	TARGET_DATE,
	TARGET_TIME,
	TARGET_TIMESTAMPTZ,
	TARGET_TIMESTAMP,
	TARGET_JSON,
	TARGET_TEXT					/* text, or any type read from its text */
} AvroTarget;

/* A column of the source as Avro fills it (parallel to DecodeState.columns) */
typedef struct AvroColumn
{
	AvroTarget	target;
	Oid			typid;			/* the column's type: a domain is checked */
	bool		domain;
	void	   *domain_extra;	/* domain_check's cache */
} AvroColumn;

/*
 * How read_record reads a field.  The shapes most topics' fields have are
 * read by a case of their own, straight into the Datum; every other field
 * goes through read_value or skip_value, which handle every type.  A case
 * of its own does what read_value would do for its shape, checks and
 * errors included, without deciding again per message what the writer
 * type and the column are.
 */
typedef enum AvroFieldOp
{
	AOP_VALUE,					/* read_value */
	AOP_SKIP,					/* skip_value: no column */
	AOP_SKIP_VARINT,			/* int, long or enum of no column */
	AOP_SKIP_SPAN,				/* string or bytes of no column */
	AOP_SKIP_FIXED,				/* float, double or fixed of no column */
	AOP_INT_INT4,				/* int into integer */
	AOP_INT_INT8,				/* int into bigint */
	AOP_LONG_INT8,				/* long into bigint */
	AOP_DOUBLE_FLOAT8,			/* double into double precision */
	AOP_STRING_TEXT,			/* string into text */
	AOP_TIMESTAMP				/* a timestamp's long into timestamptz or
								 * timestamp (no typmod) */
} AvroFieldOp;

/* One field of a writer schema's top-level record */
typedef struct AvroField
{
	const AvroType *type;
	int			column;			/* index into DecodeState.columns, -1: skip */
	const char **branch_error;	/* a union: per branch, why the column
								 * cannot hold it, or NULL */
	AvroFieldOp op;
	int			att;			/* the column's index into values/nulls */
	int			size;			/* AOP_SKIP_FIXED: its bytes */
	int			null_branch;	/* a union of null and one type, read by op:
								 * the null's branch (0 or 1); else -1 */
	bool		millis;			/* AOP_TIMESTAMP: milliseconds */
	bool		tz;				/* AOP_TIMESTAMP: into timestamptz */
} AvroField;

/* What a writer schema's messages decode by */
typedef struct AvroPlan
{
	int32		id;
	const char *error;			/* every message of the schema is a dead
								 * letter for this */
	bool		missing;		/* the registry has no such schema: for this
								 * batch only */
	int			nfields;
	AvroField  *fields;
	int			nabsent;		/* columns no field fills */
	int		   *absent;
	/* a Debezium change event: where its parts are, and each image's plan */
	int			op_field;		/* -1: none */
	int			image_field[2]; /* "before", "after"; -1: none */
	struct AvroPlan *image[2];
} AvroPlan;

typedef struct AvroPlanEntry
{
	int32		id;
	AvroPlan   *plan;
} AvroPlanEntry;

typedef struct AvroDecoder
{
	MemoryContext mcxt;			/* the decoder's */
	bool		confluent;		/* bodies behind Confluent's header */
	AvroPlan   *plain;			/* option "avro_schema": the one plan */
	HTAB	   *plans;			/* schema id -> AvroPlanEntry */
	AvroPlan   *last;			/* the plan of the last message */
	bool		debezium;		/* messages are Debezium change events */
	bool		whole;			/* a message is its one column's value */
	AvroColumn *columns;
	StringInfoData json;		/* a json column's text */
} AvroDecoder;

/* A read in progress over one body */
typedef struct AvroRead
{
	const uint8 *p;
	const uint8 *start;			/* the payload, for "at byte N" */
	const uint8 *end;
	const char *error;			/* set when a read fails */
	int			depth;
	int64		values_left;	/* values skipped or rendered as JSON the
								 * message may still hold */
	int64		empty_items;	/* items of no bytes (nulls in arrays) the
								 * message may still hold */
	int64		max_empty_items;	/* what it could hold at its start */
	int64		max_json;		/* bytes of JSON a column's value may take */
	DecodeState *state;
} AvroRead;

/*
 * The items of no bytes a message may hold: every other item takes a byte
 * at least, so its count is bounded by the message's length, but a few
 * bytes can declare 2^63 nulls in an array, block after block.  So many
 * per byte of the message, and a few more, up to a limit: a batch of tiny
 * messages declaring a million nulls each would walk (and render as JSON)
 * millions of values per message.
 */
#define AVRO_EMPTY_ITEMS_PER_BYTE 32
#define AVRO_EMPTY_ITEMS_MIN 1024
#define AVRO_MAX_EMPTY_ITEMS 1000000

/*
 * A json or jsonb column's value made from one message: at most so many
 * bytes per byte of the message (field names and nulls render as more
 * bytes than they take), and a few more, up to a limit.
 */
#define AVRO_JSON_BYTES_PER_BYTE 128
#define AVRO_JSON_BYTES_MIN (16 * 1024)
#define AVRO_MAX_JSON_BYTES (256 * 1024 * 1024)

static bool render_json(AvroRead *r, const AvroType *w, StringInfo buf);
static bool skip_value(AvroRead *r, const AvroType *w);
static void choose_op(DecodeState *state, AvroField *field);

/* --- setting up ------------------------------------------------------------- */

/* Is a timestamp's long of writer type w in milliseconds (else microseconds)? */
static inline bool
timestamp_in_millis(const AvroType *w)
{
	return w->logical == AVRO_LOGICAL_TIMESTAMP_MILLIS ||
		w->logical == AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS;
}

static AvroTarget
target_for(Oid basetype, bool is_json)
{
	if (is_json)
		return TARGET_JSON;
	switch (basetype)
	{
		case BOOLOID:
			return TARGET_BOOL;
		case INT2OID:
			return TARGET_INT2;
		case INT4OID:
			return TARGET_INT4;
		case INT8OID:
			return TARGET_INT8;
		case FLOAT4OID:
			return TARGET_FLOAT4;
		case FLOAT8OID:
			return TARGET_FLOAT8;
		case NUMERICOID:
			return TARGET_NUMERIC;
		case BYTEAOID:
			return TARGET_BYTEA;
		case UUIDOID:
			return TARGET_UUID;
		case DATEOID:
			return TARGET_DATE;
		case TIMEOID:
			return TARGET_TIME;
		case TIMESTAMPTZOID:
			return TARGET_TIMESTAMPTZ;
		case TIMESTAMPOID:
			return TARGET_TIMESTAMP;
		default:
			return TARGET_TEXT;
	}
}

/*
 * decode_avro_init
 *		Prepare a decoder for the Avro format: each column's target, and the
 *		table of plans by schema id.  Called by decoder_create, in mcxt, the
 *		decoder's context, after the columns are set up.
 */
void
decode_avro_init(DecodeState *state, MemoryContext mcxt)
{
	AvroDecoder *ad = palloc0(sizeof(AvroDecoder));
	HASHCTL		ctl;

	ad->mcxt = mcxt;
	ad->confluent = true;
	ad->columns = palloc0(sizeof(AvroColumn) * Max(state->ncolumns, 1));
	for (int i = 0; i < state->ncolumns; i++)
	{
		DecodeColumn *c = &state->columns[i];
		Oid			typid = c->typid;
		Oid			base = getBaseType(typid);

		ad->columns[i].typid = typid;
		ad->columns[i].domain = base != typid;
		ad->columns[i].target = target_for(base, c->is_json);
	}
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(AvroPlanEntry);
	ctl.hcxt = mcxt;
	ad->plans = hash_create("streamwin Avro schemas", 16, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	initStringInfo(&ad->json);
	state->avro = ad;
}

/* Can a column of target t hold values of writer type w (not a union)? */
static bool
can_hold(const AvroType *w, AvroTarget t)
{
	if (t == TARGET_JSON || w->kind == AVT_NULL)
		return true;
	switch (w->kind)
	{
		case AVT_BOOLEAN:
			return t == TARGET_BOOL;
		case AVT_INT:
		case AVT_LONG:
			if ((w->logical == AVRO_LOGICAL_DATE && t == TARGET_DATE) ||
				((w->logical == AVRO_LOGICAL_TIME_MILLIS ||
				  w->logical == AVRO_LOGICAL_TIME_MICROS) && t == TARGET_TIME) ||
				((w->logical == AVRO_LOGICAL_TIMESTAMP_MILLIS ||
				  w->logical == AVRO_LOGICAL_TIMESTAMP_MICROS) && t == TARGET_TIMESTAMPTZ) ||
				((w->logical == AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS ||
				  w->logical == AVRO_LOGICAL_LOCAL_TIMESTAMP_MICROS) && t == TARGET_TIMESTAMP))
				return true;
			/* a logical type annotates its underlying type, which stays readable */
			return t == TARGET_INT2 || t == TARGET_INT4 || t == TARGET_INT8 ||
				t == TARGET_FLOAT4 || t == TARGET_FLOAT8 || t == TARGET_NUMERIC;
		case AVT_FLOAT:
			return t == TARGET_FLOAT4 || t == TARGET_FLOAT8 || t == TARGET_NUMERIC;
		case AVT_DOUBLE:
			return t == TARGET_FLOAT8 || t == TARGET_NUMERIC;
		case AVT_BYTES:
			if (w->logical == AVRO_LOGICAL_DECIMAL)
				return t == TARGET_NUMERIC || t == TARGET_BYTEA;
			return t == TARGET_BYTEA || t == TARGET_TEXT;
		case AVT_STRING:
			/*
			 * and the types Debezium writes as strings (a timestamptz as a
			 * ZonedTimestamp, a numeric with decimal.handling.mode
			 * "string"), through their input functions as in JSON
			 */
			return t == TARGET_TEXT || t == TARGET_BYTEA || t == TARGET_UUID ||
				t == TARGET_TIMESTAMPTZ || t == TARGET_TIMESTAMP || t == TARGET_DATE ||
				t == TARGET_TIME || t == TARGET_NUMERIC;
		case AVT_ENUM:
			return t == TARGET_TEXT;
		case AVT_FIXED:
			if (w->logical == AVRO_LOGICAL_DECIMAL && t == TARGET_NUMERIC)
				return true;
			return t == TARGET_BYTEA || (t == TARGET_UUID && w->size == 16);
		case AVT_RECORD:
			/* Debezium's VariableScaleDecimal is a number */
			return w->logical == AVRO_LOGICAL_VARIABLE_DECIMAL &&
				(t == TARGET_NUMERIC || t == TARGET_FLOAT4 || t == TARGET_FLOAT8);
		default:
			return false;		/* records, arrays, maps: json only */
	}
}

static char *
cannot_hold(const char *field, const AvroType *w, const DecodeColumn *c, int32 id)
{
	return psprintf("field \"%s\" of type %s cannot be read into column \"%s\" of type %s%s",
					field, avro_type_name(w), c->name, c->typname,
					id >= 0 ? psprintf(" (writer schema %d)", id) : "");
}

/*
 * The op that reads a field of type w (a union's non-null branch, or the
 * field's type) into column col (-1: none): AOP_VALUE or AOP_SKIP where
 * no case of its own fits.
 */
static AvroFieldOp
op_for(DecodeState *state, AvroField *field, const AvroType *w, int col)
{
	const DecodeColumn *c;
	const AvroColumn *ac;

	if (col < 0)
	{
		switch (w->kind)
		{
			case AVT_INT:
			case AVT_LONG:
			case AVT_ENUM:
				return AOP_SKIP_VARINT;
			case AVT_BYTES:
			case AVT_STRING:
				return AOP_SKIP_SPAN;
			case AVT_FLOAT:
			case AVT_DOUBLE:
			case AVT_FIXED:
				field->size = w->kind == AVT_FLOAT ? 4 : w->kind == AVT_DOUBLE ? 8 : w->size;
				return AOP_SKIP_FIXED;
			default:
				return AOP_SKIP;
		}
	}
	c = &state->columns[col];
	ac = &state->avro->columns[col];
	if (ac->domain)
		return AOP_VALUE;
	switch (w->kind)
	{
		case AVT_INT:
			if (ac->target == TARGET_INT4)
				return AOP_INT_INT4;
			if (ac->target == TARGET_INT8)
				return AOP_INT_INT8;
			break;
		case AVT_LONG:
			if (ac->target == TARGET_INT8)
				return AOP_LONG_INT8;
			if ((ac->target == TARGET_TIMESTAMPTZ || ac->target == TARGET_TIMESTAMP) &&
				c->typmod < 0)
			{
				field->millis = timestamp_in_millis(w);
				field->tz = ac->target == TARGET_TIMESTAMPTZ;
				return AOP_TIMESTAMP;
			}
			break;
		case AVT_DOUBLE:
			if (ac->target == TARGET_FLOAT8)
				return AOP_DOUBLE_FLOAT8;
			break;
		case AVT_STRING:
			if (ac->target == TARGET_TEXT && c->fast == DECODE_FAST_TEXT)
				return AOP_STRING_TEXT;
			break;
		default:
			break;
	}
	return AOP_VALUE;
}

/*
 * The op of a resolved field: a union of null and one other type is read
 * by the other type's op, after its branch, when that has a case of its
 * own (and the column can hold it: a branch the column cannot hold is an
 * error read_value reports).
 */
static void
choose_op(DecodeState *state, AvroField *field)
{
	const AvroType *w = field->type;

	field->null_branch = -1;
	field->att = field->column >= 0 ? state->columns[field->column].attindex : -1;
	if (w->kind == AVT_UNION && w->nfields == 2 &&
		(w->types[0]->kind == AVT_NULL) != (w->types[1]->kind == AVT_NULL))
	{
		int			nb = w->types[0]->kind == AVT_NULL ? 0 : 1;
		AvroFieldOp op;

		if (field->branch_error != NULL && field->branch_error[1 - nb] != NULL)
		{
			field->op = AOP_VALUE;
			return;
		}
		op = op_for(state, field, w->types[1 - nb], field->column);
		if (op != AOP_VALUE && op != AOP_SKIP)
		{
			field->null_branch = nb;
			field->op = op;
			return;
		}
		field->op = field->column < 0 ? AOP_SKIP : AOP_VALUE;
		return;
	}
	field->op = op_for(state, field, w, field->column);
}

/* The plan of a parsed writer schema w against the columns; plan->error if none */
static void
resolve_record(DecodeState *state, AvroPlan *plan, const AvroType *w)
{
	AvroDecoder *ad = state->avro;
	bool	   *filled = palloc0(sizeof(bool) * Max(state->ncolumns, 1));

	if ((w->kind != AVT_RECORD || state->avro->whole) && state->ncolumns == 1)
	{
		/*
		 * A value of another type (a message key's "long", say) is the one
		 * column's: read as a record of one field of the column's name.
		 */
		AvroType   *single = palloc0(sizeof(AvroType));

		single->kind = AVT_RECORD;
		single->name = "";
		single->nfields = 1;
		single->names = palloc(sizeof(char *));
		single->names[0] = state->columns[0].name;
		single->types = palloc(sizeof(AvroType *));
		single->types[0] = (AvroType *) w;
		w = single;
	}
	if (w->kind != AVT_RECORD)
	{
		plan->error = psprintf("the writer schema%s is %s, not a record",
							   plan->id >= 0 ? psprintf(" %d", plan->id) : "", avro_type_name(w));
		return;
	}
	plan->nfields = w->nfields;
	plan->fields = palloc0(sizeof(AvroField) * Max(w->nfields, 1));
	for (int f = 0; f < w->nfields; f++)
	{
		AvroField  *field = &plan->fields[f];
		const AvroType *ft = w->types[f];
		int			col = -1;

		field->type = ft;
		for (int i = 0; i < state->ncolumns; i++)
			if (strcmp(state->columns[i].name, w->names[f]) == 0 && !filled[i])
				col = i;
		field->column = col;
		if (col < 0)
			continue;
		filled[col] = true;
		if (ft->kind != AVT_UNION)
		{
			if (!can_hold(ft, ad->columns[col].target))
			{
				plan->error = cannot_hold(w->names[f], ft, &state->columns[col], plan->id);
				return;
			}
			continue;
		}
		/* a union: each branch on its own; it fails only when none fits */
		{
			bool		any = false;

			field->branch_error = palloc0(sizeof(char *) * Max(ft->nfields, 1));
			for (int b = 0; b < ft->nfields; b++)
			{
				if (ft->types[b]->kind == AVT_NULL)
					continue;
				if (can_hold(ft->types[b], ad->columns[col].target))
					any = true;
				else
					field->branch_error[b] = cannot_hold(w->names[f], ft->types[b],
														 &state->columns[col], plan->id);
			}
			if (!any && ft->nfields > 0)
				for (int b = 0; b < ft->nfields; b++)
					if (ft->types[b]->kind != AVT_NULL)
					{
						plan->error = cannot_hold(w->names[f], ft, &state->columns[col], plan->id);
						return;
					}
		}
	}
	for (int f = 0; f < w->nfields; f++)
		choose_op(state, &plan->fields[f]);
	plan->absent = palloc(sizeof(int) * Max(state->ncolumns, 1));
	for (int i = 0; i < state->ncolumns; i++)
		if (!filled[i])
			plan->absent[plan->nabsent++] = i;
}

/*
 * The record of a Debezium image field's type (a record, or a union of
 * null and one record), or NULL.  A union of two records is not an image
 * Debezium writes, and one plan cannot read both: refused.
 */
static const AvroType *
image_record(const AvroType *t)
{
	const AvroType *rec = NULL;

	if (t->kind == AVT_RECORD)
		return t;
	if (t->kind != AVT_UNION)
		return NULL;
	for (int b = 0; b < t->nfields; b++)
	{
		if (t->types[b]->kind != AVT_RECORD)
			continue;
		if (rec != NULL)
			return NULL;
		rec = t->types[b];
	}
	return rec;
}

/*
 * The plan of a Debezium change event's writer schema: its "op" string,
 * and the plans of the records of its "before" and "after" images against
 * the columns; the other fields ("source", "ts_ms", ...) are skipped.
 */
static void
resolve_debezium(DecodeState *state, AvroPlan *plan, const AvroType *w)
{
	static const char *const images[2] = {"before", "after"};
	const char *schema = plan->id >= 0 ? psprintf("writer schema %d", plan->id) : "the writer schema";

	plan->op_field = plan->image_field[0] = plan->image_field[1] = -1;
	if (w->kind != AVT_RECORD)
	{
		plan->error = psprintf("%s is %s, not a Debezium change event", schema, avro_type_name(w));
		return;
	}
	plan->nfields = w->nfields;
	plan->fields = palloc0(sizeof(AvroField) * Max(w->nfields, 1));
	for (int f = 0; f < w->nfields; f++)
	{
		plan->fields[f].type = w->types[f];
		plan->fields[f].column = -1;
		/* read by decode_avro_debezium, not read_record: skips, all the same */
		choose_op(state, &plan->fields[f]);
		if (strcmp(w->names[f], "op") == 0 && w->types[f]->kind == AVT_STRING)
			plan->op_field = f;
		for (int i = 0; i < 2; i++)
		{
			const AvroType *rec;

			if (strcmp(w->names[f], images[i]) != 0)
				continue;
			rec = image_record(w->types[f]);
			if (rec == NULL)
			{
				plan->error = psprintf("\"%s\" of %s is %s, not a Debezium image: a record, or a union of null and one record",
									   images[i], schema, avro_type_name(w->types[f]));
				return;
			}
			plan->image_field[i] = f;
			plan->image[i] = palloc0(sizeof(AvroPlan));
			plan->image[i]->id = plan->id;
			resolve_record(state, plan->image[i], rec);
			if (plan->image[i]->error != NULL)
			{
				plan->error = plan->image[i]->error;
				return;
			}
		}
	}
	if (plan->op_field < 0 || plan->image_field[0] < 0 || plan->image_field[1] < 0)
		plan->error = psprintf("%s is not a Debezium change event: it needs the fields \"op\" (a string), \"before\" and \"after\"",
							   schema);
}

static void
resolve(DecodeState *state, AvroPlan *plan, const AvroType *w)
{
	if (state->avro->debezium)
		resolve_debezium(state, plan, w);
	else
		resolve_record(state, plan, w);
}

/*
 * decode_avro_add_schema
 *		Add writer schema json (len bytes) under schema id id (-1: the plain
 *		bodies of option "avro_schema", which makes the decoder read those),
 *		parsed and resolved against the columns.  Returns NULL, or why its
 *		messages cannot be decoded (invalid schema, a field a column cannot
 *		hold): each of them is then a dead letter for that reason.
 */
const char *
decode_avro_add_schema(DecodeState *state, int32 id, const char *json, int len)
{
	AvroDecoder *ad = state->avro;
	MemoryContext cxt = AllocSetContextCreate(ad->mcxt, "streamwin Avro schema",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	AvroPlan   *plan = palloc0(sizeof(AvroPlan));
	char	   *error;
	AvroType   *w = avro_schema_parse(json, len, &error);

	plan->id = id;
	if (w == NULL)
		plan->error = id >= 0 ?
			psprintf("writer schema %d is not a valid Avro schema: %s", id, error) :
			psprintf("not a valid Avro schema: %s", error);
	else
		resolve(state, plan, w);
	MemoryContextSwitchTo(old);

	if (id < 0)
	{
		ad->confluent = false;
		ad->plain = plan;
	}
	else
	{
		AvroPlanEntry *e = hash_search(ad->plans, &id, HASH_ENTER, NULL);

		e->plan = plan;
		ad->last = NULL;
	}
	return plan->error;
}

/*
 * decode_avro_add_missing
 *		Schema id id is one the registry does not have: its messages are dead
 *		letters for reason, until decode_avro_forget_missing.
 */
void
decode_avro_add_missing(DecodeState *state, int32 id, const char *reason)
{
	AvroDecoder *ad = state->avro;
	AvroPlan   *plan = MemoryContextAllocZero(ad->mcxt, sizeof(AvroPlan));
	AvroPlanEntry *e = hash_search(ad->plans, &id, HASH_ENTER, NULL);

	plan->id = id;
	plan->missing = true;
	plan->error = MemoryContextStrdup(ad->mcxt, reason);
	e->plan = plan;
	ad->last = NULL;
}

bool
decode_avro_has_schema(DecodeState *state, int32 id)
{
	return hash_search(state->avro->plans, &id, HASH_FIND, NULL) != NULL;
}

/* Forget the ids the registry did not have, so that the next batch asks again. */
void
decode_avro_forget_missing(DecodeState *state)
{
	AvroDecoder *ad = state->avro;
	HASH_SEQ_STATUS seq;
	AvroPlanEntry *e;

	hash_seq_init(&seq, ad->plans);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->plan->missing)
		{
			pfree((char *) e->plan->error);
			pfree(e->plan);
			hash_search(ad->plans, &e->id, HASH_REMOVE, NULL);
		}
	ad->last = NULL;
}

/* --- reading ---------------------------------------------------------------- */

static inline int
at_byte(AvroRead *r)
{
	return (int) (r->p - r->start);
}

static bool
fail(AvroRead *r, const char *error)
{
	if (r->error == NULL)
		r->error = error;
	return false;
}

static bool
truncated(AvroRead *r)
{
	return fail(r, psprintf("Avro body ends early: truncated at byte %d", at_byte(r)));
}

/*
 * A varint of up to 8 bytes, with 8 bytes left at r->p: found in one load,
 * where the first byte without its high bit ends it, and its 7-bit groups
 * packed together in three steps, pairs, fours, eight.  False, with
 * nothing read, for a longer one.
 */
static inline bool
read_varint_word(AvroRead *r, uint64 *u)
{
#ifndef WORDS_BIGENDIAN
	uint64		w;
	uint64		stops;
	int			nbits;

	Assert(r->end - r->p >= 8);
	memcpy(&w, r->p, 8);
	stops = ~w & UINT64CONST(0x8080808080808080);
	if (unlikely(stops == 0))
		return false;
	nbits = pg_rightmost_one_pos64(stops) + 1;
	if (nbits < 64)
		w &= (UINT64CONST(1) << nbits) - 1;
	w &= UINT64CONST(0x7f7f7f7f7f7f7f7f);
	w = ((w & UINT64CONST(0x7f007f007f007f00)) >> 1) | (w & UINT64CONST(0x007f007f007f007f));
	w = ((w & UINT64CONST(0x3fff00003fff0000)) >> 2) | (w & UINT64CONST(0x00003fff00003fff));
	w = ((w & UINT64CONST(0x0fffffff00000000)) >> 4) | (w & UINT64CONST(0x000000000fffffff));
	r->p += nbits / 8;
	*u = w;
	return true;
#else
	return false;
#endif
}

/*
 * A zigzag varint (Avro's int and long) that the inline readers leave:
 * 9 or 10 bytes long, or near the body's end; and says what is wrong with
 * a bad one.
 */
static pg_noinline bool
read_long_bytes(AvroRead *r, int64 *v)
{
	uint64		u = 0;

	if (r->end - r->p >= 8 && read_varint_word(r, &u))
	{
		*v = (int64) (u >> 1) ^ -(int64) (u & 1);
		return true;
	}
	for (int shift = 0; r->p < r->end; shift += 7)
	{
		uint8		b = *r->p++;

		if (shift == 63 && (b & 0x7e) != 0)
			return fail(r, psprintf("Avro varint too long at byte %d", at_byte(r) - 1));
		u |= (uint64) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
		{
			*v = (int64) (u >> 1) ^ -(int64) (u & 1);
			return true;
		}
		if (shift == 63)
			return fail(r, psprintf("Avro varint too long at byte %d", at_byte(r) - 1));
	}
	return truncated(r);
}

/*
 * A zigzag varint.  One byte (a string's length, a union's branch, a small
 * number) is read in line; longer ones by read_long_bytes.
 */
static inline bool
read_long(AvroRead *r, int64 *v)
{
	if (likely(r->p < r->end && *r->p < 0x80))
	{
		uint64		u = *r->p++;

		*v = (int64) (u >> 1) ^ -(int64) (u & 1);
		return true;
	}
	return read_long_bytes(r, v);
}

/*
 * A zigzag varint that is often longer than a byte (an id, a timestamp's
 * microseconds): up to 8 bytes read in line too.
 */
static inline bool
read_wide_long(AvroRead *r, int64 *v)
{
	uint64		u;

	if (likely(r->end - r->p >= 8) && likely(read_varint_word(r, &u)))
	{
		*v = (int64) (u >> 1) ^ -(int64) (u & 1);
		return true;
	}
	return read_long_bytes(r, v);
}

static inline bool
read_int(AvroRead *r, int64 *v)
{
	int			at = at_byte(r);

	if (!read_long(r, v))
		return false;
	if (*v < PG_INT32_MIN || *v > PG_INT32_MAX)
		return fail(r, psprintf("Avro int out of range at byte %d", at));
	return true;
}

/* The length of bytes or a string, and where they are */
static inline bool
read_span(AvroRead *r, const uint8 **p, int *len)
{
	int			at = at_byte(r);
	int64		n;

	if (!read_long(r, &n))
		return false;
	if (n < 0)
		return fail(r, psprintf("negative Avro length at byte %d", at));
	if (n > r->end - r->p)
		return truncated(r);
	*p = r->p;
	*len = (int) n;
	r->p += n;
	return true;
}

static inline bool
read_fixed(AvroRead *r, int size, const uint8 **p)
{
	if (size > r->end - r->p)
		return truncated(r);
	*p = r->p;
	r->p += size;
	return true;
}

static inline bool
read_float(AvroRead *r, float4 *f)
{
	uint32		u;

	if (r->end - r->p < 4)
		return truncated(r);
	/* Avro's floats are little-endian, as the host's, or not */
#ifdef WORDS_BIGENDIAN
	u = (uint32) r->p[0] | (uint32) r->p[1] << 8 | (uint32) r->p[2] << 16 | (uint32) r->p[3] << 24;
#else
	memcpy(&u, r->p, 4);
#endif
	r->p += 4;
	memcpy(f, &u, 4);
	return true;
}

static inline bool
read_double(AvroRead *r, float8 *d)
{
	uint64		u = 0;

	if (r->end - r->p < 8)
		return truncated(r);
#ifdef WORDS_BIGENDIAN
	for (int i = 7; i >= 0; i--)
		u = u << 8 | r->p[i];
#else
	memcpy(&u, r->p, 8);
#endif
	r->p += 8;
	memcpy(d, &u, 8);
	return true;
}

/* A union's branch: its index checked against the union */
static inline bool
read_branch(AvroRead *r, const AvroType *u, int *branch)
{
	int			at = at_byte(r);
	int64		b;

	if (!read_long(r, &b))
		return false;
	if (b < 0 || b >= u->nfields)
		return fail(r, psprintf("Avro union branch %lld out of range at byte %d", (long long) b, at));
	*branch = (int) b;
	return true;
}

/*
 * Text that must be valid in the database encoding, without NUL bytes.
 * ASCII without NUL is valid in every server encoding: most strings are
 * that, and are known so by one pass over their bytes, in line.
 */
static inline bool
check_text(AvroRead *r, const uint8 *p, int len)
{
	int			i = 0;

	/* whole eight-byte chunks at once (PostgreSQL's check), the rest by byte */
	if (len >= 8 && is_valid_ascii(p, len & ~7))
		i = len & ~7;
	while (i < len && p[i] != 0 && p[i] < 0x80)
		i++;
	if (i == len)
		return true;
	if (pg_verify_mbstr(r->state->encoding, (const char *) p, len, true))
		return true;
	return fail(r, psprintf("Avro string at byte %d is not valid %s text",
							(int) (p - r->start), GetDatabaseEncodingName()));
}

/* --- values --------------------------------------------------------------------- */

static pg_noinline void pg_attribute_noreturn()
out_of_range(const char *what, long long v, const DecodeColumn *c)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s %lld is out of range for type %s", what, v, c->typname)));
}

/*
 * A decimal of writer type w (bytes or fixed) at p (len bytes) as text
 * into buf, or false (r->error) when it has more digits than w's
 * precision allows.  First by its bytes, the bytes of sign extension left
 * out: a two's complement of precision digits takes ceil(precision *
 * log2(10)) bits and a sign bit, and the conversion takes time in the
 * square of the bytes, so a message of a megabyte of them is not tried.
 * Then by the digits themselves, as the bytes that hold 10^p - 1 hold
 * larger values too.
 */
static bool
read_decimal_text(AvroRead *r, const uint8 *p, int len, const AvroType *w, StringInfo buf)
{
	uint8		sign = len > 0 && (p[0] & 0x80) ? 0xff : 0x00;
	int			skip = 0;
	/* log2(10) = 3.3219280949, rounded up in its last digit */
	int64		bits = ((int64) w->precision * 33219281 + 9999999) / 10000000 + 1;
	int			start = buf->len;
	int			digits = 0;

	while (skip < len - 1 && p[skip] == sign && (p[skip + 1] & 0x80) == (sign & 0x80))
		skip++;
	if (len - skip > (bits + 7) / 8)
		return fail(r, psprintf("Avro decimal at byte %d has more bytes than its precision %d allows",
								(int) (p - r->start), w->precision));
	decimal_bytes_text(p + skip, len - skip, w->scale, buf);
	/* the digits of the unscaled value, its leading zeros left out */
	for (int i = start; i < buf->len; i++)
		if (buf->data[i] >= '1' && buf->data[i] <= '9')
			digits = digits > 0 ? digits + 1 : 1;
		else if (buf->data[i] == '0' && digits > 0)
			digits++;
	if (digits > w->precision)
	{
		buf->len = start;
		buf->data[start] = '\0';
		return fail(r, psprintf("Avro decimal at byte %d has more digits than its precision %d allows",
								(int) (p - r->start), w->precision));
	}
	return true;
}

/*
 * A Debezium VariableScaleDecimal, record w of an int "scale" and bytes
 * "value" in either order, as text into buf (decode_logical.c's text of a
 * Kafka Connect decimal), or false (r->error).
 */
static bool
read_variable_decimal_text(AvroRead *r, const AvroType *w, StringInfo buf)
{
	static const LogicalField f = {.kind = LOGICAL_DECIMAL,
	.name = "io.debezium.data.VariableScaleDecimal"};
	int64		scale = 0;
	const uint8 *p = NULL;
	int			len = 0;
	const char *error;

	for (int i = 0; i < w->nfields; i++)
		if (w->types[i]->kind == AVT_INT ? !read_int(r, &scale) : !read_span(r, &p, &len))
			return false;
	error = logical_decimal_bytes_text(&f, p, len, scale, buf);
	return error == NULL || fail(r, psprintf("%s at byte %d", error, at_byte(r)));
}

static Datum
numeric_from_text(const char *text, int32 typmod)
{
	return DirectFunctionCall3(numeric_in, CStringGetDatum(text),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(typmod));
}

static Datum
numeric_typmod(Datum n, int32 typmod)
{
	return typmod >= 0 ? DirectFunctionCall2(numeric, n, Int32GetDatum(typmod)) : n;
}

static Datum
numeric_from_double(float8 d, int32 typmod)
{
	return numeric_typmod(DirectFunctionCall1(float8_numeric, Float8GetDatum(d)), typmod);
}

/* A float as PostgreSQL casts float4 to numeric: 0.1, not 0.100000001490116 */
static Datum
numeric_from_float(float4 f, int32 typmod)
{
	return numeric_typmod(DirectFunctionCall1(float4_numeric, Float4GetDatum(f)), typmod);
}

/* Microseconds since 1970 (or ms * 1000) as PostgreSQL's timestamp */
static inline Datum
timestamp_from_unix(int64 v, bool millis, const DecodeColumn *c, bool tz)
{
	int64		us;

	/*
	 * Debezium's PostgreSQL connector writes a timestamp of 'infinity' and
	 * of '-infinity' as these two numbers, in any unit, as in JSON
	 * (decode_logical.c): in microseconds the first is a date in the year
	 * 294247 otherwise.
	 */
	if (v == DEBEZIUM_TIMESTAMP_INFINITY || v == DEBEZIUM_TIMESTAMP_MINUS_INFINITY)
	{
		if (v > 0)
			TIMESTAMP_NOEND(us);
		else
			TIMESTAMP_NOBEGIN(us);
		return Int64GetDatum(us);
	}
	if (millis)
	{
		if (v > PG_INT64_MAX / 1000 || v < PG_INT64_MIN / 1000)
			out_of_range("timestamp", (long long) v, c);
		v *= 1000;
	}
	if (pg_sub_s64_overflow(v, (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY, &us) ||
		!IS_VALID_TIMESTAMP(us))
		out_of_range("timestamp", (long long) v, c);
	if (c->typmod >= 0)
		return DirectFunctionCall2(tz ? timestamptz_scale : timestamp_scale,
								   Int64GetDatum(us), Int32GetDatum(c->typmod));
	return Int64GetDatum(us);
}

/* An int or long v of writer type w into a column of target t */
static Datum
integer_datum(int64 v, const AvroType *w, AvroTarget t, const DecodeColumn *c)
{
	switch (t)
	{
		case TARGET_INT2:
			if (v < PG_INT16_MIN || v > PG_INT16_MAX)
				out_of_range("value", (long long) v, c);
			return Int16GetDatum((int16) v);
		case TARGET_INT4:
			if (v < PG_INT32_MIN || v > PG_INT32_MAX)
				out_of_range("value", (long long) v, c);
			return Int32GetDatum((int32) v);
		case TARGET_INT8:
			return Int64GetDatum(v);
		case TARGET_FLOAT4:
			return Float4GetDatum((float4) v);
		case TARGET_FLOAT8:
			return Float8GetDatum((float8) v);
		case TARGET_NUMERIC:
			{
				Datum		n = NumericGetDatum(int64_to_numeric(v));

				return c->typmod >= 0 ? DirectFunctionCall2(numeric, n, Int32GetDatum(c->typmod)) : n;
			}
		case TARGET_DATE:
			{
				int64		d = v - (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE);

				if (d < PG_INT32_MIN || d > PG_INT32_MAX || !IS_VALID_DATE((DateADT) d))
					out_of_range("date", (long long) v, c);
				return DateADTGetDatum((DateADT) d);
			}
		case TARGET_TIME:
			{
				int64		us = v;

				if (w->logical == AVRO_LOGICAL_TIME_MILLIS)
					us = v * 1000;
				if (us < 0 || us > USECS_PER_DAY)
					out_of_range("time", (long long) v, c);
				if (c->typmod >= 0)
					return DirectFunctionCall2(time_scale, TimeADTGetDatum(us),
											   Int32GetDatum(c->typmod));
				return TimeADTGetDatum(us);
			}
		case TARGET_TIMESTAMPTZ:
		case TARGET_TIMESTAMP:
			return timestamp_from_unix(v, timestamp_in_millis(w), c, t == TARGET_TIMESTAMPTZ);
		default:
			elog(ERROR, "unexpected Avro integer target %d", (int) t);
	}
	pg_unreachable();
}

static Datum
bytea_datum(const uint8 *p, int len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), p, len);
	return PointerGetDatum(b);
}

/* The JSON scratch buffer back to a small one, if a value made it large */
static void
json_scratch_shrink(AvroDecoder *ad)
{
	if (ad->json.maxlen > AVRO_JSON_KEEP)
	{
		MemoryContext old = MemoryContextSwitchTo(ad->mcxt);

		pfree(ad->json.data);
		initStringInfo(&ad->json);
		MemoryContextSwitchTo(old);
	}
}

/*
 * Read one value of writer type w (a union's branch resolved) into column
 * c: *value, *isnull.  False on a malformed body (r->error).  Values that
 * the column's type refuses raise errors (class 22), which the caller
 * turns into dead letters.
 */
static bool
read_value(AvroRead *r, const AvroType *w, const AvroField *field, DecodeColumn *c,
		   AvroColumn *ac, Datum *value, bool *isnull)
{
	AvroTarget	t = ac->target;
	DecodeState *state = r->state;
	const uint8 *p;
	int			len = 0;
	int64		v;
	float4		f;
	float8		d;

	*isnull = false;
	if (w->kind == AVT_UNION)
	{
		int			b;

		if (!read_branch(r, w, &b))
			return false;
		if (field->branch_error != NULL && field->branch_error[b] != NULL)
			return fail(r, field->branch_error[b]);
		w = w->types[b];
	}
	if (w->kind == AVT_NULL)
	{
		*value = (Datum) 0;
		*isnull = true;
		/* a domain's NOT NULL and CHECKs judge a NULL too, as its input function does */
		if (ac->domain)
			domain_check((Datum) 0, true, ac->typid, &ac->domain_extra, state->avro->mcxt);
		return true;
	}
	if (t == TARGET_JSON && w->logical == AVRO_LOGICAL_JSON_TEXT)
	{
		/* Debezium's Json: the string is the document's text */
		if (!read_span(r, &p, &len) || !check_text(r, p, len))
			return false;
		*value = decode_input(state, c, (const char *) p, len);
		return true;
	}
	if (t == TARGET_JSON)
	{
		AvroDecoder *ad = state->avro;

		/* a large buffer left by a render that failed goes first */
		json_scratch_shrink(ad);
		resetStringInfo(&ad->json);
		if (!render_json(r, w, &ad->json))
			return false;
		*value = decode_input(state, c, ad->json.data, ad->json.len);
		/* the value has its own copy: a large one leaves no buffer behind */
		json_scratch_shrink(ad);
		return true;
	}

	switch (w->kind)
	{
		case AVT_BOOLEAN:
			if (r->p >= r->end)
				return truncated(r);
			if (*r->p > 1)
				return fail(r, psprintf("invalid Avro boolean 0x%02x at byte %d", *r->p, at_byte(r)));
			*value = BoolGetDatum(*r->p++ != 0);
			break;
		case AVT_INT:
			if (!read_int(r, &v))
				return false;
			*value = integer_datum(v, w, t, c);
			break;
		case AVT_LONG:
			if (!read_long(r, &v))
				return false;
			*value = integer_datum(v, w, t, c);
			break;
		case AVT_FLOAT:
			if (!read_float(r, &f))
				return false;
			*value = t == TARGET_FLOAT4 ? Float4GetDatum(f) :
				t == TARGET_FLOAT8 ? Float8GetDatum((float8) f) :
				numeric_from_float(f, c->typmod);
			break;
		case AVT_DOUBLE:
			if (!read_double(r, &d))
				return false;
			*value = t == TARGET_FLOAT8 ? Float8GetDatum(d) : numeric_from_double(d, c->typmod);
			break;
		case AVT_BYTES:
		case AVT_STRING:
		case AVT_FIXED:
			if (w->kind == AVT_FIXED ? !read_fixed(r, w->size, &p) : !read_span(r, &p, &len))
				return false;
			if (w->kind == AVT_FIXED)
				len = w->size;
			if (t == TARGET_BYTEA)
				*value = bytea_datum(p, len);
			else if (t == TARGET_NUMERIC && w->kind != AVT_STRING)
			{
				/* the scratch buffer, as the json target's: no buffer a value */
				StringInfo	buf = &((AvroDecoder *) state->avro)->json;

				resetStringInfo(buf);
				if (!read_decimal_text(r, p, len, w, buf))
					return false;
				*value = numeric_from_text(buf->data, c->typmod);
			}
			else if (t == TARGET_UUID && w->kind == AVT_FIXED)
			{
				pg_uuid_t  *u = palloc(sizeof(pg_uuid_t));

				memcpy(u->data, p, UUID_LEN);
				*value = UUIDPGetDatum(u);
			}
			else
			{
				if (!check_text(r, p, len))
					return false;
				*value = decode_input(state, c, (const char *) p, len);
				return true;	/* the input function checked a domain */
			}
			break;
		case AVT_ENUM:
			{
				int			at = at_byte(r);

				if (!read_int(r, &v))
					return false;
				if (v < 0 || v >= w->nfields)
					return fail(r, psprintf("Avro enum index %lld out of range at byte %d",
											(long long) v, at));
				*value = decode_input(state, c, w->names[v], strlen(w->names[v]));
				return true;
			}
		case AVT_RECORD:
			{
				/* a VariableScaleDecimal (can_hold): its text, then the column's */
				StringInfo	buf = &((AvroDecoder *) state->avro)->json;

				Assert(w->logical == AVRO_LOGICAL_VARIABLE_DECIMAL);
				resetStringInfo(buf);
				if (!read_variable_decimal_text(r, w, buf))
					return false;
				if (t == TARGET_NUMERIC)
				{
					*value = numeric_from_text(buf->data, c->typmod);
					break;
				}
				*value = decode_input(state, c, buf->data, buf->len);
				return true;	/* the input function checked a domain */
			}
		default:
			elog(ERROR, "unexpected Avro type %d for a column", (int) w->kind);
	}
	if (ac->domain)
		domain_check(*value, false, ac->typid, &ac->domain_extra, r->state->avro->mcxt);
	return true;
}

/* --- skipping and JSON ---------------------------------------------------------- */

static bool
enter(AvroRead *r, const AvroType *w)
{
	if (++r->depth > AVRO_MAX_DEPTH)
		return fail(r, psprintf("Avro values nest deeper than %d levels at byte %d",
								AVRO_MAX_DEPTH, at_byte(r)));

	/*
	 * Most values take a byte at least, but nulls take none: a schema that
	 * nests two records in each of 60 levels with a null at the bottom
	 * would make a message of no bytes 2^60 nulls to walk.  A message may
	 * hold twice as many values as bytes, and four times the items of no
	 * bytes its arrays may declare (a record with fields is not counted:
	 * its fields are).
	 */
	if (!(w->kind == AVT_RECORD && w->nfields > 0) && --r->values_left < 0)
		return fail(r, psprintf("Avro message of %d bytes holds more values than it can: its schema nests values of no bytes",
								(int) (r->end - r->start)));
	check_stack_depth();
	return true;
}

/*
 * Can a value of type t take no bytes: a null, a fixed of size 0, a record
 * of such fields only?  Worked out once per type and kept in it: a schema
 * may refer to one record many times over.  A record that holds itself
 * through its fields alone cannot be written at all: not one of them.
 * Records nest through names to any depth, shallow as the schema's JSON
 * may be (R1 a field of type R0, R2 of R1, ...): past AVRO_MAX_DEPTH, which
 * no value can pass either, the answer is yes, which costs only that the
 * array's items count against the message's items of no bytes.
 */
static bool
may_take_no_bytes(const AvroType *t, int depth)
{
	AvroType   *mt = (AvroType *) t;	/* the answer is kept in the type */

	switch (t->kind)
	{
		case AVT_NULL:
			return true;
		case AVT_FIXED:
			return t->size == 0;
		case AVT_RECORD:
			if (t->no_bytes == 0 && depth >= AVRO_MAX_DEPTH)
				return true;
			if (t->no_bytes == 0)
			{
				char		answer = 'y';

				mt->no_bytes = 'w';
				for (int f = 0; f < t->nfields && answer == 'y'; f++)
				{
					const AvroType *ft = t->types[f];

					/* a record still being worked out holds itself */
					if (ft->no_bytes == 'w' || !may_take_no_bytes(ft, depth + 1))
						answer = 'n';
				}
				mt->no_bytes = answer;
			}
			return t->no_bytes == 'y';
		default:
			return false;
	}
}

/*
 * The next block of array or map w: its count of items (0: the end), and
 * its size in bytes when the writer gave it (else -1).
 */
static bool
read_block(AvroRead *r, const AvroType *w, int64 *count, int64 *bytes)
{
	int			at = at_byte(r);

	*bytes = -1;
	if (!read_long(r, count))
		return false;
	if (*count < 0)
	{
		if (*count == PG_INT64_MIN)
			return fail(r, psprintf("invalid Avro block count at byte %d", at));
		*count = -*count;
		if (!read_long(r, bytes))
			return false;
		if (*bytes < 0 || *bytes > r->end - r->p)
			return fail(r, psprintf("invalid Avro block size at byte %d", at));
	}
	/*
	 * Every item takes a byte at least, but in an array of items that may
	 * take none (nulls, records of nulls), whose items count against the
	 * message's budget of them (read_start).
	 */
	if (w->kind == AVT_ARRAY && may_take_no_bytes(w->items, 0))
	{
		if (*count > r->empty_items)
			return fail(r, psprintf("invalid Avro block count at byte %d: more than %lld nulls or other items of no bytes in the arrays of a message of %d bytes",
									at, (long long) r->max_empty_items, (int) (r->end - r->start)));
		r->empty_items -= *count;
	}
	else if (*count > r->end - r->p)
		return fail(r, psprintf("invalid Avro block count at byte %d", at));
	return true;
}

static bool
skip_value(AvroRead *r, const AvroType *w)
{
	const uint8 *p;
	int			len;
	int64		v;
	bool		ok = true;

	if (!enter(r, w))
		return false;
	switch (w->kind)
	{
		case AVT_NULL:
			break;
		case AVT_BOOLEAN:
			if (r->p >= r->end)
				ok = truncated(r);
			else
				r->p++;
			break;
		case AVT_INT:
		case AVT_LONG:
		case AVT_ENUM:
			ok = read_long(r, &v);
			break;
		case AVT_FLOAT:
			ok = read_fixed(r, 4, &p);
			break;
		case AVT_DOUBLE:
			ok = read_fixed(r, 8, &p);
			break;
		case AVT_BYTES:
		case AVT_STRING:
			ok = read_span(r, &p, &len);
			break;
		case AVT_FIXED:
			ok = read_fixed(r, w->size, &p);
			break;
		case AVT_RECORD:
			for (int i = 0; ok && i < w->nfields; i++)
				ok = skip_value(r, w->types[i]);
			break;
		case AVT_UNION:
			{
				int			b;

				ok = read_branch(r, w, &b) && skip_value(r, w->types[b]);
			}
			break;
		case AVT_ARRAY:
		case AVT_MAP:
			for (;;)
			{
				int64		count;
				int64		bytes;

				if (!(ok = read_block(r, w, &count, &bytes)) || count == 0)
					break;
				if (bytes >= 0)
				{
					r->p += bytes;
					continue;
				}
				for (int64 i = 0; ok && i < count; i++)
					ok = (w->kind == AVT_ARRAY || read_span(r, &p, &len)) &&
						skip_value(r, w->items);
				if (!ok)
					break;
			}
			break;
	}
	r->depth--;
	return ok;
}

/* A JSON string of text p (len bytes, checked) */
static void
json_string(StringInfo buf, const uint8 *p, int len)
{
	char	   *s = pnstrdup((const char *) p, len);

	escape_json(buf, s);
	pfree(s);
}

/* Bytes as a JSON string, a code point per byte (Avro's JSON encoding) */
static void
json_bytes(StringInfo buf, const uint8 *p, int len)
{
	appendStringInfoChar(buf, '"');
	for (int i = 0; i < len; i++)
	{
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
			appendStringInfoChar(buf, (char) p[i]);
		else
			appendStringInfo(buf, "\\u%04x", p[i]);
	}
	appendStringInfoChar(buf, '"');
}

static void
json_double(StringInfo buf, float8 d, bool single)
{
	char		digits[32];

	if (isnan(d))
		appendStringInfoString(buf, "\"NaN\"");
	else if (isinf(d))
		appendStringInfoString(buf, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
	else
	{
		if (single)
			float_to_shortest_decimal_buf((float4) d, digits);
		else
			double_to_shortest_decimal_buf(d, digits);
		appendStringInfoString(buf, digits);
	}
}

/*
 * A value of writer type w as JSON text into buf: records and maps as
 * objects, arrays as arrays, a union as its branch's value, bytes and
 * fixed as strings (a decimal as its number), enums as their symbols.
 */
static bool
render_json(AvroRead *r, const AvroType *w, StringInfo buf)
{
	const uint8 *p;
	int			len;
	int64		v;
	float4		f;
	float8		d;
	bool		ok = true;

	/* long field names over many values of no bytes: bounded JSON */
	if (buf->len > r->max_json)
		return fail(r, psprintf("Avro value at byte %d makes more than %lld bytes of JSON from a message of %d bytes",
								at_byte(r), (long long) r->max_json, (int) (r->end - r->start)));
	if (!enter(r, w))
		return false;
	switch (w->kind)
	{
		case AVT_NULL:
			appendStringInfoString(buf, "null");
			break;
		case AVT_BOOLEAN:
			if (r->p >= r->end)
				ok = truncated(r);
			else if (*r->p > 1)
				ok = fail(r, psprintf("invalid Avro boolean 0x%02x at byte %d", *r->p, at_byte(r)));
			else
				appendStringInfoString(buf, *r->p++ ? "true" : "false");
			break;
		case AVT_INT:
		case AVT_LONG:
			if ((ok = (w->kind == AVT_INT ? read_int(r, &v) : read_long(r, &v))))
				appendStringInfo(buf, INT64_FORMAT, v);
			break;
		case AVT_FLOAT:
			if ((ok = read_float(r, &f)))
				json_double(buf, (float8) f, true);
			break;
		case AVT_DOUBLE:
			if ((ok = read_double(r, &d)))
				json_double(buf, d, false);
			break;
		case AVT_BYTES:
		case AVT_FIXED:
			if (w->kind == AVT_FIXED)
			{
				ok = read_fixed(r, w->size, &p);
				len = w->size;
			}
			else
				ok = read_span(r, &p, &len);
			if (ok && w->logical == AVRO_LOGICAL_DECIMAL)
				ok = read_decimal_text(r, p, len, w, buf);
			else if (ok)
				json_bytes(buf, p, len);
			break;
		case AVT_STRING:
			if ((ok = read_span(r, &p, &len) && check_text(r, p, len)))
				json_string(buf, p, len);
			break;
		case AVT_ENUM:
			{
				int			at = at_byte(r);

				if (!(ok = read_int(r, &v)))
					break;
				if (v < 0 || v >= w->nfields)
					ok = fail(r, psprintf("Avro enum index %lld out of range at byte %d",
										  (long long) v, at));
				else
					escape_json(buf, w->names[v]);
			}
			break;
		case AVT_RECORD:
			appendStringInfoChar(buf, '{');
			for (int i = 0; ok && i < w->nfields; i++)
			{
				if (i > 0)
					appendStringInfoString(buf, ", ");
				escape_json(buf, w->names[i]);
				appendStringInfoString(buf, ": ");
				ok = render_json(r, w->types[i], buf);
			}
			appendStringInfoChar(buf, '}');
			break;
		case AVT_UNION:
			{
				int			b;

				ok = read_branch(r, w, &b) && render_json(r, w->types[b], buf);
			}
			break;
		case AVT_ARRAY:
		case AVT_MAP:
			{
				bool		first = true;

				appendStringInfoChar(buf, w->kind == AVT_ARRAY ? '[' : '{');
				for (;;)
				{
					int64		count;
					int64		bytes;

					if (!(ok = read_block(r, w, &count, &bytes)) || count == 0)
						break;
					for (int64 i = 0; ok && i < count; i++)
					{
						if (!first)
							appendStringInfoString(buf, ", ");
						first = false;
						if (w->kind == AVT_MAP)
						{
							if (!(ok = read_span(r, &p, &len) && check_text(r, p, len)))
								break;
							json_string(buf, p, len);
							appendStringInfoString(buf, ": ");
						}
						ok = render_json(r, w->items, buf);
					}
					if (!ok)
						break;
				}
				appendStringInfoChar(buf, w->kind == AVT_ARRAY ? ']' : '}');
			}
			break;
	}
	r->depth--;
	return ok;
}

/* --- a message ------------------------------------------------------------------ */

/*
 * The plan of the message at r (its Confluent header read past, or the
 * plain schema's), or NULL with *error set.
 */
static AvroPlan *
message_plan(DecodeState *state, AvroRead *r, int len, const char **error)
{
	AvroDecoder *ad = state->avro;
	AvroPlan   *plan = ad->plain;

	if (ad->confluent)
	{
		int32		id;

		if (len < 5)
		{
			*error = psprintf("message too short for the Confluent Avro format: %d bytes", len);
			return NULL;
		}
		if (r->p[0] != 0)
		{
			*error = psprintf("wrong magic byte 0x%02x: not the Confluent Avro format", r->p[0]);
			return NULL;
		}
		id = (int32) ((uint32) r->p[1] << 24 | (uint32) r->p[2] << 16 | (uint32) r->p[3] << 8 | r->p[4]);
		if (id < 0)
		{
			/* no registry assigns one, and -1 names the plain schema here */
			*error = psprintf("Avro schema id %d in the Confluent header is negative: no schema registry assigns one", id);
			return NULL;
		}
		r->p += 5;
		if (ad->last != NULL && ad->last->id == id)
			plan = ad->last;
		else
		{
			AvroPlanEntry *e = hash_search(ad->plans, &id, HASH_FIND, NULL);

			if (e == NULL)
				elog(ERROR, "Avro writer schema %d was not looked up before its batch", id);
			plan = ad->last = e->plan;
		}
	}
	if (plan == NULL)
		elog(ERROR, "Avro decoder without a schema");
	*error = plan->error;
	return plan->error != NULL ? NULL : plan;
}

/* A field into its column by read_value, which names the column in errors */
static bool
read_field(AvroRead *r, AvroField *field, Datum *value, bool *isnull)
{
	DecodeState *state = r->state;
	DecodeColumn *c = &state->columns[field->column];

	state->cur_column = c;
	return read_value(r, field->type, field, c, &state->avro->columns[field->column],
					  value, isnull);
}

/*
 * The fields of a record by its plan into values/nulls: false on a
 * malformed body.  One switch per field, on the op its plan chose; only
 * the ops that can raise an error set the column the error context names.
 */
static bool
read_record(AvroRead *r, AvroPlan *plan, Datum *values, bool *nulls)
{
	DecodeState *state = r->state;

	for (int f = 0; f < plan->nfields; f++)
	{
		AvroField  *field = &plan->fields[f];
		Datum	   *value = field->att >= 0 ? &values[field->att] : NULL;
		DecodeColumn *c;
		const uint8 *p;
		int			len;
		int64		v;
		float8		d;

		if (field->att >= 0)
			nulls[field->att] = false;
		if (field->null_branch >= 0)
		{
			/*
			 * Branch 0 or 1 is one byte, zigzag 0 or 2.  Anything else is
			 * malformed, and read like any union to say how.
			 */
			if (unlikely(r->p >= r->end || (*r->p & ~2) != 0))
			{
				if (!(field->att < 0 ? skip_value(r, field->type) :
					  read_field(r, field, value, &nulls[field->att])))
					return false;
				continue;
			}
			if ((*r->p++ >> 1) == field->null_branch)
			{
				if (field->att >= 0)
				{
					*value = (Datum) 0;
					nulls[field->att] = true;
				}
				continue;
			}
		}
		switch (field->op)
		{
			case AOP_VALUE:
				if (!read_field(r, field, value, &nulls[field->att]))
					return false;
				break;
			case AOP_SKIP:
				if (!skip_value(r, field->type))
					return false;
				break;
			case AOP_SKIP_VARINT:
				if (!read_long(r, &v))
					return false;
				break;
			case AOP_SKIP_SPAN:
				if (!read_span(r, &p, &len))
					return false;
				break;
			case AOP_SKIP_FIXED:
				if (!read_fixed(r, field->size, &p))
					return false;
				break;
			case AOP_INT_INT4:
				if (!read_int(r, &v))
					return false;
				*value = Int32GetDatum((int32) v);
				break;
			case AOP_INT_INT8:
				if (!read_int(r, &v))
					return false;
				*value = Int64GetDatum(v);
				break;
			case AOP_LONG_INT8:
				if (!read_wide_long(r, &v))
					return false;
				*value = Int64GetDatum(v);
				break;
			case AOP_DOUBLE_FLOAT8:
				if (!read_double(r, &d))
					return false;
				*value = Float8GetDatum(d);
				break;
			case AOP_STRING_TEXT:
				if (!read_span(r, &p, &len) || !check_text(r, p, len))
					return false;
				*value = decode_text_copy(&state->text, (const char *) p, len);
				break;
			case AOP_TIMESTAMP:
				if (!read_wide_long(r, &v))
					return false;
				/* out of range is an error, its context the column */
				c = &state->columns[field->column];
				state->cur_column = c;
				*value = timestamp_from_unix(v, field->millis, c, field->tz);
				break;
		}
	}
	state->cur_column = NULL;
	for (int i = 0; i < plan->nabsent; i++)
	{
		int			col = plan->absent[i];
		AvroColumn *ac = &state->avro->columns[col];

		values[state->columns[col].attindex] = (Datum) 0;
		nulls[state->columns[col].attindex] = true;
		state->missing[col]++;
		/* a column the schema lacks is NULL: its domain may refuse that */
		if (ac->domain)
		{
			state->cur_column = &state->columns[col];
			domain_check((Datum) 0, true, ac->typid, &ac->domain_extra, state->avro->mcxt);
			state->cur_column = NULL;
		}
	}
	return true;
}

static void
read_start(AvroRead *r, DecodeState *state, const char *payload, int len)
{
	r->start = r->p = (const uint8 *) payload;
	r->end = r->start + len;
	r->error = NULL;
	r->depth = 0;
	r->max_empty_items = Min((int64) len * AVRO_EMPTY_ITEMS_PER_BYTE + AVRO_EMPTY_ITEMS_MIN,
							 AVRO_MAX_EMPTY_ITEMS);
	r->empty_items = r->max_empty_items;
	r->values_left = (int64) len * 2 + r->max_empty_items * 4 + 64;
	r->max_json = Min((int64) len * AVRO_JSON_BYTES_PER_BYTE + AVRO_JSON_BYTES_MIN,
					  AVRO_MAX_JSON_BYTES);
	r->state = state;
}

static const char *
trailing_bytes(AvroRead *r)
{
	if (r->p == r->end)
		return NULL;
	return psprintf("%d bytes after the end of the Avro record, at byte %d",
					(int) (r->end - r->p), at_byte(r));
}

/*
 * decode_avro_message
 *		Decode one message as decoder_decode's contract says: its schema's
 *		plan (by the Confluent header's id, which must have been added, or
 *		the plain schema), then each field into its column.
 */
const char *
decode_avro_message(DecodeState *state, const char *payload, int len,
					Datum *values, bool *nulls)
{
	AvroRead	r;
	AvroPlan   *plan;
	const char *error;

	read_start(&r, state, payload, len);
	plan = message_plan(state, &r, len, &error);
	if (plan == NULL)
		return error;
	if (!read_record(&r, plan, values, nulls))
		return r.error;
	if ((error = trailing_bytes(&r)) != NULL)
	{
		/* a dead letter after all: its absent columns are not counted */
		for (int i = 0; i < plan->nabsent; i++)
			state->missing[plan->absent[i]]--;
		return error;
	}
	return NULL;
}

/*
 * decode_avro_set_debezium
 *		Messages are Debezium change events (before any schema is added).
 */
void
decode_avro_set_debezium(DecodeState *state)
{
	state->avro->debezium = true;
}

/*
 * decode_avro_set_whole_value
 *		A message, whatever its type (a record too), is the value of the
 *		decoder's one column (before any schema is added).
 */
void
decode_avro_set_whole_value(DecodeState *state)
{
	Assert(state->ncolumns == 1);
	state->avro->whole = true;
}

/*
 * decode_avro_debezium
 *		Decode one Debezium change event as decoder_decode_debezium's
 *		contract says: *op, *has_before, and the "before" and "after"
 *		images the op has, each by its plan, into before_values/nulls and
 *		after_values/nulls.
 */
const char *
decode_avro_debezium(DecodeState *state, const char *payload, int len, char *op,
					 bool *has_before, Datum *before_values, bool *before_nulls,
					 Datum *after_values, bool *after_nulls)
{
	static const char *const images[2] = {"before", "after"};
	AvroRead	r;
	AvroPlan   *plan;
	const char *error;
	bool		has[2] = {false, false};
	const uint8 *optext = NULL;
	int			oplen = 0;

	*op = 0;
	read_start(&r, state, payload, len);
	plan = message_plan(state, &r, len, &error);
	if (plan == NULL)
		return error;
	for (int f = 0; f < plan->nfields; f++)
	{
		const AvroType *t = plan->fields[f].type;
		int			i = f == plan->image_field[0] ? 0 : f == plan->image_field[1] ? 1 : -1;

		if (f == plan->op_field)
		{
			if (!read_span(&r, &optext, &oplen))
				return r.error;
			continue;
		}
		if (i < 0)
		{
			if (!skip_value(&r, t))
				return r.error;
			continue;
		}
		if (t->kind == AVT_UNION)
		{
			int			b;

			if (!read_branch(&r, t, &b))
				return r.error;
			t = t->types[b];
			if (t->kind == AVT_NULL)
				continue;
			if (t->kind != AVT_RECORD)
				return psprintf("\"%s\" of a Debezium event holds %s, not its row",
								images[i], avro_type_name(t));
		}
		has[i] = true;
		if (!read_record(&r, plan->image[i], i == 0 ? before_values : after_values,
						 i == 0 ? before_nulls : after_nulls))
			return r.error;
	}
	if ((error = trailing_bytes(&r)) != NULL)
		return error;
	if (oplen != 1 || optext[0] == '\0' || strchr("crudt", optext[0]) == NULL)
		return psprintf("unknown Debezium op \"%.*s\": only \"c\", \"r\", \"u\", \"d\" and \"t\" change rows",
						Min(oplen, 16), optext != NULL && pg_verify_mbstr(state->encoding, (const char *) optext, Min(oplen, 16), true) ?
						(const char *) optext : "");
	if (optext[0] == 'd' && !has[0])
		return psprintf("Debezium event with op \"%c\" has no \"before\" row", optext[0]);
	if (optext[0] != 'd' && optext[0] != 't' && !has[1])
		return psprintf("Debezium event with op \"%c\" has no \"after\" row", optext[0]);
	*op = (char) optext[0];
	/* an update's, if it has one; see decoder_decode_debezium */
	*has_before = has[0] && (optext[0] == 'u' || optext[0] == 'd');
	return NULL;
}
