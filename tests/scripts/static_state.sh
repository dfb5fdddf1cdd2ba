#!/usr/bin/env bash
# tests/scripts/static_state.sh -- the library keeps no process-wide
# mutable state (issue 10: a static qsort context made two schedulers on
# two threads crash). Lists every data object of the given static
# libraries (objdump -t) that lives in a writable, process-wide section
# (.data, .bss and their -fdata-sections forms; not .data.rel.ro, not the
# thread-local .tdata/.tbss) and fails on any that is not allowed below.
#   static_state.sh LIB.a...
# Allowed, with the reason:
#   rkv_live_tree_allocs_global  radix/node_mem.c: an _Atomic debug count
#                                of live tree allocations (leak checks);
#                                nothing in the library reads it.
set -euo pipefail
allowed='^(rkv_live_tree_allocs_global)$'
bad=0
for lib in "$@"; do
  [ -f "$lib" ] || { echo "static_state: no such library: $lib"; exit 1; }
  while read -r sect name; do
    if [[ ! "$name" =~ $allowed ]]; then
      echo "static_state: $lib: '$name' is mutable static data ($sect)"
      bad=1
    fi
  done < <("${OBJDUMP:-objdump}" -t "$lib" |
           awk '$3 == "O" && $4 ~ /^\.(data|bss)(\.|$)/ &&
                $4 !~ /^\.data\.rel\.ro/ && $NF !~ /^(__|\.)/ {print $4, $NF}')
done
if [ "$bad" -ne 0 ]; then
  echo "static_state: keep state in the objects, or make it _Thread_local"
  exit 1
fi
echo "static_state: no mutable static data in $*"
