/*-------------------------------------------------------------------------
 *
 * store_rows.c
 *	  The groups a state store's result statements write, as lists kept in
 *	  the result index's order, and streamwin.store_rows() that reads them
 *	  (see state_store_int.h for the store's files).
 *
 * Result rows are written by SQL statements over streamwin.store_rows()
 * (the runner's), through the executor, so that the result table's
 * indexes, constraints, triggers and policies apply as to any write.  A
 * batch sorts each list into the order of the result's unique index
 * first, and remembers where each group's result row went.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class.h"
#include "storage/bufmgr.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "batch_scope.h"
#include "sql_function.h"
#include "state_store_int.h"

STREAMWIN_SQL_FUNCTION(streamwin_store_rows);

/* An empty list: its groups are not written to. */
void
rows_clear(StateStore *s, StoreRows which)
{
	RowsList   *l = &s->rows[which];

	l->n = 0;
	l->sorted = false;
	l->positions_valid = true;
	l->ngroups = 0;
}

/*
 * Every list empty and without its array: the lists' part of
 * store_reset_groups.
 */
void
rows_reset(StateStore *s)
{
	for (int i = 0; i < NUM_STORE_ROWS; i++)
	{
		if (s->rows[i].items != NULL)
			pfree(s->rows[i].items);
		s->rows[i].items = NULL;
		s->rows[i].max = 0;
		rows_clear(s, i);
	}
}

/* Every group's position in a list, after a sort and no complete scan. */
static void
rows_fix_positions(RowsList *l)
{
	for (int64 i = 0; i < l->n; i++)
		if (l->items[i].group != NULL)
			l->items[i].group->rows_pos = (int32) i;
	l->positions_valid = true;
}

/* Whether the group is in the list: its entry points back at it. */
static bool
rows_contains(StateStore *s, StoreGroup *g, StoreRows which)
{
	RowsList   *l = &s->rows[which];

	if (g->rows != (int8) which)
		return false;
	if (!l->positions_valid)
		rows_fix_positions(l);
	return g->rows_pos < l->n && l->items[g->rows_pos].group == g;
}

static void
rows_remove(StateStore *s, StoreGroup *g)
{
	if (g->rows >= 0 && rows_contains(s, g, g->rows))
	{
		RowsList   *l = &s->rows[g->rows];

		l->items[g->rows_pos].group = NULL;
		l->sorted = false;		/* the next sort drops the entry */
		l->ngroups--;
	}
	g->rows = -1;
}

void
rows_add(StateStore *s, StoreGroup *g, StoreRows which)
{
	RowsList   *l = &s->rows[which];

	rows_remove(s, g);
	if (l->n == PG_INT32_MAX)	/* rows_pos is an int32 */
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("streamwin: a batch writes more than %d result rows of one kind",
						PG_INT32_MAX)));
	if (l->n == l->max)
	{
		int64		max = Min(Max(1024, l->max * 2), (int64) PG_INT32_MAX);

		l->items = l->items == NULL ?
			MemoryContextAllocHuge(s->cxt, sizeof(SortedGroup) * max) :
			repalloc_huge(l->items, sizeof(SortedGroup) * max);
		l->max = max;
	}
	l->items[l->n].group = g;
	g->rows = (int8) which;
	g->rows_pos = (int32) l->n++;
	l->sorted = false;
	l->ngroups++;
}

/*
 * A group leaves the store: its checkpoint row goes at the next
 * checkpoint, and it leaves the lists of changed and dirty groups and of
 * result rows.  (Its state row is the caller's.)
 */
void
group_unlink(StateStore *s, StoreGroup *g)
{
	if (ItemPointerIsValid(&g->ckpt_tid))
		tid_list_add(&s->ckpt_gone, &g->ckpt_tid);
	if (g->flags & GROUP_IN_DIRTY)
		dlist_delete(&g->ckpt_node);
	if (g->flags & GROUP_CHANGED)
	{
		dlist_delete(&g->changed_node);
		s->nchanged--;
	}
	rows_remove(s, g);
}

