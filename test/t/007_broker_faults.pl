
# 007_broker_faults.pl: broker and source faults (issue 5).
#
# 1. The broker goes down while a worker runs a query (trigger 100 ms): the
#    worker keeps retrying with backoff and streamwin.queries shows the
#    error; a run_available meanwhile fails instead of reporting success.
#    When the broker is back, the query catches up with what was produced
#    before and after the outage: results equal plain SQL over the same
#    events (no loss, no duplicates), and the query is running again with
#    the error superseded.  A second started query, whose topic gets no
#    data after the outage, must also leave the failed state once its
#    (empty) batches succeed again.  A new session's batch over a broker
#    that never answers serves a cancel while its requests wait.
# 2. Requested offsets no longer in Kafka: a query that stopped at offset
#    100 of a partition whose old messages the broker then dropped (the
#    test broker keeps about 5 MB per partition) must fail loudly, with
#    SQLSTATE SWK01 and a hint naming reset_query, in run_batch,
#    run_available and in a worker, and never skip ahead silently; after
#    reset_query(name, 'earliest') it goes on from the oldest message still
#    held.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IO::Socket::INET;
use StreamwinTest;

srand(7007);

my $T0 = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms

my $broker = StreamwinTest::Broker->start(topics => { bf => 3, bf_idle => 1, oor => 1 });
my $node = new_node('brokerfaults');
my $brokers = $broker->bootstrap;

# ---- 1. broker down and up while a worker runs ---------------------------

# Events [k, v, ts_ms, partition, chunk]: chunk 1 before the outage, chunk 2
# after it.
my (@ev, @chunks);
{
	my $i = 0;
	for my $c (1, 2)
	{
		my @msgs;
		for (1 .. 3000)
		{
			my $e = [ 'k' . int(rand(4)), int(rand(1000)),
				$T0 + $i++ * 20 + int(rand(500)), int(rand(3)), $c ];
			push @ev, $e;
			push @msgs, [ $e->[3],
				sprintf('{"k": "%s", "v": %d, "ts": "%s"}', $e->[0], $e->[1], ts_text($e->[2])) ];
		}
		push @chunks, \@msgs;
	}
}
load_table($node, 'ev', 'k text, v int, ts timestamptz, chunk int',
	[ map { [ $_->[0], $_->[1], ts_text($_->[2]), $_->[4] ] } @ev ]);

