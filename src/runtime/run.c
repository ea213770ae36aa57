/*-------------------------------------------------------------------------
 *
 * run.c
 *	  The SQL functions that run a stopped query's batches in the calling
 *	  session: run_batch (one), run_available (everything the source holds
 *	  now, Spark's availableNow) and the procedure catch_up (the same, a
 *	  commit after each batch).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "batch_memory.h"
#include "runner_cache.h"
#include "catalog.h"
#include "offsets.h"
#include "operator.h"
#include "spi_util.h"
#include "sql_function.h"
#include "worker_registry.h"

STREAMWIN_SQL_FUNCTION(streamwin_run_batch);
STREAMWIN_SQL_FUNCTION(streamwin_run_available);
STREAMWIN_SQL_FUNCTION(streamwin_catch_up);

static const char *const query_name_arg[] = {"the query name"};

/* A query that a worker runs is not run in a session as well. */
static void
refuse_running(const char *name)
{
	/* (a server restarted without preloading, after a restore, say) */
	if (!streamwin_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" is marked running, but no background worker runs it", name),
				 errdetail("streamwin is not in shared_preload_libraries on this server, so it starts no workers."),
				 errhint("Add streamwin to shared_preload_libraries and restart the server, or run its batches in sessions after streamwin.stop_query(%s).",
						 quote_literal_cstr(name))));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("query \"%s\" is running in a background worker", name),
			 errhint("Stop it first with streamwin.stop_query(%s).", quote_literal_cstr(name))));
}

/*
 * The runner of the stopped query the function's first argument names (not
 * NULL), which the caller may run by hand.
 */
static QueryRunner *
runner_for_session(FunctionCallInfo fcinfo)
{
	QueryInfo  *q = catalog_get_owned_query(fcinfo, 1, query_name_arg);
	char	   *name = q->name;
	QueryRunner *r;
	RoleSwitch	owner;
	QueryPosition pos;

	if (q->desired_running)
		refuse_running(name);
	/* (a batch writes its results, state and positions) */
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot run a batch of query \"%s\" on a standby", name),
				 errdetail("A batch writes its results, its state and its source positions."),
				 errhint("Run batches on the primary; once promoted, this server runs them.")));
	(void) runner_settings_changed(q);
	/*
	 * The query's batch lock before its tables' locks, which making a runner
	 * takes (preparing its statements): drop_query takes them in that order.
	 * The batch takes the lock again.
	 */
	catalog_lock_query(q->query_id);
	/* what a drop_query or start_query that held the lock left of it */
	catalog_reread_query(q, false, &pos);
	if (pos.desired_running)
		refuse_running(name);
	/* made as the owner (its plans may run the owner's functions), as batches run */
	role_restricted_enter(&owner, q->owner);
	r = runner_get(q->query_id, false);
	role_switch_leave(&owner);
	return r;
}

/*
 * streamwin.run_batch(name) RETURNS jsonb: one micro-batch in this session,
 * in the caller's transaction.
 */
Datum
streamwin_run_batch(PG_FUNCTION_ARGS)
{
	QueryRunner *r;
	BatchStats	stats;

	r = runner_for_session(fcinfo);
	batch_execute(r, 5000, SESSION_FETCH_LINGER_MS, &stats);
	PG_RETURN_JSONB_P(batch_stats_jsonb(r, &stats));
}

/* What run_to_end did, over all its batches. */
typedef struct RunTotals
{
	int64		batches;
	int64		input;
	int64		late;
	int64		dups;
	int64		dead;
	bool		has_wm;
	TimestampTz wm;
	Jsonb	   *missing;		/* missing_keys summed over the batches */
	MemoryContext missing_cxt;	/* where it lives: it outlives the batches */
} RunTotals;

/*
 * Add a batch's missing_keys ({"column": n, ...}, or for a join
 * {"source": {"column": n}, ...}) into the totals, member by member.
 */
static Jsonb *
add_missing_keys(Jsonb *total, Jsonb *batch)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbParseState *state = NULL;
	JsonbValue *res;
	List	   *keys = NIL;
	List	   *values = NIL;
	ListCell   *k;
	ListCell   *val;

	/* the union of the members, numbers added, objects merged */
	for (int pass = 0; pass < 2; pass++)
	{
		Jsonb	   *j = pass == 0 ? total : batch;

		if (j == NULL)
			continue;
		it = JsonbIteratorInit(&j->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			char	   *key;
			JsonbValue	value;
			bool		found = false;

			if (tok != WJB_KEY)
				continue;
			key = pnstrdup(v.val.string.val, v.val.string.len);
			(void) JsonbIteratorNext(&it, &value, true);
			forboth(k, keys, val, values)
			{
				JsonbValue *old = lfirst(val);

				if (strcmp(lfirst(k), key) != 0)
					continue;
				found = true;
				if (old->type == jbvNumeric && value.type == jbvNumeric)
					old->val.numeric = DatumGetNumeric(DirectFunctionCall2(numeric_add,
																		   NumericGetDatum(old->val.numeric),
																		   NumericGetDatum(value.val.numeric)));
				else if (old->type == jbvBinary && value.type == jbvBinary)
				{
					Jsonb	   *merged = add_missing_keys(JsonbValueToJsonb(old), JsonbValueToJsonb(&value));

					old->type = jbvBinary;
					old->val.binary.data = &merged->root;
					old->val.binary.len = VARSIZE(merged) - VARHDRSZ;
				}
			}
			if (!found)
			{
				JsonbValue *copy = palloc(sizeof(JsonbValue));

				*copy = value;
				keys = lappend(keys, key);
				values = lappend(values, copy);
			}
		}
	}
	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	forboth(k, keys, val, values)
	{
		JsonbValue	key;

		key.type = jbvString;
		key.val.string.val = lfirst(k);
		key.val.string.len = strlen(lfirst(k));
		(void) pushJsonbValue(&state, WJB_KEY, &key);
		(void) pushJsonbValue(&state, WJB_VALUE, lfirst(val));
	}
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

