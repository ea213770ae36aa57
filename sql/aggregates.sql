-- Aggregates beyond count, sum, avg, min, max and bool_and/or: any aggregate
-- with a combine function keeps its transition state in the state table
-- (src/store/aggregate_state.c).  Every result is compared with the same
-- aggregate in plain SQL over the same rows: numeric and integer results
-- must be equal; floating-point ones within 1e-9 relative, because merging
-- partial states adds in another order than one pass does.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

CREATE TABLE m (sensor text, reading float8, amount numeric, flags int, x float8, y float8,
                ts timestamptz);
SELECT streamwin.create_table_source('ms', 'm', '{"max_records_per_batch": 150}');

-- User-defined aggregates with a combine function: one whose transition
-- function is strict with no initial value (the first input is the state),
-- one with an initial value.
CREATE FUNCTION sumsq_step(int8, int) RETURNS int8 LANGUAGE sql IMMUTABLE STRICT
    AS 'SELECT $1 + $2::int8 * $2';
CREATE AGGREGATE sumsq(int) (SFUNC = sumsq_step, STYPE = int8, COMBINEFUNC = int8pl, INITCOND = '0');
CREATE AGGREGATE smallest(int) (SFUNC = int4smaller, STYPE = int4, COMBINEFUNC = int4smaller);
-- and one whose result is of a NOT NULL domain (a NULL of it named the
-- result's type: every batch failed)
CREATE DOMAIN agg_total AS int8 NOT NULL;
CREATE FUNCTION to_agg_total(int8) RETURNS agg_total LANGUAGE sql IMMUTABLE AS 'SELECT coalesce($1, 0)::agg_total';
CREATE AGGREGATE total(int) (SFUNC = int4_sum, STYPE = int8, COMBINEFUNC = int8pl, FINALFUNC = to_agg_total);

-- floating-point results agree to 1e-9 relative (or are both NULL)
CREATE FUNCTION close(a float8, b float8) RETURNS boolean LANGUAGE sql IMMUTABLE
    AS 'SELECT (a IS NULL AND b IS NULL) OR abs(a - b) <= 1e-9 * greatest(1, abs(a), abs(b))';

-- Tumbling windows, update mode: numeric and float states (stddev,
-- variance), two-argument aggregates, bit operations, a FILTER that
-- keeps nothing, and the user-defined ones.
SELECT streamwin.create_query('stats', $$
    SELECT sensor, count(*) AS n,
           stddev(reading) AS sd, variance(amount) AS var, var_pop(flags) AS vp,
           stddev_pop(amount) AS sdp, corr(x, y) AS r, covar_samp(x, y) AS cov,
           regr_slope(y, x) AS slope, regr_intercept(y, x) AS icpt, regr_count(y, x) AS rc,
           bit_and(flags) AS band, bit_or(flags) AS bor, bit_xor(flags) AS bxor,
           stddev(flags) FILTER (WHERE flags > 1000) AS never, sumsq(flags) AS sq,
           smallest(flags) AS least_flags, total(flags) AS tot, streamwin.approx_count_distinct(flags) AS dflags,
           streamwin.approx_percentile(reading, 0.9) AS p90,
           streamwin.approx_percentile(amount, array[0, 0.5, 0.99]) AS pcts
      FROM ms GROUP BY streamwin.tumble(ts, '2 minutes'), sensor$$,
    output_mode => 'update', start => false);
-- (each keeps its state as bytea in the state table; the others as before)
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = (SELECT state_table FROM streamwin.queries WHERE name = 'stats')
   AND attname LIKE '%$%' ORDER BY attnum;

-- Hopping windows, append mode: a window's row appears when it closes.
SELECT streamwin.create_query('hops', $$
    SELECT sensor, count(*) AS n, stddev(amount) AS sd, corr(x, y) AS r, bit_xor(flags) AS bxor,
           sumsq(flags) AS sq, count(DISTINCT flags) AS dflags
      FROM ms GROUP BY streamwin.hop(ts, '4 minutes', '2 minutes'), sensor$$,
    watermark => '10 minutes', output_mode => 'append', start => false);

-- Session windows, update mode: sessions that an event bridges merge, and
-- so do their states.
SELECT streamwin.create_query('visits', $$
    SELECT sensor, count(*) AS n, variance(amount) AS var, stddev_samp(reading) AS sd,
           bit_or(flags) AS bor, sumsq(flags) AS sq, smallest(flags) AS least_flags,
           streamwin.approx_count_distinct(amount) AS damount,
           streamwin.approx_percentile(x - y, 0.5) AS median_diff,
           count(DISTINCT flags % 10) AS dflags, array_agg(DISTINCT flags % 4) AS residues
      FROM ms GROUP BY streamwin.session(ts, '20 seconds'), sensor$$,
    output_mode => 'update', start => false);

-- A window's call given an alias is a result column too: the window's start.
SELECT streamwin.create_query('named_hops', $$
    SELECT streamwin.hop(ts, '4 minutes', '2 minutes') AS w, sensor, count(*) AS n
      FROM ms GROUP BY 1, sensor$$,
    output_mode => 'update', start => false);

-- No window, complete mode: every group's final values rewritten each batch.
SELECT streamwin.create_query('totals', $$
    SELECT sensor, count(*) AS n, var_samp(amount) AS var, streamwin.approx_count_distinct(flags) AS dflags,
           streamwin.approx_percentile(reading, array[0.5, 0.95]) AS pcts,
           count(DISTINCT flags) AS exact_dflags
      FROM ms GROUP BY sensor$$,
    output_mode => 'complete', start => false);

-- Exact DISTINCT aggregates, tumbling windows, update mode: each group
-- keeps its distinct values (a sorted array) in the state, and the final
-- value is the aggregate over them.  NULLs are kept as a value (array_agg
-- shows it, last) and ignored by the aggregates that ignore NULL inputs.
SELECT streamwin.create_query('uniques', $$
    SELECT sensor, count(DISTINCT flags) AS dflags, count(DISTINCT reading) AS dreadings,
           sum(DISTINCT amount) AS damount, avg(DISTINCT flags) FILTER (WHERE flags > 100) AS big,
           array_agg(DISTINCT CASE WHEN reading IS NOT NULL THEN flags % 3 END) AS residues,
           max(DISTINCT sensor) AS same_sensor, count(DISTINCT flags) FILTER (WHERE flags > 250) AS rare
      FROM ms GROUP BY streamwin.tumble(ts, '2 minutes'), sensor$$,
    output_mode => 'update', start => false);
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = (SELECT state_table FROM streamwin.queries WHERE name = 'uniques')
   AND attname LIKE '%$%' ORDER BY attnum;

-- Three loads, each read in batches of 150: windows and sessions get rows
-- from several batches.  Event times are out of order within 10 minutes;
-- every fifth reading and every 17th sensor is NULL.
CREATE FUNCTION load(first int, last int) RETURNS void LANGUAGE sql AS $$
    INSERT INTO m
    SELECT CASE WHEN g % 17 = 0 THEN NULL ELSE 's' || g % 4 END,
           CASE WHEN g % 5 = 0 THEN NULL ELSE (g * 7919 % 1000) / 10.0 END,
           (g * 31 % 997) / 100.0, g * 37 % 256,
           (g * 13 % 101) / 7.0, (g * 13 % 101) / 3.5 + (g % 11) / 10.0,
           timestamptz '2026-01-01 00:00:00+00' + (g * 13 % 600) * interval '1 second'
      FROM generate_series(first, last) g $$;
SELECT load(1, 400);
SELECT q, (streamwin.run_available(q))->>'batches' AS batches FROM unnest(array['stats', 'hops', 'visits', 'totals', 'uniques']) q;
SELECT load(401, 700);
SELECT q, (streamwin.run_available(q))->>'batches' AS batches FROM unnest(array['stats', 'hops', 'visits', 'totals', 'uniques']) q;
SELECT load(701, 1000);
-- one late-coming event an hour on, which closes every hopping window before it
INSERT INTO m VALUES ('s1', 1, 1, 1, 1, 1, '2026-01-01 01:00:00+00');
SELECT q, (streamwin.run_available(q))->>'batches' AS batches FROM unnest(array['stats', 'hops', 'visits', 'totals', 'uniques']) q;
-- the watermark moves at the end of a batch: one more makes it close windows
SELECT (streamwin.run_batch('hops'))->>'input_rows' AS input_rows;

-- stats: the same aggregates in plain SQL, group by group
CREATE VIEW stats_expected AS
SELECT streamwin.tumble(ts, '2 minutes') AS window_start, sensor, count(*) AS n,
       stddev(reading) AS sd, variance(amount) AS var, var_pop(flags) AS vp,
       stddev_pop(amount) AS sdp, corr(x, y) AS r, covar_samp(x, y) AS cov,
       regr_slope(y, x) AS slope, regr_intercept(y, x) AS icpt, regr_count(y, x) AS rc,
       bit_and(flags) AS band, bit_or(flags) AS bor, bit_xor(flags) AS bxor,
       stddev(flags) FILTER (WHERE flags > 1000) AS never, sumsq(flags) AS sq,
       smallest(flags) AS least_flags, total(flags) AS tot, streamwin.approx_count_distinct(flags) AS dflags,
       count(DISTINCT flags) AS exact_dflags,
       streamwin.approx_percentile(reading, 0.9) AS p90,
       percentile_disc(0.9) WITHIN GROUP (ORDER BY reading) AS exact_p90,
       streamwin.approx_percentile(amount, array[0, 0.5, 0.99]) AS pcts,
       percentile_disc(array[0, 0.5, 0.99]) WITHIN GROUP (ORDER BY amount::float8) AS exact_pcts
  FROM m GROUP BY 1, 2;
SELECT count(e.*) AS expected_groups, count(s.*) AS result_groups,
       count(*) FILTER (WHERE s.n IS DISTINCT FROM e.n OR NOT close(s.sd, e.sd)
                        OR s.var IS DISTINCT FROM e.var OR s.vp IS DISTINCT FROM e.vp
                        OR s.sdp IS DISTINCT FROM e.sdp OR NOT close(s.r, e.r)
                        OR NOT close(s.cov, e.cov) OR NOT close(s.slope, e.slope)
                        OR NOT close(s.icpt, e.icpt) OR s.rc IS DISTINCT FROM e.rc
                        OR s.band IS DISTINCT FROM e.band OR s.bor IS DISTINCT FROM e.bor
                        OR s.bxor IS DISTINCT FROM e.bxor OR s.never IS DISTINCT FROM e.never
                        OR s.sq IS DISTINCT FROM e.sq
                        OR s.least_flags IS DISTINCT FROM e.least_flags OR s.tot IS DISTINCT FROM e.tot
                        OR s.dflags IS DISTINCT FROM e.dflags OR s.p90 IS DISTINCT FROM e.p90
                        OR s.pcts IS DISTINCT FROM e.pcts) AS differing,
       count(*) FILTER (WHERE e.sensor IS NULL AND e.n IS NOT NULL) AS null_sensor_groups,
       -- the estimate against the exact distinct count
       count(*) FILTER (WHERE abs(s.dflags - e.exact_dflags) > greatest(1, 0.03 * e.exact_dflags))
         AS estimates_off_by_more_than_3pct,
       sum(e.exact_dflags) AS exact_distinct_total,
       -- and the percentiles against percentile_disc: within 1%
       count(*) FILTER (WHERE abs(s.p90 - e.exact_p90) > 0.01 * abs(e.exact_p90)
                           OR EXISTS (SELECT FROM unnest(s.pcts, e.exact_pcts) p(a, x)
                                       WHERE abs(a - x) > 0.01 * abs(x))) AS percentiles_off_by_more_than_1pct
  FROM stats s FULL JOIN stats_expected e
    ON s.window_start = e.window_start AND s.sensor IS NOT DISTINCT FROM e.sensor;
-- the result's types are the aggregates' own
SELECT column_name, data_type FROM information_schema.columns
 WHERE table_name = 'stats' AND column_name IN ('sd', 'var', 'vp', 'rc', 'band', 'sq', 'least_flags')
 ORDER BY ordinal_position;

-- hops: every window that closed, against plain SQL over the windows that
-- end at or before the watermark
SELECT watermark FROM streamwin.queries WHERE name = 'hops';
CREATE VIEW hops_expected AS
SELECT w AS window_start, w + interval '4 minutes' AS window_end, sensor, count(*) AS n,
       stddev(amount) AS sd, corr(x, y) AS r, bit_xor(flags) AS bxor, sumsq(flags) AS sq,
       count(DISTINCT flags) AS dflags
  FROM m, streamwin.hop_starts(ts, '4 minutes', '2 minutes') w
 GROUP BY w, sensor;
SELECT count(e.*) AS expected_windows, count(h.*) AS result_windows,
       count(*) FILTER (WHERE h.n IS DISTINCT FROM e.n OR h.sd IS DISTINCT FROM e.sd
                        OR NOT close(h.r, e.r) OR h.bxor IS DISTINCT FROM e.bxor
                        OR h.sq IS DISTINCT FROM e.sq OR h.dflags IS DISTINCT FROM e.dflags) AS differing
  FROM hops h
  FULL JOIN (SELECT * FROM hops_expected
              WHERE window_end <= (SELECT watermark FROM streamwin.queries WHERE name = 'hops')) e
    ON h.window_start = e.window_start AND h.sensor IS NOT DISTINCT FROM e.sensor;

-- named_hops: every window, its start under the alias w too
SELECT (streamwin.run_available('named_hops'))->>'input_rows' AS input_rows;
SELECT (SELECT count(*) FROM named_hops) AS result_windows,
       (SELECT count(*) FROM hops_expected) AS expected_windows,
       (SELECT count(*) FROM (SELECT w, window_start, window_end, sensor, n FROM named_hops
                              EXCEPT SELECT window_start, window_start, window_end, sensor, n FROM hops_expected) d) AS unexpected,
       (SELECT count(*) FROM (SELECT window_start, window_start, window_end, sensor, n FROM hops_expected
                              EXCEPT SELECT w, window_start, window_end, sensor, n FROM named_hops) d) AS missing;

-- visits: sessions by gaps and islands in plain SQL (a row 20 seconds or
-- more after the previous one of its sensor starts a new session)
CREATE VIEW visits_expected AS
WITH marked AS (
    SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY sensor ORDER BY ts) < interval '20 seconds'
                   THEN 0 ELSE 1 END AS starts
      FROM m),
