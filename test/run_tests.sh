#!/usr/bin/env bash
# run_tests.sh: streamwin's whole test suite (`make test`, which installs the
# Debian packages and builds first).
#
#   1. builds (make all test-programs) and installs the extension (as root, or
#      through sudo);
#   2. copies what the tests need (sql/, expected/, test/ with the built test
#      programs) into a fresh work directory; when run as root that directory
#      belongs to the `postgres` user, and everything below runs as postgres
#      with a clean environment, because PostgreSQL refuses to run as root
#      (and a fresh clone under /root is unreadable for postgres anyway);
#   3. starts test/kafka_broker with the topics of test/fixtures/*.txt (see
#      test/fixtures/load.sh), produces them, and runs the pg_regress tests
#      (REGRESS in the Makefile) against a temporary instance configured by
#      test/regress.conf, with KAFKA_BROKERS set to the broker's bootstrap
#      list (`\getenv brokers KAFKA_BROKERS` in psql); stops the broker;
#   4. runs each TAP test test/t/*.pl with prove (PostgreSQL::Test::Cluster
#      plus test/lib/StreamwinTest.pm); each starts its own brokers;
#   before those, checks what the installed streamwin.so exports
#      (test/check_symbols.sh).
#
# On failure it prints regression.diffs and the tails of the relevant logs.
# The last line is "N passed, N failed", counting pg_regress tests and TAP
# test files; the exit status is 0 only if nothing failed.
#
# Environment knobs:
#   SKIP_REGRESS=1 / SKIP_TAP=1   skip one half
#   REGRESS="a b"                 run only these pg_regress tests
#   PROVE_TESTS="test/t/005_workers.pl"  run only these TAP files
#   PROVE_FLAGS="-v"              extra prove flags
#   TAP_TIMEOUT=600               seconds before one TAP file is killed
#   KEEP_TMP=1                    keep the work directory even on success
#   SKIP_INSTALL=1                test what is already built and installed
#   REGRESS_TIMEOUT=300           seconds before pg_regress is killed
#   PG_CONFIG=...                 which PostgreSQL (default: version 15)
#   STREAMWIN_*                   passed through to the tests (e.g. STREAMWIN_CRASH_EVENTS)
#   STREAMWIN_SOURCE_DIR          the git checkout the tests may build from
#                                 (024_upgrades.pl: its releases); default: this one
set -euo pipefail

# --- Locating PostgreSQL -----------------------------------------------------

if [[ -z ${PG_CONFIG:-} ]]; then
	if [[ -x /usr/lib/postgresql/15/bin/pg_config ]]; then
		PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
	else
		PG_CONFIG=pg_config
	fi
fi
PG_BINDIR=$("$PG_CONFIG" --bindir)
# .../lib/pgxs/src/makefiles/pgxs.mk -> .../lib/pgxs
PGXS_ROOT=$(dirname "$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")")
PG_REGRESS=$PGXS_ROOT/src/test/regress/pg_regress
PG_PERL_LIB=$PGXS_ROOT/src/test/perl

# Environment variables passed from the outer script to the inner one.
PASSED_VARS=(REGRESS REGRESS_OPTS SKIP_REGRESS SKIP_TAP PROVE_TESTS PROVE_FLAGS
	TAP_TIMEOUT REGRESS_TIMEOUT KEEP_TMP PG_TEST_TIMEOUT_DEFAULT PG_TEST_NOCLEAN PG_CONFIG CI)

# --- Inner part: runs as the unprivileged user, inside the work directory ----

