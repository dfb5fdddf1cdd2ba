/*
 * tests/test_workload_agentic.c -- the agentic workload's tool calls
 * (sim/workload.h): tool sessions wait a lognormal tool latency (median,
 * tail and cap as configured) before their next turn, chat sessions keep
 * the exponential think time, every request names its session, the
 * default sessions' contexts exceed the default cache, and the draws are a
 * function of the seed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/costmodel.h"
#include "sim/workload.h"
#include "tests/support/test_util.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

Test(agentic_tools, latencies_sessions_and_flags)
{
    uint64_t seed = rkv_test_seed("agentic_tools.latencies");
    rkv_agentic_config cfg;
    rkv_agentic_config_init(&cfg);
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_agentic(&wl, &cfg, seed), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(rkv_workload_check(&wl), RKV_OK, "%s", rkv_last_error());
    /* Sessions: tool or chat, a whole session one or the other. */
    int8_t *kind = calloc(cfg.sessions, 1); /* 0 unknown, 1 tool, 2 chat */
    double *tool = malloc(wl.num_reqs * sizeof *tool);
    size_t ntool = 0, nchat = 0;
    double chat_sum = 0;
    cr_assert(kind && tool);
    for (size_t i = 0; i < wl.num_reqs; i++) {
        const rkv_wl_request *q = &wl.reqs[i];
        cr_assert_lt(q->session, cfg.sessions, "request %zu has no session", i);
        cr_assert_eq(q->hint_priority, -1);
        cr_assert_eq(q->hint_ttl_ms, 0);
        if (q->parent == RKV_WL_NO_PARENT)
            continue;
        const rkv_wl_request *pq = &wl.reqs[q->parent];
        cr_assert_eq(pq->session, q->session, "a turn stays in its session");
        int k = pq->tool_call ? 1 : 2;
        cr_assert(kind[q->session] == 0 || kind[q->session] == k,
                  "session %llu mixes tool calls and chat",
                  (unsigned long long)q->session);
        kind[q->session] = (int8_t)k;
        cr_assert_geq(q->think_ms, 0);
        if (k == 1) {
            cr_assert_leq(q->think_ms, cfg.tool_max_ms);
            tool[ntool++] = q->think_ms;
        } else {
            nchat++;
            chat_sum += q->think_ms;
        }
    }
    /* A last turn is never marked: nothing follows it. */
    for (size_t i = 0; i < wl.num_reqs; i++) {
        int has_child = 0;
        for (size_t j = i + 1; j < wl.num_reqs && !has_child; j++)
            has_child = wl.reqs[j].parent == i;
        if (!has_child)
            cr_assert_eq(wl.reqs[i].tool_call, 0, "request %zu", i);
    }
    size_t tool_sessions = 0;
    for (uint32_t s = 0; s < cfg.sessions; s++)
        tool_sessions += kind[s] == 1;
    /* 128 sessions, 3 in 4 tool sessions: 96 expected, sd 4.9 */
    cr_assert(tool_sessions > 70 && tool_sessions < 120, "%zu tool sessions",
              tool_sessions);
    cr_assert_gt(ntool, 500);
    qsort(tool, ntool, sizeof *tool, cmp_double);
    double med = tool[ntool / 2], p90 = tool[ntool * 9 / 10];
    /* lognormal(ln 2000, 1.4): median 2000 (the sample median of > 500
     * draws is within ~15 %), p90 12,000 */
    cr_assert(med > 1600 && med < 2500, "median tool latency %.0f ms", med);
    cr_assert(p90 > 7000 && p90 < 20000, "p90 tool latency %.0f ms", p90);
    cr_assert_gt(tool[ntool - 1], 30000.0, "a long tail: max %.0f ms",
                 tool[ntool - 1]);
    cr_assert_gt(nchat, 50);
    double chat_mean = chat_sum / (double)nchat;
    cr_assert(chat_mean > 600 && chat_mean < 1600, "chat think mean %.0f",
              chat_mean);

    /* The sessions' contexts (each one's largest prompt + output) add up
     * to more than twice the default capacity. */
    uint64_t *ctx = calloc(cfg.sessions, sizeof *ctx);
    cr_assert_not_null(ctx);
    for (size_t i = 0; i < wl.num_reqs; i++) {
        uint64_t c = (uint64_t)wl.reqs[i].input_length + wl.reqs[i].output_length;
        if (c > ctx[wl.reqs[i].session])
            ctx[wl.reqs[i].session] = c;
    }
    uint64_t total = 0;
    for (uint32_t s = 0; s < cfg.sessions; s++)
        total += ctx[s];
    rkv_cost_model m;
    rkv_cost_model_init(&m);
    uint64_t cap = rkv_cost_default_capacity_tokens(&m);
    cr_assert_gt(total, 2 * cap, "contexts %llu vs capacity %llu",
                 (unsigned long long)total, (unsigned long long)cap);
    free(ctx);
    free(kind);
    free(tool);
    rkv_workload_free(&wl);
}

