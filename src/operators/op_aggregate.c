/*-------------------------------------------------------------------------
 *
 * op_aggregate.c
 *	  An aggregation's sink over its state store (see operator.h).
 *
 * apply: the executor aggregates the batch's rows into its groups (the
 * compiled partial query), or hands over the rows themselves where the
 * store folds them (store_merge_rows), and the store merges them into its
 * groups in C.  emit: the changed groups' state rows are written (or kept
 * back, in batches that share a transaction, until agg_sync), and in
 * update mode their result rows; the windows the watermark closed are
 * written (append mode) and evicted; complete mode rewrites the result
 * from every group.
 *
 * Result rows are written by the compiled statements over
 * streamwin.store_rows(), which reads the store's groups through the
 * batch's scope.  When the groups do not fit in streamwin.state_memory
 * the store runs on its table, and the batch takes the plain SQL path
 * (op_sql.c) instead; so does a small batch when the store has not loaded
 * the groups (a "cold" batch, op_store.h), which then counts the state's
 * rows as the last batch's and the rows the batch added and deleted,
 * rather than counting the table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "op_store.h"

typedef struct AggregateOp
{
	Operator	op;
	HeldStore	groups;			/* the query's open groups */
	Operator   *sql;			/* the SQL path, for batches on the table */
	bool		changed;		/* apply merged rows into the store */
	bool		decided;		/* the batch knows where it runs */
} AggregateOp;

#define AGG(op) ((AggregateOp *) (op))

static void
agg_begin(Operator *op, BatchState *b)
{
	AggregateOp *a = AGG(op);

	Assert(b->scope.store == NULL);
	a->changed = false;
	a->decided = false;
	held_store_begin(&a->groups, b);
}

/*
 * Does the batch run on the store?  Decided when the batch first needs its
 * groups, its rows known (held_store_ready).
 */
static bool
agg_ready(AggregateOp *a, BatchState *b)
{
	bool		active = held_store_ready(&a->groups, b, b->ninput);

	if (a->decided)
		return active;
	a->decided = true;
	if (active)
	{
		batch_scope_set_store(&b->scope, a->groups.store);
		/*
		 * What the batches before closed (close_wm was their watermark):
		 * none in complete mode, whose watermark closes no window.
		 */
		store_closed_through(a->groups.store,
							 b->has_old_wm && b->query->output_mode != OUTPUT_COMPLETE,
							 b->old_wm);
	}
	return active;
}

/*
 * The batch's rows (its groups, or its rows to fold), or an outer join's
 * unmatched rows (their groups), merged into the store.
 */
static void
agg_apply(Operator *op, BatchState *b, BatchInput *input, RowsFlow flow)
{
	AggregateOp *a = AGG(op);
	StateStore *s = a->groups.store;
	QueryRunner *r = op->runner;
	DestReceiver *merge;
	bool		rows;
	uint64		n;

	if (!agg_ready(a, b))
	{
		a->sql->ops->apply(a->sql, b, input, flow);
		return;
	}
	if (flow == FLOW_UNMATCHED)
	{
		merge = store_merge_receiver(s, false, 0);
		(void) runner_run_into(r, STMT_JOIN_UNMATCHED_GROUPS, input, NULL, merge);
		merge->rDestroy(merge);
		a->changed = true;
		return;
	}
	if (b->ninput == 0)
		return;
	rows = r->plans[STMT_STORE_BATCH_ROWS] != NULL && store_merge_rows(s, r->query->join != NULL);
	merge = store_merge_receiver(s, rows, b->ninput);
	n = runner_run_into(r, rows ? STMT_STORE_BATCH_ROWS : STMT_STORE_GROUPS, input, NULL, merge);
	merge->rDestroy(merge);
	elog(DEBUG1, "streamwin: query \"%s\" merges " UINT64_FORMAT " %s into its store",
		 b->query->name, n, rows ? "rows" : "groups");
	a->changed = true;
}

/*
 * Update mode: the result rows of the groups the batch changed, each with
 * the cheapest statement that is right for it (see store_classify_changed):
 * a plain INSERT for groups new to the result, an UPDATE by location for
 * those whose row the store knows, an upsert for the others and for any
 * the first two could not write.  First the rows of sessions gone from the
 * store (merged into another) are deleted.
 */
static void
write_results(AggregateOp *a, BatchState *b)
{
	StateStore *s = a->groups.store;
	QueryRunner *r = a->op.runner;

	store_classify_changed(s, b->replay, r->insert_variants_paused == 0);
	elog(DEBUG1, "streamwin: query \"%s\" writes " INT64_FORMAT " new, " INT64_FORMAT
		 " known and " INT64_FORMAT " other result rows",
		 b->query->name, store_count_rows(s, STORE_ROWS_INSERT),
		 store_count_rows(s, STORE_ROWS_UPDATE), store_count_rows(s, STORE_ROWS_UPSERT));
	if (store_count_rows(s, STORE_ROWS_GONE) > 0)
		(void) runner_run(r, STMT_STORE_DELETE, NULL, NULL);
	if (store_count_rows(s, STORE_ROWS_INSERT) > 0)
	{
		if (runner_try_insert(r, STMT_STORE_INSERT, b->replay))
			store_rows_done(s, STORE_ROWS_INSERT);
		else
			store_move_rows(s, STORE_ROWS_INSERT, STORE_ROWS_UPSERT);
	}
	if (store_count_rows(s, STORE_ROWS_UPDATE) > 0)
	{
		store_prune_result_pages(s, STORE_ROWS_UPDATE, b->query->result_table);
		(void) runner_run(r, STMT_STORE_UPDATE, NULL, NULL);
		store_rows_written(s, STORE_ROWS_UPDATE, STORE_ROWS_UPSERT);
	}
	if (store_count_rows(s, STORE_ROWS_UPSERT) > 0)
	{
		(void) runner_run(r, STMT_STORE_UPSERT, NULL, NULL);
		store_rows_written(s, STORE_ROWS_UPSERT, STORE_ROWS_UPSERT);
	}
}

