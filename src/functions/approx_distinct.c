/*-------------------------------------------------------------------------
 *
 * approx_distinct.c
 *	  streamwin.approx_count_distinct(value): the number of distinct
 *	  values, estimated with a HyperLogLog sketch.
 *
 * An exact count(DISTINCT x) cannot be merged from per-batch partial
 * counts, so continuous queries refuse it; a sketch can: merging two
 * sketches (the larger of each register) gives exactly the sketch of all
 * their rows, in any order and any split into batches.  It is an ordinary
 * aggregate with a combine function, so it runs in continuous queries
 * through aggregate_state.c, and in plain SQL (including parallel plans)
 * with the same result over the same rows.  Spark offers the same as
 * approx_count_distinct.
 *
 * 2^14 registers: a standard error of 1.04 / sqrt(2^14), about 0.8%.
 * Values are hashed with their type's extended hash function (under the
 * call's collation, so values that compare equal count once) and the hash
 * is mixed again, since some types' hashes are weak in the high bits that
 * pick the register.  bigint, timestamp, timestamptz and time values are
 * mixed from their 64 bits instead: PostgreSQL's hash of them folds the
 * high half into the low, so values that differ only where the halves
 * cancel (snowflake ids of other seconds and sequence numbers) would count
 * once, and any two values collide with odds of 2^-32.
 *
 * The estimate is Ertl's improved raw estimate ("New cardinality
 * estimation algorithms for HyperLogLog sketches", 2017), from the number
 * of registers at each value: unbiased from one value up, where the
 * classic estimate with linear counting below 2.5 m overestimates by up to
 * 2.5% just above that switch.  It is a function of the registers alone,
 * so it is the same in any order of merging.
 *
 * A sketch holding few values is kept sparse: the registers that are set,
 * as (index, value) pairs, which keeps the state of a small group a few
 * bytes instead of 16 kB, in the state table and in memory (values not
 * yet sorted into the pairs wait in a buffer that grows as they come).
 * Past SPARSE_MAX pairs it becomes a dense array of registers.
 *
 * Stored form (bytea): a version byte, the precision, a format byte
 * (1 sparse, 2 dense), then for sparse the pairs in index order, 3 bytes
 * each (index big-endian, value), for dense one byte per register.
 * Deserialisation checks all of it, since a state is an ordinary bytea
 * that anyone can pass in.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_approx_distinct_accum);
STREAMWIN_SQL_FUNCTION(streamwin_approx_distinct_combine);
STREAMWIN_SQL_FUNCTION(streamwin_approx_distinct_serialize);
STREAMWIN_SQL_FUNCTION(streamwin_approx_distinct_deserialize);
STREAMWIN_SQL_FUNCTION(streamwin_approx_distinct_final);

#define HLL_P			14
#define HLL_M			(1 << HLL_P)
#define HLL_Q			(64 - HLL_P)	/* bits of a hash past the index */
#define HLL_MAX_RHO		(HLL_Q + 1)
#define HLL_VERSION		1
#define HLL_SPARSE		1
#define HLL_DENSE		2
#define HLL_HEADER		3

/* Sparse up to this many set registers (3 bytes each stored, 4 in memory). */
#define SPARSE_MAX		(HLL_M / 8)

/* New sparse pairs are appended unsorted, then sorted in this many at a time. */
#define PENDING_MAX		256
#define PENDING_FIRST	8

typedef struct Sketch
{
	uint8	   *dense;			/* HLL_M registers, or NULL while sparse */
	uint32	   *sparse;			/* (index << 8 | value), sorted, one per
								 * index; NULL while there is none */
	int			nsparse;
	uint32	   *pending;		/* not yet merged into sparse (NULL: none) */
	int			npending;
	int			pending_room;	/* up to PENDING_MAX */
} Sketch;

/* How the values of an accumulation's input type are hashed (fn_extra) */
typedef struct ValueHash
{
	FmgrInfo	fn;				/* the type's extended hash function */
	bool		whole_int64;	/* mix the value's 64 bits instead */
} ValueHash;


static Sketch *
sketch_new(MemoryContext cxt)
{
	return MemoryContextAllocZero(cxt, sizeof(Sketch));
}

