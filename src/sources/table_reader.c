/*-------------------------------------------------------------------------
 *
 * table_reader.c
 *	  Table sources: create_table_source, and their SourceOps, the reader a
 *	  query uses (over the decoding of table_source.h).
 *
 * A table source has one partition, its commit order, whose position is
 * (commit LSN, rows of that transaction already processed); see
 * table_source.h.  Every fetch decodes from the stored position (or goes
 * on in a decoding context kept from the fetch before), so a reader keeps
 * nothing else between batches.  The slot is confirmed as far as every
 * query of the source allows, from committed positions only, so a batch
 * that fails cannot have released what it needs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rls.h"
#include "utils/ruleutils.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "options.h"
#include "source.h"
#include "spi_util.h"
#include "sql_function.h"
#include "table_source.h"
#include "table_source_int.h"

STREAMWIN_SQL_FUNCTION(streamwin_create_table_source);

typedef struct TableReader
{
	bool		at_end;			/* the last fetch read everything committed */
	XLogRecPtr	end_of_wal;		/* the WAL position it read up to */
	int64		ignored[3];		/* updates, deletes, truncates it ignored */
	bool		changelog;		/* a changelog source (option "changes") */
	int64		changes[3];		/* its inserts, updates, deletes read */
	TimestampTz idle_stored_at; /* last store of a position moved without rows */
	AttrNumber *attnums;		/* table_source_attnums' */
	int			nattnums;
} TableReader;

#define TR(rd) ((TableReader *) (rd)->private)

/* --- at the catalog's pace ---------------------------------------------- */

/*
 * The source's table is still there: no dependency keeps it, and it may be
 * dropped under the source.
 */
static void
table_check_exists(SourceInfo *src)
{
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(src->source_table)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table of table source \"%s\" no longer exists", src->name),
				 errdetail("It was dropped; its changes that the source's queries had not read are not read."),
				 errhint("Drop the source's queries and the source (streamwin.drop_source(%s)); "
						 "a table of that name created again needs a source of its own.",
						 quote_literal_cstr(src->name))));
}

/* Its rows come from the WAL: the query's owner must be able to read the table. */
static void
table_check_query(SourceInfo *src)
{
	table_check_exists(src);
	table_source_check_relation(src->source_table);
}

static bool table_changes_option(Jsonb *options);

/*
 * A table source knows the table's columns by name, as of its creation,
 * and records which attribute of the table each was then (option
 * "table_attnums", written by create_table_source).  For a changelog, a
 * column dropped and added again under the same name is another
 * attribute, whose values the rows added before do not hold, and decoding
 * refuses it (table_changelog_columns_check); for either kind, a column
 * renamed is refused rather than read as NULL (table_append_columns_check).
 * NULL, *n 0: not recorded (a source created by an earlier streamwin).
 */
static AttrNumber *
table_source_attnums(Jsonb *options, int *n)
{
	JsonbValue *v = option_value(options, "table_attnums");
	JsonbIterator *it;
	JsonbValue	item;
	JsonbIteratorToken tok;
	AttrNumber *attnums;

	*n = 0;
	if (v == NULL)
		return NULL;
	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		elog(ERROR, "streamwin: option \"table_attnums\" of a table source is not an array");
	attnums = palloc(sizeof(AttrNumber) * Max(JsonContainerSize(v->val.binary.data), 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (item.type != jbvNumeric)
			elog(ERROR, "streamwin: option \"table_attnums\" of a table source holds a value that is not a number");
		attnums[(*n)++] = DatumGetInt16(DirectFunctionCall1(numeric_int2, NumericGetDatum(item.val.numeric)));
	}
	return attnums;
}

/*
 * May the query's owner (query: its name; NULL, one being created, by the
 * current user) read the table's rows as a table source delivers them?
 */
static void
table_check_access(SourceInfo *src, Oid owner, const char *query)
{
	table_check_exists(src);
	if (pg_class_aclcheck(src->source_table, owner, ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(src->source_table)),
				 query ? errdetail("Query \"%s\" reads it through table source \"%s\".", query, src->name) :
				 errdetail("The query reads it through table source \"%s\".", src->name),
				 errhint("GRANT SELECT on the table to the query's owner.")));

	/*
	 * ALTER TABLE ... SET UNLOGGED since the source was created: what is
	 * inserted now is not in the WAL, so the source would read nothing and
	 * say nothing.
	 */
	if (get_rel_persistence(src->source_table) != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s of table source \"%s\" is no longer a logged table",
						get_rel_name(src->source_table), src->name),
				 errdetail("The rows written to it now are not in the WAL, which is what the source reads."),
				 errhint("Make it logged again (ALTER TABLE ... SET LOGGED), then reset the source's queries "
						 "(streamwin.reset_query) to read from a known point: rows written while it was unlogged are lost to them.")));

	/*
	 * The rows come from the WAL, past any row-level security policy: a
	 * role the policies apply to would read every row.
	 */
	if (check_enable_rls(src->source_table, owner, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s has row-level security, which table source \"%s\" cannot apply",
						get_rel_name(src->source_table), src->name),
				 errdetail("The query would read every row of it, through the WAL."),
				 errhint("Run the query as a role the policies do not apply to (the table's owner, or one with BYPASSRLS).")));
}

