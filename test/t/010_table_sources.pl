
# 010_table_sources.pl: table sources (streamwin.create_table_source), the
# rows INSERTed into an ordinary table, read in commit order through
# logical decoding.  Every expectation is plain SQL over the table the
# source reads (or a copy of it), compared as multisets.
#
#   1. Commit order, rollbacks, savepoints (stopped queries, run_available,
#      max_records_per_batch 7 so that batches end inside transactions):
#      three concurrent transactions in background sessions, begun T1, T2,
#      T3 and committed T2, T3, T1, with batches run while they are open;
#      T3 has a savepoint rolled back and one released; a fourth transaction
#      rolls back.  A transform (every row) and a running GROUP BY must
#      equal plain SQL over the table: every committed row exactly once,
#      no row of a rolled-back transaction or savepoint.
#      UPDATE, DELETE and TRUNCATE change nothing and are counted in the
#      progress records' offsets.
#   2. Workers through restarts: three started queries (trigger 100 ms:
#      a transform, tumble 2 s per key in update mode, and in append mode
#      with a 3 s watermark) over a table fed by a background procedure
#      committing many small transactions; a fast restart and an immediate
#      restart (UNLOGGED state emptied: checkpoint restored and batches
#      replayed) in the middle of the stream.  Whatever committed is what
#      the results must hold, each row once.
#   3. One INSERT ... SELECT of 1,000,000 rows, read by a worker
#      (max_records_per_batch 250000): exact windows, more than one batch,
#      none over max_records_per_batch, every row once, and the
#      worker's peak resident memory (VmHWM, shared_buffers = 16MB) under a
#      generous bound.
#   4. Errors: wal_level = replica; no SELECT privilege on the table; all
#      replication slots in use (max_replication_slots = 1).  None leaves a
#      source, a view or a slot behind.
#   6. A worker alone on its source reads a backlog keeping its decoding
#      context between batches; drop_query while it does neither waits for
#      the slot nor leaves it holding WAL.
#   5. Slots: one per source, plugin streamwin; confirmed_flush_lsn and
#      restart_lsn move forward as queries progress (past a CHECKPOINT,
#      whose running_xacts record lets restart_lsn move), also for started
#      queries after the restarts; a source whose table receives nothing
#      while other tables are written does not hold that WAL; drop_query of
#      the last query moves the slot to the end of WAL; drop_source drops
#      it, and no streamwin slot is left.
#
# Parts 1, 2 and 5 run on one node (streamwin.checkpoint_interval = 3; a
# query whose state is in memory checkpoints after every batch whose next
# fetch decodes from the slot again, streamwin.table_checkpoint_every_batch,
# and recovery restores that); 4 and
# then 3 on a second node that starts with wal_level = replica,
# max_replication_slots = 1 and shared_buffers = 16MB.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";

# max_records_per_batch of the source of the 1,000,000-row transaction: 10
# batches.  Two queries read the source, each in its worker: the first
# batch of each decodes the transaction once and keeps the rows past its
# cut for its next nine (the spool in table_source.c), which need no slot;
# the diag lines show each batch's time.
my $BIG_BATCH = 100_000;


sub lsn_ge
{
	my ($node, $a, $b) = @_;
	return $node->safe_psql('postgres', "SELECT '$a'::pg_lsn >= '$b'::pg_lsn") eq 't';
}

sub slot_of
{
	my ($node, $source) = @_;
	return $node->safe_psql('postgres',
		"SELECT slot_name FROM streamwin.sources WHERE name = '$source'");
}

# (confirmed_flush_lsn, restart_lsn) of a slot
sub slot_lsns
{
	my ($node, $slot) = @_;
	return split /\|/, $node->safe_psql('postgres',
		"SELECT confirmed_flush_lsn, restart_lsn FROM pg_replication_slots WHERE slot_name = '$slot'");
}

sub streamwin_slots
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE plugin = 'streamwin'");
}