/*
 * Remember that the result may hold a row under key (window_start, keys),
 * which no group has any more: update mode deletes it (STORE_ROWS_GONE).
 * The record is a group of no hash entry, without values; key is the
 * caller's copy, in groups_cxt.
 */
void
gone_add(StateStore *s, MinimalTuple key, TimestampTz start)
{
	StoreGroup *g = group_alloc(s);

	g->key = key;
	g->window_start = start;
	g->rows = -1;
	ItemPointerSetInvalid(&g->result_tid);
	dlist_push_tail(&s->gone, &g->changed_node);
	s->ngone++;
}

void
store_classify_changed(StateStore *s, bool replay, bool new_rows_allowed)
{
	dlist_iter	it;

	Assert(s->loaded && s->in_batch);
	dlist_foreach(it, &s->changed)
	{
		StoreGroup *g = dlist_container(StoreGroup, changed_node, it.cur);

		if (replay)
			rows_add(s, g, STORE_ROWS_UPSERT);
		else if ((g->flags & GROUP_NEW) && new_rows_allowed)
			rows_add(s, g, STORE_ROWS_INSERT);
		else if (ItemPointerIsValid(&g->result_tid))
			rows_add(s, g, STORE_ROWS_UPDATE);
		else
			rows_add(s, g, STORE_ROWS_UPSERT);
	}
}

void
store_move_rows(StateStore *s, StoreRows from, StoreRows to)
{
	RowsList   *l = &s->rows[from];

	Assert(from != to);
	for (int64 i = 0; i < l->n; i++)
	{
		StoreGroup *g = l->items[i].group;

		if (g == NULL)
			continue;
		ItemPointerSetInvalid(&g->result_tid);
		g->rows = -1;			/* its entry goes with the list */
		rows_add(s, g, to);
	}
	rows_clear(s, from);
}

/* qsort comparator of block numbers */
static int
compare_blocks(const void *a, const void *b)
{
	BlockNumber x = *(const BlockNumber *) a;
	BlockNumber y = *(const BlockNumber *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

void
store_prune_result_pages(StateStore *s, StoreRows which, Oid relid)
{
	RowsList   *l = &s->rows[which];
	BlockNumber *blocks;
	BlockNumber nblocks;
	int64		n = 0;
	Relation	rel;

	if (l->ngroups == 0)
		return;
	blocks = palloc_extended(sizeof(BlockNumber) * l->n, MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < l->n; i++)
	{
		StoreGroup *g = l->items[i].group;

		if (g != NULL && ItemPointerIsValid(&g->result_tid))
			blocks[n++] = ItemPointerGetBlockNumber(&g->result_tid);
	}
	qsort(blocks, n, sizeof(BlockNumber), compare_blocks);
	/* (a table gone or made another kind: the update says what is wrong) */
	rel = try_table_open(relid, RowExclusiveLock);
	if (rel == NULL)
	{
		pfree(blocks);
		return;
	}
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relam != HEAP_TABLE_AM_OID)
	{
		table_close(rel, NoLock);
		pfree(blocks);
		return;
	}
	nblocks = RelationGetNumberOfBlocks(rel);
	for (int64 i = 0; i < n; i++)
	{
		Buffer		buf;

		/* once a page; a location past the end is stale, the update says so */
		if ((i > 0 && blocks[i] == blocks[i - 1]) || blocks[i] >= nblocks)
			continue;
		buf = ReadBuffer(rel, blocks[i]);
		heap_page_prune_opt(rel, buf);
		ReleaseBuffer(buf);
	}
	table_close(rel, NoLock);
	pfree(blocks);
}

void
store_rows_done(StateStore *s, StoreRows which)
{
	rows_clear(s, which);
}

int64
store_count_rows(StateStore *s, StoreRows which)
{
	if (which == STORE_ROWS_ALL)
		return s->ngroups;
	if (which == STORE_ROWS_GONE)
		return s->ngone;
	return s->rows[which].ngroups;
}

/*
 * SPI_tuptable holds (window_start, keys..., ctid) of the rows a statement
 * over `which` wrote.
 */
void
store_rows_written(StateStore *s, StoreRows which, StoreRows unwritten)
{
	SPITupleTable *tt = SPI_tuptable;
	TupleTableSlot *slot;
	MemoryContext old = MemoryContextSwitchTo(s->temp_cxt);

	slot = MakeSingleTupleTableSlot(tt->tupdesc, &TTSOpsHeapTuple);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		StoreGroup *g;
		bool		isnull;
		Datum		tid;

		ExecStoreHeapTuple(tt->vals[i], slot, false);
		fill_key_slot(s, slot, NULL);
		g = store_group(s, NULL);
		tid = slot_getattr(slot, s->nkeys + 1, &isnull);
		if (g == NULL || isnull || !rows_contains(s, g, which))
			continue;
		g->result_tid = *(ItemPointer) DatumGetPointer(tid);
		rows_remove(s, g);
	}
	ExecDropSingleTupleTableSlot(slot);
	MemoryContextSwitchTo(old);
	if (unwritten != which)
		store_move_rows(s, which, unwritten);
}

