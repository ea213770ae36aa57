/*-------------------------------------------------------------------------
 *
 * table_plugin.c
 *	  streamwin's logical decoding output plugin, driven only by
 *	  table_fetch() in the same backend (see table_source_int.h), and the
 *	  spool of a transaction larger than a batch.
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

#include "catalog_types.h"
#include "table_source_int.h"

/* Output plugin entry point: the library is loaded by slot name "streamwin". */
extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

Spool	   *spool = NULL;

/* Count an update (0), delete (1) or truncate (2) seen after the cut. */
static void
spool_count(FetchState *st, int kind)
{
	int64		after = st->txn_index - 1;

	if (spool->nchanges == 0 || spool->changes[spool->nchanges - 1].after != after)
	{
		if (spool->nchanges == spool->maxchanges)
		{
			/* (a transaction of tens of millions of changes passes 1 GB) */
			spool->maxchanges = Max(spool->maxchanges * 2, 16);
			spool->changes = spool->changes == NULL ?
				MemoryContextAllocHuge(spool->cxt, sizeof(*spool->changes) * spool->maxchanges) :
				repalloc_huge(spool->changes, sizeof(*spool->changes) * spool->maxchanges);
		}
		memset(&spool->changes[spool->nchanges], 0, sizeof(*spool->changes));
		spool->changes[spool->nchanges++].after = after;
	}
	spool->changes[spool->nchanges - 1].n[kind]++;
}

void
spool_discard(void)
{
	Spool	   *sp = spool;

	if (sp == NULL)
		return;
	spool = NULL;
	tuplestore_end(sp->rows);
	MemoryContextDelete(sp->cxt);
}

/*
 * Whether this backend is decoding for a fetch: true only inside
 * decode_pass (table_fetch.c), which sets and clears it.  The one process
 * global of the plugin, because neither of its readers can be handed
 * anything else: plugin_startup runs inside CreateDecodingContext, before
 * decode_pass has the context, and refuses any decoding of a streamwin
 * slot but this one; and the log hook below sees only the message.
 *
 * PostgreSQL logs (at LOG) the start of every decoding session: "starting
 * logical decoding for slot", "found consistent point".  For a walsender
 * that is once per connection; a query worker starts one per batch, which
 * would fill the server log.  While this backend decodes for a batch, those
 * LOG messages are kept out of the log; warnings and errors are not.
 */
bool		decoding_for_fetch = false;
static emit_log_hook_type prev_emit_log_hook = NULL;

static void
quiet_decoding_hook(ErrorData *edata)
{
	if (decoding_for_fetch && edata->elevel == LOG)
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

/*
 * The plugin's callbacks find the fetch they write into as the decoding
 * context's output_plugin_private, which decode_pass sets for each fetch
 * (NULL between fetches of a kept context).
 */
static inline FetchState *
fetch_of(LogicalDecodingContext *ctx)
{
	return (FetchState *) ctx->output_plugin_private;
}

static void
plugin_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
	opt->receive_rewrites = false;
	if (!is_init && !decoding_for_fetch)
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
	FetchState *st = fetch_of(ctx);

	if (st != NULL)
	{
		st->txn_index = 0;
		st->snapshot_ended = false;
	}
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

/* A collation's name for a message ("none": not collatable) */
static const char *
collation_name(Oid collid)
{
	char	   *name = OidIsValid(collid) ? get_collation_name(collid) : NULL;

	return name ? name : "none";
}

/*
 * For each column of the source's row type `to`, the attribute of the
 * table's row type `from` of the same name into map[] (-1: none, e.g. a
 * column dropped since).  Only its first ntable columns are the table's:
 * the metadata columns and the change column after them are not, also when
 * the table has gained a column of the same name since.  A column whose
 * type changed cannot be delivered in the type the source was created with.
 */
void
table_column_map(TupleDesc from, TupleDesc to, int ntable, Oid table, int *map)
{
	for (int i = 0; i < to->natts; i++)
	{
		Form_pg_attribute want = TupleDescAttr(to, i);

		map[i] = -1;
		for (int a = 0; i < ntable && a < from->natts; a++)
		{
			Form_pg_attribute have = TupleDescAttr(from, a);

			if (have->attisdropped || strcmp(NameStr(have->attname), NameStr(want->attname)) != 0)
				continue;
			/*
			 * its modifier too: varchar(10) to varchar(100) rewrites no row,
			 * and would deliver values longer than the source's column says
			 */
			if (have->atttypid != want->atttypid || have->atttypmod != want->atttypmod)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of table \"%s\" changed type from %s to %s",
								NameStr(want->attname), get_rel_name(table),
								format_type_with_typemod(want->atttypid, want->atttypmod),
								format_type_with_typemod(have->atttypid, have->atttypmod)),
						 errdetail("A table source delivers rows in the column types it was created with."),
						 errhint("Create a new source for the table, and queries over it.")));
			/*
			 * and its collation, which ALTER COLUMN ... TYPE ... COLLATE
			 * changes without a rewrite: the source's queries would sort and
			 * compare in the old one, unlike the same query over the table
			 */
			if (have->attcollation != want->attcollation)
				ereport(ERROR,
						(errcode(ERRCODE_COLLATION_MISMATCH),
						 errmsg("column \"%s\" of table \"%s\" changed collation from \"%s\" to \"%s\"",
								NameStr(want->attname), get_rel_name(table),
								collation_name(want->attcollation), collation_name(have->attcollation)),
						 errdetail("A table source's queries sort and compare a column in the collation it had when the source was created."),
						 errhint("Create a new source for the table, and queries over it.")));
			map[i] = a;
			break;
		}
	}
}