sub want_counts
{
	my ($c) = @_;
	return windows_sql(
		table => "(SELECT * FROM ev WHERE chunk <= $c)",
		size  => 10,
		keys  => 'k',
		aggs  => 'count(*)::bigint AS n, sum(v)::bigint AS s');
}
my $got = 'SELECT window_start, window_end, k, n::bigint, s::bigint FROM %s';

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('bf', '$brokers', 'bf', 'k text, v int, ts timestamptz', 'json');
SELECT streamwin.create_query('bf_counts',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM bf
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('bf_manual',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM bf
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_kafka_source('bf_idle', '$brokers', 'bf_idle', 'k text, ts timestamptz', 'json');
SELECT streamwin.create_query('idle_counts',
    \$q\$SELECT k, count(*) AS n FROM bf_idle GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms');
}, 'sources, two started queries and a stopped one');

wait_until($node,
	q{SELECT state, worker_pid IS NOT NULL FROM streamwin.queries WHERE name = 'bf_counts'},
	'running|t', 'bf_counts runs in a worker');
my $pid = $node->safe_psql('postgres',
	q{SELECT worker_pid FROM streamwin.queries WHERE name = 'bf_counts'});

$broker->produce('bf', $chunks[0]);
wait_results_match($node, sprintf($got, 'bf_counts'), want_counts(1),
	'before the outage: the worker has every window of chunk 1');
# idle_counts gets data only before the outage
$broker->produce('bf_idle', [ map { sprintf('{"k": "a", "ts": "%s"}', ts_text($T0 + $_)) } 1 .. 100 ]);
wait_until($node, 'SELECT sum(n) FROM idle_counts', '100',
	'before the outage: the idle query has its 100 messages');

my $down_at = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
my $t_down = time;
$broker->down;
note('broker down');

# The contract: the status shows the error (the engine also says 'failed';
# 'running' while it retries would do as well).
wait_until($node, qq{
SELECT state <> 'stopped', last_error ~* 'broker|connect|transport'
  FROM streamwin.queries WHERE name = 'bf_counts' AND last_error_at > '$down_at'},
	"t|t", 'while the broker is down: streamwin.queries shows an error about the broker');
note('bf_counts while down: ' . $node->safe_psql('postgres',
	q{SELECT state || ' / ' || last_error FROM streamwin.queries WHERE name = 'bf_counts'}));
my $first_err = $node->safe_psql('postgres',
	q{SELECT last_error_at FROM streamwin.queries WHERE name = 'bf_counts'});

# run_available cannot read the source now: it must fail, not report success.
{
	my $t = time;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT streamwin.run_available('bf_manual')");
	isnt($rc, 0, 'while the broker is down: run_available fails')
	  or diag("run_available returned: $out");
	note(sprintf('run_available failed after %.1f s: %s', time - $t, $err));
	is($node->safe_psql('postgres', 'SELECT count(*) FROM bf_manual'), '0',
		'while the broker is down: the failed run_available wrote nothing');
}

# A broker that takes connections and never answers (a down broker refuses
# them, and librdkafka gives up at once): a new session's first batch asks
# it for the topic's partitions, and a cancel (here its statement_timeout)
# is served while the request waits, not after the request's ten seconds.
{
	my $mute = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
		Listen => 16, ReuseAddr => 1) or die "listen: $!";
	my $port = $mute->sockport;
	psql_ok($node, qq{
SELECT streamwin.create_kafka_source('mute', '127.0.0.1:$port', 'bf', 'k text');
SELECT streamwin.create_query('mute_q', 'SELECT k FROM mute', start => false);
}, 'a source on a broker that never answers, and a query over it');
	my $t = time;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET statement_timeout = '1s'; SELECT streamwin.run_batch('mute_q')");
	my $took = time - $t;
	like($err, qr/statement timeout/, 'a new session\'s batch ends at its statement_timeout');
	ok($took < 8, sprintf('... within seconds, not after the request\'s ten (%.1f s)', $took));
	psql_ok($node, q{
SELECT streamwin.drop_query('mute_q', drop_result => true);
SELECT streamwin.drop_source('mute');
}, 'the mute source dropped');
	close $mute;
}

# The worker retries (a later failure is recorded) and is the same process.
wait_until($node, qq{
SELECT last_error_at > '$first_err', worker_pid = $pid
  FROM streamwin.queries WHERE name = 'bf_counts'},
	't|t', 'while the broker is down: the same worker retries');
results_match($node, sprintf($got, 'bf_counts'), want_counts(1),
	'while the broker is down: the results are unchanged');
wait_until($node, qq{
SELECT last_error ~* 'broker|connect|transport' FROM streamwin.queries
 WHERE name = 'idle_counts' AND last_error_at > '$down_at'},
	't', 'while the broker is down: the idle query shows the error too');

$broker->up;
note(sprintf('broker up again after %.1f s', time - $t_down));
$broker->produce('bf', $chunks[1]);

my $t_up = time;
wait_results_match($node, sprintf($got, 'bf_counts'), want_counts(2),
	'after the outage: the worker has every window of both chunks, once', timeout => 90);
note(sprintf('caught up %.1f s after the broker came back', time - $t_up));
wait_until($node, q{
SELECT state, worker_pid IS NOT NULL, last_error IS NULL OR last_batch_at > last_error_at
  FROM streamwin.queries WHERE name = 'bf_counts'},
	'running|t|t', 'after the outage: running again, the error superseded by a successful batch');

# A query without new data recovers too: its next batch succeeds (with
# nothing to do), so the failure is over.
wait_until($node, q{
SELECT state, last_error IS NULL OR last_batch_at > last_error_at
  FROM streamwin.queries WHERE name = 'idle_counts'},
	'running|t', 'after the outage: the idle query is back to running without new data');
is($node->safe_psql('postgres', 'SELECT sum(n) FROM idle_counts'), '100',
	'after the outage: the idle query lost nothing and repeated nothing');

