/*-------------------------------------------------------------------------
 *
 * compile_tables.h
 *	  A continuous query's result table, its state table, and a
 *	  transform's result table with its statements (compile_tables.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_TABLES_H
#define STREAMWIN_COMPILE_TABLES_H

#include "lib/stringinfo.h"

#include "compile.h"

extern Oid	create_result_table(Compiled *c, const char *name, OutputMode mode);
extern Oid	create_state_table(Compiled *c, int32 query_id);
extern Oid	create_transform_table(Compiled *c, const char *name, StringInfo plan);

#endif							/* STREAMWIN_COMPILE_TABLES_H */