void
table_changelog_columns_check(TupleDesc from, TupleDesc to, const int *map, int nmetadata,
							  const AttrNumber *attnums, int nattnums, Oid table)
{
	if (attnums != NULL && nattnums != to->natts - nmetadata - 1)
		elog(ERROR, "streamwin: a changelog source of table \"%s\" records %d columns for %d",
			 get_rel_name(table), nattnums, to->natts - nmetadata - 1);
	for (int i = 0; i < to->natts - nmetadata - 1; i++)
		if (map[i] < 0 || (attnums != NULL && TupleDescAttr(from, map[i])->attnum != attnums[i]))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of table \"%s\" was dropped or renamed",
							NameStr(TupleDescAttr(to, i)->attname), get_rel_name(table)),
					 errdetail("A changelog source retracts the rows it has read with the columns it was created with; without this one its retractions would not be exact."),
					 errhint("Create a new source for the table, and queries over it.")));
}

/*
 * An append-only source's column renamed in the table since the source was
 * created (attnums: the attribute each column was, table_source_attnums;
 * NULL for a source created before they were recorded): it would read NULL
 * under its old name, silently, where a dropped column reads NULL as the
 * docs say.  A column dropped and added again under its name is read.
 */
static void
table_append_columns_check(TupleDesc from, TupleDesc to, int ntable, const AttrNumber *attnums,
						   int nattnums, Oid table)
{
	for (int i = 0; attnums != NULL && i < ntable && i < nattnums; i++)
	{
		Form_pg_attribute was;

		if (attnums[i] < 1 || attnums[i] > from->natts)
			continue;
		was = TupleDescAttr(from, attnums[i] - 1);
		if (!was->attisdropped &&
			strcmp(NameStr(was->attname), NameStr(TupleDescAttr(to, i)->attname)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of table \"%s\" was renamed to \"%s\"",
							NameStr(TupleDescAttr(to, i)->attname), get_rel_name(table),
							NameStr(was->attname)),
					 errdetail("A table source reads the table's columns by the names it was created with: this one would read NULL."),
					 errhint("Create a new source for the table, and queries over it.")));
	}
}

/*
 * Relcache invalidations seen by this backend: decoding runs those of the
 * transactions it replays (an ALTER TABLE of the table among them).  The
 * row type a map was built from is known by its address, and a row type
 * rebuilt after an invalidation may well take the address of the one it
 * replaces (a column added: the same size of allocation); so a map built
 * before an invalidation is built again.
 */
static uint64 relcache_generation = 1;
static bool relcache_watched = false;

static void
relcache_invalidated(Datum arg, Oid relid)
{
	relcache_generation++;
}

