/*-------------------------------------------------------------------------
 *
 * state_store.c
 *	  The open groups of an aggregation in memory, merged in C, persisted
 *	  by location in the state and checkpoint tables (see state_store.h).
 *
 * Groups live in a TupleHashTable keyed by window start and group keys,
 * hashed and compared with the key types' own hash and equality functions,
 * as GROUP BY does (NULL is a group of its own).  Each entry's StoreGroup
 * holds the partial values and three row locations; it is also linked
 * into its window (windows are kept sorted by start, so closing them never
 * looks at the others), into the batch's list of changed groups and into
 * the list of groups changed since the last checkpoint.  A session is a
 * group whose StoreSession links it into its key's sessions (a second hash
 * table, by the group keys alone, each key's sessions in order of start)
 * and into a pairing heap by end, which closing reads from the top.
 *
 * Rows are written with the heap's own functions: the state table (an
 * UNLOGGED table of the query's, without indexes while the store runs) and
 * the checkpoint table (logged, without indexes) are written by nothing
 * but this store, so each group's row is where the store last put it.
 * Result rows are written by SQL statements over streamwin.store_rows()
 * (the runner's), through the executor, so that the result table's
 * indexes, constraints, triggers and policies apply as to any write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "lib/ilist.h"
#include "lib/pairingheap.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "parser/parse_oper.h"
#include "storage/bufmgr.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/sortsupport.h"
#include "utils/typcache.h"

#include "options.h"
#include "state_store.h"

PG_FUNCTION_INFO_V1(streamwin_store_rows);

/* streamwin.state_memory (kB) */
int			streamwin_state_memory = 1024 * 1024;

/* streamwin.store_merge */
int			streamwin_store_merge = STORE_MERGE_AUTO;

/* StoreGroup.flags */
#define GROUP_CHANGED		0x01	/* merged by this batch */
#define GROUP_NEW			0x02	/* created by this batch */
#define GROUP_CKPT_DIRTY	0x04	/* changed since the last checkpoint */
#define GROUP_CLOSED		0x08	/* its window closed in this batch */
#define GROUP_CKPT_SAME		0x10	/* loading: its checkpoint row matches */
#define GROUP_NO_TIME		0x20	/* a dedup key without an event time */
#define GROUP_FOLDING		0x40	/* its batch rows fold apart (fold_pos) */

/* Rows a result statement writes: a list of StoreRows kind per group. */
#define NUM_STORE_ROWS (STORE_ROWS_CLOSED + 1)

/* Locations of rows to delete, in the current memory context when made. */
typedef struct TidList
{
	ItemPointerData *tids;
	int			n;
	int			max;
} TidList;

struct StoreSession;

typedef struct StoreGroup
{
	MinimalTuple key;			/* the hash entry's key tuple */
	TimestampTz window_start;	/* windowed stores */
	uint8		flags;
	int8		rows;			/* StoreRows list it may be in (rows_contains) */
	ItemPointerData state_tid;	/* invalid: no state row yet */
	ItemPointerData ckpt_tid;	/* invalid: no checkpoint row */
	ItemPointerData result_tid; /* invalid: not known */
	uint32		hash;			/* of key in the hash table: no rehashing to
								 * drop it */
	int32		rows_pos;		/* its entry in that list */
	int32		fold_pos;		/* GROUP_FOLDING: its entry in the folds */
	dlist_node	changed_node;	/* in the batch's changed groups */
	dlist_node	ckpt_node;		/* in the groups changed since the checkpoint */

	/*
	 * A window's group is in its window's groups; a session has its session
	 * part instead (NULL: none yet, or a record of STORE_ROWS_GONE).  One or
	 * the other, in the same place: a group's size decides the allocator's
	 * chunk it takes, and with it the store's memory.
	 */
	union
	{
		dlist_node	window_node;
		struct StoreSession *session;
	}			in;
	Datum		values[FLEXIBLE_ARRAY_MEMBER];	/* per partial, then
												 * GROUP_NULLS */
} StoreGroup;

/*
 * Whether each partial is NULL: npartials bools after the values, in the
 * group's own chunk (a separate array would take a chunk of its own).
 */
#define GROUP_NULLS(s, g) ((bool *) ((g)->values + (s)->npartials))

/*
 * An entry of a StoreRows list: a group, and its window's start and first
 * key's sort value when sort_rows fills them in.
 */
typedef struct SortedGroup
{
	TimestampTz window_start;
	Datum		lead;			/* the first group key, or its abbreviation */
	bool		lead_null;
	StoreGroup *group;			/* NULL: the group left the list */
} SortedGroup;

/*
 * A StoreRows list, an array of its groups.  A statement's scan reads them
 * in order and asks for the groups some entries ahead of it to be fetched
 * into the cache while it works, which a linked list cannot do: each of
 * its groups, anywhere in memory, is needed to find the next.  A group in
 * the list points at its entry and the entry back at it (rows_contains),
 * so a list empties without touching its groups; a group that leaves it
 * leaves a NULL entry behind.  Sorting moves the entries: the scan that
 * follows puts each group's position right as it reads it.
 */
