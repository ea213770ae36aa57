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
 *	 decode		rows into source tuples (a changelog's message into the
 *				rows it retracts and adds), late rows and dead letters set
 *				aside, event times per partition
 *	 watermark	the query's watermark after these rows; a batch with no
 *				row that moves nothing ends here, having written nothing
 *	 apply		the rows through the query's operators (operator.h: dedup,
 *				a join's state, the aggregation or transform that writes
 *				the result), each running its compiled statements as the
 *				query's owner; keep dead letters and late rows
 *	 emit		each operator's output: changed groups written, what the
 *				moved watermark closes (windows emitted or evicted, dedup
 *				keys forgotten, a join's rows out of reach); complete
 *				mode's rewrite
 *	 finish		positions and the progress row, and a checkpoint when due
 *
 * so that state, results, positions and progress commit together or not
 * at all.  The batch never asks which operators its query has: it calls
 * each stage on the chain.  A failed batch leaves the stored positions
 * where they were, and the next batch's fetch starts from them again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pgtime.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "catalog.h"
#include "catalog_log.h"
#include "checkpoint.h"
#include "join.h"
#include "offsets.h"
#include "operator.h"
#include "options.h"
#include "runner_cache.h"
#include "spi_util.h"

/* streamwin.batch_work_mem (kB): work_mem of batch statements; -1: work_mem */
int			streamwin_batch_work_mem = 65536;

/* streamwin.progress_retention: batches kept per query in streamwin.progress */
int			streamwin_progress_retention = 1000;

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

/*
 * One batch in progress: what its operators share (BatchState), and what
 * only the batch's own stages do with its sources.
 */
typedef struct BatchContext
{
	BatchState	st;
	bool		snapshot_pushed;	/* batch_begin's, as of the query's lock */
	QueryRunner *r;
	QueryInfo  *q;
	int			nsources;
	BatchSource src[QUERY_MAX_SOURCES];
	BatchStats *stats;
	int			fetch_timeout_ms;
	int			linger_ms;
	instr_time	stage_start;	/* when the stage running now began */

	/* begin: where the query stood */
	bool		has_last_at;
	TimestampTz last_at;
	int64		state_batch_id; /* the batch the state reflects */
	int64		checkpoint_batch;	/* of the last checkpoint, or 0 */
	bool		replay_has_wm;	/* replaying: the watermark recorded then */
	TimestampTz replay_wm;

	/* fetch and decode, over all sources */
	int			nrows;
	int			nlate;
	int			nlate_retractions;
	int			ndead;
} BatchContext;

static void stage_end(BatchContext *b, BatchStage s);

/* Does the query keep UNLOGGED state, which a crash can lose? */
#define BATCH_HAS_STATE(b) QUERY_HAS_UNLOGGED_STATE((b)->q)

/*
 * begin: lock the query for the duration of the batch and read what the
 * batch starts from.  Concurrent batches of one query (a worker and a
 * run_batch, or two sessions) are serialised here.  If a crash emptied the
 * state, put its checkpoint back: the batches since are then replayed,
 * one per batch, each reading and deciding exactly as the first time.
 */
static bool
batch_begin(BatchContext *b)
{
	QueryPosition pos;

	/*
	 * The lock first, then a statement whose snapshot sees what the batch
	 * before committed.  A transaction whose snapshot is older than the lock
	 * (REPEATABLE READ, a user's run_batch) locks the row as well, to fail
	 * rather than run on a stale position.
	 */
	catalog_lock_query(b->r->query_id);

	/*
	 * And what the batch reads without a statement of its own (a store
	 * loading its state table) as of the lock too: the caller's snapshot
	 * was taken before it waited, and would not see the groups the batch it
	 * waited for added.  (Under REPEATABLE READ the row lock below fails
	 * instead.)  Popped at the end of the stages.
	 */
	if (!IsolationUsesXactSnapshot())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		b->snapshot_pushed = true;
	}
	if (!catalog_read_position(b->r->query_id, IsolationUsesXactSnapshot(), &pos))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" no longer exists", b->q->name)));

	/*
	 * A worker read that its query runs before it waited for the lock: a
	 * stop_query committed meanwhile (with a reset_query, say, in the
	 * transaction it waited for) ends the worker before another batch.
	 */
	if (b->r->in_worker && !pos.desired_running)
		return false;
	runner_check_relations(b->r);
	b->st.last_batch_id = pos.last_batch_id;
	b->st.has_old_wm = pos.has_watermark;
	b->st.old_wm = pos.watermark;
	b->has_last_at = pos.has_last_batch_at;
	b->last_at = pos.last_batch_at;
	b->state_batch_id = pos.state_batch_id;
	b->checkpoint_batch = pos.checkpoint_batch_id;
	b->st.catalog_xmin = pos.xmin;

	/*
	 * Another transaction wrote the query's row since this runner's last
	 * batch: a reset_query there (or one here that rolled back) may have
	 * moved where its sources start, which a table source's fetch reads.
	 */
	if (!TransactionIdEquals(pos.xmin, b->r->catalog_xmin))
	{
		catalog_reread_query_starts(b->r->query);
		b->r->catalog_xmin = pos.xmin;
	}

	if (BATCH_HAS_STATE(b) && checkpoint_state_lost(b->r))
	{
		b->state_batch_id = checkpoint_restore(b->r);
		operators_invalidate(b->r->operators);
	}
	b->st.replay = BATCH_HAS_STATE(b) && b->state_batch_id < b->st.last_batch_id;
	/* a replayed batch is the one after the state's */
	b->st.batch_id = b->st.replay ? b->state_batch_id + 1 : b->st.last_batch_id + 1;
	/* the state never runs ahead of the batches committed */
	Assert(b->state_batch_id <= b->st.last_batch_id);

	/* the batch's processing time: now() in its statements and event time */
	if (b->st.replay)
		b->st.scope.timestamp = checkpoint_replay_timestamp(b->r, b->st.batch_id);
	operators_begin(b->r->operators, &b->st);
	return true;
}

