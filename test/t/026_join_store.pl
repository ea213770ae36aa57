# 026_join_store.pl: the join store (src/store/join_store.c) against plain SQL.
#
# Inner joins on columns keep each side's rows in memory, write their join
# tables without indexes and evict by row location; past
# streamwin.state_memory they run on their join tables (with indexes made
# for that) and come back to memory.  Every expectation below is plain SQL
# over the events the queries read, kept in the ordinary tables that the
# two table sources read; nothing is a number copied from a run.
#
# The events: an impression every 100 ms of event time (97 ads), and for
# two impressions in three a click 0 to 12 minutes after it (some outside
# the 10-minute range, some on its ends), each source fed in event-time
# order, so that no row is late.  The queries (watermark 1 minute):
#
#   j_pairs  the pairs of an impression and its clicks (two keys)
#   j_ad     clicks and impressions of the same ad up to a minute before
#            (one key: many rows share it)
#   j_agg    count, an integer sum, min, max and bool_or per ad per 1-minute
#            tumble of the impression's time over j_pairs' join, update
#            mode: the store folds the join's pairs itself (store_merge
#            auto); g_agg, the same in a session with store_merge =
#            groups (the executor's partial aggregation), gives the same
#            rows to the bit; j_aggf, a float sum over the join, which
#            the store takes as groups whatever the setting
#   j_run    a running count and max per ad_id % 7 over j_pairs' join,
#            update mode (no window: the pairs folded into 7 groups)
#   j_left   j_pairs' join as a LEFT JOIN (it runs on its join tables)
#
#   1. In one session with streamwin.state_memory = 1MB, j_pairs' state
#      grows past the cap: it runs on its tables, exact, and comes back to
#      memory when the cap is raised; j_ad's fits throughout.
#   2. Batches rolled back, a batch of another session in between, a
#      reset_query: each next batch finds out and reloads, exact.  The
#      join checkpoints, compacted and written anew; then by one
#      run_available, from the join tables and the rows it keeps back in
#      memory, and a crash after it: exact.
#   3. Running queries; SIGKILL of the worker or of a backend right after
#      a join checkpoint and two batches after one: recovery restores the
#      checkpoint, replays, and the results stay exact.
#   At the end, one row a day later in each source lets every row go: the
#   outer join's unmatched impressions are emitted, and the state is empty.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";

my $node = new_node('jstore',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  . "restart_after_crash = on\n");

# events(n): n more impressions after those there are, and the clicks whose
# time falls between the last impression before and the last one now (of
# impressions up to 12 minutes earlier), in click time order.
psql_ok($node, qq{
CREATE TABLE imps (imp_id bigint, ad_id int, imp_time timestamptz);
CREATE TABLE clks (click_id bigint, imp_id bigint, ad_id int, click_time timestamptz);
SELECT streamwin.create_table_source('imp_s', 'imps', '{"max_records_per_batch": 500}');
SELECT streamwin.create_table_source('clk_s', 'clks', '{"max_records_per_batch": 500}');
CREATE PROCEDURE events(n int) LANGUAGE plpgsql AS \$p\$
DECLARE
    b bigint;
    lo timestamptz;
    hi timestamptz;
BEGIN
    SELECT coalesce(max(imp_id), 0) INTO b FROM imps WHERE imp_id < 1000000000;
    lo := $T0 + b * interval '100 ms';
    hi := $T0 + (b + n) * interval '100 ms';
    INSERT INTO imps SELECT b + g, (b + g) % 97, $T0 + (b + g) * interval '100 ms'
      FROM generate_series(1, n) g;
    INSERT INTO clks
    SELECT * FROM (SELECT i.imp_id * 2 + d, i.imp_id, i.ad_id,
                          i.imp_time + ((i.imp_id * 7919 + d * 104729) % 721) * interval '1 second' AS t
                     FROM imps i, generate_series(0, 1) d
                    WHERE i.imp_time > lo - interval '13 minutes' AND i.imp_id < 1000000000
                      AND (i.imp_id + d) % 3 <> 0) x
     WHERE t > lo AND t <= hi ORDER BY t;
END \$p\$;
}, 'two table sources and the events');

