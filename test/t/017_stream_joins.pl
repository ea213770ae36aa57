# 017_stream_joins.pl: stream-stream joins end to end, exact.
#
# Two Kafka topics, impressions (3 partitions) and clicks (2 partitions),
# over two hours of event time: about 50 ads, 0 to 2 clicks per impression
# at 0 to 12 minutes after it (so that some fall outside the 10-minute
# range, some exactly on its ends), some clicks before their impression,
# some clicks for ads without impressions.  Each partition is nearly in
# event-time order (jitter <= 20 s, watermark delay 1 minute), so no row is
# late.  Running queries:
#
#   j_inner    inner join transform
#   j_left     LEFT JOIN transform (impressions preserved)
#   j_right    RIGHT JOIN transform (clicks preserved)
#   j_agg      windowed aggregate over the inner join, append mode
#   j_left_agg windowed aggregate over the LEFT join, and an ordinary
#              table joined to it, update mode
#   j_right_agg windowed aggregate over the RIGHT join by click time,
#              append mode
#   j_mixed    inner join of a table source (impressions inserted into an
#              ordinary table) with the clicks topic
#
# The sides are produced in chunks so that each is read far ahead of the
# other, with workers killed (SIGKILL) twice and an immediate stop and
# start of the server while the queries consume (a checkpoint every 3
# batches, so that recovery restores one and replays).  Then one "flush" event far in the
# future in every partition of both topics (ad ids that match nothing)
# moves the watermark past every real row's range.  Every result is
# compared, as a multiset, with plain SQL joining the same events loaded
# into ordinary tables: before the flush with what the watermark allows
# (outer joins' rows without a match, closed windows), after it in full.
# The join state (progress.state_rows) is checked after every batch
# against the rows that batch's offsets and watermark say must be kept.
#
# Then, by hand over the same topics: stopped queries of other shapes
# (clicks first, a range reaching both before and after the click, a
# window over side 1's time, a comma join); and a deterministic crash in
# which recovery replays batches that let rows without a match go.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use StreamwinTest;

srand(1717);

my $started = time;
my $T0 = 1_704_067_200_000;    # 2024-01-01 00:00:00 UTC, in ms
my $NIMP_PART = 3;
my $NCLK_PART = 2;
my $NIMP = 3000;
my $RANGE = 600_000;           # the join's range: 10 minutes
my $FLUSH = $T0 + 86_400_000;  # a day later

my $broker = StreamwinTest::Broker->start(
	topics => { imps => $NIMP_PART, clks => $NCLK_PART, dimps => 1, dclks => 1, vimps => 1, vclks => 1,
		kimps => 1, kclks => 1 });
my $node = new_node('joins',
	conf => "streamwin.checkpoint_interval = 3\nstreamwin.checkpoint_min_interval = 0\n"
	  . "streamwin.progress_retention = 100000\nrestart_after_crash = on\n");
my $brokers = $broker->bootstrap;

# --- the events ---------------------------------------------------------------

# Event times are whole seconds, so that rows fall exactly on the
# watermark's cutoffs (t + 10 minutes = watermark, t = watermark) and on
# the ends of windows often.
# impressions [imp_id, ad_id, imp_time_ms, user_id]
my @imps;
for my $i (0 .. $NIMP - 1)
{
	push @imps, [ $i, int(rand(50)), $T0 + 1000 * int($i * 2.4 + rand(1)), int(rand(200)) ];
}
# clicks [click_id, ad_id, click_time_ms, cost, user_id]
my @clks;
for my $imp (@imps)
{
	for (1 .. int(rand(3)))
	{
		my $r = rand();
		my $t =
			$r < 0.10 ? $imp->[2] - 1000 * (1 + int(rand(180)))    # before its impression
		  : $r < 0.13 ? $imp->[2]                                  # on the range's ends
		  : $r < 0.16 ? $imp->[2] + $RANGE
		  : $r < 0.18 ? $imp->[2] + $RANGE + 1000                  # just outside
		  :             $imp->[2] + 1000 * int(rand(721));         # 0 to 12 minutes
		push @clks, [ scalar(@clks), $imp->[1], $t, 1 + int(rand(100)), int(rand(200)) ];
	}
}
for (1 .. 80)    # clicks of ads that have no impression
{
	push @clks, [ scalar(@clks), 50 + int(rand(5)), $T0 + 1000 * int(rand(7200)), 1 + int(rand(100)), int(rand(200)) ];
}

sub imp_json
{
	my ($e) = @_;
	return sprintf('{"imp_id": %d, "ad_id": %d, "imp_time": "%s", "user_id": %d}',
		$e->[0], $e->[1], ts_text($e->[2]), $e->[3]);
}
sub clk_json
{
	my ($e) = @_;
	return sprintf('{"click_id": %d, "ad_id": %d, "click_time": "%s", "cost": %d, "user_id": %d}',
		$e->[0], $e->[1], ts_text($e->[2]), $e->[3], $e->[4]);
}
# A topic's messages in the order they are produced: by event time plus a
# jitter of up to 20 s, partitions in turn.  Each event's place in that
# sequence, partition and offset go into %meta.
my (%imp_meta, %clk_meta);
my %ikey = map { $_->[0] => $_->[2] + int(rand(20_001)) } @imps;
my %ckey = map { $_->[0] => $_->[2] + int(rand(20_001)) } @clks;
my $imp_order = [ sort { $ikey{ $a->[0] } <=> $ikey{ $b->[0] } || $a->[0] <=> $b->[0] } @imps ];
my $clk_order = [ sort { $ckey{ $a->[0] } <=> $ckey{ $b->[0] } || $a->[0] <=> $b->[0] } @clks ];
sub number
{
	my ($order, $nparts, $meta, $payload) = @_;
	my @next = (0) x $nparts;
	my @msgs;
	for my $seq (0 .. $#$order)
	{
		my $e = $order->[$seq];
		my $p = $seq % $nparts;
		$meta->{ $e->[0] } = [ $seq, $p, $next[$p]++ ];
		push @msgs, [ $p, $payload->($e) ];
	}
	return \@msgs;
}
my $imp_msgs = number($imp_order, $NIMP_PART, \%imp_meta, \&imp_json);
my $clk_msgs = number($clk_order, $NCLK_PART, \%clk_meta, \&clk_json);

# the flush: one event a day later in every partition, matching nothing
my (@imp_flush, @clk_flush);
for my $p (0 .. $NIMP_PART - 1)
{
	my $e = [ 1_000_000 + $p, -1, $FLUSH, 0 ];
	push @imp_flush, $e;
	$imp_meta{ $e->[0] } = [ $NIMP + $p, $p, scalar(grep { $_->[0] == $p } @$imp_msgs) ];
}
for my $p (0 .. $NCLK_PART - 1)
{
	my $e = [ 1_000_000 + $p, -2, $FLUSH, 0, 0 ];
	push @clk_flush, $e;
	$clk_meta{ $e->[0] } = [ scalar(@clks) + $p, $p, scalar(grep { $_->[0] == $p } @$clk_msgs) ];
}

# Every message with its partition and offset, flush included (imp_all,
# clk_all); the real events (imps, clks) without the flush.
load_table($node, 'imp_all',
	'imp_id int, ad_id int, imp_time timestamptz, user_id int, seq int, part int, off bigint, flush boolean',
	[ map { [ $_->[0], $_->[1], ts_text($_->[2]), $_->[3], @{ $imp_meta{ $_->[0] } }, $_->[1] < 0 ? 't' : 'f' ] }
		  @imps, @imp_flush ]);
load_table($node, 'clk_all',
	'click_id int, ad_id int, click_time timestamptz, cost int, user_id int, seq int, part int, off bigint, flush boolean',
	[ map { [ $_->[0], $_->[1], ts_text($_->[2]), $_->[3], $_->[4], @{ $clk_meta{ $_->[0] } }, $_->[1] < 0 ? 't' : 'f' ] }
		  @clks, @clk_flush ]);
psql_ok($node, q{
CREATE TABLE imps AS SELECT imp_id, ad_id, imp_time, user_id FROM imp_all WHERE NOT flush;
CREATE TABLE clks AS SELECT click_id, ad_id, click_time, cost, user_id FROM clk_all WHERE NOT flush;
CREATE TABLE imp_t (imp_id int, ad_id int, imp_time timestamptz, user_id int);
CREATE TABLE ads AS SELECT g AS ad_id, 'campaign ' || g % 7 AS campaign FROM generate_series(0, 44) g;
}, 'the events in ordinary tables, and the ads of 45 of the 50 ads with impressions');

{
	my ($n_ends, $n_out, $n_unmatched, $n_orphan) = split /\|/, $node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM clks c JOIN imps i USING (ad_id)
         WHERE c.click_time IN (i.imp_time, i.imp_time + interval '10 minutes')),
       (SELECT count(*) FROM clks c JOIN imps i USING (ad_id)
         WHERE c.click_time = i.imp_time + interval '10 minutes 1 second'),
       (SELECT count(*) FROM clks c WHERE NOT EXISTS (SELECT FROM imps i WHERE i.ad_id = c.ad_id
           AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes')),
       (SELECT count(*) FROM clks c WHERE NOT EXISTS (SELECT FROM imps i WHERE i.ad_id = c.ad_id))});
	note("$NIMP impressions, " . scalar(@clks) . " clicks: $n_ends pairs on the range's ends, "
		  . "$n_out 1 s outside, $n_unmatched clicks without a match, $n_orphan of ads without impressions");
	ok($n_ends > 0 && $n_out > 0 && $n_unmatched > $n_orphan && $n_orphan > 0,
		'the data has pairs on and just outside the range\'s ends, and clicks without a match');
}

