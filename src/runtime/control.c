/*-------------------------------------------------------------------------
 *
 * control.c
 *	  The life of a query after create_query: start, stop, drop, reset, and
 *	  the worker pid shown in streamwin.queries.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "catalog_positions.h"
#include "checkpoint.h"
#include "sql_function.h"
#include "worker_registry.h"
#include "offsets.h"
#include "options.h"
#include "runner_cache.h"
#include "spi_util.h"

STREAMWIN_SQL_FUNCTION(streamwin_start_query);
STREAMWIN_SQL_FUNCTION(streamwin_stop_query);
STREAMWIN_SQL_FUNCTION(streamwin_alter_query);
STREAMWIN_SQL_FUNCTION(streamwin_drop_query);
STREAMWIN_SQL_FUNCTION(streamwin_reset_query);
STREAMWIN_SQL_FUNCTION(streamwin_worker_pid);

/*
 * After drop_query: the query's source may let go of what it kept for the
 * query (see SourceOps.query_gone).
 */
static void
source_query_gone(QueryInfo *q)
{
	SPI_connect();
	for (int i = 0; i < q->nsources; i++)
	{
		SourceInfo *src = catalog_get_source_by_id(q->sources[i].source_id, false);

		if (source_ops(src)->query_gone)
			source_ops(src)->query_gone(src);
	}
	SPI_finish();
}

static const char *const query_name_arg[] = {"the query name"};

/* streamwin.start_query(name): run the query in a background worker */
Datum
streamwin_start_query(PG_FUNCTION_ARGS)
{
	QueryInfo  *q = catalog_get_owned_query(fcinfo, 1, query_name_arg);

	check_preloaded();
	check_role_can_login(q->owner);
	catalog_set_desired_state(q->query_id, "running");
	/* a session that ran batches by hand must not keep a stale reader */
	runner_forget(q->query_id);
	worker_request_start(q->query_id, q->owner);
	PG_RETURN_VOID();
}

/*
 * streamwin.alter_query(name, trigger_interval, idle_timeout): change how
 * often the query runs and how long an idle partition holds its watermark
 * back, keeping its state, positions and results; NULL keeps a setting.
 * The worker (or a session's runner) takes them before its next batch.
 */
Datum
streamwin_alter_query(PG_FUNCTION_ARGS)
{
	QueryInfo  *q = catalog_get_owned_query(fcinfo, 1, query_name_arg);
	char	   *idle_timeout = NULL;

	if (!PG_ARGISNULL(1))
		check_trigger_interval(PG_GETARG_INTERVAL_P(1));
	if (!PG_ARGISNULL(2))
	{
		/* as create_query refuses it: it would have nothing to act on */
		if (!q->has_watermark)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("query \"%s\" has no watermark for idle_timeout to act on", q->name),
					 errdetail("idle_timeout is how long a partition that delivers nothing holds the watermark back."),
					 errhint("Leave idle_timeout out, or drop the query and create it again with a watermark.")));
		check_idle_timeout(PG_GETARG_INTERVAL_P(2));
		idle_timeout = DatumGetCString(DirectFunctionCall1(interval_out, PG_GETARG_DATUM(2)));
	}
	catalog_alter_query(q->query_id, !PG_ARGISNULL(1), PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1),
						idle_timeout);
	worker_request_wake(q->query_id);
	PG_RETURN_VOID();
}

/* streamwin.stop_query(name): the worker exits after its current batch */
Datum
streamwin_stop_query(PG_FUNCTION_ARGS)
{
	QueryInfo  *q = catalog_get_owned_query(fcinfo, 1, query_name_arg);

	catalog_set_desired_state(q->query_id, "stopped");
	worker_request_wake(q->query_id);
	PG_RETURN_VOID();
}

/*
 * DROP TABLE of a query's result, for drop_query(..., drop_result => true).
 * Objects that depend on it (a view over it) make PostgreSQL refuse with
 * "Use DROP ... CASCADE", which drop_query has no way to do: say what
 * does.  Inside SPI.
 */