numbered AS (
    SELECT *, sum(starts) OVER (PARTITION BY sensor ORDER BY ts, starts DESC
                                ROWS UNBOUNDED PRECEDING) AS visit
      FROM marked)
SELECT min(ts) AS window_start, max(ts) + interval '20 seconds' AS window_end, sensor,
       count(*) AS n, variance(amount) AS var, stddev_samp(reading) AS sd,
       bit_or(flags) AS bor, sumsq(flags) AS sq, smallest(flags) AS least_flags,
       streamwin.approx_count_distinct(amount) AS damount,
       streamwin.approx_percentile(x - y, 0.5) AS median_diff,
       count(DISTINCT flags % 10) AS dflags, array_agg(DISTINCT flags % 4) AS residues
  FROM numbered GROUP BY sensor, visit;
SELECT count(e.*) AS expected_sessions, count(v.*) AS result_sessions,
       count(*) FILTER (WHERE v.window_end IS DISTINCT FROM e.window_end
                        OR v.n IS DISTINCT FROM e.n OR v.var IS DISTINCT FROM e.var
                        OR NOT close(v.sd, e.sd) OR v.bor IS DISTINCT FROM e.bor
                        OR v.sq IS DISTINCT FROM e.sq
                        OR v.least_flags IS DISTINCT FROM e.least_flags
                        OR v.damount IS DISTINCT FROM e.damount
                        OR v.median_diff IS DISTINCT FROM e.median_diff
                        OR v.dflags IS DISTINCT FROM e.dflags
                        OR v.residues IS DISTINCT FROM e.residues) AS differing,
       count(*) FILTER (WHERE e.n > 1) AS sessions_of_several_rows
  FROM visits v FULL JOIN visits_expected e
    ON v.window_start = e.window_start AND v.sensor IS NOT DISTINCT FROM e.sensor;

