/*-------------------------------------------------------------------------
 *
 * sql_function.h
 *	  Declaring the C functions that SQL calls.
 *
 * streamwin.so is built with -fvisibility=hidden (Makefile): the server
 * loads extensions with RTLD_GLOBAL, so that any symbol a library exports
 * can bind another library's call of the same name.  Only what the server
 * looks up by name is exported: _PG_init, the magic block, the output
 * plugin's entry, the background workers' entry points, and the functions
 * of the install script, declared with STREAMWIN_SQL_FUNCTION.  (PostgreSQL
 * 16's PG_FUNCTION_INFO_V1 declares the function PGDLLEXPORT itself; 15's
 * declares only its info record so.)  A check in `make test`
 * (test/check_symbols.sh) lists what streamwin.so exports.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_SQL_FUNCTION_H
#define STREAMWIN_SQL_FUNCTION_H

#include "fmgr.h"

/* A version-1 C function called from SQL by its name, exported. */
#define STREAMWIN_SQL_FUNCTION(name) \
	extern PGDLLEXPORT Datum name(PG_FUNCTION_ARGS); \
	PG_FUNCTION_INFO_V1(name)

#endif							/* STREAMWIN_SQL_FUNCTION_H */
