
# 034_worker_lifecycle.pl: a query marked running has a worker, connected as
# its owner, whatever came just before: a stop that its worker was still
# acting on, the extension dropped and created anew under a worker, an
# owner that lost LOGIN after its worker connected, a session idle in the
# transaction that creates a table source.  And a transaction that starts
# or stops a query cannot be prepared (it would never act on it); a fast
# shutdown ends a batch that waits on a prepared transaction's lock, and a
# stop that comes while it waits is seen once the batch ends; a
# transaction that drops a query and its source while the query's worker
# works through a backlog commits; a transaction that stops and resets a
# query while its worker waits for it leaves no batch after it.  A session
# lets go of the runners of queries dropped or started elsewhere.
#
# The launcher's rounds are an hour apart here (its first round at server
# start aside), unless a step says otherwise: a worker that appears did not
# come from a round.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use StreamwinTest;

my $node = new_node('lifecycle',
	conf => "streamwin.launcher_naptime = 3600\nmax_prepared_transactions = 2\n");

sub as_role { return (extra_params => [ '-U', $_[0] ]) }

my $want = 'SELECT k, count(*)::bigint AS n, sum(v)::bigint AS s FROM ev GROUP BY k';
my $got = 'SELECT k, n::bigint, s::bigint FROM %s';

sub add_rows
{
	my ($n) = @_;
	$node->safe_psql('postgres',
		"INSERT INTO ev (k, v) SELECT 'k' || (i % 7), i FROM generate_series(1, $n) i");
	return;
}

sub worker_of
{
	my ($q, $when, %opts) = @_;
	wait_until($node,
		"SELECT state, worker_pid IS NOT NULL FROM streamwin.queries WHERE name = '$q'",
		'running|t', "$q is running with a worker $when", %opts);
	return $node->safe_psql('postgres', "SELECT worker_pid FROM streamwin.queries WHERE name = '$q'");
}

sub worker_user
{
	my ($pid) = @_;
	return $node->safe_psql('postgres', "SELECT usename FROM pg_stat_activity WHERE pid = $pid");
}

psql_ok($node, user_role_sql('alice') . user_role_sql('bob') . q{
CREATE TABLE ev (id serial PRIMARY KEY, k text NOT NULL, v int NOT NULL);
SELECT streamwin.create_table_source('ev_src', 'ev');
GRANT SELECT ON ev, ev_src TO alice;
}, 'roles, a table and its source');
psql_ok($node, q{
SELECT streamwin.create_query('lc', 'SELECT k, count(*) AS n, sum(v) AS s FROM ev_src GROUP BY k',
                              output_mode => 'update', trigger_interval => '100 ms');
}, 'alice creates a started query', as_role('alice'));
add_rows(100);
my $pid = worker_of('lc', 'at first');
wait_results_match($node, sprintf($got, 'lc'), $want, 'lc equals plain SQL');

# ---- a start right after a stop -------------------------------------------

# The worker reads its query stopped and is on its way out when the start
# commits: it leaves a successor.  The time between the two varies, so that
# the start comes at some point of the worker's way out.
for my $pause (0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.2)
{
	add_rows(50);
	psql_ok($node, qq{
SELECT streamwin.stop_query('lc');
SELECT pg_sleep($pause);
SELECT streamwin.start_query('lc');
}, "stop, $pause s, start", as_role('alice'));
	my $p = worker_of('lc', "after a stop and a start $pause s apart");
	wait_results_match($node, sprintf($got, 'lc'), $want,
		"lc equals plain SQL after a stop and a start $pause s apart");
	$pid = $p;
}

# ---- an owner that loses LOGIN while its worker runs ----------------------

# The running worker goes on; a launcher round (one a second here) does not
# mark its query failed.
psql_ok($node, q{
ALTER ROLE alice NOLOGIN;
ALTER SYSTEM SET streamwin.launcher_naptime = 1;
SELECT pg_reload_conf();
}, 'alice loses LOGIN; launcher rounds every second');
$pid = worker_of('lc', 'before the rounds');
sleep(3);
add_rows(30);
wait_results_match($node, sprintf($got, 'lc'), $want, 'the worker goes on without LOGIN');
is( $node->safe_psql('postgres',
		"SELECT state, worker_pid = $pid, last_error IS NULL FROM streamwin.queries WHERE name = 'lc'"),
	'running|t|t', 'the rounds leave a running query alone: not failed, the same worker');
