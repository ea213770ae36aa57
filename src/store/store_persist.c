/*-------------------------------------------------------------------------
 *
 * store_persist.c
 *	  A state store and its tables: loading the groups, vouching for them
 *	  around a batch, writing the changed groups' rows, checkpoints, and
 *	  evicting closed groups (see state_store_int.h for the store's files).
 *
 * Rows are written with the heap's own functions: the state table (an
 * UNLOGGED table of the query's) and the checkpoint table (logged, without
 * indexes) are written by nothing but this store while it runs, so each
 * group's row is where the store last put it.  The state table has no
 * index until a batch runs on it without the store (op_store.h); from then
 * on the store keeps its indexes up to date, so that the next batch that
 * runs on the table finds each group through them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "state_store_int.h"
#include "table_indexes.h"

/* streamwin.state_memory (kB) */
int			streamwin_state_memory = 1024 * 1024;

/*
 * An empty store: no group, no window, no session, no dedup key, no
 * result list.
 */
void
store_reset_groups(StateStore *s)
{
	MemoryContextReset(s->groups_cxt);
	groups_reset(s);
	rows_reset(s);
	s->kept_back = false;
	s->late_added = s->late_retracted = 0;
	if (s->plan.session)
		sessions_reset(s);
}

void
store_invalidate(StateStore *s)
{
	MemoryContextReset(s->groups_cxt);
	s->nfolds = 0;
	s->group_slab = NULL;
	s->hash = NULL;
	s->session_keys = NULL;
	s->no_keys = NULL;
	s->session_ends = NULL;
	s->ngone = 0;
	s->key_times = NULL;
	s->nkey_times = 0;
	for (int i = 0; i < NUM_STORE_ROWS; i++)
		rows_clear(s, i);
	s->loaded = false;
	s->in_batch = false;
	/*
	 * Rows kept back go with the groups: the store lets go of them only
	 * where it no longer vouches for them (their transaction rolled back,
	 * or the tables were rewritten), or after store_sync.
	 */
	s->kept_back = false;
	s->catalog_xmin = InvalidTransactionId;
	/* a failed batch's late changes are counted again by its retry */
	s->late_added = s->late_retracted = 0;
}

static bool
over_memory(StateStore *s)
{
	return store_memory(s) > (Size) streamwin_state_memory * 1024;
}

/* Are the group's partials those of a (checkpoint) row? */
static bool
same_partials(StateStore *s, StoreGroup *g, TupleTableSlot *slot)
{
	for (int i = 0; i < s->npartials; i++)
	{
		StorePartial *p = &s->partials[i];
		bool		isnull;
		Datum		v = slot_getattr(slot, p->state_attno, &isnull);

		if (isnull != GROUP_NULLS(s, g)[i])
			return false;
		if (!isnull && !datumIsEqual(v, g->values[i], p->typbyval, p->typlen))
			return false;
	}
	if (s->plan.dedup)
	{
		bool		isnull;
		Datum		v = slot_getattr(slot, s->time_attno, &isnull);

		if (isnull != ((g->flags & GROUP_NO_TIME) != 0) ||
			(!isnull && DatumGetTimestampTz(v) != g->window_start))
			return false;
	}
	if (s->plan.session)
	{
		/*
		 * A session's end is state too: an event may extend it and leave
		 * every partial as it was (a max not beaten, a sum of 0).
		 */
		bool		isnull;
		Datum		v = slot_getattr(slot, 2, &isnull);

		if (isnull != (g->in.session == NULL) ||
			(!isnull && DatumGetTimestampTz(v) != g->in.session->end))
			return false;
	}
	return true;
}

/*
 * Load the groups from the state table, then match the checkpoint table's
 * rows to them: a group whose checkpoint row holds the same values is
 * clean, the others are dirty, and checkpoint rows of no group are to be
 * deleted.  Returns false (and empties the store) past the memory limit.
 */
