/*-------------------------------------------------------------------------
 *
 * compile.h
 *	  The query compiler's own declarations, shared by its files only.
 *
 * create_query (query.c) compiles a continuous query in three steps, each
 * in a file of its own:
 *
 *	compile_shape.c		the raw parse tree (hop() rewritten), now() as the
 *						batch's timestamp, and the checks of the analysed
 *						query: the shapes that can run incrementally, the
 *						source in FROM, the window, the group keys
 *	compile_aggregate.c	each aggregate as partial aggregates merged batch
 *						by batch, and its final value
 *	compile_window.c	the statements of a tumbling or hopping window, or
 *						of a running aggregate without one
 *	compile_session.c	the statements of a session window
 *	compile_dedup.c		event time of a transform, deduplication
 *	compile_join.c		a stream-stream join: its condition, its tables and
 *						the statements of its state
 *	compile_tables.c	the query's result, state and transform tables
 *
 * The window and session compilers write results with compile_result.c:
 * the result's column lists, its upsert, the statements of each output
 * mode.  Below them all, compile_sql.c (compile_sql.h): refuse(), the names of
 * streamwin's own columns, column and type lists, and the query's tables
 * in schema streamwin; it calls none of the files above.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_H
#define STREAMWIN_COMPILE_H

#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"
#include "utils/array.h"

#include "join.h"
#include "state_store.h"
#include "streamwin.h"

/*
 * The alias of the LATERAL hop_starts() call that rewrite_hop puts in FROM
 * for hop(): its window_start column is the window.
 */
#define HOP_ALIAS "__streamwin_hop"

typedef struct PartialCol
{
	char	   *name;			/* state column name */
	MergeKind	merge;
	Expr	   *expr;			/* the partial Aggref */
	Oid			aggfnoid;		/* MERGE_STATE: the user's aggregate */
} PartialCol;

/*
 * A result column besides the window and the keys: an aggregate, or an
 * expression over the group keys (key_expr), computed when the row is
 * written.
 */
typedef struct AggCol
{
	char	   *name;			/* result column */
	Oid			type;
	int32		typmod;
	Oid			collation;		/* an expression over keys: its collation */
	Expr	   *key_expr;		/* an expression over keys, else NULL */
	char	   *final_sql;		/* final value from the state columns */
} AggCol;

typedef struct KeyCol
{
	char	   *name;
	TargetEntry *tle;
} KeyCol;

/*
 * A stream-stream join of the query's two sources (compile_join.c): the
 * condition as create_query found it, and the tables and plan made for it.
 */
typedef struct CompiledJoin
{
	int			preserved;		/* the outer join's preserved side, or -1 */
	int			join_rtindex;	/* the JoinExpr joining the sources (its
								 * rtindex), or 0: FROM a, b */
	Expr	   *time[QUERY_MAX_SOURCES];	/* each side's event time */
	bool		has_lo;
	bool		has_hi;
	int64		lo_us;			/* time[1] - time[0] lies in [lo_us, hi_us] */
	int64		hi_us;
	List	   *keys[QUERY_MAX_SOURCES];	/* the equalities' operands */
	Oid			table[QUERY_MAX_SOURCES];	/* each side's join table */
	Oid			checkpoint[QUERY_MAX_SOURCES];
	char	   *event_time_col[QUERY_MAX_SOURCES];	/* their own columns */
	char	   *batch_col[QUERY_MAX_SOURCES];
	char	   *matched_col[QUERY_MAX_SOURCES];
	char	   *row_col[QUERY_MAX_SOURCES]; /* the preserved side's */
	char	   *matched_batch_col[QUERY_MAX_SOURCES];
	bool		unmatched_pass; /* compiling the statements of rows that go
								 * without a match: the query as written */
	JoinPlan	plan;
} CompiledJoin;

typedef struct Compiled
{
	bool		aggregate;
	const char *window;			/* "tumble", "hop", "session" or NULL */
	int64		size_us;
	int64		slide_us;		/* hop only */
	Expr	   *event_time;
	List	   *keys;			/* KeyCol */
	List	   *aggs;			/* AggCol */
	List	   *partials;		/* PartialCol */
	TargetEntry *window_tle;
	Query	   *query;			/* analysed user query (rewritten for hop) */
	int			source_rtindex; /* = source_rtindexes[0] */
	SourceInfo *source;			/* = sources[0] */
	int			nsources;		/* 2 for a join */
	SourceInfo *sources[QUERY_MAX_SOURCES];
	int			source_rtindexes[QUERY_MAX_SOURCES];
	int			window_side;	/* the source of the window's event time */
	int			dedup_side;		/* the source whose rows dedup_keys name */
	CompiledJoin *join;			/* a stream-stream join, or NULL */
	List	   *state_names;	/* column names of the state table and of the
								 * batch statements' own rows (internal_name) */
} Compiled;

/* compile_shape.c */
extern void check_window_arguments(SelectStmt *stmt, const char *query_text);
extern bool rewrite_hop(SelectStmt *stmt);
extern Query *rewrite_batch_time(Query *q);
extern Expr *event_time_for_plan(Expr *event_time);
extern void check_query_shape(Query *q);
extern void check_from(Compiled *c);
extern int	expr_source_side(Compiled *c, Node *e);
extern bool jointree_contains(Node *n, int rtindex);
extern bool joins_sources(Compiled *c, JoinExpr *j);
extern void check_time_replayable(Expr *ts, const char *what, const char *must,
								  const char *could);
extern void compile_grouping(Compiled *c);
extern void key_expressions_final(Compiled *c, Oid state);
extern void check_column_name(List **seen, const char *name, bool windowed);

/* compile_aggregate.c */
extern void compile_aggregate(Compiled *c, TargetEntry *tle);
extern char *aggregate_literal(Oid aggfnoid);
extern const char *merge_sql(PartialCol *p);
extern const char *merge_agg_sql(PartialCol *p);
extern const char *row_partial_sql(PartialCol *p, const char *arg, const char *filter);
extern void partial_input_columns(PartialCol *p, int i, List **tlist, AttrNumber *resno,
								  List **taken, const char **arg, const char **filter);

/* compile_dedup.c */
extern Expr *source_column_expr(Compiled *c, const char *name);
extern List *dedup_key_names(Compiled *c, ArrayType *arr);
extern void dedup_statements(Compiled *c, List *keys, int32 query_id, StringInfo plan,
							 Oid *table_out, Oid *checkpoint_out);

/* compile_join.c */
extern void compile_join(Compiled *c, OutputMode mode, bool has_watermark, Jsonb *options);
extern void join_tables(Compiled *c, int32 query_id);
extern char *join_pairs_sql(Compiled *c, Query *q);
extern void join_statements(Compiled *c, StringInfo plan);

/* compile_tables.c */
extern Oid	create_result_table(Compiled *c, const char *name);
extern Oid	create_state_table(Compiled *c, int32 query_id);
extern Oid	create_transform_table(Compiled *c, const char *name, StringInfo plan);

#endif							/* STREAMWIN_COMPILE_H */
