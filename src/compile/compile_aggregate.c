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

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "parser/parse_node.h"
#include "parser/parse_oper.h"
#include "optimizer/optimizer.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "aggregate_state.h"
#include "compile_aggregate.h"
#include "compile_changelog.h"
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
	p->collation = InvalidOid;
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
 * ", 'schema.collation'::pg_catalog.regcollation": the last argument of the
 * calls of a MERGE_STATE partial's support functions (combine_states,
 * combined_state, finish_state) with its collation; "" without one (a
 * query compiled before, whose calls take the collation of their
 * arguments).
 */
static char *
state_collation_arg(const PartialCol *p)
{
	if (!OidIsValid(p->collation))
		return "";
	return psprintf(", %s::pg_catalog.regcollation",
					quote_literal_cstr(collation_qualified_name(p->collation)));
}

/* " COLLATE schema.name" of a's input collation, "" for none or the default */
static char *
collate_clause(Aggref *a)
{
	if (!OidIsValid(a->inputcollid) || a->inputcollid == DEFAULT_COLLATION_OID)
		return "";
	return psprintf(" COLLATE %s", collation_qualified_name(a->inputcollid));
}

/* Whether aggregate aggfnoid's transition function is strict: it never sees a NULL */
static bool
aggregate_skips_nulls(Oid aggfnoid)
{
	HeapTuple	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	bool		strict;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
	strict = func_strict(((Form_pg_aggregate) GETSTRUCT(tup))->aggtransfn);
	ReleaseSysCache(tup);
	return strict;
}

/* Does a domain, or one it is over, refuse NULL (NOT NULL)? */
static bool
domain_refuses_null(Oid type)
{
	while (get_typtype(type) == TYPTYPE_DOMAIN)
	{
		HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
		Form_pg_type form;
		bool		notnull;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for type %u", type);
		form = (Form_pg_type) GETSTRUCT(tup);
		notnull = form->typnotnull;
		type = form->typbasetype;
		ReleaseSysCache(tup);
		if (notnull)
			return true;
	}
	return false;
}

/*
 * Aggregate a run over the values of array (SQL): its final value over a
 * group's kept values.  unnest in the target list, as unnest in FROM would
 * split a composite value into its fields; in the aggregate's collation;
 * and, where the aggregate is declared on a domain, each value cast to it,
 * as the values come as its base type (an overload of the base type would
 * be called, or a polymorphic one return another type).  A NULL cannot be
 * cast to a NOT NULL domain: such an aggregate that takes NULLs, which a
 * row may hold (a field of a composite), is refused.
 */
static char *
aggregate_over_values(Aggref *a, const char *fname, const char *array)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(a->aggfnoid));
	Oid			declared;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", a->aggfnoid);
	declared = ((Form_pg_proc) GETSTRUCT(tup))->proargtypes.values[0];
	ReleaseSysCache(tup);
	if (get_typtype(declared) == TYPTYPE_DOMAIN && domain_refuses_null(declared) &&
		!aggregate_skips_nulls(a->aggfnoid))
		refuse(psprintf("aggregate %s() takes NULLs of domain %s, which does not allow them", fname,
						format_type_be(declared)),
			   "The aggregate runs over the group's values again, NULLs included (a row may hold one, in a field of a row value), and a NULL cannot be made a value of that domain.",
			   "Make the aggregate's transition function STRICT, or declare the aggregate on the domain's base type.");
	return psprintf("(SELECT %s(u.v%s%s) FROM (SELECT pg_catalog.unnest(%s) AS v) AS u)",
					quote_qualified_identifier(get_namespace_name(get_func_namespace(a->aggfnoid)), fname),
					get_typtype(declared) == TYPTYPE_DOMAIN ? psprintf("::%s", cast_type_sql(declared)) : "",
					collate_clause(a), array);
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
	if (type_is_array_domain(argtype) || !OidIsValid(arraytype))
		refuse(psprintf("%s(DISTINCT ...) over type %s is not supported in continuous queries",
						fname, format_type_be(argtype)),
			   "The distinct values are kept in an array, which cannot hold arrays of different sizes.",
			   "Apply DISTINCT to a scalar form of the value, such as its text (value::text).");

	set->aggfnoid = streamwin_func_oid("distinct_set", 1, anynonarray);
	set->aggtype = arraytype;
	set->aggargtypes = list_make1_oid(argtype);
	set->aggstar = false;
	set->aggdistinct = NIL;		/* the aggregate drops duplicates itself */
	/*
	 * The set's column takes the values' collation, in which the batches'
	 * sets merge: 'Alice' and 'ALICE' under a case-insensitive one are one
	 * value, whether they come in one batch or in two.
	 */
	set->aggcollid = a->inputcollid;
	qset = add_partial_name(c, col->name, "distinct", MERGE_UNION, set);
	if (a->aggfnoid == F_COUNT_ANY)
	{
		/*
		 * The set's size, less its NULL (sorted last), without a subquery:
		 * num_nulls, as a row value of NULL fields IS NULL too but counts.
		 */
		col->final_sql = psprintf("CASE WHEN pg_catalog.num_nulls(%s[pg_catalog.cardinality(%s)]) = 1 "
								  "THEN GREATEST(pg_catalog.cardinality(%s) - 1, 0) "
								  "ELSE pg_catalog.cardinality(%s) END",
								  qset, qset, qset, qset);
		return;
	}
	col->final_sql = aggregate_over_values(a, fname, qset);
}

