# 032_offset_gaps.pl: a topic whose offsets have gaps.
#
# A transactional producer (Kafka Streams, Kafka Connect's exactly-once
# sources, Debezium with them) leaves a commit marker after each
# transaction: a record that takes an offset and that no consumer is given.
# So a partition's next offset is not its last message's plus one, and a
# batch's range of offsets holds fewer messages than offsets.  Batches,
# run_available() and, after a crash, the replay of the batches since the
# last checkpoint must read around them: the replay must read exactly the
# messages each batch read the first time, and stop at the gaps.
#
# The topic gets transactions of 1 to 4 messages per partition, each
# followed by its commit marker (the broker's control record, written by
# StreamwinTest::Broker::commit_marker), and a marker last in each
# partition.  A running count and sum per key is read in batches of 7
# messages, with a checkpoint every 4 batches; the server is crashed two
# batches after a checkpoint; run_batch restores and replays, and the rest
# is read by run_available().  The result must equal plain SQL over the
# same events, and the progress must count each message once.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

srand(32032);

my $NPART = 2;
my $broker = StreamwinTest::Broker->start(topics => { tx => $NPART });
my $brokers = $broker->bootstrap;
my $node = new_node('gaps',
	conf => "streamwin.checkpoint_interval = 4\nstreamwin.checkpoint_min_interval = 0\n"
	  . "restart_after_crash = on\n");

# 12 transactions, each a few messages to each partition, then its markers
my (@events, @ends, $id);
my $markers = 0;
for my $t (1 .. 12)
{
	my @msgs;
	for my $p (0 .. $NPART - 1)
	{
		for (1 .. 1 + int(rand(4)))
		{
			my $e = [ ++$id, 'k' . int(rand(5)), int(rand(1000)) ];
			push @events, $e;
			push @msgs, [ $p, sprintf('{"id": %d, "k": "%s", "v": %d}', @$e) ];
			$ends[$p]++;
		}
		$ends[$p]++;    # its marker
	}
	$broker->produce('tx', \@msgs);
	$broker->commit_marker('tx', $_) for 0 .. $NPART - 1;
	$markers += $NPART;
}
load_table($node, 'tx_events', 'id int, k text, v int', \@events);
note(scalar(@events) . " messages and $markers commit markers");

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('tx_src', '$brokers', 'tx', 'id int, k text, v int',
    options => '{"max_records_per_batch": 7}');
SELECT streamwin.create_query('tx_sum', 'SELECT k, count(*) AS n, sum(v) AS s FROM tx_src GROUP BY k',
    output_mode => 'update', start => false);
}, 'a source over the topic and a running count and sum per key');

my $want = 'SELECT k, count(*) AS n, sum(v) AS s FROM tx_events GROUP BY k';
my $got  = 'SELECT k, n, s FROM tx_sum';

# batches until two have run past a checkpoint other than the first
my $sql = "SELECT checkpoint_batch_id > 1 AND last_batch_id = checkpoint_batch_id + 2 "
  . "FROM streamwin.query_catalog WHERE name = 'tx_sum'";
for (my $i = 0; $i < 40 && $node->safe_psql('postgres', $sql) ne 't'; $i++)
{
	$node->safe_psql('postgres', "SELECT streamwin.run_batch('tx_sum')");
}
is($node->safe_psql('postgres', $sql), 't', 'two batches past a checkpoint');
cmp_ok($node->safe_psql('postgres', "SELECT sum(input_rows) FROM streamwin.progress WHERE query = 'tx_sum'"),
	'<', scalar(@events), 'and messages left to read');

# the crash empties the state; the two batches are replayed from the topic
crash_by_sigkill($node, 'a crash two batches after a checkpoint');
restore_after_crash($node, 'tx_sum');

# the rest, to the markers at the partitions' ends
$node->safe_psql('postgres', "SELECT streamwin.run_available('tx_sum')");
results_match($node, $got, $want, 'after the crash and the replay: the result equals plain SQL');
is($node->safe_psql('postgres', "SELECT sum(input_rows) FROM streamwin.progress WHERE query = 'tx_sum'"),
	scalar(@events), 'every message read once');

# every partition's stored position is past its last marker, its end:
# nothing left to read
my $offsets = q{SELECT string_agg(o.next_offset::text, ' ' ORDER BY o.partition)
  FROM streamwin.query_offsets o JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'tx_sum'};
is($node->safe_psql('postgres', $offsets), "@ends", 'the stored positions are the partitions\' ends, past their markers');
my $r = query_json($node, "SELECT streamwin.run_available('tx_sum')");
is($r->{input_rows} // 0, 0, 'run_available() after the end reads nothing');

# More transactions, read one batch at a time until a batch ran after the
# last checkpoint; then a crash: the batches replayed end at a marker, the
# partitions' ends.
for my $round (1 .. 4)
{
	my @msgs;
	for my $p (0 .. $NPART - 1)
	{
		my $e = [ ++$id, 'k' . int(rand(5)), int(rand(1000)) ];
		push @events, $e;
		push @msgs, [ $p, sprintf('{"id": %d, "k": "%s", "v": %d}', @$e) ];
		$ends[$p] += 2;
	}
	$broker->produce('tx', \@msgs);
	$broker->commit_marker('tx', $_) for 0 .. $NPART - 1;
	$node->safe_psql('postgres', "INSERT INTO tx_events VALUES " . join(', ', map { "($_->[0], '$_->[1]', $_->[2])" } @events[ -$NPART .. -1 ]));
	$node->safe_psql('postgres', "SELECT streamwin.run_available('tx_sum')");
	last if $node->safe_psql('postgres',
		"SELECT last_batch_id > checkpoint_batch_id FROM streamwin.query_catalog WHERE name = 'tx_sum'") eq 't';
}
is($node->safe_psql('postgres',
	"SELECT last_batch_id > checkpoint_batch_id FROM streamwin.query_catalog WHERE name = 'tx_sum'"), 't',
	'a batch after the last checkpoint');
is($node->safe_psql('postgres', $offsets), "@ends", 'the stored positions are the ends again');
my $restored = qr/query "tx_sum" lost its state in a crash; restoring the checkpoint/;
my $restores = log_count($node, $restored);
crash_by_sigkill($node, 'a crash after batches that end at markers');
for (my $i = 0; $i < 20; $i++)
{
	$node->safe_psql('postgres', "SELECT streamwin.run_batch('tx_sum')");
	last if log_count($node, $restored) > $restores && $node->safe_psql('postgres',
		"SELECT state_batch_id = last_batch_id FROM streamwin.query_catalog WHERE name = 'tx_sum'") eq 't';
}
cmp_ok(log_count($node, $restored), '>', $restores, 'tx_sum: restored its checkpoint after the second crash');
results_match($node, $got, $want, 'after the replay to the ends: the result equals plain SQL');
is($node->safe_psql('postgres', $offsets), "@ends", 'and the stored positions are the ends');
$r = query_json($node, "SELECT streamwin.run_available('tx_sum')");
is($r->{input_rows} // 0, 0, 'run_available() after the end reads nothing');

done_testing();
