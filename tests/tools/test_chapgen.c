// test_chapgen.c - tests of tools/chapgen, the chapter generator.
//
// The tests run the chapgen binary the way make does and look at what it
// writes, prints and returns. The fixture (tests/tools/fixture/) holds a small
// full/ tree that uses every marker, its chapters.list (01 one, 02 two,
// 03 three), a chapters/ directory as it is before a run (hand-written files
// and stale generated ones), and expected/: what chapters/ must be after the
// run, written by hand.
//
// Build and run from the project root (make test-tools does the same). One
// command; -D_DEFAULT_SOURCE is for harness.c, which uses M_PI:
//
//   gcc -std=c11 -Wall -Wextra -Werror -o /tmp/chapgen tools/chapgen.c && gcc -std=c11 -Wall -Wextra -Werror -D_DEFAULT_SOURCE -DMG_TEST_ROOT="\"$PWD\"" -DCHAPGEN_BIN='"/tmp/chapgen"' -DCHAPGEN_FIXTURE="\"$PWD/tests/tools/fixture\"" -Itests tests/tools/test_chapgen.c tests/harness.c $(pkg-config --cflags --libs check) -lm -o /tmp/test_chapgen && /tmp/test_chapgen

#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700   // popen, mkdtemp, nftw, utimensat
#endif

#include "harness.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CHAPGEN_BIN
#error "CHAPGEN_BIN must name the chapgen binary"
#endif
#ifndef CHAPGEN_FIXTURE
#error "CHAPGEN_FIXTURE must name tests/tools/fixture"
#endif

#define FIXTURE(rel) CHAPGEN_FIXTURE "/" rel
#define LIST         FIXTURE("chapters.list")
#define OLD_TIME     1000000000   // 2001-09-09: a timestamp no run can produce

// ---------------------------------------------------------------------------
// Helpers

