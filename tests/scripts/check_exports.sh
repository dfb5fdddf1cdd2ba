#!/bin/sh
# tests/scripts/check_exports.sh NM CC HEADER LIBRARY [CC_FLAGS...] -- the dynamic
# symbols LIBRARY defines must be exactly the functions HEADER declares.
# CC_FLAGS (e.g. -I dirs for headers the header includes) go to the
# preprocessor.
#
# Declared: the header is run through the C preprocessor (comments and
# conditionals resolved as a C compiler sees them), then every top-level
# declaration that is not a typedef, not static (inline helpers) and has a
# parameter list contributes the identifier before its first '(' -- if that
# identifier starts with rkv_ (system headers the header includes declare
# other names, which the library does not define).
# Exported: `nm -D --defined-only`, without the symbols the linker itself
# adds to every shared object.
# Fails, listing both sides' extras, on any difference.
set -eu
nm=$1 cc=$2 header=$3 lib=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

"$cc" "$@" -E -P -x c "$header" | grep -v '^[[:space:]]*#' | awk '
{ text = text $0 " " }
END {
    depth = 0; stmt = ""
    n = length(text)
    for (i = 1; i <= n; i++) {
        c = substr(text, i, 1)
        if (c == "{") depth++
        if (c == "}") { depth--; if (depth == 0) { emit(stmt); stmt = ""; continue } }
        if (c == ";" && depth == 0) { emit(stmt); stmt = ""; continue }
        if (depth == 0) stmt = stmt c
    }
}
function emit(s,    p, pre, m) {
    gsub(/[ \t\n]+/, " ", s); sub(/^ /, "", s)
    if (s ~ /^(typedef|static|extern inline|inline)[ (]/ || s == "") return
    p = index(s, "(")
    if (p == 0) return
    pre = substr(s, 1, p - 1)
    sub(/ +$/, "", pre)
    if (match(pre, /[A-Za-z_][A-Za-z0-9_]*$/)) {
        m = substr(pre, RSTART, RLENGTH)
        if (m ~ /^rkv_/) print m
    }
}' | sort -u > "$tmp/declared"

"$nm" -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' |
    grep -v -x -e _init -e _fini -e _edata -e _end -e __bss_start |
    sort -u > "$tmp/exported"

nd=$(wc -l < "$tmp/declared")
if [ "$nd" -lt 10 ]; then
    echo "check_exports: only $nd functions parsed from $header: the parser is broken"
    exit 1
fi
if ! cmp -s "$tmp/declared" "$tmp/exported"; then
    echo "check_exports: $lib and $header disagree"
    echo "exported but not declared:"
    comm -13 "$tmp/declared" "$tmp/exported" | sed 's/^/  /'
    echo "declared but not exported:"
    comm -23 "$tmp/declared" "$tmp/exported" | sed 's/^/  /'
    exit 1
fi
echo "check_exports: $(wc -l < "$tmp/exported") exported symbols = the functions of $(basename "$header")"
