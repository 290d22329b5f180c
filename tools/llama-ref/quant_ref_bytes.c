// quant_ref_bytes.c - the bytes ggml's reference quantizer writes for the
// input of chapter 01's Q4_1 exercise (exercises/01_tensor/test_ex3_q4_1.c),
// printed as a C array for that test. Linked against llama.cpp's
// libggml-base (tools/llama-ref/README.md, "The Q4_1 exercise's bytes").
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

void quantize_row_q4_1_ref(const float * x, void * y, int64_t k);   // ggml-quants.h (internal header)

enum { N = 4 * 32 };

// The exercise's input: the same formula is in the test.
static float input(int i) {
    const int b = i / 32, j = i % 32;
    switch (b) {
        case 0:  return 2.0f * sinf(0.3f * (float) j);               // both signs
        case 1:  return 0.75f;                                       // max == min: d = 0
        case 2:  return -3.0f + 2.0f * (float) j / 31.0f;           // all negative
        default: return j == 17 ? 40.0f : 0.01f * (float) j;        // one outlier
    }
}

int main(void) {
    float   x[N];
    uint8_t y[4 * 20];
    for (int i = 0; i < N; i++) x[i] = input(i);
    quantize_row_q4_1_ref(x, y, N);
    for (int i = 0; i < (int) sizeof(y); i++) printf("0x%02x,%s", y[i], i % 20 == 19 ? "\n" : " ");
    return 0;
}
