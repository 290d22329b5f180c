// test_huge_pages.c - the weights moved into memory backed by huge pages
// (mg_model_params.huge_pages; mmap.c, mg_mmap_copy_to_huge_pages): the same
// bytes at the same addresses, so nothing a model computes changes.
//
// - a file of a pattern, mapped; ranges moved (all of it, a stretch that
//   starts and ends inside pages, the last bytes before the end): every byte
//   of the mapping is still the file's, and the mapping still ends where the
//   file does; a range past the end, or empty, is refused and changes nothing;
// - a model loaded with and without huge_pages: every tensor still points
//   where the file has it, its bytes equal the file's (read with stdio), the
//   loader reports bytes moved exactly when the kernel has huge pages on
//   (mg_huge_pages_enabled), and
//   the logits of a batch and of one more token are the same to the bit.
#define _POSIX_C_SOURCE 200809L   // mkdtemp
#include "harness.h"
#include "mg.h"
#include "mmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(size_t i) {
    return (unsigned char) (i * 131 + (i >> 12) * 7);
}

static void check_pattern(const struct mg_mmap * m, const char * after) {
    const unsigned char * p = m->addr;
    for (size_t i = 0; i < m->size; i++) {
        if (p[i] != pattern(i)) ck_abort_msg("after %s: byte %zu is %d, the file's is %d", after, i, p[i], pattern(i));
    }
}

START_TEST(test_mmap_ranges_keep_their_bytes) {
    char dir[] = "/tmp/mg_test_huge_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/pattern.bin", dir);
    const size_t size = ((size_t) 5 << 20) + 4321;   // more than two huge pages, and not whole 4 KiB pages
    FILE * f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < size; i++) fputc(pattern(i), f);
    ck_assert_int_eq(fclose(f), 0);

    struct mg_mmap * m = mg_mmap_open(path);
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_uint_eq(m->size, size);
    const bool on = mg_huge_pages_enabled();
    ck_assert(!mg_mmap_copy_to_huge_pages(m, 0, 0));             // empty
    ck_assert(!mg_mmap_copy_to_huge_pages(m, size - 10, 11));    // one byte past the end
    check_pattern(m, "refused ranges");
    ck_assert_int_eq(mg_mmap_copy_to_huge_pages(m, 1000, (size_t) 3 << 20), on);   // inside pages at both ends
    check_pattern(m, "a middle stretch");
    ck_assert_int_eq(mg_mmap_copy_to_huge_pages(m, size - 100, 100), on);   // the last bytes
    check_pattern(m, "the last bytes");
    ck_assert_int_eq(mg_mmap_copy_to_huge_pages(m, 0, size), on);   // all of it, over the moved parts too
    check_pattern(m, "the whole file");
    mg_mmap_close(m);
    unlink(path);
    rmdir(dir);
}
END_TEST

// The logits of 3 tokens and of one more, from the model at path loaded with
// or without huge pages; *moved, the bytes the loader says it moved.
static float * logits(const char * path, bool huge_pages, size_t * moved, int * n_out) {
    struct mg_model_params mp = mg_model_default_params();
    mp.huge_pages             = huge_pages;
    struct mg_model * m       = mg_model_load_from_file(path, mp);
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    *moved = m->n_huge_page_bytes;

    // Every tensor where the file has it, with the file's bytes.
    FILE * f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    int n_checked = 0;
    for (const struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) {
        const struct mg_gguf_tensor_info * info = mg_gguf_find_tensor(m->gguf, t->name);
        ck_assert_ptr_nonnull(info);
        ck_assert_ptr_eq(t->data, info->data);
        unsigned char * want = malloc(info->nbytes);
        ck_assert_ptr_nonnull(want);
        ck_assert_int_eq(fseek(f, (long) (mg_gguf_data_offset(m->gguf) + info->offset), SEEK_SET), 0);
        ck_assert_uint_eq(fread(want, 1, info->nbytes, f), info->nbytes);
        ck_assert_msg(memcmp(want, t->data, info->nbytes) == 0, "%s: tensor %s's bytes differ from the file's",
                      huge_pages ? "huge pages" : "mapped", t->name);
        free(want);
        n_checked++;
    }
    fclose(f);
    ck_assert_int_gt(n_checked, 0);

    struct mg_session_params p = mg_session_default_params();
    p.n_threads                = mg_test_threads(2);
    p.n_ctx                    = 32;
    struct mg_session * s      = mg_session_new(m, p);
    ck_assert_ptr_nonnull(s);
    const int32_t tokens[] = {5, 17, 300}, next = 42;
    const size_t  n_vocab  = (size_t) m->hp.n_vocab;
    *n_out                 = 4 * m->hp.n_vocab;
    float * out            = malloc(sizeof(float) * (size_t) *n_out);
    ck_assert_ptr_nonnull(out);
    ck_assert(mg_decode(s, tokens, 3, true));
    memcpy(out, mg_get_logits(s), sizeof(float) * 3 * n_vocab);
    ck_assert(mg_decode(s, &next, 1, false));
    memcpy(out + 3 * n_vocab, mg_get_logits(s), sizeof(float) * n_vocab);
    mg_session_free(s);
    mg_model_free(m);
    return out;
}

START_TEST(test_model_same_bytes_same_logits) {
    const char * path = mg_test_fixture("models/tiny-f32.gguf");
    size_t       moved_off, moved_on;
    int          n_off, n_on;
    float *      off = logits(path, false, &moved_off, &n_off);
    float *      on  = logits(path, true, &moved_on, &n_on);
    ck_assert_uint_eq(moved_off, 0);
    if (mg_huge_pages_enabled()) {
        ck_assert_msg(moved_on > 0, "the kernel has huge pages, but the loader moved no weights");
    } else {
        ck_assert_uint_eq(moved_on, 0);
    }
    ck_assert_int_eq(n_off, n_on);
    ck_assert_msg(memcmp(off, on, sizeof(float) * (size_t) n_on) == 0, "the logits differ with huge pages");
    free(off);
    free(on);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("huge_pages");
    MG_TCASE(s, "huge_pages", test_mmap_ranges_keep_their_bytes, test_model_same_bytes_same_logits);
    return s;
}
