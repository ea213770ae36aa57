
# 016_state_store.pl: the state store (src/store_*.c) against plain SQL.
#
# Queries created from 0.5 on keep their open groups in memory, merged in C,
# and write only the changed rows of their UNLOGGED state table and of its
# logged checkpoint, by row location.  Every expectation below is plain SQL
# over the events the query read, kept in an ordinary table (the one a
# table source reads, or a copy of what went to the Kafka topic), compared
# as multisets; nothing is a number copied from a run.
#
#   1. The memory cap, in a session (streamwin.state_memory = 1MB, its
#      minimum), over a Kafka topic: three queries (update and append mode
#      over 10-second windows with a watermark, complete mode without a
#      window) whose state grows past the cap in the middle of a stream of
#      small batches switch to their state tables ("does not fit in
#      streamwin.state_memory"), stay exact there, and switch back ("fits
#      in memory again"; tried every 100 batches) when windows closing under
#      the watermark shrink the state, or when the cap is raised.
#   2. A worker with 100,000 open groups (running totals per key, update
#      mode): stop_query and start_query, a SIGTERM of the worker, each
#      followed by events to old and new keys; then the cap lowered under
#      the running worker (ALTER SYSTEM) and raised again.
#   3. Crashes (SIGKILL of a worker, or of an unrelated backend) right after
#      a checkpoint and two batches after one, of queries in update and in
#      append mode, and of a deduplicating transform (its keys' checkpoint
#      is written incrementally too): each restores its checkpoint,
#      replays, reads on.
#   4. Consistency, in sessions whose stores stay loaded: a batch that
#      fails after the store merged its groups (a CHECK constraint on the
#      result table), batches rolled back by the user (also two in one
#      transaction, and run_available in a transaction that fails), another
#      session's batches in between, reset_query by either session;
#      VACUUM FULL of the state, checkpoint and result tables; on the state
#      table (the cap set in the session), a rolled-back batch that made its
#      index, and another session's store that writes it.  Which
#      statement writes each changed group's result row (INSERT, UPDATE by
#      location, upsert), from the store's DEBUG1 message.  A store whose
#      load failed half way loads again at the next batch.
#   5. In every part, after many batches: the checkpoint table equals the
#      state table (or the table of dedup keys), row for row.
#   6. run_available, whose batches share one transaction and keep their
#      state rows back until the cap or the run's end (checkpoints are
#      written from memory): fewer rows written than batch by batch, the
#      state tables exact after it, a new session's batches, a crash after
#      it, a run that fails in its middle, and the cap crossed in its
#      middle.
#
# Exact at every step means: the result table equals plain SQL over the
# events (update mode: every window; append mode: the windows closed by
# the watermark, which is max(ts) - 5 s of what was read; complete mode:
# every key), and the state table holds exactly the open groups, recounted
# from the events.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";

my $node = new_node('store',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  # (its table sources' queries checkpoint every 3 batches, not every
	  # batch, so that crashes find batches to replay)
	  . "streamwin.table_checkpoint_every_batch = off\n"
	  . "restart_after_crash = on\n");

# ---- helpers ----------------------------------------------------------------

# Insert n events into table: g runs 1..n in the expressions (SQL) for k, v
# and ts.
sub insert_events
{
	my ($table, $n, $k, $v, $ts) = @_;
	$node->safe_psql('postgres',
		"INSERT INTO $table (k, v, ts) SELECT $k, $v, $ts FROM generate_series(1, $n) g");
	return;
}

# The aggregates of the windowed queries, as plain SQL computes them.
my $WAGGS = 'count(*)::bigint AS n, sum(v)::bigint AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a';
my $WCOLS = 'window_start, window_end, k, n, s, lo, hi, a';

# Plain SQL: the 10-second windows per k over the events of table, with
# extra conditions on them (e.g. closed by a watermark).
sub want_windows
{
	my ($table, $where) = @_;
	return "SELECT * FROM ("
	  . windows_sql(table => $table, size => 10, keys => 'k', aggs => $WAGGS)
	  . ") w" . ($where ? " WHERE $where" : '');
}

# The watermark of query q, as it must be after reading all of table:
# max(ts) - 5 s (one partition).  Checked against what the query says.
sub watermark_of
{
	my ($table, $q) = @_;
	my $want = "(SELECT max(ts) - interval '5 seconds' FROM $table)";
	is( $node->safe_psql('postgres',
			"SELECT watermark = $want FROM streamwin.queries WHERE name = '$q'"),
		't', "$q: the watermark is max(ts) - 5 s of the events");
	return $want;
}

sub state_table
{
	my ($q) = @_;
	return $node->safe_psql('postgres',
		"SELECT state_table FROM streamwin.queries WHERE name = '$q'");
}

# The state table of a windowed query holds exactly its open groups: the
# windows of the events that end after the watermark, with each partial.
# avg(v) keeps only its count: its sum is sum(v)'s ("s$sum").
sub windowed_state_matches
{
	my ($table, $q, $wm, $name) = @_;
	results_match($node,
		'SELECT window_start, window_end, k, "n$count", "s$sum", "lo$min", "hi$max", "a$count" FROM '
		  . state_table($q),
		"SELECT * FROM ("
		  . windows_sql(table => $table, size => 10, keys => 'k',
			aggs => 'count(*), sum(v), min(v), max(v), count(v)')
		  . ") w WHERE window_end > $wm",
		$name);
	return;
}

# The UNLOGGED table of the keys a deduplicating query has seen.
sub dedup_table
{
	my ($q) = @_;
	return $node->safe_psql('postgres',
		"SELECT dedup_table::regclass FROM streamwin.query_catalog WHERE name = '$q'");
}

# ==== 1. the memory cap, in a session =========================================

