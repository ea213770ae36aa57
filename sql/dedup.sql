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

DROP FUNCTION batch(text);
SELECT streamwin.drop_query('unique_payments', drop_result => true);
SELECT streamwin.drop_query('payments_10s', drop_result => true);
SELECT streamwin.drop_source('payments');
