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
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(streamwin_distinct_union);

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
	{
		int			kept = 0;

		qsort_arg(values, s.n, sizeof(Datum), compare_values, t);
		for (int i = 0; i < s.n; i++)
			if (kept == 0 || compare_values(&values[kept - 1], &values[i], t) != 0)
				values[kept++] = values[i];
		s.n = kept;
	}
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
	bool	   *outnulls;
	int			n = 0;
	int			i = 0;
	int			j = 0;
	int			dims[1];
	int			lbs[1] = {1};

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

	out = palloc(sizeof(Datum) * (x.n + y.n + 1));
	outnulls = palloc0(sizeof(bool) * (x.n + y.n + 1));
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
	if (x.has_null || y.has_null)
		outnulls[n++] = true;
	if (n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(t->elemtype));
	dims[0] = n;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(out, outnulls, 1, dims, lbs, t->elemtype,
											 t->typlen, t->typbyval, t->typalign));
}
