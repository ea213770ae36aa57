/*-------------------------------------------------------------------------
 *
 * compile_window.c
 *	  The statements of an aggregation over tumbling or hopping windows, or
 *	  without a window: merge each batch's partial aggregates into the
 *	  state, and emit, evict or rewrite results by output mode
 *	  (compile_result.c); and the batch's groups and rows that a state
 *	  store takes instead (compile_store.c).
 *
 * The batch statement embeds the user's query, its target list replaced by
 * window start, group keys and partial aggregates, deparsed into fully
 * qualified SQL; workers prepare it once and reuse the plan.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "compile_aggregate.h"
#include "compile_join.h"
#include "compile_result.h"
#include "compile_sql.h"
#include "compile_window.h"
#include "spi_util.h"
#include "statements.h"
#include "window.h"

/* Mutator context of hop_without_srf: the Var of a window start, and what replaces it. */
typedef struct HopVarReplace
{
	int			rtindex;
	Node	   *start;
} HopVarReplace;

static Node *
replace_hop_var(Node *node, HopVarReplace *ctx)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == ctx->rtindex &&
		((Var *) node)->varlevelsup == 0)
		return copyObject(ctx->start);
	if (IsA(node, Query))
		return (Node *) query_tree_mutator((Query *) node, replace_hop_var, ctx, 0);
	return expression_tree_mutator(node, replace_hop_var, ctx);
}

/*
 * The analysed query reads hop windows from LATERAL hop_starts(ts, size,
 * slide), a set-returning function called for every row: each call builds
 * and reads back a tuplestore, about a tenth of a hop query's CPU.  For the
 * batch statement, join instead with generate_series(0, n - 1) AS i, n =
 * ceil(size / slide), which does not depend on the row, so it runs once and
 * is rescanned, and compute each start as tumble(ts, slide) - i * slide,
 * keeping those whose window still covers ts (all of them when the size is
 * a multiple of the slide): the same starts hop_starts returns.
 */
/* An interval constant of us microseconds (no days, no months) */
static Expr *
usec_interval_const(int64 us)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = us;
	return (Expr *) makeConst(INTERVALOID, -1, InvalidOid, sizeof(Interval), PointerGetDatum(iv),
							  false, false);
}

static Query *
hop_without_srf(Compiled *c, Query *pq, int32 n)
{
	Oid			targs[2] = {TIMESTAMPTZOID, INTERVALOID};
	Oid			tumble = streamwin_func_oid("tumble", 2, targs);
	int			rtindex;
	RangeTblEntry *hop;
	FuncExpr   *starts;
	Expr	   *ts;
	Expr	   *size;
	Expr	   *slide;
	FuncExpr   *series;
	RangeTblFunction *rtf;
	Expr	   *start;
	HopVarReplace ctx;

	rtindex = hop_rtindex(pq);
	if (rtindex == 0)
		elog(ERROR, "streamwin: hop window without its function");
	hop = rt_fetch(rtindex, pq->rtable);
	starts = (FuncExpr *) linitial_node(RangeTblFunction, hop->functions)->funcexpr;
	ts = linitial(starts->args);

	/*
	 * The size and the slide as microseconds: the user's '1 day' added to
	 * or subtracted from a timestamptz is a calendar day in the batch's
	 * time zone, 23 or 25 hours across a daylight saving change, where
	 * windows are of a fixed length everywhere else.
	 */
	size = usec_interval_const(c->size_us);
	slide = usec_interval_const(c->slide_us);

	series = makeFuncExpr(F_GENERATE_SERIES_INT4_INT4, INT4OID,
						  list_make2(makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(0), false, true),
									 makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(n - 1), false, true)),
						  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	series->funcretset = true;
	rtf = makeNode(RangeTblFunction);
	rtf->funcexpr = (Node *) series;
	rtf->funccolcount = 1;
	hop->functions = list_make1(rtf);
	hop->lateral = false;
	hop->alias = makeAlias(HOP_ALIAS, list_make1(makeString("i")));
	hop->eref = makeAlias(HOP_ALIAS, list_make1(makeString("i")));

	/* tumble(ts, slide) - i * slide */
	start = (Expr *) makeFuncExpr(F_TIMESTAMPTZ_MI_INTERVAL, TIMESTAMPTZOID,
								  list_make2(makeFuncExpr(tumble, TIMESTAMPTZOID,
														  list_make2(copyObject(ts), copyObject(slide)),
														  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL),
											 makeFuncExpr(F_INTERVAL_MUL, INTERVALOID,
														  list_make2(copyObject(slide),
																	 makeFuncExpr(F_FLOAT8_INT4, FLOAT8OID,
																				  list_make1(makeVar(rtindex, 1, INT4OID, -1, InvalidOid, 0)),
																				  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL)),
														  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL)),
								  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);

	ctx.rtindex = rtindex;
	ctx.start = (Node *) start;
	pq->targetList = (List *) replace_hop_var((Node *) pq->targetList, &ctx);
	pq->jointree = (FromExpr *) replace_hop_var((Node *) pq->jointree, &ctx);

	/* ts < start + size, unless every start up to n - 1 covers ts */
	if (c->size_us % c->slide_us != 0 && n > 1)
	{
		Expr	   *covers = (Expr *) makeFuncExpr(F_TIMESTAMPTZ_LT, BOOLOID,
												   list_make2(copyObject(ts),
															  makeFuncExpr(F_TIMESTAMPTZ_PL_INTERVAL, TIMESTAMPTZOID,
																		   list_make2(copyObject(start), copyObject(size)),
																		   InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL)),
												   InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);

		pq->jointree->quals = make_and_qual(pq->jointree->quals, (Node *) covers);
	}
	return pq;
}