-- totals: the same over all rows
SELECT count(*) AS groups,
       count(*) FILTER (WHERE (t.n, t.var, t.dflags, t.pcts, t.exact_dflags)
                              IS DISTINCT FROM (e.n, e.var, e.dflags, e.pcts, e.exact_dflags)) AS differing
  FROM totals t FULL JOIN
       (SELECT sensor, count(*) AS n, var_samp(amount) AS var, streamwin.approx_count_distinct(flags) AS dflags,
               streamwin.approx_percentile(reading, array[0.5, 0.95]) AS pcts,
               count(DISTINCT flags) AS exact_dflags
          FROM m GROUP BY sensor) e ON coalesce(t.sensor, '(null)') = coalesce(e.sensor, '(null)');

-- uniques: the DISTINCT aggregates in plain SQL, window by window
SELECT count(e.*) AS expected_groups, count(u.*) AS result_groups,
       count(*) FILTER (WHERE (u.dflags, u.dreadings, u.damount, u.big, u.residues, u.same_sensor, u.rare)
                              IS DISTINCT FROM (e.dflags, e.dreadings, e.damount, e.big, e.residues, e.same_sensor, e.rare))
         AS differing,
       sum(e.dflags) AS distinct_flags_total, count(*) FILTER (WHERE e.residues[array_upper(e.residues, 1)] IS NULL) AS with_null,
       count(*) FILTER (WHERE e.rare = 0) AS none_rare
  FROM uniques u FULL JOIN
       (SELECT streamwin.tumble(ts, '2 minutes') AS window_start, sensor,
               count(DISTINCT flags) AS dflags, count(DISTINCT reading) AS dreadings,
               sum(DISTINCT amount) AS damount, avg(DISTINCT flags) FILTER (WHERE flags > 100) AS big,
               array_agg(DISTINCT CASE WHEN reading IS NOT NULL THEN flags % 3 END) AS residues,
               max(DISTINCT sensor) AS same_sensor, count(DISTINCT flags) FILTER (WHERE flags > 250) AS rare
          FROM m GROUP BY 1, 2) e
    ON u.window_start = e.window_start AND u.sensor IS NOT DISTINCT FROM e.sensor;

-- approx_count_distinct in plain SQL: within 3% of the exact count from 1
-- to a million distinct values (its standard error is about 0.8%), NULLs
-- not counted, values of any hashable type, and the same estimate however
-- the rows are split (here: a parallel plan).
SELECT n, abs(streamwin.approx_count_distinct(g) - n) <= greatest(1, 0.03 * n) AS within_3pct,
       abs(streamwin.approx_count_distinct('user-' || g) - n) <= greatest(1, 0.03 * n) AS text_within_3pct,
       streamwin.approx_count_distinct(g % 7) AS seven
  FROM (VALUES (1), (10), (100), (1000), (10000), (100000), (1000000)) v(n),
       LATERAL generate_series(1, n) g
 GROUP BY n ORDER BY n;
SELECT streamwin.approx_count_distinct(x) AS two FROM (VALUES (1), (NULL), (2), (1), (NULL)) v(x);
SELECT streamwin.approx_count_distinct(x) AS none FROM (VALUES (NULL::int)) v(x);
CREATE TABLE distinct_values AS SELECT g % 200000 AS v FROM generate_series(1, 600000) g;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT streamwin.approx_count_distinct(v) FROM distinct_values;
SELECT streamwin.approx_count_distinct(v) AS parallel FROM distinct_values \gset
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;
SELECT streamwin.approx_count_distinct(v) = :parallel AS same_estimate_in_one_process,
       abs(:parallel - 200000) <= 0.03 * 200000 AS within_3pct
  FROM distinct_values;
RESET max_parallel_workers_per_gather;
SELECT streamwin.approx_count_distinct(point(1, 1));
-- just above 2.5 times the 16,384 registers, where the classic estimate
-- switches from linear counting and overestimates by up to 2.5%: the mean
-- error over these counts is under 1% (numbers and text, so that the
-- estimates differ in their hashes)
SELECT abs(avg(est::float8 / n - 1)) < 0.01 AS unbiased, bool_and(abs(est - n) <= 0.03 * n) AS within_3pct
  FROM (SELECT n, streamwin.approx_count_distinct(g) AS est
          FROM generate_series(40000, 50000, 1000) n, LATERAL generate_series(1, n) g GROUP BY n
        UNION ALL
        SELECT n, streamwin.approx_count_distinct('id ' || g)
          FROM generate_series(40000, 50000, 1000) n, LATERAL generate_series(1, n) g GROUP BY n) e;
