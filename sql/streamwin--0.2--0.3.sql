/* streamwin 0.2 -> 0.3: catalogs that survive pg_dump and restore.
 *
 * The catalog referred to relations and roles by oid, which a restore does
 * not keep: a restored query pointed at tables that did not exist ("could
 * not open relation with OID ...").  Those columns become regclass and
 * regrole, which pg_dump writes by name; the dedup tables' oids move from
 * the compiled plan into columns of their own; and the tables a recovery
 * needs (state_alive, progress) are dumped too.  Checkpoint tables leave
 * autovacuum (see checkpoint_create_table in src/checkpoint.c).  New:
 * streamwin.alter_query(name, trigger_interval, idle_timeout), and CALL
 * streamwin.catch_up(name), run_available committing each batch.
 *
 * Every view reading an altered column is dropped first and created again
 * as in a fresh 0.3 install, with its grant.
 */

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.3'" to load this file. \quit

DROP VIEW streamwin.sources, streamwin.queries, streamwin.dead_letters, streamwin.late_rows;

ALTER TABLE streamwin.source_catalog
	ALTER COLUMN relation TYPE regclass USING relation::regclass,
	ALTER COLUMN source_table TYPE regclass USING source_table::regclass,
	ALTER COLUMN owner TYPE regrole USING owner::regrole;
ALTER TABLE streamwin.query_catalog
	ALTER COLUMN owner TYPE regrole USING owner::regrole,
	ALTER COLUMN result_table TYPE regclass USING result_table::regclass,
	ALTER COLUMN state_table TYPE regclass USING state_table::regclass,
	ALTER COLUMN checkpoint_table TYPE regclass USING checkpoint_table::regclass,
	ADD COLUMN dedup_table regclass,
	ADD COLUMN dedup_checkpoint regclass;
UPDATE streamwin.query_catalog
   SET dedup_table = (plan->>'dedup_table')::oid::regclass,
       dedup_checkpoint = (plan->>'dedup_checkpoint')::oid::regclass,
       plan = plan - 'dedup_table' - 'dedup_checkpoint'
 WHERE plan ? 'dedup_table';

-- Checkpoint tables are replaced whole by every checkpoint: autovacuum has
-- nothing to do there but ANALYZE them again and again (new ones are
-- created so).
DO $$
DECLARE
	t regclass;
BEGIN
	FOR t IN SELECT checkpoint_table FROM streamwin.query_catalog WHERE checkpoint_table IS NOT NULL
			 UNION ALL
			 SELECT dedup_checkpoint FROM streamwin.query_catalog WHERE dedup_checkpoint IS NOT NULL
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)', t);
	END LOOP;
END
$$;

-- Change how often a query runs and how long an idle partition holds its
-- watermark back, keeping its state and positions; NULL keeps a setting.
CREATE FUNCTION streamwin.alter_query(name text, trigger_interval interval DEFAULT NULL,
	idle_timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_alter_query'
LANGUAGE C VOLATILE;

-- run_available with a commit after each batch, as in a worker: for a
-- backlog too large for one transaction.  CALL it outside a transaction.
CREATE PROCEDURE streamwin.catch_up(name text, INOUT totals jsonb DEFAULT NULL)
AS 'MODULE_PATHNAME', 'streamwin_catch_up'
LANGUAGE C;

SELECT pg_catalog.pg_extension_config_dump('streamwin.state_alive', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.progress', '');

CREATE VIEW streamwin.sources AS
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
	   s.owner, s.created_at
FROM streamwin.source_catalog s
LEFT JOIN pg_catalog.pg_replication_slots r ON r.slot_name = s.slot_name;

CREATE VIEW streamwin.queries AS
SELECT q.name,
	   s.name AS source,
	   CASE WHEN q.desired_state = 'stopped' THEN 'stopped'
			WHEN q.status = 'failed' THEN 'failed'
			ELSE 'running' END AS state,
	   streamwin.worker_pid(q.query_id) AS worker_pid,
	   q.last_batch_id,
	   q.watermark,
	   (SELECT sum(GREATEST(o.high_watermark - o.next_offset, 0))::bigint
		  FROM streamwin.query_offsets o
		 WHERE o.query_id = q.query_id) AS lag,
	   q.last_error,
	   q.last_error_at,
	   q.last_batch_at,
	   q.output_mode,
	   q.watermark_delay,
	   q.trigger_interval,
	   q.result_table,
	   q.state_table,
	   q.owner,
	   q.query
FROM streamwin.query_catalog q
JOIN streamwin.source_catalog s USING (source_id);

CREATE VIEW streamwin.dead_letters AS
SELECT d.source, d.partition, d."offset", d.payload, d.error, d.at
FROM streamwin.dead_letter_log d
JOIN streamwin.source_catalog s ON s.name = d.source
WHERE pg_catalog.pg_has_role(s.owner, 'USAGE');

CREATE VIEW streamwin.late_rows AS
SELECT l.query, l.partition, l."offset", l.payload, l.event_time, l.watermark, l.at
FROM streamwin.late_row_log l
JOIN streamwin.query_catalog q ON q.name = l.query
WHERE pg_catalog.pg_has_role(q.owner, 'USAGE');

GRANT SELECT ON streamwin.sources, streamwin.queries, streamwin.dead_letters,
	streamwin.late_rows TO PUBLIC;