my $node = new_node('tables',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n");

# ==== 1. commit order, rollbacks, savepoints =================================

psql_ok($node, qq{
CREATE TABLE ev1 (id int PRIMARY KEY, k text NOT NULL, v int NOT NULL, ts timestamptz NOT NULL);
SELECT streamwin.create_table_source('s1', 'ev1', '{"max_records_per_batch": 7}');
SELECT streamwin.create_query('p1_rows', 'SELECT id, k, v, ts FROM s1', start => false);
SELECT streamwin.create_query('p1_counts',
    'SELECT k, count(*) AS n, sum(v) AS s, min(id) AS lo, max(id) AS hi FROM s1 GROUP BY k',
    output_mode => 'update', start => false);
}, 'table source s1 and two stopped queries created');

my $slot1 = slot_of($node, 's1');
like($slot1, qr/^streamwin_/, "s1 has a slot: $slot1");
is( $node->safe_psql('postgres',
		"SELECT plugin, slot_type, database, temporary FROM pg_replication_slots WHERE slot_name = '$slot1'"),
	'streamwin|logical|postgres|f',
	'the slot is a persistent logical slot of plugin streamwin');
my ($confirmed0, $restart0) = slot_lsns($node, $slot1);

# rows $from..$to of ev1 (ids are unique across the whole section)
sub ins
{
	my ($from, $to) = @_;
	return "INSERT INTO ev1 SELECT g, 'k' || (g % 5), (g * 37) % 101, $T0 + g * interval '1 second' FROM generate_series($from, $to) g";
}

my $want_rows   = 'SELECT id, k, v, ts FROM %s';
my $want_counts = 'SELECT k, count(*) AS n, sum(v) AS s, min(id) AS lo, max(id) AS hi FROM %s GROUP BY k';

sub check_p1
{
	my ($from, $when) = @_;
	psql_ok($node, q{
SELECT streamwin.run_available('p1_rows');
SELECT streamwin.run_available('p1_counts');
}, "run_available $when");
	results_match($node, 'SELECT id, k, v, ts FROM p1_rows', sprintf($want_rows, $from),
		"transform: every committed row once, $when");
	results_match($node, 'SELECT k, n::bigint, s::bigint, lo, hi FROM p1_counts',
		sprintf($want_counts, $from), "counts per key equal plain SQL, $when");
	return;
}

psql_ok($node, ins(1, 10), 'autocommit insert');
my @s = map { $node->background_psql('postgres') } 1 .. 4;
$s[0]->query_safe('BEGIN; ' . ins(101, 120));    # T1
$s[1]->query_safe('BEGIN; ' . ins(201, 215));    # T2
$s[2]->query_safe('BEGIN; ' . ins(301, 305) . '; SAVEPOINT a; ' . ins(311, 330)
	  . '; ROLLBACK TO SAVEPOINT a; ' . ins(341, 345) . '; SAVEPOINT b; '
	  . ins(351, 358) . '; RELEASE SAVEPOINT b');    # T3
psql_ok($node, ins(11, 20), 'autocommit insert while T1, T2, T3 are open');
check_p1('ev1', 'while T1, T2 and T3 are open');

$s[1]->query_safe('COMMIT');                        # T2 commits first
check_p1('ev1', 'after T2 (begun after T1) committed');
$s[0]->query_safe(ins(121, 135));                   # T1 goes on
$s[3]->query_safe('BEGIN; ' . ins(401, 450) . '; ROLLBACK');    # T4
psql_ok($node, ins(21, 23), 'autocommit insert');
check_p1('ev1', 'with T1 and T3 still open');
$s[2]->query_safe('COMMIT');                        # T3
psql_ok($node, ins(24, 30), 'autocommit insert');
$s[0]->query_safe(ins(136, 140) . '; COMMIT');      # T1 commits last
$_->quit for @s;
check_p1('ev1', 'after T3, then T1, committed');

is( $node->safe_psql('postgres', q{
SELECT count(*) FROM p1_rows WHERE id BETWEEN 311 AND 330 OR id BETWEEN 401 AND 450}),
	'0', 'no row of the rolled-back savepoint or transaction');
is($node->safe_psql('postgres', 'SELECT count(*) FROM p1_rows'),
	30 + 40 + 15 + 18, 'every row of the committed transactions (103 rows)');
is( $node->safe_psql('postgres', q{
SELECT count(*) > 0, bool_and(input_rows <= 7) FROM streamwin.progress
 WHERE query = 'p1_rows' AND (offsets->>'index')::int > 0}),
	't|t',
	'batches of at most 7 rows ended inside transactions (index > 0)');

# ---- UPDATE, DELETE, TRUNCATE: ignored and counted -----------------------

psql_ok($node, q{
CREATE TABLE ev1_inserted AS SELECT * FROM ev1;
BEGIN;
UPDATE ev1 SET v = v + 1000 WHERE id % 3 = 0;
DELETE FROM ev1 WHERE id % 3 = 1;
COMMIT;
TRUNCATE ev1;
}, 'UPDATE, DELETE and TRUNCATE on the source table');
psql_ok($node, ins(1001, 1004), 'then an insert');
my $all1 = '(SELECT * FROM ev1_inserted UNION ALL SELECT * FROM ev1) AS ev1_all';
check_p1($all1, 'after UPDATE, DELETE and TRUNCATE');
for my $q (qw(p1_rows p1_counts))
{
	is( $node->safe_psql('postgres', qq{
SELECT coalesce(sum((offsets->'ignored'->>'updates')::int), 0) = (SELECT count(*) FROM ev1_inserted WHERE id % 3 = 0),
       coalesce(sum((offsets->'ignored'->>'deletes')::int), 0) = (SELECT count(*) FROM ev1_inserted WHERE id % 3 = 1),
       coalesce(sum((offsets->'ignored'->>'truncates')::int), 0)
  FROM streamwin.progress WHERE query = '$q'}),
		't|t|1', "$q: the progress records count every update and delete, and the truncate, once");
}

# A transaction of 30 inserts, read over several batches of at most 7 rows,
# with updates and deletes between its inserts: each is counted once, by
# the batch that reads past it, not skipped by the batches that resume the
# transaction, nor counted again by them.
my %mark = map {
	$_ => $node->safe_psql('postgres',
		"SELECT coalesce(max(batch_id), 0) FROM streamwin.progress WHERE query = '$_'")
} qw(p1_rows p1_counts);
psql_ok($node, 'BEGIN; ' . ins(1201, 1210)
	  . '; UPDATE ev1 SET v = v + 1 WHERE id BETWEEN 1201 AND 1203; ' . ins(1211, 1220)
	  . '; DELETE FROM ev1 WHERE id BETWEEN 1211 AND 1214; ' . ins(1221, 1230)
	  . '; UPDATE ev1 SET v = v + 1 WHERE id = 1230; COMMIT',
	'a transaction of 30 inserts with 4 updates and 4 deletes between them');
psql_ok($node, q{
SELECT streamwin.run_available('p1_rows');
SELECT streamwin.run_available('p1_counts');
});
for my $q (qw(p1_rows p1_counts))
{
	is( $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE (offsets->>'index')::int > 0) > 1,
       sum((offsets->'ignored'->>'updates')::int), sum((offsets->'ignored'->>'deletes')::int)
  FROM streamwin.progress WHERE query = '$q' AND batch_id > $mark{$q}}),
		't|4|4', "$q: batches ending inside a transaction count its updates and deletes once");
}
# the inserted rows, as inserted, stay the expectation of the checks below
(my $keep = ins(1201, 1230)) =~ s/INSERT INTO ev1 /INSERT INTO ev1_inserted /;
psql_ok($node, "$keep; DELETE FROM ev1 WHERE id BETWEEN 1201 AND 1230");

