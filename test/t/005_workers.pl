
# 005_workers.pl: background workers run queries on their own, as the role
# that created them, stop when told, and survive a server restart without
# losing or repeating data.
#
# A non-superuser role creates two started queries over a 3-partition topic:
#   w_counts  update mode, no watermark: every 10-second window per key;
#   w_closed  append mode, watermark 5 s (no partition ever idle): exactly
#             the windows whose end <= min over partitions of (max event
#             time - 5 s).
# Data arrives in chunks; after each, both result tables must equal plain
# SQL over the same events, including across a fast shutdown and restart
# in the middle of a chunk and across stop_query / start_query.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min);
use StreamwinTest;

srand(5005);

my $T0    = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $NPART = 3;
my $DELAY = 5_000;

my $broker = StreamwinTest::Broker->start(topics => { wk => $NPART });
my $node = new_node('workers');
my $brokers = $broker->bootstrap;

# Events [k, v, ts_ms, partition, chunk]; partitions round robin, each
# partition in time order up to 500 ms.
my @chunk_ends = (3000, 6000, 16000, 17000);
my (@ev, @chunks);
my $i = 0;
for my $c (1 .. @chunk_ends)
{
	my @msgs;
	for (; $i < $chunk_ends[ $c - 1 ]; $i++)
	{
		my $e = [
			'k' . int(rand(5)), int(rand(1000)),
			$T0 + $i * 10 - int(rand(500)), $i % $NPART, $c ];
		push @ev, $e;
		push @msgs,
		  [
			$e->[3],
			sprintf('{"k": "%s", "v": %d, "ts": "%s"}',
				$e->[0], $e->[1], ts_text($e->[2]))
		  ];
	}
	push @chunks, \@msgs;
}
load_table($node, 'ev', 'k text, v int, ts timestamptz, chunk int',
	[ map { [ $_->[0], $_->[1], ts_text($_->[2]), $_->[4] ] } @ev ]);

# The append query's watermark once chunks 1..c are in.
sub watermark_after
{
	my ($c) = @_;
	my %max;
	for my $e (grep { $_->[4] <= $c } @ev)
	{
		$max{ $e->[3] } = $e->[2]
		  if !defined $max{ $e->[3] } || $e->[2] > $max{ $e->[3] };
	}
	return min(values %max) - $DELAY;
}

my $aggs = 'count(*)::bigint AS n, sum(v)::bigint AS s';
my $got  = 'SELECT window_start, window_end, k, n::bigint, s::bigint FROM %s';

sub want_counts
{
	my ($c) = @_;
	return windows_sql(
		table => "(SELECT * FROM ev WHERE chunk <= $c)",
		size  => 10,
		keys  => 'k',
		aggs  => $aggs);
}

# Both result tables hold exactly chunks 1..c.
sub check_chunks
{
	my ($c, $when) = @_;
	wait_results_match($node, sprintf($got, 'w_counts'), want_counts($c),
		"w_counts has every window of chunks 1..$c $when");
	my $W = watermark_after($c);
	wait_until(
		$node,
		"SELECT round(extract(epoch FROM watermark) * 1000) FROM streamwin.queries WHERE name = 'w_closed'",
		$W, "w_closed watermark reaches " . ts_text($W) . " $when");
	results_match(
		$node,
		sprintf($got, 'w_closed'),
		'SELECT * FROM (' . want_counts($c) . ") w WHERE window_end <= '@{[ts_text($W)]}'",
		"w_closed has exactly the closed windows of chunks 1..$c $when");
	return;
}

sub wait_running
{
	my ($q, $when) = @_;
	wait_until($node,
		"SELECT state, worker_pid IS NOT NULL FROM streamwin.queries WHERE name = '$q'",
		'running|t', "$q is running with a worker $when");
	return $node->safe_psql('postgres',
		"SELECT worker_pid FROM streamwin.queries WHERE name = '$q'");
}

sub worker_user
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT usename FROM pg_stat_activity WHERE pid = $pid");
}

# ---- a non-superuser creates the queries --------------------------------

psql_ok($node, user_role_sql('alice') . qq{
SELECT streamwin.create_kafka_source('wk', '$brokers', 'wk',
    'k text, v int, ts timestamptz', 'json');
GRANT SELECT ON wk TO alice;
}, 'role alice and source created');

