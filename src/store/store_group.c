/*-------------------------------------------------------------------------
 *
 * store_group.c
 *	  A state store's groups in memory: made, found, merged and freed
 *	  (see state_store_int.h for the store's files).
 *
 * Groups live in a TupleHashTable keyed by window start and group keys,
 * hashed and compared with the key types' own hash and equality functions,
 * as GROUP BY does (NULL is a group of its own).  Each entry's StoreGroup
 * holds the partial values and three row locations; it is also linked
 * into its window (windows are kept sorted by start, so closing them never
 * looks at the others), into the batch's list of changed groups and into
 * the list of groups changed since the last checkpoint.  A dedup store's
 * keys are groups too, kept in a binary heap by event time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "parser/parse_oper.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/typcache.h"

#include "datum_image.h"
#include "state_store_int.h"

/* The function that merges two partials of this kind and type. */
static void
partial_function(StateStore *s, StorePartial *p, const char *aggregate)
{
	Oid			fn = InvalidOid;

	switch (p->merge)
	{
		case MERGE_ADD:
		case MERGE_SUM:
			fn = get_opcode(compatible_oper_opid(list_make1(makeString("+")), p->type, p->type,
												 false));
			break;
		case MERGE_MIN:
		case MERGE_MAX:
			{
				TypeCacheEntry *tce = lookup_type_cache(p->type, TYPECACHE_CMP_PROC);

				fn = tce->cmp_proc;
				if (!OidIsValid(fn))
					ereport(ERROR,
							(errcode(ERRCODE_UNDEFINED_FUNCTION),
							 errmsg("could not identify a comparison function for type %s",
									format_type_be(p->type))));
			}
			break;
		case MERGE_AND:
		case MERGE_OR:
		case MERGE_FIRST:
		case MERGE_LAST:
			return;
		case MERGE_STATE:
			{
				Oid			args[3] = {REGPROCEDUREOID, BYTEAOID, BYTEAOID};

				p->aggfnoid = DatumGetObjectId(DirectFunctionCall1(regprocedurein,
																   CStringGetDatum(aggregate)));
				fn = LookupFuncName(list_make2(makeString("streamwin"), makeString("combine_states")),
									3, args, false);
			}
			break;
		case MERGE_UNION:
			{
				Oid			args[2] = {ANYARRAYOID, ANYARRAYOID};

				fn = LookupFuncName(list_make2(makeString("streamwin"), makeString("distinct_union")),
									2, args, false);
			}
			break;
		case MERGE_COUNTED:
			{
				Oid			args[2] = {BYTEAOID, BYTEAOID};

				fn = LookupFuncName(list_make2(makeString("streamwin"), makeString("change_set_merge")),
									2, args, false);
			}
			break;
	}
	fmgr_info_cxt(fn, &p->fn, s->cxt);
}

/*
 * The order of the result's unique index over the group keys, for
 * sort_rows: each key type's default btree order in its collation, and
 * for the first group key an abbreviated form where the type has one
 * (text: its first bytes), so that most comparisons of a sort need no
 * key datum but the one copied next to the group's pointer.
 */
static void
prepare_key_sorts(StateStore *s)
{
	int			first = s->plan.windowed ? 1 : 0;

	s->lead_key = first;
	s->key_sorts = palloc0(sizeof(SortSupportData) * s->nkeys);
	if (s->plan.dedup)
	{
		/* a dedup store writes no result rows: nothing to sort */
		s->lead_key = s->nkeys;
		return;
	}
	for (int k = first; k < s->nkeys; k++)
	{
		Form_pg_attribute att = TupleDescAttr(s->key_desc, k);
		Oid			lt;

		get_sort_group_operators(att->atttypid, false, false, false, &lt, NULL, NULL, NULL);
		if (!OidIsValid(lt))
		{
			/* a key with no order: sort_rows orders by window only */
			s->lead_key = s->nkeys;
			return;
		}
		s->key_sorts[k].ssup_cxt = s->cxt;
		s->key_sorts[k].ssup_collation = att->attcollation;
		PrepareSortSupportFromOrderingOp(lt, &s->key_sorts[k]);
		if (k == s->lead_key)
		{
			s->lead_sort.ssup_cxt = s->cxt;
			s->lead_sort.ssup_collation = att->attcollation;
			s->lead_sort.abbreviate = !att->attbyval;
			PrepareSortSupportFromOrderingOp(lt, &s->lead_sort);
			/* by reference without an abbreviation: every comparison reads keys */
			if (!att->attbyval && s->lead_sort.abbrev_converter == NULL)
				s->lead_key = s->nkeys;
		}
	}
}