/*
 * Hop windows whose size is a multiple of their slide can be computed from
 * panes, the tumbling windows of the slide: each pane lies whole in the
 * size / slide windows that start at it and at the starts before it.  So
 * a batch aggregates each row once, into its pane, then merges every
 * pane's partial aggregates into the windows covering it: in SQL with the
 * same aggregates that merge sessions (merge_agg_sql), in a state store
 * by merging each pane's group into those windows' groups (merge_receive),
 * which takes a second aggregation out of the statement.  Without panes
 * each row is aggregated once per window (ten times for 10 minutes sliding
 * by 1): bench case 3.  Whether this query's windows are such hops.
 */
bool
window_uses_panes(Compiled *c)
{
	return c->window != NULL && strcmp(c->window, "hop") == 0 && c->size_us % c->slide_us == 0 &&
		!c->hop_start_in_rows;
}

/*
 * pq, a partial aggregation, over the batch's rows: for a join of two
 * sources, over the pairs the batch finds (join_pairs_sql), and then,
 * when merge, merged into one row per group.
 */
static char *
partial_rows_sql(Compiled *c, Query *pq, bool merge)
{
	StringInfoData sql;
	ListCell   *lc;
	int			group = 0;

	if (c->join == NULL || c->join->unmatched_pass)
		return deparse_query_qualified(pq);
	if (!merge)
		return join_pairs_sql(c, pq);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	if (c->window)
		appendStringInfoString(&sql, "u.window_start");
	foreach(lc, c->keys)
		appendStringInfo(&sql, "%su.%s", sql.len > 7 ? ", " : "",
						 quote_identifier(((KeyCol *) lfirst(lc))->name));
	foreach(lc, c->partials)
		appendStringInfo(&sql, "%s%s", sql.len > 7 ? ", " : "", merge_agg_sql(lfirst(lc)));
	appendStringInfo(&sql, " FROM (%s) AS u(%s", join_pairs_sql(c, pq), group_columns(c, ""));
	foreach(lc, c->partials)
		appendStringInfo(&sql, ", %s", quote_identifier(((PartialCol *) lfirst(lc))->name));
	appendStringInfoString(&sql, ") GROUP BY ");
	for (int i = 0; i < (c->window ? 1 : 0) + list_length(c->keys); i++)
		appendStringInfo(&sql, "%s%d", group++ ? ", " : "", i + 1);
	return sql.data;
}

/*
 * The window start (as window_start) and the group keys, as the first
 * entries of a target list, numbered from *resno on; grouped keeps their
 * references to the query's GROUP BY, for a query that still groups by
 * them.
 */
