
# 036_debezium_types.pl: Debezium events in Kafka Connect's JSON-converter
# wrapper, whose schema says how a column's value is encoded, against values
# computed in plain SQL from the raw integers and bytes the events carry.
#
# Debezium's PostgreSQL connector, with its default settings, writes a
# timestamp as microseconds since the epoch, a date as days, a numeric as
# the base64 of its unscaled value, a jsonb as a string and a bytea as
# base64, and says so only in the message's "schema".  A Kafka source with
# envelope debezium reads such a value by the schema entry of its column
# ("field") in the schema of its row image ("before" or "after").  This
# test produces c, r, u and d events of a table of every such column (and
# events without the wrapper, read as before), reads them with run_batch and
# run_available from stopped transforms that name the change column, and
# compares every change row, the retractions from "before" included, with
# an expected table loaded by INSERT ... VALUES of SQL expressions over the
# raw values:
#
#   1. the conversions: Timestamp, MicroTimestamp, NanoTimestamp (into
#      timestamp and timestamptz, before 1970 too), Date (into date,
#      timestamp and timestamptz), Time, MicroTime, NanoTime, MicroDuration,
#      Decimal (scales 0 to 6 that change from message to message, values of
#      1 to 20 bytes of two's complement, sign-extended or not, into
#      numeric with its scale kept, and into integer and float columns),
#      VariableScaleDecimal, Json (into jsonb and json), bytes (into bytea),
#      a domain over timestamptz and one over numeric; JSON nulls.
#      Debezium's infinities (9223372036825200000 and -9223372036832400000
#      in milli-, micro- and nanoseconds) into timestamp, timestamptz and
#      the domain, as 'infinity' and '-infinity' (into bigint as they are),
#      and the integers next to them as the instants they are (in years
#      294247, 2262 and 1677).
#   2. what is read as before: a column whose type the schema name does not
#      convert (bigint for a MicroTimestamp, text for a Decimal, bytes or
#      Json), a field the schema does not describe or describes without a
#      name, and events without the wrapper (ISO strings, JSON numbers, a
#      JSON string into jsonb stays a string).
#   3. the session's TimeZone changes nothing: a second transform of the
#      same source runs its batches under America/Sao_Paulo (whose offset
#      before 1914 is -03:06:28) and must equal the same expected table.
#   4. malformed values (the wrong JSON kind for the schema name, bad
#      base64, a VariableScaleDecimal without an integer scale (or {}) or a
#      string value, an integer beyond int64, a decimal with a fraction into
#      an integer column, in "after" or "before"; timestamps next to the
#      infinities that PostgreSQL cannot hold, -infinity into a domain that
#      refuses it, the int64 extremes as days): dead letters at their
#      partition and offset that say why, and the events around them read.
#      A Decimal of long non-ASCII text is quoted in its error in whole
#      UTF-8 characters.
#   5. rows in the wrapper, without an event around them ({"schema": the
#      row's struct, "payload": the row}, as Debezium's ExtractNewRecordState
#      and Kafka Connect's source connectors write them), in sources of
#      envelope append and upsert: each column converted by the field of its
#      name as in an event, against the same SQL expressions; rows without
#      the wrapper, or with a null schema, read as before (an integer into a
#      timestamptz is a dead letter there); a wrapper whose payload is no
#      object, one whose top level names a column, and a message of no
#      column are read as they are, rows of NULLs counted in missing_keys;
#      a source with a column named "payload" or "schema" takes that member
#      as JSON and unwraps nothing; an upsert's keyed transform holds each
#      key's last wrapped row (tombstones, and wrappers of a null payload,
#      delete it; in the append source such a wrapper is a row of NULLs);
#      malformed values are dead letters that say why.
#   6. keys in the wrapper: an upsert source whose message keys are
#      {"schema": the key's struct, "payload": the key} reads its key
#      columns (an int64, a MicroTimestamp, infinity among them, and a
#      Decimal) by their logical types; each key's versions replace each
#      other, a tombstone or the wrapper of a null payload deletes it, a
#      later version adds it again, against SQL over the raw values.
use strict;
use warnings;

use JSON::PP;
use List::Util qw(shuffle);
use Math::BigInt;
use Encode ();
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $node = new_node('dbztypes');
my $broker = StreamwinTest::Broker->start(topics => { dbt => 1, dbt_rows => 1, dbt_ups => 1, dbt_pay => 1, dbt_sch => 1, dbt_keys => 1 });
my $brokers = $broker->bootstrap;
my $json = JSON::PP->new->allow_nonref;
srand(36);

# ==== JSON text =================================================================

# The messages are written by hand rather than by JSON::PP: the members keep
# Kafka Connect's order ("schema" before "payload", "field" last), integers
# beyond 2^53 and decimal literals go out exactly as given, and a number
# never turns into a string because Perl once used it as one.  obj(PAIRS)
# is an object, num(TEXT) a number or any JSON literal as written, an array
# ref an array, undef null, anything else a string.
sub obj { return bless [@_], 'Dbz::Obj' }
sub num { my $t = "$_[0]"; return bless \$t, 'Dbz::Raw' }
my $T = num('true');
my $F = num('false');

sub json_text
{
	my ($v) = @_;
	return 'null' unless defined $v;
	my $r = ref $v;
	return $$v if $r eq 'Dbz::Raw';
	if ($r eq 'Dbz::Obj')
	{
		my @m;
		for (my $i = 0; $i < @$v; $i += 2)
		{
			push @m, $json->encode("$v->[$i]") . ': ' . json_text($v->[ $i + 1 ]);
		}
		return '{' . join(', ', @m) . '}';
	}
	return '[' . join(', ', map { json_text($_) } @$v) . ']' if $r eq 'ARRAY';
	return $json->encode("$v");
}

# An SQL string literal.
sub lit
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

# ==== raw values ================================================================

# A random integer in [lo, hi] of any size (Perl's rand has 48 bits at best).
sub rand_big
{
	my ($lo, $hi) = map { Math::BigInt->new("$_") } @_;
	my $span = $hi - $lo + 1;
	my $r = Math::BigInt->new(0);
	$r = $r * 65536 + int(rand(65536)) for 0 .. length($span->bstr) / 4;
	return $lo + $r % $span;
}

sub pick { return $_[ int(rand(@_)) ] }

# An unscaled decimal value whose two's complement takes about k bytes, k
# from minb to maxb, of either sign.
sub rand_unscaled
{
	my ($minb, $maxb) = @_;
	my $k = $minb + int(rand($maxb - $minb + 1));
	my $two = Math::BigInt->new(2);
	my $lo = $k == 1 ? 0 : $two**(8 * $k - 9);
	my $m = rand_big($lo, $two**(8 * $k - 1) - 1);
	return rand() < 0.5 ? -$m : $m;
}

