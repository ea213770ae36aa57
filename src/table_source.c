/*-------------------------------------------------------------------------
 *
 * table_source.c
 *	  Table sources: streamwin's logical decoding output plugin, the
 *	  replication slot of each source, and reading a batch of inserted rows
 *	  in the calling backend (see table_source.h).
 *
 * Why streamwin is its own output plugin rather than reading test_decoding
 * or pgoutput through pg_logical_slot_peek_changes(): the rows are copied
 * out of the reorder buffer straight into the source's row type, so a row
 * costs one tuple copy instead of text output, a tuplestore and parsing
 * again; the plugin skips other tables' changes without formatting them;
 * and the fetch can stop at a batch boundary inside the WAL stream.
 *
 * The plugin is only ever driven by table_fetch() in the same process:
 * its callbacks write into the fetch in progress (a static pointer, since
 * decoding runs synchronously on this backend's stack).  A walsender or
 * pg_logical_slot_get_changes() on a streamwin slot is refused, so the
 * slot's position cannot be moved behind streamwin's back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogutils.h"
#include "catalog/catalog.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/output_plugin.h"
#include "replication/slot.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/standby.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "executor/tuptable.h"

#include "streamwin.h"
#include "table_source.h"

/* Output plugin entry point: the library is loaded by slot name "streamwin". */
extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

/* The fetch the plugin callbacks write into (NULL outside table_fetch). */
typedef struct FetchState
{
	Oid			table;
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
	int64		txn_index;		/* inserts into the table seen in this txn */
	/* column map from the table's (historic) row type to desc */
	TupleDesc	map_from;
	int		   *map;			/* desc column i <- table attribute map[i], -1 */
	bool		map_identity;
	Datum	   *values;
	bool	   *nulls;
	Datum	   *src_values;
	bool	   *src_nulls;
	int			src_natts;
} FetchState;

static FetchState *active_fetch = NULL;

static void kept_decoding_abort(void);

/*
 * The rest of a transaction larger than a batch, for the batches that
 * follow.  Without it, each of them decoded the whole transaction again
 * (the reorder buffer only replays a transaction once it has read its
 * commit) and skipped the rows already processed: a bulk load of n rows
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
	XLogRecPtr	txn_lsn;		/* the transaction's commit: its rows' lsn */
	int64		next_index;		/* the index of the next row in `rows` */
	int64		left;			/* rows in `rows` not taken yet */
	TimestampTz commit_time;
	TablePosition after;		/* the position after the transaction */
	/*
	 * Updates, deletes and truncates of the table after the cut, each
	 * counted (as when the transaction is decoded again) by the batch that
	 * holds the last row inserted before it: a batch that takes rows up to
	 * index n takes the counts of changes with `after` below n.
	 */
	struct SpoolChanges
	{
		int64		after;		/* index of the last insert before them */
		int64		n[3];		/* updates, deletes, truncates */
	}		   *changes;
	int			nchanges;
	int			maxchanges;
	int			next_change;
	Tuplestorestate *rows;
	MemoryContext cxt;
} Spool;

static Spool *spool = NULL;

/* Count an update (0), delete (1) or truncate (2) seen after the cut. */
static void
spool_count(FetchState *st, int kind)
{
	int64		after = st->txn_index - 1;

	if (spool->nchanges == 0 || spool->changes[spool->nchanges - 1].after != after)
	{
		if (spool->nchanges == spool->maxchanges)
		{
			spool->maxchanges = Max(spool->maxchanges * 2, 16);
			spool->changes = spool->changes == NULL ?
				MemoryContextAlloc(spool->cxt, sizeof(*spool->changes) * spool->maxchanges) :
				repalloc(spool->changes, sizeof(*spool->changes) * spool->maxchanges);
		}
		memset(&spool->changes[spool->nchanges], 0, sizeof(*spool->changes));
		spool->changes[spool->nchanges++].after = after;
	}
	spool->changes[spool->nchanges - 1].n[kind]++;
}

static void
spool_discard(void)
{
	Spool	   *sp = spool;

	if (sp == NULL)
		return;
	spool = NULL;
	tuplestore_end(sp->rows);
	MemoryContextDelete(sp->cxt);
}

/* A slot being created, held by this backend until its transaction ends. */
static char *creating_slot = NULL;
static char *dropping_slot = NULL;
static bool xact_callback_registered = false;

/*
 * PostgreSQL logs (at LOG) the start of every decoding session: "starting
 * logical decoding for slot", "found consistent point".  For a walsender
 * that is once per connection; a query worker starts one per batch, which
 * would fill the server log.  While this backend decodes for a batch, those
 * LOG messages are kept out of the log; warnings and errors are not.
 */
static bool quiet_decoding = false;
static emit_log_hook_type prev_emit_log_hook = NULL;

static void
quiet_decoding_hook(ErrorData *edata)
{
	if (quiet_decoding && edata->elevel == LOG)
		edata->output_to_server = false;
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
table_source_init(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = quiet_decoding_hook;
}

/* --- Output plugin -------------------------------------------------------- */

static void
plugin_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
	opt->receive_rewrites = false;
	if (!is_init && active_fetch == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replication slot \"%s\" belongs to a streamwin table source",
						NameStr(ctx->slot->data.name)),
				 errdetail("Only streamwin reads it, so that its position stays where the queries need it."),
				 errhint("Create a slot of your own with another output plugin.")));
}

