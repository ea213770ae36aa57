-- The SQL surface of streamwin: what CREATE EXTENSION installs, and who may
-- see what.  The function signatures and view columns here are the public
-- contract that users and outside tests rely on.
CREATE EXTENSION streamwin;

-- The interface functions and their argument names.
SELECT p.proname || '(' || pg_get_function_arguments(p.oid) || ')' AS function,
       pg_get_function_result(p.oid) AS returns
FROM pg_proc p
WHERE p.pronamespace = 'streamwin'::regnamespace
ORDER BY p.proname, function;

-- The observability views and their columns.
SELECT c.relname AS view, string_agg(a.attname, ', ' ORDER BY a.attnum) AS columns
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
WHERE c.relnamespace = 'streamwin'::regnamespace AND c.relkind IN ('v', 'r')
  AND c.relname IN ('queries', 'progress', 'dead_letters', 'sources')
GROUP BY c.relname ORDER BY c.relname;

-- The catalog tables are dumped with the database (pg_extension_config_dump).
SELECT unnest(extconfig)::regclass AS dumped FROM pg_extension WHERE extname = 'streamwin' ORDER BY 1;

-- An ordinary role reads the views but not the catalog, where credentials
-- for the brokers may be kept.
CREATE ROLE streamwin_reader LOGIN;
SET ROLE streamwin_reader;
SELECT count(*) FROM streamwin.queries;
SELECT count(*) FROM streamwin.sources;
SELECT count(*) FROM streamwin.progress;
SELECT * FROM streamwin.source_catalog;
UPDATE streamwin.query_offsets SET next_offset = 0;
RESET ROLE;

-- A query's text, its errors and its batches are for its owner's roles
-- (and members of pg_read_all_stats) only, as pg_stat_activity shows query
-- texts: another role sees that the query exists and how it runs, not what
-- it reads or what its errors say.
CREATE ROLE streamwin_owner;
CREATE ROLE streamwin_team IN ROLE streamwin_owner;
CREATE ROLE streamwin_monitor IN ROLE pg_read_all_stats;
GRANT CREATE ON SCHEMA public TO streamwin_owner;
CREATE TABLE salaries (name text, amount int);
SELECT streamwin.create_table_source('salary_changes', 'salaries');
GRANT SELECT ON salaries, salary_changes TO streamwin_owner;
SET ROLE streamwin_owner;
SELECT streamwin.create_query('raises',
    $$SELECT name, amount FROM salary_changes WHERE amount > 100000$$, start => false);
RESET ROLE;
SELECT streamwin.create_query('all_salaries', $$SELECT name, amount FROM salary_changes$$,
                              start => false);
