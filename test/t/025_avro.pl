
# 025_avro.pl: Avro sources, with a schema registry and with one writer
# schema, against an Avro encoder and a schema registry written here.
#
# The messages are encoded by this file's own Avro binary encoder (zigzag
# varints, IEEE floats, blocks, two's complement decimals), independent of
# streamwin's decoder, and each row's expected values are written as plain
# SQL over the numbers that were encoded (date '1970-01-01' + days, ...),
# then compared as multisets with what streamwin's queries produce.  The
# schema registry is a small HTTP server forked here (core Perl only),
# which serves the schemas in its directory and can be told to fail (HTTP
# 500), to hang, or to be gone; it logs every request.
#
#   1. every type mapping and logical type, in messages of three writer
#      schema versions interleaved in one topic, decoded in one batch
#      (evolution: fields added, dropped, reordered, promoted int -> long,
#      float -> double, bytes -> string, a changed enum); the registry is
#      asked once per schema id; the schemas are in streamwin.avro_schemas.
#   2. bad messages as dead letters with their reasons: a wrong magic byte,
#      a message too short, a truncated body, a union branch out of range,
#      an id the registry does not have (404), a field of a type its
#      column cannot hold; the good messages around them arrive.
#   3. the registry failing (500), hanging (bounded by
#      streamwin.schema_registry_timeout) and gone: run_batch fails with
#      the error, no offsets move, nothing is dead-lettered; back: exact.
#      The same with a running worker: the query shows the error, retries,
#      and goes on exactly when the registry is back.
#   4. a crash with the registry gone: an aggregation over the first topic,
#      four batches in, restores its checkpoint and replays one, and a new
#      query reads the whole topic: both decode every schema from the
#      catalog, exactly, without a request.
#   5. option avro_schema: plain Avro bodies of one writer schema.
#   6. envelope upsert: Avro keys (a long, and a record, by their own
#      writer schemas) and Avro values, tombstones, a key of an unknown
#      schema; the result table against a Perl simulation of the upserts.
#   7. envelope debezium: Debezium's Avro change events (c, r, u, d, with
#      the row's record named again by reference, tombstones skipped, an
#      unknown op a dead letter, an update without "before" the key's new
#      row, a truncate); the result table against a Perl simulation of the
#      changes.  Debezium's types, which Kafka Connect's Avro converter
#      names only by "connect.name" (a MicroTimestamp on a long, a
#      VariableScaleDecimal record, a Json string), read as what they are.
#   8. key metadata columns of an Avro source: the key decoded by its own
#      writer schema (a long, a record) into a jsonb column, its bytes in a
#      bytea column; a key that is not Avro is a dead letter.
#   9. strings of every length up to 9,000 bytes, in batches of 300 with
#      truncated bodies among them, into text columns: exact (the blocks
#      their values are carved from, and values allocated alone).
use strict;
use warnings;
use utf8;

use IO::Socket::INET;
use IO::Select;
use JSON::PP;
use Math::BigInt;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use StreamwinTest;

my $node = new_node('avro',
	conf => "streamwin.schema_registry_timeout = 1000\n"
	  . "streamwin.checkpoint_interval = 2\nstreamwin.checkpoint_min_interval = 0\n");
my $broker = StreamwinTest::Broker->start(
	topics => { types => 2, bad => 1, ref => 1, ops => 1, hostile => 1, down => 1, live => 1, plain => 1, ups => 1, dbz => 1, dbz_times => 1, keyed => 1,
		texts => 1, dom => 1, strs => 1 });
my $brokers = $broker->bootstrap;
my $json = JSON::PP->new->canonical->allow_nonref;
srand(25);

# ==== An Avro binary encoder ====================================================

# A long or int: zigzag, then 7 bits a byte, least significant first
sub zz
{
	my ($n) = @_;
	my $u = $n >= 0 ? 2 * $n : -2 * $n - 1;
	my $out = '';
	while ($u >= 0x80)
	{
		$out .= chr(($u & 0x7f) | 0x80);
		$u >>= 7;
	}
	return $out . chr($u);
}
sub av_bytes  { return zz(length $_[0]) . $_[0] }
sub av_string { my $s = $_[0]; utf8::encode($s); return av_bytes($s) }
sub av_float  { return pack('f<', $_[0]) }
sub av_double { return pack('d<', $_[0]) }
sub av_bool   { return $_[0] ? "\x01" : "\x00" }

# An array or map: one block of items (already encoded), or with $sized the
# block count negated and followed by its size in bytes, then the end block
sub av_block
{
	my ($items, $sized) = @_;
	return zz(0) unless @$items;
	my $body = join('', @$items);
	return ($sized ? zz(-@$items) . zz(length $body) : zz(scalar @$items)) . $body . zz(0);
}

# The unscaled value of a decimal as two's complement, big-endian, in
# $size bytes (fixed) or in as few as hold it (bytes)
sub av_decimal
{
	my ($unscaled, $size) = @_;
	my $n = Math::BigInt->new($unscaled);
	my $nbytes = $size;
	if (!defined $nbytes)
	{
		$nbytes = 1;
		$nbytes++ while Math::BigInt->new(2)->bpow(8 * $nbytes - 1)->bcmp($n->copy->babs) <= 0
		  && !($n->is_neg && Math::BigInt->new(2)->bpow(8 * $nbytes - 1)->bcmp($n->copy->babs) == 0);
	}
	$n->badd(Math::BigInt->new(2)->bpow(8 * $nbytes)) if $n->is_neg;
	my $hex = substr($n->as_hex, 2);
	$hex = ('0' x (2 * $nbytes - length $hex)) . $hex;
	return pack('H*', $hex);
}

# The text of the decimal of unscaled digits (a string, maybe signed) and
# scale, by placing the point among the digits
sub decimal_text
{
	my ($unscaled, $scale) = @_;
	my $neg = $unscaled =~ s/^-//;
	$unscaled = ('0' x ($scale + 1 - length $unscaled)) . $unscaled if length $unscaled <= $scale;
	my $text = $scale > 0 ? substr($unscaled, 0, -$scale) . '.' . substr($unscaled, -$scale) : $unscaled;
	return ($neg ? '-' : '') . $text;
}

# Confluent's wire format: magic byte 0, the schema id, the body
sub confluent { my ($id, $body) = @_; return "\x00" . pack('N', $id) . $body }

# ==== A schema registry ===========================================================

my $regdir = PostgreSQL::Test::Utils::tempdir();
my ($registry_pid, $registry_port);

sub registry_mode
{
	my ($mode) = @_;
	open my $fh, '>', "$regdir/mode.tmp" or die;
	print $fh $mode;
	close $fh;
	rename "$regdir/mode.tmp", "$regdir/mode" or die;
	return;
}

sub registry_schema
{
	my ($id, $schema) = @_;
	open my $fh, '>', "$regdir/$id.json" or die;
	print $fh $json->encode({ schema => $json->encode($schema) });
	close $fh;
	return;
}

# Requests the registry received for schema id $id
sub registry_requests
{
	my ($id) = @_;
	open my $fh, '<', "$regdir/requests" or return 0;
	my $n = grep { /^\/schemas\/ids\/$id$/ } map { chomp; $_ } <$fh>;
	close $fh;
	return $n;
}

sub registry_serve
{
	my ($listen) = @_;
	while (my $c = $listen->accept)
	{
		my $request = <$c> // '';
		while (my $h = <$c>) { last if $h =~ /^\r?\n$/ }
		my ($path) = $request =~ m{^GET (\S+) HTTP};
		$path //= '';
		open my $log, '>>', "$regdir/requests" or die;
		print $log "$path\n";
		close $log;
		my $mode = do { local (@ARGV, $/) = ("$regdir/mode"); <> } // 'ok';
		if ($mode eq 'hang')
		{
			# answer nothing until told otherwise
			usleep(50_000) while (do { local (@ARGV, $/) = ("$regdir/mode"); <> }) eq 'hang';
			close $c;
			next;
		}
		my ($status, $body);
		if ($mode eq '500')
		{
			($status, $body) = ('500 Internal Server Error', '{"error_code": 50001, "message": "store unavailable"}');
		}
		elsif ($mode eq 'other')
		{
			# another service's answer, as a URL a role points elsewhere gets
			($status, $body) = ('403 Forbidden', '{"AccessKeyId": "AKIDSECRET", "Token": "tok"}');
		}
		elsif ($path =~ m{^/schemas/ids/(\d+)$} && -f "$regdir/$1.json")
		{
			$status = '200 OK';
			$body = do { local (@ARGV, $/) = ("$regdir/$1.json"); <> };
		}
		else
		{
			($status, $body) = ('404 Not Found', '{"error_code": 40403, "message": "Schema not found"}');
		}
		print $c "HTTP/1.1 $status\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\n"
		  . "Content-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
		close $c;
	}
	return;
}

sub registry_start
{
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1', LocalPort => $registry_port // 0,
		Listen => 16, ReuseAddr => 1) or die "registry: $!";
	$registry_port = $listen->sockport;
	registry_mode('ok');
	$registry_pid = fork() // die "fork: $!";
	if ($registry_pid == 0)
	{
		# never returns into the test: its END blocks would stop the broker
		eval { registry_serve($listen) };
		print STDERR "registry: $@" if $@;
		POSIX::_exit(0);
	}
	close $listen;
	note("schema registry (pid $registry_pid) at port $registry_port");
	return;
}

sub registry_stop
{
	return unless $registry_pid;
	kill 'KILL', $registry_pid;
	waitpid($registry_pid, 0);
	$registry_pid = undef;
	return;
}
END { registry_stop() }

registry_start();
my $registry = "http://127.0.0.1:$registry_port";

# ==== 1. Every type, three writer schemas in one batch ============================

