//@file 03
// ops.c - op constructors: check the shapes, record op and src, return.
//
// Mirrors the op half of ggml.c (ggml_add_impl, ggml_mul_mat, ...): every
// function here is a shape rule plus bookkeeping. The arithmetic is in
// compute.c, and it runs only when the result is computed.
#include "ops.h"


// b can be broadcast over a when each of a's dimensions is a whole number of b's.
static bool can_repeat(const struct mg_tensor * b, const struct mg_tensor * a) {
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        if (b->ne[i] <= 0 || a->ne[i] % b->ne[i] != 0) return false;
    }
    return true;
}

// The result tensor of an op: a fresh F32 node of the given shape, or, in
// place, a view of a that the op will overwrite.
static struct mg_tensor * new_result(struct mg_context * ctx, struct mg_tensor * a, int n_dims, const int64_t * ne,
                                     bool inplace) {
    if (inplace) return mg_view_tensor(ctx, a);
    return mg_new_node(ctx, MG_TYPE_F32, n_dims, ne);
}

//@+ 03 binary-op
static struct mg_tensor * binary_op(struct mg_context * ctx, enum mg_op op, struct mg_tensor * a,
                                    struct mg_tensor * b, bool inplace) {
    MG_ASSERT(can_repeat(b, a) && "b must broadcast over a: every a->ne[i] a multiple of b->ne[i]");
    MG_ASSERT(a->type == MG_TYPE_F32 && b->type == MG_TYPE_F32);
    struct mg_tensor * t = new_result(ctx, a, MG_MAX_DIMS, a->ne, inplace);
    t->op     = op;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}
//@- 03 binary-op

struct mg_tensor * mg_add(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_ADD, a, b, false);
}
struct mg_tensor * mg_add_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_ADD, a, b, true);
}
struct mg_tensor * mg_sub(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_SUB, a, b, false);
}
struct mg_tensor * mg_sub_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_SUB, a, b, true);
}
struct mg_tensor * mg_mul(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_MUL, a, b, false);
}
struct mg_tensor * mg_mul_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_MUL, a, b, true);
}
struct mg_tensor * mg_div(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_DIV, a, b, false);
}
struct mg_tensor * mg_div_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    return binary_op(ctx, MG_OP_DIV, a, b, true);
}

static struct mg_tensor * unary_op(struct mg_context * ctx, enum mg_op op, struct mg_tensor * a, bool inplace) {
    MG_ASSERT(a->type == MG_TYPE_F32);
    struct mg_tensor * t = new_result(ctx, a, MG_MAX_DIMS, a->ne, inplace);
    t->op     = op;
    t->src[0] = a;
    return t;
}

static struct mg_tensor * scale_impl(struct mg_context * ctx, struct mg_tensor * a, float s, bool inplace) {
    struct mg_tensor * t = unary_op(ctx, MG_OP_SCALE, a, inplace);
    mg_set_op_param_f32(t, 0, s);
    return t;
}

struct mg_tensor * mg_scale(struct mg_context * ctx, struct mg_tensor * a, float s) {
    return scale_impl(ctx, a, s, false);
}
struct mg_tensor * mg_scale_inplace(struct mg_context * ctx, struct mg_tensor * a, float s) {
    return scale_impl(ctx, a, s, true);
}

struct mg_tensor * mg_sqr(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_SQR, a, false);
}
struct mg_tensor * mg_sqr_inplace(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_SQR, a, true);
}
struct mg_tensor * mg_sqrt(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_SQRT, a, false);
}
struct mg_tensor * mg_sqrt_inplace(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_SQRT, a, true);
}
struct mg_tensor * mg_relu(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_RELU, a, false);
}
struct mg_tensor * mg_relu_inplace(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_RELU, a, true);
}
struct mg_tensor * mg_silu(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_SILU, a, false);
}
struct mg_tensor * mg_silu_inplace(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_SILU, a, true);
}
struct mg_tensor * mg_gelu(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_GELU, a, false);
}
struct mg_tensor * mg_gelu_inplace(struct mg_context * ctx, struct mg_tensor * a) {
    return unary_op(ctx, MG_OP_GELU, a, true);
}

