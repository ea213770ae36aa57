
# 024_upgrades.pl: an upgrade from every released catalog version to the
# current one, with the real library of each release, keeps every query
# exact.
#
# The releases come from the repository's history (STREAMWIN_SOURCE_DIR, set
# by run_tests.sh; the checkout this file is in otherwise): each commit that
# changed default_version in streamwin.control ends the previous version.
# Its release is the last commit at that version whose install script
# sql/streamwin--V.sql is the one that shipped (the current tree's, where
# it still has one): 0.1 shipped before table sources came, and the 0.1
# script that later commits extended was restored as it shipped when 0.2
# began (8d2d992), so 0.1's library is the commit before table sources
# (c5f78df^), not the commit before 0.2.  Each release is built from
# `git archive` (-O0, no bitcode) in the background while the test runs.
#
# The old libraries cannot go into the PostgreSQL installation other tests
# use: the test copies it (bindir, pkglibdir, sharedir, keeping their layout,
# which PostgreSQL finds relative to its binaries) into its temporary
# directory, and installs there, as a package upgrade would, first a
# release's library and scripts, then the current tree's.
#
# For each release V, a node of its own:
#   1. CREATE EXTENSION streamwin VERSION 'V' with V's library.  A Kafka
#      JSON source, and an ordinary role, dora, creating running queries
#      over it: a tumbling window in append mode with a watermark, a hopping
#      window in append mode, session windows in update mode, a running
#      aggregate in update mode (named "Q_Upd": 0.5 renames such names), a
#      transform, a deduplicating transform (dedup_keys), and a min/max/avg
#      aggregate that is then stopped; where V has table sources, a table
#      source and a running aggregate over it.  Chunk 1 of the data; every
#      result must be exact.
#   2. The server stops; the current library and scripts replace V's; the
#      server starts.  Within a few launcher rounds every query meant to
#      run shows state "failed", no worker, and last_error saying the
#      catalog's version, the library's, and to run ALTER EXTENSION
#      streamwin UPDATE (issue 39: before 7a02bd5, a 0.1 catalog showed its
#      queries running while the starter failed every round on "column
#      slot_name does not exist", in the server log only).  The stopped
#      query stays stopped, without an error; start_query says the same as
#      last_error.  Nothing in the server log "does not exist".  Chunk 2
#      arrives meanwhile, beginning with events of chunk 1 sent again.
#   3. ALTER EXTENSION streamwin UPDATE: the one step docs/operations.md
#      (Upgrades) asks for, and nothing else (no start_query, no reset).
#      The launcher starts the running queries' workers within its naptime
#      and the first batch of each clears its failed state.  Every result
#      must equal plain SQL over chunks 1 and 2 (windows closed by the
#      watermark in append mode; each event once after deduplication), the
#      watermark must be exactly that of the events.  start_query starts
#      the stopped query, which catches up exactly.
#   4. A crash (immediate stop): every query with state restores its
#      checkpoint, taken by V's library at its first batch, and replays the
#      batches since from the batch log, those of V's library and then the
#      current one's.  Chunk 3; every result must be exact again.
#
# A bug this found: 0.1 and 0.2 gave the dedup table of a query created by
# any other role than the extension owner to the extension owner, so that
# the query failed at every batch ("permission denied for table dedup_N");
# 0.3 fixed new queries, but no update repaired the old ones, which went on
# failing after ALTER EXTENSION UPDATE.  streamwin--0.5--0.6.sql repairs them;
# the test expects that failure with 0.1 and 0.2, and exact results after
# the update.
#
# Environment: STREAMWIN_UPGRADE_VERSIONS="0.1 0.5" tests these releases
# only.  Skipped where the checkout is not a git clone with its history.
use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Path qw(make_path remove_tree);
use IPC::Run;
use List::Util qw(min);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use StreamwinTest;

srand(2024);
my $started = time;

# ---- the repository and its releases ------------------------------------

my $repo = $ENV{STREAMWIN_SOURCE_DIR} // abs_path(dirname(__FILE__) . '/../..');
# The checkout may belong to another user than the one running the tests.
my @git = ('git', '-c', 'safe.directory=*', '-C', $repo);

sub run_cmd
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval { IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err) };
	$err .= $@ if $@;
	return ($ok, $out, $err);
}

sub git
{
	my ($ok, $out) = run_cmd(@git, @_);
	return $ok ? $out : undef;
}

