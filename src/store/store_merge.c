/*-------------------------------------------------------------------------
 *
 * store_merge.c
 *	  A batch into a state store: its groups (or rows) merged into the
 *	  store's groups in C, a dedup store's new keys, and the windows a
 *	  watermark closes (see state_store.h; state_store_int.h lists the
 *	  store's files).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "parser/parse_coerce.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "state_store_int.h"

/* streamwin.store_merge */
int			streamwin_store_merge = STORE_MERGE_AUTO;

/* Rows a store's merge holds before it folds them (fold_ahead) */
#define FOLD_AHEAD 8

typedef struct MergeReceiver
{
	DestReceiver pub;
	StateStore *store;
	/* merge_receive's: rows (STMT_STORE_BATCH_ROWS), not groups; of how many */
	bool		rows;
	int64		batch_rows;

	/*
	 * The rows merge_receive holds, oldest first from ahead_first: each
	 * copied, with the hash of its key, whose bucket of the store's hash
	 * table is being fetched into the cache meanwhile.  The table of a
	 * large store is far larger than the cache, and a row whose group is
	 * new, or was not touched for long, would wait for its bucket; the
	 * rows still fold in the batch's order.
	 */
	TupleTableSlot *ahead[FOLD_AHEAD];
	uint32		ahead_hash[FOLD_AHEAD];
	int			ahead_first;
	int			nahead;
	/* a dedup store's: the batch, and its rows to keep (nrows long) */
	int64		batch_id;
	bool	   *keep;
	int			nrows;
} MergeReceiver;

/* Merge the partials of the batch's group in slot into the key slot's group. */
static void
merge_group(StateStore *s, TupleTableSlot *slot)
{
	bool		created;
	StoreGroup *g = store_group(s, &created);

	/* a group the store did not have is one the result does not have */
	if (created)
		g->flags |= GROUP_NEW;
	for (int i = 0; i < s->npartials; i++)
		merge_partial(s, g, i, slot->tts_values[s->nkeys + i], slot->tts_isnull[s->nkeys + i]);
	group_changed(s, g);
}

/* Fold value v of partial i into *acc: merge_partial on a fold. */
static void
fold_partial(StateStore *s, int i, Datum *acc, bool *acc_null, Datum v, bool isnull)
{
	Datum		result;
	bool		result_null;

	if (isnull)
		return;
	if (*acc_null)
	{
		*acc = v;
		*acc_null = false;
	}
	else if (combine_partial(s, i, *acc, v, &result, &result_null))
	{
		*acc = result;
		*acc_null = result_null;
	}
}

/* Room for twice the folds (in the store's context: kept for the next batch). */
static void
folds_grow(StateStore *s)
{
	Size		n = Max(1024, (Size) s->max_folds * 2);

	if (s->max_folds == 0)
	{
		s->fold_groups = MemoryContextAllocHuge(s->cxt, sizeof(StoreGroup *) * n);
		s->fold_values = MemoryContextAllocHuge(s->cxt, sizeof(Datum) * s->npartials * n);
		s->fold_nulls = MemoryContextAllocHuge(s->cxt, sizeof(bool) * s->npartials * n);
	}
	else
	{
		s->fold_groups = repalloc_huge(s->fold_groups, sizeof(StoreGroup *) * n);
		s->fold_values = repalloc_huge(s->fold_values, sizeof(Datum) * s->npartials * n);
		s->fold_nulls = repalloc_huge(s->fold_nulls, sizeof(bool) * s->npartials * n);
	}
	s->max_folds = (int) n;
}

/*
 * Fold one of the batch's rows (window_start, keys, its partials alone)
 * into its group.  The partial aggregation of STMT_STORE_GROUPS folds a
 * group's rows in the batch's order, from no input, and the store merges
 * what that makes into the group: the same steps in the same order here
 * give the same result, to the last bit of a float sum (merge_partial
 * folds it, when it is a group the batch made, or a fold of its own).
 * Every partial is passed by value (window_store_rows_sql), so that a fold
 * is its Datums.
 */
