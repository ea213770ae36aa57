-- streamwin 0.7 -> 0.8: where each batch's time went.
--
-- streamwin.progress gets stage_ms: per batch, the milliseconds each stage
-- took (begin, fetch, decode, apply, emit, finish), as Spark's progress
-- reports durationMs, so that a slow batch says whether it waited for its
-- source, decoded, ran its statements or wrote its results.  Batches run
-- before the update have none (NULL).

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.8'" to load this file. \quit

ALTER TABLE streamwin.progress_log ADD COLUMN stage_ms jsonb;

CREATE OR REPLACE VIEW streamwin.progress WITH (security_barrier) AS
SELECT p.query, p.batch_id, p.started_at, p.duration_ms, p.input_rows,
	   p.input_rows_per_second, p.processed_rows_per_second, p.late_rows_dropped,
	   p.duplicates_dropped, p.dead_letters, p.state_rows, p.watermark, p.offsets,
	   p.missing_keys, p.late_retractions_dropped, p.stage_ms
FROM streamwin.progress_log p
JOIN streamwin.query_catalog q ON q.name = p.query
WHERE pg_catalog.pg_has_role(q.owner, 'USAGE')
   OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE');
