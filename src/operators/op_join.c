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
 * A join whose plan has store keys (join.h) keeps its state in a join
 * store (join_store.h) while it fits in streamwin.state_memory: the
 * batch's statements read the rows of each side's state that share a key
 * with the other side's new rows as join_batch_rows(-source_id), which this
 * operator adds to the batch's input, found in memory (and the first
 * side's new rows and those as one input, JOIN_ROWS_AND_STATE); or, where
 * the plan says pairs, the pairs of rows with equal keys themselves, found
 * in C (JOIN_PAIRS, batch_pairs).  The new rows go into memory and the
 * join tables (in run_available, whose batches share a transaction, into the tables only if still held when the run
 * ends: a checkpoint among them gets them from memory), and the rows out
 * of reach leave both, the tables by their location.  The store is held as every store is
 * (op_store.h): when the state does not fit, the operator finds those
 * rows in the join tables by SQL instead (STMT_JOIN_STATE_ROWS_0), with
 * the indexes that needs ("table mode"), and every 100 batches tries
 * memory again; a join transform's small batch in a session that has not
 * loaded the store does the same ("cold") rather than load both tables.
 * The pairs are the same either way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "catalog_access.h"
#include "join.h"
#include "join_store.h"
#include "op_store.h"
#include "result_insert.h"
#include "operator.h"
#include "runner.h"
#include "spi_util.h"
#include "state_store.h"

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
	HeldStore	held;			/* its join store (held.join, NULL: the plan
								 * has no store keys), as this batch holds it */
	bool		counted;		/* rows[] are this batch's (not a cold one) */
} JoinOp;

