-- Table sources: the rows inserted into an ordinary table, in commit order,
-- through logical decoding.  Every result is compared with plain SQL over
-- the same table (the EXCEPT queries must return nothing), and positions
-- are shown without their LSNs, which differ from run to run.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

CREATE TABLE orders (order_id bigint, region text, amount numeric, event_time timestamptz);

-- Refused at creation, with what to change.
CREATE VIEW orders_view AS SELECT * FROM orders;
SELECT streamwin.create_table_source('bad', 'orders_view');
CREATE UNLOGGED TABLE orders_unlogged (a int);
SELECT streamwin.create_table_source('bad', 'orders_unlogged');
CREATE TEMP TABLE orders_temp (a int);
SELECT streamwin.create_table_source('bad', 'orders_temp');
CREATE TABLE orders_parted (a int) PARTITION BY RANGE (a);
SELECT streamwin.create_table_source('bad', 'orders_parted');
SELECT streamwin.create_table_source('bad', 'pg_class');
SELECT streamwin.create_table_source('bad', 'no_such_table');
SELECT streamwin.create_table_source('bad', 'orders', '{"partitions": [0]}');
-- a slot can only be created before the transaction's first write
BEGIN;
INSERT INTO orders VALUES (0, 'x', 0, '2026-01-01');
SELECT streamwin.create_table_source('bad', 'orders');
ROLLBACK;
-- a creation that rolls back leaves no slot behind
BEGIN;
SELECT streamwin.create_table_source('rolled_back', 'orders');
ROLLBACK;
SELECT count(*) AS streamwin_slots FROM pg_replication_slots
WHERE plugin = 'streamwin' AND database = current_database();

-- Creating a table source creates a replication slot, which keeps WAL for
-- as long as its queries lag: as PostgreSQL does for slots, streamwin
-- allows it to superusers and REPLICATION roles, and to the roles granted
-- EXECUTE on streamwin.create_table_source_slot().  A role with SELECT on
-- the table and CREATE on the schema, but none of those, is refused with
-- the GRANT that would allow it; it cannot call the slot function either.
CREATE ROLE streamwin_ts_user LOGIN;
CREATE ROLE streamwin_ts_replication LOGIN REPLICATION;
GRANT CREATE ON SCHEMA public TO streamwin_ts_user, streamwin_ts_replication;
GRANT SELECT ON orders TO streamwin_ts_user, streamwin_ts_replication;
SET ROLE streamwin_ts_user;
SELECT streamwin.create_table_source('user_src', 'orders');
SELECT streamwin.create_table_source_slot();
RESET ROLE;
-- the GRANT of the hint: now it may, and the source is its own
GRANT EXECUTE ON FUNCTION streamwin.create_table_source_slot() TO streamwin_ts_user;
SET ROLE streamwin_ts_user;
SELECT streamwin.create_table_source('user_src', 'orders');
-- the slot function creates slots for create_table_source only
SELECT streamwin.create_table_source_slot();
RESET ROLE;
-- a REPLICATION role may without the GRANT, as it may create slots in PostgreSQL
SET ROLE streamwin_ts_replication;
SELECT streamwin.create_table_source('replication_src', 'orders');
RESET ROLE;
SELECT name, owner FROM streamwin.sources ORDER BY name;
-- both dropped in one transaction: both slots go when it commits
BEGIN;
SELECT streamwin.drop_source('user_src');
SELECT streamwin.drop_source('replication_src');
COMMIT;
SELECT count(*) AS streamwin_slots FROM pg_replication_slots
WHERE plugin = 'streamwin' AND database = current_database();
DROP OWNED BY streamwin_ts_user, streamwin_ts_replication;
DROP ROLE streamwin_ts_user, streamwin_ts_replication;

SELECT streamwin.create_table_source('shop', 'orders', '{"max_records_per_batch": 7}');
SELECT name, kind, format, columns, relation, source_table, slot_name LIKE 'streamwin\_%' AS slot,
       retained_wal >= 0 AS retains_wal
FROM streamwin.sources;
SELECT s.slot_type, s.plugin, s.database = current_database() AS here
FROM pg_replication_slots s JOIN streamwin.sources USING (slot_name);

-- The source's view has the table's columns, and is empty outside a batch.
\d shop
SELECT count(*) FROM shop;

-- Rows inserted before a query exists are kept for it ('earliest').
INSERT INTO orders
SELECT g, CASE WHEN g % 3 = 0 THEN 'eu' ELSE 'us' END, g,
       '2026-01-01 00:00:00+00'::timestamptz + g * interval '7 seconds'
FROM generate_series(1, 20) g;

