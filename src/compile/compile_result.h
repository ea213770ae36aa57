/*-------------------------------------------------------------------------
 *
 * compile_result.h
 *	  The SQL that writes an aggregation's result table from its state
 *	  rows, and what each output mode does when windows close: shared by
 *	  the window and session compilers above it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_RESULT_H
#define STREAMWIN_COMPILE_RESULT_H

#include "lib/stringinfo.h"

#include "compile.h"

extern char *result_list(Compiled *c, bool final);
extern char *result_upsert(Compiled *c);
extern char *results_from_state_sql(Compiled *c, const char *rname);
extern void emit_statements(Compiled *c, const char *rname, const char *sname, OutputMode mode,
							StringInfo plan);

#endif							/* STREAMWIN_COMPILE_RESULT_H */
