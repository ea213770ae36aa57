/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  One micro-batch, start to finish, as named stages over one context.
 *
 * A batch runs inside the caller's transaction (the worker's, or the
 * session's for run_batch) and goes through, in order:
 *
 *	 begin		lock the query (one batch at a time), read where it stands;
 *				after a crash, restore the checkpoint and start replaying;
 *				the batch's timestamp (its own, or the one a replayed
 *				batch recorded)
 *	 fetch		position each source's reader at the stored positions and
 *				read the next rows (or, replaying, exactly the rows the
 *				batch read the first time)
 *	 decode		rows into source tuples, late rows and dead letters set
 *				aside, event times per partition
 *	 watermark	the query's watermark after these rows; a batch with no
 *				row that moves nothing ends here, having written nothing
 *	 apply		drop duplicates, run the compiled batch statement over the
 *				rows (as the query's owner), keep dead letters and late
 *				rows; a join also keeps its sides' new rows, and lets go of
 *				the rows the watermark put out of reach (join.c)
 *	 emit		what the moved watermark closes: windows emitted or
 *				evicted, dedup keys forgotten; complete mode's rewrite
 *	 finish		positions and the progress row, and a checkpoint when due
 *
 * so that state, results, positions and progress commit together or not
 * at all.  A failed batch leaves the stored positions where they were, and
 * the next batch's fetch starts from them again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "access/table.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "batch.h"
#include "catalog.h"
#include "checkpoint.h"
#include "join.h"
#include "offsets.h"
#include "options.h"
#include "progress.h"
#include "state_store.h"
#include "spi_util.h"

/* streamwin.batch_work_mem (kB): work_mem of batch statements; -1: work_mem */
int			streamwin_batch_work_mem = 65536;

/* One source's part of a batch. */
typedef struct BatchSource
{
	SourceReader *rd;
	RowDecoder *decoder;
	SourcePosition *start;		/* per partition, where the batch began */
	SourceRow  *rows;
	int			nrows;
	RowResult  *res;
	BatchInput	input;			/* the rows the query reads */
	int			ndead;
	int			nlate;
} BatchSource;

/* One batch in progress. */
typedef struct BatchContext
{
	QueryRunner *r;
	QueryInfo  *q;
	int			nsources;
	BatchSource src[QUERY_MAX_SOURCES];
	BatchInput *input;			/* the sources' inputs, as one list */
	BatchStats *stats;
	int			fetch_timeout_ms;
	int			linger_ms;

	/* begin: where the query stood */
	int64		last_batch_id;
	bool		has_old_wm;
	TimestampTz old_wm;
	bool		has_last_at;
	TimestampTz last_at;
	int64		state_batch_id; /* the batch the state reflects */
	int64		checkpoint_batch;	/* of the last checkpoint, or 0 */
	bool		replay;			/* the state is behind: replaying */
	bool		replay_has_wm;	/* replaying: the watermark recorded then */
	TimestampTz replay_wm;
	TransactionId catalog_xmin; /* of the query's catalog row */
	StateStore *store;			/* the query's store, if this batch uses it */
	StateStore *dedup;			/* its dedup keys' store, likewise */

	/* fetch and decode, over all sources */
	int			nrows;
	int			ninput;			/* rows the query reads */
	int			ndead;
	int			nlate;

	/* watermark */
	bool		has_new_wm;
	TimestampTz new_wm;
	bool		wm_moved;
	TimestampTz close_wm;		/* what closes windows: the watermark, or for
								 * windows over a join the watermark held back
								 * by the join's range */

	/* apply */
	bool		unmatched;		/* an outer join emitted unmatched rows */
} BatchContext;

/* Does the query keep UNLOGGED state, which a crash can lose? */
#define BATCH_HAS_STATE(b) QUERY_HAS_UNLOGGED_STATE((b)->q)

/* Is the table without indexes, as a store needs it? */
static bool
table_unindexed(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		unindexed = RelationGetIndexList(rel) == NIL;

	table_close(rel, AccessShareLock);
	return unindexed;
}

/* A store's table, and the statements that make and drop its indexes. */
typedef struct StoreTable
{
	const char *what;			/* for the server log: what it holds, */
	bool		plural;			/* whether that is a plural, */
	const char *table_name;		/* and where it is kept */
	Oid			table;
	QueryStatement index[2];	/* NUM_STATEMENTS: none */
	QueryStatement unindex;
} StoreTable;

/* The indexes the SQL statements need on the table, unless they are there. */
static void
store_table_index(BatchContext *b, const StoreTable *t)
{
	if (!table_unindexed(t->table))
		return;
	for (int i = 0; i < (int) lengthof(t->index); i++)
		if (t->index[i] != NUM_STATEMENTS && b->r->plans[t->index[i]] != NULL)
			(void) runner_run(b->r, t->index[i], NULL, NULL);
}

/*
 * A store of the query's: loaded from its table when it cannot vouch for
 * what it holds (see state_store.h); returns whether the batch runs on it.
 * When the state does not fit in streamwin.state_memory, the query's SQL
 * statements run on the table instead, with the indexes they need ("table
 * mode"), and every 100 batches the store tries again.
 */
static bool
batch_begin_one_store(BatchContext *b, RunnerStore *rs, const StoreTable *t)
{
	rs->active = false;
	if (rs->store == NULL)
		return false;
	if (rs->table_mode && ++rs->table_mode_batches % 100 != 0)
	{
		/*
		 * The index may be gone since this runner made it: with the batch
		 * that made it, rolled back, or dropped by another session's store.
		 */
		store_table_index(b, t);
		return false;
	}
	if (!store_begin(rs->store, b->catalog_xmin))
	{
		if (!rs->table_mode)
			ereport(LOG,
					(errmsg("streamwin: the %s of query \"%s\" %s not fit in streamwin.state_memory (%d kB); it runs on its %s",
							t->what, b->q->name, t->plural ? "do" : "does", streamwin_state_memory,
							t->table_name)));
		rs->table_mode = true;
		rs->table_mode_batches = 0;
		store_table_index(b, t);
		return false;
	}
	if (!table_unindexed(t->table))
		(void) runner_run(b->r, t->unindex, NULL, NULL);
	if (rs->table_mode)
		ereport(LOG,
				(errmsg("streamwin: the %s of query \"%s\" %s in memory again",
						t->what, b->q->name, t->plural ? "fit" : "fits")));
	rs->table_mode = false;
	rs->active = true;
	return true;
}

/* The query's stores: its open groups' and its dedup keys'. */
static void
batch_begin_store(BatchContext *b)
{
	QueryRunner *r = b->r;
	StoreTable	groups = {"state", false, "state table", b->q->state_table,
	{STMT_STATE_INDEX, STMT_STATE_END_INDEX}, STMT_STATE_UNINDEX};
	StoreTable	dedup = {"dedup keys", true, "dedup table", b->q->dedup_table,
	{STMT_DEDUP_INDEX, NUM_STATEMENTS}, STMT_DEDUP_UNINDEX};

	if (batch_begin_one_store(b, &r->groups, &groups))
		b->store = r->groups.store;
	if (batch_begin_one_store(b, &r->dedup, &dedup))
		b->dedup = r->dedup.store;
}

/*
 * begin: lock the query for the duration of the batch and read what the
 * batch starts from.  Concurrent batches of one query (a worker and a
 * run_batch, or two sessions) are serialised here.  If a crash emptied the
 * state, put its checkpoint back: the batches since are then replayed,
 * one per batch, each reading and deciding exactly as the first time.
 */
static void
batch_begin(BatchContext *b)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(b->r->query_id)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;

	/*
	 * The lock first, then a statement whose snapshot sees what the batch
	 * before committed.  A transaction whose snapshot is older than the lock
	 * (REPEATABLE READ, a user's run_batch) locks the row as well, to fail
	 * rather than run on a stale position.
	 */
#define QUERY_POSITION_SQL \
	"SELECT last_batch_id, watermark, last_batch_at, state_batch_id, " \
	"coalesce(checkpoint_batch_id, 0), xmin FROM streamwin.query_catalog WHERE query_id = $1"

	catalog_lock_query(b->r->query_id);
	catalog_exec(IsolationUsesXactSnapshot() ? QUERY_POSITION_SQL " FOR UPDATE" : QUERY_POSITION_SQL,
				 1, types, args, NULL, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" no longer exists", b->q->name)));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	b->last_batch_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	d = SPI_getbinval(tup, desc, 2, &isnull);
	b->has_old_wm = !isnull;
	b->old_wm = isnull ? 0 : DatumGetTimestampTz(d);
	d = SPI_getbinval(tup, desc, 3, &isnull);
	b->has_last_at = !isnull;
	b->last_at = isnull ? 0 : DatumGetTimestampTz(d);
	b->state_batch_id = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
	b->checkpoint_batch = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	b->catalog_xmin = DatumGetTransactionId(SPI_getbinval(tup, desc, 6, &isnull));

	if (BATCH_HAS_STATE(b) && checkpoint_state_lost(b->r))
	{
		b->state_batch_id = checkpoint_restore(b->r);
		runner_state_rewritten(b->r);
	}
	b->replay = BATCH_HAS_STATE(b) && b->state_batch_id < b->last_batch_id;

	/* the batch's processing time: now() in its statements and event time */
	batch_timestamp_set(b->replay ?
						checkpoint_replay_timestamp(b->r, b->state_batch_id + 1) :
						b->stats->started_at);
	batch_begin_store(b);
	if (b->q->join != NULL)
		join_batch_begin(b->r, b->catalog_xmin);
}

