
# 035_cancelled_fetch.pl: a batch cancelled while its fetch waits loses no
# message.
#
# The consumer takes messages before its fetch returns them to the batch:
# a statement_timeout (or a cancel) that strikes while the fetch waits for
# a slow partition leaves it past messages no batch used.  The session
# keeps its consumer for its next batch, which must start again from the
# stored positions (kafka_source.c, kafka_fetch_rows), not from where the
# consumer stood.
#
# Two brokers, the second answering 600 ms late (kafka_broker --rtt), a
# topic of two partitions, one led by each (--spread).  A new session's
# first batch asks both partitions' ends, takes the fast partition's
# messages and waits a round trip for the slow one's.  One such batch is
# timed first; then, each round in a new session, a statement_timeout at a
# fraction of that time (55% to 95%) strikes across it, and batches in the
# same session read on.  After each round the result (a count and sum per
# key) must equal every event produced, computed here.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use StreamwinTest;

my $broker = StreamwinTest::Broker->start(
	brokers => 2,
	spread  => 1,
	rtt     => { 2 => 600 },
	topics  => { ev => 2 });
my $brokers = $broker->bootstrap;
my $node = new_node('cancelled_fetch');

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sev', '$brokers', 'ev', 'k int, v int', 'json');
SELECT streamwin.create_query('cf', 'SELECT k, count(*) AS n, sum(v) AS s FROM sev GROUP BY k',
    output_mode => 'update', start => false);
}, 'source and query');

my (%n, %s);
my $seq = 0;
my $produced = 0;
my $cancelled = 0;

sub expected
{
	return join("\n", map { "$_|$n{$_}|$s{$_}" } sort { $a <=> $b } keys %n);
}

# 50 events to each partition
sub produce_round
{
	my @m;
	for my $p (0 .. 1)
	{
		for (1 .. 50)
		{
			$seq++;
			my $k = $seq % 7;
			push @m, [ $p, qq({"k": $k, "v": $seq}) ];
			$n{$k}++;
			$s{$k} += $seq;
		}
	}
	$broker->produce('ev', \@m);
	$produced += @m;
}

# How long a new session's first batch takes here: it takes the fast
# partition's messages about one round trip of the slow broker before its
# end, and the timeouts below strike across that stretch.
# (Timed by the server, as statement_timeout is: not psql's start.)
produce_round();
my ($first_rows, $first_ms) = split /\|/, $node->safe_psql('postgres', q{
WITH t0 AS MATERIALIZED (SELECT clock_timestamp() AS t),
     r AS MATERIALIZED (SELECT streamwin.run_batch('cf')->>'input_rows' AS n FROM t0)
SELECT n, round(extract(epoch FROM clock_timestamp() - (SELECT t FROM t0)) * 1000) FROM r});
is($first_rows, 100, 'a first batch reads both partitions');
note("a new session's first batch: $first_ms ms");

my @timeouts = map { int($first_ms * $_) } (0.45, 0.55, 0.65, 0.75, 0.85, 0.9, 0.95);
for my $round (1 .. @timeouts)
{
	produce_round();

	my $sess = store_session($node);
	sess_ok($sess, qq{SET statement_timeout = '$timeouts[$round - 1]ms'});
	my ($out, $err) = sess($sess, q{SELECT streamwin.run_batch('cf')->>'input_rows'});
	$cancelled++ if $err =~ /statement timeout/;
	note("round $round: timeout $timeouts[$round - 1] ms: " . ($err =~ /statement timeout/ ? 'cancelled' : "read $out"));
	sess_ok($sess, q{RESET statement_timeout});

	# then batches in the same session until the query has read everything
	my $read = 0;
	for (1 .. 20)
	{
		($out) = sess_ok($sess, q{SELECT sum(n) FROM cf});
		$read = $out || 0;
		last if $read >= $produced;
		sess_ok($sess, q{SELECT streamwin.run_batch('cf')});
	}
	$sess->quit;
	is($read, $produced, "round $round: every event read once");
	is($node->safe_psql('postgres', 'SELECT k, n, s FROM cf ORDER BY k'), expected(),
		"round $round: the result equals the events");
}
note("$cancelled of " . scalar(@timeouts) . " first batches were cancelled by the timeout");
cmp_ok($cancelled, '>', 0, 'the timeout struck in some first batch');

done_testing();