static bool
store_load(StateStore *s)
{
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	Snapshot	snapshot;
	TupleHashIterator hit;
	TupleHashEntry entry;

	store_reset_groups(s);
	s->loaded = true;

	/* what this transaction wrote so far (a restored checkpoint) included */
	CommandCounterIncrement();
	PushCopiedSnapshot(GetActiveSnapshot());
	UpdateActiveSnapshotCommandId();
	snapshot = GetActiveSnapshot();

	rel = table_open(s->state_table, AccessShareLock);
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, snapshot, 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		StoreGroup *g;
		bool		created;
		MemoryContext old = MemoryContextSwitchTo(s->temp_cxt);

		slot_getallattrs(slot);
		fill_key_slot(s, slot, s->key_state_attno);
		g = store_group(s, &created);
		if (!created)
			elog(ERROR, "streamwin: state table %s holds a group twice", RelationGetRelationName(rel));
		for (int i = 0; i < s->npartials; i++)
		{
			bool		isnull;
			Datum		v = slot_getattr(slot, s->partials[i].state_attno, &isnull);

			set_partial(s, g, i, v, isnull);
		}
		if (s->plan.session)
		{
			bool		isnull;
			Datum		end = slot_getattr(slot, 2, &isnull);

			if (isnull)
				elog(ERROR, "streamwin: state table %s holds a session without its end",
					 RelationGetRelationName(rel));
			session_attach(s, g, DatumGetTimestampTz(end));
		}
		else if (s->plan.dedup)
		{
			bool		isnull;
			Datum		time = slot_getattr(slot, s->time_attno, &isnull);

			key_time_set(g, time, isnull);
			if (!isnull)
				key_times_push(s, g);
		}
		g->state_tid = slot->tts_tid;
		MemoryContextSwitchTo(old);
		MemoryContextReset(s->temp_cxt);
		if ((s->ngroups & 1023) == 0 && over_memory(s))
			break;
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);
	if (over_memory(s))
	{
		PopActiveSnapshot();
		store_invalidate(s);
		return false;
	}

	rel = table_open(s->checkpoint_table, AccessShareLock);
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, snapshot, 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		StoreGroup *g;
		MemoryContext old = MemoryContextSwitchTo(s->temp_cxt);

		slot_getallattrs(slot);
		fill_key_slot(s, slot, s->key_state_attno);
		g = store_group(s, NULL);
		if (g == NULL || ItemPointerIsValid(&g->ckpt_tid))
			tid_list_add(&s->ckpt_gone, &slot->tts_tid);
		else
		{
			g->ckpt_tid = slot->tts_tid;
			/* (the key too: an upsert's may have taken another form since) */
			if (same_partials(s, g, slot) &&
				same_key_images(s, g, s->key_slot->tts_values, s->key_slot->tts_isnull))
				g->flags |= GROUP_CKPT_SAME;
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(s->temp_cxt);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);

	/* clean: matched with the same values; every other group is dirty */
	InitTupleHashIterator(s->hash, &hit);
	while ((entry = ScanTupleHashTable(s->hash, &hit)) != NULL)
	{
		StoreGroup *g = (StoreGroup *) entry->additional;

		if (g->flags & GROUP_CKPT_SAME)
			g->flags &= ~GROUP_CKPT_SAME;
		else
		{
			g->flags |= GROUP_CKPT_DIRTY;
			dlist_push_tail(&s->ckpt_dirty, &g->ckpt_node);
		}
	}
	TermTupleHashIterator(&hit);
	PopActiveSnapshot();
	elog(DEBUG1, "streamwin: state store of table \"%s\" loaded " INT64_FORMAT " groups into %zu kB",
		 get_rel_name(s->state_table), s->ngroups, store_memory(s) / 1024);
	return true;
}

/*
 * The relfilenode of a table of a store (an aggregation or a join store),
 * locked until the transaction ends: nothing rewrites it while the batch
 * writes its rows by location.
 */
Oid
store_table_file(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	Oid			file = rel->rd_node.relNode;

	table_close(rel, NoLock);
	return file;
}

/*
 * The store vouches for what it holds if its last batch ended (a batch
 * that failed never does), wrote the catalog row last (a batch rolled
 * back afterwards, another backend's batch, a reset write it since), and
 * its tables were not rewritten since it loaded them (the rows are no
 * longer where it knows them).  What its batches added counts against
 * streamwin.state_memory as what a load reads does: past it, the store
 * lets go of its groups.
 */
static bool
store_vouches_for(StateStore *s, TransactionId catalog_xmin, Oid state_file, Oid ckpt_file)
{
	return s->loaded && !s->in_batch && TransactionIdEquals(catalog_xmin, s->catalog_xmin) &&
		state_file == s->state_file && ckpt_file == s->ckpt_file;
}

bool
store_vouches(StateStore *s, TransactionId catalog_xmin)
{
	return store_vouches_for(s, catalog_xmin, store_table_file(s->state_table),
							 store_table_file(s->checkpoint_table));
}

bool
store_begin(StateStore *s, TransactionId catalog_xmin)
{
	Oid			state_file = store_table_file(s->state_table);
	Oid			ckpt_file = store_table_file(s->checkpoint_table);

	if (store_vouches_for(s, catalog_xmin, state_file, ckpt_file))
	{
		if (over_memory(s))
		{
			/* the query runs on the table: it gets what was kept back */
			store_sync(s);
			store_invalidate(s);
			return false;
		}
		s->in_batch = true;
		return true;
	}
	s->catalog_xmin = catalog_xmin;
	/* a load cut short (a cancel, an error) leaves a store that does not vouch */
	s->in_batch = true;
	if (!store_load(s))
		return false;
	s->state_file = state_file;
	s->ckpt_file = ckpt_file;
	s->in_batch = true;
	return true;
}

