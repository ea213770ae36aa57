/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  streamwin's catalog of sources and queries (catalog.c): reading them,
 *	  writing their rows, and running its own bookkeeping statements as the
 *	  extension's owner.
 *
 * Every statement on streamwin's catalog tables is in one of three files,
 * each the owner of its tables, as pg_cron's job_metadata.c is of its own,
 * and all run through catalog_access.c:
 *
 *	 catalog.c				source_catalog, query_catalog, query_sources
 *	 catalog_positions.c	query_offsets, query_checkpoints, state_alive:
 *							where each query stands in its sources
 *	 catalog_log.c			progress_log, dead_letter_log, late_row_log:
 *							what users read of batches and rejected rows
 *
 * Everything else calls their functions.  All of them run inside a
 * transaction, connect to SPI themselves where the caller may not have
 * (each says so otherwise), and raise an error if a statement fails.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CATALOG_H
#define STREAMWIN_CATALOG_H

#include "access/xlogdefs.h"

#include "catalog_access.h"
#include "catalog_types.h"

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
extern SourceInfo *catalog_get_source_by_id(int32 source_id, bool missing_ok);
extern SourceInfo *catalog_get_source_by_relation(Oid relid);
extern QueryInfo *catalog_get_query(const char *name, bool missing_ok);
extern QueryInfo *catalog_get_query_by_id(int32 query_id, bool missing_ok);

/*
 * The query that the first argument of a SQL-called function names, which
 * the caller must own; the first nargs arguments, named in args, must not
 * be NULL (check_args_not_null).
 */
extern QueryInfo *catalog_get_owned_query(FunctionCallInfo fcinfo, int nargs,
										  const char *const *args);

/*
 * Raise an error if a table the query's plan names is gone (its upsert
 * table, dropped by hand): reading the query does not, so that it can be
 * dropped; running or resetting it does.
 */
extern void catalog_require_query_tables(const QueryInfo *q);


/* --- sources --------------------------------------------------------------- */

/*
 * catalog_insert_source
 *		A new source's row (its view's oid not yet known: 0); returns its id.
 *		brokers, topic, slot_name NULL and table InvalidOid where the kind
 *		has none.  options get the source's zone under "timezone".
 */
extern int32 catalog_insert_source(const char *name, const char *kind, const char *brokers,
								   const char *topic, const char *format, const char *columns,
								   Jsonb *options, const char *timezone, Oid table,
								   const char *slot_name);
extern void catalog_set_source_relation(int32 source_id, Oid relid);

/*
 * The names of the queries reading a source, "a, b" (NULL: none); with
 * lock_row, its row locked first (drop_source: a create_query over it is
 * waited for).
 */
extern char *catalog_source_readers(int32 source_id, bool lock_row);

/* Delete a source's row and its dead letters. */
extern void catalog_delete_source(const SourceInfo *src);

/* The replication slots of every table source in this database (a List of names). */
extern List *catalog_source_slots(void);

/* --- queries --------------------------------------------------------------- */

/* Where a query stands, as its catalog row says (catalog_read_position). */
typedef struct QueryPosition
{
	int64		last_batch_id;	/* 0: none yet */
	bool		has_watermark;
	TimestampTz watermark;
	bool		has_last_batch_at;
	TimestampTz last_batch_at;
	int64		state_batch_id; /* the batch the state reflects */
	int64		checkpoint_batch_id;	/* of the last checkpoint, or 0 */
	TransactionId xmin;			/* who wrote the row last */
	bool		desired_running;	/* not stopped (stop_query) */
} QueryPosition;

/*
 * catalog_read_position
 *		The query's position, seen by a statement whose snapshot follows the
 *		batch lock (catalog_lock_query); lock_row: also lock the row, for a
 *		transaction whose snapshot predates the lock.  False: no such query.
 *		Inside SPI.
 */
extern bool catalog_read_position(int32 query_id, bool lock_row, QueryPosition *pos);

/*
 * catalog_reread_query
 *		catalog_read_position of a query a function waited for (its batch
 *		lock, its row), which must still be there: a drop_query that held it
 *		may have committed meanwhile, which is said by name.  Outside SPI.
 */
extern void catalog_reread_query(const QueryInfo *q, bool lock_row, QueryPosition *pos);

/* A query's last batch id (0: none). */
extern int64 catalog_query_last_batch(int32 query_id);

/*
 * start_query / stop_query: the state the query should be in.  This and
 * the other writes of a control function below fail saying so if another
 * session dropped the query meanwhile.
 */
extern void catalog_set_desired_state(int32 query_id, const char *state);

/*
 * alter_query: a new trigger interval (has_trigger) and idle timeout (NULL:
 * unchanged, else as interval text).
 */
extern void catalog_alter_query(int32 query_id, bool has_trigger, Datum trigger_interval,
								const char *idle_timeout);

/* drop_query: the query's row, its progress rows, late rows and liveness mark. */
extern void catalog_delete_query(int32 query_id, const char *name);