StaticAssertDecl(JOIN_MAX_KEYS <= JOIN_STORE_MAX_KEYS, "a join store holds every key of a join plan");

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

		catalog_check_plain_table(q->sources[s].join_table, AccessShareLock);
		if (SPI_execute(psprintf("SELECT pg_catalog.count(*) FROM ONLY %s",
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
 * last batch's (as a state store, state_store.h).  A join store that runs
 * the batch counts the rows it holds.
 */
static void
join_count(JoinOp *j, BatchState *b)
{
	if (j->held.active)
	{
		for (int s = 0; s < j->op.runner->nreaders; s++)
			j->rows[s] = join_store_rows(j->held.join, s);
	}
	else if (TransactionIdIsValid(j->rows_xmin) && TransactionIdEquals(j->rows_xmin, b->catalog_xmin))
		memcpy(j->rows, j->rows_committed, sizeof(j->rows));
	else
		count_join_rows(j);
	j->counted = true;
}

/*
 * A store that cannot vouch for what it holds leaves the decision (and the
 * counts) to join_ready, when the batch's rows are known.
 */
static void
join_begin(Operator *op, BatchState *b)
{
	JoinOp	   *j = JOIN(op);

	j->counted = false;
	held_store_begin(&j->held, b);
	if (j->held.state != HELD_PENDING)
		join_count(j, b);
}

/*
 * Does the batch run on the store?  Decided when it first needs its state
 * (held_store_ready): a cold batch (op_store.h) runs on the join tables,
 * and its rows per side stay uncounted, for counting would read the
 * tables; its state_rows come from what it inserts and deletes.
 */
static bool
join_ready(JoinOp *j, BatchState *b, int64 nrows)
{
	bool		was_pending = j->held.state == HELD_PENDING;
	bool		active = held_store_ready(&j->held, b, nrows);

	if (was_pending && j->held.state != HELD_COLD)
		join_count(j, b);
	return active;
}

static void
join_end(Operator *op, TransactionId catalog_xmin)
{
	JoinOp	   *j = JOIN(op);

	if (j->counted)
	{
		memcpy(j->rows_committed, j->rows, sizeof(j->rows));
		j->rows_xmin = catalog_xmin;
	}
	else
		j->rows_xmin = InvalidTransactionId;
	held_store_end(&j->held, catalog_xmin);
}

/* The rows of both sides' join state, for progress.state_rows. */
static int64
join_state_rows(Operator *op, BatchState *b)
{
	JoinOp	   *j = JOIN(op);
	int64		n = 0;

	if (held_store_cold_state_rows(&j->held, b, &n))
		return n;
	if (!j->counted)
		join_count(j, b);
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
	out->desc = desc;
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
 * A receiver of rows of a source's columns, kept as rows of a batch of
 * source id (their values copied into the receiver's memory).
 */
typedef struct RowsCollector
{
	DestReceiver pub;
	MemoryContext cxt;
	BatchInput *out;
	int			room;
} RowsCollector;

static bool
collect_row(TupleTableSlot *slot, DestReceiver *self)
{
	RowsCollector *c = (RowsCollector *) self;
	BatchInput *out = c->out;
	TupleDesc	desc = slot->tts_tupleDescriptor;
	MemoryContext old = MemoryContextSwitchTo(c->cxt);
	Datum	   *values = palloc(sizeof(Datum) * out->natts);

	slot_getallattrs(slot);
	for (int a = 0; a < out->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		values[a] = slot->tts_isnull[a] ? (Datum) 0 :
			datumCopy(slot->tts_values[a], att->attbyval, att->attlen);
	}
	if (out->nrows == c->room)
	{
		c->room *= 2;
		out->rows = repalloc(out->rows, sizeof(BatchRow) * c->room);
	}
	out->rows[out->nrows++] = batch_row_make(out->natts, values, slot->tts_isnull);
	MemoryContextSwitchTo(old);
	return true;
}

static void
collect_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	RowsCollector *c = (RowsCollector *) self;

	if (typeinfo->natts != c->out->natts)
		elog(ERROR, "streamwin: a join's state rows have %d columns, its source %d",
			 typeinfo->natts, c->out->natts);
}

static void
collect_shutdown(DestReceiver *self)
{
}

static void
collect_destroy(DestReceiver *self)
{
	pfree(self);
}

/*
 * In table mode: the rows of side s's join table that share a key with the
 * other side's new rows (in input), as rows of a batch of source id.
 */
static BatchInput *
state_rows_from_table(JoinOp *j, int s, BatchInput *input, int32 id)
{
	RowsCollector *c = palloc0(sizeof(RowsCollector));
	BatchInput *out = palloc0(sizeof(BatchInput));

	out->source_id = id;
	out->natts = j->op.runner->readers[s]->desc->natts;
	out->desc = j->op.runner->readers[s]->desc;
	c->room = 64;
	out->rows = palloc(sizeof(BatchRow) * c->room);
	c->out = out;
	c->cxt = CurrentMemoryContext;
	c->pub.receiveSlot = collect_row;
	c->pub.rStartup = collect_startup;
	c->pub.rShutdown = collect_shutdown;
	c->pub.rDestroy = collect_destroy;
	c->pub.mydest = DestNone;
	(void) runner_run_into(j->op.runner, STMT_JOIN_STATE_ROWS_0 + s, input, NULL, &c->pub);
	c->pub.rDestroy(&c->pub);
	return out->nrows > 0 ? out : NULL;
}

/*
 * A side's new rows followed by its state's candidates, as one input of
 * the batch (JOIN_ROWS_AND_STATE); NULL when it has neither.  The rows are
 * shared, not copied.
 */
static BatchInput *
rows_and_state(BatchInput *rows, BatchInput *state, int32 id)
{
	int			nrows = rows != NULL ? rows->nrows : 0;
	int			nstate = state != NULL ? state->nrows : 0;
	BatchInput *both;

	if (nrows + nstate == 0)
		return NULL;
	Assert(rows == NULL || state == NULL || rows->natts == state->natts);
	both = palloc0(sizeof(BatchInput));
	both->source_id = id;
	both->natts = nrows > 0 ? rows->natts : state->natts;
	both->desc = nrows > 0 ? rows->desc : state->desc;
	both->nrows = nrows + nstate;
	both->rows = palloc(sizeof(BatchRow) * both->nrows);
	if (nrows > 0)
		memcpy(both->rows, rows->rows, sizeof(BatchRow) * nrows);
	if (nstate > 0)
		memcpy(both->rows + nrows, state->rows, sizeof(BatchRow) * nstate);
	return both;
}

/*
 * The batch's pairs (JOIN_PAIRS), found in C: with the store's rows in store
 * mode, else with each side's candidates, the rows of its join table that
 * share a key with the other side's new rows (state_rows_from_table).
 */
static BatchInput *
batch_pairs(JoinOp *j, BatchInput *input)
{
	QueryRunner *r = j->op.runner;
	BatchInput *rows[2];
	BatchInput *state[2] = {NULL, NULL};

	for (int s = 0; s < 2; s++)
		rows[s] = batch_input_find(input, r->readers[s]->source->source_id);
	for (int s = 0; s < 2 && !j->held.active; s++)
		if (rows[1 - s] != NULL && rows[1 - s]->nrows > 0)
			state[s] = state_rows_from_table(j, s, input, -r->readers[s]->source->source_id);
	return join_store_pairs(j->held.join, rows[0], rows[1], j->held.active, state[0], state[1],
							JOIN_PAIRS(r->readers[0]->source->source_id));
}

/*
 * The batch's input (a copy of the list) and, as source -id of each side,
 * the rows of its state that share a key with the other side's new rows:
 * what the batch's statements read as that side's state (join.h); and
 * the first side's new rows and its state together (JOIN_ROWS_AND_STATE).
 */
static BatchInput *
input_with_state(JoinOp *j, BatchInput *input)
{
	QueryRunner *r = j->op.runner;
	BatchInput *head = NULL;
	BatchInput **tail = &head;

	for (BatchInput *in = input; in != NULL; in = in->next)
	{
		BatchInput *copy = palloc(sizeof(BatchInput));

		*copy = *in;
		copy->next = NULL;
		*tail = copy;
		tail = &copy->next;
	}
	if (j->plan->pairs)
	{
		*tail = batch_pairs(j, input);
		return head;
	}
	for (int s = 0; s < r->nreaders; s++)
	{
		int32		id = r->readers[s]->source->source_id;
		BatchInput *probe = batch_input_find(input, r->readers[1 - s]->source->source_id);
		BatchInput *state = NULL;
		BatchInput *both;

		if (probe != NULL && probe->nrows > 0)
		{
			if (j->held.active)
				state = join_store_candidates(j->held.join, s, probe, -id);
			else
				state = state_rows_from_table(j, s, input, -id);
		}
		if (state != NULL)
		{
			*tail = state;
			tail = &state->next;
		}
		if (s == 0 && JOIN_ROWS_AND_STATE_FITS(id) &&
			(both = rows_and_state(batch_input_find(input, id), state, JOIN_ROWS_AND_STATE(id))) != NULL)
		{
			*tail = both;
			tail = &both->next;
		}
	}
	return head;
}

/*
 * With a join store: the sink reads the batch's pairs over the batch's
 * rows and the state's candidates; then each side's new rows go into its
 * join table and, in store mode, into memory, but for those the batch's
 * eviction (join_emit, with the same new watermark) would take out again,
 * which the store leaves out.  Batches that share a transaction keep their
 * rows back from the tables until join_sync.  An inner join: no row is
 * marked matched.
 */
static void
join_apply_store(JoinOp *j, BatchState *b, BatchInput *input, RowsFlow flow)
{
	QueryRunner *r = j->op.runner;
	Datum		batch = Int64GetDatum(b->batch_id);

	Assert(j->preserved < 0 && flow == FLOW_BATCH);
	(void) join_ready(j, b, b->ninput);
	operator_apply(j->op.next, b, input_with_state(j, input), flow);
	for (int s = 0; s < r->nreaders; s++)
	{
		uint64		n;

		if (batch_input_rows(input, r->readers[s]->source->source_id) == 0)
			continue;
		if (j->held.active)
		{
			TimestampTz before;
			DestReceiver *dest;

			/* no cutoff: DT_NOBEGIN, before which nothing is */
			if (!b->has_new_wm || !join_side_cutoff(&j->plan->sides[s], b->new_wm, &before))
				before = DT_NOBEGIN;
			dest = join_store_writer(j->held.join, s, before, b->batch_id, r->one_transaction);

			(void) runner_run_into(r, STMT_JOIN_INSERT_ROWS_0 + s, input, &batch, dest);
			n = join_store_writer_kept(dest);
			dest->rDestroy(dest);
		}
		else
			n = join_insert(r, s, input, &batch);
		j->rows[s] += (int64) n;
	}
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

	if (j->held.join != NULL)
	{
		join_apply_store(j, b, input, flow);
		return;
	}
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
	(void) join_ready(j, b, 0);
	for (int s = 0; s < r->nreaders; s++)
	{
		TimestampTz before;
		Datum		cutoff;
		uint64		n;

		if (!join_side_cutoff(&j->plan->sides[s], b->new_wm, &before))
			continue;
		cutoff = TimestampTzGetDatum(before);
		if (j->held.active)
			n = join_store_evict(j->held.join, s, before);
		else
			n = runner_run(r, STMT_JOIN_EVICT_0 + s, NULL, &cutoff);
		j->rows[s] -= (int64) n;
		Assert(!j->counted || j->rows[s] >= 0);
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

/*
 * The side whose join table is unlogged, if its store runs the batch in
 * memory (and so may keep rows back), or -1.
 */
static int
held_side(JoinOp *j, Oid unlogged)
{
	if (!j->held.active || j->held.join == NULL)
		return -1;
	for (int s = 0; s < 2; s++)
		if (j->op.runner->query->sources[s].join_table == unlogged)
			return s;
	return -1;
}

/*
 * A checkpoint copies a join table's rows of the batches since the last one
 * (checkpoint.c): those the store keeps back it writes from memory, and
 * keeps back, so that a checkpoint in the middle of run_available writes
 * no row into the join tables (a row that goes before the run ends is
 * never written there), unless the checkpoint table is not one it can
 * write as the copy would (join_store_checkpoint_kept).
 */
static void
join_checkpoint_kept(Operator *op, Oid unlogged, Oid logged, int64 since_batch)
{
	int			s = held_side(JOIN(op), unlogged);

	if (s >= 0)
		join_store_checkpoint_kept(JOIN(op)->held.join, s, logged, since_batch);
}

static int64
join_kept_bytes(Operator *op, Oid unlogged)
{
	int			s = held_side(JOIN(op), unlogged);

	return s >= 0 ? join_store_kept_bytes(JOIN(op)->held.join, s) : 0;
}

/* The rows the store kept back go into the join tables. */
static void
join_sync(Operator *op)
{
	held_store_sync(&JOIN(op)->held);
}

/* A cold batch leaves its checkpoint, which reads the join tables, to later. */
static bool
join_defers_checkpoint(Operator *op)
{
	return held_store_defers_checkpoint(&JOIN(op)->held);
}

static void
join_invalidate(Operator *op)
{
	JOIN(op)->rows_xmin = InvalidTransactionId;
	held_store_invalidate(&JOIN(op)->held);
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
	.checkpoint_kept = join_checkpoint_kept,
	.kept_bytes = join_kept_bytes,
	.defers_checkpoint = join_defers_checkpoint,
	.sync = join_sync,
	.state_rows = join_state_rows,
	.end = join_end,
	.invalidate = join_invalidate,
	.free = join_free,
};

/* The join store of a plan with store keys, in the runner's memory. */
static JoinStore *
make_store(QueryRunner *r, const JoinPlan *jp)
{
	JoinStoreSpec spec;

	memset(&spec, 0, sizeof(spec));
	spec.nkeys = jp->nkeys;
	for (int k = 0; k < jp->nkeys; k++)
	{
		spec.key_attno[0][k] = jp->keys[k].attno[0];
		spec.key_attno[1][k] = jp->keys[k].attno[1];
		spec.key_op[k] = jp->keys[k].op;
		spec.key_collation[k] = jp->keys[k].collation;
		spec.key_left[k] = jp->keys[k].left;
	}
	for (int s = 0; s < 2; s++)
	{
		Oid			table = r->query->sources[s].join_table;

		spec.table[s] = table;
		spec.time_attno[s] = get_attnum(table, jp->sides[s].time_column);
		if (spec.time_attno[s] == InvalidAttrNumber)
			elog(ERROR, "streamwin: join table %u of query \"%s\" has no column \"%s\"",
				 table, r->query->name, jp->sides[s].time_column);
		spec.batch_attno[s] = jp->sides[s].batch_column != NULL ?
			get_attnum(table, jp->sides[s].batch_column) : InvalidAttrNumber;
		spec.evicted[s] = jp->sides[s].evicted;
		spec.desc[s] = r->readers[s]->desc;
	}
	return join_store_create(&spec, r->cxt);
}

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
	if (j->plan->nkeys > 0)
	{
		Oid			tables[2] = {r->query->sources[0].join_table, r->query->sources[1].join_table};

		held_store_init_join(&j->held, make_store(r, j->plan), tables, STMT_JOIN_INDEX_0,
							 STMT_JOIN_INDEX_1, STMT_JOIN_UNINDEX);

		/*
		 * A batch runs cold where the query's state_rows are the join's
		 * alone: a join transform, not a join under an aggregation (which
		 * loads its groups, and whose groups count too).
		 */
		j->held.cold_allowed = !OidIsValid(r->query->state_table);
	}
	return &j->op;
}
