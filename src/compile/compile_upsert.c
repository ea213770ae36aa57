/*-------------------------------------------------------------------------
 *
 * compile_upsert.c
 *	  A query of an upsert source: the table of each key's last row, its
 *	  checkpoint, its store's plan, and the statements that do the store's
 *	  work on the table.
 *
 * An upsert source's message (a Debezium source's event, with key
 * columns) is its key's new row or the key's deletion (changelog_input.c).
 * To retract the row a key had, the query keeps each key's last row
 * (op_upsert.c): in a store (store_upsert.c) that writes
 * them by location into an UNLOGGED table, checkpointed with the rest of
 * the query's state; where they do not fit in streamwin.state_memory, on
 * that table, with the statements compiled here:
 *
 *	 rows		the batch's rows as changes, in the batch's order: for each
 *				row, the retraction of its key's row before it (the
 *				batch's row of the key before it, else the table's), as it
 *				was added, key included, then the row if it is a new version
 *	 write		the table brought to each key's last row in the batch, its
 *				key as that row gives it (1.00 after 1.0)
 *	 truncate	every key's row deleted, returned as its retraction (a
 *				Debezium source's truncate event)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "checkpoint.h"
#include "compile_sql.h"
#include "compile_upsert.h"
#include "source.h"
#include "statements.h"

/* The columns of an upsert source, as its state and statements use them. */
typedef struct UpsertColumns
{
	TupleDesc	desc;			/* the source's row type */
	List	   *keys;			/* attribute numbers of the key columns */
	List	   *values;			/* ... of the others but the change column */
	AttrNumber	change;
	char	   *rows_sql;		/* the batch's numbered rows, "s" */
	const char *ord;			/* their number's column */
} UpsertColumns;

static const char *
att_name(UpsertColumns *u, int attno)
{
	return quote_identifier(NameStr(TupleDescAttr(u->desc, attno - 1)->attname));
}

/* The key columns and the others, checked; the batch's rows as SQL. */
static void
upsert_columns(SourceInfo *src, UpsertColumns *u)
{
	List	   *key_names = source_ops(src)->key_columns(src);
	List	   *names = NIL;
	StringInfoData cols;
	ListCell   *lc;

	memset(u, 0, sizeof(UpsertColumns));
	u->desc = source_tupdesc(src->relation);
	u->change = source_change_attno(u->desc);
	foreach(lc, key_names)
	{
		for (int a = 1; a <= u->desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(u->desc, a - 1);

			if (strcmp(NameStr(att->attname), strVal(lfirst(lc))) != 0)
				continue;
			if (!OidIsValid(lookup_type_cache(att->atttypid, TYPECACHE_LT_OPR)->lt_opr))
				refuse(psprintf("key column \"%s\" of upsert source \"%s\" has type %s, which has no ordering",
								NameStr(att->attname), src->name, format_type_be(att->atttypid)),
					   "A query keeps the last row of each key in a table with a unique index on the key.",
					   "Create the source with key columns of a type such as text, bigint or uuid.");
			/* (a source made before its key columns were checked so) */
			if (!OidIsValid(lookup_type_cache(att->atttypid, TYPECACHE_HASH_PROC)->hash_proc))
				refuse(psprintf("key column \"%s\" of source \"%s\" has type %s, which cannot be hashed",
								NameStr(att->attname), src->name, format_type_be(att->atttypid)),
					   "A query keeps the last row of each key in a hash table.",
					   "Create the source with key columns of a type such as text, bigint or uuid.");
			u->keys = lappend_int(u->keys, a);
		}
	}
	if (list_length(u->keys) != list_length(key_names) || u->change == 0)
		elog(ERROR, "streamwin: upsert source \"%s\" has not the columns its options name", src->name);

	initStringInfo(&cols);
	for (int a = 1; a <= u->desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(u->desc, a - 1);

		names = lappend(names, NameStr(att->attname));
		/* with its collation: keys compare on the table as in the store */
		appendStringInfo(&cols, ", %s %s", quote_identifier(NameStr(att->attname)),
						 column_type_sql(att->atttypid, att->atttypmod, att->attcollation));
		if (a != u->change && !list_member_int(u->keys, a))
			u->values = lappend_int(u->values, a);
	}
	u->ord = quote_identifier(internal_name(&names, "__ord", ""));
	u->rows_sql = psprintf("streamwin.source_rows(%d, true) AS s(%s integer%s)",
						   src->source_id, u->ord, cols.data);
}

