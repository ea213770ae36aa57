#!/usr/bin/perl
# gen_events.pl: the events of streamwin's benchmark (test/bench/run_bench.sh).
#
#   gen_events.pl --events N --partitions P --batch B --out DIR
#                 [--spacing-ms S] [--tsv-only]
#
# Writes, for the same N events:
#   DIR/events.tsv        PARTITION<TAB>JSON, one line per Kafka message, for
#                         kafka_produce --partition-prefix (event i goes to
#                         partition i % P, so each partition is in time order)
#   DIR/json/bNN          the JSON payloads again, B per file (COPY input of
#                         the "COPY + SQL" alternative: the same bytes)
#   DIR/csv/bNN.csv       the same events already decoded, as CSV
#                         (id,k,u,v,ts), B per file
#   DIR/expected.env      what a correct run must produce, as shell variables
# (with --tsv-only, only events.tsv and expected.env).
#
# Event i: {"id": i, "k": "k<0..999>", "u": "u<7 digits>", "v": <0..100.06>,
# "ts": ISO-8601 time, "src": "bench-generator-01"}, about 100 bytes.
#   - k takes 1,000 values (case 1 and 3 group by it);
#   - u = (i * 7919) mod 1,000,000 is a permutation of 0..999,999, so with
#     N = 1,000,000 every event has its own key (case 2);
#   - ts = 2024-01-01 00:00:00 + i * S ms + up to 499 ms of jitter (S is
#     --spacing-ms, 1 by default), so N events span N * S / 1000 seconds of
#     event time (about 17 one-minute windows for 1M events; case 6 uses
#     S = 10: about 167 one-minute windows, each key in every one of them);
#   - v has two decimals, so the expected sum is computed exactly in cents;
#   - every key has an event about every second: with session windows of a
#     30-second gap (case 4) each key forms one session.
#   - "src" is not a column of the source: decoders must skip it.
use strict;
use warnings;
use Getopt::Long;
use POSIX qw(strftime);

my ($n, $nparts, $batch, $out, $spacing, $tsv_only) = (1_000_000, 32, 100_000, undef, 1, 0);
GetOptions(
	'events=i'     => \$n,
	'partitions=i' => \$nparts,
	'batch=i'      => \$batch,
	'spacing-ms=i' => \$spacing,
	'tsv-only'     => \$tsv_only,
	'out=s'        => \$out)
  or die "usage: $0 --events N --partitions P --batch B --out DIR [--spacing-ms S] [--tsv-only]\n";
die "--out is required\n" unless defined $out;
die "--spacing-ms must be at least 1\n" if $spacing < 1;

unless ($tsv_only)
{
	mkdir "$out/json" or die "mkdir $out/json: $!" unless -d "$out/json";
	mkdir "$out/csv"  or die "mkdir $out/csv: $!"  unless -d "$out/csv";
}

srand(20240101);
my $T0 = 1_704_067_200;    # 2024-01-01 00:00:00 UTC
my $tsv;
open $tsv, '>', "$out/events.tsv" or die "$out/events.tsv: $!";
my ($json, $csv);
my (%c1, %c2, %c3, %times);
my $sum_cents = 0;
my $last_sec = -1;
my $sec_text;

for my $i (0 .. $n - 1)
{
	if ($i % $batch == 0 && !$tsv_only)
	{
		my $f = sprintf('b%02d', int($i / $batch));
		close $json if $json;
		close $csv  if $csv;
		open $json, '>', "$out/json/$f"     or die "$out/json/$f: $!";
		open $csv,  '>', "$out/csv/$f.csv"  or die "$out/csv/$f.csv: $!";
	}
	my $ms = $i * $spacing + int(rand(500));
	my $sec = $T0 + int($ms / 1000);
	if ($sec != $last_sec)
	{
		$sec_text = strftime('%Y-%m-%dT%H:%M:%S', gmtime($sec));
		$last_sec = $sec;
	}
	my $ts = sprintf('%s.%03dZ', $sec_text, $ms % 1000);
	my $k = 'k' . ($i * 7 % 1000);
	my $u = sprintf('u%07d', ($i * 7919) % 1_000_000);
	my $cents = $i % 10007;
	my $v = sprintf('%d.%02d', int($cents / 100), $cents % 100);
	$sum_cents += $cents;

	my $payload = qq({"id":$i,"k":"$k","u":"$u","v":$v,"ts":"$ts","src":"bench-generator-01"});
	print $tsv $i % $nparts, "\t", $payload, "\n";
	unless ($tsv_only)
	{
		print $json $payload, "\n";
		print $csv "$i,$k,$u,$v,$ts\n";
	}

	# Expected groups: tumble 1 minute per k (case 1) and per u (case 2);
	# hop 10 minutes / 1 minute per k (case 3): windows starting at
	# minute m-9 .. m hold an event of minute m.
	my $minute = int($sec / 60);
	$c1{"$minute $k"} = 1;
	$c2{"$minute $u"} = 1;
	$c3{ ($minute - $_) . " $k" } = 1 for 0 .. 9;
	# session windows (case 4): event times per key, in milliseconds
	push @{ $times{$k} }, $ms;
}
close $tsv;
close $json if $json;
close $csv  if $csv;

open my $env, '>', "$out/expected.env" or die "$out/expected.env: $!";
printf $env "EXPECT_EVENTS=%d\n", $n;
printf $env "EXPECT_GROUPS_1=%d\n", scalar keys %c1;
printf $env "EXPECT_GROUPS_2=%d\n", scalar keys %c2;
printf $env "EXPECT_GROUPS_3=%d\n", scalar keys %c3;
# Sessions with a 30 s gap per key: one per key, plus one per gap of 30 s
# or more between consecutive event times of that key.  (With this data
# each key has an event about every second, so one session per key.)
my $sessions = 0;
for my $t (values %times)
{
	my @t = sort { $a <=> $b } @$t;
	$sessions++;
	for my $j (1 .. $#t)
	{
		$sessions++ if $t[$j] - $t[ $j - 1 ] >= 30_000;
	}
}
printf $env "EXPECT_GROUPS_4=%d\n", $sessions;
printf $env "EXPECT_SUM_V=%d.%02d\n", int($sum_cents / 100), $sum_cents % 100;
printf $env "BATCH_FILES=%d\n", int(($n + $batch - 1) / $batch);
close $env;
