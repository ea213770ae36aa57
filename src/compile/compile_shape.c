/*-------------------------------------------------------------------------
 *
 * compile_shape.c
 *	  The shape of a continuous query: hop() rewritten in the raw tree, and
 *	  the checks of the analysed query (what can run incrementally, the
 *	  source in FROM, the window, the group keys and aggregates).
 *
 * Every refusal says, with errdetail/errhint, what to write instead.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/regproc.h"

#include "batch_input.h"
#include "catalog.h"
#include "compile_aggregate.h"
#include "compile_shape.h"
#include "compile_sql.h"
#include "spi_util.h"
#include "window.h"

/*
 * The most hop windows a row may fall in (size / slide): a day by the
 * second.  More would hold a row in millions of groups, and the counts of
 * windows are ints.
 */
/* --- the raw tree --------------------------------------------------------- */

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
 * Is this raw call of tumble(), hop() or session() streamwin's?  One that
 * names streamwin, or names no schema while no function of another schema
 * by that name is visible (a user's own hop() is none of ours).
 */
static bool
raw_call_is_ours(FuncCall *fc)
{
	FuncCandidateList fcl;

	if (list_length(fc->funcname) != 1)
		return true;
	fcl = FuncnameGetCandidates(fc->funcname, list_length(fc->args), NIL, false, false, false, true);
	for (; fcl != NULL; fcl = fcl->next)
		if (get_func_namespace(fcl->oid) != get_namespace_oid("streamwin", false))
			return false;
	return true;
}

/*
 * Rewrite hop(ts, size, slide) found at the top of a select item or GROUP BY
 * item of an aggregation into a column of LATERAL hop_starts(ts, size,
 * slide): each row goes to every window that covers it.  Returns true if
 * the query groups by hop().  A query without GROUP BY (a transform) keeps
 * hop() as the function it is, the start of the latest window of each row,
 * as plain SQL reads it: a row each, not a row per window.
 */
/* The hop() call a query groups by, and what takes its place */
typedef struct HopReplace
{
	FuncCall   *hop;
	ColumnRef  *ref;
} HopReplace;

static void
replace_hop_at(Node **at, HopReplace *r)
{
	if (*at != NULL && equal(*at, r->hop))
		*at = (Node *) copyObject(r->ref);
}

static void
replace_hop_in(List *list, HopReplace *r)
{
	ListCell   *lc;

	foreach(lc, list)
		replace_hop_at((Node **) &lfirst(lc), r);
}

/*
 * The grouped hop() inside an expression of the SELECT list (window_start
 * + interval '10 minutes', date_trunc('hour', hop(...))), as a tumble()
 * there is the group's window: the expressions a SELECT list holds.
 */
static bool
replace_hop_walker(Node *node, void *context)
{
	HopReplace *r = context;

	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_A_Expr:
			replace_hop_at(&((A_Expr *) node)->lexpr, r);
			replace_hop_at(&((A_Expr *) node)->rexpr, r);
			break;
		case T_TypeCast:
			replace_hop_at(&((TypeCast *) node)->arg, r);
			break;
		case T_CollateClause:
			replace_hop_at(&((CollateClause *) node)->arg, r);
			break;
		case T_FuncCall:
			replace_hop_in(((FuncCall *) node)->args, r);
			break;
		case T_BoolExpr:
			replace_hop_in(((BoolExpr *) node)->args, r);
			break;
		case T_CoalesceExpr:
			replace_hop_in(((CoalesceExpr *) node)->args, r);
			break;
		case T_MinMaxExpr:
			replace_hop_in(((MinMaxExpr *) node)->args, r);
			break;
		case T_RowExpr:
			replace_hop_in(((RowExpr *) node)->args, r);
			break;
		case T_A_ArrayExpr:
			replace_hop_in(((A_ArrayExpr *) node)->elements, r);
			break;
		case T_CaseExpr:
			replace_hop_at((Node **) &((CaseExpr *) node)->arg, r);
			replace_hop_at((Node **) &((CaseExpr *) node)->defresult, r);
			break;
		case T_CaseWhen:
			replace_hop_at((Node **) &((CaseWhen *) node)->expr, r);
			replace_hop_at((Node **) &((CaseWhen *) node)->result, r);
			break;
		case T_NullTest:
			replace_hop_at((Node **) &((NullTest *) node)->arg, r);
			break;
		case T_BooleanTest:
			replace_hop_at((Node **) &((BooleanTest *) node)->arg, r);
			break;
		default:
			break;
	}
	return raw_expression_tree_walker(node, replace_hop_walker, context);
}

/*
 * Is the hop() call grouped: in GROUP BY itself, or by the position or the
 * name of the SELECT list item it is (its alias, or window_start, which
 * the rewrite names it)?
 */
static bool
hop_grouped(SelectStmt *stmt, FuncCall *hop)
{
	ListCell   *lc;
	int			position = 0;

	foreach(lc, stmt->groupClause)
	{
		if (equal(lfirst(lc), hop))
			return true;
	}
	foreach(lc, stmt->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);
		ListCell   *g;

		position++;
		if (!equal(rt->val, hop))
			continue;
		foreach(g, stmt->groupClause)
		{
			Node	   *key = lfirst(g);

			if (IsA(key, A_Const) && IsA(&((A_Const *) key)->val, Integer) &&
				intVal(&((A_Const *) key)->val) == position)
				return true;
			if (IsA(key, ColumnRef) && list_length(((ColumnRef *) key)->fields) == 1 &&
				IsA(linitial(((ColumnRef *) key)->fields), String))
			{
				const char *n = strVal(linitial(((ColumnRef *) key)->fields));

				if (strcmp(n, "window_start") == 0 || (rt->name && strcmp(n, rt->name) == 0))
					return true;
			}
		}
	}
	return false;
}

