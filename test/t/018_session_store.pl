
# 018_session_store.pl: session windows in the state store against plain SQL.
#
# A session query keeps its open sessions in the state store
# (src/store/store_session.c): a batch's own sessions, built by the executor, merge
# in C with the stored sessions of their key that they overlap; merged
# sessions leave the state table, the checkpoint and (update mode) the
# result; a session closes when the watermark passes its end.  Every
# expectation is plain SQL over the events the query read (gaps and
# islands: per key, sorted by time, a new session where the step is 10 s or
# more), compared as multisets.
#
# Events of a key arrive out of order (up to 30 s late, within a 1-minute
# watermark, so that none is dropped), so sessions grow at both ends, start
# earlier, and are bridged into one, within a batch and across batches.
#
# Session queries of plain values (count, sum, min, max) give the store
# each row as a session (part 4); those with a transition state
# (var_samp, in m_update and c_upd) have the executor build a batch's
# sessions first.
# Both are checked everywhere below.
#
#   1. The memory cap, in a session (streamwin.state_memory = 1MB): update,
#      append and complete mode whose state grows past the cap switch to
#      their state tables (the SQL statements, with the indexes they make),
#      stay exact there, and come back into memory when closing sessions
#      shrink the state.
#   2. A worker with 40,000 open sessions: stop_query and start_query, a
#      SIGTERM of the worker, each followed by events that bridge two
#      stored sessions of a key, reach back before one, or extend one.
#   3. Crashes (SIGKILL of the worker, or of an unrelated backend) right
#      after a checkpoint and two batches after one: each query restores
#      its checkpoint, replays, reads on.
#   4. Plain partials of one row: every plain kind over NULLs, FILTERs, row
#      values and rows that share a key and a time, in update and append
#      mode.
#   5. run_available, whose batches share one transaction: the store keeps
#      the state rows of the sessions they change back until the end of the
#      run, while sessions merge, start earlier and close.
#   In parts 1-3 and 5, after many batches: the checkpoint table equals the
#   state table, row for row.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";

my $node = new_node('sessions_store',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  # (its table sources' queries checkpoint every 3 batches, not every
	  # batch, so that crashes find batches to replay)
	  . "streamwin.table_checkpoint_every_batch = off\n"
	  . "restart_after_crash = on\n");

# ---- helpers ----------------------------------------------------------------

# Plain SQL: the sessions (gap 10 s) per k of the events of table, with
# extra conditions on them; with $var, var_samp(v) too; with $aggs, those
# aggregates instead (part 4).  The queries with
# it (m_update, c_upd) keep a transition state, so the executor builds a
# batch's sessions first; the others, of plain values only, give the store
# each row as a session.
my $AGGS  = 'count(*)::bigint AS n, sum(v)::bigint AS s, min(v) AS lo, max(v) AS hi';
my $COLS  = 'window_start, window_end, k, n, s, lo, hi';
my $VCOLS = "$COLS, var";
my $SCOLS = 'window_start, window_end, k, "n$count", "s$sum", "lo$min", "hi$max"';

sub want_sessions
{
	my ($table, $where, $var, $aggs) = @_;
	$aggs //= $var ? "$AGGS, var_samp(v) AS var" : $AGGS;
	return qq{SELECT * FROM (
  SELECT min(ts) AS window_start, max(ts) + interval '10 seconds' AS window_end, k, $aggs
    FROM (SELECT *, sum(brk) OVER (PARTITION BY k ORDER BY ts, id ROWS UNBOUNDED PRECEDING) AS isl
            FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts, id)
                                      < interval '10 seconds' THEN 0 ELSE 1 END AS brk
                    FROM $table) a) b
   GROUP BY k, isl) w} . ($where ? " WHERE $where" : '');
}

sub state_table
{
	my ($q) = @_;
	return $node->safe_psql('postgres',
		"SELECT state_table::regclass FROM streamwin.query_catalog WHERE name = '$q'");
}

# The state table of q holds exactly its open sessions: those of the events
# ending after wm (SQL; all of them without).
sub state_matches
{
	my ($table, $q, $wm, $name) = @_;
	results_match($node, "SELECT $SCOLS FROM " . state_table($q),
		want_sessions($table, $wm ? "window_end > $wm" : undef), $name);
	return;
}

