/*
 * tests/test_cost_presets.c -- the cost model's named models (--model) and
 * its MLA cache: bytes per token follow the latent layout (and agree with
 * the pool's own rkv_pool_config_bytes_per_token), capacity and decode
 * bytes follow from them, weight FLOPs use an MoE's active parameters,
 * bad names and half-set MLA widths are refused, and --model adjusts
 * before the --model-* options wherever it stands on the command line.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "cli/args.h"
#include "radixkv.h"
#include "sim/costmodel.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

Test(cost_presets, deepseek_v3_latent_bytes)
{
    rkv_cost_model m;
    rkv_cost_model_init(&m);
    OK(rkv_cost_model_preset(&m, "deepseek-v3"));
    OK(rkv_cost_model_validate(&m));
    cr_assert_float_eq(rkv_cost_kv_bytes_per_token(&m), 61.0 * 576 * 2, 1e-9);
    /* the pool of the same shape takes the same bytes a token */
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 1;
    pc.num_layers = m.layers;
    pc.layout = RKV_LAYOUT_MLA;
    pc.kv_lora_rank = m.kv_lora_rank;
    pc.qk_rope_dim = m.qk_rope_dim;
    pc.dtype = RKV_DTYPE_BF16;
    cr_assert_float_eq(rkv_cost_kv_bytes_per_token(&m),
                       (double)rkv_pool_config_bytes_per_token(&pc), 1e-9);
    /* capacity beside fp8 weights on 8 x 141 GB */
    m.memory_gb = 1128;
    uint64_t want = (uint64_t)((1128 * 0.9e9 - 671e9) / (61.0 * 576 * 2));
    cr_assert_eq(rkv_cost_default_capacity_tokens(&m), want);
    /* decode bytes: weights + latent rows of the context */
    rkv_cost_step s;
    memset(&s, 0, sizeof s);
    rkv_cost_add_decode(&s, 1000);
    double bytes = 671e9 * 1.0 + 61.0 * 576 * 2 * 1000;
    double mem_ms = bytes / (m.bandwidth_tbs * 1e12 * m.mbu) * 1e3;
    double flops = 2 * 37e9 + 2.0 * 61 * 128 * (2 * 512 + 64) * 1000;
    double cmp_ms = flops / (m.peak_tflops * 1e12 * m.mfu) * 1e3;
    cr_assert_float_eq(rkv_cost_step_ms(&m, &s),
                       m.overhead_ms + (mem_ms > cmp_ms ? mem_ms : cmp_ms), 1e-9);
    /* prefill: the 37e9 active parameters, not all 671e9 */
    cr_assert_float_eq(rkv_cost_prefill_ms_per_token(&m),
                       2 * 37e9 / (m.peak_tflops * 1e12 * m.mfu) * 1e3, 1e-12);
}

Test(cost_presets, mha_presets_and_errors)
{
    rkv_cost_model m, d;
    rkv_cost_model_init(&m);
    rkv_cost_model_init(&d);
    OK(rkv_cost_model_preset(&m, "llama3-8b"));
    cr_assert_eq(memcmp(&m, &d, sizeof m), 0, "llama3-8b is the default model");
    OK(rkv_cost_model_preset(&m, "llama3-405b"));
    cr_assert_float_eq(rkv_cost_kv_bytes_per_token(&m), 2.0 * 126 * 8 * 128 * 2, 1e-9);
    rkv_cost_model keep = m;
    cr_assert_eq(rkv_cost_model_preset(&m, "gpt-5"), RKV_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(rkv_last_error(), "deepseek-v3"), "%s", rkv_last_error());
    cr_assert_eq(memcmp(&m, &keep, sizeof m), 0);
    m.kv_lora_rank = 512; /* without qk_rope_dim */
    cr_assert_eq(rkv_cost_model_validate(&m), RKV_ERR_INVALID_ARG);
    m.qk_rope_dim = 64;
    OK(rkv_cost_model_validate(&m));
    m.kv_dtype = RKV_DTYPE_FP8_E4M3; /* an MLA pool stores no quantized dtype */
    cr_assert_eq(rkv_cost_model_validate(&m), RKV_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(rkv_last_error(), "MLA"), "%s", rkv_last_error());
    m.kv_dtype = RKV_DTYPE_BF16;
    OK(rkv_cost_model_validate(&m));
    m.active_params = m.params * 2;
    cr_assert_eq(rkv_cost_model_validate(&m), RKV_ERR_INVALID_ARG);
}

