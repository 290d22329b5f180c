// test_rope.c - rotary position embedding against its formula, in double.
//
// For a row x of token t at position p, pair i (0 <= i < n_rot/2) turns by
//     theta_i = p * freq_scale * freq_base^(-2i / n_rot)
// NEOX pairs element i with i + n_rot/2, NORMAL pairs 2i with 2i+1:
//     y0 = x0 cos(theta) - x1 sin(theta),   y1 = x0 sin(theta) + x1 cos(theta)
// and elements from n_rot on are copied unchanged.
//
// The engine builds the angles in float by repeated multiplication, as
// ggml_rope_cache_init does, so each angle carries a relative error of about
// (i + 2) * 2^-24. With |x| <= 1 and positions up to 64 (angles up to 64
// radians) that is a few 1e-6 at most: the tolerance is 1e-5. A far position
// gets a tolerance scaled by its angle (see test_rope_far_position).
#include "harness.h"
#include "mg.h"

#include <math.h>

enum { D = 16, H = 3 };

struct rope_case {
    int               n_rot;
    enum mg_rope_mode mode;
    float             freq_base, freq_scale;
    int               n_tokens;
    int32_t           pos[8];
};

static double expected_angle(const struct rope_case * c, int32_t pos, int i) {
    return (double) pos * (double) c->freq_scale * pow((double) c->freq_base, -2.0 * i / (double) c->n_rot);
}

// Runs rope on a random {D, H, T} and checks every element; returns the
// largest error seen (for the tests that want to look at it).
static double check_rope(const struct rope_case * c, uint64_t seed, double tol) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    struct mg_tensor *  x   = mg_new_tensor_3d(ctx, MG_TYPE_F32, D, H, c->n_tokens);
    struct mg_tensor *  pos = mg_new_tensor_1d(ctx, MG_TYPE_I32, c->n_tokens);
    uint64_t rng = seed;
    mg_test_fill_uniform(x->data, (size_t) mg_nelements(x), &rng, -1.0f, 1.0f);
    for (int t = 0; t < c->n_tokens; t++) mg_set_i32_1d(pos, t, c->pos[t]);
    struct mg_tensor * y = mg_rope(ctx, x, pos, c->n_rot, c->mode, c->freq_base, c->freq_scale);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    mg_graph_compute_with_ctx(ctx, g, 1);

    double max_err = 0.0;
    const int half = c->n_rot / 2;
    for (int t = 0; t < c->n_tokens; t++) {
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < half; i++) {
                const int    j0 = c->mode == MG_ROPE_NEOX ? i : 2 * i;
                const int    j1 = c->mode == MG_ROPE_NEOX ? i + half : 2 * i + 1;
                const double th = expected_angle(c, c->pos[t], i);
                const double x0 = mg_get_f32_nd(x, j0, h, t, 0), x1 = mg_get_f32_nd(x, j1, h, t, 0);
                const double e0 = fabs(mg_get_f32_nd(y, j0, h, t, 0) - (x0 * cos(th) - x1 * sin(th)));
                const double e1 = fabs(mg_get_f32_nd(y, j1, h, t, 0) - (x0 * sin(th) + x1 * cos(th)));
                ck_assert_msg(e0 <= tol && e1 <= tol, "token %d (pos %d) head %d pair %d: errors %.3g %.3g > %.3g", t,
                              c->pos[t], h, i, e0, e1, tol);
                max_err = fmax(max_err, fmax(e0, e1));
            }
            for (int j = c->n_rot; j < D; j++) {   // the tail is copied, bit for bit
                const float a = mg_get_f32_nd(x, j, h, t, 0), b = mg_get_f32_nd(y, j, h, t, 0);
                ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "token %d head %d element %d changed", t, h, j);
            }
        }
    }
    mg_free(ctx);
    return max_err;
}

START_TEST(test_rope_neox_full_rotation) {
    const struct rope_case c = {D, MG_ROPE_NEOX, 10000.0f, 1.0f, 5, {0, 1, 2, 17, 63}};
    check_rope(&c, 1, 1e-5);
}
END_TEST

START_TEST(test_rope_normal_full_rotation) {
    const struct rope_case c = {D, MG_ROPE_NORMAL, 10000.0f, 1.0f, 5, {0, 1, 2, 17, 63}};
    check_rope(&c, 2, 1e-5);
}
END_TEST

START_TEST(test_rope_neox_freq_scale) {
    const struct rope_case c = {D, MG_ROPE_NEOX, 10000.0f, 0.25f, 4, {3, 9, 40, 64}};
    check_rope(&c, 3, 1e-5);
}
END_TEST

START_TEST(test_rope_normal_freq_scale_and_base) {
    const struct rope_case c = {D, MG_ROPE_NORMAL, 1000000.0f, 0.5f, 4, {1, 5, 33, 60}};
    check_rope(&c, 4, 1e-5);
}
END_TEST

START_TEST(test_rope_neox_partial_rotation_leaves_the_tail) {
    const struct rope_case c = {8, MG_ROPE_NEOX, 10000.0f, 1.0f, 3, {4, 11, 50}};
    check_rope(&c, 5, 1e-5);
}
END_TEST

START_TEST(test_rope_normal_partial_rotation_leaves_the_tail) {
    const struct rope_case c = {6, MG_ROPE_NORMAL, 10000.0f, 1.0f, 3, {4, 11, 50}};
    check_rope(&c, 6, 1e-5);
}
END_TEST

// Positions out of order and repeated: each token is turned by its own.
START_TEST(test_rope_positions_per_token) {
    const struct rope_case c = {D, MG_ROPE_NEOX, 10000.0f, 1.0f, 6, {5, 0, 63, 5, 1, 0}};
    check_rope(&c, 7, 1e-5);
}
END_TEST

// Position 0 is the identity, to the bit.
START_TEST(test_rope_position_zero_is_identity) {
    const struct rope_case c = {D, MG_ROPE_NEOX, 10000.0f, 1.0f, 2, {0, 0}};
    ck_assert(check_rope(&c, 8, 0.0) == 0.0);
}
END_TEST

// At position 3000 the float angle p * theta_scale^i is off by about
// (i + 2) * 2^-24 of itself: the tolerance grows with the angle.
START_TEST(test_rope_far_position) {
    const struct rope_case c = {D, MG_ROPE_NEOX, 10000.0f, 1.0f, 2, {3000, 2999}};
    const double angle_err = (D / 2 + 2) * ldexp(1.0, -24) * 3000.0;
    check_rope(&c, 9, 2.0 * angle_err + 1e-5);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("rope");
    MG_TCASE(s, "formula", test_rope_neox_full_rotation, test_rope_normal_full_rotation, test_rope_neox_freq_scale,
                test_rope_normal_freq_scale_and_base, test_rope_neox_partial_rotation_leaves_the_tail,
                test_rope_normal_partial_rotation_leaves_the_tail, test_rope_positions_per_token,
                test_rope_position_zero_is_identity, test_rope_far_position);
    return s;
}