psql_ok($node, 'ALTER ROLE alice LOGIN', 'alice may log in again');

# ---- a session idle in the transaction that creates a table source --------

# It holds the lock the rounds take to drop orphan slots until it ends: the
# rounds go on all the same, and start the worker of a query that has none.
my $idle = $node->background_psql('postgres', on_error_stop => 0);
$idle->query_safe(q{
CREATE TABLE ev2 (id int);
BEGIN;
SELECT streamwin.create_table_source('ev2_src', 'ev2');
});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
wait_until($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0',
	'the worker ended by SIGTERM is gone (the postmaster does not restart it)');
add_rows(20);
my $p = worker_of('lc', 'again, started by a round while the session is idle in its transaction');
isnt($p, $pid, 'a new worker');
wait_results_match($node, sprintf($got, 'lc'), $want, 'the new worker goes on where the old stopped');
$pid = $p;
$idle->query_safe('ROLLBACK');
$idle->quit;
psql_ok($node, q{
ALTER SYSTEM SET streamwin.launcher_naptime = 3600;
SELECT pg_reload_conf();
}, 'launcher rounds an hour apart again');

# ---- PREPARE TRANSACTION ----------------------------------------------------

fails_like($node, q{
BEGIN;
SELECT streamwin.stop_query('lc');
PREPARE TRANSACTION 'stop_lc';
}, qr/ERROR:  cannot PREPARE a transaction that started, stopped or changed a streamwin query/,
	'a transaction that stops a query cannot be prepared', as_role('alice'));
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'nothing was prepared');
is( $node->safe_psql('postgres', "SELECT state, worker_pid = $pid FROM streamwin.queries WHERE name = 'lc'"),
	'running|t', 'the query runs on, in the same worker');

# ---- a fast shutdown while a batch waits on a lock --------------------------

# A prepared transaction holds a row of lc's result table, so the worker's
# next batch waits on it.  A fast shutdown ends that batch (rolled back)
# and the worker with it, rather than wait for a transaction that nothing
# ends; the launcher's first round after the start runs the query again.

# A prepared transaction that holds the row of k1 in lc, and 14 new rows,
# k1's among them.
sub hold_k1
{
	my ($gid) = @_;
	psql_ok($node, qq{
BEGIN;
UPDATE lc SET n = n WHERE k = 'k1';
PREPARE TRANSACTION '$gid';
}, "a prepared transaction ($gid) locks the row of k1 in lc");
	add_rows(14);
	return;
}

sub worker_waits_on_lock
{
	wait_until($node, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid", 'Lock',
		"lc's worker waits on that row in its batch");
	return;
}

hold_k1('hold_lc');
worker_waits_on_lock();
my $stop_started = time;
$node->stop('fast');
ok(time - $stop_started < 30, 'a fast shutdown ends the waiting batch and its worker');
$node->start;
psql_ok($node, "ROLLBACK PREPARED 'hold_lc'", 'the prepared transaction rolled back');
$pid = worker_of('lc', 'after the start, from the first round');
wait_results_match($node, sprintf($got, 'lc'), $want, 'lc equals plain SQL: the rolled-back batch lost nothing');

# ---- a stop while the worker's batch waits on a lock -------------------------

# lc runs a batch an hour.  Its batch waits on a row that a prepared
# transaction holds when stop_query commits: the lock wait takes the wake
# from the worker's latch.  Once the row is free and the batch done, the
# worker still sees that it was woken, reads its query and exits, rather
# than sleep until its next batch.
psql_ok($node, "SELECT streamwin.alter_query('lc', trigger_interval => '1 hour')",
	'lc runs a batch an hour', as_role('alice'));
usleep(1_000_000);	# the alter wakes it: it reads its new trigger
hold_k1('hold_lc2');
psql_ok($node, "SELECT streamwin.start_query('lc')", 'start_query of the running lc wakes it for a batch now',
	as_role('alice'));
worker_waits_on_lock();
psql_ok($node, "SELECT streamwin.stop_query('lc')", 'stop_query while it waits', as_role('alice'));
psql_ok($node, "ROLLBACK PREPARED 'hold_lc2'", 'the prepared transaction rolled back');
wait_until($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0',
	'the worker exits after that batch, not an hour later');
