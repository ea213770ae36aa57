
# 023_table_changelog.pl: changelog table sources (create_table_source with
# '{"changes": "all"}'): INSERT arrives as the new row with
# __streamwin_change = +1, DELETE as the old row with -1, UPDATE as -1 old,
# +1 new.  Every expectation is plain SQL over the table the source reads
# (or over a log of its changes kept by a trigger), compared as multisets
# in both directions; nothing is a number copied from a run.
#
#   1. Workers (trigger 100 ms) through a fast and an immediate restart:
#      a background session commits a long randomized mix of INSERTs,
#      UPDATEs (of the group key, the value, the event time, the primary
#      key, one row or many) and DELETEs (one row, or a whole key) in small
#      transactions, some rolled back, some with a subtransaction rolled
#      back.  Two sources of the table, one with max_records_per_batch 50,
#      so that batches end inside transactions (also between an update's
#      two rows) and recovery replays such batches.  After the writer's
#      last commit (which gives a sentinel row a value no earlier version
#      had, so that a result that equals plain SQL has read that commit)
#      the results equal plain SQL over the table: a running aggregate per
#      key in update mode (count, sum, avg, min, max, bool_and, bool_or,
#      count(DISTINCT)), a tumbling window per key and a hopping window in
#      update mode, a complete-mode aggregate, a keyed transform (the
#      latest version of each row passing its filter), and a transform
#      naming __streamwin_change, equal to a trigger-maintained log of the
#      changes (+1/-1 rows).  Groups emptied by deletes (a key, the windows
#      of 10-14 s, a group of the complete-mode query) are gone from every
#      result.  The immediate restart empties the UNLOGGED state: the
#      stateful queries restore their checkpoints
#      (streamwin.checkpoint_interval = 3, and
#      table_checkpoint_every_batch off, so that they do not take one
#      every batch) and replay: the restart comes when some query has
#      batches after its checkpoint, and comes again (at most three times)
#      until a restored query had batches to replay.
#   2. Late retractions (a stopped query, run_batch): an append-mode tumble
#      of 1 minute per key with watermark 1 minute, capture_late_rows.
#      Rows inserted, windows closed as later rows move the watermark; then
#      deletes and updates of rows behind the watermark (in closed windows,
#      and in a window still open but behind the watermark: a changelog's
#      row, added or retracted, is late when its window is closed, so that
#      a row added on time is retracted while its window is open, and a
#      row and its retraction are both applied or both dropped), a late
#      insert and its delete, and on-time deletes, among them every row of
#      a group.  A closed window's row stays as it was emitted; every change
#      into a closed window is dropped and counted in run_batch's
#      "late_retractions_dropped" and streamwin.progress (and in
#      late_rows_dropped and streamwin.late_rows with the late inserts).
#      The windows each batch must emit are computed from the trigger log:
#      the changes whose window was open at their batch, summed per window
#      up to the batch whose watermark closes it, groups of no rows left
#      out.
#   3. A chained query: q_keys's result table (update mode), given REPLICA
#      IDENTITY FULL after create_query, is itself a changelog table source
#      (its upserts and deletes are the changes); an update-mode aggregate
#      over it, run by a worker through part 1, equals plain SQL over the
#      base table and over the result table.
#   4. The state of a changelog query lives in memory only.  With
#      streamwin.state_memory at its minimum, 1MB, against 40,000 groups:
#      the cap is checked when a batch begins, so the batch that grows the
#      state past it runs (exactly) and the next one fails, with the errmsg
#      and hint about the setting, changing nothing (result table, batch
#      id); so does a new session's batch, whose store cannot load the
#      state; with the setting raised the result is exact.  Then a worker
#      under the low setting (ALTER SYSTEM): its batch fails, the error is
#      on streamwin.queries, and once the setting is reset the worker's
#      retry is exact.
#   5. TOASTed values: an UPDATE that leaves a TOASTed value unchanged
#      writes only a pointer to it into the WAL; the row is deleted or
#      given a new value and VACUUM removes the old chunks before the
#      queries read the update.  The retraction and the new version still
#      carry the value (taken from the old version, which REPLICA IDENTITY
#      FULL writes whole): a keyed transform, an appended-changes transform
#      and an aggregate over md5() and length() of it equal plain SQL.
#      Then one transaction of 400 documents of 200 kB each, read 5 rows a
#      batch: the first batch spools the other 395 rows (in the source's
#      row type, spilled to disk past streamwin.batch_work_mem) and its
#      backend's peak memory grows by much less than those documents;
#      every row then equals plain SQL.
#   6. Queries start from the rows already in their table: a table with
#      rows and a history of changes before its queries; create_query
#      waits for a transaction that wrote the table and is still open, then
#      starts from the rows it left (a snapshot at one point of the
#      stream); workers read the snapshot in batches of 1,000 while a
#      writer changes the table; an immediate restart empties the state
#      before the first checkpoint.  An aggregate and a keyed transform
#      equal plain SQL over the table.
#   7. Starts moved by reset_query: a session that ran a changelog query
#      (and keeps its runner) runs it again after another session reset it
#      (the table's rows at the reset are its new start); a transaction
#      that resets it twice starts it once; a reset rolled back in a
#      session leaves the query's start as its creation made it.  Each
#      result equals plain SQL over the table.  A query's own function
#      that calls run_batch, reset_query or drop_query on the query fails
#      its batch with the reason (it would free the batch's memory under
#      it), and the query runs once that function is gone.
#
# One node, streamwin.checkpoint_interval = 3.  About 25 s on an idle
# machine of 2 CPUs.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";
my $t_start = time;

my $node = new_node('changelog',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  . "streamwin.table_checkpoint_every_batch = off\n");

# ==== 1. workers over a randomized changelog, through restarts ===============

