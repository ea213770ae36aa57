/*-------------------------------------------------------------------------
 *
 * store_upsert.c
 *	  An upsert store: the last row of each key of an upsert source, which
 *	  a new version replaces and a deletion removes (see state_store.h;
 *	  state_store_int.h lists the store's files).
 *
 * The key is the group; the row's other columns are its partials, each
 * MERGE_LAST.  The upsert operator (op_upsert.c) takes a batch's rows in
 * order through store_upsert, which gives back the row each key had, for
 * the operator to retract.  The state table follows at
 * store_write_changed: the changed keys' rows written by location (or kept
 * back until store_sync), the deleted keys' rows deleted there
 * (state_gone), and the checkpoint at store_checkpoint as for any store.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/datum.h"
#include "utils/memutils.h"

#include "state_store_int.h"

/* Forget a key's group: its state row goes at store_write_changed. */
static void
upsert_delete(StateStore *s, StoreGroup *g)
{
	if (ItemPointerIsValid(&g->state_tid))
		tid_list_add(&s->state_gone, &g->state_tid);
	group_unlink(s, g);
	group_free(s, g);
}

/* A key's row (its partials), copied into CurrentMemoryContext. */
static void
row_copy(StateStore *s, StoreGroup *g, Datum *values, bool *nulls)
{
	for (int i = 0; i < s->npartials; i++)
	{
		StorePartial *p = &s->partials[i];

		Assert(p->merge == MERGE_LAST);
		nulls[i] = GROUP_NULLS(s, g)[i];
		values[i] = nulls[i] ? (Datum) 0 : datumCopy(g->values[i], p->typbyval, p->typlen);
	}
}

/* The store's key slot holding keys, to look a group up by */
static void
key_slot_set(StateStore *s, const Datum *keys, const bool *key_nulls)
{
	TupleTableSlot *key = s->key_slot;

	ExecClearTuple(key);
	memcpy(key->tts_values, keys, sizeof(Datum) * s->nkeys);
	memcpy(key->tts_isnull, key_nulls, sizeof(bool) * s->nkeys);
	ExecStoreVirtualTuple(key);
}

bool
store_upsert(StateStore *s, const Datum *keys, const bool *key_nulls,
			 const Datum *values, const bool *nulls, Datum *old_values, bool *old_nulls,
			 Datum *old_keys, bool *old_key_nulls)
{
	MemoryContext caller = CurrentMemoryContext;
	StoreGroup *g;
	bool		created = false;
	bool		had;

	Assert(s->loaded && s->in_batch && !s->plan.windowed && !s->plan.dedup);
	MemoryContextSwitchTo(s->temp_cxt);
	key_slot_set(s, keys, key_nulls);
	g = store_group(s, values != NULL ? &created : NULL);
	had = g != NULL && !created;

	/* the row the key had, and its key, in the caller's memory: the group's may go now */
	MemoryContextSwitchTo(caller);
	if (had)
	{
		row_copy(s, g, old_values, old_nulls);
		for (int k = 0; k < s->nkeys; k++)
		{
			Form_pg_attribute att = TupleDescAttr(s->key_desc, k);

			old_keys[k] = group_key(s, g, k, &old_key_nulls[k]);
			if (!old_key_nulls[k])
				old_keys[k] = datumCopy(old_keys[k], att->attbyval, att->attlen);
		}
	}

	/*
	 * A new row whose key is another form of the stored one (1.00 for 1.0,
	 * equal and found by it): the key goes as the new row gives it, so that
	 * its retraction later takes back the key that row added, as the table
	 * path does (STMT_UPSERT_WRITE).  The group is made anew under it.
	 */
	if (values != NULL && had && !same_key_images(s, g, keys, key_nulls))
	{
		upsert_delete(s, g);
		MemoryContextSwitchTo(s->temp_cxt);
		/* (the deletion used the key slot for the old key) */
		key_slot_set(s, keys, key_nulls);
		g = store_group(s, &created);
		MemoryContextSwitchTo(caller);
		Assert(created);
	}

	if (values != NULL)
	{
		if (created)
			g->flags |= GROUP_NEW;
		for (int i = 0; i < s->npartials; i++)
			set_partial(s, g, i, values[i], nulls[i]);
		group_changed(s, g);
	}
	else if (had)
		upsert_delete(s, g);
	MemoryContextReset(s->temp_cxt);
	return had;
}

int64
store_upsert_truncate(StateStore *s, StoreUpsertVisit visit, void *arg)
{
	int64		ngroups = s->ngroups;
	StoreGroup **groups = palloc_extended(sizeof(StoreGroup *) * Max(ngroups, 1), MCXT_ALLOC_HUGE);
	Datum	   *keys = palloc(sizeof(Datum) * Max(s->nkeys, 1));
	bool	   *key_nulls = palloc(sizeof(bool) * Max(s->nkeys, 1));
	Datum	   *values = palloc(sizeof(Datum) * Max(s->npartials, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(s->npartials, 1));
	TupleHashIterator hit;
	TupleHashEntry entry;
	int64		n = 0;

	Assert(s->loaded && s->in_batch && !s->plan.windowed && !s->plan.dedup);
	/* the groups first: forgetting one changes the hash table */
	InitTupleHashIterator(s->hash, &hit);
	while ((entry = ScanTupleHashTable(s->hash, &hit)) != NULL)
		groups[n++] = (StoreGroup *) entry->additional;
	TermTupleHashIterator(&hit);
	Assert(n == ngroups);

	for (int64 i = 0; i < n; i++)
	{
		StoreGroup *g = groups[i];

		for (int k = 0; k < s->nkeys; k++)
		{
			Form_pg_attribute att = TupleDescAttr(s->key_desc, k);

			keys[k] = group_key(s, g, k, &key_nulls[k]);
			if (!key_nulls[k])
				keys[k] = datumCopy(keys[k], att->attbyval, att->attlen);
		}
		row_copy(s, g, values, nulls);
		visit(arg, keys, key_nulls, values, nulls);
		upsert_delete(s, g);
	}
	pfree(groups);
	return n;
}
