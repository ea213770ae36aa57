-- Changelog table sources ({"changes": "all"}): inserts, updates and
-- deletes of an ordinary table, as rows added (+1) and retracted (-1).
-- Every result is compared with plain SQL over the table itself, in both
-- directions (each diff must be 0), after inserts, updates that move rows
-- between groups and windows, deletes that empty groups, transactions that
-- roll back, and a restart of the store in a new session.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

CREATE TABLE orders (id int PRIMARY KEY, region text, amount numeric, qty int,
                     ts timestamptz, paid bool, note text);

-- Refused at creation, with what to change.
SELECT streamwin.create_table_source('bad', 'orders', '{"changes": "some"}');
-- a retraction needs the old row's every column
SELECT streamwin.create_table_source('bad', 'orders', '{"changes": "all"}');
ALTER TABLE orders REPLICA IDENTITY FULL;
-- a changelog's queries start from the table's rows, not from a position
SELECT streamwin.create_table_source('bad', 'orders', '{"changes": "all", "starting_offsets": "latest"}');
SELECT streamwin.create_table_source('chg', 'orders', '{"changes": "all", "max_records_per_batch": 40}');
-- the change column is the view's last
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'chg'::regclass AND attnum > 0 ORDER BY attnum DESC LIMIT 1;

-- What cannot retract exactly is refused.
CREATE TABLE regions (region text PRIMARY KEY, zone text);
SELECT streamwin.create_query('bad', $$SELECT c.region, count(*) FROM chg c JOIN regions r USING (region) GROUP BY c.region$$);
-- nor through a function that reads the table, in a group key or WHERE;
-- a keyed transform may show its value (its retraction deletes by key)
CREATE FUNCTION zone_of(text) RETURNS text STABLE LANGUAGE sql AS 'SELECT zone FROM regions WHERE region = $1';
SELECT streamwin.create_query('bad', $$SELECT zone_of(region) AS zone, count(*) FROM chg GROUP BY 1$$, output_mode => 'update');
SELECT streamwin.create_query('bad', $$SELECT id, region FROM chg WHERE zone_of(region) = 'east'$$);
SELECT streamwin.create_query('zoned', $$SELECT id, zone_of(region) AS zone FROM chg$$, start => false);
SELECT streamwin.drop_query('zoned', drop_result => true);
SELECT streamwin.create_query('bad', $$SELECT streamwin.tumble(now(), '1 minute'), count(*) FROM chg GROUP BY 1$$);
-- nor in hop()'s arguments
SELECT streamwin.create_query('bad', $$SELECT region, count(*) FROM chg GROUP BY region, streamwin.hop(now(), '10 minutes', '5 minutes')$$, output_mode => 'update');
SELECT streamwin.create_query('bad', $$SELECT region, count(*) FROM chg GROUP BY region, streamwin.hop(ts + length(zone_of(region)) * interval '1 minute', '10 minutes', '5 minutes')$$, output_mode => 'update');
SELECT streamwin.create_query('bad', $$SELECT region, count(*) FROM chg GROUP BY region, streamwin.hop(ts + __streamwin_change * interval '1 minute', '10 minutes', '5 minutes')$$, output_mode => 'update');
SELECT streamwin.create_query('bad', $$SELECT region, count(*) FROM chg GROUP BY region, streamwin.session(ts, '1 minute')$$, output_mode => 'update');
SELECT streamwin.create_query('bad', $$SELECT region, string_agg(note, ',') FROM chg GROUP BY region$$, output_mode => 'update');
SELECT streamwin.create_query('bad', $$SELECT region, count(*) FROM chg WHERE __streamwin_change > 0 GROUP BY region$$);
SELECT streamwin.create_query('bad', $$SELECT region, sum(__streamwin_change) FROM chg GROUP BY region$$);
SELECT streamwin.create_query('bad', $$SELECT id, region FROM chg$$, dedup_keys => ARRAY['id'],
                              options => '{"dedup_without_watermark": true}');
SELECT streamwin.create_query('bad', $$SELECT region, count(DISTINCT (id, note)) AS n FROM chg GROUP BY region$$,
                              output_mode => 'update');
-- (not first "dedup_keys need a watermark", whose hint leads here)
SELECT streamwin.create_query('bad', $$SELECT region, count(*) AS n FROM chg GROUP BY region$$,
                              output_mode => 'update', dedup_keys => ARRAY['id']);
SELECT streamwin.create_query('bad', $$SELECT region, amount FROM chg$$);
-- a whole-row reference is not the key column (nor any column)
SELECT streamwin.create_query('bad', $$SELECT c FROM chg c$$);
-- a query starts from the committed table: not in a transaction that truncated it
BEGIN;
TRUNCATE orders;
SELECT streamwin.create_query('bad', $$SELECT region, count(*) AS n FROM chg GROUP BY region$$,
                              output_mode => 'update', start => false);
ROLLBACK;

-- Running aggregates of every family that retracts exactly.
SELECT streamwin.create_query('by_region', $$
  SELECT region, count(*) AS n, count(note) AS notes, sum(amount) AS total, sum(qty) AS units,
         avg(amount) AS avg_amount, min(amount) AS low, max(qty) AS most,
         min(note) AS first_note, bool_and(paid) AS all_paid, bool_or(paid) AS any_paid,
         count(DISTINCT qty) AS qtys, sum(DISTINCT qty) AS distinct_units,
         count(*) FILTER (WHERE paid) AS paid_orders, array_agg(DISTINCT note) AS note_list
  FROM chg GROUP BY region$$, output_mode => 'update', start => false);
-- Its sets are stored in the state table, which the store rewrites at
-- every batch, in line compressed by lz4 where the server has it, else out
-- of line uncompressed; and compressed in the logged checkpoint table, as
-- the state table's columns say.
SELECT s.attname, s.attstorage = CASE s.attcompression WHEN 'l' THEN 'm' ELSE 'e' END AS state_storage,
       c.attstorage AS checkpoint_storage, c.attcompression = s.attcompression AS same_compression
FROM streamwin.query_catalog q
JOIN pg_attribute s ON s.attrelid = q.state_table
JOIN pg_attribute c ON c.attrelid = q.checkpoint_table AND c.attname = s.attname
WHERE q.name = 'by_region' AND s.atttypid = 'bytea'::regtype ORDER BY s.attnum;
-- Tumbling and hopping windows over event time (the hop's panes).
SELECT streamwin.create_query('hourly', $$
  SELECT streamwin.tumble(ts, '1 hour') AS window_start, region, count(*) AS n, sum(qty) AS units
  FROM chg WHERE amount > 5 GROUP BY 1, region$$, output_mode => 'update', start => false);
SELECT streamwin.create_query('sliding', $$
  SELECT streamwin.hop(ts, '2 hours', '1 hour') AS window_start, count(*) AS n, max(amount) AS top
  FROM chg GROUP BY 1$$, output_mode => 'update', start => false);
-- count() of a row value counts the rows whose value is not NULL, even
-- with NULL fields (ROW(NULL, ...) IS NOT NULL is false, yet counted);
-- bigint sums (as numeric) of values near the type's limit.
SELECT streamwin.create_query('paid_totals', $$
  SELECT paid, count(*) AS n, sum(amount) AS total, count(ROW(note, paid)) AS row_values,
         sum(9223372036854775807 - id) AS big_sum, avg(qty::bigint) AS avg_qty
  FROM chg GROUP BY paid$$,
  output_mode => 'complete', start => false);
-- A transform keeps the latest version of each row, by the primary key;
-- naming the change column appends every change instead.
SELECT streamwin.create_query('big_orders', $$SELECT id, region, amount * 2 AS doubled FROM chg WHERE amount > 50$$, start => false);
SELECT streamwin.create_query('order_changes', $$SELECT id, amount, __streamwin_change FROM chg$$, start => false);
-- Floating-point sums retract exactly: each value is summed as the decimal
-- its text is (the shortest that reads back as the same float), and the
-- result rounded to a float at the end.
SELECT streamwin.create_query('float_sums', $$
  SELECT region, sum(amount::float8) AS s, avg(amount::float8) AS a, stddev(qty::float8) AS sd,
         sum(qty::float4) AS s4 FROM chg GROUP BY region$$, output_mode => 'update', start => false);
-- Aggregates of the user's with an inverse transition function (MSFUNC
-- and MINVFUNC) run over the values their group's rows hold, each as many
-- times as rows hold it: a strict one, with and without FILTER; one that
-- takes NULLs (given each NULL a row holds); one over text in the
-- collation it is called in, whose inverse gives up (NULL, as PostgreSQL
-- lets an inverse do).
CREATE FUNCTION sq_add(bigint, int) RETURNS bigint STRICT IMMUTABLE LANGUAGE sql AS 'SELECT $1 + $2::bigint * $2';
CREATE FUNCTION sq_sub(bigint, int) RETURNS bigint STRICT IMMUTABLE LANGUAGE sql AS 'SELECT $1 - $2::bigint * $2';
CREATE AGGREGATE sum_sq(int) (SFUNC = sq_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = sq_add, MINVFUNC = sq_sub, MSTYPE = bigint, MINITCOND = '0');
CREATE FUNCTION null_add(bigint, text) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT $1 + (($2 IS NULL)::int)';
CREATE FUNCTION null_sub(bigint, text) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT $1 - (($2 IS NULL)::int)';
CREATE AGGREGATE count_nulls(text) (SFUNC = null_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = null_add, MINVFUNC = null_sub, MSTYPE = bigint, MINITCOND = '0');
CREATE FUNCTION least_add(text, text) RETURNS text IMMUTABLE LANGUAGE sql AS 'SELECT CASE WHEN $1 IS NULL OR $2 < $1 THEN $2 ELSE $1 END';
CREATE FUNCTION least_sub(text, text) RETURNS text IMMUTABLE LANGUAGE sql AS 'SELECT NULL::text';
CREATE AGGREGATE least_text(text) (SFUNC = least_add, STYPE = text,
  MSFUNC = least_add, MINVFUNC = least_sub, MSTYPE = text);
SELECT streamwin.create_query('moving', $$
  SELECT region, sum_sq(qty) AS squares, sum_sq(qty) FILTER (WHERE paid) AS paid_squares,
         count_nulls(note) AS no_note, least_text((upper(note) || id) COLLATE "C") AS least_c
  FROM chg GROUP BY region$$, output_mode => 'update', start => false);
-- Refused: one of a type without an ordering, whose values cannot be
-- counted in order.
CREATE FUNCTION x_add(float8, point) RETURNS float8 STRICT IMMUTABLE LANGUAGE sql AS 'SELECT $1 + $2[0]';
CREATE FUNCTION x_sub(float8, point) RETURNS float8 STRICT IMMUTABLE LANGUAGE sql AS 'SELECT $1 - $2[0]';
CREATE AGGREGATE sum_x(point) (SFUNC = x_add, STYPE = float8, INITCOND = '0',
  MSFUNC = x_add, MINVFUNC = x_sub, MSTYPE = float8, MINITCOND = '0');
