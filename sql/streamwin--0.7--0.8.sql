-- streamwin 0.7 -> 0.8: where each batch's time went; join checkpoints without an index.
--
-- streamwin.progress gets stage_ms: per batch, the milliseconds each stage
-- took (begin, fetch, decode, apply, emit, finish), as Spark's progress
-- reports durationMs, so that a slow batch says whether it waited for its
-- source, decoded, ran its statements or wrote its results.  Batches run
-- before the update have none (NULL).

--
-- A join side's checkpoint is appended to, and written anew once mostly
-- out of reach, rather than having its rows out of reach deleted at every
-- checkpoint: the index on event time that found them costs an insertion
-- per row and serves nothing now, so existing join checkpoints lose it.

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

DO $$
DECLARE
	idx regclass;
BEGIN
	FOR idx IN SELECT i.indexrelid::regclass
				 FROM streamwin.query_sources s
				 JOIN pg_catalog.pg_index i ON i.indrelid = s.join_checkpoint
	LOOP
		EXECUTE pg_catalog.format('DROP INDEX %s', idx);
	END LOOP;
END
$$;
