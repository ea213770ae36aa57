-- Micro-batches run by hand with run_batch: a tumbling window in append mode
-- with a watermark, over the fixture topic regress_orders (one partition,
-- 14 messages), four messages per batch.  Event times below are seconds
-- after 2026-01-01 00:00:00 UTC.
\getenv brokers KAFKA_BROKERS
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

SELECT streamwin.create_kafka_source('shop', :'brokers', 'regress_orders',
    'order_id bigint, region text, amount numeric, event_time timestamptz',
    options => '{"max_records_per_batch": 4}');
SELECT streamwin.create_query('revenue',
    $$SELECT region, count(*) AS orders, sum(amount) AS revenue
      FROM shop GROUP BY streamwin.tumble(event_time, '10 seconds'), region$$,
    watermark => '5 seconds', options => '{"capture_late_rows": true}', start => false);
-- the same source, in update mode: rows appear as soon as they change
SELECT streamwin.create_query('revenue_now',
    $$SELECT region, count(*) AS orders, sum(amount) AS revenue
      FROM shop GROUP BY streamwin.tumble(event_time, '10 seconds'), region$$,
    watermark => '5 seconds', output_mode => 'update', start => false);

-- what a batch reports, without its timings
CREATE FUNCTION batch(q text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT streamwin.run_batch(q) - 'started_at' - 'duration_ms'
           - 'input_rows_per_second' - 'processed_rows_per_second' $$;

-- Batch 1, offsets 0-3: eu@1 10, us@2 20, eu@5 5, us@12 7.
-- Newest event 12 s, so the watermark becomes 7 s; no window has closed.
SELECT batch('revenue');
SELECT * FROM revenue;
\set ECHO none
SELECT format('SELECT * FROM %s ORDER BY window_start, region', state_table)
FROM streamwin.queries WHERE name = 'revenue' \gexec
\set ECHO all

-- Batch 2, offsets 4-7: eu@3 is late (3 s < watermark 7 s) and dropped;
-- eu@15 3; offset 6 is broken JSON; us@21 4.  The watermark moves to 16 s,
-- which closes [0 s, 10 s): it is written once, final.
SELECT batch('revenue');
SELECT * FROM revenue ORDER BY window_start, region;

-- Batch 3, offsets 8-11: eu@9 100 is late; offset 9 has amount "abc";
-- eu@25 2; us@31 1.  Watermark 26 s closes [10 s, 20 s).
SELECT batch('revenue');
SELECT * FROM revenue ORDER BY window_start, region;

-- Batch 4, offsets 12-13: eu@40 1, and a message without event time.
-- Watermark 35 s closes [20 s, 30 s).  Then nothing is left to read.
SELECT batch('revenue');
SELECT batch('revenue');
SELECT * FROM revenue ORDER BY window_start, region;
-- the open windows are still in the state table
\set ECHO none
SELECT format('SELECT * FROM %s ORDER BY window_start, region', state_table)
FROM streamwin.queries WHERE name = 'revenue' \gexec
\set ECHO all

-- Late rows are counted, and kept since the query asked for it.
SELECT query, partition, "offset", convert_from(payload, 'UTF8') AS payload, event_time, watermark
FROM streamwin.late_rows ORDER BY "offset";

-- Bad messages are kept with their position and the reason, once each.
SELECT partition, "offset", convert_from(payload, 'UTF8') AS payload, error
FROM streamwin.dead_letters ORDER BY "offset";

-- The update-mode query reads the same messages on its own, and shows every
-- window as it stands; the dead letters are not recorded twice.
SELECT streamwin.run_available('revenue_now') - 'offsets';
SELECT * FROM revenue_now ORDER BY window_start, region;
-- caught up, a run of no batch says the query's watermark all the same
SELECT r->'batches' AS batches, (r->>'watermark')::timestamptz = q.watermark AS watermark_shown
FROM streamwin.run_available('revenue_now') AS r, streamwin.queries q WHERE q.name = 'revenue_now';
SELECT count(*) AS dead_letters FROM streamwin.dead_letters;

-- What users monitor.
SELECT query, batch_id, input_rows, late_rows_dropped, dead_letters, state_rows, watermark, offsets
FROM streamwin.progress ORDER BY query, batch_id;
SELECT name, state, last_batch_id, watermark, lag, last_error FROM streamwin.queries ORDER BY name;

-- Where each batch's time went (stage_ms): every stage, together within
-- the batch's duration.
SELECT count(*) AS batches,
       bool_and(stage_ms ?& ARRAY['begin', 'fetch', 'decode', 'apply', 'emit', 'finish', 'checkpoint']) AS every_stage,
       bool_and((SELECT sum(value::float8) FROM jsonb_each_text(stage_ms)) <= duration_ms + 1) AS within_duration
FROM streamwin.progress WHERE query IN ('revenue', 'revenue_now');
-- The checkpoint's time is the batch's too: each query's first batch took
-- one (its state's first), the three after it none (checkpoint_interval).
SELECT query, batch_id, (stage_ms->>'checkpoint')::float8 > 0 AS took_checkpoint
FROM streamwin.progress WHERE query IN ('revenue', 'revenue_now') ORDER BY query, batch_id;
-- A stage's time goes to that stage: a function that sleeps 500 ms a row
-- runs in the statement that aggregates the batch's 4 rows (apply), which
-- then takes more than the rest (a new consumer's first fetch included,
-- which a loaded machine may take a second or more for).
CREATE FUNCTION slow_amount(numeric) RETURNS numeric LANGUAGE plpgsql IMMUTABLE
    AS $$BEGIN PERFORM pg_sleep(0.5); RETURN $1; END$$;
SELECT streamwin.create_query('revenue_slow',
    $$SELECT region, sum(slow_amount(amount)) AS revenue
      FROM shop GROUP BY streamwin.tumble(event_time, '10 seconds'), region$$,
    watermark => '5 seconds', start => false);
SELECT (streamwin.run_batch('revenue_slow')->>'input_rows')::int AS input_rows;
SELECT (stage_ms->>'apply')::float8 >= 2000 AS apply_slept,
       (stage_ms->>'apply')::float8 > duration_ms / 2 AS apply_most
FROM streamwin.progress WHERE query = 'revenue_slow';
SELECT streamwin.drop_query('revenue_slow', true);
DROP FUNCTION slow_amount(numeric);

-- A batch that fails is rolled back whole: state, results and offsets stay
-- where they were, and the next batch reads the same messages again.
CREATE TABLE before_reset AS SELECT * FROM revenue_now;
SELECT streamwin.reset_query('revenue_now', 'earliest');
DELETE FROM revenue_now;
ALTER TABLE revenue_now ADD CONSTRAINT few_orders CHECK (orders < 2);
\set VERBOSITY terse
SELECT streamwin.run_batch('revenue_now');
\set VERBOSITY default
SELECT next_offset FROM streamwin.query_offsets o JOIN streamwin.query_catalog q USING (query_id)
WHERE q.name = 'revenue_now';
SELECT count(*) AS result_rows FROM revenue_now;
ALTER TABLE revenue_now DROP CONSTRAINT few_orders;

-- reset_query replayed from the start; results are upserts of full values,
-- so the replay converges to the same table.
SELECT (streamwin.run_available('revenue_now')->>'input_rows')::int AS replayed;
SELECT count(*) AS differences FROM (
    (SELECT * FROM revenue_now EXCEPT SELECT * FROM before_reset)
    UNION ALL
    (SELECT * FROM before_reset EXCEPT SELECT * FROM revenue_now)) d;
-- A reset to a later position deletes the result (a group read again
-- would hold what is read from there on alone); its rows are put back, as
-- a user may write rows into it.
SELECT streamwin.reset_query('revenue_now', '{"0": 12}');
INSERT INTO revenue_now SELECT * FROM before_reset;
SELECT streamwin.run_batch('revenue_now')->'input_rows' AS input_rows;
-- A group new to the state goes into the result with a plain INSERT; here
-- the state forgot [40 s, 50 s) but the result has it, so that INSERT
-- fails and the batch upserts instead: the table is unchanged.
SELECT count(*) AS differences FROM (
    (SELECT * FROM revenue_now EXCEPT SELECT * FROM before_reset)
    UNION ALL
    (SELECT * FROM before_reset EXCEPT SELECT * FROM revenue_now)) d;
SELECT streamwin.reset_query('revenue_now', '{"0": 99}');
-- starting_offsets is one of three forms, which a mistake lists
SELECT streamwin.reset_query('revenue_now', 'beginning');
SELECT streamwin.reset_query('revenue_now', '{"0": 12');

-- run_batch is for stopped queries; a running one belongs to its worker.
SELECT streamwin.start_query('revenue_now');
SELECT streamwin.run_batch('revenue_now');
SELECT streamwin.reset_query('revenue_now', 'latest');
SELECT streamwin.stop_query('revenue_now');

-- A message without the group key has a NULL key: as in GROUP BY, NULL is
-- a group of its own, and the stream goes on.
SELECT streamwin.create_kafka_source('shop_nulls', :'brokers', 'regress_nullkeys',
    'region text, amount numeric, event_time timestamptz');
SELECT streamwin.create_query('revenue_nulls',
    $$SELECT region, count(*) AS orders, sum(amount) AS revenue
      FROM shop_nulls GROUP BY streamwin.tumble(event_time, '10 seconds'), region$$,
    output_mode => 'update', start => false);
SELECT (streamwin.run_available('revenue_nulls')->>'input_rows')::int AS input_rows;
SELECT * FROM revenue_nulls ORDER BY region NULLS LAST;
SELECT streamwin.drop_query('revenue_nulls', drop_result => true);
SELECT streamwin.drop_source('shop_nulls');

-- In append mode a closing window is inserted into the result.  Replayed
-- from the start, the windows close onto the rows they wrote the first
-- time, and are upserted instead: the same table.
CREATE TABLE revenue_before AS SELECT * FROM revenue;
CREATE TABLE late_before AS
SELECT source, partition, "offset", payload, event_time, watermark FROM streamwin.late_rows WHERE query = 'revenue';
SELECT streamwin.reset_query('revenue', 'earliest');
-- the rows read again are judged again: the late rows kept go with the reset
SELECT count(*) AS late_rows_kept FROM streamwin.late_rows WHERE query = 'revenue';
SELECT (streamwin.run_available('revenue')->>'input_rows')::int AS replayed;
SELECT count(*) AS result_rows, count(*) FILTER (WHERE (r.*) IS DISTINCT FROM (b.*)) AS differences
FROM revenue r FULL JOIN revenue_before b USING (window_start, region);
-- read in the same batches, the same rows are late again
SELECT (SELECT count(*) FROM late_before) AS late_before,
       (SELECT count(*) FROM ((SELECT source, partition, "offset", payload, event_time, watermark
                                FROM streamwin.late_rows WHERE query = 'revenue')
                              EXCEPT (SELECT * FROM late_before)) d) AS late_now_only,
       (SELECT count(*) FROM ((SELECT * FROM late_before)
                              EXCEPT (SELECT source, partition, "offset", payload, event_time, watermark
                                      FROM streamwin.late_rows WHERE query = 'revenue')) d) AS late_before_only;
DROP TABLE late_before;

-- Processing time: now(), current_timestamp and their kin in a continuous
-- query are the batch's own timestamp, which the batch records as its
-- progress row's started_at (Spark's batch timestamp).  Rows are counted in
-- the window of the batch that read them, and a batch replayed after a
-- crash sees its time again.  The batches run in the source's zone (UTC),
-- whatever the session's.
SELECT streamwin.create_kafka_source('shop_pos', :'brokers', 'regress_orders',
    'order_id bigint, region text, pos bigint',
    options => '{"max_records_per_batch": 4, "metadata": {"pos": "offset"}}');
SELECT streamwin.create_query('per_second',
    $$SELECT region, count(*) AS orders FROM shop_pos
      GROUP BY streamwin.tumble(now(), '1 second'), region$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('seen',
    $$SELECT pos, region, now() AS seen, current_timestamp(0) AS seen_s, localtimestamp AS seen_local,
             current_date AS seen_day, statement_timestamp() AS seen_stmt
      FROM shop_pos WHERE transaction_timestamp() > '2000-01-01'$$, start => false);
SET timezone = 'Asia/Tokyo';
SELECT streamwin.run_batch('per_second')->'batch_id' AS batch_id, streamwin.run_batch('seen')->'batch_id' AS batch_id,
       pg_sleep(0.4)
FROM generate_series(1, 4);
RESET timezone;
-- now() was each batch's started_at, and the other forms are made of it
CREATE FUNCTION batch_of(q text, p bigint) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT started_at FROM (
        SELECT started_at, (offsets->>'0')::bigint AS next,
               coalesce(lag((offsets->>'0')::bigint) OVER (ORDER BY batch_id), 0) AS first
        FROM streamwin.progress WHERE query = q) b
    WHERE p >= first AND p < next $$;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE seen = batch_of('seen', pos) AND seen_stmt = seen
                          AND seen_s = seen::timestamptz(0)
                          AND seen_local = seen AT TIME ZONE 'UTC'
                          AND seen_day = (seen AT TIME ZONE 'UTC')::date) AS batch_time
FROM seen;
-- every window counts the rows of the batches that began in it
CREATE VIEW per_second_expected AS
SELECT streamwin.tumble(batch_of('per_second', pos), '1 second') AS window_start,
       streamwin.tumble(batch_of('per_second', pos), '1 second') + interval '1 second' AS window_end,
       region, count(*) AS orders
FROM seen GROUP BY 1, 2, 3;
SELECT count(DISTINCT window_start) > 1 AS several_windows,
       count(*) FILTER (WHERE (r.*) IS DISTINCT FROM (e.*)) AS differences
FROM per_second r FULL JOIN per_second_expected e USING (window_start, region);
-- A crash empties the state (here: its marker, as a crash does), and the
-- next batches restore the checkpoint of batch 1 and replay batches 2 to
-- 4 a second later, at their own times again: the same windows.
CREATE TABLE per_second_before AS SELECT * FROM per_second;
DELETE FROM streamwin.state_alive
 WHERE query_id = (SELECT query_id FROM streamwin.query_catalog WHERE name = 'per_second');
SELECT pg_sleep(1.1);
SELECT r->'batch_id' AS batch_id, r->'replayed' AS replayed FROM streamwin.run_batch('per_second') r;
SELECT r->'batch_id' AS batch_id, r->'replayed' AS replayed FROM streamwin.run_batch('per_second') r;
SELECT r->'batch_id' AS batch_id, r->'replayed' AS replayed FROM streamwin.run_batch('per_second') r;
SELECT count(*) > 0 AS windows, count(*) FILTER (WHERE (r.*) IS DISTINCT FROM (b.*)) AS differences
FROM per_second r FULL JOIN per_second_before b USING (window_start, region);
DROP VIEW per_second_expected;
DROP TABLE per_second_before;
DROP FUNCTION batch_of(text, bigint);
SELECT streamwin.drop_query('per_second', drop_result => true);
SELECT streamwin.drop_query('seen', drop_result => true);

-- A window's event time must come out the same when a batch is replayed:
-- volatile functions are refused, and so are stable ones other than the
-- batch's time and date and time conversions (which batches run with fixed
-- settings).
CREATE FUNCTION shifted(t timestamptz) RETURNS timestamptz LANGUAGE sql STABLE
AS $$ SELECT t + current_setting('streamwin_test.shift')::interval $$;
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM shop_pos
    GROUP BY streamwin.tumble(now() + random() * interval '1 second', '1 minute')$$, output_mode => 'update');
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM shop_pos
    GROUP BY streamwin.tumble(shifted(now()), '1 minute')$$, output_mode => 'update');
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM shop_pos
    GROUP BY streamwin.tumble(current_setting('streamwin_test.at')::timestamptz, '1 minute')$$, output_mode => 'update');
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM shop_pos
    GROUP BY streamwin.tumble(now() - age(now()::timestamp)::interval, '1 minute')$$, output_mode => 'update');
