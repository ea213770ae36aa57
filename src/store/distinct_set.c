/*-------------------------------------------------------------------------
 *
 * distinct_set.c
 *	  The sets of distinct values that agg(DISTINCT x) keeps per open group.
 *
 * A continuous query computes agg(DISTINCT x) from the group's distinct
 * values, kept in the state table as an array sorted as
 * array_agg(DISTINCT x) sorts (ascending by x's default ordering, NULL
 * last, at most once each).  A batch merges its own set into the stored
 * one, and hop windows merge the sets of their panes:
 *
 *	streamwin.distinct_set(x anynonarray): the aggregate that builds a
 *		batch's set (as array_agg(DISTINCT x) would, but hashable, where
 *		that one makes the batch sort all its rows, then every group's
 *		values again);
 *	streamwin.distinct_union(a anyarray, b anyarray): the sorted union;
 *	streamwin.distinct_union(set anyarray): the aggregate of that.
 *
 * The inputs are normally sorted already, and a linear merge suffices;
 * an input that is not (a set written by hand, or sorted under another
 * collation) is sorted first, so the result is right either way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/datum.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_distinct_union);
STREAMWIN_SQL_FUNCTION(streamwin_distinct_set_accum);
STREAMWIN_SQL_FUNCTION(streamwin_distinct_set_final);

/* The element type's comparison, kept in fn_extra between calls. */
typedef struct SetType
{
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	FmgrInfo	cmp;
	Oid			collation;
} SetType;

/* A set's elements: values then a NULL flag (the NULL, if any, is last). */
typedef struct SetValues
{
	Datum	   *values;
	int			n;				/* non-NULL values */
	bool		has_null;
} SetValues;

static SetType *
set_type(FunctionCallInfo fcinfo, Oid elemtype)
{
	SetType    *t = fcinfo->flinfo->fn_extra;

	if (t == NULL || t->elemtype != elemtype)
	{
		TypeCacheEntry *tce = lookup_type_cache(elemtype, TYPECACHE_CMP_PROC_FINFO);

		if (!OidIsValid(tce->cmp_proc_finfo.fn_oid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("could not identify a comparison function for type %s",
							format_type_be(elemtype))));
		t = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(SetType));
		t->elemtype = elemtype;
		get_typlenbyvalalign(elemtype, &t->typlen, &t->typbyval, &t->typalign);
		fmgr_info_cxt(tce->cmp_proc_finfo.fn_oid, &t->cmp, fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = t;
	}
	t->collation = PG_GET_COLLATION();
	return t;
}

static int
compare_values(const void *a, const void *b, void *arg)
{
	SetType    *t = arg;

	return DatumGetInt32(FunctionCall2Coll(&t->cmp, t->collation,
										   *(const Datum *) a, *(const Datum *) b));
}

/* Sort values[0, n) and keep each value once; returns how many are kept. */
static int
sort_unique(SetType *t, Datum *values, int n)
{
	int			kept = 0;

	qsort_arg(values, n, sizeof(Datum), compare_values, t);
	for (int i = 0; i < n; i++)
		if (kept == 0 || compare_values(&values[kept - 1], &values[i], t) != 0)
			values[kept++] = values[i];
	return kept;
}

/* A set as an array: its values, then NULL if it has one. */
static ArrayType *
set_array(SetType *t, Datum *values, int n, bool has_null)
{
	Datum	   *out = palloc(sizeof(Datum) * (n + 1));
	bool	   *outnulls = palloc0(sizeof(bool) * (n + 1));
	int			dims[1] = {n + (has_null ? 1 : 0)};
	int			lbs[1] = {1};

	if (dims[0] == 0)
		return construct_empty_array(t->elemtype);
	memcpy(out, values, sizeof(Datum) * n);
	outnulls[n] = has_null;
	return construct_md_array(out, outnulls, 1, dims, lbs, t->elemtype,
							  t->typlen, t->typbyval, t->typalign);
}

/* The array's distinct values, sorted. */
static SetValues
set_values(SetType *t, ArrayType *a)
{
	SetValues	s = {NULL, 0, false};
	Datum	   *values;
	bool	   *nulls;
	int			n;
	bool		sorted = true;

	if (a == NULL)
		return s;
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("a set of distinct values must be a one-dimensional array")));
	deconstruct_array(a, t->elemtype, t->typlen, t->typbyval, t->typalign, &values, &nulls, &n);
	s.values = values;
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
		{
			s.has_null = true;
			continue;
		}
		if (s.n > 0 && sorted && compare_values(&values[s.n - 1], &values[i], t) >= 0)
			sorted = false;
		values[s.n++] = values[i];
	}
	if (!sorted)
		s.n = sort_unique(t, values, s.n);
	return s;
}