/* Build the map from the table's row type, as of this change, to the source's. */
static void
build_map(FetchState *st, TupleDesc from)
{
	MemoryContext old = MemoryContextSwitchTo(st->cxt);

	if (!relcache_watched)
	{
		CacheRegisterRelcacheCallback(relcache_invalidated, (Datum) 0);
		relcache_watched = true;
	}
	if (st->map_from != NULL)
	{
		pfree(st->src_values);
		pfree(st->src_nulls);
		pfree(st->old_values);
		pfree(st->old_nulls);
	}
	st->map_from = from;
	st->map_generation = relcache_generation;
	st->src_natts = from->natts;
	st->src_values = palloc(sizeof(Datum) * Max(from->natts, 1));
	st->src_nulls = palloc(sizeof(bool) * Max(from->natts, 1));
	st->old_values = palloc(sizeof(Datum) * Max(from->natts, 1));
	st->old_nulls = palloc(sizeof(bool) * Max(from->natts, 1));
	table_column_map(from, st->desc,
					 st->desc->natts - st->nmetadata - (st->change_attno > 0 ? 1 : 0),
					 st->table, st->map);
	if (st->change_attno > 0)
		table_changelog_columns_check(from, st->desc, st->map, st->nmetadata, st->attnums,
									  st->nattnums, st->table);
	else
		table_append_columns_check(from, st->desc, st->desc->natts - st->nmetadata, st->attnums,
								   st->nattnums, st->table);
	/* (the change column and metadata columns come last, not from it) */
	st->map_identity = from->natts <= st->desc->natts;
	for (int i = 0; i < st->desc->natts; i++)
		if (st->map[i] != (i < from->natts ? i : -1))
			st->map_identity = false;
	MemoryContextSwitchTo(old);
}

/*
 * The new version of an updated row keeps each TOASTed value the update
 * did not change as a pointer to the value on disk: its chunks are not in
 * the WAL of the update, and by the time the change is decoded a later
 * update or delete of the row and a VACUUM may have removed them (the
 * fetch then fails for good: "missing chunk number 0 for toast value").
 * The old version, which REPLICA IDENTITY FULL writes whole with its
 * values inline, holds the same value: take it from there.
 */
static void
unchanged_toast_from_old(FetchState *st, TupleDesc from, HeapTuple old)
{
	bool		deformed = false;

	for (int a = 0; a < from->natts; a++)
	{
		if (st->src_nulls[a] || TupleDescAttr(from, a)->attlen != -1 ||
			!VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(st->src_values[a])))
			continue;
		if (!deformed)
		{
			heap_deform_tuple(old, from, st->old_values, st->old_nulls);
			deformed = true;
		}
		/*
		 * REPLICA IDENTITY FULL writes the old version with every value
		 * inline; should one not be, the value is read from disk as before.
		 */
		if (!st->old_nulls[a] && !VARATT_IS_EXTERNAL(DatumGetPointer(st->old_values[a])))
			st->src_values[a] = st->old_values[a];
	}
}

/*
 * One row of the table in the source's row type, in the current memory
 * context; a changelog source's change column set to change.  old: for the
 * new version of an updated row, its old version (else NULL).  rel NULL: a
 * snapshot row, already in the source's row type.
 *
 * Where the source's columns begin with the table's, as they are, the row
 * is a copy of the table's tuple: the columns after the table's (metadata,
 * the change column) are left out of it and filled in when the row is
 * decoded, the change from the SourceRow (append_row).  That spares each
 * row a deform and a form.  A tuple with fewer attributes than the table
 * (written before a column was added; an old version REPLICA IDENTITY FULL
 * logs as it lies on disk) takes the long way, which reads the added
 * column's default from the table's row type.
 */
static HeapTuple
form_row(FetchState *st, Relation rel, HeapTuple tuple, HeapTuple old, int16 change)
{
	TupleDesc	from;
	HeapTuple	row;

	if (rel == NULL)
		return heap_copytuple(tuple);
	from = RelationGetDescr(rel);
	if (from != st->map_from || st->map_generation != relcache_generation)
		build_map(st, from);
	if (st->map_identity && !HeapTupleHasExternal(tuple) &&
		HeapTupleHeaderGetNatts(tuple->t_data) == from->natts)
		row = heap_copytuple(tuple);	/* same layout: one copy */
	else
	{
		bool		detoasted = false;

		heap_deform_tuple(tuple, from, st->src_values, st->src_nulls);
		if (old != NULL && HeapTupleHasExternal(tuple))
			unchanged_toast_from_old(st, from, old);
		for (int i = 0; i < st->desc->natts; i++)
		{
			int			a = st->map[i];
			Form_pg_attribute att = TupleDescAttr(st->desc, i);

			st->nulls[i] = a < 0 || st->src_nulls[a];
			if (st->nulls[i])
				continue;
			st->values[i] = st->src_values[a];
			/*
			 * toasted values point into the reorder buffer: take copies, for
			 * as long as the row is formed (a spooled transaction's rows may
			 * be many more than a batch's)
			 */
			if (att->attlen == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(st->values[i])))
			{
				MemoryContext oldcxt;

				if (st->row_cxt == NULL)
					st->row_cxt = AllocSetContextCreate(st->cxt, "streamwin detoasted row values",
														ALLOCSET_DEFAULT_SIZES);
				oldcxt = MemoryContextSwitchTo(st->row_cxt);
				st->values[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
																	  DatumGetPointer(st->values[i])));
				MemoryContextSwitchTo(oldcxt);
				detoasted = true;
			}
		}
		if (st->change_attno > 0)
		{
			st->values[st->change_attno - 1] = Int16GetDatum(change);
			st->nulls[st->change_attno - 1] = false;
		}
		row = heap_form_tuple(st->desc, st->values, st->nulls);
		if (detoasted)
			MemoryContextReset(st->row_cxt);
	}
	return row;
}

