/*-------------------------------------------------------------------------
 *
 * table_source.h
 *	  Reading the rows inserted into a table, in commit order, through
 *	  logical decoding, inside a PostgreSQL backend.
 *
 * A table source owns one logical replication slot whose output plugin is
 * streamwin itself.  The plugin is never used by a walsender: the batch
 * executor drives the decoding in its own backend (as the SQL function
 * pg_logical_slot_peek_changes does) and the plugin's callbacks copy each
 * inserted row straight into the batch, already in the source's row type.
 *
 * Positions.  A query's position in a table source is (lsn, index): the
 * next row to process is row number `index` (from 0, counting the
 * transaction's inserts into the table) of the first transaction that
 * commits at or after `lsn`.  Positions are stored by the caller in the
 * batch transaction, like Kafka offsets; decoding from a position skips
 * every transaction that committed before it, which is how transactions
 * already applied are never applied twice.  `index` is 0 except after a
 * batch that ended inside a transaction larger than the batch.
 *
 * Retention.  The slot is only confirmed (and so WAL released) up to the
 * smallest position any query of the source may still need: its stored
 * position, or for a query with UNLOGGED state the position of its last
 * checkpoint, from which a crash recovery replays.  The caller computes
 * that from committed catalog rows and passes it to table_fetch().
 *
 * Memory.  A decoding context lives for one fetch, or a few in a row (see
 * KeptDecoding).  The reorder buffer spills transactions larger than
 * logical_decoding_work_mem to disk, and a fetch keeps at most max_records
 * rows, so a huge transaction is read in bounded memory over several
 * batches.  Where fetches follow one another (may_keep), the first one
 * decodes it once and keeps the rest of its rows in a tuplestore (work_mem,
 * then a temporary file) for the next ones; elsewhere (run_batch) each
 * batch decodes it again and skips the rows already processed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_TABLE_SOURCE_H
#define STREAMWIN_TABLE_SOURCE_H

#include "access/tupdesc.h"
#include "access/xlogdefs.h"
#include "nodes/pg_list.h"

#include "source.h"

/* SQLSTATE: the position a query needs is no longer retained by the slot */
#define ERRCODE_TABLE_POSITION_LOST		MAKE_SQLSTATE('S','W','T','0','1')
/* SQLSTATE, internal: how a full batch stops decoding (never reported) */
#define ERRCODE_TABLE_BATCH_FULL		MAKE_SQLSTATE('S','W','T','0','2')

typedef struct TablePosition
{
	XLogRecPtr	lsn;
	int64		index;
} TablePosition;

/* What one table_fetch() read. */
typedef struct TableFetch
{
	int			nrows;
	SourceRow  *rows;			/* see table_fetch() */
	TablePosition end;			/* the position after the last row read */
	bool		at_end;			/* everything committed so far was read */
	XLogRecPtr	end_of_wal;		/* the flushed WAL position it read up to */
	int64		ignored_updates;	/* changes the source does not deliver */
	int64		ignored_deletes;
	int64		ignored_truncates;
	int64		changes[3];		/* a changelog source's rows read: inserts,
								 * updates, deletes (CHANGE_*) */
} TableFetch;

/*
 * What a changelog source's row is part of, for the counts of changes: an
 * insert, an update (its new version counts it; its old one, retracted,
 * is CHANGE_UPDATE_OLD), a delete.
 */
#define CHANGE_INSERT		0
#define CHANGE_UPDATE		1
#define CHANGE_DELETE		2
#define CHANGE_UPDATE_OLD	3
#define CHANGE_NONE			4	/* an append stream's row */

/* At library load: keeps per-batch decoding start-up messages out of the log. */
extern void table_source_init(void);

/*
 * table_source_check_relation
 *		Refuse, with errmsg/errdetail/errhint, a relation a table source
 *		cannot read: not a plain table, unlogged or temporary (not in the
 *		WAL), a system catalog, or not readable (SELECT) by the current
 *		user.  Also checks wal_level = logical.
 */
extern void table_source_check_relation(Oid relid);

/*
 * source_slot_check_privilege
 *		Refuse, with errmsg/errdetail/errhint naming the GRANT to run, a
 *		current user who may not create a table source's slot: only
 *		superusers, roles with REPLICATION and roles granted EXECUTE on
 *		streamwin.create_table_source_slot() may (see table_slot.c).
 *		replacing: the slot replaces one that PostgreSQL invalidated.
 */
extern void source_slot_check_privilege(const char *source_name, bool replacing);

/*
 * source_slot_new
 *		Create a slot for table source source_name, after checking the
 *		privilege, through streamwin.create_table_source_slot() (which calls
 *		source_slot_create), and return its name in the caller's memory
 *		context.
 *
 * source_slot_create
 *		Create a slot and return its name.  Must be the first thing the
 *		transaction writes; the slot stays ephemeral, held by this backend,
 *		until the transaction commits (then it is made persistent) or
 *		aborts (then it disappears).  Waits for transactions running now to
 *		finish, like any logical slot creation.
 */
extern char *source_slot_new(const char *source_name, bool replacing);
extern char *source_slot_create(void);

/*
 * source_slot_drop_at_commit
 *		Drop the slot just before the current transaction commits.
 */
extern void source_slot_drop_at_commit(const char *slot_name);

/* Whether this transaction drops the slot when it commits. */
extern bool source_slot_dropping(const char *slot_name);

/* The slot's confirmed position: the oldest change it still delivers. */
extern XLogRecPtr source_slot_confirmed(const char *slot_name);

