/*-------------------------------------------------------------------------
 *
 * query.c
 *	  create_query: compile a continuous query into the statements a batch
 *	  runs, and create its result and state tables.
 *
 * A windowed aggregation such as
 *
 *		SELECT region, count(*) AS orders, avg(amount) AS avg_amount
 *		FROM orders WHERE amount > 0
 *		GROUP BY streamwin.tumble(event_time, '1 minute'), region
 *
 * is run incrementally: each batch computes *partial* aggregates of its own
 * rows per window and key (count, sum and count for avg, min, ...), merges
 * them into an UNLOGGED state table with INSERT ... ON CONFLICT DO UPDATE,
 * and the output mode decides when final values are written to the result
 * table.  The compiler works on PostgreSQL's own parse trees:
 *
 * 1. The raw parse tree is rewritten only where SQL cannot express the
 *	  window directly: hop() in GROUP BY becomes a LATERAL call of
 *	  hop_starts(), so one row lands in every window covering it.
 * 2. The result is analysed by the parser (names, types, privileges, with
 *	  error positions in the user's text), then checked for shapes that can
 *	  run incrementally.
 * 3. The analysed Query's target list is replaced by window start, group
 *	  keys and partial aggregates, and deparsed with pg_get_querydef() into
 *	  fully qualified SQL, which the batch statements embed.  Workers
 *	  prepare those statements once and reuse the plans.
 *
 * A query without GROUP BY or aggregates is a continuous transform: every
 * row is appended to the result table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_namespace.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/array.h"
#include "utils/acl.h"
#include "utils/regproc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "streamwin.h"
#include "aggregate_state.h"
#include "table_source.h"
#include "checkpoint.h"
#include "source.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwin_create_query);

/*
 * Error positions from parsing the query text refer to that text, not to
 * the statement that called create_query: report them as an internal query,
 * the way PL/pgSQL and SQL functions do.
 */
static void
query_text_error_callback(void *arg)
{
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery((const char *) arg);
	}
}

#define HOP_ALIAS "__streamwin_hop"

/* How a partial aggregate column merges with the stored one. */
typedef enum MergeKind
{
	MERGE_ADD,					/* count: s + e */
	MERGE_SUM,					/* sum: NULL means no input yet */
	MERGE_MIN,
	MERGE_MAX,
	MERGE_AND,
	MERGE_OR,
	MERGE_STATE,				/* any other: its transition state, as bytea
								 * (src/aggregate_state.c) */
	MERGE_UNION					/* agg(DISTINCT x): the sorted array of the
								 * distinct values of x */
} MergeKind;

typedef struct PartialCol
{
	char	   *name;			/* state column name */
	MergeKind	merge;
	Expr	   *expr;			/* the partial Aggref */
	Oid			aggfnoid;		/* MERGE_STATE: the user's aggregate */
} PartialCol;

typedef struct AggCol
{
	char	   *name;			/* result column */
	Oid			type;
	int32		typmod;
	char	   *final_sql;		/* final value from the state columns */
} AggCol;

typedef struct KeyCol
{
	char	   *name;
	TargetEntry *tle;
} KeyCol;

typedef struct Compiled
{
	bool		aggregate;
	const char *window;			/* "tumble", "hop" or NULL */
	int64		size_us;
	int64		slide_us;		/* hop only */
	Expr	   *event_time;
	List	   *keys;			/* KeyCol */
	List	   *aggs;			/* AggCol */
	List	   *partials;		/* PartialCol */
	TargetEntry *window_tle;
	Query	   *query;			/* analysed user query (rewritten for hop) */
	int			source_rtindex;
	SourceInfo *source;
} Compiled;

static void
refuse(const char *msg, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s", msg),
			 detail ? errdetail("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0));
}

/* --- step 1: raw tree --------------------------------------------------- */

/* Is this raw node a call of streamwin.<name>() (or unqualified <name>())? */
static bool
is_raw_call(Node *node, const char *name)
{
	FuncCall   *fc;
	char	   *schema;
	char	   *fname;

	if (node == NULL || !IsA(node, FuncCall))
		return false;
	fc = (FuncCall *) node;
	DeconstructQualifiedName(fc->funcname, &schema, &fname);
	return strcmp(fname, name) == 0 &&
		(schema == NULL || strcmp(schema, "streamwin") == 0);
}

/*
 * Rewrite hop(ts, size, slide) found at the top of a select item or GROUP BY
 * item into a column of LATERAL hop_starts(ts, size, slide).  Returns true
 * if the query uses hop().
 */
static bool
rewrite_hop(SelectStmt *stmt)
{
	FuncCall   *hop = NULL;
	ListCell   *lc;
	ColumnRef  *ref;
	RangeFunction *rf;
	FuncCall   *starts;

	foreach(lc, stmt->groupClause)
		if (is_raw_call(lfirst(lc), "hop"))
			hop = hop ? hop : (FuncCall *) lfirst(lc);
	foreach(lc, stmt->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);

		if (is_raw_call(rt->val, "hop"))
			hop = hop ? hop : (FuncCall *) rt->val;
	}
	if (hop == NULL)
		return false;
	if (list_length(hop->args) != 3)
		refuse("hop() takes three arguments: event time, window size and slide",
			   NULL, "For example: GROUP BY streamwin.hop(event_time, '10 minutes', '1 minute').");

	ref = makeNode(ColumnRef);
	ref->fields = list_make2(makeString(HOP_ALIAS), makeString("window_start"));
	ref->location = hop->location;

	foreach(lc, stmt->groupClause)
		if (equal(lfirst(lc), hop))
			lfirst(lc) = copyObject(ref);
	foreach(lc, stmt->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);

		if (equal(rt->val, hop))
		{
			rt->val = (Node *) copyObject(ref);
			if (rt->name == NULL)
				rt->name = pstrdup("window_start");
		}
	}

	starts = makeFuncCall(list_make2(makeString("streamwin"), makeString("hop_starts")),
						  copyObject(hop->args), COERCE_EXPLICIT_CALL, hop->location);
	rf = makeNode(RangeFunction);
	rf->lateral = true;
	rf->functions = list_make1(list_make2(starts, NIL));
	rf->alias = makeAlias(HOP_ALIAS, list_make1(makeString("window_start")));
	stmt->fromClause = lappend(stmt->fromClause, rf);
	return true;
}

/* --- step 2: checks on the analysed query ------------------------------ */

/* Does jointree node n contain range table entry rtindex? */
static bool
jointree_contains(Node *n, int rtindex)
{
	if (n == NULL)
		return false;
	if (IsA(n, RangeTblRef))
		return ((RangeTblRef *) n)->rtindex == rtindex;
	if (IsA(n, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) n;

		return j->rtindex == rtindex ||
			jointree_contains(j->larg, rtindex) ||
			jointree_contains(j->rarg, rtindex);
	}
	if (IsA(n, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) n)->fromlist)
			if (jointree_contains(lfirst(lc), rtindex))
				return true;
	}
	return false;
}

/*
 * The stream must be on the preserved side of every outer join: a batch
 * only sees the rows that arrived since the last one, so a table row that
 * "matches no stream row" in one batch may match in the next.
 */
static void
check_joins(Node *n, int source)
{
	if (n == NULL)
		return;
	if (IsA(n, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) n)->fromlist)
			check_joins(lfirst(lc), source);
	}
	else if (IsA(n, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) n;
		bool		in_left = jointree_contains(j->larg, source);
		bool		in_right = jointree_contains(j->rarg, source);

		if ((in_left || in_right) &&
			(j->jointype == JOIN_FULL ||
			 (j->jointype == JOIN_LEFT && in_right) ||
			 (j->jointype == JOIN_RIGHT && in_left)))
			refuse("the source must not be on the nullable side of an outer join",
				   "Each batch sees only the rows that arrived since the previous batch, so table rows without a match would be emitted again and again.",
				   "Join the source with an inner join, or put it on the left of a LEFT JOIN.");
		check_joins(j->larg, source);
		check_joins(j->rarg, source);
	}
}

static Oid
streamwin_func_oid(const char *name, int nargs, Oid *argtypes)
{
	return LookupFuncName(list_make2(makeString("streamwin"), makeString((char *) name)),
						  nargs, argtypes, false);
}

/*
 * Find the source among the FROM items, and check the other items.
 */
