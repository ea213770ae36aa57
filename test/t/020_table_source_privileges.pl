
# 020_table_source_privileges.pl: what a table source may cost the server,
# and who may incur it.  A table source owns a logical replication slot,
# which keeps WAL for as long as its slowest query lags.
#
#   1. Who may create one: as in PostgreSQL for slots, superusers and
#      REPLICATION roles, and the roles granted EXECUTE on
#      streamwin.create_table_source_slot().  A role with LOGIN, CREATE on
#      the schema and SELECT on the table is refused, with a hint holding
#      the GRANT to run; the slot function refuses it too.  After that
#      GRANT (taken from the hint and run as it is) it creates a source
#      whose query reads exactly the table's rows.  A REPLICATION role may
#      without a GRANT.
#   2. ALTER EXTENSION streamwin UPDATE from every earlier version gives
#      the privileges of a fresh installation (schema, relations and
#      functions, compared as text), and refuses the same role.
#   3. max_slot_wal_keep_size (1MB here) invalidates the slot that a
#      stopped query holds back: both queries of the source then fail
#      loudly (SQLSTATE SWT01, in streamwin.queries.last_error for the
#      running one, with the hint naming reset_query) and their results
#      keep exactly the rows read before, never the rows after the loss.
#      reset_query gives the source a new slot (refused for a role without
#      the privilege, and in a transaction that has written, saying what
#      to do), warns what is lost, and the queries read on from the new
#      slot: exactly the rows before the loss and the rows after the reset.
#   4. streamwin.retained_wal_warning (2MB here): the launcher warns, in
#      the server log and in the last_error of the source's queries that
#      are not failing, naming the query furthest behind; states and
#      batches are untouched, a failing query keeps its own error.  The
#      next round does not warn again (it warns, though, about a source
#      that passed the threshold since, with no query); once the stopped
#      query has caught up a round forgets the warning.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;


sub as_role { return (extra_params => [ '-U', $_[0] ]) }

sub streamwin_slots
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE plugin = 'streamwin'");
}

sub slot_of
{
	my ($node, $source) = @_;
	return $node->safe_psql('postgres',
		"SELECT slot_name FROM streamwin.sources WHERE name = '$source'");
}

sub ins
{
	my ($from, $to) = @_;
	return "INSERT INTO ev SELECT g, 'k' || (g % 3), g * 7 FROM generate_series($from, $to) g";
}

my $node = new_node('priv');
# the launcher's rounds (slot warnings, invalidated slots' queries) once a second
$node->append_conf('postgresql.conf', "streamwin.launcher_naptime = 1\n");
$node->reload;

# ==== 1. who may create a table source =======================================

psql_ok($node, q{
CREATE TABLE ev (id int PRIMARY KEY, k text NOT NULL, v int NOT NULL);
CREATE TABLE scratch (x int);
CREATE ROLE carol LOGIN;
CREATE ROLE rita LOGIN REPLICATION;
GRANT CREATE ON SCHEMA public TO carol, rita;
GRANT SELECT ON ev TO carol, rita;
}, 'table ev; carol (LOGIN, CREATE on public, SELECT on ev) and rita (the same, plus REPLICATION)');

my $err = fails_like($node, q{SELECT streamwin.create_table_source('carol_src', 'ev')},
	qr/ERROR:  permission denied to create table source "carol_src"/,
	'carol may not create a table source', as_role('carol'));
like($err, qr/DETAIL:  .*superusers, to roles with the REPLICATION attribute, and to roles granted EXECUTE on streamwin\.create_table_source_slot\(\)/,
	'the refusal says who may');
my ($grant) = $err =~ /HINT:  A superuser can allow role "carol" with: (GRANT EXECUTE ON FUNCTION streamwin\.create_table_source_slot\(\) TO carol;)/;
ok(defined $grant, 'the hint gives the GRANT that allows carol') or diag($err);
fails_like($node, q{SELECT streamwin.create_table_source_slot()},
	qr/ERROR:  permission denied for function create_table_source_slot/,
	'nor may carol call the function that creates the slot', as_role('carol'));
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM streamwin.sources), (SELECT count(*) FROM pg_replication_slots),
       to_regclass('carol_src') IS NULL}),
	'0|0|t', 'the refusals left no source, slot or view');

