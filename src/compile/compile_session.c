/*-------------------------------------------------------------------------
 *
 * compile_session.c
 *	  The statements of an aggregation over session windows: per key,
 *	  events less than the gap apart form one session, and a batch's
 *	  sessions merge with the stored ones they overlap.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"

#include "compile_aggregate.h"
#include "compile_result.h"
#include "compile_session.h"
#include "compile_sql.h"
#include "compile_window.h"
#include "spi_util.h"
#include "statements.h"

/* a stored session s and a batch's session b overlap in time */
#define SESSIONS_OVERLAP "s.window_start < b.window_end AND b.window_start < s.window_end"

/* "PARTITION BY k1, k2", or "" without keys */
static char *
keys_partition(Compiled *c)
{
	char	   *k = keys_list(c, "");

	if (k[0] == '\0')
		return "";
	k[strlen(k) - 2] = '\0';
	return psprintf("PARTITION BY %s", k);
}


/*
 * The batch's own sessions (keys, window_start, window_end, partials), as
 * the CTEs of a statement:
 *
 *	 r	 the batch's rows: keys, event time, aggregate arguments and filters
 *	 b	 the batch's sessions: gaps and islands over event time per key,
 *		 each island with its partial aggregates
 *
 * *brk and *isl are the names of the CTEs' own columns (named apart from
 * keys and partials), which a statement may use again for its own.
 *
 * Or, per_row, as a statement of its own (window_start, keys, partials,
 * window_end; for session_store_groups_sql): each row a session
 * [ts, ts + gap) of its own, its partials those of that row alone
 * (row_partial_sql), in the order the batch holds them.
 */
static char *
batch_sessions_sql(Compiled *c, const char **brk, const char **isl, bool per_row)
{
	char	   *gap = psprintf("'%lld microseconds'::pg_catalog.interval", (long long) c->size_us);
	Query	   *rq = copyObject(c->query);
	List	   *tlist = NIL;
	AttrNumber	resno = 1;
	ListCell   *lc;
	int			i = 0;
	StringInfoData bparts;
	StringInfoData rparts;
	StringInfoData sql;
	char	   *keys = keys_list(c, "");
	char	   *part = keys_partition(c);
	List	   *taken = list_copy(c->state_names);
	char	   *ts_name = internal_name(&taken, "__ts", "");
	const char *ts = quote_identifier(ts_name);

	/* r: a plain projection of the user's FROM and WHERE */
	foreach(lc, c->keys)
	{
		TargetEntry *k = copyObject(((KeyCol *) lfirst(lc))->tle);

		k->resno = resno++;
		k->ressortgroupref = 0;
		tlist = lappend(tlist, k);
	}
	tlist = lappend(tlist, makeTargetEntry(copyObject(c->event_time), resno++,
										   ts_name, false));
	initStringInfo(&bparts);
	initStringInfo(&rparts);
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);
		Aggref	   *a = (Aggref *) p->expr;
		const char *arg;
		const char *fcol;

		partial_input_columns(p, ++i, &tlist, &resno, &taken, &arg, &fcol);
		appendStringInfo(&bparts, ", %s.%s(%s)%s AS %s",
						 quote_identifier(get_namespace_name(get_func_namespace(a->aggfnoid))),
						 quote_identifier(get_func_name(a->aggfnoid)), arg,
						 fcol ? psprintf(" FILTER (WHERE %s)", fcol) : "",
						 quote_identifier(p->name));
		if (per_row)
			appendStringInfo(&rparts, "%s AS %s, ", row_partial_sql(p, arg, fcol),
							 quote_identifier(p->name));
	}
	rq->targetList = tlist;
	rq->groupClause = NIL;
	rq->hasAggs = false;

	*brk = quote_identifier(internal_name(&taken, "__brk", ""));
	*isl = quote_identifier(internal_name(&taken, "__isl", ""));
	initStringInfo(&sql);
	if (per_row)
	{
		/*
		 * One statement, no CTE: PostgreSQL keeps a CTE over the batch's rows
		 * (a volatile function) in a tuplestore, a copy of every row.
		 */
		appendStringInfo(&sql,
						 "SELECT %s AS window_start, %s%s%s + %s AS window_end FROM (%s) AS r",
						 ts, keys, rparts.data, ts, gap, deparse_query_qualified(rq));
		return sql.data;
	}
	appendStringInfo(&sql,
					 "WITH r AS (%s), "
					 "rm AS (SELECT *, CASE WHEN %s - pg_catalog.lag(%s) OVER (%s ORDER BY %s) < %s "
					 "THEN 0 ELSE 1 END AS %s FROM r), "
					 "ri AS (SELECT *, pg_catalog.sum(%s) OVER (%s ORDER BY %s ROWS UNBOUNDED PRECEDING) AS %s FROM rm), "
					 "b AS (SELECT %spg_catalog.min(%s) AS window_start, pg_catalog.max(%s) + %s AS window_end%s "
					 "FROM ri GROUP BY %s%s)",
					 deparse_query_qualified(rq),
					 ts, ts, part, ts, gap, *brk,
					 *brk, part, ts, *isl,
					 keys, ts, ts, gap, bparts.data, keys, *isl);
	return sql.data;
}

