/*-------------------------------------------------------------------------
 *
 * compile_changelog.c
 *	  Queries over a changelog source (see "Changelogs" in source.h): what
 *	  can be kept exact as rows are retracted, what cannot (refused with a
 *	  hint), and a transform's result kept by the source's key.
 *
 * A changelog's rows each carry +1 (added) or -1 (retracted) in the source's
 * change column.  An aggregation retracts exactly: its partial aggregates
 * become sums of signed values and counted sets of values
 * (compile_aggregate.c), and a group whose
 * last row is retracted leaves the state and the result.  A transform keeps
 * one result row per key of the source: a key's last change in a batch
 * writes its row or deletes it.  What cannot retract exactly what it once
 * emitted is refused: a join (the other side, or an ordinary table, may
 * have changed since), session windows (a retraction may split a session
 * that merged), deduplication, processing time (a retraction would land in
 * another batch's window), and aggregates without an exact retraction.
 *
 * Naming the change column in a transform's select list is the other way
 * to read a changelog: every change is appended to the result as a row,
 * with its +1 or -1.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"

#include "catalog_access.h"
#include "compile_changelog.h"
#include "compile_sql.h"
#include "source.h"
#include "spi_util.h"

/* Does the raw select list name the change column itself? */
static bool
selects_change_column(SelectStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);

		if (IsA(rt->val, ColumnRef))
		{
			Node	   *last = llast(((ColumnRef *) rt->val)->fields);

			if (IsA(last, String) && strcmp(strVal(last), CHANGE_COLUMN) == 0)
				return true;
		}
	}
	return false;
}

/* Is node the change column of the query's source? */
static bool
is_change_var(Compiled *c, Node *node)
{
	return node != NULL && IsA(node, Var) && ((Var *) node)->varno == c->source_rtindex &&
		((Var *) node)->varattno == c->change_attno && ((Var *) node)->varlevelsup == 0;
}

/* Walker: does the expression read the change column? */
static bool
reads_change_walker(Node *node, Compiled *c)
{
	if (node == NULL)
		return false;
	if (is_change_var(c, node))
		return true;
	return expression_tree_walker(node, reads_change_walker, c);
}

/* Walker: does the expression call streamwin.batch_timestamp() (now())? */
static bool
reads_batch_time_walker(Node *node, Oid *batch_timestamp)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr) && ((FuncExpr *) node)->funcid == *batch_timestamp)
		return true;
	return expression_tree_walker(node, reads_batch_time_walker, batch_timestamp);
}

/*
 * The functions of FROM: a grouped hop()'s arguments are there, in the
 * LATERAL streamwin.hop_starts() rewrite_hop put in its place.
 */
static Node *
from_functions(Query *q)
{
	List	   *functions = NIL;
	ListCell   *lc;

	foreach(lc, q->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind == RTE_FUNCTION)
			functions = list_concat(functions, rte->functions);
	}
	return (Node *) functions;
}

/*
 * The change column may appear in a transform's select list, by itself:
 * that appends the changes.  Anywhere else (a filter, an expression, a
 * group key, an aggregate's argument) it would let a query treat a
 * retraction as a row, and undo what the compiler does with it.
 */
static void
check_change_column_use(Compiled *c)
{
	Query	   *q = c->query;
	ListCell   *lc;

	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (is_change_var(c, (Node *) tle->expr) && !tle->resjunk && !q->hasAggs &&
			q->groupClause == NIL)
			continue;
		if (reads_change_walker((Node *) tle->expr, c))
			refuse(psprintf("column \"%s\" may only be selected by itself, in a query without GROUP BY",
							CHANGE_COLUMN),
				   "It says whether a row is added or retracted, which streamwin applies itself.",
				   "Leave it out to keep the result up to date, or select it as a column of its own to append every change as a row.");
	}
	if (reads_change_walker(q->jointree->quals, c) || reads_change_walker(q->havingQual, c))
		refuse(psprintf("column \"%s\" may not be used in WHERE or HAVING", CHANGE_COLUMN),
			   "It says whether a row is added or retracted, which streamwin applies itself.",
			   "Filter on the rows' own columns.");
	if (reads_change_walker(from_functions(q), c))
		refuse(psprintf("column \"%s\" may not be used in a window's arguments", CHANGE_COLUMN),
			   "It says whether a row is added or retracted, which streamwin applies itself: a retraction would land in another window than its row.",
			   "Window the rows by their own event time.");
}

/*
 * SELECT * names the change column too: unless the query appends the
 * changes, it is streamwin's to apply, and no column of the result.
 */
