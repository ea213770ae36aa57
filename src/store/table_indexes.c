/*-------------------------------------------------------------------------
 *
 * table_indexes.c
 *	  The index entries of rows a store writes by location (see
 *	  table_indexes.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "utils/rel.h"

#include "table_indexes.h"

struct TableIndexes
{
	Relation	rel;
	ResultRelInfo *rri;			/* the table, its indexes open */
	EState	   *estate;			/* for expression and partial indexes */
};

TableIndexes *
table_indexes_open(Relation rel)
{
	TableIndexes *ti;

	if (!RelationGetForm(rel)->relhasindex)
		return NULL;
	ti = palloc0(sizeof(TableIndexes));
	ti->rel = rel;
	ti->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(ti->rri, rel, 1, NULL, 0);
	ExecOpenIndices(ti->rri, false);
	ti->estate = CreateExecutorState();
	return ti;
}

void
table_indexes_insert(TableIndexes *ti, TupleTableSlot *slot)
{
	ResultRelInfo *rri = ti->rri;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	GetPerTupleExprContext(ti->estate)->ecxt_scantuple = slot;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *info = rri->ri_IndexRelationInfo[i];

		/*
		 * As the executor inserts: not into an index being built (REINDEX
		 * CONCURRENTLY's new one, whose build takes the rows), nor a row
		 * outside a partial index's predicate.
		 */
		if (!info->ii_ReadyForInserts)
			continue;
		if (info->ii_Predicate != NIL)
		{
			if (info->ii_PredicateState == NULL)
				info->ii_PredicateState = ExecPrepareQual(info->ii_Predicate, ti->estate);
			if (!ExecQual(info->ii_PredicateState, GetPerTupleExprContext(ti->estate)))
				continue;
		}
		FormIndexDatum(info, slot, ti->estate, values, isnull);
		(void) index_insert(rri->ri_IndexRelationDescs[i], values, isnull, &slot->tts_tid,
							ti->rel, UNIQUE_CHECK_NO, false, info);
	}
	ResetPerTupleExprContext(ti->estate);
}

void
table_indexes_close(TableIndexes *ti)
{
	if (ti == NULL)
		return;
	ExecCloseIndices(ti->rri);
	FreeExecutorState(ti->estate);
	pfree(ti->rri);
	pfree(ti);
}