wait_results_match($node, sprintf($got, 'lc'), $want, 'lc equals plain SQL: its last batch committed');
psql_ok($node, q{
SELECT streamwin.alter_query('lc', trigger_interval => '100 ms');
SELECT streamwin.start_query('lc');
}, 'lc runs every 100 ms again', as_role('alice'));
$pid = worker_of('lc', 'again');

# ---- a stop and a reset in one transaction, while the worker waits on it ------

# The worker read that lc runs, then waits for lc's lock, which the
# transaction that stops and resets lc holds (and which adds rows of kz).
# Once it commits, the worker sees the stop and exits without a batch: no
# batch reads kz's rows until lc starts again.
my $stopper = $node->background_psql('postgres');
$stopper->query_safe(q{
SET client_min_messages = warning;
BEGIN;
SELECT streamwin.stop_query('lc');
SELECT streamwin.reset_query('lc', 'latest');
INSERT INTO ev (k, v) SELECT 'kz', i FROM generate_series(1, 5) i;
});
worker_waits_on_lock();
$stopper->query_safe('COMMIT');
$stopper->quit;
wait_until($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0',
	'the worker exits once the stop and reset commit');
is($node->safe_psql('postgres', "SELECT count(*) FROM lc WHERE k = 'kz'"), '0',
	'no batch of the stopped query read the rows of that transaction');
psql_ok($node, "SELECT streamwin.start_query('lc')", 'lc starts again', as_role('alice'));
$pid = worker_of('lc', 'after the stop and reset');
wait_until($node, "SELECT n || ':' || s FROM lc WHERE k = 'kz'", '5:15', 'then its worker reads them, once');

# ---- the extension created anew under a running worker ---------------------

# Query ids begin again: a query of bob's gets the id of alice's running
# query over a Kafka topic, whose worker is still there when bob's starts
# (it sleeps an hour between batches; and unlike a table source's worker,
# nothing the drop does ends it).  Bob's query gets
# a worker connected as bob, and alice's goes.
my $broker = StreamwinTest::Broker->start(topics => { kt => 1 });
my $brokers = $broker->bootstrap;
my @msgs = map { [ 0, sprintf('{"k": "k%d", "v": %d}', $_ % 3, $_) ] } 1 .. 30;
$broker->produce('kt', \@msgs);
load_table($node, 'kev', 'k text, v int', [ map { [ "k" . ($_ % 3), $_ ] } 1 .. 30 ]);
my $kwant = 'SELECT k, count(*)::bigint AS n, sum(v)::bigint AS s FROM kev GROUP BY k';
my $kafka_sql = qq{
SELECT streamwin.create_kafka_source('kq', '$brokers', 'kt', 'k text, v int', 'json');
GRANT SELECT ON kq TO alice, bob;
};
psql_ok($node, $kafka_sql, 'a Kafka source');
psql_ok($node, q{
SELECT streamwin.drop_query('lc', drop_result => true);
SELECT streamwin.create_query('lk', 'SELECT k, count(*) AS n, sum(v) AS s FROM kq GROUP BY k',
                              output_mode => 'update');
}, 'alice drops her query over the table, creates one over the topic', as_role('alice'));
my $lk = worker_of('lk', 'at first');
is($node->safe_psql('postgres', "SELECT query_id FROM streamwin.query_catalog WHERE name = 'lk'"),
	'2', "alice's query over the topic has id 2");
wait_results_match($node, sprintf($got, 'lk'), $kwant, 'lk equals plain SQL');
# a batch an hour: its worker sleeps, and nothing but a start wakes it
psql_ok($node, "SELECT streamwin.alter_query('lk', trigger_interval => '1 hour')",
	'alice has lk run a batch an hour', as_role('alice'));
sleep(2);
psql_ok($node, q{
DROP EXTENSION streamwin CASCADE;
CREATE EXTENSION streamwin;
GRANT USAGE ON SCHEMA streamwin TO alice, bob;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA streamwin TO alice, bob;
} . $kafka_sql . q{
SET ROLE bob;
SELECT streamwin.create_query('lk_idle', 'SELECT k, v FROM kq', start => false);
SELECT streamwin.create_query('lk_bob', 'SELECT k, count(*) AS n, sum(v) AS s FROM kq GROUP BY k',
                              output_mode => 'update');
RESET ROLE;
}, 'the extension dropped and created anew; bob creates a started query at once');
is($node->safe_psql('postgres', "SELECT query_id FROM streamwin.query_catalog WHERE name = 'lk_bob'"),
	'2', "bob's started query has the id of alice's");
