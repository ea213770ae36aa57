/*-------------------------------------------------------------------------
 *
 * compile_aggregate.c
 *	  Each aggregate of a continuous query as partial aggregates, kept per
 *	  open group in the state table and merged batch by batch, and its
 *	  final value computed from them.
 *
 * count, sum, avg (a sum and a count), min, max, bool_and/every and
 * bool_or keep plain values and merge in SQL; agg(DISTINCT x) keeps the
 * sorted set of the distinct values of x (src/store/distinct_set.c); any other
 * aggregate with a combine function keeps its transition state as bytea
 * (src/store/aggregate_state.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"

#include "aggregate_state.h"
#include "compile_aggregate.h"
#include "compile_sql.h"


static char *
agg_name(Aggref *a)
{
	return get_func_name(a->aggfnoid);
}

static Aggref *
partial_agg(Aggref *orig, const char *fname, Oid argtype)
{
	Aggref	   *a = copyObject(orig);
	Oid			argtypes[1] = {argtype};

	a->aggfnoid = LookupFuncName(list_make2(makeString("pg_catalog"), makeString((char *) fname)),
								 1, argtypes, false);
	a->aggtype = get_func_rettype(a->aggfnoid);
	a->aggcollid = InvalidOid;
	return a;
}

/*
 * Whether two partial aggregates compute the same value from every row:
 * the same aggregate over equal arguments, collation and FILTER (its
 * result and argument types follow from those).  The parser's bookkeeping
 * (aggno, aggtransno, location) does not count.
 */
static bool
same_partial(const Aggref *a, const Aggref *b)
{
	return a->aggfnoid == b->aggfnoid &&
		a->inputcollid == b->inputcollid &&
		a->aggstar == b->aggstar &&
		equal(a->args, b->args) &&
		equal(a->aggfilter, b->aggfilter) &&
		equal(a->aggdistinct, b->aggdistinct);
}

/*
 * A partial aggregate column "<result column>$<kind>", named apart from the
 * group keys and the other partials (internal_name).  A partial the query
 * already has (sum(v) beside avg(v)'s sum, count(v) beside its count) is
 * kept once, and returned: a group, its state row and its checkpoint row
 * are smaller by it, and each row folds one value less.
 */
static PartialCol *
add_partial(Compiled *c, const char *aggname, const char *suffix, MergeKind merge, Aggref *a)
{
	PartialCol *p;
	ListCell   *lc;

	foreach(lc, c->partials)
	{
		p = lfirst(lc);
		if (p->merge == merge && same_partial((Aggref *) p->expr, a))
			return p;
	}
	p = palloc(sizeof(PartialCol));
	p->name = internal_name(&c->state_names, aggname, psprintf("$%s", suffix));
	p->merge = merge;
	p->expr = (Expr *) a;
	p->aggfnoid = InvalidOid;
	c->partials = lappend(c->partials, p);
	return p;
}

/* The quoted name of add_partial's partial. */
static const char *
add_partial_name(Compiled *c, const char *aggname, const char *suffix, MergeKind merge, Aggref *a)
{
	return quote_identifier(add_partial(c, aggname, suffix, merge, a)->name);
}

/* 'schema.agg(types)'::pg_catalog.regprocedure: an aggregate named in SQL */
static char *
aggregate_literal(Oid aggfnoid)
{
	return psprintf("%s::pg_catalog.regprocedure",
					quote_literal_cstr(format_procedure_qualified(aggfnoid)));
}

/*
 * An aggregate other than the built-in ones merged in SQL: its partial
 * state must be one streamwin.partial_state and friends can keep (the
 * same check they make), and the owner, who runs the batches, must be
 * able to execute it.
 */