my $on = q{ON c.ad_id = i.ad_id AND c.imp_id = i.imp_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'};
my $on_ad = q{ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '1 minute'};
my $AGGS = 'count(*) AS n, sum((c.click_id % 1000)::int) AS sc, min(c.click_time) AS first, '
  . 'max(i.imp_id) AS hi, bool_or(c.click_id % 7 = 0) AS sevens';
my %sql = (
	pairs => "SELECT i.imp_id, c.click_id, c.click_time - i.imp_time AS delay FROM %s i JOIN %s c $on",
	ad    => "SELECT i.imp_id, c.click_id FROM %s i JOIN %s c $on_ad",
	agg   => "SELECT i.ad_id, $AGGS FROM %s i JOIN %s c $on GROUP BY streamwin.tumble(i.imp_time, '1 minute'), i.ad_id",
	aggf  => "SELECT i.ad_id, sum((c.click_id % 1000) / 8.0::float8) AS sf FROM %s i JOIN %s c $on"
	  . " GROUP BY streamwin.tumble(i.imp_time, '1 minute'), i.ad_id",
	run   => "SELECT i.ad_id % 7 AS a7, count(*) AS n, max(c.click_time) AS last FROM %s i JOIN %s c $on GROUP BY i.ad_id % 7",
	left  => "SELECT i.imp_id, c.click_id FROM %s i LEFT JOIN %s c $on");
my %want = (
	pairs => "SELECT i.imp_id, c.click_id, c.click_time - i.imp_time FROM imps i JOIN clks c $on",
	ad    => "SELECT i.imp_id, c.click_id FROM imps i JOIN clks c $on_ad",
	agg   => "SELECT date_bin('1 minute', i.imp_time, $T0), i.ad_id, $AGGS FROM imps i JOIN clks c $on GROUP BY 1, 2",
	aggf  => "SELECT date_bin('1 minute', i.imp_time, $T0), i.ad_id, sum((c.click_id % 1000) / 8.0::float8)"
	  . " FROM imps i JOIN clks c $on GROUP BY 1, 2",
	run   => "SELECT i.ad_id % 7, count(*), max(c.click_time) FROM imps i JOIN clks c $on GROUP BY 1");
my %got = (
	pairs => 'SELECT imp_id, click_id, delay FROM %s',
	ad    => 'SELECT imp_id, click_id FROM %s',
	agg   => 'SELECT window_start, ad_id, n, sc, first, hi, sevens FROM %s',
	aggf  => 'SELECT window_start, ad_id, sf FROM %s',
	run   => 'SELECT a7, n, last FROM %s');

# query name => its kind, in parts 1-2 (created stopped) and 3 (running)
sub create
{
	my ($q, $kind, $running) = @_;
	my $sql = sprintf($sql{$kind}, 'imp_s', 'clk_s');
	my $mode = $kind =~ /^(agg|run)/ ? q{, output_mode => 'update'} : '';
	my $how = $running ? q{trigger_interval => '100 ms', start => false} : 'start => false';
	psql_ok($node, "SELECT streamwin.create_query('$q', \$q\$$sql\$q\$, watermark => '1 minute'$mode, $how)",
		"$q: created");
	return;
}
create('j_pairs', 'pairs');
create('j_ad', 'ad');
# the files of their join checkpoints as they begin
my %ckpt_file = map { split /\|/ } split /\n/, $node->safe_psql('postgres', q{
SELECT s.join_checkpoint::regclass || '|' || pg_relation_filenode(s.join_checkpoint)
  FROM streamwin.query_sources s JOIN streamwin.query_catalog q USING (query_id) WHERE q.name IN ('j_pairs', 'j_ad')});
create('j_agg', 'agg');
create('g_agg', 'agg');
create('j_aggf', 'aggf');
create('j_run', 'run');
create('j_left', 'left');
# part 3's, started then: a query over a table source reads from where the
# source stood when the query was made
create('c_pairs', 'pairs', 1);
create('c_agg', 'agg', 1);

# Does the query keep store keys in its plan, and do its join tables have
# indexes (it runs on them)?
sub store_keys
{
	my ($q) = @_;
	return $node->safe_psql('postgres',
		"SELECT plan->'join' ? 'store_keys' FROM streamwin.query_catalog WHERE name = '$q'");
}
sub join_table_mode
{
	my ($q) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) > 0 FROM pg_index x JOIN streamwin.query_sources s ON x.indrelid = s.join_table
  JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = '$q'});
}
sub switches
{
	my ($q) = @_;
	my $out = log_count($node, qr/the join state of query "$q" does not fit in streamwin\.state_memory/);
	my $in = log_count($node, qr/the join state of query "$q" fits in memory again/);
	return "$out/$in";
}

