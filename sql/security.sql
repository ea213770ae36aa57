-- Security: a role that creates queries cannot make streamwin run its code
-- as the extension's owner (a superuser), whose role streamwin takes to
-- keep its catalog and the queries' state and checkpoints.
SET timezone = 'UTC';
CREATE ROLE security_user;
CREATE SCHEMA security_own AUTHORIZATION security_user;
CREATE TABLE security_rows (id int PRIMARY KEY, g int);
SELECT streamwin.create_table_source('security_src', 'security_rows');
GRANT SELECT ON security_rows, security_src TO security_user;
GRANT CREATE ON SCHEMA public TO security_user;
INSERT INTO security_rows VALUES (1, 1);
SET ROLE security_user;
CREATE TABLE security_own.ran (who text, how text);
SELECT streamwin.create_query('security_q', 'SELECT g, count(*) AS n FROM security_src GROUP BY g',
    output_mode => 'update', start => false);
-- the role's own = for text, in a schema it searches before pg_catalog:
-- streamwin's statements, parsed in this session, run as the owner
CREATE FUNCTION security_own.eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO security_own.ran VALUES (current_user, 'operator');
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR security_own.= (LEFTARG = text, RIGHTARG = text, FUNCTION = security_own.eq);
SET search_path = security_own, pg_catalog, public;
SELECT (streamwin.run_batch('security_q')->>'input_rows')::int AS input_rows;
SELECT streamwin.stop_query('security_q');
RESET search_path;
-- The table's rows come from the WAL: a privilege revoked, or row-level
-- security turned on, since the query's runner was made in this session,
-- holds for its next batch.
RESET ROLE;
REVOKE SELECT ON security_rows FROM security_user;
INSERT INTO security_rows VALUES (3, 1);
SET ROLE security_user;
SELECT streamwin.run_batch('security_q');
RESET ROLE;
GRANT SELECT ON security_rows TO security_user;
ALTER TABLE security_rows ENABLE ROW LEVEL SECURITY;
CREATE POLICY security_g1 ON security_rows FOR SELECT USING (g = 1);
SET ROLE security_user;
SELECT streamwin.run_batch('security_q');
RESET ROLE;
ALTER TABLE security_rows DISABLE ROW LEVEL SECURITY;
SET ROLE security_user;
SELECT (streamwin.run_batch('security_q')->>'input_rows')::int AS input_rows;
SELECT count(*) AS ran_as_others FROM security_own.ran WHERE who <> 'security_user';
-- a trigger on the query's state table, which the role owns
RESET ROLE;
SELECT state_table AS security_state FROM streamwin.query_catalog WHERE name = 'security_q' \gset
SET ROLE security_user;
CREATE FUNCTION security_own.note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO security_own.ran VALUES (current_user, 'trigger');
    RETURN NULL;
END $$;
CREATE TRIGGER security_note AFTER INSERT OR DELETE OR TRUNCATE ON :security_state
    FOR EACH STATEMENT EXECUTE FUNCTION security_own.note();