# The events go to a Kafka topic of one partition (the test broker), and
# into table ev1 for plain SQL: empty batches of a Kafka source, of which
# this part runs hundreds, cost next to nothing.
my $broker = StreamwinTest::Broker->start(topics => { ev1 => 1 });
my $brokers = $broker->bootstrap;
psql_ok($node, qq{
CREATE TABLE ev1 (id bigserial, k int, v int, ts timestamptz);
SELECT streamwin.create_kafka_source('s1', '$brokers', 'ev1', 'k int, v int, ts timestamptz',
    options => '{"max_records_per_batch": 250}');
}, 'part 1: a Kafka source');
psql_ok($node, q{
SELECT streamwin.create_query('m_update',
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a
       FROM s1 GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', output_mode => 'update', start => false);
SELECT streamwin.create_query('m_append',
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a
       FROM s1 GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', start => false);
SELECT streamwin.create_query('m_complete',
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi FROM s1 GROUP BY k$q$,
    output_mode => 'complete', start => false);
}, 'part 1: three queries over it');
# A pipeline: m_append's result is the table source of a transform.  Its
# rows go in many to a page where the store writes them (part (e) on),
# and the transform must see each of them once, as logical decoding
# hands them over.
psql_ok($node, q{
SELECT streamwin.create_table_source('m_append_rows', 'm_append');
SELECT streamwin.create_query('m_chain',
    'SELECT window_start, window_end, k, n, s, lo, hi FROM m_append_rows', start => false);
}, "part 1: a transform of m_append's result");

# One session runs every batch, so that each query's store stays loaded
# from batch to batch: what it holds grows in memory, past the cap.
my $s1 = store_session($node);
sess_ok($s1, "SET streamwin.state_memory = '1MB'");

# Catch up: every query reads the whole topic, 250 events a batch, each
# batch committed (CALL catch_up).
sub catch_up_all
{
	for my $q (qw(m_update m_append m_complete))
	{
		sess_ok($s1, "CALL streamwin.catch_up('$q')");
	}
	return;
}

# n events into ev1 (expressions as for insert_events), and the same to
# the topic, in order
sub events1
{
	my ($n, $k, $v, $ts) = @_;
	my $last = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM ev1');
	insert_events('ev1', $n, $k, $v, $ts);
	my $json = $node->safe_psql('postgres',
		"SELECT json_build_object('k', k, 'v', v, 'ts', ts) FROM ev1 WHERE id > $last ORDER BY id");
	$broker->produce('ev1', [ split /\n/, $json ], partition => 0);
	return;
}

# n batches of each query, which find nothing to read
sub empty_batches
{
	my ($n, @q) = @_;
	for my $q (@q)
	{
		sess_ok($s1, join('', ("SELECT streamwin.run_batch('$q') IS NOT NULL;\n") x $n));
	}
	return;
}

# Every query exact, and their state tables.
sub check_part1
{
	my ($when) = @_;
	results_match($node, "SELECT $WCOLS FROM m_update", want_windows('ev1'),
		"m_update: every window $when");
	my $wm = watermark_of('ev1', 'm_update');
	windowed_state_matches('ev1', 'm_update', $wm, "m_update: its state table holds the open groups $when");
	$wm = watermark_of('ev1', 'm_append');
	results_match($node, "SELECT $WCOLS FROM m_append", want_windows('ev1', "window_end <= $wm"),
		"m_append: the closed windows $when");
	windowed_state_matches('ev1', 'm_append', $wm, "m_append: its state table holds the open groups $when");
	results_match($node, 'SELECT k, n, s, lo, hi FROM m_complete',
		'SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi FROM ev1 GROUP BY k',
		"m_complete: every key $when");
	results_match($node,
		'SELECT k, "n$count", "s$sum", "lo$min", "hi$max" FROM ' . state_table('m_complete'),
		'SELECT k, count(*), sum(v), min(v), max(v) FROM ev1 GROUP BY k',
		"m_complete: its state table holds every key $when");
	return;
}

# (a) 1,000 events over 10 s, 50 keys: a small state, in memory.
events1( 1000, 'g % 50', '(g * 7919) % 1000', "$T0 + g * interval '10 ms'");
catch_up_all();
check_part1('with a small state');
is(join(' ', map { store_switches($node, $_) } qw(m_update m_append m_complete)), '0/0 0/0 0/0',
	'a small state stays in memory');

# (b) 6,000 events in 2 s, each of a new key: every query's state grows
# past 1MB in the middle of 24 batches, with the store loaded all along.
events1( 6000, '1000 + g', '(g * 104729) % 1000', "$T0 + interval '10 s' + g * interval '300 us'");
catch_up_all();
is(join(' ', map { store_switches($node, $_) } qw(m_update m_append m_complete)), '1/0 1/0 1/0',
	'each query says once that its state no longer fits in streamwin.state_memory');
ok(table_mode($node, $_), "$_ runs on its state table, which has its index") for qw(m_update m_append m_complete);
check_part1('after the state outgrew the cap in the middle of a stream');

# (c) on the state tables: 3,000 events, half of them to keys of (b) (their
# groups change), half to new keys.
events1( 3000, 'CASE WHEN g % 2 = 0 THEN 1000 + g ELSE 20000 + g END', '(g * 31) % 1000',
	"$T0 + interval '12 s' + g * interval '500 us'");
catch_up_all();
check_part1('on the state tables');

# (d) the watermark moves on: 2,500 events over 50 s with 20 keys close
# the windows of (a) to (c), so that the windowed queries' state shrinks;
# complete mode keeps every key.  Within the next 100 batches (empty ones
# count) each tries its store again.
events1( 2500, 'g % 20', '(g * 13) % 1000', "$T0 + interval '14 s' + g * interval '20 ms'");
catch_up_all();
check_part1('after windows closed under the watermark');
empty_batches(100, qw(m_update m_append m_complete));
is(join(' ', map { store_switches($node, $_) } qw(m_update m_append m_complete)), '1/1 1/1 1/0',
	'within 100 batches the windowed queries fit in memory again, complete mode does not');
# back in memory, a store keeps its table's index up to date for the
# batches that run on the table without loading it (op_store.h)
ok(table_mode($node, 'm_update') && table_mode($node, 'm_append'), 'their stores keep their state tables\' index');
ok(table_mode($node, 'm_complete'), 'm_complete still runs on its state table');

# (e) in memory again: 2,000 events to old and new keys.  The windows of
# (d) close, and m_append writes their rows with the multi-insert of a
# plain result table (its DEBUG1 messages): as many as its result gains.
events1( 2000, 'CASE WHEN g % 2 = 0 THEN g % 20 ELSE 30000 + g END', '(g * 17) % 1000',
	"$T0 + interval '64 s' + g * interval '5 ms'");
{
	my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM m_append');
	my ($out, $err) = sess($s1,
		"SET client_min_messages = debug1; CALL streamwin.catch_up('m_append');"
		  . " SET client_min_messages = warning");
	my $gained = $node->safe_psql('postgres', 'SELECT count(*) FROM m_append') - $before;
	my $inserted = 0;
	$inserted += $_ for $err =~ /(\d+) rows inserted into "m_append" many to a page/g;
	ok($gained > 0, "m_append: windows closed in (e) ($gained rows)");
	is($inserted, $gained, 'm_append: every closed window is written many rows to a page');
}
catch_up_all();
check_part1('back in memory');

# (f) the cap raised: complete mode tries within 100 batches and fits.
sess_ok($s1, "SET streamwin.state_memory = '64MB'");
empty_batches(100, 'm_complete');
is(store_switches($node, 'm_complete'), '1/1', 'm_complete fits in memory once the cap is raised');
ok(!table_mode($node, 'm_complete'), 'and its state table is without index again');
events1( 1000, 'CASE WHEN g % 2 = 0 THEN 1000 + g ELSE 40000 + g END', '(g * 19) % 1000',
	"$T0 + interval '74 s' + g * interval '5 ms'");
catch_up_all();
check_part1('after the cap was raised');

# After some 500 batches of each, switches both ways, inserts, updates and
# evictions: each checkpoint table is its state table.
{
	my $at = 80_000;
	my $more = sub {
		events1( 20, 'CASE WHEN g % 2 = 0 THEN g % 20 ELSE 1000 + g END', 'g',
			"$T0 + ($at + g * 10) * interval '1 ms'");
		$at += 200;
	};
	checkpoint_matches($node, $_, $s1, $more, 'after all that') for qw(m_update m_append m_complete);
	catch_up_all();
	check_part1('at the end');
}
sess_ok($s1, "CALL streamwin.catch_up('m_chain')");
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM m_append'), '>', 1000,
	'm_append: more than 1,000 closed windows at the end of part 1');
results_match($node, 'SELECT window_start, window_end, k, n, s, lo, hi FROM m_chain',
	'SELECT window_start, window_end, k, n, s, lo, hi FROM m_append',
	"m_chain: each row of m_append's result once, however it was written");
$s1->quit;
$broker->stop;

# ==== 2. a worker restarts with a large state =================================

# Running totals per key without a window, in update mode: every group
# stays open, and events after each restart update old groups again (a
# store that did not load them would count those from zero) and add new
# ones.  100,000 keys first; 50,000 events a batch.
psql_ok($node, q{
CREATE TABLE ev2 (id bigserial, k int, v int, ts timestamptz);
SELECT streamwin.create_table_source('s2', 'ev2', '{"max_records_per_batch": 50000}');
SELECT streamwin.create_query('w_big',
    'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS hi FROM s2 GROUP BY k',
    output_mode => 'update', trigger_interval => '50 ms');
}, 'part 2: a running query without a window, in a worker');

my $want2 = 'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS hi FROM ev2 GROUP BY k';

# The result exact; with $state, the state table too (in between, the
# results of the next events show what the state held).
sub check_part2
{
	my ($when, $state) = @_;
	wait_results_match($node, 'SELECT k, n, s, hi FROM w_big', $want2, "w_big: every key $when");
	results_match($node, 'SELECT k, "n$count", "s$sum", "hi$max" FROM ' . state_table('w_big'),
		$want2, "w_big: its state table holds every key $when")
	  if $state;
	return;
}

# n events to n keys 7 apart, modulo 150,000 (and seed): most of them
# keys seen before
sub events2
{
	my ($n, $seed) = @_;
	insert_events('ev2', $n, "(g * 7 + $seed) % (150000 + $seed)", "(g * 31 + $seed) % 1000", $T0);
	return;
}

insert_events('ev2', 100_000, 'g', '(g * 7919) % 1000', $T0);
check_part2('with 100,000 keys', 1);
my $pid2 = worker_pid($node, 'w_big', 'at first');

# stop_query: the worker exits after its batch; events meanwhile; the new
# worker loads the store from the state table
psql_ok($node, "SELECT streamwin.stop_query('w_big')");
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'w_big'", 't',
	'w_big: the worker is gone after stop_query');
