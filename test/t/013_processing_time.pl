# 013_processing_time.pl: processing-time windows are exact through crashes.
#
# GROUP BY streamwin.tumble(now(), '1 second') counts each message in the
# window of the batch that read it.  now() in a continuous query is the
# batch's own timestamp, recorded as its progress row's started_at; a batch
# replayed after a crash (the worker killed, the server stopped in immediate
# mode) sees that time again, so its rows land in the same windows as the
# first time.  (Were it the transaction's time, the replayed batches would
# land in other windows, and messages would be counted twice.)
#
# Checked against an independent computation: the messages' positions are
# known from the order they are produced in, each committed batch's progress
# row says which positions it read and when it began, so the expected count
# of every window is plain SQL over those; and every message is counted once
# in all.  Checkpoints are rare here (only after the first batch), so that
# each crash makes the workers replay many batches.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use StreamwinTest;

srand(13013);

my $NPART  = 3;
my $EVENTS = 3000;

my $broker = StreamwinTest::Broker->start(topics => { pt => $NPART });
my $node = new_node('ptime', conf => qq{
streamwin.checkpoint_interval = 100000
streamwin.checkpoint_min_interval = 0
streamwin.progress_retention = 100000
restart_after_crash = on
});
my $brokers = $broker->bootstrap;

# Messages [id, k, partition, offset]: partitions round robin, offsets
# counting from 0 in each partition in the order they are produced.
my (@msgs, @rows, %next);
for my $i (0 .. $EVENTS - 1)
{
	my $part = $i % $NPART;
	my $k = 'k' . int(rand(5));
	my $off = $next{$part}++ // 0;
	push @msgs, [ $part, sprintf('{"id": %d, "k": "%s"}', $i, $k) ];
	push @rows, [ $i, $k, $part, $off ];
}
load_table($node, 'msgs', 'id int, k text, part int, off bigint', \@rows);

psql_ok($node, qq{
SELECT streamwin.create_kafka_source('pt_src', '$brokers', 'pt', 'id int, k text, part int, pos bigint',
    options => '{"max_records_per_batch": 40, "metadata": {"part": "partition", "pos": "offset"}}');
SELECT streamwin.create_query('pt_count',
    \$q\$SELECT k, count(*) AS n FROM pt_src GROUP BY streamwin.tumble(now(), '1 second'), k\$q\$,
    output_mode => 'update', trigger_interval => '50 ms');
SELECT streamwin.create_query('pt_closed',
    \$q\$SELECT count(*) AS n, min(id) AS lo FROM pt_src
         GROUP BY streamwin.tumble(current_timestamp, '1 second')\$q\$,
    watermark => '1 second', trigger_interval => '50 ms');
SELECT streamwin.create_query('pt_seen', 'SELECT id, k, part, pos, now() AS seen FROM pt_src',
    trigger_interval => '50 ms');
}, 'processing-time queries in workers');

# The positions each committed batch of a query read, with its timestamp.
sub batches_sql
{
	my ($q) = @_;
	return qq{SELECT p.batch_id, p.started_at, e.key::int AS part, e.value::text::bigint AS next,
       coalesce(lag(e.value::text::bigint) OVER (PARTITION BY e.key ORDER BY p.batch_id), 0) AS first
  FROM streamwin.progress p, jsonb_each(p.offsets) e WHERE p.query = '$q'};
}

# The messages of a query's batches, each with the timestamp of its batch.
sub batch_rows_sql
{
	my ($q) = @_;
	return qq{SELECT m.*, b.batch_id, b.started_at FROM msgs m
  JOIN (@{[batches_sql($q)]}) b ON m.part = b.part AND m.off >= b.first AND m.off < b.next};
}

sub read_all_sql
{
	my ($q) = @_;
	return qq{SELECT sum(o.next_offset) >= $EVENTS FROM streamwin.query_offsets o
	JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = '$q'};
}

sub worker_of
{
	my ($q) = @_;
	return $node->safe_psql('postgres', "SELECT worker_pid FROM streamwin.queries WHERE name = '$q'");
}

sub batch_ids
{
	return $node->safe_psql('postgres',
		"SELECT last_batch_id || '/' || checkpoint_batch_id FROM streamwin.query_catalog WHERE name = 'pt_count'");
}