static void
merge_missing_keys(RunTotals *t, const char *batch_json)
{
	MemoryContext old;
	Jsonb	   *batch;
	Jsonb	   *previous;

	if (batch_json == NULL)
		return;
	old = MemoryContextSwitchTo(t->missing_cxt);
	batch = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(batch_json)));
	previous = t->missing;
	t->missing = add_missing_keys(previous, batch);
	if (previous != NULL)
		pfree(previous);
	pfree(batch);
	MemoryContextSwitchTo(old);
}

/*
 * Between catch_up's transactions the query is not locked: refuse to go on
 * once it was started (or dropped) meanwhile, rather than take turns with
 * its worker, each failing on what the other holds (a table source's
 * slot).
 */
static void
check_still_stopped(QueryRunner *r)
{
	QueryInfo  *q = catalog_get_query_by_id(r->query_id, true);

	if (q == NULL || q->result_table != r->query->result_table)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" was dropped while its batches ran", r->query->name)));
	if (q->desired_running)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" was started in a background worker while its batches ran here", q->name),
				 errdetail("The batches that ran here committed; its worker goes on from there."),
				 errhint("Stop it first with streamwin.stop_query(%s) to run its batches here.",
						 quote_literal_cstr(q->name))));
}

/* Has any partition that was behind its target before the batch (before) moved on? */
static bool
behind_moved(QueryRunner *r, SourcePosition **targets, SourcePosition **before)
{
	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];

		for (int i = 0; i < rd->nparts; i++)
			if (SOURCE_POSITION_BEFORE(before[s][i], targets[s][i]) &&
				SOURCE_POSITION_BEFORE(before[s][i], rd->parts[i].next))
				return true;
	}
	return false;
}

/*
 * Batches until every partition is at targets, adding them up into t.
 * With commit_each, each batch commits as it ends, as in a worker.
 */
static void
run_batches(QueryRunner *r, SourcePosition **targets, bool commit_each, RunTotals *t)
{
	TimestampTz progress_at = GetCurrentTimestamp();
	BatchStats	stats;
	SourcePosition *before[QUERY_MAX_SOURCES];
	MemoryContext round_cxt = AllocSetContextCreate(t->missing_cxt, "streamwin run round",
													ALLOCSET_SMALL_SIZES);

	for (int s = 0; s < r->nreaders; s++)
		before[s] = MemoryContextAlloc(t->missing_cxt, sizeof(SourcePosition) * Max(r->readers[s]->nparts, 1));
	for (;;)
	{
		SourceReader *behind = NULL;

		CHECK_FOR_INTERRUPTS();
		for (int s = 0; s < r->nreaders; s++)
			for (int i = 0; i < r->readers[s]->nparts; i++)
				before[s][i] = r->readers[s]->parts[i].next;
		if (commit_each)
		{
			/* (its reading of the catalog goes with the round: a procedure's memory lasts) */
			MemoryContext old = MemoryContextSwitchTo(round_cxt);

			MemoryContextReset(round_cxt);
			PushActiveSnapshot(GetTransactionSnapshot());
			check_still_stopped(r);
			MemoryContextSwitchTo(old);
		}
		batch_execute(r, 1000, SESSION_FETCH_LINGER_MS, &stats);
		if (commit_each)
		{
			PopActiveSnapshot();
			SPI_commit();
		}
		/*
		 * A batch replayed after a crash was counted when it first ran (its
		 * progress row): the totals are of the batches this run adds, and
		 * the run goes on while it replays, also past the targets.
		 */
		if (stats.replayed)
		{
			/* (a replay is progress, however long it takes) */
			progress_at = GetCurrentTimestamp();
			continue;
		}
		if (stats.batch_id != 0)
			t->batches++;
		/* (a batch that did not run says the query's watermark too) */
		t->has_wm = stats.has_watermark;
		t->wm = stats.watermark;
		t->input += stats.input_rows;
		t->late += stats.late_rows;
		t->dups += stats.duplicates;
		t->dead += stats.dead_letters;
		merge_missing_keys(t, stats.missing_keys_json);

		for (int s = 0; s < r->nreaders; s++)
		{
			SourceReader *rd = r->readers[s];

			for (int i = 0; i < rd->nparts; i++)
				if (SOURCE_POSITION_BEFORE(rd->parts[i].next, targets[s][i]))
					behind = rd;
		}
		if (behind == NULL)
			return;

		/*
		 * The source reported more than it delivers (compacted away), or a
		 * partition behind cannot be read (its leader down) while others
		 * deliver: rows of partitions past their targets are no progress.
		 */
		if (behind_moved(r, targets, before))
			progress_at = GetCurrentTimestamp();
		if (TimestampDifferenceExceeds(progress_at, GetCurrentTimestamp(), 10000))
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("source \"%s\" of query \"%s\" delivered no messages of the partitions behind for 10 seconds before reaching the end it reported",
							behind->source->name, r->query->name),
					 behind->ops->last_error && behind->ops->last_error(behind) ?
					 errdetail("Last error from the source: %s", behind->ops->last_error(behind)) : 0,
					 errhint("Check that the brokers are reachable, then try again.")));
	}
}

