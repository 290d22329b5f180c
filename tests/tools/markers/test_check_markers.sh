#!/bin/sh
# tests/tools/markers/test_check_markers.sh - tools/check_markers.sh finds a
# marker and a #if 0 inside a function body (split_body.c), says nothing on
# markers at file scope (clean.c).
set -u
cd "$(dirname "$0")/../../.."
check=tools/check_markers.sh
fail=0
out=$(sh $check tests/tools/markers/split_body.c 2> /dev/null); rc=$?
lines=$(echo "$out" | sed -n 's/^[^:]*:\([0-9]*\):.*/\1/p' | tr '\n' ' ')
if [ $rc -ne 1 ] || [ "$lines" != "7 9 10 12 " ]; then
    echo "check_markers: split_body.c: want exit 1 and lines 7 9 10 12, got exit $rc and lines $lines"; fail=1
fi
echo "$out" | grep -q 'in f(): marker inside the body' || { echo "check_markers: the report does not name f()"; fail=1; }
out=$(sh $check tests/tools/markers/clean.c 2>&1); rc=$?
if [ $rc -ne 0 ] || [ -n "$out" ]; then
    echo "check_markers: clean.c: want exit 0 and no output, got exit $rc:"; echo "$out"; fail=1
fi
[ $fail -eq 0 ] && echo "check_markers: ok"
exit $fail
