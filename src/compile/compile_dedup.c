/*-------------------------------------------------------------------------
 *
 * compile_dedup.c
 *	  The event time of a query without a window (option event_time), and
 *	  deduplication (dedup_keys): its UNLOGGED table of keys seen and the
 *	  statements that fill and evict it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"

#include "checkpoint.h"
#include "compile_dedup.h"
#include "compile_sql.h"
#include "source.h"
#include "spi_util.h"
#include "state_store.h"
#include "statements.h"

/* Source side's column of that name, as an expression of the user's query. */
static Var *
side_column(Compiled *c, int side, const char *name)
{
	RangeTblEntry *rte = rt_fetch(c->source_rtindexes[side], c->query->rtable);
	int			attno = 0;
	ListCell   *lc;
	Oid			type;
	int32		typmod;
	Oid			coll;

	foreach(lc, rte->eref->colnames)
	{
		attno++;
		if (strcmp(strVal(lfirst(lc)), name) == 0)
		{
			get_atttypetypmodcoll(rte->relid, attno, &type, &typmod, &coll);
			return makeVar(c->source_rtindexes[side], attno, type, typmod, coll, 0);
		}
	}
	return NULL;
}

/* The source's column of that name (side: dedup_side), or an error. */
static Var *
source_column(Compiled *c, const char *name, const char *what)
{
	Var		   *v = side_column(c, c->dedup_side, name);

	if (v == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s \"%s\" is not a column of source \"%s\"", what, name,
						c->sources[c->dedup_side]->name)));
	return v;
}

/*
 * In a join, the side whose rows a dedup key names: "alias.column" (or the
 * source's name before the dot), or a column only one side has.  Returns
 * the column's name.
 */
static char *
dedup_key_side(Compiled *c, const char *key, int *side)
{
	const char *dot = strchr(key, '.');
	int			found = -1;

	if (dot != NULL)
	{
		char	   *qual = pnstrdup(key, dot - key);

		for (int s = 0; s < c->nsources; s++)
		{
			RangeTblEntry *rte = rt_fetch(c->source_rtindexes[s], c->query->rtable);

			if (strcmp(rte->eref->aliasname, qual) == 0 || strcmp(c->sources[s]->name, qual) == 0)
				found = s;
		}
		if (found < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("dedup key \"%s\" names no source of the join", key),
					 errhint("Qualify a dedup key with the alias of one of the joined sources, for example i.imp_id.")));
		*side = found;
		return pstrdup(dot + 1);
	}
	for (int s = 0; s < c->nsources; s++)
		if (side_column(c, s, key) != NULL)
		{
			if (found >= 0)
				ereport(ERROR,
						(errcode(ERRCODE_AMBIGUOUS_COLUMN),
						 errmsg("dedup key \"%s\" is a column of both joined sources", key),
						 errhint("Qualify it with the alias of the source whose rows are deduplicated, for example i.%s.", key)));
			found = s;
		}
	*side = found < 0 ? 0 : found;
	return (char *) key;
}

/* options.event_time: the event time of a query without a window */
Expr *
source_column_expr(Compiled *c, const char *name)
{
	Var		   *v = source_column(c, name, "event_time");
	Node	   *ts = coerce_to_target_type(NULL, (Node *) v, v->vartype, TIMESTAMPTZOID, -1,
										   COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);

	if (ts == NULL)
		refuse(psprintf("event_time column \"%s\" is of type %s, not a timestamp", name,
						format_type_be(v->vartype)),
			   NULL, "Name a timestamptz or timestamp column of the source.");
	return (Expr *) ts;
}

/* dedup_keys: distinct columns of the source */
List *
dedup_key_names(Compiled *c, ArrayType *arr)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	List	   *names = NIL;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		refuse("dedup_keys must name at least one column", NULL,
			   "Leave dedup_keys NULL to keep every row.");
	for (int i = 0; i < n; i++)
	{
		char	   *name;
		ListCell   *lc;

		if (nulls[i])
			refuse("dedup_keys must not contain NULL", NULL, NULL);
		name = TextDatumGetCString(elems[i]);
		if (c->nsources > 1)
		{
			int			side;

			name = dedup_key_side(c, name, &side);
			if (i > 0 && side != c->dedup_side)
				refuse("dedup_keys must name columns of one source",
					   "Deduplication drops a source's repeated rows before the join; each row is compared with that source's rows only.",
					   "Name the columns of one source, qualified with its alias, for example '{i.imp_id}'.");
			c->dedup_side = side;
		}
		check_key_type("dedup key", quote_identifier(name), source_column(c, name, "dedup key")->vartype);
		foreach(lc, names)
		{
			if (strcmp(lfirst(lc), name) == 0)
				refuse(psprintf("dedup key \"%s\" is given more than once", name), NULL, NULL);
		}
		names = lappend(names, name);
	}
	return names;
}

