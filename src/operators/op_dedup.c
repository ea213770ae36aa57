/*-------------------------------------------------------------------------
 *
 * op_dedup.c
 *	  Deduplication: the first row of each key of one source, once within
 *	  the watermark (see operator.h).
 *
 * The keys seen and not yet forgotten are kept in a state store of dedup
 * keys (state_store.h), or, where they do not fit in memory or the query
 * was compiled before such stores, in the dedup table by the compiled SQL
 * statements (see dedup_statements in compile_dedup.c).  apply keeps the
 * first occurrence of each key not seen before and passes the rows on;
 * emit forgets the keys whose first row the watermark passed.  A small
 * batch whose keys the store has not loaded runs on the dedup table
 * (op_store.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "op_store.h"

typedef struct DedupOp
{
	Operator	op;
	HeldStore	keys;			/* the keys seen */
	int32		source_id;		/* the source deduplicated */
} DedupOp;

#define DEDUP(op) ((DedupOp *) (op))

static void
dedup_begin(Operator *op, BatchState *b)
{
	held_store_begin(&DEDUP(op)->keys, b);
}

/*
 * Mark in keep[] the rows of input whose key is new: through the store,
 * or by the SQL statement, which inserts the new keys and returns their
 * rows' positions.
 */
static void
mark_first_rows(DedupOp *d, BatchState *b, BatchInput *input, bool *keep)
{
	QueryRunner *r = d->op.runner;

	if (held_store_ready(&d->keys, b, input->nrows))
	{
		DestReceiver *dest = store_dedup_receiver(d->keys.store, b->batch_id, keep,
												  input->nrows);

		(void) runner_run_into(r, STMT_DEDUP_ROWS, input, NULL, dest);
		dest->rDestroy(dest);
		store_write_changed(d->keys.store, r->one_transaction);
	}
	else
	{
		Datum		batch_id = Int64GetDatum(b->batch_id);
		uint64		n = runner_run(r, STMT_DEDUP, input, &batch_id);

		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;
			int32		ord = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 1, &isnull));

			if (ord >= 0 && ord < input->nrows)
				keep[ord] = true;
		}
	}
}

/*
 * Keep only the first occurrence of each key not seen before, then pass
 * the rows on.
 */
static void
dedup_apply(Operator *op, BatchState *b, BatchInput *input, RowsFlow flow)
{
	DedupOp    *d = DEDUP(op);
	BatchInput *side = batch_input_find(input, d->source_id);

	if (b->ninput > 0 && side != NULL)
	{
		bool	   *keep = palloc0(sizeof(bool) * side->nrows);
		int			before = side->nrows;
		int			kept = 0;

		mark_first_rows(d, b, side, keep);
		for (int i = 0; i < side->nrows; i++)
			if (keep[i])
				side->rows[kept++] = side->rows[i];
		side->nrows = kept;
		b->ninput -= before - kept;
		b->duplicates = before - kept;
	}
	operator_apply(op->next, b, input, flow);
}

/* Forget the keys whose first row the moved watermark passed. */
static void
dedup_emit(Operator *op, BatchState *b)
{
	DedupOp    *d = DEDUP(op);
	Datum		wm = TimestampTzGetDatum(b->new_wm);

	if (!b->wm_moved)
		return;
	if (held_store_ready(&d->keys, b, 0))
	{
		if (store_close_windows(d->keys.store, b->new_wm) > 0)
			store_evict_closed(d->keys.store);
	}
	else if (op->runner->plans[STMT_DEDUP_EVICT] != NULL)
		(void) runner_run(op->runner, STMT_DEDUP_EVICT, NULL, &wm);
}

static bool
dedup_writes_checkpoint(Operator *op, Oid unlogged)
{
	DedupOp    *d = DEDUP(op);

	return d->keys.active && unlogged == d->keys.table;
}

static void
dedup_checkpoint(Operator *op, Oid unlogged)
{
	store_checkpoint(DEDUP(op)->keys.store);
}

static bool
dedup_defers_checkpoint(Operator *op)
{
	return held_store_defers_checkpoint(&DEDUP(op)->keys);
}

/* The keys' rows the store kept back go into its table. */
static void
dedup_sync(Operator *op)
{
	held_store_sync(&DEDUP(op)->keys);
}

/* Dedup keys are not counted in a batch's state_rows. */
static int64
dedup_state_rows(Operator *op, BatchState *b)
{
	return 0;
}

static void
dedup_end(Operator *op, TransactionId catalog_xmin)
{
	held_store_end(&DEDUP(op)->keys, catalog_xmin);
}

static void
dedup_invalidate(Operator *op)
{
	held_store_invalidate(&DEDUP(op)->keys);
}

static void
dedup_free(Operator *op)
{
	store_free(DEDUP(op)->keys.store);
	pfree(op);
}

static const OperatorOps dedup_ops = {
	.name = "dedup",
	.begin = dedup_begin,
	.apply = dedup_apply,
	.emit = dedup_emit,
	.writes_checkpoint = dedup_writes_checkpoint,
	.checkpoint = dedup_checkpoint,
	.defers_checkpoint = dedup_defers_checkpoint,
	.sync = dedup_sync,
	.state_rows = dedup_state_rows,
	.end = dedup_end,
	.invalidate = dedup_invalidate,
	.free = dedup_free,
};

/* The dedup operator of a query with dedup_keys. */
Operator *
dedup_operator_make(QueryRunner *r)
{
	QueryInfo  *q = r->query;
	DedupOp    *d;

	if (q->dedup_store == NULL && r->plans[STMT_DEDUP] == NULL)
		return NULL;
	d = palloc0(sizeof(DedupOp));
	d->op.ops = &dedup_ops;
	d->op.runner = r;
	d->source_id = r->readers[q->dedup_side]->source->source_id;
	held_store_init(&d->keys, r, q->dedup_store, q->dedup_table, q->dedup_checkpoint,
					"dedup keys", true, "dedup table",
					STMT_DEDUP_INDEX, NUM_STATEMENTS, STMT_DEDUP_UNINDEX);
	/* the keys index finds a batch's keys, the times index those to forget */
	d->keys.cold_allowed = true;
	return &d->op;
}
