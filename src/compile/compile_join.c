/*-------------------------------------------------------------------------
 *
 * compile_join.c
 *	  A stream-stream join (see join.h): its condition, each side's join
 *	  table, and the statements that pair, keep, match and let go of rows.
 *
 * create_query accepts a join of two sources on at least one equality and
 * an event-time range between them, for example
 *
 *		FROM impressions i JOIN clicks c ON c.ad_id = i.ad_id
 *		 AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
 *
 * The range bounds d = t1 - t0, side 1's time minus side 0's, to [lo, hi]
 * (here [0, 10 minutes]); each comparison of the two times, each plus or
 * minus constant intervals, bounds d from one side.  An interval of days
 * counts as 23 to 25 hours (a day across a change of zone offset), so the
 * bounds are never narrower than the condition.
 *
 * The batch statement joins new rows with new rows and with the other
 * side's join table, one copy of the analysed query per pair of inputs in
 * which a source's range table entry is swapped for its join table (which
 * has the source's columns, first, in the source's order):
 *
 *		new0 x new1  UNION ALL  new0 x table1  UNION ALL  table0 x new1
 *
 * which is every pair found in this batch exactly once, as the tables hold
 * the rows of earlier batches only.  New rows that meet a join table are
 * looked up in it by the join's keys (read_batch_rows).  In an outer join those copies join
 * the sources with an inner join; the query as written, over the preserved
 * side's rows that go without a match and an empty other side, gives their
 * NULL-extended rows.
 *
 * A join kept in a join store (join.h) reads the store's candidates in
 * place of the tables, and side 0's new rows and candidates as one input:
 *
 *		(new0 + state0) x new1  UNION ALL  new0 x state1
 *
 * the same pairs, with side 1's new rows hashed once (join_pairs_sql).
 * Where the query allows (pairs_readable), it reads those pairs as the
 * store finds them in C instead, one scan of rows of both sides' columns
 * (JOIN_PAIRS), with side 1 a LATERAL subquery of the pair's columns
 * (read_pairs): the planner pulls it up, and the condition between the
 * sources filters the scan rather than a join of the two.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_node.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "pgtime.h"

#include "catalog_access.h"
#include "checkpoint.h"
#include "compile_join.h"
#include "compile_shape.h"
#include "compile_sql.h"
#include "jsonb_util.h"
#include "spi_util.h"

#define USECS_PER_23H	(INT64CONST(23) * USECS_PER_HOUR)
#define USECS_PER_25H	(INT64CONST(25) * USECS_PER_HOUR)

/* A time plus constant intervals: base + [lo, hi]. */
typedef struct TimeTerm
{
	Node	   *base;
	int			side;
	int64		lo;
	int64		hi;
	bool		days;			/* an interval of days among them */
} TimeTerm;

/*
 * How far apart zone tzname's offsets from UTC have been since 1970 (its
 * largest less its smallest), in microseconds.  A range over times
 * without a zone compares wall-clock times, while the rows leave the join
 * by their event times, those wall-clock times read in the source's zone:
 * ten minutes on the clock across the autumn's change are seventy as
 * instants.  A day of timestamptz arithmetic lasts 24 hours, give or take
 * such a change, which the 23 to 25 hours of a day counted below cover for
 * a change of an hour only (Antarctica/Troll's are of two).
 */
static int64
zone_offset_span_us(const char *tzname)
{
	pg_tz	   *tz = pg_tzset(tzname);
	pg_time_t	t = 0;
	long int	lo = 0;
	long int	hi = 0;

	if (tz == NULL)
		return 0;
	for (int i = 0; i < 10000; i++)
	{
		pg_time_t	boundary;
		long int	before;
		long int	after;
		int			before_dst;
		int			after_dst;
		int			found = pg_next_dst_boundary(&t, &before, &before_dst, &boundary, &after,
												 &after_dst, tz);

		if (found < 0)
			break;
		if (i == 0)
			lo = hi = before;
		lo = Min(lo, before);
		hi = Max(hi, before);
		/* up to 2100: the rules then repeat what came before */
		if (found == 0 || boundary > (pg_time_t) INT64CONST(4102444800))
			break;
		lo = Min(lo, after);
		hi = Max(hi, after);
		t = boundary;
	}
	return (int64) (hi - lo) * USECS_PER_SEC;
}

/* --- the condition --------------------------------------------------------- */

/* The JoinExpr of jointree node n that joins the two sources (joins_sources), or NULL. */
static JoinExpr *
find_source_join(Compiled *c, Node *n)
{
	if (n == NULL)
		return NULL;
	if (IsA(n, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) n)->fromlist)
		{
			JoinExpr   *j = find_source_join(c, lfirst(lc));

			if (j != NULL)
				return j;
		}
	}
	else if (IsA(n, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) n;
		JoinExpr   *sub;

		if (joins_sources(c, j))
			return j;
		if ((sub = find_source_join(c, j->larg)) != NULL)
			return sub;
		return find_source_join(c, j->rarg);
	}
	return NULL;
}

/*
 * Make each Var of node (in place) name its column as it is, not by the
 * join alias it was written with (varnosyn): the condition's terms are
 * deparsed apart from the query, where no join is, and a name through a
 * join would lead the deparser astray.
 */
static bool
forget_join_names(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		((Var *) node)->varnosyn = ((Var *) node)->varno;
		((Var *) node)->varattnosyn = ((Var *) node)->varattno;
		return false;
	}
	return expression_tree_walker(node, forget_join_names, context);
}

/* The conjuncts of qual, ANDs flattened (BETWEEN is one too). */
static void
add_conjuncts(Node *qual, List **out)
{
	if (qual == NULL)
		return;
	if (is_andclause(qual))
	{
		ListCell   *lc;

		foreach(lc, ((BoolExpr *) qual)->args)
			add_conjuncts(lfirst(lc), out);
	}
	else
		*out = lappend(*out, qual);
}

/*
 * The conditions every row of an inner join's result meets: WHERE and the
 * ON clauses of inner joins, not those of outer joins (which only decide
 * what is NULL-extended), nor anything on their nullable sides.
 */
static void
filtering_conjuncts(Node *n, List **out)
{
	if (n == NULL)
		return;
	if (IsA(n, FromExpr))
	{
		ListCell   *lc;

		add_conjuncts(((FromExpr *) n)->quals, out);
		foreach(lc, ((FromExpr *) n)->fromlist)
			filtering_conjuncts(lfirst(lc), out);
	}
	else if (IsA(n, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) n;

		if (j->jointype == JOIN_INNER)
		{
			add_conjuncts(j->quals, out);
			filtering_conjuncts(j->larg, out);
			filtering_conjuncts(j->rarg, out);
		}
		else if (j->jointype == JOIN_LEFT)
			filtering_conjuncts(j->larg, out);
		else if (j->jointype == JOIN_RIGHT)
			filtering_conjuncts(j->rarg, out);
	}
}

static Node *
strip_relabel(Node *e)
{
	while (e != NULL && IsA(e, RelabelType))
		e = (Node *) ((RelabelType *) e)->arg;
	return e;
}

