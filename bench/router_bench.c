/*
 * bench/router_bench.c -- throughput of the fleet router index (router/,
 * include/radixkv_router.h) on one core, on the Mooncake conversation
 * trace, against a plain hash-map baseline doing the same work.
 *
 * Setup (not timed): the trace (sim/workload.c's loader; the copy in
 * bench/traces/, or --trace FILE, or the one embedded in the binary) is
 * replayed through N simulated instances (default 8), each a metadata-only
 * pool + tree with KV events on; request i goes to instance i % N (round
 * robin: the instances' caches diverge as in a real fleet), which matches,
 * allocates with eviction, inserts and drains its events. The bench keeps
 * request i's chained page hashes (ns 0, page size P, default 16) and the
 * event batch its instance produced.
 *
 * Timed, request by request in trace order: the query, then applying the
 * request's event batch (rkv_router_apply). The query is timed two ways,
 * in two passes of their own: rkv_router_route_top with room for K
 * candidates (--candidates, default 64: the router daemon's call, the
 * pick and the instances a reply lists; 1 is rkv_router_route) and rkv_router_overlaps + rkv_router_choose (a record per
 * instance, then the pick: the daemon's call before route_top); the
 * overlaps the check below needs are taken after the timed interval in
 * the first. Each query is timed alone
 * (clock_gettime(CLOCK_MONOTONIC), ~20-30 ns of it is the clock);
 * event application is summed. The baseline is the obvious design: one
 * hash set of block hashes per instance (open addressing, same multiply-
 * shift hash); a query probes each instance's set page by page until a
 * miss, events insert/erase in one set. Both produce every instance's
 * overlap for every request; the bench checks they are equal (exit 1
 * otherwise), so the two do the same work. Each pass runs `--reps` times
 * (default 3); the fastest is reported. Figures are printed, never
 * asserted.
 *
 * Per core: on a shared machine the wall clock also counts the time the
 * bench waits for a core, which inflates means (a preempted query costs a
 * time slice) and rates. The bench also sums the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) over all queries and over all event batches
 * and prints the mean query and the event rate per second of CPU ("cpu"
 * columns, p50/p99/mean per query); each query's CPU reading includes
 * its two wall-clock reads and one CPU-clock read (the "clock" line prints
 * what an empty interval costs; it is not subtracted).
 *
 * Memory: the router's host_bytes (rkv_router_get_stats) and the sets'
 * slots, both as sized up front, per (hash, instance) pair held at the
 * end. Up to RKV_ROUTER_MAX_INSTANCES instances; past 64 the router walks
 * one slot group of 64 after another.
 *
 * Usage: router_bench [--trace FILE] [--instances N] [--page-size P]
 *                     [--capacity-tokens T (per instance, default 1000000)]
 *                     [--limit R] [--reps K] [--candidates K]
 *                     [--no-baseline] [--table-bytes B (the router's
 *                     max_table_bytes: past a power of two's size the
 *                     table is sized exactly, load <= 17/32)]
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "radixkv.h"
#include "radixkv_router.h"


static volatile uint32_t g_sink;

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, rkv_status st)
{
    fprintf(stderr, "router_bench: %s: %s (%s)\n", what, rkv_strerror(st),
            rkv_last_error());
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        die("memory", RKV_ERR_NOMEM);
    return p;
}

/* ---- the recorded workload --------------------------------------------------- */

typedef struct req {
    uint32_t inst;
    uint32_t pages;
    uint64_t hash_begin;  /* into hashes[]                          */
    uint64_t ev_begin;    /* into events[]                          */
    uint32_t num_events;
} req;

typedef struct recorded {
    req *r;
    size_t n;
    uint64_t *hashes;
    size_t nh, hcap;
    rkv_event *events;
    size_t ne, ecap;
    uint64_t event_hashes; /* hashes carried by all events          */
} recorded;

