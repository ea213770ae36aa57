/* streamwin 0.1 -> 0.2: table sources.
 *
 * A table source reads the rows inserted into a table through a logical
 * replication slot of its own (source_catalog.source_table, slot_name); a
 * query's position in it is an LSN plus the number of rows of that
 * transaction already processed (query_offsets.next_index, kept in
 * checkpoints too), and its start when it has no position yet
 * (query_catalog.start_lsn).  Columns are added at the end here, where a
 * fresh 0.2 install has them elsewhere: streamwin names every column it
 * reads or writes.
 */

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.2'" to load this file. \quit

ALTER TABLE streamwin.source_catalog
	ADD COLUMN source_table oid,
	ADD COLUMN slot_name text UNIQUE;
ALTER TABLE streamwin.query_catalog ADD COLUMN start_lsn bigint;
ALTER TABLE streamwin.query_offsets ADD COLUMN next_index bigint NOT NULL DEFAULT 0;
ALTER TABLE streamwin.query_checkpoints ADD COLUMN next_index bigint NOT NULL DEFAULT 0;

CREATE FUNCTION streamwin.create_table_source(name text, relation regclass,
	options jsonb DEFAULT '{}')
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_create_table_source'
LANGUAGE C VOLATILE;

-- The view gains two columns before "owner": replaced, with its grant.
DROP VIEW streamwin.sources;
CREATE VIEW streamwin.sources AS
SELECT s.name, s.kind, s.brokers, s.topic, s.format, s.columns,
	   -- librdkafka properties may hold credentials: only the owner sees them
	   CASE WHEN pg_catalog.pg_has_role(s.owner, 'USAGE') THEN s.options
			ELSE s.options - 'kafka' END AS options,
	   s.relation::regclass AS relation,
	   s.source_table::regclass AS source_table,
	   s.slot_name,
	   -- bytes of WAL a table source's slot keeps from being removed
	   CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), r.restart_lsn)::bigint
	   END AS retained_wal,
	   s.owner::regrole AS owner, s.created_at
FROM streamwin.source_catalog s
LEFT JOIN pg_catalog.pg_replication_slots r ON r.slot_name = s.slot_name;
GRANT SELECT ON streamwin.sources TO PUBLIC;