/*
 * fetch: the next rows of every source from the stored positions, or when
 * replaying the rows of the batch after the state's, up to the end
 * positions it recorded, with the watermarks it started from and ended
 * with.  A join's sources are read without waiting first: one may have
 * rows while the other has none, and a batch waits only when none has any.
 */
static void
batch_fetch(BatchContext *b)
{
	offsets_load(b->r);
	offsets_position(b->r);
	for (int s = 0; s < b->nsources; s++)
	{
		SourceReader *rd = b->src[s].rd;

		b->src[s].start = palloc(sizeof(SourcePosition) * Max(rd->nparts, 1));
		for (int i = 0; i < rd->nparts; i++)
			b->src[s].start[i] = rd->parts[i].next;
	}

	if (b->replay)
	{
		SourcePosition *targets[QUERY_MAX_SOURCES];

		for (int s = 0; s < b->nsources; s++)
			targets[s] = palloc(sizeof(SourcePosition) * Max(b->src[s].rd->nparts, 1));
		checkpoint_replay_bounds(b->r, b->state_batch_id + 1, targets, &b->has_old_wm,
								 &b->old_wm, &b->replay_has_wm, &b->replay_wm);
		for (int s = 0; s < b->nsources; s++)
		{
			SourceReader *rd = b->src[s].rd;

			b->src[s].nrows = rd->ops->replay(rd, targets[s], &b->src[s].rows);
		}
	}
	else if (b->nsources == 1)
	{
		SourceReader *rd = b->src[0].rd;

		b->src[0].nrows = rd->ops->fetch(rd, b->fetch_timeout_ms, b->linger_ms, &b->src[0].rows);
	}
	else
	{
		for (int pass = 0; pass < 2; pass++)
		{
			int			timeout = pass == 0 ? 0 : b->fetch_timeout_ms / b->nsources;
			int			n = 0;

			for (int s = 0; s < b->nsources; s++)
			{
				SourceReader *rd = b->src[s].rd;

				b->src[s].nrows = rd->ops->fetch(rd, timeout, b->linger_ms, &b->src[s].rows);
				n += b->src[s].nrows;
			}
			if (n > 0 || b->fetch_timeout_ms == 0)
				break;
		}
	}
	for (int s = 0; s < b->nsources; s++)
	{
		b->nrows += b->src[s].nrows;
		if (b->src[s].nrows >= b->src[s].rd->source->max_records_per_batch)
			b->stats->full = true;
	}
}

