/* streamwin 0.4 -> 0.5
 */

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.5'" to load this file. \quit

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

CREATE OR REPLACE VIEW streamwin.queries AS
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
FROM streamwin.query_catalog q
JOIN streamwin.source_catalog s USING (source_id);

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
