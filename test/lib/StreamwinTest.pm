
# StreamwinTest.pm: helpers for streamwin's TAP tests (test/t/*.pl).
#
# The tests check streamwin against an independent computation: they generate
# events in Perl, produce them to a Kafka topic on a private test broker, load
# the same events into an ordinary table, compute the expected result with
# plain SQL (or a Perl simulation), and compare multisets.  This module holds
# the plumbing for that:
#
#   my $broker = StreamwinTest::Broker->start(topics => { ev => 4 });
#   $broker->bootstrap;                       # "127.0.0.1:39761"
#   $broker->produce('ev', [ [0, $json], [1, $json] ]);   # or plain payloads
#   my $bg = $broker->produce('ev', \@msgs, rate => 2000, background => 1);
#   $bg->finish;                              # ok() that all were delivered
#   $broker->down; $broker->up;               # SIGUSR1 / SIGUSR2
#
#   my $node = new_node('main');              # started, CREATE EXTENSION done
#   load_table($node, 'ev', 'k text, v int, ts timestamptz', \@rows);
#   results_match($node, $got_sql, $want_sql, 'name');
#   wait_results_match($node, $got_sql, $want_sql, 'name');
#   wait_until($node, $sql, $expected, 'what');
#   my $r = query_json($node, "SELECT streamwin.run_available('q')");
#
# Environment:
#   STREAMWIN_TEST_BINDIR  directory holding kafka_broker and kafka_produce
#                          (default: test/, next to this lib/ directory)
#   STREAMWIN_PID_DIR      if set, each broker's pid is recorded there so that
#                          run_tests.sh can kill brokers of a killed test
#   STREAMWIN_TEST_TIMEOUT seconds the wait helpers wait (default 120)

package StreamwinTest;

use strict;
use warnings;

use Carp;
use Exporter 'import';
use File::Basename qw(dirname);
use File::Spec;
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(
  new_node load_table results_match wait_results_match wait_until
  query_json run_json psql_ok ts_text windows_sql values_sql diag_queries
  user_role_sql fails_like
  store_session sess sess_ok store_switches table_mode_sql table_mode
  checkpoint_matches join_checkpoint_sides log_count worker_pid feed_until_sql crash_round
  crash_by_sigkill new_session_batch restore_after_crash
  text_of_length texts_want_sql dead_letters_match
);

our $bindir = $ENV{STREAMWIN_TEST_BINDIR}
  // File::Spec->rel2abs(dirname(__FILE__) . '/..');
our $timeout = $ENV{STREAMWIN_TEST_TIMEOUT} // 120;

=pod

=head1 Nodes

new_node(NAME, conf => EXTRA_CONF_TEXT, extension => 1, preload => 1,
allows_streaming => 0, install_path => DIR)