StateStore *
store_create(const StorePlan *plan, Oid state_table, Oid checkpoint_table,
			 MemoryContext parent)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "streamwin state store",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	StateStore *s = palloc0(sizeof(StateStore));
	Relation	rel;
	int			first_key;
	int			first_partial;
	Oid		   *eqops;

	s->cxt = cxt;
	s->groups_cxt = AllocSetContextCreate(cxt, "streamwin state store groups",
										  ALLOCSET_DEFAULT_SIZES);
	s->temp_cxt = AllocSetContextCreate(cxt, "streamwin state store temp",
										ALLOCSET_DEFAULT_SIZES);
	s->state_table = state_table;
	s->checkpoint_table = checkpoint_table;
	s->plan = *plan;
	s->nkeys = plan->nkeys;
	s->npartials = plan->npartials;

	rel = table_open(state_table, AccessShareLock);
	s->state_desc = CreateTupleDescCopy(RelationGetDescr(rel));
	table_close(rel, AccessShareLock);
	s->row_values = palloc(sizeof(Datum) * s->state_desc->natts);
	s->row_nulls = palloc(sizeof(bool) * s->state_desc->natts);

	/*
	 * The state table: window_start, window_end (windowed), the group keys,
	 * the partials; the partial query gives window_start, keys, partials. A
	 * dedup store's table: the keys, the event time, the partials.
	 */
	first_key = plan->windowed ? 3 : 1;
	first_partial = first_key + plan->nkeys - (plan->windowed ? 1 : 0);
	if (plan->dedup)
		s->time_attno = first_partial++;
	if (first_partial + s->npartials - 1 != s->state_desc->natts)
		elog(ERROR, "streamwin: state table %u does not match its query's plan", state_table);
	s->key_state_attno = palloc(sizeof(AttrNumber) * s->nkeys);
	for (int k = 0; k < s->nkeys; k++)
		s->key_state_attno[k] = plan->windowed ? (k == 0 ? 1 : first_key + k - 1) : first_key + k;
	s->key_desc = CreateTemplateTupleDesc(s->nkeys);
	for (int k = 0; k < s->nkeys; k++)
		TupleDescCopyEntry(s->key_desc, k + 1, s->state_desc, s->key_state_attno[k]);

	s->partials = palloc0(sizeof(StorePartial) * Max(s->npartials, 1));
	for (int i = 0; i < s->npartials; i++)
	{
		StorePartial *p = &s->partials[i];
		Form_pg_attribute att = TupleDescAttr(s->state_desc, first_partial + i - 1);

		p->merge = plan->merge[i];
		p->state_attno = first_partial + i;
		p->type = att->atttypid;
		p->typlen = att->attlen;
		p->typbyval = att->attbyval;
		p->collation = att->attcollation;
		/* a state's: the aggregate's input collation, for its combine function */
		if (plan->collation != NULL && plan->collation[i] != NULL)
			p->collation = DatumGetObjectId(DirectFunctionCall1(regcollationin,
																CStringGetDatum(plan->collation[i])));
		/* bpchar's min and max keep the first of two equal values */
		p->tie_keeps_first = getBaseType(p->type) == BPCHAROID;
		partial_function(s, p, plan->aggregate[i]);
	}

	/* grouping as GROUP BY groups: each key type's equality and hash */
	eqops = palloc(sizeof(Oid) * s->nkeys);
	s->key_collations = palloc(sizeof(Oid) * s->nkeys);
	for (int k = 0; k < s->nkeys; k++)
	{
		Form_pg_attribute att = TupleDescAttr(s->key_desc, k);
		bool		hashable;

		get_sort_group_operators(att->atttypid, false, true, false, NULL, &eqops[k], NULL,
								 &hashable);
		if (!hashable)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("group key of type %s cannot be hashed", format_type_be(att->atttypid))));
		s->key_collations[k] = att->attcollation;
	}
	execTuplesHashPrepare(s->nkeys, eqops, &s->key_eqfuncs, &s->key_hashfuncs);
	prepare_key_sorts(s);
	s->key_cols = palloc(sizeof(AttrNumber) * s->nkeys);
	for (int k = 0; k < s->nkeys; k++)
		s->key_cols[k] = k + 1;
	s->key_slot = MakeSingleTupleTableSlot(s->key_desc, &TTSOpsMinimalTuple);
	if (plan->session && s->nkeys > 1)
	{
		s->session_key_desc = CreateTemplateTupleDesc(s->nkeys - 1);
		for (int k = 1; k < s->nkeys; k++)
			TupleDescCopyEntry(s->session_key_desc, k, s->key_desc, k + 1);
		s->session_key_slot = MakeSingleTupleTableSlot(s->session_key_desc,
													   &TTSOpsMinimalTuple);
	}
	MemoryContextSwitchTo(old);
	return s;
}

