
# 001_formats.pl: the json, csv and text source formats decode every message
# exactly.
#
# For each format, seeded events are produced to their own topic and loaded
# into an ordinary table.  A continuous transform (a query without GROUP BY)
# must reproduce the events row for row, and a windowed aggregate must equal
# the same aggregate computed with plain SQL over the table.  Awkward values
# are included on purpose: escapes and non-ASCII text, quoted CSV fields with
# commas and quotes, JSON keys in any order, missing keys and nulls.
use strict;
use warnings;
use utf8;

use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use StreamwinTest;

srand(1001);

my $T0 = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms

my $broker = StreamwinTest::Broker->start(
	topics => { fmt_json => 2, fmt_json1 => 1, fmt_csv => 2, fmt_text => 1, fmt_spell => 1,
		texts_json => 1, texts_csv => 1 });
my $node = new_node('formats');
my $brokers = $broker->bootstrap;

my @keys = ('alpha', 'beta', 'with space', 'quo"te', 'back\\slash',
	'café', 'comma,key', 'tab	in', 'ünï €');

# Events: [id, k, v, amount, ok, ts_ms, partition]
sub gen_events
{
	my ($n, $nparts) = @_;
	my @ev;
	for my $i (1 .. $n)
	{
		my $v = rand() < 0.05 ? undef : int(rand(2000)) - 500;
		push @ev,
		  [
			$i, $keys[ int(rand(@keys)) ],
			$v, sprintf('%.2f', rand(1000) - 100),
			(rand() < 0.5 ? 'true' : 'false'),
			$T0 + int(rand(600_000)),    # ten minutes
			int(rand($nparts)) ];
	}
	return @ev;
}

sub table_rows
{
	return map { [ @$_[ 0 .. 4 ], ts_text($_->[5]) ] } @_;
}

my $evcols =
  'id bigint, k text, v int, amount float8, ok boolean, ts timestamptz';

# What streamwin must produce, computed without it.
sub windowed_want
{
	my ($table) = @_;
	return windows_sql(
		table => $table,
		size  => 60,
		keys  => 'k',
		aggs  => 'count(*)::bigint AS n, sum(v)::bigint AS s, count(v)::bigint AS nv,'
		  . ' round(sum(amount)::numeric, 2) AS amt');
}
my $windowed_got =
  'SELECT window_start, window_end, k, n::bigint, s::bigint, nv::bigint,'
  . ' round(amt::numeric, 2) FROM %s';

# run_available on a stopped query; checks its totals.  Returns the jsonb.
sub run_all
{
	my ($query, $nmsgs, $offsets) = @_;
	my $r = query_json($node, "SELECT streamwin.run_available('$query')");
	return unless $r;
	is($r->{input_rows},        $nmsgs, "$query: run_available read every message");
	is($r->{dead_letters},      0,      "$query: no dead letters");
	is($r->{late_rows_dropped}, 0,      "$query: no late rows");
	is_deeply($r->{offsets}, $offsets,
		"$query: offsets are the next offset of each partition");
	return $r;
}

sub offsets_of
{
	my %o;
	$o{ $_->[6] }++ for @_;
	return { map { ("$_" => $o{$_}) } keys %o };
}

# ---- json --------------------------------------------------------------