A PostgreSQL::Test::Cluster node, initialized with UTF8 encoding and the C
locale, configured for streamwin (shared_preload_libraries unless preload =>
0, wal_level = logical, enough worker processes and slots, timezone UTC),
started, with CREATE EXTENSION streamwin done in database postgres (unless
extension => 0).  Sessions of the tests run in UTC.  allows_streaming => 1
lets standbys stream from it (PostgreSQL::Test::Cluster's init option).
install_path => DIR runs the PostgreSQL installation whose bin/ is in DIR
(PostgreSQL::Test::Cluster's option) instead of the one on PATH.

=cut

sub new_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $opts{install_path} ? (install_path => $opts{install_path}) : ());
	$node->init(
		extra            => [ '--encoding=UTF8', '--locale=C' ],
		allows_streaming => $opts{allows_streaming} // 0);
	$node->append_conf(
		'postgresql.conf', qq{
# streamwin test settings (StreamwinTest.pm)
wal_level = logical
max_worker_processes = 32
max_replication_slots = 10
max_wal_senders = 10
timezone = 'UTC'
log_timezone = 'UTC'
log_min_messages = info
log_error_verbosity = default
});
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'streamwin'\n")
	  unless defined $opts{preload} && !$opts{preload};
	$node->append_conf('postgresql.conf', $opts{conf}) if defined $opts{conf};
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION streamwin')
	  unless defined $opts{extension} && !$opts{extension};
	return $node;
}

=pod

=head1 Loading expected data

load_table(NODE, TABLE, COLUMN_DEFS, ROWS)

Creates TABLE (COLUMN_DEFS) and loads ROWS (array of array refs, undef =
NULL) with \copy in CSV format.  Values are character strings, written as
UTF-8 (a byte 0xE9 in a Perl string is "\x{e9}", written as C3 A9); give
bytea values in hex input form ('\\x4142').

=cut

sub load_table
{
	my ($node, $table, $coldefs, $rows) = @_;
	my $file = PostgreSQL::Test::Utils::tempdir() . "/$table.csv";
	open my $fh, '>:raw', $file or croak "could not write $file: $!";
	for my $row (@$rows)
	{
		print $fh join(',', map { csv_field($_) } @$row), "\n";
	}
	close $fh;
	$node->safe_psql('postgres',
		"CREATE TABLE $table ($coldefs);\n"
		  . "\\copy $table FROM '$file' WITH (FORMAT csv)");
	return;
}

# One CSV field: NULL as an empty unquoted field, everything else quoted.
sub csv_field
{
	my ($v) = @_;
	return '' unless defined $v;
	my $s = "$v";
	utf8::encode($s);    # text is characters; the database is UTF8
	$s =~ s/"/""/g;
	return qq{"$s"};
}

=pod

=head1 SQL helpers

ts_text(MS): the timestamptz literal text for MS milliseconds since the Unix
epoch, e.g. "2024-01-01 00:00:03.250+00".

windows_sql(table => T, ts => COL, size => S, slide => S2, keys => 'k',
aggs => 'count(*) AS n', where => COND): plain SQL computing a tumbling
(no slide) or hopping window aggregation over T without streamwin: windows
aligned to the epoch, a row in every [start, start + size) that holds it.
Columns: window_start, window_end, keys, aggs.

values_sql(COLUMNS, ROWS): a SELECT returning ROWS (array of array refs)
with COLUMNS ([name, type] pairs); no rows gives an empty SELECT.

=cut

sub ts_text
{
	my ($ms) = @_;
	my $s = POSIX::floor($ms / 1000);
	my $frac = $ms - $s * 1000;
	return POSIX::strftime('%Y-%m-%d %H:%M:%S', gmtime($s))
	  . sprintf('.%03d+00', $frac);
}

sub windows_sql
{
	my (%a) = @_;
	my $size  = $a{size}  or croak 'size needed';
	my $slide = $a{slide} // $size;
	my $ts    = $a{ts}    // 'ts';
	my $keys  = $a{keys};
	my $where = $a{where} ? "AND ($a{where})" : '';
	my $e     = "extract(epoch FROM t.$ts)";
	my $keysel = defined $keys ? "$keys," : '';
	my $keygrp = defined $keys ? ", $keys" : '';
	return qq{SELECT to_timestamp(w.s) AS window_start,
       to_timestamp(w.s + $size) AS window_end, $keysel $a{aggs}
  FROM $a{table} t
       CROSS JOIN LATERAL generate_series(
           floor($e / $slide)::bigint * $slide - ceil(${size}::numeric / $slide)::bigint * $slide,
           floor($e / $slide)::bigint * $slide, $slide) AS w(s)
 WHERE $e >= w.s AND $e < w.s + $size $where
 GROUP BY w.s$keygrp};
}

=pod

text_of_length(N): the text of message N of a test of texts of every
length: up to 9,000 bytes (one in ten longer than 300), a letter repeated,
then ":N".

texts_want_sql(COUNT, EVERY, ...): plain SQL writing those texts again for
messages 1 to COUNT but every EVERY-th, for each EVERY given (the tests'
dead letters): rows (n, length, md5), which a failure lists more readably
than the texts.

=cut

sub text_of_length
{
	my ($n) = @_;
	my $len = $n % 10 ? ($n * 31) % 300 : ($n * 7919) % 9000;
	return chr(97 + $n % 26) x $len . ":$n";
}

sub texts_want_sql
{
	my ($count, @every) = @_;
	my $kept = join(' AND ', map { "n % $_ <> 0" } @every);
	return qq{SELECT n, length(s), md5(s)
  FROM generate_series(1, $count) AS n,
       LATERAL (SELECT repeat(chr(97 + n % 26),
                              CASE WHEN n % 10 <> 0 THEN (n * 31) % 300 ELSE (n * 7919) % 9000 END)
                       || ':' || n AS s) AS t
 WHERE $kept};
}

sub values_sql
{
	my ($cols, $rows) = @_;
	my $names = join(', ', map { $_->[0] } @$cols);
	if (!@$rows)
	{
		return 'SELECT '
		  . join(', ', map { "NULL::$_->[1] AS $_->[0]" } @$cols)
		  . ' WHERE false';
	}
	my @lines;
	for my $r (@$rows)
	{
		my @v;
		for my $i (0 .. $#$cols)
		{
			my $x = $r->[$i];
			push @v,
			  defined $x
			  ? sql_literal($x) . "::$cols->[$i][1]"
			  : "NULL::$cols->[$i][1]";
		}
		push @lines, '(' . join(', ', @v) . ')';
	}
	return "SELECT * FROM (VALUES\n  "
	  . join(",\n  ", @lines)
	  . "\n) AS v($names)";
}

# SQL text handed to psql: the helpers take character strings (so "caf\x{e9}"
# and a literal "café" under "use utf8" are the same) and send UTF-8.
sub _utf8
{
	my ($s) = @_;
	utf8::encode($s);
	return $s;
}

sub sql_literal
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

=pod

=head1 Running SQL

psql_ok(NODE, SQL, NAME, %psql_params): runs SQL, passes if it succeeds,
fails showing stderr otherwise; returns stdout (or undef on failure).

query_json(NODE, SQL): runs SQL returning one jsonb/json value and returns it
decoded (undef and a failed test if the SQL fails).

run_json(NODE, CALL): runs "SELECT streamwin.CALL" (e.g. "run_batch('q')")
and returns its jsonb decoded, plus watermark_ms: the watermark as
milliseconds since the epoch (undef when NULL), so tests compare numbers.

user_role_sql(NAME): SQL creating an ordinary LOGIN role NAME that may use
streamwin (its schema and functions) and create result tables in public.

=cut

sub user_role_sql
{
	my ($name) = @_;
	return qq{CREATE ROLE $name LOGIN;
GRANT USAGE ON SCHEMA streamwin TO $name;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA streamwin TO $name;
GRANT CREATE ON SCHEMA public TO $name;
};
}

sub psql_ok
{
	my ($node, $sql, $name, %params) = @_;
	my ($rc, $out, $err) = _psql($node, $sql, %params);
	if ($rc != 0)
	{
		fail($name);
		diag("SQL failed:\n$sql\n$err");
		return undef;
	}
	pass($name) if defined $name;
	return $out;
}

# SQL that must fail with an error matching $re (one test named $name);
# returns its stderr.  %params go to $node->psql (e.g. connstr).
sub fails_like
{
	my ($node, $sql, $re, $name, %params) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql(
		'postgres', $sql,
		stdout        => \$out,
		stderr        => \$err,
		on_error_stop => 1,
		%params);
	ok($rc != 0 && $err =~ $re, $name)
	  or diag("exit code $rc, expected an error matching $re, got:\n$err");
	return $err;
}

# Run SQL with a time limit (PG_TEST_TIMEOUT_DEFAULT, 180 s by default).  A
# statement that hangs fails the test and ends the script: later steps
# would only wait on what it holds.  Returns (exit code, stdout, stderr).
# dbname => D runs it in database D (default postgres).
sub _psql
{
	my ($node, $sql, %params) = @_;
	my ($out, $err, $timed_out) = ('', '', 0);
	my $db = delete $params{dbname} // 'postgres';
	my $rc = eval {
		$node->psql(
			$db, _utf8($sql),
			stdout        => \$out,
			stderr        => \$err,
			on_error_stop => 1,
			timeout       => $PostgreSQL::Test::Utils::timeout_default,
			timed_out     => \$timed_out,
			%params);
	};

	# psql reads its statements from a pipe, and exits before reading them
	# when the server refuses the connection (one restarting after a crash
	# does at once): IPC::Run then dies writing to the pipe.  That is a
	# failed attempt, which a caller that waits tries again.
	if (!defined $rc)
	{
		die $@ unless $@ =~ /Broken pipe/;
		return (2, $out, $err ne '' ? $err : $@);
	}
	if ($timed_out)
	{
		fail("SQL finishes within $PostgreSQL::Test::Utils::timeout_default s");
		diag("SQL timed out:\n$sql");
		diag_queries($node);
		die "giving up: a statement hung\n";
	}
	return ($rc, $out, $err);
}

sub run_json
{
	my ($node, $call) = @_;
	return query_json($node, qq{
SELECT r || jsonb_build_object('watermark_ms',
          round(extract(epoch FROM (r->>'watermark')::timestamptz) * 1000))
  FROM streamwin.$call AS r});
}

sub query_json
{
	my ($node, $sql) = @_;
	my ($rc, $out, $err) = _psql($node, $sql);
	if ($rc != 0 || $out eq '')
	{
		fail("query returns json: $sql");
		diag($err);
		return undef;
	}
	return JSON::PP->new->decode($out);
}

=pod

=head1 Comparing results

results_match(NODE, GOT_SQL, WANT_SQL, NAME): one test: the two queries
return the same multiset of rows (EXCEPT ALL both ways).  On failure it
lists rows missing from GOT and rows GOT has but WANT does not (at most 25
each), and the row counts.  Returns true on success.  Option dbname => D
(here and in the helpers below): in database D rather than postgres.

wait_results_match(NODE, GOT_SQL, WANT_SQL, NAME, timeout => S, dbname => D): polls until
they match (errors while polling count as "not yet"), then passes; on timeout
fails like results_match and shows streamwin.queries.

=cut

sub _diff_sql
{
	my ($got, $want) = @_;
	return qq{WITH got AS ($got), want AS ($want),
missing AS (SELECT * FROM want EXCEPT ALL SELECT * FROM got),
unexpected AS (SELECT * FROM got EXCEPT ALL SELECT * FROM want)
SELECT 'count', (SELECT count(*) FROM missing)::text,
       (SELECT count(*) FROM unexpected)::text,
       (SELECT count(*) FROM got)::text, (SELECT count(*) FROM want)::text
UNION ALL
(SELECT 'missing', m::text, '', '', '' FROM missing m ORDER BY 2 LIMIT 25)
UNION ALL
(SELECT 'unexpected', u::text, '', '', '' FROM unexpected u ORDER BY 2 LIMIT 25)};
}

# One test: a source's dead letters are exactly want's ([partition, offset,
# a regex of the reason]), each at its place and saying why, and no others.
sub dead_letters_match
{
	my ($node, $source, $want, $name) = @_;
	my %got = map { my ($p, $o, $e) = split /\t/; ("$p/$o" => $e) } split /\n/,
	  $node->safe_psql('postgres', qq{
SELECT partition, "offset", replace(error, E'\\n', ' ') FROM streamwin.dead_letters
 WHERE source = '$source'}, extra_params => [ '-F', "\t" ]);
	my @bad;
	for my $w (@$want)
	{
		my $e = delete $got{"$w->[0]/$w->[1]"};
		push @bad, "missing $w->[0]/$w->[1] ($w->[2])" unless defined $e;
		push @bad, "$w->[0]/$w->[1]: \"$e\" !~ $w->[2]" if defined $e && $e !~ $w->[2];
	}
	push @bad, map { "unexpected $_: $got{$_}" } sort keys %got;
	ok(!@bad, $name) or diag(join("\n", @bad));
	return;
}

sub results_match
{
	my ($node, $got, $want, $name, %opts) = @_;
	my ($rc, $out, $err) = _psql($node, _diff_sql($got, $want),
		extra_params => [ '-F', "\t" ], _db(%opts));
	if ($rc != 0)
	{
		fail($name);
		diag("comparison query failed: $err\nresult query: $got");
		return 0;
	}
	my @lines = split /\n/, $out;
	my (undef, $nmissing, $nunexpected, $ngot, $nwant) = split /\t/,
	  shift(@lines);
	if ($nmissing == 0 && $nunexpected == 0)
	{
		pass($name);
		return 1;
	}
	fail($name);
	my $msg =
	  "result has $ngot rows, expected $nwant: $nmissing expected rows missing,"
	  . " $nunexpected unexpected rows\n";
	for my $l (@lines)
	{
		my ($kind, $row) = split /\t/, $l;
		$msg .= "  $kind: $row\n";
	}
	diag($msg . "result query: $got\nexpected query: $want");
	return 0;
}

sub wait_results_match
{
	my ($node, $got, $want, $name, %opts) = @_;
	my $limit = time + ($opts{timeout} // $timeout);
	my $sql = qq{WITH got AS ($got), want AS ($want)
SELECT (SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM got) a)
     + (SELECT count(*) FROM (SELECT * FROM got EXCEPT ALL SELECT * FROM want) b)};
	while (time < $limit)
	{
		my ($rc, $out, $err) = _psql($node, $sql, on_error_stop => 0, _db(%opts));
		return results_match($node, $got, $want, $name, %opts)
		  if $out eq '0' && $err eq '';
		usleep(100_000);
	}
	diag("timed out after " . ($opts{timeout} // $timeout) . " s waiting for: $name");
	diag_queries($node, %opts);
	return results_match($node, $got, $want, $name, %opts);
}

# the dbname option of a helper, passed on to _psql
sub _db
{
	my (%opts) = @_;
	return defined $opts{dbname} ? (dbname => $opts{dbname}) : ();
}

=pod

wait_until(NODE, SQL, EXPECTED, NAME, timeout => S, dbname => D): one test: polls SQL
every 100 ms until its output (psql -XAt, rows joined by newlines) equals
EXPECTED.  On timeout it fails and shows the last output, the last error
and streamwin.queries.

diag_queries(NODE, dbname => D): shows streamwin.queries (state, last_error)
as diag.

=cut

sub wait_until
{
	my ($node, $sql, $expected, $name, %opts) = @_;
	my $secs  = $opts{timeout} // $timeout;
	my $limit = time + $secs;
	my ($out, $err) = ('', '');
	while (1)
	{
		(undef, $out, $err) = _psql($node, $sql, on_error_stop => 0, _db(%opts));
		if ($out eq $expected && $err eq '')
		{
			pass($name);
			return 1;
		}
		last if time >= $limit;
		usleep(100_000);
	}
	fail($name);
	diag(   "timed out after $secs s waiting for: $name\n"
		  . "query: $sql\nexpected: $expected\nlast output: $out\n"
		  . "last error: $err");
	diag_queries($node, %opts);
	return 0;
}

=pod

=head1 State store helpers

store_session(NODE): a background psql session of its own (its runners, and
their stores, live as long as it does) that goes on after an error and shows
warnings only.  sess(SESSION, SQL) returns (stdout, stderr) and forgets the
error; sess_ok(SESSION, SQL, NAME) is SQL that must succeed (one test when
named).

store_switches(NODE, QUERY[, 'dedup']): "out/in", how often the server log
says the query's state (or its dedup keys) stopped fitting in
streamwin.state_memory and fitted again.  table_mode(NODE, QUERY[, 'dedup'])
(table_mode_sql(QUERY[, 'dedup']) as SQL): does its state table (dedup
table) have an index, that is, does it run on that table?

checkpoint_matches(NODE, QUERY, SESSION, MORE, WHEN[, 'dedup']): the session
runs batches of the query, each after MORE->() added a few events, until one
took a checkpoint (at most 5); then the query's checkpoint table (of its
state, or else of its dedup keys; of its dedup keys with 'dedup') must equal
that table, row for row.

join_checkpoint_sides(NODE, QUERY): for each side of a join query, a hash
of its index (side), its join table (table), its checkpoint table (ckpt),
whether its rows have versions (versions: a preserved side's), and a
condition on the checkpoint's rows as v (in_reach) that holds of those in
reach at the checkpoint's watermark: a join side's checkpoint keeps the
rows out of reach until it is written anew.

log_count(NODE, REGEX): matches in the server log.  worker_pid(NODE, QUERY,
WHEN): waits until the query has a worker and returns its pid.

=cut

sub store_session
{
	my ($node) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	sess_ok($s, 'SET client_min_messages = warning');
	return $s;
}

sub sess
{
	my ($s, $sql) = @_;
	my ($out) = $s->query($sql);
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return ($out, $err);
}

sub sess_ok
{
	my ($s, $sql, $name) = @_;
	my ($out, $err) = sess($s, $sql);
	if (defined $name)
	{
		is($err, '', $name) or diag("SQL: $sql");
	}
	elsif ($err ne '')
	{
		fail("session SQL succeeds: $sql");
		diag($err);
	}
	return $out;
}

sub log_count
{
	my ($node, $re) = @_;
	my $n = () = slurp_file($node->logfile) =~ /$re/g;
	return $n;
}

sub store_switches
{
	my ($node, $q, $store) = @_;
	my $what = ($store // '') eq 'dedup' ? 'dedup keys' : 'state';
	my $out = log_count($node, qr/the $what of query "$q" (?:does|do) not fit in streamwin\.state_memory/);
	my $in  = log_count($node, qr/the $what of query "$q" (?:fits|fit) in memory again/);
	return "$out/$in";
}

sub table_mode_sql
{
	my ($q, $store) = @_;
	my $table = ($store // '') eq 'dedup' ? 'dedup_table' : 'state_table';
	return qq{
SELECT count(*) > 0 FROM pg_index i JOIN streamwin.query_catalog q ON i.indrelid = q.$table
 WHERE q.name = '$q'};
}

sub table_mode
{
	my ($node, $q, $store) = @_;
	return $node->safe_psql('postgres', table_mode_sql($q, $store)) eq 't';
}

sub checkpoint_matches
{
	my ($node, $q, $s, $more, $when, $store) = @_;
	my $pair = ($store // '') eq 'dedup'
	  ? 'dedup_checkpoint::regclass, dedup_table::regclass'
	  : 'coalesce(nullif(checkpoint_table, 0), dedup_checkpoint)::regclass, '
	  . 'coalesce(nullif(state_table, 0), dedup_table)::regclass';
	my $at = "SELECT checkpoint_batch_id = last_batch_id FROM streamwin.query_catalog WHERE name = '$q'";
	for (my $i = 0; $i < 5 && $node->safe_psql('postgres', $at) ne 't'; $i++)
	{
		$more->();
		sess_ok($s, "SELECT streamwin.run_batch('$q') IS NOT NULL");
	}
	is($node->safe_psql('postgres', $at), 't', "$q: its last batch took a checkpoint $when");
	my ($ckpt, $table) = split /\|/, $node->safe_psql('postgres',
		"SELECT $pair FROM streamwin.query_catalog WHERE name = '$q'");
	cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM $table"), '>', 0, "$q: it has state $when");
	results_match($node, "SELECT * FROM $ckpt", "SELECT * FROM $table",
		"$q: its checkpoint table equals its state table $when");
	return;
}

sub join_checkpoint_sides
{
	my ($node, $q) = @_;
	my @sides;
	for my $line (split /\n/, $node->safe_psql('postgres', qq{
SELECT s.source_index || '|' || s.join_table::regclass || '|' || s.join_checkpoint::regclass || '|'
       || EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = s.join_table AND a.attname = '__matched_batch') || '|'
       || CASE WHEN q.checkpoint_watermark IS NULL OR q.plan->'join'->>('evict_after_us_' || s.source_index) IS NULL
               THEN 'true'
               ELSE format('v.%1\$I IS NULL OR v.%1\$I >= %2\$L::timestamptz - %3\$s * interval ''1 microsecond''',
                           q.plan->'join'->>('time_column_' || s.source_index), q.checkpoint_watermark,
                           q.plan->'join'->>('evict_after_us_' || s.source_index)) END
  FROM streamwin.query_sources s JOIN streamwin.query_catalog q USING (query_id)
 WHERE q.name = '$q' ORDER BY s.source_index}))
	{
		my %side;
		@side{qw(side table ckpt versions in_reach)} = split /\|/, $line, 5;
		$side{versions} = $side{versions} eq 'true';
		push @sides, \%side;
	}
	return @sides;
}

sub worker_pid
{
	my ($node, $q, $when) = @_;
	wait_until($node, "SELECT worker_pid IS NOT NULL FROM streamwin.queries WHERE name = '$q'",
		't', "$q has a worker $when");
	return $node->safe_psql('postgres', "SELECT worker_pid FROM streamwin.queries WHERE name = '$q'");
}

=pod

feed_until_sql(CALL): the SQL that creates procedure feed_until(q, cond),
which runs CALL (a statement that adds some events) and commits every
10 ms until cond holds of query q's catalog row (at most 2,000 times), then
returns q's worker pid.

crash_round(NODE, QUERIES, CHECK, Q, COND, VICTIM, WHAT): one round of a
crash test over running queries.  The test's procedure feed_until(q, cond)
feeds events until COND holds of query Q's catalog row (C0 in it: Q's
checkpoint batch when the round begins) and returns Q's worker pid; then
SIGKILL of that worker (VICTIM 'worker') or of an idle backend ('backend')
makes PostgreSQL restart and empty every UNLOGGED table.  Each of QUERIES
must have a worker again, CHECK->("after WHAT") must pass, and each must
have restored its checkpoint.

=cut

sub feed_until_sql
{
	my ($call) = @_;
	return qq{
CREATE PROCEDURE feed_until(q text, cond text, INOUT pid int DEFAULT NULL) LANGUAGE plpgsql AS \$p\$
DECLARE
    done boolean;
BEGIN
    FOR i IN 1 .. 2000 LOOP
        $call;
        COMMIT;
        PERFORM pg_sleep(0.01);
        EXECUTE format('SELECT %s FROM streamwin.query_catalog WHERE name = %L', cond, q) INTO done;
        IF done THEN
            SELECT worker_pid INTO pid FROM streamwin.queries WHERE name = q;
            RETURN;
        END IF;
    END LOOP;
END \$p\$;
};
}

# crash_by_sigkill(node, what, pid): SIGKILL of process pid (undef: an idle
# backend of its own), after which PostgreSQL restarts every process, as
# after any crash; checks that it did, and waits until it accepts
# connections again.
sub crash_by_sigkill
{
	my ($node, $what, $pid) = @_;
	my $crash_re = qr/all server processes terminated; reinitializing/;
	my $crashes = log_count($node, $crash_re);
	my $idle;
	if (!defined $pid)
	{
		$idle = $node->background_psql('postgres');
		$pid = $idle->query_safe('SELECT pg_backend_pid()');
	}
	kill 'KILL', $pid;
	my $limit = time + 60;
	usleep(50_000) while log_count($node, $crash_re) == $crashes && time < $limit;
	eval { $idle->quit } if $idle;
	is(log_count($node, $crash_re), $crashes + 1, "$what: PostgreSQL restarted after the SIGKILL");
	$node->poll_query_until('postgres', 'SELECT true') or die "$what: the server did not come back";
	return;
}

# new_session_batch(node, q, max_records): one batch of query q from a new
# connection (psql per call, as a cron job runs it), of at most max_records
# rows: whether it ran without loading its store (a cold batch, its DEBUG1
# message), and its input rows.
sub new_session_batch
{
	my ($node, $q, $max) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', qq{
SET streamwin.max_records_per_batch = $max;
SET client_min_messages = debug1;
SELECT r->>'input_rows' FROM streamwin.run_batch('$q') AS r;},
		stdout => \$out, stderr => \$err, extra_params => [ '-XAt' ]);
	diag("run_batch('$q') failed: $err") if $rc != 0;
	my $cold = $err =~ /query "$q" runs a batch of \d+ rows on its [a-z ]+ of \d+ pages, without loading/;
	return ($cold, $out);
}

# restore_after_crash(node, q): q's batches after a crash, by run_batch,
# until one has restored its checkpoint and the replays have caught up
# (its state is as of its last batch); checks that it restored.
sub restore_after_crash
{
	my ($node, $q) = @_;
	my $restored = qr/query "$q" lost its state in a crash; restoring the checkpoint/;
	for (my $i = 0; $i < 200; $i++)
	{
		last if $node->safe_psql('postgres',
			"SELECT state_batch_id = last_batch_id FROM streamwin.query_catalog WHERE name = '$q'") eq 't'
		  && log_count($node, $restored) > 0;
		$node->safe_psql('postgres', "SELECT streamwin.run_batch('$q')");
	}
	cmp_ok(log_count($node, $restored), '>', 0, "$q: restored its checkpoint after the crash");
	return;
}

sub crash_round
{
	my ($node, $queries, $check, $q, $cond, $victim, $what) = @_;
	my $c0 = $node->safe_psql('postgres',
		"SELECT coalesce(checkpoint_batch_id, 0) FROM streamwin.query_catalog WHERE name = '$q'");
	my $idle = $node->background_psql('postgres');
	my $idle_pid = $idle->query_safe('SELECT pg_backend_pid()');
	my %restores = map { $_ => log_count($node, qr/query "$_" lost its state in a crash; restoring the checkpoint/) }
	  @$queries;
	$cond =~ s/\bC0\b/$c0/g;
	my $pid = $node->safe_psql('postgres',
		"CALL feed_until('$q', '" . ($cond =~ s/'/''/gr) . "')");
	crash_by_sigkill($node, $what, $victim eq 'worker' ? $pid : $idle_pid);
	eval { $idle->quit };
	for my $r (@$queries)
	{
		wait_until($node,
			"SELECT 1 FROM streamwin.queries WHERE name = '$r' AND worker_pid IS NOT NULL", '1',
			"$what: $r has a worker again");
	}
	# A worker restores its checkpoint at its first batch, some time after
	# it has its pid; the results, logged, may already be whole while the
	# state tables are still empty.  The checks run once each query's
	# restore has committed (its mark in streamwin.state_alive, an UNLOGGED
	# table the crash emptied) and it has replayed what followed.
	for my $r (@$queries)
	{
		wait_until($node, qq{
SELECT state_batch_id = last_batch_id
       AND EXISTS (SELECT FROM streamwin.state_alive a WHERE a.query_id = q.query_id)
  FROM streamwin.query_catalog q WHERE name = '$r'}, 't',
			"$what: $r restored its state and replayed the batches after its checkpoint");
		cmp_ok(log_count($node, qr/query "$r" lost its state in a crash; restoring the checkpoint/), '>',
			$restores{$r}, "$what: $r restored its checkpoint");
	}
	$check->("after $what");
	my ($ckpt) = slurp_file($node->logfile)
	  =~ /.*query "$q" lost its state in a crash; restoring the checkpoint of batch (\d+)/s;
	note("$what: $q restored the checkpoint of batch " . ($ckpt // '?') . ", at $c0 when the round began");
	return;
}

sub diag_queries
{
	my ($node, %opts) = @_;
	my ($out, $err) = ('', '');
	$node->psql(
		$opts{dbname} // 'postgres',
		'SELECT * FROM streamwin.queries ORDER BY name',
		stdout       => \$out,
		stderr       => \$err,
		extra_params => ['-x']);
	diag("streamwin.queries:\n$out$err");
	return;
}

package StreamwinTest::Broker;

# A test Kafka broker (test/kafka_broker, librdkafka's mock cluster) owned by
# the test script.  Every broker still running at exit is stopped by END.

use strict;
use warnings;
use Carp;
use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my @running;
my $count = 0;

=pod

=head1 Brokers

StreamwinTest::Broker->start(topics => { NAME => PARTITIONS, ... },
brokers => N, spread => 1, rtt => { BROKER => MS, ... }): starts
test/kafka_broker with those topics (with spread, partition p led by broker
p mod N + 1, else all by broker 1; with rtt, broker BROKER answers MS ms
late), waits until it has written its bootstrap list (30 s at most; dies
otherwise), and returns the broker.  Its output goes to tmp_check/log/<test>_kafka_broker_<n>.log.

$broker->bootstrap: "host:port[,host:port]".
$broker->down / ->up: take every broker down (SIGUSR1) / up (SIGUSR2).
$broker->stop: stop it (SIGTERM) and wait.
$broker->messages(TOPIC, PARTITIONS): every message the topic holds, as
[PARTITION, OFFSET, payload], read from the beginning to the end of each
partition by a consumer of its own (test/bench/raw_consume --dump).

$broker->produce(TOPIC, MESSAGES, %opts): produce MESSAGES (array ref) with
test/kafka_produce, in order.  Each message is either a payload (bytes, no
newline) or [PARTITION, payload]; with keys => 1, [PARTITION, KEY,
payload], where an undef KEY is no key and an undef payload a null value (a
tombstone), and a key holds no tab.  Options: partition => N (all to N),
rate => MSGS_PER_SEC, background => 1 (returns a handle whose ->finish waits
and reports), hex => 1 (payloads, and keys, are binary: sent as hexadecimal
digits and decoded by the producer).  A foreground produce is one test that passes if every message
was acknowledged.  One in-flight request per connection keeps each
partition's offsets in the order of MESSAGES.

=cut

sub start
{
	my ($class, %opts) = @_;
	my $topics = $opts{topics} // {};
	my $n      = ++$count;
	my $dir    = PostgreSQL::Test::Utils::tempdir();
	my $bfile  = "$dir/bootstrap";
	my $name   = $PostgreSQL::Test::Utils::test_logfile;
	$name =~ s{.*/regress_log_}{};
	my $log = "$PostgreSQL::Test::Utils::log_path/${name}_kafka_broker_$n.log";

	my @cmd = ("$StreamwinTest::bindir/kafka_broker",
		'--bootstrap-file', $bfile);
	push @cmd, '--brokers', $opts{brokers} if $opts{brokers};
	push @cmd, '--spread' if $opts{spread};
	push @cmd, map { ('--rtt', "$_:$opts{rtt}{$_}") } sort keys %{ $opts{rtt} // {} };
	push @cmd, map { ('--topic', "$_:$topics->{$_}") } sort keys %$topics;

	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDIN,  '<', '/dev/null';
		open STDOUT, '>', $log;
		open STDERR, '>&', \*STDOUT;
		{ no warnings "exec"; exec @cmd; }
		print STDERR "could not exec $cmd[0]: $!\n";
		POSIX::_exit(127);
	}
	my $self = bless { pid => $pid, log => $log, n => $n }, $class;
	push @running, $self;
	if (my $pdir = $ENV{STREAMWIN_PID_DIR})
	{
		if (open my $fh, '>', "$pdir/kafka_broker.$pid")
		{
			print $fh "$pid\n";
			close $fh;
			$self->{pidfile} = "$pdir/kafka_broker.$pid";
		}
	}

	my $limit = time + 30;
	while (!-s $bfile)
	{
		if (waitpid($pid, POSIX::WNOHANG()) == $pid)
		{
			$self->{pid} = undef;
			die "kafka_broker exited before it was ready:\n"
			  . slurp_file($log);
		}
		die "kafka_broker not ready after 30 s:\n" . slurp_file($log)
		  if time > $limit;
		usleep(50_000);
	}
	$self->{bootstrap} = slurp_file($bfile);
	$self->{bootstrap} =~ s/\s+$//;
	note("kafka_broker $n (pid $pid) at $self->{bootstrap}, topics: "
		  . join(' ', map { "$_:$topics->{$_}" } sort keys %$topics));
	return $self;
}

sub bootstrap { return $_[0]->{bootstrap} }
sub pid       { return $_[0]->{pid} }

sub down
{
	my ($self) = @_;
	kill 'USR1', $self->{pid};
	return;
}

sub up
{
	my ($self) = @_;
	kill 'USR2', $self->{pid};
	return;
}

sub messages
{
	my ($self, $topic, $npart) = @_;
	my $file = PostgreSQL::Test::Utils::tempdir() . "/$topic.dump";
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			"$StreamwinTest::bindir/bench/raw_consume", '--brokers', $self->{bootstrap},
			'--topic', $topic, '--partitions', $npart, '--dump', $file
		],
		'>', \$out, '2>', \$err)
	  or croak "raw_consume could not read topic $topic: $err";
	open my $fh, '<:raw', $file or croak "could not read $file: $!";
	my @messages;
	while (my $line = <$fh>)
	{
		chomp $line;
		my ($partition, $offset, undef, $payload) = split /\t/, $line, 4;
		push @messages, [ $partition, $offset, $payload ];
	}
	close $fh;
	return \@messages;
}

sub stop
{
	my ($self) = @_;
	return unless $self->{pid};
	kill 'TERM', $self->{pid};
	my $limit = time + 10;
	while (waitpid($self->{pid}, POSIX::WNOHANG()) == 0)
	{
		if (time > $limit)
		{
			kill 'KILL', $self->{pid};
			waitpid($self->{pid}, 0);
			last;
		}
		usleep(20_000);
	}
	unlink $self->{pidfile} if $self->{pidfile};
	$self->{pid} = undef;
	return;
}

sub produce
{
	my ($self, $topic, $messages, %opts) = @_;
	my @cmd = (
		"$StreamwinTest::bindir/kafka_produce",
		'--brokers', $self->{bootstrap},
		'--topic', $topic, '--quiet',
		'-X', 'max.in.flight.requests.per.connection=1',
		map { ('-X', "$_=$opts{props}{$_}") } sort keys %{ $opts{props} // {} });
	push @cmd, '--rate', $opts{rate} if $opts{rate};
	push @cmd, '--partition', $opts{partition} if defined $opts{partition};
	push @cmd, '--hex' if $opts{hex};

	my $prefixed = grep { ref $_ } @$messages;
	croak 'mix of [partition, payload] pairs and plain payloads'
	  if $prefixed && $prefixed != @$messages;
	push @cmd, '--partition-prefix' if $prefixed;
	if ($opts{keys})
	{
		croak 'keys => 1 needs [partition, key, payload] messages' unless $prefixed;
		push @cmd, '--key-prefix', '--null', '\\N';
		$messages = [
			map {
				[ $_->[0], join("\t",
					map { !defined $_ ? '\\N' : $opts{hex} ? unpack('H*', $_) : $_ } @$_[ 1, 2 ]) ]
			} @$messages ];
	}

	# Input and output go through files, so that a background producer runs
	# on its own (IPC::Run feeds scalar inputs only while we pump it).
	my $dir = PostgreSQL::Test::Utils::tempdir();
	open my $in, '>:raw', "$dir/input" or croak "could not write $dir/input: $!";
	for my $m (@$messages)
	{
		my $payload = $prefixed ? $m->[1] : $m;
		$payload = unpack('H*', $payload) if $opts{hex} && !$opts{keys};
		my $line = $prefixed ? "$m->[0]\t$payload" : $payload;
		utf8::encode($line) if utf8::is_utf8($line);
		croak "message contains a newline: $line" if $line =~ /\n/;
		print $in "$line\n";
	}
	close $in;
	my $h = {
		what => "produce " . scalar(@$messages) . " messages to $topic",
		err  => "$dir/stderr",
	};
	$h->{run} = IPC::Run::start(\@cmd, '<', "$dir/input", '>', "$dir/stdout",
		'2>', "$dir/stderr");
	my $bg = bless $h, 'StreamwinTest::Producer';
	return $bg if $opts{background};
	return $bg->finish;
}

END
{
	local $?;    # keep the test's exit status
	$_->stop for @running;
}

package StreamwinTest::Producer;

use strict;
use warnings;
use PostgreSQL::Test::Utils ();
use Test::More;

# Wait for a producer to finish: one test, passes if it exited 0.
sub finish
{
	my ($self) = @_;
	my $ok = $self->{run}->finish;
	ok($ok, $self->{what})
	  or diag("kafka_produce failed (exit $?): "
		  . PostgreSQL::Test::Utils::slurp_file($self->{err}));
	return $ok;
}

package StreamwinTest::Broker;

=pod

$broker->produce_props(TOPIC, MESSAGES, PROPS, %opts): like produce (same
MESSAGES and options), plus librdkafka producer properties PROPS (a hash
ref, passed as -X), e.g. { 'message.max.bytes' => 10_000_000 } for
messages larger than the producer's default limit of 1 MB.

=cut

sub produce_props
{
	my ($self, $topic, $messages, $props, %opts) = @_;
	return $self->produce($topic, $messages, %opts, props => $props);
}

=pod

$broker->commit_marker(TOPIC, PARTITION): appends a transaction's commit
marker to a partition, as a broker writes one when a transactional
producer commits: a control record that takes an offset and that no
consumer is given, so the partition's offsets have a gap there.  The
mock (librdkafka 2.0.2) never writes one itself, and a producer cannot,
so this speaks Kafka's Produce request (version 3) to the partition's
leader, broker 1, with a record batch of its own (format v2: the control
and transactional attributes, one record whose key is the marker's
version and type, COMMIT).  One test: passes if the broker took it.

=cut

# CRC-32C (Castagnoli), which a record batch carries over its bytes after the CRC
my @crc32c_table;
sub _crc32c
{
	my ($bytes) = @_;
	if (!@crc32c_table)
	{
		for my $i (0 .. 255)
		{
			my $c = $i;
			$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) for 1 .. 8;
			push @crc32c_table, $c;
		}
	}
	my $crc = 0xFFFFFFFF;
	$crc = $crc32c_table[ ($crc ^ $_) & 0xFF ] ^ ($crc >> 8) for unpack('C*', $bytes);
	return $crc ^ 0xFFFFFFFF;
}

sub commit_marker
{
	my ($self, $topic, $partition) = @_;
	my ($host, $port) = (split /,/, $self->{bootstrap})[0] =~ /^(.*):(\d+)$/
	  or croak "bad bootstrap $self->{bootstrap}";
	my $now = int(Time::HiRes::time() * 1000);

	# the record: its attributes, timestamp and offset deltas (varints, 0),
	# key (version 0, type 1: COMMIT), value (version 0, coordinator epoch 0), no headers
	my $key    = pack('s>s>', 0, 1);
	my $value  = pack('s>l>', 0, 0);
	my $record = pack('CCC', 0, 0, 0) . pack('C', 2 * length $key) . $key
	  . pack('C', 2 * length $value) . $value . pack('C', 0);
	$record = pack('C', 2 * length $record) . $record;

	# the batch after its CRC: attributes (transactional | control), last
	# offset delta, first and last timestamps, producer id and epoch, base
	# sequence, one record
	my $after_crc = pack('s>l>q>q>q>s>l>l>', 0x30, 0, $now, $now, 1, 0, -1, 1) . $record;
	my $after_length = pack('l>CL>', 0, 2, _crc32c($after_crc)) . $after_crc;
	my $batch = pack('q>l>', 0, length $after_length) . $after_length;

	my $body = pack('s>s>l>', -1, -1, 10_000)    # no transactional id, acks all, timeout
	  . pack('l>', 1) . pack('s>/a*', $topic)
	  . pack('l>', 1) . pack('l>', $partition) . pack('l>/a*', $batch);
	my $request = pack('s>s>l>', 0, 3, 1) . pack('s>/a*', 'streamwin-test') . $body;

	my $sock = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp', Timeout => 10)
	  or croak "could not connect to $host:$port: $!";
	print $sock pack('l>/a*', $request);
	my $got = '';
	my $size;
	while (!defined $size || length $got < $size + 4)
	{
		my $n = sysread($sock, $got, 65536, length $got);
		croak "the broker closed the connection" unless $n;
		$size = unpack('l>', $got) if !defined $size && length $got >= 4;
	}
	close $sock;

	# correlation id, topics (1), name, partitions (1), index, error code, base offset
	my (undef, undef, undef, undef, $p, $err, $offset) = unpack('l>l>s>/a*l>l>s>q>', substr($got, 4));
	ok($p == $partition && $err == 0, "commit marker at offset $offset of $topic [$partition]")
	  or diag("Produce response: partition $p, error $err");
	return $offset;
}

1;
