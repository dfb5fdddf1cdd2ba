/*
 * tests/test_kv_dtype_cli.c -- the command's --kv-dtype: parsing, refusals,
 * and what it changes in the simulated GPU (sim/costmodel.h): KV bytes a
 * token takes equal the pool's own size for that dtype
 * (the row formula of radixkv/pool.h for the model's geometry), so the default
 * capacity grows and a decode step's KV bytes shrink by the same ratio.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "cli/args.h"
#include "sim/costmodel.h"

static enum rkv_cli_action parse(rkv_cli_options *o, char *err, const char *a1,
                                 const char *a2, const char *a3, const char *a4)
{
    char *argv[8] = {"radixkv", "replay", (char *)a1, (char *)a2, (char *)a3, (char *)a4};
    int argc = 2;
    while (argc < 6 && argv[argc] != NULL)
        argc++;
    return rkv_cli_parse(argc, argv, o, err, 512);
}

/* KV bytes a token takes, from the layout radixkv/pool.h documents: per
 * layer, K and V, kv head, a row of codes and f32 scales. */
static size_t pool_token_bytes(const rkv_cost_model *m, rkv_dtype dt, uint32_t group)
{
    size_t D = m->head_dim, row;
    switch (dt) {
    case RKV_DTYPE_BF16: row = 2 * D; break;
    case RKV_DTYPE_INT4: row = D / 2 + 4 * (D / group); break;
    default: row = D + 4; break; /* 8-bit: one scale per row */
    }
    return 2 * (size_t)m->layers * m->kv_heads * row;
}

Test(kv_dtype_cli, capacity_and_decode_bytes_follow_the_pool_size)
{
    static rkv_cli_options base, o;
    char err[512];
    cr_assert_eq(parse(&base, err, NULL, NULL, NULL, NULL), RKV_ACT_RUN, "%s", err);
    const double bf = rkv_cost_kv_bytes_per_token(&base.rc.cost);
    cr_assert_float_eq(bf, (double)pool_token_bytes(&base.rc.cost, RKV_DTYPE_BF16, 32),
                       1e-9);
    struct { const char *name; rkv_dtype dt; const char *group; uint32_t g; } c[] = {
        {"fp8", RKV_DTYPE_FP8_E4M3, NULL, 32}, {"fp8-e5m2", RKV_DTYPE_FP8_E5M2, NULL, 32},
        {"int8", RKV_DTYPE_INT8, NULL, 32},    {"int4", RKV_DTYPE_INT4, NULL, 32},
        {"int4", RKV_DTYPE_INT4, "128", 128},  {"bf16", RKV_DTYPE_BF16, NULL, 32},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        cr_assert_eq(parse(&o, err, "--kv-dtype", c[i].name,
                           c[i].group ? "--kv-quant-group" : NULL, c[i].group),
                     RKV_ACT_RUN, "%s: %s", c[i].name, err);
        cr_assert_eq(o.rc.cost.kv_dtype, c[i].dt);
        double q = rkv_cost_kv_bytes_per_token(&o.rc.cost);
        cr_assert_float_eq(q, (double)pool_token_bytes(&o.rc.cost, c[i].dt, c[i].g), 1e-9,
                           "%s", c[i].name);
        /* the capacity the same GPU memory holds grows by bf / q */
        double ratio = (double)o.rc.capacity_tokens / (double)base.rc.capacity_tokens;
        cr_assert_float_eq(ratio, bf / q, 1e-5 * ratio, "%s: capacity x%g, bytes x%g", c[i].name,
                           ratio, bf / q);
        /* and decode reads q / bf of the KV bytes: a KV-only step's memory time */
        rkv_cost_model m = o.rc.cost, mb = base.rc.cost;
        m.params = mb.params = 1; /* leave only the KV in the step's bytes, */
        m.peak_tflops = mb.peak_tflops = 1e12; /* and memory-bound */
        rkv_cost_step s = {0};
        rkv_cost_add_decode(&s, 1e6);
        double tq = rkv_cost_step_ms(&m, &s) - m.overhead_ms;
        double tb = rkv_cost_step_ms(&mb, &s) - mb.overhead_ms;
        cr_assert_float_eq(tq / tb, q / bf, 1e-3, "%s", c[i].name);
    }
    /* 8 bits hold ~2x the tokens, INT4 in groups of 32 over 3x */
    parse(&o, err, "--kv-dtype", "int8", NULL, NULL);
    cr_assert_gt((double)o.rc.capacity_tokens, 1.9 * (double)base.rc.capacity_tokens);
    parse(&o, err, "--kv-dtype", "int4", NULL, NULL);
    cr_assert_gt((double)o.rc.capacity_tokens, 3.0 * (double)base.rc.capacity_tokens);
}

Test(kv_dtype_cli, refusals_say_why)
{
    static rkv_cli_options o;
    char err[512];
    cr_assert_eq(parse(&o, err, "--kv-dtype", "int3", NULL, NULL), RKV_ACT_USAGE_ERROR);
    cr_assert(strstr(err, "--kv-dtype") != NULL, "%s", err);
    cr_assert_eq(parse(&o, err, "--kv-dtype", "int8", "--kv-bytes", "1"),
                 RKV_ACT_USAGE_ERROR);
    cr_assert(strstr(err, "exclude") != NULL, "%s", err);
    cr_assert_eq(parse(&o, err, "--kv-dtype", "int4", "--kv-quant-group", "48"),
                 RKV_ACT_USAGE_ERROR); /* 48 does not divide 128 */
    cr_assert(strstr(err, "group") != NULL, "%s", err);
    cr_assert_eq(parse(&o, err, "--kv-dtype", "int8", "--model-head-dim", "30"),
                 RKV_ACT_USAGE_ERROR);
    cr_assert(strstr(err, "head_dim") != NULL, "%s", err);
    /* --kv-bytes alone still rules a bf16 model */
    cr_assert_eq(parse(&o, err, "--kv-bytes", "1", NULL, NULL), RKV_ACT_RUN, "%s", err);
}
