#!/usr/bin/env bash
# run_bench.sh: streamwin's benchmark (`make bench`, which installs gnuplot and
# builds the extension, the test programs and test/bench/raw_consume first).
#
# Everything is measured in one run, on one machine, against the same 1M JSON
# events in one Kafka topic (test/kafka_broker, librdkafka's mock cluster),
# or for case 5 the same events as rows of a table:
#
#   raw ceiling    test/bench/raw_consume: a bare librdkafka consumer, set up
#                  like streamwin's, reads the messages and discards them
#   streamwin      cases 1-3 (update mode, no watermark), each with a fresh
#                  query created with start => false and timed around
#                  SELECT streamwin.run_available(q) in one session: that
#                  backend (and its librdkafka threads) does all the work
#     (1) tumble 1 minute, 1,000 keys, count/sum/avg
#     (2) the same with 1,000,000 distinct keys
#     (3) hop 10 minutes / 1 minute, 1,000 keys
#     (4) session windows (gap 30 s, 1,000 keys)
#     (1+) case 1 plus stddev and the two sketches; (1d) case 1 plus an
#     exact count(DISTINCT u): what those cost on top of case 1
#     plus case 1 once more in a real background worker (start_query with
#     trigger_interval 0, timed until streamwin.queries.lag = 0)
#   case 6         case 1's query over 1M events of 10 ms spacing in their
#                  own topic ev6 (BENCH_PARTITIONS partitions, produced round
#                  robin): 1,000 keys x about 167 one-minute windows (167,000
#                  groups of about 6 events), run_available like cases 1-4,
#                  against the raw ceiling measured on ev6 in the same run
#   Nexmark        1M Nexmark-shaped bids (gen_nexmark.pl) in topic bids
#                  (BENCH_NX_PARTITIONS, 48), watermark 4 seconds, update
#                  mode, run_available like cases 1-4; the figure is events
#                  per CPU-second of the backend (the raw ceiling on bids is
#                  measured too, for reference):
#     (N1) hop 10 s / 2 s, count per auction (Nexmark q5's windows)
#     (N2) session windows (gap 10 s), count per bidder (Nexmark q11)
#   large state    case S, a running aggregate (GROUP BY g, no window) over
#                  BENCH_STATE_GROUPS (2M) groups in topic st, see run_state:
#                  built by a background worker (and a second query over the
#                  same events with 1,000 groups, for the memory per group),
#                  then BENCH_STATE_BATCHES batches of 1,000 events over
#                  100 groups, each run_batch its own statement in one
#                  session, then as many in a procedure that commits after
#                  each (as a worker does), each timed around the call, commit
#                  included; streamwin.checkpoint_interval BENCH_STATE_CKPT
#                  (20) and checkpoint_min_interval 0 meanwhile, so that
#                  every BENCH_STATE_CKPT-th batch takes a checkpoint; then,
#                  as a cron job runs a query, BENCH_STATE_NEW run_batch
#                  calls of 1,000 events each from a new session (psql per
#                  call), over st_big, over st_dedup (the events
#                  deduplicated by g: BENCH_STATE_GROUPS keys, built by a
#                  worker too) and over st_join (the events joined by g
#                  with 1,000 dimension rows of topic st_dim, within a day
#                  of their message times: BENCH_STATE_GROUPS + 1,000 join
#                  rows, built by a worker too), with the default
#                  checkpoint settings, each over the same timed blocks
#                  (st_dedup and st_join first read, untimed, those that
#                  st_big's session batches read).  The new sessions'
#                  blocks are produced as a cron job meets them: each just
#                  before st_big's call that reads it, in Kafka record
#                  batches of 25 events per partition; with
#                  BENCH_STATE_BURST=1, with the other timed events in one
#                  burst, in record batches of about 1,000 events per
#                  partition, which a new consumer parses whole from the
#                  block on (librdkafka queues every message of a fetched
#                  record batch from the fetch offset on)
#   dedup          a transform of the events of ev, SELECT id, k, v, ts,
#                  run_available like cases 1-4:
#     (T)  as it is: what writing 1M result rows costs
#     (D)  with dedup_keys {id}, watermark 1 minute: every event is a new
#          key, and about 60,000 keys are within the watermark at a time;
#          what remembering and forgetting them costs on top of (T)
#     (DT) (D) with streamwin.state_memory = 1MB in its session, so that
#          its keys live in the dedup table and the SQL statements do the
#          work: the store against the SQL path, in the same run
#   join           case J, a stream-stream join (gen_join.pl): BENCH_JOIN_EVENTS
#                  impressions {imp_id, ad_id (one of 10,000), imp_time} in
#                  topic impressions and as many clicks {click_id, imp_id,
#                  ad_id, click_time} in topic clicks (BENCH_JOIN_PARTITIONS
#                  partitions each, each produced in event-time order, round
#                  robin; BENCH_JOIN_RATE impressions per second of event
#                  time; a click comes 1 s to 20 minutes after its
#                  impression, 45% of the impressions have none), joined
#                  like the README's example:
#     (J)  an inner join, c.ad_id = i.ad_id AND c.imp_id = i.imp_id AND
#          c.click_time BETWEEN i.imp_time AND i.imp_time + 10 minutes,
#          watermark 1 minute, append mode
#     (JA) count per ad per 1-minute tumble of imp_time over that join,
#          watermark 1 minute, update mode
#                  each run_available like cases 1-4, with the state rows
#                  each batch left (streamwin.progress.state_rows: both
#                  sides' join state, and JA's open groups); against, in the
#                  same run, the raw ceiling (raw_consume over each topic,
#                  one after the other, their wall and CPU summed: the
#                  fastest of BENCH_RAW_REPEAT such pairs) and plain SQL
#                  (see run_join_sql: the same events COPYed from CSV into
#                  two ordinary tables, VACUUM ANALYZE, then one INSERT ...
#                  SELECT ... JOIN, and one with GROUP BY for JA; the
#                  statement alone and load + statement are reported).
#                  Checked against gen_join.pl's figures: pairs, distinct
#                  clicks, sums of click_id, imp_id and the delays in ms (JA:
#                  groups, sum of n, of n * n, of ad_id * n)
#   table source   case 5: case 1's query over a table source (logical
#                  decoding, streamwin's own output plugin), against two
#                  baselines over the same rows, measured in the same run.
#                  Each run: a fresh table events_tbl, its source and, at the
#                  same point, a second slot with the built-in test_decoding
#                  plugin; then the events are COPYed into the table from the
#                  CSV files, one transaction per BENCH_BATCH rows (not
#                  timed); then, each timed:
#     streamwin      a fresh query (start => false), SELECT
#                    streamwin.run_available(q) in one session, like 1-4
#     worker         another query, in a background worker like case 1's
#                    (start_query, trigger_interval 0), timed until its
#                    batches' input_rows add up to the rows loaded (created
#                    before the run_available run, see run_worker_table)
#     pg_recvlogical the same changes from the test_decoding slot, --endpos
#                    the LSN after the load, output to /dev/null; CPU = the
#                    walsender serving it (it decodes) + pg_recvlogical
#     plain SQL      one INSERT ... SELECT ... GROUP BY ... ON CONFLICT over
#                    the whole table (the "cron job"; after an untimed
#                    VACUUM ANALYZE, as autovacuum would have done)
#                  (only if the extension has create_table_source())
#   changelog      case CL (issue 35), a changelog table source
#                  ({"changes": "all"}) against its own append-only source, a
#                  per-row trigger and a periodic recompute, over the same
#                  rows and changes (gen_changelog.pl): a table orders (id
#                  bigint primary key, region int over BENCH_CL_REGIONS
#                  (1,000) regions, amount numeric, customer, status,
#                  created_at) with REPLICA IDENTITY FULL, two sources on it
#                  created before it is filled, and the query
#                  SELECT region, count(*), sum(amount), avg(amount),
#                  min(amount), max(amount) ... GROUP BY region, update mode,
#                  start => false; each run over fresh tables:
#     load         BENCH_CL_ROWS (1M) inserts, BENCH_CL_TXN (1,000) per
#                  transaction, not timed; then run_available() of the query
#                  over the inserts-only source (cl_append: the append-only
#                  baseline's cost per insert) and over the changelog
#                  (cl_inserts), each timed in its own session like 1-4;
#                  and the decoding floor: the same query with a filter that
#                  keeps nothing (WHERE amount < 0) over the inserts-only
#                  source (cl_floor_append)
#     changes      the inserts-only source dropped, untimed empty passes
#                  bring the changelog's slot to the end of the WAL as a
#                  running worker's would (BENCH_CL_SETTLE=0: not, so the
#                  change phase decodes the load again from the slot's
#                  restart point), then BENCH_CL_CHANGES (1M) changes, 50%
#                  updates of amount and/or region, 20% deletes, 30%
#                  inserts, one statement each, BENCH_CL_TXN per transaction
#                  (timed for reference: cl_apply), and run_available() of
#                  the same query over them (cl_changes: its cost per change),
#                  and of the floor's query over the changelog
#                  (cl_floor_changes: what reading and decoding a change
#                  costs before any aggregation; its query reads the load
#                  untimed first)
#     trigger      a table of its own with an index on (region, amount) and
#                  an AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW trigger
#                  keeping the summary (n and sum; min and max recomputed
#                  from the index when the old row held them): the same load
#                  (cl_trigger_load) and the same changes (cl_trigger), timed
#     recompute    a table of its own: the same load and changes, and after
#                  every BENCH_CL_RECOMPUTE (10,000) changes TRUNCATE + INSERT
#                  ... SELECT ... GROUP BY region over the whole table; the
#                  recomputes timed and summed (cl_recompute)
#                  Checks: after each phase, the query's result equals the
#                  query in plain SQL over the table, every column as text,
#                  both ways (the two summaries too), the table holds the
#                  rows and sum gen_changelog.pl computed, and the batches
#                  read every change (inserts/updates/deletes).  The summary
#                  prints issue 35's ratios: cost per change / cost per
#                  insert on the append-only source (CPU), trigger time /
#                  streamwin time and recompute time / streamwin time over
#                  the changes (wall)
#   alternatives   from files on the server (their Kafka-reading cost is not
#                  counted, in their favour), 100,000 events per transaction
#                  like streamwin's max_records_per_batch:
#     COPY+SQL json  COPY the same JSON payloads into a staging table (jsonb),
#                    INSERT ... SELECT ... GROUP BY ... ON CONFLICT, TRUNCATE
#     COPY+SQL csv   the same with events already decoded to CSV
#     trigger        COPY the CSV into a table whose BEFORE INSERT trigger
#                    upserts the summary row of each event
#     trigger/insert one INSERT (own transaction) per event into that table,
#                    on the first BENCH_INSERT_EVENTS events
#   latency        a steady stream (BENCH_LAT_RATE events/s for
#                  BENCH_LAT_SECONDS s) into a running query with
#                  trigger_interval 100 ms; see measure_latency below
#
# For every run: wall time, CPU time (utime + stime from /proc/PID/stat of the
# process doing the work: all its threads, so librdkafka's count too), peak
# memory (VmHWM), and a correctness check (group count, total count and sum
# against what gen_events.pl computed).  Runs repeat BENCH_REPEAT times; the
# summary takes medians.  The PostgreSQL cluster runs as the postgres user when
# this runs as root, from a private installation (the extension as built here,
# installed with DESTDIR into the work directory), so a concurrent
# `make install` cannot change the library under a run.
#
# Output: the tables on stdout, BENCH_OUT/results.md and
# BENCH_OUT/throughput.png (BENCH_OUT defaults to test/bench).  Exit status 1
# if any correctness check failed.
#
# Environment: BENCH_EVENTS (1000000), BENCH_PARTITIONS (32; the mock keeps
# about 5 MB per partition), BENCH_BATCH (100000), BENCH_REPEAT (3),
# BENCH_RAW_REPEAT (5; the mock broker's wall time is bimodal, so the raw
# ceiling is the fastest of these runs), BENCH_LAT_RATE (5000),
# BENCH_LAT_SECONDS (20), BENCH_INSERT_EVENTS (20000), BENCH_NX_BIDS
# (1000000), BENCH_NX_PARTITIONS (48), BENCH_NX_RATE (10000 bids per second
# of event time), BENCH_STATE_GROUPS (2000000), BENCH_STATE_PARTITIONS (40: a
# divisor of 1,000, so that a batch takes 1,000 / 40 events from each
# partition and holds exactly one of gen_state.pl's blocks of 100 groups),
# BENCH_STATE_BATCHES (300), BENCH_STATE_CKPT (20), BENCH_STATE_NEW (40: case
# S's batches each from a new session, per query), BENCH_JOIN_EVENTS
# (500000 per side), BENCH_JOIN_PARTITIONS (16 per topic: about 3 MB each),
# BENCH_JOIN_RATE (200 impressions per second of event time: 500,000
# impressions span 42 minutes, so that join state is evicted as the
# watermark moves on),
# BENCH_CL_ROWS (1000000), BENCH_CL_CHANGES (1000000), BENCH_CL_REGIONS
# (1000), BENCH_CL_TXN (1000 rows or changes per transaction),
# BENCH_CL_RECOMPUTE (10000: changes between two recomputes, a multiple of
# BENCH_CL_TXN), BENCH_CL_SETTLE (1),
# BENCH_PAIRED_ROUNDS (5; 1 with BENCH_SHORT),
# BENCH_ONLY (a subset of "raw streamwin worker table alternatives latency
# case6 paired nexmark_hop nexmark_session state dedup join changelog"; "raw" is the raw ceiling on ev,
# "table" case 5 with its baselines and its worker run, "worker" case 1's
# worker run, "case6" case 6 with its raw ceiling on ev6, "paired" rounds of
# the raw ceiling on ev and on ev6, the floor, case 1 and case 6, one after
# another (the ratios of CPU to the raw ceiling, round by round),
# "nexmark_hop" and
# "nexmark_session" cases N1 and N2 (with the raw ceiling on bids), "state"
# case S, "dedup" cases T, D and DT, "join" cases J and JA with their raw
# ceiling and plain SQL, "changelog" case CL with its baselines, "avro" the
# same events as JSON and as Avro by test/bench/avro_bench.sh, in their own
# cluster of this installation, appended to results.md),
# BENCH_CASES (which of cases "1 1p 1d 2 3 4" the parts "streamwin"
# and "alternatives" run; 1p is (1+)),
# BENCH_PROFILE=1 (perf profiles of cases 1 and 2, of the latency worker and
# of the new cases selected (6, N1, N2, J, D, S's procedure loop, and CL's
# three streamwin runs in a run of their own: profile-caseCLa.txt,
# profile-caseCLi.txt, profile-caseCLc.txt), needs perf
# and root or perf_event_paranoid <= 1), BENCH_KEEP=1 (keep the work
# directory), BENCH_OUT, PG_CONFIG (the pg_config of the PostgreSQL to use:
# its server binaries are copied, the extension is installed next to them).
#
# BENCH_SHORT=1: a quick check that the harness works, not a measurement:
# 100,000 events in batches of 20,000, one run of everything, 100,000 bids,
# a state of 200,000 groups and 40 timed batches, 5 s of latency stream,
# 50,000 impressions and as many clicks at 50 impressions per second (about
# 17 minutes of event time, so that join state is evicted here too), 100,000
# rows and 100,000 changes for case CL with a recompute every 1,000 changes
# (each can still be set), and BENCH_OUT defaults to
# ${TMPDIR:-/tmp}/streamwin-bench-short, so that test/bench/results.md is
# left alone.  `make bench` does not set it.
set -euo pipefail

BENCH_SHORT=${BENCH_SHORT:-0}
if [[ $BENCH_SHORT == 1 ]]; then
	short() { echo "$1"; }
else
	short() { echo "$2"; }
fi
BENCH_EVENTS=${BENCH_EVENTS:-$(short 100000 1000000)}
BENCH_PARTITIONS=${BENCH_PARTITIONS:-32}
BENCH_BATCH=${BENCH_BATCH:-$(short 20000 100000)}
BENCH_REPEAT=${BENCH_REPEAT:-$(short 1 3)}
BENCH_RAW_REPEAT=${BENCH_RAW_REPEAT:-$(short 1 5)}
BENCH_LAT_RATE=${BENCH_LAT_RATE:-5000}
BENCH_LAT_SECONDS=${BENCH_LAT_SECONDS:-$(short 5 20)}
BENCH_INSERT_EVENTS=${BENCH_INSERT_EVENTS:-$(short 2000 20000)}
BENCH_NX_BIDS=${BENCH_NX_BIDS:-$(short 100000 1000000)}
BENCH_NX_PARTITIONS=${BENCH_NX_PARTITIONS:-48}
BENCH_NX_RATE=${BENCH_NX_RATE:-10000}
BENCH_STATE_GROUPS=${BENCH_STATE_GROUPS:-$(short 200000 2000000)}
BENCH_STATE_PARTITIONS=${BENCH_STATE_PARTITIONS:-40}
BENCH_STATE_BATCHES=${BENCH_STATE_BATCHES:-$(short 40 300)}
BENCH_STATE_CKPT=${BENCH_STATE_CKPT:-20}
BENCH_STATE_NEW=${BENCH_STATE_NEW:-$(short 10 40)}
BENCH_STATE_BURST=${BENCH_STATE_BURST:-0}
BENCH_JOIN_EVENTS=${BENCH_JOIN_EVENTS:-$(short 50000 500000)}
BENCH_JOIN_PARTITIONS=${BENCH_JOIN_PARTITIONS:-16}
BENCH_JOIN_RATE=${BENCH_JOIN_RATE:-$(short 50 200)}
BENCH_CL_ROWS=${BENCH_CL_ROWS:-$(short 100000 1000000)}
BENCH_CL_CHANGES=${BENCH_CL_CHANGES:-$(short 100000 1000000)}
BENCH_CL_REGIONS=${BENCH_CL_REGIONS:-1000}
BENCH_CL_TXN=${BENCH_CL_TXN:-1000}
BENCH_CL_RECOMPUTE=${BENCH_CL_RECOMPUTE:-$(short 1000 10000)}
BENCH_CL_SETTLE=${BENCH_CL_SETTLE:-1}
BENCH_PAIRED_ROUNDS=${BENCH_PAIRED_ROUNDS:-$(short 1 5)}
BENCH_PROFILE=${BENCH_PROFILE:-0}
BENCH_ONLY=${BENCH_ONLY:-raw streamwin worker table alternatives latency case6 paired nexmark_hop nexmark_session state dedup join changelog avro}
BENCH_CASES=${BENCH_CASES:-1 1p 1d 2 3 4}
LAT_PARTITIONS=8

if [[ -z ${PG_CONFIG:-} ]]; then
	if [[ -x /usr/lib/postgresql/15/bin/pg_config ]]; then
		PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
	else
		PG_CONFIG=pg_config
	fi
fi
PG_BINDIR=$("$PG_CONFIG" --bindir)
PG_PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
PG_SHAREDIR=$("$PG_CONFIG" --sharedir)

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bench=$repo/test/bench
cd "$repo"
BENCH_OUT=${BENCH_OUT:-$(short "${TMPDIR:-/tmp}/streamwin-bench-short" "$bench")}
mkdir -p "$BENCH_OUT"
BENCH_OUT=$(cd "$BENCH_OUT" && pwd)

# the commit measured, before this run writes its own outputs into the tree
# (what a run writes into test/bench does not make the tree "dirty")
commit=$(git -C "$repo" describe --always 2>/dev/null || echo unknown)
if ! git -C "$repo" diff --quiet HEAD -- . ':!test/bench/results.md' ':!test/bench/results.tsv' \
	':!test/bench/throughput.png' ':!test/bench/profile-*.txt' 2>/dev/null; then
	commit+=-dirty
fi

for prog in test/kafka_broker test/kafka_produce test/bench/raw_consume streamwin.so; do
	[[ -e $prog ]] || { echo "$prog is missing: run 'make bench'" >&2; exit 1; }
done

# --- cleanup, whatever happens -------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/streamwin-bench.XXXXXX")
chmod 755 "$work"
broker_pid= cluster_started= bg_pids=()

