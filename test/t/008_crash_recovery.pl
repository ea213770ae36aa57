# 008_crash_recovery.pl: exactly-once through crashes.
#
# Any crash restart of PostgreSQL (a backend killed with SIGKILL, even one
# unrelated to streamwin, or an immediate shutdown) empties every UNLOGGED
# table, including streamwin's window state, while offsets survive.  This
# test streams events into three running queries and, while they consume,
# repeatedly
#   (a) kills a query worker with SIGKILL,
#   (b) kills an unrelated backend with SIGKILL,
#   (c) stops the server in immediate mode and starts it again,
#   (d) takes the Kafka broker down for a while and brings it back;
# then checks every result table against plain SQL over the same events:
# nothing lost, nothing counted twice.  Some events are sent twice, as a
# retrying producer would: a deduplicating transform must keep each once,
# also through the crashes (its keys are state too).  checkpoint_interval is small so that
# recovery both restores a checkpoint and replays batches after it.
#
# STREAMWIN_CRASH_EVENTS / STREAMWIN_CRASH_ROUNDS make it longer (make soak).
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min);
use Time::HiRes qw(usleep);
use StreamwinTest;

srand(8008);

my $T0     = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $NPART  = 4;
my $DELAY  = 5_000;
my $EVENTS = $ENV{STREAMWIN_CRASH_EVENTS} // 40_000;
my $ROUNDS = $ENV{STREAMWIN_CRASH_ROUNDS} // 2;

my $broker = StreamwinTest::Broker->start(topics => { ev => $NPART });
my $node = new_node('crash');
$node->append_conf('postgresql.conf',
	"streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  . "restart_after_crash = on\n");
$node->restart;
my $brokers = $broker->bootstrap;

# Events [k, v, ts_ms, partition, id]: partition round robin, each
# partition roughly in time order (jitter 400 ms < watermark delay, so none
# is late).  Every 20th event is sent again a few events later, to another
# partition: a duplicate, well within the watermark.
my (@ev, @orig, @msgs);
for my $i (0 .. $EVENTS - 1)
{
	my $e = [ 'k' . int(rand(20)), int(rand(1000)), $T0 + $i * 5 - int(rand(400)), $i % $NPART, $i ];
	push @ev, $e;
	push @orig, $e;
	push @msgs, [ $e->[3], payload($e) ];
	if ($i % 20 == 7)
	{
		my $dup = [ @{ $orig[ $i - 3 ] } ];
		$dup->[3] = ($i + 1) % $NPART;
		push @ev, $dup;
		push @msgs, [ $dup->[3], payload($dup) ];
	}
}
sub payload
{
	my ($e) = @_;
	return sprintf('{"id": %d, "k": "%s", "v": %d, "ts": "%s"}', $e->[4], $e->[0], $e->[1], ts_text($e->[2]));
}
load_table($node, 'ev', 'id int, k text, v int, ts timestamptz',
	[ map { [ $_->[4], $_->[0], $_->[1], ts_text($_->[2]) ] } @ev ]);

my %max;
for my $e (@ev)
{
	$max{ $e->[3] } = $e->[2] if !defined $max{ $e->[3] } || $e->[2] > $max{ $e->[3] };
}
my $W = min(values %max) - $DELAY;

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('ev_src', '$brokers', 'ev',
    'id int, k text, v int, ts timestamptz', options => '{"max_records_per_batch": 500}');
SELECT streamwin.create_query('c_append',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM ev_src
         GROUP BY streamwin.tumble(ts, '10 seconds'), k\$q\$,
    watermark => '5 seconds', trigger_interval => '50 ms',
    options => '{"idle_timeout": "1 hour"}');
SELECT streamwin.create_query('c_hop',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi,
                var_samp(v) AS var, bit_xor(v) AS bx,
                streamwin.approx_count_distinct(id) AS did,
                streamwin.approx_percentile(v, 0.9) AS p90 FROM ev_src
         GROUP BY streamwin.hop(ts, '30 seconds', '10 seconds'), k\$q\$,
    output_mode => 'update', trigger_interval => '50 ms');
SELECT streamwin.create_query('c_total',
    'SELECT k, count(*) AS n, sum(v) AS s, count(DISTINCT v) AS dv FROM ev_src GROUP BY k',
    output_mode => 'complete', trigger_interval => '50 ms');
SELECT streamwin.create_query('c_uniq', 'SELECT id, k, v, ts FROM ev_src',
    dedup_keys => '{id}', watermark => '5 seconds', trigger_interval => '50 ms',
    options => '{"event_time": "ts", "idle_timeout": "1 hour"}');
}, 'four running queries over one source');