is(store_keys($_), 't', "$_: an inner join on columns keeps its state in a join store") for qw(j_pairs j_ad j_agg j_run);
is(store_keys('j_left'), 'f', 'j_left: an outer join keeps its state on its join tables');
is(join_table_mode($_), 'f', "$_: its join tables have no index") for qw(j_pairs j_ad j_agg);
is(join_table_mode('j_left'), 't', 'j_left: its join tables have their indexes');

# Every result, against plain SQL over what the sources hold (all of it:
# the queries read up to the end first).
sub check
{
	my ($when, @queries) = @_;
	for my $q (@queries)
	{
		my ($kind) = $q =~ /^[jcg]_(\w+)$/;
		results_match($node, sprintf($got{$kind}, $q), $want{$kind}, "$q: exact $when");
	}
	return;
}

# ==== 1. the memory cap, in a session ==========================================

my $s1 = store_session($node);
sess_ok($s1, "SET streamwin.state_memory = '1MB'");
sub catch_up
{
	my ($s, @queries) = @_;
	sess_ok($s, "SELECT streamwin.run_available('$_') IS NOT NULL") for @queries;
	return;
}
my @q12 = qw(j_pairs j_ad j_agg j_run j_left);
my $sg = store_session($node);
sess_ok($sg, 'SET streamwin.store_merge = groups');
for my $round (1 .. 6)
{
	psql_ok($node, 'CALL events(1500)');
	catch_up($s1, @q12);
	catch_up($sg, qw(g_agg j_aggf));
}
# which way each store took a batch: in auto, the pairs as rows, but a
# float sum's as groups
psql_ok($node, 'CALL events(300)');
my (undef, $said) = sess($sg, 'SET streamwin.store_merge = auto; SET client_min_messages = debug1; '
	  . "SELECT streamwin.run_available('j_agg') IS NOT NULL; SELECT streamwin.run_available('j_aggf') IS NOT NULL; "
	  . 'SET client_min_messages = warning; SET streamwin.store_merge = groups');
like($said, qr/query "j_agg" merges \d+ rows into its store/, 'j_agg: in auto, the store folds the join\'s pairs');
like($said, qr/query "j_aggf" merges \d+ groups into its store/, 'j_aggf: the store merges groups');
unlike($said, qr/query "j_aggf" merges \d+ rows/, 'j_aggf: never rows');
catch_up($s1, @q12);
catch_up($sg, 'g_agg');
check('past the cap', qw(j_pairs j_ad j_agg j_run));
check('in a session of its own', qw(g_agg j_aggf));
results_match($node, 'SELECT * FROM j_agg', 'SELECT * FROM g_agg',
	'j_agg: the pairs folded by the store give the groups of the partial aggregation, to the bit');
is( $node->safe_psql('postgres', q{
SELECT string_agg(name || ':' || (plan ? 'store_batch_rows_sql'), ' ' ORDER BY name)
  FROM streamwin.query_catalog WHERE name IN ('j_agg', 'j_aggf', 'j_run')}),
	'j_agg:true j_aggf:false j_run:true', 'j_agg and j_run have the statement of their pairs as rows; j_aggf (a float sum) has not');
