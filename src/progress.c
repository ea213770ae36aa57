/*-------------------------------------------------------------------------
 *
 * progress.c
 *	  What users see of batches: the rows of streamwin.progress_log (which
 *	  users read through the view streamwin.progress, each role those of
 *	  its own queries), the query's status in streamwin.query_catalog, and
 *	  failures.
 *
 * A successful batch records its progress row and clears the query's
 * failed status inside the batch transaction.  A failed batch has been
 * rolled back, so its error is recorded by progress_record_failure in a
 * transaction of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "progress.h"

/*
 * progress_record
 *		Write the batch's progress row, trim old ones, and advance the
 *		query's batch id and watermark.  Inside the batch transaction.
 */
void
progress_record(QueryRunner *r, BatchStats *s)
{
	Oid			types[15] = {TEXTOID, INT8OID, TIMESTAMPTZOID, FLOAT8OID, INT8OID, FLOAT8OID,
	FLOAT8OID, INT8OID, INT8OID, INT8OID, TIMESTAMPTZOID, TEXTOID, INT4OID, INT8OID, TEXTOID};
	Datum		args[15];
	char		nulls[15];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(r->query->name);
	args[1] = Int64GetDatum(s->batch_id);
	args[2] = TimestampTzGetDatum(s->started_at);
	args[3] = Float8GetDatum(s->duration_ms);
	args[4] = Int64GetDatum(s->input_rows);
	args[5] = Float8GetDatum(s->input_rows_per_second);
	args[6] = Float8GetDatum(s->processed_rows_per_second);
	args[7] = Int64GetDatum(s->late_rows);
	args[8] = Int64GetDatum(s->dead_letters);
	args[9] = Int64GetDatum(s->state_rows);
	args[10] = TimestampTzGetDatum(s->watermark);
	nulls[10] = s->has_watermark ? ' ' : 'n';
	args[11] = CStringGetTextDatum(s->offsets_json);
	args[12] = Int32GetDatum(streamwin_progress_retention);
	args[13] = Int64GetDatum(s->duplicates);
	args[14] = s->missing_keys_json ? CStringGetTextDatum(s->missing_keys_json) : (Datum) 0;
	nulls[14] = s->missing_keys_json ? ' ' : 'n';

	SPI_connect();
	catalog_exec("INSERT INTO streamwin.progress_log (query, batch_id, started_at, duration_ms, "
				 "input_rows, input_rows_per_second, processed_rows_per_second, "
				 "late_rows_dropped, dead_letters, state_rows, watermark, offsets, duplicates_dropped, "
				 "missing_keys) "
				 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $14, $15::jsonb)",
				 15, types, args, nulls, 0);
	types[2] = INT4OID;
	args[2] = args[12];
	/* batches after the checkpoint stay: crash recovery replays them */
	catalog_exec("DELETE FROM streamwin.progress_log WHERE query = $1 AND batch_id <= $2 - $3 "
				 "AND batch_id < (SELECT coalesce(checkpoint_batch_id, 0) "
				 "FROM streamwin.query_catalog WHERE name = $1)",
				 3, types, args, NULL, 0);

	types[0] = INT4OID;
	args[0] = Int32GetDatum(r->query_id);
	types[2] = TIMESTAMPTZOID;
	args[2] = args[10];
	memset(nulls, ' ', sizeof(nulls));
	nulls[2] = s->has_watermark ? ' ' : 'n';
	catalog_exec("UPDATE streamwin.query_catalog SET last_batch_id = $2, state_batch_id = $2, "
				 "last_batch_at = pg_catalog.clock_timestamp(), watermark = $3, "
				 "status = 'ok', consecutive_failures = 0 WHERE query_id = $1",
				 3, types, args, nulls, 0);
	SPI_finish();
}

/*
 * progress_clear_failure
 *		A batch succeeded (perhaps with nothing to do, so without a progress
 *		row): the query is no longer failing.  Inside the batch transaction.
 */
void
progress_clear_failure(int32 query_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(query_id)};

	SPI_connect();
	catalog_exec("UPDATE streamwin.query_catalog SET status = 'ok', consecutive_failures = 0, "
				 "last_batch_at = pg_catalog.clock_timestamp() "
				 "WHERE query_id = $1 AND status = 'failed'",
				 1, types, args, NULL, 0);
	SPI_finish();
}

/*
 * progress_record_failure
 *		Record a failed batch on the query.  Must run in a transaction of its
 *		own, after the batch's has been rolled back.  Returns quietly if the
 *		query is gone.
 */
void
progress_record_failure(int32 query_id, const char *message)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		args[2] = {Int32GetDatum(query_id), CStringGetTextDatum(message)};
	RoleSwitch	role;

	SPI_connect();
	catalog_enter(&role);
	if (SPI_execute_with_args("UPDATE streamwin.query_catalog SET status = 'failed', last_error = $2, "
							  "last_error_at = pg_catalog.clock_timestamp(), "
							  "consecutive_failures = consecutive_failures + 1 WHERE query_id = $1",
							  2, types, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update streamwin.query_catalog");
	catalog_leave(&role);
	SPI_finish();
}