sub worker_pids
{
	return grep { /^\d+$/ } split /\n/,
	  $node->safe_psql('postgres', 'SELECT worker_pid FROM streamwin.queries WHERE worker_pid IS NOT NULL');
}

sub consumed
{
	return $node->safe_psql('postgres', 'SELECT coalesce(sum(n), 0) FROM c_total');
}

# Wait until the queries have workers again and each has its state back: a
# crash empties streamwin.state_alive (UNLOGGED) with the state, and a
# worker's restore of its checkpoint marks its query there as it commits.
# A worker has its pid before its first batch: the next crash must not
# come before the restore, each of which is counted below.
sub wait_alive
{
	my ($what) = @_;
	wait_until($node, q{
SELECT count(*) FROM streamwin.queries q JOIN streamwin.query_catalog c USING (name)
 WHERE q.worker_pid IS NOT NULL
   AND EXISTS (SELECT FROM streamwin.state_alive a WHERE a.query_id = c.query_id)},
		'4', "all four queries have workers and their state again $what");
}

my $crashes = 0;
my $outages = 0;
my $bg = $broker->produce('ev', \@msgs, rate => int($EVENTS / 8), background => 1);
wait_alive('at the start');

for my $round (1 .. $ROUNDS)
{
	# (a) SIGKILL a query worker: the postmaster restarts the whole cluster
	usleep(700_000);
	my @pids = worker_pids();
	my $victim = $pids[ int(rand(@pids)) ];
	note("round $round: SIGKILL worker $victim with " . consumed() . " rows counted");
	kill 'KILL', $victim;
	$crashes++;
	sleep 1;
	wait_alive("after killing worker $victim");

	# (b) SIGKILL an unrelated backend
	usleep(500_000);
	my $sleeper = $node->background_psql('postgres');
	my $spid = $sleeper->query_safe('SELECT pg_backend_pid()');
	note("round $round: SIGKILL unrelated backend $spid with " . consumed() . " rows counted");
	kill 'KILL', $spid;
	eval { $sleeper->quit };
	$crashes++;
	sleep 1;
	wait_alive("after killing backend $spid");

	# (c) immediate shutdown and start
	usleep(500_000);
	note("round $round: immediate stop with " . consumed() . " rows counted");
	$node->stop('immediate');
	$node->start;
	$crashes++;
	wait_alive('after an immediate restart');

	# (d) the broker goes away: workers fail and retry, the producer waits
	usleep(300_000);
	note("round $round: broker down with " . consumed() . " rows counted");
	$broker->down;
	sleep 2;
	$broker->up;
	$outages++;
}
$bg->finish;
my $mid = consumed();
note("stream fully produced; $mid rows counted so far");

