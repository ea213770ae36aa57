/*-------------------------------------------------------------------------
 *
 * aggregate_state.c
 *	  Any aggregate with a combine function in a continuous query: its
 *	  transition state kept as bytea in the state table, built per batch,
 *	  merged batch by batch and finalised from there.
 *
 * count, sum, min, max, avg and bool_and/or keep plain values, merged by
 * the state store or in plain SQL (see compile_aggregate.c).  Every other
 * aggregate that PostgreSQL itself could split for parallel aggregation (it
 * has a combine function, and serialisation functions if its state is
 * internal) is run through the functions here, named by the aggregate's
 * regprocedure:
 *
 *	 streamwin.partial_state(agg, args...)	  aggregate: the batch's state
 *	 streamwin.combine_states(agg, a, b)	  scalar: merge two stored states
 *	 streamwin.combined_state(agg, state)	  aggregate: merge many (sessions)
 *	 streamwin.finish_state(agg, state, NULL::result type)	 the final value
 *
 * A state is stored as the aggregate's serialisation function writes it
 * (internal states) or in the state type's binary send format (others);
 * NULL stands for the initial state, which is what a group whose rows were
 * all filtered out holds.  Merging with NULL leaves the other state as it is.
 *
 * The aggregate's own functions are called as the executor calls them:
 * strict transition functions skip NULL input and start from the first
 * value, by-reference states are kept in the aggregate's memory context,
 * and they see an aggregate call context (the executor's own while
 * aggregating; outside an aggregate, a window aggregate's context over the
 * current memory context, which is all AggCheckCallContext looks at), since
 * many of them refuse to run without one.
 *
 * Privileges are checked as the executor checks them for the aggregate
 * itself: EXECUTE on the aggregate for the caller, and on its support
 * functions for the aggregate's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "parser/parse_agg.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/expandeddatum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "aggregate_state.h"
#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_partial_state_accum);
STREAMWIN_SQL_FUNCTION(streamwin_combined_state_accum);
STREAMWIN_SQL_FUNCTION(streamwin_state_serialize);
STREAMWIN_SQL_FUNCTION(streamwin_combine_states);
STREAMWIN_SQL_FUNCTION(streamwin_finish_state);

/* What streamwin needs to know of one aggregate, kept in fn_extra. */
typedef struct AggSupport
{
	Oid			aggfnoid;
	int			numargs;		/* declared inputs */
	Oid			resulttype;
	Oid			transtype;
	int16		translen;
	bool		transbyval;
	bool		initnull;
	Datum		initval;		/* in fn_mcxt */
	FmgrInfo	transfn;
	FmgrInfo	combinefn;
	FmgrInfo	finalfn;
	bool		has_final;
	bool		final_extra;	/* finalfn takes the inputs too (as NULLs) */
	/* to and from bytea: serialfn/deserialfn, or the type's send/receive */
	FmgrInfo	serialfn;
	FmgrInfo	deserialfn;
	Oid			recv_ioparam;
	/* aggregate call context outside an Agg node (see file header) */
	WindowAggState *scratch;
	FunctionCallInfo call;		/* room for the largest call made */
	MemoryContext cxt;			/* all of the above */
} AggSupport;

/* The transition state of partial_state() and combined_state(). */
typedef struct StateValue
{
	AggSupport *agg;
	Datum		value;
	bool		isnull;
	bool		started;		/* value is set (else: the initial state) */
} StateValue;

static void
check_function_privilege(Oid fn, Oid role)
{
	AclResult	acl;

	if (!OidIsValid(fn))
		return;
	acl = pg_proc_aclcheck(fn, role, ACL_EXECUTE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_FUNCTION, get_func_name(fn));
}

/*
 * The transition, combine and final functions, with the call expressions
 * the executor gives them (some read their argument types from there).
 */
