/*-------------------------------------------------------------------------
 *
 * kafka_source.c
 *	  Kafka sources: create_kafka_source, and their SourceOps, the reader a
 *	  query uses (over kafka_consumer.c's consumer).
 *
 * A reader assigns the query's partitions itself (no consumer group) at the
 * positions the query stored, and re-assigns whenever the consumer and the
 * stored positions disagree (a failed batch, reset_query, another session's
 * run_batch): so nothing is skipped or read twice.
 *
 * Option "envelope" says what a message is: a row (append), a Debezium
 * change event, or an upsert of its key's row; with either of the last
 * two the source is a changelog (source.h), its view ends with the change
 * column, and option "key_columns" names the columns that identify a row
 * (required for upsert).  changelog_input.c turns such messages into rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
#include "utils/wait_event.h"

#include "avro_input.h"
#include "catalog_access.h"
#include "changelog_input.h"
#include "kafka_consumer.h"
#include "options.h"
#include "source.h"
#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_create_kafka_source);

typedef struct KafkaReader
{
	KafkaConsumer *consumer;
	bool		assigned;		/* consumer_next[] is where it stands */
	TimestampTz partitions_checked; /* when the topic's partitions were counted */
	bool		ends_fresh;		/* assigned since the last fetch, its ends asked */
	int64	   *consumer_next;	/* the next offset it delivers, per part */
	bool		needs_headers;	/* a column holds the message's headers */
} KafkaReader;

#define KR(rd) ((KafkaReader *) (rd)->private)

/*
 * Batches' worth of messages librdkafka may queue ahead while one batch
 * runs: with fewer, its fetcher stops at queued.min.messages and backs off
 * for half a second while a backlog is read (see build_conf in
 * kafka_consumer.c).  Its 64 MB bound on the queue still holds.
 */
#define PREFETCH_BATCHES 10

/*
 * How long the broker may hold an empty fetch for this reader's consumer.
 * A real broker answers as soon as data arrives, whatever this is; but on
 * one that holds a fetch anyway (the test broker does, and so does any with
 * fetch.min.bytes above 1), data can wait that long, on top of up to a
 * trigger_interval until the next batch.  A worker lets the broker hold a
 * fetch for half its trigger_interval, 10 to 100 ms, so that Kafka's share
 * of the latency stays within the interval it asked for, at two idle fetch
 * requests per interval.  A session's run_batch has no interval: 100 ms.
 * The source option kafka.fetch.wait.max.ms wins.
 */
static int
fetch_wait_ms(SourceReader *rd)
{
	if (!rd->in_worker)
		return KAFKA_DEFAULT_FETCH_WAIT_MS;
	return (int) Max(10, Min(KAFKA_DEFAULT_FETCH_WAIT_MS,
							 rd->query->trigger_interval_us / 2000));
}

/* --- the options only a Kafka source has ----------------------------------- */

/* A Kafka source's own options (SourceInfo.kind_options). */
typedef struct KafkaOptions
{
	int			npartitions;	/* option "partitions"; 0: every partition */
	int32	   *partitions;
	int			nprops;			/* option "kafka": librdkafka properties */
	const char **prop_keys;
	const char **prop_values;
	SourceEnvelope envelope;	/* option "envelope" */
	List	   *key_columns;	/* option "key_columns": String names, or NIL */
} KafkaOptions;

/* Option "envelope": its values, as SourceEnvelope numbers them */
static const char *const envelope_names[] = {"append", "debezium", "upsert"};

/* Option "envelope", checked. */
static SourceEnvelope
envelope_option(Jsonb *options)
{
	JsonbValue *v = option_value(options, "envelope");
	char	   *name;

	if (v == NULL)
		return ENVELOPE_APPEND;
	name = v->type == jbvString ? pnstrdup(v->val.string.val, v->val.string.len) : NULL;
	for (int e = 0; name != NULL && e < (int) lengthof(envelope_names); e++)
		if (strcmp(name, envelope_names[e]) == 0)
			return (SourceEnvelope) e;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for option \"envelope\": %s",
					name ? psprintf("\"%s\"", name) : "not a string"),
			 errhint("Use \"append\" (a message is a row), \"debezium\" (Debezium change events) or \"upsert\" (a key's new row, a null value deleting it).")));
	pg_unreachable();
}

/* Option "key_columns": an array of distinct column names, checked; NIL if absent. */
static List *
key_columns_option(Jsonb *options)
{
	JsonbValue *v = option_value(options, "key_columns");
	JsonbIterator *it;
	JsonbValue	elem;
	JsonbIteratorToken tok;
	List	   *names = NIL;

	if (v == NULL)
		return NIL;
	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		goto invalid;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
	{
		char	   *name;
		ListCell   *lc;

		if (tok != WJB_ELEM)
			continue;
		if (elem.type != jbvString || elem.val.string.len == 0)
			goto invalid;
		name = pnstrdup(elem.val.string.val, elem.val.string.len);
		foreach(lc, names)
			if (strcmp(strVal(lfirst(lc)), name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"key_columns\" names column \"%s\" more than once", name)));
		names = lappend(names, makeString(name));
	}
	if (names != NIL)
		return names;
invalid:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("option \"key_columns\" must be an array of column names"),
			 errhint("For example: {\"key_columns\": [\"order_id\"]}.")));
	pg_unreachable();
}