void
store_free(StateStore *s)
{
	if (s == NULL)
		return;
	ExecDropSingleTupleTableSlot(s->key_slot);
	if (s->session_key_slot != NULL)
		ExecDropSingleTupleTableSlot(s->session_key_slot);
	MemoryContextDelete(s->cxt);
}

void
tid_list_init(TidList *l)
{
	l->max = 64;
	l->n = 0;
	l->tids = palloc(sizeof(ItemPointerData) * l->max);
}

void
tid_list_add(TidList *l, ItemPointer tid)
{
	if (l->n == l->max)
	{
		l->max *= 2;
		l->tids = repalloc(l->tids, sizeof(ItemPointerData) * l->max);
	}
	l->tids[l->n++] = *tid;
}

/* Delete the rows of the list from rel, and empty it. */
void
tid_list_delete_rows(TidList *l, Relation rel)
{
	for (int i = 0; i < l->n; i++)
		simple_heap_delete(rel, &l->tids[i]);
	l->n = 0;
}

/*
 * Delete key's entry from hash table h, through slot (of h's key type);
 * hash is the key's hash if known, else NULL.
 */
void
hash_delete_key(TupleHashTable h, TupleTableSlot *slot, MinimalTuple key,
				const uint32 *hash)
{
	TupleHashEntry entry;

	ExecStoreMinimalTuple(key, slot, false);
	entry = hash != NULL ? LookupTupleHashEntryHash(h, slot, NULL, *hash) :
		LookupTupleHashEntry(h, slot, NULL, NULL);
	if (entry == NULL)
		elog(ERROR, "streamwin: an entry of a state store is not in its hash table");
	tuplehash_delete_item(h->hashtab, entry);
	ExecClearTuple(slot);
}

/*
 * All groups of a store have the same size, which a slab context serves
 * exactly.  In groups_cxt's AllocSet, a group (104 bytes and 9 a partial)
 * would take the next power of two: with three partials 256 bytes for 131.
 */
#define GROUP_SLAB_BLOCK_SIZE (64 * 1024)

/*
 * No group, window or dedup key (in a freshly reset groups_cxt): the
 * groups' part of store_reset_groups.
 */