/* The batch's changed groups are written: clear their marks. */
void
changed_done(StateStore *s)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &s->changed)
	{
		StoreGroup *g = dlist_container(StoreGroup, changed_node, it.cur);

		g->flags &= ~(GROUP_CHANGED | GROUP_NEW);
		dlist_delete(&g->changed_node);
	}
	dlist_init(&s->changed);
	s->nchanged = 0;
	for (int i = 0; i < NUM_STORE_ROWS; i++)
		rows_clear(s, i);
	dlist_foreach_modify(it, &s->gone)
	{
		StoreGroup *g = dlist_container(StoreGroup, changed_node, it.cur);

		dlist_delete(&g->changed_node);
		pfree(g->key);
		pfree(g);
	}
	s->ngone = 0;
}

/*
 * Two groups in the order of the result's unique index: window start,
 * then the group keys (NULL last, as the index puts them).  The first
 * group key's sort values decide unless they are equal; only then are the
 * keys read from the groups, authoritatively.
 */
static inline int
compare_sorted_groups(const SortedGroup *x, const SortedGroup *y, StateStore *s)
{
	int			c;

	if (x->window_start != y->window_start)
		return x->window_start < y->window_start ? -1 : 1;
	if (s->lead_key >= s->nkeys)
		return 0;
	if (x->lead_null != y->lead_null)
		return x->lead_null ? 1 : -1;
	if (!x->lead_null)
	{
		c = ApplySortComparator(x->lead, false, y->lead, false, &s->lead_sort);
		if (c != 0)
			return c;
	}
	for (int k = s->lead_sort.abbrev_converter != NULL ? s->lead_key : s->lead_key + 1;
		 k < s->nkeys; k++)
	{
		bool		xnull;
		bool		ynull;
		Datum		xv = group_key(s, x->group, k, &xnull);
		Datum		yv = group_key(s, y->group, k, &ynull);

		c = ApplySortComparator(xv, xnull, yv, ynull, &s->key_sorts[k]);
		if (c != 0)
			return c;
	}
	return 0;
}

#define ST_SORT sort_groups
#define ST_ELEMENT_TYPE SortedGroup
#define ST_COMPARE(a, b, arg) compare_sorted_groups(a, b, arg)
#define ST_COMPARE_ARG_TYPE StateStore
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * compare_sorted_groups where the first group key's abbreviation compares
 * as an unsigned integer (text's, and that of other types whose
 * abbreviated comparator is ssup_datum_unsigned_cmp): the comparisons
 * that the window start or the abbreviation decide, which are nearly all,
 * inline, without a call through the comparator.
 */
static inline int
compare_sorted_unsigned(const SortedGroup *x, const SortedGroup *y, StateStore *s)
{
	if (x->window_start != y->window_start)
		return x->window_start < y->window_start ? -1 : 1;
	if (x->lead_null == y->lead_null && !x->lead_null && x->lead != y->lead)
		return x->lead < y->lead ? -1 : 1;
	return compare_sorted_groups(x, y, s);
}

