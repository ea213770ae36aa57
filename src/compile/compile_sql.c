/*-------------------------------------------------------------------------
 *
 * compile_sql.c
 *	  What every part of the compiler builds its SQL with: the refusal of
 *	  a query that cannot run, the names of streamwin's own columns, the
 *	  text of a column's type and of the window and key lists, and the
 *	  creation of a query's own tables in schema streamwin.
 *
 * This is the bottom of the compiler (see compile.h): the files above call
 * down into it, and it calls none of them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "catalog_access.h"
#include "compile_sql.h"
#include "spi_util.h"

/*
 * refuse
 *		Raise the error of a query that cannot run continuously
 *		(ERRCODE_FEATURE_NOT_SUPPORTED): msg, and detail and hint when not
 *		NULL, the hint saying what to write instead.
 */
void
refuse(const char *msg, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s", msg),
			 detail ? errdetail("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0));
}

/*
 * streamwin_func_oid
 *		The oid of function streamwin.name(argtypes); an error if there is
 *		none.
 */
Oid
streamwin_func_oid(const char *name, int nargs, Oid *argtypes)
{
	return LookupFuncName(list_make2(makeString("streamwin"), makeString((char *) name)),
						  nargs, argtypes, false);
}

/*
 * internal_name
 *		The name of one of streamwin's own columns in a query's tables and
 *		statements (a partial aggregate, the event time of a dedup key, a
 *		session's helper columns): base followed by tail, base cut short if
 *		that is too long for an identifier, unless a name in *taken has it
 *		already (a user's column, or another of streamwin's); then with _2,
 *		_3... after it.  Adds it to *taken.  So streamwin's columns never
 *		collide with the user's, whatever the user names them, as long as
 *		*taken holds every user name of the table or row the column goes
 *		into.
 */
char *
internal_name(List **taken, const char *base, const char *tail)
{
	for (int n = 1;; n++)
	{
		char		suffix[16] = "";
		int			len;
		char	   *name;
		ListCell   *lc;
		bool		free = true;

		if (n > 1)
			snprintf(suffix, sizeof(suffix), "_%d", n);
		len = pg_mbcliplen(base, strlen(base), NAMEDATALEN - 1 - strlen(tail) - strlen(suffix));
		name = psprintf("%.*s%s%s", len, base, tail, suffix);
		foreach(lc, *taken)
		{
			if (strcmp(lfirst(lc), name) == 0)
				free = false;
		}
		if (free)
		{
			*taken = lappend(*taken, name);
			return name;
		}
	}
}

/* See compile_sql.h */
char *
collation_qualified_name(Oid collid)
{
	HeapTuple	tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(collid));
	Form_pg_collation coll;
	char	   *name;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for collation %u", collid);
	coll = (Form_pg_collation) GETSTRUCT(tup);
	name = quote_qualified_identifier(get_namespace_name(coll->collnamespace), NameStr(coll->collname));
	ReleaseSysCache(tup);
	return name;
}

/*
 * A column's type, schema-qualified, with its collation if not the type's,
 * qualified too: the statements that use it may run with search_path
 * pinned to pg_catalog (catalog_enter), where a type or collation the
 * caller's search_path finds is not found.
 */
static char *
type_sql(Oid type, int32 typmod, Oid collation)
{
	char	   *t = format_type_extended(type, typmod, FORMAT_TYPE_TYPEMOD_GIVEN |
										 FORMAT_TYPE_FORCE_QUALIFY);

	if (OidIsValid(collation) && collation != DEFAULT_COLLATION_OID &&
		collation != get_typcollation(type))
		return psprintf("%s COLLATE %s", t, collation_qualified_name(collation));
	return t;
}

/*
 * column_type_sql
 *		A column's type as a column definition of CREATE TABLE writes it:
 *		with its typmod, and its collation if not the type's.
 */
char *
column_type_sql(Oid type, int32 typmod, Oid collation)
{
	return type_sql(type, typmod, collation);
}

/*
 * A type's name for a cast to it (or a NULL of it) in the statements,
 * without a type modifier: bpchar and bit, not character and bit, which SQL
 * reads as character(1) and bit(1) and which would cut every value to one
 * character or bit.
 */
char *
cast_type_sql(Oid type)
{
	return type_sql(type, -1, InvalidOid);
}

