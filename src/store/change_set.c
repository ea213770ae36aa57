/*-------------------------------------------------------------------------
 *
 * change_set.c
 *	  Counted values: what min, max and DISTINCT aggregates keep per open
 *	  group over a changelog source, so that a retracted row takes back
 *	  exactly its value.
 *
 * Over an append stream, min(x) keeps one value and a DISTINCT aggregate
 * the set of values seen (distinct_set.c): a value only ever arrives.  Over
 * a changelog a value may also leave (the row that held it is updated or
 * deleted), and the minimum must then fall back to the next value, which
 * only the count of each value can tell.  So such a partial is a change
 * set: each distinct non-NULL value with the number of rows that hold it,
 * ascending by the value type's default ordering in the aggregate's
 * collation, values whose count is 0 left out.
 *
 *	streamwin.change_set(x anyelement, change smallint): the aggregate of a
 *		batch's rows (change: +1 added, -1 retracted) into a set;
 *	streamwin.change_set_merge(a bytea, b bytea): two sets' counts added,
 *		which the state store merges a batch's set into the group's with;
 *	streamwin.change_set_min(set, NULL::type), _max, and
 *	streamwin.change_set_values(set, NULL::type): the final values (an
 *		array of the values, for a DISTINCT aggregate to run over).
 *
 * A set is bytea: the element type and collation, the number of values,
 * then each value's count and its binary send format, so that it survives
 * pg_dump and a restore elsewhere like any column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_change_set_accum);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_final);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_merge);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_min);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_max);
STREAMWIN_SQL_FUNCTION(streamwin_change_set_values);

#define CHANGE_SET_VERSION 1

/* How values of one type are compared, sent and received. */
typedef struct SetTypeInfo
{
	Oid			typid;
	Oid			collid;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	FmgrInfo	cmp;
	FmgrInfo	send;
	FmgrInfo	recv;
	Oid			recv_ioparam;
} SetTypeInfo;

/* A set in memory: values ascending, with their counts. */
typedef struct ChangeSet
{
	SetTypeInfo *type;
	int			n;
	int			max;
	Datum	   *values;
	int64	   *counts;
} ChangeSet;

/* The type's functions, kept in fn_extra (in fn_mcxt) between calls. */
static SetTypeInfo *
set_type_info(FunctionCallInfo fcinfo, Oid typid, Oid collid)
{
	SetTypeInfo *t = fcinfo->flinfo->fn_extra;

	if (t == NULL || t->typid != typid)
	{
		TypeCacheEntry *tce = lookup_type_cache(typid, TYPECACHE_CMP_PROC_FINFO);
		Oid			send;
		Oid			recv;
		bool		isvarlena;

		if (!OidIsValid(tce->cmp_proc_finfo.fn_oid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("could not identify a comparison function for type %s",
							format_type_be(typid))));
		t = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(SetTypeInfo));
		t->typid = typid;
		get_typlenbyvalalign(typid, &t->typlen, &t->typbyval, &t->typalign);
		fmgr_info_cxt(tce->cmp_proc_finfo.fn_oid, &t->cmp, fcinfo->flinfo->fn_mcxt);
		getTypeBinaryOutputInfo(typid, &send, &isvarlena);
		getTypeBinaryInputInfo(typid, &recv, &t->recv_ioparam);
		fmgr_info_cxt(send, &t->send, fcinfo->flinfo->fn_mcxt);
		fmgr_info_cxt(recv, &t->recv, fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = t;
	}
	t->collid = collid;
	return t;
}

static int
compare_values(SetTypeInfo *t, Datum a, Datum b)
{
	return DatumGetInt32(FunctionCall2Coll(&t->cmp, t->collid, a, b));
}

/* Room for one more value. */
static void
set_grow(ChangeSet *s)
{
	if (s->n < s->max)
		return;
	s->max = Max(s->max * 2, 8);
	s->values = s->values ? repalloc(s->values, sizeof(Datum) * s->max) :
		palloc(sizeof(Datum) * s->max);
	s->counts = s->counts ? repalloc(s->counts, sizeof(int64) * s->max) :
		palloc(sizeof(int64) * s->max);
}

