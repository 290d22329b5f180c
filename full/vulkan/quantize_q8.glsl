// quantize_q8.glsl - what the two activation quantizers share (#include'd by
// quantize_q8_0.comp and quantize_q8_k.comp): F32 rows x {K, ne1, ne2, ne3}
// in, the rows' blocks out one after another, in the CPU's byte layout
// (quants.h), exactly as mul_mat_init fills the CPU's work buffer with
// from_float before a quantized matmul (ggml-vulkan's quantize_q8_1.comp
// plays this part there, in a layout of its own). The matmul shaders then
// read these blocks as the CPU's vec_dot functions read the work buffer.
// One invocation makes whole blocks, each from its values in order: the
// signed maximum must be the first of the largest, as on the CPU.
layout(local_size_x = 256) in;
#include "index.glsl"   // invocation_index(): dispatches beyond 65535 groups

layout(std430, binding = 0) readonly buffer X { uint x[]; };   // F32 bits: compared as integers (below)
layout(std430, binding = 3) writeonly buffer Q { uint q[]; };

layout(push_constant) uniform Params {
    uint K, ne1, ne2, ne3;            // x's shape
    uint x_off, x_nb1, x_nb2, x_nb3;  // in floats
    uint q_off;                       // in 4-byte words
} p;

#include "rounding.glsl"

// Where the values of block ib of row `row` (rows counted as the CPU's work
// buffer packs them: i1 fastest, then i2, then i3) start in x.
uint block_start(uint row, uint ib, uint block) {
    const uint i1 = row % p.ne1, i2 = (row / p.ne1) % p.ne2, i3 = row / (p.ne1 * p.ne2);
    return p.x_off + i1 * p.x_nb1 + i2 * p.x_nb2 + i3 * p.x_nb3 + ib * block;
}

// |v| of a float's bits: for numbers (not NaN) the order of the unsigned
// integers is the order of the magnitudes, subnormals included, which a
// device that flushes them to zero in float arithmetic would lose.
uint abs_bits(uint v) { return v & 0x7fffffffu; }

// The CPU's mg_nearest_int: ties to even (exact below 2^22; the products here are at most 127.00002).
int nearest_int(float f) { return int(roundEven(f)); }
