
# 019_dedup_store.pl: the dedup keys' store against plain SQL.
#
# A deduplicating query keeps the keys it has seen in a state store
# (src/store/store_merge.c): a batch's rows make entries of the keys new to it,
# the first row of each is kept, the watermark forgets the keys whose first
# row it passed, and the UNLOGGED dedup table and its logged checkpoint are
# written by row location.  Every expectation is plain SQL over the events
# the query read, kept in an ordinary table, compared as multisets.
#
# The producer retries: some events come twice, the second time 1 s later
# in event time (within the 5-second watermark, so always a duplicate), and
# some keys come back a minute or more later (long forgotten, so new
# again).  So in plain SQL a row is kept unless an earlier row of its key is
# less than 30 s older.
#
#   1. The memory cap, in a session (streamwin.state_memory = 1MB), over a
#      Kafka topic: a deduplicating transform and a windowed count over
#      the same deduplicated stream (whose groups stay in their own store)
#      switch their keys to the dedup table ("do not fit in
#      streamwin.state_memory"), stay exact there, and come back into
#      memory when the watermark has forgotten enough keys.
#   2. A worker with 100,000 keys: stop_query and start_query, a SIGTERM of
#      the worker, each followed by retries of old keys (which only a store
#      that loaded its keys drops) and new keys; then crashes (SIGKILL of
#      the worker, or of an unrelated backend) right after a checkpoint and
#      two batches after one.
#   3. Consistency, in a session whose store stays loaded: a batch that
#      fails after the store made its keys (a CHECK constraint on the
#      result table), batches the user rolls back, another session's batch
#      in between, reset_query: the keys those batches made must not be
#      taken as seen by the next one.
#   In each part, after many batches: the checkpoint table equals the dedup
#   table, row for row.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";

my $node = new_node('dedup_store',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  # (its table sources' queries checkpoint every 3 batches, not every
	  # batch, so that crashes find batches to replay)
	  . "streamwin.table_checkpoint_every_batch = off\n"
	  . "restart_after_crash = on\n");

# The UNLOGGED table of the keys a query has seen.
sub dedup_table
{
	my ($q) = @_;
	return $node->safe_psql('postgres',
		"SELECT dedup_table::regclass FROM streamwin.query_catalog WHERE name = '$q'");
}

# ==== 1. the memory cap, in a session =========================================

my $broker = StreamwinTest::Broker->start(topics => { ev1 => 1 });
my $brokers = $broker->bootstrap;
psql_ok($node, qq{
CREATE TABLE ev1 (id bigserial, e int, k int, v int, ts timestamptz);
-- the rows kept: those with no earlier row of their key less than 30 s older
CREATE VIEW kept1 AS
SELECT e, k, v, ts FROM ev1 r
 WHERE NOT EXISTS (SELECT 1 FROM ev1 p
                    WHERE p.e = r.e AND p.id < r.id AND p.ts > r.ts - interval '30 seconds');
SELECT streamwin.create_kafka_source('s1', '$brokers', 'ev1', 'e int, k int, v int, ts timestamptz',
    options => '{"max_records_per_batch": 250}');
SELECT streamwin.create_query('d_keep', 'SELECT e, k, v, ts FROM s1',
    dedup_keys => '{e}', watermark => '5 seconds', options => '{"event_time": "ts"}',
    start => false);
SELECT streamwin.create_query('d_count',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM s1 GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    dedup_keys => '{e}', watermark => '5 seconds', output_mode => 'update', start => false);
}, 'part 1: a Kafka source, a deduplicating transform and a count over it');

my $s1 = store_session($node);
sess_ok($s1, "SET streamwin.state_memory = '1MB'");

sub catch_up_all
{
	sess_ok($s1, "CALL streamwin.catch_up('$_')") for qw(d_keep d_count);
	return;
}

# n events into ev1 and the same to the topic, in order: g runs 1..n in the
# expressions for e, k, v and ts; every third event is sent again right
# after, 1 s later in event time.
sub events1
{
	my ($n, $e, $k, $v, $ts) = @_;
	my $last = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM ev1');
	$node->safe_psql('postgres', qq{
INSERT INTO ev1 (e, k, v, ts)
SELECT e, k, v, ts + d * interval '1 second'
  FROM (SELECT g, $e AS e, $k AS k, $v AS v, $ts AS ts FROM generate_series(1, $n) g) x,
       generate_series(0, 1) d
 WHERE d = 0 OR g % 3 = 0
 ORDER BY g, d});
	my $json = $node->safe_psql('postgres',
		"SELECT json_build_object('e', e, 'k', k, 'v', v, 'ts', ts) FROM ev1 WHERE id > $last ORDER BY id");
	$broker->produce('ev1', [ split /\n/, $json ], partition => 0);
	return;
}

