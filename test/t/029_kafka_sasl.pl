
# 029_kafka_sasl.pl: a process's consumers start Cyrus SASL without its
# plugins unless one uses SASL (kafka_sasl.c).
#
# librdkafka starts Cyrus SASL for the process with its first client, which
# loads every installed SASL plugin; streamwin starts it first, without
# them, unless the consumer uses SASL.  Checked in the backend's own memory
# map (/proc/PID/maps), where loaded plugins show as files of the sasl2
# plugin directory:
#   1. a session's batch over a plain source: exact against the events,
#      and no plugin loaded;
#   2. in the same session, a consumer of a SASL source (the test broker
#      does not speak SASL, so its batch only times out): the plugins are
#      loaded then, as librdkafka loads them;
#   3. a new session whose first consumer uses SASL: the plugins are loaded;
#   4. after that, a plain source's batch in the same session is exact.
# Where no plugin is installed (libsasl2-modules is optional), the checks
# of loaded plugins have nothing to see and are skipped.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $broker = StreamwinTest::Broker->start(topics => { ev => 2 });
my $brokers = $broker->bootstrap;
my $node = new_node('sasl');

my @plugins = glob('/usr/lib/*/sasl2/*.so /usr/lib/sasl2/*.so');
note(scalar(@plugins) . ' SASL plugins installed');

# events: k in 0..6, v = i
my (%n, %s);
my @events;
for my $i (1 .. 300)
{
	my $k = $i % 7;
	push @events, [ $i % 2, qq({"k": $k, "v": $i}) ];
	$n{$k}++;
	$s{$k} += $i;
}
$broker->produce('ev', \@events);
my $expected = join("\n", map { "$_|$n{$_}|$s{$_}" } sort { $a <=> $b } keys %n);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('plain', '$brokers', 'ev', 'k int, v int');
SELECT streamwin.create_kafka_source('with_sasl', '$brokers', 'ev', 'k int, v int', 'json',
    '{"kafka": {"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
                "sasl.username": "u", "sasl.password": "p"}}');
SELECT streamwin.create_query('q_plain', 'SELECT k, count(*) AS n, sum(v) AS s FROM plain GROUP BY k',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('q_plain2', 'SELECT k, count(*) AS n, sum(v) AS s FROM plain GROUP BY k',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('q_sasl', 'SELECT k, count(*) AS n FROM with_sasl GROUP BY k',
    output_mode => 'update', start => false);
}, 'sources and queries');

my $plugins_sql = q{SELECT count(*) FROM regexp_split_to_table(
    pg_read_file('/proc/' || pg_backend_pid() || '/maps'), E'\n') AS l WHERE l ~ '/sasl2/'};

# a SASL consumer's batch: the consumer is made, then the batch waits for a
# broker that never answers its SASL handshake, until the timeout
sub sasl_batch
{
	my ($s) = @_;
	sess_ok($s, q{SET statement_timeout = '2s'});
	my (undef, $err) = sess($s, q{SELECT streamwin.run_batch('q_sasl')});
	like($err, qr/statement timeout|SASL|kafka/i, 'the SASL source\'s batch fails against the test broker');
	sess_ok($s, 'RESET statement_timeout');
}

# 1
my $s = store_session($node);
sess_ok($s, q{SELECT streamwin.run_available('q_plain')});
is(sess_ok($s, 'SELECT k, n, s FROM q_plain ORDER BY k'), $expected,
	'a plain source\'s batch is exact');
is(sess_ok($s, $plugins_sql), '0', 'no SASL plugin loaded for a plain consumer');

# 2
sasl_batch($s);
SKIP:
{
	skip 'no SASL plugin installed', 1 unless @plugins;
	cmp_ok(sess_ok($s, $plugins_sql), '>', 0,
		'a SASL consumer after a plain one has the plugins loaded');
}
$s->quit;

# 3
$s = store_session($node);
sasl_batch($s);
SKIP:
{
	skip 'no SASL plugin installed', 1 unless @plugins;
	cmp_ok(sess_ok($s, $plugins_sql), '>', 0,
		'a session\'s first consumer using SASL has the plugins loaded');
}

# 4
sess_ok($s, q{SELECT streamwin.run_available('q_plain2')});
is(sess_ok($s, 'SELECT k, n, s FROM q_plain2 ORDER BY k'), $expected,
	'a plain source\'s batch after a SASL consumer is exact');
$s->quit;

done_testing();
