//@file 01
// tensor.c - tensor headers, the type table, views and element access.
//
// Mirrors the tensor half of ggml.c: ggml_new_tensor_impl, ggml_view_*,
// ggml_reshape_*, ggml_transpose, ggml_permute, ggml_nbytes,
// ggml_is_contiguous, and the type_traits[] table.
#include "tensor.h"
#include "quants.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

static _Thread_local char mg_error_message[1024];

_Noreturn void mg_abort(const char * file, int line, const char * fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "mg: %s:%d: ", file, line);
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, "\n");
    abort();
}

const char * mg_last_error(void) {
    return mg_error_message;
}

// How many bytes at s[i] form one character a terminal only shows: 0 for a
// control byte (C0 with \n and \t, DEL, the C1 controls U+0080..U+009F) and
// for a byte that starts no whole UTF-8 character (a lone 0x9B is CSI to a
// terminal in 8-bit mode). Those are the bytes a terminal acts on.
static size_t shown_char_len(const unsigned char * s, size_t len, size_t i) {
    const unsigned char c = s[i];
    if (c < 0x20 || c == 0x7F) return 0;
    if (c < 0x80) return 1;
    const size_t n = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;   // 80..C1, F5..FF start none
    if (n == 0 || i + n > len) return 0;
    for (size_t k = 1; k < n; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return 0;
    }
    return c == 0xC2 && s[i + 1] <= 0x9F ? 0 : n;
}

// s[0..len) into out (cap >= 8 bytes, NUL-terminated), every byte
// shown_char_len refuses written \xNN; cut with "..." when it does not fit.
static void escape_controls(const char * s, size_t len, char * out, size_t cap) {
    const unsigned char * u = (const unsigned char *) s;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        const size_t n    = shown_char_len(u, len, i);
        const size_t need = n > 0 ? n : 4;
        if (o + need + 4 > cap) {   // room for "..." and the NUL
            memcpy(out + o, "...", 4);
            return;
        }
        if (n > 0) memcpy(out + o, s + i, n);
        else snprintf(out + o, cap - o, "\\x%02x", u[i]);
        o += need;
        i += n > 0 ? n : 1;
    }
    out[o] = '\0';
}

const char * mg_quote(const char * s) {
    static _Thread_local char slots[4][512];
    static _Thread_local int  next = 0;
    if (s == NULL) return "(null)";
    char * out = slots[next];
    next = (next + 1) % 4;
    escape_controls(s, strlen(s), out, sizeof(slots[0]));
    return out;
}

void mg_set_error(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    // A message may hold names from users and files that its caller did not
    // quote: escaped here too, so that no error can carry ESC to a terminal.
    // (Formatted apart first: an argument may be the last message itself.)
    char raw[sizeof(mg_error_message)];
    vsnprintf(raw, sizeof(raw), fmt, args);
    escape_controls(raw, strlen(raw), mg_error_message, sizeof(mg_error_message));
    va_end(args);
}

void mg_clear_error(void) {
    mg_error_message[0] = '\0';
}

// ---------------------------------------------------------------------------
// The type table (ggml.c, type_traits[]). Indexed by the ggml type id; an
// entry with blck_size 0 is a type this engine does not know.
// ---------------------------------------------------------------------------