void
groups_reset(StateStore *s)
{
	MemoryContext old;

	s->nfolds = 0;
	s->group_slab = SlabContextCreate(s->groups_cxt, "streamwin state store group",
									  GROUP_SLAB_BLOCK_SIZE, group_size(s));
	old = MemoryContextSwitchTo(s->groups_cxt);
	s->hash = BuildTupleHashTableExt(NULL, s->key_desc, s->nkeys, s->key_cols,
									 s->key_eqfuncs, s->key_hashfuncs, s->key_collations,
									 1024, sizeof(StoreGroup), s->groups_cxt, s->groups_cxt,
									 s->temp_cxt, false);
	s->ngroups = 0;
	s->maxwindows = 16;
	s->nwindows = 0;
	s->windows = palloc(sizeof(StoreWindow *) * s->maxwindows);
	dlist_init(&s->changed);
	s->nchanged = 0;
	dlist_init(&s->ckpt_dirty);
	tid_list_init(&s->ckpt_gone);
	dlist_init(&s->gone);
	s->ngone = 0;
	tid_list_init(&s->state_gone);
	if (s->plan.dedup)
	{
		s->nkey_times = 0;
		s->max_key_times = 1024;
		s->key_times = MemoryContextAllocHuge(s->groups_cxt, sizeof(KeyTime) * s->max_key_times);
	}
	MemoryContextSwitchTo(old);
}

/* Add a dedup key with an event time (in window_start) to the heap. */
void
key_times_push(StateStore *s, StoreGroup *g)
{
	KeyTime    *h;
	int64		i;

	if (s->nkey_times == s->max_key_times)
	{
		s->max_key_times *= 2;
		s->key_times = repalloc_huge(s->key_times, sizeof(KeyTime) * s->max_key_times);
	}
	h = s->key_times;
	i = s->nkey_times++;
	while (i > 0 && h[(i - 1) / 2].time > g->window_start)
	{
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i].time = g->window_start;
	h[i].group = g;
}

/* Take the earliest key off the heap. */
void
key_times_pop(StateStore *s)
{
	KeyTime    *h = s->key_times;
	KeyTime		last = h[--s->nkey_times];
	int64		n = s->nkey_times;
	int64		i = 0;

	for (;;)
	{
		int64		child = 2 * i + 1;

		if (child >= n)
			break;
		if (child + 1 < n && h[child + 1].time < h[child].time)
			child++;
		if (h[child].time >= last.time)
			break;
		h[i] = h[child];
		i = child;
	}
	if (n > 0)
		h[i] = last;
}

/* A dedup key's event time, from a row's value (NULL: it has none). */
void
key_time_set(StoreGroup *g, Datum time, bool isnull)
{
	g->window_start = isnull ? 0 : DatumGetTimestampTz(time);
	if (isnull)
		g->flags |= GROUP_NO_TIME;
	else
		g->flags &= ~GROUP_NO_TIME;
}

/* The position of the first window starting at or after start. */
static int
window_position(StateStore *s, TimestampTz start)
{
	int			lo = 0;
	int			hi = s->nwindows;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (s->windows[mid]->start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The window starting at start, made if missing. */
static StoreWindow *
store_window(StateStore *s, TimestampTz start)
{
	int			pos;
	StoreWindow *w;

	/* a batch mostly meets the newest windows: look there first */
	if (s->nwindows > 0 && s->windows[s->nwindows - 1]->start == start)
		return s->windows[s->nwindows - 1];
	pos = window_position(s, start);
	if (pos < s->nwindows && s->windows[pos]->start == start)
		return s->windows[pos];
	if (s->nwindows == s->maxwindows)
	{
		s->maxwindows *= 2;
		s->windows = repalloc(s->windows, sizeof(StoreWindow *) * s->maxwindows);
	}
	memmove(&s->windows[pos + 1], &s->windows[pos], sizeof(StoreWindow *) * (s->nwindows - pos));
	s->nwindows++;
	w = MemoryContextAlloc(s->groups_cxt, sizeof(StoreWindow));
	w->start = start;
	dlist_init(&w->groups);
	s->windows[pos] = w;
	return w;
}

/* See state_store_int.h */
void
window_forget_if_empty(StateStore *s, TimestampTz start)
{
	int			pos = window_position(s, start);

	if (pos == s->nwindows || s->windows[pos]->start != start ||
		!dlist_is_empty(&s->windows[pos]->groups))
		return;
	pfree(s->windows[pos]);
	memmove(&s->windows[pos], &s->windows[pos + 1], sizeof(StoreWindow *) * (s->nwindows - pos - 1));
	s->nwindows--;
}

/*
 * A value as the store keeps it: one stored out of line (in a joined
 * table's TOAST, or in the state table's own, when the store loaded it) is
 * fetched, in the current memory, since the row that holds it may be
 * updated or deleted and vacuumed while the group lives.  An expanded
 * object is flattened.
 */
static Datum
value_in_line(Datum value, int16 typlen)
{
	if (typlen != -1 || !VARATT_IS_EXTERNAL(DatumGetPointer(value)))
		return value;
	return PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(value)));
}

