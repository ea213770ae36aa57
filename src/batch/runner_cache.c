/*-------------------------------------------------------------------------
 *
 * runner_cache.c
 *	  The query runners of this backend: made on a query's first batch,
 *	  kept between batches, forgotten when the query goes or changes (see
 *	  runner_cache.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "catalog.h"
#include "operator.h"
#include "runner_cache.h"
#include "spi_util.h"

/* Runners of this backend: usually one (a worker) or a few (a session). */
static List *runners = NIL;

static void
runner_free(QueryRunner *r)
{
	operators_free(r->operators);
	statements_free(r->plans);
	for (int i = 0; i < QUERY_MAX_SOURCES; i++)
	{
		if (r->decoders[i] != NULL)
			row_decoder_free(r->decoders[i]);
		source_reader_close(r->readers[i]);
	}
	MemoryContextDelete(r->cxt);
}

/*
 * A runner whose batch is running in this backend may be neither run nor
 * changed nor freed: the batch's own code (a function of its query, a
 * trigger on its result table) calling run_batch, reset_query, start_query
 * or drop_query of that query would pull the batch's memory from under it.
 */
static void
runner_check_idle(QueryRunner *r)
{
	if (r->in_batch)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("query \"%s\" is running a batch in this session", r->query->name),
				 errdetail("Its own batch called a function of streamwin on it: run_batch, run_available, "
						   "reset_query, start_query or drop_query."),
				 errhint("Call these functions outside the query's batches.")));
}

/* Open the query's readers, decoders, statements and operators into r. */
static void
runner_open(QueryRunner *r, bool in_worker)
{
	r->query = catalog_get_query_by_id(r->query_id, false);
	catalog_require_query_tables(r->query);
	r->batch_cxt = AllocSetContextCreate(r->cxt, "streamwin batch", ALLOCSET_DEFAULT_SIZES);
	for (int i = 0; i < r->query->nsources; i++)
	{
		SourceInfo *src = catalog_get_source_by_id(r->query->sources[i].source_id, false);

		r->readers[i] = source_reader_open(src, r->query, i, r->cxt, in_worker);
		r->decoders[i] = row_decoder_create(r->readers[i], r->query);
		r->nreaders = i + 1;
	}
	runner_check_relations(r);
	SPI_connect();
	statements_prepare(r->query->sql, r->plans);
	SPI_finish();
	r->operators = operators_make(r);
}

/*
 * Does the qualified name the statements give a relation name relid still?
 * By what the name resolves to, not by its text, whose quoting varies with
 * quote_all_identifiers and a server's keywords.
 */
static bool
names_relation(const char *name, Oid relid)
{
	RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList(name));

	return RangeVarGetRelid(rv, NoLock, true) == relid;
}

/*
 * runner_check_relations
 *		The result table is the user's, who may drop or rename it by hand,
 *		and so may a source's view be dropped or renamed: say so, rather
 *		than fail on the statements, which name them as they were named
 *		when the query was created.  Before the statements are prepared,
 *		and at every batch.
 */
void
runner_check_relations(QueryRunner *r)
{
	QueryInfo  *q = r->query;
	const char *now;

	if (get_rel_name(q->result_table) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the result table of query \"%s\" no longer exists", q->name),
				 errdetail("It was dropped by hand; the query's batches write into it."),
				 errhint("Drop the query with streamwin.drop_query() and create it again: it starts over from its sources.")));
	if (q->result_name != NULL && !names_relation(q->result_name, q->result_table))
	{
		now = qualified_relname(q->result_table);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the result table of query \"%s\" is now %s", q->name, now),
				 errdetail("The query's statements write into %s, its name when the query was created.", q->result_name),
				 errhint("Give the table that name back (ALTER TABLE ... RENAME TO, SET SCHEMA), or drop the query and create it again.")));
	}
	for (int i = 0; i < r->nreaders; i++)
	{
		SourceInfo *src = r->readers[i]->source;

		source_check_view(src);
		if (q->source_view_names[i] == NULL || names_relation(q->source_view_names[i], src->relation))
			continue;
		now = qualified_relname(src->relation);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the view of source \"%s\" is now %s", src->name, now),
				 errdetail("The statements of query \"%s\" read %s, its name when the query was created.",
						   q->name, q->source_view_names[i]),
				 errhint("Give the view that name back (ALTER VIEW ... RENAME TO, SET SCHEMA), or drop the source's queries and create them again.")));
	}
}

/*
 * A session keeps the runners of the queries it ran, each with its readers
 * (a Kafka consumer's threads, sockets and prefetched messages), until it
 * runs them again; a query dropped, or started in a worker, since then
 * never is.  So a session that makes a runner lets go of those first.
 */
static void
runners_forget_stale(void)
{
	ListCell   *lc;

	foreach(lc, runners)
	{
		QueryRunner *r = lfirst(lc);
		QueryInfo  *q;

		if (r->in_worker || r->in_batch)
			continue;
		q = catalog_get_query_by_id(r->query_id, true);
		if (q != NULL && !q->desired_running && q->result_table == r->query->result_table)
			continue;
		runners = foreach_delete_current(runners, lc);
		runner_free(r);
	}
}

/* A new runner of the query, opened, or an error with nothing left behind. */
static QueryRunner *
runner_make(int32 query_id, bool in_worker)
{
	MemoryContext cxt;
	MemoryContext old;
	QueryRunner *r;

	cxt = AllocSetContextCreate(TopMemoryContext, "streamwin query runner",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	r = palloc0(sizeof(QueryRunner));
	r->cxt = cxt;
	r->query_id = query_id;
	r->in_worker = in_worker;
	PG_TRY();
	{
		runner_open(r, in_worker);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		runner_free(r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	return r;
}

QueryRunner *
runner_get(int32 query_id, bool in_worker)
{
	ListCell   *lc;
	MemoryContext old;
	QueryRunner *r;

	foreach(lc, runners)
	{
		r = lfirst(lc);
		if (r->query_id != query_id)
			continue;
		runner_check_idle(r);

		/*
		 * A session's runner kept for another query of that id: one dropped
		 * with the extension, whose ids begin again when it is created anew
		 * (its readers would resolve and store another source's positions).
		 * Its result table tells them apart.
		 */
		if (!in_worker)
		{
			QueryInfo  *q = catalog_get_query_by_id(query_id, true);

			if (q == NULL || q->result_table != r->query->result_table)
			{
				runners = foreach_delete_current(runners, lc);
				runner_free(r);
				break;
			}
		}
		return r;
	}
	if (!in_worker)
		runners_forget_stale();
	r = runner_make(query_id, in_worker);
	old = MemoryContextSwitchTo(TopMemoryContext);
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
			runner_check_idle(r);
			runners = foreach_delete_current(runners, lc);
			runner_free(r);
			return;
		}
	}
}

void
runner_state_rewritten(QueryRunner *r)
{
	operators_invalidate(r->operators);
}

/* Whether a reader of r was opened with fewer partitions than its source has now */
static bool
runner_outgrown(QueryRunner *r)
{
	for (int i = 0; i < r->nreaders; i++)
		if (r->readers[i]->outgrown)
			return true;
	return false;
}

/*
 * A Kafka consumer's fetch wait follows trigger_interval: see
 * kafka_source.c.  A runner whose source has gained partitions is made
 * anew too, to read them.
 */
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
				r->query->idle_timeout_us == q->idle_timeout_us &&
				!runner_outgrown(r))
				return false;
			runner_forget(q->query_id);
			return true;
		}
	}
	return false;
}
