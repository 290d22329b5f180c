#!/bin/sh
# tools/check_file_table.sh [--fix] - full/README.md's table of the files only
# in full/ ("Only in full/"), checked against the files: every file marked
# //@file full has a row, and each row's "lines" column is the wc -l of the
# files it names, in order. make test runs it, so the README's numbers come
# from the files, not from memory; --fix rewrites the counts (a new file's
# row is still written by hand).
set -eu
cd "$(dirname "$0")/../full"

# Each row | `a.c`, `a.h` | 12, 34 | ... with its counts as the files have them.
recount() {
    awk -F'|' 'BEGIN { OFS = "|" }
        /^\| `[^|]*` \| [0-9][0-9, ]* \|/ {
            n = split($2, f, ",")
            counts = ""
            for (i = 1; i <= n; i++) {
                name = f[i]; gsub(/[` ]/, "", name)
                cmd = "wc -l < \"" name "\""; cmd | getline c; close(cmd)
                counts = counts (i > 1 ? ", " : "") (c + 0)
            }
            $3 = " " counts " "
        }
        { print }' README.md
}

if [ "${1:-}" = "--fix" ]; then
    recount > README.md.new && mv README.md.new README.md
fi
status=0
for f in $(grep -l '^//@file full' *.c *.h cli/*.c cli/*.h); do
    if ! grep -q "^| [^|]*\`$f\`" README.md; then
        echo "check_file_table: full/$f (//@file full) has no row in full/README.md's table of files"
        status=1
    fi
done
if ! recount | cmp -s - README.md; then
    echo "check_file_table: full/README.md's line counts are not the files' (tools/check_file_table.sh --fix):"
    recount | diff README.md - | grep '^[<>]' | cut -c1-100
    status=1
fi
[ "$status" = 0 ] && echo "check_file_table: full/README.md's file table matches the files"
exit "$status"