/* Same seed, same workload, draws included; chat_share 1 gives the
 * exponential think times only, and a different tool median moves only
 * the tool sessions' think times. */
Test(agentic_tools, deterministic_and_configurable)
{
    uint64_t seed = rkv_test_seed("agentic_tools.deterministic");
    rkv_agentic_config cfg;
    rkv_agentic_config_init(&cfg);
    cfg.sessions = 40;
    rkv_workload a, b, c;
    rkv_workload_init(&a);
    rkv_workload_init(&b);
    rkv_workload_init(&c);
    cr_assert_eq(rkv_workload_agentic(&a, &cfg, seed), RKV_OK);
    cr_assert_eq(rkv_workload_agentic(&b, &cfg, seed), RKV_OK);
    cr_assert_eq(a.num_reqs, b.num_reqs);
    for (size_t i = 0; i < a.num_reqs; i++) {
        cr_assert_eq(a.reqs[i].think_ms, b.reqs[i].think_ms);
        cr_assert_eq(a.reqs[i].session, b.reqs[i].session);
        cr_assert_eq(a.reqs[i].tool_call, b.reqs[i].tool_call);
    }
    rkv_workload_free(&b);
    cfg.chat_share = 1.0;
    cr_assert_eq(rkv_workload_agentic(&b, &cfg, seed), RKV_OK);
    for (size_t i = 0; i < b.num_reqs; i++)
        cr_assert_eq(b.reqs[i].tool_call, 0);
    cfg.chat_share = 0.0;
    cfg.tool_median_ms = 20000;
    cfg.tool_sigma = 0;
    cfg.tool_max_ms = 20000;
    cr_assert_eq(rkv_workload_agentic(&c, &cfg, seed), RKV_OK);
    for (size_t i = 0; i < c.num_reqs; i++)
        if (c.reqs[i].parent != RKV_WL_NO_PARENT) {
            cr_assert(fabs(c.reqs[i].think_ms - 20000) < 1e-6);
            cr_assert(c.reqs[c.reqs[i].parent].tool_call);
        }
    /* the sessions' prompts do not depend on the tool draws */
    cr_assert_eq(b.prompt_tokens, c.prompt_tokens);
    cr_assert_eq(b.num_reqs, c.num_reqs);
    cfg.tool_sigma = -1;
    rkv_workload_free(&c);
    cr_assert_eq(rkv_workload_agentic(&c, &cfg, seed), RKV_ERR_INVALID_ARG);
    cfg.tool_sigma = 1;
    cfg.chat_share = 1.5;
    cr_assert_eq(rkv_workload_agentic(&c, &cfg, seed), RKV_ERR_INVALID_ARG);
    rkv_workload_free(&a);
    rkv_workload_free(&b);
    rkv_workload_free(&c);
}

/* Every session's last turn (and only it) carries session_end: its answer
 * ends without a tool call. */
