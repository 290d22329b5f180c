// test_nfc.c - NFC (unicode_nfc.c) against Unicode's own conformance test,
// NormalizationTest.txt (a vendored subset: tests/fixtures/unicode/README.md;
// MG_NFC_TEST=path runs the whole file), and on the cases a tokenizer meets:
// decomposed accents, Hangul jamo, compatibility characters NFC must keep.
#include "harness.h"
#include "unicode.h"
#include "unicode_nfc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Code points (space-separated hex, as in NormalizationTest.txt) -> UTF-8.
static size_t utf8_of_hex(const char * hex, char * out) {
    size_t n = 0;
    for (const char * p = hex; *p;) {
        char * end;
        const unsigned long cpt = strtoul(p, &end, 16);
        if (end == p) break;
        n += mg_utf8_encode((uint32_t) cpt, out + n);
        p = end;
    }
    out[n] = '\0';
    return n;
}

static char * nfc(const char * s, size_t n) {
    size_t len;
    char * t = mg_utf8_nfc(s, n, &len);
    ck_assert_uint_eq(strlen(t), len);
    return t;
}

// NFC(text) == want, both UTF-8.
static void expect_nfc(const char * text, const char * want) {
    char * got = nfc(text, strlen(text));
    ck_assert_msg(strcmp(got, want) == 0, "NFC of '%s' is '%s', want '%s'", text, got, want);
    free(got);
}

// One line "c1;c2;c3;c4;c5;": c2 == NFC(c1) == NFC(c2) == NFC(c3), c4 == NFC(c4) == NFC(c5).
static void check_line(const char * line, int line_no) {
    char col[5][256], utf8[5][1024];
    if (sscanf(line, "%255[^;];%255[^;];%255[^;];%255[^;];%255[^;];", col[0], col[1], col[2], col[3], col[4]) != 5) {
        ck_abort_msg("line %d: not five columns: %s", line_no, line);
    }
    size_t n[5];
    for (int c = 0; c < 5; c++) n[c] = utf8_of_hex(col[c], utf8[c]);
    static const int sources[] = {0, 1, 2, 3, 4}, wants[] = {1, 1, 1, 3, 3};
    for (int k = 0; k < 5; k++) {
        char * got = nfc(utf8[sources[k]], n[sources[k]]);
        ck_assert_msg(strcmp(got, utf8[wants[k]]) == 0, "line %d: NFC(c%d = %s) is not c%d = %s", line_no,
                      sources[k] + 1, col[sources[k]], wants[k] + 1, col[wants[k]]);
        free(got);
    }
}

START_TEST(test_normalization_test_file) {
    const char * env  = getenv("MG_NFC_TEST");
    const char * path = env && *env ? env : mg_test_fixture("unicode/NormalizationTest-subset.txt");
    FILE * f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[4096];
    int line_no = 0, n_tested = 0, parts = 0;
    while (fgets(line, sizeof(line), f)) {
        line_no++;
        if (line[0] == '@') parts++;
        if (line[0] == '#' || line[0] == '@' || line[0] == '\n') continue;
        check_line(line, line_no);
        n_tested++;
    }
    fclose(f);
    ck_assert_int_eq(parts, 4);   // Part0 .. Part3: the specific cases, one by one, ordering, PRI #29
    ck_assert_msg(n_tested >= 2700, "only %d lines tested in %s", n_tested, path);
}
END_TEST

