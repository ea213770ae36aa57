/*-------------------------------------------------------------------------
 *
 * decode_avro_schema.c
 *	  Avro writer schemas: their JSON parsed into AvroTypes.
 *
 * avro-c checks a schema first: it knows the specification's rules for
 * names, namespaces, defaults and duplicates, and its message says what is
 * wrong.  It has no logical types, though, and decoding through its
 * generic values costs as much as all of streamwin's own decoding
 * (test/bench/avro-results.md), so the schema is then read a second time,
 * with PostgreSQL's jsonb, into the small AvroType graph that
 * decode_avro.c resolves against a source's columns and walks while it
 * decodes.
 *
 * Logical types follow the specification: one that does not fit its
 * underlying type (a "date" on a string, a decimal whose scale exceeds its
 * precision) is ignored, and the value is read as the underlying type.
 * Debezium's types, which Kafka Connect's Avro converter names only by
 * "connect.name" (io.debezium.time.MicroTimestamp on a long), are read as
 * the Avro logical types they are, a VariableScaleDecimal record as a
 * decimal and a Json string as the document it holds.
 *
 * src/decode/decode_avro_schema.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <avro.h>

#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "decode_avro.h"

/* How avro-c's message for a name it cannot resolve begins */
#define AVRO_C_UNKNOWN_TYPE		"Unknown Avro \"type\": "

/* Deeper nesting of types than this is refused (parse_type recurses) */
#define AVRO_SCHEMA_MAX_DEPTH	100

typedef struct SchemaParse
{
	List	   *named;			/* AvroType * of every named type so far */
	List	   *fallbacks;		/* short names found only in no namespace */
	bool		unchecked;		/* avro-c stopped early (see avro_schema_parse):
								 * check what it would have */
	char	   *error;
	int			depth;
} SchemaParse;

static AvroType *parse_type(SchemaParse *ps, JsonbValue *v, const char *ns);

static const char *const primitive_names[] = {
	[AVT_NULL] = "null",
	[AVT_BOOLEAN] = "boolean",
	[AVT_INT] = "int",
	[AVT_LONG] = "long",
	[AVT_FLOAT] = "float",
	[AVT_DOUBLE] = "double",
	[AVT_BYTES] = "bytes",
	[AVT_STRING] = "string",
};

static const char *const logical_names[] = {
	[AVRO_LOGICAL_NONE] = NULL,
	[AVRO_LOGICAL_DATE] = "date",
	[AVRO_LOGICAL_TIME_MILLIS] = "time-millis",
	[AVRO_LOGICAL_TIME_MICROS] = "time-micros",
	[AVRO_LOGICAL_TIMESTAMP_MILLIS] = "timestamp-millis",
	[AVRO_LOGICAL_TIMESTAMP_MICROS] = "timestamp-micros",
	[AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS] = "local-timestamp-millis",
	[AVRO_LOGICAL_LOCAL_TIMESTAMP_MICROS] = "local-timestamp-micros",
	[AVRO_LOGICAL_DECIMAL] = "decimal",
	[AVRO_LOGICAL_UUID] = "uuid",
	[AVRO_LOGICAL_VARIABLE_DECIMAL] = "io.debezium.data.VariableScaleDecimal",
	[AVRO_LOGICAL_JSON_TEXT] = "io.debezium.data.Json",
};

/* The underlying type each logical type needs (decimal: bytes or fixed) */
static const AvroKind logical_kinds[] = {
	[AVRO_LOGICAL_NONE] = AVT_NULL,
	[AVRO_LOGICAL_DATE] = AVT_INT,
	[AVRO_LOGICAL_TIME_MILLIS] = AVT_INT,
	[AVRO_LOGICAL_TIME_MICROS] = AVT_LONG,
	[AVRO_LOGICAL_TIMESTAMP_MILLIS] = AVT_LONG,
	[AVRO_LOGICAL_TIMESTAMP_MICROS] = AVT_LONG,
	[AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS] = AVT_LONG,
	[AVRO_LOGICAL_LOCAL_TIMESTAMP_MICROS] = AVT_LONG,
	[AVRO_LOGICAL_DECIMAL] = AVT_BYTES,
	[AVRO_LOGICAL_UUID] = AVT_STRING,
	[AVRO_LOGICAL_VARIABLE_DECIMAL] = AVT_RECORD,
	[AVRO_LOGICAL_JSON_TEXT] = AVT_STRING,
};

