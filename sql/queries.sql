-- Continuous queries: what create_query accepts, the result table it creates,
-- and the shapes it refuses (each with a hint saying what would work).
\getenv brokers KAFKA_BROKERS
CREATE TABLE regions (region text PRIMARY KEY, continent text);

-- a tumbling window with keys and the aggregates
SELECT streamwin.create_query('sales',
    $$SELECT region, count(*) AS orders, sum(amount) AS revenue, avg(amount) AS avg_amount,
             min(amount) AS smallest, max(amount) AS largest
      FROM orders WHERE amount > 0
      GROUP BY streamwin.tumble(event_time, '1 minute'), region$$,
    watermark => '10 seconds', start => false);
\d sales

-- hop windows, a join with an ordinary table, expressions as keys
SELECT streamwin.create_query('sales_by_continent',
    $$SELECT r.continent, upper(o.region) AS region_code, count(*) AS orders
      FROM orders o JOIN regions r USING (region)
      GROUP BY streamwin.hop(o.event_time, '10 minutes', '5 minutes'), r.continent, upper(o.region)$$,
    output_mode => 'update', start => false);
\d sales_by_continent

-- session windows: per region, orders less than 30 minutes apart form one
-- session, [first order, last order + 30 minutes)
SELECT streamwin.create_query('visits',
    $$SELECT region, count(*) AS orders, sum(amount) AS revenue
      FROM orders GROUP BY streamwin.session(event_time, '30 minutes'), region$$,
    watermark => '1 minute', start => false);
\d visits

-- a running total without a window, rewritten whole every batch
SELECT streamwin.create_query('totals', 'SELECT region, sum(amount) AS revenue FROM orders GROUP BY region',
    output_mode => 'complete', start => false);
\d totals

-- a continuous transform: every row that passes the filter is appended
SELECT streamwin.create_query('big_orders',
    'SELECT order_id, region, amount * 100 AS cents FROM orders WHERE amount >= 100', start => false);
\d big_orders

SELECT name, source, state, worker_pid, last_batch_id, watermark, output_mode, watermark_delay
FROM streamwin.queries ORDER BY name;

-- refused shapes
SELECT streamwin.create_query('q', 'SELECT 1; SELECT 2');
SELECT streamwin.create_query('q', 'INSERT INTO regions VALUES (''x'')');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM regions GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT a.region, count(*) AS n FROM orders a JOIN orders b USING (order_id) GROUP BY a.region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY region HAVING count(*) > 1', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY region ORDER BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(DISTINCT (order_id, region)) AS n FROM orders GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT ROW(region, order_id > 10) AS k, count(*) AS n FROM orders GROUP BY 1', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT order_id, ROW(region, amount) AS r FROM orders');
SELECT streamwin.create_query('q', 'SELECT region, string_agg(region, '','') AS s FROM orders GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, sum(amount) / count(*) AS mean FROM orders GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT r.region, r.continent, count(*) AS n FROM orders o JOIN regions r USING (region) GROUP BY r.region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, random() AS r, count(*) AS n FROM orders GROUP BY region', output_mode => 'update');
-- built-in volatile functions anywhere: a replay would give other rows
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders WHERE random() < 0.5 GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT order_id, clock_timestamp() AS seen FROM orders');
-- and the stable ones that read the current date, a setting or the session
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders WHERE age(event_time) < interval ''1 day'' GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT order_id, current_setting(''application_name'') AS app FROM orders');
SELECT streamwin.create_query('q', 'SELECT order_id, current_schema AS s FROM orders');
-- group keys whose type does not hash
SELECT streamwin.create_query('q', 'SELECT amount::money AS m, count(*) AS n FROM orders GROUP BY 1', output_mode => 'update');
-- a view over a source, joined with it: the batch joined with itself
CREATE VIEW orders_over_100 AS SELECT * FROM orders WHERE amount > 100;
SELECT streamwin.create_query('q', 'SELECT o.region, count(*) AS n FROM orders o JOIN orders_over_100 b USING (order_id) GROUP BY o.region', output_mode => 'update');
DROP VIEW orders_over_100;
-- a view joined as a table that calls a volatile function
CREATE VIEW regions_sample AS SELECT * FROM regions WHERE random() < 0.5;
SELECT streamwin.create_query('q', 'SELECT r.region, count(*) AS n FROM orders o JOIN regions_sample r USING (region) GROUP BY r.region', output_mode => 'update');
DROP VIEW regions_sample;
-- or that reads the clock: there now() is when a batch runs, not its time
CREATE VIEW regions_now AS SELECT *, current_date AS today FROM regions;
SELECT streamwin.create_query('q', 'SELECT r.region, count(*) AS n FROM orders o JOIN regions_now r USING (region) GROUP BY r.region', output_mode => 'update');
DROP VIEW regions_now;
-- a temporary table: the worker and other sessions would not see it, or
-- would read another table of its name
CREATE TEMP TABLE regions_here (region text, continent text);
SELECT streamwin.create_query('q', 'SELECT r.continent, count(*) AS n FROM orders o JOIN regions_here r USING (region) GROUP BY r.continent', output_mode => 'update');
DROP TABLE regions_here;
-- a table the creating role (the query's owner) may not read: refused at
-- creation rather than at every batch
CREATE ROLE queries_reader;
GRANT CREATE ON SCHEMA public TO queries_reader;
GRANT SELECT ON orders TO queries_reader;
SET ROLE queries_reader;
SELECT streamwin.create_query('q', 'SELECT r.continent, count(*) AS n FROM orders o JOIN regions r USING (region) GROUP BY r.continent', output_mode => 'update', start => false);
RESET ROLE;
REVOKE ALL ON orders FROM queries_reader;
REVOKE CREATE ON SCHEMA public FROM queries_reader;
DROP ROLE queries_reader;
SELECT streamwin.create_query('q', 'SELECT count(*) AS n FROM orders GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT count(*) AS n FROM orders', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*), count(amount) FROM orders GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(event_time, ''1 minute''), region');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY region', watermark => '1 minute', output_mode => 'update');
-- complete mode with a watermark: accepted, as in Spark, with a notice that it does nothing there
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(event_time, ''1 minute''), region', watermark => '1 minute', output_mode => 'complete', start => false);
SELECT streamwin.drop_query('q', drop_result => true);
-- (with dedup_keys, the watermark is what forgets the keys: no notice)
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(event_time, ''1 minute''), region',
    watermark => '1 minute', output_mode => 'complete', dedup_keys => '{order_id}', start => false);
