/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  One micro-batch, start to finish, and the SQL functions that run
 *	  batches in the calling session (run_batch, run_available).
 *
 * A batch runs inside the caller's transaction (the worker's, or the
 * session's for run_batch) and does, in order:
 *
 *	 lock the query (an advisory lock)	-- one batch at a time per query
 *	 load offsets, position the consumer at them
 *	 fetch up to max_records_per_batch messages (from Kafka, or for a table
 *		source decode the WAL from the stored LSN: table_source.c)
 *	 decode them into source rows; set aside late rows and dead letters
 *	 run the compiled batch statement over those rows (as the query owner):
 *		merge partial aggregates into state, upsert results (update mode)
 *	 record dead letters
 *	 advance the watermark; emit and evict closed windows
 *	 write offsets and the progress row
 *
 * so state, results, offsets and progress commit together or not at all.
 * A failed batch leaves the stored offsets where they were; the next batch
 * notices that the consumer is ahead of them and rewinds it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "checkpoint.h"

PG_FUNCTION_INFO_V1(streamwin_run_batch);
PG_FUNCTION_INFO_V1(streamwin_run_available);
PG_FUNCTION_INFO_V1(streamwin_catch_up);

/* Runners of this backend: usually one (a worker) or a few (a session). */
static List *runners = NIL;

/* streamwin.batch_work_mem (kB): work_mem of batch statements; -1: work_mem */
int			streamwin_batch_work_mem = 65536;

static void batch_run_steps(QueryRunner *r, int fetch_timeout_ms, int linger_ms,
							BatchStats *stats);

static SPIPlanPtr
prepare_kept(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan;

	if (sql == NULL)
		return NULL;
	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "streamwin: could not prepare \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	return plan;
}

static void
runner_free(QueryRunner *r)
{
	SPIPlanPtr	plans[] = {r->batch_plan, r->close_plan, r->batch_insert_plan,
		r->close_insert_plan, r->clear_plan, r->refresh_plan, r->state_count_plan,
	r->dedup_plan, r->dedup_evict_plan};

	if (r->consumer != NULL)
		kafka_consumer_close(r->consumer);
	for (int i = 0; i < (int) lengthof(plans); i++)
		if (plans[i] != NULL)
			SPI_freeplan(plans[i]);
	if (r->econtext)
		FreeExprContext(r->econtext, false);
	MemoryContextDelete(r->cxt);
}

/*
 * The rows of a table source come from the WAL, not through the executor,
 * so the table's SELECT privilege is checked here, for the query's owner.
 */
static void
check_table_readable(QueryRunner *r)
{
	if (pg_class_aclcheck(r->source->source_table, r->query->owner, ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(r->source->source_table)),
				 errdetail("Query \"%s\" reads it through table source \"%s\".",
						   r->query->name, r->source->name),
				 errhint("GRANT SELECT on the table to the query's owner.")));
}

/*
 * runner_get
 *		The runner of a query in this backend, created on first use: loads
 *		the query, prepares its statements and decoder.  The Kafka consumer
 *		is opened by the first batch.  Must be called inside a transaction.
 */