static bool
is_time_type(Oid type)
{
	return type == TIMESTAMPTZOID || type == TIMESTAMPOID;
}

/*
 * e as a time of one source plus or minus constant intervals.  Returns
 * false if it is not one.
 */
static bool
time_term(Compiled *c, Node *e, TimeTerm *t)
{
	t->lo = t->hi = 0;
	t->days = false;
	for (;;)
	{
		OpExpr	   *op;
		char	   *name;
		Node	   *ts;
		Node	   *iv;
		Node	   *folded;
		Interval   *in;
		int64		lo;
		int64		hi;

		e = strip_relabel(e);
		if (!IsA(e, OpExpr) || list_length(((OpExpr *) e)->args) != 2 || !is_time_type(exprType(e)))
			break;
		op = (OpExpr *) e;
		name = get_opname(op->opno);
		if (name == NULL || (strcmp(name, "+") != 0 && strcmp(name, "-") != 0))
			break;
		if (exprType(lsecond(op->args)) == INTERVALOID)
		{
			ts = linitial(op->args);
			iv = lsecond(op->args);
		}
		else if (strcmp(name, "+") == 0 && exprType(linitial(op->args)) == INTERVALOID)
		{
			ts = lsecond(op->args);
			iv = linitial(op->args);
		}
		else
			break;
		folded = eval_const_expressions(NULL, iv);
		if (!IsA(folded, Const) || ((Const *) folded)->constisnull)
			return false;
		in = DatumGetIntervalP(((Const *) folded)->constvalue);
		if (in->month != 0)
			refuse("the time range of a join must not use intervals of months or years",
				   "A month has no fixed length, so the range would not bound how long a row can find a match.",
				   "Give the interval in days, hours or smaller units, for example interval '30 days'.");
		if (in->day > 36500 || in->day < -36500)
			refuse("the time range of a join must be shorter than a century", NULL, NULL);
		/* a day across a change of zone offset lasts 23 or 25 hours */
		t->days = t->days || in->day != 0;
		lo = in->time + in->day * (in->day >= 0 ? USECS_PER_23H : USECS_PER_25H);
		hi = in->time + in->day * (in->day >= 0 ? USECS_PER_25H : USECS_PER_23H);
		if (strcmp(name, "-") == 0)
		{
			t->lo -= hi;
			t->hi -= lo;
		}
		else
		{
			t->lo += lo;
			t->hi += hi;
		}
		e = ts;
	}
	t->base = e;
	t->side = expr_source_side(c, e);
	return t->side >= 0 && is_time_type(exprType(e));
}

/* An equality of an expression of one side with one of the other: a join key. */
static bool
try_equality(Compiled *c, CompiledJoin *j, Node *cond)
{
	OpExpr	   *op;
	Node	   *l;
	Node	   *r;
	int			ls;
	int			rs;

	if (!IsA(cond, OpExpr) || list_length(((OpExpr *) cond)->args) != 2)
		return false;
	op = (OpExpr *) cond;
	l = linitial(op->args);
	r = lsecond(op->args);
	if (!op_mergejoinable(op->opno, exprType(l)) && !op_hashjoinable(op->opno, exprType(l)))
		return false;
	ls = expr_source_side(c, l);
	rs = expr_source_side(c, r);
	if (ls < 0 || rs < 0 || ls == rs)
		return false;
	j->keys[ls] = lappend(j->keys[ls], l);
	j->keys[rs] = lappend(j->keys[rs], r);
	j->key_ops = lappend_oid(j->key_ops, op->opno);
	j->key_colls = lappend_oid(j->key_colls, op->inputcollid);
	j->key_left = lappend_int(j->key_left, ls);
	return true;
}

/*
 * Can a join store keep the join (join.h)?  An inner join whose every
 * equality compares a column of each side with an operator that hashes:
 * the store hashes each side's rows by those columns, and finds a new
 * row's candidates, the rows with equal keys, in C.  What else the query
 * says of a pair is still decided by its statements.  Fills the plan's keys.
 */
static void
plan_store_keys(Compiled *c, CompiledJoin *j)
{
	JoinPlan   *jp = &j->plan;
	int			nkeys = list_length(j->key_ops);

	jp->nkeys = 0;
	if (j->preserved >= 0 || nkeys == 0 || nkeys > JOIN_MAX_KEYS ||
		!JOIN_ROWS_AND_STATE_FITS(c->sources[0]->source_id) ||
		!JOIN_ROWS_AND_STATE_FITS(c->sources[1]->source_id))
		return;
	for (int k = 0; k < nkeys; k++)
	{
		JoinKeyPlan *key = &jp->keys[k];
		Oid			lhs_hash;
		Oid			rhs_hash;
		Oid			lefttype;
		Oid			righttype;

		key->op = list_nth_oid(j->key_ops, k);
		key->collation = list_nth_oid(j->key_colls, k);
		key->left = list_nth_int(j->key_left, k);
		op_input_types(key->op, &lefttype, &righttype);
		if (!op_hashjoinable(key->op, lefttype) ||
			!get_op_hash_functions(key->op, &lhs_hash, &rhs_hash))
			return;
		for (int s = 0; s < 2; s++)
		{
			Node	   *e = strip_relabel(list_nth(j->keys[s], k));

			if (!IsA(e, Var) || ((Var *) e)->varlevelsup != 0 ||
				((Var *) e)->varno != c->source_rtindexes[s] || ((Var *) e)->varattno <= 0)
				return;
			key->attno[s] = ((Var *) e)->varattno;
		}
	}
	jp->nkeys = nkeys;
}

/* Record side s's time, which every comparison must use alike. */
static void
note_time(CompiledJoin *j, int s, Node *base)
{
	if (j->time[s] == NULL)
		j->time[s] = (Expr *) copyObject(base);
	else if (!equal(j->time[s], base))
		refuse("the time range of a join must compare one event time of each side",
			   "Each side's event time is the one its range condition uses: it drives the watermark and decides when a row can no longer match.",
			   "Compare the same column of each side, for example c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'.");
}

/* lhs <= rhs (both time terms, of different sides): a bound of t1 - t0. */
static void
add_bound(CompiledJoin *j, TimeTerm *lhs, TimeTerm *rhs)
{
	/* t_rhs - t_lhs >= c_lhs - c_rhs >= lhs->lo - rhs->hi */
	int64		bound = lhs->lo - rhs->hi;

	j->uses_days = j->uses_days || lhs->days || rhs->days;
	if (rhs->side == 1)
	{
		j->lo_us = j->has_lo ? Max(j->lo_us, bound) : bound;
		j->has_lo = true;
	}
	else
	{
		j->hi_us = j->has_hi ? Min(j->hi_us, -bound) : -bound;
		j->has_hi = true;
	}
}