const char *
avro_type_name(const AvroType *type)
{
	const char *base;

	switch (type->kind)
	{
		case AVT_RECORD:
			return psprintf("record \"%s\"", type->name);
		case AVT_ENUM:
			return psprintf("enum \"%s\"", type->name);
		case AVT_FIXED:
			base = psprintf("fixed \"%s\" (%d bytes)", type->name, type->size);
			break;
		case AVT_ARRAY:
			return psprintf("array of %s", avro_type_name(type->items));
		case AVT_MAP:
			return psprintf("map of %s", avro_type_name(type->items));
		case AVT_UNION:
			{
				StringInfoData buf;

				initStringInfo(&buf);
				appendStringInfoString(&buf, "union [");
				for (int i = 0; i < type->nfields; i++)
					appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "", avro_type_name(type->types[i]));
				appendStringInfoChar(&buf, ']');
				return buf.data;
			}
		default:
			base = primitive_names[type->kind];
			break;
	}
	if (type->logical == AVRO_LOGICAL_DECIMAL)
		return psprintf("%s (decimal(%d,%d))", base, type->precision, type->scale);
	if (type->logical != AVRO_LOGICAL_NONE)
		return psprintf("%s (%s)", base, logical_names[type->logical]);
	return base;
}

/* The string v, as a C string, or NULL if v is not a string */
static char *
json_string(JsonbValue *v)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static JsonbValue *
member(JsonbValue *obj, const char *key)
{
	return getKeyJsonValueFromContainer(obj->val.binary.data, key, strlen(key), NULL);
}

/* A member that is a non-negative integer, or -1 */
static int
member_int(JsonbValue *obj, const char *key)
{
	JsonbValue *v = member(obj, key);
	bool		failed = false;
	int32		n;

	if (v == NULL || v->type != jbvNumeric)
		return -1;
	/* a schema never raises: an integer out of range is no integer */
	n = numeric_int4_opt_error(v->val.numeric, &failed);
	return failed || n < 0 ? -1 : (int) n;
}

static AvroType *
new_type(AvroKind kind)
{
	AvroType   *t = palloc0(sizeof(AvroType));

	t->kind = kind;
	return t;
}

/* The full name of a named type: its name, qualified by its namespace */
static char *
full_name(JsonbValue *obj, const char *ns, const char **own_ns)
{
	char	   *name = json_string(member(obj, "name"));
	char	   *space = json_string(member(obj, "namespace"));

	if (name == NULL)
		return NULL;
	if (strchr(name, '.') != NULL)
	{
		*own_ns = pnstrdup(name, strrchr(name, '.') - name);
		return name;
	}
	if (space == NULL)
		space = (char *) ns;
	*own_ns = space;
	return space != NULL && space[0] != '\0' ? psprintf("%s.%s", space, name) : name;
}

static AvroType *
find_named(SchemaParse *ps, const char *fullname)
{
	ListCell   *lc;

	foreach(lc, ps->named)
	{
		AvroType   *t = lfirst(lc);

		if (strcmp(t->name, fullname) == 0)
			return t;
	}
	return NULL;
}

/*
 * A named type the schema defined before: a short name is the type of
 * that name in the enclosing namespace, and only where there is none, the
 * type of that name in no namespace (as Avro's Java library reads it,
 * which writes such references short)
 */
static AvroType *
lookup_named(SchemaParse *ps, const char *name, const char *ns)
{
	AvroType   *t = NULL;

	if (ns != NULL && ns[0] != '\0' && strchr(name, '.') == NULL)
	{
		t = find_named(ps, psprintf("%s.%s", ns, name));
		if (t == NULL && (t = find_named(ps, name)) != NULL)
			ps->fallbacks = lappend(ps->fallbacks, pstrdup(name));
		return t;
	}
	return find_named(ps, name);
}

/* A name as the specification (and avro-c) allows: [A-Za-z_][A-Za-z0-9_]* */
static bool
valid_name(const char *name)
{
	for (const char *c = name; *c != '\0'; c++)
	{
		bool		letter = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_';

		if (!letter && (c == name || !(*c >= '0' && *c <= '9')))
			return false;
	}
	return name[0] != '\0';
}