static List *
group_target_list(Compiled *c, bool grouped, AttrNumber *resno)
{
	List	   *tlist = NIL;
	ListCell   *lc;

	if (c->window_tle)
	{
		TargetEntry *w = copyObject(c->window_tle);

		w->resname = "window_start";
		tlist = lappend(tlist, w);
	}
	foreach(lc, c->keys)
		tlist = lappend(tlist, copyObject(((KeyCol *) lfirst(lc))->tle));
	foreach(lc, tlist)
	{
		TargetEntry *t = lfirst(lc);

		t->resno = (*resno)++;
		t->resjunk = false;
		if (!grouped)
			t->ressortgroupref = 0;
	}
	return tlist;
}

/*
 * The query computing one batch's partial aggregates.  For hop windows
 * from panes, the windows' (the panes merged, in SQL), or with
 * panes_only the panes' own, which a store merges into the windows
 * itself (StorePlan.panes).
 */
static char *
partial_query_sql(Compiled *c, bool panes_only)
{
	Query	   *pq = copyObject(c->query);
	AttrNumber	resno = 1;
	List	   *tlist = group_target_list(c, true, &resno);
	ListCell   *lc;
	StringInfoData sql;
	int			group = 1;

	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);

		tlist = lappend(tlist, makeTargetEntry(p->expr, resno++, p->name, false));
	}
	pq->targetList = tlist;
	if (!window_uses_panes(c))
	{
		if (c->window && strcmp(c->window, "hop") == 0)
			pq = hop_without_srf(c, pq, (int32) hop_windows_per_row(c->size_us, c->slide_us));
		return partial_rows_sql(c, pq, true);
	}

	/* the panes (one window start each: the pane's own), then the windows */
	pq = hop_without_srf(c, pq, 1);
	if (panes_only)
		return partial_rows_sql(c, pq, true);
	initStringInfo(&sql);
	/*
	 * (pg_catalog's float8 * interval, by name: an int4 * interval, or any
	 * *, of a schema on the path is not taken; OPERATOR() binds as any
	 * operator, hence the parentheses)
	 */
	appendStringInfo(&sql, "SELECT p.window_start OPERATOR(pg_catalog.-) (__streamwin_pane.i::pg_catalog.float8 OPERATOR(pg_catalog.*) '%lld microseconds'::pg_catalog.interval)",
					 (long long) c->slide_us);
	foreach(lc, c->keys)
		appendStringInfo(&sql, ", p.%s", quote_identifier(((KeyCol *) lfirst(lc))->name));
	foreach(lc, c->partials)
		appendStringInfo(&sql, ", %s", merge_agg_sql(lfirst(lc)));
	appendStringInfo(&sql, " FROM (%s) AS p, pg_catalog.generate_series(0, %lld) AS __streamwin_pane(i) GROUP BY 1",
					 partial_rows_sql(c, pq, false), (long long) (c->size_us / c->slide_us - 1));
	foreach(lc, c->keys)
		appendStringInfo(&sql, ", %d", ++group);
	return sql.data;
}

/*
 * window_store_groups_sql
 *		The batch's groups for a state store to merge (STMT_STORE_GROUPS):
 *		window_start, keys and partials, one row per group; for hop
 *		windows from panes, the panes' groups, which the store merges into
 *		the windows itself.
 */
char *
window_store_groups_sql(Compiled *c)
{
	return partial_query_sql(c, true);
}


/*
 * Whether a partial folds row by row into exactly the value the partial
 * aggregate gives: its type is passed by value (the store folds it in
 * place), and its merge is what the aggregate's transition does, whatever
 * the values.  A sum of floats is: float8pl and float4pl are the
 * transition of sum and the partial's "+", and the store folds a group's
 * rows in the batch's order, as the aggregation does.  min and max are
 * not where two values can compare equal and still differ (-0 and 0,
 * 1.0 and 1.00): which of them the transition keeps is its own choice.
 * Over a join (pairs) a float sum is not: the executor sums a group's
 * pairs in an order of its plan's (each join's apart and then the sums, or
 * after a sort), which the store's folding of the pairs one by one would
 * not repeat to the last bit.
 */