/* Put the first nkeys columns of slot into the key slot. */
void
fill_key_slot(StateStore *s, TupleTableSlot *slot, const AttrNumber *attnos)
{
	TupleTableSlot *key = s->key_slot;

	ExecClearTuple(key);
	for (int k = 0; k < s->nkeys; k++)
	{
		key->tts_values[k] = slot_getattr(slot, attnos ? attnos[k] : k + 1, &key->tts_isnull[k]);
		if (!key->tts_isnull[k])
			key->tts_values[k] = value_in_line(key->tts_values[k],
											   TupleDescAttr(key->tts_tupleDescriptor, k)->attlen);
	}
	ExecStoreVirtualTuple(key);
}

/* A new group in group_slab: zeroed, its partials NULL. */
StoreGroup *
group_alloc(StateStore *s)
{
	StoreGroup *g = MemoryContextAllocZero(s->group_slab, group_size(s));

	memset(GROUP_NULLS(s, g), true, s->npartials);
	return g;
}

/*
 * The group of the key in the key slot, or NULL; made (empty) if created
 * is not NULL, which then says whether it was.  known_hash: the key's hash
 * (TupleHashTableHash), or NULL.
 */
StoreGroup *
store_group_hashed(StateStore *s, bool *created, const uint32 *known_hash)
{
	bool		isnew = false;
	TupleHashEntry entry;
	StoreGroup *g;
	uint32		hash;

	if (known_hash != NULL)
	{
		hash = *known_hash;
		entry = LookupTupleHashEntryHash(s->hash, s->key_slot, created ? &isnew : NULL, hash);
	}
	else
		entry = LookupTupleHashEntry(s->hash, s->key_slot, created ? &isnew : NULL, &hash);
	if (created)
		*created = isnew;
	if (entry == NULL)
		return NULL;
	if (!isnew)
		return (StoreGroup *) entry->additional;

	g = group_alloc(s);
	g->key = entry->firstTuple;
	g->hash = hash;
	g->rows = -1;
	ItemPointerSetInvalid(&g->state_tid);
	ItemPointerSetInvalid(&g->ckpt_tid);
	ItemPointerSetInvalid(&g->result_tid);
	if (s->plan.windowed)
	{
		if (s->key_slot->tts_isnull[0])
			elog(ERROR, "streamwin: a group without its window start");
		g->window_start = DatumGetTimestampTz(s->key_slot->tts_values[0]);
		/* a session is in its key's sessions instead (session_attach) */
		if (!s->plan.session)
			dlist_push_tail(&store_window(s, g->window_start)->groups, &g->in.window_node);
	}
	entry->additional = g;
	s->ngroups++;
	return g;
}

StoreGroup *
store_group(StateStore *s, bool *created)
{
	return store_group_hashed(s, created, NULL);
}

