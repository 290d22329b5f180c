//@file 01
// tensor.h - the n-dimensional tensor, its element types, and zero-copy views.
//
// A tensor is a small header (shape, strides, type, how it was made) that
// points at bytes somewhere else. Everything in this engine is built from it,
// exactly as everything in ggml is built from struct ggml_tensor (ggml.h).
//
// Worked example: a 2x3 matrix of floats, stored row after row.
//
//     struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2);
//     //   ne = {3, 2, 1, 1}     3 elements per row (ne[0] is innermost), 2 rows
//     //   nb = {4, 12, 24, 24}  bytes to step one element, one row, ...
//     struct mg_tensor * t = mg_transpose(ctx, m);
//     //   ne = {2, 3, 1, 1}     the same 24 bytes, read as 3 rows of 2
//     //   nb = {12, 4, 24, 24}  only the strides were swapped: nothing moved
//
// Element (i0, i1, i2, i3) always lives at
//     data + i0*nb[0] + i1*nb[1] + i2*nb[2] + i3*nb[3]
// and that one rule is what makes transpose, permute and slicing free.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MG_MAX_DIMS      4
#define MG_MAX_SRC       4
#define MG_MAX_NAME      64
#define MG_MAX_OP_PARAMS 64   // bytes of per-op parameters stored in the tensor

// ---------------------------------------------------------------------------
// Bugs and bad input are different things, with two error channels.
//
// MG_ASSERT is for bugs: a broken invariant inside the engine. It prints the
// file, the line and the condition, then aborts (ggml's GGML_ASSERT).
// Bad input from a user (a file, a flag, a prompt) never reaches an assert:
// functions return NULL or false and leave a message for mg_last_error().
// ---------------------------------------------------------------------------

