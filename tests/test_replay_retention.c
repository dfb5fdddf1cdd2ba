/*
 * tests/test_replay_retention.c -- retention in the scheduler replay
 * (sim/replay.h "Retention", sim/replay_retain.c): mode names, the pins
 * each mode makes and their end (every session's pins are gone once it
 * ended), none changes nothing, the traffic classes add up, hints from
 * the workload win, and runs are deterministic. The scheduler and tree
 * are checked (rkv_sched_check) every few steps.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sim/replay.h"
#include "sim/replay_retain.h"
#include "sim/workload.h"
#include "tests/support/test_util.h"
#include "tests/support/test_workload.h"

Test(replay_retention, names_round_trip)
{
    for (int m = 0; m < RKV_RETENTION_COUNT; m++) {
        const char *name = rkv_replay_retention_name(m);
        cr_assert_not_null(name);
        int back = -1;
        cr_assert(rkv_replay_retention_parse(name, &back));
        cr_assert_eq(back, m);
    }
    int x = 5;
    cr_assert_not(rkv_replay_retention_parse("TTL", &x));
    cr_assert_not(rkv_replay_retention_parse(NULL, &x));
    cr_assert_eq(x, 5);
    cr_assert_null(rkv_replay_retention_name(RKV_RETENTION_COUNT));
    cr_assert_null(rkv_replay_retention_name(-1));
}

static void run(const rkv_workload *wl, int mode, int evict, uint64_t cap,
                rkv_replay_result *res)
{
    rkv_replay_config cfg = rkv_test_replay_config(0, cap, 64);
    cfg.retention = mode;
    cfg.evict_policy = evict;
    rkv_status st = rkv_replay_sched(wl, &cfg, res);
    cr_assert_eq(st, RKV_OK, "%s: %s", rkv_replay_retention_name(mode),
                 rkv_last_error());
}

Test(replay_retention, pins_end_with_their_sessions, .timeout = 300)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 24, 10, "replay_retention.pins_end");
    rkv_replay_result none, r;
    run(&wl, RKV_RETENTION_NONE, RKV_EVICT_LRU, 60000, &none);
    cr_assert_eq(none.pins_made + none.pins_refused, 0);
    cr_assert_gt(none.tool_requests, 0);
    cr_assert_eq(none.tool_requests + none.other_requests, none.requests);
    cr_assert_eq(none.tool_prompt_tokens + none.other_prompt_tokens,
                 none.prompt_tokens);
    cr_assert_eq(none.tool_hit_tokens + none.other_hit_tokens, none.hit_tokens);
    static const int pinning[] = {RKV_RETENTION_TTL, RKV_RETENTION_TTL_ORACLE,
                                  RKV_RETENTION_TTL_SESSION};
    for (size_t k = 0; k < 3; k++) {
        for (int ev = 0; ev < 2; ev++) {
            run(&wl, pinning[k], ev, 60000, &r);
            const char *n = rkv_replay_retention_name(pinning[k]);
            cr_assert_gt(r.pins_made, 0, "%s makes pins", n);
            /* every session ended: each pin expired, was released or
             * was revoked */
            cr_assert_eq(r.pins_made,
                         r.pins_expired + r.pins_released + r.pins_revoked,
                         "%s: %llu made, %llu expired + %llu released + %llu "
                         "revoked", n, (unsigned long long)r.pins_made,
                         (unsigned long long)r.pins_expired,
                         (unsigned long long)r.pins_released,
                         (unsigned long long)r.pins_revoked);
            if (pinning[k] == RKV_RETENTION_TTL_SESSION)
                cr_assert_eq(r.pins_expired, 0, "session pins never expire");
            /* classes do not depend on the mode */
            cr_assert_eq(r.tool_requests, none.tool_requests);
            cr_assert_eq(r.requests, none.requests);
            cr_assert_eq(r.prompt_tokens, none.prompt_tokens);
        }
    }
    /* priority mode makes no pin */
    run(&wl, RKV_RETENTION_PRIORITY, RKV_EVICT_PRIORITY, 60000, &r);
    cr_assert_eq(r.pins_made, 0);
    /* hints mode without hints nor session signals is none (the agentic
     * workload's sessions and session ends are signals) */
    rkv_replay_config cfg = rkv_test_replay_config(0, 60000, 64);
    cfg.retention = RKV_RETENTION_HINTS;
    cfg.session_signals = 0;
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &r), RKV_OK);
    cr_assert_eq(r.hit_tokens, none.hit_tokens);
    cr_assert_eq(r.pins_made, 0);
    cr_assert_eq(r.ended_pages, 0);
    rkv_workload_free(&wl);
}

