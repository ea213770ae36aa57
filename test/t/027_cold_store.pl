
# 027_cold_store.pl: a session's first batch over a large state, without
# loading it (op_store.h), against plain SQL.
#
# A store that cannot vouch for what it holds (a new session, a worker
# just started, another session's batch since) runs a batch that is small
# beside its table on the table itself, through its indexes, instead of
# loading the whole table.  Four queries over one Kafka topic, each with
# tens of thousands of state rows built by large batches (the first loads
# the store, and writes the table without indexes):
#   c_run    a running aggregate (GROUP BY k, update mode)
#   c_hop    hop windows of 2 hours every hour (append mode, watermark
#            5 minutes): windows close and leave the state on the way
#   c_sess   session windows (gap 3 hours, update mode)
#   c_dedup  a transform with dedup_keys {id} (watermark 1 hour): keys are
#            forgotten on the way, and every fourth event repeats an id
# Then:
#   1. batches of 100 events, each query's from a new connection (psql per
#      call), each of which must say it ran without loading (DEBUG1);
#   2. the same interleaved with one long-lived session that runs c_run's
#      batches too (its store loads once it has run enough cold batches,
#      and must load again or run cold after the others' batches), and with
#      a worker that runs c_run for a while;
#   3. a large batch in a session, which loads the stores and writes the
#      groups with the indexes the cold batches made: the next cold batches
#      find those groups through them;
#   4. a crash (SIGKILL of an idle backend) after cold batches that left
#      their checkpoints to later: the next batch restores the checkpoint
#      and replays, the batches after run cold again;
#   5. tables without their indexes (as a worker's build leaves them), then
#      one large run_batch in a session, which loads and makes them: the
#      next sessions' small batches run cold at once.
# After every round each result equals plain SQL over the events, and each
# query's last state_rows equals the open groups recounted from the events.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $node = new_node('cold',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  . "restart_after_crash = on\n");

my $broker = StreamwinTest::Broker->start(topics => { ev => 1 });
my $brokers = $broker->bootstrap;
my $T0 = "timestamptz '2024-01-01 00:00:00+00'";

psql_ok($node, qq{
CREATE TABLE ev (seq bigserial, id bigint, k int, v int, ts timestamptz);
SELECT streamwin.create_kafka_source('sev', '$brokers', 'ev', 'id bigint, k int, v int, ts timestamptz');
SELECT streamwin.create_query('c_run', 'SELECT k, count(*) AS n, sum(v) AS s FROM sev GROUP BY k',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('c_hop',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM sev
       GROUP BY streamwin.hop(ts, '2 hours', '1 hour'), k\$q\$,
    watermark => '5 minutes', start => false);
SELECT streamwin.create_query('c_sess',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM sev GROUP BY streamwin.session(ts, '3 hours'), k\$q\$,
    watermark => '5 minutes', output_mode => 'update', start => false);
SELECT streamwin.create_query('c_dedup', 'SELECT id, k, v, ts FROM sev',
    watermark => '1 hour', dedup_keys => '{id}', options => '{"event_time": "ts"}', start => false);
}, 'a Kafka source and four queries over it');

my @queries = qw(c_run c_hop c_sess c_dedup);

# The next events: n of them after the last, each 2 seconds (build: 100
# ms) after the one before, to keys spread over the first 60,000 (and a
# few new ones); every fourth repeats the event before it (the same id,
# key, value and time).  Into ev and to the topic, in order.
my $last_id = 0;

sub events
{
	my ($n, $step_ms, $kexpr) = @_;
	my $seq = $node->safe_psql('postgres', 'SELECT coalesce(max(seq), 0) FROM ev');
	$node->safe_psql('postgres', qq{
INSERT INTO ev (id, k, v, ts)
SELECT CASE WHEN $last_id > 0 AND g % 4 = 0 THEN $last_id + g - 1 ELSE $last_id + g END,
       k, v, ts
  FROM (SELECT g, $kexpr AS k, ($last_id + g) % 97 AS v,
               coalesce((SELECT max(ts) FROM ev), $T0)
                 + ((CASE WHEN $last_id > 0 AND g % 4 = 0 THEN g - 1 ELSE g END) * $step_ms)
                   * interval '1 millisecond' AS ts
          FROM generate_series(1, $n) g) a
 ORDER BY g});
	# a repeat is the event before it, all of it
	$node->safe_psql('postgres', qq{
UPDATE ev e SET k = p.k, v = p.v
  FROM ev p WHERE e.seq > $seq AND p.seq = e.seq - 1 AND p.id = e.id});
	$last_id += $n;
	my $json = $node->safe_psql('postgres',
		"SELECT json_build_object('id', id, 'k', k, 'v', v, 'ts', ts) FROM ev WHERE seq > $seq ORDER BY seq");
	$broker->produce('ev', [ split /\n/, $json ], partition => 0);
	return;
}

# ---- what each query must hold, in plain SQL ----------------------------------

my $WM = "(SELECT max(ts) - interval '5 minutes' FROM ev)";
my $HOP = windows_sql(table => 'ev', size => 7200, slide => 3600, keys => 'k',
	aggs => 'count(*)::bigint AS n, sum(v)::bigint AS s');
my $SESS = qq{SELECT min(ts) AS window_start, max(ts) + interval '3 hours' AS window_end, k,
       count(*)::bigint AS n, sum(v)::bigint AS s
  FROM (SELECT *, sum(brk) OVER (PARTITION BY k ORDER BY ts, seq ROWS UNBOUNDED PRECEDING) AS isl
          FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts, seq)
                                    < interval '3 hours' THEN 0 ELSE 1 END AS brk
                  FROM ev) a) b
 GROUP BY k, isl};