my $r = run_json($node, "run_available('bf_manual')");
is($r && $r->{input_rows}, 6000, 'after the outage: run_available reads all 6000 messages');
results_match($node, sprintf($got, 'bf_manual'), want_counts(2),
	'after the outage: run_available has every window of both chunks');

psql_ok($node, "SELECT streamwin.stop_query('bf_counts'); SELECT streamwin.stop_query('idle_counts')",
	'bf_counts and idle_counts stopped');

# ---- 2. offsets no longer in Kafka ---------------------------------------

# ~200-byte messages.  Chunk A (1000, hour 0) is read in part; then chunk B
# (40,000, hour 1, 8 MB) makes the broker drop the oldest messages.
my $pad = 'x' x 130;
my (@oor_ev);
for my $i (0 .. 40_999)
{
	my $hour = $i < 1000 ? 0 : 1;
	push @oor_ev, [ 'k' . int(rand(4)), int(rand(100)),
		$T0 + $hour * 3600_000 + int(rand(3600_000)) ];
}
my @oor_msgs = map {
	sprintf('{"k": "%s", "v": %d, "ts": "%s", "pad": "%s"}',
		$_->[0], $_->[1], ts_text($_->[2]), $pad)
} @oor_ev;

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('oor', '$brokers', 'oor',
    'k text, v int, ts timestamptz', 'json', '{"max_records_per_batch": 100}');
SELECT streamwin.create_query('oor_q',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM oor
         GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', start => false);
}, 'source with max_records_per_batch 100 and a stopped query');

$broker->produce('oor', [ @oor_msgs[ 0 .. 999 ] ], partition => 0);
$r = run_json($node, "run_batch('oor_q')");
my $first_n = $r ? $r->{offsets}{0} : 0;
is($first_n, 100, 'one batch reads offsets 0 to 99 (max_records_per_batch)');
$first_n ||= 1;