psql_ok($node, $grant, 'a superuser runs the GRANT of the hint');
psql_ok($node, q{
SELECT streamwin.create_table_source('carol_src', 'ev');
SELECT streamwin.create_query('carol_q', 'SELECT id, k, v FROM carol_src', start => false);
}, 'then carol creates a table source and a query over it', as_role('carol'));
is($node->safe_psql('postgres', "SELECT owner FROM streamwin.sources WHERE name = 'carol_src'"),
	'carol', 'the source is carol\'s');
fails_like($node, q{SELECT streamwin.create_table_source_slot()},
	qr/ERROR:  streamwin\.create_table_source_slot\(\) only creates the slot of a table source being created/,
	'the slot function, called by hand, creates no slot', as_role('carol'));
is(streamwin_slots($node), '1', 'one slot: carol_src\'s');

psql_ok($node, ins(1, 100), 'rows 1 to 100');
psql_ok($node, q{SELECT streamwin.run_available('carol_q')}, 'carol runs her query',
	as_role('carol'));
results_match($node, 'SELECT id, k, v FROM carol_q', 'SELECT id, k, v FROM ev',
	'carol_q holds every row of ev');

psql_ok($node, q{
SELECT streamwin.create_table_source('rita_src', 'ev');
SELECT streamwin.drop_source('rita_src');
}, 'a REPLICATION role creates (and drops) a table source without a GRANT', as_role('rita'));
is(streamwin_slots($node), '1', 'rita_src\'s slot went with it');

# ==== 2. the same privileges after ALTER EXTENSION UPDATE =====================

# Every privilege in schema streamwin, as text, in one order.
my $privileges_sql = q{
SELECT string_agg(x, E'\n' ORDER BY x) FROM (
    SELECT 'schema ' || coalesce(nspacl::text, '-') FROM pg_namespace WHERE nspname = 'streamwin'
    UNION ALL
    SELECT relkind::text || ' ' || relname || ' ' || coalesce(relacl::text, '-') FROM pg_class
     WHERE relnamespace = 'streamwin'::regnamespace AND relkind IN ('r', 'v', 'S')
    UNION ALL
    SELECT 'f ' || oid::regprocedure::text || ' ' || coalesce(proacl::text, '-') FROM pg_proc
     WHERE pronamespace = 'streamwin'::regnamespace) s(x)};

psql_ok($node, 'CREATE DATABASE fresh', 'a database for a fresh installation');
psql_ok($node, 'CREATE EXTENSION streamwin', 'fresh installation', dbname => 'fresh');
my $fresh = psql_ok($node, $privileges_sql, undef, dbname => 'fresh');
my $public_sql = q{
SELECT has_function_privilege('public', 'streamwin.create_table_source(text, regclass, jsonb)', 'EXECUTE'),
       has_function_privilege('public', 'streamwin.create_table_source_slot()', 'EXECUTE')};
is(psql_ok($node, $public_sql, undef, dbname => 'fresh'), 't|f',
	'fresh: PUBLIC may call create_table_source, not the slot function');
my $current = psql_ok($node,
	"SELECT default_version FROM pg_available_extensions WHERE name = 'streamwin'");
for my $version ('0.1', '0.2', '0.3', '0.4', '0.5')
{
	my $db = 'from_' . ($version =~ tr/./_/r);
	psql_ok($node, "CREATE DATABASE $db", "a database for version $version");
	psql_ok($node, qq{
CREATE EXTENSION streamwin VERSION '$version';
ALTER EXTENSION streamwin UPDATE;
CREATE TABLE ev (id int);
GRANT SELECT ON ev TO carol;
GRANT CREATE ON SCHEMA public TO carol;
}, "version $version updated", dbname => $db);
	is(psql_ok($node, "SELECT extversion FROM pg_extension WHERE extname = 'streamwin'",
			undef, dbname => $db),
		$current, "$version: now at $current");
	is(psql_ok($node, $privileges_sql, undef, dbname => $db),
		$fresh, "$version updated: the privileges of a fresh installation");
	is(psql_ok($node, $public_sql, undef, dbname => $db), 't|f',
		"$version updated: PUBLIC may call create_table_source, not the slot function");
	my ($rc, $out, $e) = ('', '', '');
	$rc = $node->psql($db, q{SELECT streamwin.create_table_source('carol_src', 'ev')},
		stdout => \$out, stderr => \$e, extra_params => [ '-U', 'carol' ]);
	like($e, qr/ERROR:  permission denied to create table source "carol_src".*HINT:  A superuser can allow role "carol" with: GRANT/s,
		"$version updated: carol, without the GRANT there, is refused");
}