Test(replay_retention, deterministic_and_hints_win, .timeout = 300)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 24, 10, "replay_retention.hints");
    rkv_replay_result a, b;
    run(&wl, RKV_RETENTION_TTL, RKV_EVICT_LRU, 60000, &a);
    run(&wl, RKV_RETENTION_TTL, RKV_EVICT_LRU, 60000, &b);
    cr_assert_eq(a.hit_tokens, b.hit_tokens);
    cr_assert_eq(a.pins_made, b.pins_made);
    cr_assert_eq(a.ttft_ms.p99, b.ttft_ms.p99);
    /* a hint pins even what the mode would not: every request of the
     * chat sessions and every last turn */
    size_t hinted = 0;
    for (size_t i = 0; i < wl.num_reqs; i++)
        if (!wl.reqs[i].tool_call) {
            wl.reqs[i].hint_ttl_ms = 5000;
            hinted++;
        }
    cr_assert_gt(hinted, 0);
    run(&wl, RKV_RETENTION_HINTS, RKV_EVICT_LRU, 60000, &b);
    cr_assert_gt(b.pins_made + b.pins_refused, 0);
    run(&wl, RKV_RETENTION_NONE, RKV_EVICT_LRU, 60000, &b);
    cr_assert_eq(b.pins_made + b.pins_refused, 0, "none ignores hints");
    /* an out-of-range mode is refused */
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.retention = RKV_RETENTION_COUNT;
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &b), RKV_ERR_INVALID_ARG);
    rkv_workload_free(&wl);
}

/* A TTL is on the workload's clock: before a later trace line (open loop,
 * its gap scaled by time_scale) the pin's TTL is scaled the same way, a
 * line's ttl_ms hint too (and its priority_duration_ms); before a closed-loop agentic turn (think time
 * unscaled) it is kept. */
Test(replay_retention, ttl_follows_the_time_scale)
{
    static const char trace[] =
        "{\"timestamp\":0,\"input_length\":600,\"output_length\":4,"
        "\"hash_ids\":[1,2],\"session\":7}\n"
        "{\"timestamp\":900,\"input_length\":1100,\"output_length\":4,"
        "\"hash_ids\":[1,2,3],\"session\":7,\"ttl_ms\":300,"
        "\"priority\":60,\"priority_duration_ms\":200}\n"
        "{\"timestamp\":2000,\"input_length\":1600,\"output_length\":4,"
        "\"hash_ids\":[1,2,3,4],\"session\":7}\n";
    rkv_trace_reader *rd;
    cr_assert_eq(rkv_trace_reader_open_memory(trace, sizeof trace - 1, "t",
                                              &rd), RKV_OK, "%s",
                 rkv_last_error());
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, rd, 0), RKV_OK, "%s",
                 rkv_last_error());
    rkv_trace_reader_close(rd);
    rkv_retention_plan p;
    cr_assert_eq(rkv_retention_plan_init(&p, &wl, UINT64_MAX), RKV_OK);
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.retention = RKV_RETENTION_TTL;
    cfg.retention_ttl_ms = 1000;
    rkv_retention r;
    for (int k = 0; k < 2; k++) {
        cfg.time_scale = k == 0 ? 1.0 : 10.8;
        cr_assert(rkv_retention_plan_for(&p, &wl, &cfg, 0, &r));
        cr_assert_eq(r.ttl_ms, k == 0 ? 1000u : 10800u);
        cr_assert(rkv_retention_plan_for(&p, &wl, &cfg, 1, &r)); /* its hint */
        cr_assert_eq(r.ttl_ms, k == 0 ? 300u : 3240u);
        /* a priority's duration is on the same clock */
        cr_assert_eq(r.priority, 60);
        cr_assert_eq(r.priority_duration_ms, k == 0 ? 200u : 2160u);
        cr_assert(rkv_retention_plan_for(&p, &wl, &cfg, 0, &r));
        cr_assert_eq(r.priority_duration_ms, 0);
    }
    rkv_retention_plan_free(&p);
    rkv_workload_free(&wl);

    rkv_test_agentic(&wl, 8, 6, "replay_retention.ttl_scale");
    cr_assert_eq(rkv_retention_plan_init(&p, &wl, UINT64_MAX), RKV_OK);
    cfg.time_scale = 10.8;
    size_t checked = 0;
    for (size_t i = 0; i < wl.num_reqs; i++)
        if (wl.reqs[i].tool_call) {
            cr_assert(rkv_retention_plan_for(&p, &wl, &cfg, i, &r));
            cr_assert_eq(r.ttl_ms, 1000u, "closed loop: think time unscaled");
            checked++;
        }
    cr_assert_gt(checked, 0);
    rkv_retention_plan_free(&p);
    rkv_workload_free(&wl);
}

