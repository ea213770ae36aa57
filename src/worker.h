/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The background worker that runs one continuous query.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_WORKER_H
#define STREAMWIN_WORKER_H

/* Passed in bgw_extra: where the worker connects, and as whom. */
typedef struct WorkerExtra
{
	Oid			dboid;
	Oid			owner;
} WorkerExtra;

PGDLLEXPORT void streamwin_worker_main(Datum main_arg);

/* streamwin.worker_keep_memory (MB): free memory a worker keeps for its next batch */
extern int	streamwin_worker_keep_memory;

/* launcher.c: the shared registry of live workers */
typedef enum WorkerClaim
{
	CLAIM_OK,
	CLAIM_TAKEN,				/* another live worker runs the query */
	CLAIM_FULL					/* streamwin.max_workers workers run already */
} WorkerClaim;

extern WorkerClaim worker_claim_slot(Oid dboid, int32 query_id);
extern void worker_release_slot(int code, Datum arg);

#endif