/*
 * reset_query: no positions, no checkpoint, no watermark, no error; the
 * state is as of the last batch (empty, the caller makes it so).
 */
extern void catalog_reset_query(int32 query_id);

/*
 * A batch committed: its id is the query's last and the state's, with the
 * watermark after it; the query is not failing.  Inside SPI.
 */
extern void catalog_record_batch(int32 query_id, int64 batch_id, bool has_watermark,
								 TimestampTz watermark);

/* A batch succeeded (perhaps with nothing to do): no longer failing. */
extern void catalog_clear_failure(int32 query_id);

/* A batch failed: in a transaction of its own, after its rollback. */
extern void catalog_record_failure(int32 query_id, const char *message);

/*
 * catalog_record_version_mismatch
 *		The catalog is at another version than the library (mismatch, from
 *		catalog_version_mismatch): say so on every query meant to run, in
 *		the columns every version of the catalog has, where users look.
 *		Not through catalog_exec, which refuses such a catalog.
 */
extern void catalog_record_version_mismatch(const char *mismatch);

/* The state now reflects batch_id (a restored checkpoint, a replayed batch). */
extern void catalog_set_state_batch(int32 query_id, int64 batch_id);

/* A checkpoint of the state as of batch_id, at that watermark, was taken. */
extern void catalog_record_checkpoint(int32 query_id, int64 batch_id, bool has_watermark,
									  TimestampTz watermark);

/* The batch of the query's last checkpoint (0: none). */
extern int64 catalog_checkpoint_batch(int32 query_id);

/* The running queries of this database, and their owners (Lists). */
extern void catalog_running_queries(List **query_ids, List **owners);

/* A new query's catalog row (create_query). */
typedef struct NewQuery
{
	int32		query_id;		/* from catalog_next_query_id */
	const char *name;
	Oid			owner;
	const char *query_text;
	bool		has_watermark;
	Datum		watermark;		/* interval */
	const char *output_mode;
	Datum		trigger_interval;	/* interval */
	bool		has_dedup_keys;
	Datum		dedup_keys;		/* text[] */
	Jsonb	   *options;
	Oid			result_table;
	Oid			state_table;	/* InvalidOid: none */
	const char *plan;			/* JSON */
	const char *desired_state;	/* running, stopped */
	Oid			checkpoint_table;
	Oid			dedup_table;	/* InvalidOid: none, nor its checkpoint */
	Oid			dedup_checkpoint;
} NewQuery;

extern int32 catalog_next_query_id(void);
extern void catalog_insert_query(const NewQuery *nq);

/*
 * A query's source_index-th source (streamwin.query_sources): where it
 * starts if it records that (has_start), a join's side tables (InvalidOid:
 * none).
 */
extern void catalog_insert_query_source(int32 query_id, int source_index, int32 source_id,
										bool has_start, int64 start_lsn, Oid join_table,
										Oid join_checkpoint);

/* --- table sources ----------------------------------------------------------- */

/* Does the source exist, read by no query? */
extern bool catalog_source_unread(int32 source_id);

/*
 * A table source's slot now (*slot_name) and, if retained is not NULL, the
 * oldest position any of its queries must still read from (its
 * checkpoint's where it keeps state), with has_retained false where none
 * has one.  False: no such source.
 */
extern bool catalog_table_source_now(int32 source_id, char **slot_name, bool *has_retained,
									 XLogRecPtr *retained);

/* The query of the source furthest behind, its state, and its position. */
extern bool catalog_source_furthest_behind(int32 source_id, char **query, char **state,
										   bool *has_pos, XLogRecPtr *pos);

/* Where a table source's query starts (reset_query). */
extern void catalog_set_query_start(int32 query_id, int source_index, XLogRecPtr start_lsn);

/*
 * Read the sources' starts (start_lsn, snapshot_xid) of q again: another
 * transaction's reset_query may have moved them.
 */
extern void catalog_reread_query_starts(QueryInfo *q);

/* A table source's replication slot (NULL: no such source), and a new one. */
extern char *catalog_source_slot(int32 source_id);
extern void catalog_set_source_slot(int32 source_id, const char *slot_name);

/*
 * A source's slot retains too much WAL (warned), or no longer does;
 * false: no such source.
 */
extern bool catalog_source_wal_warned(int32 source_id, bool warned);

/* The error shown on the queries of a source that are not failing. */
extern void catalog_source_queries_warned(int32 source_id, const char *message);

/* A source with a replication slot, as the WAL retention check reads it. */
typedef struct SourceSlotRow
{
	int32		source_id;
	char	   *name;
	char	   *slot_name;
	bool		warned;			/* over the threshold at the last check */
	bool		warned_recently;	/* ... and warned about within warned_within */
} SourceSlotRow;

/* The sources with a slot (SourceSlotRow), in the caller's memory context. */
extern List *catalog_source_slot_rows(const char *warned_within);

#endif							/* STREAMWIN_CATALOG_H */