#define ST_SORT sort_groups_unsigned
#define ST_ELEMENT_TYPE SortedGroup
#define ST_COMPARE(a, b, arg) compare_sorted_unsigned(a, b, arg)
#define ST_COMPARE_ARG_TYPE StateStore
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Put a list of groups that statements write into the result in the order
 * of the result's unique index.  The groups come in hash order otherwise,
 * so that each row would go to a leaf of the index anywhere in the batch's
 * windows; in order, one row goes to the leaf of the row before it or the
 * next, and the rows of a window newer than any in the index go to its
 * rightmost leaf, which btree inserts into without descending the tree.
 * The sort compares values kept next to each group's pointer: comparing
 * keys read from the groups, which lie all over memory, cost as much as
 * the index saved (measured).  A store whose first group key has no such
 * value (a type without an abbreviation) is sorted by window only.  The
 * NULL entries of groups that left the list are dropped first: a sorted
 * list has none.
 */
static void
sort_rows(StateStore *s, StoreRows rows)
{
	RowsList   *l = &s->rows[rows];
	int64		n = 0;

	if (l->sorted)
		return;
	for (int64 i = 0; i < l->n; i++)
	{
		SortedGroup *e = &l->items[i];
		StoreGroup *g = e->group;

		rows_prefetch(s, l, i, false);
		if (g == NULL)
			continue;
		e->window_start = s->plan.windowed ? g->window_start : 0;
		e->lead = (Datum) 0;
		e->lead_null = false;
		if (s->lead_key < s->nkeys)
		{
			e->lead = group_key(s, g, s->lead_key, &e->lead_null);
			if (!e->lead_null && s->lead_sort.abbrev_converter != NULL)
				e->lead = s->lead_sort.abbrev_converter(e->lead, &s->lead_sort);
		}
		l->items[n++] = *e;
	}
	Assert(n == l->ngroups);
	l->n = n;
	if (n > 1 && s->lead_key < s->nkeys && s->lead_sort.comparator == ssup_datum_unsigned_cmp)
		sort_groups_unsigned(l->items, n, s);
	else if (n > 1 && (s->plan.windowed || s->lead_key < s->nkeys))
		sort_groups(l->items, n, s);
	l->sorted = true;
	l->positions_valid = false;
}

/* Where a StoreRowsScan is: the groups of one list, or of the hash table. */
struct StoreRowsScan
{
	StateStore *store;
	StoreRows	rows;
	bool		with_tid;		/* its result row's location comes first */
	bool		in_hash;		/* STORE_ROWS_ALL: the hash table's groups */
	TupleHashIterator hash_it;
	RowsList   *list;			/* or a StoreRows list, */
	int64		next;			/* its next entry; */
	dlist_head *gone;			/* or STORE_ROWS_GONE's groups, */
	dlist_node *next_gone;		/* the next of them (NULL: at the end) */
};

/* The scan at its first group again. */
static void
rows_scan_rewind(StoreRowsScan *scan)
{
	if (scan->in_hash)
		InitTupleHashIterator(scan->store->hash, &scan->hash_it);
	else if (scan->list != NULL)
		scan->next = 0;
	else
		scan->next_gone = scan->gone != NULL && !dlist_is_empty(scan->gone) ?
			dlist_head_node(scan->gone) : NULL;
}

/*
 * The groups of the list `which` names ("insert", "update", "upsert",
 * "closed", "gone" or "all") of the query's store, if it is this backend's
 * store for store_rows(), as rows of natts columns: the state table's
 * row, preceded by the group's result row location when natts is one
 * more.  Lists a statement writes into the result come in the order of
 * its unique index (sort_rows).  The scan reads the groups where they are:
 * nothing may change the store until it ends.
 */
