#!/bin/sh
# handout.sh - one chapter, alone: for a class, or to check that it works alone.
#
#   tools/handout.sh archive NN    build/handout/NN_name.tar.gz: the chapter
#                                  folder, without build output (make handout)
#   tools/handout.sh exercise NN   work/NN_name/: a student's working copy,
#                                  which make chapters never touches (make exercise)
#   tools/handout.sh check NN ...  each chapter's archive unpacked alone in an
#                                  empty temporary folder, where make, make run,
#                                  make test and make graph must pass (make check-handout)
#
# NN is a chapter number (05) or directory name (05_galloc). A chapter folder
# holds everything it needs (tools/handout.list): its code, its build rules,
# the tests of chapters 01..NN and the files they read, its exercises. It never
# holds exercises/solutions/ (chapgen refuses to copy it; the archive is checked).
set -eu
cd "$(dirname "$0")/.."

die() { echo "handout: $*" >&2; exit 1; }

# chapters/05_galloc from 05, 5 or 05_galloc.
chapter_dir() {
    [ -n "${1:-}" ] || die "which chapter? e.g. CHAPTER=05 (one of: $(cd chapters && echo [0-9][0-9]_*))"
    n=$1
    case $n in [0-9]) n=0$n ;; esac
    for d in chapters/"$n" chapters/"$n"_*; do
        [ -d "$d" ] && [ -f "$d/Makefile" ] && { echo "$d"; return; }
    done
    die "no chapter '$1' in chapters/ (one of: $(cd chapters && echo [0-9][0-9]_*))"
}

# The archive of one chapter; prints its path.
archive() {
    dir=$(chapter_dir "$1")
    name=$(basename "$dir")
    mkdir -p build/handout
    out=build/handout/$name.tar.gz
    tar -C chapters --exclude="$name/build" --exclude="$name/build-*" -czf "$out" "$name"
    if tar -tzf "$out" | grep -q '/solutions\(/\|$\)'; then
        rm -f "$out"
        die "$out would hold solutions; nothing written"
    fi
    echo "$out"
}

# What the archive holds, by part.
describe() {
    out=$1 name=$2
    list=$(tar -tzf "$out" | grep -v '/$')
    count() { printf '%s\n' "$list" | grep -c "$1" || true; }
    n_all=$(printf '%s\n' "$list" | grep -c .)
    n_code=$(printf '%s\n' "$list" | grep -v "^$name/\(tests\|tools\|models\|exercises\)/" | grep -c '\.[ch]$' || true)
    tests=$(cd chapters/"$name" && ls -d tests/[0-9][0-9]_* 2> /dev/null | sed 's|tests/||' | tr '\n' ' ')
    size=$(du -k "$out" | cut -f1)
    echo "$out: $n_all files, ${size} KB compressed:"
    echo "  code       $n_code .c/.h files (the chapter's engine and demos/), README.md, Makefile"
    echo "  tests/     $(count "^$name/tests/") files: the tests of ${tests% } and their harness"
    [ -d chapters/"$name"/tests/fixtures ] && echo "             with tests/fixtures/ ($(du -sh chapters/"$name"/tests/fixtures | cut -f1)), the files they read"
    echo "  tools/     $(count "^$name/tools/") files: the build rules and the README check"
    [ -d chapters/"$name"/models ] && echo "  models/    $(count "^$name/models/") files: the demo's model"
    if [ -d chapters/"$name"/exercises ]; then
        echo "  exercises/ $(count "^$name/exercises/") files: the graded exercises' tests (no solutions)"
    fi
    echo "  .chapgen   what make chapters generated (the README check uses it to spot edits)"
    echo "no build output, no solutions. A student: tar xzf $name.tar.gz && cd $name && make test"
}

case ${1:-} in
archive)
    out=$(archive "${2:-}")
    describe "$out" "$(basename "$out" .tar.gz)"
    ;;
exercise)
    dir=$(chapter_dir "${2:-}")
    name=$(basename "$dir")
    work=work/$name
    [ ! -e "$work" ] || die "$work exists already (your work?): keep it, or move it away first"
    mkdir -p "$work"
    tar -C "$dir" --exclude=./build --exclude='./build-*' -cf - . | tar -C "$work" -xf -
    echo "$work: your copy of chapter $name; make chapters never touches it (git ignores work/)."
    echo "  cd $work && make test    (and make grade, where the chapter has exercises)"
    echo "  diff -ru $dir $work      what you changed"
    ;;
check)
    shift
    [ $# -gt 0 ] || set -- 01 09
    for c in "$@"; do
        out=$(archive "$c")
        name=$(basename "$out" .tar.gz)
        tmp=$(mktemp -d)
        tar -C "$tmp" -xzf "$out"
        start=$(date +%s)
        echo "== $name alone in $tmp: make, make run, make test, make graph"
        # A fresh shell's make: nothing inherited from a make that runs this.
        if ! (cd "$tmp/$name" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL sh -c \
                'make -j2 && make run && make test && make graph') > "$tmp/log" 2>&1; then
            tail -40 "$tmp/log"
            die "$name does not work alone (the log: $tmp/log)"
        fi
        grep -E '^(100%|[0-9]+%): Checks|match the demo' "$tmp/log" | sed 's/^/  /' | tail -3
        echo "  $name works alone ($(( $(date +%s) - start )) s)"
        rm -rf "$tmp"
    done
    ;;
*)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