SELECT streamwin.create_query('bad', $$SELECT region, sum_x(point(qty, 1)) AS x FROM chg GROUP BY region$$,
                              output_mode => 'update');

-- The same comparisons after every round.
CREATE VIEW moving_expected AS
  SELECT region, sum_sq(qty) AS squares, sum_sq(qty) FILTER (WHERE paid) AS paid_squares,
         count_nulls(note) AS no_note, least_text((upper(note) || id) COLLATE "C") AS least_c
  FROM orders GROUP BY region;
CREATE VIEW by_region_expected AS
  SELECT region, count(*) AS n, count(note) AS notes, sum(amount) AS total, sum(qty) AS units,
         avg(amount) AS avg_amount, min(amount) AS low, max(qty) AS most,
         min(note) AS first_note, bool_and(paid) AS all_paid, bool_or(paid) AS any_paid,
         count(DISTINCT qty) AS qtys, sum(DISTINCT qty) AS distinct_units,
         count(*) FILTER (WHERE paid) AS paid_orders, array_agg(DISTINCT note) AS note_list
  FROM orders GROUP BY region;
CREATE VIEW hourly_expected AS
  SELECT date_trunc('hour', ts) AS window_start, date_trunc('hour', ts) + interval '1 hour' AS window_end,
         region, count(*) AS n, sum(qty) AS units
  FROM orders WHERE amount > 5 GROUP BY 1, 2, region;
CREATE VIEW sliding_expected AS
  SELECT s AS window_start, s + interval '2 hours' AS window_end, count(*) AS n, max(amount) AS top
  FROM orders, LATERAL (VALUES (date_trunc('hour', ts)), (date_trunc('hour', ts) - interval '1 hour')) w(s)
  GROUP BY s;
CREATE VIEW paid_totals_expected AS
  SELECT paid, count(*) AS n, sum(amount) AS total, count(ROW(note, paid)) AS row_values,
         sum(9223372036854775807 - id) AS big_sum, avg(qty::bigint) AS avg_qty
  FROM orders GROUP BY paid;
CREATE VIEW float_sums_expected AS
  SELECT region, sum(amount)::float8 AS s, avg(amount)::float8 AS a, stddev(qty::numeric)::float8 AS sd,
         sum(qty)::float4 AS s4 FROM orders GROUP BY region;
CREATE VIEW big_orders_expected AS
  SELECT id, region, amount * 2 AS doubled FROM orders WHERE amount > 50;
CREATE TABLE changes_expected (id int, amount numeric, change int);
CREATE FUNCTION diffs() RETURNS TABLE (query text, missing bigint, extra bigint) LANGUAGE sql AS $$
  SELECT 'by_region',
         (SELECT count(*) FROM (TABLE by_region_expected EXCEPT ALL SELECT region, n, notes, total, units, avg_amount, low, most, first_note, all_paid, any_paid, qtys, distinct_units, paid_orders, note_list FROM by_region) x),
         (SELECT count(*) FROM (SELECT region, n, notes, total, units, avg_amount, low, most, first_note, all_paid, any_paid, qtys, distinct_units, paid_orders, note_list FROM by_region EXCEPT ALL TABLE by_region_expected) x)
  UNION ALL SELECT 'hourly',
         (SELECT count(*) FROM (TABLE hourly_expected EXCEPT ALL SELECT window_start, window_end, region, n, units FROM hourly) x),
         (SELECT count(*) FROM (SELECT window_start, window_end, region, n, units FROM hourly EXCEPT ALL TABLE hourly_expected) x)
  UNION ALL SELECT 'sliding',
         (SELECT count(*) FROM (TABLE sliding_expected EXCEPT ALL SELECT window_start, window_end, n, top FROM sliding) x),
         (SELECT count(*) FROM (SELECT window_start, window_end, n, top FROM sliding EXCEPT ALL TABLE sliding_expected) x)
  UNION ALL SELECT 'paid_totals',
         (SELECT count(*) FROM (TABLE paid_totals_expected EXCEPT ALL SELECT paid, n, total, row_values, big_sum, avg_qty FROM paid_totals) x),
         (SELECT count(*) FROM (SELECT paid, n, total, row_values, big_sum, avg_qty FROM paid_totals EXCEPT ALL TABLE paid_totals_expected) x)
  UNION ALL SELECT 'float_sums',
         (SELECT count(*) FROM (TABLE float_sums_expected EXCEPT ALL SELECT region, s, a, sd, s4 FROM float_sums) x),
         (SELECT count(*) FROM (SELECT region, s, a, sd, s4 FROM float_sums EXCEPT ALL TABLE float_sums_expected) x)
  UNION ALL SELECT 'moving',
         (SELECT count(*) FROM (TABLE moving_expected EXCEPT ALL SELECT region, squares, paid_squares, no_note, least_c FROM moving) x),
         (SELECT count(*) FROM (SELECT region, squares, paid_squares, no_note, least_c FROM moving EXCEPT ALL TABLE moving_expected) x)
  UNION ALL SELECT 'big_orders',
         (SELECT count(*) FROM (TABLE big_orders_expected EXCEPT ALL SELECT id, region, doubled FROM big_orders) x),
         (SELECT count(*) FROM (SELECT id, region, doubled FROM big_orders EXCEPT ALL TABLE big_orders_expected) x)
  UNION ALL SELECT 'order_changes',
         (SELECT count(*) FROM (TABLE changes_expected EXCEPT ALL SELECT id, amount, __streamwin_change FROM order_changes) x),
         (SELECT count(*) FROM (SELECT id, amount, __streamwin_change FROM order_changes EXCEPT ALL TABLE changes_expected) x)
$$;
-- the changes as a trigger sees them, for order_changes
CREATE FUNCTION log_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    INSERT INTO changes_expected VALUES (OLD.id, OLD.amount, -1);
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO changes_expected VALUES (NEW.id, NEW.amount, 1);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER log_change AFTER INSERT OR UPDATE OR DELETE ON orders
  FOR EACH ROW EXECUTE FUNCTION log_change();
CREATE FUNCTION run_all() RETURNS void LANGUAGE plpgsql AS $$
DECLARE q text;
BEGIN
  FOREACH q IN ARRAY ARRAY['by_region', 'hourly', 'sliding', 'paid_totals', 'float_sums', 'moving', 'big_orders', 'order_changes'] LOOP
    -- every batch until the source has nothing more
    WHILE (streamwin.run_batch(q)->>'input_rows')::bigint > 0 LOOP END LOOP;
  END LOOP;
END $$;

-- Round 1: inserts.
INSERT INTO orders
SELECT g, (ARRAY['eu', 'us', 'ap', NULL])[g % 4 + 1], g * 1.5, g % 7,
       '2026-01-01'::timestamptz + g * interval '7 minutes', g % 3 = 0,
       CASE WHEN g % 5 > 0 THEN 'n' || (g % 13) END
FROM generate_series(1, 120) g;
SELECT run_all();
SELECT * FROM diffs();
SELECT region, n, total, low, most, first_note, all_paid, qtys FROM by_region ORDER BY region;
SELECT * FROM moving ORDER BY region;

-- Round 2: updates that change values, move rows between groups and
-- windows, and in and out of a filter; deletes; a row added and deleted
-- in one transaction; a rolled back transaction; NULLs appearing.
UPDATE orders SET amount = amount + 100, qty = qty + 1 WHERE id % 10 = 0;
UPDATE orders SET region = 'eu' WHERE id % 9 = 0;
UPDATE orders SET ts = ts + interval '3 hours' WHERE id % 8 = 0;
UPDATE orders SET note = NULL, paid = NULL WHERE id % 11 = 0;
DELETE FROM orders WHERE id % 6 = 1;
BEGIN;
INSERT INTO orders VALUES (1000, 'mx', 7, 1, '2026-01-01 05:00', true, 'x');
UPDATE orders SET amount = 8 WHERE id = 1000;
DELETE FROM orders WHERE id = 1000;
COMMIT;
BEGIN;
DELETE FROM orders WHERE region = 'us';
ROLLBACK;
SELECT run_all();
SELECT * FROM diffs();

-- Round 3: whole groups and windows emptied; update mode deletes their
-- rows; the store restarts in a new session (loaded from its tables).
DELETE FROM orders WHERE region = 'ap';
DELETE FROM orders WHERE ts < '2026-01-01 03:00';
\c
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SELECT run_all();
SELECT * FROM diffs();
SELECT count(*) AS regions, bool_and(region IS DISTINCT FROM 'ap') AS ap_gone FROM by_region;
SELECT min(window_start) >= '2026-01-01 03:00' AS early_windows_gone FROM hourly;

-- Round 4: everything deleted, then one row back.
DELETE FROM orders;
SELECT run_all();
SELECT * FROM diffs();
SELECT (SELECT count(*) FROM by_region) AS by_region, (SELECT count(*) FROM hourly) AS hourly,
       (SELECT count(*) FROM sliding) AS sliding, (SELECT count(*) FROM paid_totals) AS paid_totals,
       (SELECT count(*) FROM big_orders) AS big_orders;
INSERT INTO orders VALUES (1, 'eu', 60, 1, '2026-01-02', true, 'back');
SELECT run_all();
SELECT * FROM diffs();
SELECT * FROM by_region;
SELECT * FROM moving;

-- A batch's positions count the changes it read by kind.
UPDATE orders SET qty = 2 WHERE id = 1;
INSERT INTO orders VALUES (2, 'us', 1, 1, '2026-01-02', false, NULL);
DELETE FROM orders WHERE id = 2;
SELECT streamwin.run_batch('by_region')->'offsets'->'changes' AS changes;
SELECT region, n, units FROM by_region;

-- TRUNCATE cannot be retracted row by row: the batch fails, nothing is
-- lost; a reset (which empties the result) goes on from the emptied table.
TRUNCATE orders;
\set SHOW_CONTEXT never
SELECT streamwin.run_batch('by_region');
\set SHOW_CONTEXT errors
SELECT streamwin.reset_query('by_region', 'latest');
INSERT INTO orders VALUES (3, 'ap', 1, 5, '2026-01-03', true, NULL);
SELECT (streamwin.run_batch('by_region')->>'input_rows')::int AS input_rows;
SELECT region, n, units FROM by_region ORDER BY region;

SELECT streamwin.drop_query(q) FROM unnest(ARRAY['by_region', 'hourly', 'sliding', 'paid_totals', 'float_sums', 'moving', 'big_orders', 'order_changes']) q;
SELECT streamwin.drop_source('chg');