# Kill what we started and that is still running: the fixture broker, brokers
# the TAP helper recorded in pids/, and any server left by an interrupted run.
cleanup_inner() {
	local pidfile pid
	if [[ -n ${timed_pid:-} ]]; then
		# timeout(1) runs its command in a process group of its own
		kill -TERM -- "-$timed_pid" 2>/dev/null || true
		sleep 1
		kill -KILL -- "-$timed_pid" 2>/dev/null || true
		timed_pid=
	fi
	if [[ -n ${broker_pid:-} ]] && kill -0 "$broker_pid" 2>/dev/null; then
		kill -TERM "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	for pidfile in "$work"/pids/*; do
		[[ -f $pidfile ]] || continue
		pid=$(<"$pidfile")
		kill -TERM "$pid" 2>/dev/null || true
		rm -f "$pidfile"
	done
	stop_servers_under "$work"
}

# stop_servers_under DIR: immediate stop of every server whose data
# directory is under DIR (e.g. pg_regress's instance after it was killed).
stop_servers_under() {
	local pidfile
	while IFS= read -r pidfile; do
		"$PG_BINDIR/pg_ctl" -D "$(dirname "$pidfile")" stop -m immediate \
			>/dev/null 2>&1 || true
	done < <(find "$1" -name postmaster.pid 2>/dev/null)
}

# run_timed SECONDS OUTPUT_FILE COMMAND...: run COMMAND under timeout(1)
# with its output in OUTPUT_FILE, shown live; returns its exit status (124
# on timeout).  It runs in the background so that a SIGINT/SIGTERM reaches
# our trap at once, and cleanup_inner can kill its whole process group.
run_timed() {
	local secs=$1 out=$2 rc=0 tail_pid
	shift 2
	: >"$out"
	timeout --kill-after=30 "$secs" "$@" >"$out" 2>&1 &
	timed_pid=$!
	tail -n +1 -f --pid="$timed_pid" "$out" &
	tail_pid=$!
	wait "$timed_pid" || rc=$?
	timed_pid=
	wait "$tail_pid" 2>/dev/null || true
	return "$rc"
}

# tail_log FILE [LINES]: print the end of a log file under a header.
tail_log() {
	[[ -f $1 ]] || return 0
	echo "----- tail of ${1#"$work"/} -----"
	tail -n "${2:-80}" "$1"
}

# start_fixture_broker: start test/kafka_broker with the fixture topics,
# produce the fixtures, export KAFKA_BROKERS.
start_fixture_broker() {
	local topic_args bootstrap_file="$work/runlog/bootstrap" i
	# shellcheck disable=SC2207 # topic names have no spaces
	topic_args=($("$work/test/fixtures/load.sh" --topic-args))
	"$work/test/kafka_broker" "${topic_args[@]}" --bootstrap-file "$bootstrap_file" \
		>"$work/runlog/kafka_broker.log" 2>&1 &
	broker_pid=$!
	for ((i = 0; i < 300; i++)); do
		[[ -s $bootstrap_file ]] && break
		if ! kill -0 "$broker_pid" 2>/dev/null; then
			echo "kafka_broker exited before it was ready" >&2
			tail_log "$work/runlog/kafka_broker.log"
			return 1
		fi
		sleep 0.1
	done
	if [[ ! -s $bootstrap_file ]]; then
		echo "kafka_broker not ready after 30 s" >&2
		tail_log "$work/runlog/kafka_broker.log"
		return 1
	fi
	KAFKA_BROKERS=$(<"$bootstrap_file")
	export KAFKA_BROKERS
	echo "kafka_broker (pid $broker_pid) at $KAFKA_BROKERS"
	KAFKA_PRODUCE="$work/test/kafka_produce" "$work/test/fixtures/load.sh" --produce "$KAFKA_BROKERS"
}

stop_fixture_broker() {
	if [[ -n ${broker_pid:-} ]]; then
		kill -TERM "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
		broker_pid=
	fi
}