worker_of('lk_bob', 'after the extension was created anew');
wait_until($node, "SELECT usename FROM pg_stat_activity WHERE pid = (SELECT worker_pid FROM streamwin.queries WHERE name = 'lk_bob')",
	'bob', "bob's query runs in a worker connected as bob");
wait_until($node, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamwin worker' AND usename = 'alice'",
	'0', "alice's worker is gone");
wait_results_match($node, sprintf($got, 'lk_bob'), $kwant, "bob's query equals plain SQL");

# ---- drop_query and drop_source in one transaction, through a backlog ------

# A worker working through a backlog keeps its source's slot between
# batches.  A transaction that drops its query and then the source: the
# worker's next batch waits for the drop to commit, holding the slot, so the
# commit cannot wait for the slot in turn.  It commits; the launcher's next
# round drops the slot once the worker has let it go.
psql_ok($node, q{
CREATE TABLE bk (id int, v int);
SELECT streamwin.create_table_source('bk_src', 'bk', '{"max_records_per_batch": 200}');
SELECT streamwin.create_query('bk_sum', 'SELECT v % 10 AS g, count(*) AS n, sum(v) AS s FROM bk_src GROUP BY 1',
                              output_mode => 'update', trigger_interval => '10 ms');
}, 'a query over a table source, with batches of 200 rows');
worker_of('bk_sum', 'at first');
psql_ok($node, 'INSERT INTO bk SELECT i, i FROM generate_series(1, 200000) i', 'a backlog of 200,000 rows');
wait_until($node, q{SELECT count(*) > 2 FROM streamwin.progress WHERE query = 'bk_sum' AND input_rows = 200},
	't', 'its worker runs full batches');
my $drop_started = time;
psql_ok($node, q{
SET statement_timeout = '30s';
BEGIN;
SELECT streamwin.drop_query('bk_sum', drop_result => true);
SELECT streamwin.drop_source('bk_src');
COMMIT;
}, 'drop_query and drop_source in one transaction commit');
ok(time - $drop_started < 30, '... without waiting for the worker');
wait_until($node, q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'streamwin: bk_sum'},
	'0', 'the worker of bk_sum is gone');
psql_ok($node, q{
ALTER SYSTEM SET streamwin.launcher_naptime = 1;
SELECT pg_reload_conf();
}, 'launcher rounds a second apart');
wait_until($node, q{SELECT count(*) FROM pg_replication_slots WHERE plugin = 'streamwin'
  AND slot_name NOT IN (SELECT slot_name FROM streamwin.sources WHERE slot_name IS NOT NULL)},
	'0', "a round drops bk_src's slot");
psql_ok($node, q{
ALTER SYSTEM SET streamwin.launcher_naptime = 3600;
SELECT pg_reload_conf();
DROP TABLE bk;
}, 'launcher rounds an hour apart again');

# ---- a fast shutdown while the launcher waits for a starter -----------------

# bob loses LOGIN while lk_idle is marked running without a worker: a
# starter records why on lk_idle's row, which a session holds locked, so
# the starter waits (up to its lock timeout).  A reload wakes the launcher
# for a round; a fast shutdown then comes while it waits for that starter.
# Its wait took the latch the shutdown set, and the launcher slept for its
# naptime, an hour here, before it exited.
psql_ok($node, q{
ALTER ROLE bob NOLOGIN;
UPDATE streamwin.query_catalog SET desired_state = 'running' WHERE name = 'lk_idle';
}, 'lk_idle marked running, its owner without LOGIN');
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT 1 FROM streamwin.query_catalog WHERE name = 'lk_idle' FOR UPDATE});
# The starter waits one second (its lock timeout), and the next round is an
# hour away: each try reloads, then watches for the wait from one session
# (pg_stat_activity is read anew after pg_stat_clear_snapshot()).
psql_ok($node, q{
CREATE FUNCTION starter_waits_for_lock() RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 300 LOOP
    PERFORM pg_stat_clear_snapshot();
    IF EXISTS (SELECT FROM pg_stat_activity
                WHERE backend_type = 'streamwin starter' AND wait_event_type = 'Lock') THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN false;
END $$;
}, 'a function that watches for the starter\'s lock wait');
my $starter_waits = 'f';
for (my $try = 0; $try < 10 && $starter_waits ne 't'; $try++)
{
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$starter_waits = $node->safe_psql('postgres', 'SELECT starter_waits_for_lock()');
}
is($starter_waits, 't', 'a reload wakes the launcher for a round, whose starter waits for the locked row');
my $stop2_started = time;
$node->stop('fast');
ok(time - $stop2_started < 30, 'a fast shutdown does not wait for the launcher\'s naptime');
eval { $holder->quit };
$node->start;

