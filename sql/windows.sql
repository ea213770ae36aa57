-- Event-time windows, aligned to the Unix epoch like Spark's window().
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- tumble(): the start of the fixed window holding the timestamp.
SELECT ts, streamwin.tumble(ts, '10 minutes') AS minutes10,
       streamwin.tumble(ts, '1 day') AS day, streamwin.tumble(ts, '90 seconds') AS s90
FROM (VALUES (timestamptz '2026-11-30 10:17:59.999999+00'),
             ('2026-11-30 10:20:00+00'),
             ('1969-12-31 23:59:59+00'),
             ('1970-01-01 00:00:00+00')) AS v(ts);

-- A window's start does not depend on the session time zone.
SET timezone = 'Asia/Kolkata';
SELECT streamwin.tumble('2026-11-30 10:17:00+00', '1 hour') = '2026-11-30 10:00:00+00' AS aligned_to_utc_epoch;
SET timezone = 'UTC';

-- hop(): every window [start, start + size) holding the timestamp; starts are
-- multiples of the slide.
SELECT streamwin.hop_starts('2026-11-30 10:17:00+00', '10 minutes', '5 minutes');
SELECT streamwin.hop_starts('2026-11-30 10:15:00+00', '10 minutes', '5 minutes');
SELECT streamwin.hop_starts('2026-11-30 10:17:00+00', '1 hour', '15 minutes');
-- the scalar form gives the latest of them
SELECT streamwin.hop('2026-11-30 10:17:00+00', '1 hour', '15 minutes');
-- a slide larger than the size leaves gaps: a time in one is in no window,
-- far in the future as now (the arithmetic does not run past the range)
SELECT streamwin.hop_starts('2026-11-30 10:17:00+00', '5 minutes', '15 minutes') AS in_a_window;
SELECT streamwin.hop_starts('2026-11-30 10:22:00+00', '5 minutes', '15 minutes') AS in_a_gap;
SELECT streamwin.hop_starts('200000-01-01 00:00:00+00', '1 day', '60000000 days') AS far_gap;
SELECT count(*) = 0 AS none_far FROM streamwin.hop_starts('250000-01-01 00:00:00+00', '1 day', '30000000 days');
-- at most 100,000 windows a row, as create_query allows, rather than a
-- result of any size, written for as long as it takes
SELECT count(*) AS most FROM streamwin.hop_starts('2026-11-30 10:17:00+00', '100000 seconds', '1 second');
SELECT count(*) FROM streamwin.hop_starts('2026-11-30 10:17:00+00', '100001 seconds', '1 second');
SELECT count(*) FROM streamwin.hop_starts(now(), '36500 days', '1 microsecond');

-- Sizes must be fixed durations.
SELECT streamwin.tumble(now(), '1 month');
SELECT streamwin.tumble(now(), '0 seconds');
SELECT streamwin.tumble(now(), '-5 minutes');
SELECT streamwin.hop(now(), '10 minutes', '0 minutes');
SELECT streamwin.tumble('infinity', '1 minute');

-- Near the ends of the timestamp range a window is computed exactly, and one
-- that cannot be represented is an error (a dead letter, in a stream).
SELECT streamwin.tumble('294270-01-01 00:30:00+00', '1 hour') AS far_future;
SELECT streamwin.tumble('4714-11-24 00:00:00+00 BC', '1 hour') AS first_hour;
SELECT streamwin.tumble('294276-12-31 23:30:00+00', '1 hour');