SELECT streamwin.drop_query('q', drop_result => true);
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(event_time, ''1 month''), region', output_mode => 'update');
-- a size past what microseconds hold (it would wrap around to hours)
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(event_time, ''213503983 days''), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(event_time, interval ''1 minute'' * order_id), region', output_mode => 'update');
-- the event time must be a timestamptz: epoch milliseconds and text are
-- converted (the hint says how), not guessed
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(order_id, ''1 minute''), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.hop(region, ''1 minute'', ''30 seconds''), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.session(event_time, 60), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'WITH o AS (SELECT * FROM orders) SELECT region, count(*) AS n FROM o GROUP BY streamwin.tumble(event_time, ''1 minute''), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.hop(event_time, ''1 minute'', ''5 minutes''), region', output_mode => 'update');
-- a row in every one of 2.6 billion windows
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.hop(event_time, ''30 days'', ''1 millisecond''), region', output_mode => 'update');
-- one window more than 100,000 (the size rounded up)
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.hop(event_time, ''100000 seconds 1 microsecond'', ''1 second''), region', output_mode => 'update');
-- an event time with nothing to act on: no watermark, no dedup_keys
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY region',
    output_mode => 'update', options => '{"event_time": "event_time"}');
-- a hop() in the SELECT list is a GROUP BY key, itself or by its position or name
SELECT streamwin.create_query('q', 'SELECT streamwin.hop(event_time, ''10 minutes'', ''5 minutes'') AS w, count(*) AS n FROM orders GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('hop_by_name', 'SELECT streamwin.hop(event_time, ''10 minutes'', ''5 minutes'') AS w, region, count(*) AS n FROM orders GROUP BY w, region', output_mode => 'update', start => false);
SELECT streamwin.create_query('hop_by_position', 'SELECT region, streamwin.hop(event_time, ''10 minutes'', ''5 minutes''), count(*) AS n FROM orders GROUP BY 2, 1', output_mode => 'update', start => false);
SELECT streamwin.create_query('hop_by_start', 'SELECT streamwin.hop(event_time, ''10 minutes'', ''5 minutes''), region, count(*) AS n FROM orders GROUP BY window_start, region', output_mode => 'update', start => false);
SELECT streamwin.drop_query(q, drop_result => true) FROM unnest(ARRAY['hop_by_name', 'hop_by_position', 'hop_by_start']) AS q;
-- hop_starts() written in FROM is a function in FROM, not a window
SELECT streamwin.create_query('q', 'SELECT w, count(*) AS n FROM orders, streamwin.hop_starts(event_time, ''3650 days'', ''1 second'') AS w GROUP BY w', output_mode => 'update');
-- a hop() of your own, found first, is yours, as plain SQL reads it
CREATE FUNCTION public.hop(ts timestamptz, size interval, slide interval) RETURNS timestamptz
    IMMUTABLE LANGUAGE sql AS 'SELECT date_bin(size, ts, ''2000-01-01'')';
SELECT streamwin.create_query('own_hop', 'SELECT hop(event_time, ''10 minutes'', ''5 minutes'') AS h, count(*) AS n FROM orders GROUP BY 1',
                              output_mode => 'update', start => false);
\d own_hop
SELECT streamwin.drop_query('own_hop', drop_result => true);
DROP FUNCTION public.hop(timestamptz, interval, interval);
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.session(event_time, ''1 month''), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.session(event_time, ''1 minute''), streamwin.tumble(event_time, ''1 hour''), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(clock_timestamp(), ''1 minute''), region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT r.region, count(*) AS n FROM regions r LEFT JOIN orders o USING (region) GROUP BY r.region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM (SELECT * FROM orders) s GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders WHERE order_id IN (SELECT 1) GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT region, no_such_column FROM orders');
-- an aggregate's ORDER BY, and a sample that a replay would draw again
SELECT streamwin.create_query('q', 'SELECT region, string_agg(region, '','' ORDER BY order_id) AS ids FROM orders GROUP BY region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT o.region, count(*) AS n FROM orders o JOIN regions r TABLESAMPLE BERNOULLI (50) USING (region) GROUP BY o.region', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', output_mode => 'update');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', output_mode => 'sometimes');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"idle": "1s"}');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"capture_late_rows": "yes"}');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"idle_timeout": "a while"}');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', trigger_interval => '-1 second');
-- durations a worker cannot wait for, or that move a watermark out of the
-- timestamps' range, or that overflow
SELECT streamwin.create_query('q', 'SELECT * FROM orders', trigger_interval => '30 days');
SELECT streamwin.create_query('q', 'SELECT region, count(*) AS n FROM orders GROUP BY streamwin.tumble(event_time, ''1 minute''), region',
    watermark => '40000 days');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', trigger_interval => '213503984 days');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"idle_timeout": "100000 days"}');