QueryRunner *
runner_get(int32 query_id)
{
	ListCell   *lc;
	MemoryContext cxt;
	MemoryContext old;
	QueryRunner *r;
	Oid			tstz = TIMESTAMPTZOID;

	foreach(lc, runners)
	{
		r = lfirst(lc);
		if (r->query_id == query_id)
			return r;
	}

	cxt = AllocSetContextCreate(TopMemoryContext, "streamwin query runner",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	r = palloc0(sizeof(QueryRunner));
	r->cxt = cxt;
	r->query_id = query_id;
	PG_TRY();
	{
		r->query = catalog_get_query_by_id(query_id, false);
		r->source = catalog_get_source_by_id(r->query->source_id);
		r->source_desc = source_tupdesc(r->source->relation);
		if (r->source->kind == SOURCE_TABLE)
			check_table_readable(r);
		r->batch_cxt = AllocSetContextCreate(cxt, "streamwin batch", ALLOCSET_DEFAULT_SIZES);
		batch_input_init(r);

		SPI_connect();
		r->batch_plan = prepare_kept(r->query->batch_sql, 0, NULL);
		r->close_plan = prepare_kept(r->query->close_sql, 1, &tstz);
		r->batch_insert_plan = prepare_kept(r->query->batch_insert_sql, 0, NULL);
		r->close_insert_plan = prepare_kept(r->query->close_insert_sql, 1, &tstz);
		r->clear_plan = prepare_kept(r->query->clear_sql, 0, NULL);
		r->refresh_plan = prepare_kept(r->query->refresh_sql, 0, NULL);
		r->state_count_plan = prepare_kept(r->query->state_count_sql, 0, NULL);
		r->dedup_plan = prepare_kept(r->query->dedup_sql, 0, NULL);
		r->dedup_evict_plan = prepare_kept(r->query->dedup_evict_sql, 1, &tstz);
		SPI_finish();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		runner_free(r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(TopMemoryContext);
	runners = lappend(runners, r);
	MemoryContextSwitchTo(old);
	return r;
}

/*
 * runner_forget
 *		Drop a query's runner (after drop_query, or when a worker exits).
 */
void
runner_forget(int32 query_id)
{
	ListCell   *lc;

	foreach(lc, runners)
	{
		QueryRunner *r = lfirst(lc);

		if (r->query_id == query_id)
		{
			runners = foreach_delete_current(runners, lc);
			runner_free(r);
			return;
		}
	}
}

/*
 * runner_settings_changed
 *		If this backend's runner of query q was built with other settings
 *		than q has now (alter_query changed them), forget it, so that the
 *		next runner_get builds one from the new settings (a Kafka consumer's
 *		fetch wait follows trigger_interval).  Returns whether it did.
 */
bool
runner_settings_changed(const QueryInfo *q)
{
	ListCell   *lc;

	foreach(lc, runners)
	{
		QueryRunner *r = lfirst(lc);

		if (r->query_id == q->query_id)
		{
			if (r->query->trigger_interval_us == q->trigger_interval_us &&
				r->query->idle_timeout_us == q->idle_timeout_us)
				return false;
			runner_forget(q->query_id);
			return true;
		}
	}
	return false;
}

/* Execute a kept plan as the query's owner. */
static uint64
run_as_owner(QueryRunner *r, SPIPlanPtr plan, Datum *args, const char *nulls)
{
	Oid			save_userid;
	int			save_sec;
	int			rc;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(r->query->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	rc = SPI_execute_plan(plan, args, nulls, false, 0);
	SetUserIdAndSecContext(save_userid, save_sec);
	if (rc < 0)
		elog(ERROR, "streamwin: batch statement failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/* Run a statement that reads the batch's rows through the source's view. */
static void
run_with_input(QueryRunner *r, SPIPlanPtr plan, BatchInput *input)
{
	source_set_batch_input(input);
	PG_TRY();
	{
		run_as_owner(r, plan, NULL, NULL);
	}
	PG_FINALLY();
	{
		source_set_batch_input(NULL);
	}
	PG_END_TRY();
}

/*
 * run_in_subtransaction
 *		Run fn(arg) in a subtransaction of its own.  Returns NULL if it
 *		succeeded.  Otherwise the subtransaction is rolled back (whatever the
 *		error: it ends where it began) and the error is returned, copied into
 *		the caller's memory context, for the caller to handle or to rethrow
 *		with ReThrowError().
 */
ErrorData *
run_in_subtransaction(void (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return edata;
}

/* run_with_input() if input is given, else run_as_owner() with args */
static void
run_statement(QueryRunner *r, SPIPlanPtr plan, BatchInput *input, Datum *args)
{
	if (input)
		run_with_input(r, plan, input);
	else
		run_as_owner(r, plan, args, NULL);
}

/* run_statement() with its arguments in one struct, for run_in_subtransaction() */
typedef struct StatementCall
{
	QueryRunner *r;
	SPIPlanPtr	plan;
	BatchInput *input;
	Datum	   *args;
} StatementCall;

static void
run_statement_call(void *arg)
{
	StatementCall *call = arg;

	run_statement(call->r, call->plan, call->input, call->args);
}

/*
 * After an insert variant met a row already in the result, this many
 * batches use the plain statements before the variants are tried again.
 */
#define INSERT_VARIANTS_PAUSE 100

/*
 * How many insert variants one transaction runs, at most.  Each writes in
 * a subtransaction of its own, whose id stays in the backend's cache of
 * subtransaction ids until the transaction ends; beyond 64 that cache
 * overflows and every other session's snapshot checks get slower.  A
 * worker or catch_up commits every batch, but run_available runs all its
 * batches in the caller's transaction.
 */
#define INSERT_VARIANTS_PER_TRANSACTION 32

static LocalTransactionId variants_lxid = InvalidLocalTransactionId;
static int	variants_in_transaction = 0;

/*
 * Run a statement that writes result rows: its insert variant if it has
 * one and this batch may use it, else the statement itself.  input is the
 * batch's rows (NULL for statements that do not read them), args the
 * statement's arguments.
 *
 * The statements upsert every result row with INSERT ... ON CONFLICT,
 * which for a row not yet there costs a second index probe and a
 * speculative insertion on top of a plain INSERT: with many groups, nearly
 * a fifth of a batch (bench case 2).  Most rows are known to be new: a
 * group the merge just inserted into the state, a window closing in append
 * mode.  Their insert variants write those with a plain INSERT.  That only
 * fails where the result kept rows the state no longer has (after
 * reset_query, or rows a user wrote); the variant then raises a unique
 * violation, which rolls back only the subtransaction it ran in, and the
 * statement itself runs instead.  So no result ever depends on the
 * variant; a replay after a crash, which re-creates state for rows already
 * in the result, uses the statements from the start.
 */
static void
run_insert_variant(QueryRunner *r, SPIPlanPtr variant, SPIPlanPtr plan, BatchInput *input,
				   Datum *args, bool replay)
{
	StatementCall call = {r, variant, input, args};
	ErrorData  *edata;

	if (variants_lxid != MyProc->lxid)
	{
		variants_lxid = MyProc->lxid;
		variants_in_transaction = 0;
	}
	if (variant == NULL || replay || r->insert_variants_paused > 0 ||
		variants_in_transaction >= INSERT_VARIANTS_PER_TRANSACTION)
	{
		run_statement(r, plan, input, args);
		return;
	}
	variants_in_transaction++;
	edata = run_in_subtransaction(run_statement_call, &call);
	if (edata == NULL)
		return;
	if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		ReThrowError(edata);
	FreeErrorData(edata);
	r->insert_variants_paused = INSERT_VARIANTS_PAUSE;
	run_statement(r, plan, input, args);
}

/*
 * Keep only the first occurrence of each key not seen before (see
 * dedup_statements in query.c); returns how many rows were dropped.
 */
static int64
drop_duplicates(QueryRunner *r, BatchInput *input)
{
	bool	   *keep = palloc0(sizeof(bool) * input->ntuples);
	int			kept = 0;
	int			before = input->ntuples;

	run_with_input(r, r->dedup_plan, input);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int32		ord = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
													  1, &isnull));

		if (ord >= 0 && ord < input->ntuples)
			keep[ord] = true;
	}
	for (int i = 0; i < input->ntuples; i++)
		if (keep[i])
			input->tuples[kept++] = input->tuples[i];
	input->ntuples = kept;
	return before - kept;
}


/* A table source's row as text, e.g. (1,"a b",2026-11-30 10:00:00+00). */
static bytea *
table_row_text(QueryRunner *r, KafkaMessage *m)
{
	HeapTupleData tuple;
	char	   *text;

	tuple.t_data = (HeapTupleHeader) m->payload;
	tuple.t_len = m->len;
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	text = OidOutputFunctionCall(F_RECORD_OUT, heap_copy_tuple_as_datum(&tuple, r->source_desc));
	return (bytea *) cstring_to_text(text);
}

/* qsort_arg comparator: message indexes by (partition, offset) */
static int
compare_positions(const void *a, const void *b, void *arg)
{
	const KafkaMessage *msgs = arg;
	const KafkaMessage *x = &msgs[*(const int *) a];
	const KafkaMessage *y = &msgs[*(const int *) b];

	if (x->partition != y->partition)
		return x->partition < y->partition ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return 0;
}

/*
 * Keep the messages set aside with status 'd' (dead letters: position,
 * payload, error) or 'l' (late rows: position, payload, event time and the
 * watermark they missed), in one statement.
 *
 * The rows go in by (partition, offset).  Dead letters are shared by every
 * query of the source, so two queries' batches may insert the same keys at
 * once; each batch meets the partitions interleaved in its own fetch order,
 * and inserting in that order let two batches each wait for a key the other
 * had taken first (a deadlock, then a retried batch).  One order for all
 * makes the later batch simply wait for the earlier one.
 */
static void
record_rejected(QueryRunner *r, KafkaMessage *msgs, BatchMessageResult *res, int n,
				char status, int count, TimestampTz watermark)
{
	int		   *order = palloc(sizeof(int) * count);
	int			norder = 0;
	Datum	   *parts = palloc(sizeof(Datum) * count);
	Datum	   *offs = palloc(sizeof(Datum) * count);
	Datum	   *payloads = palloc(sizeof(Datum) * count);
	Datum	   *details = palloc(sizeof(Datum) * count);
	Oid			types[6] = {TEXTOID, INT4ARRAYOID, INT8ARRAYOID, BYTEAARRAYOID,
	status == 'd' ? TEXTARRAYOID : TIMESTAMPTZARRAYOID, TIMESTAMPTZOID};
	Datum		args[6];

	for (int i = 0; i < n && norder < count; i++)
		if (res[i].status == status)
			order[norder++] = i;
	qsort_arg(order, norder, sizeof(int), compare_positions, msgs);

	for (int j = 0; j < norder; j++)
	{
		int			i = order[j];
		bytea	   *payload;

		if (r->source->kind == SOURCE_TABLE)
			payload = table_row_text(r, &msgs[i]);
		else
		{
			payload = palloc(VARHDRSZ + msgs[i].len);
			SET_VARSIZE(payload, VARHDRSZ + msgs[i].len);
			if (msgs[i].len > 0)
				memcpy(VARDATA(payload), msgs[i].payload, msgs[i].len);
		}
		parts[j] = Int32GetDatum(msgs[i].partition);
		offs[j] = Int64GetDatum(msgs[i].offset);
		payloads[j] = PointerGetDatum(payload);
		details[j] = status == 'd' ? CStringGetTextDatum(res[i].error) :
			TimestampTzGetDatum(res[i].event_time);
	}
	args[0] = CStringGetTextDatum(status == 'd' ? r->source->name : r->query->name);
	args[1] = PointerGetDatum(construct_array(parts, norder, INT4OID, 4, true, TYPALIGN_INT));
	args[2] = PointerGetDatum(construct_array(offs, norder, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[3] = PointerGetDatum(construct_array(payloads, norder, BYTEAOID, -1, false, TYPALIGN_INT));
	args[4] = status == 'd' ?
		PointerGetDatum(construct_array(details, norder, TEXTOID, -1, false, TYPALIGN_INT)) :
		PointerGetDatum(construct_array(details, norder, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[5] = TimestampTzGetDatum(watermark);

	/* keyed by position: once per message, however many queries read it */
	catalog_exec(status == 'd' ?
							  "INSERT INTO streamwin.dead_letter_log (source, partition, \"offset\", payload, error) "
							  "SELECT $1, * FROM unnest($2, $3, $4, $5) ON CONFLICT DO NOTHING" :
							  "INSERT INTO streamwin.late_row_log (query, partition, \"offset\", payload, event_time, watermark) "
							  "SELECT $1, *, $6 FROM unnest($2, $3, $4, $5) ON CONFLICT DO NOTHING",
							  status == 'd' ? 5 : 6, types, args, NULL, 0);
}

/*
 * Lock the query's row for the duration of the batch and read what the
 * batch starts from.  Concurrent batches of one query (a worker and a
 * run_batch, or two sessions) are serialised here.
 */
static void
lock_query(QueryRunner *r, int64 *last_batch_id, bool *has_wm, TimestampTz *wm,
		   bool *has_last_at, TimestampTz *last_at, int64 *state_batch_id,
		   int64 *checkpoint_batch)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(r->query_id)};
	bool		isnull;
	Datum		d;

	/*
	 * The lock first, then a statement whose snapshot sees what the batch
	 * before committed.  A transaction whose snapshot is older than the
	 * lock (REPEATABLE READ, a user's run_batch) locks the row as well, to
	 * fail rather than run on a stale position.
	 */
#define QUERY_POSITION_SQL \
	"SELECT last_batch_id, watermark, last_batch_at, state_batch_id, " \
	"coalesce(checkpoint_batch_id, 0) FROM streamwin.query_catalog WHERE query_id = $1"

	catalog_lock_query(r->query_id);
	catalog_exec(IsolationUsesXactSnapshot() ? QUERY_POSITION_SQL " FOR UPDATE" : QUERY_POSITION_SQL,
				 1, types, args, NULL, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" no longer exists", r->query->name)));
	*last_batch_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	*has_wm = !isnull;
	*wm = isnull ? 0 : DatumGetTimestampTz(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	*has_last_at = !isnull;
	*last_at = isnull ? 0 : DatumGetTimestampTz(d);
	*state_batch_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	*checkpoint_batch = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
}

/*
 * Re-read exactly what a batch read the first time: from the stored offsets
 * up to (not including) targets[i] of every partition.  Fetches may return
 * less than that or run past it, so messages are copied into the batch's
 * memory across fetches, and those past a target are dropped (and the
 * consumer re-positioned at the next batch).
 */
static int
fetch_replay(QueryRunner *r, const int64 *targets, KafkaMessage **out)
{
	int64		needed = 0;
	int			n = 0;
	KafkaMessage *acc;
	TimestampTz deadline = GetCurrentTimestamp() + 60 * USECS_PER_SEC;

	if (r->source->kind == SOURCE_TABLE)
	{
		PartitionState *p = &r->parts[0];
		TablePosition start = {(XLogRecPtr) p->next_offset, p->next_index};
		TableFetch	f;

		table_fetch(r->source->slot_name, r->source->source_table, r->source_desc, start,
					&r->table_replay_target, 0, InvalidXLogRecPtr, false, &f);
		p->next_offset = (int64) f.end.lsn;
		p->next_index = f.end.index;
		*out = f.rows;
		return f.nrows;
	}

	for (int i = 0; i < r->nparts; i++)
		needed += Max(0, targets[i] - r->parts[i].next_offset);
	acc = palloc(sizeof(KafkaMessage) * Max(needed, 1));
	while (n < needed)
	{
		KafkaMessage *m;
		int			got = kafka_fetch(r->consumer, r->source->max_records_per_batch, 1000,
									  KAFKA_FETCH_LINGER_MS, &m);

		for (int j = 0; j < got; j++)
		{
			int			idx = m[j].partition <= r->max_partition ? r->part_index[m[j].partition] : -1;
			char	   *copy;

			if (idx < 0 || m[j].offset >= targets[idx])
			{
				r->assigned = false;	/* the consumer went past the batch */
				continue;
			}
			copy = palloc(Max(m[j].len, 1));
			if (m[j].len > 0)
				memcpy(copy, m[j].payload, m[j].len);
			acc[n] = m[j];
			acc[n].payload = copy;
			/* the copy outlives the librdkafka message: its headers as text */
			if (r->needs_headers)
				acc[n].headers_json = kafka_message_headers_json(&m[j], &acc[n].headers_error);
			acc[n].rkmessage = NULL;
			/* a column may hold the key (source option "metadata") */
			if (m[j].key != NULL)
			{
				char	   *key = palloc(Max(m[j].keylen, 1));

				memcpy(key, m[j].key, m[j].keylen);
				acc[n].key = key;
			}
			n++;
		}
		if (n < needed && GetCurrentTimestamp() > deadline)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not re-read the messages of query \"%s\" needed to recover its state",
							r->query->name),
					 errdetail("Read %d of " INT64_FORMAT " messages in 60 seconds.", n, needed),
					 kafka_last_error(r->consumer) ?
					 errhint("Last error from the source: %s", kafka_last_error(r->consumer)) : 0));
	}
	*out = acc;
	return n;
}

/*
 * The next batch of a table source: from the stored position, up to
 * max_records_per_batch rows.  The slot is confirmed as far as every query
 * of the source allows (committed positions only, so a batch that fails
 * cannot have released what it needs).
 */
static int
fetch_table(QueryRunner *r, KafkaMessage **out)
{
	PartitionState *p = &r->parts[0];
	TablePosition start = {(XLogRecPtr) p->next_offset, p->next_index};
	TableFetch	f;
	XLogRecPtr	retained = InvalidXLogRecPtr;
	bool		may_confirm = source_confirm_begin(r->source->source_id);

	/* a query whose creation has not committed yet may need the slot as is */
	if (may_confirm)
		retained = offsets_table_retained(r);

	/*
	 * The decoding context may stay open for the next batch (and the slot
	 * acquired) in run_available and in a worker: after a full batch (a
	 * backlog) it goes on at once.  Other workers of the source wait for
	 * the slot meanwhile, for at most KEEP_MAX_FETCHES batches in a row
	 * (table_source.c), and then each reads its part of the backlog on
	 * its own kept context: every worker decodes the backlog about once,
	 * where each batch of each worker decoded it from the slot's restart
	 * point, the backlog's start, before.  (drop_query does not wait for
	 * a slot a worker holds, see release_table_source; the worker lets it
	 * go when it exits.)  The rest of a transaction larger than the batch
	 * may be kept for the next batch too: that needs no slot.
	 */
	PG_TRY();
	{
		table_fetch(r->source->slot_name, r->source->source_table, r->source_desc, start, NULL,
					r->source->max_records_per_batch, retained,
					r->fetch_again || r->in_worker, &f);
	}
	PG_FINALLY();
	{
		if (may_confirm)
			source_confirm_end(r->source->source_id);
	}
	PG_END_TRY();
	p->next_offset = (int64) f.end.lsn;
	p->next_index = f.end.index;
	r->table_at_end = f.at_end;
	r->table_end_of_wal = f.end_of_wal;
	r->table_ignored[0] = f.ignored_updates;
	r->table_ignored[1] = f.ignored_deletes;
	r->table_ignored[2] = f.ignored_truncates;
	*out = f.rows;
	return f.nrows;
}

/*
 * A table source moves on through other tables' WAL even when its own
 * table gets no rows.  Store that now and then (after a megabyte of WAL, or
 * ten seconds), so that the slot can let WAL go and the next batches need
 * not decode it again; not every time, since the store itself writes WAL.
 * A query with state moves its checkpoint along: the state is unchanged by
 * WAL without rows, so if no batch ran since the checkpoint only its
 * positions move, and otherwise a checkpoint of the state as of the last
 * batch is taken at the new positions.
 */
static void
table_idle_advance(QueryRunner *r, TablePosition start, int64 last_batch_id,
				   int64 checkpoint_batch, bool has_wm, TimestampTz wm)
{
	int64		moved = r->parts[0].next_offset - (int64) start.lsn;
	TimestampTz now = GetCurrentTimestamp();

	if (moved <= 0 ||
		(moved < 1024 * 1024 && now - r->table_idle_stored_at < 10 * USECS_PER_SEC))
		return;
	offsets_store(r);
	if (QUERY_HAS_UNLOGGED_STATE(r->query))
	{
		if (checkpoint_batch == last_batch_id)
			checkpoint_move_positions(r);
		else
			checkpoint_take(r, last_batch_id, has_wm, wm, false);
	}
	r->table_idle_stored_at = now;
}

/* The name of a query's checkpoint table (of its state, else of its dedup keys). */
static const char *
checkpoint_table_name(const QueryInfo *q)
{
	char	   *name = get_rel_name(OidIsValid(q->checkpoint_table) ?
									q->checkpoint_table : q->dedup_checkpoint);

	return name ? name : "?";
}

/*
 * batch_execute
 *		Run one micro-batch in the current transaction (see file header).
 *		stats->batch_id is 0 when there was nothing to do: no message, and
 *		no watermark move; then nothing is written.
 */
void
batch_execute(QueryRunner *r, int fetch_timeout_ms, int linger_ms, BatchStats *stats)
{
	int			save_nestlevel = NewGUCNestLevel();

	/*
	 * A batch's statements group, sort and hold up to max_records_per_batch
	 * rows at once, far more than one interactive query's work_mem is sized
	 * for: with the default 4MB, a batch of 100,000 distinct groups spilled
	 * its hash aggregate and sort to temporary files every time.  Set for
	 * the batch only, like a function's SET clause; an error unwinds it with
	 * the transaction.
	 */
	if (streamwin_batch_work_mem > 0)
		(void) set_config_option("work_mem", psprintf("%d", streamwin_batch_work_mem),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	batch_run_steps(r, fetch_timeout_ms, linger_ms, stats);
	AtEOXact_GUC(true, save_nestlevel);
}

static void
batch_run_steps(QueryRunner *r, int fetch_timeout_ms, int linger_ms, BatchStats *stats)
{
	MemoryContext old;
	int64		last_batch_id;
	bool		has_old_wm;
	TimestampTz old_wm;
	bool		has_last_at;
	TimestampTz last_at;
	KafkaMessage *msgs;
	int			n;
	BatchMessageResult *res;
	bool		drop_late;
	HeapTuple  *tuples;
	BatchInput	input;
	int			ndead = 0;
	int			nlate = 0;
	TimestampTz now;
	bool		has_new_wm;
	TimestampTz new_wm = 0;
	bool		wm_moved;
	QueryInfo  *q = r->query;
	int64		state_batch_id;
	int64		checkpoint_batch;
	bool		replay;
	bool		replay_has_wm = false;
	TimestampTz replay_wm = 0;
	TablePosition table_start = {0, 0};

	MemoryContextReset(r->batch_cxt);
	old = MemoryContextSwitchTo(r->batch_cxt);
	memset(stats, 0, sizeof(BatchStats));
	stats->started_at = GetCurrentTimestamp();

	SPI_connect();
	lock_query(r, &last_batch_id, &has_old_wm, &old_wm, &has_last_at, &last_at, &state_batch_id,
			   &checkpoint_batch);

	/* a crash emptied the state: restore the checkpoint, then replay */
	if (QUERY_HAS_UNLOGGED_STATE(q) && checkpoint_state_lost(r))
		state_batch_id = checkpoint_restore(r);
	replay = QUERY_HAS_UNLOGGED_STATE(q) && state_batch_id < last_batch_id;

	offsets_load(r);
	offsets_assign(r);
	if (r->source->kind == SOURCE_TABLE)
	{
		table_start.lsn = (XLogRecPtr) r->parts[0].next_offset;
		table_start.index = r->parts[0].next_index;
	}

	if (replay)
	{
		int64	   *targets = palloc(sizeof(int64) * r->nparts);

		checkpoint_replay_bounds(r, state_batch_id + 1, targets, &has_old_wm, &old_wm,
								 &replay_has_wm, &replay_wm);
		n = fetch_replay(r, targets, &msgs);
	}
	else if (r->source->kind == SOURCE_TABLE)
		n = fetch_table(r, &msgs);
	else
		n = kafka_fetch(r->consumer, r->source->max_records_per_batch, fetch_timeout_ms,
						linger_ms, &msgs);

	/* late rows are dropped against the watermark of the previous batch */
	drop_late = q->has_watermark && has_old_wm && q->output_mode != OUTPUT_COMPLETE;
	res = batch_input_decode(r, msgs, n, drop_late, old_wm);

	tuples = palloc(sizeof(HeapTuple) * Max(n, 1));
	input.source_id = r->source->source_id;
	input.ntuples = 0;
	input.tuples = tuples;
	for (int i = 0; i < n; i++)
	{
		int			idx;
		PartitionState *p;

		if (r->source->kind == SOURCE_TABLE)
			idx = 0;			/* positions set by fetch_table */
		else
		{
			idx = (msgs[i].partition <= r->max_partition) ? r->part_index[msgs[i].partition] : -1;
			if (idx < 0)
				elog(ERROR, "streamwin: message from partition %d that was not assigned",
					 msgs[i].partition);
			r->parts[idx].next_offset = msgs[i].offset + 1;
			r->consumer_next[idx] = msgs[i].offset + 1;
		}
		p = &r->parts[idx];
		p->batch_rows++;
		if (res[i].has_event_time &&
			(!p->batch_has_max || res[i].event_time > p->batch_max_event_time))
		{
			p->batch_max_event_time = res[i].event_time;
			p->batch_has_max = true;
		}
		if (res[i].status == 'o')
			tuples[input.ntuples++] = res[i].tuple;
		else if (res[i].status == 'l')
			nlate++;
		else
			ndead++;
	}

	now = GetCurrentTimestamp();
	has_new_wm = offsets_compute_watermark(r, has_old_wm, old_wm, now, &new_wm);
	has_new_wm = has_new_wm && q->has_watermark;
	if (replay)
	{
		/* decide as the original batch did */
		has_new_wm = replay_has_wm;
		new_wm = replay_wm;
	}
	wm_moved = has_new_wm && (!has_old_wm || new_wm > old_wm);

	if (n == 0 && !wm_moved && last_batch_id > 0 && !replay)
	{
		if (r->source->kind == SOURCE_TABLE)
			table_idle_advance(r, table_start, last_batch_id, checkpoint_batch,
							   has_old_wm, old_wm);
		SPI_finish();
		MemoryContextSwitchTo(old);
		return;
	}

	if (input.ntuples > 0 && r->dedup_plan != NULL)
		stats->duplicates = drop_duplicates(r, &input);
	/* a replayed transform only rebuilds its dedup keys: its rows are in */
	if (r->insert_variants_paused > 0)
		r->insert_variants_paused--;
	if (input.ntuples > 0 && !(replay && !q->aggregate))
		run_insert_variant(r, r->batch_insert_plan, r->batch_plan, &input, NULL, replay);
	if (ndead > 0)
		record_rejected(r, msgs, res, n, 'd', ndead, 0);
	if (nlate > 0 && q->capture_late_rows)
		record_rejected(r, msgs, res, n, 'l', nlate, old_wm);

	if (wm_moved && r->close_plan != NULL)
	{
		Datum		arg = TimestampTzGetDatum(new_wm);

		run_insert_variant(r, r->close_insert_plan, r->close_plan, NULL, &arg, replay);
	}
	if (wm_moved && r->dedup_evict_plan != NULL)
	{
		Datum		arg = TimestampTzGetDatum(new_wm);

		run_as_owner(r, r->dedup_evict_plan, &arg, NULL);
	}
	if (r->refresh_plan != NULL && (input.ntuples > 0 || last_batch_id == 0))
	{
		run_as_owner(r, r->clear_plan, NULL, NULL);
		run_as_owner(r, r->refresh_plan, NULL, NULL);
	}
	if (r->state_count_plan != NULL)
	{
		bool		isnull;

		run_as_owner(r, r->state_count_plan, NULL, NULL);
		stats->state_rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 1, &isnull));
	}

	offsets_store(r);

	if (replay)
	{
		stats->batch_id = state_batch_id + 1;
		stats->replayed = true;
		checkpoint_note_replayed(r, stats->batch_id);
	}
	else
		stats->batch_id = last_batch_id + 1;
	stats->input_rows = n;
	stats->late_rows = nlate;
	stats->dead_letters = ndead;
	stats->has_watermark = has_new_wm;
	stats->watermark = new_wm;
	/* outlives SPI_finish() below: the caller reads it after the batch */
	{
		MemoryContext spi_cxt = MemoryContextSwitchTo(r->batch_cxt);

		stats->offsets_json = offsets_json(r);
		MemoryContextSwitchTo(spi_cxt);
	}
	now = GetCurrentTimestamp();
	stats->duration_ms = (now - stats->started_at) / 1000.0;
	stats->processed_rows_per_second = stats->duration_ms > 0 ?
		n / (stats->duration_ms / 1000.0) : 0;
	if (has_last_at && stats->started_at > last_at)
		stats->input_rows_per_second = n / ((stats->started_at - last_at) / 1000000.0);
	if (!replay)
	{
		if (QUERY_HAS_UNLOGGED_STATE(q))
		{
			/*
			 * Every checkpoint_interval batches, but not more often than
			 * checkpoint_min_interval: a worker on a short trigger with a
			 * large state would otherwise spend its time copying it.  Not
			 * for a table source, whose batches decode the WAL from its
			 * slot's restart point, which trails the checkpoint: there a
			 * sparser checkpoint costs more decoding in every batch.
			 */
			if (checkpoint_batch == 0 ||
				(stats->batch_id - checkpoint_batch >= streamwin_checkpoint_interval &&
				 (r->source->kind == SOURCE_TABLE ||
				  now - r->last_checkpoint_at >= (int64) streamwin_checkpoint_min_interval * 1000)))
			{
				int64		behind = stats->batch_id - checkpoint_batch;

				if (checkpoint_take(r, stats->batch_id, has_new_wm, new_wm, false))
					r->last_checkpoint_at = now;
				else if (checkpoint_batch > 0 && behind % (10 * (int64) streamwin_checkpoint_interval) == 0)
				{
					/*
					 * A dump's lock goes away; one that stays (a session
					 * idle in a transaction that read the table) would
					 * make recovery replay ever more batches, all kept in
					 * streamwin.progress: say so, now and then.
					 */
					ereport(WARNING,
							(errmsg("query \"%s\" has taken no checkpoint for " INT64_FORMAT " batches",
									r->query->name, behind),
							 errdetail("Its checkpoint table streamwin.%s is locked by another session.",
									   checkpoint_table_name(r->query)),
							 errhint("A long pg_dump does this, and so does any session holding a lock on that table; "
									 "until a checkpoint is taken, recovery after a crash replays every batch since.")));
				}
			}
		}
		progress_record(r, stats);
	}

	SPI_finish();
	MemoryContextSwitchTo(old);
}

static void
append_timestamp(StringInfo buf, const char *key, bool has, TimestampTz ts)
{
	appendStringInfo(buf, ", \"%s\": ", key);
	if (!has)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, DatumGetCString(DirectFunctionCall1(timestamptz_out,
															 TimestampTzGetDatum(ts))));
}

