/*
 * tests/test_sched_query.c -- rkv_sched_request_info: a request's state,
 * finish reason and counts across submit, step, commit, abort and finish,
 * how long an ended request stays queryable (until the next step), id
 * reuse, and a busy workload cross-checked against the fake engine's
 * shadow model (tests/test_sched_engine.h). rkv_sched_check after every
 * operation. Expected values come from the requests' construction.
 */
#include <stdio.h>

#include "tests/test_sched_engine.h"

static rkv_sched_config query_cfg(void)
{
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    c.policy = RKV_POLICY_LPM;
    return c;
}

/* An engine of blocks pages of 4 tokens under query_cfg, ids below nreqs. */
static void open_query(eng *e, uint32_t blocks, uint32_t nreqs)
{
    rkv_sched_config c = query_cfg();
    eng_init(e, blocks, 4, &c, nreqs);
}

static rkv_request_info info_of(const eng *e, uint64_t id)
{
    rkv_request_info in;
    memset(&in, 0xAB, sizeof in);
    OK(rkv_sched_request_info(e->s, id, &in));
    cr_assert_eq(in.id, id);
    return in;
}

/* NOT_FOUND, and *out is left exactly as it was. */
static void assert_unknown(const eng *e, uint64_t id)
{
    rkv_request_info in, before;
    memset(&in, 0x5C, sizeof in);
    before = in;
    cr_assert_eq(rkv_sched_request_info(e->s, id, &in), RKV_ERR_NOT_FOUND,
                 "request %llu should be unknown", (unsigned long long)id);
    cr_assert_eq(memcmp(&in, &before, sizeof in), 0, "out was written");
}

static void expect(rkv_request_info in, rkv_req_state state,
                   rkv_finish_reason fin, uint32_t gen, uint32_t cached,
                   uint32_t kv)
{
    cr_assert_eq(in.state, state, "state %d, expected %d", (int)in.state,
                 (int)state);
    cr_assert_eq(in.finish, fin, "finish %d, expected %d", (int)in.finish,
                 (int)fin);
    cr_assert_eq(in.generated_tokens, gen, "generated %u, expected %u",
                 in.generated_tokens, gen);
    cr_assert_eq(in.cached_tokens, cached, "cached %u, expected %u",
                 in.cached_tokens, cached);
    cr_assert_eq(in.kv_tokens, kv, "kv %u, expected %u", in.kv_tokens, kv);
}

static rkv_status submit(eng *e, uint64_t id, const int32_t *p, uint32_t n,
                         uint32_t max_new)
{
    rkv_request_desc d = tu_request(id, p, n, max_new);
    return rkv_sched_submit(e->s, &d);
}

static const rkv_batch_plan *step(eng *e, uint32_t want_reqs)
{
    const rkv_batch_plan *pl = NULL;
    OK(rkv_sched_step(e->s, 0, &pl));
    OK(rkv_sched_check(e->s));
    cr_assert_eq(pl->num_reqs, want_reqs, "plan of %u requests, expected %u",
                 pl->num_reqs, want_reqs);
    return pl;
}

static void commit1(eng *e, int32_t tok, uint8_t fin)
{
    OK(rkv_sched_commit(e->s, &tok, &fin, 0));
    OK(rkv_sched_check(e->s));
}

/* open_query, then request id submitted: the 5 tokens p, one new. */
static void open_one(eng *e, uint32_t blocks, uint32_t nreqs, uint64_t id, const int32_t p[5])
{
    open_query(e, blocks, nreqs);
    OK(submit(e, id, p, 5, 1));
}

/* Request id planned alone: running, nothing generated yet (cached
 * tokens, kv0 in its KV); then tok committed: one generated, kv1. */
static void first_token(eng *e, uint64_t id, int32_t tok, uint32_t cached, uint32_t kv0,
                        uint32_t kv1)
{
    step(e, 1);
    expect(info_of(e, id), RKV_REQ_RUNNING, RKV_FINISH_NONE, 0, cached, kv0);
    commit1(e, tok, 0);
    expect(info_of(e, id), RKV_REQ_RUNNING, RKV_FINISH_NONE, 1, cached, kv1);
}