-- accepted: text read as a timestamp, in the batch's zone, date arithmetic,
-- the batch's time in any of its forms
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM shop_pos
    GROUP BY streamwin.tumble(('2026-01-01 ' || region)::timestamp::timestamptz
                              + order_id * interval '1 hour', '1 minute')$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('q2', $$SELECT count(*) AS n FROM shop_pos
    GROUP BY streamwin.tumble(localtimestamp::timestamptz, '1 minute')$$, output_mode => 'update', start => false);
SELECT streamwin.drop_query('q', drop_result => true);
SELECT streamwin.drop_query('q2', drop_result => true);
DROP FUNCTION shifted(timestamptz);
SELECT streamwin.drop_source('shop_pos');

-- Column names are folded to lower case, as in CREATE TABLE, but JSON keys
-- are matched exactly: OrderId is the column orderid, which no key
-- "order_id" fills, and "Region" (quoted, so kept) is not the key
-- "region".  Creating the source says so for the unquoted name, and every
-- batch counts, per column, the messages that lacked its key.
SELECT streamwin.create_kafka_source('shop_camel', :'brokers', 'regress_orders',
    'OrderId bigint, "Region" text, amount numeric, event_time timestamptz, pos bigint',
    options => '{"metadata": {"pos": "offset"}}');