/* A changelog row's change: +1 for a row it adds, -1 for one it retracts. */
static inline int16
change_sign(char kind)
{
	return kind == CHANGE_INSERT || kind == CHANGE_UPDATE ? 1 : -1;
}

/* Append a row (in st->cxt) to the fetch. */
void
append_row(FetchState *st, HeapTuple row, XLogRecPtr lsn, int64 index, TimestampTz commit_time,
		   char kind)
{
	TableFetch *out = st->out;
	SourceRow  *m;

	if (out->nrows == st->capacity)
	{
		st->capacity = Max(st->capacity * 2, 1024);
		out->rows = repalloc_huge(out->rows, sizeof(SourceRow) * st->capacity);
	}
	m = &out->rows[out->nrows++];
	memset(m, 0, sizeof(SourceRow));
	m->payload = (const char *) row->t_data;
	m->len = row->t_len;
	m->offset = (int64) lsn;
	m->partition = (int32) Min(index, PG_INT32_MAX);
	m->has_timestamp = true;
	m->timestamp = commit_time;
	if (kind != CHANGE_NONE)
		m->change = change_sign(kind);
	if (kind < CHANGE_UPDATE_OLD)
		out->changes[(int) kind]++;
}

/* Append one row of the table to the fetch, in the source's row type. */
static void
take_row(FetchState *st, ReorderBufferTXN *txn, Relation rel, HeapTuple tuple,
		 HeapTuple old_version, int64 index, char kind)
{
	MemoryContext old = MemoryContextSwitchTo(st->cxt);

	append_row(st, form_row(st, rel, tuple, old_version,
							change_sign(kind)),
			   txn->final_lsn, index, txn->xact_time.commit_time, kind);
	MemoryContextSwitchTo(old);
}

/* Note the kind of a changelog source's spooled row (CHANGE_NONE: none). */
static void
spool_kind(char kind)
{
	if (kind == CHANGE_NONE)
		return;
	if (spool->nkinds == spool->maxkinds)
	{
		spool->maxkinds = Max(spool->maxkinds * 2, 1024);
		spool->kinds = spool->kinds == NULL ?
			MemoryContextAlloc(spool->cxt, spool->maxkinds) :
			repalloc_huge(spool->kinds, spool->maxkinds);
	}
	spool->kinds[spool->nkinds++] = kind;
}

/* Put one row of the transaction being cut into the spool. */
static void
spool_row(FetchState *st, ReorderBufferTXN *txn, Relation rel, HeapTuple tuple,
		  HeapTuple old_version, int64 index, char kind)
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
		spool->query_id = st->query_id;
		spool->txn_lsn = txn->final_lsn;
		spool->next_index = index;
		spool->commit_time = txn->xact_time.commit_time;
		/* read by later transactions of this backend */
		spool->rows = tuplestore_begin_heap(false, true, work_mem);
		MemoryContextSwitchTo(old);
	}
	old = MemoryContextSwitchTo(st->cxt);
	row = form_row(st, rel, tuple, old_version,
				   change_sign(kind));
	tuplestore_puttuple(spool->rows, row);
	spool->left++;
	spool_kind(kind);
	heap_freetuple(row);
	MemoryContextSwitchTo(old);
}

/*
 * Deliver one row of the table (one of a change's rows) at the next index
 * of its transaction: to the batch, to the spool, or not at all when an
 * earlier batch processed it or a replay stops before it.  old_version:
 * the old version of an updated row whose new version this is, else NULL.
 */