my @columns = (
	[ i => 'int' ], [ l => 'bigint' ], [ p => 'bigint' ], [ f => 'float8' ],
	[ d => 'float8' ], [ flag => 'boolean' ], [ s => 'text' ], [ b => 'bytea' ],
	[ s2b => 'bytea' ], [ b2s => 'text' ], [ dt => 'date' ], [ tm => 'time' ],
	[ tmu => 'time' ], [ ts => 'timestamptz' ], [ tsu => 'timestamptz' ],
	[ lts => 'timestamp' ], [ ltsu => 'timestamp' ], [ dec => 'numeric(10,2)' ],
	[ bigdec => 'numeric' ], [ u => 'uuid' ], [ uf => 'uuid' ], [ e => 'text' ],
	[ fx => 'bytea' ], [ opt => 'bigint' ], [ ostr => 'text' ], [ rec => 'jsonb' ],
	[ arr => 'jsonb' ], [ m => 'json' ], [ newf => 'text' ], [ absent => 'text' ]);
my $coldefs = join(', ', map { "$_->[0] $_->[1]" } @columns);

my $inner = { type => 'record', name => 'inner', fields => [
	{ name => 'a', type => 'int' },
	{ name => 'tags', type => { type => 'array', items => 'string' } },
	{ name => 'w', type => [ 'null', 'double' ] } ] };
my %field_type = (
	i => 'int', l => 'long', p => 'int', f => 'float', d => 'double', flag => 'boolean',
	s => 'string', b => 'bytes', s2b => 'string', b2s => 'bytes',
	dt => { type => 'int', logicalType => 'date' },
	tm => { type => 'int', logicalType => 'time-millis' },
	tmu => { type => 'long', logicalType => 'time-micros' },
	ts => { type => 'long', logicalType => 'timestamp-millis' },
	tsu => { type => 'long', logicalType => 'timestamp-micros' },
	lts => { type => 'long', logicalType => 'local-timestamp-millis' },
	ltsu => { type => 'long', logicalType => 'local-timestamp-micros' },
	dec => { type => 'bytes', logicalType => 'decimal', precision => 10, scale => 2 },
	bigdec => { type => 'fixed', name => 'bigdec_t', size => 16, logicalType => 'decimal',
		precision => 38, scale => 4 },
	u => { type => 'string', logicalType => 'uuid' },
	uf => { type => 'fixed', name => 'uuid_t', size => 16 },
	e => { type => 'enum', name => 'color', symbols => [qw(red green blue)] },
	fx => { type => 'fixed', name => 'four', size => 4 },
	opt => [ 'null', 'long' ], ostr => [ 'string', 'null' ],
	rec => $inner,
	arr => { type => 'array', items => 'int' },
	m => { type => 'map', values => 'long' },
	extra => 'string');
my @v1_fields = qw(i l p f d flag s b s2b b2s dt tm tmu ts tsu lts ltsu dec bigdec u uf e fx
  opt ostr rec arr m extra);
my $v1 = { type => 'record', name => 'ev', namespace => 'test.avro',
	fields => [ map { { name => $_, type => $field_type{$_} } } @v1_fields ] };
# v2: reordered, i and most others dropped, l written as int, d as float,
# s as bytes, a new field newf
my $v2 = { type => 'record', name => 'ev', namespace => 'test.avro', fields => [
	{ name => 'newf', type => 'string' }, { name => 's', type => 'bytes' },
	{ name => 'd', type => 'float' }, { name => 'l', type => 'int' },
	{ name => 'ts', type => $field_type{ts} } ] };
# v3: i nullable, the enum's symbols in another order and one more
my $v3 = { type => 'record', name => 'ev', namespace => 'test.avro', fields => [
	{ name => 'l', type => 'long' }, { name => 'i', type => [ 'null', 'int' ] },
	{ name => 'e', type => { type => 'enum', name => 'color', symbols => [qw(blue red yellow)] } },
	{ name => 's', type => 'string' } ] };
registry_schema(1, $v1);
registry_schema(2, $v2);
registry_schema(3, $v3);