# n events into table tab after those there: their nominal times (at_ms,
# after T0) step_ms apart from the last one's, their event times up to 30 s
# earlier (a hash of their number), so that a key's events arrive out of
# order but none later than the 1-minute watermark.  k: the key, SQL over g
# (1..n) and b (the number of events before).
psql_ok($node, q{
CREATE PROCEDURE events(tab text, n int, k text, step_ms float8) LANGUAGE plpgsql AS $p$
BEGIN
    EXECUTE format($s$
        INSERT INTO %I (k, v, ts, at_ms)
        SELECT %s, abs(hashint4(b + g)) %% 1000,
               timestamptz '2024-01-01 00:00:00+00' + (a + g * %s)::bigint * interval '1 ms'
                 - (abs(hashint4(b + g + 7777777)) %% 30000) * interval '1 ms',
               (a + g * %s)::bigint
          FROM (SELECT count(*)::int AS b, coalesce(max(at_ms), 0) AS a FROM %I) c,
               generate_series(1, %s) g$s$,
        tab, k, step_ms, step_ms, tab, n);
END $p$;
}, 'a procedure that makes events');

# The events table evN of a part, and its table source sN of batches of
# `batch` rows.
sub events_source_sql
{
	my ($n, $batch) = @_;
	return qq{
CREATE TABLE ev$n (id bigserial, k int, v int, ts timestamptz, at_ms bigint);
SELECT streamwin.create_table_source('s$n', 'ev$n', '{"max_records_per_batch": $batch}');
};
}

# A session query of several parts over source src (gap 10 s, per key):
# with a transition state (var_samp) or ("plain") with plain values only;
# args are create_query's other arguments.
sub session_query_sql
{
	my ($q, $kind, $src, $args) = @_;
	my $var = $kind eq 'plain' ? '' : ', var_samp(v) AS var';
	return qq{SELECT streamwin.create_query('$q',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi$var
       FROM $src GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    $args);
};
}

# ==== 1. the memory cap, in a session =========================================

psql_ok($node, events_source_sql(1, 250)
	  . session_query_sql('m_update', 'var', 's1', q{watermark => '1 minute', output_mode => 'update', start => false})
	  . session_query_sql('m_append', 'plain', 's1', q{watermark => '1 minute', start => false})
	  . session_query_sql('m_complete', 'plain', 's1', q{output_mode => 'complete', start => false}),
	'part 1: three session queries over a table source');
my @m = qw(m_update m_append m_complete);

my $s1 = store_session($node);
sess_ok($s1, "SET streamwin.state_memory = '1MB'");

sub catch_up_all
{
	sess_ok($s1, "CALL streamwin.catch_up('$_')") for @m;
	return;
}

sub check_part1
{
	my ($when) = @_;
	my $wm = "(SELECT max(ts) - interval '1 minute' FROM ev1)";
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM streamwin.queries WHERE name IN ('m_update', 'm_append') AND watermark = $wm"),
		'2', "the watermark is max(ts) - 1 min of the events $when");
	is( $node->safe_psql('postgres',
			"SELECT coalesce(sum(late_rows_dropped), 0) FROM streamwin.progress WHERE query IN ('m_update', 'm_append')"),
		'0', "no row was late $when");
	results_match($node, "SELECT $VCOLS FROM m_update", want_sessions('ev1', undef, 1),
		"m_update: every session $when");
	state_matches('ev1', 'm_update', $wm, "m_update: its state table holds the open sessions $when");
	results_match($node, "SELECT $COLS FROM m_append", want_sessions('ev1', "window_end <= $wm"),
		"m_append: the closed sessions $when");
	state_matches('ev1', 'm_append', $wm, "m_append: its state table holds the open sessions $when");
	results_match($node, "SELECT $COLS FROM m_complete", want_sessions('ev1'),
		"m_complete: every session $when");
	state_matches('ev1', 'm_complete', undef, "m_complete: its state table holds every session $when");
	return;
}