static void record(const rkv_workload *wl, uint32_t N, uint32_t P,
                   uint64_t capacity, recorded *rec)
{
    memset(rec, 0, sizeof *rec);
    rkv_pool **pools = xmalloc(N * sizeof *pools);
    rkv_tree **trees = xmalloc(N * sizeof *trees);
    for (uint32_t i = 0; i < N; i++) {
        rkv_pool_config pc;
        rkv_pool_config_init(&pc);
        pc.page_size = P;
        pc.num_blocks = (uint32_t)(capacity / P);
        rkv_status st = rkv_pool_create(&pc, &pools[i]);
        if (st != RKV_OK)
            die("pool_create", st);
        rkv_tree_config tc;
        rkv_tree_config_init(&tc);
        tc.event_ring = 1u << 16;
        if ((st = rkv_tree_create(pools[i], &tc, &trees[i])) != RKV_OK)
            die("tree_create", st);
    }
    uint32_t maxlen = rkv_workload_max_input(wl);
    int32_t *tok = xmalloc((size_t)maxlen * sizeof *tok);
    rkv_block_id *blocks = xmalloc(((size_t)maxlen / P + 1) * sizeof *blocks);
    rec->r = xmalloc(wl->num_reqs * sizeof *rec->r);
    for (size_t i = 0; i < wl->num_reqs; i++) {
        req *q = &rec->r[rec->n++];
        uint32_t n = wl->reqs[i].input_length, pages = n / P;
        rkv_status st = rkv_workload_prompt(wl, i, tok);
        if (st != RKV_OK)
            die("prompt", st);
        q->inst = (uint32_t)(i % N);
        q->pages = pages;
        if (rec->nh + pages > rec->hcap) {
            rec->hcap = (rec->nh + pages) * 2;
            rec->hashes = realloc(rec->hashes, rec->hcap * sizeof *rec->hashes);
            if (rec->hashes == NULL)
                die("memory", RKV_ERR_NOMEM);
        }
        q->hash_begin = rec->nh;
        uint64_t h = RKV_HASH_ROOT;
        for (uint32_t p = 0; p < pages; p++)
            rec->hashes[rec->nh++] = h = rkv_block_hash(h, 0, tok + (size_t)p * P, P);
        /* the request on its instance, as a server runs it */
        rkv_tree *t = trees[q->inst];
        rkv_match m;
        if ((st = rkv_tree_match(t, 0, tok, n, blocks, 0, &m)) != RKV_OK)
            die("match", st);
        rkv_lease lease;
        if ((st = rkv_tree_lock(t, m.node, &lease)) != RKV_OK)
            die("lock", st);
        uint32_t fresh = pages - m.num_blocks;
        if (rkv_tree_alloc_blocks(t, fresh, blocks + m.num_blocks) == RKV_OK) {
            if ((st = rkv_tree_insert(t, 0, tok, n, blocks, NULL, NULL)) != RKV_OK)
                die("insert", st);
            rkv_pool_unref_n(pools[q->inst], fresh, blocks + m.num_blocks);
        }
        rkv_tree_unlock(t, &lease);
        q->ev_begin = rec->ne;
        for (;;) {
            if (rec->ne + 256 > rec->ecap) {
                rec->ecap = (rec->ne + 256) * 2;
                rec->events = realloc(rec->events, rec->ecap * sizeof *rec->events);
                if (rec->events == NULL)
                    die("memory", RKV_ERR_NOMEM);
            }
            uint32_t got = 0;
            if ((st = rkv_tree_events_drain(t, rec->events + rec->ne, 256, &got)) != RKV_OK)
                die("drain", st);
            for (uint32_t k = 0; k < got; k++) {
                if (rec->events[rec->ne + k].kind == RKV_EVENT_RESYNC)
                    die("ring overflow while recording", RKV_ERR_STATE);
                rec->event_hashes += rec->events[rec->ne + k].num_hashes;
            }
            rec->ne += got;
            if (got < 256)
                break;
        }
        q->num_events = (uint32_t)(rec->ne - q->ev_begin);
    }
    for (uint32_t i = 0; i < N; i++) {
        rkv_tree_destroy(trees[i]);
        rkv_pool_destroy(pools[i]);
    }
    free(pools);
    free(trees);
    free(tok);
    free(blocks);
}

