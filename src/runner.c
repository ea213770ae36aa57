/*-------------------------------------------------------------------------
 *
 * runner.c
 *	  A query's runner in this backend (see runner.h), and running its
 *	  compiled statements as the query's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "catalog.h"
#include "runner.h"
#include "spi_util.h"

/* Runners of this backend: usually one (a worker) or a few (a session). */
static List *runners = NIL;

static void
runner_free(QueryRunner *r)
{
	statements_free(r->plans);
	if (r->decoder != NULL)
		row_decoder_free(r->decoder);
	source_reader_close(r->reader);
	MemoryContextDelete(r->cxt);
}

QueryRunner *
runner_get(int32 query_id, bool in_worker)
{
	ListCell   *lc;
	MemoryContext cxt;
	MemoryContext old;
	QueryRunner *r;

	foreach(lc, runners)
	{
		r = lfirst(lc);
		if (r->query_id == query_id)
			return r;
	}

	cxt = AllocSetContextCreate(TopMemoryContext, "streamwin query runner",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	r = palloc0(sizeof(QueryRunner));
	r->cxt = cxt;
	r->query_id = query_id;
	r->in_worker = in_worker;
	PG_TRY();
	{
		SourceInfo *src;

		r->query = catalog_get_query_by_id(query_id, false);
		src = catalog_get_source_by_id(r->query->source_id);
		r->batch_cxt = AllocSetContextCreate(cxt, "streamwin batch", ALLOCSET_DEFAULT_SIZES);
		r->reader = source_reader_open(src, r->query, cxt, in_worker);
		r->decoder = row_decoder_create(r->reader, r->query);
		SPI_connect();
		statements_prepare(r->query->sql, r->plans);
		SPI_finish();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		runner_free(r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(TopMemoryContext);
	runners = lappend(runners, r);
	MemoryContextSwitchTo(old);
	return r;
}

void
runner_forget(int32 query_id)
{
	ListCell   *lc;

	foreach(lc, runners)
	{
		QueryRunner *r = lfirst(lc);

		if (r->query_id == query_id)
		{
			runners = foreach_delete_current(runners, lc);
			runner_free(r);
			return;
		}
	}
}

/* A Kafka consumer's fetch wait follows trigger_interval: see kafka_reader.c. */
bool
runner_settings_changed(const QueryInfo *q)
{
	ListCell   *lc;

	foreach(lc, runners)
	{
		QueryRunner *r = lfirst(lc);

		if (r->query_id == q->query_id)
		{
			if (r->query->trigger_interval_us == q->trigger_interval_us &&
				r->query->idle_timeout_us == q->idle_timeout_us)
				return false;
			runner_forget(q->query_id);
			return true;
		}
	}
	return false;
}

/* Execute a kept plan as the query's owner. */
static uint64
run_plan(QueryRunner *r, SPIPlanPtr plan, Datum *args)
{
	RoleSwitch	role;
	int			rc;

	role_switch_enter(&role, r->query->owner);
	rc = SPI_execute_plan(plan, args, NULL, false, 0);
	role_switch_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin: batch statement failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/* run_plan(), with the batch's rows visible through the source's view */
static uint64
run_plan_with_input(QueryRunner *r, SPIPlanPtr plan, BatchInput *input, Datum *args)
{
	volatile uint64 n = 0;

	if (input == NULL)
		return run_plan(r, plan, args);
	source_set_batch_input(input);
	PG_TRY();
	{
		n = run_plan(r, plan, args);
	}
	PG_FINALLY();
	{
		source_set_batch_input(NULL);
	}
	PG_END_TRY();
	return n;
}

uint64
runner_run(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args)
{
	Assert(r->plans[s] != NULL);
	return run_plan_with_input(r, r->plans[s], input, args);
}

/* run_plan_with_input() with its arguments in one struct, for run_in_subtransaction() */
typedef struct PlanCall
{
	QueryRunner *r;
	SPIPlanPtr	plan;
	BatchInput *input;
	Datum	   *args;
} PlanCall;

static void
run_plan_call(void *arg)
{
	PlanCall   *call = arg;

	(void) run_plan_with_input(call->r, call->plan, call->input, call->args);
}

/*
 * After an insert variant met a row already in the result, this many
 * batches use the plain statements before the variants are tried again.
 */
#define INSERT_VARIANTS_PAUSE 100

/*
 * How many insert variants one transaction runs, at most.  Each writes in
 * a subtransaction of its own, whose id stays in the backend's cache of
 * subtransaction ids until the transaction ends; beyond 64 that cache
 * overflows and every other session's snapshot checks get slower.  A
 * worker or catch_up commits every batch, but run_available runs all its
 * batches in the caller's transaction.
 */
#define INSERT_VARIANTS_PER_TRANSACTION 32

static LocalTransactionId variants_lxid = InvalidLocalTransactionId;
static int	variants_in_transaction = 0;

/*
 * The statements upsert every result row with INSERT ... ON CONFLICT,
 * which for a row not yet there costs a second index probe and a
 * speculative insertion on top of a plain INSERT.  Most rows are known to
 * be new: a group the merge just inserted into the state, a window closing
 * in append mode.  Their insert variants write those with a plain INSERT.
 * That only fails where the result kept rows the state no longer has
 * (after reset_query, or rows a user wrote); the variant then raises a
 * unique violation, which rolls back only the subtransaction it ran in,
 * and the statement itself runs instead.  So no result ever depends on the
 * variant; a replay after a crash, which re-creates state for rows already
 * in the result, uses the statements from the start.
 */
void
runner_run_writing(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args, bool replay)
{
	SPIPlanPtr	variant = s == STMT_BATCH ? r->plans[STMT_BATCH_INSERT] :
		s == STMT_CLOSE ? r->plans[STMT_CLOSE_INSERT] : NULL;
	PlanCall	call = {r, variant, input, args};
	ErrorData  *edata;

	Assert(STATEMENT_HAS_VARIANT(s) || variant == NULL);
	if (variants_lxid != MyProc->lxid)
	{
		variants_lxid = MyProc->lxid;
		variants_in_transaction = 0;
	}
	if (variant == NULL || replay || r->insert_variants_paused > 0 ||
		variants_in_transaction >= INSERT_VARIANTS_PER_TRANSACTION)
	{
		(void) runner_run(r, s, input, args);
		return;
	}
	variants_in_transaction++;
	edata = run_in_subtransaction(run_plan_call, &call);
	if (edata == NULL)
		return;
	if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		ReThrowError(edata);
	FreeErrorData(edata);
	r->insert_variants_paused = INSERT_VARIANTS_PAUSE;
	(void) runner_run(r, s, input, args);
}
