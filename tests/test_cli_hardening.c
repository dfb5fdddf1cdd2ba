/*
 * tests/test_cli_hardening.c -- regressions for the command's library
 * (cli/) found by fuzzing and misuse (issue 10, items 5-8): key spaces of
 * prompts and outputs, work bounded by what can fit, simulated clock
 * precision, and messages that name the right file.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/replay.h"
#include "cli/trace.h"
#include "cli/workload.h"

static void load_text(rkv_workload *wl, const char *text, const char *name)
{
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(text, strlen(text), name, &r),
                 RKV_OK);
    rkv_workload_init(wl);
    cr_assert_eq(rkv_workload_load_trace(wl, r, 0), RKV_OK, "%s",
                 rkv_last_error());
    rkv_trace_reader_close(r);
    cr_assert_eq(rkv_workload_check(wl), RKV_OK, "%s", rkv_last_error());
}

/* Every output block id of every request lies outside the set of prompt
 * block ids (and output ranges do not overlap each other). */
static void assert_disjoint_keys(const rkv_workload *wl)
{
    for (size_t i = 0; i < wl->num_reqs; i++) {
        const rkv_wl_request *q = &wl->reqs[i];
        uint64_t nb = (q->output_length + RKV_TRACE_BLOCK_TOKENS - 1) /
                      RKV_TRACE_BLOCK_TOKENS;
        for (uint64_t b = 0; b < nb; b++) {
            uint64_t k = q->output_key + b;
            cr_assert_geq(k, q->output_key, "output range of %zu wraps", i);
            for (size_t s = 0; s < wl->num_segs; s++)
                cr_assert_neq(wl->seg_keys[s], k,
                              "request %zu's output block %llu is also a "
                              "prompt block", i, (unsigned long long)k);
            for (size_t j = 0; j < wl->num_reqs; j++) {
                const rkv_wl_request *o = &wl->reqs[j];
                uint64_t onb = (o->output_length + RKV_TRACE_BLOCK_TOKENS - 1) /
                               RKV_TRACE_BLOCK_TOKENS;
                if (j != i)
                    cr_assert(k < o->output_key || k - o->output_key >= onb,
                              "outputs of %zu and %zu share block %llu", i, j,
                              (unsigned long long)k);
            }
        }
    }
}

/* Issue 10 item 5: hash id 2^64-1 made output keys wrap onto prompt
 * block 0, so the second request "hit" the first one's output. */
Test(keys, hash_id_max_does_not_alias_outputs)
{
    const char *text =
        "{\"timestamp\":0,\"input_length\":512,\"output_length\":600,"
        "\"hash_ids\":[18446744073709551615]}\n"
        "{\"timestamp\":100000,\"input_length\":1024,\"output_length\":4,"
        "\"hash_ids\":[18446744073709551615,0]}\n";
    rkv_workload wl;
    load_text(&wl, text, "max.jsonl");
    assert_disjoint_keys(&wl);

    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.capacity_tokens = 100000;
    cfg.check_every = 1;
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &res), RKV_OK, "%s",
                 rkv_last_error());
    /* Only the first block of the second prompt was seen before. */
    cr_assert_eq(res.hit_tokens, 512, "hit %llu tokens",
                 (unsigned long long)res.hit_tokens);
    rkv_workload_free(&wl);
}

/* Keys that fill both ends of the id space: outputs go in a gap. */
Test(keys, outputs_find_a_gap_anywhere)
{
    const char *text =
        "{\"timestamp\":0,\"input_length\":1536,\"output_length\":1500,"
        "\"hash_ids\":[0,1,18446744073709551615]}\n"
        "{\"timestamp\":1,\"input_length\":1024,\"output_length\":2000,"
        "\"hash_ids\":[18446744073709551614,2]}\n"
        "{\"timestamp\":2,\"input_length\":100,\"output_length\":0,"
        "\"hash_ids\":[3]}\n";
    rkv_workload wl;
    load_text(&wl, text, "ends.jsonl");
    assert_disjoint_keys(&wl);
    rkv_workload_free(&wl);
}