# ==== 5 (first half). the slot follows the queries ============================

# A running_xacts record (logged by CHECKPOINT) lets logical decoding move
# restart_lsn; each batch confirms what the previous batches committed.
my $mark1 = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
for my $round (1 .. 6)
{
	psql_ok($node, ins(1100 + 10 * $round, 1105 + 10 * $round) . ($round == 1 ? '; CHECKPOINT' : ''));
	psql_ok($node, q{
SELECT streamwin.run_available('p1_rows');
SELECT streamwin.run_available('p1_counts');
});
}
check_p1($all1, 'after more batches');
my ($confirmed1, $restart1) = slot_lsns($node, $slot1);
note("slot $slot1: confirmed_flush_lsn $confirmed0 -> $confirmed1, restart_lsn $restart0 -> $restart1");
ok(lsn_ge($node, $confirmed1, $mark1),
	"confirmed_flush_lsn moved past what every query has processed ($confirmed1 >= $mark1)");
ok(!lsn_ge($node, $restart0, $restart1), "restart_lsn moved forward ($restart0 -> $restart1)");

# ==== 2. workers through a fast and an immediate restart =====================

psql_ok($node, qq{
CREATE SEQUENCE ev2_seq;
CREATE TABLE ev2 (id bigint PRIMARY KEY, k text NOT NULL, v int NOT NULL, ts timestamptz NOT NULL);
-- many small transactions: 1 to 10 rows each, event time 5 ms per row, up to
-- 1 s behind (less than the 3 s watermark delay: nothing is late)
CREATE PROCEDURE feed(ntx int) LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1 .. ntx LOOP
    INSERT INTO ev2 (id, k, v, ts)
    SELECT n, 'k' || (n % 7), (random() * 1000)::int,
           $T0 + n * interval '5 ms' - (random() * 1000)::int * interval '1 ms'
      FROM (SELECT nextval('ev2_seq') AS n FROM generate_series(1, 1 + (random() * 9)::int)) s;
    COMMIT;
    PERFORM pg_sleep(0.004);
  END LOOP;
END \$\$;
SELECT streamwin.create_table_source('s2', 'ev2');
SELECT streamwin.create_query('w_rows', 'SELECT id, k, v, ts FROM s2',
    trigger_interval => '100 ms');
SELECT streamwin.create_query('w_upd',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM s2
         GROUP BY streamwin.tumble(ts, '2 seconds'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('w_app',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM s2
         GROUP BY streamwin.tumble(ts, '2 seconds'), k\$q\$,
    watermark => '3 seconds', output_mode => 'append', trigger_interval => '100 ms');
-- a transform with no state table but dedup keys, which a crash also
-- restores from a checkpoint: the slot must keep what that replays.  Alone
-- on a second source of the same table, so that no other query's
-- checkpoint holds the slot back for it.
SELECT streamwin.create_table_source('s2u', 'ev2');
SELECT streamwin.create_query('w_uniq', 'SELECT id, k, v, ts FROM s2u',
    dedup_keys => '{id}', watermark => '3 seconds', trigger_interval => '100 ms',
    options => '{"event_time": "ts"}');
}, 'table sources s2 and s2u of one table, four started queries');
my $slot2 = slot_of($node, 's2');
my (undef, $restart2) = slot_lsns($node, $slot2);

sub wait_workers
{
	my ($when) = @_;
	wait_until($node,
		"SELECT count(*) FROM streamwin.queries WHERE source IN ('s2', 's2u') AND state = 'running' AND worker_pid IS NOT NULL",
		'4', "the four queries of s2 and s2u have workers $when");
	return;
}

# A background session running CALL feed(ntx); it ends with the server.
sub start_feeder
{
	my ($ntx) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres'),
		  '-c', "CALL feed($ntx)" ],
		'>', \$out, '2>', \$err);
	return { h => $h, err => \$err };
}

