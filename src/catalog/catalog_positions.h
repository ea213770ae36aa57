/*-------------------------------------------------------------------------
 *
 * catalog_positions.h
 *	  Where each query stands in its sources, in streamwin's catalog
 *	  (catalog_positions.c): query_offsets (the positions a batch commits
 *	  with), query_checkpoints (those of the last checkpoint), state_alive
 *	  (which queries' UNLOGGED state a crash has not emptied).
 *
 * Functions run inside a transaction; each connects to SPI itself.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CATALOG_POSITIONS_H
#define STREAMWIN_CATALOG_POSITIONS_H

#include "datatype/timestamp.h"

/* A partition's stored position, as query_offsets keeps it. */
typedef struct StoredOffset
{
	int			source_index;	/* the source's number in the query */
	int32		partition;
	int64		next_offset;
	int64		next_index;
	bool		has_max_event_time;
	TimestampTz max_event_time;
	TimestampTz last_data_at;
	bool		has_high_watermark; /* the end of the partition, for lag */
	int64		high_watermark;
} StoredOffset;

/*
 * The query's stored positions, in CurrentMemoryContext; *n of them.
 * high_watermark is not read.
 */
extern StoredOffset *catalog_load_offsets(int32 query_id, int *n);

/*
 * Write n positions (insert or update each partition's row); a NULL high
 * watermark keeps the one stored.
 */
extern void catalog_store_offsets(int32 query_id, const StoredOffset *offsets, int n);

/*
 * The checkpoint's positions become the stored ones (none: no positions).
 * A checkpoint of batch 0 has some: those reset_query set before the
 * query's first batch.
 */
extern void catalog_restore_offsets(int32 query_id);

/* The stored positions become the checkpoint's. */
extern void catalog_checkpoint_offsets(int32 query_id);

/* The checkpoint's positions move to the stored ones (no batch since). */
extern void catalog_checkpoint_move_offsets(int32 query_id);

/* Is the query's UNLOGGED state intact (no crash emptied it)? */
extern bool catalog_state_alive(int32 query_id);

/* The query's UNLOGGED state is intact (created, restored, reset). */
extern void catalog_mark_state_alive(int32 query_id);

#endif							/* STREAMWIN_CATALOG_POSITIONS_H */
