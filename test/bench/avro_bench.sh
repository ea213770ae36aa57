#!/usr/bin/env bash
# avro_bench.sh: what reading Avro costs against JSON, on the same events.
#
#   PG_CONFIG=... test/bench/avro_bench.sh      (after make install and
#                                               make test-programs test/bench/raw_consume)
#
# gen_avro_events.pl writes BENCH_AVRO_EVENTS (200,000) events of
# gen_events.pl's shape, both as JSON objects and as Avro in Confluent's
# wire format, round robin over BENCH_AVRO_PARTITIONS (8) partitions of two
# topics on the test broker.  A throwaway cluster of the PostgreSQL of
# PG_CONFIG (with the streamwin installed there) has one source per topic,
# with the same columns (id bigint, k text, u text, v float8, ts
# timestamptz); the Avro source's writer schema is put in
# streamwin.avro_schemas beforehand, so its registry URL is never asked.
# Then, BENCH_AVRO_REPEAT (3) times, alternating the formats, each timed
# around SELECT streamwin.run_available(q) of a fresh query in one session,
# its CPU from /proc (every thread of the backend, librdkafka's included):
#
#   floor    SELECT id FROM src WHERE v < 0: reading and decoding, nothing kept
#   case 1   count, sum and avg per k per 1-minute tumble, update mode
#
# and the raw ceiling (test/bench/raw_consume: reading alone) per topic.
# Case 1's results over the two topics must be equal.  Printed: the best
# CPU per event of each (and each run's wall time, batches and time in
# them), decoding's share (floor minus raw ceiling), the decode stage of
# the floor runs (streamwin.progress.stage_ms: the backend's time decoding
# alone, per run), and the ratios Avro / JSON; and avro_c_decode (avro-c's generic values, no
# Datums made) over the same bodies, for the choice of decoder.
#
# BENCH_AVRO_SERVER_BINDIR: where initdb, pg_ctl and postgres are (default:
# PG_CONFIG's bindir; make bench gives its private installation, which has
# this build of streamwin).  BENCH_AVRO_OUT: a file that gets the summary
# as markdown too.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
N=${BENCH_AVRO_EVENTS:-200000}
P=${BENCH_AVRO_PARTITIONS:-8}
REPEAT=${BENCH_AVRO_REPEAT:-3}
bindir=$("$PG_CONFIG" --bindir)
server_bindir=${BENCH_AVRO_SERVER_BINDIR:-$bindir}
for prog in test/kafka_broker test/kafka_produce test/bench/raw_consume; do
	[[ -x $here/$prog ]] || { echo "$prog is missing: run make test-programs test/bench/raw_consume" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/streamwin-avro-bench.XXXXXX")
chmod 755 "$work"
broker_pid= started=
as_pg() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
	local rc=$?
	[[ -n $started ]] && as_pg "$server_bindir/pg_ctl" -D "$work/data" stop -m fast -w >/dev/null 2>&1 || true
	[[ -n $broker_pid ]] && { kill -TERM "$broker_pid" 2>/dev/null; wait "$broker_pid" 2>/dev/null || true; }
	if ((rc != 0)); then echo "work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
((EUID == 0)) && chown postgres "$work"

echo "== $N events, $P partitions, as JSON and as Avro"
perl "$here/test/bench/gen_avro_events.pl" --events "$N" --partitions "$P" --out "$work"
"$here/test/kafka_broker" --bootstrap-file "$work/bootstrap" --topic "ev_json:$P" --topic "ev_avro:$P" \
	>"$work/broker.log" 2>&1 &
broker_pid=$!
while [[ ! -s $work/bootstrap ]]; do sleep 0.1; done
brokers=$(tr -d '\n' <"$work/bootstrap")
# a linger long enough that both topics are stored in full producer batches,
# whatever each line costs the producer
"$here/test/kafka_produce" --brokers "$brokers" --topic ev_json --partition-prefix --linger-ms 100 \
	--quiet <"$work/json.tsv"
"$here/test/kafka_produce" --brokers "$brokers" --topic ev_avro --partition-prefix --hex --linger-ms 100 \
	--quiet <"$work/avro.tsv"

as_pg "$server_bindir/initdb" -D "$work/data" -E UTF8 --locale=C >/dev/null 2>&1
cat >>"$work/data/postgresql.conf" <<CONF
shared_preload_libraries = 'streamwin'
listen_addresses = ''
unix_socket_directories = '$work'
timezone = 'UTC'
CONF
as_pg "$server_bindir/pg_ctl" -D "$work/data" -l "$work/pg.log" -w start >/dev/null
started=1
sql() { as_pg "$bindir/psql" -h "$work" -d postgres -X -q -v ON_ERROR_STOP=1 -At "$@"; }

schema=$(sed "s/'/''/g" "$work/schema.json")
sql <<SQL
CREATE EXTENSION streamwin;
SELECT streamwin.create_kafka_source('ev_json', '$brokers', 'ev_json',
    'id bigint, k text, u text, v float8, ts timestamptz', 'json');
SELECT streamwin.create_kafka_source('ev_avro', '$brokers', 'ev_avro',
    'id bigint, k text, u text, v float8, ts timestamptz', 'avro',
    '{"schema_registry": "http://127.0.0.1:9"}');
-- the writer schema as a registry would have given it: never asked for
INSERT INTO streamwin.avro_schemas (source_id, schema_id, schema)
SELECT source_id, 1, '$schema' FROM streamwin.source_catalog WHERE name = 'ev_avro';
CREATE FUNCTION bench_cpu() RETURNS float8 LANGUAGE sql AS \$\$
  SELECT (f[12]::float8 + f[13]::float8) / 100
    FROM string_to_array(regexp_replace(pg_read_file('/proc/' || pg_backend_pid() || '/stat'),
                                        '^.*\\) ', ''), ' ') AS f \$\$;
SQL
[[ $(getconf CLK_TCK) == 100 ]] || { echo "CLK_TCK is not 100" >&2; exit 1; }

# run FORMAT KIND REP: one timed run_available of a fresh query; prints
# "cpu|wall|batches|seconds in them|seconds in their decode stage"
run() {
	local fmt=$1 kind=$2 rep=$3 q="${2}_${1}_$3" query mode
	case $kind in
		floor) query="SELECT id FROM ev_$fmt WHERE v < 0" mode=append ;;
		case1) query="SELECT streamwin.tumble(ts, interval '1 minute') AS w, k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM ev_$fmt GROUP BY 1, 2" mode=update ;;
	esac
	sql -c "SELECT streamwin.create_query('$q', \$q\$$query\$q\$, output_mode => '$mode', start => false)" >/dev/null
	sql -c "CHECKPOINT" >/dev/null
	sql <<SQL