// Runs a shell command built like printf; returns its exit status and, in
// *output (the caller frees), what it printed on stdout and stderr.
static int run(char ** output, const char * fmt, ...) {
    char cmd[4096];
    va_list args;
    va_start(args, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, args);
    va_end(args);
    strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
    FILE * p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    size_t len = 0, cap = 4096;
    char * text = malloc(cap);
    for (size_t n; (n = fread(text + len, 1, cap - len - 1, p)) > 0;) {
        len += n;
        if (cap - len < 1024) text = realloc(text, cap *= 2);
    }
    text[len] = '\0';
    int status = pclose(p);
    if (output) *output = text;
    else        free(text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char * temp_dir(void) {
    const char * base = getenv("TMPDIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/test_chapgen.XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(path));
    return strdup(path);
}

static int remove_entry(const char * path, const struct stat * st, int flag, struct FTW * ftw) {
    (void) st, (void) flag, (void) ftw;
    remove(path);
    return 0;
}

static void remove_tree(char * dir) {
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static const char * join(const char * dir, const char * rel) {
    static char path[4][2048];
    static int next;
    char * p = path[next++ % 4];   // a few results may be alive at once
    snprintf(p, sizeof(path[0]), "%s/%s", dir, rel);
    return p;
}

// Writes text to path, creating the directories on the way.
static void write_text(const char * path, const char * text) {
    char dir[2048];
    snprintf(dir, sizeof(dir), "%s", path);
    for (char * slash = strchr(dir + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(dir, 0777);
        *slash = '/';
    }
    FILE * f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static char * read_text(const char * path) {
    return mg_test_read_file(path, NULL);
}

static bool exists(const char * path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static time_t mtime_of(const char * path) {
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_mtime;
}

static void set_old_mtime(const char * path) {
    struct timespec times[2] = { { OLD_TIME, 0 }, { OLD_TIME, 0 } };
    ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
}

// The regular files of a tree, as sorted relative paths (hidden ones too).
struct file_list {
    char * paths[256];
    int n;
};

static struct file_list * listing;
static size_t listing_base;

static int list_entry(const char * path, const struct stat * st, int flag, struct FTW * ftw) {
    (void) st, (void) ftw;
    if (flag == FTW_F && listing->n < 256) listing->paths[listing->n++] = strdup(path + listing_base + 1);
    return 0;
}

static int compare_paths(const void * a, const void * b) {
    return strcmp(*(char * const *) a, *(char * const *) b);
}

static void list_files(const char * dir, struct file_list * out) {
    out->n = 0;
    listing = out;
    listing_base = strlen(dir);
    nftw(dir, list_entry, 16, FTW_PHYS);
    qsort(out->paths, (size_t) out->n, sizeof(char *), compare_paths);
}

// Compares two trees file by file; returns the number of differences and
// describes them in report.
static int tree_diff(const char * tree_a, const char * tree_b, char * report, size_t size) {
    char a[1024], b[1024];   // the arguments may be join() results, which join() reuses
    snprintf(a, sizeof(a), "%s", tree_a);
    snprintf(b, sizeof(b), "%s", tree_b);
    struct file_list fa, fb;
    list_files(a, &fa);
    list_files(b, &fb);
    int differences = 0, i = 0, j = 0;
    report[0] = '\0';
    while (i < fa.n || j < fb.n) {
        int order = i == fa.n ? 1 : j == fb.n ? -1 : strcmp(fa.paths[i], fb.paths[j]);
        char line[2560] = "";
        if (order < 0) {
            snprintf(line, sizeof(line), "only in %s: %s\n", a, fa.paths[i++]);
        } else if (order > 0) {
            snprintf(line, sizeof(line), "only in %s: %s\n", b, fb.paths[j++]);
        } else {
            size_t na, nb;
            char * x = mg_test_read_file(join(a, fa.paths[i]), &na);
            char * y = mg_test_read_file(join(b, fb.paths[j]), &nb);
            if (!x || !y || na != nb || memcmp(x, y, na) != 0)
                snprintf(line, sizeof(line), "differs: %s\n", fa.paths[i]);
            free(x), free(y);
            i++, j++;
        }
        if (line[0]) {
            differences++;
            strncat(report, line, size - strlen(report) - 1);
        }
    }
    for (int k = 0; k < fa.n; k++) free(fa.paths[k]);
    for (int k = 0; k < fb.n; k++) free(fb.paths[k]);
    return differences;
}

// A copy of one of the fixture's chapter trees in a fresh temporary directory.
static char * copy_of(const char * fixture_dir) {
    char * dir = temp_dir();
    ck_assert_int_eq(run(NULL, "cp -R '%s' '%s/chapters'", fixture_dir, dir), 0);
    return dir;
}

static int chapgen(char ** output, const char * options, const char * chapters_dir) {
    return run(output, "'%s' %s --list '%s' '%s' '%s'", CHAPGEN_BIN, options, LIST, FIXTURE("full"),
               chapters_dir);
}

// ---------------------------------------------------------------------------
// Generating the fixture

START_TEST(test_generates_the_expected_tree) {
    char * dir = copy_of(FIXTURE("chapters"));
    char * out;
    int status = chapgen(&out, "", join(dir, "chapters"));
    ck_assert_msg(status == 0, "chapgen failed (%d): %s", status, out);
    char report[4096];
    int differences = tree_diff(join(dir, "chapters"), FIXTURE("expected"), report, sizeof(report));
    ck_assert_msg(differences == 0, "chapters/ differs from expected/:\n%s", report);
    ck_assert_ptr_nonnull(strstr(out, "01_one         4 written, 0 unchanged, 2 deleted"));
    free(out);
    remove_tree(dir);
}
END_TEST

START_TEST(test_second_run_changes_nothing) {
    char * dir = copy_of(FIXTURE("expected"));
    char * out;
    ck_assert_int_eq(chapgen(&out, "", join(dir, "chapters")), 0);
    ck_assert_ptr_null(strstr(out, "1 written"));
    ck_assert_ptr_nonnull(strstr(out, "03_three       0 written, 5 unchanged, 0 deleted"));
    char report[4096];
    ck_assert_msg(tree_diff(join(dir, "chapters"), FIXTURE("expected"), report, sizeof(report)) == 0,
                  "%s", report);
    free(out);
    remove_tree(dir);
}
END_TEST

START_TEST(test_unchanged_files_keep_their_mtime) {
    char * dir = copy_of(FIXTURE("expected"));
    char chapter[1024];
    snprintf(chapter, sizeof(chapter), "%s/chapters/02_two", dir);
    set_old_mtime(join(chapter, "tensor.c"));
    set_old_mtime(join(chapter, "README.md"));
    write_text(join(chapter, "arena.c"), "// Generated from full/arena.c by hand: out of date\n");
    set_old_mtime(join(chapter, "arena.c"));

    char * out;   // arena.c is not what chapgen wrote: only --force replaces it
    ck_assert_int_eq(chapgen(&out, "--force", join(dir, "chapters")), 0);
    ck_assert_ptr_nonnull(strstr(out, "02_two         1 written, 3 unchanged, 0 deleted"));
    ck_assert_int_eq(mtime_of(join(chapter, "tensor.c")), OLD_TIME);
    ck_assert_int_eq(mtime_of(join(chapter, "README.md")), OLD_TIME);
    ck_assert_int_ne(mtime_of(join(chapter, "arena.c")), OLD_TIME);
    char * arena = read_text(join(chapter, "arena.c"));
    char * want = read_text(FIXTURE("expected/02_two/arena.c"));
    ck_assert_str_eq(arena, want);
    free(arena), free(want), free(out);
    remove_tree(dir);
}
END_TEST

START_TEST(test_hand_written_files_untouched_stale_ones_deleted) {
    char * dir = copy_of(FIXTURE("chapters"));
    char chapters[1024];
    snprintf(chapters, sizeof(chapters), "%s/chapters", dir);
    // A directory with a hand-written file and a stale generated one: the
    // generated file goes, the directory stays.
    write_text(join(chapters, "02_two/sub/keep.txt"), "hand-written\n");
    write_text(join(chapters, "02_two/sub/old.c"),
               "// Generated from full/sub/old.c by tools/chapgen. In a class, edit this copy freely ...\n");
    set_old_mtime(join(chapters, "01_one/Makefile"));
    set_old_mtime(join(chapters, "02_two/notes.txt"));
    set_old_mtime(join(chapters, "03_three/README.md"));

    // old.c has the generated header, but 02_two/.chapgen has no record of
    // it: it may be someone's, so only --force deletes it.
    char * out;
    ck_assert_int_eq(chapgen(&out, "", chapters), 1);
    ck_assert_msg(strstr(out, "02_two/sub/old.c") && strstr(out, "not recorded in .chapgen"), "%s", out);
    ck_assert(exists(join(chapters, "02_two/sub/old.c")));
    ck_assert(exists(join(chapters, "01_one/stale.c")));   // nothing was written
    free(out);

    ck_assert_int_eq(chapgen(NULL, "--force", chapters), 0);
    ck_assert(!exists(join(chapters, "01_one/stale.c")));
    ck_assert(!exists(join(chapters, "01_one/gone/gone.h")));
    ck_assert_msg(!exists(join(chapters, "01_one/gone")), "the emptied directory should be removed");
    ck_assert(!exists(join(chapters, "02_two/sub/old.c")));
    ck_assert(exists(join(chapters, "02_two/sub/keep.txt")));
    ck_assert_int_eq(mtime_of(join(chapters, "01_one/Makefile")), OLD_TIME);
    ck_assert_int_eq(mtime_of(join(chapters, "02_two/notes.txt")), OLD_TIME);
    ck_assert_int_eq(mtime_of(join(chapters, "03_three/README.md")), OLD_TIME);
    char * notes = read_text(join(chapters, "02_two/notes.txt"));
    char * want = read_text(FIXTURE("chapters/02_two/notes.txt"));
    ck_assert_str_eq(notes, want);
    free(notes), free(want);
    remove_tree(dir);
}
END_TEST

START_TEST(test_snippets_are_filled_and_dedented) {
    char * dir = copy_of(FIXTURE("chapters"));
    ck_assert_int_eq(chapgen(NULL, "", join(dir, "chapters")), 0);
    char * readme = read_text(join(dir, "chapters/02_two/README.md"));
    ck_assert_ptr_null(strstr(readme, "stale text"));
    // The views block as chapter 02 has it: the nested chapter-03 check is not there.
    ck_assert_ptr_nonnull(strstr(readme, "```c\n// Views arrive in chapter 02.\n"
                                         "int tensor_view(int x) {\n    int y = x;\n    return y;\n}\n```\n"));
    // The better block sits 4 spaces deep in full/tensor.c; the snippet starts at the margin.
    ck_assert_ptr_nonnull(strstr(readme, "```c\nreturn n * (n + 1) / 2;\n```\n<!-- /snippet -->\n"));
    free(readme);
    remove_tree(dir);
}
END_TEST

// The Chinese lesson beside README.md has the same regions, filled the same way.
static const char * const zh_readme = "[English](README.md) | 中文\n\n# 第 02 章\n\n"
                                      "<!-- snippet tensor.c better -->\n```c\n过时的内容\n```\n<!-- /snippet -->\n";

START_TEST(test_zh_snippets_are_filled_too) {
    char * dir = copy_of(FIXTURE("chapters"));
    write_text(join(dir, "chapters/02_two/README.zh.md"), zh_readme);
    ck_assert_int_eq(chapgen(NULL, "", join(dir, "chapters")), 0);
    char * zh = read_text(join(dir, "chapters/02_two/README.zh.md"));
    ck_assert_ptr_null(strstr(zh, "过时的内容"));
    ck_assert_ptr_nonnull(strstr(zh, "# 第 02 章\n\n<!-- snippet tensor.c better -->\n"
                                     "```c\nreturn n * (n + 1) / 2;\n```\n<!-- /snippet -->\n"));
    free(zh);
    remove_tree(dir);
}
END_TEST

// ---------------------------------------------------------------------------
// --check

START_TEST(test_check_reports_fresh) {
    char * out;
    ck_assert_int_eq(chapgen(&out, "--check", FIXTURE("expected")), 0);
    ck_assert_ptr_nonnull(strstr(out, "chapgen: chapters are fresh (13 files)"));
    free(out);
}
END_TEST

// A check of a copy of expected/ after one change: it must fail, name the file,
// and leave the copy as it was.
static void check_finds(void (*change)(const char * chapters), const char * what, const char * file) {
    char * dir = copy_of(FIXTURE("expected"));
    char chapters[1024];
    snprintf(chapters, sizeof(chapters), "%s/chapters", dir);
    change(chapters);
    char after[4096];
    char * snapshot = temp_dir();
    ck_assert_int_eq(run(NULL, "cp -R '%s' '%s/copy'", chapters, snapshot), 0);

    char * out;
    ck_assert_int_eq(chapgen(&out, "--check", chapters), 1);
    char line[2048];
    snprintf(line, sizeof(line), "%s/%s", chapters, file);
    ck_assert_msg(strstr(out, what) && strstr(out, line), "expected '%s' and '%s' in:\n%s", what, line, out);
    ck_assert_ptr_nonnull(strstr(out, "chapgen: STALE: 1 file out of date"));
    ck_assert_ptr_nonnull(strstr(out, "run make chapters"));
    ck_assert_msg(tree_diff(chapters, join(snapshot, "copy"), after, sizeof(after)) == 0,
                  "--check changed chapters/:\n%s", after);
    free(out);
    remove_tree(snapshot);
    remove_tree(dir);
}

static void modify_tensor_c(const char * chapters) {
    write_text(join(chapters, "02_two/tensor.c"),
               "// Generated from full/tensor.c by tools/chapgen. In a class, edit this copy freely ...\n"
               "int edited_by_hand;\n");
}
static void delete_late_h(const char * chapters) { ck_assert_int_eq(unlink(join(chapters, "03_three/late.h")), 0); }
static void add_generated_file(const char * chapters) {
    write_text(join(chapters, "01_one/demos/extra.c"),
               "// Generated from full/demos/extra.c by tools/chapgen. In a class, edit this copy freely ...\n");
}
static void edit_snippet(const char * chapters) {
    char * readme = read_text(join(chapters, "02_two/README.md"));
    char * at = strstr(readme, "return n * (n + 1) / 2;");
    ck_assert_ptr_nonnull(at);
    at[0] = 'R';
    write_text(join(chapters, "02_two/README.md"), readme);
    free(readme);
}

static void add_stale_zh_readme(const char * chapters) { write_text(join(chapters, "02_two/README.zh.md"), zh_readme); }

START_TEST(test_check_finds_modified_file) { check_finds(modify_tensor_c, "edited", "02_two/tensor.c"); }
END_TEST
START_TEST(test_check_finds_missing_file) { check_finds(delete_late_h, "missing", "03_three/late.h"); }
END_TEST
START_TEST(test_check_finds_extra_file) { check_finds(add_generated_file, "extra", "01_one/demos/extra.c"); }
END_TEST
START_TEST(test_check_finds_stale_snippet) { check_finds(edit_snippet, "stale snippets", "02_two/README.md"); }
END_TEST
START_TEST(test_check_finds_stale_zh_snippet) {
    check_finds(add_stale_zh_readme, "stale snippets", "02_two/README.zh.md");
}
END_TEST

START_TEST(test_check_ignores_hand_written_files_and_cleans_up) {
    char * dir = copy_of(FIXTURE("expected"));
    write_text(join(dir, "chapters/01_one/exercise.c"), "// written by a learner\n");
    char * tmp = temp_dir();
    char * out;
    int status = run(&out, "TMPDIR='%s' '%s' --check --list '%s' '%s' '%s/chapters'", tmp, CHAPGEN_BIN, LIST,
                     FIXTURE("full"), dir);
    ck_assert_msg(status == 0, "%s", out);
    struct file_list left;
    list_files(tmp, &left);
    ck_assert_msg(left.n == 0, "--check left %d files in TMPDIR, e.g. %s", left.n, left.n ? left.paths[0] : "");
    ck_assert_msg(rmdir(tmp) == 0, "--check left a directory in TMPDIR");
    free(tmp), free(out);
    remove_tree(dir);
}
END_TEST

// ---------------------------------------------------------------------------
// A student's edits: make chapters never overwrites or deletes them unforced

// A copy of expected/ whose 02_two/tensor.c a student has edited.
static const char * const student_edit =
    "// Generated from full/tensor.c by tools/chapgen. In a class, edit this copy freely ...\n"
    "int tensor_sigmoid(int x) { return x; }   // exercise 1, half done\n";

static char * expected_with_student_edit(char chapters[1024]) {
    char * dir = copy_of(FIXTURE("expected"));
    snprintf(chapters, 1024, "%s/chapters", dir);
    write_text(join(chapters, "02_two/tensor.c"), student_edit);
    return dir;
}

START_TEST(test_edited_file_is_refused_and_kept) {
    char chapters[1024];
    char * dir = expected_with_student_edit(chapters);
    // Something else to do too: an untouched file gone missing, which a run
    // would write; it must not be written either (nothing is, on a refusal).
    ck_assert_int_eq(unlink(join(chapters, "03_three/late.h")), 0);
    char * snapshot = temp_dir();
    ck_assert_int_eq(run(NULL, "cp -R '%s' '%s/copy'", chapters, snapshot), 0);

    char * out;
    ck_assert_int_eq(chapgen(&out, "", chapters), 1);
    char line[2048];
    snprintf(line, sizeof(line), "%s/02_two/tensor.c", chapters);
    ck_assert_msg(strstr(out, line) && strstr(out, "(edited)"), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "refusing to overwrite or delete 1 file"));
    ck_assert_ptr_nonnull(strstr(out, "first: make exercise CHAPTER=02\n"));
    ck_assert_ptr_nonnull(strstr(out, "commit"));
    ck_assert_ptr_nonnull(strstr(out, "make chapters FORCE=1"));
    char report[4096];
    ck_assert_msg(tree_diff(chapters, join(snapshot, "copy"), report, sizeof(report)) == 0,
                  "a refused run changed chapters/:\n%s", report);
    char * kept = read_text(join(chapters, "02_two/tensor.c"));
    ck_assert_str_eq(kept, student_edit);
    free(kept), free(out);
    remove_tree(snapshot);
    remove_tree(dir);
}
END_TEST

START_TEST(test_force_overwrites_an_edit) {
    char chapters[1024];
    char * dir = expected_with_student_edit(chapters);
    char * out;
    ck_assert_int_eq(chapgen(&out, "--force", chapters), 0);
    ck_assert_msg(strstr(out, "--force: replaced or deleted 1 edited file"), "%s", out);
    char report[4096];
    ck_assert_msg(tree_diff(chapters, FIXTURE("expected"), report, sizeof(report)) == 0, "%s", report);
    free(out);
    // And the forced file is chapgen's again: the next run has nothing to refuse.
    ck_assert_int_eq(chapgen(NULL, "", chapters), 0);
    remove_tree(dir);
}
END_TEST

// A copy of the fixture's full/ in dir/full, with one line added at the end
// of one file: full/ as it was when chapters/ was last generated.
static void old_full(const char * dir, const char * file, const char * line) {
    ck_assert_int_eq(run(NULL, "cp -R '%s' '%s/full'", FIXTURE("full"), dir), 0);
    char * text = read_text(join(dir, file));
    char * longer = malloc(strlen(text) + strlen(line) + 1);
    strcpy(longer, text);
    strcat(longer, line);
    write_text(join(dir, file), longer);
    free(longer), free(text);
}

static int chapgen_from(char ** output, const char * options, const char * full, const char * chapters_dir) {
    return run(output, "'%s' %s --list '%s' '%s' '%s'", CHAPGEN_BIN, options, LIST, full, chapters_dir);
}

START_TEST(test_untouched_stale_file_is_regenerated) {
    char * dir = temp_dir();
    old_full(dir, "full/arena.c", "int arena_old;\n");
    ck_assert_int_eq(chapgen_from(NULL, "", join(dir, "full"), join(dir, "chapters")), 0);
    char * before = read_text(join(dir, "chapters/02_two/arena.c"));
    ck_assert_ptr_nonnull(strstr(before, "int arena_old;"));
    free(before);

    // full/ moved on; nobody touched the chapters: they follow without --force.
    char * out;
    ck_assert_int_eq(chapgen_from(&out, "", FIXTURE("full"), join(dir, "chapters")), 0);
    ck_assert_msg(strstr(out, "02_two         1 written, 3 unchanged, 0 deleted"), "%s", out);
    char * after = read_text(join(dir, "chapters/02_two/arena.c"));
    char * want = read_text(FIXTURE("expected/02_two/arena.c"));
    ck_assert_str_eq(after, want);
    free(after), free(want), free(out);
    remove_tree(dir);
}
END_TEST

START_TEST(test_deleted_upstream_file_with_edits_is_kept) {
    char * dir = temp_dir();
    old_full(dir, "full/tensor.h", "");
    write_text(join(dir, "full/extra.c"), "//@file 01\nint extra;\n");
    ck_assert_int_eq(chapgen_from(NULL, "", join(dir, "full"), join(dir, "chapters")), 0);
    const char * edited = "// Generated from full/extra.c by tools/chapgen, then edited\nint extra = 42;\n";
    write_text(join(dir, "chapters/01_one/extra.c"), edited);
    char * untouched = strdup(join(dir, "chapters/02_two/extra.c"));
    ck_assert(exists(untouched));

    // full/extra.c is gone: the untouched copies may go, the edited one may not.
    char * out;
    ck_assert_int_eq(chapgen_from(&out, "", FIXTURE("full"), join(dir, "chapters")), 1);
    ck_assert_msg(strstr(out, "01_one/extra.c") && strstr(out, "edited, no longer generated"), "%s", out);
    ck_assert_msg(!strstr(out, "02_two/extra.c"), "only the edited file is listed:\n%s", out);
    char * kept = read_text(join(dir, "chapters/01_one/extra.c"));
    ck_assert_str_eq(kept, edited);
    ck_assert(exists(untouched));   // a refusal writes and deletes nothing
    free(kept), free(out);

    ck_assert_int_eq(chapgen_from(NULL, "--force", FIXTURE("full"), join(dir, "chapters")), 0);
    ck_assert(!exists(join(dir, "chapters/01_one/extra.c")));
    ck_assert(!exists(untouched));
    free(untouched);
    remove_tree(dir);
}
END_TEST

START_TEST(test_check_tells_edited_from_stale) {
    char * dir = temp_dir();
    old_full(dir, "full/arena.c", "int arena_old;\n");
    ck_assert_int_eq(chapgen_from(NULL, "", join(dir, "full"), join(dir, "chapters")), 0);
    write_text(join(dir, "chapters/01_one/tensor.c"), student_edit);
    char * out;
    ck_assert_int_eq(chapgen(&out, "--check", join(dir, "chapters")), 1);
    ck_assert_msg(strstr(out, "stale             ") && strstr(out, "02_two/arena.c"), "%s", out);
    ck_assert_msg(strstr(out, "edited            ") && strstr(out, "01_one/tensor.c"), "%s", out);
    ck_assert_msg(strstr(out, "1 of them edited by hand") && strstr(out, "In a class that is"), "%s", out);
    ck_assert_msg(strstr(out, "stale record") && strstr(out, "02_two/.chapgen"), "%s", out);
    free(out);
    remove_tree(dir);
}
END_TEST

// ---------------------------------------------------------------------------
// Marker rules on small made-up trees

// A tree with chapters 01 a, 02 b, 03 c and one source file; returns the
// directory, to be removed by the caller.
static char * tree_with(const char * rel, const char * text) {
    char * dir = temp_dir();
    write_text(join(dir, "chapters.list"), "01 a\n02 b\n03 c\n");
    char path[1024];
    snprintf(path, sizeof(path), "%s/full/%s", dir, rel);
    write_text(path, text);
    return dir;
}

static int chapgen_tree(char ** output, const char * dir) {
    return run(output, "'%s' --list '%s/chapters.list' '%s/full' '%s/chapters'", CHAPGEN_BIN, dir, dir, dir);
}

// ---------------------------------------------------------------------------
// handout.list: what a chapter gets besides its code, so it works alone

// A tree with chapters 01 a, 02 b, 03 c, one source, and files to copy.
static char * handout_tree(const char * list) {
    char * dir = tree_with("x.c", "//@file 01\nint x;\n");
    write_text(join(dir, "handout.list"), list);
    write_text(join(dir, "tools/rules.mk"), "# the build rules\n");
    write_text(join(dir, "tests/01_a/test_a.c"), "int test_a;\n");
    write_text(join(dir, "tests/02_b/test_b.c"), "int test_b;\n");
    write_text(join(dir, "tests/02_b/.hidden"), "not copied\n");
    write_text(join(dir, "tests/03_c/test_c.c"), "int test_c;\n");
    write_text(join(dir, "tests/full/test_full.c"), "int test_full;\n");
    write_text(join(dir, "exercises/02_b/test_ex.c"), "int test_ex;\n");
    write_text(join(dir, "exercises/solutions/02_b/1.patch"), "the answer\n");
    write_text(join(dir, "data/blob.bin"), "");   // makes data/
    FILE * f = fopen(join(dir, "data/blob.bin"), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 1000; i++) fputc(i % 7 == 0 ? 0 : i & 0xff, f);   // NUL bytes too
    fclose(f);
    return dir;
}

static const char * const handout_list =
    "# what a chapter gets\n"
    "tools/rules.mk       01\n"
    "tools/grade.mk       01 optional   # not there: fine\n"
    "tests/{upto}         01\n"
    "exercises/{chapter}  01 optional\n"
    "data/blob.bin        03\n";

START_TEST(test_handout_copies_land_in_each_chapter) {
    char * dir = handout_tree(handout_list);
    char * out;
    ck_assert_msg(chapgen_tree(&out, dir) == 0, "%s", out);
    free(out);
    const char * ch = join(dir, "chapters");
    char base[1024];
    snprintf(base, sizeof(base), "%s", ch);
    ck_assert(exists(join(base, "01_a/tools/rules.mk")));
    ck_assert(exists(join(base, "01_a/tests/01_a/test_a.c")));
    ck_assert(!exists(join(base, "01_a/tests/02_b")));
    ck_assert(!exists(join(base, "01_a/exercises")));
    ck_assert(exists(join(base, "02_b/tests/01_a/test_a.c")));
    ck_assert(exists(join(base, "02_b/tests/02_b/test_b.c")));
    ck_assert(!exists(join(base, "02_b/tests/02_b/.hidden")));
    ck_assert(!exists(join(base, "02_b/tests/03_c")));
    ck_assert(exists(join(base, "02_b/exercises/02_b/test_ex.c")));
    ck_assert(!exists(join(base, "02_b/exercises/solutions")));
    ck_assert(!exists(join(base, "03_c/exercises")));
    ck_assert(exists(join(base, "03_c/tests/03_c/test_c.c")));
    ck_assert(!exists(join(base, "03_c/tests/full")));
    ck_assert(!exists(join(base, "02_b/data")));
    size_t n_src, n_copy;
    char * src = mg_test_read_file(join(dir, "data/blob.bin"), &n_src);
    char * copy = mg_test_read_file(join(base, "03_c/data/blob.bin"), &n_copy);
    ck_assert(n_src == 1000 && n_copy == n_src && memcmp(src, copy, n_src) == 0);
    free(src), free(copy);
    // Copies are recorded like the generated files, and checked like them.
    char * manifest = read_text(join(base, "02_b/.chapgen"));
    ck_assert_ptr_nonnull(strstr(manifest, " tests/02_b/test_b.c\n"));
    ck_assert_ptr_nonnull(strstr(manifest, " exercises/02_b/test_ex.c\n"));
    ck_assert_ptr_nonnull(strstr(manifest, " x.c\n"));
    free(manifest);
    ck_assert_int_eq(run(&out, "'%s' --check --list '%s/chapters.list' '%s/full' '%s'", CHAPGEN_BIN, dir, dir, base), 0);
    free(out);
    remove_tree(dir);
}
END_TEST

START_TEST(test_handout_copies_follow_their_source) {
    char * dir = handout_tree(handout_list);
    ck_assert_int_eq(chapgen_tree(NULL, dir), 0);
    write_text(join(dir, "tests/01_a/test_a.c"), "int test_a_changed;\n");
    char * out;
    ck_assert_int_eq(run(&out, "'%s' --check --list '%s/chapters.list' '%s/full' '%s/chapters'", CHAPGEN_BIN,
                         dir, dir, dir), 1);
    ck_assert_msg(strstr(out, "01_a/tests/01_a/test_a.c") && strstr(out, "03_c/tests/01_a/test_a.c") &&
                  strstr(out, "stale "), "%s", out);
    free(out);
    ck_assert_int_eq(chapgen_tree(NULL, dir), 0);   // untouched copies: no --force needed
    char * now = read_text(join(dir, "chapters/02_b/tests/01_a/test_a.c"));
    ck_assert_str_eq(now, "int test_a_changed;\n");
    free(now);
    remove_tree(dir);
}
END_TEST

START_TEST(test_handout_errors) {
    static const struct {
        const char * list, * says;
    } cases[] = {
        { "tools/missing.mk 01\n", "missing.mk: no such file" },
        { "exercises/solutions 02\n", "exercises/solutions/ never goes into a chapter" },
        { "exercises/{chapter}/../solutions 01\n", "stay inside it" },
        { "tools/rules.mk\n", "expected 'PATH CHAPTERS [optional]'" },
        { "tools/rules.mk 07\n", "chapter 07 is not in" },
        { "x.c 01\n", "x.c is in the chapter already" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char * dir = handout_tree(cases[i].list);
        write_text(join(dir, "x.c"), "a root file that would land on the source\n");
        char * out;
        ck_assert_int_eq(chapgen_tree(&out, dir), 2);
        char where[1024];
        snprintf(where, sizeof(where), "%s/handout.list:1: ", dir);
        ck_assert_msg(strstr(out, where) && strstr(out, cases[i].says), "case %zu: expected '%s' ... '%s', got:\n%s",
                      i, where, cases[i].says, out);
        ck_assert_msg(!exists(join(dir, "chapters")), "case %zu: wrote chapters/ despite the error", i);
        free(out);
        remove_tree(dir);
    }
}
END_TEST

START_TEST(test_plus_inside_old_ends_with_it) {
    char * dir = tree_with("x.c", "//@file 01\n"
                                  "#if 0 //@old 01..02 naive\n"
                                  "int naive;\n"
                                  "//@+ 02 tweak\n"
                                  "int tweak;\n"
                                  "//@- 02 tweak\n"
                                  "#endif //@old naive\n"
                                  "int always;\n");
    char * out;
    ck_assert_msg(chapgen_tree(&out, dir) == 0, "%s", out);
    char * a = read_text(join(dir, "chapters/01_a/x.c"));
    char * b = read_text(join(dir, "chapters/02_b/x.c"));
    char * c = read_text(join(dir, "chapters/03_c/x.c"));
    ck_assert_ptr_nonnull(strstr(a, ".\nint naive;\nint always;\n"));
    ck_assert_ptr_nonnull(strstr(b, ".\nint naive;\nint tweak;\nint always;\n"));
    ck_assert_ptr_nonnull(strstr(c, ".\nint always;\n"));
    ck_assert_ptr_null(strstr(c, "tweak"));
    free(a), free(b), free(c), free(out);
    remove_tree(dir);
}
END_TEST

struct bad_case {
    const char * file;    // below full/
    const char * text;
    const char * where;   // the file:line the message must start with
    const char * says;    // and a phrase it must contain
};

static const struct bad_case bad_cases[] = {
    { "bad.c", "//@file 01\n//@+ 02 alpha\nint a;\n//@- 02 beta\n", "full/bad.c:4: ", "does not close" },
    { "bad.c", "//@file 01\n//@+ 02 alpha\nint a;\n//@- 03 alpha\n", "full/bad.c:4: ", "expected '//@- 02 alpha'" },
    { "bad.c", "//@file 01\n#if 0 //@old 01..01 a\n//@- 01 a\n", "full/bad.c:3: ", "expected '#endif //@old a'" },
    { "bad.c", "//@file 01\nint a;\n//@- 02 alpha\n", "full/bad.c:3: ", "no block is open" },
    { "bad.c", "//@file 01\nint a;\n//@+ 02 alpha\nint b;\n", "full/bad.c:3: ", "never closed" },
    { "bad.c", "//@file 01\n//@+ 03 outer\n//@+ 02 inner\n//@- 02 inner\n//@- 03 outer\n",
      "full/bad.c:3: ", "does not narrow" },
    { "bad.c", "//@file 01\n#if 0 //@old 01..02 old\n//@+ 03 later\n//@- 03 later\n#endif //@old old\n",
      "full/bad.c:3: ", "does not narrow" },
    { "bad.c", "//@file 01\n#if 0 //@old 01..02 old\n//@+ full later\n//@- full later\n#endif //@old old\n",
      "full/bad.c:3: ", "does not narrow" },
    { "bad.c", "//@file 01\n#if 0 //@old 01..01 a\n#if 0 //@old 01..02 b\n#endif //@old b\n#endif //@old a\n",
      "full/bad.c:3: ", "does not narrow the enclosing '//@old 01..01 a' (line 2)" },
    { "bad.c", "//@file 02\nint a;\n//@+ 01 early\n//@- 01 early\n", "full/bad.c:3: ", "outside the file" },
    { "bad.c", "//@file 01\n//@+ 02 same\n//@+ 03 same\n//@- 03 same\n//@- 02 same\n",
      "full/bad.c:3: ", "already open" },
    { "bad.c", "//@file 01\n\n//@+ 07 alpha\n//@- 07 alpha\n", "full/bad.c:3: ", "not in" },
    { "bad.c", "//@file 04\n", "full/bad.c:1: ", "not in" },
    { "bad.c", "//@file 01\n//@+ 02\n", "full/bad.c:2: ", "malformed marker" },
    { "bad.c", "//@file 01\n  //@plus 02 x\n", "full/bad.c:2: ", "malformed marker" },
    { "bad.c", "//@file 01\n//@+ 02 x // why\n//@- 02 x\n", "full/bad.c:2: ", "malformed marker" },
    { "bad.c", "//@file 01\n#if 0 //@old 01-02 x\n", "full/bad.c:2: ", "not a range" },
    { "bad.c", "//@file 01\n#if 0 //@old 02..01 x\n", "full/bad.c:2: ", "ends before it starts" },
    { "bad.c", "//@file 01\n//@+ 2 x\n", "full/bad.c:2: ", "two digits" },
    { "bad.c", "//@file 01\n#endif //@old\n", "full/bad.c:2: ", "malformed marker" },
    { "bad.c", "//@file 01\nint a;\n//@file 02\n", "full/bad.c:3: ", "first line" },
    { "bad.c", "//@+ 02 x\n//@- 02 x\n", "full/bad.c:1: ", "must start with '//@file'" },
    { "bad.c", "//@file 01..02\n", "full/bad.c:1: ", "belongs in full/retired/" },
    { "retired/old.c", "//@file 01\n", "full/retired/old.c:1: ", "needs a last chapter" },
    { "retired/old.c", "//@file full\n", "full/retired/old.c:1: ", "needs a last chapter" },
};

START_TEST(test_bad_input_is_an_error_at_file_line) {
    const struct bad_case * bad = &bad_cases[_i];
    char * dir = tree_with(bad->file, bad->text);
    char * out;
    int status = chapgen_tree(&out, dir);
    ck_assert_msg(status == 2, "case %d: status %d, output:\n%s", _i, status, out);
    char where[1024];
    snprintf(where, sizeof(where), "%s/%s", dir, bad->where);
    ck_assert_msg(strncmp(out, where, strlen(where)) == 0 && strstr(out, bad->says),
                  "case %d: expected '%s' ... '%s', got:\n%s", _i, where, bad->says, out);
    ck_assert_msg(!exists(join(dir, "chapters")), "case %d: wrote chapters/ despite the error", _i);
    free(out);
    remove_tree(dir);
}
END_TEST

START_TEST(test_two_files_landing_together_is_an_error) {
    char * dir = tree_with("x.c", "//@file 02\n");
    write_text(join(dir, "full/retired/x.c"), "//@file 01..02\n");
    char * out;
    ck_assert_int_eq(chapgen_tree(&out, dir), 2);
    ck_assert_msg(strstr(out, "full/x.c:1: lands as x.c in chapter 02"), "%s", out);
    free(out);
    remove_tree(dir);
}
END_TEST

START_TEST(test_snippet_errors_name_the_readme_line) {
    static const struct {
        const char * snippet, * says;
    } cases[] = {
        { "<!-- snippet x.c views -->", "no block 'views' in chapter 01" },   // views comes in 02
        { "<!-- snippet y.c views -->", "chapter 01 has no file y.c" },
        { "<!-- snippet x.c -->", "expected '<!-- snippet FILE TAG -->'" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char * dir = tree_with("x.c", "//@file 01\nint x;\n//@+ 02 views\nint v;\n//@- 02 views\n");
        char readme[512];
        snprintf(readme, sizeof(readme), "# one\n\n%s\n```c\n```\n<!-- /snippet -->\n", cases[i].snippet);
        write_text(join(dir, "chapters/01_a/README.md"), readme);
        char * out;
        ck_assert_int_eq(chapgen_tree(&out, dir), 2);
        char where[1024];
        snprintf(where, sizeof(where), "%s/chapters/01_a/README.md:3: ", dir);
        ck_assert_msg(strstr(out, where) && strstr(out, cases[i].says), "expected '%s' ... '%s', got:\n%s",
                      where, cases[i].says, out);
        char * after = read_text(join(dir, "chapters/01_a/README.md"));
        ck_assert_str_eq(after, readme);
        free(after), free(out);
        remove_tree(dir);
    }
}
END_TEST

START_TEST(test_usage_errors) {
    char * out;
    ck_assert_int_eq(run(&out, "'%s' --list '%s' '%s'", CHAPGEN_BIN, LIST, FIXTURE("full")), 2);
    ck_assert_ptr_nonnull(strstr(out, "usage: chapgen"));
    free(out);
    ck_assert_int_eq(run(&out, "'%s' --list /nonexistent/chapters.list full chapters", CHAPGEN_BIN), 2);
    ck_assert_ptr_nonnull(strstr(out, "/nonexistent/chapters.list"));
    free(out);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("chapgen");
    MG_TCASE(s, "generate", test_generates_the_expected_tree, test_second_run_changes_nothing,
                test_unchanged_files_keep_their_mtime, test_hand_written_files_untouched_stale_ones_deleted,
                test_snippets_are_filled_and_dedented, test_zh_snippets_are_filled_too);

    MG_TCASE(s, "check", test_check_reports_fresh, test_check_finds_modified_file, test_check_finds_missing_file,
                test_check_finds_extra_file, test_check_finds_stale_snippet, test_check_finds_stale_zh_snippet,
                test_check_ignores_hand_written_files_and_cleans_up);

    MG_TCASE(s, "workspace", test_edited_file_is_refused_and_kept, test_force_overwrites_an_edit,
                test_untouched_stale_file_is_regenerated, test_deleted_upstream_file_with_edits_is_kept,
                test_check_tells_edited_from_stale);

    MG_TCASE(s, "handout", test_handout_copies_land_in_each_chapter, test_handout_copies_follow_their_source,
                test_handout_errors);

    TCase * rules = tcase_create("rules");
    tcase_add_test(rules, test_plus_inside_old_ends_with_it);
    tcase_add_loop_test(rules, test_bad_input_is_an_error_at_file_line, 0,
                        (int) (sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(rules, test_two_files_landing_together_is_an_error);
    tcase_add_test(rules, test_snippet_errors_name_the_readme_line);
    tcase_add_test(rules, test_usage_errors);
    suite_add_tcase(s, rules);
    return s;
}
