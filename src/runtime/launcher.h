/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  The launcher background worker and the per-database starters
 *	  (launcher.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_LAUNCHER_H
#define STREAMWIN_LAUNCHER_H

/* Register the launcher; called from _PG_init while preloading. */
extern void launcher_register(void);

/* Background worker entry points (by name, in bgw_function_name). */
extern PGDLLEXPORT void streamwin_launcher_main(Datum main_arg);
extern PGDLLEXPORT void streamwin_starter_main(Datum main_arg);

#endif							/* STREAMWIN_LAUNCHER_H */