sub empty_batches
{
	my ($n, @q) = @_;
	sess_ok($s1, join('', ("SELECT streamwin.run_batch('$_') IS NOT NULL;\n") x $n)) for @q;
	return;
}

# Both queries exact, and their dedup tables: the keys whose first row (of
# the rows kept) the watermark, max(ts) - 5 s, has not passed.
sub check_part1
{
	my ($when) = @_;
	my $wm = "(SELECT max(ts) - interval '5 seconds' FROM ev1)";
	results_match($node, 'SELECT e, k, v, ts FROM d_keep', 'SELECT * FROM kept1',
		"d_keep: every event once $when");
	results_match($node, 'SELECT window_start, window_end, k, n, s FROM d_count',
		windows_sql(table => 'kept1', size => 10, keys => 'k',
			aggs => 'count(*)::bigint AS n, sum(v)::bigint AS s'),
		"d_count: every window over the events once $when");
	for my $q (qw(d_keep d_count))
	{
		is( $node->safe_psql('postgres',
				"SELECT watermark = $wm FROM streamwin.queries WHERE name = '$q'"),
			't', "$q: the watermark is max(ts) - 5 s $when");
		results_match($node, 'SELECT e, event_time FROM ' . dedup_table($q),
			"SELECT e, max(ts) FROM kept1 GROUP BY e HAVING max(ts) >= $wm",
			"$q: its dedup table holds the keys the watermark has not passed $when");
	}
	return;
}

# (a) 1,000 events over 10 s: few keys, in memory.
events1(1000, 'g', 'g % 50', '(g * 7919) % 1000', "$T0 + g * interval '10 ms'");
catch_up_all();
check_part1('with few keys');
is(join(' ', map { store_switches($node, $_, 'dedup') } qw(d_keep d_count)), '0/0 0/0',
	'few keys stay in memory');

# (b) 6,000 events in 2 s, each a new key, all within the watermark: the
# keys outgrow 1MB in the middle of some 30 batches.
events1(6000, '10000 + g', 'g % 50', '(g * 104729) % 1000', "$T0 + interval '10 s' + g * interval '300 us'");
catch_up_all();
is(join(' ', map { store_switches($node, $_, 'dedup') } qw(d_keep d_count)), '1/0 1/0',
	'each query says once that its dedup keys no longer fit in streamwin.state_memory');
ok(table_mode($node, $_, 'dedup'), "$_ keeps its keys in its dedup table, with its indexes")
  for qw(d_keep d_count);
ok(!table_mode($node, 'd_count'), "d_count's groups stay in their store");
check_part1('after the keys outgrew the cap in the middle of a stream');

# (c) on the dedup table: 3,000 events, half of them keys of (b) again
# (2-3 s later: duplicates), half new.
events1(3000, 'CASE WHEN g % 2 = 0 THEN 10000 + g ELSE 20000 + g END', 'g % 50', '(g * 31) % 1000',
	"$T0 + interval '12 s' + g * interval '500 us'");
catch_up_all();
check_part1('on the dedup table');

# (d) the watermark moves on: 2,500 new keys over 50 s forget those of (a)
# to (c); within the next 100 batches each query tries its store again.
events1(2500, '50000 + g', 'g % 20', '(g * 13) % 1000', "$T0 + interval '14 s' + g * interval '20 ms'");
catch_up_all();
check_part1('after the watermark forgot most keys');
empty_batches(100, qw(d_keep d_count));
is(join(' ', map { store_switches($node, $_, 'dedup') } qw(d_keep d_count)), '1/1 1/1',
	'within 100 batches both keep their keys in memory again');
# a store keeps its table's indexes up to date for cold batches (op_store.h)
ok(table_mode($node, $_, 'dedup'), "$_: its store keeps its dedup table's indexes") for qw(d_keep d_count);

# (e) in memory again: 2,000 events, half of them keys of (a), a minute
# after they were forgotten (new again), half new.
events1(2000, 'CASE WHEN g % 2 = 0 THEN g ELSE 60000 + g END', 'g % 20', '(g * 17) % 1000',
	"$T0 + interval '64 s' + g * interval '5 ms'");
catch_up_all();
check_part1('back in memory');