# (a) 3,000 events over 25 minutes, 20 keys: a small state, in memory;
# bridged sessions, and sessions that start earlier, across batches.
psql_ok($node, "CALL events('ev1', 3000, 'abs(hashint4(b + g + 99)) % 20', 500)");
catch_up_all();
check_part1('with a small state');
is(join(' ', map { store_switches($node, $_) } @m), '0/0 0/0 0/0', 'a small state stays in memory');
cmp_ok($node->safe_psql('postgres', q{
SELECT count(*) FROM (
  SELECT 1 FROM m_update u JOIN ev1 e ON e.k = u.k AND e.ts >= u.window_start AND e.ts < u.window_end
   GROUP BY u.window_start, u.k HAVING min((e.id - 1) / 250) < max((e.id - 1) / 250)) x}), '>', 50,
	'many sessions hold events of several batches');

# (b) 10,000 events in 5 s of event time, each of a new key: every query's
# state grows past 1MB in the middle of 40 batches.
psql_ok($node, "CALL events('ev1', 10000, '1000 + b + g', 0.5)");
catch_up_all();
is(join(' ', map { store_switches($node, $_) } @m), '1/0 1/0 1/0',
	'each query says once that its state no longer fits in streamwin.state_memory');
ok(table_mode($node, $_), "$_ runs on its state table, which has its indexes") for @m;
check_part1('after the state outgrew the cap');

# (c) on the state tables: 3,000 events to the keys of (a) and of (b)
# (4001 to 14000), whose sessions they extend or start earlier.
psql_ok($node, "CALL events('ev1', 3000, 'CASE WHEN g % 2 = 0 THEN 4000 + g ELSE g % 20 END', 1)");
catch_up_all();
check_part1('on the state tables');

# (d) the watermark moves on: 2,000 events over 20 minutes with 20 keys
# close the sessions of (b) and (c).  Within the next 100 batches (empty
# ones count) the update and append queries fit in memory again; complete
# mode keeps every session.
psql_ok($node, "CALL events('ev1', 2000, 'abs(hashint4(b + g)) % 20', 600)");
catch_up_all();
check_part1('after sessions closed under the watermark');
for my $q (@m)
{
	sess_ok($s1, join('', ("SELECT streamwin.run_batch('$q') IS NOT NULL;\n") x 100));
}
is(join(' ', map { store_switches($node, $_) } @m), '1/1 1/1 1/0',
	'within 100 batches the watermarked queries fit in memory again, complete mode does not');
# a store keeps its table's indexes up to date for cold batches (op_store.h)
ok(table_mode($node, 'm_update') && table_mode($node, 'm_append'), 'their stores keep their state tables\' indexes');

# (e) in memory again: 2,000 more events.
psql_ok($node, "CALL events('ev1', 2000, 'abs(hashint4(b + g + 5)) % 20', 400)");
catch_up_all();
check_part1('back in memory');

checkpoint_matches($node, $_, $s1, sub { $node->safe_psql('postgres', "CALL events('ev1', 20, '(b + g) % 20', 300)") },
	'after all that')
  for @m;
catch_up_all();
check_part1('at the end');
$s1->quit;

# ==== 2. a worker restarts with a large state =================================

# Update mode without a watermark: every session stays open.  Each of
# 20,000 keys gets two sessions, at 0 s and at 15 s; after each restart,
# events bridge them (at 8 s), reach back before the first (at -5 s), or
# start a third (at 40 s): a store that did not load its sessions would
# make new ones instead of merging.
psql_ok($node, q{
CREATE TABLE ev2 (id bigserial, k int, v int, ts timestamptz);
SELECT streamwin.create_table_source('s2', 'ev2', '{"max_records_per_batch": 20000}');
SELECT streamwin.create_query('w_big',
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi
       FROM s2 GROUP BY streamwin.session(ts, '10 seconds'), k$q$,
    output_mode => 'update', trigger_interval => '50 ms');
CREATE PROCEDURE events2(first int, last int, at_s int) LANGUAGE sql AS $p$
    INSERT INTO ev2 (k, v, ts)
    SELECT g, (g * 7919 + at_s) % 1000, timestamptz '2024-01-01 00:00:00+00' + at_s * interval '1 second'
      FROM generate_series(first, last) g $p$;
}, 'part 2: a running session query, in a worker');

