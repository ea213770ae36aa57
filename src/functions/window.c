/*-------------------------------------------------------------------------
 *
 * window.c
 *	  The window functions users write in GROUP BY: tumble(), hop() and
 *	  hop_starts().
 *
 * Windows are aligned to the Unix epoch, as in Spark's window(): a tumbling
 * window of size S holding ts starts at floor(ts / S) * S, counted from
 * 1970-01-01 00:00 UTC.  Sizes are fixed durations: a day counts as 24
 * hours, and months are refused because their length varies.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "sql_function.h"
#include "window.h"

STREAMWIN_SQL_FUNCTION(streamwin_tumble);
STREAMWIN_SQL_FUNCTION(streamwin_hop);
STREAMWIN_SQL_FUNCTION(streamwin_hop_starts);
STREAMWIN_SQL_FUNCTION(streamwin_session);

/* Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01). */
#define UNIX_TO_PG_USEC \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/*
 * window_size_usec
 *		Convert a window size or slide to microseconds, refusing what cannot
 *		be a fixed-length window.
 */
int64
window_size_usec(const Interval *iv, const char *argname)
{
	int64		us;

	if (iv->month != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window %s must not contain months or years", argname),
				 errdetail("Months have no fixed length, so windows of months cannot be aligned."),
				 errhint("Use days instead, for example interval '30 days'.")));
	if (pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &us) ||
		pg_add_s64_overflow(us, iv->time, &us))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("window %s is out of range", argname),
				 errhint("A window is at most about 292,000 years long.")));
	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window %s must be positive", argname)));
	return us;
}

/*
 * window_floor
 *		The start of the epoch-aligned window of length size_us holding ts.
 */
TimestampTz
window_floor(TimestampTz ts, int64 size_us)
{
	/*
	 * UNIX_TO_PG_USEC mod size: the same for every row of a query, so kept
	 * for the size last asked for.  An int64 division costs dozens of
	 * cycles, and this runs for every event of a windowed query.
	 */
	static int64 offset_size = 0;
	static int64 offset = 0;
	int64		rem;

	if (size_us != offset_size)
	{
		offset = UNIX_TO_PG_USEC % size_us;
		offset_size = size_us;
	}

	/*
	 * (ts + UNIX_TO_PG_USEC) mod size, computed without forming the sum,
	 * which overflows near the end of the timestamp range: ts mod size is
	 * in (-size, size), offset in [0, size), and each branch adds or
	 * subtracts only what keeps the value in range.
	 */
	rem = ts % size_us;
	if (rem >= size_us - offset)
		rem -= size_us - offset;
	else
		rem += offset;
	/* C division truncates toward zero; windows before 1970 floor downward */
	if (rem < 0)
		rem += size_us;
	return ts - rem;
}

/*
 * window_fits
 *		Can every window holding ts (length size_us, starts every slide_us;
 *		slide = size for tumbling windows, 0 for sessions of gap size_us) be
 *		represented: its start not before the first timestamp, its end
 *		before the end of the range?
 */
bool
window_fits(TimestampTz ts, int64 size_us, int64 slide_us)
{
	TimestampTz latest;
	TimestampTz earliest;

	if (ts < MIN_TIMESTAMP || ts >= END_TIMESTAMP)
		return false;

	/*
	 * Every window holding ts starts after ts - size and before ts, so far
	 * enough from both ends of the range it fits without computing them;
	 * that is every event but those within a window of the limits.
	 */
	if (slide_us > 0 && ts >= MIN_TIMESTAMP + size_us && ts < END_TIMESTAMP - size_us)
		return true;
	if (slide_us == 0)
		return ts < END_TIMESTAMP - size_us;	/* session: [ts, ts + gap) */
	latest = window_floor(ts, slide_us);
	if (ts - latest >= size_us)
		return true;			/* between hopping windows: in none */
	earliest = latest - ((size_us - 1 - (ts - latest)) / slide_us) * slide_us;
	return earliest >= MIN_TIMESTAMP && latest < END_TIMESTAMP - size_us;
}