# After some 100 batches of each, both ways and evictions: the checkpoint
# tables equal the dedup tables.
{
	my $at = 80_000;
	my $more = sub {
		events1(20, "70000 + $at / 10 + g", 'g % 20', 'g', "$T0 + ($at + g * 10) * interval '1 ms'");
		$at += 200;
	};
	checkpoint_matches($node, $_, $s1, $more, 'after all that', 'dedup') for qw(d_keep d_count);
	catch_up_all();
	check_part1('at the end');
}
$s1->quit;
$broker->stop;

# ==== 2. a worker with many keys ==============================================

# A transform whose keys are remembered for an hour: 100,000 keys first,
# then retries of old keys among new ones.  A store that lost its keys
# would let the retries through.
psql_ok($node, q{
CREATE TABLE ev2 (id bigserial, e bigint, ts timestamptz);
SELECT streamwin.create_table_source('s2', 'ev2', '{"max_records_per_batch": 50000}');
SELECT streamwin.create_query('w_dedup', 'SELECT e, ts FROM s2',
    dedup_keys => '{e}', watermark => '1 hour', options => '{"event_time": "ts"}',
    trigger_interval => '50 ms');
-- n events after the ones there are, 1 ms of event time apart: every
-- other one a retry of an earlier key
CREATE PROCEDURE events2(n int) LANGUAGE sql AS $p$
    INSERT INTO ev2 (e, ts)
    SELECT CASE WHEN g % 2 = 0 THEN (b + g) * 7 % (b + 1) + 1 ELSE 1000000 + b + g END,
           timestamptz '2024-01-01 00:00:00+00' + (100000 + b + g) * interval '1 ms'
      FROM (SELECT count(*) AS b FROM ev2) c, generate_series(1, n) g $p$;
}
	  . feed_until_sql(q{CALL events2(30)}),
	'part 2: a deduplicating transform in a worker');

# Every key once, its first row; the dedup table holds every key with the
# event time of its first row.
my $first2 = 'SELECT DISTINCT ON (e) e, ts FROM ev2 ORDER BY e, id';
sub check_part2
{
	my ($when) = @_;
	wait_results_match($node, 'SELECT e, ts FROM w_dedup', $first2, "w_dedup: every key once $when");
	results_match($node, 'SELECT e, event_time FROM ' . dedup_table('w_dedup'), $first2,
		"w_dedup: its dedup table holds every key $when");
	return;
}

$node->safe_psql('postgres',
	"INSERT INTO ev2 (e, ts) SELECT g, $T0 + g * interval '1 ms' FROM generate_series(1, 100000) g");
check_part2('with 100,000 keys');
my $pid2 = worker_pid($node, 'w_dedup', 'at first');

psql_ok($node, "SELECT streamwin.stop_query('w_dedup')");
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'w_dedup'", 't',
	'w_dedup: the worker is gone after stop_query');
psql_ok($node, 'CALL events2(20000)');
psql_ok($node, "SELECT streamwin.start_query('w_dedup')");
check_part2('after stop_query, retries and new keys, start_query');

$pid2 = worker_pid($node, 'w_dedup', 'after start_query');
kill 'TERM', $pid2;
wait_until($node, "SELECT coalesce(worker_pid, 0) <> $pid2 FROM streamwin.queries WHERE name = 'w_dedup'",
	't', 'w_dedup: the worker ends on SIGTERM');
psql_ok($node, 'CALL events2(20000)');
psql_ok($node, "SELECT streamwin.start_query('w_dedup')");
check_part2('after SIGTERM of the worker, retries and new keys, a new worker');

sub crash
{
	return crash_round($node, ['w_dedup'], \&check_part2, 'w_dedup', @_);
}
crash('checkpoint_batch_id > C0', 'worker', 'SIGKILL of the worker right after its checkpoint');
crash('checkpoint_batch_id > C0 AND last_batch_id >= checkpoint_batch_id + 2', 'backend',
	'SIGKILL of a backend two batches after a checkpoint');

psql_ok($node, "SELECT streamwin.stop_query('w_dedup')");
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'w_dedup'", 't',
	'w_dedup: stopped');
{
	my $s = store_session($node);
	checkpoint_matches($node, 'w_dedup', $s, sub { $node->safe_psql('postgres', 'CALL events2(100)') },
		'after the worker', 'dedup');
	sess_ok($s, "CALL streamwin.catch_up('w_dedup')");
	$s->quit;
	check_part2('at the end');
}

# ==== 3. failed, rolled-back and other sessions' batches =======================

