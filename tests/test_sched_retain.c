/*
 * tests/test_sched_retain.c -- retention through the scheduler
 * (rkv_request_desc.retention, issue 13): a request's TTL pin keeps its
 * prefix cached against other traffic until the deadline, so the session's
 * next turn hits it; after the deadline it is ordinary cache again; pins
 * never hold back a request (running ones complete, an admission that only
 * revoking pins can serve is not delayed); pins over the tree's cap are
 * refused and counted, never a failed step. The fake engine
 * (tests/test_sched_engine.h) checks every plan's KV and calls
 * rkv_sched_check after every step and commit.
 */
#include "tests/test_sched_engine.h"

#define PAGE 4u

/* eng_init with a tree built from tcfg (pin cap, eviction policy). */
static void init_with_tree(eng *e, uint32_t nblocks,
                           const rkv_sched_config *c,
                           const rkv_tree_config *tcfg, uint32_t max_ids)
{
    eng_init(e, nblocks, PAGE, c, max_ids);
    rkv_sched_destroy(e->s);
    rkv_tree_destroy(e->tree);
    OK(rkv_tree_create(e->pool, tcfg, &e->tree));
    OK(rkv_sched_create(e->tree, c, &e->s));
}

static void small_cfg(rkv_sched_config *c)
{
    rkv_sched_config_init(c);
    c->max_running = 4;
    c->max_batch_tokens = 64;
    c->dedup_min_tokens = 0;
}

/* Runs to completion one request with key-derived tokens. */
static void run_one(eng *e, uint64_t id, uint32_t len, uint32_t max_new,
                    uint64_t key)
{
    int32_t p[256];
    cr_assert_leq(len, 256);
    fill_tokens(p, len, key);
    OK(eng_submit(e, id, 0, p, len, max_new, 0));
    eng_drain(e, 10000);
}

/* Requests 0 and 1 (40 tokens, 1 new, token keys key0 and key0 + 1) run,
 * each pinning its 40 tokens (owners owner0, owner0 + 1): 20 blocks
 * pinned after. */
static void pin_two(eng *e, uint64_t owner0, uint64_t key0)
{
    rkv_retention r = tu_pin(40, 1000000, 0);
    for (uint32_t i = 0; i < 2; i++) {
        r.owner = owner0 + i;
        e->retention = &r;
        run_one(e, i, 40, 1, key0 + i);
    }
    e->retention = NULL;
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(e->tree, &rs));
    cr_assert_eq(rs.pinned_blocks, 20);
}

/* small_cfg's engine of 16 pages (4 request ids), the 8 tokens p of key 1
 * and a retention r at its defaults. */
static void small_eng_p8(eng *e, rkv_sched_config *c, int32_t p[8], rkv_retention *r)
{
    small_cfg(c);
    eng_init(e, 16, PAGE, c, 4);
    fill_tokens(p, 8, 1);
    rkv_retention_init(r);
}

/* Session A (id 0): 40-token prompt; then 24 other requests of 40 tokens
 * (6 x the pool); then A's next turn (its conversation + 8 tokens) at time
 * turn_at. Returns the tokens A's next turn found cached. */
static uint32_t agentic(const rkv_retention *ret, double turn_at,
                        rkv_sched_stats *st_out)
{
    rkv_sched_config c;
    small_cfg(&c);
    eng e;
    init_with_tree(&e, 40, &c, NULL, 32);
    e.seed = 13;
    e.retention = ret;
    run_one(&e, 0, 40, 4, 1000);
    e.retention = NULL;
    for (uint32_t i = 1; i <= 24; i++)
        run_one(&e, i, 40, 4, 2000 + i);
    cr_assert_lt(e.now, 500.0, "other traffic took %.0f ms", e.now);
    if (e.now < turn_at)
        e.now = turn_at;
    sh_req *a = &e.reqs[0];
    int32_t t[64];
    memcpy(t, a->tok, a->len * sizeof *t);
    fill_tokens(t + a->len, 8, 77);
    OK(eng_submit(&e, 30, 0, t, a->len + 8, 2, 0));
    eng_drain(&e, 1000);
    uint32_t hit = e.reqs[30].first_cached;
    OK(rkv_sched_get_stats(e.s, st_out));
    eng_done(&e);
    return hit;
}

