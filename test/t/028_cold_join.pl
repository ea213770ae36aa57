
# 028_cold_join.pl: a join transform's first batches in new sessions run on
# its join tables instead of loading them (op_store.h), against plain SQL.
#
# A join store that cannot vouch for what it holds (a new session, a
# worker just started, another session's batch since) runs a batch that
# is small beside its join tables on the tables, through their indexes
# (made by the first such batch; the store drops them when it loads), and
# leaves a due checkpoint to a later batch.  Two table sources, impressions
# every 20 ms of event time and for two in three a click 0 to 25 minutes
# after, each fed in event-time order; two queries (watermark 1 minute):
#   k_pairs  the pairs of an impression and its clicks up to 20 minutes
#            after (a transform: runs cold)
#   k_tag    the same pairs by a text key and a bigint one (the store
#            compares text by its functions, integers in line)
#   k_agg    their count per ad per 5-minute tumble (a join under an
#            aggregation, whose groups count in state_rows too: loads)
# The state is built by large batches (the first loads the store, which
# writes the join tables without indexes), then:
#   1. batches from new connections (psql per call): each of k_pairs' says
#      it ran without loading (DEBUG1) where the tables have more pages
#      than it has rows, none of k_agg's does;
#   2. a large batch in a session (catch_up) loads, drops the indexes; a
#      worker then loads at once (makes no indexes); the next cold batch
#      makes them again; a single large run_batch in a session, which
#      loads, makes them too;
#   3. a crash (SIGKILL of an idle backend) after cold batches that left
#      their checkpoints to later: the next batch restores the checkpoint,
#      replays, and the batches after run cold again.
# After every round both results equal plain SQL over the events, and
# k_pairs' last state_rows equal the rows its join tables hold.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";

my $node = new_node('coldjoin',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  . "restart_after_crash = on\n");

# events(n): n more impressions, and the clicks whose time falls between
# the last impression before and the last one now, in click time order.
psql_ok($node, qq{
CREATE TABLE imps (imp_id bigint, ad_id int, imp_time timestamptz, tag text);
CREATE TABLE clks (click_id bigint, imp_id bigint, ad_id int, click_time timestamptz, tag text);
SELECT streamwin.create_table_source('imp_s', 'imps');
SELECT streamwin.create_table_source('clk_s', 'clks');
CREATE PROCEDURE events(n int) LANGUAGE plpgsql AS \$p\$
DECLARE
    b bigint;
    lo timestamptz;
    hi timestamptz;
BEGIN
    SELECT coalesce(max(imp_id), 0) INTO b FROM imps;
    lo := $T0 + b * interval '20 ms';
    hi := $T0 + (b + n) * interval '20 ms';
    INSERT INTO imps SELECT b + g, (b + g) % 97, $T0 + (b + g) * interval '20 ms', 'ad-' || (b + g) % 97
      FROM generate_series(1, n) g;
    INSERT INTO clks
    SELECT * FROM (SELECT i.imp_id * 2 + d, i.imp_id, i.ad_id,
                          i.imp_time + ((i.imp_id * 7919 + d * 104729) % 1501) * interval '1 second' AS t,
                          i.tag
                     FROM imps i, generate_series(0, 1) d
                    WHERE i.imp_time > lo - interval '26 minutes' AND (i.imp_id + d) % 3 <> 0) x
     WHERE t > lo AND t <= hi ORDER BY t;
END \$p\$;
}, 'two table sources and the events');