# t: the table; id 0 is the sentinel (key 'zz', flag false, its own event
# time, an hour after the others): the last commit sets its v to 1000000,
# bigger than every other v, so that every result that equals plain SQL
# over t has read that commit.  t_log: every committed change, as a
# trigger sees it.
psql_ok($node, qq{
CREATE TABLE t (id bigint PRIMARY KEY, k text, v int NOT NULL, ts timestamptz NOT NULL, flag bool);
ALTER TABLE t REPLICA IDENTITY FULL;
CREATE SEQUENCE t_seq;
CREATE TABLE t_log (id bigint, k text, v int, ts timestamptz, flag bool, change int);
CREATE FUNCTION t_log_change() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    INSERT INTO t_log VALUES (OLD.id, OLD.k, OLD.v, OLD.ts, OLD.flag, -1);
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO t_log VALUES (NEW.id, NEW.k, NEW.v, NEW.ts, NEW.flag, 1);
  END IF;
  RETURN NULL;
END \$\$;
CREATE TRIGGER t_log_change AFTER INSERT OR UPDATE OR DELETE ON t
  FOR EACH ROW EXECUTE FUNCTION t_log_change();

-- ntx transactions of 1 to 5 changes each: inserts (50%), updates of one
-- row (31%: its key, value, event time and flag, each changed or not),
-- updates of a row's primary key (2%), deletes of one row (12%), updates
-- of several rows of a key (4.8%), and deletes of a whole key (0.2%).  Keys k0..k7 and NULL; v from -200 to 800;
-- event times over 60 s.  One transaction in 10 rolls back; one in 10 has
-- a subtransaction that changes many rows and rolls back.
CREATE PROCEDURE churn(ntx int) LANGUAGE plpgsql AS \$\$
DECLARE
  r float8;
  hi bigint;
  victim bigint;
  key text;
BEGIN
  FOR i IN 1 .. ntx LOOP
    FOR j IN 0 .. (random() * 4)::int LOOP
      r := random();
      hi := (SELECT max(id) FROM t);
      key := CASE WHEN random() < 0.05 THEN NULL ELSE 'k' || (random() * 7)::int END;
      IF r < 0.50 OR hi < 20 THEN
        INSERT INTO t
        SELECT nextval('t_seq'), key, (random() * 1000)::int - 200,
               $T0 + (random() * 60000)::int * interval '1 ms',
               CASE WHEN random() < 0.1 THEN NULL ELSE random() < 0.5 END;
      ELSIF r < 0.95 THEN
        SELECT id INTO victim FROM t WHERE id >= 1 + (random() * hi)::bigint ORDER BY id LIMIT 1;
        CONTINUE WHEN victim IS NULL;
        IF r < 0.81 THEN
          UPDATE t SET k = CASE WHEN random() < 0.4 THEN key ELSE k END,
                       v = CASE WHEN random() < 0.6 THEN (random() * 1000)::int - 200 ELSE v END,
                       ts = CASE WHEN random() < 0.4 THEN $T0 + (random() * 60000)::int * interval '1 ms' ELSE ts END,
                       flag = CASE WHEN random() < 0.3 THEN NOT flag ELSE flag END
           WHERE id = victim;
        ELSIF r < 0.83 THEN
          UPDATE t SET id = nextval('t_seq') WHERE id = victim;
        ELSE
          DELETE FROM t WHERE id = victim;
        END IF;
      ELSIF r < 0.998 THEN
        UPDATE t SET v = v + 1, ts = ts + interval '750 ms'
         WHERE k = key AND id % 5 = i % 5 AND ts < $T0 + interval '59 seconds';
      ELSE
        DELETE FROM t WHERE k IS NOT DISTINCT FROM key AND id > 0;
      END IF;
    END LOOP;
    IF random() < 0.1 THEN
      BEGIN
        UPDATE t SET v = v + 7, k = 'rolled back' WHERE id % 3 = i % 3 AND id > hi - 300;
        DELETE FROM t WHERE id % 4 = i % 4 AND id > hi - 300;
        INSERT INTO t SELECT nextval('t_seq'), 'rolled back', 1, $T0, true FROM generate_series(1, 5);
        RAISE EXCEPTION 'roll the subtransaction back';
      EXCEPTION WHEN raise_exception THEN
        NULL;
      END;
    END IF;
    IF random() < 0.1 THEN
      ROLLBACK;
    ELSE
      COMMIT;
    END IF;
    PERFORM pg_sleep(0.002);
  END LOOP;
END \$\$;

SELECT streamwin.create_table_source('c1', 't', '{"changes": "all"}');
SELECT streamwin.create_table_source('c2', 't', '{"changes": "all", "max_records_per_batch": 50}');
SELECT streamwin.create_query('q_keys', \$q\$
  SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo, max(v) AS hi,
         min(ts) AS first, bool_and(flag) AS all_f, bool_or(flag) AS any_f,
         count(DISTINCT v % 10) AS d
    FROM c1 GROUP BY k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms', start => false);
SELECT streamwin.create_query('q_win', \$q\$
  SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi
    FROM c1 GROUP BY streamwin.tumble(ts, '2 seconds'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms', start => false);
SELECT streamwin.create_query('q_hop', \$q\$
  SELECT count(*) AS n, sum(v) AS s, max(v) AS hi, count(DISTINCT k) AS dk
    FROM c1 GROUP BY streamwin.hop(ts, '4 seconds', '2 seconds')\$q\$,
    output_mode => 'update', trigger_interval => '100 ms', start => false);
SELECT streamwin.create_query('q_total', \$q\$
  SELECT flag, count(*) AS n, sum(v) AS s, max(v) AS hi, count(DISTINCT k) AS dk
    FROM c2 GROUP BY flag\$q\$,
    output_mode => 'complete', trigger_interval => '100 ms', start => false);
SELECT streamwin.create_query('q_rows',
    'SELECT id, k, v * 2 AS v2, ts, flag FROM c2 WHERE v > 0',
    trigger_interval => '100 ms', start => false);
SELECT streamwin.create_query('q_changes',
    'SELECT id, k, v, ts, flag, __streamwin_change FROM c2',
    trigger_interval => '100 ms', start => false);
}, 'part 1: table t (REPLICA IDENTITY FULL), two changelog sources, six stopped queries');

# ---- 3 (set up before the stream): q_keys's result table as a source ------

psql_ok($node, q{
ALTER TABLE q_keys REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('c_chain', 'q_keys', '{"changes": "all"}');
SELECT streamwin.create_query('q_chain', $q$
  SELECT any_f, count(*) AS groups, sum(n) AS n, sum(s) AS s, max(s) AS top,
         min(lo) AS lo, count(DISTINCT hi) AS dhi
    FROM c_chain GROUP BY any_f$q$,
    output_mode => 'update', trigger_interval => '100 ms', start => false);
}, 'part 3: the result table q_keys is a changelog source too, with a query over it');

my @queries = qw(q_keys q_win q_hop q_total q_rows q_changes q_chain);
psql_ok($node, qq{
INSERT INTO t VALUES (0, 'zz', 999999, $T0 + interval '1 hour', false);
} . join('', map { "SELECT streamwin.start_query('$_');\n" } @queries),
	'the sentinel row, and every query started');

# The expectations, plain SQL over t (and t_log).
my %want = (
	q_keys => q{SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo, max(v) AS hi,
       min(ts) AS first, bool_and(flag) AS all_f, bool_or(flag) AS any_f,
       count(DISTINCT v % 10) AS d FROM t GROUP BY k},
	q_win => windows_sql(table => 't', size => 2, keys => 'k',
		aggs => 'count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi'),
	q_hop => windows_sql(table => 't', size => 4, slide => 2,
		aggs => 'count(*) AS n, sum(v) AS s, max(v) AS hi, count(DISTINCT k) AS dk'),
	q_total => q{SELECT flag, count(*) AS n, sum(v) AS s, max(v) AS hi, count(DISTINCT k) AS dk
  FROM t GROUP BY flag},
	q_rows    => 'SELECT id, k, v * 2 AS v2, ts, flag FROM t WHERE v > 0',
	q_changes => 'SELECT id, k, v, ts, flag, change FROM t_log',
);
my %got = (
	q_keys    => 'SELECT k, n, s, a, lo, hi, first, all_f, any_f, d FROM q_keys',
	q_win     => 'SELECT window_start, window_end, k, n, s, lo, hi FROM q_win',
	q_hop     => 'SELECT window_start, window_end, n, s, hi, dk FROM q_hop',
	q_total   => 'SELECT flag, n, s, hi, dk FROM q_total',
	q_rows    => 'SELECT id, k, v2, ts, flag FROM q_rows',
	q_changes => 'SELECT id, k, v, ts, flag, __streamwin_change FROM q_changes',
	q_chain   => 'SELECT any_f, groups, n, s, top, lo, dhi FROM q_chain',
);
my $chain_over = q{SELECT any_f, count(*) AS groups, sum(n) AS n, sum(s) AS s, max(s) AS top,
       min(lo) AS lo, count(DISTINCT hi) AS dhi FROM (%s) x GROUP BY any_f};
$want{q_chain} = sprintf($chain_over, $want{q_keys});

sub wait_workers
{
	my ($when) = @_;
	my $list = join(', ', map { "'$_'" } @queries);
	wait_until($node,
		"SELECT count(*) FROM streamwin.queries WHERE name IN ($list) AND state = 'running' AND worker_pid IS NOT NULL",
		scalar(@queries), "the seven queries have workers $when");
	return;
}

# A background session running CALL churn(ntx); it ends with the server.
sub start_writer
{
	my ($ntx) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres'),
		  '-c', "CALL churn($ntx)" ],
		'>', \$out, '2>', \$err);
	return { h => $h, err => \$err };
}

sub changes_read
{
	return $node->safe_psql('postgres', 'SELECT count(*) FROM q_changes');
}

wait_workers('after start_query');
my $writer = start_writer(100_000);
wait_until($node, 'SELECT count(*) > 3000 FROM q_changes', 't',
	'the workers consume the changes');
note('fast restart with ' . changes_read() . ' changes read');
$node->stop('fast');
ok(!$writer->{h}->finish, 'the writer was still running: cut off by the fast shutdown')
  or diag('the writer finished before the restart');
$node->start;
wait_workers('after the fast restart');

$writer = start_writer(100_000);
my $before = changes_read();
wait_until($node, "SELECT count(*) > $before + 3000 FROM q_changes", 't',
	'the workers consume the changes after the fast restart');
# The immediate restart should leave a replay to do: a worker checkpoints
# every 3 batches, and when it is idle, so one that had caught up may have
# nothing to replay.  Before each crash some stateful query has committed
# batches after its checkpoint; the crash is tried again (the writer
# started anew) until a restored query had batches to replay, at most
# three times.
my @stateful = qw(q_keys q_win q_hop q_total q_chain);
my %restores = map {
	$_ => log_count($node, qr/query "$_" lost its state in a crash; restoring the checkpoint/)
} @stateful;
my $stateful_list = join(', ', map { "'$_'" } @stateful);
my $behind_sql = qq{
SELECT count(*) > 0 FROM streamwin.query_catalog c
 WHERE c.name IN ($stateful_list)
   AND (SELECT max(p.batch_id) FROM streamwin.progress p WHERE p.query = c.name)
       > coalesce(c.checkpoint_batch_id, 0)};
my $replays_sql = sub {
	my ($replays, $crash_at) = @_;
	return 'SELECT count(*) FROM ('
	  . values_sql([ [ 'q', 'text' ], [ 'ckpt', 'bigint' ] ], $replays)
	  . ") r WHERE EXISTS (SELECT FROM streamwin.progress p WHERE p.query = r.q AND p.batch_id > r.ckpt
	                        AND p.started_at < '$crash_at')";
};
my ($replayed, $crashes) = (0, 0);
while (!$replayed && $crashes < 3)
{
	$crashes++;
	wait_until($node, $behind_sql, 't',
		"before crash $crashes, a stateful query has batches after its checkpoint");
	note("immediate restart $crashes with " . changes_read() . ' changes read');
	my $log_from = -s $node->logfile;
	my $crash_at = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	$node->stop('immediate');
	ok(!$writer->{h}->finish, "the writer was still running: cut off by immediate shutdown $crashes")
	  or diag('the writer finished before the restart');
	$node->start;
	wait_workers("after immediate restart $crashes");

	# each restores its checkpoint at its first batch: the batch it names
	my @replays;
	my $limit = time + $StreamwinTest::timeout;
	while (1)
	{
		my $log = substr(slurp_file($node->logfile), $log_from);
		@replays = ();
		while ($log =~
			/LOG:  streamwin: query "(\w+)" lost its state in a crash; restoring the checkpoint of batch (\d+)/g)
		{
			push @replays, [ $1, $2 ];
		}
		my %seen = map { $_->[0] => 1 } @replays;
		last if (grep { $seen{$_} } @stateful) == @stateful || time > $limit;
		Time::HiRes::sleep(0.2);
	}
	is(scalar(grep { my $q = $_; grep { $_->[0] eq $q } @replays } @stateful),
		scalar(@stateful), "every stateful query restored its checkpoint after immediate restart $crashes");
	# those that had run batches after their checkpoint replay them (a
	# restore of batch n, with batches after n that began before the crash)
	$replayed = $node->safe_psql('postgres', $replays_sql->(\@replays, $crash_at));
	note("immediate restart $crashes: $replayed queries had batches after their checkpoint to replay");
	$writer = start_writer($replayed ? 1200 : 100_000);
	if (!$replayed && $crashes < 3)
	{
		my $before = changes_read();
		wait_until($node, "SELECT count(*) > $before + 1000 FROM q_changes", 't',
			"the workers consume changes after immediate restart $crashes");
	}
}
cmp_ok($replayed, '>=', 1, 'a restored query had batches after its checkpoint to replay');