sub check_part2
{
	my ($when) = @_;
	wait_results_match($node, "SELECT $COLS FROM w_big", want_sessions('ev2'), "w_big: every session $when");
	state_matches('ev2', 'w_big', undef, "w_big: its state table holds every session $when");
	return;
}

psql_ok($node, 'CALL events2(1, 20000, 0); CALL events2(1, 20000, 15)');
check_part2('with 40,000 sessions');
is($node->safe_psql('postgres', 'SELECT count(*) FROM w_big'), '40000', 'two sessions per key');

psql_ok($node, "SELECT streamwin.stop_query('w_big')");
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'w_big'", 't',
	'w_big: the worker is gone after stop_query');
psql_ok($node, 'CALL events2(1, 5000, 8); CALL events2(5001, 10000, -5)');
psql_ok($node, "SELECT streamwin.start_query('w_big')");
check_part2('after stop_query, events that bridge and reach back, start_query');
is($node->safe_psql('postgres', 'SELECT count(*) FROM w_big WHERE k <= 5000'), '5000',
	'bridged: one session for each of those keys, the rows of the merged ones gone');

my $pid2 = worker_pid($node, 'w_big', 'after start_query');
kill 'TERM', $pid2;
wait_until($node, "SELECT coalesce(worker_pid, 0) <> $pid2 FROM streamwin.queries WHERE name = 'w_big'",
	't', 'w_big: the worker ends on SIGTERM');
psql_ok($node, 'CALL events2(5001, 15000, 8); CALL events2(15001, 25000, 40)');
psql_ok($node, "SELECT streamwin.start_query('w_big')");
check_part2('after SIGTERM of the worker, events, a new worker');

psql_ok($node, "SELECT streamwin.stop_query('w_big')");
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'w_big'", 't',
	'w_big: stopped');
{
	my $s = store_session($node);
	my $at = 50;
	checkpoint_matches($node, 'w_big', $s, sub { $node->safe_psql('postgres', "CALL events2(1, 200, $at)"); $at += 3 },
		'after the worker');
	$s->quit;
}

# ==== 3. crashes right after a checkpoint =====================================

# Two running session queries (update and append mode, watermark 1 minute),
# a batch every 100 ms, a checkpoint every 3 batches.  Each round feeds
# events, 30 every 10 ms, until a checkpoint of one query is taken (or the
# batch two after one), and at once kills with SIGKILL its worker or a
# backend that has nothing to do with streamwin: PostgreSQL restarts and
# empties every UNLOGGED table.
psql_ok($node, events_source_sql(3, 1000)
	  . session_query_sql('c_upd', 'var', 's3', q{watermark => '1 minute', output_mode => 'update', trigger_interval => '100 ms'})
	  . session_query_sql('c_app', 'plain', 's3', q{watermark => '1 minute', trigger_interval => '100 ms'})
	  . feed_until_sql(q{CALL events('ev3', 30, 'abs(hashint4(b + g + 3)) % 50', 100)}),
	'part 3: two running session queries with a watermark');

sub check_part3
{
	my ($when) = @_;
	my $wm = "(SELECT max(ts) - interval '1 minute' FROM ev3)";
	wait_results_match($node, "SELECT $VCOLS FROM c_upd", want_sessions('ev3', undef, 1),
		"c_upd: every session $when");
	wait_until($node, "SELECT watermark = $wm FROM streamwin.queries WHERE name = 'c_app'",
		't', "c_app: the watermark reaches max(ts) - 1 min $when");
	results_match($node, "SELECT $COLS FROM c_app", want_sessions('ev3', "window_end <= $wm"),
		"c_app: the closed sessions, each once $when");
	state_matches('ev3', $_, $wm, "$_: its state table holds the open sessions $when") for qw(c_upd c_app);
	return;
}

worker_pid($node, $_, 'at first') for qw(c_upd c_app);
psql_ok($node, "CALL events('ev3', 2000, 'abs(hashint4(b + g + 3)) % 50', 100)");
check_part3('before any crash');

# One round of crash_round (StreamwinTest.pm) over the running queries.
sub crash
{
	return crash_round($node, [qw(c_upd c_app)], \&check_part3, @_);
}

crash('c_upd', 'checkpoint_batch_id > C0', 'worker', 'SIGKILL of the worker right after its checkpoint');
crash('c_app', 'checkpoint_batch_id > C0', 'backend',
	"SIGKILL of a backend right after c_app's checkpoint");
