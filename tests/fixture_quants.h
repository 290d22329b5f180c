// fixture_quants.h - quantizing tiny-f32's tensors must give llama-quantize's
// bytes: the fixture models (tests/fixtures/models/) were made from
// tiny-f32.gguf by llama-quantize (for tests/09_inference/test_kquants.c and
// tests/full/test_kquants_quantize.c).
#pragma once

#include "harness.h"
#include "gguf.h"
#include "tensor.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Quantizes every tensor of tiny-f32.gguf that `quant_file` stores as one of
// `types` (at most 8) and compares the bytes; each type must have
// want_count tensors, so a file that holds fewer than expected cannot pass.
static inline void check_fixture_bytes(const char * quant_file, const enum mg_type * types, const int * want_count,
                                       int n_types) {
    ck_assert_int_le(n_types, 8);
    struct mg_gguf * f32 = mg_gguf_open(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_msg(f32 != NULL, "%s", mg_last_error());
    struct mg_gguf * qf = mg_gguf_open(mg_test_fixture(quant_file));
    ck_assert_msg(qf != NULL, "%s", mg_last_error());

    int count[8] = {0};
    for (int64_t i = 0; i < mg_gguf_n_tensors(qf); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(qf, i);
        int                                k = 0;
        while (k < n_types && t->type != (int) types[k]) k++;
        if (k == n_types) continue;
        const struct mg_gguf_tensor_info * src = mg_gguf_find_tensor(f32, t->name);
        ck_assert_msg(src != NULL && src->type == MG_TYPE_F32, "%s: no F32 source", t->name);
        const int64_t n = src->ne[0] * src->ne[1] * src->ne[2] * src->ne[3];
        ck_assert_uint_eq(mg_row_size(types[k], n), t->nbytes);
        uint8_t * mine = malloc(t->nbytes);
        mg_get_type_traits(types[k])->from_float(src->data, mine, n);
        if (memcmp(mine, t->data, t->nbytes) != 0) {
            size_t first = 0;
            while (mine[first] == ((const uint8_t *) t->data)[first]) first++;
            ck_abort_msg("%s (%s): bytes differ from byte %zu of %zu (block %zu)", t->name, mg_type_name(types[k]),
                         first, t->nbytes, first / mg_type_size(types[k]));
        }
        free(mine);
        count[k]++;
    }
    for (int k = 0; k < n_types; k++) {
        ck_assert_msg(count[k] == want_count[k], "%s: %d %s tensors, want %d", quant_file, count[k],
                      mg_type_name(types[k]), want_count[k]);
    }
    mg_gguf_close(qf);
    mg_gguf_close(f32);
}
