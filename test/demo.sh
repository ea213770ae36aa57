#!/usr/bin/env bash
# demo.sh: watch streamwin aggregate a live Kafka stream (`make demo`, which
# installs the Debian packages and builds first).
#
# It installs the extension, creates a throwaway PostgreSQL cluster in a
# temporary directory (run by the postgres user when you are root), starts
# the test Kafka broker with a topic "orders" (4 partitions), streams
# generated orders into it, and creates a source and a continuous query:
# revenue per region per 10-second tumbling window, watermark 5 seconds,
# update mode.  Every 2 seconds it prints the newest windows and the query's
# status while the table fills up.  After DEMO_SECONDS (default 60) or on
# Ctrl-C it stops the producer, the broker and the cluster and removes the
# temporary directory; nothing is left running.
#
# Environment: DEMO_SECONDS (default 60), DEMO_RATE (orders per second,
# default 300), DEMO_KEEP=1 to keep the temporary directory, PG_CONFIG.
set -euo pipefail

DEMO_SECONDS=${DEMO_SECONDS:-60}
DEMO_RATE=${DEMO_RATE:-300}
if [[ -z ${PG_CONFIG:-} ]]; then
	if [[ -x /usr/lib/postgresql/15/bin/pg_config ]]; then
		PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
	else
		PG_CONFIG=pg_config
	fi
fi
PG_BINDIR=$("$PG_CONFIG" --bindir)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

say() {
	if [[ -t 1 ]]; then printf "\n\033[1m== %s\033[0m\n" "$*"; else printf "\n== %s\n" "$*"; fi
}

for prog in test/kafka_broker test/kafka_produce; do
	[[ -x $prog ]] || { echo "$prog is missing: run 'make demo' (or 'make test-programs')" >&2; exit 1; }
done

# --- install the extension --------------------------------------------------
say "Installing streamwin into $("$PG_CONFIG" --pkglibdir)"
if ((EUID == 0)); then
	make -s --no-print-directory PG_CONFIG="$PG_CONFIG" install >/dev/null
elif command -v sudo >/dev/null 2>&1; then
	sudo make -s --no-print-directory PG_CONFIG="$PG_CONFIG" install >/dev/null
else
	echo "make install needs root: run 'make install' as root, then this demo again" >&2
	exit 1
fi

# --- cleanup, whatever happens -----------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/streamwin-demo.XXXXXX")
chmod 755 "$work"
pgdir=$work/pg                       # owned by the server's user
broker_pid= producer_pid= cluster_started=