/* ", p1, p2": the partial columns */
static char *
partial_columns(Compiled *c)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, c->partials)
		appendStringInfo(&buf, ", %s", quote_identifier(((PartialCol *) lfirst(lc))->name));
	return buf.data;
}

/*
 * The batch's rows as sessions for a state store (STMT_STORE_GROUPS):
 * window_start, keys, partials, window_end, which the store merges with
 * its sessions (session_merge in store_session.c) in any order.
 *
 * Where every partial is a plain value (count, sum, min, max, bool_and,
 * bool_or), each row is a session of its own, [ts, ts + gap), its
 * partials those of that row alone, and the store joins them in the order
 * the batch holds them: a projection, where grouping the rows by key and
 * instant first takes a hash aggregation and a sort on keys and time, and
 * building the batch's islands two window functions and a second
 * aggregation.  Nor are the rows sorted by time: a batch's rows come as a
 * run per partition, and a key's session mostly spans the batch, so a row
 * out of order mostly falls inside the session its key has already; a
 * row that reaches back before it restarts it, and one that bridges two
 * merges them, each a hash entry moved, where a sort of the rows costs a
 * copy of each, and sorting the rows' places reads them out of order
 * (both measured on N2, see the commit).  Transition states, sketches
 * and distinct sets cost more to build and combine per row than per
 * island, so those queries build the batch's islands first (each way
 * measured, see the commits that chose them).
 */
char *
session_store_groups_sql(Compiled *c)
{
	const char *brk;
	const char *isl;
	bool		per_row = true;
	char	   *with;
	StringInfoData cols;
	ListCell   *lc;

	/*
	 * One row per session only where merging those rows in any order gives
	 * the partials the islands give: sessions that merge in memory combine
	 * their rows in another order than the table's islands do, and a float
	 * sum would differ in its last bits, or a min keep 1.0 rather than
	 * 1.00, so a replay on the other path would write another value.
	 */
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);
		Oid			type = exprType((Node *) p->expr);

		switch (p->merge)
		{
			case MERGE_STATE:
			case MERGE_UNION:
				per_row = false;
				break;
			case MERGE_ADD:
			case MERGE_SUM:
				if (type == FLOAT4OID || type == FLOAT8OID)
					per_row = false;
				break;
			case MERGE_MIN:
			case MERGE_MAX:
				if (!partial_folds_by_row(p, false))
					per_row = false;
				break;
			default:
				break;
		}
	}
	if (per_row)
		return batch_sessions_sql(c, &brk, &isl, true);
	with = batch_sessions_sql(c, &brk, &isl, false);
	initStringInfo(&cols);
	appendStringInfoString(&cols, keys_list(c, ""));
	foreach(lc, c->partials)
		appendStringInfo(&cols, "%s, ", quote_identifier(((PartialCol *) lfirst(lc))->name));
	return psprintf("%s SELECT window_start, %swindow_end FROM b", with, cols.data);
}

/*
 * The statements of a session-window aggregation run in SQL over its state
 * table (a query compiled without a store, or a store's state that does
 * not fit in memory).  The batch's sessions (batch_sessions_sql) take the
 * state sessions they overlap out of the state and merge with them, again
 * as islands, so an event that bridges two sessions joins them into one:
 *
 *	 t	 state sessions overlapping one of the batch's sessions, deleted
 *	 m	 b and t merged into islands, inserted as the new state sessions
 */