static void
drop_change_column(Compiled *c)
{
	List	   *kept = NIL;
	ListCell   *lc;

	foreach(lc, c->query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (is_change_var(c, (Node *) tle->expr))
			continue;
		tle->resno = list_length(kept) + 1;
		kept = lappend(kept, tle);
	}
	c->query->targetList = kept;
}

/* What calls_user_mutable looks for, and what it found */
typedef struct MutableSearch
{
	Oid			streamwin_ns;
	Oid			found;
} MutableSearch;

/*
 * check_functions_in_node's test: a function of the user's (not built in,
 * not streamwin's own) that is not immutable.
 */
static bool
user_mutable_function(Oid funcid, void *context)
{
	MutableSearch *search = context;

	if (funcid < FirstNormalObjectId || func_volatile(funcid) == PROVOLATILE_IMMUTABLE ||
		get_func_namespace(funcid) == search->streamwin_ns)
		return false;
	search->found = funcid;
	return true;
}

/* Does the expression call such a function? */
static bool
calls_user_mutable(Node *node, MutableSearch *search)
{
	return expr_calls_function(node, user_mutable_function, search);
}

/*
 * Over a changelog a row's retraction must compute what its addition did,
 * in a later batch: a function of the user's that is not immutable (one
 * that reads a table, say) may give it another value, so that it leaves
 * another group than it joined, or is filtered out and never leaves.  A
 * keyed transform's retraction deletes its key's result row, whatever its
 * columns held, so there only WHERE counts.  PostgreSQL's own functions are
 * replayed as batches pin what they read (the time, the zone, the
 * settings).
 */
static void
check_changelog_functions(Compiled *c)
{
	MutableSearch search = {get_namespace_oid("streamwin", false), InvalidOid};
	bool		columns_count = c->query->hasAggs || c->query->groupClause != NIL || c->append_changes;

	if (!calls_user_mutable(c->query->jointree->quals, &search) &&
		!(columns_count && calls_user_mutable((Node *) c->query->targetList, &search)) &&
		!calls_user_mutable(from_functions(c->query), &search))
		return;
	refuse(psprintf("function %s is not immutable, which a query over changelog source \"%s\" cannot call",
					format_procedure(search.found), c->source->name),
		   "A retracted row must retract exactly what it added, in a later batch, where the function may give another value (one that reads a table gives what the table holds then).",
		   "If its result depends on its arguments alone, declare it IMMUTABLE (ALTER FUNCTION, or for another extension's function a function of your own that calls it); otherwise aggregate or transform the changelog alone, and apply the function to the result table in ordinary SQL.");
}

void
check_changelog(Compiled *c, SelectStmt *raw)
{
	Oid			batch_timestamp = streamwin_func_oid("batch_timestamp", 0, NULL);
	ListCell   *lc;
	int			rtindex = 0;

	for (int i = 0; i < c->nsources; i++)
	{
		AttrNumber	attno = source_change_attno(source_tupdesc(c->sources[i]->relation));

		if (attno == 0)
			continue;
		if (c->nsources > 1)
			refuse(psprintf("source \"%s\" is a changelog, which a stream-stream join cannot read",
							c->sources[i]->name),
				   "A join would have to retract the pairs a retracted row made, with rows the other side may no longer keep.",
				   "Join the two queries' result tables in ordinary SQL, or read an append-only source.");
		c->change_attno = attno;
	}
	if (c->change_attno == 0)
		return;

	/* an ordinary table may have changed since a row was joined with it */
	foreach(lc, c->query->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		rtindex++;
		if (rte->rtekind == RTE_RELATION && rtindex != c->source_rtindex)
			refuse(psprintf("source \"%s\" is a changelog, which cannot be joined with table \"%s\"",
							c->source->name, get_rel_name(rte->relid)),
				   "A retracted row must retract exactly what it added, and the table may have changed since the row was joined with it.",
				   "Aggregate or transform the changelog alone, and join its result table with the other table in ordinary SQL.");
	}
	if (reads_batch_time_walker((Node *) c->query->targetList, &batch_timestamp) ||
		reads_batch_time_walker(c->query->jointree->quals, &batch_timestamp) ||
		reads_batch_time_walker((Node *) c->query->groupClause, &batch_timestamp) ||
		reads_batch_time_walker(from_functions(c->query), &batch_timestamp))
		refuse("processing time (now()) is not supported over a changelog source",
			   "A row's retraction comes in a later batch, whose time differs: it would retract from another window than the row added to.",
			   "Use the rows' own event time.");
	c->append_changes = selects_change_column(raw);
	check_changelog_functions(c);
	check_change_column_use(c);
	if (!c->append_changes)
		drop_change_column(c);
}

