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
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "catalog_log.h"
#include "op_store.h"

/* --- the two kinds of store ---------------------------------------------- */

static bool
kept_begin(HeldStore *h, TransactionId catalog_xmin)
{
	return h->store != NULL ? store_begin(h->store, catalog_xmin) :
		join_store_begin(h->join, catalog_xmin);
}

static bool
kept_vouches(HeldStore *h, TransactionId catalog_xmin)
{
	return h->store != NULL ? store_vouches(h->store, catalog_xmin) :
		join_store_vouches(h->join, catalog_xmin);
}

static void
kept_end(HeldStore *h, TransactionId catalog_xmin)
{
	if (h->store != NULL)
		store_end(h->store, catalog_xmin);
	else
		join_store_end(h->join, catalog_xmin);
}

static void
kept_invalidate(HeldStore *h)
{
	if (h->store != NULL)
		store_invalidate(h->store);
	else if (h->join != NULL)
		join_store_invalidate(h->join);
}

/* --- its tables ------------------------------------------------------------ */

/* The store's tables: one, or a join's two */
static int
held_tables(HeldStore *h, Oid *tables)
{
	tables[0] = h->table;
	tables[1] = h->other_table;
	return OidIsValid(h->other_table) ? 2 : 1;
}

/*
 * Are the tables without indexes, as a store writes them at first: any of
 * them (all false), or all of them (all true)?
 */
static bool
tables_unindexed(HeldStore *h, bool all)
{
	Oid			tables[2];
	int			n = held_tables(h, tables);
	int			unindexed = 0;

	for (int i = 0; i < n; i++)
	{
		Relation	rel = table_open(tables[i], AccessShareLock);

		unindexed += RelationGetIndexList(rel) == NIL;
		table_close(rel, AccessShareLock);
	}
	return all ? unindexed == n : unindexed > 0;
}

/*
 * Can the tables' indexes be dropped without waiting?  DROP INDEX takes an
 * ACCESS EXCLUSIVE lock on each table, which waits for any lock another
 * transaction holds on it, such as pg_dump's ACCESS SHARE for the whole of
 * a dump: the batch would stall until the dump ends.  Kept, the indexes are
 * written with the rows (the store keeps them up to date) until a later
 * batch can drop them.
 */
static bool
tables_lock_now(HeldStore *h)
{
	Oid			tables[2];
	int			n = held_tables(h, tables);

	for (int i = 0; i < n; i++)
		if (!ConditionalLockRelationOid(tables[i], AccessExclusiveLock))
		{
			while (--i >= 0)
				UnlockRelationOid(tables[i], AccessExclusiveLock);
			return false;
		}
	return true;
}

/* Their pages, together */
static BlockNumber
tables_pages(HeldStore *h)
{
	Oid			tables[2];
	int			n = held_tables(h, tables);
	BlockNumber pages = 0;

	for (int i = 0; i < n; i++)
	{
		Relation	rel = table_open(tables[i], AccessShareLock);

		pages += RelationGetNumberOfBlocks(rel);
		table_close(rel, AccessShareLock);
	}
	return pages;
}

/* The rows this transaction inserted into and deleted from them so far */
static void
tables_changes(HeldStore *h, int64 *inserted, int64 *deleted)
{
	Oid			tables[2];
	int			n = held_tables(h, tables);

	*inserted = 0;
	*deleted = 0;
	for (int i = 0; i < n; i++)
	{
		Datum		relid = ObjectIdGetDatum(tables[i]);

		*inserted += DatumGetInt64(DirectFunctionCall1(pg_stat_get_xact_tuples_inserted, relid));
		*deleted += DatumGetInt64(DirectFunctionCall1(pg_stat_get_xact_tuples_deleted, relid));
	}
}

/*
 * The indexes the SQL statements need on the tables, unless they are there
 * (made as the extension's owner, which owns the tables).
 */
static void
held_store_index(HeldStore *h, BatchState *b)
{
	if (!tables_unindexed(h, false))
		return;
	for (int i = 0; i < (int) lengthof(h->index); i++)
		if (h->index[i] != NUM_STATEMENTS && b->runner->plans[h->index[i]] != NULL)
			runner_run_indexes(b->runner, h->index[i]);
}

/* --- holding it ------------------------------------------------------------ */

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

