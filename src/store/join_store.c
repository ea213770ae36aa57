/*-------------------------------------------------------------------------
 *
 * join_store.c
 *	  A stream-stream join's state in memory (see join_store.h).
 *
 * Each side's row is one chunk: its entry, then its values and null flags
 * as a batch's row (BatchRow), then the data of its values passed by
 * reference, so that a candidate handed to the batch's statements is the
 * row where it is, and a row goes with one pfree.  A side's rows with a
 * key are chained in buckets by the hash of their keys (computed with the
 * join's own equality operators' hash functions, so that rows equal by the
 * operator share a bucket); rows with an event time are in runs of
 * ascending time, or a binary heap for those that fit no run (TimeRun),
 * from which eviction takes every row before the cutoff.  A row with a NULL key
 * matches nothing (equality is strict) and one with a NULL time never goes,
 * as in the join table.
 *
 * A row goes into its join table when its batch writes it, or, in batches
 * that share one transaction (run_available), when join_store_sync writes
 * the rows they kept back: those still held then, in the order they came.
 * A row the batches take out again before that is never written: in a join
 * whose rows wait minutes for their match, most rows of a backlog read in
 * one transaction come and go so.  The rows kept back are the side's
 * pending list; the others have their location in the table.  A
 * checkpoint in the middle of such batches writes the rows kept back
 * since the last one into the checkpoint table from memory
 * (join_store_checkpoint_kept) and leaves them kept back: each row knows
 * the batch that added it, as its table row does, so that neither that
 * checkpoint nor a later one copies it twice.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "lib/ilist.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "join_store.h"
#include "result_insert.h"
#include "state_store_int.h"
#include "table_indexes.h"

/* Where a row stands with its join table */
typedef enum EntryTable
{
	ENTRY_WRITING,				/* going in with its statement's rows */
	ENTRY_WRITTEN,				/* in it, at in.tid */
	ENTRY_KEPT_BACK				/* not yet: in its side's pending list */
} EntryTable;

typedef struct JoinEntry
{
	dlist_node	bucket_node;	/* in its bucket, if it has a key */
	union
	{
		ItemPointerData tid;	/* ENTRY_WRITTEN */
		dlist_node	pending_node;	/* ENTRY_KEPT_BACK */
	}			in;
	TimestampTz time;
	int64		batch;			/* the batch that added it (its table row's) */
	uint32		hash;
	uint32		probe;			/* the last candidate search that found it */
	uint32		size;			/* about its bytes (entry_make's size) */
	bool		has_key;
	bool		in_times;
	bool		time_null;		/* its event time is NULL */
	uint8		table;			/* EntryTable */
	/* then the row: its values, its null flags, its values' data */
} JoinEntry;

#define ENTRY_ROW(e) ((BatchRow) ((char *) (e) + MAXALIGN(sizeof(JoinEntry))))

#define JOIN_STORE_FIRST_BUCKETS 1024

/*
 * A row in its side's eviction order, its time beside it so that the
 * order is read in its array alone.
 */
typedef struct TimedEntry
{
	TimestampTz time;
	struct JoinEntry *entry;
} TimedEntry;

/*
 * Rows come mostly in the order of their event time, a partition's run
 * after another's: each side keeps up to JOIN_TIME_RUNS runs of rows in
 * ascending time, each an array that rows are appended to and evicted
 * from the front of, in the order they lie in memory; a row that fits
 * after no run's last goes into a binary heap.  Eviction takes every row
 * before the cutoff, in no particular order, from the runs' fronts and the
 * heap's top.  A binary heap of every row cost a sift down per row
 * evicted, about seventeen reads across an array of megabytes (bench case
 * J: 8% of the backend's work).
 */
#define JOIN_TIME_RUNS 32

typedef struct TimeRun
{
	TimedEntry *items;
	int64		first;			/* the first not evicted, */
	int64		n;				/* of this many */
	int64		room;
	TimestampTz last;			/* the last one's time, here so that choosing
								 * a run reads the runs alone */
} TimeRun;

typedef struct JoinSide
{
	int			natts;
	TupleDesc	desc;
	FmgrInfo	hash[JOIN_STORE_MAX_KEYS];	/* for this side's key types */
	dlist_head *buckets;
	uint32		nbuckets;		/* a power of 2 */
	int64		nrows;
	int64		nkeyed;
	TimeRun		runs[JOIN_TIME_RUNS];	/* the rows in their time's order: */
	int			nruns;
	int			last_run;		/* the run the last row went into */
	TimedEntry *times;			/* and those that fit no run, a heap */
	int64		ntimes;
	int64		times_room;
	dlist_head	pending;		/* rows kept back from the table, in order */
	int64		pending_bytes;	/* their entries' bytes */
	int64		dropped_pending;	/* rows taken out before they were written */
} JoinSide;

struct JoinStore
{
	JoinStoreSpec spec;
	MemoryContext cxt;			/* the rows and buckets */
	MemoryContext temp_cxt;
	JoinSide	sides[2];
	TupleDesc	pairs_desc;		/* a pair's row: side 0's columns, then 1's */
	FmgrInfo	eq[JOIN_STORE_MAX_KEYS];
	bool		by_value[JOIN_STORE_MAX_KEYS];	/* equal exactly when their
												 * Datums are (key_by_value) */
	uint32		probe;
	bool		loaded;
	bool		in_batch;
	TransactionId catalog_xmin;
	Oid			table_file[2];
};

/* Add a row to side's heap of rows that fit no run. */
static void
heap_push(JoinSide *sd, JoinEntry *e)
{
	TimedEntry *h;
	int64		i;

	if (sd->ntimes == sd->times_room)
	{
		sd->times_room *= 2;
		sd->times = repalloc_huge(sd->times, sizeof(TimedEntry) * sd->times_room);
	}
	h = sd->times;
	i = sd->ntimes++;
	while (i > 0 && h[(i - 1) / 2].time > e->time)
	{
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i].time = e->time;
	h[i].entry = e;
}

/* Take the earliest row out of side's heap. */
static void
heap_pop(JoinSide *sd)
{
	TimedEntry *h = sd->times;
	TimedEntry last = h[--sd->ntimes];
	int64		n = sd->ntimes;
	int64		i = 0;

	for (;;)
	{
		int64		c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1].time < h[c].time)
			c++;
		if (last.time <= h[c].time)
			break;
		h[i] = h[c];
		i = c;
	}
	if (n > 0)
		h[i] = last;
}

/* Can row time t go at the end of run r? */
static inline bool
run_takes(TimeRun *r, TimestampTz t)
{
	return r->first == r->n || r->last <= t;
}

/*
 * Add a row to side's eviction order: at the end of the run the last row
 * went into, or of the run whose last row is the latest before it, or of
 * a new run, or else into the heap.
 */