-- Numeric sums, averages and the variance family retract exactly to the
-- text: NaN and the infinities, which no subtraction takes back out, and
-- the display scale, which follows the largest scale of the values left
-- (compared as text).
CREATE TABLE readings (id int PRIMARY KEY, k text, x numeric, i int DEFAULT 1);
ALTER TABLE readings REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('reading_changes', 'readings', '{"changes": "all"}');
SELECT streamwin.create_query('reading_sums', $$
  SELECT k, sum(x) AS s, avg(x) AS a, stddev(x) AS sd, var_pop(x) AS vp, variance(i) AS vi,
         stddev_pop(i) AS sdi
  FROM reading_changes GROUP BY k$$, output_mode => 'update', start => false);
-- and the same values as floats: each summed as the decimal its text is,
-- NaN and the infinities counted apart, the result rounded to a float
SELECT streamwin.create_query('reading_floats', $$
  SELECT k, sum(x::float8) AS s, avg(x::float8) AS a, stddev(x::float8) AS sd, sum(x::float4) AS s4
  FROM reading_changes GROUP BY k$$, output_mode => 'update', start => false);
SET extra_float_digits = 1;
CREATE VIEW reading_float_expected AS
  SELECT k, sum(x::float8::text::numeric)::float8::text AS s, avg(x::float8::text::numeric)::float8::text AS a,
         stddev(x::float8::text::numeric)::float8::text AS sd, sum(x::float4::text::numeric)::float4::text AS s4
  FROM readings GROUP BY k;
CREATE VIEW reading_expected AS
  SELECT k, sum(x)::text AS s, avg(x)::text AS a, stddev(x)::text AS sd, var_pop(x)::text AS vp,
         variance(i)::text AS vi, stddev_pop(i)::text AS sdi
  FROM readings GROUP BY k;
CREATE VIEW reading_diffs AS
  SELECT count(*) AS diffs FROM (
    (SELECT k, s::text, a::text, sd::text, vp::text, vi::text, sdi::text FROM reading_sums
     EXCEPT TABLE reading_expected)
    UNION ALL
    (TABLE reading_expected
     EXCEPT SELECT k, s::text, a::text, sd::text, vp::text, vi::text, sdi::text FROM reading_sums)
    UNION ALL
    (SELECT k, s::text, a::text, sd::text, s4::text, NULL, NULL FROM reading_floats
     EXCEPT SELECT *, NULL, NULL FROM reading_float_expected)
    UNION ALL
    (SELECT *, NULL, NULL FROM reading_float_expected
     EXCEPT SELECT k, s::text, a::text, sd::text, s4::text, NULL, NULL FROM reading_floats)) d;
INSERT INTO readings VALUES (1, 'a', 1.50), (2, 'a', 2), (3, 'b', 'NaN'), (4, 'b', 1.123456789012345678901),
                            (5, 'c', 'Infinity'), (6, 'c', '-Infinity'), (7, 'c', 1), (8, 'd', NULL),
                            (9, 'e', 'Infinity');
INSERT INTO readings SELECT 100 + g, 'f' || g % 3, round(g * 7.31 % 97, g % 5), g * g % 1013
FROM generate_series(1, 300) g;
SELECT (streamwin.run_batch('reading_sums')->>'input_rows')::int AS input_rows;
SELECT (streamwin.run_batch('reading_floats')->>'input_rows')::int AS float_input_rows;
SELECT * FROM reading_diffs;
DELETE FROM readings WHERE id IN (1, 3, 6) OR id % 7 = 0;
UPDATE readings SET x = x * 1.5, i = i + 3 WHERE id % 4 = 0;
SELECT (streamwin.run_batch('reading_sums')->>'input_rows')::int AS input_rows;
SELECT (streamwin.run_batch('reading_floats')->>'input_rows')::int AS float_input_rows;
SELECT * FROM reading_diffs;
DELETE FROM readings WHERE id = 5;
UPDATE readings SET x = 3.25 WHERE id = 9;
SELECT (streamwin.run_batch('reading_sums')->>'input_rows')::int AS input_rows;
SELECT (streamwin.run_batch('reading_floats')->>'input_rows')::int AS float_input_rows;
SELECT * FROM reading_diffs;
SELECT k, s, a, sd, vp FROM reading_sums WHERE k NOT LIKE 'f%' ORDER BY k;
SELECT k, s, a, sd, s4 FROM reading_floats WHERE k NOT LIKE 'f%' ORDER BY k;
SELECT streamwin.drop_query('reading_sums');
SELECT streamwin.drop_query('reading_floats');
SELECT streamwin.drop_source('reading_changes');
-- A variance that is positive, but below the last digit of its quotient's
-- scale: the standard deviation is 0 at that scale, as in plain SQL, not
-- a digit below 0.
CREATE TABLE fine (id int PRIMARY KEY, k int, x numeric);
ALTER TABLE fine REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('fine_changes', 'fine', '{"changes": "all"}');
SELECT streamwin.create_query('fine_sd', $$
  SELECT k, stddev(x) AS sd, stddev_pop(x) AS sdp FROM fine_changes GROUP BY k$$,
  output_mode => 'update', start => false);
INSERT INTO fine VALUES (1, 1, 0), (2, 1, 1e-1000), (3, 2, 1), (4, 2, 1.5);
SELECT (streamwin.run_batch('fine_sd')->>'input_rows')::int AS input_rows;
SELECT f.k, sign(f.sd) AS sign_sd, sign(f.sdp) AS sign_sdp,
       f.sd::text = stddev(x)::text AS sd_equal, f.sdp::text = stddev_pop(x)::text AS sdp_equal
  FROM fine_sd f JOIN fine USING (k) GROUP BY f.k, f.sd, f.sdp ORDER BY f.k;
SELECT streamwin.drop_query('fine_sd');
SELECT streamwin.drop_source('fine_changes');
DROP TABLE fine;
-- A float result too small for its type is 0, as the float aggregates'
-- own arithmetic makes it (the variance of 1e-200 and 2e-200), not an
-- error at every batch.
CREATE TABLE tiny (id int PRIMARY KEY, f float8);
ALTER TABLE tiny REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('tiny_changes', 'tiny', '{"changes": "all"}');
SELECT streamwin.create_query('tiny_var', $$SELECT id > 0 AS g, var_pop(f) AS v, sum(f) AS s FROM tiny_changes GROUP BY 1$$,
  output_mode => 'update', start => false);
INSERT INTO tiny VALUES (1, 1e-200), (2, 2e-200);
SELECT (streamwin.run_batch('tiny_var')->>'input_rows')::int AS input_rows;
SELECT t.v, t.s, t.v = p.v AS same_var, t.s = p.s AS same_sum
  FROM tiny_var t, (SELECT var_pop(f) AS v, sum(f) AS s FROM tiny) p;
SELECT streamwin.drop_query('tiny_var');
SELECT streamwin.drop_source('tiny_changes');
DROP TABLE tiny;

-- Late changes: a changelog's row, added or retracted, is late when its
-- window is closed, not when it is behind the watermark; so a row added on
-- time and deleted behind the watermark while its window is open is taken
-- out of it.  The rows path of the store (each row folded, not grouped
-- first) gives the same.  Each window is compared with plain SQL over the
-- table as it was when the window closed.
SET streamwin.store_merge = 'rows';
CREATE TABLE page_visits (id int PRIMARY KEY, k text, ts timestamptz);
ALTER TABLE page_visits REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('visit_changes', 'page_visits', '{"changes": "all"}');
SELECT streamwin.create_query('hourly_visits', $$
  SELECT k, count(*) AS n FROM visit_changes GROUP BY streamwin.tumble(ts, '1 hour'), k$$,
  watermark => '1 minute', start => false);
SELECT streamwin.create_query('sliding_visits', $$
  SELECT k, count(*) AS n FROM visit_changes GROUP BY streamwin.hop(ts, '2 hours', '1 hour'), k$$,
  watermark => '1 minute', output_mode => 'update', start => false);
CREATE FUNCTION run_visits() RETURNS TABLE (late_retractions text) LANGUAGE sql AS $$
  SELECT (streamwin.run_batch('hourly_visits')->>'late_retractions_dropped') || ' ' ||
         (streamwin.run_batch('sliding_visits')->>'late_retractions_dropped') $$;
INSERT INTO page_visits VALUES (1, 'a', '2026-01-01 00:10'), (2, 'a', '2026-01-01 00:20');
SELECT run_visits();
-- the watermark moves to 00:49
INSERT INTO page_visits VALUES (3, 'a', '2026-01-01 00:50');
SELECT run_visits();
-- behind the watermark, in windows still open: taken out of them
DELETE FROM page_visits WHERE id = 1;
SELECT run_visits();
-- the watermark moves to 01:29: [00:00, 01:00) and [23:00, 01:00) close
CREATE TABLE visits_at_close AS
  SELECT date_trunc('hour', ts) AS window_start, k, count(*) AS n FROM page_visits GROUP BY 1, 2;
INSERT INTO page_visits VALUES (4, 'a', '2026-01-01 01:30');
SELECT run_visits();
-- into closed windows: dropped and counted; the hop's open window still takes it
DELETE FROM page_visits WHERE id = 2;
SELECT run_visits();
SELECT count(*) AS differing FROM (
  SELECT window_start, k, n FROM hourly_visits
  EXCEPT SELECT window_start, k, n FROM visits_at_close WHERE window_start < '2026-01-01 01:00') d;
SELECT window_start, n,
       (SELECT count(*) FROM page_visits v WHERE v.ts >= s.window_start AND v.ts < s.window_end) AS now_in_table
FROM sliding_visits s ORDER BY window_start;
SELECT sum(late_rows_dropped) AS late_rows, sum(late_retractions_dropped) AS late_retractions
FROM streamwin.progress WHERE query IN ('hourly_visits', 'sliding_visits');
RESET streamwin.store_merge;
SELECT streamwin.drop_query('hourly_visits');
SELECT streamwin.drop_query('sliding_visits');
SELECT streamwin.drop_source('visit_changes');

-- A query starts from the rows its table holds when it is created, then
-- the changes after them: the table's history before the query (even one
-- its source's slot no longer holds) is never retracted from a query that
-- did not see it.  Rows already there are updated and deleted afterwards;
-- the snapshot is larger than a batch (max_records_per_batch 7); a second
-- query is created later, over more history; a reset starts again from the
-- table as it is then.  Each result is compared with plain SQL.
CREATE TABLE stock (sku int PRIMARY KEY, shelf text, qty int, label text);
ALTER TABLE stock REPLICA IDENTITY FULL;
INSERT INTO stock SELECT g, 's' || g % 4, g % 13, repeat('l', g % 3) FROM generate_series(1, 40) g;
SELECT streamwin.create_table_source('stock_changes', 'stock', '{"changes": "all", "max_records_per_batch": 7}');
UPDATE stock SET qty = qty + 1 WHERE sku % 5 = 0;
DELETE FROM stock WHERE sku % 9 = 0;
INSERT INTO stock SELECT g, 's' || g % 4, g % 13, 'new' FROM generate_series(41, 50) g;
SELECT streamwin.create_query('shelf_totals', $$
  SELECT shelf, count(*) AS n, sum(qty) AS units, min(qty) AS low, max(label) AS top_label
  FROM stock_changes GROUP BY shelf$$, output_mode => 'update', start => false);
