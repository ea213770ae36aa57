/*-------------------------------------------------------------------------
 *
 * statements.c
 *	  The table of compiled statements (see statements.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/json.h"

#include "jsonb_util.h"
#include "statements.h"

typedef struct StatementSpec
{
	const char *key;			/* in query_catalog.plan */
	int			nargs;
	Oid			argtypes[2];	/* of $1 and $2 */
} StatementSpec;

static const StatementSpec specs[NUM_STATEMENTS] = {
	[STMT_BATCH] = {"batch_sql", 0},
	[STMT_BATCH_INSERT] = {"batch_insert_sql", 0},
	[STMT_BATCH_ROWS] = {"batch_rows_sql", 0},
	[STMT_CLOSE] = {"close_sql", 1, {TIMESTAMPTZOID}},
	[STMT_CLOSE_INSERT] = {"close_insert_sql", 1, {TIMESTAMPTZOID}},
	[STMT_CLEAR] = {"clear_sql", 0},
	[STMT_REFRESH] = {"refresh_sql", 0},
	[STMT_STATE_COUNT] = {"state_count_sql", 0},
	[STMT_DEDUP] = {"dedup_sql", 1, {INT8OID}},
	[STMT_DEDUP_EVICT] = {"dedup_evict_sql", 1, {TIMESTAMPTZOID}},
	[STMT_DEDUP_ROWS] = {"dedup_rows_sql", 0},
	[STMT_DEDUP_INDEX] = {"dedup_index_sql", 0},
	[STMT_DEDUP_UNINDEX] = {"dedup_unindex_sql", 0},
	[STMT_UPSERT_ROWS] = {"upsert_rows_sql", 0},
	[STMT_UPSERT_WRITE] = {"upsert_write_sql", 0},
	[STMT_UPSERT_COUNT] = {"upsert_count_sql", 0},
	[STMT_UPSERT_INDEX] = {"upsert_index_sql", 0},
	[STMT_UPSERT_UNINDEX] = {"upsert_unindex_sql", 0},
	[STMT_UPSERT_TRUNCATE] = {"upsert_truncate_sql", 0},
	[STMT_STORE_GROUPS] = {"store_groups_sql", 0},
	[STMT_STORE_BATCH_ROWS] = {"store_batch_rows_sql", 0},
	[STMT_STORE_INSERT] = {"store_insert_sql", 0},
	[STMT_STORE_INSERT_ROWS] = {"store_insert_rows_sql", 0},
	[STMT_STORE_UPDATE] = {"store_update_sql", 0},
	[STMT_STORE_UPSERT] = {"store_upsert_sql", 0},
	[STMT_STORE_CLOSE] = {"store_close_sql", 0},
	[STMT_STORE_CLOSE_ROWS] = {"store_close_rows_sql", 0},
	[STMT_STORE_CLOSE_UPSERT] = {"store_close_upsert_sql", 0},
	[STMT_STORE_REFRESH] = {"store_refresh_sql", 0},
	[STMT_STORE_DELETE] = {"store_delete_sql", 0},
	[STMT_STATE_INDEX] = {"state_index_sql", 0},
	[STMT_STATE_END_INDEX] = {"state_end_index_sql", 0},
	[STMT_STATE_UNINDEX] = {"state_unindex_sql", 0},
	[STMT_JOIN_INSERT_0] = {"join_insert_0_sql", 1, {INT8OID}},
	[STMT_JOIN_INSERT_1] = {"join_insert_1_sql", 1, {INT8OID}},
	[STMT_JOIN_INSERT_ROWS_0] = {"join_insert_rows_0_sql", 1, {INT8OID}},
	[STMT_JOIN_INSERT_ROWS_1] = {"join_insert_rows_1_sql", 1, {INT8OID}},
	[STMT_JOIN_MATCH] = {"join_match_sql", 2, {TIDARRAYOID, INT8OID}},
	[STMT_JOIN_EVICT_0] = {"join_evict_0_sql", 1, {TIMESTAMPTZOID}},
	[STMT_JOIN_EVICT_1] = {"join_evict_1_sql", 1, {TIMESTAMPTZOID}},
	[STMT_JOIN_UNMATCHED] = {"join_unmatched_sql", 0},
	[STMT_JOIN_UNMATCHED_ROWS] = {"join_unmatched_rows_sql", 0},
	[STMT_JOIN_UNMATCHED_GROUPS] = {"join_unmatched_groups_sql", 0},
	[STMT_JOIN_STATE_ROWS_0] = {"join_state_rows_0_sql", 0},
	[STMT_JOIN_STATE_ROWS_1] = {"join_state_rows_1_sql", 0},
	[STMT_JOIN_INDEX_0] = {"join_index_0_sql", 0},
	[STMT_JOIN_INDEX_1] = {"join_index_1_sql", 0},
	[STMT_JOIN_UNINDEX] = {"join_unindex_sql", 0},
};

void
plan_add_statement(StringInfo plan, QueryStatement s, const char *sql)
{
	appendStringInfo(plan, ", \"%s\": ", specs[s].key);
	escape_json(plan, sql);
}

void
plan_read_statements(Jsonb *plan, char **sql)
{
	for (int s = 0; s < NUM_STATEMENTS; s++)
		sql[s] = jsonb_get_text(plan, specs[s].key);
}

void
statements_prepare(char *const *sql, SPIPlanPtr *plans)
{
	for (int s = 0; s < NUM_STATEMENTS; s++)
	{
		Oid			argtypes[lengthof(specs[s].argtypes)];

		plans[s] = NULL;
		if (sql[s] == NULL)
			continue;
		memcpy(argtypes, specs[s].argtypes, sizeof(argtypes));
		plans[s] = SPI_prepare(sql[s], specs[s].nargs, argtypes);
		if (plans[s] == NULL)
			elog(ERROR, "streamwin: could not prepare \"%s\": %s", sql[s],
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plans[s]);
	}
}

void
statements_free(SPIPlanPtr *plans)
{
	for (int s = 0; s < NUM_STATEMENTS; s++)
	{
		if (plans[s] != NULL)
			SPI_freeplan(plans[s]);
		plans[s] = NULL;
	}
}