/* A comparison of the two sides' times: a bound of the range. */
static bool
try_range(Compiled *c, CompiledJoin *j, Node *cond)
{
	OpExpr	   *op;
	char	   *name;
	TimeTerm	l;
	TimeTerm	r;

	if (!IsA(cond, OpExpr) || list_length(((OpExpr *) cond)->args) != 2)
		return false;
	op = (OpExpr *) cond;
	if (!is_time_type(exprType(linitial(op->args))))
		return false;
	name = get_opname(op->opno);
	if (name == NULL ||
		(strcmp(name, "<") != 0 && strcmp(name, "<=") != 0 && strcmp(name, ">") != 0 &&
		 strcmp(name, ">=") != 0 && strcmp(name, "=") != 0))
		return false;
	if (!time_term(c, linitial(op->args), &l) || !time_term(c, lsecond(op->args), &r) ||
		l.side == r.side)
		return false;
	note_time(j, l.side, l.base);
	note_time(j, r.side, r.base);
	if (name[0] == '<' || name[0] == '=')
		add_bound(j, &l, &r);
	if (name[0] == '>' || name[0] == '=')
		add_bound(j, &r, &l);
	return true;
}

/* The side's time as an event time: timestamptz. */
static Expr *
side_event_time(CompiledJoin *j, int s)
{
	return as_event_time(j->time[s]);
}

static const char *
side_name(Compiled *c, int s)
{
	return c->sources[s]->name;
}

/* The names a pair's columns of side 1 take in its scan (pair_column_name). */
#define PAIR_COLUMN_PREFIX "__streamwin_pair_"

static char *
pair_column_name(int attno)
{
	return psprintf(PAIR_COLUMN_PREFIX "%d", attno);
}

typedef struct WholeRowContext
{
	Compiled   *c;
	int			sublevels;
} WholeRowContext;

/* Does node refer to a whole row of either source (a Var of column 0)? */
static bool
whole_row_walker(Node *node, WholeRowContext *cx)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		return (int) v->varlevelsup == cx->sublevels && v->varattno == 0 &&
			(v->varno == cx->c->source_rtindexes[0] || v->varno == cx->c->source_rtindexes[1]);
	}
	if (IsA(node, Query))
	{
		bool		found;

		cx->sublevels++;
		found = query_tree_walker((Query *) node, whole_row_walker, cx, 0);
		cx->sublevels--;
		return found;
	}
	return expression_tree_walker(node, whole_row_walker, cx);
}

/*
 * Can jointree node n be written as a FROM list (joins_to_list)?  Only
 * inner joins without an alias: an outer join's ON clause is not a WHERE
 * condition, and an alias names the join's own row.  Fills refs with its
 * range table entries in order.
 */
static bool
joins_listable(Node *n, List **refs)
{
	if (IsA(n, RangeTblRef))
	{
		*refs = lappend_int(*refs, ((RangeTblRef *) n)->rtindex);
		return true;
	}
	if (IsA(n, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) n;

		return j->jointype == JOIN_INNER && j->alias == NULL && j->join_using_alias == NULL &&
			joins_listable(j->larg, refs) && joins_listable(j->rarg, refs);
	}
	if (IsA(n, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) n)->fromlist)
			if (!joins_listable(lfirst(lc), refs))
				return false;
		return true;
	}
	return false;
}

/*
 * Can the batch statements read the join's pairs (JOIN_PAIRS) in q?  Side
 * 0's entry becomes the scan of the pairs and side 1's a LATERAL subquery
 * of the pair's columns (read_pairs), in a FROM list that the query's
 * joins become (joins_to_list): side 1 must come after side 0 there, for
 * a LATERAL subquery reads the entries before it.  A reference to either
 * source's whole row would see another row type, the scan's column names
 * must not meet side 0's own, and both sources' ids must lie below the
 * pairs' bit, so that neither is the pairs' id.
 */
static bool
pairs_readable(Compiled *c, Query *q)
{
	TupleDesc	desc0 = source_tupdesc(c->sources[0]->relation);
	WholeRowContext cx = {c, 0};
	List	   *refs = NIL;
	int			pos[2] = {-1, -1};
	ListCell   *lc;

	if (!JOIN_PAIRS_FITS(c->sources[0]->source_id) || !JOIN_PAIRS_FITS(c->sources[1]->source_id))
		return false;
	if (!joins_listable((Node *) q->jointree, &refs))
		return false;
	foreach(lc, refs)
		for (int s = 0; s < 2; s++)
			if (lfirst_int(lc) == c->source_rtindexes[s])
				pos[s] = foreach_current_index(lc);
	if (pos[0] < 0 || pos[1] < pos[0])
		return false;
	for (int a = 0; a < desc0->natts; a++)
		if (strncmp(NameStr(TupleDescAttr(desc0, a)->attname), PAIR_COLUMN_PREFIX,
					strlen(PAIR_COLUMN_PREFIX)) == 0)
			return false;
	return !query_tree_walker(q, whole_row_walker, &cx, 0);
}

/*
 * compile_join
 *		Check a query over two sources and find its join condition; fills
 *		c->join.  Refuses, saying what to add, a join that streamwin cannot
 *		run with bounded state or exactly.
 */