sub lit { my ($s) = @_; $s =~ s/'/''/g; return "'$s'" }
sub hexlit { return "'\\x" . unpack('H*', $_[0]) . "'::bytea" }
sub dbl { return sprintf('%.17g', $_[0]) . '::float8' }
sub rand_int { my ($lo, $hi) = @_; return $lo + int(rand($hi - $lo + 1)) }
sub rand_text
{
	my @c = ('a' .. 'z', ' ', "'", '"', '\\', "\x{e9}", "\x{fc}", "\x{4e2d}");
	return join('', map { $c[ rand @c ] } 1 .. rand_int(0, 12));
}
sub rand_ascii { return join('', map { ('a' .. 'z')[ rand 26 ] } 1 .. rand_int(0, 10)) }
sub rand_bytes { return join('', map { chr(rand 256) } 1 .. rand_int(0, 8)) }
sub uuid_bytes { return join('', map { chr(rand 256) } 1 .. 16) }
sub uuid_text { my $h = unpack('H*', $_[0]); $h =~ s/^(.{8})(.{4})(.{4})(.{4})/$1-$2-$3-$4-/; return $h }
# Microseconds as an interval of days, seconds and microseconds (each field
# small enough for interval input)
sub us_interval
{
	my ($us) = @_;
	my $days = POSIX::floor($us / 86_400_000_000);
	my $rem  = $us - $days * 86_400_000_000;
	my $secs = int($rem / 1_000_000);
	my $frac = $rem - $secs * 1_000_000;
	return "(interval '$days days' + interval '$secs seconds' + interval '$frac microseconds')";
}
sub since_epoch { my ($type, $us) = @_; return "('1970-01-01 00:00:00'::$type + " . us_interval($us) . ')' }

# One message of schema $v (1, 2, 3): its body, and the SQL of its row
sub make_event
{
	my ($v) = @_;
	my (%sql, $body);
	if ($v == 1)
	{
		my %x;
		$x{i} = rand_int(-2**31, 2**31 - 1);
		$x{l} = rand_int(-2**52, 2**52);
		$x{p} = rand_int(-2**31, 2**31 - 1);
		$x{f} = unpack('f<', pack('f<', rand(2000) - 1000));
		$x{d} = rand(1e6) - 5e5;
		$x{flag} = rand() < 0.5 ? 1 : 0;
		$x{s} = rand_text();
		$x{b} = rand_bytes();
		$x{s2b} = rand_text();
		$x{b2s} = rand_ascii();
		$x{dt} = rand_int(-100000, 100000);
		$x{tm} = rand_int(0, 86_399_999);
		$x{tmu} = rand_int(0, 86_399_999_999);
		$x{ts} = rand_int(-2e12, 4e12);
		$x{tsu} = $x{ts} * 1000 + rand_int(0, 999);
		$x{lts} = rand_int(-2e12, 4e12);
		$x{ltsu} = $x{lts} * 1000 + rand_int(0, 999);
		$x{dec} = rand_int(-99_999_999, 99_999_999);
		$x{bigdec} = (rand() < 0.5 ? '-' : '') . join('', map { int(rand 10) } 1 .. rand_int(1, 37));
		$x{u} = uuid_bytes();
		$x{uf} = uuid_bytes();
		$x{e} = rand_int(0, 2);
		$x{fx} = join('', map { chr(rand 256) } 1 .. 4);
		$x{opt} = rand() < 0.3 ? undef : rand_int(-1e15, 1e15);
		$x{ostr} = rand() < 0.3 ? undef : rand_text();
		my @tags = map { rand_text() } 1 .. rand_int(0, 3);
		my $w = rand() < 0.5 ? undef : rand_int(-100, 100) / 4;
		my $a = rand_int(-1000, 1000);
		my @arr = map { rand_int(-2**31, 2**31 - 1) } 1 .. rand_int(0, 5);
		my %m = map { rand_ascii() . $_ => rand_int(-1e12, 1e12) } 1 .. rand_int(0, 3);

		$body = zz($x{i}) . zz($x{l}) . zz($x{p}) . av_float($x{f}) . av_double($x{d})
		  . av_bool($x{flag}) . av_string($x{s}) . av_bytes($x{b}) . av_string($x{s2b})
		  . av_bytes($x{b2s}) . zz($x{dt}) . zz($x{tm}) . zz($x{tmu}) . zz($x{ts}) . zz($x{tsu})
		  . zz($x{lts}) . zz($x{ltsu}) . av_bytes(av_decimal($x{dec}))
		  . av_decimal($x{bigdec}, 16) . av_string(uuid_text($x{u})) . $x{uf} . zz($x{e})
		  . $x{fx} . (defined $x{opt} ? zz(1) . zz($x{opt}) : zz(0))
		  . (defined $x{ostr} ? zz(0) . av_string($x{ostr}) : zz(1))
		  . zz($a) . av_block([ map { av_string($_) } @tags ]) . (defined $w ? zz(1) . av_double($w) : zz(0))
		  . av_block([ map { zz($_) } @arr ], rand() < 0.5)
		  . av_block([ map { av_string($_) . zz($m{$_}) } sort keys %m ])
		  . av_string(rand_text());

		%sql = (
			i => $x{i}, l => $x{l}, p => $x{p}, f => dbl($x{f}), d => dbl($x{d}),
			flag => $x{flag} ? 'true' : 'false', s => lit($x{s}), b => hexlit($x{b}),
			s2b => do { my $t = $x{s2b}; utf8::encode($t); hexlit($t) }, b2s => lit($x{b2s}),
			dt => "('1970-01-01'::date + $x{dt})",
			tm => "('00:00'::time + " . us_interval($x{tm} * 1000) . ')',
			tmu => "('00:00'::time + " . us_interval($x{tmu}) . ')',
			ts => since_epoch('timestamptz', $x{ts} * 1000), tsu => since_epoch('timestamptz', $x{tsu}),
			lts => since_epoch('timestamp', $x{lts} * 1000), ltsu => since_epoch('timestamp', $x{ltsu}),
			# the unscaled value with its exponent: numeric_in is exact
			dec => "'$x{dec}e-2'::numeric", bigdec => "'$x{bigdec}e-4'::numeric",
			u => lit(uuid_text($x{u})) . '::uuid', uf => lit(uuid_text($x{uf})) . '::uuid',
			e => lit((qw(red green blue))[ $x{e} ]), fx => hexlit($x{fx}),
			opt => $x{opt} // 'NULL', ostr => defined $x{ostr} ? lit($x{ostr}) : 'NULL',
			rec => lit($json->encode({ a => $a, tags => \@tags, w => $w })) . '::jsonb',
			arr => lit($json->encode(\@arr)) . '::jsonb',
			m => lit($json->encode(\%m)) . '::jsonb');
	}
	elsif ($v == 2)
	{
		my ($newf, $s, $l) = (rand_text(), rand_ascii(), rand_int(-2**31, 2**31 - 1));
		my $d = unpack('f<', pack('f<', rand(100)));
		my $ts = rand_int(0, 2e12);
		$body = av_string($newf) . av_bytes($s) . av_float($d) . zz($l) . zz($ts);
		%sql = (newf => lit($newf), s => lit($s), d => dbl($d), l => $l,
			ts => since_epoch('timestamptz', $ts * 1000));
	}
	else
	{
		my ($l, $i, $e, $s) = (rand_int(-1e15, 1e15), rand() < 0.3 ? undef : rand_int(-1000, 1000),
			rand_int(0, 2), rand_text());
		$body = zz($l) . (defined $i ? zz(1) . zz($i) : zz(0)) . zz($e) . av_string($s);
		%sql = (l => $l, i => $i // 'NULL', e => lit((qw(blue red yellow))[$e]), s => lit($s));
	}
	return (confluent($v, $body),
		'(' . join(', ', map { '(' . ($sql{ $_->[0] } // 'NULL') . ")::$_->[1]" } @columns) . ')');
}

my (@messages, @want);
for my $n (1 .. 240)
{
	my $v = (1, 1, 2, 3)[ $n % 4 ];
	my ($payload, $row) = make_event($v);
	push @messages, [ $n % 2, $payload ];
	push @want, $row;
}
$broker->produce('types', \@messages, hex => 1);
my $names = join(', ', map { $_->[0] } @columns);
my $want_sql = "SELECT * FROM (VALUES\n" . join(",\n", @want) . ") AS w($names)";
my $got_cols = join(', ', map { $_->[0] eq 'm' ? 'm::jsonb AS m' : $_->[0] } @columns);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_types', '$brokers', 'types', '$coldefs', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_rows', 'SELECT * FROM avro_types', start => false);
}, 'an Avro source with a schema registry and a transform over it');
my $r = run_json($node, "run_batch('avro_rows')");
is($r->{input_rows}, 240, 'three writer schemas in one batch');
is($r->{dead_letters}, 0, 'no dead letters');
results_match($node, "SELECT $got_cols FROM avro_rows",
	"SELECT $got_cols FROM ($want_sql) w", 'every type, logical type and promotion: exact')
  or do
{
	# which columns differ
	for my $c (map { $_->[0] } @columns)
	{
		my $expr = $c eq 'm' ? 'm::jsonb' : $c;
		results_match($node, "SELECT $expr FROM avro_rows", "SELECT $expr FROM ($want_sql) w",
			"column $c");
	}
};
is(join(',', map { registry_requests($_) } 1 .. 3), '1,1,1', 'the registry is asked once per schema id');
is($node->safe_psql('postgres', q{
SELECT string_agg(schema_id::text, ',' ORDER BY schema_id) FROM streamwin.avro_schemas
 WHERE source_id = (SELECT source_id FROM streamwin.source_catalog WHERE name = 'avro_types')}),
	'1,2,3', 'the schemas are kept in streamwin.avro_schemas');
my $missing = query_json($node, q{SELECT missing_keys FROM streamwin.progress WHERE query = 'avro_rows'});
is_deeply([ @$missing{qw(i newf absent b)} ], [ 60, 180, 240, 120 ],
	'columns a writer schema lacks are NULL and counted as missing');

# ==== 2. Dead letters ============================================================

# offset => error of a source's dead letters
sub dead_letters_by_offset
{
	my ($source) = @_;
	return map { my ($o, $e) = split /\t/; ($o => $e) } split /\n/, $node->safe_psql('postgres',
		qq{SELECT "offset", error FROM streamwin.dead_letters WHERE source = '$source'},
		extra_params => [ '-F', "\t" ]);
}

# v4: a field whose type its column cannot hold
registry_schema(4, { type => 'record', name => 'ev', fields => [ { name => 'i', type => 'string' } ] });
my @bad_cols = ([ i => 'int' ], [ s => 'text' ]);
registry_schema(5, { type => 'record', name => 'ok', fields => [
	{ name => 'i', type => 'int' }, { name => 's', type => [ 'null', 'string' ] } ] });
my $good5 = sub { my ($i, $s) = @_; return confluent(5, zz($i) . zz(1) . av_string($s)) };
# v30: an array of nulls, which the columns skip: its items take no bytes,
# so a message may declare only so many of them, over all its blocks
registry_schema(30, { type => 'record', name => 'nulls', fields => [
	{ name => 'i', type => 'int' }, { name => 'n', type => { type => 'array', items => 'null' } } ] });
my @bad = (
	[ $good5->(1, 'one'),                       undef ],
	[ "\x01" . substr(confluent(5, zz(2)), 1),  qr/wrong magic byte 0x01/ ],
	[ "\x00\x00\x05",                           qr/message too short for the Confluent Avro format: 3 bytes/ ],
	[ substr($good5->(3, 'three'), 0, 9),       qr/truncated at byte/ ],
	[ confluent(5, zz(4) . zz(7)),              qr/union branch 7 out of range at byte 6/ ],
	[ confluent(99, zz(5)),                     qr/Avro writer schema 99 is not in the schema registry/ ],
	[ confluent(4, av_string('x')),             qr/field "i" of type string cannot be read into column "i" of type integer \(writer schema 4\)/ ],
	[ $good5->(6, 'six') . "\x00",              qr/1 bytes after the end of the Avro record/ ],
	[ confluent(5, zz(2**31) . zz(0)),          qr/Avro int out of range/ ],
	# (so many per byte of the message: 32, and 1,024 more)
	[ confluent(30, zz(9) . zz(400000) x 3 . zz(0)), qr/more than 1536 nulls or other items of no bytes in the arrays of a message of 16 bytes/ ],
	[ confluent(30, zz(12) . zz(1000) . zz(0)), undef ],
	[ confluent(30, zz(13) . zz(600) x 3 . zz(0)), qr/block count at byte 10: more than 1440 nulls or other items of no bytes in the arrays of a message of 13 bytes/ ],
	# varints read where the longest's 10 bytes are left, a 10-byte one
	# (INT64_MAX: its tenth byte 0x01) included, and strings that are ASCII,
	# or not
	[ confluent(5, zz(2147483647) . zz(1) . av_string('a string long enough')), undef ],
	[ confluent(5, zz(-2147483648) . zz(1) . av_string("\x{fc}n\x{ef}c\x{f6}d\x{e9} \x{2713}")), undef ],
	[ confluent(5, "\xfe" . ("\xff" x 8) . "\x01" . zz(1) . av_string('x')), qr/Avro int out of range at byte 5/ ],
	[ confluent(5, ("\x80" x 10) . "\x01" . zz(1) . av_string('x')), qr/Avro varint too long at byte 14/ ],
	[ confluent(5, ("\xff" x 9) . "\x02" . zz(1) . av_string('x')),  qr/Avro varint too long at byte 14/ ],
	[ confluent(5, zz(9) . zz(1) . av_bytes("\xffabc")),  qr/Avro string at byte 8 is not valid UTF8 text/ ],
	[ confluent(5, zz(9) . zz(1) . av_bytes("abc\xc3")), qr/Avro string at byte 8 is not valid UTF8 text/ ],
	[ confluent(5, zz(9) . zz(1) . av_bytes("ab\x00cd")), qr/Avro string at byte 8 is not valid UTF8 text/ ],
	# strings long enough to be checked eight bytes at a time: a NUL or a
	# byte that is not UTF-8 in the first eight, or after them
	[ confluent(5, zz(9) . zz(1) . av_bytes("abcdefg\x00ijkl")), qr/Avro string at byte 8 is not valid UTF8 text/ ],
	[ confluent(5, zz(9) . zz(1) . av_bytes("abc\xffdefghij")), qr/Avro string at byte 8 is not valid UTF8 text/ ],
	[ confluent(5, zz(9) . zz(1) . av_bytes("abcdefghij\x00")), qr/Avro string at byte 8 is not valid UTF8 text/ ],
	[ confluent(5, zz(10) . zz(1) . av_string("abcdefgh\x{e9}t\x{e9}")), undef ],
	# a schema id no registry gives: -1 names the plain schema inside
	[ "\x00\xff\xff\xff\xff" . zz(11),        qr/Avro schema id -1 in the Confluent header is negative/ ],
	[ $good5->(8, 'eight'),                     undef ]);
$broker->produce('bad', [ map { $_->[0] } @bad ], hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_bad', '$brokers', 'bad', 'i int, s text', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_bad_rows', 'SELECT * FROM avro_bad', start => false);
}, 'a source for bad messages');
$r = run_json($node, "run_batch('avro_bad_rows')");
is($r->{dead_letters}, 20, 'twenty dead letters');
results_match($node, 'SELECT i, s FROM avro_bad_rows',
	q{VALUES (1, 'one'), (12, NULL), (2147483647, 'a string long enough'), (-2147483648, U&'\00FCn\00EFc\00F6d\00E9 \2713'),
	  (10, U&'abcdefgh\00E9t\00E9'), (8, 'eight')},
	'the good messages around them arrive');
my %dead = dead_letters_by_offset('avro_bad');
for my $o (0 .. $#bad)
{
	next unless $bad[$o][1];
	like($dead{$o} // '(none)', $bad[$o][1], "dead letter at offset $o says why");
}
is(registry_requests(99), 1, 'the id the registry lacks is asked for once in the batch');
is($node->safe_psql('postgres', q{SELECT payload = '\x000005'::bytea FROM streamwin.dead_letters
 WHERE source = 'avro_bad' AND "offset" = 2}), 't', 'a dead letter keeps the binary payload');

# A column no writer schema has is counted missing in each message decoded
# (the six rows), not in the dead letter whose record was read whole before
# the byte after it.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_bad_x', '$brokers', 'bad', 'i int, s text, x int', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_bad_x_rows', 'SELECT * FROM avro_bad_x', start => false);
}, 'the same messages, with a column no writer schema has');
$r = run_json($node, "run_batch('avro_bad_x_rows')");
is($r->{missing_keys}{x}, $node->safe_psql('postgres', 'SELECT count(*) FROM avro_bad_x_rows'),
	'the column is counted missing in the messages decoded, not in a dead letter');

# A NULL meets a domain's NOT NULL as in the text formats: a null union
# branch into such a column, or a column the writer schema lacks, is a dead
# letter; a domain whose CHECK passes NULL takes it.
$broker->produce('dom', [ $good5->(1, 'one'), confluent(5, zz(2) . zz(0)), $good5->(3, 'three') ], hex => 1);
psql_ok($node, qq{
CREATE DOMAIN avro_nn_text AS text NOT NULL;
CREATE DOMAIN avro_pos_int AS int CHECK (VALUE > 0);
SELECT streamwin.create_kafka_source('avro_dom', '$brokers', 'dom', 'i int, s avro_nn_text, z avro_pos_int', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_dom_rows', 'SELECT i, s, z FROM avro_dom', start => false);
SELECT streamwin.create_kafka_source('avro_dom_absent', '$brokers', 'dom', 'i int, w avro_nn_text', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_dom_absent_rows', 'SELECT i, w FROM avro_dom_absent', start => false);
}, 'sources with domain columns');
$r = run_json($node, "run_batch('avro_dom_rows')");
results_match($node, 'SELECT i, s, z FROM avro_dom_rows', q{VALUES (1, 'one', NULL::int), (3, 'three', NULL)},
	'a domain column: a NULL its CHECK passes is taken, one its NOT NULL refuses is not');
%dead = dead_letters_by_offset('avro_dom');
is(join(',', sort keys %dead), '1', 'the message with a NULL for a NOT NULL domain is a dead letter');
like($dead{1} // '(none)', qr/domain avro_nn_text does not allow null values/, 'its dead letter says why');
$r = run_json($node, "run_batch('avro_dom_absent_rows')");
is($node->safe_psql('postgres', 'SELECT count(*) FROM avro_dom_absent_rows'), '0',
	'a NOT NULL domain column that the writer schema lacks takes no row');
%dead = dead_letters_by_offset('avro_dom_absent');
is(scalar(keys %dead), 3, 'each message is a dead letter');
like($dead{0} // '(none)', qr/domain avro_nn_text does not allow null values/, 'saying why');

# Strings fill date, time and numeric columns through their input functions
# (Debezium's ZonedTimestamp for a timestamptz, numbers in its "string"
# decimal mode), as in JSON; a clock word or text the type refuses is a
# dead letter
registry_schema(52, { type => 'record', name => 'strs', fields => [
	{ name => 'id', type => 'int' },
	{ name => 'at', type => { type => 'string', 'connect.version' => 1, 'connect.name' => 'io.debezium.time.ZonedTimestamp' } },
	map({ { name => $_, type => 'string' } } qw(amt d t lt)) ] });
my @strs = ([ 1, '2026-03-08T02:30:00.123456Z', '12345.678', '2024-02-29', '23:59:59.999999', '1999-12-31 23:59:59' ],
	[ 2, '1999-12-31T23:59:59-05:00', '-0.005', '0001-01-01 BC', '00:00', '2038-01-19T03:14:08' ],
	[ 3, 'infinity', 'NaN', 'epoch', 'allballs', '-infinity' ],
	[ 4, 'now', '1', '2024-01-01', '00:00', '2024-01-01' ],
	[ 5, '2024-01-01Z', 'one', '2024-01-01', '00:00', '2024-01-01' ]);
$broker->produce('strs', [ map { my ($id, @v) = @$_; confluent(52, zz($id) . join('', map { av_string($_) } @v)) } @strs ],
	hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_strs', '$brokers', 'strs',
    'id int, at timestamptz, amt numeric(10,2), d date, t time, lt timestamp', 'avro', '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_strs_rows', 'SELECT id, at, amt, d, t, lt FROM avro_strs', start => false);
}, 'a source of strings for date, time and numeric columns');
$r = run_json($node, "run_batch('avro_strs_rows')");
results_match($node, 'SELECT id, at, amt, d, t, lt FROM avro_strs_rows',
	'SELECT id, at::timestamptz, amt::numeric(10,2), d::date, t::time, lt::timestamp FROM (VALUES '
	  . join(', ', map { '(' . join(', ', $_->[0], map { lit($_) } @$_[1 .. 5]) . ')' } @strs[0 .. 2])
	  . ') AS w(id, at, amt, d, t, lt)',
	'strings read into timestamptz, numeric, date, time and timestamp as their input functions read them');
%dead = dead_letters_by_offset('avro_strs');
like($dead{3} // '(none)', qr/now/, 'a clock word is a dead letter');
like($dead{4} // '(none)', qr/invalid input syntax for type numeric: "one"/, 'a string the type refuses is a dead letter');

# A logical type written on a reference to a named type is ignored: the
# named type is shared by every reference, and its definition says what it is.
registry_schema(31, { type => 'record', name => 'refs', fields => [
	{ name => 'a', type => { type => 'fixed', name => 'F', size => 2, logicalType => 'decimal', precision => 4, scale => 1 } },
	{ name => 'b', type => { type => 'F', logicalType => 'decimal', precision => 4, scale => 3 } } ] });
$broker->produce('ref', [ confluent(31, "\x01\x02\x03\x04") ], hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_ref', '$brokers', 'ref', 'a numeric, b numeric', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_ref_rows', 'SELECT a, b FROM avro_ref', start => false);
}, 'a source whose schema annotates a reference');
$r = run_json($node, "run_batch('avro_ref_rows')");
results_match($node, 'SELECT a, b FROM avro_ref_rows', q{VALUES (25.8, 77.2)},
	'a reference with a logical type reads as the named type it refers to');

# ==== 2b. Each way a field is read ================================================

# The decoder reads the common shapes of fields by cases of their own
# (a skipped field of each primitive type, a union of null and one type,
# timestamps, ints, doubles and strings into their plain columns) and the
# rest by the general reader: messages of two schemas interleaved, every
# skipped type between read fields, the columns a schema lacks NULL in
# rows that follow rows that had them, and each case's bad input.
registry_schema(33, { type => 'record', name => 'skips', fields => [
	{ name => 'a', type => 'long' }, { name => 'i', type => 'int' },
	{ name => 'f', type => 'float' }, { name => 'd', type => 'double' },
	{ name => 'x', type => { type => 'fixed', name => 'three', size => 3 } },
	{ name => 'e', type => { type => 'enum', name => 'ab', symbols => [qw(a b)] } },
	{ name => 'b', type => 'bytes' }, { name => 'flag', type => 'boolean' },
	{ name => 'u', type => [ 'null', 'string' ] }, { name => 's', type => 'string' },
	{ name => 'w', type => [ 'double', 'null' ] },
	{ name => 'arr', type => { type => 'array', items => 'long' } } ] });
registry_schema(34, { type => 'record', name => 'times', fields => [
	{ name => 'ts', type => { type => 'long', logicalType => 'timestamp-micros' } },
	{ name => 'ts3', type => { type => 'long', logicalType => 'timestamp-micros' } },
	{ name => 'lts', type => { type => 'long', logicalType => 'local-timestamp-millis' } },
	{ name => 'n', type => 'long' }, { name => 'o', type => [ 'long', 'null' ] },
	{ name => 'i', type => [ 'null', 'int' ] } ] });
sub skips_body
{
	my ($i, $s, $u, $w) = @_;
	return zz(rand_int(-1e15, 1e15)) . zz($i) . av_float(rand(10)) . av_double(rand(1e9))
	  . join('', map { chr(rand 256) } 1 .. 3) . zz(rand_int(0, 1)) . av_bytes(rand_bytes())
	  . av_bool(rand() < 0.5) . (defined $u ? zz(1) . av_string($u) : zz(0)) . av_string($s)
	  . (defined $w ? zz(0) . av_double($w) : zz(1))
	  . av_block([ map { zz(rand_int(-1e12, 1e12)) } 1 .. rand_int(0, 3) ]);
}
sub times_body
{
	my ($ts, $ts3, $lts, $n, $o, $i) = @_;
	return zz($ts) . zz($ts3) . zz($lts) . zz($n) . (defined $o ? zz(0) . zz($o) : zz(1))
	  . (defined $i ? zz(1) . zz($i) : zz(0));
}
my (@ops, @ops_want, @ops_bad);
for my $n (1 .. 90)
{
	if ($n % 2)
	{
		my ($i, $s) = (rand_int(-2**31, 2**31 - 1), rand_text());
		push @ops, confluent(33, skips_body($i, $s, rand() < 0.5 ? rand_text() : undef,
			rand() < 0.5 ? rand(100) : undef));
		push @ops_want, "($i, " . lit($s) . ', NULL::timestamptz, NULL::timestamptz(3), NULL::timestamp, NULL::bigint, NULL::bigint)';
	}
	else
	{
		my ($ts, $ts3, $lts) = (rand_int(-2e15, 4e15), rand_int(-2e15, 4e15), rand_int(-2e12, 4e12));
		my ($cnt, $o, $i) = (rand_int(1, 1e12), rand() < 0.3 ? undef : rand_int(-1e15, 1e15),
			rand() < 0.3 ? undef : rand_int(-2**31, 2**31 - 1));
		push @ops, confluent(34, times_body($ts, $ts3, $lts, $cnt, $o, $i));
		push @ops_want, '(' . ($i // 'NULL::int') . ', NULL::text, ' . since_epoch('timestamptz', $ts) . ', '
		  . since_epoch('timestamptz', $ts3) . '::timestamptz(3), ' . since_epoch('timestamp', $lts * 1000)
		  . ", $cnt, " . ($o // 'NULL') . ')';
	}
	next if $n % 10;
	# after every tenth message, one bad one
	my @kinds = (
		[ confluent(34, times_body(-1152921504606846976, 0, 0, 1, 1, 1)),
		  qr/timestamp -1152921504606846976 is out of range for type timestamp with time zone \(Avro field "ts" of the message\)/ ],
		[ confluent(34, times_body(0, 0, 2305843009213693952, 1, 1, 1)),
		  qr/timestamp 2305843009213693952 is out of range for type timestamp without time zone \(Avro field "lts" of the message\)/ ],
		[ confluent(34, times_body(0, 0, 0, -5, 1, 1)),
		  qr/value for domain ops_count violates check constraint .*\(Avro field "n" of the message\)/ ],
		[ confluent(34, zz(0) x 3 . zz(1) . zz(2) . zz(1)), qr/Avro union branch 2 out of range at byte 9/ ],
		[ confluent(34, zz(0) x 3 . zz(1) . "\x01" . zz(1)), qr/Avro union branch -1 out of range at byte 9/ ],
		[ confluent(34, zz(0) x 3 . zz(1)), qr/truncated at byte 9/ ],
		[ confluent(33, zz(1) . zz(2) . av_float(1) . av_double(2) . "\x01"), qr/truncated at byte 19/ ],
		[ confluent(33, zz(1) . zz(2) . av_float(1) . av_double(2) . 'xyz' . zz(1) . zz(0) . av_bool(1) . zz(3)),
		  qr/Avro union branch 3 out of range at byte 25/ ],
		[ confluent(34, times_body(0, 0, 0, 1, 1, 2**31)), qr/Avro int out of range at byte 12/ ]);
	my $k = $kinds[ $n / 10 - 1 ];
	push @ops, $k->[0];
	push @ops_bad, [ $#ops, $k->[1] ];
}
# varints of every length, 1 to 10 bytes, at the edges of each: the
# largest zigzag value of k bytes and the smallest of k + 1, as a long
# with more than 8 bytes after it (schema 35: read a word at a time) and
# as the body's last bytes (schema 36: read a byte at a time)
registry_schema(35, { type => 'record', name => 'padded', fields => [
	{ name => 'o', type => 'long' }, { name => 'pad', type => 'string' } ] });
registry_schema(36, { type => 'record', name => 'last', fields => [ { name => 'o', type => 'long' } ] });
sub zz_big
{
	my ($u) = @_;
	my $out = '';
	while ($u->bcmp(0x80) >= 0)
	{
		$out .= chr(($u->copy->band(0x7f)->numify) | 0x80);
		$u->brsft(7);
	}
	return $out . chr($u->numify);
}
for my $k (1 .. 9)
{
	for my $u (Math::BigInt->new(2)->bpow(7 * $k)->bsub(1), Math::BigInt->new(2)->bpow(7 * $k))
	{
		next if $u->bcmp(Math::BigInt->new(2)->bpow(64)) >= 0;
		# zigzag: an even u is u / 2, an odd one -(u + 1) / 2
		my $v = $u->is_even ? $u->copy->bdiv(2) : $u->copy->badd(1)->bdiv(2)->bneg;
		push @ops, confluent(35, zz_big($u->copy) . av_string('twelve bytes')), confluent(36, zz_big($u->copy));
		push @ops_want, ("(NULL::int, NULL::text, NULL::timestamptz, NULL::timestamptz(3), NULL::timestamp, NULL::bigint, $v)") x 2;
	}
}
$broker->produce('ops', \@ops, hex => 1);
psql_ok($node, qq{
CREATE DOMAIN ops_count AS bigint CHECK (VALUE > 0);
SELECT streamwin.create_kafka_source('avro_ops', '$brokers', 'ops',
    'i int, s text, ts timestamptz, ts3 timestamptz(3), lts timestamp, n ops_count, o bigint', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_ops_rows', 'SELECT * FROM avro_ops', start => false);
}, 'a source of two schemas whose fields are read every way');
$r = run_json($node, "run_batch('avro_ops_rows')");
is($r->{dead_letters}, scalar @ops_bad, 'each bad message is a dead letter');
results_match($node, 'SELECT i, s, ts, ts3, lts, n::bigint, o FROM avro_ops_rows',
	"VALUES\n" . join(",\n", @ops_want), 'every field read, skipped or NULL where it belongs: exact');
%dead = dead_letters_by_offset('avro_ops');
like($dead{ $_->[0] } // '(none)', $_->[1], "dead letter at offset $_->[0] says why") for @ops_bad;

# ==== 2c. Hostile, unsupported and subtle schemas ==================================

# A decimal of more digits than its precision allows is a dead letter: by
# its bytes before its (quadratic) conversion (bytes of sign extension do
# not count; 10 digits take 35 bits), then by its digits.
registry_schema(37, { type => 'record', name => 'dec', fields => [
	{ name => 'd', type => { type => 'bytes', logicalType => 'decimal', precision => 10, scale => 2 } } ] });
# Records of no bytes nested two to a level, 60 levels deep: a message of
# no bytes would be 2^60 values to skip.
my $zero = { type => 'record', name => 'Y0', fields => [ { name => 'n', type => 'null' } ] };
$zero = { type => 'record', name => "Y$_", fields => [ { name => 'a', type => $zero },
	{ name => 'b', type => 'Y' . ($_ - 1) } ] } for 1 .. 60;
registry_schema(38, { type => 'record', name => 'deep', fields => [ { name => 'z', type => $zero },
	{ name => 'd', type => { type => 'bytes', logicalType => 'decimal', precision => 10, scale => 2 } } ] });
# A schema with references to other subjects' schemas
open my $refs_fh, '>', "$regdir/39.json" or die;
print $refs_fh $json->encode({ schema => $json->encode({ type => 'record', name => 'order',
			fields => [ { name => 'd', type => 'com.acme.Amount' } ] }),
	references => [ { name => 'com.acme.Amount', subject => 'amount', version => 1 } ] });
close $refs_fh;
# A short name is the type of that name in the enclosing namespace first:
# "X" inside namespace n is n.X, not the X of no namespace defined before
registry_schema(40, { type => 'record', name => 'Main', fields => [
	{ name => 'x1', type => { type => 'record', name => 'X', fields => [ { name => 'v', type => 'int' } ] } },
	{ name => 'y', type => { type => 'record', name => 'Y', namespace => 'n', fields => [
		{ name => 'x2', type => { type => 'record', name => 'X', fields => [ { name => 's', type => 'string' } ] } },
		{ name => 'x3', type => 'X' } ] } } ] });
# Java's library writes a type of no namespace, referred to from inside a
# namespace, by its short name, and reads it back from there; avro-c does not
registry_schema(44, { type => 'record', name => 'Main', namespace => 'com.acme', fields => [
	{ name => 'x', type => { type => 'record', name => 'Inner', namespace => '', fields => [ { name => 'v', type => 'int' } ] } },
	{ name => 'y', type => 'Inner' } ] });
# ... but a short name found nowhere is still refused
registry_schema(45, { type => 'record', name => 'Main', namespace => 'com.acme', fields => [
	{ name => 'y', type => 'Nowhere' } ] });
# ... and so is what avro-c, stopped at the short name, would have refused
# after it, with the error of what is wrong
for ([ 46, { name => 'z', type => 'Nowhere' } ], [ 47, { name => 'z', type => [] } ],
	[ 48, { name => 'a-b', type => 'int' } ],
	[ 49, { name => 'z', type => { type => 'fixed', name => 'Inner', namespace => '', size => 2 } } ],
	[ 50, { name => 'z', type => { type => 'enum', name => 'E', symbols => [] } } ])
{
	my ($id, $field) = @$_;
	registry_schema($id, { type => 'record', name => 'Main', namespace => 'com.acme', fields => [
		{ name => 'x', type => { type => 'record', name => 'Inner', namespace => '', fields => [ { name => 'v', type => 'int' } ] } },
		{ name => 'y', type => 'Inner' }, $field ] });
}
# An array of records of no bytes: ten of them in the body's last byte
registry_schema(41, { type => 'record', name => 'empties', fields => [
	{ name => 'y', type => { type => 'array', items => { type => 'record', name => 'E', fields => [] } } } ] });
# A record that holds itself twice, which no body can hold: items of it
# are read as taking bytes, and the array runs out of them
registry_schema(42, { type => 'record', name => 'loops', fields => [
	{ name => 'y', type => { type => 'array', items => { type => 'record', name => 'R',
		fields => [ { name => 'a', type => 'R' }, { name => 'b', type => 'R' } ] } } } ] });
# ... and records of two nulls: no more values than a message may hold,
# nor more items of no bytes than its length allows (32 a byte, and 1,024
# more), nor more JSON (128 bytes a byte, and 16 kB more): 500 records, but
# not 300,000; nor 500 whose fields' long names make 200 kB of JSON
registry_schema(43, { type => 'record', name => 'nulls2', fields => [
	{ name => 'y', type => { type => 'array', items => { type => 'record', name => 'N',
		fields => [ { name => 'a', type => 'null' }, { name => 'b', type => 'null' } ] } } } ] });
registry_schema(51, { type => 'record', name => 'nulls_named', fields => [
	{ name => 'y', type => { type => 'array', items => { type => 'record', name => 'L',
		fields => [ { name => 'a' x 200, type => 'null' }, { name => 'b' x 200, type => 'null' } ] } } } ] });
my @hostile = (
	[ confluent(37, av_bytes(av_decimal(12345))), undef ],
	[ confluent(37, av_bytes("\x01" x 64)), qr/Avro decimal at byte 7 has more bytes than its precision 10 allows/ ],
	[ confluent(37, av_bytes(("\xff" x 40) . av_decimal(-5))), undef ],
	[ confluent(37, av_bytes(av_decimal('9999999999'))), undef ],
	[ confluent(37, av_bytes(av_decimal('-9999999999'))), undef ],
	[ confluent(37, av_bytes(av_decimal('10000000000'))), qr/Avro decimal at byte 6 has more digits than its precision 10 allows/ ],
	[ confluent(37, av_bytes(av_decimal('-10000000000'))), qr/Avro decimal at byte 6 has more digits than its precision 10 allows/ ],
	[ confluent(37, av_bytes("\x00\x80\x00\x00\x00\x00")), qr/Avro decimal at byte 6 has more bytes than its precision 10 allows/ ],
	[ confluent(38, av_bytes(av_decimal(1))), qr/Avro message of 7 bytes holds more values than it can/ ],
	[ confluent(39, av_bytes(av_decimal(1))), qr/Avro writer schema 39 refers to types of other subjects' schemas \(schema references\), which streamwin does not read/ ],
	[ confluent(40, zz(5) . av_string('a') . av_string('b')), undef ],
	[ confluent(41, zz(10) . zz(0)), undef ],
	[ confluent(42, zz(10) . zz(0)), qr/invalid Avro block count at byte 5/ ],
	[ confluent(43, zz(500) . zz(0)), undef ],
	[ confluent(43, zz(300000) . zz(0)),
	  qr/invalid Avro block count at byte 5: more than 1312 nulls or other items of no bytes in the arrays of a message of 9 bytes/ ],
	[ confluent(51, zz(500) . zz(0)), qr/Avro value at byte \d+ makes more than 17408 bytes of JSON from a message of 8 bytes/ ],
	[ confluent(44, zz(5) . zz(7)), undef ],
	[ confluent(45, zz(5)), qr/writer schema 45 is not a valid Avro schema: Unknown Avro "type": Nowhere/ ],
	[ confluent(46, zz(5)), qr/writer schema 46 is not a valid Avro schema: unknown type "Nowhere"/ ],
	[ confluent(47, zz(5)), qr/writer schema 47 is not a valid Avro schema: a union has no branches/ ],
	[ confluent(48, zz(5)), qr/writer schema 48 is not a valid Avro schema: field "a-b" of record "com.acme.Main" is not a valid name/ ],
	[ confluent(49, zz(5)), qr/writer schema 49 is not a valid Avro schema: type "Inner" is defined twice/ ],
	[ confluent(50, zz(5)), qr/writer schema 50 is not a valid Avro schema: enum "com.acme.E" has no symbols/ ]);
$broker->produce('hostile', [ map { $_->[0] } @hostile ], hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_hostile', '$brokers', 'hostile', 'd numeric, y jsonb', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_hostile_rows', 'SELECT d, y FROM avro_hostile', start => false);
}, 'a source of hostile, unsupported and subtle schemas');
$r = run_json($node, "run_batch('avro_hostile_rows')");
is($r->{dead_letters}, scalar(grep { $_->[1] } @hostile), 'hostile and unsupported messages are dead letters');
is($node->safe_psql('postgres', q{SELECT count(*) FROM avro_hostile_rows
 WHERE jsonb_typeof(y) = 'array' AND jsonb_array_length(y) = 500 AND y->0 = '{"a": null, "b": null}'
   AND y->499 = '{"a": null, "b": null}'}), '1', 'an array of 500 records of nulls is read');
results_match($node, q{SELECT d, y FROM avro_hostile_rows
 WHERE y IS NULL OR jsonb_typeof(y) <> 'array' OR jsonb_array_length(y) <> 500},
	q{VALUES (123.45, NULL::jsonb), (-0.05, NULL), (99999999.99, NULL), (-99999999.99, NULL), (NULL, '{"x2": {"s": "a"}, "x3": {"s": "b"}}'),
	  (NULL, '[{}, {}, {}, {}, {}, {}, {}, {}, {}, {}]'), (NULL, '{"v": 7}')},
	'decimals with sign extension, a short name in its namespace or in none, an array of empty records: exact');
%dead = dead_letters_by_offset('avro_hostile');
for my $o (0 .. $#hostile)
{
	like($dead{$o} // '(none)', $hostile[$o][1], "dead letter at offset $o says why") if $hostile[$o][1];
}

# ==== 3. The registry failing ====================================================

registry_schema(6, { type => 'record', name => 'd', fields => [ { name => 'n', type => 'long' } ] });
$broker->produce('down', [ map { confluent(6, zz($_)) } 1 .. 20 ], hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_down', '$brokers', 'down', 'n bigint', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_down_rows', 'SELECT n FROM avro_down', start => false);
}, 'a source whose registry fails');
my $nothing_moved = q{
SELECT (SELECT count(*) FROM streamwin.query_offsets o JOIN streamwin.query_catalog q USING (query_id)
         WHERE q.name = 'avro_down_rows' AND o.next_offset > 0)
     + (SELECT count(*) FROM avro_down_rows)
     + (SELECT count(*) FROM streamwin.dead_letters WHERE source = 'avro_down')
     + (SELECT count(*) FROM streamwin.avro_schemas WHERE schema_id = 6)};
registry_mode('500');
fails_like($node, "SELECT streamwin.run_batch('avro_down_rows')",
	qr/could not fetch Avro schema 6 from the schema registry.*\n.*HTTP 500: .*store unavailable/,
	'registry answering 500: the batch fails with the error');
is($node->safe_psql('postgres', $nothing_moved), '0', '... no offset moved, nothing dead-lettered or kept');
registry_mode('other');
fails_like($node, "SELECT streamwin.run_batch('avro_down_rows')",
	qr/could not fetch Avro schema 6 from the schema registry.*\n.*HTTP 403: 45 bytes that are not the registry's error/,
	'another service answering: the error gives its length, not its answer');
unlike($node->safe_psql('postgres', q{SELECT last_error FROM streamwin.queries WHERE name = 'avro_down_rows'}) // '',
	qr/AKIDSECRET/, '... nor does the query\'s last error');
registry_mode('hang');
my $t0 = time;
fails_like($node, "SELECT streamwin.run_batch('avro_down_rows')",
	qr/could not fetch Avro schema 6 from the schema registry.*\n.*(timed out|Timeout)/i,
	'registry hanging: the batch fails with a timeout');
ok(time - $t0 < 10, 'the request is bounded by streamwin.schema_registry_timeout');
registry_mode('ok');
registry_stop();
fails_like($node, "SELECT streamwin.run_batch('avro_down_rows')",
	qr/could not fetch Avro schema 6 from the schema registry.*\n.*(refused|connect)/i,
	'registry gone: the batch fails');
is($node->safe_psql('postgres', $nothing_moved), '0', '... no offset moved, nothing dead-lettered or kept');
registry_start();
$r = run_json($node, "run_batch('avro_down_rows')");
results_match($node, 'SELECT n FROM avro_down_rows', 'SELECT generate_series(1, 20)::bigint',
	'registry back: exact');

# a user and password in the registry's URL stay out of the error
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_login', '$brokers', 'down', 'n bigint', 'avro',
    '{"schema_registry": "http://someone:secretpw\@127.0.0.1:1/"}');
SELECT streamwin.create_query('avro_login_rows', 'SELECT n FROM avro_login', start => false);
}, 'a source whose registry URL holds a login');
fails_like($node, "SELECT streamwin.run_batch('avro_login_rows')",
	qr{could not fetch Avro schema 6 from the schema registry at "http://127\.0\.0\.1:1/"},
	'the registry error names the URL without its login');

# ... and with a worker: the query shows the error and goes on when it is back
registry_schema(7, { type => 'record', name => 'd', fields => [ { name => 'n', type => 'long' } ] });
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_live', '$brokers', 'live', 'n bigint', 'avro',
    '{"schema_registry": "$registry"}');
SELECT streamwin.create_query('avro_live_rows', 'SELECT n FROM avro_live', trigger_interval => '100 ms');
}, 'a running query');
$broker->produce('live', [ map { confluent(6, zz($_)) } 1 .. 10 ], hex => 1);
wait_results_match($node, 'SELECT n FROM avro_live_rows', 'SELECT generate_series(1, 10)::bigint',
	'the worker decodes schema 6 (kept by another source: fetched for this one)');
registry_mode('500');
$broker->produce('live', [ map { confluent(7, zz($_)) } 11 .. 30 ], hex => 1);
wait_until($node, q{SELECT last_error LIKE 'could not fetch Avro schema 7%' FROM streamwin.queries
 WHERE name = 'avro_live_rows'}, 't', 'the query shows the registry error');
is($node->safe_psql('postgres', q{SELECT count(*) FROM avro_live_rows}), '10',
	'... and its batch is not committed');
registry_mode('ok');
wait_results_match($node, 'SELECT n FROM avro_live_rows', 'SELECT generate_series(1, 30)::bigint',
	'registry back: the worker goes on exactly');
is($node->safe_psql('postgres', q{SELECT count(*) FROM streamwin.dead_letters WHERE source = 'avro_live'}),
	'0', 'nothing was dead-lettered');
psql_ok($node, q{SELECT streamwin.stop_query('avro_live_rows')}, 'stop the worker');

# ==== 6. Upserts with Avro keys and values ========================================

registry_schema(10, 'long');
registry_schema(11, { type => 'record', name => 'key', fields => [ { name => 'id', type => 'long' } ] });
registry_schema(12, { type => 'record', name => 'row', fields => [
	{ name => 'id', type => 'long' }, { name => 'name', type => 'string' },
	{ name => 'amount', type => { type => 'bytes', logicalType => 'decimal', precision => 10, scale => 2 } } ] });
my (@ups, %table, @ups_dead);
for my $n (0 .. 79)
{
	my $id = rand_int(1, 15);
	# the key as a long (schema 10) or as a record of it (schema 11): the same bytes after the id
	my $key = confluent($n % 2 ? 10 : 11, zz($id));
	if ($n == 40)
	{
		# key and value of a schema the registry lacks
		push @ups, [ 0, confluent(98, zz($id)), confluent(98, zz(-1)) ];
		push @ups_dead, $n;
		next;
	}
	if (rand() < 0.2)
	{
		push @ups, [ 0, $key, undef ];
		delete $table{$id};
		next;
	}
	my ($name, $cents) = (rand_text(), rand_int(-99_999_999, 99_999_999));
	# the value's id is not the key's: the key wins
	push @ups, [ 0, $key, confluent(12, zz($id + 1000) . av_string($name) . av_bytes(av_decimal($cents))) ];
	$table{$id} = [ $name, $cents ];
}
$broker->produce('ups', \@ups, keys => 1, hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_ups', '$brokers', 'ups', 'id bigint, name text, amount numeric(10,2)',
    'avro', '{"schema_registry": "$registry", "envelope": "upsert", "key_columns": ["id"]}');
SELECT streamwin.create_query('avro_ups_rows', 'SELECT id, name, amount FROM avro_ups', start => false);
}, 'an upsert source of Avro keys and values');
run_json($node, "run_available('avro_ups_rows')");
results_match($node, 'SELECT id, name, amount FROM avro_ups_rows',
	%table
	? 'VALUES ' . join(', ', map { "($_, " . lit($table{$_}[0]) . ", '$table{$_}[1]e-2'::numeric)" } sort { $a <=> $b } keys %table)
	: 'SELECT NULL::bigint, NULL::text, NULL::numeric WHERE false',
	'upserts and deletes by Avro keys: the table the messages make');
