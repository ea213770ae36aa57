-- Deduplication (dedup_keys): a producer that retries sends some events
-- twice; rows whose keys were seen already, in the same batch or an earlier
-- one still within the watermark, are dropped before the query runs.
-- Fixture regress_dups: (id, ts in seconds) = (1,1) (2,2) (1,3) (3,4) |
-- (2,5) (4,20) (1,21) (5,22) | (4,23) (2,40), read four per batch.
\getenv brokers KAFKA_BROKERS
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

SELECT streamwin.create_kafka_source('payments', :'brokers', 'regress_dups',
    'id int, v int, ts timestamptz', options => '{"max_records_per_batch": 4}');

-- A continuous transform, with the event time named as an option.
SELECT streamwin.create_query('unique_payments', 'SELECT id, v, ts FROM payments',
    dedup_keys => '{id}', watermark => '10 seconds', options => '{"event_time": "ts"}',
    start => false);
-- A windowed count over the same deduplicated stream.
SELECT streamwin.create_query('payments_10s',
    $$SELECT count(*) AS n, sum(v) AS total FROM payments
      GROUP BY streamwin.tumble(ts, '10 seconds')$$,
    dedup_keys => '{id}', watermark => '10 seconds', output_mode => 'update', start => false);

CREATE FUNCTION batch(q text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT streamwin.run_batch(q) - 'started_at' - 'duration_ms'
           - 'input_rows_per_second' - 'processed_rows_per_second' - 'offsets' - 'query' $$;

-- Batch 1: (1,3) repeats id 1 within the batch.  Watermark 4 - 10 = -6 s.
SELECT batch('unique_payments');
-- Batch 2: (2,5) and (1,21) repeat ids still remembered (their first rows,
-- at 2 s and 1 s, are not behind the watermark yet).  The watermark moves
-- to 12 s, and ids first seen before 12 s are forgotten.
SELECT batch('unique_payments');
-- Batch 3: (4,23) repeats id 4 (first seen at 20 s); (2,40) is id 2 again,
-- forgotten since: it is new.
SELECT batch('unique_payments');
SELECT * FROM unique_payments ORDER BY ts;

SELECT (streamwin.run_available('payments_10s') - 'offsets' - 'watermark') AS totals;
SELECT * FROM payments_10s ORDER BY window_start;

-- In complete mode the watermark closes no window and drops no row; with
-- dedup_keys it forgets the keys all the same: id 2 at 40 s counts again,
-- as in the transform.
SELECT streamwin.create_query('payments_all',
    'SELECT count(*) AS n, sum(v) AS total FROM payments GROUP BY streamwin.tumble(ts, ''1 hour'')',
    dedup_keys => '{id}', watermark => '10 seconds', output_mode => 'complete', start => false);
SELECT (streamwin.run_available('payments_all') - 'offsets' - 'watermark') AS totals;
SELECT a.n, a.total, (a.n, a.total) = (SELECT count(*), sum(v) FROM unique_payments) AS as_the_transform
FROM payments_all a;
SELECT streamwin.drop_query('payments_all', drop_result => true);
-- ... and keeps every window, also one the watermark has passed: the
-- 10-second windows equal the transform's rows counted per window, after
-- batches in which the watermark passed the first.
SELECT streamwin.create_query('payments_all_10s',
    'SELECT count(*) AS n, sum(v) AS total FROM payments GROUP BY streamwin.tumble(ts, ''10 seconds'')',
    dedup_keys => '{id}', watermark => '10 seconds', output_mode => 'complete', start => false);
SELECT (streamwin.run_available('payments_all_10s') - 'offsets' - 'watermark') AS totals;
SELECT window_start, n, total FROM payments_all_10s ORDER BY window_start;
SELECT count(*) AS diffs FROM (
  (SELECT window_start, n, total FROM payments_all_10s
   EXCEPT SELECT streamwin.tumble(ts, '10 seconds'), count(*), sum(v) FROM unique_payments GROUP BY 1)
  UNION ALL
  (SELECT streamwin.tumble(ts, '10 seconds'), count(*), sum(v) FROM unique_payments GROUP BY 1
   EXCEPT SELECT window_start, n, total FROM payments_all_10s)) d;
SELECT streamwin.drop_query('payments_all_10s', drop_result => true);
-- Without dedup_keys, complete mode takes a watermark with a notice that it
-- does nothing there: every event counts, duplicates too, against the
-- fixture's events listed here (v is each event's second).
SELECT streamwin.create_query('payments_every_10s',
    'SELECT count(*) AS n, sum(v) AS total FROM payments GROUP BY streamwin.tumble(ts, ''10 seconds'')',
    watermark => '10 seconds', output_mode => 'complete', start => false);