my %want = (
	c_run   => 'SELECT k, count(*)::bigint AS n, sum(v)::bigint AS s FROM ev GROUP BY k',
	c_hop   => "SELECT * FROM ($HOP) w WHERE window_end <= $WM",
	c_sess  => $SESS,
	c_dedup => 'SELECT DISTINCT id, k, v, ts FROM ev',
);
my %got = (
	c_run   => 'SELECT k, n, s FROM c_run',
	c_hop   => 'SELECT window_start, window_end, k, n, s FROM c_hop',
	c_sess  => 'SELECT window_start, window_end, k, n, s FROM c_sess',
	c_dedup => 'SELECT id, k, v, ts FROM c_dedup',
);
# the state rows after the last batch: the open groups (dedup keys are not
# counted)
my %want_state = (
	c_run   => 'SELECT count(DISTINCT k) FROM ev',
	c_hop   => "SELECT count(*) FROM ($HOP) w WHERE window_end > $WM",
	c_sess  => "SELECT count(*) FROM ($SESS) w WHERE window_end > $WM",
	c_dedup => 'SELECT 0',
);

# Each query reads what is left (new connections, batches of 100: cold
# first, then loading once that pays), then matches plain SQL.
sub check_all
{
	my ($when) = @_;
	for my $q (@queries)
	{
		psql_ok($node, "SET streamwin.max_records_per_batch = 100; CALL streamwin.catch_up('$q')",
			"$q: catches up $when");
		results_match($node, $got{$q}, $want{$q}, "$q: the result equals plain SQL $when");
		is( $node->safe_psql('postgres',
				"SELECT (SELECT state_rows FROM streamwin.progress WHERE query = '$q'
				          ORDER BY batch_id DESC LIMIT 1) = ($want_state{$q})"),
			't', "$q: its last state_rows are the open groups $when");
	}
	return;
}

# One batch of q from a new connection (as a cron job runs it): whether it
# ran without loading, and its input rows.
sub cold_call
{
	my ($q) = @_;
	return new_session_batch($node, $q, 100);
}

# The pages of q's state table (or dedup table).
sub state_pages
{
	my ($q) = @_;
	return $node->safe_psql('postgres', qq{
SELECT pg_relation_size(coalesce(nullif(state_table, 0), dedup_table))
       / current_setting('block_size')::int
  FROM streamwin.query_catalog WHERE name = '$q'});
}

# Rounds of 100 events, then each query's batch from a new connection.
# A batch runs cold exactly when its table has more pages than it has
# rows: each such batch must say so, and no other may.  Returns how many
# ran cold per query.
sub cold_rounds
{
	my ($rounds, $when, $between) = @_;
	my (%cold, %want);
	for my $i (1 .. $rounds)
	{
		events(100, 2000, "((($last_id + g)::bigint * 7919) % 60000)::int + 1 + CASE WHEN g % 50 = 0 THEN 60000 ELSE 0 END");
		for my $q (@queries)
		{
			my $pages = state_pages($q);
			my ($cold, $rows) = cold_call($q);
			$want{$q}++ if $pages > 100 && $rows == 100;
			$cold{$q}++ if $cold && $rows == 100;
		}
		$between->($i) if $between;
	}
	for my $q (@queries)
	{
		is($cold{$q} // 0, $want{$q} // 0,
			"$q: its batches from a new connection ran cold where the table is larger $when");
	}
	return \%cold;
}

# ==== the build: large batches, the first of which loads (an empty store) ====

events(60000, 100, 'g');
my $big = store_session($node);
sess_ok($big, 'SET streamwin.max_records_per_batch = 100000');
for my $q (@queries)
{
	sess_ok($big, "CALL streamwin.catch_up('$q')");
	is($node->safe_psql('postgres', "SELECT sum(input_rows) FROM streamwin.progress WHERE query = '$q'"),
		'60000', "$q: the build's batches read every event");
}
check_all('after the build');
for my $q (qw(c_run c_hop c_sess))
{
	cmp_ok($node->safe_psql('postgres', qq{
SELECT pg_relation_size(state_table) / current_setting('block_size')::int
  FROM streamwin.query_catalog WHERE name = '$q'}), '>', 300,
		"$q: its state table has more pages than a batch of 100 has rows");
}

# ==== 1. new connections ========================================================

my $cold = cold_rounds(8, 'in round 1');
for my $q (@queries)
{
	is($cold->{$q}, 8, "$q: all 8 batches of round 1 ran cold");
}
check_all('after round 1');

