/*-------------------------------------------------------------------------
 *
 * catalog_types.h
 *	  What a source and a query are in memory (SourceInfo, QueryInfo), as
 *	  streamwin's catalog rows hold them, and the names every part of
 *	  streamwin shares with them.
 *
 * Catalog rows (streamwin.source_catalog, streamwin.query_catalog) are read
 * into SourceInfo / QueryInfo by catalog.c; everything else works on those
 * structs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CATALOG_TYPES_H
#define STREAMWIN_CATALOG_TYPES_H

#include "postgres.h"

#include "access/xact.h"
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "utils/jsonb.h"

#include "decode.h"
#include "statements.h"

/*
 * The extension version whose catalog this library reads and writes
 * (streamwin.control's default_version; see check_catalog_version).
 */
#define STREAMWIN_CATALOG_VERSION "1.0"

typedef enum OutputMode
{
	OUTPUT_APPEND,
	OUTPUT_UPDATE,
	OUTPUT_COMPLETE
} OutputMode;

/* Where a source begins when a query has no stored offset for a partition. */
#define START_EARLIEST	(-2)
#define START_LATEST	(-1)

/*
 * A source, as its catalog row (streamwin.source_catalog) says.  Its kind
 * (source.h: SourceOps) reads the columns and options that are its own:
 * brokers and topic, or the table and its slot, and the options only it
 * knows (kafka_source.c, table_reader.c).
 */
typedef struct SourceInfo
{
	int32		source_id;
	char	   *name;
	const char *kind;			/* source_catalog.kind: SourceOps.kind */
	Oid			relation;		/* the source's view */
	Oid			owner;
	/* the catalog row's columns of one kind or another (NULL: not its) */
	char	   *brokers;
	char	   *topic;
	Oid			source_table;
	char	   *slot_name;
	char	   *format;			/* of its messages ("row": a table's rows) */
	Jsonb	   *options;		/* as given, with "timezone" made explicit */
	void	   *kind_options;	/* the options only its kind knows, parsed
								 * by the kind on first use */
	/* the options every kind has (options.c) */
	int64		starting_offset;	/* START_EARLIEST or START_LATEST */
	int32		max_records_option; /* option max_records_per_batch, 0:
									 * none (see source_max_records) */
	const char *timezone;		/* the zone of batches (option "timezone") */
	/* option "metadata": columns filled from the message, not its payload */
	int			nmetadata;
	const char **metadata_columns;
	SourceMetadata *metadata_kinds;
} SourceInfo;

/*
 * One source of a query (streamwin.query_sources): index 0, or for a
 * stream-stream join also index 1, in the order of the FROM clause.
 */
typedef struct QuerySourceInfo
{
	int32		source_id;
	XLogRecPtr	start_lsn;		/* table sources: where the query starts */
	TransactionId snapshot_xid; /* the transaction that set start_lsn: a
								 * changelog's start rows are its messages;
								 * invalid for a query started before 0.9 */
	char	   *event_time_expr;	/* nodeToString() of this source's event
									 * time, or NULL */
	Oid			join_table;		/* a join: this side's rows that can still
								 * match (UNLOGGED), else InvalidOid */
	Oid			join_checkpoint;	/* its logged copy */
} QuerySourceInfo;

/* At most this many sources per query: the two sides of a join. */
#define QUERY_MAX_SOURCES 2

/*
 * A compiled continuous query.  Its statements come from create_query
 * (query.c), are stored in query_catalog.plan, and are prepared once per
 * backend by its runner (runner.c).
 */
typedef struct QueryInfo
{
	int32		query_id;
	char	   *name;
	int			nsources;
	QuerySourceInfo sources[QUERY_MAX_SOURCES];
	Oid			owner;
	OutputMode	output_mode;
	bool		has_watermark;
	int64		watermark_delay_us;
	int64		trigger_interval_us;
	int64		idle_timeout_us;
	bool		capture_late_rows;	/* keep late rows in streamwin.late_rows */
	bool		desired_running;
	Oid			result_table;
	Oid			state_table;	/* InvalidOid for transforms */
	Oid			checkpoint_table;	/* logged copy of the state */
	Oid			dedup_table;	/* UNLOGGED keys seen, with dedup_keys */
	Oid			dedup_checkpoint;	/* its logged copy */
	int			dedup_side;		/* the source whose rows are deduplicated */
	char	   *source_key;		/* a keyed transform over a table's changes:
								 * the primary key it is keyed by, as
								 * source_key_names gives it (NULL: none, or
								 * compiled before it was recorded) */
	/*
	 * The names its statements give its result table and its sources'
	 * views, as when it was compiled (NULL: compiled before they were
	 * recorded): a batch tells of a rename rather than fail on the name.
	 */
	char	   *result_name;
	char	   *source_view_names[QUERY_MAX_SOURCES];
	char	   *dedup_batch_column; /* the batch that saw a key first (NULL:
									 * compiled before keys had it) */
	char	   *dedup_time_column;	/* a key's event time (NULL: none) */
	/* the compiled plan */
	bool		aggregate;		/* false: continuous transform */
	bool		windowed;
	bool		session_windows;	/* windowed by streamwin.session() */
	int64		window_size_us; /* windowed: the window size */
	int64		window_slide_us;	/* and its slide (= size for tumble) */
	struct JoinPlan *join;		/* a stream-stream join (join.h), or NULL */
	char	   *sql[NUM_STATEMENTS];	/* its statements (statements.h), or
										 * NULL */
	struct StorePlan *store;	/* its state store (state_store.h), or NULL:
								 * compiled without one (sessions, or by a
								 * version before 0.5) */
	struct StorePlan *dedup_store;	/* the store of its dedup keys, or NULL:
									 * compiled without one (before 0.5) */
	/* a query of an upsert source: each key's last row (op_upsert.c) */
	struct StorePlan *upsert_store; /* or NULL: none */
	int			upsert_side;	/* the upsert source */
	Oid			upsert_table;	/* UNLOGGED: the rows */
	Oid			upsert_checkpoint;	/* its logged copy */
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
 *	(hash, 6 or 7)	a new source's or query's name (catalog_lock_new_name)
 */
#define STREAMWIN_LOCK_SPACE 0x73747277

#endif							/* STREAMWIN_CATALOG_TYPES_H */