/*
 * decode: the rows as tuples of their source, each partition's rows and
 * newest event time counted for the watermark.  Late rows are dropped
 * against the watermark of the previous batch (complete mode rewrites
 * everything, so none is late there).
 */
static void
batch_decode(BatchContext *b)
{
	bool		drop_late;

	drop_late = b->q->has_watermark && b->has_old_wm &&
		b->q->output_mode != OUTPUT_COMPLETE;
	b->input = NULL;
	for (int s = b->nsources - 1; s >= 0; s--)
	{
		BatchSource *bs = &b->src[s];
		SourceReader *rd = bs->rd;

		bs->res = rows_decode(bs->decoder, bs->rows, bs->nrows, drop_late, b->old_wm);
		bs->input.source_id = rd->source->source_id;
		bs->input.natts = rd->desc->natts;
		bs->input.nrows = 0;
		bs->input.rows = palloc(sizeof(BatchRow) * Max(bs->nrows, 1));
		bs->input.next = b->input;
		b->input = &bs->input;
		for (int i = 0; i < bs->nrows; i++)
		{
			RowResult  *res = &bs->res[i];
			PartitionState *p = &rd->parts[bs->rows[i].part];

			p->batch_rows++;
			if (res->has_event_time &&
				(!p->batch_has_max || res->event_time > p->batch_max_event_time))
			{
				p->batch_max_event_time = res->event_time;
				p->batch_has_max = true;
			}
			if (res->status == 'o')
				bs->input.rows[bs->input.nrows++] = res->row;
			else if (res->status == 'l')
				bs->nlate++;
			else
				bs->ndead++;
		}
		b->ninput += bs->input.nrows;
		b->nlate += bs->nlate;
		b->ndead += bs->ndead;
	}
}