static void
times_push(JoinStore *js, JoinSide *sd, JoinEntry *e)
{
	TimeRun    *r = NULL;

	if (sd->nruns > 0 && run_takes(&sd->runs[sd->last_run], e->time))
		r = &sd->runs[sd->last_run];
	else
	{
		int			best = -1;

		for (int i = 0; i < sd->nruns; i++)
		{
			TimeRun    *c = &sd->runs[i];

			if (!run_takes(c, e->time))
				continue;
			/* an empty run takes any row: only if no other does */
			if (best < 0 || (c->first < c->n &&
							 (sd->runs[best].first == sd->runs[best].n || c->last > sd->runs[best].last)))
				best = i;
		}
		if (best < 0 && sd->nruns < JOIN_TIME_RUNS)
		{
			best = sd->nruns++;
			sd->runs[best].room = 1024;
			sd->runs[best].items = MemoryContextAlloc(js->cxt, sizeof(TimedEntry) * 1024);
			sd->runs[best].first = sd->runs[best].n = 0;
		}
		if (best < 0)
		{
			heap_push(sd, e);
			return;
		}
		sd->last_run = best;
		r = &sd->runs[best];
	}
	if (r->first == r->n)
		r->first = r->n = 0;
	if (r->n == r->room)
	{
		if (r->first > r->room / 2)
		{
			/* mostly evicted: move what is left to the front */
			memmove(r->items, r->items + r->first, sizeof(TimedEntry) * (r->n - r->first));
			r->n -= r->first;
			r->first = 0;
		}
		else
		{
			r->room *= 2;
			r->items = repalloc_huge(r->items, sizeof(TimedEntry) * r->room);
		}
	}
	r->items[r->n].time = e->time;
	r->items[r->n].entry = e;
	r->n++;
	r->last = e->time;
}

/* Empty sides, in the store's (just reset) memory. */
static void
sides_init(JoinStore *js)
{
	for (int s = 0; s < 2; s++)
	{
		JoinSide   *sd = &js->sides[s];

		sd->nbuckets = JOIN_STORE_FIRST_BUCKETS;
		sd->buckets = MemoryContextAlloc(js->cxt, sizeof(dlist_head) * sd->nbuckets);
		for (uint32 b = 0; b < sd->nbuckets; b++)
			dlist_init(&sd->buckets[b]);
		sd->nrows = 0;
		sd->nkeyed = 0;
		sd->times_room = 1024;
		sd->times = MemoryContextAlloc(js->cxt, sizeof(TimedEntry) * sd->times_room);
		sd->ntimes = 0;
		sd->nruns = 0;
		sd->last_run = 0;
		dlist_init(&sd->pending);
		sd->pending_bytes = 0;
		sd->dropped_pending = 0;
	}
	js->probe = 0;
}

/*
 * Is key k one whose values are equal exactly when their Datums are: the
 * same by-value type on both sides, compared by that type's own equality
 * among those where equal values have one representation (integers, oid,
 * bool, char, date, timestamps; not floats: -0 and 0 are equal)?  Its
 * hash and equality are then computed in line, not by function calls; the
 * hash is the store's own (both sides hash alike), never stored.
 */
static bool
key_by_value(const JoinStoreSpec *spec, int k)
{
	Form_pg_attribute l = TupleDescAttr(spec->desc[0], spec->key_attno[0][k] - 1);
	Form_pg_attribute r = TupleDescAttr(spec->desc[1], spec->key_attno[1][k] - 1);

	if (l->atttypid != r->atttypid || !l->attbyval)
		return false;
	switch (get_opcode(spec->key_op[k]))
	{
		case F_INT2EQ:
		case F_INT4EQ:
		case F_INT8EQ:
		case F_OIDEQ:
		case F_BOOLEQ:
		case F_CHAREQ:
		case F_DATE_EQ:
		case F_TIMESTAMP_EQ:
		case F_TIMESTAMPTZ_EQ:
			return true;
		default:
			return false;
	}
}

JoinStore *
join_store_create(const JoinStoreSpec *spec, MemoryContext parent)
{
	JoinStore  *js = MemoryContextAllocZero(parent, sizeof(JoinStore));

	Assert(spec->nkeys > 0 && spec->nkeys <= JOIN_STORE_MAX_KEYS);
	js->spec = *spec;
	js->cxt = AllocSetContextCreate(parent, "streamwin join store", ALLOCSET_DEFAULT_SIZES);
	js->temp_cxt = AllocSetContextCreate(parent, "streamwin join store rows", ALLOCSET_DEFAULT_SIZES);
	for (int s = 0; s < 2; s++)
	{
		js->spec.desc[s] = CreateTupleDescCopy(spec->desc[s]);
		js->sides[s].desc = js->spec.desc[s];
		js->sides[s].natts = spec->desc[s]->natts;
	}
	js->pairs_desc = CreateTemplateTupleDesc(js->sides[0].natts + js->sides[1].natts);
	for (int s = 0, a = 0; s < 2; s++)
		for (int i = 0; i < js->sides[s].natts; i++)
			TupleDescCopyEntry(js->pairs_desc, ++a, js->sides[s].desc, i + 1);
	for (int k = 0; k < spec->nkeys; k++)
	{
		Oid			hash[2];

		if (!get_op_hash_functions(spec->key_op[k], &hash[0], &hash[1]))
			elog(ERROR, "streamwin: operator %u of a join's keys has no hash function", spec->key_op[k]);
		/* hash[0] hashes the left operand's type: key_left's side */
		for (int s = 0; s < 2; s++)
			fmgr_info_cxt(hash[s == spec->key_left[k] ? 0 : 1], &js->sides[s].hash[k], parent);
		fmgr_info_cxt(get_opcode(spec->key_op[k]), &js->eq[k], parent);
		js->by_value[k] = key_by_value(&js->spec, k);
	}
	sides_init(js);
	js->catalog_xmin = InvalidTransactionId;
	return js;
}

void
join_store_invalidate(JoinStore *js)
{
	MemoryContextReset(js->cxt);
	MemoryContextReset(js->temp_cxt);
	sides_init(js);
	js->loaded = false;
	js->in_batch = false;
	js->catalog_xmin = InvalidTransactionId;
}

static bool
over_memory(JoinStore *js)
{
	return MemoryContextMemAllocated(js->cxt, true) > (Size) streamwin_state_memory * 1024;
}

/* The hash of side's keys in a row of its columns; false: a key is NULL. */
static bool
row_hash(JoinStore *js, int side, BatchRow row, int natts, uint32 *hash)
{
	JoinSide   *sd = &js->sides[side];
	bool	   *nulls = BATCH_ROW_NULLS(row, natts);
	uint32		h = 0;

	for (int k = 0; k < js->spec.nkeys; k++)
	{
		int			a = js->spec.key_attno[side][k] - 1;

		if (nulls[a])
			return false;
		if (js->by_value[k])
		{
			uint64		d = (uint64) row[a];

			h = hash_combine(h, murmurhash32((uint32) d ^ (uint32) (d >> 32)));
			continue;
		}
		h = hash_combine(h, DatumGetUInt32(FunctionCall1Coll(&sd->hash[k], js->spec.key_collation[k],
															 row[a])));
	}
	*hash = h;
	return true;
}

/* Do a row of side and a row of the other side have equal keys? */
static bool
entry_keys_equal(JoinStore *js, int side, BatchRow mine, BatchRow theirs)
{
	for (int k = 0; k < js->spec.nkeys; k++)
	{
		Datum		a = mine[js->spec.key_attno[side][k] - 1];
		Datum		b = theirs[js->spec.key_attno[1 - side][k] - 1];
		bool		left_mine = js->spec.key_left[k] == side;

		if (js->by_value[k])
		{
			if (a != b)
				return false;
			continue;
		}
		if (!DatumGetBool(FunctionCall2Coll(&js->eq[k], js->spec.key_collation[k],
											left_mine ? a : b, left_mine ? b : a)))
			return false;
	}
	return true;
}

