
# 022_kafka_changelog.pl: Kafka sources with an envelope of changes, against
# a Perl simulation of the messages produced.
#
# A transform that names the change column (SELECT ..., __streamwin_change
# FROM src) appends every change the source makes as a row, so its result
# table is the change stream itself.  Each part produces messages (keys and
# null values included) that it also simulates in Perl, reads them with
# run_batch and run_available from stopped queries, and compares:
#
#   1. envelope debezium: events c, r, u, d with and without the
#      schema/payload wrapper, tombstones (skipped without key columns), malformed events (dead
#      letters with their reasons); with key_columns, each key's row kept:
#      the change rows (a retraction exactly as its row was added, metadata
#      columns included), the table they net to, the inserts, updates and
#      deletes in progress.offsets.  Late rows of both envelopes.  With key
#      columns, events delivered again (a connector's restart), updates
#      without "before", deletes of the key alone, updates of the key,
#      tombstones left alone by compaction (keys wrapped or not) and
#      truncates change an aggregation exactly, in memory and on its state
#      table; without them, a truncate fails the batch.
#   2. envelope upsert: JSON and text keys (the key wins over a value's
#      field), new keys, new versions in one batch and across batches,
#      tombstones of known and unknown keys, bad keys as dead letters; the
#      retraction of each key's last row exactly as it was emitted, the
#      state table, the counts.  A second query runs under
#      streamwin.state_memory = 1MB, with enough keys to run on its state
#      table: the same changes.  Upserts in csv and text format.
#   3. a crash (SIGKILL of a backend) with batches after the last
#      checkpoint: both upsert queries and both aggregations of the keyed
#      Debezium source restore their checkpoint, replay, and go on exactly;
#      a checkpoint table equals its state table.
#   4. creation refusals; a query whose upsert table was dropped by hand
#      fails its batches and reset_query saying so, and drop_query drops
#      it.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $node = new_node('changelog',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  . "restart_after_crash = on\n");
my $broker = StreamwinTest::Broker->start(
	topics => { dbz => 2, dbz_multi => 2, ups => 2, ups_csv => 1, ups_text => 1, dbz_late => 1, ups_late => 1, dbz_keyed => 1,
		dbz_late_k => 1, ups_forms => 1, dbz_types => 1 });
my $brokers = $broker->bootstrap;
my $json = JSON::PP->new->canonical->allow_nonref;
srand(22);

my @regions = ('eu', 'us', 'apac', "s\x{e3}o paulo", 'quo"te');

# The sum of each change count over a query's batches in streamwin.progress.
sub changes_of
{
	my ($q) = @_;
	return $node->safe_psql('postgres', qq{
SELECT coalesce(sum((offsets->'changes'->>'inserts')::bigint), 0) || '/' ||
       coalesce(sum((offsets->'changes'->>'updates')::bigint), 0) || '/' ||
       coalesce(sum((offsets->'changes'->>'deletes')::bigint), 0)
  FROM streamwin.progress WHERE query = '$q'});
}

# ==== 1. Debezium ================================================================

my @dbz_cols = ([ 'id', 'int' ], [ 'amount', 'numeric' ], [ 'region', 'text' ],
	[ 'part', 'int' ], [ 'off', 'bigint' ], [ 'change', 'smallint' ]);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbz', '$brokers', 'dbz',
    'id int, amount numeric, region text, part int, off bigint',
    options => '{"envelope": "debezium", "key_columns": ["id"],
                 "metadata": {"part": "partition", "off": "offset"}}');
SELECT streamwin.create_query('dq', 'SELECT id, amount, region, part, off, __streamwin_change FROM dbz',
    start => false);
}, 'a Debezium source and a transform of its changes');

my %dbz_table;      # id => [amount, region]: the table the events change
my %dbz_at;         # id => [partition, offset]: the message that added its row
my @dbz_next = (0, 0);    # next offset per partition
my (@dbz_msgs, @dbz_rows, @dbz_dead);
my %dbz_count = (i => 0, u => 0, d => 0);
my $dbz_id = 0;

