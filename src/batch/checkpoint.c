/*-------------------------------------------------------------------------
 *
 * checkpoint.c
 *	  Recovering a query's UNLOGGED state after a crash.
 *
 * Open windows live in an UNLOGGED state table for speed.  PostgreSQL
 * empties every UNLOGGED table after a crash restart (an immediate
 * shutdown, or any backend killed), while the offsets, in logged tables,
 * survive: resuming from them with empty state would silently lose data.
 *
 * So, in the batch's own transaction:
 *	- every streamwin.checkpoint_interval batches the state table is copied
 *	  into a logged checkpoint table, and the offsets and watermark it
 *	  matches into streamwin.query_checkpoints / query_catalog;
 *	- streamwin.state_alive (UNLOGGED) holds a row per query whose state is
 *	  intact.  A crash empties it, which is how the next batch notices.
 * Recovery restores the checkpoint, then replays the batches committed
 * since, one by one, each reading exactly the offsets it read the first
 * time and using the watermarks and the processing time recorded then
 * (streamwin.progress_log keeps them), so late rows, window closings and
 * processing-time windows are decided as before and the result upserts,
 * which write full values, converge to the same rows.
 * A clean shutdown keeps UNLOGGED tables, so it needs no replay.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "access/table.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "catalog_log.h"
#include "catalog_positions.h"
#include "checkpoint.h"
#include "join.h"
#include "offsets.h"
#include "operator.h"
#include "result_insert.h"
#include "spi_util.h"

int			streamwin_checkpoint_interval = 10;
bool		streamwin_table_checkpoint_every_batch = true;
int			streamwin_checkpoint_min_interval = 10000;	/* ms */

/*
 * A join side's checkpoint is written anew past twice its state's pages
 * (its join table's, and about those of the rows kept back from it) plus
 * these; if it cannot be (its lock), its rows out of reach are deleted past
 * CHECKPOINT_DELETE_FACTOR times.
 */
#define CHECKPOINT_SLACK_PAGES 8
#define CHECKPOINT_DELETE_FACTOR 8

/* A statement over the catalog and the query's tables, as the extension's owner */
static void
run_catalog_args(const char *sql, int nargs, Oid *types, Datum *args)
{
	RoleSwitch	role;
	int			rc;

	catalog_enter(&role);
	rc = SPI_execute_with_args(sql, nargs, types, args, NULL, false, 0);
	catalog_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin checkpoint statement failed (%s): %s", SPI_result_code_string(rc), sql);
}

/* ... whose $1 is query_id */
static void
run_catalog(const char *sql, int32 query_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(query_id)};

	run_catalog_args(sql, 1, types, args);
}

/* The owner of a table */
static Oid
table_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "streamwin: relation with OID %u does not exist", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * INSERT INTO table SELECT ..., as the extension's owner: the rows written
 * by the table AM's multi-insert (result_insert.c), a WAL record and a
 * buffer lock per page rather than per row, where the table is a plain
 * one, as the checkpoint and state tables are unless someone changed them;
 * else by the INSERT.  Into a table of the query's owner (its state, dedup
 * or join table) the rows and their index entries are written as that
 * owner, whose functions an index on an expression may call: always by
 * the multi-insert, which catalog_check_table_pair lets through.
 */