-- options with nothing to act on in the query
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"idle_timeout": "1 hour"}');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"capture_late_rows": true}');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"dedup_without_watermark": true}');
SELECT streamwin.create_query('q', 'SELECT * FROM orders', options => '{"join_state_unbounded": true}');
SELECT streamwin.create_query('sales', 'SELECT * FROM orders');
SELECT streamwin.create_query('regions', 'SELECT * FROM orders', start => false);
-- nothing was left behind by the refused definitions
SELECT count(*) AS queries FROM streamwin.queries;

-- a query cannot run in a worker for a role that cannot log in
CREATE ROLE streamwin_nologin;
GRANT SELECT ON orders TO streamwin_nologin;
GRANT CREATE ON SCHEMA public TO streamwin_nologin;
SET ROLE streamwin_nologin;
SELECT streamwin.create_query('nologin_q', 'SELECT order_id FROM orders');
-- other roles' queries cannot be changed
SELECT streamwin.stop_query('sales');
SELECT streamwin.drop_query('sales');
SELECT streamwin.alter_query('sales', trigger_interval => '1 minute');
RESET ROLE;
-- nor for one that may not connect to the database (its worker would fail
-- to connect at every launcher round, in the server log alone)
ALTER ROLE streamwin_nologin LOGIN;
SELECT current_database() AS regress_db \gset
REVOKE CONNECT ON DATABASE :"regress_db" FROM PUBLIC;
SET ROLE streamwin_nologin;
SELECT streamwin.create_query('noconnect_q', 'SELECT order_id FROM orders');
RESET ROLE;
GRANT CONNECT ON DATABASE :"regress_db" TO PUBLIC;
REVOKE ALL ON orders FROM streamwin_nologin;
REVOKE CREATE ON SCHEMA public FROM streamwin_nologin;
DROP ROLE streamwin_nologin;

