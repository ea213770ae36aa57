
# 003_late_rows.pl: late rows are dropped and counted; append mode emits a
# window once, when the watermark passes its end, and never changes it.
#
# One partition, small batches run one at a time with run_batch, so the
# batch boundaries are known: each batch reports the next offset, and a Perl
# simulation of the documented semantics replays the same batches:
#   - a row is late if its event time < the watermark in force (the one
#     computed at the end of the previous batch; none before the first);
#     late rows are dropped and counted;
#   - at the end of a batch, watermark = max(previous watermark, max event
#     time seen - delay); it never moves backwards;
#   - append: a window whose end <= watermark is emitted at the end of the
#     batch that moved the watermark past it, then its state is evicted;
#   - update: every group changed by the batch is upserted, final values.
# After every batch, the batch's progress record (input rows, late rows,
# watermark) and both result tables must equal the simulation.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(max);
use StreamwinTest;

srand(3003);

my $T0     = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $DELAY  = 5_000;                # watermark '5 seconds'
my $SIZE   = 10_000;               # tumble '10 seconds'
my $BATCH  = 10;                   # max_records_per_batch

my $broker = StreamwinTest::Broker->start(topics => { late => 1 });
my $node = new_node('late');
my $brokers = $broker->bootstrap;

# Events [k, v, ts_ms] in offset order.  Time mostly moves forward; some
# rows are a little out of order (within the delay), some far behind (late
# once the watermark has passed them), and some sit exactly on the
# watermark of the row before (never late: late means strictly older).
my @ev;
my $now = $T0 + 1000;
my $maxts = 0;
for my $i (0 .. 399)
{
	$now += int(rand(1200));
	my $r = rand();
	my $ts;
	if ($r < 0.12)
	{
		$ts = $now - 8_000 - int(rand(25_000));    # far behind
	}
	elsif ($r < 0.27)
	{
		$ts = $now - int(rand(4_000));             # a little behind
	}
	elsif ($r < 0.32 && $maxts)
	{
		$ts = $maxts - $DELAY;                     # exactly on a watermark
	}
	elsif ($r < 0.36 && $maxts)
	{
		$ts = $maxts - $DELAY - 1;                 # 1 ms before one
	}
	else
	{
		$ts = $now;
	}
	$maxts = max($maxts, $ts);
	push @ev, [ (qw(a b c))[ int(rand(3)) ], int(rand(100)), $ts ];
}

$broker->produce('late',
	[ map { sprintf('{"k": "%s", "v": %d, "ts": "%s"}', $_->[0], $_->[1], ts_text($_->[2])) } @ev ],
	partition => 0);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('late', '$brokers', 'late',
    'k text, v int, ts timestamptz', 'json', '{"max_records_per_batch": $BATCH}');
SELECT streamwin.create_query('late_append',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM late
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'append', start => false);
SELECT streamwin.create_query('late_update',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM late
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'update', start => false);
}, 'source and queries created');

# ---- the simulation ----------------------------------------------------

# Per query: offset reached, watermark (undef before the first batch), max
# event time, open window state, result table contents.
sub new_sim
{
	my ($mode) = @_;
	return {
		mode     => $mode,
		offset   => 0,
		wm       => undef,
		maxts    => undef,
		state    => {},    # "wstart,k" => [n, s]
		result   => {},    # "wstart,k" => [n, s]
		late     => 0,     # total late rows
		late_closed => 0,  # late rows whose window was already emitted
	};
}