void
compile_join(Compiled *c, OutputMode mode, bool has_watermark, Jsonb *options)
{
	CompiledJoin *j = palloc0(sizeof(CompiledJoin));
	Query	   *q = c->query;
	JoinExpr   *je = find_source_join(c, (Node *) q->jointree);
	char	   *unbounded_opt = jsonb_get_text(options, "join_state_unbounded");
	bool		unbounded = unbounded_opt != NULL && strcmp(unbounded_opt, "true") == 0;
	List	   *conds = NIL;
	ListCell   *lc;
	bool		has_key = false;
	int64		zone_span = 0;

	c->join = j;
	j->preserved = -1;
	if (je != NULL)
		j->join_rtindex = je->rtindex;
	if (je != NULL && je->jointype != JOIN_INNER)
	{
		int			left = jointree_contains(je->larg, c->source_rtindexes[0]) ? 0 : 1;
		Bitmapset  *used = pull_varnos(NULL, je->quals);
		int			member = -1;

		if (je->jointype == JOIN_FULL)
			refuse("FULL JOIN of two sources is not supported",
				   "A full outer join would emit the rows of both sides that go without a match; streamwin emits those of one side.",
				   "Use LEFT JOIN or RIGHT JOIN, or an inner join.");
		if (je->jointype != JOIN_LEFT && je->jointype != JOIN_RIGHT)
			refuse("this kind of join of two sources is not supported", NULL,
				   "Use JOIN, LEFT JOIN or RIGHT JOIN.");
		j->preserved = je->jointype == JOIN_LEFT ? left : 1 - left;
		while ((member = bms_next_member(used, member)) >= 0)
			if (member != c->source_rtindexes[0] && member != c->source_rtindexes[1])
				refuse("the ON clause of an outer join of two sources may use only their columns",
					   "Whether a row of the preserved source found a match is decided by that ON clause, for the row alone.",
					   "Move the conditions on other tables into their own joins or the WHERE clause.");
		add_conjuncts(je->quals, &conds);
	}
	else
		filtering_conjuncts((Node *) q->jointree, &conds);
	/* (a copy: the Vars the flattening leaves may be the query's own) */
	conds = (List *) copyObject(flatten_join_alias_vars(q, (Node *) conds));
	(void) forget_join_names((Node *) conds, NULL);

	foreach(lc, conds)
	{
		Node	   *cond = lfirst(lc);

		if (try_equality(c, j, cond))
			has_key = true;
		(void) try_range(c, j, cond);
	}

	plan_store_keys(c, j);
	j->plan.pairs = j->plan.nkeys > 0 && pairs_readable(c, q);

	if (mode == OUTPUT_COMPLETE)
		refuse("complete mode is not supported for a join of two sources",
			   "Complete mode drops no row as late, but a join lets go of the rows the watermark puts out of reach: a late row would miss the matches it should find.",
			   "Use output_mode => 'update' or 'append'.");
	if (!has_key)
		refuse("a join of two sources needs an equality between them",
			   j->preserved >= 0 ?
			   "An outer join's ON clause must say which rows match by equal keys; without one every row of a side is a candidate for every row of the other." :
			   "Without equal keys every row of a side is a candidate for every row of the other.",
			   "Add an equality of a column of each source, for example ON c.ad_id = i.ad_id.");
	if (j->preserved >= 0 && !has_watermark)
		refuse("an outer join of two sources needs a watermark",
			   "A row without a match is emitted, NULL-extended, when the watermark shows that no match can come any more.",
			   "Set a watermark, for example watermark => '10 seconds'.");
	if (!unbounded && (!has_watermark || !j->has_lo || !j->has_hi))
	{
		const char *grows;

		grows = !j->has_lo && !j->has_hi ? "both sides" :
			!j->has_hi ? side_name(c, 0) : side_name(c, 1);
		if (j->time[0] == NULL)
			refuse("a join of two sources needs an event-time range between them",
				   "Each side keeps its rows for as long as a row of the other side may still match them; without a range between their event times that is forever, and the join's state grows without end.",
				   "Bound one side's time by the other's, for example AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes', and set a watermark; "
				   "or accept unbounded state with options => '{\"join_state_unbounded\": true}'.");
		if (!has_watermark)
			refuse("a join of two sources needs a watermark",
				   "The watermark tells when a row can no longer find a match and leaves the join's state; without one the state grows without end.",
				   "Set a watermark, for example watermark => '10 seconds'; or accept unbounded state with options => '{\"join_state_unbounded\": true}'.");
		refuse(psprintf("the time range of the join bounds its sides' times from one side only, so the state of %s grows without end", grows),
			   "A row leaves the join's state when the watermark shows that no row of the other side can still match it: that needs both a lower and an upper bound of one side's time relative to the other's.",
			   "Bound the range on both ends, for example BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'; "
			   "or accept unbounded state with options => '{\"join_state_unbounded\": true}'.");
	}
	if (j->preserved >= 0 && !(j->preserved == 0 ? j->has_hi : j->has_lo))
		refuse("the rows of an outer join's preserved side need a time by which their match must come",
			   psprintf("A row of \"%s\" without a match is emitted when the watermark passes the end of its range; the range condition gives it no end.",
						side_name(c, j->preserved)),
			   "Bound the other side's time from above, for example c.click_time <= i.imp_time + interval '10 minutes'.");
	if (jsonb_get_text(options, "event_time") != NULL)
		refuse("option \"event_time\" does not apply to a join of two sources",
			   "Each side's event time is the time its range condition uses.",
			   "Leave the option out.");
	if (strcmp(c->sources[0]->timezone, c->sources[1]->timezone) != 0)
		refuse("the sources of a join must have the same zone",
			   psprintf("Source \"%s\" reads timestamps in zone %s and \"%s\" in zone %s; a batch of both runs in one.",
						side_name(c, 0), c->sources[0]->timezone, side_name(c, 1), c->sources[1]->timezone),
			   "Create the sources with the same option \"timezone\".");
	for (int s = 0; s < 2; s++)
		if (j->time[s] != NULL)
			check_time_replayable(j->time[s], psprintf("of source \"%s\" in the join's range", side_name(c, s)),
								  "give each row the same event time",
								  "give a row another event time");

	if (c->window != NULL)
	{
		int			w = c->window_side;

		if (strcmp(c->window, "session") == 0)
			refuse("session windows over a join of two sources are not supported", NULL,
				   "Use streamwin.tumble() or streamwin.hop() over one side's event time.");
		if (w < 0 || j->time[w] == NULL || !equal(c->event_time, side_event_time(j, w)))
			refuse("a window over a join of two sources must use one side's event time",
				   "A window closes when the watermark, held back by the join's range, passes its end: its time must be the time of a side that the range bounds.",
				   "Group by a window over the time that the range condition uses for one of the sources, for example streamwin.tumble(i.imp_time, '1 minute').");
		if (j->preserved >= 0 && w != j->preserved)
			refuse("a window over an outer join must use the preserved source's event time",
				   psprintf("A row of source \"%s\" without a match joins no row of source \"%s\": its window over that source's time would be NULL, a group no watermark closes.",
							side_name(c, j->preserved), side_name(c, w)),
				   psprintf("Group by a window over the time of source \"%s\" in the range condition.",
							side_name(c, j->preserved)));
	}

	/*
	 * A row leaves once no row of the other side that is not late can meet
	 * it: by the range, widened by the zone's changes of offset where they
	 * make instants differ from what the range computes (wall-clock times,
	 * or days longer or shorter than an hour's change allows); none in UTC.
	 */
	if ((j->time[0] != NULL && exprType((Node *) j->time[0]) == TIMESTAMPOID) ||
		(j->time[1] != NULL && exprType((Node *) j->time[1]) == TIMESTAMPOID) || j->uses_days)
		zone_span = zone_offset_span_us(c->sources[0]->timezone);

	/* what the plan keeps */
	for (int s = 0; s < 2; s++)
	{
		JoinSidePlan *side = &j->plan.sides[s];

		if (j->time[s] != NULL)
			side->event_time_expr = nodeToString(event_time_for_plan(side_event_time(j, s)));
		side->preserved = j->preserved == s;
		side->evicted = has_watermark && (s == 0 ? j->has_hi : j->has_lo);

		/* side 0 at t meets side 1 up to t + hi, side 1 side 0 from t - lo */
		side->evict_after_us = (s == 0 ? j->hi_us : -j->lo_us) + zone_span;
	}
	if (c->window != NULL)
	{
		JoinSidePlan *w = &j->plan.sides[c->window_side];

		if (!w->evicted && mode == OUTPUT_APPEND)
			refuse("a window over this join would never close",
				   "The range does not bound how long a row of the window's side can find a match, so a pair may land in any window at any time.",
				   "Bound the range on both ends and set a watermark, or use output_mode => 'update'.");
		/*
		 * In update mode the watermark closes a window and lets go of its
		 * state: a pair that comes for it later would write its row anew
		 * from nothing
		 */
		if (!w->evicted && mode == OUTPUT_UPDATE && has_watermark)
			refuse("a window over this join would close while pairs for it can still come",
				   "The range does not bound how long a row of the window's side can find a match, and the watermark closes windows, whose state then goes.",
				   "Bound the range on both ends, or leave the watermark out (then no window closes).");
		j->plan.hold_us = w->evicted ? Max(w->evict_after_us, 0) : 0;
	}
	if (c->event_time == NULL)
		c->event_time = j->time[0] ? side_event_time(j, 0) : NULL;
}