/*
 * A new query over an append-only table starts now ('latest') or at the
 * oldest change its slot holds ('earliest').  One over a changelog source
 * starts with the table's rows as they are now, then its changes
 * (table_snapshot.c): whatever it later sees updated or deleted, it has
 * seen inserted.  Resolved at creation, under a lock that keeps other
 * queries' batches from confirming the slot past it until the creation
 * commits (source_hold_start).
 */
static bool
table_query_start(SourceInfo *src, int32 query_id, int64 *start)
{
	source_hold_start(src->source_id);
	if (table_changes_option(src->options))
	{
		int			nattnums;
		AttrNumber *attnums = table_source_attnums(src->options, &nattnums);

		table_check_access(src, GetUserId(), NULL);

		*start = (int64) table_snapshot_write(src->source_table, src->relation, src->nmetadata,
											  attnums, nattnums, query_id);
	}
	else
		*start = (int64) (src->starting_offset == START_LATEST ? GetXLogInsertRecPtr() :
						  source_slot_confirmed(src->slot_name));
	return true;
}

/* The slot goes when the drop commits: nothing is left holding WAL. */
static void
table_dropped(SourceInfo *src)
{
	source_slot_drop_at_commit(src->slot_name);
}

/*
 * Sources whose slot may move to the end of the WAL when this transaction
 * commits (table_query_gone), in TopMemoryContext.
 */
typedef struct PendingAdvance
{
	char		slot_name[NAMEDATALEN];
	int32		source_id;
} PendingAdvance;
static List *advancing = NIL;
static bool advance_callback_registered = false;

/* One slot of advance_at_commit's, in a subtransaction of its own */
static void
advance_one(PendingAdvance *p)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		if (catalog_source_unread(p->source_id) && !source_slot_in_use(p->slot_name))
			source_slot_advance(p->slot_name, p->source_id);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ereport(WARNING,
				(errmsg("streamwin: the replication slot \"%s\" of a source without queries keeps its WAL", p->slot_name),
				 errdetail("Moving it to the end of the WAL failed: %s", e->message),
				 errhint("The next query created on the source, or its drop_source, lets it go.")));
		FreeErrorData(e);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * At commit, still in the transaction: each slot whose source no query
 * reads any more (as this transaction leaves the catalog), that no backend
 * holds (nor this one: a slot it creates is still its own), and that the
 * transaction does not drop; not if it drops the extension.  Releasing
 * WAL is not worth failing the commit for: an error is a warning.
 */
static void
advance_at_commit(XactEvent event, void *arg)
{
	List	   *pending = advancing;
	ListCell   *lc;

	if (pending == NIL)
		return;
	advancing = NIL;			/* whatever happens: an abort forgets them */
	if (event == XACT_EVENT_PRE_COMMIT && MyReplicationSlot == NULL &&
		OidIsValid(get_extension_oid("streamwin", true)))
	{
		/*
		 * The statements' snapshot is gone by now: the catalog as of now,
		 * also in a repeatable-read transaction, whose own snapshot would
		 * miss a query created on the source since.  (A serialization
		 * failure at the commit, which comes after this, leaves the slot
		 * moved all the same: a window this narrows, not closes.)
		 */
		PushActiveSnapshot(GetLatestSnapshot());
		foreach(lc, pending)
		{
			PendingAdvance *p = lfirst(lc);

			if (!source_slot_dropping(p->slot_name))
				advance_one(p);
		}
		PopActiveSnapshot();
	}
	list_free_deep(pending);
}