/* Options "partitions", "kafka", "envelope" and "key_columns" of a Kafka source, checked. */
static KafkaOptions *
kafka_options_parse(Jsonb *options)
{
	KafkaOptions *ko = palloc0(sizeof(KafkaOptions));
	JsonbValue *v;

	if (options == NULL || !JB_ROOT_IS_OBJECT(options))
		return ko;
	ko->envelope = envelope_option(options);
	ko->key_columns = key_columns_option(options);
	v = option_value(options, "partitions");
	if (v != NULL)
	{
		JsonbIterator *it;
		JsonbValue	elem;
		JsonbIteratorToken tok;
		int			cap = 16;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"partitions\" must be an array of partition numbers"),
					 errhint("For example: {\"partitions\": [0, 1, 2]}.")));
		ko->partitions = palloc(sizeof(int32) * cap);
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
		{
			int64		p;

			if (tok != WJB_ELEM)
				continue;
			/* whole numbers: numeric_int8 would round 0.5 to partition 1 */
			if (elem.type != jbvNumeric ||
				!DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(elem.val.numeric),
												  DirectFunctionCall2(numeric_trunc,
																	  NumericGetDatum(elem.val.numeric),
																	  Int32GetDatum(0)))))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"partitions\" must be an array of partition numbers"),
						 errhint("For example: {\"partitions\": [0, 1, 2]}.")));
			p = DatumGetInt64(DirectFunctionCall1(numeric_int8,
												  NumericGetDatum(elem.val.numeric)));
			if (p < 0 || p > KAFKA_MAX_PARTITION)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("partition number %lld is out of range", (long long) p),
						 errdetail("Kafka partitions are numbered from 0; streamwin reads partitions up to %d.",
								   KAFKA_MAX_PARTITION)));
			for (int i = 0; i < ko->npartitions; i++)
				if (ko->partitions[i] == p)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("option \"partitions\" names partition %lld more than once", (long long) p),
							 errhint("Name each partition once.")));
			if (ko->npartitions == cap)
			{
				cap *= 2;
				ko->partitions = repalloc(ko->partitions, sizeof(int32) * cap);
			}
			ko->partitions[ko->npartitions++] = (int32) p;
		}
		if (ko->npartitions == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"partitions\" must not be empty"),
					 errhint("Leave the option out to read every partition.")));
	}

	v = option_value(options, "kafka");
	if (v != NULL)
	{
		JsonbIterator *it;
		JsonbValue	item;
		JsonbIteratorToken tok;
		int			cap = 8;
		char	   *key = NULL;

		if (!OPTION_IS_OBJECT(v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"kafka\" must be an object of librdkafka properties"),
					 errhint("For example: {\"kafka\": {\"fetch.max.bytes\": \"1048576\"}}.")));
		ko->prop_keys = palloc(sizeof(char *) * cap);
		ko->prop_values = palloc(sizeof(char *) * cap);
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
				key = pnstrdup(item.val.string.val, item.val.string.len);
			else if (tok == WJB_VALUE)
			{
				char	   *value;

				if (item.type == jbvString)
					value = pnstrdup(item.val.string.val, item.val.string.len);
				else if (item.type == jbvNumeric)
					value = DatumGetCString(DirectFunctionCall1(numeric_out,
																NumericGetDatum(item.val.numeric)));
				else if (item.type == jbvBool)
					value = pstrdup(item.val.boolean ? "true" : "false");
				else
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("librdkafka property \"%s\" must be a string, number or boolean", key)));
				if (ko->nprops == cap)
				{
					cap *= 2;
					ko->prop_keys = repalloc(ko->prop_keys, sizeof(char *) * cap);
					ko->prop_values = repalloc(ko->prop_values, sizeof(char *) * cap);
				}
				ko->prop_keys[ko->nprops] = key;
				ko->prop_values[ko->nprops] = value;
				ko->nprops++;
			}
		}
	}
	return ko;
}

/* The source's own options, parsed once, where the source lives. */
static KafkaOptions *
kafka_options(SourceInfo *src)
{
	if (src->kind_options == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(src));

		src->kind_options = kafka_options_parse(src->options);
		MemoryContextSwitchTo(old);
	}
	return (KafkaOptions *) src->kind_options;
}

/* The consumer, and the partitions read: the source's subset, or all of the topic. */
static void
kafka_open(SourceReader *rd)
{
	SourceInfo *src = rd->source;
	KafkaOptions *ko = kafka_options(src);
	KafkaReader *kr = palloc0(sizeof(KafkaReader));

	rd->private = kr;
	kr->consumer = kafka_consumer_open(src->brokers, src->topic, fetch_wait_ms(rd),
									   PREFETCH_BATCHES * source_max_records(src),
									   ko->nprops, ko->prop_keys, ko->prop_values);
	rd->nparts = ko->npartitions > 0 ? ko->npartitions :
		kafka_partition_count(kr->consumer, 10000);
	kr->partitions_checked = GetCurrentTimestamp();
	rd->parts = palloc0(sizeof(PartitionState) * rd->nparts);
	for (int i = 0; i < rd->nparts; i++)
		rd->parts[i].partition = ko->npartitions > 0 ? ko->partitions[i] : i;
	kr->consumer_next = palloc(sizeof(int64) * rd->nparts);
	rd->envelope = ko->envelope;
	for (int m = 0; m < src->nmetadata; m++)
		if (src->metadata_kinds[m] == SOURCE_META_HEADERS)
			kr->needs_headers = true;
}

/*
 * starting_offsets is where a new query starts.  A partition with no
 * position in a query that has started (one added to the topic since) is
 * read from its beginning, as Spark does: with "latest" it would lose what
 * was written to it before the query first looked.  Resolved to an
 * absolute offset now, so that the position stored after this batch means
 * the same after a restart.
 */
static SourcePosition
kafka_start_position(SourceReader *rd, PartitionState *p, bool query_started)
{
	SourcePosition pos = {0, 0};
	int64		low,
				high;

	kafka_query_watermarks(KR(rd)->consumer, p->partition, &low, &high, 10000);
	pos.offset = rd->source->starting_offset == START_LATEST && !query_started ? high : low;
	return pos;
}

/* How long kafka_seek waits for the partitions' ends */
#define KAFKA_SEEK_ENDS_MS 1000

/*
 * How often a reader of every partition of a topic counts them again: a
 * topic's partitions may be added to while its queries run, and producers
 * write to the new ones at once.
 */
