
# 021_store_fold.pl: a state store that folds a batch's rows itself
# (streamwin.store_merge = rows) against one that merges the groups the
# executor aggregates (groups), and both against plain SQL.
#
# Each query is created three times over the same table source, and each
# copy runs its batches in a session of its own with store_merge set to
# groups, rows or auto.  Batches of 500 rows: many rows of a group in a
# batch, groups the store had before the batch and new ones, NULL
# arguments, a FILTER, windows and no window, update, append and complete
# mode.  After every round:
#   - the three results are the same, row for row and to the last bit of
#     every float (EXCEPT ALL over their text, which is exact for float8);
#   - the result equals plain SQL over the events: exactly in every column
#     but the float sums and averages, which plain SQL adds in its own
#     order, and which must agree to 1e-9 of their size;
#   - the state table holds exactly the open groups.
# The store's DEBUG1 message says which it merged: rows where set, groups
# where set, and in auto, rows after a batch of one group per row, groups
# after a batch of few, full groups.  A query the rows cannot fold into
# (a hop window, min of a float) merges groups whatever the setting.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use StreamwinTest;

my $T0 = "timestamptz '2024-01-01 00:00:00+00'";
my $node = new_node('fold');

psql_ok($node, q{
CREATE TABLE ev (id bigserial, k int, v float8, vi int, b bool, ts timestamptz);
SELECT streamwin.create_table_source('src', 'ev', '{"max_records_per_batch": 500}');
}, 'a table source of batches of 500 rows');

# The aggregates: every kind the rows fold (count, sum, avg of floats and
# integers, min and max of integers and times, bool_and, bool_or, a FILTER).
my $AGGS = 'count(*) AS n, count(vi) AS nv, sum(v) AS s, avg(v) AS a, sum(vi) AS si, '
  . 'min(vi) AS lo, max(ts) AS last, bool_and(b) AS ba, bool_or(b) AS bo, '
  . 'sum(v) FILTER (WHERE vi > 500) AS sf';
my %queries = (
	upd => [ "SELECT k, $AGGS FROM src GROUP BY streamwin.tumble(ts, '1 minute'), k", 'update', 'NULL' ],
	app => [ "SELECT k, $AGGS FROM src GROUP BY streamwin.tumble(ts, '1 minute'), k", 'append',
		"'30 seconds'" ],
	cmp => [ "SELECT k % 7 AS k7, $AGGS FROM src GROUP BY k % 7", 'complete', 'NULL' ],
	hop => [ "SELECT k, count(*) AS n, sum(v) AS s FROM src GROUP BY streamwin.hop(ts, '1 minute', '30 seconds'), k",
		'update', 'NULL' ],
	flt => [ "SELECT k, min(v) AS lo, count(*) AS n FROM src GROUP BY k", 'update', 'NULL' ],
);
my @modes = qw(groups rows auto);
for my $q (sort keys %queries)
{
	my ($sql, $mode, $wm) = @{ $queries{$q} };
	psql_ok($node,
		join('', map { "SELECT streamwin.create_query('${q}_$_', \$q\$$sql\$q\$, output_mode => '$mode', "
			  . "watermark => $wm, start => false);\n" } @modes),
		"$q: three copies");
}

sub state_table
{
	my ($q) = @_;
	return $node->safe_psql('postgres', "SELECT state_table FROM streamwin.queries WHERE name = '$q'");
}

my %sess;
for my $m (@modes)
{
	$sess{$m} = store_session($node);
	sess_ok($sess{$m}, "SET streamwin.store_merge = $m");
}

# Every copy reads what there is, in its session; returns the DEBUG1 lines.
sub catch_up
{
	my %said;
	for my $m (@modes)
	{
		for my $q (sort keys %queries)
		{
			my ($out, $err) = sess($sess{$m},
				"SET client_min_messages = debug1; CALL streamwin.catch_up('${q}_$m');"
				  . " SET client_min_messages = warning");
			$said{"${q}_$m"} = [ $err =~ /query "${q}_$m" merges (\d+ \w+) into its store/g ];
			fail("${q}_$m catches up") if $err =~ /ERROR/;
		}
	}
	return \%said;
}

# n events: g runs 1..n in the expressions for k and ts; v and vi from g
# and seed, with NULLs
sub events
{
	my ($n, $seed, $k, $ts) = @_;
	$node->safe_psql('postgres', qq{
INSERT INTO ev (k, v, vi, b, ts)
SELECT $k,
       CASE WHEN (g + $seed) % 13 = 0 THEN NULL ELSE ((g * 7919 + $seed) % 10007) / 7.0::float8 END,
       CASE WHEN (g + $seed) % 11 = 0 THEN NULL ELSE (g * 31 + $seed) % 1000 END,
       CASE WHEN (g + $seed) % 17 = 0 THEN NULL ELSE (g + $seed) % 5 <> 0 END,
       $ts
FROM generate_series(1, $n) g});
	return;
}

