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

#endif