sub git_show
{
	my ($rev, $path) = @_;
	return git('show', "$rev:$path");
}

sub control_version
{
	my ($text) = @_;
	return undef unless defined $text;
	return $text =~ /^\s*default_version\s*=\s*'([^']+)'/m ? $1 : undef;
}

my $is_shallow = git('rev-parse', '--is-shallow-repository');
if (!defined git('rev-parse', '--verify', 'HEAD^{commit}') || !defined $is_shallow)
{
	plan skip_all => "$repo is not a git clone (no .git, no git, or unreadable): "
	  . 'the test builds the earlier releases from its history; set STREAMWIN_SOURCE_DIR to a clone';
}
if ($is_shallow =~ /true/)
{
	plan skip_all => "$repo is a shallow clone: the earlier releases are not in it";
}

my $target = control_version(slurp_file("$repo/streamwin.control"))
  or die "no default_version in $repo/streamwin.control";

# The release of version $v: at or before $last (the commit before the one
# that moved on from $v), the last commit whose install script of $v is
# the one that shipped.
sub release_commit
{
	my ($v, $last) = @_;
	my $script  = "sql/streamwin--$v.sql";
	my $shipped = -f "$repo/$script" ? slurp_file("$repo/$script") : git_show($last, $script);
	return $last unless defined $shipped;
	my $r = $last;
	for my $c (split /\n/, git('log', '--first-parent', '--format=%H', $last, '--', $script) // '')
	{
		my $content = git_show($c, $script);
		last if defined $content && $content eq $shipped;
		$r = "$c^";    # before this commit changed the shipped script
	}
	return $last unless (control_version(git_show($r, 'streamwin.control')) // '') eq $v;
	return $r;
}

my %release;
sub add_release
{
	my ($v, $last) = @_;
	return if defined $release{$v};
	my $c = git('rev-parse', '--short', release_commit($v, $last));
	chomp $c if defined $c;
	$release{$v} = $c if $c;
	return;
}
for my $b (split /\n/, git('log', '--first-parent', '--format=%H', 'HEAD', '--', 'streamwin.control') // '')
{
	my $new = control_version(git_show($b, 'streamwin.control'));
	my $old = control_version(git_show("$b^", 'streamwin.control'));
	add_release($old, "$b^") if defined $new && defined $old && $new ne $old;
}
# a new version begun in the working tree, not committed yet: HEAD is the
# last commit of the one before
my $head_version = control_version(git_show('HEAD', 'streamwin.control'));
add_release($head_version, 'HEAD') if defined $head_version && $head_version ne $target;
delete $release{$target};    # (a version bumped back and forth)

sub vcmp
{
	my ($a, $b) = @_;
	my @a = split /\./, $a;
	my @b = split /\./, $b;
	while (@a || @b)
	{
		my $c = (shift(@a) // 0) <=> (shift(@b) // 0);
		return $c if $c;
	}
	return 0;
}
my @versions = sort { vcmp($a, $b) } keys %release;
if (my $only = $ENV{STREAMWIN_UPGRADE_VERSIONS})
{
	my %want = map { $_ => 1 } split /[\s,]+/, $only;
	@versions = grep { $want{$_} } @versions;
}
plan skip_all => "no released version before $target in the history of $repo" unless @versions;
note("upgrades to $target from: " . join(', ', map { "$_ ($release{$_})" } @versions));

# ---- a private copy of the PostgreSQL installation ----------------------

my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
my %pg;
for my $k (qw(bindir sharedir pkglibdir includedir pkgincludedir includedir-server))
{
	my ($ok, $out, $err) = run_cmd($pg_config, "--$k");
	die "$pg_config --$k failed: $err" unless $ok;
	chomp $out;
	$pg{$k} = $out;
}
my $tmp  = PostgreSQL::Test::Utils::tempdir();
my $copy = "$tmp/pg";
for my $k (qw(bindir pkglibdir sharedir))
{
	next if -d "$copy$pg{$k}";    # (pkglibdir inside bindir's parent, ...)
	make_path(dirname("$copy$pg{$k}"));
	my ($ok, undef, $err) = run_cmd('cp', '-a', $pg{$k}, "$copy$pg{$k}");
	die "could not copy $pg{$k}: $err" unless $ok;
}
# The headers are only read (by a build with the copy's pg_config).
for my $k (qw(includedir pkgincludedir includedir-server))
{
	next if -e "$copy$pg{$k}";
	make_path(dirname("$copy$pg{$k}"));
	symlink($pg{$k}, "$copy$pg{$k}") or die "could not link $copy$pg{$k}: $!";
}
my $install   = dirname("$copy$pg{bindir}");    # what PostgreSQL::Test::Cluster runs
my $copy_pgc  = "$copy$pg{bindir}/pg_config";
my $pkglibdir = "$copy$pg{pkglibdir}";
my $extdir    = "$copy$pg{sharedir}/extension";
{
	my ($ok, $out) = run_cmd($copy_pgc, '--pkglibdir');
	chomp $out;
	is($out, $pkglibdir, "the copy of PostgreSQL finds its libraries in the copy");
}

# ---- the builds: the current tree, then each release, in the background -

sub shq
{
	my ($s) = @_;
	$s =~ s/'/'\\''/g;
	return "'$s'";
}

my $builds = "$tmp/builds";
make_path($builds);
my $make_args = join(' ', '-s', '-j2', 'PG_CONFIG=' . shq($copy_pgc), 'with_llvm=no', shq('COPT=-O0 -g0'));
my $script = "set -u\n"
  . "build() { local s=\$SECONDS; if make -C \"\$2\" $make_args >" . shq($builds) . "/\$1.log 2>&1; "
  . "then touch " . shq($builds) . "/\$1.ok; else touch " . shq($builds) . "/\$1.failed; fi; "
  . "echo \"\$1 built in \$((SECONDS - s)) s\"; }\n";
# The tree under test, as it is (built objects included: make rebuilds only
# what is out of date).
my $cur = shq("$builds/current");
$script .= "mkdir -p $cur && cp -a "
  . join(' ', map { shq("$repo/$_") } grep { -e "$repo/$_" } qw(Makefile streamwin.control src sql streamwin.so))
  . " $cur/ && build current $cur || touch " . shq("$builds/current.failed") . "\n";
for my $v (@versions)
{
	my $d = shq("$builds/$v");
	$script .= "mkdir -p $d && " . join(' ', map { shq($_) } @git, 'archive', $release{$v})
	  . " | tar -x -C $d && build $v $d || touch " . shq("$builds/$v.failed") . "\n";
}
my $build_run = IPC::Run::start([ 'bash', '-c', $script ], '<', \undef, '>', "$builds/build.out", '2>&1');
END { $build_run->kill_kill if $build_run && $build_run->pumpable; }

# Put build $name (current or a version) into the copy, in place of what
# was there, as a package upgrade would.
sub install_build
{
	my ($name) = @_;
	my $limit = time + 600;
	usleep(100_000) until -e "$builds/$name.ok" || -e "$builds/$name.failed" || time > $limit;
	if (!-e "$builds/$name.ok")
	{
		my $log = -e "$builds/$name.log" ? slurp_file("$builds/$name.log") : '';
		$log .= slurp_file("$builds/build.out") if -e "$builds/build.out";
		die "the build of $name failed:\n$log";
	}
	unlink "$pkglibdir/streamwin.so", glob("$extdir/streamwin*");
	remove_tree("$pkglibdir/bitcode/streamwin");
	unlink "$pkglibdir/bitcode/streamwin.index.bc";
	my ($ok, $out, $err) = run_cmd('make', '-C', "$builds/$name", '-s', "PG_CONFIG=$copy_pgc",
		'with_llvm=no', 'COPT=-O0 -g0', 'install');
	die "make install of $name into the copy failed:\n$out$err" unless $ok;
	return;
}

# ---- the events -------------------------------------------------------------

my $T0       = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $NPART    = 2;
my $DELAY_MS = 1_000;
my $GAP_MS   = 150;     # session gap

my $broker = StreamwinTest::Broker->start(
	topics => { map { ('ev_' . ($_ =~ tr/./_/r) => $NPART) } @versions });
my $brokers = $broker->bootstrap;

# [id, k, v, ts_ms, partition]: partitions round robin, each in time order
# up to 300 ms (within the watermark's delay: no row is late).  Chunk 1
# goes to the old library; chunk 2 arrives while the server runs the new
# library, before ALTER EXTENSION UPDATE, and begins with the last 20
# events of chunk 1 again, as a retrying producer would send them (each
# within 700 ms of its partition's newest event: not late); chunk 3 comes
# after a crash.
my @chunks = map {
	[ map { [ $_, 'k' . int(rand(5)), int(rand(100)), $T0 + $_ * 20 - int(rand(300)), $_ % $NPART ] } @$_ ]
} ([ 0 .. 399 ], [ 400 .. 599 ], [ 600 .. 799 ]);
unshift @{ $chunks[1] }, map { [@$_] } @{ $chunks[0] }[ -20 .. -1 ];

sub payload
{
	my ($e) = @_;
	return sprintf('{"id": %d, "k": "%s", "v": %d, "ts": "%s"}', $e->[0], $e->[1], $e->[2], ts_text($e->[3]));
}

sub values_list
{
	return join(', ', map { sprintf("(%d, '%s', %d, '%s')", $_->[0], $_->[1], $_->[2], ts_text($_->[3])) } @{ $_[0] });
}

# The watermark once chunks 1..$n are in: per partition the newest event
# time minus the delay, the smallest of those.
sub watermark_after
{
	my ($n) = @_;
	my %max;
	for my $e (map { @$_ } @chunks[ 0 .. $n - 1 ])
	{
		$max{ $e->[4] } = $e->[3] if !defined $max{ $e->[4] } || $e->[3] > $max{ $e->[4] };
	}
	return min(values %max) - $DELAY_MS;
}

# Chunk $n of the Kafka events, and of the plain table ev holding them all.
sub send_chunk
{
	my ($node, $topic, $n) = @_;
	$node->safe_psql('postgres', 'INSERT INTO ev VALUES ' . values_list($chunks[ $n - 1 ]));
	$broker->produce($topic, [ map { [ $_->[4], payload($_) ] } @{ $chunks[ $n - 1 ] } ]);
	return;
}

# Chunk $n of the orders of the table source: 60 of them, in two
# transactions.
sub insert_orders
{
	my ($node, $n) = @_;
	my $from = ($n - 1) * 60;
	psql_ok($node, join('',
			map { "INSERT INTO orders SELECT g, g * 7 % 101 FROM generate_series($_->[0], $_->[1]) g;\n" }
			  ([ $from + 1, $from + 30 ], [ $from + 31, $from + 60 ])),
		"chunk $n of the orders inserted");
	return;
}

# ---- the checks ---------------------------------------------------------------

my $aggs = 'count(*)::bigint AS n, sum(v)::bigint AS s';

# Every query holds exactly chunks 1..$n (but q_paused if stopped => 1,
# q_dedup if no_dedup => 1), and
# the append query's watermark is the one of those chunks.  One statement
# compares them all, in one snapshot, until they match (each comparison is
# then a passed test); on a timeout each is compared on its own, showing
# what differs.
sub check_results
{
	my ($node, $v, $n, $tables, $when, %o) = @_;
	my $stopped = $o{stopped};
	my $W      = watermark_after($n);
	my @checks = (
		[
			"the running aggregate (update mode) equals plain SQL",
			'SELECT k, n, s FROM q_upd', "SELECT k, $aggs FROM ev GROUP BY k"
		],
		[
			"the transform has every event",
			'SELECT id, k, v2, ts FROM q_tx', 'SELECT id, k, v * 2, ts FROM ev WHERE v % 3 <> 0'
		],
		(
			$o{no_dedup} ? () : [
				"the deduplicating transform has every event once",
				'SELECT id, k, v, ts FROM q_dedup', 'SELECT DISTINCT id, k, v, ts FROM ev'
			]
		),
		(
			$stopped ? () : [
				"the min/max/avg aggregate equals plain SQL",
				'SELECT k, lo, hi, a, n FROM q_paused',
				'SELECT k, min(v), max(v), avg(v), count(*)::bigint FROM ev GROUP BY k'
			]
		),
		[
			"the session windows (update mode) equal plain SQL",
			'SELECT window_start, window_end, k, n, s FROM q_sess',
			# per key, a session ends where the next event is $GAP_MS or more later
			qq{SELECT min(ts), max(ts) + interval '$GAP_MS milliseconds', k, $aggs
  FROM (SELECT *, sum(brk) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid
          FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts)
                                    < interval '$GAP_MS milliseconds' THEN 0 ELSE 1 END AS brk
                  FROM ev) e) e
 GROUP BY k, sid}
		],
		[
			"the watermark of the window queries is " . ts_text($W),
			"SELECT string_agg((round(extract(epoch FROM watermark) * 1000))::text, '/' ORDER BY name)"
			  . " FROM streamwin.queries WHERE name IN ('q_app', 'q_hop')",
			"$W/$W"
		],
		[
			"the append query has exactly the windows its watermark closed",
			'SELECT window_start, window_end, k, n, s FROM q_app',
			'SELECT * FROM (' . windows_sql(table => 'ev', size => 2, keys => 'k', aggs => $aggs)
			  . ") w WHERE window_end <= '@{[ts_text($W)]}'"
		],
		[
			"the hopping windows (append mode) are exactly those its watermark closed",
			'SELECT window_start, window_end, k, n, s FROM q_hop',
			'SELECT * FROM ('
			  . windows_sql(table => 'ev', size => 2, slide => 1, keys => 'k', aggs => $aggs)
			  . ") w WHERE window_end <= '@{[ts_text($W)]}'"
		],
		(
			$tables ? [
				"the aggregate over the table source equals plain SQL",
				'SELECT g, n, total FROM q_tab',
				'SELECT id % 3 AS g, count(*)::bigint, sum(amount)::bigint FROM orders GROUP BY 1'
			] : ()
		));
	# a multiset comparison gives the number of differing rows, a value itself
	my @exprs = map {
		$_->[2] =~ /^SELECT/
		  ? "(SELECT count(*) FROM ((SELECT * FROM ($_->[1]) g EXCEPT ALL SELECT * FROM ($_->[2]) w)"
		  . " UNION ALL (SELECT * FROM ($_->[2]) w EXCEPT ALL SELECT * FROM ($_->[1]) g)) d)::text"
		  : "($_->[1])::text"
	} @checks;
	my $want  = join(' ', map { $_->[2] =~ /^SELECT/ ? 0 : $_->[2] } @checks);
	my $sql   = 'SELECT concat_ws(\' \', ' . join(",\n", @exprs) . ')';
	my $limit = time + $StreamwinTest::timeout;
	my ($out, $err) = ('', '');
	while (time < $limit)
	{
		(undef, $out, $err) = StreamwinTest::_psql($node, $sql, on_error_stop => 0);
		last if $out eq $want && $err eq '';
		usleep(100_000);
	}
	if ($out eq $want && $err eq '')
	{
		pass("$v: $_->[0] $when") for @checks;
		return;
	}
	diag("timed out after $StreamwinTest::timeout s waiting for every result $when: "
		  . "got \"$out\", want \"$want\" $err");
	diag_queries($node);
	for my $c (@checks)
	{
		if ($c->[2] =~ /^SELECT/)
		{
			results_match($node, $c->[1], $c->[2], "$v: $c->[0] $when");
		}
		else
		{
			is($node->safe_psql('postgres', $c->[1]), $c->[2], "$v: $c->[0] $when");
		}
	}
	return;
}

# Lines of the server log from byte $pos on that match $re.
sub log_lines_since
{
	my ($node, $pos, $re) = @_;
	my $log = slurp_file($node->logfile);
	return grep { /$re/ } split /\n/, substr($log, $pos);
}

# A launcher round every second (the current library's setting; the old
# ones warn about it); checkpoints only at a query's first batch, so that
# the crash after the update restores a checkpoint of the old library and
# replays the old library's batches from their batch log, then the new's.
my $conf = "streamwin.launcher_naptime = 1\nstreamwin.checkpoint_interval = 100000\njit = off\n";

sub upgrade_from
{
	my ($v) = @_;
	my $topic = 'ev_' . ($v =~ tr/./_/r);
	my $t0    = time;

	# ---- 1. the release's library and catalog -----------------------------
	install_build($v);
	my $node = new_node('v' . ($v =~ tr/./_/r), install_path => $install, extension => 0, conf => $conf);
	psql_ok($node, "CREATE EXTENSION streamwin VERSION '$v'", "$v: CREATE EXTENSION streamwin VERSION '$v'");
	my $tables = $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_proc WHERE proname = 'create_table_source'
		     AND pronamespace = 'streamwin'::regnamespace}) eq '1';
	psql_ok($node, user_role_sql('dora') . qq{
SELECT streamwin.create_kafka_source('evs', '$brokers', '$topic',
    'id int, k text, v int, ts timestamptz', 'json');
GRANT SELECT ON evs TO dora;
}, "$v: a Kafka source, and role dora");
	psql_ok($node, qq{
SELECT streamwin.create_query('q_app',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM evs GROUP BY streamwin.tumble(ts, '2 seconds'), k\$q\$,
    watermark => '$DELAY_MS milliseconds', trigger_interval => '100 ms',
    options => '{"idle_timeout": "1 hour"}');
SELECT streamwin.create_query('Q_Upd', 'SELECT k, count(*) AS n, sum(v) AS s FROM evs GROUP BY k',
    output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('q_tx', 'SELECT id, k, v * 2 AS v2, ts FROM evs WHERE v % 3 <> 0',
    trigger_interval => '100 ms');
SELECT streamwin.create_query('q_dedup', 'SELECT id, k, v, ts FROM evs',
    dedup_keys => '{id}', watermark => '$DELAY_MS milliseconds', trigger_interval => '100 ms',
    options => '{"event_time": "ts", "idle_timeout": "1 hour"}');
SELECT streamwin.create_query('q_paused',
    'SELECT k, min(v) AS lo, max(v) AS hi, avg(v) AS a, count(*) AS n FROM evs GROUP BY k',
    output_mode => 'update', trigger_interval => '100 ms');
SELECT streamwin.create_query('q_hop',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM evs
         GROUP BY streamwin.hop(ts, '2 seconds', '1 second'), k\$q\$,
    watermark => '$DELAY_MS milliseconds', trigger_interval => '100 ms',
    options => '{"idle_timeout": "1 hour"}');
SELECT streamwin.create_query('q_sess',
    \$q\$SELECT k, count(*) AS n, sum(v) AS s FROM evs
         GROUP BY streamwin.session(ts, '$GAP_MS milliseconds'), k\$q\$,
    output_mode => 'update', trigger_interval => '100 ms');
}, "$v: dora creates seven running queries with the $v library", extra_params => [ '-U', 'dora' ]);
	if ($tables)
	{
		psql_ok($node, q{
CREATE TABLE orders (id int, amount int);
SELECT streamwin.create_table_source('orders_src', 'orders');
GRANT SELECT ON orders_src TO dora;
-- (0.2 to 0.4 check that the creator of a query may read the table too)
GRANT SELECT ON orders TO dora;
}, "$v: a table source");
		psql_ok($node, q{
SELECT streamwin.create_query('q_tab',
    'SELECT id % 3 AS g, count(*) AS n, sum(amount) AS total FROM orders_src GROUP BY id % 3',
    output_mode => 'update', trigger_interval => '100 ms');
}, "$v: dora creates a running query over it", extra_params => [ '-U', 'dora' ]);
	}
	my @running = ('q_app', 'q_dedup', 'q_hop', 'q_sess', ($tables ? 'q_tab' : ()), 'q_tx', 'q_upd');
	my $nq      = @running;

	$node->safe_psql('postgres', 'CREATE TABLE ev (id int, k text, v int, ts timestamptz)');
	send_chunk($node, $topic, 1);
	insert_orders($node, 1) if $tables;
	# 0.1 and 0.2 gave a role's dedup table to the extension owner (their
	# dedup_statements read the current role after switching to it; 0.3
	# fixed new queries): there, dora's q_dedup fails at every batch, and
	# the update must give it the table.
	my $dedup_bug = vcmp($v, '0.3') < 0;
	check_results($node, $v, 1, $tables, "with the $v library", no_dedup => $dedup_bug);
	wait_until($node,
		"SELECT state, last_error LIKE 'permission denied for table dedup\\_%' FROM streamwin.queries "
		  . "WHERE name = 'q_dedup'",
		'failed|t', "$v: (known bug of $v) dora's q_dedup fails, denied its own dedup table")
	  if $dedup_bug;
	psql_ok($node, "SELECT streamwin.stop_query('q_paused')", "$v: q_paused stopped");
	wait_until($node, "SELECT state, worker_pid IS NULL FROM streamwin.queries WHERE name = 'q_paused'",
		'stopped|t', "$v: q_paused has no worker");
	my $t1 = time;

	# ---- 2. the current library, the catalog still at $v ------------------
	$node->stop;
	install_build('current');
	my $logpos = -s $node->logfile;
	$node->start;
	my $mismatch = "streamwin's catalog in this database is at version $v, "
	  . "but its library needs version $target";
	my $hint = 'HINT: Run ALTER EXTENSION streamwin UPDATE in this database.';
	my $t2   = time;
	wait_until($node, qq{
SELECT string_agg(lower(name) || ' ' || state || ' ' || (worker_pid IS NULL) || ' ' ||
                  CASE WHEN last_error = \$m\$$mismatch\n$hint\$m\$ THEN 'the versions and the hint'
                       ELSE coalesce(last_error, 'no error') END,
                  ', ' ORDER BY lower(name))
  FROM streamwin.queries WHERE name <> 'q_paused'},
		join(', ', map { "$_ failed true the versions and the hint" } @running),
		"$v: with the $target library every running query shows failed, no worker, the versions and the hint");
	note(sprintf('%s: the queries said so %.1f s after the start', $v, time - $t2));
	is($node->safe_psql('postgres',
			"SELECT state, worker_pid IS NULL, last_error IS NULL FROM streamwin.queries WHERE name = 'q_paused'"),
		'stopped|t|t', "$v: the stopped query stays stopped, without an error");
	fails_like($node, "SELECT streamwin.start_query('q_upd')",
		qr/\Q$mismatch\E.*HINT:  Run ALTER EXTENSION streamwin UPDATE in this database/s,
		"$v: start_query says the same before the update");
	is(join("\n", log_lines_since($node, $logpos, qr/does not exist/)), '',
		"$v: nothing in the server log does not exist, before the update");

	# Chunk 2 comes while the queries wait for the update.
	send_chunk($node, $topic, 2);
	insert_orders($node, 2) if $tables;

	# ---- 3. ALTER EXTENSION UPDATE: the queries go on, exactly ------------
	psql_ok($node, 'ALTER EXTENSION streamwin UPDATE', "$v: ALTER EXTENSION streamwin UPDATE");
	is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'streamwin'"),
		$target, "$v: the catalog is at $target");
	wait_until($node, q{
SELECT string_agg(name || ' ' || state || ' ' || (worker_pid IS NOT NULL), ', ' ORDER BY name)
  FROM streamwin.queries WHERE name <> 'q_paused'},
		join(', ', map { "$_ running true" } @running),
		"$v: after the update, every running query runs again, with a worker, without start_query");
	check_results($node, $v, 2, $tables, "after the update from $v", stopped => 1);
	psql_ok($node, "SELECT streamwin.start_query('q_paused')", "$v: start_query of the stopped query");
	check_results($node, $v, 2, $tables, "after the update from $v and start_query");

	# ---- 4. a crash: the old library's checkpoints and batches replay ------
	$node->stop('immediate');
	my $crashpos = -s $node->logfile;
	$node->start;
	send_chunk($node, $topic, 3);
	insert_orders($node, 3) if $tables;
	check_results($node, $v, 3, $tables, "after a crash after the update from $v");
	my %restored = map { /query "(\w+)" lost its state in a crash; restoring the checkpoint of batch (\d+)/ ? ($1 => $2) : () }
	  log_lines_since($node, $crashpos, qr/lost its state in a crash/);
	my @stateful = grep { $_ ne 'q_tx' } @running, 'q_paused';
	is(join(' ', sort grep { defined $restored{$_} } @stateful), join(' ', sort @stateful),
		"$v: after the crash every query with state restored its checkpoint");
	note("$v: checkpoints restored after the crash: "
		  . join(', ', map { "$_ of batch $restored{$_}" } sort keys %restored));

	is( $node->safe_psql('postgres',
			"SELECT string_agg(name, ', ' ORDER BY name) FROM streamwin.queries WHERE state <> 'running'"),
		'', "$v: every query is running at the end");
	is(join("\n", log_lines_since($node, $logpos, qr/does not exist/)), '',
		"$v: nothing in the server log does not exist, after the update");
	my @errors = log_lines_since($node, $logpos, qr/\b(ERROR|FATAL|PANIC):/);
	note("$v: errors in the server log since the library changed:\n" . join("\n", @errors)) if @errors;
	$node->stop;
	note(sprintf('%s: %.1f s with the old library, %.1f s from the upgrade on', $v, $t1 - $t0, time - $t1));
	return;
}

upgrade_from($_) for @versions;

$broker->stop;
$build_run->finish;
note(slurp_file("$builds/build.out"));
note(sprintf('%.1f s in all', time - $started));
done_testing();
