// gen_unicode.c - writes full/unicode_data.c (character classes) and
// full/unicode_nfc_data.c (the NFC tables) from the Unicode Character Database.
//
//     cc -O2 -o /tmp/gen_unicode tools/gen_unicode.c
//     /tmp/gen_unicode /usr/share/unicode > full/unicode_data.c
//     /tmp/gen_unicode --nfc /usr/share/unicode > full/unicode_nfc_data.c
//
// The directory is a copy of the UCD: Debian's `unicode-data` package installs
// it in /usr/share/unicode. Two files are read:
//   UnicodeData.txt  the general category of every assigned code point;
//   PropList.txt     its first line names the Unicode version, and its
//                    White_Space lines are checked against the fixed list below.
//
// The output is one table of {first, last, flags} rows, sorted, where every
// code point in first..last has the same flags (see full/unicode.h). Runs of
// code points with equal flags are merged into one row, and unassigned code
// points get no row at all, so the table stays small (a few thousand rows) and
// a lookup is a binary search.
//
// With --nfc it writes, instead, what canonical normalization needs (see
// full/unicode_nfc.c), from UnicodeData.txt and CompositionExclusions.txt:
//   the canonical combining class of every code point that has one (field 3),
//   as {first, last, ccc} runs;
//   every canonical decomposition (field 5 without a <tag>: a compatibility
//   mapping such as U+FB01 "ﬁ" -> <compat> f i is NFKC's, not NFC's), one
//   step, to one or two code points;
//   the primary composites: the two-code-point decompositions, less the
//   Full_Composition_Exclusion set (CompositionExclusions.txt, plus the
//   decompositions that start with a non-starter; singletons never compose),
//   sorted by the pair.
// Hangul syllables are left out: unicode_nfc.c computes them. Unicode 15.1
// added no decomposition and no combining mark, so a 15.0 UCD gives 15.1's
// tables.
//
// This does what llama.cpp's scripts/gen-unicode-data.py does for
// unicode_ranges_flags and unicode_set_whitespace: the same category -> flag
// mapping, the same "<..., First>" / "<..., Last>" range expansion and the same
// hard-coded White_Space list.
//
// llama.cpp downloads the latest UnicodeData.txt when it regenerates its
// table; the one in its source is Unicode 15.1, while Debian 12 ships 15.0.
// Unicode 15.1 added 627 code points and nothing else that matters here, so
// from a 15.0 UCD we add them by hand (unicode_15_1 below) and get llama.cpp's
// table: every row we compared agrees. A newer UCD is used as it is, with a
// warning, since it may know characters llama.cpp's table does not.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CODEPOINTS 0x110000

// The flag values of full/unicode.h (and of llama.cpp's unicode_cpt_flags).
enum {
    FLAG_UNDEFINED   = 0x0001,
    FLAG_NUMBER      = 0x0002,
    FLAG_LETTER      = 0x0004,
    FLAG_SEPARATOR   = 0x0008,
    FLAG_MARK        = 0x0010,
    FLAG_PUNCTUATION = 0x0020,
    FLAG_SYMBOL      = 0x0040,
    FLAG_CONTROL     = 0x0080,
    FLAG_WHITESPACE  = 0x0100,
};

// Two-letter general category -> flag. The first letter decides, except that
// unassigned code points (Cn) are "undefined" rather than "control".
static int category_flag(const char * cat) {
    if (strcmp(cat, "Cn") == 0) return FLAG_UNDEFINED;
    switch (cat[0]) {
        case 'L': return FLAG_LETTER;
        case 'M': return FLAG_MARK;
        case 'N': return FLAG_NUMBER;
        case 'P': return FLAG_PUNCTUATION;
        case 'S': return FLAG_SYMBOL;
        case 'Z': return FLAG_SEPARATOR;
        case 'C': return FLAG_CONTROL;   // Cc, Cf, Co, Cs
        default:  return -1;
    }
}

// White_Space, as llama.cpp's generator hard-codes it (from PropList.txt).
static const uint32_t whitespace[] = {
    0x0009, 0x000A, 0x000B, 0x000C, 0x000D, 0x0020, 0x0085, 0x00A0, 0x1680,
    0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
};
#define N_WHITESPACE (sizeof(whitespace) / sizeof(whitespace[0]))

// The code points Unicode 15.1 assigned (Unicode 15.1.0 release notes).
static const struct {
    uint32_t first;
    uint32_t last;
    uint16_t flag;
} unicode_15_1[] = {
    { 0x2EBF0, 0x2EE5D, FLAG_LETTER },   // CJK Unified Ideographs Extension I (Lo)
    { 0x02FFC, 0x02FFF, FLAG_SYMBOL },   // ideographic description characters (So)
    { 0x031EF, 0x031EF, FLAG_SYMBOL },   // CJK stroke HXG (So)
};

