
# 006_bad_input.pl: a corpus of bad input (issue 5).  Every message that
# cannot be decoded or converted lands in streamwin.dead_letters, exactly
# once, with its partition, offset, the payload byte for byte and an error
# text, while the stream goes on: every good message around the bad ones is
# counted exactly once.
#
# Two sources with the same columns, one JSON (5 partitions) and one CSV
# (2 partitions); the column list has a numeric(6,2), a domain with a CHECK
# and the event time:
#   id bigint, k text, v int, amt numeric(6,2), score posint, [tag text,] ts timestamptz
# Each source is read by two windowed queries: a stopped one driven with
# run_available that keeps one result row per message (GROUP BY window, id,
# k), and a started one run by a background worker (trigger 100 ms) that
# counts per window and key.  The JSON partitions 3 and 4 hold one huge
# (3 MB) message each, a good one and a bad one, since the test broker
# keeps only about 5 MB per partition.
#
# Expected results come from the good messages only: loaded into ordinary
# tables (plain SQL computes the windows) and counted per key in Perl.
#
# Then: a batch of 20,000 messages of which 2,000 are bad in ways only the
# column types' input functions notice (the engine bisects those out with
# subtransactions) must finish in reasonable time; the time is printed.
# Last, event times at the edges of the timestamptz range, which decode
# fine but stress the window arithmetic.
use strict;
use warnings;

use Digest::MD5 qw(md5_hex);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use StreamwinTest;

srand(6006);

my $T0 = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms

my $broker = StreamwinTest::Broker->start(
	topics => { bi_json => 5, bi_csv => 2, bi_many => 2, bi_edge => 2, bi_jedge => 2 });
my $node = new_node('badinput');
my $brokers = $broker->bootstrap;

# A payload as the bytes that go to Kafka: byte strings stay as they are
# (so that bad ones can hold any bytes), character strings become UTF-8.
sub bytes_of
{
	my ($s) = @_;
	utf8::encode($s) if utf8::is_utf8($s);
	return $s;
}

# Text (characters) as UTF-8 bytes, whatever Perl's internal form.
sub utf8_bytes
{
	my ($s) = @_;
	utf8::encode($s);
	return $s;
}

my $ts = sub { ts_text($T0 + int(rand(3 * 3600_000))) };    # three hours

# ---- the JSON corpus -----------------------------------------------------

my $next_id = 0;

# A good event: [id, k, v, amt, score, tag, ts] (text values, undef = NULL)
sub good_event
{
	my $id = ++$next_id;
	return [
		$id, 'k' . int(rand(5)), int(rand(2000)) - 500,
		sprintf('%.2f', rand(2000) - 1000), 1 + int(rand(100)),
		"tag $id", $ts->() ];
}

sub json_of
{
	my ($e) = @_;
	return sprintf(
		'{"id": %d, "k": "%s", "v": %d, "amt": %s, "score": %d, "tag": "%s", "ts": "%s"}',
		@$e);
}