/*
 * The dedup keys' store: its plan, the statement of the rows it takes
 * (rows_sql), and the table's indexes for the SQL statements: keys are
 * looked up by value and deleted by event time (none without one).
 */
static void
dedup_store_statements(List *keys, int32 query_id, StringInfo plan,
					   const char *qname, const char *keylist, const char *event_time,
					   bool has_time, const char *rows_sql)
{
	StorePlan	sp;
	MergeKind	merge[2] = {MERGE_FIRST, MERGE_FIRST};
	char	   *aggregate[2] = {NULL, NULL};
	char	   *keys_index = psprintf("dedup_%d_keys", query_id);
	char	   *times_index = psprintf("dedup_%d_times", query_id);

	memset(&sp, 0, sizeof(sp));
	sp.nkeys = list_length(keys);
	sp.dedup = true;
	sp.npartials = 2;			/* batch_ord, batch_id */
	sp.rows_partial = -1;
	sp.merge = merge;
	sp.aggregate = aggregate;
	appendStringInfoString(plan, ", \"dedup_store\": ");
	store_plan_json(&sp, plan);
	plan_add_statement(plan, STMT_DEDUP_ROWS, rows_sql);
	plan_add_statement(plan, STMT_DEDUP_INDEX,
					   psprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s (%s) NULLS NOT DISTINCT%s",
								quote_identifier(keys_index), qname, keylist,
								has_time ? psprintf("; CREATE INDEX IF NOT EXISTS %s ON %s (%s)",
													quote_identifier(times_index), qname,
													event_time) : ""));
	plan_add_statement(plan, STMT_DEDUP_UNINDEX,
					   psprintf("DROP INDEX IF EXISTS %s, %s",
								quote_qualified_identifier("streamwin", keys_index),
								quote_qualified_identifier("streamwin", times_index)));
}

/*
 * Deduplication (Spark's dropDuplicatesWithinWatermark): before the query
 * runs, a batch's rows whose keys were seen already, in this batch or an
 * earlier one still within the watermark, are dropped.  The keys seen live
 * in a store (state_store.h) and in its UNLOGGED table (checkpointed with
 * the rest of the state), each with the event time of its first row, and
 * leave them when the watermark passes that time.  One statement gives the
 * batch's rows with their keys, event time and position to the store,
 * which keeps the first row of every new key; batch.c keeps those rows
 * only.  When the keys do not fit in memory, one statement inserts the
 * first occurrence of every new key into the table and returns its
 * position, and another deletes the keys the watermark passed.  Sets the
 * keys' table and its checkpoint table.
 */
