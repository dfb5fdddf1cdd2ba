/*
 * tests/test_sched_engine.h -- a fake engine that drives rkv_sched the way a
 * server does (step, run the plan, sample tokens, commit) and checks every
 * plan against a shadow model of each request:
 *   - budgets (tokens, running requests), CSR shapes, decode rows of 1;
 *   - input_tokens equal the request's tokens at their positions;
 *   - exact KV: the fake KV store holds, at each written slot, a hash of the
 *     request's whole prefix up to that position (namespace included); every
 *     position a request attends to (prefix_len tokens) must hold its own
 *     prefix hash. This catches any wrong block sharing, reuse or table;
 *   - a written block has pool ref count 1 (nobody else can read it) and
 *     no slot is written twice in a step;
 *   - rkv_sched_check after every step and commit;
 *   - the admission counters: a request that enters a plan newly admitted
 *     (first time, or again after a preemption) adds its plan cached_len
 *     and its length to the engine's own sums, which must equal the
 *     scheduler's cached_tokens and prompt_tokens (eng_assert_no_leak),
 *     so an admission undone and redone is counted once.
 * Sampled tokens depend only on (seed, id, length), never on scheduling.
 */
#ifndef RKV_TEST_SCHED_ENGINE_H
#define RKV_TEST_SCHED_ENGINE_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

typedef struct sh_req {
    int used, live;
    uint64_t ns;
    int32_t *tok;
    uint64_t *ph;
    uint32_t len, cap, prompt_len, max_new, gen;
    double arrival;
    double first_plan_ms; /* -1 until first planned */
    uint32_t first_cached;
    uint64_t computed;    /* prefill rows run for it */
    int admitted;         /* planned since its submit ...                */
    uint32_t adm_preempt; /* ... with this many preemptions then         */
} sh_req;

typedef struct eng {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *s;
    uint32_t P, nblocks;
    rkv_sched_config cfg;
    sh_req *reqs;
    uint32_t nreqs;
    uint64_t *kv;
    uint32_t *wstamp;
    uint32_t stamp;
    uint64_t seed;
    uint32_t eos_mod;
    double now, dt;
    uint64_t steps, live;
    int tolerate_nomem;   /* OOM tests: a step or commit may fail once */
    uint64_t nomem_seen;
    int32_t *next;
    uint8_t *fin;
    const rkv_retention *retention; /* given to the next submits (NULL)   */
    uint64_t adm_cached, adm_prompt; /* sums over the admissions planned  */
    uint64_t adm_steps;   /* steps whose plan went through eng_verify_plan */
} eng;

static inline uint64_t eng_mix(uint64_t a, uint64_t b)
{
    uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n deterministic tokens in 1..30000 derived from key. */
static inline void fill_tokens(int32_t *t, uint32_t n, uint64_t key)
{
    for (uint32_t i = 0; i < n; i++)
        t[i] = (int32_t)(eng_mix(key, i) % 30000) + 1;
}

/* A metadata-only pool of nblocks pages of P tokens and a default tree. */
static inline void eng_pool_tree(uint32_t nblocks, uint32_t P, rkv_pool **pool,
                                 rkv_tree **tree)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = nblocks;
    pc.page_size = P;
    OK(rkv_pool_create(&pc, pool));
    OK(rkv_tree_create(*pool, NULL, tree));
}

static inline void eng_init(eng *e, uint32_t nblocks, uint32_t P,
                            const rkv_sched_config *cfg, uint32_t max_ids)
{
    memset(e, 0, sizeof *e);
    eng_pool_tree(nblocks, P, &e->pool, &e->tree);
    OK(rkv_sched_create(e->tree, cfg, &e->s));
    e->cfg = *cfg;
    e->P = P;
    e->nblocks = nblocks;
    e->reqs = calloc(max_ids, sizeof *e->reqs);
    e->nreqs = max_ids;
    e->kv = calloc((size_t)nblocks * P, sizeof *e->kv);
    e->wstamp = calloc((size_t)nblocks * P, sizeof *e->wstamp);
    /* a plan holds at most every live request (max_running may be huge) */
    e->next = calloc(max_ids + 1, sizeof *e->next);
    e->fin = calloc(max_ids + 1, 1);
    e->dt = 1.0;
    cr_assert(e->reqs && e->kv && e->wstamp && e->next && e->fin);
}