static void
drop_result_table(QueryInfo *q)
{
	char	   *table = qualified_relname(q->result_table);
	MemoryContext cxt = CurrentMemoryContext;
	ErrorData  *edata;

	PG_TRY();
	{
		spi_run(psprintf("DROP TABLE %s", table));
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop result table \"%s\" of query \"%s\" because other objects depend on it",
						get_rel_name(q->result_table), q->name),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("Drop those objects first, or keep the table: streamwin.drop_query(%s) drops the query alone, "
						 "and then DROP TABLE %s CASCADE drops the table with them.",
						 quote_literal_cstr(q->name), table)));
	}
	PG_END_TRY();
}

/*
 * streamwin.drop_query(name, drop_result): remove the query, its state and
 * offsets; the result table stays unless drop_result.
 */
Datum
streamwin_drop_query(PG_FUNCTION_ARGS)
{
	static const char *const args[] = {"the query name", "drop_result"};
	QueryInfo  *q = catalog_get_owned_query(fcinfo, 2, args);
	bool		drop_result = PG_GETARG_BOOL(1);
	RoleSwitch	role;

	/* wait for a batch in progress to finish */
	catalog_lock_query(q->query_id);
	catalog_delete_query(q->query_id, q->name);
	SPI_connect();
	catalog_enter(&role);
	{
		StateTablePair pairs[MAX_STATE_TABLES];
		int			npairs = query_state_tables(q, pairs);

		for (int i = 0; i < npairs; i++)
		{
			Oid			tables[2] = {pairs[i].unlogged, pairs[i].logged};

			/* where they are: the owner may have moved its own */
			for (int t = 0; t < 2; t++)
				if (get_rel_name(tables[t]) != NULL)
					SPI_execute(psprintf("DROP TABLE %s", qualified_relname(tables[t])), false, 0);
		}
	}
	catalog_leave(&role);
	if (drop_result && get_rel_name(q->result_table) != NULL)
		drop_result_table(q);
	SPI_finish();
	runner_forget(q->query_id);
	worker_request_wake(q->query_id);
	source_query_gone(q);
	PG_RETURN_VOID();
}

/* The forms of reset_query's starting_offsets for the query's source, as a hint. */
static int
starting_offsets_hint(SourceInfo *src, int nsources)
{
	/* (from its options: in an error's making, open no relation) */
	const char *changes = jsonb_get_text(src->options, "changes");

	if (nsources > 1)
		return errhint("Use 'earliest', 'latest' or a JSON object with the starting offsets of each source under its name, "
					   "such as '{\"clicks\": {\"0\": 42}, \"impressions\": {\"0\": 7}}' (sources not named start at the earliest).");
	if (source_ops(src)->changelog_reset_hint != NULL && changes != NULL && strcmp(changes, "all") == 0)
		return errhint("%s", source_ops(src)->changelog_reset_hint);
	return errhint("%s", source_ops(src)->reset_hint);
}

/*
 * starting_offsets of reset_query: NULL for 'earliest' and 'latest', else
 * the JSON object it must be (what it holds, the source's reset checks).
 */
static Jsonb *
parse_starting_offsets(SourceInfo *src, int nsources, const char *start)
{
	const char *p = start;
	MemoryContext cxt = CurrentMemoryContext;
	Jsonb	   *volatile json = NULL;
	ErrorData  *volatile edata = NULL;

	if (strcmp(start, "earliest") == 0 || strcmp(start, "latest") == 0)
		return NULL;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p != '{')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid starting_offsets \"%s\"", start),
				 starting_offsets_hint(src, nsources)));
	/* jsonb_in raises on bad JSON: say what was expected, with its reason */
	PG_TRY();
	{
		json = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(start)));
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	if (edata != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid starting_offsets \"%s\"", start),
				 errdetail("It is not valid JSON: %s%s%s", edata->message,
						   edata->detail ? ": " : ".", edata->detail ? edata->detail : ""),
				 starting_offsets_hint(src, nsources)));
	return json;
}

/*
 * The explicit starting offsets of each source (per_source[i], NULL where
 * none): the object itself for a query over one source; for a join, its
 * member under each source's name, any other member refused.
 */
