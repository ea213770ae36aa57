/*-------------------------------------------------------------------------
 *
 * compile_result.c
 *	  An aggregation's result rows written from its state rows: the
 *	  result's column lists, the upsert of changed groups, and what each
 *	  output mode does besides merging a batch (emit or evict closed
 *	  windows, rewrite the whole result).
 *
 * Tumbling and hopping windows, sessions and aggregations without a window
 * write their results alike: their compilers (compile_window.c,
 * compile_session.c) call down into this file, which calls only
 * compile_sql.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "compile_result.h"
#include "compile_sql.h"
#include "statements.h"

/*
 * The result table's "window_start, window_end, keys..., aggregates...":
 * as column names, or (final) as the SELECT list computing them from state
 * rows.
 */
char *
result_list(Compiled *c, bool final)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (c->window)
		appendStringInfoString(&buf, "window_start, window_end, ");
	foreach(lc, c->keys)
		appendStringInfo(&buf, "%s, ", quote_identifier(((KeyCol *) lfirst(lc))->name));
	foreach(lc, c->aggs)
	{
		AggCol	   *a = lfirst(lc);

		appendStringInfo(&buf, "%s, ", final ? a->final_sql : quote_identifier(a->name));
	}
	buf.data[buf.len -= 2] = '\0';
	return buf.data;
}

/*
 * The INSERT into the result rname of the final values of the groups in
 * s, a CTE of state rows: "INSERT INTO rname AS r (...) SELECT ... FROM s".
 */
char *
results_from_state_sql(Compiled *c, const char *rname)
{
	return psprintf("INSERT INTO %s AS r (%s) SELECT %s FROM s",
					rname, result_list(c, false), result_list(c, true));
}

/* ON CONFLICT clause of a result upsert */
char *
result_upsert(Compiled *c)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfo(&buf, " ON CONFLICT (%s) ", group_columns(c, ""));
	if (c->aggs == NIL && c->window == NULL)
		appendStringInfoString(&buf, "DO NOTHING");
	else
	{
		/* a session's end moves as it grows; other windows' ends are fixed */
		appendStringInfoString(&buf, "DO UPDATE SET ");
		if (c->window)
			appendStringInfoString(&buf, "window_end = EXCLUDED.window_end");
		foreach(lc, c->aggs)
		{
			const char *n = quote_identifier(((AggCol *) lfirst(lc))->name);

			appendStringInfo(&buf, "%s%s = EXCLUDED.%s", buf.data[buf.len - 1] == ' ' ? "" : ", ", n, n);
		}
	}
	return buf.data;
}

/* The state rows of windows closed by watermark $1. */
static char *
close_condition(Compiled *c)
{
	if (strcmp(c->window, "session") == 0)
		return "window_end <= $1";
	/* window_end = window_start + size: answered by the unique index */
	return psprintf("window_start <= $1 - '%lld microseconds'::pg_catalog.interval",
					(long long) c->size_us);
}

/*
 * What happens to state and results besides merging a batch, by output
 * mode: emit closed windows once (append), evict closed windows (update),
 * rewrite the result (complete); and counting state rows for progress.
 */
void
emit_statements(Compiled *c, const char *rname, const char *sname, OutputMode mode,
				StringInfo plan)
{
	if (mode == OUTPUT_APPEND)
	{
		char	   *close = psprintf("WITH s AS (DELETE FROM %s WHERE %s RETURNING *) %s",
									 sname, close_condition(c), results_from_state_sql(c, rname));

		plan_add_statement(plan, STMT_CLOSE, psprintf("%s%s", close, result_upsert(c)));
		/* a window closes once: its rows are new to the result but on replay */
		plan_add_statement(plan, STMT_CLOSE_INSERT, close);
	}
	else if (mode == OUTPUT_UPDATE && c->window)
	{
		/* rows are already final in the result: only forget the state */
		plan_add_statement(plan, STMT_CLOSE, psprintf("DELETE FROM %s WHERE %s", sname, close_condition(c)));
	}
	else if (mode == OUTPUT_COMPLETE)
	{
		plan_add_statement(plan, STMT_CLEAR, psprintf("DELETE FROM %s", rname));
		plan_add_statement(plan, STMT_REFRESH, psprintf("INSERT INTO %s (%s) SELECT %s FROM %s",
														rname, result_list(c, false), result_list(c, true), sname));
	}
	plan_add_statement(plan, STMT_STATE_COUNT, psprintf("SELECT pg_catalog.count(*) FROM %s", sname));
}
