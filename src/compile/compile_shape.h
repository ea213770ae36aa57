/*-------------------------------------------------------------------------
 *
 * compile_shape.h
 *	  The shape of a continuous query (compile_shape.c): the raw tree's
 *	  window calls, the batch's time, the checks of the analysed query,
 *	  its group keys and aggregates, and the query-tree tests the join
 *	  compiler builds on.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_SHAPE_H
#define STREAMWIN_COMPILE_SHAPE_H

#include "nodes/parsenodes.h"

#include "compile.h"

/* the raw tree, before analysis */
extern void check_window_arguments(SelectStmt *stmt, const char *query_text);
extern bool rewrite_hop(SelectStmt *stmt);

/* the analysed query */
extern Query *rewrite_batch_time(Query *q);
extern Expr *event_time_for_plan(Expr *event_time);
extern void check_query_shape(Query *q);
extern void check_replayable(Query *q);
extern void check_from(Compiled *c);
extern int	expr_source_side(Compiled *c, Node *e);
extern bool jointree_contains(Node *n, int rtindex);
extern bool joins_sources(Compiled *c, JoinExpr *j);
extern void check_time_replayable(Expr *ts, const char *what, const char *must,
								  const char *could);
extern void compile_grouping(Compiled *c);
extern void key_expressions_final(Compiled *c, Oid state);
extern void check_column_name(List **seen, const char *name, bool windowed);

#endif							/* STREAMWIN_COMPILE_SHAPE_H */
