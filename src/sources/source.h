/*-------------------------------------------------------------------------
 *
 * source.h
 *	  Sources: the one interface between a query and what it reads, and the
 *	  relation that stands for each source.
 *
 * Every kind of source (a Kafka topic: kafka_source.c; the rows inserted
 * into a table: table_reader.c) implements SourceOps.  The batch, the
 * offsets, checkpoints, control functions and workers only call through
 * it, so that they never ask which kind of source they read, and a new
 * kind costs one file.
 *
 * Positions.  A source is read as partitions (a Kafka topic's; a table
 * source has one, its commit order).  Each partition has a position, the
 * next row to process, that the query stores in streamwin.query_offsets in
 * the batch's own transaction: that is what makes a batch replayable.  What
 * a position means belongs to the kind: a Kafka offset, or a table
 * source's commit LSN with the number of that transaction's rows already
 * processed.  Readers also turn positions into JSON and back, for
 * streamwin.progress (which is also what crash recovery replays from) and
 * reset_query.
 *
 * Rows.  A fetch returns SourceRows: a message's payload, key, timestamp
 * and headers, or for a table source a heap tuple of the source's row
 * type.  They live in the batch's memory, or in the reader's, until the
 * next fetch.
 *
 * Changelogs.  A source is an append stream (every row is new) or a
 * changelog, whose rows are also updated and deleted: a table source with
 * option "changes": "all", a Kafka source with an envelope ("debezium",
 * "upsert").  A changelog source's row type (its view's columns) ends with
 * one more column, CHANGE_COLUMN, of type smallint, that the source fills:
 * 1 for a row added (an insert, an update's new version), -1 for a row
 * retracted (an update's old version, a deleted row).  An update is the
 * old row retracted, then the new one added.  Queries never name the
 * column: the compiler reads it (source_is_changelog) to retract exactly
 * what the row added.  A changelog source may also say which columns
 * identify a row (SourceOps.key_columns), which a transform keys its
 * result by.
 *
 * A Kafka source's messages are rows as its envelope says
 * (SourceReader.envelope): one row each (append), a Debezium change
 * event's rows retracted and added, or an upsert's new version of its
 * key's row (changelog_input.c).  An upsert source (SourceOps.upsert) does
 * not know which row a new version replaces: a query of it keeps each
 * key's last row as state, and its upsert operator (op_upsert.c) turns the
 * batch's rows into the exact changes.  A Debezium source with key columns
 * is read the same way, its events as new versions and deletions of their
 * keys: its "before" rows are not trusted to be what was added (Debezium
 * delivers at least once, and sends the key alone without REPLICA
 * IDENTITY FULL).  A changelog batch counts its inserts, updates and
 * deletes (SourceReader.changes) for its progress.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_SOURCE_H
#define STREAMWIN_SOURCE_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#include "batch_scope.h"
#include "decode.h"
#include "catalog_types.h"

/* A position in a partition: the next row to process (see above). */
typedef struct SourcePosition
{
	int64		offset;			/* Kafka: offset; table source: commit LSN */
	int64		index;			/* table source: rows of that commit done */
} SourcePosition;

/* a < b */
#define SOURCE_POSITION_BEFORE(a, b) \
	((a).offset < (b).offset || ((a).offset == (b).offset && (a).index < (b).index))

/* One partition of a source, as a query reads it. */
typedef struct PartitionState
{
	int32		partition;		/* the source's number for it */
	bool		has_position;	/* stored, or resolved from the start */
	SourcePosition next;		/* the next row to process */
	/* what the watermark needs (offsets.c) */
	bool		has_max_event_time;
	TimestampTz max_event_time;
	TimestampTz last_data_at;
	/* this batch */
	int64		batch_rows;
	bool		batch_has_max;
	TimestampTz batch_max_event_time;
} PartitionState;

/*
 * One row of a batch.  partition and offset are what streamwin.dead_letters
 * and the "metadata" columns show: a Kafka message's partition and offset;
 * for a table source the row's number in its transaction and the commit
 * LSN.  payload is NULL for a message without a value (a tombstone); key
 * NULL without a key; neither is NUL-terminated.
 */
typedef struct SourceRow
{
	int			part;			/* index of its partition in reader->parts */
	int32		partition;
	int64		offset;
	const char *payload;
	size_t		len;
	const char *key;
	size_t		keylen;
	bool		has_timestamp;
	int8		change;			/* a table changelog row whose payload is the
								 * table's tuple as is, without the change
								 * column: +1 it adds, -1 it retracts */
	TimestampTz timestamp;
	const void *handle;			/* the reader's own, e.g. the librdkafka
								 * message while it lives */
	const char *headers_json;	/* for rows that outlive it: their headers */
	const char *headers_error;	/* as JSON, or why they are not text */
} SourceRow;

struct SourceOps;

/* How a reader's messages are rows (see "Changelogs" above). */
typedef enum SourceEnvelope
{
	ENVELOPE_APPEND,			/* a message is a row */
	ENVELOPE_DEBEZIUM,			/* a Debezium change event: the rows it
								 * retracts and adds */
	ENVELOPE_UPSERT				/* its key's new row, or (a null value) the
								 * key's deletion */
} SourceEnvelope;

