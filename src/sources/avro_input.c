/*-------------------------------------------------------------------------
 *
 * avro_input.c
 *	  The writer schemas of an Avro source's batches: option "avro_schema",
 *	  or the schemas of a schema registry by the ids in the messages.
 *
 * A source with option "schema_registry" reads Confluent's wire format:
 * each message names its writer schema by id.  Before a batch is decoded,
 * each id its messages name that the query's decoder does not know yet is
 * looked up in streamwin.avro_schemas, and only then asked of the registry
 * (schema_registry.c), once per id per batch.  A schema the registry gives
 * is stored in the batch's transaction.  If that batch fails, the decoder
 * keeps the schema but the row is gone: such schemas are stored again with
 * every later batch until one finds the row there (committed), so that a
 * restart never needs the registry for a schema a committed batch used.
 *
 * The registry failing fails the batch (it is retried with the worker's
 * backoff); an id it does not have makes that batch's messages of the id
 * dead letters, and is asked for again in the next batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "avro_input.h"
#include "catalog_avro.h"
#include "jsonb_util.h"
#include "schema_registry.h"

/* An id the registry could not give in this batch, and why */
typedef struct MissingSchema
{
	int32		id;
	char	   *reason;
} MissingSchema;

/* A schema from the registry, not yet seen committed in the catalog */
typedef struct UnstoredSchema
{
	int32		id;
	char	   *schema;
} UnstoredSchema;

struct AvroSchemas
{
	MemoryContext cxt;
	int32		source_id;
	char	   *url;
	char	   *user;
	char	   *password;
	List	   *unstored;		/* UnstoredSchema * */
	List	   *missing;		/* MissingSchema: ids the registry could not
								 * give in this batch */
};

char *
avro_option_schema(Jsonb *options)
{
	JsonbValue *v = option_value(options, "avro_schema");

	if (v == NULL)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type == jbvBinary)
		return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	return NULL;
}

AvroSchemas *
avro_input_create(SourceInfo *src, MessageDecoder *decoder)
{
	char	   *plain = avro_option_schema(src->options);
	AvroSchemas *as;

	if (plain != NULL)
	{
		/* checked at creation; an error here makes every message a dead letter */
		decoder_avro_set_plain_schema(decoder, plain, strlen(plain));
		return NULL;
	}
	as = palloc0(sizeof(AvroSchemas));
	as->cxt = CurrentMemoryContext;
	as->source_id = src->source_id;
	as->url = jsonb_get_text(src->options, "schema_registry");
	as->user = jsonb_get_text(src->options, "schema_registry_user");
	as->password = jsonb_get_text(src->options, "schema_registry_password");
	if (as->url == NULL)
		elog(ERROR, "Avro source \"%s\" has neither avro_schema nor schema_registry", src->name);
	return as;
}

/*
 * The schema of id from the registry, kept in the catalog and in as; an id
 * it lacks is asked for once in a batch, whichever decoder (the values',
 * the keys') meets it.
 */
static void
fetch_schema(AvroSchemas *as, MessageDecoder *decoder, int32 id)
{
	char	   *reason = NULL;
	char	   *schema;
	UnstoredSchema *u;
	MemoryContext old;
	ListCell   *lc;

	/* an id the registry could not give this batch: not asked again */
	foreach(lc, as->missing)
	{
		MissingSchema *m = lfirst(lc);

		if (m->id == id)
		{
			decoder_avro_add_missing(decoder, id, m->reason);
			return;
		}
	}
	schema = schema_registry_fetch(as->url, as->user, as->password, id, &reason);
	if (schema == NULL)
	{
		MissingSchema *m;

		decoder_avro_add_missing(decoder, id, reason);
		old = MemoryContextSwitchTo(as->cxt);
		m = palloc(sizeof(MissingSchema));
		m->id = id;
		m->reason = pstrdup(reason);
		as->missing = lappend(as->missing, m);
		MemoryContextSwitchTo(old);
		return;
	}
	decoder_avro_add_schema(decoder, id, schema, strlen(schema));
	catalog_avro_store(as->source_id, id, schema);
	old = MemoryContextSwitchTo(as->cxt);
	u = palloc(sizeof(UnstoredSchema));
	u->id = id;
	u->schema = pstrdup(schema);
	as->unstored = lappend(as->unstored, u);
	MemoryContextSwitchTo(old);
}

void
avro_input_begin_batch(AvroSchemas *as)
{
	ListCell   *lc;

	foreach(lc, as->missing)
		pfree(((MissingSchema *) lfirst(lc))->reason);
	list_free_deep(as->missing);
	as->missing = NIL;

	/* schemas a failed batch stored: again, until found committed */
	foreach(lc, as->unstored)
	{
		UnstoredSchema *u = lfirst(lc);

		if (!catalog_avro_store(as->source_id, u->id, u->schema))
		{
			pfree(u->schema);
			pfree(u);
			as->unstored = foreach_delete_current(as->unstored, lc);
		}
	}
}

