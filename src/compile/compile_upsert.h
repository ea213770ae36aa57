/*-------------------------------------------------------------------------
 *
 * compile_upsert.h
 *	  A query of an upsert source: its table of each key's last row and the
 *	  statements over it (compile_upsert.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_UPSERT_H
#define STREAMWIN_COMPILE_UPSERT_H

#include "lib/stringinfo.h"

#include "compile.h"

/*
 * upsert_objects
 *		For a query that reads an upsert source: create the UNLOGGED table of
 *		each key's last row and its checkpoint, and add them, the store's plan
 *		and the statements of its table mode to the plan being written.
 *		Nothing for other queries; a join over an upsert source is refused.
 *		Inside SPI, at create_query.
 */
extern void upsert_objects(Compiled *c, int32 query_id, StringInfo plan);

#endif							/* STREAMWIN_COMPILE_UPSERT_H */