like($node->safe_psql('postgres', q{SELECT string_agg("offset" || ': ' || error, '; ') FROM streamwin.dead_letters
 WHERE source = 'avro_ups'}), qr/^40: Avro writer schema 98 is not in the schema registry$/,
	'a message of a schema the registry lacks is a dead letter');
is(registry_requests(98), 1, '... asked for once in its batch, for the value and the key');

# ==== 7. Debezium change events in Avro ===========================================

my $dbz_value = { type => 'record', name => 'Value', fields => [
	{ name => 'id', type => 'long' }, { name => 'name', type => 'string' },
	{ name => 'amount', type => { type => 'bytes', logicalType => 'decimal', precision => 10, scale => 2 } } ] };
registry_schema(20, { type => 'record', name => 'Envelope', namespace => 'dbz.shop.orders', fields => [
	{ name => 'before', type => [ 'null', $dbz_value ] },
	{ name => 'after', type => [ 'null', 'Value' ] },
	{ name => 'source', type => { type => 'record', name => 'Source', fields => [
		{ name => 'connector', type => 'string' }, { name => 'ts_ms', type => 'long' } ] } },
	{ name => 'op', type => 'string' },
	{ name => 'ts_ms', type => [ 'null', 'long' ] } ] });
sub dbz_image { my ($row) = @_; return defined $row ? zz(1) . zz($row->[0]) . av_string($row->[1]) . av_bytes(av_decimal($row->[2])) : zz(0) }
sub dbz_event
{
	my ($op, $before, $after) = @_;
	return confluent(20, dbz_image($before) . dbz_image($after) . av_string('postgresql')
		  . zz(1_700_000_000_000) . av_string($op) . zz(1) . zz(1_700_000_000_123));
}
my (@dbz, %dbz_rows, %dbz_dead, $dbz_update_offset, $dbz_truncate_offset);
for my $n (0 .. 99)
{
	my $id = rand_int(1, 12);
	my $key = confluent(10, zz($id));
	# (the offset of a message is its index: one partition)
	if ($n == 30)
	{
		$dbz_dead{ scalar @dbz } = qr/^unknown Debezium op "x"/;
		push @dbz, [ 0, $key, dbz_event('x', undef, [ $id, 'x', 1 ]) ];
		next;
	}
	if ($n == 45)
	{
		# Debezium's placeholder for a large value an update left unchanged
		# (REPLICA IDENTITY not FULL): a dead letter, the key's row kept
		$dbz_dead{ scalar @dbz } = qr/^column "name" of the "after" row of a Debezium event holds Debezium's placeholder for a value it did not have.*REPLICA IDENTITY FULL/;
		push @dbz, [ 0, $key, dbz_event('u', $dbz_rows{$id}, [ $id, '__debezium_unavailable_value', 1 ]) ];
		next;
	}
	if ($n == 80)
	{
		# a truncate: every row goes
		$dbz_truncate_offset = @dbz;
		push @dbz, [ 0, undef, dbz_event('t', undef, undef) ];
		%dbz_rows = ();
		next;
	}
	if ($n == 60)
	{
		# no "before" (Debezium without REPLICA IDENTITY FULL): with key
		# columns, the after row is the key's new row all the same
		$dbz_update_offset = @dbz;
		push @dbz, [ 0, $key, dbz_event('u', undef, [ $id, 'x', 1 ]) ];
		$dbz_rows{$id} = [ $id, 'x', 1 ];
		next;
	}
	my $new = [ $id, rand_text(), rand_int(-99_999_999, 99_999_999) ];
	if (!$dbz_rows{$id})
	{
		push @dbz, [ 0, $key, dbz_event($n % 3 ? 'c' : 'r', undef, $new) ];
		$dbz_rows{$id} = $new;
	}
	elsif (rand() < 0.3)
	{
		push @dbz, [ 0, $key, dbz_event('d', $dbz_rows{$id}, undef) ], [ 0, $key, undef ];
		delete $dbz_rows{$id};
	}
	else
	{
		push @dbz, [ 0, $key, dbz_event('u', $dbz_rows{$id}, $new) ];
		$dbz_rows{$id} = $new;
	}
}
$broker->produce('dbz', \@dbz, keys => 1, hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_dbz', '$brokers', 'dbz', 'id bigint, name text, amount numeric(10,2)',
    'avro', '{"schema_registry": "$registry", "envelope": "debezium", "key_columns": ["id"]}');