run_regress() {
	local rc=0 ok bad opts
	echo
	echo "=== pg_regress: $REGRESS"
	if ! start_fixture_broker; then
		echo "pg_regress: could not start the fixture broker; counting every test as failed"
		failed=$((failed + $(wc -w <<<"$REGRESS")))
		return
	fi
	# REGRESS_OPTS comes from the Makefile; --encoding/--no-locale make text
	# output and sort order the same on every machine.
	read -ra opts <<<"$REGRESS_OPTS"
	# shellcheck disable=SC2086 # REGRESS is a list
	run_timed "${REGRESS_TIMEOUT:-300}" "$work/runlog/pg_regress.out" \
		"$PG_REGRESS" --bindir="$PG_BINDIR" --encoding=UTF8 --no-locale \
		"${opts[@]}" $REGRESS || rc=$?
	stop_fixture_broker
	((rc == 0)) || stop_servers_under "$work"
	ok=$(grep -cE '\.\.\. ok' "$work/runlog/pg_regress.out" || true)
	bad=$(grep -cE '\.\.\. (FAILED|failed)' "$work/runlog/pg_regress.out" || true)
	if ((rc != 0)); then
		# Tests that never finished (pg_regress died or was killed) failed too.
		local notok=$(($(wc -w <<<"$REGRESS") - ok))
		((bad >= notok)) || bad=$notok
		((bad > 0)) || bad=1
		if ((rc == 124 || rc == 137)); then
			echo "pg_regress killed after ${REGRESS_TIMEOUT:-300} s (a test hung)"
		else
			echo "pg_regress exited with status $rc"
		fi
	fi
	passed=$((passed + ok))
	failed=$((failed + bad))
	if ((rc != 0 || bad > 0)); then
		if [[ -f $work/regression.diffs ]]; then
			echo "----- regression.diffs (first 400 lines) -----"
			head -n 400 "$work/regression.diffs"
		fi
		tail_log "$work/log/postmaster.log" 150
		tail_log "$work/runlog/kafka_broker.log" 30
	fi
}

# check_symbols: what the installed streamwin.so exports (test/check_symbols.sh)
run_symbols() {
	echo
	echo "=== symbols"
	if "$work/test/check_symbols.sh" "$("$PG_CONFIG" --pkglibdir)/streamwin.so" "$work/sql"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
}

