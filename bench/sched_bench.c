/*
 * bench/sched_bench.c -- cost of one rkv_sched_step with 100 / 1,000 /
 * 10,000 waiting requests, for every policy.
 *
 * Workload: 8 system prompts of 256 tokens x 4 sub-prompts of 256 tokens
 * (32 groups of 512 shared tokens, all cached by a warm-up), each request =
 * one group's 512 tokens + 64 unique tokens (page size 16), so every match
 * is non-trivial and the tree has two levels of sharing. Metadata-only
 * pool of 65,536 blocks (no eviction), max_running 32, max_batch_tokens
 * 8192. A fake engine samples tokens and commits; only rkv_sched_step is
 * timed.
 *
 * Columns (microseconds per step):
 *   first      the first step after the N requests were submitted (every
 *              request matched for the first time);
 *   unchanged  steps where the tree did not change since the last one (all
 *              running requests decode, nothing is admitted or inserted):
 *              the cached matches need no work;
 *   steady     steady state: requests finish (4 output tokens) and are
 *              replaced, so admissions and inserts change the tree every
 *              step; the waiting queue stays at N;
 *   naive      what re-matching every waiting request from the root (PEEK)
 *              and sorting costs per step -- SGLang's lpm, which it avoids
 *              above 128 waiting requests; steady/naive is printed.
 * Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so other
 * processes on a shared machine do not inflate them. Figures vary with the
 * machine; nothing here passes or fails on time.
 *
 * Usage: sched_bench [--policy NAME] [--waiting N]... (default: every
 * policy at 1,000 / 10,000 / 50,000 waiting requests; --waiting may be
 * given up to 8 times).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "radixkv.h"

#define P 16u
#define GROUP_TOKENS 512u
#define SUFFIX 64u
#define PROMPT (GROUP_TOKENS + SUFFIX)

static uint64_t now_ns(void)
{
    struct timespec ts;
    /* this thread's CPU time: on a shared machine, wall time also counts
     * the other processes' turns */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void die(rkv_status st, const char *what)
{
    fprintf(stderr, "sched_bench: %s: %s (%s)\n", what, rkv_strerror(st),
            rkv_last_error());
    exit(1);
}
#define TRY(x)                                                                 \
    do {                                                                       \
        rkv_status st_ = (x);                                                  \
        if (st_ != RKV_OK)                                                     \
            die(st_, #x);                                                      \
    } while (0)

static void make_prompt(int32_t *t, uint64_t id)
{
    uint32_t group = (uint32_t)(mix(id, 1) % 32);
    uint32_t sys = group / 4;
    for (uint32_t i = 0; i < 256; i++)
        t[i] = (int32_t)(mix(1000 + sys, i) % 30000) + 1;
    for (uint32_t i = 0; i < 256; i++)
        t[256 + i] = (int32_t)(mix(2000 + group, i) % 30000) + 1;
    for (uint32_t i = 0; i < SUFFIX; i++)
        t[GROUP_TOKENS + i] = (int32_t)(mix(id * 7919 + 3, i) % 30000) + 1;
}

typedef struct bench {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *s;
    uint64_t next_id;
    int32_t *next;
    uint32_t max_new;
} bench;

static void submit(bench *b, uint64_t id, uint32_t max_new, double now)
{
    int32_t t[PROMPT];
    make_prompt(t, id);
    rkv_request_desc d;
    memset(&d, 0, sizeof d);
    d.id = id;
    d.prompt = t;
    d.prompt_len = PROMPT;
    d.max_new_tokens = max_new;
    d.priority = (int32_t)(mix(id, 9) % 3);
    d.arrival_ms = now;
    TRY(rkv_sched_submit(b->s, &d));
}

/* One step (timed) + commit; returns the step's ns and requests finished. */
static uint64_t step(bench *b, double now, uint32_t *num_reqs,
                     uint32_t *finished)
{
    const rkv_batch_plan *p;
    uint64_t t0 = now_ns();
    TRY(rkv_sched_step(b->s, now, &p));
    uint64_t dt = now_ns() - t0;
    *num_reqs = p->num_reqs;
    *finished = 0;
    if (p->num_reqs == 0)
        return dt;
    for (uint32_t r = 0; r < p->num_reqs; r++)
        b->next[r] = (int32_t)(mix(p->req_ids[r], p->prefix_len[r]) % 30000) + 1;
    rkv_sched_stats before, after;
    TRY(rkv_sched_get_stats(b->s, &before));
    TRY(rkv_sched_commit(b->s, b->next, NULL, now));
    TRY(rkv_sched_get_stats(b->s, &after));
    *finished = (uint32_t)(after.finished - before.finished);
    return dt;
}

static void setup(bench *b, rkv_policy pol)
{
    memset(b, 0, sizeof *b);
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 1u << 16;
    pc.page_size = P;
    TRY(rkv_pool_create(&pc, &b->pool));
    TRY(rkv_tree_create(b->pool, NULL, &b->tree));
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    c.policy = pol;
    c.max_running = 32;
    c.max_batch_tokens = 8192;
    TRY(rkv_sched_create(b->tree, &c, &b->s));
    b->next = calloc(64, sizeof *b->next);
    if (b->next == NULL)
        die(RKV_ERR_NOMEM, "calloc");
    /* warm-up: cache the 32 groups */
    for (uint32_t g = 0; g < 32; g++) {
        uint64_t id = 0;
        while ((uint32_t)(mix(id, 1) % 32) != g)
            id++;
        int32_t t[PROMPT];
        make_prompt(t, id);
        rkv_match m;
        TRY(rkv_tree_match(b->tree, 0, t, PROMPT, NULL, RKV_MATCH_PEEK, &m));
        if (m.matched_tokens >= GROUP_TOKENS)
            continue;
        rkv_request_desc d;
        memset(&d, 0, sizeof d);
        d.id = UINT64_MAX - g;
        d.prompt = t;
        d.prompt_len = GROUP_TOKENS + 1;
        d.max_new_tokens = 1;
        TRY(rkv_sched_submit(b->s, &d));
        uint32_t n, f;
        do
            step(b, 0, &n, &f);
        while (n > 0);
    }
    b->next_id = 1000000;
}

static void teardown(bench *b)
{
    rkv_sched_destroy(b->s);
    rkv_tree_destroy(b->tree);
    rkv_pool_destroy(b->pool);
    free(b->next);
}

static int cmp_len(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? 1 : (x > y ? -1 : 0);
}

/* Re-match every one of n prompts from the root and sort: the naive lpm. */
static double naive_us(bench *b, uint32_t n)
{
    int32_t t[PROMPT];
    size_t *len = malloc(n * sizeof *len);
    if (len == NULL)
        die(RKV_ERR_NOMEM, "malloc");
    uint64_t t0 = now_ns(), gen_ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t g0 = now_ns();
        make_prompt(t, 5000000 + i);
        gen_ns += now_ns() - g0;
        rkv_match m;
        TRY(rkv_tree_match(b->tree, 0, t, PROMPT - 1, NULL, RKV_MATCH_PEEK, &m));
        len[i] = m.matched_tokens;
    }
    qsort(len, n, sizeof *len, cmp_len);
    uint64_t total = now_ns() - t0 - gen_ns;
    free(len);
    return (double)total / 1e3;
}