static void
check_partial_state(Aggref *a, const char *fname)
{
	const char *detail;
	const char *hint;

	if (!partial_state_supported(a->aggfnoid, &detail, &hint))
		refuse(psprintf("aggregate %s() is not supported in continuous queries", fname), detail, hint);
	/* the batches call it as the owner: say so now rather than at every batch */
	if (pg_proc_aclcheck(a->aggfnoid, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for aggregate %s", fname),
				 errhint("The query's owner needs EXECUTE on the aggregate.")));
}

/*
 * streamwin.partial_state('agg'::regprocedure, args...) in place of agg(args...):
 * the same rows, filter and collation, giving agg's transition state.
 */
static Aggref *
partial_state_agg(Aggref *orig)
{
	Aggref	   *a = copyObject(orig);
	Oid			argtypes[2] = {REGPROCEDUREOID, ANYOID};
	Const	   *name = makeConst(REGPROCEDUREOID, -1, InvalidOid, sizeof(Oid),
								 ObjectIdGetDatum(orig->aggfnoid), false, true);
	ListCell   *lc;

	foreach(lc, a->args)
		lfirst_node(TargetEntry, lc)->resno++;
	a->args = lcons(makeTargetEntry((Expr *) name, 1, NULL, false), a->args);
	a->aggargtypes = lcons_oid(REGPROCEDUREOID, a->aggargtypes);
	a->aggfnoid = LookupFuncName(list_make2(makeString("streamwin"), makeString("partial_state")),
								 2, argtypes, false);
	a->aggtype = BYTEAOID;
	a->aggcollid = InvalidOid;
	return a;
}

/*
 * agg(DISTINCT x), exactly: the partial is streamwin.distinct_set(x) with
 * the same filter, the sorted distinct values of the batch's group, merged
 * with the stored ones by sorted union (streamwin.distinct_union, which
 * also merges panes and sessions); the final value is agg over that set.
 * The state grows with the distinct values of each open group, as it must
 * for an exact answer (approx_count_distinct keeps 16 kB at most).
 */
static void
compile_distinct_aggregate(Compiled *c, AggCol *col, Aggref *a, const char *fname)
{
	Aggref	   *set = copyObject(a);
	Oid			argtype;
	Oid			arraytype;
	Oid			anynonarray[1] = {ANYNONARRAYOID};
	const char *qset;

	if (list_length(a->args) != 1)
		refuse(psprintf("%s(DISTINCT ...) of %d arguments is not supported in continuous queries",
						fname, list_length(a->args)),
			   "Only aggregates of one argument keep their distinct values batch by batch.",
			   "Keep array_agg(DISTINCT value) instead, and combine its elements when reading the result "
			   "(for string_agg, with array_to_string()).");
	argtype = exprType((Node *) linitial_node(TargetEntry, a->args)->expr);
	arraytype = get_array_type(argtype);
	if (get_typtype(argtype) == TYPTYPE_PSEUDO)
		refuse(psprintf("%s(DISTINCT ...) over type %s is not supported in continuous queries",
						fname, format_type_be(argtype)),
			   "The distinct values are kept in a column of the state table, which cannot have that type.",
			   "Apply DISTINCT to a value of a named type, such as the row's text (ROW(a, b)::text).");
	if (type_is_array(argtype) || !OidIsValid(arraytype))
		refuse(psprintf("%s(DISTINCT ...) over type %s is not supported in continuous queries",
						fname, format_type_be(argtype)),
			   "The distinct values are kept in an array, which cannot hold arrays of different sizes.",
			   "Apply DISTINCT to a scalar form of the value, such as its text (value::text).");

	set->aggfnoid = streamwin_func_oid("distinct_set", 1, anynonarray);
	set->aggtype = arraytype;
	set->aggargtypes = list_make1_oid(argtype);
	set->aggstar = false;
	set->aggdistinct = NIL;		/* the aggregate drops duplicates itself */
	qset = add_partial_name(c, col->name, "distinct", MERGE_UNION, set);
	if (a->aggfnoid == F_COUNT_ANY)
	{
		/* the set's size, less its NULL (sorted last), without a subquery */
		col->final_sql = psprintf("CASE WHEN %s[pg_catalog.cardinality(%s)] IS NULL "
								  "THEN GREATEST(pg_catalog.cardinality(%s) - 1, 0) "
								  "ELSE pg_catalog.cardinality(%s) END",
								  qset, qset, qset, qset);
		return;
	}
	col->final_sql = psprintf("(SELECT %s(v) FROM pg_catalog.unnest(%s) AS u(v))",
							  quote_qualified_identifier(get_namespace_name(get_func_namespace(a->aggfnoid)),
														 fname),
							  qset);
}