typedef struct RowsList
{
	SortedGroup *items;			/* in cxt: the batch's, not the state's memory */
	int64		n;				/* entries used, NULL ones included */
	int64		max;
	int64		ngroups;		/* the entries that are not NULL */
	bool		sorted;			/* in the result's order since the last add */
	bool		positions_valid;	/* every group's rows_pos is right */
} RowsList;

typedef struct StoreWindow
{
	TimestampTz start;
	dlist_head	groups;
} StoreWindow;

/* The open sessions of one group key, in order of start: they never overlap. */
typedef struct SessionKey
{
	MinimalTuple key;			/* its hash entry's key tuple */
	dlist_head	sessions;
} SessionKey;

/* A session's part of its group: its end moves as it grows. */
typedef struct StoreSession
{
	StoreGroup *group;
	TimestampTz end;
	SessionKey *key;
	dlist_node	key_node;		/* in key->sessions */
	pairingheap_node end_node;	/* in the store's sessions by end, until
								 * closed */
} StoreSession;

/*
 * A dedup key by its event time, in a binary heap: keys leave the store
 * only from its top (the watermark passed them) or all together, and an
 * entry costs 16 bytes where a heap node in every group would cost more.
 */
typedef struct KeyTime
{
	TimestampTz time;
	StoreGroup *group;
} KeyTime;

/* How one partial column merges. */
typedef struct StorePartial
{
	MergeKind	merge;
	AttrNumber	state_attno;	/* its column in the state table */
	Oid			type;
	int16		typlen;
	bool		typbyval;
	Oid			collation;
	Oid			aggfnoid;		/* MERGE_STATE */
	FmgrInfo	fn;				/* +, cmp, combine_states, distinct_union */
} StorePartial;

struct StateStore
{
	MemoryContext cxt;			/* the store and its fixed parts */
	MemoryContext groups_cxt;	/* the groups: reset when loading anew */
	MemoryContext temp_cxt;		/* per row, for hashing and merging */
	Oid			state_table;
	Oid			checkpoint_table;
	StorePlan	plan;
	int			nkeys;
	int			npartials;
	TupleDesc	state_desc;		/* the state table's row type */
	Datum	   *row_values;		/* a row of it being formed (group_tuple) */
	bool	   *row_nulls;
	TupleDesc	key_desc;		/* window_start and the group keys */
	AttrNumber *key_state_attno;	/* per key, its state table column */
	StorePartial *partials;
	AttrNumber *key_cols;		/* 1..nkeys: the key slot's columns */
	Oid		   *key_eqfuncs;
	FmgrInfo   *key_hashfuncs;
	Oid		   *key_collations;
	TupleTableSlot *key_slot;
	AttrNumber	time_attno;		/* a dedup store: the event time's column */
	SortSupport key_sorts;		/* per key, its btree order (sort_rows) */
	SortSupportData lead_sort;	/* the first group key's, abbreviated if it
								 * can be */
	int			lead_key;		/* its index in key_desc; nkeys: none */
	TupleDesc	session_key_desc;	/* the group keys without window_start */
	TupleTableSlot *session_key_slot;

	/* the groups (in groups_cxt) */
	MemoryContext group_slab;	/* the StoreGroups themselves (group_alloc) */
	TupleHashTable hash;
	int64		ngroups;
	StoreWindow **windows;		/* sorted by start */
	int			nwindows;
	int			maxwindows;
	TupleHashTable session_keys;	/* sessions by group key (with keys) */
	SessionKey *no_keys;		/* the sessions of a store without keys */
	pairingheap *session_ends;	/* sessions by end, the earliest first */
	dlist_head	gone;			/* STORE_ROWS_GONE: keys of result rows to
								 * delete, as groups of no hash entry */
	int64		ngone;
	TidList		state_gone;		/* state rows of sessions merged away */
	KeyTime    *key_times;		/* a dedup store's keys with an event time
								 * (window_start), the earliest first */
	int64		nkey_times;
	int64		max_key_times;
	dlist_head	changed;
	int64		nchanged;		/* groups in changed */
	dlist_head	ckpt_dirty;

	/*
	 * Merging a batch's rows (merge_receive): the partials of the rows of
	 * groups the store had before the batch, folded apart per group
	 * (npartials each), merged into their groups when the rows end.
	 */
	StoreGroup **fold_groups;
	Datum	   *fold_values;
	bool	   *fold_nulls;
	int			nfolds;
	int			max_folds;
	bool		merge_rows;		/* the next batch's rows are merged as rows */
	RowsList	rows[NUM_STORE_ROWS];
	TidList		ckpt_gone;		/* checkpoint rows of groups gone since */

	bool		loaded;
	bool		in_batch;		/* a batch began and has not ended */
	TransactionId catalog_xmin; /* who last wrote the query's catalog row */
	Oid			state_file;		/* the tables' relfilenodes as loaded: a */
	Oid			ckpt_file;		/* rewrite (VACUUM FULL, CLUSTER) moves every
								 * row */
};