bool
rewrite_hop(SelectStmt *stmt)
{
	FuncCall   *hop = NULL;
	ListCell   *lc;
	ColumnRef  *ref;
	RangeFunction *rf;
	FuncCall   *starts;

	if (stmt->groupClause == NIL)
		return false;
	foreach(lc, stmt->groupClause)
	{
		if (is_raw_call(lfirst(lc), "hop") && raw_call_is_ours(lfirst(lc)))
			hop = hop ? hop : (FuncCall *) lfirst(lc);
	}
	foreach(lc, stmt->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);

		if (is_raw_call(rt->val, "hop") && raw_call_is_ours((FuncCall *) rt->val))
			hop = hop ? hop : (FuncCall *) rt->val;
	}
	if (hop == NULL)
		return false;
	if (list_length(hop->args) != 3)
		refuse("hop() takes three arguments: event time, window size and slide",
			   NULL, "For example: GROUP BY streamwin.hop(event_time, '10 minutes', '1 minute').");
	if (!hop_grouped(stmt, hop))
		refuse("hop() in the SELECT list must be a GROUP BY key too",
			   "A row falls in several hopping windows, so the query must group by the window to count it in each.",
			   "Add it to GROUP BY, for example GROUP BY streamwin.hop(event_time, '10 minutes', '1 minute'), or by its position or name in the SELECT list.");

	ref = makeNode(ColumnRef);
	ref->fields = list_make2(makeString(HOP_ALIAS), makeString("window_start"));
	ref->location = hop->location;

	foreach(lc, stmt->groupClause)
	{
		if (equal(lfirst(lc), hop))
			lfirst(lc) = copyObject(ref);
	}
	foreach(lc, stmt->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);

		if (equal(rt->val, hop))
		{
			rt->val = (Node *) copyObject(ref);
			if (rt->name == NULL)
				rt->name = pstrdup("window_start");
		}
		else
		{
			HopReplace	r = {hop, ref};

			(void) replace_hop_walker(rt->val, &r);
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

/*
 * The window calls of a raw tree, for check_window_arguments: those that
 * name streamwin's, or name no schema while no function of another schema
 * by that name is visible (a user's own tumble() is none of ours).
 */
static bool
find_window_calls(Node *node, List **calls)
{
	if (node == NULL)
		return false;
	if ((is_raw_call(node, "tumble") || is_raw_call(node, "session") || is_raw_call(node, "hop")) &&
		raw_call_is_ours((FuncCall *) node))
		*calls = lappend(*calls, node);
	return raw_expression_tree_walker(node, find_window_calls, (void *) calls);
}

/* What a window's argument is called in a hint: its column, if it is one. */
static char *
raw_arg_label(Node *arg, const char *otherwise)
{
	if (IsA(arg, ColumnRef) && IsA(llast(((ColumnRef *) arg)->fields), String))
		return NameListToString(((ColumnRef *) arg)->fields);
	return (char *) otherwise;
}

/* Can arg, of type `type` in the probe, be passed as `target`? */
static bool
arg_fits(Node *arg, Oid type, Oid target)
{
	/* a quoted literal or NULL is of unknown type, which coerces to anything */
	if (IsA(arg, A_Const) && (((A_Const *) arg)->isnull || IsA(&((A_Const *) arg)->val, String)))
		return true;
	return can_coerce_type(1, &type, &target, COERCION_IMPLICIT);
}

/* The event time of a window call is of type `type`, not a timestamp. */
static void
refuse_event_time(const char *fname, Node *arg, Oid type)
{
	TYPCATEGORY cat = TypeCategory(type);

	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("the event time of streamwin.%s() must be of type timestamptz, not %s",
					fname, format_type_be(type)),
			 cat == TYPCATEGORY_NUMERIC ?
			 errhint("For epoch milliseconds, write streamwin.%s(to_timestamp(%s / 1000.0), ...); for epoch seconds, streamwin.%s(to_timestamp(%s), ...).",
					 fname, raw_arg_label(arg, "ts_ms"), fname, raw_arg_label(arg, "ts_s")) :
			 cat == TYPCATEGORY_STRING ?
			 errhint("Declare the column as timestamptz, or convert it in the query: for ISO 8601 text with a zone offset, streamwin.%s(%s::timestamptz, ...); for epoch milliseconds, streamwin.%s(to_timestamp(ts_ms / 1000.0), ...).",
					 fname, raw_arg_label(arg, "ts"), fname) :
			 errhint("Use a timestamptz column or expression. For epoch milliseconds, write streamwin.%s(to_timestamp(ts_ms / 1000.0), ...).",
					 fname),
			 errposition(exprLocation(arg) + 1)));
}

/*
 * Window functions are declared over timestamptz and interval only: on
 * another type PostgreSQL finds no such function ("function
 * streamwin.tumble(bigint, unknown) does not exist").  Say instead which
 * argument is of the wrong type and how to convert it.  The arguments'
 * types come from analysing them alone over the query's FROM, which raises
 * the errors the whole query would raise there.  Call on the raw tree,
 * before rewrite_hop.
 */
void
check_window_arguments(SelectStmt *stmt, const char *query_text)
{
	List	   *calls = NIL;
	ListCell   *lc;
	SelectStmt *probe;
	RawStmt    *raw;
	Query	   *q;
	int			i = 0;

	(void) find_window_calls((Node *) stmt->targetList, &calls);
	(void) find_window_calls((Node *) stmt->groupClause, &calls);
	if (calls == NIL)
		return;

	probe = makeNode(SelectStmt);
	foreach(lc, calls)
	{
		ListCell   *la;

		foreach(la, ((FuncCall *) lfirst(lc))->args)
		{
			ResTarget  *rt = makeNode(ResTarget);

			rt->val = copyObject(lfirst(la));
			rt->location = exprLocation(lfirst(la));
			probe->targetList = lappend(probe->targetList, rt);
		}
	}
	/* hop() reads from no LATERAL function yet: rewrite_hop comes after */
	probe->fromClause = copyObject(stmt->fromClause);
	/* FROM may name a WITH query (refused later, with its own message) */
	probe->withClause = copyObject(stmt->withClause);
	raw = makeNode(RawStmt);
	raw->stmt = (Node *) probe;
	q = parse_analyze_fixedparams(raw, query_text, NULL, 0, NULL);

	foreach(lc, calls)
	{
		FuncCall   *fc = lfirst(lc);
		char	   *fname = strVal(llast(fc->funcname));
		ListCell   *la;
		int			argno = 0;

		foreach(la, fc->args)
		{
			Node	   *arg = lfirst(la);
			Oid			type = exprType((Node *) list_nth_node(TargetEntry, q->targetList, i++)->expr);

			if (++argno == 1 && !arg_fits(arg, type, TIMESTAMPTZOID))
				refuse_event_time(fname, arg, type);
			else if (argno > 1 && !arg_fits(arg, type, INTERVALOID))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("the %s of streamwin.%s() must be of type interval, not %s",
								strcmp(fname, "session") == 0 ? "gap" : argno == 2 ? "size" : "slide",
								fname, format_type_be(type)),
						 errhint("Write it as an interval, for example '1 minute' or interval '10 seconds'."),
						 errposition(exprLocation(arg) + 1)));
		}
	}
}