-- bigint and timestamp values by all their 64 bits: ids with a time in the
-- high half and a sequence number in the low (PostgreSQL's hash of bigint
-- folds the halves together, where these collide by the hundred), and
-- values whose halves are equal
SELECT abs(streamwin.approx_count_distinct((g / 128) << 32 | g % 128) - 100000) <= 3000 AS ids_within_3pct,
       abs(streamwin.approx_count_distinct(g * 4294967297) - 100000) <= 3000 AS halves_within_3pct,
       abs(streamwin.approx_count_distinct('2000-01-01'::timestamptz + ((g / 128) << 32 | g % 128) * interval '1 microsecond')
           - 100000) <= 3000 AS times_within_3pct
  FROM generate_series(0::bigint, 99999) g;
-- a stored state is checked before it is used
SELECT streamwin.combine_states('streamwin.approx_count_distinct("any")', '\x010e01ffff01'::bytea,
                                '\x010e01'::bytea);
SELECT streamwin.combine_states('streamwin.approx_count_distinct("any")', '\x010f01'::bytea,
                                '\x010e01'::bytea);
SELECT streamwin.finish_state('streamwin.approx_count_distinct("any")',
           streamwin.combine_states('streamwin.approx_count_distinct("any")', '\x010e0100000100010200020c'::bytea,
                                    '\x010e01000103'::bytea), NULL::bigint) AS three;
DROP TABLE distinct_values;

-- approx_percentile in plain SQL: within 1% of percentile_disc at every
-- fraction, over uniform, long-tailed and signed values; NULLs left out;
-- zero, the infinities and NaN returned exactly, in PostgreSQL's order.
CREATE TABLE spread AS
SELECT g, (g * 7919 % 100003) / 100.0 AS uniform, exp((g % 2003) / 100.0 - 10) AS tail,
       ((g * 31 % 2001) - 1000) / 7.0 AS signed
  FROM generate_series(1, 200000) g;
SELECT f,
       abs(streamwin.approx_percentile(uniform, f) - percentile_disc(f) WITHIN GROUP (ORDER BY uniform::float8))
         <= 0.01 * percentile_disc(f) WITHIN GROUP (ORDER BY uniform::float8) AS uniform_within_1pct,
       abs(streamwin.approx_percentile(tail, f) - percentile_disc(f) WITHIN GROUP (ORDER BY tail))
         <= 0.01 * percentile_disc(f) WITHIN GROUP (ORDER BY tail) AS tail_within_1pct,
       abs(streamwin.approx_percentile(signed, f) - percentile_disc(f) WITHIN GROUP (ORDER BY signed::float8))
         <= 0.01 * abs(percentile_disc(f) WITHIN GROUP (ORDER BY signed::float8)) AS signed_within_1pct
  FROM spread, unnest(array[0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1]) f
 GROUP BY f ORDER BY f;
SELECT streamwin.approx_percentile(v, array[0, 0.2, 0.4, 0.6, 0.8, 1]) AS specials
  FROM (VALUES (1.0::float8), ('NaN'), ('-Infinity'), (NULL), (0), ('Infinity')) t(v);
SELECT streamwin.approx_percentile(v, 0.5) AS no_values FROM (VALUES (NULL::float8)) t(v);
SELECT streamwin.approx_percentile(g, 1.5) FROM spread;
SELECT streamwin.approx_percentile(g, g / 200000.0) FROM spread;
SELECT streamwin.approx_percentile(g, array[0.5, g / 200000.0]) FROM spread;
SELECT streamwin.approx_percentile(g, '{}'::float8[]) FROM spread;
SELECT streamwin.combine_states('streamwin.approx_percentile(double precision, double precision)',
                                '\x0100000001'::bytea, '\x01'::bytea);
-- -0 is the fraction 0
SELECT streamwin.approx_percentile(g, CASE WHEN g % 2 = 0 THEN 0 ELSE '-0'::float8 END) AS least FROM spread;
-- two sketches of every other row each, merged, are the sketch of all
SELECT streamwin.finish_state('streamwin.approx_percentile(double precision, double precision[])',
           streamwin.combine_states('streamwin.approx_percentile(double precision, double precision[])', a, b),
           NULL::float8[])
       = (SELECT streamwin.approx_percentile(tail, array[0.1, 0.5, 0.9, 0.999]) FROM spread) AS merged_is_whole
  FROM (SELECT streamwin.partial_state('streamwin.approx_percentile(double precision, double precision[])',
                                       tail::float8, array[0.1, 0.5, 0.9, 0.999]::float8[]) FILTER (WHERE g % 2 = 0) AS a,
               streamwin.partial_state('streamwin.approx_percentile(double precision, double precision[])',
                                       tail::float8, array[0.1, 0.5, 0.9, 0.999]::float8[]) FILTER (WHERE g % 2 = 1) AS b
          FROM spread) p;
-- a forged state: a zero counted without a fraction; the largest count of
-- zeros, whose last rank is no double of an int64
SELECT streamwin.combine_states('streamwin.approx_percentile(double precision, double precision)',
           '\x010000000000000000000000010000000000000000000000000000000000000000000000000000000000000000'::bytea,
           '\x010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000'::bytea);
SELECT streamwin.finish_state('streamwin.approx_percentile(double precision, double precision)',
           '\x01000000013ff00000000000007fffffffffffffff0000000000000000000000000000000000000000000000000000000000000000'::bytea,
           NULL::float8) AS most_zeros;
DROP TABLE spread;

-- distinct_union, which merges the sets of DISTINCT aggregates: sorted as
-- array_agg(DISTINCT) sorts (NULL last, once); inputs that are not sorted
-- or hold duplicates are sorted first; NULL is "no set yet".
SELECT streamwin.distinct_union('{1,3,5}'::int[], '{2,3,6,NULL}') AS merged,
       streamwin.distinct_union('{5,1,1,NULL,3,NULL}'::int[], '{3,2}') AS unsorted,
       streamwin.distinct_union(NULL::text[], '{b,a,b}'::text[]) AS one_null,
       streamwin.distinct_union(NULL::int[], NULL) AS both_null,
       streamwin.distinct_union('{}'::int[], '{}') AS both_empty;
SELECT streamwin.distinct_union(s) AS all_sets
  FROM (VALUES ('{3,4}'::numeric[]), (NULL), ('{1.0,4.00,NULL}'), ('{2}')) v(s);
SELECT streamwin.distinct_union('{{1,2},{3,4}}'::int[], '{1}');
-- distinct_set, which builds a batch's sets: what array_agg(DISTINCT)
-- gives, group by group, text and numbers, NULL kept once and last, NULL
-- for no rows.
SELECT streamwin.distinct_set(x) AS ints FROM (VALUES (3), (1), (NULL), (3), (2), (NULL)) v(x);
SELECT count(*) AS groups,
       count(*) FILTER (WHERE s IS DISTINCT FROM a OR t IS DISTINCT FROM b) AS differing
  FROM (SELECT g % 7 AS k,
               streamwin.distinct_set(CASE WHEN g % 11 > 0 THEN g % 13 END) AS s,
               array_agg(DISTINCT CASE WHEN g % 11 > 0 THEN g % 13 END) AS a,
               streamwin.distinct_set('v' || g % 17) AS t, array_agg(DISTINCT 'v' || g % 17) AS b
          FROM generate_series(1, 5000) g GROUP BY 1) x;
SELECT streamwin.distinct_set(x) IS NULL AS no_rows FROM (SELECT 1 WHERE false) v(x);