/*
 * If no query reads the source any more, let its slot move to the end of
 * the WAL, so that nothing holds WAL for queries that are gone (the next
 * query created on the source then starts from there).  When the
 * transaction commits: a slot moved now would stay moved if it rolled
 * back, past where the query it restores stands.  Not while a backend
 * holds the slot: drop_query's transaction holds the query's batch lock,
 * which the exiting worker's last batch may wait for, so waiting for the
 * slot could deadlock; that worker does this itself when it exits.
 */
static void
table_query_gone(SourceInfo *src)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	PendingAdvance *p = palloc0(sizeof(PendingAdvance));

	if (!advance_callback_registered)
	{
		RegisterXactCallback(advance_at_commit, NULL);
		advance_callback_registered = true;
	}
	strlcpy(p->slot_name, src->slot_name, NAMEDATALEN);
	p->source_id = src->source_id;
	advancing = lappend(advancing, p);
	MemoryContextSwitchTo(old);
}

/*
 * A changelog table source's rows are identified by the table's primary
 * key (by name: the source has the table's columns).  NIL: an append-only
 * source, or a table without one.
 */
static List *
table_key_columns(SourceInfo *src)
{
	Relation	rel;
	Oid			pk;
	List	   *names = NIL;

	if (source_change_attno(source_tupdesc(src->relation)) == 0)
		return NIL;
	rel = relation_open(src->source_table, AccessShareLock);
	pk = RelationGetPrimaryKeyIndex(rel);
	if (OidIsValid(pk))
	{
		Relation	index = index_open(pk, AccessShareLock);

		for (int k = 0; k < index->rd_index->indnkeyatts; k++)
		{
			AttrNumber	attno = index->rd_index->indkey.values[k];

			names = lappend(names, makeString(pstrdup(NameStr(TupleDescAttr(RelationGetDescr(rel),
																			  attno - 1)->attname))));
		}
		index_close(index, AccessShareLock);
	}
	relation_close(rel, AccessShareLock);
	return names;
}

/* --- a query's reader ---------------------------------------------------- */

/*
 * The rows of a table source come from the WAL, not through the executor,
 * so the table's SELECT privilege is checked here, for the query's owner.
 */
static void
table_reader_open(SourceReader *rd)
{
	SourceInfo *src = rd->source;

	table_check_access(src, rd->query->owner, rd->query->name);
	rd->private = palloc0(sizeof(TableReader));
	TR(rd)->changelog = source_change_attno(rd->desc) > 0;
	TR(rd)->attnums = table_source_attnums(src->options, &TR(rd)->nattnums);
	rd->rows_are_tuples = true;
	rd->nparts = 1;				/* the table's commit order */
	rd->parts = palloc0(sizeof(PartitionState));
}

static SourcePosition
table_start_position(SourceReader *rd, PartitionState *p, bool query_started)
{
	SourcePosition pos = {0, 0};

	pos.offset = (int64) (XLogRecPtrIsInvalid(rd->qsource->start_lsn) ?
						  source_slot_confirmed(rd->source->slot_name) :
						  rd->qsource->start_lsn);
	return pos;
}

/* Nothing to position: each fetch decodes from the stored LSN. */
static void
table_seek(SourceReader *rd)
{
}

static TablePosition
table_position(const SourcePosition *pos)
{
	TablePosition t = {(XLogRecPtr) pos->offset, pos->index};

	return t;
}

/*
 * The source's catalog row as committed now.  Its slot's name: reset_query
 * gives the source a new slot in place of one PostgreSQL invalidated, and
 * every reader (of any query, in any backend) follows it from its next
 * fetch.  With retained: the oldest LSN any query of this table source may
 * still need, from committed rows: its stored position, or for a query
 * with UNLOGGED state the position of its checkpoint (crash recovery
 * replays from there); a query that has not run yet needs its start.  The
 * slot may be confirmed up to there.
 */