sub rows_seen
{
	return $node->safe_psql('postgres', 'SELECT count(*) FROM w_rows');
}

wait_workers('after create_query');
my $feeder = start_feeder(3000);
wait_until($node, 'SELECT count(*) > 2000 FROM w_rows', 't',
	'the workers consume the stream');
note('fast restart with ' . rows_seen() . ' rows read');
$node->stop('fast');
ok(!$feeder->{h}->finish, 'the feeder was still running: cut off by the fast shutdown')
  or diag('the feeder finished before the restart');
$node->start;
wait_workers('after the fast restart');

$feeder = start_feeder(3000);
my $before = rows_seen();
wait_until($node, "SELECT count(*) > $before + 2000 FROM w_rows", 't',
	'the workers consume the stream after the fast restart');
note('immediate restart with ' . rows_seen() . ' rows read');
# A CHECKPOINT writes the slots' confirmed positions to disk, so that the
# crash keeps the newest one: a query whose state checkpoint is older than
# that (one the slot was wrongly confirmed past) cannot replay after it.
psql_ok($node, 'CHECKPOINT', 'CHECKPOINT just before the crash');
$node->stop('immediate');
ok(!$feeder->{h}->finish, 'the feeder was still running: cut off by the immediate shutdown')
  or diag('the feeder finished before the restart');
$node->start;
wait_workers('after the immediate restart');

$feeder = start_feeder(1000);
ok($feeder->{h}->finish, 'the third part of the stream committed')
  or diag(${ $feeder->{err} });

# CHECKPOINT logs a running_xacts record: once the queries have confirmed
# past it, logical decoding may move the slot's restart_lsn there.
psql_ok($node, 'CHECKPOINT', 'CHECKPOINT');
my $lsn_ckpt = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$feeder = start_feeder(300);
ok($feeder->{h}->finish, 'the last part of the stream committed')
  or diag(${ $feeder->{err} });
note('ev2 holds ' . $node->safe_psql('postgres', 'SELECT count(*) FROM ev2') . ' rows');

