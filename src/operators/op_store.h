/*-------------------------------------------------------------------------
 *
 * op_store.h
 *	  A state store as an operator holds it: in memory while it fits in
 *	  streamwin.state_memory, else on its table (op_store.c).
 *
 * The aggregation (op_aggregate.c) and dedup (op_dedup.c) operators keep
 * their state in a store (state_store.h).  When the state does not fit in
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
	StateStore *store;			/* or NULL: the query has none (its plan
								 * predates stores): table mode always */
	HeldState	state;
	bool		active;			/* this batch runs on the store */
	bool		cold_allowed;	/* a small batch may run on the table instead
								 * of loading (the operator's results and
								 * figures are the same either way) */
	int64		cold_rows;		/* rows of this runner's cold batches since
								 * the store last loaded */
	bool		store_only;		/* its groups leave when their rows are all
								 * retracted (over a changelog), which the
								 * SQL statements cannot do: no table mode */
	bool		table_mode;		/* it did not fit in memory: the SQL
								 * statements run on its table */
	int64		table_mode_batches; /* batches since, or since trying again */
	/* for the server log: what the store holds, whether that is a plural, */
	const char *what;
	bool		plural;
	const char *table_name;		/* and where it is kept */
	Oid			table;
	QueryStatement index[2];	/* the table's indexes for the statements
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

/* At end: a store that ran the batch ends it (see store_end). */
extern void held_store_end(HeldStore *h, TransactionId catalog_xmin);

/* The tables were rewritten: forget what the store holds. */
extern void held_store_invalidate(HeldStore *h);

#endif							/* STREAMWIN_OP_STORE_H */
