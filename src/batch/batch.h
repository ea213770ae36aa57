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

#include "catalog_log.h"
#include "runner.h"

/* streamwin.batch_work_mem (kB): work_mem of batch statements; -1: work_mem */
extern int	streamwin_batch_work_mem;

/* streamwin.progress_retention: batches kept per query in streamwin.progress */
extern int	streamwin_progress_retention;


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
