#!/usr/bin/perl
# gen_nexmark.pl: the Nexmark-shaped bids of streamwin's benchmark
# (test/bench/run_bench.sh, cases N1 and N2).
#
#   gen_nexmark.pl --bids N --partitions P --rate R --out DIR
#
# Writes:
#   DIR/bids.tsv      PARTITION<TAB>JSON, one line per Kafka message, for
#                     kafka_produce --partition-prefix (bid i goes to
#                     partition i % P, so each partition is in time order)
#   DIR/bids.csv      the same bids as CSV (auction, bidder, price, channel,
#                     url, date_time, extra), for the plain SQL baseline's COPY
#   DIR/expected.env  what a correct run must produce, as shell variables
#
# Bid i, shaped like a Nexmark Bid (the fields of its schema, "dateTime" as
# date_time):
#   {"auction": A, "bidder": B, "price": ..., "channel": "...", "url": "...",
#    "date_time": ISO-8601 time, "extra": ""}, about 170 bytes.
# The keys follow Nexmark's generator (Beam's and Flink's NexmarkGenerator):
# for every 46 bids it creates 3 auctions and 1 person (its event
# proportions), and
#   - auction: half of the bids go to the "hot" auction (the last one created,
#     rounded down to a multiple of hot_auction_ratio = 2), the others to one
#     of the last 100 auctions created (num_in_flight_auctions);
#   - bidder: three bids in four go to the "hot" bidder (the last person
#     created, rounded down to a multiple of hot_bidders_ratio = 4, plus 1),
#     the others to one of the last 1,000 persons (num_active_people);
# so 1M bids have about 65,000 auctions and 21,700 bidders.  Ids start at
# 1000, as in Nexmark.
#   - date_time = 2024-01-01 00:00:00 + i / R seconds (R bids per second of
#     event time, 10,000 by default: 1M bids span 100 s) + up to 499 ms of
#     jitter, so with a watermark delay of 4 s no bid is late.
#
# Expected results, for the checks of run_bench.sh (each over the groups of
# the result: number of groups, sum of n, sum of n * n and sum of key * n, so
# that a group with a wrong count cannot pass):
#   N1: hop 10 s / 2 s, count per auction: windows start every 2 s (aligned on
#       the epoch), so a bid is in the 5 windows starting at its 2-second
#       slot and the 4 before;
#   N2: session windows with a gap of 10 s, count per bidder: a new session
#       when a bidder's next bid is 10 s or more after its previous one.
use strict;
use warnings;
use Getopt::Long;
use POSIX qw(strftime);

my ($n, $nparts, $rate, $out) = (1_000_000, 48, 10_000, undef);
GetOptions(
	'bids=i'       => \$n,
	'partitions=i' => \$nparts,
	'rate=i'       => \$rate,
	'out=s'        => \$out) or die "usage: $0 --bids N --partitions P --rate R --out DIR\n";
die "--out is required\n" unless defined $out;

srand(20240717);
my $T0 = 1_704_067_200;    # 2024-01-01 00:00:00 UTC
my @channels = ('Google', 'Facebook', 'Baidu', 'Apple');
open my $tsv, '>', "$out/bids.tsv" or die "$out/bids.tsv: $!";
open my $csv, '>', "$out/bids.csv" or die "$out/bids.csv: $!";
my (%hop, %times, %auctions);
my $last_sec = -1;
my $sec_text;

for my $i (0 .. $n - 1)
{
	# Nexmark's proportions: per 50 events 1 person, 3 auctions, 46 bids
	my $last_auction = 1000 + int($i * 3 / 46);
	my $last_person  = 1000 + int($i / 46);
	my $auction = int(rand(2)) > 0
	  ? int($last_auction / 2) * 2
	  : $last_auction - int(rand(100 < $last_auction - 999 ? 100 : $last_auction - 999));
	my $bidder = int(rand(4)) > 0
	  ? int(($last_person - 1000) / 4) * 4 + 1000 + 1
	  : $last_person - int(rand(1000 < $last_person - 999 ? 1000 : $last_person - 999));
	$bidder = $last_person if $bidder > $last_person;
	my $ms = int($i * 1000 / $rate) + int(rand(500));
	my $sec = $T0 + int($ms / 1000);
	if ($sec != $last_sec)
	{
		$sec_text = strftime('%Y-%m-%dT%H:%M:%S', gmtime($sec));
		$last_sec = $sec;
	}
	my $price = 100 + int(rand(10_000_000));
	my $channel = $channels[ $i % 4 ];
	printf $tsv qq(%d\t{"auction":%d,"bidder":%d,"price":%d,"channel":"%s","url":"https://www.nexmark.com/%04x/item.htm?query=1","date_time":"%s.%03dZ","extra":""}\n),
	  $i % $nparts, $auction, $bidder, $price, $channel, $i % 65536, $sec_text, $ms % 1000;
	printf $csv qq(%d,%d,%d,%s,https://www.nexmark.com/%04x/item.htm?query=1,%s.%03dZ,""\n),
	  $auction, $bidder, $price, $channel, $i % 65536, $sec_text, $ms % 1000;

	# hop 10 s / 2 s: windows start at 2-second slots slot-4 .. slot
	my $slot = int(($T0 * 1000 + $ms) / 2000);
	$hop{ ($slot - $_) . " $auction" }++ for 0 .. 4;
	push @{ $times{$bidder} }, $ms;
	$auctions{$auction} = 1;
}
close $tsv or die "$out/bids.tsv: $!";
close $csv or die "$out/bids.csv: $!";

my ($hop_groups, $hop_n, $hop_sq, $hop_key) = (0, 0, 0, 0);
while (my ($g, $c) = each %hop)
{
	my (undef, $auction) = split / /, $g;
	$hop_groups++;
	$hop_n   += $c;
	$hop_sq  += $c * $c;
	$hop_key += $auction * $c;
}
my ($s_groups, $s_n, $s_sq, $s_key) = (0, 0, 0, 0);
for my $bidder (keys %times)
{
	my @t = sort { $a <=> $b } @{ $times{$bidder} };
	my $c = 1;
	my $flush = sub {
		$s_groups++;
		$s_n   += $c;
		$s_sq  += $c * $c;
		$s_key += $bidder * $c;
	};
	for my $j (1 .. $#t)
	{
		if ($t[$j] - $t[ $j - 1 ] >= 10_000)
		{
			$flush->();
			$c = 0;
		}
		$c++;
	}
	$flush->();
}

open my $env, '>', "$out/expected.env" or die "$out/expected.env: $!";
printf $env "NX_BIDS=%d\n", $n;
printf $env "NX_AUCTIONS=%d\n", scalar keys %auctions;
printf $env "NX_BIDDERS=%d\n", scalar keys %times;
printf $env "NX_HOP_GROUPS=%d\nNX_HOP_N=%d\nNX_HOP_SQ=%.0f\nNX_HOP_KEY=%.0f\n", $hop_groups, $hop_n, $hop_sq, $hop_key;
printf $env "NX_SESSION_GROUPS=%d\nNX_SESSION_N=%d\nNX_SESSION_SQ=%.0f\nNX_SESSION_KEY=%.0f\n",
  $s_groups, $s_n, $s_sq, $s_key;
close $env;