# ---- the launcher ended by pg_terminate_backend() comes back ----------------

# The postmaster unregisters a background worker that exits with code 0:
# a launcher that did so on SIGTERM never came back, and no query's worker
# was started again until the server restarted.
my $launcher_sql = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwin launcher'};
wait_until($node, "SELECT count(*) FROM ($launcher_sql) l", '1', 'the launcher runs');
my $launcher = $node->safe_psql('postgres', $launcher_sql);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
wait_until($node, "SELECT count(*) FROM ($launcher_sql) l WHERE pid <> $launcher", '1',
	'the launcher ended by pg_terminate_backend() is started again');

# ---- a session lets go of the runners of queries gone elsewhere -------------

# A session keeps a runner (statements, readers, for a Kafka source a
# consumer's threads and prefetched messages) for each query it ran, until
# it runs the query again.  Another session drops one of them and starts
# the other in a worker: neither is run in this session again, and its
# next new runner lets go of both.
psql_ok($node, q{
CREATE TABLE rk_ev (id serial PRIMARY KEY, k text NOT NULL, v int NOT NULL);
SELECT streamwin.create_table_source('rk_src', 'rk_ev');
INSERT INTO rk_ev (k, v) SELECT 'k' || (i % 3), i FROM generate_series(1, 30) i;
SELECT streamwin.create_query('rk_a', 'SELECT k, count(*) AS n FROM rk_src GROUP BY k', output_mode => 'update', start => false);
SELECT streamwin.create_query('rk_b', 'SELECT k, sum(v) AS s FROM rk_src GROUP BY k', output_mode => 'update', start => false);
SELECT streamwin.create_query('rk_c', 'SELECT k, max(v) AS m FROM rk_src GROUP BY k', output_mode => 'update', start => false);
}, 'three queries');
my $keeper = store_session($node);
my $runners = q{SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'streamwin query runner'};
sess_ok($keeper, q{SELECT streamwin.run_batch('rk_a') IS NOT NULL});
sess_ok($keeper, q{SELECT streamwin.run_batch('rk_b') IS NOT NULL});
is(sess_ok($keeper, $runners), '2', 'a session keeps a runner for each query it ran');
psql_ok($node, q{
SELECT streamwin.drop_query('rk_a', drop_result => true);
SELECT streamwin.start_query('rk_b');
}, 'another session drops one and starts the other');
sess_ok($keeper, q{SELECT streamwin.run_batch('rk_c') IS NOT NULL});
is(sess_ok($keeper, $runners), '1', 'its next new runner let go of the two');
$keeper->quit;
psql_ok($node, q{
SELECT streamwin.drop_query('rk_b', drop_result => true);
SELECT streamwin.drop_query('rk_c', drop_result => true);
SELECT streamwin.drop_source('rk_src');
DROP TABLE rk_ev;
}, 'the queries dropped');

# ---- a slot held by a worker in a backlog, and a lock it waits for ---------

# A worker reading a table source's backlog keeps its slot between batches.
# A transaction that changed that query's row (alter_query) and then runs a
# batch of another query of the source waits for the slot, while the
# worker's next batch waits for that row: PostgreSQL's deadlock detector
# sees only the worker's wait.  The session's wait looks every
# deadlock_timeout whether the holder waits for it, and fails as a
# deadlock; the previous build waited until the statement timed out.
psql_ok($node, q{
CREATE TABLE dl_ev (id int);
SELECT streamwin.create_table_source('dl_src', 'dl_ev', '{"max_records_per_batch": 200}');
SELECT streamwin.create_query('dl_w', 'SELECT id % 10 AS g, count(*) AS n FROM dl_src GROUP BY 1', output_mode => 'update', start => false);
SELECT streamwin.create_query('dl_s', 'SELECT id FROM dl_src', start => false);
CREATE PROCEDURE dl_fill() LANGUAGE plpgsql AS $$
BEGIN
  FOR t IN 0 .. 399 LOOP
    INSERT INTO dl_ev SELECT t * 1000 + i FROM generate_series(1, 1000) i;
    COMMIT;
  END LOOP;
END $$;
CALL dl_fill();
SELECT streamwin.start_query('dl_w');
}, 'a backlog of 400,000 rows in 400 transactions, read 200 rows a batch by a worker');
wait_until($node, q{SELECT last_batch_id > 20 FROM streamwin.query_catalog WHERE name = 'dl_w'}, 't',
	'the worker is in the backlog');