/*
 * A row of side (values of its source's columns) as an entry, in the
 * store's memory: values passed by reference copied into it, detoasted
 * (a row read from the table may point into TOAST).
 */
static JoinEntry *
entry_make(JoinStore *js, int side, Datum *values, bool *nulls, bool has_time, TimestampTz time,
		   int64 batch)
{
	JoinSide   *sd = &js->sides[side];
	int			natts = sd->natts;
	Size		head = MAXALIGN(sizeof(JoinEntry)) + MAXALIGN(natts * (sizeof(Datum) + sizeof(bool)));
	Size		size = head;
	Datum	   *v = palloc(sizeof(Datum) * natts);
	JoinEntry  *e;
	BatchRow	row;
	char	   *data;

	for (int a = 0; a < natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(sd->desc, a);

		v[a] = values[a];
		if (nulls[a] || att->attbyval)
			continue;
		if (att->attlen == -1)
			v[a] = PointerGetDatum(pg_detoast_datum_packed((struct varlena *) DatumGetPointer(v[a])));
		size += MAXALIGN(datumGetSize(v[a], false, att->attlen));
	}
	e = MemoryContextAlloc(js->cxt, size);
	memset(e, 0, sizeof(JoinEntry));
	row = ENTRY_ROW(e);
	data = (char *) e + head;
	memcpy(BATCH_ROW_NULLS(row, natts), nulls, sizeof(bool) * natts);
	for (int a = 0; a < natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(sd->desc, a);
		Size		len;

		if (nulls[a] || att->attbyval)
		{
			row[a] = nulls[a] ? (Datum) 0 : v[a];
			continue;
		}
		len = datumGetSize(v[a], false, att->attlen);
		memcpy(data, DatumGetPointer(v[a]), len);
		row[a] = PointerGetDatum(data);
		data += MAXALIGN(len);
	}
	pfree(v);
	e->has_key = row_hash(js, side, row, natts, &e->hash);
	e->time = time;
	e->batch = batch;
	e->size = (uint32) Min(size, PG_UINT32_MAX);
	e->time_null = !has_time;
	e->in_times = has_time && js->spec.evicted[side];
	e->table = ENTRY_WRITING;
	return e;
}

/* The batch of a row of side's table in slot (its columns all read), or otherwise */
static int64
slot_batch(JoinStore *js, int side, TupleTableSlot *slot, int64 otherwise)
{
	AttrNumber	ba = js->spec.batch_attno[side];

	if (ba <= 0 || ba > slot->tts_tupleDescriptor->natts || slot->tts_isnull[ba - 1])
		return otherwise;
	return DatumGetInt64(slot->tts_values[ba - 1]);
}

/*
 * Enough buckets, in one rehash, for nkeyed keyed rows (the buckets at
 * least as many, a power of 2 up to 2^30): once a side has more keyed rows
 * than buckets.
 */
static void
grow_buckets(JoinStore *js, JoinSide *sd, int64 nkeyed)
{
	uint32		n = sd->nbuckets;
	dlist_head *buckets;

	while ((int64) n < nkeyed && n < (uint32) 1 << 30)
		n *= 2;
	if (n == sd->nbuckets)
		return;
	buckets = MemoryContextAlloc(js->cxt, sizeof(dlist_head) * n);

	for (uint32 b = 0; b < n; b++)
		dlist_init(&buckets[b]);
	for (uint32 b = 0; b < sd->nbuckets; b++)
	{
		dlist_mutable_iter it;

		dlist_foreach_modify(it, &sd->buckets[b])
		{
			JoinEntry  *e = dlist_container(JoinEntry, bucket_node, it.cur);

			dlist_delete(&e->bucket_node);
			dlist_push_tail(&buckets[e->hash & (n - 1)], &e->bucket_node);
		}
	}
	pfree(sd->buckets);
	sd->buckets = buckets;
	sd->nbuckets = n;
}

/*
 * A walk over hashes (of rows found in or put into side's buckets) asks for
 * the bucket of the row JOIN_PREFETCH_DISTANCE ahead of i to be fetched
 * into the cache, and for the first entry of the bucket half as far ahead,
 * whose head was asked for before: the buckets and entries of a large
 * store lie all over memory, and without this each step waits for two
 * fetches from memory, the head and the entry it points to.
 *
 * A macro, not a function: GCC takes a static function whose only effect
 * is __builtin_prefetch for one without effects, and drops its calls.
 */
#define JOIN_PREFETCH_DISTANCE 16

#if defined(__GNUC__) || defined(__clang__)
#define JOIN_PREFETCH(p) __builtin_prefetch(p)
#else
#define JOIN_PREFETCH(p) ((void) 0)
#endif

#define BUCKET_PREFETCH(sd, hashes, keyed, n, i) \
	do { \
		int			far_ = (i) + JOIN_PREFETCH_DISTANCE; \
		int			near_ = (i) + JOIN_PREFETCH_DISTANCE / 2; \
		\
		if (far_ < (n) && (keyed)[far_]) \
			JOIN_PREFETCH(&(sd)->buckets[(hashes)[far_] & ((sd)->nbuckets - 1)]); \
		if (near_ < (n) && (keyed)[near_]) \
		{ \
			dlist_head *b_ = &(sd)->buckets[(hashes)[near_] & ((sd)->nbuckets - 1)]; \
			\
			/* the entry's hash, and its row's first values, the keys' */ \
			if (b_->head.next != &b_->head) \
			{ \
				JOIN_PREFETCH(b_->head.next); \
				JOIN_PREFETCH((char *) b_->head.next + 64); \
			} \
			/* the tail, which a new entry goes after */ \
			if (b_->head.prev != &b_->head) \
				JOIN_PREFETCH(b_->head.prev); \
		} \
	} while (0)

static void
entry_link(JoinStore *js, int side, JoinEntry *e)
{
	JoinSide   *sd = &js->sides[side];

	if (e->has_key)
	{
		dlist_push_tail(&sd->buckets[e->hash & (sd->nbuckets - 1)], &e->bucket_node);
		if (++sd->nkeyed > (int64) sd->nbuckets)
			grow_buckets(js, sd, sd->nkeyed);
	}
	if (e->in_times)
		times_push(js, sd, e);
	sd->nrows++;
}

/*
 * Link the n entries a writer made into their side in one pass: the
 * buckets grown first to hold them all, and each entry's bucket asked for
 * ahead (BUCKET_PREFETCH).
 */