SELECT streamwin.create_query('avro_dbz_rows', 'SELECT id, name, amount FROM avro_dbz', start => false);
}, 'a Debezium source of Avro change events');
run_json($node, "run_available('avro_dbz_rows')");
results_match($node, 'SELECT id, name, amount FROM avro_dbz_rows',
	%dbz_rows
	? 'VALUES ' . join(', ', map { "($_, " . lit($dbz_rows{$_}[1]) . ", '$dbz_rows{$_}[2]e-2'::numeric)" } sort { $a <=> $b } keys %dbz_rows)
	: 'SELECT NULL::bigint, NULL::text, NULL::numeric WHERE false',
	'inserts, updates and deletes of Avro change events: the table they make');
my %dbz_got = map { my ($o, $e) = split /\t/; ($o => $e) } split /\n/, $node->safe_psql('postgres',
	q{SELECT "offset", error FROM streamwin.dead_letters WHERE source = 'avro_dbz'},
	extra_params => [ '-F', "\t" ]);
is(join(',', sort { $a <=> $b } keys %dbz_got), join(',', sort { $a <=> $b } keys %dbz_dead),
	'two dead letters, at their offsets');
like($dbz_got{$_} // '(none)', $dbz_dead{$_}, "dead letter at offset $_ says why") for sort { $a <=> $b } keys %dbz_dead;

# The same events without key columns: the update without "before" is a
# dead letter, and the truncate stops the query, loudly.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_dbz_nokey', '$brokers', 'dbz', 'id bigint, name text, amount numeric(10,2)',
    'avro', '{"schema_registry": "$registry", "envelope": "debezium", "max_records_per_batch": $dbz_truncate_offset}');
