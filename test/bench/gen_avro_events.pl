#!/usr/bin/perl
# gen_avro_events.pl: the same events as JSON and as Avro, for
# test/bench/avro_bench.sh.
#
#   gen_avro_events.pl --events N --partitions P --out DIR
#
# Writes, for the same N events (those of gen_events.pl: id, k of 1,000
# keys, u, v with two decimals, ts one millisecond apart with up to 499 ms
# of jitter, and src, which no column reads):
#   DIR/json.tsv     PARTITION<TAB>JSON object, for kafka_produce --partition-prefix
#   DIR/avro.tsv     PARTITION<TAB>hex of the Confluent wire format (schema id 1)
#   DIR/bodies.bin   the Avro bodies alone, each after its length (4 bytes,
#                    big-endian), for the avro-c decoder (avro_c_decode.c)
#   DIR/schema.json  the writer schema
# Event i goes to partition i % P.  Avro's ts is timestamp-micros, the same
# instant as JSON's ISO 8601 text; v is the same double either way (the
# nearest to its decimal).
use strict;
use warnings;
use Getopt::Long;
use POSIX qw(strftime);

my ($n, $nparts, $out) = (200_000, 8, undef);
GetOptions('events=i' => \$n, 'partitions=i' => \$nparts, 'out=s' => \$out)
  or die "usage: $0 --events N --partitions P --out DIR\n";
die "--out is required\n" unless $out;

my $schema = '{"type": "record", "name": "event", "fields": ['
  . '{"name": "id", "type": "long"}, {"name": "k", "type": "string"}, '
  . '{"name": "u", "type": "string"}, {"name": "v", "type": "double"}, '
  . '{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}, '
  . '{"name": "src", "type": "string"}]}';

sub zz
{
	my ($v) = @_;
	my $u = $v >= 0 ? 2 * $v : -2 * $v - 1;
	my $s = '';
	while ($u >= 0x80) { $s .= chr(($u & 0x7f) | 0x80); $u >>= 7 }
	return $s . chr($u);
}
sub str { return zz(length $_[0]) . $_[0] }

open my $js, '>', "$out/json.tsv" or die;
open my $av, '>', "$out/avro.tsv" or die;
open my $bo, '>:raw', "$out/bodies.bin" or die;
open my $sc, '>', "$out/schema.json" or die;
print $sc $schema;
close $sc;

srand(36);
my $base = 1704067200;    # 2024-01-01 00:00:00 UTC
for my $i (0 .. $n - 1)
{
	my $k = 'k' . ($i % 1000);
	my $u = sprintf('u%07d', ($i * 7919) % 1_000_000);
	my $cents = int(rand(10007));
	my $v = $cents / 100;
	my $ms = $i + int(rand(500));
	my $secs = $base + int($ms / 1000);
	my $ts = strftime('%Y-%m-%dT%H:%M:%S', gmtime $secs) . sprintf('.%03dZ', $ms % 1000);
	my $src = 'bench-generator-01';
	printf $js "%d\t{\"id\": %d, \"k\": \"%s\", \"u\": \"%s\", \"v\": %s, \"ts\": \"%s\", \"src\": \"%s\"}\n",
	  $i % $nparts, $i, $k, $u, sprintf('%.2f', $v), $ts, $src;
	my $body = zz($i) . str($k) . str($u) . pack('d<', $v) . zz(($base * 1000 + $ms) * 1000) . str($src);
	print $av ($i % $nparts), "\t", unpack('H*', "\x00" . pack('N', 1) . $body), "\n";
	print $bo pack('N', length $body), $body;
}
close $js;
close $av;
close $bo;