static void
check_from(Compiled *c)
{
	Query	   *q = c->query;
	int			rtindex = 0;
	ListCell   *lc;
	Oid			hop_starts;

	{
		Oid			args[3] = {TIMESTAMPTZOID, INTERVALOID, INTERVALOID};

		hop_starts = streamwin_func_oid("hop_starts", 3, args);
	}

	foreach(lc, q->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
		SourceInfo *src;

		rtindex++;
		switch (rte->rtekind)
		{
			case RTE_RELATION:
				src = catalog_get_source_by_relation(rte->relid);
				if (src == NULL)
					break;		/* an ordinary table, read as of each batch */
				if (c->source != NULL)
					refuse("a continuous query must read exactly one source once",
						   "Joining a stream with itself or with another stream needs state per side, which streamwin does not keep.",
						   "Read one source and join it with ordinary tables.");
				c->source = src;
				c->source_rtindex = rtindex;
				break;
			case RTE_JOIN:
				break;
			case RTE_FUNCTION:
				if (list_length(rte->functions) == 1 &&
					IsA(linitial_node(RangeTblFunction, rte->functions)->funcexpr, FuncExpr) &&
					((FuncExpr *) linitial_node(RangeTblFunction, rte->functions)->funcexpr)->funcid == hop_starts)
					break;
				refuse("functions in FROM are not supported in continuous queries",
					   NULL, "Read one source and join it with ordinary tables.");
				break;
			case RTE_SUBQUERY:
				refuse("subqueries in FROM are not supported in continuous queries",
					   NULL, "Create a view over the result table for further processing, or join ordinary tables directly.");
				break;
			default:
				refuse("this kind of FROM item is not supported in continuous queries",
					   NULL, "Read one source and join it with ordinary tables.");
		}
	}
	if (c->source == NULL)
		refuse("a continuous query must read a streamwin source",
			   "None of the relations in FROM is a source.",
			   "Create one with streamwin.create_kafka_source() or streamwin.create_table_source() and name it in FROM.");
	check_joins((Node *) q->jointree, c->source_rtindex);
}

static void
check_query_shape(Query *q)
{
	if (q->commandType != CMD_SELECT || q->utilityStmt != NULL)
		refuse("a continuous query must be a SELECT", NULL, NULL);
	if (q->setOperations != NULL)
		refuse("UNION, INTERSECT and EXCEPT are not supported in continuous queries",
			   NULL, "Create one query per branch, writing to separate result tables.");
	if (q->cteList != NIL)
		refuse("WITH is not supported in continuous queries",
			   NULL, "Write the query without common table expressions.");
	if (q->hasSubLinks)
		refuse("subqueries are not supported in continuous queries",
			   NULL, "Join the tables you need instead of using subqueries.");
	if (q->hasWindowFuncs)
		refuse("window functions (OVER) are not supported in continuous queries",
			   NULL, "Use streamwin.tumble(), streamwin.hop() in GROUP BY for event-time windows.");
	if (q->hasTargetSRFs)
		refuse("set-returning functions are not supported in the SELECT list of continuous queries",
			   NULL, NULL);
	if (q->sortClause != NIL || q->limitCount != NULL || q->limitOffset != NULL)
		refuse("ORDER BY, LIMIT and OFFSET are not supported in continuous queries",
			   "A continuous query's result is a table, which has no order.",
			   "Sort or limit when reading the result table.");
	if (q->distinctClause != NIL)
		refuse("DISTINCT is not supported in continuous queries",
			   NULL, "Use GROUP BY over the columns instead.");
	if (q->groupingSets != NIL)
		refuse("GROUPING SETS, ROLLUP and CUBE are not supported in continuous queries",
			   NULL, "Create one query per grouping.");
	if (q->havingQual != NULL)
		refuse("HAVING is not supported in continuous queries",
			   "Groups are built up over many batches, so a condition on their aggregates is only known when reading the result.",
			   "Filter the result table instead, for example with a view.");
	if (q->rowMarks != NIL)
		refuse("FOR UPDATE and FOR SHARE are not supported in continuous queries", NULL, NULL);
}

/* Constant interval argument of a window function. */
static int64
const_interval(Node *arg, const char *what)
{
	Node	   *folded = eval_const_expressions(NULL, arg);

	if (!IsA(folded, Const) || ((Const *) folded)->constisnull)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("window %s must be a constant interval", what),
				 errhint("For example: streamwin.tumble(event_time, '1 minute').")));
	return window_size_usec(DatumGetIntervalP(((Const *) folded)->constvalue), what);
}

/*
 * The event-time expression may use only the source's columns: it is
 * evaluated while decoding, before joins, to track the watermark and drop
 * late rows.
 */
static void
check_event_time(Compiled *c, Expr *ts)
{
	List	   *vars = pull_var_clause((Node *) ts, 0);
	ListCell   *lc;

	foreach(lc, vars)
	{
		Var		   *v = lfirst_node(Var, lc);

		if (v->varno != c->source_rtindex || v->varlevelsup != 0)
			refuse("the event time of a window must be computed from the source's columns only",
				   NULL, "Use a column of the source (or an expression over its columns) as the first argument of the window function.");
	}
	if (contain_volatile_functions((Node *) ts))
		refuse("the event time of a window must not use volatile functions",
			   "Replaying a batch must assign each row to the same window.",
			   "Use a column of the source, for example streamwin.tumble(event_time, '1 minute').");
	c->event_time = ts;
}

/* Which window, if any, is this GROUP BY expression? */
static void
find_window(Compiled *c, TargetEntry *tle, bool *is_window)
{
	Oid			targs[3] = {TIMESTAMPTZOID, INTERVALOID, INTERVALOID};
	Oid			tumble = streamwin_func_oid("tumble", 2, targs);
	Oid			hop = streamwin_func_oid("hop", 3, targs);
	Oid			session = streamwin_func_oid("session", 2, targs);
	Expr	   *e = tle->expr;

	*is_window = false;
	if (IsA(e, FuncExpr) && ((FuncExpr *) e)->funcid == tumble)
	{
		FuncExpr   *f = (FuncExpr *) e;

		c->window = "tumble";
		c->size_us = const_interval(lsecond(f->args), "size");
		check_event_time(c, linitial(f->args));
		*is_window = true;
	}
	else if (IsA(e, FuncExpr) && ((FuncExpr *) e)->funcid == session)
	{
		FuncExpr   *f = (FuncExpr *) e;

		c->window = "session";
		c->size_us = const_interval(lsecond(f->args), "gap");
		check_event_time(c, linitial(f->args));
		*is_window = true;
	}
	else if (IsA(e, FuncExpr) && ((FuncExpr *) e)->funcid == hop)
	{
		/* hop() not at the top of a GROUP BY item: rewrite_hop missed it */
		refuse("hop() must be used directly as a GROUP BY item", NULL,
			   "Write GROUP BY streamwin.hop(event_time, size, slide), key.");
	}
	else if (IsA(e, Var))
	{
		Var		   *v = (Var *) e;
		RangeTblEntry *rte = rt_fetch(v->varno, c->query->rtable);

		if (rte->rtekind == RTE_FUNCTION && rte->alias &&
			strcmp(rte->alias->aliasname, HOP_ALIAS) == 0)
		{
			FuncExpr   *f = (FuncExpr *) linitial_node(RangeTblFunction, rte->functions)->funcexpr;
			int64		slide;

			c->window = "hop";
			c->size_us = const_interval(lsecond(f->args), "size");
			slide = const_interval(lthird(f->args), "slide");
			c->slide_us = slide;
			if (slide > c->size_us)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("hop slide must not be larger than the window size"),
						 errdetail("Rows falling between windows would be dropped."),
						 errhint("Use a slide no larger than the size, or streamwin.tumble() when they are equal.")));
			check_event_time(c, linitial(f->args));
			*is_window = true;
		}
	}
}

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