psql_ok($node, qq{
SELECT streamwin.create_query('w_counts',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM wk
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms', start => true);
SELECT streamwin.create_query('w_closed',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM wk
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    watermark => '5 seconds', output_mode => 'append',
    trigger_interval => '100 ms', options => '{"idle_timeout": "1 hour"}',
    start => true);
}, 'alice creates two started queries', extra_params => [ '-U', 'alice' ]);

my %pid;
for my $q (qw(w_counts w_closed))
{
	$pid{$q} = wait_running($q, 'after create_query');
	is(worker_user($pid{$q}), 'alice', "$q: the worker runs as alice");
}

# ---- workers process new data on their own ------------------------------

$broker->produce('wk', $chunks[0]);
check_chunks(1, 'after the first chunk');
$broker->produce('wk', $chunks[1]);
check_chunks(2, 'after the second chunk');

# ---- workers report their table statistics --------------------------------

# A background worker must report its table statistics itself (a backend
# does when it goes idle): without them pg_stat_user_tables shows nothing of
# what workers wrote, and autovacuum never learns that the result and state
# tables, which every batch updates, need vacuuming.  The workers are still
# running: statistics sent at exit would not count.  Every group w_counts
# holds was inserted once, into its result and its state (no watermark, so
# no state is evicted), and no batch was rolled back.
wait_until($node, q{
SELECT r.n_tup_ins = n.groups, st.n_tup_ins = n.groups
  FROM (SELECT count(*) AS groups FROM w_counts) n, pg_stat_user_tables r,
       streamwin.query_catalog q, pg_stat_user_tables st
 WHERE r.relid = 'w_counts'::regclass AND q.name = 'w_counts' AND st.relid = q.state_table
}, 't|t', 'running workers report their writes to the result and state tables');

# ---- idle workers take no transaction ids ---------------------------------

# Both workers are caught up.  A batch with nothing to read locks its query
# with an advisory lock, not a row lock, and writes nothing, so their empty
# batches (about 40 in these 2 s, on 100 ms triggers) take no transaction
# id and write no WAL.  With a row lock each took one.  autovacuum's
# ANALYZE of a table takes one too, and may fall in any 2 s: of three
# spans of 2 s the fewest taken counts, and one is let pass (an empty batch
# that took one would take about 40).
my $fewest;
for (1 .. 3)
{
	my $xid0 = $node->safe_psql('postgres', 'SELECT txid_current()');
	sleep 2;
	my $xid1 = $node->safe_psql('postgres', 'SELECT txid_current()');
	# (the second txid_current() took one of its own)
	my $taken = $xid1 - $xid0 - 1;
	$fewest = $taken if !defined $fewest || $taken < $fewest;
}
cmp_ok($fewest, '<=', 1, 'idle workers take no transaction ids')
  or diag("transaction ids taken in 2 s, the fewest of three spans: $fewest");

# ---- an idle worker still closes windows ----------------------------------

# With nothing new to read, a worker waits for data, looking at its query
# every second rather than every trigger_interval; once every partition has
# been idle for idle_timeout, the watermark is the largest partition's, and
# the windows up to it close without any new event.
psql_ok($node, q{
SELECT streamwin.create_query('w_idle',
    $q$SELECT k, count(*) AS n, sum(v) AS s FROM wk
         GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', output_mode => 'append',
    trigger_interval => '100 ms', options => '{"idle_timeout": "2 seconds"}');
}, 'a query whose partitions go idle after 2 s', extra_params => [ '-U', 'alice' ]);
{
	my $max = 0;
	$max = $_->[2] > $max ? $_->[2] : $max for grep { $_->[4] <= 2 } @ev;
	my $W = $max - $DELAY;
	wait_until($node,
		"SELECT round(extract(epoch FROM watermark) * 1000) FROM streamwin.queries WHERE name = 'w_idle'",
		$W, 'w_idle: with every partition idle, the watermark is the largest partition\'s');
	results_match(
		$node,
		sprintf($got, 'w_idle'),
		'SELECT * FROM (' . want_counts(2) . ") w WHERE window_end <= '@{[ts_text($W)]}'",
		'w_idle has the windows closed by it, with no new event');
}
psql_ok($node, "SELECT streamwin.drop_query('w_idle', drop_result => true)", 'drop w_idle',
	extra_params => [ '-U', 'alice' ]);

# ---- fast shutdown and restart in the middle of a chunk ------------------

my $bg = $broker->produce('wk', $chunks[2], rate => 2500, background => 1);
wait_until($node, 'SELECT sum(n) > 6500 FROM w_counts', 't',
	'workers are consuming the third chunk');
my $mid = $node->safe_psql('postgres', 'SELECT sum(n) FROM w_counts');
note("restarting with $mid of 16000 rows counted");
$node->stop('fast');
$node->start;
$bg->finish;
ok($mid < 16000, 'the restart happened in the middle of the stream')
  or diag('the whole chunk was consumed before the restart');
for my $q (qw(w_counts w_closed))
{
	my $pid = wait_running($q, 'after the restart');
	isnt($pid, $pid{$q}, "$q: a new worker after the restart");
	is(worker_user($pid), 'alice', "$q: the new worker runs as alice");
	$pid{$q} = $pid;
}
check_chunks(3, 'after the restart (no loss, no duplicates)');

# ---- stop_query stops the worker; start_query resumes -------------------

psql_ok($node, "SELECT streamwin.stop_query('w_counts')", 'stop_query',
	extra_params => [ '-U', 'alice' ]);
wait_until($node,
	"SELECT state, worker_pid IS NULL FROM streamwin.queries WHERE name = 'w_counts'",
	'stopped|t', 'w_counts is stopped with no worker');
wait_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid{w_counts}",
	'0', 'its worker process has exited');