static void
copy_rows_args(Oid table, const char *select, int nargs, Oid *types, Datum *args)
{
	RoleSwitch	role;
	SPIPlanPtr	plan;
	int			rc;
	Oid			owner;

	catalog_enter(&role);
	owner = table_owner(table);
	if (owner == GetUserId())
		owner = InvalidOid;
	plan = SPI_prepare(select, nargs, types);
	if (plan == NULL)
		elog(ERROR, "streamwin: could not prepare \"%s\": %s", select, SPI_result_code_string(SPI_result));
	if (OidIsValid(owner) && !result_insert_possible(table, plan))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("streamwin's table \"%s\" can no longer be written as it was made", get_rel_name(table)),
				 errhint("Drop the query and create it again.")));
	if (result_insert_possible(table, plan))
	{
		SPIExecuteOptions options = {0};
		DestReceiver *dest = result_insert_receiver_as(table, owner);

		options.dest = dest;
		if (nargs > 0)
		{
			options.params = makeParamList(nargs);
			for (int i = 0; i < nargs; i++)
			{
				options.params->params[i].value = args[i];
				options.params->params[i].isnull = false;
				options.params->params[i].pflags = PARAM_FLAG_CONST;
				options.params->params[i].ptype = types[i];
			}
		}
		rc = SPI_execute_plan_extended(plan, &options);
		dest->rDestroy(dest);
	}
	else
		rc = SPI_execute_with_args(psprintf("INSERT INTO %s %s", qualified_relname(table), select),
								   nargs, types, args, NULL, false, 0);
	SPI_freeplan(plan);
	catalog_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin checkpoint: copying rows into %s failed (%s): %s",
			 qualified_relname(table), SPI_result_code_string(rc), select);
}

static void
copy_rows(Oid table, const char *select)
{
	copy_rows_args(table, select, 0, NULL, NULL);
}

/* Pair n of query_state_tables (if pairs is not NULL); returns n + 1. */
static int
add_pair(StateTablePair *pairs, int n, Oid unlogged, Oid logged, CheckpointWay way,
		 const char *batch_column, const char *time_column, const JoinSidePlan *join_side)
{
	if (pairs != NULL)
	{
		StateTablePair *p = &pairs[n];

		p->unlogged = unlogged;
		p->logged = logged;
		p->way = way;
		p->batch_column = batch_column;
		p->time_column = time_column;
		p->join_side = join_side;
	}
	return n + 1;
}

/*
 * The join side of a pair whose rows have versions (a preserved side: a
 * row that matches after a checkpoint is added to the next one again,
 * matched, and a restore keeps each row's last version), or NULL.
 */
static const JoinSidePlan *
versioned_side(const StateTablePair *p)
{
	return p->join_side != NULL && p->join_side->row_column != NULL ? p->join_side : NULL;
}

/*
 * The time before which a pair's rows are out of reach at watermark wm
 * (CHECKPOINT_ROWS pairs with a time column: the batches delete them);
 * false if none is.
 */
static bool
pair_cutoff(const StateTablePair *pair, bool has_wm, TimestampTz wm, TimestampTz *cutoff)
{
	if (pair->time_column == NULL || !has_wm)
		return false;
	*cutoff = wm;
	return pair->join_side == NULL || join_side_cutoff(pair->join_side, wm, cutoff);
}

/*
 * query_state_tables
 *		The query's UNLOGGED tables with their checkpoint copies, into pairs
 *		(if not NULL: room for MAX_STATE_TABLES); returns how many.
 */
int
query_state_tables(const QueryInfo *q, StateTablePair *pairs)
{
	int			n = 0;

	if (OidIsValid(q->state_table))
		n = add_pair(pairs, n, q->state_table, q->checkpoint_table, CHECKPOINT_COPY, NULL, NULL, NULL);
	if (OidIsValid(q->dedup_table))
		n = add_pair(pairs, n, q->dedup_table, q->dedup_checkpoint,
					 q->dedup_batch_column != NULL ? CHECKPOINT_ROWS : CHECKPOINT_COPY,
					 q->dedup_batch_column, q->dedup_time_column, NULL);
	/* one of them dropped by hand: drop_query drops the other */
	if (OidIsValid(q->upsert_table) || OidIsValid(q->upsert_checkpoint))
		n = add_pair(pairs, n, q->upsert_table, q->upsert_checkpoint, CHECKPOINT_COPY, NULL, NULL,
					 NULL);
	for (int i = 0; i < q->nsources; i++)
	{
		const JoinSidePlan *side = q->join != NULL ? &q->join->sides[i] : NULL;
		bool		by_rows;

		if (!OidIsValid(q->sources[i].join_table))
			continue;

		/*
		 * A side compiled before its rows had the batch that wrote them, and
		 * a preserved side compiled before they had their number and the
		 * batch that matched them, are copied whole.
		 */
		by_rows = side != NULL && side->batch_column != NULL &&
			(!side->preserved || side->row_column != NULL);
		n = add_pair(pairs, n, q->sources[i].join_table, q->sources[i].join_checkpoint,
					 by_rows ? CHECKPOINT_ROWS : CHECKPOINT_COPY,
					 side != NULL ? side->batch_column : NULL,
					 side != NULL && side->evicted ? side->time_column : NULL, side);
	}
	return n;
}

