/*-------------------------------------------------------------------------
 *
 * table_source_int.h
 *	  What the files of table sources share, and only they:
 *
 *	table_plugin.c	streamwin's logical decoding output plugin: its
 *					callbacks copy each inserted row of the table straight
 *					into the fetch in progress (or the spool)
 *	table_slot.c	the replication slot of each source: creating,
 *					acquiring, confirming, dropping, reaping, and the locks
 *					that order those
 *	table_fetch.c	reading a batch: a decoding pass over the WAL, the
 *					decoding context kept open between fetches, the spool
 *	table_snapshot.c	a changelog query's start: the table's rows written
 *					into the WAL as messages the plugin delivers as inserts
 *
 * Why streamwin is its own output plugin rather than reading test_decoding
 * or pgoutput through pg_logical_slot_peek_changes(): the rows are copied
 * out of the reorder buffer straight into the source's row type, so a row
 * costs one tuple copy instead of text output, a tuplestore and parsing
 * again; the plugin skips other tables' changes without formatting them;
 * and the fetch can stop at a batch boundary inside the WAL stream.
 *
 * The plugin is only ever driven by table_fetch() in the same process:
 * its callbacks write into the fetch in progress, which decode_pass hands
 * them as the decoding context's output_plugin_private (decoding runs
 * synchronously on this backend's stack).  A walsender or
 * pg_logical_slot_get_changes() on a streamwin slot is refused (while no
 * fetch decodes, decoding_for_fetch is false), so reading the slot cannot
 * move its position behind streamwin's back.  pg_replication_slot_advance()
 * loads no output plugin and can (a role with REPLICATION may run it): the
 * next fetch then finds the changes it needs gone, and says so
 * (ERRCODE_TABLE_POSITION_LOST).
 *
 * The files call one another one way: table_fetch.c calls down into
 * table_plugin.c (the callbacks it hands the decoding, the spool) and
 * table_slot.c (acquiring and confirming the slot); neither calls back up.
 * Each cleans up what it owns at abort with a transaction callback of its
 * own: table_slot.c the slot it creates or drops, table_fetch.c a kept
 * decoding context.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_TABLE_SOURCE_INT_H
#define STREAMWIN_TABLE_SOURCE_INT_H

#include "access/xlogreader.h"
#include "replication/logical.h"
#include "utils/tuplestore.h"

#include "table_source.h"

/*
 * A fetch in progress, on table_fetch's stack: what the plugin's callbacks
 * write into (the decoding context's output_plugin_private).
 */
typedef struct FetchState
{
	Oid			table;
	int32		query_id;		/* whose snapshot rows to deliver */
	TransactionId snapshot_xid; /* the transaction that wrote them, if known */
	XLogRecPtr	snapshot_lsn;	/* where the last of them starts: the query's
								 * start */
	bool		snapshot_ended; /* this transaction's snapshot rows ended */
	TupleDesc	desc;			/* the source's row type */
	TablePosition start;
	const TablePosition *upto;
	int			max_records;
	bool		may_keep;		/* the caller fetches again at once */
	MemoryContext cxt;			/* where rows go */
	TableFetch *out;
	int			capacity;
	bool		done;			/* stop reading after this transaction */
	bool		stopping;		/* decoding stopped by an error of ours */
	bool		spooling;		/* the batch is full: the rest of this
								 * transaction goes to the spool */
	int64		txn_index;		/* rows of the table seen in this txn: its
								 * inserts, or of a changelog source every
								 * row it delivers (an update's two) */
	AttrNumber	change_attno;	/* a changelog source's CHANGE_COLUMN, or 0:
								 * the source takes inserts alone */
	int			nmetadata;		/* desc's metadata columns, after the
								 * table's */
	const AttrNumber *attnums;	/* a changelog source's table attribute of
								 * each of desc's table columns when it was
								 * created, or NULL (not recorded) */
	int			nattnums;
	/*
	 * column map from the table's (historic) row type to desc, built from
	 * map_from as of relcache generation map_generation (table_plugin.c)
	 */
	TupleDesc	map_from;
	uint64		map_generation;
	int		   *map;			/* desc column i <- table attribute map[i], -1 */
	bool		map_identity;	/* desc's first columns are the table's, as
								 * they are, and no other comes from it */
	Datum	   *values;
	bool	   *nulls;
	Datum	   *src_values;
	bool	   *src_nulls;
	Datum	   *old_values;		/* an update's old version, deformed for the
								 * TOASTed values its new one left unchanged */
	bool	   *old_nulls;
	int			src_natts;
	MemoryContext row_cxt;		/* a row's detoasted values, until it is
								 * formed (form_row) */
} FetchState;

/*
 * The rest of a transaction larger than a batch, for the batches that
 * follow.  Without it, each of them would decode the whole transaction
 * again (the reorder buffer only replays a transaction once it has read its
 * commit) and skip the rows already processed: a bulk load of n rows would
 * cost n * n / max_records_per_batch rows decoded.  Where the next fetch
 * will most likely start there (a worker, run_available: may_keep), the
 * batch that fills up inside a transaction lets the replay go on to its
 * commit and puts the remaining rows, in the source's row type, into a
 * tuplestore (in memory up to work_mem, then a temporary file), and the
 * next fetches that start exactly there take their rows from it, without
 * the slot.  A fetch that starts anywhere else (a failed batch, a replay,
 * another query) discards it.
 */