/* ---- the baseline: a hash set per instance ------------------------------------- */

typedef struct hset {
    uint64_t *key;
    uint8_t *used;
    uint64_t cap, count;
    uint32_t shift;
} hset;

static uint64_t hset_home(const hset *s, uint64_t k)
{
    return (k * 0x9E3779B97F4A7C15ull) >> s->shift;
}

static void hset_init(hset *s, uint64_t cap_pow2)
{
    s->cap = cap_pow2;
    s->count = 0;
    s->shift = 64 - (uint32_t)__builtin_ctzll(cap_pow2);
    s->key = xmalloc(cap_pow2 * sizeof *s->key);
    s->used = calloc(cap_pow2, 1);
    if (s->used == NULL)
        die("memory", RKV_ERR_NOMEM);
}

static int hset_has(const hset *s, uint64_t k)
{
    for (uint64_t i = hset_home(s, k);; i = (i + 1) & (s->cap - 1)) {
        if (!s->used[i])
            return 0;
        if (s->key[i] == k)
            return 1;
    }
}

static void hset_put(hset *s, uint64_t k);

static void hset_grow(hset *s)
{
    hset old = *s;
    hset_init(s, old.cap * 2);
    for (uint64_t i = 0; i < old.cap; i++)
        if (old.used[i])
            hset_put(s, old.key[i]);
    free(old.key);
    free(old.used);
}

static void hset_put(hset *s, uint64_t k)
{
    if ((s->count + 1) * 2 > s->cap)
        hset_grow(s);
    uint64_t i = hset_home(s, k);
    while (s->used[i]) {
        if (s->key[i] == k)
            return;
        i = (i + 1) & (s->cap - 1);
    }
    s->used[i] = 1;
    s->key[i] = k;
    s->count++;
}

static void hset_del(hset *s, uint64_t k)
{
    uint64_t m = s->cap - 1, i = hset_home(s, k);
    while (s->used[i] && s->key[i] != k)
        i = (i + 1) & m;
    if (!s->used[i])
        return;
    /* backward shift */
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & m;
        if (!s->used[j])
            break;
        uint64_t h = hset_home(s, s->key[j]);
        int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (!stays) {
            s->key[i] = s->key[j];
            i = j;
        }
    }
    s->used[i] = 0;
    s->count--;
}

/* ---- timed passes ------------------------------------------------------------------ */

typedef struct pass {
    double apply_ns;
    double apply_cpu_ns; /* thread CPU time of the same */
    double q_cpu_ns;     /* thread CPU time of all queries */
    double *q_ns;       /* per request */
    double *q_cpu;      /* per request, thread CPU time */
    uint32_t *overlap;  /* [n * N] */
    uint64_t entries;
    uint64_t pairs;     /* (hash, instance) pairs held at the end */
    uint64_t bytes;     /* index memory at the end */
} pass;

/* Both indexes are sized up front for what the fleet can cache (N
 * instances of `blocks` pages each), as a deployed router would be: table
 * growth (rehashing hundreds of MB) would otherwise land in the timed
 * event application. */
static uint64_t g_table_bytes; /* --table-bytes */

