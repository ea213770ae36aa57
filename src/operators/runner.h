/*-------------------------------------------------------------------------
 *
 * runner.h
 *	  What a backend keeps between batches of one query: the query, a
 *	  reader and a decoder per source, its prepared statements and its
 *	  operators; and running its statements (runner.c).  A backend's
 *	  runners are made and forgotten by runner_cache.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_RUNNER_H
#define STREAMWIN_RUNNER_H

#include "executor/spi.h"
#include "tcop/dest.h"

#include "batch_input.h"
#include "source.h"
#include "statements.h"
#include "catalog_types.h"

/*
 * One query's runner, in its own memory context under TopMemoryContext.
 * A worker has one; a session one per query it runs batches of.
 */
typedef struct QueryRunner
{
	int32		query_id;
	MemoryContext cxt;
	MemoryContext batch_cxt;	/* reset at the start of every batch */
	QueryInfo  *query;
	int			nreaders;		/* = query->nsources */
	SourceReader *readers[QUERY_MAX_SOURCES];	/* one per source */
	RowDecoder *decoders[QUERY_MAX_SOURCES];
	SPIPlanPtr	plans[NUM_STATEMENTS];
	struct Operator *operators; /* the query's stateful operators, in the
								 * order rows flow (operator.h) */
	int			insert_variants_paused; /* batches left without them */
	TimestampTz last_checkpoint_at; /* by this runner; 0: none yet */
	bool		in_worker;		/* run by the query's background worker */
	bool		in_batch;		/* a batch of it is running in this backend */
	TransactionId catalog_xmin; /* the transaction that wrote the query's
								 * catalog row as far as this runner knows:
								 * another one's (a reset_query) may have
								 * moved its sources' starts */
	bool		one_transaction;	/* its batches share the caller's
									 * transaction (run_available): they
									 * may keep rows back from their tables
									 * until operators_sync, which run.c
									 * calls after the last (a checkpoint
									 * that copies a table without the rows
									 * kept back, and a store that stops
									 * fitting in memory, before they read
									 * them) */
} QueryRunner;

/*
 * Is the runner in a single batch of a session (run_batch), rather than in
 * a worker or in run_available/catch_up, whose batches follow one another
 * at once (run.c tells the readers so: fetch_again)?
 */
static inline bool
runner_single_batch(const QueryRunner *r)
{
	return !r->in_worker && !(r->nreaders > 0 && r->readers[0]->fetch_again);
}

/*
 * runner_run
 *		Execute statement s as the query's owner, with args (NULL: none).
 *		input: the batch's rows (a list, one per source), which the sources'
 *		views return meanwhile, or NULL.  Returns SPI_processed.  Inside SPI.
 */
extern uint64 runner_run(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args);

/*
 * runner_run_writing
 *		Run statement s, which writes result rows, through its insert
 *		variant where it may (see runner.c), else as runner_run.
 */
extern void runner_run_writing(QueryRunner *r, QueryStatement s, BatchInput *input,
							   Datum *args, bool replay);

/*
 * runner_run_indexes
 *		Execute statement s, which makes or drops indexes of a state table,
 *		as the extension's owner: they are made in schema streamwin, where
 *		the query's owner may create nothing.  Inside SPI.
 */
extern void runner_run_indexes(QueryRunner *r, QueryStatement s);

/* runner_run, the rows going to dest instead of SPI_tuptable */
extern uint64 runner_run_into(QueryRunner *r, QueryStatement s, BatchInput *input,
							  Datum *args, DestReceiver *dest);

/*
 * runner_try_insert
 *		Run statement s, which only inserts result rows, if insert variants
 *		may run now (see runner.c): true if it ran; false if it did not run
 *		or met a row the result has already, having rolled back its
 *		writes, so that the caller writes those rows with an upsert.
 */
extern bool runner_try_insert(QueryRunner *r, QueryStatement s, bool replay);

/*
 * runner_append
 *		A transform's rows appended to its result: by statement insert, or
 *		by statement rows (the same rows alone) and the table AM's
 *		multi-insert.
 */
extern void runner_append(QueryRunner *r, QueryStatement insert, QueryStatement rows,
						  BatchInput *input);

#endif							/* STREAMWIN_RUNNER_H */
