/*-------------------------------------------------------------------------
 *
 * compile_store.c
 *	  The statements of an aggregation whose state a state store keeps in
 *	  memory (state_store.h): the batch's groups or rows for the store to
 *	  merge, the result rows written from the groups it chose, and the
 *	  StorePlan that tells the store what the groups hold.
 *
 * The store's statements are the same for every window kind but for the
 * batch's groups, which the window and session compilers give
 * (window_store_groups_sql, session_store_groups_sql): this file stands
 * above both and calls down into them.  Its names begin with
 * compile_store_, the store's own API (store_...) being state_store.h's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"

#include "compile_result.h"
#include "compile_session.h"
#include "compile_sql.h"
#include "compile_store.h"
#include "compile_window.h"
#include "spi_util.h"
#include "statements.h"

/*
 * "window_start, window_end, k, (final) AS n, ...": the result's row of a
 * state row, each column under its name.
 */
static char *
result_select(Compiled *c)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (c->window)
		appendStringInfoString(&buf, "s.window_start, s.window_end, ");
	foreach(lc, c->keys)
		appendStringInfo(&buf, "s.%s, ", quote_identifier(((KeyCol *) lfirst(lc))->name));
	foreach(lc, c->aggs)
	{
		AggCol	   *a = lfirst(lc);

		appendStringInfo(&buf, "%s AS %s, ", a->final_sql, quote_identifier(a->name));
	}
	buf.data[buf.len -= 2] = '\0';
	return buf.data;
}

/*
 * The INSERT into the result of the final values of store_rows(query_id,
 * which), which returns them in the order of the result's unique index
 * (sort_rows in store_rows.c).
 */
static char *
insert_from_store_rows(Compiled *c, const char *rname, int32 query_id, const char *which)
{
	return psprintf("INSERT INTO %s AS r (%s) SELECT %s FROM streamwin.store_rows(%d, '%s') AS s(%s)",
					rname, result_list(c, false), result_select(c), query_id, which,
					state_column_defs(c));
}

/*
 * The same rows as insert_from_store_rows(), the SELECT alone: its columns
 * are named as the result's, for result_insert_receiver() to write.
 */
static char *
select_from_store_rows(Compiled *c, int32 query_id, const char *which)
{
	return psprintf("SELECT %s FROM streamwin.store_rows(%d, '%s') AS s(%s)",
					result_select(c), query_id, which, state_column_defs(c));
}

/* " RETURNING r.window_start, r.k, ..., r.ctid": where each group's row went */
static char *
returning_locations(Compiled *c)
{
	return psprintf(" RETURNING %s, r.ctid", group_columns(c, "r."));
}

/*
 * Update mode with a store: delete the result rows of the groups gone from
 * the store (STORE_ROWS_GONE: sessions merged into another or starting
 * earlier now; over a changelog, groups whose rows were all retracted), by
 * window start and keys.  As for the state in session_statements, keys
 * match with = where they are all non-NULL, which the planner can hash or
 * look up in the result's unique index (window_start alone may be shared
 * by many rows), and the few with a NULL key in a second, disjoint DELETE.
 */
static char *
store_delete_sql(Compiled *c, const char *rname, int32 query_id)
{
	char	   *gone = psprintf("streamwin.store_rows(%d, 'gone') AS g(%s)", query_id,
								state_column_defs(c));
	const char *window = c->window ? "o.window_start = g.window_start" : "true";

	if (c->keys == NIL)
		return psprintf("DELETE FROM %s o USING %s WHERE %s", rname, gone, window);
	return psprintf("WITH g AS MATERIALIZED (SELECT * FROM %s), "
					"d AS (DELETE FROM %s o USING g WHERE %s AND %s) "
					"DELETE FROM %s o USING g WHERE %s AND %s AND %s",
					gone,
					rname, window, keys_equal_strict(c, "o", "g"),
					rname, keys_any_null(c, "g"), window, keys_equal(c, "o", "g"));
}

/*
 * compile_store_statements
 *		The statements of an aggregation kept in a state store (state_store.h):
 * the batch's groups with their partial aggregates, and the result rows
 * written from the store's groups.  The store merges the groups; these
 * write only what the output mode writes, from streamwin.store_rows(), the
 * groups the store chose for each.  The statements of
 * aggregate_statements() stay in the plan for when the state does not fit
 * in memory, with the index they need.
 */