my $bg = $broker->produce('pt', \@msgs, rate => 600, background => 1);
wait_until($node, "SELECT count(*) FROM streamwin.queries WHERE worker_pid IS NOT NULL",
	'3', 'the three queries have workers');

# (a) SIGKILL a worker: the postmaster restarts the cluster, UNLOGGED state is
# lost, and the batches since the checkpoint are replayed.
wait_until($node, "SELECT last_batch_id > 5 FROM streamwin.query_catalog WHERE name = 'pt_count'",
	't', 'pt_count has run a few batches');
my $victim = worker_of('pt_count');
note('SIGKILL worker ' . $victim . ' at batch/checkpoint ' . batch_ids());
kill 'KILL', $victim;
sleep 1;
wait_until($node, "SELECT count(*) FROM streamwin.queries WHERE worker_pid IS NOT NULL",
	'3', 'workers again after the SIGKILL');
wait_until($node, q{SELECT count(*) FROM streamwin.state_alive a
  JOIN streamwin.query_catalog c USING (query_id) WHERE c.name = 'pt_count'},
	'1', 'pt_count has restored its state after the SIGKILL');

# (b) immediate shutdown while the stream goes on
usleep(1_500_000);
note('immediate stop at batch/checkpoint ' . batch_ids());
$node->stop('immediate');
$node->start;
wait_until($node, "SELECT count(*) FROM streamwin.queries WHERE worker_pid IS NOT NULL",
	'3', 'workers again after the immediate restart');
wait_until($node, q{SELECT count(*) FROM streamwin.state_alive a
  JOIN streamwin.query_catalog c USING (query_id) WHERE c.name = 'pt_count'},
	'1', 'pt_count has restored its state after the immediate restart');
$bg->finish;

for my $q (qw(pt_count pt_closed pt_seen))
{
	wait_until($node, read_all_sql($q), 't', "$q has read the whole topic");
}
my $log = slurp_file($node->logfile);
my $recoveries = () = $log =~ /query "pt_count" lost its state in a crash; restoring the checkpoint of batch 1 /g;
cmp_ok($recoveries, '>=', 2, 'pt_count restored its checkpoint after both crashes');

# The transform: every message once, at the position it was produced to, and
# now() is the timestamp its batch recorded.
results_match($node, 'SELECT id, k, part, pos FROM pt_seen', 'SELECT id, k, part, off FROM msgs',
	'pt_seen: every message once, at the offset it was produced to');
results_match($node, 'SELECT id, seen FROM pt_seen',
	'SELECT id, started_at FROM (' . batch_rows_sql('pt_seen') . ') r',
	"pt_seen: now() is the started_at of the row's batch");

# Every message counted once, whatever windows the batches put it in ...
results_match($node, 'SELECT k, sum(n)::bigint FROM pt_count GROUP BY k',
	'SELECT k, count(*) FROM msgs GROUP BY k', 'pt_count: every message counted once in all');
# ... and each in the window of the batch that read it, replays included.
results_match($node, 'SELECT window_start, window_end, k, n FROM pt_count',
	q{SELECT streamwin.tumble(started_at, '1 second'), streamwin.tumble(started_at, '1 second') + interval '1 second',
	         k, count(*) FROM (} . batch_rows_sql('pt_count') . ') r GROUP BY 1, 2, 3',
	"pt_count: each window counts the messages of the batches that began in it");

# Append mode: the windows the watermark closed are final and exact, and
# every window that ended before it is there.
my $closed = q{SELECT streamwin.tumble(started_at, '1 second') AS window_start,
         streamwin.tumble(started_at, '1 second') + interval '1 second' AS window_end,
         count(*) AS n, min(id) AS lo FROM (} . batch_rows_sql('pt_closed') . ') r GROUP BY 1, 2';
results_match($node, 'SELECT window_start, window_end, n, lo FROM pt_closed',
	"SELECT * FROM ($closed) e WHERE window_end <= (SELECT watermark FROM streamwin.queries WHERE name = 'pt_closed')",
	'pt_closed: the closed windows, exactly');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM pt_closed'), '>', 2,
	'pt_closed: several windows closed');

done_testing();
