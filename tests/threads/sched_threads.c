/*
 * tests/threads/sched_threads.c -- separate objects on separate threads.
 *
 * radixkv.h promises "one thread per object": two threads that each own a
 * pool, a tree and a scheduler must not interfere. Any process-wide
 * mutable state in the library breaks that (the dfs order once kept its
 * qsort context in a static: two dfs schedulers crashed or read each
 * other's nodes). For every policy, and for a mix of all policies, two
 * threads run the same deterministic workload on their own objects, many
 * times over; each run's fingerprint (a hash of every plan and of the
 * final stats) must equal the fingerprint of the same workload run alone
 * on the main thread. The ThreadSanitizer build (RKV_TSAN) runs this test
 * to catch races that do not change a result.
 *
 * A plain program, not a Criterion test: Criterion's forked runner cannot
 * start under ThreadSanitizer (its arena mapping fails), and its asserts
 * are not for worker threads anyway. Exit status 0 = pass; ctest runs it
 * in every build.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"

#define NREQ 96u
#define GROUPS 12u
#define PAGE 4u
#define BLOCKS 160u
#define MAX_STEPS 20000u

typedef struct job {
    rkv_policy policy;
    uint32_t rounds;
    uint64_t fingerprint; /* of the last round                           */
    rkv_status st;        /* RKV_OK, or what failed                       */
    char msg[256];
} job;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 27);
}

static void fail(job *j, rkv_status st, const char *what)
{
    if (j->st != RKV_OK)
        return;
    j->st = st;
    snprintf(j->msg, sizeof j->msg, "%s (%s): %s: %s",
             rkv_policy_name(j->policy), what, rkv_strerror(st),
             rkv_last_error());
}

/* Request i: one of GROUPS shared prefixes (a nested family: groups share
 * shorter prefixes too, so the dfs order has a real tree to sort), then
 * its own tail. */
static uint32_t prompt_of(uint32_t i, int32_t *p)
{
    uint32_t g = i % GROUPS, n = 0;
    for (uint32_t k = 0; k < 8; k++)
        p[n++] = 1 + (int32_t)k;                    /* shared by all      */
    for (uint32_t k = 0; k < 8; k++)
        p[n++] = 100 + (int32_t)(g % 3) * 10 + (int32_t)k; /* by g % 3 */
    for (uint32_t k = 0; k < 4 + g; k++)
        p[n++] = 1000 + (int32_t)g * 50 + (int32_t)k; /* by group        */
    for (uint32_t k = 0; k < 1 + i % 5; k++)
        p[n++] = 20000 + (int32_t)i * 7 + (int32_t)k; /* own             */
    return n;
}

/* One run of the workload; returns its fingerprint, or 0 with j->st set. */
static uint64_t run_once(job *j)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = BLOCKS;
    pc.page_size = PAGE;
    rkv_pool *pool = NULL;
    rkv_tree *tree = NULL;
    rkv_sched *s = NULL;
    uint64_t h = 0;
    rkv_status st = rkv_pool_create(&pc, &pool);
    if (st != RKV_OK) {
        fail(j, st, "pool");
        return 0;
    }
    if ((st = rkv_tree_create(pool, NULL, &tree)) != RKV_OK) {
        fail(j, st, "tree");
        goto out;
    }
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    c.policy = j->policy;
    c.max_running = 5;
    c.max_batch_tokens = 48;
    c.dedup_min_tokens = 8;
    c.max_wait_ms = 30;
    if ((st = rkv_sched_create(tree, &c, &s)) != RKV_OK) {
        fail(j, st, "sched");
        goto out;
    }
    int32_t p[64];
    uint32_t submitted = 0;
    int32_t next[64];
    uint8_t fin[64];
    for (uint32_t step = 0; step < MAX_STEPS; step++) {
        /* requests keep arriving while others run, so the order is
         * rebuilt again and again */
        for (uint32_t k = 0; k < 3 && submitted < NREQ; k++, submitted++) {
            rkv_request_desc d;
            memset(&d, 0, sizeof d);
            d.id = submitted;
            d.prompt = p;
            d.prompt_len = prompt_of(submitted, p);
            d.max_new_tokens = 2 + submitted % 4;
            d.priority = (int32_t)(submitted % 3);
            d.arrival_ms = step;
            if ((st = rkv_sched_submit(s, &d)) != RKV_OK) {
                fail(j, st, "submit");
                goto out;
            }
        }
        const rkv_batch_plan *pl;
        if ((st = rkv_sched_step(s, step, &pl)) != RKV_OK) {
            fail(j, st, "step");
            goto out;
        }
        if (pl->num_reqs > 64) {
            fail(j, RKV_ERR_CORRUPT, "plan larger than max_running");
            goto out;
        }
        h = mix(h, pl->num_reqs);
        for (uint32_t r = 0; r < pl->num_reqs; r++) {
            h = mix(h, pl->req_ids[r]);
            h = mix(h, pl->qo_indptr[r + 1] - pl->qo_indptr[r]);
            h = mix(h, pl->prefix_len[r]);
            h = mix(h, pl->cached_len[r]);
            /* the sampled token depends only on the request and its
             * length, never on the schedule */
            next[r] = (int32_t)((pl->req_ids[r] * 31 + pl->prefix_len[r]) %
                                5000) + 1;
            fin[r] = 0;
        }
        if ((st = rkv_sched_check(s)) != RKV_OK) {
            fail(j, st, "check after step");
            goto out;
        }
        if (pl->num_reqs > 0 &&
            (st = rkv_sched_commit(s, next, fin, step)) != RKV_OK) {
            fail(j, st, "commit");
            goto out;
        }
        rkv_sched_stats ss;
        if ((st = rkv_sched_get_stats(s, &ss)) != RKV_OK) {
            fail(j, st, "stats");
            goto out;
        }
        if (submitted == NREQ && ss.waiting == 0 && ss.running == 0) {
            if (ss.finished != NREQ) {
                fail(j, RKV_ERR_CORRUPT, "not every request finished");
                goto out;
            }
            h = mix(h, ss.steps);
            h = mix(h, ss.cached_tokens);
            h = mix(h, ss.computed_tokens);
            h = mix(h, ss.preemptions);
            h = mix(h, ss.dedup_holds);
            if ((st = rkv_sched_check(s)) != RKV_OK)
                fail(j, st, "final check");
            goto out;
        }
    }
    fail(j, RKV_ERR_CORRUPT, "no progress");