static void
deliver_row(FetchState *st, ReorderBufferTXN *txn, Relation rel, HeapTuple tuple,
			HeapTuple old_version, char kind)
{
	int64		index = st->txn_index++;

	if (txn->final_lsn == st->start.lsn && index < st->start.index)
		return;					/* processed by an earlier batch */
	if (st->upto != NULL &&
		(txn->final_lsn > st->upto->lsn ||
		 (txn->final_lsn == st->upto->lsn && index >= st->upto->index)))
		return;					/* a replay stops where the batch stopped */
	if (st->spooling)
	{
		spool_row(st, txn, rel, tuple, old_version, index, kind);
		return;
	}
	if (st->out->nrows >= st->max_records && st->may_keep && st->upto == NULL)
	{
		/* the rest of this transaction: to the spool, for the next batches */
		spool_discard();
		st->spooling = true;
		spool_row(st, txn, rel, tuple, old_version, index, kind);
		return;
	}
	if (st->out->nrows >= st->max_records)
	{
		/*
		 * The rest of this transaction goes to the next batch.  Stop the
		 * decoding here rather than let it replay the rest of a possibly huge
		 * transaction (from its spill files) only to skip it: an error is the
		 * one way out of the reorder buffer's replay, which cleans up after
		 * itself; decode_pass catches exactly this one.
		 */
		st->out->end.lsn = txn->final_lsn;
		st->out->end.index = index;
		st->stopping = true;
		ereport(ERROR,
				(errcode(ERRCODE_TABLE_BATCH_FULL),
				 errmsg("streamwin batch is full")));
	}
	take_row(st, txn, rel, tuple, old_version, index, kind);
}

/*
 * The old version of a changelog source's row: PostgreSQL writes it whole
 * into the WAL only with REPLICA IDENTITY FULL, which the source was
 * created with; a table altered since then cannot be followed exactly.
 */
static HeapTuple
old_row(FetchState *st, Relation rel, ReorderBufferChange *change)
{
	if (rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL || change->data.tp.oldtuple == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" of a changelog source no longer has REPLICA IDENTITY FULL",
						RelationGetRelationName(rel)),
				 errdetail("An update or delete was written without the old row, which the source retracts."),
				 errhint("Run ALTER TABLE %s REPLICA IDENTITY FULL, then streamwin.reset_query() of each query of the source.",
						 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													RelationGetRelationName(rel)))));
	return &change->data.tp.oldtuple->tuple;
}

/*
 * A changelog source's rows of one change: an insert adds the new row, a
 * delete retracts the old one, an update retracts the old version and adds
 * the new one.
 */
static void
deliver_change(FetchState *st, ReorderBufferTXN *txn, Relation rel, ReorderBufferChange *change)
{
	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			if (change->data.tp.newtuple != NULL)
				deliver_row(st, txn, rel, &change->data.tp.newtuple->tuple, NULL, CHANGE_INSERT);
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			{
				HeapTuple	old = old_row(st, rel, change);

				deliver_row(st, txn, rel, old, NULL, CHANGE_UPDATE_OLD);
				deliver_row(st, txn, rel, &change->data.tp.newtuple->tuple, old, CHANGE_UPDATE);
			}
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			deliver_row(st, txn, rel, old_row(st, rel, change), NULL, CHANGE_DELETE);
			break;
		default:
			break;
	}
}

static void
plugin_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation rel,
			  ReorderBufferChange *change)
{
	FetchState *st = fetch_of(ctx);

	/*
	 * A replay or a resumed transaction passes over millions of changes
	 * before its first row, in a loop of the reorder buffer's that serves
	 * no interrupts: a cancel, a statement_timeout or a stop waits for none
	 */
	CHECK_FOR_INTERRUPTS();
	if (st == NULL || RelationGetRelid(rel) != st->table)
		return;
	if (st->change_attno > 0)
	{
		deliver_change(st, txn, rel, change);
		return;
	}
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
	deliver_row(st, txn, rel, &change->data.tp.newtuple->tuple, NULL, CHANGE_NONE);
}

/*
 * TRUNCATE of a changelog source's table: its rows leave without a row
 * each to retract, so no query of the source can stay exact past it.  The
 * batch that reaches it fails, saying so, and so does every later one
 * until the queries are reset past it.  A batch that was putting the rest
 * of the TRUNCATE's transaction into the spool (it is full) stops before
 * it instead, so that the rows before the TRUNCATE are delivered; one
 * that fills up in that transaction without spooling fails the same way.
 */