-- Refused at creation, with what to change.
-- DISTINCT: of two arguments, over arrays, over anonymous rows
SELECT streamwin.create_query('bad', 'SELECT sensor, count(DISTINCT (flags, sensor)) AS d FROM ms GROUP BY sensor');
SELECT streamwin.create_query('bad', 'SELECT sensor, string_agg(DISTINCT sensor, '','') AS d FROM ms GROUP BY sensor');
SELECT streamwin.create_query('bad', 'SELECT sensor, count(DISTINCT array[flags]) AS d FROM ms GROUP BY sensor');
CREATE DOMAIN flag_list AS int[];
SELECT streamwin.create_query('bad', 'SELECT sensor, count(DISTINCT array[flags]::flag_list) AS d FROM ms GROUP BY sensor');
DROP DOMAIN flag_list;
-- no combine function (array_agg and string_agg have none in PostgreSQL 15)
SELECT streamwin.create_query('bad', 'SELECT sensor, array_agg(flags) AS a FROM ms GROUP BY sensor');
SELECT streamwin.create_query('bad', $$SELECT sensor, string_agg(sensor, ',') AS a FROM ms GROUP BY sensor$$);
CREATE AGGREGATE no_combine(int) (SFUNC = int4larger, STYPE = int4);
SELECT streamwin.create_query('bad', 'SELECT sensor, no_combine(flags) AS a FROM ms GROUP BY sensor');
-- polymorphic
CREATE FUNCTION keep_first(anyelement, anyelement) RETURNS anyelement LANGUAGE sql
    AS 'SELECT coalesce($1, $2)';
CREATE AGGREGATE first_of(anyelement) (SFUNC = keep_first, STYPE = anyelement, COMBINEFUNC = keep_first);
SELECT streamwin.create_query('bad', 'SELECT sensor, first_of(flags) AS a FROM ms GROUP BY sensor');
-- ordered-set
SELECT streamwin.create_query('bad', 'SELECT sensor, percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS p FROM ms GROUP BY sensor');
-- an internal state whose deserialization function streamwin does not
-- check: another extension's may trust a length in the bytes it is given
-- (here numeric_avg_deserialize under another name)
CREATE FUNCTION other_avg_deserialize(bytea, internal) RETURNS internal
    LANGUAGE internal STRICT AS 'numeric_avg_deserialize';
CREATE AGGREGATE other_avg(numeric) (SFUNC = numeric_avg_accum, STYPE = internal,
    COMBINEFUNC = numeric_avg_combine, SERIALFUNC = numeric_avg_serialize,
    DESERIALFUNC = other_avg_deserialize, FINALFUNC = numeric_avg);
SELECT streamwin.create_query('bad', 'SELECT sensor, other_avg(amount) AS a FROM ms GROUP BY sensor');
-- an aggregate the query's owner may not execute
CREATE ROLE aggregates_user LOGIN;
GRANT CREATE ON SCHEMA public TO aggregates_user;
GRANT SELECT ON ms, m TO aggregates_user;
REVOKE EXECUTE ON FUNCTION sumsq(int) FROM PUBLIC;
SET ROLE aggregates_user;
SELECT streamwin.create_query('bad', 'SELECT sensor, sumsq(flags) AS a FROM ms GROUP BY sensor');
RESET ROLE;
SELECT count(*) AS bad_queries FROM streamwin.queries WHERE name = 'bad';

-- The state functions called directly check what they are given.
SELECT streamwin.finish_state('pg_catalog.stddev(integer)', NULL, NULL::integer);
SELECT streamwin.partial_state('pg_catalog.stddev(integer)', x) FROM m;
SELECT streamwin.partial_state('pg_catalog.array_agg(anynonarray)', flags) FROM m;
SELECT streamwin.partial_state('pg_catalog.int4larger(integer, integer)', flags) FROM m;
SELECT streamwin.combine_states('pg_catalog.stddev(integer)', '\x00'::bytea, '\x0001'::bytea);
SELECT streamwin.combine_states('pg_catalog.stddev(double precision)', '\x00'::bytea, '\x0001'::bytea);
SELECT streamwin.finish_state('public.other_avg(numeric)', '\x00'::bytea, NULL::numeric);
SET ROLE aggregates_user;
SELECT streamwin.partial_state('public.sumsq(integer)', flags) FROM m;
-- A forged state of PostgreSQL's numeric accumulators is refused before
-- their deserialization reads it: this one's weight (INT_MIN) would have
-- the accumulator write far outside its buffer.
SELECT streamwin.finish_state('pg_catalog.avg(numeric)',
           '\x0000000000000001000000018000000000000000000000000001'::bytea, NULL::numeric);
-- a sum of more digits than any numeric's square has (2 x 36,864 base-10000
-- digits, and 8): a state of megabytes would multiply for minutes
SELECT streamwin.finish_state('pg_catalog.avg(numeric)',
           '\x0000000000000002'::bytea || int4send(73737) || int4send(0) || int4send(0) || int4send(0)
           || decode(repeat('0001', 73737), 'hex') || decode(repeat('00', 36), 'hex'), NULL::numeric);
SELECT streamwin.finish_state('pg_catalog.avg(numeric)',
           '\x0000000000000002'::bytea || int4send(73736) || int4send(0) || int4send(0) || int4send(0)
           || decode(repeat('0001', 73736), 'hex') || decode(repeat('00', 36), 'hex'), NULL::numeric)
         IS NOT NULL AS largest_sum_read;
-- a digit past the numeric base (10000), as sum(bigint) keeps its sum
SELECT streamwin.finish_state('pg_catalog.sum(bigint)', '\x0000000000000001000000010000000000000000000000002710'::bytea, NULL::numeric);
RESET ROLE;
-- the states these aggregates write are read as before
SELECT streamwin.finish_state('pg_catalog.sum(bigint)',
           streamwin.combine_states('pg_catalog.sum(bigint)', p, p), NULL::numeric)
         = (SELECT 2 * sum(x::bigint) FROM m) AS sum_bigint_exact
  FROM (SELECT streamwin.partial_state('pg_catalog.sum(bigint)', x::bigint) AS p FROM m) s;
SELECT streamwin.finish_state('pg_catalog.avg(numeric)', p, NULL::numeric)
         = (SELECT avg(amount) FROM m) AS avg_numeric_exact
  FROM (SELECT streamwin.partial_state('pg_catalog.avg(numeric)', amount) AS p FROM m) s;
-- and agree with the aggregate itself: partial states of three slices,
-- merged two ways
SELECT streamwin.finish_state('pg_catalog.stddev(numeric)',
           streamwin.combine_states('pg_catalog.stddev(numeric)',
               streamwin.combine_states('pg_catalog.stddev(numeric)', p[1], p[2]), p[3]), NULL::numeric)
         = (SELECT stddev(amount) FROM m) AS combine_states_exact,
       streamwin.finish_state('pg_catalog.stddev(numeric)',
           (SELECT streamwin.combined_state('pg_catalog.stddev(numeric)', s) FROM unnest(p) s),
           NULL::numeric) = (SELECT stddev(amount) FROM m) AS combined_state_exact
  FROM (SELECT array_agg(s ORDER BY k) AS p
          FROM (SELECT g % 3 AS k, streamwin.partial_state('pg_catalog.stddev(numeric)', amount) AS s
                  FROM (SELECT row_number() OVER () AS g, amount FROM m) r GROUP BY 1) t) parts;