/* One step that runs one row, then its commit. */
static void run1(eng *e, int32_t tok, uint8_t fin)
{
    step(e, 1);
    commit1(e, tok, fin);
}

Test(sched_query, bad_arguments)
{
    eng e;
    open_query(&e, 16, 4);
    int32_t p[3] = {1, 2, 3};
    OK(submit(&e, 1, p, 3, 2));
    rkv_request_info in;
    cr_assert_eq(rkv_sched_request_info(NULL, 1, &in), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_sched_request_info(e.s, 1, NULL), RKV_ERR_INVALID_ARG);
    assert_unknown(&e, 2);
    cr_assert_neq(rkv_last_error()[0], '\0');
    OK(rkv_sched_check(e.s));
    eng_fini(&e);
}

Test(sched_query, lifecycle_to_length_then_forgotten)
{
    eng e;
    open_query(&e, 64, 8);
    int32_t a[10];
    fill_tokens(a, 10, 1);
    OK(submit(&e, 1, a, 10, 3));
    OK(rkv_sched_check(e.s));
    rkv_request_info in = info_of(&e, 1);
    expect(in, RKV_REQ_WAITING, RKV_FINISH_NONE, 0, 0, 0);
    cr_assert_eq(in.prompt_len, 10);
    cr_assert_eq(in.max_new_tokens, 3);
    cr_assert_eq(in.preemptions, 0);

    /* planned: running, but nothing counts until the commit */
    first_token(&e, 1, 100, 0, 0, 10);
    run1(&e, 101, 0);
    expect(info_of(&e, 1), RKV_REQ_RUNNING, RKV_FINISH_NONE, 2, 0, 11);
    run1(&e, 102, 0);
    /* the third token reaches max_new_tokens */
    expect(info_of(&e, 1), RKV_REQ_FINISHED, RKV_FINISH_LENGTH, 3, 0, 0);
    /* still there on a second look, and abort does not apply to it */
    expect(info_of(&e, 1), RKV_REQ_FINISHED, RKV_FINISH_LENGTH, 3, 0, 0);
    cr_assert_eq(rkv_sched_abort(e.s, 1), RKV_ERR_NOT_FOUND);
    expect(info_of(&e, 1), RKV_REQ_FINISHED, RKV_FINISH_LENGTH, 3, 0, 0);
    OK(rkv_sched_check(e.s));
    /* the next step (empty: nothing is live) forgets it */
    step(&e, 0);
    assert_unknown(&e, 1);

    /* what it computed is cached: prompt (10) + the two tokens that ran
     * (100, 101) = 12 tokens = 3 full pages. A prompt that extends exactly
     * that text is served those 12 tokens at admission. */
    int32_t b[15];
    memcpy(b, a, sizeof a);
    b[10] = 100;
    b[11] = 101;
    b[12] = 7;
    b[13] = 8;
    b[14] = 9;
    OK(submit(&e, 2, b, 15, 4));
    expect(info_of(&e, 2), RKV_REQ_WAITING, RKV_FINISH_NONE, 0, 0, 0);
    first_token(&e, 2, 200, 12, 12, 15);
    /* EOS before max_new_tokens */
    run1(&e, 201, 1);
    expect(info_of(&e, 2), RKV_REQ_FINISHED, RKV_FINISH_STOP, 2, 12, 0);
    step(&e, 0);
    assert_unknown(&e, 2);
    eng_done(&e);
}

Test(sched_query, stop_wins_over_length)
{
    eng e;
    static const int32_t p[5] = {5, 6, 7, 8, 9};
    open_one(&e, 16, 4, 3, p);
    run1(&e, 42, 1); /* EOS sampled as the only allowed token */
    expect(info_of(&e, 3), RKV_REQ_FINISHED, RKV_FINISH_STOP, 1, 0, 0);
    eng_fini(&e);
}

