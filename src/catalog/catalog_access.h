/*-------------------------------------------------------------------------
 *
 * catalog_access.h
 *	  Running statements on streamwin's own catalog (catalog_access.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CATALOG_ACCESS_H
#define STREAMWIN_CATALOG_ACCESS_H

#include "nodes/nodeFuncs.h"
#include "storage/lockdefs.h"

#include "spi_util.h"

/*
 * catalog_check_version
 *		Raise an error, with the ALTER EXTENSION that mends it, unless the
 *		catalog in this database is at the version this library reads and
 *		writes.  Cheap after the first success in a backend.
 */
extern void catalog_check_version(void);

/* Is the catalog at the library's version?  (No error: false.) */
extern bool catalog_version_is_current(void);

/*
 * catalog_version_mismatch
 *		NULL if the catalog is at the library's version, else what
 *		catalog_check_version would raise, as a query's last_error text
 *		(message, then "HINT: ..." on a line of its own).
 */
extern char *catalog_version_mismatch(void);

/*
 * catalog_enter / catalog_leave
 *		Run the statements between them as the extension owner (a
 *		RoleSwitch: an error in between needs no catalog_leave).
 */
extern void catalog_enter(RoleSwitch *save);
extern void catalog_leave(RoleSwitch *save);
extern void catalog_check_plain_table(Oid relid, LOCKMODE mode);

/*
 * Does the expression call a function for which checker (see
 * check_functions_in_node) says true?  One that is not PostgreSQL's own?
 */
extern bool expr_calls_function(Node *node, check_function_callback checker, void *context);
extern bool expr_calls_user_function(Node *node);
extern void catalog_check_table_pair(Oid a, LOCKMODE amode, Oid b, LOCKMODE bmode);

/*
 * catalog_exec
 *		One of streamwin's own statements on its catalog, as the extension
 *		owner, with a plan kept per backend; `sql` must be constant text.
 *		The catalog must be at the library's version (catalog_check_version).
 *		Errors if the statement fails; returns the SPI result code.  Inside
 *		SPI.
 */
extern int	catalog_exec(const char *sql, int nargs, Oid *types, Datum *args,
						 const char *nulls, long count);

/* Only the owner of a source or query (or a member of its role) may change it. */
extern void catalog_check_owner(Oid owner, const char *kind, const char *name);

/* The lock of one batch at a time per query, held to the end of the transaction. */
extern void catalog_lock_query(int32 query_id);

/* The lock of a new source's ('s') or query's ('q') name, to the end of the transaction. */
extern void catalog_lock_new_name(char kind, const char *name);

/* A table made for a query depends on the extension (DROP EXTENSION names it). */
extern void catalog_table_depends_on_extension(Oid relid);

#endif							/* STREAMWIN_CATALOG_ACCESS_H */