Test(sched_retain, pinned_prefix_survives_traffic_and_is_hit)
{
    rkv_sched_stats st;
    /* without retention LRU has thrown A's context out */
    uint32_t lru = agentic(NULL, 0, &st);
    cr_assert_lt(lru, 40u, "LRU kept %u tokens: the traffic is too light", lru);
    cr_assert_eq(st.retains, 0);

    rkv_retention r;
    rkv_retention_init(&r);
    r.pin_tokens = 1000; /* the whole conversation (clamped at its end) */
    r.ttl_ms = 10000;
    r.owner = 5;
    uint32_t pinned = agentic(&r, 0, &st);
    /* prompt 40 + 4 sampled: 43 tokens of KV, 10 full pages; the turn
     * matches at most its length - 1 */
    cr_assert_eq(pinned, 40u, "the pinned turn hit %u tokens", pinned);
    cr_assert_gt(st.retains, 0);
    cr_assert_eq(st.pins_refused, 0);
    cr_assert_eq(st.retain_failed, 0);

    /* after the deadline the pin is gone and traffic has evicted it */
    r.ttl_ms = 5;
    uint32_t expired = agentic(&r, 0, &st);
    cr_assert_lt(expired, 40u, "an expired pin still held %u tokens", expired);
}

/* A pin lasts until its deadline however long the session is away: the
 * turn comes back 150 s later (the steps in between move the tree's time
 * past the traffic) and still hits. */
Test(sched_retain, pin_outlasts_a_long_gap_before_its_deadline)
{
    rkv_sched_stats st;
    rkv_retention r = tu_pin(40, 200000, 1);
    cr_assert_eq(agentic(&r, 150000.0, &st), 40u);
}

/* Sessions pin 10 pages each under a cap of 20 pages (50 % of 40): the
 * third is refused, counted, and its priority still applies. */
Test(sched_retain, pins_over_the_cap_are_refused_and_counted)
{
    rkv_sched_config c;
    small_cfg(&c);
    eng e;
    init_with_tree(&e, 40, &c, NULL, 16);
    rkv_retention r = tu_pin(40, 1000000, 0);
    r.priority = 90;
    r.prio_end = 1000;
    for (uint32_t i = 0; i < 3; i++) {
        r.owner = 100 + i;
        e.retention = &r;
        run_one(&e, i, 40, 1, 500 + i);
    }
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.pins_refused, 1, "%llu refused",
                 (unsigned long long)st.pins_refused);
    cr_assert_eq(st.retain_failed, 0);
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.pinned_blocks, 20);
    cr_assert_eq(rs.pin_cap_blocks, 20);
    /* the refused session's pages got their priority anyway */
    int32_t p[40];
    fill_tokens(p, 40, 502);
    rkv_match m;
    OK(rkv_tree_match(e.tree, 0, p, 40, NULL, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.matched_tokens, 40);
    int prio = -1;
    OK(rkv_tree_node_priority(e.tree, m.node, &prio));
    cr_assert_eq(prio, 90);
    eng_done(&e);
}

/* Pins fill the cap (20 of 40 blocks) and a small request decodes for a
 * while; a large one (18 blocks) arrives. Free + unpinned blocks cannot
 * hold both; revoking pins can. It must be admitted at once, not after
 * the small one finishes, and both complete. */
Test(sched_retain, pins_never_hold_back_running_or_admission)
{
    rkv_sched_config c;
    small_cfg(&c);
    eng e;
    init_with_tree(&e, 40, &c, NULL, 16);
    pin_two(&e, 7, 900);
    uint64_t y = 0;
    OK(rkv_tree_pins_yieldable(e.tree, &y));
    cr_assert_eq(y, 20);

    int32_t p[80];
    fill_tokens(p, 4, 31);
    OK(eng_submit(&e, 5, 0, p, 4, 30, 0)); /* decodes 30 steps */
    (void)eng_step(&e);
    (void)eng_step(&e);
    fill_tokens(p, 70, 32);
    OK(eng_submit(&e, 6, 0, p, 70, 2, 0));
    (void)eng_step(&e);
    cr_assert(e.reqs[5].live, "the small request already finished");
    cr_assert_geq(e.reqs[6].first_plan_ms, 0,
                  "the large request waits while pins could yield");
    eng_drain(&e, 1000);
    cr_assert_eq(e.reqs[5].gen, 30);
    cr_assert_eq(e.reqs[6].gen, 2);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.preemptions, 0);
    eng_done(&e);
}

/* A request alone that needs more than free + unpinned pages while pins
 * hold the cap: it runs to the end (the tree revokes pins for it). */
Test(sched_retain, running_request_completes_when_pins_fill_the_cap)
{
    rkv_sched_config c;
    small_cfg(&c);
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.max_pinned_pct = 100;
    eng e;
    init_with_tree(&e, 24, &c, &tc, 16);
    pin_two(&e, 1, 40);
    rkv_retention_stats rs;
    run_one(&e, 3, 20, 60, 99); /* 79 tokens of KV: 20 blocks */
    cr_assert_eq(e.reqs[3].gen, 60);
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_gt(rs.pins_revoked, 0);
    eng_done(&e);
}