static uint16_t flags[MAX_CODEPOINTS];

static void die(const char * msg, const char * detail) {
    fprintf(stderr, "gen_unicode: %s%s\n", msg, detail ? detail : "");
    exit(1);
}

// Splits line at ';' into at most n fields (in place). Returns the count.
static int split_fields(char * line, char ** fields, int n) {
    int count = 0;
    fields[count++] = line;
    for (char * p = line; *p && count < n; p++) {
        if (*p == ';') {
            *p = '\0';
            fields[count++] = p + 1;
        }
    }
    return count;
}

static bool ends_with(const char * s, const char * suffix) {
    size_t ns = strlen(s), nx = strlen(suffix);
    return ns >= nx && strcmp(s + ns - nx, suffix) == 0;
}

// Reads the general categories. Also checks a fact unicode.c relies on: the
// only code points whose simple lowercase mapping is one of the letters of the
// contractions ('s 't 're 've 'm 'll 'd) are the ASCII capitals, so ASCII
// tolower is exactly llama.cpp's unicode_tolower for the contraction rule.
static void read_unicode_data(const char * path) {
    FILE * f = fopen(path, "r");
    if (!f) die("cannot open ", path);
    for (uint32_t c = 0; c < MAX_CODEPOINTS; c++) flags[c] = FLAG_UNDEFINED;

    char line[1024];
    uint32_t range_first = 0;
    bool in_range = false;
    while (fgets(line, sizeof(line), f)) {
        char * field[15];
        if (split_fields(line, field, 15) < 14) continue;
        uint32_t cpt = (uint32_t) strtoul(field[0], NULL, 16);
        if (cpt >= MAX_CODEPOINTS) die("code point out of range: ", field[0]);
        int flag = category_flag(field[2]);
        if (flag < 0) die("unknown category: ", field[2]);

        if (ends_with(field[1], ", First>")) {
            range_first = cpt;
            in_range = true;
            continue;
        }
        uint32_t first = cpt;
        if (ends_with(field[1], ", Last>")) {
            if (!in_range) die("range end without start: ", field[0]);
            first = range_first;
            in_range = false;
        }
        for (uint32_t c = first; c <= cpt; c++) flags[c] = (uint16_t) flag;

        uint32_t lower = (uint32_t) strtoul(field[13], NULL, 16);
        if (lower && strchr("stmdrevl", (int) lower) && lower < 0x80 && cpt != lower - 0x20) {
            die("a non-ASCII code point lowercases to a contraction letter: ", field[0]);
        }
    }
    fclose(f);
}

// Returns the Unicode version named on PropList.txt's first line
// ("# PropList-15.0.0.txt"), and warns if its White_Space set differs from
// the list above (llama.cpp would then disagree with Unicode, and so do we).
static const char * read_proplist(const char * path) {
    static char version[64] = "unknown";
    FILE * f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gen_unicode: warning: cannot open %s; version unknown, White_Space not checked\n", path);
        return version;
    }
    char line[1024];
    if (fgets(line, sizeof(line), f) && sscanf(line, "# PropList-%63[0-9.]", version) == 1) {
        size_t n = strlen(version);
        if (n > 0 && version[n - 1] == '.') version[n - 1] = '\0';   // the ".txt" dot
    }
    static bool in_file[MAX_CODEPOINTS];
    while (fgets(line, sizeof(line), f)) {
        unsigned first, last;
        char prop[64];
        if (sscanf(line, "%x..%x ; %63s", &first, &last, prop) != 3) {
            if (sscanf(line, "%x ; %63s", &first, prop) != 2) continue;   // a comment or a blank line
            last = first;
        }
        if (strcmp(prop, "White_Space") != 0 || last >= MAX_CODEPOINTS) continue;
        for (unsigned c = first; c <= last; c++) in_file[c] = true;
    }
    fclose(f);
    size_t n_file = 0;
    for (uint32_t c = 0; c < MAX_CODEPOINTS; c++) n_file += in_file[c];
    bool same = n_file == N_WHITESPACE;
    for (size_t i = 0; i < N_WHITESPACE; i++) same = same && in_file[whitespace[i]];
    if (!same) {
        fprintf(stderr, "gen_unicode: warning: PropList.txt's White_Space differs from llama.cpp's list; "
                        "keeping llama.cpp's\n");
    }
    return version;
}

// ---------------------------------------------------------------------------
// --nfc: combining classes, canonical decompositions, primary composites
// ---------------------------------------------------------------------------

static uint8_t  ccc_of[MAX_CODEPOINTS];
static uint32_t decomp_of[MAX_CODEPOINTS][2];   // {0, 0}: none; {a, 0}: a singleton
static bool     excluded[MAX_CODEPOINTS];        // CompositionExclusions.txt

