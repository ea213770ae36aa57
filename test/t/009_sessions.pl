
# 009_sessions.pl: session windows are exact, batch by batch.
#
# GROUP BY streamwin.session(ts, '10 seconds'), k: per key, events closer
# than the gap (next - previous < gap) form one session [first event, last
# event + gap); an event that bridges two sessions merges them.  Every
# expectation is an independent Perl computation: sort each key's accepted
# events by time and split where the difference is >= the gap.
#
# Each key's event times are drawn with a fixed seed from a mix of
# differences: duplicates (0), gap - 1 ms, exactly the gap, gap + 1 ms,
# short and long pauses.  Events then arrive out of order (sorted by event
# time + a random delay), so sessions are seen in pieces that later events
# extend at either end or bridge, within and across batches.
#
#   1. One partition, 3000 events, max_records_per_batch 37:
#      - update mode, no watermark, run_batch one batch at a time: after
#        every batch the result table equals the sessions of the events
#        read so far (rows of sessions merged away are gone), and
#        state_rows is their number;
#      - update and append mode with a 60 s watermark (more than any
#        delay, so nothing is late), run_available: every session, and
#        exactly the sessions with window_end <= the final watermark.
#      - without a key (sessions of all events) and with two keys (k and
#        an expression that is NULL for a third of the events),
#        run_available.
#   2. One partition, 400 events, max_records_per_batch 10, watermark 5 s,
#      some rows late, capture_late_rows: append and update mode run
#      batch by batch against a simulation of the documented semantics
#      (late: event time < the watermark of the previous batch; watermark
#      = max event time seen - delay, never backwards, computed at the end
#      of a batch; append emits a session once window_end <= watermark):
#      progress, result table and state_rows after every batch, and the
#      captured late rows (offset, payload, event time, watermark).
#   3. Four partitions, a key's events spread over all of them, produced
#      while a worker (update mode, trigger_interval 100 ms) consumes them,
#      with a WHERE filter and a FILTER aggregate: the result equals the
#      sessions of all the filtered events.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min max sum);
use StreamwinTest;

srand(9009);

my $T0  = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $GAP = 10_000;               # session gap '10 seconds'

my $broker = StreamwinTest::Broker->start(
	topics => { sess_many => 1, sess_late => 1, sess_parts => 4 });
my $node = new_node('sessions');
my $brokers = $broker->bootstrap;

# ---- events and the independent computation -----------------------------

# $n event times of one key from $start on, with differences chosen to
# sit on and around the gap.
sub key_times
{
	my ($n, $start) = @_;
	my @t;
	my $t = $start + int(rand(3 * $GAP));
	for (1 .. $n)
	{
		my $r = rand();
		if    ($r < 0.08) { }                           # duplicate time
		elsif ($r < 0.14) { $t += $GAP - 1 }            # same session, just
		elsif ($r < 0.20) { $t += $GAP }                # a new one, exactly
		elsif ($r < 0.23) { $t += $GAP + 1 }
		elsif ($r < 0.65) { $t += 1 + int(rand($GAP - 1)) }
		else              { $t += $GAP + int(rand(3 * $GAP)) }
		push @t, $t;
	}
	return @t;
}