#define KAFKA_PARTITIONS_CHECK_MS 10000

/*
 * Partitions added to the topic since the reader was opened: it is marked
 * outgrown, and its runner is made anew before the next batch, which reads
 * them from their beginning (kafka_start_position).  Until then the
 * watermark does not wait for them: rows in them that it has passed by then
 * are late, so the check comes every few seconds, at a batch's start.
 */
static void
check_partition_count(SourceReader *rd)
{
	KafkaReader *kr = KR(rd);
	TimestampTz now = GetCurrentTimestamp();

	if (kafka_options(rd->source)->npartitions > 0 || rd->outgrown ||
		!TimestampDifferenceExceeds(kr->partitions_checked, now, KAFKA_PARTITIONS_CHECK_MS))
		return;
	kr->partitions_checked = now;
	if (kafka_try_partition_count(kr->consumer, 2000) > rd->nparts)
	{
		rd->outgrown = true;
		ereport(LOG,
				(errmsg("streamwin: topic \"%s\" of query \"%s\" has more partitions than the %d it reads; "
						"its next batch reads them too",
						rd->source->topic, rd->query->name, rd->nparts)));
	}
}

/* Assign the stored positions, unless the consumer stands there already. */
static void
kafka_seek(SourceReader *rd)
{
	KafkaReader *kr = KR(rd);
	bool		need = !kr->assigned;
	int32	   *partitions;
	int64	   *ends;

	check_partition_count(rd);

	for (int i = 0; i < rd->nparts; i++)
		if (kr->consumer_next[i] != rd->parts[i].next.offset)
			need = true;
	if (!need)
		return;
	partitions = palloc(sizeof(int32) * rd->nparts);
	kr->assigned = false;		/* until the assignment below is made */
	for (int i = 0; i < rd->nparts; i++)
	{
		partitions[i] = rd->parts[i].partition;
		kr->consumer_next[i] = rd->parts[i].next.offset;
	}

	/*
	 * The partitions' ends, asked in one request per broker before the
	 * consumer fetches (a request then queues behind the fetches' responses
	 * on the same connection): a batch over many partitions is cut by their
	 * lags (limit_by_lag), and a partition with nothing to read is at its end
	 * at once, where the first fetch would wait fetch.wait.max.ms to say so
	 * (a session's first batch of a join with one side idle).  Only if
	 * the answer comes soon: else the fetch finds out, as it would have.
	 */
	ends = palloc(sizeof(int64) * rd->nparts);
	(void) kafka_try_query_ends(kr->consumer, rd->nparts, partitions, ends, KAFKA_SEEK_ENDS_MS);
	kafka_assign(kr->consumer, rd->nparts, partitions, kr->consumer_next);
	kafka_learn_ends(kr->consumer, rd->nparts, partitions, ends);
	kr->assigned = true;
	kr->ends_fresh = true;
	pfree(ends);
	pfree(partitions);
}

/* A message as a row of the batch; the payload stays the consumer's. */
static void
message_row(SourceReader *rd, const KafkaMessage *m, SourceRow *row)
{
	int			idx = source_part_index(rd, m->partition);

	if (idx < 0)
		elog(ERROR, "streamwin: message from partition %d that was not assigned", m->partition);
	row->part = idx;
	row->partition = m->partition;
	row->offset = m->offset;
	row->payload = m->payload;
	row->len = m->len;
	row->key = m->key;
	row->keylen = m->keylen;
	row->has_timestamp = m->has_timestamp;
	row->timestamp = m->timestamp;
	row->handle = m->rkmessage;
	row->headers_json = NULL;
	row->headers_error = NULL;
}

/*
 * A batch of a backlog takes from every partition that has messages
 * behind, in proportion to how many (Spark's maxOffsetsPerTrigger), so
 * that it reads a slice of event time: the watermark, the minimum over
 * partitions, moves during a catch-up and windows close, where a batch
 * holding a few partitions whole would hold every window open.  Lags come
 * from the high watermarks of the last fetch responses, or the ends asked
 * when the partitions were assigned (kafka_seek; any still unknown are
 * asked now).  When everything fits in one batch, nothing is limited,
 * except in the first fetch after an assignment: a new consumer's first
 * fetch responses come partition by partition, and a batch that took the
 * first and lingered for the rest would hold a few partitions of what is
 * there (a new session's run_batch, 25 of 1,000 events).  Then each
 * partition is limited to its lag just asked, and the fetch waits for
 * those messages (or the partition's end) up to its timeout.
 */
static void
limit_by_lag(SourceReader *rd)
{
	KafkaReader *kr = KR(rd);
	int			max = source_max_records(rd->source);
	int64		total = 0;
	int64	   *lag = palloc(sizeof(int64) * rd->nparts);
	int32	   *partitions = palloc(sizeof(int32) * rd->nparts);
	int		   *limits = palloc(sizeof(int) * rd->nparts);
	int64	   *ends = palloc(sizeof(int64) * rd->nparts);
	int			nasked = 0;
	int64		sum = 0;

	/* the partitions whose ends are unknown: one request to their leaders */
	for (int i = 0; i < rd->nparts; i++)
	{
		ends[i] = kafka_cached_high_watermark(kr->consumer, rd->parts[i].partition);
		if (ends[i] < 0)
			partitions[nasked++] = rd->parts[i].partition;
	}
	if (nasked > 0)
	{
		int64	   *asked = palloc(sizeof(int64) * nasked);

		kafka_query_ends(kr->consumer, nasked, partitions, asked, 10000);
		for (int i = 0, j = 0; i < rd->nparts; i++)
			if (ends[i] < 0)
				ends[i] = asked[j++];
	}
	for (int i = 0; i < rd->nparts; i++)
	{
		lag[i] = Max(0, ends[i] - rd->parts[i].next.offset);
		total += lag[i];
	}
	if (total <= max && !kr->ends_fresh)
		return;
	for (int i = 0; i < rd->nparts; i++)
	{
		partitions[i] = rd->parts[i].partition;
		/* its share, at least one message if it has any behind */
		limits[i] = total <= max ? (int) lag[i] :
			(int) Min(lag[i], Max(lag[i] > 0 ? 1 : 0, (int64) max * lag[i] / total));
		sum += limits[i];
	}

	/*
	 * The shares, rounded down, leave up to a message per partition of the
	 * batch untaken: one each to the partitions that have more behind than
	 * their share, in partition order, so that the batch is full (a worker goes on at once after a full batch; after
	 * one short of it, it waits for its trigger, the backlog caught up).
	 */
	for (int i = 0; sum < max && i < rd->nparts; i++)
		if (lag[i] > limits[i])
		{
			limits[i]++;
			sum++;
		}
	kafka_limit_next_fetch(kr->consumer, rd->nparts, partitions, limits);
}