/*
 * streamwin.distinct_union(a anyarray, b anyarray) RETURNS anyarray
 *		The sorted union of two sets of distinct values; NULL if both are
 *		NULL (no value yet), the other one (sorted) if one is.  Also the
 *		transition function of the aggregate streamwin.distinct_union(set).
 */
Datum
streamwin_distinct_union(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_ARGISNULL(0) ? NULL : PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *b = PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1);
	SetType    *t;
	SetValues	x;
	SetValues	y;
	Datum	   *out;
	int			n = 0;
	int			i = 0;
	int			j = 0;

	if (a == NULL && b == NULL)
		PG_RETURN_NULL();
	t = set_type(fcinfo, ARR_ELEMTYPE(a ? a : b));
	if (a && b && ARR_ELEMTYPE(a) != ARR_ELEMTYPE(b))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot merge sets of distinct values of types %s and %s",
						format_type_be(ARR_ELEMTYPE(a)), format_type_be(ARR_ELEMTYPE(b)))));
	x = set_values(t, a);
	y = set_values(t, b);

	out = palloc(sizeof(Datum) * (x.n + y.n));
	while (i < x.n || j < y.n)
	{
		int			c = i == x.n ? 1 : j == y.n ? -1 : compare_values(&x.values[i], &y.values[j], t);

		if (c <= 0)
			out[n++] = x.values[i++];
		else
			out[n++] = y.values[j++];
		if (c == 0)
			j++;
	}
	PG_RETURN_ARRAYTYPE_P(set_array(t, out, n, x.has_null || y.has_null));
}

/* The state of streamwin.distinct_set: the values seen, in the aggregate's memory. */
typedef struct SetAccum
{
	Datum	   *values;
	int			n;
	int			size;
	bool		has_null;
	int16		typlen;
	bool		typbyval;
} SetAccum;

/*
 * streamwin.distinct_set_accum(state internal, x anynonarray) RETURNS internal
 *		Keeps x (a copy of it, in the aggregate's memory); sorting and
 *		removing duplicates waits for the final function.
 */
Datum
streamwin_distinct_set_accum(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	SetAccum   *acc;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "streamwin_distinct_set_accum called in non-aggregate context");
	acc = PG_ARGISNULL(0) ? NULL : (SetAccum *) PG_GETARG_POINTER(0);
	if (acc == NULL)
	{
		Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 1);

		acc = MemoryContextAllocZero(aggcxt, sizeof(SetAccum));
		acc->size = 8;
		acc->values = MemoryContextAlloc(aggcxt, sizeof(Datum) * acc->size);
		get_typlenbyval(type, &acc->typlen, &acc->typbyval);
	}
	if (PG_ARGISNULL(1))
		acc->has_null = true;
	else
	{
		MemoryContext old = MemoryContextSwitchTo(aggcxt);

		if (acc->n == acc->size)
		{
			acc->size *= 2;
			acc->values = repalloc(acc->values, sizeof(Datum) * acc->size);
		}
		acc->values[acc->n++] = datumCopy(PG_GETARG_DATUM(1), acc->typbyval, acc->typlen);
		MemoryContextSwitchTo(old);
	}
	PG_RETURN_POINTER(acc);
}

/*
 * streamwin.distinct_set_final(state internal, x anynonarray) RETURNS anyarray
 *		The set: the distinct values sorted, then NULL if one was seen, as
 *		array_agg(DISTINCT x) gives them.  NULL without input.  It sorts
 *		the state in place (the aggregate says FINALFUNC_MODIFY = READ_WRITE).
 */
Datum
streamwin_distinct_set_final(PG_FUNCTION_ARGS)
{
	SetAccum   *acc = PG_ARGISNULL(0) ? NULL : (SetAccum *) PG_GETARG_POINTER(0);
	SetType    *t;

	if (acc == NULL)
		PG_RETURN_NULL();
	t = set_type(fcinfo, get_fn_expr_argtype(fcinfo->flinfo, 1));
	acc->n = sort_unique(t, acc->values, acc->n);
	PG_RETURN_ARRAYTYPE_P(set_array(t, acc->values, acc->n, acc->has_null));
}