static void rows_clear(StateStore *s, StoreRows which);

static const char *const merge_names[] = {
	[MERGE_ADD] = "add",
	[MERGE_SUM] = "sum",
	[MERGE_MIN] = "min",
	[MERGE_MAX] = "max",
	[MERGE_AND] = "and",
	[MERGE_OR] = "or",
	[MERGE_STATE] = "state",
	[MERGE_UNION] = "union",
	[MERGE_FIRST] = "first",
};

const char *
merge_kind_name(MergeKind m)
{
	return merge_names[m];
}

/* --- the plan ------------------------------------------------------------ */

void
store_plan_json(const StorePlan *plan, StringInfo buf)
{
	appendStringInfo(buf, "{\"keys\": %d, \"window_size_us\": " INT64_FORMAT ", ",
					 plan->nkeys, plan->windowed ? plan->window_size_us : (int64) 0);
	if (plan->session)
		appendStringInfoString(buf, "\"window\": \"session\", ");
	if (plan->dedup)
		appendStringInfoString(buf, "\"dedup\": true, ");
	if (plan->panes > 1)
		appendStringInfo(buf, "\"panes\": %d, \"slide_us\": " INT64_FORMAT ", ",
						 plan->panes, plan->slide_us);
	appendStringInfoString(buf, "\"partials\": [");
	for (int i = 0; i < plan->npartials; i++)
	{
		appendStringInfo(buf, "%s{\"merge\": \"%s\"", i ? ", " : "", merge_names[plan->merge[i]]);
		if (plan->aggregate[i] != NULL)
		{
			appendStringInfoString(buf, ", \"aggregate\": ");
			escape_json(buf, plan->aggregate[i]);
		}
		appendStringInfoChar(buf, '}');
	}
	appendStringInfoString(buf, "]}");
}

/*
 * The member of a plan that describes a store ("store", "dedup_store"), or
 * NULL: a plan compiled without that store.
 */
StorePlan *
store_plan_read(Jsonb *plan, const char *member)
{
	char	   *plan_json = jsonb_get_text(plan, member);
	Jsonb	   *store;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	StorePlan  *p;
	char	   *window;
	char	   *field;
	int			depth = 0;
	int			cap = 8;
	char	   *key = NULL;

	if (plan_json == NULL)
		return NULL;
	store = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(plan_json)));
	p = palloc0(sizeof(StorePlan));
	p->nkeys = atoi(jsonb_get_text(store, "keys"));
	window = jsonb_get_text(store, "window_size_us");
	p->window_size_us = window ? strtoll(window, NULL, 10) : 0;
	p->windowed = p->window_size_us > 0;
	window = jsonb_get_text(store, "window");
	p->session = window != NULL && strcmp(window, "session") == 0;
	p->dedup = jsonb_get_text(store, "dedup") != NULL;
	field = jsonb_get_text(store, "panes");
	p->panes = field ? atoi(field) : 0;
	field = jsonb_get_text(store, "slide_us");
	p->slide_us = field ? strtoll(field, NULL, 10) : 0;
	p->merge = palloc(sizeof(MergeKind) * cap);
	p->aggregate = palloc0(sizeof(char *) * cap);

	/* partials: [{"merge": ..., "aggregate": ...}, ...] */
	it = JsonbIteratorInit(&store->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_OBJECT)
		{
			if (++depth == 2)
			{
				if (p->npartials == cap)
				{
					cap *= 2;
					p->merge = repalloc(p->merge, sizeof(MergeKind) * cap);
					p->aggregate = repalloc(p->aggregate, sizeof(char *) * cap);
				}
				p->merge[p->npartials] = MERGE_ADD;
				p->aggregate[p->npartials] = NULL;
				p->npartials++;
			}
		}
		else if (tok == WJB_END_OBJECT)
			depth--;
		else if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && depth == 2 && v.type == jbvString)
		{
			char	   *s = pnstrdup(v.val.string.val, v.val.string.len);

			if (strcmp(key, "merge") == 0)
			{
				bool		found = false;

				for (int m = 0; m < (int) lengthof(merge_names); m++)
					if (strcmp(s, merge_names[m]) == 0)
					{
						p->merge[p->npartials - 1] = (MergeKind) m;
						found = true;
					}
				if (!found)
					elog(ERROR, "streamwin: unknown merge kind \"%s\" in a query's plan", s);
			}
			else if (strcmp(key, "aggregate") == 0)
				p->aggregate[p->npartials - 1] = s;
		}
	}
	return p;
}

/* --- creating ------------------------------------------------------------ */

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

static void
tid_list_init(TidList *l)
{
	l->max = 64;
	l->n = 0;
	l->tids = palloc(sizeof(ItemPointerData) * l->max);
}

static void
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
static void
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
static void
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