/*
 * checkpoint_create_table
 *		At create_query: the logged twin `name` of an UNLOGGED table of the
 *		query (its state, its dedup keys), owned by the extension owner (only
 *		streamwin reads it), and the marker saying the (empty) state is
 *		intact.  Returns the checkpoint table's oid.
 */
Oid
checkpoint_create_table(int32 query_id, Oid unlogged_table, const char *name, bool incremental)
{
	Oid			relid;

	SPI_connect();

	/*
	 * Columns only: a checkpoint is written by location or whole, never
	 * searched, and each index would cost an insertion per state row.  A
	 * checkpoint written whole (TRUNCATE, then every row) leaves nothing to
	 * vacuum, and autovacuum's ANALYZE of every new copy would take a lock
	 * that makes the next checkpoint skip (checkpoint_take); one written
	 * incrementally (incremental: a store's, which updates and deletes
	 * rows; a join's, appended to and now and then written anew) gets
	 * autovacuum's care as any table.  Each column compresses
	 * as the table's says (create_state_table) but is stored as by default:
	 * the checkpoint's rows are logged, compressed.
	 */
	run_catalog(psprintf("CREATE TABLE streamwin.%s (LIKE %s INCLUDING DEFAULTS INCLUDING COMPRESSION)%s",
						 quote_identifier(name), qualified_relname(unlogged_table),
						 incremental ? "" :
						 " WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false)"),
				query_id);
	SPI_finish();
	catalog_mark_state_alive(query_id);
	CommandCounterIncrement();
	relid = get_relname_relid(name, get_namespace_oid("streamwin", false));
	catalog_table_depends_on_extension(relid);
	return relid;
}

/*
 * checkpoint_index_table
 *		An index on columns of a checkpoint table that is written
 *		incrementally, for its deletions.
 */
void
checkpoint_index_table(int32 query_id, Oid checkpoint_table, const char *columns)
{
	SPI_connect();
	run_catalog(psprintf("CREATE INDEX ON %s (%s)", qualified_relname(checkpoint_table), columns),
				query_id);
	SPI_finish();
	CommandCounterIncrement();
}

/*
 * checkpoint_state_lost
 *		Was the query's UNLOGGED state emptied by a crash?  Inside a batch.
 */
bool
checkpoint_state_lost(QueryRunner *r)
{
	return !catalog_state_alive(r->query_id);
}

/*
 * checkpoint_restore
 *		Put the last checkpoint back: state rows, offsets, and the batch id
 *		the state now corresponds to.  Returns that batch id (0 if there was
 *		no checkpoint, or only reset_query's before any batch: then the
 *		state is empty, and offsets start over or where the reset put them).
 */