/*
 * The state table's columns as a column definition list, "window_start
 * pg_catalog.timestamptz, ..., "n$count" pg_catalog.int8", with qualified
 * types: how streamwin.store_rows() rows are read.
 */
char *
state_column_defs(Compiled *c)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (c->window)
		appendStringInfoString(&buf, "window_start pg_catalog.timestamptz, window_end pg_catalog.timestamptz");
	foreach(lc, c->keys)
	{
		Expr	   *e = ((KeyCol *) lfirst(lc))->tle->expr;

		appendStringInfo(&buf, "%s%s %s", buf.len ? ", " : "",
						 quote_identifier(((KeyCol *) lfirst(lc))->name),
						 type_sql(exprType((Node *) e), exprTypmod((Node *) e), exprCollation((Node *) e)));
	}
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);

		appendStringInfo(&buf, "%s%s %s", buf.len ? ", " : "", quote_identifier(p->name),
						 type_sql(exprType((Node *) p->expr), exprTypmod((Node *) p->expr),
								  exprCollation((Node *) p->expr)));
	}
	return buf.data;
}

/* "window_start, key1, key2": the conflict target of state and result. */
char *
group_columns(Compiled *c, const char *prefix)
{
	StringInfoData buf;
	ListCell   *lc;
	bool		first = true;

	initStringInfo(&buf);
	if (c->window)
	{
		appendStringInfo(&buf, "%swindow_start", prefix);
		first = false;
	}
	foreach(lc, c->keys)
	{
		appendStringInfo(&buf, "%s%s%s", first ? "" : ", ", prefix,
						 quote_identifier(((KeyCol *) lfirst(lc))->name));
		first = false;
	}
	return buf.data;
}

/* "k1, k2, " (note the trailing separator), or "" without keys */
char *
keys_list(Compiled *c, const char *prefix)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, c->keys)
		appendStringInfo(&buf, "%s%s, ", prefix, quote_identifier(((KeyCol *) lfirst(lc))->name));
	return buf.data;
}

/*
 * Create the UNLOGGED table streamwin.name (state, dedup keys) with CREATE
 * TABLE statement create_sql and, if index_sql is not NULL, an index ("%s"
 * for the table), in schema streamwin, where users cannot create tables, so
 * as the extension owner; then give it to the calling role, the query's
 * owner: batches run as the owner.  Returns the table's oid.
 */
Oid
create_query_table(const char *name, const char *create_sql, const char *index_sql)
{
	char	   *qname = quote_qualified_identifier("streamwin", name);

	/* the caller, before catalog_enter makes the extension owner current */
	char	   *owner = GetUserNameFromId(GetUserId(), false);
	RoleSwitch	role;
	Oid			relid;

	catalog_enter(&role);
	spi_run(create_sql);
	if (index_sql)
		spi_run(psprintf(index_sql, qname));
	spi_run(psprintf("ALTER TABLE %s OWNER TO %s", qname, quote_identifier(owner)));
	catalog_leave(&role);
	CommandCounterIncrement();
	relid = get_relname_relid(name, get_namespace_oid("streamwin", false));
	catalog_table_depends_on_extension(relid);
	return relid;
}

/*
 * "l OPERATOR(schema.=) r": are two values of type equal, by the equality
 * its hash table and its table's unique index use (its default operator
 * class's), named with its schema.  A batch's statements are parsed with
 * pg_catalog alone in search_path, where a bare = between two values of an
 * extension's type finds pg_catalog's = of a type it casts to: citext's
 * values compared as text, telling apart keys the type calls one.  With
 * nulls_match, NULL equals NULL too, as IS NOT DISTINCT FROM (whose = no
 * schema can name) has it.
 */
char *
equality_sql(Oid type, const char *l, const char *r, bool nulls_match)
{
	Oid			eq = lookup_type_cache(type, TYPECACHE_EQ_OPR)->eq_opr;
	HeapTuple	tup;
	char	   *op;

	if (!OidIsValid(eq))
		elog(ERROR, "streamwin: type %s has no equality operator", format_type_be(type));
	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(eq));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", eq);
	op = psprintf("OPERATOR(%s.%s)",
				  quote_identifier(get_namespace_name(((Form_pg_operator) GETSTRUCT(tup))->oprnamespace)),
				  NameStr(((Form_pg_operator) GETSTRUCT(tup))->oprname));
	ReleaseSysCache(tup);
	/* (num_nulls: a row of NULL fields IS NULL too, and is no NULL key) */
	if (nulls_match)
		return psprintf("(%s %s %s OR pg_catalog.num_nulls(%s, %s) = 2)", l, op, r, l, r);
	return psprintf("%s %s %s", l, op, r);
}