/* Sessions by end: the earliest end is the heap's first. */
static int
session_end_cmp(const pairingheap_node *a, const pairingheap_node *b, void *arg)
{
	const StoreSession *sa = pairingheap_const_container(StoreSession, end_node, a);
	const StoreSession *sb = pairingheap_const_container(StoreSession, end_node, b);

	if (sa->end < sb->end)
		return 1;
	if (sa->end > sb->end)
		return -1;
	return 0;
}

/*
 * All groups of a store have the same size, which a slab context serves
 * exactly.  In groups_cxt's AllocSet, a group (104 bytes and 9 a partial)
 * would take the next power of two: with three partials 256 bytes for 131.
 */
#define GROUP_SLAB_BLOCK_SIZE (64 * 1024)

static Size
group_size(StateStore *s)
{
	return offsetof(StoreGroup, values) + (sizeof(Datum) + sizeof(bool)) * s->npartials;
}

/* An empty set of groups (in a freshly reset groups_cxt). */
static void
store_reset_groups(StateStore *s)
{
	MemoryContext old;

	MemoryContextReset(s->groups_cxt);
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
	for (int i = 0; i < NUM_STORE_ROWS; i++)
	{
		if (s->rows[i].items != NULL)
			pfree(s->rows[i].items);
		s->rows[i].items = NULL;
		s->rows[i].max = 0;
		rows_clear(s, i);
	}
	tid_list_init(&s->ckpt_gone);
	if (s->plan.session)
	{
		/*
		 * the group keys without window_start: the key columns from the
		 * second
		 */
		if (s->session_key_desc != NULL)
			s->session_keys = BuildTupleHashTableExt(NULL, s->session_key_desc, s->nkeys - 1,
													 s->key_cols, s->key_eqfuncs + 1,
													 s->key_hashfuncs + 1, s->key_collations + 1,
													 1024, sizeof(SessionKey), s->groups_cxt,
													 s->groups_cxt, s->temp_cxt, false);
		else
		{
			s->no_keys = palloc0(sizeof(SessionKey));
			dlist_init(&s->no_keys->sessions);
		}
		s->session_ends = pairingheap_allocate(session_end_cmp, NULL);
		dlist_init(&s->gone);
		s->ngone = 0;
		tid_list_init(&s->state_gone);
	}
	if (s->plan.dedup)
	{
		s->nkey_times = 0;
		s->max_key_times = 1024;
		s->key_times = MemoryContextAllocHuge(s->groups_cxt, sizeof(KeyTime) * s->max_key_times);
	}
	MemoryContextSwitchTo(old);
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
	s->catalog_xmin = InvalidTransactionId;
}

/* --- a dedup store's keys by event time ---------------------------------- */

/* Add a dedup key with an event time (in window_start) to the heap. */
static void
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
static void
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
static void
key_time_set(StoreGroup *g, Datum time, bool isnull)
{
	g->window_start = isnull ? 0 : DatumGetTimestampTz(time);
	if (isnull)
		g->flags |= GROUP_NO_TIME;
	else
		g->flags &= ~GROUP_NO_TIME;
}

/* --- groups and windows -------------------------------------------------- */

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

/* Put the first nkeys columns of slot into the key slot. */
static void
fill_key_slot(StateStore *s, TupleTableSlot *slot, const AttrNumber *attnos)
{
	TupleTableSlot *key = s->key_slot;

	ExecClearTuple(key);
	for (int k = 0; k < s->nkeys; k++)
		key->tts_values[k] = slot_getattr(slot, attnos ? attnos[k] : k + 1, &key->tts_isnull[k]);
	ExecStoreVirtualTuple(key);
}

/* A new group in group_slab: zeroed, its partials NULL. */
static StoreGroup *
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
static StoreGroup *
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

static StoreGroup *
store_group(StateStore *s, bool *created)
{
	return store_group_hashed(s, created, NULL);
}

/* Set a partial to a copy of value, freeing what it held. */
static void
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
		cxt = MemoryContextSwitchTo(s->groups_cxt);
		g->values[i] = datumCopy(value, false, p->typlen);
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
static bool
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

				if (p->merge == MERGE_MIN ? c >= 0 : c <= 0)
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
			*result = call2(&p->fn, p->collation, a, v, result_null);
			return true;
		case MERGE_FIRST:
			break;
	}
	return false;
}

/*
 * Merge the batch's partial value into the group's: a NULL partial is "no
 * input yet" (a sum or bool of filtered-out rows, an initial transition
 * state), so merging with it keeps the other.
 */
static void
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
static void
group_changed(StateStore *s, StoreGroup *g)
{
	if (g->flags & GROUP_CHANGED)
		return;
	g->flags |= GROUP_CHANGED;
	dlist_push_tail(&s->changed, &g->changed_node);
	s->nchanged++;
}

/* --- sessions ------------------------------------------------------------ */

static void drop_group(StateStore *s, StoreGroup *g);

/*
 * The sessions of the group keys in the key slot (window_start and keys,
 * as fill_key_slot leaves it); made if missing and create.
 */
