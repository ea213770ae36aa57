/*-------------------------------------------------------------------------
 *
 * catalog_avro.c
 *	  Every statement on streamwin.avro_schemas: the writer schemas a
 *	  schema registry gave for a source, by schema id.
 *
 * A schema is stored in the transaction of the batch that first fetched
 * it, so that what a committed batch decoded can always be decoded again
 * (a replay, a restart, another query of the source) without the
 * registry.  A schema id names one schema forever in a registry, so a row
 * is never updated.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "catalog_access.h"
#include "catalog_avro.h"

char *
catalog_avro_schema(int32 source_id, int32 schema_id)
{
	Oid			types[2] = {INT4OID, INT4OID};
	Datum		args[2] = {Int32GetDatum(source_id), Int32GetDatum(schema_id)};
	MemoryContext cxt = CurrentMemoryContext;
	char	   *schema = NULL;

	SPI_connect();
	catalog_exec("SELECT schema FROM streamwin.avro_schemas WHERE source_id = $1 AND schema_id = $2",
				 2, types, args, NULL, 1);
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext old = MemoryContextSwitchTo(cxt);

		schema = TextDatumGetCString(d);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return schema;
}

bool
catalog_avro_store(int32 source_id, int32 schema_id, const char *schema)
{
	Oid			types[3] = {INT4OID, INT4OID, TEXTOID};
	Datum		args[3] = {Int32GetDatum(source_id), Int32GetDatum(schema_id),
	CStringGetTextDatum(schema)};
	bool		inserted;

	SPI_connect();
	catalog_exec("INSERT INTO streamwin.avro_schemas (source_id, schema_id, schema) "
				 "VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
				 3, types, args, NULL, 0);
	inserted = SPI_processed == 1;
	SPI_finish();
	return inserted;
}
