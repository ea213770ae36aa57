/*-------------------------------------------------------------------------
 *
 * catalog_positions.c
 *	  Every statement on query_offsets, query_checkpoints and state_alive
 *	  (see catalog_positions.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "catalog_access.h"
#include "catalog_positions.h"

/* A constant statement whose only argument is the query's id. */
static void
run_for_query(const char *sql, int32 query_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(query_id)};

	SPI_connect();
	catalog_exec(sql, 1, types, args, NULL, 0);
	SPI_finish();
}

StoredOffset *
catalog_load_offsets(int32 query_id, int *n)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(query_id)};
	MemoryContext caller = CurrentMemoryContext;
	StoredOffset *offsets;

	SPI_connect();
	catalog_exec("SELECT source_index, partition, next_offset, max_event_time, last_data_at, next_index "
				 "FROM streamwin.query_offsets WHERE query_id = $1",
				 1, types, args, NULL, 0);
	*n = (int) SPI_processed;
	offsets = MemoryContextAllocZero(caller, sizeof(StoredOffset) * Max(*n, 1));
	for (int row = 0; row < *n; row++)
	{
		HeapTuple	tup = SPI_tuptable->vals[row];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		StoredOffset *o = &offsets[row];
		bool		isnull;
		Datum		d;

		o->source_index = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		o->partition = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		o->next_offset = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		d = SPI_getbinval(tup, desc, 4, &isnull);
		o->has_max_event_time = !isnull;
		if (!isnull)
			o->max_event_time = DatumGetTimestampTz(d);
		o->last_data_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
		o->next_index = DatumGetInt64(SPI_getbinval(tup, desc, 6, &isnull));
	}
	SPI_finish();
	return offsets;
}

void
catalog_store_offsets(int32 query_id, const StoredOffset *offsets, int n)
{
	Datum	   *sources = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *parts = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *next = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *maxts = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *maxts_null = palloc(sizeof(bool) * Max(n, 1));
	Datum	   *seen = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *high = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *high_null = palloc(sizeof(bool) * Max(n, 1));
	Datum	   *index = palloc(sizeof(Datum) * Max(n, 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Oid			types[8] = {INT4OID, INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID,
	TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT4ARRAYOID};
	Datum		args[8];

	for (int i = 0; i < n; i++)
	{
		const StoredOffset *o = &offsets[i];

		sources[i] = Int32GetDatum(o->source_index);
		parts[i] = Int32GetDatum(o->partition);
		next[i] = Int64GetDatum(o->next_offset);
		maxts[i] = TimestampTzGetDatum(o->max_event_time);
		maxts_null[i] = !o->has_max_event_time;
		seen[i] = TimestampTzGetDatum(o->last_data_at);
		high[i] = Int64GetDatum(o->high_watermark);
		high_null[i] = !o->has_high_watermark;
		index[i] = Int64GetDatum(o->next_index);
	}
	args[0] = Int32GetDatum(query_id);
	args[1] = PointerGetDatum(construct_array(parts, n, INT4OID, 4, true, TYPALIGN_INT));
	args[2] = PointerGetDatum(construct_array(next, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[3] = PointerGetDatum(construct_md_array(maxts, maxts_null, 1, dims, lbs, TIMESTAMPTZOID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[4] = PointerGetDatum(construct_array(seen, n, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	args[5] = PointerGetDatum(construct_md_array(high, high_null, 1, dims, lbs, INT8OID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[6] = PointerGetDatum(construct_array(index, n, INT8OID, 8, FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	args[7] = PointerGetDatum(construct_array(sources, n, INT4OID, 4, true, TYPALIGN_INT));

	SPI_connect();
	catalog_exec("INSERT INTO streamwin.query_offsets AS o "
				 "(query_id, partition, next_offset, max_event_time, last_data_at, high_watermark, "
				 " next_index, source_index) "
				 "SELECT $1, * FROM unnest($2, $3, $4, $5, $6, $7, $8) "
				 "ON CONFLICT (query_id, source_index, partition) DO UPDATE SET "
				 "next_offset = EXCLUDED.next_offset, max_event_time = EXCLUDED.max_event_time, "
				 "last_data_at = EXCLUDED.last_data_at, "
				 "high_watermark = COALESCE(EXCLUDED.high_watermark, o.high_watermark), "
				 "next_index = EXCLUDED.next_index",
				 8, types, args, NULL, 0);
	SPI_finish();
}

void
catalog_restore_offsets(int32 query_id)
{
	run_for_query("DELETE FROM streamwin.query_offsets WHERE query_id = $1", query_id);
	run_for_query("INSERT INTO streamwin.query_offsets "
				  "(query_id, source_index, partition, next_offset, next_index, max_event_time, last_data_at) "
				  "SELECT query_id, source_index, partition, next_offset, next_index, max_event_time, last_data_at "
				  "FROM streamwin.query_checkpoints WHERE query_id = $1", query_id);
}

void
catalog_checkpoint_offsets(int32 query_id)
{
	run_for_query("DELETE FROM streamwin.query_checkpoints WHERE query_id = $1", query_id);
	run_for_query("INSERT INTO streamwin.query_checkpoints "
				  "(query_id, source_index, partition, next_offset, next_index, max_event_time, last_data_at) "
				  "SELECT query_id, source_index, partition, next_offset, next_index, max_event_time, last_data_at "
				  "FROM streamwin.query_offsets WHERE query_id = $1", query_id);
}

void
catalog_checkpoint_move_offsets(int32 query_id)
{
	run_for_query("UPDATE streamwin.query_checkpoints c SET next_offset = o.next_offset, "
				  "next_index = o.next_index "
				  "FROM streamwin.query_offsets o "
				  "WHERE o.query_id = c.query_id AND o.source_index = c.source_index "
				  "AND o.partition = c.partition AND c.query_id = $1", query_id);
}

bool
catalog_state_alive(int32 query_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(query_id)};
	bool		alive;

	SPI_connect();
	catalog_exec("SELECT 1 FROM streamwin.state_alive WHERE query_id = $1",
				 1, types, args, NULL, 1);
	alive = SPI_processed > 0;
	SPI_finish();
	return alive;
}

void
catalog_mark_state_alive(int32 query_id)
{
	run_for_query("INSERT INTO streamwin.state_alive VALUES ($1) ON CONFLICT DO NOTHING", query_id);
}