ok($writer->{h}->finish, 'the last part of the stream committed')
  or diag(${ $writer->{err} });

# Whole groups emptied at the end: every row of key k1, of the windows
# [10 s, 12 s) and [12 s, 14 s) (and so the hop [10 s, 14 s)), and with
# flag NULL; then the sentinel's last commit.  The churn may have emptied
# one already (a whole key's delete, near the end of a short last run), so
# rows of each go in first, and the results are to hold the groups before
# they are emptied.
psql_ok($node, qq{
INSERT INTO t SELECT nextval('t_seq'), 'k1', i, $T0 + interval '10 s' + i * interval '1 s', NULL
  FROM generate_series(0, 3) i;
}, 'rows of key k1, of 10-14 s and with flag NULL');
wait_until($node, qq{
SELECT (SELECT count(*) FROM q_keys WHERE k = 'k1') > 0
   AND (SELECT count(*) FROM q_win WHERE window_start IN ($T0 + interval '10 s', $T0 + interval '12 s')) > 0
   AND (SELECT count(*) FROM q_hop WHERE window_start = $T0 + interval '10 s') > 0
   AND (SELECT count(*) FROM q_total WHERE flag IS NULL) > 0
   AND (SELECT count(*) FROM q_rows WHERE k = 'k1') > 0}, 't',
	'the results hold the groups before they are emptied');
psql_ok($node, qq{
DELETE FROM t WHERE k = 'k1';
DELETE FROM t WHERE ts >= $T0 + interval '10 s' AND ts < $T0 + interval '14 s';
DELETE FROM t WHERE flag IS NULL;
UPDATE t SET v = 1000000 WHERE id = 0;
}, 'key k1, 10-14 s and flag NULL emptied, then the last commit');
note(sprintf('t holds %s rows after %s changes',
	$node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM t_log')));
is( $node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE change = 1) > count(*) FILTER (WHERE change = -1),
       count(*) FILTER (WHERE change = -1) > 3000
  FROM t_log}),
	't|t', 'the stream has thousands of retractions');

for my $q (qw(q_keys q_win q_hop q_total q_rows q_changes))
{
	wait_results_match($node, $got{$q}, $want{$q},
		"$q equals plain SQL over the table, through both restarts");
}
wait_results_match($node, $got{q_chain}, $want{q_chain},
	'q_chain, over the result table of q_keys, equals plain SQL over the base table');
# once more, now that all have caught up
for my $q (@queries)
{
	results_match($node, $got{$q}, $want{$q}, "$q still equals plain SQL");
}
results_match($node, $got{q_chain}, sprintf($chain_over, 'SELECT * FROM q_keys'),
	'q_chain equals plain SQL over the result table it reads');
is( $node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM q_keys WHERE k = 'k1'),
       (SELECT count(*) FROM q_win WHERE k = 'k1' OR window_start IN ($T0 + interval '10 s', $T0 + interval '12 s')),
       (SELECT count(*) FROM q_hop WHERE window_start = $T0 + interval '10 s'),
       (SELECT count(*) FROM q_total WHERE flag IS NULL),
       (SELECT count(*) FROM q_rows WHERE k = 'k1')}),
	'0|0|0|0|0', 'the emptied groups are gone from the results');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM q_changes WHERE k = 'rolled back'}),
	'0', 'no change of a rolled-back subtransaction');
