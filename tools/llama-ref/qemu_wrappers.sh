#!/bin/sh
# qemu_wrappers.sh - make_golden2.sh's two programs for llama.cpp cross-built for
# aarch64 (tools/llama-ref/README.md, "The NEON set"), run under qemu-user on an x86 host.
#
#   tools/llama-ref/qemu_wrappers.sh OUT_DIR LLAMA_ARM64_BIN LLAMA_REF_ARM64
#
# writes OUT_DIR/llama-quantize and OUT_DIR/llama_ref: scripts that start the
# aarch64 binaries under qemu-aarch64 with "-cpu max" (every feature qemu has;
# llama.cpp's kernels are chosen at compile time, -march=armv8.2-a+dotprod+fp16,
# so the extra ones are never used) and Debian's aarch64 libraries (-L).
set -eu
OUT=$1
BIN=$(cd "$2" && pwd)
REF=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
SYSROOT=${SYSROOT:-/usr/aarch64-linux-gnu}
mkdir -p "$OUT"
for p in "llama-quantize:$BIN/llama-quantize" "llama_ref:$REF"; do
    name=${p%%:*}
    target=${p#*:}
    printf '#!/bin/sh\nexec qemu-aarch64 -L %s -cpu max "%s" "$@"\n' "$SYSROOT" "$target" > "$OUT/$name"
    chmod +x "$OUT/$name"
done