void
store_end(StateStore *s, TransactionId catalog_xmin)
{
	Assert(s->loaded);

	changed_done(s);
	s->catalog_xmin = catalog_xmin;
	s->in_batch = false;
}

/*
 * Writing groups' rows into a table of the store, each where it is
 * (updated) or anew.  New rows wait and go in together with
 * heap_multi_insert, which fills a page under one buffer lock, as COPY
 * does, where heap_insert takes the lock and finds the page for each row.
 */
#define ROW_WRITER_BATCH 100

typedef struct RowWriter
{
	StateStore *store;
	MemoryContext cxt;			/* of the writer's parts, not temp_cxt */
	Relation	rel;
	/* the table's indexes, kept up to date with its rows (none: NULL) */
	TableIndexes *indexes;
	TupleTableSlot *index_slot; /* an updated row, for its index entries */
	BulkInsertState bistate;
	TupleTableSlot *slots[ROW_WRITER_BATCH];	/* made as needed */
	ItemPointer tids[ROW_WRITER_BATCH]; /* where to say each row went */
	int			n;
} RowWriter;

static void
row_writer_begin(RowWriter *w, StateStore *s, Oid relid)
{
	memset(w, 0, sizeof(RowWriter));
	w->store = s;
	w->cxt = CurrentMemoryContext;
	Assert(w->cxt != s->temp_cxt);
	w->rel = table_open(relid, RowExclusiveLock);
	w->bistate = GetBulkInsertState();
	w->indexes = table_indexes_open(w->rel);
	if (w->indexes != NULL)
		w->index_slot = MakeSingleTupleTableSlot(RelationGetDescr(w->rel), &TTSOpsHeapTuple);
	CommandCounterIncrement();
}

/* Insert the rows that wait; then the store's temp_cxt, where they were made, is reset. */
static void
row_writer_flush(RowWriter *w)
{
	if (w->n > 0)
		heap_multi_insert(w->rel, w->slots, w->n, GetCurrentCommandId(true), 0, w->bistate);
	for (int i = 0; i < w->n; i++)
	{
		if (w->indexes != NULL)
			table_indexes_insert(w->indexes, w->slots[i]);
		*w->tids[i] = w->slots[i]->tts_tid;
		ExecClearTuple(w->slots[i]);
	}
	w->n = 0;
	MemoryContextReset(w->store->temp_cxt);
}

/* Write a group's row (made in the store's temp_cxt); *tid: where it is, then. */
static void
row_writer_put(RowWriter *w, HeapTuple tuple, ItemPointer tid)
{
	if (ItemPointerIsValid(tid))
	{
		simple_heap_update(w->rel, tid, tuple);
		*tid = tuple->t_self;
		/* a row that left its page (not a heap-only tuple) needs new entries */
		if (w->indexes != NULL && !HeapTupleIsHeapOnly(tuple))
		{
			ExecStoreHeapTuple(tuple, w->index_slot, false);
			w->index_slot->tts_tid = tuple->t_self;
			table_indexes_insert(w->indexes, w->index_slot);
			ExecClearTuple(w->index_slot);
		}
		heap_freetuple(tuple);
		return;
	}
	if (w->slots[w->n] == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(w->cxt);

		w->slots[w->n] = MakeSingleTupleTableSlot(RelationGetDescr(w->rel), &TTSOpsHeapTuple);
		MemoryContextSwitchTo(old);
	}
	ExecStoreHeapTuple(tuple, w->slots[w->n], true);
	w->tids[w->n++] = tid;
	if (w->n == ROW_WRITER_BATCH)
		row_writer_flush(w);
}

static void
row_writer_end(RowWriter *w)
{
	row_writer_flush(w);
	for (int i = 0; i < ROW_WRITER_BATCH && w->slots[i] != NULL; i++)
		ExecDropSingleTupleTableSlot(w->slots[i]);
	if (w->indexes != NULL)
	{
		ExecDropSingleTupleTableSlot(w->index_slot);
		table_indexes_close(w->indexes);
	}
	FreeBulkInsertState(w->bistate);
	table_close(w->rel, NoLock);
}

/*
 * The rows of groups gone are deleted at once (they are where the store
 * put them), those of the changed groups written or, keep_back, marked.  A
 * group kept back is in ckpt_dirty, where store_sync finds it (and a
 * checkpoint, which writes its checkpoint row from memory, leaves it); a
 * kept group that leaves the store leaves that list, and its row, if one
 * was written before, goes as any group's row does.  Without rows to
 * delete, a batch that keeps its rows back does not open the table.
 */