static void
plugin_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	if (active_fetch != NULL)
		active_fetch->txn_index = 0;
}

/* Is this transaction's first part already processed (a restart inside it)? */
static bool
txn_resumed(FetchState *st, ReorderBufferTXN *txn)
{
	return txn->final_lsn == st->start.lsn && st->start.index > 0;
}

/*
 * Should an ignored change (update, delete, truncate) be counted in this
 * pass?  Not in a replay, which reproduces a recorded batch.  In a
 * transaction resumed at insert n, the batch that stopped there read every
 * change up to that insert and counted them; so count only what comes
 * after it, that is once this pass has seen inserts 0..n (txn_index > n).
 */
static bool
count_ignored(FetchState *st, ReorderBufferTXN *txn)
{
	return st->upto == NULL &&
		(!txn_resumed(st, txn) || st->txn_index > st->start.index);
}

/* Build the map from the table's row type, as of this change, to the source's. */
static void
build_map(FetchState *st, TupleDesc from)
{
	MemoryContext old = MemoryContextSwitchTo(st->cxt);

	st->map_from = from;
	st->src_natts = from->natts;
	st->src_values = palloc(sizeof(Datum) * Max(from->natts, 1));
	st->src_nulls = palloc(sizeof(bool) * Max(from->natts, 1));
	st->map_identity = from->natts == st->desc->natts;
	for (int i = 0; i < st->desc->natts; i++)
	{
		Form_pg_attribute want = TupleDescAttr(st->desc, i);

		st->map[i] = -1;
		for (int a = 0; a < from->natts; a++)
		{
			Form_pg_attribute have = TupleDescAttr(from, a);

			if (have->attisdropped || strcmp(NameStr(have->attname), NameStr(want->attname)) != 0)
				continue;
			if (have->atttypid != want->atttypid)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of table \"%s\" changed type from %s to %s",
								NameStr(want->attname), get_rel_name(st->table),
								format_type_be(want->atttypid), format_type_be(have->atttypid)),
						 errdetail("A table source delivers rows in the column types it was created with."),
						 errhint("Create a new source for the table, and queries over it.")));
			st->map[i] = a;
			break;
		}
		if (st->map[i] != i)
			st->map_identity = false;
	}
	MemoryContextSwitchTo(old);
}

/* One inserted row in the source's row type, in the current memory context. */
static HeapTuple
form_row(FetchState *st, Relation rel, HeapTuple tuple)
{
	TupleDesc	from = RelationGetDescr(rel);
	HeapTuple	row;

	if (from != st->map_from)
		build_map(st, from);
	if (st->map_identity && !HeapTupleHasExternal(tuple))
		row = heap_copytuple(tuple);	/* same layout: one copy */
	else
	{
		heap_deform_tuple(tuple, from, st->src_values, st->src_nulls);
		for (int i = 0; i < st->desc->natts; i++)
		{
			int			a = st->map[i];
			Form_pg_attribute att = TupleDescAttr(st->desc, i);

			st->nulls[i] = a < 0 || st->src_nulls[a];
			if (st->nulls[i])
				continue;
			st->values[i] = st->src_values[a];
			/* toasted values point into the reorder buffer: take copies */
			if (att->attlen == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(st->values[i])))
				st->values[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
																	  DatumGetPointer(st->values[i])));
		}
		row = heap_form_tuple(st->desc, st->values, st->nulls);
	}
	return row;
}

/* Append a row (in st->cxt) to the fetch. */
static void
append_row(FetchState *st, HeapTuple row, XLogRecPtr lsn, int64 index, TimestampTz commit_time)
{
	TableFetch *out = st->out;
	KafkaMessage *m;

	if (out->nrows == st->capacity)
	{
		st->capacity = Max(st->capacity * 2, 1024);
		out->rows = repalloc_huge(out->rows, sizeof(KafkaMessage) * st->capacity);
	}
	m = &out->rows[out->nrows++];
	memset(m, 0, sizeof(KafkaMessage));
	m->payload = (const char *) row->t_data;
	m->len = row->t_len;
	m->offset = (int64) lsn;
	m->partition = (int32) Min(index, PG_INT32_MAX);
	m->has_timestamp = true;
	m->timestamp = commit_time;
}

/* Append one inserted row to the fetch, in the source's row type. */
static void
take_row(FetchState *st, ReorderBufferTXN *txn, Relation rel, HeapTuple tuple, int64 index)
{
	MemoryContext old = MemoryContextSwitchTo(st->cxt);

	append_row(st, form_row(st, rel, tuple), txn->final_lsn, index, txn->xact_time.commit_time);
	MemoryContextSwitchTo(old);
}