sub image
{
	my ($id) = @_;
	my ($amount, $region) = @{ $dbz_table{$id} };
	return qq({"id": $id, "amount": $amount, "region": ) . $json->encode($region)
	  . ', "description": "__debezium_unavailable_value"}';
}

# One message: to the partition of its key, expecting rows (id, amount,
# region, change; a retraction then the partition and offset its row was
# added by) or a dead letter.  Returns its partition and offset.
sub dbz_message
{
	my ($id, $value, $rows, $dead) = @_;
	my $p = $id % 2;
	my $off = $dbz_next[$p]++;
	push @dbz_msgs, [ $p, qq({"id": $id}), $value ];
	push @dbz_rows, map { [ @$_[ 0 .. 2 ], $_->[4] // $p, $_->[5] // $off, $_->[3] ] } @$rows;
	push @dbz_dead, [ $p, $off, $dead ] if $dead;
	return ($p, $off);
}

# An event of op: before and after are JSON texts or undef (null).
sub dbz_event
{
	my ($op, $before, $after) = @_;
	my $event = sprintf('{"before": %s, "after": %s, "source": {"db": "shop", "table": "orders"}, '
		  . '"op": "%s", "ts_ms": %d}',
		$before // 'null', $after // 'null', $op, 1700000000000 + scalar(@dbz_msgs));
	return rand() < 0.5 ? $event
	  : qq({"schema": {"type": "struct", "optional": false}, "payload": $event});
}

sub dbz_change
{
	my ($op) = @_;
	my @ids = sort { $a <=> $b } keys %dbz_table;
	$op = 'c' if ($op eq 'u' || $op eq 'd') && !@ids;
	my $id = $op eq 'c' || $op eq 'r' ? ++$dbz_id : $ids[ int(rand(@ids)) ];
	my $before = $op eq 'u' || $op eq 'd' ? image($id) : undef;
	# the key's row is retracted as it was added, with that message's metadata
	my @old = $before ? ([ $id, @{ $dbz_table{$id} }, -1, @{ $dbz_at{$id} } ]) : ();
	if ($op eq 'd')
	{
		delete $dbz_table{$id};
		dbz_message($id, dbz_event('d', $before, undef), \@old);
		dbz_message($id, undef, []);    # the tombstone after a delete
		$dbz_count{d}++;
		return;
	}
	$dbz_table{$id} = [ sprintf('%d.%02d', rand(1000), rand(100)), $regions[ int(rand(@regions)) ] ];
	$dbz_at{$id} = [ dbz_message($id, dbz_event($op, $before, image($id)), [ @old, [ $id, @{ $dbz_table{$id} }, 1 ] ]) ];
	$dbz_count{ $op eq 'u' ? 'u' : 'i' }++;
	return;
}

# Malformed events: dead letters, with what the reason must say.
my @dbz_malformed = (
	[ 'not json',                                      qr/invalid JSON at byte 0/ ],
	[ '{"before": null, "after": {"id": 1}}',         qr/Debezium event without "op"/ ],
	[ '{"op": "x", "before": null, "after": null}',   qr/unknown Debezium op "x"/ ],
	[ '{"op": 7, "after": {"id": 1}}',                qr/"op" of a Debezium event must be a string/ ],
	[ '{"op": "u", "before": {"id": 1}, "after": null}', qr/op "u" has no "after" row/ ],
	[ '{"op": "c", "after": "{}"}',                   qr/"after" of a Debezium event must be an object, found a string/ ],
	[ '{"schema": {}, "payload": {"op": "d"}}',       qr/op "d" has no "before" row/ ],
	[ '{"op": "c", "after": {"id": 1, "amount": "lots"}}', qr/invalid input syntax for type numeric.*JSON key "amount" of the message's "after"/ ],
	[ '{"op": "c", "after": {"id": 1}} trailing',      qr/expected the end of the message/ ],
	[ '{"op": "c", "after": {"amount": 3}}',           qr/"after" row has no value for key column "id"/ ],
	[ '{"op": "d", "before": {"id": null, "amount": 3}}', qr/"before" row has no value for key column "id"/ ],
	[ '{"op": "u", "before": {"amount": 3}, "after": {"id": 1, "amount": 2}}', qr/"before" row has no value for key column "id"/ ],
	# Debezium's placeholder for a large value an update left unchanged (the
	# table's REPLICA IDENTITY not FULL) in a column of the source; in one it
	# does not read (every image below has one) it is nothing
	[ '{"op": "u", "before": {"id": 1, "amount": 1, "region": "eu"}, "after": {"id": 1, "amount": 2, "region": "__debezium_unavailable_value"}}',
	  qr/column "region" of the "after" row of a Debezium event holds Debezium's placeholder for a value it did not have.*REPLICA IDENTITY FULL/ ],
);

sub dbz_chunk
{
	my ($n) = @_;
	for (1 .. $n)
	{
		my $r = rand();
		if ($r < 0.08)
		{
			my $m = $dbz_malformed[ int(rand(@dbz_malformed)) ];
			dbz_message(1000 + int(rand(10)), $m->[0], [], $m->[1]);
		}
		else
		{
			dbz_change($r < 0.4 ? 'c' : $r < 0.8 ? 'u' : 'd');
		}
	}
	return;
}

dbz_change('r') for 1 .. 8;    # the snapshot
dbz_chunk(60);
$broker->produce('dbz', \@dbz_msgs, keys => 1);
my $sent = @dbz_msgs;
my $r = run_json($node, "run_batch('dq')");
cmp_ok($r->{input_rows}, '>', 0, 'debezium: a first batch');
dbz_chunk(120);
# every malformed kind at least once
dbz_message(1000, $_->[0], [], $_->[1]) for @dbz_malformed;
dbz_chunk(40);
$broker->produce('dbz', [ @dbz_msgs[ $sent .. $#dbz_msgs ] ], keys => 1);
$r = run_json($node, "run_available('dq')");
is($node->safe_psql('postgres', "SELECT sum(input_rows) FROM streamwin.progress WHERE query = 'dq'"),
	scalar(@dbz_msgs), 'debezium: the batches read every message');

results_match($node, 'SELECT * FROM dq', values_sql(\@dbz_cols, \@dbz_rows),
	'debezium: each event makes its rows: after (+1), the row kept (-1) then after (+1), the row kept (-1)');
results_match($node,
	'SELECT id, amount, region, sum(__streamwin_change) FROM dq GROUP BY 1, 2, 3 HAVING sum(__streamwin_change) <> 0',
	values_sql([ [ 'id', 'int' ], [ 'amount', 'numeric' ], [ 'region', 'text' ], [ 'n', 'bigint' ] ],
		[ map { [ $_, @{ $dbz_table{$_} }, 1 ] } keys %dbz_table ]),
	'debezium: the changes net to the table the events describe');
is(changes_of('dq'), "$dbz_count{i}/$dbz_count{u}/$dbz_count{d}",
	'debezium: progress counts the inserts, updates and deletes');
dead_letters_match($node, 'dbz', \@dbz_dead, 'debezium: malformed events are dead letters that say why; tombstones are not');
is($node->safe_psql('postgres', "SELECT sum(dead_letters) FROM streamwin.progress WHERE query = 'dq'"),
	scalar(@dbz_dead), 'debezium: progress counts the dead letters, not the tombstones');

# Late rows: for a transform, each row of a message is late when it is
# older than the watermark, as an append stream's row is (an aggregation
# judges a changelog's rows by their windows instead, see
# sql/changelog.sql), and an upsert's deletion has no event time.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbz_late', '$brokers', 'dbz_late', 'id int, ts timestamptz',
    options => '{"envelope": "debezium"}');
SELECT streamwin.create_kafka_source('ups_late', '$brokers', 'ups_late', 'id int, ts timestamptz',
    options => '{"envelope": "upsert", "key_columns": ["id"]}');
SELECT streamwin.create_query('dq_late', 'SELECT id, ts, __streamwin_change FROM dbz_late',
    watermark => '1 minute', options => '{"event_time": "ts", "capture_late_rows": true}', start => false);
SELECT streamwin.create_query('uq_late', 'SELECT id, ts, __streamwin_change FROM ups_late',
    watermark => '1 minute', options => '{"event_time": "ts"}', start => false);
}, 'late rows: a Debezium and an upsert source, each with an event time and a watermark');
sub row_json { my ($id, $min) = @_; return defined $min ? qq({"id": $id, "ts": "2024-01-01T10:$min:00Z"}) : 'null' }
$broker->produce('dbz_late', [
	map { [ 0, '1', qq({"op": "c", "after": ) . row_json(@$_) . '}' ] } [1, '00'], [2, '05'], [3, '00'] ], keys => 1);
$broker->produce('ups_late', [ [ 0, '1', row_json(1, '00') ], [ 0, '2', row_json(2, '05') ] ], keys => 1);
run_json($node, "run_batch('$_')") for qw(dq_late uq_late);
# the watermark is now 10:04
$broker->produce('dbz_late', [
	[ 0, '1', '{"op": "u", "before": ' . row_json(1, '00') . ', "after": ' . row_json(1, '01') . '}' ],
	[ 0, '3', '{"op": "d", "before": ' . row_json(3, '00') . '}' ],
	[ 0, '2', '{"op": "u", "before": ' . row_json(2, '05') . ', "after": ' . row_json(2, '06') . '}' ],
	[ 0, '4', '{"op": "d", "before": {"id": 4}}' ],
	# the old row on time, the new one late: the retraction stays, the
	# addition is dropped and counted
	[ 0, '5', '{"op": "u", "before": ' . row_json(5, '05') . ', "after": ' . row_json(5, '01') . '}' ],
	# without key_columns an update's old row comes from "before" alone
	[ 0, '6', '{"op": "u", "before": null, "after": ' . row_json(6, '09') . '}' ] ],
	keys => 1);
$broker->produce('ups_late', [
	[ 0, '1', row_json(1, '01') ], [ 0, '2', undef ], [ 0, '1', row_json(1, '10') ] ], keys => 1);
my $late_d = run_json($node, "run_batch('dq_late')");
my $late_u = run_json($node, "run_batch('uq_late')");
is("$late_d->{late_rows_dropped}/$late_d->{dead_letters}", '3/2',
	'late rows: the Debezium update whose rows are late, the late delete and the late new row of an update are dropped; a delete without the event time and an update without "before" are dead letters');
is($node->safe_psql('postgres', q{SELECT string_agg("offset"::text, ',' ORDER BY "offset") FROM streamwin.late_rows WHERE query = 'dq_late'}),
	'3,4,7', 'late rows: each message with a row dropped as late is captured, the update whose new row alone was late too');
like($node->safe_psql('postgres', q{SELECT error FROM streamwin.dead_letters WHERE source = 'dbz_late' AND "offset" = 8}),
	qr/^Debezium event with op "u" has no "before" row: a source without key_columns retracts an update's old row from it$/,
	'an update without "before" is a dead letter of a Debezium source without key_columns, which says why');
is("$late_u->{late_rows_dropped}/$late_u->{dead_letters}", '1/0',
	'late rows: the late new version of an upsert is dropped; its deletion has no event time');
my $ts = sub { "2024-01-01 10:$_[0]:00+00" };
results_match($node, 'SELECT * FROM dq_late',
	values_sql([ [ 'id', 'int' ], [ 'ts', 'timestamptz' ], [ 'c', 'smallint' ] ],
		[ [ 1, $ts->('00'), 1 ], [ 2, $ts->('05'), 1 ], [ 3, $ts->('00'), 1 ],
		  [ 2, $ts->('05'), -1 ], [ 2, $ts->('06'), 1 ], [ 5, $ts->('05'), -1 ] ]),
	'late rows: the Debezium changes but the late ones');
# With key columns a Debezium source's late rows are an upsert's: a late
# new row is dropped and its key keeps its row; a deletion is never late.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbz_late_k', '$brokers', 'dbz_late_k', 'id int, ts timestamptz',
    options => '{"envelope": "debezium", "key_columns": ["id"]}');
SELECT streamwin.create_query('dkq_late', 'SELECT id, ts, __streamwin_change FROM dbz_late_k',
    watermark => '1 minute', options => '{"event_time": "ts"}', start => false);
}, 'late rows: a Debezium source with key columns');
$broker->produce('dbz_late_k', [
	map { [ 0, $_->[0], qq({"op": "c", "after": ) . row_json(@$_) . '}' ] } [1, '00'], [2, '05'], [3, '06'] ],
	keys => 1);
run_json($node, "run_batch('dkq_late')");
# the watermark is now 10:05
$broker->produce('dbz_late_k', [
	[ 0, '1', '{"op": "u", "before": null, "after": ' . row_json(1, '01') . '}' ],
	[ 0, '2', '{"op": "d", "before": {"id": 2}}' ],
	[ 0, '3', '{"op": "u", "before": null, "after": ' . row_json(3, '07') . '}' ],
	[ 0, '1', '{"op": "u", "before": null, "after": ' . row_json(1, '08') . '}' ] ], keys => 1);
my $late_k = run_json($node, "run_batch('dkq_late')");
is("$late_k->{late_rows_dropped}/$late_k->{dead_letters}", '1/0',
	'late rows, key columns: the late new row of an update is dropped; a delete of the key alone is not late');
results_match($node, 'SELECT * FROM dkq_late',
	values_sql([ [ 'id', 'int' ], [ 'ts', 'timestamptz' ], [ 'c', 'smallint' ] ],
		[ [ 1, $ts->('00'), 1 ], [ 2, $ts->('05'), 1 ], [ 3, $ts->('06'), 1 ],
		  [ 2, $ts->('05'), -1 ], [ 3, $ts->('06'), -1 ], [ 3, $ts->('07'), 1 ],
		  [ 1, $ts->('00'), -1 ], [ 1, $ts->('08'), 1 ] ]),
	'late rows, key columns: the late update left its key as it was; the later one retracts the row kept');

# A truncate without key columns: nothing kept to retract, so the batch
# fails, at every try, and the query stays before the event.
$broker->produce('dbz_late', [ [ 0, undef, '{"op": "t", "before": null, "after": null}' ] ], keys => 1);
my $late_offsets = $node->safe_psql('postgres', q{SELECT last_batch_id FROM streamwin.queries WHERE name = 'dq_late'});
for my $try (1, 2)
{
	fails_like($node, "SELECT streamwin.run_batch('dq_late')",
		qr/Debezium source "dbz_late" has a truncate event at partition 0, offset 9\n.*DETAIL:  Without key_columns the source keeps no rows, so its queries cannot retract the rows the truncate deleted\.\n.*HINT:  Give the source key_columns/,
		"a truncate event fails a batch of a Debezium source without key columns, loudly (try $try)");
}
is($node->safe_psql('postgres', q{SELECT last_batch_id FROM streamwin.queries WHERE name = 'dq_late'}), $late_offsets,
	'... and the query stays before it');

# With key columns too, a truncate on a topic of two partitions: it has no
# key, so it is in order with the other events only in its own partition,
# and the rows it deleted are not known.  The batch fails, at every try.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbz_multi', '$brokers', 'dbz_multi', 'id int, ts timestamptz',
    options => '{"envelope": "debezium", "key_columns": ["id"]}');
SELECT streamwin.create_query('dmq', 'SELECT id, ts FROM dbz_multi', start => false);
}, 'a Debezium source with key columns over a topic of two partitions');
$broker->produce('dbz_multi', [
	(map { [ $_ % 2, $_, qq({"op": "c", "after": ) . row_json($_, '00') . '}' ] } 1 .. 4),
	[ 1, undef, '{"op": "t", "before": null, "after": null}' ] ], keys => 1);
for my $try (1, 2)
{
	fails_like($node, "SELECT streamwin.run_batch('dmq')",
		qr/Debezium source "dbz_multi" has a truncate event at partition 1, offset 2\n.*DETAIL:  The source reads 2 partitions of the topic, and a truncate event is in order with the table's other events only within one/,
		"a truncate event on a topic of two partitions fails the batch, loudly (try $try)");
}
is($node->safe_psql('postgres', q{SELECT last_batch_id FROM streamwin.queries WHERE name = 'dmq'}), '0',
	'... and the query stays before it');
psql_ok($node, "SELECT streamwin.drop_query('dmq'); SELECT streamwin.drop_source('dbz_multi');",
	'the query and its source dropped');
results_match($node, 'SELECT * FROM uq_late',
	values_sql([ [ 'id', 'int' ], [ 'ts', 'timestamptz' ], [ 'c', 'smallint' ] ],
		[ [ 1, $ts->('00'), 1 ], [ 2, $ts->('05'), 1 ], [ 2, $ts->('05'), -1 ], [ 1, $ts->('00'), -1 ],
		  [ 1, $ts->('10'), 1 ] ]),
	'late rows: the upsert changes but the late one, which left its key as it was');

# With key columns each key's row is kept, and an event is a new version or
# a deletion of its key: Debezium delivers at least once (a connector's
# restart sends events again), and without REPLICA IDENTITY FULL an update
# has no "before" and a delete's holds the key alone.  An aggregation over
# such events, in memory and on its state table (state_memory 1MB, rows of
# 300 bytes), against the same aggregation of the table the events leave.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbz_keyed', '$brokers', 'dbz_keyed',
    'id int, amount numeric, region text, pad text',
    options => '{"envelope": "debezium", "key_columns": ["id"], "max_records_per_batch": 700}');
SELECT streamwin.create_query('dk', 'SELECT region, count(*) AS n, sum(amount) AS s, min(amount) AS lo,
    max(amount) AS hi, max(length(pad)) AS pad FROM dbz_keyed GROUP BY region',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('dk_table', 'SELECT region, count(*) AS n, sum(amount) AS s, min(amount) AS lo,
    max(amount) AS hi, max(length(pad)) AS pad FROM dbz_keyed GROUP BY region',
    output_mode => 'update', start => false);
}, 'debezium with key columns: a source and two aggregations of it');
my $dk_small = store_session($node);
sess_ok($dk_small, "SET streamwin.state_memory = '1MB'");