crash('c_app', 'checkpoint_batch_id > C0 AND last_batch_id >= checkpoint_batch_id + 2', 'worker',
	'SIGKILL of the worker two batches after its checkpoint');
crash('c_upd', 'checkpoint_batch_id > C0 AND last_batch_id >= checkpoint_batch_id + 2', 'backend',
	"SIGKILL of a backend two batches after c_upd's checkpoint");

psql_ok($node, "SELECT streamwin.stop_query('c_upd'), streamwin.stop_query('c_app')");
wait_until($node,
	"SELECT count(*) FROM streamwin.queries WHERE name IN ('c_upd', 'c_app') AND worker_pid IS NOT NULL",
	'0', 'part 3: the queries stopped');
{
	my $s = store_session($node);
	checkpoint_matches($node, $_, $s,
		sub { $node->safe_psql('postgres', "CALL events('ev3', 30, 'abs(hashint4(b + g + 3)) % 50', 100)") },
		'after the crashes')
	  for qw(c_upd c_app);
	sess_ok($s, "CALL streamwin.catch_up('$_')") for qw(c_upd c_app);
	$s->quit;
	check_part3('at the end');
}

# ==== 4. plain partials of one row ===========================================

# A session query of plain values gives the store each row as a session
# of its own, with the partials of that row alone (row_partial_sql in
# src/compile/compile_aggregate.c).  Every plain kind, over NULLs and FILTERs:
# count of a value that may be NULL and of a row value with a NULL field
# (counted: the value is not NULL), count(*) and sum with FILTER, sums of
# numeric and of float8 (quarters, so the sum is exact in any order),
# min, max, bool_and, every, bool_or; and rows that share their key and
# event time.  Update and append mode, in batches of 70 rows whose
# sessions the next batches extend, start earlier and bridge, each
# against plain SQL over the same events.
my $PAGGS = 'count(v) AS nv, count(ROW(v, NULL::int)) AS nr, count(*) FILTER (WHERE v > 500) AS nf,
    sum(v) FILTER (WHERE b) AS sf, sum(x) AS sx, sum(f) AS sfl, min(x) AS lo, max(f) AS hi,
    bool_and(b) AS ba, every(v IS NOT NULL) AS ev, bool_or(b) AS bo';