# What the topic holds, read back by a consumer of the test's own: every
# message sent, and nothing else.  The test producer is idempotent, but
# the test broker (librdkafka's mock cluster) now and then appends a
# message a second time when the producer retries it through an outage;
# such a message is in the topic twice, as it would be from a producer
# without idempotence, and exactly-once means counting it twice.  So the
# events every result is compared with are the topic's.
my %event_of = map { payload($_) => $_ } @ev;
my %sent;
$sent{ $_->[1] }++ for @msgs;
my $topic = $broker->messages('ev', $NPART);
my %held;
my @unknown = grep { !$event_of{ $_->[2] } } @$topic;
$held{ $_->[2] }++ for @$topic;
is(scalar(@unknown), 0, 'the topic holds no message that was not sent');
is(scalar(grep { ($held{$_} // 0) < $sent{$_} } keys %sent), 0, 'the topic holds every message sent');
if (@$topic != @msgs)
{
	note('the test broker holds ' . (@$topic - @msgs) . ' messages a second time;'
		  . ' the expected results count them as often as the topic does');
	@ev = map { [ @{ $event_of{ $_->[2] } }[ 0 .. 2 ], $_->[0], $event_of{ $_->[2] }[4] ] } @$topic;
	$node->safe_psql('postgres', 'DROP TABLE ev');
	load_table($node, 'ev', 'id int, k text, v int, ts timestamptz',
		[ map { [ $_->[4], $_->[0], $_->[1], ts_text($_->[2]) ] } @ev ]);
}

# The dedup transform's positions count the topic's messages once it has
# read as many as the topic holds and sees no more (lag is against the
# high watermarks its last fetch saw, after the producer had finished).
my $read = q{SELECT sum(o.next_offset) FROM streamwin.query_offsets o
	JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'c_uniq'};
wait_until($node,
	"SELECT ($read) >= @{[scalar @$topic]} AND lag = 0 FROM streamwin.queries WHERE name = 'c_uniq'",
	't', 'the dedup transform has read the whole topic');
is($node->safe_psql('postgres', $read), scalar(@$topic), 'the dedup transform read every message of the topic, once');

wait_results_match($node, 'SELECT id, k, v, ts FROM c_uniq',
	'SELECT DISTINCT id, k, v, ts FROM ev',
	'dedup transform: every event once, duplicates dropped, through every crash');

is($node->safe_psql('postgres', 'SELECT coalesce(sum(late_rows_dropped), 0) FROM streamwin.progress'),
	'0', 'no row was late (duplicates are sent well within the watermark)');
my $aggs_append = 'count(*)::bigint AS n, sum(v)::bigint AS s';
# var_samp, bit_xor, approx_count_distinct and approx_percentile keep their
# states as bytea (src/store/aggregate_state.c), merged from panes (the hop is
# 30 s sliding by 10 s), count(DISTINCT v) in c_total its values as an
# array: those are checkpointed and restored like the others, and a sketch
# merged over batches equals the one-pass sketch (ids are sent more than
# once: the duplicates count once)
my $aggs_hop    = 'count(*)::bigint AS n, sum(v)::bigint AS s, min(v) AS lo, max(v) AS hi,'
  . ' var_samp(v) AS var, bit_xor(v) AS bx, streamwin.approx_count_distinct(id) AS did,'
  . ' streamwin.approx_percentile(v, 0.9) AS p90';

wait_results_match($node, 'SELECT k, n, s, dv FROM c_total',
	'SELECT k, count(*)::bigint AS n, sum(v)::bigint AS s, count(DISTINCT v) AS dv FROM ev GROUP BY k',
	'complete mode: totals equal plain SQL over the events');
wait_results_match($node, 'SELECT window_start, window_end, k, n, s, lo, hi, var, bx, did, p90 FROM c_hop',
	windows_sql(table => 'ev', size => 30, slide => 10, keys => 'k', aggs => $aggs_hop),
	'hop, update: every window equals plain SQL over the events');
wait_until($node,
	"SELECT round(extract(epoch FROM watermark) * 1000) FROM streamwin.queries WHERE name = 'c_append'",
	$W, 'append query reaches the final watermark ' . ts_text($W));
results_match($node, 'SELECT window_start, window_end, k, n::bigint, s::bigint FROM c_append',
	'SELECT * FROM (' . windows_sql(table => 'ev', size => 10, keys => 'k', aggs => $aggs_append)
	  . ") w WHERE window_end <= '@{[ts_text($W)]}'",
	'tumble, append: exactly the closed windows, each once');

# The figures the issue asks for, computed, not asserted blindly.
my ($lost, $dup) = split /\|/, $node->safe_psql('postgres', q{
	WITH want AS (SELECT k, count(*) AS n FROM ev GROUP BY k),
	     got AS (SELECT k, n FROM c_total)
	SELECT coalesce(sum(greatest(w.n - coalesce(g.n, 0), 0)), 0),
	       coalesce(sum(greatest(coalesce(g.n, 0) - w.n, 0)), 0)
	FROM want w FULL JOIN got g USING (k)});
my $replays = $node->safe_psql('postgres', 'SELECT count(*) FROM streamwin.query_catalog WHERE checkpoint_batch_id IS NOT NULL');
my $log = slurp_file($node->logfile);
my $restores = () = $log =~ /lost its state in a crash; restoring the checkpoint/g;
cmp_ok($restores, '>=', 4 * $crashes, "state was restored from a checkpoint after every crash ($restores restores)");
print "# crashes survived: $crashes, broker outages: $outages, rows lost: $lost, rows duplicated: $dup\n";
is("$lost/$dup", '0/0', 'no row lost, no row counted twice');

# Checkpoints are spaced by streamwin.checkpoint_min_interval as well as by
# checkpoint_interval (3 here): batches run by hand over the same source
# (500 events each), first with an hour between checkpoints, then none.
sub checkpoint_batch
{
	my ($q) = @_;
	return $node->safe_psql('postgres',
		"SELECT checkpoint_batch_id FROM streamwin.query_catalog WHERE name = '" . ($q // 'c_spacing') . "'");
}
sub set_min_interval
{
	my ($value) = @_;
	psql_ok($node, "ALTER SYSTEM SET streamwin.checkpoint_min_interval = '$value'; SELECT pg_reload_conf();");
	wait_until($node, 'SHOW streamwin.checkpoint_min_interval', $value, "checkpoint_min_interval is $value");
}
psql_ok($node, q{
SELECT streamwin.create_query('c_spacing',
    $q$SELECT k, count(*) AS n FROM ev_src GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    output_mode => 'update', start => false);});
psql_ok($node, q{
SELECT streamwin.create_query('c_spacing_t',
    $q$SELECT id, count(*) AS n FROM ev_src GROUP BY id$q$, output_mode => 'update', start => false);});
set_min_interval('1h');
$node->safe_psql('postgres', "SELECT streamwin.run_batch('c_spacing')" . (";SELECT streamwin.run_batch('c_spacing')" x 6));
is(checkpoint_batch(), '1', 'min interval 1h: 7 batches, only the first one checkpointed');
set_min_interval('0');
$node->safe_psql('postgres', "SELECT streamwin.run_batch('c_spacing')" . (";SELECT streamwin.run_batch('c_spacing')" x 2));
is(checkpoint_batch(), '8', 'min interval 0: the next batch 3 or more after the checkpoint takes one');

# pg_dump holds ACCESS SHARE on every table it dumps, checkpoint tables
# included, for as long as the dump runs.  A state store, and every table
# of state written by the rows that changed, write their checkpoints by row
# location, which that lock does not block: their batches checkpoint as
# usual.  Replacing a checkpoint's whole contents (here a state that does
# not fit in streamwin.state_memory, which the query then keeps in its state
# table) needs ACCESS EXCLUSIVE: batches must not wait for the dump, so
# while the lock is held they skip their checkpoints (statement_timeout
# turns a wait into a failure here), and the next batch after it takes one.
# c_spacing_t has a group per event: 20 batches make 10,000 groups, and
# from then on it runs with state_memory = 1MB, on its table.
$node->safe_psql('postgres', join(';', ("SELECT streamwin.run_batch('c_spacing_t')") x 20));
my $small = "SET streamwin.state_memory = '1MB'; SET statement_timeout = '10s'";
$node->safe_psql('postgres', "$small; SELECT streamwin.run_batch('c_spacing_t')");
like(slurp_file($node->logfile), qr/LOG:  streamwin: the state of query "c_spacing_t" does not fit in streamwin.state_memory/,
	'c_spacing_t: its 10,000 groups do not fit in 1MB, so it runs on its state table');
my $tck = checkpoint_batch('c_spacing_t');
my $dump = $node->background_psql('postgres');
$dump->query_safe(q{
BEGIN;
SELECT format('LOCK TABLE %s IN ACCESS SHARE MODE', c.oid::regclass)
  FROM pg_class c JOIN streamwin.query_catalog q
    ON c.relname = 'checkpoint_' || q.query_id
 WHERE q.name IN ('c_spacing', 'c_spacing_t') AND c.relnamespace = 'streamwin'::regnamespace \gexec
});
my $last = $node->safe_psql('postgres',
	"SELECT last_batch_id FROM streamwin.query_catalog WHERE name = 'c_spacing'");
is( $node->safe_psql('postgres',
		"SET statement_timeout = '10s'; SELECT streamwin.run_batch('c_spacing')->>'batch_id'"
		  . (";SELECT streamwin.run_batch('c_spacing')->>'batch_id'" x 3)),
	join("\n", map { $last + $_ } 1 .. 4), 'batches run while a dump holds the checkpoint table');
is(checkpoint_batch(), $last + 4, 'and a store checkpoints meanwhile, every 3 batches');
is( $node->safe_psql('postgres',
		"$small; SELECT streamwin.run_batch('c_spacing_t')->>'batch_id'"
		  . (";SELECT streamwin.run_batch('c_spacing_t')->>'batch_id'" x 3)),
	join("\n", 22 .. 25), 'batches of the query on its state table run too');
is(checkpoint_batch('c_spacing_t'), $tck, 'and skip their checkpoints');
# A lock that stays would make recovery replay ever more batches: every
# 10 x checkpoint_interval (here 30) batches without a checkpoint, a warning.
my $tlast = 25;
{
	my $more = $tck + 30 - $tlast;
	my ($rc, $out, $err) = $node->psql('postgres',
		join(';', $small, ("SELECT streamwin.run_batch('c_spacing_t')") x $more));
	my @warnings = $err =~ /WARNING:  query "c_spacing_t" has taken no checkpoint for (\d+) batches/g;
	is("@warnings", '30', "$more more batches: one warning, at 30 batches without a checkpoint");
	like($err, qr/DETAIL:  Its checkpoint table streamwin\.checkpoint_\d+ is locked by another session/,
		'the warning names the locked table');
	$tlast += $more;
}
$dump->query_safe('COMMIT');
$dump->quit;
$node->safe_psql('postgres', "$small; SELECT streamwin.run_batch('c_spacing_t')");
is(checkpoint_batch('c_spacing_t'), $tlast + 1, 'the first batch after the dump takes the checkpoint');
is($node->safe_psql('postgres', 'SELECT sum(n) FROM c_spacing_t'),
	$node->safe_psql('postgres', "SELECT sum(input_rows) FROM streamwin.progress WHERE query = 'c_spacing_t'"),
	'c_spacing_t: its counts add up to the events its batches read');

$node->stop;
$broker->stop;
done_testing();