Test(sched_retain, bad_retention_is_refused_at_submit)
{
    rkv_sched_config c;
    eng e;
    int32_t p[8];
    rkv_retention r;
    small_eng_p8(&e, &c, p, &r);
    r.priority = 101;
    e.retention = &r;
    cr_assert_eq(eng_submit(&e, 0, 0, p, 8, 1, 0), RKV_ERR_INVALID_ARG);
    r.priority = 10;
    r.prio_begin = 5;
    r.prio_end = 4;
    cr_assert_eq(eng_submit(&e, 0, 0, p, 8, 1, 0), RKV_ERR_INVALID_ARG);
    r.prio_end = 8;
    r.pin_tokens = 4;
    cr_assert_eq(eng_submit(&e, 0, 0, p, 8, 1, 0), RKV_ERR_INVALID_ARG);
    r.ttl_ms = 1;
    r.priority = -1;
    r.priority_duration_ms = 5; /* a duration without a priority */
    cr_assert_eq(eng_submit(&e, 0, 0, p, 8, 1, 0), RKV_ERR_INVALID_ARG);
    r.priority = 10;
    OK(eng_submit(&e, 0, 0, p, 8, 1, 0));
    eng_drain(&e, 100);
    eng_done(&e);
}

/* A pin without its own ttl_ms takes its namespace's default TTL: refused
 * at submit while the namespace has none, then made and expiring at it. */
Test(sched_retain, pin_takes_the_namespace_ttl)
{
    rkv_sched_config c;
    eng e;
    int32_t p[8];
    rkv_retention r;
    small_eng_p8(&e, &c, p, &r);
    r.pin_tokens = 8;
    e.retention = &r;
    cr_assert_eq(eng_submit(&e, 0, 3, p, 8, 1, 0), RKV_ERR_INVALID_ARG);
    OK(rkv_tree_set_namespace_ttl(e.tree, 3, 1000));
    OK(eng_submit(&e, 0, 3, p, 8, 1, 0));
    eng_drain(&e, 100);
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.pins, 1);
    cr_assert_eq(rs.pins_made, 1);
    cr_assert_lt((double)rs.now_ms, 1000.0, "the run took %llu ms",
                 (unsigned long long)rs.now_ms);
    OK(rkv_tree_set_time(e.tree, rs.now_ms + 1000)); /* past any deadline */
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.pins, 0);
    cr_assert_eq(rs.pins_expired, 1);
    eng_done(&e);
}

/* A request marked session_end ends its session when it finishes: its
 * pin is released and the pages only it used go before older ones. */
Test(sched_retain, session_end_releases_pins_and_goes_first)
{
    rkv_sched_config c;
    small_cfg(&c);
    eng e;
    init_with_tree(&e, 40, &c, NULL, 8);
    e.seed = 3;
    run_one(&e, 0, 40, 4, 500); /* B: the older context */
    rkv_retention r = tu_pin(1000, 100000, 9);
    r.session_end = 1;
    e.retention = &r;
    run_one(&e, 1, 40, 4, 600); /* A: ends its session */
    e.retention = NULL;
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.sessions_ended, 1);
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.pins, 0, "the session's pin went with it");
    cr_assert_eq(rs.pins_released, 1);
    /* C needs more than the free blocks: A's pages go, not B's (older) */
    run_one(&e, 2, 96, 4, 700);
    rkv_match m;
    OK(rkv_tree_match(e.tree, 0, e.reqs[0].tok, 40, NULL, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.matched_tokens, 40, "B kept");
    OK(rkv_tree_match(e.tree, 0, e.reqs[1].tok, 40, NULL, RKV_MATCH_PEEK, &m));
    cr_assert_lt(m.matched_tokens, 40, "A's pages went first");
    eng_done(&e);
}

/* At the end of the tree's time (a step at now_ms >= 2^64 is UINT64_MAX)
 * a pin could only be born expired: the scheduler applies the priority
 * without the pin instead of making a pin that rkv_sched_check calls
 * corrupt, or failing the retain. */
Test(sched_retain, pin_at_the_end_of_time_keeps_the_priority)
{
    rkv_sched_config c;
    small_cfg(&c);
    eng e;
    eng_init(&e, 16, PAGE, &c, 4);
    rkv_retention r = tu_pin(8, 1000, 3);
    r.priority = 90;
    r.prio_end = 8;
    e.retention = &r;
    e.now = 1e30;
    run_one(&e, 0, 16, 2, 1);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_gt(st.retains, 0);
    cr_assert_eq(st.retain_failed, 0);
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.now_ms, UINT64_MAX);
    cr_assert_eq(rs.pins, 0);
    cr_assert_eq(rs.pins_made, 0);
    eng_done(&e);
}