static SessionKey *
session_key(StateStore *s, bool create)
{
	TupleTableSlot *ks = s->session_key_slot;
	TupleHashEntry entry;
	bool		isnew = false;
	SessionKey *sk;

	if (s->session_keys == NULL)
		return s->no_keys;
	slot_getallattrs(s->key_slot);
	ExecClearTuple(ks);
	for (int k = 1; k < s->nkeys; k++)
	{
		ks->tts_values[k - 1] = s->key_slot->tts_values[k];
		ks->tts_isnull[k - 1] = s->key_slot->tts_isnull[k];
	}
	ExecStoreVirtualTuple(ks);
	entry = LookupTupleHashEntry(s->session_keys, ks, create ? &isnew : NULL, NULL);
	if (entry == NULL)
		return NULL;
	if (!isnew)
		return (SessionKey *) entry->additional;
	sk = MemoryContextAlloc(s->groups_cxt, sizeof(SessionKey));
	sk->key = entry->firstTuple;
	dlist_init(&sk->sessions);
	entry->additional = sk;
	return sk;
}

/*
 * Make group g (its key in the key slot) a session ending at end: into its
 * key's sessions, in order of start, and into the sessions by end.
 */
static void
session_attach(StateStore *s, StoreGroup *g, TimestampTz end)
{
	StoreSession *ss = MemoryContextAlloc(s->groups_cxt, sizeof(StoreSession));
	dlist_iter	it;

	ss->group = g;
	ss->end = end;
	ss->key = session_key(s, true);
	g->in.session = ss;

	/* a batch's sessions are mostly the newest of their key */
	dlist_reverse_foreach(it, &ss->key->sessions)
	{
		StoreSession *other = dlist_container(StoreSession, key_node, it.cur);

		if (other->group->window_start < g->window_start)
		{
			dlist_insert_after(&other->key_node, &ss->key_node);
			break;
		}
	}
	if (it.cur == &ss->key->sessions.head)
		dlist_push_head(&ss->key->sessions, &ss->key_node);
	pairingheap_add(s->session_ends, &ss->end_node);
}

/* Take a session out of its key's sessions and the sessions by end. */
static void
session_detach(StateStore *s, StoreGroup *g)
{
	StoreSession *ss = g->in.session;
	SessionKey *sk = ss->key;

	dlist_delete(&ss->key_node);
	if (!(g->flags & GROUP_CLOSED))
		pairingheap_remove(s->session_ends, &ss->end_node);
	if (dlist_is_empty(&sk->sessions) && s->session_keys != NULL)
	{
		hash_delete_key(s->session_keys, s->session_key_slot, sk->key, NULL);
		pfree(sk->key);
		pfree(sk);
	}
	pfree(ss);
	g->in.session = NULL;
}

/* The session's end moves to end. */
static void
session_set_end(StateStore *s, StoreSession *ss, TimestampTz end)
{
	if (end == ss->end)
		return;
	pairingheap_remove(s->session_ends, &ss->end_node);
	ss->end = end;
	pairingheap_add(s->session_ends, &ss->end_node);
}

/*
 * Remember that the result may hold a row under key (window_start, keys),
 * which no group has any more: update mode deletes it (STORE_ROWS_GONE).
 * The record is a group of no hash entry, without values.
 */
static void
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

static void rows_remove(StateStore *s, StoreGroup *g);

/*
 * A group leaves the store: its checkpoint row goes at the next
 * checkpoint, and it leaves the lists of changed and dirty groups and of
 * result rows.  (Its state row is the caller's.)
 */
static void
group_unlink(StateStore *s, StoreGroup *g)
{
	if (ItemPointerIsValid(&g->ckpt_tid))
		tid_list_add(&s->ckpt_gone, &g->ckpt_tid);
	if (g->flags & GROUP_CKPT_DIRTY)
		dlist_delete(&g->ckpt_node);
	if (g->flags & GROUP_CHANGED)
		dlist_delete(&g->changed_node);
	rows_remove(s, g);
}

/*
 * A session merged into another goes: its rows in the state and checkpoint
 * tables are deleted, its result row (if it may have one) is gone.
 */
static void
session_drop(StateStore *s, StoreGroup *g)
{
	if (ItemPointerIsValid(&g->state_tid))
		tid_list_add(&s->state_gone, &g->state_tid);
	group_unlink(s, g);
	/* a session this batch made has no result row yet */
	if (!(g->flags & GROUP_NEW))
	{
		MemoryContext old = MemoryContextSwitchTo(s->groups_cxt);

		gone_add(s, heap_copy_minimal_tuple(g->key), g->window_start);
		MemoryContextSwitchTo(old);
	}
	drop_group(s, g);
}

/*
 * The session now starts at start, earlier: its hash entry moves to the new
 * key.  Its result row, under the old key, is gone; the group is written as
 * new to the result.  Its place among its key's sessions stays: the one
 * before it ends at or before the batch's session that reaches back.
 */