static void
entries_link(JoinStore *js, int side, JoinEntry **entries, int n)
{
	JoinSide   *sd = &js->sides[side];
	int64		nkeyed = sd->nkeyed;
	uint32	   *hashes;
	bool	   *keyed;

	if (n == 0)
		return;
	hashes = palloc(sizeof(uint32) * n);
	keyed = palloc(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
	{
		hashes[i] = entries[i]->hash;
		keyed[i] = entries[i]->has_key;
		nkeyed += keyed[i] ? 1 : 0;
	}
	grow_buckets(js, sd, nkeyed);
	for (int i = 0; i < n; i++)
	{
		BUCKET_PREFETCH(sd, hashes, keyed, n, i);
		entry_link(js, side, entries[i]);
	}
	pfree(hashes);
	pfree(keyed);
}

/* Both sides' rows from their tables; false (and empty) past the limit. */
static bool
join_store_load(JoinStore *js)
{
	Snapshot	snapshot;

	join_store_invalidate(js);
	js->loaded = true;
	CommandCounterIncrement();
	PushCopiedSnapshot(GetActiveSnapshot());
	UpdateActiveSnapshotCommandId();
	snapshot = GetActiveSnapshot();
	for (int s = 0; s < 2; s++)
	{
		JoinSide   *sd = &js->sides[s];
		Relation	rel = table_open(js->spec.table[s], AccessShareLock);
		TupleTableSlot *slot = table_slot_create(rel, NULL);
		TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
		bool		full = false;

		if (RelationGetDescr(rel)->natts < sd->natts || js->spec.time_attno[s] <= sd->natts)
			elog(ERROR, "streamwin: join table \"%s\" does not have its source's columns first",
				 RelationGetRelationName(rel));
		while (!full && table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			MemoryContext old = MemoryContextSwitchTo(js->temp_cxt);
			bool		isnull;
			Datum		time;
			JoinEntry  *e;

			slot_getallattrs(slot);
			time = slot->tts_values[js->spec.time_attno[s] - 1];
			isnull = slot->tts_isnull[js->spec.time_attno[s] - 1];
			e = entry_make(js, s, slot->tts_values, slot->tts_isnull, !isnull,
						   isnull ? 0 : DatumGetTimestampTz(time), slot_batch(js, s, slot, 0));
			e->in.tid = slot->tts_tid;
			e->table = ENTRY_WRITTEN;
			entry_link(js, s, e);
			MemoryContextSwitchTo(old);
			MemoryContextReset(js->temp_cxt);
			full = (sd->nrows & 1023) == 0 && over_memory(js);
		}
		table_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);
		table_close(rel, AccessShareLock);
		if (full || over_memory(js))
		{
			PopActiveSnapshot();
			join_store_invalidate(js);
			return false;
		}
	}
	PopActiveSnapshot();
	elog(DEBUG1, "streamwin: join store loaded " INT64_FORMAT " and " INT64_FORMAT " rows into %zu kB",
		 js->sides[0].nrows, js->sides[1].nrows, MemoryContextMemAllocated(js->cxt, true) / 1024);
	return true;
}

/*
 * As store_begin (state_store.h): what memory holds is the tables' state
 * if the store's last batch ended, wrote the catalog row last, and the
 * tables are the files it loaded; what its batches added counts against
 * streamwin.state_memory as what a load reads.
 */
static bool
join_store_vouches_for(JoinStore *js, TransactionId catalog_xmin, const Oid *files)
{
	return js->loaded && !js->in_batch && TransactionIdEquals(catalog_xmin, js->catalog_xmin) &&
		files[0] == js->table_file[0] && files[1] == js->table_file[1];
}

bool
join_store_vouches(JoinStore *js, TransactionId catalog_xmin)
{
	Oid			files[2];

	for (int s = 0; s < 2; s++)
		files[s] = store_table_file(js->spec.table[s]);
	return join_store_vouches_for(js, catalog_xmin, files);
}

bool
join_store_begin(JoinStore *js, TransactionId catalog_xmin)
{
	Oid			files[2];

	for (int s = 0; s < 2; s++)
		files[s] = store_table_file(js->spec.table[s]);
	if (join_store_vouches_for(js, catalog_xmin, files))
	{
		if (over_memory(js))
		{
			/* the batch runs on the tables: they get the rows kept back */
			join_store_sync(js);
			join_store_invalidate(js);
			return false;
		}
		js->in_batch = true;
		return true;
	}
	if (!join_store_load(js))
		return false;
	js->catalog_xmin = catalog_xmin;
	js->table_file[0] = files[0];
	js->table_file[1] = files[1];
	js->in_batch = true;
	return true;
}

void
join_store_end(JoinStore *js, TransactionId catalog_xmin)
{
	Assert(js->loaded && js->in_batch);
	js->catalog_xmin = catalog_xmin;
	js->in_batch = false;
}

int64
join_store_rows(JoinStore *js, int side)
{
	return js->sides[side].nrows;
}

/* A new candidate search; marks from 2^32 searches ago are cleared first. */
static uint32
next_probe(JoinStore *js)
{
	if (++js->probe == 0)
	{
		for (int s = 0; s < 2; s++)
			for (uint32 b = 0; b < js->sides[s].nbuckets; b++)
			{
				dlist_iter	it;

				dlist_foreach(it, &js->sides[s].buckets[b])
					dlist_container(JoinEntry, bucket_node, it.cur)->probe = 0;
			}
		js->probe = 1;
	}
	return js->probe;
}

BatchInput *
join_store_candidates(JoinStore *js, int side, BatchInput *probe, int32 id)
{
	JoinSide   *sd = &js->sides[side];
	int			other = 1 - side;
	BatchInput *out;
	int			room = 64;
	uint32		mark;

	Assert(js->in_batch);
	if (probe == NULL || probe->nrows == 0 || sd->nkeyed == 0)
		return NULL;
	mark = next_probe(js);
	out = palloc0(sizeof(BatchInput));
	out->source_id = id;
	out->natts = sd->natts;
	out->desc = sd->desc;
	out->rows = palloc(sizeof(BatchRow) * room);
	for (int i = 0; i < probe->nrows; i++)
	{
		BatchRow	p = probe->rows[i];
		uint32		h;
		dlist_iter	it;

		if (!row_hash(js, other, p, probe->natts, &h))
			continue;
		dlist_foreach(it, &sd->buckets[h & (sd->nbuckets - 1)])
		{
			JoinEntry  *e = dlist_container(JoinEntry, bucket_node, it.cur);

			if (e->hash != h || e->probe == mark || !entry_keys_equal(js, side, ENTRY_ROW(e), p))
				continue;
			e->probe = mark;
			if (out->nrows == room)
			{
				room *= 2;
				out->rows = repalloc(out->rows, sizeof(BatchRow) * room);
			}
			out->rows[out->nrows++] = ENTRY_ROW(e);
		}
	}
	return out->nrows > 0 ? out : NULL;
}

/* --- the batch's pairs --------------------------------------------------- */

/*
 * The pairs are made a chunk at a time as the statement reads them
 * (BatchInput.refill): every pair of rows with equal keys is found, and
 * only the statement's filter, the rest of the join's condition, tells
 * which are kept, so that a key shared by many rows of both sides makes
 * many more pairs than the join gives, which would not all fit in memory.
 */
#define PAIRS_CHUNK_ROWS 4096

/*
 * A step of the walk: each row of probe with its rows of equal keys,
 * either those of side 1's rows build, hashed for the step (PAIRS_HASHED,
 * probe side 0's), or those of side's rows in the store (PAIRS_STORED,
 * probe the other side's).
 */
typedef enum PairsStepKind
{
	PAIRS_HASHED,
	PAIRS_STORED,
} PairsStepKind;

/* A row of a hashed build side: its hash, the next in its bucket (or -1), itself. */
typedef struct HashedRow
{
	uint32		hash;
	int			next;
	BatchRow	row;
} HashedRow;

/*
 * An input of the pairs (one of the batch's new rows or, in table mode, of
 * the join tables' candidates) with what the steps need of it, made once
 * however many steps read it: its rows' key hashes, and for a build side
 * its rows hashed into buckets.
 */