/* The changes of a changelog batch's rows (progress.offsets shows them). */
typedef struct SourceChanges
{
	int64		inserts;
	int64		updates;
	int64		deletes;
} SourceChanges;

/*
 * A query's reader of one source, kept by the query's runner (runner.h)
 * between batches, in the runner's memory context.
 */
typedef struct SourceReader
{
	const struct SourceOps *ops;
	SourceInfo *source;
	QueryInfo  *query;
	int			source_index;	/* the source's number in the query */
	QuerySourceInfo *qsource;	/* = &query->sources[source_index] */
	MemoryContext cxt;			/* lives as long as the reader */
	TupleDesc	desc;			/* the source's row type */
	bool		rows_are_tuples;	/* payloads are heap tuple bodies of desc,
									 * or of its leading columns
									 * (source_row_deform) */
	SourceEnvelope envelope;	/* how messages are rows (set by open) */
	SourceChanges changes;		/* a changelog's, in the batch's rows:
								 * counted by batch_input.c (set to zero
								 * there) or by the upsert operator */
	bool		in_worker;		/* read by the query's background worker */
	bool		fetch_again;	/* the caller fetches again at once */
	bool		fetched;		/* a batch has fetched from it (batch.c) */
	bool		outgrown;		/* its source has more partitions than it
								 * reads: its runner is made anew before the
								 * next batch (runner_settings_changed) */
	int			nparts;
	PartitionState *parts;
	void	   *private;		/* the kind's own state */
} SourceReader;

/*
 * What each kind of source implements.  The reader callbacks run inside a
 * transaction, in the batch's memory context unless said otherwise, and
 * may raise errors (a failed batch is rolled back and retried; the reader
 * must then still be usable, or be closed by the caller).
 */
typedef struct SourceOps
{
	const char *kind;			/* source_catalog.kind */

	/* reset_query's hint: the starting_offsets a source of this kind takes */
	const char *reset_hint;
	/* ... and where it is a changelog, if they differ (else NULL) */
	const char *changelog_reset_hint;

	/*
	 * For a source whose every fetch reads from the oldest position any
	 * query of the source keeps, which for a query with state is its
	 * checkpoint's (a table source decodes from its slot's restart point),
	 * else NULL: will the reader's next fetch decode again from there?  (Not
	 * when a table source's fetch kept its decoding context open for the
	 * next, in a backlog, or left the rest of a large transaction in its
	 * spool.)  The cost of such batches grows with the distance to the
	 * checkpoint, which is therefore taken every
	 * streamwin.checkpoint_interval batches however often they run, and
	 * after every batch that leaves a fetch that decodes again next if the
	 * state's checkpoint is cheap (checkpoint_after_batch).
	 */
	bool		(*fetch_rereads) (SourceReader *rd);

	/* --- at the catalog's pace, on a SourceInfo --- */

	/* create_query: refuse a source this query cannot read */
	void		(*check_query) (SourceInfo *src);
	/*
	 * create_query, once the query has its id: the start to record for the
	 * new query (true), or none
	 */
	bool		(*query_start) (SourceInfo *src, int32 query_id, int64 *start);

	/*
	 * create_query, for a changelog source: the names of the columns that
	 * identify a row (a List of String), or NIL when it knows none.  NULL
	 * op: an append stream.
	 */
	List	   *(*key_columns) (SourceInfo *src);

	/*
	 * create_query: is the source an upsert changelog, whose rows are each a
	 * key's new version or deletion, so that a query keeps each key's row
	 * as state (see "Changelogs")?  NULL op: no.
	 */
	bool		(*upsert) (SourceInfo *src);
	/* drop_source: release what the source holds (at commit) */
	void		(*dropped) (SourceInfo *src);

	/*
	 * A query of the source is gone (dropped, or its worker exited, after
	 * releasing its reader): if no query reads the source any more, it may
	 * let go of what it keeps for them.  NULL op: nothing kept.
	 */
	void		(*query_gone) (SourceInfo *src);

	/* --- a query's reader --- */

	/* once, in the reader's context: private state, the partitions read */
	void		(*open) (SourceReader *rd);
	/* where a partition without a stored position starts */
	SourcePosition (*start_position) (SourceReader *rd, PartitionState *p, bool query_started);
	/* read from every partition's position (rd->parts[].next) on */
	void		(*seek) (SourceReader *rd);

	/*
	 * The next batch: up to source->max_records_per_batch rows, waiting up to
	 * timeout_ms for the first and linger_ms more for the rest of what the
	 * source holds now.  Advances the parts' positions past the rows.
	 */
	int			(*fetch) (SourceReader *rd, int timeout_ms, int linger_ms, SourceRow **rows);

	/*
	 * Re-read exactly the rows from the parts' positions up to (not
	 * including) targets[i] of each partition: a batch read before, replayed
	 * after a crash (targets from its progress record).
	 */
	int			(*replay) (SourceReader *rd, const SourcePosition *targets, SourceRow **rows);

	/* Did the last fetch read everything the source held, in partition p? */
	bool		(*at_end) (SourceReader *rd, PartitionState *p);
	/* The end of partition p as last seen, for lag; -1 if unknown. */
	int64		(*end_offset) (SourceReader *rd, PartitionState *p);
	/* The positions that hold everything the source has now (run_available) */
	void		(*end_positions) (SourceReader *rd, SourcePosition *targets);

	/* Positions as JSON (progress.offsets), and targets read back from it */
	void		(*positions_json) (SourceReader *rd, StringInfo buf);
	void		(*positions_parse) (SourceReader *rd, Jsonb *json, SourcePosition *targets);

	/*
	 * reset_query, on the SourceInfo, before its transaction's first write:
	 * make the source readable again if it no longer is (a table source
	 * replaces a slot that PostgreSQL invalidated, which it can only create
	 * before that write).  NULL op: nothing to do.
	 */
	void		(*prepare_reset) (SourceInfo *src);

	/*
	 * reset_query: every partition's position from 'earliest', 'latest' or
	 * explicit (JSON as reset_query's documentation gives), checked.
	 */
	void		(*reset) (SourceReader *rd, const char *start, Jsonb *explicit);

	/*
	 * A batch that found no rows may still have moved the positions (a table
	 * source reads other tables' WAL): is that worth storing now? NULL:
	 * positions move with rows only.
	 */
	bool		(*moved_without_rows) (SourceReader *rd, const SourcePosition *before);

	/* A row as text for streamwin.dead_letters.payload */
	bytea	   *(*row_text) (SourceReader *rd, const SourceRow *row);

	/* A row's headers as JSON, or NULL with *error set; NULL op: none */
	char	   *(*row_headers_json) (SourceReader *rd, const SourceRow *row, const char **error);

	/* For a worker between batches: readable when data arrives; NULL op: none */
	int			(*wakeup_fd) (SourceReader *rd);
	void		(*drain_wakeup) (SourceReader *rd);
	/* The last error the source reported, for messages, or NULL */
	const char *(*last_error) (SourceReader *rd);
	/* The caller stops fetching at once: let go of what was kept for it */
	void		(*release) (SourceReader *rd);
	/* Free everything; never raises an error */
	void		(*close) (SourceReader *rd);
} SourceOps;

