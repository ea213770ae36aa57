#!/usr/bin/perl
# gen_state.pl: the events of the large-state case of streamwin's benchmark
# (test/bench/run_bench.sh, case S): a running aggregate (no window) over G
# groups, then small batches into that state.
#
#   gen_state.pl --groups G --partitions P --timed-batches T --out DIR
#
# Writes:
#   DIR/build.tsv     G events, one per group: PARTITION<TAB>JSON for
#                     kafka_produce --partition-prefix (event i goes to
#                     partition i % P)
#   DIR/timed.tsv     T * 1,000 events, produced after the build has been
#                     read: block b (events 1000 b .. 1000 b + 999) falls on
#                     100 groups, so that a batch of 1,000 events (the
#                     source's batches then hold max_records_per_batch =
#                     1,000) changes 100 groups; the blocks' groups
#                     differ and are spread over the whole key space.  With
#                     P a divisor of 1,000, a batch cut evenly across the
#                     partitions (they all have the same backlog) takes
#                     1000 / P events from each: exactly one block
#   DIR/timed_keys.tsv  PARTITION<TAB>INDEX<TAB>G of each timed event, INDEX
#                     being its position among the timed events of its
#                     partition (to count the groups of each batch)
#   DIR/dim.tsv       the other side of case S's join: 1,000 rows (partition
#                     0), one per key of D = { j * G/100 + b : j < 100,
#                     b < 10 }, so that the build's events match 1,000 of
#                     them and each of the first 10 timed blocks all its
#                     1,000 events
#   DIR/join_pairs.txt  line N + 1: the join's pairs once it has read the
#                     build, the dimension rows and the first N timed blocks
#                     (counted event by event against D)
#   DIR/expected.env  what a correct run must produce, as shell variables
#
# Event: {"g": <0..G-1>, "h": g mod 1000, "v": <1..10>}.  The build's
# groups are g = (i * 7919) mod G, a permutation of 0..G-1 when G is not a
# multiple of 7919, so every partition holds keys from all over the key
# space.  "h" is the key of the small query (1,000 groups) that the memory
# per group is measured against.
use strict;
use warnings;
use Getopt::Long;

my ($groups, $nparts, $timed, $out) = (2_000_000, 40, 601, undef);
GetOptions(
	'groups=i'        => \$groups,
	'partitions=i'    => \$nparts,
	'timed-batches=i' => \$timed,
	'out=s'           => \$out) or die "usage: $0 --groups G --partitions P --timed-batches T --out DIR\n";
die "--out is required\n" unless defined $out;
die "--groups must be a multiple of 100 and at least 100,000\n" if $groups % 100 || $groups < 100_000;
die "--groups must not be a multiple of 7919\n" if $groups % 7919 == 0;

my $build_sum = 0;
open my $b, '>', "$out/build.tsv" or die "$out/build.tsv: $!";
for my $i (0 .. $groups - 1)
{
	my $g = ($i * 7919) % $groups;
	my $v = $i % 10 + 1;
	$build_sum += $v;
	printf $b qq(%d\t{"g":%d,"h":%d,"v":%d}\n), $i % $nparts, $g, $g % 1000, $v;
}
close $b or die "$out/build.tsv: $!";

# timed block b: groups (j mod 100) * stride + (b mod stride)
my $stride = $groups / 100;
my $timed_sum = 0;
# the join's dimension rows, and the pairs the build's events make with them
my %dim;
open my $d, '>', "$out/dim.tsv" or die "$out/dim.tsv: $!";
for my $j (0 .. 99)
{
	for my $b (0 .. 9)
	{
		my $g = $j * $stride + $b;
		$dim{$g} = 1;
		printf $d qq(0\t{"g":%d,"h":%d,"v":%d}\n), $g, $g % 1000, $b + 1;
	}
}
close $d or die "$out/dim.tsv: $!";
my $pairs = 0;
for my $i (0 .. $groups - 1)
{
	$pairs++ if $dim{ ($i * 7919) % $groups };
}
my @pairs_after = ($pairs);

open my $t, '>', "$out/timed.tsv"      or die "$out/timed.tsv: $!";
open my $k, '>', "$out/timed_keys.tsv" or die "$out/timed_keys.tsv: $!";
my @index = (0) x $nparts;
for my $j (0 .. $timed * 1000 - 1)
{
	my $blk = int($j / 1000);
	my $g = ($j % 100) * $stride + $blk % $stride;
	my $v = $j % 7 + 1;
	my $p = $j % $nparts;
	$timed_sum += $v;
	printf $t qq(%d\t{"g":%d,"h":%d,"v":%d}\n), $p, $g, $g % 1000, $v;
	printf $k "%d\t%d\t%d\n", $p, $index[$p]++, $g;
	$pairs++ if $dim{$g};
	push @pairs_after, $pairs if $j % 1000 == 999;
}
open my $jp, '>', "$out/join_pairs.txt" or die "$out/join_pairs.txt: $!";
print $jp "$_\n" for @pairs_after;
close $jp or die "$out/join_pairs.txt: $!";
close $t or die "$out/timed.tsv: $!";
close $k or die "$out/timed_keys.tsv: $!";

open my $env, '>', "$out/expected.env" or die "$out/expected.env: $!";
printf $env "ST_GROUPS=%d\n", $groups;
printf $env "ST_SMALL_GROUPS=%d\n", 1000;
printf $env "ST_BUILD_SUM=%d\n", $build_sum;
printf $env "ST_TIMED_EVENTS=%d\n", $timed * 1000;
printf $env "ST_TIMED_SUM=%d\n", $timed_sum;
printf $env "ST_DIM_ROWS=%d\n", scalar keys %dim;
close $env;
