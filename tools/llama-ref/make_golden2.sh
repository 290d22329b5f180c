#!/bin/sh
# make_golden2.sh - regenerate tests/fixtures/golden2/ with llama.cpp (see README.md).
#
#   tools/llama-ref/make_golden2.sh LLAMA_BUILD_BIN LLAMA_REF_BINARY
#
# e.g. tools/llama-ref/make_golden2.sh ~/llama.cpp/build/bin ./llama_ref
# Run from the root of the repository. The quantized models are written to
# $TMP (default /tmp/golden2-models): only their checksums are vendored,
# because `mg quantize` writes byte-identical files (the test checks that).
set -eu
BIN=$1
REF=$2
TMP=${TMP:-/tmp/golden2-models}
OUT=tests/fixtures/golden2
MASTER=tests/fixtures/models/tiny-f32.gguf
TYPES="F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL"
mkdir -p "$TMP"
: > "$OUT/models.tsv.new"
for t in $TYPES; do
    lt=$(echo "$t" | tr 'A-Z' 'a-z')
    model="$TMP/tiny-$lt.gguf"
    if [ "$t" = F32 ]; then
        cp "$MASTER" "$model"
    else
        "$BIN/llama-quantize" "$MASTER" "$model" "$t" 1 > "$TMP/quantize-$lt.log" 2>&1
    fi
    printf '%s\t%s\t%s\n' "$lt" "$(wc -c < "$model" | tr -d ' ')" "$(sha256sum "$model" | cut -d' ' -f1)" >> "$OUT/models.tsv.new"
    mkdir -p "$OUT/tiny-$lt"
    for p in nihao fox long chat; do
        "$REF" -m "$model" -f "$OUT/prompts/$p.txt" -o "$OUT/tiny-$lt/$p.batch" > /dev/null
        "$REF" -m "$model" -f "$OUT/prompts/$p.txt" -o "$OUT/tiny-$lt/$p.tokens" --tokens > /dev/null
    done
done
mv "$OUT/models.tsv.new" "$OUT/models.tsv"
