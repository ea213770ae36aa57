#!/usr/bin/env bash
# install_deps.sh: the Debian packages `make bench` needs on top of what
# building and testing need (test/install_deps.sh, which this runs first):
# gnuplot for the throughput plot.  perf (linux-perf) is installed only when
# BENCH_PROFILE=1 asks for profiles.
#
# Idempotent: installs only what dpkg says is missing.  As a non-root user it
# uses sudo when available; otherwise it prints the command to run and exits 1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$here/../install_deps.sh"

packages=(gnuplot-nox)          # the PNG plot (pngcairo terminal)
[[ ${BENCH_PROFILE:-0} == 1 ]] && packages+=(linux-perf)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
	echo "streamwin bench deps: all ${#packages[@]} packages present"
	exit 0
fi

if ((EUID == 0)); then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	echo "streamwin bench deps: not root and no sudo; run as root:" >&2
	echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi
echo "streamwin bench deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -q >/dev/null
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