# Event times in the many spellings of ISO 8601 that producers use (and a
# few that only PostgreSQL's general parser reads: no zone, 7 fractional
# digits), so the decoder's fast path is checked against timestamptz_in,
# which reads the expected table's copy of the same text.
sub iso_variant
{
	my ($ms) = @_;
	my @zones = (0, 0, 60, -300, 330, -570, 765);
	my $off = $zones[ int(rand(@zones)) ];    # minutes east of UTC
	my $local = POSIX::floor($ms / 1000) + $off * 60;
	my $frac = $ms % 1000;
	my $sep = (' ', 'T', 't')[ int(rand(3)) ];
	my $text = POSIX::strftime("%Y-%m-%d${sep}%H:%M:%S", gmtime($local));
	my $digits = int(rand(8));
	$text .= substr(sprintf('.%03d0000', $frac), 0, $digits + 1)
	  if $digits > 0 && ($frac == 0 || $digits >= 3);
	$text .= sprintf('.%03d', $frac) if $frac != 0 && ($digits == 0 || $digits < 3);
	return $text if $off == 0 && rand() < 0.1;    # no zone: session TimeZone (UTC)
	my ($h, $m) = (int(abs($off) / 60), abs($off) % 60);
	my $sign = $off < 0 ? '-' : '+';
	my @z = $off == 0 ? ('Z', 'z', '+00', '+00:00', '-0000') : ();
	push @z, sprintf('%s%02d:%02d', $sign, $h, $m), sprintf('%s%02d%02d', $sign, $h, $m);
	push @z, sprintf('%s%02d', $sign, $h) if $m == 0;
	return $text . $z[ int(rand(@z)) ];
}

my @json_ev = gen_events(2000, 2);
push @$_, iso_variant($_->[5]) for @json_ev;
my $jenc_ascii = JSON::PP->new->ascii->allow_nonref;    # \u escapes
my $jenc_utf8  = JSON::PP->new->allow_nonref;           # raw UTF-8
my @json_msgs;
for my $e (@json_ev)
{
	my $enc = rand() < 0.5 ? $jenc_ascii : $jenc_utf8;
	my %f = (
		id     => $e->[0],
		k      => $enc->encode($e->[1]),
		amount => $e->[3],
		ok     => $e->[4],
		ts     => $enc->encode($e->[7]));
	# v: a number, or absent / null when NULL
	if (defined $e->[2])
	{
		$f{v} = $e->[2];
	}
	elsif (rand() < 0.5)
	{
		$f{v} = 'null';
	}
	my @names = sort keys %f;
	@names = reverse @names if rand() < 0.5;    # key order must not matter
	my $json = '{'
	  . join(', ', map { $enc->encode($_) . ': ' . $f{$_} } @names) . '}';
	push @json_msgs, [ $e->[6], $json ];
}
$broker->produce('fmt_json', \@json_msgs);
load_table($node, 'want_json', $evcols, [ map { [ @$_[ 0 .. 4 ], $_->[7] ] } @json_ev ]);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('fmt_json', '$brokers', 'fmt_json',
    '$evcols', 'json');
SELECT streamwin.create_query('json_rows',
    'SELECT id, k, v, amount, ok, ts FROM fmt_json', start => false);
SELECT streamwin.create_query('json_windows',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s, count(v) AS nv, sum(amount) AS amt
         FROM fmt_json GROUP BY streamwin.tumble(ts, '1 minute'), k\$q\$,
    output_mode => 'update', start => false);
}, 'json: source and queries created');

run_all('json_rows', scalar(@json_ev), offsets_of(@json_ev));
results_match($node, 'SELECT id, k, v, amount, ok, ts FROM json_rows',
	'SELECT id, k, v, amount, ok, ts FROM want_json',
	'json: transform reproduces every event');

run_all('json_windows', scalar(@json_ev), offsets_of(@json_ev));
results_match($node, sprintf($windowed_got, 'json_windows'),
	windowed_want('want_json'), 'json: tumbling window aggregate is exact');

# The same rows read through the view's function rather than streamwin's
# scan (streamwin.enable_source_scan off in the session that plans the
# batch): a transform, and a deduplication, which reads its source's rows
# numbered.  Which row of a key a deduplication keeps depends on the order
# in which the partitions' messages arrive, so it reads the same messages
# from a topic of one partition, where the first is the one produced first:
# the event with the lowest id.
$broker->produce('fmt_json1', [ map { [ 0, $_->[1] ] } @json_msgs ]);
like($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT * FROM fmt_json'),
	qr/Custom Scan \(StreamwinSourceRows\)/, 'json: a source is read by the custom scan');