/* Put one inserted row of the transaction being cut into the spool. */
static void
spool_row(FetchState *st, ReorderBufferTXN *txn, Relation rel, HeapTuple tuple, int64 index)
{
	MemoryContext old;
	HeapTuple	row;

	if (spool == NULL)
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "streamwin spool",
												  ALLOCSET_DEFAULT_SIZES);

		old = MemoryContextSwitchTo(cxt);
		spool = palloc0(sizeof(Spool));
		spool->cxt = cxt;
		strlcpy(spool->slot_name, NameStr(MyReplicationSlot->data.name), NAMEDATALEN);
		spool->table = st->table;
		spool->txn_lsn = txn->final_lsn;
		spool->next_index = index;
		spool->commit_time = txn->xact_time.commit_time;
		/* read by later transactions of this backend */
		spool->rows = tuplestore_begin_heap(false, true, work_mem);
		MemoryContextSwitchTo(old);
	}
	old = MemoryContextSwitchTo(st->cxt);
	row = form_row(st, rel, tuple);
	tuplestore_puttuple(spool->rows, row);
	spool->left++;
	heap_freetuple(row);
	MemoryContextSwitchTo(old);
}

static void
plugin_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation rel,
			  ReorderBufferChange *change)
{
	FetchState *st = active_fetch;
	int64		index;

	if (st == NULL || RelationGetRelid(rel) != st->table)
		return;
	if (change->action == REORDER_BUFFER_CHANGE_UPDATE ||
		change->action == REORDER_BUFFER_CHANGE_DELETE)
	{
		if (st->spooling)
			spool_count(st, change->action == REORDER_BUFFER_CHANGE_UPDATE ? 0 : 1);
		else if (count_ignored(st, txn))
		{
			if (change->action == REORDER_BUFFER_CHANGE_UPDATE)
				st->out->ignored_updates++;
			else
				st->out->ignored_deletes++;
		}
		return;
	}
	if (change->action != REORDER_BUFFER_CHANGE_INSERT || change->data.tp.newtuple == NULL)
		return;

	index = st->txn_index++;
	if (txn->final_lsn == st->start.lsn && index < st->start.index)
		return;					/* processed by an earlier batch */
	if (st->upto != NULL &&
		(txn->final_lsn > st->upto->lsn ||
		 (txn->final_lsn == st->upto->lsn && index >= st->upto->index)))
		return;					/* a replay stops where the batch stopped */
	if (st->spooling)
	{
		spool_row(st, txn, rel, &change->data.tp.newtuple->tuple, index);
		return;
	}
	if (st->out->nrows >= st->max_records && st->may_keep && st->upto == NULL)
	{
		/* the rest of this transaction goes to the spool, for the next batches */
		spool_discard();
		st->spooling = true;
		spool_row(st, txn, rel, &change->data.tp.newtuple->tuple, index);
		return;
	}
	if (st->out->nrows >= st->max_records)
	{
		/*
		 * The rest of this transaction goes to the next batch.  Stop the
		 * decoding here rather than let it replay the rest of a possibly
		 * huge transaction (from its spill files) only to skip it: an error
		 * is the one way out of the reorder buffer's replay, which cleans
		 * up after itself; decode_pass catches exactly this one.
		 */
		st->out->end.lsn = txn->final_lsn;
		st->out->end.index = index;
		st->stopping = true;
		ereport(ERROR,
				(errcode(ERRCODE_TABLE_BATCH_FULL),
				 errmsg("streamwin batch is full")));
	}
	take_row(st, txn, rel, &change->data.tp.newtuple->tuple, index);
}

static void
plugin_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
				Relation relations[], ReorderBufferChange *change)
{
	FetchState *st = active_fetch;

	if (st == NULL || (!st->spooling && !count_ignored(st, txn)))
		return;
	for (int i = 0; i < nrelations; i++)
		if (RelationGetRelid(relations[i]) == st->table)
		{
			if (st->spooling)
				spool_count(st, 2);
			else
				st->out->ignored_truncates++;
		}
}

static void
plugin_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	FetchState *st = active_fetch;

	if (st == NULL || st->upto != NULL)
		return;
	if (st->spooling)
	{
		/* this batch ends at the first spooled row */
		st->done = true;
		st->out->end.lsn = spool->txn_lsn;
		st->out->end.index = spool->next_index;
		spool->after.lsn = commit_lsn + 1;
		spool->after.index = 0;
		return;
	}
	if (st->out->nrows >= st->max_records)
	{
		st->done = true;
		st->out->end.lsn = commit_lsn + 1;
		st->out->end.index = 0;
	}
}

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = plugin_startup;
	cb->begin_cb = plugin_begin;
	cb->change_cb = plugin_change;
	cb->truncate_cb = plugin_truncate;
	cb->commit_cb = plugin_commit;
}

/* The plugin never writes output; these exist because the API wants them. */
static void
no_prepare_write(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid, bool last_write)
{
	elog(ERROR, "streamwin's output plugin does not produce output");
}

static void
no_write(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid, bool last_write)
{
	elog(ERROR, "streamwin's output plugin does not produce output");
}

/* --- Slots ---------------------------------------------------------------- */

/* Decoding reads this server's own WAL files, as logicalfuncs.c does. */
#define LOCAL_WAL_READER \
	XL_ROUTINE(.page_read = read_local_xlog_page, \
			   .segment_open = wal_segment_open, \
			   .segment_close = wal_segment_close)

/*
 * Recent PostgreSQL 15 releases only load output plugins listed in
 * output_plugin_libraries (a superuser setting), a guard against roles with
 * REPLICATION loading arbitrary libraries.  streamwin's plugin is loaded by
 * streamwin's own code, in this backend, and refuses any other use (see
 * plugin_startup), so it adds itself to the list for the duration of the
 * call.  Returns the GUC nest level to pass to AtEOXact_GUC, or -1.
 */