/* eng_init, then the sampler seeded with seed. */
static inline void eng_init_seeded(eng *e, uint32_t nblocks, uint32_t P,
                                   const rkv_sched_config *cfg, uint32_t max_ids,
                                   uint64_t seed)
{
    eng_init(e, nblocks, P, cfg, max_ids);
    e->seed = seed;
}

static inline void eng_fini(eng *e)
{
    rkv_sched_destroy(e->s);
    rkv_tree_destroy(e->tree);
    rkv_pool_destroy(e->pool);
    for (uint32_t i = 0; i < e->nreqs; i++) {
        free(e->reqs[i].tok);
        free(e->reqs[i].ph);
    }
    free(e->reqs);
    free(e->kv);
    free(e->wstamp);
    free(e->next);
    free(e->fin);
}

static inline void sh_extend(sh_req *r, int32_t t)
{
    r->tok[r->len] = t;
    r->ph[r->len] = eng_mix(r->len ? r->ph[r->len - 1] : eng_mix(r->ns, 77), (uint64_t)t);
    r->len++;
}

/* Submits request id; returns the scheduler's status (shadow only on OK). */
static inline rkv_status eng_submit(eng *e, uint64_t id, uint64_t ns,
                                    const int32_t *prompt, uint32_t len,
                                    uint32_t max_new, int32_t prio)
{
    cr_assert_lt(id, e->nreqs);
    rkv_request_desc d = tu_request(id, prompt, len, max_new);
    d.ns = ns;
    d.priority = prio;
    d.arrival_ms = e->now;
    d.retention = e->retention;
    rkv_status st = rkv_sched_submit(e->s, &d);
    if (st != RKV_OK)
        return st;
    sh_req *r = &e->reqs[id];
    cr_assert(!r->live, "id %llu reused while live", (unsigned long long)id);
    free(r->tok);
    free(r->ph);
    memset(r, 0, sizeof *r);
    r->used = r->live = 1;
    r->ns = ns;
    r->cap = len + max_new;
    r->tok = malloc(r->cap * sizeof *r->tok);
    r->ph = malloc(r->cap * sizeof *r->ph);
    cr_assert(r->tok && r->ph);
    for (uint32_t i = 0; i < len; i++)
        sh_extend(r, prompt[i]);
    r->prompt_len = len;
    r->max_new = max_new;
    r->arrival = e->now;
    r->first_plan_ms = -1;
    e->live++;
    return RKV_OK;
}

static inline void eng_abort(eng *e, uint64_t id)
{
    OK(rkv_sched_abort(e->s, id));
    e->reqs[id].live = 0;
    e->live--;
    OK(rkv_sched_check(e->s));
}

static inline int32_t eng_token(const eng *e, uint64_t id, uint32_t len)
{
    return (int32_t)(eng_mix(e->seed ^ (id * 0x100000001b3ull), len) % 5000) + 1;
}

