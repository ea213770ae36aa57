/*-------------------------------------------------------------------------
 *
 * operator.h
 *	  Stateful operators: the one interface between a batch and what a
 *	  query keeps from one batch to the next (operator.c).
 *
 * A compiled query runs as a chain of operators, each implementing the
 * stages of a batch behind OperatorOps, as PostgreSQL's executor nodes
 * implement init, exec and end behind one interface.  The batch (batch.c)
 * calls every operator's stage in the chain's order and never asks which
 * operator it has; a new operator is one file and one line in operator_chain.c.
 *
 * The chain, in the order rows flow:
 *
 *	 upsert		(op_upsert.c) an upsert source's rows as changes: each key's
 *				last row, kept, retracted by the key's next row
 *	 dedup		(op_dedup.c) keeps the first row of each key of one
 *				source, forgetting keys the watermark passed
 *	 join		(op_join.c) a stream-stream join's state: each side's rows
 *				that can still match, the unmatched rows of an outer join
 *	 sink		the query's result: an aggregation over its state store
 *				(op_aggregate.c), or the plain SQL path of the compiled
 *				statements (op_sql.c), for transforms and aggregations
 *				without a store
 *
 * A batch's stages, each called on every operator of the chain in order:
 *
 *	 begin		the batch starts: an operator vouches for the state it
 *				keeps in memory, or loads it from its tables
 *	 apply		rows in: the head of the chain gets the batch's rows, and
 *				each operator passes rows on to the next (operator_apply)
 *	 emit		after every operator applied: what the watermark moved
 *				(closed windows, keys forgotten, a join's rows out of
 *				reach) and what apply changed goes out
 *	 checkpoint	when the batch takes a checkpoint: an operator that keeps
 *				one of the query's state tables in memory writes its
 *				checkpoint itself, and one that keeps back rows of a table
 *				whose checkpoint is copied by the rows of the batches
 *				writes those; one that ran the batch on a state table
 *				it did not load may ask for the checkpoint to be left to a
 *				later batch (a checkpoint would read the whole table)
 *	 state_rows	for the batch's progress record
 *	 end		the batch is over (having done something or not):
 *				catalog_xmin is who wrote the query's catalog row last,
 *				which tells the next batch whether the state in memory
 *				is still the state in the tables
 *
 * and, outside batches, invalidate (the state tables were rewritten: what
 * is in memory is stale) and free.
 *
 * Every stage runs inside the batch's transaction and SPI connection, in
 * the batch's memory context unless it says otherwise, and may raise an
 * error: the batch is then rolled back, and the next begin finds out that
 * the operator's memory is not its tables' state (its end was not called
 * with the catalog row's writer).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_OPERATOR_H
#define STREAMWIN_OPERATOR_H

#include "batch_scope.h"
#include "catalog_types.h"

struct QueryRunner;
struct Operator;

/*
 * What a batch tells its operators, and what they tell it back.  Filled in
 * by batch.c stage by stage: the positions at begin, the rows after
 * decode, the watermark before apply.
 */
typedef struct BatchState
{
	struct QueryRunner *runner;
	QueryInfo  *query;
	BatchScope	scope;			/* the current batch scope (batch_scope.h) */

	/* begin: where the query stood */
	int64		last_batch_id;	/* the last committed batch, 0: none */
	int64		batch_id;		/* this batch's id */
	bool		replay;			/* re-running a batch after a crash */
	TransactionId catalog_xmin; /* the writer of the query's catalog row */

	/* decode: the rows the query reads, per source (after dedup: the kept) */
	BatchInput *input;
	int64		ninput;

	/* watermark: before this batch, after it, and what closes windows */
	bool		has_old_wm;
	TimestampTz old_wm;
	bool		has_new_wm;
	TimestampTz new_wm;
	bool		wm_moved;
	TimestampTz close_wm;		/* the watermark, or for windows over a join
								 * the watermark held back by its range */

	/* what the operators did */
	int64		duplicates;		/* rows dedup dropped */
	int64		late_added;		/* a changelog's rows an aggregation dropped, */
	int64		late_retracted; /* added or retracted, into closed windows */
	bool		unmatched;		/* an outer join let unmatched rows go */
} BatchState;

/* Which rows an operator's apply gets. */
typedef enum RowsFlow
{
	FLOW_BATCH,					/* the batch's rows (the sources' inputs) */
	FLOW_UNMATCHED				/* an outer join's rows that went unmatched:
								 * the preserved side's, NULL-extended by the
								 * statements that read them */
} RowsFlow;

typedef struct Operator Operator;