START_TEST(test_tokenizer_cases) {
    expect_nfc("e\xCC\x81", "\xC3\xA9");                              // e + U+0301 -> é
    expect_nfc("cafe\xCC\x81 na\xC3\xAFve", "caf\xC3\xA9 na\xC3\xAFve");   // already composed stays
    expect_nfc("\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80");            // jamo U+1100 U+1161 -> 가 U+AC00
    expect_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81");   // + U+11A8 -> 각 U+AC01
    expect_nfc("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81");            // 가 + U+11A8 -> 각
    expect_nfc("\xEA\xB0\x81", "\xEA\xB0\x81");                        // a syllable stays itself
    // Compatibility characters are NFKC's business: NFC keeps them.
    expect_nfc("\xEF\xAC\x81", "\xEF\xAC\x81");                        // U+FB01 ﬁ
    expect_nfc("\xE2\x91\xA0", "\xE2\x91\xA0");                        // U+2460 ①
    expect_nfc("x\xC2\xB2", "x\xC2\xB2");                              // U+00B2 superscript two
    expect_nfc("\xEF\xBC\xA1", "\xEF\xBC\xA1");                        // U+FF21 fullwidth A
    // Singletons and exclusions: canonical, but never composed back.
    expect_nfc("\xE2\x84\xAB", "\xC3\x85");                            // U+212B ANGSTROM SIGN -> U+00C5
    expect_nfc("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC");            // U+0958 -> U+0915 U+093C (excluded)
    // Canonical order: dot below (220) before dot above (230), then compose.
    expect_nfc("a\xCC\x87\xCC\xA3", "\xE1\xBA\xA1\xCC\x87");          // a U+0307 U+0323 -> U+1EA1 U+0307
    // Blocked: a mark of the same class in between keeps the second apart.
    expect_nfc("a\xCC\x88\xCC\x81", "\xC3\xA4\xCC\x81");              // a U+0308 U+0301 -> U+00E4 U+0301
    // Text a tokenizer sees is mostly unchanged.
    expect_nfc("", "");
    expect_nfc("Hello, world! 123\n\t", "Hello, world! 123\n\t");
    expect_nfc("\xE4\xBD\xA0\xE5\xA5\xBD", "\xE4\xBD\xA0\xE5\xA5\xBD");   // 你好
    // Bytes that are not UTF-8 pass through, and end a run: no composition across them.
    expect_nfc("a\xFF" "e\xCC\x81", "a\xFF\xC3\xA9");
    expect_nfc("e\xC0\xAF\xCC\x81", "e\xC0\xAF\xCC\x81");             // overlong '/' kept as bytes
    expect_nfc("e\xCC", "e\xCC");                                      // a cut sequence at the end
}
END_TEST

// A long run of marks (sorted by counting, not by insertion) gives what the
// definition gives: marks by class, equal classes in their order. '1' is not a
// base any of these marks compose with, so nothing composes.
START_TEST(test_long_mark_run) {
    enum { N = 1000 };
    static const uint32_t marks[3] = {0x0301, 0x0323, 0x0308};   // classes 230, 220, 230
    char text[8 + N * 2], want[8 + N * 2];
    size_t n = 0, w = 0;
    text[n++] = '1';
    want[w++] = '1';
    for (int i = 0; i < N; i++) n += mg_utf8_encode(marks[i % 3], text + n);
    for (int i = 0; i < N; i++) {   // first every 220 (U+0323), then the 230s in their order
        if (marks[i % 3] == 0x0323) w += mg_utf8_encode(0x0323, want + w);
    }
    for (int i = 0; i < N; i++) {
        if (marks[i % 3] != 0x0323) w += mg_utf8_encode(marks[i % 3], want + w);
    }
    text[n] = want[w] = '\0';
    expect_nfc(text, want);
}
END_TEST

// The tables against facts of the standard (not of the generator).
START_TEST(test_tables) {
    ck_assert_int_eq(mg_nfc_ccc('a'), 0);
    ck_assert_int_eq(mg_nfc_ccc(0x0301), 230);   // combining acute: above
    ck_assert_int_eq(mg_nfc_ccc(0x0323), 220);   // combining dot below: below
    ck_assert_int_eq(mg_nfc_ccc(0x093C), 7);     // Devanagari nukta
    ck_assert_uint_eq(mg_nfc_compose('e', 0x0301), 0x00E9);
    ck_assert_uint_eq(mg_nfc_compose(0x0915, 0x093C), 0);   // U+0958 is a composition exclusion
    ck_assert_uint_eq(mg_nfc_compose(0x1112, 0x1175), 0xD788);   // 히 = U+AC00 + (18 * 21 + 20) * 28
    ck_assert_uint_eq(mg_nfc_compose(0xD7A3, 0x11A8), 0);        // 힣 has a final consonant already
    ck_assert_str_eq(mg_nfc_version, "15.0.0");
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("nfc");
    MG_TCASE(s, "nfc", test_normalization_test_file, test_tokenizer_cases, test_long_mark_run, test_tables);
    return s;
}
