/*
 * tests/test_sched_oom.c -- the scheduler when memory runs out: the radix
 * tree's node memory (radix/tree_debug.h) or its own (sched/sched_debug.h).
 *
 * The scheduler inserts finished chunks and finished requests into the tree;
 * an insert that fails with RKV_ERR_NOMEM must not lose, leak or corrupt
 * anything: the request keeps its own references to its blocks (the prefix
 * is simply not cached this time) and everything else goes on.
 *
 * The scenario is a server's life in small: two namespaces, requests that
 * share a long system prompt, agentic turns that extend a finished turn,
 * chunked prefill (a small token budget), a pool small enough to force
 * eviction and preemption, and aborts of waiting and running requests. A
 * baseline run counts the tree's node-memory allocations (N); then for every
 * k in 0..N-1 a fresh pool + tree + scheduler runs the scenario with the
 * (k+1)-th allocation failing. The fake engine (tests/test_sched_engine.h)
 * checks every plan against a shadow model -- exact KV in every attended
 * slot, budgets, slots -- and rkv_sched_check runs after every call. Every
 * request that was not aborted must generate all its tokens, every block
 * must come back to the pool, and the process-wide count of live tree
 * allocations must return to where it started. Some failures surface as a
 * step's RKV_ERR_NOMEM (admitting a request whose match must split a node):
 * the scheduler must pass its check and the retried step must succeed.
 * Every fourth request and the agentic turn carry retention (a priority
 * and a short TTL pin on the system prompt, a few sessions): the tree's
 * allocations for them (priorities, the pin table, splits at range ends)
 * fail in turn too, and a failed retain is skipped, never a failed step.
 * The second test fails each of the scheduler's own allocations in turn
 * (sched/sched_debug.h), under every policy.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "radix/tree_debug.h"
#include "sched/sched_debug.h"
#include "tests/test_sched_engine.h"

#define NREQ 30u
#define SYS_TOKENS 40u
#define POOL_BLOCKS 96u
#define PAGE 4u

static void prompt_of(uint32_t i, int32_t *out, uint32_t *len, uint64_t *ns)
{
    /* requests 0..19: one system prompt + their own question; 20..29: the
     * same shape in another namespace, so equal tokens must not be shared */
    fill_tokens(out, SYS_TOKENS, 777);
    uint32_t own = 3 + 5 * (i % 4);
    fill_tokens(out + SYS_TOKENS, own, 5000 + i);
    *len = SYS_TOKENS + own;
    *ns = i < 20 ? 0 : 42;
}

enum { TREE_ALLOCS, SCHED_ALLOCS };
#define COUNT_ONLY (INT64_MAX / 2)

/* Submits, retrying once after an injected NOMEM. */
static void submit(eng *e, uint64_t id, uint64_t ns, const int32_t *p,
                   uint32_t len, uint32_t max_new, int32_t prio)
{
    rkv_status st = eng_submit(e, id, ns, p, len, max_new, prio);
    if (st == RKV_ERR_NOMEM) {
        OK(rkv_sched_check(e->s));
        e->nomem_seen++;
        st = eng_submit(e, id, ns, p, len, max_new, prio);
    }
    cr_assert_eq(st, RKV_OK, "submit %llu: %s", (unsigned long long)id,
                 rkv_last_error());
}

/* Runs the scenario with the (fail_k+1)-th allocation of `which` failing
 * (fail_k < 0: none); returns how many allocations of `which` it made. */