my %dk_table;    # id => [amount, region, pad]
my @dk_msgs;     # [0, key, value], all in one partition, in order
my $dk_next = 0;
sub dk_row
{
	my ($id, $full) = @_;
	return qq({"id": $id}) unless $full;
	my ($amount, $region, $pad) = @{ $dk_table{$id} };
	return sprintf('{"id": %d, "amount": %s, "region": %s, "pad": "%s"}', $id, $amount, $json->encode($region), $pad);
}
sub dk_new_row
{
	my ($id) = @_;
	$dk_table{$id} = [ sprintf('%d.%02d', rand(1000), rand(100)), $regions[ int(rand(@regions)) ],
		'p' x (rand() < 0.9 ? 300 : 10) ];
	return;
}
# An event of op on key id (its message key); a delete is followed by its
# tombstone, as Debezium sends it.
sub dk_event
{
	my ($op, $id, $before, $after) = @_;
	push @dk_msgs, [ 0, qq({"id": $id}),
		sprintf('{"before": %s, "after": %s, "op": "%s"}', $before // 'null', $after // 'null', $op) ];
	push @dk_msgs, [ 0, qq({"id": $id}), undef ] if $op eq 'd';
	return;
}
sub dk_changes
{
	my ($n) = @_;
	for (1 .. $n)
	{
		# (sorted: the same changes every run; none left: an insert)
		my @ids = sort { $a <=> $b } keys %dk_table;
		my $id = $ids[ int(rand(@ids)) ];
		my $r = @ids ? rand() : 0;
		if ($r < 0.2)
		{
			my $new = 1 + max_id();
			dk_new_row($new);
			dk_event('c', $new, undef, dk_row($new, 1));
		}
		elsif ($r < 0.5)
		{
			# an update: "before" whole, or none (REPLICA IDENTITY DEFAULT)
			my $before = rand() < 0.5 ? dk_row($id, 1) : undef;
			dk_new_row($id);
			dk_event('u', $id, $before, dk_row($id, 1));
		}
		elsif ($r < 0.6)
		{
			# an update of the key: its old key goes
			my $new = 1 + max_id();
			my $before = dk_row($id, 1);
			$dk_table{$new} = delete $dk_table{$id};
			$dk_table{$new}[0] += 1;
			dk_event('u', $new, $before, dk_row($new, 1));
		}
		else
		{
			# a delete: "before" whole, or the key alone
			my $before = dk_row($id, rand() < 0.5);
			delete $dk_table{$id};
			dk_event('d', $id, $before, undef);
		}
	}
	return;
}
sub max_id { my $m = 0; $m = $_ > $m ? $_ : $m for keys %dk_table; return $m }
sub dk_send
{
	$broker->produce('dbz_keyed', [ @dk_msgs[ $dk_next .. $#dk_msgs ] ], keys => 1);
	$dk_next = @dk_msgs;
	return;
}
# The inserts, updates and deletes the messages sent make, replayed in
# order over the keys that have a row, as the upsert operator counts them.
sub dk_counts
{
	my (%kept, %n);
	$n{$_} = 0 for qw(i u d);
	for my $m (@dk_msgs[ 0 .. $dk_next - 1 ])
	{
		unless (defined $m->[2])
		{
			# a tombstone: its key's row goes, if it has one
			my $k = $json->decode($m->[1]);
			$k = $k->{payload} if exists $k->{payload};
			$n{d}++ if delete $kept{ $k->{id} };
			next;
		}
		my $e = $json->decode($m->[2]);
		if ($e->{op} eq 't')
		{
			$n{d} += keys %kept;
			%kept = ();
			next;
		}
		my ($before, $after) = map { defined $_ ? $_->{id} : undef } @$e{qw(before after)};
		if ($e->{op} eq 'd' || ($e->{op} eq 'u' && defined $before && $before != $after))
		{
			$n{d}++ if delete $kept{$before};
			next if $e->{op} eq 'd';
		}
		$n{ $kept{$after} ? 'u' : 'i' }++;
		$kept{$after} = 1;
	}
	return "$n{i}/$n{u}/$n{d}";
}

sub dk_check
{
	my ($when) = @_;
	run_json($node, "run_available('dk')");
	sess_ok($dk_small, "SELECT streamwin.run_available('dk_table') IS NOT NULL");
	my $table = values_sql([ [ 'amount', 'numeric' ], [ 'region', 'text' ], [ 'pad', 'text' ] ],
		[ map { $dk_table{$_} } sort { $a <=> $b } keys %dk_table ]);
	for my $q (qw(dk dk_table))
	{
		results_match($node, "SELECT region, n, s, lo, hi, pad FROM $q",
			"SELECT region, count(*), sum(amount), min(amount), max(amount), max(length(pad)) FROM ($table) t GROUP BY region",
			"debezium with key columns, $q $when: the aggregation of the table the events leave");
		is(changes_of($q), dk_counts(), "debezium with key columns, $q $when: progress counts the changes to the rows kept");
	}
	return;
}

# the snapshot, then changes, read in batches of 700
for my $id (1 .. 4000)
{
	dk_new_row($id);
	dk_event('r', $id, undef, dk_row($id, 1));
}
dk_changes(500);
dk_send();
dk_check('after a snapshot and changes');
cmp_ok(log_count($node, qr/the upsert keys of query "dk_table" do not fit in streamwin\.state_memory/),
	'>', 0, 'debezium with key columns: dk_table does not fit in 1MB');
is(log_count($node, qr/the upsert keys of query "dk" do not fit/), 0, 'debezium with key columns: dk stays in memory');

# a connector's restart: the last 400 messages again (deletes of keys gone
# included), a snapshot of 100 rows again, then more changes
my @again = @dk_msgs[ $#dk_msgs - 399 .. $#dk_msgs ];
push @dk_msgs, @again;
my @some = (sort { $a <=> $b } keys %dk_table)[ 0 .. 99 ];
dk_event('r', $_, undef, dk_row($_, 1)) for @some;
dk_changes(300);
dk_send();
dk_check('after events delivered again');

# a compacted topic: of some keys' deletes only the tombstone is left (the
# delete event gone before the query read it), half of their keys in Kafka
# Connect's schema/payload wrapper; the tombstones of keys already deleted
# change nothing
my @gone = (sort { $a <=> $b } keys %dk_table)[ 0 .. 19 ];
for my $i (0 .. $#gone)
{
	my $id = $gone[$i];
	push @dk_msgs, [ 0, $i % 2 ? qq({"schema": {"type": "struct"}, "payload": {"id": $id}}) : qq({"id": $id}), undef ];
	delete $dk_table{$id};
}
push @dk_msgs, [ 0, qq({"id": $gone[0]}), undef ];
dk_send();
dk_check('after tombstones alone');

# a truncate (Debezium's op t, no key): every key's row goes; then a new
# snapshot and changes, and a truncate and more in one batch
ok(table_mode_sql_upsert('dk_table'), 'debezium with key columns: dk_table runs on its state table');
push @dk_msgs, [ 0, undef, '{"before": null, "after": null, "op": "t"}' ];
%dk_table = ();
dk_send();
dk_check('after a truncate');
for my $id (5001 .. 5500)
{
	dk_new_row($id);
	dk_event('r', $id, undef, dk_row($id, 1));
}
dk_changes(100);
push @dk_msgs, [ 0, undef, '{"before": null, "after": null, "op": "t"}' ];
%dk_table = ();
dk_new_row($_), dk_event('c', $_, undef, dk_row($_, 1)) for 6001 .. 6050;
dk_changes(50);
dk_send();
dk_check('after a snapshot, changes, a truncate and changes');

# ==== 2. upsert ================================================================

my @ups_cols = ([ 'id', 'int' ], [ 'amount', 'numeric' ], [ 'note', 'text' ],
	[ 'part', 'int' ], [ 'off', 'bigint' ], [ 'change', 'smallint' ]);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('ups', '$brokers', 'ups',
    'id int, amount numeric, note text, part int, off bigint',
    options => '{"envelope": "upsert", "key_columns": ["id"],
                 "metadata": {"part": "partition", "off": "offset"},
                 "max_records_per_batch": 1000}');
SELECT streamwin.create_query('uq', 'SELECT id, amount, note, part, off, __streamwin_change FROM ups',
    start => false);
SELECT streamwin.create_query('uq_table', 'SELECT id, amount, note, part, off, __streamwin_change FROM ups',
    start => false);
}, 'an upsert source and two transforms of its changes');
my $small = store_session($node);
sess_ok($small, "SET streamwin.state_memory = '1MB'");

my %ups_table;    # id => [amount, note, part, off]: each key's last row
my @ups_next = (0, 0);
my (@ups_msgs, @ups_rows, @ups_dead);
my %ups_count = (i => 0, u => 0, d => 0);

# A message of key id (undef: a bad key, text $bad) with value (undef: a
# tombstone), as the upsert operator must turn it into changes.
sub ups_message
{
	my ($id, $value, %o) = @_;
	my $p = defined $id ? $id % 2 : 0;
	my $off = $ups_next[$p]++;
	# the key as an object, as its text, or in Kafka Connect's wrapper around
	# the object or (ExtractField) around the plain value, a number or a string
	my @forms = (qq({"id": $id}), "$id", qq( { "id" : $id } ),
		qq({"schema": {"type": "struct"}, "payload": {"id": $id}}),
		qq({"schema": {"type": "int32", "optional": false}, "payload": $id}),
		qq({"schema": null, "payload": "$id"}));
	my $key = exists $o{key} ? $o{key} : $forms[ int(rand(@forms)) ];
	push @ups_msgs, [ $p, $key, $value ];
	if ($o{dead})
	{
		push @ups_dead, [ $p, $off, $o{dead} ];
		return;
	}
	my $old = $ups_table{$id};
	push @ups_rows, [ $id, @$old, -1 ] if $old;
	if (defined $value)
	{
		$ups_table{$id} = [ $o{amount}, $o{note}, $p, $off ];
		push @ups_rows, [ $id, @{ $ups_table{$id} }, 1 ];
		$ups_count{ $old ? 'u' : 'i' }++;
	}
	elsif ($old)
	{
		delete $ups_table{$id};
		$ups_count{d}++;
	}
	return;
}

# A new version of key id: the value's own "id", if any, loses to the key.
sub ups_version
{
	my ($id, $note) = @_;
	my $amount = sprintf('%d.%d', rand(500), rand(10));
	$note //= rand() < 0.2 ? undef : "n" . int(rand(1000));
	my $value = sprintf('{%s"amount": %s, "note": %s}',
		rand() < 0.3 ? '"id": 999999, ' : '', $amount, $json->encode($note));
	ups_message($id, $value, amount => $amount, note => $note);
	return;
}

sub ups_chunk
{
	my ($n, $keys) = @_;
	for (1 .. $n)
	{
		my $r = rand();
		my $id = 1 + int(rand($keys));
		if ($r < 0.04)
		{
			my @bad = (
				[ undef,        qr/message has no key/ ],
				[ '{"x": 1}',   qr/message key has no value for key column "id"/ ],
				[ 'abc',        qr/invalid input syntax for type integer.*the message's key, for column "id"/ ],
				[ '{"id": "x"}', qr/invalid input syntax for type integer.*JSON key "id" of the message's key/ ],
				# Connect's bytes are base64, its logical types texts of their own
				[ '{"schema": {"type": "bytes"}, "payload": "AQI="}', qr/Kafka Connect schema is of type "bytes"/ ],
				[ '{"schema": {"type": "int32", "name": "org.apache.kafka.connect.data.Date"}, "payload": 7}',
					qr/Kafka Connect schema has a logical type/ ]);
			my $bad = $bad[ int(rand(@bad)) ];
			ups_message(undef, '{"amount": 1}', key => $bad->[0], dead => $bad->[1]);
		}
		elsif ($r < 0.07)
		{
			ups_message($id, '{"amount": 1', dead => qr/invalid JSON/);
		}
		elsif ($r < 0.25)
		{
			ups_message($id, undef);    # a tombstone, of a known key or not
		}
		else
		{
			ups_version($id);
		}
	}
	return;
}

# Produce what was simulated since, then run batches of both queries.
my $ups_sent = 0;
sub ups_send
{
	$broker->produce('ups', [ @ups_msgs[ $ups_sent .. $#ups_msgs ] ], keys => 1);
	$ups_sent = @ups_msgs;
	return;
}

sub ups_check
{
	my ($when, @queries) = @_;
	# a batch reads what the consumer has fetched: read to the end first
	run_json($node, "run_available('uq')");
	sess_ok($small, "SELECT streamwin.run_available('uq_table') IS NOT NULL");
	for my $q (@queries)
	{
		results_match($node, "SELECT * FROM $q", values_sql(\@ups_cols, \@ups_rows),
			"upsert $q $when: each key's last row retracted, exactly as emitted, then the new one");
		my $table = $node->safe_psql('postgres',
			"SELECT plan->>'upsert_table' FROM streamwin.query_catalog WHERE name = '$q'");
		results_match($node, "SELECT id, amount, note, part, off FROM streamwin.$table",
			values_sql([ @ups_cols[ 0 .. 4 ] ], [ map { [ $_, @{ $ups_table{$_} } ] } keys %ups_table ]),
			"upsert $q $when: its state table holds each key's last row");
		is(changes_of($q), "$ups_count{i}/$ups_count{u}/$ups_count{d}",
			"upsert $q $when: progress counts inserts, updates (known keys) and deletes");
		is($node->safe_psql('postgres',
				"SELECT state_rows FROM streamwin.progress WHERE query = '$q' ORDER BY batch_id DESC LIMIT 1"),
			scalar(keys %ups_table), "upsert $q $when: the last batch's state rows are the keys kept");
	}
	return;
}

# Small batches: keys change several times in one batch and across batches.
for my $chunk (1 .. 6)
{
	ups_chunk(40, 12);
	ups_send();
	run_json($node, "run_batch('uq')");
	sess_ok($small, "SELECT streamwin.run_batch('uq_table') IS NOT NULL");
}
ups_check('after small batches', 'uq', 'uq_table');
dead_letters_match($node, 'ups', \@ups_dead, 'upsert: bad keys and values are dead letters that say why');

# Many keys with large rows: uq_table's no longer fit in 1MB.
ups_version(100 + $_, 'x' x 400) for 1 .. 5000;
ups_chunk(200, 40);
ups_send();
run_json($node, "run_available('uq')");
sess_ok($small, "SELECT streamwin.run_available('uq_table') IS NOT NULL");
# then changes to big and small keys, on the table
ups_chunk(300, 5100);
ups_send();
run_json($node, "run_available('uq')");
sess_ok($small, "SELECT streamwin.run_available('uq_table') IS NOT NULL");
cmp_ok(log_count($node, qr/the upsert keys of query "uq_table" do not fit in streamwin\.state_memory/),
	'>', 0, 'upsert: uq_table does not fit in 1MB');
ok(table_mode_sql_upsert('uq_table'), 'upsert: uq_table runs on its state table');
is(log_count($node, qr/the upsert keys of query "uq" do not fit/), 0, 'upsert: uq stays in memory');
ups_check('after 5,000 keys more', 'uq', 'uq_table');

sub table_mode_sql_upsert
{
	my ($q) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) > 0 FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = 'streamwin'::regnamespace
   AND c.relname = (SELECT plan->>'upsert_table' FROM streamwin.query_catalog WHERE name = '$q')})
	  eq 't';
}

# Upserts in csv and text: the value is the other columns.
$broker->produce('ups_csv', [
	[ 0, '1', '5.5,first' ], [ 0, '2', '7,' ], [ 0, '1', '6,"se,cond"' ],
	[ 0, '2', undef ], [ 0, '3', undef ], [ 0, '1', '1,2,3' ], [ 0, '2', '8,back' ] ], keys => 1);
$broker->produce('ups_text', [
	[ 0, 'a', 'hello' ], [ 0, '{"k": "b"}', 'world' ], [ 0, 'a', 'again' ], [ 0, 'b', undef ] ], keys => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('ups_csv', '$brokers', 'ups_csv', 'id int, amount numeric, note text',
    format => 'csv', options => '{"envelope": "upsert", "key_columns": ["id"]}');
SELECT streamwin.create_kafka_source('ups_text', '$brokers', 'ups_text', 'k text, line text',
    format => 'text', options => '{"envelope": "upsert", "key_columns": ["k"]}');
SELECT streamwin.create_query('uq_csv', 'SELECT id, amount, note, __streamwin_change FROM ups_csv', start => false);
SELECT streamwin.create_query('uq_text', 'SELECT k, line, __streamwin_change FROM ups_text', start => false);
SELECT streamwin.run_available('uq_csv') IS NOT NULL, streamwin.run_available('uq_text') IS NOT NULL;
}, 'upsert sources in csv and text');
results_match($node, 'SELECT * FROM uq_csv',
	values_sql([ [ 'id', 'int' ], [ 'amount', 'numeric' ], [ 'note', 'text' ], [ 'c', 'smallint' ] ],
		[ [ 1, '5.5', 'first', 1 ], [ 2, 7, undef, 1 ], [ 1, '5.5', 'first', -1 ], [ 1, 6, 'se,cond', 1 ],
		  [ 2, 7, undef, -1 ], [ 2, 8, 'back', 1 ] ]),
	'upsert in csv: the fields are the columns but the key, a record of the wrong length is a dead letter');
results_match($node, 'SELECT * FROM uq_text',
	values_sql([ [ 'k', 'text' ], [ 'line', 'text' ], [ 'c', 'smallint' ] ],
		[ [ 'a', 'hello', 1 ], [ 'b', 'world', 1 ], [ 'a', 'hello', -1 ], [ 'a', 'again', 1 ],
		  [ 'b', 'world', -1 ] ]),
	'upsert in text: a key that is a JSON object or its text, the payload the other column');

# Keys equal but different (numeric 1.0 and 1.00): a new version keeps its
# key as it gives it, and a retraction takes back the key its row was added
# with, in memory (uf, uf_mem) and on the state table (uf_table, whose 3,000
# keys of 400 bytes do not fit in its session's 1MB of streamwin.state_memory).
# Plain SQL over the upsert table groups by the key's text.
my $pad = 'x' x 400;
$broker->produce('ups_forms', [ [ 0, '{"id": 1.0}', '{"qty": 5}' ],
	map { [ 0, qq({"id": $_}), qq({"qty": 1, "note": "$pad"}) ] } 1000 .. 2999 ], keys => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('uf_src', '$brokers', 'ups_forms', 'id numeric, qty int, note text',
    options => '{"envelope": "upsert", "key_columns": ["id"]}');
} . join('', map { qq{SELECT streamwin.create_query('$_', 'SELECT id::text AS k, count(*) AS n, sum(qty) AS s }
	  . qq{FROM uf_src GROUP BY 1', output_mode => 'update', start => false);\n} } qw(uf uf_mem uf_table)),
	'an upsert source with a numeric key, and three queries over it');
my $uf_mem = store_session($node);
for my $step ([], [ [ 0, '{"id": 1.00}', '{"qty": 7}' ] ], [ [ 0, '{"id": 1.000}', undef ] ],
	[ [ 0, '{"id": 5.0}', '{"qty": 2}' ], [ 0, '{"id": 5.00}', '{"qty": 4}' ] ])
{
	$broker->produce('ups_forms', $step, keys => 1) if @$step;
	run_json($node, "run_available('uf')");
	sess_ok($uf_mem, "SELECT streamwin.run_available('uf_mem') IS NOT NULL");
	sess_ok($small, "SELECT streamwin.run_available('uf_table') IS NOT NULL");
}
ok(table_mode_sql_upsert('uf_table'), 'upsert: uf_table runs on its state table');
for my $q ('uf', 'uf_mem', 'uf_table')
{
	results_match($node, "SELECT k, n, s FROM $q",
		q{SELECT g::text, 1::bigint, 1::bigint FROM generate_series(1000, 2999) g UNION ALL VALUES ('5.00', 1, 4)},
		"upsert $q: a key's new form replaces its old one, and a retraction takes back the form its row was added with");
}
$uf_mem->quit;

# Debezium's placeholder in a column of any type that takes its text: a
# char(30) (padded), a jsonb (as a JSON string), an xml, a tsvector; each
# such event is a dead letter naming the column, and the key keeps its row.
my $ph = '"__debezium_unavailable_value"';
my @dbz_types = (
	'{"op": "c", "after": {"id": 1, "c": "a", "j": {"k": 1}, "x": "<a/>", "t": "cat"}}',
	map({ my $col = $_; my %v = (c => '"b"', j => '{"k": 2}', x => '"<b/>"', t => '"dog"'); $v{$col} = $ph;
		'{"op": "u", "before": {"id": 1, "c": "a", "j": {"k": 1}, "x": "<a/>", "t": "cat"}, "after": {"id": 1, '
		  . join(', ', map { qq("$_": $v{$_}) } qw(c j x t)) . '}}' } qw(c j x t)),
	'{"op": "u", "before": {"id": 1, "c": "a", "j": {"k": 1}, "x": "<a/>", "t": "cat"}, "after": {"id": 1, "c": "e", "j": {"k": 5}, "x": "<e/>", "t": "eel"}}');
$broker->produce('dbz_types', [ map { [ 0, '{"id": 1}', $_ ] } @dbz_types ], keys => 1);
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbz_types_src', '$brokers', 'dbz_types', 'id int, c char(30), j jsonb, x xml, t tsvector',
    options => '{"envelope": "debezium", "key_columns": ["id"]}');
SELECT streamwin.create_query('dbz_types_rows', 'SELECT id, c, j, x::text AS x, t FROM dbz_types_src', start => false);
SELECT streamwin.run_available('dbz_types_rows') IS NOT NULL;
}, 'a Debezium source of columns of several types');
results_match($node, 'SELECT id, c::text, j::text, x, t::text FROM dbz_types_rows',
	q{VALUES (1, 'e', '{"k": 5}', '<e/>', '''eel''')}, "the placeholder's events change no row");
is($node->safe_psql('postgres', q{SELECT string_agg(substring(error from '^column "(\w+)"'), ',' ORDER BY "offset")
 FROM streamwin.dead_letters WHERE source = 'dbz_types_src'}), 'c,j,x,t',
	'each event holding the placeholder is a dead letter naming its column');

# ==== 3. a crash after the last checkpoint =======================================

# Batches until each query has batches since its last checkpoint.
for my $i (1 .. 10)
{
	my $behind = $node->safe_psql('postgres', q{
SELECT bool_and(last_batch_id > checkpoint_batch_id) FROM streamwin.query_catalog
 WHERE name IN ('uq', 'uq_table')});
	last if $behind eq 't';
	ups_chunk(30, 40);
	ups_send();
	run_json($node, "run_batch('uq')");
	sess_ok($small, "SELECT streamwin.run_batch('uq_table') IS NOT NULL");
}
is($node->safe_psql('postgres', q{
SELECT bool_and(last_batch_id > checkpoint_batch_id) FROM streamwin.query_catalog
 WHERE name IN ('uq', 'uq_table')}), 't', 'crash: both queries have batches since their checkpoint');
eval { $small->quit };
my $dk_behind = q{SELECT bool_and(last_batch_id > checkpoint_batch_id) FROM streamwin.query_catalog
 WHERE name IN ('dk', 'dk_table')};
for my $i (1 .. 10)
{
	last if $node->safe_psql('postgres', $dk_behind) eq 't';
	dk_changes(40);
	dk_send();
	run_json($node, "run_batch('dk')");
	sess_ok($dk_small, "SELECT streamwin.run_batch('dk_table') IS NOT NULL");
}
is($node->safe_psql('postgres', $dk_behind), 't',
	'crash: both queries of the Debezium source with key columns have batches since their checkpoint');
eval { $dk_small->quit };

crash_by_sigkill($node, 'crash');

# the changes since, then the rest: on keys changed before and after the checkpoint
ups_chunk(150, 40);
ups_chunk(50, 5100);
ups_send();
$small = store_session($node);
sess_ok($small, "SET streamwin.state_memory = '1MB'");
my $uq_last = q{SELECT last_batch_id FROM streamwin.query_catalog WHERE name = 'uq'};
my $uq_before = $node->safe_psql('postgres', $uq_last);
my $uq_run = run_json($node, "run_available('uq')");
is($uq_run->{batches}, $node->safe_psql('postgres', $uq_last) - $uq_before,
	'crash: run_available counts the batches it added, not those it replayed');
sess_ok($small, "SELECT streamwin.run_available('uq_table') IS NOT NULL");
for my $q (qw(uq uq_table))
{
	cmp_ok(log_count($node, qr/query "$q" lost its state in a crash; restoring the checkpoint/), '>', 0,
		"crash: $q restored its checkpoint");
}
ups_check('after the crash', 'uq', 'uq_table');
dk_changes(200);
dk_send();
$dk_small = store_session($node);
sess_ok($dk_small, "SET streamwin.state_memory = '1MB'");
dk_check('after the crash');
for my $q (qw(dk dk_table))
{
	cmp_ok(log_count($node, qr/query "$q" lost its state in a crash; restoring the checkpoint/), '>', 0,
		"crash: $q restored its checkpoint");
}
eval { $dk_small->quit };

# A checkpoint's table equals the state table, row for row (the store writes
# only what changed since the last one, deleted keys included).
for my $q (qw(uq uq_table))
{
	my $at = "SELECT checkpoint_batch_id = last_batch_id FROM streamwin.query_catalog WHERE name = '$q'";
	for (my $i = 0; $i < 5 && $node->safe_psql('postgres', $at) ne 't'; $i++)
	{
		ups_chunk(20, 40);
		ups_send();
		run_json($node, "run_batch('uq')");
		sess_ok($small, "SELECT streamwin.run_batch('uq_table') IS NOT NULL");
	}
	is($node->safe_psql('postgres', $at), 't', "checkpoint: the last batch of $q took one");
	my $table = $node->safe_psql('postgres',
		"SELECT plan->>'upsert_table' FROM streamwin.query_catalog WHERE name = '$q'");
	results_match($node, "SELECT * FROM streamwin.checkpoint_$table", "SELECT * FROM streamwin.$table",
		"checkpoint: the checkpoint table of $q equals its state table");
}
ups_check('at the end', 'uq', 'uq_table');
eval { $small->quit };

# reset_query empties the rows kept, and the result (a transform's rows
# would be appended again): read again from the start, the changes come
# again, the same; drop_query drops the tables.
my $uq_table = $node->safe_psql('postgres',
	"SELECT plan->>'upsert_table' FROM streamwin.query_catalog WHERE name = 'uq'");
psql_ok($node, q{SELECT streamwin.reset_query('uq', 'earliest');
SELECT streamwin.run_available('uq') IS NOT NULL}, 'reset_query, then the whole topic again');
results_match($node, 'SELECT * FROM uq',
	values_sql(\@ups_cols, \@ups_rows),
	'reset_query: the same changes again, from no row kept');
results_match($node, "SELECT id, amount, note, part, off FROM streamwin.$uq_table",
	values_sql([ @ups_cols[ 0 .. 4 ] ], [ map { [ $_, @{ $ups_table{$_} } ] } keys %ups_table ]),
	'reset_query: the state table holds each key\'s last row again');
psql_ok($node, "SELECT streamwin.drop_query('uq')", 'drop_query');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM pg_class
 WHERE relnamespace = 'streamwin'::regnamespace AND relname IN ('$uq_table', 'checkpoint_$uq_table')}),
	'0', 'drop_query drops the state table and its checkpoint');

# ==== 4. refusals ================================================================

fails_like($node, qq{SELECT streamwin.create_kafka_source('bad', '$brokers', 'ups', 'id int, v int',
    options => '{"envelope": "upsert"}')},
	qr/envelope "upsert" needs option "key_columns".*HINT:  Name the columns the key holds/s,
	'refused: upsert without key_columns');
fails_like($node, qq{SELECT streamwin.create_kafka_source('bad', '$brokers', 'ups', 'id int, v int',
    options => '{"envelope": "maxwell"}')},
	qr/invalid value for option "envelope": "maxwell".*HINT:  Use "append"/s,
	'refused: an unknown envelope');
fails_like($node, qq{SELECT streamwin.create_kafka_source('bad', '$brokers', 'ups', 'id int, v int',
    options => '{"envelope": "upsert", "key_columns": ["ID"]}')},
	qr/key column "ID" is not a column of source "bad"/,
	'refused: a key column that is not a column');
fails_like($node, qq{SELECT streamwin.create_kafka_source('bad', '$brokers', 'ups', 'id int, v int',
    options => '{"key_columns": ["id"]}')},
	qr/option "key_columns" needs an envelope of changes/,
	'refused: key_columns of an append stream');
fails_like($node, qq{SELECT streamwin.create_kafka_source('bad', '$brokers', 'ups', 'id int, v int',
    format => 'csv', options => '{"envelope": "debezium"}')},
	qr/envelope "debezium" needs format "json"/,
	'refused: Debezium events in csv');
fails_like($node, qq{SELECT streamwin.create_kafka_source('bad', '$brokers', 'ups', 'id json, v int',
    options => '{"envelope": "upsert", "key_columns": ["id"]}')},
	qr/key column "id" of type json cannot be hashed/,
	'refused: an upsert key column that cannot be hashed');
fails_like($node, q{SELECT streamwin.create_query('bad', 'SELECT ups.id, dbz.amount FROM ups JOIN dbz ON ups.id = dbz.id',
    options => '{"join_state_unbounded": true}', start => false)},
	qr/source "ups" is a changelog, which a stream-stream join cannot read/,
	'refused: a join over an upsert source');
# A Debezium row retracted without key columns carries the metadata of the
# message that retracts it: an aggregation by metadata would retract from
# another group.  An upsert source, or a Debezium source with key columns,
# keeps its rows' metadata, and may.
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('dbz_meta', '$brokers', 'dbz', 'id int, amount numeric, region text, part int, off bigint',
    options => '{"envelope": "debezium", "metadata": {"part": "partition", "off": "offset"}}');
}, 'a Debezium source without key columns, with metadata columns');
fails_like($node, q{SELECT streamwin.create_query('bad', 'SELECT part, count(*) FROM dbz_meta GROUP BY part',
    output_mode => 'update', start => false)},
	qr/an aggregation over changelog source "dbz_meta" cannot read its metadata columns/,
	'refused: an aggregation over a Debezium source without key columns grouped by a metadata column');
fails_like($node, q{SELECT streamwin.create_query('bad', 'SELECT region, max(off) FROM dbz_meta WHERE part = 0 GROUP BY region',
    output_mode => 'update', start => false)},
	qr/an aggregation over changelog source "dbz_meta" cannot read its metadata columns/,
	'refused: ... one that aggregates by them');
fails_like($node, q{SELECT streamwin.create_query('bad', 'SELECT region, count(*) FROM dbz_meta WHERE part = 0 GROUP BY region',
    output_mode => 'update', start => false)},
	qr/an aggregation over changelog source "dbz_meta" cannot read its metadata columns/,
	'refused: ... one that filters by them');
fails_like($node, qq{SELECT streamwin.create_kafka_source('bad', '$brokers', 'dbz', 'id int, part int',
    options => '{"envelope": "debezium", "key_columns": ["part"], "metadata": {"part": "partition"}}')},
	qr/key column "part" holds message metadata.*\n.*A Debezium source reads its key columns from the rows of its change events/,
	'refused: a Debezium key column that holds metadata');
psql_ok($node, q{
SELECT streamwin.create_query('dbz_sum', 'SELECT region, sum(amount) FROM dbz_meta GROUP BY region',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('ups_parts', 'SELECT part, count(*) FROM ups GROUP BY part',
    output_mode => 'update', start => false);
SELECT streamwin.create_query('dbz_parts', 'SELECT part, count(*) AS n FROM dbz GROUP BY part',
    output_mode => 'update', start => false);
SELECT streamwin.drop_query('dbz_sum');
SELECT streamwin.drop_query('ups_parts');
}, 'an aggregation over a Debezium source by its rows\' columns, and ones over an upsert source and a Debezium source with key columns by their metadata, are accepted');
# each key's row keeps the partition of the message that added it
run_json($node, "run_available('dbz_parts')");
my %dbz_parts;
$dbz_parts{ $dbz_at{$_}[0] }++ for keys %dbz_table;
results_match($node, 'SELECT part, n FROM dbz_parts',
	values_sql([ [ 'part', 'int' ], [ 'n', 'bigint' ] ], [ map { [ $_, $dbz_parts{$_} ] } keys %dbz_parts ]),
	'an aggregation by metadata over a Debezium source with key columns: each row counted where it was added');
psql_ok($node, "SELECT streamwin.drop_query('dbz_parts')", 'dropped');

# A query whose upsert table was dropped by hand: its batches and
# reset_query fail saying so, and drop_query drops it and what is left.
psql_ok($node, q{SELECT streamwin.create_query('ups_gone', 'SELECT part, count(*) AS n FROM ups GROUP BY part',
    output_mode => 'update', start => false)}, 'ups_gone: a query over the upsert source');
my $gone = $node->safe_psql('postgres', "SELECT plan->>'upsert_table' FROM streamwin.query_catalog WHERE name = 'ups_gone'");
psql_ok($node, "DROP TABLE streamwin.$gone", 'its upsert table dropped by hand');
fails_like($node, "SELECT streamwin.run_batch('ups_gone')",
	qr/the upsert table of query "ups_gone" or its checkpoint table does not exist.*HINT:  Drop the query and create it again/s,
	'ups_gone: a batch fails, saying what is gone and what to do');
fails_like($node, "SELECT streamwin.reset_query('ups_gone', 'earliest')",
	qr/the upsert table of query "ups_gone" or its checkpoint table does not exist/,
	'ups_gone: so does reset_query');
psql_ok($node, "SELECT streamwin.drop_query('ups_gone', drop_result => true)", 'ups_gone: drop_query drops it');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM pg_class WHERE relnamespace = 'streamwin'::regnamespace
  AND relname IN ('$gone', 'checkpoint_$gone')} . q{ UNION ALL SELECT count(*) FROM streamwin.query_catalog WHERE name = 'ups_gone'}),
	"0\n0", 'ups_gone: the query and its checkpoint table are gone');

done_testing();