SELECT streamwin.create_query('stock_rows', $$SELECT sku, shelf, qty FROM stock_changes$$, start => false);
CREATE VIEW shelf_totals_expected AS
  SELECT shelf, count(*) AS n, sum(qty) AS units, min(qty) AS low, max(label) AS top_label
  FROM stock GROUP BY shelf;
CREATE FUNCTION stock_diffs() RETURNS TABLE (query text, missing bigint, extra bigint) LANGUAGE sql AS $$
  SELECT 'shelf_totals',
         (SELECT count(*) FROM (TABLE shelf_totals_expected EXCEPT ALL SELECT shelf, n, units, low, top_label FROM shelf_totals) x),
         (SELECT count(*) FROM (SELECT shelf, n, units, low, top_label FROM shelf_totals EXCEPT ALL TABLE shelf_totals_expected) x)
  UNION ALL SELECT 'stock_rows',
         (SELECT count(*) FROM (SELECT sku, shelf, qty FROM stock EXCEPT ALL SELECT sku, shelf, qty FROM stock_rows) x),
         (SELECT count(*) FROM (SELECT sku, shelf, qty FROM stock_rows EXCEPT ALL SELECT sku, shelf, qty FROM stock) x)
$$;
CREATE FUNCTION run_stock(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint := 0; b bigint;
BEGIN
  LOOP
    b := (streamwin.run_batch(q)->>'input_rows')::bigint;
    EXIT WHEN b = 0;
    n := n + b;
  END LOOP;
  RETURN n;
END $$;
-- the 46 rows of the table, in batches of 7
SELECT run_stock('shelf_totals') AS shelf_rows, run_stock('stock_rows') AS stock_rows;
SELECT * FROM stock_diffs();
-- rows of the snapshot changed and deleted, rows moved between shelves
UPDATE stock SET qty = qty * 2, shelf = 's' || (sku + 1) % 4 WHERE sku % 3 = 0;
DELETE FROM stock WHERE sku % 4 = 1;
INSERT INTO stock VALUES (60, 's9', 1, 'z');
SELECT run_stock('shelf_totals') AS shelf_rows, run_stock('stock_rows') AS stock_rows;
SELECT * FROM stock_diffs();
-- not in a transaction that wrote the table: its rows would count twice
BEGIN;
UPDATE stock SET qty = 0 WHERE sku = 2;
SELECT streamwin.create_query('shelf_counts', $$SELECT shelf, count(*) AS n FROM stock_changes GROUP BY shelf$$,
  output_mode => 'update', start => false);
ROLLBACK;
-- a query created now starts from the table now
SELECT streamwin.create_query('shelf_counts', $$SELECT shelf, count(*) AS n FROM stock_changes GROUP BY shelf$$,
  output_mode => 'update', start => false);
DELETE FROM stock WHERE shelf = 's9';
UPDATE stock SET shelf = 's0' WHERE sku < 10;
SELECT run_stock('shelf_counts') > 0 AS read;
SELECT count(*) AS differing FROM (
  (SELECT shelf, count(*) AS n FROM stock GROUP BY shelf EXCEPT SELECT shelf, n FROM shelf_counts)
  UNION ALL (SELECT shelf, n FROM shelf_counts EXCEPT SELECT shelf, count(*) FROM stock GROUP BY shelf)) d;
-- a reset starts again from the table's rows now; an LSN is refused
SELECT streamwin.reset_query('shelf_totals', '{"lsn": "0/0"}');
-- a word it does not know: the hint offers what a changelog takes
SELECT streamwin.reset_query('shelf_totals', 'bogus');
SELECT streamwin.reset_query('shelf_totals', 'earliest');
SELECT streamwin.reset_query('stock_rows', 'latest');
UPDATE stock SET qty = qty + 7 WHERE sku % 2 = 0;
SELECT run_stock('shelf_totals') > 0 AS shelf_read, run_stock('stock_rows') > 0 AS rows_read;
SELECT * FROM stock_diffs();
SELECT streamwin.drop_query(q) FROM unnest(ARRAY['shelf_totals', 'stock_rows', 'shelf_counts']) q;
-- a column whose type changed since the source was created: refused,
-- where the change rewrites the rows by the ALTER TABLE itself, else by the
-- queries (text to varchar keeps the rows as they are)
ALTER TABLE stock ALTER sku TYPE bigint;
DROP FUNCTION stock_diffs();
DROP VIEW shelf_totals_expected;
ALTER TABLE stock ALTER label TYPE varchar;
SELECT streamwin.create_query('sku_counts', $$SELECT shelf, count(*) AS n FROM stock_changes GROUP BY shelf$$,
  output_mode => 'update', start => false);
SELECT streamwin.drop_source('stock_changes');
-- Rows written before a column was added hold no value for it: the table's
-- row type gives its default (what a SELECT sees), and an update or delete
-- of such a row retracts that default; rows written since are delivered as
-- the table stores them.  Compared with plain SQL.
CREATE TABLE gadgets (id int PRIMARY KEY, kind text);
INSERT INTO gadgets SELECT g, 'k' || g % 3 FROM generate_series(1, 30) g;
ALTER TABLE gadgets ADD COLUMN weight int NOT NULL DEFAULT 7;
ALTER TABLE gadgets REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('gadget_changes', 'gadgets', '{"changes": "all"}');
SELECT streamwin.create_query('gadget_weights', $$
  SELECT kind, count(*) AS n, sum(weight) AS w, min(weight) AS lo FROM gadget_changes GROUP BY kind$$,
  output_mode => 'update', start => false);
SELECT (streamwin.run_batch('gadget_weights'))->>'input_rows' AS snapshot_rows;
UPDATE gadgets SET kind = 'k9' WHERE id % 4 = 0;
DELETE FROM gadgets WHERE id % 5 = 0;
INSERT INTO gadgets VALUES (31, 'k9', 2);
UPDATE gadgets SET weight = weight - 3 WHERE id % 7 = 0;
SELECT (streamwin.run_batch('gadget_weights'))->>'input_rows' AS changed_rows;
SELECT count(*) AS differing FROM (
  (SELECT kind, count(*) AS n, sum(weight) AS w, min(weight) AS lo FROM gadgets GROUP BY kind
   EXCEPT SELECT kind, n, w, lo FROM gadget_weights)
  UNION ALL (SELECT kind, n, w, lo FROM gadget_weights
   EXCEPT SELECT kind, count(*), sum(weight), min(weight) FROM gadgets GROUP BY kind)) d;
SELECT streamwin.drop_query('gadget_weights');
SELECT streamwin.drop_source('gadget_changes');
-- Columns added while changes are read, between the changes one batch
-- reads (twice in a row, with no change between): each change is read
-- with the table's row type as of that change.  Compared with plain SQL.
CREATE TABLE widen (id int PRIMARY KEY, g int, v int);
ALTER TABLE widen REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('widen_changes', 'widen', '{"changes": "all"}');
SELECT streamwin.create_query('widen_sums', $$
  SELECT g, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi FROM widen_changes GROUP BY g$$,
  output_mode => 'update', start => false);
INSERT INTO widen SELECT i, i % 3, i FROM generate_series(1, 20) i;
SELECT (streamwin.run_batch('widen_sums'))->>'input_rows' AS first_rows;
INSERT INTO widen SELECT i, i % 3, i FROM generate_series(21, 30) i;
UPDATE widen SET v = v + 100 WHERE id % 4 = 0;
ALTER TABLE widen ADD COLUMN w int;
ALTER TABLE widen ADD COLUMN w2 int;
INSERT INTO widen SELECT i, i % 3, i, 99, 98 FROM generate_series(31, 40) i;
UPDATE widen SET v = v + 1000, w = 5 WHERE id % 5 = 0;
DELETE FROM widen WHERE id % 7 = 0;
ALTER TABLE widen ADD COLUMN x text DEFAULT 'x';
ALTER TABLE widen ADD COLUMN x2 text DEFAULT 'x';
INSERT INTO widen SELECT i, i % 3, i, 7, 6, 'y', 'z' FROM generate_series(41, 45) i;
UPDATE widen SET g = 2 WHERE id % 6 = 1;
SELECT (streamwin.run_batch('widen_sums'))->>'input_rows' AS later_rows;
SELECT count(*) AS differing FROM (
  (SELECT g, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi FROM widen GROUP BY g
   EXCEPT SELECT g, n, s, lo, hi FROM widen_sums)
  UNION ALL (SELECT g, n, s, lo, hi FROM widen_sums
   EXCEPT SELECT g, count(*), sum(v), min(v), max(v) FROM widen GROUP BY g)) d;
SELECT streamwin.drop_query('widen_sums');
SELECT streamwin.drop_source('widen_changes');
-- Counted values of a by-value type, each change of a group right after
-- the last in one batch (a value counted up and down in place): 5 added
-- and retracted, 7 added twice and retracted once; then 7 retracted.  min
-- and max over what is left, against plain SQL.
CREATE TABLE gauge_rows (id int PRIMARY KEY, g int, x int);
ALTER TABLE gauge_rows REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('gauge_changes', 'gauge_rows', '{"changes": "all"}');
SELECT streamwin.create_query('gauge_range', $$
  SELECT g, count(*) AS n, min(x) AS lo, max(x) AS hi FROM gauge_changes GROUP BY g$$,
  output_mode => 'update', start => false);
CREATE VIEW gauge_range_diffs AS
  SELECT count(*) AS differing FROM (
    (SELECT g, count(*) AS n, min(x) AS lo, max(x) AS hi FROM gauge_rows GROUP BY g
     EXCEPT SELECT g, n, lo, hi FROM gauge_range)
    UNION ALL (SELECT g, n, lo, hi FROM gauge_range
     EXCEPT SELECT g, count(*), min(x), max(x) FROM gauge_rows GROUP BY g)) d;
INSERT INTO gauge_rows VALUES (1, 1, 5);
UPDATE gauge_rows SET x = 7 WHERE id = 1;
INSERT INTO gauge_rows VALUES (2, 1, 7), (3, 2, 4);
DELETE FROM gauge_rows WHERE id = 2;
SELECT (streamwin.run_batch('gauge_range'))->>'input_rows' AS rows;
SELECT * FROM gauge_range_diffs;
UPDATE gauge_rows SET x = 3 WHERE id = 1;
SELECT (streamwin.run_batch('gauge_range'))->>'input_rows' AS rows;
SELECT * FROM gauge_range_diffs;
DROP VIEW gauge_range_diffs;
SELECT streamwin.drop_query('gauge_range');
SELECT streamwin.drop_source('gauge_changes');
-- Counted values as queries before the present layout wrote them (each
-- value's count and send format, version 1), in their state and checkpoint
-- rows still: read, and merged with a batch's set into the present layout.
-- int4 {5: 2, 9: 1} and numeric {3: 1, 12.5: 3}, as version 1 wrote them.
CREATE TEMP TABLE v1_sets AS SELECT
  '\x000000010000001700000000000000020000000000000002000000040000000500000000000000010000000400000009'::bytea AS ints,
  '\x00000001000006a4000000000000000200000000000000010000000a0001000000000000000300000000000000030000000c0002000000000001000c1388'::bytea AS nums;
SELECT streamwin.change_set_min(ints, NULL::int4) AS lo, streamwin.change_set_max(ints, NULL::int4) AS hi,
       streamwin.change_set_values(ints, NULL::int4) AS ints,
       streamwin.change_set_min(nums, NULL::numeric) AS nlo, streamwin.change_set_max(nums, NULL::numeric) AS nhi,
       streamwin.change_set_values(nums, NULL::numeric) AS nums
FROM v1_sets;
-- a batch retracting 5 and 9 once and adding 7 (and 12.5 retracted thrice, 4.75 added)
WITH b AS (SELECT (SELECT streamwin.change_set(x, c) FROM (VALUES (5, -1::smallint), (9, -1::smallint), (7, 1::smallint)) AS t(x, c)) AS ints,
                  (SELECT streamwin.change_set(x, c) FROM (VALUES (12.5, -3::smallint), (4.75, 1::smallint)) AS t(x, c)) AS nums)
SELECT streamwin.change_set_values(streamwin.change_set_merge(v.ints, b.ints), NULL::int4) AS old_new,
       streamwin.change_set_values(streamwin.change_set_merge(b.ints, v.ints), NULL::int4) AS new_old,
       streamwin.change_set_max(streamwin.change_set_merge(v.ints, b.ints), NULL::int4) AS hi,
       streamwin.change_set_values(streamwin.change_set_merge(v.nums, b.nums), NULL::numeric) AS nums,
       streamwin.change_set_max(streamwin.change_set_merge(b.nums, v.nums), NULL::numeric) AS nhi
FROM v1_sets v, b;
-- A batch's set far smaller than its group's merges by a search of the
-- group's for each of its values: the same set, byte for byte, as one pass
-- over both the other way round.  Values retracted to 0, in part, added,
-- new, retracted without being there, before the first and after the last.
CREATE TEMP TABLE merge_trials AS
SELECT t, (SELECT streamwin.change_set(g * 3, (1 + (g + t) % 3)::smallint) FROM generate_series(1, 700) g) AS big,
       (SELECT streamwin.change_set((g * 3)::numeric / 4, (1 + (g + t) % 3)::smallint) FROM generate_series(1, 700) g) AS nbig,
       (SELECT streamwin.change_set(x, c) FROM (
          SELECT x, CASE k WHEN 0 THEN -(1 + (x / 3 + t) % 3) WHEN 1 THEN 2 WHEN 2 THEN 1 WHEN 3 THEN -1 ELSE -1 END::smallint AS c
            FROM (SELECT i % 5 AS k,
                         CASE i % 5 WHEN 2 THEN ((i * 41 + t) % 700) * 3 + 1 WHEN 3 THEN ((i * 41 + t) % 700) * 3 + 2
                              ELSE ((i * 41 + t) % 700 + 1) * 3 END AS x
                    FROM generate_series(1, 15) i) r
          UNION ALL VALUES (0, 1::smallint), (3, -(1 + (1 + t) % 3)::smallint), (2100, 5::smallint), (5000, -2::smallint)) s) AS small
FROM generate_series(1, 20) t;
SELECT count(*) AS trials,
       count(*) FILTER (WHERE streamwin.change_set_merge(big, small) IS DISTINCT FROM streamwin.change_set_merge(small, big)) AS differing,
       count(*) FILTER (WHERE streamwin.change_set_merge(nbig, nsmall) IS DISTINCT FROM streamwin.change_set_merge(nsmall, nbig)) AS ndiffering,
       min(array_length(streamwin.change_set_values(streamwin.change_set_merge(big, small), NULL::int4), 1)) AS least_values,
       max(array_length(streamwin.change_set_values(streamwin.change_set_merge(big, small), NULL::int4), 1)) AS most_values
FROM (SELECT t, big, small, nbig,
             (SELECT streamwin.change_set(x::numeric / 4, c) FROM (
                SELECT x, CASE k WHEN 0 THEN -(1 + (x / 3 + t) % 3) WHEN 1 THEN 2 WHEN 2 THEN 1 ELSE -1 END::smallint AS c
                  FROM (SELECT i % 5 AS k,
                               CASE i % 5 WHEN 2 THEN ((i * 41 + t) % 700) * 3 + 1 WHEN 3 THEN ((i * 41 + t) % 700) * 3 + 2
                                    ELSE ((i * 41 + t) % 700 + 1) * 3 END AS x
                          FROM generate_series(1, 15) i) r) s) AS nsmall
        FROM merge_trials) m;
-- By the search as in one pass, a count summed keeps the image of the
-- group's set (1.5, not the batch's 1.50).
SELECT (streamwin.change_set_values(streamwin.change_set_merge(a, b), NULL::numeric))[1:3] AS first_values
FROM (SELECT streamwin.change_set(x, 1::smallint) AS a
        FROM (SELECT 1.5 UNION ALL SELECT 1.5 UNION ALL SELECT g FROM generate_series(2, 700) g) AS t(x)) AS big,
     (SELECT streamwin.change_set(1.50, 1::smallint) AS b) AS small;
-- Numerics are compared where they lie in a set, in numeric's order: NaN
-- and the infinities, zeros of any scale and sign, signs, weights far
-- apart, scales (1.5 and 1.50 one value).  A group's set of them merged
-- with a batch's, large (one pass) and small (by search), in both orders,
-- against the same rows counted in SQL: the values left, in order, and
-- min and max.
SELECT setseed(0.42);
CREATE TEMP TABLE numeric_rows AS
SELECT row_number() OVER () AS g, v FROM (
  SELECT v FROM unnest('{NaN,Infinity,-Infinity,0,0.000,-0.0,1.5,1.50,-1.5,10000,9999.9999,1e-20,-1e-20,
                         123456789012345678901234567890,-123456789012345678901234567890,0.00010001,
                         1e100,-1e100,1e-100,99999999,-99999999,0.5,-0.5}'::numeric[]) v
  UNION ALL SELECT round(((random() - 0.5) * 10 ^ (g % 13 - 4))::numeric, g % 9) FROM generate_series(1, 3000) g
  UNION ALL SELECT round(((random() - 0.5) * 100)::numeric, 1) FROM generate_series(1, 300) g) s;
CREATE TEMP TABLE numeric_batches AS
SELECT b, g, v, (CASE WHEN g % 3 = 0 THEN -1 ELSE 1 END)::smallint AS c
FROM numeric_rows, (VALUES (5), (97)) AS d(b) WHERE g % b = 0 OR g % 7 = 0 AND b = 5;
SELECT b.b AS every, count(*) FILTER (WHERE got IS DISTINCT FROM want) AS differing_values,
       count(*) FILTER (WHERE got_swapped IS DISTINCT FROM want) AS differing_swapped,
       count(*) FILTER (WHERE lo IS DISTINCT FROM want[1] OR hi IS DISTINCT FROM want[array_length(want, 1)]) AS differing_extremes,
       min(array_length(want, 1)) AS values_left
FROM (SELECT DISTINCT b FROM numeric_batches) b,
LATERAL (SELECT streamwin.change_set(v, 1::smallint) AS s FROM numeric_rows) grp,
LATERAL (SELECT streamwin.change_set(v, c) AS s FROM numeric_batches n WHERE n.b = b.b) bat,
LATERAL (SELECT streamwin.change_set_values(streamwin.change_set_merge(grp.s, bat.s), NULL::numeric) AS got,
                streamwin.change_set_values(streamwin.change_set_merge(bat.s, grp.s), NULL::numeric) AS got_swapped,
                streamwin.change_set_min(streamwin.change_set_merge(grp.s, bat.s), NULL::numeric) AS lo,
                streamwin.change_set_max(streamwin.change_set_merge(grp.s, bat.s), NULL::numeric) AS hi) m,
LATERAL (SELECT array_agg(v ORDER BY v) AS want FROM (
           SELECT v FROM (SELECT v, 1 AS c FROM numeric_rows
                          UNION ALL SELECT v, c FROM numeric_batches n WHERE n.b = b.b) u
           GROUP BY v HAVING sum(c) <> 0) w) e
GROUP BY b.b ORDER BY b.b;
-- a set of retractions only holds no value; a malformed one is refused
SELECT streamwin.change_set_min(s, NULL::int4) AS lo, streamwin.change_set_max(s, NULL::int4) AS hi,
       streamwin.change_set_values(s, NULL::int4) AS vals
FROM (SELECT streamwin.change_set(x, -1::smallint) AS s FROM (VALUES (1), (2)) AS t(x)) AS r;
SELECT streamwin.change_set_max(substr(s, 1, length(s) - 1), NULL::text)
FROM (SELECT streamwin.change_set(x, 1::smallint) AS s FROM (VALUES ('a'), ('bb')) AS t(x)) AS r;
-- A set is any bytea a role hands these functions, naming any type: the
-- images of a container type are not trusted (its values are kept in
-- their send format and received), a numeric's are checked, and text goes
-- out only in the database's encoding.  Each set here holds one entry.
SELECT streamwin.change_set_max('\x0000000202015753ef03000000000000010000001c000000020bffffffff'::bytea, NULL::int4[]);
SELECT streamwin.change_set_max('\x0000000202015753a406000000000000010000001c000000020b0080ffff'::bytea, NULL::numeric);
SELECT streamwin.change_set_max('\x0000000202015753a406000000000000010000001c000000020500'::bytea, NULL::numeric);
SELECT streamwin.change_set_max('\x00000002020157531900000064000000010000001c0000000209610062'::bytea, NULL::text);
-- a tsvector's send format whose lexeme lacks its terminating NUL is
-- refused (the receive function's buffer ends in a NUL past the image; a
-- read past it, as before, shows only under valgrind)
SELECT streamwin.change_set_max('\x00000002020157531e0e000000000000010000001c000000020f000000016162'::bytea, NULL::tsvector);
-- Equal values that differ (numeric 1.5 and 1.50) are counted apart, in a
-- batch and in a merge: a retraction takes back its own form, and the
-- values of a DISTINCT aggregate hold each value once.
SELECT streamwin.change_set_values(streamwin.change_set(x, 1::smallint), NULL::numeric)
FROM (VALUES (1.50), (1.5), (1.500), (2), (2.0)) AS t(x);
SELECT streamwin.change_set_min(m, NULL::numeric) AS lo, streamwin.change_set_max(m, NULL::numeric) AS hi,
       streamwin.change_set_values(m, NULL::numeric) AS vals
FROM (SELECT streamwin.change_set_merge(
               (SELECT streamwin.change_set(x, 1::smallint) FROM (VALUES (1.5), (1.50), (2.0)) AS t(x)),
               (SELECT streamwin.change_set(x, c::smallint) FROM (VALUES (1.5, -1), (2.0, -1), (2, 1)) AS t(x, c))) AS m) AS r;
-- A set written before (version 2) counts every form of a value under the
-- first one's image: here rows 1.5 and 1.50 as 1.5 twice.  What merges into
-- it is counted by value, as then: deleting the 1.50 row, then the 1.5 row,
-- leaves 3 alone.
SELECT streamwin.change_set_min(m2, NULL::numeric) AS lo, streamwin.change_set_values(m2, NULL::numeric) AS vals,
       substr(m2, 1, 4) AS version
FROM (SELECT streamwin.change_set_merge(m1, (SELECT streamwin.change_set(1.5, -1::smallint))) AS m2
      FROM (SELECT streamwin.change_set_merge(overlay(s placing '\x00000002'::bytea from 1 for 4),
                   (SELECT streamwin.change_set(x, c::smallint) FROM (VALUES (1.50, -1), (7, 1), (7.0, -1)) AS t(x, c))) AS m1
            FROM (SELECT streamwin.change_set(x, 1::smallint) AS s FROM (VALUES (1.5), (1.5), (3)) AS t(x)) AS r) AS r1) AS r2;
SELECT streamwin.change_set_values(s, NULL::numeric) AS batch,
       streamwin.change_set_values(streamwin.change_set_merge(s, (SELECT streamwin.change_set(x, 1::smallint)
                                                              FROM (VALUES (2.000), (0), (7)) AS t(x))), NULL::numeric) AS merged
FROM (SELECT streamwin.change_set(round(g % 3, g % 4), 1::smallint) AS s FROM generate_series(1, 200) g) AS r;
-- A set is any bytea a role hands the functions: a value of a domain leaves
-- it checked by the domain (here 3 forged into -1), and a numeric's special
-- header must be one numeric writes (NaN's 0xC000 forged into 0xC123, which
-- numeric's functions would take for -Infinity).
CREATE DOMAIN changelog_posint AS int CHECK (VALUE > 0);
SELECT streamwin.change_set_min(streamwin.change_set(3::changelog_posint, 1::smallint), NULL::changelog_posint) AS lo;
SELECT streamwin.change_set_min(overlay(s placing '\xffffffff'::bytea from 26 for 4), NULL::changelog_posint) AS forged
FROM (SELECT streamwin.change_set(3::changelog_posint, 1::smallint) AS s) r;
SELECT streamwin.change_set_min(overlay(s placing '\x23c1'::bytea from 27 for 2), NULL::numeric) AS forged
FROM (SELECT streamwin.change_set('NaN'::numeric, 1::smallint) AS s) r;
DROP DOMAIN changelog_posint;
-- A NOT NULL domain's values through DISTINCT, min and max (the final SQL
-- named the type with a NULL of it, which the domain refuses: every batch
-- failed).  Equal to plain SQL after inserts, an update and a delete.
CREATE DOMAIN changelog_nn AS int NOT NULL CHECK (VALUE > 0);
CREATE TABLE nn_rows (id int PRIMARY KEY, g int, v changelog_nn);
ALTER TABLE nn_rows REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('nn_changes', 'nn_rows', '{"changes": "all"}');
SELECT streamwin.create_query('nn_sets', $$
  SELECT g, count(DISTINCT v) AS distinct_v, array_agg(DISTINCT v) AS vs, min(v) AS lo, max(v) AS hi
  FROM nn_changes GROUP BY g$$, output_mode => 'update', start => false);
INSERT INTO nn_rows SELECT i, i % 3, 1 + i % 5 FROM generate_series(1, 30) i;
SELECT streamwin.run_batch('nn_sets') IS NOT NULL AS ran;
UPDATE nn_rows SET v = v + 10 WHERE id % 4 = 0;
DELETE FROM nn_rows WHERE id % 7 = 0;
SELECT streamwin.run_batch('nn_sets') IS NOT NULL AS ran;
(SELECT g, distinct_v, vs::int[], lo, hi FROM nn_sets
 EXCEPT SELECT g, count(DISTINCT v), array_agg(DISTINCT v)::int[], min(v), max(v) FROM nn_rows GROUP BY g)
UNION ALL
(SELECT g, count(DISTINCT v), array_agg(DISTINCT v)::int[], min(v), max(v) FROM nn_rows GROUP BY g
 EXCEPT SELECT g, distinct_v, vs::int[], lo, hi FROM nn_sets);
SELECT streamwin.drop_query('nn_sets', drop_result => true);
SELECT streamwin.drop_source('nn_changes');
DROP TABLE nn_rows;
DROP DOMAIN changelog_nn;
-- Through a query: each row's form changed to another of the same value
-- (numeric scale, float8 0 to -0, an interval's days to hours, text under
-- a case-insensitive collation), then rows deleted.  min, max and DISTINCT
-- equal plain SQL, compared as text.
CREATE COLLATION changelog_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE forms (id int PRIMARY KEY, g int, n numeric, f float8, i interval, t text COLLATE changelog_ci);
ALTER TABLE forms REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('form_changes', 'forms', '{"changes": "all"}');
SELECT streamwin.create_query('form_sets', $$
  SELECT g, min(n) AS n_lo, max(n) AS n_hi, min(f) AS f_lo, max(i) AS i_hi, min(t) AS t_lo,
         count(DISTINCT n) AS n_distinct, count(DISTINCT t) AS t_distinct FROM form_changes GROUP BY g$$,
  output_mode => 'update', start => false);
CREATE VIEW form_diffs AS
  SELECT count(*) AS diffs FROM (
    (SELECT g, n_lo::text, n_hi::text, f_lo::text, i_hi::text, t_lo::text, n_distinct, t_distinct FROM form_sets
     EXCEPT SELECT g, min(n)::text, max(n)::text, min(f)::text, max(i)::text, min(t)::text,
                   count(DISTINCT n), count(DISTINCT t) FROM forms GROUP BY g)
    UNION ALL
    (SELECT g, min(n)::text, max(n)::text, min(f)::text, max(i)::text, min(t)::text,
            count(DISTINCT n), count(DISTINCT t) FROM forms GROUP BY g
     EXCEPT SELECT g, n_lo::text, n_hi::text, f_lo::text, i_hi::text, t_lo::text, n_distinct, t_distinct FROM form_sets)) d;
INSERT INTO forms VALUES (1, 1, 1.0, 0, '1 day', 'abc'), (2, 1, 3.5, 2, '2 days', 'zz'),
                         (3, 2, 7, 5, '3 days', 'Mid'), (4, 2, 9.9, 6, '1 day', 'mid');
SELECT (streamwin.run_batch('form_sets')->>'input_rows')::int AS input_rows;
SELECT * FROM form_diffs;
UPDATE forms SET n = 1.00, f = '-0', i = '24 hours', t = 'ABC' WHERE id = 1;
UPDATE forms SET n = 7.000, t = 'MID', i = '72 hours' WHERE id = 3;
SELECT (streamwin.run_batch('form_sets')->>'input_rows')::int AS input_rows;
SELECT * FROM form_diffs;
SELECT g, n_lo, f_lo, i_hi, t_lo, n_distinct, t_distinct FROM form_sets ORDER BY g;
DELETE FROM forms WHERE id = 4;
UPDATE forms SET n = 9.90 WHERE id = 2;
SELECT (streamwin.run_batch('form_sets')->>'input_rows')::int AS input_rows;
SELECT * FROM form_diffs;
SELECT streamwin.drop_query('form_sets');
SELECT streamwin.drop_source('form_changes');
DROP TABLE forms CASCADE;
-- its result's t_lo is of the collation, as min(t) is
SELECT collname FROM pg_attribute JOIN pg_collation c ON c.oid = attcollation
 WHERE attrelid = 'form_sets'::regclass AND attname = 't_lo';
DROP TABLE form_sets;
DROP COLLATION changelog_ci;

-- min, max and DISTINCT over containers (arrays, jsonb): their values
-- counted in their send format, exact through updates and deletes.
CREATE TABLE tagged (id int PRIMARY KEY, g int, tags int[], doc jsonb);
ALTER TABLE tagged REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('tagged_changes', 'tagged', '{"changes": "all"}');
SELECT streamwin.create_query('tag_sets', $$
  SELECT g, min(tags) AS lo, max(tags) AS hi, count(DISTINCT doc) AS docs FROM tagged_changes GROUP BY g$$,
  output_mode => 'update', start => false);
CREATE VIEW tag_diffs AS
  SELECT count(*) AS diffs FROM (
    (SELECT g, lo, hi, docs FROM tag_sets
     EXCEPT SELECT g, min(tags), max(tags), count(DISTINCT doc) FROM tagged GROUP BY g)
    UNION ALL
    (SELECT g, min(tags), max(tags), count(DISTINCT doc) FROM tagged GROUP BY g
     EXCEPT SELECT g, lo, hi, docs FROM tag_sets)) d;
INSERT INTO tagged SELECT i, i % 3, ARRAY[i % 5, i % 7], jsonb_build_object('k', i % 4) FROM generate_series(1, 300) i;
SELECT (streamwin.run_batch('tag_sets')->>'input_rows')::int AS input_rows;
SELECT * FROM tag_diffs;
DELETE FROM tagged WHERE id % 4 = 0 OR tags = ARRAY[0, 0];
UPDATE tagged SET tags = tags || 9, doc = doc || '{"u": 1}' WHERE id % 3 = 1;
SELECT (streamwin.run_batch('tag_sets')->>'input_rows')::int AS input_rows;
SELECT * FROM tag_diffs;
SELECT count(*) AS groups FROM tag_sets;
SELECT streamwin.drop_query('tag_sets');
SELECT streamwin.drop_source('tagged_changes');
DROP TABLE tagged CASCADE;

-- A table source's columns keep the table's collations, and a DISTINCT
-- aggregate runs over the values left in its own collation: here ICU's
-- root locale, where 'B' follows 'a' (in the database's, C, it
-- comes first); an interval's sum is exact past 2^53 microseconds (a
-- retraction negates its value); and count(DISTINCT) over an array is
-- refused, as over an append-only source.
CREATE TABLE labels (id int PRIMARY KEY, g int, s text COLLATE "und-x-icu", span interval);
ALTER TABLE labels REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('label_changes', 'labels', '{"changes": "all"}');
SELECT attname, attcollation::regcollation FROM pg_attribute
WHERE attrelid = 'label_changes'::regclass AND attnum > 0 ORDER BY attnum;
SELECT streamwin.create_query('label_tops', $$
  SELECT g, max(DISTINCT s) AS top, min(DISTINCT s COLLATE "C") AS first_c, count(DISTINCT s) AS n,
         sum(span) AS spans FROM label_changes GROUP BY g$$,
  output_mode => 'update', start => false);