/*
 * fetch: the next rows of every source from the stored positions, or when
 * replaying the rows of the batch after the state's, up to the end
 * positions it recorded, with the watermarks it started from and ended
 * with.  A join's sources are read without waiting first: one may have
 * rows while the other has none, and a batch waits only when none has any.
 */
/*
 * A deduplicated source's rows in partition order, each partition's in
 * offset order, as fetched: which of a key's copies in several partitions
 * is kept (its first) is then the one a replay keeps too, whose fetches
 * interleave the partitions' messages otherwise.  So too a changelog's
 * (an upsert or Debezium topic): which of a key's versions is its last in
 * the batch, kept and retracted later, must not depend on the order a
 * fetch met its partitions.  A counting sort: a pass and a copy.
 */
static void
rows_in_partition_order(BatchSource *bs)
{
	int			nparts = bs->rd->nparts;
	int		   *next;
	SourceRow  *sorted;

	if (nparts < 2 || bs->nrows < 2)
		return;
	next = palloc0(sizeof(int) * (nparts + 1));
	for (int i = 0; i < bs->nrows; i++)
		next[bs->rows[i].part + 1]++;
	for (int p = 1; p <= nparts; p++)
		next[p] += next[p - 1];
	sorted = palloc(sizeof(SourceRow) * bs->nrows);
	for (int i = 0; i < bs->nrows; i++)
		sorted[next[bs->rows[i].part]++] = bs->rows[i];
	pfree(next);
	bs->rows = sorted;
}

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

	if (b->st.replay)
	{
		SourcePosition *targets[QUERY_MAX_SOURCES];

		for (int s = 0; s < b->nsources; s++)
			targets[s] = palloc(sizeof(SourcePosition) * Max(b->src[s].rd->nparts, 1));
		checkpoint_replay_bounds(b->r, b->st.batch_id, targets, &b->st.has_old_wm,
								 &b->st.old_wm, &b->replay_has_wm, &b->replay_wm);
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
		/*
		 * A first look at each source that may not wait, then, if it found
		 * nothing, a wait on each in turn.  Readers that never fetched (a
		 * new session's, a worker's first batch) have nothing yet, or the
		 * first responses of a few partitions: the first look would take
		 * those alone, a batch of a fraction of what is there.  Their first
		 * batch waits at once.
		 */
		bool		fresh = true;

		for (int s = 0; s < b->nsources; s++)
			fresh &= !b->src[s].rd->fetched;
		for (int pass = fresh ? 1 : 0; pass < 2; pass++)
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
		if ((OidIsValid(b->q->dedup_table) && s == b->q->dedup_side) ||
			b->src[s].rd->envelope != ENVELOPE_APPEND)
			rows_in_partition_order(&b->src[s]);
	for (int s = 0; s < b->nsources; s++)
	{
		b->src[s].rd->fetched = true;
		b->nrows += b->src[s].nrows;
		if (b->src[s].nrows >= source_max_records(b->src[s].rd->source))
			b->stats->full = true;
	}
}

/*
 * decode: the rows as tuples of their source, each partition's rows and
 * newest event time counted for the watermark.  Late rows are dropped
 * against the watermark of the previous batch.  Complete mode rewrites
 * everything, so none is late there, but for a query with dedup keys,
 * which the watermark forgets: a row it passed may repeat a key forgotten.
 */
