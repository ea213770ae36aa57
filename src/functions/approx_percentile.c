/*-------------------------------------------------------------------------
 *
 * approx_percentile.c
 *	  streamwin.approx_percentile(value, fraction) and
 *	  streamwin.approx_percentile(value, fractions[]): percentiles estimated
 *	  with a DDSketch, within 1% of the exact value.
 *
 * percentile_cont and percentile_disc are ordered-set aggregates: they
 * need every value of the group at once, so continuous queries refuse
 * them.  A DDSketch (Masson, Rim and Lee, VLDB 2019) counts values in
 * buckets whose bounds grow geometrically by gamma = (1 + a) / (1 - a):
 * bucket k holds the values in (gamma^(k-1), gamma^k].  Every value of a
 * bucket is within a = 1% (relative) of the bucket's representative
 * 2 gamma^k / (gamma + 1), so the value returned for a rank is within 1%
 * of the value at that rank, whatever the distribution.  Merging two
 * sketches adds their counts bucket by bucket, which gives exactly the
 * sketch of all their rows: a window's estimate does not depend on how its
 * rows were split into batches, and equals the aggregate over the same rows
 * in plain SQL.  Spark offers the same as percentile_approx.
 *
 * The rank is percentile_disc's: for fraction f of n values, the value at
 * position ceil(f * n) in ascending order (the first for f = 0).  Negative
 * values go to buckets of their magnitude, kept apart; zero, -Infinity,
 * Infinity and NaN (above every number, as PostgreSQL sorts it) are
 * counted on their own and returned exactly.
 *
 * Buckets are kept as sorted arrays of (index, count); a sketch of values
 * spanning 1e-3 to 1e6 has about 1,000 of them.  The fractions come with
 * every row and must be the same in all of them.
 *
 * Stored form (bytea, big-endian): version, the fractions (count, then
 * each), the special counts (zero, -Infinity, Infinity, NaN), then the
 * negative and the positive buckets (count, then index and count of each,
 * indexes increasing).  Deserialisation checks all of it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "common/int.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/memutils.h"

#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_approx_percentile_accum);
STREAMWIN_SQL_FUNCTION(streamwin_approx_percentile_accum_array);
STREAMWIN_SQL_FUNCTION(streamwin_approx_percentile_combine);
STREAMWIN_SQL_FUNCTION(streamwin_approx_percentile_serialize);
STREAMWIN_SQL_FUNCTION(streamwin_approx_percentile_deserialize);
STREAMWIN_SQL_FUNCTION(streamwin_approx_percentile_final);
STREAMWIN_SQL_FUNCTION(streamwin_approx_percentile_final_array);

#define SKETCH_VERSION		1
#define RELATIVE_ACCURACY	0.01
#define MAX_FRACTIONS		100
/* bucket indexes of finite doubles: |log(DBL_MAX or DBL_TRUE_MIN) / log(gamma)| < 40000 */
#define MAX_INDEX			40000

typedef struct Bucket
{
	int32		index;
	int64		count;
} Bucket;

typedef struct Buckets
{
	Bucket	   *b;
	int			n;
	int			max;
} Buckets;

typedef struct Sketch
{
	int			nfractions;
	double	   *fractions;		/* nfractions of them, in cxt; NULL: none yet */
	int64		zero;
	int64		neg_inf;
	int64		pos_inf;
	int64		nan;
	Buckets		neg;			/* by magnitude */
	Buckets		pos;
	MemoryContext cxt;
} Sketch;

static double gamma_log = 0;	/* log(gamma) */

static double
log_gamma(void)
{
	if (gamma_log == 0)
		gamma_log = log((1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY));
	return gamma_log;
}

/* the bucket of a positive finite magnitude: (gamma^(k-1), gamma^k] */
static int32
bucket_of(double m)
{
	return (int32) ceil(log(m) / log_gamma());
}

/* the bucket's representative: within RELATIVE_ACCURACY of all its values */
static double
bucket_value(int32 k)
{
	double		g = exp(log_gamma());
	double		v = exp(k * log_gamma() + log(2 / (g + 1)));

	/* the top bucket's bound is past the largest double */
	return Min(v, DBL_MAX);
}

static Sketch *
sketch_new(MemoryContext cxt)
{
	Sketch	   *s = MemoryContextAllocZero(cxt, sizeof(Sketch));

	s->cxt = cxt;
	return s;
}

/* a + b, refused past int64: only a forged state holds such counts */
static int64
count_add(int64 a, int64 b)
{
	int64		r;

	if (pg_add_s64_overflow(a, b, &r))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("approx_percentile count out of range")));
	return r;
}