psql_ok($node, q{
CREATE TABLE ev3 (id bigserial, e int, v int, ts timestamptz);
SELECT streamwin.create_table_source('s3', 'ev3', '{"max_records_per_batch": 100000}');
SELECT streamwin.create_query('r_dedup', 'SELECT e, v FROM s3',
    dedup_keys => '{e}', watermark => '1 hour', options => '{"event_time": "ts"}', start => false);
}, 'part 3: a deduplicating transform run by sessions');

# n events with keys from (expression of g), v = 1 unless given, after
# the ones there are
sub events3
{
	my ($n, $e, $v) = @_;
	$v //= '1';
	$node->safe_psql('postgres',
		"INSERT INTO ev3 (e, v, ts) SELECT $e, $v, $T0 + g * interval '1 ms' FROM generate_series(1, $n) g");
	return;
}

sub check_part3
{
	my ($when) = @_;
	results_match($node, 'SELECT e, v FROM r_dedup', 'SELECT DISTINCT ON (e) e, v FROM ev3 ORDER BY e, id',
		"r_dedup: the first row of every key $when");
	results_match($node, 'SELECT e FROM ' . dedup_table('r_dedup'), 'SELECT DISTINCT e FROM ev3',
		"r_dedup: its dedup table holds every key $when");
	return;
}

my $sa = store_session($node);
my $sb = store_session($node);
events3(100, 'g');
sess_ok($sa, "SELECT streamwin.run_batch('r_dedup') IS NOT NULL");
check_part3('after a first batch');

# (a) a batch that fails on the result table after the store made its keys
$node->safe_psql('postgres', 'ALTER TABLE r_dedup ADD CONSTRAINT no_7 CHECK (v <> 7)');
events3(100, '100 + g', "CASE WHEN g = 50 THEN 7 ELSE 1 END");
{
	my ($out, $err) = sess($sa, "SELECT streamwin.run_batch('r_dedup')");
	like($err, qr/violates check constraint "no_7"/, 'r_dedup: a batch fails on the result table');
}
$node->safe_psql('postgres', 'ALTER TABLE r_dedup DROP CONSTRAINT no_7');
sess_ok($sa, "SELECT streamwin.run_batch('r_dedup') IS NOT NULL");
check_part3('after a failed batch');

# (b) batches rolled back by the user, one and then two in a transaction
events3(100, '150 + g');
sess_ok($sa, "BEGIN; SELECT streamwin.run_batch('r_dedup') IS NOT NULL; ROLLBACK");
events3(100, '200 + g');
sess_ok($sa, "BEGIN; SELECT streamwin.run_batch('r_dedup') IS NOT NULL;"
	  . "SELECT streamwin.run_batch('r_dedup') IS NOT NULL; ROLLBACK");
sess_ok($sa, "CALL streamwin.catch_up('r_dedup')");
check_part3('after batches rolled back');

# (c) session B's batch between session A's, each session's store loaded
events3(100, '250 + g');
sess_ok($sb, "SELECT streamwin.run_batch('r_dedup') IS NOT NULL");
events3(100, '300 + g');
sess_ok($sa, "SELECT streamwin.run_batch('r_dedup') IS NOT NULL");
events3(100, '330 + g');
sess_ok($sb, "SELECT streamwin.run_batch('r_dedup') IS NOT NULL");
check_part3("after the two sessions' batches in turn");

# (d) reset_query in session B: the keys are gone, and session A's store
# must not keep them
sess_ok($sb, "SELECT streamwin.reset_query('r_dedup', 'latest')");
$node->safe_psql('postgres', 'TRUNCATE r_dedup');
is($node->safe_psql('postgres', 'SELECT count(*) FROM ' . dedup_table('r_dedup')), '0',
	'r_dedup: reset_query empties its dedup table');
my $before = $node->safe_psql('postgres', 'SELECT max(id) FROM ev3');
events3(100, 'g');
sess_ok($sa, "SELECT streamwin.run_batch('r_dedup') IS NOT NULL");
results_match($node, 'SELECT e, v FROM r_dedup',
	"SELECT DISTINCT ON (e) e, v FROM ev3 WHERE id > $before ORDER BY e, id",
	'r_dedup: after reset_query, keys seen before count as new');
checkpoint_matches($node, 'r_dedup', $sa, sub { events3(10, "1000 + (random() * 1000)::int") },
	'at the end of part 3', 'dedup');
$sa->quit;
$sb->quit;

done_testing();