/* --- over a changelog ---------------------------------------------------- */

/*
 * Over a changelog each row adds (+1) or retracts (-1): partials are sums
 * of signed values, which merge by adding as over an append stream (a
 * retraction is a negative value), and min, max and DISTINCT keep counted
 * values (store/change_set.c).  Each group also counts its rows, so that
 * a group whose last row is retracted leaves.  See compile_changelog.c.
 */

/* A ParseState for make_op and coercions of the expressions built below. */
static ParseState *
changelog_pstate(void)
{
	static ParseState *pstate = NULL;

	if (pstate == NULL || pstate->p_sourcetext != NULL)
		pstate = make_parsestate(NULL);
	return pstate;
}

/* a op b, resolved as the parser resolves it */
static Expr *
changelog_op(const char *op, Expr *a, Expr *b)
{
	return (Expr *) make_op(changelog_pstate(), list_make1(makeString((char *) op)),
							(Node *) a, (Node *) b, NULL, -1);
}

/* e::type */
static Expr *
changelog_cast(Expr *e, Oid type)
{
	Node	   *n = coerce_to_target_type(NULL, (Node *) e, exprType((Node *) e), type, -1,
										  COERCION_EXPLICIT, COERCE_EXPLICIT_CAST, -1);

	if (n == NULL)
		elog(ERROR, "streamwin: cannot cast %s to %s", format_type_be(exprType((Node *) e)),
			 format_type_be(type));
	return (Expr *) n;
}

/* a AND b, either NULL meaning true */
static Expr *
changelog_and(Expr *a, Expr *b)
{
	if (a == NULL)
		return b;
	if (b == NULL)
		return a;
	return make_andclause(list_make2(a, b));
}

/*
 * e is not NULL, as count(e) tests it: e IS NOT NULL, a test the executor
 * makes in place, where that is what it means; for a row value, which IS
 * NOT NULL tests field by field, pg_catalog.num_nonnulls(e) = 1, a call
 * per row.
 */
static Expr *
changelog_not_null(Expr *e)
{
	Expr	   *nonnulls;

	if (!type_is_rowtype(exprType((Node *) e)))
	{
		NullTest   *test = makeNode(NullTest);

		test->arg = (Expr *) copyObject(e);
		test->nulltesttype = IS_NOT_NULL;
		test->argisrow = false;
		test->location = -1;
		return (Expr *) test;
	}
	nonnulls = (Expr *) makeFuncExpr(F_NUM_NONNULLS, INT4OID, list_make1(copyObject(e)),
									 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);

	return changelog_op("=", nonnulls, (Expr *) makeConst(INT4OID, -1, InvalidOid, 4,
														   Int32GetDatum(1), false, true));
}

/* orig turned into pg_catalog.fname(arg) FILTER (WHERE filter) */
static Aggref *
changelog_agg(Aggref *orig, const char *fname, Expr *arg, Expr *filter)
{
	Aggref	   *a = copyObject(orig);
	Oid			argtype = exprType((Node *) arg);

	a->aggfnoid = LookupFuncName(list_make2(makeString("pg_catalog"), makeString((char *) fname)),
								 1, &argtype, false);
	a->aggtype = get_func_rettype(a->aggfnoid);
	a->aggargtypes = list_make1_oid(argtype);
	a->args = list_make1(makeTargetEntry(copyObject(arg), 1, NULL, false));
	a->aggfilter = (Expr *) copyObject(filter);
	a->aggstar = false;
	a->aggdistinct = NIL;
	a->aggorder = NIL;
	a->aggcollid = InvalidOid;
	a->inputcollid = exprCollation((Node *) arg);
	return a;
}

/*
 * sum(change) FILTER (WHERE filter): the rows counted (the signed count
 * of rows that pass filter), a partial of its own under name's column.
 */
static const char *
changelog_count(Compiled *c, Aggref *orig, const char *name, const char *suffix, Expr *filter)
{
	return add_partial_name(c, name, suffix, MERGE_ADD,
							changelog_agg(orig, "sum", (Expr *) change_var(c), filter));
}

