#!/usr/bin/env bash
# make_handout.sh - the handout of the "add an architecture" exercise
# (exercises/arch): a copy of full/ that runs llama and qwen3 but not qwen2.
#
#   exercises/arch/make_handout.sh DEST      copy full/ to DEST and cut qwen2 out
#   exercises/arch/make_handout.sh --in DIR  cut qwen2 out of DIR, a copy of full/ already there
#                                            (check_solutions_arch.sh: a copy with its build/)
#   exercises/arch/make_handout.sh --diff    print the diff from a handout back to full/ (model.h,
#                                            qwen3.c): the reference solution's diff part
#
# What it removes is what the learner writes back: the "qwen2" row of the
# architectures table (qwen3.c's archs[], with its NEOX rope) and
# MG_ARCH_QWEN2 (model.h's enum mg_arch); qwen2's layer function
# (qwen3.c's layer_qwen2, and its row of layer_of_arch[]); the q/k/v bias
# tensors of a layer (model.h's struct mg_layer: bq, bk, bv), their loading
# (qwen3.c's load_qkv_biases, called from load_head_tensors) and the piece
# that adds one after its projection (qwen3.c's add_bias). Everything else
# of full/ stays, so the llama and qwen3 goldens still pass in the copy; a
# qwen2 file is refused by name ("architecture 'qwen2' is not supported").
#
# The copy's Makefile gets ROOT (this repository: tests, fixtures, models) and
# EXERCISES_DIR (exercises/arch), so `make grade` there grades the exercise;
# it builds full/'s mg first, which makes the test's models (mg mkmodel
# refuses to write a model its own engine cannot load: the copy's cannot).
#
# Each edit finds its text by content, not by line number, and stops the
# script when it finds it not exactly once: when full/ changes there, the
# message names the file and the text to look for, and this script is edited
# with it (exercises/check_solutions_arch.sh runs it in CI). Not a patch, so
# that unrelated changes to full/ (another architecture in archs[]) do not
# break it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

