/*-------------------------------------------------------------------------
 *
 * window.h
 *	  Event-time window arithmetic shared by the SQL window functions and
 *	  the query compiler.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_WINDOW_H
#define STREAMWIN_WINDOW_H

#include "datatype/timestamp.h"

/* the most hopping windows a row may fall in (hop_starts, create_query) */
#define HOP_MAX_WINDOWS 100000

extern int64 window_size_usec(const Interval *iv, const char *argname);
extern int64 hop_windows_per_row(int64 size_us, int64 slide_us);
extern TimestampTz window_floor(TimestampTz ts, int64 size_us);
extern bool window_fits(TimestampTz ts, int64 size_us, int64 slide_us);

#endif