static void
add_partial(Compiled *c, const char *aggname, const char *suffix, MergeKind merge, Aggref *a)
{
	PartialCol *p = palloc(sizeof(PartialCol));

	p->name = psprintf("%s$%s", aggname, suffix);
	p->merge = merge;
	p->expr = (Expr *) a;
	p->aggfnoid = InvalidOid;
	c->partials = lappend(c->partials, p);
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
	add_partial(c, col->name, "distinct", MERGE_UNION, set);

	qset = quote_identifier(psprintf("%s$distinct", col->name));
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
static void
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

	/* DISTINCT ones; the built-in aggregates that merge in plain SQL; any other */
	builtin = get_func_namespace(a->aggfnoid) == PG_CATALOG_NAMESPACE ? fname : "";
	if (a->aggdistinct != NIL)
		compile_distinct_aggregate(c, col, a, fname);
	else if (strcmp(builtin, "count") == 0)
	{
		add_partial(c, col->name, "count", MERGE_ADD, copyObject(a));
		col->final_sql = psprintf("%s", quote_identifier(psprintf("%s$count", col->name)));
	}
	else if (strcmp(builtin, "sum") == 0 || strcmp(builtin, "min") == 0 ||
			 strcmp(builtin, "max") == 0 || strcmp(builtin, "bool_and") == 0 ||
			 strcmp(builtin, "every") == 0 || strcmp(builtin, "bool_or") == 0)
	{
		MergeKind	m = strcmp(builtin, "sum") == 0 ? MERGE_SUM :
			strcmp(builtin, "min") == 0 ? MERGE_MIN :
			strcmp(builtin, "max") == 0 ? MERGE_MAX :
			strcmp(builtin, "bool_or") == 0 ? MERGE_OR : MERGE_AND;

		add_partial(c, col->name, fname, m, copyObject(a));
		col->final_sql = psprintf("%s", quote_identifier(psprintf("%s$%s", col->name, fname)));
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
		add_partial(c, col->name, "sum", MERGE_SUM, sum);
		add_partial(c, col->name, "count", MERGE_ADD, partial_agg(a, "count", ANYOID));

		qsum = quote_identifier(psprintf("%s$sum", col->name));
		qcount = quote_identifier(psprintf("%s$count", col->name));
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
		add_partial(c, col->name, "state", MERGE_STATE, partial_state_agg(a));
		p = llast(c->partials);
		p->aggfnoid = a->aggfnoid;
		col->final_sql = psprintf("streamwin.finish_state(%s, %s, NULL::%s)",
								  aggregate_literal(a->aggfnoid),
								  quote_identifier(p->name), format_type_be_qualified(col->type));
	}

	col->final_sql = psprintf("%s::%s", col->final_sql, format_type_be_qualified(col->type));
	c->aggs = lappend(c->aggs, col);
}

static void
check_column_name(List **seen, const char *name)
{
	ListCell   *lc;

	if (name == NULL || strcmp(name, "?column?") == 0)
		refuse("every column of a continuous query's result needs a name",
			   NULL, "Give the expression an alias with AS.");
	if (strcmp(name, "window_start") == 0 || strcmp(name, "window_end") == 0)
		refuse(psprintf("result column name \"%s\" is reserved for the window", name),
			   NULL, "Give the column another alias with AS.");
	foreach(lc, *seen)
		if (strcmp(lfirst(lc), name) == 0)
			refuse(psprintf("result column name \"%s\" is used more than once", name),
				   NULL, "Give the columns distinct aliases with AS.");
	*seen = lappend(*seen, (char *) name);
}

/* A short name for an expression in messages: the column, if it is one. */
static char *
expr_label(Query *q, Expr *e)
{
	if (IsA(e, Var) && ((Var *) e)->varlevelsup == 0)
	{
		Var		   *v = (Var *) e;
		RangeTblEntry *rte = rt_fetch(v->varno, q->rtable);

		if (v->varattno > 0 && v->varattno <= list_length(rte->eref->colnames))
			return psprintf("\"%s\"", strVal(list_nth(rte->eref->colnames, v->varattno - 1)));
	}
	return psprintf("at position %d of the query", exprLocation((Node *) e) + 1);
}

/* Classify GROUP BY items and the SELECT list of an aggregation. */
static void
compile_grouping(Compiled *c)
{
	Query	   *q = c->query;
	ListCell   *lc;
	List	   *names = NIL;

	foreach(lc, q->groupClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, q->targetList);
		bool		is_window;

		find_window(c, tle, &is_window);
		if (is_window)
		{
			if (c->window_tle != NULL)
				refuse("a continuous query can group by only one window", NULL,
					   "Use one of streamwin.tumble(), streamwin.hop() or streamwin.session() in GROUP BY.");
			c->window_tle = tle;
			continue;
		}
		if (tle->resjunk)
			refuse(psprintf("GROUP BY expression %s must also appear in the SELECT list",
							expr_label(q, tle->expr)),
				   "The result table has one row per window and group key, so each key needs a column.",
				   "Add the expression to the SELECT list, with an alias.");
	}

	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle->resjunk || tle == c->window_tle)
			continue;
		if (tle->ressortgroupref != 0 && get_sortgroupref_clause_noerr(tle->ressortgroupref, q->groupClause))
		{
			KeyCol	   *k = palloc(sizeof(KeyCol));

			check_column_name(&names, tle->resname);
			k->name = tle->resname;
			k->tle = tle;
			c->keys = lappend(c->keys, k);
		}
		else if (IsA(tle->expr, Aggref))
		{
			check_column_name(&names, tle->resname);
			compile_aggregate(c, tle);
		}
		else
			refuse(psprintf("SELECT list item \"%s\" must be a GROUP BY key or a single aggregate",
							tle->resname ? tle->resname : "?column?"),
				   "Expressions over aggregates cannot be merged batch by batch.",
				   "Select the aggregates themselves and compute the expression when reading the result table, for example in a view.");
	}

	if (c->window_tle == NULL && c->keys == NIL)
		refuse("a continuous aggregation needs a window or a group key",
			   NULL, "Add GROUP BY streamwin.tumble(event_time, '1 minute') or GROUP BY a key column.");
}

/* --- step 3: SQL generation -------------------------------------------- */

static char *keys_list(Compiled *c, const char *prefix);
static const char *merge_agg_sql(PartialCol *p);

/*
 * Deparse with only pg_catalog in search_path, so every other name comes
 * out schema-qualified and the statement means the same in any session.
 */
static char *
deparse_qualified(Query *q)
{
	int			save_nestlevel = NewGUCNestLevel();
	char	   *sql;

	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	sql = pg_get_querydef(q, false);
	AtEOXact_GUC(true, save_nestlevel);
	return sql;
}

/* Mutator context of hop_without_srf: the Var of a window start, and what replaces it. */
typedef struct HopVarReplace
{
	int			rtindex;
	Node	   *start;
} HopVarReplace;

static Node *
replace_hop_var(Node *node, HopVarReplace *ctx)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == ctx->rtindex &&
		((Var *) node)->varlevelsup == 0)
		return copyObject(ctx->start);
	if (IsA(node, Query))
		return (Node *) query_tree_mutator((Query *) node, replace_hop_var, ctx, 0);
	return expression_tree_mutator(node, replace_hop_var, ctx);
}

/*
 * The analysed query reads hop windows from LATERAL hop_starts(ts, size,
 * slide), a set-returning function called for every row: each call builds
 * and reads back a tuplestore, about a tenth of a hop query's CPU.  For the
 * batch statement, join instead with generate_series(0, n - 1) AS i, n =
 * ceil(size / slide), which does not depend on the row, so it runs once and
 * is rescanned, and compute each start as tumble(ts, slide) - i * slide,
 * keeping those whose window still covers ts (all of them when the size is
 * a multiple of the slide): the same starts hop_starts returns.
 */
