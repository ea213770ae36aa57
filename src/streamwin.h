/*-------------------------------------------------------------------------
 *
 * streamwin.h
 *	  Declarations shared by every part of streamwin: GUCs, catalog access
 *	  and the in-memory form of sources and queries.
 *
 * Catalog rows (streamwin.source_catalog, streamwin.query_catalog) are read
 * into SourceInfo / QueryInfo by catalog.c; everything else works on those
 * structs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_H
#define STREAMWIN_H

#include "postgres.h"

#include "access/xact.h"
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "utils/jsonb.h"

#include "decode.h"

/*
 * The extension version whose catalog this library reads and writes
 * (streamwin.control's default_version; see check_catalog_version).
 */
#define STREAMWIN_CATALOG_VERSION "0.4"

/* GUCs (streamwin.c) */
extern int	streamwin_max_workers;
extern int	streamwin_progress_retention;
extern int	streamwin_default_max_records;

/* Is the library loaded through shared_preload_libraries? (streamwin.c) */
extern bool streamwin_preloaded;

typedef enum OutputMode
{
	OUTPUT_APPEND,
	OUTPUT_UPDATE,
	OUTPUT_COMPLETE
} OutputMode;

/* Where a source begins when a query has no stored offset for a partition. */
#define START_EARLIEST	(-2)
#define START_LATEST	(-1)

typedef enum SourceKind
{
	SOURCE_KAFKA,				/* a Kafka topic */
	SOURCE_TABLE				/* the rows inserted into a table */
} SourceKind;

typedef struct SourceInfo
{
	int32		source_id;
	char	   *name;
	SourceKind	kind;
	Oid			relation;		/* the source's view */
	char	   *brokers;		/* Kafka only */
	char	   *topic;			/* Kafka only */
	Oid			source_table;	/* table sources: the table read */
	char	   *slot_name;		/* table sources: its replication slot */
	SourceFormat format;		/* Kafka only */
	Oid			owner;
	/* parsed options */
	int64		starting_offset;	/* START_EARLIEST or START_LATEST */
	int32		max_records_per_batch;
	int			npartitions;	/* 0 = every partition of the topic */
	int32	   *partitions;
	int			nkafka_props;
	const char **kafka_keys;
	const char **kafka_values;
	/* option "metadata": columns filled from the message, not its payload */
	int			nmetadata;
	const char **metadata_columns;
	SourceMetadata *metadata_kinds;
} SourceInfo;

/*
 * A compiled continuous query.  The SQL statements come from query.c and are
 * stored in query_catalog.plan; batch.c prepares them once per backend.
 */
typedef struct QueryInfo
{
	int32		query_id;
	char	   *name;
	int32		source_id;
	Oid			owner;
	OutputMode	output_mode;
	bool		has_watermark;
	int64		watermark_delay_us;
	int64		trigger_interval_us;
	int64		idle_timeout_us;
	bool		capture_late_rows;	/* keep late rows in streamwin.late_rows */
	XLogRecPtr	start_lsn;		/* table sources: where the query starts */
	bool		desired_running;
	Oid			result_table;
	Oid			state_table;	/* InvalidOid for transforms */
	Oid			checkpoint_table;	/* logged copy of the state */
	Oid			dedup_table;	/* UNLOGGED keys seen, with dedup_keys */
	Oid			dedup_checkpoint;	/* its logged copy */
	char	   *dedup_sql;		/* insert first occurrences, return positions */
	char	   *dedup_evict_sql;	/* $1 = watermark */

	/* the compiled plan */
	bool		aggregate;		/* false: continuous transform */
	bool		windowed;
	int64		window_size_us;	/* windowed: the window size */
	int64		window_slide_us;	/* and its slide (= size for tumble) */
	char	   *event_time_expr;	/* nodeToString() of the event-time Expr,
									 * or NULL */
	char	   *batch_sql;		/* run once per batch over the source rows */
	char	   *close_sql;		/* $1 = watermark: emit/evict closed windows */
	char	   *batch_insert_sql;	/* their variants that write rows new to */
	char	   *close_insert_sql;	/* the result with a plain INSERT, or NULL */
	char	   *clear_sql;		/* complete mode: empty the result */
	char	   *refresh_sql;	/* complete mode: rewrite the result */
	char	   *state_count_sql;
} QueryInfo;

/*
 * The advisory locks streamwin takes live in the database's advisory lock
 * space with key1 STREAMWIN_LOCK_SPACE ("strw") and a field4 of their own,
 * so that they meet neither each other nor users' pg_advisory_lock() calls
 * (field4 1 and 2):
 *	(0, 3)			creating a table source's slot vs the launcher's reaper of
 *					orphan slots (table_source.c)
 *	(source_id, 4)	confirming a table source's slot (table_source.c)
 *	(query_id, 5)	one batch at a time per query (catalog_lock_query)
 */
#define STREAMWIN_LOCK_SPACE 0x73747277

/* catalog.c */
typedef struct CatalogRole
{
	Oid			saved_userid;
	int			saved_sec_context;
} CatalogRole;

extern void catalog_enter(CatalogRole *save);
extern void catalog_leave(CatalogRole *save);
extern int	catalog_exec(const char *sql, int nargs, Oid *types, Datum *args,
						 const char *nulls, long count);
extern SourceInfo *catalog_get_source(const char *name, bool missing_ok);
extern SourceInfo *catalog_get_source_by_id(int32 source_id);
extern SourceInfo *catalog_get_source_by_relation(Oid relid);
extern QueryInfo *catalog_get_query(const char *name, bool missing_ok);
extern QueryInfo *catalog_get_query_by_id(int32 query_id, bool missing_ok);
extern void catalog_check_owner(Oid owner, const char *kind, const char *name);
extern void catalog_lock_query(int32 query_id);
extern void catalog_table_depends_on_extension(Oid relid);
extern int64 interval_to_usec(const Interval *iv, const char *what);
/* query.c: create_query's and alter_query's checks */
extern void check_trigger_interval(const Interval *iv);
extern void check_idle_timeout(const Interval *iv);
extern char *jsonb_get_text(Jsonb *jb, const char *key);
extern void parse_source_options(SourceInfo *src, Jsonb *options);
extern void jsonb_check_keys(Jsonb *options, const char *const *valid, const char *what);

/* launcher.c */
extern void launcher_register(void);
extern void launcher_shmem_request(void);
extern void launcher_shmem_startup(void);
extern void launcher_request_start(int32 query_id, Oid owner);
extern void launcher_request_wake(int32 query_id);
extern int	launcher_worker_pid(Oid dboid, int32 query_id);
extern void launcher_xact_callback(XactEvent event, void *arg);

/* control.c */
extern bool role_cannot_run_worker(Oid roleid, char **message, char **hint);
extern void check_role_can_login(Oid roleid);
extern void check_preloaded(void);

#endif							/* STREAMWIN_H */