static void
session_restart(StateStore *s, StoreGroup *g, TimestampTz start)
{
	MinimalTuple old_key = g->key;
	uint32		old_hash;
	TupleHashEntry entry;
	bool		isnew;
	Datum	   *values = palloc(sizeof(Datum) * s->nkeys);
	bool	   *isnull = palloc(sizeof(bool) * s->nkeys);

	ExecStoreMinimalTuple(old_key, s->key_slot, false);
	slot_getallattrs(s->key_slot);
	memcpy(values, s->key_slot->tts_values, sizeof(Datum) * s->nkeys);
	memcpy(isnull, s->key_slot->tts_isnull, sizeof(bool) * s->nkeys);
	ExecClearTuple(s->key_slot);
	memcpy(s->key_slot->tts_values, values, sizeof(Datum) * s->nkeys);
	memcpy(s->key_slot->tts_isnull, isnull, sizeof(bool) * s->nkeys);
	s->key_slot->tts_values[0] = TimestampTzGetDatum(start);
	s->key_slot->tts_isnull[0] = false;
	ExecStoreVirtualTuple(s->key_slot);
	old_hash = g->hash;
	entry = LookupTupleHashEntry(s->hash, s->key_slot, &isnew, &g->hash);
	if (!isnew)
		elog(ERROR, "streamwin: a session of the store starts where another does");
	entry->additional = g;
	g->key = entry->firstTuple;
	g->window_start = start;

	hash_delete_key(s->hash, s->key_slot, old_key, &old_hash);

	if (g->flags & GROUP_NEW)
		pfree(old_key);
	else
		gone_add(s, old_key, DatumGetTimestampTz(values[0]));
	ItemPointerSetInvalid(&g->result_tid);
	g->flags |= GROUP_NEW;
}

/*
 * Merge one of the batch's sessions (its row: window_start, keys, partials,
 * window_end) into the store.  The stored sessions of its key that it
 * overlaps follow one another in order of start; the first of them takes
 * it and the others in, which is what merging islands of the union in SQL
 * gives: sessions of one key never overlap, so a session the merged one
 * overlaps is one the batch's session overlaps.  The batch's sessions may
 * come in any order.
 */
static void
session_merge(StateStore *s, TupleTableSlot *slot)
{
	bool		isnull;
	TimestampTz start = DatumGetTimestampTz(slot_getattr(slot, 1, &isnull));
	TimestampTz end = DatumGetTimestampTz(slot_getattr(slot, s->nkeys + s->npartials + 1,
													   &isnull));
	StoreGroup *survivor = NULL;
	TimestampTz new_end = end;
	SessionKey *sk;
	StoreGroup *g;

	/*
	 * From the newest session of the key back, where a batch's sessions
	 * mostly fall: sessions of one key are disjoint, so in order of start
	 * they are in order of end too, and the first that ends at or before the
	 * batch's session begins ends the search.
	 */
	fill_key_slot(s, slot, NULL);
	sk = session_key(s, false);
	if (sk != NULL)
	{
		dlist_node *node = sk->sessions.head.prev;

		while (node != &sk->sessions.head)
		{
			StoreSession *ss = dlist_container(StoreSession, key_node, node);

			node = node->prev;
			if (ss->group->window_start >= end)
				continue;
			if (ss->end <= start)
				break;
			new_end = Max(new_end, ss->end);
			if (survivor != NULL)
			{
				/*
				 * bridged by the batch's session: one session now, the
				 * earliest
				 */
				for (int i = 0; i < s->npartials; i++)
					merge_partial(s, ss->group, i, survivor->values[i], GROUP_NULLS(s, survivor)[i]);
				session_drop(s, survivor);
			}
			survivor = ss->group;
		}
	}
	if (survivor == NULL)
	{
		bool		created;

		/* the key slot still holds the key: nothing was dropped */
		g = store_group(s, &created);
		if (!created)
			elog(ERROR, "streamwin: a batch's session starts where a stored one does");
		g->flags |= GROUP_NEW;
		session_attach(s, g, end);
	}
	else
	{
		g = survivor;
		if (start < g->window_start)
			session_restart(s, g, start);
		session_set_end(s, g->in.session, new_end);
	}
	for (int i = 0; i < s->npartials; i++)
		merge_partial(s, g, i, slot->tts_values[s->nkeys + i], slot->tts_isnull[s->nkeys + i]);
	group_changed(s, g);
}

/* --- the batch's groups in ----------------------------------------------- */

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
 * Every partial is passed by value (store_rows_query_sql), so that a fold
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
		fold_ahead(r, slot);
	else if (s->plan.session)
		session_merge(s, slot);
	else
	{
		TupleTableSlot *key = s->key_slot;

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
			merge_group(s, slot);
		}
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
	if (r->rows)
		for (int i = 0; i < FOLD_AHEAD; i++)
			r->ahead[i] = MakeSingleTupleTableSlot(typeinfo, &TTSOpsVirtual);
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

	r->rows = rows;
	r->batch_rows = batch_rows;
	return (DestReceiver *) r;
}