# ==== 2b. the extension handed to another role ==============================
# REASSIGN OWNED hands the extension to another role, and the old owner may
# then go.  A session that has used streamwin before reads the new owner:
# before, it kept the old one for its life, and its statements on the
# catalog ran as a dropped role ("permission denied for table
# source_catalog").

psql_ok($node, q{
CREATE ROLE ext_admin SUPERUSER LOGIN;
CREATE DATABASE handed OWNER ext_admin;
}, 'a database whose extension ext_admin creates');
psql_ok($node, q{
CREATE EXTENSION streamwin;
}, 'ext_admin creates the extension', dbname => 'handed', as_role('ext_admin'));
my $before_handover = $node->background_psql('handed');
$before_handover->query_safe(
	q{SELECT streamwin.create_kafka_source('before_handover', 'localhost:9', 't', 'id int')});
psql_ok($node, q{
REASSIGN OWNED BY ext_admin TO CURRENT_USER;
DROP OWNED BY ext_admin;
}, 'the extension is handed over', dbname => 'handed');
psql_ok($node, 'DROP ROLE ext_admin', 'its old owner is dropped');
$before_handover->query_safe(
	q{SELECT streamwin.create_kafka_source('after_handover', 'localhost:9', 't', 'id int')});
is($before_handover->query_safe(q{SELECT string_agg(name, ',' ORDER BY name) FROM streamwin.sources}),
	'after_handover,before_handover',
	'a session that used streamwin before the handover goes on under the new owner');
$before_handover->quit;

# ==== 3. a slot invalidated by max_slot_wal_keep_size ========================

psql_ok($node, q{
SELECT streamwin.create_query('inv_run', 'SELECT id, k, v FROM carol_src', trigger_interval => '100 ms');
}, 'a running query over carol_src (carol_q is stopped)');
wait_results_match($node, 'SELECT id, k, v FROM inv_run', 'SELECT id, k, v FROM ev',
	'inv_run reads rows 1 to 100');
my $old_slot = slot_of($node, 'carol_src');

# carol loses the privilege: she may no longer replace the slot either
psql_ok($node, q{REVOKE EXECUTE ON FUNCTION streamwin.create_table_source_slot() FROM carol},
	'carol loses the GRANT');
psql_ok($node, q{
ALTER SYSTEM SET max_slot_wal_keep_size = '1MB';
SELECT pg_reload_conf();
}, 'max_slot_wal_keep_size = 1MB');

# carol_q, stopped after row 100, holds the slot back while 32 MB of WAL
# are written elsewhere; a checkpoint then invalidates it.
psql_ok($node, q{
CREATE TABLE filler (x text);
INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 32000);
SELECT pg_switch_wal();
}, '32 MB of WAL in another table');
my $status = '';
for my $try (1 .. 30)
{
	$node->safe_psql('postgres', 'CHECKPOINT');
	$status = $node->safe_psql('postgres',
		"SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$old_slot'");
	last if $status eq 'lost';
	sleep 1;
}
is($status, 'lost', 'a checkpoint invalidated the slot (wal_status lost)');
psql_ok($node, ins(101, 150), 'rows 101 to 150, after the loss');

my $lost_error = qr/^the table source no longer holds the changes from [0-9A-F]+\/[0-9A-F]+ on\n/
  . qr/DETAIL: Its replication slot "\Q$old_slot\E" was invalidated, because it retained more WAL than /
  . qr/max_slot_wal_keep_size \(now 1MB\) allowed.*\n/
  . qr/HINT: Start the query over with streamwin\.reset_query\(name, 'earliest'\)\./;