# The bytes Kafka Connect's Decimal holds for n: its two's complement,
# big-endian, in as few bytes as hold it (Java's BigInteger.toByteArray),
# or with sign bytes in front, which mean the same.
sub twos_complement
{
	my ($n, $pad) = @_;
	my $two = Math::BigInt->new(2);
	my $k = 1;
	$k++ until $n >= -($two**(8 * $k - 1)) && $n < $two**(8 * $k - 1);
	my $v = $n < 0 ? $two**(8 * $k) + $n : $n->copy;
	my $hex = substr($v->as_hex, 2);
	$hex = ('0' x (2 * $k - length $hex)) . $hex;
	return (($n < 0 ? "\xff" : "\x00") x ($pad // 0)) . pack('H*', $hex);
}

# The decimal n * 10^-scale as numeric prints it: the digits of n with the
# point put in by hand, so that the scale shows ("12.50", "-0.005", "0.00").
sub decimal_text
{
	my ($n, $scale) = @_;
	my $digits = $n->copy->babs->bstr;
	my $sign = $n < 0 ? '-' : '';
	return "$sign$digits" if $scale == 0;
	$digits = ('0' x ($scale + 1 - length $digits)) . $digits if length $digits <= $scale;
	return $sign . substr($digits, 0, -$scale) . '.' . substr($digits, -$scale);
}

# ns nanoseconds as a decimal number of seconds, "-2208988800.000000001":
# interval input rounds its fraction to microseconds as timestamp input does.
sub ns_seconds
{
	my ($ns) = @_;
	my $abs = $ns->copy->babs;
	my ($s, $frac) = $abs->copy->bdiv(1_000_000_000);
	return sprintf('%s%s.%09d', $ns < 0 ? '-' : '', $s->bstr, $frac->numify);
}

# A nanosecond count whose rounding to microseconds is not a tie: a tie
# rounds to even in one place and away from zero in another.
sub no_tie
{
	my ($ns) = @_;
	$ns += 1 if $ns->copy->babs % 1000 == 500;
	return $ns;
}

sub b64 { return encode_base64($_[0], '') }

# The JSON documents a Json column carries, as text: escapes and non-ASCII
# characters in the document itself, scalars, odd spacing (kept by json).
my @docs = (
	sub { sprintf('{"a": %d, "b": [true, false, null], "c": {"d": "e"}}', rand(1000)) },
	sub { sprintf('[1, 2.5, "x\\"y", {"k": %d}]', rand(1000)) },
	sub { sprintf("{\"city\": \"s\x{e3}o paulo\", \"n\": %d}", rand(100)) },
	sub { '{"esc": "\\u00e9\\n\\t", "slash": "a\\/b"}' },
	sub { sprintf('%d', rand(1e6)) },
	sub { '"just a string"' },
	sub { sprintf('{ "spaced" :  [ %d ,2 ] }', rand(10)) },
	sub { '{}' },
	sub { 'null' },
);
sub rand_doc { return pick(@docs)->() }

# A document that is no JSON null (which, unwrapped, is an SQL NULL).
sub rand_object
{
	my $doc;
	do { $doc = rand_doc() } while $doc eq 'null';
	return $doc;
}

sub rand_bytes
{
	my $len = rand() < 0.1 ? 0 : 1 + int(rand(24));
	return join('', map { chr(pick(0, 255, int(rand(256)))) } 1 .. $len);
}

# Plain values, for events without the wrapper: the ISO texts and numbers
# a column's input function reads as it always has.
sub rand_date { return sprintf('%04d-%02d-%02d', 1900 + int(rand(200)), 1 + int(rand(12)), 1 + int(rand(28))) }
sub rand_clock { return sprintf('%02d:%02d:%02d.%06d', rand(24), rand(60), rand(60), rand(1e6)) }
sub rand_zoned { return rand_date() . pick(' ', 'T') . rand_clock() . pick('+00', 'Z', '-03:00', '+05:30') }
sub rand_text { return pick('plain', "it's \"quoted\"", "s\x{e3}o paulo", 'AAEC', '', 'x' x int(rand(40))) }

# ==== the columns ===============================================================

use constant {
	CONNECT_TS   => 'org.apache.kafka.connect.data.Timestamp',
	DBZ_TS       => 'io.debezium.time.Timestamp',
	MICRO_TS     => 'io.debezium.time.MicroTimestamp',
	NANO_TS      => 'io.debezium.time.NanoTimestamp',
	CONNECT_DATE => 'org.apache.kafka.connect.data.Date',
	DBZ_DATE     => 'io.debezium.time.Date',
	CONNECT_TIME => 'org.apache.kafka.connect.data.Time',
	DBZ_TIME     => 'io.debezium.time.Time',
	MICRO_TIME   => 'io.debezium.time.MicroTime',
	NANO_TIME    => 'io.debezium.time.NanoTime',
	DURATION     => 'io.debezium.time.MicroDuration',
	DECIMAL      => 'org.apache.kafka.connect.data.Decimal',
	VSD          => 'io.debezium.data.VariableScaleDecimal',
	DBZ_JSON     => 'io.debezium.data.Json',
};

my $EPOCH = q{'1970-01-01 00:00:00+00'::timestamptz};

# What Debezium's PostgreSQL connector writes for a timestamp 'infinity'
# and '-infinity', in every unit; any other integer is an instant.
my $INF = Math::BigInt->new('9223372036825200000');
my $MINUS_INF = Math::BigInt->new('-9223372036832400000');
sub infinite { my ($v) = @_; return ref $v eq 'Math::BigInt' && ($v == $INF || $v == $MINUS_INF) }

# A column's schema entry but "field": Debezium's members in its order.
sub logical
{
	my ($type, $name, @more) = @_;
	return (type => $type, optional => $T, defined $name ? (name => $name, version => num(1)) : (), @more);
}

# Each column: name, type (as declared), base (its base type), gen (a raw
# value for an event in the wrapper), schema (the entry's members for a raw
# value or undef; no entry when absent), payload (the raw value as JSON),
# want (the expected value in SQL, from the raw value alone).  Events
# without the wrapper take their values from %plain, by base type.
# want_type and got (set below) say how the two tables are compared:
# numeric and json as their text, so that 12.50 is not 12.5 and a json
# keeps its document as written.
my @cols;

# An instant in unit (ms, us, ns) since the epoch, into timestamp or
# timestamptz: as a timestamptz the instant, as a timestamp its wall clock
# in UTC, whatever the session's TimeZone; Debezium's infinities (under
# Debezium's name, in milliseconds) are 'infinity' and '-infinity'.
sub ts_col
{
	my ($name, $type, $unit, %o) = @_;
	my %scale = (ms => 1, us => 1000, ns => 1_000_000);
	my @names = $unit eq 'ms' ? (CONNECT_TS, DBZ_TS) : $unit eq 'us' ? (MICRO_TS) : (NANO_TS);
	my @specials = map { Math::BigInt->new($_) * $scale{$unit} }
	  (0, -1, 1, 999, -1000, '-2208988800000', '946684800000', '4102444799999');
	my ($lo, $hi) = map { Math::BigInt->new($_) * $scale{$unit} } ('-2208988800000', '4102444800000');
	my $base = $o{base} // $type;
	return {
		name => $name, type => $type, base => $base,
		gen => sub {
			my $v = rand() < 0.15 ? pick(@specials)->copy : rand_big($lo, $hi);
			$v += pick(0, 1, -1, 123, 456_789) if $unit eq 'ns' && rand() < 0.5;
			return $unit eq 'ns' ? no_tie($v) : $v;
		},
		schema  => sub { logical('int64', infinite($_[0]) ? $names[-1] : pick(@names)) },
		payload => sub { num($_[0]) },
		want    => $o{want} // sub {
			return "'infinity'::$base" if infinite($_[0]) && $_[0] > 0;
			return "'-infinity'::$base" if infinite($_[0]);
			my $at = $unit eq 'ns'
			  ? "$EPOCH + interval '" . ns_seconds($_[0]) . " seconds'"
			  : "$EPOCH + interval '$_[0] " . ($unit eq 'ms' ? 'milliseconds' : 'microseconds') . "'";
			return $base eq 'timestamp' ? "($at) AT TIME ZONE 'UTC'" : $at;
		},
	};
}

# Days since 1970-01-01 into date, timestamp or timestamptz (midnight UTC).
sub date_col
{
	my ($name, $type) = @_;
	return {
		name => $name, type => $type, base => $type,
		gen => sub {
			return Math::BigInt->new(rand() < 0.15 ? pick(0, -1, 1, -719162, 2932896) : -25567 + int(rand(73050)));
		},
		schema  => sub { logical('int32', pick(CONNECT_DATE, DBZ_DATE)) },
		payload => sub { num($_[0]) },
		want    => sub {
			my $day = "('1970-01-01'::date + $_[0])";
			return $type eq 'date' ? $day
			  : $type eq 'timestamp' ? "${day}::timestamp"
			  : "${day}::timestamp AT TIME ZONE 'UTC'";
		},
	};
}

# Units since midnight into time.
sub time_col
{
	my ($name, $unit) = @_;
	my %max = (ms => '86399999', us => '86399999999', ns => '86399999999000');
	return {
		name => $name, type => 'time', base => 'time',
		gen => sub {
			my $v = rand() < 0.15 ? Math::BigInt->new(pick(0, $max{$unit})) : rand_big(0, $max{$unit});
			return $unit eq 'ns' ? no_tie($v) : $v;
		},
		schema => sub {
			$unit eq 'ms' ? logical('int32', pick(CONNECT_TIME, DBZ_TIME))
			  : logical('int64', $unit eq 'us' ? MICRO_TIME : NANO_TIME);
		},
		payload => sub { num($_[0]) },
		want    => sub {
			return "'00:00'::time + interval '"
			  . ($unit eq 'ns' ? ns_seconds($_[0]) . ' seconds'
				: $unit eq 'ms' ? "$_[0] milliseconds" : "$_[0] microseconds")
			  . "'";
		},
	};
}

# A Decimal: raw {n, scale, bytes}, n of minb to maxb bytes (or one of the
# specials), its scale from scales, its bytes sign-extended at times.  as:
# 'text' (numeric, compared as text), 'cast' (an integer or float column:
# the decimal's text cast to it), 'base64' (a column the Decimal does not
# convert: the string as it is).
sub decimal_col
{
	my ($name, $type, %o) = @_;
	my $base = $o{base} // $type;
	my @scales = @{ $o{scales} // [0] };
	my @specials = @{ $o{specials} // [] };
	return {
		name => $name, type => $type, base => $base,
		gen => sub {
			my $n = @specials && rand() < 0.2
			  ? Math::BigInt->new(pick(@specials)) : rand_unscaled(@{ $o{bytes} });
			my $pad = rand() < 0.15 ? 1 + int(rand(2)) : 0;
			return { n => $n, scale => pick(@scales), bytes => twos_complement($n, $pad) };
		},
		schema => sub {
			my $scale = defined $_[0] ? $_[0]{scale} : $scales[0];
			return logical('bytes', DECIMAL,
				parameters => obj(scale => "$scale", rand() < 0.7 ? ('connect.decimal.precision' => '38') : ()));
		},
		payload => sub { b64($_[0]{bytes}) },
		want    => sub {
			my $text = decimal_text($_[0]{n}, $_[0]{scale});
			return $o{as} eq 'text' ? lit($text)
			  : $o{as} eq 'cast' ? lit($text) . "::$base"
			  : lit(b64($_[0]{bytes}));
		},
	};
}

# A VariableScaleDecimal: {"scale": s, "value": base64}.
sub vsd_col
{
	my ($name, $type, %o) = @_;
	return {
		name => $name, type => $type, base => $type,
		gen => sub {
			my $n = rand_unscaled(@{ $o{bytes} });
			return { n => $n, scale => int(rand($o{max_scale} + 1)),
				bytes => twos_complement($n, rand() < 0.15 ? 1 : 0) };
		},
		schema => sub {
			return (type => 'struct',
				fields => [ obj(type => 'int32', optional => $F, field => 'scale'),
					obj(type => 'bytes', optional => $F, field => 'value') ],
				optional => $T, name => VSD, version => num(1));
		},
		payload => sub { obj(scale => num($_[0]{scale}), value => b64($_[0]{bytes})) },
		want    => sub {
			my $text = decimal_text($_[0]{n}, $_[0]{scale});
			return $type eq 'numeric' ? lit($text) : lit($text) . "::$type";
		},
	};
}

# A Json string: raw {doc, named}; without its name (unnamed => share of
# rows) the string stays a string.  as: 'jsonb', 'json' (compared as text:
# the document as written), 'text' (not converted: the string).
sub json_col
{
	my ($name, $type, %o) = @_;
	return {
		name => $name, type => $type, base => $type,
		gen => sub { return { doc => rand_doc(), named => rand() >= ($o{unnamed} // 0) } },
		schema => sub { logical('string', !defined $_[0] || $_[0]{named} ? DBZ_JSON : undef) },
		payload => sub { $_[0]{doc} },
		want    => sub {
			my ($v) = @_;
			return "to_jsonb(" . lit($v->{doc}) . "::text)" if !$v->{named};
			return $type eq 'jsonb' ? lit($v->{doc}) . '::jsonb' : lit($v->{doc});
		},
	};
}

# Bytes without a name: base64, into bytea decoded, into text as it is.
sub bytes_col
{
	my ($name, $type) = @_;
	return {
		name => $name, type => $type, base => $type,
		gen     => \&rand_bytes,
		schema  => sub { logical('bytes', undef) },
		payload => sub { b64($_[0]) },
		want    => sub {
			return $type eq 'bytea' ? "decode('" . unpack('H*', $_[0]) . "', 'hex')" : lit(b64($_[0]));
		},
	};
}

my $int64 = [ '-9223372036854775808', '9223372036854775807' ];
@cols = (
	ts_col('ts', 'timestamp', 'us'),
	ts_col('tsz', 'timestamptz', 'us'),
	ts_col('ms_tsz', 'timestamptz', 'ms'),
	ts_col('ms_ts', 'timestamp', 'ms'),
	ts_col('ns_tsz', 'timestamptz', 'ns'),
	ts_col('ns_ts', 'timestamp', 'ns'),
	ts_col('inst', 'instant', 'us', base => 'timestamptz'),
	date_col('d', 'date'),
	date_col('d_ts', 'timestamp'),
	date_col('d_tsz', 'timestamptz'),
	time_col('t_ms', 'ms'),
	time_col('t_us', 'us'),
	time_col('t_ns', 'ns'),
	{
		name => 'dur', type => 'interval', base => 'interval',
		gen => sub {
			return Math::BigInt->new(pick(0, 1, -1, '86400000000', '-2629800000000'))
			  if rand() < 0.15;
			return rand_big('-3155760000000000', '3155760000000000');
		},
		schema  => sub { logical('int64', DURATION) },
		payload => sub { num($_[0]) },
		want    => sub { "interval '$_[0] microseconds'" },
	},
	decimal_col('price', 'numeric', as => 'text', bytes => [ 1, 9 ], scales => [ 2, 0, 1, 3, 4, 5, 6 ],
		specials => [ 0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769,
			'9223372036854775807', '-9223372036854775808', '9223372036854775808', '-9223372036854775809' ]),
	decimal_col('big', 'numeric', as => 'text', bytes => [ 9, 20 ], scales => [ 0, 1, 2, 4 ],
		specials => [ '18446744073709551616', '-18446744073709551616', '1' . '0' x 30, '-' . '9' x 38 ]),
	decimal_col('amt', 'amount', base => 'numeric', as => 'text', bytes => [ 1, 6 ], scales => [ 2, 3 ]),
	decimal_col('qty', 'integer', as => 'cast', bytes => [ 1, 4 ], specials => [ 0, -1, 2147483647, -2147483648 ]),
	decimal_col('qty_s', 'smallint', as => 'cast', bytes => [ 1, 2 ], specials => [ 0, 255, 32767, -32768 ]),
	decimal_col('qty_b', 'bigint', as => 'cast', bytes => [ 1, 8 ],
		specials => [ '9223372036854775807', '-9223372036854775808' ]),
	decimal_col('f8', 'double precision', as => 'cast', bytes => [ 1, 7 ], scales => [ 0, 2, 3, 6 ]),
	decimal_col('f4', 'real', as => 'cast', bytes => [ 1, 4 ], scales => [ 0, 1, 2, 4 ]),
	vsd_col('vsd', 'numeric', bytes => [ 1, 12 ], max_scale => 12),
	vsd_col('vsd_f8', 'double precision', bytes => [ 1, 6 ], max_scale => 6),
	json_col('doc', 'jsonb', unnamed => 0.15),
	json_col('doc_j', 'json'),
	bytes_col('raw', 'bytea'),

	# read as before: types the names do not convert, and fields the schema
	# does not describe or describes without a name
	ts_col('us_big', 'bigint', 'us', want => sub { "$_[0]" }),
	decimal_col('dec_txt', 'text', as => 'base64', bytes => [ 1, 4 ], scales => [ 2 ]),
	bytes_col('raw_txt', 'text'),
	{ %{ json_col('doc_txt', 'text') }, want => sub { lit($_[0]{doc}) } },
	{
		name => 'plain_ts', type => 'timestamptz', base => 'timestamptz',
		gen     => \&rand_zoned,
		payload => sub { $_[0] },
		want    => sub { lit($_[0]) . '::timestamptz' },
	},
	{
		name => 'n', type => 'bigint', base => 'bigint',
		gen     => sub { rand_big(@$int64) },
		schema  => sub { logical('int64', undef) },
		payload => sub { num($_[0]) },
		want    => sub { "$_[0]" },
	},
);

# Values of events without the wrapper, by base type: [JSON, expected SQL].
my %plain = (
	timestamp   => sub { my $s = rand_date() . ' ' . rand_clock(); [ $s, lit($s) . '::timestamp' ] },
	timestamptz => sub { my $s = rand_zoned(); [ $s, lit($s) . '::timestamptz' ] },
	date        => sub { my $s = rand_date(); [ $s, lit($s) . '::date' ] },
	time        => sub { my $s = rand_clock(); [ $s, lit($s) . '::time' ] },
	interval    => sub {
		my $s = sprintf('%d days %02d:%02d:%02d.%06d', rand(2000) - 1000, rand(24), rand(60), rand(60), rand(1e6));
		[ $s, lit($s) . '::interval' ];
	},
	numeric => sub {
		my $t = decimal_text(rand_unscaled(1, 10), int(rand(5)));
		[ num($t), lit($t) ];
	},
	integer => sub { my $i = int(rand(2e9)) - 1e9; [ num($i), $i ] },
	smallint => sub { my $i = int(rand(60000)) - 30000; [ num($i), $i ] },
	bigint  => sub { my $i = rand_big(@$int64); [ num($i), "$i" ] },
	'double precision' => sub { my $t = decimal_text(rand_unscaled(1, 6), int(rand(5))); [ num($t), lit($t) . '::float8' ] },
	real    => sub { my $t = decimal_text(rand_unscaled(1, 3), int(rand(3))); [ num($t), lit($t) . '::real' ] },
	jsonb   => sub {
		my $doc = rand_object();
		# a document is itself; a string, even one holding JSON, is a JSON
		# string
		return rand() < 0.5 ? [ num($doc), lit($doc) . '::jsonb' ] : [ $doc, 'to_jsonb(' . lit($doc) . '::text)' ];
	},
	json  => sub { my $doc = rand_object(); [ num($doc), lit($doc) ] },
	bytea => sub { my $h = unpack('H*', rand_bytes()); [ "\\x$h", "decode('$h', 'hex')" ] },
	text  => sub { my $s = rand_text(); [ $s, lit($s) ] },
);

for my $c (@cols)
{
	my $compared_as_text = $c->{base} eq 'numeric' || $c->{base} eq 'json';
	$c->{want_type} = $compared_as_text ? 'text' : $c->{base};
	$c->{got} = $compared_as_text ? "$c->{name}::text" : $c->{type} ne $c->{base} ? "$c->{name}::$c->{base}" : $c->{name};
}

# ==== events ====================================================================

my (@msgs, @want_rows, @dead);    # messages [0, key, value]; expected rows as SQL; dead letters
my $version = 0;

# A new version of row id: raw values (kind 'wrapped') or plain values
# ([JSON, SQL], kind 'plain'), about 6% of them null.  fixed: raw values
# given.
sub new_row
{
	my ($id, $kind, %fixed) = @_;
	my %row = (id => $id, v => ++$version, kind => $kind);
	for my $c (@cols)
	{
		$row{ $c->{name} } = exists $fixed{ $c->{name} } ? $fixed{ $c->{name} }
		  : rand() < 0.06 ? undef
		  : $kind eq 'plain' ? $plain{ $c->{base} }->()
		  : $c->{gen}->();
	}
	return \%row;
}

# The expected change row of a row, as an SQL row constructor.
sub want_row
{
	my ($row, $change) = @_;
	my @v = ($row->{id}, $row->{v});
	for my $c (@cols)
	{
		my $x = $row->{ $c->{name} };
		push @v, !defined $x ? 'NULL' : $row->{kind} eq 'plain' ? $x->[1] : $c->{want}->($x);
	}
	return '(' . join(', ', @v, $change) . ')';
}

# A row image: its schema's fields (wrapped rows) and its payload.  bad:
# column => JSON (a num) that replaces the column's value, and its schema
# entry's members when given.
sub image
{
	my ($row, $bad) = @_;
	$bad //= {};
	my @schema = (obj(type => 'int32', optional => $F, field => 'id'),
		obj(type => 'int32', optional => $T, field => 'v'));
	my @payload = (id => num($row->{id}), v => num($row->{v}));
	for my $c (@cols)
	{
		my $x = $row->{ $c->{name} };
		my $broken = $bad->{ $c->{name} };
		my $plain = $row->{kind} eq 'plain';
		push @schema, obj($broken && $broken->[1] ? @{ $broken->[1] } : $c->{schema}->($x), field => $c->{name})
		  if $c->{schema} && !$plain;
		push @payload, $c->{name} => $broken ? $broken->[0]
		  : !defined $x ? undef
		  : $plain ? $x->[0]
		  : $c->{payload}->($x);
	}
	return (\@schema, obj(@payload));
}

sub value_struct
{
	my ($field, $fields) = @_;
	return obj(type => 'struct', fields => $fields, optional => $T, name => 'shop.public.orders.Value', field => $field);
}

# The rest of a Debezium envelope's schema: its "source" (with a field named
# "schema") and "transaction" (with one named "id", as the table has).
my $source_schema = obj(type => 'struct', fields => [
		obj(type => 'string', optional => $F, field => 'version'),
		obj(type => 'string', optional => $F, field => 'connector'),
		obj(type => 'string', optional => $F, field => 'name'),
		obj(type => 'int64', optional => $F, field => 'ts_ms'),
		obj(type => 'string', optional => $T, name => 'io.debezium.data.Enum', version => num(1),
			parameters => obj(allowed => 'true,last,false,incremental'), default => 'false', field => 'snapshot'),
		obj(type => 'string', optional => $F, field => 'db'),
		obj(type => 'string', optional => $T, field => 'sequence'),
		obj(type => 'string', optional => $F, field => 'schema'),
		obj(type => 'string', optional => $F, field => 'table'),
		obj(type => 'int64', optional => $T, field => 'txId'),
		obj(type => 'int64', optional => $T, field => 'lsn'),
		obj(type => 'int64', optional => $T, field => 'xmin') ],
	optional => $F, name => 'io.debezium.connector.postgresql.Source', field => 'source');
my $transaction_schema = obj(type => 'struct', fields => [
		obj(type => 'string', optional => $F, field => 'id'),
		obj(type => 'int64', optional => $F, field => 'total_order'),
		obj(type => 'int64', optional => $F, field => 'data_collection_order') ],
	optional => $T, name => 'event.block', version => num(1), field => 'transaction');

# One event message: op on rows before and after (undef: null), in the
# wrapper when its rows are wrapped ones.  Expected rows (before -1, after
# +1) unless it is a dead letter (dead: the reason's regex); bad_before,
# bad_after: malformed values (see image).  Returns its offset.
sub event
{
	my ($op, $before, $after, %o) = @_;
	my $id = ($after // $before)->{id};
	my $wrapped = ($after // $before)->{kind} eq 'wrapped';
	my ($bs, $bp) = $before ? image($before, $o{bad_before}) : ();
	my ($as, $ap) = $after ? image($after, $o{bad_after}) : ();
	my $ts_ms = 1_700_000_000_000 + 1000 * @msgs;
	my $payload = obj(
		before => $bp, after => $ap,
		source => obj(version => '2.5.4.Final', connector => 'postgresql', name => 'shop', ts_ms => num($ts_ms),
			snapshot => $op eq 'r' ? 'true' : 'false', db => 'shop', sequence => '["24023928","24023992"]',
			schema => 'public', table => 'orders', txId => num(780 + @msgs), lsn => num(24023992 + 64 * @msgs),
			xmin => undef),
		op => $op, ts_ms => num($ts_ms + 7), transaction => undef);
	my ($key, $value);
	if ($wrapped)
	{
		# the image that is null has the Value schema of the other, as
		# Debezium writes one for both; each image is read by its own
		my @images = (value_struct('before', $bs // $as), value_struct('after', $as // $bs));
		@images = reverse @images if rand() < 0.1;    # found by "field", not by place
		my $schema = obj(type => 'struct',
			fields => [ @images, $source_schema, obj(type => 'string', optional => $F, field => 'op'),
				obj(type => 'int64', optional => $T, field => 'ts_ms'), $transaction_schema ],
			optional => $F, name => 'shop.public.orders.Envelope', version => num(1));
		$value = json_text(obj(schema => $schema, payload => $payload));
		$key = json_text(obj(schema => obj(type => 'struct', fields => [ obj(type => 'int32', optional => $F, field => 'id') ],
					optional => $F, name => 'shop.public.orders.Key'), payload => obj(id => num($id))));
	}
	else
	{
		$value = json_text($payload);
		$key = qq({"id": $id});
	}
	utf8::upgrade($value);    # its characters go out as UTF-8
	push @msgs, [ 0, $key, $value ];
	my $offset = $#msgs;
	if ($o{dead})
	{
		push @dead, [ 0, $offset, $o{dead} ];
	}
	else
	{
		push @want_rows, want_row($before, -1) if $before;
		push @want_rows, want_row($after, 1) if $after;
	}
	push @msgs, [ 0, $key, undef ] if $op eq 'd' && !$o{dead};    # the tombstone after a delete
	return $offset;
}

my %live;         # id => its row
my $next_id = 1;

# A change to the table: a new row (c), a new version of a row (u: its
# "before" the row as it was), a delete (d: "before" the row); a fifth of
# the ids are written without the wrapper, each row keeping its kind.
sub change
{
	my ($op) = @_;
	my @ids = sort { $a <=> $b } keys %live;
	$op = 'c' if $op ne 'r' && !@ids;
	if ($op eq 'c' || $op eq 'r')
	{
		my $id = $next_id++;
		$live{$id} = new_row($id, rand() < 0.2 ? 'plain' : 'wrapped');
		event($op, undef, $live{$id});
		return;
	}
	my $id = pick(@ids);
	my $old = $live{$id};
	if ($op eq 'd')
	{
		delete $live{$id};
		event('d', $old, undef);
		return;
	}
	$live{$id} = new_row($id, $old->{kind});
	event('u', $old, $live{$id});
	return;
}

# Malformed values: [column, its JSON, its schema entry's members when not
# the column's own, a regex of the dead letter's reason].
my $LONG_NOT_BASE64 = 'x' . "\x{e9}" x 40;
sub decimal_entry
{
	my ($scale) = @_;
	return [ logical('bytes', DECIMAL, parameters => obj(scale => "$scale")) ];
}
my @malformed = (
	[ 'tsz',    num('"2024-01-01T00:00:00Z"'), undef, qr/io\.debezium\.time\.MicroTimestamp needs an integer/ ],
	[ 'tsz',    num('1.5'),                    undef, qr/io\.debezium\.time\.MicroTimestamp needs an integer/ ],
	[ 'ts',     num('99999999999999999999'),  undef, qr/out of range|needs an integer/ ],
	[ 'ns_tsz', num('true'),                   undef, qr/io\.debezium\.time\.NanoTimestamp needs an integer/ ],
	[ 'd',      num('"2024-01-01"'),           undef, qr/Date needs an integer/ ],
	[ 't_us',   num('[1]'),                    undef, qr/io\.debezium\.time\.MicroTime needs an integer/ ],
	[ 'dur',    num('{"us": 1}'),              undef, qr/io\.debezium\.time\.MicroDuration needs an integer/ ],
	[ 'price',  num('12.5'),                   undef, qr/Decimal needs/ ],
	[ 'price',  num('"not base64!"'),          undef, qr/base64/ ],
	[ 'big',    num('"QUJD*"'),                undef, qr/base64/ ],
	[ 'raw',    num('"%%%%"'),                 undef, qr/base64/ ],
	[ 'vsd',    num('{"value": "AQ=="}'),      undef, qr/VariableScaleDecimal needs an integer "scale"/ ],
	[ 'vsd',    num('{}'),                     undef, qr/VariableScaleDecimal needs an integer "scale"/ ],
	[ 'vsd',    num('{"scale": "2", "value": "AQ=="}'), undef, qr/VariableScaleDecimal/ ],
	[ 'vsd',    num('{"scale": 2, "value": 1}'), undef, qr/VariableScaleDecimal/ ],
	[ 'vsd_f8', num('"AQ=="'),                 undef, qr/VariableScaleDecimal/ ],
	[ 'qty',    b64(twos_complement(Math::BigInt->new(1250))), decimal_entry(2),
		qr/invalid input syntax for type integer/ ],
	[ 'qty_s',  b64(twos_complement(Math::BigInt->new(40000))), decimal_entry(0),
		qr/out of range for type smallint/ ],
	[ 'doc',    '{oops',                       [ logical('string', DBZ_JSON) ], qr/invalid input syntax for type json/ ],
	[ 'doc',    num('{"a": 1}'),               [ logical('string', DBZ_JSON) ], qr/io\.debezium\.data\.Json needs/ ],
	# next to Debezium's infinities, instants PostgreSQL has no timestamp
	# for (before 4714 BC, after 294276 AD), and -infinity, which the
	# domain instant refuses
	[ 'ts',     num($MINUS_INF - 1),           undef, qr/out of range/ ],
	[ 'tsz',    num($MINUS_INF - 1),           undef, qr/out of range/ ],
	[ 'tsz',    num($MINUS_INF + 1),           undef, qr/out of range/ ],
	[ 'ms_tsz', num($INF - 1),                 [ logical('int64', DBZ_TS) ], qr/out of range/ ],
	[ 'ms_ts',  num($MINUS_INF - 1),           [ logical('int64', DBZ_TS) ], qr/out of range/ ],
	[ 'inst',   num($MINUS_INF),               undef, qr/domain instant|instant_check/ ],
	# the int64 extremes as days: no date, not some date of 1969
	[ 'd',      num('9223372036854775807'),    [ logical('int32', DBZ_DATE) ], qr/out of range for a date/ ],
	[ 'd',      num('-9223372036854775808'),   [ logical('int32', DBZ_DATE) ], qr/out of range for a date/ ],
	[ 'd_tsz',  num('-9223372036854775808'),   [ logical('int32', DBZ_DATE) ], qr/out of range for a date/ ],
	# long non-ASCII text for base64: its error quotes whole characters
	[ 'price',  $LONG_NOT_BASE64,              undef, qr/Decimal needs base64 text/ ],
);

# A malformed event, one value of it m: in the "after" of a create or an
# update, or in the "before" of a delete.  Its row is none of the table's
# (ids from 900,000): a dead letter adds and retracts nothing.
sub malformed
{
	my ($m, $where) = @_;
	my ($col, $value, $entry, $re) = @$m;
	my $row = new_row(900_000 + @msgs, 'wrapped');
	my $bad = { $col => [ $value, $entry ] };
	if ($where eq 'before')
	{
		event('d', $row, undef, bad_before => $bad, dead => $re);
	}
	elsif ($where eq 'after')
	{
		event('u', $row, new_row($row->{id}, 'wrapped'), bad_after => $bad, dead => $re);
	}
	else
	{
		event('c', undef, $row, bad_after => $bad, dead => $re);
	}
	return;
}

# Events without the wrapper are read as before: an integer is no
# timestamptz nor date there.
sub unwrapped_integers
{
	my $row = new_row(900_000 + @msgs, 'plain');
	event('c', undef, $row, bad_after => { tsz => [ num('1700000000000000') ] },
		dead => qr/date\/time field value out of range: "1700000000000000"|invalid input syntax for type timestamp with time zone/);
	$row = new_row(900_000 + @msgs, 'plain');
	event('c', undef, $row, bad_after => { d => [ num('19723') ] }, dead => qr/invalid input syntax for type date/);
	return;
}

sub chunk
{
	my ($n) = @_;
	for (1 .. $n)
	{
		my $r = rand();
		if ($r < 0.07)
		{
			malformed(pick(@malformed), pick('c', 'c', 'after', 'before'));
		}
		else
		{
			change($r < 0.45 ? 'c' : $r < 0.85 ? 'u' : 'd');
		}
	}
	return;
}

# ==== 1-3. the conversions, in two time zones ===================================

my $names = join(', ', 'id', 'v', map { $_->{name} } @cols);
my $coldefs = join(', ', 'id int', 'v int', map { "$_->{name} $_->{type}" } @cols);
psql_ok($node, qq{
CREATE DOMAIN instant AS timestamptz CHECK (VALUE > '-infinity');
CREATE DOMAIN amount AS numeric CHECK (VALUE > -1e40);
SELECT streamwin.create_kafka_source('dbt', '$brokers', 'dbt', '$coldefs',
    options => '{"envelope": "debezium"}');
SELECT streamwin.create_query('q_utc', 'SELECT $names, __streamwin_change FROM dbt', start => false);
SELECT streamwin.create_query('q_sp', 'SELECT $names, __streamwin_change FROM dbt', start => false);
}, 'a Debezium source of a column of each type and two transforms of its changes');

# The first row, with values whose text is known by hand: the test's own
# expressions are checked by it too.
my $first = new_row($next_id++, 'wrapped',
	ts     => Math::BigInt->new('1700000000123456'),
	tsz    => Math::BigInt->new('1700000000123456'),
	ms_tsz => Math::BigInt->new(-1),
	ns_tsz => Math::BigInt->new('-2208988800000000001'),
	d      => Math::BigInt->new(-1),
	d_tsz  => Math::BigInt->new(19723),
	t_us   => Math::BigInt->new('45296789012'),
	price  => { n => Math::BigInt->new(1250), scale => 2, bytes => "\x04\xe2" },
	big    => { n => Math::BigInt->new('18446744073709551616'), scale => 0, bytes => "\x01" . "\x00" x 8 },
	qty    => { n => Math::BigInt->new(255), scale => 0, bytes => "\x00\xff" },
	vsd    => { n => Math::BigInt->new(-5), scale => 3, bytes => "\xfb" },
	doc    => { doc => '{"a": [1, 2]}', named => 1 },
	raw    => "\x00\xff",
	us_big => Math::BigInt->new('1700000000123456'),
	dec_txt => { n => Math::BigInt->new(-1), scale => 2, bytes => "\xff" });
$live{ $first->{id} } = $first;
event('r', undef, $first);

# Rows of Debezium's infinities in every unit (into bigint the integer
# itself), and of the integers next to them, which are instants: in
# microseconds in year 294247 (the other side is out of range: in
# @malformed), in nanoseconds in 2262 and 1677.  Later changes update and
# delete them as any row.
my @inf_fixed = (
	{ map { ($_ => $INF) } qw(ts tsz ms_tsz ms_ts ns_tsz ns_ts inst us_big) },
	{ map { ($_ => $MINUS_INF) } qw(ts tsz ms_tsz ms_ts ns_tsz ns_ts us_big) },
	{ map { ($_ => $INF - 1) } qw(ts tsz ns_tsz ns_ts inst us_big) },
	{ (map { ($_ => $INF + 1) } qw(ts tsz inst)), ns_tsz => $MINUS_INF - 1, ns_ts => $MINUS_INF + 1,
		us_big => $MINUS_INF - 1 },
);
my @inf_rows = map { new_row($next_id++, 'wrapped', %$_) } @inf_fixed;
for my $row (@inf_rows)
{
	$live{ $row->{id} } = $row;
	event('r', undef, $row);
}
change('r') for 1 .. 9;    # the snapshot
chunk(100);
malformed($_, 'c') for @malformed;    # each kind at least once
malformed($malformed[0], 'before');
malformed($malformed[7], 'after');
unwrapped_integers();
$broker->produce('dbt', \@msgs, keys => 1);
my $sent = @msgs;

my $r = run_json($node, "run_batch('q_utc')");
cmp_ok($r->{input_rows}, '>', 0, 'a first batch');
is($node->safe_psql('postgres', q{
SELECT concat_ws('|', ts, tsz, ms_tsz, ns_tsz, d, d_tsz, t_us, price, big, qty, vsd, doc, raw, us_big, dec_txt)
  FROM q_utc WHERE id = 1 AND v = 1 AND __streamwin_change = 1}),
	'2023-11-14 22:13:20.123456|2023-11-14 22:13:20.123456+00|1969-12-31 23:59:59.999+00|1900-01-01 00:00:00+00'
	  . '|1969-12-31|2024-01-01 00:00:00+00|12:34:56.789012|12.50|18446744073709551616|255|-0.005'
	  . '|{"a": [1, 2]}|\\x00ff|1700000000123456|/w==',
	'the first row, by hand: micro-, milli- and nanoseconds before and after 1970, days, a time, decimals, '
	  . 'Json, bytes, a bigint and a text that keep what they got');
psql_ok($node, q{SET timezone = 'America/Sao_Paulo';
SELECT streamwin.run_batch('q_sp') IS NOT NULL}, 'a first batch of q_sp, under America/Sao_Paulo');

chunk(100);
unwrapped_integers();
$broker->produce('dbt', [ @msgs[ $sent .. $#msgs ] ], keys => 1);
run_json($node, "run_available('q_utc')");
psql_ok($node, q{SET timezone = 'America/Sao_Paulo';
SELECT streamwin.run_available('q_sp') IS NOT NULL}, 'q_sp reads the rest, under America/Sao_Paulo');
is($node->safe_psql('postgres', qq{
SELECT string_agg(concat_ws('|', ts, tsz, ms_tsz, ms_ts, ns_tsz, ns_ts, us_big), E'\\n' ORDER BY id)
  FROM q_utc
 WHERE (id, v) IN (($inf_rows[0]{id}, $inf_rows[0]{v}), ($inf_rows[1]{id}, $inf_rows[1]{v}))
   AND __streamwin_change = 1}),
	join('|', ('infinity') x 6, '9223372036825200000') . "\n"
	  . join('|', ('-infinity') x 6, '-9223372036832400000'),
	'Debezium\'s infinities, by hand: infinity and -infinity in milli-, micro- and nanoseconds, into timestamp '
	  . 'and timestamptz; a bigint keeps the integer');

my $want_cols = join(', ', 'id int', 'v int', map({ "$_->{name} $_->{want_type}" } @cols), 'change smallint');
psql_ok($node, "CREATE TABLE want ($want_cols);\nINSERT INTO want VALUES\n" . join(",\n", @want_rows),
	'the expected change rows, computed in SQL from the raw values');
my $got = join(', ', 'id', 'v', map({ $_->{got} } @cols), '__streamwin_change');
for my $q (qw(q_utc q_sp))
{
	my $zone = $q eq 'q_sp' ? 'run under America/Sao_Paulo' : 'run under UTC';
	is($node->safe_psql('postgres', "SELECT sum(input_rows) || '/' || sum(dead_letters) FROM streamwin.progress WHERE query = '$q'"),
		scalar(@msgs) . '/' . scalar(@dead), "$q ($zone): its batches read every message, the dead letters counted");
	results_match($node, "SELECT $got FROM $q", 'SELECT * FROM want',
		"$q ($zone): each event's rows, each value read by its schema entry; a retraction equals the row it retracts");
}

# ==== 4. dead letters ===========================================================

dead_letters_match($node, 'dbt', \@dead, 'malformed values are dead letters at their offsets that say why ('
	  . scalar(@dead) . ' of ' . scalar(@msgs) . ' messages)');

# ==== 5. rows in the wrapper: envelopes append and upsert =======================

# A row as Kafka Connect's JSON converter writes a value with schemas
# (Debezium's after its ExtractNewRecordState transform, a source
# connector's): no event around it, its schema the row's struct itself,
# one field per column, its payload the row.  The fields and values are
# image()'s, so each column's entry and expected value are those of the
# events above.
sub row_schema
{
	my ($fields) = @_;
	return obj(type => 'struct', fields => $fields, optional => $F, name => 'dbserver1.public.orders.Value');
}

# The value of a row: how 'wrapped' (the row's schema, its values raw),
# 'null_schema' ({"schema": null, "payload": ...}: no logical types, plain
# values) or 'bare' (plain values, no wrapper).  bad: as image()'s.  Half
# the wrapped rows have a field no column names (the transform's
# add.fields).  Returns the value's text, its schema and its payload.
sub row_value
{
	my ($row, $how, $bad) = @_;
	my ($fields, $payload) = image($row, $bad);
	if ($how eq 'wrapped' && rand() < 0.5)
	{
		push @$fields, obj(type => 'string', optional => $T, field => '__deleted');
		push @$payload, __deleted => 'false';
	}
	my $schema = $how eq 'wrapped' ? row_schema($fields) : undef;
	my $value = json_text($how eq 'bare' ? $payload : obj(schema => $schema, payload => $payload));
	utf8::upgrade($value);    # its characters go out as UTF-8
	return ($value, $schema, $payload);
}

sub new_row_for { my ($id, $how) = @_; return new_row($id, $how eq 'wrapped' ? 'wrapped' : 'plain') }

# A row's values in SQL, in the order id, v, @cols, as want_row has them.
# A row of kind 'none' (a message read as it is, not as a wrapper's row)
# is NULL but for the integers it names.
my @row_names = ('id', 'v', map { $_->{name} } @cols);
sub row_sql
{
	my ($row) = @_;
	return map { $row->{$_} // 'NULL' } @row_names if $row->{kind} eq 'none';
	my @v = ($row->{id}, $row->{v});
	for my $c (@cols)
	{
		my $x = $row->{ $c->{name} };
		push @v, !defined $x ? 'NULL' : $row->{kind} eq 'plain' ? $x->[1] : $c->{want}->($x);
	}
	return @v;
}

my $want_cols5 = join(', ', 'id int', 'v int', map { "$_->{name} $_->{want_type}" } @cols);
my $got5 = join(', ', 'id', 'v', map { $_->{got} } @cols);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbt_rows', '$brokers', 'dbt_rows', '$coldefs, part int, off bigint',
    options => '{"metadata": {"part": "partition", "off": "offset"}}');
SELECT streamwin.create_query('q_rows', 'SELECT $names, part, off FROM dbt_rows', start => false);
SELECT streamwin.create_kafka_source('dbt_ups', '$brokers', 'dbt_ups', '$coldefs',
    options => '{"envelope": "upsert", "key_columns": ["id"]}');
SELECT streamwin.create_query('q_ups', 'SELECT $names FROM dbt_ups', start => false);
SELECT streamwin.create_kafka_source('dbt_pay', '$brokers', 'dbt_pay', 'id int, v int, tsz timestamptz, payload jsonb');
SELECT streamwin.create_query('q_pay', 'SELECT id, v, tsz, payload FROM dbt_pay', start => false);
SELECT streamwin.create_kafka_source('dbt_sch', '$brokers', 'dbt_sch', 'id int, v int, tsz timestamptz, schema jsonb');
SELECT streamwin.create_query('q_sch', 'SELECT id, v, tsz, schema FROM dbt_sch', start => false);
}, 'sources of rows in the wrapper: append (with metadata columns) and upsert, and two with a column '
	  . '"payload" or "schema", each with a transform');

# ---- append -------------------------------------------------------------------

my (@row_msgs, @row_want, @row_dead, %row_missing, @null_offsets);
my $row_id = 0;

# A message of the append source: the row it is read as (row), or a dead
# letter (dead: the reason's regex); missing: the columns whose key it
# lacks.  Returns its offset.
sub append_message
{
	my ($value, %o) = @_;
	utf8::upgrade($value);
	push @row_msgs, [ 0, $value ];
	my $off = $#row_msgs;
	if ($o{dead})
	{
		push @row_dead, [ 0, $off, $o{dead} ];
		return $off;
	}
	push @row_want, '(' . join(', ', row_sql($o{row}), 0, $off) . ')';
	$row_missing{$_}++ for @{ $o{missing} // [] };
	return $off;
}

# A new row, its value written how (see row_value).
sub append_row
{
	my ($how, %o) = @_;
	my $row = new_row_for(++$row_id, $how);
	my ($value) = row_value($row, $how, $o{bad});
	append_message($value, row => $row, dead => $o{dead});
	return;
}

# A wrapped row of the raw values fixed (and others random).
sub append_fixed
{
	my (%fixed) = @_;
	my $row = new_row(++$row_id, 'wrapped', %fixed);
	my ($value) = row_value($row, 'wrapped');
	append_message($value, row => $row);
	return;
}

# A message read as it is, not as a wrapper's row: the JSON members of its
# top level, which name the columns of named (integers) and no others.
sub append_as_is
{
	my ($members, %named) = @_;
	my $off = append_message(json_text(obj(@$members)), row => { kind => 'none', %named },
		missing => [ grep { !exists $named{$_} } @row_names ]);
	push @null_offsets, $off unless %named;
	return;
}

# A wrapped row's schema and payload, for the messages read as they are.
sub some_wrapped
{
	my (undef, $schema, $payload) = row_value(new_row(0, 'wrapped'), 'wrapped');
	return ($schema, $payload);
}

my @plan = (
	(sub { append_row('wrapped') }) x 70,
	(sub { append_row('bare') }) x 12,
	(sub { append_row('null_schema') }) x 12,
	# Debezium's infinities, and the integers next to them
	(map { my $f = $_; sub { append_fixed(%$f) } } @inf_fixed),
	# malformed values of wrapped rows
	(map {
		my ($col, $value, $entry, $re) = @$_;
		sub { append_row('wrapped', bad => { $col => [ $value, $entry ] }, dead => $re) }
	} @malformed),
	# without a schema nothing is converted: an integer is no timestamptz,
	# a base64 string no numeric, with the wrapper or without
	sub {
		append_row('null_schema', bad => { tsz => [ num('1700000000000000') ] },
			dead => qr/date\/time field value out of range: "1700000000000000"|invalid input syntax for type timestamp with time zone/);
	},
	sub { append_row('null_schema', bad => { price => [ 'BOI=' ] }, dead => qr/invalid input syntax for type numeric/) },
	sub { append_row('bare', bad => { d => [ num('19723') ] }, dead => qr/invalid input syntax for type date/) },
	# a wrapper whose payload is no object, and a message of no column:
	# rows of NULLs
	sub { my ($s) = some_wrapped(); append_as_is([ schema => $s, payload => num(5) ]) },
	sub { my ($s, $p) = some_wrapped(); append_as_is([ schema => $s, payload => [$p] ]) },
	sub { append_as_is([ other => num(1) ]) },
	# the wrapper of a null payload, which an upsert reads as a tombstone,
	# is a row of NULLs here too
	sub { my ($s) = some_wrapped(); append_as_is([ schema => $s, payload => undef ]) },
	# a top level that names a column (the second one, the last one) is the row
	sub { my ($s, $p) = some_wrapped(); append_as_is([ schema => $s, payload => $p, v => num(424242) ], v => 424242) },
	sub {
		my ($s, $p) = some_wrapped();
		append_as_is([ $cols[-1]{name} => num('-4611686018427387904'), schema => $s, payload => $p ],
			$cols[-1]{name} => '-4611686018427387904');
	},
);
$_->() for shuffle(@plan);
$broker->produce('dbt_rows', \@row_msgs);
run_json($node, "run_available('q_rows')");

is($node->safe_psql('postgres', "SELECT sum(input_rows) || '/' || sum(dead_letters) FROM streamwin.progress WHERE query = 'q_rows'"),
	scalar(@row_msgs) . '/' . scalar(@row_dead), 'append: its batches read every message, the dead letters counted');
psql_ok($node, "CREATE TABLE want_rows ($want_cols5, part int, off bigint);\nINSERT INTO want_rows VALUES\n"
	  . join(",\n", @row_want),
	'append: the expected rows, computed in SQL from the raw values');
results_match($node, "SELECT $got5, part, off FROM q_rows", 'SELECT * FROM want_rows',
	'append: a wrapped row is its payload, each value read by its field\'s schema; rows without the wrapper '
	  . 'or with a null schema read as before; messages that are no wrapper\'s row read as they are');
is($node->safe_psql('postgres', "SELECT string_agg(off::text, ',' ORDER BY off) FROM q_rows WHERE num_nonnulls($names) = 0"),
	join(',', @null_offsets),
	'append: a wrapper whose payload is a number, an array or null, and a message of no column, are rows of '
	  . 'NULLs but their metadata');
is($node->safe_psql('postgres', q{
SELECT string_agg(key || '=' || n, ',' ORDER BY key)
  FROM (SELECT key, sum(value::bigint) AS n
          FROM streamwin.progress, jsonb_each_text(missing_keys)
         WHERE query = 'q_rows' GROUP BY key) k}),
	join(',', map { "$_=$row_missing{$_}" } sort keys %row_missing),
	'append: missing_keys counts the messages read as they are, per column they lack; a wrapped row lacks none');
dead_letters_match($node, 'dbt_rows', \@row_dead, 'append: malformed values of wrapped rows, and integers and base64 '
	  . 'without a schema, are dead letters at their offsets that say why');

# ---- upsert -------------------------------------------------------------------

my (%ups_last, @ups_msgs5, @ups_dead5);    # id => its last row; messages; dead letters

# A message of key id: a value (undef: a tombstone) that is the key's row
# (row), a dead letter (dead) or deletes the key as a tombstone does
# (delete).
sub ups_put
{
	my ($id, $value, %o) = @_;
	push @ups_msgs5, [ 0, qq({"id": $id}), $value ];
	if ($o{dead})
	{
		push @ups_dead5, [ 0, $#ups_msgs5, $o{dead} ];
	}
	elsif (defined $value && !$o{delete})
	{
		$ups_last{$id} = $o{row};
	}
	else
	{
		delete $ups_last{$id};
	}
	return;
}

sub ups_chunk5
{
	my ($n) = @_;
	for (1 .. $n)
	{
		my $id = 1 + int(rand(25));
		my $r = rand();
		if ($r < 0.15)
		{
			ups_put($id, undef);    # a tombstone, of a key with a row or not
		}
		elsif ($r < 0.2)
		{
			my ($col, $bad, $entry, $re) = @{ pick(@malformed) };
			my ($value) = row_value(new_row($id, 'wrapped'), 'wrapped', { $col => [ $bad, $entry ] });
			ups_put($id, $value, dead => $re);    # the key keeps its row
		}
		elsif ($r < 0.23)
		{
			# a wrapper whose payload is no object: the key's row of NULLs
			my (undef, $schema) = row_value(new_row($id, 'wrapped'), 'wrapped');
			my $value = json_text(obj(schema => $schema, payload => num(5)));
			utf8::upgrade($value);
			ups_put($id, $value, row => { kind => 'none', id => $id });
		}
		elsif ($r < 0.3)
		{
			# the wrapper of a null payload: a tombstone, of a key with a
			# row or not
			my (undef, $schema) = row_value(new_row($id, 'wrapped'), 'wrapped');
			my $value = json_text(obj(schema => $schema, payload => undef));
			ups_put($id, $value, delete => 1);
		}
		else
		{
			my $how = $r < 0.8 ? 'wrapped' : pick('bare', 'null_schema');
			my $row = new_row_for($id, $how);
			my ($value) = row_value($row, $how);
			ups_put($id, $value, row => $row);
		}
	}
	return;
}

# Two rounds: keys change within a batch and across batches.
my $ups_sent5 = 0;
for (1 .. 2)
{
	ups_chunk5(75);
	$broker->produce('dbt_ups', [ @ups_msgs5[ $ups_sent5 .. $#ups_msgs5 ] ], keys => 1);
	$ups_sent5 = @ups_msgs5;
	run_json($node, "run_available('q_ups')");
}
psql_ok($node, "CREATE TABLE want_ups ($want_cols5);\n"
	  . (%ups_last ? "INSERT INTO want_ups VALUES\n"
		  . join(",\n", map { '(' . join(', ', row_sql($ups_last{$_})) . ')' } sort { $a <=> $b } keys %ups_last)
		: ''),
	'upsert: the expected table, each key\'s last row computed in SQL from its raw values');
results_match($node, "SELECT $got5 FROM q_ups", 'SELECT * FROM want_ups',
	'upsert: the keyed transform holds each key\'s last row, a wrapped one read by its schema; tombstones '
	  . 'and wrappers of a null payload deleted keys, dead letters left them as they were');
dead_letters_match($node, 'dbt_ups', \@ups_dead5, 'upsert: malformed values of wrapped rows are dead letters at their '
	  . 'offsets that say why');

# ---- a long non-ASCII quote in an error ----------------------------------------

# A Decimal whose text is no base64 but 'x' and 40 letters of two bytes:
# the error that quotes it (in part or whole) is valid UTF-8 (psql reads it
# back in the database's encoding, UTF8), without a replacement character,
# and its quote a prefix of the text, in whole characters.
{
	my (%seen, @bad);
	for my $line (split /\n/, $node->safe_psql('postgres', q{
SELECT source || E'\t' || replace(error, E'\n', ' ') FROM streamwin.dead_letters
 WHERE error LIKE '%Decimal needs base64 text, found "x%' ORDER BY source, "offset"}))
	{
		my $text = eval { Encode::decode('UTF-8', my $bytes = $line, Encode::FB_CROAK) };
		if (!defined $text)
		{
			push @bad, "not UTF-8: $line";
			next;
		}
		my ($source, $error) = split /\t/, $text, 2;
		$seen{$source}++;
		my ($quote) = $error =~ /found "([^"]*)"/;
		push @bad, "$source: $error"
		  unless defined $quote && length $quote > 1 && index($LONG_NOT_BASE64, $quote) == 0
		  && $error !~ /\x{fffd}/;
	}
	push @bad, "no such dead letter of $_" for grep { !$seen{$_} } qw(dbt dbt_rows);
	ok(!@bad, 'a Decimal of long non-ASCII text: its dead letters (of events and of wrapped rows) quote it in '
		  . 'valid UTF-8, whole characters of it, no replacement character')
	  or diag(join("\n", @bad));
}

# ---- a column named "payload" or "schema" --------------------------------------

# Two sources, of the same messages on two topics: a top level that names a
# column is read as it is, the member as JSON, whatever the schema says;
# nothing is unwrapped.
my (@pay_msgs, @pay_want, @sch_want);
for my $how (qw(wrapped wrapped null_schema wrapped))
{
	my ($value, $schema, $payload) = row_value(new_row_for(++$row_id, $how), $how);
	push @pay_msgs, [ 0, $value ];
	push @pay_want, [ undef, undef, undef, json_text($payload) ];
	push @sch_want, [ undef, undef, undef, defined $schema ? json_text($schema) : undef ];
}
{
	my ($schema) = some_wrapped();
	my $value = json_text(obj(schema => $schema, payload => num(5)));
	utf8::upgrade($value);
	push @pay_msgs, [ 0, $value ];
	push @pay_want, [ undef, undef, undef, '5' ];
	push @sch_want, [ undef, undef, undef, json_text($schema) ];
}
push @pay_msgs, [ 0, '{"id": 7, "v": 9, "tsz": "2024-01-01 12:00:00+00"}' ];
push @pay_want, [ 7, 9, '2024-01-01 12:00:00+00', undef ];
push @sch_want, [ 7, 9, '2024-01-01 12:00:00+00', undef ];
$broker->produce($_, \@pay_msgs) for qw(dbt_pay dbt_sch);
run_json($node, "run_available('$_')") for qw(q_pay q_sch);
for my $member (qw(payload schema))
{
	my $q = $member eq 'payload' ? 'q_pay' : 'q_sch';
	results_match($node, "SELECT id, v, tsz, $member FROM $q",
		values_sql([ [ 'id', 'int' ], [ 'v', 'int' ], [ 'tsz', 'timestamptz' ], [ $member, 'jsonb' ] ],
			$member eq 'payload' ? \@pay_want : \@sch_want),
		"a source with a column \"$member\": the member is that column's JSON, the wrapper's row not read");
}

# ==== 6. keys in the wrapper ====================================================

# An upsert source whose message keys are in Kafka Connect's wrapper too,
# as Debezium writes a table's key with schemas: {"schema": the key's
# struct, "payload": the key}.  Its key columns take their fields' logical
# types as a row's columns do: id an int64 (no name), at a MicroTimestamp
# (Debezium's infinity among them), k a Decimal of scale 2.  Each key
# keeps its text (the same bytes) from version to version, and keys that
# differ only in at or in k are other keys.  The values are wrapped rows
# of all the columns (the key's too, the same values); a tombstone (with
# the wrapped key) and the wrapper of a null payload delete the key.
my @kcols6 = (
	ts_col('at', 'timestamptz', 'us'),
	decimal_col('k', 'numeric', as => 'text', bytes => [ 1, 9 ], scales => [2]),
);
my @vcols6 = (
	ts_col('tsz', 'timestamptz', 'us'),
	ts_col('ms_ts', 'timestamp', 'ms'),
	date_col('d', 'date'),
	decimal_col('price', 'numeric', as => 'text', bytes => [ 1, 9 ], scales => [ 2, 0, 4 ]),
);

sub dec2
{
	my ($n, $pad) = @_;
	$n = Math::BigInt->new($n);
	return { n => $n, scale => 2, bytes => twos_complement($n, $pad) };
}

# The fields of a key's columns, and their payload's members.
sub key_fields6
{
	my ($key) = @_;
	return (obj(type => 'int64', optional => $F, field => 'id'),
		map { obj($_->{schema}->($key->{ $_->{name} }), field => $_->{name}) } @kcols6);
}

sub key_members6
{
	my ($key) = @_;
	return (id => num($key->{id}), map { ($_->{name} => $_->{payload}->($key->{ $_->{name} })) } @kcols6);
}

my @keys6 = map {
	my ($id, $at, $k) = @$_;
	my %key = (id => Math::BigInt->new($id), at => Math::BigInt->new($at), k => $k);
	$key{text} = json_text(obj(
			schema => obj(type => 'struct', fields => [ key_fields6(\%key) ], optional => $F,
				name => 'shop.public.orders.Key'),
			payload => obj(key_members6(\%key))));
	\%key;
} (
	[ 1, '1700000000000000', dec2(1250) ],
	[ 1, '1700000000000001', dec2(1250) ],     # another at, by a microsecond
	[ 1, '1700000000000000', dec2(-1250) ],    # another k
	[ 2, '-2208988800000001', dec2(0) ],
	[ 3, $INF, dec2(1) ],
	[ '-9223372036854775808', $MINUS_INF, dec2(1250, 1) ],    # sign bytes in front
	map { [ rand_big(@$int64), $kcols6[0]{gen}->(), $kcols6[1]{gen}->() ] } 1 .. 4,
);

my (@key_msgs, %key_row);    # messages [0, key, value]; key index => its row

# A message of key i: a new row ('row'), a tombstone ('tombstone') or the
# wrapper of a null payload ('null_payload').
sub key_put
{
	my ($i, $what) = @_;
	my $key = $keys6[$i];
	my $row = $what eq 'row'
	  ? { v => ++$version, map { ($_->{name} => rand() < 0.1 ? undef : $_->{gen}->()) } @vcols6 } : undef;
	my $schema = row_schema([ key_fields6($key), obj(type => 'int32', optional => $T, field => 'v'),
			map { obj($_->{schema}->($row ? $row->{ $_->{name} } : undef), field => $_->{name}) } @vcols6 ]);
	my $value = $what eq 'tombstone' ? undef
	  : $what eq 'null_payload' ? json_text(obj(schema => $schema, payload => undef))
	  : json_text(obj(schema => $schema, payload => obj(key_members6($key), v => num($row->{v}),
				map { ($_->{name} => defined $row->{ $_->{name} } ? $_->{payload}->($row->{ $_->{name} }) : undef) }
				  @vcols6)));
	push @key_msgs, [ 0, $key->{text}, $value ];
	if ($row)
	{
		$key_row{$i} = $row;
	}
	else
	{
		delete $key_row{$i};
	}
	return;
}

# One test: q_keys holds each key's last row, computed in SQL from the raw
# values, and no other.
sub keys_match
{
	my ($name) = @_;
	my @rows;
	for my $i (sort { $a <=> $b } keys %key_row)
	{
		my ($key, $row) = ($keys6[$i], $key_row{$i});
		push @rows, '(' . join(', ', $key->{id}, map({ $_->{want}->($key->{ $_->{name} }) } @kcols6), $row->{v},
				map { defined $row->{ $_->{name} } ? $_->{want}->($row->{ $_->{name} }) : 'NULL' } @vcols6) . ')';
	}
	psql_ok($node, "TRUNCATE want_keys;\n" . (@rows ? "INSERT INTO want_keys VALUES\n" . join(",\n", @rows) : ''),
		"$name: the expected rows, each key's last, computed in SQL from the raw values");
	results_match($node, 'SELECT id, at, k::text, v, tsz, ms_ts, d, price::text FROM q_keys',
		'SELECT * FROM want_keys', "$name: the keyed transform holds each key's last row, its key columns read "
		  . 'by the key\'s schema (a MicroTimestamp, a Decimal), the rest by the value\'s');
	return;
}

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbt_keys', '$brokers', 'dbt_keys',
    'id bigint, at timestamptz, k numeric, v int, tsz timestamptz, ms_ts timestamp, d date, price numeric',
    options => '{"envelope": "upsert", "key_columns": ["id", "at", "k"]}');
SELECT streamwin.create_query('q_keys', 'SELECT id, at, k, v, tsz, ms_ts, d, price FROM dbt_keys', start => false);
CREATE TABLE want_keys (id bigint, at timestamptz, k text, v int, tsz timestamptz, ms_ts timestamp, d date,
    price text);
}, 'an upsert source keyed by id, a MicroTimestamp and a Decimal of its wrapped keys, and a transform');

# A batch of known changes: every key a row; then of key 0 a wrapper of a
# null payload and a new row, of key 1 a tombstone and a new row (both
# there again), of key 2 a wrapper of a null payload, of key 3 a tombstone
# (both gone), of key 4 a second version, of key 5 (gone) a wrapper of a
# null payload and a tombstone, which change nothing.
key_put($_, 'row') for 0 .. $#keys6;
key_put(0, 'null_payload');
key_put(0, 'row');
key_put(1, 'tombstone');
key_put(1, 'row');
key_put(2, 'null_payload');
key_put(3, 'tombstone');
key_put(4, 'row');
key_put(5, 'tombstone');
key_put(5, 'null_payload');
key_put(5, 'tombstone');
$broker->produce('dbt_keys', \@key_msgs, keys => 1);
my $keys_sent = @key_msgs;
run_json($node, "run_available('q_keys')");
keys_match('wrapped keys, a first batch');
is($node->safe_psql('postgres', q{
SELECT string_agg(concat_ws(' ', id, at, k), ',' ORDER BY id, at, k) FROM q_keys WHERE id IN (1, 3)}),
	'1 2023-11-14 22:13:20+00 12.50,1 2023-11-14 22:13:20.000001+00 12.50,3 infinity 0.01',
	'wrapped keys, by hand: id 1 at 1700000000000000 and 1700000000000001 microseconds, k 12.50 (that of k '
	  . '-12.50 deleted); id 3 at Debezium\'s infinity, k 0.01');

# Random changes, over two batches.
for my $round (1 .. 2)
{
	key_put(int(rand(@keys6)), pick('row', 'row', 'row', 'tombstone', 'null_payload')) for 1 .. 25;
	$broker->produce('dbt_keys', [ @key_msgs[ $keys_sent .. $#key_msgs ] ], keys => 1);
	$keys_sent = @key_msgs;
	run_json($node, "run_available('q_keys')");
}
keys_match('wrapped keys, random changes');
dead_letters_match($node, 'dbt_keys', [], 'wrapped keys: no dead letters');

done_testing();
