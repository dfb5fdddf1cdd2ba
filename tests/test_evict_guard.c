/*
 * tests/test_evict_guard.c -- no eviction policy the library offers loses
 * to LRU: on workloads of different shapes made by the project's own
 * generators (agentic tool sessions, chat-only sessions that run one
 * after another, many short sessions, few-shot batches, open-loop chat
 * conversations over shared prefixes with returns at every time scale,
 * several seeds), at capacities from a sixteenth to half of what an
 * unbounded cache holds, every policy (rkv_evict_policy_name's table)
 * reaches LRU's hit rate minus 0.2 point or more, in file order and, on
 * some of them, in the scheduler's order (sim/replay.h). The learned
 * policy's guard (retain/evict_guard.c) is what bounds it: its shadow's
 * hits are LRU's own (same workload, same capacity, file order), and the
 * shapes include ones where the learned order on its own loses more (the
 * default agentic one) and where the guard before this one lost 0.43
 * point (the tool sessions at an eighth).
 *
 * Small workloads (page 64, a few hundred to a few thousand requests)
 * keep it to seconds. Fixed seeds: the shapes are fixed, the figures are
 * computed. RKV_GUARD_SEED_SET=k (default 0) adds 100 k to every seed, to
 * run the same shapes on other draws (bench/RESULTS.md: k = 0..7).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/replay.h"
#include "sim/workload.h"
#include "radixkv.h"
#include "tests/support/test_workload.h"

#define PAGE 64u
#define SHAPES 10
#define BOUND 0.002 /* 0.2 point */

static uint64_t seed_set(void)
{
    const char *e = getenv("RKV_GUARD_SEED_SET");
    return e != NULL ? 100 * strtoull(e, NULL, 10) : 0;
}

static void make_shape(int s, rkv_workload *wl)
{
    rkv_workload_init(wl);
    rkv_status st;
    if (s == 4 || s >= 8) { /* the default agentic workload (the learned
                               order alone loses up to 1.8 points), and
                               other seeds and tool shares of it */
        rkv_agentic_config ac;
        rkv_agentic_config_init(&ac);
        if (s == 8)
            ac.chat_share = 0.5;
        if (s == 9)
            ac.sessions = 96;
        st = rkv_workload_agentic(wl, &ac,
                                  (s == 4 ? 1 : (uint64_t)s) + seed_set());
    } else if (s < 3) {
        rkv_agentic_config ac;
        rkv_agentic_config_init(&ac);
        ac.sessions = 24;
        if (s == 0) { /* tool sessions interleaved */
            ac.chat_share = 0;
        } else if (s == 1) { /* chat sessions one after another */
            ac.chat_share = 1;
            ac.start_span_ms = 24 * 60000.0;
            ac.sessions = 16;
        } else { /* many short sessions */
            ac.sessions = 64;
            ac.turns_min = 2;
            ac.turns_max = 4;
            ac.max_prompt_tokens = 8192;
            ac.user_max = 1000;
        }
        st = rkv_workload_agentic(wl, &ac, 7 + (uint64_t)s + seed_set());
    } else if (s == 3) {
        rkv_fewshot_config fc;
        rkv_fewshot_config_init(&fc);
        fc.requests = 600;
        fc.waves = 3;
        fc.header_tokens = 2000;
        st = rkv_workload_fewshot(wl, &fc, 11 + seed_set());
    } else { /* 5..7: open-loop chat conversations */
        rkv_chat_config cc;
        rkv_chat_config_init(&cc);
        cc.conversations = 400;
        cc.span_ms = 1200000;
        if (s == 6) { /* short gaps, many rarely shared prefixes */
            cc.prefixes = 200;
            cc.prefix_zipf = 0.6;
            cc.gap_median_ms = 5000;
            cc.gap_sigma = 2.0;
        } else if (s == 7) { /* long conversations, steady gaps */
            cc.conversations = 150;
            cc.turns_mean = 8;
            cc.gap_median_ms = 20000;
            cc.gap_sigma = 1.0;
            cc.user_max = 800;
        }
        st = rkv_workload_chat(wl, &cc, 20 + (uint64_t)s + seed_set());
    }
    cr_assert_eq(st, RKV_OK, "%s", rkv_last_error());
}

static rkv_replay_result run(const rkv_workload *wl, uint64_t cap, int policy,
                             int sched)
{
    rkv_replay_config cfg = rkv_test_replay_config(PAGE, cap, 997);
    cfg.evict_policy = policy;
    rkv_replay_result res;
    rkv_status st = sched ? rkv_replay_sched(wl, &cfg, &res)
                          : rkv_replay_file_order(wl, &cfg, &res);
    cr_assert_eq(st, RKV_OK, "%s", rkv_last_error());
    return res;
}