/* Add count to bucket index of bs (sorted by index). */
static void
buckets_add(Sketch *s, Buckets *bs, int32 index, int64 count)
{
	int			lo = 0;
	int			hi = bs->n;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (bs->b[mid].index < index)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < bs->n && bs->b[lo].index == index)
	{
		bs->b[lo].count = count_add(bs->b[lo].count, count);
		return;
	}
	if (bs->n == bs->max)
	{
		bs->max = Max(bs->max * 2, 32);
		bs->b = bs->b == NULL ? MemoryContextAlloc(s->cxt, sizeof(Bucket) * bs->max) :
			repalloc(bs->b, sizeof(Bucket) * bs->max);
	}
	memmove(&bs->b[lo + 1], &bs->b[lo], sizeof(Bucket) * (bs->n - lo));
	bs->b[lo].index = index;
	bs->b[lo].count = count;
	bs->n++;
}

/*
 * Add the counts of from (sorted by index) to bs: one pass over both, so
 * that merging sketches of many buckets each costs their sizes, not their
 * product.
 */
static void
buckets_merge(Sketch *s, Buckets *bs, const Buckets *from)
{
	Bucket	   *out;
	int			room = bs->n + from->n;
	int			i = 0;
	int			j = 0;
	int			n = 0;

	if (from->n == 0)
		return;
	out = MemoryContextAlloc(s->cxt, sizeof(Bucket) * room);
	while (i < bs->n || j < from->n)
	{
		if (j >= from->n || (i < bs->n && bs->b[i].index < from->b[j].index))
			out[n++] = bs->b[i++];
		else if (i >= bs->n || from->b[j].index < bs->b[i].index)
			out[n++] = from->b[j++];
		else
		{
			out[n].index = bs->b[i].index;
			out[n++].count = count_add(bs->b[i++].count, from->b[j++].count);
		}
	}
	if (bs->b != NULL)
		pfree(bs->b);
	bs->b = out;
	bs->n = n;
	bs->max = room;
}

static void
add_value(Sketch *s, double v)
{
	if (isnan(v))
		s->nan++;
	else if (isinf(v))
	{
		if (v > 0)
			s->pos_inf++;
		else
			s->neg_inf++;
	}
	else if (v == 0)
		s->zero++;
	else if (v > 0)
		buckets_add(s, &s->pos, bucket_of(v), 1);
	else
		buckets_add(s, &s->neg, bucket_of(-v), 1);
}

static void
check_fraction(double f)
{
	if (isnan(f) || f < 0 || f > 1)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("percentile value %g is not between 0 and 1", f)));
}

/*
 * The fractions of a row: the same as those already in s, compared as
 * numbers (-0 is 0).  Kept with -0 as 0, so that the rows' fractions
 * compare with them bit by bit where they are the same.
 */
static void
set_fractions(Sketch *s, const double *f, int n)
{
	if (s->nfractions == 0)
	{
		for (int i = 0; i < n; i++)
			check_fraction(f[i]);
		/* as many as there are: a sketch of a small group stays small */
		s->fractions = MemoryContextAlloc(s->cxt, sizeof(double) * n);
		for (int i = 0; i < n; i++)
			s->fractions[i] = f[i] == 0 ? 0 : f[i];
		s->nfractions = n;
		return;
	}
	if (n == s->nfractions)
	{
		int			i;

		for (i = 0; i < n && f[i] == s->fractions[i]; i++)
			;
		if (i == n)
			return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("approx_percentile must be given the same fractions for every row of a group")));
}

/*
 * The sketch an accumulation call adds to, made on a group's first row.
 * The value may be NULL (left out, as by percentile_disc); the fraction
 * may not.
 */
static Sketch *
accum_sketch(FunctionCallInfo fcinfo)
{
	MemoryContext aggcxt;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "streamwin.approx_percentile called in non-aggregate context");
	if (!PG_ARGISNULL(1) && PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("approx_percentile needs a fraction, not NULL")));
	return PG_ARGISNULL(0) ? sketch_new(aggcxt) : (Sketch *) PG_GETARG_POINTER(0);
}

/*
 * streamwin.approx_percentile_accum(internal, value float8, fraction float8)
 */
Datum
streamwin_approx_percentile_accum(PG_FUNCTION_ARGS)
{
	Sketch	   *s = accum_sketch(fcinfo);
	double		f;

	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(s);
	f = PG_GETARG_FLOAT8(2);
	if (s->nfractions != 1 || memcmp(&f, s->fractions, sizeof(double)) != 0)
		set_fractions(s, &f, 1);
	add_value(s, PG_GETARG_FLOAT8(1));
	PG_RETURN_POINTER(s);
}

/* The fractions of an array argument, checked, into the sketch. */
static void
set_fraction_array(Sketch *s, ArrayType *a)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	double		f[MAX_FRACTIONS];

	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("approx_percentile takes a one-dimensional array of fractions")));
	deconstruct_array(a, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
	if (n < 1 || n > MAX_FRACTIONS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("approx_percentile takes 1 to %d fractions, not %d", MAX_FRACTIONS, n)));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("approx_percentile needs fractions, not NULL")));
		f[i] = DatumGetFloat8(elems[i]);
	}
	set_fractions(s, f, n);
	pfree(elems);
	pfree(nulls);
}

