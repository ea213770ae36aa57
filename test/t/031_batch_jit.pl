
# 031_batch_jit.pl: a batch's statements run without JIT compilation,
# whatever the session's or the server's jit setting (batch.c,
# batch_execute).
#
# A transform writes, with each event, the jit setting as its statement
# sees it (through a function of the test's own: current_setting() itself
# is refused in a query).  With jit = on for the server and in the session:
#   1. run_batch and run_available in a session: every result row says
#      off, the rows equal the events, and the session's setting is on
#      again after each call;
#   2. a worker: the same for the rows it writes.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $broker = StreamwinTest::Broker->start(topics => { ev => 2 });
my $brokers = $broker->bootstrap;
my $node = new_node('jit', conf => "jit = on\n");

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sev', '$brokers', 'ev', 'k int, v int', 'json',
    '{"max_records_per_batch": 200}');
CREATE FUNCTION setting_of(text) RETURNS text LANGUAGE sql STABLE AS \$\$SELECT current_setting(\$1)\$\$;
SELECT streamwin.create_query('q_jit', \$q\$SELECT k, v, setting_of('jit') AS jit FROM sev\$q\$,
    start => false);
}, 'source and query');

my $seq = 0;
my @expected;

# n events, half to each partition
sub produce_events
{
	my ($n) = @_;
	my @m;
	for (1 .. $n)
	{
		$seq++;
		push @m, [ $seq % 2, qq({"k": @{[ $seq % 9 ]}, "v": $seq}) ];
		push @expected, join('|', $seq % 9, $seq, 'off');
	}
	$broker->produce('ev', \@m);
}

sub expected { return join("\n", sort @expected) }

my $rows_sql = q{SELECT k || '|' || v || '|' || jit FROM q_jit ORDER BY 1};

# 1
produce_events(500);
my $s = store_session($node);
sess_ok($s, 'SET jit = on');
sess_ok($s, q{SELECT streamwin.run_batch('q_jit')});
is(sess_ok($s, q{SELECT current_setting('jit')}), 'on', 'the session\'s jit is on after run_batch');
sess_ok($s, q{SELECT streamwin.run_available('q_jit')});
is(sess_ok($s, q{SELECT current_setting('jit')}), 'on', 'and after run_available');
is(sess_ok($s, $rows_sql), expected(), 'the session\'s batches ran with jit off, every event once');
$s->quit;

# 2
psql_ok($node, q{SELECT streamwin.start_query('q_jit')}, 'worker started');
produce_events(300);
wait_until($node, "SELECT count(*) FROM q_jit", $seq, 'the worker wrote every event');
is($node->safe_psql('postgres', $rows_sql), expected(), 'the worker\'s batches ran with jit off');
psql_ok($node, q{SELECT streamwin.stop_query('q_jit')}, 'worker stopped');

done_testing();
