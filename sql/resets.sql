-- reset_query for every shape of query: after a reset to 'earliest' and
-- a replay of everything the source holds, each result must equal plain
-- SQL over the source's table.  Rows that a replay writes again under
-- their key stay through the reset (windows and groups of an
-- aggregation); the others cannot be overwritten, so the reset deletes
-- them and says so: session windows (a replay may merge them otherwise),
-- queries over a changelog (their state starts over), transforms (they
-- would append the replayed rows again, unless reset to 'latest'), and
-- aggregations reset to a later position than the earliest.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

CREATE TABLE ev (id int PRIMARY KEY, k text, v int, ts timestamptz);
SELECT streamwin.create_table_source('evs', 'ev');
CREATE TABLE acct (id int PRIMARY KEY, k text, v int);
ALTER TABLE acct REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('acct_changes', 'acct', '{"changes": "all"}');

SELECT streamwin.create_query('per_minute', $$
  SELECT k, count(*) AS n, sum(v) AS s FROM evs GROUP BY streamwin.tumble(ts, '1 minute'), k$$,
  output_mode => 'update', start => false);
SELECT streamwin.create_query('visits', $$
  SELECT k, count(*) AS n, sum(v) AS s FROM evs GROUP BY streamwin.session(ts, '20 seconds'), k$$,
  output_mode => 'update', start => false);
SELECT streamwin.create_query('copied', $$SELECT id, k, v FROM evs$$, start => false);
SELECT streamwin.create_query('current_totals', $$
  SELECT k, count(*) AS n, sum(v) AS s FROM acct_changes GROUP BY k$$,
  output_mode => 'update', start => false);

CREATE VIEW reset_per_minute_expected AS
  SELECT date_trunc('minute', ts) AS window_start, k, count(*) AS n, sum(v) AS s FROM ev GROUP BY 1, k;
-- sessions by gaps and islands: an event 20 seconds or more after the
-- previous one of its key starts a new session
CREATE VIEW reset_visits_expected AS
  WITH marked AS (
    SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts) < interval '20 seconds'
                   THEN 0 ELSE 1 END AS starts FROM ev),
  numbered AS (SELECT *, sum(starts) OVER (PARTITION BY k ORDER BY ts, starts DESC) AS visit FROM marked)
  SELECT min(ts) AS window_start, max(ts) + interval '20 seconds' AS window_end, k, count(*) AS n, sum(v) AS s
  FROM numbered GROUP BY k, visit;
CREATE FUNCTION reset_diffs() RETURNS TABLE (query text, missing bigint, extra bigint) LANGUAGE sql AS $$
  SELECT 'per_minute',
    (SELECT count(*) FROM (TABLE reset_per_minute_expected EXCEPT ALL SELECT window_start, k, n, s FROM per_minute) x),
    (SELECT count(*) FROM (SELECT window_start, k, n, s FROM per_minute EXCEPT ALL TABLE reset_per_minute_expected) x)
  UNION ALL SELECT 'visits',
    (SELECT count(*) FROM (TABLE reset_visits_expected EXCEPT ALL SELECT window_start, window_end, k, n, s FROM visits) x),
    (SELECT count(*) FROM (SELECT window_start, window_end, k, n, s FROM visits EXCEPT ALL TABLE reset_visits_expected) x)
  UNION ALL SELECT 'copied',
    (SELECT count(*) FROM (SELECT id, k, v FROM ev EXCEPT ALL SELECT id, k, v FROM copied) x),
    (SELECT count(*) FROM (SELECT id, k, v FROM copied EXCEPT ALL SELECT id, k, v FROM ev) x)
  UNION ALL SELECT 'current_totals',
    (SELECT count(*) FROM (SELECT k, count(*), sum(v) FROM acct GROUP BY k EXCEPT ALL SELECT k, n, s FROM current_totals) x),
    (SELECT count(*) FROM (SELECT k, n, s FROM current_totals EXCEPT ALL SELECT k, count(*), sum(v) FROM acct GROUP BY k) x)
$$;
CREATE FUNCTION reset_run_all() RETURNS void LANGUAGE plpgsql AS $$
DECLARE q text;
BEGIN
  FOREACH q IN ARRAY ARRAY['per_minute', 'visits', 'copied', 'current_totals'] LOOP
    WHILE (streamwin.run_batch(q)->>'input_rows')::bigint > 0 LOOP END LOOP;
  END LOOP;
END $$;

-- Phase 1: a session of key 'a' at 00:01:40, and others.
INSERT INTO ev VALUES (1, 'a', 1, '2026-01-01 00:01:40'), (2, 'b', 2, '2026-01-01 00:01:00'),
                      (3, 'b', 3, '2026-01-01 00:01:10'), (4, 'a', 4, '2026-01-01 00:05:00');
INSERT INTO acct VALUES (1, 'x', 10), (2, 'y', 20), (3, 'y', 30);
SELECT reset_run_all();
SELECT * FROM reset_diffs();
-- Phase 2: an event that, read with phase 1's, makes one session of 'a'
-- from 00:01:25: a replay never makes the session of 00:01:40 again.
-- Group 'x' of the changelog loses its only row; the reset to 'earliest'
-- replays the changelog from the source's creation.
INSERT INTO ev VALUES (5, 'a', 5, '2026-01-01 00:01:25');
DELETE FROM acct WHERE id = 1;
UPDATE acct SET v = 33 WHERE id = 3;
SELECT streamwin.reset_query(q, 'earliest')
  FROM unnest(ARRAY['per_minute', 'visits', 'copied', 'current_totals']) q;
SELECT reset_run_all();
SELECT * FROM reset_diffs();
SELECT window_start, k, n FROM visits ORDER BY k, window_start;

-- A transform reset to 'latest' replays nothing: its rows stay.
SELECT streamwin.reset_query('copied', 'latest');
INSERT INTO ev VALUES (6, 'c', 6, '2026-01-01 00:09:00');
SELECT reset_run_all();
SELECT * FROM reset_diffs();

-- An aggregation reset to 'latest' starts over from there: its rows go (a
-- group read again would hold what is read since alone, beside groups that
-- keep their totals from before), and it holds what is read since.  Minute
-- 00:05 of 'a' has a row before the reset and one after.
SELECT streamwin.reset_query('per_minute', 'latest');
INSERT INTO ev VALUES (7, 'a', 7, '2026-01-01 00:05:30'), (8, 'd', 8, '2026-01-01 00:09:10');
SELECT reset_run_all();
CREATE VIEW reset_since_expected AS
  SELECT date_trunc('minute', ts) AS window_start, k, count(*) AS n, sum(v) AS s FROM ev WHERE id >= 7 GROUP BY 1, k;
SELECT (SELECT count(*) FROM (TABLE reset_since_expected EXCEPT ALL SELECT window_start, k, n, s FROM per_minute) x) AS missing,
       (SELECT count(*) FROM (SELECT window_start, k, n, s FROM per_minute EXCEPT ALL TABLE reset_since_expected) x) AS extra;

SELECT streamwin.drop_query(q) FROM unnest(ARRAY['per_minute', 'visits', 'copied', 'current_totals']) q;
SELECT streamwin.drop_source('evs');
SELECT streamwin.drop_source('acct_changes');