/* Set a partial to a copy of value, freeing what it held. */
void
set_partial(StateStore *s, StoreGroup *g, int i, Datum value, bool isnull)
{
	StorePartial *p = &s->partials[i];

	Datum		old = g->values[i];
	bool		old_null = GROUP_NULLS(s, g)[i];
	MemoryContext cxt;

	if (isnull || p->typbyval)
		g->values[i] = value;
	else
	{
		Datum		in_line;

		cxt = MemoryContextSwitchTo(s->groups_cxt);
		/* (a value fetched from TOAST is a copy already) */
		in_line = value_in_line(value, p->typlen);
		g->values[i] = in_line != value ? in_line : datumCopy(value, false, p->typlen);
		MemoryContextSwitchTo(cxt);
	}
	GROUP_NULLS(s, g)[i] = isnull;
	if (!old_null && !p->typbyval)
		pfree(DatumGetPointer(old));
}

/* fn(a, b) for functions that handle no NULLs here: both are given. */
static Datum
call2(FmgrInfo *fn, Oid collation, Datum a, Datum b, bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 2);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, fn, 2, collation, NULL, NULL);
	fcinfo->args[0].value = a;
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = b;
	fcinfo->args[1].isnull = false;
	result = FunctionCallInvoke(fcinfo);
	*isnull = fcinfo->isnull;
	return result;
}

/* combine_states(aggregate, a, b) */
static Datum
call_combine_states(StorePartial *p, Datum a, Datum b, bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 3);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, &p->fn, 3, p->collation, NULL, NULL);
	fcinfo->args[0].value = ObjectIdGetDatum(p->aggfnoid);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = a;
	fcinfo->args[1].isnull = false;
	fcinfo->args[2].value = b;
	fcinfo->args[2].isnull = false;
	result = FunctionCallInvoke(fcinfo);
	*isnull = fcinfo->isnull;
	return result;
}

/*
 * Partial i's a merged with v, both not NULL, as merge_sql()
 * (compile_aggregate.c) does in SQL; false where that is a itself.
 */
bool
combine_partial(StateStore *s, int i, Datum a, Datum v, Datum *result, bool *result_null)
{
	StorePartial *p = &s->partials[i];

	*result_null = false;
	switch (p->merge)
	{
		case MERGE_ADD:
		case MERGE_SUM:
			*result = call2(&p->fn, p->collation, a, v, result_null);
			return true;
		case MERGE_MIN:
		case MERGE_MAX:
			{
				bool		cmp_null;
				int32		c = DatumGetInt32(call2(&p->fn, p->collation, v, a, &cmp_null));

				/*
				 * Of two equal values (1.0 and 1.00) the later, v, as
				 * PostgreSQL's min and max keep it (numeric_smaller returns
				 * its second argument on a tie); but bpchar's keep the first
				 * ('ab' and 'ab ', or two forms a collation calls equal)
				 */
				if (p->merge == MERGE_MIN ? c > 0 : c < 0)
					return false;
				if (c == 0 && p->tie_keeps_first)
					return false;
				*result = v;
			}
			return true;
		case MERGE_AND:
			if (!DatumGetBool(a) || DatumGetBool(v))
				return false;
			*result = BoolGetDatum(false);
			return true;
		case MERGE_OR:
			if (DatumGetBool(a) || !DatumGetBool(v))
				return false;
			*result = BoolGetDatum(true);
			return true;
		case MERGE_STATE:
			*result = call_combine_states(p, a, v, result_null);
			return true;
		case MERGE_UNION:
		case MERGE_COUNTED:
			*result = call2(&p->fn, p->collation, a, v, result_null);
			return true;
		case MERGE_FIRST:
			break;
		case MERGE_LAST:
			*result = v;
			return true;
	}
	return false;
}

/*
 * Merge the batch's partial value into the group's: a NULL partial is "no
 * input yet" (a sum or bool of filtered-out rows, an initial transition
 * state), so merging with it keeps the other.
 */
void
merge_partial(StateStore *s, StoreGroup *g, int i, Datum v, bool isnull)
{
	Datum		result;
	bool		result_null;

	if (isnull)
		return;
	if (GROUP_NULLS(s, g)[i])
		set_partial(s, g, i, v, false);
	else if (combine_partial(s, i, g->values[i], v, &result, &result_null))
		set_partial(s, g, i, result, result_null);
}

