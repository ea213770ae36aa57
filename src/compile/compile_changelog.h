/*-------------------------------------------------------------------------
 *
 * compile_changelog.h
 *	  Queries over a changelog source (compile_changelog.c): what is
 *	  refused, the change column as an expression, and a transform kept by
 *	  the source's key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_CHANGELOG_H
#define STREAMWIN_COMPILE_CHANGELOG_H

#include "compile.h"

/*
 * check_changelog
 *		After check_from: whether the query reads a changelog (sets
 *		c->change_attno, and c->append_changes where its select list names
 *		the change column), and the refusals that depend on the query alone.
 */
extern void check_changelog(Compiled *c, SelectStmt *raw);

/*
 * check_changelog_settings
 *		Once the query is compiled: the refusals that depend on its window
 *		and create_query's settings, and a transform's key (c->key_columns).
 */
extern void check_changelog_settings(Compiled *c, OutputMode mode);

/* dedup_keys over a changelog source (dedup: the query has them) refused */
extern void check_changelog_dedup(Compiled *c, bool dedup);

/* The source's change column, as a Var of the query. */
extern Var *change_var(Compiled *c);

/* A keyed transform's key columns in the result, "prefix.k1, prefix.k2". */
extern char *keyed_transform_key_list(Compiled *c, const char *prefix);

/*
 * The batch statement of a transform over a changelog, writing the result
 * table result (columns cols, names colnames: a List of String) by key.
 */
extern char *keyed_transform_sql(Compiled *c, Oid result, const char *cols, List *colnames);

#endif							/* STREAMWIN_COMPILE_CHANGELOG_H */
