/*-------------------------------------------------------------------------
 *
 * batch.h
 *	  Running micro-batches: the per-backend query runner, batch input
 *	  decoding, offsets and watermark, and progress records.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_BATCH_H
#define STREAMWIN_BATCH_H

#include "executor/spi.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"

#include "kafka_source.h"
#include "source.h"
#include "table_source.h"
#include "streamwin.h"

/* One partition of a query's source, as the runner tracks it. */
typedef struct PartitionState
{
	int32		partition;
	int64		next_offset;	/* stored: first offset not yet processed
								 * (table sources: an LSN, see
								 * table_source.h) */
	int64		next_index;		/* table sources: rows of that commit done */
	bool		has_max_event_time;
	TimestampTz max_event_time;
	TimestampTz last_data_at;
	/* this batch */
	int64		batch_rows;
	bool		batch_has_max;
	TimestampTz batch_max_event_time;
} PartitionState;

/*
 * Everything a backend keeps between batches of one query: the Kafka
 * consumer, the decoder, the prepared statements.  Lives in its own memory
 * context under TopMemoryContext.
 */
typedef struct QueryRunner
{
	int32		query_id;
	MemoryContext cxt;
	MemoryContext batch_cxt;	/* reset at the start of every batch */
	QueryInfo  *query;
	SourceInfo *source;
	TupleDesc	source_desc;
	MessageDecoder *decoder;
	SourceMetadata *metadata;	/* per source column, or NULL: see decode.h */
	bool		needs_headers;	/* a column holds the message headers */

	/* event time, evaluated over decoded source rows */
	ExprState  *event_time;
	ExprContext *econtext;
	TupleTableSlot *slot;

	KafkaConsumer *consumer;
	int			nparts;
	PartitionState *parts;		/* the partitions this query reads */
	int64	   *consumer_next;	/* where the consumer is positioned, per part */
	bool		assigned;
	int			max_partition;
	int		   *part_index;		/* partition number -> index in parts, or -1 */

	/* table sources (see table_source.h) */
	bool		table_at_end;	/* the last fetch read everything committed */
	XLogRecPtr	table_end_of_wal;	/* the WAL position it read up to */
	int64		table_ignored[3];	/* updates, deletes, truncates ignored */
	TablePosition table_replay_target;	/* where a replayed batch ended */
	TimestampTz table_idle_stored_at;	/* last store of an idle position */
	TimestampTz last_checkpoint_at; /* by this runner; 0: none yet */
	bool		fetch_again;	/* run_available: batches follow at once */
	bool		in_worker;		/* run by the query's background worker */

	SPIPlanPtr	batch_plan;
	SPIPlanPtr	close_plan;
	SPIPlanPtr	batch_insert_plan;	/* see run_insert_variant() */
	SPIPlanPtr	close_insert_plan;
	int			insert_variants_paused; /* batches left without them */
	SPIPlanPtr	clear_plan;
	SPIPlanPtr	refresh_plan;
	SPIPlanPtr	state_count_plan;
	SPIPlanPtr	dedup_plan;
	SPIPlanPtr	dedup_evict_plan;
} QueryRunner;

/* What a batch did: returned as jsonb and written to streamwin.progress. */
typedef struct BatchStats
{
	int64		batch_id;		/* 0: nothing to do, no batch recorded */
	TimestampTz started_at;
	double		duration_ms;
	int64		input_rows;
	int64		late_rows;
	int64		duplicates;
	int64		dead_letters;
	int64		state_rows;
	bool		has_watermark;
	TimestampTz watermark;
	bool		replayed;		/* a batch re-run during crash recovery */
	double		input_rows_per_second;
	double		processed_rows_per_second;
	char	   *offsets_json;
} BatchStats;

/* batch.c */
extern int	streamwin_batch_work_mem;
extern QueryRunner *runner_get(int32 query_id);
extern void runner_forget(int32 query_id);
extern bool runner_settings_changed(const QueryInfo *q);
extern void batch_execute(QueryRunner *r, int fetch_timeout_ms, int linger_ms, BatchStats *stats);
extern ErrorData *run_in_subtransaction(void (*fn) (void *arg), void *arg);
extern Jsonb *batch_stats_jsonb(QueryRunner *r, BatchStats *stats);

/* batch_input.c */
typedef struct BatchMessageResult
{
	char		status;			/* 'o'k, 'l'ate, 'd'ead letter */
	bool		has_event_time;
	TimestampTz event_time;
	HeapTuple	tuple;
	const char *error;
} BatchMessageResult;

extern void batch_input_init(QueryRunner *r);
extern BatchMessageResult *batch_input_decode(QueryRunner *r, KafkaMessage *msgs, int n,
											  bool drop_late, TimestampTz watermark);

/* offsets.c */
extern void offsets_load(QueryRunner *r);
extern void offsets_assign(QueryRunner *r);
extern bool offsets_compute_watermark(QueryRunner *r, bool has_old, TimestampTz old,
									  TimestampTz now, TimestampTz *wm);
extern void offsets_store(QueryRunner *r);
extern char *offsets_json(QueryRunner *r);
extern bool offsets_partition_at_end(QueryRunner *r, PartitionState *p);
extern XLogRecPtr offsets_table_retained(QueryRunner *r);
extern TablePosition offsets_parse_table_position(Jsonb *offsets);

/* progress.c */
extern void progress_record(QueryRunner *r, BatchStats *stats);
extern void progress_record_failure(int32 query_id, const char *message);
extern void progress_clear_failure(int32 query_id);

#endif