int64
checkpoint_restore(QueryRunner *r)
{
	int64		ckpt = catalog_checkpoint_batch(r->query_id);
	StateTablePair pairs[MAX_STATE_TABLES];
	int			npairs;
	bool		has_wm;
	TimestampTz wm = 0;
	TimestampTz cutoff;

	ereport(LOG,
			(errmsg("streamwin: query \"%s\" lost its state in a crash; restoring the checkpoint of batch " INT64_FORMAT " and replaying from there",
					r->query->name, ckpt)));

	has_wm = ckpt > 0 && catalog_recorded_watermark(r->query_id, ckpt, &wm);
	npairs = query_state_tables(r->query, pairs);
	for (int i = 0; i < npairs; i++)
	{
		const StateTablePair *p = &pairs[i];
		const JoinSidePlan *versioned = versioned_side(p);
		const char *in_reach = "";
		Oid			types[1] = {TIMESTAMPTZOID};
		Datum		args[1];
		int			nargs = 0;

		catalog_check_table_pair(p->unlogged, RowExclusiveLock, p->logged, AccessShareLock);
		run_catalog(psprintf("DELETE FROM ONLY %s", qualified_relname(p->unlogged)), r->query_id);
		if (ckpt == 0)
			continue;

		/* a join side's rows out of reach stay in its checkpoint (checkpoint_rows) */
		if (p->join_side != NULL && pair_cutoff(p, has_wm, wm, &cutoff))
		{
			in_reach = psprintf(" WHERE %s IS NULL OR %s >= $1", quote_identifier(p->time_column),
								quote_identifier(p->time_column));
			args[0] = TimestampTzGetDatum(cutoff);
			nargs = 1;
		}
		if (versioned != NULL)
		{
			const char *batch = quote_identifier(p->batch_column);
			const char *row = quote_identifier(versioned->row_column);

			/* a row's last version: the one its last change wrote */
			copy_rows_args(p->unlogged,
						   psprintf("SELECT DISTINCT ON (%s, %s) * FROM ONLY %s%s ORDER BY %s, %s, %s DESC NULLS LAST",
									batch, row, qualified_relname(p->logged), in_reach, batch, row,
									quote_identifier(versioned->matched_batch_column)),
						   nargs, types, args);
		}
		else
			copy_rows_args(p->unlogged, psprintf("SELECT * FROM ONLY %s%s", qualified_relname(p->logged), in_reach),
						   nargs, types, args);
	}
	catalog_restore_offsets(r->query_id);
	catalog_set_state_batch(r->query_id, ckpt);
	catalog_mark_state_alive(r->query_id);
	return ckpt;
}

/*
 * Has a join side's checkpoint table grown past factor times its state: its
 * join table, and the rows its operator keeps back from that in memory?
 */
static bool
checkpoint_outgrown(QueryRunner *r, const StateTablePair *pair, int factor)
{
	Relation	logged = table_open(pair->logged, AccessShareLock);
	Relation	unlogged = table_open(pair->unlogged, AccessShareLock);
	int64		kept_pages = operators_kept_bytes(r->operators, pair->unlogged) / BLCKSZ;
	bool		outgrown = RelationGetNumberOfBlocks(logged) >
		factor * (RelationGetNumberOfBlocks(unlogged) + kept_pages) + CHECKPOINT_SLACK_PAGES;

	table_close(unlogged, AccessShareLock);
	table_close(logged, AccessShareLock);
	return outgrown;
}

/*
 * A CHECKPOINT_ROWS pair's checkpoint: the rows of the batches since the
 * last checkpoint added, and those the batches since changed (the last
 * checkpoint's batch id is recorded after this).  Rows an operator keeps
 * back from the table (a join store's, in batches that share a
 * transaction) it adds itself, from memory, before the table's are copied
 * (operators_checkpoint_kept).  A dedup table's rows out
 * of reach at this watermark are deleted first, as the batches deleted
 * them.  A join side's stay: a restore leaves them out (checkpoint_restore),
 * and they can match no row a later batch reads, which comes after the
 * watermark.  So the checkpoint of a join, whose rows wait minutes for a
 * match and most of which a checkpoint catches, is appended to, without an
 * index to find those rows again and a deletion of each; once the table
 * holds more than twice what the join's state does, it is written anew
 * from the join table and the rows kept back, which are exactly those in
 * reach.  That TRUNCATE
 * takes a lock that a dump's conflicts with: under a dump the checkpoint
 * is appended to, and written anew at a later one; grown much further
 * (a dump that lasts, a session idle in a transaction that read it), its
 * rows out of reach are deleted as a dedup table's are, by a scan.
 */
