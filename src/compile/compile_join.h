/*-------------------------------------------------------------------------
 *
 * compile_join.h
 *	  A stream-stream join (compile_join.c): its condition, each side's
 *	  join table, the pairs a batch finds and the statements of its state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_JOIN_H
#define STREAMWIN_COMPILE_JOIN_H

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#include "compile.h"

extern void compile_join(Compiled *c, OutputMode mode, bool has_watermark, Jsonb *options);
extern void join_tables(Compiled *c, int32 query_id);
extern char *join_pairs_sql(Compiled *c, Query *q);
extern void join_statements(Compiled *c, StringInfo plan);

#endif							/* STREAMWIN_COMPILE_JOIN_H */