static Query *
hop_without_srf(Compiled *c, Query *pq, int32 n)
{
	Oid			targs[2] = {TIMESTAMPTZOID, INTERVALOID};
	Oid			tumble = streamwin_func_oid("tumble", 2, targs);
	int			rtindex = 0;
	RangeTblEntry *hop = NULL;
	ListCell   *lc;
	FuncExpr   *starts;
	Expr	   *ts;
	Expr	   *size;
	Expr	   *slide;
	FuncExpr   *series;
	RangeTblFunction *rtf;
	Expr	   *start;
	HopVarReplace ctx;

	foreach(lc, pq->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		rtindex++;
		if (rte->rtekind == RTE_FUNCTION && rte->alias &&
			strcmp(rte->alias->aliasname, HOP_ALIAS) == 0)
		{
			hop = rte;
			break;
		}
	}
	if (hop == NULL)
		elog(ERROR, "streamwin: hop window without its function");
	starts = (FuncExpr *) linitial_node(RangeTblFunction, hop->functions)->funcexpr;
	ts = linitial(starts->args);
	size = lsecond(starts->args);
	slide = lthird(starts->args);

	series = makeFuncExpr(F_GENERATE_SERIES_INT4_INT4, INT4OID,
						  list_make2(makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(0), false, true),
									 makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(n - 1), false, true)),
						  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	series->funcretset = true;
	rtf = makeNode(RangeTblFunction);
	rtf->funcexpr = (Node *) series;
	rtf->funccolcount = 1;
	hop->functions = list_make1(rtf);
	hop->lateral = false;
	hop->alias = makeAlias(HOP_ALIAS, list_make1(makeString("i")));
	hop->eref = makeAlias(HOP_ALIAS, list_make1(makeString("i")));

	/* tumble(ts, slide) - i * slide */
	start = (Expr *) makeFuncExpr(F_TIMESTAMPTZ_MI_INTERVAL, TIMESTAMPTZOID,
								  list_make2(makeFuncExpr(tumble, TIMESTAMPTZOID,
														  list_make2(copyObject(ts), copyObject(slide)),
														  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL),
											 makeFuncExpr(F_INTERVAL_MUL, INTERVALOID,
														  list_make2(copyObject(slide),
																	 makeFuncExpr(F_FLOAT8_INT4, FLOAT8OID,
																				  list_make1(makeVar(rtindex, 1, INT4OID, -1, InvalidOid, 0)),
																				  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL)),
														  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL)),
								  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);

	ctx.rtindex = rtindex;
	ctx.start = (Node *) start;
	pq->targetList = (List *) replace_hop_var((Node *) pq->targetList, &ctx);
	pq->jointree = (FromExpr *) replace_hop_var((Node *) pq->jointree, &ctx);

	/* ts < start + size, unless every start up to n - 1 covers ts */
	if (c->size_us % c->slide_us != 0 && n > 1)
	{
		Expr	   *covers = (Expr *) makeFuncExpr(F_TIMESTAMPTZ_LT, BOOLOID,
												   list_make2(copyObject(ts),
															  makeFuncExpr(F_TIMESTAMPTZ_PL_INTERVAL, TIMESTAMPTZOID,
																		   list_make2(copyObject(start), copyObject(size)),
																		   InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL)),
												   InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);

		pq->jointree->quals = make_and_qual(pq->jointree->quals, (Node *) covers);
	}
	return pq;
}

/*
 * Hop windows whose size is a multiple of their slide can be computed from
 * panes, the tumbling windows of the slide: each pane lies whole in the
 * size / slide windows that start at it and at the starts before it.  So
 * a batch aggregates each row once, into its pane, then merges every
 * pane's partial aggregates into the windows covering it, with the same
 * aggregates that merge sessions (merge_agg_sql).  Without panes each row
 * is aggregated once per window (ten times for 10 minutes sliding by 1):
 * bench case 3.
 */
static bool
hop_uses_panes(Compiled *c)
{
	return c->window != NULL && strcmp(c->window, "hop") == 0 && c->size_us % c->slide_us == 0;
}

/* The query computing one batch's partial aggregates. */
static char *
partial_query_sql(Compiled *c)
{
	Query	   *pq = copyObject(c->query);
	List	   *tlist = NIL;
	ListCell   *lc;
	AttrNumber	resno = 1;
	StringInfoData sql;
	int			group = 1;

	if (c->window_tle)
	{
		TargetEntry *w = copyObject(c->window_tle);

		w->resno = resno++;
		w->resname = "window_start";
		w->resjunk = false;
		tlist = lappend(tlist, w);
	}
	foreach(lc, c->keys)
	{
		TargetEntry *k = copyObject(((KeyCol *) lfirst(lc))->tle);

		k->resno = resno++;
		tlist = lappend(tlist, k);
	}
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);

		tlist = lappend(tlist, makeTargetEntry(p->expr, resno++, p->name, false));
	}
	pq->targetList = tlist;
	if (!hop_uses_panes(c))
	{
		if (c->window && strcmp(c->window, "hop") == 0)
			pq = hop_without_srf(c, pq, (int32) ((c->size_us + c->slide_us - 1) / c->slide_us));
		return deparse_qualified(pq);
	}

	/* the panes (one window start each: the pane's own), then the windows */
	pq = hop_without_srf(c, pq, 1);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT p.window_start - __streamwin_pane.i * '%lld microseconds'::pg_catalog.interval",
					 (long long) c->slide_us);
	foreach(lc, c->keys)
		appendStringInfo(&sql, ", p.%s", quote_identifier(((KeyCol *) lfirst(lc))->name));
	foreach(lc, c->partials)
		appendStringInfo(&sql, ", %s", merge_agg_sql(lfirst(lc)));
	appendStringInfo(&sql, " FROM (%s) AS p, pg_catalog.generate_series(0, %lld) AS __streamwin_pane(i) GROUP BY 1",
					 deparse_qualified(pq), (long long) (c->size_us / c->slide_us - 1));
	foreach(lc, c->keys)
		appendStringInfo(&sql, ", %d", ++group);
	return sql.data;
}

static const char *
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
	}
	return NULL;
}

/* "window_start, key1, key2": the conflict target of state and result. */
static char *
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

/*
 * The result table's "window_start, window_end, keys..., aggregates...":
 * as column names, or (final) as the SELECT list computing them from state
 * rows.
 */
static char *
result_list(Compiled *c, bool final)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (c->window)
		appendStringInfoString(&buf, "window_start, window_end, ");
	foreach(lc, c->keys)
		appendStringInfo(&buf, "%s, ", quote_identifier(((KeyCol *) lfirst(lc))->name));
	foreach(lc, c->aggs)
	{
		AggCol	   *a = lfirst(lc);

		appendStringInfo(&buf, "%s, ", final ? a->final_sql : quote_identifier(a->name));
	}
	buf.data[buf.len -= 2] = '\0';
	return buf.data;
}

/* INSERT of the final values of the groups in s, a CTE of state rows, into the result */
static char *
result_insert(Compiled *c, const char *rname)
{
	return psprintf("INSERT INTO %s AS r (%s) SELECT %s FROM s",
					rname, result_list(c, false), result_list(c, true));
}

/* ON CONFLICT clause of a result upsert */
static char *
result_upsert(Compiled *c)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfo(&buf, " ON CONFLICT (%s) ", group_columns(c, ""));
	if (c->aggs == NIL && c->window == NULL)
		appendStringInfoString(&buf, "DO NOTHING");
	else
	{
		/* a session's end moves as it grows; other windows' ends are fixed */
		appendStringInfoString(&buf, "DO UPDATE SET ");
		if (c->window)
			appendStringInfoString(&buf, "window_end = EXCLUDED.window_end");
		foreach(lc, c->aggs)
		{
			const char *n = quote_identifier(((AggCol *) lfirst(lc))->name);

			appendStringInfo(&buf, "%s%s = EXCLUDED.%s", buf.data[buf.len - 1] == ' ' ? "" : ", ", n, n);
		}
	}
	return buf.data;
}

static char *
column_type_sql(Oid type, int32 typmod, Oid collation)
{
	char	   *t = format_type_with_typemod(type, typmod);

	if (OidIsValid(collation) && collation != DEFAULT_COLLATION_OID &&
		collation != get_typcollation(type))
		return psprintf("%s COLLATE %s", t, generate_collation_name(collation));
	return t;
}

static char *
qualified_relname(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

static void
spi_run(const char *sql)
{
	int			rc = SPI_execute(sql, false, 0);

	if (rc < 0)
		elog(ERROR, "streamwin: statement failed (%s): %s", SPI_result_code_string(rc), sql);
}

static char *
quote_name_text(const char *name)
{
	List	   *parts = stringToQualifiedNameList(name);
	RangeVar   *rv = makeRangeVarFromNameList(parts);

	return rv->schemaname ? quote_qualified_identifier(rv->schemaname, rv->relname)
		: pstrdup(quote_identifier(rv->relname));
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
static Oid
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
						 format_type_with_typemod(a->type, a->typmod));
	}
	/*
	 * One row per window and group.  Not a primary key: group keys may be
	 * NULL (a JSON key missing from a message), and as in GROUP BY, NULL is
	 * a group of its own; NULLS NOT DISTINCT makes it one row.
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
static Oid
create_query_table(const char *name, const char *create_sql, const char *index_sql)
{
	char	   *qname = quote_qualified_identifier("streamwin", name);
	/* the caller, before catalog_enter makes the extension owner current */
	char	   *owner = GetUserNameFromId(GetUserId(), false);
	CatalogRole role;
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
static Oid
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
	 * A session's state is looked up by key (its end and start move), so
	 * there the keys lead the index; other windows are merged by window and
	 * key, and closed by window_start (close_condition).
	 */
	if (c->window && strcmp(c->window, "session") == 0)
		appendStringInfo(&sql, "UNIQUE NULLS NOT DISTINCT (%swindow_start))", keys_list(c, ""));
	else
		appendStringInfo(&sql, "UNIQUE NULLS NOT DISTINCT (%s))", group_columns(c, ""));

	/*
	 * Closing finds expired windows by window_end.  A tumbling or hopping
	 * window's end is its start plus a fixed size, so the unique index,
	 * which leads with window_start, serves (see close_condition); only a
	 * session, whose end moves as it grows, needs an index of its own.  Every
	 * index costs an insertion per new state row.
	 */
	return create_query_table(name, sql.data,
							  c->window && strcmp(c->window, "session") == 0 ?
							  "CREATE INDEX ON %s (window_end)" : NULL);
}

