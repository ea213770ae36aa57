/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  Starting and stopping query workers: the launcher, the per-database
 *	  starter, the shared worker registry and the commit-time requests.
 *
 * Who starts a query worker:
 *	- create_query(start => true) and start_query(), when their transaction
 *	  commits (before that the worker could not see the query);
 *	- at server start, and every streamwin.launcher_naptime afterwards, the
 *	  launcher: it cannot read another database's catalog itself, so for
 *	  each database it runs a short-lived "starter" worker there, which
 *	  starts workers for the queries marked running that have none;
 *	- the postmaster, which restarts a worker that exited on an error
 *	  (bgw_restart_time).
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
#include "worker.h"

PGDLLEXPORT void streamwin_launcher_main(Datum main_arg);
PGDLLEXPORT void streamwin_starter_main(Datum main_arg);

typedef struct WorkerSlot
{
	Oid			dboid;
	int32		query_id;
	pid_t		pid;			/* 0: free */
	Latch	   *latch;
} WorkerSlot;

typedef struct StreamwinShared
{
	LWLock	   *lock;
	int			nslots;
	WorkerSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} StreamwinShared;

static StreamwinShared *shared = NULL;


int			streamwin_launcher_naptime = 30;

/* requests made in the current transaction, acted on at commit */
typedef struct PendingRequest
{
	int32		query_id;
	Oid			owner;
	bool		start;
} PendingRequest;

static List *pending = NIL;

static Size
shared_size(void)
{
	return add_size(offsetof(StreamwinShared, slots),
					mul_size(sizeof(WorkerSlot), streamwin_max_workers));
}

void
launcher_shmem_request(void)
{
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche("streamwin", 1);
}

void
launcher_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("streamwin", shared_size(), &found);
	if (!found)
	{
		shared->lock = &(GetNamedLWLockTranche("streamwin"))->lock;
		shared->nslots = streamwin_max_workers;
		memset(shared->slots, 0, sizeof(WorkerSlot) * shared->nslots);
	}
	LWLockRelease(AddinShmemInitLock);
}

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

/* pid of the live worker of a query, 0 if none */
int
launcher_worker_pid(Oid dboid, int32 query_id)
{
	int			pid = 0;

	if (shared == NULL)
		return 0;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->slots[i].pid != 0 && shared->slots[i].dboid == dboid &&
			shared->slots[i].query_id == query_id)
			pid = shared->slots[i].pid;
	LWLockRelease(shared->lock);
	return pid;
}

/*
 * worker_claim_slot
 *		Called by a query worker at start.  Returns CLAIM_TAKEN if another
 *		live worker already runs the query, CLAIM_FULL if streamwin.max_workers
 *		workers run already (the caller then exits either way).
 */
WorkerClaim
worker_claim_slot(Oid dboid, int32 query_id)
{
	int			free_slot = -1;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
	{
		WorkerSlot *s = &shared->slots[i];

		if (s->pid != 0 && s->dboid == dboid && s->query_id == query_id)
		{
			/* a slot left by a worker that died without cleanup? */
			if (kill(s->pid, 0) == 0 && s->pid != MyProcPid)
			{
				LWLockRelease(shared->lock);
				return CLAIM_TAKEN;
			}
			s->pid = 0;
		}
		if (s->pid == 0 && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
	{
		LWLockRelease(shared->lock);
		return CLAIM_FULL;
	}
	shared->slots[free_slot].dboid = dboid;
	shared->slots[free_slot].query_id = query_id;
	shared->slots[free_slot].pid = MyProcPid;
	shared->slots[free_slot].latch = MyLatch;
	LWLockRelease(shared->lock);
	return CLAIM_OK;
}

/* Release this process's slot; on_shmem_exit callback of a query worker. */
void
worker_release_slot(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
		if (shared->slots[i].pid == MyProcPid)
			shared->slots[i].pid = 0;
	LWLockRelease(shared->lock);
}

/* Returns false if no background worker slot was free. */
static bool
start_worker_now(Oid dboid, int32 query_id, Oid owner)
{
	BackgroundWorker bgw;
	BackgroundWorkerHandle *handle;
	WorkerExtra extra;

	if (launcher_worker_pid(dboid, query_id) != 0)
		return true;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* an error that escapes the batch loop: let the postmaster restart it */
	bgw.bgw_restart_time = 5;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "streamwin");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "streamwin_worker_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "streamwin worker for query %d", query_id);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "streamwin worker");
	bgw.bgw_main_arg = Int32GetDatum(query_id);
	extra.dboid = dboid;
	extra.owner = owner;
	memcpy(bgw.bgw_extra, &extra, sizeof(extra));
	bgw.bgw_notify_pid = 0;

	if (!RegisterDynamicBackgroundWorker(&bgw, &handle))
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a streamwin worker for query %d", query_id),
				 errhint("Increase max_worker_processes; the launcher will retry.")));
		return false;
	}
	return true;
}