static void run_router(const recorded *rec, uint32_t N, uint32_t P,
                       uint64_t blocks, uint32_t top, pass *out)
{
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    cfg.page_tokens = P;
    uint64_t want = (uint64_t)N * blocks;
    cfg.initial_blocks = (uint32_t)(want > (1u << 29) ? (1u << 29) : want);
    cfg.max_table_bytes = g_table_bytes;
    rkv_router *r;
    rkv_status st = rkv_router_create(&cfg, &r);
    if (st != RKV_OK)
        die("router_create", st);
    for (uint32_t i = 0; i < N; i++)
        if ((st = rkv_router_add_instance(r, i)) != RKV_OK)
            die("add_instance", st);
    out->apply_ns = out->apply_cpu_ns = out->q_cpu_ns = 0;
    for (size_t i = 0; i < rec->n; i++) {
        const req *q = &rec->r[i];
        rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES];
        uint32_t k;
        const uint64_t *h = rec->hashes + q->hash_begin;
        uint32_t best = 0;
        double c0 = cpu_ns();
        double t0 = rkv_bench_now_ns();
        if (top) {
            st = rkv_router_route_top(r, 0, h, q->pages, o, top, &k, &best);
        } else {
            st = rkv_router_overlaps(r, 0, h, q->pages, o,
                                     RKV_ROUTER_MAX_INSTANCES, &k);
            /* the pick (ties by load, then at random; it counts the
             * request as routed there) */
            if (st == RKV_OK)
                st = rkv_router_choose(r, o, k, q->pages, &best);
        }
        double t1 = rkv_bench_now_ns();
        out->q_cpu[i] = cpu_ns() - c0;
        out->q_cpu_ns += out->q_cpu[i];
        if (st != RKV_OK)
            die("query", st);
        if (top && (st = rkv_router_overlaps(r, 0, h, q->pages, o,
                                             RKV_ROUTER_MAX_INSTANCES, &k)) != RKV_OK)
            die("overlaps", st);
        out->q_ns[i] = t1 - t0;
        g_sink += best; /* keep the pick from being optimized away */
        for (uint32_t j = 0; j < N; j++)
            out->overlap[i * N + j] = o[j].pages;
        c0 = cpu_ns();
        t0 = rkv_bench_now_ns();
        st = rkv_router_apply(r, q->inst, rec->events + q->ev_begin,
                              q->num_events);
        out->apply_ns += rkv_bench_now_ns() - t0;
        out->apply_cpu_ns += cpu_ns() - c0;
        if (st != RKV_OK)
            die("apply", st);
    }
    rkv_router_stats s;
    rkv_router_get_stats(r, &s);
    if (s.events_applied != rec->ne || s.gaps || s.events_bad)
        die("the router did not apply every event cleanly", RKV_ERR_CORRUPT);
    if ((st = rkv_router_check(r)) != RKV_OK)
        die("router_check", st);
    out->entries = s.entries;
    out->bytes = s.host_bytes;
    out->pairs = 0;
    for (uint32_t i = 0; i < N; i++) {
        rkv_router_instance_info in;
        if ((st = rkv_router_instance_info_get(r, i, &in)) != RKV_OK)
            die("instance_info", st);
        out->pairs += in.blocks;
    }
    rkv_router_destroy(r);
}