/* "a.k1 = b.k1 AND a.k2 = b.k2 ...", or "" without keys (equality_sql) */
static char *
keys_compare(Compiled *c, const char *a, const char *b, bool nulls_match)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, c->keys)
	{
		KeyCol	   *k = lfirst(lc);
		const char *n = quote_identifier(k->name);

		appendStringInfo(&buf, "%s%s", buf.len ? " AND " : "",
						 equality_sql(exprType((Node *) k->tle->expr), psprintf("%s.%s", a, n),
									  psprintf("%s.%s", b, n), nulls_match));
	}
	return buf.data;
}

/*
 * "a.k1 IS NOT DISTINCT FROM b.k1 AND ...", by each key type's own
 * equality (equality_sql), or "true" without keys
 */
char *
keys_equal(Compiled *c, const char *a, const char *b)
{
	return c->keys ? keys_compare(c, a, b, true) : "true";
}

/*
 * "a.k1 = b.k1 AND ...": the same match for rows whose keys are all non-NULL,
 * which, unlike IS NOT DISTINCT FROM, the planner can hash or look up in an
 * index.  Only with keys.
 */
char *
keys_equal_strict(Compiled *c, const char *a, const char *b)
{
	return keys_compare(c, a, b, false);
}

/* "(a.k1 IS NULL OR a.k2 IS NULL)": a key is NULL.  Only with keys. */
char *
keys_any_null(Compiled *c, const char *a)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, c->keys)
	{
		const char *n = quote_identifier(((KeyCol *) lfirst(lc))->name);

		appendStringInfo(&buf, "%s%s.%s IS NULL", buf.len ? " OR " : "(", a, n);
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * A key's type (what: "group key" or "dedup key", label: its name or
 * expression) must hash, for the store's hash table, and sort, for its
 * table's unique index.
 */
void
check_key_type(const char *what, const char *label, Oid type)
{
	TypeCacheEntry *tc;

	/* an anonymous row (ROW(a, b)) can be no table's column */
	if (get_typtype(type) == TYPTYPE_PSEUDO)
		refuse(psprintf("%s %s of type %s cannot be kept batch by batch", what, label, format_type_be(type)),
			   "Keys are kept in columns of the query's tables, which cannot have that type.",
			   "Group by each of its fields, or by a value of a named type, such as the row's text (ROW(a, b)::text).");
	tc = lookup_type_cache(type, TYPECACHE_HASH_PROC | TYPECACHE_BTREE_OPFAMILY);
	if (!OidIsValid(tc->hash_proc) || !OidIsValid(tc->btree_opf))
		refuse(psprintf("%s %s of type %s cannot be kept batch by batch", what, label, format_type_be(type)),
			   !OidIsValid(tc->hash_proc) ?
			   "Keys are kept in a hash table, and the type has no hash function." :
			   "Keys are kept in a table with a unique index on them, and the type has no ordering.",
			   "Use a cast of it to a type that has both, such as numeric or text.");
}

/* The range table index of the LATERAL hop_starts() of rewrite_hop, or 0 */
int
hop_rtindex(Query *q)
{
	int			rtindex = 0;
	ListCell   *lc;

	foreach(lc, q->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		rtindex++;
		if (rte->rtekind == RTE_FUNCTION && rte->alias &&
			strcmp(rte->alias->aliasname, HOP_ALIAS) == 0)
			return rtindex;
	}
	return 0;
}

/*
 * A time as an event time: a timestamp (without zone) cast to timestamptz,
 * in the batch's zone.  An explicit cast, which a deparsed statement
 * writes out: an implicit one is left out of the text, and a statement
 * whose rows a receiver reads as they are (a join side's new rows) would
 * give the timestamp itself, taken for one in UTC.
 */
Expr *
as_event_time(Expr *t)
{
	if (t != NULL && exprType((Node *) t) == TIMESTAMPOID)
		t = (Expr *) coerce_to_target_type(NULL, (Node *) t, TIMESTAMPOID, TIMESTAMPTZOID, -1,
										   COERCION_EXPLICIT, COERCE_EXPLICIT_CAST, -1);
	return t;
}