/*
 * Map one aggregate of the user's query to partial aggregates (merged
 * batch by batch in the state table) and a final expression over them.
 */
void
compile_aggregate(Compiled *c, TargetEntry *tle)
{
	Aggref	   *a = (Aggref *) tle->expr;
	const char *fname = agg_name(a);
	const char *builtin;
	AggCol	   *col = palloc0(sizeof(AggCol));
	const char *qsum;
	const char *qcount;

	if (a->aggkind != AGGKIND_NORMAL || a->aggdirectargs != NIL)
		refuse("ordered-set and hypothetical-set aggregates are not supported in continuous queries",
			   "Their results cannot be merged batch by batch from partial results.",
			   "For percentiles use streamwin.approx_percentile(value, fraction), which merges batch by batch.");
	if (a->aggorder != NIL)
		refuse("aggregates with ORDER BY are not supported in continuous queries", NULL, NULL);

	col->name = tle->resname;
	col->type = a->aggtype;
	col->typmod = -1;

	/* DISTINCT ones; built-ins that merge in plain SQL; any other */
	builtin = get_func_namespace(a->aggfnoid) == PG_CATALOG_NAMESPACE ? fname : "";
	if (a->aggdistinct != NIL)
		compile_distinct_aggregate(c, col, a, fname);
	else if (strcmp(builtin, "count") == 0)
	{
		col->final_sql = pstrdup(add_partial_name(c, col->name, "count", MERGE_ADD, copyObject(a)));
	}
	else if (strcmp(builtin, "sum") == 0 || strcmp(builtin, "min") == 0 ||
			 strcmp(builtin, "max") == 0 || strcmp(builtin, "bool_and") == 0 ||
			 strcmp(builtin, "every") == 0 || strcmp(builtin, "bool_or") == 0)
	{
		MergeKind	m;

		m = strcmp(builtin, "sum") == 0 ? MERGE_SUM :
			strcmp(builtin, "min") == 0 ? MERGE_MIN :
			strcmp(builtin, "max") == 0 ? MERGE_MAX :
			strcmp(builtin, "bool_or") == 0 ? MERGE_OR : MERGE_AND;
		col->final_sql = pstrdup(add_partial_name(c, col->name, fname, m, copyObject(a)));
	}
	else if (strcmp(builtin, "avg") == 0)
	{
		TargetEntry *arg = linitial_node(TargetEntry, a->args);
		Oid			argtype = exprType((Node *) arg->expr);
		Aggref	   *sum;

		if (argtype != INT2OID && argtype != INT4OID && argtype != INT8OID &&
			argtype != NUMERICOID && argtype != FLOAT4OID && argtype != FLOAT8OID &&
			argtype != INTERVALOID)
			refuse(psprintf("avg(%s) is not supported in continuous queries", format_type_be(argtype)),
				   NULL, "Use avg over a numeric, floating-point or interval expression.");
		if (argtype == FLOAT4OID)
		{
			/* like avg(real) itself, accumulate in double precision */
			Aggref	   *a8 = copyObject(a);
			TargetEntry *arg8 = linitial_node(TargetEntry, a8->args);

			arg8->expr = (Expr *) coerce_to_target_type(NULL, (Node *) arg8->expr, FLOAT4OID,
														FLOAT8OID, -1, COERCION_IMPLICIT,
														COERCE_IMPLICIT_CAST, -1);
			a8->aggargtypes = list_make1_oid(FLOAT8OID);
			sum = partial_agg(a8, "sum", FLOAT8OID);
		}
		else
			sum = partial_agg(a, "sum", argtype);
		qsum = add_partial_name(c, col->name, "sum", MERGE_SUM, sum);
		qcount = add_partial_name(c, col->name, "count", MERGE_ADD, partial_agg(a, "count", ANYOID));
		/* the same division avg() itself performs, so results agree exactly */
		if (argtype == FLOAT4OID || argtype == FLOAT8OID)
			col->final_sql = psprintf("(%s / NULLIF(%s, 0)::pg_catalog.float8)", qsum, qcount);
		else if (argtype == INTERVALOID)
			col->final_sql = psprintf("(%s / NULLIF(%s, 0)::pg_catalog.float8)", qsum, qcount);
		else
			col->final_sql = psprintf("(%s::pg_catalog.numeric / NULLIF(%s, 0)::pg_catalog.numeric)",
									  qsum, qcount);
	}
	else
	{
		PartialCol *p;

		check_partial_state(a, fname);
		p = add_partial(c, col->name, "state", MERGE_STATE, partial_state_agg(a));
		p->aggfnoid = a->aggfnoid;
		col->final_sql = psprintf("streamwin.finish_state(%s, %s, NULL::%s)",
								  aggregate_literal(a->aggfnoid),
								  quote_identifier(p->name), format_type_be_qualified(col->type));
	}

	col->final_sql = psprintf("%s::%s", col->final_sql, format_type_be_qualified(col->type));
	c->aggs = lappend(c->aggs, col);
}


