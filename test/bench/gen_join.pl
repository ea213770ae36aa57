#!/usr/bin/perl
# gen_join.pl: the impressions and clicks of streamwin's benchmark
# (test/bench/run_bench.sh, cases J and JA: a stream-stream join).
#
#   gen_join.pl --events N --partitions P --rate R --ads A --out DIR
#
# Writes, for N impressions and N clicks:
#   DIR/imps.tsv, DIR/clks.tsv  PARTITION<TAB>JSON, one line per Kafka
#                         message, for kafka_produce --partition-prefix, each
#                         file in event-time order and spread round robin
#                         (event j goes to partition j % P, so each partition
#                         is in time order)
#   DIR/imps.csv, DIR/clks.csv  the same events already decoded, as CSV
#                         (imp_id,ad_id,imp_time and
#                         click_id,imp_id,ad_id,click_time), for COPY
#   DIR/expected.env      what a correct run must produce, as shell variables
#
# Impression i (imp_id = i): {"imp_id":i,"ad_id":A,"imp_time":"..."}, ad_id
# uniform among A ads (10,000), imp_time = 2024-01-01 00:00:00 + (i + u) / R
# seconds (u uniform in [0, 1), R impressions per second of event time).
#
# Clicks: each impression gets 0, 1, 2 or 3 clicks with probabilities 0.45,
# 0.25, 0.15, 0.15 (mean 1), then clicks are added to or taken from random
# impressions until there are exactly N.  A click carries its impression's
# imp_id and ad_id; its delay after the impression is 1-60 s (60% of the
# clicks), 1-10 minutes (30%; one in a hundred of them exactly 10 minutes)
# or 10-20 minutes (10%; one in a hundred of them 10 minutes and 1 ms).
# Clicks are numbered (click_id 0..N-1) in click_time order, ties by
# impression.  {"click_id":c,"imp_id":i,"ad_id":A,"click_time":"..."}.
#
# The join of the benchmark is
#   c.ad_id = i.ad_id AND c.imp_id = i.imp_id
#   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
# so a click makes exactly one pair if its delay is at most 10 minutes, and
# none otherwise.  expected.env has, over those pairs:
#   J_PAIRS, J_SUM_CLICK (sum of click_id), J_SUM_IMP (sum of imp_id),
#   J_SUM_DELAY_MS (sum of click_time - imp_time in milliseconds);
# and for case JA, count(*) per ad per 1-minute tumbling window over
# imp_time (windows aligned on the epoch): J_AGG_GROUPS, J_AGG_N (sum of
# n), J_AGG_SQ (sum of n * n), J_AGG_KEY (sum of ad_id * n).
use strict;
use warnings;
use Getopt::Long;
use POSIX qw(strftime);

my ($n, $nparts, $rate, $nads, $out) = (500_000, 16, 200, 10_000, undef);
GetOptions(
	'events=i'     => \$n,
	'partitions=i' => \$nparts,
	'rate=i'       => \$rate,
	'ads=i'        => \$nads,
	'out=s'        => \$out)
  or die "usage: $0 --events N --partitions P --rate R --ads A --out DIR\n";
die "--out is required\n" unless defined $out;
die "--events and --rate must be positive\n" unless $n > 0 && $rate > 0;

srand(20240315);
my $T0 = 1_704_067_200;    # 2024-01-01 00:00:00 UTC, in seconds

# event time (ms since $T0) -> ISO-8601, the seconds' text cached
my ($last_sec, $sec_text) = (-1, '');
sub ts_text
{
	my ($ms) = @_;
	my $sec = $T0 + int($ms / 1000);
	if ($sec != $last_sec)
	{
		$sec_text = strftime('%Y-%m-%dT%H:%M:%S', gmtime($sec));
		$last_sec = $sec;
	}
	return sprintf('%s.%03dZ', $sec_text, $ms % 1000);
}

# impressions
my (@imp_ms, @imp_ad);
for my $i (0 .. $n - 1)
{
	$imp_ms[$i] = int(($i + rand()) * 1000 / $rate);
	$imp_ad[$i] = int(rand($nads));
}