my $on = q{ON c.ad_id = i.ad_id AND c.imp_id = i.imp_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '20 minutes'};
psql_ok($node, qq{
SELECT streamwin.create_query('k_pairs',
    \$q\$SELECT i.imp_id, c.click_id, c.click_time - i.imp_time AS delay
         FROM imp_s i JOIN clk_s c $on\$q\$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('k_tag',
    \$q\$SELECT i.imp_id, c.click_id FROM imp_s i JOIN clk_s c
       ON c.tag = i.tag AND c.imp_id = i.imp_id
      AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '20 minutes'\$q\$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('k_agg',
    \$q\$SELECT i.ad_id, count(*) AS n FROM imp_s i JOIN clk_s c $on
       GROUP BY streamwin.tumble(i.imp_time, '5 minutes'), i.ad_id\$q\$,
    watermark => '1 minute', output_mode => 'update', start => false);
}, 'a join transform and a join under an aggregation');

my @queries = qw(k_pairs k_tag k_agg);
my %want = (
	k_pairs => "SELECT i.imp_id, c.click_id, c.click_time - i.imp_time FROM imps i JOIN clks c $on",
	k_tag   => "SELECT i.imp_id, c.click_id FROM imps i JOIN clks c ON c.tag = i.tag AND c.imp_id = i.imp_id
                  AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '20 minutes'",
	k_agg   => "SELECT date_bin('5 minutes', i.imp_time, $T0), i.ad_id, count(*) FROM imps i JOIN clks c $on GROUP BY 1, 2");
my %got = (
	k_pairs => 'SELECT imp_id, click_id, delay FROM k_pairs',
	k_tag   => 'SELECT imp_id, click_id FROM k_tag',
	k_agg   => 'SELECT window_start, ad_id, n FROM k_agg');

sub join_tables
{
	my ($q) = @_;
	return split /\n/, $node->safe_psql('postgres', qq{
SELECT join_table FROM streamwin.query_sources JOIN streamwin.query_catalog USING (query_id)
 WHERE name = '$q' ORDER BY join_table});
}

# Both join tables' pages, and whether they have indexes
sub join_pages
{
	my ($q) = @_;
	my $pages = 0;
	$pages += $node->safe_psql('postgres',
		"SELECT pg_relation_size('$_'::regclass) / current_setting('block_size')::int") for join_tables($q);
	return $pages;
}
sub join_indexed
{
	my ($q) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) > 0 FROM pg_index x JOIN streamwin.query_sources s ON x.indrelid = s.join_table
  JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = '$q'});
}

# Each query reads what is left (new connections, batches of 100: cold
# first, then loading once that pays), then matches plain SQL.
sub check_all
{
	my ($when) = @_;
	for my $q (@queries)
	{
		psql_ok($node, "SET streamwin.max_records_per_batch = 100; CALL streamwin.catch_up('$q')",
			"$q: catches up $when");
		results_match($node, $got{$q}, $want{$q}, "$q: the result equals plain SQL $when");
	}
	my $rows = 0;
	$rows += $node->safe_psql('postgres', "SELECT count(*) FROM $_") for join_tables('k_pairs');
	is( $node->safe_psql('postgres',
			"SELECT state_rows FROM streamwin.progress WHERE query = 'k_pairs' ORDER BY batch_id DESC LIMIT 1"),
		$rows, "k_pairs: its last state_rows are the rows of its join tables $when");
	return;
}

# One batch of q from a new connection (as a cron job runs it): whether it
# ran without loading, and its input rows.
sub cold_call
{
	my ($q) = @_;
	return new_session_batch($node, $q, 100);
}

# Rounds of 50 impressions and their clicks, then each query's batch from
# a new connection.  k_pairs' runs cold exactly when its tables have more
# pages than the batch has rows; k_agg's never.  Returns how many of
# k_pairs' ran cold.
sub cold_rounds
{
	my ($rounds, $when) = @_;
	my ($cold, $want, $agg_cold) = (0, 0, 0);
	for my $i (1 .. $rounds)
	{
		psql_ok($node, 'CALL events(50)');
		my $pages = join_pages('k_pairs');
		my ($c, $rows) = cold_call('k_pairs');
		$want++ if $rows > 0 && $pages > $rows;
		$cold++ if $c && $rows > 0;
		($c) = cold_call('k_agg');
		$agg_cold++ if $c;
	}
	is($cold, $want, "k_pairs: its batches from a new connection ran cold where its tables are larger $when");
	is($agg_cold, 0, "k_agg: none of its batches ran cold $when");
	return $cold;
}

# ==== the build: large batches, the first of which loads (an empty store) ====

