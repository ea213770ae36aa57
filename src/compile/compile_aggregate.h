/*-------------------------------------------------------------------------
 *
 * compile_aggregate.h
 *	  Each aggregate as partial aggregates and a final value
 *	  (compile_aggregate.c), and the SQL that merges, combines or computes
 *	  partials, for the window and session compilers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_AGGREGATE_H
#define STREAMWIN_COMPILE_AGGREGATE_H

#include "compile.h"

extern void compile_aggregate(Compiled *c, TargetEntry *tle);
extern void compile_changelog_rows(Compiled *c);
extern const char *merge_sql(PartialCol *p);
extern const char *merge_agg_sql(PartialCol *p);
extern const char *row_partial_sql(PartialCol *p, const char *arg, const char *filter);
extern void partial_input_columns(PartialCol *p, int i, List **tlist, AttrNumber *resno,
								  List **taken, const char **arg, const char **filter);

#endif							/* STREAMWIN_COMPILE_AGGREGATE_H */
