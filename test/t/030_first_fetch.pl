
# 030_first_fetch.pl: a new consumer's first batch takes what its
# partitions hold, when their leaders answer at different times.
#
# Two brokers, the second answering 300 ms late (kafka_broker --rtt), a
# topic of four partitions led by both in turn (--spread).  A new session's consumer hears
# from the fast broker's partitions first; its first batch must still take
# every partition's messages (the lags asked at the assignment), not the
# fast ones' and a linger's worth (kafka_source.c, limit_by_lag).  Each
# round produces events to every partition and runs one batch from a new
# connection; after each the batch's input_rows and the result (a count
# and sum per key, update mode) equal the events produced so far,
# computed here.  The last rounds have more than max_records_per_batch
# waiting: the batch takes its share of each partition, and the next new
# session the rest.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $broker = StreamwinTest::Broker->start(
	brokers => 2,
	spread  => 1,
	rtt     => { 2 => 300 },
	topics  => { ev => 4 });
my $brokers = $broker->bootstrap;
my $node = new_node('first_fetch');

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sev', '$brokers', 'ev', 'k int, v int', 'json',
    '{"max_records_per_batch": 100}');
SELECT streamwin.create_query('ff', 'SELECT k, count(*) AS n, sum(v) AS s FROM sev GROUP BY k',
    output_mode => 'update', start => false);
}, 'source and query');

my (%n, %s);
my $seq = 0;
my $produced = 0;
my $read = 0;

# $per events to each partition
sub produce_round
{
	my ($per) = @_;
	my @m;
	for my $p (0 .. 3)
	{
		for (1 .. $per)
		{
			$seq++;
			my $k = $seq % 5;
			push @m, [ $p, qq({"k": $k, "v": $seq}) ];
			$n{$k}++;
			$s{$k} += $seq;
		}
	}
	$broker->produce('ev', \@m);
	$produced += @m;
}

sub expected
{
	return join("\n", map { "$_|$n{$_}|$s{$_}" } sort { $a <=> $b } keys %n);
}

# rounds that fit in a batch: each new session's batch takes all of them
for my $round (1 .. 3)
{
	produce_round(10);
	my $rows = $node->safe_psql('postgres',
		q{SELECT streamwin.run_batch('ff')->>'input_rows'});
	is($rows, 40, "round $round: a new session's first batch reads every partition's events");
	$read += $rows;
	is($node->safe_psql('postgres', 'SELECT k, n, s FROM ff ORDER BY k'), expected(),
		"round $round: the result equals the events");
}

# more than a batch waiting: a share of each partition, then the rest
produce_round(40);
my $rows = $node->safe_psql('postgres', q{SELECT streamwin.run_batch('ff')->>'input_rows'});
is($rows, 100, 'a backlog: the first new session takes a full batch');
$read += $rows;
$rows = $node->safe_psql('postgres', q{SELECT streamwin.run_batch('ff')->>'input_rows'});
is($rows, $produced - $read, 'the next new session takes the rest');
is($node->safe_psql('postgres', 'SELECT k, n, s FROM ff ORDER BY k'), expected(),
	'after the backlog, the result equals the events');

done_testing();
