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

#include "streamwin.h"

/* A duration (interval) as microseconds; months and years are refused. */
extern int64 interval_to_usec(const Interval *iv, const char *what);

/* The text of a top-level key of a jsonb object, or NULL if absent or null. */
extern char *jsonb_get_text(Jsonb *jb, const char *key);

/* The value of option name of an object of options, or NULL if absent or null. */
extern JsonbValue *option_value(Jsonb *options, const char *name);

/* Is an option's value a JSON object (else an array or a scalar)? */
#define OPTION_IS_OBJECT(v) ((v)->type == jbvBinary && JsonContainerIsObject((v)->val.binary.data))

/*
 * Refuse keys of a jsonb object that are not in `valid` (NULL-terminated),
 * naming the valid ones; `what` names the options in messages.
 */
extern void jsonb_check_keys(Jsonb *options, const char *const *valid, const char *what);

/*
 * The options every kind of source has into src: starting_offsets,
 * max_records_per_batch, timezone, metadata.  A kind parses its own.
 */
extern void parse_source_options(SourceInfo *src, Jsonb *options);

/* At a source's creation: its option "timezone" as pg_timezone_names spells it. */
extern const char *source_timezone_name(const char *name);

/*
 * The zone a source's batches run in when its options name none, and the
 * settings they run with whatever the session's (see batch_execute).
 */
#define SOURCE_DEFAULT_TIMEZONE	"UTC"
#define SOURCE_DATESTYLE		"ISO, MDY"
#define SOURCE_INTERVALSTYLE	"postgres"

extern void check_trigger_interval(const Interval *iv);
extern void check_idle_timeout(const Interval *iv);
extern void validate_query_options(Jsonb *options);

#endif							/* STREAMWIN_OPTIONS_H */