SELECT (streamwin.run_available('payments_every_10s') - 'offsets' - 'watermark') AS totals;
CREATE VIEW fixture_windows AS
  SELECT streamwin.tumble('2026-01-01'::timestamptz + s * interval '1 second', '10 seconds') AS window_start,
         count(*) AS n, sum(s) AS total
  FROM (VALUES (1), (2), (3), (4), (5), (20), (21), (22), (23), (40)) AS f(s) GROUP BY 1;
SELECT count(*) AS diffs FROM (
  (SELECT window_start, n, total FROM payments_every_10s EXCEPT TABLE fixture_windows)
  UNION ALL
  (TABLE fixture_windows EXCEPT SELECT window_start, n, total FROM payments_every_10s)) d;
DROP VIEW fixture_windows;
SELECT streamwin.drop_query('payments_every_10s', drop_result => true);

-- Deduplication state grows without a watermark: refused unless asked for.
SELECT streamwin.create_query('q', 'SELECT id FROM payments', dedup_keys => '{id}');
SELECT streamwin.create_query('q', 'SELECT id FROM payments', dedup_keys => '{id}',
    options => '{"dedup_without_watermark": true}', start => false);
SELECT streamwin.drop_query('q', drop_result => true);
SELECT streamwin.create_query('q', 'SELECT id FROM payments', dedup_keys => '{nope}',
    watermark => '1 minute', options => '{"event_time": "ts"}');
SELECT streamwin.create_query('q', 'SELECT id FROM payments', dedup_keys => '{id,id}',
    watermark => '1 minute', options => '{"event_time": "ts"}');
SELECT streamwin.create_query('q', 'SELECT id FROM payments', watermark => '1 minute',
    options => '{"event_time": "v"}');
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM payments
    GROUP BY streamwin.tumble(ts, '1 minute')$$, output_mode => 'update',
    options => '{"event_time": "ts"}');

-- Keys named like the columns streamwin keeps with them (the event time of
-- a key's first row, its position in the batch, the batch that saw it): Spark's
-- dropDuplicates("order_id", "event_time").  The producer numbers its
-- messages in a column "__ord"; the first row of each key is kept.
CREATE TABLE retried (order_id int, event_time timestamptz, batch_ord int, batch_id int,
    amount int, "__ord" int);
SELECT streamwin.create_table_source('retried_src', 'retried', '{"max_records_per_batch": 8}');
SELECT streamwin.create_query('retried_orders', 'SELECT * FROM retried_src',
    dedup_keys => ARRAY['order_id', 'event_time'], watermark => '1 hour',
    options => '{"event_time": "event_time"}', start => false);
SELECT streamwin.create_query('retried_2m',
    $$SELECT count(*) AS n, sum(amount) AS total FROM retried_src
      GROUP BY streamwin.tumble(event_time, '2 minutes')$$,
    dedup_keys => ARRAY['order_id', 'batch_ord', 'batch_id'], watermark => '1 hour',
    output_mode => 'update', start => false);
INSERT INTO retried
SELECT g % 6, '2026-01-01 00:00:00+00'::timestamptz + g % 4 * interval '1 minute', g % 2, g % 2, g, g
FROM generate_series(1, 30) g;
SELECT (streamwin.run_available('retried_orders') - 'offsets' - 'watermark') AS totals;
SELECT (streamwin.run_available('retried_2m') - 'offsets' - 'watermark') AS totals;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE (r.*) IS DISTINCT FROM (f.*)) AS differences
FROM retried_orders r FULL JOIN
     (SELECT DISTINCT ON (order_id, event_time) * FROM retried
      ORDER BY order_id, event_time, "__ord") f USING ("__ord");