static uint64_t scenario(int which, rkv_policy pol, int64_t fail_k,
                         uint64_t *nomem_surfaced)
{
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    c.policy = pol;
    c.max_running = 6;
    c.max_batch_tokens = 24; /* chunked prefill of the 40+ token prompts */
    c.dedup_min_tokens = 8;
    eng e;
    eng_init(&e, POOL_BLOCKS, PAGE, &c, NREQ + 4);
    e.seed = 2026;
    e.tolerate_nomem = 1;
    /* the tree allocated while being created: count from here, where the
     * injection is armed */
    uint64_t tree_calls0 = rkv_tree_debug_alloc_calls(e.tree);
    if (which == TREE_ALLOCS && fail_k >= 0)
        rkv_tree_debug_fail_alloc_after(e.tree, fail_k);
    if (which == SCHED_ALLOCS)
        rkv_sched_debug_fail_alloc_after(fail_k >= 0 ? fail_k : COUNT_ONLY);

    int32_t p[SYS_TOKENS + 64];
    uint32_t len;
    uint64_t ns;
    rkv_retention ret = tu_pin(SYS_TOKENS, 30, 0);
    ret.priority = 70;
    ret.prio_end = SYS_TOKENS + 8;
    for (uint32_t i = 0; i < NREQ; i++) {
        prompt_of(i, p, &len, &ns);
        ret.owner = i % 3;
        e.retention = i % 4 == 0 ? &ret : NULL;
        submit(&e, i, ns, p, len, 6 + i % 5, (int32_t)(i % 3));
    }
    e.retention = NULL;
    uint64_t step = 0;
    int turn_sent = 0;
    while (e.live > 0) {
        cr_assert_lt(step++, 5000, "k %lld: no progress",
                     (long long)fail_k);
        /* abort one waiting (or running) and one running request */
        if (step == 3 && e.reqs[13].live)
            eng_abort(&e, 13);
        if (step == 9 && e.reqs[2].live)
            eng_abort(&e, 2);
        /* an agentic turn: request 0's whole conversation plus a reply */
        if (!turn_sent && !e.reqs[0].live) {
            sh_req *r0 = &e.reqs[0];
            int32_t t[SYS_TOKENS + 64];
            cr_assert_leq(r0->len + 7, SYS_TOKENS + 64);
            memcpy(t, r0->tok, r0->len * sizeof *t);
            fill_tokens(t + r0->len, 7, 31337);
            e.retention = &ret;
            submit(&e, NREQ, 0, t, r0->len + 7, 5, 0);
            e.retention = NULL;
            /* and a request that branches inside request 0's cached path:
             * admitting it splits a node, which allocates */
            fill_tokens(t + SYS_TOKENS + PAGE, 5, 4711);
            submit(&e, NREQ + 1, 0, t, SYS_TOKENS + PAGE + 5, 4, 0);
            turn_sent = 1;
        }
        (void)eng_step(&e); /* checks the plan and the scheduler itself */
    }
    cr_assert(turn_sent);
    for (uint32_t i = 0; i <= NREQ + 1; i++) {
        if (i == 13 || i == 2)
            continue;
        cr_assert_eq(e.reqs[i].gen, e.reqs[i].max_new,
                     "k %lld: request %u generated %u of %u",
                     (long long)fail_k, i, e.reqs[i].gen, e.reqs[i].max_new);
    }
    OK(rkv_tree_check(e.tree));
    rkv_sched_stats ss;
    OK(rkv_sched_get_stats(e.s, &ss));
    if (fail_k < 0)
        cr_assert(ss.retains > 0 && ss.retain_failed == 0,
                  "retention not exercised: %llu retains, %llu failed",
                  (unsigned long long)ss.retains,
                  (unsigned long long)ss.retain_failed);
    uint64_t calls;
    if (which == TREE_ALLOCS) {
        calls = rkv_tree_debug_alloc_calls(e.tree) - tree_calls0;
        if (fail_k >= 0)
            cr_assert_gt(calls, (uint64_t)fail_k,
                         "k %lld: the injected failure never happened",
                         (long long)fail_k);
    } else {
        int64_t left = rkv_sched_debug_alloc_countdown();
        calls = fail_k >= 0 ? (uint64_t)fail_k + 1 : (uint64_t)(COUNT_ONLY - left);
        if (fail_k >= 0)
            cr_assert_eq(left, -1, "k %lld: the injected failure never happened",
                         (long long)fail_k);
        rkv_sched_debug_fail_alloc_after(-1);
    }
    if (nomem_surfaced)
        *nomem_surfaced += e.nomem_seen;
    eng_done(&e);
    return calls;
}

Test(sched_oom, every_tree_allocation_failure_is_survived)
{
    int64_t live0 = rkv_debug_live_tree_allocs_global();
    uint64_t surfaced = 0;
    uint64_t n = scenario(TREE_ALLOCS, RKV_POLICY_LPM, -1, &surfaced);
    cr_assert_eq(surfaced, 0);
    cr_assert_gt(n, 10, "scenario too small to mean anything (%llu)",
                 (unsigned long long)n);
    for (uint64_t k = 0; k < n; k++)
        scenario(TREE_ALLOCS, RKV_POLICY_LPM, (int64_t)k, &surfaced);
    /* some failures surface as a step's NOMEM (a match that must split a
     * node), the others are absorbed (an insert that could not cache) */
    cr_log_info("%llu tree allocations; %llu failures surfaced as NOMEM",
                (unsigned long long)n, (unsigned long long)surfaced);
    cr_assert_gt(surfaced, 0);
    cr_assert_lt(surfaced, n);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0,
                 "tree allocations leaked");
}