/*
 * table_fetch
 *		Read the rows inserted into `table` from position `start`: up to
 *		max_records of them, ending at a transaction boundary unless a single
 *		transaction holds more; or, when upto is given, exactly the rows
 *		before position *upto (a replay).
 *
 * Each row is returned as a SourceRow (of part 0) whose payload is the row
 * as a heap tuple body (HeapTupleHeader, len = t_len) of row type `desc`
 * (the table's columns, then nmetadata metadata columns, then a changelog
 * source's change column), or of its leading columns alone where they are
 * the table's as they are (the table's tuple copied; source_row_deform
 * fills the rest, the change from SourceRow.change), columns matched by
 * name (a column the table no longer has reads NULL; for a changelog
 * source it is an error, since a retraction without it would not be
 * exact, and so is one of that name that is another attribute of the
 * table than attnums, where given, says it was: dropped and added again),
 * offset is the commit LSN of its transaction, partition its index
 * in that transaction, and timestamp the commit time.  Everything is
 * allocated in CurrentMemoryContext.
 *
 * A changelog query's start rows (table_snapshot.c) are the logical
 * messages for query_id of transaction snapshot_xid, which set its start
 * (InvalidTransactionId: of any transaction, for a query started before
 * catalog 0.9); any role may write a message of that tag.  Of them, those
 * from snapshot_lsn on, the start: a transaction that started the query
 * twice (reset_query again) wrote the table's rows twice.
 *
 * confirm_upto: the slot may be confirmed up to there (InvalidXLogRecPtr:
 * leave it); never moves the slot backwards.
 *
 * may_keep: the caller will fetch again at once, and calls
 * table_fetch_release() when it stops; the decoding context may then stay
 * open (holding the slot) to go on from where this fetch ended, and a
 * fetch that fills up inside a transaction may keep the rest of that
 * transaction's rows for the next one (see Spool in table_source_int.h).
 */
/*
 * The end of the WAL inserted so far: where a fetch can read up to, which
 * the insert position is not when the last record ended at a page boundary
 * (it is then past the next page's header).
 */
extern XLogRecPtr table_wal_inserted_end(void);

extern void table_fetch(const char *slot_name, Oid table, int32 query_id,
						TransactionId snapshot_xid, XLogRecPtr snapshot_lsn, TupleDesc desc, int nmetadata, const AttrNumber *attnums, int nattnums,
						TablePosition start, const TablePosition *upto,
						int max_records, XLogRecPtr confirm_upto,
						bool may_keep, TableFetch *out);
extern bool table_fetch_resumes(const char *slot_name, Oid table, int32 query_id,
								TablePosition next, int max_records);

/*
 * table_fetch_release
 *		Close the decoding context a fetch kept open for the next one (see
 *		table_fetch.c), releasing the slot: at the end of run_available,
 *		when a worker stops.
 */
extern void table_fetch_release(void);

/*
 * source_hold_start: before reading the slot's confirmed position as a new
 * query's start (create_query, reset_query); held until the transaction
 * ends.  source_confirm_begin / source_confirm_end: around computing how
 * far the slot may be confirmed and confirming it; begin returns false
 * (then do not confirm) while a query's start is being set.
 */
extern void source_hold_start(int32 source_id);
extern bool source_confirm_begin(int32 source_id);
extern void source_confirm_end(int32 source_id);

/*
 * source_slot_invalidated
 *		Did PostgreSQL invalidate the slot (max_slot_wal_keep_size)?  Its
 *		queries then fail with SWT01 until reset_query replaces it.
 *
 * source_slot_replace_invalidated
 *		For reset_query, before its transaction's first write: if the
 *		source's slot is invalidated, create a new one (with the privilege
 *		creating a source takes), record it as the source's, and drop the
 *		old one at commit; WARNING that the changes between the two are lost
 *		to the queries that had not read them.  Every reader of the source
 *		follows the new slot from its next fetch.
 */
extern bool source_slot_invalidated(const char *slot_name);
extern void source_slot_replace_invalidated(int32 source_id, const char *source_name,
											const char *slot_name);

/* Is the slot held by another backend right now? */
extern bool source_slot_in_use(const char *slot_name);

/*
 * source_slot_advance
 *		Confirm the slot up to the current end of WAL without reading rows:
 *		when no query reads the source any more, nothing is kept for it.
 */
extern void source_slot_advance(const char *slot_name, int32 source_id);

/*
 * source_slots_check_retention
 *		For the launcher's starter, in each database every round (30
 *		seconds), inside SPI: for each table source whose slot retains more
 *		WAL than streamwin.retained_wal_warning (MB; -1: never), a WARNING in
 *		the server log and in streamwin.queries.last_error of the source's
 *		queries that are not failing (never their state), at once when it
 *		passes the threshold, then at most every 5 minutes while over it
 *		(source_catalog.wal_warned_at).  Its own errors are logged, never
 *		raised.
 */
extern int	streamwin_retained_wal_warning;
extern void source_slots_check_retention(void);

/*
 * source_slots_try_lock / source_slots_reap
 *		For the launcher's starter: drop the slots of this database that no
 *		table source owns any more (known: the owned slot names, NIL if the
 *		extension is not installed).  Take the lock (false: a table source
 *		is being created; reap at another time), then read the names, then
 *		reap, in one transaction.
 */
extern bool source_slots_try_lock(void);
extern void source_slots_reap(List *known);

#endif							/* STREAMWIN_TABLE_SOURCE_H */