/* Add count to value's count (a copy of value, if new), keeping the order. */
static void
set_add(ChangeSet *s, Datum value, int64 count)
{
	int			lo = 0;
	int			hi = s->n;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;
		int			c = compare_values(s->type, s->values[mid], value);

		if (c == 0)
		{
			s->counts[mid] += count;
			return;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	set_grow(s);
	memmove(&s->values[lo + 1], &s->values[lo], sizeof(Datum) * (s->n - lo));
	memmove(&s->counts[lo + 1], &s->counts[lo], sizeof(int64) * (s->n - lo));
	s->values[lo] = datumCopy(value, s->type->typbyval, s->type->typlen);
	s->counts[lo] = count;
	s->n++;
}

/* The set as bytea, its values of count 0 left out. */
static bytea *
set_serialize(ChangeSet *s)
{
	StringInfoData buf;
	int			n = 0;

	for (int i = 0; i < s->n; i++)
		if (s->counts[i] != 0)
			n++;
	pq_begintypsend(&buf);
	pq_sendint32(&buf, CHANGE_SET_VERSION);
	pq_sendint32(&buf, s->type->typid);
	pq_sendint32(&buf, s->type->collid);
	pq_sendint32(&buf, n);
	for (int i = 0; i < s->n; i++)
	{
		bytea	   *v;

		if (s->counts[i] == 0)
			continue;
		v = SendFunctionCall(&s->type->send, s->values[i]);
		pq_sendint64(&buf, s->counts[i]);
		pq_sendint32(&buf, VARSIZE(v) - VARHDRSZ);
		pq_sendbytes(&buf, VARDATA(v), VARSIZE(v) - VARHDRSZ);
	}
	return pq_endtypsend(&buf);
}

/*
 * A set's bytea read in place (only read: pq_getmsg* do not write), its
 * header checked; leaves buf at the first value and returns the number of
 * values.
 */
static int
set_open(bytea *b, StringInfo buf, Oid *typid, Oid *collid)
{
	buf->data = VARDATA_ANY(b);
	buf->len = VARSIZE_ANY_EXHDR(b);
	buf->maxlen = buf->len;
	buf->cursor = 0;
	if (pq_getmsgint(buf, 4) != CHANGE_SET_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("streamwin: a change set of an unknown version")));
	*typid = pq_getmsgint(buf, 4);
	*collid = pq_getmsgint(buf, 4);
	return pq_getmsgint(buf, 4);
}

/*
 * One value of a set, from its len bytes of send format: received from a
 * null-terminated copy in item (reused from value to value), which the
 * receive function may alter; what it returns is its own.
 */
static Datum
set_receive(SetTypeInfo *t, StringInfo item, const char *bytes, int len)
{
	resetStringInfo(item);
	appendBinaryStringInfo(item, bytes, len);
	return ReceiveFunctionCall(&t->recv, item, t->recv_ioparam, -1);
}

/* A set from bytea, in CurrentMemoryContext. */
static ChangeSet *
set_deserialize(FunctionCallInfo fcinfo, bytea *b)
{
	StringInfoData buf;
	StringInfoData item;
	ChangeSet  *s = palloc0(sizeof(ChangeSet));
	Oid			typid;
	Oid			collid;

	s->max = set_open(b, &buf, &typid, &collid);
	s->type = set_type_info(fcinfo, typid, collid);
	s->values = palloc(sizeof(Datum) * Max(s->max, 1));
	s->counts = palloc(sizeof(int64) * Max(s->max, 1));
	initStringInfo(&item);
	for (s->n = 0; s->n < s->max; s->n++)
	{
		int			len;

		s->counts[s->n] = pq_getmsgint64(&buf);
		len = pq_getmsgint(&buf, 4);
		s->values[s->n] = set_receive(s->type, &item, pq_getmsgbytes(&buf, len), len);
	}
	pq_getmsgend(&buf);
	pfree(item.data);
	return s;
}

/*
 * streamwin.change_set_accum(state internal, x anyelement, change smallint):
 * the transition of streamwin.change_set.  A NULL x counts for nothing, as
 * min, max and DISTINCT aggregates skip NULL.
 */
Datum
streamwin_change_set_accum(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	MemoryContext old;
	ChangeSet  *s = PG_ARGISNULL(0) ? NULL : (ChangeSet *) PG_GETARG_POINTER(0);

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "streamwin.change_set_accum called in non-aggregate context");
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
	{
		if (s == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(s);
	}
	old = MemoryContextSwitchTo(aggcxt);
	if (s == NULL)
	{
		s = palloc0(sizeof(ChangeSet));
		s->type = set_type_info(fcinfo, get_fn_expr_argtype(fcinfo->flinfo, 1), PG_GET_COLLATION());
	}
	set_add(s, PG_GETARG_DATUM(1), PG_GETARG_INT16(2));
	MemoryContextSwitchTo(old);
	PG_RETURN_POINTER(s);
}