out:
    rkv_sched_destroy(s);
    rkv_tree_destroy(tree);
    if (pool != NULL && rkv_pool_num_free(pool) != BLOCKS)
        fail(j, RKV_ERR_CORRUPT, "blocks left allocated after destroy");
    rkv_pool_destroy(pool);
    return j->st == RKV_OK ? (h | 1) : 0;
}

static void *worker(void *arg)
{
    job *j = arg;
    for (uint32_t r = 0; r < j->rounds && j->st == RKV_OK; r++) {
        uint64_t f = run_once(j);
        if (r > 0 && f != j->fingerprint && j->st == RKV_OK)
            fail(j, RKV_ERR_CORRUPT, "fingerprint changed between rounds");
        j->fingerprint = f;
    }
    return NULL;
}

/* Runs policies a and b on two threads at once, each against the
 * fingerprint of its policy run alone; returns the number of failures. */
static int two_threads(rkv_policy a, rkv_policy b, uint32_t rounds)
{
    job alone[2] = {{.policy = a, .rounds = 1}, {.policy = b, .rounds = 1}};
    for (int i = 0; i < 2; i++) {
        worker(&alone[i]);
        if (alone[i].st != RKV_OK) {
            fprintf(stderr, "FAIL alone: %s\n", alone[i].msg);
            return 1;
        }
    }
    job jobs[2] = {{.policy = a, .rounds = rounds},
                   {.policy = b, .rounds = rounds}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&t[i], NULL, worker, &jobs[i]) != 0) {
            fprintf(stderr, "FAIL: pthread_create\n");
            exit(1);
        }
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    int failed = 0;
    for (int i = 0; i < 2; i++) {
        if (jobs[i].st != RKV_OK) {
            fprintf(stderr, "FAIL thread %d: %s\n", i, jobs[i].msg);
            failed++;
        } else if (jobs[i].fingerprint != alone[i].fingerprint) {
            fprintf(stderr, "FAIL thread %d (%s): a different schedule than "
                    "alone\n", i, rkv_policy_name(jobs[i].policy));
            failed++;
        }
    }
    printf("%s %s + %s: %u rounds on two threads\n", failed ? "FAIL" : "ok",
           rkv_policy_name(a), rkv_policy_name(b), rounds);
    return failed;
}

/* argv[1] (optional): rounds per thread, default 150. */
int main(int argc, char **argv)
{
    uint32_t rounds = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 150;
    if (rounds == 0)
        rounds = 1;
    int failed = 0;
    /* each policy against itself, then every pair of different ones */
    for (int p = 0; p <= RKV_POLICY_BOUNDED; p++)
        failed += two_threads((rkv_policy)p, (rkv_policy)p, rounds);
    for (int a = 0; a <= RKV_POLICY_BOUNDED; a++)
        for (int b = a + 1; b <= RKV_POLICY_BOUNDED; b++)
            failed += two_threads((rkv_policy)a, (rkv_policy)b,
                                  rounds / 8 ? rounds / 8 : 1);
    return failed != 0;
}
