
# 012_start_positions.pl: where a query starts reading a Kafka topic.
#
#   - starting_offsets "latest": the first batch reads nothing of what the
#     topic held before the query was created; everything produced after
#     that is read, once, also when its first batches fail;
#   - "earliest" (the default): everything;
#   - a partition for which a started query has no position (one added to
#     the topic since the query started; simulated here by deleting the
#     query's stored position of partition 1) is read from its beginning,
#     whatever starting_offsets says, so that nothing written to it before
#     the query first looked is lost;
#   - reset_query with explicit offsets: only partitions the source reads
#     may be named (an unknown one is refused, saying which it reads, and
#     moves nothing); the ones not named start at the earliest;
#   - a crash after a first batch that read nothing: the query reads on
#     from where that batch resolved "latest".
# Each result is compared with the exact set of ids produced.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $broker = StreamwinTest::Broker->start(topics => { sp => 2, sp2 => 2 });
my $node = new_node('positions', conf => "restart_after_crash = on\n");
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

# "latest" is where each partition ended when the query was created: what
# is produced before its first batch is read, and a first batch that fails
# (here its function refuses rows until a gate opens) moves nothing, so its
# retries read what came in the meantime too.
$broker->produce('sp2', ids(1, 10));
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sp_latest2', '$brokers', 'sp2', 'id int', 'json',
    '{"starting_offsets": "latest"}');
CREATE TABLE sp_gate (open boolean);
INSERT INTO sp_gate VALUES (false);
CREATE FUNCTION sp_gated(i int) RETURNS int LANGUAGE plpgsql AS
\$f\$ BEGIN IF NOT (SELECT open FROM sp_gate) THEN RAISE EXCEPTION 'the gate is closed'; END IF; RETURN i; END \$f\$;
SELECT streamwin.create_query('q_latest2', 'SELECT sp_gated(id) AS id FROM sp_latest2', start => false);
}, 'a "latest" query created over a topic holding ids 1-10');
$broker->produce('sp2', ids(11, 20));
fails_like($node, "SELECT streamwin.run_batch('q_latest2')", qr/the gate is closed/, 'its first batch fails');
$broker->produce('sp2', ids(21, 30));
fails_like($node, "SELECT streamwin.run_batch('q_latest2')", qr/the gate is closed/, 'and its retry');
$broker->produce('sp2', ids(31, 40));
psql_ok($node, 'UPDATE sp_gate SET open = true', 'the gate opens');
run_json($node, "run_available('q_latest2')");
is(got('q_latest2'), want(11, 40), 'latest: everything produced since the query was created, once');

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

# reset_query names partitions 0 and 1 only.
for my $bad ([ '{"7": 5}', qr/source "sp_all" does not read partition 7\n.*It reads partitions 0 and 1 of topic "sp"\./s ],
	[ '{"0": 1, "x": 2}', qr/invalid partition "x" in starting_offsets\n.*reads partitions 0 and 1 of topic "sp"/s ],
	# a partition's number as it is written: "01" was taken for 1, then
	# not applied (partition 1 started at its earliest), an offset it does
	# not hold unchecked
	[ '{"01": 999999}', qr/invalid partition "01" in starting_offsets/ ],
	[ '{" 1": 3}', qr/invalid partition " 1" in starting_offsets/ ],
	[ '{"1": null}', qr/invalid offset null for partition 1/ ],
	# and an offset as its number is written
	[ '{"1": ""}', qr/invalid offset "" for partition 1/ ],
	[ '{"1": "+3"}', qr/invalid offset "\+3" for partition 1/ ])
{
	my ($offsets, $re) = @$bad;
	my ($rc, $out, $err) = (0, '', '');
	$rc = $node->psql('postgres', "SELECT streamwin.reset_query('q_all', '$offsets')",
		stdout => \$out, stderr => \$err);
	isnt($rc, 0, "reset_query('q_all', '$offsets') is refused");
	like($err, $re, "... saying which partitions the source reads");
}
# nothing moved: the next run reads what was produced since (21-24)
run_json($node, "run_available('q_all')");
is(got('q_all'), want(1, 24), 'a refused reset leaves the positions as they were');
# partition 1 from offset 3 (ids 7, 9, ... 23), partition 0 from its earliest
# (2, 4, ... 24); the transform's result is emptied by the reset (its rows
# would be appended again), so it holds what the new positions give
psql_ok($node, q{SELECT streamwin.reset_query('q_all', '{"1": 3}')}, 'reset_query to offset 3 of partition 1');
run_json($node, "run_available('q_all')");
is( got('q_all'),
	join(',', sort { $a <=> $b } ((grep { $_ % 2 == 0 } 1 .. 24), (grep { $_ % 2 == 1 } 7 .. 23))),
	'then partition 1 is read again from offset 3 and partition 0 from its beginning');

# A reset before a query's first batch, then a crash (which empties the
# UNLOGGED state): the first batch restores the checkpoint the reset took,
# and with it the reset's positions, not the source's starting_offsets.
psql_ok($node, q{
SELECT streamwin.create_query('q_sum', 'SELECT id % 2 AS odd, count(*) AS n, sum(id) AS s FROM sp_all GROUP BY 1',
    output_mode => 'update', start => false);
SELECT streamwin.reset_query('q_sum', 'latest');
}, 'an aggregation reset to the latest positions before its first batch');
crash_by_sigkill($node, 'after the reset');
$broker->produce('sp', ids(25, 30));
run_json($node, "run_available('q_sum')");
is( $node->safe_psql('postgres', q{SELECT string_agg(odd || ':' || n || ':' || s, ',' ORDER BY odd) FROM q_sum}),
	join(',', map { my $p = $_; my @i = grep { $_ % 2 == $p } 25 .. 30; my $t = 0; $t += $_ for @i; "$p:" . @i . ":$t" } 0, 1),
	'after the crash it reads what was produced since the reset alone');

# A deduplicating query over "latest" whose first batch reads nothing: its
# store is not loaded then, and its checkpoint waits for one that is, but
# not the first, which holds where the query started.  A crash before a
# second batch must not resolve "latest" again, past what came since.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('sp_latest_ts', '$brokers', 'sp', 'id int, ts timestamptz', 'json',
    '{"starting_offsets": "latest"}');
SELECT streamwin.create_query('q_once', 'SELECT id FROM sp_latest_ts', dedup_keys => '{id}',
    watermark => '1 hour', options => '{"event_time": "ts"}', start => false);
}, 'a deduplicating query over "latest"');
run_json($node, "run_batch('q_once')");
is(got('q_once'), '', 'dedup over latest: the first batch reads nothing the topic held');
$broker->produce('sp', [ map { [ $_ % 2, qq({"id": $_, "ts": "2026-01-01T00:00:${_}Z"}) ] } 31 .. 40 ]);
crash_by_sigkill($node, 'after a first batch without rows');
run_json($node, "run_available('q_once')");
is(got('q_once'), want(31, 40), 'after the crash it reads what was produced since its first batch');

$node->stop;
$broker->stop;
done_testing();
