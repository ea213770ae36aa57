/* streamwin 0.3 -> 0.4: any aggregate with a combine function.
 *
 * Continuous queries accept every aggregate that PostgreSQL could split
 * for parallel aggregation (stddev, variance, corr, regr_*, bit_and/or/xor,
 * and user-defined aggregates with a combine function), not only count,
 * sum, avg, min, max and bool_and/or: their transition states are kept in
 * the state table through the functions below.  New:
 * streamwin.approx_count_distinct(value), a HyperLogLog estimate of the
 * number of distinct values, which (unlike count(DISTINCT ...)) merges
 * batch by batch, and streamwin.approx_percentile(value, fraction or
 * fractions), percentiles within 1% from a sketch that merges too.  The
 * tables of each query depend on the extension.  No catalog table changes.
 */

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.4'" to load this file. \quit

-- The tables of existing queries depend on the extension, as new ones do
-- (catalog_table_depends_on_extension in src/catalog.c): DROP EXTENSION
-- names them and, with CASCADE, drops them instead of leaving them behind.
INSERT INTO pg_catalog.pg_depend (classid, objid, objsubid, refclassid, refobjid, refobjsubid, deptype)
SELECT 'pg_catalog.pg_class'::regclass, t.oid, 0, 'pg_catalog.pg_extension'::regclass, e.oid, 0, 'n'
  FROM pg_catalog.pg_extension e,
       (SELECT state_table::oid FROM streamwin.query_catalog
        UNION SELECT checkpoint_table::oid FROM streamwin.query_catalog
        UNION SELECT dedup_table::oid FROM streamwin.query_catalog
        UNION SELECT dedup_checkpoint::oid FROM streamwin.query_catalog) AS t(oid)
 WHERE e.extname = 'streamwin' AND t.oid IS NOT NULL;

-- Aggregates merged from partial states (src/aggregate_state.c): any
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

-- streamwin.approx_count_distinct(value): the number of distinct non-NULL
-- values, estimated with a HyperLogLog sketch (about 0.8% standard error;
-- src/approx_distinct.c).  Unlike count(DISTINCT ...) it merges batch by
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
-- that merges batch by batch (src/approx_percentile.c), so continuous
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

-- A batch's set of distinct values of x, sorted (src/distinct_set.c): what
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
-- (src/distinct_set.c): the sorted union of two, and of many (hop windows
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