# --- the queries ----------------------------------------------------------------

my $on = q{ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'};
my $opts = q{watermark => '1 minute', trigger_interval => '50 ms', options => '{"idle_timeout": "10 minutes"}'};
my $pairs_cols = 'i.imp_id, i.ad_id, i.imp_time, c.click_id, c.click_time, c.cost';
my $agg_sql = qq{SELECT i.ad_id, count(*) AS n, sum(c.cost) AS cost, count(DISTINCT c.user_id) AS users
  FROM %s i JOIN %s c $on GROUP BY streamwin.tumble(i.imp_time, '15 minutes'), i.ad_id};
my $right_agg_sql = qq{SELECT c.ad_id, count(*) AS n, count(i.imp_id) AS imps, sum(c.cost) AS cost
  FROM %s i RIGHT JOIN %s c $on GROUP BY streamwin.tumble(c.click_time, '20 minutes'), c.ad_id};
# an ordinary table joined too, outside the sources' outer join
my $left_agg_sql = qq{SELECT a.campaign, count(*) AS n, count(c.click_id) AS clicks
  FROM %s i LEFT JOIN %s c $on JOIN ads a ON a.ad_id = i.ad_id
 GROUP BY streamwin.tumble(i.imp_time, '30 minutes'), a.campaign};
psql_ok($node, qq{
SELECT streamwin.create_kafka_source('imp_src', '$brokers', 'imps',
    'imp_id int, ad_id int, imp_time timestamptz, user_id int',
    options => '{"max_records_per_batch": 250}');
SELECT streamwin.create_kafka_source('clk_src', '$brokers', 'clks',
    'click_id int, ad_id int, click_time timestamptz, cost int, user_id int',
    options => '{"max_records_per_batch": 250}');
SELECT streamwin.create_table_source('imp_tsrc', 'imp_t', '{"max_records_per_batch": 250}');
SELECT streamwin.create_query('j_inner',
    \$q\$SELECT $pairs_cols FROM imp_src i JOIN clk_src c $on\$q\$, $opts);
SELECT streamwin.create_query('j_left',
    \$q\$SELECT $pairs_cols FROM imp_src i LEFT JOIN clk_src c $on\$q\$, $opts);
SELECT streamwin.create_query('j_right',
    \$q\$SELECT $pairs_cols, c.ad_id AS click_ad FROM imp_src i RIGHT JOIN clk_src c $on\$q\$, $opts);
SELECT streamwin.create_query('j_agg', \$q\$@{[ sprintf($agg_sql, 'imp_src', 'clk_src') ]}\$q\$, $opts);
SELECT streamwin.create_query('j_left_agg', \$q\$@{[ sprintf($left_agg_sql, 'imp_src', 'clk_src') ]}\$q\$,
    output_mode => 'update', $opts);
SELECT streamwin.create_query('j_right_agg', \$q\$@{[ sprintf($right_agg_sql, 'imp_src', 'clk_src') ]}\$q\$, $opts);
SELECT streamwin.create_query('j_mixed',
    \$q\$SELECT i.imp_id, c.click_id FROM imp_tsrc i JOIN clk_src c $on\$q\$, $opts);
}, 'seven running join queries');

my @kafka_queries = qw(j_agg j_inner j_left j_left_agg j_right j_right_agg);
my @transforms = qw(j_inner j_left j_right);

is($node->safe_psql('postgres', q{SELECT string_agg(name || ': ' || source, '; ' ORDER BY name)
  FROM streamwin.queries WHERE name LIKE 'j\_%'}),
	join('; ', (map { "$_: imp_src, clk_src" } @kafka_queries[0..3]), 'j_mixed: imp_tsrc, clk_src',
		map { "$_: imp_src, clk_src" } @kafka_queries[4..5]),
	'streamwin.queries.source lists both sources of each join, in FROM order');
{
	my $id = $node->safe_psql('postgres', q{SELECT query_id FROM streamwin.query_catalog WHERE name = 'j_inner'});
	is($node->safe_psql('postgres', qq{SELECT string_agg(relname || ':' || relpersistence::text, ' ' ORDER BY relname)
  FROM pg_class WHERE relnamespace = 'streamwin'::regnamespace AND relname IN ('join_left_$id', 'join_right_$id')}),
		"join_left_$id:u join_right_$id:u", 'the join state tables are UNLOGGED');
}

# --- producing in chunks ---------------------------------------------------------

my %produced = (imps => 0, clks => 0);    # how far each topic's sequence is produced

# Messages seq [from, to) of a topic's sequence.
sub chunk
{
	my ($topic, $to_frac, %opts) = @_;
	my $msgs = $topic eq 'imps' ? $imp_msgs : $clk_msgs;
	my $to = int(@$msgs * $to_frac);
	my @part = @$msgs[ $produced{$topic} .. $to - 1 ];
	note("producing $topic " . $produced{$topic} . " to $to");
	$produced{$topic} = $to;
	return $broker->produce($topic, \@part, %opts);
}

# The table source's impressions: seq [from, to) of the impressions'
# sequence, in ntx transactions.
my $tab_done = 0;
sub insert_imps
{
	my ($to_frac, $ntx) = @_;
	my $to = int($NIMP * $to_frac);
	my $sql = '';
	for my $k (1 .. $ntx)
	{
		my $b = $tab_done + int(($to - $tab_done) * ($k - 1) / $ntx);
		my $e = $tab_done + int(($to - $tab_done) * $k / $ntx);
		$sql .= "BEGIN; INSERT INTO imp_t SELECT imp_id, ad_id, imp_time, user_id FROM imp_all"
		  . " WHERE NOT flush AND seq >= $b AND seq < $e ORDER BY seq; COMMIT;\n";
	}
	$tab_done = $to;
	psql_ok($node, $sql, "impressions up to $to inserted into imp_t in $ntx transactions");
}

# What each query over the topics has read, per source: "i/c" messages.
my $read_sql = q{SELECT string_agg(q.name || ' ' || coalesce(x.s0, 0) || '/' || coalesce(x.s1, 0), ', ' ORDER BY q.name)
  FROM streamwin.query_catalog q
  LEFT JOIN LATERAL (SELECT sum(next_offset) FILTER (WHERE source_index = 0) AS s0,
                            sum(next_offset) FILTER (WHERE source_index = 1) AS s1
                       FROM streamwin.query_offsets o WHERE o.query_id = q.query_id) x ON true
 WHERE q.name IN ('} . join("', '", @kafka_queries) . q{')};
sub wait_consumed
{
	my ($what) = @_;
	wait_until($node, $read_sql,
		join(', ', map { "$_ $produced{imps}/$produced{clks}" } @kafka_queries),
		"every query over the topics has read what was produced ($what)");
}

sub wait_workers
{
	my ($what) = @_;
	wait_until($node, q{SELECT count(*) FROM streamwin.queries WHERE name LIKE 'j\_%' AND worker_pid IS NOT NULL},
		'7', "every join query has a worker $what");
}
sub read_by
{
	my ($q) = @_;
	return $node->safe_psql('postgres', $read_sql =~ s/WHERE q\.name IN \(.*\)/WHERE q.name = '$q'/sr);
}

wait_workers('at the start');

# 1. the first 40% of impressions, no click yet
chunk('imps', 0.4);
insert_imps(0.4, 3);
wait_consumed('impressions far ahead');
# 2. the first 10% of clicks
chunk('clks', 0.1);
wait_consumed('10% of clicks');
# 3. clicks up to 80% while impressions wait; a join worker is killed meanwhile
my $bg = chunk('clks', 0.8, rate => 800, background => 1);
usleep(1_200_000);
my $victim = worker_pid($node, 'j_left', 'to kill');
note('SIGKILL the worker of j_left (pid ' . $victim . ') having read ' . read_by('j_left'));
kill 'KILL', $victim;
$bg->finish;
usleep(500_000);
wait_workers('after SIGKILL');
wait_consumed('clicks far ahead, after a worker was killed');
# 4. the rest of the impressions; an immediate stop and start meanwhile
$bg = chunk('imps', 1.0, rate => 800, background => 1);
insert_imps(0.7, 2);
usleep(1_000_000);
note('immediate stop having read ' . read_by('j_inner'));
$node->stop('immediate');
$node->start;
insert_imps(1.0, 2);
$bg->finish;
wait_workers('after an immediate restart');
wait_consumed('impressions caught up, after an immediate restart');
# 5. the rest of the clicks; the worker of the aggregate is killed meanwhile
$bg = chunk('clks', 1.0, rate => 800, background => 1);
usleep(400_000);
$victim = worker_pid($node, 'j_agg', 'to kill');
note('SIGKILL the worker of j_agg (pid ' . $victim . ') having read ' . read_by('j_agg'));
kill 'KILL', $victim;
$bg->finish;
usleep(500_000);
wait_workers('after a second SIGKILL');
wait_consumed('everything but the flush');

# --- before the flush: what the watermark allows ---------------------------------

my $inner_want = qq{SELECT $pairs_cols FROM imps i JOIN clks c $on};
my $left_want = qq{SELECT $pairs_cols FROM imps i LEFT JOIN clks c $on};
my $right_want = qq{SELECT $pairs_cols, c.ad_id AS click_ad FROM imps i RIGHT JOIN clks c $on};
my $cols = 'imp_id, ad_id, imp_time, click_id, click_time, cost';
sub wm_of
{
	my ($q) = @_;
	return "(SELECT watermark FROM streamwin.queries WHERE name = '$q')";
}

results_match($node, "SELECT $cols FROM j_inner", $inner_want,
	'inner join before the flush: every pair once, through the crashes');
# an impression without a match is emitted once t + 10 min < watermark
results_match($node, "SELECT $cols FROM j_left",
	"SELECT * FROM ($left_want) w WHERE click_id IS NOT NULL OR imp_time + interval '10 minutes' < " . wm_of('j_left'),
	'LEFT JOIN before the flush: the pairs, and the impressions the watermark let go without a match');
# a click without a match once t - 0 < watermark
results_match($node, "SELECT $cols, click_ad FROM j_right",
	"SELECT * FROM ($right_want) w WHERE imp_id IS NOT NULL OR click_time < " . wm_of('j_right'),
	'RIGHT JOIN before the flush: the pairs, and the clicks the watermark let go without a match');
my $agg_want = qq{SELECT date_bin('15 minutes', i.imp_time, 'epoch') AS window_start,
       date_bin('15 minutes', i.imp_time, 'epoch') + interval '15 minutes' AS window_end,
       i.ad_id, count(*) AS n, sum(c.cost) AS cost, count(DISTINCT c.user_id) AS users
  FROM imps i JOIN clks c $on GROUP BY 1, 2, 3};
# a window over the join closes at the watermark held back by the range
results_match($node, 'SELECT window_start, window_end, ad_id, n, cost, users FROM j_agg',
	"SELECT * FROM ($agg_want) w WHERE window_end <= " . wm_of('j_agg') . " - interval '10 minutes'",
	'aggregate over the inner join, append, before the flush: the windows closed at watermark - 10 minutes');
my $right_agg_want = qq{SELECT date_bin('20 minutes', c.click_time, 'epoch') AS window_start,
       date_bin('20 minutes', c.click_time, 'epoch') + interval '20 minutes' AS window_end,
       c.ad_id, count(*) AS n, count(i.imp_id) AS imps, sum(c.cost) AS cost
  FROM imps i RIGHT JOIN clks c $on GROUP BY 1, 2, 3};
# over the clicks' time the range holds nothing back: a click's pairs all
# come before the watermark passes it, and its NULL row when it does
results_match($node, 'SELECT window_start, window_end, ad_id, n, imps, cost FROM j_right_agg',
	"SELECT * FROM ($right_agg_want) w WHERE window_end <= " . wm_of('j_right_agg'),
	'aggregate over the RIGHT JOIN by click time, append, before the flush: the windows closed at the watermark');
my $left_agg_want = q{SELECT date_bin('30 minutes', imp_time, 'epoch') AS window_start,
       date_bin('30 minutes', imp_time, 'epoch') + interval '30 minutes' AS window_end,
       a.campaign, count(*) AS n, count(click_id) AS clicks
  FROM (%s) p JOIN ads a USING (ad_id) GROUP BY 1, 2, 3};
results_match($node, 'SELECT window_start, window_end, campaign, n, clicks FROM j_left_agg',
	sprintf($left_agg_want, "SELECT * FROM ($left_want) w WHERE click_id IS NOT NULL OR imp_time + interval '10 minutes' < "
		  . wm_of('j_left_agg')),
	'aggregate over the LEFT JOIN, update, before the flush: pairs, and impressions let go without a match');
# the watermark: the minimum over the partitions of both topics of max - 1 minute
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT watermark::text, ' ') FROM streamwin.queries WHERE name LIKE 'j\_%' AND name <> 'j_mixed'}),
	$node->safe_psql('postgres', q{SELECT least((SELECT min(m) FROM (SELECT max(imp_time) AS m FROM imp_all WHERE NOT flush GROUP BY part) a),
                  (SELECT min(m) FROM (SELECT max(click_time) AS m FROM clk_all WHERE NOT flush GROUP BY part) b))
              - interval '1 minute'}),
	'the watermark is the minimum over both topics\' partitions of max - 1 minute');