for my $q (@stateful)
{
	cmp_ok(log_count($node, qr/query "$q" lost its state in a crash; restoring the checkpoint/),
		'>', $restores{$q}, "$q restored its checkpoint after the immediate restarts");
}
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM streamwin.queries
 WHERE name IN ('q_keys', 'q_win', 'q_hop', 'q_total', 'q_rows', 'q_changes', 'q_chain')
   AND state <> 'running'}),
	'0', 'every query still running');
psql_ok($node, join('', map { "SELECT streamwin.drop_query('$_');\n" } @queries)
	  . "SELECT streamwin.drop_source('c1'); SELECT streamwin.drop_source('c2');"
	  . "SELECT streamwin.drop_source('c_chain');",
	'part 1 and 3 queries and sources dropped');
note(sprintf('parts 1 and 3 done after %.1f s', time - $t_start));

# ==== 2. late retractions ====================================================

# lt_log: each committed change with the step (the batch) that reads it.
# lt_wm: each step's watermark before and after its batch.
psql_ok($node, qq{
CREATE TABLE lt (id int PRIMARY KEY, k text NOT NULL, v int NOT NULL, ts timestamptz NOT NULL);
ALTER TABLE lt REPLICA IDENTITY FULL;
CREATE TABLE lt_step (n int);
INSERT INTO lt_step VALUES (1);
CREATE TABLE lt_log (step int, id int, k text, v int, ts timestamptz, change int);
CREATE TABLE lt_wm (step int PRIMARY KEY, wm_before timestamptz, wm_after timestamptz);
CREATE FUNCTION lt_log_change() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    INSERT INTO lt_log SELECT n, OLD.id, OLD.k, OLD.v, OLD.ts, -1 FROM lt_step;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO lt_log SELECT n, NEW.id, NEW.k, NEW.v, NEW.ts, 1 FROM lt_step;
  END IF;
  RETURN NULL;
END \$\$;
CREATE TRIGGER lt_log_change AFTER INSERT OR UPDATE OR DELETE ON lt
  FOR EACH ROW EXECUTE FUNCTION lt_log_change();
SELECT streamwin.create_table_source('lsrc', 'lt', '{"changes": "all"}');
SELECT streamwin.create_query('q_late', \$q\$
  SELECT k, count(*) AS n, sum(v) AS s, max(v) AS hi
    FROM lsrc GROUP BY streamwin.tumble(ts, '1 minute'), k\$q\$,
    watermark => '1 minute', options => '{"capture_late_rows": true}', start => false);
}, 'part 2: table lt, its change log, and an append-mode query with a 1-minute watermark');

# The changes the query applies: those of each step whose window is open
# at the watermark its batch starts with.  A window is emitted by the first batch
# whose watermark reaches its end, with the changes of that batch and the
# ones before it, unless they leave its group without rows.
my $applied = qq{SELECT l.* FROM lt_log l JOIN lt_wm w USING (step)
 WHERE w.wm_before IS NULL OR date_bin('1 minute', l.ts, $T0) + interval '1 minute' > w.wm_before};
my $want_late = qq{
SELECT ws AS window_start, ws + interval '1 minute' AS window_end, a.k,
       sum(a.change)::bigint AS n, sum(a.change * a.v)::bigint AS s
  FROM ($applied) a
       CROSS JOIN LATERAL (SELECT date_bin('1 minute', a.ts, $T0) AS ws) w
       CROSS JOIN LATERAL (SELECT min(step) AS closing FROM lt_wm
                            WHERE wm_after >= ws + interval '1 minute') c
 WHERE a.step <= c.closing
 GROUP BY ws, a.k
HAVING sum(a.change) > 0};
my $late_of = qq{SELECT l.* FROM lt_log l JOIN lt_wm w USING (step)
 WHERE date_bin('1 minute', l.ts, $T0) + interval '1 minute' <= w.wm_before};

my $step = 1;

# One batch of q_late for what the step changed; checks its counts and the
# result.  Returns the batch's progress record.
sub late_batch
{
	my ($what) = @_;
	psql_ok($node, qq{
INSERT INTO lt_wm SELECT $step, watermark, NULL FROM streamwin.queries WHERE name = 'q_late';
UPDATE lt_step SET n = n + 1;});
	my $r = run_json($node, "run_batch('q_late')");
	psql_ok($node, qq{
UPDATE lt_wm SET wm_after = (SELECT watermark FROM streamwin.queries WHERE name = 'q_late')
 WHERE step = $step});
	my ($late, $late_retr) = split /\|/, $node->safe_psql('postgres', qq{
SELECT count(*), count(*) FILTER (WHERE change = -1) FROM ($late_of) x WHERE step = $step});
	is($r->{late_retractions_dropped} // 'missing', $late_retr,
		"step $step ($what): run_batch counts $late_retr late retractions");
	is($r->{late_rows_dropped}, $late, "step $step: and $late late rows, retractions included");
	results_match($node, 'SELECT window_start, window_end, k, n, s FROM q_late', $want_late,
		"step $step: the windows emitted are those the applied changes make");
	$step++;
	return $r;
}

psql_ok($node, qq{
INSERT INTO lt SELECT g, (ARRAY['a', 'b', 'c'])[g % 3 + 1], g, $T0 + g * interval '4 seconds'
  FROM generate_series(1, 40) g;
INSERT INTO lt SELECT 100 + g, 'gone', 1000 + g, $T0 + interval '130 seconds' + g * interval '1 second'
  FROM generate_series(1, 3) g;
UPDATE lt SET v = v + 500 WHERE id = 20;
}, 'rows over 0 to 160 s (max 160 s: the watermark becomes 100 s), a group "gone" at 131-133 s');
my $r = late_batch('inserts');
is($r->{watermark_ms} - $node->safe_psql('postgres',
		"SELECT extract(epoch FROM $T0) * 1000"), 100_000, 'the watermark is 100 s');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT window_start::text, ',') FROM q_late}),
	'2024-01-01 00:00:00+00', 'the window [0, 60 s) closed and was emitted');
psql_ok($node, 'CREATE TABLE closed0 AS SELECT * FROM q_late', 'the emitted rows kept');

psql_ok($node, qq{
DELETE FROM lt WHERE id = 3;                        -- ts 12 s, closed window: late
UPDATE lt SET ts = $T0 + interval '150 seconds' WHERE id = 6;  -- from 24 s (late) to 150 s (on time)
UPDATE lt SET v = v + 1 WHERE id = 9;               -- at 36 s: both versions late
INSERT INTO lt VALUES (200, 'a', 7, $T0 + interval '30 seconds');  -- a late insert
DELETE FROM lt WHERE id = 20;                       -- at 80 s: behind the watermark, its window open: applied
DELETE FROM lt WHERE id = 26;                       -- at 104 s: on time
UPDATE lt SET k = 'b' WHERE id = 27;                -- at 108 s: on time
DELETE FROM lt WHERE k = 'gone';                    -- its group empties
}, 'deletes and updates behind the watermark and on time, a late insert');
late_batch('late and on-time changes');
results_match($node, q{SELECT * FROM q_late WHERE window_start < timestamptz '2024-01-01 00:01:00+00'},
	'SELECT * FROM closed0', 'the closed window [0, 60 s) stays as emitted');

