/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  A query's background worker (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_WORKER_H
#define STREAMWIN_WORKER_H

/* Background worker entry point (by name, in bgw_function_name). */
extern PGDLLEXPORT void streamwin_worker_main(Datum main_arg);

#endif							/* STREAMWIN_WORKER_H */