static Jsonb *run_to_end_in(QueryRunner *r, bool commit_each, MemoryContext run_cxt);

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
	/*
	 * What the run keeps across its batches (the targets, the totals), in a
	 * context of its own under the runner's (the caller's may not outlive a
	 * commit), gone with the run, error or not
	 */
	MemoryContext run_cxt = AllocSetContextCreate(r->cxt, "streamwin run", ALLOCSET_DEFAULT_SIZES);
	Jsonb	   *result = NULL;

	PG_TRY();
	{
		result = run_to_end_in(r, commit_each, run_cxt);
	}
	PG_FINALLY();
	{
		/* an error may have left the run's memory current: not for long */
		for (MemoryContext c = CurrentMemoryContext; c != NULL; c = c->parent)
			if (c == run_cxt)
			{
				MemoryContextSwitchTo(r->cxt);
				break;
			}
		MemoryContextDelete(run_cxt);
	}
	PG_END_TRY();
	return result;
}

static Jsonb *
run_to_end_in(QueryRunner *r, bool commit_each, MemoryContext run_cxt)
{
	SourcePosition *targets[QUERY_MAX_SOURCES];
	RunTotals	t;
	StringInfoData buf;

	memset(&t, 0, sizeof(t));
	t.missing_cxt = run_cxt;
	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];

		targets[s] = MemoryContextAlloc(run_cxt, sizeof(SourcePosition) * Max(rd->nparts, 1));
		rd->ops->end_positions(rd, targets[s]);
	}

	/*
	 * The batches follow one another at once: the readers may keep what they
	 * read ahead for the next (a table source its decoding context), released
	 * here at the end, or by the abort on an error.
	 */
	for (int s = 0; s < r->nreaders; s++)
		r->readers[s]->fetch_again = true;
	/* and the session keeps each batch's memory for the next, as a worker does */
	batch_memory_keep();
	/*
	 * Batches in the caller's transaction may keep rows back from their
	 * tables, which get them once the last has run: until the transaction
	 * commits nobody else sees the tables, and if it fails they roll back
	 * with everything the batches did.
	 */
	r->one_transaction = !commit_each;
	PG_TRY();
	{
		run_batches(r, targets, commit_each, &t);
		if (r->one_transaction)
		{
			RoleSwitch	owner;

			/* the owner's tables, and their indexes, written as batches write them */
			role_restricted_enter(&owner, r->query->owner);
			operators_sync(r->operators);
			role_switch_leave(&owner);
		}
	}
	PG_FINALLY();
	{
		r->one_transaction = false;
		batch_memory_release();
		for (int s = 0; s < r->nreaders; s++)
			r->readers[s]->fetch_again = false;
	}
	PG_END_TRY();
	for (int s = 0; s < r->nreaders; s++)
		if (r->readers[s]->ops->release)
			r->readers[s]->ops->release(r->readers[s]);

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"batches\": " INT64_FORMAT ", \"input_rows\": " INT64_FORMAT
					 ", \"late_rows_dropped\": " INT64_FORMAT ", \"duplicates_dropped\": " INT64_FORMAT
					 ", \"dead_letters\": " INT64_FORMAT,
					 t.batches, t.input, t.late, t.dups, t.dead);
	json_append_timestamp(&buf, "watermark", t.has_wm, t.wm);
	if (t.missing != NULL)
		appendStringInfo(&buf, ", \"missing_keys\": %s", JsonbToCString(NULL, &t.missing->root, 0));
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
	QueryRunner *r;

	r = runner_for_session(fcinfo);

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

	/* (first: the hint below names the query) */
	check_args_not_null(fcinfo, 1, query_name_arg);
	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		castNode(CallContext, fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("streamwin.catch_up() commits each batch, so it must be called with CALL outside a transaction block"),
				 errhint("To run every batch in your transaction, use SELECT streamwin.run_available(%s).",
						 quote_literal_cstr(text_to_cstring(PG_GETARG_TEXT_PP(0))))));
	r = runner_for_session(fcinfo);
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