static void
checkpoint_rows(QueryRunner *r, const StateTablePair *pair, bool has_wm, TimestampTz wm)
{
	int64		last_batch = catalog_checkpoint_batch(r->query_id);
	const char *last = psprintf(INT64_FORMAT, last_batch);
	const JoinSidePlan *versioned = versioned_side(pair);
	TimestampTz cutoff;
	bool		has_cutoff = pair_cutoff(pair, has_wm, wm, &cutoff);

	catalog_check_table_pair(pair->unlogged, AccessShareLock, pair->logged, RowExclusiveLock);
	if (pair->join_side != NULL)
	{
		if (checkpoint_outgrown(r, pair, 2) &&
			ConditionalLockRelationOid(pair->logged, AccessExclusiveLock))
		{
			run_catalog(psprintf("TRUNCATE ONLY %s", qualified_relname(pair->logged)), r->query_id);
			operators_checkpoint_kept(r->operators, pair->unlogged, pair->logged, -1);
			copy_rows(pair->logged, psprintf("SELECT * FROM ONLY %s", qualified_relname(pair->unlogged)));
			return;
		}
		has_cutoff = has_cutoff && checkpoint_outgrown(r, pair, CHECKPOINT_DELETE_FACTOR);
	}
	if (has_cutoff)
	{
		Oid			types[1] = {TIMESTAMPTZOID};
		Datum		args[1] = {TimestampTzGetDatum(cutoff)};

		run_catalog_args(psprintf("DELETE FROM ONLY %s WHERE %s < $1", qualified_relname(pair->logged),
								  quote_identifier(pair->time_column)),
						 1, types, args);
	}
	operators_checkpoint_kept(r->operators, pair->unlogged, pair->logged, last_batch);
	copy_rows(pair->logged, psprintf("SELECT * FROM ONLY %s WHERE %s > %s%s", qualified_relname(pair->unlogged),
									 quote_identifier(pair->batch_column), last,
									 versioned == NULL ? "" :
									 psprintf(" OR %s > %s", quote_identifier(versioned->matched_batch_column), last)));
}

/*
 * Is the pair's checkpoint written by the rows that changed (no TRUNCATE
 * of it in every checkpoint)?  An operator that keeps the table's rows in
 * memory writes it so in this batch (operator.h), and so does
 * CHECKPOINT_ROWS (a join side's is written anew now and then, when it
 * can take the lock: checkpoint_rows).
 */
static bool
checkpoint_incremental(QueryRunner *r, const StateTablePair *pair)
{
	return operators_writes_checkpoint(r->operators, pair->unlogged) ||
		pair->way == CHECKPOINT_ROWS;
}

/*
 * checkpoint_take
 *		Copy the state and the just-stored offsets as of batch_id.  Inside
 *		the batch, after offsets_store.
 *
 * A copy made whole replaces the checkpoint table's contents with
 * TRUNCATE, which needs an ACCESS EXCLUSIVE lock, and pg_dump holds ACCESS
 * SHARE on every table it dumps, checkpoint tables included, until the
 * dump ends.  Unless
 * told to wait, a checkpoint whose tables are locked is not taken: the
 * previous one stays valid (recovery replays from it, a little longer), and
 * the next batch tries again, where waiting would stall the query for as
 * long as the dump runs.  Returns whether the checkpoint was taken.
 */
