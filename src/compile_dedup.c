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
#include "compile.h"
#include "statements.h"
#include "source.h"
#include "spi_util.h"

/* The source's column of that name, as an expression of the user's query. */
static Var *
source_column(Compiled *c, const char *name, const char *what)
{
	RangeTblEntry *rte = rt_fetch(c->source_rtindex, c->query->rtable);
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
			return makeVar(c->source_rtindex, attno, type, typmod, coll, 0);
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("%s \"%s\" is not a column of source \"%s\"", what, name, c->source->name)));
	return NULL;
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
		(void) source_column(c, name, "dedup key");
		foreach(lc, names)
			if (strcmp(lfirst(lc), name) == 0)
				refuse(psprintf("dedup key \"%s\" is given more than once", name), NULL, NULL);
		names = lappend(names, name);
	}
	return names;
}

/*
 * Deduplication (Spark's dropDuplicatesWithinWatermark): before the query
 * runs, a batch's rows whose keys were seen already, in this batch or an
 * earlier one still within the watermark, are dropped.  The keys seen live
 * in an UNLOGGED table (checkpointed with the rest of the state), each with
 * the event time of its first row, and leave it when the watermark passes
 * that time.  One statement inserts the first occurrence of every new key
 * and returns its position in the batch; batch.c keeps those rows only.
 * Sets the keys' table and its checkpoint table.
 */
void
dedup_statements(Compiled *c, List *keys, int32 query_id, StringInfo plan,
				 Oid *table_out, Oid *checkpoint_out)
{
	TupleDesc	desc = source_tupdesc(c->source->relation);
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

	/*
	 * The source's rows numbered: their position in the batch, in a column
	 * named apart from the source's; and the table's own columns, named
	 * apart from the keys (internal_name).
	 */
	initStringInfo(&cols);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		source_names = lappend(source_names, NameStr(att->attname));
		appendStringInfo(&cols, ", %s %s", quote_identifier(NameStr(att->attname)),
						 format_type_with_typemod(att->atttypid, att->atttypmod));
	}
	ord = quote_identifier(internal_name(&source_names, "__ord", ""));
	event_time = quote_identifier(internal_name(&table_names, "event_time", ""));
	batch_ord = quote_identifier(internal_name(&table_names, "batch_ord", ""));
	initStringInfo(&keydefs);
	initStringInfo(&keylist);
	foreach(lc, keys)
	{
		Var		   *v = source_column(c, lfirst(lc), "dedup key");

		appendStringInfo(&keydefs, "%s %s, ", quote_identifier(lfirst(lc)),
						 column_type_sql(v->vartype, v->vartypmod, v->varcollid));
		appendStringInfo(&keylist, "%s%s", keylist.len ? ", " : "", quote_identifier(lfirst(lc)));
	}
	if (c->event_time)
	{
		/* the event time over the numbered rows "s" */
		Node	   *ts = copyObject((Node *) c->event_time);

		ChangeVarNodes(ts, c->source_rtindex, 1, 0);
		ts_sql = deparse_expr_qualified(ts, deparse_context_for("s", c->source->relation));
	}

	/* NULL keys are keys too: NULLS NOT DISTINCT */
	table = create_query_table(name,
							   psprintf("CREATE UNLOGGED TABLE %s (%s%s timestamptz, %s integer NOT NULL, "
										"UNIQUE NULLS NOT DISTINCT (%s))",
										qname, keydefs.data, event_time, batch_ord, keylist.data),
							   psprintf("CREATE INDEX ON %%s (%s)", event_time));
	ckpt = checkpoint_create_table(query_id, table, psprintf("checkpoint_dedup_%d", query_id),
								   false);

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s AS d (%s, %s, %s) "
					 "SELECT DISTINCT ON (%s) %s, %s, %s "
					 "FROM streamwin.source_rows(%d, true) AS s(%s integer%s) "
					 "ORDER BY %s, %s ON CONFLICT (%s) DO NOTHING RETURNING %s",
					 qname, keylist.data, event_time, batch_ord,
					 keylist.data, keylist.data, ts_sql, ord,
					 c->source->source_id, ord, cols.data,
					 keylist.data, ord, keylist.data, batch_ord);
	plan_add_statement(plan, STMT_DEDUP, sql.data);
	if (c->event_time)
	{
		plan_add_statement(plan, STMT_DEDUP_EVICT, psprintf("DELETE FROM %s WHERE %s < $1", qname, event_time));
	}
	*table_out = table;
	*checkpoint_out = ckpt;
}