/*
 * batch_stats_jsonb
 *		A batch's progress record, as run_batch returns it.
 */
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
	append_timestamp(&buf, "started_at", true, s->started_at);
	appendStringInfo(&buf, ", \"duration_ms\": %.3f, \"input_rows\": " INT64_FORMAT
					 ", \"input_rows_per_second\": %.1f, \"processed_rows_per_second\": %.1f"
					 ", \"late_rows_dropped\": " INT64_FORMAT ", \"duplicates_dropped\": " INT64_FORMAT
					 ", \"dead_letters\": " INT64_FORMAT ", \"state_rows\": " INT64_FORMAT,
					 s->duration_ms, s->input_rows, s->input_rows_per_second,
					 s->processed_rows_per_second, s->late_rows, s->duplicates, s->dead_letters,
					 s->state_rows);
	append_timestamp(&buf, "watermark", s->has_watermark, s->watermark);
	if (s->replayed)
		appendStringInfoString(&buf, ", \"replayed\": true");
	appendStringInfo(&buf, ", \"offsets\": %s}", s->offsets_json ? s->offsets_json : offsets_json(r));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/* The runner of a stopped query that the caller may run by hand. */
static QueryRunner *
runner_for_session(text *name_text)
{
	char	   *name = text_to_cstring(name_text);
	QueryInfo  *q = catalog_get_query(name, false);

	catalog_check_owner(q->owner, "query", name);
	if (q->desired_running)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" is running in a background worker", name),
				 errhint("Stop it first with streamwin.stop_query('%s').", name)));
	(void) runner_settings_changed(q);
	return runner_get(q->query_id);
}