/* The state rows of windows closed by watermark $1. */
static char *
close_condition(Compiled *c)
{
	if (strcmp(c->window, "session") == 0)
		return "window_end <= $1";
	/* window_end = window_start + size: answered by the unique index */
	return psprintf("window_start <= $1 - '%lld microseconds'::pg_catalog.interval",
					(long long) c->size_us);
}

/*
 * What happens to state and results besides merging a batch, by output
 * mode: emit closed windows once (append), evict closed windows (update),
 * rewrite the result (complete); and counting state rows for progress.
 */
static void
emit_statements(Compiled *c, const char *rname, const char *sname, OutputMode mode,
				StringInfo plan)
{
	if (mode == OUTPUT_APPEND)
	{
		char	   *close = psprintf("WITH s AS (DELETE FROM %s WHERE %s RETURNING *) %s",
									 sname, close_condition(c), result_insert(c, rname));

		appendStringInfoString(plan, ", \"close_sql\": ");
		escape_json(plan, psprintf("%s%s", close, result_upsert(c)));
		/* a window closes once: its rows are new to the result but on replay */
		appendStringInfoString(plan, ", \"close_insert_sql\": ");
		escape_json(plan, close);
	}
	else if (mode == OUTPUT_UPDATE && c->window)
	{
		/* rows are already final in the result: only forget the state */
		appendStringInfoString(plan, ", \"close_sql\": ");
		escape_json(plan, psprintf("DELETE FROM %s WHERE %s", sname, close_condition(c)));
	}
	else if (mode == OUTPUT_COMPLETE)
	{
		appendStringInfoString(plan, ", \"clear_sql\": ");
		escape_json(plan, psprintf("DELETE FROM %s", rname));
		appendStringInfoString(plan, ", \"refresh_sql\": ");
		escape_json(plan, psprintf("INSERT INTO %s (%s) SELECT %s FROM %s",
								   rname, result_list(c, false), result_list(c, true), sname));
	}
	appendStringInfoString(plan, ", \"state_count_sql\": ");
	escape_json(plan, psprintf("SELECT pg_catalog.count(*) FROM %s", sname));
}

/* The statements of an aggregation, stored in query_catalog.plan. */
static void
aggregate_statements(Compiled *c, Oid result, Oid state, OutputMode mode, StringInfo plan)
{
	char	   *rname = qualified_relname(result);
	char	   *sname = qualified_relname(state);
	StringInfoData merge;
	StringInfoData cols;
	StringInfoData ins;
	StringInfoData sel;
	ListCell   *lc;
	char	   *batch;
	char	   *window_end = c->window ?
		psprintf("b.window_start + '%lld microseconds'::pg_catalog.interval", (long long) c->size_us) : "";

	/* merge the batch's partial aggregates into the state */
	initStringInfo(&cols);
	initStringInfo(&ins);
	initStringInfo(&sel);
	if (c->window)
	{
		appendStringInfoString(&ins, "window_start, window_end");
		appendStringInfo(&sel, "b.window_start, %s", window_end);
	}
	foreach(lc, c->keys)
	{
		const char *n = quote_identifier(((KeyCol *) lfirst(lc))->name);

		appendStringInfo(&ins, "%s%s", ins.len ? ", " : "", n);
		appendStringInfo(&sel, "%sb.%s", sel.len ? ", " : "", n);
	}
	foreach(lc, c->partials)
	{
		const char *n = quote_identifier(((PartialCol *) lfirst(lc))->name);

		appendStringInfo(&cols, ", %s", n);
		appendStringInfo(&ins, ", %s", n);
		appendStringInfo(&sel, ", b.%s", n);
	}
	/*
	 * In the order of the state's unique index (and the result's primary
	 * key, as RETURNING keeps it): with many groups, successive probes and
	 * insertions then land on the same leaf pages instead of all over a
	 * large index.
	 */
	initStringInfo(&merge);
	appendStringInfo(&merge, "INSERT INTO %s AS s (%s) SELECT %s FROM (%s) AS b(%s%s) ORDER BY %s ON CONFLICT (%s) ",
					 sname, ins.data, sel.data, partial_query_sql(c),
					 group_columns(c, ""), cols.data, group_columns(c, "b."), group_columns(c, ""));
	if (c->partials == NIL)
		appendStringInfoString(&merge, "DO NOTHING");
	else
	{
		appendStringInfoString(&merge, "DO UPDATE SET ");
		foreach(lc, c->partials)
		{
			PartialCol *p = lfirst(lc);

			appendStringInfo(&merge, "%s%s = %s", lc == list_head(c->partials) ? "" : ", ",
							 quote_identifier(p->name), merge_sql(p));
		}
	}

	/* in update mode, also upsert the final values of the groups it changed */
	batch = mode != OUTPUT_UPDATE ? merge.data :
		psprintf("WITH s AS (%s RETURNING s.*) %s%s", merge.data, result_insert(c, rname), result_upsert(c));
	appendStringInfoString(plan, ", \"batch_sql\": ");
	escape_json(plan, batch);

	/*
	 * Its insert variant (see run_insert_variant in batch.c): a group the
	 * merge inserted into the state (its xmax is 0; an updated one carries
	 * the updater's) goes into the result with a plain INSERT.  No column
	 * of the state can be called xmax, a system column's name.
	 */
	if (mode == OUTPUT_UPDATE)
	{
		char	   *insert = result_insert(c, rname);

		appendStringInfoString(plan, ", \"batch_insert_sql\": ");
		escape_json(plan, psprintf("WITH s AS (%s RETURNING s.*, s.xmax), "
								   "n AS (%s WHERE xmax = 0) %s WHERE xmax <> 0%s",
								   merge.data, insert, insert, result_upsert(c)));
	}
	emit_statements(c, rname, sname, mode, plan);
}

/* --- session windows ---------------------------------------------------- */

/* a stored session s and a batch's session b overlap in time */
#define SESSIONS_OVERLAP "s.window_start < b.window_end AND b.window_start < s.window_end"

/* "a.k1 <op> b.k1 AND a.k2 <op> b.k2 ...", or "" without keys */
static char *
keys_compare(Compiled *c, const char *a, const char *op, const char *b)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, c->keys)
	{
		const char *n = quote_identifier(((KeyCol *) lfirst(lc))->name);

		appendStringInfo(&buf, "%s%s.%s %s %s.%s", buf.len ? " AND " : "", a, n, op, b, n);
	}
	return buf.data;
}

/* "a.k1 IS NOT DISTINCT FROM b.k1 AND ...", or "true" without keys */
static char *
keys_equal(Compiled *c, const char *a, const char *b)
{
	return c->keys ? keys_compare(c, a, "IS NOT DISTINCT FROM", b) : "true";
}

/*
 * "a.k1 = b.k1 AND ...": the same match for rows whose keys are all non-NULL,
 * which, unlike IS NOT DISTINCT FROM, the planner can hash or look up in an
 * index.  Only with keys.
 */
static char *
keys_equal_strict(Compiled *c, const char *a, const char *b)
{
	return keys_compare(c, a, "=", b);
}

/* "(a.k1 IS NULL OR a.k2 IS NULL)": a key is NULL.  Only with keys. */
static char *
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

/* "k1, k2, " (note the trailing separator), or "" without keys */
static char *
keys_list(Compiled *c, const char *prefix)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, c->keys)
		appendStringInfo(&buf, "%s%s, ", prefix, quote_identifier(((KeyCol *) lfirst(lc))->name));
	return buf.data;
}

/* "PARTITION BY k1, k2", or "" without keys */
static char *
keys_partition(Compiled *c)
{
	char	   *k = keys_list(c, "");

	if (k[0] == '\0')
		return "";
	k[strlen(k) - 2] = '\0';
	return psprintf("PARTITION BY %s", k);
}

/* How partials of several sessions combine into one (an aggregate). */
static const char *
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
	}
	return NULL;
}