-- min and max of values that are equal but differ (1.0 and 1.00; 'abc' and
-- 'ABC' under a case-insensitive collation) are the later row's, as
-- PostgreSQL's min and max keep them: within a batch, across batches in
-- memory, and in a new session's small batch, which merges on the state
-- table.
CREATE COLLATION agg_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE ties (g int, n numeric, t text COLLATE agg_ci);
SELECT streamwin.create_table_source('tie_src', 'ties');
SELECT streamwin.create_query('tie_mm', $$SELECT g, min(n) AS lo, max(n) AS hi, min(t) AS tlo, max(t) AS thi
    FROM tie_src GROUP BY g$$, output_mode => 'update', start => false);
INSERT INTO ties VALUES (1, 1.0, 'abc'), (2, 2.0, 'xyz');
SELECT (streamwin.run_batch('tie_mm')->>'input_rows')::int AS input_rows;
INSERT INTO ties VALUES (1, 1.00, 'ABC'), (1, 1.000, 'Abc');
SELECT (streamwin.run_batch('tie_mm')->>'input_rows')::int AS input_rows;
\c
INSERT INTO ties VALUES (2, 2.00, 'XYZ');
SELECT (streamwin.run_batch('tie_mm')->>'input_rows')::int AS input_rows;
SELECT g, lo, hi, tlo, thi FROM tie_mm ORDER BY g;
SELECT count(*) AS diffs FROM (
  SELECT g, lo::text, hi::text, tlo::text COLLATE "C", thi::text COLLATE "C" FROM tie_mm
  EXCEPT
  SELECT g, min(n)::text, max(n)::text, min(t)::text COLLATE "C", max(t)::text COLLATE "C" FROM ties GROUP BY g) d;
SELECT streamwin.drop_query('tie_mm', drop_result => true);
SELECT streamwin.drop_source('tie_src');
DROP TABLE ties;

SELECT streamwin.drop_query(q, drop_result => true) FROM unnest(array['stats', 'hops', 'named_hops', 'visits', 'totals', 'uniques']) q;
SELECT streamwin.drop_source('ms');
REVOKE CREATE ON SCHEMA public FROM aggregates_user;
REVOKE SELECT ON m FROM aggregates_user;
DROP ROLE aggregates_user;

-- Group keys of several types, as a store hands its groups to the result
-- statements in the order of the result's unique index (sort_rows in
-- src/store/store_rows.c): text sharing a long prefix (their abbreviations are
-- equal, so whole keys decide), numeric and uuid (abbreviated too), NULLs
-- of each, in batches of 100 rows over all 3 windows, so that groups are
-- written new and then again by location.  The result is compared with
-- plain SQL.
CREATE TABLE mk (tag text, amount numeric, id uuid, v int, ts timestamptz);
SELECT streamwin.create_table_source('mks', 'mk', '{"max_records_per_batch": 100}');
SELECT streamwin.create_query('keyed', $$
    SELECT tag, amount, id, count(*) AS n, sum(v) AS s
      FROM mks GROUP BY streamwin.tumble(ts, '10 minutes'), tag, amount, id$$,
    output_mode => 'update', start => false);
INSERT INTO mk
SELECT CASE WHEN g % 11 = 0 THEN NULL ELSE 'customer-with-a-long-shared-prefix-' || g * 7 % 9 END,
       CASE WHEN g % 13 = 0 THEN NULL ELSE (g * 3 % 5) / 4.0 END,
       CASE WHEN g % 17 = 0 THEN NULL ELSE md5((g % 3)::text)::uuid END,
       g, timestamptz '2026-01-01 00:00:00+00' + (g * 37 % 1800) * interval '1 second'
  FROM generate_series(1, 2000) g;
SELECT (streamwin.run_available('keyed'))->>'batches' AS batches;
SELECT count(e.*) AS expected_groups, count(k.*) AS result_groups,
       count(*) FILTER (WHERE (k.n, k.s) IS DISTINCT FROM (e.n, e.s)) AS differing
  FROM keyed k FULL JOIN
       (SELECT streamwin.tumble(ts, '10 minutes') AS window_start, tag, amount, id,
               count(*) AS n, sum(v) AS s
          FROM mk GROUP BY 1, 2, 3, 4) e
    ON k.window_start = e.window_start AND k.tag IS NOT DISTINCT FROM e.tag
   AND k.amount IS NOT DISTINCT FROM e.amount AND k.id IS NOT DISTINCT FROM e.id;
SELECT streamwin.drop_query('keyed', drop_result => true);
SELECT streamwin.drop_source('mks');
DROP TABLE mk;

-- Partials that compute the same value are kept once: sum(v) beside
-- avg(v)'s sum, count(v) beside its count, the same FILTER, the same
-- transition state, the same set of distinct values.  Different filters,
-- count(*) against count(v) and different aggregates of the same value stay
-- apart.  In batches of 100 rows over three windows, every result is
-- compared with plain SQL.
CREATE TABLE mp (k text, v int, r float8, ts timestamptz);
SELECT streamwin.create_table_source('mps', 'mp', '{"max_records_per_batch": 100}');
SELECT streamwin.create_query('shared', $$
    SELECT k, count(*) AS n, count(v) AS c, sum(v) AS s, avg(v) AS a,
           avg(v) FILTER (WHERE v > 100) AS abig, sum(v) FILTER (WHERE v > 100) AS sbig,
           sum(v) FILTER (WHERE v > 200) AS svery, avg(r) AS ar,
           stddev(r) AS sd1, stddev(r) AS sd2, variance(r) AS vr,
           count(DISTINCT v % 7) AS d1, sum(DISTINCT v % 7) AS d2, max(v) AS hi, max(v) AS hi2
      FROM mps GROUP BY streamwin.tumble(ts, '10 minutes'), k$$,
    output_mode => 'update', start => false);
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = (SELECT state_table FROM streamwin.queries WHERE name = 'shared')
   AND attname LIKE '%$%' ORDER BY attnum;
