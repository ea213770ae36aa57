/*-------------------------------------------------------------------------
 *
 * op_join.c
 *	  A stream-stream join's state in a batch (see join.h and operator.h):
 *	  each side's new rows kept, matches marked, rows out of the
 *	  watermark's reach let go, an outer join's unmatched rows emitted.
 *
 * The statements are compiled by compile_join.c; this operator runs them
 * in the order join.h gives, after the sink has read the batch's pairs
 * (its statement joins the new rows with the join tables as they were),
 * and keeps the number of rows per side, which streamwin.progress shows
 * as part of state_rows, without counting the tables in every batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "catalog_access.h"
#include "join.h"
#include "result_insert.h"
#include "operator.h"
#include "runner.h"
#include "spi_util.h"

typedef struct JoinOp
{
	Operator	op;
	JoinPlan   *plan;
	int			preserved;		/* the side whose unmatched rows are
								 * emitted (an outer join's), or -1 */
	/* the rows per side: in this batch, and as of the last that ended */
	int64		rows[QUERY_MAX_SOURCES];
	int64		rows_committed[QUERY_MAX_SOURCES];
	TransactionId rows_xmin;	/* the transaction that wrote the catalog row
								 * then (invalid: unknown) */
} JoinOp;

#define JOIN(op) ((JoinOp *) (op))

/* Count the rows of each side's join table (as the extension's owner). */
static void
count_join_rows(JoinOp *j)
{
	QueryInfo  *q = j->op.runner->query;
	RoleSwitch	role;

	catalog_enter(&role);
	for (int s = 0; s < q->nsources; s++)
	{
		bool		isnull;

		if (SPI_execute(psprintf("SELECT pg_catalog.count(*) FROM %s",
								 qualified_relname(q->sources[s].join_table)),
						false, 1) != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "streamwin: could not count the join rows of query \"%s\"", q->name);
		j->rows[s] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 1, &isnull));
	}
	catalog_leave(&role);
}

/*
 * The rows per side are counted again when the operator cannot vouch for
 * its counts: the catalog row was written by another transaction than its
 * last batch's (as a state store, state_store.h).
 */
static void
join_begin(Operator *op, BatchState *b)
{
	JoinOp	   *j = JOIN(op);

	if (TransactionIdIsValid(j->rows_xmin) && TransactionIdEquals(j->rows_xmin, b->catalog_xmin))
		memcpy(j->rows, j->rows_committed, sizeof(j->rows));
	else
		count_join_rows(j);
}

static void
join_end(Operator *op, TransactionId catalog_xmin)
{
	JoinOp	   *j = JOIN(op);

	memcpy(j->rows_committed, j->rows, sizeof(j->rows));
	j->rows_xmin = catalog_xmin;
}

/* The rows of both sides' join state, for progress.state_rows. */
static int64
join_state_rows(Operator *op, BatchState *b)
{
	JoinOp	   *j = JOIN(op);
	int64		n = 0;

	for (int s = 0; s < op->runner->query->nsources; s++)
		n += j->rows[s];
	return n;
}

/* The side whose rows without a match are emitted (an outer join's), or -1. */
static int
preserved_side(const JoinPlan *jp)
{
	for (int s = 0; s < QUERY_MAX_SOURCES; s++)
		if (jp->sides[s].preserved)
			return s;
	return -1;
}

/*
 * The locations (column 1, tid) of the rows SPI_tuptable holds, as a tid[]
 * datum.
 */
static Datum
returned_locations(void)
{
	Datum	   *tids = palloc(sizeof(Datum) * Max(SPI_processed, 1));

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		ItemPointer tid = (ItemPointer) DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[i],
																	  SPI_tuptable->tupdesc,
																	  1, &isnull));
		ItemPointer copy = palloc(sizeof(ItemPointerData));

		ItemPointerCopy(tid, copy);
		tids[i] = PointerGetDatum(copy);
	}
	return PointerGetDatum(construct_array(tids, (int) SPI_processed, TIDOID,
										   sizeof(ItemPointerData), false, TYPALIGN_SHORT));
}

/*
 * The rows a preserved side's eviction returned (__matched, then the
 * source's columns) that never matched, as tuples of the source.
 */
static BatchInput *
unmatched_rows(QueryRunner *r, int side)
{
	TupleDesc	desc = r->readers[side]->desc;
	BatchInput *out = palloc0(sizeof(BatchInput));
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);

	out->source_id = r->readers[side]->source->source_id;
	out->natts = desc->natts;
	out->rows = palloc(sizeof(BatchRow) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;

		if (DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull)))
			continue;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute attr = TupleDescAttr(desc, a);

			/* SPI's result goes with the next statement: the row keeps a copy */
			values[a] = SPI_getbinval(tup, SPI_tuptable->tupdesc, a + 2, &nulls[a]);
			if (!nulls[a])
				values[a] = datumCopy(values[a], attr->attbyval, attr->attlen);
		}
		out->rows[out->nrows++] = batch_row_make(desc->natts, values, nulls);
	}
	return out->nrows > 0 ? out : NULL;
}

