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
 * - Other roles no longer see a query's text, errors and batches; the
 *   batches move to streamwin.progress_log behind a view.
 * - Decoding no longer depends on the session (option "timezone"), and
 *   now() in a continuous query is the batch's own timestamp.
 * - A query reads a list of sources (streamwin.query_sources): two for a
 *   stream-stream join, each side with its join state.
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

-- The same rows, for a stream-stream join's lookups of new rows in the other
-- side's join table (src/compile_join.c): planned as the few rows a batch
-- usually brings against a large table, so that each is looked up by its
-- keys rather than the table read whole.
CREATE FUNCTION streamwin.join_batch_rows(source_id integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamwin_source_rows'
LANGUAGE C STRICT VOLATILE ROWS 100;

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

-- Privacy: another role no longer sees a query's text and errors in
-- streamwin.queries, nor its batches in streamwin.progress; its owner's
-- roles and members of pg_read_all_stats do, as in pg_stat_activity.  The
-- batches move to streamwin.progress_log (rows, index and registration for
-- pg_dump go with the rename), which only streamwin reads and writes, and
-- streamwin.progress becomes a view with the same columns.
ALTER TABLE streamwin.progress RENAME TO progress_log;
ALTER INDEX streamwin.progress_pkey RENAME TO progress_log_pkey;
REVOKE ALL ON streamwin.progress_log FROM PUBLIC;

-- Per batch, how many messages lacked the JSON key of each column (NULL:
-- none), so that a column name that matches no key shows.
ALTER TABLE streamwin.progress_log ADD COLUMN missing_keys jsonb;

CREATE VIEW streamwin.progress WITH (security_barrier) AS
SELECT p.query, p.batch_id, p.started_at, p.duration_ms, p.input_rows,
	   p.input_rows_per_second, p.processed_rows_per_second, p.late_rows_dropped,
	   p.duplicates_dropped, p.dead_letters, p.state_rows, p.watermark, p.offsets,
	   p.missing_keys
FROM streamwin.progress_log p
JOIN streamwin.query_catalog q ON q.name = p.query
WHERE pg_catalog.pg_has_role(q.owner, 'USAGE')
   OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE');
GRANT SELECT ON streamwin.progress TO PUBLIC;

-- A query reads a list of sources (two for a stream-stream join), in
-- streamwin.query_sources; query_catalog's source_id and start_lsn move
-- there as each query's source 0.  Positions and checkpoints are per
-- source, and late rows say which source they came from.
CREATE TABLE streamwin.query_sources (
	query_id	integer NOT NULL REFERENCES streamwin.query_catalog ON DELETE CASCADE,
	source_index integer NOT NULL,
	source_id	integer NOT NULL REFERENCES streamwin.source_catalog,
	start_lsn	bigint,
	join_table	regclass,
	join_checkpoint regclass,
	PRIMARY KEY (query_id, source_index)
);
CREATE INDEX ON streamwin.query_sources (source_id);
SELECT pg_catalog.pg_extension_config_dump('streamwin.query_sources', '');
REVOKE ALL ON streamwin.query_sources FROM PUBLIC;
INSERT INTO streamwin.query_sources (query_id, source_index, source_id, start_lsn)
SELECT query_id, 0, source_id, start_lsn FROM streamwin.query_catalog;

ALTER TABLE streamwin.query_offsets ADD COLUMN source_index integer NOT NULL DEFAULT 0;
ALTER TABLE streamwin.query_offsets DROP CONSTRAINT query_offsets_pkey,
	ADD PRIMARY KEY (query_id, source_index, partition);
ALTER TABLE streamwin.query_checkpoints ADD COLUMN source_index integer NOT NULL DEFAULT 0;
ALTER TABLE streamwin.query_checkpoints DROP CONSTRAINT query_checkpoints_pkey,
	ADD PRIMARY KEY (query_id, source_index, partition);

DROP VIEW streamwin.late_rows;
ALTER TABLE streamwin.late_row_log ADD COLUMN source text;
UPDATE streamwin.late_row_log l SET source = s.name
  FROM streamwin.query_catalog q JOIN streamwin.source_catalog s USING (source_id)
 WHERE q.name = l.query;
-- rows of queries dropped before 0.4 removed them with the query
DELETE FROM streamwin.late_row_log WHERE source IS NULL;
ALTER TABLE streamwin.late_row_log ALTER COLUMN source SET NOT NULL,
	DROP CONSTRAINT late_row_log_pkey,
	ADD PRIMARY KEY (query, source, partition, "offset");
CREATE VIEW streamwin.late_rows WITH (security_barrier) AS
SELECT l.query, l.source, l.partition, l."offset", l.payload, l.event_time, l.watermark, l.at
FROM streamwin.late_row_log l
JOIN streamwin.query_catalog q ON q.name = l.query
WHERE pg_catalog.pg_has_role(q.owner, 'USAGE');
GRANT SELECT ON streamwin.late_rows TO PUBLIC;
-- what a reader's own condition sees of dead letters: its own sources' only
ALTER VIEW streamwin.dead_letters SET (security_barrier);

DROP VIEW streamwin.queries;
ALTER TABLE streamwin.query_catalog DROP COLUMN source_id, DROP COLUMN start_lsn;
CREATE VIEW streamwin.queries AS
SELECT q.name,
	   -- a join's sources in the order of its FROM clause
	   (SELECT pg_catalog.string_agg(s.name, ', ' ORDER BY qs.source_index)
		  FROM streamwin.query_sources qs
		  JOIN streamwin.source_catalog s ON s.source_id = qs.source_id
		 WHERE qs.query_id = q.query_id) AS source,
	   CASE WHEN q.desired_state = 'stopped' THEN 'stopped'
			WHEN q.status = 'failed' THEN 'failed'
			ELSE 'running' END AS state,
	   streamwin.worker_pid(q.query_id) AS worker_pid,
	   q.last_batch_id,
	   q.watermark,
	   (SELECT sum(GREATEST(o.high_watermark - o.next_offset, 0))::bigint
		  FROM streamwin.query_offsets o
		 WHERE o.query_id = q.query_id) AS lag,
	   -- the text of a query and of its errors (which may quote the query
	   -- and its data) for its owner's roles and pg_read_all_stats only,
	   -- as pg_stat_activity shows query texts
	   CASE WHEN pg_catalog.pg_has_role(q.owner, 'USAGE')
				 OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE') THEN q.last_error
			WHEN q.last_error IS NOT NULL THEN '<insufficient privilege>' END AS last_error,
	   q.last_error_at,
	   q.last_batch_at,
	   q.output_mode,
	   q.watermark_delay,
	   q.trigger_interval,
	   q.result_table,
	   q.state_table,
	   q.owner,
	   CASE WHEN pg_catalog.pg_has_role(q.owner, 'USAGE')
				 OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE') THEN q.query
			ELSE '<insufficient privilege>' END AS query
FROM streamwin.query_catalog q;
GRANT SELECT ON streamwin.queries TO PUBLIC;

-- Decoding no longer depends on the session: a source's batches run in the
-- zone of its option "timezone" (recorded at creation, default UTC), which
-- streamwin.sources shows.  Existing sources keep the zone their workers
-- used, taken as the TimeZone of the session that runs this update.
UPDATE streamwin.source_catalog
   SET options = options OPERATOR(pg_catalog.||)
				 pg_catalog.jsonb_build_object('timezone', pg_catalog.current_setting('TimeZone'))
 WHERE NOT options OPERATOR(pg_catalog.?) 'timezone';

CREATE OR REPLACE VIEW streamwin.sources AS
SELECT s.name, s.kind, s.brokers, s.topic, s.format, s.columns,
	   -- librdkafka properties may hold credentials: only the owner sees them
	   CASE WHEN pg_catalog.pg_has_role(s.owner, 'USAGE') THEN s.options
			ELSE s.options - 'kafka' END AS options,
	   s.relation,
	   s.source_table,
	   s.slot_name,
	   -- bytes of WAL a table source's slot keeps from being removed
	   CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), r.restart_lsn)::bigint
	   END AS retained_wal,
	   s.owner, s.created_at,
	   -- the zone of the source's batches: of timestamps without an offset
	   s.options ->> 'timezone' AS timezone
FROM streamwin.source_catalog s
LEFT JOIN pg_catalog.pg_replication_slots r ON r.slot_name = s.slot_name;

-- The batch's own timestamp, its processing time: what now(),
-- current_timestamp and their kin in a continuous query stand for
-- (create_query rewrites them into calls of this), recorded with the batch
-- as streamwin.progress.started_at and seen again when a crash makes a
-- batch replay.  Outside a batch it is now().
CREATE FUNCTION streamwin.batch_timestamp()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'streamwin_batch_timestamp'
LANGUAGE C STABLE PARALLEL RESTRICTED;