psql_ok($node, qq{
DELETE FROM lt WHERE id = 200;                      -- the late insert's delete: late too
INSERT INTO lt SELECT 300 + g, 'c', g, $T0 + interval '240 seconds' + g * interval '1 second'
  FROM generate_series(1, 5) g;                    -- max 245 s: watermark 185 s
}, 'the late insert deleted, rows moving the watermark to 185 s');
late_batch('the watermark moves');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM q_late WHERE k = 'gone'}), '0', 'the emptied group "gone" was not emitted');
psql_ok($node, 'CREATE TABLE closed1 AS SELECT * FROM q_late', 'the emitted rows kept');

psql_ok($node, qq{
DELETE FROM lt WHERE id IN (1, 16, 28, 35);         -- one row of each closed window
UPDATE lt SET v = 0 WHERE id IN (2, 17, 29);        -- and in place
UPDATE lt SET ts = $T0 + interval '10 seconds' WHERE id = 301;  -- 241 s -> 10 s
INSERT INTO lt VALUES (400, 'a', 1, $T0 + interval '400 seconds');  -- closes everything before 340 s
}, 'retractions in every closed window, an update into a closed one');
late_batch('retractions into closed windows');
results_match($node, 'SELECT * FROM q_late WHERE window_end <= timestamptz \'2024-01-01 00:03:00+00\'',
	'SELECT * FROM closed1', 'the windows closed before stay as emitted');

my ($nlate, $nretr) = split /\|/, $node->safe_psql('postgres', "SELECT count(*), count(*) FILTER (WHERE change = -1) FROM ($late_of) x");
is( $node->safe_psql('postgres', q{
SELECT sum(late_retractions_dropped), sum(late_rows_dropped) FROM streamwin.progress WHERE query = 'q_late'}),
	"$nretr|$nlate", "streamwin.progress counts the $nretr late retractions among $nlate late rows");
results_match($node, q{SELECT event_time FROM streamwin.late_rows WHERE query = 'q_late'},
	"SELECT ts FROM ($late_of) x", 'streamwin.late_rows captured each late row and retraction');
cmp_ok($nretr, '>=', 9, "the steps had late retractions ($nretr)");
psql_ok($node, q{SELECT streamwin.drop_query('q_late'); SELECT streamwin.drop_source('lsrc');},
	'part 2 dropped');
note(sprintf('part 2 done after %.1f s', time - $t_start));

# ==== 4. state beyond streamwin.state_memory =================================

psql_ok($node, q{
CREATE TABLE m (id int PRIMARY KEY, g int NOT NULL, v int NOT NULL);
ALTER TABLE m REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('msrc', 'm', '{"changes": "all"}');
SELECT streamwin.create_query('q_mem',
    'SELECT g, count(*) AS n, sum(v) AS s, min(v) AS lo, count(DISTINCT v) AS dv FROM msrc GROUP BY g',
    output_mode => 'update', start => false);
INSERT INTO m SELECT g, g % 1000, g FROM generate_series(1, 3000) g;
SELECT streamwin.run_batch('q_mem');
}, 'part 4: a changelog query with 1,000 groups');
my $want_mem = 'SELECT g, count(*) AS n, sum(v) AS s, min(v) AS lo, count(DISTINCT v) AS dv FROM m GROUP BY g';
my $got_mem  = 'SELECT g, n, s, lo, dv FROM q_mem';
results_match($node, $got_mem, $want_mem, 'q_mem equals plain SQL');

# The cap is checked when a batch begins (store_begin): the batch that
# grows the state past it runs; the next one fails.
my $s = store_session($node);
sess_ok($s, q{SET streamwin.state_memory = '1MB'});
psql_ok($node, q{
INSERT INTO m SELECT g, g, g % 7 FROM generate_series(3001, 43000) g;
UPDATE m SET v = v + 1 WHERE id % 10 = 0;
DELETE FROM m WHERE id % 10 = 1;
}, '40,000 new groups, updates and deletes');
sess_ok($s, q{SELECT streamwin.run_batch('q_mem')}, 'a session with streamwin.state_memory = 1MB reads them');
results_match($node, $got_mem, $want_mem, 'q_mem equals plain SQL');
psql_ok($node, q{
CREATE TABLE q_mem_before AS SELECT * FROM q_mem;
UPDATE m SET g = g + 1 WHERE id % 13 = 0;
DELETE FROM m WHERE id % 13 = 1;
}, 'groups changed and emptied');
my $batch0 = $node->safe_psql('postgres', q{SELECT last_batch_id FROM streamwin.queries WHERE name = 'q_mem'});
my (undef, $err) = sess($s, q{SELECT streamwin.run_batch('q_mem')});
like($err, qr/ERROR:  streamwin: the state of query "q_mem" does not fit in streamwin\.state_memory \(1024 kB\)/,
	'the next batch of that session fails: the state does not fit in streamwin.state_memory');
like($err, qr/HINT:  Raise streamwin\.state_memory .*nothing is lost/, 'the hint says to raise it');
results_match($node, 'SELECT * FROM q_mem', 'SELECT * FROM q_mem_before', 'the failed batch changed no result');
is($node->safe_psql('postgres', q{SELECT last_batch_id FROM streamwin.queries WHERE name = 'q_mem'}),
	$batch0, 'nor the batch id');
fails_like($node, q{SET streamwin.state_memory = '1MB'; SELECT streamwin.run_batch('q_mem')},
	qr/does not fit in streamwin\.state_memory.*\n(?:.*\n)*HINT:  Raise streamwin\.state_memory/,
	'a new session with 1MB cannot load the state: its batch fails too');
sess_ok($s, q{SET streamwin.state_memory = '64MB'});
sess_ok($s, q{SELECT streamwin.run_batch('q_mem')}, 'with 64MB the batch runs');
results_match($node, $got_mem, $want_mem, 'q_mem equals plain SQL after the setting was raised');
$s->quit;

# A worker under the low setting: it fails, says so, and after the reset
# its retry is exact.
psql_ok($node, q{
DROP TABLE q_mem_before;
CREATE TABLE q_mem_before AS SELECT * FROM q_mem;
ALTER SYSTEM SET streamwin.state_memory = '1MB';
SELECT pg_reload_conf();
UPDATE m SET v = v - 3 WHERE id % 17 = 0;
DELETE FROM m WHERE id % 17 = 1;
INSERT INTO m SELECT g, g, g FROM generate_series(50001, 52000) g;
SELECT streamwin.start_query('q_mem');
}, 'the cap lowered for workers, more changes, the query started');
wait_until($node, q{SELECT last_error ~ 'does not fit in streamwin\.state_memory' FROM streamwin.queries WHERE name = 'q_mem'},
	't', 'the worker\'s batch fails: streamwin.queries shows why');
results_match($node, 'SELECT * FROM q_mem', 'SELECT * FROM q_mem_before',
	'the failed batches of the worker changed no result');
psql_ok($node, q{ALTER SYSTEM RESET streamwin.state_memory; SELECT pg_reload_conf();}, 'the cap reset');
wait_results_match($node, $got_mem, $want_mem, 'the worker\'s retry is exact');
psql_ok($node, q{SELECT streamwin.drop_query('q_mem'); SELECT streamwin.drop_source('msrc');},
	'part 4 dropped');

# ==== 5. TOASTed values ======================================================

