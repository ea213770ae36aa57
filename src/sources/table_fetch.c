/*-------------------------------------------------------------------------
 *
 * table_fetch.c
 *	  Reading a batch of a table source's rows in the calling backend: a
 *	  decoding pass over the WAL from the slot's restart point, the
 *	  decoding context kept open for the next fetch, rows from the spool.
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

/*
 * The end of the WAL inserted so far, for XLogFlush().  The insert position
 * is where the next record will go, which, when the last record ended at a
 * page boundary, is past the next page's header: WAL that does not exist
 * yet, and XLogFlush() refuses to flush it.
 */
XLogRecPtr
table_wal_inserted_end(void)
{
	XLogRecPtr	lsn = GetXLogInsertRecPtr();
	int			offset = lsn % XLOG_BLCKSZ;

	if (XLogSegmentOffset(lsn, wal_segment_size) == SizeOfXLogLongPHD)
		lsn -= SizeOfXLogLongPHD;
	else if (offset == SizeOfXLogShortPHD)
		lsn -= SizeOfXLogShortPHD;
	return lsn;
}

/*
 * Every decoding pass starts over at the slot's restart point, which only
 * moves to a point where the WAL holds a running-transactions record (what
 * a decoding restart needs); the background writer logs one every 15
 * seconds at best.  Log one ourselves, so that restart points follow the
 * queries closely: the record a pass logs becomes the restart point once
 * the next pass confirms the batch, so that a batch re-reads about the
 * WAL of the one before rather than up to 15 seconds of it.  At most every
 * RESTART_POINT_INTERVAL_MS per backend (taking the record's locks, on a
 * busy server, a thousand times a second would not pay), and not when
 * nothing but such records was written since this backend's last one (as
 * the background writer decides, by the last "important" record: else two
 * idle backends would each log one for the other's).  With a record a second, a
 * batch that follows the last within the second re-read all the WAL since
 * that record: 40 batches of 5,000 rows, each run_batch in a transaction
 * of its own, took 1.4x as long.
 */
#define RESTART_POINT_INTERVAL_MS	100

static void
log_restart_point(void)
{
	static TimestampTz last_logged = 0;
	static XLogRecPtr last_important = InvalidXLogRecPtr;
	TimestampTz now = GetCurrentTimestamp();
	XLogRecPtr	important;

	if (now - last_logged < RESTART_POINT_INTERVAL_MS * 1000 || RecoveryInProgress())
		return;
	important = GetLastImportantRecPtr();
	if (important == last_important)
		return;
	(void) LogStandbySnapshot();
	last_important = important;
	last_logged = now;
}

/*
 * Decode one WAL record.  Returns false if the plugin stopped the decoding
 * because the batch is full (see plugin_change); the reorder buffer has
 * then cleaned up the transaction it was replaying, and the decoding
 * context must not be used for more records.
 */
static bool
process_record(LogicalDecodingContext *ctx, FetchState *st)
{
	ResourceOwner owner = CurrentResourceOwner;
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		LogicalDecodingProcessRecord(ctx, ctx->reader);
	}
	PG_CATCH();
	{
		/* the plugin's stop alone: any other error is the caller's */
		if (st == NULL || !st->stopping || geterrcode() != ERRCODE_TABLE_BATCH_FULL)
			PG_RE_THROW();
		CurrentResourceOwner = owner;
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		return false;
	}
	PG_END_TRY();
	return true;
}

/*
 * A decoding context kept open after a fetch, so that the next fetch goes
 * on reading where this one stopped instead of decoding again from the
 * slot's restart point (in a backlog written before the query ran, that is
 * the start of the backlog for every batch).  Only for callers that fetch
 * again at once (run_available; a worker, in a backlog), after a fetch
 * that filled its batch at a transaction boundary, for at most
 * KEEP_MAX_FETCHES fetches in a row.  The slot stays acquired meanwhile,
 * also between a worker's transactions, which makes the other queries of
 * the source wait for it (they then take their turn, see table_fetch_rows
 * in table_reader.c); a context must never outlive its hold on the slot,
 * since a new context clears the slot's spill files.  A fetch that does not
 * start exactly where the kept context stopped (a failed batch, a replay,
 * another slot) discards it, and so does an abort; the caller releases it
 * when it stops fetching (table_fetch_release, or the process exit).
 */
