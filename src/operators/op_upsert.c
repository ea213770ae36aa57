/*-------------------------------------------------------------------------
 *
 * op_upsert.c
 *	  An upsert source's rows as exact changes: each key's last row kept,
 *	  and retracted by the key's next row (see operator.h).
 *
 * A message of an upsert source (or an event of a Debezium source with key
 * columns) is its key's new row (change +1), or the key's deletion, a row
 * of the key columns alone (change -1), or a truncate (change 0, which
 * retracts every key's row); see changelog_input.c.  For each of the
 * batch's rows of the source, in the batch's order, this operator
 *	- emits the row the key had, if it had one, with change -1;
 *	- for a new version: emits the row (+1) and keeps it as the key's row;
 *	- for a deletion: forgets the key (a deletion of a key without a row
 *	  emits nothing);
 * and passes the rows it emitted on in place of the source's.  So a new
 * key is an insert, a new version of a known key an update (its old row
 * retracted, the new one added), and a deletion a delete, which the
 * source's progress counts (SourceReader.changes).
 *
 * The rows kept are a state store of their own (store_upsert.c), written
 * by location to an UNLOGGED table with a logged checkpoint (created by
 * compile_upsert.c), or, where they do not fit in streamwin.state_memory,
 * that table, read and written by the statements compile_upsert.c made
 * (op_store.h).  A replay after a crash starts from the rows of the
 * checkpoint and goes through the same batches in the same order, so it
 * emits the same changes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "utils/datum.h"

#include "op_store.h"

typedef struct UpsertOp
{
	Operator	op;
	HeldStore	rows;			/* each key's last row */
	int32		source_id;		/* the upsert source */
	SourceReader *reader;		/* its reader, whose changes it counts */
	TupleDesc	desc;			/* the source's row type */
	int			change;			/* the change column's index in a row */
	int			nkeys;
	int		   *keys;			/* the key columns' indexes, in key order */
	int			nvalues;
	int		   *values;			/* the other columns', in the row's order */
	/* one row's key and values, as the store takes them, and the old row's */
	Datum	   *key_values;
	bool	   *key_nulls;
	Datum	   *new_values;
	bool	   *new_nulls;
	Datum	   *old_values;
	bool	   *old_nulls;
	Datum	   *old_keys;		/* the key as the row the store had gave it */
	bool	   *old_key_nulls;
	Datum	   *row_values;		/* a row of the source being made */
	bool	   *row_nulls;
	/* on the table: how many keys it held after batch counted_batch */
	int64		counted;
	int64		counted_batch;	/* 0: not counted */
	TransactionId counted_xid;	/* the transaction of that batch */
} UpsertOp;

#define UPSERT(op) ((UpsertOp *) (op))

static void
upsert_begin(Operator *op, BatchState *b)
{
	held_store_begin(&UPSERT(op)->rows, b);
}

/*
 * The retraction of the row the key had (in u->old_values), of row's key,
 * or of keys/key_nulls (in key order) if keys is not NULL.
 */
static BatchRow
retraction(UpsertOp *u, BatchRow row, const Datum *keys, const bool *key_nulls)
{
	int			natts = u->desc->natts;

	memcpy(u->row_values, row, sizeof(Datum) * natts);
	memcpy(u->row_nulls, BATCH_ROW_NULLS(row, natts), sizeof(bool) * natts);
	for (int k = 0; keys != NULL && k < u->nkeys; k++)
	{
		u->row_values[u->keys[k]] = keys[k];
		u->row_nulls[u->keys[k]] = key_nulls[k];
	}
	for (int v = 0; v < u->nvalues; v++)
	{
		u->row_values[u->values[v]] = u->old_values[v];
		u->row_nulls[u->values[v]] = u->old_nulls[v];
	}
	u->row_values[u->change] = Int16GetDatum(-1);
	u->row_nulls[u->change] = false;
	return batch_row_make(natts, u->row_values, u->row_nulls);
}

/* A row's change: a key that had a row or not, taking one or not. */
static void
count_change(UpsertOp *u, bool had, bool adds)
{
	if (had && adds)
		u->reader->changes.updates++;
	else if (adds)
		u->reader->changes.inserts++;
	else if (had)
		u->reader->changes.deletes++;
}

/*
 * The changes the operator passes on: twice the source's rows at most,
 * but for a truncate, which retracts every key's row.
 */