/*
 * watermark: the query's watermark after this batch (a replay decides as
 * the original batch did).  Returns false when the batch has nothing to
 * do: no row, and no watermark move (idle partitions can move it).
 */
static bool
batch_watermark(BatchContext *b)
{
	b->has_new_wm = offsets_compute_watermark(b->r, b->has_old_wm, b->old_wm,
											  GetCurrentTimestamp(), &b->new_wm) &&
		b->q->has_watermark;
	if (b->replay)
	{
		b->has_new_wm = b->replay_has_wm;
		b->new_wm = b->replay_wm;
	}
	b->wm_moved = b->has_new_wm && (!b->has_old_wm || b->new_wm > b->old_wm);
	b->close_wm = b->new_wm;
	if (b->q->join != NULL && b->has_new_wm)
		b->close_wm = join_held_watermark(b->q->join, b->new_wm);
	return b->nrows > 0 || b->wm_moved || b->last_batch_id == 0 || b->replay;
}

/*
 * A batch with nothing to do may still have moved the positions (a table
 * source reads other tables' WAL).  Store them now and then, so that the
 * source can let go of what it keeps; a query with state moves its
 * checkpoint along, since the state is unchanged by positions without
 * rows: if no batch ran since the checkpoint only its positions move, and
 * otherwise a checkpoint of the state as of the last batch is taken at the
 * new positions.
 */
static bool
positions_moved(BatchContext *b)
{
	for (int s = 0; s < b->nsources; s++)
	{
		SourceReader *rd = b->src[s].rd;

		if (rd->ops->moved_without_rows != NULL && rd->ops->moved_without_rows(rd, b->src[s].start))
			return true;
	}
	return false;
}

static void
batch_store_idle(BatchContext *b)
{
	TransactionId catalog_xmin = b->catalog_xmin;

	if (positions_moved(b))
	{
		offsets_store(b->r);
		if (BATCH_HAS_STATE(b))
		{
			if (b->checkpoint_batch == b->last_batch_id)
				checkpoint_move_positions(b->r);
			else if (checkpoint_take(b->r, b->last_batch_id, b->has_old_wm, b->old_wm, false))
				catalog_xmin = GetCurrentTransactionId();
		}
	}
	/* nothing changed the stores, nor a join's rows */
	if (b->store != NULL)
		store_end(b->store, catalog_xmin);
	if (b->dedup != NULL)
		store_end(b->dedup, catalog_xmin);
	if (b->q->join != NULL)
		join_batch_end(b->r, catalog_xmin);
}