static void
support_functions(AggSupport *a, Form_pg_aggregate agg, Oid *inputtypes, Oid collation,
				  MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Expr	   *expr;

	fmgr_info_cxt(agg->aggtransfn, &a->transfn, cxt);
	build_aggregate_transfn_expr(inputtypes, a->numargs, 0, false, a->transtype, collation,
								 agg->aggtransfn, InvalidOid, &expr, NULL);
	a->transfn.fn_expr = (Node *) expr;

	fmgr_info_cxt(agg->aggcombinefn, &a->combinefn, cxt);
	build_aggregate_transfn_expr(&a->transtype, 1, 0, false, a->transtype, collation,
								 agg->aggcombinefn, InvalidOid, &expr, NULL);
	a->combinefn.fn_expr = (Node *) expr;

	if (a->has_final)
	{
		fmgr_info_cxt(agg->aggfinalfn, &a->finalfn, cxt);
		build_aggregate_finalfn_expr(inputtypes, a->final_extra ? a->numargs + 1 : 1,
									 a->transtype, a->resulttype, collation,
									 agg->aggfinalfn, &expr);
		a->finalfn.fn_expr = (Node *) expr;
	}
	MemoryContextSwitchTo(old);
}

/*
 * partial_state_supported
 *		See aggregate_state.h.  create_query refuses what this refuses, with
 *		its detail; the functions here, called with any regprocedure, too.
 */
static bool deserializer_checked(Oid deserialfn);

bool
partial_state_supported(Oid aggfnoid, const char **detail, const char **hint)
{
	HeapTuple	aggtup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	HeapTuple	proctup;
	Form_pg_aggregate agg;
	Form_pg_proc proc;
	bool		polymorphic;

	*detail = NULL;
	*hint = "Use an aggregate with a combine function (one PostgreSQL can run in parallel), "
		"such as count, sum, avg, min, max, stddev, variance, corr or bit_or.";
	if (!HeapTupleIsValid(aggtup))
	{
		*detail = "It is not an aggregate.";
		return false;
	}
	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(aggfnoid));
	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u", aggfnoid);
	agg = (Form_pg_aggregate) GETSTRUCT(aggtup);
	proc = (Form_pg_proc) GETSTRUCT(proctup);
	polymorphic = IsPolymorphicType(agg->aggtranstype) || IsPolymorphicType(proc->prorettype);
	for (int i = 0; i < proc->pronargs; i++)
		polymorphic |= IsPolymorphicType(proc->proargtypes.values[i]);

	if (agg->aggkind != AGGKIND_NORMAL)
		*detail = "Ordered-set and hypothetical-set aggregates need all of a group's rows at once.";
	else if (!OidIsValid(agg->aggcombinefn))
		*detail = "It has no combine function, so its partial results cannot be merged batch by batch.";
	else if (agg->aggtranstype == INTERNALOID &&
			 (!OidIsValid(agg->aggserialfn) || !OidIsValid(agg->aggdeserialfn)))
		*detail = "Its state is of type internal and it has no serialization functions, "
			"so its partial results cannot be stored between batches.";
	else if (agg->aggtranstype == INTERNALOID && !deserializer_checked(agg->aggdeserialfn))
	{
		*detail = "Its state is of type internal, kept as bytes that its deserialization function "
			"trusts (PostgreSQL only ever hands it what its serialization wrote); streamwin's "
			"functions take such bytes from SQL and from state tables, and check those of "
			"PostgreSQL's numeric aggregates and of its own only.";
		*hint = "Use one of PostgreSQL's aggregates, or one whose state has a type of its own rather than internal.";
	}
	else if (polymorphic || OidIsValid(proc->provariadic))
	{
		*detail = "Polymorphic and variadic aggregates other than min and max cannot keep partial "
			"results between batches.";
		*hint = "Cast the argument to a fixed type and use an aggregate declared for that type.";
	}
	ReleaseSysCache(proctup);
	ReleaseSysCache(aggtup);
	return *detail == NULL;
}