static int
kafka_fetch_rows(SourceReader *rd, int timeout_ms, int linger_ms, SourceRow **rows)
{
	KafkaReader *kr = KR(rd);
	KafkaMessage *msgs;
	int			n;
	SourceRow  *out;

	if (rd->nparts > 1)
		limit_by_lag(rd);
	kr->ends_fresh = false;		/* the first fetch after the assignment */

	/*
	 * The consumer takes messages before kafka_fetch returns them, and an
	 * error inside it (a cancel, statement_timeout, a broker's error) leaves
	 * it past messages that no batch has: until consumer_next[] follows it
	 * again below, the next batch must assign the stored positions again
	 * (kafka_seek).
	 */
	kr->assigned = false;
	n = kafka_fetch(kr->consumer, source_max_records(rd->source), timeout_ms, linger_ms, &msgs);
	out = palloc(sizeof(SourceRow) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		message_row(rd, &msgs[i], &out[i]);
		rd->parts[out[i].part].next.offset = msgs[i].offset + 1;
		kr->consumer_next[out[i].part] = msgs[i].offset + 1;
	}

	/*
	 * A partition that ends in offsets without messages (a transaction's
	 * commit marker) is at its end past its last message: it stands where
	 * the consumer stands, so that the batch's position reaches the end
	 * that run_available() and the lag see.  Nothing is skipped: no
	 * consumer is given those offsets.
	 */
	for (int i = 0; i < rd->nparts; i++)
	{
		int64		end = kafka_partition_eof_offset(kr->consumer, rd->parts[i].partition);

		if (end > rd->parts[i].next.offset)
		{
			rd->parts[i].next.offset = end;
			kr->consumer_next[i] = end;
		}
	}
	kr->assigned = true;		/* consumer_next[] is where it stands */
	*rows = out;
	return n;
}

/* A message's headers as JSON, from the librdkafka message or its copy. */
static char *
kafka_row_headers_json(SourceReader *rd, const SourceRow *row, const char **error)
{
	KafkaMessage m;

	if (row->handle == NULL)
	{
		*error = row->headers_error;
		return (char *) row->headers_json;
	}
	memset(&m, 0, sizeof(m));
	m.rkmessage = row->handle;
	return kafka_message_headers_json(&m, error);
}

/*
 * Fetches may return less than a replay needs or run past it, so messages
 * are copied into the batch's memory across fetches, and those past a
 * target are dropped (and the consumer re-positioned at the next batch).
 *
 * A partition's range holds fewer messages than its offsets: a
 * transactional producer's commit and abort markers take offsets that no
 * consumer is given, and so do the messages of aborted transactions and
 * those compaction removed since.  So a partition is done when a message
 * at or past the last offset of its range arrives, or when the consumer
 * stands at the partition's end at or past it, not when as many messages
 * as offsets have come; an end before it (the topic made anew) is not
 * done, and fails the replay loudly at the deadline.  Its position is then
 * its target, as the first run left it.
 */
