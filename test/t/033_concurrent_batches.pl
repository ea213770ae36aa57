# 033_concurrent_batches.pl: two sessions run batches of one query.
#
# Batches of a query are serialised by a lock: a cron job's run_batch in a
# new session, or a worker just started, waits for a batch in progress in
# another session to commit.  The waiting batch must then start from what
# that batch left: its positions, and its state, which a new session loads
# from the state table.  Its statement's snapshot was taken before it
# waited, and must not be what the state is read with: the groups the
# other batch created would be missing, made again from the new rows alone,
# and written twice.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $node = new_node('concurrent');
psql_ok($node, q{
CREATE TABLE pay (id int PRIMARY KEY, g int);
SELECT streamwin.create_table_source('pay_src', 'pay');
SELECT streamwin.create_query('per_g', 'SELECT g, count(*) AS n FROM pay_src GROUP BY g',
    output_mode => 'update', start => false);
INSERT INTO pay SELECT i, 1 FROM generate_series(1, 100) i;
}, 'a table source and a running count per group');

my $want = 'SELECT g, count(*) AS n FROM pay GROUP BY g';
my $got  = 'SELECT g, n FROM per_g';

# the first batch, in a transaction left open: it creates group 1
my $first = $node->background_psql('postgres');
$first->query_safe("BEGIN; SELECT streamwin.run_batch('per_g')");
psql_ok($node, 'INSERT INTO pay SELECT i, 1 + i % 2 FROM generate_series(101, 160) i',
	'more rows, of groups 1 and 2');

# the second, in a new session: it waits for the first
my $second = $node->background_psql('postgres');
$second->query_until(qr/waiting/, q{
\echo waiting
SELECT (streamwin.run_batch('per_g')->>'input_rows')::int AS second_rows;
\echo ran
});
wait_until($node, q{SELECT count(*) > 0 FROM pg_stat_activity
  WHERE wait_event_type = 'Lock' AND query LIKE '%second_rows%'}, 't',
	'the second batch waits for the first');
$first->query_safe('COMMIT');
my $out = $second->query_until(qr/ran/, '');
like($out, qr/\b60\b/, 'the second batch read the 60 rows after the first');
$first->quit;
$second->quit;
results_match($node, $got, $want, 'both batches counted, as plain SQL counts');

# a third batch, in yet another session, loads the state as they left it
psql_ok($node, 'INSERT INTO pay VALUES (1000, 1), (1001, 2)', 'one more row of each group');
is($node->safe_psql('postgres', "SELECT (streamwin.run_batch('per_g')->>'input_rows')::int"), '2',
	'a third batch, in a new session');
results_match($node, $got, $want, 'the state held each group once: plain SQL');

# A session keeps the runner of a query it ran.  After the extension is
# dropped and created again, query ids begin again: the new query of the
# first id must not run on the runner of the old one in that session.
my $old_id = $node->safe_psql('postgres', "SELECT query_id FROM streamwin.query_catalog WHERE name = 'per_g'");
my $session = $node->background_psql('postgres');
$session->query_safe("SELECT streamwin.run_batch('per_g')");
psql_ok($node, q{
SELECT streamwin.drop_query('per_g', drop_result => true);
SELECT streamwin.drop_source('pay_src');
DROP EXTENSION streamwin CASCADE;
CREATE EXTENSION streamwin;
CREATE TABLE tag (id int PRIMARY KEY, k text);
SELECT streamwin.create_table_source('tag_src', 'tag');
SELECT streamwin.create_query('per_k', 'SELECT k, count(*) AS n FROM tag_src GROUP BY k',
    output_mode => 'update', start => false);
INSERT INTO tag SELECT i, 'k' || i % 3 FROM generate_series(1, 30) i;
}, 'the extension dropped and created again, and a new query');
is($node->safe_psql('postgres', "SELECT query_id FROM streamwin.query_catalog WHERE name = 'per_k'"), $old_id,
	'the new query has the old one\'s id');
$session->query_safe("SELECT streamwin.run_batch('per_k')");
$session->quit;
results_match($node, 'SELECT k, n FROM per_k', 'SELECT k, count(*) AS n FROM tag GROUP BY k',
	'it ran on a runner of its own, in the session that ran the old one');

