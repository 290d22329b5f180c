#!/usr/bin/env bash
# check_solutions_vulkan.sh - the Vulkan backend's graded exercise
# (exercises/vulkan) still scores 0 untouched, full marks with its solution
# and exactly what each wrong solution's header says. Run by
# `make -C full VULKAN=1 test-vulkan` (not by `make check-solutions`, which
# needs no Vulkan), after full/build-vulkan is built.
#
# The exercise is against full/ itself (the Vulkan backend is full/ only), so
# each step works in a scratch copy of full/ together with its build-vulkan/
# (timestamps kept: only what a patch touches is rebuilt, seconds instead of
# the minutes of a fresh -O3 build), graded with make VULKAN=1 grade:
#   1. untouched: every exercise scores 0;
#   2. exercises/solutions/vulkan/exN_NAME.patch applied: full marks, and the
#      backend's own op tests (test_vulkan's "vulkan" case) still pass;
#   3. each exN_NAME.wrong_WHAT.patch applied to a fresh copy instead: less
#      than full marks, the checks its "Fails:" line names failed, the score
#      its "Scores:" line gives.
# The same rules as exercises/check_solutions.sh, which says more.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
make=${MAKE:-make}
list=exercises/vulkan/exercises.list
sols=$root/exercises/solutions/vulkan
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mg-vk-solutions.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failed=0
t0=$(date +%s)

fail() { echo "check-solutions-vulkan: $*" >&2; failed=1; }

if [ ! -f full/build-vulkan/libmg.a ]; then
    echo "check-solutions-vulkan: build full/ with the backend first (make -C full VULKAN=1)" >&2; exit 1
fi

# A fresh copy of full/ and its Vulkan build in $scratch/$1. ops_vulkan.o is
# rebuilt there: it holds the path of the shaders it loads (MG_VK_SHADER_DIR).
fresh_copy() {
    rm -rf "${scratch:?}/$1"; mkdir -p "$scratch/$1"
    (cd full && tar cf - --exclude='./build' --exclude='./build-scalar' --exclude='./build-x86-64-*' \
        --exclude='./build-aarch64' --exclude='./build-vulkan/grade' --exclude='./build-vulkan/lesson' .) |
        (cd "$scratch/$1" && tar xpf -)
    rm -f "$scratch/$1/build-vulkan/ops_vulkan.o"
}
apply_patch() {
    if command -v git > /dev/null; then (cd "$1" && git apply --whitespace=nowarn "$2")
    else (cd "$1" && patch -p1 --batch --quiet --fuzz=0 < "$2"); fi
}
grade() {   # grade DIR [EX...]: make VULKAN=1 grade there, its output in DIR.grade.log
    local dir=$1; shift
    $make --no-print-directory -C "$dir" VULKAN=1 ROOT="$root" EX="$*" grade > "$dir.grade.log" 2>&1
}
score_of() { awk -v id="$2" '$1 == id { print $2 }' "$1/build-vulkan/grade/results" 2> /dev/null; }

ids=$(awk '!/^#/ && NF { print $1 }' "$list")
points_of() { awk -v id="$1" '$1 == id { print $4 }' "$list"; }
name_of()   { awk -v id="$1" '$1 == id { print $2 }' "$list"; }

# 1. untouched
fresh_copy work
grade "$scratch/work"
for id in $ids; do
    s=$(score_of "$scratch/work" "$id")
    [ "$s" = 0 ] || { fail "the untouched engine scores ${s:-nothing} on $id:"; cat "$scratch/work.grade.log" >&2; }
done

# 2. the solutions, in order, each graded with those before it
done_ids=""
for id in $ids; do
    patch=$sols/${id}_$(name_of "$id").patch
    if ! apply_patch "$scratch/work" "$patch" > "$scratch/apply.log" 2>&1; then
        fail "$(basename "$patch") does not apply:"; cat "$scratch/apply.log" >&2; break
    fi
    done_ids="$done_ids $id"
    grade "$scratch/work" $done_ids
    s=$(score_of "$scratch/work" "$id")
    [ "$s" = "$(points_of "$id")" ] || { fail "$id scores ${s:-nothing}/$(points_of "$id") with its solution:"; cat "$scratch/work.grade.log" >&2; }
done
# The backend's own op tests, with every solution applied: an exercise extends the backend, it breaks nothing.
if ! $make --no-print-directory -C "$scratch/work" VULKAN=1 ROOT="$root" build-vulkan/tests/vulkan_test_vulkan > "$scratch/test.log" 2>&1 ||
   ! (cd "$scratch/work" && CK_RUN_CASE=vulkan ./build-vulkan/tests/vulkan_test_vulkan >> "$scratch/test.log" 2>&1); then
    fail "test_vulkan's op tests fail with the solutions of$done_ids applied:"; tail -n 20 "$scratch/test.log" >&2
fi

# 3. the wrong solutions, each instead of its exercise's own patch
earlier=""; wrongs=""
for id in $ids; do
    name=$(name_of "$id")
    for wrong in "$sols/${id}_$name".wrong_*.patch; do
        [ -f "$wrong" ] || continue
        fresh_copy wrong
        for p in $earlier; do apply_patch "$scratch/wrong" "$sols/$p.patch" > /dev/null 2>&1; done
        if ! apply_patch "$scratch/wrong" "$wrong" > "$scratch/apply.log" 2>&1; then
            fail "$(basename "$wrong") does not apply:"; cat "$scratch/apply.log" >&2; continue
        fi
        grade "$scratch/wrong" "$id"
        s=$(score_of "$scratch/wrong" "$id"); want=$(sed -n 's/^Scores: *//p' "$wrong" | head -n 1)
        if [ -z "$s" ] || [ "$s" = "$(points_of "$id")" ]; then
            fail "the wrong solution $(basename "$wrong") scores ${s:-nothing} on $id, not less than $(points_of "$id"):"
            cat "$scratch/wrong.grade.log" >&2
        elif [ -n "$want" ] && [ "$s" != "$want" ]; then
            fail "the wrong solution $(basename "$wrong") scores $s on $id, its header says $want:"; cat "$scratch/wrong.grade.log" >&2
        fi
        for check in $(sed -n 's/^Fails: *//p' "$wrong"); do
            awk -v id="$id" -v c="$check" '$1 == id && $2 == c && $5 == "fail" { f = 1 } END { exit !f }' \
                "$scratch/wrong/build-vulkan/grade/checks" ||
                fail "the wrong solution $(basename "$wrong") passes $id's check $check, which its header says it fails"
        done
        wrongs="$wrongs $(basename "$wrong" .patch | sed 's/^[^.]*\.//')"
    done
    earlier="$earlier ${id}_$name"
done

echo "check-solutions-vulkan:$done_ids applied and graded, test_vulkan's op tests run${wrongs:+, caught:$wrongs} ($(( $(date +%s) - t0 )) s)"
[ "$failed" = 0 ] && echo "check-solutions-vulkan: all solutions pass"
exit "$failed"
