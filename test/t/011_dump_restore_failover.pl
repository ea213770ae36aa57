
# 011_dump_restore_failover.pl: databases with running queries survive
# pg_dump and pg_restore, and a failover to a streaming standby, exactly.
#
# streamwin's catalog refers to result, state, checkpoint and dedup tables
# and to owners; pg_dump writes those references by name (regclass,
# regrole) and a restore reads them back as the new objects.  A dump is one
# snapshot, and a batch commits results, state, offsets and its progress
# row together, so restored queries resume exactly where the dumped results
# stop.
#
# A role creates three queries over a 2-partition topic: update mode, append
# mode with a watermark, and a deduplicating transform.  Their workers
# consume chunk 1; the database is dumped twice and each dump restored into
# a new database:
#   restored   pg_dump: everything, the UNLOGGED state included;
#   nostate    pg_dump --no-unlogged-table-data: the state and the marker
#              saying it is intact are left out, so each query's first batch
#              restores its checkpoint and replays the batches since, as
#              after a crash, from the dumped offsets and batch log
#              (streamwin.progress_log).
# After a restart (restored queries start with the server, like any), chunk
# 2 is produced.  It begins with events of chunk 1 sent again, within the
# watermark: the dedup keys must have come through the dump too.  Every
# database, the original included, must then hold exactly chunks 1 and 2:
# results equal plain SQL over the events.
#
# A standby has streamed from the server since the queries were created
# (the restored databases came to it through the WAL).  The server then
# stops, the standby is promoted, and chunk 3 is produced: UNLOGGED tables
# are empty on a promoted standby, so every query recovers from its
# checkpoint, and every database must hold exactly chunks 1 to 3.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min);
use StreamwinTest;

srand(2011);

my $T0    = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $NPART = 2;
my $DELAY = 5_000;
my $PER_CHUNK = 3_000;
my @DBS   = qw(postgres restored nostate);

my $broker = StreamwinTest::Broker->start(topics => { dr => $NPART });
# checkpoints every 3 batches: recoveries restore one and replay after it
my $node = new_node(
	'primary',
	allows_streaming => 1,
	conf             => "shared_buffers = 32MB\nmax_connections = 30\n"
	  . "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n");
my $brokers = $broker->bootstrap;

# Events [id, k, v, ts_ms, partition]: partitions round robin, each in time
# order up to 300 ms (well within the watermark).
my @chunks;
for my $c (0 .. 2)
{
	my @ev;
	for my $i ($c * $PER_CHUNK .. ($c + 1) * $PER_CHUNK - 1)
	{
		push @ev, [ $i, 'k' . int(rand(5)), int(rand(100)), $T0 + $i * 10 - int(rand(300)), $i % $NPART ];
	}
	push @chunks, \@ev;
}
# chunk 2 starts with the last 20 events of chunk 1 again, as a retrying
# producer would send them (same partition: each stays within 300 ms of
# its partition's newest event time, so none is late)
unshift @{ $chunks[1] }, map { [@$_] } @{ $chunks[0] }[ -20 .. -1 ];
unshift @{ $chunks[2] }, map { [@$_] } @{ $chunks[1] }[ -20 .. -1 ];

sub payload
{
	my ($e) = @_;
	return sprintf('{"id": %d, "k": "%s", "v": %d, "ts": "%s"}', $e->[0], $e->[1], $e->[2], ts_text($e->[3]));
}
sub messages { return [ map { [ $_->[4], payload($_) ] } @{ $_[0] } ] }
sub rows { return [ map { [ $_->[0], $_->[1], $_->[2], ts_text($_->[3]) ] } @{ $_[0] } ] }
sub values_list
{
	return join(', ', map { sprintf("(%d, '%s', %d, '%s')", $_->[0], $_->[1], $_->[2], ts_text($_->[3])) } @{ $_[0] });
}

# ---- a role creates three running queries; chunk 1 ----------------------