like($node->safe_psql('postgres',
		'SET streamwin.enable_source_scan = off; EXPLAIN (COSTS OFF) SELECT * FROM fmt_json'),
	qr/Function Scan on source_rows/, 'json: or, with the scan off, by the function');
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('fmt_json1', '$brokers', 'fmt_json1',
    '$evcols', 'json');
SELECT streamwin.create_query('json_rows_fn',
    'SELECT id, k, v, amount, ok, ts FROM fmt_json', start => false);
SELECT streamwin.create_query('json_first_fn',
    'SELECT id, k, v, ts FROM fmt_json1', dedup_keys => '{k}',
    options => '{"dedup_without_watermark": true}', start => false);
SELECT streamwin.create_query('json_first',
    'SELECT id, k, v, ts FROM fmt_json1', dedup_keys => '{k}',
    options => '{"dedup_without_watermark": true}', start => false);
}, 'json: queries read through the function created');
for my $q ('json_rows_fn', 'json_first_fn')
{
	my $r = query_json($node,
		"SET streamwin.enable_source_scan = off; SELECT streamwin.run_available('$q')");
	is($r && $r->{input_rows}, scalar(@json_ev), "$q: read every message through the function");
}
query_json($node, "SELECT streamwin.run_available('json_first')");
results_match($node, 'SELECT id, k, v, amount, ok, ts FROM json_rows_fn',
	'SELECT id, k, v, amount, ok, ts FROM want_json',
	'json: the transform through the function reproduces every event');
for my $q ('json_first_fn', 'json_first')
{
	results_match($node, "SELECT id, k, v, ts FROM $q",
		'SELECT DISTINCT ON (k) id, k, v, ts FROM want_json ORDER BY k, id',
		"$q: deduplication keeps the first row of each key");
}

# A state store's result statements read its groups through
# streamwin.store_rows(), which the planner replaces by a scan of the
# store's memory as well.  An update-mode aggregate in batches of 300
# events (windows that span batches: rows inserted, then updated by
# location) is exact both ways.
like($node->safe_psql('postgres',
		q{EXPLAIN (COSTS OFF) SELECT * FROM streamwin.store_rows(0, 'insert') AS s(a int)}),
	qr/Custom Scan \(StreamwinStoreRows\)/, 'store_rows() is read by the custom scan');
like($node->safe_psql('postgres',
		q{SET streamwin.enable_source_scan = off;
		  EXPLAIN (COSTS OFF) SELECT * FROM streamwin.store_rows(0, 'insert') AS s(a int)}),
	qr/Function Scan on store_rows/, 'store_rows(): or, with the scan off, by the function');
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('fmt_json_small', '$brokers', 'fmt_json',
    '$evcols', 'json', '{"max_records_per_batch": 300}');
SELECT streamwin.create_query('json_windows_' || how,
    \$q\$SELECT k, count(*) AS n, sum(v) AS s, count(v) AS nv, sum(amount) AS amt
         FROM fmt_json_small GROUP BY streamwin.tumble(ts, '1 minute'), k\$q\$,
    output_mode => 'update', start => false)
  FROM unnest(ARRAY['scan', 'fn']) AS how;
}, 'json: update-mode queries in small batches created');
for my $how ('scan', 'fn')
{
	my $q = "json_windows_$how";
	my $r = query_json($node,
		($how eq 'fn' ? 'SET streamwin.enable_source_scan = off; ' : '')
		  . "SELECT streamwin.run_available('$q')");
	cmp_ok($r && $r->{batches}, '>=', 7, "$q: ran in batches of 300 events");
	results_match($node, sprintf($windowed_got, $q), windowed_want('want_json'),
		"$q: update mode over batches is exact");
}

# ---- csv ---------------------------------------------------------------