/*
 * What the batch changed (state rows; update mode's result rows), then
 * what the moved watermark closes: the closed windows' groups written
 * (append mode) and evicted; complete mode's rewrite.
 */
static void
agg_emit(Operator *op, BatchState *b)
{
	AggregateOp *a = AGG(op);
	StateStore *s = a->groups.store;
	QueryRunner *r = op->runner;
	bool		closed;

	if (!agg_ready(a, b))
	{
		a->sql->ops->emit(a->sql, b);
		return;
	}
	store_late_changes(s, &b->late_added, &b->late_retracted);
	if (a->changed)
	{
		store_write_changed(s, r->one_transaction);
		if (b->query->output_mode == OUTPUT_UPDATE)
			write_results(a, b);
	}
	/* complete mode keeps every window: the watermark closes none */
	closed = b->wm_moved && b->query->output_mode != OUTPUT_COMPLETE &&
		store_close_windows(s, b->close_wm) > 0;
	if (closed && b->query->output_mode == OUTPUT_APPEND &&
		!runner_try_insert(r, STMT_STORE_CLOSE, b->replay))
		(void) runner_run(r, STMT_STORE_CLOSE_UPSERT, NULL, NULL);
	if (b->query->output_mode == OUTPUT_COMPLETE &&
		(b->ninput > 0 || b->unmatched || b->last_batch_id == 0))
	{
		(void) runner_run(r, STMT_CLEAR, NULL, NULL);
		(void) runner_run(r, STMT_STORE_REFRESH, NULL, NULL);
	}
	if (closed)
		store_evict_closed(s);
}

static bool
agg_writes_checkpoint(Operator *op, Oid unlogged)
{
	AggregateOp *a = AGG(op);

	return a->groups.active && unlogged == a->groups.table;
}

/* The groups changed since the last checkpoint, by location. */
static void
agg_checkpoint(Operator *op, Oid unlogged)
{
	store_checkpoint(AGG(op)->groups.store);
}

/* The state rows the store kept back go into its table. */
static void
agg_sync(Operator *op)
{
	held_store_sync(&AGG(op)->groups);
}

static int64
agg_state_rows(Operator *op, BatchState *b)
{
	AggregateOp *a = AGG(op);
	int64		rows;

	if (held_store_cold_state_rows(&a->groups, b, &rows))
		return rows;
	if (!a->groups.active)
		return a->sql->ops->state_rows(a->sql, b);
	return store_groups(a->groups.store);
}

static bool
agg_defers_checkpoint(Operator *op)
{
	return held_store_defers_checkpoint(&AGG(op)->groups);
}

static void
agg_end(Operator *op, TransactionId catalog_xmin)
{
	held_store_end(&AGG(op)->groups, catalog_xmin);
}

static void
agg_invalidate(Operator *op)
{
	held_store_invalidate(&AGG(op)->groups);
}

static void
agg_free(Operator *op)
{
	AggregateOp *a = AGG(op);

	store_free(a->groups.store);
	a->sql->ops->free(a->sql);
	pfree(a);
}

static const OperatorOps aggregate_ops = {
	.name = "aggregate",
	.begin = agg_begin,
	.apply = agg_apply,
	.emit = agg_emit,
	.writes_checkpoint = agg_writes_checkpoint,
	.checkpoint = agg_checkpoint,
	.defers_checkpoint = agg_defers_checkpoint,
	.sync = agg_sync,
	.state_rows = agg_state_rows,
	.end = agg_end,
	.invalidate = agg_invalidate,
	.free = agg_free,
};

/* The sink of an aggregation compiled with a state store. */
Operator *
aggregate_operator_make(QueryRunner *r)
{
	QueryInfo  *q = r->query;
	AggregateOp *a;

	if (q->store == NULL)
		return NULL;
	a = palloc0(sizeof(AggregateOp));
	a->op.ops = &aggregate_ops;
	a->op.runner = r;
	a->sql = sql_operator_create(r);
	held_store_init(&a->groups, r, q->store, q->state_table, q->checkpoint_table,
					"state", false, "state table",
					STMT_STATE_INDEX, STMT_STATE_END_INDEX, STMT_STATE_UNINDEX);

	/*
	 * A batch runs cold where the SQL statements reach the groups it touches
	 * by their indexes and its state rows are the aggregation's alone: not
	 * over a changelog (no table mode), not in complete mode (each batch
	 * reads every group), not after a join (whose rows count too).
	 */
	a->groups.cold_allowed = !a->groups.store_only && q->output_mode != OUTPUT_COMPLETE &&
		q->join == NULL;
	return &a->op;
}
