#!/bin/sh
# check_reading_maps.sh - the names a lesson's reading guide sends the reader
# to are in the chapter's code. In every chapter README (English and
# Chinese), each paragraph that opens with a bold "Reading map." or "Reading
# order" (阅读路线, 阅读顺序) names functions, structs, enums and tables in
# backticks; each one that is a C identifier (or "struct x", "enum x", "x[]")
# must appear as a whole word in the chapter's .c and .h files or its demos,
# so a renamed or removed function cannot leave a map pointing at nothing.
# make test runs it.
set -eu
cd "$(dirname "$0")/.."
bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
n=0
for readme in chapters/[0-9][0-9]_*/README.md chapters/[0-9][0-9]_*/README.zh.md; do
    [ -f "$readme" ] || continue
    dir=$(dirname "$readme")
    awk '/^\*\*(Reading map|Reading order|阅读路线|阅读顺序)/ { on = 1 }
         on && /^$/ { on = 0 }
         on { print }' "$readme" |
        grep -o '`[^`]*`' | tr -d '`' | sed 's/\[\]$//' |
        grep -E '^((struct|enum) )?[A-Za-z_][A-Za-z0-9_]*$' | sort -u > "$bad.names" || true
    while IFS= read -r name; do
        n=$((n + 1))
        if ! cat "$dir"/*.c "$dir"/*.h "$dir"/demos/*.c 2> /dev/null | grep -qw -- "$name"; then
            echo "$readme: its reading guide names \`$name\`, which is nowhere in $dir's code" >> "$bad"
        fi
    done < "$bad.names"
    rm -f "$bad.names"
done
if [ -s "$bad" ]; then
    cat "$bad" >&2
    exit 1
fi
echo "reading guides: the $n names they give are in their chapters' code"