/* The scheduler's own allocations, under every policy (dfs and bounded
 * allocate their own order structures). A failure either surfaces as NOMEM
 * from the call that allocates -- the scheduler consistent, the retried
 * call succeeding -- or is absorbed by a best-effort path (in-batch dedup
 * registration, the scratch of an insert: that prefix is just not
 * deduplicated or cached); either way the run must complete exactly. */
Test(sched_oom, every_scheduler_allocation_failure_is_survived)
{
    for (int pol = 0; pol <= RKV_POLICY_BOUNDED; pol++) {
        uint64_t surfaced = 0;
        uint64_t n = scenario(SCHED_ALLOCS, (rkv_policy)pol, -1, &surfaced);
        cr_assert_eq(surfaced, 0);
        cr_assert_gt(n, 10, "%s: scenario too small (%llu allocations)",
                     rkv_policy_name((rkv_policy)pol), (unsigned long long)n);
        for (uint64_t k = 0; k < n; k++) {
            uint64_t before = surfaced;
            scenario(SCHED_ALLOCS, (rkv_policy)pol, (int64_t)k, &surfaced);
            cr_assert_leq(surfaced, before + 1);
        }
        cr_log_info("%s: %llu scheduler allocations, each failed once; "
                    "%llu surfaced as NOMEM, the rest absorbed",
                    rkv_policy_name((rkv_policy)pol), (unsigned long long)n,
                    (unsigned long long)surfaced);
        cr_assert_gt(surfaced, 0);
    }
}

/* rkv_sched_create itself: each of its allocations failing gives NOMEM,
 * leaves *out alone, and leaks nothing (ASan checks the last part). */
Test(sched_oom, create_fails_cleanly)
{
    rkv_pool *pool;
    rkv_tree *tree;
    eng_pool_tree(16, PAGE, &pool, &tree);
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    rkv_sched *s = NULL;
    rkv_sched_debug_fail_alloc_after(COUNT_ONLY);
    OK(rkv_sched_create(tree, &c, &s));
    uint64_t n = (uint64_t)(COUNT_ONLY - rkv_sched_debug_alloc_countdown());
    rkv_sched_debug_fail_alloc_after(-1);
    rkv_sched_destroy(s);
    cr_assert_gt(n, 0);
    for (uint64_t k = 0; k < n; k++) {
        rkv_sched *const sentinel = (rkv_sched *)&c; /* any address but NULL */
        s = sentinel; /* on failure *out is left as it was (radixkv.h) */
        rkv_sched_debug_fail_alloc_after((int64_t)k);
        cr_assert_eq(rkv_sched_create(tree, &c, &s), RKV_ERR_NOMEM,
                     "allocation %llu of create", (unsigned long long)k);
        cr_assert_eq(rkv_sched_debug_alloc_countdown(), -1);
        cr_assert_eq(s, sentinel);
    }
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
}

/* The injection is per thread (sched/sched_debug.h): armed here, it must
 * neither fail nor count the allocations of a scheduler that another
 * thread creates and uses. When the countdown was a process-wide static,
 * the other thread's create consumed it and failed with NOMEM. */

static void *other_thread(void *arg)
{
    rkv_status *out = arg;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 16;
    pc.page_size = PAGE;
    rkv_pool *pool = NULL;
    rkv_tree *tree = NULL;
    rkv_sched *s = NULL;
    *out = rkv_pool_create(&pc, &pool);
    if (*out == RKV_OK)
        *out = rkv_tree_create(pool, NULL, &tree);
    if (*out == RKV_OK)
        *out = rkv_sched_create(tree, NULL, &s);
    int32_t p[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    rkv_request_desc d = {.id = 1, .prompt = p, .prompt_len = 8,
                          .max_new_tokens = 2};
    if (*out == RKV_OK)
        *out = rkv_sched_submit(s, &d);
    const rkv_batch_plan *pl;
    if (*out == RKV_OK)
        *out = rkv_sched_step(s, 0, &pl);
    rkv_sched_destroy(s);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
    return NULL;
}

Test(sched_oom, injection_is_per_thread)
{
    rkv_sched_debug_fail_alloc_after(0); /* this thread's next one fails */
    rkv_status st = RKV_ERR_CORRUPT;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, &st), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(st, RKV_OK, "the other thread's scheduler failed: %s",
                 rkv_strerror(st));
    cr_assert_eq(rkv_sched_debug_alloc_countdown(), 0,
                 "the other thread's allocations were counted here");
    rkv_sched_debug_fail_alloc_after(-1);
}