/* --- processing time -------------------------------------------------------- */

/*
 * Is node now() or one of its kin (CURRENT_DATE, ...)?  In the query itself
 * they are the batch's recorded time (rewrite_batch_time); in a view they
 * would be the time the batch runs, which a replay reads anew.
 */
static bool
is_clock(Node *node)
{
	if (IsA(node, FuncExpr))
	{
		Oid			f = ((FuncExpr *) node)->funcid;

		return f == F_NOW || f == F_TRANSACTION_TIMESTAMP || f == F_STATEMENT_TIMESTAMP;
	}
	if (IsA(node, SQLValueFunction))
	{
		switch (((SQLValueFunction *) node)->op)
		{
			case SVFOP_CURRENT_DATE:
			case SVFOP_CURRENT_TIME:
			case SVFOP_CURRENT_TIME_N:
			case SVFOP_CURRENT_TIMESTAMP:
			case SVFOP_CURRENT_TIMESTAMP_N:
			case SVFOP_LOCALTIME:
			case SVFOP_LOCALTIME_N:
			case SVFOP_LOCALTIMESTAMP:
			case SVFOP_LOCALTIMESTAMP_N:
				return true;
			default:
				return false;
		}
	}
	return false;
}

/*
 * now(), current_timestamp and the other clocks of the transaction would
 * give a replayed batch another time than the first run, and so put its rows
 * in other processing-time windows: they become the batch's own timestamp,
 * streamwin.batch_timestamp(), which a batch takes when it begins and a
 * replay from its progress record (Spark's batch timestamp).  The SQL
 * forms that are not timestamptz (CURRENT_DATE, LOCALTIMESTAMP(3), ...)
 * become casts of it, which is what PostgreSQL computes them as.
 */
static Node *
batch_time_mutator(Node *node, Oid *batch_timestamp)
{
	if (node == NULL)
		return NULL;
	if (is_clock(node))
	{
		FuncExpr   *ts = makeFuncExpr(*batch_timestamp, TIMESTAMPTZOID, NIL, InvalidOid,
									  InvalidOid, COERCE_EXPLICIT_CALL);
		SQLValueFunction *svf;

		if (IsA(node, FuncExpr))
		{
			ts->location = ((FuncExpr *) node)->location;
			return (Node *) ts;
		}
		svf = (SQLValueFunction *) node;
		ts->location = svf->location;
		return coerce_to_target_type(NULL, (Node *) ts, TIMESTAMPTZOID,
									 svf->type, svf->typmod, COERCION_EXPLICIT,
									 COERCE_EXPLICIT_CAST, svf->location);
	}
	if (IsA(node, Query))
		return (Node *) query_tree_mutator((Query *) node, batch_time_mutator, batch_timestamp, 0);
	return expression_tree_mutator(node, batch_time_mutator, batch_timestamp);
}

/* The analysed query with now() and its kin as the batch's timestamp. */
Query *
rewrite_batch_time(Query *q)
{
	Oid			batch_timestamp = streamwin_func_oid("batch_timestamp", 0, NULL);

	return query_tree_mutator(q, batch_time_mutator, &batch_timestamp, 0);
}

static Node *
batch_time_param_mutator(Node *node, Oid *batch_timestamp)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, FuncExpr) && ((FuncExpr *) node)->funcid == *batch_timestamp)
	{
		Param	   *p = makeNode(Param);

		p->paramkind = PARAM_EXTERN;
		p->paramid = BATCH_TIME_PARAMID;
		p->paramtype = TIMESTAMPTZOID;
		p->paramtypmod = -1;
		p->paramcollid = InvalidOid;
		p->location = -1;
		return (Node *) p;
	}
	return expression_tree_mutator(node, batch_time_param_mutator, batch_timestamp);
}

/*
 * The event time as the plan keeps it (nodeToString, evaluated while
 * decoding): the batch's timestamp as parameter BATCH_TIME_PARAMID, which
 * the decoder supplies, rather than a call of a function whose oid a dump
 * and restore would change.
 */
Expr *
event_time_for_plan(Expr *event_time)
{
	Oid			batch_timestamp = streamwin_func_oid("batch_timestamp", 0, NULL);

	return (Expr *) batch_time_param_mutator((Node *) event_time, &batch_timestamp);
}

/* --- checks on the analysed query ------------------------------------------ */

/* Does jointree node n contain range table entry rtindex? */
bool
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
		{
			if (jointree_contains(lfirst(lc), rtindex))
				return true;
		}
	}
	return false;
}

/*
 * Is JoinExpr j the join of a query's two sources: one in each argument,
 * and the nullable argument of an outer join the other source itself
 * (FROM ads a JOIN i ON ... LEFT JOIN c ON ...)?
 */
bool
joins_sources(Compiled *c, JoinExpr *j)
{
	Node	   *nullable;

	nullable = j->jointype == JOIN_LEFT ? j->rarg :
		j->jointype == JOIN_RIGHT ? j->larg : NULL;
	if (c->nsources != 2)
		return false;
	if (!((jointree_contains(j->larg, c->source_rtindexes[0]) &&
		   jointree_contains(j->rarg, c->source_rtindexes[1])) ||
		  (jointree_contains(j->larg, c->source_rtindexes[1]) &&
		   jointree_contains(j->rarg, c->source_rtindexes[0]))))
		return false;
	return nullable == NULL ||
		(IsA(nullable, RangeTblRef) &&
		 (((RangeTblRef *) nullable)->rtindex == c->source_rtindexes[0] ||
		  ((RangeTblRef *) nullable)->rtindex == c->source_rtindexes[1]));
}

