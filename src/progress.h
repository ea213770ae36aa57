/*-------------------------------------------------------------------------
 *
 * progress.h
 *	  What users see of batches: streamwin.progress rows and the query's
 *	  status (progress.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_PROGRESS_H
#define STREAMWIN_PROGRESS_H

#include "batch.h"

/* The batch's progress row; advances the query's batch id and watermark. */
extern void progress_record(QueryRunner *r, BatchStats *stats);

/* A failed batch, recorded in a transaction of its own after the rollback. */
extern void progress_record_failure(int32 query_id, const char *message);

/* A batch succeeded (perhaps with nothing to do): no longer failing. */
extern void progress_clear_failure(int32 query_id);

#endif							/* STREAMWIN_PROGRESS_H */