static enum rkv_cli_action parse(const char *const *args, int n, rkv_cli_options *o)
{
    char *argv[16];
    char err[512];
    argv[0] = (char *)"radixkv";
    for (int i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    argv[n + 1] = NULL;
    return rkv_cli_parse(n + 1, argv, o, err, sizeof err);
}

Test(cost_presets, cli_model_option)
{
    rkv_cli_options o;
    const char *a[] = {"replay", "--model-layers", "30", "--model", "deepseek-v3",
                       "--gpu-memory-gb", "1128"};
    cr_assert_eq(parse(a, 7, &o), RKV_ACT_RUN);
    cr_assert_eq(o.rc.cost.layers, 30u, "--model-layers adjusts the preset wherever it is");
    cr_assert_eq(o.rc.cost.kv_lora_rank, 512u);
    const char *b[] = {"replay", "--model=deepseek-v3", "--gpu-memory-gb", "1128"};
    cr_assert_eq(parse(b, 4, &o), RKV_ACT_RUN);
    cr_assert_eq(o.rc.cost.layers, 61u);
    cr_assert_str_eq(o.model, "deepseek-v3");
    const char *c[] = {"replay", "--model", "nope"};
    cr_assert_eq(parse(c, 3, &o), RKV_ACT_USAGE_ERROR);
    /* 671 GB of weights do not fit the default 80 GB GPU */
    const char *d[] = {"replay", "--model", "deepseek-v3"};
    cr_assert_eq(parse(d, 3, &o), RKV_ACT_USAGE_ERROR);
}

/* Hybrid presets: the sliding layers' share of a token's KV, and the
 * checks on the sliding fields. */
Test(cost_presets, hybrid_sliding_layers)
{
    rkv_cost_model m;
    rkv_cost_model_init(&m);
    OK(rkv_cost_model_preset(&m, "gpt-oss-120b"));
    OK(rkv_cost_model_validate(&m));
    cr_assert_eq(m.sliding_layers, 18);
    cr_assert_eq(m.sliding_window, 128);
    cr_assert_float_eq(rkv_cost_kv_bytes_per_token(&m), 2.0 * 36 * 8 * 64 * 2, 1e-9);
    cr_assert_float_eq(rkv_cost_kv_sliding_bytes_per_token(&m), 2.0 * 18 * 8 * 64 * 2,
                       1e-9);
    OK(rkv_cost_model_preset(&m, "gemma3-27b"));
    cr_assert_eq(m.sliding_layers, 52);
    cr_assert_float_eq(rkv_cost_kv_sliding_bytes_per_token(&m), 2.0 * 52 * 16 * 128 * 2,
                       1e-9);
    /* a preset without sliding layers clears them */
    OK(rkv_cost_model_preset(&m, "llama3-8b"));
    cr_assert_eq(m.sliding_layers, 0);
    cr_assert_eq(m.sliding_window, 0);
    cr_assert_float_eq(rkv_cost_kv_sliding_bytes_per_token(&m), 0.0, 1e-12);
    m.sliding_layers = 33;
    m.sliding_window = 128;
    cr_assert_eq(rkv_cost_model_validate(&m), RKV_ERR_INVALID_ARG);
    m.sliding_layers = 4;
    m.sliding_window = 0;
    cr_assert_eq(rkv_cost_model_validate(&m), RKV_ERR_INVALID_ARG);
    m.sliding_window = 64;
    OK(rkv_cost_model_validate(&m));
}

/* A hybrid model's sliding layers attend to the window only: decode bytes
 * and attention FLOPs of a step made with the _model adders. Without
 * sliding layers the _model adders cost exactly what the plain ones do. */
Test(cost_presets, hybrid_window_in_step_cost)
{
    rkv_cost_model m;
    rkv_cost_model_init(&m);
    OK(rkv_cost_model_preset(&m, "gpt-oss-120b"));
    rkv_cost_step s;
    memset(&s, 0, sizeof s);
    rkv_cost_add_decode_model(&s, &m, 1000);
    double kvb = rkv_cost_kv_bytes_per_token(&m);
    double bytes = m.params * m.weight_bytes + kvb * (0.5 * 1000 + 0.5 * 129);
    double mem_ms = bytes / (m.bandwidth_tbs * 1e12 * m.mbu) * 1e3;
    double flops = 2 * m.active_params + 4.0 * 36 * 4096 * (0.5 * 1000 + 0.5 * 129);
    double cmp_ms = flops / (m.peak_tflops * 1e12 * m.mfu) * 1e3;
    cr_assert_float_eq(rkv_cost_step_ms(&m, &s),
                       m.overhead_ms + (mem_ms > cmp_ms ? mem_ms : cmp_ms), 1e-9);
    /* prefill: the capped sum against a token-by-token count */
    static const double cases[][2] = {{0, 10}, {0, 500}, {100, 20}, {120, 30},
                                      {128, 1}, {1000, 64}, {5, 200}};
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double prefix = cases[c][0], q = cases[c][1], full = 0, win = 0;
        for (double i = 0; i < q; i++) {
            double k = prefix + i + 1;
            full += k;
            win += k < 129 ? k : 129;
        }
        memset(&s, 0, sizeof s);
        rkv_cost_add_prefill_model(&s, &m, prefix, q);
        cr_assert_float_eq(s.attn_keys, full, 1e-9, "case %u", c);
        cr_assert_float_eq(s.attn_win_keys, win, 1e-9, "case %u", c);
    }
    /* a model without sliding layers: the same time to the bit */
    OK(rkv_cost_model_preset(&m, "llama3-8b"));
    rkv_cost_step a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    rkv_cost_add_prefill(&a, 300, 700);
    rkv_cost_add_decode(&a, 4000);
    rkv_cost_add_prefill_model(&b, &m, 300, 700);
    rkv_cost_add_decode_model(&b, &m, 4000);
    cr_assert_eq(rkv_cost_step_ms(&m, &a), rkv_cost_step_ms(&m, &b));
}