#define MG_ASSERT(x)                                                    \
    do {                                                                \
        if (!(x)) mg_abort(__FILE__, __LINE__, "assertion failed: " #x); \
    } while (0)

#define MG_UNUSED(x) (void)(x)

_Noreturn void mg_abort(const char * file, int line, const char * fmt, ...);

// The message of the last failure on this thread ("" if none). Like dlerror():
// read it right after a call returned NULL/false.
const char * mg_last_error(void);
void         mg_set_error(const char * fmt, ...);
void         mg_clear_error(void);

// A name from a user or a file (a path, a flag's value, a key or tensor name)
// as an error message may show it: every control byte (C0 including \n and
// \t, DEL, the C1 controls) and every byte that starts no UTF-8 character is
// written \xNN, so that a name holding ESC sequences cannot clear the screen,
// retitle the window or fake a line of output (coreutils' quote() does the
// same). The result lives in one of 4 slots per thread, so a message can
// quote up to 4 names; a name longer than about 500 bytes is cut with "...".
// mg_set_error escapes its whole message the same way.
const char * mg_quote(const char * s);

// ---------------------------------------------------------------------------
// Element types. The numbers are ggml's (ggml.h, enum ggml_type) because they
// are written into GGUF files: a type id read from a file indexes this enum.
// ---------------------------------------------------------------------------

enum mg_type {
    MG_TYPE_F32    = 0,
    MG_TYPE_F16    = 1,
    MG_TYPE_Q4_0   = 2,
    //@+ full more-quants
    MG_TYPE_Q4_1   = 3,
    MG_TYPE_Q5_0   = 6,
    MG_TYPE_Q5_1   = 7,
    //@- full more-quants
    MG_TYPE_Q8_0   = 8,
    //@+ full more-quants
    MG_TYPE_Q8_1   = 9,
    MG_TYPE_Q2_K   = 10,
    MG_TYPE_Q3_K   = 11,
    //@- full more-quants
    //@+ 09 k-quants
    MG_TYPE_Q4_K   = 12,
    //@- 09 k-quants
    //@+ full more-quants
    MG_TYPE_Q5_K   = 13,
    //@- full more-quants
    //@+ 09 k-quants
    MG_TYPE_Q6_K   = 14,
    MG_TYPE_Q8_K   = 15,
    //@- 09 k-quants
    //@+ full more-quants
    MG_TYPE_IQ4_NL = 20,
    //@- full more-quants
    //@+ 03 i32
    MG_TYPE_I32    = 26,   // token ids and positions
    //@- 03 i32
    //@+ 09 bf16
    MG_TYPE_BF16   = 30,
    //@- 09 bf16
    MG_TYPE_COUNT  = 43,   // ggml's count: ids up to 42 exist in the wild
};

typedef void (*mg_to_float_fn)  (const void  * x, float * y, int64_t n);
typedef void (*mg_from_float_fn)(const float * x, void  * y, int64_t n);

// What the engine knows about a type (ggml.c, type_traits[]). Quantized types
// store elements in blocks: blck_size elements share one type_size-byte block.
struct mg_type_traits {
    const char *     name;          // "f32", "q4_0", ... as ggml prints them
    int64_t          blck_size;     // elements per block (1 for plain floats)
    size_t           type_size;     // bytes per block
    bool             is_quantized;
    mg_to_float_fn   to_float;      // decode n elements (n a multiple of blck_size)
    mg_from_float_fn from_float;    // encode n elements with ggml's reference rounding
};

// NULL for an id this engine does not support (including gaps in the enum).
const struct mg_type_traits * mg_get_type_traits(enum mg_type type);

bool         mg_type_is_supported(int type_id);   // safe for any int, e.g. from a file
const char * mg_type_name(enum mg_type type);     // "f32", or "type-17" when unsupported
int64_t      mg_blck_size(enum mg_type type);
size_t       mg_type_size(enum mg_type type);
size_t       mg_row_size (enum mg_type type, int64_t ne);  // bytes of ne elements (ne % blck == 0)

// ---------------------------------------------------------------------------
// Ops. A tensor remembers how it was made; chapter 03 turns that into lazy
// computation. The view ops exist from chapter 01 because views are made here.
// ---------------------------------------------------------------------------

enum mg_op {
    MG_OP_NONE = 0,     // a leaf: its data was set by someone, not computed

    MG_OP_VIEW,         // the four view ops reinterpret src[0]'s bytes:
    MG_OP_RESHAPE,      // nothing is computed for them, ever
    MG_OP_PERMUTE,
    MG_OP_TRANSPOSE,
    //@+ 03 ops
    MG_OP_CONT,         // a contiguous copy of src[0] (e.g. after a permute)
    MG_OP_ADD,
    MG_OP_SUB,
    MG_OP_MUL,
    MG_OP_DIV,
    MG_OP_SCALE,
    MG_OP_SQR,
    MG_OP_SQRT,
    MG_OP_RELU,
    MG_OP_SILU,
    MG_OP_GELU,
    MG_OP_SUM_ROWS,
    MG_OP_RMS_NORM,
    MG_OP_SOFT_MAX,
    MG_OP_MUL_MAT,
    MG_OP_CPY,          // copy src[0] into src[1]'s bytes (with type conversion)
    MG_OP_GET_ROWS,
    //@- 03 ops
    //@+ 06 attention-ops
    MG_OP_ROPE,
    //@- 06 attention-ops
    //@+ 09 set-rows
    MG_OP_SET_ROWS,     // write src[0]'s rows into the rows of src[2] that src[1] names
    //@- 09 set-rows
    //@+ full fused-ops
    MG_OP_SWIGLU,       // silu(src[0]) * src[1] in one pass
    MG_OP_FLASH_ATTN,   // softmax(Q K^T * scale + mask) V with an online softmax
    //@- full fused-ops
    //@+ full moe
    MG_OP_ARGSORT,      // per row, the I32 indices that sort it
    MG_OP_CLAMP,        // min(max(x, lo), hi)
    MG_OP_MUL_MAT_ID,   // each token's rows times the weight matrices its ids pick (mixture of experts)
    //@- full moe

    MG_OP_COUNT,
};

const char * mg_op_name  (enum mg_op op);   // "MUL_MAT"
const char * mg_op_symbol(enum mg_op op);   // "X*Y", shown in graph drawings
bool         mg_op_is_view(enum mg_op op);

//@+ 05 tensor-flags
// Flags that tell the graph allocator (chapter 05) what it may not reuse.
enum mg_tensor_flag {
    MG_TENSOR_FLAG_INPUT  = 1,   // set by the caller before each compute
    MG_TENSOR_FLAG_OUTPUT = 2,   // read by the caller after compute
};
//@- 05 tensor-flags

// ---------------------------------------------------------------------------
// The tensor (ggml.h, struct ggml_tensor).
// ---------------------------------------------------------------------------

struct mg_tensor {
    enum mg_type type;

    int64_t ne[MG_MAX_DIMS];     // elements per dimension; ne[0] is the innermost
    size_t  nb[MG_MAX_DIMS];     // bytes per step in each dimension:
                                 //   nb[0] = type_size
                                 //   nb[1] = nb[0] * (ne[0] / blck_size)
                                 //   nb[i] = nb[i-1] * ne[i-1]   (when contiguous)

    enum mg_op op;               // how this tensor is computed (MG_OP_NONE: it is not)
    int32_t    op_params[MG_MAX_OP_PARAMS / sizeof(int32_t)];   // e.g. the axes of a permute

    //@+ 05 tensor-flags
    int32_t  flags;              // enum mg_tensor_flag bits
    uint32_t galloc_id;          // which graph allocator placed data (0: none): it may move it (chapter 05)
    //@- 05 tensor-flags

    struct mg_tensor * src[MG_MAX_SRC];   // the operands of op

    struct mg_tensor * view_src;   // a view reads the bytes of this tensor (never a view itself)
    size_t             view_offs;  // ... starting this many bytes in

    void * data;                   // the first byte of element (0,0,0,0), or NULL if not placed yet
    //@+ full repack
    const void * repacked;         // a weight's copy in the tile's layout, read by mul_mat only (repack.h), or NULL
    //@- full repack
    //@+ full backend
    struct mg_backend_buffer * buffer;   // the backend buffer that holds data (backend.h), NULL: host memory of ours
    //@- full backend

    char name[MG_MAX_NAME];
};

// ---------------------------------------------------------------------------
// The context owns tensor headers (and, unless no_alloc, their data). Chapter
// 01 keeps it naive; chapter 02 turns it into a real arena (see arena.h).
// ---------------------------------------------------------------------------

struct mg_context;

struct mg_init_params {
    size_t mem_size;     // bytes of the arena (headers + data)
    void * mem_buffer;   // use this memory instead of allocating (NULL: allocate)
    bool   no_alloc;     // headers only: data is placed later (weights from a file, compute buffers)
};

struct mg_context * mg_init(struct mg_init_params params);
void                mg_free(struct mg_context * ctx);
bool                mg_get_no_alloc(const struct mg_context * ctx);

// Room for one tensor header, followed by data_size bytes of data when
// data_size > 0 (*data then points at them). The header is zeroed. NULL, with
// mg_last_error() saying how much was asked and how much is left, when the
// context is full. Called by tensor.c; the context implements it.
struct mg_tensor * mg_context_new_tensor_obj(struct mg_context * ctx, size_t data_size, void ** data);

// A new tensor with uninitialised data (no data at all in a no_alloc context).
// Returns NULL, with mg_last_error() saying why, when the context is full.
struct mg_tensor * mg_new_tensor   (struct mg_context * ctx, enum mg_type type, int n_dims, const int64_t * ne);
struct mg_tensor * mg_new_tensor_1d(struct mg_context * ctx, enum mg_type type, int64_t ne0);
struct mg_tensor * mg_new_tensor_2d(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1);
struct mg_tensor * mg_new_tensor_3d(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1, int64_t ne2);
struct mg_tensor * mg_new_tensor_4d(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

struct mg_tensor * mg_set_name   (struct mg_tensor * t, const char * name);
struct mg_tensor * mg_format_name(struct mg_tensor * t, const char * fmt, ...);
const char *       mg_get_name   (const struct mg_tensor * t);

//@+ 03 new-node
// A tensor that an op will compute: a header only, whatever the context's
// no_alloc says. Its data is placed when it is computed (chapter 03), or by the
// graph allocator (chapter 05).
struct mg_tensor * mg_new_node(struct mg_context * ctx, enum mg_type type, int n_dims, const int64_t * ne);
//@- 03 new-node

// Shape questions.
int64_t mg_nelements(const struct mg_tensor * t);
int64_t mg_nrows    (const struct mg_tensor * t);   // ne[1] * ne[2] * ne[3]
size_t  mg_nbytes   (const struct mg_tensor * t);   // bytes spanned by the data
int     mg_n_dims   (const struct mg_tensor * t);   // 1 + index of the last ne > 1
bool    mg_is_contiguous (const struct mg_tensor * t);   // strides are exactly the packed ones
bool    mg_is_transposed (const struct mg_tensor * t);   // nb[0] > nb[1]
bool    mg_are_same_shape(const struct mg_tensor * a, const struct mg_tensor * b);
//@+ 04 shape-str

// A shape as text: the first n_dims sizes of ne, joined by sep, in brackets.
// "[4,3,1,1]" for the exec trace and the DOT boxes (all four, sep ","),
// "[768, 768]" for mg info and mg quantize (sep ", "). Writes into buf
// (MG_SHAPE_STR_MAX bytes hold any shape) and returns it.
enum { MG_SHAPE_STR_MAX = 96 };
const char * mg_shape_str(const int64_t * ne, int n_dims, const char * sep, char * buf, size_t size);
//@- 04 shape-str

// ---------------------------------------------------------------------------
// Views: new headers over the same bytes (ggml_view_*, ggml_reshape_*,
// ggml_transpose, ggml_permute). None of them copies or computes anything.
// A view of a view records the root tensor and the summed offset, so that
// view_src is never itself a view ("view-chain flattening").
// ---------------------------------------------------------------------------

struct mg_tensor * mg_view_1d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, size_t offset);
struct mg_tensor * mg_view_2d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1,
                              size_t nb1, size_t offset);
