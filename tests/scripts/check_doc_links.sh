#!/bin/sh
# tests/scripts/check_doc_links.sh SOURCE_DIR -- every file a document of the
# repository points to must exist in the repository:
#   - relative Markdown links, [text](path), resolved from the document's
#     folder (http(s), mailto and #anchors are not checked);
#   - repository paths in backticks, `dir/file.ext` (a slash and a source
#     or document extension), resolved from the repository root or the
#     document's folder;
#   - any ../relative/path, resolved from the document's folder.
# Documents: every tracked *.md (git ls-files), else every *.md outside
# build folders. Fails listing each dangling reference as FILE: TARGET.
set -eu
src=$1
cd "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    docs=$(git ls-files '*.md')
else
    docs=$(find . -name '*.md' -not -path './build*' | sed 's#^\./##')
fi
bad=0
for doc in $docs; do
    dir=$(dirname "$doc")
    for t in $(grep -o '\]([^)# ]*' "$doc" | sed 's/^](//' | grep -v -E '^(https?:|mailto:|$)' || true); do
        [ -e "$dir/$t" ] || { echo "$doc: link to $t: no such file"; bad=1; }
    done
    for t in $(grep -o '`[A-Za-z0-9_./-]*/[A-Za-z0-9_.-]*\.\(md\|c\|h\|cu\|in\|sh\|txt\|jsonl\|map\|cmake\)`' "$doc" | tr -d '`' || true); do
        [ -e "$t" ] || [ -e "$dir/$t" ] || { echo "$doc: path $t: no such file"; bad=1; }
    done
    for t in $(grep -o '\(^\|[ (`]\)\.\./[A-Za-z0-9_./-]*[A-Za-z0-9_]' "$doc" | sed 's/^[ (`]//' || true); do
        [ -e "$dir/$t" ] || { echo "$doc: path $t: no such file"; bad=1; }
    done
done
[ "$bad" = 0 ] && echo "check_doc_links: every link and path in $(echo "$docs" | wc -w) documents exists"
exit "$bad"