/* --- the tables -------------------------------------------------------------- */

/* The name of side s's column in its source's view. */
static char *
source_column_name(Compiled *c, int s, AttrNumber attno)
{
	return get_attname(c->sources[s]->relation, attno, false);
}

/*
 * The index of a side's join table that its lookups use: its keys that are
 * columns, then its time if it is one (the range then narrows the scan);
 * keys that are expressions are indexed as expressions when immutable and
 * built of PostgreSQL's own functions.  Not of the owner's: streamwin
 * refuses a table of the owner's with such an index (see
 * catalog_check_plain_table), since reading its definition may run them.
 */
static char *
join_index_columns(Compiled *c, int s, const char *qtable)
{
	CompiledJoin *j = c->join;
	StringInfoData cols;
	ListCell   *lc;

	initStringInfo(&cols);
	foreach(lc, j->keys[s])
	{
		Node	   *k = strip_relabel(lfirst(lc));

		if (IsA(k, Var))
			appendStringInfo(&cols, "%s%s", cols.len ? ", " : "",
							 quote_identifier(source_column_name(c, s, ((Var *) k)->varattno)));
		else if (!contain_mutable_functions(k) && !expr_calls_user_function(k))
		{
			Node	   *e = copyObject(k);

			ChangeVarNodes(e, c->source_rtindexes[s], 1, 0);
			appendStringInfo(&cols, "%s(%s)", cols.len ? ", " : "",
							 deparse_expr_qualified(e, deparse_context_for(get_rel_name(c->sources[s]->relation),
																		   c->sources[s]->relation)));
		}
	}
	if (cols.len == 0)
		return NULL;
	if (j->time[s] != NULL && IsA(strip_relabel((Node *) j->time[s]), Var))
		appendStringInfo(&cols, ", %s",
						 quote_identifier(source_column_name(c, s, ((Var *) strip_relabel((Node *) j->time[s]))->varattno)));
	return psprintf("CREATE INDEX ON %s (%s)", qtable, cols.data);
}

/*
 * join_tables
 *		Each side's UNLOGGED join table: the source's columns, its event
 *		time, whether it matched and the batch that wrote it (and for the
 *		preserved side its number in that batch and the batch that matched
 *		it), indexed by the join's keys and by event time (eviction); and its
 *		checkpoint copy.
 */
void
join_tables(Compiled *c, int32 query_id)
{
	CompiledJoin *j = c->join;

	for (int s = 0; s < 2; s++)
	{
		char	   *name = psprintf("join_%s_%d", s == 0 ? "left" : "right", query_id);
		char	   *qname = quote_qualified_identifier("streamwin", name);
		TupleDesc	desc = source_tupdesc(c->sources[s]->relation);
		List	   *taken = NIL;
		char	   *preserved_cols = "";
		char	   *index;
		RoleSwitch	role;

		for (int a = 0; a < desc->natts; a++)
			taken = lappend(taken, NameStr(TupleDescAttr(desc, a)->attname));
		j->event_time_col[s] = internal_name(&taken, "__event_time", "");
		j->matched_col[s] = internal_name(&taken, "__matched", "");
		j->batch_col[s] = internal_name(&taken, "__batch_id", "");
		if (j->preserved == s)
		{
			j->row_col[s] = internal_name(&taken, "__row", "");
			j->matched_batch_col[s] = internal_name(&taken, "__matched_batch", "");
			preserved_cols = psprintf(", %s bigint NOT NULL, %s bigint",
									  quote_identifier(j->row_col[s]),
									  quote_identifier(j->matched_batch_col[s]));
		}
		/*
		 * A join store writes its tables by location, without indexes: the
		 * SQL path makes them when it takes over (STMT_JOIN_INDEX_0).
		 */
		j->index_name[s][0] = psprintf("%s_keys", name);
		j->index_name[s][1] = psprintf("%s_time", name);
		j->table[s] = create_query_table(name,
										 psprintf("CREATE UNLOGGED TABLE %s (LIKE %s, %s timestamptz, "
												  "%s boolean NOT NULL DEFAULT false, %s bigint NOT NULL%s)",
												  qname, qualified_relname(c->sources[s]->relation),
												  quote_identifier(j->event_time_col[s]),
												  quote_identifier(j->matched_col[s]),
												  quote_identifier(j->batch_col[s]), preserved_cols),
										 j->plan.nkeys > 0 ? NULL :
										 psprintf("CREATE INDEX ON %%s (%s)",
												  quote_identifier(j->event_time_col[s])));
		index = j->plan.nkeys > 0 ? NULL : join_index_columns(c, s, qname);
		if (index != NULL)
		{
			catalog_enter(&role);
			spi_run(index);
			catalog_leave(&role);
		}

		/*
		 * A checkpoint adds the rows of the batches since the last one, and
		 * is written anew once those out of reach, which stay until then,
		 * are most of it (checkpoint_take).  No index: a checkpoint reads the
		 * UNLOGGED table once, which costs less than an index insertion for
		 * every row of every batch.  A row of the preserved side changes
		 * once, when it matches: the checkpoint adds the rows that matched
		 * since the last one again, as a second version of the row (its
		 * batch and number), which a restore prefers.
		 */
		j->checkpoint[s] = checkpoint_create_table(query_id, j->table[s],
												   psprintf("checkpoint_%s", name), true);
		j->plan.sides[s].time_column = j->event_time_col[s];
		j->plan.sides[s].batch_column = j->batch_col[s];
		j->plan.sides[s].row_column = j->row_col[s];
		j->plan.sides[s].matched_batch_column = j->matched_batch_col[s];
	}
}

/* --- the statements ---------------------------------------------------------- */

/* The JoinExpr of range table index rtindex in jointree node n. */
static JoinExpr *
find_join_expr(Node *n, int rtindex)
{
	if (n == NULL)
		return NULL;
	if (IsA(n, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) n)->fromlist)
		{
			JoinExpr   *j = find_join_expr(lfirst(lc), rtindex);

			if (j != NULL)
				return j;
		}
	}
	else if (IsA(n, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) n;

		if (j->rtindex == rtindex)
			return j;
		if ((j = find_join_expr(j->larg, rtindex)) != NULL)
			return j;
		return find_join_expr(((JoinExpr *) n)->rarg, rtindex);
	}
	return NULL;
}

/* Read side s from its join table instead of its source's view. */
static void
read_join_table(Compiled *c, Query *v, int s)
{
	RangeTblEntry *rte = rt_fetch(c->source_rtindexes[s], v->rtable);

	rte->relid = c->join->table[s];
	rte->relkind = RELKIND_RELATION;
}