# Events [k, v, ts] of keys @keys, $per_key each, in arrival order: sorted
# by event time + a delay from $delay->() (ties kept in generation order).
sub arrivals
{
	my ($keys, $per_key, $delay) = @_;
	my @ev;
	for my $k (@$keys)
	{
		push @ev, map { [ $k, int(rand(1100)) - 100, $_ ] }
		  key_times($per_key, $T0);
	}
	my @arr = map { $_->[2] + $delay->() } @ev;
	return @ev[ sort { $arr[$a] <=> $arr[$b] || $a <=> $b } 0 .. $#ev ];
}

sub ev_json
{
	my ($e) = @_;
	return sprintf('{"k": "%s", "v": %d, "ts": "%s"}',
		$e->[0], $e->[1], ts_text($e->[2]));
}

# The sessions of EVENTS ([k, v, ts] array refs), per key KEYF->(event)
# (an array ref of key values; default [k]): a hash "start,keys" =>
# [start, end, n, sum, min, max, count of v > 500, key values...].
sub sessions
{
	my ($events, $keyf) = @_;
	$keyf //= sub { [ $_[0][0] ] };
	my (%by_key, %kv, %s);
	for my $e (@$events)
	{
		my $kv = $keyf->($e);
		my $id = join("\x1f", map { $_ // "\x1eNULL" } @$kv);
		$kv{$id} = $kv;
		push @{ $by_key{$id} }, $e;
	}
	for my $id (keys %by_key)
	{
		my @e = sort { $a->[2] <=> $b->[2] } @{ $by_key{$id} };
		my @cur;
		my $flush = sub {
			return unless @cur;
			my @v = map { $_->[1] } @cur;
			my $start = $cur[0][2];
			$s{"$start,$id"} = [
				$start, $cur[-1][2] + $GAP, scalar(@v), sum(@v), min(@v),
				max(@v), scalar(grep { $_ > 500 } @v), @{ $kv{$id} } ];
			@cur = ();
		};
		for my $e (@e)
		{
			$flush->() if @cur && $e->[2] - $cur[-1][2] >= $GAP;
			push @cur, $e;
		}
		$flush->();
	}
	return \%s;
}

# SQL returning SESSIONS (a hash from sessions(), or an array of its
# values) as window_start, window_end, the keys (keys => [[name, type],
# ...], default [[k => 'text']]), n, s, mn, mx, a (avg rounded to 8
# places: avg(int) is numeric sum / count) and, with big => 1, big.
sub sessions_sql
{
	my ($sess, %o) = @_;
	my $keys = $o{keys} // [ [ k => 'text' ] ];
	my @rows = map {
		[ ts_text($_->[0]), ts_text($_->[1]), @$_[ 7 .. $#$_ ], @$_[ 2 .. 6 ] ]
	} (ref $sess eq 'HASH' ? values %$sess : @$sess);
	my $v = values_sql(
		[
			[ window_start => 'timestamptz' ],
			[ window_end   => 'timestamptz' ],
			@$keys,
			[ n   => 'bigint' ],
			[ s   => 'bigint' ],
			[ mn  => 'int' ],
			[ mx  => 'int' ],
			[ big => 'bigint' ]
		],
		\@rows);
	return "SELECT window_start, window_end, "
	  . join('', map { "$_->[0], " } @$keys)
	  . "n, s, mn, mx, round(s::numeric / n, 8) AS a"
	  . ($o{big} ? ', big' : '')
	  . " FROM ($v) v";
}

my $aggs = 'count(*) AS n, sum(v) AS s, min(v) AS mn, max(v) AS mx, avg(v) AS a';

# The result columns to compare, with the key columns KEYS (default k).
sub got_cols
{
	my ($keys) = @_;
	$keys //= 'k, ';
	return "window_start, window_end, $keys n::bigint, s::bigint, mn::int,"
	  . ' mx::int, round(a::numeric, 8)';
}
my $got_cols = got_cols();

# ---- 1. many batches on one partition -----------------------------------

my $BATCH1 = 37;
my $DELAY1 = 60_000;    # arrival delays are < 60 s, the watermark delay
my @ev1 = arrivals([ map { "k$_" } 0 .. 5 ], 500, sub { int(rand($DELAY1)) });

$broker->produce('sess_many', [ map { ev_json($_) } @ev1 ], partition => 0);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sess_many', '$brokers', 'sess_many',
    'k text, v int, ts timestamptz', 'json',
    '{"max_records_per_batch": $BATCH1}');
SELECT streamwin.create_query('many_update',
    \$q\$SELECT k, $aggs FROM sess_many
         GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('many_update_wm',
    \$q\$SELECT k, $aggs FROM sess_many
         GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    watermark => '60 seconds', output_mode => 'update', start => false);
SELECT streamwin.create_query('many_append',
    \$q\$SELECT k, $aggs FROM sess_many
         GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    watermark => '60 seconds', output_mode => 'append', start => false);
SELECT streamwin.create_query('many_nokey',
    \$q\$SELECT $aggs FROM sess_many
         GROUP BY streamwin.session(ts, '10 seconds')\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('many_twokeys',
    \$q\$SELECT k, nullif(abs(v) % 3, 0) AS g, $aggs FROM sess_many
         GROUP BY streamwin.session(ts, '10 seconds'), k, g\$q\$,
    watermark => '60 seconds', output_mode => 'append', start => false);
}, 'part 1: source and queries created');

# What the events of each batch do to the sessions of the batches before,
# so that the test shows it exercises merging: per batch, for each event,
# the earlier sessions of its key that it joins.
my %did = (bridge => 0, front => 0, end => 0, inside => 0, dup => 0);
{
	my %seen;
	for (my $from = 0; $from < @ev1; $from += $BATCH1)
	{
		my $prev = sessions([ @ev1[ 0 .. $from - 1 ] ]);
		my %by_key;
		push @{ $by_key{ $_->[7] } }, $_ for values %$prev;
		for my $e (@ev1[ $from .. min($from + $BATCH1, scalar @ev1) - 1 ])
		{
			my ($k, undef, $ts) = @$e;
			$did{dup}++ if $seen{"$k,$ts"}++;
			my @hit = grep { $ts > $_->[0] - $GAP && $ts < $_->[1] }
			  @{ $by_key{$k} };
			if    (@hit >= 2)             { $did{bridge}++ }
			elsif (!@hit)                 { }
			elsif ($ts < $hit[0][0])      { $did{front}++ }
			elsif ($ts > $hit[0][1] - $GAP) { $did{end}++ }
			else                          { $did{inside}++ }
		}
	}
}
note(join(', ', map { "$_: $did{$_}" } sort keys %did));
cmp_ok($did{bridge}, '>=', 20, 'part 1: events bridge sessions of earlier batches');
cmp_ok($did{front},  '>=', 20, 'part 1: events extend earlier sessions at the front');
cmp_ok($did{end},    '>=', 20, 'part 1: events extend earlier sessions at the end');
cmp_ok($did{dup},    '>=', 20, 'part 1: events repeat a time of their key');

# many_update, batch by batch: the sessions of everything read so far.
{
	my $offset = 0;
	my $batches = 0;
	my $all_ok = 1;
	while ($offset < @ev1)
	{
		last if ++$batches > 2 * @ev1 / $BATCH1;
		my $r = run_json($node, "run_batch('many_update')");
		last unless $r;
		my $to = $r->{offsets}{0} // $offset;
		my $what = "many_update batch $r->{batch_id} (offsets $offset..$to)";
		my $want = sessions([ @ev1[ 0 .. $to - 1 ] ]);
		$all_ok &&= is($to - $offset, min($BATCH1, @ev1 - $offset),
			"$what: max_records_per_batch rows");
		$all_ok &&= is($r->{late_rows_dropped}, 0, "$what: no late rows");
		$all_ok &&= is($r->{state_rows}, scalar(keys %$want),
			"$what: state_rows = number of sessions");
		$all_ok &&= results_match($node,
			"SELECT $got_cols FROM many_update",
			sessions_sql($want), "$what: result table");
		$offset = $to;
		last unless $all_ok;
	}
	is($offset, scalar(@ev1), 'many_update: consumed the whole partition');
}

my $all1 = sessions(\@ev1);
my $wm1  = max(map { $_->[2] } @ev1) - $DELAY1;
for my $q (qw(many_update_wm many_append many_nokey many_twokeys))
{
	my $r = run_json($node, "run_available('$q')");
	next unless $r;
	is($r->{input_rows},        scalar(@ev1), "$q: read all events");
	is($r->{late_rows_dropped}, 0,            "$q: no late rows");
	cmp_ok($r->{batches}, '>=', int(@ev1 / $BATCH1), "$q: in many batches");
	is($r->{watermark_ms}, $q eq 'many_nokey' ? undef : $wm1,
		"$q: watermark = max event time - 60 s");
}
results_match($node, "SELECT $got_cols FROM many_update_wm",
	sessions_sql($all1), 'many_update_wm: every session, final values');
my @closed1 = grep { $_->[1] <= $wm1 } values %$all1;
cmp_ok(scalar(@closed1), '>', 0.9 * scalar(keys %$all1),
	'part 1: most sessions are closed by the final watermark');
results_match($node, "SELECT $got_cols FROM many_append",
	sessions_sql(\@closed1),
	'many_append: exactly the sessions with window_end <= watermark');

# Without a key, sessions of all events; with two keys, per (k, g), g being
# NULL (a group of its own) for a third of the events.
results_match($node, "SELECT @{[got_cols('')]} FROM many_nokey",
	sessions_sql(sessions(\@ev1, sub { [] }), keys => []),
	'many_nokey: the sessions of all events, whatever their key');
results_match($node, "SELECT @{[got_cols('k, g, ')]} FROM many_twokeys",
	sessions_sql(
		[
			grep { $_->[1] <= $wm1 }
			  values %{ sessions(\@ev1, sub { [ $_[0][0], abs($_[0][1]) % 3 || undef ] }) }
		],
		keys => [ [ k => 'text' ], [ g => 'int' ] ]),
	'many_twokeys: closed sessions per (k, g)');

# ---- 2. late rows, batch by batch ---------------------------------------

my $BATCH2 = 10;
my $DELAY2 = 5_000;
my @ev2;
{
	# 15% of the rows arrive 15-90 s after their time: many of them late
	my @arr = arrivals([qw(a b c)], 130,
		sub { rand() < 0.15 ? 15_000 + int(rand(75_000)) : int(rand(4_000)) });
	# Some rows exactly on the watermark in force in their batch (never
	# late: late means strictly older) and some 1 ms before it (late).
	for my $e (@arr)
	{
		my $done = @ev2 - @ev2 % $BATCH2;    # rows of the earlier batches
		if ($done && rand() < 0.08)
		{
			my $wm = max(map { $_->[2] } @ev2[ 0 .. $done - 1 ]) - $DELAY2;
			push @ev2,
			  [ (qw(a b c))[ int(rand(3)) ], int(rand(1100)) - 100,
				$wm - (rand() < 0.5 ? 1 : 0) ];
		}
		push @ev2, $e;
	}
}
my @payload2 = map { ev_json($_) } @ev2;

$broker->produce('sess_late', \@payload2, partition => 0);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sess_late', '$brokers', 'sess_late',
    'k text, v int, ts timestamptz', 'json',
    '{"max_records_per_batch": $BATCH2}');
SELECT streamwin.create_query('late_append',
    \$q\$SELECT k, $aggs FROM sess_late
         GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'append',
    options => '{"capture_late_rows": true}', start => false);
SELECT streamwin.create_query('late_update',
    \$q\$SELECT k, $aggs FROM sess_late
         GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'update',
    options => '{"capture_late_rows": true}', start => false);
}, 'part 2: source and queries created');

# The simulation: offset reached, watermark in force (undef before the
# first batch), max event time, accepted rows, late rows [offset, ts, wm].
# The sessions of the accepted rows are the update result; those with
# window_end <= watermark are closed: the append result.  (A row accepted
# later has ts >= watermark >= the end of a closed session, so it can
# never join one.)
sub sim_batch
{
	my ($sim, $to) = @_;
	my $late = 0;
	for my $o ($sim->{offset} .. $to - 1)
	{
		my $e = $ev2[$o];
		if (defined $sim->{wm} && $e->[2] < $sim->{wm})
		{
			push @{ $sim->{late} }, [ $o, $e->[2], $sim->{wm} ];
			$late++;
		}
		else
		{
			push @{ $sim->{accepted} }, $e;
			$sim->{on_wm}++ if defined $sim->{wm} && $e->[2] == $sim->{wm};
		}
		$sim->{maxts} = $e->[2]
		  if !defined $sim->{maxts} || $e->[2] > $sim->{maxts};
	}
	if (defined $sim->{maxts})
	{
		my $cand = $sim->{maxts} - $DELAY2;
		$sim->{wm} = $cand if !defined $sim->{wm} || $cand > $sim->{wm};
	}
	my $s = sessions($sim->{accepted});
	$sim->{open} = grep { $_->[1] > $sim->{wm} } values %$s;
	$sim->{result} =
	  $sim->{mode} eq 'update'
	  ? [ values %$s ]
	  : [ grep { $_->[1] <= $sim->{wm} } values %$s ];
	$sim->{offset} = $to;
	return $late;
}

my %sim2;
for my $q (qw(late_append late_update))
{
	my $sim = $sim2{$q} = {
		mode     => ($q =~ /append/ ? 'append' : 'update'),
		offset   => 0,
		late     => [],
		accepted => [],
		result   => [],
		on_wm    => 0,
	};
	my $batches = 0;
	my $all_ok  = 1;
	my %emitted;    # append: each emitted session, as first emitted
	while ($sim->{offset} < @ev2)
	{
		last if ++$batches > 4 * @ev2 / $BATCH2;
		my $r = run_json($node, "run_batch('$q')");
		last unless $r;
		my $from = $sim->{offset};
		my $to   = $r->{offsets}{0} // $from;
		my $what = "$q batch $r->{batch_id} (offsets $from..$to)";
		my $late = sim_batch($sim, $to);
		$all_ok &&= is($to - $from, min($BATCH2, @ev2 - $from),
			"$what: max_records_per_batch rows");
		$all_ok &&= is($r->{input_rows}, $to - $from, "$what: input_rows");
		$all_ok &&= is($r->{late_rows_dropped}, $late,
			"$what: late_rows_dropped");
		$all_ok &&= is($r->{watermark_ms}, $sim->{wm}, "$what: watermark");
		$all_ok &&= is($r->{state_rows}, $sim->{open},
			"$what: state_rows = open sessions");
		$all_ok &&= results_match($node, "SELECT $got_cols FROM $q",
			sessions_sql($sim->{result}), "$what: result table");
		if ($sim->{mode} eq 'append')
		{
			# the simulation itself: an emitted session never changes
			for my $s (@{ $sim->{result} })
			{
				my $id = "$s->[0],$s->[7]";
				$emitted{$id} //= join(',', @$s);
				$all_ok &&= is(join(',', @$s), $emitted{$id},
					"$what: simulation keeps emitted session $id")
				  if $emitted{$id} ne join(',', @$s);
			}
		}
		last unless $all_ok;
	}
	is($sim->{offset}, scalar(@ev2), "$q: consumed the whole partition");

	# every late row captured, with its offset, payload, time and watermark
	my @want = map {
		[ 0, $_->[0], $payload2[ $_->[0] ], $_->[1], $_->[2] ]
	} @{ $sim->{late} };
	results_match(
		$node, qq{
SELECT partition, "offset", convert_from(payload, 'UTF8') AS payload,
       round(extract(epoch FROM event_time) * 1000) AS event_ms,
       round(extract(epoch FROM watermark) * 1000) AS watermark_ms
  FROM streamwin.late_rows WHERE query = '$q'},
		values_sql(
			[
				[ partition    => 'int' ],
				[ '"offset"'   => 'bigint' ],
				[ payload      => 'text' ],
				[ event_ms     => 'numeric' ],
				[ watermark_ms => 'numeric' ]
			],
			\@want),
		"$q: late rows captured with offset, payload, event time, watermark");
	is( $node->safe_psql('postgres', qq{
SELECT sum(late_rows_dropped) FROM streamwin.progress WHERE query = '$q'}),
		scalar(@want), "$q: progress counts every late row");
}

# The data must exercise what part 2 is about.
{
	my $sim = $sim2{late_append};
	my $all = sessions(\@ev2);    # as if nothing were late
	note("part 2: late rows: " . scalar(@{ $sim->{late} })
		  . ", rows on the watermark: $sim->{on_wm}, sessions emitted: "
		  . scalar(@{ $sim->{result} }));
	cmp_ok(scalar(@{ $sim->{late} }), '>=', 15, 'part 2: the stream had late rows');
	cmp_ok(scalar(@{ $sim->{result} }), '>=', 30, 'part 2: append emitted sessions');
	cmp_ok(scalar(grep { $_->[2] > 1 } @{ $sim->{result} }), '>=', 15,
		'part 2: emitted sessions of several events');
	cmp_ok($sim->{on_wm}, '>=', 3,
		'part 2: rows exactly on the watermark were accepted');
	isnt(join(';', sort keys %$all),
		join(';', sort keys %{ sessions($sim->{accepted}) }),
		'part 2: dropping late rows changed the sessions');
}

# ---- 3. several partitions, a worker ------------------------------------

my $NPART3 = 4;
my @ev3 = arrivals([ map { "p$_" } 0 .. 4 ], 800, sub { int(rand(40_000)) });
push @$_, int(rand($NPART3)) for @ev3;    # a key's events on every partition

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sess_parts', '$brokers', 'sess_parts',
    'k text, v int, ts timestamptz', 'json',
    '{"max_records_per_batch": 50}');
SELECT streamwin.create_query('parts_worker',
    \$q\$SELECT k, $aggs, count(*) FILTER (WHERE v > 500) AS big
         FROM sess_parts WHERE v % 7 <> 0
         GROUP BY streamwin.session(ts, '10 seconds'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms', start => true);
}, 'part 3: source and worker query created');

my $bg = $broker->produce('sess_parts', [ map { [ $_->[3], ev_json($_) ] } @ev3 ],
	rate => 2000, background => 1);
$bg->finish;
wait_results_match(
	$node,
	"SELECT $got_cols, big::bigint FROM parts_worker",
	sessions_sql(sessions([ grep { $_->[1] % 7 != 0 } @ev3 ]), big => 1),
	'parts_worker: every session of the filtered events, final values');
is( $node->safe_psql('postgres', qq{
SELECT sum(input_rows), sum(late_rows_dropped), count(*) > 5
  FROM streamwin.progress WHERE query = 'parts_worker'}),
	scalar(@ev3) . '|0|t',
	'parts_worker: read every event once, in many batches, none late');
psql_ok($node, "SELECT streamwin.stop_query('parts_worker')",
	'parts_worker stopped');

$node->stop;
$broker->stop;
done_testing();
