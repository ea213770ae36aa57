/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher and the per-database starter, which start the workers
 *	  of queries marked running (the registry of workers and the requests
 *	  at commit are worker_registry.c's).
 *
 * Who starts a query worker:
 *	- create_query(start => true) and start_query(), when their transaction
 *	  commits (before that the worker could not see the query);
 *	- at server start, and every streamwin.launcher_naptime afterwards, the
 *	  launcher: it cannot read another database's catalog itself, so for
 *	  each database it runs a short-lived "starter" worker there, which
 *	  starts workers for the queries marked running that have none (also
 *	  one whose worker exited on an error: the postmaster never restarts
 *	  a query worker).
 * Duplicates are harmless: a worker claims its (database, query) slot in
 * shared memory first and exits if another live worker holds it.
 *
 * stop_query and drop_query set the worker's latch at commit; the worker
 * sees the query's desired state and exits after its current batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "launcher.h"
#include "table_source.h"
#include "worker_registry.h"



/* Register the launcher; called from _PG_init while preloading. */
void
launcher_register(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 10;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "streamwin");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "streamwin_launcher_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "streamwin launcher");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "streamwin launcher");
	RegisterBackgroundWorker(&bgw);
}

/*
 * streamwin_launcher_main
 *		Connected to no database: lists the databases and runs a starter in
 *		each, at start and every streamwin.launcher_naptime, or when its
 *		latch is set.
 */
void
streamwin_launcher_main(Datum main_arg)
{
	/* the last starter could not be started (said once) */
	bool		starters_failed = false;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	while (!ShutdownRequestPending)
	{
		List	   *dbs = NIL;
		Relation	rel;
		TableScanDesc scan;
		HeapTuple	tup;
		ListCell   *lc;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		rel = table_open(DatabaseRelationId, AccessShareLock);
		scan = table_beginscan_catalog(rel, 0, NULL);
		while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		{
			Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

			if (db->datallowconn && !db->datistemplate)
			{
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

				dbs = lappend_oid(dbs, db->oid);
				MemoryContextSwitchTo(old);
			}
		}
		table_endscan(scan);
		table_close(rel, AccessShareLock);
		PopActiveSnapshot();
		CommitTransactionCommand();

		foreach(lc, dbs)
		{
			BackgroundWorker bgw;
			BackgroundWorkerHandle *handle;
			pid_t		pid;

			memset(&bgw, 0, sizeof(bgw));
			bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
			bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
			bgw.bgw_restart_time = BGW_NEVER_RESTART;
			snprintf(bgw.bgw_library_name, BGW_MAXLEN, "streamwin");
			snprintf(bgw.bgw_function_name, BGW_MAXLEN, "streamwin_starter_main");
			snprintf(bgw.bgw_name, BGW_MAXLEN, "streamwin starter for database %u", lfirst_oid(lc));
			snprintf(bgw.bgw_type, BGW_MAXLEN, "streamwin starter");
			bgw.bgw_main_arg = ObjectIdGetDatum(lfirst_oid(lc));
			bgw.bgw_notify_pid = MyProcPid;
			if (!RegisterDynamicBackgroundWorker(&bgw, &handle))
			{
				/*
				 * No free worker process now: retry next round.  The
				 * starter would have recorded why on each query; nobody
				 * else can, so say it here, once until a round starts its
				 * starters again (a full server would say it every round).
				 */
				if (!starters_failed)
					ereport(WARNING,
							(errmsg("streamwin launcher could not start a starter: every background worker process is taken"),
							 errdetail("Queries meant to run in this or later databases get no worker until one is free (max_worker_processes = %d).",
									   max_worker_processes),
							 errhint("Raise max_worker_processes and restart the server, or stop queries; the launcher tries again every %d seconds.",
									 streamwin_launcher_naptime)));
				starters_failed = true;
				break;
			}
			if (WaitForBackgroundWorkerStartup(handle, &pid) == BGWH_STARTED)
			{
				WaitForBackgroundWorkerShutdown(handle);
				starters_failed = false;
			}
			if (ShutdownRequestPending)
				break;
		}
		list_free(dbs);

		/*
		 * A shutdown that came while a starter ran: the wait for the starter
		 * took the latch that the request set, so the wait below would not
		 * end before the naptime (a fast shutdown waited that long for us).
		 */
		if (ShutdownRequestPending)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 streamwin_launcher_naptime * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	/*
	 * Exit code 1: the postmaster unregisters a background worker that
	 * exits with 0, and a launcher ended by pg_terminate_backend() would
	 * never come back (in a shutdown it is not started again anyway).
	 */
	proc_exit(1);
}

/*
 * Drop the slots of table sources that no longer exist (see
 * source_slots_reap), so that nothing holds WAL for them.  Only when
 * logical decoding is possible at all.
 */
static void
reap_orphan_slots(void)
{
	List	   *known = NIL;

	if (wal_level < WAL_LEVEL_LOGICAL || max_replication_slots == 0)
		return;
	if (!source_slots_try_lock())
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(get_extension_oid("streamwin", true)))
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		known = catalog_source_slots();
		MemoryContextSwitchTo(old);
	}
	PopActiveSnapshot();
	source_slots_reap(known);
}