void
session_statements(Compiled *c, Oid result, Oid state, OutputMode mode, StringInfo plan)
{
	char	   *rname = qualified_relname(result);
	char	   *sname = qualified_relname(state);
	const char *brk;
	const char *isl;
	char	   *with = batch_sessions_sql(c, &brk, &isl, false);
	char	   *pcols = partial_columns(c);
	StringInfoData mparts;
	StringInfoData sql;
	char	   *keys = keys_list(c, "");
	char	   *part = keys_partition(c);
	char	   *overlapping;
	ListCell   *lc;

	initStringInfo(&mparts);
	foreach(lc, c->partials)
		appendStringInfo(&mparts, ", %s", merge_agg_sql(lfirst(lc)));

	/*
	 * t: the stored sessions that the batch's sessions overlap, taken out of
	 * the state to be merged with them.  Matching keys with IS NOT DISTINCT
	 * FROM (NULL is a group of its own) cannot be hashed or looked up in an
	 * index: the join was a nested loop over the batch's sessions, each
	 * scanning every stored session overlapping it in time, quadratic in the
	 * number of keys.  So rows whose keys are all non-NULL match with =, and
	 * the few with a NULL key in a second, disjoint DELETE.
	 */
	if (c->keys == NIL)
		overlapping = psprintf("t AS (DELETE FROM %s s USING b WHERE %s RETURNING s.*), ",
							   sname, SESSIONS_OVERLAP);
	else
		overlapping = psprintf("t1 AS (DELETE FROM %s s USING b WHERE %s AND %s RETURNING s.*), "
							   "t2 AS (DELETE FROM %s s USING b WHERE %s AND %s AND %s RETURNING s.*), "
							   "t AS (SELECT * FROM t1 UNION ALL SELECT * FROM t2), ",
							   sname, keys_equal_strict(c, "s", "b"), SESSIONS_OVERLAP,
							   sname, keys_any_null(c, "b"), keys_equal(c, "s", "b"), SESSIONS_OVERLAP);

	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "%s, "
					 "%s"
					 "u AS (SELECT %swindow_start, window_end%s FROM b UNION ALL SELECT %swindow_start, window_end%s FROM t), "
					 "um AS (SELECT *, CASE WHEN window_start < pg_catalog.max(window_end) OVER (%s ORDER BY window_start, window_end "
					 "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS %s FROM u), "
					 "ui AS (SELECT *, pg_catalog.sum(%s) OVER (%s ORDER BY window_start, window_end ROWS UNBOUNDED PRECEDING) AS %s FROM um), "
					 "m AS (INSERT INTO %s (%swindow_start, window_end%s) "
					 "SELECT %spg_catalog.min(window_start), pg_catalog.max(window_end)%s FROM ui GROUP BY %s%s RETURNING *)",
					 with,
					 overlapping,
					 keys, pcols, keys, pcols,
					 part, brk,
					 brk, part, isl,
					 sname, keys, pcols,
					 keys, mparts.data, keys, isl);

	if (mode == OUTPUT_UPDATE)
	{
		/*
		 * Rows of sessions merged into another go (keys matched with = where
		 * they are non-NULL, as for t above: window_start alone may be shared
		 * by many rows); merged sessions upserted.
		 */
		if (c->keys == NIL)
			appendStringInfo(&sql,
							 ", gone AS (DELETE FROM %s o USING t WHERE o.window_start = t.window_start "
							 "AND NOT EXISTS (SELECT 1 FROM m WHERE m.window_start = t.window_start)) ",
							 rname);
		else
			appendStringInfo(&sql,
							 ", gone AS (DELETE FROM %s o USING t WHERE o.window_start = t.window_start AND %s "
							 "AND NOT EXISTS (SELECT 1 FROM m WHERE m.window_start = t.window_start AND %s)), "
							 "gone_null AS (DELETE FROM %s o USING t WHERE %s AND o.window_start = t.window_start AND %s "
							 "AND NOT EXISTS (SELECT 1 FROM m WHERE m.window_start = t.window_start AND %s)) ",
							 rname, keys_equal_strict(c, "o", "t"), keys_equal_strict(c, "m", "t"),
							 rname, keys_any_null(c, "t"), keys_equal(c, "o", "t"), keys_equal(c, "m", "t"));
		appendStringInfo(&sql, "INSERT INTO %s AS r (%s) SELECT %s FROM m%s",
						 rname, result_list(c, false), result_list(c, true), result_upsert(c));
	}
	else
		appendStringInfoString(&sql, " SELECT pg_catalog.count(*) FROM m");
	plan_add_statement(plan, STMT_BATCH, sql.data);
	emit_statements(c, rname, sname, mode, plan);
}

