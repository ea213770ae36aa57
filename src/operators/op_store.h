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
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_OP_STORE_H
#define STREAMWIN_OP_STORE_H

#include "operator.h"
#include "runner.h"
#include "state_store.h"

typedef struct HeldStore
{
	StateStore *store;			/* or NULL: the query has none (its plan
								 * predates stores): table mode always */
	bool		active;			/* this batch runs on the store */
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
	QueryStatement unindex;		/* which the store does without */
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
 *		At begin: whether this batch runs on the store (loaded from its
 *		table if it cannot vouch for what it holds), or on its table.
 */
extern bool held_store_begin(HeldStore *h, BatchState *b);

/* At end: a store that ran the batch ends it (see store_end). */
extern void held_store_end(HeldStore *h, TransactionId catalog_xmin);

/* The tables were rewritten: forget what the store holds. */
extern void held_store_invalidate(HeldStore *h);

#endif							/* STREAMWIN_OP_STORE_H */