INSERT INTO salaries VALUES ('ceo', 900000), ('intern', 20000);
CREATE FUNCTION peek(r text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS
$$BEGIN RAISE NOTICE 'saw %', r; RETURN true; END$$;
SET ROLE streamwin_owner;
SELECT streamwin.run_batch('raises')->>'input_rows' AS input_rows;
RESET ROLE;
SELECT streamwin.run_batch('all_salaries')->>'input_rows' AS input_rows;
UPDATE streamwin.query_catalog SET status = 'failed',
       last_error = 'duplicate key value violates unique constraint: Key (name)=(ceo) already exists.'
 WHERE name = 'raises';
-- everything, for the superuser
SELECT name, state, owner, query, last_error FROM streamwin.queries ORDER BY name;
SELECT query, batch_id, input_rows FROM streamwin.progress ORDER BY query;
-- for a member of the owner: its query, not the superuser's
SET ROLE streamwin_team;
SELECT name, state, owner, query, last_error FROM streamwin.queries ORDER BY name;
SELECT query, batch_id, input_rows FROM streamwin.progress ORDER BY query;
-- for another role: neither
SET ROLE streamwin_reader;
SELECT name, state, owner, query, last_error FROM streamwin.queries ORDER BY name;
SELECT query, batch_id, input_rows FROM streamwin.progress ORDER BY query;
SELECT count(*) FROM streamwin.progress_log;
-- ... not even through a function that shows what it is given: the view is
-- a security barrier, so the reader's condition sees the visible rows only
SELECT count(*) FROM streamwin.progress WHERE peek(offsets::text);
-- for pg_read_all_stats: everything
SET ROLE streamwin_monitor;
SELECT name, state, owner, query, last_error FROM streamwin.queries ORDER BY name;
SELECT query, batch_id, input_rows FROM streamwin.progress ORDER BY query;
RESET ROLE;
SELECT streamwin.drop_query('raises', drop_result => true);
SELECT streamwin.drop_query('all_salaries', drop_result => true);
SELECT streamwin.drop_source('salary_changes');
DROP TABLE salaries;
DROP FUNCTION peek(text);
REVOKE CREATE ON SCHEMA public FROM streamwin_owner;
DROP ROLE streamwin_reader, streamwin_owner, streamwin_team, streamwin_monitor;

-- Any role may call create_table_source, which says what a refused role
-- needs; the function that creates a table source's replication slot is
-- not PUBLIC's (superusers and REPLICATION roles may, others once granted).
SELECT p.oid::regprocedure AS function, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_execute
FROM pg_proc p
WHERE p.pronamespace = 'streamwin'::regnamespace AND p.proname LIKE 'create_table_source%'
ORDER BY 1;

-- GUCs are reserved under the streamwin prefix.
SHOW streamwin.max_workers;
SHOW streamwin.progress_retention;
SHOW streamwin.worker_keep_memory;
SHOW streamwin.retained_wal_warning;
SHOW streamwin.launcher_naptime;
SET streamwin.no_such_setting = 1;

-- An installation of 0.1 updated to the current version (through 0.2, with
-- a query in its catalog) has the same catalog, interface and privileges as
-- a fresh one: the same fingerprint of column names and types (in name
-- order, as the update appends columns), functions with their arguments,
-- grants (on the schema, its relations and functions), the views'
-- definitions, the event triggers (fired in which sessions), and the
-- tables pg_dump keeps, in both databases.
-- (one definition, run in each database)
SELECT $def$CREATE FUNCTION pg_temp.catalog_fingerprint() RETURNS text LANGUAGE sql AS $$
    SELECT md5(string_agg(x, ';' ORDER BY x)) FROM (
        SELECT c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod)
               || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
               || coalesce(' ' || c.relacl::text, '')
        FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
        WHERE c.relnamespace = 'streamwin'::regnamespace AND a.attnum > 0
          AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p')
        UNION ALL
        SELECT p.oid::regprocedure::text || ' ' || pg_get_function_arguments(p.oid)
               || ' -> ' || pg_get_function_result(p.oid) || coalesce(' ' || p.proacl::text, '')
        FROM pg_proc p WHERE p.pronamespace = 'streamwin'::regnamespace
        UNION ALL
        SELECT conrelid::regclass::text || ' ' || pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'streamwin'::regnamespace
        UNION ALL
        SELECT 'schema ' || coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'streamwin'
        UNION ALL
        SELECT 'view ' || c.relname || coalesce(' ' || c.reloptions::text, '') || ' '
               || pg_get_viewdef(c.oid)
        FROM pg_class c WHERE c.relnamespace = 'streamwin'::regnamespace AND c.relkind = 'v'
        UNION ALL
        SELECT 'event trigger ' || evtname || ' ' || evtevent || ' ' || evtenabled::text || ' '
               || evtfoid::regprocedure::text
        FROM pg_event_trigger WHERE evtname LIKE 'streamwin%'
        UNION ALL
        SELECT 'dumped ' || unnest(extconfig)::regclass::text
        FROM pg_extension WHERE extname = 'streamwin') s(x) $$