struct mg_tensor * mg_sum_rows(struct mg_context * ctx, struct mg_tensor * a) {
    MG_ASSERT(a->type == MG_TYPE_F32);
    const int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, ne);
    t->op     = MG_OP_SUM_ROWS;
    t->src[0] = a;
    return t;
}

static struct mg_tensor * rms_norm_impl(struct mg_context * ctx, struct mg_tensor * a, float eps, bool inplace) {
    struct mg_tensor * t = unary_op(ctx, MG_OP_RMS_NORM, a, inplace);
    mg_set_op_param_f32(t, 0, eps);
    return t;
}

struct mg_tensor * mg_rms_norm(struct mg_context * ctx, struct mg_tensor * a, float eps) {
    return rms_norm_impl(ctx, a, eps, false);
}
struct mg_tensor * mg_rms_norm_inplace(struct mg_context * ctx, struct mg_tensor * a, float eps) {
    return rms_norm_impl(ctx, a, eps, true);
}

// soft_max keeps its scale in op_params[0] and its optional mask in src[1].
static struct mg_tensor * soft_max_impl(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * mask,
                                        float scale, bool inplace) {
    struct mg_tensor * t = unary_op(ctx, MG_OP_SOFT_MAX, a, inplace);
    mg_set_op_param_f32(t, 0, scale);
    //@+ 06 soft-max-mask
    if (mask != NULL) {
        MG_ASSERT(mask->type == MG_TYPE_F32 || mask->type == MG_TYPE_F16);
        MG_ASSERT(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && "one mask row per row of a");
        MG_ASSERT(mg_is_contiguous(mask));
        //@+ full soft-max-mask-4d
        MG_ASSERT(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0 && "mask matrices broadcast over a's");
        //@- full soft-max-mask-4d
    }
    //@- 06 soft-max-mask
    t->src[1] = mask;   // NULL for a plain softmax
    return t;
}

struct mg_tensor * mg_soft_max(struct mg_context * ctx, struct mg_tensor * a) {
    return soft_max_impl(ctx, a, NULL, 1.0f, false);
}
struct mg_tensor * mg_soft_max_inplace(struct mg_context * ctx, struct mg_tensor * a) {
    return soft_max_impl(ctx, a, NULL, 1.0f, true);
}

struct mg_tensor * mg_mul_mat(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    MG_ASSERT(a->ne[0] == b->ne[0] && "mul_mat multiplies over ne[0]: both rows must have the same length");
    MG_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && "b's matrices must be a multiple of a's");
    MG_ASSERT(!mg_is_transposed(a) && "mul_mat reads whole rows of a: make it contiguous with mg_cont");
    MG_ASSERT(b->type == MG_TYPE_F32);
    const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, ne);
    t->op     = MG_OP_MUL_MAT;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

struct mg_tensor * mg_cont(struct mg_context * ctx, struct mg_tensor * a) {
    struct mg_tensor * t = mg_new_node(ctx, a->type, 4, a->ne);
    t->op     = MG_OP_CONT;
    t->src[0] = a;
    mg_format_name(t, "%s (cont)", a->name);
    return t;
}

struct mg_tensor * mg_cpy(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    MG_ASSERT(mg_nelements(a) == mg_nelements(b) && "cpy needs as many elements in the destination");
    MG_ASSERT(a->type == MG_TYPE_F32 || a->type == b->type);
    struct mg_tensor * t = mg_view_tensor(ctx, b);   // the result IS b's bytes
    t->op     = MG_OP_CPY;
    t->src[0] = a;
    t->src[1] = b;
    mg_format_name(t, "%s (copy of %s)", b->name, a->name);
    return t;
}

//@+ full shift
// ggml_cast: a copy of a in another type, as a new tensor (the CPY op with a
// destination of its own). It lets an F16 tensor become F32 for the ops that
// read only F32 (mg_rope, in the K-shift of kv_cache.c).
struct mg_tensor * mg_cast(struct mg_context * ctx, struct mg_tensor * a, enum mg_type type) {
    MG_ASSERT((a->type == MG_TYPE_F32 || a->type == MG_TYPE_F16) && (type == MG_TYPE_F32 || type == MG_TYPE_F16));
    struct mg_tensor * t = mg_new_node(ctx, type, 4, a->ne);
    t->op     = MG_OP_CPY;
    t->src[0] = a;
    mg_format_name(t, "%s (%s)", a->name, mg_type_name(type));
    return t;
}
//@- full shift