/*
 * Whether the store would take the next batch as rows (STMT_STORE_BATCH_ROWS)
 * rather than groups: streamwin.store_merge, or in "auto" what the last
 * batch was like (merge_shutdown).
 */
bool
store_merge_rows(StateStore *s)
{
	if (streamwin_store_merge == STORE_MERGE_AUTO)
		return s->merge_rows;
	return streamwin_store_merge == STORE_MERGE_ROWS;
}

DestReceiver *
store_dedup_receiver(StateStore *s, int64 batch_id, bool *keep, int nrows)
{
	MergeReceiver *r = make_receiver(s, dedup_receive);

	r->batch_id = batch_id;
	r->keep = keep;
	r->nrows = nrows;
	return (DestReceiver *) r;
}

/* --- the state and checkpoint tables -------------------------------------- */

/* A group as the values of a state table row (in values/nulls, natts long). */
static void
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
static HeapTuple
group_tuple(StateStore *s, StoreGroup *g)
{
	group_values(s, g, s->row_values, s->row_nulls);
	return heap_form_tuple(s->state_desc, s->row_values, s->row_nulls);
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
	FreeBulkInsertState(w->bistate);
	table_close(w->rel, NoLock);
}

void
store_write_changed(StateStore *s)
{
	RowWriter	w;
	MemoryContext old;
	dlist_iter	it;

	row_writer_begin(&w, s, s->state_table);
	old = MemoryContextSwitchTo(s->temp_cxt);
	tid_list_delete_rows(&s->state_gone, w.rel);
	dlist_foreach(it, &s->changed)
	{
		StoreGroup *g = dlist_container(StoreGroup, changed_node, it.cur);

		row_writer_put(&w, group_tuple(s, g), &g->state_tid);
		/* a dedup key is written once, by the batch that made it */
		if (s->plan.dedup && !(g->flags & GROUP_NO_TIME))
			key_times_push(s, g);
		if (!(g->flags & GROUP_CKPT_DIRTY))
		{
			g->flags |= GROUP_CKPT_DIRTY;
			dlist_push_tail(&s->ckpt_dirty, &g->ckpt_node);
		}
	}
	MemoryContextSwitchTo(old);
	row_writer_end(&w);
}

/* --- the groups result statements write ---------------------------------- */