bool
checkpoint_take(QueryRunner *r, int64 batch_id, bool has_wm, TimestampTz wm, bool wait)
{
	StateTablePair pairs[MAX_STATE_TABLES];
	int			npairs = query_state_tables(r->query, pairs);
	bool		defer = false;

	Assert(npairs <= MAX_STATE_TABLES);

	/*
	 * A batch that ran on a state table without loading it read only a
	 * little of it, where its checkpoint would read all of it: the
	 * checkpoint waits for a batch that has its state in memory (recovery
	 * replays from the one before, a little longer), but not for ever.
	 * Not the first, which holds where the query started, a "latest"
	 * resolved: without it, recovery would resolve it again, past what
	 * came since, and skip that; its state is small.  (A lock on its table,
	 * a dump's, still puts it off to the next batch: waiting would hold
	 * the query, and the dump's own locks, for as long.)
	 */
	if (!wait && operators_defer_checkpoint(r->operators))
	{
		int64		last = catalog_checkpoint_batch(r->query_id);

		defer = last != 0 && batch_id - last < 10 * (int64) streamwin_checkpoint_interval;
	}
	if (defer)
	{
		ereport(DEBUG1,
				(errmsg("streamwin: query \"%s\" leaves its checkpoint to a batch with its state in memory",
						r->query->name)));
		return false;
	}

	/*
	 * Both tables or neither: a checkpoint is one state.  A store writes its
	 * checkpoint rows by location, and a join's are appended to (under a
	 * lock that does not conflict with a dump's); copies made whole need
	 * TRUNCATE's.
	 */
	for (int i = 0; i < npairs && !wait; i++)
	{
		if (checkpoint_incremental(r, &pairs[i]))
			continue;
		if (!ConditionalLockRelationOid(pairs[i].logged, AccessExclusiveLock))
		{
			/*
			 * and lets go of those it locked: in a transaction of many
			 * batches (run_available) they would keep a dump waiting on
			 * them, holding the lock that failed this one, to the end
			 */
			for (int j = 0; j < i; j++)
				if (!checkpoint_incremental(r, &pairs[j]))
					UnlockRelationOid(pairs[j].logged, AccessExclusiveLock);
			ereport(DEBUG1,
					(errmsg("streamwin: query \"%s\" skips a checkpoint: its table is locked by another session",
							r->query->name)));
			return false;
		}
	}
	/*
	 * The tables the copies read get what their operators kept back, but
	 * from an operator that writes those rows into the checkpoint itself
	 * (checkpoint_rows).
	 */
	{
		Oid			unlogged[MAX_STATE_TABLES];

		for (int i = 0; i < npairs; i++)
			unlogged[i] = pairs[i].unlogged;
		operators_sync_for_checkpoint(r->operators, unlogged, npairs);
	}
	for (int i = 0; i < npairs; i++)
	{
		/* the groups (keys) changed since the last checkpoint */
		if (operators_checkpoint(r->operators, pairs[i].unlogged))
			continue;
		if (pairs[i].way == CHECKPOINT_ROWS)
		{
			checkpoint_rows(r, &pairs[i], has_wm, wm);
			continue;
		}
		/* rows kept back go only where the rows of batches are copied */
		if (operators_kept_bytes(r->operators, pairs[i].unlogged) > 0)
			elog(ERROR, "streamwin: query \"%s\" keeps rows back from a table whose checkpoint is copied whole",
				 r->query->name);
		/* TRUNCATE rather than DELETE: no dead tuples left behind each time */
		catalog_check_table_pair(pairs[i].unlogged, AccessShareLock, pairs[i].logged, AccessExclusiveLock);
		run_catalog(psprintf("TRUNCATE ONLY %s", qualified_relname(pairs[i].logged)), r->query_id);
		copy_rows(pairs[i].logged, psprintf("SELECT * FROM ONLY %s", qualified_relname(pairs[i].unlogged)));
	}
	catalog_checkpoint_offsets(r->query_id);
	catalog_record_checkpoint(r->query_id, batch_id, has_wm, wm);
	return true;
}