/*
 * CASE WHEN change < 0 THEN -x ELSE x END: numeric x signed by its row's
 * change (+1 or -1), without a numeric multiplication per row.
 */
static Expr *
changelog_negated_if_retracted(Compiled *c, Expr *x)
{
	CaseExpr   *cexpr = makeNode(CaseExpr);
	CaseWhen   *when = makeNode(CaseWhen);

	when->expr = changelog_op("<", (Expr *) change_var(c),
							  (Expr *) makeConst(INT2OID, -1, InvalidOid, sizeof(int16),
												 Int16GetDatum(0), false, true));
	when->result = (Expr *) make_op(changelog_pstate(), list_make1(makeString("-")), NULL,
									(Node *) copyObject(x), NULL, -1);
	when->location = -1;
	cexpr->casetype = exprType((Node *) x);
	cexpr->casecollid = InvalidOid;
	cexpr->args = list_make1(when);
	cexpr->defresult = (Expr *) copyObject(x);
	cexpr->location = -1;
	return (Expr *) cexpr;
}

/*
 * The signed value of a sum's argument, in a type whose sum is exact and
 * holds the sum of the argument's type: int2 in int4, int4 in int8, int8
 * in numeric.  NULL: a type whose sum a retraction cannot undo exactly.
 */
static Expr *
changelog_signed_value(Compiled *c, Expr *x)
{
	Oid			type = exprType((Node *) x);
	Expr	   *change = (Expr *) change_var(c);

	switch (type)
	{
		case INT2OID:
			return changelog_op("*", changelog_cast(x, INT4OID), changelog_cast(change, INT4OID));
		case INT4OID:
			return changelog_op("*", changelog_cast(x, INT8OID), changelog_cast(change, INT8OID));
		case INT8OID:
			return changelog_negated_if_retracted(c, changelog_cast(x, NUMERICOID));
		case NUMERICOID:
			return changelog_negated_if_retracted(c, x);
		case INTERVALOID:
			/* negated, not multiplied by -1.0: a float8 product rounds past 2^53 us */
			return changelog_negated_if_retracted(c, x);
		case MONEYOID:
			return changelog_op("*", x, change);
	}
	return NULL;
}

/*
 * A floating-point value as the numeric its text is: the shortest decimal
 * that reads back as the same float (batches run with extra_float_digits
 * 1), NaN and the infinities as numeric's own.  Its sums retract exactly,
 * and the result rounds to the nearest float at the end; a float sum would
 * be off after a retraction by what each addition rounded (PostgreSQL's
 * float aggregates have no inverse for that reason).
 */
static Expr *
changelog_float_as_numeric(Expr *x)
{
	return changelog_cast(changelog_cast(x, TEXTOID), NUMERICOID);
}

/*
 * Half the smallest subnormal float8 and float4 (2^-1075 and 2^-150),
 * rounded up to 17 digits: what is no larger rounds to 0 (a tie to even),
 * and the float input function refuses it
 */
#define FLOAT8_ROUNDS_TO_ZERO "2.4703282292062328e-324"
#define FLOAT4_ROUNDS_TO_ZERO "7.0064923216240854e-46"

/* Refuse an aggregate a changelog's retractions cannot undo exactly. */
static void
changelog_refuse(Compiled *c, const char *fname, const char *detail)
{
	refuse(psprintf("aggregate %s() is not supported over changelog source \"%s\"", fname, c->source->name),
		   detail,
		   "Over a changelog, use count, sum, avg (of numbers, interval or money), the stddev and variance family "
		   "(of numbers), min, max, bool_and, bool_or, every, a DISTINCT aggregate of one argument, "
		   "or an aggregate of one argument created with an inverse transition function (MSFUNC and MINVFUNC).");
}

/*
 * compile_changelog_rows
 *		The row count every group of an aggregation over a changelog keeps
 *		(c->rows_partial): when it falls to 0 the group leaves.
 */
void
compile_changelog_rows(Compiled *c)
{
	Aggref	   *count = makeNode(Aggref);

	count->aggkind = AGGKIND_NORMAL;
	count->location = -1;
	c->rows_partial = add_partial(c, "__rows", "count", MERGE_ADD,
								  changelog_agg(count, "sum", (Expr *) change_var(c), NULL));
}

