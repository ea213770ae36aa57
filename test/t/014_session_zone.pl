# 014_session_zone.pl: decoding does not depend on who runs the batch.
#
# A timestamp without a zone offset in a JSON or CSV message is read in the
# source's zone (option "timezone", UTC unless given), and so is a cast of a
# timestamp to timestamptz in the event time: the same messages give the
# same event times in a background worker (whose session has the server's
# TimeZone, America/Sao_Paulo here) and in run_available in a session with
# TimeZone = 'Asia/Tokyo'.  Both are compared with each other and with
# plain SQL that reads the same texts in the source's zone.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

srand(14014);

my $NPART  = 2;
my $EVENTS = 2000;
my $T0     = 1_774_742_400;    # 2026-03-29 00:00:00 UTC: Europe's DST begins at 01:00 UTC

my $broker = StreamwinTest::Broker->start(topics => { tz_json => $NPART, tz_csv => $NPART });
my $node = new_node('zone', conf => "timezone = 'America/Sao_Paulo'\n");
my $brokers = $broker->bootstrap;

# Event times as producers write them: mostly without an offset (ISO with
# 'T' or a space, with or without a fraction), some in UTC or with an offset.
sub ts_written
{
	my ($epoch) = @_;
	my @t = gmtime(int($epoch));
	my $frac = $epoch - int($epoch);
	my $text = sprintf('%04d-%02d-%02d%s%02d:%02d:%02d', $t[5] + 1900, $t[4] + 1, $t[3],
		rand() < 0.5 ? 'T' : ' ', $t[2], $t[1], $t[0]);
	$text .= sprintf('.%03d', int($frac * 1000)) if rand() < 0.5;
	my $r = rand();
	return $text if $r < 0.7;
	return $text . 'Z' if $r < 0.85;
	return $text . '+02:00';
}

my (@json, @csv, @rows);
for my $i (0 .. $EVENTS - 1)
{
	my $written = ts_written($T0 + $i * 7.3 + rand());
	my $local = ts_written($T0 + $i * 11.1);
	$local =~ s/(Z|\+02:00)$//;
	push @json, [ $i % $NPART, sprintf('{"id": %d, "ts": "%s", "lts": "%s"}', $i, $written, $local) ];
	push @csv, [ $i % $NPART, sprintf('%d,%s,%s', $i, $written, $local) ];
	push @rows, [ $i, $written, $local ];
}
load_table($node, 'written', 'id int, ts text, lts text', \@rows);
$broker->produce('tz_json', \@json);
$broker->produce('tz_csv', \@csv);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('z_json', '$brokers', 'tz_json', 'id int, ts timestamptz, lts timestamp');
SELECT streamwin.create_kafka_source('z_csv', '$brokers', 'tz_csv', 'id int, ts timestamptz, lts timestamp',
    'csv', '{"timezone": "Europe/Berlin"}');
}, 'two sources: JSON in UTC, CSV in Europe/Berlin');
is( $node->safe_psql('postgres', 'SELECT string_agg(name || \' \' || timezone, \', \' ORDER BY name) FROM streamwin.sources'),
	'z_csv Europe/Berlin, z_json UTC', 'streamwin.sources shows each source\'s zone');

# For each source: a transform with the decoded event times, and a window
# over the timestamp column read as timestamptz in the event time; each run
# by a worker (w_...) and, stopped, by run_available (s_...).
for my $src (qw(json csv))
{
	for my $who (qw(w s))
	{
		my $start = $who eq 'w' ? 'true' : 'false';
		psql_ok($node, qq{
SELECT streamwin.create_query('${who}_${src}_rows', 'SELECT id, ts, lts::timestamptz AS lts FROM z_$src',
    start => $start, trigger_interval => '50 ms');
SELECT streamwin.create_query('${who}_${src}_hours',
    \$q\$SELECT count(*) AS n, min(id) AS lo FROM z_$src
         GROUP BY streamwin.tumble(lts::timestamptz, '1 hour')\$q\$,
    output_mode => 'update', start => $start, trigger_interval => '50 ms');
}, "$src: queries run by " . ($who eq 'w' ? 'workers' : 'a session'));
	}
}

my $tokyo = 'SET TimeZone = \'Asia/Tokyo\'; SET DateStyle = \'SQL, DMY\';';
for my $q (qw(s_json_rows s_json_hours s_csv_rows s_csv_hours))
{
	psql_ok($node, "$tokyo SELECT streamwin.run_available('$q')", "$q: run_available in a session in Tokyo");
}
for my $q (qw(w_json_rows w_csv_rows))
{
	wait_until($node, "SELECT count(*) FROM $q", $EVENTS, "$q: the worker has read every message");
}
wait_until($node,
	q{SELECT bool_and(last_batch_id > 0 AND lag = 0) FROM streamwin.queries WHERE name LIKE 'w\_%\_hours'},
	't', 'the workers of the windows have read every message');

# What the texts mean in each source's zone: those without an offset are
# local times there.
my %zone = (json => 'UTC', csv => 'Europe/Berlin');
for my $src (qw(json csv))
{
	my $want_rows = qq{SELECT id,
       CASE WHEN ts ~ '(Z|[+-][0-9][0-9]:[0-9][0-9])\$' THEN ts::timestamptz
            ELSE ts::timestamp AT TIME ZONE '$zone{$src}' END,
       lts::timestamp AT TIME ZONE '$zone{$src}' FROM written};
	results_match($node, "SELECT id, ts, lts FROM w_${src}_rows", $want_rows,
		"$src: the worker's event times are the texts read in $zone{$src}");
	results_match($node, "SELECT id, ts, lts FROM s_${src}_rows", "SELECT id, ts, lts FROM w_${src}_rows",
		"$src: the session in Tokyo decoded every message as the worker did");
	my $want_hours = qq{SELECT streamwin.tumble(t, '1 hour'), streamwin.tumble(t, '1 hour') + interval '1 hour',
       count(*), min(id) FROM (SELECT id, lts::timestamp AT TIME ZONE '$zone{$src}' AS t FROM written) w GROUP BY 1, 2};
	results_match($node, "SELECT window_start, window_end, n, lo FROM w_${src}_hours", $want_hours,
		"$src: the worker's windows over the timestamp read in $zone{$src}");
	results_match($node, "SELECT window_start, window_end, n, lo FROM s_${src}_hours",
		"SELECT window_start, window_end, n, lo FROM w_${src}_hours",
		"$src: the session in Tokyo made the same windows as the worker");
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM streamwin.dead_letters'), '0', 'no dead letters');

done_testing();
