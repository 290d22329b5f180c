#!/bin/sh
# check_numbers.sh - the numbers a chapter README quotes from another chapter's
# demo ("<!-- numbers N... from CHAPTER TRACE -->", see tools/readme_check.c),
# checked against that demo's real output run with MG_TRACE=TRACE. A
# chapter's own make test checks its other excerpts and numbers; a chapter
# copied alone has no other chapter, so these are checked here (make test
# at the top runs this: make check-numbers). The Chinese lessons
# (README.zh.md) quote the same numbers and are checked the same way.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL
status=0
for readme in chapters/[0-9][0-9]_*/README.md chapters/[0-9][0-9]_*/README.zh.md; do
    [ -f "$readme" ] || continue
    dir=$(dirname "$readme")
    name=$(basename "$dir")
    froms=$(sed -n 's/^<!-- numbers .* from \([0-9][0-9]_[a-z0-9_]*\) \([a-z,]*\) -->$/\1 \2/p' "$readme" | sort -u)
    [ -n "$froms" ] || continue
    set --
    while read -r chapter trace; do
        out=$tmp/$chapter.$trace.out
        [ -f "$out" ] || make -s -C "chapters/$chapter" run-demo TRACE="$trace" > "$out" 2>&1
        set -- "$@" --from "$chapter" "$trace" "$out"
    done << LIST
$froms
LIST
    make -s -C "$dir" run-demo > "$tmp/$name.out" 2>&1
    make -s -C "$dir" build/readme_check
    "$dir/build/readme_check" "$readme" "$tmp/$name.out" "$@" || status=1
done
exit $status