/* a header is read in a few cycles: the misses need more messages ahead */
#define AVRO_PREPARE_PREFETCH_DISTANCE 16

void
avro_input_prepare(AvroSchemas *as, MessageDecoder *decoder, SourceRow *rows, int n, bool keys)
{
	int32		last = 0;
	bool		have_last = false;

	decoder_avro_forget_missing(decoder);

	for (int i = 0; i < n; i++)
	{
		int32		id;
		char	   *schema;

		/* the first read of each payload: ask for it ahead (as decoding does) */
		if (i + AVRO_PREPARE_PREFETCH_DISTANCE < n)
			__builtin_prefetch(keys ? rows[i + AVRO_PREPARE_PREFETCH_DISTANCE].key :
							   rows[i + AVRO_PREPARE_PREFETCH_DISTANCE].payload);
		if (!(keys ? decoder_avro_schema_id(rows[i].key, rows[i].keylen, &id) :
			  decoder_avro_schema_id(rows[i].payload, rows[i].len, &id)) ||
			(have_last && id == last))
			continue;
		/* runs of one id are the rule: a lookup per run, not per message */
		last = id;
		have_last = true;
		if (decoder_avro_has_schema(decoder, id))
			continue;
		schema = catalog_avro_schema(as->source_id, id);
		if (schema != NULL)
			decoder_avro_add_schema(decoder, id, schema, strlen(schema));
		else
			fetch_schema(as, decoder, id);
	}
}

void
avro_check_options(Jsonb *options, SourceFormat format, TupleDesc desc,
				   const SourceMetadata *meta, bool debezium)
{
	JsonbValue *schema_v = option_value(options, "avro_schema");
	JsonbValue *url_v = option_value(options, "schema_registry");
	char	   *user = jsonb_get_text(options, "schema_registry_user");
	char	   *password = jsonb_get_text(options, "schema_registry_password");

	if (format != SOURCE_FORMAT_AVRO)
	{
		if (schema_v != NULL || url_v != NULL || user != NULL || password != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("options \"avro_schema\" and \"schema_registry\" need format \"avro\""),
					 errhint("Create the source with format => 'avro'.")));
		return;
	}
	if ((schema_v == NULL) == (url_v == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(schema_v == NULL ?
						"format \"avro\" needs option \"schema_registry\" or \"avro_schema\"" :
						"options \"schema_registry\" and \"avro_schema\" exclude each other"),
				 errdetail("Messages in Confluent's wire format name their writer schema, which a schema registry gives; "
						   "plain Avro messages are all of one writer schema, given by option \"avro_schema\"."),
				 errhint("Add {\"schema_registry\": \"http://registry:8081\"} or {\"avro_schema\": {\"type\": \"record\", ...}}.")));
	if (url_v != NULL)
	{
		if (url_v->type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"schema_registry\" must be a string"),
					 errhint("Give an http or https URL, for example \"http://registry:8081\".")));
		schema_registry_check_url(jsonb_get_text(options, "schema_registry"));
	}
	if (password != NULL && user == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"schema_registry_password\" needs option \"schema_registry_user\"")));
	if ((user != NULL || password != NULL) && url_v == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"schema_registry_user\" needs option \"schema_registry\"")));
	if (schema_v != NULL)
	{
		char	   *json = avro_option_schema(options);
		MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "streamwin Avro check",
												  ALLOCSET_DEFAULT_SIZES);
		MemoryContext old = MemoryContextSwitchTo(cxt);
		const char *error;
		MessageDecoder *decoder;

		if (json == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"avro_schema\" must be an Avro schema"),
					 errhint("Give the schema as JSON, for example {\"type\": \"record\", \"name\": \"r\", \"fields\": [...]}.")));
		error = avro_schema_error(json, strlen(json));
		if (error != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"avro_schema\" is not a valid Avro schema"),
					 errdetail("%s.", error)));
		decoder = decoder_create(format, desc, meta);
		if (debezium)
			decoder_avro_set_debezium(decoder);
		error = decoder_avro_set_plain_schema(decoder, json, strlen(json));
		if (error != NULL)
		{
			char	   *detail = psprintf("%s.", error);

			detail[0] = pg_toupper((unsigned char) detail[0]);
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("the columns of the source cannot hold the messages of option \"avro_schema\""),
					 errdetail("%s", detail),
					 debezium && strstr(error, "Debezium") != NULL ?
					 errhint("Give the writer schema of the Debezium change events (their \"Envelope\" record).") :
					 errhint("Declare the column with a type that holds the field's values, or json or jsonb.")));
		}
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
	}
}
