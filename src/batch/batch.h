/*-------------------------------------------------------------------------
 *
 * batch.h
 *	  One micro-batch of a query, start to finish (batch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_BATCH_H
#define STREAMWIN_BATCH_H

#include "utils/jsonb.h"

#include "runner.h"

/* streamwin.batch_work_mem (kB): work_mem of batch statements; -1: work_mem */
extern int	streamwin_batch_work_mem;

/* streamwin.progress_retention: batches kept per query in streamwin.progress */
extern int	streamwin_progress_retention;

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
	bool		full;			/* a source gave max_records_per_batch rows:
								 * it has more */
	double		input_rows_per_second;
	double		processed_rows_per_second;
	char	   *offsets_json;
	char	   *missing_keys_json;	/* per column, the messages that lacked
									 * its key; NULL: none did */
} BatchStats;

/*
 * batch_execute
 *		Run one micro-batch in the current transaction: state, results,
 *		positions and progress are written in it, or not at all.
 *		stats->batch_id is 0 when there was nothing to do (no row, no
 *		watermark move); then nothing is written.
 */
extern void batch_execute(QueryRunner *r, int fetch_timeout_ms, int linger_ms,
						  BatchStats *stats);

/* A batch's progress record, as run_batch returns it. */
extern Jsonb *batch_stats_jsonb(QueryRunner *r, BatchStats *stats);

#endif							/* STREAMWIN_BATCH_H */