SELECT bench_cpu() AS c0, clock_timestamp() AS t0 \gset
SELECT (streamwin.run_available('$q'))->>'input_rows' AS rows \gset
SELECT :'rows'::bigint = $N AS all_rows \gset
\if :all_rows
\else
\warn 'wrong input_rows'
\quit
\endif
SELECT round((bench_cpu() - :c0)::numeric, 3), round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 3),
       count(*), round(sum(duration_ms)::numeric / 1000, 3),
       round(sum((stage_ms->>'decode')::float8)::numeric / 1000, 3)
  FROM streamwin.progress WHERE query = '$q';
SQL
}

declare -A best decode
keep_best() {
	local k=$1 v=$2
	if [[ -z ${best[$k]:-} ]] || awk "BEGIN { exit !($v < ${best[$k]}) }"; then best[$k]=$v; fi
}
for ((rep = 1; rep <= REPEAT; rep++)); do
	for kind in floor case1; do
		for fmt in json avro; do
			read -r cpu wall batches in_batches in_decode < <(run "$fmt" "$kind" "$rep" | tr '|' ' ')
			printf '%-6s %-5s run %d: cpu %6.3f s  wall %6.3f s  (%d batches, %.3f s in them, %.3f s decoding)\n' \
				"$kind" "$fmt" "$rep" "$cpu" "$wall" "$batches" "$in_batches" "$in_decode"
			keep_best "$kind.$fmt" "$cpu"
			decode[$kind.$fmt.$rep]=$in_decode
		done
	done
	for fmt in json avro; do
		out=$("$here/test/bench/raw_consume" --brokers "$brokers" --topic "ev_$fmt" --partitions "$P" --expect "$N")
		cpu=$(sed -n 's/.*cpu_s=\([0-9.]*\).*/\1/p' <<<"$out")
		printf '%-6s %-5s run %d: cpu %6.3f s\n' raw "$fmt" "$rep" "$cpu"
		keep_best "raw.$fmt" "$cpu"
	done
