/*-------------------------------------------------------------------------
 *
 * compile_dedup.h
 *	  The event time of a query without a window, and deduplication: its
 *	  table of keys and its statements (compile_dedup.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_DEDUP_H
#define STREAMWIN_COMPILE_DEDUP_H

#include "lib/stringinfo.h"
#include "utils/array.h"

#include "compile.h"

extern Expr *source_column_expr(Compiled *c, const char *name);
extern List *dedup_key_names(Compiled *c, ArrayType *arr);
extern void dedup_statements(Compiled *c, List *keys, int32 query_id, StringInfo plan,
							 Oid *table_out, Oid *checkpoint_out);

#endif							/* STREAMWIN_COMPILE_DEDUP_H */