run_tap() {
	local tests t name rc
	echo
	# PROVE_TESTS is relative to the repository root, like the Makefile's.
	cd "$work"
	# shellcheck disable=SC2206 # a list of paths and globs
	tests=(${PROVE_TESTS:-test/t/*.pl})
	[[ -e ${tests[0]:-} ]] || { echo "=== TAP: no test files"; return; }
	echo "=== TAP: ${tests[*]}"
	export TESTDIR="$work/tap" PG_REGRESS
	mkdir -p "$TESTDIR"
	export PERL5LIB="$PG_PERL_LIB:$work/test/lib"
	export STREAMWIN_TEST_BINDIR="$work/test" STREAMWIN_PID_DIR="$work/pids"
	for t in "${tests[@]}"; do
		name=$(basename "$t" .pl)
		rc=0
		read -ra flags <<<"${PROVE_FLAGS:-}"
		run_timed "${TAP_TIMEOUT:-600}" "$work/runlog/prove_$name.out" \
			prove --timer "${flags[@]}" "$t" || rc=$?
		if ((rc == 0)); then
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
			((rc == 124)) && echo "$t: killed after ${TAP_TIMEOUT:-600} s"
			tail_log "$TESTDIR/tmp_check/log/regress_log_$name" 120
			for f in "$TESTDIR"/tmp_check/log/"${name}"_*.log; do
				tail_log "$f" 80
			done
			cleanup_inner   # servers or brokers a killed test left behind
		fi
	done
}

inner() {
	work=$1
	cd "$work"
	mkdir -p runlog pids   # (pg_regress owns log/)
	trap cleanup_inner EXIT
	trap 'exit 130' INT TERM
	passed=0
	failed=0
	run_symbols
	if [[ -z ${SKIP_REGRESS:-} && -n ${REGRESS// /} ]]; then
		run_regress
	fi
	if [[ -z ${SKIP_TAP:-} ]]; then
		run_tap
	fi
	echo
	if ((failed > 0)) || [[ -n ${KEEP_TMP:-} ]]; then
		echo "work directory kept: $work"
	fi
	echo "$passed passed, $failed failed"
	((failed == 0))
}

if [[ ${1:-} == --inner ]]; then
	inner "$2"
	exit $?
fi

# --- Outer part: build, install, prepare the work directory, run inner -----

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# The tests run in a copy without .git: where the checkout is, for the tests
# that build its earlier releases (024_upgrades.pl).
: "${STREAMWIN_SOURCE_DIR:=$repo}"

if ((EUID == 0)); then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	sudo=(false)
fi

if [[ -z ${SKIP_INSTALL:-} ]]; then
	echo "=== build"
	make -s --no-print-directory PG_CONFIG="$PG_CONFIG" all test-programs

	echo "=== install"
	log=$(mktemp)
	if ! "${sudo[@]}" make -s --no-print-directory PG_CONFIG="$PG_CONFIG" install >"$log" 2>&1; then
		cat "$log"
		rm -f "$log"
		echo "make install failed (it needs root or sudo)" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	rm -f "$log"
	echo "installed into $("$PG_CONFIG" --pkglibdir) and $("$PG_CONFIG" --sharedir)/extension"
fi

# The pg_regress test list and options, as the Makefile defines them.
eval "$(make -s --no-print-directory PG_CONFIG="$PG_CONFIG" print-regress |
	sed -nE 's/^(REGRESS|REGRESS_OPTS)=(.*)$/mk_\1=\x27\2\x27/p')"
: "${REGRESS:=${mk_REGRESS:-}}"
: "${REGRESS_OPTS:=${mk_REGRESS_OPTS:-}}"

work=$(mktemp -d "${TMPDIR:-/tmp}/streamwin-test.XXXXXX")

# Should the inner run be killed before its own cleanup, stop any server it
# left (pg_regress's temporary instance outlives a killed pg_regress).
stop_leftovers() {
	local pidfile
	for pidfile in "$work"/pids/*; do
		[[ -f $pidfile ]] && kill -TERM "$(<"$pidfile")" 2>/dev/null || true
	done
	while IFS= read -r pidfile; do
		"${as_owner[@]}" "$PG_BINDIR/pg_ctl" -D "$(dirname "$pidfile")" \
			stop -m immediate >/dev/null 2>&1 || true
	done < <(find "$work" -name postmaster.pid 2>/dev/null)
}
as_owner=()
((EUID == 0)) && as_owner=(runuser -u postgres --)
trap stop_leftovers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for d in sql expected test; do
	[[ -d $d ]] && cp -a "$d" "$work/"
done
mkdir -p "$work/sql" "$work/expected"

env_args=(HOME="$work" PATH="$PG_BINDIR:/usr/local/bin:/usr/bin:/bin"
	LANG=C.UTF-8 TMPDIR=/tmp)
# shellcheck disable=SC2207 # variable names have no spaces
PASSED_VARS+=($(compgen -v STREAMWIN_ || true))   # test knobs, e.g. STREAMWIN_CRASH_EVENTS
for v in "${PASSED_VARS[@]}"; do
	[[ -n ${!v:-} ]] && env_args+=("$v=${!v}")
done

rc=0
if ((EUID == 0)); then
	if ! id postgres >/dev/null 2>&1; then
		echo "running as root but there is no postgres user (is postgresql-15 installed?)" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	chown -R postgres:postgres "$work"
	echo "=== running tests as postgres in $work"
	runuser -u postgres -- env -i "${env_args[@]}" \
		bash "$work/test/run_tests.sh" --inner "$work" || rc=$?
else
	echo "=== running tests in $work"
	env -i "${env_args[@]}" bash "$work/test/run_tests.sh" --inner "$work" || rc=$?
fi

if ((rc == 0)) && [[ -z ${KEEP_TMP:-} ]]; then
	rm -rf "$work"
fi
exit "$rc"