/*
 * The statements of a session-window aggregation.  Sessions are built per
 * batch from the batch's rows (gaps and islands over event time), then the
 * state sessions they overlap are deleted and merged with them, again as
 * islands, so an event that bridges two sessions joins them into one:
 *
 *	 r	 the batch's rows: keys, event time, aggregate arguments and filters
 *	 b	 the batch's own sessions with their partial aggregates
 *	 t	 state sessions overlapping one of them, deleted
 *	 m	 b and t merged into islands, inserted as the new state sessions
 */
static void
session_statements(Compiled *c, Oid result, Oid state, OutputMode mode, StringInfo plan)
{
	char	   *rname = qualified_relname(result);
	char	   *sname = qualified_relname(state);
	char	   *gap = psprintf("'%lld microseconds'::pg_catalog.interval", (long long) c->size_us);
	Query	   *rq = copyObject(c->query);
	List	   *tlist = NIL;
	AttrNumber	resno = 1;
	ListCell   *lc;
	int			i = 0;
	StringInfoData bparts;
	StringInfoData mparts;
	StringInfoData pcols;
	StringInfoData sql;
	char	   *keys = keys_list(c, "");
	char	   *part = keys_partition(c);
	char	   *overlapping;

	/* r: a plain projection of the user's FROM and WHERE */
	foreach(lc, c->keys)
	{
		TargetEntry *k = copyObject(((KeyCol *) lfirst(lc))->tle);

		k->resno = resno++;
		k->ressortgroupref = 0;
		tlist = lappend(tlist, k);
	}
	tlist = lappend(tlist, makeTargetEntry(copyObject(c->event_time), resno++,
										   "__ts", false));
	initStringInfo(&bparts);
	initStringInfo(&mparts);
	initStringInfo(&pcols);
	foreach(lc, c->partials)
	{
		PartialCol *p = lfirst(lc);
		Aggref	   *a = (Aggref *) p->expr;
		char	   *arg = "*";
		char	   *filter = "";
		ListCell   *lc2;

		i++;
		if (p->merge == MERGE_STATE)
		{
			/* partial_state(agg, args...): the aggregate stays a literal */
			StringInfoData args;
			int			j = 0;

			initStringInfo(&args);
			appendStringInfoString(&args, aggregate_literal(p->aggfnoid));
			for_each_from(lc2, a->args, 1)
			{
				tlist = lappend(tlist, makeTargetEntry(copyObject(lfirst_node(TargetEntry, lc2)->expr),
													   resno++, psprintf("__a%d_%d", i, ++j), false));
				appendStringInfo(&args, ", __a%d_%d", i, j);
			}
			arg = args.data;
		}
		else if (a->args != NIL)
		{
			tlist = lappend(tlist, makeTargetEntry(copyObject(linitial_node(TargetEntry, a->args)->expr),
												   resno++, psprintf("__a%d", i), false));
			arg = psprintf("__a%d", i);
		}
		if (a->aggfilter != NULL)
		{
			tlist = lappend(tlist, makeTargetEntry(copyObject(a->aggfilter), resno++,
												   psprintf("__f%d", i), false));
			filter = psprintf(" FILTER (WHERE __f%d)", i);
		}
		appendStringInfo(&bparts, ", %s.%s(%s)%s AS %s",
						 quote_identifier(get_namespace_name(get_func_namespace(a->aggfnoid))),
						 quote_identifier(get_func_name(a->aggfnoid)), arg, filter,
						 quote_identifier(p->name));
		appendStringInfo(&mparts, ", %s", merge_agg_sql(p));
		appendStringInfo(&pcols, ", %s", quote_identifier(p->name));
	}
	rq->targetList = tlist;
	rq->groupClause = NIL;
	rq->hasAggs = false;

	/*
	 * t: the stored sessions that the batch's sessions overlap, taken out of
	 * the state to be merged with them.  Matching keys with IS NOT DISTINCT
	 * FROM (NULL is a group of its own) cannot be hashed or looked up in an
	 * index: the join was a nested loop over the batch's sessions, each
	 * scanning every stored session overlapping it in time, quadratic in
	 * the number of keys.  So rows whose keys are all non-NULL match with =,
	 * and the few with a NULL key in a second, disjoint DELETE.
	 */
	if (c->keys == NIL)
		overlapping = psprintf("t AS (DELETE FROM %s s USING b WHERE %s RETURNING s.*), ",
							   sname, SESSIONS_OVERLAP);
	else
		overlapping = psprintf("t1 AS (DELETE FROM %s s USING b WHERE %s AND %s RETURNING s.*), "
							   "t2 AS (DELETE FROM %s s USING b WHERE %s AND %s AND %s RETURNING s.*), "
							   "t AS (SELECT * FROM t1 UNION ALL SELECT * FROM t2), ",
							   sname, keys_equal_strict(c, "s", "b"), SESSIONS_OVERLAP,
							   sname, keys_any_null(c, "b"), keys_equal(c, "s", "b"), SESSIONS_OVERLAP);

	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "WITH r AS (%s), "
					 "rm AS (SELECT *, CASE WHEN __ts - pg_catalog.lag(__ts) OVER (%s ORDER BY __ts) < %s "
					 "THEN 0 ELSE 1 END AS __brk FROM r), "
					 "ri AS (SELECT *, pg_catalog.sum(__brk) OVER (%s ORDER BY __ts ROWS UNBOUNDED PRECEDING) AS __isl FROM rm), "
					 "b AS (SELECT %spg_catalog.min(__ts) AS window_start, pg_catalog.max(__ts) + %s AS window_end%s "
					 "FROM ri GROUP BY %s__isl), "
					 "%s"
					 "u AS (SELECT %swindow_start, window_end%s FROM b UNION ALL SELECT %swindow_start, window_end%s FROM t), "
					 "um AS (SELECT *, CASE WHEN window_start < pg_catalog.max(window_end) OVER (%s ORDER BY window_start, window_end "
					 "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS __brk FROM u), "
					 "ui AS (SELECT *, pg_catalog.sum(__brk) OVER (%s ORDER BY window_start, window_end ROWS UNBOUNDED PRECEDING) AS __isl FROM um), "
					 "m AS (INSERT INTO %s (%swindow_start, window_end%s) "
					 "SELECT %spg_catalog.min(window_start), pg_catalog.max(window_end)%s FROM ui GROUP BY %s__isl RETURNING *)",
					 deparse_qualified(rq),
					 part, gap,
					 part,
					 keys, gap, bparts.data, keys,
					 overlapping,
					 keys, pcols.data, keys, pcols.data,
					 part,
					 part,
					 sname, keys, pcols.data,
					 keys, mparts.data, keys);

	if (mode == OUTPUT_UPDATE)
	{
		/* rows of sessions merged into another go; merged sessions upserted */
		appendStringInfo(&sql,
						 ", gone AS (DELETE FROM %s o USING t WHERE o.window_start = t.window_start AND %s "
						 "AND NOT EXISTS (SELECT 1 FROM m WHERE m.window_start = t.window_start AND %s)) "
						 "INSERT INTO %s AS r (%s) SELECT %s FROM m%s",
						 rname, keys_equal(c, "o", "t"), keys_equal(c, "m", "t"),
						 rname, result_list(c, false), result_list(c, true), result_upsert(c));
	}
	else
		appendStringInfoString(&sql, " SELECT pg_catalog.count(*) FROM m");
	appendStringInfoString(plan, ", \"batch_sql\": ");
	escape_json(plan, sql.data);
	emit_statements(c, rname, sname, mode, plan);
}

/* --- transforms ---------------------------------------------------------- */

static Oid
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
		check_column_name(&names, tle->resname);
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

	appendStringInfoString(plan, ", \"batch_sql\": ");
	escape_json(plan, psprintf("INSERT INTO %s (%s) %s", qualified_relname(relid), cols.data,
							   deparse_qualified(c->query)));
	return relid;
}

/* --- event time and deduplication ----------------------------------------- */

/* The source's column of that name, as an expression of the user's query. */
static Var *
source_column(Compiled *c, const char *name, const char *what)
{
	RangeTblEntry *rte = rt_fetch(c->source_rtindex, c->query->rtable);
	int			attno = 0;
	ListCell   *lc;
	Oid			type;
	int32		typmod;
	Oid			coll;

	foreach(lc, rte->eref->colnames)
	{
		attno++;
		if (strcmp(strVal(lfirst(lc)), name) == 0)
		{
			get_atttypetypmodcoll(rte->relid, attno, &type, &typmod, &coll);
			return makeVar(c->source_rtindex, attno, type, typmod, coll, 0);
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("%s \"%s\" is not a column of source \"%s\"", what, name, c->source->name)));
	return NULL;
}

