#!/bin/sh
# tools/bench_tables.sh DIR [SET ...] - the markdown page of speeds that
# `make bench` leaves in DIR/speed.md, made from what its sets printed
# (DIR/<set>.txt, one per set of full/Makefile's BENCH_SETS, and
# DIR/bandwidth.txt). It copies, never computes: each set's command lines,
# its tables (every line that starts with '|') and the lines that say how a
# table was measured (batched-bench's settings, the race's rounds), under a
# heading of the set. The machine is named from /proc/cpuinfo and nproc.
#
#   sh tools/bench_tables.sh full/build/bench minimind qwen06 depth batched > speed.md
#
# A set whose file is missing or has no table is an error (exit 1, naming
# the file): a page with a hole would pass for a whole one.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 DIR SET..." >&2; exit 2; }
dir=$1
shift

# What each set of full/Makefile measures, one line.
about() {
    case $1 in
    minimind) echo "The MiniMind-3 shape (64 M weights) in five types: a prompt of 64 tokens (pp64) and 64 generated (tg64), at 1 and 2 threads." ;;
    qwen06)   echo "The Qwen3-0.6B shape (its 28 layers and widths, but MiniMind's vocabulary of 6400 tokens: smaller files and a far smaller LM head than the real model's, so these rates are not a real Qwen3-0.6B's) in Q8_0 and Q4_K_M: pp512 and tg64 at 1 and 2 threads."
              echo
              echo "Then what holds its decode back (tools/decode_bound.c), in GB/s of weights like the weights/s column: the read pass reads the bytes a decode step reads, split between the threads as mul_mat splits them, a barrier after each matrix, with no arithmetic; the kernel pass runs the same mul_mat kernels on one column with every thread's rows in its L2 cache, memory out of the way. A core that overlapped the two would decode at the slower one's rate; one that did them one after the other, at the last column's." ;;
    depth)    echo "MiniMind-3 Q8_0 with d positions already in the cache (the fill is not timed), plain and flash attention, 2 threads." ;;
    batched)  echo "B sequences of 128 prompt tokens in one batch (S_PP), then 128 steps of one token of each (S_TG, all B together), at 1 thread, then at 2, each with plain attention, then with flash attention." ;;
    *)        echo "The set $1." ;;
    esac
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "# Speed, measured"
echo
# The run's date: when its bandwidth was measured (its first step), else now.
when=$(date -u -r "$dir/bandwidth.txt" '+%Y-%m-%d %H:%M UTC' 2> /dev/null || date -u '+%Y-%m-%d %H:%M UTC')
echo "Written by \`make bench\` (full/Makefile), a run started $when, on"
echo "${cpu:-an unnamed CPU}, $(nproc) cores, $(uname -m); the rival is the"
echo "llama.cpp binary each command names. Measured, never asserted by a test:"
echo "the same machine gives figures up to 2x apart from one day to the next,"
echo "so only the ratios of one run, ours and llama.cpp's in turn on the same"
echo "files, say anything, and a ratio whose min-max over the rounds spans"
echo "1.00x is a tie. \`make bench LLAMA_BENCH=path/to/llama-bench\` runs"
echo "every set again and writes this page anew."
echo
if [ -f "$dir/bandwidth.txt" ]; then
    echo "Read bandwidth in the same run (tools/bandwidth.c), what each decode"
    echo "row's weights/s column is a share of. It counts the weights alone (at"
    echo "depth d the cache is read too), and it is a reference, not a ceiling:"
    echo "above 100 %, decoding streamed faster than this one pass at the start"
    echo "of the run measured."
    echo
    echo "| threads | GB/s |"
    echo "|---:|---:|"
    awk '!/^#/ && NF == 2 { print "| " $1 " | " $2 " |" }' "$dir/bandwidth.txt"
    echo
fi

status=0
for set in "$@"; do
    f="$dir/$set.txt"
    if [ ! -f "$f" ] || ! grep -q '^|' "$f"; then
        echo "bench_tables: $f: no table (did the set $set run?)" >&2
        status=1
        continue
    fi
    echo "## $set"
    echo
    about "$set"
    echo
    # Command lines as code, tables as they are, one blank line between blocks.
    awk '
        /^\.\/[^ ]*(mg (bench|batched-bench)|decode_bound) / { sub(/^\.\/[^ ]*\//, ""); flush(); print "    " $0; code = 1; next }
        /^mg batched-bench: n_kv_max/          { flush(); sub(/^mg /, ""); print "`" $0 "`"; print ""; next }
        /^\|/                                  { if (code) { print ""; code = 0 } print; table = 1; next }
        /^ours and llama/                      { flush(); print $0; print ""; next }
        function flush() { if (table || code) print ""; table = 0; code = 0 }
        END { flush() }' "$f"
done
exit $status