int main(int argc, char **argv)
{
    uint32_t sizes[8] = {1000, 10000, 50000};
    int nsizes = 3, given = 0, only = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
            rkv_policy p;
            if (rkv_policy_from_name(argv[++i], &p) != RKV_OK) {
                fprintf(stderr, "sched_bench: unknown policy %s\n", argv[i]);
                return 2;
            }
            only = (int)p;
        } else if (strcmp(argv[i], "--waiting") == 0 && i + 1 < argc &&
                   given < 8) {
            char *end;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end != '\0' || v < 1 || v > 1000000) {
                fprintf(stderr, "sched_bench: --waiting takes 1..1000000\n");
                return 2;
            }
            sizes[given++] = (uint32_t)v;
            nsizes = given;
        } else {
            fprintf(stderr, "usage: sched_bench [--policy NAME] [--waiting N]...\n");
            return 2;
        }
    }
    printf("rkv_sched_step cost (us/step); page %u, prompts %u tokens "
           "(%u shared in 32 groups), max_running 32\n\n", P, PROMPT,
           GROUP_TOKENS);
    printf("%-9s %7s %10s %10s %10s %10s %13s %9s\n", "policy", "waiting",
           "first", "unchanged", "steady", "naive", "steady/naive", "hit");
    for (int pol = 0; pol <= RKV_POLICY_BOUNDED; pol++) {
        if (only >= 0 && pol != only)
            continue;
        for (int si = 0; si < nsizes; si++) {
            uint32_t N = sizes[si];
            bench b;
            setup(&b, (rkv_policy)pol);
            double now = 1.0;
            /* unchanged: 32 long decoders fill the running set */
            for (uint32_t i = 0; i < 32; i++)
                submit(&b, b.next_id++, 4000, now);
            uint32_t n, f;
            step(&b, now, &n, &f);
            /* then N waiting requests that cannot be admitted yet */
            for (uint32_t i = 0; i < N; i++)
                submit(&b, b.next_id++, 4, now);
            now += 1;
            uint64_t first = step(&b, now, &n, &f);
            uint64_t unchanged = 0;
            const int U = 20;
            for (int k = 0; k < U; k++) {
                now += 1;
                unchanged += step(&b, now, &n, &f);
            }
            /* steady: abort the decoders, let short requests flow */
            for (uint64_t id = 1000000; id < 1000032; id++)
                (void)rkv_sched_abort(b.s, id);
            uint64_t steady = 0;
            const int S = 100;
            for (int k = 0; k < 5 + S; k++) {
                now += 1;
                uint64_t dt = step(&b, now, &n, &f);
                if (k >= 5)
                    steady += dt;
                for (uint32_t i = 0; i < f; i++)
                    submit(&b, b.next_id++, 4, now);
            }
            rkv_sched_stats st;
            TRY(rkv_sched_get_stats(b.s, &st));
            double naive = naive_us(&b, N);
            double steady_us = (double)steady / S / 1e3;
            printf("%-9s %7u %10.1f %10.2f %10.1f %10.1f %13.3f %8.1f%%\n",
                   rkv_policy_name((rkv_policy)pol), N, (double)first / 1e3,
                   (double)unchanged / U / 1e3, steady_us, naive,
                   steady_us / naive,
                   st.prompt_tokens ? 100.0 * (double)st.cached_tokens /
                                          (double)st.prompt_tokens
                                    : 0.0);
            TRY(rkv_sched_check(b.s));
            teardown(&b);
        }
    }
    return 0;
}