$broker->produce('wk', $chunks[3]);
# w_closed still runs: once it has seen the last chunk, so could w_counts.
wait_until(
	$node,
	"SELECT round(extract(epoch FROM watermark) * 1000) FROM streamwin.queries WHERE name = 'w_closed'",
	watermark_after(4), 'the running query processes the last chunk');
results_match($node, sprintf($got, 'w_counts'), want_counts(3),
	'the stopped query did not change');

psql_ok($node, "SELECT streamwin.start_query('w_counts')", 'start_query',
	extra_params => [ '-U', 'alice' ]);
wait_running('w_counts', 'after start_query');
check_chunks(4, 'after start_query');

# ---- alter_query changes a running query's settings ----------------------

# w_closed waits an hour for idle partitions; told one second instead, its
# worker (the same process: the state and positions stay) lets the idle
# partitions go, and the watermark becomes the largest partition's.
psql_ok($node, q{
SELECT streamwin.alter_query('w_closed', idle_timeout => '1 second');
SELECT streamwin.alter_query('w_closed', trigger_interval => '200 ms');
}, 'alter_query on a running query', extra_params => [ '-U', 'alice' ]);
{
	my $max = 0;
	$max = $_->[2] > $max ? $_->[2] : $max for @ev;
	wait_until($node,
		"SELECT round(extract(epoch FROM watermark) * 1000) FROM streamwin.queries WHERE name = 'w_closed'",
		$max - $DELAY, 'w_closed: with idle_timeout 1 s, the watermark is the largest partition\'s');
}
is( $node->safe_psql('postgres',
		"SELECT worker_pid = $pid{w_closed}, trigger_interval FROM streamwin.queries WHERE name = 'w_closed'"),
	't|00:00:00.2', 'the same worker goes on, with the new trigger_interval');

# ---- an owner that lost LOGIN --------------------------------------------

# A worker connects as its query's owner.  A role that lost LOGIN since the
# query started cannot: instead of a worker failing to connect at every
# start (in the server log only), the query says why.
psql_ok($node, 'ALTER ROLE alice NOLOGIN', 'alice loses LOGIN');
$node->restart;
wait_until($node, q{
SELECT state, worker_pid IS NULL,
       last_error LIKE 'role "alice" cannot run a query worker because it cannot log in%HINT: Grant it with ALTER ROLE alice LOGIN%'
  FROM streamwin.queries WHERE name = 'w_closed'},
	'failed|t|t', 'w_closed: no worker, and the query says why');
psql_ok($node, 'ALTER ROLE alice LOGIN', 'alice may log in again');
psql_ok($node, "SELECT streamwin.start_query('w_closed')", 'start_query',
	extra_params => [ '-U', 'alice' ]);
wait_until($node, "SELECT state FROM streamwin.queries WHERE name = 'w_closed' AND worker_pid IS NOT NULL",
	'running', 'w_closed runs again');

# ---- streamwin.progress_retention --------------------------------------------

# A transform keeps no state, takes no checkpoint and replays nothing after
# a crash: only its last progress_retention batches stay in
# streamwin.progress, as with every other query.
psql_ok($node, 'ALTER SYSTEM SET streamwin.progress_retention = 3', 'progress_retention = 3');
$node->reload;
psql_ok($node, q{
CREATE TABLE trim_rows (id int);
SELECT streamwin.create_table_source('trim_src', 'trim_rows');
SELECT streamwin.create_query('w_trim', 'SELECT id FROM trim_src', start => false);
}, 'a transform over a table source');
for my $b (1 .. 6)
{
	$node->safe_psql('postgres', "INSERT INTO trim_rows VALUES ($b)");
	$node->safe_psql('postgres', "SELECT streamwin.run_batch('w_trim')");
}
is( $node->safe_psql('postgres', q{
SELECT count(*) || ' batches, ' || min(batch_id) || '-' || max(batch_id) || ', ' || sum(input_rows) || ' rows'
  FROM streamwin.progress WHERE query = 'w_trim'}),
	'3 batches, 4-6, 3 rows', 'w_trim: of its 6 batches, the last 3 stay in streamwin.progress');