static void read_canonical(const char * path) {
    FILE * f = fopen(path, "r");
    if (!f) die("cannot open ", path);
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        char * field[15];
        if (split_fields(line, field, 15) < 14) continue;
        const uint32_t cpt = (uint32_t) strtoul(field[0], NULL, 16);
        if (cpt >= MAX_CODEPOINTS) die("code point out of range: ", field[0]);
        const long ccc = strtol(field[3], NULL, 10);
        if (ccc < 0 || ccc > 254) die("combining class out of range: ", field[0]);
        ccc_of[cpt] = (uint8_t) ccc;
        if (field[5][0] == '\0' || field[5][0] == '<') continue;   // none, or a compatibility mapping
        char * end;
        const uint32_t a = (uint32_t) strtoul(field[5], &end, 16);
        const uint32_t b = (uint32_t) strtoul(end, &end, 16);
        while (*end == ' ') end++;
        if (a == 0 || *end != '\0') die("a canonical decomposition of more than two code points: ", field[0]);
        decomp_of[cpt][0] = a;
        decomp_of[cpt][1] = b;
    }
    fclose(f);
}

static void read_exclusions(const char * path) {
    FILE * f = fopen(path, "r");
    if (!f) die("cannot open ", path);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned cpt;
        if (line[0] == '#' || sscanf(line, "%x", &cpt) != 1) continue;
        if (cpt >= MAX_CODEPOINTS || decomp_of[cpt][1] == 0) die("an exclusion without a pair decomposition", NULL);
        excluded[cpt] = true;
        n++;
    }
    fclose(f);
    if (n == 0) die("no exclusions in ", path);
}

// Composes a + b to cpt: a pair decomposition, not excluded, starting with a starter.
static bool is_primary_composite(uint32_t cpt) {
    return decomp_of[cpt][1] != 0 && !excluded[cpt] && ccc_of[cpt] == 0 && ccc_of[decomp_of[cpt][0]] == 0;
}

struct pair {
    uint32_t a, b, cpt;
};