CREATE VIEW label_diffs AS
  SELECT count(*) AS diffs FROM (
    (SELECT g, top, first_c, n, spans FROM label_tops
     EXCEPT SELECT g, max(DISTINCT s), min(DISTINCT s COLLATE "C"), count(DISTINCT s), sum(span) FROM labels GROUP BY g)
    UNION ALL
    (SELECT g, max(DISTINCT s), min(DISTINCT s COLLATE "C"), count(DISTINCT s), sum(span) FROM labels GROUP BY g
     EXCEPT SELECT g, top, first_c, n, spans FROM label_tops)) d;
INSERT INTO labels VALUES (1, 1, 'a', '2600000 hours 0.000001 seconds'), (2, 1, 'B', '1 second'),
                          (3, 2, 'b', '-2600000 hours'), (4, 2, 'A', '0.000003 seconds'), (5, 2, 'c', NULL);
SELECT (streamwin.run_batch('label_tops')->>'input_rows')::int AS input_rows;
SELECT * FROM label_diffs;
SELECT g, top, first_c, n, spans FROM label_tops ORDER BY g;
UPDATE labels SET s = 'C', span = span - '0.000002 seconds' WHERE id IN (1, 5);
DELETE FROM labels WHERE id = 3;
SELECT (streamwin.run_batch('label_tops')->>'input_rows')::int AS input_rows;
SELECT * FROM label_diffs;
SELECT g, top, first_c, n, spans FROM label_tops ORDER BY g;
SELECT streamwin.create_query('label_sets', $$SELECT g, count(DISTINCT ARRAY[s]) FROM label_changes GROUP BY g$$);
SELECT streamwin.drop_query('label_tops');
SELECT streamwin.drop_source('label_changes');
DROP TABLE labels CASCADE;