static void
table_catalog_now(SourceReader *rd, XLogRecPtr *retained)
{
	char	   *slot;
	bool		has_retained;

	if (!catalog_table_source_now(rd->source->source_id, &slot, &has_retained, retained))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table source \"%s\" no longer exists", rd->source->name)));
	if (slot != NULL && strcmp(slot, rd->source->slot_name) != 0)
	{
		/* a context kept open holds the old slot */
		table_fetch_release();
		rd->source->slot_name = MemoryContextStrdup(rd->cxt, slot);
	}
}

/*
 * A keyed transform keeps one result row per key of the table's primary
 * key as it was when the query was created: with another key (or none),
 * rows that share the old key would take each other's place, or go with
 * each other's deletion, silently.
 */
static void
table_check_key(SourceReader *rd)
{
	char	   *now = source_key_names(table_key_columns(rd->source));

	if (strcmp(now, rd->query->source_key) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the primary key of table \"%s\" is no longer (%s), by which query \"%s\" keeps its rows",
						get_rel_name(rd->source->source_table), rd->query->source_key, rd->query->name),
				 *now ? errdetail("It is (%s) now.", now) : errdetail("It has none now."),
				 errhint("Give the table that primary key again and reset the query (streamwin.reset_query starts it from the table's rows as they are then), or create the query again over the key the table has.")));
}

/*
 * The next batch: from the stored position, up to max_records_per_batch
 * rows.
 *
 * The decoding context may stay open for the next batch (and the slot
 * acquired) in run_available and in a worker: after a full batch (a
 * backlog) it goes on at once.  Other workers of the source wait for the
 * slot meanwhile, for a bounded number of batches in a row
 * (table_fetch.c), and then each reads its part of the backlog on its own
 * kept context: every worker decodes the backlog about once, where each
 * batch of each worker would otherwise decode it from the slot's restart
 * point.  (drop_query does not wait for a slot a worker holds, see
 * table_query_gone; the worker lets it go when it exits.)  The rest of a
 * transaction larger than the batch may be kept for the next batch too:
 * that needs no slot.
 */
static int
table_fetch_rows(SourceReader *rd, int timeout_ms, int linger_ms, SourceRow **rows)
{
	TableReader *tr = TR(rd);
	PartitionState *p = &rd->parts[0];
	TableFetch	f;
	XLogRecPtr	retained = InvalidXLogRecPtr;
	bool		may_confirm;

	/*
	 * The slot is confirmed from committed positions only.  A transaction
	 * that wrote already (an earlier batch of run_available, or of a user's
	 * transaction) sees its own positions and checkpoints, which its rollback
	 * takes back: it leaves the slot as it is.
	 */
	/* at every batch: a privilege revoked, or a policy added, since it began */
	table_check_access(rd->source, rd->query->owner, rd->query->name);
	if (rd->query->source_key != NULL)
		table_check_key(rd);
	may_confirm = !TransactionIdIsValid(GetTopTransactionIdIfAny()) &&
		source_confirm_begin(rd->source->source_id);
	PG_TRY();
	{
		/* a query whose creation has not committed may need the slot as is */
		table_catalog_now(rd, may_confirm ? &retained : NULL);
		table_fetch(rd->source->slot_name, rd->source->source_table, rd->query->query_id,
					rd->qsource->snapshot_xid, rd->qsource->start_lsn, rd->desc, rd->source->nmetadata, tr->attnums,
					tr->nattnums, table_position(&p->next), NULL,
					source_max_records(rd->source),
					retained, rd->fetch_again || rd->in_worker, &f);
	}
	PG_FINALLY();
	{
		if (may_confirm)
			source_confirm_end(rd->source->source_id);
	}
	PG_END_TRY();
	p->next.offset = (int64) f.end.lsn;
	p->next.index = f.end.index;
	tr->at_end = f.at_end;
	tr->end_of_wal = f.end_of_wal;
	tr->ignored[0] = f.ignored_updates;
	tr->ignored[1] = f.ignored_deletes;
	tr->ignored[2] = f.ignored_truncates;
	memcpy(tr->changes, f.changes, sizeof(tr->changes));
	*rows = f.rows;
	return f.nrows;
}