/* The batch's id: the one after the state's when replayed, else after the last */
static int64
this_batch_id(BatchContext *b)
{
	return b->replay ? b->state_batch_id + 1 : b->last_batch_id + 1;
}

/*
 * Keep only the first occurrence of each key not seen before (see
 * dedup_statements in compile_dedup.c); returns how many rows were dropped.
 */
static int64
drop_duplicates(BatchContext *b)
{
	BatchInput *input = &b->src[b->q->dedup_side].input;
	bool	   *keep = palloc0(sizeof(bool) * input->nrows);
	int			kept = 0;
	int			before = input->nrows;

	if (b->dedup != NULL)
	{
		DestReceiver *dest = store_dedup_receiver(b->dedup, this_batch_id(b), keep,
												  input->nrows);

		(void) runner_run_into(b->r, STMT_DEDUP_ROWS, input, NULL, dest);
		dest->rDestroy(dest);
		store_write_changed(b->dedup);
	}
	else
	{
		Datum		batch_id = Int64GetDatum(this_batch_id(b));
		uint64		n = runner_run(b->r, STMT_DEDUP, input, &batch_id);

		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;
			int32		ord = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 1, &isnull));

			if (ord >= 0 && ord < input->nrows)
				keep[ord] = true;
		}
	}
	for (int i = 0; i < input->nrows; i++)
		if (keep[i])
			input->rows[kept++] = input->rows[i];
	input->nrows = kept;
	b->ninput -= before - kept;
	return before - kept;
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
store_write_results(BatchContext *b)
{
	StateStore *s = b->store;
	QueryRunner *r = b->r;

	store_classify_changed(s, b->replay, r->insert_variants_paused == 0);
	elog(DEBUG1, "streamwin: query \"%s\" writes " INT64_FORMAT " new, " INT64_FORMAT
		 " known and " INT64_FORMAT " other result rows",
		 b->q->name, store_count_rows(s, STORE_ROWS_INSERT),
		 store_count_rows(s, STORE_ROWS_UPDATE), store_count_rows(s, STORE_ROWS_UPSERT));
	store_set_current(s, r->query_id);
	PG_TRY();
	{
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
			(void) runner_run(r, STMT_STORE_UPDATE, NULL, NULL);
			store_rows_written(s, STORE_ROWS_UPDATE, STORE_ROWS_UPSERT);
		}
		if (store_count_rows(s, STORE_ROWS_UPSERT) > 0)
		{
			(void) runner_run(r, STMT_STORE_UPSERT, NULL, NULL);
			store_rows_written(s, STORE_ROWS_UPSERT, STORE_ROWS_UPSERT);
		}
	}
	PG_FINALLY();
	{
		store_set_current(NULL, 0);
	}
	PG_END_TRY();
}

/*
 * apply with a store: the executor aggregates the batch's rows into its
 * groups (the compiled partial query), the store merges them and writes
 * the changed groups' state rows, and in update mode their result rows.
 */
static void
store_apply(BatchContext *b)
{
	DestReceiver *merge;
	BatchInput *unmatched = NULL;
	uint64		n;

	if (b->ninput > 0)
	{
		bool		rows = b->r->plans[STMT_STORE_BATCH_ROWS] != NULL &&
			store_merge_rows(b->store);

		merge = store_merge_receiver(b->store, rows, b->ninput);
		n = runner_run_into(b->r, rows ? STMT_STORE_BATCH_ROWS : STMT_STORE_GROUPS,
							b->input, NULL, merge);
		merge->rDestroy(merge);
		elog(DEBUG1, "streamwin: query \"%s\" merges " UINT64_FORMAT " %s into its store",
			 b->q->name, n, rows ? "rows" : "groups");
	}
	if (b->q->join != NULL)
	{
		unmatched = join_apply(b->r, b->input, this_batch_id(b), b->has_new_wm, b->new_wm);
		b->unmatched = unmatched != NULL;
		if (unmatched != NULL)
		{
			merge = store_merge_receiver(b->store, false, 0);
			(void) runner_run_into(b->r, STMT_JOIN_UNMATCHED_GROUPS, unmatched, NULL, merge);
			merge->rDestroy(merge);
		}
	}
	if (b->ninput == 0 && unmatched == NULL)
		return;
	store_write_changed(b->store);
	if (b->q->output_mode == OUTPUT_UPDATE)
		store_write_results(b);
}

