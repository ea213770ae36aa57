/*-------------------------------------------------------------------------
 *
 * catalog_log.h
 *	  What users read of batches and rejected rows, in streamwin's catalog
 *	  (catalog_log.c): progress_log (a row per batch, which crash recovery
 *	  also replays from), dead_letter_log and late_row_log.
 *
 * Functions run inside a transaction; each connects to SPI itself.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CATALOG_LOG_H
#define STREAMWIN_CATALOG_LOG_H

#include "datatype/timestamp.h"

/*
 * The stages of a batch (batch.c), whose times streamwin.progress shows in
 * stage_ms: the query's lock and where it stood (begin), positioning and
 * reading the sources (fetch), turning messages into rows (decode), the
 * watermark and the operators' statements (apply), writing results and
 * state (emit), the bookkeeping up to the progress row (finish), and the
 * checkpoint of the state when one is taken (checkpoint).
 */
typedef enum BatchStage
{
	BATCH_STAGE_BEGIN,
	BATCH_STAGE_FETCH,
	BATCH_STAGE_DECODE,
	BATCH_STAGE_APPLY,
	BATCH_STAGE_EMIT,
	BATCH_STAGE_FINISH,
	BATCH_STAGE_CHECKPOINT,
	NUM_BATCH_STAGES
} BatchStage;

/* What a batch did: returned as jsonb and written to streamwin.progress. */
typedef struct BatchStats
{
	int64		batch_id;		/* 0: nothing to do, no batch recorded */
	TimestampTz started_at;
	double		duration_ms;
	double		stage_ms[NUM_BATCH_STAGES]; /* of duration_ms, per stage */
	int64		input_rows;
	int64		late_rows;
	int64		late_retractions;	/* of them, a changelog's retractions */
	int64		duplicates;
	int64		dead_letters;
	int64		state_rows;
	bool		has_watermark;
	TimestampTz watermark;
	bool		replayed;		/* a batch re-run during crash recovery */
	bool		changelog;		/* the query reads a changelog source */
	bool		full;			/* a source gave max_records_per_batch rows:
								 * it has more */
	double		input_rows_per_second;
	double		processed_rows_per_second;
	char	   *offsets_json;
	char	   *missing_keys_json;	/* per column, the messages that lacked
									 * its key; NULL: none did */
} BatchStats;

/*
 * Insert the progress row of a batch of query `query`, and delete the
 * query's rows more than retention batches old, but, for a query whose
 * batches a crash makes it replay, none after its last checkpoint.
 */
extern void catalog_log_progress(const char *query, const BatchStats *row, int retention,
								 bool replayed_after_crash);

/*
 * The watermark of a query at the end of batch_id: the checkpoint's, if
 * batch_id is its checkpoint's, else its progress row's.  False: none.
 */
extern bool catalog_recorded_watermark(int32 query_id, int64 batch_id, TimestampTz *wm);

/*
 * A column of the progress row of batch batch_id (offsets, started_at,
 * state_rows), not
 * NULL in any row, in CurrentMemoryContext; false if there is no such row.
 */
extern bool catalog_progress_column(int32 query_id, int64 batch_id, const char *column,
									Datum *value);

/*
 * Rejected rows: dead letters of source `source` (status 'd', details the
 * errors as text[]), or late rows of query `query` (status 'l', details
 * their event times as timestamptz[], that missed watermark); parts,
 * offsets and payloads are int4[], int8[] and bytea[] of the same length.
 * Each is kept once per position, however many queries read it.
 */
extern void catalog_log_rejected(char status, const char *query, const char *source,
								 Datum parts, Datum offsets, Datum payloads, Datum details,
								 TimestampTz watermark);

#endif							/* STREAMWIN_CATALOG_LOG_H */