done

same=$(sql -c "SELECT count(*) FROM (
  (SELECT window_start, k, n, round(s::numeric, 6), round(a::numeric, 6) FROM case1_json_1
   EXCEPT ALL SELECT window_start, k, n, round(s::numeric, 6), round(a::numeric, 6) FROM case1_avro_1)
  UNION ALL
  (SELECT window_start, k, n, round(s::numeric, 6), round(a::numeric, 6) FROM case1_avro_1
   EXCEPT ALL SELECT window_start, k, n, round(s::numeric, 6), round(a::numeric, 6) FROM case1_json_1)) d")
groups=$(sql -c "SELECT count(*) FROM case1_avro_1")

gcc -O2 -o "$work/avro_c_decode" "$here/test/bench/avro_c_decode.c" $(pkg-config --cflags --libs avro-c)
avroc=$("$work/avro_c_decode" "$work/schema.json" "$work/bodies.bin" 3)

us() { awk "BEGIN { printf \"%.2f\", $1 * 1e6 / $N }"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# the decode stage of the floor runs (streamwin.progress.stage_ms): the
# elapsed time of the backend's turning messages into rows, without the
# reading around it (a difference of two runs' CPU carries both runs'
# noise); elapsed, so it still counts time the backend waits for a core;
# the ratio is each round's Avro over its JSON, the median of the rounds
decode_json=$(for ((r = 1; r <= REPEAT; r++)); do echo "${decode[floor.json.$r]}"; done | median)
decode_avro=$(for ((r = 1; r <= REPEAT; r++)); do echo "${decode[floor.avro.$r]}"; done | median)
decode_ratio=$(for ((r = 1; r <= REPEAT; r++)); do
	awk "BEGIN { print ${decode[floor.avro.$r]} / ${decode[floor.json.$r]} }"; done | median)
ratio() { awk "BEGIN { printf \"%.2f\", $1 / $2 }"; }
dj=$(awk "BEGIN { print ${best[floor.json]} - ${best[raw.json]} }")
da=$(awk "BEGIN { print ${best[floor.avro]} - ${best[raw.avro]} }")
summary() {
	echo "| CPU per event (us), best of $REPEAT | json | avro | avro/json |"
	echo "|---|---:|---:|---:|"
	for k in raw floor case1; do
		echo "| $k | $(us "${best[$k.json]}") | $(us "${best[$k.avro]}") | $(ratio "${best[$k.avro]}" "${best[$k.json]}") |"
	done
	echo "| decoding (floor - raw) | $(us "$dj") | $(us "$da") | $(ratio "$da" "$dj") |"
	echo "| decode stage of the floor runs, elapsed us (median of $REPEAT; ratio: median of each run's) | $(us "$decode_json") | $(us "$decode_avro") | $(printf '%.2f' "$decode_ratio") |"
	echo
	echo "$N events, $P partitions. Case 1: $groups groups, rows differing between the formats: $same."
	echo "avro-c generic values, decoding alone: $avroc."
}
echo
summary
[[ -z ${BENCH_AVRO_OUT:-} ]] || summary >"$BENCH_AVRO_OUT"
[[ $same == 0 ]]