/* The counted values of x (FILTER filter): a change set partial. */
static const char *
changelog_set(Compiled *c, Aggref *orig, const char *name, const char *suffix, Expr *x,
			  Expr *filter)
{
	Aggref	   *a = copyObject(orig);
	Oid			types[2] = {ANYELEMENTOID, INT2OID};
	Oid			xtype = exprType((Node *) x);

	if (get_typtype(xtype) == TYPTYPE_PSEUDO)
		refuse(psprintf("aggregate %s() of an anonymous row is not supported over changelog source \"%s\"",
						get_func_name(orig->aggfnoid), c->source->name),
			   "Its argument's values are kept in the state table, which cannot hold a value of an anonymous row type.",
			   psprintf("Aggregate a value of a named type, such as the row's text: %s(DISTINCT (a, b)::text).",
						get_func_name(orig->aggfnoid)));
	a->aggfnoid = streamwin_func_oid("change_set", 2, types);
	a->aggtype = BYTEAOID;
	a->aggargtypes = list_make2_oid(xtype, INT2OID);
	a->args = list_make2(makeTargetEntry(copyObject(x), 1, NULL, false),
						 makeTargetEntry((Expr *) change_var(c), 2, NULL, false));
	a->aggfilter = (Expr *) copyObject(filter);
	a->aggstar = false;
	a->aggdistinct = NIL;
	a->aggcollid = InvalidOid;
	return add_partial_name(c, name, suffix, MERGE_COUNTED, a);
}

/*
 * The variance family over a changelog: stddev, stddev_samp, stddev_pop,
 * variance, var_samp and var_pop of integers or numeric, whose moving
 * aggregates PostgreSQL inverts.  The group keeps the signed count, sum and
 * sum of squares of the values, and the result is computed as PostgreSQL
 * computes it from those (numeric_stddev_internal): N·Σx² − (Σx)², exact;
 * 0 where it is not positive; else divided by N(N−1), or N² for the
 * population, as numeric division does, and for a standard deviation the
 * square root at the quotient's scale (streamwin.rounded_sqrt, which takes
 * a quotient of 0, a positive numerator below the quotient's last digit,
 * a digit below 0: hence the floor of 0 at that scale).  For
 * numeric, Σx and Σx² take the largest scale of the values left (twice it
 * for the squares), and NaN or an infinity among them gives NaN.
 */
