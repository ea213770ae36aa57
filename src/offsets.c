/*-------------------------------------------------------------------------
 *
 * offsets.c
 *	  Where each query is in its source, and its event-time watermark.
 *
 * The next position of every partition lives in streamwin.query_offsets
 * and is written in the batch's own transaction, so results and positions
 * commit together or not at all.  Every batch starts from the stored
 * positions: the reader re-positions itself when it stands elsewhere (a
 * failed batch, reset_query, another session's run_batch), so nothing is
 * skipped or read twice.
 *
 * Watermark (Flink's model; with one partition exactly Spark's): per
 * partition, the largest event time seen minus the delay.  The query's
 * watermark is the minimum over partitions that are not idle, where idle
 * means caught up and silent for idle_timeout; when every partition is
 * idle it is the largest partition watermark.  It never moves backwards.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "offsets.h"

void
offsets_load(QueryRunner *r)
{
	SourceReader *rd = r->reader;
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(r->query_id)};

	for (int i = 0; i < rd->nparts; i++)
	{
		PartitionState *p = &rd->parts[i];

		p->has_position = false;
		p->next.offset = 0;
		p->next.index = 0;
		p->has_max_event_time = false;
		p->last_data_at = GetCurrentTimestamp();
		p->batch_rows = 0;
		p->batch_has_max = false;
	}

	SPI_connect();
	catalog_exec("SELECT partition, next_offset, max_event_time, last_data_at, next_index "
				 "FROM streamwin.query_offsets WHERE query_id = $1",
				 1, argtypes, args, NULL, 0);
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		HeapTuple	tup = SPI_tuptable->vals[row];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int			idx = source_part_index(rd, DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull)));
		PartitionState *p;
		Datum		d;

		if (idx < 0)
			continue;			/* no longer read by this query */
		p = &rd->parts[idx];
		p->has_position = true;
		p->next.offset = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		d = SPI_getbinval(tup, desc, 3, &isnull);
		p->has_max_event_time = !isnull;
		if (!isnull)
			p->max_event_time = DatumGetTimestampTz(d);
		p->last_data_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
		p->next.index = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	}
	SPI_finish();
}

void
offsets_position(QueryRunner *r)
{
	SourceReader *rd = r->reader;
	bool		started = false;

	for (int i = 0; i < rd->nparts; i++)
		started = started || rd->parts[i].has_position;
	for (int i = 0; i < rd->nparts; i++)
	{
		PartitionState *p = &rd->parts[i];

		if (p->has_position)
			continue;
		p->next = rd->ops->start_position(rd, p, started);
		p->has_position = true;
	}
	rd->ops->seek(rd);
}

bool
offsets_compute_watermark(QueryRunner *r, bool has_old, TimestampTz old,
						  TimestampTz now, TimestampTz *wm)
{
	bool		any_active = false;
	bool		active_unknown = false;
	bool		has_min = false;
	bool		has_max = false;
	TimestampTz min_active = 0;
	TimestampTz max_all = 0;
	int64		delay = r->query->watermark_delay_us;
	TimestampTz candidate;
	bool		has_candidate;

	SourceReader *rd = r->reader;

	for (int i = 0; i < rd->nparts; i++)
	{
		PartitionState *p = &rd->parts[i];
		bool		idle;

		if (p->batch_rows > 0)
			p->last_data_at = now;
		if (p->batch_has_max &&
			(!p->has_max_event_time || p->batch_max_event_time > p->max_event_time))
		{
			p->max_event_time = p->batch_max_event_time;
			p->has_max_event_time = true;
		}

		idle = rd->ops->at_end(rd, p) &&
			now - p->last_data_at >= r->query->idle_timeout_us;
		if (p->has_max_event_time && (!has_max || p->max_event_time > max_all))
		{
			max_all = p->max_event_time;
			has_max = true;
		}
		if (idle)
			continue;
		any_active = true;
		if (!p->has_max_event_time)
			active_unknown = true;
		else if (!has_min || p->max_event_time < min_active)
		{
			min_active = p->max_event_time;
			has_min = true;
		}
	}

	if (any_active)
	{
		/* an active partition that has delivered nothing holds it back */
		has_candidate = !active_unknown && has_min;
		candidate = min_active;
	}
	else
	{
		has_candidate = has_max;
		candidate = max_all;
	}
	if (has_candidate)
		candidate -= delay;

	if (has_old && (!has_candidate || candidate < old))
	{
		*wm = old;
		return true;
	}
	*wm = candidate;
	return has_candidate;
}

void
offsets_store(QueryRunner *r)
{
	SourceReader *rd = r->reader;
	int			nparts = rd->nparts;
	Datum	   *parts = palloc(sizeof(Datum) * nparts);
	Datum	   *next = palloc(sizeof(Datum) * nparts);
	Datum	   *maxts = palloc(sizeof(Datum) * nparts);
	bool	   *maxts_null = palloc(sizeof(bool) * nparts);
	Datum	   *seen = palloc(sizeof(Datum) * nparts);
	Datum	   *high = palloc(sizeof(Datum) * nparts);
	bool	   *high_null = palloc(sizeof(bool) * nparts);
	Datum	   *index = palloc(sizeof(Datum) * nparts);
	int			dims[1] = {nparts};
	int			lbs[1] = {1};
	Oid			argtypes[7] = {INT4OID, INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID,
	TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID};
	Datum		args[7];

	for (int i = 0; i < nparts; i++)
	{
		PartitionState *p = &rd->parts[i];
		int64		hw = rd->ops->end_offset(rd, p);

		parts[i] = Int32GetDatum(p->partition);
		next[i] = Int64GetDatum(p->next.offset);
		maxts[i] = TimestampTzGetDatum(p->max_event_time);
		maxts_null[i] = !p->has_max_event_time;
		seen[i] = TimestampTzGetDatum(p->last_data_at);
		high[i] = Int64GetDatum(hw);
		high_null[i] = hw < 0;
		index[i] = Int64GetDatum(p->next.index);
	}
	args[0] = Int32GetDatum(r->query_id);
	args[1] = PointerGetDatum(construct_array(parts, nparts, INT4OID, 4, true, TYPALIGN_INT));
	args[2] = PointerGetDatum(construct_array(next, nparts, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[3] = PointerGetDatum(construct_md_array(maxts, maxts_null, 1, dims, lbs, TIMESTAMPTZOID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[4] = PointerGetDatum(construct_array(seen, nparts, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	args[5] = PointerGetDatum(construct_md_array(high, high_null, 1, dims, lbs, INT8OID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[6] = PointerGetDatum(construct_array(index, nparts, INT8OID, 8, FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));

	SPI_connect();
	catalog_exec("INSERT INTO streamwin.query_offsets AS o "
							  "(query_id, partition, next_offset, max_event_time, last_data_at, high_watermark, "
							  " next_index) "
							  "SELECT $1, * FROM unnest($2, $3, $4, $5, $6, $7) "
							  "ON CONFLICT (query_id, partition) DO UPDATE SET "
							  "next_offset = EXCLUDED.next_offset, max_event_time = EXCLUDED.max_event_time, "
							  "last_data_at = EXCLUDED.last_data_at, "
							  "high_watermark = COALESCE(EXCLUDED.high_watermark, o.high_watermark), "
							  "next_index = EXCLUDED.next_index",
							  7, argtypes, args, NULL, 0);
	SPI_finish();
}

char *
offsets_json(QueryRunner *r)
{
	StringInfoData buf;

	initStringInfo(&buf);
	r->reader->ops->positions_json(r->reader, &buf);
	return buf.data;
}