# clicks per impression, then exactly N in all
my @k;
my $total = 0;
for my $i (0 .. $n - 1)
{
	my $r = rand();
	$k[$i] = $r < 0.45 ? 0 : $r < 0.70 ? 1 : $r < 0.85 ? 2 : 3;
	$total += $k[$i];
}
while ($total < $n)
{
	$k[ int(rand($n)) ]++;
	$total++;
}
while ($total > $n)
{
	my $i = int(rand($n));
	next unless $k[$i] > 0;
	$k[$i]--;
	$total--;
}

my (@clk_ms, @clk_imp);
for my $i (0 .. $n - 1)
{
	for (1 .. $k[$i])
	{
		my $r = rand();
		my $delay;
		if ($r < 0.6)
		{
			$delay = 1000 + int(rand(59_000));
		}
		elsif ($r < 0.9)
		{
			$delay = rand() < 0.01 ? 600_000 : 60_000 + int(rand(540_000));
		}
		else
		{
			$delay = rand() < 0.01 ? 600_001 : 600_001 + int(rand(600_000));
		}
		push @clk_ms,  $imp_ms[$i] + $delay;
		push @clk_imp, $i;
	}
}
my @order = sort { $clk_ms[$a] <=> $clk_ms[$b] || $clk_imp[$a] <=> $clk_imp[$b] } 0 .. $#clk_ms;

open my $itsv, '>', "$out/imps.tsv" or die "$out/imps.tsv: $!";
open my $icsv, '>', "$out/imps.csv" or die "$out/imps.csv: $!";
for my $i (0 .. $n - 1)
{
	my $ts = ts_text($imp_ms[$i]);
	print $itsv $i % $nparts, "\t", qq({"imp_id":$i,"ad_id":$imp_ad[$i],"imp_time":"$ts"}), "\n";
	print $icsv "$i,$imp_ad[$i],$ts\n";
}
close $itsv or die "$out/imps.tsv: $!";
close $icsv or die "$out/imps.csv: $!";

open my $ctsv, '>', "$out/clks.tsv" or die "$out/clks.tsv: $!";
open my $ccsv, '>', "$out/clks.csv" or die "$out/clks.csv: $!";
my ($pairs, $sum_click, $sum_imp, $sum_delay) = (0, 0, 0, 0);
my %agg;
for my $c (0 .. $#order)
{
	my $j  = $order[$c];
	my $i  = $clk_imp[$j];
	my $ad = $imp_ad[$i];
	my $ts = ts_text($clk_ms[$j]);
	print $ctsv $c % $nparts, "\t", qq({"click_id":$c,"imp_id":$i,"ad_id":$ad,"click_time":"$ts"}), "\n";
	print $ccsv "$c,$i,$ad,$ts\n";
	my $delay = $clk_ms[$j] - $imp_ms[$i];
	next unless $delay >= 0 && $delay <= 600_000;
	$pairs++;
	$sum_click += $c;
	$sum_imp   += $i;
	$sum_delay += $delay;
	# the 1-minute window of imp_time ($T0 is a whole minute)
	$agg{ int($imp_ms[$i] / 60_000) . " $ad" }++;
}
close $ctsv or die "$out/clks.tsv: $!";
close $ccsv or die "$out/clks.csv: $!";

my ($agg_n, $agg_sq, $agg_key) = (0, 0, 0);
while (my ($g, $cnt) = each %agg)
{
	my (undef, $ad) = split / /, $g;
	$agg_n   += $cnt;
	$agg_sq  += $cnt * $cnt;
	$agg_key += $ad * $cnt;
}
my $no_click = grep { $_ == 0 } @k;

open my $env, '>', "$out/expected.env" or die "$out/expected.env: $!";
printf $env "J_IMPS=%d\nJ_CLICKS=%d\n", $n, scalar @order;
printf $env "J_ADS=%d\n", $nads;
printf $env "J_IMPS_WITHOUT_CLICK=%d\n", $no_click;
printf $env "J_SPAN_S=%d\n", int(($clk_ms[ $order[-1] ] - $imp_ms[0]) / 1000);
printf $env "J_PAIRS=%d\nJ_SUM_CLICK=%d\nJ_SUM_IMP=%d\nJ_SUM_DELAY_MS=%d\n", $pairs, $sum_click, $sum_imp,
  $sum_delay;
printf $env "J_AGG_GROUPS=%d\nJ_AGG_N=%d\nJ_AGG_SQ=%d\nJ_AGG_KEY=%d\n", scalar keys %agg, $agg_n, $agg_sq,
  $agg_key;
close $env;