static const char *
changelog_variance(Compiled *c, Aggref *a, const char *name, const char *fname, Expr *x,
				   Expr *f, bool sample, bool root)
{
	Oid			xtype = exprType((Node *) x);
	Expr	   *change = changelog_cast((Expr *) change_var(c), NUMERICOID);
	Expr	   *finite = NULL;
	const char *n;
	const char *sx;
	const char *sx2;
	const char *scale = "0";
	const char *special = "false";
	const char *quotient;

	if (xtype == FLOAT4OID || xtype == FLOAT8OID)
	{
		x = changelog_float_as_numeric(x);
		xtype = NUMERICOID;
	}
	if (xtype != INT2OID && xtype != INT4OID && xtype != INT8OID && xtype != NUMERICOID)
		changelog_refuse(c, fname, psprintf("A retraction cannot take a value back exactly from the sums of %s it keeps.",
											format_type_be(xtype)));
	n = changelog_count(c, a, name, "count", changelog_and(changelog_not_null(x), f));
	if (xtype == NUMERICOID)
	{
		Expr	   *sc = (Expr *) makeFuncExpr(F_SCALE, INT4OID, list_make1(copyObject(x)),
											   InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
		const char *scales;
		const char *specials;

		finite = changelog_not_null(sc);
		scales = changelog_set(c, a, name, "scales", sc, f);
		specials = changelog_count(c, a, name, "specials",
								   changelog_and(changelog_and(changelog_not_null(x),
															   make_notclause(copyObject(finite))), f));
		scale = psprintf("COALESCE(streamwin.change_set_max(%s, NULL::pg_catalog.int4), 0)", scales);
		special = psprintf("COALESCE(%s, 0) <> 0", specials);
	}
	else
		x = changelog_cast(x, NUMERICOID);
	sx = add_partial_name(c, name, "sum", MERGE_SUM,
						  changelog_agg(a, "sum", changelog_op("*", copyObject(x), copyObject(change)),
										changelog_and(copyObject(finite), f)));
	sx2 = add_partial_name(c, name, "squares", MERGE_SUM,
						   changelog_agg(a, "sum",
										 changelog_op("*", changelog_op("*", copyObject(x), copyObject(x)),
													  copyObject(change)),
										 changelog_and(copyObject(finite), f)));
	/*
	 * Numeric against numeric, never against an integer literal: no
	 * operator of pg_catalog takes numeric and int4 as they are, so one of
	 * that exact signature in a schema of the search path would be chosen.
	 */
	quotient = psprintf("d.num / (d.n * %s)", sample ? "(d.n - 1::pg_catalog.numeric)" : "d.n");
	return psprintf("(SELECT CASE WHEN d.n <= %d::pg_catalog.numeric THEN NULL "
					"WHEN %s THEN 'NaN'::pg_catalog.numeric "
					"WHEN d.num <= 0::pg_catalog.numeric THEN 0::pg_catalog.numeric "
					"ELSE %s END "
					"FROM (SELECT s.n, s.n * s.sx2 - s.sx * s.sx AS num "
					"FROM (SELECT COALESCE(%s, 0)::pg_catalog.numeric AS n, "
					"pg_catalog.round(COALESCE(%s, 0), %s) AS sx, "
					"pg_catalog.round(COALESCE(%s, 0), 2 * %s) AS sx2) AS s) AS d)",
					sample ? 1 : 0, special,
					root ? psprintf("GREATEST(streamwin.rounded_sqrt(%s), 0::pg_catalog.numeric * (%s))",
									quotient, quotient) : quotient,
					n, sx, scale, sx2, scale);
}

/* Can aggregate aggfnoid run as a moving aggregate: has it MINVFUNC? */
static bool
aggregate_has_inverse(Oid aggfnoid)
{
	HeapTuple	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	bool		inverse;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
	inverse = OidIsValid(((Form_pg_aggregate) GETSTRUCT(tup))->aggminvtransfn);
	ReleaseSysCache(tup);
	return inverse;
}

/*
 * An aggregate with an inverse transition function that streamwin does not
 * map itself (a user's, created with MSFUNC and MINVFUNC): the group keeps
 * its argument's counted values, and its NULLs counted apart where the
 * aggregate takes them, and the aggregate runs over the values the group's
 * rows hold, each as many times as rows hold it (change_set_rows).  That is
 * exact whatever the inverse would do (PostgreSQL's own restarts an
 * aggregation where the inverse gives up), as the rows' order is no more
 * defined in plain SQL; it costs a pass over the group's values each time
 * the group changes.
 */
static char *
changelog_moving_aggregate(Compiled *c, Aggref *a, const char *name, const char *fname,
						   Expr *x, Expr *f, const char *set_type)
{
	const char *rows;

	if (list_length(a->args) != 1)
		changelog_refuse(c, fname, "Over a changelog, an aggregate with an inverse transition function keeps the values of its one argument, and this one takes another number of arguments.");
	if (type_is_array_domain(exprType((Node *) x)) || !OidIsValid(get_array_type(exprType((Node *) x))))
		refuse(psprintf("aggregate %s() of type %s is not supported over changelog source \"%s\"",
						fname, format_type_be(exprType((Node *) x)), c->source->name),
			   "The values a group's rows hold are handed to the aggregate as an array, and PostgreSQL has no array of this type.",
			   "Aggregate a scalar form of the value, such as its text (value::text), with an aggregate of that type.");
	if (!OidIsValid(lookup_type_cache(exprType((Node *) x), TYPECACHE_CMP_PROC)->cmp_proc))
		refuse(psprintf("aggregate %s() of type %s is not supported over changelog source \"%s\"",
						fname, format_type_be(exprType((Node *) x)), c->source->name),
			   "A group keeps its rows' values sorted, to count each, and this type has no default ordering (a btree operator class).",
			   "Aggregate a form of the value that has one, such as its text (value::text), with an aggregate of that type.");
	rows = psprintf("streamwin.change_set_rows(%s, NULL::%s%s)",
					changelog_set(c, a, name, "set", x, f), set_type, collate_clause(a));
	if (!aggregate_skips_nulls(a->aggfnoid))
	{
		const char *nulls = changelog_count(c, a, name, "nulls",
											changelog_and(make_notclause(changelog_not_null(x)), f));

		rows = psprintf("CASE WHEN %s > 0 THEN pg_catalog.array_cat(%s, pg_catalog.array_fill(NULL::%s, ARRAY[%s::pg_catalog.int4])) ELSE %s END",
						nulls, rows, set_type, nulls, rows);
	}
	return aggregate_over_values(a, fname, rows);
}

/*
 * Over a changelog an aggregate of the user's runs again over a group's
 * values each time the group changes (a DISTINCT one, one with an inverse
 * transition function): its functions must give what they gave, as every
 * function of the user's a changelog query calls must (compile_changelog.c).
 */
static void
changelog_check_aggregate_functions(Compiled *c, Aggref *a, const char *fname)
{
	HeapTuple	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(a->aggfnoid));
	Form_pg_aggregate agg;
	Oid			fns[2];

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for aggregate %u", a->aggfnoid);
	agg = (Form_pg_aggregate) GETSTRUCT(tup);
	fns[0] = agg->aggtransfn;
	fns[1] = agg->aggfinalfn;
	ReleaseSysCache(tup);
	for (int i = 0; i < (int) lengthof(fns); i++)
		if (OidIsValid(fns[i]) && fns[i] >= FirstNormalObjectId &&
			func_volatile(fns[i]) != PROVOLATILE_IMMUTABLE)
			refuse(psprintf("aggregate %s() calls function %s, which is not immutable, over changelog source \"%s\"",
							fname, format_procedure(fns[i]), c->source->name),
				   "Over a changelog the aggregate runs again over a group's values each time the group changes, where the function may give another value (one that reads a table gives what the table holds then).",
				   "If its result depends on its arguments alone, declare it IMMUTABLE (ALTER FUNCTION); otherwise aggregate the changelog with another aggregate.");
}