typedef struct PairsInput
{
	BatchInput *rows;
	int			side;			/* whose rows, whose key functions */
	uint32	   *hashes;			/* NULL until first needed */
	bool	   *keyed;			/* false: a key is NULL, and equals none */
	HashedRow  *hashed;			/* a build side's rows, and */
	int		   *heads;			/* the first of them in each bucket, or -1 */
	uint32		nbuckets;
} PairsInput;

typedef struct PairsStep
{
	PairsStepKind kind;
	int			side;			/* PAIRS_STORED: the store's side */
	PairsInput *build;			/* PAIRS_HASHED: side 1's rows */
	PairsInput *probe;
} PairsStep;

typedef struct PairsCursor
{
	BatchInput	pub;			/* rows: the chunk */
	JoinStore  *js;
	Size		row_size;
	MemoryContext cxt;			/* the hashes, the chunk */
	char	   *chunk;			/* PAIRS_CHUNK_ROWS rows' space, reused */
	PairsInput	inputs[4];
	int			ninputs;
	PairsStep	steps[3];
	int			nsteps;
	/* where the walk is */
	int			step;
	int			i;				/* the probe row */
	bool		in_chain;		/* between its rows of equal keys: */
	int			pos;			/* PAIRS_HASHED: the next build row, or -1 */
	dlist_head *bucket;			/* PAIRS_STORED: the bucket, */
	dlist_node *node;			/* and the next entry's node in it */
} PairsCursor;

/*
 * As BUCKET_PREFETCH, for a hashed step: the bucket's head, then the first
 * row in it, then that row's values, each a few probe rows ahead of the
 * last.
 */
#define HASHED_PREFETCH(b, p, i) \
	do { \
		int			n_ = (p)->rows->nrows; \
		int			far_ = (i) + JOIN_PREFETCH_DISTANCE; \
		int			mid_ = (i) + JOIN_PREFETCH_DISTANCE / 2; \
		int			near_ = (i) + JOIN_PREFETCH_DISTANCE / 4; \
		\
		if (far_ < n_ && (p)->keyed[far_]) \
			JOIN_PREFETCH(&(b)->heads[(p)->hashes[far_] & ((b)->nbuckets - 1)]); \
		if (mid_ < n_ && (p)->keyed[mid_]) \
		{ \
			int			h_ = (b)->heads[(p)->hashes[mid_] & ((b)->nbuckets - 1)]; \
			\
			if (h_ >= 0) \
				JOIN_PREFETCH(&(b)->hashed[h_]); \
		} \
		if (near_ < n_ && (p)->keyed[near_]) \
		{ \
			int			h_ = (b)->heads[(p)->hashes[near_] & ((b)->nbuckets - 1)]; \
			\
			if (h_ >= 0) \
				JOIN_PREFETCH((b)->hashed[h_].row); \
		} \
	} while (0)

static void
pair_add(PairsCursor *pc, BatchRow r0, BatchRow r1)
{
	int			n0 = pc->js->sides[0].natts;
	int			n = pc->pub.natts;
	BatchRow	row = (BatchRow) (pc->chunk + pc->row_size * pc->pub.nrows);

	memcpy(row, r0, sizeof(Datum) * n0);
	memcpy(row + n0, r1, sizeof(Datum) * (n - n0));
	memcpy(BATCH_ROW_NULLS(row, n), BATCH_ROW_NULLS(r0, n0), sizeof(bool) * n0);
	memcpy(BATCH_ROW_NULLS(row, n) + n0, BATCH_ROW_NULLS(r1, n - n0), sizeof(bool) * (n - n0));
	pc->pub.rows[pc->pub.nrows++] = row;
}

