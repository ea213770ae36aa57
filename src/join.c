/*-------------------------------------------------------------------------
 *
 * join.c
 *	  A stream-stream join's state in a batch: each side's new rows kept,
 *	  matches marked, rows out of the watermark's reach let go (join.h).
 *
 * The statements are compiled by compile_join.c; this file runs them in
 * the order join.h gives and keeps the number of rows per side, which
 * streamwin.progress shows as part of state_rows, without counting the
 * tables in every batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "join.h"
#include "options.h"
#include "result_insert.h"
#include "runner.h"
#include "spi_util.h"

/* Count the rows of each side's join table (as the extension's owner). */
static void
count_join_rows(QueryRunner *r)
{
	RoleSwitch	role;

	catalog_enter(&role);
	for (int s = 0; s < r->query->nsources; s++)
	{
		bool		isnull;

		if (SPI_execute(psprintf("SELECT pg_catalog.count(*) FROM %s",
								 qualified_relname(r->query->sources[s].join_table)),
						false, 1) != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "streamwin: could not count the join rows of query \"%s\"", r->query->name);
		r->join_rows[s] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 1, &isnull));
	}
	catalog_leave(&role);
}

void
join_batch_begin(QueryRunner *r, TransactionId catalog_xmin)
{
	if (TransactionIdIsValid(r->join_rows_xmin) &&
		TransactionIdEquals(r->join_rows_xmin, catalog_xmin))
		memcpy(r->join_rows, r->join_rows_committed, sizeof(r->join_rows));
	else
		count_join_rows(r);
}

void
join_batch_end(QueryRunner *r, TransactionId catalog_xmin)
{
	memcpy(r->join_rows_committed, r->join_rows, sizeof(r->join_rows));
	r->join_rows_xmin = catalog_xmin;
}

int64
join_state_rows(QueryRunner *r)
{
	int64		n = 0;

	for (int s = 0; s < r->query->nsources; s++)
		n += r->join_rows[s];
	return n;
}

/* The side whose rows without a match are emitted (an outer join's), or -1. */
static int
preserved_side(const JoinPlan *jp)
{
	for (int s = 0; s < QUERY_MAX_SOURCES; s++)
		if (jp->sides[s].preserved)
			return s;
	return -1;
}

/* How many of the batch's rows come from source_id. */
static int
input_rows(BatchInput *input, int32 source_id)
{
	for (; input != NULL; input = input->next)
		if (input->source_id == source_id)
			return input->nrows;
	return 0;
}

/*
 * The locations (column 1, tid) of the rows SPI_tuptable holds, as a tid[]
 * datum.
 */
static Datum
returned_locations(void)
{
	Datum	   *tids = palloc(sizeof(Datum) * Max(SPI_processed, 1));

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		ItemPointer tid = (ItemPointer) DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[i],
																	  SPI_tuptable->tupdesc,
																	  1, &isnull));
		ItemPointer copy = palloc(sizeof(ItemPointerData));

		ItemPointerCopy(tid, copy);
		tids[i] = PointerGetDatum(copy);
	}
	return PointerGetDatum(construct_array(tids, (int) SPI_processed, TIDOID,
										   sizeof(ItemPointerData), false, TYPALIGN_SHORT));
}

/*
 * The rows a preserved side's eviction returned (__matched, then the
 * source's columns) that never matched, as tuples of the source.
 */
static BatchInput *
unmatched_rows(QueryRunner *r, int side)
{
	TupleDesc	desc = r->readers[side]->desc;
	BatchInput *out = palloc0(sizeof(BatchInput));
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);

	out->source_id = r->readers[side]->source->source_id;
	out->natts = desc->natts;
	out->rows = palloc(sizeof(BatchRow) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;

		if (DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull)))
			continue;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute attr = TupleDescAttr(desc, a);

			/* SPI's result goes with the next statement: the row keeps a copy */
			values[a] = SPI_getbinval(tup, SPI_tuptable->tupdesc, a + 2, &nulls[a]);
			if (!nulls[a])
				values[a] = datumCopy(values[a], attr->attbyval, attr->attlen);
		}
		out->rows[out->nrows++] = batch_row_make(desc->natts, values, nulls);
	}
	return out->nrows > 0 ? out : NULL;
}

/*
 * Side s's new rows into its join table: many to a page where the table is
 * as streamwin made it, a plain table (result_insert.c); else by the
 * INSERT, which the preserved side always takes, for it returns where its
 * rows went.  Returns how many.
 */
static uint64
join_insert(QueryRunner *r, int s, BatchInput *input, Datum *batch)
{
	QueryStatement rows = STMT_JOIN_INSERT_ROWS_0 + s;
	Oid			table = r->query->sources[s].join_table;
	DestReceiver *dest;
	uint64		n;

	if (r->plans[rows] == NULL || !result_insert_possible(table, r->plans[rows]))
		return runner_run(r, STMT_JOIN_INSERT_0 + s, input, batch);
	dest = result_insert_receiver(table);
	n = runner_run_into(r, rows, input, batch, dest);
	dest->rDestroy(dest);
	return n;
}

BatchInput *
join_apply(QueryRunner *r, BatchInput *input, int64 batch_id, bool has_wm, TimestampTz wm)
{
	Datum		batch = Int64GetDatum(batch_id);
	JoinPlan   *jp = r->query->join;
	int			preserved = preserved_side(jp);
	Datum		new_locations = (Datum) 0;
	BatchInput *unmatched = NULL;

	/* the new rows of each side join its state */
	for (int s = 0; s < r->nreaders; s++)
	{
		uint64		n;

		if (input_rows(input, r->readers[s]->source->source_id) == 0)
			continue;
		n = join_insert(r, s, input, &batch);
		r->join_rows[s] += (int64) n;
		if (s == preserved)
			new_locations = returned_locations();
	}

	/*
	 * The preserved side's rows that matched: old ones with the other side's
	 * new rows, new ones with all of the other side's.
	 */
	if (preserved >= 0 &&
		(new_locations != (Datum) 0 ||
		 input_rows(input, r->readers[1 - preserved]->source->source_id) > 0))
	{
		Datum		args[2];

		if (new_locations == (Datum) 0)
			new_locations = PointerGetDatum(construct_empty_array(TIDOID));
		args[0] = new_locations;
		args[1] = batch;
		(void) runner_run(r, STMT_JOIN_MATCH, input, args);
	}

	if (!has_wm)
		return NULL;
	for (int s = 0; s < r->nreaders; s++)
	{
		TimestampTz before;
		Datum		cutoff;
		uint64		n;

		if (!join_side_cutoff(&jp->sides[s], wm, &before))
			continue;
		cutoff = TimestampTzGetDatum(before);
		n = runner_run(r, STMT_JOIN_EVICT_0 + s, NULL, &cutoff);
		r->join_rows[s] -= (int64) n;
		if (s == preserved && n > 0)
			unmatched = unmatched_rows(r, s);
	}
	return unmatched;
}