/*
 * Map an aggregate over a changelog to signed partials and a final value
 * over them (col->final_sql, before its cast to the result's type).
 */
static void
compile_changelog_aggregate(Compiled *c, AggCol *col, Aggref *a, const char *fname,
							const char *builtin)
{
	Expr	   *x = a->args != NIL ? linitial_node(TargetEntry, a->args)->expr : NULL;
	Expr	   *f = a->aggfilter;
	Oid			xtype = x ? exprType((Node *) x) : InvalidOid;
	Oid			arg_type = xtype;	/* (xtype: the argument as summed) */

	/*
	 * The type the set functions are told their values have: a domain's
	 * base type, as NULL::d fails for a NOT NULL domain d
	 */
	const char *set_type = x ? cast_type_sql(getBaseType(xtype)) : NULL;

	/* (one that is run again over the group's values: DISTINCT, or with an inverse) */
	if (builtin[0] == '\0' && (a->aggdistinct != NIL || aggregate_has_inverse(a->aggfnoid)))
		changelog_check_aggregate_functions(c, a, fname);
	if (builtin[0] == '\0' && a->aggvariadic)
		changelog_refuse(c, fname, "It takes its arguments as an array (VARIADIC), and over a changelog an aggregate of the user's keeps the values of one argument of a scalar type.");
	if (a->aggdistinct != NIL)
	{
		const char *set;
		const char *values;

		if (list_length(a->args) != 1)
			changelog_refuse(c, fname, "Only DISTINCT aggregates of one argument keep their values batch by batch.");
		if (type_is_array_domain(xtype) || !OidIsValid(get_array_type(xtype)))
			refuse(psprintf("%s(DISTINCT ...) over type %s is not supported over changelog source \"%s\"",
							fname, format_type_be(xtype), c->source->name),
				   "The values left are handed to the aggregate as an array, and PostgreSQL has no array of arrays.",
				   "Apply DISTINCT to a scalar form of the value, such as its text (value::text).");
		set = changelog_set(c, a, col->name, "set", x, f);

		/*
		 * The values come out in the aggregate's collation, in which the
		 * set is ordered, for the aggregate to run over as over its rows
		 * (max(DISTINCT s COLLATE "C")).
		 */
		values = psprintf("streamwin.change_set_values(%s, NULL::%s%s)", set, set_type, collate_clause(a));
		if (a->aggfnoid == F_COUNT_ANY)
			col->final_sql = psprintf("pg_catalog.cardinality(%s)", values);
		else
		{
			/*
			 * The set counts values, not NULLs; an aggregate that takes NULL
			 * (array_agg, json_agg) is given it once, last, as DISTINCT
			 * sorts it, while some row holds it.
			 */
			if (!aggregate_skips_nulls(a->aggfnoid))
			{
				const char *nulls = changelog_count(c, a, col->name, "nulls",
													changelog_and(make_notclause(changelog_not_null(x)), f));

				values = psprintf("CASE WHEN %s > 0 THEN pg_catalog.array_append(%s, NULL::%s) ELSE %s END",
								  nulls, values, set_type, values);
			}
			col->final_sql = aggregate_over_values(a, fname, values);
		}
	}
	else if (strcmp(builtin, "count") == 0)
		col->final_sql = psprintf("COALESCE(%s, 0)",
								  changelog_count(c, a, col->name, "count",
												  x ? changelog_and(changelog_not_null(x), f) : f));
	else if (strcmp(builtin, "sum") == 0 || strcmp(builtin, "avg") == 0)
	{
		Expr	   *signed_x;
		const char *sum;
		const char *n;

		if (xtype == FLOAT4OID || xtype == FLOAT8OID)
		{
			x = changelog_float_as_numeric(x);
			xtype = NUMERICOID;
		}
		signed_x = changelog_signed_value(c, x);

		if (signed_x == NULL)
			changelog_refuse(c, fname, psprintf("A retraction cannot take a value back exactly from a sum of %s.",
												format_type_be(xtype)));
		n = changelog_count(c, a, col->name, "count", changelog_and(changelog_not_null(x), f));
		if (xtype == NUMERICOID)
		{
			/*
			 * NaN and the infinities cannot be subtracted back out of a sum
			 * (NaN - NaN is NaN): they are counted apart, as a set, and
			 * added to the sum of the finite values at the end, which
			 * gives what one pass over the values left gives.  And a
			 * numeric sum shows the largest scale of its values (2.50 + 1
			 * = 3.50): a retracted value's must leave with it, so the
			 * scales are counted too, and the sum rounded to the largest
			 * left, which only drops zeros.  A value without a scale is a
			 * special one.
			 */
			Expr	   *scale = (Expr *) makeFuncExpr(F_SCALE, INT4OID, list_make1(copyObject(x)),
													  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
			Expr	   *finite = changelog_not_null(scale);
			Expr	   *special = changelog_and(changelog_not_null(x), make_notclause(copyObject(finite)));
			const char *scales = changelog_set(c, a, col->name, "scales", scale, f);
			const char *specials = changelog_set(c, a, col->name, "specials", x, changelog_and(special, f));

			sum = add_partial_name(c, col->name, "sum", MERGE_SUM,
								   changelog_agg(a, "sum", signed_x, changelog_and(finite, f)));
			sum = psprintf("(pg_catalog.round(COALESCE(%s, 0), COALESCE(streamwin.change_set_max(%s, NULL::pg_catalog.int4), 0))"
						   " + COALESCE((SELECT pg_catalog.sum(v) FROM pg_catalog.unnest(streamwin.change_set_values(%s, NULL::pg_catalog.numeric)) AS u(v)), 0))",
						   sum, scales, specials);
		}
		else
			sum = add_partial_name(c, col->name, "sum", MERGE_SUM, changelog_agg(a, "sum", signed_x, f));
		if (strcmp(builtin, "sum") == 0)
			col->final_sql = psprintf("CASE WHEN %s > 0 THEN %s END", n, sum);
		else if (xtype == INTERVALOID || xtype == MONEYOID)
			col->final_sql = psprintf("CASE WHEN %s > 0 THEN %s / %s::pg_catalog.float8 END", n, sum, n);
		else
			col->final_sql = psprintf("CASE WHEN %s > 0 THEN %s::pg_catalog.numeric / %s::pg_catalog.numeric END",
									  n, sum, n);
	}
	else if (strcmp(builtin, "stddev") == 0 || strcmp(builtin, "stddev_samp") == 0 ||
			 strcmp(builtin, "variance") == 0 || strcmp(builtin, "var_samp") == 0 ||
			 strcmp(builtin, "stddev_pop") == 0 || strcmp(builtin, "var_pop") == 0)
		col->final_sql = pstrdup(changelog_variance(c, a, col->name, fname, x, f,
													strstr(builtin, "pop") == NULL,
													strncmp(builtin, "stddev", 6) == 0));
	else if (strcmp(builtin, "min") == 0 || strcmp(builtin, "max") == 0)
		col->final_sql = psprintf("streamwin.change_set_%s(%s, NULL::%s)", builtin,
								  changelog_set(c, a, col->name, "set", x, f), set_type);
	else if (strcmp(builtin, "bool_and") == 0 || strcmp(builtin, "every") == 0 ||
			 strcmp(builtin, "bool_or") == 0)
	{
		bool		and = strcmp(builtin, "bool_or") != 0;
		Expr	   *decides = and ? make_notclause(copyObject(x)) : copyObject(x);
		const char *n = changelog_count(c, a, col->name, "count", changelog_and(changelog_not_null(x), f));
		const char *d = changelog_count(c, a, col->name, and ? "false" : "true", changelog_and(decides, f));

		col->final_sql = psprintf("CASE WHEN %s > 0 THEN COALESCE(%s, 0) %s 0 END", n, d, and ? "=" : ">");
	}
	else if (aggregate_has_inverse(a->aggfnoid))
		col->final_sql = changelog_moving_aggregate(c, a, col->name, fname, x, f, set_type);
	else
		changelog_refuse(c, fname, "It has no inverse transition function (CREATE AGGREGATE's MINVFUNC), so a retraction cannot take a value back from its state.");

	/*
	 * A float's sums, computed in numeric, to the float they are: a value
	 * that rounds to 0 in the float type is 0, as the float aggregate's own
	 * arithmetic makes it, rather than an error of the float's input
	 * function that would fail every batch.  (The smallest subnormals are
	 * values like any other.)
	 */
	if (a->aggdistinct == NIL && (arg_type == FLOAT4OID || arg_type == FLOAT8OID) &&
		(col->type == FLOAT4OID || col->type == FLOAT8OID) &&
		strcmp(builtin, "min") != 0 && strcmp(builtin, "max") != 0)
		col->final_sql = psprintf("(SELECT CASE WHEN pg_catalog.abs(v) OPERATOR(pg_catalog.<=) %s::pg_catalog.numeric "
								  "THEN 0::pg_catalog.numeric ELSE v END "
								  "FROM (SELECT (%s)::pg_catalog.numeric AS v) AS z)",
								  col->type == FLOAT4OID ? FLOAT4_ROUNDS_TO_ZERO : FLOAT8_ROUNDS_TO_ZERO,
								  col->final_sql);
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
		refuse(psprintf("aggregate %s() with ORDER BY is not supported in continuous queries", fname),
			   "Its value depends on the order of all its rows, which batches do not keep: each merges partial results.",
			   "Aggregate without ORDER BY (array_agg(DISTINCT x) keeps its values sorted), or order the values when reading the result table.");

	col->name = tle->resname;
	col->type = a->aggtype;
	col->typmod = -1;
	/* max(name COLLATE "C"): the column's, as CREATE TABLE AS gives it */
	col->collation = exprCollation((Node *) a);

	/* DISTINCT ones; built-ins that merge in plain SQL; any other */
	builtin = get_func_namespace(a->aggfnoid) == PG_CATALOG_NAMESPACE ? fname : "";
	if (c->change_attno > 0)
		compile_changelog_aggregate(c, col, a, fname, builtin);
	else if (a->aggdistinct != NIL)
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
		p->collation = a->inputcollid;
		/* (a NULL of the base type: NULL::d fails for a NOT NULL domain d) */
		col->final_sql = psprintf("streamwin.finish_state(%s, %s, NULL::%s%s)",
								  aggregate_literal(a->aggfnoid),
								  quote_identifier(p->name), cast_type_sql(getBaseType(col->type)),
								  state_collation_arg(p));
	}

	col->final_sql = psprintf("%s::%s", col->final_sql, cast_type_sql(col->type));
	c->aggs = lappend(c->aggs, col);
}