static void
split_starting_offsets(QueryInfo *q, SourceInfo **sources, Jsonb *explicit, const char *start,
					   Jsonb **per_source)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	for (int i = 0; i < q->nsources; i++)
		per_source[i] = NULL;
	if (explicit == NULL)
		return;
	if (q->nsources == 1)
	{
		per_source[0] = explicit;
		return;
	}
	it = JsonbIteratorInit(&explicit->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		int			found = -1;
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		/* a source by any spelling of its name, as the functions take it */
		key = catalog_canonical_name(pnstrdup(v.val.string.val, v.val.string.len));
		for (int i = 0; i < q->nsources; i++)
			if (key != NULL && strcmp(sources[i]->name, key) == 0)
				found = i;
		if (found < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid starting_offsets \"%s\"", start),
					 errdetail("Query \"%s\" reads no source named \"%.*s\".", q->name,
							   v.val.string.len, v.val.string.val),
					 starting_offsets_hint(sources[0], q->nsources)));
		if (per_source[found] != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid starting_offsets \"%s\"", start),
					 errdetail("Source \"%s\" is named twice.", sources[found]->name)));
		tok = JsonbIteratorNext(&it, &v, true);
		if (tok != WJB_VALUE || v.type != jbvBinary)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid starting_offsets \"%s\"", start),
					 errdetail("The offsets of source \"%s\" must be a JSON object.", sources[found]->name),
					 starting_offsets_hint(sources[found], 1)));
		per_source[found] = JsonbValueToJsonb(&v);
	}
}

/*
 * May the result rows stay through a reset to start?  Where a replay from
 * the earliest position writes every row again under its key (windows and
 * groups of an aggregation), yes; from a later one, a group's row would hold
 * what is read from there on alone.  Not for session windows, whose sessions a replay may merge
 * differently (a row of a session merged away would stay); nor over a
 * changelog, whose state starts over empty (a group's row would be
 * overwritten with what is read since the reset alone, and one whose rows
 * were all retracted would stay); nor for a transform that replays (its
 * rows are appended, again), unless it starts at the latest position.
 * Why not, for the NOTICE; NULL: they may.
 */
static const char *
result_stale_after_reset(QueryInfo *q, SourceInfo **sources, const char *start)
{
	if (q->session_windows)
		return "A replay of session windows may merge them otherwise, and would leave rows of sessions merged away.";
	for (int i = 0; i < q->nsources; i++)
		if (source_change_attno(source_tupdesc(sources[i]->relation)) != 0)
			return "The state of a query over a changelog starts over empty: its result holds what it reads from the new positions on (over a table, the table's rows now, then its changes).";
	if (!q->aggregate && strcmp(start, "latest") != 0)
		return "A transform appends the rows it replays: its result holds the rows read from the new positions on.";
	if (q->aggregate && strcmp(start, "earliest") != 0)
		return "The state starts over at the new positions, after the earliest: a group's row would be overwritten with what is read from there on alone, beside rows that keep their totals from before.";
	return NULL;
}

static void
reset_refused_running(QueryInfo *q)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("query \"%s\" is running", q->name),
			 errhint("Stop it first with streamwin.stop_query(%s).", quote_literal_cstr(q->name))));
}

/*
 * The query, read again, must be there, stopped; lock_row: its row is
 * locked too (FOR UPDATE: a start_query waits until the reset ends; a
 * write, after which the transaction may create no replication slot).
 */
static void
reset_check_query_now(QueryInfo *q, bool lock_row)
{
	QueryPosition pos;

	catalog_reread_query(q, lock_row, &pos);
	if (pos.desired_running)
		reset_refused_running(q);
}

/*
 * streamwin.reset_query(name, starting_offsets): start the query over from
 * 'earliest', 'latest', or explicit offsets given as a JSON object
 * {"partition": offset, ...} (partitions not named start at the earliest).
 * Open windows, the watermark and errors are cleared.  Result rows stay and
 * are overwritten as the replay re-emits them, where it does; elsewhere
 * (result_stale_after_reset) the result is emptied, with a NOTICE, so that
 * it holds what the replay makes and nothing else.  A
 * source that can no longer be read (a table source whose slot PostgreSQL
 * invalidated) is made readable again first, before the first write
 * (prepare_reset).
 */