/*
 * checkpoint_move_positions
 *		The checkpoint's state is still the query's state (no batch since),
 *		but the source moved on without rows for it (a table source reading
 *		other tables' WAL): the checkpoint now matches the stored positions.
 */
void
checkpoint_move_positions(QueryRunner *r)
{
	catalog_checkpoint_move_offsets(r->query_id);
}

/*
 * A column of the progress row of batch batch_id, which its replay needs
 * (not NULL in any row), or an error saying how to go on without it.
 */
static Datum
replayed_batch_column(QueryRunner *r, int64 batch_id, const char *column)
{
	Datum		value;

	if (!catalog_progress_column(r->query_id, batch_id, column, &value))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cannot replay batch " INT64_FORMAT " of query \"%s\": its progress record is missing",
						batch_id, r->query->name),
				 errhint("Replay the query from the start with streamwin.reset_query('%s', 'earliest').",
						 r->query->name)));
	return value;
}

/*
 * checkpoint_replay_bounds
 *		What batch batch_id read and decided the first time: its end
 *		position per source and partition (targets[s], indexed like reader
 *		s's parts),
 *		the watermark it started from and the one it ended with.
 */
void
checkpoint_replay_bounds(QueryRunner *r, int64 batch_id, SourcePosition **targets,
						 bool *has_prev_wm, TimestampTz *prev_wm,
						 bool *has_wm, TimestampTz *wm)
{
	Jsonb	   *offsets = DatumGetJsonbPCopy(replayed_batch_column(r, batch_id, "offsets"));

	for (int s = 0; s < r->nreaders; s++)
	{
		SourceReader *rd = r->readers[s];
		Jsonb	   *positions = offsets_json_source(r, offsets, s);

		if (positions == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("cannot replay batch " INT64_FORMAT " of query \"%s\": its progress record has no offsets of source \"%s\"",
							batch_id, r->query->name, rd->source->name),
					 errhint("Replay the query from the start with streamwin.reset_query('%s', 'earliest').",
							 r->query->name)));
		rd->ops->positions_parse(rd, positions, targets[s]);
	}
	*has_prev_wm = catalog_recorded_watermark(r->query_id, batch_id - 1, prev_wm);
	*has_wm = catalog_recorded_watermark(r->query_id, batch_id, wm);
}

/*
 * checkpoint_replay_timestamp
 *		The timestamp batch batch_id ran with the first time (its processing
 *		time, recorded as its progress row's started_at), for its replay.
 */
TimestampTz
checkpoint_replay_timestamp(QueryRunner *r, int64 batch_id)
{
	return DatumGetTimestampTz(replayed_batch_column(r, batch_id, "started_at"));
}

/*
 * checkpoint_note_replayed
 *		The state now reflects batch_id again.
 */
void
checkpoint_note_replayed(QueryRunner *r, int64 batch_id)
{
	catalog_set_state_batch(r->query_id, batch_id);
}

/*
 * The name of the query's first checkpoint table copied whole: the one a
 * lock keeps the checkpoint from.
 */
static const char *
checkpoint_table_name(QueryRunner *r)
{
	StateTablePair pairs[MAX_STATE_TABLES];
	int			npairs = query_state_tables(r->query, pairs);

	for (int i = 0; i < npairs; i++)
		if (!checkpoint_incremental(r, &pairs[i]))
		{
			char	   *name = get_rel_name(pairs[i].logged);

			return name ? name : "?";
		}
	return "?";
}

/* Does any source of the query read from its checkpoint's position on? */
static bool
fetch_follows_checkpoint(QueryRunner *r)
{
	for (int s = 0; s < r->nreaders; s++)
		if (r->readers[s]->ops->fetch_rereads != NULL)
			return true;
	return false;
}

/* Will a source of the query decode again from the checkpoint's position? */
static bool
next_fetch_rereads(QueryRunner *r)
{
	for (int s = 0; s < r->nreaders; s++)
		if (r->readers[s]->ops->fetch_rereads != NULL &&
			r->readers[s]->ops->fetch_rereads(r->readers[s]))
			return true;
	return false;
}