static void
fold_row(StateStore *s, TupleTableSlot *slot, uint32 hash)
{
	bool		created;
	StoreGroup *g = store_group_hashed(s, &created, &hash);
	Datum	   *v = slot->tts_values + s->nkeys;
	bool	   *n = slot->tts_isnull + s->nkeys;

	if (created)
		g->flags |= GROUP_NEW;
	if (g->flags & GROUP_NEW)
	{
		for (int i = 0; i < s->npartials; i++)
			merge_partial(s, g, i, v[i], n[i]);
	}
	else if (g->flags & GROUP_FOLDING)
	{
		Datum	   *acc = s->fold_values + (Size) g->fold_pos * s->npartials;
		bool	   *acc_null = s->fold_nulls + (Size) g->fold_pos * s->npartials;

		for (int i = 0; i < s->npartials; i++)
			fold_partial(s, i, &acc[i], &acc_null[i], v[i], n[i]);
	}
	else
	{
		if (s->nfolds == s->max_folds)
			folds_grow(s);
		g->fold_pos = s->nfolds++;
		g->flags |= GROUP_FOLDING;
		s->fold_groups[g->fold_pos] = g;
		memcpy(s->fold_values + (Size) g->fold_pos * s->npartials, v, sizeof(Datum) * s->npartials);
		memcpy(s->fold_nulls + (Size) g->fold_pos * s->npartials, n, sizeof(bool) * s->npartials);
	}
	group_changed(s, g);
}

/* The batch's rows are in: merge each fold into its group. */
static void
folds_merge(StateStore *s)
{
	for (int f = 0; f < s->nfolds; f++)
	{
		StoreGroup *g = s->fold_groups[f];

		for (int i = 0; i < s->npartials; i++)
			merge_partial(s, g, i, s->fold_values[(Size) f * s->npartials + i],
						  s->fold_nulls[(Size) f * s->npartials + i]);
		g->flags &= ~GROUP_FOLDING;
	}
	s->nfolds = 0;
}

/* Fold the oldest row held (fold_ahead). */
static void
fold_held(MergeReceiver *r)
{
	StateStore *s = r->store;
	TupleTableSlot *slot = r->ahead[r->ahead_first];

	fill_key_slot(s, slot, NULL);
	fold_row(s, slot, r->ahead_hash[r->ahead_first]);
	r->ahead_first = (r->ahead_first + 1) % FOLD_AHEAD;
	r->nahead--;
}

/*
 * Hold a row of the batch, and ask for its bucket of the hash table; fold
 * the oldest row held once FOLD_AHEAD are.
 */
static void
fold_ahead(MergeReceiver *r, TupleTableSlot *slot)
{
	StateStore *s = r->store;
	int			i;

	if (r->nahead == FOLD_AHEAD)
		fold_held(r);
	i = (r->ahead_first + r->nahead++) % FOLD_AHEAD;
	ExecCopySlot(r->ahead[i], slot);
	/* the row's first columns are the key slot's, the table's key columns */
	r->ahead_hash[i] = TupleHashTableHash(s->hash, r->ahead[i]);
#if defined(__GNUC__) || defined(__clang__)
	__builtin_prefetch(&s->hash->hashtab->data[r->ahead_hash[i] & s->hash->hashtab->sizemask]);
#endif
}

/*
 * Is the window starting at start closed, over a changelog, whose rows of
 * it come too late (store_closed_through)?
 */
static inline bool
window_closed(StateStore *s, Datum start)
{
	return s->plan.rows_partial >= 0 && s->plan.windowed && s->has_closed &&
		DatumGetTimestampTz(start) <= s->closed - s->plan.window_size_us;
}

/* Count the rows of a batch's group (or row) in slot that came too late. */
static void
count_late(StateStore *s, TupleTableSlot *slot)
{
	int			k = s->nkeys + s->plan.rows_partial;
	int64		net = slot->tts_isnull[k] ? 0 : DatumGetInt64(slot->tts_values[k]);

	if (net < 0)
		s->late_retracted -= net;
	else
		s->late_added += net;
}