sub csv_quote
{
	my ($s) = @_;
	return $s unless $s =~ /[",\s\\]/;
	$s =~ s/"/""/g;
	return qq{"$s"};
}

my @csv_ev = grep { defined $_->[2] } gen_events(2000, 2);   # no NULLs in csv
my @csv_msgs = map {
	[
		$_->[6],
		join(',',
			$_->[0], csv_quote($_->[1]), $_->[2], $_->[3], $_->[4],
			(rand() < 0.5 ? qq{"@{[ts_text($_->[5])]}"} : ts_text($_->[5])))
	]
} @csv_ev;
$broker->produce('fmt_csv', \@csv_msgs);
load_table($node, 'want_csv', $evcols, [ table_rows(@csv_ev) ]);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('fmt_csv', '$brokers', 'fmt_csv',
    '$evcols', 'csv');
SELECT streamwin.create_query('csv_rows',
    'SELECT id, k, v, amount, ok, ts FROM fmt_csv', start => false);
SELECT streamwin.create_query('csv_windows',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s, count(v) AS nv, sum(amount) AS amt
         FROM fmt_csv GROUP BY streamwin.tumble(ts, '1 minute'), k\$q\$,
    output_mode => 'complete', start => false);
}, 'csv: source and queries created');

run_all('csv_rows', scalar(@csv_ev), offsets_of(@csv_ev));
results_match($node, 'SELECT id, k, v, amount, ok, ts FROM csv_rows',
	'SELECT id, k, v, amount, ok, ts FROM want_csv',
	'csv: transform reproduces every event');

run_all('csv_windows', scalar(@csv_ev), offsets_of(@csv_ev));
results_match($node, sprintf($windowed_got, 'csv_windows'),
	windowed_want('want_csv'),
	'csv: tumbling window aggregate (complete mode) is exact');

# ---- text --------------------------------------------------------------

# Access-log-like lines: "<ISO timestamp> <method> <path> <status>"; some
# lines carry a tab, a backslash or non-ASCII text in the path.
my @methods = qw(GET GET GET POST PUT DELETE);
my @paths   = ('/', '/index.html', '/a\\b', "/tab\tpath", '/naïve/€', '/q?x="y"');
my @lines;
for my $i (1 .. 1500)
{
	my $ms = $T0 + int(rand(900_000));
	my $iso = ts_text($ms);
	$iso =~ s/ /T/;
	$iso =~ s/\+00$/Z/;
	push @lines, join(' ', $iso, $methods[ int(rand(@methods)) ],
		$paths[ int(rand(@paths)) ], (200, 200, 404, 500)[ int(rand(4)) ]);
}
$broker->produce('fmt_text', \@lines, partition => 0);
load_table($node, 'want_text', 'line text', [ map { [$_] } @lines ]);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('fmt_text', '$brokers', 'fmt_text',
    'line text', 'text');
SELECT streamwin.create_query('text_rows', 'SELECT line FROM fmt_text',
    start => false);
SELECT streamwin.create_query('text_windows',
    \$q\$SELECT split_part(line, ' ', 2) AS method, count(*) AS n
         FROM fmt_text
        GROUP BY streamwin.tumble(split_part(line, ' ', 1)::timestamptz, '1 minute'),
                 split_part(line, ' ', 2)\$q\$,
    output_mode => 'update', start => false);
}, 'text: source and queries created');

run_all('text_rows', scalar(@lines), { 0 => scalar(@lines) });
results_match($node, 'SELECT line FROM text_rows', 'SELECT line FROM want_text',
	'text: transform reproduces every line');

run_all('text_windows', scalar(@lines), { 0 => scalar(@lines) });
results_match(
	$node,
	'SELECT window_start, window_end, method, n::bigint FROM text_windows',
	windows_sql(
		table => q{(SELECT split_part(line, ' ', 1)::timestamptz AS ts,
		                   split_part(line, ' ', 2) AS method FROM want_text)},
		size => 60,
		keys => 'method',
		aggs => 'count(*)::bigint AS n'),
	'text: count per tumbling window of a parsed timestamp is exact');

is($node->safe_psql('postgres', 'SELECT count(*) FROM streamwin.dead_letters'),
	'0', 'no dead letters from well-formed messages');

# ---- integer, floating-point and text values against their input functions