static void
make_dense(Sketch *s)
{
	MemoryContext cxt = GetMemoryChunkContext(s);

	s->dense = MemoryContextAllocZero(cxt, HLL_M);
	for (int i = 0; i < s->nsparse; i++)
		s->dense[s->sparse[i] >> 8] = (uint8) (s->sparse[i] & 0xff);
	for (int i = 0; i < s->npending; i++)
	{
		uint32		idx = s->pending[i] >> 8;
		uint8		rho = s->pending[i] & 0xff;

		if (s->dense[idx] < rho)
			s->dense[idx] = rho;
	}
	if (s->sparse != NULL)
		pfree(s->sparse);
	if (s->pending != NULL)
		pfree(s->pending);
	s->sparse = NULL;
	s->pending = NULL;
	s->nsparse = s->npending = s->pending_room = 0;
}

static int
pair_cmp(const void *a, const void *b)
{
	uint32		x = *(const uint32 *) a;
	uint32		y = *(const uint32 *) b;

	return x < y ? -1 : x > y;
}

/*
 * Merge sorted pairs `in` into the sparse list, keeping the largest value
 * per index; becomes dense past SPARSE_MAX.  `in` is sorted by index and
 * value, and may hold an index more than once.
 */
static void
merge_sparse(Sketch *s, const uint32 *in, int nin)
{
	MemoryContext cxt = GetMemoryChunkContext(s);
	uint32	   *out = MemoryContextAlloc(cxt, sizeof(uint32) * (s->nsparse + nin));
	int			i = 0;
	int			j = 0;
	int			n = 0;

	while (i < s->nsparse || j < nin)
	{
		uint32		next;

		if (j >= nin || (i < s->nsparse && s->sparse[i] < in[j]))
			next = s->sparse[i++];
		else
			next = in[j++];
		/* same index as the last one: the later is the larger value */
		if (n > 0 && (out[n - 1] >> 8) == (next >> 8))
			out[n - 1] = next;
		else
			out[n++] = next;
	}
	if (s->sparse != NULL)
		pfree(s->sparse);
	s->sparse = out;
	s->nsparse = n;
	if (n > SPARSE_MAX)
		make_dense(s);
}

static void
flush_pending(Sketch *s)
{
	int			n = s->npending;

	if (n == 0 || s->dense != NULL)
		return;
	qsort(s->pending, n, sizeof(uint32), pair_cmp);
	/* (merge_sparse reads them before it may make the sketch dense) */
	s->npending = 0;
	merge_sparse(s, s->pending, n);
}

static void
set_register(Sketch *s, uint32 idx, uint8 rho)
{
	if (s->dense != NULL)
	{
		if (s->dense[idx] < rho)
			s->dense[idx] = rho;
		return;
	}
	if (s->npending == PENDING_MAX)
		flush_pending(s);
	if (s->dense != NULL)
	{
		if (s->dense[idx] < rho)
			s->dense[idx] = rho;
		return;
	}
	if (s->npending == s->pending_room)
	{
		MemoryContext cxt = GetMemoryChunkContext(s);

		s->pending_room = s->pending_room == 0 ? PENDING_FIRST : s->pending_room * 2;
		s->pending = s->pending == NULL ?
			MemoryContextAlloc(cxt, sizeof(uint32) * s->pending_room) :
			repalloc(s->pending, sizeof(uint32) * s->pending_room);
	}
	s->pending[s->npending++] = idx << 8 | rho;
}