/* The input's rows' key hashes, made the first time a step needs them. */
static void
input_hashes(PairsCursor *pc, PairsInput *in)
{
	BatchInput *rows = in->rows;
	MemoryContext old;

	if (in->hashes != NULL)
		return;
	old = MemoryContextSwitchTo(pc->cxt);
	in->hashes = palloc_extended(sizeof(uint32) * (Size) Max(rows->nrows, 1), MCXT_ALLOC_HUGE);
	in->keyed = palloc_extended(sizeof(bool) * (Size) Max(rows->nrows, 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < rows->nrows; i++)
		in->keyed[i] = row_hash(pc->js, in->side, rows->rows[i], rows->natts, &in->hashes[i]);
	MemoryContextSwitchTo(old);
}

/* A build input's rows in buckets by their hashes, the first time a step needs them. */
static void
input_buckets(PairsCursor *pc, PairsInput *in)
{
	BatchInput *rows = in->rows;
	MemoryContext old;

	if (in->heads != NULL)
		return;
	input_hashes(pc, in);
	old = MemoryContextSwitchTo(pc->cxt);
	in->nbuckets = 16;
	while (in->nbuckets < (uint32) rows->nrows && in->nbuckets < (uint32) 1 << 30)
		in->nbuckets <<= 1;
	in->heads = palloc_extended(sizeof(int) * (Size) in->nbuckets, MCXT_ALLOC_HUGE);
	memset(in->heads, -1, sizeof(int) * (Size) in->nbuckets);
	in->hashed = palloc_extended(sizeof(HashedRow) * (Size) Max(rows->nrows, 1), MCXT_ALLOC_HUGE);
	for (int b = rows->nrows - 1; b >= 0; b--)
	{
		HashedRow  *hr = &in->hashed[b];
		uint32		slot;

		hr->row = rows->rows[b];
		hr->hash = in->hashes[b];
		hr->next = -1;
		if (!in->keyed[b])
			continue;
		slot = hr->hash & (in->nbuckets - 1);
		hr->next = in->heads[slot];
		in->heads[slot] = b;
	}
	MemoryContextSwitchTo(old);
}

/*
 * Walk the rows of equal keys of the probe row the cursor is at, from where
 * it stopped, into the chunk; false if the chunk filled first.
 */
static bool
walk_chain(PairsCursor *pc, PairsStep *st)
{
	JoinStore  *js = pc->js;
	BatchRow	p = st->probe->rows->rows[pc->i];
	uint32		h = st->probe->hashes[pc->i];

	if (st->kind == PAIRS_HASHED)
	{
		while (pc->pos >= 0)
		{
			HashedRow  *hr = &st->build->hashed[pc->pos];

			pc->pos = hr->next;
			if (hr->hash == h && entry_keys_equal(js, 0, p, hr->row))
			{
				pair_add(pc, p, hr->row);
				if (pc->pub.nrows == PAIRS_CHUNK_ROWS)
					return false;
			}
		}
		return true;
	}
	while (pc->node != &pc->bucket->head)
	{
		JoinEntry  *e = dlist_container(JoinEntry, bucket_node, pc->node);

		pc->node = pc->node->next;
		if (e->hash != h || !entry_keys_equal(js, st->side, ENTRY_ROW(e), p))
			continue;
		if (st->side == 0)
			pair_add(pc, ENTRY_ROW(e), p);
		else
			pair_add(pc, p, ENTRY_ROW(e));
		if (pc->pub.nrows == PAIRS_CHUNK_ROWS)
			return false;
	}
	return true;
}

/* BatchInput.refill of the pairs: the next chunk of them. */
static bool
pairs_refill(BatchInput *input, bool restart)
{
	PairsCursor *pc = (PairsCursor *) input;

	pc->pub.nrows = 0;
	if (restart)
	{
		pc->step = 0;
		pc->i = 0;
		pc->in_chain = false;
	}
	while (pc->pub.nrows < PAIRS_CHUNK_ROWS && pc->step < pc->nsteps)
	{
		PairsStep  *st = &pc->steps[pc->step];
		PairsInput *probe = st->probe;

		input_hashes(pc, probe);
		if (st->kind == PAIRS_HASHED)
			input_buckets(pc, st->build);
		if (pc->i >= probe->rows->nrows)
		{
			pc->step++;
			pc->i = 0;
			pc->in_chain = false;
			continue;
		}
		if (!pc->in_chain)
		{
			uint32		h = probe->hashes[pc->i];

			if (st->kind == PAIRS_STORED)
				BUCKET_PREFETCH(&pc->js->sides[st->side], probe->hashes, probe->keyed,
								probe->rows->nrows, pc->i);
			else
				HASHED_PREFETCH(st->build, probe, pc->i);
			if (!probe->keyed[pc->i])
			{
				pc->i++;
				continue;
			}
			if (st->kind == PAIRS_HASHED)
				pc->pos = st->build->heads[h & (st->build->nbuckets - 1)];
			else
			{
				JoinSide   *sd = &pc->js->sides[st->side];

				pc->bucket = &sd->buckets[h & (sd->nbuckets - 1)];
				pc->node = pc->bucket->head.next;
			}
			pc->in_chain = true;
		}
		if (walk_chain(pc, st))
		{
			pc->in_chain = false;
			pc->i++;
		}
	}
	return pc->pub.nrows > 0;
}

/* The pairs' input of rows of side (NULL or empty: none), one per input however many steps read it */
static PairsInput *
pairs_input(PairsCursor *pc, BatchInput *rows, int side)
{
	PairsInput *in;

	if (rows == NULL || rows->nrows == 0)
		return NULL;
	for (int i = 0; i < pc->ninputs; i++)
		if (pc->inputs[i].rows == rows)
			return &pc->inputs[i];
	Assert(pc->ninputs < (int) lengthof(pc->inputs) && rows->natts == pc->js->sides[side].natts);
	in = &pc->inputs[pc->ninputs++];
	memset(in, 0, sizeof(PairsInput));
	in->rows = rows;
	in->side = side;
	return in;
}

/* A step: probe (rows of side 0, or of the other side than a stored one's) against build or the store */
static void
add_step(PairsCursor *pc, PairsStepKind kind, int side, BatchInput *build, BatchInput *probe)
{
	PairsStep  *st;
	PairsInput *p = pairs_input(pc, probe, kind == PAIRS_HASHED ? 0 : 1 - side);
	PairsInput *b = kind == PAIRS_HASHED ? pairs_input(pc, build, 1) : NULL;

	if (p == NULL || (kind == PAIRS_HASHED && b == NULL) ||
		(kind == PAIRS_STORED && pc->js->sides[side].nkeyed == 0))
		return;
	st = &pc->steps[pc->nsteps++];
	st->kind = kind;
	st->side = side;
	st->build = b;
	st->probe = p;
}

BatchInput *
join_store_pairs(JoinStore *js, BatchInput *new0, BatchInput *new1, bool stored,
				 BatchInput *state0, BatchInput *state1, int32 id)
{
	PairsCursor *pc = palloc0(sizeof(PairsCursor));

	Assert(!stored || js->in_batch);
	pc->js = js;
	pc->pub.source_id = id;
	pc->pub.natts = js->sides[0].natts + js->sides[1].natts;
	pc->pub.desc = js->pairs_desc;
	pc->row_size = MAXALIGN(pc->pub.natts * (sizeof(Datum) + sizeof(bool)));
	pc->pub.refill = pairs_refill;
	pc->cxt = AllocSetContextCreate(CurrentMemoryContext, "streamwin join pairs",
									ALLOCSET_DEFAULT_SIZES);
	pc->pub.rows = MemoryContextAlloc(pc->cxt, sizeof(BatchRow) * PAIRS_CHUNK_ROWS);
	/* each refill writes its chunk over the last: its readers copy the values out */
	pc->chunk = MemoryContextAllocHuge(pc->cxt, pc->row_size * PAIRS_CHUNK_ROWS);
	/* new0 x new1, new0 x state1, state0 x new1 */
	add_step(pc, PAIRS_HASHED, 1, new1, new0);
	if (stored)
	{
		add_step(pc, PAIRS_STORED, 1, NULL, new0);
		add_step(pc, PAIRS_STORED, 0, NULL, new1);
	}
	else
	{
		add_step(pc, PAIRS_HASHED, 1, state1, new0);
		add_step(pc, PAIRS_HASHED, 1, new1, state0);
	}
	pc->step = pc->nsteps;		/* nothing until the first refill restarts */
	return &pc->pub;
}

/* Take entry e of side out of the store, and its row out of the side's join table (*rel, opened once) */
static void
evict_entry(JoinStore *js, int side, JoinEntry *e, Relation *rel)
{
	JoinSide   *sd = &js->sides[side];

	Assert(e->table != ENTRY_WRITING);
	if (e->table == ENTRY_WRITTEN)
	{
		if (*rel == NULL)
		{
			*rel = table_open(js->spec.table[side], RowExclusiveLock);
			/* the rows this batch wrote are visible to the deletions */
			CommandCounterIncrement();
		}
		simple_heap_delete(*rel, &e->in.tid);
	}
	else
	{
		/* kept back, and now never written */
		dlist_delete(&e->in.pending_node);
		sd->pending_bytes -= e->size;
		sd->dropped_pending++;
	}
	if (e->has_key)
	{
		dlist_delete(&e->bucket_node);
		sd->nkeyed--;
	}
	sd->nrows--;
	pfree(e);
}

uint64
join_store_evict(JoinStore *js, int side, TimestampTz cutoff)
{
	JoinSide   *sd = &js->sides[side];
	Relation	rel = NULL;
	uint64		n = 0;

	Assert(js->in_batch);
	/* each run from its front, then the heap from its top */
	for (int i = 0; i < sd->nruns; i++)
	{
		TimeRun    *r = &sd->runs[i];

		while (r->first < r->n && r->items[r->first].time < cutoff)
		{
			JoinEntry  *e = r->items[r->first++].entry;

			/* a run's rows lie in memory much as they came */
			if (r->first + JOIN_PREFETCH_DISTANCE < r->n)
				JOIN_PREFETCH(r->items[r->first + JOIN_PREFETCH_DISTANCE].entry);
			evict_entry(js, side, e, &rel);
			n++;
		}
	}
	while (sd->ntimes > 0 && sd->times[0].time < cutoff)
	{
		JoinEntry  *e = sd->times[0].entry;

		heap_pop(sd);
		evict_entry(js, side, e, &rel);
		n++;
	}
	if (rel != NULL)
		table_close(rel, NoLock);
	return n;
}

/*
 * Rows going into a side's join table together, with heap_multi_insert,
 * as COPY writes them; each entry gets where its row went.  The store
 * drops the tables' indexes when it loads (op_store.h); a table that has
 * one all the same gets its rows' entries, so that no index misses a row.
 * The same, without the locations, writes rows into a checkpoint table.
 */
#define JOIN_WRITER_BATCH 100

typedef struct TableRows
{
	JoinStore  *js;
	Relation	rel;
	TableIndexes *indexes;		/* or NULL: none */
	bool		locate;			/* the entries get their rows' locations */
	BulkInsertState bistate;
	CommandId	cid;
	MemoryContext slot_cxt;		/* of the slots: the caller's */
	TupleTableSlot *slots[JOIN_WRITER_BATCH];
	JoinEntry  *entries[JOIN_WRITER_BATCH];
	int			n;
	uint64		written;
} TableRows;

static void
table_rows_open(TableRows *t, JoinStore *js, Oid relid, bool locate)
{
	memset(t, 0, sizeof(TableRows));
	t->js = js;
	t->locate = locate;
	t->rel = table_open(relid, RowExclusiveLock);
	t->indexes = table_indexes_open(t->rel);
	t->bistate = GetBulkInsertState();
	t->cid = GetCurrentCommandId(true);
	t->slot_cxt = CurrentMemoryContext;
}

/* The slot the next row goes in: fill it, then table_rows_add. */
static TupleTableSlot *
table_rows_slot(TableRows *t)
{
	if (t->slots[t->n] == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(t->slot_cxt);

		t->slots[t->n] = MakeSingleTupleTableSlot(RelationGetDescr(t->rel), &TTSOpsHeapTuple);
		MemoryContextSwitchTo(old);
	}
	return t->slots[t->n];
}

static void
table_rows_flush(TableRows *t)
{
	if (t->n == 0)
		return;
	heap_multi_insert(t->rel, t->slots, t->n, t->cid, 0, t->bistate);
	for (int i = 0; i < t->n; i++)
	{
		if (t->indexes != NULL)
			table_indexes_insert(t->indexes, t->slots[i]);
		if (t->locate)
		{
			t->entries[i]->in.tid = t->slots[i]->tts_tid;
			t->entries[i]->table = ENTRY_WRITTEN;
		}
		ExecClearTuple(t->slots[i]);
	}
	t->written += t->n;
	t->n = 0;
	MemoryContextReset(t->js->temp_cxt);
}

/* The row in table_rows_slot (its tuple in the store's temp_cxt) is e's. */
static void
table_rows_add(TableRows *t, JoinEntry *e)
{
	t->entries[t->n] = e;
	if (++t->n == JOIN_WRITER_BATCH)
		table_rows_flush(t);
}

static void
table_rows_close(TableRows *t)
{
	table_rows_flush(t);
	elog(DEBUG1, "streamwin: " UINT64_FORMAT " rows inserted into \"%s\" many to a page",
		 t->written, RelationGetRelationName(t->rel));
	FreeBulkInsertState(t->bistate);
	table_indexes_close(t->indexes);
	for (int i = 0; i < JOIN_WRITER_BATCH && t->slots[i] != NULL; i++)
		ExecDropSingleTupleTableSlot(t->slots[i]);
	table_close(t->rel, NoLock);
}

/*
 * Can a row of side's table be made from its entry alone?  Its columns are
 * the source's, then the event time, the batch that wrote it and the flag
 * that it matched, which is false on a side that is not preserved (the
 * only kind a store holds); a table with other columns (compiled by
 * another version) gets its rows as its batch's statement makes them.  So
 * does one without the batch column, whose checkpoint is copied whole
 * (checkpoint.c), from the table alone.
 */
static bool
table_row_from_entry(JoinStore *js, int side, TupleDesc td)
{
	if (js->spec.batch_attno[side] <= 0)
		return false;
	for (int a = js->sides[side].natts; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (att->attisdropped)
			return false;
		if (a + 1 == js->spec.time_attno[side])
		{
			if (att->atttypid != TIMESTAMPTZOID)
				return false;
		}
		else if (a + 1 == js->spec.batch_attno[side])
		{
			if (att->atttypid != INT8OID)
				return false;
		}
		else if (att->atttypid != BOOLOID)
			return false;
	}
	return true;
}

/*
 * The row of side's table that entry e makes (see table_row_from_entry for
 * its columns), in the store's temp_cxt, into slot; values and nulls have
 * room for the table's columns.
 */
static void
entry_table_row(JoinStore *js, int side, JoinEntry *e, TupleDesc td, Datum *values, bool *nulls,
				TupleTableSlot *slot)
{
	JoinSide   *sd = &js->sides[side];
	BatchRow	row = ENTRY_ROW(e);
	MemoryContext old;

	memcpy(values, row, sizeof(Datum) * sd->natts);
	memcpy(nulls, BATCH_ROW_NULLS(row, sd->natts), sizeof(bool) * sd->natts);
	for (int a = sd->natts; a < td->natts; a++)
	{
		nulls[a] = false;
		if (a + 1 == js->spec.time_attno[side])
		{
			values[a] = TimestampTzGetDatum(e->time);
			nulls[a] = e->time_null;
		}
		else if (a + 1 == js->spec.batch_attno[side])
			values[a] = Int64GetDatum(e->batch);
		else
			values[a] = BoolGetDatum(false);
	}
	old = MemoryContextSwitchTo(js->temp_cxt);
	ExecStoreHeapTuple(heap_form_tuple(td, values, nulls), slot, false);
	MemoryContextSwitchTo(old);
}

/* Write side's rows kept back into its table. */
static void
sync_side(JoinStore *js, int side)
{
	JoinSide   *sd = &js->sides[side];
	TableRows	t;
	TupleDesc	td;
	Datum	   *values;
	bool	   *nulls;
	dlist_mutable_iter it;

	if (sd->dropped_pending > 0)
		elog(DEBUG1, "streamwin: " INT64_FORMAT " rows kept back from \"%s\" went before they were written",
			 sd->dropped_pending, get_rel_name(js->spec.table[side]));
	sd->dropped_pending = 0;
	if (dlist_is_empty(&sd->pending))
		return;
	table_rows_open(&t, js, js->spec.table[side], true);
	td = RelationGetDescr(t.rel);
	values = palloc(sizeof(Datum) * td->natts);
	nulls = palloc(sizeof(bool) * td->natts);
	dlist_foreach_modify(it, &sd->pending)
	{
		JoinEntry  *e = dlist_container(JoinEntry, in.pending_node, it.cur);

		entry_table_row(js, side, e, td, values, nulls, table_rows_slot(&t));
		dlist_delete(&e->in.pending_node);
		e->table = ENTRY_WRITING;
		table_rows_add(&t, e);
	}
	sd->pending_bytes = 0;
	table_rows_close(&t);
	pfree(values);
	pfree(nulls);
}

void
join_store_sync(JoinStore *js)
{
	for (int s = 0; s < 2; s++)
		sync_side(js, s);
}

/* Do two tables have the same columns, by type? */
static bool
same_columns(TupleDesc a, TupleDesc b)
{
	if (a->natts != b->natts)
		return false;
	for (int i = 0; i < a->natts; i++)
	{
		Form_pg_attribute x = TupleDescAttr(a, i);
		Form_pg_attribute y = TupleDescAttr(b, i);

		if (x->attisdropped != y->attisdropped || x->atttypid != y->atttypid)
			return false;
	}
	return true;
}

void
join_store_checkpoint_kept(JoinStore *js, int side, Oid logged, int64 since_batch)
{
	JoinSide   *sd = &js->sides[side];
	Relation	table;
	TableRows	t;
	TupleDesc	td;
	Datum	   *values;
	bool	   *nulls;
	bool		same;
	dlist_iter	it;
	int64		n = 0;

	Assert(js->in_batch);
	if (dlist_is_empty(&sd->pending))
		return;
	table = table_open(js->spec.table[side], AccessShareLock);
	table_rows_open(&t, js, logged, false);
	td = RelationGetDescr(t.rel);
	/* as copy_rows would write them: a table changed since, by the INSERT */
	same = same_columns(RelationGetDescr(table), td) &&
		result_insert_plain(t.rel, RelationGetDescr(table));
	table_close(table, NoLock);
	if (!same)
	{
		/* the checkpoint copies them from the join table */
		table_rows_close(&t);
		sync_side(js, side);
		return;
	}
	values = palloc(sizeof(Datum) * td->natts);
	nulls = palloc(sizeof(bool) * td->natts);
	/* the list is in the order the rows came: the newest batches last */
	dlist_reverse_foreach(it, &sd->pending)
	{
		JoinEntry  *e = dlist_container(JoinEntry, in.pending_node, it.cur);

		if (e->batch <= since_batch)
			break;
		entry_table_row(js, side, e, td, values, nulls, table_rows_slot(&t));
		table_rows_add(&t, e);
		n++;
	}
	elog(DEBUG1, "streamwin: " INT64_FORMAT " rows kept back from \"%s\" written into \"%s\" from memory",
		 n, get_rel_name(js->spec.table[side]), RelationGetRelationName(t.rel));
	table_rows_close(&t);
	pfree(values);
	pfree(nulls);
}

int64
join_store_kept_bytes(JoinStore *js, int side)
{
	return js->sides[side].pending_bytes;
}

/*
 * The receiver of a side's new rows (join_store_writer): each goes into
 * memory, and into the join table with its batch's other rows, or, kept
 * back, with join_store_sync.
 */
typedef struct JoinWriter
{
	DestReceiver pub;
	JoinStore  *js;
	int			side;
	TimestampTz cutoff;			/* rows before it are not kept */
	uint64		left_out;		/* rows before it */
	int64		batch_id;
	bool		keep_back;		/* rows wait for join_store_sync */
	uint64		kept;
	TableRows	out;			/* or go into the table now */
	const char *table;			/* its name, for messages */
	JoinEntry **made;			/* the entries made, linked at the end */
	int			nmade;
	int			made_room;
	bool		local_time;		/* the time column comes as a timestamp */
} JoinWriter;

static void
writer_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	JoinWriter *w = (JoinWriter *) self;
	Relation	rel = table_open(w->js->spec.table[w->side], RowExclusiveLock);

	if (typeinfo->natts != RelationGetDescr(rel)->natts)
		elog(ERROR, "streamwin: the rows of join table \"%s\" have %d columns, the table %d",
			 RelationGetRelationName(rel), typeinfo->natts, RelationGetDescr(rel)->natts);

	/*
	 * A query made before its statements cast a timestamp side time
	 * explicitly gives the timestamp itself (its implicit cast was left out
	 * of the statement's text): cast here, in the batch's zone, as the
	 * statement meant to.
	 */
	w->local_time = TupleDescAttr(typeinfo, w->js->spec.time_attno[w->side] - 1)->atttypid == TIMESTAMPOID;
	w->keep_back = w->keep_back && table_row_from_entry(w->js, w->side, RelationGetDescr(rel));
	w->table = pstrdup(RelationGetRelationName(rel));
	table_close(rel, NoLock);
	if (!w->keep_back)
		table_rows_open(&w->out, w->js, w->js->spec.table[w->side], true);
}