static int
kafka_replay(SourceReader *rd, const SourcePosition *targets, SourceRow **rows)
{
	KafkaReader *kr = KR(rd);
	int64		needed = 0;
	int			ndone = 0;
	bool	   *done = palloc(sizeof(bool) * rd->nparts);
	int			n = 0;
	int64		capacity;
	bool		past = false;
	SourceRow  *acc;
	TimestampTz deadline = GetCurrentTimestamp() + 60 * USECS_PER_SEC;

	for (int i = 0; i < rd->nparts; i++)
	{
		needed += Max(0, targets[i].offset - rd->parts[i].next.offset);
		done[i] = rd->parts[i].next.offset >= targets[i].offset;
		ndone += done[i];
	}

	/*
	 * The ranges' offsets bound the messages, but a compacted topic or
	 * transaction markers leave gaps: as many rows as a batch takes at
	 * first, more as they come.
	 */
	capacity = Max(Min(needed, (int64) source_max_records(rd->source)), 1);
	acc = palloc(sizeof(SourceRow) * capacity);
	/* an error on the way leaves the consumer anywhere in the ranges */
	kr->assigned = false;
	while (ndone < rd->nparts)
	{
		KafkaMessage *m;
		int			got = kafka_fetch(kr->consumer, source_max_records(rd->source), 1000,
									  SESSION_FETCH_LINGER_MS, &m);

		int			n_before = n;
		int			ndone_before = ndone;

		if (n + (int64) got > capacity)
		{
			capacity = Min(Max(capacity * 2, n + (int64) got), Max(needed, n + (int64) got));
			acc = repalloc_huge(acc, sizeof(SourceRow) * capacity);
		}
		for (int j = 0; j < got; j++)
		{
			int			idx = source_part_index(rd, m[j].partition);
			char	   *copy;
			SourceRow  *row = &acc[n];

			if (idx < 0 || m[j].offset >= targets[idx].offset)
			{
				past = true;	/* the consumer went past the batch */
				if (idx >= 0 && !done[idx])
				{
					done[idx] = true;
					ndone++;
				}
				continue;
			}
			if (done[idx])
				continue;		/* (not reached: offsets only grow) */
			message_row(rd, &m[j], row);
			copy = palloc(Max(m[j].len, 1));
			if (m[j].len > 0)
				memcpy(copy, m[j].payload, m[j].len);
			row->payload = m[j].payload ? copy : NULL;
			/* the copy outlives the librdkafka message: its headers as text */
			if (kr->needs_headers)
				row->headers_json = kafka_message_headers_json(&m[j], &row->headers_error);
			row->handle = NULL;
			if (m[j].key != NULL)
			{
				char	   *key = palloc(Max(m[j].keylen, 1));

				memcpy(key, m[j].key, m[j].keylen);
				row->key = key;
			}
			rd->parts[idx].next.offset = m[j].offset + 1;
			kr->consumer_next[idx] = m[j].offset + 1;
			n++;
			if (m[j].offset + 1 >= targets[idx].offset)
			{
				done[idx] = true;
				ndone++;
			}
		}
		/* the rest of a range at a partition's end is offsets without messages */
		for (int i = 0; i < rd->nparts; i++)
			if (!done[i] &&
				kafka_partition_eof_offset(kr->consumer, rd->parts[i].partition) >= targets[i].offset)
			{
				done[i] = true;
				ndone++;
			}
		/*
		 * A replay gives up when its ranges stop coming, not when they come
		 * slowly: messages past the ranges (other partitions' traffic) are
		 * no progress.
		 */
		if (n > n_before || ndone > ndone_before)
			deadline = GetCurrentTimestamp() + 60 * USECS_PER_SEC;
		else if (got == 0)
		{
			/*
			 * Nothing came, and a fetch at every partition's end returns at
			 * once: wait a little rather than spin, and serve a cancel or a
			 * shutdown meanwhile.
			 */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 100, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
		CHECK_FOR_INTERRUPTS();
		if (ndone < rd->nparts && GetCurrentTimestamp() > deadline)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not re-read the messages of query \"%s\" needed to recover its state",
							rd->query->name),
					 errdetail("No message came for 60 seconds; %d were read, and %d of %d partitions are not done.",
							   n, rd->nparts - ndone, rd->nparts),
					 kafka_last_error(kr->consumer) ?
					 errhint("Last error from the source: %s", kafka_last_error(kr->consumer)) : 0));
	}
	for (int i = 0; i < rd->nparts; i++)
	{
		/* (where the consumer stands if it went no further) */
		if (kr->consumer_next[i] == rd->parts[i].next.offset &&
			kafka_partition_eof_offset(kr->consumer, rd->parts[i].partition) >= targets[i].offset)
			kr->consumer_next[i] = targets[i].offset;
		rd->parts[i].next.offset = Max(rd->parts[i].next.offset, targets[i].offset);
	}
	kr->assigned = !past;
	pfree(done);
	*rows = acc;
	return n;
}

/*
 * A batch without rows may have moved a partition past offsets without
 * messages at its end (a commit marker): stored, so that the stored
 * position and the lag reach the end, and the next batch, which starts
 * from the stored positions, finds the consumer where they say.  (Storing
 * them may take a checkpoint, batch_idle: one per transaction of a
 * transactional producer that goes quiet after each.  Not storing them
 * would leave the next batch assigning the consumer again, and
 * run_available() short of the end.)
 */
static bool
kafka_moved_without_rows(SourceReader *rd, const SourcePosition *before)
{
	for (int i = 0; i < rd->nparts; i++)
		if (rd->parts[i].next.offset > before[i].offset)
			return true;
	return false;
}

static bool
kafka_at_end(SourceReader *rd, PartitionState *p)
{
	return kafka_partition_at_eof(KR(rd)->consumer, p->partition);
}

static int64
kafka_end_offset(SourceReader *rd, PartitionState *p)
{
	return kafka_cached_high_watermark(KR(rd)->consumer, p->partition);
}

static void
kafka_end_positions(SourceReader *rd, SourcePosition *targets)
{
	int32	   *partitions = palloc(sizeof(int32) * rd->nparts);
	int64	   *ends = palloc(sizeof(int64) * rd->nparts);

	for (int i = 0; i < rd->nparts; i++)
		partitions[i] = rd->parts[i].partition;
	kafka_query_ends(KR(rd)->consumer, rd->nparts, partitions, ends, 10000);
	for (int i = 0; i < rd->nparts; i++)
	{
		targets[i].index = 0;
		targets[i].offset = ends[i];
	}
}

/*
 * {"0": 120, "1": 98}: the next offset of every partition; a changelog's
 * also with the changes of the batch's messages:
 * "changes": {"inserts": 3, "updates": 1, "deletes": 0}.
 */
static void
kafka_positions_json(SourceReader *rd, StringInfo buf)
{
	appendStringInfoChar(buf, '{');
	for (int i = 0; i < rd->nparts; i++)
		appendStringInfo(buf, "%s\"%d\": " INT64_FORMAT, i ? ", " : "",
						 rd->parts[i].partition, rd->parts[i].next.offset);
	if (rd->envelope != ENVELOPE_APPEND)
		appendStringInfo(buf, ", \"changes\": {\"inserts\": " INT64_FORMAT
						 ", \"updates\": " INT64_FORMAT ", \"deletes\": " INT64_FORMAT "}",
						 rd->changes.inserts, rd->changes.updates, rd->changes.deletes);
	appendStringInfoChar(buf, '}');
}

static void
kafka_positions_parse(SourceReader *rd, Jsonb *json, SourcePosition *targets)
{
	for (int i = 0; i < rd->nparts; i++)
	{
		char		key[16];
		char	   *v;

		snprintf(key, sizeof(key), "%d", rd->parts[i].partition);
		v = jsonb_get_text(json, key);
		targets[i].offset = v ? strtoll(v, NULL, 10) : rd->parts[i].next.offset;
		targets[i].index = 0;
	}
}