/*
 * One of the batch's groups: window_start, keys, partials.  With panes, a
 * pane's group, which merges into every window covering the pane: the one
 * starting with it and those starting a slide, two slides... before.  Or
 * one of its rows (MergeReceiver.rows), which fold_row folds.
 */
static bool
merge_receive(TupleTableSlot *slot, DestReceiver *self)
{
	MergeReceiver *r = (MergeReceiver *) self;
	StateStore *s = r->store;
	MemoryContext old = MemoryContextSwitchTo(s->temp_cxt);

	slot_getallattrs(slot);
	if (r->rows)
	{
		if (window_closed(s, slot->tts_values[0]))
			count_late(s, slot);
		else
			fold_ahead(r, slot);
	}
	else if (s->plan.session)
		session_merge(s, slot);
	else
	{
		TupleTableSlot *key = s->key_slot;
		bool		late = false;

		for (int i = 0; i < Max(s->plan.panes, 1); i++)
		{
			/*
			 * The key slot again each time: making a group materializes it,
			 * and the values it deforms from its tuple replace its own.
			 */
			fill_key_slot(s, slot, NULL);
			if (i > 0)
				key->tts_values[0] = TimestampTzGetDatum(DatumGetTimestampTz(key->tts_values[0]) -
														 i * s->plan.slide_us);
			/* of a hop's windows, the closed ones go without it */
			if (window_closed(s, key->tts_values[0]))
				late = true;
			else
				merge_group(s, slot);
		}
		if (late)
			count_late(s, slot);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(s->temp_cxt);
	return true;
}

/*
 * One of a dedup store's batch rows: keys, event time, position in the
 * batch, in the batch's order (STMT_DEDUP_ROWS scans the batch's rows as
 * they are).  A key the store has not seen is new, and takes the event
 * time and position of this row, its first; any other row is a duplicate
 * and leaves the store as it was.
 */
static bool
dedup_receive(TupleTableSlot *slot, DestReceiver *self)
{
	MergeReceiver *r = (MergeReceiver *) self;
	StateStore *s = r->store;
	MemoryContext old = MemoryContextSwitchTo(s->temp_cxt);
	StoreGroup *g;
	bool		created;
	int			time_col = s->nkeys;
	int			ord_col = s->nkeys + 1;
	int32		ord;

	slot_getallattrs(slot);
	fill_key_slot(s, slot, NULL);
	g = store_group(s, &created);
	if (created)
	{
		if (slot->tts_isnull[ord_col])
			elog(ERROR, "streamwin: a row of a batch without its position");
		ord = DatumGetInt32(slot->tts_values[ord_col]);
		g->flags |= GROUP_NEW;
		set_partial(s, g, 0, Int32GetDatum(ord), false);
		set_partial(s, g, 1, Int64GetDatum(r->batch_id), false);
		key_time_set(g, slot->tts_values[time_col], slot->tts_isnull[time_col]);
		group_changed(s, g);
		if (ord >= 0 && ord < r->nrows)
			r->keep[ord] = true;
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(s->temp_cxt);
	return true;
}

/*
 * Column col of the batch's rows holds values of the type that state table
 * column attno keeps, as the store reads them.  The compiled statements are
 * SQL, which PostgreSQL parses again when a table they read changes: an
 * ALTER TABLE ... TYPE of a joined table's column gives the statement
 * another type, whose values the store would take for the old type's (a
 * text read from an enum's bits).  A domain's values are its base type's.
 */
static void
check_batch_column(StateStore *s, TupleDesc typeinfo, int col, AttrNumber attno)
{
	Oid			got = TupleDescAttr(typeinfo, col)->atttypid;
	Form_pg_attribute want = TupleDescAttr(s->state_desc, attno - 1);

	if (got == want->atttypid || getBaseType(got) == getBaseType(want->atttypid))
		return;
	/* the same values either way (varchar and text) */
	if (IsBinaryCoercible(got, want->atttypid) && IsBinaryCoercible(want->atttypid, got) &&
		get_typlen(got) == want->attlen && get_typbyval(got) == want->attbyval)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("a batch gives column \"%s\" of the query's state values of type %s, where the state keeps type %s",
					NameStr(want->attname), format_type_be(got), format_type_be(want->atttypid)),
			 errdetail("A table or view the query reads has changed the type of a column since the query was created."),
			 errhint("Change the column back, or drop the query and create it again.")));
}