/* "a.k1 = b.k1 AND a.k2 = b.k2" over the key columns (equality_sql) */
static char *
upsert_keys_equal(UpsertColumns *u, const char *a, const char *b)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, u->keys)
	{
		int			attno = lfirst_int(lc);

		appendStringInfo(&buf, "%s%s", buf.len ? " AND " : "",
						 equality_sql(TupleDescAttr(u->desc, attno - 1)->atttypid,
									  psprintf("%s.%s", a, att_name(u, attno)),
									  psprintf("%s.%s", b, att_name(u, attno)), false));
	}
	return buf.data;
}

/* "p.a, p.b" over columns (a List of attribute numbers), each prefixed */
static char *
column_list(UpsertColumns *u, List *columns, const char *prefix)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, columns)
		appendStringInfo(&buf, "%s%s%s", buf.len ? ", " : "", prefix, att_name(u, lfirst_int(lc)));
	return buf.data;
}

/*
 * A row of the source's columns, in their order: the keys from relation
 * k, the others from relation v, the change column as change.
 */
static char *
source_row(UpsertColumns *u, const char *k, const char *v, const char *change)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int a = 1; a <= u->desc->natts; a++)
	{
		if (buf.len)
			appendStringInfoString(&buf, ", ");
		if (a == u->change)
			appendStringInfoString(&buf, change);
		else
			appendStringInfo(&buf, "%s.%s", list_member_int(u->keys, a) ? k : v, att_name(u, a));
	}
	return buf.data;
}

/* The statements of the store on its table (see the file header). */
static void
upsert_statements(UpsertColumns *u, const char *qname, int32 query_id, StringInfo plan)
{
	List	   *taken = NIL;
	const char *prev;
	const char *change = att_name(u, u->change);
	char	   *keys = column_list(u, u->keys, "s.");
	char	   *stored = column_list(u, list_concat_copy(u->keys, u->values), "");
	StringInfoData set;
	ListCell   *lc;
	char	   *index = psprintf("upsert_%d_keys", query_id);

	for (int a = 1; a <= u->desc->natts; a++)
		taken = lappend(taken, NameStr(TupleDescAttr(u->desc, a - 1)->attname));
	prev = quote_identifier(internal_name(&taken, "__prev", ""));

	plan_add_statement(plan, STMT_UPSERT_ROWS,
					   psprintf("WITH b AS (SELECT s.*, pg_catalog.lag(s.%s) OVER (PARTITION BY %s ORDER BY s.%s) AS %s FROM %s) "
								"SELECT %s, b.%s, 0 FROM b JOIN b AS p ON p.%s = b.%s WHERE p.%s > 0 "
								"UNION ALL SELECT %s, b.%s, 0 FROM b JOIN %s AS t ON %s WHERE b.%s IS NULL "
								"UNION ALL SELECT %s, b.%s, 1 FROM b WHERE b.%s > 0 "
								"ORDER BY %d, %d",
								u->ord, keys, u->ord, prev, u->rows_sql,
								source_row(u, "p", "p", "'-1'::pg_catalog.int2"), u->ord, u->ord, prev, change,
								source_row(u, "t", "t", "'-1'::pg_catalog.int2"), u->ord, qname,
								upsert_keys_equal(u, "t", "b"), prev,
								source_row(u, "b", "b", change), u->ord, change,
								u->desc->natts + 1, u->desc->natts + 2));

	/*
	 * The key columns too: a new row whose key is another form of the
	 * stored one (1.00 for 1.0) keeps its key as it gives it, which its
	 * retraction then takes back (the rows above), as in memory
	 * (store_upsert).
	 */
	initStringInfo(&set);
	foreach(lc, list_concat_copy(u->keys, u->values))
		appendStringInfo(&set, "%s%s = EXCLUDED.%s", set.len ? ", " : "",
						 att_name(u, lfirst_int(lc)), att_name(u, lfirst_int(lc)));
	plan_add_statement(plan, STMT_UPSERT_WRITE,
					   psprintf("WITH last AS (SELECT DISTINCT ON (%s) s.* FROM %s ORDER BY %s, s.%s DESC), "
								"gone AS (DELETE FROM %s AS t USING last WHERE %s AND last.%s < 0) "
								"INSERT INTO %s (%s) SELECT %s FROM last WHERE %s > 0 "
								"ON CONFLICT (%s) DO %s",
								keys, u->rows_sql, keys, u->ord,
								qname, upsert_keys_equal(u, "t", "last"), change,
								qname, stored, stored, change,
								column_list(u, u->keys, ""), psprintf("UPDATE SET %s", set.data)));
	plan_add_statement(plan, STMT_UPSERT_COUNT, psprintf("SELECT pg_catalog.count(*) FROM %s", qname));
	plan_add_statement(plan, STMT_UPSERT_TRUNCATE,
					   psprintf("DELETE FROM %s AS t RETURNING %s", qname,
								source_row(u, "t", "t", "'-1'::pg_catalog.int2")));
	plan_add_statement(plan, STMT_UPSERT_INDEX,
					   psprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s (%s)",
								quote_identifier(index), qname, column_list(u, u->keys, "")));
	plan_add_statement(plan, STMT_UPSERT_UNINDEX,
					   psprintf("DROP INDEX IF EXISTS %s", quote_qualified_identifier("streamwin", index)));
}

