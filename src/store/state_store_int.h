/*-------------------------------------------------------------------------
 *
 * state_store_int.h
 *	  The state store's insides, shared by the files that implement it.
 *	  Nothing outside the store includes this: state_store.h is its API.
 *
 * The store is six files, each calling only the ones listed before it:
 *
 *	 store_group.c		the store's groups in memory: the hash table by
 *						window start and keys, each group's partials merged
 *						with the aggregates' combine functions, windows in
 *						order of start, dedup keys in order of event time
 *	 store_rows.c		the lists of groups a result statement writes (which
 *						are new, known, closed, ...), sorted in the result
 *						index's order, and streamwin.store_rows() reading one
 *	 store_session.c	session windows: each key's sessions in order, all by
 *						end, a batch's sessions merged into them
 *	 store_persist.c	the store and its tables: loading, vouching for what
 *						it holds around a batch, writing the changed groups'
 *						state rows, checkpoints, evicting closed groups
 *	 store_merge.c		a batch into the store (its groups, its rows, its
 *						dedup keys), and closing windows
 *	 store_upsert.c		an upsert store's keys taking new rows and losing
 *						them
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_STATE_STORE_INT_H
#define STREAMWIN_STATE_STORE_INT_H

#include "executor/executor.h"
#include "lib/ilist.h"
#include "lib/pairingheap.h"
#include "storage/itemptr.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"

#include "state_store.h"

/* StoreGroup.flags */
#define GROUP_CHANGED		0x01	/* merged by this batch */
#define GROUP_NEW			0x02	/* created by this batch */
#define GROUP_CKPT_DIRTY	0x04	/* changed since the last checkpoint */
#define GROUP_CLOSED		0x08	/* its window closed in this batch */
#define GROUP_CKPT_SAME		0x10	/* loading: its checkpoint row matches */
#define GROUP_NO_TIME		0x20	/* a dedup key without an event time */
#define GROUP_FOLDING		0x40	/* its batch rows fold apart (fold_pos) */
#define GROUP_STATE_KEPT	0x80	/* its state row waits for store_sync */
/* in ckpt_dirty: for the next checkpoint, or for store_sync, or both */
#define GROUP_IN_DIRTY		(GROUP_CKPT_DIRTY | GROUP_STATE_KEPT)

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
	dlist_node	ckpt_node;		/* in ckpt_dirty (GROUP_IN_DIRTY) */

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
	bool		tie_keeps_first;	/* MERGE_MIN/MAX: of equal values, the first */
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
	TidList		state_gone;		/* state rows of groups gone: sessions merged
								 * away, a changelog's emptied groups, upsert
								 * keys deleted */
	KeyTime    *key_times;		/* a dedup store's keys with an event time
								 * (window_start), the earliest first */
	int64		nkey_times;
	int64		max_key_times;
	dlist_head	changed;
	int64		nchanged;		/* groups in changed */
	dlist_head	ckpt_dirty;		/* groups changed since the checkpoint, and
								 * groups whose state rows are kept back */

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
	bool		has_closed;		/* store_closed_through: windows ending at or */
	TimestampTz closed;			/* before closed are closed */
	int64		late_added;		/* rows dropped into them since */
	int64		late_retracted; /* store_late_changes */
	RowsList	rows[NUM_STORE_ROWS];
	TidList		ckpt_gone;		/* checkpoint rows of groups gone since */

	bool		loaded;
	bool		in_batch;		/* a batch began and has not ended */
	bool		kept_back;		/* groups of GROUP_STATE_KEPT (in ckpt_dirty)
								 * wait for store_sync */
	TransactionId catalog_xmin; /* who last wrote the query's catalog row */
	Oid			state_file;		/* the tables' relfilenodes as loaded: a */
	Oid			ckpt_file;		/* rewrite (VACUUM FULL, CLUSTER) moves every
								 * row */
};

/* --- store_group.c --------------------------------------------------------- */

/* The size of a group of the store: its header, values and null flags. */
static inline Size
group_size(StateStore *s)
{
	return offsetof(StoreGroup, values) + (sizeof(Datum) + sizeof(bool)) * s->npartials;
}

extern void tid_list_init(TidList *l);
extern void tid_list_add(TidList *l, ItemPointer tid);
extern void tid_list_delete_rows(TidList *l, Relation rel);
extern void hash_delete_key(TupleHashTable h, TupleTableSlot *slot, MinimalTuple key,
							const uint32 *hash);
extern void groups_reset(StateStore *s);
extern void key_times_push(StateStore *s, StoreGroup *g);
extern void key_times_pop(StateStore *s);
extern void key_time_set(StoreGroup *g, Datum time, bool isnull);
extern void fill_key_slot(StateStore *s, TupleTableSlot *slot, const AttrNumber *attnos);
extern StoreGroup *group_alloc(StateStore *s);
extern StoreGroup *store_group_hashed(StateStore *s, bool *created, const uint32 *known_hash);
extern StoreGroup *store_group(StateStore *s, bool *created);
extern void group_free(StateStore *s, StoreGroup *g);
extern void set_partial(StateStore *s, StoreGroup *g, int i, Datum value, bool isnull);
extern bool combine_partial(StateStore *s, int i, Datum a, Datum v, Datum *result,
							bool *result_null);
extern void merge_partial(StateStore *s, StoreGroup *g, int i, Datum v, bool isnull);
extern void group_changed(StateStore *s, StoreGroup *g);
extern void group_values(StateStore *s, StoreGroup *g, Datum *values, bool *nulls);
extern HeapTuple group_tuple(StateStore *s, StoreGroup *g);
extern Datum group_key(StateStore *s, StoreGroup *g, int k, bool *isnull);

/*
 * Does group g hold its key as keys give it, byte for byte (numeric 1.0 is
 * not 1.00, though equal)?
 */
extern bool same_key_images(StateStore *s, StoreGroup *g, const Datum *keys, const bool *key_nulls);

/* --- store_rows.c ---------------------------------------------------------- */

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

extern void rows_clear(StateStore *s, StoreRows which);
extern void rows_reset(StateStore *s);
extern void rows_add(StateStore *s, StoreGroup *g, StoreRows which);
extern void group_unlink(StateStore *s, StoreGroup *g);
extern void gone_add(StateStore *s, MinimalTuple key, TimestampTz start);
extern void changed_done(StateStore *s);

/* --- store_session.c ------------------------------------------------------- */

extern void sessions_reset(StateStore *s);
extern void session_attach(StateStore *s, StoreGroup *g, TimestampTz end);
extern void session_merge(StateStore *s, TupleTableSlot *slot);
extern int64 sessions_close(StateStore *s, TimestampTz watermark);
extern void group_drop(StateStore *s, StoreGroup *g);

/*
 * The window starting at start leaves the store if no group is left in it
 * (a changelog's retractions emptied it before the watermark closed it, or
 * with no watermark to close it): the windows would grow for good.
 */
extern void window_forget_if_empty(StateStore *s, TimestampTz start);

/* --- store_persist.c ------------------------------------------------------- */

extern void store_reset_groups(StateStore *s);

/* a store table's relfilenode, locked until the transaction ends */
extern Oid store_table_file(Oid relid);

#endif							/* STREAMWIN_STATE_STORE_INT_H */