static int by_pair(const void * x, const void * y) {
    const struct pair * p = x, * q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

static int write_nfc(const char * dir) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/UnicodeData.txt", dir);
    read_canonical(path);
    snprintf(path, sizeof(path), "%s/CompositionExclusions.txt", dir);
    read_exclusions(path);
    snprintf(path, sizeof(path), "%s/PropList.txt", dir);
    const char * version = read_proplist(path);

    printf("//@file full\n");
    printf("// unicode_nfc_data.c - GENERATED by tools/gen_unicode.c --nfc from the Unicode Character Database\n");
    printf("// %s (UnicodeData.txt, CompositionExclusions.txt; Debian package unicode-data). Do not edit;\n",
           version);
    printf("// regenerate with\n");
    printf("//     cc -O2 -o /tmp/gen_unicode tools/gen_unicode.c\n");
    printf("//     /tmp/gen_unicode --nfc /usr/share/unicode > full/unicode_nfc_data.c\n");
    printf("//\n");
    printf("// The tables of unicode_nfc.h: combining classes, canonical decompositions (one\n");
    printf("// step), primary composites. Hangul syllables are computed, not listed.\n");
    printf("#include \"unicode_nfc.h\"\n\n");
    printf("const char mg_nfc_version[] = \"%s\";\n\n", version);

    printf("const struct mg_nfc_ccc_range mg_nfc_ccc_ranges[] = {\n");
    int n = 0, on_line = 0;
    for (uint32_t c = 0; c < MAX_CODEPOINTS; c++) {
        if (ccc_of[c] == 0) continue;
        const uint32_t first = c;
        while (c + 1 < MAX_CODEPOINTS && ccc_of[c + 1] == ccc_of[first]) c++;
        printf("%s {0x%05X, 0x%05X, %3u},", on_line ? "" : "   ", (unsigned) first, (unsigned) c,
               (unsigned) ccc_of[first]);
        n++;
        if (++on_line == 4) {
            printf("\n");
            on_line = 0;
        }
    }
    printf("%s};\n", on_line ? "\n" : "");
    printf("const int mg_nfc_n_ccc_ranges = %d;\n\n", n);
    const int n_ccc = n;

    printf("const struct mg_nfc_decomposition mg_nfc_decompositions[] = {\n");
    n = on_line = 0;
    for (uint32_t c = 0; c < MAX_CODEPOINTS; c++) {
        if (decomp_of[c][0] == 0) continue;
        printf("%s {0x%05X, 0x%05X, 0x%05X},", on_line ? "" : "   ", (unsigned) c, (unsigned) decomp_of[c][0],
               (unsigned) decomp_of[c][1]);
        n++;
        if (++on_line == 3) {
            printf("\n");
            on_line = 0;
        }
    }
    printf("%s};\n", on_line ? "\n" : "");
    printf("const int mg_nfc_n_decompositions = %d;\n\n", n);
    const int n_decomp = n;

    static struct pair pairs[MAX_CODEPOINTS / 64];
    n = 0;
    for (uint32_t c = 0; c < MAX_CODEPOINTS; c++) {
        if (!is_primary_composite(c)) continue;
        if (n == (int) (sizeof(pairs) / sizeof(pairs[0]))) die("too many composites", NULL);
        pairs[n++] = (struct pair) {decomp_of[c][0], decomp_of[c][1], c};
    }
    qsort(pairs, (size_t) n, sizeof(pairs[0]), by_pair);
    printf("const struct mg_nfc_composition mg_nfc_compositions[] = {\n");
    on_line = 0;
    for (int i = 0; i < n; i++) {
        printf("%s {0x%05X, 0x%05X, 0x%05X},", on_line ? "" : "   ", (unsigned) pairs[i].a, (unsigned) pairs[i].b,
               (unsigned) pairs[i].cpt);
        if (++on_line == 3) {
            printf("\n");
            on_line = 0;
        }
    }
    printf("%s};\n", on_line ? "\n" : "");
    printf("const int mg_nfc_n_compositions = %d;\n", n);
    fprintf(stderr, "gen_unicode --nfc: Unicode %s, %d combining-class runs, %d decompositions, %d composites\n",
            version, n_ccc, n_decomp, n);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc > 1 && strcmp(argv[1], "--nfc") == 0) return write_nfc(argc > 2 ? argv[2] : "/usr/share/unicode");
    const char * dir = argc > 1 ? argv[1] : "/usr/share/unicode";
    char path[4096];
    snprintf(path, sizeof(path), "%s/UnicodeData.txt", dir);
    read_unicode_data(path);
    snprintf(path, sizeof(path), "%s/PropList.txt", dir);
    const char * version = read_proplist(path);
    char version_used[128];
    snprintf(version_used, sizeof(version_used), "%s", version);
    if (strncmp(version, "15.0.", 5) == 0) {
        for (size_t i = 0; i < sizeof(unicode_15_1) / sizeof(unicode_15_1[0]); i++) {
            for (uint32_t c = unicode_15_1[i].first; c <= unicode_15_1[i].last; c++) {
                if (flags[c] != FLAG_UNDEFINED) die("a Unicode 15.1 addition is already assigned", NULL);
                flags[c] = unicode_15_1[i].flag;
            }
        }
        snprintf(version_used, sizeof(version_used), "%s+15.1", version);
    } else {
        fprintf(stderr, "gen_unicode: warning: Unicode %s: llama.cpp's table is Unicode 15.1, so code points "
                        "assigned later will be classified differently\n", version);
    }
    for (size_t i = 0; i < N_WHITESPACE; i++) flags[whitespace[i]] |= FLAG_WHITESPACE;

    printf("//@file 09\n");
    printf("// unicode_data.c - GENERATED by tools/gen_unicode.c from the Unicode Character Database %s\n", version);
    printf("// (UnicodeData.txt and PropList.txt; Debian package unicode-data)");
    if (strcmp(version, version_used) != 0) {
        printf(",\n// plus the 627 code points Unicode 15.1 added (llama.cpp's table is 15.1)");
    }
    printf(". Do not edit; regenerate with\n");
    printf("//     cc -O2 -o /tmp/gen_unicode tools/gen_unicode.c\n");
    printf("//     /tmp/gen_unicode /usr/share/unicode > full/unicode_data.c\n");
    printf("//\n");
    printf("// Row {first, last, flags}: code points first..last all have these flags (unicode.h).\n");
    printf("// Code points in no row are unassigned: MG_UNICODE_UNDEFINED.\n");
    printf("#include \"unicode.h\"\n\n");
    printf("const char mg_unicode_version[] = \"%s\";\n\n", version_used);
    printf("const struct mg_unicode_range mg_unicode_ranges[] = {\n");

    int n_rows = 0;
    int on_line = 0;
    uint32_t c = 0;
    while (c < MAX_CODEPOINTS) {
        uint32_t first = c;
        while (c + 1 < MAX_CODEPOINTS && flags[c + 1] == flags[first]) c++;
        if (flags[first] != FLAG_UNDEFINED) {
            if (on_line == 0) printf("   ");
            printf(" {0x%05X, 0x%05X, 0x%03X},", (unsigned) first, (unsigned) c, (unsigned) flags[first]);
            n_rows++;
            if (++on_line == 4) {
                printf("\n");
                on_line = 0;
            }
        }
        c++;
    }
    if (on_line) printf("\n");
    printf("};\n\n");
    printf("const int mg_unicode_n_ranges = (int) (sizeof(mg_unicode_ranges) / sizeof(mg_unicode_ranges[0]));\n");
    fprintf(stderr, "gen_unicode: Unicode %s, %d rows\n", version_used, n_rows);
    return 0;
}