# Good messages that are awkward on purpose: [payload, expected row].
sub special_json_goods
{
	my @g;
	my $e;

	# duplicate keys are no error: the last one wins (as in jsonb)
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k1", "v": 1, "amt": 2.00, "score": 3, "tag": "first",'
			  . ' "ts": "%s", "v": 9, "k": "k2", "tag": "last"}', $e->[0], $e->[6]),
		[ $e->[0], 'k2', 9, '2.00', 3, 'last', $e->[6] ] ];
	# ... also for the event time, even when the earlier value is bad
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k3", "ts": null, "v": 5, "ts": "not a time", "ts": "%s"}',
			$e->[0], $e->[6]),
		[ $e->[0], 'k3', 5, undef, undef, undef, $e->[6] ] ];
	# missing keys are NULL, unknown keys (of any shape) are ignored
	$e = good_event();
	push @g, [
		sprintf('{"zzz": [1, {"a": null, "b": [true, false]}], "id": %d, "k": "k4", "ts": "%s",'
			  . ' "unknown": "\u0000 and \ud800 are fine where nobody reads them"}',
			$e->[0], $e->[6]),
		[ $e->[0], 'k4', undef, undef, undef, undef, $e->[6] ] ];
	# nesting 500 deep in a key nobody reads
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "deep": %s%s, "k": "k0", "v": 7, "ts": "%s"}',
			$e->[0], '[' x 500, ']' x 500, $e->[6]),
		[ $e->[0], 'k0', 7, undef, undef, undef, $e->[6] ] ];
	# escapes, in values and in a key
	$e = good_event();
	push @g, [
		sprintf('{"\u0069d": %d, "k": "k\u0031", "tag": "caf\u00e9 \ud83d\ude00 \"q\" \\\\ \/ \t|",'
			  . ' "ts": "%s"}', $e->[0], $e->[6]),
		[ $e->[0], 'k1', undef, undef, undef, "caf\x{e9} \x{1F600} \"q\" \\ / \t|", $e->[6] ] ];
	# raw UTF-8 text, including a 4-byte character
	$e = good_event();
	push @g, [
		utf8_bytes(sprintf(qq({"id": %d, "k": "\x{43a}\x{43b}\x{44e}\x{447}", "tag": "\x{1F600}\x{e9}", "ts": "%s"}),
			$e->[0], $e->[6])),
		[ $e->[0], "\x{43a}\x{43b}\x{44e}\x{447}", undef, undef, undef, "\x{1F600}\x{e9}", $e->[6] ] ];
	# an escape after a long plain run, at each of sixteen places, and raw
	# UTF-8 over many bytes: what a scan that reads a string a word at a
	# time would have to get right at every alignment
	for my $at (0 .. 15)
	{
		my $plain = 'abcdefghijklmnopqrstuvwx';
		$e = good_event();
		push @g, [
			sprintf('{"id": %d, "k": "k5", "tag": "%s\\"%s", "ts": "%s"}',
				$e->[0], substr($plain, 0, 8 + $at), substr($plain, 8 + $at), $e->[6]),
			[ $e->[0], 'k5', undef, undef, undef,
				substr($plain, 0, 8 + $at) . '"' . substr($plain, 8 + $at), $e->[6] ] ];
	}
	$e = good_event();
	push @g, [
		utf8_bytes(sprintf(qq({"id": %d, "k": "k6", "tag": "%s", "ts": "%s"}),
			$e->[0], "\x{e9}\x{1F600}" x 5, $e->[6])),
		[ $e->[0], 'k6', undef, undef, undef, "\x{e9}\x{1F600}" x 5, $e->[6] ] ];
	# JSON whitespace around the object and between tokens
	$e = good_event();
	push @g, [
		sprintf(" \t\r{ \"id\" :\t%d ,\r\"k\":\"k2\" , \"v\" : -0 , \"ts\" : \"%s\" }\r\t ",
			$e->[0], $e->[6]),
		[ $e->[0], 'k2', 0, undef, undef, undef, $e->[6] ] ];
	# boundaries of the column types, exponents, rounding to the typmod
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k3", "v": -2147483648, "amt": 9999.99, "score": 2147483647, "ts": "%s"}',
			$e->[0], $e->[6]),
		[ $e->[0], 'k3', -2147483648, '9999.99', 2147483647, undef, $e->[6] ] ];
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k3", "v": 2147483647, "amt": -9999.99, "score": 1, "ts": "%s"}',
			$e->[0], $e->[6]),
		[ $e->[0], 'k3', 2147483647, '-9999.99', 1, undef, $e->[6] ] ];
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k4", "v": 1, "amt": 1.5e2, "score": 1, "ts": "%s"}',
			$e->[0], $e->[6]),
		[ $e->[0], 'k4', 1, '150.00', 1, undef, $e->[6] ] ];
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k4", "v": 1, "amt": 1.005, "ts": "%s"}', $e->[0], $e->[6]),
		[ $e->[0], 'k4', 1, '1.01', undef, undef, $e->[6] ] ];
	push @g, [
		sprintf('{"id": 9223372036854775807, "k": "k0", "v": 3, "ts": "%s"}', $e->[6]),
		[ '9223372036854775807', 'k0', 3, undef, undef, undef, $e->[6] ] ];
	# other spellings of a timestamp
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k0", "ts": "2024-01-01T00:30:00Z"}', $e->[0]),
		[ $e->[0], 'k0', undef, undef, undef, undef, '2024-01-01 00:30:00+00' ] ];
	$e = good_event();
	push @g, [
		sprintf('{"id": %d, "k": "k0", "ts": "2024-01-01 02:30:00.5+02:00"}', $e->[0]),
		[ $e->[0], 'k0', undef, undef, undef, undef, '2024-01-01 00:30:00.5+00' ] ];
	return @g;
}

