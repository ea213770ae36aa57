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
SELECT streamwin.reset_query('security_q', 'earliest');
SELECT count(*) AS ran_as_others FROM security_own.ran WHERE who <> 'security_user';
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
SELECT streamwin.drop_query('security_q', drop_result => true);
RESET ROLE;
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
REVOKE CREATE ON SCHEMA public FROM security_user;
SELECT streamwin.drop_source('security_src');
DROP TABLE security_rows;
DROP SCHEMA security_own CASCADE;
DROP ROLE security_user;
