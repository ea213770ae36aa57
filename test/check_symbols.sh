#!/usr/bin/env bash
# check_symbols.sh LIBRARY SQLDIR: what streamwin.so exports, checked.
#
# The server loads extension libraries with RTLD_GLOBAL: a symbol one of
# them exports can bind another library's call of the same name.  So
# streamwin.so is built with -fvisibility=hidden (Makefile) and exports
# only what the server looks up by name:
#   - _PG_init, Pg_magic_func, _PG_output_plugin_init;
#   - the background workers' entry points, streamwin_*_main;
#   - every C function the install and upgrade scripts name, with its
#     pg_finfo_ record (src/base/sql_function.h).
# Any other exported symbol, or a function a script names that is not
# exported, fails the check.  Prints "symbols: ok" or what is wrong.
set -euo pipefail
lib=$1
sqldir=$2

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort -u)
named=$(grep -ho "'MODULE_PATHNAME', *'[A-Za-z0-9_]*'" "$sqldir"/streamwin--*.sql |
	sed -E "s/.*, *'([A-Za-z0-9_]*)'/\1/" | sort -u)

bad=0
while read -r fn; do
	[[ -z $fn ]] && continue
	for sym in "$fn" "pg_finfo_$fn"; do
		if ! grep -qx "$sym" <<<"$exported"; then
			echo "symbols: $sym (named by an install script) is not exported"
			bad=1
		fi
	done
done <<<"$named"

while read -r sym; do
	case $sym in
		_PG_init | Pg_magic_func | _PG_output_plugin_init) continue ;;
		streamwin_*_main) continue ;;
		pg_finfo_*) grep -qx "${sym#pg_finfo_}" <<<"$named" && continue ;;
		*) grep -qx "$sym" <<<"$named" && continue ;;
	esac
	echo "symbols: $sym is exported but no install script names it"
	bad=1
done <<<"$exported"

if ((bad)); then
	exit 1
fi
echo "symbols: ok ($(wc -l <<<"$exported") exported, $(wc -l <<<"$named") SQL functions)"