const char *
merge_sql(PartialCol *p)
{
	const char *n = quote_identifier(p->name);

	switch (p->merge)
	{
		case MERGE_ADD:
			return psprintf("s.%s + EXCLUDED.%s", n, n);
		case MERGE_SUM:
			return psprintf("COALESCE(s.%s + EXCLUDED.%s, s.%s, EXCLUDED.%s)", n, n, n, n);
		case MERGE_MIN:
			return psprintf("LEAST(s.%s, EXCLUDED.%s)", n, n);
		case MERGE_MAX:
			return psprintf("GREATEST(s.%s, EXCLUDED.%s)", n, n);
		case MERGE_AND:
			return psprintf("COALESCE(s.%s AND EXCLUDED.%s, s.%s, EXCLUDED.%s)", n, n, n, n);
		case MERGE_OR:
			return psprintf("COALESCE(s.%s OR EXCLUDED.%s, s.%s, EXCLUDED.%s)", n, n, n, n);
		case MERGE_STATE:
			return psprintf("streamwin.combine_states(%s, s.%s, EXCLUDED.%s)",
							aggregate_literal(p->aggfnoid), n, n);
		case MERGE_UNION:
			return psprintf("streamwin.distinct_union(s.%s, EXCLUDED.%s)", n, n);
		case MERGE_FIRST:
			return psprintf("s.%s", n);
		case MERGE_LAST:
			return psprintf("EXCLUDED.%s", n);
	}
	return NULL;
}


/*
 * A plain partial (count, sum, min, max, bool_and, bool_or) over one row,
 * as an expression of that row: what the partial aggregate gives for a
 * group of that row alone.  arg is the aggregate's argument ("*" for
 * count(*)), filter its FILTER condition or NULL.  count counts the
 * argument's value unless NULL, as count's strict transition does, which
 * for a row value is not what IS NOT NULL tests (num_nonnulls is); the
 * others are their argument, in the partial's type (as a sum of one value
 * is), or NULL for a row the filter leaves out.
 */