static void
wake_worker_now(Oid dboid, int32 query_id)
{
	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots; i++)
	{
		WorkerSlot *s = &shared->slots[i];

		if (s->pid != 0 && s->dboid == dboid && s->query_id == query_id)
			SetLatch(s->latch);
	}
	LWLockRelease(shared->lock);
}

static void
add_pending(int32 query_id, Oid owner, bool start)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingRequest *p = palloc(sizeof(PendingRequest));

	p->query_id = query_id;
	p->owner = owner;
	p->start = start;
	pending = lappend(pending, p);
	MemoryContextSwitchTo(old);
}

/*
 * launcher_request_start / launcher_request_wake
 *		Start the query's worker, or wake it to read its query again (to
 *		stop, or to take changed settings), when the current transaction
 *		commits.
 */
void
launcher_request_start(int32 query_id, Oid owner)
{
	add_pending(query_id, owner, true);
}

void
launcher_request_wake(int32 query_id)
{
	add_pending(query_id, InvalidOid, false);
}

void
launcher_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
			if (shared != NULL)
			{
				foreach(lc, pending)
				{
					PendingRequest *p = lfirst(lc);

					if (p->start)
						start_worker_now(MyDatabaseId, p->query_id, p->owner);
					else
						wake_worker_now(MyDatabaseId, p->query_id);
				}
			}
			pending = NIL;		/* the list lived in TopTransactionContext */
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pending = NIL;
			break;
		default:
			break;
	}
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
				break;			/* no free worker slot now: retry next round */
			if (WaitForBackgroundWorkerStartup(handle, &pid) == BGWH_STARTED)
				WaitForBackgroundWorkerShutdown(handle);
			if (ShutdownRequestPending)
				break;
		}
		list_free(dbs);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 streamwin_launcher_naptime * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	proc_exit(0);
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
	source_slots_lock();
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
 * streamwin_starter_main
 *		In one database: drop orphan slots, warn about table sources whose
 *		slots retain too much WAL (table_slot.c), and start a worker for
 *		every query marked running that has none.  Exits at once where
 *		streamwin is not installed.
 */
void
streamwin_starter_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);

	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

	StartTransactionCommand();
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
			if (role_cannot_run_worker(owner, &message, &hint))
				why = psprintf("%s\nHINT: %s", message, hint);
			else if (!start_worker_now(dboid, query_id, owner))
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

/* --- who may run a worker ------------------------------------------------ */

/*
 * role_cannot_run_worker
 *		Why role roleid cannot run a query worker (a message and a hint),
 *		or false if it can.  A worker connects as the query's owner, and
 *		PostgreSQL 15 refuses background worker connections of roles that
 *		are gone or lack LOGIN.
 */
bool
role_cannot_run_worker(Oid roleid, char **message, char **hint)
{
	HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(roleid));
	char	   *name;

	if (!HeapTupleIsValid(tup))
	{
		*message = psprintf("role with OID %u, which owns the query, no longer exists", roleid);
		*hint = pstrdup("Drop the query and create it again as another role.");
		return true;
	}
	name = pstrdup(NameStr(((Form_pg_authid) GETSTRUCT(tup))->rolname));
	if (((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin)
	{
		ReleaseSysCache(tup);
		return false;
	}
	ReleaseSysCache(tup);
	*message = psprintf("role \"%s\" cannot run a query worker because it cannot log in", name);
	*hint = psprintf("Grant it with ALTER ROLE %s LOGIN, or run batches with streamwin.run_batch().",
					 quote_identifier(name));
	return true;
}

/* Refuse, with an error, to start a worker that could not connect. */
void
check_role_can_login(Oid roleid)
{
	char	   *message;
	char	   *hint;

	if (role_cannot_run_worker(roleid, &message, &hint))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s", message),
				 errdetail("The worker of a query connects as the query's owner."),
				 errhint("%s", hint)));
}

void
check_preloaded(void)
{
	if (!streamwin_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("streamwin background workers need streamwin in shared_preload_libraries"),
				 errhint("Add streamwin to shared_preload_libraries and restart the server, or run batches with streamwin.run_batch().")));
}
