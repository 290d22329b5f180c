# grade_checks.awk - the checks of one exercise and what each scores (make grade).
#
#   awk -v points=20 -f grade_checks.awk TEST.c LOG [TSAN_LOG]
#
# TEST.c is the exercise's test: each `tcase_add_test(tc, NAME);` line is one
# check, worth the points a comment at its end gives (`// 6 points`, `// 0
# points: only a start`); the exercise's points left over are shared evenly
# by the checks that give none (the first ones get the remainder). LOG is the
# output of the test binary run with CK_VERBOSITY=verbose, one line per check
# (`FILE:LINE:P:TCASE:NAME:0: Passed`, F a failure, E an error); TSAN_LOG is
# the same run under ThreadSanitizer, where a check must pass too.
#
# Prints one line per check, in the test's order,
#
#   check NAME SCORE POINTS ok|fail MESSAGE     (tab-separated)
#
# then `total SCORE`. A check missing from a log failed (the binary stopped
# before it reported). Points that do not add up exit 2 with a message.

FNR == 1 { fileno++ }

fileno == 1 && /tcase_add_test[ \t]*\(/ {
    line = $0
    sub(/.*tcase_add_test[ \t]*\([^,]*,[ \t]*/, "", line)
    name = line
    sub(/[^A-Za-z0-9_].*/, "", name)
    n++
    names[n] = name
    declared[n] = -1
    if (match(line, /\/\/[ \t]*[0-9]+[ \t]+points?/)) {
        decl = substr(line, RSTART, RLENGTH)
        gsub(/[^0-9]/, "", decl)
        declared[n] = decl + 0
    }
    next
}

fileno >= 2 && match($0, /:[0-9]+:[PFE]:[^:]*:[A-Za-z0-9_]+:[0-9]+: /) {
    head = substr($0, RSTART, RLENGTH)
    msg  = substr($0, RSTART + RLENGTH)
    split(head, part, ":")   # "", line, status, tcase, name, iteration, " "
    if (fileno == 2) { plain[part[5]] = part[3]; plain_msg[part[5]] = msg }
    else             { tsan[part[5]] = part[3];  tsan_msg[part[5]] = msg }
}

END {
    if (n == 0) { print "grade_checks: no tcase_add_test line in " ARGV[1] > "/dev/stderr"; exit 2 }
    given = 0; open_n = 0
    for (i = 1; i <= n; i++) {
        if (declared[i] >= 0) given += declared[i]; else open_n++
    }
    left = points - given
    if (left < 0 || (open_n == 0 && left != 0)) {
        printf "grade_checks: the checks of %s give %d points, exercises.list %d\n", ARGV[1], given, points > "/dev/stderr"
        exit 2
    }
    share = open_n ? int(left / open_n) : 0; extra = open_n ? left % open_n : 0
    total = 0; k = 0
    for (i = 1; i <= n; i++) {
        worth = declared[i]
        if (worth < 0) { k++; worth = share + (k <= extra) }
        name = names[i]
        if (plain[name] != "P") {
            ok = "fail"
            msg = plain[name] == "" ? "no result: the test stopped before this check (see its log)" : plain_msg[name]
        } else if (fileno >= 3 && tsan[name] != "P") {
            ok = "fail"
            msg = "under ThreadSanitizer: " (tsan[name] == "" ? "no result: the test stopped before this check" : tsan_msg[name])
        } else {
            ok = "ok"; msg = ""
        }
        score = ok == "ok" ? worth : 0
        total += score
        printf "check\t%s\t%d\t%d\t%s\t%s\n", name, score, worth, ok, msg
    }
    printf "total\t%d\n", total
}