my $aggs = 'count(*)::bigint AS n, sum(v)::bigint AS s';
wait_results_match($node, 'SELECT id, k, v, ts FROM w_rows', 'SELECT id, k, v, ts FROM ev2',
	'transform: every committed row once, through both restarts');
wait_results_match($node, 'SELECT id, k, v, ts FROM w_uniq', 'SELECT id, k, v, ts FROM ev2',
	'deduplicating transform: every committed row once, through both restarts');
wait_results_match($node, 'SELECT window_start, window_end, k, n::bigint, s::bigint FROM w_upd',
	windows_sql(table => 'ev2', size => 2, keys => 'k', aggs => $aggs),
	'tumble, update: every window equals plain SQL, through both restarts');
wait_until($node, q{
SELECT q.watermark = (SELECT max(ts) - interval '3 seconds' FROM ev2)
  FROM streamwin.queries q WHERE name = 'w_app'},
	't', 'append query reaches the final watermark (max(ts) - 3 s)');
results_match($node, 'SELECT window_start, window_end, k, n::bigint, s::bigint FROM w_app',
	'SELECT * FROM (' . windows_sql(table => 'ev2', size => 2, keys => 'k', aggs => $aggs)
	  . ") w WHERE window_end <= (SELECT max(ts) - interval '3 seconds' FROM ev2)",
	'tumble, append: exactly the closed windows, each once, through both restarts');
is( $node->safe_psql('postgres',
		"SELECT coalesce(sum(late_rows_dropped), 0) FROM streamwin.progress WHERE query = 'w_app'"),
	'0', 'no row was late');
my $restores = () = slurp_file($node->logfile)
  =~ /query "w_(?:upd|app)" lost its state in a crash; restoring the checkpoint/g;
cmp_ok($restores, '>=', 2,
	"both stateful queries restored a checkpoint after the immediate restart ($restores restores)");

# ---- 5 (second half): the slot of s2 moves on with its workers ----------

wait_until($node, qq{
SELECT confirmed_flush_lsn >= '$lsn_ckpt' AND restart_lsn > '$restart2'
  FROM pg_replication_slots WHERE slot_name = '$slot2'},
	't', 's2: the workers confirmed the slot past the CHECKPOINT, and its restart_lsn moved');

# The source table now receives nothing while other tables are written: the
# slot must not hold that WAL (nor make every idle batch decode it again).
# Two WAL segment switches make it more than 32 MB of WAL, in case a query
# only records a position every segment.
my $idle_from = $node->safe_psql('postgres', q{
CREATE TABLE unrelated AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g;
SELECT pg_switch_wal();
INSERT INTO unrelated SELECT g, repeat('y', 200) FROM generate_series(1, 20000) g;
SELECT pg_switch_wal();
INSERT INTO unrelated SELECT g, repeat('z', 200) FROM generate_series(1, 20000) g;
SELECT pg_current_wal_lsn()});
$idle_from = (split /\n/, $idle_from)[-1];
psql_ok($node, 'CHECKPOINT', 'unrelated WAL written, then a CHECKPOINT');
wait_until($node, qq{
SELECT restart_lsn >= '$idle_from' FROM pg_replication_slots WHERE slot_name = '$slot2'},
	't', 's2 is idle: its slot does not hold the WAL written since')
  or diag('slot of s2: ' . $node->safe_psql('postgres', qq{
SELECT format('restart_lsn %s, confirmed_flush_lsn %s, end of WAL %s: %s held',
              restart_lsn, confirmed_flush_lsn, pg_current_wal_lsn(),
              pg_size_pretty(pg_current_wal_lsn() - restart_lsn))
  FROM pg_replication_slots WHERE slot_name = '$slot2'}));

# ==== 5. drop_query and drop_source release the slots ========================
# A worker learns of drop_query from its batch failing on the vanished query:
# that is not an error to log (checked at the end of section 6, which drops
# queries while their workers run).

my $drops_log_from = -s $node->logfile;

psql_ok($node, q{SELECT streamwin.drop_query('p1_rows')}, 'drop_query p1_rows');
my $end = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
psql_ok($node, q{SELECT streamwin.drop_query('p1_counts')}, 'drop_query p1_counts, the last query of s1');
my ($confirmed2) = slot_lsns($node, $slot1);
ok(lsn_ge($node, $confirmed2, $end),
	"the last drop_query moved the slot to the end of WAL ($confirmed2 >= $end)");
psql_ok($node, q{SELECT streamwin.drop_source('s1')}, 'drop_source s1');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot1'"),
	'0', 'the slot of s1 is gone');