static int
allow_own_plugin(void)
{
	const char *list = GetConfigOption("output_plugin_libraries", true, false);
	int			level;

	if (list == NULL)
		return -1;				/* an older release: no such guard */
	level = NewGUCNestLevel();
	(void) set_config_option("output_plugin_libraries",
							 list[0] ? psprintf("%s, streamwin", list) : "streamwin",
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return level;
}

static void
restore_plugin_list(int level)
{
	if (level >= 0)
		AtEOXact_GUC(true, level);
}

static void
check_wal_level(void)
{
	if (wal_level < WAL_LEVEL_LOGICAL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table sources need wal_level = logical"),
				 errdetail("wal_level is \"%s\"; streamwin reads a table's inserts through logical decoding.",
						   GetConfigOption("wal_level", false, false)),
				 errhint("Set wal_level = logical in postgresql.conf (or with ALTER SYSTEM SET wal_level = logical) and restart the server.")));
}

void
table_source_check_relation(Oid relid)
{
	char		relkind = get_rel_relkind(relid);
	char	   *name = get_rel_name(relid);
	AclResult	acl;

	check_wal_level();
	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (relkind == RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a partitioned table", name),
				 errdetail("Table sources read plain tables; inserts into a partitioned table are stored in its partitions."),
				 errhint("Create a source for each partition.")));
	if (relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", name),
				 errhint("A table source reads the rows inserted into an ordinary table.")));
	if (IsCatalogRelationOid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a system catalog", name),
				 errhint("A table source reads the rows inserted into a user table.")));
	if (get_rel_persistence(relid) != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is %s", name,
						get_rel_persistence(relid) == RELPERSISTENCE_TEMP ? "temporary" : "unlogged"),
				 errdetail("Its rows are not written to the WAL, which is what a table source reads."),
				 get_rel_persistence(relid) == RELPERSISTENCE_TEMP ?
				 errhint("Use a permanent table.") :
				 errhint("Use a permanent table (ALTER TABLE %s SET LOGGED).", quote_identifier(name))));
	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, name);
}

/*
 * Is slot_name a slot of this database?  A database restored from a dump (or
 * copied from another) has the catalog, slot names included, of one whose
 * slots it does not own: those it must neither read, nor advance, nor drop.
 */
static bool
slot_is_ours(const char *slot_name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(slot_name, true);

	return slot != NULL && slot->data.database == MyDatabaseId;
}

/* Make the slot created by this transaction persistent at commit; drop others. */
static void
slot_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (dropping_slot != NULL)
			{
				char	   *name = dropping_slot;

				dropping_slot = NULL;
				/* waits for a worker of a dropped query to let go of it */
				if (slot_is_ours(name))
					ReplicationSlotDrop(name, false);
				pfree(name);
			}
			if (creating_slot != NULL && MyReplicationSlot != NULL)
			{
				ReplicationSlotPersist();
				ReplicationSlotRelease();
			}
			if (creating_slot != NULL)
				pfree(creating_slot);
			creating_slot = NULL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			kept_decoding_abort();
			/* an ephemeral slot disappears when released */
			if (creating_slot != NULL && MyReplicationSlot != NULL)
				ReplicationSlotRelease();
			if (creating_slot != NULL)
				pfree(creating_slot);
			creating_slot = NULL;
			if (dropping_slot != NULL)
				pfree(dropping_slot);
			dropping_slot = NULL;
			break;
		default:
			break;
	}
}

static void
register_xact_callback(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(slot_xact_callback, NULL);
		xact_callback_registered = true;
	}
}

/*
 * The lock that orders slot creation with the orphan reaper below: creators
 * hold it shared until their transaction ends (when the new source's
 * catalog row is visible), the reaper exclusively while it looks.
 */
static void
lock_slot_registry(LOCKMODE mode)
{
	LOCKTAG		tag;

	/* see STREAMWIN_LOCK_SPACE in streamwin.h */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, STREAMWIN_LOCK_SPACE, 0, 3);
	(void) LockAcquire(&tag, mode, false, false);
}

char *
source_slot_create(void)
{
	char		name[NAMEDATALEN];
	LogicalDecodingContext *ctx;
	int			level;

	check_wal_level();
	CheckLogicalDecodingRequirements();
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot create a table source in a transaction that has already written"),
				 errdetail("A table source creates a logical replication slot, which PostgreSQL only allows before the transaction's first write."),
				 errhint("Call streamwin.create_table_source() in a transaction of its own, or first in it.")));
	if (MyReplicationSlot != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot create two table sources in one transaction"),
				 errhint("Commit after each streamwin.create_table_source().")));

	lock_slot_registry(ShareLock);

	/* unique in the cluster: slots are shared by every database */
	snprintf(name, sizeof(name), "streamwin_%u_%llx",
			 MyDatabaseId, (unsigned long long) GetCurrentTimestamp());
	register_xact_callback();
	ReplicationSlotCreate(name, true, RS_EPHEMERAL, false);
	creating_slot = MemoryContextStrdup(TopMemoryContext, name);
	level = allow_own_plugin();
	ctx = CreateInitDecodingContext("streamwin", NIL, false, InvalidXLogRecPtr,
									LOCAL_WAL_READER,
									no_prepare_write, no_write, NULL);
	DecodingContextFindStartpoint(ctx);
	FreeDecodingContext(ctx);
	restore_plugin_list(level);
	return pstrdup(name);
}