is($node->safe_psql('postgres', 'SELECT count(*) FROM w_trim'), '6', 'w_trim: all 6 rows in its result');
psql_ok($node, q{
SELECT streamwin.drop_query('w_trim', drop_result => true);
SELECT streamwin.drop_source('trim_src');
}, 'w_trim dropped');
psql_ok($node, 'ALTER SYSTEM RESET streamwin.progress_retention', 'progress_retention back to its default');
$node->reload;

# ---- DROP EXTENSION ends the workers ---------------------------------------

# Dropping the extension drops the catalog under running workers: they must
# see their query gone and exit, not fail and retry forever.
psql_ok($node, 'DROP EXTENSION streamwin CASCADE', 'DROP EXTENSION while both queries run');
wait_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamwin worker'",
	'0', 'the workers exit when the extension is dropped');

$node->stop;

# ---- limits: no worker process free, too many streamwin workers -----------

# A query that cannot get a worker says why on the query (state failed,
# last_error), not only in the server log.  With max_worker_processes = 3
# (and no logical replication launcher), the streamwin launcher and the
# starter it runs at server start leave one process: of two running
# queries, one gets it.
my $lim = new_node('limits',
	conf => "max_worker_processes = 3\nmax_logical_replication_workers = 0\n");
psql_ok($lim, qq{
SELECT streamwin.create_kafka_source('wk', '$brokers', 'wk', 'k text, v int, ts timestamptz', 'json');
SELECT streamwin.create_query('l_a', 'SELECT k, v FROM wk', start => false);
SELECT streamwin.create_query('l_b', 'SELECT k, v FROM wk', start => false);
UPDATE streamwin.query_catalog SET desired_state = 'running';
}, 'two queries marked running, started by nothing but the launcher');
my $one_failed = q{
SELECT count(*) FILTER (WHERE worker_pid IS NOT NULL),
       count(*) FILTER (WHERE state = 'failed' AND worker_pid IS NULL AND last_error LIKE '%s')
  FROM streamwin.queries};
$lim->restart;
wait_until($lim, sprintf($one_failed, 'could not start a worker: every background worker process is taken%HINT: Raise max_worker_processes%'),
	'1|1', 'no worker process free: one query runs, the other says why');

# streamwin.max_workers = 1: both workers start, the second finds every
# streamwin slot taken.  It records why and exits for good (the postmaster
# would otherwise restart it every few seconds); the launcher tries again.
$lim->append_conf('postgresql.conf', "max_worker_processes = 8\nstreamwin.max_workers = 1\n");
$lim->restart;
wait_until($lim, sprintf($one_failed, 'too many streamwin workers: all 1 are running%HINT: Raise streamwin.max_workers%'),
	'1|1', 'streamwin.max_workers reached: one query runs, the other says why');

# Without streamwin in shared_preload_libraries, everything but workers
# works: each session loads the library when it first calls it.  That
# library defined streamwin.max_workers, which PostgreSQL lets a library
# define only while the server starts: every such session ended, FATAL.
$lim->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
$lim->restart;
psql_ok($lim, q{
CREATE TABLE np (id int PRIMARY KEY, k text, v int);
ALTER TABLE np REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('nps', 'np', '{"changes": "all"}');
SELECT streamwin.create_query('np_sums', 'SELECT k, count(*) AS n, sum(v) AS s FROM nps GROUP BY k',
    output_mode => 'update', start => false);
INSERT INTO np SELECT g, 'k' || g % 3, g FROM generate_series(1, 100) g;
UPDATE np SET v = v + 1, k = 'k9' WHERE id % 7 = 0;
DELETE FROM np WHERE id % 10 = 0;
}, 'without preloading: a table source and a query over it');
psql_ok($lim, "SELECT streamwin.run_available('np_sums')", 'without preloading: batches run in a session');
results_match($lim, 'SELECT k, n, s FROM np_sums', 'SELECT k, count(*), sum(v) FROM np GROUP BY k',
	'without preloading: the result is exact');
fails_like($lim, "SELECT streamwin.start_query('np_sums')",
	qr/streamwin background workers need streamwin in shared_preload_libraries/,
	'without preloading: a worker is refused, saying why');
# the queries marked running before: nothing runs them, and a session's
# batch says so, rather than that a worker runs them
fails_like($lim, "SELECT streamwin.run_batch('l_a')",
	qr/query "l_a" is marked running, but no background worker runs it.*not in shared_preload_libraries.*stop_query/s,
	'without preloading: run_batch of a query marked running says no worker runs it');
$lim->stop;

$broker->stop;
done_testing();