/*
 * agg_support
 *		The support data of aggregate aggfnoid for this call site, looked up
 *		on its first call.  Refuses what cannot be split into mergeable
 *		states; the messages only matter to direct callers, since
 *		create_query checks the same before it uses these functions.
 *		first_input: where the aggregate's inputs start among the call's
 *		arguments (-1: not there); they are checked against the aggregate's
 *		argument types here, once per call site rather than once per row.
 */
static AggSupport *
agg_support(FunctionCallInfo fcinfo, Oid aggfnoid, int first_input, bool free_replaced)
{
	AggSupport *a = (AggSupport *) fcinfo->flinfo->fn_extra;
	AggSupport *replaced = a;
	MemoryContext cxt;
	HeapTuple	aggtup;
	HeapTuple	proctup;
	Form_pg_aggregate agg;
	Form_pg_proc proc;
	Datum		initdatum;
	AclResult	acl;
	Oid			owner;
	MemoryContext old;
	Oid			inputtypes[FUNC_MAX_ARGS];
	const char *detail;
	const char *hint;

	if (a != NULL && a->aggfnoid == aggfnoid)
		return a;

	if (!SearchSysCacheExists1(AGGFNOID, ObjectIdGetDatum(aggfnoid)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("function %s is not an aggregate", format_procedure(aggfnoid))));
	if (!partial_state_supported(aggfnoid, &detail, &hint))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("aggregate %s cannot be merged from partial states", format_procedure(aggfnoid)),
				 errdetail("%s", detail)));
	aggtup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(aggfnoid));
	if (!HeapTupleIsValid(aggtup) || !HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
	agg = (Form_pg_aggregate) GETSTRUCT(aggtup);
	proc = (Form_pg_proc) GETSTRUCT(proctup);

	acl = pg_proc_aclcheck(aggfnoid, GetUserId(), ACL_EXECUTE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_AGGREGATE, get_func_name(aggfnoid));
	owner = proc->proowner;
	check_function_privilege(agg->aggtransfn, owner);
	check_function_privilege(agg->aggcombinefn, owner);
	check_function_privilege(agg->aggfinalfn, owner);
	check_function_privilege(agg->aggserialfn, owner);
	check_function_privilege(agg->aggdeserialfn, owner);

	if (first_input >= 0)
	{
		int			ninputs = PG_NARGS() - first_input;

		if (ninputs != proc->pronargs)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("aggregate %s takes %d arguments, not %d",
							format_procedure(aggfnoid), proc->pronargs, ninputs)));
		for (int i = 0; i < ninputs; i++)
		{
			Oid			declared = proc->proargtypes.values[i];

			inputtypes[i] = get_fn_expr_argtype(fcinfo->flinfo, first_input + i);
			if (declared != ANYOID && inputtypes[i] != declared)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("argument %d of aggregate %s must be of type %s, not %s",
								i + 1, format_procedure(aggfnoid),
								format_type_be(declared), format_type_be(inputtypes[i]))));
		}
	}
	else
		memcpy(inputtypes, proc->proargtypes.values, sizeof(Oid) * proc->pronargs);

	/* a new one if the aggregate changed: never a half-filled one in fn_extra */
	cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "streamwin aggregate support",
								ALLOCSET_SMALL_SIZES);
	a = MemoryContextAllocZero(cxt, sizeof(AggSupport));
	a->cxt = cxt;
	a->aggfnoid = aggfnoid;
	a->numargs = proc->pronargs;
	a->resulttype = proc->prorettype;
	a->transtype = agg->aggtranstype;
	get_typlenbyval(a->transtype, &a->translen, &a->transbyval);

	initdatum = SysCacheGetAttr(AGGFNOID, aggtup, Anum_pg_aggregate_agginitval, &a->initnull);
	if (!a->initnull)
	{
		Oid			input;
		Oid			ioparam;
		char	   *init = TextDatumGetCString(initdatum);

		old = MemoryContextSwitchTo(cxt);
		getTypeInputInfo(a->transtype, &input, &ioparam);
		a->initval = OidInputFunctionCall(input, init, ioparam, -1);
		MemoryContextSwitchTo(old);
	}

	a->has_final = OidIsValid(agg->aggfinalfn);
	a->final_extra = agg->aggfinalextra;
	support_functions(a, agg, inputtypes, PG_GET_COLLATION(), cxt);
	if (a->transtype == INTERNALOID)
	{
		Expr	   *expr;

		fmgr_info_cxt(agg->aggserialfn, &a->serialfn, cxt);
		fmgr_info_cxt(agg->aggdeserialfn, &a->deserialfn, cxt);
		old = MemoryContextSwitchTo(cxt);
		build_aggregate_serialfn_expr(agg->aggserialfn, &expr);
		a->serialfn.fn_expr = (Node *) expr;
		build_aggregate_deserialfn_expr(agg->aggdeserialfn, &expr);
		a->deserialfn.fn_expr = (Node *) expr;
		MemoryContextSwitchTo(old);
	}
	else
	{
		Oid			send;
		Oid			recv;
		bool		varlena;

		getTypeBinaryOutputInfo(a->transtype, &send, &varlena);
		getTypeBinaryInputInfo(a->transtype, &recv, &a->recv_ioparam);
		fmgr_info_cxt(send, &a->serialfn, cxt);
		fmgr_info_cxt(recv, &a->deserialfn, cxt);
	}

	a->scratch = MemoryContextAllocZero(cxt, sizeof(WindowAggState));
	a->scratch->ss.ps.type = T_WindowAggState;
	a->call = MemoryContextAllocZero(cxt, SizeForFunctionCallInfo(FUNC_MAX_ARGS));

	ReleaseSysCache(proctup);
	ReleaseSysCache(aggtup);
	fcinfo->flinfo->fn_extra = a;

	/*
	 * A call given another aggregate row after row (combine_states of a
	 * column of regprocedures) keeps one support, not one per row; an
	 * aggregate's groups keep theirs (partial_state's StateValue).
	 */
	if (free_replaced && replaced != NULL)
		MemoryContextDelete(replaced->cxt);
	return a;
}