/* What a source's entry said as a relation, gone from an entry that no longer is one. */
static void
forget_relation(RangeTblEntry *rte)
{
	rte->relid = InvalidOid;
	rte->relkind = 0;
	rte->inh = false;
	rte->requiredPerms = 0;
	rte->selectedCols = NULL;
}

/*
 * Read side s's rows that the batch gives as source id (its new rows, or a
 * join store's candidates) through streamwin.join_batch_rows() instead of
 * its view: the same rows, but planned as the few a batch usually brings, so
 * that the planner looks each up in the other side's join table by its keys
 * (an index scan per row) rather than hashing the whole table: the view's
 * function is planned at 10,000 rows, which against a join table of less
 * than about a million rows makes a hash join look cheaper, and every
 * batch would then read the whole state.
 */
static RangeTblFunction *
read_rows_of(Compiled *c, Query *v, int s, int32 id)
{
	RangeTblEntry *rte = rt_fetch(c->source_rtindexes[s], v->rtable);
	TupleDesc	desc = source_tupdesc(c->sources[s]->relation);
	RangeTblFunction *rtf = makeNode(RangeTblFunction);
	Oid			argtypes[1] = {INT4OID};
	FuncExpr   *rows;

	rows = makeFuncExpr(streamwin_func_oid("join_batch_rows", 1, argtypes), RECORDOID,
						list_make1(makeConst(INT4OID, -1, InvalidOid, sizeof(int32),
											 Int32GetDatum(id), false, true)),
						InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	rows->funcretset = true;
	rtf->funcexpr = (Node *) rows;
	rtf->funccolcount = desc->natts;
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		rtf->funccolnames = lappend(rtf->funccolnames, makeString(pstrdup(NameStr(att->attname))));
		rtf->funccoltypes = lappend_oid(rtf->funccoltypes, att->atttypid);
		rtf->funccoltypmods = lappend_int(rtf->funccoltypmods, att->atttypmod);
		rtf->funccolcollations = lappend_oid(rtf->funccolcollations, att->attcollation);
	}
	rte->rtekind = RTE_FUNCTION;
	rte->functions = list_make1(rtf);
	rte->funcordinality = false;
	forget_relation(rte);
	return rtf;
}

/* Read side s's new rows (read_rows_of). */
static void
read_batch_rows(Compiled *c, Query *v, int s)
{
	read_rows_of(c, v, s, c->sources[s]->source_id);
}

/*
 * Read side s's state as a join store gives it: the rows of its join table
 * that share a key with the other side's new rows, which a batch gives as
 * join_batch_rows(-source_id) (join.h).
 */
static void
read_state_rows(Compiled *c, Query *v, int s)
{
	read_rows_of(c, v, s, -c->sources[s]->source_id);
}

/*
 * The query's joins, gone from its jointree, as entries of no columns that
 * nothing refers to: the deparser expects every join of the range table in
 * the jointree.
 */
static void
joins_to_results(Query *v)
{
	ListCell   *lc;

	foreach(lc, v->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_JOIN)
		{
			rte->rtekind = RTE_RESULT;
			rte->joinaliasvars = NIL;
			rte->joinleftcols = NIL;
			rte->joinrightcols = NIL;
			rte->eref = makeAlias(rte->eref->aliasname, NIL);
			rte->alias = NULL;
		}
	}
}

/*
 * The query's inner joins as one FROM list, their conditions ANDed into
 * WHERE (joins_listable), and its references to the joins' own columns
 * (USING's merged ones) as references to the columns they stand for.
 */
static void
joins_to_list(Query *v)
{
	List	   *indexes = NIL;
	List	   *refs = NIL;
	List	   *quals = NIL;
	ListCell   *lc;

	/* (pairs_readable found it listable) */
	(void) joins_listable((Node *) v->jointree, &indexes);
	foreach(lc, indexes)
	{
		RangeTblRef *ref = makeNode(RangeTblRef);

		ref->rtindex = lfirst_int(lc);
		refs = lappend(refs, ref);
	}
	filtering_conjuncts((Node *) v->jointree, &quals);
	quals = (List *) flatten_join_alias_vars(v, (Node *) quals);
	v->targetList = (List *) flatten_join_alias_vars(v, (Node *) v->targetList);
	v->havingQual = flatten_join_alias_vars(v, v->havingQual);
	foreach(lc, v->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		/* a function after the sources (a hop's windows) may read them */
		if (rte->rtekind == RTE_FUNCTION)
			rte->functions = (List *) flatten_join_alias_vars(v, (Node *) rte->functions);
	}
	v->jointree = makeFromExpr(refs, quals == NIL ? NULL : (Node *) make_ands_explicit(quals));
	joins_to_results(v);
}

/*
 * Read the batch's pairs (JOIN_PAIRS, pairs_readable): the joins become a
 * FROM list (joins_to_list), side 0's entry scans the pairs, side 1's
 * columns appended to its own as PAIR_COLUMN_PREFIX and their number, and
 * side 1's entry becomes LATERAL (SELECT those columns under side 1's
 * names), which the planner pulls up into the scan: the query's
 * references to side 1 read the pair's columns, and the condition between
 * the sides is a filter of the pairs.
 */
static void
read_pairs(Compiled *c, Query *v)
{
	RangeTblEntry *rte0 = rt_fetch(c->source_rtindexes[0], v->rtable);
	RangeTblEntry *rte1 = rt_fetch(c->source_rtindexes[1], v->rtable);
	TupleDesc	desc0 = source_tupdesc(c->sources[0]->relation);
	TupleDesc	desc1 = source_tupdesc(c->sources[1]->relation);
	RangeTblFunction *rtf;
	Query	   *sub = makeNode(Query);

	joins_to_list(v);
	rtf = read_rows_of(c, v, 0, JOIN_PAIRS(c->sources[0]->source_id));

	sub->commandType = CMD_SELECT;
	sub->querySource = QSRC_ORIGINAL;
	sub->canSetTag = true;
	sub->jointree = makeFromExpr(NIL, NULL);
	rte0->eref->colnames = list_copy(rte0->eref->colnames);
	for (int a = 0; a < desc1->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc1, a);
		char	   *name = pair_column_name(a + 1);
		Var		   *var;

		rtf->funccolnames = lappend(rtf->funccolnames, makeString(name));
		rtf->funccoltypes = lappend_oid(rtf->funccoltypes, att->atttypid);
		rtf->funccoltypmods = lappend_int(rtf->funccoltypmods, att->atttypmod);
		rtf->funccolcollations = lappend_oid(rtf->funccolcollations, att->attcollation);
		rte0->eref->colnames = lappend(rte0->eref->colnames, makeString(pstrdup(name)));
		var = makeVar(c->source_rtindexes[0], desc0->natts + a + 1, att->atttypid,
					  att->atttypmod, att->attcollation, 1);
		sub->targetList = lappend(sub->targetList,
								  makeTargetEntry((Expr *) var, a + 1,
												  pstrdup(NameStr(att->attname)), false));
	}
	rtf->funccolcount = desc0->natts + desc1->natts;

	rte1->rtekind = RTE_SUBQUERY;
	rte1->subquery = sub;
	rte1->lateral = true;
	rte1->security_barrier = false;
	forget_relation(rte1);
	/* SQL names every subquery in FROM */
	if (rte1->alias == NULL)
		rte1->alias = makeAlias(rte1->eref->aliasname, NIL);
}