usage() { echo "usage: $0 DEST | --in DIR | --diff" >&2; exit 2; }
[ $# = 1 ] || [ $# = 2 ] || usage
# --diff: a handout in a scratch folder, then diff -u a/FILE b/FILE from it
# to full/, without dates (git apply and patch -p1 read it).
if [ "$1" = --diff ]; then
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/mg-arch-diff.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    "$0" "$tmp/h" > /dev/null
    mkdir -p "$tmp/a" "$tmp/b"
    for f in model.h qwen3.c; do cp "$tmp/h/$f" "$tmp/a/"; cp "$root/full/$f" "$tmp/b/"; done
    (cd "$tmp" && for f in model.h qwen3.c; do diff -u "a/$f" "b/$f" || true; done) | sed -E 's/^(---|\+\+\+) ([^\t]*)\t.*/\1 \2/'
    exit 0
fi
if [ "$1" = --in ]; then
    [ $# = 2 ] || usage
    dest=$2
    [ -f "$dest/qwen3.c" ] || { echo "make_handout: $dest/qwen3.c: not a copy of full/" >&2; exit 1; }
else
    [ $# = 1 ] || usage
    dest=$1
    [ ! -e "$dest" ] || { echo "make_handout: $dest exists: remove it first (your work there would be lost)" >&2; exit 1; }
    mkdir -p "$dest"
    (cd "$root/full" && tar cf - --exclude='./build' --exclude='./build-*' .) | (cd "$dest" && tar xpf -)
fi

# edit FILE MODE FIRST [LAST] NEW: the one line holding the fixed text FIRST
# (through the next line holding LAST, for MODE lines) becomes NEW (a
# string's substitution for MODE text; any lines, or none, for MODE lines).
# MODE every: FIRST is an extended regex, NEW its sed replacement, on every
# line it matches (at least one).
edit() {
    local file=$1 mode=$2 first=$3 last new
    if [ "$mode" = every ]; then
        if ! grep -qE -- "$first" "$dest/$file"; then
            echo "make_handout: $file has no line matching '$first': full/ changed there; edit $here/make_handout.sh to match" >&2
            exit 1
        fi
        sed -E "s/$first/$4/g" "$dest/$file" > "$dest/$file.tmp"
        cat "$dest/$file.tmp" > "$dest/$file"
        rm -f "$dest/$file.tmp"
        return
    fi
    if [ "$mode" = lines ]; then last=$4; new=$5; else last=""; new=$4; fi
    local n
    n=$(FIRST=$first awk 'index($0, ENVIRON["FIRST"]) { n++ } END { print n + 0 }' "$dest/$file")
    if [ "$n" != 1 ]; then
        echo "make_handout: $file holds '$first' $n times, not once: full/ changed there; edit $here/make_handout.sh to match" >&2
        exit 1
    fi
    FIRST=$first LAST=$last NEW=$new MODE=$mode awk '
        BEGIN { first = ENVIRON["FIRST"]; last = ENVIRON["LAST"]; new = ENVIRON["NEW"]; mode = ENVIRON["MODE"] }
        function done() { if (new != "") { print new; prev = "x" } else gap = 1 }
        skipping { if (index($0, last)) { skipping = 0; done() }; next }
        index($0, first) {
            if (mode == "text") { i = index($0, first); print substr($0, 1, i - 1) new substr($0, i + length(first)); next }
            if (index($0, last)) { done(); next }
            skipping = 1; next
        }
        gap { gap = 0; if ($0 == "" && prev == "") next }   # a block cut out between blank lines leaves one
        { print; prev = $0 }
        END { if (skipping) { print "make_handout: no line with \"" last "\" after \"" first "\"" > "/dev/stderr"; exit 1 } }
    ' "$dest/$file" > "$dest/$file.tmp"
    cat "$dest/$file.tmp" > "$dest/$file"   # cat, not mv: the file keeps its mode
    rm -f "$dest/$file.tmp"
}

# model.h: the enum without qwen2, the layer without its biases.
edit model.h lines '//   qwen2  NEOX RoPE' '//   qwen2  NEOX RoPE' ''
edit model.h lines '    MG_ARCH_QWEN2,' '    MG_ARCH_QWEN2,' ''
edit model.h lines '    struct mg_tensor * bq;' '    struct mg_tensor * bv;' ''

# qwen3.c: recognising qwen2.
edit qwen3.c lines '{"qwen2", MG_ARCH_QWEN2, MG_ROPE_NEOX},' '{"qwen2", MG_ARCH_QWEN2, MG_ROPE_NEOX},' ''
edit qwen3.c text 'this engine runs llama, qwen2, ' 'this engine runs llama, '

# qwen3.c: loading the biases.
edit qwen3.c lines "// Qwen2's q/k/v biases, optional as" '}' ''
edit qwen3.c lines '// normalises each head of Q and K (an RMS norm over D) before RoPE, Qwen2' '// adds a bias to each of Q, K and V' \
'// normalises each head of Q and K (an RMS norm over D) before RoPE; llama
// does not.'
edit qwen3.c lines 'if (m->hp.arch == MG_ARCH_QWEN2) return load_qkv_biases(m, l, il);' 'load_qkv_biases' ''
edit qwen3.c text "// llama and qwen2: no q/k norms (qwen2's biases are optional)" '// llama: no q/k norms'

# qwen3.c: adding them after the projections, in qwen2's own layer.
edit qwen3.c lines '// x + bias, named again as' '}' ''
edit qwen3.c lines '// qwen2 (src/models/qwen2.cpp): llama'"'"'s layer' '}' ''
edit qwen3.c lines '    [MG_ARCH_QWEN2]    = layer_qwen2,' 'layer_qwen2' ''

# Makefile: this repository's tests and the exercise, graded with the copy's own mg.
edit Makefile text 'ROOT            := $(abspath ..)' "ROOT            := $root"
cat >> "$dest/Makefile" << 'EOF'

# The handout of exercises/arch (made by exercises/arch/make_handout.sh):
# make grade grades "add an architecture". Its test makes its models with
# full/'s own mg (mg mkmodel loads what it writes, which this copy cannot do
# for qwen2 until the exercise is done), built first unless MG_BIN names one.
EXERCISES_DIR := $(ROOT)/exercises/arch
grade: grade-mg
grade-mg:
	@[ -n "$$MG_BIN" ] || $(MAKE) -s --no-print-directory -C $(ROOT)/full build/mg
.PHONY: grade-mg
EOF

if [ "$1" != --in ]; then
    echo "make_handout: $dest is full/ without qwen2. Add it back (exercises/README.md, \"arch\"), then:"
    echo "    make -C $dest grade"
fi
