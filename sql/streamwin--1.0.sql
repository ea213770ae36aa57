/* streamwin 0.9: catalog, observability views and the SQL interface.
 *
 * Everything is schema-qualified: the extension lives in schema streamwin
 * (relocatable = false).  Catalog tables are written only by streamwin's C
 * functions, which switch to the extension owner for that bookkeeping;
 * users read them through the views below.  Catalog tables are registered
 * with pg_extension_config_dump so pg_dump keeps sources, queries, offsets,
 * checkpoints and the batch log.
 *
 * Relations and roles are referenced as regclass and regrole, not oid:
 * pg_dump writes them by name and a restore reads them back as the new
 * objects' oids (pg_upgrade keeps both kinds of oid, so it accepts them).
 */

\echo Use "CREATE EXTENSION streamwin" to load this file. \quit

-- Sources: a Kafka topic, or the rows inserted into a table (read through
-- logical decoding from the replication slot slot_name), plus the column
-- list its messages decode into.  "relation" is the view users and queries
-- reference by the source's name; source_table is the table a table source
-- reads.  Options may hold secrets
-- (kafka.sasl.password, ...), so this table is not readable by PUBLIC.
CREATE TABLE streamwin.source_catalog (
	source_id	serial PRIMARY KEY,
	name		text NOT NULL UNIQUE,
	relation	regclass NOT NULL,
	kind		text NOT NULL CHECK (kind IN ('kafka', 'table')),
	brokers		text,
	topic		text,
	source_table regclass,
	slot_name	text UNIQUE,
	format		text NOT NULL,
	columns		text NOT NULL,
	options		jsonb NOT NULL DEFAULT '{}',
	owner		regrole NOT NULL,
	created_at	timestamptz NOT NULL DEFAULT now(),
	-- table sources: when the launcher last warned that the slot retains
	-- more WAL than streamwin.retained_wal_warning (NULL: not over it)
	wal_warned_at timestamptz
);

-- Continuous queries and their compiled batch plan.  "plan" holds the SQL
-- statements and the event-time expression produced by create_query; the
-- worker prepares them once and reuses them for every batch.
CREATE TABLE streamwin.query_catalog (
	query_id	serial PRIMARY KEY,
	name		text NOT NULL UNIQUE,
	owner		regrole NOT NULL,
	query		text NOT NULL,
	watermark_delay interval,
	output_mode	text NOT NULL CHECK (output_mode IN ('append', 'update', 'complete')),
	trigger_interval interval NOT NULL,
	dedup_keys	text[],
	options		jsonb NOT NULL DEFAULT '{}',
	result_table regclass NOT NULL,
	state_table	regclass,
	plan		jsonb NOT NULL,
	desired_state text NOT NULL CHECK (desired_state IN ('running', 'stopped')),
	status		text NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'failed')),
	last_batch_id bigint NOT NULL DEFAULT 0,
	last_batch_at timestamptz,
	watermark	timestamptz,
	last_error	text,
	last_error_at timestamptz,
	consecutive_failures integer NOT NULL DEFAULT 0,
	-- crash recovery (see "Checkpoints" below)
	checkpoint_table regclass,
	checkpoint_batch_id bigint,
	checkpoint_watermark timestamptz,
	state_batch_id bigint NOT NULL DEFAULT 0,
	-- deduplicating queries: their keys (UNLOGGED) and its checkpoint
	dedup_table	regclass,
	dedup_checkpoint regclass,
	created_at	timestamptz NOT NULL DEFAULT now()
);

-- The sources a query reads, numbered from 0 in the order its FROM clause
-- names them: one, or the two sides of a stream-stream join.  start_lsn: for
-- a table source, the LSN the query starts from when it has no offsets, and
-- snapshot_xid the transaction that set it: over a changelog, the one whose
-- logical messages are the table's rows at the start (no other
-- transaction's messages are taken for them).  A join keeps each side's
-- rows that can still match in join_table (UNLOGGED), copied at
-- checkpoints into join_checkpoint.
CREATE TABLE streamwin.query_sources (
	query_id	integer NOT NULL REFERENCES streamwin.query_catalog ON DELETE CASCADE,
	source_index integer NOT NULL,
	source_id	integer NOT NULL REFERENCES streamwin.source_catalog,
	start_lsn	bigint,
	join_table	regclass,
	join_checkpoint regclass,
	snapshot_xid xid8,
	PRIMARY KEY (query_id, source_index)
);
CREATE INDEX ON streamwin.query_sources (source_id);