psql_ok($node, q{
SELECT streamwin.drop_query('w_rows');
SELECT streamwin.drop_query('w_upd');
SELECT streamwin.drop_query('w_app');
SELECT streamwin.drop_query('w_uniq');
SELECT streamwin.drop_source('s2');
SELECT streamwin.drop_source('s2u');
}, 'queries of s2 and s2u, and both sources, dropped');
is(streamwin_slots($node), '0', 'no streamwin slot is left');

# ==== 6. a worker alone on its source, through a backlog =====================
# Twenty transactions of 5,000 rows, written before the query starts, read
# 2,000 rows a batch: the worker keeps its decoding context (and the slot)
# from one batch to the next.  Then a second backlog, and drop_query while
# the worker reads it: drop_query must not wait for the slot the worker
# holds; the worker lets it go, moved to the end of WAL, when it stops.

sub backlog
{
	my ($from) = @_;
	for my $t (0 .. 19)
	{
		my $lo = $from + $t * 5000;
		$node->safe_psql('postgres', sprintf(
			"INSERT INTO bl SELECT g %% 37, g, $T0 + g * interval '10 ms' FROM generate_series(%d, %d) g",
			$lo, $lo + 4999));
	}
}
psql_ok($node, q{
CREATE TABLE bl (k int, v int, ts timestamptz);
SELECT streamwin.create_table_source('s3', 'bl', '{"max_records_per_batch": 2000}');
SELECT streamwin.create_query('w_bl', $q$SELECT k, count(*) AS n, sum(v) AS s FROM s3 GROUP BY k$q$,
    output_mode => 'update', trigger_interval => '0', start => false);
}, 's3 and a query alone on it');
my $slot3 = slot_of($node, 's3');
backlog(1);
psql_ok($node, q{SELECT streamwin.start_query('w_bl')}, 'w_bl started over a backlog of 100,000 rows');
wait_results_match($node, 'SELECT k, n, s FROM w_bl',
	'SELECT k, count(*) AS n, sum(v) AS s FROM bl GROUP BY k',
	'a worker alone on its source reads a backlog exactly');
is($node->safe_psql('postgres', q{SELECT sum(input_rows) FROM streamwin.progress WHERE query = 'w_bl'}),
	'100000', 'every row of the backlog once');
backlog(100_001);
my $end3 = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
my $t_drop = time;
psql_ok($node, q{SET statement_timeout = '20s'; SELECT streamwin.drop_query('w_bl')},
	'drop_query while the worker reads the second backlog');
cmp_ok(time - $t_drop, '<', 10, 'drop_query did not wait for the slot');
wait_until($node, qq{
SELECT active_pid IS NULL AND confirmed_flush_lsn >= '$end3'
  FROM pg_replication_slots WHERE slot_name = '$slot3'},
	't', 'the stopped worker let the slot go, moved past the WAL written before the drop')
  or diag($node->safe_psql('postgres', qq{
SELECT format('slot: active_pid %s, confirmed_flush_lsn %s, restart_lsn %s; WAL before the drop ended at $end3; now %s',
              active_pid, confirmed_flush_lsn, restart_lsn, pg_current_wal_lsn())
  FROM pg_replication_slots WHERE slot_name = '$slot3'}),
	"\n", $node->safe_psql('postgres', q{
SELECT string_agg(format('%s %s %s %s', pid, backend_type, wait_event_type, wait_event), E'\n')
  FROM pg_stat_activity WHERE backend_type LIKE 'streamwin%'}));
psql_ok($node, q{SELECT streamwin.drop_source('s3')}, 'drop_source s3');

# A query created while another query's worker confirms the slot keeps its
# start ('earliest', the slot's position when it is created): until its
# creation commits, no batch may confirm the slot past it.
psql_ok($node, q{
CREATE TABLE race (v int);
SELECT streamwin.create_table_source('s4', 'race');
SELECT streamwin.create_query('r_a', 'SELECT v FROM s4', trigger_interval => '20 ms');
}, 's4 with a running query');
wait_until($node, q{SELECT count(*) FROM streamwin.queries WHERE name = 'r_a' AND worker_pid IS NOT NULL},
	'1', 'r_a has a worker');