/* streamwin.change_set_final(state internal) RETURNS bytea */
Datum
streamwin_change_set_final(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(set_serialize((ChangeSet *) PG_GETARG_POINTER(0)));
}

/*
 * streamwin.change_set_merge(a bytea, b bytea) RETURNS bytea: each value
 * counted as often as in a and b together; NULL is the empty set.
 */
Datum
streamwin_change_set_merge(PG_FUNCTION_ARGS)
{
	ChangeSet  *a;
	ChangeSet  *b;

	if (PG_ARGISNULL(0) && PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(0))
		PG_RETURN_DATUM(PG_GETARG_DATUM(1));
	if (PG_ARGISNULL(1))
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	a = set_deserialize(fcinfo, PG_GETARG_BYTEA_PP(0));
	b = set_deserialize(fcinfo, PG_GETARG_BYTEA_PP(1));
	if (a->type->typid != b->type->typid)
		elog(ERROR, "streamwin: change sets of types %s and %s cannot merge",
			 format_type_be(a->type->typid), format_type_be(b->type->typid));
	for (int i = 0; i < b->n; i++)
		set_add(a, b->values[i], b->counts[i]);
	PG_RETURN_BYTEA_P(set_serialize(a));
}

/* The values a set holds: count > 0 (none: a set of retractions only). */
static ChangeSet *
final_set(FunctionCallInfo fcinfo)
{
	ChangeSet  *s;
	int			kept = 0;

	if (PG_ARGISNULL(0))
		return NULL;
	s = set_deserialize(fcinfo, PG_GETARG_BYTEA_PP(0));
	if (s->type->typid != get_fn_expr_argtype(fcinfo->flinfo, 1))
		elog(ERROR, "streamwin: a change set of type %s read as %s",
			 format_type_be(s->type->typid),
			 format_type_be(get_fn_expr_argtype(fcinfo->flinfo, 1)));
	for (int i = 0; i < s->n; i++)
		if (s->counts[i] > 0)
		{
			s->values[kept] = s->values[i];
			s->counts[kept++] = s->counts[i];
		}
	s->n = kept;
	return s;
}

/*
 * The smallest (last: the largest) value a set holds, count > 0, as
 * final_set would give it, but received alone: the others are skipped
 * over in their send format.  A set in a group's state has every value of
 * the group's rows, and min or max is computed for the group after every
 * batch that changes it.
 */
static Datum
set_extreme(FunctionCallInfo fcinfo, bool last)
{
	StringInfoData buf;
	StringInfoData item;
	Oid			typid;
	Oid			collid;
	int			n;
	const char *found = NULL;
	int			found_len = 0;
	Datum		result;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	n = set_open(PG_GETARG_BYTEA_PP(0), &buf, &typid, &collid);
	if (typid != get_fn_expr_argtype(fcinfo->flinfo, 1))
		elog(ERROR, "streamwin: a change set of type %s read as %s",
			 format_type_be(typid), format_type_be(get_fn_expr_argtype(fcinfo->flinfo, 1)));
	for (int i = 0; i < n; i++)
	{
		int64		count = pq_getmsgint64(&buf);
		int			len = pq_getmsgint(&buf, 4);
		const char *bytes = pq_getmsgbytes(&buf, len);

		if (count > 0)
		{
			found = bytes;
			found_len = len;
			if (!last)
				break;
		}
	}
	if (found == NULL)
		PG_RETURN_NULL();			/* none: a set of retractions only */
	initStringInfo(&item);
	result = set_receive(set_type_info(fcinfo, typid, collid), &item, found, found_len);
	pfree(item.data);
	PG_RETURN_DATUM(result);
}

/* streamwin.change_set_min(set bytea, type anyelement) RETURNS anyelement */
Datum
streamwin_change_set_min(PG_FUNCTION_ARGS)
{
	return set_extreme(fcinfo, false);
}

/* streamwin.change_set_max(set bytea, type anyelement) RETURNS anyelement */
Datum
streamwin_change_set_max(PG_FUNCTION_ARGS)
{
	return set_extreme(fcinfo, true);
}

/* streamwin.change_set_values(set bytea, type anyelement) RETURNS anyarray */
Datum
streamwin_change_set_values(PG_FUNCTION_ARGS)
{
	ChangeSet  *s = final_set(fcinfo);
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 1);

	if (s == NULL || s->n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(typid));
	PG_RETURN_ARRAYTYPE_P(construct_array(s->values, s->n, typid, s->type->typlen,
										  s->type->typbyval, s->type->typalign));
}