/*
 * streamwin.approx_percentile_accum(internal, value float8, fractions float8[])
 */
Datum
streamwin_approx_percentile_accum_array(PG_FUNCTION_ARGS)
{
	Sketch	   *s = accum_sketch(fcinfo);
	ArrayType  *a;

	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(s);
	a = PG_GETARG_ARRAYTYPE_P(2);

	/*
	 * The same fractions as the group's rows before: compared in place (a
	 * one-dimensional array without NULLs holds its elements right after its
	 * header).
	 */
	if (!(s->nfractions > 0 && ARR_NDIM(a) == 1 && !ARR_HASNULL(a) &&
		  ARR_DIMS(a)[0] == s->nfractions &&
		  memcmp((char *) a + ARR_OVERHEAD_NONULLS(1), s->fractions,
				 sizeof(double) * s->nfractions) == 0))
		set_fraction_array(s, a);
	add_value(s, PG_GETARG_FLOAT8(1));
	PG_RETURN_POINTER(s);
}

/*
 * streamwin.approx_percentile_combine(internal, internal) RETURNS internal
 */
Datum
streamwin_approx_percentile_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	Sketch	   *a;
	Sketch	   *b;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "streamwin.approx_percentile called in non-aggregate context");
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_POINTER(PG_GETARG_POINTER(0));
	}

	/* the first state lives in the aggregate's context: copy the second */
	a = PG_ARGISNULL(0) ? sketch_new(aggcxt) : (Sketch *) PG_GETARG_POINTER(0);
	b = (Sketch *) PG_GETARG_POINTER(1);
	if (b->nfractions > 0)
		set_fractions(a, b->fractions, b->nfractions);
	a->zero = count_add(a->zero, b->zero);
	a->neg_inf = count_add(a->neg_inf, b->neg_inf);
	a->pos_inf = count_add(a->pos_inf, b->pos_inf);
	a->nan = count_add(a->nan, b->nan);
	buckets_merge(a, &a->neg, &b->neg);
	buckets_merge(a, &a->pos, &b->pos);
	PG_RETURN_POINTER(a);
}

static void
send_buckets(StringInfo buf, const Buckets *bs)
{
	pq_sendint32(buf, bs->n);
	for (int i = 0; i < bs->n; i++)
	{
		pq_sendint32(buf, bs->b[i].index);
		pq_sendint64(buf, bs->b[i].count);
	}
}

/*
 * streamwin.approx_percentile_serialize(internal) RETURNS bytea
 */