void
held_store_init_join(HeldStore *h, JoinStore *js, const Oid *tables, QueryStatement index0,
					 QueryStatement index1, QueryStatement unindex)
{
	memset(h, 0, sizeof(HeldStore));
	h->join = js;
	h->what = "join state";
	h->plural = false;
	h->table_name = "join tables";
	h->table = tables[0];
	h->other_table = tables[1];
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
	bool		single = runner_single_batch(b->runner);
	bool		loads = !kept_vouches(h, b->catalog_xmin);

	if (!kept_begin(h, b->catalog_xmin))
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
	 * So does a join store in a worker or in run_available/catch_up: a join
	 * writes nearly every row of every batch into its tables (run_available
	 * those still held at its end), whose index entries
	 * would cost about what the store saves (a worker that starts after
	 * cold batches would pay them for good); a cold batch after it makes
	 * them again, once.  A store that loads in a single batch of a session
	 * (a cron job's run_batch after a worker or a backlog) makes the indexes
	 * that are missing: it has just read the whole table, and the next
	 * session's small batch then runs cold at once instead of making them.
	 * A store that vouches for its memory has done so already.
	 */
	if (!h->cold_allowed || (h->join != NULL && !single))
	{
		if (!tables_unindexed(h, true) && tables_lock_now(h))
			runner_run_indexes(b->runner, h->unindex);
	}
	else if (single && loads)
		held_store_index(h, b);
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
	bool		vouches;

	h->active = false;
	h->state = HELD_TABLE;
	if (h->store == NULL && h->join == NULL)
		return;

	/*
	 * A store that cannot vouch for what it holds lets go of it at once: the
	 * batch loads it again or runs without it, and rows it kept back in
	 * batches rolled back since must not reach the tables, not even by the
	 * sync that ends a run_available whose batches find nothing to read.
	 */
	vouches = kept_vouches(h, b->catalog_xmin);
	if (!vouches)
		kept_invalidate(h);
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
	 * mode trying its memory again: a cold batch would not try.  And a
	 * worker's join store without its tables' indexes: its first cold batch
	 * would make them (a scan of each table, as a load), and the worker
	 * would load before long all the same, dropping them.
	 */
	if (h->cold_allowed && !h->table_mode && !b->replay && !vouches &&
		!(h->join != NULL && b->runner->in_worker && tables_unindexed(h, false)))
	{
		h->state = HELD_PENDING;
		tables_changes(h, &h->inserted_before, &h->deleted_before);
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
	BlockNumber pages;

	if (h->state != HELD_PENDING)
		return h->active;
	pages = tables_pages(h);
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
	kept_invalidate(h);
	held_store_index(h, b);

	/*
	 * The state's rows are counted from what the batch inserts and deletes
	 * (held_store_cold_state_rows): no statement of it may run in a
	 * subtransaction that rolls back, whose rows would count too.  Such are
	 * only the INSERT variants of the result's writes (runner.c), which a
	 * small batch does without.
	 */
	b->runner->insert_variants_paused = Max(b->runner->insert_variants_paused, 1);
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

/*
 * The rows are the last batch's (its progress row) and those the batch
 * inserted less those it deleted.
 */
bool
held_store_cold_state_rows(HeldStore *h, BatchState *b, int64 *rows)
{
	Datum		last;
	int64		inserted;
	int64		deleted;

	if (h->state != HELD_PENDING && h->state != HELD_COLD)
		return false;
	if (!pgstat_track_counts || b->last_batch_id == 0 ||
		!catalog_progress_column(b->query->query_id, b->last_batch_id, "state_rows", &last))
		return false;
	tables_changes(h, &inserted, &deleted);
	*rows = DatumGetInt64(last) + (inserted - h->inserted_before) - (deleted - h->deleted_before);
	return true;
}

void
held_store_sync(HeldStore *h)
{
	if (h->store != NULL)
		store_sync(h->store);
	else if (h->join != NULL)
		join_store_sync(h->join);
}

void
held_store_end(HeldStore *h, TransactionId catalog_xmin)
{
	if (h->active)
		kept_end(h, catalog_xmin);
	h->active = false;
	h->state = HELD_IDLE;
}

void
held_store_invalidate(HeldStore *h)
{
	kept_invalidate(h);
	h->active = false;
	h->state = HELD_IDLE;
	h->cold_rows = 0;
}