void
source_slot_drop_at_commit(const char *slot_name)
{
	register_xact_callback();
	if (dropping_slot != NULL)
		pfree(dropping_slot);
	dropping_slot = MemoryContextStrdup(TopMemoryContext, slot_name);
}

static ReplicationSlot *
find_slot(const char *slot_name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(slot_name, true);

	if (slot == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replication slot \"%s\" of a streamwin table source does not exist", slot_name),
				 errdetail("It was dropped by hand, or its creation was never committed, or this database was restored from a dump, which does not carry replication slots, or this server was a standby, where PostgreSQL 15 keeps no logical slots."),
				 errhint("Drop the source and its queries, and create them again.")));
	/* a restore into another database of the same cluster finds the original's */
	if (slot->data.database != MyDatabaseId)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replication slot \"%s\" of a streamwin table source belongs to another database", slot_name),
				 errdetail("This database was restored from a dump or copied from another, and a dump does not carry replication slots: its table sources have none of their own."),
				 errhint("Drop the source and its queries, and create them again.")));
	return slot;
}

XLogRecPtr
source_slot_confirmed(const char *slot_name)
{
	ReplicationSlot *slot;
	XLogRecPtr	lsn;

	if (MyReplicationSlot != NULL && strcmp(NameStr(MyReplicationSlot->data.name), slot_name) == 0)
		slot = MyReplicationSlot;
	else
		slot = find_slot(slot_name);
	SpinLockAcquire(&slot->mutex);
	lsn = slot->data.confirmed_flush;
	SpinLockRelease(&slot->mutex);
	return lsn;
}

/* Acquire the slot unless this backend holds it already (it is creating it). */
static bool
slot_acquire(const char *slot_name)
{
	if (MyReplicationSlot != NULL)
	{
		if (strcmp(NameStr(MyReplicationSlot->data.name), slot_name) == 0)
			return false;
		elog(ERROR, "streamwin: backend already holds replication slot \"%s\"",
			 NameStr(MyReplicationSlot->data.name));
	}
	find_slot(slot_name);
	/* waits while another query of the source is decoding */
	ReplicationSlotAcquire(slot_name, false);
	return true;
}

/* Move the slot's confirmed position forward (never back) to lsn. */
static void
slot_confirm(XLogRecPtr lsn)
{
	if (XLogRecPtrIsInvalid(lsn) || lsn <= MyReplicationSlot->data.confirmed_flush)
		return;
	LogicalConfirmReceivedLocation(lsn);
	ReplicationSlotMarkDirty();
}

/*
 * The end of the WAL inserted so far, for XLogFlush().  The insert position
 * is where the next record will go, which, when the last record ended at a
 * page boundary, is past the next page's header: WAL that does not exist
 * yet, and XLogFlush() refuses to flush it.
 */
static XLogRecPtr
last_inserted_lsn(void)
{
	XLogRecPtr	lsn = GetXLogInsertRecPtr();
	int			offset = lsn % XLOG_BLCKSZ;

	if (XLogSegmentOffset(lsn, wal_segment_size) == SizeOfXLogLongPHD)
		lsn -= SizeOfXLogLongPHD;
	else if (offset == SizeOfXLogShortPHD)
		lsn -= SizeOfXLogShortPHD;
	return lsn;
}

/*
 * Every decoding pass starts over at the slot's restart point, which only
 * moves to a point where the WAL holds a running-transactions record (what
 * a decoding restart needs); the background writer logs one every 15
 * seconds at best.  Log one ourselves, at most once a second per backend,
 * so that restart points follow the queries closely and a batch re-reads
 * about a second of WAL rather than up to 15.
 */
static void
log_restart_point(void)
{
	static TimestampTz last_logged = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (now - last_logged < USECS_PER_SEC || RecoveryInProgress())
		return;
	(void) LogStandbySnapshot();
	last_logged = now;
}

/*
 * Decode one WAL record.  Returns false if the plugin stopped the decoding
 * because the batch is full (see plugin_change); the reorder buffer has
 * then cleaned up the transaction it was replaying, and the decoding
 * context must not be used for more records.
 */
static bool
process_record(LogicalDecodingContext *ctx, FetchState *st)
{
	ResourceOwner owner = CurrentResourceOwner;
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		LogicalDecodingProcessRecord(ctx, ctx->reader);
	}
	PG_CATCH();
	{
		if (st == NULL || !st->stopping)
			PG_RE_THROW();
		CurrentResourceOwner = owner;
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		return false;
	}
	PG_END_TRY();
	return true;
}

/*
 * A decoding context kept open after a fetch, so that the next fetch goes
 * on reading where this one stopped instead of decoding again from the
 * slot's restart point (in a backlog written before the query ran, that is
 * the start of the backlog for every batch).  Only for callers that fetch
 * again at once (run_available; a worker, in a backlog), after a fetch
 * that filled its batch at a transaction boundary, for at most
 * KEEP_MAX_FETCHES fetches in a row.  The slot stays acquired meanwhile,
 * also between a worker's transactions, which makes the other queries of
 * the source wait for it (they then take their turn, see fetch_table in
 * batch.c); a context must never outlive its hold on the slot, since a new
 * context clears the slot's spill files.  A fetch that does not start
 * exactly where the kept context stopped (a failed batch, a replay,
 * another slot) discards it, and so does an abort; the caller releases it
 * when it stops fetching (table_fetch_release, or the process exit).
 */