-- Per query, source and partition: the next offset to read, and what the
-- watermark needs.  Written in the same transaction as the batch results.
-- A table source has one partition, 0, whose position is an LSN: the next
-- row is row number next_index (from 0) of the first transaction that
-- commits at or after next_offset (next_index is 0 except when a batch
-- ended inside a transaction larger than max_records_per_batch).
CREATE TABLE streamwin.query_offsets (
	query_id	integer NOT NULL REFERENCES streamwin.query_catalog ON DELETE CASCADE,
	source_index integer NOT NULL DEFAULT 0,
	partition	integer NOT NULL,
	next_offset	bigint NOT NULL,
	next_index	bigint NOT NULL DEFAULT 0,
	max_event_time timestamptz,
	last_data_at timestamptz NOT NULL,
	high_watermark bigint,
	PRIMARY KEY (query_id, source_index, partition)
);

-- Checkpoints.  A crash (any backend killed, an immediate shutdown) empties
-- every UNLOGGED table, so the open state of each query is copied every
-- streamwin.checkpoint_interval batches into a logged table
-- (query_catalog.checkpoint_table), in the batch's transaction, together
-- with the positions below.  state_alive, itself UNLOGGED, holds a row per
-- query whose state is intact: after a crash it is empty, and the next batch
-- restores the checkpoint and replays the batches committed since, each with
-- the end offsets and watermark recorded in streamwin.progress, so the
-- replay makes exactly the decisions the original run made.
CREATE TABLE streamwin.query_checkpoints (
	query_id	integer NOT NULL REFERENCES streamwin.query_catalog ON DELETE CASCADE,
	source_index integer NOT NULL DEFAULT 0,
	partition	integer NOT NULL,
	next_offset	bigint NOT NULL,
	next_index	bigint NOT NULL DEFAULT 0,
	max_event_time timestamptz,
	last_data_at timestamptz NOT NULL,
	PRIMARY KEY (query_id, source_index, partition)
);

CREATE UNLOGGED TABLE streamwin.state_alive (
	query_id	integer PRIMARY KEY
);

-- Recent batches, one row each, written in the batch's transaction.  Old rows
-- are trimmed to streamwin.progress_retention batches per query, but never
-- those after the query's checkpoint: recovery replays them.  Users read
-- them through the view streamwin.progress, each role its own queries' rows.
CREATE TABLE streamwin.progress_log (
	query		text NOT NULL,
	batch_id	bigint NOT NULL,
	started_at	timestamptz NOT NULL,
	duration_ms	double precision NOT NULL,
	input_rows	bigint NOT NULL,
	input_rows_per_second double precision,
	processed_rows_per_second double precision,
	late_rows_dropped bigint NOT NULL,
	duplicates_dropped bigint NOT NULL DEFAULT 0,
	dead_letters bigint NOT NULL,
	state_rows	bigint NOT NULL,
	watermark	timestamptz,
	offsets		jsonb NOT NULL,
	-- per column, how many messages lacked its JSON key (NULL: none did)
	missing_keys jsonb,
	-- of the late rows, those a changelog retracts (old versions, deletes)
	late_retractions_dropped bigint NOT NULL DEFAULT 0,
	-- where the batch's time went: milliseconds per stage (NULL: a batch
	-- of a version before 0.8)
	stage_ms	jsonb,
	PRIMARY KEY (query, batch_id)
);

-- Messages that could not be decoded or converted.  Keyed by position, so a
-- message read by several queries is recorded once.  Payloads are user
-- data: roles see them through the views below, for their own sources only.
CREATE TABLE streamwin.dead_letter_log (
	source		text NOT NULL,
	partition	integer NOT NULL,
	"offset"	bigint NOT NULL,
	payload		bytea,
	error		text NOT NULL,
	at			timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source, partition, "offset")
);

