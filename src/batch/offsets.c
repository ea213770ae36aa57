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
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "catalog_positions.h"
#include "offsets.h"

void
offsets_load(QueryRunner *r)
{
	int			n;
	StoredOffset *stored;

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

	stored = catalog_load_offsets(r->query_id, &n);
	for (int row = 0; row < n; row++)
	{
		StoredOffset *o = &stored[row];
		SourceReader *rd;
		int			idx;
		PartitionState *p;

		if (o->source_index < 0 || o->source_index >= r->nreaders)
			continue;
		rd = r->readers[o->source_index];
		idx = source_part_index(rd, o->partition);
		if (idx < 0)
			continue;			/* no longer read by this query */
		p = &rd->parts[idx];
		p->has_position = true;
		p->next.offset = o->next_offset;
		p->has_max_event_time = o->has_max_event_time;
		if (o->has_max_event_time)
			p->max_event_time = o->max_event_time;
		p->last_data_at = o->last_data_at;
		p->next.index = o->next_index;
	}
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
			/* (a request to the source each, maybe: a cancel between) */
			CHECK_FOR_INTERRUPTS();
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
	/* (an event time near the start of the timestamps' range stays in it) */
	if (has_candidate)
		candidate = candidate < MIN_TIMESTAMP + delay ? MIN_TIMESTAMP : candidate - delay;

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
	int			n = 0;
	StoredOffset *offsets;

	for (int s = 0; s < r->nreaders; s++)
		nparts += r->readers[s]->nparts;
	offsets = palloc(sizeof(StoredOffset) * Max(nparts, 1));
	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];

		for (int i = 0; i < rd->nparts; i++)
		{
			PartitionState *p = &rd->parts[i];
			StoredOffset *o = &offsets[n];
			int64		hw;

			/* (a source's start not resolved yet: offsets_resolve_starts) */
			if (!p->has_position)
				continue;
			hw = rd->ops->end_offset(rd, p);
			n++;

			o->source_index = s;
			o->partition = p->partition;
			o->next_offset = p->next.offset;
			o->next_index = p->next.index;
			o->has_max_event_time = p->has_max_event_time;
			o->max_event_time = p->max_event_time;
			o->last_data_at = p->last_data_at;
			o->has_high_watermark = hw >= 0;
			o->high_watermark = hw;
		}
	}
	Assert(n <= nparts);
	catalog_store_offsets(r->query_id, offsets, n);
}

/*
 * A source whose queries start at its "latest" positions, and that does not
 * record a start of its own when a query is created (a Kafka topic's
 * ends): resolved at create_query, as reset_query resolves them, so that
 * "latest" is where each partition ended when the query was created.
 * Resolved at the first batch instead, it moved on with every retry of a
 * first batch that failed (a registry down, a result table refusing a
 * row), skipping what came between; and what was produced between the
 * creation and the first batch was never read.
 */
bool
offsets_start_resolved_at_creation(SourceInfo *src)
{
	return src->starting_offset == START_LATEST && source_ops(src)->query_start == NULL;
}

void
offsets_resolve_starts(QueryRunner *r)
{
	offsets_load(r);
	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];

		if (!offsets_start_resolved_at_creation(rd->source))
			continue;
		for (int i = 0; i < rd->nparts; i++)
		{
			/* (a request to the source each: a cancel between) */
			CHECK_FOR_INTERRUPTS();
			rd->parts[i].next = rd->ops->start_position(rd, &rd->parts[i], false);
			rd->parts[i].has_position = true;
		}
	}
	offsets_store(r);
	/* what a first batch finding its state lost restores (checkpoint_restore) */
	catalog_checkpoint_offsets(r->query_id);
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
