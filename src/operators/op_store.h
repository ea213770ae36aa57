/*-------------------------------------------------------------------------
 *
 * op_store.h
 *	  A state store as an operator holds it: in memory while it fits in
 *	  streamwin.state_memory, else on its table (op_store.c).
 *
 * The aggregation (op_aggregate.c), dedup (op_dedup.c) and upsert
 * (op_upsert.c) operators keep their state in a store (state_store.h), a
 * stream-stream join (op_join.c) in a join store (join_store.h); both
 * kinds are held alike.  When the state does not fit in
 * streamwin.state_memory, the query's compiled SQL statements run on the
 * store's table instead, with the indexes they need ("table mode"); every
 * 100 batches the store tries again.  The results are the same either way.
 * A query over a changelog has no table mode: a batch whose state does not
 * fit fails, and waits for more memory.
 *
 * A store that cannot vouch for what it holds (a new session, a worker
 * that just started, another session's batch since) would load its whole
 * table.  Whether it does is decided when the batch's rows are known
 * (held_store_ready): a batch small beside the table, where the store's
 * operator allows it (cold_allowed), runs on the table instead, through
 * its indexes, reading only what it touches; the rows the runner's batches
 * have run so since it last loaded count against the table too, so that a
 * runner that goes on (a worker, a loop of run_batch) loads once that pays.
 * Such a cold batch leaves its checkpoint to a later batch
 * (held_store_defers_checkpoint): a checkpoint of the table would read all
 * of it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_OP_STORE_H
#define STREAMWIN_OP_STORE_H

#include "operator.h"
#include "join_store.h"
#include "runner.h"
#include "state_store.h"

/* Where the store stands in the current batch */
typedef enum HeldState
{
	HELD_IDLE,					/* no batch */
	HELD_PENDING,				/* not decided yet: the store cannot vouch for
								 * what it holds, and the rows are not known */
	HELD_STORE,					/* the batch runs on the store */
	HELD_TABLE,					/* ... on the table (table mode, or no store) */
	HELD_COLD					/* ... on the table, being small beside it */
} HeldState;

typedef struct HeldStore
{
	/* the store, of one kind or the other */
	StateStore *store;			/* an aggregation, dedup or upsert store */
	JoinStore  *join;			/* a join store */
	/* (neither: the query's plan predates stores: table mode always) */
	HeldState	state;
	bool		active;			/* this batch runs on the store */
	bool		cold_allowed;	/* a small batch may run on the table instead
								 * of loading (the operator's results and
								 * figures are the same either way) */
	int64		cold_rows;		/* rows of this runner's cold batches since
								 * the store last loaded */
	/* rows inserted and deleted in its tables by this transaction before the
	 * batch (held_store_cold_state_rows) */
	int64		inserted_before;
	int64		deleted_before;
	bool		store_only;		/* its groups leave when their rows are all
								 * retracted (over a changelog), which the
								 * SQL statements cannot do: no table mode */
	bool		table_mode;		/* it did not fit in memory: the SQL
								 * statements run on its table */
	int64		table_mode_batches; /* batches since, or since trying again */
	/* for the server log: what the store holds, whether that is a plural, */
	const char *what;
	bool		plural;
	const char *table_name;		/* and where it is kept: */
	Oid			table;			/* its table (a join store's left side's) */
	Oid			other_table;	/* a join store's right side's (or invalid) */
	QueryStatement index[2];	/* the tables' indexes for the statements
								 * (NUM_STATEMENTS: none) */
	QueryStatement unindex;		/* which a store that never runs cold does
								 * without */
} HeldStore;

/*
 * held_store_init
 *		A store of the plan (NULL: none, table mode always) over table and
 *		its checkpoint, in the runner's memory; what it holds (for the
 *		server log) and the statements that index and unindex its table.
 */
extern void held_store_init(HeldStore *h, QueryRunner *r, const StorePlan *plan, Oid table,
							Oid checkpoint, const char *what, bool plural,
							const char *table_name, QueryStatement index0,
							QueryStatement index1, QueryStatement unindex);

/*
 * held_store_init_join
 *		A join store over the join tables of both sides, with the statements
 *		that index each side's table and unindex both.
 */
extern void held_store_init_join(HeldStore *h, JoinStore *js, const Oid *tables,
								 QueryStatement index0, QueryStatement index1,
								 QueryStatement unindex);

/*
 * held_store_begin
 *		At begin: this batch runs on the store if it vouches for what it
 *		holds; else, unless cold batches are allowed, on the store loaded
 *		from its table, or on its table if it does not fit.  With cold
 *		batches allowed, that is left to held_store_ready.
 */
extern void held_store_begin(HeldStore *h, BatchState *b);

/*
 * held_store_ready
 *		When the batch first needs its state (its rows are known): whether
 *		it runs on the store.  A pending store loads, or leaves the batch to
 *		its table if the batch's nrows are few beside the table.
 */
extern bool held_store_ready(HeldStore *h, BatchState *b, int64 nrows);

/* Does the batch run cold (so far: pending counts), leaving checkpoints? */
extern bool held_store_defers_checkpoint(HeldStore *h);

/*
 * held_store_cold_state_rows
 *		A batch that has not loaded its store (pending or cold): the rows of
 *		its tables, from the last batch's progress row and what this batch
 *		inserted and deleted, into *rows, which counting the tables would
 *		read all of.  False if that is not known (no progress row, table
 *		statistics off) or the batch runs on the store or in table mode.
 *		The query's state_rows must be the store's alone.
 */
extern bool held_store_cold_state_rows(HeldStore *h, BatchState *b, int64 *rows);

/*
 * held_store_sync
 *		The rows the store kept back from its tables (batches that share the
 *		caller's transaction, QueryRunner.one_transaction) go into them: see
 *		store_sync and join_store_sync.
 */
extern void held_store_sync(HeldStore *h);

/* At end: a store that ran the batch ends it (see store_end). */
extern void held_store_end(HeldStore *h, TransactionId catalog_xmin);

/* The tables were rewritten: forget what the store holds. */
extern void held_store_invalidate(HeldStore *h);

#endif							/* STREAMWIN_OP_STORE_H */