/* Session signals reach eviction in both orders: under hints, END (an
 * agentic session's last turn carries session_end) marks the pages only
 * the ended session used, WAIT pins a context with a session and no end;
 * each can be switched off; together they beat LRU alone on a workload
 * whose contexts outgrow the cache (fixed seed). */
Test(replay_retention, session_signals_in_both_orders, .timeout = 300)
{
    rkv_agentic_config ac;
    rkv_agentic_config_init(&ac);
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_agentic(&wl, &ac, 1), RKV_OK);
    rkv_replay_result r[4];
    for (uint32_t sig = 0; sig < 4; sig++) {
        rkv_replay_config cfg = rkv_test_replay_config(512, 100000, 101);
        cfg.retention = RKV_RETENTION_HINTS;
        cfg.session_signals = sig;
        cr_assert_eq(rkv_replay_file_order(&wl, &cfg, &r[sig]), RKV_OK, "%s",
                     rkv_last_error());
        cr_assert_eq(r[sig].ended_pages > 0, (sig & RKV_SIGNAL_END) != 0,
                     "signals %u: %llu ended pages", sig,
                     (unsigned long long)r[sig].ended_pages);
        cr_assert_eq(r[sig].pins_made > 0, (sig & RKV_SIGNAL_WAIT) != 0,
                     "signals %u: %llu pins", sig,
                     (unsigned long long)r[sig].pins_made);
    }
    cr_assert_gt(r[3].hit_rate, r[0].hit_rate, "both %.4f, none %.4f",
                 r[3].hit_rate, r[0].hit_rate);
    rkv_workload_free(&wl);

    rkv_test_agentic(&wl, 12, 6, "replay_retention.session_signals");
    rkv_replay_result s;
    run(&wl, RKV_RETENTION_HINTS, RKV_EVICT_LRU, 60000, &s);
    cr_assert_gt(s.ended_pages, 0, "scheduler order");
    cr_assert_gt(s.pins_made + s.pins_refused, 0);
    cr_assert_eq(s.pins_released + s.pins_expired + s.pins_revoked,
                 s.pins_made, "every pin ends");
    rkv_workload_free(&wl);
}

/* ttl-oracle pins a waiting request's context until its next turn comes
 * (plus a second). The file replay makes the pin at the request's own
 * arrival, so the next turn comes the gap between the two arrivals later
 * -- the service estimate plus the tool time -- not the tool time alone
 * (a pin that expired before the turn it was for, up to 6 s early). */
Test(replay_retention, oracle_pin_covers_the_gap_in_file_order)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 24, 10, "replay_retention.oracle_gap");
    rkv_replay_config cfg = rkv_test_replay_config(0, 60000, 0);
    cfg.retention = RKV_RETENTION_TTL_ORACLE;
    cfg.time_scale = 1.5;
    rkv_retention_plan plan;
    cr_assert_eq(rkv_retention_plan_init(&plan, &wl, 1 << 20), RKV_OK);
    plan.file_order = 1;
    size_t waiting = 0;
    for (size_t i = 0; i < wl.num_reqs; i++) {
        if (!plan.waits[i])
            continue;
        rkv_retention r;
        cr_assert(rkv_retention_plan_for(&plan, &wl, &cfg, i, &r));
        double gap = (wl.reqs[plan.next[i]].arrival_ms - wl.reqs[i].arrival_ms) *
                     cfg.time_scale;
        cr_assert_geq((double)r.ttl_ms, gap + 999.0,
                      "request %zu: pinned %llu ms, its next turn comes "
                      "%.0f ms later", i, (unsigned long long)r.ttl_ms, gap);
        waiting++;
    }
    cr_assert_gt(waiting, 0);
    rkv_retention_plan_free(&plan);
    rkv_workload_free(&wl);
}