psql_ok($node, sprintf(q{SELECT streamwin.create_query('l_agg', $q$%s$q$, watermark => '1 minute',
	output_mode => 'update', start => false)}, sprintf($sql{agg}, 'imp_s', 'clk_s') =~ s/ JOIN / LEFT JOIN /r), 'l_agg: created');
is( $node->safe_psql('postgres', q{SELECT plan ? 'store_batch_rows_sql' FROM streamwin.query_catalog WHERE name = 'l_agg'}),
	'f', 'l_agg (an outer join, without a join store) has no statement of its pairs as rows');
psql_ok($node, q{SELECT streamwin.drop_query('l_agg', true)}, 'l_agg: dropped');
is(switches('j_pairs'), '1/0', 'j_pairs: its join state stopped fitting in streamwin.state_memory, once');
is(join_table_mode('j_pairs'), 't', 'j_pairs: it runs on its join tables, with their indexes');
is(switches('j_ad'), '0/0', 'j_ad: its join state (one minute of rows) fits throughout');
is(join_table_mode('j_ad'), 'f', 'j_ad: its join tables have no index');

# The cap raised: the store tries again every 100 batches.
sess_ok($s1, "SET streamwin.state_memory = '64MB'");
for my $i (1 .. 105)
{
	psql_ok($node, 'CALL events(20)') if $i % 5 == 0;
	sess_ok($s1, "SELECT streamwin.run_batch('j_pairs') IS NOT NULL");
}
catch_up($s1, @q12);
is(switches('j_pairs'), '1/1', 'j_pairs: its join state fits in memory again');
is(join_table_mode('j_pairs'), 'f', 'j_pairs: its join tables have no index again');
psql_ok($node, 'CALL events(1500)');
catch_up($s1, @q12);
check('back in memory', qw(j_pairs j_ad j_agg j_run));

# ==== 2. rolled back, another session's batches, a reset =======================