#if 0 //@old 03..09 get-rows
struct mg_tensor * mg_get_rows(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * ids) {
    MG_ASSERT(ids->type == MG_TYPE_I32 && ids->ne[1] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1);
    MG_ASSERT(a->ne[2] == 1 && a->ne[3] == 1);
    const int64_t ne[2] = {a->ne[0], ids->ne[0]};
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 2, ne);
    t->op     = MG_OP_GET_ROWS;
    t->src[0] = a;
    t->src[1] = ids;
    return t;
}
#endif //@old get-rows
//@+ full moe
// ggml_get_rows' shape rule: ids {k, m, l} picks rows of a's matrices
// {n, rows, m, l}; the result is {n, k, m, l}.
struct mg_tensor * mg_get_rows(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * ids) {
    MG_ASSERT(ids->type == MG_TYPE_I32 && ids->ne[3] == 1);
    MG_ASSERT(a->ne[2] == ids->ne[1] && a->ne[3] == ids->ne[2] && "one matrix of a per column of ids");
    const int64_t ne[4] = {a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2]};
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, ne);
    t->op     = MG_OP_GET_ROWS;
    t->src[0] = a;
    t->src[1] = ids;
    return t;
}
//@- full moe

//@+ 06 attention-ops
struct mg_tensor * mg_soft_max_ext(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * mask,
                                   float scale) {
    return soft_max_impl(ctx, a, mask, scale, false);
}

struct mg_tensor * mg_rope(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * pos, int n_rot,
                           enum mg_rope_mode mode, float freq_base, float freq_scale) {
    MG_ASSERT(a->type == MG_TYPE_F32);
    MG_ASSERT(pos->type == MG_TYPE_I32 && pos->ne[0] == a->ne[2] && "one position per token (a->ne[2])");
    MG_ASSERT(n_rot % 2 == 0 && n_rot <= a->ne[0]);
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, a->ne);
    t->op     = MG_OP_ROPE;
    t->src[0] = a;
    t->src[1] = pos;
    mg_set_op_param_i32(t, 0, n_rot);
    mg_set_op_param_i32(t, 1, (int32_t) mode);
    mg_set_op_param_f32(t, 2, freq_base);
    mg_set_op_param_f32(t, 3, freq_scale);
    return t;
}
//@- 06 attention-ops

//@+ full rope-freqs
struct mg_tensor * mg_rope_ext(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * pos,
                               struct mg_tensor * freq_factors, int n_rot, enum mg_rope_mode mode, float freq_base,
                               float freq_scale) {
    struct mg_tensor * t = mg_rope(ctx, a, pos, n_rot, mode, freq_base, freq_scale);
    if (freq_factors != NULL) {
        MG_ASSERT(freq_factors->type == MG_TYPE_F32 && freq_factors->ne[0] >= n_rot / 2 && "one factor per pair");
        t->src[2] = freq_factors;
    }
    return t;
}
//@- full rope-freqs

//@+ 09 set-rows
struct mg_tensor * mg_set_rows(struct mg_context * ctx, struct mg_tensor * dst, struct mg_tensor * src,
                               struct mg_tensor * idx) {
    MG_ASSERT(src->type == MG_TYPE_F32 && (dst->type == MG_TYPE_F32 || dst->type == MG_TYPE_F16));
    MG_ASSERT(src->ne[0] == dst->ne[0] && "rows must have the same length");
    MG_ASSERT(idx->type == MG_TYPE_I32 && idx->ne[0] == mg_nrows(src) && "one index per row of src");
    MG_ASSERT(dst->ne[2] == 1 && dst->ne[3] == 1 && mg_is_contiguous(idx));
    struct mg_tensor * t = mg_view_tensor(ctx, dst);
    t->op     = MG_OP_SET_ROWS;
    t->src[0] = src;
    t->src[1] = idx;
    t->src[2] = dst;   // so that the graph holds the destination too
    return t;
}
//@- 09 set-rows

//@+ full fused-ops
struct mg_tensor * mg_swiglu(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b) {
    MG_ASSERT(mg_are_same_shape(a, b) && a->type == MG_TYPE_F32 && b->type == MG_TYPE_F32);
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, a->ne);
    t->op     = MG_OP_SWIGLU;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

