#!/usr/bin/perl
# gen_steady.pl: a steady event stream for the latency measurement of
# streamwin's benchmark (test/bench/run_bench.sh).
#
#   gen_steady.pl --rate R --seconds S --partitions P | kafka_produce --partition-prefix ...
#
# Writes R events per second for S seconds to stdout, paced on absolute
# deadlines (event i is due at start + i / R), as PARTITION<TAB>JSON lines,
# flushed as they are written.  Each event carries
#   "pt": the wall-clock time (microseconds since the Unix epoch) at which it
#         was handed to the producer: the start of its end-to-end latency;
#   "ts": the same instant as its event time, so windows are "now";
#   "k":  one of 1,000 keys, "v": a value.
use strict;
use warnings;
use Getopt::Long;
use POSIX qw(strftime);
use Time::HiRes qw(time sleep);

my ($rate, $secs, $nparts) = (5000, 20, 8);
GetOptions('rate=f' => \$rate, 'seconds=f' => \$secs, 'partitions=i' => \$nparts)
  or die "usage: $0 --rate R --seconds S --partitions P\n";

$| = 1;
my $n  = int($rate * $secs);
my $t0 = time;
my $i  = 0;
while ($i < $n)
{
	my $now = time;
	my $out = '';
	# everything that is due now, then a short sleep
	while ($i < $n && $t0 + $i / $rate <= $now)
	{
		my $us = int($now * 1e6);
		my $ts = strftime('%Y-%m-%dT%H:%M:%S', gmtime(int($now)))
		  . sprintf('.%06dZ', $us % 1_000_000);
		$out .= sprintf(qq(%d\t{"id":%d,"k":"k%d","v":%d,"ts":"%s","pt":%d}\n),
			$i % $nparts, $i, $i * 7 % 1000, $i % 100, $ts, $us);
		$i++;
	}
	print $out if $out ne '';
	my $next = $t0 + $i / $rate;
	my $wait = $next - time;
	sleep($wait) if $wait > 0;
}