/* Exactly the rows of a recorded batch: up to its end position. */
static int
table_replay(SourceReader *rd, const SourcePosition *targets, SourceRow **rows)
{
	PartitionState *p = &rd->parts[0];
	TablePosition upto = table_position(&targets[0]);
	TableFetch	f;

	table_check_access(rd->source, rd->query->owner, rd->query->name);
	table_catalog_now(rd, NULL);
	table_fetch(rd->source->slot_name, rd->source->source_table, rd->query->query_id,
				rd->qsource->snapshot_xid, rd->qsource->start_lsn, rd->desc, rd->source->nmetadata, TR(rd)->attnums,
				TR(rd)->nattnums, table_position(&p->next), &upto, 0, InvalidXLogRecPtr, false, &f);
	p->next.offset = (int64) f.end.lsn;
	p->next.index = f.end.index;
	*rows = f.rows;
	return f.nrows;
}

static bool
table_at_end(SourceReader *rd, PartitionState *p)
{
	return TR(rd)->at_end;
}

/* The lag of a table source is in bytes of WAL. */
static int64
table_end_offset(SourceReader *rd, PartitionState *p)
{
	return XLogRecPtrIsInvalid(TR(rd)->end_of_wal) ? -1 : (int64) TR(rd)->end_of_wal;
}

/*
 * Everything committed now: up to the end of the WAL a fetch can read (an
 * idle server's insert position can be past a page header that no record
 * follows, which no fetch would reach).
 */
static void
table_end_positions(SourceReader *rd, SourcePosition *targets)
{
	targets[0].offset = (int64) table_wal_inserted_end();
	targets[0].index = 0;
}

/*
 * {"lsn": "0/1A2B3C8", "index": 0}, plus what the last fetch read: a
 * changelog source's inserts, updates and deletes, or the changes an
 * append-only source does not deliver (UPDATE, DELETE, TRUNCATE).
 */
static void
table_positions_json(SourceReader *rd, StringInfo buf)
{
	TableReader *tr = TR(rd);
	XLogRecPtr	lsn = (XLogRecPtr) rd->parts[0].next.offset;

	appendStringInfo(buf, "{\"lsn\": \"%X/%X\", \"index\": " INT64_FORMAT,
					 LSN_FORMAT_ARGS(lsn), rd->parts[0].next.index);
	if (tr->changelog)
		appendStringInfo(buf, ", \"changes\": {\"inserts\": " INT64_FORMAT
						 ", \"updates\": " INT64_FORMAT ", \"deletes\": " INT64_FORMAT "}",
						 tr->changes[0], tr->changes[1], tr->changes[2]);
	else if (tr->ignored[0] + tr->ignored[1] + tr->ignored[2] > 0)
		appendStringInfo(buf, ", \"ignored\": {\"updates\": " INT64_FORMAT
						 ", \"deletes\": " INT64_FORMAT ", \"truncates\": " INT64_FORMAT "}",
						 tr->ignored[0], tr->ignored[1], tr->ignored[2]);
	appendStringInfoChar(buf, '}');
}

static void
table_positions_parse(SourceReader *rd, Jsonb *json, SourcePosition *targets)
{
	char	   *lsn = jsonb_get_text(json, "lsn");
	char	   *index = jsonb_get_text(json, "index");

	if (lsn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("progress record without the position of its table source")));
	targets[0].offset = (int64) DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(lsn)));
	targets[0].index = index ? strtoll(index, NULL, 10) : 0;
}

/*
 * reset_query, before anything is written: a slot that PostgreSQL
 * invalidated can never be read again, so the source gets a new one,
 * whose oldest change table_reset then calls 'earliest'.
 */
static void
table_prepare_reset(SourceInfo *src)
{
	source_slot_replace_invalidated(src->source_id, src->name, src->slot_name);
}

/*
 * reset_query: 'earliest' is the oldest change its slot holds, 'latest'
 * the end of the WAL, or {"lsn": "0/16B3748"} in between.  A query over a
 * changelog source, whose result reset_query empties, starts again from
 * the table's rows as they are now, then its changes, whichever of
 * 'earliest' and 'latest' is asked for: from any other point it would
 * retract rows it never saw.  Also the query's start, should a crash empty
 * its state before the next checkpoint.
 */