# Per query: its group columns, the other columns plain SQL gives exactly,
# the float sums and averages (plain SQL adds them in an order of its own),
# and plain SQL over the events, in the result's columns.
my $tum = "streamwin.tumble(ts, '1 minute')";
my $EXACT = 'n, nv, si, lo, last, ba, bo';
my $FLOATS = 's, a, sf';
my %plain = (
	upd => [ 'window_start, window_end, k', $EXACT, $FLOATS,
		"SELECT $tum AS window_start, $tum + interval '1 minute' AS window_end, k, $AGGS FROM ev GROUP BY 1, 2, 3" ],
	app => [ 'window_start, window_end, k', $EXACT, $FLOATS,
		"SELECT * FROM (SELECT $tum AS window_start, $tum + interval '1 minute' AS window_end, k, $AGGS"
		  . " FROM ev GROUP BY 1, 2, 3) x WHERE window_end <= (SELECT max(ts) - interval '30 seconds' FROM ev)" ],
	cmp => [ 'k7', $EXACT, $FLOATS, "SELECT k % 7 AS k7, $AGGS FROM ev GROUP BY 1" ],
	hop => [ 'window_start, window_end, k', 'n', 's',
		"SELECT ws AS window_start, ws + interval '1 minute' AS window_end, k, count(*) AS n, sum(v) AS s FROM ev,"
		  . " LATERAL (VALUES (streamwin.tumble(ts, '30 seconds')),"
		  . " (streamwin.tumble(ts, '30 seconds') - interval '30 seconds')) AS h(ws) GROUP BY 1, 2, 3" ],
	flt => [ 'k', 'lo, n', undef, "SELECT k, min(v) AS lo, count(*) AS n FROM ev GROUP BY k" ],
);

# The copies of each query give the same rows to the bit, and plain SQL's:
# the same groups and exact columns, and float columns within 1e-9 of
# their size.
sub check
{
	my ($when) = @_;
	for my $q (sort keys %queries)
	{
		my ($keys, $exact, $floats, $want) = @{ $plain{$q} };
		my $all = join(', ', grep { defined } $keys, $exact, $floats);
		results_match($node, "SELECT $all FROM ${q}_$_", "SELECT $all FROM ${q}_groups",
			"$q: $_ gives what groups gives, to the bit, $when")
		  for qw(rows auto);
		results_match($node, "SELECT $keys, $exact FROM ${q}_rows", "SELECT $keys, $exact FROM ($want) w",
			"$q: rows give plain SQL's groups, $when");
		next unless defined $floats;
		my $far = join(' OR ', map {
			"NOT ((g.$_ IS NULL AND w.$_ IS NULL) OR abs(g.$_ - w.$_) <= 1e-9 * greatest(1, abs(w.$_)))"
		} split /, /, $floats);
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM ${q}_rows g JOIN ($want) w USING ($keys) WHERE $far"),
			'0', "$q: rows give plain SQL's sums and averages, $when");
	}
	return;
}

# 1. Few keys, many rows each in a batch: 3,000 events to 40 keys, 10 ms
# apart (30 s, one window or two).
events(3000, 1, 'g % 40', "$T0 + g * interval '10 ms'");
my $said = catch_up();
check('after 3,000 events to 40 keys');
is_deeply($said->{upd_rows}, [ map { '500 rows' } 1 .. 6 ], 'upd_rows folds every batch\'s 500 rows');
# every batch's message, each saying groups
sub all_groups
{
	my ($said) = @_;
	return @$said == 6 && !grep { !/ groups$/ } @$said;
}
ok(all_groups($said->{upd_groups}), 'upd_groups merges groups');
ok(all_groups($said->{upd_auto}), 'upd_auto merges groups of batches with 12-13 rows a group');
ok(all_groups($said->{$_}), "$_ merges groups whatever the setting") for qw(hop_rows flt_rows);

# 2. A key per row, most of them new: 2,000 events to keys 1000 apart,
# mostly new, some the store has (k < 40), then again to those same keys
# (groups the store had, one row each) in the next window.
events(2000, 2, "CASE WHEN g % 50 = 0 THEN g % 40 ELSE 1000 + g END", "$T0 + interval '31 s' + g * interval '10 ms'");
$said = catch_up();
check('after 2,000 events to new keys');
like($said->{upd_auto}[0], qr/ groups$/, 'upd_auto: groups in the batch after one of few groups');
is_deeply([ @{ $said->{upd_auto} }[ 1 .. 3 ] ], [ map { '500 rows' } 1 .. 3 ],
	'upd_auto: rows in the batches after one of a group per row');
events(2000, 3, "CASE WHEN g % 3 = 0 THEN g % 40 ELSE 1000 + g END", "$T0 + interval '52 s' + g * interval '20 ms'");
catch_up();
check('after 2,000 events to keys seen before, over a window\'s end');

# 3. Again few keys, in later windows: auto goes back to groups; the
# watermark closes the earlier windows of append mode.
events(3000, 4, 'g % 25', "$T0 + interval '100 s' + g * interval '20 ms'");
$said = catch_up();
check('after 3,000 more events to 25 keys');
like($said->{upd_auto}[-1], qr/ groups$/, 'upd_auto: groups again after batches of full groups');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM app_rows'), '>', 40, 'app_rows: closed windows');
for my $m (@modes)
{
	results_match($node,
		"SELECT window_start, k, \"n\$count\", \"s\$sum\", \"si\$sum\", \"lo\$min\" FROM " . state_table("upd_$m"),
		"SELECT window_start, k, n, s, si, lo FROM upd_groups", "upd_$m: its state table holds every group");
}

$_->quit for values %sess;
done_testing();