/*
 * The context to call the aggregate's functions with: the executor's own
 * inside an aggregate, else an aggregate context over the current memory
 * context, which the result of a scalar call outlives anyway.
 */
static Node *
call_context(AggSupport *a, FunctionCallInfo fcinfo)
{
	if (AggCheckCallContext(fcinfo, NULL))
		return fcinfo->context;
	a->scratch->curaggcontext = CurrentMemoryContext;
	return (Node *) a->scratch;
}

/* Call fn with the first nargs arguments set up in a->call. */
static Datum
call_support(AggSupport *a, FmgrInfo *fn, int nargs, Node *context, Oid collation, bool *isnull)
{
	FunctionCallInfo call = a->call;
	Datum		result;

	call->flinfo = fn;
	call->context = context;
	call->resultinfo = NULL;
	call->fncollation = collation;
	call->nargs = nargs;
	call->isnull = false;
	result = FunctionCallInvoke(call);
	*isnull = call->isnull;
	return result;
}

/* state (not NULL) -> bytea */
static bytea *
serialize_state(AggSupport *a, Datum value, Node *context)
{
	bool		isnull;
	Datum		result;

	if (a->transtype != INTERNALOID)
		return SendFunctionCall(&a->serialfn, value);
	a->call->args[0].value = value;
	a->call->args[0].isnull = false;
	result = call_support(a, &a->serialfn, 1, context, InvalidOid, &isnull);
	if (isnull)
		elog(ERROR, "serialization function of aggregate %s returned NULL",
			 format_procedure(a->aggfnoid));
	return DatumGetByteaPP(result);
}

