/*-------------------------------------------------------------------------
 *
 * compile_window.h
 *	  The statements of an aggregation over tumbling or hopping windows,
 *	  or without a window (compile_window.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_WINDOW_H
#define STREAMWIN_COMPILE_WINDOW_H

#include "lib/stringinfo.h"

#include "compile.h"

extern void aggregate_statements(Compiled *c, Oid result, Oid state, OutputMode mode,
								 StringInfo plan);
extern bool window_uses_panes(Compiled *c);
extern bool partial_folds_by_row(PartialCol *p, bool pairs);
extern char *window_store_groups_sql(Compiled *c);
extern char *window_store_rows_sql(Compiled *c);

#endif							/* STREAMWIN_COMPILE_WINDOW_H */