-- Late rows of queries created with options => '{"capture_late_rows": true}':
-- rows that arrived behind the watermark, kept instead of only counted.
CREATE TABLE streamwin.late_row_log (
	query		text NOT NULL,
	source		text NOT NULL,
	partition	integer NOT NULL,
	"offset"	bigint NOT NULL,
	payload		bytea,
	event_time	timestamptz NOT NULL,
	watermark	timestamptz NOT NULL,
	at			timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (query, source, partition, "offset")
);

-- The Avro writer schemas of sources read through a schema registry, by
-- the registry's schema id: fetched once, in the transaction of the batch
-- that first met the id, so that a replay or a restart never needs the
-- registry for an id it has seen.
CREATE TABLE streamwin.avro_schemas (
	source_id	integer NOT NULL REFERENCES streamwin.source_catalog ON DELETE CASCADE,
	schema_id	integer NOT NULL,
	schema		text NOT NULL,
	fetched_at	timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (source_id, schema_id)
);

SELECT pg_catalog.pg_extension_config_dump('streamwin.source_catalog', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.source_catalog_source_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.query_catalog', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.query_catalog_query_id_seq', '');
-- DROP EXTENSION leaves the schema: if an earlier installation left query
-- tables in it (state_N, checkpoint_N, ...; before 0.4 they did not depend
-- on the extension), number new queries after them rather than into them.
SELECT pg_catalog.setval('streamwin.query_catalog_query_id_seq', n)
  FROM (SELECT max((pg_catalog.regexp_match(relname, '_([0-9]+)$'))[1]::integer) AS n
          FROM pg_catalog.pg_class
         WHERE relnamespace = 'streamwin'::regnamespace
           AND relname ~ '^(checkpoint_)?(state|checkpoint|dedup|join_left|join_right|upsert)_[0-9]+$') AS left_behind
 WHERE n IS NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('streamwin.query_sources', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.query_offsets', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.query_checkpoints', '');
