/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background worker of one continuous query: the batch loop.
 *
 * The worker connects as the query's owner, so batches run with exactly
 * that role's privileges.  Each loop iteration is one transaction holding
 * one batch.  A batch that fails is rolled back whole (offsets included),
 * its error is recorded on the query in a transaction of its own, and the
 * batch is retried after an exponential backoff (1 s doubling to 60 s).
 *
 * Between batches the worker waits on its latch: for trigger_interval, or
 * with trigger_interval 0, or after a batch that found nothing, for the
 * source's wakeup descriptor where it has one (a Kafka consumer's, which
 * librdkafka writes when messages arrive), and at least every
 * IDLE_CHECK_MS.  It never sleeps in
 * a loop.  stop_query and drop_query set the latch; SIGTERM ends the
 * worker after the current batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "batch_memory.h"
#include "runner_cache.h"
#include "catalog.h"
#include "worker_registry.h"
#include "worker.h"

#define BACKOFF_MIN_MS	1000L
#define BACKOFF_MAX_MS	60000L

/* how long to wait for data when woken, before taking what is there */
#define WORKER_FETCH_TIMEOUT_MS 100

/* without new data, still look at the query (stop, idle watermark) this often */
#define IDLE_CHECK_MS 1000L

/* The extension when this worker first read its query */
static Oid	worker_extension = InvalidOid;

/* Set while a batch's transaction is open (see worker_sigterm) */
static volatile sig_atomic_t batch_open = false;

/*
 * SIGTERM (a fast shutdown, pg_terminate_backend): between batches the
 * loop ends and the worker exits cleanly; inside a batch it ends the batch
 * at once, as it would a backend's query, and the process with it: a batch
 * waits on locks without ever seeing a shutdown request (a prepared
 * transaction holding a row of its result table would hold the shutdown
 * for good), and a batch rolled back loses nothing.
 */
static void
worker_sigterm(SIGNAL_ARGS)
{
	if (batch_open)
		die(postgres_signal_arg);
	else
		SignalHandlerForShutdownRequest(postgres_signal_arg);
}

/* The query, or NULL once it is dropped (DROP EXTENSION drops them all). */
static QueryInfo *
query_if_exists(int32 query_id)
{
	if (!OidIsValid(get_extension_oid("streamwin", true)))
		return NULL;
	return catalog_get_query_by_id(query_id, true);
}

/*
 * Is q the query this worker runs, connected as owner?  Query ids begin
 * again when the extension is dropped and created anew, and another query
 * of its id may be another role's.
 */
static bool
query_is_this_workers(QueryInfo *q, Oid owner)
{
	Oid			extension = get_extension_oid("streamwin", false);

	if (!OidIsValid(worker_extension))
		worker_extension = extension;
	return extension == worker_extension && q->owner == owner;
}

/*
 * Start a transaction and read the query: whether it still wants to run,
 * and its settings as they are now.  Returns NULL (with no transaction
 * open) when the worker should exit.  Another query of its id, to run,
 * gets a worker of its own when this one exits.
 */
static QueryInfo *
begin_batch_transaction(int32 query_id, Oid owner)
{
	QueryInfo  *q;

	/* a start from now on is one this reading may not see */
	worker_clear_restart();
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	q = query_if_exists(query_id);
	if (q != NULL && q->desired_running && !query_is_this_workers(q, owner))
	{
		worker_restart_at_exit(q->owner);
		q = NULL;
	}
	if (q == NULL || !q->desired_running)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		return NULL;
	}
	return q;
}

/*
 * Run fn(arg) in a transaction of its own, outside the batch loop's error
 * handling: an error is logged and the transaction rolled back (e.g. the
 * database is shutting down; the log then has the reason).
 */