# A control function that waits for a query another session drops says so
# when the drop commits, rather than do nothing and report success (a stop,
# which waits for the query's row) or go on with a query gone (a reset,
# which waits for the query's batch lock), or name the query by its id (a
# batch: "query 84 does not exist").
psql_ok($node, q{
SELECT streamwin.create_query('gone_stop', 'SELECT k, count(*) AS n FROM tag_src GROUP BY k',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('gone_reset', 'SELECT k, count(*) AS n FROM tag_src GROUP BY k',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('gone_batch', 'SELECT k, count(*) AS n FROM tag_src GROUP BY k',
    output_mode => 'update', start => false);
}, 'three queries, to be dropped under a stop, a reset and a batch');
for my $case ([ 'gone_stop', "SELECT streamwin.stop_query('gone_stop')" ],
	[ 'gone_reset', "SELECT streamwin.reset_query('gone_reset', 'earliest')" ],
	[ 'gone_batch', "SELECT streamwin.run_batch('gone_batch')" ])
{
	my ($q, $call) = @$case;
	my $dropper = $node->background_psql('postgres');
	$dropper->query_safe("BEGIN; SELECT streamwin.drop_query('$q', drop_result => true)");
	my $waiter = $node->background_psql('postgres', on_error_stop => 0);
	$waiter->query_until(qr/waiting/, "\\echo waiting\n$call;\n\\echo done\n");
	wait_until($node, qq{SELECT count(*) > 0 FROM pg_stat_activity
  WHERE wait_event_type = 'Lock' AND query LIKE '%$q''%' AND query NOT LIKE '%pg_stat_activity%'}, 't',
		"$q: the call waits for the session that drops the query");
	$dropper->query_safe('COMMIT');
	$dropper->quit;
	$waiter->query_until(qr/done/, '');
	$waiter->quit;
	like($waiter->{stderr}, qr/dropped by another session meanwhile/,
		"$q: once the drop commits, the call fails saying the query was dropped");
}

# drop_source while a create_query over the source has not committed: it
# waits for it, and then refuses naming the query, rather than fail on a
# foreign key of streamwin's catalog.
psql_ok($node, q{
CREATE TABLE race (id int, k text);
SELECT streamwin.create_table_source('race_src', 'race');
}, 'a source no query reads');
# drop_source($src) in a session of its own while $creator has a
# transaction open: it waits for it; once the statements @then and a COMMIT
# have run there, it refuses, naming $reader.
sub drop_waits_for
{
	my ($creator, $src, $reader, $what, @then) = @_;
	my $dropper = $node->background_psql('postgres', on_error_stop => 0);
	$dropper->query_until(qr/waiting/, "\\echo waiting\nSELECT streamwin.drop_source('$src');\n\\echo done\n");
	wait_until($node, qq{SELECT count(*) > 0 FROM pg_stat_activity
  WHERE wait_event_type = 'Lock' AND query LIKE '%drop_source(''$src'')%' AND query NOT LIKE '%pg_stat_activity%'}, 't',
		"drop_source waits for $what");
	$creator->query_safe($_) for (@then, 'COMMIT');
	$creator->quit;
	$dropper->query_until(qr/done/, '');
	$dropper->quit;
	like($dropper->{stderr}, qr/cannot drop source "$src" because queries read it\nDETAIL:  Queries reading the source: $reader\./,
		"then refuses, naming $reader");
	return;
}

my $creator = $node->background_psql('postgres');
$creator->query_safe(q{BEGIN; SELECT streamwin.create_query('late_reader', 'SELECT k FROM race_src', start => false)});
drop_waits_for($creator, 'race_src', 'late_reader', 'the create_query');

# A drop_source of a source that queries read fails at once, also while a
# session has its view open: it does not queue for the view, which every
# batch of those queries would then wait behind.
{
	my $reader = $node->background_psql('postgres');
	$reader->query_safe(q{BEGIN; SELECT count(*) FROM race_src});
	fails_like($node, q{SET statement_timeout = '10s'; SELECT streamwin.drop_source('race_src')},
		qr/cannot drop source "race_src" because queries read it/,
		'a drop of a source queries read fails at once while its view is open');
	$reader->query_safe('COMMIT');
	$reader->quit;
}

# And a drop_source that comes while a transaction that has read the
# source's view creates a query over it: it waits for that transaction, and
# then refuses naming the query.  It took the source's row first, then
# waited for the view; the create_query's foreign key waited for the row:
# a deadlock, and one of them failed.
psql_ok($node, q{
SELECT streamwin.create_table_source('race2_src', 'race');
}, 'another source, no query reading it');
$creator = $node->background_psql('postgres');
$creator->query_safe(q{BEGIN; SELECT count(*) FROM race2_src});
drop_waits_for($creator, 'race2_src', 'early_reader', 'the transaction that read the view',
	q{SELECT streamwin.create_query('early_reader', 'SELECT k FROM race2_src', start => false)});

# Two sessions creating a query, or a source, of one name: the second waits
# for the first, and once it commits says the name exists, rather than fail
# on a unique index of the catalog or of the tables it was making.
for my $case (
	[ 'twice_q', q{SELECT streamwin.create_query('twice_q', 'SELECT k FROM race2_src', start => false)},
		qr/query "twice_q" already exists/ ],
	[ 'twice_s', q{SELECT streamwin.create_kafka_source('twice_s', 'localhost:9', 't', 'a int')},
		qr/source "twice_s" already exists/ ])
{
	my ($name, $call, $exists) = @$case;
	my $first = $node->background_psql('postgres');
	$first->query_safe("BEGIN; $call");
	my $second = $node->background_psql('postgres', on_error_stop => 0);
	$second->query_until(qr/waiting/, "\\echo waiting\n$call;\n\\echo done\n");
	wait_until($node, qq{SELECT count(*) > 0 FROM pg_stat_activity
  WHERE wait_event_type = 'Lock' AND query LIKE '%''$name''%' AND query NOT LIKE '%pg_stat_activity%'}, 't',
		"$name: the second creation waits for the first");
	$first->query_safe('COMMIT');
	$first->quit;
	$second->query_until(qr/done/, '');
	$second->quit;
	like($second->{stderr}, $exists, "$name: then says the name exists");
}

# A table source created while other transactions run.  Its slot waits
# for the transactions running when it began (W1), then for those running
# when it has a full snapshot (W2); one that begins and ends in between
# (W3) is decoded, in an internal subtransaction, whose end left
# CurrentResourceOwner at the top transaction's: create_table_source then
# failed at the end of its statement, 'snapshot reference ... is not owned
# by resource owner TopTransaction'.
psql_ok($node, 'CREATE TABLE slow (id int PRIMARY KEY); ALTER TABLE slow REPLICA IDENTITY FULL; CREATE TABLE busy (x int)',
	'a table for a source, and one that other transactions write');
my ($w1, $w2, $w3) = map { $node->background_psql('postgres') } 1 .. 3;
my $maker = $node->background_psql('postgres', on_error_stop => 0);
my $xid1 = $w1->query_safe('BEGIN; INSERT INTO busy VALUES (1); SELECT txid_current()');
$maker->query_until(qr/making/, q{
\echo making
SELECT streamwin.create_table_source('slow_src', 'slow', '{"changes": "all"}');
\echo made
});
my $waits_for = q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
  WHERE NOT l.granted AND l.locktype = 'transactionid' AND l.transactionid::text = '%s'
    AND a.query LIKE '%%slow_src%%'};
wait_until($node, sprintf($waits_for, $xid1 =~ s/\s//gr), '1', 'the slot waits for W1');
my $xid2 = $w2->query_safe('BEGIN; INSERT INTO busy VALUES (2); SELECT txid_current()');
$w1->query_safe('COMMIT');
wait_until($node, sprintf($waits_for, $xid2 =~ s/\s//gr), '1', 'then for W2, running at its full snapshot');
$w3->query_safe('BEGIN; INSERT INTO busy VALUES (3); CREATE TABLE busy_3 (x int); COMMIT');
$w2->query_safe('COMMIT');
$maker->query_until(qr/made/, '');
$_->quit for $w1, $w2, $w3, $maker;
is($node->safe_psql('postgres', "SELECT count(*) FROM streamwin.sources WHERE name = 'slow_src'"), '1',
	'the source is created');

done_testing();
