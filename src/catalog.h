/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  streamwin's catalog: reading sources and queries, and running its own
 *	  bookkeeping statements as the extension's owner (catalog.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CATALOG_H
#define STREAMWIN_CATALOG_H

#include "spi_util.h"
#include "streamwin.h"

/*
 * catalog_enter / catalog_leave
 *		Run the statements between them as the extension owner (a
 *		RoleSwitch: an error in between needs no catalog_leave).
 */
extern void catalog_enter(RoleSwitch *save);
extern void catalog_leave(RoleSwitch *save);

/*
 * catalog_exec
 *		One of streamwin's own statements on its catalog, as the extension
 *		owner, with a plan kept per backend; `sql` must be constant text.
 *		Errors if the statement fails; returns the SPI result code.  Inside
 *		SPI.
 */
extern int	catalog_exec(const char *sql, int nargs, Oid *types, Datum *args,
						 const char *nulls, long count);

/*
 * Names of queries and sources follow PostgreSQL's rule for a (possibly
 * schema-qualified) table name: unquoted parts fold to lower case, quoted
 * ones keep their case.  catalog_canonical_name gives the form recorded in
 * the catalog and shown in the views (quoted where needed), or NULL for no
 * valid name; catalog_new_name the same for a new object, or an error.
 */
extern char *catalog_canonical_name(const char *name);
extern char *catalog_new_name(const char *name, const char *kind);

/*
 * Lookups, into the caller's memory context.  Those by name find the name
 * as given, else its canonical form, and raise an error naming the view to
 * look in unless missing_ok; by id and relation they
 * return NULL (by relation) or raise (by id) when nothing matches.
 */
extern SourceInfo *catalog_get_source(const char *name, bool missing_ok);
extern SourceInfo *catalog_get_source_by_id(int32 source_id);
extern SourceInfo *catalog_get_source_by_relation(Oid relid);
extern QueryInfo *catalog_get_query(const char *name, bool missing_ok);
extern QueryInfo *catalog_get_query_by_id(int32 query_id, bool missing_ok);

/* Only the owner of a source or query (or a member of its role) may change it. */
extern void catalog_check_owner(Oid owner, const char *kind, const char *name);

/* The lock of one batch at a time per query, held to the end of the transaction. */
extern void catalog_lock_query(int32 query_id);

/* A table made for a query depends on the extension (DROP EXTENSION names it). */
extern void catalog_table_depends_on_extension(Oid relid);

#endif							/* STREAMWIN_CATALOG_H */