static const struct mg_type_traits type_traits[MG_TYPE_COUNT] = {
    [MG_TYPE_F32] = {
        .name = "f32", .blck_size = 1, .type_size = sizeof(float), .is_quantized = false,
        .to_float = mg_f32_copy_row, .from_float = NULL,
    },
    [MG_TYPE_F16] = {
        .name = "f16", .blck_size = 1, .type_size = sizeof(mg_fp16_t), .is_quantized = false,
        .to_float = mg_fp16_to_fp32_row, .from_float = mg_fp32_to_fp16_row,
    },
    [MG_TYPE_Q4_0] = {
        .name = "q4_0", .blck_size = MG_QK4_0, .type_size = sizeof(struct mg_block_q4_0), .is_quantized = true,
        .to_float = mg_dequantize_row_q4_0, .from_float = mg_quantize_row_q4_0_ref,
    },
    [MG_TYPE_Q8_0] = {
        .name = "q8_0", .blck_size = MG_QK8_0, .type_size = sizeof(struct mg_block_q8_0), .is_quantized = true,
        .to_float = mg_dequantize_row_q8_0, .from_float = mg_quantize_row_q8_0_ref,
    },
    //@+ 03 i32
    [MG_TYPE_I32] = {
        .name = "i32", .blck_size = 1, .type_size = sizeof(int32_t), .is_quantized = false,
        .to_float = NULL, .from_float = NULL,
    },
    //@- 03 i32
    //@+ 09 bf16
    [MG_TYPE_BF16] = {
        .name = "bf16", .blck_size = 1, .type_size = sizeof(mg_bf16_t), .is_quantized = false,
        .to_float = mg_bf16_to_fp32_row, .from_float = mg_fp32_to_bf16_row,
    },
    //@- 09 bf16
    //@+ 09 k-quants
    [MG_TYPE_Q4_K] = {
        .name = "q4_K", .blck_size = MG_QK_K, .type_size = sizeof(struct mg_block_q4_K), .is_quantized = true,
        .to_float = mg_dequantize_row_q4_K,
        //@+ full k-quantize
        .from_float = mg_quantize_row_q4_K_ref,   // chapter 09 only reads Q4_K weights
        //@- full k-quantize
    },
    [MG_TYPE_Q6_K] = {
        .name = "q6_K", .blck_size = MG_QK_K, .type_size = sizeof(struct mg_block_q6_K), .is_quantized = true,
        .to_float = mg_dequantize_row_q6_K,
        //@+ full k-quantize
        .from_float = mg_quantize_row_q6_K_ref,   // chapter 09 only reads Q6_K weights
        //@- full k-quantize
    },
    [MG_TYPE_Q8_K] = {
        .name = "q8_K", .blck_size = MG_QK_K, .type_size = sizeof(struct mg_block_q8_K), .is_quantized = true,
        .to_float = mg_dequantize_row_q8_K, .from_float = mg_quantize_row_q8_K_ref,
    },
    //@- 09 k-quants
    //@+ full more-quants
    [MG_TYPE_Q4_1] = {
        .name = "q4_1", .blck_size = MG_QK4_1, .type_size = sizeof(struct mg_block_q4_1), .is_quantized = true,
        .to_float = mg_dequantize_row_q4_1, .from_float = mg_quantize_row_q4_1_ref,
    },
    [MG_TYPE_Q5_0] = {
        .name = "q5_0", .blck_size = MG_QK5_0, .type_size = sizeof(struct mg_block_q5_0), .is_quantized = true,
        .to_float = mg_dequantize_row_q5_0, .from_float = mg_quantize_row_q5_0_ref,
    },
    [MG_TYPE_Q5_1] = {
        .name = "q5_1", .blck_size = MG_QK5_1, .type_size = sizeof(struct mg_block_q5_1), .is_quantized = true,
        .to_float = mg_dequantize_row_q5_1, .from_float = mg_quantize_row_q5_1_ref,
    },
    [MG_TYPE_Q8_1] = {
        .name = "q8_1", .blck_size = MG_QK8_1, .type_size = sizeof(struct mg_block_q8_1), .is_quantized = true,
        .to_float = mg_dequantize_row_q8_1, .from_float = mg_quantize_row_q8_1_ref,
    },
    [MG_TYPE_Q2_K] = {
        .name = "q2_K", .blck_size = MG_QK_K, .type_size = sizeof(struct mg_block_q2_K), .is_quantized = true,
        .to_float = mg_dequantize_row_q2_K, .from_float = mg_quantize_row_q2_K_ref,
    },
    [MG_TYPE_Q3_K] = {
        .name = "q3_K", .blck_size = MG_QK_K, .type_size = sizeof(struct mg_block_q3_K), .is_quantized = true,
        .to_float = mg_dequantize_row_q3_K, .from_float = mg_quantize_row_q3_K_ref,
    },
    [MG_TYPE_Q5_K] = {
        .name = "q5_K", .blck_size = MG_QK_K, .type_size = sizeof(struct mg_block_q5_K), .is_quantized = true,
        .to_float = mg_dequantize_row_q5_K, .from_float = mg_quantize_row_q5_K_ref,
    },
    [MG_TYPE_IQ4_NL] = {
        .name = "iq4_nl", .blck_size = MG_QK4_NL, .type_size = sizeof(struct mg_block_iq4_nl), .is_quantized = true,
        .to_float = mg_dequantize_row_iq4_nl, .from_float = mg_quantize_row_iq4_nl_ref,
    },
    //@- full more-quants
};