$lost_error = qr/$lost_error/;    # one regex of the pieces
wait_until($node, "SELECT state FROM streamwin.queries WHERE name = 'inv_run'", 'failed',
	'the running query fails');
like($node->safe_psql('postgres', "SELECT last_error FROM streamwin.queries WHERE name = 'inv_run'"),
	$lost_error, 'its last_error: the position is lost, the slot invalidated, reset_query');
$err = fails_like($node, "\\set VERBOSITY verbose\nSELECT streamwin.run_batch('carol_q')",
	qr/ERROR:  SWT01: the table source no longer holds the changes from .* on/,
	'the stopped query fails too, SQLSTATE SWT01', as_role('carol'));
like($err, qr/HINT:  Start the query over with streamwin\.reset_query\(name, 'earliest'\)\./,
	'with the hint naming reset_query');
results_match($node, 'SELECT id, k, v FROM inv_run', 'SELECT id, k, v FROM ev WHERE id <= 100',
	'inv_run still holds rows 1 to 100 and none after the loss');
results_match($node, 'SELECT id, k, v FROM carol_q', 'SELECT id, k, v FROM ev WHERE id <= 100',
	'so does carol_q');

# reset_query replaces the slot, which takes the privilege of creating one
$err = fails_like($node, q{SELECT streamwin.reset_query('carol_q', 'earliest')},
	qr/ERROR:  permission denied to replace the replication slot of table source "carol_src"/,
	'carol, without the GRANT now, may not reset onto a new slot', as_role('carol'));
like($err, qr/HINT:  A superuser can allow role "carol" with: GRANT EXECUTE ON FUNCTION streamwin\.create_table_source_slot\(\) TO carol;/,
	'the hint gives the GRANT');
psql_ok($node, q{SELECT streamwin.stop_query('inv_run')}, 'stop inv_run');
$err = fails_like($node, q{
BEGIN;
INSERT INTO scratch VALUES (1);
SELECT streamwin.reset_query('inv_run', 'earliest');
},
	qr/ERROR:  cannot replace the replication slot of a table source in a transaction that has already written/,
	'nor in a transaction that has written');
like($err, qr/HINT:  Call streamwin\.reset_query\(\) in a transaction of its own, or first in it\./,
	'the hint says to reset in a transaction of its own');
is(slot_of($node, 'carol_src'), $old_slot, 'the refused resets left the slot as it was');

psql_ok($node, q{
ALTER SYSTEM RESET max_slot_wal_keep_size;
SELECT pg_reload_conf();
}, 'max_slot_wal_keep_size back to unlimited');
my ($rc, $out);
($rc, $out, $err) = ('', '', '');
$rc = $node->psql('postgres', q{SELECT streamwin.reset_query('inv_run', 'earliest')},
	stdout => \$out, stderr => \$err);
is($rc, 0, 'reset_query of inv_run, by a superuser, succeeds');
my $replaced =
	qr/WARNING:  table source "carol_src" has a new replication slot, "streamwin_\w+", /
	  . qr/in place of "\Q$old_slot\E", which PostgreSQL invalidated\n/
	  . qr/DETAIL:  The changes committed between \S+, where the invalidated slot stood, and \S+, /
	  . qr/where the new one starts, are lost to each query of the source that had not read them\.\n/
	  . qr/HINT:  Reset the other queries of the source too/;
like($err, qr/$replaced/, 'and warns that the changes between the two slots are lost');
my $new_slot = slot_of($node, 'carol_src');
isnt($new_slot, $old_slot, 'the source has a new slot');
is($node->safe_psql('postgres', qq{
SELECT string_agg(slot_name || ' ' || wal_status, ',') FROM pg_replication_slots WHERE plugin = 'streamwin'}),
	"$new_slot reserved", 'the invalidated slot is gone, the new one holds WAL');

