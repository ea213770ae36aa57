/*-------------------------------------------------------------------------
 *
 * offsets.c
 *	  Where each query is in its source, and its event-time watermark.
 *
 * The next position of every partition of every source of the query
 * lives in streamwin.query_offsets and is written in the batch's own
 * transaction, so results and positions
 * commit together or not at all.  Every batch starts from the stored
 * positions: the reader re-positions itself when it stands elsewhere (a
 * failed batch, reset_query, another session's run_batch), so nothing is
 * skipped or read twice.
 *
 * Watermark (Flink's model; with one partition exactly Spark's): per
 * partition, the largest event time seen minus the delay.  The query's
 * watermark is the minimum over the partitions of all its sources that
 * are not idle, where idle
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
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "offsets.h"

void
offsets_load(QueryRunner *r)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(r->query_id)};

	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];

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
	}

	SPI_connect();
	catalog_exec("SELECT source_index, partition, next_offset, max_event_time, last_data_at, next_index "
				 "FROM streamwin.query_offsets WHERE query_id = $1",
				 1, argtypes, args, NULL, 0);
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		HeapTuple	tup = SPI_tuptable->vals[row];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int			s = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		SourceReader *rd;
		int			idx;
		PartitionState *p;
		Datum		d;

		if (s < 0 || s >= r->nreaders)
			continue;
		rd = r->readers[s];
		idx = source_part_index(rd, DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull)));
		if (idx < 0)
			continue;			/* no longer read by this query */
		p = &rd->parts[idx];
		p->has_position = true;
		p->next.offset = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		d = SPI_getbinval(tup, desc, 4, &isnull);
		p->has_max_event_time = !isnull;
		if (!isnull)
			p->max_event_time = DatumGetTimestampTz(d);
		p->last_data_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
		p->next.index = DatumGetInt64(SPI_getbinval(tup, desc, 6, &isnull));
	}
	SPI_finish();
}

void
offsets_position(QueryRunner *r)
{
	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];
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

	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];

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
	int			nparts = 0;
	Datum	   *sources;
	Datum	   *parts;
	Datum	   *next;
	Datum	   *maxts;
	bool	   *maxts_null;
	Datum	   *seen;
	Datum	   *high;
	bool	   *high_null;
	Datum	   *index;
	int			dims[1];
	int			lbs[1] = {1};
	Oid			argtypes[8] = {INT4OID, INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID,
	TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT4ARRAYOID};
	Datum		args[8];
	int			n = 0;

	for (int s = 0; s < r->nreaders; s++)
		nparts += r->readers[s]->nparts;
	sources = palloc(sizeof(Datum) * nparts);
	parts = palloc(sizeof(Datum) * nparts);
	next = palloc(sizeof(Datum) * nparts);
	maxts = palloc(sizeof(Datum) * nparts);
	maxts_null = palloc(sizeof(bool) * nparts);
	seen = palloc(sizeof(Datum) * nparts);
	high = palloc(sizeof(Datum) * nparts);
	high_null = palloc(sizeof(bool) * nparts);
	index = palloc(sizeof(Datum) * nparts);
	dims[0] = nparts;

	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];

		for (int i = 0; i < rd->nparts; i++, n++)
		{
			PartitionState *p = &rd->parts[i];
			int64		hw = rd->ops->end_offset(rd, p);

			sources[n] = Int32GetDatum(s);
			parts[n] = Int32GetDatum(p->partition);
			next[n] = Int64GetDatum(p->next.offset);
			maxts[n] = TimestampTzGetDatum(p->max_event_time);
			maxts_null[n] = !p->has_max_event_time;
			seen[n] = TimestampTzGetDatum(p->last_data_at);
			high[n] = Int64GetDatum(hw);
			high_null[n] = hw < 0;
			index[n] = Int64GetDatum(p->next.index);
		}
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
	args[7] = PointerGetDatum(construct_array(sources, nparts, INT4OID, 4, true, TYPALIGN_INT));

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
				 8, argtypes, args, NULL, 0);
	SPI_finish();
}

/*
 * A query over one source shows that source's positions; a join's are an
 * object with a member per source, under its name.
 */
char *
offsets_json(QueryRunner *r)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (r->nreaders == 1)
		r->readers[0]->ops->positions_json(r->readers[0], &buf);
	else
	{
		appendStringInfoChar(&buf, '{');
		for (int s = 0; s < r->nreaders; s++)
		{
			if (s > 0)
				appendStringInfoString(&buf, ", ");
			escape_json(&buf, r->readers[s]->source->name);
			appendStringInfoString(&buf, ": ");
			r->readers[s]->ops->positions_json(r->readers[s], &buf);
		}
		appendStringInfoChar(&buf, '}');
	}
	return buf.data;
}

/*
 * The positions of source s of the query in a progress record's offsets
 * (as offsets_json wrote them), or NULL if it has none for that source.
 */
Jsonb *
offsets_json_source(QueryRunner *r, Jsonb *offsets, int s)
{
	JsonbValue	key;
	JsonbValue *v;

	if (r->nreaders == 1)
		return offsets;
	key.type = jbvString;
	key.val.string.val = r->readers[s]->source->name;
	key.val.string.len = strlen(key.val.string.val);
	v = findJsonbValueFromContainer(&offsets->root, JB_FOBJECT, &key);
	if (v == NULL || v->type != jbvBinary)
		return NULL;
	return JsonbValueToJsonb(v);
}