/*
 * apply: the batch's rows into the query's state and results.  A replayed
 * transform only rebuilds its dedup keys: its rows are in its result.
 */
static void
batch_apply(BatchContext *b)
{
	QueryRunner *r = b->r;

	if (b->ninput > 0 && (b->dedup != NULL || r->plans[STMT_DEDUP] != NULL))
		b->stats->duplicates = drop_duplicates(b);
	if (r->insert_variants_paused > 0)
		r->insert_variants_paused--;
	if (b->store != NULL)
		store_apply(b);
	else
	{
		/* a replayed transform's rows are in its result already */
		bool		writes = b->q->aggregate || !b->replay;

		if (b->ninput > 0 && writes)
			runner_run_writing(r, STMT_BATCH, b->input, NULL, b->replay);
		if (b->q->join != NULL)
		{
			BatchInput *unmatched = join_apply(r, b->input, this_batch_id(b), b->has_new_wm, b->new_wm);

			b->unmatched = unmatched != NULL;
			if (unmatched != NULL && writes)
				(void) runner_run(r, STMT_JOIN_UNMATCHED, unmatched, NULL);
		}
	}
	for (int s = 0; s < b->nsources; s++)
	{
		BatchSource *bs = &b->src[s];

		if (bs->ndead > 0)
			rows_record_rejected(bs->decoder, bs->rows, bs->res, bs->nrows, 'd', bs->ndead, 0);
		if (bs->nlate > 0 && b->q->capture_late_rows)
			rows_record_rejected(bs->decoder, bs->rows, bs->res, bs->nrows, 'l', bs->nlate,
								 b->old_wm);
	}
}

/*
 * emit with a store: the groups of the windows the watermark closed are
 * written (append mode) and evicted; complete mode rewrites the result
 * from every group.
 */
static void
store_emit(BatchContext *b)
{
	StateStore *s = b->store;
	QueryRunner *r = b->r;
	bool		closed = b->wm_moved && store_close_windows(s, b->close_wm) > 0;
	bool		refresh;

	refresh = b->q->output_mode == OUTPUT_COMPLETE &&
		(b->ninput > 0 || b->unmatched || b->last_batch_id == 0);
	store_set_current(s, r->query_id);
	PG_TRY();
	{
		if (closed && b->q->output_mode == OUTPUT_APPEND &&
			!runner_try_insert(r, STMT_STORE_CLOSE, b->replay))
			(void) runner_run(r, STMT_STORE_CLOSE_UPSERT, NULL, NULL);
		if (refresh)
		{
			(void) runner_run(r, STMT_CLEAR, NULL, NULL);
			(void) runner_run(r, STMT_STORE_REFRESH, NULL, NULL);
		}
	}
	PG_FINALLY();
	{
		store_set_current(NULL, 0);
	}
	PG_END_TRY();
	if (closed)
		store_evict_closed(s);
}