/*
 * The linger of fetches in batches run in a session (run_batch,
 * run_available): such a batch holds everything the source has now rather
 * than one response's worth.  A worker on a trigger lingers 0: it takes
 * the rest in its next batch, and lingering would only add latency.
 */
#define SESSION_FETCH_LINGER_MS 50

extern const SourceOps kafka_source_ops;
extern const SourceOps table_source_ops;

/* The ops of a source's kind. */
extern const SourceOps *source_ops(const SourceInfo *src);

/* Key column names (a List of String) as one text: "id, \"Part No\"" */
extern char *source_key_names(List *names);

/*
 * source_reader_open
 *		A reader of source number source_index of query q (src), in a new
 *		child of memory context parent.  Opens the kind's reader (which may
 *		contact the source).  source_reader_close frees it; never raises an
 *		error.
 */
extern SourceReader *source_reader_open(SourceInfo *src, QueryInfo *q, int source_index,
										MemoryContext parent, bool in_worker);
extern void source_reader_close(SourceReader *rd);

/* The index in rd->parts of the source's partition number, or -1. */
extern int	source_part_index(SourceReader *rd, int32 partition);

extern void source_scan_init(void);
extern bool streamwin_enable_source_scan;
extern TupleDesc source_tupdesc(Oid relid);

/*
 * Fail, saying so, when src's view was dropped by hand (DROP VIEW, a DROP
 * SCHEMA ... CASCADE): its columns are the source's rows.
 */
extern void source_check_view(const SourceInfo *src);
extern SourceMetadata *source_metadata_map(const SourceInfo *src, TupleDesc desc);
extern bool source_keys_are_avro(const SourceInfo *src);

/*
 * source_register
 *		Record a new source in the catalog under its canonical name
 *		(catalog_new_name) and create its view, in the caller's current
 *		schema unless the name has one, with columns names/types/typmods/
 *		collations (Lists; a collation InvalidOid: the type's), and for a
 *		changelog source (changelog) CHANGE_COLUMN after them; returns the
 *		view's oid.  For create_<kind>_source.  Inside SPI.
 */
extern Oid	source_register(const char *name, const char *kind, const char *brokers,
							const char *topic, Oid table, const char *slot_name,
							const char *format, const char *columns, Jsonb *options,
							List *types, List *typmods, List *collations, List *names,
							bool changelog);
extern void source_check_new_name(const char *name);

/*
 * The column of a changelog source's row type that says whether a row is
 * added (1) or retracted (-1); see "Changelogs" above.
 */
#define CHANGE_COLUMN "__streamwin_change"

/* The attribute number of CHANGE_COLUMN in a source's row type, or 0. */
extern AttrNumber source_change_attno(TupleDesc desc);

/* A table source's row into values and nulls of its row type, desc. */
extern void source_row_deform(TupleDesc desc, AttrNumber change_attno, const SourceRow *row,
							  Datum *values, bool *nulls);

#endif							/* STREAMWIN_SOURCE_H */