psql_ok($node, ins(151, 200), 'rows 151 to 200, after the reset');
psql_ok($node, q{SELECT streamwin.start_query('inv_run')}, 'start inv_run');
wait_results_match($node, 'SELECT id, k, v FROM inv_run',
	'SELECT id, k, v FROM ev WHERE id > 150',
	'inv_run: the rows after the reset (a transform\'s reset empties its result)');
is($node->safe_psql('postgres', "SELECT state, last_error IS NULL FROM streamwin.queries WHERE name = 'inv_run'"),
	'running|t', 'inv_run runs, without an error');

# carol_q, reset by nobody yet, is still behind: loud, until reset
fails_like($node, "\\set VERBOSITY verbose\nSELECT streamwin.run_batch('carol_q')",
	qr/ERROR:  SWT01: the table source no longer holds the changes from .* on/,
	'carol_q, not reset yet, still fails', as_role('carol'));
psql_ok($node, q{
SELECT streamwin.reset_query('carol_q', 'earliest');
SELECT streamwin.run_available('carol_q');
}, 'carol resets carol_q onto the new slot (no privilege needed) and runs it', as_role('carol'));
results_match($node, 'SELECT id, k, v FROM carol_q',
	'SELECT id, k, v FROM ev WHERE id > 150',
	'carol_q: the rows after the reset (a transform\'s reset empties its result)');

psql_ok($node, q{SELECT streamwin.drop_query('inv_run', drop_result => true)}, 'drop inv_run');
psql_ok($node, q{
SELECT streamwin.drop_query('carol_q', drop_result => true);
SELECT streamwin.drop_source('carol_src');
}, 'carol drops her query and source', as_role('carol'));
is(streamwin_slots($node), '0', 'no streamwin slot is left');

# ==== 4. a warning when a source retains more WAL than the setting ===========

psql_ok($node, q{
CREATE TABLE wev (id int PRIMARY KEY, v int NOT NULL);
SELECT streamwin.create_table_source('wal_src', 'wev');
SELECT streamwin.create_query('wal_run', 'SELECT id, v FROM wal_src', trigger_interval => '100 ms');
SELECT streamwin.create_query('wal_fail', 'SELECT id, 100 / (id - 60) AS x FROM wal_src',
    trigger_interval => '100 ms');
SELECT streamwin.create_query('wal_stopped', 'SELECT id, v FROM wal_src', start => false);
INSERT INTO wev SELECT g, g * 3 FROM generate_series(1, 50) g;
}, 'wal_src: a running query, one that will fail, and a stopped one; rows 1 to 50');
wait_results_match($node, 'SELECT id, v FROM wal_run', 'SELECT id, v FROM wev', 'wal_run reads rows 1 to 50');
wait_until($node, q{SELECT count(*) FROM wal_fail}, '50', 'wal_fail reads rows 1 to 50');
psql_ok($node, 'INSERT INTO wev VALUES (60, 180)', 'row 60, which wal_fail divides by zero');
wait_until($node, "SELECT state FROM streamwin.queries WHERE name = 'wal_fail'", 'failed',
	'wal_fail fails');
my $fail_error = $node->safe_psql('postgres', "SELECT last_error FROM streamwin.queries WHERE name = 'wal_fail'");
like($fail_error, qr/division by zero/, 'wal_fail\'s last_error: division by zero');

my $log_from = -s $node->logfile;
psql_ok($node, q{
ALTER SYSTEM SET streamwin.retained_wal_warning = '2MB';
SELECT pg_reload_conf();
CREATE TABLE filler2 (x text);
INSERT INTO filler2 SELECT repeat('y', 1000) FROM generate_series(1, 4000);
}, 'streamwin.retained_wal_warning = 2MB; 4 MB of WAL in another table');
my $warning = qr/^WARNING: table source "wal_src" retains \d+ [kM]B of WAL, more than streamwin\.retained_wal_warning \(2MB\)\n/
  . qr/DETAIL: Its replication slot "streamwin_\w+" keeps the WAL from \S+ on; the query furthest behind is "wal_stopped" \(stopped\), at \S+\.\n/
  . qr/HINT: Start, catch up or drop the queries that lag behind/;