static bool
writer_receive(TupleTableSlot *slot, DestReceiver *self)
{
	JoinWriter *w = (JoinWriter *) self;
	JoinStore  *js = w->js;
	AttrNumber	ta = js->spec.time_attno[w->side];
	MemoryContext old;
	JoinEntry  *e;

	slot_getallattrs(slot);
	if (w->local_time && !slot->tts_isnull[ta - 1])
		slot->tts_values[ta - 1] = DirectFunctionCall1(timestamp_timestamptz, slot->tts_values[ta - 1]);

	/*
	 * A row this batch's eviction takes (join_store_evict, with the same
	 * cutoff, after the batch's pairs are out) can match no later row: it
	 * would be written, kept and deleted again within the batch.  In a join
	 * whose range reaches forward, most of a batch's rows of the later side
	 * are such rows.
	 */
	if (!slot->tts_isnull[ta - 1] &&
		DatumGetTimestampTz(slot->tts_values[ta - 1]) < w->cutoff)
	{
		w->left_out++;
		return true;
	}
	old = MemoryContextSwitchTo(js->temp_cxt);
	e = entry_make(js, w->side, slot->tts_values, slot->tts_isnull,
				   !slot->tts_isnull[ta - 1],
				   slot->tts_isnull[ta - 1] ? 0 : DatumGetTimestampTz(slot->tts_values[ta - 1]),
				   slot_batch(js, w->side, slot, w->batch_id));
	/* linked when the statement ends: nothing reads the store before */
	if (w->nmade == w->made_room)
	{
		w->made_room *= 2;
		w->made = repalloc_huge(w->made, sizeof(JoinEntry *) * w->made_room);
	}
	w->made[w->nmade++] = e;
	w->kept++;
	if (w->keep_back)
	{
		dlist_push_tail(&js->sides[w->side].pending, &e->in.pending_node);
		js->sides[w->side].pending_bytes += e->size;
		e->table = ENTRY_KEPT_BACK;
		MemoryContextSwitchTo(old);
		MemoryContextReset(js->temp_cxt);
		return true;
	}
	ExecStoreHeapTuple(heap_form_tuple(RelationGetDescr(w->out.rel), slot->tts_values, slot->tts_isnull),
					   table_rows_slot(&w->out), false);
	MemoryContextSwitchTo(old);
	table_rows_add(&w->out, e);
	return true;
}