/* murmur3's 64-bit finaliser: every input bit reaches every output bit */
static inline uint64
mix64(uint64 h)
{
	h ^= h >> 33;
	h *= UINT64CONST(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64CONST(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return h;
}

static void
add_hash(Sketch *s, uint64 h)
{
	uint32		idx = (uint32) (h >> (64 - HLL_P));
	uint64		rest = h << HLL_P;
	uint8		rho = rest == 0 ? HLL_MAX_RHO : (uint8) (__builtin_clzll(rest) + 1);

	set_register(s, idx, rho);
}

/*
 * streamwin.approx_distinct_accum(internal, "any") RETURNS internal
 */
Datum
streamwin_approx_distinct_accum(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	Sketch	   *s;

	/* the input type's hash function: a call site's input type is fixed */
	ValueHash  *hash = (ValueHash *) fcinfo->flinfo->fn_extra;
	uint64		h;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "streamwin.approx_count_distinct called in non-aggregate context");
	s = PG_ARGISNULL(0) ? sketch_new(aggcxt) : (Sketch *) PG_GETARG_POINTER(0);
	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(s);	/* NULLs are not counted, as in
								 * count(DISTINCT) */

	if (hash == NULL)
	{
		Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 1);
		TypeCacheEntry *tce = lookup_type_cache(type, TYPECACHE_HASH_EXTENDED_PROC_FINFO);

		if (!OidIsValid(tce->hash_extended_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("could not identify an extended hash function for type %s",
							format_type_be(type)),
					 errhint("approx_count_distinct needs a type with a hash operator class; cast the value to text.")));
		hash = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(ValueHash));
		fmgr_info_copy(&hash->fn, &tce->hash_extended_proc_finfo, fcinfo->flinfo->fn_mcxt);
		/* values equal exactly when their 64 bits are (see the top) */
		hash->whole_int64 = tce->typbyval && tce->typlen == 8 &&
			(tce->hash_extended_proc == F_HASHINT8EXTENDED ||
			 tce->hash_extended_proc == F_TIMESTAMP_HASH_EXTENDED ||
			 tce->hash_extended_proc == F_TIME_HASH_EXTENDED);
		fcinfo->flinfo->fn_extra = hash;
	}
	if (hash->whole_int64)
		h = (uint64) DatumGetInt64(PG_GETARG_DATUM(1)) ^ UINT64CONST(0x9e3779b97f4a7c15);
	else
		h = DatumGetUInt64(FunctionCall2Coll(&hash->fn, PG_GET_COLLATION(), PG_GETARG_DATUM(1),
											 UInt64GetDatum(0)));
	add_hash(s, mix64(h));
	PG_RETURN_POINTER(s);
}

/* Merge sketch b into a (a in its own memory context). */
static void
sketch_merge(Sketch *a, Sketch *b)
{
	flush_pending(b);
	if (b->dense != NULL)
	{
		if (a->dense == NULL)
			make_dense(a);
		for (int i = 0; i < HLL_M; i++)
			if (a->dense[i] < b->dense[i])
				a->dense[i] = b->dense[i];
		return;
	}
	if (a->dense != NULL)
	{
		for (int i = 0; i < b->nsparse; i++)
			set_register(a, b->sparse[i] >> 8, b->sparse[i] & 0xff);
		return;
	}
	flush_pending(a);
	if (a->dense != NULL)
	{
		for (int i = 0; i < b->nsparse; i++)
			set_register(a, b->sparse[i] >> 8, b->sparse[i] & 0xff);
		return;
	}
	merge_sparse(a, b->sparse, b->nsparse);
}

/*
 * streamwin.approx_distinct_combine(internal, internal) RETURNS internal
 */
Datum
streamwin_approx_distinct_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	Sketch	   *a;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "streamwin.approx_count_distinct called in non-aggregate context");
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_POINTER(PG_GETARG_POINTER(0));
	}

	/* the first state lives in the aggregate's context: copy the second */
	a = PG_ARGISNULL(0) ? sketch_new(aggcxt) : (Sketch *) PG_GETARG_POINTER(0);
	sketch_merge(a, (Sketch *) PG_GETARG_POINTER(1));
	PG_RETURN_POINTER(a);
}

/*
 * streamwin.approx_distinct_serialize(internal) RETURNS bytea
 */
Datum
streamwin_approx_distinct_serialize(PG_FUNCTION_ARGS)
{
	Sketch	   *s = (Sketch *) PG_GETARG_POINTER(0);
	bytea	   *out;
	uint8	   *p;

	flush_pending(s);
	if (s->dense != NULL)
	{
		out = palloc(VARHDRSZ + HLL_HEADER + HLL_M);
		SET_VARSIZE(out, VARHDRSZ + HLL_HEADER + HLL_M);
		p = (uint8 *) VARDATA(out);
		p[2] = HLL_DENSE;
		memcpy(p + HLL_HEADER, s->dense, HLL_M);
	}
	else
	{
		out = palloc(VARHDRSZ + HLL_HEADER + 3 * s->nsparse);
		SET_VARSIZE(out, VARHDRSZ + HLL_HEADER + 3 * s->nsparse);
		p = (uint8 *) VARDATA(out);
		p[2] = HLL_SPARSE;
		for (int i = 0; i < s->nsparse; i++)
		{
			uint32		idx = s->sparse[i] >> 8;

			p[HLL_HEADER + 3 * i] = (uint8) (idx >> 8);
			p[HLL_HEADER + 3 * i + 1] = (uint8) (idx & 0xff);
			p[HLL_HEADER + 3 * i + 2] = (uint8) (s->sparse[i] & 0xff);
		}
	}
	p[0] = HLL_VERSION;
	p[1] = HLL_P;
	PG_RETURN_BYTEA_P(out);
}