$node->safe_psql('postgres', "INSERT INTO race SELECT g FROM generate_series(1, 100) g") for 1 .. 5;
psql_ok($node, q{
BEGIN;
SELECT streamwin.create_query('r_b', 'SELECT v FROM s4', start => false);
SELECT pg_sleep(1);
COMMIT;}, 'r_b created slowly while r_a reads (and would confirm) the source');
$node->safe_psql('postgres', "INSERT INTO race SELECT g FROM generate_series(101, 110) g");
psql_ok($node, q{SELECT streamwin.run_available('r_b')}, 'r_b reads from its start: the slot still holds it');
is($node->safe_psql('postgres', 'SELECT count(*) FROM r_b WHERE v > 100'), '10',
	'r_b has the rows inserted after it was created');
# r_a's worker starts batches every 20 ms: while the drop is uncommitted its
# next batch waits for the query's lock, then finds the query gone.
psql_ok($node, q{
BEGIN;
SELECT streamwin.drop_query('r_a');
SELECT pg_sleep(1);
COMMIT;
SELECT streamwin.drop_query('r_b');
SELECT streamwin.drop_source('s4');}, 's4 dropped, r_a slowly while its worker runs');
unlike(slurp_file($node->logfile, $drops_log_from),
	qr/ERROR: .*(no longer exists|does not exist)/,
	'no worker logs an error for a query or source dropped under it');
is(streamwin_slots($node), '0', 'no streamwin slot is left');
$node->stop;

# ==== 4. errors ================================================================

my $lim = new_node('limits', conf => qq{
wal_level = replica
max_replication_slots = 1
shared_buffers = 16MB
});
psql_ok($lim, "CREATE TABLE big (id int, k text, v int, ts timestamptz);\n" . user_role_sql('bob'),
	'node with wal_level = replica');
my $err = fails_like($lim, q{SELECT streamwin.create_table_source('big_src', 'big')},
	qr/ERROR:  table sources need wal_level = logical/, 'wal_level = replica is refused');
like($err, qr/HINT:  .*restart/, 'the hint says a restart is needed');

$lim->append_conf('postgresql.conf', "wal_level = logical\n");
$lim->restart;
fails_like($lim, q{SELECT streamwin.create_table_source('bob_src', 'big')},
	qr/ERROR:  permission denied for table big/, 'a role without SELECT on the table is refused',
	extra_params => [ '-U', 'bob' ]);
psql_ok($lim, qq{SELECT streamwin.create_table_source('big_src', 'big',
    '{"max_records_per_batch": $BIG_BATCH}')},
	'the first table source takes the only slot');
fails_like($lim, q{SELECT streamwin.create_table_source('big_src2', 'big')},
	qr/ERROR:  all replication slots are in use/, 'no slot left: refused');
is( $lim->safe_psql('postgres', q{
SELECT (SELECT string_agg(name, ',') FROM streamwin.sources),
       (SELECT count(*) FROM pg_replication_slots),
       to_regclass('big_src2') IS NULL AND to_regclass('bob_src') IS NULL}),
	'big_src|1|t', 'the refused creations left no source, view or slot');

# ==== 3. a transaction of 1,000,000 rows =======================================