/*
 * The range, restated for each side's time alone: t0 >= t1 - hi, t0 <= t1 -
 * lo, t1 >= t0 + lo, t1 <= t0 + hi.  Implied by the condition (the bounds
 * are never narrower than it), but in this form the planner can use them
 * in an index scan of either side's join table, whichever is looked up.
 */
static Node *
range_quals(Compiled *c)
{
	CompiledJoin *j = c->join;
	ParseState *pstate = make_parsestate(NULL);
	List	   *quals = NIL;

	for (int s = 0; s < 2; s++)
	{
		/* side s's time against the other's, shifted: t_s op t_other + shift */
		struct
		{
			bool		has;
			const char *op;
			int64		shift;
		}			bounds[2];

		if (s == 0)
		{
			bounds[0].has = j->has_hi, bounds[0].op = ">=", bounds[0].shift = -j->hi_us;
			bounds[1].has = j->has_lo, bounds[1].op = "<=", bounds[1].shift = -j->lo_us;
		}
		else
		{
			bounds[0].has = j->has_lo, bounds[0].op = ">=", bounds[0].shift = j->lo_us;
			bounds[1].has = j->has_hi, bounds[1].op = "<=", bounds[1].shift = j->hi_us;
		}
		for (int b = 0; b < 2; b++)
		{
			Interval   *iv = palloc0(sizeof(Interval));
			Node	   *other;

			if (!bounds[b].has)
				continue;
			iv->time = bounds[b].shift;
			other = (Node *) make_op(pstate, list_make1(makeString("+")),
									 copyObject((Node *) j->time[1 - s]),
									 (Node *) makeConst(INTERVALOID, -1, InvalidOid, sizeof(Interval),
														IntervalPGetDatum(iv), false, false),
									 NULL, -1);
			quals = lappend(quals, make_op(pstate, list_make1(makeString((char *) bounds[b].op)),
										   copyObject((Node *) j->time[s]), other, NULL, -1));
		}
	}
	free_parsestate(pstate);
	return (Node *) make_ands_explicit(quals);
}

/* Add the range restated (range_quals) to a copy of the query. */
static void
add_range_quals(Compiled *c, Query *v)
{
	if (c->join->time[0] == NULL)
		return;
	v->jointree->quals = make_and_qual(v->jointree->quals, range_quals(c));
}

/* An outer join of the sources as an inner one: the pairs that match. */
static void
join_inner(Compiled *c, Query *v)
{
	JoinExpr   *je;

	if (c->join->preserved < 0)
		return;
	je = find_join_expr((Node *) v->jointree, c->join->join_rtindex);
	je->jointype = JOIN_INNER;
	rt_fetch(c->join->join_rtindex, v->rtable)->jointype = JOIN_INNER;
}

/*
 * join_pairs_sql
 *		Query q (the user's query, or its partial aggregation) over the
 *		pairs this batch finds, UNION ALL.  With a join store, two joins:
 *		side 0's new rows and state candidates with side 1's new rows, and
 *		side 0's new rows with side 1's candidates (JOIN_ROWS_AND_STATE).
 *		The range is not restated there: both sides are the batch's rows,
 *		hashed, never an index scan.  Without one, three: new rows with new
 *		rows (the sources' views), and new rows of each side with the other
 *		side's join table.  When compiling the statements of rows without a
 *		match, q as written.
 */
char *
join_pairs_sql(Compiled *c, Query *q)
{
	StringInfoData sql;
	bool		store = c->join->plan.nkeys > 0;

	if (c->join->unmatched_pass)
		return deparse_query_qualified(q);
	if (c->join->plan.pairs)
	{
		Query	   *v = copyObject(q);

		read_pairs(c, v);
		return deparse_query_qualified(v);
	}
	initStringInfo(&sql);
	for (int variant = 0; variant < (store ? 2 : 3); variant++)
	{
		Query	   *v = copyObject(q);

		if (store && variant == 0)
		{
			read_rows_of(c, v, 0, JOIN_ROWS_AND_STATE(c->sources[0]->source_id));
			read_batch_rows(c, v, 1);
		}
		else if (store)
		{
			read_batch_rows(c, v, 0);
			read_state_rows(c, v, 1);
		}
		else if (variant == 1)
		{
			read_batch_rows(c, v, 0);
			read_join_table(c, v, 1);
		}
		else if (variant == 2)
		{
			read_join_table(c, v, 0);
			read_batch_rows(c, v, 1);
		}
		if (!store && variant > 0)
			add_range_quals(c, v);
		join_inner(c, v);
		appendStringInfo(&sql, "%s(%s)", variant ? " UNION ALL " : "", deparse_query_qualified(v));
	}
	return sql.data;
}

/*
 * The locations of the preserved side's rows that match: in its join
 * table, with the other side's new rows (other_table false) or, for its
 * own new rows at locations $1, with the other side's join table.  What
 * matches is decided by the outer join's ON clause alone, so the statement
 * reads the two sides only, FROM p, n WHERE <ON clause>; the query's other
 * joins (every join of the range table, which the deparser expects in the
 * jointree) become entries of no columns that nothing refers to.
 */
static char *
match_query(Compiled *c, bool other_table)
{
	CompiledJoin *j = c->join;
	int			p = j->preserved;
	Query	   *v = copyObject(c->query);
	JoinExpr   *je = find_join_expr((Node *) v->jointree, j->join_rtindex);
	Var		   *ctid;
	Node	   *where = copyObject(je->quals);

	read_join_table(c, v, p);
	if (other_table)
		read_join_table(c, v, 1 - p);
	else
		read_batch_rows(c, v, 1 - p);
	ctid = makeVar(c->source_rtindexes[p], SelfItemPointerAttributeNumber, TIDOID, -1, InvalidOid, 0);
	if (other_table)
	{
		ScalarArrayOpExpr *any = makeNode(ScalarArrayOpExpr);
		Param	   *locations = makeNode(Param);

		locations->paramkind = PARAM_EXTERN;
		locations->paramid = 1;
		locations->paramtype = TIDARRAYOID;
		locations->paramtypmod = -1;
		locations->location = -1;
		any->opno = TIDEqualOperator;
		any->opfuncid = F_TIDEQ;
		any->useOr = true;
		any->inputcollid = InvalidOid;
		any->args = list_make2(copyObject(ctid), locations);
		any->location = -1;
		where = make_and_qual(where, (Node *) any);
	}
	v->jointree = makeFromExpr(list_make2(makeNode(RangeTblRef), makeNode(RangeTblRef)), where);
	((RangeTblRef *) linitial(v->jointree->fromlist))->rtindex = c->source_rtindexes[p];
	((RangeTblRef *) lsecond(v->jointree->fromlist))->rtindex = c->source_rtindexes[1 - p];
	add_range_quals(c, v);
	joins_to_results(v);
	v->targetList = list_make1(makeTargetEntry((Expr *) ctid, 1, "ctid", false));
	v->groupClause = NIL;
	v->hasAggs = false;
	v->havingQual = NULL;
	v->distinctClause = NIL;
	v->sortClause = NIL;
	return deparse_query_qualified(v);
}

