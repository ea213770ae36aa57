/*-------------------------------------------------------------------------
 *
 * compile_tables.c
 *	  The tables of a continuous query: its result table (the user's, in
 *	  the query's schema, owned by its creator) and its UNLOGGED state
 *	  table (in schema streamwin); and a transform's result table with the
 *	  statement that appends to it (over a join's pairs, compile_join.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/varlena.h"

#include "compile_changelog.h"
#include "compile_join.h"
#include "compile_shape.h"
#include "compile_sql.h"
#include "compile_tables.h"
#include "spi_util.h"
#include "statements.h"


/* Column definitions of window and group keys, for result and state tables. */
static void
append_group_column_defs(StringInfo sql, Compiled *c)
{
	ListCell   *lc;

	if (c->window)
		appendStringInfoString(sql, "window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, ");
	foreach(lc, c->keys)
	{
		KeyCol	   *k = lfirst(lc);

		appendStringInfo(sql, "%s %s, ", quote_identifier(k->name),
						 column_type_sql(exprType((Node *) k->tle->expr),
										 exprTypmod((Node *) k->tle->expr),
										 exprCollation((Node *) k->tle->expr)));
	}
}

/*
 * The fill factor of an update-mode result table: a batch rewrites every
 * row whose group it changed, and a new version that finds room on its
 * row's page is a heap-only tuple, which no index entry follows; on
 * another page it takes an entry in the unique index, whose insertion
 * first visits every older version of the key the index still points at.
 * Packed full, a result updated by frequent small batches went that way at
 * nearly every row: half the CPU of such a batch was that check.  A
 * batch may rewrite every row of a page, so the page keeps room for as
 * many again; the store prunes the last batch's versions off the page
 * before it updates (store_prune_result_pages).  A window's rows are
 * rewritten only while it is open, and keep less room, so that the pages
 * of closed windows are not left half empty.
 */
#define UPDATE_RESULT_FILLFACTOR 50
#define UPDATE_WINDOW_RESULT_FILLFACTOR 80

/*
 * A result column of an anonymous row type (ROW(a, b)) or another pseudo
 * type, which no table's column can have: refused saying what works,
 * rather than by CREATE TABLE's bare error.
 */
static void
check_result_column_type(const char *name, Oid type)
{
	if (get_typtype(type) == TYPTYPE_PSEUDO)
		refuse(psprintf("SELECT list item \"%s\" is of type %s, which the result table's column cannot have",
						name, format_type_be(type)),
			   NULL,
			   "Select its fields each as a column, or a value of a named type, such as the row's text (ROW(a, b)::text).");
}

/* Create the result table of an aggregation, as the calling role. */
Oid
create_result_table(Compiled *c, const char *name, OutputMode mode)
{
	StringInfoData sql;
	ListCell   *lc;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", quote_name_text(name));
	append_group_column_defs(&sql, c);
	foreach(lc, c->aggs)
	{
		AggCol	   *a = lfirst(lc);

		check_result_column_type(a->name, a->type);
		appendStringInfo(&sql, "%s %s, ", quote_identifier(a->name),
						 column_type_sql(a->type, a->typmod, a->collation));
	}

	/*
	 * One row per window and group.  Not a primary key: group keys may be
	 * NULL (a JSON key missing from a message), and as in GROUP BY, NULL is a
	 * group of its own; NULLS NOT DISTINCT makes it one row.
	 */
	appendStringInfo(&sql, "UNIQUE NULLS NOT DISTINCT (%s))", group_columns(c, ""));
	if (mode == OUTPUT_UPDATE)
		appendStringInfo(&sql, " WITH (fillfactor = %d)",
						 c->window ? UPDATE_WINDOW_RESULT_FILLFACTOR : UPDATE_RESULT_FILLFACTOR);
	spi_run(sql.data);
	CommandCounterIncrement();
	return RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							NoLock, false);
}

