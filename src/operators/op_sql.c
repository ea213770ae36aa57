/*-------------------------------------------------------------------------
 *
 * op_sql.c
 *	  The plain SQL path: a query's sink as its compiled statements (see
 *	  operator.h).
 *
 * A continuous transform appends the batch's rows to its result
 * (STMT_BATCH).  An aggregation without a state store in memory (compiled
 * before stores existed, or whose store runs on its table: op_store.h)
 * merges the batch's partial aggregates into its state table and, in
 * update mode, upserts its results (STMT_BATCH), emits and evicts the
 * windows the watermark closed (STMT_CLOSE), and in complete mode rewrites
 * its result (STMT_CLEAR, STMT_REFRESH): all in SQL, on the tables.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "operator.h"
#include "runner.h"

static const OperatorOps sql_ops;

/*
 * Does the batch write what it applies?  A replayed transform's rows are
 * in its result already: its replay only rebuilds its dedup keys.
 */
static bool
sql_writes(BatchState *b)
{
	return b->query->aggregate || !b->replay;
}

static void
sql_begin(Operator *op, BatchState *b)
{
}

static void
sql_apply(Operator *op, BatchState *b, BatchInput *input, RowsFlow flow)
{
	if (!sql_writes(b))
		return;
	/* (an aggregation's unmatched rows are merged: it has no rows statement) */
	if (flow == FLOW_UNMATCHED)
		runner_append(op->runner, STMT_JOIN_UNMATCHED, STMT_JOIN_UNMATCHED_ROWS, input);
	else if (b->ninput > 0 && !b->query->aggregate)
		runner_append(op->runner, STMT_BATCH, STMT_BATCH_ROWS, input);
	else if (b->ninput > 0)
		runner_run_writing(op->runner, STMT_BATCH, input, NULL, b->replay);
}

static void
sql_emit(Operator *op, BatchState *b)
{
	QueryRunner *r = op->runner;
	Datum		close_wm = TimestampTzGetDatum(b->close_wm);

	if (b->wm_moved && r->plans[STMT_CLOSE] != NULL)
		runner_run_writing(r, STMT_CLOSE, NULL, &close_wm, b->replay);
	if (r->plans[STMT_REFRESH] != NULL &&
		(b->ninput > 0 || b->unmatched || b->last_batch_id == 0))
	{
		(void) runner_run(r, STMT_CLEAR, NULL, NULL);
		(void) runner_run(r, STMT_REFRESH, NULL, NULL);
	}
}

static bool
sql_writes_checkpoint(Operator *op, Oid unlogged)
{
	return false;
}

static void
sql_checkpoint(Operator *op, Oid unlogged)
{
}

/* The rows of the state table (none for a transform). */
static int64
sql_state_rows(Operator *op, BatchState *b)
{
	QueryRunner *r = op->runner;
	bool		isnull;

	if (r->plans[STMT_STATE_COUNT] == NULL)
		return 0;
	(void) runner_run(r, STMT_STATE_COUNT, NULL, NULL);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

static void
sql_end(Operator *op, TransactionId catalog_xmin)
{
}

static void
sql_invalidate(Operator *op)
{
}

static void
sql_free(Operator *op)
{
	pfree(op);
}

static const OperatorOps sql_ops = {
	.name = "sql",
	.begin = sql_begin,
	.apply = sql_apply,
	.emit = sql_emit,
	.writes_checkpoint = sql_writes_checkpoint,
	.checkpoint = sql_checkpoint,
	.state_rows = sql_state_rows,
	.end = sql_end,
	.invalidate = sql_invalidate,
	.free = sql_free,
};

/*
 * The SQL path: the sink of a query without a state store, and the way an
 * aggregation's store runs on its table (op_aggregate.c).
 */
Operator *
sql_operator_create(QueryRunner *r)
{
	Operator   *op = palloc0(sizeof(Operator));

	op->ops = &sql_ops;
	op->runner = r;
	return op;
}

Operator *
sql_operator_make(QueryRunner *r)
{
	if (r->query->store != NULL)
		return NULL;			/* the aggregation operator is the sink */
	return sql_operator_create(r);
}