-- A query's start rows are logical messages of the transaction that
-- created it, tagged with its id.  Any role may write a logical message:
-- one of that tag from another transaction, here a well-formed row (id 99,
-- g 1, v 1000, change +1, as this machine lays out a heap tuple: a 24-byte
-- header for 4 attributes, then three int4 and an int2, little-endian) is
-- no row of the table, and the query takes none of it.
CREATE TABLE ledger (id int PRIMARY KEY, g int, v int);
ALTER TABLE ledger REPLICA IDENTITY FULL;
INSERT INTO ledger VALUES (1, 1, 10), (2, 2, 20);
SELECT streamwin.create_table_source('ledger_changes', 'ledger', '{"changes": "all"}');
SELECT streamwin.create_query('ledger_sums', $$SELECT g, count(*) AS n, sum(v) AS s FROM ledger_changes GROUP BY g$$,
  output_mode => 'update', start => false);
CREATE ROLE changelog_forger;
SELECT query_id AS ledger_query FROM streamwin.query_catalog WHERE name = 'ledger_sums' \gset
SET ROLE changelog_forger;
SELECT pg_logical_emit_message(true, 'streamwin.snapshot',
         set_byte(set_byte('\x00000000'::bytea, 0, :ledger_query % 256), 1, :ledger_query / 256)
         || '\x000000000000000000000000000000000000040000001800'::bytea
         || '\x6300000001000000e80300000100'::bytea) IS NOT NULL AS forged;