/* The store's plan: the key columns, then the others, each its last value. */
static void
upsert_store_plan(UpsertColumns *u, StringInfo plan)
{
	StorePlan	sp;

	memset(&sp, 0, sizeof(sp));
	sp.rows_partial = -1;		/* its keys leave on a delete, not by a count */
	sp.nkeys = list_length(u->keys);
	sp.npartials = list_length(u->values);
	sp.merge = palloc(sizeof(MergeKind) * Max(sp.npartials, 1));
	sp.aggregate = palloc0(sizeof(char *) * Max(sp.npartials, 1));
	for (int i = 0; i < sp.npartials; i++)
		sp.merge[i] = MERGE_LAST;
	appendStringInfoString(plan, ", \"upsert_store\": ");
	store_plan_json(&sp, plan);
}

void
upsert_objects(Compiled *c, int32 query_id, StringInfo plan)
{
	int			side = -1;
	SourceInfo *src;
	UpsertColumns u;
	StringInfoData defs;
	ListCell   *lc;
	char	   *name = psprintf("upsert_%d", query_id);
	char	   *ckpt_name = psprintf("checkpoint_upsert_%d", query_id);
	char	   *qname = quote_qualified_identifier("streamwin", name);
	Oid			table;

	for (int i = 0; i < c->nsources; i++)
		if (source_ops(c->sources[i])->upsert != NULL &&
			source_ops(c->sources[i])->upsert(c->sources[i]))
			side = i;
	if (side < 0)
		return;
	src = c->sources[side];
	if (c->nsources > 1)
		refuse(psprintf("a join cannot read upsert source \"%s\"", src->name),
			   "Each row of an upsert source stands until a later message of its key replaces or deletes it, which rows the join paired already cannot follow.",
			   "Read the upsert source in a query of its own.");
	upsert_columns(src, &u);

	initStringInfo(&defs);
	foreach(lc, list_concat_copy(u.keys, u.values))
	{
		Form_pg_attribute att = TupleDescAttr(u.desc, lfirst_int(lc) - 1);

		appendStringInfo(&defs, "%s%s %s", defs.len ? ", " : "", quote_identifier(NameStr(att->attname)),
						 column_type_sql(att->atttypid, att->atttypmod, att->attcollation));
	}
	table = create_query_table(name, psprintf("CREATE UNLOGGED TABLE %s (%s)", qname, defs.data), NULL);
	(void) checkpoint_create_table(query_id, table, ckpt_name, true);

	appendStringInfo(plan, ", \"upsert_side\": %d, \"upsert_table\": ", side);
	escape_json(plan, name);
	appendStringInfoString(plan, ", \"upsert_checkpoint\": ");
	escape_json(plan, ckpt_name);
	upsert_store_plan(&u, plan);
	upsert_statements(&u, qname, query_id, plan);
}