-- the same partials merged pane by pane into hopping windows, and session
-- by session: each key's rows are 5 seconds apart, read out of order, so
-- its sessions merge batch after batch into one
SELECT streamwin.create_query('shared_hops', $$
    SELECT k, count(v) AS c, sum(v) AS s, avg(v) AS a, sum(v) FILTER (WHERE v > 100) AS sbig,
           avg(v) FILTER (WHERE v > 100) AS abig, stddev(r) AS sd1, stddev(r) AS sd2
      FROM mps GROUP BY streamwin.hop(ts, '10 minutes', '5 minutes'), k$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('shared_visits', $$
    SELECT k, count(v) AS c, sum(v) AS s, avg(v) AS a, sum(v) FILTER (WHERE v > 100) AS sbig,
           avg(v) FILTER (WHERE v > 100) AS abig, stddev(r) AS sd1, stddev(r) AS sd2
      FROM mps GROUP BY streamwin.session(ts, '6 seconds'), k$$,
    output_mode => 'update', start => false);
INSERT INTO mp
SELECT 'k' || g % 5, CASE WHEN g % 9 = 0 THEN NULL ELSE g * 7 % 300 END,
       CASE WHEN g % 4 = 0 THEN NULL ELSE (g * 13 % 101) / 7.0 END,
       timestamptz '2026-01-01 00:00:00+00' + (g * 37 % 1800) * interval '1 second'
  FROM generate_series(1, 2000) g;
SELECT (streamwin.run_available('shared'))->>'batches' AS batches;
SELECT count(e.*) AS expected_groups, count(q.*) AS result_groups,
       count(*) FILTER (WHERE (q.n, q.c, q.s, q.a, q.abig, q.sbig, q.svery, q.d1, q.d2, q.hi, q.hi2)
                              IS DISTINCT FROM
                              (e.n, e.c, e.s, e.a, e.abig, e.sbig, e.svery, e.d1, e.d2, e.hi, e.hi2)
                           OR NOT close(q.ar, e.ar) OR NOT close(q.sd1, e.sd1)
                           OR NOT close(q.sd2, e.sd2) OR NOT close(q.vr, e.vr)) AS differing
  FROM shared q FULL JOIN
       (SELECT streamwin.tumble(ts, '10 minutes') AS window_start, k, count(*) AS n,
               count(v) AS c, sum(v) AS s, avg(v) AS a,
               avg(v) FILTER (WHERE v > 100) AS abig, sum(v) FILTER (WHERE v > 100) AS sbig,
               sum(v) FILTER (WHERE v > 200) AS svery, avg(r) AS ar,
               stddev(r) AS sd1, stddev(r) AS sd2, variance(r) AS vr,
               count(DISTINCT v % 7) AS d1, sum(DISTINCT v % 7) AS d2, max(v) AS hi, max(v) AS hi2
          FROM mp GROUP BY 1, 2) e
    ON q.window_start = e.window_start AND q.k = e.k;
SELECT q, (streamwin.run_available(q))->>'batches' AS batches
  FROM unnest(array['shared_hops', 'shared_visits']) q;
SELECT count(e.*) AS expected_windows, count(h.*) AS result_windows,
       count(*) FILTER (WHERE (h.c, h.s, h.a, h.sbig, h.abig) IS DISTINCT FROM (e.c, e.s, e.a, e.sbig, e.abig)
                           OR NOT close(h.sd1, e.sd1) OR NOT close(h.sd2, e.sd2)) AS differing
  FROM shared_hops h FULL JOIN
       (SELECT w AS window_start, k, count(v) AS c, sum(v) AS s, avg(v) AS a,
               sum(v) FILTER (WHERE v > 100) AS sbig, avg(v) FILTER (WHERE v > 100) AS abig,
               stddev(r) AS sd1, stddev(r) AS sd2
          FROM mp, streamwin.hop_starts(ts, '10 minutes', '5 minutes') w GROUP BY 1, 2) e
    ON h.window_start = e.window_start AND h.k = e.k;
SELECT count(e.*) AS expected_sessions, count(v.*) AS result_sessions,
       count(*) FILTER (WHERE (v.window_end, v.c, v.s, v.a, v.sbig, v.abig)
                              IS DISTINCT FROM (e.window_end, e.c, e.s, e.a, e.sbig, e.abig)
                           OR NOT close(v.sd1, e.sd1) OR NOT close(v.sd2, e.sd2)) AS differing,
       count(*) FILTER (WHERE e.n > 1) AS sessions_of_several_rows
  FROM shared_visits v FULL JOIN
       (SELECT min(ts) AS window_start, max(ts) + interval '6 seconds' AS window_end, k,
               count(*) AS n, count(v) AS c, sum(v) AS s, avg(v) AS a,
               sum(v) FILTER (WHERE v > 100) AS sbig, avg(v) FILTER (WHERE v > 100) AS abig,
               stddev(r) AS sd1, stddev(r) AS sd2
          FROM (SELECT *, sum(starts) OVER (PARTITION BY k ORDER BY ts, starts DESC
                                            ROWS UNBOUNDED PRECEDING) AS visit
                  FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts)
                                            < interval '6 seconds' THEN 0 ELSE 1 END AS starts
                          FROM mp) marked) numbered
         GROUP BY k, visit) e
    ON v.window_start = e.window_start AND v.k = e.k;
SELECT streamwin.drop_query(q, drop_result => true)
  FROM unnest(array['shared', 'shared_hops', 'shared_visits']) q;
SELECT streamwin.drop_source('mps');
DROP TABLE mp;
-- count(DISTINCT) of a row value whose fields are all NULL counts it: such
-- a value IS NULL in SQL, but is a value, not a NULL.
CREATE TYPE agg_pair AS (a int, b int);
CREATE TABLE pairs (id int, a int, b int);
SELECT streamwin.create_table_source('pairs_src', 'pairs');
SELECT streamwin.create_query('pair_counts',
    'SELECT id % 2 AS g, count(DISTINCT ROW(a, b)::agg_pair) AS d FROM pairs_src GROUP BY 1',
    output_mode => 'update', start => false);
INSERT INTO pairs VALUES (1, 1, 2), (2, NULL, 4), (3, NULL, NULL), (4, NULL, NULL), (5, 1, 2), (6, 3, 3);
SELECT (streamwin.run_batch('pair_counts'))->>'input_rows' AS input_rows;
INSERT INTO pairs VALUES (7, NULL, NULL), (8, 5, NULL), (9, 9, 9);
SELECT (streamwin.run_batch('pair_counts'))->>'input_rows' AS input_rows;
SELECT q.g, q.d, p.d AS plain FROM pair_counts q
  FULL JOIN (SELECT id % 2 AS g, count(DISTINCT ROW(a, b)::agg_pair) AS d FROM pairs GROUP BY 1) p USING (g)
 ORDER BY 1;
SELECT streamwin.drop_query('pair_counts', drop_result => true);
SELECT streamwin.drop_source('pairs_src');
DROP TABLE pairs;
DROP TYPE agg_pair;
-- An aggregate's result column has the aggregate's collation, as CREATE
-- TABLE AS over the same SELECT gives it.
CREATE TABLE named (id int, k int, name text COLLATE "C", note text);
SELECT streamwin.create_table_source('named_src', 'named');
SELECT streamwin.create_query('named_max',
    'SELECT k, max(name) AS m, min(note COLLATE "C") AS n, max(note) AS d FROM named_src GROUP BY k',
    output_mode => 'update', start => false);
CREATE TABLE named_ctas AS
  SELECT k, max(name) AS m, min(note COLLATE "C") AS n, max(note) AS d FROM named GROUP BY k WITH NO DATA;
SELECT a.attname, a.attcollation = c.attcollation AS same_collation
  FROM pg_attribute a JOIN pg_attribute c ON c.attrelid = 'named_ctas'::regclass AND c.attname = a.attname
 WHERE a.attrelid = 'named_max'::regclass AND a.attname IN ('m', 'n', 'd')
 ORDER BY a.attname;