static void
merge_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	MergeReceiver *r = (MergeReceiver *) self;
	StateStore *s = r->store;

	int			natts = s->nkeys + (s->plan.dedup ? 2 :
									s->npartials + (s->plan.session ? 1 : 0));

	if (typeinfo->natts != natts)
		elog(ERROR, "streamwin: a batch's groups have %d columns, its store %d",
			 typeinfo->natts, natts);
	for (int k = 0; k < s->nkeys; k++)
		check_batch_column(s, typeinfo, k, s->key_state_attno[k]);
	if (!s->plan.dedup)
		for (int i = 0; i < s->npartials; i++)
			check_batch_column(s, typeinfo, s->nkeys + i, s->partials[i].state_attno);
	if (r->rows)
		for (int i = 0; i < FOLD_AHEAD; i++)
			r->ahead[i] = MakeSingleTupleTableSlot(typeinfo, &TTSOpsVirtual);
}

/*
 * Over a changelog, a group whose rows the batch retracted all leaves the
 * store: GROUP BY over the table has no group of no rows.  Its state and
 * checkpoint rows go, and its result row, if it may have one, is gone
 * (STORE_ROWS_GONE).  A group can only empty in a batch that changed it.
 */
static void
drop_emptied(StateStore *s)
{
	int			k = s->plan.rows_partial;
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &s->changed)
	{
		StoreGroup *g = dlist_container(StoreGroup, changed_node, it.cur);

		if (!GROUP_NULLS(s, g)[k] && DatumGetInt64(g->values[k]) != 0)
			continue;
		if (ItemPointerIsValid(&g->state_tid))
			tid_list_add(&s->state_gone, &g->state_tid);
		/* a group this batch made has no result row yet */
		if (!(g->flags & GROUP_NEW))
		{
			MemoryContext old = MemoryContextSwitchTo(s->groups_cxt);

			gone_add(s, heap_copy_minimal_tuple(g->key), g->window_start);
			MemoryContextSwitchTo(old);
		}
		group_unlink(s, g);
		if (s->plan.windowed)
		{
			TimestampTz start = g->window_start;

			dlist_delete(&g->in.window_node);
			group_drop(s, g);
			window_forget_if_empty(s, start);
		}
		else
			group_drop(s, g);
	}
}

/*
 * The end of the batch's groups or rows.  Which of the two the next batch
 * gives depends on this one, which has as many groups as it changed: a
 * batch that changes a group for most of its rows makes the partial
 * aggregation build a hash table of about as many groups as the store's
 * and pass each on once, where the store can fold the rows itself; a batch
 * of fewer, fuller groups is left to the aggregation, whose table is small
 * and whose output is much smaller than its input.  Both give the same
 * result, so the choice is free to follow the batches.
 */
static void
merge_shutdown(DestReceiver *self)
{
	MergeReceiver *r = (MergeReceiver *) self;
	StateStore *s = r->store;

	if (r->rows)
	{
		MemoryContext old = MemoryContextSwitchTo(s->temp_cxt);

		while (r->nahead > 0)
		{
			fold_held(r);
			MemoryContextReset(s->temp_cxt);
		}
		MemoryContextSwitchTo(old);
		for (int i = 0; i < FOLD_AHEAD; i++)
			ExecDropSingleTupleTableSlot(r->ahead[i]);
		folds_merge(s);
	}
	if (s->plan.rows_partial >= 0)
		drop_emptied(s);
	if (r->batch_rows > 0)
		s->merge_rows = s->nchanged * 2 >= r->batch_rows;
}

