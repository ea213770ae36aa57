-- streamwin 0.6 -> 0.7: Avro sources and their schema registry.
--
-- A Kafka source may read Avro (format 'avro'), by writer schemas that a
-- schema registry gives by id: each is kept in streamwin.avro_schemas, so
-- that a replay or a restart never needs the registry for an id it has
-- seen.  The registry's login, in the source's options, is shown only to
-- the source owner's roles, like the librdkafka properties.

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.7'" to load this file. \quit

CREATE TABLE streamwin.avro_schemas (
	source_id	integer NOT NULL REFERENCES streamwin.source_catalog ON DELETE CASCADE,
	schema_id	integer NOT NULL,
	schema		text NOT NULL,
	fetched_at	timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, schema_id)
);
SELECT pg_catalog.pg_extension_config_dump('streamwin.avro_schemas', '');
REVOKE ALL ON streamwin.avro_schemas FROM PUBLIC;

CREATE OR REPLACE VIEW streamwin.sources AS
SELECT s.name, s.kind, s.brokers, s.topic, s.format, s.columns,
	   -- librdkafka properties and the schema registry's login may hold
	   -- credentials: only the owner sees them
	   CASE WHEN pg_catalog.pg_has_role(s.owner, 'USAGE') THEN s.options
			ELSE s.options - ARRAY['kafka', 'schema_registry_user', 'schema_registry_password']
	   END AS options,
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