/*
 * streamwin.run_batch(name) RETURNS jsonb: one micro-batch in this session,
 * in the caller's transaction.
 */
Datum
streamwin_run_batch(PG_FUNCTION_ARGS)
{
	QueryRunner *r = runner_for_session(PG_GETARG_TEXT_PP(0));
	BatchStats	stats;

	batch_execute(r, 5000, KAFKA_FETCH_LINGER_MS, &stats);
	PG_RETURN_JSONB_P(batch_stats_jsonb(r, &stats));
}

/*
 * Run batches until the query has processed everything its source held when
 * this began (Spark's availableNow), and return the totals as jsonb.  With
 * commit_each, each batch commits as it ends, as in a worker (the caller is
 * a procedure with a non-atomic SPI connection); otherwise all run in the
 * caller's transaction.
 */
static Jsonb *
run_to_end(QueryRunner *r, bool commit_each)
{
	int64	   *targets;
	int64		batches = 0;
	int64		input = 0;
	int64		late = 0;
	int64		dups = 0;
	int64		dead = 0;
	int			idle_rounds = 0;
	BatchStats	stats;
	StringInfoData buf;
	bool		has_wm = false;
	TimestampTz wm = 0;

	offsets_load(r);
	/* in the runner's context: the caller's may not outlive a commit */
	targets = MemoryContextAlloc(r->cxt, sizeof(int64) * r->nparts);
	for (int i = 0; i < r->nparts; i++)
	{
		int64		low;

		if (r->source->kind == SOURCE_TABLE)
			targets[i] = (int64) GetXLogInsertRecPtr();	/* all committed now */
		else
			kafka_query_watermarks(r->consumer, r->parts[i].partition, &low, &targets[i], 10000);
	}

	/*
	 * The batches follow one another at once: a table source may keep its
	 * decoding context open from one to the next (table_source.c), closed
	 * here at the end, or by the abort on an error.
	 */
	r->fetch_again = true;
	PG_TRY();
	{
		for (;;)
		{
			bool		done = true;

			CHECK_FOR_INTERRUPTS();
			if (commit_each)
				PushActiveSnapshot(GetTransactionSnapshot());
			batch_execute(r, 1000, KAFKA_FETCH_LINGER_MS, &stats);
			if (commit_each)
			{
				PopActiveSnapshot();
				SPI_commit();
			}
			if (stats.batch_id != 0)
			{
				batches++;
				has_wm = stats.has_watermark;
				wm = stats.watermark;
			}
			input += stats.input_rows;
			late += stats.late_rows;
			dups += stats.duplicates;
			dead += stats.dead_letters;

			for (int i = 0; i < r->nparts; i++)
				if (r->parts[i].next_offset < targets[i])
					done = false;
			if (done)
				break;
			/* the broker reported more than it delivers (e.g. compacted away) */
			idle_rounds = stats.input_rows == 0 ? idle_rounds + 1 : 0;
			if (idle_rounds >= 10)
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("source of query \"%s\" delivered no messages for 10 seconds before reaching the end it reported",
								r->query->name),
						 r->consumer && kafka_last_error(r->consumer) ?
						 errdetail("Last error from the source: %s", kafka_last_error(r->consumer)) : 0,
						 errhint("Check that the brokers are reachable, then try again.")));
		}
	}
	PG_CATCH();
	{
		r->fetch_again = false;
		pfree(targets);
		PG_RE_THROW();
	}
	PG_END_TRY();
	r->fetch_again = false;
	pfree(targets);
	if (r->source->kind == SOURCE_TABLE)
		table_fetch_release();

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"batches\": " INT64_FORMAT ", \"input_rows\": " INT64_FORMAT
					 ", \"late_rows_dropped\": " INT64_FORMAT ", \"duplicates_dropped\": " INT64_FORMAT
					 ", \"dead_letters\": " INT64_FORMAT,
					 batches, input, late, dups, dead);
	append_timestamp(&buf, "watermark", has_wm, wm);
	appendStringInfo(&buf, ", \"offsets\": %s}", offsets_json(r));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/*
 * streamwin.run_available(name) RETURNS jsonb: Spark's availableNow, all in
 * the caller's transaction.
 */