static void run_baseline(const recorded *rec, uint32_t N, uint64_t blocks,
                         pass *out)
{
    hset *sets = xmalloc(N * sizeof *sets);
    uint64_t cap = 1024;
    while (cap < 2 * blocks)
        cap *= 2;
    for (uint32_t i = 0; i < N; i++)
        hset_init(&sets[i], cap);
    out->apply_ns = out->apply_cpu_ns = out->q_cpu_ns = 0;
    for (size_t i = 0; i < rec->n; i++) {
        const req *q = &rec->r[i];
        const uint64_t *h = rec->hashes + q->hash_begin;
        uint32_t lead[RKV_ROUTER_MAX_INSTANCES];
        double c0 = cpu_ns();
        double t0 = rkv_bench_now_ns();
        uint32_t best = 0;
        for (uint32_t j = 0; j < N; j++) {
            uint32_t p = 0;
            while (p < q->pages && hset_has(&sets[j], h[p]))
                p++;
            lead[j] = p;
            if (p > lead[best])
                best = j;
        }
        double t1 = rkv_bench_now_ns();
        out->q_cpu[i] = cpu_ns() - c0;
        out->q_cpu_ns += out->q_cpu[i];
        out->q_ns[i] = t1 - t0;
        g_sink += best; /* keep the pick from being optimized away */
        for (uint32_t j = 0; j < N; j++)
            out->overlap[i * N + j] = lead[j];
        c0 = cpu_ns();
        t0 = rkv_bench_now_ns();
        hset *s = &sets[q->inst];
        for (uint32_t e = 0; e < q->num_events; e++) {
            const rkv_event *ev = &rec->events[q->ev_begin + e];
            if (ev->kind == RKV_EVENT_BLOCK_STORED)
                for (uint32_t k = 0; k < ev->num_hashes; k++)
                    hset_put(s, ev->hashes[k]);
            else if (ev->kind == RKV_EVENT_BLOCK_REMOVED)
                for (uint32_t k = 0; k < ev->num_hashes; k++)
                    hset_del(s, ev->hashes[k]);
        }
        out->apply_ns += rkv_bench_now_ns() - t0;
        out->apply_cpu_ns += cpu_ns() - c0;
    }
    out->entries = 0;
    out->pairs = 0;
    out->bytes = N * sizeof *sets;
    for (uint32_t i = 0; i < N; i++) {
        out->entries += sets[i].count;
        out->pairs += sets[i].count;
        out->bytes += sets[i].cap * (sizeof *sets[i].key + 1);
        free(sets[i].key);
        free(sets[i].used);
    }
    free(sets);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void pct(const double *v, size_t n, double *p50, double *p99,
                double *mean)
{
    double *s = xmalloc(n * sizeof *s);
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    *p50 = s[n / 2];
    *p99 = s[(size_t)((double)n * 0.99)];
    *mean = sum / (double)n;
    free(s);
}

int main(int argc, char **argv)
{
    const char *trace_arg = NULL;
    uint64_t N = 8, P = 16, capacity = 1000000, limit = 0, reps = 3, cands = 64;
    int baseline = 1;
    for (int i = 1; i < argc; i++) {
        uint64_t *dst = NULL;
        if (strcmp(argv[i], "--no-baseline") == 0) {
            baseline = 0;
            continue;
        }
        if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
            trace_arg = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--instances") == 0)
            dst = &N;
        else if (strcmp(argv[i], "--page-size") == 0)
            dst = &P;
        else if (strcmp(argv[i], "--capacity-tokens") == 0)
            dst = &capacity;
        else if (strcmp(argv[i], "--limit") == 0)
            dst = &limit;
        else if (strcmp(argv[i], "--reps") == 0)
            dst = &reps;
        else if (strcmp(argv[i], "--candidates") == 0)
            dst = &cands;
        else if (strcmp(argv[i], "--table-bytes") == 0)
            dst = &g_table_bytes;
        if (dst == NULL || i + 1 >= argc || !rkv_bench_parse_u64(argv[++i], dst)) {
            fprintf(stderr, "usage: router_bench [--trace FILE] [--instances N] "
                            "[--page-size P] [--capacity-tokens T] [--limit R] "
                            "[--reps K] [--candidates K] [--no-baseline] "
                            "[--table-bytes B]\n");
            return 2;
        }
    }
    if (N < 1 || N > RKV_ROUTER_MAX_INSTANCES || P < 1 ||
        P > RKV_MAX_PAGE_SIZE || capacity / P < 1 || capacity / P >= UINT32_MAX ||
        reps < 1 || cands < 1 || cands > RKV_ROUTER_MAX_INSTANCES) {
        fprintf(stderr, "router_bench: --instances 1..%u, --page-size 1..%u, "
                        "--capacity-tokens >= page size, --reps >= 1, "
                        "--candidates 1..%u\n",
                RKV_ROUTER_MAX_INSTANCES, RKV_MAX_PAGE_SIZE, RKV_ROUTER_MAX_INSTANCES);
        return 2;
    }
    char *path = rkv_bench_find_trace(trace_arg);
    rkv_trace_reader *rd;
    rkv_status st = path ? rkv_trace_reader_open_path(path, &rd)
                         : rkv_trace_reader_open_embedded(&rd);
    if (st != RKV_OK)
        die("open trace", st);
    rkv_workload wl;
    rkv_workload_init(&wl);
    if ((st = rkv_workload_load_trace(&wl, rd, (size_t)limit)) != RKV_OK)
        die("load trace", st);
    rkv_trace_reader_close(rd);

    recorded rec;
    record(&wl, (uint32_t)N, (uint32_t)P, capacity, &rec);
    uint64_t stored = 0, removed = 0;
    for (size_t e = 0; e < rec.ne; e++) {
        if (rec.events[e].kind == RKV_EVENT_BLOCK_STORED)
            stored += rec.events[e].num_hashes;
        else if (rec.events[e].kind == RKV_EVENT_BLOCK_REMOVED)
            removed += rec.events[e].num_hashes;
    }

    /* 0: route_top, 1: overlaps + choose, 2: the baseline */
    enum { KINDS = 3 };
    int kinds = baseline ? KINDS : KINDS - 1;
    pass best[KINDS], cur;
    for (int k = 0; k < KINDS; k++) {
        best[k].q_ns = xmalloc(rec.n * sizeof(double));
        best[k].q_cpu = xmalloc(rec.n * sizeof(double));
        best[k].overlap = xmalloc(rec.n * N * sizeof(uint32_t));
    }
    cur.q_ns = xmalloc(rec.n * sizeof(double));
    cur.q_cpu = xmalloc(rec.n * sizeof(double));
    cur.overlap = xmalloc(rec.n * N * sizeof(uint32_t));
    for (int k = 0; k < kinds; k++) {
        for (uint64_t r = 0; r < reps; r++) {
            if (k < 2)
                run_router(&rec, (uint32_t)N, (uint32_t)P, capacity / P,
                           k == 0 ? (uint32_t)cands : 0, &cur);
            else
                run_baseline(&rec, (uint32_t)N, capacity / P, &cur);
            double tot = cur.apply_ns, btot = best[k].apply_ns;
            for (size_t i = 0; i < rec.n; i++) {
                tot += cur.q_ns[i];
                btot += best[k].q_ns[i];
            }
            if (r == 0 || tot < btot) {
                pass tmp = best[k];
                best[k] = cur;
                cur = tmp;
            }
        }
    }
    for (int k = 1; k < kinds; k++)
        if (memcmp(best[0].overlap, best[k].overlap, rec.n * N * sizeof(uint32_t)) != 0)
            die("the passes disagree on an overlap", RKV_ERR_CORRUPT);
    /* table lookups each design makes: the router walks once to the longest
     * run (+1 miss), the baseline walks every instance to its run's end */
    uint64_t q_pages = 0, hit_pages = 0, look_router = 0, look_base = 0;
    for (size_t i = 0; i < rec.n; i++) {
        uint32_t pages = rec.r[i].pages;
        q_pages += pages;
        uint32_t m = 0;
        for (uint32_t j = 0; j < N; j++) {
            uint32_t o = best[0].overlap[i * N + j];
            if (o > m)
                m = o;
            look_base += o < pages ? o + 1 : o;
        }
        hit_pages += m;
        look_router += m < pages ? m + 1 : m;
    }

    printf("radixkv router_bench  (one core; fastest of %llu passes each)\n",
           (unsigned long long)reps);
    printf("trace: %s, %zu requests, %llu query pages (page size %llu), "
           "%llu instances round robin, %llu tokens each\n",
           path ? path : "<embedded>", rec.n, (unsigned long long)q_pages,
           (unsigned long long)P, (unsigned long long)N,
           (unsigned long long)capacity);
    printf("events: %zu (%llu hashes stored, %llu removed); best-instance "
           "overlap %.1f%% of query pages\n", rec.ne,
           (unsigned long long)stored, (unsigned long long)removed,
           100.0 * (double)hit_pages / (double)(q_pages ? q_pages : 1));
    printf("page-by-page lookups per query (what a linear walk makes; the "
           "router's search makes O(log) of them): one walk for all instances "
           "%.1f, per instance (baseline) %.1f\n",
           (double)look_router / (double)rec.n, (double)look_base / (double)rec.n);
    double e0 = cpu_ns(), ew0 = rkv_bench_now_ns();
    for (int k = 0; k < 1000; k++) {
        double c0 = cpu_ns();
        double t0 = rkv_bench_now_ns();
        double t1 = rkv_bench_now_ns();
        g_sink += (uint32_t)(t1 - t0) + (uint32_t)(cpu_ns() - c0);
    }
    printf("clock: an empty timed interval costs %.0f ns of CPU (wall %.0f ns)\n",
           (cpu_ns() - e0) / 1000, (rkv_bench_now_ns() - ew0) / 1000);
    printf("%-22s %12s %12s %10s %10s %10s %14s %10s %12s %8s\n", "index",
           "events/s", "hashes/s", "q p50 us", "q p99 us", "q mean us",
           "ev+req /s", "entries", "bytes", "B/pair");
    char top_name[40];
    snprintf(top_name, sizeof top_name, "router, route_top %llu",
             (unsigned long long)cands);
    const char *names[KINDS] = {top_name, "router, overlaps+choose",
                                "hash set per instance"};
    for (int k = 0; k < kinds; k++) {
        double p50, p99, mean;
        pct(best[k].q_ns, rec.n, &p50, &p99, &mean);
        double qtot = mean * (double)rec.n;
        double evs = (double)rec.ne / (best[k].apply_ns / 1e9);
        double hs = (double)rec.event_hashes / (best[k].apply_ns / 1e9);
        double both = ((double)rec.ne + (double)rec.n) /
                      ((best[k].apply_ns + qtot) / 1e9);
        printf("%-22s %12.0f %12.0f %10.2f %10.2f %10.2f %14.0f %10llu "
               "%12llu %8.1f\n",
               names[k], evs, hs, p50 / 1e3, p99 / 1e3, mean / 1e3, both,
               (unsigned long long)best[k].entries,
               (unsigned long long)best[k].bytes,
               (double)best[k].bytes /
                   (double)(best[k].pairs ? best[k].pairs : 1));
    }
    printf("per core (thread CPU time):\n%-22s %12s %12s %10s %10s %10s %14s\n",
           "index", "events/s", "hashes/s", "q p50 us", "q p99 us",
           "q mean us", "ev+req /s");
    for (int k = 0; k < kinds; k++) {
        double p50, p99, mean;
        pct(best[k].q_cpu, rec.n, &p50, &p99, &mean);
        printf("%-22s %12.0f %12.0f %10.2f %10.2f %10.2f %14.0f\n", names[k],
               (double)rec.ne / (best[k].apply_cpu_ns / 1e9),
               (double)rec.event_hashes / (best[k].apply_cpu_ns / 1e9),
               p50 / 1e3, p99 / 1e3, mean / 1e3,
               ((double)rec.ne + (double)rec.n) /
                   ((best[k].apply_cpu_ns + best[k].q_cpu_ns) / 1e9));
    }
    printf("events/s = event batches' events applied per second of apply time "
           "(an event carries up to %u hashes); q = one query: the pick "
           "(and the records its call returns), clock_gettime included; "
           "ev+req/s = (events + queries) / (apply + query time); entries = "
           "distinct hashes (router: per group of 64 instances) or hashes "
           "summed over instances (baseline); bytes = index memory as sized "
           "for the fleet up front; B/pair = bytes / (hash, instance) pairs "
           "held at the end; per core = the same in the thread's CPU time "
           "(waits for a core left out).\n", RKV_EVENT_MAX_HASHES);
    for (int k = 0; k < KINDS; k++) {
        free(best[k].q_ns);
        free(best[k].q_cpu);
        free(best[k].overlap);
    }
    free(cur.q_ns);
    free(cur.q_cpu);
    free(cur.overlap);
    free(rec.r);
    free(rec.hashes);
    free(rec.events);
    rkv_workload_free(&wl);
    free(path);
    return 0;
}
