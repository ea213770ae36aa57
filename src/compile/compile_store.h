/*-------------------------------------------------------------------------
 *
 * compile_store.h
 *	  The statements and plan of an aggregation kept in a state store
 *	  (compile_store.c), beside the window's or session's SQL statements,
 *	  which run when the state does not fit in memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_STORE_H
#define STREAMWIN_COMPILE_STORE_H

#include "lib/stringinfo.h"

#include "compile.h"

extern void compile_store_statements(Compiled *c, Oid result, Oid state, int32 query_id,
									 OutputMode mode, StringInfo plan);
extern void compile_store_plan(Compiled *c, StringInfo plan);

#endif							/* STREAMWIN_COMPILE_STORE_H */
