// test_ex1_is_permuted.c - chapter 01, exercise 1: bool mg_is_permuted(const struct mg_tensor * t).
//
// True when walking t in logical order does not walk its bytes forwards: some
// nb[i] > nb[i+1] (ggml_is_permuted). Graded by `make grade`; the function is
// declared weak, so this test links against a chapter without it and fails
// with a message. Checked on all 24 permutations of a 2x3x4x5 tensor: only the
// identity keeps the order.
#include "harness.h"
#include "mg.h"

bool mg_is_permuted(const struct mg_tensor * t) __attribute__((weak));

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

START_TEST(is_permuted_exists) {
    ck_assert_msg(mg_is_permuted != NULL, "mg_is_permuted is not defined yet (tensor.c, declared in tensor.h)");
}
END_TEST

START_TEST(fresh_tensors_and_plain_views_are_not_permuted) {
    ck_assert_msg(mg_is_permuted != NULL, "mg_is_permuted is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2);
    ck_assert(!mg_is_permuted(m));
    ck_assert(!mg_is_permuted(mg_new_tensor_4d(ctx, MG_TYPE_F16, 2, 3, 4, 5)));
    ck_assert(!mg_is_permuted(mg_reshape_1d(ctx, m, 6)));
    ck_assert(!mg_is_permuted(mg_view_2d(ctx, m, 2, 2, m->nb[1], sizeof(float))));   // a slice keeps the order
    ck_assert(!mg_is_permuted(mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 64, 3)));
    mg_free(ctx);
}
END_TEST

START_TEST(a_transpose_is_permuted) {
    ck_assert_msg(mg_is_permuted != NULL, "mg_is_permuted is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2);
    struct mg_tensor * t = mg_transpose(ctx, m);
    ck_assert(mg_is_permuted(t));
    ck_assert(!mg_is_permuted(mg_transpose(ctx, t)));   // twice is the identity
    mg_free(ctx);
}
END_TEST

// Permutation number p of 0..3, in lexicographic order.
static void nth_permutation(int p, int axes[4]) {
    int pool[4] = {0, 1, 2, 3};
    int n = 4, fact = 6;
    for (int i = 0; i < 4; i++) {
        const int k = p / fact;
        p %= fact;
        axes[i] = pool[k];
        for (int j = k; j < n - 1; j++) pool[j] = pool[j + 1];
        n--;
        if (n > 0) fact /= n;
    }
}

START_TEST(only_the_identity_of_24_permutations_keeps_the_order) {
    ck_assert_msg(mg_is_permuted != NULL, "mg_is_permuted is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_4d(ctx, MG_TYPE_F32, 2, 3, 4, 5);
    int n_permuted = 0;
    for (int p = 0; p < 24; p++) {
        int ax[4];
        nth_permutation(p, ax);
        struct mg_tensor * v = mg_permute(ctx, a, ax[0], ax[1], ax[2], ax[3]);
        const bool identity = ax[0] == 0 && ax[1] == 1 && ax[2] == 2 && ax[3] == 3;
        ck_assert_msg(mg_is_permuted(v) == !identity, "permute(%d,%d,%d,%d): mg_is_permuted is %d", ax[0], ax[1],
                      ax[2], ax[3], mg_is_permuted(v));
        n_permuted += mg_is_permuted(v);
    }
    ck_assert_int_eq(n_permuted, 23);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("01_tensor ex1 is_permuted");
    TCase * tc = tcase_create("is_permuted");
    tcase_add_test(tc, is_permuted_exists);
    tcase_add_test(tc, fresh_tensors_and_plain_views_are_not_permuted);
    tcase_add_test(tc, a_transpose_is_permuted);
    tcase_add_test(tc, only_the_identity_of_24_permutations_keeps_the_order);
    suite_add_tcase(s, tc);
    return s;
}
