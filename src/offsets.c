/*-------------------------------------------------------------------------
 *
 * offsets.c
 *	  Where each query is in its source, and its event-time watermark.
 *
 * The next offset of every partition lives in streamwin.query_offsets and
 * is written in the batch's own transaction, so results and positions
 * commit together or not at all.  Before every batch the stored offsets are
 * compared with where the consumer stands; any difference (a failed batch,
 * reset_query, another session's run_batch) re-assigns the consumer to the
 * stored offsets, so nothing is skipped or read twice.
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
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"

#include "batch.h"

/* The partitions a query reads: the source's subset, or all of the topic. */
static void
offsets_init_partitions(QueryRunner *r)
{
	MemoryContext old = MemoryContextSwitchTo(r->cxt);
	int			n;

	if (r->source->kind == SOURCE_TABLE)
	{
		/* one "partition": the table's commit order */
		n = 1;
		r->parts = palloc0(sizeof(PartitionState));
	}
	else if (r->source->npartitions > 0)
	{
		n = r->source->npartitions;
		r->parts = palloc0(sizeof(PartitionState) * n);
		for (int i = 0; i < n; i++)
			r->parts[i].partition = r->source->partitions[i];
	}
	else
	{
		n = kafka_partition_count(r->consumer, 10000);
		r->parts = palloc0(sizeof(PartitionState) * n);
		for (int i = 0; i < n; i++)
			r->parts[i].partition = i;
	}
	r->nparts = n;
	r->consumer_next = palloc(sizeof(int64) * n);
	r->max_partition = 0;
	for (int i = 0; i < n; i++)
		r->max_partition = Max(r->max_partition, r->parts[i].partition);
	r->part_index = palloc(sizeof(int) * (r->max_partition + 1));
	for (int i = 0; i <= r->max_partition; i++)
		r->part_index[i] = -1;
	for (int i = 0; i < n; i++)
		r->part_index[r->parts[i].partition] = i;
	MemoryContextSwitchTo(old);
}

/*
 * Batches' worth of messages librdkafka may queue ahead while one batch
 * runs (with fewer, the fetcher stalled in the bench, see build_conf in
 * kafka_source.c); its 64 MB bound on the queue still holds.
 */
#define PREFETCH_BATCHES 10

/*
 * How long the broker may hold an empty fetch for this runner's consumer.
 * A real broker answers as soon as data arrives, whatever this is; but on
 * one that holds a fetch anyway (the test broker does, and so does any with
 * fetch.min.bytes above 1), data can wait that long, on top of up to a
 * trigger_interval until the next batch.  A worker lets the broker hold a
 * fetch for half its trigger_interval, 10 to 100 ms, so that Kafka's share
 * of the latency stays within the interval it asked for.  The price is idle
 * fetch requests, two per interval (20 a second at 100 ms), for the worker
 * and the brokers; a quarter of the interval gained the bench's p99 30 ms
 * more for twice as many.  A session's run_batch has no interval: 100 ms.
 * The source option kafka.fetch.wait.max.ms wins.
 */
static int
fetch_wait_ms(QueryRunner *r)
{
	if (!r->in_worker)
		return KAFKA_DEFAULT_FETCH_WAIT_MS;
	return (int) Max(10, Min(KAFKA_DEFAULT_FETCH_WAIT_MS,
							 r->query->trigger_interval_us / 2000));
}

/*
 * offsets_load
 *		Read the query's stored offsets and watermark inputs.  Partitions
 *		without a stored offset get next_offset -1 (not started).  Opens the
 *		consumer on first use.  Must be called inside a transaction.
 */
void
offsets_load(QueryRunner *r)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(r->query_id)};

	if (r->consumer == NULL && r->source->kind == SOURCE_KAFKA)
	{
		r->consumer = kafka_consumer_open(r->source->brokers, r->source->topic,
										  fetch_wait_ms(r),
										  PREFETCH_BATCHES * r->source->max_records_per_batch,
										  r->source->nkafka_props,
										  r->source->kafka_keys, r->source->kafka_values);
		r->assigned = false;
	}
	if (r->parts == NULL)
		offsets_init_partitions(r);

	for (int i = 0; i < r->nparts; i++)
	{
		PartitionState *p = &r->parts[i];

		p->next_offset = -1;
		p->next_index = 0;
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
		int32		partition = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		PartitionState *p;
		Datum		d;

		if (partition < 0 || partition > r->max_partition || r->part_index[partition] < 0)
			continue;			/* no longer read by this query */
		p = &r->parts[r->part_index[partition]];
		p->next_offset = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		d = SPI_getbinval(tup, desc, 3, &isnull);
		p->has_max_event_time = !isnull;
		if (!isnull)
			p->max_event_time = DatumGetTimestampTz(d);
		p->last_data_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
		p->next_index = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	}
	SPI_finish();
}