/* options.event_time: the event time of a query without a window */
static Expr *
source_column_expr(Compiled *c, const char *name)
{
	Var		   *v = source_column(c, name, "event_time");
	Node	   *ts = coerce_to_target_type(NULL, (Node *) v, v->vartype, TIMESTAMPTZOID, -1,
										   COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);

	if (ts == NULL)
		refuse(psprintf("event_time column \"%s\" is of type %s, not a timestamp", name,
						format_type_be(v->vartype)),
			   NULL, "Name a timestamptz or timestamp column of the source.");
	return (Expr *) ts;
}

/* dedup_keys: distinct columns of the source */
static List *
dedup_key_names(Compiled *c, ArrayType *arr)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	List	   *names = NIL;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		refuse("dedup_keys must name at least one column", NULL,
			   "Leave dedup_keys NULL to keep every row.");
	for (int i = 0; i < n; i++)
	{
		char	   *name;
		ListCell   *lc;

		if (nulls[i])
			refuse("dedup_keys must not contain NULL", NULL, NULL);
		name = TextDatumGetCString(elems[i]);
		(void) source_column(c, name, "dedup key");
		foreach(lc, names)
			if (strcmp(lfirst(lc), name) == 0)
				refuse(psprintf("dedup key \"%s\" is given more than once", name), NULL, NULL);
		names = lappend(names, name);
	}
	return names;
}

/*
 * Deduplication (Spark's dropDuplicatesWithinWatermark): before the query
 * runs, a batch's rows whose keys were seen already, in this batch or an
 * earlier one still within the watermark, are dropped.  The keys seen live
 * in an UNLOGGED table (checkpointed with the rest of the state), each with
 * the event time of its first row, and leave it when the watermark passes
 * that time.  One statement inserts the first occurrence of every new key
 * and returns its position in the batch; batch.c keeps those rows only.
 * Sets the keys' table and its checkpoint table.
 */
static void
dedup_statements(Compiled *c, List *keys, int32 query_id, StringInfo plan,
				 Oid *table_out, Oid *checkpoint_out)
{
	TupleDesc	desc = source_tupdesc(c->source->relation);
	StringInfoData cols;
	StringInfoData keydefs;
	StringInfoData keylist;
	StringInfoData sql;
	ListCell   *lc;
	char	   *name = psprintf("dedup_%d", query_id);
	char	   *qname = quote_qualified_identifier("streamwin", name);
	char	   *ts_sql = "NULL::pg_catalog.timestamptz";
	Oid			table;
	Oid			ckpt;

	initStringInfo(&cols);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		appendStringInfo(&cols, ", %s %s", quote_identifier(NameStr(att->attname)),
						 format_type_with_typemod(att->atttypid, att->atttypmod));
	}
	initStringInfo(&keydefs);
	initStringInfo(&keylist);
	foreach(lc, keys)
	{
		Var		   *v = source_column(c, lfirst(lc), "dedup key");

		appendStringInfo(&keydefs, "%s %s, ", quote_identifier(lfirst(lc)),
						 column_type_sql(v->vartype, v->vartypmod, v->varcollid));
		appendStringInfo(&keylist, "%s%s", keylist.len ? ", " : "", quote_identifier(lfirst(lc)));
	}
	if (c->event_time)
	{
		/* the event time over the numbered rows "s" */
		Node	   *ts = copyObject((Node *) c->event_time);
		int			save_nestlevel = NewGUCNestLevel();

		ChangeVarNodes(ts, c->source_rtindex, 1, 0);
		(void) set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		ts_sql = deparse_expression(ts, deparse_context_for("s", c->source->relation), false, false);
		AtEOXact_GUC(true, save_nestlevel);
	}

	/* NULL keys are keys too: NULLS NOT DISTINCT */
	table = create_query_table(name,
							   psprintf("CREATE UNLOGGED TABLE %s (%sevent_time timestamptz, batch_ord integer NOT NULL, "
										"UNIQUE NULLS NOT DISTINCT (%s))", qname, keydefs.data, keylist.data),
							   "CREATE INDEX ON %s (event_time)");
	ckpt = checkpoint_create_table(query_id, table, psprintf("checkpoint_dedup_%d", query_id));

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s AS d (%s, event_time, batch_ord) "
					 "SELECT DISTINCT ON (%s) %s, %s, __ord "
					 "FROM streamwin.source_rows(%d, true) AS s(__ord integer%s) "
					 "ORDER BY %s, __ord ON CONFLICT (%s) DO NOTHING RETURNING batch_ord",
					 qname, keylist.data, keylist.data, keylist.data, ts_sql,
					 c->source->source_id, cols.data, keylist.data, keylist.data);
	appendStringInfoString(plan, ", \"dedup_sql\": ");
	escape_json(plan, sql.data);
	if (c->event_time)
	{
		appendStringInfoString(plan, ", \"dedup_evict_sql\": ");
		escape_json(plan, psprintf("DELETE FROM %s WHERE event_time < $1", qname));
	}
	*table_out = table;
	*checkpoint_out = ckpt;
}

/* --- the SQL function ---------------------------------------------------- */

static OutputMode
parse_output_mode(const char *mode)
{
	if (strcmp(mode, "append") == 0)
		return OUTPUT_APPEND;
	if (strcmp(mode, "update") == 0)
		return OUTPUT_UPDATE;
	if (strcmp(mode, "complete") == 0)
		return OUTPUT_COMPLETE;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid output mode \"%s\"", mode),
			 errhint("Use \"append\", \"update\" or \"complete\".")));
	return OUTPUT_APPEND;
}

/* create_query's and alter_query's checks of their settings */
void
check_trigger_interval(const Interval *iv)
{
	if (interval_to_usec(iv, "trigger_interval") < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trigger_interval must not be negative"),
				 errhint("Use '0' to start each batch as soon as the previous one ends.")));
}

void
check_idle_timeout(const Interval *iv)
{
	if (interval_to_usec(iv, "idle_timeout") <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idle_timeout must be positive")));
}

static void
validate_query_options(Jsonb *options)
{
	static const char *const valid[] = {"idle_timeout", "capture_late_rows", "event_time",
	"dedup_without_watermark", NULL};
	char	   *idle;

	jsonb_check_keys(options, valid, "query");
	{
		const char *bools[] = {"capture_late_rows", "dedup_without_watermark"};

		for (int i = 0; i < (int) lengthof(bools); i++)
		{
			char	   *v = jsonb_get_text(options, bools[i]);

			if (v != NULL && strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"%s\" must be true or false", bools[i])));
		}
	}
	idle = jsonb_get_text(options, "idle_timeout");
	if (idle != NULL)
		check_idle_timeout(DatumGetIntervalP(DirectFunctionCall3(interval_in,
																 CStringGetDatum(idle),
																 ObjectIdGetDatum(InvalidOid),
																 Int32GetDatum(-1))));
}

/*
 * streamwin.create_query(name, query, watermark, output_mode,
 *						  trigger_interval, dedup_keys, options, start)
 */