StoreRowsScan *
store_rows_scan_begin(int32 query_id, const char *which, TupleDesc want)
{
	int			natts = want->natts;
	StateStore *s = batch_scope_store(query_id);
	StoreRowsScan *scan = palloc0(sizeof(StoreRowsScan));

	if (strcmp(which, "insert") == 0)
		scan->rows = STORE_ROWS_INSERT;
	else if (strcmp(which, "update") == 0)
		scan->rows = STORE_ROWS_UPDATE;
	else if (strcmp(which, "upsert") == 0)
		scan->rows = STORE_ROWS_UPSERT;
	else if (strcmp(which, "closed") == 0)
		scan->rows = STORE_ROWS_CLOSED;
	else if (strcmp(which, "gone") == 0)
		scan->rows = STORE_ROWS_GONE;
	else if (strcmp(which, "all") == 0)
		scan->rows = STORE_ROWS_ALL;
	else
		elog(ERROR, "streamwin: store_rows() does not know \"%s\"", which);
	if (s == NULL || !s->loaded)
		return scan;			/* no store: no rows */
	scan->with_tid = natts == s->state_desc->natts + 1;
	batch_rows_check_type(s->state_desc, want, scan->with_tid ? TIDOID : InvalidOid,
						  psprintf("store_rows() of query %d", query_id));
	scan->store = s;
	if (scan->rows == STORE_ROWS_ALL)
		scan->in_hash = true;
	else if (scan->rows == STORE_ROWS_GONE)
		scan->gone = &s->gone;
	else
	{
		sort_rows(s, scan->rows);
		scan->list = &s->rows[scan->rows];
	}
	rows_scan_rewind(scan);
	return scan;
}

/*
 * The next group's row into values/nulls (natts long, as begun), which
 * point into the group; false after the last.
 */
bool
store_rows_scan_next(StoreRowsScan *scan, Datum *values, bool *nulls)
{
	StateStore *s = scan->store;
	StoreGroup *g;
	int			first = scan->with_tid ? 1 : 0;

	if (s == NULL)
		return false;
	if (scan->in_hash)
	{
		TupleHashEntry entry = ScanTupleHashTable(s->hash, &scan->hash_it);

		if (entry == NULL)
			return false;
		g = (StoreGroup *) entry->additional;
	}
	else if (scan->list != NULL)
	{
		RowsList   *l = scan->list;

		/* sorted: no NULL entries, and each group's position is put right */
		Assert(l->sorted);
		if (scan->next >= l->n)
		{
			l->positions_valid = true;
			return false;
		}
		rows_prefetch(s, l, scan->next, true);
		g = l->items[scan->next].group;
		g->rows_pos = (int32) scan->next++;
	}
	else
	{
		if (scan->next_gone == NULL)
			return false;
		g = dlist_container(StoreGroup, changed_node, scan->next_gone);
		scan->next_gone = dlist_has_next(scan->gone, scan->next_gone) ?
			scan->next_gone->next : NULL;
	}
	group_values(s, g, values + first, nulls + first);
	ExecClearTuple(s->key_slot);
	if (scan->with_tid)
	{
		values[0] = PointerGetDatum(&g->result_tid);
		nulls[0] = !ItemPointerIsValid(&g->result_tid);
	}
	return true;
}

/* From the first row again (a rescan): the store has not changed. */
void
store_rows_scan_restart(StoreRowsScan *scan)
{
	if (scan->store == NULL)
		return;
	if (scan->in_hash)
		TermTupleHashIterator(&scan->hash_it);
	rows_scan_rewind(scan);
}

void
store_rows_scan_end(StoreRowsScan *scan)
{
	if (scan->store != NULL && scan->in_hash)
		TermTupleHashIterator(&scan->hash_it);
	pfree(scan);
}

/*
 * streamwin.store_rows(query_id integer, which text) RETURNS SETOF record:
 * the groups a result statement of the query writes (see StoreRows), as
 * rows of its state table, preceded by their result row's location when
 * the column list asks for one more column (of type tid).  Outside a batch
 * of the query in this backend it returns nothing.  The statements of a
 * batch read it through the custom scan of source_scan.c, which reads the
 * same rows without copying them into a tuplestore.
 */
Datum
streamwin_store_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		query_id = PG_GETARG_INT32(0);
	char	   *which = text_to_cstring(PG_GETARG_TEXT_PP(1));
	StoreRowsScan *scan;
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	desc = rsinfo->setDesc;
	scan = store_rows_scan_begin(query_id, which, desc);
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	while (store_rows_scan_next(scan, values, nulls))
		tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
	store_rows_scan_end(scan);
	return (Datum) 0;
}
