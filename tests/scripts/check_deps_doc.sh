#!/bin/sh
# tests/scripts/check_deps_doc.sh SOURCE_DIR -- every Debian package that
# scripts/install-deps installs (its pkgs=( ... ) array) is named, as a
# whole word, in README.md's "Dependencies" section, so the list people read
# is the list CI installs. Fails naming each package the README lacks, or
# when either list cannot be found (an empty list checks nothing).
set -eu
src=$1
deps=$src/scripts/install-deps
readme=$src/README.md
# the words between "pkgs=(" and the closing ")", over several lines
pkgs=$(sed -n '/^pkgs=(/,/)/p' "$deps" | sed 's/^pkgs=(//; s/).*//' | tr -s ' \t' '\n\n' | grep -v '^$' || true)
if [ -z "$pkgs" ]; then
    echo "check_deps_doc: no pkgs=( ... ) list in $deps" >&2
    exit 1
fi
section=$(sed -n '/^## Dependencies/,/^## /p' "$readme")
if [ -z "$section" ]; then
    echo "check_deps_doc: no '## Dependencies' section in $readme" >&2
    exit 1
fi
bad=0
for p in $pkgs; do
    # a package name as a word of its own: libnats-dev, not libnats-dev-extra
    if ! printf '%s\n' "$section" | grep -Eq "(^|[^A-Za-z0-9.+-])$(printf '%s' "$p" | sed 's/[.+]/\\&/g')([^A-Za-z0-9.+-]|$)"; then
        echo "README.md \"Dependencies\" does not name $p (scripts/install-deps installs it)" >&2
        bad=1
    fi
done
exit $bad
