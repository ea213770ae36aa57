/*-------------------------------------------------------------------------
 *
 * result_insert.c
 *	  Rows new to a result table, written with the table AM's multi-insert.
 *
 * A store knows which groups are new to the result (see batch.c), and a
 * stream-stream join's new rows are new to its join tables (join.c).  An
 * INSERT ... SELECT writes each of them with a heap insert of its own: a
 * WAL record, a buffer lookup and lock per row.  This receiver takes the
 * rows of the SELECT alone and writes them as COPY FROM does: up to a page's
 * worth at a time with table_multi_insert() (one WAL record and one lock
 * per page), then each row's index entries, checking unique and exclusion
 * constraints as the INSERT would.
 *
 * It does only what a plain INSERT into a plain table does, so it is used
 * only where that is all an INSERT would do (result_insert_possible()):
 * no triggers, rules, row security or partitions, and no column the SELECT
 * leaves to a default.  A table that has any is written by the INSERT.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/rel.h"

#include "result_insert.h"

/* A flush writes at most this many rows, or this many bytes (as COPY) */
#define RESULT_INSERT_MAX_ROWS 1000
#define RESULT_INSERT_MAX_BYTES 65535

typedef struct ResultInserter
{
	DestReceiver pub;
	Oid			relid;
	EState	   *estate;
	ResultRelInfo *rri;			/* the result table, its indexes open */
	int			natts;			/* of the table */
	int		   *source;			/* per attribute of the table: the column
								 * of the rows it takes, or -1: NULL */
	TupleDesc	desc;			/* the table's, copied: slots need not pin it */
	TupleTableSlot *slots[RESULT_INSERT_MAX_ROWS];
	int			nbuffered;
	Size		buffered_bytes;
	uint64		written;
	Oid			as_role;		/* write as this role, or InvalidOid */
} ResultInserter;

/*
 * The output columns of plan, a SELECT; NULL if it is not one statement.
 * The statement is checked first, locking the tables it reads, and parsed
 * again if a change of one of them (an ALTER TABLE ... TYPE of a joined
 * table's column) has invalidated it, as running it would: its old
 * description may name other types than it now gives.  Only parsed: its
 * plan is made where it runs, with the planner settings it runs with.
 */
static TupleDesc
plan_result_desc(SPIPlanPtr plan)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	CachedPlanSource *ps;

	if (list_length(sources) != 1)
		return NULL;
	ps = linitial(sources);
	(void) CachedPlanGetTargetList(ps, NULL);
	return ps->resultDesc;
}

/* The column of desc named as attribute att, or -1 */
static int
column_named(TupleDesc desc, Form_pg_attribute att)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute c = TupleDescAttr(desc, i);

		if (!c->attisdropped && strcmp(NameStr(c->attname), NameStr(att->attname)) == 0)
			return i;
	}
	return -1;
}

/* See result_insert.h */
bool
result_insert_plain(Relation rel, TupleDesc desc)
{
	TupleDesc	td = RelationGetDescr(rel);
	int			mapped = 0;

	/*
	 * A foreign key, and a deferrable unique or exclusion constraint (its
	 * recheck at commit), are triggers too.
	 */
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relispartition ||
		rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity ||
		rel->trigdesc != NULL || rel->rd_tableam->multi_insert == NULL)
		return false;
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);
		int			c;

		if (att->attisdropped)
			continue;
		/* the INSERT would compute it, or refuse or override a value */
		if (att->attgenerated || att->attidentity)
			return false;
		c = column_named(desc, att);
		if (c < 0)
		{
			/*
			 * the INSERT would fill it in: with its default, or with its
			 * domain's default, checked against the domain's constraints
			 */
			if (att->atthasdef || get_typtype(att->atttypid) == TYPTYPE_DOMAIN)
				return false;
			continue;
		}
		/*
		 * the INSERT would coerce it (and so check a domain's constraints);
		 * a value of the column's own type, a domain's too, it stores as
		 * it is
		 */
		if (TupleDescAttr(desc, c)->atttypid != att->atttypid ||
			(att->atttypmod >= 0 && TupleDescAttr(desc, c)->atttypmod != att->atttypmod))
			return false;
		mapped++;
	}
	return mapped == desc->natts;
}

bool
result_insert_possible(Oid relid, SPIPlanPtr plan)
{
	TupleDesc	desc = plan_result_desc(plan);
	Relation	rel;
	bool		possible;

	if (desc == NULL)
		return false;
	/* a table dropped since: the INSERT says so as it says it */
	rel = try_table_open(relid, RowExclusiveLock);
	if (rel == NULL)
		return false;
	possible = result_insert_plain(rel, desc);
	table_close(rel, NoLock);
	return possible;
}

/*
 * Set up as the executor sets up an INSERT's target, privileges checked as
 * for the INSERT: the user running the statement needs INSERT on the
 * columns it writes.
 */