/* Verifies a plan against the shadow requests and runs it on the fake KV. */
static inline void eng_verify_plan(eng *e, const rkv_batch_plan *p)
{
    const uint32_t P = e->P;
    cr_assert_leq(p->num_reqs, e->cfg.max_running);
    cr_assert_leq(p->num_tokens, e->cfg.max_batch_tokens);
    cr_assert_leq(p->num_prefill, p->num_reqs);
    cr_assert_eq(p->qo_indptr[0], 0);
    cr_assert_eq(p->kv_indptr[0], 0);
    cr_assert_eq(p->qo_indptr[p->num_reqs], p->num_tokens);
    e->stamp++;
    for (uint32_t r = 0; r < p->num_reqs; r++) {
        uint64_t id = p->req_ids[r];
        cr_assert_lt(id, e->nreqs);
        sh_req *s = &e->reqs[id];
        cr_assert(s->live, "plan names request %llu which is not live",
                  (unsigned long long)id);
        for (uint32_t k = 0; k < r; k++)
            cr_assert_neq(p->req_ids[k], id, "request twice in a plan");
        uint32_t q = p->qo_indptr[r + 1] - p->qo_indptr[r];
        cr_assert_geq(q, 1);
        if (r >= p->num_prefill)
            cr_assert_eq(q, 1, "decode row of %u tokens", q);
        uint32_t pre = p->prefix_len[r], total = pre + q;
        cr_assert_leq(total, s->len, "request %llu runs %u tokens of %u",
                      (unsigned long long)id, total, s->len);
        cr_assert_eq(p->emits_token[r] != 0, total == s->len);
        cr_assert_leq(p->cached_len[r], pre);
        uint32_t nb = p->kv_indptr[r + 1] - p->kv_indptr[r];
        cr_assert_eq(nb, (total + P - 1) / P);
        cr_assert_eq(p->kv_last_page_len[r], total - (nb - 1) * P);
        const uint32_t *bt = p->kv_indices + p->kv_indptr[r];
        for (uint32_t i = 0; i < nb; i++)
            cr_assert_lt(bt[i], e->nblocks);
        for (uint32_t pos = 0; pos < pre; pos++) {
            uint32_t slot = bt[pos / P] * P + pos % P;
            cr_assert_eq(e->kv[slot], s->ph[pos],
                         "request %llu position %u: wrong KV in slot %u",
                         (unsigned long long)id, pos, slot);
        }
        for (uint32_t j = 0; j < q; j++) {
            uint32_t row = p->qo_indptr[r] + j, pos = pre + j;
            uint32_t slot = bt[pos / P] * P + pos % P;
            cr_assert_eq(p->slots[row], slot, "slot of row %u", row);
            cr_assert_eq(p->input_tokens[row], s->tok[pos]);
            cr_assert_neq(e->wstamp[slot], e->stamp, "slot %u written twice",
                          slot);
            e->wstamp[slot] = e->stamp;
            cr_assert_eq(rkv_pool_refcount(e->pool, bt[pos / P]), 1,
                         "written block %u is shared", bt[pos / P]);
        }
        if (r < p->num_prefill)
            s->computed += q;
        /* an admission: planned for the first time, or again after a
         * preemption (its KV then starts at what the cache served) */
        rkv_request_info info;
        OK(rkv_sched_request_info(e->s, id, &info));
        if (!s->admitted || info.preemptions != s->adm_preempt) {
            cr_assert_eq(pre, p->cached_len[r], "request %llu admitted with %u "
                         "tokens of KV, %u of them cached", (unsigned long long)id,
                         pre, p->cached_len[r]);
            s->admitted = 1;
            s->adm_preempt = info.preemptions;
            e->adm_cached += p->cached_len[r];
            e->adm_prompt += s->len;
        }
        if (s->first_plan_ms < 0) {
            s->first_plan_ms = e->now;
            s->first_cached = p->cached_len[r];
        }
    }
    /* run it */
    for (uint32_t r = 0; r < p->num_reqs; r++) {
        sh_req *s = &e->reqs[p->req_ids[r]];
        const uint32_t *bt = p->kv_indices + p->kv_indptr[r];
        for (uint32_t pos = p->prefix_len[r];
             pos < p->prefix_len[r] + p->qo_indptr[r + 1] - p->qo_indptr[r];
             pos++) {
            uint32_t slot = bt[pos / P] * P + pos % P;
            e->kv[slot] = s->ph[pos];
        }
    }
}

/* rkv_sched_step / rkv_sched_commit as every scheduler test calls them:
 * with tolerate_nomem an injected NOMEM is retried once (counted in
 * *nomem_seen) after checking the failed call left the scheduler
 * consistent; the scheduler is checked after the call that succeeds. */
static inline const rkv_batch_plan *eng_sched_step(rkv_sched *s, double now,
                                                   int tolerate_nomem,
                                                   uint64_t *nomem_seen)
{
    const rkv_batch_plan *p = NULL;
    rkv_status st = rkv_sched_step(s, now, &p);
    if (st == RKV_ERR_NOMEM && tolerate_nomem) {
        /* nothing may have changed: the retry must plan from scratch */
        OK(rkv_sched_check(s));
        (*nomem_seen)++;
        st = rkv_sched_step(s, now, &p);
    }
    cr_assert_eq(st, RKV_OK, "rkv_sched_step: %s", rkv_last_error());
    OK(rkv_sched_check(s));
    return p;
}

