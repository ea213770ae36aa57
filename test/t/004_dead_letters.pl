
# 004_dead_letters.pl: messages that cannot be decoded land in
# streamwin.dead_letters, once each, and never stop the stream.
#
# Bad messages (broken JSON, a JSON array, wrong types, out-of-range numbers,
# invalid timestamps, invalid UTF-8, CSV with the wrong field count or an
# unterminated quote) are mixed into streams of good ones at known
# partitions and offsets.  Expected: streamwin.dead_letters holds exactly one
# row per bad message (source, partition, offset, payload bytes, an error
# text), even though two queries read the JSON source, and every good
# message around them is counted.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

srand(4004);

my $T0 = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms

my $broker = StreamwinTest::Broker->start(
	topics => { dl_json => 2, dl_csv => 1, dl_text => 1, dl_kinds => 1 });
my $node = new_node('deadletters');
my $brokers = $broker->bootstrap;

my $ts = sub { ts_text($T0 + int(rand(300_000))) };

my @bad_json = (
	qq({"id": 1, "k": "a", "v": 3, "ts": "@{[$ts->()]}"),         # truncated
	'this is not json',
	'[1, 2, 3]',                                                # not an object
	qq({"id": "not-a-number", "k": "a", "v": 1, "ts": "@{[$ts->()]}"}),
	qq({"id": 7, "k": "a", "v": 99999999999, "ts": "@{[$ts->()]}"}), # int overflow
	qq({"id": 8, "k": "a", "v": 1, "ts": "not a timestamp"}),
	qq({"id": 9, "k": "\xff\xfe bad", "v": 1, "ts": "@{[$ts->()]}"}), # invalid UTF-8
	qq({"id": 10, "k": "\xc3\x28", "v": 2, "ts": "@{[$ts->()]}"}),     # invalid UTF-8
);
my @bad_csv = (
	'1,a,5',                                     # too few fields
	"2,a,5,@{[$ts->()]},extra",                  # too many fields
	qq("unterminated,a,1,@{[$ts->()]}),          # unterminated quote
	"x,a,1,@{[$ts->()]}",                        # bigint expected
	"3,\xc3\x28,1,@{[$ts->()]}",                 # invalid UTF-8
);
my @bad_text = ("bad \xc3\x28 utf8", "\xff", "trailing \xe2\x82");

# Build a stream: good messages with the bad ones spread over it.  Returns
# ([partition, payload] list, good events [id, k, v, ts], expected dead
# letters [partition, offset, payload]).
sub mix
{
	my ($nparts, $ngood, $bad, $fmt) = @_;
	my (@msgs, @good, @dead, %next);
	my @queue = map { [ 'good', $_ ] } 1 .. $ngood;
	for my $b (@$bad)
	{
		# at a random place, but never first (a good message precedes it)
		splice @queue, 1 + int(rand(@queue - 1)), 0, [ 'bad', $b ];
	}
	for my $item (@queue)
	{
		my $p = int(rand($nparts));
		my $off = $next{$p}++ // 0;
		if ($item->[0] eq 'bad')
		{
			push @msgs, [ $p, $item->[1] ];
			push @dead, [ $p, $off, $item->[1] ];
			next;
		}
		my $id = $item->[1];
		my @e = ($id, 'k' . int(rand(4)), int(rand(1000)), $ts->());
		push @good, \@e;
		push @msgs, [ $p, $fmt->(@e) ];
	}
	return (\@msgs, \@good, \@dead);
}

my ($json_msgs, $json_good, $json_dead) = mix(2, 600, \@bad_json,
	sub { sprintf('{"id": %d, "k": "%s", "v": %d, "ts": "%s"}', @_) });
my ($csv_msgs, $csv_good, $csv_dead) =
  mix(1, 300, \@bad_csv, sub { join(',', @_) });
my ($text_msgs, $text_good, $text_dead) =
  mix(1, 200, \@bad_text, sub { "line $_[0] ok $_[1]" });

$broker->produce('dl_json', $json_msgs);
$broker->produce('dl_csv',  $csv_msgs);
$broker->produce('dl_text', $text_msgs);

my $cols = 'id bigint, k text, v int, ts timestamptz';
load_table($node, 'good_json', $cols, $json_good);
load_table($node, 'good_csv',  $cols, $csv_good);
load_table($node, 'good_text', 'line text',
	[ map { ["line $_->[0] ok $_->[1]"] } @$text_good ]);

my @dead;
push @dead, map { [ 'dl_json', @$_ ] } @$json_dead;
push @dead, map { [ 'dl_csv',  @$_ ] } @$csv_dead;
push @dead, map { [ 'dl_text', @$_ ] } @$text_dead;
load_table($node, 'want_dead', 'source text, part int, off bigint, payload bytea',
	[ map { [ $_->[0], $_->[1], $_->[2], '\\x' . unpack('H*', $_->[3]) ] } @dead ]);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dl_json', '$brokers', 'dl_json', '$cols', 'json');
SELECT streamwin.create_kafka_source('dl_csv', '$brokers', 'dl_csv', '$cols', 'csv');
SELECT streamwin.create_kafka_source('dl_text', '$brokers', 'dl_text', 'line text', 'text');
SELECT streamwin.create_query('json_rows', 'SELECT id, k, v, ts FROM dl_json',
    start => false);
SELECT streamwin.create_query('json_counts',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM dl_json
         GROUP BY streamwin.tumble(ts, '1 hour'), k\$q\$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('csv_rows', 'SELECT id, k, v, ts FROM dl_csv',
    start => false);
SELECT streamwin.create_query('text_rows', 'SELECT line FROM dl_text',
    start => false);
}, 'sources and queries created');

# Each query reads everything; the first reader of a source meets its bad
# messages and reports them in its totals.
my %nbad = (json_rows => scalar(@bad_json), csv_rows => scalar(@bad_csv),
	text_rows => scalar(@bad_text));
for my $q (qw(json_rows json_counts csv_rows text_rows))
{
	my $r = run_json($node, "run_available('$q')");
	next unless $r;
	is($r->{dead_letters}, $nbad{$q}, "$q: run_available counts the dead letters")
	  if exists $nbad{$q};
	is($r->{late_rows_dropped}, 0, "$q: no late rows");
}

results_match(
	$node,
	'SELECT source::text, "partition"::int, "offset"::bigint, payload FROM streamwin.dead_letters',
	'SELECT source, part, off, payload FROM want_dead',
	'every bad message is in dead_letters exactly once, with partition, offset and payload');

is( $node->safe_psql('postgres', q{
SELECT count(*) FROM streamwin.dead_letters
 WHERE coalesce(error, '') = '' OR at IS NULL}),
	'0', 'every dead letter has an error text and a time');
note($node->safe_psql('postgres',
	q{SELECT source, "partition", "offset", error FROM streamwin.dead_letters ORDER BY 1, 2, 3}));

# The good messages are all there.
results_match($node, 'SELECT id, k, v, ts FROM json_rows',
	'SELECT id, k, v, ts FROM good_json', 'json: every good message decoded');
results_match(
	$node,
	'SELECT window_start, window_end, k, n::bigint, s::bigint FROM json_counts',
	windows_sql(
		table => 'good_json',
		size  => 3600,
		keys  => 'k',
		aggs  => 'count(*)::bigint AS n, sum(v)::bigint AS s'),
	'json: second query counts every good message');
results_match($node, 'SELECT id, k, v, ts FROM csv_rows',
	'SELECT id, k, v, ts FROM good_csv', 'csv: every good message decoded');
results_match($node, 'SELECT line FROM text_rows',
	'SELECT line FROM good_text', 'text: every good line decoded');

# Nothing is recorded twice when a query runs again.
run_json($node, "run_available('json_rows')");
is($node->safe_psql('postgres', 'SELECT count(*) FROM streamwin.dead_letters'),
	scalar(@dead), 'running again adds no dead letters');

# Values refused with errors of other classes than data exceptions: an array
# of seven dimensions (a program limit), a regclass naming no table (an
# undefined object), one naming another database's table (a feature not
# supported).  Each is its message's dead letter; the stream goes on (the
# batch failed at every retry before).
my @kinds = (
	[ 0, '{"n": 1, "a": "{1,2}", "r": "pg_class"}' ],
	[ 0, '{"n": 2, "a": "{{{{{{{1}}}}}}}", "r": "pg_class"}' ],
	[ 0, '{"n": 3, "a": "{3}", "r": "no_such_table"}' ],
	[ 0, '{"n": 4, "a": "{4}", "r": "pg_proc"}' ],
	[ 0, '{"n": 5, "a": "{5}", "r": "otherdb.public.t"}' ],
	[ 0, '{"n": 6, "a": "{6}", "r": "pg_type"}' ]);
$broker->produce('dl_kinds', \@kinds);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dl_kinds', '$brokers', 'dl_kinds', 'n int, a int[], r regclass', 'json');
SELECT streamwin.create_query('kinds_rows', 'SELECT n, a, r::text AS r FROM dl_kinds', start => false);
}, 'a source of an array and a regclass column');
run_json($node, "run_available('kinds_rows')");
is($node->safe_psql('postgres', q{SELECT string_agg(n || ':' || a::text || ':' || r, ' ' ORDER BY n) FROM kinds_rows}),
	'1:{1,2}:pg_class 4:{4}:pg_proc 6:{6}:pg_type', 'the good messages around them are read');