CREATE FUNCTION security_own.try_reset() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM streamwin.reset_query('security_q', 'earliest');
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'refused: %', regexp_replace(SQLERRM, 'state_[0-9]+', 'state_N');
END $$;
SELECT security_own.try_reset();
DROP TRIGGER security_note ON :security_state;
CREATE FUNCTION security_own.fine(int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO security_own.ran VALUES (current_user, 'check');
    RETURN true;
END $$;
ALTER TABLE :security_state ADD CONSTRAINT security_fine CHECK (security_own.fine(g));
SELECT security_own.try_reset();
ALTER TABLE :security_state DROP CONSTRAINT security_fine;
-- a table of the role's that inherits from its state table: a statement
-- on the state table without ONLY reaches its rows, and runs its triggers
CREATE TABLE security_own.heir () INHERITS (:security_state);
INSERT INTO security_own.heir SELECT * FROM :security_state;
CREATE FUNCTION security_own.note_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO security_own.ran VALUES (current_user, 'heir');
    RETURN OLD;
END $$;
CREATE TRIGGER security_heir BEFORE DELETE ON security_own.heir
    FOR EACH ROW EXECUTE FUNCTION security_own.note_row();
SELECT security_own.try_reset();
DROP TABLE security_own.heir;
SELECT streamwin.reset_query('security_q', 'earliest');
SELECT count(*) AS ran_as_others FROM security_own.ran WHERE who <> 'security_user';
-- An index on an expression that calls the role's function, on its state
-- table (which it owns, and may move to a schema of its own to index it):
-- a restore from the checkpoint (the state lost, as in a crash) refuses
-- the table, whose index's definition the extension owner would read
-- (and, with constants, evaluate); without the index, the rows it copies
-- are written as the role.
-- (noted() records who ran it, and how; the IMMUTABLE functions that call
-- it are what an index expression and an event time may use)
CREATE FUNCTION security_own.noted(how text, v anyelement) RETURNS anyelement LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO security_own.ran VALUES (current_user, how);
    RETURN v;
END $$;
CREATE FUNCTION security_own.key(int) RETURNS int LANGUAGE sql IMMUTABLE
    RETURN security_own.noted('index', $1);
SELECT (streamwin.run_batch('security_q')->>'input_rows')::int AS input_rows;
ALTER TABLE :security_state SET SCHEMA security_own;
RESET ROLE;
SELECT state_table AS security_state FROM streamwin.query_catalog WHERE name = 'security_q' \gset
SET ROLE security_user;
CREATE INDEX security_key ON :security_state (security_own.key(g));
RESET ROLE;
DELETE FROM streamwin.state_alive
 WHERE query_id = (SELECT query_id FROM streamwin.query_catalog WHERE name = 'security_q');
INSERT INTO security_rows VALUES (5, 1);
SET ROLE security_user;
DO $$
BEGIN
    PERFORM streamwin.run_batch('security_q');
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'refused: %', regexp_replace(SQLERRM, 'state_[0-9]+', 'state_N');
END $$;
SELECT format('DROP INDEX %s', indexrelid::regclass) FROM pg_index
 WHERE indrelid = :'security_state'::regclass AND indexprs IS NOT NULL \gexec
SELECT (streamwin.run_batch('security_q')->>'input_rows')::int AS input_rows;
SELECT count(*) AS ran_as_others FROM security_own.ran WHERE who <> 'security_user';
SELECT g, n FROM security_q ORDER BY g;
-- An index calling the role's function with constant arguments, which the
-- planner evaluates where it reads the index's definition: a statement
-- streamwin runs on the table as the extension owner, in a session that
-- has not read the index yet, would run it so, also inside a SQL function
-- of columns that the planner inlines.  The table is refused.
-- (a NOTICE too: the reset of the previous build failed later, and its
-- rollback took noted()'s row with it)
CREATE FUNCTION security_own.konst(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF current_user <> 'security_user' THEN
        RAISE NOTICE 'konst() ran as another role';
    END IF;
    RETURN security_own.noted('constant', $1);
END $$;
CREATE FUNCTION security_own.wrap(int) RETURNS int LANGUAGE sql IMMUTABLE
    AS 'SELECT $1 + security_own.konst(1)';
CREATE INDEX security_konst ON :security_state (security_own.wrap(g));
\c -
SET timezone = 'UTC';
SELECT security_own.try_reset();
SELECT count(*) AS ran_as_others FROM security_own.ran WHERE who <> 'security_user';
DROP INDEX security_own.security_konst;
SET ROLE security_user;
-- A function of the role's, called in its query, reads the batch's rows
-- of the source through streamwin.source_rows() with a column list of its
-- own: a text column over the integers would read each as a pointer.
RESET ROLE;
DO $$
BEGIN
    EXECUTE format('CREATE FUNCTION security_own.peek() RETURNS boolean LANGUAGE sql STABLE AS %L',
                   format('SELECT count(*) >= 0 FROM streamwin.source_rows(%s) AS s(id text, g int)',
                          (SELECT source_id FROM streamwin.source_catalog WHERE name = 'security_src')));
    EXECUTE format('CREATE FUNCTION security_own.peek_numbered() RETURNS boolean LANGUAGE sql STABLE AS %L',
                   format('SELECT count(*) >= 0 FROM streamwin.source_rows(%s, true) AS s(n text, id int, g int)',
                          (SELECT source_id FROM streamwin.source_catalog WHERE name = 'security_src')));
END $$;
SET ROLE security_user;
SELECT streamwin.create_query('security_peek', 'SELECT g, count(*) AS n FROM security_src WHERE security_own.peek() GROUP BY g',
    output_mode => 'update', start => false);
RESET ROLE;
INSERT INTO security_rows VALUES (2, 2);
SET ROLE security_user;
CREATE FUNCTION security_own.try_peek() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM streamwin.run_batch('security_peek');
EXCEPTION WHEN datatype_mismatch THEN
    RAISE NOTICE 'refused: %', regexp_replace(SQLERRM, 'source [0-9]+', 'source N');
END $$;
-- through streamwin's scan of the function, and through the function itself
SELECT security_own.try_peek();
SET streamwin.enable_source_scan = off;
SELECT security_own.try_peek();
RESET streamwin.enable_source_scan;
-- and with its position first, which is an integer
SELECT streamwin.drop_query('security_peek', drop_result => true);
SELECT streamwin.create_query('security_peek',
    'SELECT g, count(*) AS n FROM security_src WHERE security_own.peek_numbered() GROUP BY g',
    output_mode => 'update', start => false);
RESET ROLE;
INSERT INTO security_rows VALUES (4, 2);
SET ROLE security_user;
SELECT security_own.try_peek();
SET streamwin.enable_source_scan = off;
SELECT security_own.try_peek();
RESET streamwin.enable_source_scan;
SELECT streamwin.drop_query('security_peek', drop_result => true);
-- A superuser runs the role's batches (run_batch): the role's code in them
-- runs as the role, also where streamwin evaluates it itself, outside the
-- batch's statements (an event time, for the watermark, here).
RESET ROLE;
CREATE TABLE security_times (id int, ts timestamptz);
SELECT streamwin.create_table_source('security_times_src', 'security_times');
GRANT SELECT ON security_times, security_times_src TO security_user;
SET ROLE security_user;
CREATE FUNCTION security_own.at(timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE
    RETURN security_own.noted('event time', $1);
SELECT streamwin.create_query('security_minutes',
    'SELECT count(*) AS n FROM security_times_src GROUP BY streamwin.tumble(security_own.at(ts), ''1 minute'')',
    watermark => '1 minute', output_mode => 'update', start => false);
RESET ROLE;
INSERT INTO security_times VALUES (1, '2026-01-01 00:00:10'), (2, '2026-01-01 00:01:10');
SELECT (streamwin.run_batch('security_minutes')->>'input_rows')::int AS input_rows;
SELECT window_start, n FROM security_minutes ORDER BY window_start;
SET ROLE security_user;
SELECT count(*) > 0 AS evaluated_as_the_role FROM security_own.ran WHERE how = 'event time';
SELECT count(*) AS ran_as_others FROM security_own.ran WHERE who <> 'security_user';
SELECT streamwin.drop_query('security_minutes', drop_result => true);
RESET ROLE;
SELECT streamwin.drop_source('security_times_src');
DROP TABLE security_times;
SET ROLE security_user;
-- A query of the role's whose group key is of a domain: its restore from
-- the checkpoint, written as the role, stores the key's values as they are
-- (a value of the column's own type, as an INSERT would).
RESET ROLE;
CREATE DOMAIN security_positive AS int CHECK (VALUE > 0);
CREATE TABLE security_dom_rows (id int, g int);
SELECT streamwin.create_table_source('security_dom_src', 'security_dom_rows');
GRANT SELECT ON security_dom_rows, security_dom_src TO security_user;
SET ROLE security_user;
SELECT streamwin.create_query('security_dom',
    'SELECT g::security_positive AS g, count(*) AS n FROM security_dom_src GROUP BY 1',
    output_mode => 'update', start => false);
RESET ROLE;
INSERT INTO security_dom_rows VALUES (1, 1), (2, 2), (3, 1);
SELECT (streamwin.run_batch('security_dom')->>'input_rows')::int AS input_rows;
DELETE FROM streamwin.state_alive
 WHERE query_id = (SELECT query_id FROM streamwin.query_catalog WHERE name = 'security_dom');
INSERT INTO security_dom_rows VALUES (4, 2), (5, 3);
SELECT (streamwin.run_batch('security_dom')->>'input_rows')::int AS input_rows;
SELECT g, n, (SELECT count(*) FROM security_dom_rows r WHERE r.g = q.g) AS plain FROM security_dom q ORDER BY g;
SELECT streamwin.drop_query('security_dom', drop_result => true);
SELECT streamwin.drop_source('security_dom_src');
DROP TABLE security_dom_rows;
DROP DOMAIN security_positive;
-- The role's code that a batch or a reset runs (a function of its query,
-- a trigger on its result table) cannot change the settings of the session
-- that runs it: a superuser's search_path stays as it was.
CREATE TABLE security_leak_rows (id int, g int);
SELECT streamwin.create_table_source('security_leak_src', 'security_leak_rows');
GRANT SELECT ON security_leak_rows, security_leak_src TO security_user;
SET ROLE security_user;
CREATE FUNCTION security_own.leak(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
    AS $$BEGIN PERFORM pg_catalog.set_config('search_path', 'security_own', false); RETURN $1; END$$;
CREATE FUNCTION security_own.leak_trigger() RETURNS trigger LANGUAGE plpgsql
    AS $$BEGIN PERFORM pg_catalog.set_config('search_path', 'security_own', false); RETURN NULL; END$$;
SELECT streamwin.create_query('security_leak',
    'SELECT security_own.leak(g) AS g, count(*) AS n FROM security_leak_src GROUP BY 1',
    output_mode => 'update', start => false);
CREATE TRIGGER security_leak_delete BEFORE DELETE ON security_leak
    FOR EACH STATEMENT EXECUTE FUNCTION security_own.leak_trigger();
RESET ROLE;
INSERT INTO security_leak_rows VALUES (1, 1), (2, 2), (3, 1);
SELECT (streamwin.run_batch('security_leak')->>'input_rows')::int AS input_rows;
SELECT g, n FROM security_leak ORDER BY g;
SELECT current_setting('search_path') AS after_batch;
SELECT streamwin.reset_query('security_leak', 'latest');
SELECT count(*) AS result_rows FROM security_leak;
SELECT current_setting('search_path') AS after_reset;
SELECT streamwin.drop_query('security_leak', drop_result => true);
SELECT streamwin.drop_source('security_leak_src');
DROP TABLE security_leak_rows;
SET ROLE security_user;
SELECT streamwin.drop_query('security_q', drop_result => true);
-- A cursor over the source's view that the query's own code opens and
-- reads from during a batch, then read after it: refused, rather than read
-- where the batch's rows were (the server crashed)
CREATE FUNCTION security_own.hold_cursor() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    cur refcursor := 'security_peek';
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_cursors WHERE name = 'security_peek') THEN
        OPEN cur FOR SELECT * FROM public.security_src;
        FETCH cur INTO r;
    END IF;
    RETURN true;
END $$;
SELECT streamwin.create_query('security_peek_q',
    'SELECT g, count(*) AS n FROM security_src WHERE security_own.hold_cursor() GROUP BY g',
    output_mode => 'update', start => false);
RESET ROLE;
INSERT INTO security_rows SELECT i, i % 3 FROM generate_series(100, 199) i;
SET ROLE security_user;
BEGIN;
SELECT (streamwin.run_batch('security_peek_q')->>'input_rows')::int AS input_rows;
FETCH ALL FROM security_peek;
ROLLBACK;
SELECT streamwin.drop_query('security_peek_q', drop_result => true);
RESET ROLE;
-- Another role's code that runs in the middle of a batch (a SECURITY
-- DEFINER function of its own, here called by the query) reads nothing of
-- the owner's stream through streamwin.source_rows()
CREATE ROLE security_other;
CREATE TABLE security_seen (rows bigint);
GRANT INSERT ON security_seen TO security_other;
SELECT format('CREATE FUNCTION public.security_other_sees() RETURNS boolean LANGUAGE sql SECURITY DEFINER AS %L',
              format('INSERT INTO public.security_seen SELECT count(*) FROM streamwin.source_rows(%s) AS s(id int, g int); SELECT true',
                     source_id)) AS other_fn
  FROM streamwin.source_catalog WHERE name = 'security_src' \gset
:other_fn;
ALTER FUNCTION public.security_other_sees() OWNER TO security_other;
GRANT EXECUTE ON FUNCTION public.security_other_sees() TO security_user;
SET ROLE security_user;
SELECT streamwin.create_query('security_other_q',
    'SELECT g, count(*) AS n FROM security_src WHERE public.security_other_sees() GROUP BY g',
    output_mode => 'update', start => false);
RESET ROLE;
INSERT INTO security_rows SELECT i, i % 3 FROM generate_series(200, 249) i;
SET ROLE security_user;
SELECT (streamwin.run_batch('security_other_q')->>'input_rows')::int AS input_rows;
SELECT streamwin.drop_query('security_other_q', drop_result => true);
RESET ROLE;
SELECT max(rows) AS other_role_saw FROM security_seen;
DROP FUNCTION public.security_other_sees();
DROP TABLE security_seen;
DROP ROLE security_other;
-- A group key of a type the caller's search_path finds (public here):
-- the state table is made with search_path pinned, its types qualified.
CREATE TYPE security_mood AS ENUM ('sad', 'fine', 'glad');
CREATE TABLE security_moods (id int PRIMARY KEY, mood security_mood, note text COLLATE "C");
SELECT streamwin.create_table_source('security_mood_src', 'security_moods');
SELECT streamwin.create_query('security_moods_q',
    'SELECT mood, note, count(*) AS n FROM security_mood_src GROUP BY mood, note',
    output_mode => 'update', start => false);
INSERT INTO security_moods VALUES (1, 'glad', 'a'), (2, 'glad', 'a'), (3, 'sad', 'b');
SELECT (streamwin.run_batch('security_moods_q')->>'input_rows')::int AS input_rows;
SELECT mood, note, n FROM security_moods_q ORDER BY mood;
SELECT streamwin.drop_query('security_moods_q', drop_result => true);
SELECT streamwin.drop_source('security_mood_src');
DROP TABLE security_moods;
DROP TYPE security_mood;
-- another role's source: its schema registry's login stays out of view,
-- also where the URL holds it
SELECT streamwin.create_kafka_source('security_avro', 'localhost:9092', 'x', 'n bigint', 'avro',
    '{"schema_registry": "https://someone:secretpw@registry.example:8081/", "schema_registry_user": "u",
      "schema_registry_password": "p"}');
SET ROLE security_user;
SELECT options FROM streamwin.sources WHERE name = 'security_avro';
RESET ROLE;
SELECT streamwin.drop_source('security_avro');
-- Kafka properties that use the server's own files or credentials are for
-- roles with the privileges of pg_read_server_files: a key file, and
-- Kerberos (GSSAPI, librdkafka's default SASL mechanism), which
-- authenticates as the server's operating system user
SET ROLE security_user;
SELECT streamwin.create_kafka_source('security_krb', 'localhost:9092', 'x', 'a int',
    options => '{"kafka": {"security.protocol": "sasl_plaintext"}}');
SELECT streamwin.create_kafka_source('security_krb', 'localhost:9092', 'x', 'a int',
    options => '{"kafka": {"security.protocol": "SASL_SSL", "sasl.mechanisms": "GSSAPI"}}');
SELECT streamwin.create_kafka_source('security_key', 'localhost:9092', 'x', 'a int',
    options => '{"kafka": {"ssl.key.location": "/etc/ssl/private/server.key"}}');
SELECT streamwin.create_kafka_source('security_plain', 'localhost:9092', 'x', 'a int',
    options => '{"kafka": {"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
                           "sasl.username": "u", "sasl.password": "p"}}');
SELECT streamwin.drop_source('security_plain');
-- reset_query makes the query's runner as its owner, whoever calls it:
-- making it tries a Debezium source's text-like columns with Debezium's
-- placeholder text, a domain's CHECK included, which may call the owner's
-- function.  Called by a superuser in a new session (no runner kept).
\getenv brokers KAFKA_BROKERS
CREATE FUNCTION security_own.watch(text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RETURN security_own.noted('domain', true);
END $$;
CREATE DOMAIN security_own.watched AS text CHECK (security_own.watch(VALUE));
SELECT streamwin.create_kafka_source('security_dbz', :'brokers', 'regress_values', 'id int, w security_own.watched',
    options => '{"envelope": "debezium"}');
SELECT streamwin.create_query('security_dbz_q', 'SELECT w, count(*) AS n FROM security_dbz GROUP BY w',
    output_mode => 'update', start => false);
\c -
SET timezone = 'UTC';
SELECT streamwin.reset_query('security_dbz_q', 'earliest');
SELECT count(*) AS ran_as_others FROM security_own.ran WHERE who <> 'security_user';
SELECT count(*) > 0 AS checked_by_the_role FROM security_own.ran WHERE how = 'domain';
SELECT streamwin.drop_query('security_dbz_q', drop_result => true);
SELECT streamwin.drop_source('security_dbz');
REVOKE CREATE ON SCHEMA public FROM security_user;
SELECT streamwin.drop_source('security_src');
DROP TABLE security_rows;
DROP SCHEMA security_own CASCADE;
DROP ROLE security_user;
-- A query whose owner was dropped (after REASSIGN OWNED of its tables)
-- says so wherever its code would run as that owner: a batch, a reset,
-- a worker; it can still be dropped.
CREATE ROLE security_gone;
GRANT CREATE ON SCHEMA public TO security_gone;
SET ROLE security_gone;
SELECT streamwin.create_kafka_source('security_gone_src', :'brokers', 'regress_values', 'id int, k text');
SELECT streamwin.create_query('security_gone_q', 'SELECT k, count(*) AS n FROM security_gone_src GROUP BY k',
    output_mode => 'update', start => false);
RESET ROLE;
REASSIGN OWNED BY security_gone TO CURRENT_USER;
DROP OWNED BY security_gone;
DROP ROLE security_gone;
\set VERBOSITY terse
DO $$
BEGIN
    PERFORM streamwin.run_batch('security_gone_q');
EXCEPTION WHEN undefined_object THEN
    RAISE NOTICE 'run_batch: %', regexp_replace(SQLERRM, 'OID [0-9]+', 'OID N');
END $$;
DO $$
BEGIN
    PERFORM streamwin.reset_query('security_gone_q', 'earliest');
EXCEPTION WHEN undefined_object THEN
    RAISE NOTICE 'reset_query: %', regexp_replace(SQLERRM, 'OID [0-9]+', 'OID N');
END $$;
\set VERBOSITY default
SELECT streamwin.drop_query('security_gone_q', drop_result => true);
SELECT streamwin.drop_source('security_gone_src');