static void
table_reset(SourceReader *rd, const char *start, Jsonb *explicit)
{
	XLogRecPtr	oldest;
	XLogRecPtr	end = GetXLogInsertRecPtr();
	XLogRecPtr	lsn;
	/* until this commits, no batch may confirm the slot past what we pick */
	source_hold_start(rd->source->source_id);

	/* the slot as prepare_reset left it (a reader here may not know) */
	table_catalog_now(rd, NULL);
	oldest = source_slot_confirmed(rd->source->slot_name);
	if (table_changes_option(rd->source->options))
	{
		if (explicit != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("query \"%s\" reads changelog source \"%s\", which cannot start at an LSN",
							rd->query->name, rd->source->name),
					 errdetail("A query over a changelog starts from the table's rows as they are when it starts, then the changes after them."),
					 errhint("Use 'latest' (or 'earliest', the same): the query starts again from the table's rows now.")));
		lsn = table_snapshot_write(rd->source->source_table, rd->source->relation,
								   rd->source->nmetadata, TR(rd)->attnums, TR(rd)->nattnums,
								   rd->query->query_id);
	}
	else if (explicit != NULL)
	{
		char	   *given = jsonb_get_text(explicit, "lsn");

		/* {"lsn": ...} and nothing else: another key would be ignored */
		if (given == NULL || JB_ROOT_COUNT(explicit) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid starting_offsets \"%s\" for a table source", start),
					 errhint("Use 'earliest', 'latest' or '{\"lsn\": \"0/16B3748\"}'.")));
		lsn = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(given)));
		if (lsn < oldest || lsn > end)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("LSN %X/%X is not held by table source \"%s\"", LSN_FORMAT_ARGS(lsn),
							rd->source->name),
					 errdetail("The source holds the changes from %X/%X to %X/%X.",
							   LSN_FORMAT_ARGS(oldest), LSN_FORMAT_ARGS(end))));
	}
	else
		lsn = strcmp(start, "latest") == 0 ? end : oldest;
	rd->parts[0].next.offset = (int64) lsn;
	rd->parts[0].next.index = 0;
	rd->parts[0].has_position = true;
	rd->parts[0].has_max_event_time = false;

	catalog_set_query_start(rd->query->query_id, rd->source_index, lsn);
	rd->qsource->start_lsn = lsn;
	rd->qsource->snapshot_xid = GetTopTransactionId();
}

/*
 * A table source moves on through other tables' WAL even when its own
 * table gets no rows.  Worth storing now and then (after a megabyte of
 * WAL, or ten seconds), so that the slot can let WAL go and the next
 * batches need not decode it again; not every time, since the store
 * itself writes WAL.
 */
static bool
table_moved_without_rows(SourceReader *rd, const SourcePosition *before)
{
	TableReader *tr = TR(rd);
	int64		moved = rd->parts[0].next.offset - before[0].offset;
	TimestampTz now = GetCurrentTimestamp();

	if (moved <= 0 ||
		(moved < 1024 * 1024 && now - tr->idle_stored_at < 10 * USECS_PER_SEC))
		return false;
	tr->idle_stored_at = now;
	return true;
}