struct mg_tensor * mg_flash_attn(struct mg_context * ctx, struct mg_tensor * q, struct mg_tensor * k,
                                 struct mg_tensor * v, struct mg_tensor * mask, float scale) {
    MG_ASSERT(q->type == MG_TYPE_F32 && q->ne[0] == k->ne[0] && k->ne[0] == v->ne[0]);
    MG_ASSERT(k->ne[1] == v->ne[1] && k->ne[2] == v->ne[2] && q->ne[2] % k->ne[2] == 0);
    MG_ASSERT(mask == NULL || (mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1]));
    const int64_t ne[4] = {q->ne[0], q->ne[2], q->ne[1], 1};   // {D, H, n_tokens}
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, ne);
    t->op     = MG_OP_FLASH_ATTN;
    t->src[0] = q;
    t->src[1] = k;
    t->src[2] = v;
    t->src[3] = mask;
    mg_set_op_param_f32(t, 0, scale);
    return t;
}
//@- full fused-ops

//@+ full moe
struct mg_tensor * mg_argsort(struct mg_context * ctx, struct mg_tensor * a, enum mg_sort_order order) {
    MG_ASSERT(a->type == MG_TYPE_F32 && a->ne[0] <= INT32_MAX);
    MG_ASSERT((order == MG_SORT_ORDER_ASC || order == MG_SORT_ORDER_DESC) && "argsort: order must be ASC or DESC");
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_I32, 4, a->ne);
    t->op     = MG_OP_ARGSORT;
    t->src[0] = a;
    mg_set_op_param_i32(t, 0, (int32_t) order);
    return t;
}

// ggml_argsort_top_k: the whole row is sorted, the view keeps the first k.
struct mg_tensor * mg_argsort_top_k(struct mg_context * ctx, struct mg_tensor * a, int k) {
    MG_ASSERT(k >= 1 && a->ne[0] >= k && "top_k: k must be between 1 and the row length");
    struct mg_tensor * sorted = mg_argsort(ctx, a, MG_SORT_ORDER_DESC);
    return mg_view_4d(ctx, sorted, k, sorted->ne[1], sorted->ne[2], sorted->ne[3], sorted->nb[1], sorted->nb[2],
                      sorted->nb[3], 0);
}

struct mg_tensor * mg_clamp(struct mg_context * ctx, struct mg_tensor * a, float min, float max) {
    struct mg_tensor * t = unary_op(ctx, MG_OP_CLAMP, a, false);
    mg_set_op_param_f32(t, 0, min);
    mg_set_op_param_f32(t, 1, max);
    return t;
}

// ggml_mul_mat_id's shape rules: as is a stack of matrices, b and ids have
// one plane / one column per token, and b's rows repeat over the picks.
struct mg_tensor * mg_mul_mat_id(struct mg_context * ctx, struct mg_tensor * as, struct mg_tensor * b,
                                 struct mg_tensor * ids) {
    MG_ASSERT(!mg_is_transposed(as) && as->ne[3] == 1 && "mul_mat_id: as must be {K, N, n_as}");
    MG_ASSERT(b->type == MG_TYPE_F32 && b->ne[3] == 1 && "mul_mat_id: b must be F32 {K, n_b, T}");
    MG_ASSERT(ids->type == MG_TYPE_I32 && ids->ne[2] == 1 && ids->ne[3] == 1 && "mul_mat_id: ids must be I32 {n_used, T}");
    MG_ASSERT(ids->ne[1] == b->ne[2] && "mul_mat_id: one column of ids per token (b->ne[2])");
    MG_ASSERT(as->ne[0] == b->ne[0] && "mul_mat_id multiplies over ne[0]: both rows must have the same length");
    MG_ASSERT(b->ne[1] >= 1 && ids->ne[0] % b->ne[1] == 0 && "mul_mat_id: b->ne[1] must divide n_used");
    const int64_t ne[4] = {as->ne[1], ids->ne[0], b->ne[2], 1};
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, ne);
    t->op     = MG_OP_MUL_MAT_ID;
    t->src[0] = as;
    t->src[1] = b;
    t->src[2] = ids;
    return t;
}
//@- full moe