$broker->produce('oor', [ @oor_msgs[ 1000 .. $#oor_msgs ] ], partition => 0);

# Expected after the first batch: its messages, counted per window and key.
sub counts_sql
{
	my ($from, $to, $hour) = @_;
	my %c;
	for my $e (@oor_ev[ $from .. $to ])
	{
		my $w = $T0 + int(($e->[2] - $T0) / 3600_000) * 3600_000;
		next if defined $hour && $w != $T0 + $hour * 3600_000;
		$c{$w}{ $e->[0] }[0]++;
		$c{$w}{ $e->[0] }[1] += $e->[1];
	}
	my @rows;
	for my $w (sort keys %c)
	{
		push @rows, [ ts_text($w), $_, @{ $c{$w}{$_} } ] for sort keys %{ $c{$w} };
	}
	return @rows;
}
my $oor_cols = [ [ 'window_start', 'timestamptz' ], [ 'k', 'text' ],
	[ 'n', 'bigint' ], [ 's', 'bigint' ] ];
my $oor_got = 'SELECT window_start, k, n::bigint, s::bigint FROM oor_q';
my @first_batch = counts_sql(0, $first_n - 1);
my $stored = q{SELECT o.next_offset FROM streamwin.query_offsets o
  JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'oor_q'};

my $low;
for my $call ('run_batch', 'run_available')
{
	my ($rc, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT streamwin.$call('oor_q')");
	isnt($rc, 0, "offset out of range: $call fails");
	like($err, qr/ERROR:\s+SWK01: .*out of range/, "offset out of range: $call raises SQLSTATE SWK01")
	  or diag($err);
	like($err, qr/HINT:.*reset_query/, "offset out of range: $call hints at reset_query");
	($low) = $err =~ /holds offsets (\d+) to/ if !defined $low;
	is($node->safe_psql('postgres', $stored), $first_n,
		"offset out of range: after $call the stored offset is still $first_n");
	results_match($node, $oor_got, values_sql($oor_cols, \@first_batch),
		"offset out of range: after $call the results are unchanged");
}
ok(defined $low && $low > $first_n, 'the error names the oldest offset the broker still holds')
  and note("the broker now holds offsets $low to 40999");

# A worker must not skip either: it fails, records why, and stays put.
psql_ok($node, "SELECT streamwin.start_query('oor_q')", 'start a worker for oor_q');
wait_until($node, q{
SELECT state, last_error ~ 'out of range' FROM streamwin.queries WHERE name = 'oor_q'},
	'failed|t', 'offset out of range: the worker puts the query in state failed with the error');
note('oor_q: ' . $node->safe_psql('postgres',
	q{SELECT last_error FROM streamwin.queries WHERE name = 'oor_q'}));
like($node->safe_psql('postgres',
		q{SELECT last_error FROM streamwin.queries WHERE name = 'oor_q'}),
	qr/reset_query/, 'offset out of range: the recorded error tells the user about reset_query');
sleep(2);
is($node->safe_psql('postgres', $stored), $first_n,
	'offset out of range: the worker did not move the stored offset');
results_match($node, $oor_got, values_sql($oor_cols, \@first_batch),
	'offset out of range: the worker did not change the results');
psql_ok($node, "SELECT streamwin.stop_query('oor_q')", 'stop the worker');
wait_until($node,
	q{SELECT state, worker_pid IS NULL FROM streamwin.queries WHERE name = 'oor_q'},
	'stopped|t', 'oor_q is stopped');

# Explicit offsets that the partition does not hold (below its start, past
# its end) fail loudly too, whether reset_query or the next batch notices.
for my $o (5, 50_000)
{
	my ($rc, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT streamwin.reset_query('oor_q', '{\"0\": $o}');\n"
		  . "SELECT streamwin.run_batch('oor_q')", on_error_stop => 1);
	isnt($rc, 0, "reset_query to offset $o, then run_batch: fails");
	like($err, qr/ERROR:\s+(SWK01|22023): .*(out of range|offset)/,
		"reset_query to offset $o, then run_batch: says the offset is out of range") or diag($err);
	note("offset $o: $err");
	results_match($node, $oor_got, values_sql($oor_cols, \@first_batch),
		"reset_query to offset $o, then run_batch: the results are unchanged");
}

# reset_query: go on from the oldest message still held.
psql_ok($node, "SELECT streamwin.reset_query('oor_q', 'earliest')", 'reset_query earliest');
is($node->safe_psql('postgres',
		q{SELECT last_error IS NULL FROM streamwin.queries WHERE name = 'oor_q'}),
	't', 'reset_query clears the error');
$r = run_json($node, "run_available('oor_q')");
$low //= 41_000 - ($r ? $r->{input_rows} : 0);
is($r && $r->{input_rows}, 41_000 - $low,
	"after reset_query: run_available reads offsets $low to 40999");
is_deeply($r && $r->{offsets}, { 0 => 41_000 }, 'after reset_query: at the end of the partition');

# Windows the replay touched hold its counts; the others keep what the
# first batch wrote (reset_query keeps result rows; they are overwritten as
# the replay re-emits them).
{
	my @replay = counts_sql($low, 40_999);
	my %touched = map { ("$_->[0]/$_->[1]" => 1) } @replay;
	my @kept = grep { !$touched{"$_->[0]/$_->[1]"} } @first_batch;
	results_match($node, $oor_got, values_sql($oor_cols, [ @replay, @kept ]),
		'after reset_query: the results count exactly the messages still held (plus the untouched rows of the first batch)');
}

# And the query runs on in a worker.
psql_ok($node, "SELECT streamwin.start_query('oor_q')", 'start oor_q again');
my @more = map { [ 'k9', 1, $T0 + 2 * 3600_000 + $_ * 1000 ] } 1 .. 50;
$broker->produce('oor', [ map {
	sprintf('{"k": "%s", "v": %d, "ts": "%s"}', $_->[0], $_->[1], ts_text($_->[2]))
} @more ], partition => 0);
wait_until($node, q{SELECT sum(n) FROM oor_q WHERE k = 'k9'}, '50',
	'after reset_query: the worker processes new messages');
is($node->safe_psql('postgres',
		q{SELECT state, last_error IS NULL FROM streamwin.queries WHERE name = 'oor_q'}),
	'running|t', 'after reset_query: the query is running with no error');
psql_ok($node, "SELECT streamwin.stop_query('oor_q')", 'oor_q stopped');

$node->stop;
$broker->stop;
done_testing();
