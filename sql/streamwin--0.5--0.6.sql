-- streamwin 0.5 -> 0.6: changelog sources.
--
-- A source may now be a changelog (a table source with "changes": "all",
-- a Kafka source with an envelope): its rows are added and retracted.
-- Queries over one retract exactly: min, max and DISTINCT aggregates keep
-- counted values (streamwin.change_set and its functions), and each batch
-- records how many of its late rows were retractions.

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.6'" to load this file. \quit

ALTER TABLE streamwin.progress_log
	ADD COLUMN late_retractions_dropped bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE VIEW streamwin.progress WITH (security_barrier) AS
SELECT p.query, p.batch_id, p.started_at, p.duration_ms, p.input_rows,
	   p.input_rows_per_second, p.processed_rows_per_second, p.late_rows_dropped,
	   p.duplicates_dropped, p.dead_letters, p.state_rows, p.watermark, p.offsets,
	   p.missing_keys, p.late_retractions_dropped
FROM streamwin.progress_log p
JOIN streamwin.query_catalog q ON q.name = p.query
WHERE pg_catalog.pg_has_role(q.owner, 'USAGE')
   OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE');

-- Counted values (src/store/change_set.c): what min, max and DISTINCT
-- aggregates keep per open group over a changelog source, each distinct
-- value with the number of rows that hold it, so that a retracted row takes
-- back exactly its value.
CREATE FUNCTION streamwin.change_set_accum(internal, anyelement, smallint)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_change_set_accum'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION streamwin.change_set_final(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_change_set_final'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE streamwin.change_set(x anyelement, change smallint) (
	SFUNC = streamwin.change_set_accum,
	STYPE = internal,
	FINALFUNC = streamwin.change_set_final
);

CREATE FUNCTION streamwin.change_set_merge(a bytea, b bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_change_set_merge'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION streamwin.change_set_min(set bytea, type anyelement)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'streamwin_change_set_min'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION streamwin.change_set_max(set bytea, type anyelement)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'streamwin_change_set_max'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION streamwin.change_set_values(set bytea, type anyelement)
RETURNS anyarray
AS 'MODULE_PATHNAME', 'streamwin_change_set_values'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE PARALLEL SAFE;

-- The square root of v rounded to v's own scale, half up: what a standard
-- deviation is in PostgreSQL (the root of the variance, at the variance's
-- scale), from a variance computed over a changelog's signed sums.  sqrt()
-- rounds at a scale of its own, which may be finer; rounding that again
-- could round twice, so the result is checked against the exact squares
-- of the bounds of its rounding interval.
CREATE FUNCTION streamwin.rounded_sqrt(v numeric)
RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
SELECT pg_catalog.round(CASE WHEN (r.root + r.half) * (r.root + r.half) <= v THEN r.root + 2 * r.half
							 WHEN (r.root - r.half) * (r.root - r.half) > v THEN r.root - 2 * r.half
							 ELSE r.root END, pg_catalog.scale(v))
FROM (SELECT pg_catalog.round(pg_catalog.sqrt(v), pg_catalog.scale(v)) AS root,
			 0.5 / pg_catalog.power(10::pg_catalog.numeric, pg_catalog.scale(v)) AS half) AS r
$$;

-- A query's batches run as its owner, who owns its dedup table
-- (create_query_table in src/compile/compile_sql.c).  0.1 and 0.2 gave the
-- dedup table of a query created by any other role than the extension
-- owner to the extension owner instead (dedup_statements read the current
-- role after switching to the extension owner), so that every batch of the
-- query failed with "permission denied for table dedup_N".  0.3 fixed new
-- queries only: such a query went on failing after every update.  Its
-- table goes to its owner here.
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT n.nspname, c.relname, o.rolname
			   FROM streamwin.query_catalog q
			   JOIN pg_catalog.pg_class c ON c.oid = q.dedup_table::pg_catalog.oid
			   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			   JOIN pg_catalog.pg_roles o ON o.oid = q.owner::pg_catalog.oid
			  WHERE c.relowner <> o.oid
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %I.%I OWNER TO %I', r.nspname, r.relname, r.rolname);
	END LOOP;
END $$;
