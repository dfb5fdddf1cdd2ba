#!/bin/sh
# tests/scripts/dlopen_safe.sh LIB -- LIB can be loaded late by dlopen (into a
# running Python through ctypes, or as a plugin): neither it nor any library
# it pulls in uses the initial-exec TLS model. Such a library carries the
# dynamic flag STATIC_TLS, and a dlopen after start-up fails with "cannot
# allocate memory in static TLS block" once the process's spare static TLS
# is used up (libjemalloc.so.2 did this to libradixkv.so). glibc's own
# libraries are exempt: they are loaded at start-up in every process.
set -eu
lib=$1
READELF=${READELF:-readelf}
bad=""
check() {
    if "$READELF" -d "$1" | grep -q STATIC_TLS; then
        bad="$bad $1"
    fi
}
check "$lib"
for dep in $(ldd "$lib" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
    case $(basename "$dep") in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) continue ;;
    esac
    check "$dep"
done
if [ -n "$bad" ]; then
    echo "dlopen_safe: STATIC_TLS (initial-exec TLS) in:$bad"
    echo "dlopen_safe: a late dlopen of $lib can fail with 'cannot allocate memory in static TLS block'"
    exit 1
fi
echo "dlopen_safe: $lib and its libraries load by dlopen"
