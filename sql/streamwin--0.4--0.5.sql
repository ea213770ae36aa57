/* streamwin 0.4 -> 0.5
 *
 * - Queries created from 0.5 on keep their open groups in a state store in
 *   the worker's memory (src/state_store.c), which writes only the changed
 *   rows of the state and result tables; streamwin.store_rows() gives the
 *   statements the store's groups.  Queries created before keep running
 *   their SQL statements.
 * - Creating a table source is a privilege.  A table source's replication
 *   slot keeps WAL for as long as its queries lag, so its creation is kept,
 *   as PostgreSQL keeps every slot's, to superusers and REPLICATION roles,
 *   and to roles an administrator grants EXECUTE on
 *   streamwin.create_table_source_slot(), which creates every slot of a
 *   table source and which PUBLIC may not execute.  The launcher warns
 *   about a table source whose slot retains more WAL than
 *   streamwin.retained_wal_warning, at most every 5 minutes
 *   (source_catalog.wal_warned_at).
 * - Names of queries and sources follow PostgreSQL's rule (below).
 */

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.5'" to load this file. \quit

-- Names of queries and sources follow PostgreSQL's rule for a table name
-- (as regclass reads one): unquoted parts fold to lower case, quoted parts
-- keep their case, and the catalog records the name quoted where needed,
-- as regclass shows a relation.  Before, a name was recorded as written:
-- create_query('MixedCase') named its result table mixedcase but the query
-- MixedCase, which stop_query('mixedcase') did not find.  Such names are
-- recorded in the new form now, which is their table's name, here and in
-- the tables that refer to them by name.  A name whose new form another
-- query (or source) has already keeps its spelling; the functions find a
-- name as written before they fold it, so it stays reachable.
CREATE FUNCTION streamwin.canonical_name(name text) RETURNS text
AS 'MODULE_PATHNAME', 'streamwin_canonical_name'
LANGUAGE C STRICT IMMUTABLE;

DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT query_id, name, streamwin.canonical_name(name) AS canonical
			   FROM streamwin.query_catalog ORDER BY query_id
	LOOP
		IF r.canonical IS NOT NULL AND r.canonical <> r.name AND
		   NOT EXISTS (SELECT FROM streamwin.query_catalog WHERE name = r.canonical) THEN
			-- rows under the new name belong to no query (dropped ones leave none)
			DELETE FROM streamwin.progress WHERE query = r.canonical;
			DELETE FROM streamwin.late_row_log WHERE query = r.canonical;
			UPDATE streamwin.progress SET query = r.canonical WHERE query = r.name;
			UPDATE streamwin.late_row_log SET query = r.canonical WHERE query = r.name;
			UPDATE streamwin.query_catalog SET name = r.canonical WHERE query_id = r.query_id;
		END IF;
	END LOOP;
	FOR r IN SELECT source_id, name, streamwin.canonical_name(name) AS canonical
			   FROM streamwin.source_catalog ORDER BY source_id
	LOOP
		IF r.canonical IS NOT NULL AND r.canonical <> r.name AND
		   NOT EXISTS (SELECT FROM streamwin.source_catalog WHERE name = r.canonical) THEN
			DELETE FROM streamwin.dead_letter_log WHERE source = r.canonical;
			UPDATE streamwin.dead_letter_log SET source = r.canonical WHERE source = r.name;
			UPDATE streamwin.source_catalog SET name = r.canonical WHERE source_id = r.source_id;
		END IF;
	END LOOP;
END $$;

DROP FUNCTION streamwin.canonical_name(text);

-- The groups a continuous query's state store writes to its result
-- (src/state_store.c), as rows of its state table; what its compiled
-- statements read.  Outside a batch of the query it returns no rows.
CREATE FUNCTION streamwin.store_rows(query_id integer, which text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamwin_store_rows'
LANGUAGE C STRICT VOLATILE ROWS 1000;

-- Creates the replication slot of a table source, for create_table_source
-- (and for reset_query, replacing a slot that PostgreSQL invalidated), and
-- refuses any other call.  EXECUTE on it is the privilege to create table
-- sources: a slot keeps WAL for as long as its queries lag, so, as
-- PostgreSQL does for every slot, PUBLIC may not.  Superusers and roles
-- with REPLICATION may without it; an administrator allows another role
-- with GRANT EXECUTE ON FUNCTION streamwin.create_table_source_slot() TO it.
CREATE FUNCTION streamwin.create_table_source_slot()
RETURNS text
AS 'MODULE_PATHNAME', 'streamwin_create_table_source_slot'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION streamwin.create_table_source_slot() FROM PUBLIC;

-- table sources: when the launcher last warned that the slot retains more
-- WAL than streamwin.retained_wal_warning (NULL: not over it)
ALTER TABLE streamwin.source_catalog ADD COLUMN wal_warned_at timestamptz;