/*
 * Debezium's types that Kafka Connect's Avro converter writes as plain
 * Avro types named by "connect.name", and the logical type each is
 * exactly: its times as Avro's (Debezium's timestamps are of a time zone's
 * wall clock, as Avro's local timestamps), a VariableScaleDecimal (a
 * record of its scale and unscaled bytes) and a Json string as
 * streamwin's own.
 */
static const struct
{
	const char *connect_name;
	AvroLogical logical;
}			debezium_names[] =
{
	{"io.debezium.time.Date", AVRO_LOGICAL_DATE},
	{"io.debezium.time.Time", AVRO_LOGICAL_TIME_MILLIS},
	{"io.debezium.time.MicroTime", AVRO_LOGICAL_TIME_MICROS},
	{"io.debezium.time.Timestamp", AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS},
	{"io.debezium.time.MicroTimestamp", AVRO_LOGICAL_LOCAL_TIMESTAMP_MICROS},
	{"io.debezium.data.VariableScaleDecimal", AVRO_LOGICAL_VARIABLE_DECIMAL},
	{"io.debezium.data.Json", AVRO_LOGICAL_JSON_TEXT},
};

/* Is record t a VariableScaleDecimal's: an int "scale" and bytes "value"? */
static bool
variable_decimal_record(const AvroType *t)
{
	bool		scale = false;
	bool		value = false;

	if (t->nfields != 2)
		return false;
	for (int i = 0; i < 2; i++)
	{
		scale |= strcmp(t->names[i], "scale") == 0 && t->types[i]->kind == AVT_INT;
		value |= strcmp(t->names[i], "value") == 0 && t->types[i]->kind == AVT_BYTES;
	}
	return scale && value;
}

/*
 * A logical type on t, if it fits (else, as the specification says, none):
 * its "logicalType", or the one its Debezium "connect.name" stands for.
 */
static void
apply_logical(AvroType *t, JsonbValue *obj)
{
	char	   *logical = json_string(member(obj, "logicalType"));

	if (logical == NULL)
	{
		char	   *connect_name = json_string(member(obj, "connect.name"));

		for (int d = 0; connect_name != NULL && d < (int) lengthof(debezium_names); d++)
			if (strcmp(connect_name, debezium_names[d].connect_name) == 0 &&
				t->kind == logical_kinds[debezium_names[d].logical] &&
				(t->kind != AVT_RECORD || variable_decimal_record(t)))
				t->logical = debezium_names[d].logical;
		return;
	}
	/* (the specification's logical types only) */
	for (int l = 1; l <= (int) AVRO_LOGICAL_UUID; l++)
	{
		if (strcmp(logical, logical_names[l]) != 0)
			continue;
		if (l == AVRO_LOGICAL_DECIMAL)
		{
			int			precision = member_int(obj, "precision");
			int			scale = member(obj, "scale") ? member_int(obj, "scale") : 0;

			if ((t->kind != AVT_BYTES && t->kind != AVT_FIXED) ||
				precision < 1 || scale < 0 || scale > precision || precision > 1000)
				return;
			t->precision = precision;
			t->scale = scale;
		}
		else if (t->kind != logical_kinds[l])
			return;
		t->logical = (AvroLogical) l;
		return;
	}
}