bool
partial_folds_by_row(PartialCol *p, bool pairs)
{
	Oid			type = exprType((Node *) p->expr);

	if (!get_typbyval(type))
		return false;
	switch (p->merge)
	{
		case MERGE_ADD:
		case MERGE_SUM:
			return !pairs || (type != FLOAT4OID && type != FLOAT8OID);
		case MERGE_AND:
		case MERGE_OR:
			return true;
		case MERGE_MIN:
		case MERGE_MAX:
			return type == INT2OID || type == INT4OID || type == INT8OID ||
				type == DATEOID || type == TIMESTAMPOID || type == TIMESTAMPTZOID ||
				type == TIMEOID || type == OIDOID || type == BOOLOID;
		case MERGE_STATE:
		case MERGE_UNION:
		case MERGE_COUNTED:
		case MERGE_FIRST:
		case MERGE_LAST:
			break;
	}
	return false;
}

/*
 * window_store_rows_sql
 *		The batch's rows for a state store to aggregate itself
 *		(STMT_STORE_BATCH_ROWS): window_start, keys, then each partial as
 *		it is for that row alone (row_partial_sql), in the order the batch
 *		holds the rows; the same columns as STMT_STORE_GROUPS.
 *
 * The store folds each row into its group and merges what a group's rows
 * make into the group once, so the result is the one the partial
 * aggregation gives (see merge_receive), without a hash table of the
 * batch's groups besides the store's own.  Over a join kept in a join
 * store, the rows are the batch's pairs (join_pairs_sql), read in memory.
 * NULL where that cannot hold: a hop or session window (a row in several
 * groups, or groups that merge), or a partial that does not fold by row;
 * and a join without a join store (an outer join), whose pairs come from
 * its join tables: folding pays for a join's pairs in memory (bench case
 * JA), which is all that was measured.
 */
char *
window_store_rows_sql(Compiled *c)
{
	Query	   *rq = copyObject(c->query);
	List	   *tlist;
	List	   *taken = list_copy(c->state_names);
	AttrNumber	resno = 1;
	ListCell   *lc;
	int			i = 0;
	StringInfoData parts;
	StringInfoData sql;

	if ((c->window != NULL && strcmp(c->window, "tumble") != 0) ||
		(c->join != NULL && c->join->plan.nkeys == 0) || c->partials == NIL)
		return NULL;
	foreach(lc, c->partials)
		if (!partial_folds_by_row(lfirst(lc), c->join != NULL))
			return NULL;

	/* r: a plain projection of the user's FROM and WHERE */
	tlist = group_target_list(c, false, &resno);
	initStringInfo(&parts);
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);
		const char *arg;
		const char *filter;

		partial_input_columns(p, ++i, &tlist, &resno, &taken, &arg, &filter);
		appendStringInfo(&parts, ", %s AS %s", row_partial_sql(p, arg, filter),
						 quote_identifier(p->name));
	}
	rq->targetList = tlist;
	rq->groupClause = NIL;
	rq->hasAggs = false;

	/* one statement, no CTE, as for sessions (batch_sessions_sql) */
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	if (c->window_tle)
		appendStringInfoString(&sql, "window_start, ");
	appendStringInfoString(&sql, keys_list(c, ""));
	appendStringInfo(&sql, "%s FROM (%s) AS r", parts.data + 2,
					 c->join != NULL ? join_pairs_sql(c, rq) : deparse_query_qualified(rq));
	return sql.data;
}

/*
 * The merge of partial aggregates (the query partial) into the state table
 * sname: INSERT ... ON CONFLICT DO UPDATE.
 */
