#!/bin/sh
# tools/check_markers.sh FILE... - no chapter marker splits a function
# body. Lists every chapter marker line (//@+, //@-, //@old) and every #if 0
# that sits inside a function body in the given C files, and exits 1 if there
# is one. An earlier chapter's version of a function is a whole function of
# its own (an #if 0 //@old block at file scope, beside the current one, or a
# file in full/retired/), so a reader of full/ and of every chapter sees each
# function in one piece. Markers at file scope are fine, and so are markers
# in a file-scope initializer or a struct/enum definition (a chapter adding a
# table row or a field is not splitting code). A #if 0 inside another #if 0
# is reported too: a retired variant is one flat block.
#
# How it reads C: it tracks brace depth, skipping comments, string and
# character literals and preprocessor lines; a brace at file scope opens a
# function body when the text before it ends in ")". The text of a #if 0
# block is read as code (a retired function's body is a body too) and the
# depth is restored at its #endif, so an old variant cannot shift the rest.
#
# make test runs it on the decode path's files (the Makefile's
# DECODE_PATH_FILES).
set -eu

[ $# -gt 0 ] || { echo "usage: tools/check_markers.sh FILE..." >&2; exit 2; }

status=0
for f in "$@"; do
    found=$(awk -v file="$f" -v sq="'" '
        function report(msg) { printf "%s:%d: in %s(): %s\n", file, NR, fname, msg; n++ }
        # Strip comments and literals from the code part of a line, keeping
        # block-comment state across lines; then count braces.
        function scan(s,    i, c, d, out) {
            out = ""
            for (i = 1; i <= length(s); i++) {
                c = substr(s, i, 1); d = substr(s, i, 2)
                if (in_block) { if (d == "*/") { in_block = 0; i++ } ; continue }
                if (d == "/*") { in_block = 1; i++; continue }
                if (d == "//") break
                if (c == "\"" || c == sq) {            # a string or char literal
                    q = c
                    for (i++; i <= length(s); i++) {
                        c = substr(s, i, 1)
                        if (c == "\\") { i++; continue }
                        if (c == q) break
                    }
                    out = out " "
                    continue
                }
                out = out c
            }
            return out
        }
        function braces(code,    i, c) {
            for (i = 1; i <= length(code); i++) {
                c = substr(code, i, 1)
                if (c == "{") {
                    if (depth == 0) {
                        sig = sig " " substr(code, 1, i - 1)
                        t = sig; sub(/[ \t]+$/, "", t)
                        in_func = (t ~ /\)$/)
                        if (in_func) {
                            # the function name: the identifier before the first "(" of the declarator
                            t = sig; sub(/\(.*/, "", t); m = split(t, w, /[^A-Za-z0-9_]+/)
                            fname = w[m]; if (fname == "" && m > 1) fname = w[m - 1]
                        }
                    }
                    depth++
                } else if (c == "}") {
                    if (depth > 0) depth--
                    if (depth == 0) { sig = ""; code = substr(code, i + 1); i = 0; in_func = 0 }
                } else if (c == ";" && depth == 0) {
                    sig = ""; code = substr(code, i + 1); i = 0
                }
            }
            if (depth == 0) sig = sig " " code
        }
        BEGIN { depth = 0; in_block = 0; in_func = 0; sig = ""; n = 0; cont = 0; if0 = 0 }
        {
            line = $0
            if (cont) { cont = (line ~ /\\$/); next }      # a macro continued
            if (!in_block && line ~ /^[ \t]*#/) {
                cont = (line ~ /\\$/)
                if (line ~ /^[ \t]*#[ \t]*if[ \t]+0([^0-9A-Za-z_]|$)/) {
                    if (if0 > 0 && nest == 0) report("#if 0 inside a #if 0 block")
                    else if (depth > 0 && in_func) report("#if 0 inside the body: " line)
                    if (if0 == 0) { saved_depth = depth; saved_func = in_func; saved_sig = sig; saved_name = fname; nest = 0 }
                    if0++
                } else if (if0 > 0 && line ~ /^[ \t]*#[ \t]*if/) {
                    nest++
                } else if (if0 > 0 && line ~ /^[ \t]*#[ \t]*endif/) {
                    if (nest > 0) nest--
                    else {
                        if (saved_depth > 0 && saved_func && line ~ /\/\/@/) report("marker inside the body: " line)
                        if0--
                        if (if0 == 0) { depth = saved_depth; in_func = saved_func; sig = saved_sig; fname = saved_name }
                    }
                }
                next
            }
            if (!in_block && line ~ /^[ \t]*\/\/@(\+|-|old)/ && depth > 0 && in_func)
                report("marker inside the body: " line)
            braces(scan(line))
        }
        END { exit n > 0 }
    ' "$f")  || true
    if [ -n "$found" ]; then
        echo "$found"
        status=1
    fi
done
if [ $status -ne 0 ]; then
    echo "check_markers: a chapter marker or #if 0 splits a function body (tools/README.md: one source, ten snapshots)" >&2
fi
exit $status