psql_ok($lim, q{
SELECT streamwin.create_query('big_counts',
    $q$SELECT k, count(*) AS n, sum(v) AS s FROM big_src
         GROUP BY streamwin.tumble(ts, '1 minute'), k$q$,
    output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('big_keys',
    $q$SELECT k, count(*) AS n, max(v) AS hi FROM big_src GROUP BY k$q$,
    output_mode => 'update', trigger_interval => '100 ms');
}, 'two started queries over big_src');
wait_until($lim, "SELECT worker_pid IS NOT NULL FROM streamwin.queries WHERE name = 'big_counts'",
	't', 'big_counts has a worker');
my $wpid = $lim->safe_psql('postgres', "SELECT worker_pid FROM streamwin.queries WHERE name = 'big_counts'");

sub vm_kb
{
	my ($pid, $field) = @_;
	my $status = slurp_file("/proc/$pid/status");
	return $status =~ /^$field:\s+(\d+) kB/m ? $1 : undef;
}
my $hwm0 = vm_kb($wpid, 'VmHWM');

my $t = time;
psql_ok($lim, qq{
INSERT INTO big SELECT g, 'k' || (g % 10), g % 1000, $T0 + g * interval '1 ms'
  FROM generate_series(1, 1000000) g}, 'one transaction inserts 1,000,000 rows');
note(sprintf('inserted in %.1f s', time - $t));
$t = time;
# (a cheap wait first: the comparison over 1,000,000 rows takes a while)
wait_until($lim, 'SELECT (SELECT sum(n) FROM big_counts) = (SELECT count(*) FROM big)',
	't', 'the worker reads the transaction', timeout => 300);
note(sprintf('read in %.1f s', time - $t));
results_match($lim, 'SELECT window_start, window_end, k, n::bigint, s::bigint FROM big_counts',
	windows_sql(table => 'big', size => 60, keys => 'k', aggs => $aggs),
	'the 1,000,000 rows are counted exactly');
is($lim->safe_psql('postgres', "SELECT worker_pid FROM streamwin.queries WHERE name = 'big_counts'"),
	$wpid, 'the same worker read the whole transaction');
my $hwm = vm_kb($wpid, 'VmHWM');
diag(sprintf('worker %d: peak resident memory (VmHWM) %.1f MB before the transaction, %.1f MB after',
	$wpid, $hwm0 / 1024, $hwm / 1024));
cmp_ok($hwm, '<', 400 * 1024, 'the worker stayed under 400 MB resident');
wait_until($lim, 'SELECT (SELECT sum(n) FROM big_keys) = (SELECT count(*) FROM big)',
	't', 'the other worker reads the transaction', timeout => 300);
results_match($lim, 'SELECT k, n::bigint, hi FROM big_keys',
	'SELECT k, count(*)::bigint, max(v) FROM big GROUP BY k',
	'and counts the 1,000,000 rows exactly too');
for my $q (qw(big_counts big_keys))
{
	my ($nbatches, $maxrows, $sumrows, $durations) = split /\|/, $lim->safe_psql('postgres', qq{
SELECT count(*), max(input_rows), sum(input_rows),
       string_agg(format('%s rows in %s ms', input_rows, round(duration_ms)), ', ' ORDER BY batch_id)
  FROM streamwin.progress WHERE query = '$q' AND input_rows > 0});
	diag("big transaction, $q: $nbatches batches, at most $maxrows rows each, $sumrows rows in all: $durations");
	cmp_ok($nbatches, '>', 1, "$q: the transaction was read over several batches");
	cmp_ok($maxrows, '<=', $BIG_BATCH, "$q: none larger than max_records_per_batch ($BIG_BATCH)");
	is($sumrows, 1_000_000, "$q: every row read once");
}

# A backlog of many transactions, written faster than PostgreSQL logs
# running transactions (so the slot cannot restart inside it), read by the
# same two workers: they take turns on the slot, each keeping its decoding
# context through its part, and both count every row once.
$lim->safe_psql('postgres', q{SELECT streamwin.stop_query('big_counts'), streamwin.stop_query('big_keys')});
wait_until($lim, "SELECT count(*) FROM streamwin.queries WHERE name IN ('big_counts', 'big_keys') AND worker_pid IS NOT NULL",
	'0', 'both workers stopped');
psql_ok($lim, qq{
DO \$\$ BEGIN
  FOR i IN 1..20 LOOP
    INSERT INTO big SELECT 1000000 + i * 100000 + g, 'k' || (g % 10), g % 1000, $T0 + (1000000 + i * 100000 + g) * interval '1 ms'
      FROM generate_series(1, 25000) g;
    COMMIT;
  END LOOP;
END \$\$;}, 'a backlog of 20 transactions of 25,000 rows, written while the queries are stopped');
$lim->safe_psql('postgres', q{SELECT streamwin.start_query('big_counts'), streamwin.start_query('big_keys')});
wait_until($lim, 'SELECT (SELECT sum(n) FROM big_counts) = 1500000 AND (SELECT sum(n) FROM big_keys) = 1500000',
	't', 'both workers read the backlog', timeout => 300);
results_match($lim, 'SELECT window_start, window_end, k, n::bigint, s::bigint FROM big_counts',
	windows_sql(table => 'big', size => 60, keys => 'k', aggs => $aggs),
	'big_counts: every row of the backlog counted once');
results_match($lim, 'SELECT k, n::bigint, hi FROM big_keys',
	'SELECT k, count(*)::bigint, max(v) FROM big GROUP BY k',
	'big_keys: every row of the backlog counted once');

psql_ok($lim, q{
SELECT streamwin.drop_query('big_counts');
SELECT streamwin.drop_query('big_keys');
SELECT streamwin.drop_source('big_src');
}, 'big_counts, big_keys and big_src dropped');
is(streamwin_slots($lim), '0', 'no streamwin slot is left');
$lim->stop;

done_testing();
