#!/usr/bin/env bash
# tests/scripts/no_clock.sh -- the library never reads a clock (charter:
# time comes from the caller, so runs are deterministic and a test can
# step time itself). Lists the undefined symbols of the given static
# libraries (nm -u) and fails on any libc/POSIX call that reads time:
# clock_gettime, gettimeofday, time, clock, timespec_get, ftime, times
# (glibc's versioned and fortified names too).
#   no_clock.sh LIB.a...
set -euo pipefail
clocks='^(__)?(clock_gettime(64)?|gettimeofday(64)?|time(64)?|clock|timespec_get|ftime|times)(@.*)?$'
bad=0
for lib in "$@"; do
  [ -f "$lib" ] || { echo "no_clock: no such library: $lib"; exit 1; }
  syms=$("${NM:-nm}" -u "$lib" | awk '{print $NF}' | sort -u)
  while read -r name; do
    [ -n "$name" ] || continue
    if [[ "$name" =~ $clocks ]]; then
      echo "no_clock: $lib references '$name'"
      bad=1
    fi
  done <<<"$syms"
done
if [ "$bad" -ne 0 ]; then
  echo "no_clock: the library must take time from its caller (now_ms)"
  exit 1
fi
echo "no_clock: no clock read in $*"