#define KEEP_MAX_FETCHES	100

typedef struct KeptDecoding
{
	char		slot_name[NAMEDATALEN];
	LogicalDecodingContext *ctx;
	MemoryContext cxt;			/* parent of the context's memory */
	bool		acquired;		/* by us, not held since slot creation */
	TablePosition resume;		/* where the next fetch must start */
	int			fetches;		/* fetches in a row on this context */
} KeptDecoding;

static KeptDecoding *kept = NULL;

/*
 * Forget a decoding context without calling into the decoding machinery
 * (after an error it may be in any state): close its WAL segment, free its
 * memory, release the slot if we acquired it.
 */
static void
discard_decoding(LogicalDecodingContext *ctx, MemoryContext cxt, bool acquired)
{
	if (ctx != NULL && ctx->reader != NULL && ctx->reader->seg.ws_file >= 0)
		wal_segment_close(ctx->reader);
	if (cxt != NULL)
		MemoryContextDelete(cxt);
	if (acquired && MyReplicationSlot != NULL)
		ReplicationSlotRelease();
}

/* End a kept decoding context cleanly (between fetches). */
void
table_fetch_release(void)
{
	KeptDecoding *k = kept;

	spool_discard();
	if (k == NULL)
		return;
	kept = NULL;
	FreeDecodingContext(k->ctx);
	discard_decoding(NULL, k->cxt, k->acquired);
	pfree(k);
}

/* At abort: the kept context is abandoned, whatever state it is in. */
static void
kept_decoding_abort(void)
{
	KeptDecoding *k = kept;

	if (k == NULL)
		return;
	kept = NULL;
	discard_decoding(k->ctx, k->cxt, k->acquired);
	pfree(k);
}

