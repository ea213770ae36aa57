/*-------------------------------------------------------------------------
 *
 * streamwin.c
 *	  Module entry: GUCs, shared memory and the launcher registration.
 *
 * Loaded through shared_preload_libraries, streamwin registers its launcher
 * background worker and the shared memory that tracks query workers.
 * Loaded on demand only (CREATE EXTENSION without preloading), everything
 * but background workers works: run_batch and run_available process
 * batches in the calling session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "batch.h"
#include "batch_memory.h"
#include "checkpoint.h"
#include "launcher.h"
#include "options.h"
#include "schema_registry.h"
#include "worker_registry.h"
#include "source.h"
#include "state_store.h"
#include "catalog_types.h"
#include "table_source.h"
#include "worker.h"

PG_MODULE_MAGIC;

extern PGDLLEXPORT void _PG_init(void);


static const struct config_enum_entry store_merge_options[] = {
	{"auto", STORE_MERGE_AUTO, false},
	{"groups", STORE_MERGE_GROUPS, false},
	{"rows", STORE_MERGE_ROWS, false},
	{NULL, 0, false}
};

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
streamwin_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	workers_shmem_request();
}

static void
streamwin_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	workers_shmem_startup();
}

void
_PG_init(void)
{
	/*
	 * A setting read only at server start can be defined only while the
	 * server loads shared_preload_libraries: PostgreSQL ends a session that
	 * loads the library and defines one ("cannot create PGC_POSTMASTER
	 * variables after startup").  Loaded into a session, streamwin runs no
	 * workers, whose number it is.
	 */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("streamwin.max_workers",
								"Maximum number of streamwin query workers in the cluster.",
								"Each running continuous query uses one background worker; "
								"max_worker_processes must leave room for them.",
								&streamwin_max_workers,
								32, 1, 1024,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.progress_retention",
							"Number of recent batches kept per query in streamwin.progress.",
							NULL,
							&streamwin_progress_retention,
							1000, 1, INT_MAX,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.max_records_per_batch",
							"Default for a source's max_records_per_batch option.",
							NULL,
							&streamwin_default_max_records,
							100000, 1, 10000000,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.checkpoint_interval",
							"Batches between checkpoints of a query's state.",
							"After a crash, a query restores its last checkpoint and replays "
							"the batches since; a shorter interval means a shorter replay "
							"and more copying of state.",
							&streamwin_checkpoint_interval,
							10, 1, 100000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("streamwin.table_checkpoint_every_batch",
							 "Checkpoints a table source's query with its state in memory after every batch "
							 "whose next fetch decodes from the slot again.",
							 "A table source's slot is confirmed no further than its queries' last "
							 "checkpoints, so each batch decodes the WAL since them again; off: "
							 "every checkpoint_interval batches, writing less of a large, busy state.",
							 &streamwin_table_checkpoint_every_batch,
							 true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.checkpoint_min_interval",
							"Minimum time between checkpoints of a query's state.",
							"A checkpoint is taken once checkpoint_interval batches have run "
							"and this much time has passed since the last one, so that a "
							"query on a short trigger does not copy a large state every "
							"second; a crash then replays the batches of up to this long.",
							&streamwin_checkpoint_min_interval,
							10000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.batch_work_mem",
							"work_mem of the statements that run a batch.",
							"A batch groups and sorts up to max_records_per_batch rows in "
							"one statement; -1 uses work_mem.",
							&streamwin_batch_work_mem,
							65536, -1, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomBoolVariable("streamwin.enable_source_scan",
							 "Lets the planner read a source's batch rows, and a state store's "
							 "groups, with streamwin's own scans.",
							 "Off, every source is read through its view's function, and a store's "
							 "groups through streamwin.store_rows(), which copy the rows into a "
							 "tuplestore first: the same rows, more slowly.  For comparing the two; "
							 "statements already prepared keep their plans.",
							 &streamwin_enable_source_scan,
							 true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("streamwin.store_merge",
							 "How a state store takes a batch: its groups or its rows.",
							 "groups: the executor aggregates the batch's rows into groups, "
							 "which the store merges; rows: the store folds the rows into its "
							 "groups itself, for queries with tumbling windows or none whose "
							 "aggregates are counts, sums (not of floats over a join), and "
							 "bool_and/bool_or or min/max of integers and times; auto: rows "
							 "after a batch that changed a group for every two rows or more, "
							 "and always for the pairs of a join in a join store.  The results "
							 "are the same.  For comparing the two.",
							 &streamwin_store_merge,
							 STORE_MERGE_AUTO, store_merge_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.state_memory",
							"Memory each state store of a query may use: its open groups, its dedup keys.",
							"A query whose open groups (dedup keys) need more runs on its state "
							"table (dedup table) instead, more slowly, until they fit again.",
							&streamwin_state_memory,
							1024 * 1024, 1024, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.worker_keep_memory",
							"Free memory a query worker keeps for its next batch.",
							"Each batch allocates about the same memory again; keeping it "
							"spares the page faults of getting it from the kernel anew. "
							"run_available() and catch_up() keep it too while they run, and "
							"give it back at their end.  0 leaves the C library's defaults.  "
							"Read when a worker starts, and when those calls begin.",
							&streamwin_worker_keep_memory,
							64, 0, 1024,
							PGC_SIGHUP, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.launcher_naptime",
							"Time between the launcher's rounds.",
							"Each round starts a worker for every running query that has "
							"none (one that exited, or found no free worker slot) and checks "
							"the WAL that table sources retain.",
							&streamwin_launcher_naptime,
							30, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.retained_wal_warning",
							"WAL a table source's slot may retain before streamwin warns.",
							"Past it, the launcher warns in the server log and in "
							"streamwin.queries.last_error, at most every 5 minutes per "
							"source; -1 never warns.  Keep it below max_slot_wal_keep_size, "
							"past which PostgreSQL invalidates the slot.",
							&streamwin_retained_wal_warning,
							1024, -1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomIntVariable("streamwin.schema_registry_timeout",
							"Time a request to an Avro schema registry may take.",
							"A request that takes longer fails its batch, which is retried; "
							"connecting may take at most 5 seconds of it.",
							&streamwin_schema_registry_timeout_ms,
							10000, 100, 600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	MarkGUCPrefixReserved("streamwin");

	RegisterXactCallback(workers_xact_callback, NULL);
	table_source_init();
	source_scan_init();
	schema_registry_init();

	if (!process_shared_preload_libraries_in_progress)
		return;

	streamwin_preloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = streamwin_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = streamwin_shmem_startup;
	launcher_register();
}