/* emit: what the moved watermark closes, and complete mode's rewrite. */
static void
batch_emit(BatchContext *b)
{
	QueryRunner *r = b->r;
	Datum		wm = TimestampTzGetDatum(b->new_wm);
	Datum		close_wm = TimestampTzGetDatum(b->close_wm);

	if (b->store != NULL)
		store_emit(b);
	else
	{
		if (b->wm_moved && r->plans[STMT_CLOSE] != NULL)
			runner_run_writing(r, STMT_CLOSE, NULL, &close_wm, b->replay);
		if (r->plans[STMT_REFRESH] != NULL &&
			(b->ninput > 0 || b->unmatched || b->last_batch_id == 0))
		{
			(void) runner_run(r, STMT_CLEAR, NULL, NULL);
			(void) runner_run(r, STMT_REFRESH, NULL, NULL);
		}
	}
	if (b->wm_moved && b->dedup != NULL && store_close_windows(b->dedup, b->new_wm) > 0)
		store_evict_closed(b->dedup);
	else if (b->wm_moved && b->dedup == NULL && r->plans[STMT_DEDUP_EVICT] != NULL)
		(void) runner_run(r, STMT_DEDUP_EVICT, NULL, &wm);
}

/*
 * The batch's missing_keys: its source's, or for a join an object with
 * each source's under its name (NULL: no message lacked a key).
 */
static char *
batch_missing_keys_json(BatchContext *b)
{
	StringInfoData buf;
	bool		any = false;

	if (b->nsources == 1)
		return rows_missing_keys_json(b->src[0].decoder);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int s = 0; s < b->nsources; s++)
	{
		char	   *one = rows_missing_keys_json(b->src[s].decoder);

		if (one == NULL)
			continue;
		if (any)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, b->src[s].rd->source->name);
		appendStringInfo(&buf, ": %s", one);
		any = true;
	}
	appendStringInfoChar(&buf, '}');
	return any ? buf.data : NULL;
}

/*
 * finish: the state's size, the positions, the batch's statistics and
 * progress row, and a checkpoint when one is due.  A replayed batch has
 * its progress row already; it only records that the state is back to it.
 */
static void
batch_finish(BatchContext *b)
{
	QueryRunner *r = b->r;
	BatchStats *stats = b->stats;
	TimestampTz now;

	if (b->store != NULL)
		stats->state_rows = store_groups(b->store);
	else if (r->plans[STMT_STATE_COUNT] != NULL)
	{
		bool		isnull;

		(void) runner_run(r, STMT_STATE_COUNT, NULL, NULL);
		stats->state_rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 1, &isnull));
	}
	if (b->q->join != NULL)
		stats->state_rows += join_state_rows(r);
	offsets_store(r);

	stats->batch_id = this_batch_id(b);
	stats->replayed = b->replay;
	stats->input_rows = b->nrows;
	stats->late_rows = b->nlate;
	stats->dead_letters = b->ndead;
	stats->has_watermark = b->has_new_wm;
	stats->watermark = b->new_wm;
	/* in the batch's context: it outlives SPI_finish(), for the caller */
	{
		MemoryContext spi_cxt = MemoryContextSwitchTo(r->batch_cxt);

		stats->offsets_json = offsets_json(r);
		stats->missing_keys_json = batch_missing_keys_json(b);
		MemoryContextSwitchTo(spi_cxt);
	}
	now = GetCurrentTimestamp();
	stats->duration_ms = (now - stats->started_at) / 1000.0;
	stats->processed_rows_per_second = stats->duration_ms > 0 ?
		b->nrows / (stats->duration_ms / 1000.0) : 0;
	if (b->has_last_at && stats->started_at > b->last_at)
		stats->input_rows_per_second = b->nrows / ((stats->started_at - b->last_at) / 1000000.0);

	if (b->replay)
		checkpoint_note_replayed(r, stats->batch_id);
	else
	{
		if (BATCH_HAS_STATE(b))
			checkpoint_after_batch(r, stats->batch_id, b->checkpoint_batch, b->has_new_wm,
								   b->new_wm, now);
		progress_record(r, stats);
	}
	/* this transaction wrote the catalog row last: the stores are its state */
	if (b->store != NULL)
		store_end(b->store, GetCurrentTransactionId());
	if (b->dedup != NULL)
		store_end(b->dedup, GetCurrentTransactionId());
	if (b->q->join != NULL)
		join_batch_end(r, GetCurrentTransactionId());
}

