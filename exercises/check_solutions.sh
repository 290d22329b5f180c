#!/usr/bin/env bash
# check_solutions.sh - `make check-solutions`: every reference solution still
# applies to its chapter and earns full marks, and the untouched chapter earns none.
#
# For each chapter with exercises/NN_name/exercises.list, in a scratch copy of
# chapters/NN_name (mktemp; built with ROOT pointing at this repository):
#   1. `make grade` on the untouched copy: every exercise must score 0;
#   2. the solutions exercises/solutions/NN_name/exN_NAME.patch are applied in
#      the list's order (they are cumulative, like a student's work), and after
#      each one `make grade EX="ex1 .. exN"` must give full marks;
#   3. with all of them applied, the chapter's regular `make test` must pass;
#   4. each wrong solution exercises/solutions/NN_name/exN_NAME.wrong_WHAT.patch
#      (a mistake students make, kept to prove the test catches it) is applied
#      instead of exN's own patch, after the earlier solutions, to a fresh
#      copy, and `make grade EX=exN` must give it less than full marks; its
#      header (the text before the diff) may say more: a line "Fails: CHECK
#      ..." names checks that must fail, "Scores: N" the exact score.
# A patch that no longer applies (after a change to full/ and `make chapters`)
# fails. CHAPTERS="04_graph 05_galloc" checks only those.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
make=${MAKE:-make}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mg-solutions.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failed=0

fail() { echo "check-solutions: $ch: $*" >&2; failed=1; }

# Apply a patch made with `git diff` (or `diff -ru a b`) from inside the chapter copy.
apply_patch() {
    if command -v git > /dev/null; then
        (cd "$1" && git apply --whitespace=nowarn "$2")
    else
        (cd "$1" && patch -p1 --batch --quiet --fuzz=0 < "$2")
    fi
}

# Every line "id score points" of the last grade has score == expected ("0" or "full").
scores_are() {
    local want=$1 id score points
    while read -r id score points; do
        if [ "$want" = 0 ] && [ "$score" != 0 ]; then fail "untouched chapter scores $score on $id"; fi
        if [ "$want" = full ] && [ "$score" != "$points" ]; then fail "$id scores $score/$points with its solution"; fi
    done < "$work/build/grade/results"
}

for list in exercises/[0-9][0-9]_*/exercises.list; do
    ch=$(basename "$(dirname "$list")")
    if [ -n "${CHAPTERS:-}" ] && ! echo " $CHAPTERS " | grep -q " $ch "; then continue; fi
    t0=$(date +%s)
    if [ ! -d "chapters/$ch" ]; then fail "no chapters/$ch"; continue; fi
    work=$scratch/$ch
    cp -r "chapters/$ch" "$work"
    rm -rf "$work"/build "$work"/build-*
    mk() { $make --no-print-directory -C "$work" ROOT="$root" "$@"; }

    mk grade > "$work.untouched.log" 2>&1
    if [ ! -f "$work/build/grade/results" ]; then
        fail "make grade gave no scores:"; tail -n 20 "$work.untouched.log" >&2; continue
    fi
    scores_are 0

    done_ids=""
    # (no `while read` over the list: make's jobserver may own low file descriptors)
    for id in $(awk '!/^#/ && NF { print $1 }' "$list"); do
        name=$(awk -v id="$id" '$1 == id { print $2 }' "$list")
        patch=$root/exercises/solutions/$ch/${id}_${name}.patch
        if [ ! -f "$patch" ]; then fail "no solution $patch"; break; fi
        if ! apply_patch "$work" "$patch" > "$work.$id.log" 2>&1; then
            fail "exercises/solutions/$ch/${id}_${name}.patch does not apply:"; cat "$work.$id.log" >&2; break
        fi
        done_ids="$done_ids $id"
        if ! mk grade EX="$done_ids" > "$work.$id.log" 2>&1; then
            fail "no full marks with the solutions of$done_ids:"; cat "$work.$id.log" >&2
        fi
        scores_are full
    done

    if [ -z "$done_ids" ]; then
        echo "check-solutions: $ch: no solution applied ($(( $(date +%s) - t0 )) s)"; continue
    fi
    if ! mk test > "$work.test.log" 2>&1; then
        fail "make test fails with the solutions of$done_ids applied:"
        grep -E '^[0-9]+%: Checks|:[FE]:|error|differ' "$work.test.log" | head -n 20 >&2
    fi

    # The wrong solutions: each exK_NAME.wrong_WHAT.patch replaces exK's own
    # patch (after ex1 .. ex(K-1)'s) and must score less than full marks on
    # exK, fail the checks its "Fails:" line names and score its "Scores:".
    earlier=""; wrongs=""
    for id in $(awk '!/^#/ && NF { print $1 }' "$list"); do
        name=$(awk -v id="$id" '$1 == id { print $2 }' "$list")
        for wrong in "$root/exercises/solutions/$ch/${id}_${name}".wrong_*.patch; do
            [ -f "$wrong" ] || continue
            w=$scratch/$ch.wrong
            rm -rf "$w"; cp -r "chapters/$ch" "$w"; rm -rf "$w"/build "$w"/build-*
            for p in $earlier; do apply_patch "$w" "$root/exercises/solutions/$ch/$p.patch" > /dev/null 2>&1; done
            if ! apply_patch "$w" "$wrong" > "$w.log" 2>&1; then
                fail "exercises/solutions/$ch/$(basename "$wrong") does not apply:"; cat "$w.log" >&2; continue
            fi
            $make --no-print-directory -C "$w" ROOT="$root" grade EX="$id" > "$w.log" 2>&1
            score=$(awk -v id="$id" '$1 == id { print $2 }' "$w/build/grade/results" 2> /dev/null)
            points=$(awk -v id="$id" '$1 == id { print $4 }' "$list")
            want=$(sed -n 's/^Scores: *//p' "$wrong" | head -n 1)
            if [ -z "$score" ] || [ "$score" = "$points" ]; then
                fail "the wrong solution $(basename "$wrong") scores ${score:-nothing} on $id, not less than $points:"; cat "$w.log" >&2
            elif [ -n "$want" ] && [ "$score" != "$want" ]; then
                fail "the wrong solution $(basename "$wrong") scores $score on $id, its header says $want:"; cat "$w.log" >&2
            fi
            for check in $(sed -n 's/^Fails: *//p' "$wrong"); do
                if ! awk -v id="$id" -v c="$check" '$1 == id && $2 == c && $5 == "fail" { f = 1 } END { exit !f }' "$w/build/grade/checks"; then
                    fail "the wrong solution $(basename "$wrong") passes $id's check $check, which its header says it fails"
                fi
            done
            wrongs="$wrongs $(basename "$wrong" .patch | sed 's/^[^.]*\.//')"
        done
        earlier="$earlier ${id}_${name}"
    done

    echo "check-solutions: $ch:$done_ids applied and graded, make test run${wrongs:+, caught:$wrongs} ($(( $(date +%s) - t0 )) s)"
done

[ "$failed" = 0 ] && echo "check-solutions: all solutions pass"
exit "$failed"