/*
 * A stream must be on the preserved side of every outer join with a table:
 * a batch only sees the rows that arrived since the last one, so a table
 * row that "matches no stream row" in one batch may match in the next.
 * (The outer join of two sources is a stream-stream join, compile_join.c.)
 */
static void
check_joins(Compiled *c, Node *n, int source)
{
	if (n == NULL)
		return;
	if (IsA(n, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) n)->fromlist)
			check_joins(c, lfirst(lc), source);
	}
	else if (IsA(n, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) n;
		bool		in_left = jointree_contains(j->larg, source);
		bool		in_right = jointree_contains(j->rarg, source);

		if ((in_left || in_right) && !joins_sources(c, j) &&
			(j->jointype == JOIN_FULL ||
			 (j->jointype == JOIN_LEFT && in_right) ||
			 (j->jointype == JOIN_RIGHT && in_left)))
			refuse("the source must not be on the nullable side of an outer join",
				   "Each batch sees only the rows that arrived since the previous batch, so table rows without a match would be emitted again and again.",
				   "Join the source with an inner join, or put it on the left of a LEFT JOIN.");
		check_joins(c, j->larg, source);
		check_joins(c, j->rarg, source);
	}
}

/* What a walk of the views under a relation in FROM finds */
typedef struct ViewWalk
{
	Oid			view;			/* the view being read: its query names it too
								 * (PostgreSQL 15's OLD and NEW entries) */
	Oid			volatile_func;	/* a volatile built-in one of them calls */
	bool		reads_clock;	/* now() and its kin, in one of them */
} ViewWalk;

static bool view_reads_source(Oid relid, ViewWalk *found);
static bool volatile_builtin(Oid func, void *context);
static char *unreplayable_function(Oid func);
static Oid	session_state_keyword(Node *node);


/*
 * Does a range table entry of a view's query (or of its subqueries) read a
 * source?  And does an expression of theirs call a volatile built-in?
 */
static bool
view_rte_reads_source(Node *node, void *context)
{
	ViewWalk   *walk = (ViewWalk *) context;

	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		return rte->rtekind == RTE_RELATION && rte->relid != walk->view &&
			view_reads_source(rte->relid, walk);
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, view_rte_reads_source, context, QTW_EXAMINE_RTES_BEFORE);
	if (!OidIsValid(walk->volatile_func) &&
		!check_functions_in_node(node, volatile_builtin, &walk->volatile_func))
		walk->volatile_func = session_state_keyword(node);
	walk->reads_clock |= is_clock(node);
	return expression_tree_walker(node, view_rte_reads_source, context);
}

/*
 * Is relid a source, or a view that reads one, through other views and
 * subqueries too?  Sets found->volatile_func to a volatile built-in
 * function that one of those views calls, if it finds one first, and
 * found->reads_clock if one reads the current time: a replay would read
 * such a view otherwise (check_replayable).
 */
static bool
view_reads_source(Oid relid, ViewWalk *found)
{
	Relation	rel;
	ViewWalk	walk = {relid, InvalidOid, false};
	bool		reads;

	if (catalog_get_source_by_relation(relid) != NULL)
		return true;
	if (get_rel_relkind(relid) != RELKIND_VIEW)
		return false;
	check_stack_depth();
	rel = relation_open(relid, AccessShareLock);
	reads = query_tree_walker(get_view_query(rel), view_rte_reads_source, &walk, QTW_EXAMINE_RTES_BEFORE);
	relation_close(rel, AccessShareLock);
	if (!OidIsValid(found->volatile_func))
		found->volatile_func = walk.volatile_func;
	found->reads_clock |= walk.reads_clock;
	return reads;
}

/*
 * A table (or view) the query joins: its batches read it in their worker
 * and in other sessions, as the query's owner, who creates it now.
 */
static void
check_joined_table(RangeTblEntry *rte)
{
	const char *name = get_rel_name(rte->relid);

	if (get_rel_persistence(rte->relid) == RELPERSISTENCE_TEMP)
		refuse(psprintf("temporary %s \"%s\" cannot be joined in a continuous query",
						get_rel_relkind(rte->relid) == RELKIND_VIEW ? "view" : "table", name),
			   "The query's batches run in its worker and in other sessions, which do not see this session's temporary tables, and would read another table of the same name.",
			   "Join a permanent table (an UNLOGGED table will do).");
	if (!ExecCheckRTPerms(list_make1(rte), false))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table \"%s\"", name),
				 errdetail("The query's batches read it as the query's owner, the role creating it."),
				 errhint("Have the table's owner GRANT SELECT ON %s to the query's owner.",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)), name))));
}

/*
 * Find the source among the FROM items, and check the other items.
 */
