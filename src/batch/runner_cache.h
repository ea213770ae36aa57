/*-------------------------------------------------------------------------
 *
 * runner_cache.h
 *	  The query runners of this backend (runner_cache.c): a worker has one,
 *	  a session one per query it runs batches of.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_RUNNER_CACHE_H
#define STREAMWIN_RUNNER_CACHE_H

#include "runner.h"

/*
 * runner_get
 *		The runner of a query in this backend, created on first use: loads
 *		the query, opens a reader and a decoder per source, prepares its
 *		statements, makes its operators.  Must be called inside a
 *		transaction.
 */
extern QueryRunner *runner_get(int32 query_id, bool in_worker);

/*
 * The query's state tables were rewritten outside a batch (reset_query):
 * whatever the runner keeps of them is stale.
 */
extern void runner_state_rewritten(QueryRunner *r);

/*
 * Fail, saying what happened and what to do, when the query's result table
 * or a source's view was dropped or renamed since the query was created.
 */
extern void runner_check_relations(QueryRunner *r);

/* Drop a query's runner (after drop_query, an error, or when a worker exits). */
extern void runner_forget(int32 query_id);

/*
 * If this backend's runner of q was built with other settings than q has
 * now (alter_query changed them), or has a reader whose source has gained
 * partitions since, forget it; returns whether it did.
 */
extern bool runner_settings_changed(const QueryInfo *q);

#endif							/* STREAMWIN_RUNNER_CACHE_H */
