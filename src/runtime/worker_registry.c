/*-------------------------------------------------------------------------
 *
 * worker_registry.c
 *	  Query workers in shared memory: which query each runs, starting and
 *	  waking them (at once, or when the current transaction commits), and
 *	  who may run one (see worker_registry.h).
 *
 * A worker claims its (database, query) slot first and exits if another
 * live worker holds it, so that duplicate starts are harmless.  stop_query
 * and drop_query set the worker's latch at commit; the worker sees the
 * query's desired state and exits after its current batch.
 *
 * A start that finds a live worker marks its slot instead: that worker may
 * be on its way out (it read the query stopped just before the start
 * committed, or it runs another query of the same id, the extension having
 * been created anew), and one on its way out starts its successor as it
 * releases the slot (or, with no background worker process free then,
 * the launcher's next round does).  A worker clears the mark before each
 * reading of its query, so a mark it finds at exit came from a start it
 * has not seen.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "worker_registry.h"

/* streamwin.max_workers */
int			streamwin_max_workers = 32;

/* streamwin.launcher_naptime (s) */
int			streamwin_launcher_naptime = 30;

/* Is the library loaded through shared_preload_libraries? (_PG_init) */
bool		streamwin_preloaded = false;

typedef struct WorkerSlot
{
	Oid			dboid;
	int32		query_id;
	pid_t		pid;			/* 0: free */
	Latch	   *latch;
	bool		restart;		/* a start came: at exit, start a worker */
	bool		woken;			/* a start or a wake came (worker_woken) */
	Oid			restart_owner;	/* as this role */
} WorkerSlot;

typedef struct StreamwinShared
{
	LWLock	   *lock;
	int			nslots;
	WorkerSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} StreamwinShared;

static StreamwinShared *shared = NULL;


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
workers_shmem_request(void)
{
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche("streamwin", 1);
}

void
workers_shmem_startup(void)
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

/* pid of the live worker of a query, 0 if none */
int
worker_pid(Oid dboid, int32 query_id)
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
	shared->slots[free_slot].restart = false;
	shared->slots[free_slot].woken = false;
	LWLockRelease(shared->lock);
	return CLAIM_OK;
}

/* This worker's slot; the lock held */
static WorkerSlot *
own_slot(void)
{
	for (int i = 0; i < shared->nslots; i++)
		if (shared->slots[i].pid == MyProcPid)
			return &shared->slots[i];
	return NULL;
}

/* See worker_registry.h */
void
worker_clear_restart(void)
{
	WorkerSlot *s;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if ((s = own_slot()) != NULL)
	{
		s->restart = false;
		s->woken = false;
	}
	LWLockRelease(shared->lock);
}

bool
worker_woken(void)
{
	WorkerSlot *s;
	bool		woken = false;

	LWLockAcquire(shared->lock, LW_SHARED);
	if ((s = own_slot()) != NULL)
		woken = s->woken;
	LWLockRelease(shared->lock);
	return woken;
}

void
worker_restart_at_exit(Oid owner)
{
	WorkerSlot *s;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if ((s = own_slot()) != NULL)
	{
		s->restart = true;
		s->restart_owner = owner;
	}
	LWLockRelease(shared->lock);
}

static bool register_worker(Oid dboid, int32 query_id, Oid owner);

/*
 * Release this process's slot; on_shmem_exit callback of a query worker.
 * A start that came while it was on its way out starts its successor,
 * which reads the query again (and exits if it is not to run).
 */
void
worker_release_slot(int code, Datum arg)
{
	WorkerSlot *s;
	WorkerSlot	released = {0};

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if ((s = own_slot()) != NULL)
	{
		released = *s;
		s->pid = 0;
		s->restart = false;
	}
	LWLockRelease(shared->lock);
	if (released.restart)
		(void) register_worker(released.dboid, released.query_id, released.restart_owner);
}

/*
 * Start a worker for the query now, unless one runs: then mark its slot
 * and wake it (see the top of this file).  Returns false if no background
 * worker process was free.
 */
bool
worker_start_now(Oid dboid, int32 query_id, Oid owner)
{
	bool		running = false;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
	{
		WorkerSlot *s = &shared->slots[i];

		if (s->pid != 0 && s->dboid == dboid && s->query_id == query_id)
		{
			s->restart = true;
			s->restart_owner = owner;
			s->woken = true;
			SetLatch(s->latch);
			running = true;
		}
	}
	LWLockRelease(shared->lock);
	return running || register_worker(dboid, query_id, owner);
}

static bool
register_worker(Oid dboid, int32 query_id, Oid owner)
{
	BackgroundWorker bgw;
	BackgroundWorkerHandle *handle;
	WorkerExtra extra;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	/*
	 * A worker that exits on an error (or is ended inside a batch) is
	 * started again by the launcher's next round, which first checks that
	 * its query still runs and its owner may log in: the postmaster would
	 * restart one whose owner lost LOGIN, or was dropped, every few
	 * seconds for good, and keep doing so across a crash restart.
	 */
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
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
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
	{
		WorkerSlot *s = &shared->slots[i];

		if (s->pid != 0 && s->dboid == dboid && s->query_id == query_id)
		{
			s->woken = true;
			SetLatch(s->latch);
		}
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
 * worker_request_start / worker_request_wake
 *		Start the query's worker, or wake it to read its query again (to
 *		stop, or to take changed settings), when the current transaction
 *		commits.
 */
void
worker_request_start(int32 query_id, Oid owner)
{
	add_pending(query_id, owner, true);
}

void
worker_request_wake(int32 query_id)
{
	add_pending(query_id, InvalidOid, false);
}

void
workers_xact_callback(XactEvent event, void *arg)
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
						worker_start_now(MyDatabaseId, p->query_id, p->owner);
					else
						wake_worker_now(MyDatabaseId, p->query_id);
				}
			}
			pending = NIL;		/* the list lived in TopTransactionContext */
			break;
		case XACT_EVENT_PRE_PREPARE:

			/*
			 * A prepared transaction commits in another session, or none,
			 * and this one would never act on its requests.
			 */
			if (pending != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that started, stopped or changed a streamwin query"),
						 errhint("Start, stop or change queries in transactions that commit.")));
			break;
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pending = NIL;
			break;
		default:
			break;
	}
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
	if (!((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin)
	{
		ReleaseSysCache(tup);
		*message = psprintf("role \"%s\" cannot run a query worker because it cannot log in", name);
		*hint = psprintf("Grant it with ALTER ROLE %s LOGIN, or run batches with streamwin.run_batch().",
						 quote_identifier(name));
		return true;
	}
	ReleaseSysCache(tup);
	/* (and PostgreSQL checks CONNECT for a worker as for a client) */
	if (!superuser_arg(roleid) &&
		pg_database_aclcheck(MyDatabaseId, roleid, ACL_CONNECT) != ACLCHECK_OK)
	{
		char	   *db = get_database_name(MyDatabaseId);

		*message = psprintf("role \"%s\" cannot run a query worker because it may not connect to database \"%s\"",
							name, db);
		*hint = psprintf("Grant it with GRANT CONNECT ON DATABASE %s TO %s, or run batches with streamwin.run_batch().",
						 quote_identifier(db), quote_identifier(name));
		return true;
	}
	return false;
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
				 errhint("Add streamwin to shared_preload_libraries and restart the server. "
						 "Without workers a query runs in sessions: create it with start => false and run its batches with streamwin.run_batch().")));
}
