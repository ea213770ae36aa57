/*-------------------------------------------------------------------------
 *
 * batch_scope.c
 *	  The batch this backend is running, for the executor's callbacks into
 *	  streamwin (see batch_scope.h), and the rows of a batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "batch_scope.h"
#include "sql_function.h"

STREAMWIN_SQL_FUNCTION(streamwin_batch_timestamp);

/* The one pointer to the batch in progress; see batch_scope.h. */
static BatchScope *current_batch = NULL;

/* Changed whenever what a scan could read changes (batch_scope_generation) */
static uint64 generation = 0;

void
batch_scope_enter(BatchScope *scope)
{
	Assert(scope != current_batch);
	scope->outer = current_batch;
	current_batch = scope;
	generation++;
}

void
batch_scope_leave(BatchScope *scope)
{
	/* scopes nest: the one left is the innermost */
	Assert(current_batch == scope);
	current_batch = scope->outer;
	scope->outer = NULL;
	generation++;
}

void
batch_scope_set_reading(BatchScope *scope, BatchInput *input)
{
	scope->reading = input;
	generation++;
}

void
batch_scope_set_store(BatchScope *scope, struct StateStore *store)
{
	scope->store = store;
	generation++;
}

void
batch_scope_next_statement(void)
{
	generation++;
}

uint64
batch_scope_generation(void)
{
	return generation;
}

BatchScope *
batch_scope_current(void)
{
	return current_batch;
}

/*
 * May the role running now read the batch's rows and groups?  The batch's
 * statements, and the query's own code they call, run as the query's
 * owner; other code that runs in the middle of them (a SECURITY DEFINER
 * function of another role, in a row security policy of a table the query
 * joins, say) calls streamwin.source_rows() and store_rows() as that role,
 * which may not read the owner's stream.
 */
static bool
scope_readable(void)
{
	return current_batch != NULL &&
		(!OidIsValid(current_batch->owner) || has_privs_of_role(GetUserId(), current_batch->owner));
}

BatchInput *
batch_scope_input(int32 source_id)
{
	BatchInput *input = scope_readable() ? current_batch->reading : NULL;

	while (input != NULL && input->source_id != source_id)
		input = input->next;
	return input;
}

void
batch_rows_check_type(TupleDesc have, TupleDesc want, Oid first_type, const char *what)
{
	int			first = OidIsValid(first_type) ? 1 : 0;

	if (want->natts != have->natts + first)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s returns %d columns, not %d", what, have->natts, want->natts - first)));
	if (first == 1 && TupleDescAttr(want, 0)->atttypid != first_type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column 1 of %s is of type %s, not %s", what, format_type_be(first_type),
						format_type_be(TupleDescAttr(want, 0)->atttypid))));
	for (int i = 0; i < have->natts; i++)
	{
		Oid			h = TupleDescAttr(have, i)->atttypid;
		Oid			w = TupleDescAttr(want, i + first)->atttypid;

		if (h != w)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column %d of %s is of type %s, not %s", i + 1 + first, what,
							format_type_be(h), format_type_be(w))));
	}
}

TimestampTz
batch_scope_timestamp(void)
{
	if (current_batch != NULL)
		return current_batch->timestamp;
	return GetCurrentTransactionStartTimestamp();
}

struct StateStore *
batch_scope_store(int32 query_id)
{
	if (current_batch == NULL || current_batch->query_id != query_id || !scope_readable())
		return NULL;
	return current_batch->store;
}

BatchRow
batch_row_make(int natts, const Datum *values, const bool *isnull)
{
	BatchRow	row = palloc(natts * (sizeof(Datum) + sizeof(bool)));

	memcpy(row, values, natts * sizeof(Datum));
	memcpy(BATCH_ROW_NULLS(row, natts), isnull, natts * sizeof(bool));
	return row;
}

/*
 * streamwin.batch_timestamp() RETURNS timestamptz: what now() stands for in
 * a continuous query (compile_shape.c rewrites now() and its kin into it).
 * STABLE (one value for a statement) and PARALLEL RESTRICTED: parallel
 * workers do not know the batch.
 */
Datum
streamwin_batch_timestamp(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(batch_scope_timestamp());
}