/* Operator op, qualified, for an expression: OPERATOR(schema.name). */
static char *
qualified_operator(Oid op)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(op));
	Form_pg_operator form;
	char	   *name;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", op);
	form = (Form_pg_operator) GETSTRUCT(tup);
	name = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(form->oprnamespace)),
					NameStr(form->oprname));
	ReleaseSysCache(tup);
	return name;
}

/*
 * The statements of a join store's SQL path (join.h): side s's rows that
 * share a key with the other side's new rows, found by the key index of
 * its join table, and the indexes that path needs, which the store drops.
 */
static void
join_store_statements(Compiled *c, StringInfo plan)
{
	CompiledJoin *j = c->join;
	StringInfoData drop;

	initStringInfo(&drop);
	for (int s = 0; s < 2; s++)
	{
		int			o = 1 - s;
		TupleDesc	desc = source_tupdesc(c->sources[s]->relation);
		TupleDesc	odesc = source_tupdesc(c->sources[o]->relation);
		StringInfoData cols;
		StringInfoData ocols;
		StringInfoData cond;
		StringInfoData keycols;
		char	   *table = qualified_relname(j->table[s]);
		const char *time = quote_identifier(j->event_time_col[s]);

		initStringInfo(&cols);
		initStringInfo(&ocols);
		initStringInfo(&cond);
		initStringInfo(&keycols);
		for (int a = 0; a < desc->natts; a++)
			appendStringInfo(&cols, "%st.%s", a ? ", " : "",
							 quote_identifier(NameStr(TupleDescAttr(desc, a)->attname)));
		for (int a = 0; a < odesc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(odesc, a);

			/* with its collation: the keys compare as the join's do */
			appendStringInfo(&ocols, "%s%s %s", a ? ", " : "", quote_identifier(NameStr(att->attname)),
							 column_type_sql(att->atttypid, att->atttypmod, att->attcollation));
		}
		for (int k = 0; k < j->plan.nkeys; k++)
		{
			JoinKeyPlan *key = &j->plan.keys[k];
			char	   *mine = psprintf("t.%s", quote_identifier(source_column_name(c, s, key->attno[s])));
			char	   *theirs = psprintf("n.%s", quote_identifier(source_column_name(c, o, key->attno[o])));

			appendStringInfo(&cond, "%s%s %s %s", k ? " AND " : "",
							 key->left == s ? mine : theirs, qualified_operator(key->op),
							 key->left == s ? theirs : mine);
			appendStringInfo(&keycols, "%s, ", quote_identifier(source_column_name(c, s, key->attno[s])));
		}
		plan_add_statement(plan, STMT_JOIN_STATE_ROWS_0 + s,
						   psprintf("SELECT %s FROM %s AS t WHERE EXISTS (SELECT FROM streamwin.join_batch_rows(%d) AS n(%s) WHERE %s)",
									cols.data, table, c->sources[o]->source_id, ocols.data, cond.data));
		plan_add_statement(plan, STMT_JOIN_INDEX_0 + s,
						   psprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s%s); CREATE INDEX IF NOT EXISTS %s ON %s (%s)",
									quote_identifier(j->index_name[s][0]), table, keycols.data, time,
									quote_identifier(j->index_name[s][1]), table, time));
		appendStringInfo(&drop, "%s%s, %s", s ? ", " : "",
						 quote_qualified_identifier("streamwin", j->index_name[s][0]),
						 quote_qualified_identifier("streamwin", j->index_name[s][1]));
	}
	plan_add_statement(plan, STMT_JOIN_UNINDEX, psprintf("DROP INDEX IF EXISTS %s", drop.data));
}

/*
 * join_statements
 *		The statements of the join's state (see join.h) and its plan.
 */
void
join_statements(Compiled *c, StringInfo plan)
{
	CompiledJoin *j = c->join;

	for (int s = 0; s < 2; s++)
	{
		char	   *table = qualified_relname(j->table[s]);
		char	   *et = "NULL";
		TupleDesc	desc = source_tupdesc(c->sources[s]->relation);
		StringInfoData cols;

		if (j->time[s] != NULL)
		{
			Node	   *e = copyObject((Node *) side_event_time(j, s));

			ChangeVarNodes(e, c->source_rtindexes[s], 1, 0);
			et = deparse_expr_qualified(e, deparse_context_for("v", c->sources[s]->relation));
		}
		plan_add_statement(plan, STMT_JOIN_INSERT_0 + s,
						   psprintf("INSERT INTO %s SELECT v.*, %s, false, $1%s FROM %s AS v%s",
									table, et, j->preserved == s ? ", pg_catalog.row_number() OVER ()" : "",
									qualified_relname(c->sources[s]->relation),
									j->preserved == s ? " RETURNING ctid" : ""));

		/*
		 * The same rows as a SELECT, named as the join table's columns, for
		 * result_insert_receiver() to write many to a page (join.c).
		 */
		if (j->preserved != s)
			plan_add_statement(plan, STMT_JOIN_INSERT_ROWS_0 + s,
							   psprintf("SELECT v.*, %s AS %s, false AS %s, $1 AS %s FROM %s AS v",
										j->time[s] != NULL ? et : "NULL::pg_catalog.timestamptz",
										quote_identifier(j->event_time_col[s]),
										quote_identifier(j->matched_col[s]),
										quote_identifier(j->batch_col[s]),
										qualified_relname(c->sources[s]->relation)));
		initStringInfo(&cols);
		for (int a = 0; a < desc->natts; a++)
			appendStringInfo(&cols, ", %s", quote_identifier(NameStr(TupleDescAttr(desc, a)->attname)));
		if (j->plan.sides[s].evicted)
			plan_add_statement(plan, STMT_JOIN_EVICT_0 + s,
							   psprintf("DELETE FROM %s WHERE %s < $1%s", table,
										quote_identifier(j->event_time_col[s]),
										j->preserved == s ?
										psprintf(" RETURNING %s%s", quote_identifier(j->matched_col[s]), cols.data) : ""));
	}
	if (j->preserved >= 0)
	{
		const char *matched = quote_identifier(j->matched_col[j->preserved]);

		plan_add_statement(plan, STMT_JOIN_MATCH,
						   psprintf("UPDATE %s AS u SET %s = true, %s = $2 WHERE NOT u.%s AND u.ctid = ANY (ARRAY((%s) UNION ALL (%s)))",
									qualified_relname(j->table[j->preserved]), matched,
									quote_identifier(j->matched_batch_col[j->preserved]), matched,
									match_query(c, false), match_query(c, true)));
	}
	if (j->plan.nkeys > 0)
		join_store_statements(c, plan);
	join_plan_json(&j->plan, plan);
}