# Each batch's join state: the rows its offsets say were read that its
# watermark keeps (impressions until t + 10 min < watermark, clicks until
# t < watermark); every row before a watermark.
my $imp_kept = q{i.imp_time + interval '10 minutes' >= p.watermark};
my $clk_kept = q{c.click_time >= p.watermark};
sub state_want
{
	my ($q, $imp_keep, $clk_keep) = @_;
	return qq{
SELECT p.batch_id, p.state_rows,
       (SELECT count(*) FROM imp_all i
         WHERE i.off < coalesce((p.offsets->'imp_src'->>(i.part::text))::bigint, 0)
           AND (p.watermark IS NULL OR ($imp_keep)))
     + (SELECT count(*) FROM clk_all c
         WHERE c.off < coalesce((p.offsets->'clk_src'->>(c.part::text))::bigint, 0)
           AND (p.watermark IS NULL OR ($clk_keep))) AS want
  FROM streamwin.progress p WHERE p.query = '$q'};
}
sub check_state
{
	my ($q, $what, $imp_keep, $clk_keep) = @_;
	my $want = state_want($q, $imp_keep // $imp_kept, $clk_keep // $clk_kept);
	my $bad = $node->safe_psql('postgres', "SELECT count(*), coalesce(string_agg(batch_id || ': ' || state_rows || ' not ' || want, ', ') FILTER (WHERE rn <= 10), '')
  FROM (SELECT *, row_number() OVER (ORDER BY batch_id) AS rn FROM ($want) s WHERE state_rows <> want) x");
	my ($n, $list) = split /\|/, $bad, 2;
	my $batches = $node->safe_psql('postgres', "SELECT count(*) FROM streamwin.progress WHERE query = '$q'");
	is($n, 0, "$q: the join state after each of its $batches batches is exactly the rows its watermark keeps ($what)")
	  or diag("batch: state_rows not expected: $list");
}
check_state($_, 'before the flush') for @transforms;
my ($last_state, $last_want) = split /\|/, $node->safe_psql('postgres',
	"SELECT state_rows, want FROM (" . state_want('j_inner', $imp_kept, $clk_kept) . ") s ORDER BY batch_id DESC LIMIT 1");
is($last_state, $last_want, "j_inner keeps $last_want rows before the flush, those the last watermark keeps");

# --- the flush ----------------------------------------------------------------------

$broker->produce('imps', [ map { [ $imp_meta{ $_->[0] }[1], imp_json($_) ] } @imp_flush ]);
$broker->produce('clks', [ map { [ $clk_meta{ $_->[0] }[1], clk_json($_) ] } @clk_flush ]);
$produced{imps} += $NIMP_PART;
$produced{clks} += $NCLK_PART;
wait_consumed('the flush');
my $final_wm = ts_text($FLUSH - 60_000);
wait_until($node, q{SELECT string_agg(DISTINCT watermark::text, ' ') FROM streamwin.queries WHERE name LIKE 'j\_%' AND name <> 'j_mixed'},
	$node->safe_psql('postgres', "SELECT '$final_wm'::timestamptz"),
	'every join query over the topics is at the watermark of the flush');

results_match($node, "SELECT $cols FROM j_inner", $inner_want, 'inner join: every pair exactly once');
results_match($node, "SELECT $cols FROM j_left", $left_want,
	'LEFT JOIN: every pair once, every impression without a match once');
results_match($node, "SELECT $cols, click_ad FROM j_right", $right_want,
	'RIGHT JOIN: every pair once, every click without a match once');
results_match($node, 'SELECT window_start, window_end, ad_id, n, cost, users FROM j_agg', $agg_want,
	'aggregate over the inner join, append: every window once, exact');
results_match($node, 'SELECT window_start, window_end, campaign, n, clicks FROM j_left_agg',
	sprintf($left_agg_want, $left_want), 'aggregate over the LEFT JOIN, update: every window, exact');
results_match($node, 'SELECT window_start, window_end, ad_id, n, imps, cost FROM j_right_agg', $right_agg_want,
	'aggregate over the RIGHT JOIN by click time, append: every window once, exact');
wait_results_match($node, 'SELECT imp_id, click_id FROM j_mixed',
	qq{SELECT i.imp_id, c.click_id FROM imps i JOIN clks c $on},
	'table source joined with a topic: every pair exactly once');

check_state($_, 'to the flush') for @transforms;
# the rows exactly on the cutoffs, kept
my $on_cutoff = $node->safe_psql('postgres', q{SELECT count(*) FROM streamwin.progress p
 WHERE p.query = 'j_inner'
   AND (EXISTS (SELECT FROM imp_all i WHERE i.off < (p.offsets->'imp_src'->>(i.part::text))::bigint
                   AND i.imp_time + interval '10 minutes' = p.watermark)
        OR EXISTS (SELECT FROM clk_all c WHERE c.off < coalesce((p.offsets->'clk_src'->>(c.part::text))::bigint, 0)
                   AND c.click_time = p.watermark))});
cmp_ok($on_cutoff, '>', 0, "in $on_cutoff batches of j_inner a row lay exactly on its side's cutoff");
is($node->safe_psql('postgres', q{SELECT state_rows FROM streamwin.progress WHERE query = 'j_inner' ORDER BY batch_id DESC LIMIT 1}),
	$NIMP_PART + $NCLK_PART, 'after the flush j_inner keeps only the flush rows');
my ($max_state, $total) = ($node->safe_psql('postgres', q{SELECT max(state_rows) FROM streamwin.progress WHERE query = 'j_inner'}),
	@imps + @clks);
cmp_ok($max_state, '<', $total / 2, "the join state stays bounded: at most $max_state rows of $total events");

is($node->safe_psql('postgres', q{SELECT coalesce(sum(late_rows_dropped), 0) FROM streamwin.progress WHERE query LIKE 'j\_%'}),
	'0', 'no row was late');
is($node->safe_psql('postgres', q{SELECT (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(offsets) k)
      || ' ' || (offsets->'imp_src')::text || ' ' || (offsets->'clk_src')::text
  FROM streamwin.progress WHERE query = 'j_inner' ORDER BY batch_id DESC LIMIT 1}),
	'clk_src,imp_src '
	  . '{' . join(', ', map { my $p = $_; qq{"$p": } . ($imp_meta{ $imp_flush[$p][0] }[2] + 1) } 0 .. $NIMP_PART - 1) . '} '
	  . '{' . join(', ', map { my $p = $_; qq{"$p": } . ($clk_meta{ $clk_flush[$p][0] }[2] + 1) } 0 .. $NCLK_PART - 1) . '}',
	'progress.offsets of a join: each source\'s offsets under its name');
like($node->safe_psql('postgres', q{SELECT offsets::text FROM streamwin.progress WHERE query = 'j_mixed' ORDER BY batch_id DESC LIMIT 1}),
	qr/^\{"clk_src": \{"0": \d+, "1": \d+\}, "imp_tsrc": .+\}$/, 'and for a table source joined with a topic');

# Each crash: every query restored its checkpoint; those that had run
# batches after it replayed them (a restore of batch n followed, in the
# progress committed before it, by batches after n).
my $log = slurp_file($node->logfile);
my @restores;
while ($log =~ /^(\S+ \S+ UTC) \[\d+\] .*?LOG:  streamwin: query "(\w+)" lost its state in a crash; restoring the checkpoint of batch (\d+)/mg)
{
	push @restores, [ $1, $2, $3 ];
}
for my $q (@kafka_queries, 'j_mixed')
{
	my $n = grep { $_->[1] eq $q } @restores;
	cmp_ok($n, '>=', 3, "$q restored its checkpoint after each of the three crashes ($n restores)");
}
my $replays = $node->safe_psql('postgres', 'SELECT count(*) FROM ('
	  . values_sql([ [ 'at', 'timestamptz' ], [ 'q', 'text' ], [ 'ckpt', 'bigint' ] ], \@restores)
	  . ') r WHERE EXISTS (SELECT FROM streamwin.progress p WHERE p.query = r.q AND p.batch_id > r.ckpt AND p.started_at < r.at)');
cmp_ok($replays, '>=', 1, "and $replays of the " . scalar(@restores) . ' restores replayed batches after the checkpoint');
# a replayed batch records no progress again: each batch once, none missing
is($node->safe_psql('postgres', q{SELECT count(*) FROM (SELECT query FROM streamwin.progress WHERE query LIKE 'j\_%'
  GROUP BY query HAVING count(*) <> max(batch_id) OR count(DISTINCT batch_id) <> count(*)) x}),
	'0', 'progress holds each batch of each query once, through the crashes');

# --- other shapes of the condition, read to the flush by hand ------------------------
#
# Over the same topics, stopped queries read everything with run_available:
# clicks first (side 0) with a range below and above (an impression from
# 5 minutes before to 2 minutes after its click), as a LEFT JOIN and as a
# window over the clicks' time (held back 5 minutes); and an inner join
# written with a comma and WHERE.
my $on_rev = q{ON i.ad_id = c.ad_id AND i.imp_time >= c.click_time - interval '5 minutes'
   AND i.imp_time <= c.click_time + interval '2 minutes'};
my %shapes = (
	s_rev_left => qq{SELECT c.click_id, c.ad_id, i.imp_id FROM clk_src c LEFT JOIN imp_src i $on_rev},
	s_rev_agg  => qq{SELECT c.ad_id, count(*) AS n, sum(i.user_id) AS users FROM clk_src c JOIN imp_src i $on_rev
   GROUP BY streamwin.tumble(c.click_time, '5 minutes'), c.ad_id},
	s_comma    => q{SELECT i.imp_id, c.click_id FROM imp_src i, clk_src c
  WHERE c.ad_id = i.ad_id AND c.click_time < i.imp_time + interval '10 minutes' AND i.imp_time <= c.click_time});
psql_ok($node, join('', map { "SELECT streamwin.create_query('$_', \$q\$$shapes{$_}\$q\$,"
	  . q{ watermark => '1 minute', start => false, options => '{"idle_timeout": "10 minutes"}');} . "\n" } sort keys %shapes),
	'three stopped queries of other shapes');
# A side's new rows go into its join table many to a page
# (table_multi_insert), except the preserved side's, whose INSERT returns
# where they went: in the inner join every row read but those its batch's
# new watermark puts out of reach (the join store leaves them out) and
# those a later batch of the same run_available takes out before the run
# ends (kept back from the table, never written), in the LEFT join the
# impressions' alone (side 1).
for my $q (sort keys %shapes)
{
	my $id = $node->safe_psql('postgres', "SELECT query_id FROM streamwin.query_catalog WHERE name = '$q'");
	my ($out, $err) = ('', '');
	$node->psql('postgres', "SET client_min_messages = debug1; SELECT streamwin.run_available('$q')",
		stdout => \$out, stderr => \$err, on_error_die => 1);
	my $r = JSON::PP->new->decode($out);
	my (%many, $left_out, $never);
	while ($err =~ /(\d+) rows inserted into "join_(left|right)_$id" many to a page/g)
	{
		$many{$2} += $1;
	}
	$left_out += $1 while $err =~ /(\d+) rows out of the watermark's reach left out of "join_(?:left|right)_$id"/g;
	$never += $1 while $err =~ /(\d+) rows kept back from "join_(?:left|right)_$id" went before they were written/g;
	note("$q: " . ($r->{batches} // '?') . " batches");
	if ($q eq 's_comma')
	{
		is(($many{left} // 0) + ($many{right} // 0) + ($left_out // 0) + ($never // 0), $r->{input_rows},
			"$q: every row read goes into its join table many to a page, or out of reach nowhere, or went before the run ended");
		cmp_ok($left_out // 0, '>', 0, "$q: rows out of reach when read are left out (" . ($left_out // 0) . ")");
		cmp_ok($r->{batches}, '>', 1, "$q: run_available ran several batches");
		cmp_ok($never // 0, '>', 0, "$q: rows a later batch of the run took out were never written (" . ($never // 0) . ")");
	}
	elsif ($q eq 's_rev_left')
	{
		is($many{left} // 0, 0, "$q: the preserved side's rows go in by the INSERT");
		ok(($many{right} // 0) > 0, "$q: the other side's go in many to a page ($many{right})");
	}
}
my %shapes_want = map { my $w = $shapes{$_} =~ s/imp_src/imps/r =~ s/clk_src/clks/r; ($_ => $w) } keys %shapes;
results_match($node, 'SELECT * FROM s_rev_left', $shapes_want{s_rev_left},
	'clicks LEFT JOIN impressions, range on both sides of the click: every pair and every lone click once');
results_match($node, 'SELECT window_start, ad_id, n, users FROM s_rev_agg',
	$shapes_want{s_rev_agg} =~ s/streamwin\.tumble\(c\.click_time, '5 minutes'\)/1/r
	  =~ s/^SELECT c\.ad_id/SELECT date_bin('5 minutes', c.click_time, 'epoch') AS window_start, c.ad_id/r,
	'a window over side 1\'s time, held back by the range: every window once, exact');
results_match($node, 'SELECT * FROM s_comma', $shapes_want{s_comma}, 'an inner join written with a comma and WHERE');
# clicks (side 0) go once t + 2 min < watermark, impressions once t + 5 min is
check_state('s_rev_left', 'read by hand', q{i.imp_time + interval '5 minutes' >= p.watermark},
	q{c.click_time + interval '2 minutes' >= p.watermark});
check_state('s_comma', 'read by hand');

# --- a replay that lets rows without a match go -----------------------------------
#
# Deterministic, by hand: stopped LEFT and RIGHT transforms and an
# aggregate over the LEFT join (append) read one message per source per
# batch.  Each runs until the batches after its last checkpoint let go of
# a row without a match; then an immediate restart, and recovery replays
# those batches: their NULL-extended rows must not be written again (nor
# lost from the aggregate's groups).
my (@dimps, @dclks);
for my $k (0 .. 11)
{
	push @dimps, [ $k, 1, $T0 + $k * 600_000 ];
	push @dclks, [ $k, ($k == 0 || $k == 6 ? 1 : 2), $T0 + $k * 600_000 + 300_000 ];
}
push @dimps, [ 99, -1, $FLUSH ];
push @dclks, [ 99, -2, $FLUSH ];
$broker->produce('dimps', [ map { sprintf('{"imp_id": %d, "ad_id": %d, "imp_time": "%s"}', $_->[0], $_->[1], ts_text($_->[2])) } @dimps ]);
$broker->produce('dclks', [ map { sprintf('{"click_id": %d, "ad_id": %d, "click_time": "%s", "cost": 1}', $_->[0], $_->[1], ts_text($_->[2])) } @dclks ]);
load_table($node, 'd_imps', 'imp_id int, ad_id int, imp_time timestamptz', [ map { [ $_->[0], $_->[1], ts_text($_->[2]) ] } @dimps[0 .. 11] ]);
load_table($node, 'd_clks', 'click_id int, ad_id int, click_time timestamptz, cost int', [ map { [ $_->[0], $_->[1], ts_text($_->[2]), 1 ] } @dclks[0 .. 11] ]);
my $dopts = q{watermark => '0 seconds', start => false, options => '{"idle_timeout": "1 hour"}'};
# An impressions and a clicks source over one-partition topics, one message
# per source per batch.
sub one_message_sources
{
	my ($prefix) = @_;
	return qq{
SELECT streamwin.create_kafka_source('${prefix}imp_src', '$brokers', '${prefix}imps', 'imp_id int, ad_id int, imp_time timestamptz',
    options => '{"max_records_per_batch": 1}');
SELECT streamwin.create_kafka_source('${prefix}clk_src', '$brokers', '${prefix}clks', 'click_id int, ad_id int, click_time timestamptz, cost int',
    options => '{"max_records_per_batch": 1}');};
}
psql_ok($node, one_message_sources('d') . qq{
SELECT streamwin.create_query('d_left', \$q\$SELECT i.imp_id, c.click_id FROM dimp_src i LEFT JOIN dclk_src c $on\$q\$, $dopts);
SELECT streamwin.create_query('d_right', \$q\$SELECT i.imp_id, c.click_id FROM dimp_src i RIGHT JOIN dclk_src c $on\$q\$, $dopts);
SELECT streamwin.create_query('d_left_agg', \$q\$@{[ sprintf($left_agg_sql, 'dimp_src', 'dclk_src') ]}\$q\$, $dopts);
}, 'three stopped queries over two one-partition topics, one message per source per batch');
# the rows without a match and when they go: an impression at t + 10 min,
# a click at t
my %lonely = (
	d_left     => q{SELECT i.imp_time + interval '10 minutes' AS cutoff FROM d_imps i WHERE NOT EXISTS (SELECT FROM d_clks c WHERE c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes')},
	d_right    => q{SELECT c.click_time AS cutoff FROM d_clks c WHERE NOT EXISTS (SELECT FROM d_imps i WHERE c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes')});
$lonely{d_left_agg} = $lonely{d_left};
# After a batch that took a checkpoint, each side's checkpoint table holds
# its join table, row for row, besides rows out of reach at the
# checkpoint's watermark (event time + the side's reach before it), which
# stay in it until it is written anew.  Every side writes its checkpoint
# by what changed: rows of the batches since added.  A row of the
# preserved side that matched since the last checkpoint is added again,
# matched: the checkpoint then holds two versions of it (same __batch_id
# and __row), and the row is the matched one.  Returns the rows in reach
# of the checkpoint tables beyond their join tables' (second versions).
sub join_checkpoints_match
{
	my ($q, $when) = @_;
	my $extra = 0;
	for my $sd (join_checkpoint_sides($node, $q))
	{
		my ($ckpt, $in_reach) = @$sd{qw(ckpt in_reach)};
		my $rows = $sd->{versions}
		  ? qq{SELECT * FROM $ckpt v WHERE ($in_reach) AND (v.__matched
   OR NOT EXISTS (SELECT FROM $ckpt m WHERE m.__batch_id = v.__batch_id AND m.__row = v.__row AND m.__matched))}
		  : "SELECT * FROM $ckpt v WHERE $in_reach";
		results_match($node, $rows, "SELECT * FROM $sd->{table}",
			"$q: side $sd->{side}'s checkpoint table holds its join table besides rows out of reach, $when");
		$extra += $node->safe_psql('postgres', "SELECT (SELECT count(*) FROM $ckpt v WHERE $in_reach) - (SELECT count(*) FROM $sd->{table})");
	}
	return $extra;
}

my $at_checkpoint = q{SELECT checkpoint_batch_id = last_batch_id FROM streamwin.query_catalog WHERE name = '%s'};
for my $q (sort keys %lonely)
{
	my ($due, $n, $compared) = ('f', 0, 0);
	while ($due ne 't' && $n++ < 30)
	{
		$node->safe_psql('postgres', "SELECT streamwin.run_batch('$q')");
		if ($compared < 2 && $node->safe_psql('postgres', sprintf($at_checkpoint, $q)) eq 't')
		{
			join_checkpoints_match($q, "after batch $n");
			$compared++;
		}
		$due = $node->safe_psql('postgres', qq{
SELECT q.checkpoint_batch_id < q.last_batch_id AND EXISTS (SELECT FROM ($lonely{$q}) l
         WHERE l.cutoff >= coalesce(pc.watermark, '-infinity') AND l.cutoff < pl.watermark)
  FROM streamwin.query_catalog q
  JOIN streamwin.progress pc ON pc.query = q.name AND pc.batch_id = q.checkpoint_batch_id
  JOIN streamwin.progress pl ON pl.query = q.name AND pl.batch_id = q.last_batch_id
 WHERE q.name = '$q'});
	}
	is($due, 't', "$q: batches after its checkpoint let a row without a match go (after $n batches)");
	cmp_ok($compared, '>', 0, "$q: its checkpoint was compared with its join tables");
}
$node->stop('immediate');
$node->start;
my %dtotal = (dimp_src => scalar(@dimps), dclk_src => scalar(@dclks));
for my $q (sort keys %lonely)
{
	my $r = run_json($node, "run_batch('$q')");
	ok($r->{replayed}, "$q: the first batch after the restart is a replay");
	for (1 .. 60)
	{
		last if $r->{offsets}{dimp_src}{0} == $dtotal{dimp_src} && $r->{offsets}{dclk_src}{0} == $dtotal{dclk_src}
		  && defined $r->{watermark_ms} && $r->{watermark_ms} == $FLUSH;
		$r = run_json($node, "run_batch('$q')");
	}
	is($r->{watermark_ms}, $FLUSH, "$q: read both topics to the flush");
}
results_match($node, 'SELECT imp_id, click_id FROM d_left',
	qq{SELECT i.imp_id, c.click_id FROM d_imps i LEFT JOIN d_clks c $on},
	'replayed LEFT JOIN: each impression without a match once');
results_match($node, 'SELECT imp_id, click_id FROM d_right',
	qq{SELECT i.imp_id, c.click_id FROM d_imps i RIGHT JOIN d_clks c $on},
	'replayed RIGHT JOIN: each click without a match once');
results_match($node, 'SELECT window_start, window_end, campaign, n, clicks FROM d_left_agg',
	sprintf($left_agg_want, qq{SELECT i.*, c.click_id FROM d_imps i LEFT JOIN d_clks c $on}),
	'replayed aggregate over the LEFT JOIN, append: every window once, exact');

# --- a checkpoint of rows that matched after it ----------------------------
#
# A LEFT JOIN transform reads seven impressions (one ad each) alone, one
# a batch, the last one taking a checkpoint; then clicks for three of them arrive, and the batches that
# read them mark those old impressions matched.  The checkpoint after them
# adds the three again, matched, without rewriting the table (its file stays
# the same); an immediate restart empties the join tables, and the restore
# must keep the matched version of each: an impression restored unmatched
# would come out again, NULL-extended, when the watermark lets it go.
my @vimps = map { [ $_, $_, $T0 + $_ * 60_000 ] } 0 .. 6;
my @vclks = map { [ $_, $_, $T0 + $_ * 60_000 + 120_000 ] } 1, 3, 4;
push @vimps, [ 99, -1, $FLUSH ];
push @vclks, [ 99, -2, $FLUSH ];
load_table($node, 'v_imps', 'imp_id int, ad_id int, imp_time timestamptz', [ map { [ $_->[0], $_->[1], ts_text($_->[2]) ] } @vimps[0 .. 6] ]);
load_table($node, 'v_clks', 'click_id int, ad_id int, click_time timestamptz', [ map { [ $_->[0], $_->[1], ts_text($_->[2]) ] } @vclks[0 .. 2] ]);
sub v_produce
{
	my ($topic, @rows) = @_;
	my $f = $topic eq 'vimps' ? '{"imp_id": %d, "ad_id": %d, "imp_time": "%s"}' : '{"click_id": %d, "ad_id": %d, "click_time": "%s", "cost": 1}';
	$broker->produce($topic, [ map { sprintf($f, $_->[0], $_->[1], ts_text($_->[2])) } @rows ]);
	return;
}
v_produce('vimps', @vimps[0 .. 6]);
psql_ok($node, one_message_sources('v') . qq{
SELECT streamwin.create_query('v_left', \$q\$SELECT i.imp_id, c.click_id FROM vimp_src i LEFT JOIN vclk_src c $on\$q\$, $dopts);
}, 'a stopped LEFT JOIN over two more one-partition topics');
my $v_ckpt_file = q{SELECT pg_relation_filenode(s.join_checkpoint) FROM streamwin.query_sources s
  JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'v_left' AND s.source_index = 0};
# Run batches until every message of the topics so far is read and the last
# batch took a checkpoint.
sub v_run_to_checkpoint
{
	my ($nimps, $nclks, $what) = @_;
	my $done = 'f';
	for (1 .. 30)
	{
		$node->safe_psql('postgres', "SELECT streamwin.run_batch('v_left')");
		$done = $node->safe_psql('postgres', qq{
SELECT q.checkpoint_batch_id = q.last_batch_id
       AND (SELECT coalesce(sum(next_offset), 0) FROM streamwin.query_offsets o WHERE o.query_id = q.query_id AND o.source_index = 0) = $nimps
       AND (SELECT coalesce(sum(next_offset), 0) FROM streamwin.query_offsets o WHERE o.query_id = q.query_id AND o.source_index = 1) = $nclks
  FROM streamwin.query_catalog q WHERE q.name = 'v_left'});
		last if $done eq 't';
	}
	is($done, 't', "v_left: $what read, and its last batch took a checkpoint");
	return;
}
v_run_to_checkpoint(7, 0, 'the impressions');
is(join_checkpoints_match('v_left', 'after the impressions'), 0, 'v_left: one version of each row in the checkpoint');
my $v_file = $node->safe_psql('postgres', $v_ckpt_file);
v_produce('vclks', @vclks[0 .. 2]);
v_run_to_checkpoint(7, 3, 'the clicks');
is($node->safe_psql('postgres', 'SELECT count(*) FROM v_left WHERE click_id IS NOT NULL'), '3', 'v_left: three pairs so far');
is(join_checkpoints_match('v_left', 'after the clicks'), 3,
	'v_left: the three impressions that matched since the last checkpoint have a second version in it');
is($node->safe_psql('postgres', $v_ckpt_file), $v_file, 'v_left: the checkpoint was written in place, not rewritten');
$node->stop('immediate');
$node->start;
v_produce('vimps', $vimps[7]);
v_produce('vclks', $vclks[3]);
{
	my $r = run_json($node, "run_batch('v_left')");
	like(slurp_file($node->logfile), qr/LOG:  streamwin: query "v_left" lost its state in a crash; restoring the checkpoint of batch/,
		'v_left: the first batch after the restart restored its checkpoint');
	for (1 .. 30)
	{
		last if defined $r->{watermark_ms} && $r->{watermark_ms} == $FLUSH;
		$r = run_json($node, "run_batch('v_left')");
	}
	is($r->{watermark_ms}, $FLUSH, 'v_left: read both topics to the flush');
}
results_match($node, 'SELECT imp_id, click_id FROM v_left',
	qq{SELECT i.imp_id, c.click_id FROM v_imps i LEFT JOIN v_clks c $on},
	'restored LEFT JOIN: the pairs, and each impression without a match once');

# --- rows a run keeps back, a checkpoint among its batches, a crash after it ----
#
# An inner join (a join store) read by run_available, one message per
# source per batch: the batches share a transaction, so each keeps its
# rows back from the join tables, which get those still held when the run
# ends; a checkpoint among them writes the rows kept back since the last
# one into the checkpoint tables from memory, and nothing into the join
# tables.  Impression k (ad k) at
# T0 + k minutes, its click 30 s later; the watermark (delay 0) takes the
# older rows out during the run, most before they were ever written.
# Three or four more batches in a session (run_batch, its store loaded:
# each writes its rows into the join tables) take a checkpoint, which copies the
# join tables' rows of the batches since the run's last checkpoint: the
# rows the run wrote when it ended carry the batch that added each, so
# that those the run's checkpoint had from memory are not copied again.
# Then an immediate restart empties the join tables; the restore of that
# checkpoint and the replay of the batches after it must bring back every
# impression the watermark still keeps, once, which clicks produced after
# the restart then match, 10 minutes on.
my $KN = 21;
my @kimps = map { [ $_, $_, $T0 + $_ * 60_000 ] } 0 .. $KN - 1;
my @kclks = map { [ $_, $_, $T0 + $_ * 60_000 + 30_000 ] } 0 .. $KN - 1;
sub k_produce
{
	my ($topic, @rows) = @_;
	my $f = $topic eq 'kimps' ? '{"imp_id": %d, "ad_id": %d, "imp_time": "%s"}' : '{"click_id": %d, "ad_id": %d, "click_time": "%s", "cost": 1}';
	$broker->produce($topic, [ map { sprintf($f, $_->[0], $_->[1], ts_text($_->[2])) } @rows ]);
	return;
}
k_produce('kimps', @kimps);
k_produce('kclks', @kclks);
psql_ok($node, one_message_sources('k') . qq{
SELECT streamwin.create_query('k_inner', \$q\$SELECT i.imp_id, c.click_id FROM kimp_src i JOIN kclk_src c $on\$q\$, $dopts);
}, 'a stopped inner join over two more one-partition topics');
my ($k_imp_table, $k_clk_table) = split /\n/, $node->safe_psql('postgres', q{SELECT s.join_table::regclass
  FROM streamwin.query_sources s JOIN streamwin.query_catalog q USING (query_id) WHERE q.name = 'k_inner' ORDER BY s.source_index});
{
	my ($out, $err) = ('', '');
	$node->psql('postgres', "SET client_min_messages = debug1; SELECT streamwin.run_available('k_inner')",
		stdout => \$out, stderr => \$err, on_error_die => 1);
	my $r = JSON::PP->new->decode($out);
	my ($never, $kept, $from_memory, %writes) = (0, 0, 0);
	$never += $1 while $err =~ /(\d+) rows kept back from "join_(?:left|right)_\d+" went before they were written/g;
	$kept += $1 while $err =~ /(\d+) rows kept back from "join_(?:left|right)_\d+" until the transaction's batches end/g;
	$from_memory += $1 while $err =~ /(\d+) rows kept back from "join_(?:left|right)_\d+" written into "checkpoint_join_(?:left|right)_\d+" from memory/g;
	$writes{$1}++ while $err =~ /\d+ rows inserted into "join_(left|right)_\d+" many to a page/g;
	is($r->{input_rows}, 2 * $KN, "k_inner: run_available read every message, in $r->{batches} batches");
	cmp_ok($kept, '>', 0, "k_inner: its batches kept $kept rows back from the join tables");
	cmp_ok($never, '>', 0, "k_inner: $never of them went before the run wrote them");
	cmp_ok($from_memory, '>', 0, "k_inner: its checkpoints wrote $from_memory rows kept back from memory");
	ok(($writes{left} // 0) <= 1 && ($writes{right} // 0) <= 1,
		'k_inner: each join table was written at most once, when the run ended, not for a checkpoint')
	  or diag(explain \%writes);
}
my ($k_ckpt, $k_last) = split /\|/, $node->safe_psql('postgres',
	q{SELECT checkpoint_batch_id, last_batch_id FROM streamwin.query_catalog WHERE name = 'k_inner'});
# Checkpoints every 3 batches (checkpoint_min_interval 0): batches 1, 4, 7, ...
# How many batches the run takes depends on how each consumer's first
# fetch falls, so the checkpoint expected is computed from the run's count.
sub k_last_checkpoint { my ($last) = @_; return 1 + 3 * int(($last - 1) / 3); }
ok($k_ckpt > 1 && $k_ckpt == k_last_checkpoint($k_last),
	"k_inner: the run took its checkpoints among its batches, the last at batch $k_ckpt of $k_last");
load_table($node, 'k_imps', 'imp_id int, ad_id int, imp_time timestamptz', [ map { [ $_->[0], $_->[1], ts_text($_->[2]) ] } @kimps ]);
load_table($node, 'k_clks', 'click_id int, ad_id int, click_time timestamptz, cost int', [ map { [ $_->[0], $_->[1], ts_text($_->[2]), 1 ] } @kclks ]);
# what the join tables hold: the rows the watermark keeps (impressions
# until t + 10 minutes is before it, clicks until t is)
sub k_state_match
{
	my ($when) = @_;
	my $wm = q{(SELECT watermark FROM streamwin.queries WHERE name = 'k_inner')};
	results_match($node, "SELECT imp_id, ad_id, imp_time FROM $k_imp_table",
		"SELECT * FROM k_imps WHERE imp_time + interval '10 minutes' >= $wm",
		"k_inner: its impressions' join table holds exactly the rows its watermark keeps, $when");
	results_match($node, "SELECT click_id, ad_id, click_time, cost FROM $k_clk_table",
		"SELECT * FROM k_clks WHERE click_time >= $wm",
		"k_inner: its clicks' join table holds exactly the rows its watermark keeps, $when");
	return;
}
k_state_match('after the run');
results_match($node, 'SELECT imp_id, click_id FROM k_inner',
	qq{SELECT i.imp_id, c.click_id FROM k_imps i JOIN k_clks c $on}, 'k_inner: every pair of the run once');
{
	# three more batches, four when the third would take the checkpoint:
	# the restart below must find batches after it to replay
	my $more = k_last_checkpoint($k_last + 3) == $k_last + 3 ? 4 : 3;
	my @more_imps = map { [ $_, $_, $T0 + $_ * 60_000 ] } $KN .. $KN + $more - 1;
	my @more_clks = map { [ $_, $_, $T0 + $_ * 60_000 + 30_000 ] } $KN .. $KN + $more - 1;
	k_produce('kimps', @more_imps);
	k_produce('kclks', @more_clks);
	push @kimps, @more_imps;
	push @kclks, @more_clks;
	$node->safe_psql('postgres', 'INSERT INTO k_imps VALUES ' . join(', ', map { "($_->[0], $_->[1], '" . ts_text($_->[2]) . "')" } @more_imps)
		  . '; INSERT INTO k_clks VALUES ' . join(', ', map { "($_->[0], $_->[1], '" . ts_text($_->[2]) . "', 1)" } @more_clks));
	my $k_session = store_session($node);
	sess_ok($k_session, "SELECT streamwin.run_batch('k_inner')") for 1 .. $more;
	my ($ckpt, $last) = split /\|/, $node->safe_psql('postgres',
		q{SELECT checkpoint_batch_id, last_batch_id FROM streamwin.query_catalog WHERE name = 'k_inner'});
	is("$ckpt|$last", k_last_checkpoint($k_last + $more) . '|' . ($k_last + $more),
		"k_inner: $more more batches in the session, one taking a checkpoint");
	cmp_ok($ckpt, '<', $last, 'k_inner: with batches after it to replay');
	($k_ckpt, $k_last) = ($ckpt, $last);
	k_state_match('after more batches');
	$k_session->quit;
}
$node->stop('immediate');
$node->start;
# each impression the watermark keeps gets a second click, 10 minutes on
my @kclks2 = map { [ 100 + $_->[0], $_->[1], $_->[2] + $RANGE ] }
  grep { $_->[2] + $RANGE >= $kimps[-1][2] } @kimps;
k_produce('kclks', @kclks2);
$node->safe_psql('postgres', 'INSERT INTO k_clks VALUES ' . join(', ', map { "($_->[0], $_->[1], '" . ts_text($_->[2]) . "', 1)" } @kclks2));
{
	my $r = run_json($node, "run_available('k_inner')");
	like(slurp_file($node->logfile), qr/LOG:  streamwin: query "k_inner" lost its state in a crash; restoring the checkpoint of batch $k_ckpt/,
		'k_inner: after the restart it restored the checkpoint taken after the run');
	is($r->{input_rows}, scalar(@kclks2),
		'k_inner: it replayed the batches after its checkpoint (counted when they first ran), then read the new clicks');
}
results_match($node, 'SELECT imp_id, click_id FROM k_inner',
	qq{SELECT i.imp_id, c.click_id FROM k_imps i JOIN k_clks c $on},
	'k_inner: after the restart, every pair once, the new clicks matched with impressions read before the checkpoint');
k_state_match('after the restart');

note(sprintf('017 ran for %.1f s', time - $started));
$node->stop;
$broker->stop;
done_testing();