Test(sched_query, abort_waiting_and_planned)
{
    rkv_sched_config c = query_cfg();
    c.max_running = 1; /* the second request waits */
    eng e;
    eng_init(&e, 32, 4, &c, 8);
    int32_t p[6], q[7];
    fill_tokens(p, 6, 2);
    fill_tokens(q, 7, 3);
    OK(submit(&e, 1, p, 6, 5));
    OK(submit(&e, 2, q, 7, 5));
    const rkv_batch_plan *pl = step(&e, 1);
    uint64_t run = pl->req_ids[0], wait = run == 1 ? 2 : 1;
    expect(info_of(&e, wait), RKV_REQ_WAITING, RKV_FINISH_NONE, 0, 0, 0);
    expect(info_of(&e, run), RKV_REQ_RUNNING, RKV_FINISH_NONE, 0, 0, 0);

    /* abort the waiting one */
    OK(rkv_sched_abort(e.s, wait));
    OK(rkv_sched_check(e.s));
    expect(info_of(&e, wait), RKV_REQ_FINISHED, RKV_FINISH_ABORT, 0, 0, 0);
    /* abort the planned one between step and commit; commit skips it */
    OK(rkv_sched_abort(e.s, run));
    OK(rkv_sched_check(e.s));
    expect(info_of(&e, run), RKV_REQ_FINISHED, RKV_FINISH_ABORT, 0, 0, 0);
    commit1(&e, 9, 0);
    expect(info_of(&e, run), RKV_REQ_FINISHED, RKV_FINISH_ABORT, 0, 0, 0);
    expect(info_of(&e, wait), RKV_REQ_FINISHED, RKV_FINISH_ABORT, 0, 0, 0);
    step(&e, 0);
    assert_unknown(&e, 1);
    assert_unknown(&e, 2);

    /* a running request aborted after some decodes keeps its counts */
    OK(submit(&e, 4, p, 6, 5));
    run1(&e, 11, 0);
    run1(&e, 12, 0);
    OK(rkv_sched_abort(e.s, 4));
    OK(rkv_sched_check(e.s));
    /* request 1 (same prompt) was aborted before any commit, so nothing
     * of p was cached at admission */
    expect(info_of(&e, 4), RKV_REQ_FINISHED, RKV_FINISH_ABORT, 2, 0, 0);
    /* but request 4 computed 7 tokens (6 prompt + 1 decode) before its
     * abort, and abort caches full pages: 4 tokens. A request with the
     * same prompt is served them. */
    step(&e, 0);
    OK(submit(&e, 6, p, 6, 2));
    step(&e, 1);
    expect(info_of(&e, 6), RKV_REQ_RUNNING, RKV_FINISH_NONE, 0, 4, 4);
    commit1(&e, 13, 0);
    run1(&e, 14, 0);
    expect(info_of(&e, 6), RKV_REQ_FINISHED, RKV_FINISH_LENGTH, 2, 4, 0);
    eng_done(&e);
}

Test(sched_query, reused_id_reports_live_then_latest)
{
    eng e;
    static const int32_t p[5] = {1, 2, 3, 4, 5};
    open_one(&e, 32, 8, 5, p);
    run1(&e, 6, 0);
    expect(info_of(&e, 5), RKV_REQ_FINISHED, RKV_FINISH_LENGTH, 1, 0, 0);
    /* ended ids may be reused before the next step: the live one wins */
    OK(submit(&e, 5, p, 5, 3));
    OK(rkv_sched_check(e.s));
    rkv_request_info in = info_of(&e, 5);
    expect(in, RKV_REQ_WAITING, RKV_FINISH_NONE, 0, 0, 0);
    cr_assert_eq(in.max_new_tokens, 3);
    /* ended twice: the latest ending is reported */
    OK(rkv_sched_abort(e.s, 5));
    OK(rkv_sched_check(e.s));
    in = info_of(&e, 5);
    expect(in, RKV_REQ_FINISHED, RKV_FINISH_ABORT, 0, 0, 0);
    cr_assert_eq(in.max_new_tokens, 3);
    step(&e, 0);
    assert_unknown(&e, 5);
    eng_fini(&e);
}

/* The undersized pool of test_sched.c's preemption test, with EOS and an
 * abort: after every step + commit each id's info matches the shadow
 * model (live: state and generated count; ended in this commit: FINISHED
 * with the right reason; ended before: unknown), and the per-request
 * preemption counts add up to the scheduler's. */