/* Walker: does the expression read a metadata column (attnos) of the source? */
static bool
reads_metadata_walker(Node *node, void *context)
{
	void	  **args = context;
	Compiled   *c = args[0];
	Bitmapset  *attnos = args[1];

	if (node == NULL)
		return false;
	if (IsA(node, Var) && ((Var *) node)->varno == c->source_rtindex &&
		((Var *) node)->varlevelsup == 0 &&
		bms_is_member(((Var *) node)->varattno, attnos))
		return true;
	if (IsA(node, Query))
		return false;			/* subqueries are refused before this */
	return expression_tree_walker(node, reads_metadata_walker, context);
}

/*
 * A table changelog's or a Debezium source's metadata columns describe the
 * change that delivered a row (the commit time of an UPDATE, the message of
 * a Debezium event), not the row: the version an update retracts carries
 * the update's metadata, not that of the change that added it.  An
 * aggregation that windowed, grouped, filtered or aggregated by one would
 * retract from another group than the row was added to; a keyed
 * transform that filtered by one would keep a row whose update its filter
 * let through neither as the old version nor as the new.  A transform may
 * select them (a keyed one shows its row's last change's), and one that
 * appends the changes read them as they come.  An upsert source, or a
 * Debezium source with key columns (SourceOps.upsert), keeps each key's
 * row with its metadata, and retracts that.
 */
static void
check_changelog_metadata(Compiled *c)
{
	const SourceOps *ops = source_ops(c->source);
	Bitmapset  *attnos = NULL;
	void	   *args[2];
	Query	   *q = c->query;

	if (c->append_changes || (ops->upsert != NULL && ops->upsert(c->source)))
		return;
	for (int m = 0; m < c->source->nmetadata; m++)
	{
		AttrNumber	a = get_attnum(c->source->relation, c->source->metadata_columns[m]);

		if (a != InvalidAttrNumber)
			attnos = bms_add_member(attnos, a);
	}
	if (attnos == NULL)
		return;
	args[0] = c;
	args[1] = attnos;
	if (!c->aggregate)
	{
		if (reads_metadata_walker(q->jointree->quals, args))
			refuse(psprintf("a transform over changelog source \"%s\" cannot filter by its metadata columns",
							c->source->name),
				   "A metadata column tells of the change that delivered a row: the old version an update retracts carries the update's metadata, so the filter would judge it by another value than the one it was added with, and the row could stay in the result.",
				   "Filter by the rows' own columns, or select the metadata and filter the result table.");
		return;
	}
	/* anywhere: select list, WHERE, JOIN ... ON, HAVING, functions in FROM */
	if (query_tree_walker(q, reads_metadata_walker, args, 0) ||
		reads_metadata_walker((Node *) c->event_time, args))
		refuse(psprintf("an aggregation over changelog source \"%s\" cannot read its metadata columns",
						c->source->name),
			   "A metadata column tells of the change that delivered a row: a row an update or delete retracts carries that change's metadata, not the metadata it was added with, and would be retracted from another group or window.",
			   "Window, group, filter and aggregate by the rows' own columns (an event time the table keeps, say), or select the metadata in a transform.");
}

/* (before the settings' own checks, whose hints would lead to this one) */
void
check_changelog_dedup(Compiled *c, bool dedup)
{
	if (c->change_attno != 0 && dedup)
		refuse(psprintf("dedup_keys are not supported over a changelog source (\"%s\")", c->source->name),
			   "Deduplication keeps a key's first row; a retracted row can take nothing back from it.",
			   "Leave dedup_keys out: a changelog's rows are changes of keyed rows already.");
}

void
check_changelog_settings(Compiled *c, OutputMode mode)
{
	if (c->change_attno == 0)
		return;
	check_changelog_metadata(c);
	if (c->window != NULL && strcmp(c->window, "session") == 0)
		refuse(psprintf("session windows are not supported over a changelog source (\"%s\")", c->source->name),
			   "Retracting a row may split a session that the row once bridged, which the sessions kept cannot undo.",
			   "Use streamwin.tumble() or streamwin.hop() windows.");
	if (!c->aggregate && !c->append_changes)
	{
		const SourceOps *ops = source_ops(c->source);

		c->key_columns = ops->key_columns != NULL ? ops->key_columns(c->source) : NIL;
		if (c->key_columns == NIL)
			refuse(psprintf("source \"%s\" has no key columns, which a transform over a changelog keeps its result by",
							c->source->name),
				   "Each of its rows is an added or retracted version of a row, told apart by its key.",
				   psprintf("Give the table a primary key (or the Kafka source the option key_columns), "
							"or select %s to append every change as a row.", CHANGE_COLUMN));
	}
}