as_pg() {
	if ((EUID == 0)); then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

cleanup() {
	local rc=$?
	trap - INT TERM EXIT
	echo
	echo "Stopping the demo..."
	if [[ -n $producer_pid ]]; then
		kill -TERM "$producer_pid" 2>/dev/null || true
		wait "$producer_pid" 2>/dev/null || true
	fi
	if [[ -f $work/generator.pid ]]; then
		kill -TERM "$(<"$work/generator.pid")" 2>/dev/null || true
	fi
	if [[ -n $cluster_started ]]; then
		as_pg "$PG_BINDIR/pg_ctl" -D "$pgdir/data" stop -m fast -w >/dev/null 2>&1 ||
			as_pg "$PG_BINDIR/pg_ctl" -D "$pgdir/data" stop -m immediate >/dev/null 2>&1 || true
	fi
	if [[ -n $broker_pid ]]; then
		kill -TERM "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	if [[ -n ${DEMO_KEEP:-} ]]; then
		echo "Kept $work (server log: $pgdir/postgres.log)"
	else
		rm -rf "$work"
	fi
	echo "Demo stopped; nothing left running."
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- a throwaway cluster -----------------------------------------------------
say "Creating a throwaway PostgreSQL cluster in $pgdir"
mkdir -p "$pgdir/sock"
((EUID == 0)) && chown -R postgres:postgres "$pgdir"
as_pg "$PG_BINDIR/initdb" -D "$pgdir/data" -U postgres -A trust \
	--encoding=UTF8 --locale=C --no-sync >"$work/initdb.log" 2>&1 ||
	{ cat "$work/initdb.log"; exit 1; }
as_pg tee -a "$pgdir/data/postgresql.conf" >/dev/null <<EOF
# streamwin demo
shared_preload_libraries = 'streamwin'
listen_addresses = ''
unix_socket_directories = '$pgdir/sock'
port = 5432
max_worker_processes = 16
timezone = 'UTC'
fsync = off
EOF
as_pg "$PG_BINDIR/pg_ctl" -D "$pgdir/data" -l "$pgdir/postgres.log" -w start >/dev/null ||
	{ tail -n 30 "$pgdir/postgres.log"; exit 1; }
cluster_started=1
psql_demo() {
	"$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$pgdir/sock" -p 5432 -U postgres -d postgres "$@"
}

# --- the broker and the order stream ------------------------------------------
say "Starting the Kafka test broker with topic orders (4 partitions)"
test/kafka_broker --topic orders:4 --bootstrap-file "$work/bootstrap" >"$work/broker.log" 2>&1 &
broker_pid=$!
for ((i = 0; i < 100; i++)); do
	[[ -s $work/bootstrap ]] && break
	kill -0 "$broker_pid" 2>/dev/null || { cat "$work/broker.log"; exit 1; }
	sleep 0.1
done
brokers=$(<"$work/bootstrap")
echo "broker at $brokers"

say "Streaming about $DEMO_RATE orders per second (a few arrive late)"
# The generator paces itself, so event times are "now" when produced; 1 in 50
# orders is 10-30 s late, the kind of row the watermark drops.
perl -MTime::HiRes=time,sleep -MPOSIX=strftime -e '
	my ($rate, $pidfile) = @ARGV;
	open my $f, ">", $pidfile or die $!; print $f "$$\n"; close $f;
	$| = 1; srand(42);
	my @regions = qw(eu-west eu-north us-east us-west apac latam);
	my ($id, $t0) = (0, time);
	while (1) {
		my $now = time;
		my $ts = $now - rand(2);                      # a little jitter
		$ts -= 10 + rand(20) if rand() < 0.02;        # late
		printf "{\"order_id\": %d, \"region\": \"%s\", \"customer\": \"c%d\", \"amount\": %.2f, \"event_time\": \"%s.%03d+00\"}\n",
			++$id, $regions[int(rand(@regions))], int(rand(2000)), 5 + rand(495),
			strftime("%Y-%m-%d %H:%M:%S", gmtime(int($ts))), ($ts - int($ts)) * 1000;
		my $due = $t0 + $id / $rate;
		sleep($due - time) if $due > time;
	}' "$DEMO_RATE" "$work/generator.pid" |
	test/kafka_produce --brokers "$brokers" --topic orders --quiet >"$work/producer.log" 2>&1 &
producer_pid=$!

say "Creating the source and the continuous query"
cat <<EOF
  CREATE EXTENSION streamwin;
  SELECT streamwin.create_kafka_source('orders', '$brokers', 'orders',
      'order_id bigint, region text, customer text, amount numeric, event_time timestamptz', 'json');
  SELECT streamwin.create_query('revenue_10s',
      \$\$SELECT region, count(*) AS orders, sum(amount) AS revenue,
               streamwin.approx_count_distinct(customer) AS customers,
               streamwin.approx_percentile(amount, 0.9) AS p90_amount
          FROM orders
         GROUP BY streamwin.tumble(event_time, '10 seconds'), region\$\$,
      watermark => '5 seconds', output_mode => 'update',
      trigger_interval => '1 second');
EOF
psql_demo -o /dev/null <<EOF
CREATE EXTENSION streamwin;
SELECT streamwin.create_kafka_source('orders', '$brokers', 'orders',
    'order_id bigint, region text, customer text, amount numeric, event_time timestamptz', 'json');
SELECT streamwin.create_query('revenue_10s',
    \$\$SELECT region, count(*) AS orders, sum(amount) AS revenue,
             streamwin.approx_count_distinct(customer) AS customers,
             streamwin.approx_percentile(amount, 0.9) AS p90_amount
        FROM orders
       GROUP BY streamwin.tumble(event_time, '10 seconds'), region\$\$,
    watermark => '5 seconds', output_mode => 'update',
    trigger_interval => '1 second');
EOF

# --- watch it ------------------------------------------------------------------
start=$SECONDS
errors=0
while ((SECONDS - start < DEMO_SECONDS)); do
	sleep 2
	kill -0 "$producer_pid" 2>/dev/null || { echo "the producer stopped:"; cat "$work/producer.log"; exit 1; }
	[[ -t 1 ]] && command -v clear >/dev/null && clear
	say "streamwin demo: $((SECONDS - start)) of $DEMO_SECONDS s (Ctrl-C to stop)"
	if ! psql_demo -P footer=off <<'EOF'
\echo 'Newest windows of revenue_10s (per region, 10-second tumbling windows):'
SELECT to_char(window_start, 'HH24:MI:SS') || ' - ' || to_char(window_end, 'HH24:MI:SS') AS "window",
       region, orders, round(revenue, 2) AS revenue, customers,
       round(p90_amount::numeric, 2) AS p90_amount
  FROM revenue_10s
 ORDER BY window_start DESC, region
 LIMIT 18;
\echo 'streamwin.queries:'
SELECT name, state, worker_pid, last_batch_id, to_char(watermark, 'HH24:MI:SS') AS watermark,
       lag, left(last_error, 60) AS last_error
  FROM streamwin.queries;
\echo 'Last batch (streamwin.progress):'
SELECT batch_id, input_rows, round(input_rows_per_second) AS rows_per_s,
       late_rows_dropped, state_rows, duration_ms
  FROM streamwin.progress
 WHERE query = 'revenue_10s'
 ORDER BY batch_id DESC
 LIMIT 1;
EOF
	then
		errors=$((errors + 1))
		echo "(query failed; server log: $pgdir/postgres.log)"
		tail -n 5 "$pgdir/postgres.log"
		((errors < 5)) || { echo "giving up after 5 failed refreshes"; exit 1; }
	fi
done

summary_sql="SELECT count(*) || ' windows, ' || coalesce(sum(orders), 0) || ' orders counted'
                FROM revenue_10s"
say "Done: $(psql_demo -At -c "$summary_sql")"