void
store_write_changed(StateStore *s, bool keep_back)
{
	RowWriter	w;
	bool		writes = !keep_back || s->state_gone.n > 0;
	MemoryContext old;
	dlist_iter	it;

	Assert(s->loaded && s->in_batch);
	if (writes)
		row_writer_begin(&w, s, s->state_table);
	old = MemoryContextSwitchTo(s->temp_cxt);
	if (writes)
		tid_list_delete_rows(&s->state_gone, w.rel);
	dlist_foreach(it, &s->changed)
	{
		StoreGroup *g = dlist_container(StoreGroup, changed_node, it.cur);

		if (!(g->flags & GROUP_IN_DIRTY))
			dlist_push_tail(&s->ckpt_dirty, &g->ckpt_node);
		g->flags |= GROUP_CKPT_DIRTY;
		if (keep_back)
		{
			g->flags |= GROUP_STATE_KEPT;
			s->kept_back = true;
		}
		else
		{
			row_writer_put(&w, group_tuple(s, g), &g->state_tid);
			g->flags &= ~GROUP_STATE_KEPT;
		}
		/* a dedup key is written once, by the batch that made it */
		if (s->plan.dedup && !(g->flags & GROUP_NO_TIME))
			key_times_push(s, g);
	}
	MemoryContextSwitchTo(old);
	if (writes)
		row_writer_end(&w);
}

/*
 * Write the row of each group of ckpt_dirty marked `mark` (GROUP_STATE_KEPT:
 * its state row; GROUP_CKPT_DIRTY: its checkpoint row) into w's table,
 * clear the mark, and take the group off the list unless it has the
 * other.  In the store's temp_cxt.
 */
static void
write_marked(StateStore *s, RowWriter *w, uint8 mark)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &s->ckpt_dirty)
	{
		StoreGroup *g = dlist_container(StoreGroup, ckpt_node, it.cur);

		if (!(g->flags & mark))
			continue;
		row_writer_put(w, group_tuple(s, g),
					   mark == GROUP_STATE_KEPT ? &g->state_tid : &g->ckpt_tid);
		g->flags &= ~mark;
		if (!(g->flags & GROUP_IN_DIRTY))
			dlist_delete(&g->ckpt_node);
	}
}

void
store_sync(StateStore *s)
{
	RowWriter	w;
	MemoryContext old;

	if (!s->kept_back)
		return;
	/* (a batch that failed left in_batch: held_store_begin lets go of it) */
	Assert(s->loaded && !s->in_batch);
	row_writer_begin(&w, s, s->state_table);
	old = MemoryContextSwitchTo(s->temp_cxt);
	write_marked(s, &w, GROUP_STATE_KEPT);
	MemoryContextSwitchTo(old);
	row_writer_end(&w);
	s->kept_back = false;
}

/*
 * The checkpoint rows of the groups changed since the last checkpoint
 * (groups kept back stay listed for store_sync).
 */
void
store_checkpoint(StateStore *s)
{
	RowWriter	w;
	MemoryContext old;

	Assert(s->loaded && s->in_batch);
	row_writer_begin(&w, s, s->checkpoint_table);
	old = MemoryContextSwitchTo(s->temp_cxt);
	tid_list_delete_rows(&s->ckpt_gone, w.rel);
	write_marked(s, &w, GROUP_CKPT_DIRTY);
	MemoryContextSwitchTo(old);
	row_writer_end(&w);
}

void
store_evict_closed(StateStore *s)
{
	Relation	rel = table_open(s->state_table, RowExclusiveLock);
	RowsList   *closed = &s->rows[STORE_ROWS_CLOSED];
	int			nclosed = 0;

	Assert(s->loaded && s->in_batch);
	CommandCounterIncrement();
	for (int64 i = 0; i < closed->n; i++)
	{
		StoreGroup *g = closed->items[i].group;

		rows_prefetch(s, closed, i, true);
		if (g == NULL)
			continue;
		g->rows = -1;			/* its entry goes with the list */
		if (ItemPointerIsValid(&g->state_tid))
			simple_heap_delete(rel, &g->state_tid);
		group_unlink(s, g);
		if (s->plan.windowed && !s->plan.session)
			dlist_delete(&g->in.window_node);
		group_drop(s, g);
	}
	rows_clear(s, STORE_ROWS_CLOSED);
	table_close(rel, NoLock);

	/* the windows left empty, all at the front */
	while (nclosed < s->nwindows && dlist_is_empty(&s->windows[nclosed]->groups))
		pfree(s->windows[nclosed++]);
	memmove(s->windows, s->windows + nclosed, sizeof(StoreWindow *) * (s->nwindows - nclosed));
	s->nwindows -= nclosed;
}
