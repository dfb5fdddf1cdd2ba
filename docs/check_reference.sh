#!/bin/sh
# docs/check_reference.sh DOXYGEN DOXYFILE LOG -- builds the API reference
# (ctest docs_reference) and fails on:
#   - doxygen failing, or any error it logs;
#   - any warning but "is not documented": broken references (\ref,
#     @copydoc, links between pages), bad commands or markup in a header
#     comment or a docs/*.md page, unbalanced groups from the filter;
#   - a public FUNCTION without documentation (its own comment, the comment
#     of the group of calls it belongs to, or of the type just above it).
# Undocumented types, struct members and macros are counted, not failed:
# many members are named well enough and the header style does not ask for
# a comment on each.
set -u
doxygen=$1 doxyfile=$2 log=$3
rm -f "$log"
if ! "$doxygen" "$doxyfile"; then
    echo "check_reference: doxygen failed" >&2
    exit 1
fi
[ -f "$log" ] || { echo "check_reference: no warning log $log" >&2; exit 1; }
bad=0
if grep -v 'is not documented' "$log" | grep -q .; then
    echo "check_reference: doxygen errors or warnings:" >&2
    grep -v 'is not documented' "$log" >&2
    bad=1
fi
if grep -q '(function) .* is not documented' "$log"; then
    echo "check_reference: public functions without documentation:" >&2
    grep '(function) .* is not documented' "$log" >&2
    bad=1
fi
echo "check_reference: $(grep -c 'is not documented' "$log") undocumented types, members or macros (not failed)"
[ "$bad" = 0 ] && echo "check_reference: reference built in $(dirname "$log")/html/index.html"
exit "$bad"