my $PCOLS = 'window_start, window_end, k, nv, nr, nf, sf, sx, sfl, lo, hi, ba, ev, bo';
psql_ok($node, qq{
CREATE TABLE ev4 (id bigserial, k int, v int, x numeric, f float8, b bool, ts timestamptz);
SELECT streamwin.create_table_source('s4', 'ev4', '{"max_records_per_batch": 70}');
SELECT streamwin.create_query('p_upd',
    \$q\$SELECT k, $PAGGS FROM s4 GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('p_app',
    \$q\$SELECT k, $PAGGS FROM s4 GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    watermark => '1 minute', start => false);
});

# 7 keys; event times on a 250 ms grid up to 30 s out of order, so rows
# share a key and a time; a fifth of v, x, f and b NULL.
psql_ok($node, q{
CREATE PROCEDURE events4(n int) LANGUAGE plpgsql AS $p$
BEGIN
    INSERT INTO ev4 (k, v, x, f, b, ts)
    SELECT abs(hashint4(b + g)) % 7,
           CASE WHEN abs(hashint4(b + g + 1)) % 5 > 0 THEN abs(hashint4(b + g + 2)) % 1000 END,
           CASE WHEN abs(hashint4(b + g + 3)) % 5 > 0 THEN (abs(hashint4(b + g + 4)) % 100000) / 100.0 END,
           CASE WHEN abs(hashint4(b + g + 5)) % 5 > 0 THEN (abs(hashint4(b + g + 6)) % 4000) / 4.0 - 500 END,
           CASE WHEN abs(hashint4(b + g + 7)) % 5 > 0 THEN abs(hashint4(b + g + 8)) % 3 > 0 END,
           timestamptz '2024-01-01 00:00:00+00' + ((b + g) * 2 - abs(hashint4(b + g + 9)) % 120) * interval '250 ms'
      FROM (SELECT count(*)::int AS b FROM ev4) c, generate_series(1, n) g;
END $p$;
CALL events4(1500);
});
my $p4 = store_session($node);
for my $round (1 .. 3)
{
	sess_ok($p4, "CALL streamwin.catch_up('$_')") for qw(p_upd p_app);
	results_match($node, "SELECT $PCOLS FROM p_upd", want_sessions('ev4', undef, undef, $PAGGS),
		"part 4, round $round: p_upd holds every session");
	results_match($node, "SELECT $PCOLS FROM p_app",
		want_sessions('ev4', "window_end <= (SELECT max(ts) - interval '1 minute' FROM ev4)", undef, $PAGGS),
		"part 4, round $round: p_app holds the closed sessions");
	psql_ok($node, 'CALL events4(700)') if $round < 3;
}
$p4->quit;
ok( $node->safe_psql('postgres',
		q{SELECT count(*) FROM (SELECT k, ts FROM ev4 GROUP BY k, ts HAVING count(*) > 1) d}) > 20,
	'part 4: many rows share their key and event time');

# ==== 5. run_available: batches that share one transaction ===================

# The batches of a run_available write their changed sessions' state rows
# at the end of the run (their checkpoints, every 3 batches here, are
# written from memory); a session merged into another or closed before is
# not written, or its row (written before) is deleted.  Update
# mode with a transition state (the executor builds a batch's sessions)
# and append mode of plain values (each row a session), 40 keys whose
# events arrive up to 30 s out of order, 250 a batch.
psql_ok($node, events_source_sql(5, 250)
	  . session_query_sql('r_update', 'var', 's5', q{watermark => '1 minute', output_mode => 'update', start => false})
	  . session_query_sql('r_append', 'plain', 's5', q{watermark => '1 minute', start => false}),
	'part 5: two session queries over a table source');

sub check_part5
{
	my ($when) = @_;
	my $wm = "(SELECT max(ts) - interval '1 minute' FROM ev5)";
	results_match($node, "SELECT $VCOLS FROM r_update", want_sessions('ev5', undef, 1),
		"r_update: every session $when");
	state_matches('ev5', 'r_update', $wm, "r_update: its state table holds the open sessions $when");
	results_match($node, "SELECT $COLS FROM r_append", want_sessions('ev5', "window_end <= $wm"),
		"r_append: the closed sessions $when");
	state_matches('ev5', 'r_append', $wm, "r_append: its state table holds the open sessions $when");
	return;
}

my $s5 = store_session($node);
for my $round (1 .. 3)
{
	psql_ok($node, "CALL events('ev5', 2500, 'abs(hashint4(b + g + $round)) % 40', 200)");
	for my $q (qw(r_update r_append))
	{
		my ($batches) = sess($s5, "SELECT streamwin.run_available('$q')->>'batches'");
		cmp_ok($batches // 0, '>', 3, "part 5, round $round: $q ran its batches in one run_available");
	}
	check_part5("after run_available, round $round");
}
$s5->quit;
cmp_ok($node->safe_psql('postgres', q{
SELECT count(*) FROM (
  SELECT 1 FROM r_update u JOIN ev5 e ON e.k = u.k AND e.ts >= u.window_start AND e.ts < u.window_end
   GROUP BY u.window_start, u.k HAVING min((e.id - 1) / 250) < max((e.id - 1) / 250)) x}), '>', 50,
	'part 5: many sessions hold events of several batches');
# a new session's batches find what the runs kept back
psql_ok($node, "CALL events('ev5', 500, 'abs(hashint4(b + g)) % 40', 200)");
psql_ok($node, "CALL streamwin.catch_up('$_')", "part 5: a new session catches $_ up") for qw(r_update r_append);
check_part5("after a new session's batches");
{
	my $s = store_session($node);
	checkpoint_matches($node, $_, $s, sub { $node->safe_psql('postgres', "CALL events('ev5', 20, '(b + g) % 40', 300)") },
		'at the end of part 5')
	  for qw(r_update r_append);
	$s->quit;
}

# ==== 6. a session extended with its partials unchanged ========================

# An event extends key 1's session and changes no partial (a max it does not
# beat).  A new session loads the store: its group differs from its
# checkpoint row by the end alone, and the next checkpoint must write it.
psql_ok($node, events_source_sql(6, 1000) . q{
SELECT streamwin.create_query('x_max', $q$SELECT k, max(v) AS hi FROM s6
       GROUP BY streamwin.session(ts, '10 seconds'), k$q$,
    watermark => '1 hour', output_mode => 'update', start => false);
INSERT INTO ev6 (k, v, ts) VALUES (1, 5, timestamptz '2024-01-01 00:00:00+00');
}, 'part 6: a session query of max alone');
{
	my $at = 0;
	my $more = sub {
		$at += 1;
		$node->safe_psql('postgres',
			"INSERT INTO ev6 (k, v, ts) VALUES (2, $at, timestamptz '2024-01-01 00:00:00+00' + interval '$at seconds')");
	};
	my $s = store_session($node);
	sess_ok($s, "SELECT streamwin.run_batch('x_max')", 'part 6: a first batch');
	checkpoint_matches($node, 'x_max', $s, $more, 'part 6, before the extension');
	psql_ok($node, "INSERT INTO ev6 (k, v, ts) VALUES (1, 3, timestamptz '2024-01-01 00:00:05+00')",
		'part 6: an event extends the session of key 1, under its max');
	sess_ok($s, "SELECT streamwin.run_batch('x_max')", 'part 6: a batch reads it');
	$s->quit;
	is( $node->safe_psql('postgres', 'SELECT window_end, "hi$max" FROM ' . state_table('x_max') . ' WHERE k = 1'),
		'2024-01-01 00:00:15+00|5', 'part 6: the state row of key 1 ends 10 s after its second event');
	my $s2 = store_session($node);
	checkpoint_matches($node, 'x_max', $s2, $more, 'part 6, in a new session (it loads the store)');
	$s2->quit;
}
results_match($node, 'SELECT window_start, window_end, k, hi FROM x_max',
	want_sessions('ev6', undef, 0, 'max(v) AS hi'), 'part 6: x_max equals plain SQL');

# Part 7: keys of an extension's type, in a schema of their own, past the
# memory cap.  The statements compare keys by the type's equality (citext:
# 'user1' is 'USER1'), as the store and the result's unique index do; a
# bare = there found pg_catalog's text = through the batch's search_path,
# and on the state table every key of the second batch opened sessions of
# its own beside the first batch's.
psql_ok($node, q{
CREATE SCHEMA ext;
CREATE EXTENSION citext SCHEMA ext;
CREATE TABLE ev7 (id bigserial, k ext.citext, v int, ts timestamptz);
SELECT streamwin.create_table_source('s7', 'ev7');
SELECT streamwin.create_query('ci_sess', $q$SELECT k, streamwin.session(ts, '10 seconds') AS started,
       count(*) AS n, sum(v) AS s
       FROM s7 GROUP BY streamwin.session(ts, '10 seconds'), k$q$,
    output_mode => 'update', start => false);
INSERT INTO ev7 (k, v, ts)
SELECT 'user' || i, 1, timestamptz '2024-01-01 00:00:00+00' FROM generate_series(1, 20000) i;
}, 'part 7: citext keys, 20,000 of them');
{
	my $s = store_session($node);
	sess_ok($s, "SET streamwin.state_memory = '1MB'");
	sess_ok($s, "SELECT streamwin.run_available('ci_sess')", 'part 7: a first batch, past the cap');
	psql_ok($node, q{
INSERT INTO ev7 (k, v, ts)
SELECT 'USER' || i, 2, timestamptz '2024-01-01 00:00:05+00' FROM generate_series(1, 20000) i;
}, 'part 7: each key again, in capitals, within its session');
	sess_ok($s, "SELECT streamwin.run_available('ci_sess')", 'part 7: a second batch');
	$s->quit;
}
is(store_switches($node, 'ci_sess'), '1/0', 'part 7: the sessions run on the state table');
results_match($node, 'SELECT window_start, window_end, lower(k::text), started, n, s FROM ci_sess',
	q{SELECT min(ts), max(ts) + interval '10 seconds', lower(k::text), min(ts), count(*), sum(v) FROM ev7 GROUP BY k},
	'part 7: one session per key, as citext has them, its start under the alias too');

$node->stop;
done_testing();