# s1's stores are loaded.  A batch rolled back: its rows went into memory
# and the tables, and out of the tables with the rollback.
psql_ok($node, 'CALL events(700)');
sess_ok($s1, "BEGIN; SELECT streamwin.run_batch('$_') IS NOT NULL; ROLLBACK") for @q12;
catch_up($s1, @q12);
check('after batches rolled back and run again', qw(j_pairs j_ad j_agg j_run));
# two in one transaction, rolled back
psql_ok($node, 'CALL events(700)');
sess_ok($s1, "BEGIN; SELECT streamwin.run_batch('j_pairs') IS NOT NULL; SELECT streamwin.run_batch('j_pairs') IS NOT NULL; ROLLBACK");
catch_up($s1, 'j_pairs');
# another session's batches in between
my $s2 = store_session($node);
psql_ok($node, 'CALL events(700)');
sess_ok($s2, "SELECT streamwin.run_batch('$_') IS NOT NULL") for @q12;
psql_ok($node, 'CALL events(700)');
catch_up($s1, @q12);
catch_up($s2, @q12);
psql_ok($node, 'CALL events(700)');
catch_up($s1, @q12);
check("after another session's batches", qw(j_pairs j_ad j_agg j_run));
$s2->quit;
# A failed batch: the result table refuses a row after the join store took
# the batch's rows in.
psql_ok($node, 'ALTER TABLE j_pairs ADD CONSTRAINT no_late CHECK (delay < interval \'9 minutes\') NOT VALID');
psql_ok($node, 'CALL events(700)');
my (undef, $err) = sess($s1, "SELECT streamwin.run_batch('j_pairs')");
like($err, qr/no_late/, 'j_pairs: a batch fails on the result table');
psql_ok($node, 'ALTER TABLE j_pairs DROP CONSTRAINT no_late');
catch_up($s1, @q12);
check('after a failed batch', qw(j_pairs j_ad j_agg j_run));
# The checkpoint of the join tables is the join tables, row for row,
# besides rows out of reach at its watermark, which it keeps until it has
# grown past twice the join table's pages: then it is written anew (its
# file changes), so that it stays bounded.  Compacting the join tables
# (VACUUM FULL, which the store notices: their files change) makes the
# next checkpoint find its checkpoint so.
for my $q (qw(j_pairs j_ad))
{
	my @sides = join_checkpoint_sides($node, $q);
	my %before = map { $_->{ckpt} => $node->safe_psql('postgres', "SELECT count(*) FROM $_->{ckpt} v WHERE NOT ($_->{in_reach})") } @sides;
	cmp_ok($before{ $_->{ckpt} }, '>', 0, "$q: checkpoint $_->{ckpt} keeps rows out of reach ($before{$_->{ckpt}})") for @sides;
	psql_ok($node, "VACUUM FULL $_->{table}") for @sides;
	my $c0 = $node->safe_psql('postgres', "SELECT checkpoint_batch_id FROM streamwin.query_catalog WHERE name = '$q'");
	my $at = "SELECT checkpoint_batch_id = last_batch_id AND checkpoint_batch_id > $c0 FROM streamwin.query_catalog WHERE name = '$q'";
	for (my $i = 0; $i < 5 && $node->safe_psql('postgres', $at) ne 't'; $i++)
	{
		psql_ok($node, 'CALL events(50)');
		sess_ok($s1, "SELECT streamwin.run_batch('$q') IS NOT NULL");
	}
	is($node->safe_psql('postgres', $at), 't', "$q: its last batch took a checkpoint, after the compaction");
	for my $sd (join_checkpoint_sides($node, $q))
	{
		my ($ckpt, $table) = @$sd{qw(ckpt table)};
		results_match($node, "SELECT * FROM $ckpt", "SELECT * FROM $table",
			"$q: checkpoint $ckpt, written anew, equals its join table");
		isnt($node->safe_psql('postgres', "SELECT pg_relation_filenode('$ckpt')"), $ckpt_file{$ckpt},
			"$q: checkpoint $ckpt was written anew since the query began");
	}
}
catch_up($s1, @q12);
check('after the join tables were compacted', qw(j_pairs j_ad j_agg j_run));
$s1->quit;
$sg->quit;

# The same while run_available keeps the rows of its batches back from the
# join tables: the checkpoint tables hold more than twice the join's state
# (the join tables' pages and about those of the rows kept back) as rows
# out of reach pile up in them (here copies of their rows made ten years
# older), and a run's first checkpoint writes them anew (TRUNCATE: their
# files change) from the join tables and the rows kept back, its next one
# adds the rows kept back since.  One more batch, then a crash: recovery
# restores the last checkpoint and replays the batch after it, exact.
{
	my $s4 = store_session($node);
	catch_up($s4, 'j_pairs');
	my @sides = join_checkpoint_sides($node, 'j_pairs');
	my %file = map { $_->{ckpt} => $node->safe_psql('postgres', "SELECT pg_relation_filenode('$_->{ckpt}')") } @sides;
	psql_ok($node, q{
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT s.join_checkpoint::regclass AS ckpt, q.plan->'join'->>('time_column_' || s.source_index) AS t
             FROM streamwin.query_sources s JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'j_pairs' LOOP
    EXECUTE format('CREATE TEMP TABLE pad AS SELECT * FROM %s', r.ckpt);
    EXECUTE format('UPDATE pad SET %I = %I - interval ''10 years''', r.t, r.t);
    FOR i IN 1 .. 4 LOOP
      EXECUTE format('INSERT INTO %s SELECT * FROM pad', r.ckpt);
    END LOOP;
    DROP TABLE pad;
  END LOOP;
END $$}, 'j_pairs: its checkpoint tables padded with rows out of reach');
	psql_ok($node, 'CALL events(3000)');
	my $r = JSON::PP->new->decode(sess_ok($s4, "SELECT streamwin.run_available('j_pairs')"));
	cmp_ok($r->{batches}, '>=', 6, "j_pairs: one run of $r->{batches} batches");
	my $rewritten = grep { $node->safe_psql('postgres', "SELECT pg_relation_filenode('$_->{ckpt}')") ne $file{ $_->{ckpt} } } @sides;
	is($rewritten, scalar(@sides), 'j_pairs: the run wrote its join checkpoints anew');
	psql_ok($node, 'CALL events(300)');
	sess_ok($s4, "SELECT streamwin.run_batch('j_pairs') IS NOT NULL");
	my ($ckpt, $last) = split /\|/, $node->safe_psql('postgres',
		q{SELECT checkpoint_batch_id, last_batch_id FROM streamwin.query_catalog WHERE name = 'j_pairs'});
	note("j_pairs: last checkpoint at batch $ckpt of $last");
	$s4->quit;
	crash_by_sigkill($node, 'j_pairs: a crash after a run whose checkpoints were written anew');
	my $s5 = store_session($node);
	psql_ok($node, 'CALL events(700)');
	catch_up($s5, 'j_pairs');
	like(slurp_file($node->logfile), qr/query "j_pairs" lost its state in a crash; restoring the checkpoint of batch $ckpt /,
		'j_pairs: it restored its last checkpoint');
	check('after a crash, its checkpoints written anew in a run', 'j_pairs');
	$s5->quit;
}

