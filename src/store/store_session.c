/*-------------------------------------------------------------------------
 *
 * store_session.c
 *	  Session windows in a state store (see state_store_int.h for the
 *	  store's files).
 *
 * A session window is a group too, keyed by its start; the store also
 * keeps each key's sessions in order and every session by its end.  A
 * batch's own sessions (gaps and islands over its rows, by the executor)
 * merge in C with the stored sessions of their key that they overlap, so
 * an event that bridges two sessions joins them into one, and a session
 * closes when the watermark passes its end.  A session is a group whose
 * StoreSession links it into its key's sessions (a second hash table, by
 * the group keys alone, each key's sessions in order of start) and into a
 * pairing heap by end, which closing reads from the top.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "state_store_int.h"

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
 * No session (in a freshly reset groups_cxt): the sessions' part of
 * store_reset_groups.
 */
void
sessions_reset(StateStore *s)
{
	MemoryContext old = MemoryContextSwitchTo(s->groups_cxt);

	/* the group keys without window_start: the key columns from the second */
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
	MemoryContextSwitchTo(old);
}

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
void
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
	group_drop(s, g);
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
void
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

/*
 * Forget a group: out of its key's sessions if it is a session, then its
 * hash entry and its memory.
 */
void
group_drop(StateStore *s, StoreGroup *g)
{
	if (s->plan.session && g->in.session != NULL)
		session_detach(s, g);
	group_free(s, g);
}

/*
 * Close the sessions ending at or before the watermark, from the heap's
 * top, into STORE_ROWS_CLOSED; returns how many.
 */
int64
sessions_close(StateStore *s, TimestampTz watermark)
{
	int64		n = 0;

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
