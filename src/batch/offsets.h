/*-------------------------------------------------------------------------
 *
 * offsets.h
 *	  Where a query is in its sources, stored with every batch, and its
 *	  event-time watermark (offsets.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_OFFSETS_H
#define STREAMWIN_OFFSETS_H

#include "runner.h"

/*
 * offsets_load
 *		The query's stored positions and watermark inputs, into its
 *		reader's partitions (has_position false where none is stored).
 *		Inside a transaction.
 */
extern void offsets_load(QueryRunner *r);

/*
 * offsets_position
 *		Resolve the start of partitions without a position (the source's
 *		starting_offsets, or in a query already started, its beginning),
 *		then have the reader read from every partition's position.
 */
extern void offsets_position(QueryRunner *r);

/*
 * offsets_compute_watermark
 *		Fold this batch's event times into the partitions and compute the
 *		query watermark as of now.  Returns false when it has none yet.
 */
extern bool offsets_compute_watermark(QueryRunner *r, bool has_old, TimestampTz old,
									  TimestampTz now, TimestampTz *wm);

/* Write every partition's position in the current transaction. */
extern void offsets_store(QueryRunner *r);

/*
 * offsets_start_resolved_at_creation / offsets_resolve_starts
 *		Whether a query of source src has its start resolved when it is
 *		created ("latest" of a source that records no start itself); and
 *		resolving and storing those of the new query r, at create_query.
 */
extern bool offsets_start_resolved_at_creation(SourceInfo *src);
extern void offsets_resolve_starts(QueryRunner *r);

/* The positions as JSON, for the progress record (palloc'd). */
extern char *offsets_json(QueryRunner *r);

/* Source s's positions in JSON that offsets_json wrote, or NULL. */
extern Jsonb *offsets_json_source(QueryRunner *r, Jsonb *offsets, int s);

#endif							/* STREAMWIN_OFFSETS_H */
