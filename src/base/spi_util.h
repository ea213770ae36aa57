/*-------------------------------------------------------------------------
 *
 * spi_util.h
 *	  Small helpers every part of streamwin uses: subtransactions, running
 *	  as another role, qualified names, deparsing, rows as tuples.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_SPI_UTIL_H
#define STREAMWIN_SPI_UTIL_H

#include "access/htup.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "utils/elog.h"

/*
 * run_in_subtransaction
 *		Run fn(arg) in a subtransaction of its own.  Returns NULL if it
 *		succeeded.  Otherwise the subtransaction is rolled back (whatever the
 *		error: it ends where it began) and the error is returned, copied into
 *		the caller's memory context, for the caller to handle or to rethrow
 *		with ReThrowError().
 */
extern ErrorData *run_in_subtransaction(void (*fn) (void *arg), void *arg);

/*
 * RoleSwitch: run the statements between role_switch_enter and
 * role_switch_leave as another role (the query's owner, the extension's
 * owner), with SECURITY_LOCAL_USERID_CHANGE so that SET ROLE cannot undo
 * it.  An error in between needs no role_switch_leave: (sub)transaction
 * abort restores the user id.
 */
typedef struct RoleSwitch
{
	Oid			saved_userid;
	int			saved_sec_context;
	int			guc_level;		/* catalog_enter's pinned search_path, or 0 */
	int			owner_guc_level;	/* role_restricted_enter's, or 0 */
} RoleSwitch;

extern void role_switch_enter(RoleSwitch *save, Oid role);
extern void role_switch_leave(RoleSwitch *save);

/*
 * role_restricted_enter: role_switch_enter, in a security-restricted
 * operation (as REFRESH MATERIALIZED VIEW runs its owner's code), unless
 * role is the current user already.  Left by role_switch_leave, which
 * rolls back every setting changed in between, also by a plain SET in the
 * owner's code: it neither reaches the session that runs the code (a
 * superuser's run_batch or reset_query) nor the worker's next batch.
 * Errors if role (a query's owner) no longer exists.
 */
extern void role_restricted_enter(RoleSwitch *save, Oid role);

/* Execute one SQL statement through SPI; any failure is an error. */
extern void spi_run(const char *sql);

/* "schema"."name" of a relation, quoted for SQL */
extern char *qualified_relname(Oid relid);

/*
 * A possibly schema-qualified name as a user wrote it ('s.t', 'MyTable'),
 * quoted for SQL, resolved the way PostgreSQL resolves identifiers.
 */
extern char *quote_name_text(const char *name);

/*
 * Deparse a query or an expression with only pg_catalog in search_path, so
 * that every other name comes out schema-qualified, and constants in fixed
 * styles, so that the text means the same in any session.  dpcontext as
 * from deparse_context_for().
 */
extern char *deparse_query_qualified(Query *query);
extern char *deparse_expr_qualified(Node *expr, List *dpcontext);

/*
 * The date and interval styles batches parse and run their statements in,
 * whatever the session's (batch_execute), and the ones the deparse_
 * functions write constants in, with extra_float_digits 3 and the zone
 * UTC: a date constant reads back as the date it was.
 */
#define SQL_DATESTYLE		"ISO, MDY"
#define SQL_INTERVALSTYLE	"postgres"

/*
 * A heap tuple header of `len` bytes (a table source's row, as the output
 * plugin copied it) seen as a HeapTuple: fills *tuple, copies nothing.
 */
extern void tuple_from_body(HeapTuple tuple, const char *body, size_t len);

/* Append ', "key": "timestamp"' (or null unless has) to a JSON object. */
extern void json_append_timestamp(StringInfo buf, const char *key, bool has, TimestampTz ts);

/*
 * Refuse a NULL among the first nargs arguments of a function SQL calls
 * (names: what each is, for the message).  The control functions take
 * NULLs in, to say so rather than do nothing and return NULL.
 */
extern void check_args_not_null(FunctionCallInfo fcinfo, int nargs, const char *const *names);

#endif							/* STREAMWIN_SPI_UTIL_H */