/* "partitions 0 to 3 and 7": the partitions the reader reads, for messages */
static char *
partitions_text(SourceReader *rd)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, rd->nparts == 1 ? "partition " : "partitions ");
	for (int i = 0; i < rd->nparts;)
	{
		int			j = i;

		while (j + 1 < rd->nparts && rd->parts[j + 1].partition == rd->parts[j].partition + 1)
			j++;
		if (i > 0)
			appendStringInfoString(&buf, j + 1 == rd->nparts ? " and " : ", ");
		if (j >= i + 2)
			appendStringInfo(&buf, "%d to %d", rd->parts[i].partition, rd->parts[j].partition);
		else
		{
			appendStringInfo(&buf, "%d", rd->parts[i].partition);
			if (j == i + 1)
				appendStringInfo(&buf, "%s%d", j + 1 == rd->nparts ? " and " : ", ",
								 rd->parts[j].partition);
		}
		i = j + 1;
	}
	return buf.data;
}

/*
 * Every key of explicit offsets must be a partition the reader reads: one
 * it does not have would be ignored, and every partition not named read
 * again from its earliest offset.
 */
static void
kafka_check_reset_partitions(SourceReader *rd, Jsonb *explicit)
{
	JsonbIterator *it = JsonbIteratorInit(&explicit->root);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *key;
		char	   *end;
		long		part;
		bool		found = false;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(v.val.string.val, v.val.string.len);
		errno = 0;
		part = strtol(key, &end, 10);
		/* as the number is written ("01" would name no partition below) */
		if (*key == '\0' || *end != '\0' || errno != 0 || part < 0 || part > PG_INT32_MAX ||
			strcmp(key, psprintf("%ld", part)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid partition \"%s\" in starting_offsets", key),
					 errdetail("Source \"%s\" reads %s of topic \"%s\".", rd->source->name,
							   partitions_text(rd), rd->source->topic),
					 errhint("Name each partition by its number, as in '{\"0\": 42}'.")));
		for (int i = 0; i < rd->nparts; i++)
			if (rd->parts[i].partition == part)
				found = true;
		if (!found)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("source \"%s\" does not read partition %ld", rd->source->name, part),
					 errdetail("It reads %s of topic \"%s\".", partitions_text(rd), rd->source->topic),
					 errhint("Give offsets for those partitions only; the ones not named start at the earliest offset.")));
		if (JsonbIteratorNext(&it, &v, true) == WJB_VALUE && v.type == jbvNull)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid offset null for partition %ld", part),
					 errhint("Give an offset the partition holds, or leave the partition out to start it at the earliest offset.")));
	}
}

/*
 * reset_query: 'earliest', 'latest', or {"partition": offset, ...}, where
 * partitions not named start at the earliest offset the topic holds.
 */
static void
kafka_reset(SourceReader *rd, const char *start, Jsonb *explicit)
{
	KafkaReader *kr = KR(rd);

	if (explicit)
		kafka_check_reset_partitions(rd, explicit);

	for (int i = 0; i < rd->nparts; i++)
	{
		PartitionState *p = &rd->parts[i];
		int64		low,
					high;
		char		key[16];
		char	   *given = NULL;

		/* a request per partition, each waiting up to 10 s: a cancel between */
		CHECK_FOR_INTERRUPTS();
		snprintf(key, sizeof(key), "%d", p->partition);
		if (explicit)
			given = jsonb_get_text(explicit, key);
		kafka_query_watermarks(kr->consumer, p->partition, &low, &high, 10000);
		if (given != NULL)
		{
			char	   *end;
			long long	off = strtoll(given, &end, 10);

			/* as the number is written, as the partition is */
			if (*end != '\0' || off < 0 || strcmp(given, psprintf("%lld", off)) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid offset \"%s\" for partition %d", given, p->partition)));
			if (off < low || off > high)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("offset %lld of partition %d is not in the topic", off, p->partition),
						 errdetail("The partition holds offsets %lld to %lld.", (long long) low,
								   (long long) high - 1)));
			p->next.offset = off;
		}
		else
			p->next.offset = strcmp(start, "latest") == 0 ? high : low;
		p->next.index = 0;
		p->has_position = true;
		p->has_max_event_time = false;
	}
}

/* The message as it came, for streamwin.dead_letters */
static bytea *
kafka_row_text(SourceReader *rd, const SourceRow *row)
{
	bytea	   *payload = palloc(VARHDRSZ + row->len);

	SET_VARSIZE(payload, VARHDRSZ + row->len);
	if (row->len > 0)
		memcpy(VARDATA(payload), row->payload, row->len);
	return payload;
}

static int
kafka_reader_wakeup_fd(SourceReader *rd)
{
	return kafka_wakeup_fd(KR(rd)->consumer);
}

static void
kafka_reader_drain_wakeup(SourceReader *rd)
{
	kafka_drain_wakeup(KR(rd)->consumer);
}

static const char *
kafka_reader_last_error(SourceReader *rd)
{
	return kafka_last_error(KR(rd)->consumer);
}

static void
kafka_close(SourceReader *rd)
{
	if (rd->private != NULL && KR(rd)->consumer != NULL)
		kafka_consumer_close(KR(rd)->consumer);
}

/* The columns that identify a row: option "key_columns", or NIL. */
static List *
kafka_key_columns(SourceInfo *src)
{
	return kafka_options(src)->key_columns;
}

/* An upsert source, or a Debezium source with key columns (source.h) */
static bool
kafka_upsert(SourceInfo *src)
{
	KafkaOptions *ko = kafka_options(src);

	return ko->envelope == ENVELOPE_UPSERT ||
		(ko->envelope == ENVELOPE_DEBEZIUM && ko->key_columns != NIL);
}

