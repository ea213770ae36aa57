/*-------------------------------------------------------------------------
 *
 * catalog_log.c
 *	  Every statement on progress_log, dead_letter_log and late_row_log
 *	  (see catalog_log.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/timestamp.h"

#include "catalog_access.h"
#include "catalog_log.h"

/* stage_ms's keys, in BatchStage's order */
static const char *const stage_names[NUM_BATCH_STAGES] = {
	"begin", "fetch", "decode", "apply", "emit", "finish", "checkpoint"
};

/* A batch's stage times as a JSON object of milliseconds. */
static char *
stage_ms_json(const BatchStats *row)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < NUM_BATCH_STAGES; i++)
		appendStringInfo(&buf, "%s\"%s\": %.3f", i == 0 ? "{" : ", ", stage_names[i], row->stage_ms[i]);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

void
catalog_log_progress(const char *query, const BatchStats *row, int retention,
					 bool replayed_after_crash)
{
	Oid			types[17] = {TEXTOID, INT8OID, TIMESTAMPTZOID, FLOAT8OID, INT8OID, FLOAT8OID,
		FLOAT8OID, INT8OID, INT8OID, INT8OID, TIMESTAMPTZOID, TEXTOID, INT4OID, INT8OID, TEXTOID, INT8OID,
	TEXTOID};
	Datum		args[17];
	char		nulls[17];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(query);
	args[1] = Int64GetDatum(row->batch_id);
	args[2] = TimestampTzGetDatum(row->started_at);
	args[3] = Float8GetDatum(row->duration_ms);
	args[4] = Int64GetDatum(row->input_rows);
	args[5] = Float8GetDatum(row->input_rows_per_second);
	args[6] = Float8GetDatum(row->processed_rows_per_second);
	args[7] = Int64GetDatum(row->late_rows);
	args[8] = Int64GetDatum(row->dead_letters);
	args[9] = Int64GetDatum(row->state_rows);
	args[10] = TimestampTzGetDatum(row->watermark);
	nulls[10] = row->has_watermark ? ' ' : 'n';
	args[11] = CStringGetTextDatum(row->offsets_json);
	args[12] = Int32GetDatum(retention);
	args[13] = Int64GetDatum(row->duplicates);
	args[14] = row->missing_keys_json ? CStringGetTextDatum(row->missing_keys_json) : (Datum) 0;
	nulls[14] = row->missing_keys_json ? ' ' : 'n';
	args[15] = Int64GetDatum(row->late_retractions);
	args[16] = CStringGetTextDatum(stage_ms_json(row));

	SPI_connect();
	catalog_exec("INSERT INTO streamwin.progress_log (query, batch_id, started_at, duration_ms, "
				 "input_rows, input_rows_per_second, processed_rows_per_second, "
				 "late_rows_dropped, dead_letters, state_rows, watermark, offsets, duplicates_dropped, "
				 "missing_keys, late_retractions_dropped, stage_ms) "
				 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $14, $15::jsonb, $16, "
				 "$17::jsonb)",
				 17, types, args, nulls, 0);
	types[2] = INT4OID;
	args[2] = args[12];
	types[3] = BOOLOID;
	args[3] = BoolGetDatum(replayed_after_crash);

	/*
	 * Batches after the checkpoint stay: crash recovery replays them.  A
	 * query without state has no checkpoint and replays nothing.
	 */
	catalog_exec("DELETE FROM streamwin.progress_log WHERE query = $1 AND batch_id <= $2 - $3 "
				 "AND (NOT $4 OR batch_id < (SELECT coalesce(checkpoint_batch_id, 0) "
				 "FROM streamwin.query_catalog WHERE name = $1))",
				 4, types, args, NULL, 0);
	SPI_finish();
}

bool
catalog_recorded_watermark(int32 query_id, int64 batch_id, TimestampTz *wm)
{
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		args[2] = {Int32GetDatum(query_id), Int64GetDatum(batch_id)};
	bool		isnull = true;
	Datum		d = (Datum) 0;

	SPI_connect();
	catalog_exec("SELECT CASE WHEN q.checkpoint_batch_id = $2 THEN q.checkpoint_watermark "
				 "ELSE (SELECT p.watermark FROM streamwin.progress_log p "
				 "      WHERE p.query = q.name AND p.batch_id = $2) END "
				 "FROM streamwin.query_catalog q WHERE q.query_id = $1",
				 2, types, args, NULL, 1);
	if (SPI_processed == 1)
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	/* read before SPI_finish frees the row (by reference on 32 bits) */
	if (!isnull)
		*wm = DatumGetTimestampTz(d);
	SPI_finish();
	return !isnull;
}

bool
catalog_progress_column(int32 query_id, int64 batch_id, const char *column, Datum *value)
{
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		args[2] = {Int32GetDatum(query_id), Int64GetDatum(batch_id)};
	MemoryContext caller = CurrentMemoryContext;
	const char *sql;
	bool		found;

	/* one constant statement per column: catalog_exec keeps its plan */
	if (strcmp(column, "offsets") == 0)
		sql = "SELECT p.offsets FROM streamwin.progress_log p JOIN streamwin.query_catalog q "
			"ON p.query = q.name WHERE q.query_id = $1 AND p.batch_id = $2";
	else if (strcmp(column, "started_at") == 0)
		sql = "SELECT p.started_at FROM streamwin.progress_log p JOIN streamwin.query_catalog q "
			"ON p.query = q.name WHERE q.query_id = $1 AND p.batch_id = $2";
	else if (strcmp(column, "state_rows") == 0)
		sql = "SELECT p.state_rows FROM streamwin.progress_log p JOIN streamwin.query_catalog q "
			"ON p.query = q.name WHERE q.query_id = $1 AND p.batch_id = $2";
	else
		elog(ERROR, "streamwin: no progress column \"%s\"", column);
	SPI_connect();
	catalog_exec(sql, 2, types, args, NULL, 1);
	found = SPI_processed == 1;
	if (found)
	{
		bool		isnull;
		Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, 0);
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext spi = MemoryContextSwitchTo(caller);

		*value = datumCopy(d, att->attbyval, att->attlen);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return found;
}

void
catalog_log_rejected(char status, const char *query, const char *source,
					 Datum parts, Datum offsets, Datum payloads, Datum details,
					 TimestampTz watermark)
{
	Oid			types[7] = {TEXTOID, INT4ARRAYOID, INT8ARRAYOID, BYTEAARRAYOID,
	status == 'd' ? TEXTARRAYOID : TIMESTAMPTZARRAYOID, TIMESTAMPTZOID, TEXTOID};
	Datum		args[7];

	args[0] = CStringGetTextDatum(status == 'd' ? source : query);
	args[1] = parts;
	args[2] = offsets;
	args[3] = payloads;
	args[4] = details;
	args[5] = TimestampTzGetDatum(watermark);
	args[6] = CStringGetTextDatum(source);
	/* keyed by position: once per message, however many queries read it */
	SPI_connect();
	catalog_exec(status == 'd' ?
				 "INSERT INTO streamwin.dead_letter_log (source, partition, \"offset\", payload, error) "
				 "SELECT $1, * FROM unnest($2, $3, $4, $5) ON CONFLICT DO NOTHING" :
				 "INSERT INTO streamwin.late_row_log (query, source, partition, \"offset\", payload, event_time, watermark) "
				 "SELECT $1, $7, *, $6 FROM unnest($2, $3, $4, $5) ON CONFLICT DO NOTHING",
				 status == 'd' ? 5 : 7, types, args, NULL, 0);
	SPI_finish();
}