RESET ROLE;
INSERT INTO ledger VALUES (3, 1, 30);
SELECT (streamwin.run_batch('ledger_sums')->>'input_rows')::int AS input_rows;
SELECT g, n, s FROM ledger_sums ORDER BY g;
SELECT count(*) AS diffs FROM (
  (SELECT g, n, s FROM ledger_sums EXCEPT SELECT g, count(*), sum(v) FROM ledger GROUP BY g)
  UNION ALL
  (SELECT g, count(*), sum(v) FROM ledger GROUP BY g EXCEPT SELECT g, n, s FROM ledger_sums)) d;
DROP ROLE changelog_forger;
-- Nor from the creating transaction itself after create_query: streamwin's
-- rows end with a message of their own, and the transaction's messages of
-- the tag after it (the same forged row) are not the table's.
BEGIN;
SELECT streamwin.create_query('ledger_own', $$SELECT g, count(*) AS n, sum(v) AS s FROM ledger_changes GROUP BY g$$,
  output_mode => 'update', start => false);
SELECT query_id AS own_query FROM streamwin.query_catalog WHERE name = 'ledger_own' \gset
SELECT pg_logical_emit_message(true, 'streamwin.snapshot',
         set_byte(set_byte('\x00000000'::bytea, 0, :own_query % 256), 1, :own_query / 256)
         || '\x000000000000000000000000000000000000040000001800'::bytea
         || '\x6300000001000000e80300000100'::bytea) IS NOT NULL AS forged;
COMMIT;
SELECT (streamwin.run_batch('ledger_own')->>'input_rows')::int AS input_rows;
SELECT count(*) AS diffs FROM (
  (SELECT g, n, s FROM ledger_own EXCEPT SELECT g, count(*), sum(v) FROM ledger GROUP BY g)
  UNION ALL
  (SELECT g, count(*), sum(v) FROM ledger GROUP BY g EXCEPT SELECT g, n, s FROM ledger_own)) d;