# Bad messages: [kind, payload, regexp the error must match].
sub bad_json
{
	my $ok = sub { json_of(good_event()) };    # a well-formed object
	my $t = $ts->();
	my $deep = '[' x 100_000;
	return (
		[ 'truncated', qq({"id": 1, "k": "a", "v": 3, "ts": "$t"), qr/JSON/ ],
		[ 'not JSON at all', 'hello, world', qr/JSON object/ ],
		[ 'trailing comma', qq({"id": 2, "k": "a", "ts": "$t",}), qr/trailing comma/ ],
		[ 'single quotes', qq({'id': 3, 'ts': '$t'}), qr/JSON/ ],
		[ 'unquoted key', qq({id: 3, "ts": "$t"}), qr/JSON/ ],
		[ 'comment', qq({"id": 3 /* c */, "ts": "$t"}), qr/JSON/ ],
		[ 'garbage after the object', $ok->() . ' x', qr/end of the message/ ],
		[ 'two objects', $ok->() . $ok->(), qr/end of the message/ ],
		[ 'top-level array', '[' . $ok->() . ']', qr/array/ ],
		[ 'top-level string', '"{\"id\": 4}"', qr/string/ ],
		[ 'top-level number', '42', qr/number/ ],
		[ 'top-level null', 'null', qr/null/ ],
		[ 'empty message', '', qr/empty/ ],
		[ 'only whitespace', "  \t ", qr/whitespace/ ],
		[ 'wrong type: string for bigint', qq({"id": "abc", "k": "a", "ts": "$t"}), qr/bigint/ ],
		[ 'wrong type: boolean for int', qq({"id": 5, "v": true, "ts": "$t"}), qr/integer/ ],
		[ 'wrong type: fraction for int', qq({"id": 5, "v": 1.5, "ts": "$t"}), qr/integer/ ],
		[ 'wrong type: object for int', qq({"id": 5, "v": {"x": 1}, "ts": "$t"}), qr/object/ ],
		[ 'wrong type: array for timestamptz', qq({"id": 5, "ts": ["$t"]}), qr/array/ ],
		[ 'int overflow', qq({"id": 6, "v": 2147483648, "ts": "$t"}), qr/out of range/ ],
		[ 'bigint overflow', qq({"id": 9223372036854775808, "ts": "$t"}), qr/out of range/ ],
		[ 'numeric(6,2) overflow', qq({"id": 7, "amt": 12345.67, "ts": "$t"}), qr/overflow/ ],
		[ 'domain CHECK violated', qq({"id": 8, "score": -1, "ts": "$t"}), qr/posint|check/ ],
		[ 'domain CHECK violated (0)', qq({"id": 8, "score": 0, "ts": "$t"}), qr/posint|check/ ],
		[ 'NULL event time', '{"id": 9, "k": "a", "ts": null}', qr/event time/ ],
		[ 'no event time', '{"id": 9, "k": "a", "v": 1}', qr/event time/ ],
		[ 'event time not a timestamp', '{"id": 10, "ts": "not a time"}', qr/timestamp/ ],
		[ 'event time not a date', '{"id": 10, "ts": "2024-02-30 10:00:00+00"}', qr/out of range/ ],
		[ 'event time a number', '{"id": 10, "ts": 1704067200.5}', qr/timestamp|out of range/ ],
		[ 'infinite event time', '{"id": 11, "ts": "infinity"}', qr/finite/ ],
		[ '-infinite event time', '{"id": 11, "ts": "-infinity"}', qr/finite/ ],
		[ 'event time past the range', '{"id": 11, "ts": "294277-01-01 00:00:00+00"}', qr/out of range/ ],
		[ 'invalid UTF-8 (0xff)', qq({"id": 12, "k": "\xff", "ts": "$t"}), qr/invalid byte sequence/ ],
		[ 'invalid UTF-8 (overlong)', qq({"id": 12, "k": "\xc0\xaf", "ts": "$t"}), qr/invalid byte sequence/ ],
		[ 'invalid UTF-8 (surrogate)', qq({"id": 12, "k": "\xed\xa0\x80", "ts": "$t"}), qr/invalid byte sequence/ ],
		[ 'invalid UTF-8 (cut at the end)', qq({"id": 12, "ts": "$t"} \xe2\x82), qr/invalid byte sequence/ ],
		[ 'NUL byte', qq({"id": 13, "k": "a\0b", "ts": "$t"}), qr/NUL/ ],
		[ 'NUL byte after the object', $ok->() . "\0", qr/NUL/ ],
		[ '\u0000 in a text value', qq({"id": 14, "tag": "a\\u0000b", "ts": "$t"}), qr/\\u0000/ ],
		[ 'unpaired surrogate', qq({"id": 14, "tag": "\\ud800x", "ts": "$t"}), qr/surrogate/ ],
		[ 'invalid escape', qq({"id": 15, "k": "\\x41", "ts": "$t"}), qr/escape/ ],
		[ 'control character in a string', qq({"id": 15, "k": "a\tb", "ts": "$t"}), qr/control character/ ],
		(map { [ "control character at byte $_ of a string",
				qq({"id": 15, "k": ") . ('x' x $_) . qq(\x01y", "ts": "$t"}), qr/control character/ ] } 8 .. 16),
		[ 'unterminated long string', qq({"id": 15, "k": "k0", "ts": "$t", "tag": "abcdefghijklmnopq), qr/unterminated/ ],
		[ 'leading zero', qq({"id": 15, "v": 01, "ts": "$t"}), qr/number/ ],
		[ 'NaN', qq({"id": 15, "v": NaN, "ts": "$t"}), qr/JSON/ ],
		[ 'True', qq({"id": 15, "k": True, "ts": "$t"}), qr/JSON/ ],
		[ 'nested 100000 deep', qq({"id": 16, "x": $deep), qr/nesting depth/ ],
	);
}

# Partitions 0-2: good events with the bad and special messages spread over
# them; partition 0 starts and partition 2 ends with a bad one.  Partition 3:
# a huge good message between two small ones; partition 4: a huge bad one.
my (@json_msgs, @json_good, @json_dead, %off);
{
	my @items = map { [ 'good', [ json_of($_), $_ ] ] } map { good_event() } 1 .. 900;
	for my $s (special_json_goods())
	{
		splice @items, int(rand(@items)), 0, [ 'good', $s ];
	}
	my @bad = bad_json();
	my $first = shift @bad;
	my $last  = pop @bad;
	for my $b (@bad)
	{
		splice @items, int(rand(@items)), 0, [ 'bad', $b ];
	}
	my @place = map { [ int(rand(3)), $_ ] } @items;
	unshift @place, [ 0, [ 'bad', $first ] ];
	push @place, [ 2, [ 'bad', $last ] ];

	my $big = 3 * 1024 * 1024;
	my $g1 = good_event();
	my $huge = good_event();
	$huge->[5] = join('', map { chr(97 + $_ % 26) } 1 .. 1000) x ($big / 1000);
	my $g2 = good_event();
	push @place, map { [ 3, [ 'good', [ json_of($_), $_ ] ] ] } $g1, $huge, $g2;
	my $g3 = good_event();
	my $g4 = good_event();
	push @place, [ 4, [ 'good', [ json_of($g3), $g3 ] ] ],
	  [ 4, [ 'bad', [ 'huge and truncated', substr(json_of($huge), 0, -2), qr/JSON/ ] ] ],
	  [ 4, [ 'good', [ json_of($g4), $g4 ] ] ];

	for my $pl (@place)
	{
		my ($p, $item) = @$pl;
		my $o = $off{json}{$p}++ // 0;
		if ($item->[0] eq 'good')
		{
			push @json_msgs, [ $p, $item->[1][0] ];
			push @json_good, $item->[1][1];
		}
		else
		{
			my ($kind, $payload, $re) = @{ $item->[1] };
			push @json_msgs, [ $p, $payload ];
			push @json_dead, [ 'bi_json', $p, $o, bytes_of($payload), $kind, $re ];
		}
	}
}

# ---- the CSV corpus ------------------------------------------------------

sub csv_of
{
	my ($e) = @_;
	return join(',', @$e[ 0 .. 4 ], $e->[6]);
}

my (@csv_msgs, @csv_good, @csv_dead);
{
	my $t = $ts->();
	my @goods = map { my $e = good_event(); $e->[5] = undef; [ csv_of($e), $e ] } 1 .. 400;
	my $e;
	$e = good_event();
	push @goods, [ qq($e->[0],"a,""b""",1,2.50,3,"$e->[6]"),
		[ $e->[0], 'a,"b"', 1, '2.50', 3, undef, $e->[6] ] ];
	$e = good_event();
	push @goods, [ qq($e->[0],"",,,,$e->[6]),    # "" is empty text, nothing is NULL
		[ $e->[0], '', undef, undef, undef, undef, $e->[6] ] ];
	$e = good_event();
	push @goods, [ qq($e->[0],"line\rbreak",5,,,$e->[6]),
		[ $e->[0], "line\rbreak", 5, undef, undef, undef, $e->[6] ] ];
	$e = good_event();
	push @goods, [ utf8_bytes(qq($e->[0],\x{e9}t\x{e9},5,,,$e->[6])),
		[ $e->[0], "\x{e9}t\x{e9}", 5, undef, undef, undef, $e->[6] ] ];

	my @bad = (
		[ 'too few fields', '1,a,5', qr/expected 6 fields, found 3/ ],
		[ 'too many fields', "2,a,5,1.00,1,$t,extra", qr/expected 6 fields, found 7/ ],
		[ 'unterminated quote', qq(3,"a,5,1.00,1,$t), qr/unterminated/ ],
		[ 'quote inside a field', qq(3,a"b,5,1.00,1,$t), qr/quote/ ],
		[ 'text after the closing quote', qq(3,"a"b,5,1.00,1,$t), qr/closing quote/ ],
		[ 'two records', "3,a,5,1.00,1,$t\r4,b,5,1.00,1,$t", qr/line break/ ],
		[ 'empty message', '', qr/empty/ ],
		[ 'wrong type', "x,a,5,1.00,1,$t", qr/bigint/ ],
		[ 'int overflow', "4,a,99999999999,1.00,1,$t", qr/out of range/ ],
		[ 'numeric(6,2) overflow', "4,a,5,100000,1,$t", qr/overflow/ ],
		[ 'domain CHECK violated', "4,a,5,1.00,-5,$t", qr/posint|check/ ],
		[ 'NULL event time', '5,a,5,1.00,1,', qr/event time/ ],
		[ 'event time not a timestamp', '5,a,5,1.00,1,soon', qr/timestamp/ ],
		[ 'infinite event time', '5,a,5,1.00,1,infinity', qr/finite/ ],
		[ 'invalid UTF-8', "6,\xff\xfe,5,1.00,1,$t", qr/invalid byte sequence/ ],
		[ 'NUL byte', "6,a\0,5,1.00,1,$t", qr/NUL/ ],
	);
	my @items = ((map { [ 'good', $_ ] } @goods), (map { [ 'bad', $_ ] } @bad));
	# shuffle (a bad message may be first or last in its partition)
	for (my $i = @items - 1; $i > 0; $i--)
	{
		my $j = int(rand($i + 1));
		@items[ $i, $j ] = @items[ $j, $i ];
	}
	for my $item (@items)
	{
		my $p = int(rand(2));
		my $o = $off{csv}{$p}++ // 0;
		if ($item->[0] eq 'good')
		{
			push @csv_msgs, [ $p, $item->[1][0] ];
			push @csv_good, $item->[1][1];
		}
		else
		{
			my ($kind, $payload, $re) = @{ $item->[1] };
			push @csv_msgs, [ $p, $payload ];
			push @csv_dead, [ 'bi_csv', $p, $o, bytes_of($payload), $kind, $re ];
		}
	}
}

my %kinds;
$kinds{ $_->[4] }++ for @json_dead, @csv_dead;
note(sprintf('corpus: %d bad JSON and %d bad CSV messages of %d kinds; %d + %d good',
	scalar(@json_dead), scalar(@csv_dead), scalar(keys %kinds),
	scalar(@json_good), scalar(@csv_good)));
cmp_ok(scalar(keys %kinds), '>=', 20, 'the corpus has at least 20 kinds of bad input');

# ---- sources, queries, expected results ----------------------------------

my $cols = 'id bigint, k text, v int, amt numeric(6,2), score posint, tag text, ts timestamptz';
my $csvcols = 'id bigint, k text, v int, amt numeric(6,2), score posint, ts timestamptz';

psql_ok($node, qq{
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
SELECT streamwin.create_kafka_source('bi_json', '$brokers', 'bi_json', '$cols', 'json');
SELECT streamwin.create_kafka_source('bi_csv', '$brokers', 'bi_csv', '$csvcols', 'csv');
SELECT streamwin.create_query('bi_rows',
    \$q\$SELECT id, k, count(*) AS n, sum(v) AS v, sum(amt) AS amt, sum(score) AS score,
              max(tag) AS tag
         FROM bi_json GROUP BY streamwin.tumble(ts, '1 hour'), id, k\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('bc_rows',
    \$q\$SELECT id, k, count(*) AS n, sum(v) AS v, sum(amt) AS amt, sum(score) AS score
         FROM bi_csv GROUP BY streamwin.tumble(ts, '1 hour'), id, k\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('bi_keys',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM bi_json
         GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('bc_keys',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM bi_csv
         GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms');
}, 'domain, sources and queries created (two started)');

my $rowcols = 'id bigint, k text, v int, amt numeric(6,2), score int, tag text, ts timestamptz';
load_table($node, 'good_json', $rowcols, \@json_good);
load_table($node, 'good_csv', $rowcols, \@csv_good);
load_table($node, 'want_dead',
	'source text, part int, off bigint, len int, md5 text, kind text',
	[ map { [ $_->[0], $_->[1], $_->[2], length($_->[3]), md5_hex($_->[3]), $_->[4] ] }
		  @json_dead, @csv_dead ]);

# The workers read while the data arrives.
$broker->produce_props('bi_json', \@json_msgs, { 'message.max.bytes' => 10_000_000 });
$broker->produce('bi_csv', \@csv_msgs);

for my $src ([ 'bi_json', 'bi_rows', \@json_good, \@json_dead ],
	[ 'bi_csv', 'bc_rows', \@csv_good, \@csv_dead ])
{
	my ($source, $q, $good, $dead) = @$src;
	my $t = time;
	my $r = run_json($node, "run_available('$q')");
	next unless $r;
	note(sprintf('%s: run_available took %.1f s in %d batches', $q, time - $t, $r->{batches}));
	is($r->{input_rows}, @$good + @$dead, "$q: run_available read every message");
	is($r->{dead_letters}, scalar(@$dead), "$q: run_available counts every bad message");
	is($r->{late_rows_dropped}, 0, "$q: no late rows");
}

# Per message: window, key and values, exactly once.
my $rows_want = q{SELECT date_trunc('hour', ts) AS window_start, id, k, 1::bigint AS n,
       v::bigint, amt::numeric, score::bigint, length(tag), md5(tag) FROM %s};
results_match($node,
	'SELECT window_start, id, k, n::bigint, v::bigint, amt::numeric, score::bigint,'
	  . ' length(tag), md5(tag) FROM bi_rows',
	sprintf($rows_want, 'good_json'),
	'json: every good message is in the results once, with its values');
results_match($node,
	'SELECT window_start, id, k, n::bigint, v::bigint, amt::numeric, score::bigint,'
	  . ' NULL::int, NULL::text FROM bc_rows',
	sprintf($rows_want, 'good_csv'),
	'csv: every good message is in the results once, with its values');

# The dead letters: one row per bad message, payload byte for byte.
my $dead_got = q{SELECT source::text, "partition"::int, "offset"::bigint,
       length(payload), md5(payload) FROM streamwin.dead_letters};
my $dead_want = 'SELECT source, part, off, len, md5 FROM want_dead';
results_match($node, $dead_got, $dead_want,
	'every bad message is in dead_letters exactly once, at its partition and offset, payload intact');

# The workers see the same: counts per window and key, and per key as
# counted in Perl.
my %perkey;
for my $src ([ 'json', \@json_good ], [ 'csv', \@csv_good ])
{
	for my $e (@{ $src->[1] })
	{
		$perkey{ $src->[0] }{ $e->[1] }[0]++;
		$perkey{ $src->[0] }{ $e->[1] }[1] += $e->[2] // 0;
	}
}
for my $src ([ 'json', 'bi_keys', 'good_json' ], [ 'csv', 'bc_keys', 'good_csv' ])
{
	my ($f, $q, $table) = @$src;
	wait_results_match($node,
		"SELECT window_start, window_end, k, n::bigint, s::bigint FROM $q",
		windows_sql(table => $table, size => 3600, keys => 'k',
			aggs => 'count(*)::bigint AS n, sum(v)::bigint AS s'),
		"$f worker: every good message counted once per window and key");
	results_match($node,
		"SELECT k, sum(n)::bigint, coalesce(sum(s), 0)::bigint FROM $q GROUP BY k",
		values_sql([ [ 'k', 'text' ], [ 'n', 'bigint' ], [ 's', 'bigint' ] ],
			[ map { [ $_, @{ $perkey{$f}{$_} } ] } sort keys %{ $perkey{$f} } ]),
		"$f worker: per key, the counts and sums computed in Perl");
	is( $node->safe_psql('postgres',
			"SELECT state, last_error IS NULL FROM streamwin.queries WHERE name = '$q'"),
		'running|t', "$f worker: still running, no error recorded");
}
is( $node->safe_psql('postgres',
		q{SELECT coalesce(sum(dead_letters), 0) FROM streamwin.progress WHERE query = 'bi_keys'}),
	scalar(@json_dead), 'json worker: its progress rows count every bad message');

# Nothing recorded twice although two queries met each bad message.
results_match($node, $dead_got, $dead_want, 'after the workers: still exactly once each');

# Every dead letter says what is wrong.
my %errors;
for my $line (split /\n/, $node->safe_psql('postgres',
	q{SELECT source, "partition", "offset", at IS NOT NULL, replace(error, E'\n', ' ')
	    FROM streamwin.dead_letters}))
{
	my ($s, $p, $o, $at, $err) = split /\|/, $line, 5;
	$errors{"$s/$p/$o"} = [ $at, $err ];
}
for my $d (@json_dead, @csv_dead)
{
	my ($s, $p, $o, undef, $kind, $re) = @$d;
	my $got = $errors{"$s/$p/$o"};
	next unless $got;    # missing ones failed above
	like($got->[1], $re, "$s, $kind: the error says why ($got->[1])");
}
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM streamwin.dead_letters WHERE coalesce(error, '') = '' OR at IS NULL}),
	'0', 'every dead letter has an error text and a time');

# ---- many bad messages in one batch ---------------------------------------

# 20,000 messages, every tenth bad in a way only an input function (or the
# domain's CHECK) notices, so the batch cannot decode in one subtransaction
# and has to bisect.
{
	my (@msgs, %cnt, @dead);
	my @kinds = (
		sub { sprintf('{"id": %d, "k": "k1", "v": 99999999999, "ts": "%s"}', @_) },
		sub { sprintf('{"id": "x%d", "k": "k1", "v": 1, "ts": "%s"}', @_) },
		sub { sprintf('{"id": %d, "k": "k1", "v": 1, "ts": "x%s"}', @_) },
		sub { sprintf('{"id": %d, "k": "k1", "v": 1, "score": -1, "ts": "%s"}', @_) },
	);
	my %o;
	for my $i (1 .. 20_000)
	{
		my $p = $i % 2;
		my $t = $ts->();
		my $o = $o{$p}++ // 0;
		if ($i % 10 == 5)
		{
			my $payload = $kinds[ ($i / 10) % 4 ]->($i, $t);
			push @msgs, [ $p, $payload ];
			push @dead, [ $p, $o ];
			next;
		}
		my $k = 'k' . int(rand(5));
		my $v = int(rand(100));
		push @msgs, [ $p, sprintf('{"id": %d, "k": "%s", "v": %d, "score": 1, "ts": "%s"}',
			$i, $k, $v, $t) ];
		$cnt{$k}[0]++;
		$cnt{$k}[1] += $v;
	}
	$broker->produce('bi_many', \@msgs);
	psql_ok($node, qq{
SELECT streamwin.create_kafka_source('bi_many', '$brokers', 'bi_many',
    'id bigint, k text, v int, score posint, ts timestamptz', 'json');
SELECT streamwin.create_query('many_keys',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM bi_many
         GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', start => false);
}, 'source and query for the batch with many bad messages');
	my $t = time;
	my $r = run_json($node, "run_available('many_keys')");
	my $secs = time - $t;
	diag(sprintf('20,000 messages with 2,000 bad: run_available took %.2f s (%d batches)',
		$secs, $r ? $r->{batches} : -1));
	is($r && $r->{dead_letters}, 2000, 'many bad: all 2,000 reported as dead letters');
	cmp_ok($secs, '<', 30, 'many bad: the batch finishes in reasonable time (< 30 s)');
	results_match($node,
		'SELECT k, sum(n)::bigint, sum(s)::bigint FROM many_keys GROUP BY k',
		values_sql([ [ 'k', 'text' ], [ 'n', 'bigint' ], [ 's', 'bigint' ] ],
			[ map { [ $_, @{ $cnt{$_} } ] } sort keys %cnt ]),
		'many bad: the 18,000 good ones counted once each');
	results_match($node,
		q{SELECT "partition", "offset" FROM streamwin.dead_letters WHERE source = 'bi_many'},
		values_sql([ [ 'p', 'int' ], [ 'o', 'bigint' ] ], \@dead),
		'many bad: each bad message in dead_letters once, at its offset');
}

# ---- event times at the edges of the timestamptz range --------------------

# These decode (they are valid timestamptz values), but window arithmetic
# near the end of the range overflows.  Windows are epoch-aligned, so the
# 1-hour window of 294270-01-01 00:30 is [00:00, 01:00) of that day; the
# window of 294276-12-31 23:30 would end after the largest timestamptz, so
# that message cannot be windowed and belongs in the dead letters.  Neither
# may stop the stream: the good messages after them are counted.
{
	$broker->produce('bi_edge', [
		[ 0, '{"k": "a", "ts": "2024-01-01 00:10:00+00"}' ],
		[ 0, '{"k": "far", "ts": "294270-01-01 00:30:00+00"}' ],
		[ 0, '{"k": "a", "ts": "2024-01-01 00:20:00+00"}' ],
		[ 0, '{"k": "first", "ts": "4714-11-24 00:00:00+00 BC"}' ],
		[ 0, '{"k": "a", "ts": "2024-01-01 00:30:00+00"}' ],
		[ 1, '{"k": "a", "ts": "2024-01-01 00:10:00+00"}' ],
		[ 1, '{"k": "end", "ts": "294276-12-31 23:30:00+00"}' ],
		[ 1, '{"k": "a", "ts": "2024-01-01 00:20:00+00"}' ] ]);
	psql_ok($node, qq{
SELECT streamwin.create_kafka_source('bi_edge0', '$brokers', 'bi_edge',
    'k text, ts timestamptz', 'json', '{"partitions": [0]}');
SELECT streamwin.create_kafka_source('bi_edge1', '$brokers', 'bi_edge',
    'k text, ts timestamptz', 'json', '{"partitions": [1]}');
SELECT streamwin.create_query('edge0_keys',
    \$q\$SELECT k, count(*) AS n FROM bi_edge0
         GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('edge1_keys',
    \$q\$SELECT k, count(*) AS n FROM bi_edge1
         GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', start => false);
}, 'sources and queries for event times at the edges of the range');

	# partition 0: far in the future, and the first timestamptz
	psql_ok($node, "SELECT streamwin.run_available('edge0_keys')",
		'edge: run_available over far-future and earliest event times succeeds');
	results_match($node,
		'SELECT window_start, window_end, k, n::bigint FROM edge0_keys',
		q{SELECT * FROM (VALUES
  ('2024-01-01 00:00:00+00'::timestamptz, '2024-01-01 01:00:00+00'::timestamptz, 'a', 3::bigint),
  ('294270-01-01 00:00:00+00', '294270-01-01 01:00:00+00', 'far', 1),
  ('4714-11-24 00:00:00+00 BC', '4714-11-24 01:00:00+00 BC', 'first', 1)) v},
		'edge: far-future and earliest event times land in their epoch-aligned windows');

	# partition 1: the last hour of the range
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT streamwin.run_available('edge1_keys')");
	is($rc, 0, 'edge: run_available over an event time in the last hour of the range succeeds')
	  or diag("run_available failed: $err");
	results_match($node,
		'SELECT window_start, window_end, k, n::bigint FROM edge1_keys',
		q{SELECT '2024-01-01 00:00:00+00'::timestamptz, '2024-01-01 01:00:00+00'::timestamptz,
       'a'::text, 2::bigint},
		'edge: the good messages around it are counted');
	like($node->safe_psql('postgres', q{
SELECT string_agg("offset" || ': ' || error, ', ') FROM streamwin.dead_letters
 WHERE source = 'bi_edge1'}),
		qr/^1: [^,]+$/, 'edge: the event time whose window cannot be represented is a dead letter');

	# a worker must not get stuck on it either
	psql_ok($node, q{
SELECT streamwin.create_query('edge1_worker',
    $q$SELECT k, count(*) AS n FROM bi_edge1 GROUP BY streamwin.tumble(ts, '1 hour'), k$q$,
    output_mode => 'update', trigger_interval => '100 ms')},
		'a worker query over the same partition');
	wait_until($node, q{
SELECT sum(n) FILTER (WHERE k = 'a'), bool_and(state = 'running' AND last_error IS NULL)
  FROM streamwin.queries q LEFT JOIN edge1_worker ON true WHERE q.name = 'edge1_worker'},
		'2|t', 'edge: the worker counts the good messages and keeps no error');
}

# A join shifts a side's event time by its range (l.ts + interval '10
# minutes'), which overflows in the last minutes of the range: that
# impression is a dead letter, and every other row joins as in plain SQL.
# Before, every batch of the query failed on it ("timestamp out of range").
{
	$broker->produce('bi_jedge', [
		[ 0, '{"k": "a", "ts": "2024-01-01 00:10:00+00"}' ],
		[ 0, '{"k": "late", "ts": "294276-12-31 23:55:00+00"}' ],
		[ 0, '{"k": "a", "ts": "2024-01-01 00:20:00+00"}' ],
		[ 1, '{"k": "a", "ts": "2024-01-01 00:15:00+00"}' ],
		[ 1, '{"k": "a", "ts": "2024-01-01 00:25:00+00"}' ] ]);
	psql_ok($node, qq{
SELECT streamwin.create_kafka_source('bi_jedge0', '$brokers', 'bi_jedge',
    'k text, ts timestamptz', 'json', '{"partitions": [0]}');
SELECT streamwin.create_kafka_source('bi_jedge1', '$brokers', 'bi_jedge',
    'k text, ts timestamptz', 'json', '{"partitions": [1]}');
SELECT streamwin.create_query('jedge',
    \$q\$SELECT l.k, l.ts AS lts, r.ts AS rts FROM bi_jedge0 l
         LEFT JOIN bi_jedge1 r ON r.k = l.k AND r.ts BETWEEN l.ts AND l.ts + interval '10 minutes'\$q\$,
    watermark => '1 hour', start => false);
}, 'a left join of sources with an event time in the last minutes of the range');
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT streamwin.run_available('jedge')");
	is($rc, 0, 'edge: the join reads past it') or diag("run_available failed: $err");
	results_match($node, 'SELECT k, lts, rts FROM jedge',
		q{SELECT 'a'::text, lts::timestamptz, rts::timestamptz FROM (VALUES
  ('2024-01-01 00:10:00+00', '2024-01-01 00:15:00+00'),
  ('2024-01-01 00:20:00+00', '2024-01-01 00:25:00+00')) v(lts, rts)},
		'edge: the other rows join');
	like($node->safe_psql('postgres', q{
SELECT string_agg("offset" || ': ' || error, ', ') FROM streamwin.dead_letters
 WHERE source = 'bi_jedge0'}),
		qr/^1: [^,]*join's time range[^,]*$/, 'edge: the event time the range cannot shift is a dead letter');
}

$node->stop;
$broker->stop;
done_testing();