/*
 * Is streamwin installed here with a catalog of another version than the
 * library's (a package upgrade before ALTER EXTENSION UPDATE)?  Then its
 * queries meant to run say so, and nothing else reads the catalog: which
 * slots are orphans cannot be told, and no worker could run.
 */
static bool
catalog_awaits_update(void)
{
	char	   *mismatch = NULL;

	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(get_extension_oid("streamwin", true)) &&
		(mismatch = catalog_version_mismatch()) != NULL)
		catalog_record_version_mismatch(mismatch);
	PopActiveSnapshot();
	return mismatch != NULL;
}

/*
 * streamwin_starter_main
 *		In one database: drop orphan slots, warn about table sources whose
 *		slots retain too much WAL (table_slot.c), and start a worker for
 *		every query marked running that has none.  Exits at once where
 *		streamwin is not installed, and where its catalog awaits ALTER
 *		EXTENSION UPDATE, once its queries say so.
 */
void
streamwin_starter_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);

	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

	/*
	 * The launcher waits for each starter in turn: a query's row locked by
	 * a transaction left open (an alter_query not committed) must not hold
	 * the starts of every database.  What a starter could not record, the
	 * next round records.
	 */
	SetConfigOption("lock_timeout", "1s", PGC_USERSET, PGC_S_SESSION);

	StartTransactionCommand();
	if (catalog_awaits_update())
	{
		CommitTransactionCommand();
		proc_exit(0);
	}
	reap_orphan_slots();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(get_extension_oid("streamwin", true)))
	{
		List	   *failed = NIL;
		List	   *query_ids;
		List	   *owners;
		ListCell   *lc;
		ListCell   *lo;

		SPI_connect();
		/* warn about table sources whose slots retain too much WAL */
		source_slots_check_retention();
		catalog_running_queries(&query_ids, &owners);
		forboth(lc, query_ids, lo, owners)
		{
			int32		query_id = lfirst_int(lc);
			Oid			owner = lfirst_oid(lo);
			char	   *message;
			char	   *hint;
			char	   *why = NULL;

			/*
			 * A worker whose owner is gone or lost LOGIN since the query
			 * started would fail to connect (FATAL, in the server log
			 * only, at every start), and one without a free worker
			 * process would not start (a WARNING there): say so on the
			 * query instead, where users look.
			 */
			/*
			 * One whose worker runs already is left alone: a worker that
			 * connected keeps running when its owner loses LOGIN since.
			 */
			if (worker_pid(dboid, query_id) != 0)
				continue;
			if (role_cannot_run_worker(owner, &message, &hint))
				why = psprintf("%s\nHINT: %s", message, hint);
			else if (!worker_start_now(dboid, query_id, owner))
				why = psprintf("could not start a worker: every background worker process is taken "
							   "(max_worker_processes = %d)\n"
							   "HINT: Raise max_worker_processes and restart the server, or stop "
							   "other queries; the launcher tries again every %d seconds (streamwin.launcher_naptime).",
							   max_worker_processes, streamwin_launcher_naptime);
			if (why != NULL)
				failed = lappend(failed, list_make2(makeInteger(query_id), makeString(why)));
		}
		foreach(lc, failed)
			catalog_record_failure(intVal(linitial(lfirst(lc))), strVal(lsecond(lfirst(lc))));
		SPI_finish();
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	proc_exit(0);
}

