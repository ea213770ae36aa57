
# 002_windows.pl: tumbling and hopping windows are exact over a large stream.
#
# 50,000 seeded events over 4 partitions and 7 keys are produced to Kafka and
# loaded into a table.  Within a partition events arrive at most 2 s out of
# order and the watermark delay is 5 s, so no row may be dropped as late.
# Expected results are plain SQL over the table (windows aligned to the
# epoch, a row in every window covering it):
#   - append mode + watermark (run_available): exactly the windows whose end
#     is at or before the final watermark, which must be the minimum over
#     partitions of (max event time - 5 s);
#   - update mode + watermark (CALL catch_up): every window, final values;
#   - update mode, no watermark, processed by a background worker.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min max);
use StreamwinTest;

srand(2002);

my $T0     = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $NPART  = 4;
my $PER_P  = 12_500;
my $DELAY  = 5_000;                # watermark delay, ms

my $broker = StreamwinTest::Broker->start(topics => { win => $NPART });
my $node = new_node('windows');
my $brokers = $broker->bootstrap;

# Events: [k, v, ts_ms, partition].  Per partition, time advances 80 ms per
# event on average and each event is up to 2 s behind its slot.  Partitions
# are interleaved slot by slot, the way a live stream would arrive.
my (@ev, %maxts);
for my $i (0 .. $PER_P - 1)
{
	for my $p (0 .. $NPART - 1)
	{
		my $ts = $T0 + $i * 80 + int(rand(80)) - int(rand(2000));
		push @ev, [ 'k' . int(rand(7)), int(rand(1100)) - 100, $ts, $p ];
		$maxts{$p} = $ts if !defined $maxts{$p} || $ts > $maxts{$p};
	}
}
my @msgs = map {
	[
		$_->[3],
		sprintf('{"k": "%s", "v": %d, "ts": "%s"}',
			$_->[0], $_->[1], ts_text($_->[2]))
	]
} @ev;

my $W = min(values %maxts) - $DELAY;    # final watermark, all partitions busy
note('expected final watermark ' . ts_text($W));

$broker->produce('win', \@msgs);
load_table($node, 'ev', 'k text, v int, ts timestamptz',
	[ map { [ $_->[0], $_->[1], ts_text($_->[2]) ] } @ev ]);

my $aggs = 'count(*) AS n, sum(v) AS s, min(v) AS mn, max(v) AS mx, avg(v) AS a';
my $want_aggs =
  'count(*)::bigint AS n, sum(v)::bigint AS s, min(v)::int AS mn,'
  . ' max(v)::int AS mx, round(avg(v)::numeric, 8) AS a';
my $got_cols =
  'window_start, window_end, k, n::bigint, s::bigint, mn::int, mx::int,'
  . ' round(a::numeric, 8)';

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('win', '$brokers', 'win',
    'k text, v int, ts timestamptz', 'json',
    '{"max_records_per_batch": 4000}');
SELECT streamwin.create_query('tumble_append',
    \$q\$SELECT k, $aggs FROM win
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'append',
    options => '{"idle_timeout": "1 hour"}', start => false);
SELECT streamwin.create_query('hop_append',
    \$q\$SELECT k, $aggs FROM win
         GROUP BY streamwin.hop(ts, '30 seconds', '10 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'append',
    options => '{"idle_timeout": "1 hour"}', start => false);
SELECT streamwin.create_query('hop_update',
    \$q\$SELECT k, $aggs FROM win
         GROUP BY streamwin.hop(ts, '40 seconds', '15 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'update',
    options => '{"idle_timeout": "1 hour"}', start => false);
}, 'source and queries created');

# Runs run_available (or with catch_up => 1, CALL catch_up, which commits
# each batch) and checks its totals; returns them.
sub run_all
{
	my ($q, %opts) = @_;
	my $r;
	if ($opts{catch_up})
	{
		$r = query_json($node, "CALL streamwin.catch_up('$q')");
		return unless $r;
		$r->{watermark_ms} = $node->safe_psql('postgres',
			"SELECT round(extract(epoch FROM '$r->{watermark}'::timestamptz) * 1000)");
		is( $node->safe_psql('postgres',
				"SELECT count(*) = $r->{batches} AND count(DISTINCT xmin::text) = count(*) "
				  . "FROM streamwin.progress_log WHERE query = '$q'"),
			't', "$q: catch_up committed each of its batches");
	}
	else
	{
		$r = run_json($node, "run_available('$q')");
		return unless $r;
	}
	is($r->{input_rows},        scalar(@ev), "$q: read all events");
	is($r->{late_rows_dropped}, 0,           "$q: no late rows");
	is($r->{dead_letters},      0,           "$q: no dead letters");
	cmp_ok($r->{batches}, '>', 1, "$q: max_records_per_batch splits the run");
	is_deeply($r->{offsets}, { map { ("$_" => $PER_P) } 0 .. $NPART - 1 },
		"$q: offsets at the end of every partition");
	is($r->{watermark_ms}, $W,
		"$q: watermark = min over partitions of max event time - delay");
	return $r;
}

# append + tumble
run_all('tumble_append');
results_match(
	$node,
	"SELECT $got_cols FROM tumble_append",
	"SELECT * FROM ("
	  . windows_sql(table => 'ev', size => 10, keys => 'k', aggs => $want_aggs)
	  . ") w WHERE window_end <= '@{[ts_text($W)]}'",
	'tumble, append: exactly the windows closed by the watermark');

# append + hop
run_all('hop_append');
results_match(
	$node,
	"SELECT $got_cols FROM hop_append",
	"SELECT * FROM ("
	  . windows_sql(
		table => 'ev',
		size  => 30,
		slide => 10,
		keys  => 'k',
		aggs  => $want_aggs)
	  . ") w WHERE window_end <= '@{[ts_text($W)]}'",
	'hop, append: exactly the windows closed by the watermark');

# update + hop: every window, with its final values.  40 s is not a
# multiple of the 15 s slide: an event lies in two or three windows.  By
# catch_up: the same batches, each committed.
run_all('hop_update', catch_up => 1);
results_match(
	$node,
	"SELECT $got_cols FROM hop_update",
	windows_sql(
		table => 'ev',
		size  => 40,
		slide => 15,
		keys  => 'k',
		aggs  => $want_aggs),
	'hop, update: every window with its final values');

# A background worker, update mode without watermark.
psql_ok($node, qq{
SELECT streamwin.create_query('tumble_worker',
    \$q\$SELECT k, $aggs FROM win
         GROUP BY streamwin.tumble(ts, '1 minute'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms', start => true);
}, 'worker query created and started');
wait_results_match(
	$node,
	"SELECT $got_cols FROM tumble_worker",
	windows_sql(table => 'ev', size => 60, keys => 'k', aggs => $want_aggs),
	'tumble, update, worker: every window with its final values');
psql_ok($node, "SELECT streamwin.stop_query('tumble_worker')",
	'worker query stopped');

$node->stop;
$broker->stop;
done_testing();