/* A row as text, e.g. (1,"a b",2026-11-30 10:00:00+00). */
static bytea *
table_row_text(SourceReader *rd, const SourceRow *row)
{
	Datum	   *values = palloc(sizeof(Datum) * Max(rd->desc->natts, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(rd->desc->natts, 1));
	HeapTuple	tuple;
	char	   *record_text;

	source_row_deform(rd->desc, source_change_attno(rd->desc), row, values, nulls);
	tuple = heap_form_tuple(rd->desc, values, nulls);
	record_text = OidOutputFunctionCall(F_RECORD_OUT, HeapTupleGetDatum(tuple));
	return (bytea *) cstring_to_text(record_text);
}

static void
table_release(SourceReader *rd)
{
	table_fetch_release();
}

/*
 * The next fetch decodes from the slot's restart point, unless this one
 * kept its decoding context open for it (a backlog read at once) or left
 * the rest of a transaction larger than the batch in the spool.
 */
static bool
table_fetch_rereads(SourceReader *rd)
{
	return !table_fetch_resumes(rd->source->slot_name, rd->source->source_table,
								rd->query->query_id, table_position(&rd->parts[0].next),
								source_max_records(rd->source));
}

static void
table_reader_close(SourceReader *rd)
{
}

const SourceOps table_source_ops = {
	.kind = "table",
	.reset_hint = "Use 'earliest' (the oldest change the source holds), 'latest' (from now on) "
	"or the LSN to start at, as '{\"lsn\": \"0/16B3748\"}'.",
	.changelog_reset_hint = "Use 'latest' (or 'earliest', the same): over a changelog the query starts "
	"again from the table's rows as they are at the reset, then its changes.",
	.fetch_rereads = table_fetch_rereads,
	.check_query = table_check_query,
	.query_start = table_query_start,
	.key_columns = table_key_columns,
	.dropped = table_dropped,
	.query_gone = table_query_gone,
	.open = table_reader_open,
	.start_position = table_start_position,
	.seek = table_seek,
	.fetch = table_fetch_rows,
	.replay = table_replay,
	.at_end = table_at_end,
	.end_offset = table_end_offset,
	.end_positions = table_end_positions,
	.positions_json = table_positions_json,
	.positions_parse = table_positions_parse,
	.prepare_reset = table_prepare_reset,
	.reset = table_reset,
	.moved_without_rows = table_moved_without_rows,
	.row_text = table_row_text,
	.release = table_release,
	.close = table_reader_close,
};

/* --- create_table_source ------------------------------------------------- */

/*
 * A table source's "metadata" columns come after the table's: the commit
 * time of the row's transaction (timestamp: timestamptz), its commit LSN
 * (offset: pg_lsn) and the row's number within it (partition: integer).
 * A row has no key or headers.
 */
static void
add_table_metadata_columns(const SourceInfo *src, StringInfo columns, List **types,
						   List **typmods, List **names)
{
	for (int m = 0; m < src->nmetadata; m++)
	{
		const char *column = src->metadata_columns[m];
		Oid			type;
		ListCell   *lc;

		switch (src->metadata_kinds[m])
		{
			case SOURCE_META_TIMESTAMP:
				type = TIMESTAMPTZOID;
				break;
			case SOURCE_META_OFFSET:
				type = LSNOID;
				break;
			case SOURCE_META_PARTITION:
				type = INT4OID;
				break;
			default:
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("a table source has no message %s for column \"%s\"",
								src->metadata_kinds[m] == SOURCE_META_KEY ? "key" : "headers", column),
						 errhint("A table source's \"metadata\" may name the commit \"timestamp\", the commit LSN (\"offset\") and the row's number in its transaction (\"partition\").")));
		}
		foreach(lc, *names)
		{
			if (strcmp(strVal(lfirst(lc)), column) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("option \"metadata\" names column \"%s\", which the table has already", column),
						 errhint("Choose another name for the metadata column.")));
		}
		*types = lappend_oid(*types, type);
		*typmods = lappend_int(*typmods, -1);
		*names = lappend(*names, makeString(pstrdup(column)));
		appendStringInfo(columns, ", %s %s", quote_identifier(column), format_type_be(type));
	}
}

/*
 * Option "changes": "inserts" (the default: an append-only table, whose
 * updates and deletes the source counts and ignores) or "all" (a
 * changelog: inserts, updates and deletes, see source.h).  Returns
 * whether it is "all".
 */
static bool
table_changes_option(Jsonb *options)
{
	char	   *changes = jsonb_get_text(options, "changes");

	if (changes == NULL || strcmp(changes, "inserts") == 0)
		return false;
	if (strcmp(changes, "all") == 0)
		return true;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for option \"changes\": \"%s\"", changes),
			 errhint("Use \"all\" for a table whose rows are updated and deleted, or \"inserts\" for an append-only table.")));
	return false;
}

/*
 * A changelog source retracts the old version of each updated or deleted
 * row, which PostgreSQL writes whole into the WAL only for a table with
 * REPLICA IDENTITY FULL.
 */