static inline void eng_sched_commit(rkv_sched *s, const int32_t *next,
                                    const uint8_t *fin, double now,
                                    int tolerate_nomem, uint64_t *nomem_seen)
{
    rkv_status st = rkv_sched_commit(s, next, fin, now);
    if (st == RKV_ERR_NOMEM && tolerate_nomem) {
        OK(rkv_sched_check(s));
        (*nomem_seen)++;
        st = rkv_sched_commit(s, next, fin, now);
    }
    cr_assert_eq(st, RKV_OK, "rkv_sched_commit: %s", rkv_last_error());
    OK(rkv_sched_check(s));
}

/* One step + commit. Returns the plan's request count. */
static inline uint32_t eng_step(eng *e)
{
    const rkv_batch_plan *p = eng_sched_step(e->s, e->now, e->tolerate_nomem,
                                             &e->nomem_seen);
    e->steps++;
    uint32_t n = p->num_reqs;
    e->adm_steps++;
    if (n == 0) {
        e->now += e->dt;
        return 0;
    }
    eng_verify_plan(e, p);
    uint64_t ids[1024];
    cr_assert_leq(n, 1024);
    for (uint32_t r = 0; r < n; r++) {
        ids[r] = p->req_ids[r];
        e->next[r] = 0;
        e->fin[r] = 0;
        if (!p->emits_token[r])
            continue;
        sh_req *s = &e->reqs[ids[r]];
        e->next[r] = eng_token(e, ids[r], s->len);
        e->fin[r] = e->eos_mod && (uint32_t)e->next[r] % e->eos_mod == 0;
    }
    uint8_t emits[1024];
    memcpy(emits, p->emits_token, n);
    e->now += e->dt;
    eng_sched_commit(e->s, e->next, e->fin, e->now, e->tolerate_nomem,
                     &e->nomem_seen);
    for (uint32_t r = 0; r < n; r++) {
        if (!emits[r])
            continue;
        sh_req *s = &e->reqs[ids[r]];
        sh_extend(s, e->next[r]);
        s->gen++;
        if (e->fin[r] || s->gen >= s->max_new) {
            s->live = 0;
            e->live--;
        }
    }
    return n;
}

/* Steps until nothing is live; fails on an empty plan with live requests
 * (a deadlock) or after max_steps. */
static inline void eng_drain(eng *e, uint64_t max_steps)
{
    uint64_t k = 0;
    while (e->live > 0) {
        cr_assert_lt(k++, max_steps, "no progress after %llu steps",
                     (unsigned long long)max_steps);
        uint32_t n = eng_step(e);
        cr_assert_gt(n, 0, "empty plan with %llu live requests (deadlock)",
                     (unsigned long long)e->live);
    }
}

/* Everything returned: no request holds a block, the tree resets (no lock
 * left), and the pool is whole again. */
static inline void eng_assert_no_leak(eng *e)
{
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e->s, &st));
    cr_assert_eq(st.waiting + st.running, 0);
    /* every step planned through eng_step: the scheduler's admission
     * counters are the sums of what its plans showed */
    if (st.steps == e->adm_steps) {
        cr_assert_eq(st.cached_tokens, e->adm_cached, "cached_tokens %llu, the "
                     "plans' admissions cached %llu", (unsigned long long)st.cached_tokens,
                     (unsigned long long)e->adm_cached);
        cr_assert_eq(st.prompt_tokens, e->adm_prompt, "prompt_tokens %llu, the "
                     "plans' admissions had %llu", (unsigned long long)st.prompt_tokens,
                     (unsigned long long)e->adm_prompt);
    }
    OK(rkv_tree_reset(e->tree));
    OK(rkv_pool_check(e->pool));
    cr_assert_eq(rkv_pool_num_free(e->pool), e->nblocks,
                 "%u of %u blocks free after reset",
                 rkv_pool_num_free(e->pool), e->nblocks);
}

/* A test's end: nothing leaked, then the engine is freed. */
static inline void eng_done(eng *e)
{
    eng_assert_no_leak(e);
    eng_fini(e);
}

#endif