typedef struct ChangesOut
{
	BatchRow   *rows;
	int			n;
	int			size;
} ChangesOut;

static void
out_add(ChangesOut *out, BatchRow row)
{
	if (out->n == out->size)
	{
		out->size *= 2;
		out->rows = repalloc_huge(out->rows, sizeof(BatchRow) * out->size);
	}
	out->rows[out->n++] = row;
}

/* A truncate's row: the change column 0 (changelog_input.c) */
static inline bool
is_truncate(UpsertOp *u, BatchRow row)
{
	return DatumGetInt16(row[u->change]) == 0;
}

typedef struct TruncateVisit
{
	UpsertOp   *u;
	BatchRow	row;			/* the truncate's, for its metadata */
	ChangesOut *out;
} TruncateVisit;

/* store_upsert_truncate's visit: the retraction of one key's row */
static void
truncate_visit(void *arg, const Datum *keys, const bool *key_nulls,
			   const Datum *values, const bool *nulls)
{
	TruncateVisit *tv = arg;
	UpsertOp   *u = tv->u;

	memcpy(u->old_values, values, sizeof(Datum) * u->nvalues);
	memcpy(u->old_nulls, nulls, sizeof(bool) * u->nvalues);
	out_add(tv->out, retraction(u, tv->row, keys, key_nulls));
	u->reader->changes.deletes++;
}

/* The batch's rows of the source (side) through the store, as changes into out. */
static void
apply_in_store(UpsertOp *u, BatchInput *side, ChangesOut *out)
{
	int			natts = u->desc->natts;

	for (int i = 0; i < side->nrows; i++)
	{
		BatchRow	row = side->rows[i];
		bool	   *nulls = BATCH_ROW_NULLS(row, natts);
		bool		adds = DatumGetInt16(row[u->change]) > 0;
		bool		had;

		if (is_truncate(u, row))
		{
			TruncateVisit tv = {u, row, out};

			(void) store_upsert_truncate(u->rows.store, truncate_visit, &tv);
			continue;
		}
		for (int k = 0; k < u->nkeys; k++)
		{
			u->key_values[k] = row[u->keys[k]];
			u->key_nulls[k] = nulls[u->keys[k]];
		}
		for (int v = 0; v < u->nvalues; v++)
		{
			u->new_values[v] = row[u->values[v]];
			u->new_nulls[v] = nulls[u->values[v]];
		}
		had = store_upsert(u->rows.store, u->key_values, u->key_nulls,
						   adds ? u->new_values : NULL, u->new_nulls,
						   u->old_values, u->old_nulls, u->old_keys, u->old_key_nulls);
		/* the row as it was added: its key too, as that row gave it */
		if (had)
			out_add(out, retraction(u, row, u->old_keys, u->old_key_nulls));
		if (adds)
			out_add(out, row);
		count_change(u, had, adds);
	}
	store_write_changed(u->rows.store, u->op.runner->one_transaction);
}

/*
 * Rows of the table's statement (the source's columns, then, for
 * STMT_UPSERT_ROWS, the row's position and 0 for a retraction, 1 for a row
 * added) as changes into out, copied out of SPI's memory; positions gets
 * each row's position when not NULL.
 */
static void
changes_from_spi(UpsertOp *u, uint64 nchanges, ChangesOut *out, int32 *positions)
{
	SPITupleTable *changes = SPI_tuptable;
	int			natts = u->desc->natts;
	int			width = changes->tupdesc->natts;
	Datum	   *values = palloc(sizeof(Datum) * width);
	bool	   *nulls = palloc(sizeof(bool) * width);

	for (uint64 i = 0; i < nchanges; i++)
	{
		heap_deform_tuple(changes->vals[i], changes->tupdesc, values, nulls);
		for (int a = 0; a < natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(u->desc, a);

			if (!nulls[a] && !att->attbyval)
				values[a] = datumCopy(values[a], false, att->attlen);
		}
		out_add(out, batch_row_make(natts, values, nulls));
		if (positions != NULL)
			positions[i] = DatumGetInt32(values[natts]);
	}
}

/*
 * The same on the table, by its statements, for the rows of side from
 * first to last (no truncate among them): the changes in the batch's order;
 * then the table brought up to date.
 */