/*
 * offsets_assign
 *		Position the consumer at the stored offsets, unless it is there
 *		already.  A partition not started yet begins at the source's
 *		starting_offsets (or, in a query already started, at its beginning),
 *		resolved to an absolute offset now, so that the position stored after
 *		this batch means the same after a restart.
 */
void
offsets_assign(QueryRunner *r)
{
	bool		need = !r->assigned;
	bool		started = false;
	int32	   *partitions;

	if (r->source->kind == SOURCE_TABLE)
	{
		/* nothing to position: each fetch decodes from the stored LSN */
		if (r->parts[0].next_offset < 0)
		{
			r->parts[0].next_offset = (int64) (XLogRecPtrIsInvalid(r->query->start_lsn) ?
											   source_slot_confirmed(r->source->slot_name) :
											   r->query->start_lsn);
			r->parts[0].next_index = 0;
		}
		return;
	}

	/*
	 * starting_offsets is where a new query starts.  A partition with no
	 * position in a query that has started (one added to the topic since)
	 * is read from its beginning, as Spark does: with "latest" it would
	 * lose what was written to it before the query first looked.
	 */
	for (int i = 0; i < r->nparts; i++)
		if (r->parts[i].next_offset >= 0)
			started = true;
	for (int i = 0; i < r->nparts; i++)
	{
		PartitionState *p = &r->parts[i];

		if (p->next_offset < 0)
		{
			int64		low,
						high;

			kafka_query_watermarks(r->consumer, p->partition, &low, &high, 10000);
			p->next_offset = r->source->starting_offset == START_LATEST && !started ? high : low;
		}
		if (!r->assigned || r->consumer_next[i] != p->next_offset)
			need = true;
	}
	if (!need)
		return;

	partitions = palloc(sizeof(int32) * r->nparts);
	for (int i = 0; i < r->nparts; i++)
	{
		partitions[i] = r->parts[i].partition;
		r->consumer_next[i] = r->parts[i].next_offset;
	}
	kafka_assign(r->consumer, r->nparts, partitions, r->consumer_next);
	r->assigned = true;
	pfree(partitions);
}

