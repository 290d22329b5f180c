// test_op_tables.c - every op and every type has its entries in the tables.
//
// The static_assert beside the op tables (tensor.c) checks only their length:
// an op added to enum mg_op with a name but no symbol still compiles, the
// missing entry is a NULL. This walks every value of the enums this chapter
// has (MG_OP_COUNT and MG_TYPE_COUNT grow with the chapters, so the same file
// checks every later chapter and full/) and asks each table about it.
#include "harness.h"
#include "mg.h"

#include <ctype.h>
#include <string.h>

START_TEST(test_every_op_has_a_distinct_name) {
    for (int op = 0; op < MG_OP_COUNT; op++) {
        const char * name = mg_op_name((enum mg_op) op);
        ck_assert_msg(name != NULL && name[0] != '\0' && strcmp(name, "?") != 0, "op %d has no name", op);
        for (const char * c = name; *c; c++) {
            ck_assert_msg(isupper((unsigned char) *c) || isdigit((unsigned char) *c) || *c == '_',
                          "op %d's name '%s' is not written like ggml's (MUL_MAT)", op, name);
        }
        for (int other = 0; other < op; other++) {
            ck_assert_msg(strcmp(name, mg_op_name((enum mg_op) other)) != 0, "ops %d and %d are both named %s", other,
                          op, name);
        }
    }
    ck_assert_str_eq(mg_op_name(MG_OP_COUNT), "?");   // past the end: no table read
}
END_TEST

START_TEST(test_every_op_has_a_distinct_symbol) {
    ck_assert_str_eq(mg_op_symbol(MG_OP_NONE), "");   // a leaf computes nothing
    for (int op = MG_OP_NONE + 1; op < MG_OP_COUNT; op++) {
        const char * sym = mg_op_symbol((enum mg_op) op);
        ck_assert_msg(sym != NULL, "op %s has no entry in op_symbols (tensor.c)", mg_op_name((enum mg_op) op));
        ck_assert_msg(sym[0] != '\0' && strcmp(sym, "?") != 0, "op %s has an empty symbol", mg_op_name((enum mg_op) op));
        for (int other = 1; other < op; other++) {
            ck_assert_msg(strcmp(sym, mg_op_symbol((enum mg_op) other)) != 0, "ops %s and %s share the symbol '%s'",
                          mg_op_name((enum mg_op) other), mg_op_name((enum mg_op) op), sym);
        }
    }
}
END_TEST

// Types are ggml's ids, with gaps: the supported ones must be complete.
START_TEST(test_every_supported_type_is_complete) {
    int n_supported = 0;
    for (int id = 0; id < MG_TYPE_COUNT; id++) {
        if (!mg_type_is_supported(id)) {
            ck_assert_ptr_null(mg_get_type_traits((enum mg_type) id));
            continue;
        }
        n_supported++;
        const struct mg_type_traits * tt = mg_get_type_traits((enum mg_type) id);
        ck_assert_ptr_nonnull(tt);
        ck_assert_msg(tt->name != NULL && tt->name[0] != '\0', "type %d has no name", id);
        ck_assert_str_eq(mg_type_name((enum mg_type) id), tt->name);
        ck_assert_msg(tt->blck_size >= 1 && tt->type_size >= 1, "type %s has no block size", tt->name);
        ck_assert_msg(tt->is_quantized == (tt->blck_size > 1), "type %s: quantized means blocks", tt->name);
        for (int other = 0; other < id; other++) {
            if (mg_type_is_supported(other)) {
                ck_assert_msg(strcmp(tt->name, mg_type_name((enum mg_type) other)) != 0, "types %d and %d are both %s",
                              other, id, tt->name);
            }
        }
        // Every type but the integer one decodes to floats; every quantized type
        // of 32-blocks also encodes. K-quants (super-blocks of 256) may be
        // decode-only: chapter 09 reads them, full/ also writes them.
        if (strcmp(tt->name, "i32") != 0) ck_assert_msg(tt->to_float != NULL, "type %s cannot be decoded", tt->name);
        if (tt->is_quantized && tt->blck_size != 256) {
            ck_assert_msg(tt->from_float != NULL, "type %s cannot be encoded", tt->name);
        }
    }
    ck_assert_int_ge(n_supported, 4);   // F32, F16, Q4_0, Q8_0 from chapter 01 on
    ck_assert(!mg_type_is_supported(-1) && !mg_type_is_supported(MG_TYPE_COUNT));
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("op_tables");
    MG_TCASE(s, "tables", test_every_op_has_a_distinct_name, test_every_op_has_a_distinct_symbol,
                test_every_supported_type_is_complete);
    return s;
}
