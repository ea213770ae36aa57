/*-------------------------------------------------------------------------
 *
 * join.h
 *	  Stream-stream joins: what a compiled join keeps in its plan
 *	  (join_plan.c); its operator (op_join.c) keeps the join's state in a
 *	  batch.
 *
 * A query over two sources joins them on an equality and an event-time
 * range, Spark's stream-stream join: every pair of rows that meets the
 * condition is produced once, whichever side arrives first.  Each side
 * keeps its rows that can still match in an UNLOGGED join table of its
 * own (the source's columns, its event time, the batch that wrote it,
 * and for the preserved side of an outer join its number in that batch
 * and whether and in which batch it matched), with an index on the join
 * keys, so that a batch costs its rows and the matches they find.  A batch
 *
 *	1. joins its new rows of each side with the other side's new rows and
 *	   with the other side's join table (the compiled batch statement, a
 *	   union of those three joins, compile_join.c);
 *	2. adds its new rows to their side's join table and, in an outer join,
 *	   marks the preserved side's rows that found a match;
 *	3. deletes the rows the watermark put out of reach: a row of side 0 at
 *	   event time t can meet a row of side 1 at t + lo .. t + hi only, so
 *	   it goes once t + hi is behind the watermark (which every row to
 *	   come is not), and one of side 1 once t - lo is; the preserved
 *	   side's rows that never matched are emitted then, NULL-extended.
 *
 * With a join store (JoinPlan.nkeys, below), step 1 reads the other side's
 * join table as the rows of it that share a key with the new rows, found
 * in memory, in two joins rather than three (JOIN_ROWS_AND_STATE), or
 * reads the pairs themselves, found in C (JOIN_PAIRS); step 2
 * writes the join tables by location and memory together, and step 3 takes the rows from memory in event-time order and
 * deletes them from their tables by location (op_join.c, join_store.h).
 *
 * What follows a join in the query (a windowed aggregate) is held back by
 * the range: a window over side 0's time closes at watermark - hi, since a
 * pair in it may still be found until then (join_held_watermark).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_JOIN_H
#define STREAMWIN_JOIN_H

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#include "catalog_types.h"

typedef struct JoinSidePlan
{
	char	   *event_time_expr;	/* nodeToString() of the side's event
									 * time: its time in the range condition */
	bool		evicted;		/* the range bounds how long a row can match */
	int64		evict_after_us; /* a row goes once its event time plus this is
								 * before the watermark */
	bool		preserved;		/* outer join: rows without a match are
								 * emitted, NULL-extended, when they go */
	char	   *time_column;	/* the join table's columns: the event time, */
	char	   *batch_column;	/* the batch that wrote the row (NULL:
								 * compiled before rows had it) */
	char	   *row_column;		/* the preserved side's: the row's number in
								 * that batch, */
	char	   *matched_batch_column;	/* and the batch that matched it, NULL
										 * until one does (NULL: compiled
										 * before rows had them) */
} JoinSidePlan;

/*
 * A join kept in memory by a join store (join_store.h): an inner join whose
 * equalities all compare a column of each side with an operator that can
 * hash.  Each side's rows are hashed by their keys, and the batch's
 * statements read the rows of the other side's state that share a key
 * with its new rows (streamwin.join_batch_rows(-source_id)) instead of the
 * join table; where the state does not fit in streamwin.state_memory,
 * the operator finds those rows in the join table by SQL instead.
 */
#define JOIN_MAX_KEYS 8

/*
 * With a join store, a batch also gives the first side's new rows followed
 * by its candidates as one set of rows, under the id
 * JOIN_ROWS_AND_STATE(source_id): a join's pairs are then two joins, those
 * rows with the second side's new rows, and the first side's new rows with
 * the second side's candidates, so that the second side's new rows are
 * hashed once.  Source ids come from a sequence, far below the bit; a join
 * whose first source has an id that reaches it (a sequence set by hand)
 * keeps no store.
 */
#define JOIN_ROWS_AND_STATE_BIT 0x40000000
#define JOIN_ROWS_AND_STATE_FITS(source_id) ((source_id) > 0 && (source_id) < JOIN_ROWS_AND_STATE_BIT)
#define JOIN_ROWS_AND_STATE(source_id) ((int32) ((source_id) | JOIN_ROWS_AND_STATE_BIT))

/*
 * A join compiled for pairs (JoinPlan.pairs) reads the batch's pairs
 * instead, found in C (join_store_pairs): every pair of rows with equal
 * keys among side 0's new rows and state and side 1's new rows and state
 * but for state with state, each as one row of side 0's columns followed
 * by side 1's, under the id JOIN_PAIRS(side 0's source id).  Its statement
 * reads them in side 0's place, and side 1 as a LATERAL subquery of the
 * pair's columns (compile_join.c), so that the join's condition is a
 * filter on one scan and no join is planned.
 */
#define JOIN_PAIRS_BIT 0x20000000
#define JOIN_PAIRS_FITS(source_id) ((source_id) > 0 && (source_id) < JOIN_PAIRS_BIT)
#define JOIN_PAIRS(source_id) ((int32) ((source_id) | JOIN_PAIRS_BIT))

typedef struct JoinKeyPlan
{
	AttrNumber	attno[QUERY_MAX_SOURCES];	/* each side's column */
	Oid			op;				/* the equality, */
	Oid			collation;		/* its collation, */
	int			left;			/* and the side of its left operand */
} JoinKeyPlan;

typedef struct JoinPlan
{
	JoinSidePlan sides[QUERY_MAX_SOURCES];
	int64		hold_us;		/* windows over the join close this long after
								 * the watermark passes their end */
	int			nkeys;			/* 0: no join store (compiled before
								 * stores, or a join it cannot keep) */
	bool		pairs;			/* the statements read JOIN_PAIRS (false:
								 * compiled before pairs, or a query they
								 * cannot be read in) */
	JoinKeyPlan keys[JOIN_MAX_KEYS];
} JoinPlan;

/* The plan's "join" member (NULL: not a join), and writing it. */
extern JoinPlan *join_plan_read(Jsonb *plan);
extern void join_plan_json(const JoinPlan *jp, StringInfo plan);

/*
 * The event time before which a side's rows are out of reach at watermark
 * wm (false: none is, or the side keeps its rows).
 */
extern bool join_side_cutoff(const JoinSidePlan *side, TimestampTz wm, TimestampTz *cutoff);

/* The watermark that closes windows over the join. */
extern TimestampTz join_held_watermark(const JoinPlan *jp, TimestampTz watermark);

/* Can a row of event time ts be joined, its time shifted by the range? */
extern bool join_time_fits(const JoinPlan *jp, TimestampTz ts);

#endif							/* STREAMWIN_JOIN_H */
