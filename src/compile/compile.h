/*-------------------------------------------------------------------------
 *
 * compile.h
 *	  What the query compiler knows of a continuous query (Compiled and its
 *	  parts), shared by the compiler's files only.
 *
 * create_query (query.c) compiles a continuous query with the files below,
 * one concern each, each declaring what it gives in a header of its own.
 * They stand in layers: a file calls only files listed after it, never one
 * before, as PostgreSQL's parser and planner call down into nodes/ and
 * utils/ and never back up.
 *
 *	query.c				create_query: parse, analyse and check the query,
 *						then create its tables, compile its statements and
 *						write its catalog row
 *	compile_tables.c	the result and state tables; a transform's result
 *						table and statement
 *	compile_store.c		the statements of an aggregation kept in a state
 *						store, whatever its window
 *	compile_window.c	the statements of a tumbling or hopping window, or
 *						of a running aggregate without one
 *	compile_session.c	the statements of a session window
 *	compile_join.c		a stream-stream join: its condition, its tables and
 *						the statements of its state
 *	compile_dedup.c		event time of a transform, deduplication
 *	compile_upsert.c	the table of an upsert source's last row per key
 *	compile_shape.c		the raw parse tree (hop() rewritten), now() as the
 *						batch's timestamp, and the checks of the analysed
 *						query: the shapes that can run incrementally, the
 *						source in FROM, the window, the group keys
 *	compile_aggregate.c	each aggregate as partial aggregates merged batch
 *						by batch, and its final value
 *	compile_changelog.c	queries over a changelog source: refusals, the change
 *						column, a transform kept by key
 *	compile_result.c	the result rows written from state rows, by output
 *						mode
 *	compile_sql.c		refuse(), the names of streamwin's own columns,
 *						column and type lists, the query's own tables in
 *						schema streamwin
 *
 * This header holds the types alone, and includes no other of the
 * compiler's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_H
#define STREAMWIN_COMPILE_H

#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"

#include "join.h"
#include "state_store.h"
#include "catalog_types.h"

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
	Oid			collation;		/* MERGE_STATE: its input collation, which
								 * its combine and final functions get, as
								 * its transition function does */
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
	Oid			collation;		/* the result column's */
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
	bool		uses_days;		/* the range adds or takes intervals of days */
	List	   *keys[QUERY_MAX_SOURCES];	/* the equalities' operands */
	List	   *key_ops;		/* the equalities' operators, */
	List	   *key_colls;		/* their collations, */
	List	   *key_left;		/* and the side of their left operands */
	Oid			table[QUERY_MAX_SOURCES];	/* each side's join table */
	Oid			checkpoint[QUERY_MAX_SOURCES];
	char	   *event_time_col[QUERY_MAX_SOURCES];	/* their own columns */
	char	   *batch_col[QUERY_MAX_SOURCES];
	char	   *matched_col[QUERY_MAX_SOURCES];
	char	   *row_col[QUERY_MAX_SOURCES]; /* the preserved side's */
	char	   *matched_batch_col[QUERY_MAX_SOURCES];
	char	   *index_name[QUERY_MAX_SOURCES][2];	/* a store's join tables'
													 * indexes for the SQL
													 * path: keys, time */
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
	bool		hop_start_in_rows;	/* hop: the window start is read by more
									 * than the GROUP BY and the SELECT list's
									 * window column (no panes, then) */
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
	/* a changelog source (compile_changelog.c) */
	AttrNumber	change_attno;	/* its change column, or 0: an append stream */
	bool		append_changes; /* a transform appending every change */
	List	   *key_columns;	/* a keyed transform's: the source's key */
	PartialCol *rows_partial;	/* an aggregation's: its groups' row count */
} Compiled;

#endif							/* STREAMWIN_COMPILE_H */