#define KEEP_MAX_FETCHES	100

typedef struct KeptDecoding
{
	char		slot_name[NAMEDATALEN];
	LogicalDecodingContext *ctx;
	MemoryContext cxt;			/* parent of the context's memory */
	bool		acquired;		/* by us, not held since slot creation */
	TablePosition resume;		/* where the next fetch must start */
	int			fetches;		/* fetches in a row on this context */
	SubTransactionId subid;		/* the (sub)transaction it belongs to */
} KeptDecoding;

static KeptDecoding *kept = NULL;

/* Does the decoding context kept open go on from position at of the slot? */
static bool
kept_at(const char *slot_name, TablePosition at)
{
	return kept != NULL && strcmp(kept->slot_name, slot_name) == 0 &&
		kept->resume.lsn == at.lsn && kept->resume.index == at.index;
}
static bool kept_callback_registered = false;

/*
 * Forget a decoding context without calling into the decoding machinery
 * (after an error it may be in any state): close its WAL segment, free its
 * memory, release the slot if we acquired it.
 */
static void
discard_decoding(LogicalDecodingContext *ctx, MemoryContext cxt, bool acquired)
{
	if (ctx != NULL && ctx->reader != NULL && ctx->reader->seg.ws_file >= 0)
		wal_segment_close(ctx->reader);
	if (cxt != NULL)
		MemoryContextDelete(cxt);
	if (acquired && MyReplicationSlot != NULL)
		ReplicationSlotRelease();
}

/* End a kept decoding context cleanly (between fetches). */
void
table_fetch_release(void)
{
	KeptDecoding *k = kept;

	spool_discard();
	if (k == NULL)
		return;
	kept = NULL;
	FreeDecodingContext(k->ctx);
	discard_decoding(NULL, k->cxt, k->acquired);
	pfree(k);
}

/* At abort: the kept context is abandoned, whatever state it is in. */
static void
kept_decoding_abort(void)
{
	KeptDecoding *k = kept;

	if (k == NULL)
		return;
	kept = NULL;
	discard_decoding(k->ctx, k->cxt, k->acquired);
	pfree(k);
}

static void
kept_decoding_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		kept_decoding_abort();
}

/*
 * A subtransaction's abort (ROLLBACK TO SAVEPOINT, a PL/pgSQL exception
 * block, psql's ON_ERROR_ROLLBACK) abandons a context kept in it, as a
 * transaction's abort does: else the session, idle after its error, would
 * hold the slot for good, and every other query of the source wait for it.
 * A subtransaction that commits hands it to its parent.
 */
static void
kept_decoding_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							   SubTransactionId parentSubid, void *arg)
{
	if (kept == NULL || kept->subid != mySubid)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		kept_decoding_abort();
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		kept->subid = parentSubid;
}

/*
 * Keep ctx, read in memory context cxt, for the next fetch, which must
 * start at resume; an abort before then, of its transaction or of the
 * subtransaction it was kept in, abandons it (kept_decoding_xact_callback,
 * kept_decoding_subxact_callback, registered once per process).
 */
static void
keep_decoding(const char *slot_name, LogicalDecodingContext *ctx, MemoryContext cxt,
			  bool acquired, TablePosition resume, int fetches)
{
	kept = MemoryContextAllocZero(TopMemoryContext, sizeof(KeptDecoding));
	strlcpy(kept->slot_name, slot_name, NAMEDATALEN);
	kept->ctx = ctx;
	kept->cxt = cxt;
	kept->acquired = acquired;
	kept->resume = resume;
	kept->fetches = fetches;
	kept->subid = GetCurrentSubTransactionId();
	if (!kept_callback_registered)
	{
		RegisterXactCallback(kept_decoding_xact_callback, NULL);
		RegisterSubXactCallback(kept_decoding_subxact_callback, NULL);
		kept_callback_registered = true;
	}
}