# doc is stored out of line, uncompressed (STORAGE EXTERNAL), from 2 kB on.
psql_ok($node, q{
CREATE TABLE docs (id int PRIMARY KEY, n int NOT NULL, doc text);
ALTER TABLE docs ALTER doc SET STORAGE EXTERNAL;
ALTER TABLE docs REPLICA IDENTITY FULL;
CREATE TABLE docs_log (id int, n int, h text, change int);
CREATE FUNCTION docs_log_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    INSERT INTO docs_log VALUES (OLD.id, OLD.n, md5(OLD.doc), -1);
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO docs_log VALUES (NEW.id, NEW.n, md5(NEW.doc), 1);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER docs_log_change AFTER INSERT OR UPDATE OR DELETE ON docs
  FOR EACH ROW EXECUTE FUNCTION docs_log_change();
SELECT streamwin.create_table_source('dsrc', 'docs', '{"changes": "all"}');
SELECT streamwin.create_query('d_rows', 'SELECT id, n, md5(doc) AS h, length(doc) AS len FROM dsrc',
    start => false);
SELECT streamwin.create_query('d_changes', 'SELECT id, n, md5(doc) AS h, __streamwin_change FROM dsrc',
    start => false);
SELECT streamwin.create_query('d_agg',
    'SELECT n, count(*) AS c, count(DISTINCT md5(doc)) AS d, max(length(doc)) AS l FROM dsrc GROUP BY n',
    output_mode => 'update', start => false);
INSERT INTO docs SELECT g, g % 3, repeat(md5(g::text), 64 + g) FROM generate_series(1, 24) g;
}, 'part 5: a table of TOASTed documents, three queries over it');
my @dq = qw(d_rows d_changes d_agg);
my %dwant = (
	d_rows    => 'SELECT id, n, md5(doc) AS h, length(doc) AS len FROM docs',
	d_changes => 'SELECT id, n, h, change FROM docs_log',
	d_agg     => 'SELECT n, count(*) AS c, count(DISTINCT md5(doc)) AS d, max(length(doc)) AS l FROM docs GROUP BY n',
);
my %dgot = (
	d_rows    => 'SELECT id, n, h, len FROM d_rows',
	d_changes => 'SELECT id, n, h, __streamwin_change FROM d_changes',
	d_agg     => 'SELECT n, c, d, l FROM d_agg',
);
sub check_docs
{
	my ($when) = @_;
	psql_ok($node, join('', map { "SELECT streamwin.run_available('$_');\n" } @dq),
		"the queries read the documents $when");
	results_match($node, $dgot{$_}, $dwant{$_}, "$_ equals plain SQL $when") for @dq;
	return;
}
check_docs('as inserted');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM pg_class c JOIN pg_class tc ON tc.oid = c.reltoastrelid
 WHERE c.relname = 'docs' AND pg_relation_size(tc.oid) > 0}), '1', 'the documents are TOASTed');
psql_ok($node, q{
UPDATE docs SET n = n + 10 WHERE id % 2 = 0;            -- documents unchanged
UPDATE docs SET n = n + 20 WHERE id % 5 = 0;
DELETE FROM docs WHERE id % 4 = 0;                      -- their chunks go
UPDATE docs SET doc = repeat('x', 3000) WHERE id % 3 = 0;  -- the old chunks go
VACUUM docs;
}, 'updates that keep the documents, then deletes and new documents, and VACUUM');
check_docs('after updates that kept TOASTed values whose chunks VACUUM removed since');
psql_ok($node, join('', map { "SELECT streamwin.drop_query('$_');\n" } @dq)
	  . "SELECT streamwin.drop_source('dsrc');", 'part 5 dropped');

