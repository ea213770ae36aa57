
# 012_start_positions.pl: where a query starts reading a Kafka topic.
#
#   - starting_offsets "latest": the first batch reads nothing of what the
#     topic held before; everything produced after it is read, once;
#   - "earliest" (the default): everything;
#   - a partition for which a started query has no position (one added to
#     the topic since the query started; simulated here by deleting the
#     query's stored position of partition 1) is read from its beginning,
#     whatever starting_offsets says, so that nothing written to it before
#     the query first looked is lost.
# Each result is compared with the exact set of ids produced.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $broker = StreamwinTest::Broker->start(topics => { sp => 2 });
my $node = new_node('positions');
my $brokers = $broker->bootstrap;

# messages [partition, payload] with ids $from..$to, round robin
sub ids
{
	my ($from, $to) = @_;
	return [ map { [ $_ % 2, qq({"id": $_}) ] } $from .. $to ];
}
sub want { my ($from, $to) = @_; return join(',', $from .. $to) }
sub got
{
	my ($q) = @_;
	return $node->safe_psql('postgres', "SELECT string_agg(id::text, ',' ORDER BY id) FROM $q");
}

$broker->produce('sp', ids(1, 10));
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sp_latest', '$brokers', 'sp', 'id int', 'json',
    '{"starting_offsets": "latest"}');
SELECT streamwin.create_kafka_source('sp_all', '$brokers', 'sp', 'id int', 'json');
SELECT streamwin.create_query('q_latest', 'SELECT id FROM sp_latest', start => false);
SELECT streamwin.create_query('q_all', 'SELECT id FROM sp_all', start => false);
}, 'a "latest" and an "earliest" source over a topic holding ids 1-10');

run_json($node, "run_batch('q_latest')");
is(got('q_latest'), '', 'latest: the first batch reads nothing the topic held');
$broker->produce('sp', ids(11, 20));
run_json($node, "run_available('q_latest')");
run_json($node, "run_available('q_all')");
is(got('q_latest'), want(11, 20), 'latest: then everything produced after it, once');
is(got('q_all'), want(1, 20), 'earliest: everything');

# Partition 1 "appears": the query has no position for it, but has started.
psql_ok($node, q{
DELETE FROM streamwin.query_offsets o USING streamwin.query_catalog q
 WHERE o.query_id = q.query_id AND q.name = 'q_latest' AND o.partition = 1;
}, 'q_latest forgets its position in partition 1');
$broker->produce('sp', ids(21, 24));
run_json($node, "run_available('q_latest')");
# read before: 11-20; now partition 1 from its beginning (the odd ids up to
# 23, 11-19 again since its position was deleted) and partition 0's new 22, 24
is( got('q_latest'),
	join(',', sort { $a <=> $b } (11 .. 20, (grep { $_ % 2 == 1 } 1 .. 23), 22, 24)),
	'a partition new to a started query is read from its beginning, even with "latest"');

$node->stop;
$broker->stop;
done_testing();