void
dedup_statements(Compiled *c, List *keys, int32 query_id, StringInfo plan,
				 Oid *table_out, Oid *checkpoint_out)
{
	SourceInfo *src = c->sources[c->dedup_side];
	int			rtindex = c->source_rtindexes[c->dedup_side];
	/* (a join side's time as written, which may be a timestamp without zone) */
	Expr	   *row_time = c->join ? as_event_time(c->join->time[c->dedup_side]) : c->event_time;
	TupleDesc	desc = source_tupdesc(src->relation);
	StringInfoData cols;
	StringInfoData keydefs;
	StringInfoData keylist;
	StringInfoData sql;
	ListCell   *lc;
	char	   *name = psprintf("dedup_%d", query_id);
	char	   *qname = quote_qualified_identifier("streamwin", name);
	char	   *ts_sql = "NULL::pg_catalog.timestamptz";
	Oid			table;
	Oid			ckpt;
	List	   *source_names = NIL;
	List	   *table_names = list_copy(keys);
	const char *ord;
	const char *event_time;
	const char *batch_ord;
	const char *batch_id;
	const char *event_time_name;
	char	   *rows_sql;

	/*
	 * The source's rows numbered: their position in the batch, in a column
	 * named apart from the source's; and the table's own columns, named apart
	 * from the keys (internal_name).
	 */
	initStringInfo(&cols);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		source_names = lappend(source_names, NameStr(att->attname));
		/* with its collation: DISTINCT ON compares keys as the store does */
		appendStringInfo(&cols, ", %s %s", quote_identifier(NameStr(att->attname)),
						 column_type_sql(att->atttypid, att->atttypmod, att->attcollation));
	}
	ord = quote_identifier(internal_name(&source_names, "__ord", ""));
	event_time_name = internal_name(&table_names, "event_time", "");
	event_time = quote_identifier(event_time_name);
	batch_ord = quote_identifier(internal_name(&table_names, "batch_ord", ""));
	batch_id = internal_name(&table_names, "batch_id", "");
	initStringInfo(&keydefs);
	initStringInfo(&keylist);
	foreach(lc, keys)
	{
		Var		   *v = source_column(c, lfirst(lc), "dedup key");

		appendStringInfo(&keydefs, "%s %s, ", quote_identifier(lfirst(lc)),
						 column_type_sql(v->vartype, v->vartypmod, v->varcollid));
		appendStringInfo(&keylist, "%s%s", keylist.len ? ", " : "", quote_identifier(lfirst(lc)));
	}
	if (row_time)
	{
		/* the event time over the numbered rows "s" */
		Node	   *ts = copyObject((Node *) row_time);

		ChangeVarNodes(ts, rtindex, 1, 0);

		/*
		 * As a timestamptz, explicitly: the parser's implicit cast of a
		 * timestamp or date column is left out of the text, and the store
		 * reads the value as a timestamptz
		 */
		ts_sql = psprintf("(%s)::pg_catalog.timestamptz",
						  deparse_expr_qualified(ts, deparse_context_for("s", src->relation)));
	}

	/*
	 * The store writes the table by row location and looks nothing up in it,
	 * so it has no index, each of which would cost an insertion per key;
	 * STMT_DEDUP_INDEX makes those the SQL statements need (NULL keys are
	 * keys too: NULLS NOT DISTINCT).  Each key has the batch that saw it
	 * first: a key is written once and forgotten by its event time, so
	 * without the store a checkpoint adds the keys of the batches since the
	 * last one and deletes those the watermark passed since, writing what
	 * changed rather than every key (checkpoint_take).  That column has no
	 * index: such a checkpoint reads the UNLOGGED table once, which costs
	 * less than an index insertion for every key of every batch.
	 */
	table = create_query_table(name,
							   psprintf("CREATE UNLOGGED TABLE %s (%s%s timestamptz, %s integer NOT NULL, "
										"%s bigint NOT NULL)",
										qname, keydefs.data, event_time, batch_ord,
										quote_identifier(batch_id)),
							   NULL);
	ckpt = checkpoint_create_table(query_id, table, psprintf("checkpoint_dedup_%d", query_id),
								   true);
	appendStringInfoString(plan, ", \"dedup_batch_column\": ");
	escape_json(plan, batch_id);
	if (row_time)
	{
		checkpoint_index_table(query_id, ckpt, event_time);
		appendStringInfoString(plan, ", \"dedup_time_column\": ");
		escape_json(plan, event_time_name);
	}

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s AS d (%s, %s, %s, %s) "
					 "SELECT DISTINCT ON (%s) %s, %s, %s, $1 "
					 "FROM streamwin.source_rows(%d, true) AS s(%s integer%s) "
					 "ORDER BY %s, %s ON CONFLICT (%s) DO NOTHING RETURNING %s",
					 qname, keylist.data, event_time, batch_ord, quote_identifier(batch_id),
					 keylist.data, keylist.data, ts_sql, ord,
					 src->source_id, ord, cols.data,
					 keylist.data, ord, keylist.data, batch_ord);
	plan_add_statement(plan, STMT_DEDUP, sql.data);
	if (row_time)
	{
		plan_add_statement(plan, STMT_DEDUP_EVICT, psprintf("DELETE FROM %s WHERE %s < $1", qname, event_time));
	}
	rows_sql = psprintf("SELECT %s, %s, %s FROM streamwin.source_rows(%d, true) AS s(%s integer%s)",
						keylist.data, ts_sql, ord, src->source_id, ord, cols.data);
	dedup_store_statements(keys, query_id, plan, qname, keylist.data, event_time,
						   row_time != NULL, rows_sql);
	*table_out = table;
	*checkpoint_out = ckpt;
}