/* The fields of a record, or the symbols of an enum, into t */
static bool
parse_members(SchemaParse *ps, AvroType *t, JsonbValue *list, const char *ns)
{
	int			n;

	if (list == NULL || list->type != jbvBinary || !JsonContainerIsArray(list->val.binary.data))
	{
		ps->error = psprintf("%s has no array of %s", avro_type_name(t),
							 t->kind == AVT_RECORD ? "fields" : "symbols");
		return false;
	}
	n = JsonContainerSize(list->val.binary.data);
	if (n == 0 && t->kind == AVT_ENUM)
	{
		ps->error = psprintf("%s has no symbols", avro_type_name(t));
		return false;
	}
	t->nfields = n;
	t->names = palloc0(sizeof(char *) * Max(n, 1));
	if (t->kind == AVT_RECORD)
		t->types = palloc0(sizeof(AvroType *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		JsonbValue *item = getIthJsonbValueFromContainer(list->val.binary.data, i);

		if (t->kind == AVT_ENUM)
		{
			t->names[i] = json_string(item);
			if (t->names[i] == NULL)
			{
				ps->error = psprintf("symbol %d of %s is not a string", i, avro_type_name(t));
				return false;
			}
			continue;
		}
		if (item->type != jbvBinary || !JsonContainerIsObject(item->val.binary.data) ||
			(t->names[i] = json_string(member(item, "name"))) == NULL ||
			member(item, "type") == NULL)
		{
			ps->error = psprintf("field %d of %s has no name or no type", i, avro_type_name(t));
			return false;
		}
		if (ps->unchecked && !valid_name(t->names[i]))
		{
			ps->error = psprintf("field \"%s\" of %s is not a valid name", t->names[i], avro_type_name(t));
			return false;
		}
		t->types[i] = parse_type(ps, member(item, "type"), ns);
		if (t->types[i] == NULL)
			return false;
	}
	return true;
}

/* A schema written as an object: {"type": ...} */
static AvroType *
parse_object(SchemaParse *ps, JsonbValue *obj, const char *ns)
{
	JsonbValue *typev = member(obj, "type");
	char	   *type = json_string(typev);
	AvroType   *t;
	const char *own_ns = ns;

	if (typev == NULL)
	{
		ps->error = pstrdup("a schema object has no \"type\"");
		return NULL;
	}
	if (type == NULL)			/* {"type": {...}} or {"type": [...]} */
		return parse_type(ps, typev, ns);

	if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0 ||
		strcmp(type, "enum") == 0 || strcmp(type, "fixed") == 0)
	{
		t = new_type(type[0] == 'e' && type[1] == 'n' ? AVT_ENUM :
					 type[0] == 'f' ? AVT_FIXED : AVT_RECORD);
		t->name = full_name(obj, ns, &own_ns);
		if (t->name == NULL)
		{
			ps->error = psprintf("a %s has no name", type);
			return NULL;
		}
		/* (avro-c checks a name, not its namespace) */
		if (ps->unchecked)
		{
			const char *dot = strrchr(t->name, '.');

			if (find_named(ps, t->name) != NULL)
				ps->error = psprintf("type \"%s\" is defined twice", t->name);
			else if (!valid_name(dot != NULL ? dot + 1 : t->name))
				ps->error = psprintf("\"%s\" is not a valid name", t->name);
			if (ps->error != NULL)
				return NULL;
		}
		/* named before its fields, so that they may refer to it */
		ps->named = lappend(ps->named, t);
		if (t->kind == AVT_FIXED)
		{
			t->size = member_int(obj, "size");
			if (t->size < 0)
			{
				ps->error = psprintf("%s has no size", avro_type_name(t));
				return NULL;
			}
		}
		else if (!parse_members(ps, t, member(obj, t->kind == AVT_ENUM ? "symbols" : "fields"),
								own_ns))
			return NULL;
	}
	else if (strcmp(type, "array") == 0 || strcmp(type, "map") == 0)
	{
		JsonbValue *items = member(obj, type[0] == 'a' ? "items" : "values");

		t = new_type(type[0] == 'a' ? AVT_ARRAY : AVT_MAP);
		if (items == NULL)
		{
			ps->error = psprintf("an %s has no %s", type, type[0] == 'a' ? "items" : "values");
			return NULL;
		}
		t->items = parse_type(ps, items, ns);
		if (t->items == NULL)
			return NULL;
	}
	else
	{
		t = parse_type(ps, typev, ns);
		if (t == NULL)
			return NULL;

		/*
		 * A reference to a named type is that type, shared by every other
		 * reference: a logical type belongs on its definition, and one
		 * written on a reference is ignored rather than changing the others.
		 */
		if (t->kind > AVT_STRING)
			return t;
		t = memcpy(new_type(t->kind), t, sizeof(AvroType));
	}
	apply_logical(t, obj);
	return t;
}

