/*-------------------------------------------------------------------------
 *
 * table_snapshot.c
 *	  The rows a changelog table source's table holds when a query starts,
 *	  written into the WAL as the first changes the query reads.
 *
 * A query over a changelog source must see every row it will later see
 * updated or deleted: a change retracts the row's old version, so a query
 * that never saw the row's insert would retract what it never added
 * (negative counts, sums of rows that are not there).  Logical decoding
 * only delivers changes, so the rows already in the table are delivered
 * another way, and exactly at the point of the stream where they are the
 * table's content:
 *
 *	1. the table is locked in SHARE mode, which waits for every transaction
 *	   writing it to end and keeps new writers out until this transaction
 *	   ends;
 *	2. the WAL insert position now is the query's start: every change of
 *	   the table committed before it, none after it until this transaction
 *	   commits;
 *	3. the table's rows, read with a snapshot taken after the lock (all of
 *	   those changes), go into the WAL as transactional logical messages of
 *	   this transaction, one per row, tagged with the query's id, already in
 *	   the source's row type.
 *
 * Decoding from the start then delivers this transaction first (at its
 * commit, with the messages as inserts, see table_plugin.c), then the
 * changes committed after it: the table's content followed by its changes,
 * with no change missed or seen twice.  Replays and crash recovery read the
 * same messages again from the slot, which holds the query's start until a
 * checkpoint of the query is past it, like any other change.  Other
 * queries of the source skip messages that are not theirs.
 *
 * The cost is the table written once more into the WAL, and writers of the
 * table waiting for the creating transaction, as for CREATE INDEX.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "replication/message.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "table_source_int.h"

/*
 * The snapshot is the table as other transactions committed it: changes of
 * this transaction itself would be delivered twice, as its changes and in
 * the snapshot, or retracted before they are added.  A transaction that
 * wrote the table holds ROW EXCLUSIVE on it; one that truncated or rewrote
 * it gave it a new relfilenode.
 */
/* Whether this transaction gave the table a new relfilenode (TRUNCATE, a rewrite) */
static bool
rewritten_here(Oid table)
{
	Relation	rel = RelationIdGetRelation(table);
	bool		rewritten;

	if (!RelationIsValid(rel))
		return false;
	rewritten = rel->rd_newRelfilenodeSubid != InvalidSubTransactionId ||
		rel->rd_firstRelfilenodeSubid != InvalidSubTransactionId;
	RelationClose(rel);
	return rewritten;
}

static void
refuse_own_writes(Oid table)
{
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, table);
	if (LockHeldByMe(&tag, RowExclusiveLock) || rewritten_here(table))
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("a query over changelog table \"%s\" cannot start in a transaction that wrote the table",
						get_rel_name(table)),
				 errdetail("The query starts from the table's committed rows, then the changes committed after them."),
				 errhint("Commit the changes to the table first, then create or reset the query in a new transaction.")));
}

XLogRecPtr
table_snapshot_write(Oid table, Oid source_relation, int nmetadata, const AttrNumber *attnums,
					 int nattnums, int32 query_id)
{
	Relation	rel;
	Relation	source;
	TupleDesc	desc;
	AttrNumber	change_attno;
	XLogRecPtr	start;
	Snapshot	snapshot;
	int		   *map;
	Datum	   *values;
	bool	   *nulls;
	TupleTableSlot *slot;
	TableScanDesc scan;
	MemoryContext row_cxt;
	StringInfoData message;

	refuse_own_writes(table);
	rel = table_open(table, ShareLock);
	start = GetXLogInsertRecPtr();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	source = relation_open(source_relation, AccessShareLock);
	desc = RelationGetDescr(source);
	change_attno = source_change_attno(desc);
	Assert(change_attno > 0);
	map = palloc(sizeof(int) * Max(desc->natts, 1));
	table_column_map(RelationGetDescr(rel), desc, desc->natts - nmetadata - 1, table, map);
	table_changelog_columns_check(RelationGetDescr(rel), desc, map, nmetadata, attnums, nattnums,
								  table);
	values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	nulls = palloc(sizeof(bool) * Max(desc->natts, 1));
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, snapshot, 0, NULL);
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "streamwin snapshot row",
									ALLOCSET_DEFAULT_SIZES);
	initStringInfo(&message);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		MemoryContext old = MemoryContextSwitchTo(row_cxt);
		SnapshotMessageHeader header = {query_id};
		HeapTuple	row;

		slot_getallattrs(slot);
		for (int i = 0; i < desc->natts; i++)
		{
			int			a = map[i];

			nulls[i] = a < 0 || slot->tts_isnull[a];
			if (nulls[i])
				continue;
			values[i] = slot->tts_values[a];
			/* the message must hold the value, not a pointer to TOAST */
			if (TupleDescAttr(desc, i)->attlen == -1 &&
				VARATT_IS_EXTERNAL(DatumGetPointer(values[i])))
				values[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
																  DatumGetPointer(values[i])));
		}
		values[change_attno - 1] = Int16GetDatum(1);
		nulls[change_attno - 1] = false;
		row = heap_form_tuple(desc, values, nulls);

		resetStringInfo(&message);
		appendBinaryStringInfo(&message, (const char *) &header, sizeof(header));
		appendBinaryStringInfo(&message, (const char *) row->t_data, row->t_len);
		LogLogicalMessage(TABLE_SNAPSHOT_PREFIX, message.data, message.len, true);
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
		CHECK_FOR_INTERRUPTS();
	}
	table_endscan(scan);
	/* the end: what the transaction writes under the tag from here on is not ours */
	{
		SnapshotMessageHeader header = {query_id};

		LogLogicalMessage(TABLE_SNAPSHOT_END_PREFIX, (const char *) &header, sizeof(header), true);
	}
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	MemoryContextDelete(row_cxt);
	relation_close(source, AccessShareLock);
	/* the SHARE lock stays until the transaction ends: see above */
	table_close(rel, NoLock);
	return start;
}