Test(agentic_tools, last_turn_ends_the_session)
{
    rkv_agentic_config cfg;
    rkv_agentic_config_init(&cfg);
    cfg.sessions = 20;
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_agentic(&wl, &cfg, 3), RKV_OK, "%s",
                 rkv_last_error());
    /* a session's turns are a chain of parents: the last has no child */
    uint8_t *has_child = calloc(wl.num_reqs, 1);
    cr_assert(has_child);
    for (size_t i = 0; i < wl.num_reqs; i++)
        if (wl.reqs[i].parent != RKV_WL_NO_PARENT)
            has_child[wl.reqs[i].parent] = 1;
    size_t ends = 0;
    for (size_t i = 0; i < wl.num_reqs; i++) {
        int is_last = !has_child[i];
        cr_assert_eq(wl.reqs[i].session_end, is_last, "request %zu", i);
        cr_assert(!(is_last && wl.reqs[i].tool_call),
                  "a last turn calls no tool");
        ends += wl.reqs[i].session_end;
    }
    cr_assert_eq(ends, cfg.sessions);
    free(has_child);
    rkv_workload_free(&wl);
}

/* The open-loop chat generator: every turn extends its conversation's
 * previous prompt by that turn's output and a new message, under one of
 * the shared prefixes; the last turn ends the session; bad configs are
 * refused and leave the workload empty. */
Test(chat_workload, turns_extend_their_conversation)
{
    rkv_chat_config cc;
    rkv_chat_config_init(&cc);
    cc.conversations = 60;
    cc.prefixes = 5;
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_chat(&wl, &cc, 3), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_workload_check(&wl), RKV_OK, "%s", rkv_last_error());
    cr_assert_gt(wl.num_reqs, 60u);
    uint64_t *last = calloc(cc.conversations, sizeof *last);
    uint32_t ends = 0, firsts[5] = {0};
    for (size_t i = 0; i < wl.num_reqs; i++) {
        const rkv_wl_request *q = &wl.reqs[i];
        cr_assert_lt(q->session, cc.conversations);
        cr_assert_eq(q->parent, RKV_WL_NO_PARENT);
        ends += q->session_end;
        if (last[q->session] != 0) {
            /* previous prompt, its output, then new content */
            const rkv_wl_request *p = &wl.reqs[last[q->session] - 1];
            cr_assert_geq(q->arrival_ms, p->arrival_ms);
            cr_assert_gt(q->num_segs, p->num_segs);
            for (uint32_t k = 0; k < p->num_segs; k++)
                cr_assert_eq(wl.seg_keys[q->seg_begin + k],
                             wl.seg_keys[p->seg_begin + k]);
            cr_assert_eq(wl.seg_keys[q->seg_begin + p->num_segs],
                         p->output_key);
            cr_assert_eq(p->session_end, 0);
        } else {
            /* the first segment names the shared prefix */
            cr_assert_lt(wl.seg_keys[q->seg_begin], 64u);
            firsts[0] += wl.seg_keys[q->seg_begin] == wl.seg_keys[wl.reqs[0].seg_begin];
        }
        last[q->session] = i + 1;
    }
    cr_assert_eq(ends, cc.conversations);
    cr_assert_gt(firsts[0], 1u, "prefixes are shared");
    free(last);
    rkv_workload_free(&wl);

    rkv_chat_config bad = cc;
    bad.turns_mean = 0.5;
    cr_assert_eq(rkv_workload_chat(&wl, &bad, 3), RKV_ERR_INVALID_ARG);
    bad = cc;
    bad.prefix_max = cc.max_prompt_tokens;
    cr_assert_eq(rkv_workload_chat(&wl, &bad, 3), RKV_ERR_INVALID_ARG);
    cr_assert_eq(wl.num_reqs, 0u);
    cr_assert_eq(rkv_workload_chat(&wl, NULL, 3), RKV_ERR_INVALID_ARG);
}