const struct mg_type_traits * mg_get_type_traits(enum mg_type type) {
    return mg_type_is_supported((int) type) ? &type_traits[type] : NULL;
}

bool mg_type_is_supported(int type_id) {
    return type_id >= 0 && type_id < MG_TYPE_COUNT && type_traits[type_id].blck_size != 0;
}

const char * mg_type_name(enum mg_type type) {
    if (mg_type_is_supported((int) type)) return type_traits[type].name;
    static _Thread_local char unknown[32];
    snprintf(unknown, sizeof(unknown), "type-%d", (int) type);
    return unknown;
}

int64_t mg_blck_size(enum mg_type type) {
    MG_ASSERT(mg_type_is_supported((int) type));
    return type_traits[type].blck_size;
}

size_t mg_type_size(enum mg_type type) {
    MG_ASSERT(mg_type_is_supported((int) type));
    return type_traits[type].type_size;
}

size_t mg_row_size(enum mg_type type, int64_t ne) {
    MG_ASSERT(ne % mg_blck_size(type) == 0);
    return mg_type_size(type) * (size_t) (ne / mg_blck_size(type));
}

// ---------------------------------------------------------------------------
// Op names. The static_assert makes adding an op fail to compile until every
// table has its entry (ggml.c does the same with GGML_OP_COUNT).
// ---------------------------------------------------------------------------

static const char * const op_names[MG_OP_COUNT] = {
    [MG_OP_NONE]      = "NONE",
    [MG_OP_VIEW]      = "VIEW",
    [MG_OP_RESHAPE]   = "RESHAPE",
    [MG_OP_PERMUTE]   = "PERMUTE",
    [MG_OP_TRANSPOSE] = "TRANSPOSE",
    //@+ 03 ops
    [MG_OP_CONT]      = "CONT",
    [MG_OP_ADD]       = "ADD",
    [MG_OP_SUB]       = "SUB",
    [MG_OP_MUL]       = "MUL",
    [MG_OP_DIV]       = "DIV",
    [MG_OP_SCALE]     = "SCALE",
    [MG_OP_SQR]       = "SQR",
    [MG_OP_SQRT]      = "SQRT",
    [MG_OP_RELU]      = "RELU",
    [MG_OP_SILU]      = "SILU",
    [MG_OP_GELU]      = "GELU",
    [MG_OP_SUM_ROWS]  = "SUM_ROWS",
    [MG_OP_RMS_NORM]  = "RMS_NORM",
    [MG_OP_SOFT_MAX]  = "SOFT_MAX",
    [MG_OP_MUL_MAT]   = "MUL_MAT",
    [MG_OP_CPY]       = "CPY",
    [MG_OP_GET_ROWS]  = "GET_ROWS",
    //@- 03 ops
    //@+ 06 attention-ops
    [MG_OP_ROPE]      = "ROPE",
    //@- 06 attention-ops
    //@+ 09 set-rows
    [MG_OP_SET_ROWS]  = "SET_ROWS",
    //@- 09 set-rows
    //@+ full fused-ops
    [MG_OP_SWIGLU]     = "SWIGLU",
    [MG_OP_FLASH_ATTN] = "FLASH_ATTN",
    //@- full fused-ops
    //@+ full moe
    [MG_OP_ARGSORT]    = "ARGSORT",
    [MG_OP_CLAMP]      = "CLAMP",
    [MG_OP_MUL_MAT_ID] = "MUL_MAT_ID",
    //@- full moe
};