static void
apply_range_on_table(UpsertOp *u, BatchInput *input, BatchInput *side, int first, int last,
					 ChangesOut *out)
{
	QueryRunner *r = u->op.runner;
	BatchRow   *rows = side->rows;
	int			nrows = side->nrows;
	uint64		nchanges;
	int32	   *position;
	int			start = out->n;

	/* the statements read the side's rows through the source's view */
	side->rows = rows + first;
	side->nrows = last - first;
	nchanges = runner_run(r, STMT_UPSERT_ROWS, input, NULL);
	position = palloc(sizeof(int32) * Max(nchanges, 1));
	changes_from_spi(u, nchanges, out, position);
	/* a retraction followed by the row added at its position: an update */
	for (uint64 i = 0; i < nchanges; i++)
	{
		bool		adds = DatumGetInt16(out->rows[start + i][u->change]) > 0;

		if (!adds && i + 1 < nchanges && position[i + 1] == position[i])
		{
			count_change(u, true, true);
			i++;
		}
		else
			count_change(u, !adds, adds);
	}
	(void) runner_run(r, STMT_UPSERT_WRITE, input, NULL);
	side->rows = rows;
	side->nrows = nrows;
}

/*
 * On the table: the rows between truncates by their statements, and each
 * truncate by its own, which empties the table and returns its rows as
 * retractions.
 */
static void
apply_on_table(UpsertOp *u, BatchInput *input, BatchInput *side, ChangesOut *out)
{
	int			first = 0;

	for (int i = 0; i <= side->nrows; i++)
	{
		uint64		n;

		if (i < side->nrows && !is_truncate(u, side->rows[i]))
			continue;
		if (i > first)
			apply_range_on_table(u, input, side, first, i, out);
		first = i + 1;
		if (i == side->nrows)
			break;
		if (u->op.runner->query->sql[STMT_UPSERT_TRUNCATE] == NULL)
			elog(ERROR, "streamwin: query \"%s\" has no statement for a truncate of its source",
				 u->op.runner->query->name);
		n = runner_run(u->op.runner, STMT_UPSERT_TRUNCATE, NULL, NULL);
		changes_from_spi(u, n, out, NULL);
		u->reader->changes.deletes += n;
	}
}

/*
 * The source's rows as changes (the rows it passes on instead), through
 * the store or its table.
 */
static void
upsert_apply(Operator *op, BatchState *b, BatchInput *input, RowsFlow flow)
{
	UpsertOp   *u = UPSERT(op);
	BatchInput *side = batch_input_find(input, u->source_id);

	if (flow == FLOW_BATCH && side != NULL && side->nrows > 0)
	{
		ChangesOut	out;

		out.size = side->nrows * 2;
		out.n = 0;
		out.rows = palloc_extended(sizeof(BatchRow) * out.size, MCXT_ALLOC_HUGE);
		if (u->rows.active)
			apply_in_store(u, side, &out);
		else
			apply_on_table(u, input, side, &out);
		b->ninput += out.n - side->nrows;
		side->rows = out.rows;
		side->nrows = out.n;
	}
	operator_apply(op->next, b, input, flow);
}

static void
upsert_emit(Operator *op, BatchState *b)
{
}

static bool
upsert_writes_checkpoint(Operator *op, Oid unlogged)
{
	UpsertOp   *u = UPSERT(op);

	return u->rows.active && unlogged == u->rows.table;
}

static void
upsert_checkpoint(Operator *op, Oid unlogged)
{
	store_checkpoint(UPSERT(op)->rows.store);
}

/* The keys' rows the store kept back go into its table. */
static void
upsert_sync(Operator *op)
{
	held_store_sync(&UPSERT(op)->rows);
}

/*
 * The keys that have a row are state rows of the batch's progress.  On the
 * table, the keys after the last batch, when this runner counted them and
 * that batch committed, and the batch's new keys less the keys it deleted:
 * a count of the whole table at every batch would cost what the state
 * weighs, when its rows did not fit in memory.
 */