static void
batch_decode(BatchContext *b)
{
	bool		drop_late;

	drop_late = b->q->has_watermark && b->st.has_old_wm &&
		(b->q->output_mode != OUTPUT_COMPLETE || OidIsValid(b->q->dedup_table));
	b->st.input = NULL;
	for (int s = b->nsources - 1; s >= 0; s--)
	{
		BatchSource *bs = &b->src[s];
		SourceReader *rd = bs->rd;

		bs->res = rows_decode(bs->decoder, bs->rows, bs->nrows, drop_late, b->st.old_wm);
		bs->input.source_id = rd->source->source_id;
		bs->input.natts = rd->desc->natts;
		bs->input.desc = rd->desc;
		bs->input.nrows = 0;
		bs->input.refill = NULL;
		/* a changelog's message may retract a row and add one */
		bs->input.rows = palloc(sizeof(BatchRow) * Max(bs->nrows, 1) *
								(bs->decoder->changes != NULL ? 2 : 1));
		bs->input.next = b->st.input;
		b->st.input = &bs->input;
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
			{
				/* a message of two rows of which one alone was late */
				if (res->retraction)
				{
					bs->nlate++;
					b->nlate_retractions++;
				}
				if (res->late_addition)
					bs->nlate++;
				if (res->retracted != NULL)
					bs->input.rows[bs->input.nrows++] = res->retracted;
				if (res->row != NULL)
					bs->input.rows[bs->input.nrows++] = res->row;
			}
			else if (res->status == 'l')
			{
				bs->nlate++;
				if (res->retraction)
					b->nlate_retractions++;
			}
			else if (res->status == 'd')
				bs->ndead++;
		}
		b->st.ninput += bs->input.nrows;
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
	BatchState *st = &b->st;

	st->has_new_wm = offsets_compute_watermark(b->r, st->has_old_wm, st->old_wm,
											   GetCurrentTimestamp(), &st->new_wm) &&
		b->q->has_watermark;
	if (st->replay)
	{
		st->has_new_wm = b->replay_has_wm;
		st->new_wm = b->replay_wm;
	}
	st->wm_moved = st->has_new_wm && (!st->has_old_wm || st->new_wm > st->old_wm);
	st->close_wm = st->new_wm;
	if (b->q->join != NULL && st->has_new_wm)
		st->close_wm = join_held_watermark(b->q->join, st->new_wm);
	return b->nrows > 0 || st->wm_moved || st->last_batch_id == 0 || st->replay;
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
batch_idle(BatchContext *b)
{
	TransactionId catalog_xmin = b->st.catalog_xmin;

	if (positions_moved(b))
	{
		offsets_store(b->r);
		if (BATCH_HAS_STATE(b))
		{
			if (b->checkpoint_batch == b->st.last_batch_id)
				checkpoint_move_positions(b->r);
			else if (checkpoint_take(b->r, b->st.last_batch_id, b->st.has_old_wm, b->st.old_wm,
									 false))
				catalog_xmin = GetCurrentTransactionId();
		}
	}
	/* nothing changed the operators' state */
	operators_end(b->r->operators, catalog_xmin);
	b->r->catalog_xmin = catalog_xmin;
	/* the record of a batch that did not run says the query's watermark */
	b->stats->has_watermark = b->st.has_old_wm && b->q->has_watermark;
	b->stats->watermark = b->st.old_wm;
}

/*
 * apply: the batch's rows through the query's operators, from the head of
 * the chain; then its dead letters and late rows are kept.
 */
static void
batch_apply(BatchContext *b)
{
	QueryRunner *r = b->r;

	if (r->insert_variants_paused > 0)
		r->insert_variants_paused--;
	operator_apply(r->operators, &b->st, b->st.input, FLOW_BATCH);
	for (int s = 0; s < b->nsources; s++)
	{
		BatchSource *bs = &b->src[s];

		if (bs->ndead > 0)
			rows_record_rejected(bs->decoder, bs->rows, bs->res, bs->nrows, 'd', bs->ndead, 0);
		if (bs->nlate > 0 && b->q->capture_late_rows)
			rows_record_rejected(bs->decoder, bs->rows, bs->res, bs->nrows, 'l', bs->nlate,
								 b->st.old_wm);
	}
}

/*
 * emit: each operator's output, in the chain's order: what the batch
 * changed, and what the moved watermark closes.
 */
static void
batch_emit(BatchContext *b)
{
	operators_emit(b->r->operators, &b->st);
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

	stats->state_rows = operators_state_rows(r->operators, &b->st);
	offsets_store(r);

	stats->batch_id = b->st.batch_id;
	stats->replayed = b->st.replay;
	stats->input_rows = b->nrows;
	stats->late_rows = b->nlate + b->st.late_added + b->st.late_retracted;
	stats->late_retractions = b->nlate_retractions + b->st.late_retracted;
	for (int s = 0; s < b->nsources; s++)
		stats->changelog |= b->src[s].decoder->change_attno > 0;
	stats->duplicates = b->st.duplicates;
	stats->dead_letters = b->ndead;
	stats->has_watermark = b->st.has_new_wm;
	stats->watermark = b->st.new_wm;
	/* in the batch's context: it outlives SPI_finish(), for the caller */
	{
		MemoryContext spi_cxt = MemoryContextSwitchTo(r->batch_cxt);

		stats->offsets_json = offsets_json(r);
		stats->missing_keys_json = batch_missing_keys_json(b);
		MemoryContextSwitchTo(spi_cxt);
	}
	stage_end(b, BATCH_STAGE_FINISH);
	/* a checkpoint is part of the batch's time: the progress row says so */
	if (!b->st.replay && BATCH_HAS_STATE(b))
	{
		bool		taken = checkpoint_after_batch(r, stats->batch_id, b->checkpoint_batch,
												   b->st.has_new_wm, b->st.new_wm,
												   GetCurrentTimestamp());

		stage_end(b, taken ? BATCH_STAGE_CHECKPOINT : BATCH_STAGE_FINISH);
	}
	now = GetCurrentTimestamp();
	stats->duration_ms = (now - stats->started_at) / 1000.0;
	stats->processed_rows_per_second = stats->duration_ms > 0 ?
		b->nrows / (stats->duration_ms / 1000.0) : 0;
	if (b->has_last_at && stats->started_at > b->last_at)
		stats->input_rows_per_second = b->nrows / ((stats->started_at - b->last_at) / 1000000.0);

	if (b->st.replay)
		checkpoint_note_replayed(r, stats->batch_id);
	else
	{
		catalog_log_progress(r->query->name, stats, streamwin_progress_retention,
							 BATCH_HAS_STATE(b));
		catalog_record_batch(r->query_id, stats->batch_id, stats->has_watermark, stats->watermark);
	}
	/* this transaction wrote the catalog row last: the operators' is its state */
	operators_end(r->operators, GetCurrentTransactionId());
	r->catalog_xmin = GetCurrentTransactionId();
}

/* The time since the running stage began goes to stage s; the next begins. */
static void
stage_end(BatchContext *b, BatchStage s)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, b->stage_start);
	b->stats->stage_ms[s] += INSTR_TIME_GET_MILLISEC(now);
	INSTR_TIME_SET_CURRENT(b->stage_start);
}

