#!/usr/bin/env bash
# install_deps.sh: install the Debian packages that building, testing and the
# demo of streamwin need (`make deps`; `make test` and `make demo` call it).
#
# Idempotent: asks dpkg which packages are missing and installs only those,
# after one `apt-get update`.  On the happy path it prints one line.  As a
# non-root user it uses sudo when available; otherwise it prints the exact
# command to run and exits 1.
set -euo pipefail

packages=(
	gcc make perl pkg-config        # build tools (pg_config comes with libpq-dev)
	binutils                        # nm: test/check_symbols.sh
	postgresql-15                   # server binaries for the test clusters
	postgresql-server-dev-15        # PGXS, server headers, clang for bitcode
	librdkafka-dev                  # Kafka client library (and its mock cluster)
	libavro-dev                     # avro-c: checks Avro schemas when a source is created
	libcurl4-openssl-dev            # HTTP client of the Avro schema registry
	libipc-run-perl                 # PostgreSQL::Test::Cluster needs IPC::Run
	util-linux                      # runuser: tests run the server as postgres
	procps                          # ps/kill used by the test scripts
	coreutils                       # timeout, mktemp
)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	echo "streamwin deps: all ${#packages[@]} packages present"
	exit 0
fi

cmd=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}")
if ((EUID == 0)); then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	echo "streamwin deps: not root and no sudo; run as root:" >&2
	echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi

echo "streamwin deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -q >/dev/null
"${sudo[@]}" "${cmd[@]}"