# (The worker lets its slot go every 100 batches, for the other queries'
# turn: if it waits for us just after that, the batch has the slot and
# runs; that is no deadlock, and the scene is set again, up to 3 times.)
my ($rc, $out, $err);
for my $try (1 .. 3)
{
	($rc, $out, $err) = $node->psql('postgres', q{
BEGIN;
SET LOCAL statement_timeout = '60s';
SELECT streamwin.alter_query('dl_w', trigger_interval => '1 second');
SELECT streamwin.run_batch('dl_s');
COMMIT;});
	last if $err =~ /deadlock detected|statement timeout/;
	note("try $try: the batch had the slot ($err)");
}
like($err, qr/deadlock detected.*held by process \d+, which waits for a lock this transaction holds/s,
	'the session fails as a deadlock, not waiting for good')
  or diag("worker at batch " . $node->safe_psql('postgres',
	q{SELECT last_batch_id FROM streamwin.query_catalog WHERE name = 'dl_w'}) . ": $err");
wait_until($node, 'SELECT sum(n) FROM dl_w', '400000', 'the worker goes on, and reads the backlog once');

# The same through a third session: the worker's next batch waits for the
# row of its query that a session altering it holds, which waits for a row
# the batch's own transaction holds.  The holder waits for us only through
# the third: the previous build's wait looked at the holder alone, and
# waited until the statement timed out.
psql_ok($node, q{
CREATE TABLE dl_lock (v int);
INSERT INTO dl_lock VALUES (0);
CALL dl_fill();
}, 'a second backlog of 400,000 rows');
wait_until($node, q{SELECT sum(n) > 420000 FROM dl_w}, 't', 'the worker is in the second backlog');
my $three_err;
for my $try (1 .. 3)
{
	my $third = $node->background_psql('postgres');
	my $batcher = $node->background_psql('postgres', on_error_stop => 0);
	$batcher->query_safe(q{BEGIN; SET LOCAL statement_timeout = '60s'; UPDATE dl_lock SET v = v + 1;});
	$third->query_until(qr/waiting/, q{
BEGIN;
SELECT streamwin.alter_query('dl_w', trigger_interval => '1 second');
\echo waiting
UPDATE dl_lock SET v = v + 1;
\echo updated
});
	wait_until($node, q{SELECT count(*) > 0 FROM pg_stat_activity
  WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE dl_lock%'}, 't',
		'the third session waits for the batch\'s transaction');
	$batcher->query_until(qr/ran/, q{
SELECT streamwin.run_batch('dl_s');
\echo ran
});
	# (query, not query_safe: the batch's error is on stderr already)
	$batcher->query('ROLLBACK');
	$batcher->quit;
	$three_err = $batcher->{stderr};
	$third->query_until(qr/updated/, '');
	$third->query_safe('COMMIT');
	$third->quit;
	# (as above: the worker may have let its slot go just then)
	last if $three_err =~ /deadlock detected|statement timeout/;
	note("try $try: the batch had the slot ($three_err)");
}
like($three_err, qr/deadlock detected.*held by process \d+, which waits for a lock this transaction holds, or for a process that waits for one/s,
	'through a third session, the batch fails as a deadlock, not waiting for good');
wait_until($node, 'SELECT sum(n) FROM dl_w', '800000', 'the worker goes on, and reads the second backlog once');
psql_ok($node, q{
SELECT streamwin.drop_query('dl_w', drop_result => true);
SELECT streamwin.drop_query('dl_s', drop_result => true);
SELECT streamwin.drop_source('dl_src');
DROP TABLE dl_ev, dl_lock;
DROP PROCEDURE dl_fill();
}, 'the backlog\'s queries dropped');

$node->stop;
$broker->stop;
done_testing();
