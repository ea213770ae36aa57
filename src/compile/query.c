/*-------------------------------------------------------------------------
 *
 * query.c
 *	  create_query: compile a continuous query into the statements a batch
 *	  runs, and create its result and state tables.
 *
 * A windowed aggregation such as
 *
 *		SELECT region, count(*) AS orders, avg(amount) AS avg_amount
 *		FROM orders WHERE amount > 0
 *		GROUP BY streamwin.tumble(event_time, '1 minute'), region
 *
 * is run incrementally: each batch computes *partial* aggregates of its own
 * rows per window and key (count, sum and count for avg, min, ...), merges
 * them into an UNLOGGED state table with INSERT ... ON CONFLICT DO UPDATE,
 * and the output mode decides when final values are written to the result
 * table.  The compiler works on PostgreSQL's own parse trees:
 *
 * 1. The raw parse tree is rewritten only where SQL cannot express the
 *	  window directly: hop() in GROUP BY becomes a LATERAL call of
 *	  hop_starts(), so one row lands in every window covering it.
 * 2. The result is analysed by the parser (names, types, privileges, with
 *	  error positions in the user's text); now() and the other clocks become
 *	  the batch's own timestamp, which a replay sees again; then the query is
 *	  checked for shapes that can run incrementally.
 * 3. The analysed Query's target list is replaced by window start, group
 *	  keys and partial aggregates, and deparsed with pg_get_querydef() into
 *	  fully qualified SQL, which the batch statements embed.  Workers
 *	  prepare those statements once and reuse the plans.
 *
 * A query without GROUP BY or aggregates is a continuous transform: every
 * row is appended to the result table.  compile.h says which file does
 * what; this one runs the steps, creates the query's objects and writes its
 * catalog row, once, when everything it names exists.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/varlena.h"

#include "catalog.h"
#include "checkpoint.h"
#include "compile_changelog.h"
#include "compile_dedup.h"
#include "compile_join.h"
#include "compile_session.h"
#include "compile_shape.h"
#include "compile_sql.h"
#include "compile_store.h"
#include "compile_tables.h"
#include "compile_upsert.h"
#include "compile_window.h"
#include "offsets.h"
#include "runner_cache.h"
#include "sql_function.h"
#include "worker_registry.h"
#include "options.h"
#include "source.h"

STREAMWIN_SQL_FUNCTION(streamwin_create_query);

/*
 * Error positions from parsing the query text refer to that text, not to
 * the statement that called create_query: report them as an internal query,
 * the way PL/pgSQL and SQL functions do.
 */
static void
query_text_error_callback(void *arg)
{
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery((const char *) arg);
	}
}

static OutputMode
parse_output_mode(const char *mode)
{
	if (strcmp(mode, "append") == 0)
		return OUTPUT_APPEND;
	if (strcmp(mode, "update") == 0)
		return OUTPUT_UPDATE;
	if (strcmp(mode, "complete") == 0)
		return OUTPUT_COMPLETE;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid output mode \"%s\"", mode),
			 errhint("Use \"append\", \"update\" or \"complete\".")));
	return OUTPUT_APPEND;
}

/*
 * Parse and analyse the query text, with error positions in the user's
 * text, and check its shape; fills c.
 */
static void
compile_text(Compiled *c, const char *query_text, OutputMode mode)
{
	ErrorContextCallback errcallback;
	List	   *raw;
	RawStmt    *rawstmt;

	errcallback.callback = query_text_error_callback;
	errcallback.arg = (void *) query_text;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	raw = raw_parser(query_text, RAW_PARSE_DEFAULT);
	if (list_length(raw) != 1 || !IsA(linitial_node(RawStmt, raw)->stmt, SelectStmt))
		refuse("a continuous query must be a single SELECT statement", NULL,
			   "For example: SELECT region, count(*) FROM orders GROUP BY streamwin.tumble(event_time, '1 minute'), region.");
	rawstmt = linitial_node(RawStmt, raw);
	if (((SelectStmt *) rawstmt->stmt)->op == SETOP_NONE)
	{
		check_window_arguments((SelectStmt *) rawstmt->stmt, query_text);
		rewrite_hop((SelectStmt *) rawstmt->stmt);
	}

	memset(c, 0, sizeof(Compiled));
	c->query = parse_analyze_fixedparams(rawstmt, query_text, NULL, 0, NULL);
	error_context_stack = errcallback.previous;
	check_query_shape(c->query);
	c->query = rewrite_batch_time(c->query);
	check_from(c);
	check_changelog(c, (SelectStmt *) rawstmt->stmt);
	c->aggregate = c->query->hasAggs || c->query->groupClause != NIL;
	if (c->aggregate)
		compile_grouping(c);
	else if (mode != OUTPUT_APPEND)
		refuse(psprintf("output mode \"%s\" needs an aggregation", mode == OUTPUT_UPDATE ? "update" : "complete"),
			   "A query without GROUP BY appends each row to the result table.",
			   "Use output_mode => 'append'.");
	/* after the checks of the parts, which say more about theirs */
	check_replayable(c->query);
}