void
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
		ViewWalk	view = {InvalidOid, InvalidOid, false};

		rtindex++;
		switch (rte->rtekind)
		{
			case RTE_RELATION:
				if (rte->tablesample != NULL && rte->tablesample->repeatable == NULL)
					refuse(psprintf("TABLESAMPLE of \"%s\" without REPEATABLE is not supported in continuous queries",
									get_rel_name(rte->relid)),
						   "A batch replayed after a crash must give what it gave the first time; the sample would be another.",
						   "Add REPEATABLE (seed), or sample by a hash of a column in WHERE.");
				src = catalog_get_source_by_relation(rte->relid);
				if (src == NULL && view_reads_source(rte->relid, &view))
					refuse(psprintf("view \"%s\" reads a source", get_rel_name(rte->relid)),
						   "A view over a source reads the batch's rows of it, not a table's: a join with it would join the batch with itself.",
						   "Name the source itself in FROM, with the view's conditions in WHERE.");
				if (src == NULL && OidIsValid(view.volatile_func))
					refuse(psprintf("view \"%s\" calls %s", get_rel_name(rte->relid),
									unreplayable_function(view.volatile_func)),
						   "A batch replayed after a crash must give what it gave the first time; the view would give other rows.",
						   "Join the table itself, or a view without that function.");
				if (src == NULL && view.reads_clock)
					refuse(psprintf("view \"%s\" reads the current time", get_rel_name(rte->relid)),
						   "In a view, now() and its kin are the time a batch runs, which a batch replayed after a crash reads anew; in the query itself they are the batch's recorded time.",
						   "Compare with now() in the query itself (in WHERE or ON), or join a view without it.");
				if (src == NULL)
				{
					check_joined_table(rte);
					break;		/* an ordinary table, read as of each batch */
				}
				for (int i = 0; i < c->nsources; i++)
					if (c->sources[i]->source_id == src->source_id)
						refuse(psprintf("source \"%s\" is read twice: a stream cannot be joined with itself", src->name),
							   "A self-join would need each row's side told apart in one batch and one state; streamwin joins two different sources.",
							   "Create a second source over the same topic or table and join the two, or join the source with a result table of another continuous query.");
				if (c->nsources == QUERY_MAX_SOURCES)
					refuse("a continuous query can join at most two sources",
						   "A stream-stream join keeps the rows of each side that can still match; joins of more than two streams are not supported.",
						   "Join two of the sources in one query, and its result table with the third in ordinary SQL, or create one query per pair.");
				c->sources[c->nsources] = src;
				c->source_rtindexes[c->nsources] = rtindex;
				c->nsources++;
				break;
			case RTE_JOIN:
				break;
			case RTE_FUNCTION:
				/* the hop windows rewrite_hop made, checked as windows */
				if (list_length(rte->functions) == 1 &&
					IsA(linitial_node(RangeTblFunction, rte->functions)->funcexpr, FuncExpr) &&
					((FuncExpr *) linitial_node(RangeTblFunction, rte->functions)->funcexpr)->funcid == hop_starts &&
					rte->alias != NULL && strcmp(rte->alias->aliasname, HOP_ALIAS) == 0)
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
	if (c->nsources == 0)
		refuse("a continuous query must read a streamwin source",
			   "None of the relations in FROM is a source.",
			   "Create one with streamwin.create_kafka_source() or streamwin.create_table_source() and name it in FROM.");
	/* source 0 is what a query over one source reads */
	c->source = c->sources[0];
	c->source_rtindex = c->source_rtindexes[0];
	for (int i = 0; i < c->nsources; i++)
		check_joins(c, (Node *) q->jointree, c->source_rtindexes[i]);
}

void
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

/*
 * Built-in functions that are only stable, yet read more than their
 * arguments and the settings a batch fixes: the current date (age() of one
 * argument), any setting, the search path, the transaction, the session's
 * process or connection.  A replay after a crash, or a batch run in another
 * session than the worker, would see other values.
 */
static const Oid session_state_functions[] = {
	F_AGE_TIMESTAMPTZ, F_AGE_TIMESTAMP, F_AGE_XID, F_MXID_AGE,
	F_CURRENT_SETTING_TEXT, F_CURRENT_SETTING_TEXT_BOOL, F_CURRENT_SCHEMA, F_CURRENT_SCHEMAS,
	F_TXID_CURRENT, F_PG_CURRENT_XACT_ID, F_TXID_CURRENT_IF_ASSIGNED,
	F_PG_CURRENT_XACT_ID_IF_ASSIGNED, F_PG_BACKEND_PID, F_PG_TRIGGER_DEPTH,
	F_INET_CLIENT_ADDR, F_INET_CLIENT_PORT, F_INET_SERVER_ADDR, F_INET_SERVER_PORT,
	F_PG_POSTMASTER_START_TIME, F_PG_CONF_LOAD_TIME, F_SESSION_USER, F_PG_CURRENT_SNAPSHOT,
	F_TXID_CURRENT_SNAPSHOT, F_PG_MY_TEMP_SCHEMA,
};

/*
 * The same as keywords: CURRENT_SCHEMA (the search path) and SESSION_USER
 * (the caller of run_batch, the owner in a worker), as the function each
 * stands for.  (CURRENT_USER and USER are the query's owner in both; the
 * clocks are the batch's recorded time.)
 */
static Oid
session_state_keyword(Node *node)
{
	if (!IsA(node, SQLValueFunction))
		return InvalidOid;
	switch (((SQLValueFunction *) node)->op)
	{
		case SVFOP_CURRENT_SCHEMA:
			return F_CURRENT_SCHEMA;
		case SVFOP_SESSION_USER:
			return F_SESSION_USER;
		default:
			return InvalidOid;
	}
}

static bool
reads_session_state(Oid func)
{
	for (int i = 0; i < (int) lengthof(session_state_functions); i++)
		if (session_state_functions[i] == func)
			return true;
	return false;
}

/*
 * A built-in function whose value a replay may not see again: volatile, or
 * reading the session (reads_session_state).  fn's context is where to say
 * which.
 */
static bool
volatile_builtin(Oid func, void *context)
{
	if (get_func_namespace(func) != PG_CATALOG_NAMESPACE ||
		(func_volatile(func) != PROVOLATILE_VOLATILE && !reads_session_state(func)))
		return false;
	*(Oid *) context = func;
	return true;
}

/* "volatile function f", or "function f" of reads_session_state */
static char *
unreplayable_function(Oid func)
{
	return psprintf("%sfunction %s", reads_session_state(func) ? "" : "volatile ",
					format_procedure(func));
}

static bool
volatile_builtin_walker(Node *node, Oid *found)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, volatile_builtin, found))
		return true;
	if (IsA(node, NextValueExpr))
	{
		*found = F_NEXTVAL;
		return true;
	}
	if (OidIsValid(*found = session_state_keyword(node)))
		return true;
	return expression_tree_walker(node, volatile_builtin_walker, found);
}

/*
 * A replay after a crash must see what the first run saw: a built-in
 * volatile function (random(), clock_timestamp(), nextval(), ...) anywhere
 * in the query would give the replayed batch other rows, groups or values
 * than those committed.  now() and its kin are the batch's recorded time
 * (rewrite_batch_time).  A function of the user's own is taken to depend
 * on its arguments only, volatile or not (queries.md says so).
 */