static const char * const op_symbols[MG_OP_COUNT] = {
    [MG_OP_NONE]      = "",
    [MG_OP_VIEW]      = "view(x)",
    [MG_OP_RESHAPE]   = "reshape(x)",
    [MG_OP_PERMUTE]   = "permute(x)",
    [MG_OP_TRANSPOSE] = "transpose(x)",
    //@+ 03 ops
    [MG_OP_CONT]      = "cont(x)",
    [MG_OP_ADD]       = "x+y",
    [MG_OP_SUB]       = "x-y",
    [MG_OP_MUL]       = "x*y",
    [MG_OP_DIV]       = "x/y",
    [MG_OP_SCALE]     = "s*x",
    [MG_OP_SQR]       = "x^2",
    [MG_OP_SQRT]      = "sqrt(x)",
    [MG_OP_RELU]      = "relu(x)",
    [MG_OP_SILU]      = "silu(x)",
    [MG_OP_GELU]      = "gelu(x)",
    [MG_OP_SUM_ROWS]  = "sum_rows(x)",
    [MG_OP_RMS_NORM]  = "rms_norm(x)",
    [MG_OP_SOFT_MAX]  = "soft_max(x)",
    [MG_OP_MUL_MAT]   = "X^T Y",
    [MG_OP_CPY]       = "x->y",
    [MG_OP_GET_ROWS]  = "get_rows(x)",
    //@- 03 ops
    //@+ 06 attention-ops
    [MG_OP_ROPE]      = "rope(x)",
    //@- 06 attention-ops
    //@+ 09 set-rows
    [MG_OP_SET_ROWS]  = "y[i]=x",
    //@- 09 set-rows
    //@+ full fused-ops
    [MG_OP_SWIGLU]     = "silu(x)*y",
    [MG_OP_FLASH_ATTN] = "flash_attn(q,k,v)",
    //@- full fused-ops
    //@+ full moe
    [MG_OP_ARGSORT]    = "argsort(x)",
    [MG_OP_CLAMP]      = "clamp(x)",
    [MG_OP_MUL_MAT_ID] = "X[ids]^T Y",
    //@- full moe
};

#if 0 //@old 01..02 op-count
static_assert(MG_OP_COUNT == 5, "a new op needs a name and a symbol above, then the number on this line raised to the new MG_OP_COUNT");
#endif //@old op-count
#if 0 //@old 03..05 op-count
static_assert(MG_OP_COUNT == 22, "a new op needs a name and a symbol above, then the number on this line raised to the new MG_OP_COUNT");
#endif //@old op-count
#if 0 //@old 06..08 op-count
static_assert(MG_OP_COUNT == 23, "a new op needs a name and a symbol above, then the number on this line raised to the new MG_OP_COUNT");
#endif //@old op-count
#if 0 //@old 09..09 op-count
static_assert(MG_OP_COUNT == 24, "a new op needs a name and a symbol above, then the number on this line raised to the new MG_OP_COUNT");
#endif //@old op-count
//@+ full op-count
static_assert(MG_OP_COUNT == 29, "a new op needs a name and a symbol above, then the number on this line raised to the new MG_OP_COUNT");
//@- full op-count

const char * mg_op_name(enum mg_op op) {
    return op >= 0 && op < MG_OP_COUNT ? op_names[op] : "?";
}

const char * mg_op_symbol(enum mg_op op) {
    return op >= 0 && op < MG_OP_COUNT ? op_symbols[op] : "?";
}

bool mg_op_is_view(enum mg_op op) {
    return op == MG_OP_VIEW || op == MG_OP_RESHAPE || op == MG_OP_PERMUTE || op == MG_OP_TRANSPOSE;
}

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