# ==== 3. crashes right after a join checkpoint ==================================

psql_ok($node, "SELECT streamwin.start_query('c_pairs'), streamwin.start_query('c_agg')", 'part 3: two queries started');
psql_ok($node, feed_until_sql(q{CALL events(40)}), 'a procedure feeding events');
worker_pid($node, $_, 'at first') for qw(c_pairs c_agg);

sub check3
{
	my ($when) = @_;
	for my $q (qw(c_pairs c_agg))
	{
		my ($kind) = $q =~ /^c_(\w+)$/;
		wait_results_match($node, sprintf($got{$kind}, $q), $want{$kind}, "$q: exact $when");
	}
	return;
}
sub crash
{
	return crash_round($node, [qw(c_pairs c_agg)], \&check3, @_);
}
crash('c_pairs', 'checkpoint_batch_id > C0', 'worker', 'SIGKILL of the worker right after its join checkpoint');
crash('c_agg', 'checkpoint_batch_id > C0', 'backend', "SIGKILL of a backend right after c_agg's join checkpoint");
crash('c_pairs', 'checkpoint_batch_id > C0 AND last_batch_id >= checkpoint_batch_id + 2', 'backend',
	"SIGKILL of a backend two batches after c_pairs' join checkpoint");

# ==== the end: everything goes ===================================================

psql_ok($node, qq{
INSERT INTO imps VALUES (1000000001, -1, $T0 + interval '1 day');
INSERT INTO clks VALUES (1000000001, -1, -2, $T0 + interval '1 day')});
my $s3 = store_session($node);
catch_up($s3, @q12);
check('at the end', qw(j_pairs j_ad j_agg j_run));
check3('at the end');
results_match($node, 'SELECT imp_id, click_id FROM j_left',
	"SELECT i.imp_id, c.click_id FROM imps i LEFT JOIN clks c $on WHERE i.imp_id < 1000000000",
	'j_left: every pair, and every impression without a click once, NULL-extended');
for my $q (qw(j_pairs j_ad j_agg))
{
	is($node->safe_psql('postgres',
		"SELECT state_rows FROM streamwin.progress WHERE query = '$q' ORDER BY batch_id DESC LIMIT 1"),
		'2', "$q: its join state holds the two last rows only") unless $q eq 'j_agg';
	my $n = 0;
	$n += $node->safe_psql('postgres', "SELECT count(*) FROM $_") for split /\n/, $node->safe_psql('postgres',
		"SELECT join_table FROM streamwin.query_sources JOIN streamwin.query_catalog USING (query_id) WHERE name = '$q'");
	is($n, 2, "$q: so do its join tables");
}
$s3->quit;

done_testing();
