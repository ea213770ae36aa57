/*-------------------------------------------------------------------------
 *
 * compile_tables.c
 *	  The tables of a continuous query: its result table (the user's, in
 *	  the query's schema, owned by its creator) and its UNLOGGED state
 *	  table (in schema streamwin).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/varlena.h"

#include "catalog.h"
#include "compile.h"
#include "statements.h"
#include "spi_util.h"


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

/* A column's type (schema-qualified if asked), with its collation if not the type's */
static char *
type_sql(Oid type, int32 typmod, Oid collation, bool qualified)
{
	char	   *t = format_type_extended(type, typmod, FORMAT_TYPE_TYPEMOD_GIVEN |
										 (qualified ? FORMAT_TYPE_FORCE_QUALIFY : 0));

	if (OidIsValid(collation) && collation != DEFAULT_COLLATION_OID &&
		collation != get_typcollation(type))
		return psprintf("%s COLLATE %s", t, generate_collation_name(collation));
	return t;
}

char *
column_type_sql(Oid type, int32 typmod, Oid collation)
{
	return type_sql(type, typmod, collation, false);
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
						 type_sql(exprType((Node *) e), exprTypmod((Node *) e), exprCollation((Node *) e), true));
	}
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);

		appendStringInfo(&buf, "%s%s %s", buf.len ? ", " : "", quote_identifier(p->name),
						 type_sql(exprType((Node *) p->expr), exprTypmod((Node *) p->expr),
								  exprCollation((Node *) p->expr), true));
	}
	return buf.data;
}

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

/* Create the result table of an aggregation, as the calling role. */
Oid
create_result_table(Compiled *c, const char *name)
{
	StringInfoData sql;
	ListCell   *lc;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", quote_name_text(name));
	append_group_column_defs(&sql, c);
	foreach(lc, c->aggs)
	{
		AggCol	   *a = lfirst(lc);

		appendStringInfo(&sql, "%s %s, ", quote_identifier(a->name),
						 column_type_sql(a->type, a->typmod, a->collation));
	}

	/*
	 * One row per window and group.  Not a primary key: group keys may be
	 * NULL (a JSON key missing from a message), and as in GROUP BY, NULL is a
	 * group of its own; NULLS NOT DISTINCT makes it one row.
	 */
	appendStringInfo(&sql, "UNIQUE NULLS NOT DISTINCT (%s))", group_columns(c, ""));
	spi_run(sql.data);
	CommandCounterIncrement();
	return RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							NoLock, false);
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

/* The UNLOGGED state table of an aggregation: open windows' partial aggregates. */
Oid
create_state_table(Compiled *c, int32 query_id)
{
	StringInfoData sql;
	ListCell   *lc;
	char	   *name = psprintf("state_%d", query_id);
	char	   *qname = quote_qualified_identifier("streamwin", name);

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE UNLOGGED TABLE %s (", qname);
	append_group_column_defs(&sql, c);
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);

		appendStringInfo(&sql, "%s %s, ", quote_identifier(p->name),
						 column_type_sql(exprType((Node *) p->expr), exprTypmod((Node *) p->expr),
										 exprCollation((Node *) p->expr)));
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
	return create_query_table(name, sql.data, NULL);
}


Oid
create_transform_table(Compiled *c, const char *name, StringInfo plan)
{
	StringInfoData sql;
	StringInfoData cols;
	ListCell   *lc;
	List	   *names = NIL;
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
		appendStringInfo(&sql, "%s%s %s", cols.len ? ", " : "", quote_identifier(tle->resname),
						 column_type_sql(exprType((Node *) tle->expr), exprTypmod((Node *) tle->expr),
										 exprCollation((Node *) tle->expr)));
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", quote_identifier(tle->resname));
	}
	appendStringInfoChar(&sql, ')');
	spi_run(sql.data);
	CommandCounterIncrement();
	relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							 NoLock, false);

	if (c->join == NULL)
		plan_add_statement(plan, STMT_BATCH, psprintf("INSERT INTO %s (%s) %s", qualified_relname(relid),
													  cols.data, deparse_query_qualified(c->query)));
	else
	{
		/* the pairs each batch finds; an outer join's rows without a match */
		plan_add_statement(plan, STMT_BATCH, psprintf("INSERT INTO %s (%s) %s", qualified_relname(relid),
													  cols.data, join_pairs_sql(c, c->query)));
		if (c->join->preserved >= 0)
			plan_add_statement(plan, STMT_JOIN_UNMATCHED,
							   psprintf("INSERT INTO %s (%s) %s", qualified_relname(relid), cols.data,
										deparse_query_qualified(c->query)));
	}
	return relid;
}