-- with the state tables (UNLOGGED, like it; pg_dump --no-unlogged-table-data
-- leaves out both), and the batches a recovery from a checkpoint replays
SELECT pg_catalog.pg_extension_config_dump('streamwin.state_alive', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.progress_log', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.dead_letter_log', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.late_row_log', '');
SELECT pg_catalog.pg_extension_config_dump('streamwin.avro_schemas', '');

REVOKE ALL ON streamwin.source_catalog, streamwin.query_catalog, streamwin.query_sources,
	streamwin.query_offsets, streamwin.query_checkpoints, streamwin.state_alive,
	streamwin.dead_letter_log, streamwin.late_row_log, streamwin.progress_log,
	streamwin.avro_schemas FROM PUBLIC;

-- The rows of the batch being processed by this backend for a source: the
-- body of every source view.  Outside a batch it returns no rows, so a
-- source can be queried and EXPLAINed like any table.
CREATE FUNCTION streamwin.source_rows(source_id integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamwin_source_rows'
LANGUAGE C STRICT VOLATILE ROWS 10000;

-- The same rows, each preceded by its position in the batch (from 0): what
-- deduplication uses to tell which occurrence of a key came first.
CREATE FUNCTION streamwin.source_rows(source_id integer, numbered boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamwin_source_rows'
LANGUAGE C STRICT VOLATILE ROWS 10000;

-- The same rows, for a stream-stream join's lookups of new rows in the other
-- side's join table (src/compile/compile_join.c): planned as the few rows a batch
-- usually brings against a large table, so that each is looked up by its
-- keys rather than the table read whole.
CREATE FUNCTION streamwin.join_batch_rows(source_id integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamwin_source_rows'
LANGUAGE C STRICT VOLATILE ROWS 100;

-- The groups a continuous query's state store writes to its result
-- (src/store/), as rows of its state table; what its compiled
-- statements read.  Outside a batch of the query it returns no rows.
CREATE FUNCTION streamwin.store_rows(query_id integer, which text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamwin_store_rows'
LANGUAGE C STRICT VOLATILE ROWS 1000;

-- Windows.  tumble() returns the start of the fixed window holding ts;
-- windows are aligned to the Unix epoch, like Spark's window().
CREATE FUNCTION streamwin.tumble(ts timestamptz, size interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'streamwin_tumble'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

-- hop() in GROUP BY assigns a row to every window [start, start + size)
-- that covers it; create_query rewrites it into a lateral call of
-- hop_starts(), which returns those starts.  Called directly, hop() returns
-- the latest window start that covers ts.
CREATE FUNCTION streamwin.hop(ts timestamptz, size interval, slide interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'streamwin_hop'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION streamwin.hop_starts(ts timestamptz, size interval, slide interval)
RETURNS SETOF timestamptz
AS 'MODULE_PATHNAME', 'streamwin_hop_starts'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE ROWS 4;

-- session() in GROUP BY: per key, events closer than gap form one session,
-- [first event, last event + gap); sessions merge when an event bridges
-- them.  Called directly, it returns ts.
CREATE FUNCTION streamwin.session(ts timestamptz, gap interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'streamwin_session'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

-- Aggregates merged from partial states (src/store/aggregate_state.c): any
-- aggregate with a combine function, beyond the ones merged in plain SQL.
-- A state is kept as bytea; the first argument names the aggregate.
CREATE FUNCTION streamwin.partial_state_accum(internal, regprocedure, VARIADIC "any")
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_partial_state_accum'
LANGUAGE C;

CREATE FUNCTION streamwin.combined_state_accum(internal, regprocedure, bytea)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_combined_state_accum'
LANGUAGE C;

CREATE FUNCTION streamwin.state_serialize(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_state_serialize'
LANGUAGE C;

-- The transition state of aggregate "aggregate" over the rows of a group.
CREATE AGGREGATE streamwin.partial_state(aggregate regprocedure, VARIADIC "any") (
	SFUNC = streamwin.partial_state_accum,
	STYPE = internal,
	FINALFUNC = streamwin.state_serialize
);

-- Many states of "aggregate" merged into one (sessions that merge).
CREATE AGGREGATE streamwin.combined_state(aggregate regprocedure, state bytea) (
	SFUNC = streamwin.combined_state_accum,
	STYPE = internal,
	FINALFUNC = streamwin.state_serialize
);

-- Two states merged into one (a batch's into the stored one).
CREATE FUNCTION streamwin.combine_states(aggregate regprocedure, a bytea, b bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_combine_states'
LANGUAGE C;

-- The aggregate's value from a state; result_type is a NULL of its result
-- type, which gives the call its type.
CREATE FUNCTION streamwin.finish_state(aggregate regprocedure, state bytea, result_type anyelement)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'streamwin_finish_state'
LANGUAGE C;

-- ... and with the aggregate's input collation, which its combine and
-- final functions get, as its transition function does (the calls above
-- take their arguments' collation: none for states).
CREATE FUNCTION streamwin.combined_state_accum(internal, regprocedure, bytea, regcollation)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_combined_state_accum'
LANGUAGE C;

CREATE AGGREGATE streamwin.combined_state(aggregate regprocedure, state bytea, collation regcollation) (
	SFUNC = streamwin.combined_state_accum,
	STYPE = internal,
	FINALFUNC = streamwin.state_serialize
);

CREATE FUNCTION streamwin.combine_states(aggregate regprocedure, a bytea, b bytea, collation regcollation)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_combine_states'
LANGUAGE C;

CREATE FUNCTION streamwin.finish_state(aggregate regprocedure, state bytea, result_type anyelement,
									   collation regcollation)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'streamwin_finish_state'
LANGUAGE C;

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

-- The values of a set's rows, each as many times as rows hold it: what an
-- aggregate with an inverse transition function runs over.
CREATE FUNCTION streamwin.change_set_rows(set bytea, type anyelement)
RETURNS anyarray
AS 'MODULE_PATHNAME', 'streamwin_change_set_rows'
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

-- A batch's set of distinct values of x, sorted (src/store/distinct_set.c): what
-- array_agg(DISTINCT x) gives, without sorting the batch to get it.
CREATE FUNCTION streamwin.distinct_set_accum(internal, anynonarray)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_distinct_set_accum'
LANGUAGE C PARALLEL SAFE;

CREATE FUNCTION streamwin.distinct_set_final(internal, anynonarray)
RETURNS anyarray
AS 'MODULE_PATHNAME', 'streamwin_distinct_set_final'
LANGUAGE C PARALLEL SAFE;

CREATE AGGREGATE streamwin.distinct_set(x anynonarray) (
	SFUNC = streamwin.distinct_set_accum,
	STYPE = internal,
	FINALFUNC = streamwin.distinct_set_final,
	FINALFUNC_EXTRA,
	FINALFUNC_MODIFY = READ_WRITE,
	PARALLEL = SAFE
);

-- The sets of distinct values that agg(DISTINCT x) keeps per open group
-- (src/store/distinct_set.c): the sorted union of two, and of many (hop windows
-- merge their panes' sets with it).
CREATE FUNCTION streamwin.distinct_union(a anyarray, b anyarray)
RETURNS anyarray
AS 'MODULE_PATHNAME', 'streamwin_distinct_union'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE streamwin.distinct_union(set anyarray) (
	SFUNC = streamwin.distinct_union,
	STYPE = anyarray,
	COMBINEFUNC = streamwin.distinct_union,
	PARALLEL = SAFE
);

-- streamwin.approx_count_distinct(value): the number of distinct non-NULL
-- values, estimated with a HyperLogLog sketch (about 0.8% standard error;
-- src/functions/approx_distinct.c).  Unlike count(DISTINCT ...) it merges batch by
-- batch, so continuous queries can use it; in plain SQL it gives the same
-- estimate over the same rows.
CREATE FUNCTION streamwin.approx_distinct_accum(internal, "any")
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_approx_distinct_accum'
LANGUAGE C PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_distinct_combine(internal, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_approx_distinct_combine'
LANGUAGE C PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_distinct_serialize(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_approx_distinct_serialize'
LANGUAGE C STRICT PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_distinct_deserialize(bytea, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_approx_distinct_deserialize'
LANGUAGE C STRICT PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_distinct_final(internal)
RETURNS bigint
AS 'MODULE_PATHNAME', 'streamwin_approx_distinct_final'
LANGUAGE C PARALLEL SAFE;

CREATE AGGREGATE streamwin.approx_count_distinct(value "any") (
	SFUNC = streamwin.approx_distinct_accum,
	STYPE = internal,
	COMBINEFUNC = streamwin.approx_distinct_combine,
	SERIALFUNC = streamwin.approx_distinct_serialize,
	DESERIALFUNC = streamwin.approx_distinct_deserialize,
	FINALFUNC = streamwin.approx_distinct_final,
	PARALLEL = SAFE
);

-- streamwin.approx_percentile(value, fraction) and (value, fractions[]):
-- percentiles within 1% (relative) of percentile_disc's, from a DDSketch
-- that merges batch by batch (src/functions/approx_percentile.c), so continuous
-- queries can use them where percentile_cont and percentile_disc (which
-- need all of a group's values at once) are refused.
CREATE FUNCTION streamwin.approx_percentile_accum(internal, float8, float8)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_approx_percentile_accum'
LANGUAGE C PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_percentile_accum(internal, float8, float8[])
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_approx_percentile_accum_array'
LANGUAGE C PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_percentile_combine(internal, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_approx_percentile_combine'
LANGUAGE C PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_percentile_serialize(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_approx_percentile_serialize'
LANGUAGE C STRICT PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_percentile_deserialize(bytea, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_approx_percentile_deserialize'
LANGUAGE C STRICT PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_percentile_final(internal)
RETURNS float8
AS 'MODULE_PATHNAME', 'streamwin_approx_percentile_final'
LANGUAGE C PARALLEL SAFE;

CREATE FUNCTION streamwin.approx_percentile_final_array(internal)
RETURNS float8[]
AS 'MODULE_PATHNAME', 'streamwin_approx_percentile_final_array'
LANGUAGE C PARALLEL SAFE;

CREATE AGGREGATE streamwin.approx_percentile(value float8, fraction float8) (
	SFUNC = streamwin.approx_percentile_accum,
	STYPE = internal,
	COMBINEFUNC = streamwin.approx_percentile_combine,
	SERIALFUNC = streamwin.approx_percentile_serialize,
	DESERIALFUNC = streamwin.approx_percentile_deserialize,
	FINALFUNC = streamwin.approx_percentile_final,
	PARALLEL = SAFE
);

CREATE AGGREGATE streamwin.approx_percentile(value float8, fractions float8[]) (
	SFUNC = streamwin.approx_percentile_accum,
	STYPE = internal,
	COMBINEFUNC = streamwin.approx_percentile_combine,
	SERIALFUNC = streamwin.approx_percentile_serialize,
	DESERIALFUNC = streamwin.approx_percentile_deserialize,
	FINALFUNC = streamwin.approx_percentile_final_array,
	PARALLEL = SAFE
);

-- Sources
CREATE FUNCTION streamwin.create_kafka_source(name text, brokers text, topic text,
	columns text, format text DEFAULT 'json', options jsonb DEFAULT '{}')
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_create_kafka_source'
LANGUAGE C VOLATILE;

-- The rows inserted into a table, in commit order, through logical decoding
-- (a replication slot per source; needs wal_level = logical).
CREATE FUNCTION streamwin.create_table_source(name text, relation regclass,
	options jsonb DEFAULT '{}')
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_create_table_source'
LANGUAGE C VOLATILE;

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

CREATE FUNCTION streamwin.drop_source(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_drop_source'
LANGUAGE C VOLATILE;

-- Queries
CREATE FUNCTION streamwin.create_query(name text, query text,
	watermark interval DEFAULT NULL, output_mode text DEFAULT 'append',
	trigger_interval interval DEFAULT '1 second', dedup_keys text[] DEFAULT NULL,
	options jsonb DEFAULT '{}', start boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_create_query'
LANGUAGE C VOLATILE;

CREATE FUNCTION streamwin.start_query(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_start_query'
LANGUAGE C VOLATILE;

CREATE FUNCTION streamwin.stop_query(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_stop_query'
LANGUAGE C VOLATILE;

-- Change how often a query runs and how long an idle partition holds its
-- watermark back, keeping its state and positions; NULL keeps a setting.
CREATE FUNCTION streamwin.alter_query(name text, trigger_interval interval DEFAULT NULL,
	idle_timeout interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_alter_query'
LANGUAGE C VOLATILE;

CREATE FUNCTION streamwin.drop_query(name text, drop_result boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_drop_query'
LANGUAGE C VOLATILE;

CREATE FUNCTION streamwin.reset_query(name text, starting_offsets text)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwin_reset_query'
LANGUAGE C VOLATILE;

CREATE FUNCTION streamwin.run_batch(name text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'streamwin_run_batch'
LANGUAGE C VOLATILE;

CREATE FUNCTION streamwin.run_available(name text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'streamwin_run_available'
LANGUAGE C VOLATILE;

-- The batch's own timestamp, its processing time: what now(),
-- current_timestamp and their kin in a continuous query stand for
-- (create_query rewrites them into calls of this), recorded with the batch
-- as streamwin.progress.started_at and seen again when a crash makes a
-- batch replay.  Outside a batch it is now().
CREATE FUNCTION streamwin.batch_timestamp()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'streamwin_batch_timestamp'
LANGUAGE C STABLE PARALLEL RESTRICTED;

-- run_available with a commit after each batch, as in a worker: for a
-- backlog too large for one transaction.  CALL it outside a transaction.
CREATE PROCEDURE streamwin.catch_up(name text, INOUT totals jsonb DEFAULT NULL)
AS 'MODULE_PATHNAME', 'streamwin_catch_up'
LANGUAGE C;

-- Observability
CREATE FUNCTION streamwin.worker_pid(query_id integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'streamwin_worker_pid'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW streamwin.sources AS
SELECT s.name, s.kind, s.brokers, s.topic, s.format, s.columns,
	   -- librdkafka properties and the schema registry's login may hold
	   -- credentials: only the owner sees them (a login in the URL too)
	   CASE WHEN pg_catalog.pg_has_role(s.owner, 'USAGE') THEN s.options
			WHEN s.options ? 'schema_registry' THEN
				pg_catalog.jsonb_set(s.options - ARRAY['kafka', 'schema_registry_user', 'schema_registry_password'],
									 '{schema_registry}',
									 pg_catalog.to_jsonb(pg_catalog.regexp_replace(s.options ->> 'schema_registry',
																				   '://[^/?#]*@', '://')))
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

-- A query's batches, for the roles that may see its text (its owner's, and
-- members of pg_read_all_stats, as in pg_stat_activity).  A security
-- barrier, so that a condition the reader adds (which may call a function
-- that leaks its arguments) runs on the rows that pass this test only.
CREATE VIEW streamwin.progress WITH (security_barrier) AS
SELECT p.query, p.batch_id, p.started_at, p.duration_ms, p.input_rows,
	   p.input_rows_per_second, p.processed_rows_per_second, p.late_rows_dropped,
	   p.duplicates_dropped, p.dead_letters, p.state_rows, p.watermark, p.offsets,
	   p.missing_keys, p.late_retractions_dropped, p.stage_ms
FROM streamwin.progress_log p
JOIN streamwin.query_catalog q ON q.name = p.query
WHERE pg_catalog.pg_has_role(q.owner, 'USAGE')
   OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE');

-- Security barriers too: a condition the reader adds runs on the rows of its
-- own sources and queries only.
CREATE VIEW streamwin.dead_letters WITH (security_barrier) AS
SELECT d.source, d.partition, d."offset", d.payload, d.error, d.at
FROM streamwin.dead_letter_log d
JOIN streamwin.source_catalog s ON s.name = d.source
WHERE pg_catalog.pg_has_role(s.owner, 'USAGE');

CREATE VIEW streamwin.late_rows WITH (security_barrier) AS
SELECT l.query, l.source, l.partition, l."offset", l.payload, l.event_time, l.watermark, l.at
FROM streamwin.late_row_log l
JOIN streamwin.query_catalog q ON q.name = l.query
WHERE pg_catalog.pg_has_role(q.owner, 'USAGE');

GRANT SELECT ON streamwin.sources, streamwin.queries, streamwin.progress,
	streamwin.dead_letters, streamwin.late_rows TO PUBLIC;

-- A changelog table source retracts each row as the WAL last gave it.  An
-- ALTER TABLE that rewrites the table's rows (ALTER COLUMN ... TYPE, SET
-- UNLOGGED) changes them with nothing in the WAL for the source to decode,
-- and its queries would later retract values they never added: refused
-- while the table has such a source.  Rewrites that leave the values be
-- (a column added with a volatile default, another access method) go on.
CREATE FUNCTION streamwin.refuse_changelog_rewrite() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	tab regclass := pg_catalog.pg_event_trigger_table_rewrite_oid();
	names text;
BEGIN
	-- 1: its persistence changes, 4: a column's values are rewritten
	IF pg_catalog.pg_event_trigger_table_rewrite_reason() & 5 = 0 THEN
		RETURN;
	END IF;
	SELECT pg_catalog.string_agg(pg_catalog.quote_ident(name), ', ' ORDER BY name) INTO names
	  FROM streamwin.source_catalog
	 WHERE source_table = tab AND options->>'changes' = 'all';
	IF names IS NOT NULL THEN
		RAISE EXCEPTION 'table % cannot be rewritten while changelog source % reads it', tab, names
			USING ERRCODE = 'object_in_use',
				  DETAIL = 'This ALTER TABLE changes the table''s rows without writing the changes into the WAL, '
						   'so the source''s queries would later retract values they never added.',
				  HINT = 'Drop the source''s queries and the source, alter the table, then create them again: '
						 'they start from the table''s rows as they are then.';
	END IF;
END
$$;
CREATE EVENT TRIGGER streamwin_changelog_rewrite ON table_rewrite
	EXECUTE FUNCTION streamwin.refuse_changelog_rewrite();
-- Also under session_replication_role = replica, which a session may set
-- to skip triggers: the rewrite would be as silent there.
ALTER EVENT TRIGGER streamwin_changelog_rewrite ENABLE ALWAYS;

-- The schema holds the interface functions and views every role may use;
-- the catalog tables above keep their own, narrower privileges.
GRANT USAGE ON SCHEMA streamwin TO PUBLIC;