void
check_replayable(Query *q)
{
	Oid			found = InvalidOid;

	if (volatile_builtin_walker((Node *) q->targetList, &found) ||
		volatile_builtin_walker((Node *) q->jointree, &found))
		refuse(psprintf("continuous queries must not call %s", unreplayable_function(found)),
			   reads_session_state(found) ?
			   "A batch replayed after a crash, or run in another session, must give what it gave the first time; "
			   "this function reads the current date, a setting, the transaction or the session, and would give other values." :
			   "A batch replayed after a crash must give what it gave the first time; this function would give other values.",
			   "Use now() for the batch's processing time, a hash of a column for sampling "
			   "(abs(hashtext(id::text)) % 10 = 0), or compute the value when reading the result table.");
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
 * The stable built-in functions that an event time may use: date and time
 * conversions and arithmetic, whose results depend on their arguments and
 * on TimeZone, DateStyle and IntervalStyle only, which a batch fixes
 * (batch_execute).  Not to_char (lc_time), age(x) (the current date) nor
 * any clock.
 */
static const Oid zone_dependent_functions[] = {
	F_DATE_TIMESTAMPTZ, F_DATE_CMP_TIMESTAMPTZ, F_DATE_EQ_TIMESTAMPTZ, F_DATE_GE_TIMESTAMPTZ,
	F_DATE_GT_TIMESTAMPTZ, F_DATE_LE_TIMESTAMPTZ, F_DATE_LT_TIMESTAMPTZ, F_DATE_NE_TIMESTAMPTZ,
	F_DATE_IN, F_DATE_OUT, F_DATE_PART_TEXT_TIMESTAMPTZ, F_DATE_TRUNC_TEXT_TIMESTAMPTZ,
	F_DATE_TRUNC_TEXT_TIMESTAMPTZ_TEXT, F_EXTRACT_TEXT_TIMESTAMPTZ,
	F_IN_RANGE_TIMESTAMPTZ_TIMESTAMPTZ_INTERVAL_BOOL_BOOL, F_INTERVAL_IN, F_INTERVAL_OUT,
	F_INTERVAL_PL_TIMESTAMPTZ, F_MAKE_TIMESTAMPTZ_INT4_INT4_INT4_INT4_INT4_FLOAT8,
	F_MAKE_TIMESTAMPTZ_INT4_INT4_INT4_INT4_INT4_FLOAT8_TEXT,
	F_OVERLAPS_TIMESTAMPTZ_INTERVAL_TIMESTAMPTZ_INTERVAL,
	F_OVERLAPS_TIMESTAMPTZ_INTERVAL_TIMESTAMPTZ_TIMESTAMPTZ,
	F_OVERLAPS_TIMESTAMPTZ_TIMESTAMPTZ_TIMESTAMPTZ_INTERVAL, F_TIME_TIMESTAMPTZ, F_TIME_IN,
	F_TIMESTAMP_TIMESTAMPTZ, F_TIMESTAMP_CMP_TIMESTAMPTZ, F_TIMESTAMP_EQ_TIMESTAMPTZ,
	F_TIMESTAMP_GE_TIMESTAMPTZ, F_TIMESTAMP_GT_TIMESTAMPTZ, F_TIMESTAMP_IN,
	F_TIMESTAMP_LE_TIMESTAMPTZ, F_TIMESTAMP_LT_TIMESTAMPTZ, F_TIMESTAMP_NE_TIMESTAMPTZ,
	F_TIMESTAMP_OUT, F_TIMESTAMPTZ_DATE, F_TIMESTAMPTZ_DATE_TIME, F_TIMESTAMPTZ_TIMESTAMP,
	F_TIMESTAMPTZ_CMP_DATE, F_TIMESTAMPTZ_CMP_TIMESTAMP, F_TIMESTAMPTZ_EQ_DATE,
	F_TIMESTAMPTZ_EQ_TIMESTAMP, F_TIMESTAMPTZ_GE_DATE, F_TIMESTAMPTZ_GE_TIMESTAMP,
	F_TIMESTAMPTZ_GT_DATE, F_TIMESTAMPTZ_GT_TIMESTAMP, F_TIMESTAMPTZ_IN, F_TIMESTAMPTZ_LE_DATE,
	F_TIMESTAMPTZ_LE_TIMESTAMP, F_TIMESTAMPTZ_LT_DATE, F_TIMESTAMPTZ_LT_TIMESTAMP,
	F_TIMESTAMPTZ_MI_INTERVAL, F_TIMESTAMPTZ_NE_DATE, F_TIMESTAMPTZ_NE_TIMESTAMP,
	F_TIMESTAMPTZ_OUT, F_TIMESTAMPTZ_PL_INTERVAL, F_TIMETZ_TIME, F_TIMETZ_TIMESTAMPTZ,
	F_TIMETZ_IN, F_TIMEZONE_TEXT_TIMETZ, F_TO_DATE, F_TO_TIMESTAMP_TEXT_TEXT,
};

typedef struct ReplayCheck
{
	Oid			batch_timestamp;
	Oid			unsafe;			/* the first function refused, if any */
	bool		unsafe_node;	/* or a node such as current_user */
} ReplayCheck;

static bool
replay_unsafe_function(Oid funcid, void *arg)
{
	ReplayCheck *rc = arg;

	if (funcid == rc->batch_timestamp || func_volatile(funcid) == PROVOLATILE_IMMUTABLE)
		return false;
	for (int i = 0; i < (int) lengthof(zone_dependent_functions); i++)
		if (zone_dependent_functions[i] == funcid)
			return false;
	rc->unsafe = funcid;
	return true;
}

/* Could a replay of a batch evaluate this expression differently? */
static bool
replay_unsafe_walker(Node *node, ReplayCheck *rc)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, replay_unsafe_function, rc))
		return true;
	if (IsA(node, SQLValueFunction) || IsA(node, NextValueExpr))
	{
		rc->unsafe_node = true;
		return true;
	}
	return expression_tree_walker(node, replay_unsafe_walker, rc);
}

