#!/usr/bin/env bash
# check_solutions_arch.sh - the "add an architecture" exercise (exercises/arch)
# still scores 0 in its handout, full marks with its solution and exactly
# what each wrong solution's header says. Run by `make check-solutions`.
#
# The exercise is against a handout of full/ (exercises/arch/make_handout.sh:
# full/ without qwen2), so each step works in a scratch copy of full/
# together with its build/ (full/build, which make -C full makes first):
#   1. the handout: its llama and qwen3 goldens still pass (test_golden2.c,
#      a few cases of the tiny, tiny2 and tiny-llama shapes), and the
#      exercise scores 0;
#   2. exercises/solutions/arch/ex1_qwen2.patch applied: model.h and qwen3.c
#      are full/'s again, byte for byte, and the exercise scores full marks;
#   3. each ex1_qwen2.wrong_WHAT.patch applied on top of the solution, in a
#      fresh handout: less than full marks, the checks its "Fails:" line
#      names failed, the score its "Scores:" line gives.
#
# Kept short for CI: the copy keeps full/build's objects and their times, and
# an edited header is given back its old time while the sources that include
# it (cc -MM) are touched instead, so a step rebuilds the 7 objects that see
# model.h, not all 50 (tools/engine.mk makes every object depend on every
# header); the copy's mg is never relinked (the test makes its models with
# full/'s, MG_BIN, as make grade in a handout does); and the golden cases
# are a few (MG_GOLDEN2_CASES, CASES below).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
make=${MAKE:-make}
sols=$root/exercises/solutions/arch
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mg-arch-solutions.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failed=0
t0=$(date +%s)
# Each type family once (F32, a legacy block type, a K-quant mix), both modes,
# a one-token prompt and one with special tokens.
CASES=${CASES:-tiny-qwen2/f32/,tiny-qwen2/q8_0/fox.,tiny-qwen2/q4_k_m/chat.}
# The architectures the handout keeps: llama (NORMAL RoPE, rope_freqs) and
# qwen3 in both of its shapes.
KEPT_CASES="tiny-llama/f32/fox.,tiny-llama/q4_k_m/chat.,tiny/f32/fox.,tiny2/q8_0/chat."

fail() { echo "check-solutions-arch: $*" >&2; failed=1; }

$make --no-print-directory -C full lib build/mg > "$scratch/full.log" 2>&1 ||
    { echo "check-solutions-arch: make -C full fails:" >&2; tail -n 20 "$scratch/full.log" >&2; exit 1; }
export MG_BIN=$root/full/build/mg

# Which of full/'s sources include each header (directly or not): "file.c: ... model.h ...".
(cd full && for c in *.c; do ${CC:-cc} -MM -march=native "$c" 2> /dev/null | tr -d '\\\n'; echo; done) > "$scratch/deps" 2> /dev/null ||
    true

# The headers of $1 changed since its build get back full/'s time, and the
# sources that include them are touched: make rebuilds those objects only.
settle() {
    local dir=$1 h c
    for h in $(cd "$dir" && find . -maxdepth 1 -name '*.h' -newer build/libmg.a | sed 's|^\./||'); do
        touch -r "full/$h" "$dir/$h"
        for c in $(awk -v h="$h" '{ for (i = 2; i <= NF; i++) if ($i == h) { sub(/\.o:$/, ".c", $1); print $1; break } }' "$scratch/deps"); do
            touch "$dir/$c"
        done
    done
}

# A fresh handout in $scratch/$1: full/ and its build/, qwen2 cut out.
fresh_handout() {
    rm -rf "${scratch:?}/$1"; mkdir -p "$scratch/$1"
    (cd full && tar cf - --exclude='./build-*' --exclude='./build/grade' --exclude='./build/tests' \
        --exclude='./build/dot' .) | (cd "$scratch/$1" && tar xpf -)
    mkdir -p "$scratch/$1/build/tests"
    exercises/arch/make_handout.sh --in "$scratch/$1" || { fail "make_handout.sh fails"; return 1; }
    settle "$scratch/$1"
}
# git apply as outside any repository: a scratch folder inside a clone (TMPDIR
# under a git-ignored build/) would otherwise have its files skipped, silently.
apply_patch() {
    if command -v git > /dev/null; then (cd "$1" && GIT_CEILING_DIRECTORIES=$(dirname "$1") git apply --whitespace=nowarn "$2")
    else (cd "$1" && patch -p1 --batch --quiet --fuzz=0 < "$2"); fi
}
grade() {   # grade DIR: make grade there, its output in DIR.grade.log
    (settle "$1"; MG_GOLDEN2_CASES=$CASES $make --no-print-directory -C "$1" grade) > "$1.grade.log" 2>&1
}
score_of() { awk '$1 == "ex1" { print $2 }' "$1/build/grade/results" 2> /dev/null; }
points=$(awk '$1 == "ex1" { print $4 }' exercises/arch/exercises.list)