SELECT streamwin.drop_query('ledger_own', drop_result => true);
-- An ALTER TABLE that rewrites the rows (a column's type, SET UNLOGGED)
-- would change them with nothing in the WAL: refused while the source
-- reads the table.  A rewrite that leaves the values be goes on.
ALTER TABLE ledger ALTER COLUMN v TYPE bigint USING v * 2;
ALTER TABLE ledger SET UNLOGGED;
-- also in a session that skips triggers (a replica's role)
SET session_replication_role = replica;
ALTER TABLE ledger ALTER COLUMN v TYPE bigint USING v * 2;
RESET session_replication_role;
ALTER TABLE ledger ADD COLUMN noise float8 DEFAULT random();
UPDATE ledger SET v = v + 1 WHERE id = 2;
SELECT (streamwin.run_batch('ledger_sums')->>'input_rows')::int AS input_rows;
SELECT count(*) AS diffs FROM (
  (SELECT g, n, s FROM ledger_sums EXCEPT SELECT g, count(*), sum(v) FROM ledger GROUP BY g)
  UNION ALL
  (SELECT g, count(*), sum(v) FROM ledger GROUP BY g EXCEPT SELECT g, n, s FROM ledger_sums)) d;
SELECT streamwin.drop_query('ledger_sums');
SELECT streamwin.drop_source('ledger_changes');
ALTER TABLE ledger ALTER COLUMN v TYPE bigint USING v * 2;
DROP TABLE ledger;

-- Large counted sets (a thousand values in a group, 8 kB): in line
-- compressed in the state table where lz4 is there, read back when a new
-- backend loads the store from it, and merged on from there.
CREATE TABLE wide (id int PRIMARY KEY, g int, v numeric);
ALTER TABLE wide REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('wide_changes', 'wide', '{"changes": "all"}');
SELECT streamwin.create_query('wide_sets', $$
  SELECT g, count(*) AS n, min(v) AS lo, max(v) AS hi, count(DISTINCT v) AS dv FROM wide_changes GROUP BY g$$,
  output_mode => 'update', start => false);
CREATE VIEW wide_diffs AS
  SELECT count(*) AS diffs FROM (
    (SELECT g, n, lo::text, hi::text, dv FROM wide_sets
     EXCEPT SELECT g, count(*), min(v)::text, max(v)::text, count(DISTINCT v) FROM wide GROUP BY g)
    UNION ALL
    (SELECT g, count(*), min(v)::text, max(v)::text, count(DISTINCT v) FROM wide GROUP BY g
     EXCEPT SELECT g, n, lo::text, hi::text, dv FROM wide_sets)) d;
INSERT INTO wide SELECT i, i % 2, round(i * 7.13 % 1000, 2) FROM generate_series(1, 2000) i;
SELECT (streamwin.run_batch('wide_sets')->>'input_rows')::int AS input_rows;
SELECT * FROM wide_diffs;
SELECT (pg_relation_size(c.reltoastrelid) = 0) = (a.attcompression = 'l') AS in_line_if_lz4
FROM streamwin.query_catalog q JOIN pg_class c ON c.oid = q.state_table
JOIN pg_attribute a ON a.attrelid = q.state_table AND a.attname = 'lo$set'
WHERE q.name = 'wide_sets';
\c
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
DELETE FROM wide WHERE v < 100 OR id % 7 = 0;
UPDATE wide SET v = v + 0.5, g = 1 - g WHERE id % 5 = 0;
SELECT (streamwin.run_batch('wide_sets')->>'input_rows')::int AS input_rows;
SELECT * FROM wide_diffs;
SELECT streamwin.drop_query('wide_sets');
SELECT streamwin.drop_source('wide_changes');
-- Complete mode over a changelog with a watermark: the watermark closes no
-- window there, so a change to a row of an old window (behind the
-- watermark) changes that window's row, as plain SQL over the table does.
CREATE TABLE late_edits (id int PRIMARY KEY, k text, v int, ts timestamptz);
ALTER TABLE late_edits REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('late_edits_changes', 'late_edits', '{"changes": "all"}');
SELECT streamwin.create_query('late_edits_sum', $$
  SELECT k, count(*) AS n, sum(v) AS s FROM late_edits_changes
  GROUP BY streamwin.tumble(ts, '1 minute'), k$$,
  watermark => '1 minute', output_mode => 'complete', start => false);
CREATE VIEW late_edits_diffs AS
  SELECT count(*) AS diffs FROM (
    (SELECT window_start, k, n, s FROM late_edits_sum
     EXCEPT SELECT streamwin.tumble(ts, '1 minute'), k, count(*), sum(v) FROM late_edits GROUP BY 1, 2)
    UNION ALL
    (SELECT streamwin.tumble(ts, '1 minute'), k, count(*), sum(v) FROM late_edits GROUP BY 1, 2
     EXCEPT SELECT window_start, k, n, s FROM late_edits_sum)) d;
INSERT INTO late_edits SELECT i, 'k' || i % 3, i, '2026-01-01 00:00:00+00'::timestamptz + i * interval '10 seconds'
FROM generate_series(1, 30) i;
SELECT (streamwin.run_batch('late_edits_sum')->>'input_rows')::int AS input_rows;
-- an hour later: the watermark passes every window above
INSERT INTO late_edits VALUES (100, 'k1', 100, '2026-01-01 01:00:00+00');
SELECT (streamwin.run_batch('late_edits_sum')->>'input_rows')::int AS input_rows;
UPDATE late_edits SET v = v * 10 WHERE id <= 12;
DELETE FROM late_edits WHERE id BETWEEN 20 AND 24;
INSERT INTO late_edits VALUES (101, 'k2', 7, '2026-01-01 00:00:05+00');
SELECT r->>'input_rows' AS input_rows, r->>'late_rows_dropped' AS late
FROM streamwin.run_batch('late_edits_sum') AS r;
SELECT * FROM late_edits_diffs;
SELECT count(*) AS windows FROM late_edits_sum;
DROP VIEW late_edits_diffs;
SELECT streamwin.drop_query('late_edits_sum', drop_result => true);
SELECT streamwin.drop_source('late_edits_changes');
DROP TABLE late_edits;

-- A keyed transform keeps one row per key of the table's primary key as
-- it was created: without it, rows that share the key would take each
-- other's place.  Its batches fail while the key is another, also with
-- the key dropped, and go on once it is back and the query reset; an
-- aggregation, which needs no key, reads on.
CREATE TABLE keyed (id int PRIMARY KEY, g int, v int);
ALTER TABLE keyed REPLICA IDENTITY FULL;
INSERT INTO keyed VALUES (1, 1, 10), (2, 2, 20);
SELECT streamwin.create_table_source('keyed_changes', 'keyed', '{"changes": "all"}');
SELECT streamwin.create_query('keyed_rows', 'SELECT id, g, v FROM keyed_changes', start => false);
SELECT streamwin.create_query('keyed_counts', 'SELECT g, count(*) AS n FROM keyed_changes GROUP BY g',
                              output_mode => 'update', start => false);
SELECT (streamwin.run_available('keyed_rows'))->>'input_rows' AS input_rows;
ALTER TABLE keyed DROP CONSTRAINT keyed_pkey;
INSERT INTO keyed VALUES (1, 7, 700);
\set SHOW_CONTEXT never
SELECT streamwin.run_available('keyed_rows');
ALTER TABLE keyed ADD PRIMARY KEY (id, g);
SELECT streamwin.run_available('keyed_rows');
\set SHOW_CONTEXT errors
SELECT (streamwin.run_available('keyed_counts'))->>'input_rows' AS input_rows;
SELECT g, n FROM keyed_counts ORDER BY g;
DELETE FROM keyed WHERE g = 7;
ALTER TABLE keyed DROP CONSTRAINT keyed_pkey, ADD PRIMARY KEY (id);
SELECT streamwin.reset_query('keyed_rows', 'latest');
UPDATE keyed SET v = v + 1 WHERE id = 2;
SELECT (streamwin.run_available('keyed_rows'))->>'input_rows' AS input_rows;
SELECT (SELECT count(*) FROM ((TABLE keyed_rows) EXCEPT ALL (TABLE keyed)) d) AS unexpected,
       (SELECT count(*) FROM ((TABLE keyed) EXCEPT ALL (TABLE keyed_rows)) d) AS missing;
SELECT streamwin.drop_query('keyed_rows', drop_result => true);
SELECT streamwin.drop_query('keyed_counts', drop_result => true);
SELECT streamwin.drop_source('keyed_changes');
DROP TABLE keyed;

-- The values an aggregate of the user's runs over (with an inverse
-- transition function, or DISTINCT) are handed to it as the rows hold
-- them: a composite value whole (not its first field), a domain's value as
-- the domain (its overload, not the base type's), in its collation named
-- with its schema (a batch in a session whose search_path lacks it).
CREATE TYPE pair AS (a int, b text);
CREATE DOMAIN cents AS int CHECK (VALUE >= 0);
CREATE SCHEMA colls;
CREATE COLLATION colls.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE FUNCTION pair_add(bigint, pair) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 + $2.a * 10 + length($2.b)';
CREATE FUNCTION pair_sub(bigint, pair) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 - $2.a * 10 - length($2.b)';
CREATE AGGREGATE pair_sum(pair) (SFUNC = pair_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = pair_add, MINVFUNC = pair_sub, MSTYPE = bigint, MINITCOND = '0');
CREATE FUNCTION cents_add(bigint, cents) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 + $2 * 100';
CREATE FUNCTION cents_sub(bigint, cents) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 - $2 * 100';
CREATE FUNCTION int_add(bigint, int) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 + $2';
CREATE FUNCTION int_sub(bigint, int) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 - $2';
CREATE AGGREGATE cents_total(cents) (SFUNC = cents_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = cents_add, MINVFUNC = cents_sub, MSTYPE = bigint, MINITCOND = '0');
CREATE AGGREGATE cents_total(int) (SFUNC = int_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = int_add, MINVFUNC = int_sub, MSTYPE = bigint, MINITCOND = '0');
CREATE TABLE shaped (id int PRIMARY KEY, g int, p pair, c cents, w text);
ALTER TABLE shaped REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('shaped_changes', 'shaped', '{"changes": "all"}');
SET search_path = public, colls;
CREATE VIEW shaped_expected AS
  SELECT g, pair_sum(p) AS ps, pair_sum(DISTINCT p) AS pds, array_agg(DISTINCT p) AS pairs,
         cents_total(c) AS cents, cents_total(DISTINCT c) AS distinct_cents, least_text(w COLLATE ci) AS least_ci,
         count(DISTINCT w COLLATE ci) AS words_ci
    FROM shaped GROUP BY g;
SELECT streamwin.create_query('shaped_sums', $$
  SELECT g, pair_sum(p) AS ps, pair_sum(DISTINCT p) AS pds, array_agg(DISTINCT p) AS pairs,
         cents_total(c) AS cents, cents_total(DISTINCT c) AS distinct_cents, least_text(w COLLATE ci) AS least_ci,
         count(DISTINCT w COLLATE ci) AS words_ci
    FROM shaped_changes GROUP BY g$$, output_mode => 'update', start => false);
RESET search_path;
INSERT INTO shaped VALUES (1, 1, (1, 'ab'), 3, 'Bee'), (2, 1, (2, 'cde'), 4, 'bee'), (3, 1, (1, 'ab'), 3, 'ant'),
                          (4, 2, NULL, NULL, NULL), (5, 2, (3, NULL), 5, 'Ant');
SELECT (streamwin.run_batch('shaped_sums'))->'input_rows' AS input_rows;
UPDATE shaped SET p = (5, 'x'), w = 'Ape', c = 7 WHERE id = 3;
DELETE FROM shaped WHERE id = 2;
SELECT (streamwin.run_batch('shaped_sums'))->'input_rows' AS input_rows;
SELECT g, ps, pds, pairs, cents, distinct_cents, least_ci, words_ci FROM shaped_sums ORDER BY g;
SELECT count(*) AS diffs FROM (
  (SELECT g, ps, pds, pairs, cents, distinct_cents, least_ci COLLATE "C", words_ci FROM shaped_sums
   EXCEPT ALL SELECT g, ps, pds, pairs, cents, distinct_cents, least_ci COLLATE "C", words_ci FROM shaped_expected)
  UNION ALL
  (SELECT g, ps, pds, pairs, cents, distinct_cents, least_ci COLLATE "C", words_ci FROM shaped_expected
   EXCEPT ALL SELECT g, ps, pds, pairs, cents, distinct_cents, least_ci COLLATE "C", words_ci FROM shaped_sums)) d;
-- Refused: an aggregate of the user's whose functions are not immutable
-- (it runs again whenever its group changes), and a variadic one.
CREATE FUNCTION scaled_add(bigint, int) RETURNS bigint STABLE STRICT LANGUAGE sql AS 'SELECT $1 + $2';
CREATE AGGREGATE scaled_total(int) (SFUNC = scaled_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = int_add, MINVFUNC = int_sub, MSTYPE = bigint, MINITCOND = '0');
SELECT streamwin.create_query('bad', 'SELECT g, scaled_total(c) AS t FROM shaped_changes GROUP BY g',
                              output_mode => 'update');
CREATE FUNCTION many_add(bigint, VARIADIC int[]) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 + $2[1]';
CREATE FUNCTION many_sub(bigint, VARIADIC int[]) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 - $2[1]';
CREATE AGGREGATE many_total(VARIADIC int[]) (SFUNC = many_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = many_add, MINVFUNC = many_sub, MSTYPE = bigint, MINITCOND = '0');
SELECT streamwin.create_query('bad', 'SELECT g, many_total(c, g) AS t FROM shaped_changes GROUP BY g',
                              output_mode => 'update');
-- (a sketch is refused as before, for what it keeps, not for its functions)
SELECT streamwin.create_query('bad', 'SELECT g, streamwin.approx_count_distinct(c) AS t FROM shaped_changes GROUP BY g',
                              output_mode => 'update');
-- A NULL cannot be cast to a NOT NULL domain, yet a row may hold one (a
-- field of a row value): an aggregate on such a domain that takes NULLs is
-- refused; a strict one runs, NULLs left out as over the table.
CREATE DOMAIN filled AS int NOT NULL;
CREATE TYPE boxed AS (f filled);
CREATE TABLE boxes (id int PRIMARY KEY, g int, b boxed);
ALTER TABLE boxes REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('box_changes', 'boxes', '{"changes": "all"}');
CREATE FUNCTION filled_add(bigint, filled) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT $1 + coalesce($2, 100)';
CREATE FUNCTION filled_sub(bigint, filled) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT $1 - coalesce($2, 100)';
CREATE AGGREGATE filled_total(filled) (SFUNC = filled_add, STYPE = bigint, INITCOND = '0',
  MSFUNC = filled_add, MINVFUNC = filled_sub, MSTYPE = bigint, MINITCOND = '0');
CREATE FUNCTION filled_add_strict(bigint, filled) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 + $2';
CREATE FUNCTION filled_sub_strict(bigint, filled) RETURNS bigint IMMUTABLE STRICT LANGUAGE sql AS 'SELECT $1 - $2';
CREATE AGGREGATE filled_sum(filled) (SFUNC = filled_add_strict, STYPE = bigint, INITCOND = '0',
  MSFUNC = filled_add_strict, MINVFUNC = filled_sub_strict, MSTYPE = bigint, MINITCOND = '0');
SELECT streamwin.create_query('bad', 'SELECT g, filled_total((b).f) AS t FROM box_changes GROUP BY g',
                              output_mode => 'update');
SELECT streamwin.create_query('box_sums', 'SELECT g, filled_sum((b).f) AS s, filled_sum(DISTINCT (b).f) AS ds FROM box_changes GROUP BY g',
                              output_mode => 'update', start => false);
INSERT INTO boxes VALUES (1, 1, ROW(5)), (2, 1, NULL), (3, 1, ROW(5)), (4, 2, NULL);
SELECT (streamwin.run_batch('box_sums'))->'input_rows' AS input_rows;
SELECT g, s, ds FROM box_sums EXCEPT ALL SELECT g, filled_sum((b).f), filled_sum(DISTINCT (b).f) FROM boxes GROUP BY g;
SELECT g, filled_sum((b).f), filled_sum(DISTINCT (b).f) FROM boxes GROUP BY g EXCEPT ALL SELECT g, s, ds FROM box_sums;
SELECT streamwin.drop_query('box_sums', drop_result => true);
SELECT streamwin.drop_source('box_changes');
DROP TABLE boxes;
SELECT streamwin.drop_query('shaped_sums', drop_result => true);
SELECT streamwin.drop_source('shaped_changes');
DROP VIEW shaped_expected;
DROP TABLE shaped;
