/*-------------------------------------------------------------------------
 *
 * state_store.h
 *	  The open groups of an aggregation, in the worker's memory and in its
 *	  UNLOGGED state table (store_*.c; state_store_int.h lists them).
 *
 * A store holds one entry per open group (window start and group keys)
 * with each aggregate's partial state: plain values for count, sum, min,
 * max, bool_and/or; transition states (bytea) for aggregates with a
 * combine function; sorted sets for DISTINCT aggregates.  A batch
 * aggregates its own rows with the executor (the compiled partial query),
 * and the store merges each of the batch's groups into its entry in C with
 * the aggregates' own combine functions, so it knows exactly which groups
 * changed, which are new and which a watermark closes.
 *
 * A store of dedup keys (plan.dedup) holds one entry per key seen and not
 * yet forgotten, with the event time of its first row, and keeps its keys
 * by event time too: a batch's rows make entries of the keys new to it,
 * and a watermark forgets the keys it passes.
 *
 * A store of an upsert source's rows (partials all MERGE_LAST) holds one
 * entry per key with the other columns of the key's last row, replaced
 * by each new version and gone with the key's deletion (store_upsert).
 *
 * A session window is a group too, keyed by its start; the store also
 * keeps each key's sessions in order and every session by its end.  A
 * batch's own sessions (gaps and islands over its rows, by the executor)
 * merge in C with the stored sessions of their key that they overlap, so
 * an event that bridges two sessions joins them into one, and a session
 * closes when the watermark passes its end.
 *
 * The state table is the store's persisted form: at every commit it holds
 * exactly the open groups (batches that share one transaction keep the
 * rows they change back until store_sync).  Each entry knows the location
 * (TID) of its row there, of its row in the logged checkpoint table, and
 * of its row in the result table as last written; the store writes only
 * the rows of changed groups, by location, with no index probe and no ON
 * CONFLICT.  So a batch costs its rows plus the groups it changes, and a
 * checkpoint the groups changed since the one before.  Nothing in a batch
 * scans the whole state.
 *
 * Memory and tables stay consistent: the store remembers which transaction
 * last wrote the query's catalog row (every batch does, as do reset_query
 * and recovery); whenever that is not the store's own last batch (a batch
 * that failed or was rolled back, another session's batch, a reset), the
 * store is loaded again from the state table, with one scan.
 *
 * Beyond streamwin.state_memory the store lets go of its entries and the
 * query runs on the state table itself, with the compiled SQL statements
 * (slower, the same results), until the state fits again.  So does a batch
 * that is small beside a state the store has not loaded (op_store.h): it
 * reaches the groups it touches through the table's indexes, which the
 * store keeps up to date from then on.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_STATE_STORE_H
#define STREAMWIN_STATE_STORE_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"

/* How a partial aggregate merges with another of its group. */
typedef enum MergeKind
{
	MERGE_ADD,					/* count: a + b */
	MERGE_SUM,					/* sum: a + b, NULL meaning no input yet */
	MERGE_MIN,
	MERGE_MAX,
	MERGE_AND,
	MERGE_OR,
	MERGE_STATE,				/* any other: its transition state, as bytea
								 * (aggregate_state.c) */
	MERGE_UNION,				/* agg(DISTINCT x): the sorted array of the
								 * distinct values of x (distinct_set.c) */
	MERGE_COUNTED,				/* over a changelog, min, max and
								 * agg(DISTINCT x): each value of x with its
								 * count of rows (change_set.c) */
	MERGE_FIRST,				/* a dedup key's: the value it was made with */
	MERGE_LAST					/* an upsert key's row: its last version
								 * (store_upsert) */
} MergeKind;

extern const char *merge_kind_name(MergeKind m);

/* streamwin.state_memory (kB): the memory a store may use */
extern int	streamwin_state_memory;

/* streamwin.store_merge: how a store takes a batch (store_merge_rows) */
typedef enum StoreMerge
{
	STORE_MERGE_AUTO,			/* as the last batch suggests */
	STORE_MERGE_GROUPS,			/* always its groups */
	STORE_MERGE_ROWS			/* its rows, where the plan has them */
} StoreMerge;

extern int	streamwin_store_merge;

typedef struct StateStore StateStore;

/*
 * What the compiler records of an aggregation for its store, in the plan
 * under "store" (store_plan_json), read back by store_create.
 */