static void
inserter_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	ResultInserter *ri = (ResultInserter *) self;
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	Relation	rel;
	TupleDesc	td;

	LockRelationOid(ri->relid, RowExclusiveLock);
	rte->rtekind = RTE_RELATION;
	rte->relid = ri->relid;
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = ACL_INSERT;
	rel = table_open(ri->relid, NoLock);
	td = RelationGetDescr(rel);

	/*
	 * The rows are the ones result_insert_possible() judged by: a change of
	 * their types since would have invalidated the plan, which it checks.
	 * Copied as they come, values of another type would be read as the
	 * column's.
	 */
	if (!result_insert_plain(rel, typeinfo))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the rows for table \"%s\" no longer match its columns",
						RelationGetRelationName(rel)),
				 errdetail("A table or view the query reads has changed since the batch began.")));
	ri->natts = td->natts;
	ri->source = palloc(sizeof(int) * td->natts);
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		ri->source[a] = att->attisdropped ? -1 : column_named(typeinfo, att);
		if (ri->source[a] >= 0)
			rte->insertedCols = bms_add_member(rte->insertedCols,
											   att->attnum - FirstLowInvalidHeapAttributeNumber);
	}
	/*
	 * The slots of the rows buffered for a flush, up to a thousand per
	 * statement, are made with a copy of the table's descriptor: one of the
	 * relation cache's would be pinned and unpinned with the resource owner
	 * for each, as much again as the slot costs.
	 */
	ri->desc = CreateTupleDescCopy(td);
	table_close(rel, NoLock);
	ExecCheckRTPerms(list_make1(rte), true);

	ri->estate = CreateExecutorState();
	ExecInitRangeTable(ri->estate, list_make1(rte));
	ri->rri = makeNode(ResultRelInfo);
	ExecInitResultRelation(ri->estate, ri->rri, 1);
	CheckValidResultRel(ri->rri, CMD_INSERT);
	ExecOpenIndices(ri->rri, false);
	ri->estate->es_output_cid = GetCurrentCommandId(true);
}

static void inserter_write(ResultInserter *ri);

/*
 * Write the buffered rows, then their index entries; as_role, if set, with
 * the restrictions of a security-restricted operation, as REFRESH
 * MATERIALIZED VIEW runs its view's owner's code: an index on an
 * expression runs its functions, and a table's owner may make one.
 */
static void
inserter_flush(ResultInserter *ri)
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	if (ri->nbuffered == 0)
		return;
	if (!OidIsValid(ri->as_role))
	{
		inserter_write(ri);
		return;
	}
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(ri->as_role,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	PG_TRY();
	{
		inserter_write(ri);
	}
	PG_FINALLY();
	{
		AtEOXact_GUC(false, save_nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
}

static void
inserter_write(ResultInserter *ri)
{
	EState	   *estate = ri->estate;
	ResultRelInfo *rri = ri->rri;
	MemoryContext old;

	old = MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
	table_multi_insert(rri->ri_RelationDesc, ri->slots, ri->nbuffered,
					   estate->es_output_cid, 0, NULL);
	MemoryContextSwitchTo(old);
	ResetPerTupleExprContext(estate);
	for (int i = 0; i < ri->nbuffered; i++)
	{
		if (rri->ri_NumIndices > 0)
		{
			List	   *recheck = ExecInsertIndexTuples(rri, ri->slots[i], estate,
														false, false, NULL, NIL);

			/* only deferrable constraints ask for a recheck: none here */
			Assert(recheck == NIL);
			list_free(recheck);
		}
		ResetPerTupleExprContext(estate);
	}
	ri->written += ri->nbuffered;
	ri->nbuffered = 0;
	ri->buffered_bytes = 0;
}

static bool
inserter_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ResultInserter *ri = (ResultInserter *) self;
	Relation	rel = ri->rri->ri_RelationDesc;
	TupleTableSlot *row;

	if (ri->slots[ri->nbuffered] == NULL)
	{
		ri->slots[ri->nbuffered] = MakeTupleTableSlot(ri->desc, table_slot_callbacks(rel));
		ri->estate->es_tupleTable = lappend(ri->estate->es_tupleTable, ri->slots[ri->nbuffered]);
	}
	row = ri->slots[ri->nbuffered];
	ExecClearTuple(row);
	slot_getallattrs(slot);
	for (int a = 0; a < ri->natts; a++)
	{
		int			c = ri->source[a];

		row->tts_values[a] = c >= 0 ? slot->tts_values[c] : (Datum) 0;
		row->tts_isnull[a] = c >= 0 ? slot->tts_isnull[c] : true;
	}
	ExecStoreVirtualTuple(row);
	/* the row's values are the executor's until it asks for the next */
	ExecMaterializeSlot(row);
	if (rel->rd_att->constr != NULL)
		ExecConstraints(ri->rri, row, ri->estate);
	ri->buffered_bytes += ExecFetchSlotHeapTuple(row, false, NULL)->t_len;
	if (++ri->nbuffered == RESULT_INSERT_MAX_ROWS ||
		ri->buffered_bytes >= RESULT_INSERT_MAX_BYTES)
		inserter_flush(ri);
	return true;
}

static void
inserter_shutdown(DestReceiver *self)
{
	ResultInserter *ri = (ResultInserter *) self;

	inserter_flush(ri);
	elog(DEBUG1, "streamwin: " UINT64_FORMAT " rows inserted into \"%s\" many to a page",
		 ri->written, RelationGetRelationName(ri->rri->ri_RelationDesc));
	ExecResetTupleTable(ri->estate->es_tupleTable, false);
	ExecCloseResultRelations(ri->estate);
	ExecCloseRangeTableRelations(ri->estate);
	FreeExecutorState(ri->estate);
	ri->estate = NULL;
	memset(ri->slots, 0, sizeof(ri->slots));
	/* the statements that follow see the rows */
	CommandCounterIncrement();
}

static void
inserter_destroy(DestReceiver *self)
{
	pfree(self);
}

DestReceiver *
result_insert_receiver(Oid relid)
{
	return result_insert_receiver_as(relid, InvalidOid);
}

DestReceiver *
result_insert_receiver_as(Oid relid, Oid role)
{
	ResultInserter *ri = palloc0(sizeof(ResultInserter));

	ri->as_role = role;
	ri->pub.receiveSlot = inserter_receive;
	ri->pub.rStartup = inserter_startup;
	ri->pub.rShutdown = inserter_shutdown;
	ri->pub.rDestroy = inserter_destroy;
	ri->pub.mydest = DestNone;
	ri->relid = relid;
	return &ri->pub;
}