/*
 * The stages of a batch, in its scope (b->st.scope, entered by the caller),
 * each timed for streamwin.progress (the watermark's with apply's; finish
 * times itself and a checkpoint it takes, up to the progress row).
 */
static void
batch_run_stages(BatchContext *b)
{
	SPI_connect();
	INSTR_TIME_SET_CURRENT(b->stage_start);
	if (!batch_begin(b))
	{
		/* stopped: no batch (the worker reads its query again, and exits) */
		if (b->snapshot_pushed)
			PopActiveSnapshot();
		SPI_finish();
		return;
	}
	stage_end(b, BATCH_STAGE_BEGIN);
	batch_fetch(b);
	stage_end(b, BATCH_STAGE_FETCH);
	batch_decode(b);
	stage_end(b, BATCH_STAGE_DECODE);
	if (batch_watermark(b))
	{
		batch_apply(b);
		stage_end(b, BATCH_STAGE_APPLY);
		batch_emit(b);
		stage_end(b, BATCH_STAGE_EMIT);
		batch_finish(b);
	}
	else
		batch_idle(b);
	if (b->snapshot_pushed)
		PopActiveSnapshot();
	SPI_finish();
}

/*
 * A batch in the runner's batch memory, in a scope of its own
 * (batch_scope.h), which the executor's callbacks into streamwin find it
 * by while the batch's statements run; left on the way out, error or not.
 */
static void
batch_run(QueryRunner *r, int fetch_timeout_ms, int linger_ms, BatchStats *stats)
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
	b.st.runner = r;
	b.st.query = r->query;
	b.st.scope.query_id = r->query_id;
	b.st.scope.owner = r->query->owner;
	b.st.scope.timestamp = stats->started_at;
	b.nsources = r->nreaders;
	for (int s = 0; s < b.nsources; s++)
	{
		b.src[s].rd = r->readers[s];
		b.src[s].decoder = r->decoders[s];
	}
	b.stats = stats;
	b.fetch_timeout_ms = fetch_timeout_ms;
	b.linger_ms = linger_ms;

	batch_scope_enter(&b.st.scope);
	PG_TRY();
	{
		batch_run_stages(&b);
	}
	PG_FINALLY();
	{
		batch_scope_leave(&b.st.scope);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
}