Test(sched_query, busy_workload_matches_shadow)
{
    enum { N = 12 };
    for (int pol = 0; pol <= RKV_POLICY_BOUNDED; pol++) {
        rkv_sched_config c;
        rkv_sched_config_init(&c);
        c.policy = (rkv_policy)pol;
        c.max_running = 8;
        c.max_batch_tokens = 64;
        eng e;
        eng_init(&e, 26, 4, &c, N);
        e.seed = 1234;
        e.eos_mod = 23; /* some requests stop early */
        for (uint32_t i = 0; i < N; i++) {
            int32_t p[4];
            fill_tokens(p, 4, 100 + i);
            OK(eng_submit(&e, i, 0, p, 4, 60, (int32_t)(i % 3)));
        }
        int ended_at[N];
        uint32_t preempt_seen[N] = {0};
        int aborted = -1;
        for (uint32_t i = 0; i < N; i++)
            ended_at[i] = -1;
        uint64_t stop = 0, length = 0, steps = 0;
        while (e.live > 0) {
            cr_assert_lt(steps, 5000);
            int was_live[N];
            for (uint32_t i = 0; i < N; i++)
                was_live[i] = e.reqs[i].live;
            eng_step(&e);
            steps++;
            if (steps == 40) { /* abort whichever live request has the
                                  lowest id */
                for (uint32_t i = 0; i < N && aborted < 0; i++) {
                    if (e.reqs[i].live) {
                        eng_abort(&e, i);
                        aborted = (int)i;
                        was_live[i] = 0;
                        ended_at[i] = (int)steps;
                        expect(info_of(&e, i), RKV_REQ_FINISHED,
                               RKV_FINISH_ABORT, e.reqs[i].gen,
                               info_of(&e, i).cached_tokens, 0);
                    }
                }
            }
            uint64_t psum = 0;
            for (uint32_t i = 0; i < N; i++) {
                sh_req *s = &e.reqs[i];
                if (s->live) {
                    rkv_request_info in = info_of(&e, i);
                    cr_assert(in.state == RKV_REQ_WAITING ||
                              in.state == RKV_REQ_RUNNING);
                    cr_assert_eq(in.finish, RKV_FINISH_NONE);
                    cr_assert_eq(in.generated_tokens, s->gen);
                    cr_assert_leq(in.cached_tokens, s->len);
                    cr_assert_leq(in.kv_tokens, s->len - 1);
                    if (in.state == RKV_REQ_WAITING)
                        cr_assert_eq(in.kv_tokens, 0);
                    cr_assert_geq(in.preemptions, preempt_seen[i]);
                    preempt_seen[i] = in.preemptions;
                    psum += in.preemptions;
                } else if (was_live[i]) {
                    /* ended at this commit */
                    rkv_request_info in = info_of(&e, i);
                    int eos = (uint32_t)s->tok[s->len - 1] % e.eos_mod == 0;
                    expect(in, RKV_REQ_FINISHED,
                           eos ? RKV_FINISH_STOP : RKV_FINISH_LENGTH, s->gen,
                           in.cached_tokens, 0);
                    cr_assert(eos || s->gen == 60);
                    stop += eos;
                    length += !eos;
                    ended_at[i] = (int)steps;
                    preempt_seen[i] = in.preemptions;
                    psum += in.preemptions;
                } else if (ended_at[i] == (int)steps) {
                    psum += info_of(&e, i).preemptions; /* the abort */
                } else {
                    assert_unknown(&e, i);
                    psum += preempt_seen[i];
                }
            }
            rkv_sched_stats st;
            OK(rkv_sched_get_stats(e.s, &st));
            cr_assert_eq(psum, st.preemptions, "policy %s step %llu: "
                         "requests count %llu preemptions, scheduler %llu",
                         rkv_policy_name((rkv_policy)pol),
                         (unsigned long long)steps, (unsigned long long)psum,
                         (unsigned long long)st.preemptions);
        }
        rkv_sched_stats st;
        OK(rkv_sched_get_stats(e.s, &st));
        cr_assert_gt(st.preemptions, 0, "the pool was meant to preempt");
        cr_assert_gt(stop, 0, "eos_mod was meant to stop some early");
        cr_assert_gt(length, 0, "some were meant to reach max_new_tokens");
        cr_assert_geq(aborted, 0);
        eng_step(&e); /* empty: forgets the last ended requests */
        for (uint32_t i = 0; i < N; i++)
            assert_unknown(&e, i);
        eng_done(&e);
    }
}
