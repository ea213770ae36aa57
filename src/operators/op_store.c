/*-------------------------------------------------------------------------
 *
 * op_store.c
 *	  A state store held by an operator, in memory or on its table (see
 *	  op_store.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "op_store.h"

/* Is the table without indexes, as a store needs it? */
static bool
table_unindexed(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		unindexed = RelationGetIndexList(rel) == NIL;

	table_close(rel, AccessShareLock);
	return unindexed;
}

/* The indexes the SQL statements need on the table, unless they are there. */
static void
held_store_index(HeldStore *h, BatchState *b)
{
	if (!table_unindexed(h->table))
		return;
	for (int i = 0; i < (int) lengthof(h->index); i++)
		if (h->index[i] != NUM_STATEMENTS && b->runner->plans[h->index[i]] != NULL)
			runner_run_indexes(b->runner, h->index[i]);
}

void
held_store_init(HeldStore *h, QueryRunner *r, const StorePlan *plan, Oid table, Oid checkpoint,
				const char *what, bool plural, const char *table_name,
				QueryStatement index0, QueryStatement index1, QueryStatement unindex)
{
	memset(h, 0, sizeof(HeldStore));
	if (plan != NULL)
		h->store = store_create(plan, table, checkpoint, r->cxt);
	h->store_only = plan != NULL && plan->rows_partial >= 0;
	h->what = what;
	h->plural = plural;
	h->table_name = table_name;
	h->table = table;
	h->index[0] = index0;
	h->index[1] = index1;
	h->unindex = unindex;
}

/*
 * Run the batch on the store, loaded from its table if it cannot vouch for
 * what it holds; if it does not fit in memory, on its table.
 */
static void
held_store_load(HeldStore *h, BatchState *b)
{
	if (!store_begin(h->store, b->catalog_xmin))
	{
		if (h->store_only)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("streamwin: the %s of query \"%s\" %s not fit in streamwin.state_memory (%d kB)",
							h->what, b->query->name, h->plural ? "do" : "does", streamwin_state_memory),
					 errdetail("A query over a changelog source runs on its state in memory only: its groups leave when their rows are all retracted."),
					 errhint("Raise streamwin.state_memory (ALTER SYSTEM SET streamwin.state_memory = ...; SELECT pg_reload_conf()); the batch runs again, nothing is lost.")));
		if (!h->table_mode)
			ereport(LOG,
					(errmsg("streamwin: the %s of query \"%s\" %s not fit in streamwin.state_memory (%d kB); it runs on its %s",
							h->what, b->query->name, h->plural ? "do" : "does", streamwin_state_memory,
							h->table_name)));
		h->table_mode = true;
		h->table_mode_batches = 0;
		held_store_index(h, b);
		h->state = HELD_TABLE;
		return;
	}

	/*
	 * A store whose batches may run cold keeps its table's indexes (it writes
	 * them with its rows) for the next cold batch; the others do without.
	 */
	if (!h->cold_allowed && !table_unindexed(h->table))
		runner_run_indexes(b->runner, h->unindex);
	if (h->table_mode)
		ereport(LOG,
				(errmsg("streamwin: the %s of query \"%s\" %s in memory again",
						h->what, b->query->name, h->plural ? "fit" : "fits")));
	h->table_mode = false;
	h->cold_rows = 0;
	h->active = true;
	h->state = HELD_STORE;
}

void
held_store_begin(HeldStore *h, BatchState *b)
{
	h->active = false;
	h->state = HELD_TABLE;
	if (h->store == NULL)
		return;
	if (h->table_mode && ++h->table_mode_batches % 100 != 0)
	{
		/*
		 * The index may be gone since this runner made it: with the batch
		 * that made it, rolled back, or dropped by another session's store.
		 */
		held_store_index(h, b);
		return;
	}

	/*
	 * A replay after a crash loads: it restarts from a checkpoint, and the
	 * batches it replays are as many as run since.  So does a store in table
	 * mode trying its memory again: a cold batch would not try.
	 */
	if (h->cold_allowed && !h->table_mode && !b->replay &&
		!store_vouches(h->store, b->catalog_xmin))
	{
		h->state = HELD_PENDING;
		return;
	}
	held_store_load(h, b);
}

/*
 * A cold batch costs about an index probe per row (nrows), where loading
 * reads every page of the table, each with many rows: the batch runs cold
 * while the rows of this runner's cold batches, its own included, are
 * fewer than the table's pages.  A runner that goes on with small batches
 * so loads once it has probed about as much as a load reads.
 */
bool
held_store_ready(HeldStore *h, BatchState *b, int64 nrows)
{
	Relation	rel;
	BlockNumber pages;

	if (h->state != HELD_PENDING)
		return h->active;
	rel = table_open(h->table, AccessShareLock);
	pages = RelationGetNumberOfBlocks(rel);
	table_close(rel, AccessShareLock);
	if (h->cold_rows + nrows >= (int64) pages)
	{
		held_store_load(h, b);
		return h->active;
	}

	/*
	 * What the store holds is stale: let it go.  The indexes are made once
	 * (a first cold batch after a store ran without them reads the table to
	 * make them); the store keeps them from then on.
	 */
	store_invalidate(h->store);
	held_store_index(h, b);
	h->cold_rows += nrows;
	h->state = HELD_COLD;
	elog(DEBUG1, "streamwin: query \"%s\" runs a batch of " INT64_FORMAT " rows on its %s of %u pages, without loading its %s",
		 b->query->name, nrows, h->table_name, pages, h->what);
	return false;
}

bool
held_store_defers_checkpoint(HeldStore *h)
{
	return h->state == HELD_PENDING || h->state == HELD_COLD;
}

void
held_store_end(HeldStore *h, TransactionId catalog_xmin)
{
	if (h->active)
		store_end(h->store, catalog_xmin);
	h->active = false;
	h->state = HELD_IDLE;
}

void
held_store_invalidate(HeldStore *h)
{
	if (h->store != NULL)
		store_invalidate(h->store);
	h->active = false;
	h->state = HELD_IDLE;
	h->cold_rows = 0;
}