like($node->safe_psql('postgres', q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset") FROM streamwin.dead_letters WHERE source = 'dl_kinds'}),
	qr/^1: .*dimensions.*\n2: .*no_such_table.*\n4: .*cross-database.*$/s,
	'the array of seven dimensions, the unknown table and the other database\'s are dead letters');

# A domain whose CHECK calls a function of the user's that fails alike for
# every message (a table it reads is gone): the batch fails, at every try,
# and no message becomes a dead letter; with the table back, all are read.
psql_ok($node, qq{
CREATE TABLE valid_ids (id int);
INSERT INTO valid_ids SELECT generate_series(1, 10);
CREATE FUNCTION id_ok(int) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
    RETURN EXISTS (SELECT 1 FROM valid_ids WHERE id = \$1);
END \$f\$;
CREATE DOMAIN checked_id AS int CHECK (id_ok(VALUE));
SELECT streamwin.create_kafka_source('dl_checked', '$brokers', 'dl_kinds', 'n checked_id', 'json');
SELECT streamwin.create_query('checked_rows', 'SELECT n FROM dl_checked', start => false);
ALTER TABLE valid_ids RENAME TO valid_ids_away;
}, 'a source of a domain whose CHECK reads a table, which goes away');
my ($rc, $out, $err) = $node->psql('postgres', "SELECT streamwin.run_batch('checked_rows')");
like($err, qr/relation "valid_ids" does not exist/, 'the batch fails on the missing table');
is($node->safe_psql('postgres', q{SELECT count(*) FROM streamwin.dead_letters WHERE source = 'dl_checked'}),
	'0', 'and no message is a dead letter');
psql_ok($node, 'ALTER TABLE valid_ids_away RENAME TO valid_ids', 'the table is back');
run_json($node, "run_available('checked_rows')");
is($node->safe_psql('postgres', q{SELECT string_agg(n::text, ',' ORDER BY n) FROM checked_rows}),
	'1,2,3,4,5,6', 'every message is read');

$node->stop;
$broker->stop;
done_testing();