/* Do this min or max's transition functions keep the first of two equal values? */
static bool
min_max_tie_keeps_first(PartialCol *p)
{
	return getBaseType(exprType((Node *) p->expr)) == BPCHAROID;
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
		/*
		 * the batch's first: of two equal values LEAST keeps its first, min
		 * the later; but bpchar's min and max keep the earlier
		 */
		case MERGE_MIN:
			return min_max_tie_keeps_first(p) ? psprintf("LEAST(s.%s, EXCLUDED.%s)", n, n) :
				psprintf("LEAST(EXCLUDED.%s, s.%s)", n, n);
		case MERGE_MAX:
			return min_max_tie_keeps_first(p) ? psprintf("GREATEST(s.%s, EXCLUDED.%s)", n, n) :
				psprintf("GREATEST(EXCLUDED.%s, s.%s)", n, n);
		case MERGE_AND:
			return psprintf("COALESCE(s.%s AND EXCLUDED.%s, s.%s, EXCLUDED.%s)", n, n, n, n);
		case MERGE_OR:
			return psprintf("COALESCE(s.%s OR EXCLUDED.%s, s.%s, EXCLUDED.%s)", n, n, n, n);
		case MERGE_STATE:
			return psprintf("streamwin.combine_states(%s, s.%s, EXCLUDED.%s%s)",
							aggregate_literal(p->aggfnoid), n, n, state_collation_arg(p));
		case MERGE_UNION:
			return psprintf("streamwin.distinct_union(s.%s, EXCLUDED.%s)", n, n);
		case MERGE_COUNTED:
			return psprintf("streamwin.change_set_merge(s.%s, EXCLUDED.%s)", n, n);
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
	char	   *type = cast_type_sql(exprType((Node *) p->expr));

	Assert(p->merge != MERGE_STATE && p->merge != MERGE_UNION && p->merge != MERGE_FIRST &&
		   p->merge != MERGE_COUNTED);
	/* a count; over a changelog MERGE_ADD is also a sum of changes, below */
	if (p->merge == MERGE_ADD && ((Aggref *) p->expr)->aggfnoid != F_SUM_INT2)
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
	char	   *type = cast_type_sql(exprType((Node *) p->expr));

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
			return psprintf("streamwin.combined_state(%s, %s%s)", aggregate_literal(p->aggfnoid), n,
							state_collation_arg(p));
		case MERGE_UNION:
			return psprintf("streamwin.distinct_union(%s)", n);
		case MERGE_COUNTED:		/* a changelog's: its queries keep no SQL path */
		case MERGE_FIRST:
		case MERGE_LAST:
			break;				/* a dedup key's, an upsert key's row: never
								 * an aggregate's */
	}
	return NULL;
}