/*
 * offsets_compute_watermark
 *		Fold this batch's event times into the partitions and compute the
 *		query watermark.  Returns false when there is no watermark yet.
 */
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

	for (int i = 0; i < r->nparts; i++)
	{
		PartitionState *p = &r->parts[i];
		bool		idle;

		if (p->batch_rows > 0)
			p->last_data_at = now;
		if (p->batch_has_max &&
			(!p->has_max_event_time || p->batch_max_event_time > p->max_event_time))
		{
			p->max_event_time = p->batch_max_event_time;
			p->has_max_event_time = true;
		}

		idle = offsets_partition_at_end(r, p) &&
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

/*
 * offsets_store
 *		Write every partition's position in the current transaction.
 */
void
offsets_store(QueryRunner *r)
{
	Datum	   *parts = palloc(sizeof(Datum) * r->nparts);
	Datum	   *next = palloc(sizeof(Datum) * r->nparts);
	Datum	   *maxts = palloc(sizeof(Datum) * r->nparts);
	bool	   *maxts_null = palloc(sizeof(bool) * r->nparts);
	Datum	   *seen = palloc(sizeof(Datum) * r->nparts);
	Datum	   *high = palloc(sizeof(Datum) * r->nparts);
	bool	   *high_null = palloc(sizeof(bool) * r->nparts);
	Datum	   *index = palloc(sizeof(Datum) * r->nparts);
	int			dims[1] = {r->nparts};
	int			lbs[1] = {1};
	Oid			argtypes[7] = {INT4OID, INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID,
	TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID};
	Datum		args[7];

	for (int i = 0; i < r->nparts; i++)
	{
		PartitionState *p = &r->parts[i];

		/* the lag of a table source is in bytes of WAL */
		int64		hw = r->source->kind == SOURCE_TABLE ?
			(XLogRecPtrIsInvalid(r->table_end_of_wal) ? -1 : (int64) r->table_end_of_wal) :
			kafka_cached_high_watermark(r->consumer, p->partition);

		parts[i] = Int32GetDatum(p->partition);
		next[i] = Int64GetDatum(p->next_offset);
		maxts[i] = TimestampTzGetDatum(p->max_event_time);
		maxts_null[i] = !p->has_max_event_time;
		seen[i] = TimestampTzGetDatum(p->last_data_at);
		high[i] = Int64GetDatum(hw);
		high_null[i] = hw < 0;
		index[i] = Int64GetDatum(p->next_index);
	}
	args[0] = Int32GetDatum(r->query_id);
	args[1] = PointerGetDatum(construct_array(parts, r->nparts, INT4OID, 4, true, TYPALIGN_INT));
	args[2] = PointerGetDatum(construct_array(next, r->nparts, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[3] = PointerGetDatum(construct_md_array(maxts, maxts_null, 1, dims, lbs, TIMESTAMPTZOID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[4] = PointerGetDatum(construct_array(seen, r->nparts, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	args[5] = PointerGetDatum(construct_md_array(high, high_null, 1, dims, lbs, INT8OID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[6] = PointerGetDatum(construct_array(index, r->nparts, INT8OID, 8, FLOAT8PASSBYVAL,
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

/*
 * {"0": 120, "1": 98}: the next offset of every partition.  For a table
 * source {"lsn": "0/1A2B3C8", "index": 0}, plus the changes of the last
 * fetch that a table source does not deliver (UPDATE, DELETE, TRUNCATE).
 */
char *
offsets_json(QueryRunner *r)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (r->source->kind == SOURCE_TABLE)
	{
		XLogRecPtr	lsn = (XLogRecPtr) r->parts[0].next_offset;

		appendStringInfo(&buf, "{\"lsn\": \"%X/%X\", \"index\": " INT64_FORMAT,
						 LSN_FORMAT_ARGS(lsn), r->parts[0].next_index);
		if (r->table_ignored[0] + r->table_ignored[1] + r->table_ignored[2] > 0)
			appendStringInfo(&buf, ", \"ignored\": {\"updates\": " INT64_FORMAT
							 ", \"deletes\": " INT64_FORMAT ", \"truncates\": " INT64_FORMAT "}",
							 r->table_ignored[0], r->table_ignored[1], r->table_ignored[2]);
		appendStringInfoChar(&buf, '}');
		return buf.data;
	}
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < r->nparts; i++)
		appendStringInfo(&buf, "%s\"%d\": " INT64_FORMAT, i ? ", " : "",
						 r->parts[i].partition, r->parts[i].next_offset);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * offsets_partition_at_end
 *		Has the query read everything its source held at the last fetch, for
 *		this partition?  (What lets a silent partition become idle.)
 */
bool
offsets_partition_at_end(QueryRunner *r, PartitionState *p)
{
	if (r->source->kind == SOURCE_TABLE)
		return r->table_at_end;
	return kafka_partition_at_eof(r->consumer, p->partition);
}

/*
 * offsets_table_retained
 *		The oldest LSN any query of this table source may still need, from
 *		committed rows: its stored position, or for a query with UNLOGGED
 *		state the position of its checkpoint (crash recovery replays from
 *		there); a query that has not run yet needs its start.  The slot may
 *		be confirmed up to there.
 */
XLogRecPtr
offsets_table_retained(QueryRunner *r)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(r->source->source_id)};
	bool		isnull;
	Datum		d;

	SPI_connect();
	/* a query with UNLOGGED state (aggregates, dedup keys) replays from its checkpoint */
	catalog_exec("SELECT min(CASE WHEN q.state_table IS NOT NULL OR q.dedup_table IS NOT NULL "
				 "                THEN coalesce(c.next_offset, q.start_lsn) "
				 "                ELSE coalesce(o.next_offset, q.start_lsn) END) "
				 "FROM streamwin.query_catalog q "
				 "LEFT JOIN streamwin.query_offsets o ON o.query_id = q.query_id AND o.partition = 0 "
				 "LEFT JOIN streamwin.query_checkpoints c ON c.query_id = q.query_id AND c.partition = 0 "
				 "WHERE q.source_id = $1",
				 1, types, args, NULL, 1);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	SPI_finish();
	return isnull ? InvalidXLogRecPtr : (XLogRecPtr) DatumGetInt64(d);
}

/* The position of a table source in a progress record's offsets. */
TablePosition
offsets_parse_table_position(Jsonb *offsets)
{
	TablePosition pos;
	char	   *lsn = jsonb_get_text(offsets, "lsn");
	char	   *index = jsonb_get_text(offsets, "index");

	if (lsn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("progress record without the position of its table source")));
	pos.lsn = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(lsn)));
	pos.index = index ? strtoll(index, NULL, 10) : 0;
	return pos;
}