int64_t mg_nelements(const struct mg_tensor * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t mg_nrows(const struct mg_tensor * t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

// The bytes from the first element to just past the last one. For a
// non-contiguous view that is the span it touches, not ne*type_size
// (ggml_nbytes).
size_t mg_nbytes(const struct mg_tensor * t) {
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        if (t->ne[i] <= 0) return 0;
    }
    const int64_t blck = mg_blck_size(t->type);
    size_t bytes;
    if (blck == 1) {
        // The last element's offset plus its size: right even when dim 0 is
        // not the one with the smallest stride (a transposed view).
        bytes = mg_type_size(t->type);
        for (int i = 0; i < MG_MAX_DIMS; i++) bytes += (size_t) (t->ne[i] - 1) * t->nb[i];
    } else {
        // Blocks are never transposed: a row is its blocks side by side.
        bytes = (size_t) (t->ne[0] / blck) * t->nb[0];
        for (int i = 1; i < MG_MAX_DIMS; i++) bytes += (size_t) (t->ne[i] - 1) * t->nb[i];
    }
    return bytes;
}

int mg_n_dims(const struct mg_tensor * t) {
    for (int i = MG_MAX_DIMS - 1; i >= 1; i--) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

// Contiguous: walking the elements in logical order walks memory without gaps.
// Dimensions of size 1 are never stepped, so their stride does not matter.
bool mg_is_contiguous(const struct mg_tensor * t) {
    size_t next_nb = mg_type_size(t->type);
    if (t->ne[0] != mg_blck_size(t->type) && t->nb[0] != next_nb) return false;
    next_nb *= (size_t) (t->ne[0] / mg_blck_size(t->type));
    for (int i = 1; i < MG_MAX_DIMS; i++) {
        if (t->ne[i] != 1) {
            if (t->nb[i] != next_nb) return false;
            next_nb *= (size_t) t->ne[i];
        }
    }
    return true;
}

bool mg_is_transposed(const struct mg_tensor * t) {
    return t->nb[0] > t->nb[1];
}

bool mg_are_same_shape(const struct mg_tensor * a, const struct mg_tensor * b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}
//@+ 04 shape-str

const char * mg_shape_str(const int64_t * ne, int n_dims, const char * sep, char * buf, size_t size) {
    int len = snprintf(buf, size, "[");
    for (int d = 0; d < n_dims && len > 0 && (size_t) len < size; d++) {
        len += snprintf(buf + len, size - (size_t) len, "%s%" PRId64, d > 0 ? sep : "", ne[d]);
    }
    if (len > 0 && (size_t) len < size) snprintf(buf + len, size - (size_t) len, "]");
    return buf;
}
//@- 04 shape-str

// ---------------------------------------------------------------------------
// Creating tensors (ggml_new_tensor_impl)
// ---------------------------------------------------------------------------

// The packed strides of a fresh tensor: each dimension steps over a whole copy
// of the one below it.
static void set_packed_strides(struct mg_tensor * t) {
    t->nb[0] = mg_type_size(t->type);
    t->nb[1] = t->nb[0] * (size_t) (t->ne[0] / mg_blck_size(t->type));
    for (int i = 2; i < MG_MAX_DIMS; i++) {
        t->nb[i] = t->nb[i - 1] * (size_t) t->ne[i - 1];
    }
}

// One constructor for everything: a fresh tensor with its own data, a header
// without data, or a view into view_src at view_offs.
static struct mg_tensor * new_tensor_impl(struct mg_context * ctx, enum mg_type type, int n_dims,
                                          const int64_t * ne, struct mg_tensor * view_src, size_t view_offs,
                                          bool want_data) {
    MG_ASSERT(mg_type_is_supported((int) type));
    MG_ASSERT(n_dims >= 1 && n_dims <= MG_MAX_DIMS);

    //@+ 01 view-flatten
    // A view of a view reads the same root bytes: record the root and add the
    // offsets, so following view_src never takes more than one step.
    if (view_src != NULL && view_src->view_src != NULL) {
        view_offs += view_src->view_offs;
        view_src   = view_src->view_src;
    }
    //@- 01 view-flatten

    size_t data_size = mg_row_size(type, ne[0]);
    for (int i = 1; i < n_dims; i++) {
        data_size *= (size_t) ne[i];
    }
    MG_ASSERT(view_src == NULL || view_offs + data_size <= mg_nbytes(view_src));

    const bool own_data = view_src == NULL && want_data && !mg_get_no_alloc(ctx);
    void * data = NULL;
    struct mg_tensor * t = mg_context_new_tensor_obj(ctx, own_data ? data_size : 0, &data);
    if (t == NULL) return NULL;

    t->type = type;
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        t->ne[i] = i < n_dims ? ne[i] : 1;
    }
    set_packed_strides(t);
    t->op        = MG_OP_NONE;
    t->view_src  = view_src;
    t->view_offs = view_offs;
    if (view_src != NULL) {
        t->data = view_src->data != NULL ? (char *) view_src->data + view_offs : NULL;
    } else {
        t->data = own_data ? data : NULL;
    }
    return t;
}

struct mg_tensor * mg_new_tensor(struct mg_context * ctx, enum mg_type type, int n_dims, const int64_t * ne) {
    return new_tensor_impl(ctx, type, n_dims, ne, NULL, 0, true);
}

struct mg_tensor * mg_new_tensor_1d(struct mg_context * ctx, enum mg_type type, int64_t ne0) {
    return mg_new_tensor(ctx, type, 1, &ne0);
}

struct mg_tensor * mg_new_tensor_2d(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return mg_new_tensor(ctx, type, 2, ne);
}

struct mg_tensor * mg_new_tensor_3d(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1,
                                    int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return mg_new_tensor(ctx, type, 3, ne);
}

struct mg_tensor * mg_new_tensor_4d(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1,
                                    int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return mg_new_tensor(ctx, type, 4, ne);
}

//@+ 03 new-node
struct mg_tensor * mg_new_node(struct mg_context * ctx, enum mg_type type, int n_dims, const int64_t * ne) {
    struct mg_tensor * t = new_tensor_impl(ctx, type, n_dims, ne, NULL, 0, false);
    MG_ASSERT(t != NULL && "the context is too small for this graph");
    return t;
}
//@- 03 new-node

struct mg_tensor * mg_set_name(struct mg_tensor * t, const char * name) {
    snprintf(t->name, sizeof(t->name), "%s", name);
    return t;
}

struct mg_tensor * mg_format_name(struct mg_tensor * t, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, args);
    va_end(args);
    return t;
}