/* Settings a batch takes at their reset values (batch_execute) */
static const char *const decode_settings[] = {
	"timezone_abbreviations", "lc_monetary", "xmloption", "array_nulls",
	"lc_time", "lc_numeric", "default_text_search_config", "bytea_output"
};

void
batch_execute(QueryRunner *r, int fetch_timeout_ms, int linger_ms, BatchStats *stats)
{
	RoleSwitch	owner;

	/*
	 * As the query's owner, whose code the batch runs also outside its
	 * statements (combine functions, event times): in a worker it is the
	 * user already; a superuser or a member of the owning role running
	 * the batch (run_batch) must not lend the owner's code its privileges.
	 */
	role_restricted_enter(&owner, r->query->owner);

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
	 * No JIT compilation: PostgreSQL compiles a plan's expressions again at
	 * every execution, and a batch's statements run once per batch over at
	 * most a batch of rows, where a compilation (20-30 ms, and the JIT
	 * provider's load in a new session) costs more than it saves.  A plan
	 * estimated above jit_above_cost is no sign of a long run here: a cold
	 * batch's eviction over a join table that was never analyzed is
	 * estimated at a third of the table and compiled, taking three times
	 * the whole batch (a new session's run_batch over 2M join rows: 31 ms
	 * instead of 10).
	 */
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);

	/*
	 * Nothing a batch decides may depend on the session that runs it (a
	 * worker, a user's run_batch, a replay): timestamps without a zone offset
	 * in the messages, casts of timestamp to timestamptz, and the date and
	 * time functions of its statements use the source's zone (option
	 * "timezone"), and dates are read and written in one style.
	 */
	if (pg_tzset(r->readers[0]->source->timezone) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source \"%s\" reads its times in zone \"%s\", which the server's time zone data does not have",
						r->readers[0]->source->name, r->readers[0]->source->timezone),
				 errdetail("A time zone data update may have removed it."),
				 errhint("Create the source again with a zone of pg_timezone_names, and its queries over it.")));
	(void) set_config_option("TimeZone", r->readers[0]->source->timezone,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("DateStyle", SQL_DATESTYLE,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("IntervalStyle", SQL_INTERVALSTYLE,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/*
	 * Floats as text in their shortest exact form, whatever the session
	 * says: a float summed over a changelog goes through its text
	 * (compile_aggregate.c), and so may a query's own expressions.
	 */
	(void) set_config_option("extra_float_digits", "1",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	/*
	 * The other settings that the input functions of message values read
	 * (zone abbreviations, money, xml, arrays' NULL), and those that the
	 * functions of its statements read (to_char's month names and
	 * separators, to_tsvector of one argument, bytea as text): as the
	 * server and the database give them, not as a session running the
	 * batch has SET them.
	 */
	for (int i = 0; i < (int) lengthof(decode_settings); i++)
	{
		const char *reset = GetConfigOptionResetString(decode_settings[i]);

		/*
		 * Only where the session changed it: setting one runs its check
		 * (lc_time and lc_numeric try the locale with setlocale()) at every
		 * batch, for the value it has already in a worker
		 */
		if (strcmp(GetConfigOption(decode_settings[i], false, false), reset) != 0)
			(void) set_config_option(decode_settings[i], reset,
									 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	}
	/* the owner's code may not change or free the runner under the batch */
	r->in_batch = true;
	PG_TRY();
	{
		batch_run(r, fetch_timeout_ms, linger_ms, stats);
	}
	PG_FINALLY();
	{
		r->in_batch = false;
	}
	PG_END_TRY();
	/* the settings above, and any the owner's code changed, roll back */
	role_switch_leave(&owner);
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
	if (s->changelog)
		appendStringInfo(&buf, ", \"late_retractions_dropped\": " INT64_FORMAT, s->late_retractions);
	json_append_timestamp(&buf, "watermark", s->has_watermark, s->watermark);
	if (s->missing_keys_json)
		appendStringInfo(&buf, ", \"missing_keys\": %s", s->missing_keys_json);
	if (s->replayed)
		appendStringInfoString(&buf, ", \"replayed\": true");
	appendStringInfo(&buf, ", \"offsets\": %s}", s->offsets_json ? s->offsets_json : offsets_json(r));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}