SELECT streamwin.create_query('avro_dbz_nokey_rows', 'SELECT id, name, amount, __streamwin_change FROM avro_dbz_nokey',
    start => false);
}, 'a Debezium source of the same Avro events without key columns');
my $nokey_error = '';
for (1 .. 10)
{
	last if $node->psql('postgres', "SELECT streamwin.run_batch('avro_dbz_nokey_rows')", stderr => \$nokey_error) != 0;
}
like($nokey_error, qr/Debezium source "avro_dbz_nokey" has a truncate event at partition 0, offset $dbz_truncate_offset/,
	'without key columns a truncate in Avro fails the batch');
like($node->safe_psql('postgres', qq{SELECT string_agg("offset" || ': ' || error, '; ') FROM streamwin.dead_letters
 WHERE source = 'avro_dbz_nokey' AND "offset" = $dbz_update_offset}),
	qr/^$dbz_update_offset: Debezium event with op "u" has no "before" row: a source without key_columns retracts an update's old row from it$/,
	'without key columns an update without "before" in Avro is a dead letter');

# ==== 7b. Debezium's times in Avro ================================================

# Kafka Connect's Avro converter writes Debezium's time types as plain ints
# and longs named only by "connect.name"; they read as the Avro logical
# types they are (a MicroTimestamp as a local-timestamp-micros), and a
# column of the underlying type still takes the number as it is.  So are a
# VariableScaleDecimal (a record of its scale and unscaled bytes, for a
# numeric column without a typmod) and a Json string (the document, for
# a jsonb column).
my $dbz_times_value = { type => 'record', name => 'Value', fields => [
	{ name => 'id', type => 'long' },
	map({ { name => $_->[0], type => { type => $_->[1], 'connect.version' => 1, 'connect.name' => "io.debezium.time.$_->[2]" } } }
		[ 'ts', 'long', 'MicroTimestamp' ], [ 'ms', 'long', 'Timestamp' ], [ 'd', 'int', 'Date' ],
		[ 't', 'int', 'Time' ], [ 'mt', 'long', 'MicroTime' ], [ 'raw', 'long', 'MicroTimestamp' ]),
	{ name => 'amount', type => [ 'null', { type => 'record', name => 'VariableScaleDecimal', namespace => 'io.debezium.data',
		fields => [ { name => 'scale', type => 'int' }, { name => 'value', type => 'bytes' } ],
		'connect.version' => 1, 'connect.name' => 'io.debezium.data.VariableScaleDecimal' } ] },
	{ name => 'doc', type => { type => 'string', 'connect.version' => 1, 'connect.name' => 'io.debezium.data.Json' } } ] };