static int64
upsert_state_rows(Operator *op, BatchState *b)
{
	UpsertOp   *u = UPSERT(op);
	bool		isnull;

	if (u->rows.active)
		return store_groups(u->rows.store);
	/* that batch committed, and no other has run since (its transaction wrote the catalog last) */
	if (u->counted_batch != 0 && u->counted_batch == b->last_batch_id && !b->replay &&
		TransactionIdEquals(u->counted_xid, b->catalog_xmin))
		u->counted += u->reader->changes.inserts - u->reader->changes.deletes;
	else
	{
		(void) runner_run(op->runner, STMT_UPSERT_COUNT, NULL, NULL);
		u->counted = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
												 &isnull));
	}
	u->counted_batch = b->batch_id;
	u->counted_xid = GetCurrentTransactionId();
	return u->counted;
}

static void
upsert_end(Operator *op, TransactionId catalog_xmin)
{
	held_store_end(&UPSERT(op)->rows, catalog_xmin);
}

static void
upsert_invalidate(Operator *op)
{
	held_store_invalidate(&UPSERT(op)->rows);
	UPSERT(op)->counted_batch = 0;	/* the table was rewritten (reset_query) */
}

static void
upsert_free(Operator *op)
{
	store_free(UPSERT(op)->rows.store);
	pfree(op);
}

static const OperatorOps upsert_ops = {
	.name = "upsert",
	.begin = upsert_begin,
	.apply = upsert_apply,
	.emit = upsert_emit,
	.writes_checkpoint = upsert_writes_checkpoint,
	.checkpoint = upsert_checkpoint,
	.sync = upsert_sync,
	.state_rows = upsert_state_rows,
	.end = upsert_end,
	.invalidate = upsert_invalidate,
	.free = upsert_free,
};

/*
 * The key columns (in key order) and the others but the change column (in
 * the row's order), as compile_upsert.c laid out the store's table.
 */
static void
upsert_columns(UpsertOp *u)
{
	List	   *key_names = u->reader->ops->key_columns(u->reader->source);
	ListCell   *lc;
	int			natts = u->desc->natts;

	u->change = source_change_attno(u->desc) - 1;
	u->keys = palloc(sizeof(int) * Max(list_length(key_names), 1));
	u->values = palloc(sizeof(int) * natts);
	foreach(lc, key_names)
		for (int a = 0; a < natts; a++)
			if (strcmp(NameStr(TupleDescAttr(u->desc, a)->attname), strVal(lfirst(lc))) == 0)
				u->keys[u->nkeys++] = a;
	for (int a = 0; a < natts; a++)
	{
		bool		is_key = false;

		for (int k = 0; k < u->nkeys; k++)
			is_key = is_key || u->keys[k] == a;
		if (a != u->change && !is_key)
			u->values[u->nvalues++] = a;
	}
	if (u->change < 0 || u->nkeys != list_length(key_names))
		elog(ERROR, "streamwin: upsert source \"%s\" has not the columns its options name",
			 u->reader->source->name);
}

/* The upsert operator of a query of an upsert source. */
Operator *
upsert_operator_make(QueryRunner *r)
{
	QueryInfo  *q = r->query;
	UpsertOp   *u;
	int			natts;

	if (q->upsert_store == NULL)
		return NULL;
	u = palloc0(sizeof(UpsertOp));
	u->op.ops = &upsert_ops;
	u->op.runner = r;
	u->reader = r->readers[q->upsert_side];
	u->source_id = u->reader->source->source_id;
	u->desc = u->reader->desc;
	natts = u->desc->natts;
	upsert_columns(u);
	u->key_values = palloc(sizeof(Datum) * Max(u->nkeys, 1));
	u->key_nulls = palloc(sizeof(bool) * Max(u->nkeys, 1));
	u->new_values = palloc(sizeof(Datum) * Max(u->nvalues, 1));
	u->new_nulls = palloc(sizeof(bool) * Max(u->nvalues, 1));
	u->old_values = palloc(sizeof(Datum) * Max(u->nvalues, 1));
	u->old_nulls = palloc(sizeof(bool) * Max(u->nvalues, 1));
	u->old_keys = palloc(sizeof(Datum) * Max(u->nkeys, 1));
	u->old_key_nulls = palloc(sizeof(bool) * Max(u->nkeys, 1));
	u->row_values = palloc(sizeof(Datum) * natts);
	u->row_nulls = palloc(sizeof(bool) * natts);
	held_store_init(&u->rows, r, q->upsert_store, q->upsert_table, q->upsert_checkpoint,
					"upsert keys", true, "upsert table",
					STMT_UPSERT_INDEX, NUM_STATEMENTS, STMT_UPSERT_UNINDEX);
	return &u->op;
}