# The decoder reads plain decimal integers, short plain decimals into real
# and double precision, and text itself, and leaves every other spelling to
# the type's input function.  Each message carries one spelling in one
# column (smallint, integer, bigint, real, double precision or text), as a
# JSON number when it is one and as a string otherwise; what the cast of
# the same text gives in plain SQL is expected: the value (compared as
# text, which for floating point is the shortest that reads back to the
# same value, -0 included), or a dead letter with the cast's error message.
my @int_spellings = (
	'0', '-0', '7', '007', '-007', '+5', ' 12', '12 ', '1e3', '12.0', '',
	'-', '1_000', '0x1f', '9999', '-9999', '32767', '-32768', '32768',
	'-32769', '99999', '999999999', '-999999999', '2147483647',
	'-2147483648', '2147483648', '-2147483649', '999999999999999999',
	'-999999999999999999', '9223372036854775807', '-9223372036854775808',
	'9223372036854775808', '-9223372036854775809', '00000000000000000001',
	'-00000000000000000000', '12345678901234567890123');
# around the fast path's limits: 7 digits and 10 after the point for
# real, 15 and 22 for double precision, and decimals that do not round
# exactly
my @float_spellings = (
	'0', '-0', '0.0', '-0.0', '-0.000', '7', '-7', '007.50', '1.5', '-1.5',
	'0.1', '0.2', '0.3', '2.675', '4.35', '-123.456', '1234567', '-1234567',
	'12345678', '0.1234567', '0.12345678', '3.4028235', '9999999',
	'0.0000000001', '0.00000000001', '12345678.9', '123456789012345',
	'-999999999999999', '9999999999999999', '1.23456789012345',
	'3.14159265358979', '2.2250738585072014', '1.7976931348623157',
	'0.30000000000000004', '900719925474099.3', '9007199254740993',
	'0.0000000000000000000001', '0.00000000000000000000001',
	'0.000000000000000000000001', '1e3', '-1.5e-3', '1e39', '1e309',
	'1e-400', 'NaN', 'Infinity', '-Infinity', '.5', '5.', '+1.5', ' 1.5',
	'1.5 ', '', '-', '.', '1,5', '1..5', '1.5.', '0x10', '1_000.5');
my @text_spellings = ('', 'plain', 'é€', '12.50', 'tab	in', 'back\\slash');
my @spell;    # [id, column, spelling]
for my $col ('a', 'b', 'c')
{
	push @spell, [ scalar(@spell) + 1, $col, $_ ] for @int_spellings;
}
for my $col ('r', 'd')
{
	push @spell, [ scalar(@spell) + 1, $col, $_ ] for @float_spellings;
}
push @spell, [ scalar(@spell) + 1, 't', $_ ] for @text_spellings;
my $jenc = JSON::PP->new->allow_nonref;
my @spell_msgs = map {
	my ($id, $col, $text) = @$_;
	my $value = $text =~ /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$/
	  ? $text : $jenc->encode($text);
	[ 0, qq({"id": $id, "$col": $value}) ]
} @spell;
$broker->produce('fmt_spell', \@spell_msgs);
load_table($node, 'spellings', 'id int, col text, spelling text',
	[ map { [@$_] } @spell ]);

psql_ok($node, q{
CREATE FUNCTION spelled(col text, spelling text, OUT value text, OUT error text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT %L::%s::text', spelling,
                   CASE col WHEN 'a' THEN 'smallint' WHEN 'b' THEN 'integer'
                            WHEN 'c' THEN 'bigint' WHEN 'r' THEN 'real'
                            WHEN 'd' THEN 'double precision' ELSE 'text' END)
        INTO value;
EXCEPTION WHEN data_exception THEN
    error := SQLERRM || format(' (JSON key "%s" of the message)', col);
END $$;
CREATE TABLE spelled AS
    SELECT id, col, (spelled(col, spelling)).* FROM spellings;
}, 'spellings: their casts computed in plain SQL');
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('fmt_spell', '$brokers', 'fmt_spell',
    'id int, a smallint, b integer, c bigint, r real, d double precision, t text', 'json');