/*
 * Is all of the query's state in memory, each of its checkpoints written
 * from there by what changed?  (Not a checkpoint by the rows of the
 * batches, CHECKPOINT_ROWS, which scans its table for them.)
 */
static bool
checkpoint_all_from_memory(QueryRunner *r)
{
	StateTablePair pairs[MAX_STATE_TABLES];
	int			npairs = query_state_tables(r->query, pairs);

	for (int i = 0; i < npairs; i++)
		if (!operators_writes_checkpoint(r->operators, pairs[i].unlogged))
			return false;
	return true;
}

/*
 * checkpoint_after_batch
 *		Take a checkpoint at the end of batch_id if it is due: every
 *		streamwin.checkpoint_interval batches, but not more often than
 *		streamwin.checkpoint_min_interval, since a worker on a short trigger
 *		with a large state would otherwise spend its time copying it.
 *
 *		A source whose every fetch reads from what the oldest checkpoint
 *		keeps (SourceOps.fetch_rereads: a table source's slot is
 *		confirmed no further) turns this around: each batch after a
 *		checkpoint decodes again all the WAL since it, so a sparser
 *		checkpoint costs more reading in every batch.  There the time bound
 *		does not apply, and (streamwin.table_checkpoint_every_batch, on by
 *		default) a state in memory, whose checkpoint writes only what
 *		changed (a store's, but for a join's), takes one at every batch
 *		after which the next fetch decodes again from the checkpoint's
 *		position (SourceOps.fetch_rereads): it writes what changed since, where the
 *		interval's batches would each decode the WAL of the ones before
 *		again (measured: 40 batches of 5,000 rows, each in a transaction of
 *		its own, 1,000 or 100,000 groups, took 1.8x as long at the default
 *		interval).  Not in a backlog, whose fetches go on where the last
 *		one stopped: there a checkpoint per batch would only cost (case CL
 *		of make bench, whose min and max keep large sets: +35% CPU).
 *		checkpoint_batch: the batch of the last checkpoint (0: none).
 *		Inside the batch, after its positions are stored.  Returns whether
 *		it took one.
 */
bool
checkpoint_after_batch(QueryRunner *r, int64 batch_id, int64 checkpoint_batch,
					   bool has_wm, TimestampTz wm, TimestampTz now)
{
	int64		behind = batch_id - checkpoint_batch;
	bool		follows = fetch_follows_checkpoint(r);
	int			interval = follows && streamwin_table_checkpoint_every_batch &&
		next_fetch_rereads(r) && checkpoint_all_from_memory(r) ? 1 : streamwin_checkpoint_interval;

	if (checkpoint_batch != 0 &&
		(behind < interval ||
		 (!follows && now - r->last_checkpoint_at < (int64) streamwin_checkpoint_min_interval * 1000)))
		return false;
	if (checkpoint_take(r, batch_id, has_wm, wm, false))
	{
		r->last_checkpoint_at = now;
		return true;
	}
	if (checkpoint_batch > 0 && behind % (10 * (int64) streamwin_checkpoint_interval) == 0)
	{
		/*
		 * A dump's lock goes away; one that stays (a session idle in a
		 * transaction that read the table) would make recovery replay ever
		 * more batches, all kept in streamwin.progress_log: say so, now and
		 * then.
		 */
		ereport(WARNING,
				(errmsg("query \"%s\" has taken no checkpoint for " INT64_FORMAT " batches",
						r->query->name, behind),
				 errdetail("Its checkpoint table streamwin.%s is locked by another session.",
						   checkpoint_table_name(r)),
				 errhint("A long pg_dump does this, and so does any session holding a lock on that table; "
						 "until a checkpoint is taken, recovery after a crash replays every batch since.")));
	}
	return false;
}
