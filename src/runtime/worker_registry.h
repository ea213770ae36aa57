/*-------------------------------------------------------------------------
 *
 * worker_registry.h
 *	  Query workers in shared memory, and starting or waking them
 *	  (worker_registry.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_WORKER_REGISTRY_H
#define STREAMWIN_WORKER_REGISTRY_H

#include "access/xact.h"

/* GUCs */
extern int	streamwin_max_workers;
extern int	streamwin_launcher_naptime;

/* Is the library loaded through shared_preload_libraries? (_PG_init) */
extern bool streamwin_preloaded;

/* What a query worker is started with besides its query id (bgw_extra). */
typedef struct WorkerExtra
{
	Oid			dboid;
	Oid			owner;
} WorkerExtra;

/* The registry's shared memory, from _PG_init's hooks. */
extern void workers_shmem_request(void);
extern void workers_shmem_startup(void);

/* pid of the live worker of a query, 0 if none */
extern int	worker_pid(Oid dboid, int32 query_id);

typedef enum WorkerClaim
{
	CLAIM_OK,
	CLAIM_TAKEN,				/* another live worker runs the query */
	CLAIM_FULL					/* streamwin.max_workers workers run already */
} WorkerClaim;

/*
 * A query worker at start claims its query's slot (it exits unless
 * CLAIM_OK), and releases it at exit (an on_shmem_exit callback).
 */
extern WorkerClaim worker_claim_slot(Oid dboid, int32 query_id);
extern void worker_release_slot(int code, Datum arg);

/*
 * worker_clear_restart / worker_restart_at_exit
 *		A query worker clears its slot's marks (a start that found it
 *		running, a wake) before it reads its query, so that a mark found at
 *		exit is a start it has not seen, and starts its successor then
 *		(worker_release_slot).  Or it marks its slot itself: it exits, and
 *		its query is to run in a worker connected as owner.
 *
 * worker_woken
 *		Whether a start or a wake came since the worker last read its
 *		query: its latch may have been reset by a wait inside the batch (a
 *		lock, a synchronous commit), so the latch alone does not tell.
 */
extern void worker_clear_restart(void);
extern void worker_restart_at_exit(Oid owner);
extern bool worker_woken(void);

/*
 * Start a worker for the query now, unless one runs (then mark its slot
 * and wake it); false if no background worker process was free.
 */
extern bool worker_start_now(Oid dboid, int32 query_id, Oid owner);

/*
 * worker_request_start / worker_request_wake
 *		Start the query's worker, or wake it to read its query again (to
 *		stop, or to take changed settings), when the current transaction
 *		commits (workers_xact_callback).
 */
extern void worker_request_start(int32 query_id, Oid owner);
extern void worker_request_wake(int32 query_id);
extern void workers_xact_callback(XactEvent event, void *arg);

/* Who may run a worker: its query's owner must exist and log in. */
extern bool role_cannot_run_worker(Oid roleid, char **message, char **hint);
extern void check_role_can_login(Oid roleid);

/* Refuse, with an error, when workers cannot run (not preloaded). */
extern void check_preloaded(void);

#endif							/* STREAMWIN_WORKER_REGISTRY_H */