const SourceOps kafka_source_ops = {
	.kind = "kafka",
	.key_columns = kafka_key_columns,
	.upsert = kafka_upsert,
	.reset_hint = "Use 'earliest', 'latest' or a JSON object of the offset to start at per partition, "
	"such as '{\"0\": 42, \"1\": 7}' (partitions not named start at the earliest).",
	.open = kafka_open,
	.start_position = kafka_start_position,
	.seek = kafka_seek,
	.fetch = kafka_fetch_rows,
	.replay = kafka_replay,
	.at_end = kafka_at_end,
	.moved_without_rows = kafka_moved_without_rows,
	.end_offset = kafka_end_offset,
	.end_positions = kafka_end_positions,
	.positions_json = kafka_positions_json,
	.positions_parse = kafka_positions_parse,
	.reset = kafka_reset,
	.row_text = kafka_row_text,
	.row_headers_json = kafka_row_headers_json,
	.wakeup_fd = kafka_reader_wakeup_fd,
	.drain_wakeup = kafka_reader_drain_wakeup,
	.last_error = kafka_reader_last_error,
	.close = kafka_close,
};

/* --- create_kafka_source ---------------------------------------------------- */

/*
 * source_options_validate
 *		Check a source's options at creation time, with the same parser the
 *		workers use.
 */
static KafkaOptions *
source_options_validate(Jsonb *options, SourceFormat format)
{
	static const char *const valid[] = {"starting_offsets", "max_records_per_batch",
		"partitions", "kafka", "metadata", "timezone", "envelope", "key_columns",
		"avro_schema", "schema_registry", "schema_registry_user", "schema_registry_password", NULL};
	SourceInfo	tmp;
	KafkaOptions *ko;

	jsonb_check_keys(options, valid, "source");
	parse_source_options(&tmp, options);
	ko = kafka_options_parse(options);
	/* librdkafka's own checks, and the properties streamwin reserves */
	kafka_validate_properties(ko->nprops, ko->prop_keys, ko->prop_values);

	if (ko->envelope == ENVELOPE_DEBEZIUM && format != SOURCE_FORMAT_JSON &&
		format != SOURCE_FORMAT_AVRO)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("envelope \"debezium\" needs format \"json\" or \"avro\""),
				 errdetail("Debezium change events are read as JSON, with or without their schema, or as Avro."),
				 errhint("Create the source with format => 'json', or 'avro' for Debezium's Avro converter.")));
	if (ko->envelope == ENVELOPE_UPSERT && ko->key_columns == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("envelope \"upsert\" needs option \"key_columns\""),
				 errdetail("The message key identifies the row that its value replaces or a null value deletes."),
				 errhint("Name the columns the key holds, for example {\"envelope\": \"upsert\", \"key_columns\": [\"id\"]}.")));
	if (ko->envelope == ENVELOPE_APPEND && ko->key_columns != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"key_columns\" needs an envelope of changes"),
				 errdetail("In an append stream every message is a new row: no key identifies a row to change."),
				 errhint("Add {\"envelope\": \"debezium\"} or {\"envelope\": \"upsert\"}, or leave key_columns out.")));
	return ko;
}

/*
 * The key columns must be columns of the source (desc, its view's row
 * type; meta: source_metadata_map's); they come from the message key (an
 * upsert source's) or the event's rows (a Debezium source's), so not from
 * its metadata, and the state kept per key needs a type that hashes.
 */
static void
check_key_columns(KafkaOptions *ko, const char *source, TupleDesc desc, const SourceMetadata *meta)
{
	ListCell   *lc;

	foreach(lc, ko->key_columns)
	{
		const char *name = strVal(lfirst(lc));
		int			attno = -1;

		for (int i = 0; i < desc->natts; i++)
			if (strcmp(NameStr(TupleDescAttr(desc, i)->attname), name) == 0)
				attno = i;
		if (attno < 0 || attno == source_change_attno(desc) - 1)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" is not a column of source \"%s\"", name, source),
					 errhint("Name columns of the column list in option \"key_columns\".")));
		if (meta != NULL && meta[attno] != SOURCE_META_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key column \"%s\" holds message metadata", name),
					 errdetail(ko->envelope == ENVELOPE_UPSERT ?
							   "An upsert source reads its key columns from the message key." :
							   "A Debezium source reads its key columns from the rows of its change events."),
					 errhint("Leave the column out of option \"metadata\".")));
		if (!OidIsValid(lookup_type_cache(TupleDescAttr(desc, attno)->atttypid,
										  TYPECACHE_HASH_PROC)->hash_proc))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key column \"%s\" of type %s cannot be hashed", name,
							format_type_be(TupleDescAttr(desc, attno)->atttypid)),
					 errdetail("The source's queries keep the last row of each key in a hash table."),
					 errhint("Declare the column with a type that has a hash function, such as text or jsonb.")));
		if (!OidIsValid(lookup_type_cache(TupleDescAttr(desc, attno)->atttypid,
										  TYPECACHE_LT_OPR)->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key column \"%s\" of type %s has no ordering", name,
							format_type_be(TupleDescAttr(desc, attno)->atttypid)),
					 errdetail("The source's queries keep the last row of each key in a table with a unique index on the key."),
					 errhint("Declare the column with a type such as text, bigint or uuid.")));
	}
}

/*
 * An unquoted column name is folded to lower case, as in CREATE TABLE, but
 * JSON keys are matched exactly: a key "OrderId" never fills the column of
 * OrderId (which is orderid), and the column is NULL in every row.  Say so
 * when the name as written differs from the column's.  sql is the text the
 * column definition was parsed from.
 */
static void
notice_folded_name(const char *sql, ColumnDef *col)
{
	const char *written = sql + col->location;
	int			len = strlen(col->colname);

	if (col->location < 0 || written[0] == '"' || strncmp(written, col->colname, len) == 0)
		return;
	ereport(NOTICE,
			(errmsg("column name %.*s is folded to lower case: \"%s\"", len, written, col->colname),
			 errdetail("JSON keys are matched to column names exactly, so a key \"%.*s\" leaves the column NULL.",
					   len, written),
			 errhint("To match the key \"%.*s\", write the name in double quotes, as in CREATE TABLE.",
					 len, written)));
}