static char *
state_merge_sql(Compiled *c, const char *sname, const char *partial)
{
	StringInfoData merge;
	StringInfoData cols;
	StringInfoData ins;
	StringInfoData sel;
	ListCell   *lc;
	char	   *window_end = "";

	if (c->window)
		window_end = psprintf("b.window_start + '%lld microseconds'::pg_catalog.interval",
							  (long long) c->size_us);
	/* merge the batch's partial aggregates into the state */
	initStringInfo(&cols);
	initStringInfo(&ins);
	initStringInfo(&sel);
	if (c->window)
	{
		appendStringInfoString(&ins, "window_start, window_end");
		appendStringInfo(&sel, "b.window_start, %s", window_end);
	}
	foreach(lc, c->keys)
	{
		const char *n = quote_identifier(((KeyCol *) lfirst(lc))->name);

		appendStringInfo(&ins, "%s%s", ins.len ? ", " : "", n);
		appendStringInfo(&sel, "%sb.%s", sel.len ? ", " : "", n);
	}
	foreach(lc, c->partials)
	{
		const char *n = quote_identifier(((PartialCol *) lfirst(lc))->name);

		appendStringInfo(&cols, ", %s", n);
		appendStringInfo(&ins, ", %s", n);
		appendStringInfo(&sel, ", b.%s", n);
	}

	/*
	 * In the order of the state's unique index (and the result's primary key,
	 * as RETURNING keeps it): with many groups, successive probes and
	 * insertions then land on the same leaf pages instead of all over a large
	 * index.
	 */
	initStringInfo(&merge);
	appendStringInfo(&merge, "INSERT INTO %s AS s (%s) SELECT %s FROM (%s) AS b(%s%s) ORDER BY %s ON CONFLICT (%s) ",
					 sname, ins.data, sel.data, partial,
					 group_columns(c, ""), cols.data, group_columns(c, "b."), group_columns(c, ""));
	if (c->partials == NIL)
		appendStringInfoString(&merge, "DO NOTHING");
	else
	{
		appendStringInfoString(&merge, "DO UPDATE SET ");
		foreach(lc, c->partials)
		{
			PartialCol *p = lfirst(lc);

			appendStringInfo(&merge, "%s%s = %s", lc == list_head(c->partials) ? "" : ", ",
							 quote_identifier(p->name), merge_sql(p));
		}
	}
	return merge.data;
}

/* The merge, and in update mode also the upsert of the changed groups' results. */
static char *
batch_merge_sql(Compiled *c, const char *rname, const char *sname, OutputMode mode,
				const char *partial)
{
	char	   *merge = state_merge_sql(c, sname, partial);

	if (mode != OUTPUT_UPDATE)
		return merge;
	return psprintf("WITH s AS (%s RETURNING s.*) %s%s", merge, results_from_state_sql(c, rname), result_upsert(c));
}

/* The statements of an aggregation, stored in query_catalog.plan. */
void
aggregate_statements(Compiled *c, Oid result, Oid state, OutputMode mode, StringInfo plan)
{
	char	   *rname = qualified_relname(result);
	char	   *sname = qualified_relname(state);
	char	   *partial;
	char	   *merge;

	/*
	 * Over a changelog the batches run on the store only: a group whose rows
	 * are all retracted leaves it, which these statements cannot do (see
	 * op_store.h).  The statements that read the state table stay.
	 */
	if (c->change_attno != 0)
	{
		emit_statements(c, rname, sname, mode, plan);
		return;
	}
	partial = partial_query_sql(c, false);
	merge = state_merge_sql(c, sname, partial);
	plan_add_statement(plan, STMT_BATCH, batch_merge_sql(c, rname, sname, mode, partial));
	if (c->join != NULL && c->join->preserved >= 0)
	{
		/* the rows of the preserved side that go without a match */
		c->join->unmatched_pass = true;
		plan_add_statement(plan, STMT_JOIN_UNMATCHED,
						   batch_merge_sql(c, rname, sname, mode, partial_query_sql(c, false)));
		c->join->unmatched_pass = false;
	}

	/*
	 * Its insert variant (see run_insert_variant in batch.c): a group the
	 * merge inserted into the state (its xmax is 0; an updated one carries
	 * the updater's) goes into the result with a plain INSERT.  No column of
	 * the state can be called xmax, a system column's name.
	 */
	if (mode == OUTPUT_UPDATE)
	{
		char	   *insert = results_from_state_sql(c, rname);

		plan_add_statement(plan, STMT_BATCH_INSERT, psprintf("WITH s AS (%s RETURNING s.*, s.xmax), "
															 "n AS (%s WHERE xmax = 0) %s WHERE xmax <> 0%s",
															 merge, insert, insert, result_upsert(c)));
	}
	emit_statements(c, rname, sname, mode, plan);
}