Datum
streamwin_create_query(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *query_text;
	OutputMode	mode;
	Jsonb	   *options;
	bool		start;
	List	   *raw;
	RawStmt    *rawstmt;
	Compiled	c;
	Oid			result;
	Oid			state = InvalidOid;
	Oid			checkpoint = InvalidOid;
	Oid			dedup = InvalidOid;
	Oid			dedup_checkpoint = InvalidOid;
	List	   *dedup_keys = NIL;
	StringInfoData plan;
	int32		query_id;
	CatalogRole role;
	Oid			argtypes[11] = {TEXTOID, INT4OID, OIDOID, TEXTOID, INTERVALOID, TEXTOID,
	INTERVALOID, JSONBOID, TEXTOID, INT4OID, OIDOID};
	Datum		args[11];
	char		nulls[11];
	ErrorContextCallback errcallback;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3) || PG_ARGISNULL(4) ||
		PG_ARGISNULL(6) || PG_ARGISNULL(7))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("only watermark and dedup_keys of create_query may be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	query_text = text_to_cstring(PG_GETARG_TEXT_PP(1));
	mode = parse_output_mode(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	options = PG_GETARG_JSONB_P(6);
	start = PG_GETARG_BOOL(7);
	validate_query_options(options);

	check_trigger_interval(PG_GETARG_INTERVAL_P(4));
	if (!PG_ARGISNULL(2) && interval_to_usec(PG_GETARG_INTERVAL_P(2), "watermark") < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("watermark must not be negative"),
				 errhint("The watermark is how far behind the newest event time a row may arrive, for example interval '10 seconds'.")));

	if (start)
	{
		check_preloaded();
		check_role_can_login(GetUserId());
	}

	SPI_connect();
	if (catalog_get_query(name, true) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("query \"%s\" already exists", name)));

	/* 1. parse, and rewrite hop() */
	errcallback.callback = query_text_error_callback;
	errcallback.arg = query_text;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	raw = raw_parser(query_text, RAW_PARSE_DEFAULT);
	if (list_length(raw) != 1 || !IsA(linitial_node(RawStmt, raw)->stmt, SelectStmt))
		refuse("a continuous query must be a single SELECT statement", NULL,
			   "For example: SELECT region, count(*) FROM orders GROUP BY streamwin.tumble(event_time, '1 minute'), region.");
	rawstmt = linitial_node(RawStmt, raw);
	if (((SelectStmt *) rawstmt->stmt)->op == SETOP_NONE)
		rewrite_hop((SelectStmt *) rawstmt->stmt);

	/* 2. analyse and check */
	memset(&c, 0, sizeof(c));
	c.query = parse_analyze_fixedparams(rawstmt, query_text, NULL, 0, NULL);
	error_context_stack = errcallback.previous;
	check_query_shape(c.query);
	check_from(&c);
	c.aggregate = c.query->hasAggs || c.query->groupClause != NIL;
	if (c.aggregate)
		compile_grouping(&c);
	else if (mode != OUTPUT_APPEND)
		refuse(psprintf("output mode \"%s\" needs an aggregation", mode == OUTPUT_UPDATE ? "update" : "complete"),
			   "A query without GROUP BY appends each row to the result table.",
			   "Use output_mode => 'append'.");

	if (jsonb_get_text(options, "event_time") != NULL)
	{
		if (c.window != NULL)
			refuse("option \"event_time\" is only for queries without a window",
				   "The first argument of the window function is the query's event time.",
				   "Leave the option out.");
		c.event_time = source_column_expr(&c, jsonb_get_text(options, "event_time"));
	}
	if (!PG_ARGISNULL(2) && c.event_time == NULL)
		refuse("a watermark needs an event time",
			   "The watermark is computed from the event time of a window in GROUP BY, or of the column named by the event_time option.",
			   "Group by streamwin.tumble(event_time, size), or name the column with options => '{\"event_time\": \"ts\"}', or leave the watermark NULL.");
	if (!PG_ARGISNULL(5))
	{
		dedup_keys = dedup_key_names(&c, PG_GETARG_ARRAYTYPE_P(5));
		if (PG_ARGISNULL(2) &&
			!(jsonb_get_text(options, "dedup_without_watermark") != NULL &&
			  strcmp(jsonb_get_text(options, "dedup_without_watermark"), "true") == 0))
			refuse("dedup_keys need a watermark",
				   "Without a watermark no key is ever forgotten, so the deduplication state grows forever.",
				   "Set a watermark, or accept unbounded state with options => '{\"dedup_without_watermark\": true}'.");
	}
	if (c.aggregate && mode == OUTPUT_APPEND && (c.window == NULL || PG_ARGISNULL(2)))
		refuse("append mode needs an event-time window and a watermark",
			   "In append mode a window's row is written once, when the watermark closes it; without a watermark no window ever closes.",
			   c.window ? "Add a watermark, for example watermark => '10 seconds', or use output_mode => 'update'."
			   : "Group by streamwin.tumble() or streamwin.hop() and set a watermark, or use output_mode => 'update'.");
	/* its rows come from the WAL: the query's owner must be able to read the table */
	if (c.source->kind == SOURCE_TABLE)
		table_source_check_relation(c.source->source_table);
	if (c.source->owner != GetUserId() &&
		pg_class_aclcheck(c.source->relation, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for source \"%s\"", c.source->name)));

	if (OidIsValid(RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
									NoLock, true)))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s\" already exists", name),
				 errdetail("A query's result table takes the query's name."),
				 errhint("Choose another name for the query, or drop or rename the table.")));

	/* 3. the catalog row (the id names the state table), tables, statements */
	args[0] = CStringGetTextDatum(name);
	args[1] = Int32GetDatum(c.source->source_id);
	args[2] = ObjectIdGetDatum(GetUserId());
	args[3] = CStringGetTextDatum(query_text);
	args[4] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	args[5] = PG_GETARG_DATUM(3);
	args[6] = PG_GETARG_DATUM(4);
	args[7] = JsonbPGetDatum(options);
	args[8] = CStringGetTextDatum(start ? "running" : "stopped");
	memset(nulls, ' ', sizeof(nulls));
	nulls[4] = PG_ARGISNULL(2) ? 'n' : ' ';
	catalog_enter(&role);
	if (SPI_execute_with_args("INSERT INTO streamwin.query_catalog (name, source_id, owner, query, "
							  "watermark_delay, output_mode, trigger_interval, options, desired_state, "
							  "result_table, plan) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, '{}') RETURNING query_id",
							  9, argtypes, args, nulls, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert into streamwin.query_catalog");
	query_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										   &(bool) {false}));
	catalog_leave(&role);

	initStringInfo(&plan);
	appendStringInfo(&plan, "{\"kind\": \"%s\"", c.aggregate ? "aggregate" : "transform");
	if (c.aggregate)
	{
		result = create_result_table(&c, name);
		state = create_state_table(&c, query_id);
		checkpoint = checkpoint_create_table(query_id, state, psprintf("checkpoint_%d", query_id));
		if (c.window && strcmp(c.window, "session") == 0)
			session_statements(&c, result, state, mode, &plan);
		else
			aggregate_statements(&c, result, state, mode, &plan);
	}
	else
		result = create_transform_table(&c, name, &plan);
	if (c.window)
		appendStringInfo(&plan, ", \"window\": \"%s\", \"window_size_us\": " INT64_FORMAT
						 ", \"window_slide_us\": " INT64_FORMAT,
						 c.window, c.size_us,
						 strcmp(c.window, "session") == 0 ? 0 : c.slide_us ? c.slide_us : c.size_us);
	if (c.event_time)
	{
		appendStringInfoString(&plan, ", \"event_time\": ");
		escape_json(&plan, nodeToString(c.event_time));
	}
	if (dedup_keys != NIL)
		dedup_statements(&c, dedup_keys, query_id, &plan, &dedup, &dedup_checkpoint);
	appendStringInfoChar(&plan, '}');

	argtypes[0] = OIDOID;
	argtypes[1] = OIDOID;
	argtypes[2] = TEXTOID;
	argtypes[3] = INT4OID;
	argtypes[4] = OIDOID;
	args[0] = ObjectIdGetDatum(result);
	args[1] = ObjectIdGetDatum(state);
	args[2] = CStringGetTextDatum(plan.data);
	args[3] = Int32GetDatum(query_id);
	args[4] = ObjectIdGetDatum(checkpoint);
	memset(nulls, ' ', sizeof(nulls));
	nulls[1] = OidIsValid(state) ? ' ' : 'n';
	nulls[4] = OidIsValid(checkpoint) ? ' ' : 'n';
	/*
	 * A table source starts now ('latest') or at the oldest change its slot
	 * holds ('earliest'); resolved here so that the slot keeps it for us.
	 */
	argtypes[5] = INT8OID;
	nulls[5] = 'n';
	argtypes[6] = OIDOID;
	argtypes[7] = OIDOID;
	args[6] = ObjectIdGetDatum(dedup);
	args[7] = ObjectIdGetDatum(dedup_checkpoint);
	nulls[6] = nulls[7] = OidIsValid(dedup) ? ' ' : 'n';
	if (c.source->kind == SOURCE_TABLE)
	{
		source_hold_start(c.source->source_id);
		args[5] = Int64GetDatum((int64) (c.source->starting_offset == START_LATEST ?
										 GetXLogInsertRecPtr() :
										 source_slot_confirmed(c.source->slot_name)));
		nulls[5] = ' ';
	}
	catalog_enter(&role);
	if (SPI_execute_with_args("UPDATE streamwin.query_catalog SET result_table = $1, state_table = $2, "
							  "plan = $3::jsonb, checkpoint_table = $5, start_lsn = $6, "
							  "dedup_table = $7, dedup_checkpoint = $8 WHERE query_id = $4",
							  8, argtypes, args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update streamwin.query_catalog");
	catalog_leave(&role);
	SPI_finish();

	if (start)
		launcher_request_start(query_id, GetUserId());
	PG_RETURN_VOID();
}