const char * mg_get_name(const struct mg_tensor * t) {
    return t->name;
}

// ---------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------

// A header over a's bytes, starting offset bytes in, with packed strides for
// now; each view op then sets the strides it means.
static struct mg_tensor * new_view(struct mg_context * ctx, struct mg_tensor * a, enum mg_op op, int n_dims,
                                   const int64_t * ne, size_t offset) {
    struct mg_tensor * t = new_tensor_impl(ctx, a->type, n_dims, ne, a, offset, false);
    MG_ASSERT(t != NULL && "the context is too small for another view");
    t->op     = op;
    t->src[0] = a;
    mg_format_name(t, "%s (%s)", a->name, op == MG_OP_VIEW ? "view" : op == MG_OP_RESHAPE ? "reshaped"
                                          : op == MG_OP_PERMUTE ? "permuted" : "transposed");
    return t;
}

//@+ 03 view-tensor
struct mg_tensor * mg_view_tensor(struct mg_context * ctx, struct mg_tensor * a) {
    struct mg_tensor * t = new_tensor_impl(ctx, a->type, MG_MAX_DIMS, a->ne, a, 0, false);
    MG_ASSERT(t != NULL && "the context is too small for another view");
    for (int i = 0; i < MG_MAX_DIMS; i++) t->nb[i] = a->nb[i];
    mg_format_name(t, "%s (view)", a->name);
    return t;
}
//@- 03 view-tensor

static struct mg_tensor * view_impl(struct mg_context * ctx, struct mg_tensor * a, int n_dims, const int64_t * ne,
                                    const size_t * nb, size_t offset) {
    struct mg_tensor * t = new_view(ctx, a, MG_OP_VIEW, n_dims, ne, offset);
    memcpy(t->op_params, &offset, sizeof(offset));
    for (int i = 1; i < n_dims; i++) {
        t->nb[i] = nb[i - 1];
    }
    // Dimensions the caller did not name step over everything before them.
    for (int i = n_dims; i < MG_MAX_DIMS; i++) {
        t->nb[i] = t->nb[i - 1] * (size_t) t->ne[i - 1];
    }
    return t;
}

struct mg_tensor * mg_view_1d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, size_t offset) {
    return view_impl(ctx, a, 1, &ne0, NULL, offset);
}

struct mg_tensor * mg_view_2d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1, size_t nb1,
                              size_t offset) {
    const int64_t ne[2] = {ne0, ne1};
    const size_t  nb[1] = {nb1};
    return view_impl(ctx, a, 2, ne, nb, offset);
}

struct mg_tensor * mg_view_3d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                              size_t nb1, size_t nb2, size_t offset) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    const size_t  nb[2] = {nb1, nb2};
    return view_impl(ctx, a, 3, ne, nb, offset);
}