SELECT streamwin.drop_query('named_max', drop_result => true);
SELECT streamwin.drop_source('named_src');
DROP TABLE named, named_ctas;

-- An aggregate of the user's gets its input collation in its combine and
-- final functions too, as in PostgreSQL, not only in its transition
-- function: one in SQL that compares text, text_smaller (in C, which
-- needs a collation: every batch after the first failed), and a final
-- function that compares; each in two collations, against plain SQL, in
-- memory, in session windows (whose merged states combine), and on the
-- state table (more groups than streamwin.state_memory holds).
CREATE FUNCTION least_word_step(text, text) RETURNS text LANGUAGE sql IMMUTABLE
    AS 'SELECT CASE WHEN $1 IS NULL OR $2 < $1 THEN $2 ELSE $1 END';
CREATE AGGREGATE least_word(text) (SFUNC = least_word_step, STYPE = text, COMBINEFUNC = least_word_step);
CREATE AGGREGATE smallest_word(text) (SFUNC = text_smaller, STYPE = text, COMBINEFUNC = text_smaller);
CREATE FUNCTION word_before_m(text) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT $1 < ''m''';
CREATE AGGREGATE least_word_before_m(text) (SFUNC = least_word_step, STYPE = text, COMBINEFUNC = least_word_step,
    FINALFUNC = word_before_m);
CREATE TABLE words (id int PRIMARY KEY, g int, w text, ts timestamptz);
SELECT streamwin.create_table_source('word_src', 'words', '{"max_records_per_batch": 7}');
CREATE VIEW word_least_expected AS
  SELECT g, least_word(w COLLATE "C") AS c, least_word(w COLLATE "en-x-icu") AS en,
         smallest_word(w COLLATE "C") AS sc, smallest_word(w COLLATE "en-x-icu") AS sen,
         least_word_before_m(w COLLATE "C") AS bc, least_word_before_m(w COLLATE "en-x-icu") AS ben
    FROM words GROUP BY g;
SELECT streamwin.create_query('word_least', $$
  SELECT g, least_word(w COLLATE "C") AS c, least_word(w COLLATE "en-x-icu") AS en,
         smallest_word(w COLLATE "C") AS sc, smallest_word(w COLLATE "en-x-icu") AS sen,
         least_word_before_m(w COLLATE "C") AS bc, least_word_before_m(w COLLATE "en-x-icu") AS ben
    FROM word_src GROUP BY g$$, output_mode => 'update', start => false);
SELECT streamwin.create_query('word_sessions', $$
  SELECT g, least_word(w COLLATE "C") AS c, least_word(w COLLATE "en-x-icu") AS en,
         smallest_word(w COLLATE "en-x-icu") AS sen, least_word_before_m(w COLLATE "C") AS bc
    FROM word_src GROUP BY streamwin.session(ts, '90 seconds'), g$$, output_mode => 'update', start => false);
-- rows in an order that makes the least of each batch another word; the
-- third batch's rows (15 to 21) fall between the first's sessions and
-- bridge them; the last two batches' rows are sessions of their own
INSERT INTO words SELECT i, i % 3, (ARRAY['yes', 'Yes', 'b', 'zed', 'B', 'Zed', 'a', 'M', 'A', 'm'])[i % 10 + 1],
                         '2026-01-01'::timestamptz
                         + CASE WHEN i BETWEEN 15 AND 21 THEN (i - 14) * 40 + 25 WHEN i >= 22 THEN i * 40 + 10000
                                ELSE i * 40 END * interval '1 second'
  FROM generate_series(1, 30) i;
SELECT (streamwin.run_available('word_least'))->'batches' AS batches;
SELECT (streamwin.run_available('word_sessions'))->'batches' AS batches;
SELECT * FROM word_least ORDER BY g;
SELECT count(*) AS diffs FROM (
  (SELECT g, c, en, sc, sen, bc, ben FROM word_least EXCEPT ALL TABLE word_least_expected)
  UNION ALL (TABLE word_least_expected EXCEPT ALL SELECT g, c, en, sc, sen, bc, ben FROM word_least)) d;
CREATE VIEW word_sessions_expected AS
  SELECT min(ts) AS window_start, g, least_word(w COLLATE "C") AS c, least_word(w COLLATE "en-x-icu") AS en,
         smallest_word(w COLLATE "en-x-icu") AS sen, least_word_before_m(w COLLATE "C") AS bc
    FROM (SELECT *, sum(gap) OVER (PARTITION BY g ORDER BY ts) AS s
            FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY g ORDER BY ts) < interval '90 seconds'
                                 THEN 0 ELSE 1 END AS gap FROM words) x) y
   GROUP BY g, s;
SELECT count(*) AS diffs FROM (
  (SELECT window_start, g, c, en, sen, bc FROM word_sessions EXCEPT ALL TABLE word_sessions_expected)
  UNION ALL (TABLE word_sessions_expected EXCEPT ALL SELECT window_start, g, c, en, sen, bc FROM word_sessions)) d;
SELECT g, count(*) AS sessions FROM word_sessions GROUP BY g ORDER BY g;
-- on the state table: 20,000 groups do not fit in 1 MB; two batches
SET streamwin.state_memory = '1MB';
SET streamwin.max_records_per_batch = 20000;
SELECT streamwin.create_table_source('word_all', 'words');
SELECT streamwin.create_query('word_many', $$
  SELECT id % 20000 AS k, least_word(w COLLATE "en-x-icu") AS en, smallest_word(w COLLATE "en-x-icu") AS sen
    FROM word_all GROUP BY 1$$, output_mode => 'update', start => false);
INSERT INTO words SELECT i, 0, (ARRAY['yes', 'Yes', 'b', 'zed', 'B', 'Zed', 'a', 'M', 'A', 'm'])[i % 10 + 1], '2026-01-02'
  FROM generate_series(31, 40030) i;
SELECT (streamwin.run_available('word_many'))->'batches' AS batches;
SELECT count(*) AS diffs FROM (
  (SELECT k, en, sen FROM word_many
   EXCEPT ALL SELECT id % 20000, least_word(w COLLATE "en-x-icu"), smallest_word(w COLLATE "en-x-icu")
                FROM words WHERE id > 30 GROUP BY 1)
  UNION ALL
  (SELECT id % 20000, least_word(w COLLATE "en-x-icu"), smallest_word(w COLLATE "en-x-icu")
     FROM words WHERE id > 30 GROUP BY 1
   EXCEPT ALL SELECT k, en, sen FROM word_many)) d;
RESET streamwin.state_memory;
RESET streamwin.max_records_per_batch;
SELECT streamwin.drop_query(q, drop_result => true) FROM unnest('{word_least,word_sessions,word_many}'::text[]) q;
SELECT streamwin.drop_source('word_src');
SELECT streamwin.drop_source('word_all');
DROP VIEW word_least_expected, word_sessions_expected;
DROP TABLE words;
DROP AGGREGATE least_word(text), smallest_word(text), least_word_before_m(text);
DROP FUNCTION least_word_step(text, text), word_before_m(text);