static void
bad_sketch(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid approx_count_distinct state: %s", why)));
}

/*
 * streamwin.approx_distinct_deserialize(bytea, internal) RETURNS internal
 */
Datum
streamwin_approx_distinct_deserialize(PG_FUNCTION_ARGS)
{
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	const uint8 *p = (const uint8 *) VARDATA_ANY(in);
	int			len = VARSIZE_ANY_EXHDR(in);
	Sketch	   *s;

	if (len < HLL_HEADER || p[0] != HLL_VERSION)
		bad_sketch("unknown version");
	if (p[1] != HLL_P)
		bad_sketch("unknown precision");
	s = sketch_new(CurrentMemoryContext);
	if (p[2] == HLL_DENSE)
	{
		if (len != HLL_HEADER + HLL_M)
			bad_sketch("wrong length");
		s->dense = palloc(HLL_M);
		memcpy(s->dense, p + HLL_HEADER, HLL_M);
		for (int i = 0; i < HLL_M; i++)
			if (s->dense[i] > HLL_MAX_RHO)
				bad_sketch("register out of range");
		PG_RETURN_POINTER(s);
	}
	if (p[2] != HLL_SPARSE || (len - HLL_HEADER) % 3 != 0 || (len - HLL_HEADER) / 3 > SPARSE_MAX)
		bad_sketch("wrong format or length");
	s->nsparse = (len - HLL_HEADER) / 3;
	s->sparse = palloc(sizeof(uint32) * Max(s->nsparse, 1));
	for (int i = 0; i < s->nsparse; i++)
	{
		uint32		idx = (uint32) p[HLL_HEADER + 3 * i] << 8 | p[HLL_HEADER + 3 * i + 1];
		uint8		rho = p[HLL_HEADER + 3 * i + 2];

		if (idx >= HLL_M || rho == 0 || rho > HLL_MAX_RHO ||
			(i > 0 && idx <= (s->sparse[i - 1] >> 8)))
			bad_sketch("register out of range or out of order");
		s->sparse[i] = idx << 8 | rho;
	}
	PG_RETURN_POINTER(s);
}

/* Ertl's sigma(x) = x + sum over k >= 1 of x^(2^k) 2^(k-1), for x < 1 */
static double
hll_sigma(double x)
{
	double		y = 1;
	double		z = x;
	double		last;

	do
	{
		x *= x;
		last = z;
		z += x * y;
		y += y;
	} while (z != last);
	return z;
}

/* Ertl's tau(x) = (1 - x - sum over k >= 1 of (1 - x^(2^-k))^2 2^-k) / 3 */
static double
hll_tau(double x)
{
	double		y = 1;
	double		z;
	double		last;

	if (x == 0 || x == 1)
		return 0;
	z = 1 - x;
	do
	{
		x = sqrt(x);
		last = z;
		y *= 0.5;
		z -= (1 - x) * (1 - x) * y;
	} while (z != last);
	return z / 3;
}

/*
 * streamwin.approx_distinct_final(internal) RETURNS bigint
 */
Datum
streamwin_approx_distinct_final(PG_FUNCTION_ARGS)
{
	Sketch	   *s;
	int			at[HLL_MAX_RHO + 1] = {0};	/* registers at each value */
	double		m = HLL_M;
	double		z;
	double		estimate;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT64(0);
	s = (Sketch *) PG_GETARG_POINTER(0);
	flush_pending(s);
	if (s->dense != NULL)
		for (int i = 0; i < HLL_M; i++)
			at[s->dense[i]]++;
	else
	{
		at[0] = HLL_M - s->nsparse;
		for (int i = 0; i < s->nsparse; i++)
			at[s->sparse[i] & 0xff]++;
	}
	if (at[0] == HLL_M)
		PG_RETURN_INT64(0);
	z = m * hll_tau((m - at[HLL_Q + 1]) / m);
	for (int k = HLL_Q; k >= 1; k--)
		z = 0.5 * (z + at[k]);
	z += m * hll_sigma(at[0] / m);
	/* alpha_inf m^2 / z, alpha_inf = 1 / (2 ln 2); z is 0 only when every register is at its top */
	estimate = z > 0 ? m * m / (2 * M_LN2) / z : 9.0e18;
	/* a forged state's registers can claim more than int64 counts */
	PG_RETURN_INT64((int64) llround(Min(estimate, 9.0e18)));
}