/*
 * The partial states of PostgreSQL's numeric accumulators (sum and avg of
 * numeric and bigint, the variance family) are read by deserialization
 * functions that trust their bytes: the executor only ever gives them what
 * their own serialization wrote.  Here the bytes come from SQL arguments
 * and from state tables their owner may write, so they are checked first
 * against the layout those functions write: a count, then `nvars` numeric
 * values (int32 ndigits, weight, sign and dscale, then the int16 digits),
 * then for numeric's own states the scale and special-value counts.  A
 * weight or digit out of range would make the accumulator write outside
 * its buffer.  The values are sums, and sums of squares, which go past
 * what a stored numeric holds: the bounds only keep the accumulator's
 * sizes from overflowing.
 */
/*
 * A numeric holds up to 131,072 digits before its point and 16,383 after
 * (32,768 and 4,096 base-10000 digits), a square twice as many; and a sum
 * of them a few more.  Larger bounds let a state of megabytes make its
 * accumulator multiply for minutes, in loops no cancel interrupts.
 */
#define STATE_NUMERIC_MAX_DIGITS	(2 * (32768 + 4096) + 8)
#define STATE_NUMERIC_MAX_WEIGHT	(2 * 32768 + 8)
#define STATE_NUMERIC_MAX_DSCALE	(2 * 0x3FFF)	/* a square's: twice NUMERIC_DSCALE_MAX */

static void
check_numeric_state(AggSupport *a, bytea *data, int nvars, bool numeric_tail)
{
	StringInfoData buf;
	bool		ok = true;

	buf.data = VARDATA_ANY(data);
	buf.len = VARSIZE_ANY_EXHDR(data);
	buf.maxlen = buf.len;
	buf.cursor = 0;

#define STATE_NEED(n) do { if (buf.len - buf.cursor < (n)) { ok = false; goto done; } } while (0)
	STATE_NEED(8);
	(void) pq_getmsgint64(&buf);	/* N */
	for (int v = 0; v < nvars; v++)
	{
		int32		ndigits,
					weight,
					sign,
					dscale;

		STATE_NEED(16);
		ndigits = (int32) pq_getmsgint(&buf, 4);
		weight = (int32) pq_getmsgint(&buf, 4);
		sign = (int32) pq_getmsgint(&buf, 4);
		dscale = (int32) pq_getmsgint(&buf, 4);
		if (ndigits < 0 || ndigits > STATE_NUMERIC_MAX_DIGITS ||
			weight < -STATE_NUMERIC_MAX_WEIGHT || weight > STATE_NUMERIC_MAX_WEIGHT ||
			(sign != 0x0000 && sign != 0x4000) ||	/* NUMERIC_POS, NUMERIC_NEG */
			dscale < 0 || dscale > STATE_NUMERIC_MAX_DSCALE)
		{
			ok = false;
			goto done;
		}
		STATE_NEED(2 * ndigits);
		for (int d = 0; d < ndigits; d++)
		{
			int16		digit = (int16) pq_getmsgint(&buf, 2);

			if (digit < 0 || digit >= 10000)	/* NBASE */
			{
				ok = false;
				goto done;
			}
		}
	}
	if (numeric_tail)
		STATE_NEED(4 + 4 * 8);	/* maxScale, maxScaleCount, NaN, +inf, -inf counts */
#undef STATE_NEED
done:
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid partial state of aggregate %s", format_procedure(a->aggfnoid)),
				 errdetail("The bytes are not a state this aggregate writes.")));
}

/* The numeric accumulators' deserialization functions, and their layouts */
static const struct
{
	Oid			deserialfn;
	int			nvars;			/* numeric values after the count */
	bool		tail;			/* then numeric's scale and special counts */
}			numeric_states[] =
{
	{F_INT8_AVG_DESERIALIZE, 1, false},
	{F_NUMERIC_POLY_DESERIALIZE, 2, false},
	{F_NUMERIC_AVG_DESERIALIZE, 1, true},
	{F_NUMERIC_DESERIALIZE, 2, true},
};

