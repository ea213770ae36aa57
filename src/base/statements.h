/*-------------------------------------------------------------------------
 *
 * statements.h
 *	  The SQL statements a compiled query runs in its batches, described
 *	  once: create_query writes them into query_catalog.plan under their
 *	  keys, catalog.c reads them into QueryInfo.sql[], and a runner
 *	  prepares them with their argument types (statements.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_STATEMENTS_H
#define STREAMWIN_STATEMENTS_H

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"

typedef enum QueryStatement
{
	STMT_BATCH,					/* over the batch's rows: merge partial
								 * aggregates into the state (and, in update
								 * mode, upsert results), or append a
								 * transform's rows */
	STMT_BATCH_INSERT,			/* its insert variant, or absent */
	STMT_BATCH_ROWS,			/* an append-only transform: the rows its
								 * STMT_BATCH inserts, alone, for a
								 * multi-insert (absent in queries created
								 * before it) */
	STMT_CLOSE,					/* $1 watermark: emit and evict closed windows
								 * (append), or evict them (update) */
	STMT_CLOSE_INSERT,			/* its insert variant, or absent */
	STMT_CLEAR,					/* complete mode: empty the result ... */
	STMT_REFRESH,				/* ... and write it anew from the state */
	STMT_STATE_COUNT,			/* how many rows the state holds */
	STMT_DEDUP,					/* $1 batch id: insert the first occurrence of
								 * each new dedup key, return its position in
								 * the batch */
	STMT_DEDUP_EVICT,			/* $1 watermark: forget keys it passed */
	STMT_DEDUP_ROWS,			/* with a dedup store: the dedup side's rows
								 * as (keys..., event time, position) */
	STMT_DEDUP_INDEX,			/* the dedup table's indexes, for STMT_DEDUP
								 * and STMT_DEDUP_EVICT ... */
	STMT_DEDUP_UNINDEX,			/* ... which the store does without */

	/*
	 * An upsert source's rows (op_upsert.c) when its store runs on its table:
	 * the batch's rows as changes (the retraction of each key's last row,
	 * the new row), the table brought to each key's last row, its size, and
	 * its index, which the store does without; and a truncate of the source
	 * (a Debezium event): every key's row deleted, returned as a retraction
	 * (absent in queries created before it).
	 */
	STMT_UPSERT_ROWS,
	STMT_UPSERT_WRITE,
	STMT_UPSERT_COUNT,
	STMT_UPSERT_INDEX,
	STMT_UPSERT_UNINDEX,
	STMT_UPSERT_TRUNCATE,

	/*
	 * With a state store (state_store.h): the batch's groups, and the result
	 * rows written from the store's groups (streamwin.store_rows); the update
	 * and upsert return (window_start, keys..., ctid) of the rows they wrote,
	 * so that the store knows where they are.
	 */
	STMT_STORE_GROUPS,			/* the batch's groups with their partials */
	STMT_STORE_BATCH_ROWS,		/* ... or its rows, each with its own, for
								 * the store to fold (NULL: a plan where they
								 * do not fold so) */
	STMT_STORE_INSERT,			/* update mode: groups new to the result */
	STMT_STORE_INSERT_ROWS,		/* ... its rows alone, for a multi-insert */
	STMT_STORE_UPDATE,			/* ... groups whose result row is known */
	STMT_STORE_UPSERT,			/* ... the other groups */
	STMT_STORE_CLOSE,			/* append mode: closed windows' groups */
	STMT_STORE_CLOSE_ROWS,		/* ... their rows alone, for a multi-insert */
	STMT_STORE_CLOSE_UPSERT,	/* ... when the result has some already */
	STMT_STORE_REFRESH,			/* complete mode: every group */
	STMT_STORE_DELETE,			/* update mode: result rows of sessions gone */
	STMT_STATE_INDEX,			/* the state table's index, for STMT_BATCH to
								 * STMT_STATE_COUNT ... */
	STMT_STATE_END_INDEX,		/* ... and a session's index by end ... */
	STMT_STATE_UNINDEX,			/* ... which the store does without */

	/*
	 * A stream-stream join (op_join.c): each side's new rows into its join state
	 * ($1: the batch's id; the preserved side's return where they went), the
	 * preserved side's rows that found a match marked so ($1 tid[]: where its
	 * new rows went; $2: the batch's id, which marks them too), each side's
	 * rows the watermark put out of reach deleted ($1: the event time before
	 * which they go; the preserved side's returned, to emit those without a
	 * match), and those rows as the query's output: a transform's or the SQL
	 * path's rows, or a store's groups.
	 */
	STMT_JOIN_INSERT_0,
	STMT_JOIN_INSERT_1,
	STMT_JOIN_INSERT_ROWS_0,	/* ... a side's rows alone, for a multi-insert
								 * (not the preserved side's: it needs where
								 * they went) */
	STMT_JOIN_INSERT_ROWS_1,
	STMT_JOIN_MATCH,
	STMT_JOIN_EVICT_0,
	STMT_JOIN_EVICT_1,
	STMT_JOIN_UNMATCHED,
	STMT_JOIN_UNMATCHED_ROWS,	/* ... a transform's: its rows alone, for a
								 * multi-insert (absent in queries created
								 * before it) */
	STMT_JOIN_UNMATCHED_GROUPS,

	/*
	 * A join kept by a join store (join.h), when its state runs on its
	 * tables: the rows of a side's join table that share a key with the other
	 * side's new rows (what the store finds in memory), and each side's
	 * indexes for them and for eviction, which the store does without.
	 */
	STMT_JOIN_STATE_ROWS_0,
	STMT_JOIN_STATE_ROWS_1,
	STMT_JOIN_INDEX_0,
	STMT_JOIN_INDEX_1,
	STMT_JOIN_UNINDEX,
	NUM_STATEMENTS
} QueryStatement;

/*
 * Insert variants (see run_insert_variant in runner.c): the statement a
 * variant stands in for.
 */
#define STATEMENT_HAS_VARIANT(s) ((s) == STMT_BATCH || (s) == STMT_CLOSE)

/*
 * Statements that write rows by location (a TID join): planned with every
 * other way of finding the rows disabled, see runner_run.
 */
#define STATEMENT_BY_LOCATION(s) ((s) == STMT_STORE_UPDATE)

/*
 * Statements that delete a range of rows by an index: planned with the
 * other ways of finding them disabled (see runner.c).
 */
#define STATEMENT_BY_INDEX(s) ((s) == STMT_JOIN_EVICT_0 || (s) == STMT_JOIN_EVICT_1)

/* Append statement s (sql) to a plan being written as a JSON object. */
extern void plan_add_statement(StringInfo plan, QueryStatement s, const char *sql);

/* Read every statement of a plan into sql[] (NULL where absent). */
extern void plan_read_statements(Jsonb *plan, char **sql);

/* Prepare and keep every statement of sql[] (NULL stays NULL); inside SPI. */
extern void statements_prepare(char *const *sql, SPIPlanPtr *plans);
extern void statements_free(SPIPlanPtr *plans);

#endif							/* STREAMWIN_STATEMENTS_H */