static void
batch_run_stages(QueryRunner *r, int fetch_timeout_ms, int linger_ms, BatchStats *stats)
{
	BatchContext b;
	MemoryContext old;

	MemoryContextReset(r->batch_cxt);
	old = MemoryContextSwitchTo(r->batch_cxt);
	memset(stats, 0, sizeof(BatchStats));
	stats->started_at = GetCurrentTimestamp();
	memset(&b, 0, sizeof(b));
	b.r = r;
	b.q = r->query;
	b.nsources = r->nreaders;
	for (int s = 0; s < b.nsources; s++)
	{
		b.src[s].rd = r->readers[s];
		b.src[s].decoder = r->decoders[s];
	}
	b.stats = stats;
	b.fetch_timeout_ms = fetch_timeout_ms;
	b.linger_ms = linger_ms;

	SPI_connect();
	batch_begin(&b);
	batch_fetch(&b);
	batch_decode(&b);
	if (batch_watermark(&b))
	{
		batch_apply(&b);
		batch_emit(&b);
		batch_finish(&b);
	}
	else
		batch_store_idle(&b);
	r->groups.active = false;
	r->dedup.active = false;
	SPI_finish();
	MemoryContextSwitchTo(old);
}

void
batch_execute(QueryRunner *r, int fetch_timeout_ms, int linger_ms, BatchStats *stats)
{
	int			save_nestlevel = NewGUCNestLevel();

	/*
	 * A batch's statements group, sort and hold up to max_records_per_batch
	 * rows at once, far more than one interactive query's work_mem is sized
	 * for: with the default 4MB, a batch of 100,000 distinct groups spills
	 * its hash aggregate and sort to temporary files.  Set for the batch
	 * only, like a function's SET clause; an error unwinds it with the
	 * transaction.
	 */
	if (streamwin_batch_work_mem > 0)
		(void) set_config_option("work_mem", psprintf("%d", streamwin_batch_work_mem),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	/*
	 * Nothing a batch decides may depend on the session that runs it (a
	 * worker, a user's run_batch, a replay): timestamps without a zone offset
	 * in the messages, casts of timestamp to timestamptz, and the date and
	 * time functions of its statements use the source's zone (option
	 * "timezone"), and dates are read and written in one style.
	 */
	(void) set_config_option("TimeZone", r->readers[0]->source->timezone,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("DateStyle", SOURCE_DATESTYLE,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("IntervalStyle", SOURCE_INTERVALSTYLE,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	batch_run_stages(r, fetch_timeout_ms, linger_ms, stats);
	batch_timestamp_clear();
	AtEOXact_GUC(true, save_nestlevel);
}

Jsonb *
batch_stats_jsonb(QueryRunner *r, BatchStats *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"query\": ");
	escape_json(&buf, r->query->name);
	if (s->batch_id == 0)
		appendStringInfoString(&buf, ", \"batch_id\": null");
	else
		appendStringInfo(&buf, ", \"batch_id\": " INT64_FORMAT, s->batch_id);
	json_append_timestamp(&buf, "started_at", true, s->started_at);
	appendStringInfo(&buf, ", \"duration_ms\": %.3f, \"input_rows\": " INT64_FORMAT
					 ", \"input_rows_per_second\": %.1f, \"processed_rows_per_second\": %.1f"
					 ", \"late_rows_dropped\": " INT64_FORMAT ", \"duplicates_dropped\": " INT64_FORMAT
					 ", \"dead_letters\": " INT64_FORMAT ", \"state_rows\": " INT64_FORMAT,
					 s->duration_ms, s->input_rows, s->input_rows_per_second,
					 s->processed_rows_per_second, s->late_rows, s->duplicates, s->dead_letters,
					 s->state_rows);
	json_append_timestamp(&buf, "watermark", s->has_watermark, s->watermark);
	if (s->missing_keys_json)
		appendStringInfo(&buf, ", \"missing_keys\": %s", s->missing_keys_json);
	if (s->replayed)
		appendStringInfoString(&buf, ", \"replayed\": true");
	appendStringInfo(&buf, ", \"offsets\": %s}", s->offsets_json ? s->offsets_json : offsets_json(r));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}