$warning = qr/$warning/;    # one regex of the pieces
wait_until($node, q{SELECT last_error LIKE 'WARNING: table source "wal_src" retains %'
  FROM streamwin.queries WHERE name = 'wal_stopped'}, 't',
	'the launcher warns, within a round (30 s), in the stopped query\'s last_error');
like($node->safe_psql('postgres', "SELECT last_error FROM streamwin.queries WHERE name = 'wal_stopped'"),
	$warning, 'the warning names the size, the setting and the query that holds the slot back');
like($node->safe_psql('postgres', "SELECT last_error FROM streamwin.queries WHERE name = 'wal_run'"),
	$warning, 'the running query has it in its last_error too');
is($node->safe_psql('postgres', "SELECT last_error FROM streamwin.queries WHERE name = 'wal_fail'"),
	$fail_error, 'the failing query keeps its own error');
is($node->safe_psql('postgres', q{SELECT string_agg(name || ' ' || state, ', ' ORDER BY name) FROM streamwin.queries}),
	'wal_fail failed, wal_run running, wal_stopped stopped', 'the warning changes no query\'s state');
my $log = slurp_file($node->logfile, $log_from);
my @warnings = $log =~ /WARNING:  table source "wal_src" retains \d+ [kM]B of WAL, more than streamwin\.retained_wal_warning \(2MB\)\n[^\n]*DETAIL:  [^\n]*the query furthest behind is "wal_stopped" \(stopped\)/g;
is(scalar @warnings, 1, 'the server log has the warning, with its detail');

psql_ok($node, 'INSERT INTO wev SELECT g, g * 3 FROM generate_series(61, 100) g', 'rows 61 to 100');
wait_results_match($node, 'SELECT id, v FROM wal_run', 'SELECT id, v FROM wev',
	'wal_run goes on reading: rows 1 to 100');

# The next round (shown by warning about a source created now, which only
# it can do) does not warn about wal_src again: at most every 5 minutes.
my $warned_at = $node->safe_psql('postgres', q{SELECT wal_warned_at FROM streamwin.source_catalog WHERE name = 'wal_src'});
isnt($warned_at, '', 'the warning is recorded as of when it was given');
psql_ok($node, q{
CREATE TABLE wev2 (id int);
SELECT streamwin.create_table_source('wal_src2', 'wev2');
CREATE TABLE filler3 (x text);
INSERT INTO filler3 SELECT repeat('z', 1000) FROM generate_series(1, 3000);
}, 'wal_src2, without a query, and 3 MB more of WAL');
wait_until($node, q{SELECT wal_warned_at IS NOT NULL FROM streamwin.source_catalog WHERE name = 'wal_src2'},
	't', 'a later round warns about wal_src2');
$log = slurp_file($node->logfile, $log_from);
like($log, qr/WARNING:  table source "wal_src2" retains \d+ [kM]B of WAL, more than streamwin\.retained_wal_warning \(2MB\)\n[^\n]*DETAIL:  Its replication slot "streamwin_\w+" keeps the WAL from \S+ on, and no query reads the source\./,
	'wal_src2\'s warning says that no query reads it');
@warnings = $log =~ /WARNING:  table source "wal_src" retains/g;
is(scalar @warnings, 1, 'that round did not warn about wal_src again');
is($node->safe_psql('postgres', q{SELECT wal_warned_at FROM streamwin.source_catalog WHERE name = 'wal_src'}),
	$warned_at, 'nor record a new warning for it');

# Once wal_stopped has caught up (and wal_fail is gone), the slot lets the
# WAL go, and a round forgets the warning, so that the next time over
# warns at once.
psql_ok($node, q{
SELECT streamwin.drop_query('wal_fail', drop_result => true);
SELECT streamwin.run_available('wal_stopped');
}, 'drop wal_fail; wal_stopped catches up');
wait_until($node, q{SELECT retained_wal < 2 * 1024 * 1024 FROM streamwin.sources WHERE name = 'wal_src'},
	't', 'wal_src retains less than 2 MB again');
wait_until($node, q{SELECT wal_warned_at IS NULL FROM streamwin.source_catalog WHERE name = 'wal_src'},
	't', 'a round forgets the warning about wal_src');

$node->stop;
done_testing();