-- (a CSV field goes to the column in its place, whatever the name: no notice)
SELECT streamwin.create_kafka_source('shop_camel_csv', :'brokers', 'regress_orders',
    'OrderId bigint, Region text', 'csv');
SELECT streamwin.drop_source('shop_camel_csv');
SELECT streamwin.create_query('camel', $$SELECT * FROM shop_camel$$, start => false);
SELECT streamwin.run_batch('camel')->'missing_keys' AS missing_keys;
SELECT missing_keys FROM streamwin.progress WHERE query = 'camel';
-- The same counts from PostgreSQL's own JSON parser, over the payloads of
-- the messages that became rows (dead letters are not counted).
SELECT streamwin.create_kafka_source('shop_lines', :'brokers', 'regress_orders',
    'line text, pos bigint', 'text', '{"metadata": {"pos": "offset"}}');
SELECT streamwin.create_query('lines', $$SELECT * FROM shop_lines$$, start => false);
SELECT (streamwin.run_batch('lines')->>'input_rows')::int AS input_rows;
WITH decoded AS MATERIALIZED (SELECT line::jsonb AS message FROM lines JOIN camel USING (pos))
SELECT jsonb_object_agg(k, n) AS missing_keys FROM (
    SELECT k, count(*) AS n
    FROM decoded, unnest(ARRAY['orderid', 'Region', 'amount', 'event_time']) k
    WHERE NOT message ? k GROUP BY k) m;
SELECT streamwin.drop_query('camel', drop_result => true);
SELECT streamwin.drop_query('lines', drop_result => true);
SELECT streamwin.drop_source('shop_camel');
SELECT streamwin.drop_source('shop_lines');

-- the times a batch reports are ISO 8601 whatever the session's DateStyle
SET datestyle = 'SQL, DMY';
SELECT r->>'watermark' AS watermark, r->>'started_at' ~ '^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d' AS started_at_iso
  FROM streamwin.run_batch('revenue') r;
SET datestyle = 'ISO, YMD';

DROP FUNCTION batch(text);
DROP TABLE before_reset, revenue_before;
SELECT streamwin.drop_query('revenue', drop_result => true);
SELECT streamwin.drop_query('revenue_now', drop_result => true);
SELECT streamwin.drop_source('shop');
SELECT streamwin.drop_source('orders');