# A transaction larger than a batch is decoded once: the batch that fills up
# in it puts the rest of its rows into a spool.  Each TOASTed value is
# copied out of the reorder buffer to form its row, and the copy goes with
# the row formed: 395 documents of 200 kB stay out of the backend's memory
# (the reorder buffer and the spool spill to disk past their limits, here
# 64 kB and 4 MB).  Copies kept to the batch's end grew it by 95 MB.
psql_ok($node, q{
CREATE TABLE bigdocs (id int PRIMARY KEY, doc text);
ALTER TABLE bigdocs ALTER doc SET STORAGE EXTERNAL;
ALTER TABLE bigdocs REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('bsrc', 'bigdocs', '{"changes": "all", "max_records_per_batch": 5}');
SELECT streamwin.create_query('b_rows', 'SELECT id, md5(doc) AS h, length(doc) AS len FROM bsrc', start => false);
INSERT INTO bigdocs SELECT g, repeat(md5(g::text), 6400) FROM generate_series(1, 400) g;
}, 'part 5: one transaction of 400 documents of 200 kB');
my $grown_line = $node->safe_psql('postgres', q{
SET logical_decoding_work_mem = '64kB';
SET streamwin.batch_work_mem = '4MB';
SELECT (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s+(\d+)'))[1]::int AS before \gset
SELECT (streamwin.run_available('b_rows'))->>'batches' AS batches \gset
SELECT :batches, (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s+(\d+)'))[1]::int - :before;
});
my ($batches, $grown) = split /\|/, $grown_line;
note("run_available took $batches batches; its backend's peak memory grew by $grown kB");
cmp_ok($batches, '>=', 80, 'run_available took the transaction 5 rows a batch');
cmp_ok($grown, '<', 50_000, '... its first batch spooled 395 documents (79 MB) and kept none of them in memory');
results_match($node, 'SELECT id, h, len FROM b_rows', 'SELECT id, md5(doc), length(doc) FROM bigdocs',
	'b_rows equals plain SQL');
psql_ok($node, q{SELECT streamwin.drop_query('b_rows'); SELECT streamwin.drop_source('bsrc'); DROP TABLE bigdocs},
	'the documents dropped');

# ==== 6. queries start from the rows already in the table ===================

# inv holds 3,000 rows and a history of changes before any query exists.
# While a transaction that updated rows is still open, create_query waits
# (it locks the table to read its rows at one point of the stream), then
# starts from the rows as that transaction left them.  A writer changes the
# table while the workers read the snapshot (1,000 rows a batch) and an
# immediate restart empties the state before its first checkpoint.
psql_ok($node, q{
CREATE TABLE inv (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL);
ALTER TABLE inv REPLICA IDENTITY FULL;
INSERT INTO inv SELECT g, g % 17, g % 101 FROM generate_series(1, 3000) g;
SELECT streamwin.create_table_source('isrc', 'inv', '{"changes": "all", "max_records_per_batch": 1000}');
CREATE PROCEDURE inv_churn(ntx int) LANGUAGE plpgsql AS $$
DECLARE victim int;
BEGIN
  FOR i IN 1 .. ntx LOOP
    victim := 1 + (random() * 3500)::int;
    UPDATE inv SET v = v + 1, k = (k + 3) % 19 WHERE id = victim;
    DELETE FROM inv WHERE id = 1 + (random() * 3500)::int;
    INSERT INTO inv VALUES (3001 + (random() * 500)::int, (random() * 20)::int, i)
      ON CONFLICT (id) DO UPDATE SET v = excluded.v;
    COMMIT;
  END LOOP;
END $$;
CALL inv_churn(300);
}, 'part 6: a table with rows and a history, before its queries');
my $open_tx = $node->background_psql('postgres');
$open_tx->query_safe('BEGIN; UPDATE inv SET v = v + 1000 WHERE id <= 50');
my $creator = $node->background_psql('postgres');
$creator->query_until(qr/creating/, q{
\echo creating
SELECT streamwin.create_query('i_sum', 'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS top FROM isrc GROUP BY k',
    output_mode => 'update', trigger_interval => '50 ms');
SELECT streamwin.create_query('i_rows', 'SELECT id, k, v FROM isrc', trigger_interval => '50 ms');
\echo created
});
wait_until($node, q{SELECT count(*) > 0 FROM pg_locks WHERE relation = 'inv'::regclass AND NOT granted},
	't', 'create_query waits for the open transaction that wrote the table');
$open_tx->query_safe('COMMIT');
$creator->query_until(qr/created/, '');
$creator->quit;
$open_tx->quit;
my $inv_writer = IPC::Run::start(
	[ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres'),
	  '-c', 'CALL inv_churn(100000)' ], '>', \my $inv_out, '2>', \my $inv_err);
wait_until($node, q{SELECT count(*) > 0 FROM streamwin.progress WHERE query = 'i_sum'}, 't',
	'i_sum has run a batch');
$node->stop('immediate');
ok(!$inv_writer->finish, 'the writer was running: cut off by the immediate shutdown');
$node->start;
psql_ok($node, 'CALL inv_churn(200)', 'more changes after the restart');
wait_results_match($node, 'SELECT k, n, s, top FROM i_sum',
	'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS top FROM inv GROUP BY k',
	'i_sum equals plain SQL: the rows that were there, then every change');
wait_results_match($node, 'SELECT id, k, v FROM i_rows', 'SELECT id, k, v FROM inv',
	'i_rows (a keyed transform) equals the table');
psql_ok($node, q{
SELECT streamwin.drop_query('i_sum');
SELECT streamwin.drop_query('i_rows');
SELECT streamwin.drop_source('isrc');}, 'part 6 dropped');

# A column of a changelog source's table dropped or renamed: the rows it
# read keep the column, so their retractions would not be exact.  The
# batches fail with the reason, and nothing moves; so do an inserts-only
# source's, which would read the renamed column as NULL.
psql_ok($node, q{
CREATE TABLE ren (id int PRIMARY KEY, k text, v int);
ALTER TABLE ren REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('ren_all', 'ren', '{"changes": "all"}');
SELECT streamwin.create_table_source('ren_ins', 'ren');
SELECT streamwin.create_query('ren_sum', 'SELECT k, sum(v) AS s FROM ren_all GROUP BY k', output_mode => 'update', start => false);
SELECT streamwin.create_query('ren_rows', 'SELECT id, k, v FROM ren_ins', start => false);
INSERT INTO ren SELECT i, 'k' || i % 3, i FROM generate_series(1, 30) i;
SELECT streamwin.run_batch('ren_sum'), streamwin.run_batch('ren_rows');
ALTER TABLE ren RENAME COLUMN k TO kk;
UPDATE ren SET v = v + 1 WHERE id <= 10;
INSERT INTO ren VALUES (31, 'k1', 31);
}, 'a changelog source read, then its table\'s column renamed and rows updated');
my $ren_next = q{SELECT sum(o.next_offset) FROM streamwin.query_offsets o
  JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'ren_sum'};
my $ren_before = $node->safe_psql('postgres', $ren_next);
fails_like($node, q{SELECT streamwin.run_batch('ren_sum')},
	qr/column "k" of table "ren" was dropped or renamed.*\n.*DETAIL:  A changelog source retracts the rows it has read with the columns it was created with/,
	'the changelog query fails with the column and why');
is($node->safe_psql('postgres', $ren_next), $ren_before, '... and its offsets do not move');
results_match($node, 'SELECT k, s FROM ren_sum', q{SELECT 'k' || i % 3, sum(i) FROM generate_series(1, 30) i GROUP BY 1},
	'... and its result stays what the rows before the rename made');
fails_like($node, q{SELECT streamwin.create_query('ren_new', 'SELECT k, count(*) FROM ren_all GROUP BY k', output_mode => 'update', start => false)},
	qr/column "k" of table "ren" was dropped or renamed/,
	'a new query over the changelog source fails at creation, before it reads the table\'s rows without the column');
fails_like($node, q{SELECT streamwin.run_batch('ren_rows')},
	qr/column "k" of table "ren" was renamed to "kk"/,
	'the inserts-only query fails too, rather than read the renamed column as NULL');
results_match($node, 'SELECT id, k, v FROM ren_rows',
	q{SELECT i, 'k' || i % 3, i FROM generate_series(1, 30) i},
	'... and its result stays what the rows before the rename made');
# The commit time of a changelog row is that of the change that delivered
# it: an aggregation windowed by it would retract from another window.
psql_ok($node, q{SELECT streamwin.create_table_source('ren_meta', 'ren',
    '{"changes": "all", "metadata": {"committed_at": "timestamp"}}')}, 'a changelog source with metadata');
fails_like($node, q{SELECT streamwin.create_query('bad', 'SELECT count(*) FROM ren_meta GROUP BY streamwin.tumble(committed_at, ''1 minute'')',
    output_mode => 'update', start => false)},
	qr/an aggregation over changelog source "ren_meta" cannot read its metadata columns.*\n.*DETAIL:  A metadata column tells of the change that delivered a row/,
	'refused: an aggregation windowed by the commit time of a changelog');
fails_like($node, q{SELECT streamwin.create_query('bad', 'SELECT id, v FROM ren_meta WHERE committed_at < ''2100-01-01''',
    start => false)},
	qr/a transform over changelog source "ren_meta" cannot filter by its metadata columns/,
	'refused: a keyed transform filtered by the commit time (an update\'s old version would be judged by the update\'s)');
psql_ok($node, q{
SELECT streamwin.create_query('ren_meta_rows', 'SELECT id, v, committed_at FROM ren_meta', start => false);
UPDATE ren SET v = v * 10 WHERE id > 25;
DELETE FROM ren WHERE id = 1;
SELECT streamwin.run_batch('ren_meta_rows');}, 'a transform may select the commit time, and reads the changes');
results_match($node, 'SELECT id, v, committed_at IS NOT NULL FROM ren_meta_rows', 'SELECT id, v, true FROM ren',
	'... its result is the table, with the metadata filled');
psql_ok($node, q{
SELECT streamwin.drop_query('ren_meta_rows');
SELECT streamwin.drop_source('ren_meta');}, 'the metadata part dropped');
psql_ok($node, q{
SELECT streamwin.drop_query('ren_sum');
SELECT streamwin.drop_query('ren_rows');
SELECT streamwin.drop_source('ren_all');
SELECT streamwin.drop_source('ren_ins');}, 'the rename part dropped');

# A column dropped and added again under its name and type is another
# attribute of the table: the rows read before hold the old column's
# values, which a retraction through the new one would not take back.  The
# source recorded which attribute each of its columns was: the batch that
# meets a change after the new column fails as for a dropped column, with
# nothing moved, and a new query is refused.
psql_ok($node, q{
CREATE TABLE readd (id int PRIMARY KEY, k text, v int);
ALTER TABLE readd REPLICA IDENTITY FULL;
SELECT streamwin.create_table_source('readd_all', 'readd', '{"changes": "all"}');
SELECT streamwin.create_query('readd_sum', 'SELECT k, count(*) AS n, sum(v) AS s FROM readd_all GROUP BY k',
    output_mode => 'update', start => false);
INSERT INTO readd SELECT i, 'k' || i % 3, i FROM generate_series(1, 30) i;
SELECT streamwin.run_batch('readd_sum');
UPDATE readd SET v = v + 100 WHERE id <= 3;
SELECT streamwin.run_batch('readd_sum');
}, 'a changelog source read, then rows updated and read');
results_match($node, 'SELECT k, n, s FROM readd_sum', 'SELECT k, count(*), sum(v) FROM readd GROUP BY k',
	'readd_sum equals plain SQL before the column is dropped');
like($node->safe_psql('postgres', q{SELECT options->>'table_attnums' FROM streamwin.sources WHERE name = 'readd_all'}),
	qr/^\[1, 2, 3\]$/, 'the source recorded the attributes of its columns');
psql_ok($node, q{
ALTER TABLE readd DROP COLUMN v;
ALTER TABLE readd ADD COLUMN v int;
UPDATE readd SET v = id WHERE id > 3;
DELETE FROM readd WHERE id = 10;
}, 'the column dropped and added again, rows updated and deleted');
my $readd_next = q{SELECT sum(o.next_offset) FROM streamwin.query_offsets o
  JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'readd_sum'};
my $readd_before = $node->safe_psql('postgres', $readd_next);
fails_like($node, q{SELECT streamwin.run_batch('readd_sum')},
	qr/column "v" of table "readd" was dropped or renamed/,
	'the changelog query fails at the first change after the column came back');
is($node->safe_psql('postgres', $readd_next), $readd_before, '... and its offsets do not move');
fails_like($node, q{SELECT streamwin.create_query('readd_new', 'SELECT k, sum(v) FROM readd_all GROUP BY k', output_mode => 'update', start => false)},
	qr/column "v" of table "readd" was dropped or renamed/,
	'a new query over the source is refused');
# a new source, made with the old one's options as streamwin.sources shows
# them, records the attributes as they are now, and its query is exact
psql_ok($node, q{
SELECT streamwin.create_table_source('readd_new', 'readd', options) FROM streamwin.sources WHERE name = 'readd_all';
SELECT streamwin.create_query('readd_sum2', 'SELECT k, count(*) AS n, sum(v) AS s FROM readd_new GROUP BY k',
    output_mode => 'update', start => false);
UPDATE readd SET v = v + 1 WHERE id % 2 = 0;
DELETE FROM readd WHERE id = 11;
SELECT streamwin.run_batch('readd_sum2');
}, 'a new source with the old one\'s options, and a query over it');
like($node->safe_psql('postgres', q{SELECT options->>'table_attnums' FROM streamwin.sources WHERE name = 'readd_new'}),
	qr/^\[1, 2, 4\]$/, '... which recorded the column added again');
results_match($node, 'SELECT k, n, s FROM readd_sum2', 'SELECT k, count(*), sum(v) FROM readd GROUP BY k',
	'readd_sum2 equals plain SQL');
psql_ok($node, q{
SELECT streamwin.drop_query('readd_sum');
SELECT streamwin.drop_query('readd_sum2');
SELECT streamwin.drop_source('readd_all');
SELECT streamwin.drop_source('readd_new');}, 'the drop-and-add part dropped');

# ==== 7. starts moved by reset_query ===========================================

psql_ok($node, q{
CREATE TABLE rs (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL);
ALTER TABLE rs REPLICA IDENTITY FULL;
INSERT INTO rs SELECT g, g % 5, g FROM generate_series(1, 200) g;
SELECT streamwin.create_table_source('rs_src', 'rs', '{"changes": "all"}');
SELECT streamwin.create_query('rs_sum', 'SELECT k, count(*) AS n, sum(v) AS s FROM rs_src GROUP BY k',
    output_mode => 'update', start => false);
}, 'part 7: a changelog query over a table of 200 rows, stopped');
my $RS_WANT = 'SELECT k, count(*) AS n, sum(v) AS s FROM rs GROUP BY k';
my $rs_a = store_session($node);
sess_ok($rs_a, "SELECT streamwin.run_available('rs_sum')", 'session A runs rs_sum');
results_match($node, 'SELECT k, n, s FROM rs_sum', $RS_WANT, 'rs_sum equals the table');

psql_ok($node, q{
UPDATE rs SET v = v + 1 WHERE id <= 50;
DELETE FROM rs WHERE id > 190;
SELECT streamwin.reset_query('rs_sum', 'latest');
INSERT INTO rs VALUES (500, 1, 500);
}, 'another session changes the table, resets rs_sum, and inserts a row');
sess_ok($rs_a, "SELECT streamwin.run_available('rs_sum')", 'session A runs rs_sum again');
results_match($node, 'SELECT k, n, s FROM rs_sum', $RS_WANT,
	'rs_sum equals the table: its rows at the reset, then the insert');

psql_ok($node, q{
UPDATE rs SET v = v * 2 WHERE id % 7 = 0;
BEGIN;
SELECT streamwin.reset_query('rs_sum', 'latest');
SELECT streamwin.reset_query('rs_sum', 'latest');
COMMIT;
}, 'after a change, one transaction resets rs_sum twice');
sess_ok($rs_a, "SELECT streamwin.run_available('rs_sum')", 'session A runs rs_sum again');
results_match($node, 'SELECT k, n, s FROM rs_sum', $RS_WANT,
	'rs_sum equals the table: the rows of the second start, once');

psql_ok($node, q{SELECT streamwin.create_query('rs_new', 'SELECT k, count(*) AS n, sum(v) AS s FROM rs_src GROUP BY k',
    output_mode => 'update', start => false)}, 'rs_new: created, never run');
sess_ok($rs_a, q{BEGIN;
SELECT streamwin.reset_query('rs_new', 'latest');
ROLLBACK;}, 'session A resets rs_new and rolls back');
psql_ok($node, 'UPDATE rs SET k = k + 1 WHERE id % 11 = 0', 'a change after it');
sess_ok($rs_a, "SELECT streamwin.run_available('rs_new')", 'session A runs rs_new');
results_match($node, 'SELECT k, n, s FROM rs_new', $RS_WANT,
	'rs_new equals the table: its start is its creation\'s, not the rolled-back reset\'s');
$rs_a->quit;

# A query's own function calling streamwin on the query, within its batch.
psql_ok($node, q{
SELECT streamwin.create_table_source('rs_ins', 'rs');
CREATE TABLE rs_call (call text);
INSERT INTO rs_call VALUES ('run_batch');
CREATE FUNCTION rs_meddle(v int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE call text := (SELECT c.call FROM rs_call c);
BEGIN
  IF call = 'reset_query' THEN
    PERFORM streamwin.reset_query('rs_self', 'latest');
  ELSIF call = 'drop_query' THEN
    PERFORM streamwin.drop_query('rs_self');
  ELSE
    PERFORM streamwin.run_batch('rs_self');
  END IF;
  RETURN v;
END $$;
SELECT streamwin.create_query('rs_self', 'SELECT id, v FROM rs_ins WHERE rs_meddle(v) >= 0', start => false);
INSERT INTO rs VALUES (501, 2, 501);
}, 'rs_self: a transform whose function calls streamwin on rs_self');
for my $call (qw(run_batch reset_query drop_query))
{
	psql_ok($node, "UPDATE rs_call SET call = '$call'");
	fails_like($node, q{SELECT streamwin.run_batch('rs_self')},
		qr/query "rs_self" is running a batch in this session/,
		"rs_self: its function's $call fails the batch with the reason");
}
psql_ok($node, q{
CREATE OR REPLACE FUNCTION rs_meddle(v int) RETURNS int LANGUAGE plpgsql AS 'BEGIN RETURN v; END';
SELECT streamwin.run_batch('rs_self');
}, 'rs_self runs once its function leaves streamwin alone');
is($node->safe_psql('postgres', 'SELECT id, v FROM rs_self'), '501|501', 'rs_self: the row inserted after its creation');
psql_ok($node, q{
SELECT streamwin.drop_query('rs_self', drop_result => true);
SELECT streamwin.drop_query('rs_sum');
SELECT streamwin.drop_query('rs_new');
SELECT streamwin.drop_source('rs_ins');
SELECT streamwin.drop_source('rs_src');}, 'part 7 dropped');

is($node->safe_psql('postgres', "SELECT count(*) FROM pg_replication_slots WHERE plugin = 'streamwin'"),
	'0', 'no streamwin slot is left');
note(sprintf('done after %.1f s', time - $t_start));
$node->stop;

done_testing();