/* An empty list: its groups are not written to. */
static void
rows_clear(StateStore *s, StoreRows which)
{
	RowsList   *l = &s->rows[which];

	l->n = 0;
	l->sorted = false;
	l->positions_valid = true;
	l->ngroups = 0;
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

static void
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

void
store_classify_changed(StateStore *s, bool replay, bool new_rows_allowed)
{
	dlist_iter	it;

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
static void
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
	if (s->plan.session)
	{
		dlist_foreach_modify(it, &s->gone)
		{
			StoreGroup *g = dlist_container(StoreGroup, changed_node, it.cur);

			dlist_delete(&g->changed_node);
			pfree(g->key);
			pfree(g);
		}
		s->ngone = 0;
	}
}

/* --- streamwin.store_rows(query_id, which) -------------------------------- */

static StateStore *current_store = NULL;
static int32 current_query_id = 0;

void
store_set_current(StateStore *s, int32 query_id)
{
	current_store = s;
	current_query_id = query_id;
}

/* Key k of a group, read from its key tuple. */
static Datum
group_key(StateStore *s, StoreGroup *g, int k, bool *isnull)
{
	HeapTupleData tuple;

	tuple.t_len = g->key->t_len + MINIMAL_TUPLE_OFFSET;
	tuple.t_data = (HeapTupleHeader) ((char *) g->key - MINIMAL_TUPLE_OFFSET);
	return heap_getattr(&tuple, k + 1, s->key_desc, isnull);
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
 * A walk over a list asks for the group ROWS_PREFETCH_DISTANCE entries
 * ahead of the one it works on to be fetched into the cache, and for the
 * key tuple of the group half as far ahead, and its by-reference partials
 * (an avg's array) where the walk reads them (partials), whose pointers
 * are in the group fetched before: the groups lie all over memory, and
 * without this the walk waits for each.
 * The distance is long enough for the scan that writes a row at each
 * step: at a quarter of it, with the key alone, that scan still waited for
 * most groups of a large batch (measured).
 */
#define ROWS_PREFETCH_DISTANCE 32

static inline void
rows_prefetch(StateStore *s, RowsList *l, int64 i, bool partials)
{
#if defined(__GNUC__) || defined(__clang__)
	StoreGroup *g;

	if (i + ROWS_PREFETCH_DISTANCE < l->n &&
		(g = l->items[i + ROWS_PREFETCH_DISTANCE].group) != NULL)
	{
		for (Size off = 0; off < group_size(s); off += 64)
			__builtin_prefetch((char *) g + off);
	}
	if (i + ROWS_PREFETCH_DISTANCE / 2 < l->n &&
		(g = l->items[i + ROWS_PREFETCH_DISTANCE / 2].group) != NULL)
	{
		__builtin_prefetch(g->key);
		for (int p = 0; partials && p < s->npartials; p++)
			if (!s->partials[p].typbyval && !GROUP_NULLS(s, g)[p])
				__builtin_prefetch(DatumGetPointer(g->values[p]));
	}
#endif
}

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
store_rows_scan_begin(int32 query_id, const char *which, int natts)
{
	StateStore *s = current_store;
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
	if (s == NULL || query_id != current_query_id || !s->loaded)
		return scan;			/* no store: no rows */
	scan->with_tid = natts == s->state_desc->natts + 1;
	if (!scan->with_tid && natts != s->state_desc->natts)
		elog(ERROR, "streamwin: store_rows() of query %d gives %d columns, not %d",
			 query_id, s->state_desc->natts, natts);
	scan->store = s;
	if (scan->rows == STORE_ROWS_ALL)
		scan->in_hash = true;
	else if (scan->rows == STORE_ROWS_GONE)
	{
		/* records of sessions merged away, only sessions have them */
		if (s->plan.session)
			scan->gone = &s->gone;
	}
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
	scan = store_rows_scan_begin(query_id, which, desc->natts);
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	while (store_rows_scan_next(scan, values, nulls))
		tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
	store_rows_scan_end(scan);
	return (Datum) 0;
}

/* --- closing windows ------------------------------------------------------ */

int64
store_close_windows(StateStore *s, TimestampTz watermark)
{
	int64		n = 0;

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
	{
		/* sessions ending at or before the watermark, from the heap's top */
		while (!pairingheap_is_empty(s->session_ends))
		{
			StoreSession *ss = pairingheap_container(StoreSession, end_node,
													 pairingheap_first(s->session_ends));

			if (ss->end > watermark)
				break;
			(void) pairingheap_remove_first(s->session_ends);
			ss->group->flags |= GROUP_CLOSED;
			rows_add(s, ss->group, STORE_ROWS_CLOSED);
			n++;
		}
		return n;
	}
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

/* Forget a group: its hash entry, its memory. */
static void
drop_group(StateStore *s, StoreGroup *g)
{
	hash_delete_key(s->hash, s->key_slot, g->key, &g->hash);
	if (s->plan.session && g->in.session != NULL)
		session_detach(s, g);
	for (int i = 0; i < s->npartials; i++)
		if (!GROUP_NULLS(s, g)[i] && !s->partials[i].typbyval)
			pfree(DatumGetPointer(g->values[i]));
	pfree(g->key);
	pfree(g);
	s->ngroups--;
}


void
store_evict_closed(StateStore *s)
{
	Relation	rel = table_open(s->state_table, RowExclusiveLock);
	RowsList   *closed = &s->rows[STORE_ROWS_CLOSED];
	int			nclosed = 0;

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
		drop_group(s, g);
	}
	rows_clear(s, STORE_ROWS_CLOSED);
	table_close(rel, NoLock);

	/* the windows left empty, all at the front */
	while (nclosed < s->nwindows && dlist_is_empty(&s->windows[nclosed]->groups))
		pfree(s->windows[nclosed++]);
	memmove(s->windows, s->windows + nclosed, sizeof(StoreWindow *) * (s->nwindows - nclosed));
	s->nwindows -= nclosed;
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

/* --- loading and checkpoints ---------------------------------------------- */

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
			if (same_partials(s, g, slot))
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
 * The relfilenode of a table of the store, locked until the transaction
 * ends: nothing rewrites it while the batch writes its rows by location.
 */
static Oid
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
bool
store_begin(StateStore *s, TransactionId catalog_xmin)
{
	Oid			state_file = store_table_file(s->state_table);
	Oid			ckpt_file = store_table_file(s->checkpoint_table);

	if (s->loaded && !s->in_batch && TransactionIdEquals(catalog_xmin, s->catalog_xmin) &&
		state_file == s->state_file && ckpt_file == s->ckpt_file)
	{
		if (over_memory(s))
		{
			store_invalidate(s);
			return false;
		}
		s->in_batch = true;
		return true;
	}
	s->catalog_xmin = catalog_xmin;
	s->in_batch = false;
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
	changed_done(s);
	s->catalog_xmin = catalog_xmin;
	s->in_batch = false;
}

void
store_checkpoint(StateStore *s)
{
	RowWriter	w;
	MemoryContext old;
	dlist_mutable_iter it;

	row_writer_begin(&w, s, s->checkpoint_table);
	old = MemoryContextSwitchTo(s->temp_cxt);
	tid_list_delete_rows(&s->ckpt_gone, w.rel);
	dlist_foreach_modify(it, &s->ckpt_dirty)
	{
		StoreGroup *g = dlist_container(StoreGroup, ckpt_node, it.cur);

		row_writer_put(&w, group_tuple(s, g), &g->ckpt_tid);
		g->flags &= ~GROUP_CKPT_DIRTY;
		dlist_delete(&g->ckpt_node);
	}
	dlist_init(&s->ckpt_dirty);
	MemoryContextSwitchTo(old);
	row_writer_end(&w);
}