# 1. the handout: llama and qwen3 still run as llama.cpp does; qwen2 scores 0
fresh_handout work || exit 1
if ! $make --no-print-directory -C "$scratch/work" build/tests/full_test_golden2 > "$scratch/golden.log" 2>&1 ||
   ! (cd "$scratch/work" && MG_GOLDEN2_CASES=$KEPT_CASES ./build/tests/full_test_golden2 >> "$scratch/golden.log" 2>&1); then
    fail "the handout fails the llama and qwen3 goldens ($KEPT_CASES):"; tail -n 20 "$scratch/golden.log" >&2
fi
grade "$scratch/work"
s=$(score_of "$scratch/work")
[ "$s" = 0 ] || { fail "the untouched handout scores ${s:-nothing}:"; cat "$scratch/work.grade.log" >&2; }
untouched=$s

# 2. the solution: full/ again, full marks
if ! apply_patch "$scratch/work" "$sols/ex1_qwen2.patch" > "$scratch/apply.log" 2>&1; then
    fail "ex1_qwen2.patch does not apply to the handout (after a change to full/: remake its diff with exercises/arch/make_handout.sh --diff):"; cat "$scratch/apply.log" >&2
else
    for f in model.h qwen3.c; do
        cmp -s "full/$f" "$scratch/work/$f" || fail "the handout with ex1_qwen2.patch is not full/'s $f (remake the patch with exercises/arch/make_handout.sh --diff, as its header says)"
    done
    grade "$scratch/work"
    s=$(score_of "$scratch/work")
    [ "$s" = "$points" ] || { fail "the solution scores ${s:-nothing}/$points:"; cat "$scratch/work.grade.log" >&2; }
    solution=$s
fi

# 3. the wrong solutions, each on top of the solution
wrongs=""
for wrong in "$sols"/ex1_qwen2.wrong_*.patch; do
    [ -f "$wrong" ] || continue
    fresh_handout wrong || continue
    if ! apply_patch "$scratch/wrong" "$sols/ex1_qwen2.patch" > "$scratch/apply.log" 2>&1 ||
       ! apply_patch "$scratch/wrong" "$wrong" >> "$scratch/apply.log" 2>&1; then
        fail "$(basename "$wrong") does not apply on top of ex1_qwen2.patch:"; cat "$scratch/apply.log" >&2; continue
    fi
    grade "$scratch/wrong"
    s=$(score_of "$scratch/wrong"); want=$(sed -n 's/^Scores: *//p' "$wrong" | head -n 1)
    if [ -z "$s" ] || [ "$s" = "$points" ]; then
        fail "the wrong solution $(basename "$wrong") scores ${s:-nothing}, not less than $points:"
        cat "$scratch/wrong.grade.log" >&2
    elif [ -n "$want" ] && [ "$s" != "$want" ]; then
        fail "the wrong solution $(basename "$wrong") scores $s, its header says $want:"; cat "$scratch/wrong.grade.log" >&2
    fi
    for check in $(sed -n 's/^Fails: *//p' "$wrong"); do
        awk -v c="$check" '$1 == "ex1" && $2 == c && $5 == "fail" { f = 1 } END { exit !f }' \
            "$scratch/wrong/build/grade/checks" ||
            fail "the wrong solution $(basename "$wrong") passes the check $check, which its header says it fails"
    done
    wrongs="$wrongs $(basename "$wrong" .patch | sed 's/^[^.]*\.//')=$s"
done

echo "check-solutions-arch: untouched ${untouched:-?}/$points, solution ${solution:-?}/$points${wrongs:+, caught:$wrongs} ($(( $(date +%s) - t0 )) s)"
[ "$failed" = 0 ] && echo "check-solutions-arch: all solutions pass"
exit "$failed"