psql_ok($node, 'CALL events(60000)', '60,000 impressions and their clicks');
my $big = store_session($node);
sess_ok($big, 'SET streamwin.max_records_per_batch = 100000');
sess_ok($big, "CALL streamwin.catch_up('$_')") for @queries;
check_all('after the build');
is(join_indexed('k_pairs'), 'f', 'k_pairs: the store wrote its join tables without indexes');
cmp_ok(join_pages('k_pairs'), '>', 300, 'k_pairs: its join tables have more pages than a batch has rows');

# ==== 1. new connections ========================================================

is(cold_rounds(8, 'in round 1'), 8, 'k_pairs: all 8 batches of round 1 ran cold');
is(join_indexed('k_pairs'), 't', 'k_pairs: its first cold batch made the indexes of its join tables');
cmp_ok($node->safe_psql('postgres',
		"SELECT last_batch_id - checkpoint_batch_id FROM streamwin.query_catalog WHERE name = 'k_pairs'"),
	'>=', 3, 'k_pairs: cold batches leave their checkpoints to later batches');
check_all('after round 1');

# ==== 2. a large batch in a session loads, and drops the indexes ===============

psql_ok($node, 'CALL events(3000)');
sess_ok($big, "CALL streamwin.catch_up('$_')") for @queries;
is(join_indexed('k_pairs'), 'f', 'k_pairs: the store that loaded dropped the indexes');
check_all('after a large batch');

# A worker over join tables without indexes loads at once rather than make
# them for cold batches it would soon give up.
psql_ok($node, "SELECT streamwin.alter_query('k_pairs', trigger_interval => '100 milliseconds')",
	'k_pairs: a short trigger');
psql_ok($node, "SELECT streamwin.start_query('k_pairs')", 'k_pairs: a worker');
worker_pid($node, 'k_pairs', 'for part 2');
psql_ok($node, 'CALL events(50)');
wait_results_match($node, $got{k_pairs}, $want{k_pairs}, 'k_pairs: the worker joined every event');
psql_ok($node, "SELECT streamwin.stop_query('k_pairs')", 'k_pairs: the worker stops');
wait_until($node, "SELECT worker_pid IS NULL FROM streamwin.queries WHERE name = 'k_pairs'", 't',
	'k_pairs: its worker is gone');
is(join_indexed('k_pairs'), 'f', 'k_pairs: the worker loaded its join state without making indexes');
check_all('after a worker');
cold_rounds(4, 'after a large batch');
is(join_indexed('k_pairs'), 't', 'k_pairs: a cold batch made the indexes again');
check_all('after round 2');

# A single large run_batch in a session, which loads, makes the indexes a
# backlog's catch_up dropped: it has just read the join tables, and the
# next sessions' batches run cold at once.
psql_ok($node, 'CALL events(3000)');
sess_ok($big, "CALL streamwin.catch_up('k_pairs')");
is(join_indexed('k_pairs'), 'f', "k_pairs: catch_up's store dropped the indexes");
psql_ok($node, 'CALL events(3000)');
{
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET streamwin.max_records_per_batch = 100000; SET client_min_messages = debug1;"
		  . " SELECT (streamwin.run_batch('k_pairs'))->>'input_rows'");
	cmp_ok($out, '>', 3000, 'k_pairs: one large batch in a new session read the events');
	unlike($err, qr/without loading/, 'k_pairs: the large batch loaded');
}
is(join_indexed('k_pairs'), 't', 'k_pairs: the batch that loaded made the indexes of its join tables');
cold_rounds(2, 'after a loading run_batch');
check_all('after a loading run_batch');

# ==== 3. a crash after cold batches =============================================

cold_rounds(4, 'before a crash');
crash_by_sigkill($node, 'a crash after cold batches');
eval { $big->quit };

restore_after_crash($node, $_) for @queries;
check_all('after the crash and the replays');
is(cold_rounds(4, 'after the crash'), 4, 'k_pairs: its batches after the crash ran cold');
check_all('after round 3');

done_testing();
