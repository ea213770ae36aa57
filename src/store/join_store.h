/*-------------------------------------------------------------------------
 *
 * join_store.h
 *	  A stream-stream join's state in memory (join_store.c): each side's
 *	  rows that can still match, hashed by the join's keys, in the order of
 *	  their event time for eviction, and where each is in its join table.
 *
 * The join tables (UNLOGGED, without indexes while the store runs: a
 * batch that runs on them without the store makes them, op_store.h) stay
 * the persisted form: the store writes a side's new rows into its table
 * with heap_multi_insert and deletes the rows it evicts by their location,
 * so that the tables hold what memory holds, at every commit, for
 * checkpoints (which read the tables) and for the next session.  Batches
 * that share a transaction may keep their rows back until it ends
 * (join_store_writer, join_store_sync): a row that comes and goes within
 * them is never written, and a checkpoint among them gets the rows kept
 * back from memory (join_store_checkpoint_kept).  What memory holds is vouched for as an
 * aggregation store's is (state_store.h): only if this backend's last
 * batch of the query ended, wrote the query's catalog row last, and the
 * tables were not rewritten since; else the store loads both tables
 * again.
 *
 * The batch's statements join the new rows of a side with the rows of the
 * other side's state that share a key with them: the store finds those in
 * C (join_store_candidates), or the pairs themselves (join_store_pairs),
 * and the statements decide the rest of the condition, so the pairs are
 * those the tables would give.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_JOIN_STORE_H
#define STREAMWIN_JOIN_STORE_H

#include "access/tupdesc.h"
#include "tcop/dest.h"

#include "batch_scope.h"

#define JOIN_STORE_MAX_KEYS 8

/* What a join store keeps, as the join's plan says (join.h). */
typedef struct JoinStoreSpec
{
	int			nkeys;
	AttrNumber	key_attno[2][JOIN_STORE_MAX_KEYS];	/* each side's key columns */
	Oid			key_op[JOIN_STORE_MAX_KEYS];	/* the equalities, */
	Oid			key_collation[JOIN_STORE_MAX_KEYS];
	int			key_left[JOIN_STORE_MAX_KEYS];	/* the side of their left
												 * operands */
	Oid			table[2];		/* each side's join table: the source's
								 * columns first, */
	AttrNumber	time_attno[2];	/* then its event time */
	AttrNumber	batch_attno[2];	/* and the batch that wrote the row (0:
								 * none) */
	bool		evicted[2];		/* does the range bound how long a row stays */
	TupleDesc	desc[2];		/* each side's source row type */
} JoinStoreSpec;

typedef struct JoinStore JoinStore;

/* An empty store, in memory under parent. */
extern JoinStore *join_store_create(const JoinStoreSpec *spec, MemoryContext parent);

/*
 * join_store_begin
 *		At the start of a batch: true if the store holds the tables' rows
 *		(vouched for, or loaded now); false, and empty, if they do not fit in
 *		streamwin.state_memory.
 */
extern bool join_store_begin(JoinStore *js, TransactionId catalog_xmin);

/* Would join_store_begin run the batch on what the store holds, without loading? */
extern bool join_store_vouches(JoinStore *js, TransactionId catalog_xmin);

/* The batch that began ended: catalog_xmin wrote the catalog row. */
extern void join_store_end(JoinStore *js, TransactionId catalog_xmin);

/* What memory holds is not the tables' state (they were rewritten). */
extern void join_store_invalidate(JoinStore *js);

/*
 * join_store_candidates
 *		The rows of side's state that share a key with any row of probe (the
 *		other side's new rows), each once, as rows of a batch of source id,
 *		in CurrentMemoryContext (the rows themselves stay in the store's), or
 *		NULL if none.
 */
extern BatchInput *join_store_candidates(JoinStore *js, int side, BatchInput *probe, int32 id);

/*
 * join_store_pairs
 *		The batch's pairs of rows with equal keys (join.h's JOIN_PAIRS): side
 *		0's new rows with side 1's new rows and state, and side 0's state
 *		with side 1's new rows, each pair as one row of side 0's columns
 *		followed by side 1's (the values shared with the rows, by
 *		reference), as rows of a batch of source id, made a chunk at a time
 *		as they are read (BatchInput.refill), in CurrentMemoryContext.
 *		The state is the store's own rows where stored (it runs the batch),
 *		else the candidates state0 and state1 (from the join tables).  What
 *		else the join's condition says of a pair the statements decide.
 */
extern BatchInput *join_store_pairs(JoinStore *js, BatchInput *new0, BatchInput *new1,
									bool stored, BatchInput *state0, BatchInput *state1,
									int32 id);

/*
 * join_store_writer
 *		A receiver of rows of side's join table (the statement that makes
 *		them from the side's new rows of batch batch_id): each is kept in
 *		memory and written into the table, but for those the batch's
 *		eviction will take (an event time before cutoff; DT_NOBEGIN: none),
 *		which go nowhere.  With keep_back, the rows are written by
 *		join_store_sync instead, if they are still held then: the caller
 *		promises that it runs before anything but a checkpoint reads the
 *		tables (join_store_checkpoint_kept), and before the transaction
 *		commits.  join_store_writer_kept says how many were
 *		kept.  Destroy it after the statement.
 */
extern DestReceiver *join_store_writer(JoinStore *js, int side, TimestampTz cutoff,
									   int64 batch_id, bool keep_back);
extern uint64 join_store_writer_kept(DestReceiver *dest);

/* Write the rows kept back that the store still holds into their tables. */
extern void join_store_sync(JoinStore *js);

/*
 * join_store_checkpoint_kept
 *		Write side's rows kept back, of the batches after since_batch, into
 *		its checkpoint table logged (the join table's columns), and keep them
 *		back: a checkpoint taken between batches that share a transaction
 *		needs no sync of the join tables.  Each row carries the batch that
 *		added it, as join_store_sync writes it later, so that the rows of
 *		batches after since_batch are each copied once, from memory or from
 *		the table.  Inside a batch.
 */
extern void join_store_checkpoint_kept(JoinStore *js, int side, Oid logged, int64 since_batch);

/* The bytes of side's rows kept back (what its table lacks of its state). */
extern int64 join_store_kept_bytes(JoinStore *js, int side);

/*
 * Take side's rows whose event time is before cutoff out of memory, and
 * out of the table those written there; returns how many.
 */
extern uint64 join_store_evict(JoinStore *js, int side, TimestampTz cutoff);

/* How many rows side holds. */
extern int64 join_store_rows(JoinStore *js, int side);

#endif							/* STREAMWIN_JOIN_STORE_H */