registry_schema(21, { type => 'record', name => 'Envelope', namespace => 'dbz.shop.times', fields => [
	{ name => 'before', type => [ 'null', $dbz_times_value ] },
	{ name => 'after', type => [ 'null', 'Value' ] },
	{ name => 'op', type => 'string' } ] });
my (@dbz_times, @dbz_times_want);
for my $id (1 .. 40)
{
	my @v = (rand_int(-2**50, 2**50), rand_int(-2**40, 2**40), rand_int(-700_000, 2_900_000),
		rand_int(0, 86_399_999), rand_int(0, 86_399_999_999), rand_int(-2**52, 2**52));
	# a numeric of any scale (a VariableScaleDecimal; every 5th NULL) and
	# a jsonb column's document (a Json string)
	my ($unscaled, $scale) = (join('', map { int(rand(10)) } 1 .. rand_int(1, 30)), rand_int(0, 12));
	$unscaled = "-$unscaled" if rand() < 0.4;
	my $amount = $id % 5 == 0 ? undef : [ $unscaled, $scale ];
	my $doc = $json->encode({ id => $id, tags => [ rand_ascii(), rand_text() ], n => rand_int(-99, 99) });
	push @dbz_times, [ 0, undef, confluent(21, zz(0) . zz(1) . zz($id) . join('', map { zz($_) } @v)
		  . (defined $amount ? zz(1) . zz($scale) . av_bytes(av_decimal($unscaled)) : zz(0)) . av_string($doc)
		  . av_string('c')) ];
	push @dbz_times_want, sprintf('(%d, %s, %s, %s, %s, %s, %d, %s, %s)', $id, since_epoch('timestamp', $v[0]),
		since_epoch('timestamp', $v[1] * 1000), "('1970-01-01'::date + $v[2])",
		"('00:00'::time + " . us_interval($v[3] * 1000) . ')', "('00:00'::time + " . us_interval($v[4]) . ')', $v[5],
		defined $amount ? "'" . decimal_text($unscaled, $scale) . "'::numeric" : 'NULL::numeric', lit($doc) . '::jsonb');
}
# Debezium's PostgreSQL connector writes a timestamp of 'infinity' and of
# '-infinity' as two numbers, whatever the unit: a microsecond timestamp
# of the first would be a date in the year 294247
for my $inf ([ 41, 9223372036825200000, 'infinity' ], [ 42, -9223372036832400000, '-infinity' ])
{
	my ($id, $v, $word) = @$inf;
	push @dbz_times, [ 0, undef, confluent(21, zz(0) . zz(1) . zz($id) . zz($v) . zz($v) . zz(0) x 3 . zz($id)
		  . zz(0) . av_string('{}') . av_string('c')) ];
	push @dbz_times_want, "($id, '$word'::timestamp, '$word'::timestamp, '1970-01-01'::date, '00:00'::time, "
	  . "'00:00'::time, $id, NULL::numeric, '{}'::jsonb)";
}
$broker->produce('dbz_times', \@dbz_times, keys => 1, hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_dbz_times', '$brokers', 'dbz_times',
    'id bigint, ts timestamp, ms timestamp, d date, t time, mt time, raw bigint, amount numeric, doc jsonb',
    'avro', '{"schema_registry": "$registry", "envelope": "debezium", "key_columns": ["id"]}');