typedef struct StorePlan
{
	int			nkeys;			/* group key columns, window_start first */
	bool		windowed;
	bool		session;		/* session windows: window_size_us is the gap */
	bool		dedup;			/* dedup keys: keys, event time, then the
								 * partials batch_ord and batch_id (FIRST) */
	int64		window_size_us;
	int			panes;			/* hop windows from panes: the windows each of
								 * the batch's groups (a pane) merges into,
								 * starting at its start and every slide_us
								 * before; else 0 */
	int64		slide_us;
	int			npartials;
	MergeKind  *merge;			/* per partial column */
	char	  **aggregate;		/* MERGE_STATE: regprocedure text, else NULL */
	char	  **collation;		/* MERGE_STATE: its input collation, as
								 * regcollation text; else, or compiled
								 * before it was recorded, NULL */
	int			rows_partial;	/* over a changelog: the partial that counts a
								 * group's rows, which leaves at 0; else -1 */
} StorePlan;

extern void store_plan_json(const StorePlan *plan, StringInfo buf);
extern StorePlan *store_plan_read(Jsonb *plan, const char *member);

/*
 * store_create
 *		A store for the query whose state table is state_table and
 *		checkpoint table checkpoint_table, in a new child of parent.  The
 *		store starts empty and not loaded.
 */
extern StateStore *store_create(const StorePlan *plan, Oid state_table, Oid checkpoint_table,
								MemoryContext parent);
extern void store_free(StateStore *s);

/*
 * store_begin
 *		At the start of a batch, with the xmin of the query's catalog row:
 *		loads the store from the state table when it cannot vouch for what
 *		it holds.  Returns false if the state does not fit in
 *		streamwin.state_memory (the store is then empty and unloaded).
 */
extern bool store_begin(StateStore *s, TransactionId catalog_xmin);

/*
 * store_vouches
 *		Would store_begin run the batch on what the store holds, without
 *		loading?
 */
extern bool store_vouches(StateStore *s, TransactionId catalog_xmin);

/* Forget everything: the next store_begin loads from the tables. */
extern void store_invalidate(StateStore *s);

/*
 * The batch's groups: a DestReceiver merging each row (window_start, keys,
 * partials; a session store's rows end with the session's window_end).
 * Or, rows, the batch's rows (STMT_STORE_BATCH_ROWS), each folded into its
 * group.  batch_rows: the rows of the batch, for store_merge_rows (0: a
 * merge that is not the batch's own).
 */
extern struct _DestReceiver *store_merge_receiver(StateStore *s, bool rows, int64 batch_rows);

/*
 * store_closed_through
 *		Windows ending at or before closed (has: any) were closed by the
 *		batches before: over a changelog, the batch's rows of such a window
 *		come too late to change it, and the merge drops them, counted
 *		(store_late_changes).  A changelog's rows are not dropped by their
 *		own event time: a retraction of a row added on time must reach its
 *		window while it is open, and only the window decides.
 */
extern void store_closed_through(StateStore *s, bool has, TimestampTz closed);

/*
 * The rows added and retracted that the merges since the last call dropped
 * into closed windows (net per group of the batch); the counts restart.
 */
extern void store_late_changes(StateStore *s, int64 *added, int64 *retracted);

/*
 * Whether the next batch's rows go to the store as rows, not groups.
 * pairs: they are a join's pairs (see store_merge_rows).
 */
extern bool store_merge_rows(StateStore *s, bool pairs);

/*
 * A dedup store's batch: a DestReceiver of the rows (keys..., event time,
 * position in the batch) that makes an entry of each key the store has not
 * seen, from its first row, as seen first by batch batch_id, and sets
 * keep[position] for that row (keep: nrows long, all false at first).
 */
extern struct _DestReceiver *store_dedup_receiver(StateStore *s, int64 batch_id, bool *keep,
												  int nrows);

/*
 * store_upsert
 *		An upsert store's key (keys, nkeys values) takes a new row (values,
 *		npartials), or with values NULL loses its row.  Returns whether the
 *		key had a row, whose values it copies into old_values/old_nulls and
 *		whose key, as that row gave it, into old_keys/old_key_nulls (in
 *		CurrentMemoryContext) first.  A new row keeps its key as it gives it
 *		(1.00 after 1.0).  In a batch of the store; the state table follows
 *		at store_write_changed.
 */
extern bool store_upsert(StateStore *s, const Datum *keys, const bool *key_nulls,
						 const Datum *values, const bool *nulls,
						 Datum *old_values, bool *old_nulls,
						 Datum *old_keys, bool *old_key_nulls);

/*
 * store_upsert_truncate
 *		Every key of an upsert store loses its row: visit gets each key
 *		(nkeys values) and the row it had (npartials values, copied into
 *		CurrentMemoryContext), before the key goes.  Returns how many keys
 *		there were.  In a batch of the store, as store_upsert.
 */
typedef void (*StoreUpsertVisit) (void *arg, const Datum *keys, const bool *key_nulls,
								  const Datum *values, const bool *nulls);
extern int64 store_upsert_truncate(StateStore *s, StoreUpsertVisit visit, void *arg);

