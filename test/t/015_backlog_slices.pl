
# 015_backlog_slices.pl: a batch of a backlog takes from every partition in
# proportion to what each has behind (Spark's maxOffsetsPerTrigger), so that
# a catch-up reads a slice of event time and the watermark moves during it.
#
# A topic of 8 partitions holds a backlog of uneven sizes (600 to 2,000
# messages) over the same hour of event time.  Batches of at most 500 are
# run by hand.  Each batch, the first included (a consumer asks its
# partitions' ends when they are assigned), must take from each partition
# exactly its share: floor(500 * lag / total lag), at least one message of a
# partition with any behind, never more than it has, and what rounding down
# left of the 500 one message each to the partitions with more behind, in
# partition order.  The watermark (the minimum over partitions) must move
# in every batch, and the result equal plain SQL over the same events.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $NPARTS = 8;
my $MAX = 500;
my $broker = StreamwinTest::Broker->start(topics => { bl => $NPARTS });
my $node = new_node('slices');
my $brokers = $broker->bootstrap;

# partition p: 600 + 200 p messages spread evenly over one hour
my (@msgs, @rows, %count);
my $id = 0;
for my $p (0 .. $NPARTS - 1)
{
	my $n = 600 + 200 * $p;
	$count{$p} = $n;
	for my $i (0 .. $n - 1)
	{
		my $ts = ts_text((1_700_000_000 + int(3600 * $i / $n)) * 1000);
		push @msgs, [ $p, qq({"id": $id, "p": $p, "ts": "$ts"}) ];
		push @rows, [ $id, $p, $ts ];
		$id++;
	}
}
$broker->produce('bl', \@msgs);
load_table($node, 'ev', 'id int, p int, ts timestamptz', \@rows);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('bl_src', '$brokers', 'bl', 'id int, p int, ts timestamptz',
    'json', '{"max_records_per_batch": $MAX}');
SELECT streamwin.create_query('slices',
    \$q\$SELECT p, count(*) AS n FROM bl_src GROUP BY streamwin.tumble(ts, '1 minute'), p\$q\$,
    watermark => '0 seconds', output_mode => 'update', start => false);
}, 'a query over a backlog of 8 partitions, batches of at most 500');

# positions after a batch, per partition
sub positions
{
	my ($r) = @_;
	return { map { $_ => $r->{offsets}{$_} } 0 .. $NPARTS - 1 };
}

# before the first batch: every partition from its first message
my $r;
my $pos = { map { $_ => 0 } 0 .. $NPARTS - 1 };
my $wm;
my ($batches, $exact, $moved) = (0, 0, 0);
my @bad;
while (1)
{
	my %lag = map { $_ => $count{$_} - $pos->{$_} } 0 .. $NPARTS - 1;
	my $total = 0;
	$total += $lag{$_} for keys %lag;
	last if $total == 0;
	my %share;
	my $sum = 0;
	for my $p (0 .. $NPARTS - 1)
	{
		if ($total <= $MAX) { $share{$p} = $lag{$p}; next; }
		my $s = int($MAX * $lag{$p} / $total);
		$s = 1 if $s == 0 && $lag{$p} > 0;
		$share{$p} = $s < $lag{$p} ? $s : $lag{$p};
		$sum += $share{$p};
	}
	# what rounding down left of the batch: a message more for each
	# partition with more behind, in partition order, until the batch is full
	if ($total > $MAX)
	{
		for my $p (0 .. $NPARTS - 1)
		{
			last if $sum >= $MAX;
			next unless $lag{$p} > $share{$p};
			$share{$p}++;
			$sum++;
		}
	}
	$r = run_json($node, "run_batch('slices')");
	my $next = positions($r);
	$batches++;
	my $ok = 1;
	for my $p (0 .. $NPARTS - 1)
	{
		my $took = $next->{$p} - $pos->{$p};
		if ($took != $share{$p})
		{
			$ok = 0;
			push @bad, "batch $r->{batch_id} partition $p: took $took, share $share{$p}";
		}
	}
	$exact++ if $ok;
	$moved++ if defined $r->{watermark_ms} && (!defined $wm || $r->{watermark_ms} > $wm);
	$wm = $r->{watermark_ms};
	$pos = $next;
	last if $batches > 100;
}
cmp_ok($batches, q{>=}, 15, "the backlog took $batches batches");
is($exact, $batches, 'each took exactly each partition\'s share of the lag')
  or diag(join("\n", @bad[0 .. ($#bad < 9 ? $#bad : 9)]));
# the last batch takes what is left, which need not move the minimum
cmp_ok($moved, '>=', $batches - 1, "the watermark moved during the catch-up ($moved of $batches batches)");

results_match($node, 'SELECT window_start, p, n FROM slices',
	"SELECT streamwin.tumble(ts, '1 minute') AS window_start, p, count(*) AS n FROM ev GROUP BY 1, 2",
	'every window of every partition equals plain SQL over the events');

$node->stop;
$broker->stop;
done_testing();