struct mg_tensor * mg_view_3d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                              size_t nb1, size_t nb2, size_t offset);
struct mg_tensor * mg_view_4d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                              int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);

// Reshape needs contiguous input: the same bytes, counted in a different shape.
struct mg_tensor * mg_reshape_1d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0);
struct mg_tensor * mg_reshape_2d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1);
struct mg_tensor * mg_reshape_3d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
struct mg_tensor * mg_reshape_4d(struct mg_context * ctx, struct mg_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                                 int64_t ne3);

// Swap dims 0 and 1.
struct mg_tensor * mg_transpose(struct mg_context * ctx, struct mg_tensor * a);

// Dimension i of a becomes dimension axis_i of the result (ggml's convention).
struct mg_tensor * mg_permute(struct mg_context * ctx, struct mg_tensor * a, int axis0, int axis1, int axis2,
                              int axis3);

// ---------------------------------------------------------------------------
// Element access, always through nb (so it works on any view). Quantized
// tensors are decoded one block at a time. Meant for demos, tests and
// setting inputs, not for kernels.
// ---------------------------------------------------------------------------

float mg_get_f32_nd(const struct mg_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
void  mg_set_f32_nd(struct mg_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v);
float mg_get_f32_1d(const struct mg_tensor * t, int64_t i);   // i counts in logical order
void  mg_set_f32_1d(struct mg_tensor * t, int64_t i, float v);
//@+ 03 i32
int32_t mg_get_i32_1d(const struct mg_tensor * t, int64_t i);
void    mg_set_i32_1d(struct mg_tensor * t, int64_t i, int32_t v);
//@- 03 i32

// Address of element (i0, i1, i2, i3): the stride rule in one place. For
// types with one element per block (F32, F16, I32); in a quantized tensor
// nb[0] steps a whole block, so element i0 sits in block i0 / blck_size.
static inline void * mg_element_ptr(const struct mg_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// Ops keep small parameters (a scale, an epsilon, axes) inside the tensor, in
// op_params, so a graph needs nothing but its tensors to be computed.
static inline void mg_set_op_param_i32(struct mg_tensor * t, int i, int32_t v) { t->op_params[i] = v; }
static inline int32_t mg_get_op_param_i32(const struct mg_tensor * t, int i) { return t->op_params[i]; }
static inline void mg_set_op_param_f32(struct mg_tensor * t, int i, float v) {
    memcpy(&t->op_params[i], &v, sizeof(v));
}
static inline float mg_get_op_param_f32(const struct mg_tensor * t, int i) {
    float v;
    memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}

//@+ 03 view-tensor
// A view with a's exact shape and strides: what an in-place op returns.
struct mg_tensor * mg_view_tensor(struct mg_context * ctx, struct mg_tensor * a);
//@- 03 view-tensor

// "name: f32 ne=[3,2,1,1] nb=[4,12,24,24] (view of m +0)" into buf.
const char * mg_tensor_describe(const struct mg_tensor * t, char * buf, size_t size);
// The describe line, then the values (for small tensors) as a matrix per 2-D slice.
void         mg_tensor_print(FILE * f, const struct mg_tensor * t);