static AvroType *
parse_type(SchemaParse *ps, JsonbValue *v, const char *ns)
{
	AvroType   *t;

	if (++ps->depth > AVRO_SCHEMA_MAX_DEPTH)
	{
		ps->error = psprintf("types nest deeper than %d levels", AVRO_SCHEMA_MAX_DEPTH);
		return NULL;
	}
	if (v->type == jbvString)
	{
		char	   *name = json_string(v);

		t = NULL;
		for (int k = AVT_NULL; k <= AVT_STRING; k++)
			if (strcmp(name, primitive_names[k]) == 0)
				t = new_type((AvroKind) k);
		if (t == NULL && (t = lookup_named(ps, name, ns)) == NULL)
			ps->error = psprintf("unknown type \"%s\"", name);
	}
	else if (v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data))
	{
		int			n = JsonContainerSize(v->val.binary.data);

		if (n == 0)
		{
			ps->error = pstrdup("a union has no branches");
			ps->depth--;
			return NULL;
		}
		t = new_type(AVT_UNION);
		t->nfields = n;
		t->types = palloc0(sizeof(AvroType *) * Max(n, 1));
		for (int i = 0; i < n && t != NULL; i++)
		{
			t->types[i] = parse_type(ps, getIthJsonbValueFromContainer(v->val.binary.data, i), ns);
			if (t->types[i] == NULL)
				t = NULL;
			else if (t->types[i]->kind == AVT_UNION)
			{
				ps->error = pstrdup("a union holds another union");
				t = NULL;
			}
		}
	}
	else if (v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data))
		t = parse_object(ps, v, ns);
	else
	{
		ps->error = pstrdup("a schema is a string, an array or an object");
		t = NULL;
	}
	ps->depth--;
	return t;
}

/*
 * avro-c's verdict on the schema: NULL, or its error.  avro-c allocates
 * with malloc; the schema is freed at once.
 */
static pg_noinline char *
avro_c_check(const char *json, int len)
{
	avro_schema_t schema;

	if (avro_schema_from_json_length(json, (size_t) len, &schema) != 0)
	{
		char	   *error = pstrdup(avro_strerror());
		int			n = strlen(error);

		/* avro-c ends its messages with a newline or a period */
		while (n > 0 && (error[n - 1] == '\n' || error[n - 1] == '.'))
			error[--n] = '\0';
		return error;
	}
	avro_schema_decref(schema);
	return NULL;
}

AvroType *
avro_schema_parse(const char *json, int len, char **error)
{
	SchemaParse ps = {.named = NIL, .fallbacks = NIL, .unchecked = false, .error = NULL, .depth = 0};
	char	   *text = pnstrdup(json, len);
	Jsonb	   *volatile jb = NULL;
	JsonbValue	root;
	AvroType   *t;
	MemoryContext cxt = CurrentMemoryContext;
	char	   *avro_c_error;
	ListCell   *lc;

	/*
	 * avro-c's verdict first; but avro-c does not look for a short name in
	 * no namespace, which Java's library writes and reads (see
	 * lookup_named): its refusal of such a name is overruled below when
	 * this parser finds the type there.  avro-c stopped at that name, so
	 * the parser then checks what avro-c would have after it (names of
	 * types and fields, types defined twice, empty enums) itself.
	 */
	avro_c_error = avro_c_check(json, len);
	if (avro_c_error != NULL && strncmp(avro_c_error, AVRO_C_UNKNOWN_TYPE, strlen(AVRO_C_UNKNOWN_TYPE)) != 0)
	{
		*error = avro_c_error;
		return NULL;
	}

	/* avro-c has read it as JSON: jsonb_in fails only on an encoding error */
	PG_TRY();
	{
		jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();

		/*
		 * The schema's verdict is kept for as long as the query runs: only
		 * what the text is (an encoding error) may decide it, not out of
		 * memory or a cancel, which another try would not meet.
		 */
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		*error = edata->message;
	}
	PG_END_TRY();
	if (jb == NULL)
		return NULL;

	if (JB_ROOT_IS_SCALAR(jb))
		root = *getIthJsonbValueFromContainer(&jb->root, 0);
	else
	{
		root.type = jbvBinary;
		root.val.binary.data = &jb->root;
		root.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	}
	ps.unchecked = avro_c_error != NULL;
	t = parse_type(&ps, &root, NULL);
	if (avro_c_error != NULL)
	{
		/* is avro-c's unknown name one this parser found in no namespace? */
		foreach(lc, ps.fallbacks)
			if (strcmp(avro_c_error + strlen(AVRO_C_UNKNOWN_TYPE), lfirst(lc)) == 0)
				break;
		if (lc == NULL)
		{
			*error = avro_c_error;
			return NULL;
		}
	}
	*error = t == NULL ? ps.error : NULL;
	return t;
}