Datum
streamwin_run_available(PG_FUNCTION_ARGS)
{
	QueryRunner *r = runner_for_session(PG_GETARG_TEXT_PP(0));

	PG_RETURN_JSONB_P(run_to_end(r, false));
}

/*
 * CALL streamwin.catch_up(name, INOUT totals jsonb): the same, but each batch
 * commits as it ends, as in a worker, so that a large backlog is not one
 * long transaction (which holds back vacuum everywhere, and whose failure
 * undoes everything).  A batch that fails leaves those before it committed.
 */
Datum
streamwin_catch_up(PG_FUNCTION_ARGS)
{
	QueryRunner *r;
	Jsonb	   *totals;
	MemoryContext caller = CurrentMemoryContext;
	TupleDesc	desc;
	HeapTuple	result;
	Datum		value;
	bool		isnull = false;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the query name must not be NULL")));
	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		castNode(CallContext, fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("streamwin.catch_up() commits each batch, so it must be called with CALL outside a transaction block"),
				 errhint("To run every batch in your transaction, use SELECT streamwin.run_available('%s').",
						 text_to_cstring(PG_GETARG_TEXT_PP(0)))));
	r = runner_for_session(PG_GETARG_TEXT_PP(0));
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect_ext failed");
	totals = run_to_end(r, true);
	/*
	 * A procedure returns its output arguments as a record; built in the
	 * caller's context, which outlives SPI's and the commits.
	 */
	MemoryContextSwitchTo(caller);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "streamwin.catch_up() must have an output argument");
	value = JsonbPGetDatum((Jsonb *) PG_DETOAST_DATUM_COPY(JsonbPGetDatum(totals)));
	result = heap_form_tuple(BlessTupleDesc(desc), &value, &isnull);
	SPI_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}