/* Decode from the slot's restart point; st == NULL: fast-forward only. */
static void
decode_pass(const char *slot_name, TablePosition start, FetchState *st,
			XLogRecPtr confirm_upto, XLogRecPtr *end_of_wal, XLogRecPtr *end_read)
{
	XLogRecPtr	start_lsn = start.lsn;
	bool		acquired;
	LogicalDecodingContext *ctx = NULL;
	MemoryContext dcxt = NULL;
	int			level;
	bool		reuse;
	int			fetches_in_row = 0;

	/*
	 * Decoding runs each transaction in an internal subtransaction, which
	 * leaves CurrentResourceOwner at the top transaction's and
	 * CurrentMemoryContext at whatever it last used (possibly inside the
	 * reorder buffer's memory, freed later): put the right ones back after
	 * every record, or a caller such as a SQL function would release its
	 * snapshots under the wrong owner (logicalfuncs.c does the same for the
	 * owner) and later allocations would land in freed memory.
	 */
	ResourceOwner owner = CurrentResourceOwner;
	MemoryContext cxt = CurrentMemoryContext;

	CheckLogicalDecodingRequirements();

	/*
	 * Only flushed WAL can be decoded, but with synchronous_commit = off a
	 * transaction is visible before its commit record is flushed: flush up
	 * to here first, so that a batch reads every transaction that committed
	 * before it started.
	 */
	log_restart_point();
	XLogFlush(last_inserted_lsn());
	*end_of_wal = GetFlushRecPtr(NULL);

	reuse = kept != NULL && st != NULL && st->upto == NULL &&
		strcmp(kept->slot_name, slot_name) == 0 &&
		kept->resume.lsn == start.lsn && kept->resume.index == start.index;
	if (!reuse)
		table_fetch_release();
	if (reuse)
	{
		ctx = kept->ctx;
		dcxt = kept->cxt;
		acquired = kept->acquired;
		fetches_in_row = kept->fetches;
		pfree(kept);
		kept = NULL;
	}
	else
		acquired = slot_acquire(slot_name);
	PG_TRY();
	{
		quiet_decoding = true;
		if (!reuse && start_lsn < MyReplicationSlot->data.confirmed_flush)
			ereport(ERROR,
					(errcode(ERRCODE_TABLE_POSITION_LOST),
					 errmsg("the table source no longer holds the changes from %X/%X on",
							LSN_FORMAT_ARGS(start_lsn)),
					 errdetail("Its replication slot \"%s\" starts at %X/%X.", slot_name,
							   LSN_FORMAT_ARGS(MyReplicationSlot->data.confirmed_flush)),
					 errhint("Start the query over with streamwin.reset_query(name, 'earliest').")));
		active_fetch = st;
		if (!reuse)
		{
			/* in memory of its own: the context may outlive this fetch */
			dcxt = AllocSetContextCreate(TopMemoryContext, "streamwin decoding",
										 ALLOCSET_DEFAULT_SIZES);
			MemoryContextSwitchTo(dcxt);
			level = allow_own_plugin();
			ctx = CreateDecodingContext(start_lsn, NIL, st == NULL,
										LOCAL_WAL_READER,
										no_prepare_write, no_write, NULL);
			restore_plugin_list(level);
			MemoryContextSwitchTo(cxt);
			XLogBeginRead(ctx->reader, MyReplicationSlot->data.restart_lsn);
		}
		InvalidateSystemCaches();

		/*
		 * Read in the context's own memory: the WAL reader allocates its
		 * record buffers in the current context as it goes, and those must
		 * live as long as the decoding context, which may be kept.
		 */
		MemoryContextSwitchTo(dcxt);
		while (ctx->reader->EndRecPtr < *end_of_wal && (st == NULL || !st->done))
		{
			char	   *errm = NULL;
			XLogRecord *record = XLogReadRecord(ctx->reader, &errm);

			if (errm)
				elog(ERROR, "could not read WAL for table source: %s", errm);
			if (record != NULL && !process_record(ctx, st))
			{
				/* the batch filled up inside a transaction */
				st->done = true;
				break;
			}
			CurrentResourceOwner = owner;
			MemoryContextSwitchTo(dcxt);
			/* a replay is complete once the commit it ends at is read */
			if (st != NULL && st->upto != NULL && ctx->reader->EndRecPtr > st->upto->lsn)
				break;
			CHECK_FOR_INTERRUPTS();
		}
		MemoryContextSwitchTo(cxt);
		*end_read = ctx->reader->EndRecPtr;
		if (st == NULL)
			confirm_upto = *end_read;
		slot_confirm(confirm_upto);
		active_fetch = NULL;
		quiet_decoding = false;

		/*
		 * Keep the context if the batch filled up at a transaction boundary
		 * (a backlog: the next fetch follows at once); not after the plugin
		 * stopped it inside a transaction, which leaves it unusable.
		 */
		if (st != NULL && st->may_keep && st->upto == NULL && st->done && !st->stopping &&
			(!reuse || fetches_in_row < KEEP_MAX_FETCHES))
		{
			kept = MemoryContextAllocZero(TopMemoryContext, sizeof(KeptDecoding));
			strlcpy(kept->slot_name, slot_name, NAMEDATALEN);
			kept->ctx = ctx;
			kept->cxt = dcxt;
			kept->acquired = acquired;
			/* the context goes on after the spooled transaction */
			kept->resume = st->spooling ? spool->after : st->out->end;
			kept->fetches = reuse ? fetches_in_row + 1 : 1;
			register_xact_callback();
		}
		else
		{
			FreeDecodingContext(ctx);
			MemoryContextSwitchTo(cxt);
			discard_decoding(NULL, dcxt, acquired);
		}
		ctx = NULL;
		MemoryContextSwitchTo(cxt);
		InvalidateSystemCaches();
	}
	PG_CATCH();
	{
		CurrentResourceOwner = owner;
		MemoryContextSwitchTo(cxt);
		active_fetch = NULL;
		quiet_decoding = false;
		InvalidateSystemCaches();
		discard_decoding(ctx, dcxt, acquired);
		if (st != NULL && st->spooling)
			spool_discard();	/* cut short: it would lack rows */
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * Fill the fetch from the spool, up to max_records rows, with the changes
 * counted between them.  Returns true if rows are left in it (the batch is
 * full).
 */
static bool
take_spooled(FetchState *st)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(st->desc, &TTSOpsMinimalTuple);

	while (st->out->nrows < st->max_records && spool->left > 0)
	{
		if (!tuplestore_gettupleslot(spool->rows, true, false, slot))
			elog(ERROR, "streamwin spool ended %lld rows early", (long long) spool->left);
		append_row(st, ExecCopySlotHeapTuple(slot), spool->txn_lsn, spool->next_index++,
				   spool->commit_time);
		spool->left--;
	}
	ExecDropSingleTupleTableSlot(slot);
	while (spool->next_change < spool->nchanges &&
		   spool->changes[spool->next_change].after < spool->next_index)
	{
		int64	   *n = spool->changes[spool->next_change++].n;

		st->out->ignored_updates += n[0];
		st->out->ignored_deletes += n[1];
		st->out->ignored_truncates += n[2];
	}
	return spool->left > 0;
}

void
table_fetch(const char *slot_name, Oid table, TupleDesc desc, TablePosition start,
			const TablePosition *upto, int max_records, XLogRecPtr confirm_upto,
			bool may_keep, TableFetch *out)
{
	FetchState	st;
	XLogRecPtr	end_read;

	memset(out, 0, sizeof(TableFetch));
	memset(&st, 0, sizeof(st));
	st.table = table;
	st.desc = desc;
	st.start = start;
	st.upto = upto;
	st.max_records = upto != NULL ? INT_MAX : max_records;
	st.may_keep = may_keep;
	st.cxt = CurrentMemoryContext;
	st.out = out;
	st.capacity = 1024;
	st.map = palloc(sizeof(int) * Max(desc->natts, 1));
	st.values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	st.nulls = palloc(sizeof(bool) * Max(desc->natts, 1));
	out->rows = palloc(sizeof(KafkaMessage) * st.capacity);

	if (spool != NULL &&
		(upto != NULL || strcmp(spool->slot_name, slot_name) != 0 || spool->table != table ||
		 spool->txn_lsn != start.lsn || spool->next_index != start.index))
		spool_discard();
	if (spool != NULL)
	{
		if (take_spooled(&st))
		{
			out->end.lsn = spool->txn_lsn;
			out->end.index = spool->next_index;
			out->end_of_wal = GetFlushRecPtr(NULL);
			return;
		}
		/* the transaction is done: on with decoding after it */
		start = spool->after;
		st.start = start;
		spool_discard();
		if (out->nrows >= st.max_records)
		{
			out->end = start;
			out->end_of_wal = GetFlushRecPtr(NULL);
			return;
		}
	}

	decode_pass(slot_name, start, &st, confirm_upto, &out->end_of_wal, &end_read);

	if (upto != NULL)
		out->end = *upto;
	else if (!st.done)
	{
		/* every transaction that committed before end_read was read whole */
		out->end.lsn = Max(start.lsn, end_read);
		out->end.index = out->end.lsn == start.lsn ? start.index : 0;
		out->at_end = true;
	}
}

void
source_slot_advance(const char *slot_name, int32 source_id)
{
	XLogRecPtr	end_of_wal;
	XLogRecPtr	end_read;
	TablePosition from;

	/* nothing to release in a restored database, which has no slot */
	if (!slot_is_ours(slot_name))
		return;
	from.lsn = source_slot_confirmed(slot_name);
	from.index = 0;
	/* not while a query's start is being set (see source_hold_start) */
	if (!source_confirm_begin(source_id))
		return;
	PG_TRY();
	{
		decode_pass(slot_name, from, NULL, InvalidXLogRecPtr, &end_of_wal, &end_read);
	}
	PG_FINALLY();
	{
		source_confirm_end(source_id);
	}
	PG_END_TRY();
}

/*
 * source_slots_reap
 *		Drop this database's streamwin slots that no source owns: left by a
 *		DROP EXTENSION (which cannot drop slots), or by a drop_source whose
 *		transaction failed after its pre-commit.  known: the slot names of
 *		the sources (NULL: the extension is not installed).  Called by the
 *		launcher's starter, in a transaction that has read them under
 *		source_slots_lock().
 */
void
source_slots_reap(List *known)
{
	List	   *orphans = NIL;
	char		prefix[NAMEDATALEN];
	ListCell   *lc;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	snprintf(prefix, sizeof(prefix), "streamwin_%u_", MyDatabaseId);
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (int i = 0; i < max_replication_slots; i++)
	{
		ReplicationSlot *slot = &ReplicationSlotCtl->replication_slots[i];
		bool		candidate;

		if (!slot->in_use)
			continue;
		SpinLockAcquire(&slot->mutex);
		candidate = slot->data.database == MyDatabaseId &&
			slot->data.persistency == RS_PERSISTENT &&
			slot->active_pid == 0 &&
			strcmp(NameStr(slot->data.plugin), "streamwin") == 0 &&
			strncmp(NameStr(slot->data.name), prefix, strlen(prefix)) == 0;
		SpinLockRelease(&slot->mutex);
		if (candidate)
			orphans = lappend(orphans, pstrdup(NameStr(slot->data.name)));
	}
	LWLockRelease(ReplicationSlotControlLock);

	foreach(lc, orphans)
	{
		char	   *name = lfirst(lc);
		bool		owned = false;
		ListCell   *k;

		foreach(k, known)
			if (strcmp(lfirst(k), name) == 0)
				owned = true;
		if (owned)
			continue;
		/* in a subtransaction: a slot in use again is for the next round */
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			ReplicationSlotDrop(name, true);
			ReleaseCurrentSubTransaction();
			ereport(LOG,
					(errmsg("streamwin: dropped replication slot \"%s\", which no table source owns", name)));
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			if (MyReplicationSlot != NULL)
				ReplicationSlotRelease();
			RollbackAndReleaseCurrentSubTransaction();
		}
		PG_END_TRY();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
}

/* Taken by the reaper's caller before it reads the sources' slot names. */
void
source_slots_lock(void)
{
	lock_slot_registry(ExclusiveLock);
}

/*
 * source_slot_in_use
 *		Does some backend hold the slot now?
 */
bool
source_slot_in_use(const char *slot_name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(slot_name, true);
	int			pid = 0;

	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		pid = slot->active_pid;
		SpinLockRelease(&slot->mutex);
	}
	return pid != 0 && pid != MyProcPid;
}

/*
 * The lock that keeps a source's slot from being confirmed past the start
 * of a query being created.  A new query starts at the slot's confirmed
 * position ('earliest'), but until its creation commits, other queries'
 * batches cannot see it when they compute how far the slot may go.  So
 * create_query and reset_query hold this lock (shared) from reading the
 * position until they commit, and a batch confirms the slot only if it
 * gets the lock (exclusive, without waiting) before computing how far:
 * otherwise it leaves the slot where it is this time.
 */
static void
source_confirm_locktag(LOCKTAG *tag, int32 source_id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, STREAMWIN_LOCK_SPACE, (uint32) source_id, 4);
}

void
source_hold_start(int32 source_id)
{
	LOCKTAG		tag;

	source_confirm_locktag(&tag, source_id);
	(void) LockAcquire(&tag, ShareLock, false, false);
}

bool
source_confirm_begin(int32 source_id)
{
	LOCKTAG		tag;

	source_confirm_locktag(&tag, source_id);
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

void
source_confirm_end(int32 source_id)
{
	LOCKTAG		tag;

	source_confirm_locktag(&tag, source_id);
	LockRelease(&tag, ExclusiveLock, false);
}
