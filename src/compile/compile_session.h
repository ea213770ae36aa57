/*-------------------------------------------------------------------------
 *
 * compile_session.h
 *	  The statements of an aggregation over session windows
 *	  (compile_session.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_SESSION_H
#define STREAMWIN_COMPILE_SESSION_H

#include "lib/stringinfo.h"

#include "compile.h"

extern void session_statements(Compiled *c, Oid result, Oid state, OutputMode mode,
							   StringInfo plan);
extern char *session_store_groups_sql(Compiled *c);

#endif							/* STREAMWIN_COMPILE_SESSION_H */