/* Mark a group changed by this batch. */
void
group_changed(StateStore *s, StoreGroup *g)
{
	if (g->flags & GROUP_CHANGED)
		return;
	g->flags |= GROUP_CHANGED;
	dlist_push_tail(&s->changed, &g->changed_node);
	s->nchanged++;
}

/*
 * Forget a group: its hash entry, its memory.  A session's group leaves its
 * key's sessions first (group_drop).
 */
void
group_free(StateStore *s, StoreGroup *g)
{
	Assert(s->ngroups > 0);
	hash_delete_key(s->hash, s->key_slot, g->key, &g->hash);
	for (int i = 0; i < s->npartials; i++)
		if (!GROUP_NULLS(s, g)[i] && !s->partials[i].typbyval)
			pfree(DatumGetPointer(g->values[i]));
	pfree(g->key);
	pfree(g);
	s->ngroups--;
}

/* A group as the values of a state table row (in values/nulls, natts long). */
void
group_values(StateStore *s, StoreGroup *g, Datum *values, bool *nulls)
{
	ExecStoreMinimalTuple(g->key, s->key_slot, false);
	slot_getallattrs(s->key_slot);
	for (int k = 0; k < s->nkeys; k++)
	{
		values[s->key_state_attno[k] - 1] = s->key_slot->tts_values[k];
		nulls[s->key_state_attno[k] - 1] = s->key_slot->tts_isnull[k];
	}
	if (s->plan.session)
	{
		/* a record of STORE_ROWS_GONE has no session, nor an end */
		values[1] = g->in.session ? TimestampTzGetDatum(g->in.session->end) : (Datum) 0;
		nulls[1] = g->in.session == NULL;
	}
	else if (s->plan.windowed)
	{
		values[1] = TimestampTzGetDatum(g->window_start + s->plan.window_size_us);
		nulls[1] = false;
	}
	else if (s->plan.dedup)
	{
		values[s->time_attno - 1] = TimestampTzGetDatum(g->window_start);
		nulls[s->time_attno - 1] = (g->flags & GROUP_NO_TIME) != 0;
	}
	for (int i = 0; i < s->npartials; i++)
	{
		values[s->partials[i].state_attno - 1] = g->values[i];
		nulls[s->partials[i].state_attno - 1] = GROUP_NULLS(s, g)[i];
	}
}

/*
 * A group as a row of the state table (in the current memory context,
 * which holds nothing else of it: the tuple is all a row writer frees).
 */
HeapTuple
group_tuple(StateStore *s, StoreGroup *g)
{
	group_values(s, g, s->row_values, s->row_nulls);
	return heap_form_tuple(s->state_desc, s->row_values, s->row_nulls);
}

bool
same_key_images(StateStore *s, StoreGroup *g, const Datum *keys, const bool *key_nulls)
{
	for (int k = 0; k < s->nkeys; k++)
	{
		bool		isnull;
		Datum		stored = group_key(s, g, k, &isnull);

		if (isnull != key_nulls[k] ||
			(!isnull && !datum_images_equal(stored, keys[k], TupleDescAttr(s->key_desc, k))))
			return false;
	}
	return true;
}

/* Key k of a group, read from its key tuple. */
Datum
group_key(StateStore *s, StoreGroup *g, int k, bool *isnull)
{
	HeapTupleData tuple;

	tuple.t_len = g->key->t_len + MINIMAL_TUPLE_OFFSET;
	tuple.t_data = (HeapTupleHeader) ((char *) g->key - MINIMAL_TUPLE_OFFSET);
	return heap_getattr(&tuple, k + 1, s->key_desc, isnull);
}

int64
store_groups(StateStore *s)
{
	return s->ngroups;
}

Size
store_memory(StateStore *s)
{
	return MemoryContextMemAllocated(s->groups_cxt, true);
}
