#!/bin/sh
# tests/tools/bench_tables/test_bench_tables.sh - tools/bench_tables.sh makes
# the page of speeds from what make bench's sets printed (the .txt files
# here, cut from real runs): every table row and command line comes through
# as it was, under its set's heading, with the bandwidth table; a set that
# printed no table (depth.txt) or has no file is an error naming the file.
set -u
cd "$(dirname "$0")/../../.."
tables=tools/bench_tables.sh
dir=tests/tools/bench_tables
fail=0
say() { echo "bench_tables: $*"; fail=1; }

page=$(sh $tables $dir minimind qwen06 batched 2> /dev/null) || say "minimind qwen06 batched: exit $?, want 0"
for set in minimind qwen06 batched; do
    echo "$page" | grep -qx "## $set" || say "no heading for the set $set"
    # every table line of the set, in order, as it was printed
    want=$(grep '^|' $dir/$set.txt)
    got=$(echo "$page" | awk -v h="## $set" '$0 == h { on = 1; next } /^## / { on = 0 } on && /^\|/')
    [ "$want" = "$got" ] || say "$set: the table lines differ from $dir/$set.txt"
    n_cmd=$(grep -cE '^\./build/(mg|decode_bound) ' $dir/$set.txt)
    n_got=$(echo "$page" | awk -v h="## $set" '$0 == h { on = 1; next } /^## / { on = 0 } on && /^    (mg|decode_bound) /' | wc -l)
    [ "$n_cmd" -eq "$n_got" ] || say "$set: $n_cmd command lines printed, $n_got shown as code"
done
echo "$page" | grep -q '^`batched-bench: n_kv_max = 4096, n_batch = 512, flash_attn = 1' ||
    say "batched-bench's settings line (flash_attn = 1) is missing"
echo "$page" | grep -qx '| 2 | 53.1 |' || say "the bandwidth table is missing its 2-thread row"
echo "$page" | grep -q 'round 1 of' && say "progress lines leaked into the page"
echo "$page" | grep -q '^    decode_bound -m ' || say "decode_bound's command line is not shown as code"
echo "$page" | grep -q 'the kernel pass runs the same mul_mat kernels' || say "the qwen06 set does not say what decode_bound measures"

err=$(sh $tables $dir minimind depth 2>&1 > /dev/null); rc=$?
[ $rc -eq 1 ] || say "a set without a table: exit $rc, want 1"
echo "$err" | grep -q "$dir/depth.txt: no table" || say "a set without a table: the error does not name depth.txt: $err"
err=$(sh $tables $dir nosuchset 2>&1 > /dev/null); rc=$?
[ $rc -eq 1 ] || say "a set without a file: exit $rc, want 1"
echo "$err" | grep -q "$dir/nosuchset.txt" || say "a set without a file: the error does not name nosuchset.txt: $err"

[ $fail -eq 0 ] && echo "bench_tables: ok"
exit $fail