/*
 * Does streamwin check the bytes that deserialization function deserialfn
 * reads (of an aggregate whose state is internal), before it reads them:
 * PostgreSQL's numeric accumulators' (check_numeric_state), and streamwin's
 * own, which check every length and range themselves?  Another extension's
 * may read a length from the bytes and copy that much (PostGIS's ST_Union
 * does): SQL-callable as combine_states and finish_state are, that would
 * let any role crash the server.
 */
static bool
deserializer_checked(Oid deserialfn)
{
	for (int i = 0; i < (int) lengthof(numeric_states); i++)
		if (deserialfn == numeric_states[i].deserialfn)
			return true;
	return get_func_namespace(deserialfn) == get_namespace_oid("streamwin", false);
}

/* bytea -> state, in the current memory context */
static Datum
deserialize_state(AggSupport *a, bytea *data, Node *context)
{
	bool		isnull;
	Datum		result;

	if (a->transtype != INTERNALOID)
	{
		StringInfoData buf;

		/* a null-terminated copy, which the receive function may alter */
		initStringInfo(&buf);
		appendBinaryStringInfo(&buf, VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data));
		result = ReceiveFunctionCall(&a->deserialfn, &buf, a->recv_ioparam, -1);
		if (buf.cursor != buf.len)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("incorrect binary data format in a partial state of aggregate %s",
							format_procedure(a->aggfnoid))));
		return result;
	}
	for (int i = 0; i < (int) lengthof(numeric_states); i++)
		if (a->deserialfn.fn_oid == numeric_states[i].deserialfn)
			check_numeric_state(a, data, numeric_states[i].nvars, numeric_states[i].tail);
	a->call->args[0].value = PointerGetDatum(data);
	a->call->args[0].isnull = false;
	a->call->args[1].value = (Datum) 0;
	a->call->args[1].isnull = false;
	result = call_support(a, &a->deserialfn, 2, context, InvalidOid, &isnull);
	if (isnull)
		elog(ERROR, "deserialization function of aggregate %s returned NULL",
			 format_procedure(a->aggfnoid));
	return result;
}

/*
 * Keep a new by-reference transition value in the aggregate's memory
 * context and free the one it replaces, as the executor does.
 */
static void
keep_value(StateValue *s, Datum value, bool isnull, MemoryContext aggcxt)
{
	AggSupport *a = s->agg;

	if (!a->transbyval && !(s->started && !s->isnull && !isnull &&
							DatumGetPointer(value) == DatumGetPointer(s->value)))
	{
		if (!isnull)
		{
			if (!(DatumIsReadWriteExpandedObject(value, false, a->translen) &&
				  MemoryContextGetParent(DatumGetEOHP(value)->eoh_context) == aggcxt))
			{
				MemoryContext old = MemoryContextSwitchTo(aggcxt);

				value = datumCopy(value, a->transbyval, a->translen);
				MemoryContextSwitchTo(old);
			}
		}
		if (s->started && !s->isnull)
		{
			if (DatumIsReadWriteExpandedObject(s->value, false, a->translen))
				DeleteExpandedObject(s->value);
			else
				pfree(DatumGetPointer(s->value));
		}
	}
	s->value = value;
	s->isnull = isnull;
	s->started = true;
}

/* The initial state, made in aggcxt. */
static void
start_value(StateValue *s, MemoryContext aggcxt)
{
	AggSupport *a = s->agg;
	MemoryContext old = MemoryContextSwitchTo(aggcxt);

	s->isnull = a->initnull;
	s->value = a->initnull ? (Datum) 0 : datumCopy(a->initval, a->transbyval, a->translen);
	s->started = !a->initnull;
	MemoryContextSwitchTo(old);
}