as_pg() {
	if ((EUID == 0)); then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

cleanup() {
	local rc=$? pid
	trap - INT TERM EXIT
	[[ -n ${load_pid:-} ]] && kill -TERM "$load_pid" 2>/dev/null
	for pid in "${bg_pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [[ -n $cluster_started ]]; then
		as_pg "$work/inst$PG_BINDIR/pg_ctl" -D "$work/pg/data" stop -m fast -w >/dev/null 2>&1 ||
			as_pg "$work/inst$PG_BINDIR/pg_ctl" -D "$work/pg/data" stop -m immediate >/dev/null 2>&1 || true
	fi
	if [[ -n $broker_pid ]]; then
		kill -TERM "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	if [[ -n ${BENCH_KEEP:-} || $rc -ne 0 ]]; then
		echo "work directory kept: $work"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

only() { [[ " $BENCH_ONLY " == *" $1 "* ]]; }   # is this part of the benchmark wanted?
ev6_wanted() { only case6 || only paired; }   # case 6's topic, and its events' figures?
case_wanted() { [[ " $BENCH_CASES " == *" $1 "* ]]; }   # and this case of "streamwin" and "alternatives"?
nexmark_wanted() { only nexmark_hop || only nexmark_session; }
say() { printf '\n== %s\n' "$*"; }
now() { date +%s.%N; }
# CPU seconds (all threads) of a process of ours, e.g. the broker
proc_cpu() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t }' "/proc/$1/stat"; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }   # calc EXPR: floating point

# The machine may be shared: the 1-minute load average every 10 s of the
# run, for the summary.
(while :; do cut -d ' ' -f 1 /proc/loadavg; sleep 10; done) >"$work/loadavg.txt" 2>/dev/null &
load_pid=$!

# --- a private installation of PostgreSQL + this build of streamwin ----------
# PostgreSQL finds its share and lib directories relative to its binaries, so
# copies of the server binaries in $inst with the same layout use $inst's
# directories: the system's libraries are linked in, streamwin comes from
# `make install DESTDIR=$inst`.
say "Installing this build of streamwin into a private PostgreSQL tree"
inst=$work/inst
mkdir -p "$inst$PG_BINDIR" "$inst$PG_PKGLIBDIR/bitcode" "$(dirname "$inst$PG_SHAREDIR")"
for b in postgres initdb pg_ctl; do
	cp "$PG_BINDIR/$b" "$inst$PG_BINDIR/"
done
for f in "$PG_PKGLIBDIR"/*; do
	case $(basename "$f") in streamwin* | bitcode) continue ;; esac
	ln -s "$f" "$inst$PG_PKGLIBDIR/"
done
if [[ -d $PG_PKGLIBDIR/bitcode ]]; then
	for f in "$PG_PKGLIBDIR"/bitcode/*; do
		case $(basename "$f") in streamwin*) continue ;; esac
		ln -s "$f" "$inst$PG_PKGLIBDIR/bitcode/"
	done
fi
cp -a "$PG_SHAREDIR" "$inst$PG_SHAREDIR"
rm -f "$inst$PG_SHAREDIR"/extension/streamwin*
make -s --no-print-directory PG_CONFIG="$PG_CONFIG" install DESTDIR="$inst" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; exit 1; }
chmod -R a+rX "$inst"
echo "installed into $inst"

# --- events ----------------------------------------------------------------------
say "Generating $BENCH_EVENTS events"
mkdir -p "$work/data" "$work/log"
perl "$bench/gen_events.pl" --events "$BENCH_EVENTS" --partitions "$BENCH_PARTITIONS" \
	--batch "$BENCH_BATCH" --out "$work/data"
# shellcheck disable=SC1091
source "$work/data/expected.env"
chmod -R a+rX "$work/data"
echo "$EXPECT_EVENTS events, $(($(stat -c %s "$work/data/events.tsv") / 1000000)) MB of JSON;" \
	"groups: case 1 $EXPECT_GROUPS_1, case 2 $EXPECT_GROUPS_2, case 3 $EXPECT_GROUPS_3"
# the payload bytes, for the summary (the raw ceiling counts them again, if
# BENCH_ONLY has it)
raw_bytes=$(($(cat "$work"/data/json/b* | wc -c) - EXPECT_EVENTS))

topics=(--topic "ev:$BENCH_PARTITIONS" --topic "lat1:$LAT_PARTITIONS" --topic "lat2:$LAT_PARTITIONS")
if ev6_wanted; then
	say "Generating case 6's $BENCH_EVENTS events, 10 ms apart"
	mkdir -p "$work/data6"
	perl "$bench/gen_events.pl" --events "$BENCH_EVENTS" --partitions "$BENCH_PARTITIONS" \
		--batch "$BENCH_BATCH" --spacing-ms 10 --tsv-only --out "$work/data6"
	# its groups and sum, under names of their own
	read -r C6_GROUPS C6_SUM < <(
		# shellcheck disable=SC1091
		source "$work/data6/expected.env"
		echo "$EXPECT_GROUPS_1 $EXPECT_SUM_V"
	)
	echo "$BENCH_EVENTS events over $((BENCH_EVENTS / 100 / 60 + 1)) minutes; groups (minute, k): $C6_GROUPS"
	topics+=(--topic "ev6:$BENCH_PARTITIONS")
fi
if nexmark_wanted; then
	say "Generating $BENCH_NX_BIDS Nexmark-shaped bids, $BENCH_NX_RATE per second of event time"
	mkdir -p "$work/nexmark"
	perl "$bench/gen_nexmark.pl" --bids "$BENCH_NX_BIDS" --partitions "$BENCH_NX_PARTITIONS" \
		--rate "$BENCH_NX_RATE" --out "$work/nexmark"
	# shellcheck disable=SC1091
	source "$work/nexmark/expected.env"
	echo "$NX_BIDS bids, $(($(stat -c %s "$work/nexmark/bids.tsv") / 1000000)) MB; $NX_AUCTIONS auctions," \
		"$NX_BIDDERS bidders; hop groups (window, auction) $NX_HOP_GROUPS, sessions $NX_SESSION_GROUPS"
	topics+=(--topic "bids:$BENCH_NX_PARTITIONS")
fi
if only state; then
	# timed: the session's first batch, then two loops (three with a profile),
	# then the batches of new sessions
	st_blocks=$(((BENCH_PROFILE == 1 ? 3 : 2) * BENCH_STATE_BATCHES + 1 + BENCH_STATE_NEW))
	say "Generating case S's events: $BENCH_STATE_GROUPS groups, then $st_blocks blocks of 1,000"
	mkdir -p "$work/state"
	perl "$bench/gen_state.pl" --groups "$BENCH_STATE_GROUPS" --partitions "$BENCH_STATE_PARTITIONS" \
		--timed-batches "$st_blocks" --out "$work/state"
	# shellcheck disable=SC1091
	source "$work/state/expected.env"
	chmod -R a+rX "$work/state"
	topics+=(--topic "st:$BENCH_STATE_PARTITIONS" --topic "st_dim:1")
fi
if only join; then
	say "Generating case J's $BENCH_JOIN_EVENTS impressions and as many clicks, $BENCH_JOIN_RATE impressions per second"
	mkdir -p "$work/join"
	perl "$bench/gen_join.pl" --events "$BENCH_JOIN_EVENTS" --partitions "$BENCH_JOIN_PARTITIONS" \
		--rate "$BENCH_JOIN_RATE" --out "$work/join"
	# shellcheck disable=SC1091
	source "$work/join/expected.env"
	chmod -R a+rX "$work/join"
	echo "$J_IMPS impressions ($(($(stat -c %s "$work/join/imps.tsv") / 1000000)) MB), $J_CLICKS clicks" \
		"($(($(stat -c %s "$work/join/clks.tsv") / 1000000)) MB) over $J_SPAN_S s of event time;" \
		"$J_IMPS_WITHOUT_CLICK impressions without a click; pairs $J_PAIRS; JA groups (minute, ad) $J_AGG_GROUPS"
	topics+=(--topic "impressions:$BENCH_JOIN_PARTITIONS" --topic "clicks:$BENCH_JOIN_PARTITIONS")
fi
if only changelog; then
	((BENCH_CL_TXN > 0 && BENCH_CL_RECOMPUTE >= BENCH_CL_TXN && BENCH_CL_RECOMPUTE % BENCH_CL_TXN == 0)) ||
		{ echo "BENCH_CL_RECOMPUTE ($BENCH_CL_RECOMPUTE) must be a multiple of BENCH_CL_TXN ($BENCH_CL_TXN)" >&2; exit 1; }
	say "Generating case CL's $BENCH_CL_ROWS rows and $BENCH_CL_CHANGES changes over $BENCH_CL_REGIONS regions"
	mkdir -p "$work/changelog"
	perl "$bench/gen_changelog.pl" --rows "$BENCH_CL_ROWS" --changes "$BENCH_CL_CHANGES" \
		--regions "$BENCH_CL_REGIONS" --out "$work/changelog"
	# shellcheck disable=SC1091
	source "$work/changelog/expected.env"
	chmod -R a+rX "$work/changelog"
	echo "$CL_ROWS rows ($(($(stat -c %s "$work/changelog/load.csv") / 1000000)) MB of CSV), then $CL_CHANGES changes:" \
		"$CL_UPDATES updates, $CL_DELETES deletes, $CL_INSERTS inserts; then $CL_FINAL_ROWS rows in $CL_FINAL_GROUPS regions"
fi

# --- the Kafka broker ------------------------------------------------------------
say "Starting the Kafka test broker (${topics[*]})"
test/kafka_broker "${topics[@]}" \
	--bootstrap-file "$work/bootstrap" >"$work/log/broker.log" 2>&1 &
broker_pid=$!
for ((i = 0; i < 300; i++)); do
	[[ -s $work/bootstrap ]] && break
	kill -0 "$broker_pid" 2>/dev/null || { cat "$work/log/broker.log"; exit 1; }
	sleep 0.1
done
[[ -s $work/bootstrap ]] || { echo "kafka_broker not ready after 30 s" >&2; exit 1; }
brokers=$(<"$work/bootstrap")
echo "broker at $brokers"
t0=$(now)
test/kafka_produce --brokers "$brokers" --topic ev --partition-prefix --quiet \
	--linger-ms 100 --batch-num-messages 100000 <"$work/data/events.tsv"
echo "produced $EXPECT_EVENTS messages in $(calc "$(now) - $t0") s" \
	"(linger.ms=100, batch.num.messages=100000)"
# produce FILE TOPIC: the other topics, the same way
produce() {
	local t0 n
	t0=$(now)
	n=$(wc -l <"$1")
	test/kafka_produce --brokers "$brokers" --topic "$2" --partition-prefix --quiet \
		--linger-ms 100 --batch-num-messages 100000 <"$1"
	echo "produced $n messages to $2 in $(calc "$(now) - $t0") s"
}
ev6_wanted && produce "$work/data6/events.tsv" ev6
nexmark_wanted && produce "$work/nexmark/bids.tsv" bids
# case S's timed events come later, once the state is built
if only state; then
	produce "$work/state/build.tsv" st
	produce "$work/state/dim.tsv" st_dim
fi
if only join; then
	produce "$work/join/imps.tsv" impressions
	produce "$work/join/clks.tsv" clicks
fi

# --- the cluster ---------------------------------------------------------------------
say "Creating the PostgreSQL cluster"
mkdir -p "$work/pg/sock"
((EUID == 0)) && chown -R postgres:postgres "$work/pg"
as_pg "$inst$PG_BINDIR/initdb" -D "$work/pg/data" -U postgres -A trust \
	--encoding=UTF8 --locale=C --no-sync >"$work/log/initdb.log" 2>&1 ||
	{ cat "$work/log/initdb.log"; exit 1; }
as_pg tee -a "$work/pg/data/postgresql.conf" >/dev/null <<EOF
# streamwin benchmark (test/bench/run_bench.sh)
shared_preload_libraries = 'streamwin'
listen_addresses = ''
unix_socket_directories = '$work/pg/sock'
port = 5432
max_worker_processes = 16
timezone = 'UTC'
shared_buffers = 1GB
max_wal_size = 8GB
checkpoint_timeout = 30min
track_commit_timestamp = on
streamwin.progress_retention = 100000
# case 5 (table source) and its pg_recvlogical baseline: logical decoding
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
EOF
as_pg "$inst$PG_BINDIR/pg_ctl" -D "$work/pg/data" -l "$work/pg/postgres.log" -w start >/dev/null ||
	{ tail -n 30 "$work/pg/postgres.log"; exit 1; }
cluster_started=1

export PGOPTIONS='-c client_min_messages=warning'
PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$work/pg/sock" -p 5432 -U postgres -d postgres)
sql() { "${PSQL[@]}" -At "$@"; }

ticks=$(getconf CLK_TCK)
sql <<EOF
CREATE EXTENSION streamwin;
-- The clock, the CPU time (user + system, every thread) and the memory of a
-- backend (by default this one), from /proc.
CREATE FUNCTION bench_probe(pid int DEFAULT pg_backend_pid(),
	OUT t float8, OUT cpu float8, OUT hwm_kb bigint, OUT anon_kb bigint)
LANGUAGE sql AS \$\$
SELECT extract(epoch FROM clock_timestamp())::float8,
       (f[12]::bigint + f[13]::bigint)::float8 / $ticks,
       (regexp_match(st, 'VmHWM:\s+(\d+)'))[1]::bigint,
       (regexp_match(st, 'RssAnon:\s+(\d+)'))[1]::bigint
  FROM string_to_array(regexp_replace(pg_read_file('/proc/' || pid || '/stat'), '^.*\) ', ''), ' ') AS f,
       pg_read_file('/proc/' || pid || '/status') AS st
\$\$;
SELECT streamwin.create_kafka_source('ev', '$brokers', 'ev',
	'id bigint, k text, u text, v float8, ts timestamptz', 'json',
	'{"max_records_per_batch": $BENCH_BATCH}');
EOF
ev6_wanted && sql -c "SELECT streamwin.create_kafka_source('ev6', '$brokers', 'ev6',
	'id bigint, k text, u text, v float8, ts timestamptz', 'json',
	'{\"max_records_per_batch\": $BENCH_BATCH}')" >/dev/null
# every field of a Nexmark bid, as Nexmark's own DDL declares them
nexmark_wanted && sql -c "SELECT streamwin.create_kafka_source('bids', '$brokers', 'bids',
	'auction bigint, bidder bigint, price bigint, channel text, url text, date_time timestamptz, extra text',
	'json', '{\"max_records_per_batch\": $BENCH_BATCH}')" >/dev/null
# no max_records_per_batch: the build's batches take the default of
# streamwin.max_records_per_batch (100,000), the timed ones set it to 1,000
# st_j and st_dim: the two sides of st_join, each row with its message's
# timestamp (the build's and the dimension rows' are produced together, the
# timed events minutes later: all within the join's day)
if only state; then
	sql >/dev/null <<EOF
SELECT streamwin.create_kafka_source('st', '$brokers', 'st', 'g bigint, h int, v bigint', 'json');
SELECT streamwin.create_kafka_source('st_j', '$brokers', 'st', 'g bigint, h int, v bigint, kts timestamptz',
	'json', '{"metadata": {"kts": "timestamp"}}');
SELECT streamwin.create_kafka_source('st_dim', '$brokers', 'st_dim', 'g bigint, h int, v bigint, kts timestamptz',
	'json', '{"metadata": {"kts": "timestamp"}}');
EOF
fi
if only join; then
	sql >/dev/null <<EOF
SELECT streamwin.create_kafka_source('impressions', '$brokers', 'impressions',
	'imp_id bigint, ad_id int, imp_time timestamptz', 'json', '{"max_records_per_batch": $BENCH_BATCH}');
SELECT streamwin.create_kafka_source('clicks', '$brokers', 'clicks',
	'click_id bigint, imp_id bigint, ad_id int, click_time timestamptz', 'json',
	'{"max_records_per_batch": $BENCH_BATCH}');
EOF
fi
libpath=$(sql -c "SELECT setting FROM pg_config() WHERE name = 'PKGLIBDIR'")
[[ $libpath == "$inst$PG_PKGLIBDIR" ]] ||
	{ echo "the server does not use the private installation ($libpath)" >&2; exit 1; }
echo "cluster up; streamwin from $libpath"

# --- measurement helpers -------------------------------------------------------------
results=$work/results.tsv
printf 'case\tapproach\trep\tevents\twall_s\tcpu_s\thwm_kb\tanon_kb\tcheck\tnote\n' >"$results"
failed_checks=0

# record CASE APPROACH REP EVENTS WALL CPU HWM ANON CHECK NOTE
record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$results"
	printf '  %-3s %-16s run %-2s %9s events  wall %7.3f s  cpu %7.3f s  VmHWM %6d MB  %s %s\n' \
		"$1" "$2" "$3" "$4" "$5" "$6" "$(($7 / 1024))" "$9" "${10}"
	[[ $9 == ok ]] || failed_checks=$((failed_checks + 1))
}

# measure NAME SQLFILE: run SQLFILE in a fresh session between two probes of
# that session's backend; sets M_WALL M_CPU M_HWM M_ANON and M_OUT (the
# output, for \echo lines of SQLFILE).
measure() {
	local name=$1 file=$2 out=$work/log/$1.out
	"${PSQL[@]}" -At >"$out" 2>&1 <<EOF || { cat "$out" >&2; return 1; }
SELECT t AS m_t0, cpu AS m_c0 FROM bench_probe() \gset
\i $file
SELECT round((t - :m_t0)::numeric, 3) AS m_wall, round((cpu - :m_c0)::numeric, 2) AS m_cpu,
       hwm_kb AS m_hwm, anon_kb AS m_anon FROM bench_probe() \gset
\echo BENCH :m_wall :m_cpu :m_hwm :m_anon
EOF
	read -r _ M_WALL M_CPU M_HWM M_ANON < <(grep '^BENCH ' "$out")
	M_OUT=$out
}

# check_result TABLE GROUPS COUNT SUM: "ok" if TABLE has GROUPS rows whose n
# add up to COUNT and whose s add up to SUM (within float rounding).
check_result() {
	local got
	got=$(sql -F ' ' -c "SELECT count(*), coalesce(sum(n), 0),
		coalesce(abs(sum(s) - $4) <= 1e-6 * $4, false) FROM $1")
	if [[ $got == "$2 $3 t" ]]; then
		echo ok
	else
		echo "WRONG(groups,count,sum_ok=${got// /,};want=$2,$3)"
	fi
}

# check_rows TABLE: a transform's result holds every event of ev once (their
# ids are distinct), with the sum of v gen_events.pl computed
check_rows() {
	local got
	got=$(sql -F ' ' -c "SELECT count(*), count(DISTINCT id),
		coalesce(abs(sum(v) - $EXPECT_SUM_V) <= 1e-6 * $EXPECT_SUM_V, false) FROM $1")
	if [[ $got == "$EXPECT_EVENTS $EXPECT_EVENTS t" ]]; then
		echo ok
	else
		echo "WRONG(rows,ids,sum_ok=${got// /,};want=$EXPECT_EVENTS)"
	fi
}

# perf_summary DATA OUT TITLE WHO: the report of a perf recording, as text.
perf_summary() {
	local data=$1 out=$2 title=$3 who=$4
	if [[ ! -s $data ]]; then
		echo "  no profile for $out (is perf usable here?)"
		return
	fi
	{
		echo "# perf profile of $title"
		echo "# $who; perf record -F 2999 -g; $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "# (hex addresses: static functions of the postgres binary, which has no symbols for them)"
		echo
		echo "## threads"
		perf report -i "$data" --no-children --sort comm --stdio -g none 2>/dev/null |
			grep '%' || true
		echo
		echo "## selected functions, inclusive (children)"
		perf report -i "$data" --children --sort symbol --stdio -g none 2>/dev/null |
			grep -E '\] (batch_execute|batch_fetch|batch_decode|batch_apply|batch_emit|batch_finish|store_apply|store_emit|store_write_results|store_write_changed|store_checkpoint|store_load|merge_receive|store_close_windows|store_evict_closed|checkpoint_after_batch|kafka_fetch|batch_input_decode|decode_json_message|timestamptz_in|float8in|run_with_input|run_batch_statement|streamwin_source_rows|tuplestore_puttuple|LookupTupleHashEntry|ExecCheckIndexConstraints|ExecInsertIndexTuples|_bt_bottomupdel_pass|heap_update|heap_insert|checkpoint_take|progress_record|offsets_store|offsets_load|lock_query|catalog_exec|SPI_execute_with_args|SPI_execute_plan|StartTransactionCommand|CommitTransactionCommand|XLogInsert|XLogFlush|pg_plan_queries|WaitLatchOrSocket) ' || true
		echo
		echo "## inclusive (children), top 60"
		perf report -i "$data" --children --sort symbol --stdio -g none 2>/dev/null |
			grep '%' | grep -v '\] 0x0000' | sed -n '1,60p' || true
		echo
		echo "## self, top 40"
		perf report -i "$data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null |
			grep '%' | sed -n '1,40p' || true
	} >"$out"
	echo "  wrote $out"
}

# check_counts TABLE KEY GROUPS N SQ KEYSUM: "ok" if TABLE (counts only, no
# sums) has GROUPS rows whose n add up to N, whose n * n add up to SQ and
# whose KEY * n add up to KEYSUM: a group with a wrong count, or counted
# under the wrong key, changes the last two.
check_counts() {
	local got
	got=$(sql -F ' ' -c "SELECT count(*), coalesce(sum(n), 0), coalesce(sum(n::numeric * n), 0),
		coalesce(sum($2::numeric * n), 0) FROM $1")
	if [[ $got == "$3 $4 $5 $6" ]]; then
		echo ok
	else
		echo "WRONG(got_groups_n_sq_keysum=${got// /,};want=$3,$4,$5,$6)"
	fi
}

# check_pairs TABLE: "ok" if TABLE (ad_id, imp_id, click_id, delay) has
# the pairs gen_join.pl counted: their number, each click once, the sums of
# click_id and imp_id, and of the delays in milliseconds.
check_pairs() {
	local got want="$J_PAIRS $J_PAIRS $J_SUM_CLICK $J_SUM_IMP $J_SUM_DELAY_MS"
	got=$(sql -F ' ' -c "SELECT count(*), count(DISTINCT click_id), coalesce(sum(click_id), 0),
		coalesce(sum(imp_id), 0), coalesce(sum(extract(epoch FROM delay) * 1000), 0)::bigint FROM $1")
	if [[ $got == "$want" ]]; then
		echo ok
	else
		echo "WRONG(got_pairs_clicks_sumclick_sumimp_delayms=${got// /,};want=${want// /,})"
	fi
}

case_sql() {
	case $1 in
	1) echo "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM ev GROUP BY streamwin.tumble(ts, '1 minute'), k" ;;
	2) echo "SELECT u, count(*) AS n, sum(v) AS s, avg(v) AS a FROM ev GROUP BY streamwin.tumble(ts, '1 minute'), u" ;;
	3) echo "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM ev GROUP BY streamwin.hop(ts, '10 minutes', '1 minute'), k" ;;
	4) echo "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM ev GROUP BY streamwin.session(ts, '30 seconds'), k" ;;
	5) echo "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM ev_tbl GROUP BY streamwin.tumble(ts, '1 minute'), k" ;;
	# case 1 with the aggregates that keep their state as bytea (stddev) and
	# the two sketches: what they cost on top of case 1, in the same run
	1p) echo "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a, stddev(v) AS sd," \
		"streamwin.approx_count_distinct(u) AS du, streamwin.approx_percentile(v, 0.99) AS p99" \
		"FROM ev GROUP BY streamwin.tumble(ts, '1 minute'), k" ;;
	# case 1 with an exact distinct count, whose state is each group's set
	# of distinct values (about 60 per group here)
	1d) echo "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a, count(DISTINCT u) AS du" \
		"FROM ev GROUP BY streamwin.tumble(ts, '1 minute'), k" ;;
	# case 1's query over case 6's events (ten times as many windows)
	6) echo "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM ev6 GROUP BY streamwin.tumble(ts, '1 minute'), k" ;;
	# Nexmark-shaped: q5's windows (hop 10 s / 2 s) counting bids per
	# auction, q11's sessions (gap 10 s) counting bids per bidder
	N1) echo "SELECT auction, count(*) AS n FROM bids GROUP BY streamwin.hop(date_time, '10 seconds', '2 seconds'), auction" ;;
	N2) echo "SELECT bidder, count(*) AS n FROM bids GROUP BY streamwin.session(date_time, '10 seconds'), bidder" ;;
	# a stream-stream join, as in the README's example, and a windowed
	# count over it
	J) echo "SELECT i.ad_id, i.imp_id, c.click_id, c.click_time - i.imp_time AS delay" \
		"FROM impressions i JOIN clicks c ON $(join_on)" ;;
	JA) echo "SELECT i.ad_id, count(*) AS n FROM impressions i JOIN clicks c ON $(join_on)" \
		"GROUP BY streamwin.tumble(i.imp_time, '1 minute'), i.ad_id" ;;
	# a transform, and the same deduplicated (see case_options)
	T | D | DT) echo "SELECT id, k, v, ts FROM ev" ;;
	esac
}
case_options() {   # more arguments of create_query
	case $1 in
	D*) echo ", dedup_keys => '{id}', options => '{\"event_time\": \"ts\"}'" ;;
	esac
}
join_on() {
	echo "c.ad_id = i.ad_id AND c.imp_id = i.imp_id" \
		"AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'"
}
case_watermark() {   # create_query's watermark
	case $1 in
	N*) echo "'4 seconds'" ;;
	J* | D*) echo "'1 minute'" ;;
	*) echo NULL ;;
	esac
}
case_mode() { [[ $1 == J || $1 == T || $1 == D* ]] && echo append || echo update; }   # create_query's output_mode
case_events() {   # events in its topic(s)
	case $1 in
	N*) echo "$NX_BIDS" ;;
	J*) echo "$((J_IMPS + J_CLICKS))" ;;
	*) echo "$EXPECT_EVENTS" ;;
	esac
}
case_groups() { local v=EXPECT_GROUPS_$1; [[ $1 == 5 || $1 == 1p || $1 == 1d ]] && v=EXPECT_GROUPS_1; echo "${!v}"; }   # 5, 1+, 1d: case 1's groups
case_factor() { [[ $1 == 3 ]] && echo 10 || echo 1; }   # windows per event
case_sum() { calc "$EXPECT_SUM_V * $(case_factor "$1")"; }
# case_check CASE TABLE: the check of a streamwin run's result table
case_check() {
	case $1 in
	6) check_result "$2" "$C6_GROUPS" "$EXPECT_EVENTS" "$C6_SUM" ;;
	N1) check_counts "$2" auction "$NX_HOP_GROUPS" "$NX_HOP_N" "$NX_HOP_SQ" "$NX_HOP_KEY" ;;
	N2) check_counts "$2" bidder "$NX_SESSION_GROUPS" "$NX_SESSION_N" "$NX_SESSION_SQ" "$NX_SESSION_KEY" ;;
	J) check_pairs "$2" ;;
	JA) check_counts "$2" ad_id "$J_AGG_GROUPS" "$J_AGG_N" "$J_AGG_SQ" "$J_AGG_KEY" ;;
	T | D | DT) check_rows "$2" ;;
	*) check_result "$2" "$(case_groups "$1")" "$((EXPECT_EVENTS * $(case_factor "$1")))" "$(case_sum "$1")" ;;
	esac
}

# --- raw ceiling ---------------------------------------------------------------------
# run_raw CASE TOPIC PARTITIONS MESSAGES [APPROACH REP]: BENCH_RAW_REPEAT runs
# of the bare consumer over TOPIC, recorded as CASE's raw ceiling, or one,
# recorded as run REP of CASE's APPROACH (case 0's, on ev, sets raw_bytes).
run_raw() {
	local c=$1 topic=$2 nparts=$3 want=$4 approach=${5:-raw} first=${6:-1} last=${6:-$BENCH_RAW_REPEAT} rep line chk b0 b1
	for ((rep = first; rep <= last; rep++)); do
		b0=$(proc_cpu "$broker_pid")
		line=$(test/bench/raw_consume --brokers "$brokers" --topic "$topic" \
			--partitions "$nparts" --expect "$want")
		b1=$(proc_cpu "$broker_pid")
		eval "$line"   # messages= bytes= wall_s= cpu_s= user_s= sys_s= maxrss_kb=
		# shellcheck disable=SC2154
		chk=ok; [[ $messages == "$want" ]] || chk="WRONG(messages=$messages)"
		# shellcheck disable=SC2154
		if [[ $c == 0 ]]; then raw_bytes=$bytes; fi
		# shellcheck disable=SC2154
		record "$c" "$approach" "$rep" "$messages" "$wall_s" "$cpu_s" "$maxrss_kb" "$maxrss_kb" "$chk" \
			"topic $topic; first message after ${first_s} s; broker CPU $(calc "$b1 - $b0") s"
	done
}
if only raw; then
	say "Raw ceiling: bare librdkafka consumer, $BENCH_RAW_REPEAT runs (the fastest is the ceiling)"
	run_raw 0 ev "$BENCH_PARTITIONS" "$EXPECT_EVENTS"
fi

# --- streamwin -----------------------------------------------------------------------
# run_streamwin CASE REP [perf]: a fresh query, timed around run_available.
run_streamwin() {
	local c=$1 rep=$2 q=sw_c${1,,} chk note perf_pid= approach=${4:-streamwin} want
	want=$(case_events "$c")
	sql -c "SELECT streamwin.drop_query(name, true) FROM streamwin.queries WHERE name = '$q'" >/dev/null
	sql >/dev/null <<EOF
SELECT streamwin.create_query('$q', \$q\$$(case_sql "$c")\$q\$, watermark => $(case_watermark "$c"),
	output_mode => '$(case_mode "$c")', start => false$(case_options "$c"));
CHECKPOINT;
EOF
	cat >"$work/run_$q.sql" <<EOF
$([[ $c == DT ]] && echo "SET streamwin.state_memory = '1MB';")
SELECT r->>'input_rows' AS input_rows, r->>'batches' AS batches, r->>'late_rows_dropped' AS late
  FROM streamwin.run_available('$q') AS r \gset
\echo RUN :input_rows :batches :late
EOF
	if [[ ${3:-} == perf ]]; then
		# attach perf to the session's backend once it runs run_available
		(
			for ((i = 0; i < 200; i++)); do
				pid=$(sql -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '%run_available(''$q'')%' AND pid <> pg_backend_pid()")
				[[ -n $pid ]] && break
				sleep 0.02
			done
			[[ -n $pid ]] && exec perf record -F 2999 -g -p "$pid" -o "$work/perf_case$c.data" >/dev/null 2>&1
		) &
		perf_pid=$!
		bg_pids+=("$perf_pid")
	fi
	b0=$(proc_cpu "$broker_pid")
	measure "${approach}_c${c,,}_r$rep" "$work/run_$q.sql" || { record "$c" "$approach" "$rep" 0 0 0 0 0 FAILED "see log"; return; }
	b1=$(proc_cpu "$broker_pid")
	if [[ -n $perf_pid ]]; then
		kill -INT "$perf_pid" 2>/dev/null || true
		wait "$perf_pid" 2>/dev/null || true
	fi
	read -r _ input batches late < <(grep '^RUN ' "$M_OUT")
	chk=$(case_check "$c" "$q")
	[[ $input == "$want" ]] || chk="WRONG(input_rows=$input)"
	if [[ $c == 5 ]]; then
		note="$batches batches; $(table_batch_note "$q")"
	else
		note="$batches batches; broker CPU $(calc "$b1 - $b0") s"
	fi
	if [[ $c == N* ]]; then
		note+="; late rows dropped $late; state rows after the last batch $(sql -c "SELECT state_rows
			FROM streamwin.progress WHERE query = '$q' ORDER BY batch_id DESC LIMIT 1")"
	elif [[ $c == J* ]]; then
		# each batch's duration, and the join state (with JA's open groups)
		# each batch left
		note+=";late=$late;$(sql -c "SELECT 'batch_ms=' || string_agg(round(duration_ms)::text, ' ' ORDER BY batch_id)
			|| ';state=' || string_agg(state_rows::text, ' ' ORDER BY batch_id)
			|| ';result_rows=' || (SELECT count(*) FROM $q)
			FROM streamwin.progress WHERE query = '$q'")"
	fi
	record "$c" "$approach" "$rep" "$input" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" "$note"
	sql -c "SELECT streamwin.drop_query('$q', true)" >/dev/null
}

# The floor under every case: the same read and decode, and a scan of the
# decoded rows by a filter that keeps none (v is never negative), so nothing
# is grouped or written but offsets and progress.  What a case costs above
# this is its aggregation and state; what this costs above the raw ceiling is
# turning messages into rows.
run_floor() {
	local rep=$1 c=${2:-0} approach=${3:-floor} q=sw_floor input got chk query="SELECT id FROM ev WHERE v < 0" want=$EXPECT_EVENTS
	if [[ $c == N0 ]]; then
		# the same for the bids (no price is negative)
		q=sw_floor_n0 query="SELECT auction FROM bids WHERE price < 0" want=$NX_BIDS
	fi
	sql -c "SELECT streamwin.drop_query(name, true) FROM streamwin.queries WHERE name = '$q'" >/dev/null
	sql >/dev/null <<EOF
SELECT streamwin.create_query('$q', '$query', start => false);
CHECKPOINT;
EOF
	cat >"$work/run_$q.sql" <<EOF
SELECT r->>'input_rows' AS input_rows FROM streamwin.run_available('$q') AS r \gset
\echo RUN :input_rows
EOF
	measure "${approach}_${q}_r$rep" "$work/run_$q.sql" || { record "$c" "$approach" "$rep" 0 0 0 0 0 FAILED "see log"; return; }
	read -r _ input < <(grep '^RUN ' "$M_OUT")
	got=$(sql -c "SELECT count(*) FROM $q")
	chk=ok
	[[ $input == "$want" && $got == 0 ]] || chk="WRONG(input_rows=$input,rows_kept=$got)"
	record "$c" "$approach" "$rep" "$input" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" ""
	sql -c "SELECT streamwin.drop_query('$q', true)" >/dev/null
}

if only streamwin; then
say "streamwin floor, $BENCH_REPEAT runs: read and decode, a filter that keeps no event"
for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
	run_floor "$rep"
done
for c in 1 1p 1d 2 3 4; do
	case_wanted "$c" || continue
	# case 4: session gap 30 s per key; gen_events.pl counted the sessions
	say "streamwin case $c, $BENCH_REPEAT runs: $(case_sql "$c")"
	for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
		run_streamwin "$c" "$rep"
	done
done
fi

# --- dedup: a transform, deduplicated by the store and by the SQL statements -----------
if only dedup; then
	for c in T D DT; do
		say "streamwin case $c, $BENCH_REPEAT runs: $(case_sql "$c")$(case_options "$c")"
		for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
			run_streamwin "$c" "$rep"
		done
	done
fi

# --- case 6: ten times the windows, against the raw ceiling on its own topic ---------
if only case6; then
	say "Raw ceiling on ev6 (case 6's events), $BENCH_RAW_REPEAT runs"
	run_raw 6 ev6 "$BENCH_PARTITIONS" "$EXPECT_EVENTS"
	say "streamwin case 6, $BENCH_REPEAT runs: $(case_sql 6)"
	for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
		run_streamwin 6 "$rep"
	done
fi

# --- paired rounds: the raw ceiling and streamwin seconds apart --------------------
# The machine's load drifts: the raw ceiling's runs above can meet a busier or
# a quieter machine than a case's runs minutes later (on a shared machine the
# same bare consumer's CPU has varied 1.5x between such groups of runs).  Each
# round runs the bare consumer on ev and on ev6, then the floor, case 1 and
# case 6, one after another, so that each round's ratios of CPU compare runs
# seconds apart; the summary gives each ratio's median over the rounds
# (issue 38's targets).  The bare consumer's CPU varies by itself, on an
# idle machine, from one run to the next (0.9 to 1.8 s for 1M events in six
# runs in a row): each round runs it three times over each topic, rep
# ROUND * 10 + 1..3, and takes the median.  A checkpoint first, as before
# each streamwin run: the bare consumers do not meet the server writing out
# the round before.
if only paired; then
	say "Paired rounds, $BENCH_PAIRED_ROUNDS: raw ceiling on ev and on ev6 (three runs each), floor, case 1, case 6"
	for ((round = 1; round <= BENCH_PAIRED_ROUNDS; round++)); do
		sql -c "CHECKPOINT" >/dev/null
		for k in 1 2 3; do
			run_raw 0 ev "$BENCH_PARTITIONS" "$EXPECT_EVENTS" paired_raw "$((round * 10 + k))"
			run_raw 6 ev6 "$BENCH_PARTITIONS" "$EXPECT_EVENTS" paired_raw "$((round * 10 + k))"
		done
		run_floor "$round" 0 paired_floor
		run_streamwin 1 "$round" "" paired_streamwin
		run_streamwin 6 "$round" "" paired_streamwin
	done
fi

# --- Nexmark-shaped cases ----------------------------------------------------------
# load_then_two FILE OUT CASE APPROACH REP: run a plain SQL baseline's FILE (a
# load, then two statements, the backend probed before and after each step,
# its last line "PROBES" and the 14 figures) in one session into OUT; sets
# P (an array of those figures: t0 c0 t1 c1 t2 c2 t3 c3 h3 a3 t4 c4 h4 a4),
# or records run REP of CASE APPROACH as failed and returns 1.
load_then_two() {
	local file=$1 out=$2
	"${PSQL[@]}" -At -f "$file" >"$out" 2>&1 || {
		cat "$out" >&2
		record "$3" "$4" "$5" 0 0 0 0 0 FAILED "see $out"
		return 1
	}
	read -r -a P < <(grep '^PROBES ' "$out" | cut -d' ' -f2-)
}

# run_nexmark_sql REP: the plain SQL baseline of cases N1 and N2, in one
# session with work_mem = 64MB (streamwin.batch_work_mem's default): the
# bids COPYed from gen_nexmark.pl's CSV into a fresh ordinary table
# (autovacuum off), VACUUM (ANALYZE), then each case's result as one
# INSERT ... SELECT into a table keyed as streamwin's result is: N1's hop
# windows by generate_series over each bid's 5 windows, N2's sessions by
# gaps and islands (a bid 10 s or more after its bidder's previous one
# starts a session; a session ends 10 s after its last bid).  Recorded per
# case: the statement alone (nx_sql) and the load + the statement
# (nx_sql_load).  Both results are checked as streamwin's are.
run_nexmark_sql() {
	local rep=$1 file=$work/nexmark_sql.sql out=$work/log/nexmark_sql_r$1.out
	local t0 c0 t1 c1 t2 c2 t3 c3 h3 a3 t4 c4 h4 a4 steps chk_h chk_s
	sql >/dev/null <<EOF
DROP TABLE IF EXISTS nx_bids, nx_hop_sql, nx_session_sql;
CREATE TABLE nx_bids (auction bigint, bidder bigint, price bigint, channel text, url text,
	date_time timestamptz, extra text) WITH (autovacuum_enabled = false);
CREATE TABLE nx_hop_sql (window_start timestamptz, window_end timestamptz, auction bigint, n bigint,
	PRIMARY KEY (window_start, auction));
CREATE TABLE nx_session_sql (window_start timestamptz, window_end timestamptz, bidder bigint, n bigint,
	PRIMARY KEY (window_start, bidder));
CHECKPOINT;
EOF
	cat >"$file" <<EOF
SET work_mem = '64MB';
SELECT t AS t0, cpu AS c0 FROM bench_probe() \gset
COPY nx_bids FROM '$work/nexmark/bids.csv' (FORMAT csv);
SELECT t AS t1, cpu AS c1 FROM bench_probe() \gset
VACUUM (ANALYZE) nx_bids;
SELECT t AS t2, cpu AS c2 FROM bench_probe() \gset
INSERT INTO nx_hop_sql
SELECT w.ws, w.ws + interval '10 seconds', b.auction, count(*)
  FROM nx_bids b
       CROSS JOIN LATERAL generate_series(date_bin('2 seconds', b.date_time, timestamptz 'epoch') - interval '8 seconds',
                                          date_bin('2 seconds', b.date_time, timestamptz 'epoch'),
                                          interval '2 seconds') AS w(ws)
 GROUP BY w.ws, b.auction;
SELECT t AS t3, cpu AS c3, hwm_kb AS h3, anon_kb AS a3 FROM bench_probe() \gset
INSERT INTO nx_session_sql
SELECT min(date_time), max(date_time) + interval '10 seconds', bidder, count(*)
  FROM (SELECT bidder, date_time,
               count(*) FILTER (WHERE starts) OVER (PARTITION BY bidder ORDER BY date_time
                                                    ROWS UNBOUNDED PRECEDING) AS session
          FROM (SELECT bidder, date_time,
                       date_time - lag(date_time) OVER (PARTITION BY bidder ORDER BY date_time)
                         >= interval '10 seconds' AS starts
                  FROM nx_bids) AS g) AS s
 GROUP BY bidder, session;
SELECT t AS t4, cpu AS c4, hwm_kb AS h4, anon_kb AS a4 FROM bench_probe() \gset
\echo PROBES :t0 :c0 :t1 :c1 :t2 :c2 :t3 :c3 :h3 :a3 :t4 :c4 :h4 :a4
EOF
	load_then_two "$file" "$out" N1 nx_sql "$rep" || return
	read -r t0 c0 t1 c1 t2 c2 t3 c3 h3 a3 t4 c4 h4 a4 <<<"${P[*]}"
	chk_h=$(check_counts nx_hop_sql auction "$NX_HOP_GROUPS" "$NX_HOP_N" "$NX_HOP_SQ" "$NX_HOP_KEY")
	chk_s=$(check_counts nx_session_sql bidder "$NX_SESSION_GROUPS" "$NX_SESSION_N" "$NX_SESSION_SQ" "$NX_SESSION_KEY")
	steps="COPY $(calc "$t1 - $t0") s (CPU $(calc "$c1 - $c0")), VACUUM ANALYZE $(calc "$t2 - $t1") s (CPU $(calc "$c2 - $c1"))"
	record N1 nx_sql "$rep" "$NX_BIDS" "$(calc "$t3 - $t2")" "$(calc "$c3 - $c2")" "$h3" "$a3" "$chk_h" \
		"the INSERT ... SELECT ... generate_series ... GROUP BY alone, after the load"
	record N1 nx_sql_load "$rep" "$NX_BIDS" "$(calc "$t3 - $t0")" "$(calc "$c3 - $c0")" "$h3" "$a3" "$chk_h" \
		"$steps, then the statement $(calc "$t3 - $t2") s"
	record N2 nx_sql "$rep" "$NX_BIDS" "$(calc "$t4 - $t3")" "$(calc "$c4 - $c3")" "$h4" "$a4" "$chk_s" \
		"the INSERT ... SELECT with window functions (gaps and islands) alone, after the load"
	record N2 nx_sql_load "$rep" "$NX_BIDS" "$(calc "$t2 - $t0 + $t4 - $t3")" "$(calc "$c2 - $c0 + $c4 - $c3")" \
		"$h4" "$a4" "$chk_s" "$steps, then the statement $(calc "$t4 - $t3") s"
	sql -c "DROP TABLE nx_bids, nx_hop_sql, nx_session_sql" >/dev/null
}

if nexmark_wanted; then
	say "Raw ceiling on bids (the Nexmark-shaped bids), $BENCH_RAW_REPEAT runs"
	run_raw N0 bids "$BENCH_NX_PARTITIONS" "$NX_BIDS"
	say "streamwin floor on bids, $BENCH_REPEAT runs: read and decode, a filter that keeps no bid"
	for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
		run_floor "$rep" N0
	done
	for c in N1 N2; do
		[[ $c == N1 ]] && ! only nexmark_hop && continue
		[[ $c == N2 ]] && ! only nexmark_session && continue
		say "streamwin case $c, $BENCH_REPEAT runs, watermark 4 s: $(case_sql "$c")"
		for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
			run_streamwin "$c" "$rep"
		done
	done
	say "Plain SQL over the same bids, $BENCH_REPEAT runs: COPY, VACUUM ANALYZE, then N1's and N2's results"
	for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
		run_nexmark_sql "$rep"
	done
fi

# --- case J: a stream-stream join ----------------------------------------------------
# run_join_raw REP: the bare consumer over topic impressions, then over
# topic clicks: one record with the two runs' wall and CPU summed.
run_join_raw() {
	local rep=$1 t line w=0 cpu=0 msgs=0 rss=0 chk=ok note='' b0 b1
	b0=$(proc_cpu "$broker_pid")
	for t in impressions clicks; do
		line=$(test/bench/raw_consume --brokers "$brokers" --topic "$t" \
			--partitions "$BENCH_JOIN_PARTITIONS" --expect "$J_IMPS")
		eval "$line"   # messages= bytes= wall_s= cpu_s= user_s= sys_s= maxrss_kb= first_s=
		# shellcheck disable=SC2154
		[[ $messages == "$J_IMPS" ]] || chk="WRONG(messages_$t=$messages)"
		# shellcheck disable=SC2154
		w=$(calc "$w + $wall_s") cpu=$(calc "$cpu + $cpu_s") msgs=$((msgs + messages))
		# shellcheck disable=SC2154
		if ((maxrss_kb > rss)); then rss=$maxrss_kb; fi
		# shellcheck disable=SC2154
		note+="$t: wall ${wall_s} s, CPU ${cpu_s} s, first message after ${first_s} s; "
	done
	b1=$(proc_cpu "$broker_pid")
	record J raw "$rep" "$msgs" "$w" "$cpu" "$rss" "$rss" "$chk" "${note}broker CPU $(calc "$b1 - $b0") s"
}

# run_join_sql REP: the plain SQL baseline of cases J and JA, in one
# session with work_mem = 64MB (streamwin.batch_work_mem's default, the
# work_mem of streamwin's batch statements): the impressions and clicks
# COPYed from gen_join.pl's CSV into two fresh ordinary tables (autovacuum
# off on them, as on case 5's table, so that it cannot start in the middle
# of a measurement), VACUUM (ANALYZE) of both (what autovacuum would do
# before a cron job came), then case J's join as one INSERT ... SELECT into a
# table like streamwin's result, then case JA's as one INSERT ... SELECT ...
# GROUP BY.  Each step is timed by probes of the backend between them;
# recorded: each statement alone (approach join_sql) and load (COPY + VACUUM
# ANALYZE) + statement (join_sql_load).  Both results are checked.
run_join_sql() {
	local rep=$1 file=$work/join_sql.sql out=$work/log/join_sql_r$1.out
	local chk chk_a t0 c0 t1 c1 t2 c2 t3 c3 h3 a3 t4 c4 h4 a4 steps
	sql >/dev/null <<EOF
DROP TABLE IF EXISTS j_imp, j_clk, j_pairs_sql, j_agg_sql;
CREATE TABLE j_imp (imp_id bigint, ad_id int, imp_time timestamptz) WITH (autovacuum_enabled = false);
CREATE TABLE j_clk (click_id bigint, imp_id bigint, ad_id int, click_time timestamptz)
	WITH (autovacuum_enabled = false);
CREATE TABLE j_pairs_sql (ad_id int, imp_id bigint, click_id bigint, delay interval);
CREATE TABLE j_agg_sql (window_start timestamptz, window_end timestamptz, ad_id int, n bigint,
	PRIMARY KEY (window_start, ad_id));
CHECKPOINT;
EOF
	cat >"$file" <<EOF
SET work_mem = '64MB';
SELECT t AS t0, cpu AS c0 FROM bench_probe() \gset
COPY j_imp FROM '$work/join/imps.csv' (FORMAT csv);
COPY j_clk FROM '$work/join/clks.csv' (FORMAT csv);
SELECT t AS t1, cpu AS c1 FROM bench_probe() \gset
VACUUM (ANALYZE) j_imp, j_clk;
SELECT t AS t2, cpu AS c2 FROM bench_probe() \gset
INSERT INTO j_pairs_sql
SELECT i.ad_id, i.imp_id, c.click_id, c.click_time - i.imp_time
  FROM j_imp i JOIN j_clk c ON $(join_on);
SELECT t AS t3, cpu AS c3, hwm_kb AS h3, anon_kb AS a3 FROM bench_probe() \gset
INSERT INTO j_agg_sql
SELECT w.ws, w.ws + interval '1 minute', i.ad_id, count(*)
  FROM j_imp i JOIN j_clk c ON $(join_on)
       CROSS JOIN LATERAL (SELECT date_bin('1 minute', i.imp_time, timestamptz 'epoch')) AS w(ws)
 GROUP BY 1, 3;
SELECT t AS t4, cpu AS c4, hwm_kb AS h4, anon_kb AS a4 FROM bench_probe() \gset
\echo PROBES :t0 :c0 :t1 :c1 :t2 :c2 :t3 :c3 :h3 :a3 :t4 :c4 :h4 :a4
EOF
	load_then_two "$file" "$out" J join_sql "$rep" || return
	read -r t0 c0 t1 c1 t2 c2 t3 c3 h3 a3 t4 c4 h4 a4 <<<"${P[*]}"
	chk=$(check_pairs j_pairs_sql)
	chk_a=$(check_counts j_agg_sql ad_id "$J_AGG_GROUPS" "$J_AGG_N" "$J_AGG_SQ" "$J_AGG_KEY")
	steps="COPY $(calc "$t1 - $t0") s (CPU $(calc "$c1 - $c0")), VACUUM ANALYZE $(calc "$t2 - $t1") s (CPU $(calc "$c2 - $c1"))"
	record J join_sql "$rep" "$((J_IMPS + J_CLICKS))" "$(calc "$t3 - $t2")" "$(calc "$c3 - $c2")" \
		"$h3" "$a3" "$chk" "the INSERT ... SELECT ... JOIN alone, after the load"
	record J join_sql_load "$rep" "$((J_IMPS + J_CLICKS))" "$(calc "$t3 - $t0")" "$(calc "$c3 - $c0")" \
		"$h3" "$a3" "$chk" "$steps, then the join $(calc "$t3 - $t2") s"
	record JA join_sql "$rep" "$((J_IMPS + J_CLICKS))" "$(calc "$t4 - $t3")" "$(calc "$c4 - $c3")" \
		"$h4" "$a4" "$chk_a" "the INSERT ... SELECT ... JOIN ... GROUP BY alone, after the load"
	record JA join_sql_load "$rep" "$((J_IMPS + J_CLICKS))" "$(calc "$t2 - $t0 + $t4 - $t3")" \
		"$(calc "$c2 - $c0 + $c4 - $c3")" "$h4" "$a4" "$chk_a" "$steps, then the statement $(calc "$t4 - $t3") s"
	sql -c "DROP TABLE j_imp, j_clk, j_pairs_sql, j_agg_sql" >/dev/null
}

if only join; then
	say "Raw ceiling on impressions and clicks, $BENCH_RAW_REPEAT runs of one over each (the fastest pair is the ceiling)"
	for ((rep = 1; rep <= BENCH_RAW_REPEAT; rep++)); do
		run_join_raw "$rep"
	done
	for c in J JA; do
		say "streamwin case $c, $BENCH_REPEAT runs, watermark 1 minute, $(case_mode "$c") mode: $(case_sql "$c")"
		for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
			run_streamwin "$c" "$rep"
		done
	done
	say "Plain SQL over the same impressions and clicks in two tables, $BENCH_REPEAT runs"
	for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
		run_join_sql "$rep"
	done
fi

# --- streamwin in a background worker ------------------------------------------------
if only worker; then
say "streamwin case 1 in a background worker (trigger_interval 0), until lag = 0"
sql >/dev/null <<EOF
SELECT streamwin.create_query('sw_worker', \$q\$$(case_sql 1)\$q\$, output_mode => 'update',
	trigger_interval => '0', start => false);
CHECKPOINT;
EOF
# Poll from one client session, one short statement at a time: a statement
# that ran for the whole catch-up would hold a snapshot that keeps the dead
# row versions of every batch's updates alive and slows the worker down.
out=$work/log/streamwin_worker.out
w_ok=
coproc POLL { "${PSQL[@]}" -At 2>&1; }
bg_pids+=($POLL_PID)
echo "SELECT extract(epoch FROM clock_timestamp()); SELECT streamwin.start_query('sw_worker');" >&"${POLL[1]}"
read -t 60 -r w_t0 <&"${POLL[0]}"
read -t 60 -r _ <&"${POLL[0]}"
for ((i = 0; i < 15000; i++)); do
	echo "SELECT coalesce((SELECT lag = 0 FROM streamwin.queries WHERE name = 'sw_worker')
		AND (SELECT coalesce(sum(n), 0) FROM sw_worker) = $EXPECT_EVENTS, false),
		extract(epoch FROM clock_timestamp());" >&"${POLL[1]}"
	IFS="|" read -t 60 -r done w_t1 <&"${POLL[0]}"
	[[ $done == t ]] && { w_ok=1; break; }
	[[ $done == f ]] || { echo "polling failed: $done $w_t1" >>"$out"; break; }
	sleep 0.02
done
exec {POLL[1]}>&-
wait "$POLL_PID" 2>/dev/null || true
if [[ -n $w_ok ]] && sql >>"$out" 2>&1 <<EOF; then
SELECT worker_pid AS w_pid FROM streamwin.queries WHERE name = 'sw_worker' \gset
SELECT round(cpu::numeric, 2) AS w_cpu, hwm_kb AS w_hwm, anon_kb AS w_anon FROM bench_probe(:w_pid) \gset
SELECT count(*) AS w_batches,
       round(extract(epoch FROM max(pg_xact_commit_timestamp(xmin)) - min(started_at))::numeric, 3) AS w_span
  FROM streamwin.progress_log WHERE query = 'sw_worker' AND input_rows > 0 \gset
\echo WORKER :w_cpu :w_hwm :w_anon :w_batches :w_span
EOF
	read -r _ w_cpu w_hwm w_anon w_batches w_span < <(grep '^WORKER ' "$out")
	chk=$(check_result sw_worker "$EXPECT_GROUPS_1" "$EXPECT_EVENTS" "$EXPECT_SUM_V")
	record 1 worker 1 "$EXPECT_EVENTS" "$(calc "$w_t1 - $w_t0")" "$w_cpu" "$w_hwm" "$w_anon" "$chk" \
		"$w_batches batches; first batch start to last commit ${w_span} s"
else
	cat "$out"
	record 1 worker 1 0 0 0 0 0 FAILED "did not catch up in 300 s or failed: see $out"
fi
sql -c "SELECT streamwin.stop_query('sw_worker'); SELECT streamwin.drop_query('sw_worker', true)" >/dev/null 2>&1 || true
fi

# --- case S: a large state -------------------------------------------------------------
# A running aggregate (GROUP BY g, no window: every group stays open) over
# BENCH_STATE_GROUPS groups, then batches of 1,000 events over 100 of
# them (gen_state.pl).
#
# The build: query st_big (GROUP BY g) in a background worker (start_query,
# trigger_interval 0; batches of streamwin.max_records_per_batch's default,
# 100,000) until its batches have read the build's events; the worker's CPU,
# VmHWM and RssAnon are read when it is done.  Query st_small (GROUP BY h,
# 1,000 groups) reads the same events the same way first: the difference of
# the two workers' RssAnon (private memory: shared buffers are not in it),
# per group, is the worker's memory per group, everything else (librdkafka,
# the batches' memory) being the same in both.  Both results are checked.
#
# The timed batches: the timed events are produced, checkpoint_min_interval
# is set to 0 and streamwin.checkpoint_interval to 1 (ALTER SYSTEM, a
# reload), then one session with streamwin.max_records_per_batch = 1000:
#   - a first run_batch, which loads the state from the state table (the
#     workers' batches were another process's) and takes the checkpoint
#     that catches up with the build (the worker's checkpoints were at
#     least checkpoint_min_interval apart, so its last batches' changes are
#     in none yet): reported on its own, since it costs the groups the build
#     changed since its last checkpoint, not the 100 of a batch;
#   - streamwin.checkpoint_interval set to BENCH_STATE_CKPT (and checked);
#   - BENCH_STATE_BATCHES run_batch calls, each its own statement (so each
#     commits), timed by psql's \timing around the statement: the call, its
#     commit and the round trip; after each, untimed, whether that batch took
#     a checkpoint (query_catalog.checkpoint_batch_id = its batch_id);
#   - CALL bench_state_loop: BENCH_STATE_BATCHES more in a procedure that
#     commits after each, as a worker's loop does, each timed in it from
#     before the call to after the COMMIT.
# Checked: every batch read 1,000 events; every timed event is in the batch
# that the offsets in streamwin.progress say (which also gives the number of
# groups of each batch); the result has every group, every event and the
# exact sum.

# worker_until Q ROWS OUT: start query Q in a background worker and poll,
# one short statement at a time from one session (see case 1's worker run),
# until its committed batches' input_rows add up to ROWS; the worker's CPU
# and memory are read by the statement that first sees it done, the wall
# time ends there.  Then the worker is stopped and waited for.  Sets W_WALL,
# W_CPU, W_HWM, W_ANON and W_BATCHES; fails if the worker did not get there
# in 10 minutes or failed.
worker_until() {
	local q=$1 rows=$2 out=$3 t0 t1 is_done n probe failed i
	W_WALL='' W_CPU='' W_HWM='' W_ANON='' W_BATCHES=''
	sql -c "CHECKPOINT" >/dev/null
	coproc WPOLL { "${PSQL[@]}" -At 2>&1; }
	bg_pids+=("$WPOLL_PID")
	echo "SELECT extract(epoch FROM clock_timestamp()); SELECT streamwin.start_query('$q');" >&"${WPOLL[1]}"
	read -t 60 -r t0 <&"${WPOLL[0]}" || t0=
	read -t 60 -r _ <&"${WPOLL[0]}" || true
	is_done=
	for ((i = 0; i < 30000; i++)); do
		echo "SELECT d.n >= $rows, extract(epoch FROM clock_timestamp()), d.n, d.b,
			CASE WHEN d.n >= $rows THEN
				(SELECT round(cpu::numeric, 2) || ' ' || hwm_kb || ' ' || anon_kb FROM bench_probe(q.worker_pid)) END,
			q.last_error IS NOT NULL
		  FROM streamwin.queries AS q,
		       (SELECT coalesce(sum(input_rows), 0) AS n, count(*) FILTER (WHERE input_rows > 0) AS b
		          FROM streamwin.progress WHERE query = '$q') AS d
		 WHERE q.name = '$q';" >&"${WPOLL[1]}"
		IFS='|' read -t 60 -r is_done t1 n W_BATCHES probe failed <&"${WPOLL[0]}" || is_done=
		[[ $is_done == t ]] && break
		[[ $is_done == f && $failed == f ]] || { echo "polling $q stopped: $is_done $t1 $n $probe $failed" >>"$out"; break; }
		sleep 0.02
	done
	exec {WPOLL[1]}>&-
	wait "$WPOLL_PID" 2>/dev/null || true
	sql -c "SELECT streamwin.stop_query('$q')" >/dev/null 2>&1 || true
	for ((i = 0; i < 600; i++)); do
		[[ -z $(sql -c "SELECT worker_pid FROM streamwin.queries WHERE name = '$q'" 2>/dev/null) ]] && break
		sleep 0.05
	done
	if [[ $is_done != t || -z $t0 || -z $probe ]]; then
		sql -c "SELECT name, state, worker_pid, lag, last_error FROM streamwin.queries WHERE name = '$q'" >>"$out" 2>&1 || true
		cat "$out" >&2
		return 1
	fi
	read -r W_CPU W_HWM W_ANON <<<"$probe"
	W_WALL=$(calc "$t1 - $t0")
}

# lat_stats FILE: FILE has "MS CHECKPOINT(0|1)" per batch; prints
# "batches median p90 p99 max ckpt_batches ckpt_median ckpt_max" (ms; the
# first five over the batches without a checkpoint).
lat_stats() {
	perl -e '
		sub pct { my ($p, @v) = @_; return "-" unless @v; @v = sort { $a <=> $b } @v;
			my $i = $p * $#v; my $lo = int($i);
			return sprintf("%.2f", $lo == $#v ? $v[$lo] : $v[$lo] + ($i - $lo) * ($v[$lo + 1] - $v[$lo])) }
		my (@n, @c);
		while (<>) { my ($ms, $ck) = split; push @{ $ck ? \@c : \@n }, $ms }
		print join(" ", scalar @n, pct(0.5, @n), pct(0.9, @n), pct(0.99, @n), pct(1, @n),
			scalar @c, pct(0.5, @c), pct(1, @c)), "\n";' "$1"
}

# run_state_new Q [SKIP]: first, untimed, SKIP timed events of Q (those
# st_big's session batches read); then BENCH_STATE_NEW batches of query Q, each run_batch
# from a new session (a cron job's), 1,000 events each, timed by psql's
# \timing around the call (its commit included, the connection not);
# untimed after each, whether it took a checkpoint.  Records
# "Q_new_sessions" with the calls' median, p90, p99 and max (ms), and the
# same of the batches' own duration_ms (the batch, without what a new
# session sets up before it: the query's runner, its Kafka consumer).
# Checked: every batch read 1,000 events (st_join's: up to 1,000, what its
# two consumers fetched in time), st_dedup's result has every key once,
# st_join's every pair of what it read (check_join_pairs; st_big's is
# checked with all its batches, these the last).
run_state_new() {
	local q=$1 i line ms id rows bms ck bad=0 stats bstats chk t0 t1 nck=0 nrows=0 skip=${2:-0} read0
	: >"$work/state_new_$q.txt"
	: >"$work/state_new_batch_$q.txt"
	# untimed, the timed events st_big read before its new sessions, so that
	# each query's new sessions read the same blocks: the same Kafka record
	# batches, which a new consumer parses from the block to their end (with
	# BENCH_STATE_BURST=1 a block in a large record batch costs a new
	# consumer several times one in a small one)
	if ((skip > 0)); then
		read0=$(sql -c "SELECT coalesce(sum(input_rows), 0) FROM streamwin.progress WHERE query = '$q'")
		# in one session (one consumer), each batch up to what is left to skip
		for ((i = 0; i < 50; i++)); do
			echo "SELECT set_config('streamwin.max_records_per_batch', greatest(1, $skip -
				(SELECT coalesce(sum(input_rows), 0) - $read0 FROM streamwin.progress WHERE query = '$q'))::text, false);
			SELECT streamwin.run_batch('$q') IS NOT NULL
			 WHERE (SELECT coalesce(sum(input_rows), 0) - $read0 FROM streamwin.progress WHERE query = '$q') < $skip;"
		done | sql >/dev/null
		rows=$(sql -c "SELECT coalesce(sum(input_rows), 0) - $read0 FROM streamwin.progress WHERE query = '$q'")
		echo "$q skipped $rows of $skip timed events before its new sessions" >>"$work/log/state.out"
	fi
	t0=$(now)
	for ((i = 0; i < BENCH_STATE_NEW; i++)); do
		# st_big's block i arrives before its call (the others read the same)
		if [[ $q == st_big && $BENCH_STATE_BURST != 1 ]]; then
			sed -n "$((i * 1000 + 1)),$((i * 1000 + 1000))p" "$work/state/timed_new.tsv" |
				test/kafka_produce --brokers "$brokers" --topic st --partition-prefix --quiet \
					--linger-ms 100 --batch-num-messages 100000
		fi
		line=$("${PSQL[@]}" -At -F ' ' -c "SET streamwin.max_records_per_batch = 1000" -c '\timing on' \
			-c "SELECT r->>'batch_id', r->>'input_rows', r->>'duration_ms' FROM streamwin.run_batch('$q') AS r" 2>&1 | tr '\n' ' ') || true
		read -r id rows bms _ ms _ <<<"$line"
		echo "${bms:-0} 0" >>"$work/state_new_batch_$q.txt"
		ck=$(sql -c "SELECT (checkpoint_batch_id IS NOT DISTINCT FROM $id::bigint)::int FROM streamwin.query_catalog WHERE name = '$q'" 2>/dev/null || echo 0)
		# a join's batch takes what its two consumers have fetched: up to 1,000
		if [[ $q == st_join ]]; then
			[[ $rows -gt 0 && $rows -le 1000 ]] || bad=$((bad + 1))
			nrows=$((nrows + ${rows:-0}))
		else
			[[ $rows == 1000 ]] || bad=$((bad + 1))
			nrows=$((nrows + 1000))
		fi
		nck=$((nck + ${ck:-0}))
		echo "${ms:-0} 0" >>"$work/state_new_$q.txt"
		echo "$q new session $i: $line ckpt=$ck" >>"$work/log/state.out"
	done
	t1=$(now)
	stats=$(lat_stats "$work/state_new_$q.txt")
	bstats=$(lat_stats "$work/state_new_batch_$q.txt")
	if [[ $bad != 0 ]]; then
		chk="WRONG(batches_not_1000_events=$bad)"
	elif [[ $q == st_dedup ]]; then
		chk=$(sql -c "SELECT CASE WHEN count(*) = $ST_GROUPS AND count(DISTINCT g) = $ST_GROUPS THEN 'ok'
			ELSE 'WRONG(rows=' || count(*) || ',keys=' || count(DISTINCT g) || ')' END FROM st_dedup")
	elif [[ $q == st_join ]]; then
		chk=$(check_join_pairs)
	else
		chk=ok	# st_big's result is checked with the case's other batches
	fi
	record S "${q}_new_sessions" 1 "$nrows" "$(calc "$t1 - $t0")" 0 0 0 "$chk" \
		"stats=${stats// /,};batch_stats=${bstats// /,};checkpoints=$nck;groups=$ST_GROUPS"
}

# check_join_pairs: st_join's result against the pairs of the events its
# last batch's offsets say it read (the build's, gen_state.pl's timed events
# before each partition's stored next offset) with the dimension rows of
# dim.tsv, counted in SQL from the generator's files; and each pair with its
# dimension row's value.
check_join_pairs() {
	sql <<EOF
CREATE TEMP TABLE jk (p int, idx bigint, g bigint);
COPY jk FROM '$work/state/timed_keys.tsv';
CREATE TEMP TABLE jd (p int, j jsonb);
COPY jd FROM '$work/state/dim.tsv';
WITH o AS (SELECT key::int AS p, value::bigint AS next_offset
             FROM streamwin.progress b, jsonb_each_text(b.offsets->'st_j')
            WHERE b.query = 'st_join'
              AND b.batch_id = (SELECT max(batch_id) FROM streamwin.progress WHERE query = 'st_join')),
     d AS (SELECT (j->>'g')::bigint AS g, (j->>'v')::bigint AS v FROM jd),
     ev AS (SELECT (i * 7919) % $ST_GROUPS AS g FROM generate_series(0::bigint, $ST_GROUPS - 1) i
            UNION ALL
            SELECT k.g FROM jk k JOIN o ON o.p = k.p
             WHERE k.idx < o.next_offset - ($ST_GROUPS - k.p + $BENCH_STATE_PARTITIONS - 1) / $BENCH_STATE_PARTITIONS),
     want AS (SELECT count(*) AS n FROM ev JOIN d USING (g)),
     got AS (SELECT count(*) AS n, count(*) FILTER (WHERE r.dv IS DISTINCT FROM d.v) AS bad
               FROM st_join r LEFT JOIN d USING (g))
SELECT CASE WHEN got.n = want.n AND got.bad = 0 THEN 'ok'
            ELSE 'WRONG(pairs=' || got.n || ',want=' || want.n || ',bad=' || got.bad || ')' END
  FROM got, want;
EOF
}

run_state() {
	local out=$work/log/state.out q groups approach chk note i perf_pid='' pid
	local p0 p1 p2 p3 f_id f_ms f_ck interval s_stats l_stats bad
	: >"$out"
	sql >/dev/null <<EOF
SELECT streamwin.create_query('st_small', 'SELECT h, count(*) AS n, sum(v) AS s FROM st GROUP BY h',
	output_mode => 'update', trigger_interval => '0', start => false);
SELECT streamwin.create_query('st_big', 'SELECT g, count(*) AS n, sum(v) AS s FROM st GROUP BY g',
	output_mode => 'update', trigger_interval => '0', start => false);
SELECT streamwin.create_query('st_dedup', 'SELECT g, h, v FROM st', dedup_keys => '{g}',
	trigger_interval => '0', options => '{"dedup_without_watermark": true}', start => false);
SELECT streamwin.create_query('st_join', \$q\$SELECT a.g, a.v, d.v AS dv FROM st_j a JOIN st_dim d
	ON a.g = d.g AND a.kts BETWEEN d.kts - interval '1 day' AND d.kts + interval '1 day'\$q\$,
	watermark => '1 hour', trigger_interval => '0', start => false);
EOF
	for q in st_small st_big; do
		groups=$ST_GROUPS approach=state_build
		[[ $q == st_small ]] && groups=$ST_SMALL_GROUPS approach=state_build_small
		say "Case S: query $q ($groups groups) reads the $ST_GROUPS build events in a background worker"
		if ! worker_until "$q" "$ST_GROUPS" "$out"; then
			record S "$approach" 1 0 0 0 0 0 FAILED "did not finish in 600 s or failed: see $out"
			return
		fi
		chk=$(check_result "$q" "$groups" "$ST_GROUPS" "$ST_BUILD_SUM")
		record S "$approach" 1 "$ST_GROUPS" "$W_WALL" "$W_CPU" "$W_HWM" "$W_ANON" "$chk" \
			"groups=$groups;batches=$W_BATCHES"
	done
	say "Case S: query st_dedup ($ST_GROUPS keys) reads the $ST_GROUPS build events in a background worker"
	if ! worker_until st_dedup "$ST_GROUPS" "$out"; then
		record S dedup_build 1 0 0 0 0 0 FAILED "did not finish in 600 s or failed: see $out"
		return
	fi
	chk=$(sql -c "SELECT CASE WHEN count(*) = $ST_GROUPS AND count(DISTINCT g) = $ST_GROUPS THEN 'ok'
		ELSE 'WRONG(rows=' || count(*) || ',keys=' || count(DISTINCT g) || ')' END FROM st_dedup")
	record S dedup_build 1 "$ST_GROUPS" "$W_WALL" "$W_CPU" "$W_HWM" "$W_ANON" "$chk" \
		"keys=$ST_GROUPS;batches=$W_BATCHES"
	say "Case S: query st_join ($ST_GROUPS + $ST_DIM_ROWS join rows) reads the build events and the dimension rows in a background worker"
	if ! worker_until st_join "$((ST_GROUPS + ST_DIM_ROWS))" "$out"; then
		record S join_build 1 0 0 0 0 0 FAILED "did not finish in 600 s or failed: see $out"
		return
	fi
	record S join_build 1 "$((ST_GROUPS + ST_DIM_ROWS))" "$W_WALL" "$W_CPU" "$W_HWM" "$W_ANON" \
		"$(check_join_pairs)" "join_rows=$((ST_GROUPS + ST_DIM_ROWS));batches=$W_BATCHES"

	say "Case S: $BENCH_STATE_BATCHES batches of 1,000 events in one session, then $BENCH_STATE_BATCHES in a loop with commits"
	# the new sessions' blocks are produced one by one before their calls
	# (run_state_new), unless BENCH_STATE_BURST=1
	if [[ $BENCH_STATE_BURST == 1 ]]; then
		produce "$work/state/timed.tsv" st
	else
		head -n "-$((BENCH_STATE_NEW * 1000))" "$work/state/timed.tsv" >"$work/state/timed_session.tsv"
		tail -n "$((BENCH_STATE_NEW * 1000))" "$work/state/timed.tsv" >"$work/state/timed_new.tsv"
		produce "$work/state/timed_session.tsv" st
	fi
	sql >/dev/null <<EOF
ALTER SYSTEM SET streamwin.checkpoint_interval = 1;
ALTER SYSTEM SET streamwin.checkpoint_min_interval = 0;
SELECT pg_reload_conf();
CREATE TABLE bench_state_loop (seq int, ms float8, batch_id bigint, input_rows bigint, ckpt bigint);
-- a worker's loop: a batch, its commit, the next; each timed from before the
-- call to after the commit
CREATE PROCEDURE bench_state_loop(q text, n int, keep boolean DEFAULT true) LANGUAGE plpgsql AS \$p\$
DECLARE
	t0 timestamptz;
	r jsonb;
	ms float8[] := '{}';
	ids bigint[] := '{}';
	rws bigint[] := '{}';
	ck bigint[] := '{}';
BEGIN
	FOR i IN 1 .. n LOOP
		t0 := clock_timestamp();
		r := streamwin.run_batch(q);
		COMMIT;
		ms := ms || (extract(epoch FROM clock_timestamp() - t0) * 1000)::float8;
		ids := ids || (r->>'batch_id')::bigint;
		rws := rws || (r->>'input_rows')::bigint;
		ck := ck || (SELECT checkpoint_batch_id FROM streamwin.query_catalog WHERE name = q);
	END LOOP;
	INSERT INTO bench_state_loop
	SELECT u.seq, u.ms, u.id, u.rws, u.ck FROM unnest(ms, ids, rws, ck) WITH ORDINALITY AS u(ms, id, rws, ck, seq)
	 WHERE keep;
END
\$p\$;
CHECKPOINT;
EOF
	[[ $((1000 % BENCH_STATE_PARTITIONS)) == 0 ]] ||
		echo "  warning: BENCH_STATE_PARTITIONS=$BENCH_STATE_PARTITIONS does not divide 1,000: batches straddle the blocks of 100 groups" >&2
	sleep 1   # every backend has read the new settings
	local probe="t, cpu, hwm_kb, anon_kb FROM bench_probe()"
	{
		echo "SET streamwin.max_records_per_batch = 1000;"
		echo "SET application_name = 'bench_state';"
		echo "SELECT 'P0', $probe;"
		printf '%s\n' '\timing on'
		echo "SELECT 'F', r->>'batch_id', r->>'input_rows' FROM streamwin.run_batch('st_big') AS r;"
		echo "SELECT 'C', checkpoint_batch_id FROM streamwin.query_catalog WHERE name = 'st_big';"
		printf '%s\n' '\timing off'
		echo "SELECT 'P1', $probe;"
		echo "ALTER SYSTEM SET streamwin.checkpoint_interval = $BENCH_STATE_CKPT;"
		echo "SELECT pg_reload_conf();"
		echo "SELECT pg_sleep(0.5);"
		echo "SELECT 'I', current_setting('streamwin.checkpoint_interval');"
		printf '%s\n' '\timing on'
		for ((i = 0; i < BENCH_STATE_BATCHES; i++)); do
			echo "SELECT 'B', r->>'batch_id', r->>'input_rows' FROM streamwin.run_batch('st_big') AS r;"
			echo "SELECT 'C', checkpoint_batch_id FROM streamwin.query_catalog WHERE name = 'st_big';"
		done
		printf '%s\n' '\timing off'
		echo "SELECT 'P2', $probe;"
		echo "CALL bench_state_loop('st_big', $BENCH_STATE_BATCHES);"
		echo "SELECT 'P3', $probe;"
		echo "SELECT 'L', ms, batch_id, input_rows, ckpt FROM bench_state_loop ORDER BY seq;"
		# with BENCH_PROFILE=1, as many again under perf, not kept
		if [[ $BENCH_PROFILE == 1 ]]; then
			echo "CALL bench_state_loop('st_big', $BENCH_STATE_BATCHES, false);"
		fi
	} >"$work/state_run.sql"
	if [[ $BENCH_PROFILE == 1 ]]; then
		# the backend of the last loop, while it runs
		(
			for ((i = 0; i < 30000; i++)); do
				pid=$(sql -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'bench_state'
					AND query LIKE 'CALL bench_state_loop(%, false)%' AND state = 'active'")
				[[ -n $pid ]] && break
				sleep 0.02
			done
			[[ -n $pid ]] && exec perf record -F 2999 -g -p "$pid" -o "$work/perf_state.data" >/dev/null 2>&1
		) &
		perf_pid=$!
		bg_pids+=("$perf_pid")
	fi
	"${PSQL[@]}" -At -F ' ' -f "$work/state_run.sql" >"$work/log/state_run.out" 2>&1 ||
		{ cat "$work/log/state_run.out" >&2; record S state_session 1 0 0 0 0 0 FAILED "see $work/log/state_run.out"; }
	if [[ -n $perf_pid ]]; then
		kill -INT "$perf_pid" 2>/dev/null || true
		wait "$perf_pid" 2>/dev/null || true
		perf_summary "$work/perf_state.data" "$BENCH_OUT/profile-state.txt" \
			"case S: $BENCH_STATE_BATCHES batches of 1,000 events into a state of $ST_GROUPS groups, a commit after each (CALL bench_state_loop, a third loop after the two measured)" \
			"the session's backend, all its threads, for the whole procedure loop"
	fi
	sql >/dev/null <<EOF
ALTER SYSTEM RESET streamwin.checkpoint_interval;
ALTER SYSTEM RESET streamwin.checkpoint_min_interval;
SELECT pg_reload_conf();
EOF
	# as a cron job runs them, with the default checkpoint settings; the
	# last of st_big's timed events, which the checks below count
	run_state_new st_big
	run_state_new st_dedup "$(((BENCH_PROFILE == 1 ? 3 : 2) * BENCH_STATE_BATCHES * 1000 + 1000))"
	run_state_new st_join "$(((BENCH_PROFILE == 1 ? 3 : 2) * BENCH_STATE_BATCHES * 1000 + 1000))"
	grep -q '^P3 ' "$work/log/state_run.out" || return 0

	# the statements' timings: a tagged result line, then its "Time:" line
	perl -ne '
		if (/^([FBC]) (\S*) ?(\S*)$/) { $tag = $1; @f = ($2, $3); next }
		if (/^Time: ([\d.]+) ms/ && defined $tag) {
			if ($tag eq "F" || $tag eq "B") { @b = ($tag, @f, $1) }
			elsif (@b) { print "$b[0] $b[1] $b[2] $b[3] ", ($f[0] eq $b[1] ? 1 : 0), "\n"; @b = () }
			undef $tag; next }
		if (/^L (\S+) (\S+) (\S+) (\S*)$/) { print "L $2 $3 $1 ", ($4 eq $2 ? 1 : 0), "\n" }
		if (/^(P\d|I) (.*)$/) { print "$1 $2\n" }' "$work/log/state_run.out" >"$work/state_times.txt"
	read -r _ f_id _ f_ms f_ck < <(grep '^F ' "$work/state_times.txt")
	read -r _ interval < <(grep '^I ' "$work/state_times.txt")
	read -r _ p0 < <(grep '^P0 ' "$work/state_times.txt")
	read -r _ p1 < <(grep '^P1 ' "$work/state_times.txt")
	read -r _ p2 < <(grep '^P2 ' "$work/state_times.txt")
	read -r _ p3 < <(grep '^P3 ' "$work/state_times.txt")
	read -ra p0 <<<"$p0"; read -ra p1 <<<"$p1"; read -ra p2 <<<"$p2"; read -ra p3 <<<"$p3"
	awk '$1 == "B" { print $4, $5 }' "$work/state_times.txt" >"$work/state_session.txt"
	awk '$1 == "L" { print $4, $5 }' "$work/state_times.txt" >"$work/state_loop.txt"
	s_stats=$(lat_stats "$work/state_session.txt")
	l_stats=$(lat_stats "$work/state_loop.txt")
	# batches that did not read exactly 1,000 events, and how many were timed
	bad=$(awk '($1 == "B" || $1 == "L" || $1 == "F") && $3 != 1000' "$work/state_times.txt" | wc -l)
	local n_s n_l
	n_s=$(wc -l <"$work/state_session.txt")
	n_l=$(wc -l <"$work/state_loop.txt")

	# which batch read each timed event (the first whose stored next offset
	# in its partition is past the event's offset), and so each batch's groups
	sql -F ' ' >"$work/log/state_groups.out" <<EOF
CREATE TABLE st_keys (p int, idx bigint, g bigint);
COPY st_keys FROM '$work/state/timed_keys.tsv';
CREATE TABLE st_batches AS
SELECT b.batch_id, o.key::int AS p, o.value::bigint AS next_offset
  FROM streamwin.progress b, jsonb_each_text(b.offsets) AS o WHERE b.query = 'st_big';
CREATE INDEX ON st_batches (p, next_offset);
ANALYZE st_batches;
-- a timed event's offset: the build's events of its partition, then its index
CREATE TABLE st_x AS
SELECT k.g, b.batch_id
  FROM st_keys k
  LEFT JOIN LATERAL (SELECT batch_id FROM st_batches b
                      WHERE b.p = k.p AND b.next_offset > ($ST_GROUPS - k.p + $BENCH_STATE_PARTITIONS - 1) / $BENCH_STATE_PARTITIONS + k.idx
                      ORDER BY b.next_offset LIMIT 1) b ON true;
SELECT 'G', (SELECT count(*) FROM st_x), (SELECT count(batch_id) FROM st_x),
       (SELECT count(*) FROM st_x WHERE batch_id < $f_id), min(ng), percentile_disc(0.5) WITHIN GROUP (ORDER BY ng), max(ng), count(*)
  FROM (SELECT batch_id, count(DISTINCT g) AS ng FROM st_x WHERE batch_id IS NOT NULL GROUP BY batch_id) AS x;
EOF
	read -r _ n_keys n_cov n_early g_min g_med g_max g_batches < <(grep '^G ' "$work/log/state_groups.out")
	chk=$(check_result st_big "$ST_GROUPS" "$((ST_GROUPS + ST_TIMED_EVENTS))" "$((ST_BUILD_SUM + ST_TIMED_SUM))")
	if [[ $bad != 0 ]]; then
		chk="WRONG(batches_not_1000_events=$bad)"
	elif [[ $interval != "$BENCH_STATE_CKPT" ]]; then
		chk="WRONG(setup:checkpoint_interval=$interval)"
	elif [[ $n_s != "$BENCH_STATE_BATCHES" || $n_l != "$BENCH_STATE_BATCHES" ]]; then
		chk="WRONG(timed_batches=$n_s+$n_l)"
	elif [[ $n_keys != "$ST_TIMED_EVENTS" || $n_cov != "$n_keys" || $n_early != 0 || $g_batches != $((ST_TIMED_EVENTS / 1000)) ]]; then
		chk="WRONG(timed_events=$n_keys,covered=$n_cov,before_first=$n_early,batches=$g_batches)"
	fi
	note="first_ms=$f_ms;first_ckpt=$f_ck;build_batches=$W_BATCHES;anon_before_kb=${p0[3]};anon_loaded_kb=${p1[3]};groups=$ST_GROUPS;groups_per_batch=$g_min/$g_med/$g_max;ckpt_interval=$BENCH_STATE_CKPT"
	record S state_session 1 "$((BENCH_STATE_BATCHES * 1000))" "$(calc "${p2[0]} - ${p1[0]}")" \
		"$(calc "${p2[1]} - ${p1[1]}")" "${p2[2]}" "${p2[3]}" "$chk" "stats=${s_stats// /,};$note"
	record S state_loop 1 "$((BENCH_STATE_BATCHES * 1000))" "$(calc "${p3[0]} - ${p2[0]}")" \
		"$(calc "${p3[1]} - ${p2[1]}")" "${p3[2]}" "${p3[3]}" "$chk" "stats=${l_stats// /,};$note"
	sql -c "SELECT streamwin.drop_query(name, true) FROM streamwin.queries WHERE name IN ('st_small', 'st_big', 'st_dedup', 'st_join')" >/dev/null
	sql -c "DROP TABLE st_keys, st_batches, st_x" >/dev/null
}

if only state; then
	run_state
fi

# --- alternatives ----------------------------------------------------------------------
# Summary table of an alternative: the same columns as a streamwin result.
summary_ddl() {
	local key=$2
	[[ $1 == 2 ]] && key=u
	echo "DROP TABLE IF EXISTS $3; CREATE TABLE $3 (window_start timestamptz, window_end timestamptz,
		$key text, n bigint, s float8, a float8, PRIMARY KEY (window_start, $key));"
}
key_of() { [[ $1 == 2 ]] && echo u || echo k; }

# window_from CASE TSEXPR: FROM-clause items giving column ws for each
# window of the event (tumble: one; hop: ten).
windows_of() {
	if [[ $1 == 3 ]]; then
		echo "CROSS JOIN LATERAL generate_series(date_bin('1 minute', $2, timestamptz 'epoch') - interval '9 minutes',
			date_bin('1 minute', $2, timestamptz 'epoch'), interval '1 minute') AS w(ws)"
	else
		echo "CROSS JOIN LATERAL (SELECT date_bin('1 minute', $2, timestamptz 'epoch')) AS w(ws)"
	fi
}
size_of() { [[ $1 == 3 ]] && echo "10 minutes" || echo "1 minute"; }

# run_copy CASE FORMAT REP: COPY + INSERT ... SELECT ... GROUP BY ... ON CONFLICT
run_copy() {
	local c=$1 fmt=$2 rep=$3 key t=alt_copy_$2_c$1 f file stage cols
	key=$(key_of "$c")
	if [[ $fmt == json ]]; then
		stage="CREATE UNLOGGED TABLE stage_json (p jsonb)"
		cols="(p->>'ts')::timestamptz AS ts, p->>'$key' AS $key, (p->>'v')::float8 AS v FROM stage_json"
	else
		stage="CREATE UNLOGGED TABLE stage_csv (id bigint, k text, u text, v float8, ts timestamptz)"
		cols="ts, $key, v FROM stage_csv"
	fi
	sql >/dev/null <<EOF
$(summary_ddl "$c" "$key" "$t")
DROP TABLE IF EXISTS stage_$fmt;
$stage;
CHECKPOINT;
EOF
	file=$work/copy_${fmt}_c$c.sql
	: >"$file"
	for f in "$work"/data/"$fmt"/b*; do
		cat >>"$file" <<EOF
BEGIN;
COPY stage_$fmt FROM '$f' $([[ $fmt == csv ]] && echo "(FORMAT csv)");
INSERT INTO $t AS t
SELECT b.ws, b.ws + interval '$(size_of "$c")', b.$key, b.n, b.s, b.s / b.n
  FROM (SELECT w.ws, e.$key, count(*) AS n, sum(e.v) AS s
          FROM (SELECT $cols OFFSET 0) AS e $(windows_of "$c" e.ts)
         GROUP BY 1, 2) AS b
ON CONFLICT (window_start, $key) DO UPDATE
   SET n = t.n + EXCLUDED.n, s = t.s + EXCLUDED.s, a = (t.s + EXCLUDED.s) / (t.n + EXCLUDED.n);
TRUNCATE stage_$fmt;
COMMIT;
EOF
	done
	measure "copy_${fmt}_c${c}_r$rep" "$file" || { record "$c" "copy_$fmt" "$rep" 0 0 0 0 0 FAILED "see log"; return; }
	chk=$(check_result "$t" "$(case_groups "$c")" "$((EXPECT_EVENTS * $(case_factor "$c")))" "$(case_sum "$c")")
	record "$c" "copy_$fmt" "$rep" "$EXPECT_EVENTS" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" \
		"$BATCH_FILES transactions"
	sql -c "DROP TABLE $t" >/dev/null
}

# The per-row trigger: BEFORE INSERT, upserts the event's summary row and
# skips storing the event itself (cheaper than keeping an events table).
trigger_ddl() {
	local c=$1 key t=alt_trig_c$1
	key=$(key_of "$c")
	cat <<EOF
$(summary_ddl "$c" "$key" "$t")
DROP TABLE IF EXISTS ev_trig_c$c;
CREATE TABLE ev_trig_c$c (id bigint, k text, u text, v float8, ts timestamptz);
CREATE OR REPLACE FUNCTION trig_c$c() RETURNS trigger LANGUAGE plpgsql AS \$f\$
DECLARE
	ws timestamptz := date_bin('1 minute', NEW.ts, timestamptz 'epoch');
BEGIN
	INSERT INTO $t AS t VALUES (ws, ws + interval '1 minute', NEW.$key, 1, NEW.v, NEW.v)
	ON CONFLICT (window_start, $key) DO UPDATE
	   SET n = t.n + 1, s = t.s + EXCLUDED.s, a = (t.s + EXCLUDED.s) / (t.n + 1);
	RETURN NULL;
END
\$f\$;
CREATE TRIGGER summary BEFORE INSERT ON ev_trig_c$c FOR EACH ROW EXECUTE FUNCTION trig_c$c();
CHECKPOINT;
EOF
}

run_trigger_copy() {
	local c=$1 file=$work/trig_copy_c$1.sql f
	trigger_ddl "$c" | sql >/dev/null
	: >"$file"
	for f in "$work"/data/csv/b*; do
		echo "COPY ev_trig_c$c FROM '$f' (FORMAT csv);" >>"$file"
	done
	measure "trigger_c$c" "$file" || { record "$c" trigger 1 0 0 0 0 0 FAILED "see log"; return; }
	chk=$(check_result "alt_trig_c$c" "$(case_groups "$c")" "$EXPECT_EVENTS" "$EXPECT_SUM_V")
	record "$c" trigger 1 "$EXPECT_EVENTS" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" \
		"$BATCH_FILES COPY transactions"
	sql -c "DROP TABLE alt_trig_c$c, ev_trig_c$c" >/dev/null
}

run_trigger_insert() {
	local c=1 file=$work/trig_insert.sql n=$BENCH_INSERT_EVENTS want
	trigger_ddl "$c" | sql >/dev/null
	head -n "$n" "$work/data/csv/b00.csv" |
		perl -ne 'chomp; my @f = split /,/; print "INSERT INTO ev_trig_c1 VALUES ($f[0], \x27$f[1]\x27, \x27$f[2]\x27, $f[3], \x27$f[4]\x27);\n"' >"$file"
	measure trigger_insert "$file" || { record "$c" trigger_insert 1 0 0 0 0 0 FAILED "see log"; return; }
	# expected groups (minute, k) and sum of those events
	read -r g s < <(head -n "$n" "$work/data/csv/b00.csv" | perl -ne '
		my (undef, $k, undef, $v, $ts) = split /,/; $g{substr($ts, 0, 16) . " $k"} = 1;
		$v =~ /^(\d+)\.(\d\d)$/ or die "bad v $v"; $c += $1 * 100 + $2;
		END { printf "%d %d.%02d\n", scalar keys %g, int($c / 100), $c % 100 }')
	chk=$(check_result alt_trig_c1 "$g" "$n" "$s")
	record "$c" trigger_insert 1 "$n" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" \
		"first $n events, one INSERT and transaction each"
	sql -c "DROP TABLE alt_trig_c1, ev_trig_c1" >/dev/null
}

if only alternatives; then
for c in 1 2 3; do
	case_wanted "$c" || continue
	for fmt in json csv; do
		say "Alternative COPY+SQL ($fmt) case $c, $BENCH_REPEAT runs"
		for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
			run_copy "$c" "$fmt" "$rep"
		done
	done
done
for c in 1 2; do
	case_wanted "$c" || continue
	say "Alternative per-row trigger case $c (events COPYed in batches of $BENCH_BATCH)"
	run_trigger_copy "$c"
done
if case_wanted 1; then
	say "Alternative per-row trigger, one INSERT per event ($BENCH_INSERT_EVENTS events)"
	run_trigger_insert
fi
fi
# --- table source (case 5) ---------------------------------------------------------------
# Each run starts from nothing: a fresh table events_tbl, its source ev_tbl
# (a slot with streamwin's plugin) and, at the same point, a second slot
# bench_td with test_decoding.  Then the events are COPYed into the table
# from the CSV files, one transaction per file (BENCH_BATCH rows), not timed.
# Every slot is dropped at the end of the run, so nothing holds WAL.
table_teardown() {
	sql >/dev/null <<EOF
SELECT streamwin.drop_query(name, true) FROM streamwin.queries WHERE source = 'ev_tbl';
SELECT streamwin.drop_source(name) FROM streamwin.sources WHERE name = 'ev_tbl';
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'bench_td';
DROP TABLE IF EXISTS events_tbl, alt_sql_c5;
EOF
}

# table_setup [one]: sets load_lsn0 and end_lsn, the WAL positions before
# and after the load; with "one", the files are COPYed in one transaction.
table_setup() {
	local file=$work/load_tbl.sql f load_secs wal_mb how="$BATCH_FILES COPY transactions"
	table_teardown
	# autovacuum off: it would otherwise start on the 1M new rows in the middle of a measurement
	sql -c "CREATE TABLE events_tbl (id bigint, k text, u text, v float8, ts timestamptz)
		WITH (autovacuum_enabled = false)" >/dev/null
	# each first in its own transaction (a slot is created before any write)
	sql -c "SELECT streamwin.create_table_source('ev_tbl', 'events_tbl', '{\"max_records_per_batch\": $BENCH_BATCH}')" >/dev/null
	sql -c "SELECT pg_create_logical_replication_slot('bench_td', 'test_decoding')" >/dev/null
	{
		echo "SELECT pg_current_wal_insert_lsn() AS l0, extract(epoch FROM clock_timestamp()) AS t0 \\gset"
		[[ ${1:-} == one ]] && echo "BEGIN;"
		for f in "$work"/data/csv/b*; do
			echo "COPY events_tbl FROM '$f' (FORMAT csv);"
		done
		[[ ${1:-} == one ]] && echo "COMMIT;"
		echo "SELECT pg_current_wal_insert_lsn() AS l1, round((extract(epoch FROM clock_timestamp()) - :t0)::numeric, 2) AS secs \\gset"
		printf '%s\n' '\echo LOAD :l0 :l1 :secs'
	} >"$file"
	read -r _ load_lsn0 end_lsn load_secs < <(sql -f "$file" | grep '^LOAD ')
	wal_mb=$(sql -c "SELECT round(pg_wal_lsn_diff('$end_lsn', '$load_lsn0') / 1e6)")
	[[ ${1:-} == one ]] && how="one transaction"
	echo "  loaded $EXPECT_EVENTS rows in $how in $load_secs s (not timed):" \
		"$wal_mb MB of WAL, $load_lsn0 to $end_lsn"
}

# The note of a streamwin run over the table: each batch's duration, and how
# far the source's slot's restart point (where every batch starts decoding)
# is from the start of the load once the run is over.
table_batch_note() {
	sql -c "SELECT 'batch ms ' || string_agg(round(duration_ms)::text, ' ' ORDER BY batch_id)
		|| '; slot restart_lsn after the run: '
		|| (SELECT round(abs(d) / 1e6, 1) || ' MB ' || CASE WHEN d < 0 THEN 'before' ELSE 'after' END
		           || ' the start of the load (' || round(w / 1e6, 1) || ' MB of WAL)'
		      FROM (SELECT pg_wal_lsn_diff(restart_lsn, '$load_lsn0') AS d,
		                   pg_wal_lsn_diff('$end_lsn', '$load_lsn0') AS w
		              FROM pg_replication_slots JOIN streamwin.sources USING (slot_name)
		             WHERE name = 'ev_tbl') AS r)
		FROM streamwin.progress WHERE query = '$1' AND input_rows > 0"
}

# run_recvlogical REP: pg_recvlogical reads the load from slot bench_td up
# to end_lsn, output to /dev/null.  The walsender serving it decodes and
# formats the changes: its CPU is read from /proc until it exits (it ends
# with pg_recvlogical's connection; the last 10 ms may be missed), and added
# to pg_recvlogical's own (bash's times).  VmHWM is the walsender's.
run_recvlogical() {
	local rep=$1 out=$work/log/recvlogical_r$1.out rl_pid wpid='' st last='' hwm=0 anon=0 key val
	local rc t0 t1 rl_cpu ws_cpu chk f i nap
	sql -c "CHECKPOINT" >/dev/null
	(
		t0=$EPOCHREALTIME rc=0
		"$PG_BINDIR/pg_recvlogical" -h "$work/pg/sock" -p 5432 -U postgres -d postgres \
			--slot bench_td --start --endpos "$end_lsn" --no-loop -f /dev/null || rc=$?
		t1=$EPOCHREALTIME
		echo "RL $rc $t0 $t1"
		times
	) >"$out" 2>&1 &
	rl_pid=$!
	bg_pids+=("$rl_pid")
	for ((i = 0; i < 500; i++)); do
		wpid=$(sql -c "SELECT pid FROM pg_stat_activity
			WHERE backend_type = 'walsender' AND application_name = 'pg_recvlogical'")
		[[ -n $wpid ]] && break
		kill -0 "$rl_pid" 2>/dev/null || break
		sleep 0.01
	done
	if [[ -n $wpid ]]; then
		# every 10 ms, without forking: a read that times out on an idle pipe
		exec {nap}<> <(:)
		while { read -r st <"/proc/$wpid/stat"; } 2>/dev/null; do
			last=$st
			while read -r key val _; do
				case $key in VmHWM:) hwm=$val ;; RssAnon:) anon=$val ;; esac
			done 2>/dev/null <"/proc/$wpid/status" || true
			read -r -t 0.01 -u "$nap" _ || true
		done
		exec {nap}>&-
	fi
	wait "$rl_pid" || true
	read -r _ rc t0 t1 < <(grep '^RL ' "$out") || rc=missing
	# times: the shell's own user/sys, then its children's (pg_recvlogical)
	rl_cpu=$(tail -n 1 "$out" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] } printf "%.2f", n }')
	if [[ -z $last ]]; then
		cat "$out" >&2
		record 5 pg_recvlogical "$rep" 0 0 0 0 0 FAILED "no walsender seen; see $out"
		return
	fi
	read -ra f <<<"${last#*) }"
	ws_cpu=$(calc "(${f[11]} + ${f[12]}) / $ticks")
	chk=ok
	if [[ $rc != 0 ]]; then
		chk="WRONG(pg_recvlogical_exit=$rc)"
	elif [[ $(sql -c "SELECT confirmed_flush_lsn >= '$end_lsn' FROM pg_replication_slots WHERE slot_name = 'bench_td'") != t ]]; then
		chk="WRONG(slot_not_at_endpos)"
	fi
	record 5 pg_recvlogical "$rep" "$EXPECT_EVENTS" "$(calc "$t1 - $t0")" "$(calc "$ws_cpu + $rl_cpu")" \
		"$hwm" "$anon" "$chk" "walsender CPU $ws_cpu s + pg_recvlogical CPU $rl_cpu s"
}

# run_plain_sql REP: the "cron job": one statement over the whole table.
run_plain_sql() {
	local rep=$1 t=alt_sql_c5 file=$work/plain_sql_c5.sql chk
	sql >/dev/null <<EOF
$(summary_ddl 1 k "$t")
VACUUM (ANALYZE) events_tbl;
CHECKPOINT;
EOF
	cat >"$file" <<EOF
INSERT INTO $t AS t
SELECT b.ws, b.ws + interval '1 minute', b.k, b.n, b.s, b.s / b.n
  FROM (SELECT w.ws, e.k, count(*) AS n, sum(e.v) AS s
          FROM events_tbl AS e $(windows_of 1 e.ts)
         GROUP BY 1, 2) AS b
ON CONFLICT (window_start, k) DO UPDATE
   SET n = t.n + EXCLUDED.n, s = t.s + EXCLUDED.s, a = (t.s + EXCLUDED.s) / (t.n + EXCLUDED.n);
EOF
	measure "plain_sql_c5_r$rep" "$file" || { record 5 plain_sql "$rep" 0 0 0 0 0 FAILED "see log"; return; }
	chk=$(check_result "$t" "$EXPECT_GROUPS_1" "$EXPECT_EVENTS" "$EXPECT_SUM_V")
	record 5 plain_sql "$rep" "$EXPECT_EVENTS" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" \
		"one INSERT ... SELECT ... GROUP BY over the table, after VACUUM ANALYZE"
	sql -c "DROP TABLE $t" >/dev/null
}

# Case 5 in a background worker, like case 1's worker run: query sw_c5w,
# trigger_interval 0, started with start_query and timed from there.
#
# A new query over a table source starts at the oldest change the source's
# slot holds (resolved by create_query), and the run_available run moves
# the slot past the load once its query is the only one: so sw_c5w is
# created (start => false) before that run, right after the load, and holds
# the slot at the load's start until it runs.  (The run_available run's
# restart point is at the start of the backlog either way: see its note.)
table_worker_create() {
	sql >/dev/null <<EOF
SELECT streamwin.drop_query(name, true) FROM streamwin.queries WHERE name = 'sw_c5w';
SELECT streamwin.create_query('sw_c5w', \$q\$$(case_sql 5)\$q\$, output_mode => 'update',
	trigger_interval => '0', start => false);
EOF
}

# run_worker_table REP: start sw_c5w and poll until it is done.  "Done" is
# not streamwin.queries.lag = 0 here: for a table source lag is the WAL
# bytes from the stored position to the end of the WAL when the batch
# began, and the last batch of the backlog ends at the load's last commit,
# before the WAL written since (by the run_available run among others), so
# lag stays above 0 until a pass without rows stores its position (once it
# has moved a megabyte of WAL or ten seconds: here the pass right after the
# last batch, which decodes the backlog once more to find nothing).  It is
# done when its batches' input_rows (committed streamwin.progress rows, in
# the batches' own transactions) add up to the rows loaded.  The worker's
# CPU (since it started: all of its batches) and memory are read in the
# statement that first sees it done; the wall time ends there too.  When
# lag reached 0 after that, and the CPU by then, go in the note.  Then the
# result is checked like the other runs, and the worker is stopped and
# waited for, so that it does not decode on beside the next runs.
run_worker_table() {
	local rep=$1 q=sw_c5w out=$work/log/streamwin_worker_c5_r$1.out
	local t0 t1 is_done n probe lag failed w_cpu w_hwm w_anon chk note i
	local w_batches w_span w_rows lag0 t_lag0 cpu_lag0 lag_note batch_note=
	: >"$out"
	sql -c "CHECKPOINT" >/dev/null
	coproc POLL5 { "${PSQL[@]}" -At 2>&1; }
	bg_pids+=("$POLL5_PID")
	echo "SELECT extract(epoch FROM clock_timestamp()); SELECT streamwin.start_query('$q');" >&"${POLL5[1]}"
	read -t 60 -r t0 <&"${POLL5[0]}" || t0=
	read -t 60 -r _ <&"${POLL5[0]}" || true
	is_done=
	for ((i = 0; i < 15000; i++)); do
		echo "SELECT d.n >= $EXPECT_EVENTS, extract(epoch FROM clock_timestamp()), d.n,
			CASE WHEN d.n >= $EXPECT_EVENTS THEN
				(SELECT round(cpu::numeric, 2) || ' ' || hwm_kb || ' ' || anon_kb FROM bench_probe(q.worker_pid)) END,
			q.lag, q.last_error IS NOT NULL
		  FROM streamwin.queries AS q,
		       (SELECT coalesce(sum(input_rows), 0) AS n FROM streamwin.progress WHERE query = '$q') AS d
		 WHERE q.name = '$q';" >&"${POLL5[1]}"
		IFS='|' read -t 60 -r is_done t1 n probe lag failed <&"${POLL5[0]}" || is_done=
		[[ $is_done == t ]] && break
		[[ $is_done == f && $failed == f ]] || { echo "polling stopped: $is_done $t1 $n $probe $lag $failed" >>"$out"; break; }
		sleep 0.02
	done
	# the batches' times, and the slot's restart point as the last one left it
	[[ $is_done == t ]] && batch_note=$(table_batch_note "$q")
	# for comparison with case 1's criterion: when lag reaches 0, and the
	# worker's CPU by then (the empty pass after the last batch decodes the
	# backlog once more)
	lag0=
	if [[ $is_done == t ]]; then
		for ((i = 0; i < 1000; i++)); do
			echo "SELECT lag = 0, extract(epoch FROM clock_timestamp()),
				CASE WHEN lag = 0 THEN (SELECT round(cpu::numeric, 2) FROM bench_probe(worker_pid)) END
			  FROM streamwin.queries WHERE name = '$q';" >&"${POLL5[1]}"
			IFS='|' read -t 60 -r lag0 t_lag0 cpu_lag0 <&"${POLL5[0]}" || lag0=
			[[ $lag0 == f ]] || break
			sleep 0.02
		done
	fi
	exec {POLL5[1]}>&-
	wait "$POLL5_PID" 2>/dev/null || true
	if [[ $is_done == t && -n $t0 ]] && sql >>"$out" 2>&1 <<EOF; then
SELECT count(*) AS w_batches, sum(input_rows) AS w_rows,
       round(extract(epoch FROM max(pg_xact_commit_timestamp(xmin)) - min(started_at))::numeric, 3) AS w_span
  FROM streamwin.progress_log WHERE query = '$q' AND input_rows > 0 \gset
\echo WORKER :w_batches :w_rows :w_span
EOF
		read -r _ w_batches w_rows w_span < <(grep '^WORKER ' "$out")
		read -r w_cpu w_hwm w_anon <<<"$probe"
		chk=$(check_result "$q" "$EXPECT_GROUPS_1" "$EXPECT_EVENTS" "$EXPECT_SUM_V")
		[[ $w_rows == "$EXPECT_EVENTS" ]] || chk="WRONG(input_rows=$w_rows)"
		[[ -n $w_cpu && -n $w_hwm ]] || chk="WRONG(no_worker_process_when_done)"
		if [[ $lag0 == t ]]; then
			lag_note="it reached 0 $(calc "$t_lag0 - $t1") s later (worker CPU $cpu_lag0 s by then)"
		else
			lag_note="it was still not 0 20 s later"
		fi
		note="$w_batches batches; first batch start to last commit ${w_span} s; streamwin.queries.lag when done: ${lag:-NULL} bytes, $lag_note; $batch_note"
		record 5 worker "$rep" "$w_rows" "$(calc "$t1 - $t0")" "${w_cpu:-0}" "${w_hwm:-0}" "${w_anon:-0}" "$chk" "$note"
	else
		sql -c "SELECT name, state, worker_pid, lag, last_error FROM streamwin.queries WHERE name = '$q'" >>"$out" 2>&1 || true
		cat "$out" >&2
		record 5 worker "$rep" 0 0 0 0 0 FAILED "did not finish in 300 s or failed: see $out"
	fi
	sql -c "SELECT streamwin.stop_query('$q')" >/dev/null 2>&1 || true
	for ((i = 0; i < 600; i++)); do
		[[ -z $(sql -c "SELECT worker_pid FROM streamwin.queries WHERE name = '$q'" 2>/dev/null) ]] && break
		sleep 0.05
	done
	sql -c "SELECT streamwin.drop_query('$q', true)" >/dev/null 2>&1 || true
}

if only table; then
say "Table source (case 5): $(case_sql 5); $BENCH_REPEAT runs, each over a freshly loaded table"
for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
	table_setup
	table_worker_create
	run_streamwin 5 "$rep"
	run_worker_table "$rep"
	run_recvlogical "$rep"
	run_plain_sql "$rep"
	table_teardown
	# the same rows in one transaction, ten times a batch: the first batch
	# decodes it, the others read the rest from its spool
	table_setup one
	run_streamwin 5 "$rep" "" one_txn
	table_teardown
done
left=$(sql -c "SELECT count(*) FROM pg_replication_slots")
[[ $left == 0 ]] || echo "  warning: $left replication slot(s) left, holding WAL" >&2
fi

# --- changelog table source (case CL, issue 35) --------------------------------------
# A table orders (id bigint primary key, region int, amount numeric, customer,
# status, created_at; REPLICA IDENTITY FULL) with two table sources created
# before it is filled: orders_cl ({"changes": "all"}, the changelog) and
# orders_ins (inserts only, the append-only baseline).  gen_changelog.pl's
# rows are loaded (transactions of BENCH_CL_TXN inserts, not timed) and read
# by the same query over each source, each timed around run_available() in
# its own session (streamwin's cost per insert, on the changelog and on the
# append-only source); orders_ins and its query are dropped.  Then the
# changes are applied (one statement per change, BENCH_CL_TXN per
# transaction; recorded as "apply", not a baseline) and the changelog
# query, the same query as before, reads them with run_available() (its
# cost per change).  Its result must then equal the query in plain SQL over
# the table, every column compared as text; the source is dropped (its slot
# holds no WAL for what follows, nor decodes it).
#
# Baselines over the same rows and changes, each on a fresh table of its
# own with the same load (autovacuum off on the three large tables; ANALYZE
# after each load, not timed):
#   trigger     orders_trg with an index on (region, amount) and an AFTER
#               INSERT OR UPDATE OR DELETE FOR EACH ROW trigger keeping
#               cl_sum_trg (region, n, s, lo, hi; avg = s / n): the old
#               row's n and s taken out, lo and hi recomputed from the index
#               when it held them, the new row added; an update within its
#               region one UPDATE.  Timed over the load too (trigger_load),
#               then over the changes (trigger).
#   recompute   orders_sql: the changes applied the same way, and after every
#               BENCH_CL_RECOMPUTE changes (a commit) TRUNCATE cl_sum_sql +
#               INSERT ... SELECT ... GROUP BY region over the whole table,
#               committed: the recomputes' wall and CPU are summed (timed in
#               the procedure with bench_probe(); the changes themselves are
#               not counted).
# Each is checked like streamwin's result, and each table against
# gen_changelog.pl's row count and sum.
# cl_query SOURCE [floor]: the case's query over SOURCE; with floor, with a
# filter that keeps no row (every amount is positive), so that its cost is
# reading and decoding the rows alone
cl_query() {
	echo "SELECT region, count(*) AS n, sum(amount) AS s, avg(amount) AS a, min(amount) AS lo, max(amount) AS hi" \
		"FROM $1 ${2:+WHERE amount < 0 }GROUP BY region"
}

cl_teardown() {
	sql >/dev/null <<EOF
SELECT streamwin.drop_query(name, true) FROM streamwin.queries WHERE source IN ('orders_cl', 'orders_ins');
SELECT streamwin.drop_source(name) FROM streamwin.sources WHERE name IN ('orders_cl', 'orders_ins');
DROP TABLE IF EXISTS orders, orders_trg, orders_sql, cl_sum_trg, cl_sum_sql, cl_times CASCADE;
DROP FUNCTION IF EXISTS cl_trg();
DROP PROCEDURE IF EXISTS cl_load_orders(), cl_load_orders_trg(), cl_load_orders_sql(),
	cl_apply_orders(), cl_apply_orders_trg(), cl_apply_orders_sql();
EOF
}

# cl_table NAME: the table, and its procedures: cl_load_NAME() inserts the
# rows of cl_load, cl_apply_NAME() applies cl_changes, one statement per
# change, each BENCH_CL_TXN in a transaction; for orders_sql, cl_apply_NAME()
# recomputes cl_sum_sql after every BENCH_CL_RECOMPUTE changes and records
# what the recomputes took in cl_times.
cl_table() {
	local t=$1 every=$((BENCH_CL_RECOMPUTE / BENCH_CL_TXN)) recompute=''
	if [[ $t == orders_sql ]]; then
		recompute="
		IF (k + 1) % $every = 0 OR k = ($CL_CHANGES - 1) / $BENCH_CL_TXN THEN
			SELECT * INTO p0 FROM bench_probe();
			TRUNCATE cl_sum_sql;
			INSERT INTO cl_sum_sql $(cl_query "$t");
			COMMIT;
			SELECT * INTO p1 FROM bench_probe();
			n := n + 1;
			wall := wall + (p1.t - p0.t);
			cpu := cpu + (p1.cpu - p0.cpu);
		END IF;"
	fi
	cat <<EOF
CREATE TABLE $t (id bigint PRIMARY KEY, region int NOT NULL, amount numeric NOT NULL,
	customer bigint, status text, created_at timestamptz) WITH (autovacuum_enabled = false);
CREATE PROCEDURE cl_load_$t() LANGUAGE plpgsql AS \$p\$
BEGIN
	FOR k IN 0 .. ($CL_ROWS - 1) / $BENCH_CL_TXN LOOP
		INSERT INTO $t SELECT * FROM cl_load WHERE id > k * $BENCH_CL_TXN AND id <= (k + 1) * $BENCH_CL_TXN ORDER BY id;
		COMMIT;
	END LOOP;
END
\$p\$;
CREATE PROCEDURE cl_apply_$t() LANGUAGE plpgsql AS \$p\$
DECLARE
	r record;
	p0 record;
	p1 record;
	n int := 0;
	wall float8 := 0;
	cpu float8 := 0;
BEGIN
	FOR k IN 0 .. ($CL_CHANGES - 1) / $BENCH_CL_TXN LOOP
		FOR r IN SELECT * FROM cl_changes
		          WHERE seq > k * $BENCH_CL_TXN AND seq <= (k + 1) * $BENCH_CL_TXN ORDER BY seq LOOP
			IF r.op = 'u' THEN
				UPDATE $t SET region = r.region, amount = r.amount WHERE id = r.id;
			ELSIF r.op = 'd' THEN
				DELETE FROM $t WHERE id = r.id;
			ELSE
				INSERT INTO $t VALUES (r.id, r.region, r.amount, r.customer, r.status, r.created_at);
			END IF;
		END LOOP;
		COMMIT;$recompute
	END LOOP;
	$([[ $t == orders_sql ]] && echo "INSERT INTO cl_times VALUES ('recompute', n, wall, cpu);")
END
\$p\$;
EOF
}

# the trigger's summary and the trigger, on orders_trg
cl_trigger_ddl() {
	cat <<'EOF'
CREATE INDEX ON orders_trg (region, amount);
CREATE TABLE cl_sum_trg (region int PRIMARY KEY, n bigint NOT NULL, s numeric NOT NULL, lo numeric, hi numeric);
CREATE FUNCTION cl_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
	left_n bigint;
BEGIN
	-- (an AFTER trigger: the table already holds the new row and no longer
	-- the old one, so min and max over it are those to keep)
	IF TG_OP = 'UPDATE' AND NEW.region = OLD.region THEN
		UPDATE cl_sum_trg
		   SET s = s - OLD.amount + NEW.amount,
		       lo = CASE WHEN NEW.amount <= lo THEN NEW.amount
		                 WHEN OLD.amount = lo THEN (SELECT min(amount) FROM orders_trg WHERE region = NEW.region)
		                 ELSE lo END,
		       hi = CASE WHEN NEW.amount >= hi THEN NEW.amount
		                 WHEN OLD.amount = hi THEN (SELECT max(amount) FROM orders_trg WHERE region = NEW.region)
		                 ELSE hi END
		 WHERE region = NEW.region;
		RETURN NULL;
	END IF;
	IF TG_OP <> 'INSERT' THEN
		UPDATE cl_sum_trg
		   SET n = n - 1, s = s - OLD.amount,
		       lo = CASE WHEN OLD.amount = lo THEN (SELECT min(amount) FROM orders_trg WHERE region = OLD.region) ELSE lo END,
		       hi = CASE WHEN OLD.amount = hi THEN (SELECT max(amount) FROM orders_trg WHERE region = OLD.region) ELSE hi END
		 WHERE region = OLD.region
		RETURNING n INTO left_n;
		IF left_n = 0 THEN
			DELETE FROM cl_sum_trg WHERE region = OLD.region;
		END IF;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		INSERT INTO cl_sum_trg AS t VALUES (NEW.region, 1, NEW.amount, NEW.amount, NEW.amount)
		ON CONFLICT (region) DO UPDATE
		   SET n = t.n + 1, s = t.s + EXCLUDED.s, lo = least(t.lo, EXCLUDED.lo), hi = greatest(t.hi, EXCLUDED.hi);
	END IF;
	RETURN NULL;
END
$f$;
CREATE TRIGGER cl_trg AFTER INSERT OR UPDATE OR DELETE ON orders_trg FOR EACH ROW EXECUTE FUNCTION cl_trg();
EOF
}

# cl_check RESULT TABLE ROWS SUM [floor]: "ok" if RESULT (region, n, s, a,
# lo, hi) is the query (the floor's, with floor) in plain SQL over TABLE,
# each column as text, and TABLE holds ROWS rows whose amounts add up to SUM.
cl_check() {
	local got want="0 0 $3 $4"
	got=$(sql -F ' ' -c "WITH r AS (SELECT region::text, n::text, s::text, a::text, lo::text, hi::text FROM $1),
		e AS (SELECT region::text, n::text, s::text, a::text, lo::text, hi::text FROM ($(cl_query "$2" "${5:-}")) AS x)
		SELECT (SELECT count(*) FROM (TABLE e EXCEPT ALL TABLE r) AS m), (SELECT count(*) FROM (TABLE r EXCEPT ALL TABLE e) AS x),
		       (SELECT count(*) FROM $2), (SELECT sum(amount) FROM $2)")
	if [[ $got == "$want" ]]; then
		echo ok
	else
		echo "WRONG(missing_extra_rows_sum=${got// /,};want=${want// /,})"
	fi
}

# cl_perf_attach PATTERN DATA: perf record the backend whose query matches
# PATTERN (LIKE), once it runs; sets cl_perf_pid.
cl_perf_attach() {
	(
		for ((i = 0; i < 500; i++)); do
			pid=$(sql -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '$1' AND pid <> pg_backend_pid()")
			[[ -n $pid ]] && break
			sleep 0.02
		done
		[[ -n $pid ]] && exec perf record -F 2999 -g -p "$pid" -o "$2" >/dev/null 2>&1
	) &
	cl_perf_pid=$!
	bg_pids+=("$cl_perf_pid")
}
cl_perf_stop() {
	[[ -n ${cl_perf_pid:-} ]] || return 0
	kill -INT "$cl_perf_pid" 2>/dev/null || true
	wait "$cl_perf_pid" 2>/dev/null || true
	cl_perf_pid=
}

# cl_run Q APPROACH REP PHASE [PROFILE]: run_available(Q) timed in a fresh
# session, over PHASE (load: CL_ROWS inserts; changes: CL_CHANGES changes,
# applied since cl_phase_lsn); the result checked against orders as it is
# then (Q is the floor's query where APPROACH is cl_floor_*); with PROFILE,
# under perf, its report in BENCH_OUT/profile-PROFILE.txt.
cl_run() {
	local q=$1 approach=$2 rep=$3 phase=$4 prof=${5:-} chk note input batches src restart_mb wal_mb floor=
	[[ $approach == cl_floor_* ]] && floor=floor
	local rows=$CL_ROWS events=$CL_ROWS want_sum=$CL_LOAD_SUM want_in=$CL_ROWS
	if [[ $phase == changes ]]; then
		# rows read: an update is the old row retracted and the new one added
		rows=$CL_FINAL_ROWS events=$CL_CHANGES want_sum=$CL_FINAL_SUM want_in=$((CL_INSERTS + CL_DELETES + 2 * CL_UPDATES))
	fi
	src=$(sql -c "SELECT source FROM streamwin.queries WHERE name = '$q'")
	# where the slot's next batch starts decoding, against the phase's WAL
	read -r restart_mb wal_mb < <(sql -F ' ' -c "SELECT round(pg_wal_lsn_diff('$cl_phase_lsn', restart_lsn) / 1e6, 1),
			round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$cl_phase_lsn') / 1e6, 1)
		FROM pg_replication_slots JOIN streamwin.sources USING (slot_name) WHERE name = '$src'")
	cat >"$work/run_$q.sql" <<EOF
SELECT r->>'input_rows' AS input_rows, r->>'batches' AS batches FROM streamwin.run_available('$q') AS r \gset
\echo RUN :input_rows :batches
EOF
	sql -c "CHECKPOINT" >/dev/null
	[[ -n $prof ]] && cl_perf_attach "%run_available(''$q'')%" "$work/perf_$prof.data"
	measure "${approach}_r$rep" "$work/run_$q.sql" || { cl_perf_stop; record CL "$approach" "$rep" 0 0 0 0 0 FAILED "see log"; return; }
	cl_perf_stop
	read -r _ input batches < <(grep '^RUN ' "$M_OUT")
	chk=$(cl_check "$q" orders "$rows" "$want_sum" "$floor")
	[[ $chk == ok && $input != "$want_in" ]] && chk="WRONG(input_rows=$input;want=$want_in)"
	note=$(sql -c "SELECT 'batches=$batches;input_rows=$input;changes=' || coalesce(sum((offsets->'changes'->>'inserts')::bigint), 0)
			|| '/' || coalesce(sum((offsets->'changes'->>'updates')::bigint), 0)
			|| '/' || coalesce(sum((offsets->'changes'->>'deletes')::bigint), 0)
			|| ';state_rows=' || coalesce((array_agg(state_rows ORDER BY batch_id DESC))[1]::text, '')
			|| ';batch_ms=' || coalesce(string_agg(round(duration_ms)::text, ' ' ORDER BY batch_id), '')
		FROM streamwin.progress WHERE query = '$q' AND input_rows > 0 AND batch_id > coalesce(
			(SELECT max(batch_id) FROM cl_batches_seen WHERE query = '$q'), 0)")
	note+=";wal_mb=$wal_mb;restart_mb_before=$restart_mb"
	sql -c "INSERT INTO cl_batches_seen SELECT '$q', max(batch_id) FROM streamwin.progress WHERE query = '$q'" >/dev/null
	[[ $phase == changes && $note != *"changes=$CL_INSERTS/$CL_UPDATES/$CL_DELETES;"* && $chk == ok ]] &&
		chk="WRONG(changes_read;want=$CL_INSERTS/$CL_UPDATES/$CL_DELETES)"
	record CL "$approach" "$rep" "$events" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" "$note"
	if [[ -n $prof ]]; then
		perf_summary "$work/perf_$prof.data" "$BENCH_OUT/profile-$prof.txt" \
			"case CL ($approach): run_available() over the $events $([[ $phase == load ]] && echo inserts || echo changes) of source $src: $(cl_query "$src" "$floor")" \
			"the run_available() backend, all its threads"
	fi
}

# cl_measure NAME APPROACH REP EVENTS CHECK NOTE SQL: SQL timed in a fresh
# session, recorded (NOTE may use M_OUT); APPROACH "-" records nothing.
cl_measure() {
	local name=$1 approach=$2 rep=$3 events=$4 chk=$5 note=$6
	printf '%s\n' "$7" >"$work/$name.sql"
	measure "$name" "$work/$name.sql" || { [[ $approach == - ]] || record CL "$approach" "$rep" 0 0 0 0 0 FAILED "see log"; return 1; }
	[[ $approach == - ]] || record CL "$approach" "$rep" "$events" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" "$note"
}

# cl_settle SOURCE Q...: bring the slot of SOURCE's to the end of the WAL,
# as the idle passes of running workers of its queries Q would (not timed;
# the slot keeps what the query furthest behind needs).  A new session's first
# batch decodes from the slot's restart point, which moves only past a
# running-transactions record that the slot's confirmed position has
# passed; after a catch-up in one run_available() call, that point is
# still at the start of the backlog (streamwin logs such a record when a
# fetch starts, at the end of the WAL, and confirms a position only when a
# later pass stores it).  Without this, the change phase would decode the
# whole load again before its first change (BENCH_CL_SETTLE=0 measures
# that: see restart_mb_before in the note).
cl_settle() {
	local src=$1 i behind q
	shift
	for ((i = 1; i <= 5; i++)); do
		sql >/dev/null <<EOF
CHECKPOINT;
SELECT pg_sleep(1.1);
$(for q; do echo "SELECT streamwin.run_available('$q');"; done)
EOF
		behind=$(sql -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), restart_lsn) > 1024 * 1024
			FROM pg_replication_slots JOIN streamwin.sources USING (slot_name) WHERE name = '$src'")
		[[ $behind == f ]] && break
	done
	echo "  slot of $src settled after $i empty pass(es):" \
		"$(sql -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), restart_lsn) / 1e6, 1) || ' MB behind the end of the WAL'
			FROM pg_replication_slots JOIN streamwin.sources USING (slot_name) WHERE name = '$src'")"
}

# run_changelog REP [profile]: one run of everything; with "profile", only
# the streamwin runs, under perf, not recorded for the summary (rep p).
run_changelog() {
	local rep=$1 prof=${2:-} chk load_s
	cl_teardown
	sql >/dev/null <<EOF
$(cl_table orders)
ALTER TABLE orders REPLICA IDENTITY FULL;
CREATE TABLE IF NOT EXISTS cl_batches_seen (query text, batch_id bigint);
TRUNCATE cl_batches_seen;
EOF
	# each source in its own transaction (a slot is created before any write)
	sql -c "SELECT streamwin.create_table_source('orders_cl', 'orders', '{\"changes\": \"all\", \"max_records_per_batch\": $BENCH_BATCH}')" >/dev/null
	sql -c "SELECT streamwin.create_table_source('orders_ins', 'orders', '{\"max_records_per_batch\": $BENCH_BATCH}')" >/dev/null
	sql >/dev/null <<EOF
SELECT streamwin.create_query('cl_sw', \$q\$$(cl_query orders_cl)\$q\$, output_mode => 'update', start => false);
SELECT streamwin.create_query('cl_app', \$q\$$(cl_query orders_ins)\$q\$, output_mode => 'update', start => false);
SELECT streamwin.create_query('cl_sw_floor', \$q\$$(cl_query orders_cl floor)\$q\$, output_mode => 'update', start => false);
SELECT streamwin.create_query('cl_app_floor', \$q\$$(cl_query orders_ins floor)\$q\$, output_mode => 'update', start => false);
EOF
	cl_phase_lsn=$(sql -c "SELECT pg_current_wal_insert_lsn()")
	cl_measure "cl_load_r$rep" - "$rep" "$CL_ROWS" ok "" "CALL cl_load_orders();" || return
	load_s=$M_WALL
	sql -c "ANALYZE orders" >/dev/null
	echo "  loaded $CL_ROWS rows into orders in $load_s s (not timed)," \
		"$(sql -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$cl_phase_lsn') / 1e6)") MB of WAL"
	# (a profile's runs, rep p, are left out of the summary)
	cl_run cl_app cl_append "$rep" load "${prof:+caseCLa}"
	cl_run cl_sw cl_inserts "$rep" load "${prof:+caseCLi}"
	[[ -n $prof ]] || cl_run cl_app_floor cl_floor_append "$rep" load
	# the floor's query over the changelog reads the load too (untimed, and
	# its batches left out of its run's note)
	sql -c "SELECT streamwin.run_available('cl_sw_floor')" >/dev/null
	sql -c "INSERT INTO cl_batches_seen SELECT 'cl_sw_floor', max(batch_id) FROM streamwin.progress WHERE query = 'cl_sw_floor'" >/dev/null
	sql -c "SELECT streamwin.drop_query(q, true) FROM unnest(array['cl_app', 'cl_app_floor']) AS q" >/dev/null
	sql -c "SELECT streamwin.drop_source('orders_ins')" >/dev/null
	[[ $BENCH_CL_SETTLE == 1 ]] && cl_settle orders_cl cl_sw cl_sw_floor

	cl_phase_lsn=$(sql -c "SELECT pg_current_wal_insert_lsn()")
	sql -c "CHECKPOINT" >/dev/null
	cl_measure "cl_apply_r$rep" cl_apply "$rep" "$CL_CHANGES" ok \
		"the changes applied to orders (REPLICA IDENTITY FULL), no trigger" "CALL cl_apply_orders();" || return
	echo "  applied $CL_CHANGES changes to orders in $M_WALL s," \
		"$(sql -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$cl_phase_lsn') / 1e6)") MB of WAL"
	cl_run cl_sw cl_changes "$rep" changes "${prof:+caseCLc}"
	[[ -n $prof ]] || cl_run cl_sw_floor cl_floor_changes "$rep" changes
	sql -c "SELECT streamwin.drop_query(q, true) FROM unnest(array['cl_sw', 'cl_sw_floor']) AS q" >/dev/null
	sql -c "SELECT streamwin.drop_source('orders_cl')" >/dev/null
	if [[ -n $prof ]]; then
		cl_teardown
		return
	fi

	# the per-row trigger, over the same load and changes
	sql >/dev/null <<EOF
$(cl_table orders_trg)
$(cl_trigger_ddl)
EOF
	sql -c "CHECKPOINT" >/dev/null
	cl_measure "cl_trigger_load_r$rep" cl_trigger_load "$rep" "$CL_ROWS" ok \
		"the load, $BENCH_CL_TXN rows per transaction, into orders_trg with its trigger and index" \
		"CALL cl_load_orders_trg();" || return
	sql -c "ANALYZE orders_trg" >/dev/null
	sql -c "CHECKPOINT" >/dev/null
	cl_measure "cl_trigger_r$rep" - "$rep" "$CL_CHANGES" ok "" "CALL cl_apply_orders_trg();" || return
	sql -c "CREATE VIEW cl_sum_trg_v AS SELECT region, n, s, s / n AS a, lo, hi FROM cl_sum_trg" >/dev/null
	chk=$(cl_check cl_sum_trg_v orders_trg "$CL_FINAL_ROWS" "$CL_FINAL_SUM")
	record CL cl_trigger "$rep" "$CL_CHANGES" "$M_WALL" "$M_CPU" "$M_HWM" "$M_ANON" "$chk" \
		"the changes applied to orders_trg, one statement each, $BENCH_CL_TXN per transaction, its trigger keeping cl_sum_trg"

	# the periodic recompute
	sql >/dev/null <<EOF
CREATE TABLE cl_sum_sql (region int PRIMARY KEY, n bigint, s numeric, a numeric, lo numeric, hi numeric);
CREATE TABLE cl_times (what text, n int, wall float8, cpu float8);
$(cl_table orders_sql)
EOF
	cl_measure "cl_sql_load_r$rep" - "$rep" "$CL_ROWS" ok "" "CALL cl_load_orders_sql();" || return
	sql -c "ANALYZE orders_sql" >/dev/null
	sql -c "CHECKPOINT" >/dev/null
	cl_measure "cl_recompute_r$rep" - "$rep" "$CL_CHANGES" ok "" "CALL cl_apply_orders_sql();" || return
	local n w c
	read -r n w c < <(sql -F ' ' -c "SELECT n, round(wall::numeric, 3), round(cpu::numeric, 2) FROM cl_times WHERE what = 'recompute'")
	chk=$(cl_check cl_sum_sql orders_sql "$CL_FINAL_ROWS" "$CL_FINAL_SUM")
	record CL cl_recompute "$rep" "$CL_CHANGES" "$w" "$c" "$M_HWM" "$M_ANON" "$chk" \
		"recomputes=$n;every=$BENCH_CL_RECOMPUTE;session_wall=$M_WALL;session_cpu=$M_CPU"
	cl_teardown
}

if only changelog; then
	say "Changelog table source (case CL): $(cl_query orders_cl), update mode; $BENCH_REPEAT runs, each over fresh tables"
	sql >/dev/null <<EOF
DROP TABLE IF EXISTS cl_load, cl_changes;
CREATE UNLOGGED TABLE cl_load (id bigint PRIMARY KEY, region int, amount numeric, customer bigint, status text,
	created_at timestamptz);
CREATE UNLOGGED TABLE cl_changes (seq bigint PRIMARY KEY, op "char", id bigint, region int, amount numeric,
	customer bigint, status text, created_at timestamptz);
COPY cl_load FROM '$work/changelog/load.csv' (FORMAT csv);
COPY cl_changes FROM '$work/changelog/changes.csv' (FORMAT csv);
VACUUM ANALYZE cl_load, cl_changes;
EOF
	for ((rep = 1; rep <= BENCH_REPEAT; rep++)); do
		run_changelog "$rep" || record CL cl_changes "$rep" 0 0 0 0 0 FAILED "the run stopped early: see $work/log"
	done
	if [[ $BENCH_PROFILE == 1 ]]; then
		say "Profiles (perf) of case CL's three streamwin runs"
		run_changelog p profile || record CL cl_changes p 0 0 0 0 0 FAILED "the run stopped early: see $work/log"
	fi
	sql -c "DROP TABLE cl_load, cl_changes, cl_batches_seen" >/dev/null
	left=$(sql -c "SELECT count(*) FROM pg_replication_slots")
	[[ $left == 0 ]] || echo "  warning: $left replication slot(s) left, holding WAL" >&2
fi

# --- latency -----------------------------------------------------------------------------
# A query like case 1 runs in a background worker with trigger_interval
# 100 ms while gen_steady.pl produces BENCH_LAT_RATE events/s, each carrying
# "pt", the wall-clock time it was handed to the producer.
#
# When does an event become visible?  The batch that reads it commits its
# results, its offsets and its streamwin.progress row in one transaction, so
# the event is visible exactly when the first batch whose stored next offset
# for the event's partition is past the event's offset commits.  With
# track_commit_timestamp, pg_xact_commit_timestamp(xmin) of that progress row
# (in streamwin.progress_log, the table under the view) is that commit's
# time.  A bare consumer (raw_consume --dump) reading the same stream tells
# where (partition, offset) every event landed, so each event's latency is
#   commit time of the first batch covering (partition, offset) - pt,
# and the time that consumer received it minus pt is what Kafka (producer
# linger, broker, fetch) alone takes: the floor under streamwin's latency.
# The commit timestamp is taken just before the commit's WAL flush; as a
# check, a second session polls max(batch_id) every 5 ms (psql \watch) and
# records when it first sees each batch: "observed" latencies are upper
# bounds (+ up to 5 ms of polling granularity) of when a reader actually saw
# the result.

measure_latency() {
	local v=$1 fw=$2 kafka_opt=$3 total=$((BENCH_LAT_RATE * BENCH_LAT_SECONDS)) poll_secs wpid
	sql >/dev/null <<EOF
SELECT streamwin.create_kafka_source('lat$v', '$brokers', 'lat$v',
	'id bigint, k text, v float8, ts timestamptz, pt bigint', 'json',
	'{"max_records_per_batch": $BENCH_BATCH$kafka_opt}');
SELECT streamwin.create_query('lat${v}_q', \$q\$SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a, max(pt) AS max_pt
	FROM lat$v GROUP BY streamwin.tumble(ts, '1 minute'), k\$q\$,
	output_mode => 'update', trigger_interval => '100 ms');
EOF
	# the worker is up and has read the (empty) topic once
	for ((i = 0; i < 300; i++)); do
		wpid=$(sql -c "SELECT worker_pid FROM streamwin.queries WHERE name = 'lat${v}_q'")
		[[ -n $wpid ]] && break
		sleep 0.1
	done
	[[ -n $wpid ]] || { echo "the latency query's worker did not start" >&2; return 1; }
	sleep 2
	# what the worker costs with nothing to read: 5 s of its batches on the
	# 100 ms trigger, before the stream starts
	read -r i0 t0 <<<"$(sql -F ' ' -c "SELECT cpu, t FROM bench_probe($wpid)")"
	sleep 5
	read -r c0 t1 <<<"$(sql -F ' ' -c "SELECT cpu, t FROM bench_probe($wpid)")"
	idle_pct=$(calc "100 * ($c0 - $i0) / ($t1 - $t0)")

	# The poller: one short statement every 5 ms (\watch), so that it holds
	# no snapshot for long (a long-running statement would keep the dead row
	# versions of every batch's updates alive and slow the worker down).
	poll_secs=$((BENCH_LAT_SECONDS + 15))
	timeout -s TERM "$poll_secs" "${PSQL[@]}" -At >"$work/log/lat${v}_poll.out" 2>&1 <<EOF &
SELECT 'SEEN', coalesce(max(batch_id), 0), extract(epoch FROM clock_timestamp())
  FROM streamwin.progress WHERE query = 'lat${v}_q' \watch 0.005
EOF
	bg_pids+=($!)
	local poll_pid=$!
	# a bare consumer reads the same stream meanwhile: where each event
	# landed, and when Kafka alone delivered it
	test/bench/raw_consume --brokers "$brokers" --topic "lat$v" --partitions "$LAT_PARTITIONS" \
		-X "fetch.wait.max.ms=$fw" --expect "$total" --dump "$work/data/lat${v}_dump.tsv" >"$work/log/lat${v}_raw.out" 2>&1 &
	bg_pids+=($!)
	local raw_pid=$!
	sleep 1
	# with BENCH_PROFILE=1, the worker's steady state at the default fetch
	# wait: 10 s from the middle of the stream
	local perf_pid=
	if [[ $BENCH_PROFILE == 1 && $v == 1 ]]; then
		(sleep $((BENCH_LAT_SECONDS / 2 - 5)) &&
			exec perf record -F 2999 -g -p "$wpid" -o "$work/perf_latency.data" -- sleep 10) >/dev/null 2>&1 &
		perf_pid=$!
	fi
	perl "$bench/gen_steady.pl" --rate "$BENCH_LAT_RATE" --seconds "$BENCH_LAT_SECONDS" \
		--partitions "$LAT_PARTITIONS" |
		test/kafka_produce --brokers "$brokers" --topic "lat$v" --partition-prefix --quiet --linger-ms 5
	if [[ -n $perf_pid ]]; then
		wait "$perf_pid" || true
		perf_summary "$work/perf_latency.data" "$BENCH_OUT/profile-latency.txt" \
			"the latency query's worker at $BENCH_LAT_RATE events/s, trigger_interval 100 ms" \
			"the background worker, all its threads, 10 s of its steady state"
	fi
	# everything visible?
	for ((i = 0; i < 600; i++)); do
		[[ $(sql -c "SELECT coalesce(sum(n), 0) FROM lat${v}_q") == "$total" ]] && break
		sleep 0.1
	done
	read -r c1 hwm anon <<<"$(sql -F ' ' -c "SELECT cpu, hwm_kb, anon_kb FROM bench_probe($wpid)")"
	wait "$poll_pid" || true
	sql -c "SELECT streamwin.stop_query('lat${v}_q')" >/dev/null

	wait "$raw_pid" || { cat "$work/log/lat${v}_raw.out"; return 1; }
	perl -ne 'my ($p, $o, $r, $j) = split /\t/; $j =~ /"pt":(\d+)/ or die "no pt: $_"; print "$p\t$o\t$1\t$r\n"' \
		"$work/data/lat${v}_dump.tsv" >"$work/data/lat${v}_events.tsv"
	# first time the poller saw each batch id
	awk -F '|' '$1 == "SEEN" && $2 > seen { print $2 "\t" $3; seen = $2 }' "$work/log/lat${v}_poll.out" >"$work/data/lat${v}_seen.tsv"
	chmod a+r "$work/data/"lat${v}_*.tsv

	sql -F ' ' >"$work/log/latency$v.out" <<EOF
CREATE TABLE lat${v}_events (p int, o bigint, pt bigint, recv bigint);
COPY lat${v}_events FROM '$work/data/lat${v}_events.tsv';
CREATE TABLE lat${v}_seen (batch_id bigint, seen float8);
COPY lat${v}_seen FROM '$work/data/lat${v}_seen.tsv';
CREATE TABLE lat${v}_batches AS
SELECT g.batch_id, o.key::int AS p, o.value::bigint AS next_offset,
       extract(epoch FROM g.committed)::float8 AS committed,
       (SELECT min(s.seen) FROM lat${v}_seen s WHERE s.batch_id >= g.batch_id) AS seen
  FROM (SELECT batch_id, offsets, pg_xact_commit_timestamp(xmin) AS committed
          FROM streamwin.progress_log WHERE query = 'lat${v}_q') AS g,
       jsonb_each_text(g.offsets) AS o;
CREATE INDEX ON lat${v}_batches (p, next_offset);
ANALYZE lat${v}_batches;
CREATE TABLE lat${v}_x AS
SELECT e.*, b.batch_id, (b.committed * 1e6 - e.pt) / 1000 AS ms, (b.seen * 1e6 - e.pt) / 1000 AS seen_ms
  FROM lat${v}_events e
  LEFT JOIN LATERAL (SELECT * FROM lat${v}_batches b WHERE b.p = e.p AND b.next_offset > e.o
                      ORDER BY b.next_offset LIMIT 1) b ON true;
SELECT 'LATENCY', count(*), count(batch_id), count(seen_ms),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1),
       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
       round(max(ms)::numeric, 1),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY seen_ms)::numeric, 1),
       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY seen_ms)::numeric, 1),
       round(max(seen_ms)::numeric, 1),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY (recv - pt) / 1000.0)::numeric, 1),
       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY (recv - pt) / 1000.0)::numeric, 1),
       round(max((recv - pt) / 1000.0)::numeric, 1),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms - (recv - pt) / 1000.0)::numeric, 1),
       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms - (recv - pt) / 1000.0)::numeric, 1),
       count(DISTINCT batch_id),
       (SELECT coalesce(sum(n), 0) FROM lat${v}_q)
  FROM lat${v}_x;
EOF
	read -r _ n_ev n_cov n_seen p50 p99 pmax s50 s99 smax k50 k99 kmax d50 d99 n_batches n_res \
		< <(grep '^LATENCY ' "$work/log/latency$v.out")
	chk=ok
	[[ $n_ev == "$total" && $n_cov == "$total" && $n_res == "$total" ]] ||
		chk="WRONG(events=$n_ev,covered=$n_cov,result_count=$n_res,want=$total)"
	lat_cpu=$(calc "$c1 - $c0")
	record "L$v" latency 1 "$total" "$BENCH_LAT_SECONDS" "$lat_cpu" "$hwm" "$anon" "$chk" \
		"fetch_wait=$fw;rate=$BENCH_LAT_RATE;p50=$p50;p99=$p99;max=$pmax;seen_p50=$s50;seen_p99=$s99;seen_max=$smax;kafka_p50=$k50;kafka_p99=$k99;kafka_max=$kmax;after_kafka_p50=$d50;after_kafka_p99=$d99;batches=$n_batches;seen_events=$n_seen;idle_pct=$idle_pct;default=$([[ -z $kafka_opt ]] && echo 1 || echo 0)"
}
if only latency; then
# 1: librdkafka's fetch.wait.max.ms as streamwin sets it by default, half
# the trigger_interval: 50 ms (the bare consumer is given the same).  The mock broker holds a fetch for that long when it has nothing
# new, rather than answering when data arrives as a real broker does, so
# Kafka alone adds up to that much.  2: fetch.wait.max.ms = 100 as a source
# option (streamwin's default before, and still a session's).
say "Latency: $BENCH_LAT_RATE events/s for $BENCH_LAT_SECONDS s, trigger_interval 100 ms, background worker"
measure_latency 1 50 "" || record L1 latency 1 0 0 0 0 0 FAILED "see log"
say "Latency again, with the source option kafka.fetch.wait.max.ms = 100"
measure_latency 2 100 ', "kafka": {"fetch.wait.max.ms": "100"}' ||
	record L2 latency 1 0 0 0 0 0 FAILED "see log"
fi

# --- profiles (optional) -------------------------------------------------------------------
if [[ $BENCH_PROFILE == 1 ]]; then
	cases=()
	only streamwin && case_wanted 1 && cases+=(1)
	only streamwin && case_wanted 2 && cases+=(2)
	only case6 && cases+=(6)
	only nexmark_hop && cases+=(N1)
	only nexmark_session && cases+=(N2)
	only join && cases+=(J)
	only dedup && cases+=(D)
	((${#cases[@]} == 0)) || say "Profiles (perf) of cases ${cases[*]}"
	for c in "${cases[@]}"; do
		run_streamwin "$c" p perf
		perf_summary "$work/perf_case$c.data" "$BENCH_OUT/profile-case$c.txt" \
			"streamwin case $c: $(case_sql "$c")" "the run_available() backend, all its threads"
	done
fi

# --- Avro against JSON (issue 36) --------------------------------------------------------------
# Two runs of each more than the other cases: the decode stage's Avro/JSON
# ratio is the median of the runs' ratios, and on this kind of shared
# machine a run's decode stage takes one time or twice it, by turns.
if only avro; then
	say "Avro against JSON: $BENCH_EVENTS events each way (test/bench/avro_bench.sh)"
	BENCH_AVRO_SERVER_BINDIR="$inst$PG_BINDIR" BENCH_AVRO_EVENTS=$BENCH_EVENTS \
		BENCH_AVRO_PARTITIONS=$BENCH_PARTITIONS BENCH_AVRO_REPEAT=$((BENCH_REPEAT + 2)) \
		BENCH_AVRO_OUT="$work/avro.md" PG_CONFIG="$PG_CONFIG" "$bench/avro_bench.sh" ||
		{ echo "avro_bench.sh failed" >&2; failed_checks=$((failed_checks + 1)); }
fi

# --- summary ---------------------------------------------------------------------------------
say "Summary"
cp "$results" "$BENCH_OUT/results.tsv"
perl "$bench/summarize.pl" --results "$results" --out "$BENCH_OUT" \
	--meta "$(
		printf 'date=%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
		printf 'commit=%s\n' "$commit"
		printf 'cpu=%s\n' "$(awk -F ': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
		printf 'cores=%s\n' "$(nproc)"
		printf 'memory=%s\n' "$(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo)"
		printf 'postgres=%s\n' "$("$inst$PG_BINDIR/postgres" --version)"
		printf 'librdkafka=%s\n' "$(pkg-config --modversion rdkafka 2>/dev/null || echo unknown)"
		printf 'events=%s\n' "$EXPECT_EVENTS"
		printf 'payload_bytes=%s\n' "$((raw_bytes / EXPECT_EVENTS))"
		printf 'partitions=%s\n' "$BENCH_PARTITIONS"
		printf 'batch=%s\n' "$BENCH_BATCH"
		printf 'repeat=%s\n' "$BENCH_REPEAT"
		printf 'loadavg_end=%s\n' "$(cut -d ' ' -f 1-3 /proc/loadavg)"
		printf 'loadavg_run=%s\n' "$(sort -n "$work/loadavg.txt" | awk '{ v[NR] = $1 } END {
			if (NR) printf "%.2f / %.2f / %.2f (%d samples)", v[1], v[int((NR + 1) / 2)], v[NR], NR }')"
		printf 'profile=%s\n' "$BENCH_PROFILE"
		printf 'short=%s\n' "$BENCH_SHORT"
		printf 'only=%s\n' "$BENCH_ONLY"
		printf 'state_burst=%s\n' "$BENCH_STATE_BURST"
		printf 'nx_bids=%s\n' "${NX_BIDS:-}"
		printf 'nx_auctions=%s\n' "${NX_AUCTIONS:-}"
		printf 'nx_bidders=%s\n' "${NX_BIDDERS:-}"
		printf 'nx_rate=%s\n' "$BENCH_NX_RATE"
		printf 'nx_partitions=%s\n' "$BENCH_NX_PARTITIONS"
		printf 'st_groups=%s\n' "${ST_GROUPS:-}"
		printf 'st_partitions=%s\n' "$BENCH_STATE_PARTITIONS"
		printf 'st_batches=%s\n' "$BENCH_STATE_BATCHES"
		printf 'j_events=%s\n' "${J_IMPS:-}"
		printf 'j_pairs=%s\n' "${J_PAIRS:-}"
		printf 'j_without_click=%s\n' "${J_IMPS_WITHOUT_CLICK:-}"
		printf 'j_ads=%s\n' "${J_ADS:-}"
		printf 'j_span_s=%s\n' "${J_SPAN_S:-}"
		printf 'j_agg_groups=%s\n' "${J_AGG_GROUPS:-}"
		printf 'j_rate=%s\n' "$BENCH_JOIN_RATE"
		printf 'j_partitions=%s\n' "$BENCH_JOIN_PARTITIONS"
		printf 'cl_rows=%s\n' "${CL_ROWS:-}"
		printf 'cl_changes=%s\n' "${CL_CHANGES:-}"
		printf 'cl_updates=%s\n' "${CL_UPDATES:-}"
		printf 'cl_deletes=%s\n' "${CL_DELETES:-}"
		printf 'cl_inserts=%s\n' "${CL_INSERTS:-}"
		printf 'cl_regions=%s\n' "$BENCH_CL_REGIONS"
		printf 'cl_txn=%s\n' "$BENCH_CL_TXN"
		printf 'cl_recompute=%s\n' "$BENCH_CL_RECOMPUTE"
		printf 'cl_settle=%s\n' "$([[ $BENCH_CL_SETTLE == 1 ]] && echo 1)"
	)"
if [[ -s $work/avro.md ]]; then
	{
		printf '\n## Avro against JSON (issue 36)\n\n'
		printf 'The same events as JSON and as Avro (Confluent wire format), each in its own topic, '
		printf 'by test/bench/avro_bench.sh: CPU of the run_available() backend per event; floor '
		printf 'reads and decodes and keeps nothing, case1 is case 1, raw the raw ceiling. '
		printf 'See test/bench/avro-results.md for the method and the choice of decoder.\n\n'
		cat "$work/avro.md"
	} >>"$BENCH_OUT/results.md"
fi
if ((failed_checks > 0)); then
	echo "$failed_checks run(s) failed their correctness check: see the table" >&2
	exit 1
fi