static void
check_finite(TimestampTz ts)
{
	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("event time must be finite")));
}

static void
check_fits(TimestampTz ts, int64 size_us, int64 slide_us)
{
	if (!window_fits(ts, size_us, slide_us))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("event time is too close to the limits of the timestamp range for its window")));
}

/* streamwin.tumble(ts timestamptz, size interval) RETURNS timestamptz */
Datum
streamwin_tumble(PG_FUNCTION_ARGS)
{
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
	int64		size = window_size_usec(PG_GETARG_INTERVAL_P(1), "size");

	check_finite(ts);
	check_fits(ts, size, size);
	PG_RETURN_TIMESTAMPTZ(window_floor(ts, size));
}

/*
 * streamwin.hop(ts, size, slide) RETURNS timestamptz: the latest window
 * start covering ts.  create_query rewrites hop() in GROUP BY into
 * hop_starts(), so this scalar form only serves direct calls.
 */
Datum
streamwin_hop(PG_FUNCTION_ARGS)
{
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
	int64		size = window_size_usec(PG_GETARG_INTERVAL_P(1), "size");
	int64		slide = window_size_usec(PG_GETARG_INTERVAL_P(2), "slide");
	TimestampTz start;

	check_finite(ts);
	check_fits(ts, size, slide);
	start = window_floor(ts, slide);
	if (start + size <= ts)
		PG_RETURN_NULL();		/* ts falls in a gap between windows */
	PG_RETURN_TIMESTAMPTZ(start);
}

/*
 * streamwin.session(ts, gap) RETURNS timestamptz: only a marker for
 * create_query, which turns sessions into state merges; returns ts.
 */
Datum
streamwin_session(PG_FUNCTION_ARGS)
{
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
	int64		gap = window_size_usec(PG_GETARG_INTERVAL_P(1), "gap");

	check_finite(ts);
	check_fits(ts, gap, 0);
	PG_RETURN_TIMESTAMPTZ(ts);
}

/*
 * The number of hopping windows of size and slide that cover a row, at
 * most: size / slide rounded up (without the overflow of size + slide).
 */
int64
hop_windows_per_row(int64 size_us, int64 slide_us)
{
	return size_us / slide_us + (size_us % slide_us != 0);
}

/*
 * streamwin.hop_starts(ts, size, slide) RETURNS SETOF timestamptz: the start
 * of every hopping window [start, start + size) that covers ts, ascending.
 * Window starts are multiples of slide from the Unix epoch.  Any role may
 * call it: a row in more than HOP_MAX_WINDOWS windows is refused, as
 * create_query refuses such windows, rather than written out for as long
 * as it takes.
 */
Datum
streamwin_hop_starts(PG_FUNCTION_ARGS)
{
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
	int64		size = window_size_usec(PG_GETARG_INTERVAL_P(1), "size");
	int64		slide = window_size_usec(PG_GETARG_INTERVAL_P(2), "slide");
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz latest;
	TimestampTz first;
	int64		n;

	check_finite(ts);
	check_fits(ts, size, slide);
	/*
	 * (size / slide rounded down, as create_query counted windows before it
	 * rounded up: a query it accepted then runs still)
	 */
	if (size / slide > HOP_MAX_WINDOWS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hop windows of this size and slide hold each row in " INT64_FORMAT " windows",
						hop_windows_per_row(size, slide)),
				 errdetail("streamwin puts a row in at most %d windows.", HOP_MAX_WINDOWS),
				 errhint("Use a larger slide, or a smaller size.")));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	latest = window_floor(ts, slide);
	/* in a gap between windows (a slide larger than the size): none */
	if (ts - latest >= size)
		return (Datum) 0;
	/* earliest start s = latest - k*slide with s + size > ts */
	n = (size - 1 - (ts - latest)) / slide;
	first = latest - n * slide;

	for (int64 i = 0; i <= n; i++)
	{
		Datum		value = TimestampTzGetDatum(first + i * slide);
		bool		isnull = false;

		CHECK_FOR_INTERRUPTS();
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum) 0;
}