/* The StateValue of an aggregate call, made on its first row. */
static StateValue *
state_value(FunctionCallInfo fcinfo, MemoryContext *aggcxt, const char *name, int first_input)
{
	StateValue *s;
	Oid			aggfnoid;

	if (!AggCheckCallContext(fcinfo, aggcxt))
		elog(ERROR, "%s called in non-aggregate context", name);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s needs an aggregate", name)));
	aggfnoid = PG_GETARG_OID(1);
	if (!PG_ARGISNULL(0))
		return (StateValue *) PG_GETARG_POINTER(0);
	s = MemoryContextAllocZero(*aggcxt, sizeof(StateValue));
	s->agg = agg_support(fcinfo, aggfnoid, first_input, false);
	start_value(s, *aggcxt);
	return s;
}

/*
 * Merge the state `in` into s with the combine function.  A strict combine
 * function never sees a NULL state: the other one is kept (PostgreSQL only
 * allows that for states that are not internal, so a copy is enough).
 */
static void
combine_into(StateValue *s, Datum in, Node *context, Oid collation, MemoryContext aggcxt)
{
	AggSupport *a = s->agg;
	Datum		result;
	bool		isnull;

	if (a->combinefn.fn_strict && (!s->started || s->isnull))
	{
		keep_value(s, in, false, aggcxt);
		return;
	}
	a->call->args[0].value = s->value;
	a->call->args[0].isnull = !s->started || s->isnull;
	a->call->args[1].value = in;
	a->call->args[1].isnull = false;
	result = call_support(a, &a->combinefn, 2, context, collation, &isnull);
	keep_value(s, result, isnull, aggcxt);
}

/*
 * streamwin.partial_state_accum(internal, agg regprocedure, VARIADIC "any")
 *		Transition function of streamwin.partial_state: one input row into
 *		the aggregate's own transition state.
 */
Datum
streamwin_partial_state_accum(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	StateValue *s = state_value(fcinfo, &aggcxt, "streamwin.partial_state", 2);
	AggSupport *a = s->agg;
	int			ninputs = a->numargs;	/* checked by agg_support */
	Datum		result;
	bool		isnull;

	if (a->transfn.fn_strict)
	{
		for (int i = 0; i < ninputs; i++)
			if (PG_ARGISNULL(i + 2))
				PG_RETURN_POINTER(s);
		if (!s->started)
		{
			/* no initial value: the first input is the state */
			keep_value(s, PG_GETARG_DATUM(2), false, aggcxt);
			PG_RETURN_POINTER(s);
		}
		if (s->isnull)
			PG_RETURN_POINTER(s);
	}

	a->call->args[0].value = s->value;
	a->call->args[0].isnull = !s->started || s->isnull;
	for (int i = 0; i < ninputs; i++)
		a->call->args[i + 1] = fcinfo->args[i + 2];
	result = call_support(a, &a->transfn, ninputs + 1, fcinfo->context, PG_GET_COLLATION(), &isnull);
	keep_value(s, result, isnull, aggcxt);
	PG_RETURN_POINTER(s);
}

/*
 * The collation a support function gets: the call's argument argno (the
 * aggregate's input collation, as a query's statements pass it) where it
 * has one, else the call's own (that of its arguments: none for states).
 */
static Oid
support_collation(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() > argno && !PG_ARGISNULL(argno))
		return PG_GETARG_OID(argno);
	return PG_GET_COLLATION();
}

/*
 * streamwin.combined_state_accum(internal, agg regprocedure, state bytea
 *		[, collation regcollation])
 *		Transition function of streamwin.combined_state: merge stored states.
 */
