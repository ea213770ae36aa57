/*-------------------------------------------------------------------------
 *
 * checkpoint.h
 *	  Crash recovery of UNLOGGED query state: checkpoints and replay.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CHECKPOINT_H
#define STREAMWIN_CHECKPOINT_H

#include "runner.h"

extern int	streamwin_checkpoint_interval;
extern bool streamwin_table_checkpoint_every_batch;
extern int	streamwin_checkpoint_min_interval;

extern Oid	checkpoint_create_table(int32 query_id, Oid unlogged_table, const char *name,
									bool incremental);
extern void checkpoint_index_table(int32 query_id, Oid checkpoint_table, const char *columns);

/*
 * A query's UNLOGGED tables, each with its logged checkpoint copy: its
 * state (open groups), its dedup keys, a join's rows per side, an upsert
 * source's last row per key.  A table
 * whose rows an operator keeps in memory in the batch (operator.h) has its
 * checkpoint written by the operator: what changed since the last one, by
 * row location.  The others' are written one of these ways:
 */
#define MAX_STATE_TABLES (3 + QUERY_MAX_SOURCES)
typedef enum CheckpointWay
{
	CHECKPOINT_COPY,			/* copied whole */
	CHECKPOINT_ROWS				/* rows written by the batch that read them,
								 * and deleted by their event time (dedup
								 * keys, a join's sides): the rows of the
								 * batches since the last checkpoint added,
								 * those deleted since deleted */
} CheckpointWay;

typedef struct StateTablePair
{
	Oid			unlogged;
	Oid			logged;
	CheckpointWay way;
	/* CHECKPOINT_ROWS: the columns of the batch that wrote a row ... */
	const char *batch_column;
	/* ... and of its event time (NULL: rows are never deleted) */
	const char *time_column;

	/*
	 * A join's side: its rows out of reach (NULL: behind the watermark), and
	 * for a preserved side, the columns of its rows' versions: a row changes
	 * once, when it matches, and a checkpoint adds it again then (see
	 * checkpoint.c).
	 */
	const struct JoinSidePlan *join_side;
} StateTablePair;
extern int	query_state_tables(const QueryInfo *q, StateTablePair *pairs);

/* Does the query keep UNLOGGED state, which a crash can lose? */
#define QUERY_HAS_UNLOGGED_STATE(q) (query_state_tables((q), NULL) > 0)
extern bool checkpoint_state_lost(QueryRunner *r);
extern int64 checkpoint_restore(QueryRunner *r);
extern bool checkpoint_take(QueryRunner *r, int64 batch_id, bool has_wm, TimestampTz wm,
							bool wait);
extern void checkpoint_move_positions(QueryRunner *r);
extern void checkpoint_replay_bounds(QueryRunner *r, int64 batch_id, SourcePosition **targets,
									 bool *has_prev_wm, TimestampTz *prev_wm,
									 bool *has_wm, TimestampTz *wm);
extern TimestampTz checkpoint_replay_timestamp(QueryRunner *r, int64 batch_id);
extern void checkpoint_note_replayed(QueryRunner *r, int64 batch_id);
extern bool checkpoint_after_batch(QueryRunner *r, int64 batch_id, int64 checkpoint_batch,
								   bool has_wm, TimestampTz wm, TimestampTz now);

#endif