events2(20_000, 1);
psql_ok($node, "SELECT streamwin.start_query('w_big')");
check_part2('after stop_query, events, start_query');

# SIGTERM: the worker ends after its batch (and is started again)
$pid2 = worker_pid($node, 'w_big', 'after start_query');
kill 'TERM', $pid2;
wait_until($node, "SELECT coalesce(worker_pid, 0) <> $pid2 FROM streamwin.queries WHERE name = 'w_big'",
	't', 'w_big: the worker ends on SIGTERM');
events2(20_000, 2);
psql_ok($node, "SELECT streamwin.start_query('w_big')");
check_part2('after SIGTERM of the worker, events, a new worker');

# The cap in a worker: lowered under the running worker, whose store is
# loaded, then raised again; each way it switches within 100 batches (the
# worker runs one every 50 ms, empty ones too).
sub wait_switches
{
	my ($q, $want, $name) = @_;
	my $limit = time + 60;
	usleep(100_000) while store_switches($node, $q) ne $want && time < $limit;
	is(store_switches($node, $q), $want, $name);
	return;
}
psql_ok($node, "ALTER SYSTEM SET streamwin.state_memory = '1MB'; SELECT pg_reload_conf()");
wait_switches('w_big', '1/0', 'w_big: the worker lets go of its store under a 1MB cap');
wait_until($node, table_mode_sql('w_big'), 't', 'w_big runs on its state table');
events2(20_000, 3);
check_part2('on its state table in the worker');
psql_ok($node, 'ALTER SYSTEM RESET streamwin.state_memory; SELECT pg_reload_conf()');
wait_switches('w_big', '1/1', 'w_big: the worker loads its store again once the cap is raised');
# back on its store, which keeps the index up to date for cold batches
is($node->safe_psql('postgres', table_mode_sql('w_big')), 't', 'w_big: its store keeps the index');
events2(20_000, 4);
check_part2('back in memory in the worker');

psql_ok($node, "SELECT streamwin.stop_query('w_big')");
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'w_big'", 't',
	'w_big: stopped');
{
	my $s = store_session($node);
	my $seed = 5;
	checkpoint_matches($node, 'w_big', $s, sub { events2(100, $seed++) }, 'after the worker');
	sess_ok($s, "CALL streamwin.catch_up('w_big')");
	$s->quit;
	check_part2('at the end', 1);
}

# ==== 3. crashes right after a checkpoint =====================================

