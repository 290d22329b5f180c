#!/bin/sh
# make_golden2.sh - regenerate tests/fixtures/golden2/ with llama.cpp (see README.md).
#
#   tools/llama-ref/make_golden2.sh LLAMA_BUILD_BIN LLAMA_REF_BINARY [MG_BINARY]
#
# e.g. tools/llama-ref/make_golden2.sh ~/llama.cpp/build/bin ./llama_ref full/build/mg
# Run from the root of the repository. Five shapes (SHAPES="tiny tiny2 tiny-llama tiny-qwen2 tiny-qwen3moe" by default):
#   tiny   the vendored master tests/fixtures/models/tiny-f32.gguf; prompts nihao fox long chat;
#          goldens in golden2/tiny-TYPE/, checksums in golden2/models.tsv
#   tiny2  the master made by `mg mkmodel --preset tiny2` (bit-reproducible: --rng sum4);
#          prompts nihao fox digits chat; goldens in golden2/tiny2-TYPE/, checksums in
#          golden2/models-tiny2.tsv (its f32 row is the master's)
#   tiny-llama, tiny-qwen2  the other architectures: masters by `mg mkmodel --preset tiny-llama`
#          (tiny-qwen2), tiny2's prompts; checksums in
#          golden2/models-tiny-llama.tsv (models-tiny-qwen2.tsv)
#   tiny-qwen3moe  mixture of experts (`mg mkmodel --preset tiny-qwen3moe`), tiny2's
#          prompts; checksums in golden2/models-tiny-qwen3moe.tsv
# The models are written to $TMP (default /tmp/golden2-models): only their checksums are
# vendored, because `mg quantize` (and mg mkmodel) write byte-identical files (the test checks).
#
# One golden set per instruction-set level (tests/full/test_golden2.c): SET names the folder,
# golden2 (AVX-512, the default), golden2-avx2 or golden2-neon, and LLAMA_BUILD_BIN is
# llama.cpp built for that level (tools/llama-ref/README.md). The models are the same bytes
# at every level: a set other than golden2 checks each checksum against golden2's tables.
#
# MODELS=mg: the quantized models are mg quantize's files (checked against the tables,
# so the bytes x86's llama-quantize wrote) instead of LLAMA_BUILD_BIN's llama-quantize.
# For the NEON set: llama-quantize built for aarch64 writes other bytes for some types
# (there ggml-base itself is compiled with FMA, and GCC fuses quantize_row_q4_0_ref's
# x*id + 8.5f), while the goldens are to be llama.cpp's outputs on the very files the
# test reads. TYPES="Q4_0 Q4_1" makes only some types.
set -eu
BIN=$1
REF=$2
MG=${3:-full/build/mg}
TMP=${TMP:-/tmp/golden2-models}
SHAPES=${SHAPES:-tiny tiny2 tiny-llama tiny-qwen2 tiny-qwen3moe}
SET=${SET:-golden2}
OUT=tests/fixtures/$SET
TABLES=tests/fixtures/golden2
TYPES=${TYPES:-F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL}
MODELS=${MODELS:-llama-quantize}
mkdir -p "$TMP"

# golden_set SHAPE MASTER TSV PROMPTS...
golden_set() {
    shape=$1 master=$2 tsv=$3
    shift 3
    : > "$tsv.new"
    for t in $TYPES; do
        lt=$(echo "$t" | tr 'A-Z' 'a-z')
        model="$TMP/$shape-$lt.gguf"
        if [ "$t" = F32 ]; then
            cp "$master" "$model"
        elif [ "$MODELS" = mg ]; then
            "$MG" quantize "$master" "$model" "$t" > /dev/null
        else
            "$BIN/llama-quantize" "$master" "$model" "$t" 1 > "$TMP/quantize-$shape-$lt.log" 2>&1
            # mg quantize writes the same bytes: checked here once, and by the test at every run
            "$MG" quantize "$master" "$TMP/mg-$shape-$lt.gguf" "$t" > /dev/null
            cmp "$model" "$TMP/mg-$shape-$lt.gguf"
        fi
        row=$(printf '%s\t%s\t%s' "$lt" "$(wc -c < "$model" | tr -d ' ')" "$(sha256sum "$model" | cut -d' ' -f1)")
        echo "$row" >> "$tsv.new"
        # another level's set: the model is the file golden2's tables record
        [ "$SET" = golden2 ] || grep -qxF "$row" "$tsv"
        mkdir -p "$OUT/$shape-$lt"
        for p in "$@"; do
            "$REF" -m "$model" -f "$TABLES/prompts/$p.txt" -o "$OUT/$shape-$lt/$p.batch" > /dev/null
            "$REF" -m "$model" -f "$TABLES/prompts/$p.txt" -o "$OUT/$shape-$lt/$p.tokens" --tokens > /dev/null
        done
    done
    if [ "$SET" = golden2 ]; then
        mv "$tsv.new" "$tsv"
    else
        rm "$tsv.new"   # each row was checked above
    fi
}

for shape in $SHAPES; do
    case $shape in
        tiny)
            golden_set tiny tests/fixtures/models/tiny-f32.gguf "$TABLES/models.tsv" nihao fox long chat ;;
        tiny2)
            "$MG" mkmodel --preset tiny2 -o "$TMP/tiny2-master.gguf" > /dev/null
            golden_set tiny2 "$TMP/tiny2-master.gguf" "$TABLES/models-tiny2.tsv" nihao fox digits chat ;;
        tiny-llama|tiny-qwen2|tiny-qwen3moe)
            "$MG" mkmodel --preset "$shape" -o "$TMP/$shape-master.gguf" > /dev/null
            golden_set "$shape" "$TMP/$shape-master.gguf" "$TABLES/models-$shape.tsv" nihao fox digits chat ;;
        *)
            echo "make_golden2.sh: unknown shape '$shape' (tiny, tiny2, tiny-llama, tiny-qwen2, tiny-qwen3moe)" >&2
            exit 1 ;;
    esac
done
