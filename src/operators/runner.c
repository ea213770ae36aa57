/*-------------------------------------------------------------------------
 *
 * runner.c
 *	  Running a query's compiled statements as the query's owner, with the
 *	  settings each is planned with and the batch's rows it reads (see
 *	  runner.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "batch_scope.h"
#include "catalog_access.h"
#include "result_insert.h"
#include "runner.h"
#include "spi_util.h"

/* Execute a kept plan as the query's owner, into dest if not NULL. */
static uint64
run_plan_into(QueryRunner *r, SPIPlanPtr plan, Datum *args, DestReceiver *dest)
{
	RoleSwitch	role;
	int			rc;

	role_switch_enter(&role, r->query->owner);
	if (dest == NULL)
		rc = SPI_execute_plan(plan, args, NULL, false, 0);
	else
	{
		SPIExecuteOptions options;

		memset(&options, 0, sizeof(options));
		options.dest = dest;
		options.allow_nonatomic = false;
		if (args != NULL)
		{
			int			nargs = SPI_getargcount(plan);

			/* the arguments as SPI_execute_plan would pass them: none NULL */
			options.params = makeParamList(nargs);
			for (int i = 0; i < nargs; i++)
			{
				ParamExternData *p = &options.params->params[i];

				p->value = args[i];
				p->isnull = false;
				p->pflags = PARAM_FLAG_CONST;
				p->ptype = SPI_getargtypeid(plan, i);
			}
		}
		rc = SPI_execute_plan_extended(plan, &options);
	}
	role_switch_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin: batch statement failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

void
runner_run_indexes(QueryRunner *r, QueryStatement s)
{
	RoleSwitch	role;
	int			rc;

	catalog_enter(&role);
	rc = SPI_execute_plan(r->plans[s], NULL, NULL, false, 0);
	catalog_leave(&role);
	if (rc < 0)
		elog(ERROR, "streamwin: index statement failed: %s", SPI_result_code_string(rc));
}

/*
 * run_plan_into(), with input visible through the sources' views: what the
 * current batch's scope reads while the statement runs, and no longer when
 * it ends, also in error (an insert variant's error is caught, and the
 * batch goes on).
 */
static uint64
run_plan_with_input(QueryRunner *r, SPIPlanPtr plan, BatchInput *input, Datum *args,
					DestReceiver *dest)
{
	BatchScope *scope = batch_scope_current();
	volatile uint64 n = 0;

	batch_scope_next_statement();
	if (input == NULL)
		return run_plan_into(r, plan, args, dest);
	Assert(scope != NULL && scope->query_id == r->query_id && scope->reading == NULL);
	batch_scope_set_reading(scope, input);
	PG_TRY();
	{
		n = run_plan_into(r, plan, args, dest);
	}
	PG_FINALLY();
	{
		batch_scope_set_reading(scope, NULL);
	}
	PG_END_TRY();
	return n;
}

/*
 * A statement that writes rows by location joins the store's groups with
 * the result by ctid; the planner, left to itself, may as well hash the
 * whole result or probe its index, which costs the size of the result in
 * every batch.  So it is planned (when first run, and again whenever the
 * plan cache replans it) with every other way of finding the rows turned
 * off, which leaves a nested loop of TID scans: one fetch per group.
 */
static const char *const by_location[] = {"enable_hashjoin", "enable_mergejoin", "enable_seqscan",
"enable_indexscan", "enable_bitmapscan", "enable_material", NULL};

/*
 * A statement that finds rows in a join's state (STATEMENT_BY_INDEX, and a
 * join's statements that look its new rows up in the other side's join
 * table) reads them by index: a generic plan cannot tell how many rows
 * "event time < $1" holds, and a join table of up to a million rows or so
 * looks cheaper to read whole and hash than to probe once per new row, so
 * that every batch would read the whole state.  Tables without an index
 * are still read whole.
 */
static const char *const by_index[] = {"enable_seqscan", "enable_bitmapscan", NULL};

/* The settings statement s is planned with, or NULL: the session's. */
static const char *const *
statement_plan_settings(QueryRunner *r, QueryStatement s)
{
	if (STATEMENT_BY_LOCATION(s))
		return by_location;
	if (STATEMENT_BY_INDEX(s))
		return by_index;
	if (r->query->join != NULL &&
		(s == STMT_BATCH || s == STMT_BATCH_INSERT || s == STMT_BATCH_ROWS || s == STMT_STORE_GROUPS ||
		 s == STMT_STORE_BATCH_ROWS || s == STMT_JOIN_MATCH ||
		 s == STMT_JOIN_STATE_ROWS_0 || s == STMT_JOIN_STATE_ROWS_1))
		return by_index;
	return NULL;
}

/* Run statement s (with its planning settings), into dest if not NULL. */
static uint64
run_statement(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args, DestReceiver *dest)
{
	const char *const *off = statement_plan_settings(r, s);
	int			level;
	uint64		n;

	Assert(r->plans[s] != NULL);
	if (off == NULL)
		return run_plan_with_input(r, r->plans[s], input, args, dest);
	level = NewGUCNestLevel();
	for (int i = 0; off[i] != NULL; i++)
		(void) set_config_option(off[i], "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	n = run_plan_with_input(r, r->plans[s], input, args, dest);
	AtEOXact_GUC(true, level);
	return n;
}

uint64
runner_run(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args)
{
	return run_statement(r, s, input, args, NULL);
}

uint64
runner_run_into(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args,
				DestReceiver *dest)
{
	return run_statement(r, s, input, args, dest);
}

/* run_statement() with its arguments in one struct, for run_in_subtransaction() */
typedef struct PlanCall
{
	QueryRunner *r;
	QueryStatement s;
	BatchInput *input;
	Datum	   *args;
	DestReceiver *dest;
} PlanCall;

static void
run_plan_call(void *arg)
{
	PlanCall   *call = arg;

	(void) run_statement(call->r, call->s, call->input, call->args, call->dest);
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
/* May an insert variant run now?  Counts it if so. */
static bool
variant_allowed(QueryRunner *r, bool replay)
{
	if (variants_lxid != MyProc->lxid)
	{
		variants_lxid = MyProc->lxid;
		variants_in_transaction = 0;
	}
	if (replay || r->insert_variants_paused > 0 ||
		variants_in_transaction >= INSERT_VARIANTS_PER_TRANSACTION)
		return false;
	variants_in_transaction++;
	return true;
}

/*
 * Run plan in a subtransaction: true if it succeeded; false if it met a
 * row already in the result (a unique violation), which pauses the
 * variants.  Other errors are raised.
 */
static bool
run_variant(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args,
			DestReceiver *dest)
{
	PlanCall	call = {r, s, input, args, dest};
	ErrorData  *edata = run_in_subtransaction(run_plan_call, &call);

	if (edata == NULL)
		return true;
	if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		ReThrowError(edata);
	elog(DEBUG1, "streamwin: query \"%s\" met a row already in its result (%s): its statements write the rows instead",
		 r->query->name, edata->message);
	FreeErrorData(edata);
	r->insert_variants_paused = INSERT_VARIANTS_PAUSE;
	return false;
}

void
runner_run_writing(QueryRunner *r, QueryStatement s, BatchInput *input, Datum *args, bool replay)
{
	QueryStatement variant = s == STMT_BATCH ? STMT_BATCH_INSERT : STMT_CLOSE_INSERT;

	Assert(STATEMENT_HAS_VARIANT(s));
	if (r->plans[variant] != NULL && variant_allowed(r, replay) &&
		run_variant(r, variant, input, args, NULL))
		return;
	(void) runner_run(r, s, input, args);
}

/*
 * A transform's rows are written by the table AM's multi-insert where the
 * result is a plain table (see result_insert.c): a WAL record and a buffer
 * lock per page rather than per row.  Else, and where the plan has no rows
 * statement (a query created before them, an aggregation's merge), by
 * statement insert.
 */
void
runner_append(QueryRunner *r, QueryStatement insert, QueryStatement rows, BatchInput *input)
{
	DestReceiver *dest;

	if (r->plans[rows] == NULL || !result_insert_possible(r->query->result_table, r->plans[rows]))
	{
		(void) runner_run(r, insert, input, NULL);
		return;
	}
	dest = result_insert_receiver(r->query->result_table);
	(void) runner_run_into(r, rows, input, NULL, dest);
	dest->rDestroy(dest);
}

/*
 * A store's new result rows are written by the table AM's multi-insert
 * where the result is a plain table (see result_insert.c), else by the
 * INSERT statement.  Either way in the variant's subtransaction, so that a
 * row already in the result sends the rows to the upsert instead.
 */
bool
runner_try_insert(QueryRunner *r, QueryStatement s, bool replay)
{
	QueryStatement rows = s == STMT_STORE_INSERT ? STMT_STORE_INSERT_ROWS : STMT_STORE_CLOSE_ROWS;
	DestReceiver *dest;
	bool		inserted;

	Assert(s == STMT_STORE_INSERT || s == STMT_STORE_CLOSE);
	if (!variant_allowed(r, replay))
		return false;
	if (r->plans[rows] == NULL ||
		!result_insert_possible(r->query->result_table, r->plans[rows]))
		return run_variant(r, s, NULL, NULL, NULL);
	dest = result_insert_receiver(r->query->result_table);
	inserted = run_variant(r, rows, NULL, NULL, dest);
	dest->rDestroy(dest);
	return inserted;
}