/*
 * The event-time expression may use only the source's columns: it is
 * evaluated while decoding, before joins, to track the watermark and drop
 * late rows.  A replayed batch must put every row in the same window as the
 * first run: the expression may use immutable functions, the batch's
 * timestamp (now() and its kin, rewritten by rewrite_batch_time) and date
 * and time conversions, whose settings a batch fixes; nothing else.
 */
static void
check_event_time(Compiled *c, Expr *ts)
{
	List	   *vars = pull_var_clause((Node *) ts, 0);

	c->window_side = expr_source_side(c, (Node *) ts);
	if (c->window_side < 0 && vars != NIL)
		refuse(c->nsources > 1 ?
			   "the event time of a window must be computed from the columns of one source only" :
			   "the event time of a window must be computed from the source's columns only",
			   NULL, "Use a column of the source (or an expression over its columns) as the first argument of the window function.");
	check_time_replayable(ts, "of a window", "assign each row to the same window",
						  "assign a row to another window");
	c->event_time = ts;
}

/*
 * An event time must give a replayed batch the same times as the first
 * run.  For the messages: whose event time (what: "of a window"), what a
 * replay must do and what it could do otherwise.
 */
void
check_time_replayable(Expr *ts, const char *what, const char *must, const char *could)
{
	ReplayCheck rc = {streamwin_func_oid("batch_timestamp", 0, NULL), InvalidOid, false};

	if (contain_volatile_functions((Node *) ts))
		refuse(psprintf("the event time %s must not use volatile functions", what),
			   psprintf("Replaying a batch must %s.", must),
			   "Use a column of the source, for example streamwin.tumble(event_time, '1 minute'), or now() for the batch's processing time.");
	if (replay_unsafe_walker((Node *) ts, &rc))
		refuse(psprintf("the event time %s must not depend on anything but the row and the batch's time", what),
			   OidIsValid(rc.unsafe) ?
			   psprintf("Function %s is not immutable, so replaying a batch could %s.",
						format_procedure(rc.unsafe), could) :
			   psprintf("Replaying a batch must %s.", must),
			   "Use the source's columns with immutable functions, date and time conversions, or now() for the batch's processing time; "
			   "a function of your own whose result depends on its arguments only can be declared IMMUTABLE.");
}

/*
 * The source whose columns expression e uses (its index in c->sources), or
 * -1 if it uses none or the columns of anything else too.
 */
int
expr_source_side(Compiled *c, Node *e)
{
	List	   *vars = pull_var_clause(e, PVC_RECURSE_AGGREGATES | PVC_RECURSE_PLACEHOLDERS);
	ListCell   *lc;
	int			side = -1;

	foreach(lc, vars)
	{
		Var		   *v = lfirst_node(Var, lc);
		int			this = -1;

		for (int i = 0; i < c->nsources; i++)
			if (v->varno == c->source_rtindexes[i] && v->varlevelsup == 0)
				this = i;
		if (this < 0 || (side >= 0 && this != side))
			return -1;
		side = this;
	}
	return side;
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
		/*
		 * streamwin's hop() at the top of a GROUP BY item, which rewrite_hop
		 * left: written unqualified, while a function of that name in
		 * another schema is visible (raw_call_is_ours)
		 */
		refuse("hop() in GROUP BY may be another schema's function of that name",
			   "A function named hop outside schema streamwin is visible; streamwin takes an unqualified hop() for its windows only where none is.",
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
			/* each row is state in each of its windows, and written to each */
			if (slide > 0 && hop_windows_per_row(c->size_us, slide) > HOP_MAX_WINDOWS)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("hop windows of this size and slide hold each row in %lld windows",
								(long long) hop_windows_per_row(c->size_us, slide)),
						 errdetail("A row is counted in each window that covers it; streamwin takes at most %d.",
								   HOP_MAX_WINDOWS),
						 errhint("Use a larger slide, or a smaller size.")));
			check_event_time(c, linitial(f->args));
			*is_window = true;
		}
	}
}


/*
 * A column of the result table: named, once, and (windowed) not as the
 * window's own columns.
 */