SELECT streamwin.create_query('avro_dbz_times_rows', 'SELECT id, ts, ms, d, t, mt, raw, amount, doc FROM avro_dbz_times',
    start => false);
}, 'a Debezium source of Avro events with Debezium time types');
run_json($node, "run_available('avro_dbz_times_rows')");
results_match($node, 'SELECT id, ts, ms, d, t, mt, raw, amount::text, doc FROM avro_dbz_times_rows',
	'SELECT id, ts, ms, d, t, mt, raw, amount::text, doc FROM (VALUES ' . join(', ', @dbz_times_want)
	  . ') AS w(id, ts, ms, d, t, mt, raw, amount, doc)',
	"Debezium's types in Avro: microsecond and millisecond timestamps, dates, times, a long kept as it is, "
	  . "VariableScaleDecimals with their scales, Json documents, Debezium's infinities");
is($node->safe_psql('postgres', q{SELECT count(*) FROM streamwin.dead_letters WHERE source = 'avro_dbz_times'}),
	'0', "Debezium's types in Avro: no dead letter");

# ==== 8. Key metadata columns =====================================================

my (@keyed, @keyed_want);
for my $n (0 .. 11)
{
	my $name = "n$n";
	my $value = confluent(12, zz($n) . av_string($name) . av_bytes(av_decimal($n)));
	my ($key, $kjson) = $n % 3 == 0 ? (confluent(10, zz(1000 + $n)), 1000 + $n)
	  : $n % 3 == 1 ? (confluent(11, zz($n)), qq({"id": $n}))
	  : (undef, undef);
	if ($n == 5)
	{
		($key, $kjson) = ("\x07key-5", undef);
		push @keyed, [ 0, $key, $value ];
		next;
	}
	push @keyed, [ 0, $key, $value ];
	push @keyed_want, '(' . join(', ', lit($name), defined $kjson ? lit($kjson) . '::jsonb' : 'NULL::jsonb',
			defined $key ? hexlit($key) : 'NULL::bytea') . ')';
}
$broker->produce('keyed', \@keyed, keys => 1, hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_keyed', '$brokers', 'keyed', 'name text, k jsonb, kb bytea',
    'avro', '{"schema_registry": "$registry", "metadata": {"k": "key", "kb": "key"}}');
SELECT streamwin.create_query('avro_keyed_rows', 'SELECT name, k, kb FROM avro_keyed', start => false);
}, 'an Avro source with key metadata columns');
run_json($node, "run_available('avro_keyed_rows')");
results_match($node, 'SELECT name, k, kb FROM avro_keyed_rows', 'VALUES ' . join(', ', @keyed_want),
	'keys decoded by their writer schemas into jsonb, and as bytes into bytea');
is($node->safe_psql('postgres', q{SELECT "offset" || ': ' || error FROM streamwin.dead_letters WHERE source = 'avro_keyed'}),
	'5: message key: wrong magic byte 0x07: not the Confluent Avro format', 'a key that is not Avro is a dead letter');

# ==== 4. A restart with the registry gone ========================================

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_types50', '$brokers', 'types', '$coldefs', 'avro',
    '{"schema_registry": "$registry", "max_records_per_batch": 50}');
SELECT streamwin.create_query('avro_agg', 'SELECT e, count(*) AS n, sum(l) AS s FROM avro_types50 GROUP BY e',
    output_mode => 'update', start => false);
}, 'an aggregation over the first topic');
# batches of 50, each in its own transaction: checkpoints after the first
# and the third, the fourth after them
run_json($node, "run_batch('avro_agg')") for 1 .. 4;
registry_stop();
my $requests_before = join(',', map { registry_requests($_) } 1 .. 3);
$node->stop('immediate');
$node->start;
$r = run_json($node, "run_batch('avro_agg')");
ok($r->{replayed} && $node->log_contains('query "avro_agg" lost its state in a crash; restoring the checkpoint'),
	'after a crash with the registry gone, the aggregation restores its checkpoint and replays')
  or diag(explain $r);
run_json($node, "run_available('avro_agg')");
results_match($node, 'SELECT e, n, s FROM avro_agg',
	"SELECT e, count(*), sum(l) FROM ($want_sql) w GROUP BY e", '... and goes on exactly');
psql_ok($node, q{
SELECT streamwin.create_query('avro_rows_again', 'SELECT * FROM avro_types', start => false);
}, 'a new query over the first topic');
$r = run_json($node, "run_available('avro_rows_again')");
is($r->{input_rows}, 240, 'it reads every message');
results_match($node, "SELECT $got_cols FROM avro_rows_again",
	"SELECT $got_cols FROM ($want_sql) w", 'decoded exactly from the schemas in the catalog');
is(join(',', map { registry_requests($_) } 1 .. 3), $requests_before, 'without asking the registry');

# ==== 5. Option avro_schema: plain bodies =========================================

my $plain = { type => 'record', name => 'p', fields => [
	{ name => 'k', type => 'string' }, { name => 'v', type => [ 'null', 'double' ] } ] };
my @plain_rows = map { [ "k$_", $_ % 3 ? $_ / 4 : undef ] } 1 .. 12;
$broker->produce('plain', [ map { av_string($_->[0]) . (defined $_->[1] ? zz(1) . av_double($_->[1]) : zz(0)) }
	  @plain_rows ], hex => 1);
my $plain_json = $json->encode($plain);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_plain', '$brokers', 'plain', 'k text, v float8', 'avro',
    jsonb_build_object('avro_schema', '$plain_json'::jsonb));
SELECT streamwin.create_query('avro_plain_rows', 'SELECT * FROM avro_plain', start => false);
}, 'a source of plain Avro bodies of one writer schema');
run_json($node, "run_available('avro_plain_rows')");
results_match($node, 'SELECT k, v FROM avro_plain_rows',
	'VALUES ' . join(', ', map { "('$_->[0]', " . ($_->[1] // 'NULL') . '::float8)' } @plain_rows),
	'plain bodies: exact');

# ==== 9. Strings of every length ===================================================

# A batch's text values are carved from blocks of 64 kB of its memory, and
# one of more than 8 kB gets an allocation of its own.  Batches of 300
# messages of short and long strings (many blocks a batch, and both ways),
# a nullable string beside; every 97th body cut short, which the decoder
# reports, and every 89th an n out of the int column's range, which
# throws: the batch's messages are then decoded again, in halves, each in
# a subtransaction.  Every value must be the one encoded, which plain SQL
# writes again from the message's number.
my $texts_n = 2500;
my $texts_schema = $json->encode({ type => 'record', name => 't', fields => [
	{ name => 'n', type => 'long' }, { name => 's', type => 'string' },
	{ name => 'm', type => [ 'null', 'string' ] } ] });
$broker->produce('texts', [ map {
	my $body = zz($_ % 89 ? $_ : 2**40 + $_) . av_string(text_of_length($_)) . ($_ % 3 ? zz(1) . av_string("m$_") : zz(0));
	$_ % 97 ? $body : substr($body, 0, length($body) - 2) } 1 .. $texts_n ], hex => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('avro_texts', '$brokers', 'texts', 'n int, s text, m text', 'avro',
    jsonb_build_object('avro_schema', '$texts_schema'::jsonb, 'max_records_per_batch', 300));
SELECT streamwin.create_query('avro_texts_rows', 'SELECT * FROM avro_texts', start => false);
}, 'strings of every length: a transform');
my $texts_run = run_json($node, "run_available('avro_texts_rows')");
cmp_ok($texts_run->{batches}, '>=', int($texts_n / 300), 'strings of every length: in batches of 300');
results_match($node, 'SELECT n, length(s), md5(s), m FROM avro_texts_rows',
	'SELECT w.*, CASE WHEN n % 3 <> 0 THEN \'m\' || n END FROM (' . texts_want_sql($texts_n, 97, 89)
	  . ') AS w(n, len, md5)',
	'strings of every length: exact');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FILTER (WHERE error LIKE 'Avro body ends early%'),
		         count(*) FILTER (WHERE error LIKE '%out of range for type integer%')
		    FROM streamwin.dead_letters WHERE source = 'avro_texts'}),
	int($texts_n / 97) . '|' . int($texts_n / 89),
	'strings of every length: the bodies cut short and the values out of range are dead letters');

done_testing();