/* Is boolean option name of options true? */
static bool
option_is_true(Jsonb *options, const char *name)
{
	char	   *v = jsonb_get_text(options, name);

	return v != NULL && strcmp(v, "true") == 0;
}

/* The settings of create_query that depend on the query's shape. */
static void
check_settings(Compiled *c, OutputMode mode, bool has_watermark, Jsonb *options,
			   ArrayType *dedup_keys, List **dedup_names)
{
	char	   *option_event_time = jsonb_get_text(options, "event_time");

	if (option_event_time != NULL)
	{
		if (c->window != NULL)
			refuse("option \"event_time\" is only for queries without a window",
				   "The first argument of the window function is the query's event time.",
				   "Leave the option out.");
		/* with nothing to act on, as an unknown option */
		if (!has_watermark && dedup_keys == NULL)
			refuse("option \"event_time\" needs a watermark",
				   "The event time says which rows come too late for the watermark, and how long dedup keys are kept; without either it would only make the rows whose time is NULL dead letters.",
				   "Set a watermark, or leave the option out.");
		c->event_time = source_column_expr(c, option_event_time);
	}

	/*
	 * Complete mode keeps every window and rewrites the whole result each
	 * batch, so the watermark closes nothing and drops nothing (as in
	 * Spark, which ignores it there); it only serves to forget dedup keys.
	 * Accepted, as Spark accepts it, with a word that it does nothing here.
	 */
	if (mode == OUTPUT_COMPLETE && has_watermark && dedup_keys == NULL)
		ereport(NOTICE,
				(errmsg("the watermark closes no window and drops no row in complete mode"),
				 errdetail("Complete mode keeps every window and rewrites the whole result each batch."),
				 errhint("Use output_mode => 'update' (closed windows leave the state) or 'append' (each window is written once, when the watermark closes it) for the watermark to act.")));
	if (has_watermark && c->event_time == NULL && c->join != NULL)
		refuse("a watermark needs an event time",
			   "A join's event times are those its time range compares, and this join has no time range.",
			   "Add a range between the sides' times, for example c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes', or leave the watermark NULL.");
	if (has_watermark && c->event_time == NULL)
		refuse("a watermark needs an event time",
			   "The watermark is computed from the event time of a window in GROUP BY, or of the column named by the event_time option.",
			   "Group by streamwin.tumble(event_time, size), or name the column with options => '{\"event_time\": \"ts\"}', or leave the watermark NULL.");
	if (dedup_keys != NULL)
	{
		*dedup_names = dedup_key_names(c, dedup_keys);
		if (!has_watermark && !option_is_true(options, "dedup_without_watermark"))
			refuse("dedup_keys need a watermark",
				   "Without a watermark no key is ever forgotten, so the deduplication state grows forever.",
				   "Set a watermark, or accept unbounded state with options => '{\"dedup_without_watermark\": true}'.");
	}
	/* options with nothing to act on: refused, as unknown ones are */
	if (option_is_true(options, "join_state_unbounded") && c->join == NULL)
		refuse("option \"join_state_unbounded\" is only for a join of two sources",
			   "A query of one source keeps no join state.", "Leave the option out.");
	if (option_is_true(options, "dedup_without_watermark") && dedup_keys == NULL)
		refuse("option \"dedup_without_watermark\" is only for a query with dedup_keys",
			   NULL, "Leave the option out, or give the query its dedup_keys.");
	if (option_is_true(options, "capture_late_rows") && !has_watermark)
		refuse("option \"capture_late_rows\" needs a watermark",
			   "Without a watermark no row is late.", "Set a watermark, or leave the option out.");
	if (jsonb_get_text(options, "idle_timeout") != NULL && !has_watermark)
		refuse("option \"idle_timeout\" needs a watermark",
			   "It is how long a partition that delivers nothing holds the watermark back.",
			   "Set a watermark, or leave the option out.");
	if (c->aggregate && mode == OUTPUT_APPEND && (c->window == NULL || !has_watermark))
		refuse("append mode needs an event-time window and a watermark",
			   "In append mode a window's row is written once, when the watermark closes it; without a watermark no window ever closes.",
			   c->window ? "Add a watermark, for example watermark => '10 seconds', or use output_mode => 'update'."
			   : "Group by streamwin.tumble() or streamwin.hop() and set a watermark, or use output_mode => 'update'.");
}