struct mg_tensor * mg_view_4d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                              int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const size_t  nb[3] = {nb1, nb2, nb3};
    return view_impl(ctx, a, 4, ne, nb, offset);
}

static struct mg_tensor * reshape_impl(struct mg_context * ctx, struct mg_tensor * a, int n_dims,
                                       const int64_t * ne) {
    MG_ASSERT(mg_is_contiguous(a) && "reshape needs contiguous data: add a cont first");
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= ne[i];
    MG_ASSERT(n == mg_nelements(a) && "reshape must keep the number of elements");
    return new_view(ctx, a, MG_OP_RESHAPE, n_dims, ne, 0);
}

struct mg_tensor * mg_reshape_1d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0) {
    return reshape_impl(ctx, a, 1, &ne0);
}

struct mg_tensor * mg_reshape_2d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return reshape_impl(ctx, a, 2, ne);
}

struct mg_tensor * mg_reshape_3d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1,
                                 int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return reshape_impl(ctx, a, 3, ne);
}

struct mg_tensor * mg_reshape_4d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1,
                                 int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return reshape_impl(ctx, a, 4, ne);
}

// Permute moves dimension i of a to position axis_i: both its count and its
// stride travel together, so the result reads the same bytes in a new order.
struct mg_tensor * mg_permute(struct mg_context * ctx, struct mg_tensor * a, int axis0, int axis1, int axis2,
                              int axis3) {
    const int axes[MG_MAX_DIMS] = {axis0, axis1, axis2, axis3};
    bool seen[MG_MAX_DIMS] = {false};
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        MG_ASSERT(axes[i] >= 0 && axes[i] < MG_MAX_DIMS && !seen[axes[i]] && "axes must be a permutation of 0..3");
        seen[axes[i]] = true;
    }
    struct mg_tensor * t = new_view(ctx, a, MG_OP_PERMUTE, MG_MAX_DIMS, a->ne, 0);
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        t->ne[axes[i]] = a->ne[i];
        t->nb[axes[i]] = a->nb[i];
        t->op_params[i] = axes[i];
    }
    return t;
}

//@+ 01 transpose
struct mg_tensor * mg_transpose(struct mg_context * ctx, struct mg_tensor * a) {
    struct mg_tensor * t = new_view(ctx, a, MG_OP_TRANSPOSE, MG_MAX_DIMS, a->ne, 0);
    t->ne[0] = a->ne[1];
    t->ne[1] = a->ne[0];
    t->nb[0] = a->nb[1];
    t->nb[1] = a->nb[0];
    t->nb[2] = a->nb[2];
    t->nb[3] = a->nb[3];
    return t;
}
//@- 01 transpose

// ---------------------------------------------------------------------------
// Element access
// ---------------------------------------------------------------------------

// Element i0 of the row at (i1, i2, i3) of any supported type, decoding the
// block it sits in when the type is quantized.
float mg_get_f32_nd(const struct mg_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    MG_ASSERT(t->data != NULL);
    switch (t->type) {
        case MG_TYPE_F32: return *(const float *) mg_element_ptr(t, i0, i1, i2, i3);
        case MG_TYPE_F16: return mg_fp16_to_fp32(*(const mg_fp16_t *) mg_element_ptr(t, i0, i1, i2, i3));
        //@+ 03 i32
        case MG_TYPE_I32: return (float) *(const int32_t *) mg_element_ptr(t, i0, i1, i2, i3);
        //@- 03 i32
        default: break;
    }
    const struct mg_type_traits * tt = mg_get_type_traits(t->type);
    MG_ASSERT(tt != NULL && tt->to_float != NULL);
    const int64_t blck = tt->blck_size;
    float block[256];
    MG_ASSERT(blck <= 256);
    tt->to_float(mg_element_ptr(t, i0 / blck, i1, i2, i3), block, blck);
    return block[i0 % blck];
}

void mg_set_f32_nd(struct mg_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    MG_ASSERT(t->data != NULL);
    void * p = mg_element_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
        case MG_TYPE_F32: *(float *) p = v; break;
        case MG_TYPE_F16: *(mg_fp16_t *) p = mg_fp32_to_fp16(v); break;
        //@+ 03 i32
        case MG_TYPE_I32: *(int32_t *) p = (int32_t) v; break;
        //@- 03 i32
        default: MG_ASSERT(false && "set one element of a quantized tensor: quantize a whole row instead");
    }
}