Datum
streamwin_combined_state_accum(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	StateValue *s = state_value(fcinfo, &aggcxt, "streamwin.combined_state", -1);
	Datum		in;

	if (PG_ARGISNULL(2))
		PG_RETURN_POINTER(s);
	in = deserialize_state(s->agg, PG_GETARG_BYTEA_PP(2), fcinfo->context);
	combine_into(s, in, fcinfo->context, support_collation(fcinfo, 3), aggcxt);
	PG_RETURN_POINTER(s);
}

/*
 * streamwin.state_serialize(internal) RETURNS bytea
 *		Final function of partial_state and combined_state: the state as
 *		stored, NULL for the initial state.
 */
Datum
streamwin_state_serialize(PG_FUNCTION_ARGS)
{
	StateValue *s;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (StateValue *) PG_GETARG_POINTER(0);
	if (!s->started || s->isnull)
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(serialize_state(s->agg, s->value, fcinfo->context));
}

/*
 * streamwin.combine_states(agg regprocedure, a bytea, b bytea
 *		[, collation regcollation]) RETURNS bytea
 *		Two stored states merged, as a batch's state is merged into the
 *		stored one.
 */
Datum
streamwin_combine_states(PG_FUNCTION_ARGS)
{
	AggSupport *a;
	Node	   *context;
	StateValue	s = {0};

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	a = agg_support(fcinfo, PG_GETARG_OID(0), -1, true);
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
	{
		if (PG_ARGISNULL(1) && PG_ARGISNULL(2))
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_ARGISNULL(1) ? PG_GETARG_DATUM(2) : PG_GETARG_DATUM(1));
	}
	context = call_context(a, fcinfo);
	/* the first state, made in the current memory context: no copy needed */
	s.agg = a;
	s.value = deserialize_state(a, PG_GETARG_BYTEA_PP(1), context);
	s.isnull = false;
	s.started = true;
	combine_into(&s, deserialize_state(a, PG_GETARG_BYTEA_PP(2), context), context,
				 support_collation(fcinfo, 3), CurrentMemoryContext);
	if (s.isnull)
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(serialize_state(a, s.value, context));
}

/*
 * streamwin.finish_state(agg regprocedure, state bytea, result_type anyelement
 *		[, collation regcollation])
 *		The aggregate's value from a stored state.  result_type (a NULL of
 *		the aggregate's result type, or of a domain's base type: the caller
 *		casts to the domain, which checks the value) only gives the result
 *		its type.
 */
Datum
streamwin_finish_state(PG_FUNCTION_ARGS)
{
	AggSupport *a;
	Node	   *context;
	Datum		value;
	bool		isnull;
	Oid			wanted = get_fn_expr_argtype(fcinfo->flinfo, 2);
	int			nargs = 1;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	a = agg_support(fcinfo, PG_GETARG_OID(0), -1, true);
	if (wanted != a->resulttype && wanted != getBaseType(a->resulttype))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("aggregate %s returns %s, not %s", format_procedure(a->aggfnoid),
						format_type_be(a->resulttype), format_type_be(wanted))));
	context = call_context(a, fcinfo);
	if (PG_ARGISNULL(1))
	{
		isnull = a->initnull;
		value = isnull ? (Datum) 0 : datumCopy(a->initval, a->transbyval, a->translen);
	}
	else
	{
		isnull = false;
		value = deserialize_state(a, PG_GETARG_BYTEA_PP(1), context);
	}
	if (!a->has_final)
	{
		if (isnull)
			PG_RETURN_NULL();
		PG_RETURN_DATUM(value);
	}
	if (a->finalfn.fn_strict && isnull)
		PG_RETURN_NULL();
	a->call->args[0].value = value;
	a->call->args[0].isnull = isnull;
	if (a->final_extra)
	{
		for (int i = 0; i < a->numargs; i++)
		{
			a->call->args[i + 1].value = (Datum) 0;
			a->call->args[i + 1].isnull = true;
		}
		nargs += a->numargs;
	}
	value = call_support(a, &a->finalfn, nargs, context, support_collation(fcinfo, 3), &isnull);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(value);
}