/* Decode from the slot's restart point; st == NULL: fast-forward only. */
void
decode_pass(const char *slot_name, TablePosition start, FetchState *st,
			XLogRecPtr confirm_upto, XLogRecPtr *end_of_wal, XLogRecPtr *end_read)
{
	XLogRecPtr	start_lsn = start.lsn;

	/* volatile: assigned inside PG_TRY and read in PG_CATCH */
	volatile bool acquired;
	LogicalDecodingContext *volatile ctx = NULL;
	volatile MemoryContext dcxt = NULL;
	int			level;
	bool		reuse;
	volatile int fetches_in_row = 0;

	/*
	 * Decoding runs each transaction in an internal subtransaction, which
	 * leaves CurrentResourceOwner at the top transaction's and
	 * CurrentMemoryContext at whatever it last used (possibly inside the
	 * reorder buffer's memory, freed later): put the right ones back after
	 * every record, or a caller such as a SQL function would release its
	 * snapshots under the wrong owner (logicalfuncs.c does the same for the
	 * owner) and later allocations would land in freed memory.
	 */
	ResourceOwner owner = CurrentResourceOwner;
	MemoryContext cxt = CurrentMemoryContext;

	CheckLogicalDecodingRequirements();

	/*
	 * Only flushed WAL can be decoded, but with synchronous_commit = off a
	 * transaction is visible before its commit record is flushed: flush up to
	 * here first, so that a batch reads every transaction that committed
	 * before it started.
	 */
	log_restart_point();
	XLogFlush(table_wal_inserted_end());
	*end_of_wal = GetFlushRecPtr(NULL);

	reuse = st != NULL && st->upto == NULL && kept_at(slot_name, start);
	if (!reuse)
		table_fetch_release();
	if (reuse)
	{
		ctx = kept->ctx;
		dcxt = kept->cxt;
		acquired = kept->acquired;
		fetches_in_row = kept->fetches;
		pfree(kept);
		kept = NULL;
	}
	else
		acquired = slot_acquire(slot_name);
	PG_TRY();
	{
		decoding_for_fetch = true;
		if (!reuse)
			slot_check_valid(start_lsn);
		if (!reuse && start_lsn < MyReplicationSlot->data.confirmed_flush)
			ereport(ERROR,
					(errcode(ERRCODE_TABLE_POSITION_LOST),
					 errmsg("the table source no longer holds the changes from %X/%X on",
							LSN_FORMAT_ARGS(start_lsn)),
					 errdetail("Its replication slot \"%s\" starts at %X/%X.", slot_name,
							   LSN_FORMAT_ARGS(MyReplicationSlot->data.confirmed_flush)),
					 errhint("Start the query over with streamwin.reset_query(name, 'earliest'). "
							 "A slot moves past what its queries read only by pg_replication_slot_advance() or a slot of that name made anew.")));
		if (!reuse)
		{
			/* in memory of its own: the context may outlive this fetch */
			dcxt = AllocSetContextCreate(TopMemoryContext, "streamwin decoding",
										 ALLOCSET_DEFAULT_SIZES);
			MemoryContextSwitchTo(dcxt);
			level = allow_own_plugin();
			ctx = CreateDecodingContext(start_lsn, NIL, st == NULL,
										LOCAL_WAL_READER,
										no_prepare_write, no_write, NULL);
			restore_plugin_list(level);
			MemoryContextSwitchTo(cxt);
			XLogBeginRead(ctx->reader, MyReplicationSlot->data.restart_lsn);
		}
		/* the fetch the plugin's callbacks write into (see fetch_of) */
		ctx->output_plugin_private = st;
		InvalidateSystemCaches();

		/*
		 * Read in the context's own memory: the WAL reader allocates its
		 * record buffers in the current context as it goes, and those must
		 * live as long as the decoding context, which may be kept.
		 */
		MemoryContextSwitchTo(dcxt);
		while (ctx->reader->EndRecPtr < *end_of_wal && (st == NULL || !st->done))
		{
			char	   *errm = NULL;
			XLogRecord *record = XLogReadRecord(ctx->reader, &errm);

			if (errm)
				elog(ERROR, "could not read WAL for table source: %s", errm);
			if (record != NULL && !process_record(ctx, st))
			{
				/* the batch filled up inside a transaction */
				st->done = true;
				break;
			}
			CurrentResourceOwner = owner;
			MemoryContextSwitchTo(dcxt);
			/* a replay is complete once the commit it ends at is read */
			if (st != NULL && st->upto != NULL && ctx->reader->EndRecPtr > st->upto->lsn)
				break;
			CHECK_FOR_INTERRUPTS();
		}
		MemoryContextSwitchTo(cxt);
		*end_read = ctx->reader->EndRecPtr;
		if (st == NULL)
			slot_confirm(*end_read);
		else
			slot_confirm(confirm_upto);
		ctx->output_plugin_private = NULL;
		decoding_for_fetch = false;

		/*
		 * Keep the context if the batch filled up at a transaction boundary
		 * (a backlog: the next fetch follows at once); not after the plugin
		 * stopped it inside a transaction, which leaves it unusable, nor on
		 * the slot this transaction creates, which its commit releases
		 * (catch_up commits between batches).
		 */
		if (acquired && st != NULL && st->may_keep && st->upto == NULL && st->done && !st->stopping &&
			(!reuse || fetches_in_row < KEEP_MAX_FETCHES))
		{
			/* the context goes on after the spooled transaction */
			keep_decoding(slot_name, ctx, dcxt, acquired,
						  st->spooling ? spool->after : st->out->end,
						  reuse ? fetches_in_row + 1 : 1);
		}
		else
		{
			FreeDecodingContext(ctx);
			MemoryContextSwitchTo(cxt);
			discard_decoding(NULL, dcxt, acquired);
		}
		/* kept or gone: not this fetch's to discard, should the rest fail */
		ctx = NULL;
		dcxt = NULL;
		acquired = false;
		MemoryContextSwitchTo(cxt);
		InvalidateSystemCaches();
	}
	PG_CATCH();
	{
		CurrentResourceOwner = owner;
		MemoryContextSwitchTo(cxt);
		decoding_for_fetch = false;
		/* the slot let go first: the invalidation may fail too */
		discard_decoding(ctx, dcxt, acquired);
		if (st != NULL && st->spooling)
			spool_discard();	/* cut short: it would lack rows */
		InvalidateSystemCaches();
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * Fill the fetch from the spool, up to max_records rows, with the changes
 * counted between them.  Returns true if rows are left in it (the batch is
 * full).
 */
static bool
take_spooled(FetchState *st)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(st->desc, &TTSOpsMinimalTuple);

	while (st->out->nrows < st->max_records && spool->left > 0)
	{
		if (!tuplestore_gettupleslot(spool->rows, true, false, slot))
			elog(ERROR, "streamwin spool ended %lld rows early", (long long) spool->left);
		append_row(st, ExecCopySlotHeapTuple(slot), spool->txn_lsn, spool->next_index++,
				   spool->commit_time,
				   spool->next_kind < spool->nkinds ? spool->kinds[spool->next_kind++] : CHANGE_NONE);
		spool->left--;
	}
	ExecDropSingleTupleTableSlot(slot);
	while (spool->next_change < spool->nchanges &&
		   spool->changes[spool->next_change].after < spool->next_index)
	{
		int64	   *n = spool->changes[spool->next_change++].n;

		st->out->ignored_updates += n[0];
		st->out->ignored_deletes += n[1];
		st->out->ignored_truncates += n[2];
	}
	return spool->left > 0;
}

/* Does the spool hold the rest of the query's transaction from position at? */
static bool
spool_at(const char *slot_name, Oid table, int32 query_id, TablePosition at)
{
	return strcmp(spool->slot_name, slot_name) == 0 && spool->table == table &&
		spool->query_id == query_id && spool->txn_lsn == at.lsn && spool->next_index == at.index;
}

void
table_fetch(const char *slot_name, Oid table, int32 query_id, TransactionId snapshot_xid,
			XLogRecPtr snapshot_lsn, TupleDesc desc, int nmetadata, const AttrNumber *attnums, int nattnums, TablePosition start,
			const TablePosition *upto, int max_records,
			XLogRecPtr confirm_upto, bool may_keep, TableFetch *out)
{
	FetchState	st;
	XLogRecPtr	end_read;

	memset(out, 0, sizeof(TableFetch));
	memset(&st, 0, sizeof(st));
	st.table = table;
	st.query_id = query_id;
	st.snapshot_xid = snapshot_xid;
	st.snapshot_lsn = snapshot_lsn;
	st.desc = desc;
	st.start = start;
	st.upto = upto;
	st.max_records = upto != NULL ? INT_MAX : max_records;
	st.may_keep = may_keep;
	st.cxt = CurrentMemoryContext;
	st.out = out;
	st.capacity = 1024;
	/* a changelog source's row type ends with its change column (source.h) */
	if (desc->natts > 0 &&
		strcmp(NameStr(TupleDescAttr(desc, desc->natts - 1)->attname), CHANGE_COLUMN) == 0)
		st.change_attno = desc->natts;
	st.nmetadata = nmetadata;
	st.attnums = attnums;
	st.nattnums = nattnums;
	st.map = palloc(sizeof(int) * Max(desc->natts, 1));
	st.values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	st.nulls = palloc(sizeof(bool) * Max(desc->natts, 1));
	out->rows = palloc(sizeof(SourceRow) * st.capacity);

	if (spool != NULL && (upto != NULL || !spool_at(slot_name, table, query_id, start)))
		spool_discard();
	if (spool != NULL)
	{
		if (take_spooled(&st))
		{
			out->end.lsn = spool->txn_lsn;
			out->end.index = spool->next_index;
			out->end_of_wal = GetFlushRecPtr(NULL);
			return;
		}
		/* the transaction is done: on with decoding after it */
		start = spool->after;
		st.start = start;
		spool_discard();
		if (out->nrows >= st.max_records)
		{
			out->end = start;
			out->end_of_wal = GetFlushRecPtr(NULL);
			return;
		}
	}

	decode_pass(slot_name, start, &st, confirm_upto, &out->end_of_wal, &end_read);

	if (upto != NULL)
		out->end = *upto;
	else if (!st.done)
	{
		/* every transaction that committed before end_read was read whole */
		out->end.lsn = Max(start.lsn, end_read);
		out->end.index = out->end.lsn == start.lsn ? start.index : 0;
		out->at_end = true;
	}
}

/*
 * Will a fetch of up to max_records of the query's rows of table from next
 * go on without decoding from the slot's restart point: from the spooled
 * rest of a transaction (if that fills it, or the decoding context kept
 * open goes on after it), or on the kept context?  (The context and the
 * spool are the process's, for one slot at a time: another source's fetch
 * takes them over.)  It asks what table_fetch does, in its order.
 */
bool
table_fetch_resumes(const char *slot_name, Oid table, int32 query_id, TablePosition next,
					int max_records)
{
	if (spool != NULL && spool->left > 0 && spool_at(slot_name, table, query_id, next))
	{
		if (spool->left >= max_records)
			return true;
		next = spool->after;
	}
	return kept_at(slot_name, next);
}

void
source_slot_advance(const char *slot_name, int32 source_id)
{
	XLogRecPtr	end_of_wal;
	XLogRecPtr	end_read;
	TablePosition from;

	/*
	 * Nothing to release in a restored database, which has no slot, nor in an
	 * invalidated slot, which keeps no WAL (and cannot be read).
	 */
	if (!slot_is_ours(slot_name) || source_slot_invalidated(slot_name))
		return;
	from.lsn = source_slot_confirmed(slot_name);
	from.index = 0;
	/* not while a query's start is being set (see source_hold_start) */
	if (!source_confirm_begin(source_id))
		return;
	PG_TRY();
	{
		decode_pass(slot_name, from, NULL, InvalidXLogRecPtr, &end_of_wal, &end_read);
	}
	PG_FINALLY();
	{
		source_confirm_end(source_id);
	}
	PG_END_TRY();
}