// Logical index -> (i0, i1, i2, i3), the way ggml_unravel_index does it.
static void unravel_index(const struct mg_tensor * t, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2,
                          int64_t * i3) {
    *i0 = i % t->ne[0];  i /= t->ne[0];
    *i1 = i % t->ne[1];  i /= t->ne[1];
    *i2 = i % t->ne[2];  i /= t->ne[2];
    *i3 = i;
}

float mg_get_f32_1d(const struct mg_tensor * t, int64_t i) {
    int64_t i0, i1, i2, i3;
    unravel_index(t, i, &i0, &i1, &i2, &i3);
    return mg_get_f32_nd(t, i0, i1, i2, i3);
}

void mg_set_f32_1d(struct mg_tensor * t, int64_t i, float v) {
    int64_t i0, i1, i2, i3;
    unravel_index(t, i, &i0, &i1, &i2, &i3);
    mg_set_f32_nd(t, i0, i1, i2, i3, v);
}

//@+ 03 i32
int32_t mg_get_i32_1d(const struct mg_tensor * t, int64_t i) {
    MG_ASSERT(t->type == MG_TYPE_I32 && t->data != NULL);
    int64_t i0, i1, i2, i3;
    unravel_index(t, i, &i0, &i1, &i2, &i3);
    return *(const int32_t *) mg_element_ptr(t, i0, i1, i2, i3);
}

void mg_set_i32_1d(struct mg_tensor * t, int64_t i, int32_t v) {
    MG_ASSERT(t->type == MG_TYPE_I32 && t->data != NULL);
    int64_t i0, i1, i2, i3;
    unravel_index(t, i, &i0, &i1, &i2, &i3);
    *(int32_t *) mg_element_ptr(t, i0, i1, i2, i3) = v;
}
//@- 03 i32

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

const char * mg_tensor_describe(const struct mg_tensor * t, char * buf, size_t size) {
    int n = snprintf(buf, size, "%s: %s ne=[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] nb=[%zu,%zu,%zu,%zu]",
                     t->name[0] ? t->name : "(unnamed)", mg_type_name(t->type),
                     t->ne[0], t->ne[1], t->ne[2], t->ne[3], t->nb[0], t->nb[1], t->nb[2], t->nb[3]);
    if (n >= 0 && (size_t) n < size && t->op != MG_OP_NONE) {
        n += snprintf(buf + n, size - (size_t) n, " op=%s", mg_op_name(t->op));
    }
    if (n >= 0 && (size_t) n < size && t->view_src != NULL) {
        snprintf(buf + n, size - (size_t) n, " (view of %s +%zu)",
                 t->view_src->name[0] ? t->view_src->name : "(unnamed)", t->view_offs);
    }
    return buf;
}

void mg_tensor_print(FILE * f, const struct mg_tensor * t) {
    char line[256];
    fprintf(f, "%s\n", mg_tensor_describe(t, line, sizeof(line)));
    if (t->data == NULL) {
        fprintf(f, "  (no data yet)\n");
        return;
    }
    const int64_t max_shown = 8;   // per dimension: enough to see the shape, short enough to read
    for (int64_t i3 = 0; i3 < t->ne[3] && i3 < max_shown; i3++) {
        for (int64_t i2 = 0; i2 < t->ne[2] && i2 < max_shown; i2++) {
            if (t->ne[2] > 1 || t->ne[3] > 1) fprintf(f, "  [:, :, %" PRId64 ", %" PRId64 "]\n", i2, i3);
            for (int64_t i1 = 0; i1 < t->ne[1] && i1 < max_shown; i1++) {
                fprintf(f, "  ");
                for (int64_t i0 = 0; i0 < t->ne[0] && i0 < max_shown; i0++) {
                    fprintf(f, " %9.4f", (double) mg_get_f32_nd(t, i0, i1, i2, i3));
                }
                fprintf(f, t->ne[0] > max_shown ? " ...\n" : "\n");
            }
            if (t->ne[1] > max_shown) fprintf(f, "   ...\n");
        }
    }
}