SELECT count(*) AS windows, sum(r.n) AS rows,
       count(*) FILTER (WHERE (r.*) IS DISTINCT FROM (f.*)) AS differences
FROM retried_2m r FULL JOIN
     (SELECT date_bin('2 minutes', event_time, 'epoch') AS window_start,
             date_bin('2 minutes', event_time, 'epoch') + interval '2 minutes' AS window_end,
             count(*) AS n, sum(amount) AS total
      FROM (SELECT DISTINCT ON (order_id, batch_ord, batch_id) * FROM retried
            ORDER BY order_id, batch_ord, batch_id, "__ord") first_rows
      GROUP BY 1, 2) f USING (window_start);
SELECT streamwin.drop_query('retried_orders', drop_result => true);
SELECT streamwin.drop_query('retried_2m', drop_result => true);
SELECT streamwin.drop_source('retried_src');
DROP TABLE retried;

-- NULL is a key value like any other (NULLS NOT DISTINCT), in a key of
-- one column and of two; a query without a watermark or an event time
-- keeps every key it has seen, and drops each key's later rows whatever
-- batch they come in.
CREATE TABLE nullish (seq int, a int, b text, ts timestamptz);
SELECT streamwin.create_table_source('nullish_src', 'nullish', '{"max_records_per_batch": 8}');
SELECT streamwin.create_query('nullish_ab', 'SELECT seq, a, b FROM nullish_src',
    dedup_keys => '{a,b}', watermark => '1 hour', options => '{"event_time": "ts"}',
    start => false);
SELECT streamwin.create_query('nullish_a', 'SELECT seq, a FROM nullish_src',
    dedup_keys => '{a}', options => '{"dedup_without_watermark": true}', start => false);
INSERT INTO nullish
SELECT g, nullif(g % 4, 0), CASE WHEN g % 3 = 0 THEN NULL ELSE (g % 2)::text END,
       '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second'
FROM generate_series(1, 40) g;
SELECT (streamwin.run_available('nullish_ab') - 'offsets' - 'watermark') AS totals;
SELECT (streamwin.run_available('nullish_a') - 'offsets' - 'watermark') AS totals;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE (r.*) IS DISTINCT FROM (f.*)) AS differences
FROM nullish_ab r FULL JOIN
     (SELECT DISTINCT ON (a, b) seq, a, b FROM nullish ORDER BY a, b, seq) f USING (seq);
SELECT count(*) AS rows,
       count(*) FILTER (WHERE (r.*) IS DISTINCT FROM (f.*)) AS differences
FROM nullish_a r FULL JOIN
     (SELECT DISTINCT ON (a) seq, a FROM nullish ORDER BY a, seq) f USING (seq);
-- their dedup tables: every key once, the one without a watermark with no
-- event time
CREATE FUNCTION key_counts(q text, cols text, OUT keys bigint, OUT distinct_keys bigint,
    OUT without_time bigint) LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT count(*), count(DISTINCT ROW(%s)), count(*) FILTER (WHERE event_time IS NULL) FROM %s',
                   cols, (SELECT dedup_table FROM streamwin.query_catalog WHERE name = q))
      INTO keys, distinct_keys, without_time;
END $$;
SELECT 'nullish_ab' AS query, * FROM key_counts('nullish_ab', 'a, b')
UNION ALL SELECT 'nullish_a', * FROM key_counts('nullish_a', 'a');
DROP FUNCTION key_counts(text, text);
SELECT streamwin.drop_query('nullish_ab', drop_result => true);
SELECT streamwin.drop_query('nullish_a', drop_result => true);
SELECT streamwin.drop_source('nullish_src');
DROP TABLE nullish;

DROP FUNCTION batch(text);
SELECT streamwin.drop_query('unique_payments', drop_result => true);
SELECT streamwin.drop_query('payments_10s', drop_result => true);
SELECT streamwin.drop_source('payments');