SELECT streamwin.create_query('spell_rows',
    'SELECT id, a, b, c, r, d, t FROM fmt_spell', start => false);
SELECT streamwin.run_available('spell_rows');
}, 'spellings: read by a transform');
results_match($node,
	q{SELECT id, coalesce(a::text, b::text, c::text, r::text, d::text, t) FROM spell_rows},
	q{SELECT id, value FROM spelled WHERE error IS NULL},
	'spellings: every accepted value is what its cast gives');
results_match($node,
	q{SELECT (convert_from(payload, 'UTF8')::jsonb->>'id')::int, error FROM streamwin.dead_letters
	   WHERE source = 'fmt_spell'},
	q{SELECT id, error FROM spelled WHERE error IS NOT NULL},
	'spellings: every rejected value is a dead letter with the cast\'s error');
cmp_ok($node->safe_psql('postgres',
		q{SELECT count(*) FROM spelled WHERE error IS NULL AND col <> 't'}),
	'>', 40, 'spellings: integers both accepted and rejected');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FILTER (WHERE error IS NULL) > 80 AND count(*) FILTER (WHERE error IS NOT NULL) > 15
		    FROM spelled WHERE col IN ('r', 'd')}),
	't', 'spellings: floating-point values both accepted and rejected');

# ---- text values of every length, across the blocks they are carved from

# A batch's text values are carved from blocks of 64 kB of its memory, and
# one of more than 8 kB gets an allocation of its own.  Batches of 300
# messages of short and long texts (up to 9,000 bytes: both ways, and many
# blocks a batch); every 97th message malformed, which the decoder reports,
# and every 89th a value int4in refuses, which throws: the batch's
# messages are then decoded again, in halves, each in a subtransaction.
# Every text must be the one produced, which plain SQL writes again from
# the message's number.
my $texts_n = 2500;
my %texts_msg = (
	json => sub {
		my ($n) = @_;
		return $n % 97 == 0 ? qq({"n": $n, "s": )
		  : $n % 89 == 0 ? qq({"n": "x$n", "s": ") . text_of_length($n) . '"}'
		  : qq({"n": $n, "s": ") . text_of_length($n) . '"}';
	},
	csv => sub {
		my ($n) = @_;
		return $n % 97 == 0 ? "$n" : ($n % 89 == 0 ? "x$n" : $n) . ',' . text_of_length($n);
	});
my $texts_dead = int($texts_n / 97) + int($texts_n / 89);
for my $fmt ('json', 'csv')
{
	$broker->produce("texts_$fmt", [ map { $texts_msg{$fmt}->($_) } 1 .. $texts_n ]);
	psql_ok($node, qq{
SELECT streamwin.create_kafka_source('texts_$fmt', '$brokers', 'texts_$fmt', 'n int, s text', '$fmt',
    '{"max_records_per_batch": 300}');
SELECT streamwin.create_query('texts_${fmt}_rows', 'SELECT n, s FROM texts_$fmt', start => false);
}, "texts ($fmt): a transform");
	my $r = run_json($node, "run_available('texts_${fmt}_rows')");
	cmp_ok($r->{batches}, '>=', int($texts_n / 300), "texts ($fmt): in batches of 300");
	results_match($node, "SELECT n, length(s), md5(s) FROM texts_${fmt}_rows",
		texts_want_sql($texts_n, 97, 89), "texts ($fmt): every text of every length exact");
	is( $node->safe_psql('postgres',
			"SELECT count(*), count(*) FILTER (WHERE error LIKE '%invalid input syntax for type integer%')
			   FROM streamwin.dead_letters WHERE source = 'texts_$fmt'"),
		"$texts_dead|" . int($texts_n / 89),
		"texts ($fmt): the broken messages are dead letters, those int4in refused among them");
}

$node->stop;
$broker->stop;
done_testing();