# Two running queries over 10-second windows with a 5-second watermark
# (update and append mode), a batch every 100 ms, a checkpoint every 3
# batches.  Each round feeds events, 30 every 10 ms in transactions of
# their own, until a checkpoint of one query is taken (or the batch two
# after one), and at once kills with SIGKILL its worker or a backend that
# has nothing to do with streamwin: either way PostgreSQL restarts and
# empties every UNLOGGED table.  The queries restore their checkpoints,
# replay the batches since, and read on.
psql_ok($node, q{
CREATE TABLE ev3 (id bigserial, k int, v int, ts timestamptz);
SELECT streamwin.create_table_source('s3', 'ev3', '{"max_records_per_batch": 1000}');
SELECT streamwin.create_query('c_upd',
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a
       FROM s3 GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('c_app',
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a
       FROM s3 GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', trigger_interval => '100 ms');
-- A producer that sends each event twice, the second time 1 s later
-- (within the watermark), and a transform that keeps each once.
CREATE TABLE ev3d (id bigint, ts timestamptz);
SELECT streamwin.create_table_source('s3d', 'ev3d', '{"max_records_per_batch": 1000}');
SELECT streamwin.create_query('c_dedup', 'SELECT id, ts FROM s3d',
    dedup_keys => '{id}', watermark => '5 seconds', options => '{"event_time": "ts"}',
    trigger_interval => '100 ms');
-- n events after the ones there are, 10 ms of event time apart, 50 keys;
-- and n events to ev3d, each twice
CREATE PROCEDURE events3(n int) LANGUAGE sql AS $p$
    INSERT INTO ev3 (k, v, ts)
    SELECT (b + g) % 50, ((b + g) * 7907) % 1000, timestamptz '2024-01-01 00:00:00+00' + (b + g) * interval '10 ms'
      FROM (SELECT count(*) AS b FROM ev3) c, generate_series(1, n) g;
    INSERT INTO ev3d (id, ts)
    SELECT b / 2 + g, timestamptz '2024-01-01 00:00:00+00' + (b / 2 + g) * interval '10 ms' + d * interval '1 second'
      FROM (SELECT count(*) AS b FROM ev3d) c, generate_series(1, n) g, generate_series(0, 1) d
     ORDER BY g, d $p$;
}
	  . feed_until_sql(q{CALL events3(30)}),
	'part 3: two running queries over windows with a watermark');

sub check_part3
{
	my ($when) = @_;
	wait_results_match($node, "SELECT $WCOLS FROM c_upd", want_windows('ev3'), "c_upd: every window $when");
	wait_until($node,
		"SELECT watermark = (SELECT max(ts) - interval '5 seconds' FROM ev3) FROM streamwin.queries WHERE name = 'c_app'",
		't', "c_app: the watermark reaches max(ts) - 5 s $when");
	my $wm = "(SELECT max(ts) - interval '5 seconds' FROM ev3)";
	results_match($node, "SELECT $WCOLS FROM c_app", want_windows('ev3', "window_end <= $wm"),
		"c_app: the closed windows, each once $when");
	windowed_state_matches('ev3', $_, $wm, "$_: its state table holds the open groups $when")
	  for qw(c_upd c_app);
	wait_results_match($node, 'SELECT id, ts FROM c_dedup', 'SELECT id, min(ts) FROM ev3d GROUP BY id',
		"c_dedup: every event once $when");
	wait_until($node,
		"SELECT watermark = (SELECT max(ts) - interval '5 seconds' FROM ev3d) FROM streamwin.queries WHERE name = 'c_dedup'",
		't', "c_dedup: the watermark reaches max(ts) - 5 s $when");
	results_match($node, 'SELECT id, event_time FROM ' . dedup_table('c_dedup'),
		"SELECT id, min(ts) FROM ev3d GROUP BY id HAVING min(ts) >= (SELECT max(ts) - interval '5 seconds' FROM ev3d)",
		"c_dedup: its keys are the events the watermark has not passed $when");
	return;
}

worker_pid($node, $_, 'at first') for qw(c_upd c_app);
psql_ok($node, 'CALL events3(2000)');
check_part3('before any crash');

# One round of crash_round (StreamwinTest.pm) over the running queries.
sub crash
{
	return crash_round($node, [qw(c_upd c_app c_dedup)], \&check_part3, @_);
}

crash('c_upd', 'checkpoint_batch_id > C0', 'worker',
	'SIGKILL of the worker right after its checkpoint');
crash('c_app', 'checkpoint_batch_id > C0', 'backend',
	"SIGKILL of a backend right after c_app's checkpoint");
crash('c_app', 'checkpoint_batch_id > C0 AND last_batch_id >= checkpoint_batch_id + 2', 'worker',
	'SIGKILL of the worker two batches after its checkpoint');
crash('c_upd', 'checkpoint_batch_id > C0 AND last_batch_id >= checkpoint_batch_id + 2', 'backend',
	"SIGKILL of a backend two batches after c_upd's checkpoint");
crash('c_dedup', 'checkpoint_batch_id > C0', 'worker',
	'SIGKILL of the dedup worker right after its checkpoint');
crash('c_dedup', 'checkpoint_batch_id > C0 AND last_batch_id >= checkpoint_batch_id + 2', 'backend',
	"SIGKILL of a backend two batches after c_dedup's checkpoint");

# After the crashes: each checkpoint table is its state table (the queries
# stopped, batches run in a session).
psql_ok($node, "SELECT streamwin.stop_query('c_upd'), streamwin.stop_query('c_app'), streamwin.stop_query('c_dedup')");
wait_until($node,
	"SELECT count(*) FROM streamwin.queries WHERE name IN ('c_upd', 'c_app', 'c_dedup') AND worker_pid IS NOT NULL",
	'0', 'part 3: the queries stopped');
{
	my $s = store_session($node);
	checkpoint_matches($node, $_, $s, sub { $node->safe_psql('postgres', 'CALL events3(30)') }, 'after the crashes')
	  for qw(c_upd c_app c_dedup);
	sess_ok($s, "CALL streamwin.catch_up('$_')") for qw(c_upd c_app c_dedup);
	$s->quit;
	check_part3('at the end');
}

# ==== 4. failed, rolled-back and foreign batches, resets, in sessions ========

# Two queries over one table source, 250 events a batch: 10-second windows
# per key in update mode with a watermark (windows close and are evicted),
# and running totals per key without a window.  Session A runs most
# batches, its stores loaded from one batch to the next; session B runs
# some in between.  After reset_query(..., 'latest') at event id R a query
# counts only the events after R: the reset deleted its result rows, and
# its result holds what those events give.
psql_ok($node, q{
CREATE TABLE ev4 (id bigserial, k int, v int, ts timestamptz);
SELECT streamwin.create_table_source('s4', 'ev4', '{"max_records_per_batch": 250}');
SELECT streamwin.create_query('c_win',
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a
       FROM s4 GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', output_mode => 'update', start => false);
SELECT streamwin.create_query('c_run',
    'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS hi FROM s4 GROUP BY k',
    output_mode => 'update', start => false);
}, 'part 4: a table source and two queries over it');
my $sa = store_session($node);
my $sb = store_session($node);
my %reset = (c_win => 0, c_run => 0);
my $t4 = 0;    # ms after T0 where the next events begin

# n events from $t4 on, step_ms apart, to keys k (SQL over g)
sub events4
{
	my ($n, $k, $step_ms) = @_;
	insert_events('ev4', $n, $k, "(g * 7907 + $t4) % 1000",
		"$T0 + ($t4 + g * $step_ms) * interval '1 ms'");
	$t4 += $n * $step_ms;
	return;
}

sub last_id
{
	return $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM ev4');
}

# Plain SQL for q: the groups of the events since its last reset (id > R),
# and the rows its result keeps from before.
sub want4
{
	my ($q) = @_;
	my $r = $reset{$q};
	return "SELECT k, count(*)::bigint AS n, sum(v)::bigint AS s, max(v) AS hi FROM ev4 WHERE id > $r GROUP BY k"
	  if $q eq 'c_run';
	return want_windows("(SELECT * FROM ev4 WHERE id > $r)");
}

# Both queries exact, and their state tables hold exactly their open groups.
sub check_part4
{
	my ($when) = @_;
	my $r = $reset{c_win};
	results_match($node, "SELECT $WCOLS FROM c_win", want4('c_win'), "c_win: every window $when");
	windowed_state_matches("(SELECT * FROM ev4 WHERE id > $r)", 'c_win',
		"(SELECT max(ts) - interval '5 seconds' FROM ev4 WHERE id > $r)",
		"c_win: its state table holds the open groups $when");
	results_match($node, 'SELECT k, n, s, hi FROM c_run', want4('c_run'), "c_run: every key $when");
	results_match($node, 'SELECT k, "n$count", "s$sum", "hi$max" FROM ' . state_table('c_run'),
		"SELECT k, count(*), sum(v), max(v) FROM ev4 WHERE id > $reset{c_run} GROUP BY k",
		"c_run: its state table holds every key $when");
	return;
}

sub catch_up4
{
	my ($s) = @_;
	sess_ok($s, "CALL streamwin.catch_up('$_')") for qw(c_win c_run);
	return;
}

# (a) 3,000 events over 30 s, 200 keys
events4(3000, 'g % 200', 10);
catch_up4($sa);
check_part4('after session A caught up');

# (b) a batch that fails after the store merged its groups: CHECK
# constraints on the result tables that the next batch violates (key 0
# gets 250 events), dropped after the failure
{
	my $n0 = $node->safe_psql('postgres', 'SELECT max(n) FROM c_run WHERE k = 0');
	$node->safe_psql('postgres', "ALTER TABLE c_run ADD CONSTRAINT few CHECK (n < $n0 + 100);"
		  . "ALTER TABLE c_win ADD CONSTRAINT few CHECK (n < 100)");
	events4(500, '0', 2);
	for my $q (qw(c_win c_run))
	{
		my ($out, $err) = sess($sa, "SELECT streamwin.run_batch('$q')");
		like($err, qr/violates check constraint "few"/, "$q: a batch fails on the result table's constraint");
	}
	$node->safe_psql('postgres', 'ALTER TABLE c_run DROP CONSTRAINT few; ALTER TABLE c_win DROP CONSTRAINT few');
	catch_up4($sa);
	check_part4('after a failed batch');
}

# (c) batches the user rolls back: one of each query, then two in a
# transaction, then run_available in a transaction that fails after it
# (a table source's slot may only be confirmed from committed positions:
# the second batch of a transaction must not release what the first one's
# rollback needs again)
events4(1000, 'g % 300', 5);
sess_ok($sa, "BEGIN; SELECT streamwin.run_batch('c_win'), streamwin.run_batch('c_run'); ROLLBACK");
sess_ok($sa, "BEGIN; SELECT streamwin.run_batch('c_win'), streamwin.run_batch('c_run');"
	  . "SELECT streamwin.run_batch('c_win'), streamwin.run_batch('c_run'); ROLLBACK");
{
	my ($out, $err) = sess($sa, "BEGIN; SELECT streamwin.run_available('c_win'), streamwin.run_available('c_run');"
		  . "SELECT 1 / 0; ROLLBACK");
	like($err, qr/division by zero/, 'run_available in a transaction that fails');
}
catch_up4($sa);
check_part4('after batches rolled back, then caught up');

# (d) session B's batches between session A's
events4(1000, 'g % 250', 5);
for my $s ($sa, $sb, $sb, $sa, $sb, $sa)
{
	sess_ok($s, "SELECT streamwin.run_batch('c_win'), streamwin.run_batch('c_run')");
}
catch_up4($sa);
check_part4("after session B's batches between session A's");

# (e) reset_query: of c_run by session B, of c_win by session A; the
# events after it go to old and new keys, across the windows open before
events4(500, 'g % 100', 5);
catch_up4($sa);
$reset{c_run} = last_id();
sess_ok($sb, "SELECT streamwin.reset_query('c_run', 'latest')");
$reset{c_win} = last_id();
sess_ok($sa, "SELECT streamwin.reset_query('c_win', 'latest')");
events4(1500, 'g % 400', 10);
catch_up4($sa);
check_part4('after reset_query');

# (f) VACUUM FULL (or CLUSTER) rewrites a table: every row moves, and the
# locations a store keeps of them are stale.  The next batch must load the
# store again, rather than update and delete the rows now at those
# locations.  Session A's store of c_win updated its rows many times over,
# so the rewrite compacts them.
{
	my $ckpt = $node->safe_psql('postgres',
		"SELECT checkpoint_table::regclass FROM streamwin.query_catalog WHERE name = 'c_win'");
	my $st = state_table('c_win');
	$node->safe_psql('postgres', "VACUUM FULL $st, $ckpt, c_win");
}
events4(1500, 'g % 400', 10);
catch_up4($sa);
check_part4('after VACUUM FULL of the state, checkpoint and result tables');
checkpoint_matches($node, 'c_win', $sa, sub { events4(20, 'g % 400', 10) }, 'after VACUUM FULL');
{
	my $sc = store_session($node);
	events4(500, 'g % 450', 10);
	sess_ok($sc, "CALL streamwin.catch_up('$_')") for qw(c_win c_run);
	check_part4('in a new session, which loads the stores anew');
	$sc->quit;
}
# A store that loads says how many groups it read (DEBUG1): as many as
# its state table holds before the batch merges any.
{
	my $st = state_table('c_run');
	my $rows = $node->safe_psql('postgres', "SELECT count(*) FROM $st");
	(my $relname = $st) =~ s/^.*\.//;
	events4(100, 'g % 450', 10);
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET client_min_messages = debug1; SELECT streamwin.run_batch('c_run') IS NOT NULL");
	is($rc, 0, 'c_run: a batch in a new session, with DEBUG1 messages');
	like($err, qr/state store of table "\Q$relname\E" loaded $rows groups into \d+ kB/,
		"c_run: its store's load reports the $rows groups of its state table");
	catch_up4($sa);
	check_part4('after a batch in a session of its own');
}

# (g) which statement writes each changed group's result row, from the
# store's DEBUG1 message, in session A whose store stays loaded: four
# batches over the same 250 keys (one batch each: the source's
# max_records_per_batch).  Each batch writes a row for every key it read
# (plain SQL over its events), and a key old to the result is never
# inserted.  A key's first batch inserts it, or upserts it while inserts
# are paused (after a unique violation, as part (c)'s replay had); an
# INSERT does not learn where its row went, an upsert does (RETURNING), so
# from the third batch on every row is updated at its known location.
{
	my $batch_events = '(SELECT k FROM ev4 ORDER BY id DESC LIMIT 250) e';
	for my $i (0 .. 3)
	{
		events4(250, '20000 + g', 1);
		my ($keys, $new) = split /\|/, $node->safe_psql('postgres',
			"SELECT count(DISTINCT k), count(DISTINCT k) FILTER (WHERE NOT EXISTS"
			  . " (SELECT FROM c_run r WHERE r.k = e.k)) FROM $batch_events");
		my ($out, $err) = sess($sa,
			"SET client_min_messages = debug1; SELECT streamwin.run_batch('c_run') IS NOT NULL;"
			  . " SET client_min_messages = warning");
		my ($n, $known, $other) =
		  $err =~ /query "c_run" writes (\d+) new, (\d+) known and (\d+) other result rows/
		  or fail("c_run: batch $i reports the rows it writes"), diag($err), next;
		is($n + $known + $other, $keys, "c_run: batch $i writes a row for each of its $keys keys");
		ok($n <= $new, "c_run: batch $i inserts only keys new to the result ($n of $new)");
		is("$n $known $other", "0 $keys 0", "c_run: batch $i updates every row at its known location")
		  if $i >= 2;
	}
	catch_up4($sa);
	check_part4('after batches over the same keys');
}

# (h) the new rows of (g) go in many to a page (table_multi_insert), with
# the checks and index entries an INSERT makes, where the result is a
# plain table.  A table where an INSERT does more writes them with the
# INSERT statement: a trigger must fire for every new row, a default must
# fill the column the query leaves out, a deferrable constraint is checked
# again at commit.  And a row already in the result
# (written by the user) sends the batch's new rows to the upsert.  In a
# session of its own: session A's inserts are paused since (e) met rows
# its reset left in the result.
{
	my $sc = store_session($node);
	# keys 30000 + g: new to the result in every batch
	my $key = 30000;
	my $batch = sub {
		events4(250, "$key + g", 1);
		$key += 250;
		my ($out, $err) = sess($sc,
			"SET client_min_messages = debug1; SELECT streamwin.run_batch('c_run') IS NOT NULL;"
			  . " SET client_min_messages = warning");
		my ($new) = $err =~ /query "c_run" writes (\d+) new/;
		my ($many) = $err =~ /(\d+) rows inserted into "c_run" many to a page/;
		my $met = $err =~ /query "c_run" met a row already in its result \(duplicate key/;
		catch_up4($sc);
		return ($new // -1, $many, $met);
	};
	my ($new, $many) = $batch->();
	is($new, 250, 'c_run: a batch of 250 new keys inserts 250 result rows');
	is($many, 250, 'c_run: into its plain result table, many to a page');
	check_part4('after new keys went in many to a page');

	psql_ok($node, q{
CREATE TABLE c_run_log (k int);
CREATE FUNCTION c_run_logged() RETURNS trigger LANGUAGE plpgsql AS
    $$BEGIN INSERT INTO c_run_log VALUES (NEW.k); RETURN NULL; END$$;
CREATE TRIGGER c_run_logged AFTER INSERT ON c_run FOR EACH ROW EXECUTE FUNCTION c_run_logged();
}, 'c_run: a trigger on its result table');
	($new, $many) = $batch->();
	is($new, 250, 'c_run: with a trigger, 250 new result rows');
	ok(!defined $many, 'c_run: with a trigger, the INSERT statement writes them');
	results_match($node, 'SELECT k FROM c_run_log',
		'SELECT DISTINCT k FROM (SELECT k FROM ev4 ORDER BY id DESC LIMIT 250) e',
		'c_run: the trigger fired for each new row');
	psql_ok($node, 'DROP TRIGGER c_run_logged ON c_run; DROP TABLE c_run_log',
		'c_run: the trigger dropped');

	psql_ok($node, "ALTER TABLE c_run ADD COLUMN note text; ALTER TABLE c_run ALTER note SET DEFAULT 'new'",
		'c_run: a column with a default on its result table');
	($new, $many) = $batch->();
	ok(!defined $many, 'c_run: with a default to fill in, the INSERT statement writes the rows');
	results_match($node, "SELECT k FROM c_run WHERE note = 'new'",
		'SELECT DISTINCT k FROM (SELECT k FROM ev4 ORDER BY id DESC LIMIT 250) e',
		'c_run: the default filled in each new row');
	psql_ok($node, 'ALTER TABLE c_run DROP COLUMN note', 'c_run: the column dropped');

	# a deferrable unique constraint is checked again at commit, by a trigger
	psql_ok($node, 'ALTER TABLE c_run ADD CONSTRAINT c_run_k_once UNIQUE (k) DEFERRABLE INITIALLY DEFERRED',
		'c_run: a deferrable unique constraint on its result table');
	($new, $many) = $batch->();
	is($new, 250, 'c_run: with a deferrable constraint, 250 new result rows');
	ok(!defined $many, 'c_run: with a deferrable constraint, the INSERT statement writes them');
	psql_ok($node, 'ALTER TABLE c_run DROP CONSTRAINT c_run_k_once', 'c_run: the constraint dropped');
	($new, $many) = $batch->();
	is($many, 250, 'c_run: without it, many to a page again');
	check_part4('after a trigger and a default came and went');

	psql_ok($node, "INSERT INTO c_run (k, n, s, hi) VALUES ($key + 100, -1, -1, -1)",
		'c_run: a row the user wrote, for a key the next batch brings');
	my $met;
	($new, $many, $met) = $batch->();
	is($new, 250, 'c_run: the batch has 250 keys new to its state');
	ok($met && !defined $many, 'c_run: the multi-insert met the row and was rolled back');
	check_part4('after the upsert wrote over the row the user wrote');
	$sc->quit;
}

# (i) on the state table in session A (the cap set there), with batches
# that do not commit: the batch that lets go of the store and makes the
# state table's index is rolled back, which takes the index with it; then
# session B, whose store fits, writes its groups with the index that
# session A made again.  Session A's batches on the state table go on all
# the same.  The state table starts without its index (a session's batch
# that loaded in (f) made it): as a store that never made it leaves it.
events4(5000, '10000 + g', 1);
catch_up4($sa);
check_part4('with 5,000 more keys in memory');
events4(1000, 'g % 500', 5);
$node->safe_psql('postgres', qq{
DO \$\$DECLARE i regclass;
BEGIN
  FOR i IN SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '@{[ state_table('c_run') ]}'::regclass
  LOOP EXECUTE 'DROP INDEX ' || i; END LOOP;
END\$\$});
ok(!table_mode($node, 'c_run'), 'c_run: its state table without its index');
sess_ok($sa, "SET streamwin.state_memory = '1MB'");
sess_ok($sa, "BEGIN; SELECT streamwin.run_batch('c_run') IS NOT NULL; ROLLBACK");
is(store_switches($node, 'c_run'), '1/0', 'c_run: its state no longer fits in session A');
ok(!table_mode($node, 'c_run'), 'c_run: the rollback took the index it made away');
catch_up4($sa);
ok(table_mode($node, 'c_run'), 'c_run: session A made the index again');
check_part4('on the state table after a rolled-back switch');
events4(1000, 'g % 600', 5);
sess_ok($sb, "SELECT streamwin.run_batch('c_run') IS NOT NULL");
ok(table_mode($node, 'c_run'), "c_run: session B's store keeps the index, which it writes");
catch_up4($sa);
ok(table_mode($node, 'c_run'), 'c_run: session A made the index again');
check_part4("on the state table after another session's store");
sess_ok($sa, 'RESET streamwin.state_memory');
# Both run on their state tables in session A now (c_win's windows of 5,000
# keys did not fit either), and their checkpoints are whole copies.
ok(table_mode($node, 'c_run') && table_mode($node, 'c_win'), 'both queries run on their state tables');
checkpoint_matches($node, $_, $sa, sub { events4(20, 'g % 700', 10) }, 'at the end of part 4')
  for qw(c_run c_win);
catch_up4($sa);
check_part4('at the end');

# (j) a load cut short: session A's store of 300,000 keys, loaded; then
# another session's batch (A's store no longer vouches for its state) and a
# key's row written twice into the state table by hand (its index dropped
# first, as a store in memory leaves it), at its end: A's
# next batch fails in its load ("holds a group twice"), which read every
# other group but none of the checkpoint table's rows.  With the row gone
# again, A's next batch must load the state again rather than take the
# half-done load for a whole one: its checkpoints, which write only what
# changed, would not know where the groups' checkpoint rows are.
psql_ok($node, q{
CREATE TABLE ev4j (id bigserial, k int, v int);
SELECT streamwin.create_table_source('s4j', 'ev4j');
SELECT streamwin.create_query('c_big', 'SELECT k, count(*) AS n, sum(v) AS s FROM s4j GROUP BY k',
    output_mode => 'update', start => false);
INSERT INTO ev4j (k, v) SELECT g, g % 1000 FROM generate_series(1, 300000) g;
}, 'part 4 (j): a query of 300,000 keys');
my $WANT4J = 'SELECT k, count(*)::bigint AS n, sum(v)::bigint AS s FROM ev4j GROUP BY k';
my $STATE4J = state_table('c_big');
sess_ok($sa, "CALL streamwin.catch_up('c_big')");
results_match($node, 'SELECT k, n, s FROM c_big', $WANT4J, 'c_big: every key, session A\'s store loaded');
$node->safe_psql('postgres', 'INSERT INTO ev4j (k, v) VALUES (1, 1)');
sess_ok($sb, "SELECT streamwin.run_batch('c_big') IS NOT NULL");
$node->safe_psql('postgres', qq{
DO \$\$DECLARE i regclass;
BEGIN
  FOR i IN SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '$STATE4J'::regclass
  LOOP EXECUTE 'DROP INDEX ' || i; END LOOP;
END\$\$;
INSERT INTO $STATE4J SELECT * FROM $STATE4J WHERE k = 7;});
$node->safe_psql('postgres', 'INSERT INTO ev4j (k, v) SELECT g * 97 % 300000 + 1, 5 FROM generate_series(1, 3000) g');
my ($j_out, $j_err) = sess($sa, "SELECT streamwin.run_batch('c_big') IS NOT NULL");
like($j_err, qr/holds a group twice/, 'c_big: session A\'s batch fails in its load');
$node->safe_psql('postgres', "DELETE FROM $STATE4J WHERE ctid = (SELECT max(ctid) FROM $STATE4J WHERE k = 7)");
sess_ok($sa, "SELECT streamwin.run_batch('c_big') IS NOT NULL");
results_match($node, 'SELECT k, n, s FROM c_big', $WANT4J, 'c_big: every key after the failed load');
results_match($node, qq{SELECT k, "n\$count", "s\$sum" FROM $STATE4J}, $WANT4J,
	'c_big: its state table holds every key once');
checkpoint_matches($node, 'c_big', $sa,
	sub { $node->safe_psql('postgres', 'INSERT INTO ev4j (k, v) SELECT g * 89 % 300000 + 1, 3 FROM generate_series(1, 500) g') },
	'after the failed load');
psql_ok($node, q{
SELECT streamwin.drop_query('c_big', drop_result => true);
SELECT streamwin.drop_source('s4j');
DROP TABLE ev4j;
}, 'part 4 (j) dropped');
$sa->quit;
$sb->quit;

# ==== 6. run_available: batches that share one transaction ====================

# The batches of a run_available run in the caller's transaction, where
# nobody else sees the state tables before the commit, and a failure rolls
# back all the batches did: the stores keep their changed groups' state
# rows back and write them once something reads the table (the query on
# its table, once its state outgrows streamwin.state_memory) and at the end
# of the run; their checkpoints (every 3 batches here) are written from
# memory, kept rows or not.  Three queries over
# one table source, 250 events a batch: r_win and r_run as c_win and c_run
# in part 4, and r_dedup, a deduplicating transform of events sent twice;
# r_each, r_win again, runs its batches with run_batch, each writing its
# groups' state rows, for the comparison.  After each run_available: every
# result as plain SQL computes it, and every state table holding exactly
# the open groups (keys) as the events give them.
psql_ok($node, q{
CREATE TABLE ev6 (id bigserial, k int, v int, ts timestamptz);
SELECT streamwin.create_table_source('s6', 'ev6', '{"max_records_per_batch": 250}');
SELECT streamwin.create_query(name,
    $q$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a
       FROM s6 GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', output_mode => 'update', start => false)
  FROM (VALUES ('r_win'), ('r_each')) v (name);
SELECT streamwin.create_query('r_run',
    'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS hi FROM s6 GROUP BY k',
    output_mode => 'update', start => false);
CREATE TABLE ev6d (id bigint, ts timestamptz);
SELECT streamwin.create_table_source('s6d', 'ev6d', '{"max_records_per_batch": 250}');
SELECT streamwin.create_query('r_dedup', 'SELECT id, ts FROM s6d',
    dedup_keys => '{id}', watermark => '5 seconds', options => '{"event_time": "ts"}', start => false);
}, 'part 6: a table source, three queries over it, and a deduplicating transform');
my $t6 = 0;    # ms after T0 where the next events begin

# n events from $t6 on, step_ms apart, to keys k (SQL over g); and n
# events to ev6d, each twice, the second time 1 s later
sub events6
{
	my ($n, $k, $step_ms) = @_;
	insert_events('ev6', $n, $k, "(g * 7919 + $t6) % 1000", "$T0 + ($t6 + g * $step_ms) * interval '1 ms'");
	$node->safe_psql('postgres', qq{
INSERT INTO ev6d (id, ts)
SELECT b / 2 + g, $T0 + ($t6 + g * $step_ms) * interval '1 ms' + d * interval '1 second'
  FROM (SELECT count(*) AS b FROM ev6d) c, generate_series(1, $n) g, generate_series(0, 1) d
 ORDER BY g, d});
	$t6 += $n * $step_ms;
	return;
}

# run_available of each query of @q in session s: the batches each ran,
# which must be more than a checkpoint's 3, and a checkpoint among them
sub run6
{
	my ($s, $when, @q) = @_;
	for my $q (@q)
	{
		my $last = $node->safe_psql('postgres', "SELECT last_batch_id FROM streamwin.query_catalog WHERE name = '$q'");
		my ($batches) = sess($s, "SELECT streamwin.run_available('$q')->>'batches'");
		cmp_ok($batches // 0, '>', 3, "$q: run_available ran its batches $when");
		cmp_ok($node->safe_psql('postgres', "SELECT checkpoint_batch_id FROM streamwin.query_catalog WHERE name = '$q'"),
			'>', $last, "$q: a checkpoint among them $when");
	}
	return;
}

sub check_part6
{
	my ($when) = @_;
	my $wm = watermark_of('ev6', 'r_win');
	results_match($node, "SELECT $WCOLS FROM r_win", want_windows('ev6'), "r_win: every window $when");
	windowed_state_matches('ev6', 'r_win', $wm, "r_win: its state table holds the open groups $when");
	results_match($node, 'SELECT k, n, s, hi FROM r_run',
		'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS hi FROM ev6 GROUP BY k', "r_run: every key $when");
	results_match($node, 'SELECT k, "n$count", "s$sum", "hi$max" FROM ' . state_table('r_run'),
		'SELECT k, count(*), sum(v), max(v) FROM ev6 GROUP BY k', "r_run: its state table holds every key $when");
	results_match($node, 'SELECT id, ts FROM r_dedup', 'SELECT id, min(ts) FROM ev6d GROUP BY id',
		"r_dedup: every event once $when");
	results_match($node, 'SELECT id, event_time FROM ' . dedup_table('r_dedup'),
		"SELECT id, min(ts) FROM ev6d GROUP BY id HAVING min(ts) >= (SELECT max(ts) - interval '5 seconds' FROM ev6d)",
		"r_dedup: its keys are the events the watermark has not passed $when");
	return;
}

my $s6 = store_session($node);

# (a) 4,000 events over 40 s, 100 keys, in 16 batches: windows close under
# the watermark in the middle of the run, and groups change in batch after
# batch.  r_each's batches, one run_batch each, in one transaction too,
# write their changed groups' rows every batch; r_win's write those still
# open at its end: fewer.
events6(4000, 'g % 100', 10);
{
	my $written = sub {
		my ($q, $call) = @_;
		my ($n) = sess($s6, qq{
BEGIN;
DO \$\$BEGIN $call; END\$\$;
SELECT n_tup_ins + n_tup_upd FROM pg_stat_xact_all_tables WHERE relid = '@{[ state_table($q) ]}'::regclass;
COMMIT});
		return $n;
	};
	my $kept = $written->('r_win', "PERFORM streamwin.run_available('r_win')");
	my $each = $written->('r_each', "FOR i IN 1 .. 20 LOOP PERFORM streamwin.run_batch('r_each'); END LOOP");
	is($node->safe_psql('postgres', "SELECT string_agg(last_batch_id::text, ' ' ORDER BY name) FROM streamwin.query_catalog WHERE name IN ('r_win', 'r_each')"),
		'16 16', 'r_each and r_win: 16 batches each');
	cmp_ok($kept, '<', $each, "r_win: run_available wrote fewer state rows ($kept) than its batches one by one ($each)");
	results_match($node, "SELECT $WCOLS FROM r_each", "SELECT $WCOLS FROM r_win", 'r_each: the same result as r_win');
}
run6($s6, 'in (a)', qw(r_run r_dedup));
check_part6('after run_available');

# (b) a new session's batches (its stores load the state tables, or the
# first batches read them cold) find what the run kept back
events6(500, 'g % 150', 10);
psql_ok($node, "CALL streamwin.catch_up('$_')", "$_: a new session catches up") for qw(r_win r_run r_dedup);
check_part6("after a new session's batches");

# (c) a crash after a run whose checkpoints were taken in its middle: the
# queries restore their last and replay the batches since, if any
events6(3000, 'g % 300', 10);
run6($s6, 'in (c)', qw(r_win r_run r_dedup));
$s6->quit;
crash_by_sigkill($node, 'a crash after run_available');
events6(500, 'g % 300', 10);
$s6 = store_session($node);
for my $q (qw(r_win r_run r_dedup))
{
	my $restores = log_count($node, qr/query "$q" lost its state in a crash; restoring the checkpoint/);
	sess_ok($s6, "SELECT streamwin.run_available('$q') IS NOT NULL");
	cmp_ok(log_count($node, qr/query "$q" lost its state in a crash; restoring the checkpoint/), '>', $restores,
		"$q: restored its checkpoint after the crash");
}
check_part6('after the crash');

# (d) a run that fails in its middle: a CHECK constraint on r_run's result
# that the sixth of its batches breaks, after five kept their rows back.
# Another session then catches up, and a run of the first session, which
# finds nothing to read, must not write the rows its failed run kept back
# into the state table the other session wrote.
{
	my $max = $node->safe_psql('postgres', 'SELECT max(n) FROM r_run');
	psql_ok($node, "ALTER TABLE r_run ADD CONSTRAINT r_run_small CHECK (n <= $max + 5)",
		'r_run: a constraint that its batches break after 1,500 events');
	events6(3000, 'g % 300', 10);
	my ($out, $err) = sess($s6, "SELECT streamwin.run_available('r_run') IS NOT NULL");
	like($err, qr/violates check constraint "r_run_small"/, 'r_run: the run fails in its middle');
	psql_ok($node, 'ALTER TABLE r_run DROP CONSTRAINT r_run_small', 'r_run: the constraint dropped');
	psql_ok($node, "CALL streamwin.catch_up('$_')", "$_: another session catches up") for qw(r_win r_run r_dedup);
	sess_ok($s6, "SELECT streamwin.run_available('$_') IS NOT NULL") for qw(r_win r_run r_dedup);
	check_part6('after a failed run, another session\'s batches and an empty run');
}

# (e) the cap lowered in the session: 16,000 events, half of them of new
# keys, make r_win and r_run outgrow 1MB in the middle of a run, whose
# stores write what they kept back before the queries go on on their
# state tables, where the other half's groups change.
sess_ok($s6, "SET streamwin.state_memory = '1MB'");
events6(16000, 'CASE WHEN g % 2 = 0 THEN 1000 + g ELSE g % 300 END', 1);
run6($s6, 'in (e)', qw(r_win r_run r_dedup));
is(join(' ', map { store_switches($node, $_) } qw(r_win r_run)), '1/0 1/0',
	'r_win and r_run: their state no longer fits in streamwin.state_memory');
check_part6('after the state outgrew the cap in the middle of run_available');
sess_ok($s6, 'RESET streamwin.state_memory');
checkpoint_matches($node, $_, $s6, sub { events6(20, 'g % 300', 10) }, 'at the end of part 6') for qw(r_win r_run);
checkpoint_matches($node, 'r_dedup', $s6, sub { events6(20, 'g % 300', 10) }, 'at the end of part 6', 'dedup');
$s6->quit;

$node->stop;
done_testing();