Datum
streamwin_reset_query(PG_FUNCTION_ARGS)
{
	static const char *const args[] = {"the query name", "starting_offsets"};
	QueryInfo  *q = catalog_get_owned_query(fcinfo, 2, args);
	char	   *name = q->name;
	char	   *start = text_to_cstring(PG_GETARG_TEXT_PP(1));
	SourceInfo *sources[QUERY_MAX_SOURCES];
	QueryRunner *r;
	Jsonb	   *explicit;
	Jsonb	   *per_source[QUERY_MAX_SOURCES];
	RoleSwitch	role;
	const char *stale;

	if (q->desired_running)
		reset_refused_running(q);
	for (int i = 0; i < q->nsources; i++)
		sources[i] = catalog_get_source_by_id(q->sources[i].source_id, false);
	explicit = parse_starting_offsets(sources[0], q->nsources, start);
	split_starting_offsets(q, sources, explicit, start, per_source);

	catalog_require_query_tables(q);
	/* wait for a batch in progress (a stopping worker's last) to finish */
	catalog_lock_query(q->query_id);

	/*
	 * and, the wait over, the query as it is now: meanwhile another session
	 * may have dropped it, or started it
	 */
	reset_check_query_now(q, false);
	/* before anything is written: a table source may need a new slot */
	for (int i = 0; i < q->nsources; i++)
		if (source_ops(sources[i])->prepare_reset != NULL)
			source_ops(sources[i])->prepare_reset(sources[i]);
	/* and its row held until the reset commits (a write: after the slot) */
	reset_check_query_now(q, true);
	catalog_reset_query(q->query_id);
	SPI_connect();
	catalog_enter(&role);
	if (QUERY_HAS_UNLOGGED_STATE(q))
	{
		StateTablePair pairs[MAX_STATE_TABLES];
		int			npairs = query_state_tables(q, pairs);

		/* the state is now (validly) empty, whatever a crash did to it */
		for (int i = 0; i < npairs; i++)
		{
			catalog_check_table_pair(pairs[i].unlogged, RowExclusiveLock, pairs[i].logged, RowExclusiveLock);
			SPI_execute(psprintf("DELETE FROM ONLY %s", qualified_relname(pairs[i].unlogged)), false, 0);
			SPI_execute(psprintf("DELETE FROM ONLY %s", qualified_relname(pairs[i].logged)), false, 0);
		}
	}
	catalog_leave(&role);
	SPI_finish();
	if (QUERY_HAS_UNLOGGED_STATE(q))
		catalog_mark_state_alive(q->query_id);

	/*
	 * Resolve the new positions now, so that they do not drift, on the
	 * query's runner: made as the owner (making it may run the owner's
	 * functions, a domain's CHECK), as batches run, whoever calls.
	 */
	role_restricted_enter(&role, q->owner);
	r = runner_get(q->query_id, false);
	role_switch_leave(&role);
	runner_state_rewritten(r);
	offsets_load(r);
	for (int i = 0; i < r->nreaders; i++)
		r->readers[i]->ops->reset(r->readers[i],
								  explicit != NULL && per_source[i] == NULL ? "earliest" : start,
								  per_source[i]);
	offsets_store(r);
	/* the next batch reads the starts again, should this transaction roll back */
	r->catalog_xmin = InvalidTransactionId;
	if (QUERY_HAS_UNLOGGED_STATE(q))
	{
		RoleSwitch	owner;

		/* a crash from here on resumes at the new positions */
		SPI_connect();
		/* as a batch takes it: the owner's tables written as the owner */
		role_restricted_enter(&owner, q->owner);
		/* must be taken: the old one is at positions before the reset */
		checkpoint_take(r, catalog_query_last_batch(q->query_id), false, 0, true);
		role_switch_leave(&owner);
		SPI_finish();
	}
	/* the new positions are valid: the rows they cannot overwrite go */
	if ((stale = result_stale_after_reset(q, sources, start)) != NULL)
	{
		RoleSwitch	owner;

		SPI_connect();
		/* as the query's owner, who owns the result table (and its triggers) */
		role_restricted_enter(&owner, q->owner);
		spi_run(psprintf("DELETE FROM %s", qualified_relname(q->result_table)));
		role_switch_leave(&owner);
		SPI_finish();
		ereport(NOTICE,
				(errmsg("the result rows of query \"%s\" were deleted", name),
				 errdetail("%s", stale)));
	}
	PG_RETURN_VOID();
}

/* streamwin.worker_pid(query_id): pid of the query's worker, or NULL */
Datum
streamwin_worker_pid(PG_FUNCTION_ARGS)
{
	int			pid = worker_pid(MyDatabaseId, PG_GETARG_INT32(0));

	if (pid == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(pid);
}