/* A column's COLLATE clause, as CREATE TABLE takes it; InvalidOid: none */
static Oid
column_collation(ColumnDef *col, Oid typid)
{
	Oid			collation;

	if (col->collClause == NULL)
		return InvalidOid;
	collation = LookupCollation(NULL, col->collClause->collname, col->collClause->location);
	if (!type_is_collatable(typid))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("collations are not supported by type %s", format_type_be(typid))));
	return collation;
}

/*
 * Parse a column definition list ("a bigint, b text") with PostgreSQL's own
 * grammar, by parsing it as the body of a CREATE TABLE.  Everything but
 * plain column definitions is refused, so the text cannot smuggle other
 * clauses in; the view is then built from the resolved types, never from
 * the user's text.
 */
static List *
parse_column_list(const char *columns, bool names_are_keys, List **typmods_out,
				  List **collations_out, List **names_out)
{
	StringInfoData sql;
	List	   *raw;
	CreateStmt *stmt;
	ListCell   *lc;
	List	   *types;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE streamwin_columns (%s)", columns);
	PG_TRY();
	{
		raw = raw_parser(sql.data, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		/* the position refers to our wrapper, so report it plainly */
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid column list: \"%s\"", columns),
				 errhint("Write the columns as in CREATE TABLE, for example 'order_id bigint, region text, event_time timestamptz'.")));
	}
	PG_END_TRY();

	types = NIL;
	if (list_length(raw) != 1 ||
		!IsA(linitial_node(RawStmt, raw)->stmt, CreateStmt))
		goto invalid;
	stmt = (CreateStmt *) linitial_node(RawStmt, raw)->stmt;
	if (stmt->inhRelations != NIL || stmt->partspec != NULL ||
		stmt->partbound != NULL || stmt->ofTypename != NULL ||
		stmt->options != NIL || stmt->tablespacename != NULL ||
		stmt->accessMethod != NULL || stmt->oncommit != ONCOMMIT_NOOP ||
		stmt->tableElts == NIL)
		goto invalid;

	foreach(lc, stmt->tableElts)
	{
		ColumnDef  *col = (ColumnDef *) lfirst(lc);
		Oid			typid;
		int32		typmod;

		if (!IsA(col, ColumnDef) || col->constraints != NIL)
			goto invalid;
		typenameTypeIdAndMod(NULL, col->typeName, &typid, &typmod);
		if (get_typtype(typid) == TYPTYPE_PSEUDO)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("column \"%s\" cannot be of pseudo-type %s",
							col->colname, format_type_be(typid))));
		for (ListCell *prev = list_head(*names_out); prev != NULL;
			 prev = lnext(*names_out, prev))
			if (strcmp(strVal(lfirst(prev)), col->colname) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" specified more than once", col->colname)));
		if (names_are_keys)
			notice_folded_name(sql.data, col);
		types = lappend_oid(types, typid);
		*typmods_out = lappend_int(*typmods_out, typmod);
		*collations_out = lappend_oid(*collations_out, column_collation(col, typid));
		*names_out = lappend(*names_out, makeString(col->colname));
	}
	return types;

invalid:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
			 errmsg("invalid column list: \"%s\"", columns),
			 errdetail("Only column names and types are allowed; constraints and table clauses are not."),
			 errhint("Write the columns as in CREATE TABLE, for example 'order_id bigint, region text, event_time timestamptz'.")));
	return NIL;					/* keep compiler quiet */
}


/*
 * streamwin.create_kafka_source(name, brokers, topic, columns, format, options)
 */
Datum
streamwin_create_kafka_source(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *brokers;
	char	   *topic;
	char	   *columns;
	char	   *format_name;
	Jsonb	   *options;
	SourceFormat format;
	List	   *types;
	List	   *typmods = NIL;
	List	   *collations = NIL;
	List	   *names = NIL;
	Oid			relid;
	KafkaOptions *ko;

	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("arguments of create_kafka_source must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	brokers = text_to_cstring(PG_GETARG_TEXT_PP(1));
	topic = text_to_cstring(PG_GETARG_TEXT_PP(2));
	columns = text_to_cstring(PG_GETARG_TEXT_PP(3));
	format_name = text_to_cstring(PG_GETARG_TEXT_PP(4));
	options = PG_GETARG_JSONB_P(5);

	if (brokers[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("brokers must not be empty"),
				 errhint("Give a comma-separated list of host:port, for example 'localhost:9092'.")));
	if (topic[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic must not be empty")));
	format = source_format_from_name(format_name);
	ko = source_options_validate(options, format);
	types = parse_column_list(columns, format == SOURCE_FORMAT_JSON, &typmods, &collations, &names);

	SPI_connect();
	source_check_new_name(name);
	relid = source_register(name, "kafka", brokers, topic, InvalidOid, NULL,
							source_format_name(format), columns, options, types, typmods, collations,
							names, ko->envelope != ENVELOPE_APPEND);
	{
		SourceInfo	parsed;
		TupleDesc	desc = source_tupdesc(relid);
		SourceMetadata *meta;

		memset(&parsed, 0, sizeof(parsed));
		parsed.name = name;
		parsed.format = (char *) source_format_name(format);
		parsed.options = options;
		parse_source_options(&parsed, options);
		check_key_columns(ko, name, desc, source_metadata_map(&parsed, desc));
		meta = changelog_decode_map(&parsed, desc, ko->envelope, ko->key_columns);
		avro_check_options(options, format, desc, meta, ko->envelope == ENVELOPE_DEBEZIUM);
		decoder_check_columns(format, desc, meta);
	}
	SPI_finish();
	PG_RETURN_VOID();
}