typedef struct Spool
{
	char		slot_name[NAMEDATALEN];
	Oid			table;
	int32		query_id;		/* a snapshot's rows are one query's */
	XLogRecPtr	txn_lsn;		/* the transaction's commit: its rows' lsn */
	int64		next_index;		/* the index of the next row in `rows` */
	int64		left;			/* rows in `rows` not taken yet */
	TimestampTz commit_time;
	TablePosition after;		/* the position after the transaction */

	/*
	 * Updates, deletes and truncates of the table after the cut, each counted
	 * (as when the transaction is decoded again) by the batch that holds the
	 * last row inserted before it: a batch that takes rows up to index n
	 * takes the counts of changes with `after` below n.
	 */
	struct SpoolChanges
	{
		int64		after;		/* index of the last insert before them */
		int64		n[3];		/* updates, deletes, truncates */
	}		   *changes;
	int			nchanges;
	int			maxchanges;
	int			next_change;
	/* a changelog source's: the kind (ChangeKind) of each spooled row */
	char	   *kinds;
	int64		nkinds;
	int64		maxkinds;
	int64		next_kind;
	Tuplestorestate *rows;
	MemoryContext cxt;
} Spool;

extern Spool *spool;

/* table_plugin.c */
extern bool decoding_for_fetch;
extern void table_column_map(TupleDesc from, TupleDesc to, int ntable, Oid table, int *map);

/*
 * table_changelog_columns_check
 *		A changelog source's rows need every column of the table it was
 *		created with (those of its row type `to` before its nmetadata
 *		metadata columns and its change column): an error naming the first
 *		that map (table_column_map's, from the table's row type `from`)
 *		finds no longer there, or, where attnums records the attribute each
 *		was (table_source_attnums), finds in another attribute of the same
 *		name (the column was dropped and added again).
 */
extern void table_changelog_columns_check(TupleDesc from, TupleDesc to, const int *map, int nmetadata,
										  const AttrNumber *attnums, int nattnums, Oid table);
extern void spool_discard(void);
extern void append_row(FetchState *st, HeapTuple row, XLogRecPtr lsn, int64 index,
					   TimestampTz commit_time, char kind);
extern void no_prepare_write(LogicalDecodingContext *ctx, XLogRecPtr lsn,
							 TransactionId xid, bool last_write);
extern void no_write(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid,
					 bool last_write);

/* table_slot.c */

/* Decoding reads this server's own WAL files, as logicalfuncs.c does. */
#define LOCAL_WAL_READER \
	XL_ROUTINE(.page_read = read_local_xlog_page, \
			   .segment_open = wal_segment_open, \
			   .segment_close = wal_segment_close)

extern int	allow_own_plugin(void);
extern void restore_plugin_list(int level);
extern bool slot_is_ours(const char *slot_name);
extern bool slot_acquire(const char *slot_name);

/* Raise SWT01 if PostgreSQL invalidated the slot this backend holds. */
extern void slot_check_valid(XLogRecPtr start_lsn);
extern void slot_confirm(XLogRecPtr lsn);

/* table_snapshot.c */

/*
 * A snapshot row's logical message: the prefix, then its query's id, then
 * the row's heap tuple body in the source's row type.  table_snapshot.c
 * writes them, table_plugin.c reads them.  After the last row, a message
 * of TABLE_SNAPSHOT_END_PREFIX (its query's id alone) ends them: the
 * transaction that writes them is the user's (create_query, reset_query),
 * which may write messages of that tag of its own after streamwin's, of
 * any bytes (the rows are taken as they are: a forged one could point into
 * another table's TOAST, or past its own end).  Nothing the user runs can
 * come between the query's start and that end.
 */
#define TABLE_SNAPSHOT_PREFIX "streamwin.snapshot"
#define TABLE_SNAPSHOT_END_PREFIX "streamwin.snapshot_end"
typedef struct SnapshotMessageHeader
{
	int32		query_id;
} SnapshotMessageHeader;

/*
 * table_snapshot_write
 *		Lock `table` in SHARE mode and write its rows, in the row type of the
 *		changelog source's relation (the table's columns, nmetadata metadata
 *		columns, the change column), into the WAL as this transaction's
 *		messages for query_id.  Returns the query's start: the WAL position
 *		before them, after every change of the table committed so far.
 */
extern XLogRecPtr table_snapshot_write(Oid table, Oid source_relation, int nmetadata,
										const AttrNumber *attnums, int nattnums, int32 query_id);

/* table_fetch.c */
extern void decode_pass(const char *slot_name, TablePosition start, FetchState *st,
						XLogRecPtr confirm_upto, XLogRecPtr *end_of_wal, XLogRecPtr *end_read);

#endif							/* STREAMWIN_TABLE_SOURCE_INT_H */