static void
truncate_changelog(FetchState *st, ReorderBufferTXN *txn, int nrelations, Relation relations[])
{
	for (int i = 0; i < nrelations; i++)
	{
		if (RelationGetRelid(relations[i]) != st->table)
			continue;
		if (st->upto != NULL)
			return;				/* a replay stops before (its batch did) */
		if (st->spooling)
		{
			st->out->end.lsn = spool->txn_lsn;
			st->out->end.index = spool->next_index;
			spool_discard();
			st->spooling = false;
			st->stopping = true;
			ereport(ERROR,
					(errcode(ERRCODE_TABLE_BATCH_FULL),
					 errmsg("streamwin batch is full")));
		}
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" of a changelog source was truncated",
						RelationGetRelationName(relations[i])),
				 errdetail("TRUNCATE removes rows without a change each, so the queries of the source cannot retract them."),
				 errhint("Reset each query of the source with streamwin.reset_query(name, 'latest'), which empties its result, to go on from the emptied table; "
						 "on a changelog source's table, DELETE rows instead of truncating it.")));
	}
}

static void
plugin_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, int nrelations,
				Relation relations[], ReorderBufferChange *change)
{
	FetchState *st = fetch_of(ctx);

	if (st != NULL && st->change_attno > 0)
	{
		truncate_changelog(st, txn, nrelations, relations);
		return;
	}
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
	FetchState *st = fetch_of(ctx);

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

/*
 * If a snapshot message is query_id's, its row into *tuple (pointing into
 * the message, maybe unaligned: the callers only copy it, with memcpy,
 * into the batch or the spool), and true.
 */
static bool
snapshot_row(const char *message, Size size, int32 query_id, HeapTuple tuple)
{
	SnapshotMessageHeader header;

	if (size < sizeof(header) + SizeofHeapTupleHeader)
		elog(ERROR, "streamwin: snapshot message of %zu bytes is too short", size);
	memcpy(&header, message, sizeof(header));
	if (header.query_id != query_id)
		return false;
	tuple->t_len = size - sizeof(header);
	ItemPointerSetInvalid(&tuple->t_self);
	tuple->t_tableOid = InvalidOid;
	tuple->t_data = (HeapTupleHeader) (message + sizeof(header));
	return true;
}

/*
 * A row of the table as a changelog query's start found it (see
 * table_snapshot.c): an insert, for that query alone.
 */
static void
plugin_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr message_lsn,
			   bool transactional, const char *prefix, Size message_size, const char *message)
{
	FetchState *st = fetch_of(ctx);
	HeapTupleData tuple;

	if (st == NULL || st->change_attno == 0 || !transactional || st->snapshot_ended)
		return;
	/* any role may write such a message: the query's are its start's transaction's */
	if (TransactionIdIsValid(st->snapshot_xid) && txn->xid != st->snapshot_xid)
		return;
	/* a start that the same transaction made again replaces this one */
	if (message_lsn < st->snapshot_lsn)
		return;
	/*
	 * and they end with their end message (a start written before it had
	 * none: its transaction, long committed, holds streamwin's alone)
	 */
	if (strcmp(prefix, TABLE_SNAPSHOT_END_PREFIX) == 0)
	{
		SnapshotMessageHeader header;

		if (message_size == sizeof(header))
		{
			memcpy(&header, message, sizeof(header));
			st->snapshot_ended = header.query_id == st->query_id;
		}
		return;
	}
	if (strcmp(prefix, TABLE_SNAPSHOT_PREFIX) != 0)
		return;
	if (snapshot_row(message, message_size, st->query_id, &tuple))
		deliver_row(st, txn, NULL, &tuple, NULL, CHANGE_INSERT);
}

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = plugin_startup;
	cb->begin_cb = plugin_begin;
	cb->change_cb = plugin_change;
	cb->truncate_cb = plugin_truncate;
	cb->commit_cb = plugin_commit;
	cb->message_cb = plugin_message;
}

/* The plugin never writes output; these exist because the API wants them. */
void
no_prepare_write(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid, bool last_write)
{
	elog(ERROR, "streamwin's output plugin does not produce output");
}

void
no_write(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid, bool last_write)
{
	elog(ERROR, "streamwin's output plugin does not produce output");
}