/* What create_query makes: the query's tables and its compiled plan. */
typedef struct QueryObjects
{
	int32		query_id;
	Oid			result;
	Oid			state;
	Oid			checkpoint;
	Oid			dedup;
	Oid			dedup_checkpoint;
	StringInfoData plan;
} QueryObjects;

/* Create the query's tables and compile its statements into o->plan. */
static void
create_objects(Compiled *c, const char *name, OutputMode mode, List *dedup_names,
			   QueryObjects *o)
{
	StringInfo	plan = &o->plan;

	initStringInfo(plan);
	appendStringInfo(plan, "{\"kind\": \"%s\"", c->aggregate ? "aggregate" : "transform");
	/* a join's statements read its tables */
	if (c->join != NULL)
		join_tables(c, o->query_id);
	if (c->aggregate)
	{
		o->result = create_result_table(c, name, mode);
		o->state = create_state_table(c, o->query_id);
		o->checkpoint = checkpoint_create_table(o->query_id, o->state,
												psprintf("checkpoint_%d", o->query_id),
												true);
		key_expressions_final(c, o->state);
		/* the SQL statements, for a state that does not fit in memory */
		if (c->window && strcmp(c->window, "session") == 0)
			session_statements(c, o->result, o->state, mode, plan);
		else
			aggregate_statements(c, o->result, o->state, mode, plan);
		compile_store_statements(c, o->result, o->state, o->query_id, mode, plan);
		compile_store_plan(c, plan);
	}
	else
	{
		o->result = create_transform_table(c, name, plan);
		/* which key of the table it is keyed by, checked at every batch */
		if (c->key_columns != NIL)
		{
			appendStringInfoString(plan, ", \"source_key\": ");
			escape_json(plan, source_key_names(c->key_columns));
		}
	}
	/* the names the statements give the tables they read and write */
	appendStringInfoString(plan, ", \"result_name\": ");
	escape_json(plan, qualified_relname(o->result));
	for (int i = 0; i < c->nsources; i++)
	{
		appendStringInfo(plan, ", \"source_view_name_%d\": ", i);
		escape_json(plan, qualified_relname(c->sources[i]->relation));
	}
	upsert_objects(c, o->query_id, plan);
	if (c->window)
		appendStringInfo(plan, ", \"window\": \"%s\", \"window_size_us\": " INT64_FORMAT
						 ", \"window_slide_us\": " INT64_FORMAT,
						 c->window, c->size_us,
						 strcmp(c->window, "session") == 0 ? 0 : c->slide_us ? c->slide_us : c->size_us);
	if (c->event_time)
	{
		appendStringInfoString(plan, ", \"event_time\": ");
		escape_json(plan, nodeToString(event_time_for_plan(c->event_time)));
	}
	if (dedup_names != NIL)
	{
		dedup_statements(c, dedup_names, o->query_id, plan, &o->dedup, &o->dedup_checkpoint);
		if (c->dedup_side > 0)
			appendStringInfo(plan, ", \"dedup_side\": %d", c->dedup_side);
	}
	if (c->join != NULL)
		join_statements(c, plan);
	appendStringInfoChar(plan, '}');
}

/*
 * The query's rows of streamwin.query_sources: each source, where it starts
 * for the query if it records that (a table source), and a join's tables.
 */
static void
insert_query_sources(Compiled *c, int32 query_id)
{
	for (int i = 0; i < c->nsources; i++)
	{
		int64		start_lsn = 0;
		const SourceOps *ops = source_ops(c->sources[i]);
		bool		has_start = ops->query_start != NULL &&
			ops->query_start(c->sources[i], query_id, &start_lsn);

		catalog_insert_query_source(query_id, i, c->sources[i]->source_id, has_start, start_lsn,
									c->join != NULL ? c->join->table[i] : InvalidOid,
									c->join != NULL ? c->join->checkpoint[i] : InvalidOid);
	}
}

/*
 * The new query's starts that are resolved at its creation, by a runner
 * made for that alone: made in a transaction that may yet roll back, it is
 * not kept, error or not.
 */
static void
resolve_starts(int32 query_id)
{
	QueryRunner *r = runner_get(query_id, false);

	PG_TRY();
	{
		offsets_resolve_starts(r);
	}
	PG_FINALLY();
	{
		runner_forget(query_id);
	}
	PG_END_TRY();
}

/*
 * streamwin.create_query(name, query, watermark, output_mode,
 *						  trigger_interval, dedup_keys, options, start)
 */
