/*-------------------------------------------------------------------------
 *
 * runner.h
 *	  What a backend keeps between batches of one query: the query, a
 *	  reader and a decoder per source, and its prepared statements
 *	  (runner.c).
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
#include "streamwin.h"

/*
 * One of the query's state stores (state_store.h), and how this runner
 * uses it.
 */
typedef struct RunnerStore
{
	struct StateStore *store;	/* or NULL: the query has none */
	bool		active;			/* this batch runs on the store */
	bool		table_mode;		/* it did not fit in memory: the SQL
								 * statements run on its table */
	int64		table_mode_batches; /* batches since, or since trying again */
} RunnerStore;

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
	RunnerStore groups;			/* an aggregation's open groups */
	RunnerStore dedup;			/* the dedup keys */
	int			insert_variants_paused; /* batches left without them */
	TimestampTz last_checkpoint_at; /* by this runner; 0: none yet */
	/* a join's rows per side (join.c): in this batch, and as of the */
	int64		join_rows[QUERY_MAX_SOURCES];
	int64		join_rows_committed[QUERY_MAX_SOURCES];
	TransactionId join_rows_xmin;	/* transaction that wrote the catalog row
									 * then (invalid: unknown) */
	bool		in_worker;		/* run by the query's background worker */
} QueryRunner;

/*
 * runner_get
 *		The runner of a query in this backend, created on first use: loads
 *		the query, opens a reader and a decoder per source, prepares its
 *		statements.  Must be called inside a transaction.
 */
extern QueryRunner *runner_get(int32 query_id, bool in_worker);

/*
 * The query's state tables were rewritten outside a batch (reset_query):
 * whatever the runner keeps of them is stale.
 */
extern void runner_state_rewritten(QueryRunner *r);

/* Drop a query's runner (after drop_query, an error, or when a worker exits). */
extern void runner_forget(int32 query_id);

/*
 * If this backend's runner of q was built with other settings than q has
 * now (alter_query changed them), forget it; returns whether it did.
 */
extern bool runner_settings_changed(const QueryInfo *q);

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

#endif							/* STREAMWIN_RUNNER_H */