$def$ AS fingerprint_function \gset
:fingerprint_function;
SELECT pg_temp.catalog_fingerprint() AS fresh, current_database() AS regress_db \gset
CREATE DATABASE streamwin_update;
\c streamwin_update
CREATE EXTENSION streamwin VERSION '0.1';
-- Before the update the library refuses the old catalog, saying what to do.
SELECT streamwin.run_batch('any');
-- A catalog updated past the library this server loaded (updated before a
-- restart): the hint says to restart.
UPDATE pg_extension SET extversion = '99.0' WHERE extname = 'streamwin';
SELECT streamwin.run_batch('any');
UPDATE pg_extension SET extversion = '0.1' WHERE extname = 'streamwin';
ALTER EXTENSION streamwin UPDATE TO '0.2';
-- A query as the 0.2 library left it: tables and owner by oid, its dedup
-- tables' oids in the compiled plan, checkpoint tables under autovacuum.
CREATE ROLE streamwin_old_owner;
CREATE VIEW old_src AS SELECT 1 AS x;
CREATE TABLE old_result (x int);
CREATE UNLOGGED TABLE streamwin.state_1 (x int);
CREATE TABLE streamwin.checkpoint_1 (x int);
CREATE UNLOGGED TABLE streamwin.dedup_1 (x int);
CREATE TABLE streamwin.checkpoint_dedup_1 (x int);
INSERT INTO streamwin.source_catalog (name, relation, kind, brokers, topic, format, columns, owner)
VALUES ('old_src', 'old_src'::regclass, 'kafka', 'localhost:9092', 't', 'json', 'x int',
        'streamwin_old_owner'::regrole);
INSERT INTO streamwin.query_catalog (name, source_id, owner, query, output_mode, trigger_interval,
                                     result_table, state_table, checkpoint_table, plan, desired_state)
SELECT 'old_q', source_id, 'streamwin_old_owner'::regrole, 'SELECT ...', 'update', '1 second',
       'old_result'::regclass, 'streamwin.state_1'::regclass, 'streamwin.checkpoint_1'::regclass,
       jsonb_build_object('kind', 'aggregate', 'dedup_sql', 'INSERT ...',
           'dedup_table', 'streamwin.dedup_1'::regclass::oid::text,
           'dedup_checkpoint', 'streamwin.checkpoint_dedup_1'::regclass::oid::text),
       'stopped'
  FROM streamwin.source_catalog;
-- Names as libraries before 0.5 recorded them, as written (the result
-- table of 'MixedCase' is mixedcase), with a batch, a late row and a dead
-- letter under them; and two names whose folded forms are the same.
INSERT INTO streamwin.source_catalog (name, relation, kind, brokers, topic, format, columns, owner)
VALUES ('Old_Src2', 'old_src'::regclass, 'kafka', 'localhost:9092', 't2', 'json', 'x int',
        'streamwin_old_owner'::regrole);
INSERT INTO streamwin.query_catalog (name, source_id, owner, query, output_mode, trigger_interval,
                                     result_table, plan, desired_state)
SELECT n, source_id, 'streamwin_old_owner'::regrole, 'SELECT ...', 'append', '1 second',
       'old_result'::regclass, '{"kind": "transform"}', 'stopped'
  FROM streamwin.source_catalog, unnest('{MixedCase,Twin,twin}'::text[]) n WHERE name = 'Old_Src2';
INSERT INTO streamwin.progress (query, batch_id, started_at, duration_ms, input_rows,
                                late_rows_dropped, dead_letters, state_rows, offsets)
VALUES ('MixedCase', 1, now(), 1, 1, 1, 0, 0, '{}');
INSERT INTO streamwin.late_row_log (query, partition, "offset", event_time, watermark)
VALUES ('MixedCase', 0, 7, now(), now());
INSERT INTO streamwin.dead_letter_log (source, partition, "offset", error) VALUES ('Old_Src2', 0, 3, 'x');
ALTER EXTENSION streamwin UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'streamwin';
-- ... now names them by regclass and regrole, with the dedup tables in columns
SELECT s.relation, s.owner AS source_owner, q.owner, q.result_table, q.state_table,
       q.checkpoint_table, q.dedup_table, q.dedup_checkpoint, q.plan
  FROM streamwin.query_catalog q JOIN streamwin.query_sources USING (query_id)
  JOIN streamwin.source_catalog s USING (source_id)
 WHERE q.name = 'old_q';