static void
run_in_own_transaction(void (*fn) (void *), void *arg)
{
	PG_TRY();
	{
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		fn(arg);
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
}

/*
 * Was the query dropped (drop_query, DROP EXTENSION)?  Asked after a batch
 * failed, outside any transaction.  If even the question fails (the server
 * shuts down), the answer is no: the batch's error is then reported as
 * usual.
 */
static bool
query_dropped(int32 query_id)
{
	volatile bool dropped = false;

	PG_TRY();
	{
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		dropped = query_if_exists(query_id) == NULL;
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	return dropped;
}

/* Log an error that was caught and copied, as it would have been logged. */
static void
emit_copied_error(ErrorData *edata)
{
	PG_TRY();
	{
		ThrowErrorData(edata);
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
}

typedef struct FailureRecord
{
	int32		query_id;
	const char *message;
} FailureRecord;

static void
record_failure_in_transaction(void *arg)
{
	FailureRecord *f = (FailureRecord *) arg;

	catalog_record_failure(f->query_id, f->message);
}

/* Record a failure on the query, in a transaction of its own. */
static void
record_failure_message(int32 query_id, const char *message)
{
	FailureRecord f;

	f.query_id = query_id;
	f.message = message;
	run_in_own_transaction(record_failure_in_transaction, &f);
}

static void
record_failure(int32 query_id, ErrorData *edata)
{
	StringInfoData message;

	/* the whole report: users of a worker see nothing but this */
	initStringInfo(&message);
	appendStringInfoString(&message, edata->message);
	if (edata->detail)
		appendStringInfo(&message, "\nDETAIL: %s", edata->detail);
	if (edata->hint)
		appendStringInfo(&message, "\nHINT: %s", edata->hint);
	record_failure_message(query_id, message.data);
	/* (in the memory the abort left current, which nothing resets) */
	pfree(message.data);
}

/*
 * When the worker stops: its source may let go of what it kept for the
 * query (a table source's slot, when no query reads the source any more:
 * drop_query leaves that to the worker when the worker holds the slot).
 */
static void
source_query_gone_in_transaction(void *arg)
{
	int32		source_id = *(int32 *) arg;
	SourceInfo *src;

	/* the extension created anew: that id is another source's now */
	if (get_extension_oid("streamwin", true) != worker_extension)
		return;
	SPI_connect();
	/* drop_source after drop_query: nothing is kept for it any more */
	src = catalog_get_source_by_id(source_id, true);
	if (src != NULL && source_ops(src)->query_gone)
		source_ops(src)->query_gone(src);
	SPI_finish();
}

/* How long until trigger_interval has passed since the batch that started at started. */
/* Can a source of the query say that data arrived (SourceOps.wakeup_fd)? */
static bool
runner_can_wake(QueryRunner *r)
{
	for (int i = 0; i < r->nreaders; i++)
		if (r->readers[i]->ops->wakeup_fd != NULL)
			return true;
	return false;
}

/*
 * Wait for the latch, the timeout and, with WL_SOCKET_READABLE in events,
 * data from any source of the query; returns the WaitLatch events.  A
 * query over one source waits on its socket as WaitLatchOrSocket does; a
 * join's sources each have one.
 */
static int
wait_for_data(QueryRunner *r, int events, long wait_ms)
{
	WaitEventSet *set;
	WaitEvent	event;
	int			rc = 0;

	/* (a catalog of an earlier version may hold a longer trigger_interval) */
	wait_ms = Min(wait_ms, INT_MAX);
	if (!(events & WL_SOCKET_READABLE))
		return WaitLatch(MyLatch, events, wait_ms, PG_WAIT_EXTENSION);
	if (r->nreaders == 1)
		return WaitLatchOrSocket(MyLatch, events, r->readers[0]->ops->wakeup_fd(r->readers[0]),
								 wait_ms, PG_WAIT_EXTENSION);
	set = CreateWaitEventSet(CurrentMemoryContext, 2 + r->nreaders);
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < r->nreaders; i++)
		if (r->readers[i]->ops->wakeup_fd != NULL)
			AddWaitEventToSet(set, WL_SOCKET_READABLE, r->readers[i]->ops->wakeup_fd(r->readers[i]),
							  NULL, NULL);
	if (WaitEventSetWait(set, wait_ms, &event, 1, PG_WAIT_EXTENSION) == 0)
		rc = WL_TIMEOUT;
	else
		rc = event.events & (WL_LATCH_SET | WL_SOCKET_READABLE);
	FreeWaitEventSet(set);
	return rc;
}

static long
ms_until_trigger(QueryRunner *r, TimestampTz started)
{
	return Max(0, r->query->trigger_interval_us / 1000 - (GetCurrentTimestamp() - started) / 1000);
}

void
streamwin_worker_main(Datum main_arg)
{
	int32		query_id = DatumGetInt32(main_arg);
	WorkerExtra extra;
	MemoryContext loop_cxt;

	/* volatile: assigned inside PG_TRY and read after a longjmp */
	volatile long backoff_ms = 0;
	QueryRunner *volatile r = NULL;
	volatile bool known_ok = false; /* the catalog shows no failure */

	/* the query's sources, to tell when the worker stops */
	volatile int32 source_ids[QUERY_MAX_SOURCES];
	volatile int nsource_ids = 0;

	memcpy(&extra, MyBgworkerEntry->bgw_extra, sizeof(extra));
	batch_memory_keep();
	pqsignal(SIGTERM, worker_sigterm);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(extra.dboid, extra.owner, 0);

	switch (worker_claim_slot(MyDatabaseId, query_id))
	{
		case CLAIM_OK:
			break;
		case CLAIM_TAKEN:
			proc_exit(0);		/* another worker runs this query */
			break;
		case CLAIM_FULL:

			/*
			 * Say so on the query, where users look; exit 0 so that the
			 * postmaster does not restart this worker every few seconds: the
			 * launcher tries again every streamwin.launcher_naptime.
			 */
			record_failure_message(query_id,
								   psprintf("too many streamwin workers: all %d are running\n"
											"HINT: Raise streamwin.max_workers (and max_worker_processes) and restart the server, or stop some queries; the launcher tries again every %d seconds (streamwin.launcher_naptime).",
											streamwin_max_workers, streamwin_launcher_naptime));
			proc_exit(0);
			break;
	}
	on_shmem_exit(worker_release_slot, (Datum) 0);

	loop_cxt = AllocSetContextCreate(TopMemoryContext, "streamwin worker loop",
									 ALLOCSET_DEFAULT_SIZES);

	while (!ShutdownRequestPending)
	{
		TimestampTz started = GetCurrentTimestamp();
		BatchStats	stats;
		volatile bool full = false;
		long		wait_ms;
		long		stats_pending_ms;
		int			events;
		int			rc;
		volatile bool stop = false;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);

		PG_TRY();
		{
			QueryInfo  *q;

			/* a cancel is a failed batch, as one inside the batch is */
			CHECK_FOR_INTERRUPTS();
			batch_open = true;
			/* asked to stop just before: the batch is not begun */
			if (ShutdownRequestPending)
				q = NULL;
			else
				q = begin_batch_transaction(query_id, extra.owner);

			if (q == NULL)
			{
				batch_open = false;
				stop = true;	/* stopped or dropped; never leave PG_TRY by
								 * break */
			}
			else
			{
				/* alter_query changed its settings: a runner built with them */
				if (r != NULL && runner_settings_changed(q))
					r = NULL;
				if (r == NULL)
				{
					/*
					 * The query's batch lock before its tables' locks, which
					 * making a runner takes (its statements): drop_query
					 * takes them in that order, and the other deadlocked
					 * with it.  The batch takes the lock again.
					 */
					catalog_lock_query(query_id);
					r = runner_get(query_id, true);
					for (int i = 0; i < r->nreaders; i++)
						source_ids[i] = r->readers[i]->source->source_id;
					nsource_ids = r->nreaders;
					pgstat_report_appname(psprintf("streamwin: %s", r->query->name));
				}
				pgstat_report_activity(STATE_RUNNING, "streamwin batch");
				/* no linger: what is still on its way goes in the next batch */
				batch_execute(r, WORKER_FETCH_TIMEOUT_MS, 0, &stats);

				/* an empty batch records no progress: clear a failure here */
				if (!known_ok)
					catalog_clear_failure(query_id);
				/* a backlog, or a crash replay: go on without waiting */
				full = stats.full || stats.replayed;
				PopActiveSnapshot();
				CommitTransactionCommand();
				batch_open = false;
				pgstat_report_activity(STATE_IDLE, NULL);
				backoff_ms = 0;
				known_ok = true;
			}
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(loop_cxt);
			edata = CopyErrorData();
			FlushErrorState();
			AbortCurrentTransaction();
			batch_open = false;
			pgstat_report_activity(STATE_IDLE, NULL);

			/*
			 * drop_query while the batch ran: the batch fails on the
			 * vanished query or its tables, which is how a worker learns of
			 * it, not a failure to log or record.
			 */
			if (query_dropped(query_id))
				stop = true;
			else
			{
				emit_copied_error(edata);
				record_failure(query_id, edata);
				known_ok = false;
				backoff_ms = Min(Max(backoff_ms * 2, BACKOFF_MIN_MS), BACKOFF_MAX_MS);
				/* the consumer may be broken (e.g. brokers gone): reopen it */
				if (r != NULL)
				{
					runner_forget(query_id);
					r = NULL;
				}
			}
		}
		PG_END_TRY();
		if (stop)
			break;

		/*
		 * A SIGTERM outside a batch sets the flag and the latch; a wait
		 * since (recording a failure: a row lock, a synchronous commit)
		 * may have reset the latch, and the wait below would last the
		 * failure's backoff, up to a minute, before the loop saw the flag.
		 */
		if (ShutdownRequestPending)
			break;

		/*
		 * The batch's table statistics (pg_stat_user_tables, and through them
		 * autovacuum's view of the result and state tables, which batches
		 * update all the time) reach shared memory only when the process
		 * reports them: a backend does when it goes idle, a background worker
		 * has to.  At most once a second while batches run back to back
		 * (pgstat's own pace); before a longer wait, at once (below).
		 */
		stats_pending_ms = pgstat_report_stat(false);

		/* a full batch means a backlog: go on at once */
		if (full && backoff_ms == 0)
			continue;

		/*
		 * A stop, a start or an alter_query since the query was read: read
		 * it again now.  Its latch alone does not say so, when a wait inside
		 * the batch (a lock, a synchronous commit) reset it.
		 */
		if (worker_woken())
			continue;

		events = WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH;
		if (backoff_ms > 0)
			wait_ms = backoff_ms;
		else if (r->query->trigger_interval_us > 0 &&
				 !(stats.input_rows == 0 && runner_can_wake(r)))
			wait_ms = ms_until_trigger(r, started);
		else
		{
			/*
			 * trigger 0: run as soon as data arrives.  So too after a batch
			 * that found nothing, whatever the trigger, when the source can
			 * say that data arrived (a Kafka topic): an idle query then runs
			 * a batch (a transaction) when data comes, or every IDLE_CHECK_MS
			 * to look at its watermark, instead of one empty batch per
			 * trigger_interval.  Data never starts a batch sooner than
			 * trigger_interval after the last one (below).
			 */
			wait_ms = IDLE_CHECK_MS;
			if (runner_can_wake(r))
				events |= WL_SOCKET_READABLE;
		}
		if (wait_ms > 0)
		{
			if (stats_pending_ms > 0 && wait_ms > stats_pending_ms)
				pgstat_report_stat(true);
			rc = wait_for_data(r, events, wait_ms);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			for (int i = 0; r != NULL && i < r->nreaders; i++)
				if (r->readers[i]->ops->drain_wakeup != NULL)
					r->readers[i]->ops->drain_wakeup(r->readers[i]);
			/* woken by data: keep the trigger's pace all the same */
			if ((rc & WL_SOCKET_READABLE) && (wait_ms = ms_until_trigger(r, started)) > 0)
			{
				rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							   wait_ms, PG_WAIT_EXTENSION);
				if (rc & WL_LATCH_SET)
					ResetLatch(MyLatch);
			}
		}
	}

	if (r != NULL)
	{
		for (int i = 0; i < r->nreaders; i++)
			if (r->readers[i]->ops->release != NULL)
				run_in_own_transaction((void (*) (void *)) r->readers[i]->ops->release, r->readers[i]);
		runner_forget(query_id);
	}
	for (int i = 0; i < nsource_ids; i++)
	{
		int32		id = source_ids[i];

		run_in_own_transaction(source_query_gone_in_transaction, &id);
	}
	proc_exit(0);
}