/*
 * store_write_changed
 *		Write the rows of the groups the batch changed into the state table,
 *		or, keep_back (batches that share one transaction), mark them for
 *		store_sync: a group that changes again in the next batches is
 *		written once, and one that leaves the store before is not written.
 */
extern void store_write_changed(StateStore *s, bool keep_back);

/*
 * store_sync
 *		Write the state rows that store_write_changed kept back, before
 *		anything reads the state table: the query on its table (the store
 *		no longer fits in memory), the end of the batches.  (Its checkpoint
 *		is written from memory, kept rows or not.)
 */
extern void store_sync(StateStore *s);

/*
 * The groups a result statement writes, chosen before it runs and returned
 * by streamwin.store_rows(query_id, which).  STORE_ROWS_INSERT: changed
 * groups new to the result; STORE_ROWS_UPDATE: changed groups whose result
 * row's location is known; STORE_ROWS_UPSERT: the other changed groups;
 * STORE_ROWS_CLOSED: groups of the windows a watermark closed;
 * STORE_ROWS_GONE: sessions merged into another, or that start earlier
 * now, and over a changelog the groups whose rows were all retracted,
 * under the (window_start, keys) their result row may have;
 * STORE_ROWS_ALL: every group.
 */
typedef enum StoreRows
{
	STORE_ROWS_INSERT,
	STORE_ROWS_UPDATE,
	STORE_ROWS_UPSERT,
	STORE_ROWS_CLOSED,
	STORE_ROWS_GONE,
	STORE_ROWS_ALL
} StoreRows;

/*
 * Split the changed groups into INSERT, UPDATE and UPSERT (replay: all
 * UPSERT, since the result may hold their rows already).
 */
extern void store_classify_changed(StateStore *s, bool replay, bool new_rows_allowed);

/* The groups of `which` are written (by a statement that says not where). */
extern void store_rows_done(StateStore *s, StoreRows which);

/* Move every group of `from` to `to` (e.g. INSERT to UPSERT after a conflict). */
extern void store_move_rows(StateStore *s, StoreRows from, StoreRows to);

/*
 * store_prune_result_pages
 *		Before the rows of `which` are updated where the store knows them to
 *		be (in result table relid): prune the dead versions on their pages
 *		that no snapshot can see any longer, as a read of the page would, so
 *		that the new versions fit beside the old (heap-only tuples, which no
 *		index entry follows).  An update by location reads no page first.
 */
extern void store_prune_result_pages(StateStore *s, StoreRows which, Oid relid);
extern int64 store_count_rows(StateStore *s, StoreRows which);

/*
 * store_rows_written
 *		A result statement over `which` returned (window_start, keys...,
 *		ctid) for the rows it wrote: remember where each group's row is.
 *		Groups of `which` it did not return go to `unwritten` (e.g. rows
 *		whose location was stale), unless unwritten is `which`.
 */
extern void store_rows_written(StateStore *s, StoreRows which, StoreRows unwritten);

/*
 * A reading of streamwin.store_rows(query_id, which): the rows of the
 * groups it names, of the store the batch's scope holds (batch_scope.h),
 * in the columns of want (see streamwin_store_rows), read where they are.  The function and the custom scan that replaces its
 * function scan (source_scan.c) read them so.
 */
typedef struct StoreRowsScan StoreRowsScan;

extern StoreRowsScan *store_rows_scan_begin(int32 query_id, const char *which, TupleDesc want);
extern bool store_rows_scan_next(StoreRowsScan *scan, Datum *values, bool *nulls);
extern void store_rows_scan_restart(StoreRowsScan *scan);
extern void store_rows_scan_end(StoreRowsScan *scan);

/*
 * store_close_windows
 *		Select the groups of windows ending at or before watermark (a dedup
 *		store: the keys whose event time is before it) into
 *		STORE_ROWS_CLOSED.  Returns how many.
 */
extern int64 store_close_windows(StateStore *s, TimestampTz watermark);

/* Delete the CLOSED groups: their state rows, and from memory. */
extern void store_evict_closed(StateStore *s);

/* The number of open groups. */
extern int64 store_groups(StateStore *s);

/* Bytes of memory the store holds. */
extern Size store_memory(StateStore *s);

/*
 * store_checkpoint
 *		Bring the checkpoint table to the state as of now, writing only the
 *		groups changed since the last checkpoint and deleting the rows of
 *		groups gone since.
 */
extern void store_checkpoint(StateStore *s);

/*
 * store_end
 *		At the end of a batch (one that did nothing too): catalog_xmin is
 *		who wrote the query's catalog row last, now (the batch's own
 *		transaction, if it wrote it).
 */
extern void store_end(StateStore *s, TransactionId catalog_xmin);

#endif							/* STREAMWIN_STATE_STORE_H */