Datum
streamwin_create_query(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *query_text;
	OutputMode	mode;
	Jsonb	   *options;
	bool		start;
	bool		has_watermark = !PG_ARGISNULL(2);
	Compiled	c;
	List	   *dedup_names = NIL;
	QueryObjects o;
	NewQuery	nq;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3) || PG_ARGISNULL(4) ||
		PG_ARGISNULL(6) || PG_ARGISNULL(7))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("only watermark and dedup_keys of create_query may be null")));
	/* recorded as PostgreSQL names the result table: 'MixedCase' is mixedcase */
	name = catalog_new_name(text_to_cstring(PG_GETARG_TEXT_PP(0)), "query");
	query_text = text_to_cstring(PG_GETARG_TEXT_PP(1));
	mode = parse_output_mode(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	options = PG_GETARG_JSONB_P(6);
	start = PG_GETARG_BOOL(7);
	validate_query_options(options);

	check_trigger_interval(PG_GETARG_INTERVAL_P(4));
	if (has_watermark && interval_to_usec(PG_GETARG_INTERVAL_P(2), "watermark") < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("watermark must not be negative"),
				 errhint("The watermark is how far behind the newest event time a row may arrive, for example interval '10 seconds'.")));
	if (has_watermark)
		check_duration_at_most(PG_GETARG_INTERVAL_P(2), "watermark", MAX_EVENT_TIME_DAYS,
							   "The watermark is how far behind the newest event time a row may arrive, for example interval '10 seconds'.");

	if (start)
	{
		check_preloaded();
		check_role_can_login(GetUserId());
	}

	SPI_connect();
	catalog_lock_new_name('q', name);
	if (catalog_get_query(name, true) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("query \"%s\" already exists", name),
				 errhint("Choose another name, or drop the query first with streamwin.drop_query().")));

	compile_text(&c, query_text, mode);
	if (c.nsources > 1)
		compile_join(&c, mode, has_watermark, options);
	check_changelog_dedup(&c, !PG_ARGISNULL(5));
	check_settings(&c, mode, has_watermark, options,
				   PG_ARGISNULL(5) ? NULL : PG_GETARG_ARRAYTYPE_P(5), &dedup_names);
	check_changelog_settings(&c, mode);
	for (int i = 0; i < c.nsources; i++)
	{
		SourceInfo *src = c.sources[i];

		if (source_ops(src)->check_query)
			source_ops(src)->check_query(src);
		if (src->owner != GetUserId() &&
			pg_class_aclcheck(src->relation, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for source \"%s\"", src->name),
					 errdetail("A query reads a source of another role through the source's view."),
					 errhint("The source's owner can GRANT SELECT ON %s to the query's owner.",
							 get_rel_name(src->relation) ? quote_qualified_identifier(get_namespace_name(get_rel_namespace(src->relation)),
																				  get_rel_name(src->relation)) : src->name)));
	}
	if (OidIsValid(RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
									NoLock, true)))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s\" already exists", name),
				 errdetail("A query's result table takes the query's name."),
				 errhint("Choose another name for the query, or drop or rename the table.")));

	memset(&o, 0, sizeof(o));
	o.query_id = catalog_next_query_id();
	create_objects(&c, name, mode, dedup_names, &o);

	nq.query_id = o.query_id;
	nq.name = name;
	nq.owner = GetUserId();
	nq.query_text = query_text;
	nq.has_watermark = has_watermark;
	nq.watermark = has_watermark ? PG_GETARG_DATUM(2) : (Datum) 0;
	nq.output_mode = text_to_cstring(PG_GETARG_TEXT_PP(3));
	nq.trigger_interval = PG_GETARG_DATUM(4);
	nq.has_dedup_keys = !PG_ARGISNULL(5);
	nq.dedup_keys = PG_ARGISNULL(5) ? (Datum) 0 : PG_GETARG_DATUM(5);
	nq.options = options;
	nq.result_table = o.result;
	nq.state_table = o.state;
	nq.plan = o.plan.data;
	nq.desired_state = start ? "running" : "stopped";
	nq.checkpoint_table = o.checkpoint;
	nq.dedup_table = o.dedup;
	nq.dedup_checkpoint = o.dedup_checkpoint;
	catalog_insert_query(&nq);
	insert_query_sources(&c, o.query_id);
	SPI_finish();

	/* "latest" is where the sources end now (see offsets_resolve_starts) */
	for (int i = 0; i < c.nsources; i++)
		if (offsets_start_resolved_at_creation(c.sources[i]))
		{
			resolve_starts(o.query_id);
			break;
		}

	if (start)
		worker_request_start(o.query_id, GetUserId());
	PG_RETURN_VOID();
}