-- ... records the names as PostgreSQL names their tables (0.5), in the
-- tables that refer to them too; Twin keeps its spelling, twin being taken;
-- each query's source is its source 0 (0.5)
SELECT q.name, qs.source_index, s.name AS source
  FROM streamwin.query_catalog q JOIN streamwin.query_sources qs USING (query_id)
  JOIN streamwin.source_catalog s USING (source_id)
 ORDER BY q.query_id;
SELECT query FROM streamwin.progress UNION ALL SELECT query FROM streamwin.late_row_log
UNION ALL SELECT source FROM streamwin.dead_letter_log;
-- ... and each is found: mixedcase by its old spelling and any that folds
-- to its name, Twin by the one it kept (each call sets its own interval)
SELECT streamwin.alter_query(n, trigger_interval => i * interval '1 second')
  FROM unnest('{MixedCase,mixedcase,MIXEDCASE,Twin,twin}'::text[]) WITH ORDINALITY AS u(n, i);
SELECT name, trigger_interval FROM streamwin.queries WHERE name <> 'old_q' ORDER BY trigger_interval;
SELECT name FROM streamwin.sources WHERE name = 'old_src2';
DELETE FROM streamwin.progress_log;
DELETE FROM streamwin.late_row_log;
DELETE FROM streamwin.dead_letter_log;
-- ... and its source's batches run in the zone its workers had (0.5): the
-- TimeZone of the session that ran the update
SELECT name, timezone, timezone = current_setting('TimeZone') AS as_the_session FROM streamwin.sources;
SELECT relname, reloptions FROM pg_class
 WHERE relnamespace = 'streamwin'::regnamespace AND relname ~ '^(state|checkpoint|dedup|checkpoint_dedup)_1$'
 ORDER BY relname;
-- ... and its tables depend on the extension (0.4), as a new query's do
SELECT objid::regclass AS depends_on_extension FROM pg_depend
 WHERE classid = 'pg_class'::regclass AND deptype = 'n' AND refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'streamwin')
 ORDER BY objid::regclass::text;
DELETE FROM streamwin.query_catalog;
DELETE FROM streamwin.source_catalog;
DROP TABLE streamwin.state_1, streamwin.checkpoint_1, streamwin.dedup_1, streamwin.checkpoint_dedup_1,
    old_result;
DROP VIEW old_src;
DROP ROLE streamwin_old_owner;
:fingerprint_function;
SELECT pg_temp.catalog_fingerprint() = :'fresh' AS same_as_fresh_install;

-- A query's own tables (state, checkpoint, dedup keys) depend on the
-- extension: DROP EXTENSION says so, and with CASCADE drops them too (the
-- result table is the user's, and stays).  Before, they stayed in the
-- schema, where a new installation's queries, numbered from 1 again, ran
-- into them.
SELECT streamwin.create_kafka_source('drop_src', 'localhost:9092', 't', 'k text, v int, ts timestamptz');
SELECT streamwin.create_query('drop_q',
    $$SELECT k, count(*) AS n FROM drop_src GROUP BY streamwin.tumble(ts, '1 minute'), k$$,
    watermark => '1 minute', dedup_keys => '{k}', start => false);
\set VERBOSITY terse
DROP EXTENSION streamwin;
DROP EXTENSION streamwin CASCADE;
\set VERBOSITY default
SELECT count(*) AS tables_left_in_schema FROM pg_class WHERE relnamespace = 'streamwin'::regnamespace;
SELECT count(*) AS result_rows FROM drop_q;
-- A schema that an older installation left query tables in: new queries
-- are numbered after them.
CREATE TABLE streamwin.state_7 (x int);
CREATE EXTENSION streamwin;
SELECT streamwin.create_kafka_source('drop_src', 'localhost:9092', 't', 'k text, v int, ts timestamptz');
SELECT streamwin.create_query('drop_q2',
    $$SELECT k, count(*) AS n FROM drop_src GROUP BY streamwin.tumble(ts, '1 minute'), k$$,
    output_mode => 'update', start => false);
SELECT query_id, state_table FROM streamwin.query_catalog;
\c :regress_db
DROP DATABASE streamwin_update;