static void
check_replica_identity_full(Oid table)
{
	Relation	rel = relation_open(table, AccessShareLock);
	char		identity = rel->rd_rel->relreplident;
	char	   *qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													   RelationGetRelationName(rel));

	relation_close(rel, AccessShareLock);
	if (identity != REPLICA_IDENTITY_FULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s does not have REPLICA IDENTITY FULL", qualified),
				 errdetail("A table source with \"changes\": \"all\" retracts the old version of each updated or deleted row, "
						   "which PostgreSQL writes whole into the WAL only for such a table."),
				 errhint("Run ALTER TABLE %s REPLICA IDENTITY FULL first.", qualified)));
}

/*
 * streamwin.create_table_source(name, relation, options): the rows inserted
 * into a table, through a logical replication slot of the source's own.
 * The source's columns are the table's, by name and type, as of now.
 */
Datum
streamwin_create_table_source(PG_FUNCTION_ARGS)
{
	static const char *const valid[] = {"starting_offsets", "max_records_per_batch", "metadata",
	"timezone", "changes", NULL};
	char	   *name;
	Oid			table;
	Jsonb	   *options;
	SourceInfo	tmp;
	Relation	rel;
	TupleDesc	desc;
	List	   *types = NIL;
	List	   *typmods = NIL;
	List	   *collations = NIL;
	List	   *names = NIL;
	StringInfoData columns;
	StringInfoData attnums;
	char	   *slot;
	bool		changelog;

	for (int i = 0; i < 3; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("arguments of create_table_source must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	table = PG_GETARG_OID(1);
	options = PG_GETARG_JSONB_P(2);
	/*
	 * What a changelog source records of the table (table_source_attnums) is
	 * recorded again below: options copied from another source's
	 * streamwin.sources row are fine.
	 */
	options = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(options),
												 CStringGetTextDatum("table_attnums")));

	/* first: a role that may not create the slot learns it first */
	source_slot_check_privilege(name, false);
	table_source_check_relation(table);
	jsonb_check_keys(options, valid, "table source");
	parse_source_options(&tmp, options);
	changelog = table_changes_option(options);
	if (changelog && jsonb_get_text(options, "starting_offsets") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"starting_offsets\" is not for a table source with \"changes\": \"all\""),
				 errdetail("Each query of a changelog starts from the table's rows as they are when it is created, "
						   "then reads the changes committed after: it retracts only rows it has seen."),
				 errhint("Leave starting_offsets out, or use \"changes\": \"inserts\" to read the inserted rows from a position.")));
	if (changelog)
		check_replica_identity_full(table);

	/* the table's columns, as the source's, and which attribute each is */
	initStringInfo(&columns);
	initStringInfo(&attnums);
	rel = relation_open(table, AccessShareLock);
	desc = RelationGetDescr(rel);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (att->attisdropped)
			continue;
		types = lappend_oid(types, att->atttypid);
		typmods = lappend_int(typmods, att->atttypmod);
		collations = lappend_oid(collations, att->attcollation);
		names = lappend(names, makeString(pstrdup(NameStr(att->attname))));
		appendStringInfo(&columns, "%s%s %s", columns.len ? ", " : "",
						 quote_identifier(NameStr(att->attname)),
						 format_type_with_typemod(att->atttypid, att->atttypmod));
		if (OidIsValid(att->attcollation) && att->attcollation != get_typcollation(att->atttypid))
			appendStringInfo(&columns, " COLLATE %s", generate_collation_name(att->attcollation));
		appendStringInfo(&attnums, "%s%d", attnums.len ? ", " : "", att->attnum);
	}
	relation_close(rel, AccessShareLock);
	add_table_metadata_columns(&tmp, &columns, &types, &typmods, &names);
	while (list_length(collations) < list_length(types))
		collations = lappend_oid(collations, InvalidOid);
	if (types == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("table \"%s\" has no columns", get_rel_name(table))));

	/* which attribute each column is: a column renamed or dropped later is told apart */
	options = DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(options),
												 DirectFunctionCall1(jsonb_in,
																	 CStringGetDatum(psprintf("{\"table_attnums\": [%s]}",
																							  attnums.data)))));

	SPI_connect();
	source_check_new_name(name);
	/* before anything is written: PostgreSQL requires it of slot creation */
	slot = source_slot_new(name, false);
	source_register(name, "table", NULL, NULL, table, slot, "row", columns.data, options,
					types, typmods, collations, names, changelog);
	SPI_finish();
	PG_RETURN_VOID();
}
