/*-------------------------------------------------------------------------
 *
 * compile_sql.h
 *	  The compiler's ground floor: refusing a query, naming streamwin's own
 *	  columns, the SQL text of column lists and types, and creating a
 *	  query's own tables.  Every other compile_*.c calls down into it; it
 *	  calls no other file of the compiler.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_COMPILE_SQL_H
#define STREAMWIN_COMPILE_SQL_H

#include "compile.h"

extern void refuse(const char *msg, const char *detail, const char *hint) pg_attribute_noreturn();
extern Oid	streamwin_func_oid(const char *name, int nargs, Oid *argtypes);
extern char *internal_name(List **taken, const char *base, const char *tail);
extern char *column_type_sql(Oid type, int32 typmod, Oid collation);
extern char *cast_type_sql(Oid type);
extern char *state_column_defs(Compiled *c);
extern char *group_columns(Compiled *c, const char *prefix);
extern char *keys_list(Compiled *c, const char *prefix);
extern char *equality_sql(Oid type, const char *l, const char *r, bool nulls_match);
extern char *keys_equal(Compiled *c, const char *a, const char *b);
extern char *keys_equal_strict(Compiled *c, const char *a, const char *b);
extern char *keys_any_null(Compiled *c, const char *a);
extern Oid	create_query_table(const char *name, const char *create_sql, const char *index_sql);

/*
 * The schema-qualified name of collation collid, quoted where needed, as
 * COLLATE and regcollation read it whatever the search_path.
 */
extern char *collation_qualified_name(Oid collid);

/* Refuse a key whose type does not both hash and sort (what, label: for the message). */
extern void check_key_type(const char *what, const char *label, Oid type);

/* The range table index of a hop's LATERAL hop_starts() (HOP_ALIAS), or 0 */
extern int	hop_rtindex(Query *q);

/* A time as an event time: a timestamp (without zone) cast to timestamptz */
extern Expr *as_event_time(Expr *t);

#endif							/* STREAMWIN_COMPILE_SQL_H */