psql_ok($node, user_role_sql('dora') . qq{
SELECT streamwin.create_kafka_source('drs', '$brokers', 'dr',
    'id int, k text, v int, ts timestamptz', 'json');
GRANT SELECT ON drs TO dora;
}, 'role dora and the source');
psql_ok($node, q{
SELECT streamwin.create_query('d_upd',
    $q$SELECT k, count(*) AS n, sum(v) AS s FROM drs
         GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('d_app',
    $q$SELECT k, count(*) AS n, sum(v) AS s FROM drs
         GROUP BY streamwin.tumble(ts, '10 seconds'), k$q$,
    watermark => '5 seconds', trigger_interval => '100 ms',
    options => '{"idle_timeout": "1 hour"}');
SELECT streamwin.create_query('d_uniq', 'SELECT id, k, v, ts FROM drs',
    dedup_keys => '{id}', watermark => '5 seconds', trigger_interval => '100 ms',
    options => '{"event_time": "ts", "idle_timeout": "1 hour"}');
}, 'dora creates three running queries', extra_params => [ '-U', 'dora' ]);

# A table source, whose replication slot no dump can carry.
psql_ok($node, q{
CREATE TABLE orders (id int, amount int, ts timestamptz);
SELECT streamwin.create_table_source('orders_src', 'orders');
SELECT streamwin.create_query('o_total', 'SELECT id % 2 AS odd, count(*) AS n FROM orders_src GROUP BY 1',
    output_mode => 'complete', start => false);
INSERT INTO orders SELECT g, g, '2024-01-01' FROM generate_series(1, 10) g;
}, 'a table source and a query over it');

# The events so far, in a plain table of the database (dumped with it).
load_table($node, 'ev', 'id int, k text, v int, ts timestamptz', rows($chunks[0]));

# The standby, streaming from here on.
$node->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'base', has_streaming => 1);
$standby->start;

# The append query's watermark once chunks 1..c are in: per partition the
# newest event time minus the delay, the smallest of those.
sub watermark_after
{
	my ($c) = @_;
	my %max;
	for my $e (map { @$_ } @chunks[ 0 .. $c - 1 ])
	{
		$max{ $e->[4] } = $e->[3] if !defined $max{ $e->[4] } || $e->[3] > $max{ $e->[4] };
	}
	return min(values %max) - $DELAY;
}

my $aggs = 'count(*)::bigint AS n, sum(v)::bigint AS s';

# Every query of database $db holds exactly chunks 1..$c (on server $on).
sub check_db
{
	my ($db, $c, $when, $on) = @_;
	my $srv = $on // $node;
	my %o = (dbname => $db);
	wait_results_match($srv, 'SELECT window_start, window_end, k, n, s FROM d_upd',
		windows_sql(table => 'ev', size => 10, keys => 'k', aggs => $aggs),
		"$db: update query equals plain SQL $when", %o);
	my $W = watermark_after($c);
	wait_until($srv,
		"SELECT round(extract(epoch FROM watermark) * 1000) FROM streamwin.queries WHERE name = 'd_app'",
		$W, "$db: append query's watermark reaches " . ts_text($W) . " $when", %o);
	results_match($srv, 'SELECT window_start, window_end, k, n, s FROM d_app',
		'SELECT * FROM (' . windows_sql(table => 'ev', size => 10, keys => 'k', aggs => $aggs)
		  . ") w WHERE window_end <= '@{[ts_text($W)]}'",
		"$db: append query has exactly the closed windows $when", %o);
	wait_results_match($srv, 'SELECT id, k, v, ts FROM d_uniq',
		'SELECT DISTINCT id, k, v, ts FROM ev',
		"$db: dedup transform has every event once $when", %o);
	return;
}

$broker->produce('dr', messages($chunks[0]));
check_db('postgres', 1, 'after chunk 1');

# ---- dump while the workers run; restore twice ---------------------------

my $dir = PostgreSQL::Test::Utils::tempdir();
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/all.dump", '-d', $node->connstr('postgres') ],
	'pg_dump of the database, workers running');
$node->command_ok(
	[ 'pg_dump', '-Fc', '--no-unlogged-table-data', '-f', "$dir/nostate.dump",
		'-d', $node->connstr('postgres') ],
	'pg_dump --no-unlogged-table-data');
for my $r ([ 'restored', 'all' ], [ 'nostate', 'nostate' ])
{
	my ($db, $file) = @$r;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	# one transaction: the launcher looks at every database every 30 s,
	# and must not start workers on a half-restored catalog
	$node->command_ok(
		[ 'pg_restore', '--single-transaction', '--exit-on-error', '-d', $node->connstr($db), "$dir/$file.dump" ],
		"pg_restore --single-transaction into $db");
}

