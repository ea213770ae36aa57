/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  Starting and waking query workers, the shared registry of live
 *	  workers, and who may run one (launcher.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_LAUNCHER_H
#define STREAMWIN_LAUNCHER_H

#include "access/xact.h"

/* streamwin.launcher_naptime (s): the time between the launcher's rounds */
extern int	streamwin_launcher_naptime;

/* At library load (shared_preload_libraries): the launcher and its memory. */
extern void launcher_register(void);
extern void launcher_shmem_request(void);
extern void launcher_shmem_startup(void);

/*
 * Requests acted on when the current transaction commits (before that a
 * worker could not see the query): start the query's worker, or set its
 * latch (stop_query, drop_query, alter_query).
 */
extern void launcher_request_start(int32 query_id, Oid owner);
extern void launcher_request_wake(int32 query_id);
extern void launcher_xact_callback(XactEvent event, void *arg);

/* The pid of the query's live worker, or 0. */
extern int	launcher_worker_pid(Oid dboid, int32 query_id);

/* A worker claims its (database, query) slot first: one worker per query. */
typedef enum WorkerClaim
{
	CLAIM_OK,
	CLAIM_TAKEN,				/* another live worker runs the query */
	CLAIM_FULL					/* streamwin.max_workers workers run already */
} WorkerClaim;

extern WorkerClaim worker_claim_slot(Oid dboid, int32 query_id);
extern void worker_release_slot(int code, Datum arg);

/*
 * Who may run a worker: a role that exists and can log in (a worker
 * connects as the query's owner), with streamwin preloaded.
 * role_cannot_run_worker says why not (a message and a hint), or returns
 * false; the check_ functions raise the error.
 */
extern bool role_cannot_run_worker(Oid roleid, char **message, char **hint);
extern void check_role_can_login(Oid roleid);
extern void check_preloaded(void);

#endif							/* STREAMWIN_LAUNCHER_H */