/*
 * Side s's new rows into its join table: many to a page where the table is
 * as streamwin made it, a plain table (result_insert.c); else by the
 * INSERT, which the preserved side always takes, for it returns where its
 * rows went.  Returns how many.
 */
static uint64
join_insert(QueryRunner *r, int s, BatchInput *input, Datum *batch)
{
	QueryStatement rows = STMT_JOIN_INSERT_ROWS_0 + s;
	Oid			table = r->query->sources[s].join_table;
	DestReceiver *dest;
	uint64		n;

	if (r->plans[rows] == NULL || !result_insert_possible(table, r->plans[rows]))
		return runner_run(r, STMT_JOIN_INSERT_0 + s, input, batch);
	dest = result_insert_receiver(table);
	n = runner_run_into(r, rows, input, batch, dest);
	dest->rDestroy(dest);
	return n;
}

/*
 * The sink reads the batch's pairs first (its statement joins the new rows
 * with the join tables as they are before this batch's rows go in); then
 * each side's new rows join its state, and the preserved side's rows that
 * found a match are marked: old ones matched by the other side's new rows,
 * new ones by any of the other side's.
 */
static void
join_apply(Operator *op, BatchState *b, BatchInput *input, RowsFlow flow)
{
	JoinOp	   *j = JOIN(op);
	QueryRunner *r = op->runner;
	Datum		batch = Int64GetDatum(b->batch_id);
	Datum		new_locations = (Datum) 0;

	operator_apply(op->next, b, input, flow);
	for (int s = 0; s < r->nreaders; s++)
	{
		uint64		n;

		if (batch_input_rows(input, r->readers[s]->source->source_id) == 0)
			continue;
		n = join_insert(r, s, input, &batch);
		j->rows[s] += (int64) n;
		if (s == j->preserved)
			new_locations = returned_locations();
	}
	if (j->preserved >= 0 &&
		(new_locations != (Datum) 0 ||
		 batch_input_rows(input, r->readers[1 - j->preserved]->source->source_id) > 0))
	{
		Datum		args[2];

		if (new_locations == (Datum) 0)
			new_locations = PointerGetDatum(construct_empty_array(TIDOID));
		args[0] = new_locations;
		args[1] = batch;
		(void) runner_run(r, STMT_JOIN_MATCH, input, args);
	}
}

/*
 * The rows the watermark put out of reach leave each side; the preserved
 * side's that never matched go on to the sink, which emits them
 * NULL-extended.
 */
static void
join_emit(Operator *op, BatchState *b)
{
	JoinOp	   *j = JOIN(op);
	QueryRunner *r = op->runner;
	BatchInput *unmatched = NULL;

	if (!b->has_new_wm)
		return;
	for (int s = 0; s < r->nreaders; s++)
	{
		TimestampTz before;
		Datum		cutoff;
		uint64		n;

		if (!join_side_cutoff(&j->plan->sides[s], b->new_wm, &before))
			continue;
		cutoff = TimestampTzGetDatum(before);
		n = runner_run(r, STMT_JOIN_EVICT_0 + s, NULL, &cutoff);
		j->rows[s] -= (int64) n;
		Assert(j->rows[s] >= 0);
		if (s == j->preserved && n > 0)
			unmatched = unmatched_rows(r, s);
	}
	if (unmatched != NULL)
	{
		b->unmatched = true;
		operator_apply(op->next, b, unmatched, FLOW_UNMATCHED);
	}
}

/* A join's tables are checkpointed by the rows of the batches (checkpoint.c). */
static bool
join_writes_checkpoint(Operator *op, Oid unlogged)
{
	return false;
}

static void
join_checkpoint(Operator *op, Oid unlogged)
{
}

static void
join_invalidate(Operator *op)
{
	JOIN(op)->rows_xmin = InvalidTransactionId;
}

static void
join_free(Operator *op)
{
	pfree(op);
}

static const OperatorOps join_ops = {
	.name = "join",
	.begin = join_begin,
	.apply = join_apply,
	.emit = join_emit,
	.writes_checkpoint = join_writes_checkpoint,
	.checkpoint = join_checkpoint,
	.state_rows = join_state_rows,
	.end = join_end,
	.invalidate = join_invalidate,
	.free = join_free,
};

/* The operator of a stream-stream join's state. */
Operator *
join_operator_make(QueryRunner *r)
{
	JoinOp	   *j;

	if (r->query->join == NULL)
		return NULL;
	j = palloc0(sizeof(JoinOp));
	j->op.ops = &join_ops;
	j->op.runner = r;
	j->plan = r->query->join;
	j->preserved = preserved_side(j->plan);
	j->rows_xmin = InvalidTransactionId;
	return &j->op;
}