# Every relation and role the restored catalog names exists there.
for my $db (qw(restored nostate))
{
	is( $node->safe_psql(
			$db, q{
SELECT string_agg(DISTINCT x, ', ') FROM (
    SELECT unnest(ARRAY[result_table, state_table, checkpoint_table, dedup_table, dedup_checkpoint])::oid AS t,
           name AS x FROM streamwin.query_catalog
    UNION ALL SELECT relation::oid, name FROM streamwin.source_catalog) r
 WHERE t IS NOT NULL AND t NOT IN (SELECT oid FROM pg_class)}),
		'', "$db: the catalog names only relations that exist there");
	is( $node->safe_psql($db, "SELECT DISTINCT owner FROM streamwin.queries WHERE name LIKE 'd\\_%'"),
		'dora', "$db: the queries still belong to dora");
}
# What each dump holds of the state, its marker, checkpoints and the batch log.
for my $r ([ 'all', 'checkpoint_1 dedup_3 progress_log state_1 state_alive' ],
	[ 'nostate', 'checkpoint_1 progress_log' ])
{
	my ($file, $want) = @$r;
	my ($out, $err) = run_command([ 'pg_restore', '-l', "$dir/$file.dump" ]);
	my @data = sort map { /TABLE DATA \S+ (\S+) / ? $1 : () } split /\n/, $out;
	is( join(' ', grep { /^(checkpoint_1|dedup_3|progress_log|state_1|state_alive)$/ } @data),
		$want, "$file dump: the data of $want");
}

# A restored table source has no slot of its own: its query says so and
# what to do, and dropping it leaves the original database's slot alone.
for my $db (qw(restored nostate))
{
	my ($rc, $out, $err) = $node->psql($db, "SELECT streamwin.run_batch('o_total')");
	like($err, qr/replication slot "streamwin_\d+_\w+" of a streamwin table source belongs to another database.*HINT:  Drop the source and its queries, and create them again/s,
		"$db: a restored table source's query says its slot is not there");
	psql_ok($node, "SELECT streamwin.drop_query('o_total'); SELECT streamwin.drop_source('orders_src');",
		"$db: its query and source can be dropped", dbname => $db);
}
is($node->safe_psql('postgres', "SELECT streamwin.run_batch('o_total')->>'input_rows'"),
	'10', 'the original database still reads its table source');

# ---- the restored queries resume exactly ---------------------------------

# Queries that were running start with the server, in every database.
$node->restart;
$broker->produce('dr', messages($chunks[1]));
$node->safe_psql($_, 'INSERT INTO ev VALUES ' . values_list($chunks[1])) for @DBS;
check_db($_, 2, 'after chunk 2') for @DBS;

my $log = slurp_file($node->logfile);
my $restores = () = $log =~ /lost its state in a crash; restoring the checkpoint/g;
cmp_ok($restores, '>=', 3,
	"nostate: each query restored its checkpoint and replayed from it ($restores restores)");

# A batch run by hand on the standby says it cannot run there (it writes),
# not which UNLOGGED table recovery refuses to read.
{
	my ($src, $sout, $serr) = $standby->psql('postgres', "SELECT streamwin.run_batch('o_total')");
	like($serr, qr/cannot run a batch of query "o_total" on a standby.*HINT:  Run batches on the primary/s,
		'run_batch on the standby says it runs on the primary');
}

# ---- failover: the standby takes over -------------------------------------

$node->wait_for_catchup($standby);
$node->stop('immediate');
$standby->promote;
$broker->produce('dr', messages($chunks[2]));
$standby->safe_psql($_, 'INSERT INTO ev VALUES ' . values_list($chunks[2])) for @DBS;
check_db($_, 3, 'after failover and chunk 3', $standby) for @DBS;
$log = slurp_file($standby->logfile);
$restores = () = $log =~ /lost its state in a crash; restoring the checkpoint/g;
cmp_ok($restores, '>=', 3 * @DBS,
	"the promoted standby restored every query from its checkpoint ($restores restores)");

# PostgreSQL 15 keeps no logical slot on a standby: the table source's query
# says its slot is gone, and what to do.
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT streamwin.run_batch('o_total')");
like($err, qr/replication slot "streamwin_\d+_\w+" of a streamwin table source does not exist.*was a standby.*HINT:  Drop the source and its queries, and create them again/s,
	'after a failover, a table source says its slot is gone');

$standby->stop;
$broker->stop;
done_testing();