void
check_column_name(List **seen, const char *name, bool windowed)
{
	ListCell   *lc;

	if (name == NULL || strcmp(name, "?column?") == 0)
		refuse("every column of a continuous query's result needs a name",
			   NULL, "Give the expression an alias with AS.");
	if (windowed && (strcmp(name, "window_start") == 0 || strcmp(name, "window_end") == 0))
		refuse(psprintf("result column name \"%s\" is reserved for the window", name),
			   NULL, "Give the column another alias with AS.");
	foreach(lc, *seen)
	{
		if (strcmp(lfirst(lc), name) == 0)
			refuse(psprintf("result column name \"%s\" is used more than once", name),
				   NULL, "Give the columns distinct aliases with AS.");
	}
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

/*
 * Mutator context of key_columns: an expression over the group keys (and
 * the window) made an expression over the state table's columns, Vars of
 * range table entry 1.
 */
typedef struct KeyColumns
{
	Compiled   *c;
	Oid			state;			/* the state table; InvalidOid: only check */
	Var		   *stray;			/* a column that is no group key */
} KeyColumns;

static Node *
state_column(KeyColumns *ctx, const char *name, Expr *e)
{
	AttrNumber	attno = 1;

	if (OidIsValid(ctx->state) &&
		(attno = get_attnum(ctx->state, name)) == InvalidAttrNumber)
		elog(ERROR, "streamwin: state table has no column \"%s\"", name);
	return (Node *) makeVar(1, attno, exprType((Node *) e), exprTypmod((Node *) e),
							exprCollation((Node *) e), 0);
}

static Node *
key_columns(Node *node, KeyColumns *ctx)
{
	ListCell   *lc;

	if (node == NULL)
		return NULL;
	if (ctx->c->window_tle && equal(node, ctx->c->window_tle->expr))
		return state_column(ctx, "window_start", ctx->c->window_tle->expr);
	foreach(lc, ctx->c->keys)
	{
		KeyCol	   *k = lfirst(lc);

		if (equal(node, k->tle->expr))
			return state_column(ctx, k->name, k->tle->expr);
	}
	if (IsA(node, Var))
	{
		if (ctx->stray == NULL)
			ctx->stray = (Var *) node;
		return node;
	}
	return expression_tree_mutator(node, key_columns, ctx);
}

/*
 * A SELECT list item that is neither a group key nor an aggregate: an
 * expression over the keys and the window (lower(region), the window's
 * start plus an interval, a constant), a column of the result computed
 * from the group's keys when its row is written, as plain SQL computes it
 * per group.  key_expressions_final gives its SQL once the state table
 * exists.  Expressions over aggregates are refused: each aggregate is
 * written as a column of its own.
 */
static void
compile_key_expression(Compiled *c, TargetEntry *tle)
{
	AggCol	   *col = palloc0(sizeof(AggCol));
	KeyColumns	ctx = {c, InvalidOid, NULL};

	if (contain_agg_clause((Node *) tle->expr))
		refuse(psprintf("SELECT list item \"%s\" is an expression over aggregates", tle->resname),
			   "Each aggregate is merged batch by batch and written to a result column of its own; expressions over aggregates are not computed.",
			   "Select each aggregate on its own, with an alias, and compute the expression when reading the result table, for example in a view.");
	(void) key_columns((Node *) tle->expr, &ctx);
	if (ctx.stray != NULL)
		refuse(psprintf("SELECT list item \"%s\" uses column %s, which is not a GROUP BY key",
						tle->resname, expr_label(c->query, (Expr *) ctx.stray)),
			   "Outside aggregates, the SELECT list of a continuous aggregation may use only the window and the GROUP BY keys.",
			   "Add the column to GROUP BY, or use it inside an aggregate.");
	if (contain_volatile_functions((Node *) tle->expr))
		refuse(psprintf("SELECT list item \"%s\" must not use volatile functions", tle->resname),
			   "It is computed from the group keys whenever the group's row is written, so a volatile function would change the row each time.",
			   "Compute it when reading the result table, for example in a view.");
	col->name = tle->resname;
	col->type = exprType((Node *) tle->expr);
	col->typmod = exprTypmod((Node *) tle->expr);
	col->collation = exprCollation((Node *) tle->expr);
	col->key_expr = tle->expr;
	c->aggs = lappend(c->aggs, col);
}

/*
 * The SQL of each expression over keys, over a row of the state table
 * (unqualified: the statements compute results from state rows alone).
 */
void
key_expressions_final(Compiled *c, Oid state)
{
	ListCell   *lc;

	foreach(lc, c->aggs)
	{
		AggCol	   *col = lfirst(lc);
		KeyColumns	ctx = {c, state, NULL};

		if (col->key_expr == NULL)
			continue;
		col->final_sql = deparse_expr_qualified(key_columns((Node *) col->key_expr, &ctx),
												deparse_context_for("s", state));
	}
}

/* Does node read a Var of range table entry rtindex? */
static bool
reads_rte_walker(Node *node, int *rtindex)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return ((Var *) node)->varno == *rtindex && ((Var *) node)->varlevelsup == 0;
	return expression_tree_walker(node, reads_rte_walker, rtindex);
}

/*
 * Does the query read a hop's window start (the LATERAL hop_starts() that
 * rewrite_hop added) anywhere but as its window column: in WHERE, in an
 * aggregate's argument or FILTER?  Then each row must be read once per
 * window, not once per pane, whose start is another.
 */
static bool
hop_start_in_rows(Compiled *c)
{
	Query	   *q = c->query;
	int			rtindex = hop_rtindex(q);
	ListCell   *lc;

	if (rtindex == 0)
		return false;
	if (reads_rte_walker((Node *) q->jointree, &rtindex))
		return true;
	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle != c->window_tle && reads_rte_walker((Node *) tle->expr, &rtindex))
			return true;
	}
	return false;
}

/* Classify GROUP BY items and the SELECT list of an aggregation. */
void
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

	/*
	 * The group keys first: the state table has the window's columns and the
	 * keys under their own names, and the partial aggregates' columns are
	 * named apart from them (internal_name).
	 */
	if (c->window)
		c->state_names = list_make2("window_start", "window_end");
	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle->resjunk || tle == c->window_tle)
			continue;
		if (tle->ressortgroupref != 0 && get_sortgroupref_clause_noerr(tle->ressortgroupref, q->groupClause))
		{
			KeyCol	   *k = palloc(sizeof(KeyCol));

			check_column_name(&names, tle->resname, c->window != NULL);
			check_key_type("group key", tle->resname ? quote_identifier(tle->resname) : expr_label(q, tle->expr),
						   exprType((Node *) tle->expr));
			k->name = tle->resname;
			k->tle = tle;
			c->keys = lappend(c->keys, k);
			c->state_names = lappend(c->state_names, tle->resname);
		}
	}
	/* over a changelog, a group counts its rows first (compile_aggregate.c) */
	if (c->change_attno > 0)
		compile_changelog_rows(c);
	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle->resjunk)
			continue;

		/*
		 * The window's call is the result's window_start and window_end; as
		 * an expression its value is the window's start, and given an alias
		 * (tumble(ts, '1 minute') AS minute) it is a column of that name too
		 */
		if (tle == c->window_tle)
		{
			if (strcmp(tle->resname, c->window) != 0 && strcmp(tle->resname, "window_start") != 0)
			{
				check_column_name(&names, tle->resname, true);
				compile_key_expression(c, tle);
			}
			continue;
		}
		if (tle->ressortgroupref != 0 && get_sortgroupref_clause_noerr(tle->ressortgroupref, q->groupClause))
			continue;
		check_column_name(&names, tle->resname, c->window != NULL);
		if (IsA(tle->expr, Aggref))
			compile_aggregate(c, tle);
		else
			compile_key_expression(c, tle);
	}

	if (c->window != NULL && strcmp(c->window, "hop") == 0)
		c->hop_start_in_rows = hop_start_in_rows(c);
	if (c->window_tle == NULL && c->keys == NIL)
		refuse("a continuous aggregation needs a window or a group key",
			   "Its result rows are found again by their window and keys.",
			   "Add GROUP BY streamwin.tumble(event_time, '1 minute') or GROUP BY a key column; for one row over everything, group by a constant you select: SELECT 'all' AS scope, count(*) ... GROUP BY scope.");
}