Var *
change_var(Compiled *c)
{
	Assert(c->change_attno > 0);
	return makeVar(c->source_rtindex, c->change_attno, INT2OID, -1, InvalidOid, 0);
}

/*
 * The result column a key column of the source goes to: a select-list
 * item that is the column itself.  Refused without one: a result row
 * cannot be found again otherwise.
 */
static const char *
key_result_column(Compiled *c, const char *key)
{
	TupleDesc	desc = source_tupdesc(c->source->relation);
	ListCell   *lc;

	foreach(lc, c->query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Var		   *v = (Var *) tle->expr;

		/* (a whole-row reference, varattno 0, is no column) */
		if (tle->resjunk || !IsA(v, Var) || v->varno != c->source_rtindex || v->varlevelsup != 0 ||
			v->varattno <= 0)
			continue;
		if (strcmp(NameStr(TupleDescAttr(desc, v->varattno - 1)->attname), key) == 0)
			return tle->resname;
	}
	refuse(psprintf("a transform over changelog source \"%s\" must select its key column \"%s\"",
					c->source->name, key),
		   "Each result row is the latest version of a source row, found again by its key when it changes or goes.",
		   psprintf("Add %s to the select list.", quote_identifier(key)));
	return NULL;
}

/* The type of the source's key column key */
static Oid
key_column_type(Compiled *c, const char *key)
{
	TupleDesc	desc = source_tupdesc(c->source->relation);

	for (int a = 0; a < desc->natts; a++)
		if (!TupleDescAttr(desc, a)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(desc, a)->attname), key) == 0)
			return TupleDescAttr(desc, a)->atttypid;
	elog(ERROR, "streamwin: source \"%s\" has no column \"%s\"", c->source->name, key);
	return InvalidOid;
}

char *
keyed_transform_key_list(Compiled *c, const char *prefix)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, c->key_columns)
		appendStringInfo(&buf, "%s%s%s", buf.len ? ", " : "", prefix,
						 quote_identifier(key_result_column(c, strVal(lfirst(lc)))));
	return buf.data;
}

/*
 * The statement of a transform over a changelog: the batch's rows with
 * their change and their place in the batch; per key of the result the
 * last of them; a key whose last change retracts its row is deleted, one
 * whose last change adds a row has it written (inserted or updated).  An
 * update (its old version retracted, its new one added) thus rewrites the
 * key's row; a row added and retracted in one batch leaves nothing.  The
 * batch's rows come in order from the source's scan, which a query of one
 * source, without a join, reads as they come: their numbers follow.
 */
char *
keyed_transform_sql(Compiled *c, Oid result, const char *cols, List *colnames)
{
	Query	   *q = copyObject(c->query);
	List	   *taken = NIL;
	char	   *change_name;
	const char *change;
	const char *ord;
	char	   *keys = keyed_transform_key_list(c, "");
	char	   *rname = qualified_relname(result);
	StringInfoData match;
	StringInfoData set;
	ListCell   *lc;

	foreach(lc, colnames)
		taken = lappend(taken, strVal(lfirst(lc)));
	change_name = internal_name(&taken, "__change", "");
	change = quote_identifier(change_name);
	ord = quote_identifier(internal_name(&taken, "__ord", ""));
	q->targetList = lappend(q->targetList,
							makeTargetEntry((Expr *) change_var(c), list_length(q->targetList) + 1,
											change_name, false));
	initStringInfo(&match);
	foreach(lc, c->key_columns)
	{
		const char *k = quote_identifier(key_result_column(c, strVal(lfirst(lc))));

		appendStringInfo(&match, " AND %s",
						 equality_sql(key_column_type(c, strVal(lfirst(lc))),
									  psprintf("r.%s", k), psprintf("l.%s", k), false));
	}
	initStringInfo(&set);
	foreach(lc, colnames)
	{
		const char *n = quote_identifier(strVal(lfirst(lc)));

		appendStringInfo(&set, "%s%s = EXCLUDED.%s", set.len ? ", " : "", n, n);
	}
	return psprintf("WITH c AS MATERIALIZED (SELECT c.*, pg_catalog.row_number() OVER () AS %s FROM (%s) AS c), "
					"l AS MATERIALIZED (SELECT DISTINCT ON (%s) * FROM c ORDER BY %s, %s DESC), "
					"d AS (DELETE FROM %s AS r USING l WHERE l.%s < 0%s) "
					"INSERT INTO %s AS r (%s) SELECT %s FROM l WHERE l.%s > 0 "
					"ON CONFLICT (%s) DO UPDATE SET %s",
					ord, deparse_query_qualified(q),
					keys, keys, ord,
					rname, change, match.data,
					rname, cols, cols, change,
					keys, set.data);
}