const char *
row_partial_sql(PartialCol *p, const char *arg, const char *filter)
{
	char	   *type = format_type_be_qualified(exprType((Node *) p->expr));

	Assert(p->merge != MERGE_STATE && p->merge != MERGE_UNION && p->merge != MERGE_FIRST);
	if (p->merge == MERGE_ADD)
	{
		const char *n = strcmp(arg, "*") == 0 ? "1" : psprintf("pg_catalog.num_nonnulls(%s)", arg);

		if (filter != NULL)
			n = psprintf("CASE WHEN %s THEN %s ELSE 0 END", filter, n);
		return psprintf("(%s)::%s", n, type);
	}
	if (filter != NULL)
		return psprintf("(CASE WHEN %s THEN %s END)::%s", filter, arg, type);
	return psprintf("(%s)::%s", arg, type);
}

/*
 * The inputs of partial p, the i-th, as columns of a plain projection of a
 * batch's rows, appended to *tlist from *resno on and named apart from
 * *taken: its aggregate's arguments ("__a<i>"; for a transition state,
 * whose aggregate's first argument is the user's aggregate as a literal,
 * "__a<i>_<j>") and its FILTER ("__f<i>").  *arg is what the partial's
 * aggregate, or row_partial_sql, takes as its arguments ("*" for none),
 * *filter the filter's column, or NULL.
 */
void
partial_input_columns(PartialCol *p, int i, List **tlist, AttrNumber *resno, List **taken,
					  const char **arg, const char **filter)
{
	Aggref	   *a = (Aggref *) p->expr;
	ListCell   *lc;

	*arg = "*";
	*filter = NULL;
	if (p->merge == MERGE_STATE)
	{
		StringInfoData args;
		int			j = 0;

		initStringInfo(&args);
		appendStringInfoString(&args, aggregate_literal(p->aggfnoid));
		for_each_from(lc, a->args, 1)
		{
			char	   *col = internal_name(taken, psprintf("__a%d_%d", i, ++j), "");

			*tlist = lappend(*tlist, makeTargetEntry(copyObject(lfirst_node(TargetEntry, lc)->expr),
													 (*resno)++, col, false));
			appendStringInfo(&args, ", %s", quote_identifier(col));
		}
		*arg = args.data;
	}
	else if (a->args != NIL)
	{
		char	   *col = internal_name(taken, psprintf("__a%d", i), "");

		*tlist = lappend(*tlist, makeTargetEntry(copyObject(linitial_node(TargetEntry, a->args)->expr),
												 (*resno)++, col, false));
		*arg = quote_identifier(col);
	}
	if (a->aggfilter != NULL)
	{
		char	   *col = internal_name(taken, psprintf("__f%d", i), "");

		*tlist = lappend(*tlist, makeTargetEntry(copyObject(a->aggfilter), (*resno)++, col, false));
		*filter = quote_identifier(col);
	}
}

/*
 * How the partials of several groups combine into one, as an aggregate:
 * sessions that merge, panes that make a hop window.
 */
const char *
merge_agg_sql(PartialCol *p)
{
	const char *n = quote_identifier(p->name);
	char	   *type = format_type_be_qualified(exprType((Node *) p->expr));

	switch (p->merge)
	{
		case MERGE_ADD:
		case MERGE_SUM:
			return psprintf("pg_catalog.sum(%s)::%s", n, type);
		case MERGE_MIN:
			return psprintf("pg_catalog.min(%s)", n);
		case MERGE_MAX:
			return psprintf("pg_catalog.max(%s)", n);
		case MERGE_AND:
			return psprintf("pg_catalog.bool_and(%s)", n);
		case MERGE_OR:
			return psprintf("pg_catalog.bool_or(%s)", n);
		case MERGE_STATE:
			return psprintf("streamwin.combined_state(%s, %s)", aggregate_literal(p->aggfnoid), n);
		case MERGE_UNION:
			return psprintf("streamwin.distinct_union(%s)", n);
		case MERGE_FIRST:
		case MERGE_LAST:
			break;				/* a dedup key's, an upsert key's row: never
								 * an aggregate's */
	}
	return NULL;
}