# the cold batches left their checkpoints to later batches
cmp_ok($node->safe_psql('postgres',
		"SELECT last_batch_id - checkpoint_batch_id FROM streamwin.query_catalog WHERE name = 'c_run'"),
	'>=', 3, 'c_run: cold batches leave their checkpoints to later batches');

# ==== 2. interleaved with a session and a worker ================================

my $s = store_session($node);
sess_ok($s, 'SET streamwin.max_records_per_batch = 100');
cold_rounds(6, 'between batches of another session', sub {
	events(100, 2000, "((($last_id + g)::bigint * 104729) % 60000)::int + 1");
	is(sess_ok($s, "SELECT (streamwin.run_batch('c_run'))->>'input_rows'"), '100',
		"c_run: the long-lived session's batch $_[0] read its events");
});
check_all('after round 2 (a session)');

psql_ok($node, "SELECT streamwin.alter_query('c_run', trigger_interval => '100 milliseconds')",
	'c_run: a short trigger');
psql_ok($node, "SELECT streamwin.start_query('c_run')", 'c_run: a worker');
worker_pid($node, 'c_run', 'for round 2');
events(300, 2000, "(($last_id + g) * 31) % 60000 + 1");
wait_until($node, qq{SELECT (SELECT sum(input_rows) FROM streamwin.progress WHERE query = 'c_run')
                          = (SELECT count(*) FROM ev)},
	't', 'c_run: the worker read every event');
psql_ok($node, "SELECT streamwin.stop_query('c_run')", 'c_run: the worker stops');
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'c_run'", 't',
	'c_run: its worker is gone');
cold_rounds(4, 'after a worker');
check_all('after round 2 (a worker)');

# ==== 3. a large batch loads, and writes the groups with their indexes =======

events(3000, 100, "CASE WHEN g % 3 = 0 THEN 70000 + g ELSE (g * 13) % 60000 + 1 END");
for my $q (@queries)
{
	my $before = $node->safe_psql('postgres', "SELECT sum(input_rows) FROM streamwin.progress WHERE query = '$q'");
	sess_ok($big, "CALL streamwin.catch_up('$q')");
	is($node->safe_psql('postgres', "SELECT sum(input_rows) - $before FROM streamwin.progress WHERE query = '$q'"),
		'3000', "$q: large batches in a session read the 3,000 events");
}
check_all('after a large batch');
# the next cold batches touch the keys the large batch made
cold_rounds(4, 'after a large batch', sub {
	events(100, 2000, "70000 + (($last_id + g) % 1000) * 3");
	for my $q (@queries)
	{
		my $pages = state_pages($q);
		my ($cold) = cold_call($q);
		is($cold ? 1 : 0, $pages > 100 ? 1 : 0,
			"$q: a batch over the large batch's new keys ran cold if its table is larger (round $_[0])");
	}
});
check_all('after round 3');

# ==== 4. a crash after cold batches =============================================

cold_rounds(4, 'before a crash');
crash_by_sigkill($node, 'a crash after cold batches');
eval { $s->quit };
eval { $big->quit };

# the batches after: the first restores the checkpoint and replays
restore_after_crash($node, $_) for @queries;
check_all('after the crash and the replays');
$cold = cold_rounds(4, 'after the crash');
is($cold->{c_run}, 4, 'c_run: its batches after the crash ran cold');
check_all('after round 4');

# ==== 5. a session's loading batch leaves its table indexed =====================

# Each table without its indexes, as a store that made them never (a
# worker's build) leaves it: the first cold batch after would make them, a
# read of the whole table.  A single large run_batch in a session (which
# loads, having read the whole table anyway) makes them instead: the next
# sessions' small batches run cold at once.
sub indexes_of
{
	my ($q) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(i.indexrelid::regclass::text, ', ' ORDER BY i.indexrelid::regclass::text)
  FROM pg_index i JOIN streamwin.query_catalog c
    ON i.indrelid = coalesce(nullif(c.state_table, 0), c.dedup_table)
 WHERE c.name = '$q'});
}
for my $q (@queries)
{
	my $idx = indexes_of($q);
	ok($idx, "$q: its table has indexes before the part ($idx)");
	$node->safe_psql('postgres', "DROP INDEX $idx");
	is(indexes_of($q), '', "$q: its table without indexes");
}
events(3000, 100, "CASE WHEN g % 3 = 0 THEN 80000 + g ELSE (g * 17) % 60000 + 1 END");
for my $q (@queries)
{
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET streamwin.max_records_per_batch = 100000; SET client_min_messages = debug1;"
		  . " SELECT (streamwin.run_batch('$q'))->>'input_rows'");
	is($out, '3000', "$q: one large batch in a session read the 3,000 events");
	unlike($err, qr/without loading/, "$q: the large batch loaded");
	ok(indexes_of($q), "$q: the batch that loaded left its table indexed");
}
cold_rounds(2, 'after a loading batch made the indexes');
check_all('after part 5');

$broker->stop;
done_testing();
