/*-------------------------------------------------------------------------
 *
 * options.h
 *	  Options and settings of sources and queries (options.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_OPTIONS_H
#define STREAMWIN_OPTIONS_H

#include "datatype/timestamp.h"
#include "utils/jsonb.h"

#include "catalog_types.h"
#include "jsonb_util.h"

/* A duration (interval) as microseconds; months and years are refused. */
extern int64 interval_to_usec(const Interval *iv, const char *what);

/*
 * The longest trigger_interval (a worker waits in milliseconds, an int:
 * 24 days is below 2^31 ms), and the longest watermark and idle timeout
 * (taken from event times: 100 years keeps a time in the timestamps' range
 * for any event after 4614 BC).
 */
#define MAX_TRIGGER_DAYS	24
#define MAX_EVENT_TIME_DAYS	36525
extern void check_duration_at_most(const Interval *iv, const char *what, int max_days,
								   const char *hint);





/* streamwin.max_records_per_batch: a source's default max_records_per_batch */
extern int	streamwin_default_max_records;

/*
 * A batch's most rows from src: its option max_records_per_batch, or the
 * setting as it is where the batch runs (a session's SET, a reload).
 */
static inline int32
source_max_records(const SourceInfo *src)
{
	return src->max_records_option > 0 ? src->max_records_option : streamwin_default_max_records;
}

/*
 * The options every kind of source has into src: starting_offsets,
 * max_records_per_batch, timezone, metadata.  A kind parses its own.
 */
extern void parse_source_options(SourceInfo *src, Jsonb *options);

/* At a source's creation: its option "timezone" as pg_timezone_names spells it. */
extern const char *source_timezone_name(const char *name);

/*
 * The zone a source's batches run in when its options name none (see
 * batch_execute; their date and interval styles are SQL_DATESTYLE and
 * SQL_INTERVALSTYLE).
 */
#define SOURCE_DEFAULT_TIMEZONE	"UTC"

extern void check_trigger_interval(const Interval *iv);
extern void check_idle_timeout(const Interval *iv);
extern void validate_query_options(Jsonb *options);

#endif							/* STREAMWIN_OPTIONS_H */