-- alter_query changes how often a query runs and how long an idle partition
-- holds its watermark back; NULL keeps a setting, and the values are
-- checked as create_query checks them.
SELECT streamwin.alter_query('sales', trigger_interval => '-1 second');
SELECT streamwin.alter_query('sales', idle_timeout => '0');
SELECT streamwin.alter_query('no_such_query', trigger_interval => '1 second');
-- idle_timeout is refused where there is no watermark to hold back
SELECT streamwin.alter_query('big_orders', idle_timeout => '1 minute');
-- a NULL argument of a control function is refused, not taken as nothing to do
SELECT streamwin.stop_query(NULL);
SELECT streamwin.drop_query('sales', drop_result => NULL);
SELECT streamwin.reset_query('sales', NULL);
SELECT streamwin.run_batch(NULL);
SELECT streamwin.drop_source(NULL);
SELECT streamwin.alter_query('sales', trigger_interval => '5 seconds');
SELECT streamwin.alter_query('sales', idle_timeout => '2 minutes');
SELECT streamwin.alter_query('sales');
SELECT v.name, v.trigger_interval, q.options->>'idle_timeout' AS idle_timeout
FROM streamwin.queries v JOIN streamwin.query_catalog q USING (name) WHERE v.name = 'sales';

-- An aggregation's tables in schema streamwin: its state (UNLOGGED) belongs
-- to the query's owner, whose batches write it; its checkpoint (logged) to
-- streamwin, replaced whole by each checkpoint and left out of autovacuum.
SELECT q.name, s.relpersistence AS state, pg_get_userbyid(s.relowner) = q.owner::text AS state_owner_ok,
       c.relpersistence AS checkpoint, c.relowner = e.extowner AS checkpoint_owner_ok, c.reloptions
  FROM streamwin.query_catalog q
  JOIN pg_extension e ON e.extname = 'streamwin'
  JOIN pg_class s ON s.oid = q.state_table
  JOIN pg_class c ON c.oid = q.checkpoint_table
 ORDER BY q.name;

-- drop_query keeps the result table unless asked
SELECT streamwin.drop_query('big_orders');
SELECT to_regclass('big_orders') IS NOT NULL AS result_kept;
DROP TABLE big_orders;
SELECT streamwin.drop_query('sales_by_continent', drop_result => true);
SELECT streamwin.drop_query('totals', drop_result => true);
SELECT streamwin.drop_query('visits', drop_result => true);
-- a view over the result keeps it, and drop_query says how to go on; the
-- query is still there
CREATE VIEW sales_large AS SELECT * FROM sales WHERE largest > 100;
SELECT streamwin.drop_query('sales', drop_result => true);
SELECT name FROM streamwin.queries WHERE name = 'sales';
DROP VIEW sales_large;
SELECT streamwin.drop_query('sales', drop_result => true);
SELECT streamwin.drop_query('sales');
SELECT count(*) AS state_tables_left FROM pg_tables WHERE schemaname = 'streamwin' AND tablename ~ '^(state|checkpoint)_[0-9]+$';

-- Query names follow PostgreSQL's rule for table names: unquoted, a name
-- is folded to lower case; double-quoted, it is kept as written.  The name
-- recorded and shown is the result table's, quoted where needed, and every
-- function finds the query by any spelling that reads as that name.
CREATE SCHEMA analytics;
SELECT streamwin.create_query('MixedCase', 'SELECT order_id FROM orders', start => false);
SELECT streamwin.create_query('"MixedCase"', 'SELECT order_id, region FROM orders', start => false);
SELECT streamwin.create_query('Analytics.Big_Orders', 'SELECT order_id FROM orders WHERE amount > 100', start => false);
SELECT name, result_table, source FROM streamwin.queries ORDER BY result_table::text;
SELECT streamwin.alter_query('MIXEDCASE', trigger_interval => '2 seconds');
SELECT streamwin.alter_query('"MixedCase"', trigger_interval => '3 seconds');
SELECT streamwin.alter_query('analytics.big_orders', trigger_interval => '4 seconds');
SELECT streamwin.stop_query('mixedcase');
SELECT streamwin.reset_query('"mixedcase"', 'latest');
SELECT name, trigger_interval FROM streamwin.queries ORDER BY trigger_interval;
SELECT streamwin.create_query('MIXEDCASE', 'SELECT order_id FROM orders', start => false);
SELECT streamwin.create_query('a..b', 'SELECT order_id FROM orders', start => false);
SELECT streamwin.create_query('"MixedCase', 'SELECT order_id FROM orders', start => false);
SELECT streamwin.drop_query('mixedcase', drop_result => true);
SELECT streamwin.drop_query('"MixedCase"', drop_result => true);
SELECT streamwin.drop_query('ANALYTICS.BIG_ORDERS', drop_result => true);
SELECT count(*) AS queries_left FROM streamwin.queries;
DROP SCHEMA analytics;
DROP TABLE regions;