void
compile_store_statements(Compiled *c, Oid result, Oid state, int32 query_id, OutputMode mode,
						 StringInfo plan)
{
	char	   *rname = qualified_relname(result);
	char	   *index_name = psprintf("%s_groups", get_rel_name(state));
	char	   *end_index_name = psprintf("%s_ends", get_rel_name(state));
	bool		session = c->window != NULL && strcmp(c->window, "session") == 0;
	char	   *rows_sql;

	plan_add_statement(plan, STMT_STORE_GROUPS,
					   session ? session_store_groups_sql(c) : window_store_groups_sql(c));
	if ((rows_sql = window_store_rows_sql(c)) != NULL)
		plan_add_statement(plan, STMT_STORE_BATCH_ROWS, rows_sql);
	if (c->join != NULL && c->join->preserved >= 0)
	{
		c->join->unmatched_pass = true;
		plan_add_statement(plan, STMT_JOIN_UNMATCHED_GROUPS, window_store_groups_sql(c));
		c->join->unmatched_pass = false;
	}
	if (mode == OUTPUT_UPDATE)
	{
		StringInfoData update;
		ListCell   *lc;
		List	   *taken = NIL;
		const char *tid;

		/* the row location's column, named apart from the result's */
		if (c->window)
			taken = list_make2("window_start", "window_end");
		foreach(lc, c->keys)
			taken = lappend(taken, ((KeyCol *) lfirst(lc))->name);
		foreach(lc, c->aggs)
			taken = lappend(taken, ((AggCol *) lfirst(lc))->name);
		tid = quote_identifier(internal_name(&taken, "__streamwin_tid", ""));

		/*
		 * Rows new to the result are not asked where they went: many are
		 * written once (the windows of a backlog read as a time slice), and a
		 * group written again learns it from the upsert.
		 */
		plan_add_statement(plan, STMT_STORE_INSERT, insert_from_store_rows(c, rname, query_id, "insert"));
		plan_add_statement(plan, STMT_STORE_INSERT_ROWS, select_from_store_rows(c, query_id, "insert"));
		plan_add_statement(plan, STMT_STORE_UPSERT,
						   psprintf("%s%s%s", insert_from_store_rows(c, rname, query_id, "upsert"),
									result_upsert(c), returning_locations(c)));

		/*
		 * By location: a join with a TID scan of the result, checking that
		 * the row there is still the group's (a user's VACUUM FULL or CLUSTER
		 * moves rows, and a deleted row's place may hold another); a group
		 * whose row is not there is written by the upsert instead.
		 */
		initStringInfo(&update);
		appendStringInfo(&update, "UPDATE %s AS r SET ", rname);
		if (c->window)
			appendStringInfoString(&update, "window_end = f.window_end, ");
		foreach(lc, c->aggs)
		{
			const char *n = quote_identifier(((AggCol *) lfirst(lc))->name);

			appendStringInfo(&update, "%s = f.%s, ", n, n);
		}
		update.data[update.len -= 2] = '\0';
		appendStringInfo(&update, " FROM (SELECT s.%s, %s FROM %s) AS f WHERE r.ctid = f.%s",
						 tid, result_select(c),
						 psprintf("streamwin.store_rows(%d, 'update') AS s(%s pg_catalog.tid, %s)",
								  query_id, tid, state_column_defs(c)),
						 tid);
		if (c->window)
			appendStringInfoString(&update, " AND r.window_start = f.window_start");
		if (c->keys)
			appendStringInfo(&update, " AND %s", keys_equal(c, "r", "f"));
		appendStringInfoString(&update, returning_locations(c));
		plan_add_statement(plan, STMT_STORE_UPDATE, update.data);
		if (session || c->change_attno != 0)
			plan_add_statement(plan, STMT_STORE_DELETE, store_delete_sql(c, rname, query_id));
	}
	else if (mode == OUTPUT_APPEND)
	{
		plan_add_statement(plan, STMT_STORE_CLOSE, insert_from_store_rows(c, rname, query_id, "closed"));
		plan_add_statement(plan, STMT_STORE_CLOSE_ROWS, select_from_store_rows(c, query_id, "closed"));
		plan_add_statement(plan, STMT_STORE_CLOSE_UPSERT,
						   psprintf("%s%s", insert_from_store_rows(c, rname, query_id, "closed"),
									result_upsert(c)));
	}
	else
		plan_add_statement(plan, STMT_STORE_REFRESH, insert_from_store_rows(c, rname, query_id, "all"));

	/*
	 * The indexes of the SQL statements (see create_state_table): a session
	 * is looked up by key (its start and end move), and closed by its end.
	 */
	plan_add_statement(plan, STMT_STATE_INDEX,
					   psprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s (%s) NULLS NOT DISTINCT",
								quote_identifier(index_name), qualified_relname(state),
								session ? psprintf("%swindow_start", keys_list(c, "")) :
								group_columns(c, "")));
	if (session)
		plan_add_statement(plan, STMT_STATE_END_INDEX,
						   psprintf("CREATE INDEX IF NOT EXISTS %s ON %s (window_end)",
									quote_identifier(end_index_name),
									qualified_relname(state)));
	plan_add_statement(plan, STMT_STATE_UNINDEX,
					   psprintf("DROP INDEX IF EXISTS %s%s%s",
								quote_qualified_identifier("streamwin", index_name),
								session ? ", " : "",
								session ? quote_qualified_identifier("streamwin", end_index_name) : ""));
}

/*
 * compile_store_plan
 *		What the store of this aggregation needs to know (StorePlan), as
 *		plan.store.
 */
void
compile_store_plan(Compiled *c, StringInfo plan)
{
	StorePlan	sp;
	ListCell   *lc;
	int			i = 0;

	memset(&sp, 0, sizeof(sp));
	sp.rows_partial = -1;
	sp.nkeys = (c->window ? 1 : 0) + list_length(c->keys);
	sp.windowed = c->window != NULL;
	sp.session = c->window != NULL && strcmp(c->window, "session") == 0;
	sp.window_size_us = c->size_us;
	if (window_uses_panes(c))
	{
		sp.panes = (int) (c->size_us / c->slide_us);
		sp.slide_us = c->slide_us;
	}
	sp.npartials = list_length(c->partials);
	sp.merge = palloc(sizeof(MergeKind) * Max(sp.npartials, 1));
	sp.aggregate = palloc0(sizeof(char *) * Max(sp.npartials, 1));
	sp.collation = palloc0(sizeof(char *) * Max(sp.npartials, 1));
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);

		sp.merge[i] = p->merge;
		if (p == c->rows_partial)
			sp.rows_partial = i;
		if (p->merge == MERGE_STATE)
			sp.aggregate[i] = format_procedure_qualified(p->aggfnoid);
		if (p->merge == MERGE_STATE && OidIsValid(p->collation))
			sp.collation[i] = collation_qualified_name(p->collation);
		i++;
	}
	appendStringInfoString(plan, ", \"store\": ");
	store_plan_json(&sp, plan);
}