SELECT streamwin.create_query('revenue',
    $$SELECT region, count(*) AS orders, sum(amount) AS revenue
      FROM shop GROUP BY streamwin.tumble(event_time, '1 minute'), region$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('big_orders',
    $$SELECT order_id, amount FROM shop WHERE amount >= 30$$, start => false);

-- what a batch reports, without timings and LSNs
CREATE FUNCTION batch(q text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT (r - 'started_at' - 'duration_ms' - 'input_rows_per_second'
              - 'processed_rows_per_second' - 'offsets')
           || jsonb_build_object('index', r->'offsets'->'index',
                                 'ignored', r->'offsets'->'ignored')
    FROM streamwin.run_batch(q) r $$;

-- A transaction that rolls back, and a savepoint rolled back inside one that
-- commits: none of their rows ever appear.
BEGIN;
INSERT INTO orders VALUES (1000, 'eu', 1000, '2026-01-01 00:00:10+00');
ROLLBACK;
BEGIN;
INSERT INTO orders VALUES (21, 'eu', 21, '2026-01-01 00:02:27+00');
SAVEPOINT s;
INSERT INTO orders VALUES (2000, 'us', 2000, '2026-01-01 00:00:10+00');
ROLLBACK TO SAVEPOINT s;
INSERT INTO orders VALUES (22, 'us', 22, '2026-01-01 00:02:34+00');
COMMIT;

-- Updates, deletes and truncates of other rows are not part of the stream:
-- ignored, and counted.
UPDATE orders SET amount = amount + 1 WHERE order_id <= 2;
DELETE FROM orders WHERE order_id = 3;

-- Seven rows per batch: 22 rows are 4 batches.  A batch ends inside a
-- transaction that does not fit, and "index" says how many of its rows are
-- processed: 7 and 14 of the 20-row one, then 1 of the next (the rows
-- rolled back to the savepoint do not count).
SELECT batch('revenue');
SELECT batch('revenue');
SELECT batch('revenue');
SELECT batch('revenue');
SELECT batch('revenue');

-- The result equals plain SQL over the rows as they were inserted (ids 1 to
-- 22, before the update and delete).
CREATE TABLE inserted AS
SELECT g AS order_id, CASE WHEN g % 3 = 0 THEN 'eu' ELSE 'us' END AS region, g::numeric AS amount,
       '2026-01-01 00:00:00+00'::timestamptz + g * interval '7 seconds' AS event_time
FROM generate_series(1, 22) g;
SELECT window_start, window_end, region, orders, revenue FROM revenue
EXCEPT ALL
SELECT date_bin('1 minute', event_time, 'epoch'), date_bin('1 minute', event_time, 'epoch') + interval '1 minute',
       region, count(*), sum(amount)
FROM inserted GROUP BY 1, 2, 3;
SELECT count(*) AS windows, sum(orders) AS orders FROM revenue;

-- The transform reads the same rows, on its own position.
SELECT streamwin.run_available('big_orders') - 'offsets' - 'watermark';
SELECT * FROM big_orders EXCEPT ALL SELECT order_id, amount FROM inserted WHERE amount >= 30;
SELECT order_id, amount FROM inserted WHERE amount >= 30 EXCEPT ALL SELECT * FROM big_orders;

-- A truncate is counted too; rows inserted after it are read as usual.
TRUNCATE orders;
INSERT INTO orders VALUES (23, 'eu', 23, '2026-01-01 00:02:41+00');
INSERT INTO inserted VALUES (23, 'eu', 23, '2026-01-01 00:02:41+00');
SELECT batch('revenue');
SELECT window_start, region, orders, revenue FROM revenue
EXCEPT ALL
SELECT date_bin('1 minute', event_time, 'epoch'), region, count(*), sum(amount)
FROM inserted GROUP BY 1, 2;

-- A row whose event time is NULL is a dead letter, kept as text.
INSERT INTO orders VALUES (24, 'eu', 24, NULL);
SELECT batch('revenue');
SELECT source, partition, convert_from(payload, 'UTF8') AS payload, error FROM streamwin.dead_letters;

-- reset_query: from the oldest change the slot holds, or a given LSN.
\set VERBOSITY terse
SELECT streamwin.reset_query('big_orders', '{"lsn": "0/0"}');
\set VERBOSITY default
SELECT streamwin.reset_query('big_orders', '{"0": 1}');
SELECT streamwin.reset_query('big_orders', 'beginning');
SELECT streamwin.reset_query('big_orders', '{"0": 1, "lsn": "0/0"}');
SELECT streamwin.reset_query('big_orders', 'latest');
INSERT INTO orders VALUES (25, 'us', 250, '2026-01-01 00:02:55+00');
SELECT (streamwin.run_available('big_orders'))->'input_rows' AS input_rows;
SELECT * FROM big_orders WHERE order_id > 22;

-- Many small transactions read by run_available: its batches end at commit
-- boundaries and follow one another on one decoding context, which is
-- closed (and the slot released) when it returns.
CREATE TABLE ticks (id int, v int);
SELECT streamwin.create_table_source('tick_src', 'ticks', '{"max_records_per_batch": 5}');
SELECT streamwin.create_query('ticks_copy', 'SELECT id, v FROM tick_src', start => false);
SELECT streamwin.create_query('ticks_sum', 'SELECT id % 3 AS r, count(*) AS n, sum(v) AS s FROM tick_src GROUP BY 1',
  output_mode => 'update', start => false);
SELECT streamwin.create_query('ticks_fail', 'SELECT id, 100 / (id - 23) AS x FROM tick_src', start => false);
DO $$ BEGIN FOR i IN 1..40 LOOP INSERT INTO ticks VALUES (i, i * i); COMMIT; END LOOP; END $$;
SELECT streamwin.run_available('ticks_copy') - 'offsets' - 'watermark';
SELECT * FROM ticks EXCEPT ALL SELECT * FROM ticks_copy;
SELECT * FROM ticks_copy EXCEPT ALL SELECT * FROM ticks;
SELECT count(*) AS slots_in_use FROM pg_replication_slots
WHERE active AND database = current_database();
-- CALL streamwin.catch_up: the same batches, each committed as it ends (so
-- each has its own transaction, seen in the xmin of its progress row in
-- streamwin.progress_log, which the view streamwin.progress shows), with
-- the same totals.  Not inside a transaction block, which it cannot commit.
BEGIN;
CALL streamwin.catch_up('ticks_sum');
ROLLBACK;
CALL streamwin.catch_up('ticks_sum') \gset
SELECT :'totals'::jsonb - 'offsets' - 'watermark' AS totals;
SELECT count(*) AS batches, count(DISTINCT xmin::text) AS transactions, sum(input_rows) AS input_rows
FROM streamwin.progress_log WHERE query = 'ticks_sum';
SELECT * FROM ticks_sum EXCEPT ALL SELECT id % 3, count(*), sum(v) FROM ticks GROUP BY 1;
SELECT id % 3, count(*), sum(v) FROM ticks GROUP BY 1 EXCEPT ALL SELECT * FROM ticks_sum;
-- run_available failing (row 23 divides by zero) in a savepoint that is
-- rolled back, as psql's ON_ERROR_ROLLBACK or a PL/pgSQL exception block
-- rolls it back: the decoding context its batches kept, and the slot, go
-- with the savepoint, before the transaction ends.
BEGIN;
SAVEPOINT before_run;
SELECT streamwin.run_available('ticks_fail');
ROLLBACK TO before_run;
SELECT count(*) AS slots_in_use FROM pg_replication_slots
WHERE active AND database = current_database();
DO $$ BEGIN PERFORM streamwin.run_available('ticks_fail');
EXCEPTION WHEN division_by_zero THEN RAISE NOTICE 'run_available failed: %', SQLERRM; END $$;
SELECT count(*) AS slots_in_use FROM pg_replication_slots
WHERE active AND database = current_database();
COMMIT;
-- A batch that fails (row 23 divides by zero) is rolled back alone: the
-- four before it stay committed, with their rows and positions.
CALL streamwin.catch_up('ticks_fail');
SELECT count(*) AS batches FROM streamwin.progress WHERE query = 'ticks_fail';
SELECT count(*) AS rows, min(id), max(id) FROM ticks_fail;
SELECT streamwin.drop_query('ticks_fail', drop_result => true);
SELECT count(*) AS slots_in_use FROM pg_replication_slots
WHERE active AND database = current_database();
SELECT streamwin.drop_query('ticks_sum', drop_result => true);
SELECT streamwin.drop_query('ticks_copy', drop_result => true);
SELECT streamwin.drop_source('tick_src');
DROP TABLE ticks;

-- A transaction larger than a batch, read by batches that follow one
-- another (catch_up, run_available, a worker alone on its source): the
-- first batch decodes it once and keeps the rows after its cut for the
-- next ones, which read no WAL, instead of each decoding it all again.
-- Changes to other rows inside it are counted once, by the batch that
-- finishes it.  A batch that fails in between (here: a constraint on the
-- result refuses row 13) leaves those rows to be decoded again, and the
-- result holds every inserted row exactly once.
CREATE TABLE bulk (id int, v int);
SELECT streamwin.create_table_source('bulk_src', 'bulk', '{"max_records_per_batch": 5}');
SELECT streamwin.create_query('bulk_copy', 'SELECT id, v FROM bulk_src', start => false);
BEGIN;
INSERT INTO bulk SELECT g, g * 10 FROM generate_series(1, 8) g;
UPDATE bulk SET v = v + 1 WHERE id = 1;
DELETE FROM bulk WHERE id = 2;
INSERT INTO bulk SELECT g, g * 10 FROM generate_series(9, 23) g;
COMMIT;
INSERT INTO bulk VALUES (24, 240);
ALTER TABLE bulk_copy ADD CONSTRAINT not_13 CHECK (id <> 13);
CALL streamwin.catch_up('bulk_copy');
SELECT batch_id, input_rows, offsets->'index' AS index, offsets->'ignored' AS ignored
FROM streamwin.progress WHERE query = 'bulk_copy' ORDER BY batch_id;
ALTER TABLE bulk_copy DROP CONSTRAINT not_13;
CALL streamwin.catch_up('bulk_copy') \gset
SELECT :'totals'::jsonb - 'offsets' - 'watermark' AS totals;
SELECT batch_id, input_rows, offsets->'index' AS index, offsets->'ignored' AS ignored
FROM streamwin.progress WHERE query = 'bulk_copy' ORDER BY batch_id;
SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM bulk_copy;
SELECT * FROM bulk_copy EXCEPT ALL SELECT g, g * 10 FROM generate_series(1, 24) g;
SELECT g, g * 10 FROM generate_series(1, 24) g EXCEPT ALL SELECT * FROM bulk_copy;
SELECT streamwin.drop_query('bulk_copy', drop_result => true);
SELECT streamwin.drop_source('bulk_src');
DROP TABLE bulk;

-- A source without its own max_records_per_batch takes the setting as it
-- is where each batch runs: a SET in the session that keeps the query's
-- runner applies to its next batch.
CREATE TABLE capped (id int);
SELECT streamwin.create_table_source('capped_src', 'capped');
SELECT streamwin.create_query('capped_copy', 'SELECT id FROM capped_src', start => false);
INSERT INTO capped SELECT g FROM generate_series(1, 10) g;
SET streamwin.max_records_per_batch = 2;
SELECT (streamwin.run_batch('capped_copy'))->>'input_rows' AS input_rows;
SET streamwin.max_records_per_batch = 3;
SELECT (streamwin.run_batch('capped_copy'))->>'input_rows' AS input_rows;
RESET streamwin.max_records_per_batch;
SELECT (streamwin.run_batch('capped_copy'))->>'input_rows' AS input_rows;
SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM capped_copy;
SELECT streamwin.drop_query('capped_copy', drop_result => true);
SELECT streamwin.drop_source('capped_src');
DROP TABLE capped;

-- hop() in a transform (no GROUP BY) is the function it is: the start of
-- each row's latest window, a row each, NULL for a NULL time, as plain SQL.
CREATE TABLE hopped (id int, ts timestamptz);
SELECT streamwin.create_table_source('hopped_src', 'hopped');
SELECT streamwin.create_query('hopped_rows',
    $$SELECT id, streamwin.hop(ts, '10 minutes', '5 minutes') AS w FROM hopped_src$$, start => false);
INSERT INTO hopped VALUES (1, '2026-01-01 12:07:00+00'), (2, NULL), (3, '2026-01-01 12:10:00+00');
SELECT (streamwin.run_batch('hopped_rows'))->>'input_rows' AS input_rows;
SELECT count(*) AS rows FROM hopped_rows;
(SELECT id, w FROM hopped_rows EXCEPT ALL SELECT id, streamwin.hop(ts, '10 minutes', '5 minutes') FROM hopped)
UNION ALL
(SELECT id, streamwin.hop(ts, '10 minutes', '5 minutes') FROM hopped EXCEPT ALL SELECT id, w FROM hopped_rows);
SELECT streamwin.drop_query('hopped_rows', drop_result => true);
-- hop() grouped, and in an expression of the SELECT list: the group's
-- window there too, as a tumble() is (with the previous build: "column
-- hopped_src.ts must appear in the GROUP BY clause")
SELECT streamwin.create_query('hop_closes',
    $$SELECT streamwin.hop(ts, '10 minutes', '5 minutes') + interval '10 minutes' AS closes, count(*) AS n
        FROM hopped_src GROUP BY streamwin.hop(ts, '10 minutes', '5 minutes')$$,
    output_mode => 'update', start => false);
TRUNCATE hopped;
INSERT INTO hopped VALUES (4, '2026-01-01 12:07:00+00'), (5, '2026-01-01 12:12:00+00');
SELECT (streamwin.run_batch('hop_closes'))->>'input_rows' AS input_rows;
SELECT window_start, window_end, closes, n FROM hop_closes ORDER BY 1;
SELECT streamwin.drop_query('hop_closes', drop_result => true);
SELECT streamwin.drop_source('hopped_src');
DROP TABLE hopped;

-- Columns of a row's transaction, after the table's (the "metadata" option):
-- its commit time, its commit LSN, and the row's number within it.
CREATE TABLE notes (id int, body text);
SELECT streamwin.create_table_source('notes_meta', 'notes', '{"metadata": {"key": "key"}}');
SELECT streamwin.create_table_source('notes_meta', 'notes', '{"metadata": {"id": "offset"}}');
SELECT streamwin.create_table_source('notes_meta', 'notes',
  '{"metadata": {"committed_at_according_to_the_logical_replication_stream_of_postgres": "timestamp"}}');
SELECT streamwin.create_table_source('notes_meta', 'notes',
  '{"metadata": {"committed_at": "timestamp", "commit_lsn": "offset", "n": "partition"}}');
\d notes_meta
SELECT streamwin.create_query('notes_copy', 'SELECT * FROM notes_meta', start => false);
SELECT now() AS before \gset
BEGIN;
INSERT INTO notes VALUES (1, 'a'), (2, 'b');
INSERT INTO notes VALUES (3, 'c');
COMMIT;
INSERT INTO notes VALUES (4, 'd');
SELECT (streamwin.run_available('notes_copy'))->'input_rows' AS input_rows;
SELECT id, body, n, committed_at BETWEEN :'before' AND clock_timestamp() AS committed_now,
       dense_rank() OVER (ORDER BY commit_lsn) AS transaction,
       commit_lsn <= pg_current_wal_lsn() AS lsn_past
FROM notes_copy ORDER BY id;
SELECT count(DISTINCT committed_at) AS commit_times FROM notes_copy;
-- a column added to the table under a metadata column's name is not the
-- metadata column: the rows keep their commit time
ALTER TABLE notes ADD COLUMN committed_at text;
INSERT INTO notes VALUES (5, 'e', 'not a time');
SELECT (streamwin.run_available('notes_copy'))->'input_rows' AS input_rows;
SELECT id, committed_at BETWEEN :'before' AND clock_timestamp() AS committed_now
FROM notes_copy WHERE id = 5;
SELECT streamwin.drop_query('notes_copy', drop_result => true);
SELECT streamwin.drop_source('notes_meta');
DROP TABLE notes;

-- A batch's statements run with work_mem = streamwin.batch_work_mem (a batch
-- groups and sorts up to max_records_per_batch rows at once), or with the
-- session's work_mem when it is -1; the session's setting is back after.
-- (current_setting() itself is refused in a query: a function of one's own
-- that calls it is taken to depend on its argument alone)
CREATE TABLE probes (id int);
SELECT streamwin.create_table_source('probe_src', 'probes');
CREATE FUNCTION probe_setting(text) RETURNS text LANGUAGE sql STABLE
  AS $$SELECT current_setting($1)$$;
SELECT streamwin.create_query('probe_mem',
  $$SELECT probe_setting('work_mem') AS mem, count(*) AS n FROM probe_src GROUP BY 1$$,
  output_mode => 'update', start => false);
SET work_mem = '1MB';
INSERT INTO probes VALUES (1);
SELECT streamwin.run_batch('probe_mem')->>'input_rows' AS input_rows;
SHOW work_mem;
SET streamwin.batch_work_mem = -1;
INSERT INTO probes VALUES (2);
SELECT streamwin.run_batch('probe_mem')->>'input_rows' AS input_rows;
SELECT mem, n FROM probe_mem ORDER BY mem;
RESET streamwin.batch_work_mem;
RESET work_mem;
-- A batch in a REPEATABLE READ transaction, whose snapshot predates the
-- batch's lock, also locks the query's row (to fail rather than run on a
-- position another batch has moved): it runs all the same.
INSERT INTO probes VALUES (3);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT streamwin.run_batch('probe_mem')->>'input_rows' AS input_rows;
COMMIT;
SELECT mem, n FROM probe_mem ORDER BY mem;
SELECT streamwin.drop_query('probe_mem', drop_result => true);
DROP FUNCTION probe_setting(text);
SELECT streamwin.drop_source('probe_src');
DROP TABLE probes;

-- Event time as epoch milliseconds: a bigint column, windowed on an
-- expression of it.  One row per batch, 41 batches in one run_available
-- transaction: the closing windows are inserted into the result in a
-- subtransaction each for the first 32 batches (at most 32 per
-- transaction), then upserted.  The watermark (5 s behind the newest event,
-- 35 s) closes [0 s, 10 s), [10 s, 20 s) and [20 s, 30 s).
CREATE TABLE clicks (k text, ts_ms bigint);
SELECT streamwin.create_table_source('clicks_src', 'clicks', '{"max_records_per_batch": 1}');
SELECT streamwin.create_query('clicks_10s',
    $$SELECT k, count(*) AS n FROM clicks_src
      GROUP BY streamwin.tumble(to_timestamp(ts_ms / 1000.0), '10 seconds'), k$$,
    watermark => '5 seconds', start => false);
INSERT INTO clicks SELECT 'k' || g % 2, 1767225600000 + g * 1000 FROM generate_series(0, 40) g;
SELECT r->>'batches' AS batches, r->>'watermark' AS watermark
  FROM streamwin.run_available('clicks_10s') r;
SELECT * FROM clicks_10s ORDER BY window_start, k;
SELECT streamwin.drop_query('clicks_10s', drop_result => true);
SELECT streamwin.drop_source('clicks_src');
DROP TABLE clicks;

-- A column's type modifier changed without a rewrite (varchar(10) to
-- varchar(100)) is a change of its type: the source's column is still
-- varchar(10), and a longer value would land in a result column that says
-- so.  The batch fails, saying what changed; the rows before it were read.
CREATE TABLE labels (id int, name varchar(10));
SELECT streamwin.create_table_source('labels_src', 'labels');
SELECT streamwin.create_query('label_rows', 'SELECT id, name FROM labels_src', start => false);
INSERT INTO labels VALUES (1, 'short');
SELECT (streamwin.run_batch('label_rows'))->>'input_rows' AS input_rows;
ALTER TABLE labels ALTER name TYPE varchar(100);
INSERT INTO labels VALUES (2, repeat('x', 50));
\set SHOW_CONTEXT never
SELECT streamwin.run_batch('label_rows');
\set SHOW_CONTEXT errors
SELECT id, name FROM label_rows;
SELECT streamwin.drop_query('label_rows', drop_result => true);
SELECT streamwin.drop_source('labels_src');
DROP TABLE labels;

-- So is a collation changed without a rewrite: the source's queries would
-- sort and compare in the old one ('B' before 'a'), the table in the new.
CREATE TABLE tags (id int, g int, t text COLLATE "C");
SELECT streamwin.create_table_source('tags_src', 'tags');
SELECT streamwin.create_query('tag_first', 'SELECT g, min(t) AS first FROM tags_src GROUP BY g',
    output_mode => 'update', start => false);
INSERT INTO tags VALUES (1, 1, 'a');
SELECT (streamwin.run_batch('tag_first'))->>'input_rows' AS input_rows;
ALTER TABLE tags ALTER t TYPE text COLLATE "en-x-icu";
INSERT INTO tags VALUES (2, 1, 'B');
\set SHOW_CONTEXT never
SELECT streamwin.run_batch('tag_first');
\set SHOW_CONTEXT errors
SELECT g, first FROM tag_first;
SELECT streamwin.drop_query('tag_first', drop_result => true);
SELECT streamwin.drop_source('tags_src');
DROP TABLE tags;

-- Column names that streamwin also uses for columns of its own, in state
-- tables and batch statements: a key named like a partial aggregate
-- ("n$count" next to count(*) AS n), an alias too long to take a suffix,
-- keys named like a session's helper columns, window_start and window_end
-- where there is no window.  Each result equals plain SQL over the rows.
CREATE TABLE odd (k text, "n$count" int, "__ts" int, "__isl" int, f boolean, v int, ts timestamptz);
SELECT streamwin.create_table_source('odd_src', 'odd', '{"max_records_per_batch": 7}');
SELECT streamwin.create_query('odd_tumble',
    $$SELECT "n$count", count(*) AS n, sum(v) AS "s$sum",
             avg(v) AS average_value_of_v_in_each_ten_second_window_per_n_count_group
      FROM odd_src GROUP BY streamwin.tumble(ts, '10 seconds'), "n$count"$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('odd_hop',
    $$SELECT "n$count", count(*) AS n, sum(v) AS s
      FROM odd_src GROUP BY streamwin.hop(ts, '20 seconds', '10 seconds'), "n$count"$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('odd_session',
    $$SELECT "__ts", "__isl", count(*) AS n, sum(v) FILTER (WHERE f) AS s
      FROM odd_src GROUP BY streamwin.session(ts, '5 seconds'), "__ts", "__isl"$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('odd_running',
    'SELECT k AS window_start, count(*) AS window_end FROM odd_src GROUP BY k',
    output_mode => 'complete', start => false);
SELECT streamwin.create_query('odd_copy',
    'SELECT k, ts AS window_start, v AS window_end FROM odd_src', start => false);
-- runs of ten rows 2 seconds apart, 30 seconds between runs
INSERT INTO odd
SELECT 'k' || g % 3, g % 2, g % 2, g / 25, g % 5 <> 0, g,
       '2026-01-01 00:00:00+00'::timestamptz + (g * 2 + g / 10 * 30) * interval '1 second'
FROM generate_series(0, 49) g;
SELECT q, (streamwin.run_available(q))->'input_rows' AS input_rows
FROM unnest('{odd_tumble,odd_hop,odd_session,odd_running,odd_copy}'::text[]) q;
CREATE FUNCTION differences(got text, want text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM (((%s) EXCEPT ALL (%s)) UNION ALL ((%s) EXCEPT ALL (%s))) d',
                   got, want, want, got) INTO n;
    RETURN n;
END $$;
SELECT differences('SELECT * FROM odd_tumble',
    $$SELECT date_bin('10 seconds', ts, 'epoch'), date_bin('10 seconds', ts, 'epoch') + interval '10 seconds',
             "n$count", count(*), sum(v), avg(v) FROM odd GROUP BY 1, 2, 3$$) AS tumble,
       differences('SELECT * FROM odd_hop',
    $$SELECT w, w + interval '20 seconds', "n$count", count(*), sum(v)
      FROM odd, LATERAL (VALUES (date_bin('10 seconds', ts, 'epoch')),
                                (date_bin('10 seconds', ts, 'epoch') - interval '10 seconds')) AS h(w)
      GROUP BY 1, 2, 3$$) AS hop,
       differences('SELECT * FROM odd_session',
    $$WITH b AS (SELECT *, CASE WHEN ts - lag(ts) OVER w < interval '5 seconds' THEN 0 ELSE 1 END AS brk
                 FROM odd WINDOW w AS (PARTITION BY "__ts", "__isl" ORDER BY ts)),
           i AS (SELECT *, sum(brk) OVER (PARTITION BY "__ts", "__isl" ORDER BY ts) AS island FROM b)
      SELECT min(ts), max(ts) + interval '5 seconds', "__ts", "__isl", count(*), sum(v) FILTER (WHERE f)
      FROM i GROUP BY "__ts", "__isl", island$$) AS session,
       differences('SELECT * FROM odd_running', 'SELECT k, count(*) FROM odd GROUP BY k') AS running,
       differences('SELECT * FROM odd_copy', 'SELECT k, ts, v FROM odd') AS transform;
SELECT (SELECT count(*) FROM odd_tumble) AS tumble, (SELECT count(*) FROM odd_hop) AS hop,
       (SELECT count(*) FROM odd_session) AS session, (SELECT count(*) FROM odd_running) AS running,
       (SELECT count(*) FROM odd_copy) AS transform;
SELECT streamwin.drop_query(q, drop_result => true)
FROM unnest('{odd_tumble,odd_hop,odd_session,odd_running,odd_copy}'::text[]) q;
SELECT streamwin.drop_source('odd_src');
DROP TABLE odd;

-- Expressions over the group keys and the window (not over aggregates) are
-- result columns computed when a group's row is written, as plain SQL
-- computes them per group: in every output mode, and for every window.
CREATE TABLE scores (k text, v int, ts timestamptz);
SELECT streamwin.create_table_source('scores_src', 'scores', '{"max_records_per_batch": 6}');
SELECT streamwin.create_query('scores_append',
    $$SELECT k, upper(k) AS uk, k || '#' || length(k) AS tag, count(*) AS n,
             streamwin.tumble(ts, '10 seconds') + interval '10 seconds' AS closes, 'v1' AS version
      FROM scores_src GROUP BY streamwin.tumble(ts, '10 seconds'), k$$,
    watermark => '5 seconds', start => false);
\d scores_append
SELECT streamwin.create_query('scores_update',
    $$SELECT k, upper(k) AS uk, count(*) AS n, sum(v) AS total
      FROM scores_src GROUP BY streamwin.hop(ts, '20 seconds', '10 seconds'), k$$,
    watermark => '5 seconds', output_mode => 'update', start => false);
SELECT streamwin.create_query('scores_session',
    $$SELECT k, count(*) AS n, k || '!' AS shout,
             streamwin.session(ts, '10 seconds') + interval '1 hour' AS start_plus_1h
      FROM scores_src GROUP BY streamwin.session(ts, '10 seconds'), k$$,
    watermark => '5 seconds', output_mode => 'update', start => false);
SELECT streamwin.create_query('scores_complete',
    $$SELECT k, v % 2 AS parity, (v % 2) * 10 + length(k) AS code, upper(k) AS uk, sum(v) AS total
      FROM scores_src GROUP BY k, v % 2$$,
    output_mode => 'complete', start => false);
INSERT INTO scores
SELECT (ARRAY['a', 'bb', 'ccc'])[g % 3 + 1], g,
       '2026-01-01 00:00:00+00'::timestamptz + (g * 3 + g / 8 * 20 - g % 2) * interval '1 second'
FROM generate_series(0, 29) g;
SELECT q, (streamwin.run_available(q))->'input_rows' AS input_rows
FROM unnest('{scores_append,scores_update,scores_session,scores_complete}'::text[]) q;
-- append mode: the windows the watermark closed
SELECT differences('SELECT * FROM scores_append',
    $$SELECT w, w + interval '10 seconds', k, upper(k), k || '#' || length(k), count(*),
             w + interval '10 seconds', 'v1'
      FROM scores, LATERAL (SELECT date_bin('10 seconds', ts, 'epoch')) AS t(w)
      GROUP BY w, k
      HAVING w + interval '10 seconds' <= (SELECT watermark FROM streamwin.queries WHERE name = 'scores_append')$$) AS append,
       differences('SELECT * FROM scores_update',
    $$SELECT w, w + interval '20 seconds', k, upper(k), count(*), sum(v)
      FROM scores, LATERAL (VALUES (date_bin('10 seconds', ts, 'epoch')),
                                   (date_bin('10 seconds', ts, 'epoch') - interval '10 seconds')) AS h(w)
      GROUP BY w, k$$) AS update,
       differences('SELECT * FROM scores_session',
    $$WITH b AS (SELECT *, CASE WHEN ts - lag(ts) OVER w < interval '10 seconds' THEN 0 ELSE 1 END AS brk
                 FROM scores WINDOW w AS (PARTITION BY k ORDER BY ts)),
           i AS (SELECT *, sum(brk) OVER (PARTITION BY k ORDER BY ts) AS island FROM b)
      SELECT min(ts), max(ts) + interval '10 seconds', k, count(*), k || '!', min(ts) + interval '1 hour'
      FROM i GROUP BY k, island$$) AS session,
       differences('SELECT * FROM scores_complete',
    $$SELECT k, v % 2, (v % 2) * 10 + length(k), upper(k), sum(v) FROM scores GROUP BY k, v % 2$$) AS complete;
SELECT (SELECT count(*) FROM scores_append) AS append, (SELECT count(*) FROM scores_update) AS update,
       (SELECT count(*) FROM scores_session) AS session, (SELECT count(*) FROM scores_complete) AS complete;
DROP FUNCTION differences(text, text);
SELECT streamwin.drop_query(q, drop_result => true)
FROM unnest('{scores_append,scores_update,scores_session,scores_complete}'::text[]) q;
SELECT streamwin.drop_source('scores_src');
DROP TABLE scores;

-- A timestamp without time zone turned into the event time is read in the
-- source's zone (option "timezone"), and so is every date and time function
-- of the batch, whatever the zone of the session that runs it: here a session
-- in New York runs the batches of a source in Tokyo, and the windows are
-- Tokyo's hours, as plain SQL with AT TIME ZONE 'Asia/Tokyo' computes them.
CREATE TABLE readings (sensor text, taken timestamp);
SELECT streamwin.create_table_source('readings_src', 'readings', '{"timezone": "Asia/Tokyo"}');
SELECT streamwin.create_query('readings_hourly',
    $$SELECT sensor, count(*) AS n, min(date_trunc('day', taken::timestamptz)) AS first_day
      FROM readings_src GROUP BY streamwin.tumble(taken::timestamptz, '1 hour'), sensor$$,
    output_mode => 'update', start => false);
INSERT INTO readings
SELECT 's' || g % 3, timestamp '2026-03-07 20:00' + g * interval '17 minutes'
FROM generate_series(0, 59) g;
SET timezone = 'America/New_York';
SELECT (streamwin.run_available('readings_hourly')->>'input_rows')::int AS input_rows;
SHOW timezone;
(SELECT * FROM readings_hourly
 EXCEPT
 SELECT date_trunc('hour', taken) AT TIME ZONE 'Asia/Tokyo',
        date_trunc('hour', taken) AT TIME ZONE 'Asia/Tokyo' + interval '1 hour',
        sensor, count(*), min(date_trunc('day', taken) AT TIME ZONE 'Asia/Tokyo')
 FROM readings GROUP BY 1, 2, 3)
UNION ALL
(SELECT date_trunc('hour', taken) AT TIME ZONE 'Asia/Tokyo',
        date_trunc('hour', taken) AT TIME ZONE 'Asia/Tokyo' + interval '1 hour',
        sensor, count(*), min(date_trunc('day', taken) AT TIME ZONE 'Asia/Tokyo')
 FROM readings GROUP BY 1, 2, 3
 EXCEPT
 SELECT * FROM readings_hourly);
SELECT count(*) AS windows FROM readings_hourly;
RESET timezone;
SELECT streamwin.drop_query('readings_hourly', drop_result => true);
SELECT streamwin.drop_source('readings_src');
DROP TABLE readings;

-- An update-mode result keeps room on its pages (fill factor 50; 80 for a
-- window's rows, rewritten only while it is open), and the store prunes
-- the last batch's row versions off the pages before it updates them: a
-- running aggregate that every batch rewrites stays on its few pages, its
-- new row versions heap-only tuples, which take no index entry.
CREATE TABLE tallies (id int, g int) WITH (autovacuum_enabled = off);
SELECT streamwin.create_table_source('tallies_src', 'tallies');
SELECT streamwin.create_query('tally_counts', 'SELECT g, count(*) AS n FROM tallies_src GROUP BY g',
  output_mode => 'update', start => false);
SELECT streamwin.create_query('tally_windows', $$SELECT streamwin.tumble(now(), interval '1 hour') AS w, g,
  count(*) AS n FROM tallies_src GROUP BY 1, 2$$, output_mode => 'update', start => false);
SELECT relname, reloptions FROM pg_class WHERE relname IN ('tally_counts', 'tally_windows') ORDER BY 1;
-- (no autovacuum: an analyze's snapshot would keep a batch from pruning)
ALTER TABLE tally_counts SET (autovacuum_enabled = off);
-- 20 batches, each in a transaction of its own and changing every group
DO $$
BEGIN
  FOR i IN 1..20 LOOP
    INSERT INTO tallies SELECT g, g FROM generate_series(1, 300) g;
    COMMIT;
    PERFORM streamwin.run_batch('tally_counts');
    COMMIT;
  END LOOP;
END $$;
SELECT pg_stat_force_next_flush();
SELECT n_tup_upd AS updates, n_tup_hot_upd >= n_tup_upd * 0.8 AS heap_only,
       pg_relation_size('tally_counts') <= 12 * 8192 AS few_pages
FROM pg_stat_user_tables WHERE relname = 'tally_counts';
SELECT count(*) AS differing FROM (
  (SELECT g, n FROM tally_counts EXCEPT SELECT g, count(*) FROM tallies GROUP BY g)
  UNION ALL (SELECT g, count(*) FROM tallies GROUP BY g EXCEPT SELECT g, n FROM tally_counts)) d;
SELECT streamwin.drop_query('tally_counts', drop_result => true);
SELECT streamwin.drop_query('tally_windows', drop_result => true);
SELECT streamwin.drop_source('tallies_src');
DROP TABLE tallies;

-- A query whose state is in memory checkpoints every batch of a table
-- source: each fetch decodes from the slot's restart point, and the slot is
-- confirmed no further than the last checkpoint (a crash replays from
-- there), so a sparser checkpoint would make every batch decode the WAL of
-- the batches since it again.  The restart point follows the batches too,
-- a round or so behind: a decoding pass logs the record a later pass may
-- start from (at most every 100 ms, and only after other WAL), which the
-- slot takes up once a later confirmation passes it.
CREATE TABLE steady (g int, v int);
SELECT streamwin.create_table_source('steady_src', 'steady');
SELECT streamwin.create_query('steady_counts', 'SELECT g, count(*) AS n FROM steady_src GROUP BY g',
    output_mode => 'update', start => false);
CREATE TABLE steady_lsns (round int, lsn pg_lsn);
DO $$
BEGIN
  FOR i IN 1..6 LOOP
    INSERT INTO steady SELECT g, i FROM generate_series(1, 200) g;
    COMMIT;
    PERFORM streamwin.run_batch('steady_counts');
    COMMIT;
    INSERT INTO steady_lsns VALUES (i, pg_current_wal_insert_lsn());
    COMMIT;
    PERFORM pg_sleep(0.12);
  END LOOP;
END $$;
SELECT last_batch_id, checkpoint_batch_id = last_batch_id AS checkpointed_every_batch
FROM streamwin.query_catalog WHERE name = 'steady_counts';
SELECT s.restart_lsn >= (SELECT lsn FROM steady_lsns WHERE round = 3) AS restart_follows,
       s.confirmed_flush_lsn >= (SELECT lsn FROM steady_lsns WHERE round = 4) AS confirmed_follows
FROM pg_replication_slots s JOIN streamwin.sources USING (slot_name) WHERE name = 'steady_src';
SELECT count(*) AS differing FROM (
  (SELECT g, n FROM steady_counts EXCEPT SELECT g, count(*) FROM steady GROUP BY g)
  UNION ALL (SELECT g, count(*) FROM steady GROUP BY g EXCEPT SELECT g, n FROM steady_counts)) d;
SELECT streamwin.drop_query('steady_counts', drop_result => true);
SELECT streamwin.drop_source('steady_src');
DROP TABLE steady, steady_lsns;

-- The queries view shows the lag in bytes of WAL.
SELECT name, source, state, lag >= 0 AS lag_known FROM streamwin.queries ORDER BY name;

-- A source with queries cannot be dropped; dropping the last query lets the
-- slot move on, and dropping the source removes the slot.
SELECT streamwin.drop_source('shop');
SELECT streamwin.drop_query('revenue', drop_result => true);
SELECT streamwin.drop_query('big_orders', drop_result => true);
SELECT s.confirmed_flush_lsn >= pg_current_wal_insert_lsn() - 8192 AS slot_caught_up
FROM pg_replication_slots s JOIN streamwin.sources USING (slot_name);
SELECT streamwin.drop_source('shop');
SELECT count(*) AS streamwin_slots FROM pg_replication_slots
WHERE plugin = 'streamwin' AND database = current_database();
DROP FUNCTION batch(text);
DROP TABLE orders, inserted, orders_unlogged, orders_parted CASCADE;

-- A hop whose size is not a multiple of its slide, read in a zone with
-- daylight saving time: its windows are of a fixed length, as windows are
-- everywhere else, not calendar days (2024-03-31 has 23 hours in Berlin).
-- Plain SQL: the starts, whole days since the epoch, whose 36 hours cover
-- each row.
SET timezone = 'UTC';
CREATE TABLE dst (id int, ts timestamptz);
SELECT streamwin.create_table_source('dst_src', 'dst', '{"timezone": "Europe/Berlin"}');
SELECT streamwin.create_query('dst_hops',
    $$SELECT count(*) AS n, min(id) AS first FROM dst_src GROUP BY streamwin.hop(ts, '36 hours', '1 day')$$,
    output_mode => 'update', start => false);
INSERT INTO dst SELECT i, timestamptz '2024-03-29 00:00+00' + i * interval '1 hour' FROM generate_series(0, 95) i;
SELECT (streamwin.run_available('dst_hops'))->>'input_rows' AS rows;
SELECT window_start, window_end, n, first FROM dst_hops ORDER BY window_start;
CREATE VIEW dst_plain AS
  SELECT s AS window_start, s + interval '36 hours' AS window_end, count(*) AS n, min(id) AS first
    FROM dst, LATERAL (SELECT to_timestamp(floor(extract(epoch FROM ts) / 86400) * 86400 - i * 86400) AS s
                         FROM generate_series(0, 1) i) w
   WHERE ts < s + interval '36 hours'
   GROUP BY s;
SELECT count(*) AS differing FROM (
  (SELECT window_start, window_end, n, first FROM dst_hops EXCEPT SELECT * FROM dst_plain)
  UNION ALL (SELECT * FROM dst_plain EXCEPT SELECT window_start, window_end, n, first FROM dst_hops)) d;
SELECT streamwin.drop_query('dst_hops', drop_result => true);
SELECT streamwin.drop_source('dst_src');
DROP VIEW dst_plain;
DROP TABLE dst;

-- A hop whose size is a multiple of its slide, with the window start read
-- in a FILTER: each row counts in each of its windows as that window's,
-- not as its pane's (whose start is another).
CREATE TABLE hopf (id int, k int, ts timestamptz);
SELECT streamwin.create_table_source('hopf_src', 'hopf');
SELECT streamwin.create_query('hopf_q',
    $$SELECT k, count(*) AS n, count(*) FILTER (WHERE ts < window_start + interval '5 minutes') AS early
        FROM hopf_src GROUP BY streamwin.hop(ts, '10 minutes', '5 minutes'), k$$,
    output_mode => 'update', start => false);
INSERT INTO hopf SELECT i, i % 3, timestamptz '2024-01-01 00:00+00' + i * interval '37 seconds'
  FROM generate_series(0, 99) i;
SELECT (streamwin.run_available('hopf_q'))->>'input_rows' AS rows;
CREATE VIEW hopf_plain AS
  SELECT w.window_start, k, count(*) AS n, count(*) FILTER (WHERE ts < w.window_start + interval '5 minutes') AS early
    FROM hopf, LATERAL streamwin.hop_starts(ts, '10 minutes', '5 minutes') AS w(window_start)
   GROUP BY w.window_start, k;
SELECT count(*) AS differing FROM (
  (SELECT window_start, k, n, early FROM hopf_q EXCEPT SELECT * FROM hopf_plain)
  UNION ALL (SELECT * FROM hopf_plain EXCEPT SELECT window_start, k, n, early FROM hopf_q)) d;
SELECT sum(early) < sum(n) AS some_rows_late_in_their_window FROM hopf_q;
SELECT streamwin.drop_query('hopf_q', drop_result => true);
SELECT streamwin.drop_source('hopf_src');
DROP VIEW hopf_plain;
DROP TABLE hopf;

-- count(DISTINCT) under a case-insensitive collation: 'Alice' and 'ALICE'
-- are one value, whether they come in one batch or in two.
CREATE COLLATION ts_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE visitors (id int, g int, name text COLLATE ts_ci);
SELECT streamwin.create_table_source('visitors_src', 'visitors');
SELECT streamwin.create_query('visitors_q',
    $$SELECT g, count(DISTINCT name) AS users FROM visitors_src GROUP BY g$$,
    output_mode => 'update', start => false);
INSERT INTO visitors VALUES (1, 1, 'Alice'), (2, 1, 'bob');
SELECT (streamwin.run_batch('visitors_q'))->>'input_rows' AS rows;
INSERT INTO visitors VALUES (3, 1, 'ALICE'), (4, 1, 'Bob'), (5, 1, 'carol');
SELECT (streamwin.run_batch('visitors_q'))->>'input_rows' AS rows;
SELECT g, users, (SELECT count(DISTINCT name) FROM visitors v WHERE v.g = q.g) AS plain FROM visitors_q q;
SELECT streamwin.drop_query('visitors_q', drop_result => true);
SELECT streamwin.drop_source('visitors_src');
DROP TABLE visitors;
DROP COLLATION ts_ci;

-- drop_query of a source's last query lets its slot move to the end of the
-- WAL when it commits: rolled back, the query reads on from where it stood,
-- every row once.  The new connection holds no slot, as a batch would.
CREATE TABLE rolled (id int);
SELECT streamwin.create_table_source('rolled_src', 'rolled');
SELECT streamwin.create_query('rolled_q', 'SELECT id FROM rolled_src', start => false);
INSERT INTO rolled SELECT generate_series(1, 5);
\c
BEGIN;
SELECT streamwin.drop_query('rolled_q');
ROLLBACK;
INSERT INTO rolled SELECT generate_series(6, 8);
SELECT (streamwin.run_batch('rolled_q'))->>'input_rows' AS rows;
SELECT (SELECT count(*) FROM rolled_q) AS read, (SELECT count(*) FROM rolled) AS inserted,
       (SELECT sum(id) FROM rolled_q) = (SELECT sum(id) FROM rolled) AS same_sum;
-- a table made unlogged writes no WAL for the source to read: its batches
-- fail and say so, rather than find nothing
ALTER TABLE rolled SET UNLOGGED;
SELECT streamwin.run_batch('rolled_q');
ALTER TABLE rolled SET LOGGED;
-- committed, the slot moves on past what was there
\c
SELECT pg_current_wal_insert_lsn() AS before_drop \gset
SELECT streamwin.drop_query('rolled_q', drop_result => true);
SELECT r.confirmed_flush_lsn >= :'before_drop'::pg_lsn AS slot_moved_on
  FROM streamwin.sources s JOIN pg_replication_slots r USING (slot_name)
 WHERE s.name = 'rolled_src';
SELECT streamwin.drop_source('rolled_src');
DROP TABLE rolled;

-- A column renamed in the table stops an append-only source's batches
-- rather than read NULL under its old name; a column dropped reads NULL.
CREATE TABLE renamed (id int, amount int, note text);
SELECT streamwin.create_table_source('renamed_src', 'renamed');
SELECT streamwin.create_query('renamed_q', 'SELECT id, amount, note FROM renamed_src', start => false);
INSERT INTO renamed VALUES (1, 10, 'a');
ALTER TABLE renamed DROP COLUMN note;
INSERT INTO renamed VALUES (2, 20);
SELECT (streamwin.run_batch('renamed_q'))->>'input_rows' AS rows;
SELECT * FROM renamed_q ORDER BY id;
ALTER TABLE renamed RENAME amount TO amt;
INSERT INTO renamed VALUES (3, 30);
-- (terse: the error's context names the slot and an LSN, which vary)
\set VERBOSITY terse
SELECT streamwin.run_batch('renamed_q');
\set VERBOSITY default
SELECT streamwin.drop_query('renamed_q', drop_result => true);
SELECT streamwin.drop_source('renamed_src');
DROP TABLE renamed;

-- A source's table dropped: its queries' batches fail, saying so (they
-- read it by its oid, which names nothing any more), and the source and
-- its queries drop as any others.
CREATE TABLE gone (id int, amount int);
SELECT streamwin.create_table_source('gone_src', 'gone');
SELECT streamwin.create_query('gone_q', 'SELECT id, amount FROM gone_src', start => false);
INSERT INTO gone VALUES (1, 10);
SELECT (streamwin.run_batch('gone_q'))->>'input_rows' AS rows;
INSERT INTO gone VALUES (2, 20);
DROP TABLE gone;
SELECT streamwin.run_batch('gone_q');
SELECT streamwin.create_query('gone_q2', 'SELECT id FROM gone_src', start => false);
SELECT * FROM gone_q ORDER BY id;
SELECT streamwin.drop_query('gone_q', drop_result => true);
SELECT streamwin.drop_source('gone_src');

-- min and max of character types: the values whole (a char(4) or bpchar
-- result was cast to character, which is character(1): 'abcd' came out
-- 'a'), and of two equal values ('ab ' and 'ab') the first, as
-- PostgreSQL's min and max of bpchar keep it, across batches too
CREATE TABLE ties (id int, g int, c bpchar, d char(4));
SELECT streamwin.create_table_source('ties_src', 'ties');
SELECT streamwin.create_query('ties_q', 'SELECT g, min(c) AS lo, max(c) AS hi, min(d) AS dlo FROM ties_src GROUP BY g',
    output_mode => 'update', start => false);
INSERT INTO ties VALUES (1, 1, 'ab ', 'abcd');
SELECT (streamwin.run_batch('ties_q'))->>'input_rows' AS input_rows;
INSERT INTO ties VALUES (2, 1, 'ab', 'wxyz');
SELECT (streamwin.run_batch('ties_q'))->>'input_rows' AS input_rows;
SELECT octet_length(lo) AS lo_bytes, octet_length(hi) AS hi_bytes, dlo FROM ties_q;
SELECT octet_length(min(c)) AS lo_bytes, octet_length(max(c)) AS hi_bytes, min(d) AS dlo FROM ties;
SELECT streamwin.drop_query('ties_q', drop_result => true);
SELECT streamwin.drop_source('ties_src');
DROP TABLE ties;