/* The UNLOGGED state table of an aggregation: open windows' partial aggregates. */
Oid
create_state_table(Compiled *c, int32 query_id)
{
	StringInfoData sql;
	StringInfoData storage;
	ListCell   *lc;
	char	   *name = psprintf("state_%d", query_id);
	char	   *qname = quote_qualified_identifier("streamwin", name);

	initStringInfo(&sql);
	initStringInfo(&storage);
	appendStringInfo(&sql, "CREATE UNLOGGED TABLE %s (", qname);
	append_group_column_defs(&sql, c);
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);

		appendStringInfo(&sql, "%s %s, ", quote_identifier(p->name),
						 column_type_sql(exprType((Node *) p->expr), exprTypmod((Node *) p->expr),
										 exprCollation((Node *) p->expr)));

		/*
		 * A partial kept as bytea (a set of values, a sketch, a serialized
		 * transition state) can grow past TOAST's threshold, and the store
		 * rewrites a group's row after every batch that changes it: stored
		 * out of line but not compressed, which would cost more than the
		 * rest of the write (a group's set of 1,000 numeric values is
		 * compressed again at every batch).  With lz4, a changelog's
		 * counted values (MERGE_COUNTED, a few kB a group) are stored in
		 * line, compressed, instead: lz4 takes less time than writing the
		 * set out of line in TOAST chunks (each with its index entry, and
		 * the old chunks deleted through the index), and a set of a
		 * thousand numeric values, 9 kB, compresses into the row's page.
		 * The logged checkpoint table (checkpoint_create_table) takes the
		 * column's compression: compressed, for fewer bytes of WAL, with
		 * lz4 where the server has it, several times faster than pglz at
		 * every checkpoint.
		 */
		if (exprType((Node *) p->expr) == BYTEAOID)
		{
#ifdef USE_LZ4
			appendStringInfo(&storage, "%s ALTER COLUMN %s SET STORAGE %s, ALTER COLUMN %s SET COMPRESSION lz4",
							 storage.len ? "," : "", quote_identifier(p->name),
							 p->merge == MERGE_COUNTED ? "MAIN" : "EXTERNAL",
							 quote_identifier(p->name));
#else
			appendStringInfo(&storage, "%s ALTER COLUMN %s SET STORAGE EXTERNAL",
							 storage.len ? "," : "", quote_identifier(p->name));
#endif
		}
	}

	/*
	 * The store writes the state table by row location and looks nothing up
	 * in it: no index, each of which would cost an insertion per new state
	 * row.  STMT_STATE_INDEX (and STMT_STATE_END_INDEX for a session) make
	 * the indexes the SQL statements need when the state does not fit in
	 * memory.
	 */
	sql.data[sql.len -= 2] = '\0';
	appendStringInfoChar(&sql, ')');
	if (storage.len > 0)
		appendStringInfo(&sql, "; ALTER TABLE %s%s", qname, storage.data);
	return create_query_table(name, sql.data, NULL);
}


Oid
create_transform_table(Compiled *c, const char *name, StringInfo plan)
{
	StringInfoData sql;
	StringInfoData cols;
	ListCell   *lc;
	List	   *names = NIL;
	List	   *colnames = NIL;
	Oid			relid;

	initStringInfo(&sql);
	initStringInfo(&cols);
	appendStringInfo(&sql, "CREATE TABLE %s (", quote_name_text(name));
	foreach(lc, c->query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle->resjunk)
			continue;
		check_column_name(&names, tle->resname, false);
		check_result_column_type(tle->resname, exprType((Node *) tle->expr));
		appendStringInfo(&sql, "%s%s %s", cols.len ? ", " : "", quote_identifier(tle->resname),
						 column_type_sql(exprType((Node *) tle->expr), exprTypmod((Node *) tle->expr),
										 exprCollation((Node *) tle->expr)));
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", quote_identifier(tle->resname));
		colnames = lappend(colnames, makeString(tle->resname));
	}
	/* a transform over a changelog: one row per key of the source */
	if (c->key_columns != NIL)
		appendStringInfo(&sql, ", UNIQUE NULLS NOT DISTINCT (%s)", keyed_transform_key_list(c, ""));
	appendStringInfoChar(&sql, ')');
	spi_run(sql.data);
	CommandCounterIncrement();
	relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							 NoLock, false);

	if (c->key_columns != NIL)
		plan_add_statement(plan, STMT_BATCH, keyed_transform_sql(c, relid, cols.data, colnames));
	else
	{
		/*
		 * The batch's rows (a join's: the pairs each batch finds), appended;
		 * and the same rows alone, which op_sql.c writes with the table AM's
		 * multi-insert where the result is still a plain table.
		 */
		const char *rows = c->join == NULL ? deparse_query_qualified(c->query) : join_pairs_sql(c, c->query);

		plan_add_statement(plan, STMT_BATCH, psprintf("INSERT INTO %s (%s) %s", qualified_relname(relid),
													  cols.data, rows));
		plan_add_statement(plan, STMT_BATCH_ROWS, rows);
	}
	/* an outer join's rows without a match, the same two ways */
	if (c->key_columns == NIL && c->join != NULL && c->join->preserved >= 0)
	{
		const char *unmatched = deparse_query_qualified(c->query);

		plan_add_statement(plan, STMT_JOIN_UNMATCHED,
						   psprintf("INSERT INTO %s (%s) %s", qualified_relname(relid), cols.data, unmatched));
		plan_add_statement(plan, STMT_JOIN_UNMATCHED_ROWS, unmatched);
	}
	return relid;
}