static void
writer_shutdown(DestReceiver *self)
{
	JoinWriter *w = (JoinWriter *) self;

	entries_link(w->js, w->side, w->made, w->nmade);
	w->nmade = 0;
	if (w->keep_back)
		elog(DEBUG1, "streamwin: " UINT64_FORMAT " rows kept back from \"%s\" until the transaction's batches end",
			 w->kept, w->table);
	else
		table_rows_close(&w->out);
	elog(DEBUG1, "streamwin: " UINT64_FORMAT " rows out of the watermark's reach left out of \"%s\"",
		 w->left_out, w->table);
}

static void
writer_destroy(DestReceiver *self)
{
	pfree(((JoinWriter *) self)->made);
	pfree(self);
}

DestReceiver *
join_store_writer(JoinStore *js, int side, TimestampTz cutoff, int64 batch_id,
				  bool keep_back)
{
	JoinWriter *w = palloc0(sizeof(JoinWriter));

	Assert(js->in_batch);
	w->pub.receiveSlot = writer_receive;
	w->pub.rStartup = writer_startup;
	w->pub.rShutdown = writer_shutdown;
	w->pub.rDestroy = writer_destroy;
	w->pub.mydest = DestNone;
	w->js = js;
	w->side = side;
	w->cutoff = cutoff;
	w->batch_id = batch_id;
	w->keep_back = keep_back;
	w->made_room = 1024;
	w->made = palloc(sizeof(JoinEntry *) * w->made_room);
	return &w->pub;
}

uint64
join_store_writer_kept(DestReceiver *dest)
{
	return ((JoinWriter *) dest)->kept;
}