# Apply the batch of offsets [from, to); returns the number of late rows.
sub sim_batch
{
	my ($sim, $to) = @_;
	my $late = 0;
	for my $o ($sim->{offset} .. $to - 1)
	{
		my ($k, $v, $ts) = @{ $ev[$o] };
		my $ws  = int($ts / $SIZE) * $SIZE;
		my $key = "$ws,$k";
		if (defined $sim->{wm} && $ts < $sim->{wm})
		{
			$late++;
			$sim->{late_closed}++
			  if $sim->{mode} eq 'append' && $sim->{result}{$key};
			next;
		}
		my $st = ($sim->{state}{$key} //= [ 0, 0 ]);
		$st->[0]++;
		$st->[1] += $v;
		$sim->{result}{$key} = [@$st] if $sim->{mode} eq 'update';
	}
	for my $o ($sim->{offset} .. $to - 1)
	{
		$sim->{maxts} = $ev[$o][2]
		  if !defined $sim->{maxts} || $ev[$o][2] > $sim->{maxts};
	}
	if (defined $sim->{maxts})
	{
		my $cand = $sim->{maxts} - $DELAY;
		$sim->{wm} = $cand if !defined $sim->{wm} || $cand > $sim->{wm};
	}
	for my $key (keys %{ $sim->{state} })
	{
		my ($ws) = split /,/, $key;
		next unless defined $sim->{wm} && $ws + $SIZE <= $sim->{wm};
		my $st = delete $sim->{state}{$key};
		$sim->{result}{$key} = $st if $sim->{mode} eq 'append';
	}
	$sim->{offset} = $to;
	$sim->{late} += $late;
	return $late;
}

sub sim_result_sql
{
	my ($sim) = @_;
	my @rows;
	for my $key (sort keys %{ $sim->{result} })
	{
		my ($ws, $k) = split /,/, $key, 2;
		push @rows,
		  [ ts_text($ws), ts_text($ws + $SIZE), $k, @{ $sim->{result}{$key} } ];
	}
	return values_sql(
		[
			[ window_start => 'timestamptz' ],
			[ window_end   => 'timestamptz' ],
			[ k            => 'text' ],
			[ n            => 'bigint' ],
			[ s            => 'bigint' ]
		],
		\@rows);
}

# ---- run both queries batch by batch ---------------------------------

my %sim = (late_append => new_sim('append'), late_update => new_sim('update'));
my ($first_emitted, $first_emitted_row);
my $all_ok = 1;
for my $q (qw(late_append late_update))
{
	my $sim = $sim{$q};
	my $batches = 0;
	while ($sim->{offset} < @ev)
	{
		last if ++$batches > 4 * @ev / $BATCH;    # give up, reported below
		my $r = run_json($node, "run_batch('$q')");
		last unless $r;
		my $to = $r->{offsets}{0} // $sim->{offset};
		my $from = $sim->{offset};
		my $what = "$q batch $r->{batch_id} (offsets $from..$to)";
		my $late = sim_batch($sim, $to);
		$sim->{last_batch} = $r->{batch_id};
		$sim->{last_late}  = $late;
		$sim->{last_input} = $to - $from;
		$all_ok &&= cmp_ok($to - $from, '<=', $BATCH,
			"$what: at most max_records_per_batch rows");
		$all_ok &&= is($r->{input_rows}, $to - $from, "$what: input_rows");
		$all_ok &&= is($r->{late_rows_dropped}, $late,
			"$what: late_rows_dropped");
		$all_ok &&= is($r->{watermark_ms}, $sim->{wm}, "$what: watermark");
		$all_ok &&= results_match($node,
			"SELECT window_start, window_end, k, n::bigint, s::bigint FROM $q",
			sim_result_sql($sim), "$what: result table");

		# Remember the first window append mode emitted, as it was then.
		if ($q eq 'late_append' && !$first_emitted && %{ $sim->{result} })
		{
			($first_emitted) = sort keys %{ $sim->{result} };
			my ($ws, $k) = split /,/, $first_emitted, 2;
			$first_emitted_row = $node->safe_psql('postgres',
				"SELECT n, s FROM late_append WHERE window_start = '@{[ts_text($ws)]}' AND k = '$k'"
			);
		}
		last unless $all_ok;    # the rest would only repeat the first error
	}
	is($sim->{offset}, scalar(@ev), "$q: consumed the whole partition");
}

# The data must actually exercise what this test is about.
cmp_ok($sim{late_append}{late}, '>=', 20, 'the stream had late rows');
cmp_ok($sim{late_append}{late_closed}, '>=', 5,
	'some late rows were for windows already emitted');
ok(scalar(keys %{ $sim{late_append}{result} }) >= 20,
	'append mode emitted windows');

# The first emitted window is unchanged, whatever arrived later.
if ($first_emitted)
{
	my ($ws, $k) = split /,/, $first_emitted, 2;
	is( $node->safe_psql('postgres',
			"SELECT n, s FROM late_append WHERE window_start = '@{[ts_text($ws)]}' AND k = '$k'"
		),
		$first_emitted_row,
		'a closed window is not changed by later late rows');
}

# Observability agrees with the last batch.
for my $q (qw(late_append late_update))
{
	my $sim = $sim{$q};
	is( $node->safe_psql('postgres', qq{
SELECT last_batch_id, round(extract(epoch FROM watermark) * 1000)
  FROM streamwin.queries WHERE name = '$q'}),
		"$sim->{last_batch}|$sim->{wm}",
		"$q: streamwin.queries has the last batch and the watermark");
	is( $node->safe_psql('postgres', qq{
SELECT late_rows_dropped, input_rows, round(extract(epoch FROM watermark) * 1000)
  FROM streamwin.progress WHERE query = '$q' AND batch_id = $sim->{last_batch}}),
		"$sim->{last_late}|$sim->{last_input}|$sim->{wm}",
		"$q: streamwin.progress has the last batch");
}

$node->stop;
$broker->stop;
done_testing();