/* Every policy against LRU on shape s at capacity cap; 1 when one lost. */
static double worst_case(const rkv_workload *wl, int s, uint64_t cap,
                         int sched)
{
    rkv_replay_result lru = run(wl, cap, RKV_EVICT_LRU, sched);
    double worst = 1;
    for (int p = 0; rkv_evict_policy_name(p) != NULL; p++) {
        rkv_replay_result r = run(wl, cap, p, sched);
        printf("%s shape %d cap %llu %s %.2f%% (lru %.2f%%, shadow "
               "%.2f%%, overruled %llu times)\n", sched ? "sched" : "file",
               s, (unsigned long long)cap, rkv_evict_policy_name(p),
               100 * r.hit_rate, 100 * lru.hit_rate,
               100.0 * (double)r.guard_lru_hit_tokens /
                   (double)r.prompt_tokens,
               (unsigned long long)r.guard_fallbacks);
        cr_expect_geq(r.hit_rate, lru.hit_rate - BOUND,
                      "%s order, shape %d, capacity %llu: %s %.3f%% < lru "
                      "%.3f%% - %.1f", sched ? "sched" : "file", s,
                      (unsigned long long)cap, rkv_evict_policy_name(p),
                      100 * r.hit_rate, 100 * lru.hit_rate, 100 * BOUND);
        if (r.hit_rate - lru.hit_rate < worst)
            worst = r.hit_rate - lru.hit_rate;
        if (p == RKV_EVICT_LEARNED && !sched) {
            /* the shadow counts LRU's own hits (within 0.1 point:
             * ties between equally old leaves may differ) */
            double shadow = (double)r.guard_lru_hit_tokens /
                            (double)r.prompt_tokens;
            cr_expect(shadow > lru.hit_rate - 0.001 &&
                          shadow < lru.hit_rate + 0.001,
                      "shape %d, capacity %llu: shadow LRU %.3f%%, "
                      "LRU %.3f%%", s, (unsigned long long)cap,
                      100 * shadow, 100 * lru.hit_rate);
        }
    }
    return worst;
}

Test(evict_guard, never_worse_than_lru, .timeout = 600)
{
    double worst = 1;
    for (int s = 0; s < SHAPES; s++) {
        rkv_workload wl;
        make_shape(s, &wl);
        uint64_t all = run(&wl, RKV_REPLAY_UNBOUNDED, RKV_EVICT_LRU, 0)
                           .peak_blocks;
        for (int c = 0; c < 4; c++) {
            uint64_t cap = (all >> (4 - c)) * PAGE; /* 1/16 .. 1/2 */
            double w = worst_case(&wl, s, cap, 0);
            worst = w < worst ? w : worst;
        }
        rkv_workload_free(&wl);
    }
    printf("file order: worst policy - lru %.3f points\n", 100 * worst);
}

/* The scheduler's order: the learned tree's hit rate against an LRU
 * tree's on the same arrivals (the admission order may differ with what
 * each one holds). */
Test(evict_guard, never_worse_than_lru_sched, .timeout = 600)
{
    static const int shapes[] = {0, 4, 5};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        rkv_workload wl;
        make_shape(shapes[k], &wl);
        uint64_t all = run(&wl, RKV_REPLAY_UNBOUNDED, RKV_EVICT_LRU, 0)
                           .peak_blocks;
        for (int c = 0; c < 2; c++)
            worst_case(&wl, shapes[k], (all >> (3 - c)) * PAGE, 1);
        rkv_workload_free(&wl);
    }
}

/* The guard's own bookkeeping (rkv_tree_check: the shadow's list, its
 * missing pages and the policy's share of them) stays consistent when
 * ended sessions' pages go first and when victims are demoted to a host
 * tier instead of dropped, in both orders. */
Test(evict_guard, consistent_with_sessions_and_tiers, .timeout = 600)
{
    rkv_workload wl;
    make_shape(0, &wl);
    for (int tier = 0; tier < 2; tier++)
        for (int sched = 0; sched < 2; sched++) {
            rkv_replay_config cfg = rkv_test_replay_config(PAGE, 31104, 7);
            cfg.evict_policy = RKV_EVICT_LEARNED;
            cfg.retention = RKV_RETENTION_HINTS;
            cfg.host_capacity_tokens = tier ? 62208 : 0;
            rkv_replay_result res;
            rkv_status st = sched ? rkv_replay_sched(&wl, &cfg, &res)
                                  : rkv_replay_file_order(&wl, &cfg, &res);
            cr_assert_eq(st, RKV_OK, "tier %d sched %d: %s", tier, sched,
                         rkv_last_error());
            cr_assert_gt(res.ended_pages, 0);
            cr_assert_gt(res.guard_lru_hit_tokens, 0);
        }
    rkv_workload_free(&wl);
}