Datum
streamwin_approx_percentile_serialize(PG_FUNCTION_ARGS)
{
	Sketch	   *s = (Sketch *) PG_GETARG_POINTER(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendbyte(&buf, SKETCH_VERSION);
	pq_sendint32(&buf, s->nfractions);
	for (int i = 0; i < s->nfractions; i++)
		pq_sendfloat8(&buf, s->fractions[i]);
	pq_sendint64(&buf, s->zero);
	pq_sendint64(&buf, s->neg_inf);
	pq_sendint64(&buf, s->pos_inf);
	pq_sendint64(&buf, s->nan);
	send_buckets(&buf, &s->neg);
	send_buckets(&buf, &s->pos);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

static int64 sketch_count(const Sketch *s);

static void
bad_sketch(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid approx_percentile state: %s", why)));
}

static int64
get_count(StringInfo buf)
{
	int64		n = pq_getmsgint64(buf);

	if (n < 0)
		bad_sketch("negative count");
	return n;
}

static void
receive_buckets(StringInfo buf, Sketch *s, Buckets *bs)
{
	int			n = pq_getmsgint(buf, 4);

	if (n < 0 || n > 2 * MAX_INDEX + 1)
		bad_sketch("wrong number of buckets");
	bs->n = bs->max = n;
	bs->b = n > 0 ? MemoryContextAlloc(s->cxt, sizeof(Bucket) * n) : NULL;
	for (int i = 0; i < n; i++)
	{
		bs->b[i].index = pq_getmsgint(buf, 4);
		bs->b[i].count = get_count(buf);
		if (bs->b[i].index < -MAX_INDEX || bs->b[i].index > MAX_INDEX || bs->b[i].count == 0 ||
			(i > 0 && bs->b[i].index <= bs->b[i - 1].index))
			bad_sketch("bucket out of range or out of order");
	}
}

/*
 * streamwin.approx_percentile_deserialize(bytea, internal) RETURNS internal
 */
Datum
streamwin_approx_percentile_deserialize(PG_FUNCTION_ARGS)
{
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	StringInfoData buf;
	Sketch	   *s = sketch_new(CurrentMemoryContext);

	/* read in place: the pq_getmsg functions check every length */
	buf.data = VARDATA_ANY(in);
	buf.len = buf.maxlen = VARSIZE_ANY_EXHDR(in);
	buf.cursor = 0;
	if (pq_getmsgbyte(&buf) != SKETCH_VERSION)
		bad_sketch("unknown version");
	s->nfractions = pq_getmsgint(&buf, 4);
	if (s->nfractions < 0 || s->nfractions > MAX_FRACTIONS)
		bad_sketch("wrong number of fractions");
	s->fractions = MemoryContextAlloc(s->cxt, sizeof(double) * Max(s->nfractions, 1));
	for (int i = 0; i < s->nfractions; i++)
	{
		s->fractions[i] = pq_getmsgfloat8(&buf);
		if (isnan(s->fractions[i]) || s->fractions[i] < 0 || s->fractions[i] > 1)
			bad_sketch("fraction out of range");
		if (s->fractions[i] == 0)
			s->fractions[i] = 0;	/* not -0 (set_fractions) */
	}
	s->zero = get_count(&buf);
	s->neg_inf = get_count(&buf);
	s->pos_inf = get_count(&buf);
	s->nan = get_count(&buf);
	receive_buckets(&buf, s, &s->neg);
	receive_buckets(&buf, s, &s->pos);
	if (buf.cursor != buf.len)
		bad_sketch("trailing bytes");
	/* every value came with its row's fractions (and counts add up) */
	if (s->nfractions == 0 && sketch_count(s) > 0)
		bad_sketch("values without fractions");
	PG_RETURN_POINTER(s);
}

/* The estimate of the value at 0-based ascending position `rank`. */
static double
value_at(const Sketch *s, int64 rank)
{
	if (rank < s->neg_inf)
		return -get_float8_infinity();
	rank -= s->neg_inf;
	/* negative values: largest magnitude first */
	for (int i = s->neg.n - 1; i >= 0; i--)
	{
		if (rank < s->neg.b[i].count)
			return -bucket_value(s->neg.b[i].index);
		rank -= s->neg.b[i].count;
	}
	if (rank < s->zero)
		return 0;
	rank -= s->zero;
	for (int i = 0; i < s->pos.n; i++)
	{
		if (rank < s->pos.b[i].count)
			return bucket_value(s->pos.b[i].index);
		rank -= s->pos.b[i].count;
	}
	if (rank < s->pos_inf)
		return get_float8_infinity();
	return get_float8_nan();
}

static int64
sketch_count(const Sketch *s)
{
	int64		n = count_add(count_add(s->zero, s->neg_inf), count_add(s->pos_inf, s->nan));

	for (int i = 0; i < s->neg.n; i++)
		n = count_add(n, s->neg.b[i].count);
	for (int i = 0; i < s->pos.n; i++)
		n = count_add(n, s->pos.b[i].count);
	return n;
}

/*
 * percentile_disc's position for fraction f of n values (0-based).  n - 1
 * as a double may round up past the largest int64 (a forged state's count):
 * compared before any cast.
 */
static int64
rank_of(double f, int64 n)
{
	double		r = ceil(f * (double) n) - 1;

	if (r < 0)
		return 0;
	if (r >= (double) (n - 1))
		return n - 1;
	return (int64) r;
}

/* The sketch a final function is given, and its count; NULL if it has no values. */
static Sketch *
final_sketch(FunctionCallInfo fcinfo, int64 *n)
{
	Sketch	   *s;

	if (PG_ARGISNULL(0))
		return NULL;
	s = (Sketch *) PG_GETARG_POINTER(0);
	*n = sketch_count(s);
	return *n > 0 ? s : NULL;
}

/*
 * streamwin.approx_percentile_final(internal) RETURNS float8
 */
Datum
streamwin_approx_percentile_final(PG_FUNCTION_ARGS)
{
	int64		n;
	Sketch	   *s = final_sketch(fcinfo, &n);

	if (s == NULL)
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(value_at(s, rank_of(s->fractions[0], n)));
}

/*
 * streamwin.approx_percentile_final_array(internal) RETURNS float8[]
 */
Datum
streamwin_approx_percentile_final_array(PG_FUNCTION_ARGS)
{
	int64		n;
	Sketch	   *s = final_sketch(fcinfo, &n);
	Datum		values[MAX_FRACTIONS];

	if (s == NULL)
		PG_RETURN_NULL();
	for (int i = 0; i < s->nfractions; i++)
		values[i] = Float8GetDatum(value_at(s, rank_of(s->fractions[i], n)));
	PG_RETURN_ARRAYTYPE_P(construct_array(values, s->nfractions, FLOAT8OID, 8, FLOAT8PASSBYVAL,
										  TYPALIGN_DOUBLE));
}
