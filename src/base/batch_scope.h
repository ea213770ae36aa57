/*-------------------------------------------------------------------------
 *
 * batch_scope.h
 *	  The batch this backend is running, for the code that PostgreSQL's
 *	  executor calls back in the middle of it (batch_scope.c).
 *
 * A batch's statements read its decoded rows through each source's view
 * (streamwin.source_rows(), or the custom scan that replaces it), its
 * processing time through streamwin.batch_timestamp(), and a state
 * store's groups through streamwin.store_rows().  Those are called by the
 * executor, with no way for the batch to hand them an argument, so they
 * find the batch through one process-wide pointer: the current batch
 * scope.  batch.c enters the scope when a batch begins and leaves it when
 * the batch ends, on error too; nothing else sets it, and nothing else of
 * a batch is global.  What the stages of a batch share they pass to one
 * another (operator.h).
 *
 * The scope's fields change during the batch:
 *	- reading: set by runner_run around each statement, to what that
 *	  statement reads (the batch's rows, one side's, a join's unmatched
 *	  rows), NULL between statements;
 *	- store: set by the aggregation operator while its store runs the
 *	  batch.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_BATCH_SCOPE_H
#define STREAMWIN_BATCH_SCOPE_H

#include "access/tupdesc.h"
#include "datatype/timestamp.h"

/*
 * A row of a batch, as the decoder made it: the values of the source's
 * natts columns, then their natts null flags, in one chunk.  Values passed
 * by reference point into memory that lives as long as the batch.  Rows are
 * kept as values rather than formed into tuples because every reader of
 * them (the source scan, the function) wants values: a tuple would be
 * formed only for each reader to deform it again.
 */
typedef Datum *BatchRow;

#define BATCH_ROW_NULLS(row, natts)	((bool *) ((row) + (natts)))

/* A row of a batch holding these values (not copied), in CurrentMemoryContext. */
extern BatchRow batch_row_make(int natts, const Datum *values, const bool *isnull);

/*
 * Decoded rows of a batch for one source, and through next for the
 * query's other sources (a join's).  A source's view returns the rows of
 * its source in the list that the current scope is reading, and nothing
 * for a source not in it.
 */
typedef struct BatchInput
{
	int32		source_id;
	int			natts;			/* of the source's row type */
	TupleDesc	desc;			/* that row type: what a call of
								 * source_rows() must expect (see
								 * batch_input_check) */
	int			nrows;
	BatchRow   *rows;
	struct BatchInput *next;

	/*
	 * Rows made a chunk at a time as they are read (a join's pairs,
	 * join_store_pairs): rows holds the current chunk, and refill replaces
	 * it with the next one, or with the first when restart, returning false
	 * when there is none.  A reader restarts when it begins.  NULL: rows
	 * holds them all.
	 */
	bool		(*refill) (struct BatchInput *input, bool restart);
} BatchInput;

struct StateStore;

typedef struct BatchScope
{
	int32		query_id;
	Oid			owner;			/* the query's: whose rows these are */
	TimestampTz timestamp;		/* the batch's processing time: its own, or
								 * a replayed batch's recorded one */
	BatchInput *reading;		/* what the sources' views return now */
	struct StateStore *store;	/* what streamwin.store_rows() reads */
	struct BatchScope *outer;	/* the scope this one interrupted */
} BatchScope;

/*
 * batch_scope_enter / batch_scope_leave
 *		Make scope the current one, and put back the one it interrupted (a
 *		run_batch called by a statement of another batch).  The caller owns
 *		the scope's memory and must leave it before freeing it, also on
 *		error (PG_FINALLY).
 */
extern void batch_scope_enter(BatchScope *scope);
extern void batch_scope_leave(BatchScope *scope);

/* The current scope, or NULL outside a batch. */
extern BatchScope *batch_scope_current(void);

/*
 * batch_scope_set_reading, batch_scope_set_store, batch_scope_next_statement
 *		Change what the current statement reads, or begin the next one.
 *
 * batch_scope_generation
 *		A number that changes with each of those, and with each scope
 *		entered or left.  A scan that reads the batch's rows in place (the
 *		custom scans of source_scan.c) takes it when it begins and reads no
 *		more once it changed: a cursor that a function of the query opened
 *		in one statement and fetches from in another, or after the batch,
 *		would read rows that are gone.
 */
extern void batch_scope_set_reading(BatchScope *scope, BatchInput *input);
extern void batch_scope_set_store(BatchScope *scope, struct StateStore *store);
extern void batch_scope_next_statement(void);
extern uint64 batch_scope_generation(void);

/*
 * The rows of source_id that the current statement reads, or NULL: outside
 * a batch, between statements, or a source the statement does not read.
 */
extern BatchInput *batch_scope_input(int32 source_id);

/*
 * Refuse a call (what) that reads rows of type `have` as row type `want`:
 * each column must be of the type the rows hold, after a first column of
 * type first_type when that is valid (a numbered source's position, a
 * stored group's result row location).
 * The rows are Datums, which a column of another type would read as
 * something else (an integer as a pointer): source_rows() and store_rows()
 * are SQL-callable, and a role's function can call them inside a batch
 * with a column list of its own.
 */
extern void batch_rows_check_type(TupleDesc have, TupleDesc want, Oid first_type, const char *what);

/*
 * What now() stands for in a continuous query: the current batch's
 * timestamp, or outside a batch the start of the transaction.
 */
extern TimestampTz batch_scope_timestamp(void);

/* The store streamwin.store_rows(query_id, ...) reads, or NULL: none now. */
extern struct StateStore *batch_scope_store(int32 query_id);

#endif							/* STREAMWIN_BATCH_SCOPE_H */