static void
merge_destroy(DestReceiver *self)
{
	pfree(self);
}

static MergeReceiver *
make_receiver(StateStore *s, bool (*receive) (TupleTableSlot *slot, DestReceiver *self))
{
	MergeReceiver *r = palloc0(sizeof(MergeReceiver));

	r->pub.receiveSlot = receive;
	r->pub.rStartup = merge_startup;
	r->pub.rShutdown = merge_shutdown;
	r->pub.rDestroy = merge_destroy;
	r->pub.mydest = DestNone;
	r->store = s;
	return r;
}

DestReceiver *
store_merge_receiver(StateStore *s, bool rows, int64 batch_rows)
{
	MergeReceiver *r = make_receiver(s, merge_receive);

	Assert(s->loaded && s->in_batch && !s->plan.dedup);
	r->rows = rows;
	r->batch_rows = batch_rows;
	return (DestReceiver *) r;
}

void
store_closed_through(StateStore *s, bool has, TimestampTz closed)
{
	s->has_closed = has;
	s->closed = closed;
}

void
store_late_changes(StateStore *s, int64 *added, int64 *retracted)
{
	*added = s->late_added;
	*retracted = s->late_retracted;
	s->late_added = s->late_retracted = 0;
}

/*
 * Whether the store would take the next batch as rows (STMT_STORE_BATCH_ROWS)
 * rather than groups: streamwin.store_merge, or in "auto" what the last
 * batch was like (merge_shutdown).  A join's pairs go as rows in "auto":
 * their groups would come from a partial aggregation per join and a merge
 * of those, each sorting (the planner takes a batch's rows for few), which
 * costs more than the store's folding of the pairs (bench case JA).
 */
bool
store_merge_rows(StateStore *s, bool pairs)
{
	if (streamwin_store_merge == STORE_MERGE_AUTO)
		return pairs || s->merge_rows;
	return streamwin_store_merge == STORE_MERGE_ROWS;
}

DestReceiver *
store_dedup_receiver(StateStore *s, int64 batch_id, bool *keep, int nrows)
{
	MergeReceiver *r = make_receiver(s, dedup_receive);

	Assert(s->loaded && s->in_batch && s->plan.dedup);
	r->batch_id = batch_id;
	r->keep = keep;
	r->nrows = nrows;
	return (DestReceiver *) r;
}

/*
 * Select the groups that watermark closes into STORE_ROWS_CLOSED: a dedup
 * store's keys whose event time is before it, sessions ending at or before
 * it, and the groups of windows ending at or before it.
 */
int64
store_close_windows(StateStore *s, TimestampTz watermark)
{
	int64		n = 0;

	Assert(s->loaded && s->in_batch);
	if (s->plan.dedup)
	{
		/* keys whose event time is before the watermark, from the heap's top */
		while (s->nkey_times > 0 && s->key_times[0].time < watermark)
		{
			StoreGroup *g = s->key_times[0].group;

			key_times_pop(s);
			g->flags |= GROUP_CLOSED;
			rows_add(s, g, STORE_ROWS_CLOSED);
			n++;
		}
		return n;
	}
	if (!s->plan.windowed)
		return 0;
	if (s->plan.session)
		return sessions_close(s, watermark);
	for (int w = 0; w < s->nwindows; w++)
	{
		StoreWindow *win = s->windows[w];
		dlist_iter	it;

		/* window_end = window_start + size: closed at or before the watermark */
		if (win->start > watermark - s->plan.window_size_us)
			break;
		dlist_foreach(it, &win->groups)
		{
			StoreGroup *g = dlist_container(StoreGroup, in.window_node, it.cur);

			g->flags |= GROUP_CLOSED;
			rows_add(s, g, STORE_ROWS_CLOSED);
			n++;
		}
	}
	return n;
}
