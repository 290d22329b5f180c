// test_readme_check.c - tests of tools/readme_check: demo excerpts, numbers in
// prose (<!-- numbers ... -->), the hint after an exercise, and --parity (a
// Chinese README.zh.md keeps every section, snippet, excerpt and numbers line
// of its README.md).
//
// Each test writes a README and a demo output into a temporary directory and
// runs the readme_check binary on them the way a chapter's make test does.
// Built and run by the top-level make test-tools.
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700   // popen, mkdtemp, nftw
#endif

#include "harness.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#ifndef README_CHECK_BIN
#error "README_CHECK_BIN must name the readme_check binary"
#endif

static char dir[1024];

static void setup(void) {
    const char * base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/test_readme_check.XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static int remove_entry(const char * path, const struct stat * st, int flag, struct FTW * ftw) {
    (void) st, (void) flag, (void) ftw;
    remove(path);
    return 0;
}

static void teardown(void) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void write_file(const char * name, const char * text) {
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE * f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

// Runs readme_check README.md demo.out plus extra arguments; returns its exit
// status and (to free) what it printed.
static int check(char ** output, const char * extra) {
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' README.md demo.out %s 2>&1", dir, README_CHECK_BIN, extra);
    FILE * p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t len = 0, cap = 1 << 16;
    char * text = malloc(cap);
    len = fread(text, 1, cap - 1, p);
    text[len] = '\0';
    int status = pclose(p);
    *output = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char * const excerpt = "<!-- demo-output -->\n```text\npeak 27312 bytes\n```\n<!-- /demo-output -->\n";

static void readme_with(const char * prose) {
    char text[4096];
    snprintf(text, sizeof(text), "# A chapter\n\n%s\n%s", prose, excerpt);
    write_file("README.md", text);
}

START_TEST(test_excerpt_and_numbers_match) {
    write_file("demo.out", "x\npeak 27312 bytes\n160 results of 150192 bytes\n");
    readme_with("<!-- numbers 160 150,192 -->\nThe graph has 160 results\nof 150,192 bytes.\n");
    char * out;
    ck_assert_int_eq(check(&out, ""), 0);
    ck_assert_msg(strstr(out, "so do 2 number(s) in the prose"), "%s", out);
    free(out);
}
END_TEST

START_TEST(test_a_number_the_demo_does_not_print) {
    write_file("demo.out", "peak 27312 bytes\n160 results of 150192 bytes\n");
    readme_with("<!-- numbers 179,760 -->\nThey add up to 179,760 bytes.\n");
    char * out;
    ck_assert_int_eq(check(&out, ""), 1);
    ck_assert_msg(strstr(out, "README.md:3: the paragraph says 179,760, but the demo does not print it"), "%s", out);
    free(out);
}
END_TEST

START_TEST(test_a_number_the_paragraph_does_not_say) {
    write_file("demo.out", "peak 27312 bytes\n");
    // The prose changed, the marker did not: the marker must follow the prose.
    readme_with("<!-- numbers 27,312 -->\nThey fit in 28,208.\n");
    char * out;
    ck_assert_int_eq(check(&out, ""), 1);
    ck_assert_msg(strstr(out, "27,312 is listed, but the paragraph below does not say it"), "%s", out);
    free(out);
}
END_TEST

START_TEST(test_numbers_are_whole) {
    // 2,731 is in neither 27312 nor Q8_0-like names; 0 is not the 0 of Q8_0.
    write_file("demo.out", "peak 27312 bytes in Q8_0\n");
    readme_with("<!-- numbers 2,731 -->\nSome 2,731 bytes.\n");
    char * out;
    ck_assert_int_eq(check(&out, ""), 1);
    free(out);
    readme_with("<!-- numbers 0 -->\nA 0 here.\n");
    ck_assert_int_eq(check(&out, ""), 1);
    free(out);
    // The paragraph ends at a blank line: a number after it does not count.
    write_file("demo.out", "peak 27312 bytes\n7\n");
    readme_with("<!-- numbers 7 -->\nNo seven here.\n\nA 7 in the next paragraph.\n");
    ck_assert_int_eq(check(&out, ""), 1);
    free(out);
}
END_TEST

START_TEST(test_numbers_from_another_chapter) {
    write_file("demo.out", "peak 27312 bytes\n");
    write_file("other.out", "[alloc] peak 27312 bytes for 160 results of 150192 bytes\n");
    readme_with("<!-- numbers 160 150,192 from 09_inference alloc -->\nChapter 09: 160 nodes, 150,192 bytes.\n");
    char * out;
    // Alone, the chapter cannot check it, and says so.
    ck_assert_int_eq(check(&out, ""), 0);
    ck_assert_msg(strstr(out, "1 paragraph(s) quoting another chapter's demo"), "%s", out);
    free(out);
    ck_assert_int_eq(check(&out, "--from 09_inference alloc other.out"), 0);
    ck_assert_msg(strstr(out, "so do 2 number(s)"), "%s", out);
    free(out);
    // Another trace is another output: not this one.
    ck_assert_int_eq(check(&out, "--from 09_inference infer other.out"), 0);
    ck_assert_msg(strstr(out, "quoting another chapter"), "%s", out);
    free(out);
    write_file("other.out", "[alloc] peak 28208 bytes for 160 results of 179760 bytes\n");
    ck_assert_int_eq(check(&out, "--from 09_inference alloc other.out"), 1);
    ck_assert_msg(strstr(out, "says 150,192, but the demo of 09_inference (MG_TRACE=alloc) does not print it"), "%s",
                  out);
    free(out);
}
END_TEST

static uint64_t fnv1a(const char * s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char) *s;
        h *= 0x100000001b3ull;
    }
    return h;
}

START_TEST(test_an_edited_chapter_is_told_a_mismatch_is_expected) {
    const char * generated = "// Generated from full/ops.c by tools/chapgen.\nint ops;\n";
    char manifest[256];
    snprintf(manifest, sizeof(manifest), "# manifest\n%016llx ops.c\n", (unsigned long long) fnv1a(generated));
    write_file(".chapgen", manifest);
    write_file("ops.c", generated);
    write_file("demo.out", "peak 9999 bytes\n");
    readme_with("");
    char * out;
    ck_assert_int_eq(check(&out, ""), 1);   // untouched: a real mismatch, no excuse offered
    ck_assert_msg(strstr(out, "not in the demo's output") && !strstr(out, "expected"), "%s", out);
    free(out);
    write_file("ops.c", "// Generated from full/ops.c by tools/chapgen.\nint ops, sigmoid;\n");
    ck_assert_int_eq(check(&out, ""), 1);
    ck_assert_msg(strstr(out, "1 file of this chapter changed since make chapters wrote it (ops.c)") &&
                  strstr(out, "mismatch is then") && strstr(out, "expected"), "%s", out);
    free(out);
}
END_TEST

// ---------------------------------------------------------------------------
// --parity

// An English lesson with one of each item, and its complete Chinese twin.
static const char * const en_lesson =
    "English | [中文](README.zh.md)\n\n# Chapter 05: the graph allocator\n\n## The problem\n\nProse.\n\n"
    "```c\n# not a heading: inside a fence\n```\n\n"
    "<!-- snippet galloc.c reuse-parent -->\n```c\nint x;\n```\n<!-- /snippet -->\n\n"
    "### Planning\n\n<!-- numbers 160 27,312 -->\nThe graph has 160 nodes in 27,312 bytes.\n\n"
    "## What the demo prints\n\n"
    "<!-- demo-output -->\n```text\npeak 27312 bytes\n```\n<!-- /demo-output -->\n";
static const char * const zh_lesson =
    "[English](README.md) | 中文\n\n# 第 05 章：图分配器\n\n## 问题\n\n正文。\n\n"
    "<!-- snippet galloc.c reuse-parent -->\n```c\nint x;\n```\n<!-- /snippet -->\n\n"
    "### 规划\n\n<!-- numbers 160 27,312 -->\n这个计算图有 160 个节点，放进 27,312 字节。\n\n"
    "## demo 的输出\n\n"
    "<!-- demo-output -->\n```text\npeak 27312 bytes\n```\n<!-- /demo-output -->\n";

static int parity(char ** output) {
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' --parity README.md README.zh.md 2>&1", dir, README_CHECK_BIN);
    FILE * p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16;
    char * text = malloc(cap);
    size_t len = fread(text, 1, cap - 1, p);
    text[len] = '\0';
    int status = pclose(p);
    *output = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The Chinese lesson with `from` replaced by `to` (which must be there).
static void zh_lesson_with(const char * from, const char * to) {
    const char * at = strstr(zh_lesson, from);
    ck_assert_msg(at != NULL, "the test's zh lesson has no '%s'", from);
    char text[4096];
    snprintf(text, sizeof(text), "%.*s%s%s", (int) (at - zh_lesson), zh_lesson, to, at + strlen(from));
    write_file("README.zh.md", text);
}

// Refused, with a message that has `says` in it.
static void refused(const char * says) {
    char * out;
    ck_assert_int_eq(parity(&out), 1);
    ck_assert_msg(strstr(out, says), "expected '%s' in:\n%s", says, out);
    free(out);
}

START_TEST(test_parity_a_complete_twin_passes) {
    write_file("README.md", en_lesson);
    write_file("README.zh.md", zh_lesson);
    char * out;
    ck_assert_int_eq(parity(&out), 0);
    ck_assert_msg(strstr(out, "README.zh.md: in step with README.md: 4 headings, 1 snippet region(s), "
                              "1 demo excerpt(s), 1 numbers line(s)"), "%s", out);
    free(out);
}
END_TEST

START_TEST(test_parity_a_missing_snippet_is_refused) {
    write_file("README.md", en_lesson);
    zh_lesson_with("<!-- snippet galloc.c reuse-parent -->\n```c\nint x;\n```\n<!-- /snippet -->\n", "");
    refused("README.zh.md: lacks the snippet region <!-- snippet galloc.c reuse-parent --> (README.md:13)");
    // Another tag is not the same region.
    zh_lesson_with("reuse-parent", "reuse-other");
    refused("README.zh.md: lacks the snippet region <!-- snippet galloc.c reuse-parent --> (README.md:13)");
}
END_TEST

START_TEST(test_parity_a_missing_or_changed_demo_block_is_refused) {
    write_file("README.md", en_lesson);
    zh_lesson_with("<!-- demo-output -->\n```text\npeak 27312 bytes\n```\n<!-- /demo-output -->\n", "");
    refused("README.zh.md: lacks the demo-output block that starts \"peak 27312 bytes\" (README.md:26)");
    // A demo's words are quoted unchanged: a translated excerpt is not the same block.
    zh_lesson_with("```text\npeak 27312 bytes\n", "```text\n峰值 27312 字节\n");
    refused("README.zh.md: lacks the demo-output block that starts \"peak 27312 bytes\" (README.md:26)");
}
END_TEST

START_TEST(test_parity_a_missing_heading_is_refused) {
    write_file("README.md", en_lesson);
    zh_lesson_with("### 规划\n\n", "");
    refused("README.zh.md: lacks a level-3 heading (### Planning) (README.md:19)");
    // A heading of another level is not the same section either.
    zh_lesson_with("### 规划", "## 规划");
    refused("README.zh.md: lacks a level-3 heading (### Planning) (README.md:19)");
    refused("README.zh.md:15: a level-2 heading (## 规划) is not in README.md");
}
END_TEST

START_TEST(test_parity_a_missing_numbers_line_is_refused) {
    write_file("README.md", en_lesson);
    zh_lesson_with("<!-- numbers 160 27,312 -->\n", "");
    refused("README.zh.md: lacks the numbers line <!-- numbers 160 27,312 --> (README.md:21)");
    zh_lesson_with("<!-- numbers 160 27,312 -->", "<!-- numbers 160 -->");
    refused("README.zh.md: lacks the numbers line <!-- numbers 160 27,312 --> (README.md:21)");
}
END_TEST

START_TEST(test_parity_the_first_lines_link_to_each_other) {
    write_file("README.md", en_lesson + strlen("English | [中文](README.zh.md)\n\n"));
    write_file("README.zh.md", zh_lesson);
    refused("README.md:1: the first line must link to the Chinese lesson: English | [中文](README.zh.md)");
    write_file("README.md", en_lesson);
    zh_lesson_with("[English](README.md) | 中文\n", "中文\n");
    refused("README.zh.md:1: the first line must link to the English lesson: [English](README.md) | 中文");
}
END_TEST

// Content, section by section: the names in code, the numbers, the images
// and the table rows must be the English ones.
START_TEST(test_parity_content_differences_are_refused) {
    write_file("README.md", en_lesson);
    zh_lesson_with("正文。", "正文 `mg_x`。");
    refused("README.zh.md:5: the section has the `span` \"mg_x\", which README.md:5 does not");
    zh_lesson_with("160 个节点", "161 个节点");
    refused("README.zh.md:15: the section lacks the number \"160\" of README.md:19");
    refused("README.zh.md:15: the section has the number \"161\", which README.md:19 does not");
    zh_lesson_with("正文。", "正文。\n\n| a | b |\n|---|---|\n| 1 | 2 |");
    refused("README.zh.md:5: the section's tables have 2 rows, README.md:5's 0");   // the head counts, its rule not
    write_file("README.md", "English | [中文](README.zh.md)\n\n## A\n\n![a map](pictures/map.svg)\n");
    write_file("README.zh.md", "[English](README.md) | 中文\n\n## 甲\n\n没有图。\n");
    refused("README.zh.md:3: the section lacks the image \"pictures/map.svg\" of README.md:3");
}
END_TEST

// A bold pseudo-heading ("**Pictures.** text") is a heading; a span English
// wraps across lines counts whole; a number one language writes as a word
// is allowed by a comment in the Chinese section.
START_TEST(test_parity_bold_headings_wrapped_spans_and_allowed_numbers) {
    write_file("README.md", "English | [中文](README.zh.md)\n\n## A\n\nText.\n\n**Pictures.** See `mg run\n  -p x` for 2 passes.\n");
    write_file("README.zh.md", "[English](README.md) | 中文\n\n## 甲\n\n正文。\n");
    refused("README.zh.md: lacks a bold pseudo-heading (**Pictures.** See `mg run) (README.md:7)");
    write_file("README.zh.md", "[English](README.md) | 中文\n\n## 甲\n\n正文。\n\n**图。** 见 `mg run -p x`，两遍。\n");
    refused("README.zh.md:7: the section lacks the number \"2\" of README.md:7");
    write_file("README.zh.md", "[English](README.md) | 中文\n\n## 甲\n\n正文。\n\n**图。** 见 `mg run -p x`，两遍。\n"
                               "<!-- parity: en-only 2 -->\n");
    char * out;
    ck_assert_int_eq(parity(&out), 0);
    free(out);
}
END_TEST

// The top README's Chinese twin as it was before this check: it had drifted
// (paragraphs, pictures, table rows and options missing) and every earlier
// check passed. This one must not.
START_TEST(test_parity_catches_the_drifted_readme) {
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "cd '%s/tests/tools/parity-drift' && '%s' --parity README.md README.zh.md 2>&1",
             MG_TEST_ROOT, README_CHECK_BIN);
    FILE * p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    static char out[1 << 16];
    const size_t len = fread(out, 1, sizeof(out) - 1, p);
    out[len]           = '\0';
    const int status   = pclose(p);
    ck_assert_int_eq(WEXITSTATUS(status), 1);
    ck_assert_msg(strstr(out, "lacks a bold pseudo-heading (**Where the time goes.**"), "%s", out);
    ck_assert_msg(strstr(out, "lacks a bold pseudo-heading (**Pictures of memory.**"), "%s", out);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("readme_check");
    TCase * tc = MG_TCASE(s, "readme_check", test_excerpt_and_numbers_match, test_a_number_the_demo_does_not_print,
                             test_a_number_the_paragraph_does_not_say, test_numbers_are_whole,
                             test_numbers_from_another_chapter, test_an_edited_chapter_is_told_a_mismatch_is_expected,
                             test_parity_a_complete_twin_passes, test_parity_content_differences_are_refused,
                             test_parity_bold_headings_wrapped_spans_and_allowed_numbers,
                             test_parity_catches_the_drifted_readme, test_parity_a_missing_snippet_is_refused,
                             test_parity_a_missing_or_changed_demo_block_is_refused,
                             test_parity_a_missing_heading_is_refused, test_parity_a_missing_numbers_line_is_refused,
                             test_parity_the_first_lines_link_to_each_other);
    tcase_add_checked_fixture(tc, setup, teardown);
    return s;
}