typedef struct OperatorOps
{
	const char *name;			/* for messages */

	void		(*begin) (Operator *op, BatchState *b);

	/*
	 * Rows in (input: a list, one per source, any of them without rows).
	 * Passes rows on to op->next with operator_apply, changed or not.
	 */
	void		(*apply) (Operator *op, BatchState *b, BatchInput *input, RowsFlow flow);
	void		(*emit) (Operator *op, BatchState *b);

	/*
	 * Does the operator write the checkpoint of the query's UNLOGGED table
	 * `unlogged` itself in this batch (it keeps that table's rows in memory)?
	 * If so, checkpoint writes it: what changed since the last one.
	 */
	bool		(*writes_checkpoint) (Operator *op, Oid unlogged);
	void		(*checkpoint) (Operator *op, Oid unlogged);

	/*
	 * The rows the operator keeps back from `unlogged` (sync would write
	 * them there), where a checkpoint copies that table's rows of the
	 * batches since the last one (CHECKPOINT_ROWS, checkpoint.h):
	 * checkpoint_kept writes those of batches after since_batch into the
	 * checkpoint table `logged` and keeps them back; kept_bytes says how
	 * much of the table's state they are.  NULL: the operator syncs
	 * before such a checkpoint instead.
	 */
	void		(*checkpoint_kept) (Operator *op, Oid unlogged, Oid logged, int64 since_batch);
	int64		(*kept_bytes) (Operator *op, Oid unlogged);

	/*
	 * Would a checkpoint in this batch read a whole state table of the
	 * operator's, which the batch itself read only a little of (it ran on
	 * the table without loading it)?  NULL: never.
	 */
	bool		(*defers_checkpoint) (Operator *op);

	/*
	 * Write into the operator's tables what it keeps back in memory only
	 * (NULL: never anything), before anything reads them: a checkpoint
	 * that copies them (not one the operator writes from memory, nor one
	 * that gets the rows kept back by checkpoint_kept), or the end of
	 * batches that share one transaction (runner.h).  (A store that stops
	 * fitting in memory writes what it kept back itself.)
	 */
	void		(*sync) (Operator *op);

	int64		(*state_rows) (Operator *op, BatchState *b);
	void		(*end) (Operator *op, TransactionId catalog_xmin);

	/* Outside a batch: the state tables were rewritten (reset_query). */
	void		(*invalidate) (Operator *op);
	/* Free what the operator holds (its memory is the runner's); never raises. */
	void		(*free) (Operator *op);
} OperatorOps;

/*
 * An operator of a query's runner.  Each kind embeds this as its first
 * member and allocates itself in the runner's memory context.
 */
struct Operator
{
	const OperatorOps *ops;
	Operator   *next;			/* where apply passes rows on, or NULL */
	struct QueryRunner *runner;
};

/*
 * Each kind's constructor: an operator of the query of runner r, or NULL if
 * the query has none of its kind.  In the runner's memory context.
 */
typedef Operator *(*OperatorMake) (struct QueryRunner *r);

extern Operator *upsert_operator_make(struct QueryRunner *r);
extern Operator *dedup_operator_make(struct QueryRunner *r);
extern Operator *join_operator_make(struct QueryRunner *r);
extern Operator *aggregate_operator_make(struct QueryRunner *r);
extern Operator *sql_operator_make(struct QueryRunner *r);

/* The plain SQL path as an operator of no chain (op_sql.c) */
extern Operator *sql_operator_create(struct QueryRunner *r);

/*
 * operators_make
 *		The chain of operators of the query of runner r (NULL: none), in
 *		the runner's memory context.  Inside a transaction.
 */
extern Operator *operators_make(struct QueryRunner *r);
extern void operators_free(Operator *chain);

/* Pass rows to op (nothing if op is NULL: the chain ended). */
extern void operator_apply(Operator *op, BatchState *b, BatchInput *input, RowsFlow flow);

/* A stage on every operator of the chain, in order. */
extern void operators_begin(Operator *chain, BatchState *b);
extern void operators_emit(Operator *chain, BatchState *b);
extern int64 operators_state_rows(Operator *chain, BatchState *b);
extern void operators_end(Operator *chain, TransactionId catalog_xmin);
extern void operators_invalidate(Operator *chain);
extern void operators_sync(Operator *chain);

/*
 * The sync of the operators whose tables (of unlogged[0..n)) a checkpoint
 * reads: not of one that writes its checkpoint from memory
 * (writes_checkpoint), which needs no row it keeps back, nor of one that
 * writes the rows it keeps back into the checkpoint (checkpoint_kept).
 */
extern void operators_sync_for_checkpoint(Operator *chain, const Oid *unlogged, int n);

/*
 * A CHECKPOINT_ROWS table's rows that operators keep back: written into
 * its checkpoint `logged` (those of batches after since_batch), and their
 * bytes.
 */
extern void operators_checkpoint_kept(Operator *chain, Oid unlogged, Oid logged, int64 since_batch);
extern int64 operators_kept_bytes(Operator *chain, Oid unlogged);

/*
 * Checkpoints (checkpoint.c): does an operator of the chain write the
 * checkpoint of `unlogged` itself (operators_writes_checkpoint), and
 * write it (operators_checkpoint, false: none does).
 */
extern bool operators_writes_checkpoint(Operator *chain, Oid unlogged);
extern bool operators_checkpoint(Operator *chain, Oid unlogged);

/* Does an operator of the chain ask for the checkpoint to wait? */
extern bool operators_defer_checkpoint(Operator *chain);

/* The rows of one source in an input list (0: none). */
extern int	batch_input_rows(BatchInput *input, int32 source_id);

/* The input of one source in an input list, or NULL. */
extern BatchInput *batch_input_find(BatchInput *input, int32 source_id);

#endif							/* STREAMWIN_OPERATOR_H */
