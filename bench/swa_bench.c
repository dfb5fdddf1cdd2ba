/*
 * bench/swa_bench.c -- what releasing the sliding layers' KV (swa/) buys a
 * hybrid model in the same GPU memory: cached tokens and hit rate.
 *
 *   swa_bench [--model gpt-oss-120b|gemma3-27b] [--capacity TOKENS]
 *             [--agentic-page P] [--quick]
 *
 * The KV memory is that of a cache that keeps every layer's KV for every
 * cached token and holds --capacity tokens (default: what the model's KV
 * gets on an 80 GB H100 beside its weights, sim/costmodel.h). The same
 * bytes then serve a hybrid tree: a full pool (the full layers' KV of
 * every cached token) and an SWA pool (the sliding layers' KV of the pages
 * some window needs), split in the ratio r = SWA pages / full pages for
 * each r of a sweep. Requests run in file order (sim/replay.h's cache-alone
 * protocol): match (for the hybrid tree rkv_tree_swa_match, usable only
 * where the last window's sliding KV is there), lock, allocate the rest,
 * cache the prompt's full pages. The hybrid request gives the sliding KV
 * of its new pages two ways: "keep", all of them (as many as the SWA pool
 * can give, releasing the least recently used), so the release order
 * alone decides which windows stay; "window", only its last window's
 * pages (a server that releases the rest while it prefills), so the SWA
 * pool holds windows, not prompts, and a later match that ends anywhere
 * else in the prompt is cut. Workloads:
 * the Mooncake conversation trace (512-token pages) and the synthetic
 * agentic sessions (seed 1). Deterministic: no clock is read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "radixkv.h"
#include "sim/costmodel.h"
#include "sim/replay.h"
#include "sim/trace.h"
#include "sim/workload.h"

static void die(const char *what, rkv_status st)
{
    fprintf(stderr, "swa_bench: %s: %s (%s)\n", what, rkv_strerror(st),
            rkv_last_error());
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "swa_bench: out of memory\n");
        exit(1);
    }
    return p;
}

typedef struct run_result {
    uint64_t queried, hit, truncated, full_pages, swa_pages;
} run_result;

/* One configuration: swa_pages == 0 is the plain cache of full_pages pages
 * (every layer's KV per page). */
static run_result run(const rkv_workload *wl, uint32_t P, uint32_t full_pages,
                      uint32_t swa_pages, uint32_t window, int keep)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.page_size = P;
    pc.num_blocks = full_pages;
    rkv_pool *pool, *spool = NULL;
    rkv_tree *tree;
    rkv_status st;
    if ((st = rkv_pool_create(&pc, &pool)) != RKV_OK ||
        (st = rkv_tree_create(pool, NULL, &tree)) != RKV_OK)
        die("pool", st);
    int hybrid = swa_pages > 0;
    uint32_t wp = (window + P - 1) / P;
    if (hybrid) {
        pc.num_blocks = swa_pages;
        if ((st = rkv_pool_create(&pc, &spool)) != RKV_OK ||
            (st = rkv_tree_swa_attach(tree, spool, window)) != RKV_OK)
            die("SWA pool", st);
    }
    uint32_t maxin = rkv_workload_max_input(wl);
    int32_t *tok = xmalloc((size_t)maxin * sizeof *tok);
    uint32_t maxp = maxin / P + 1;
    rkv_block_id *blocks = xmalloc((size_t)maxp * sizeof *blocks);
    rkv_block_id *swab = xmalloc((size_t)maxp * sizeof *swab);
    rkv_block_id *sa = xmalloc((size_t)maxp * sizeof *sa);
    run_result r = {0, 0, 0, full_pages, swa_pages};
    for (size_t i = 0; i < wl->num_reqs; i++) {
        uint32_t len = wl->reqs[i].input_length;
        if (len > (uint64_t)full_pages * P)
            len = full_pages * P;
        uint32_t pages = len / P;
        if ((st = rkv_workload_prompt_n(wl, i, len, tok)) != RKV_OK)
            die("prompt", st);
        rkv_match m;
        st = hybrid ? rkv_tree_swa_match(tree, 0, tok, len, blocks, swab, 0, &m)
                    : rkv_tree_match(tree, 0, tok, len, blocks, 0, &m);
        if (st != RKV_OK)
            die("match", st);
        r.queried += len;
        r.hit += m.matched_tokens;
        uint32_t k = m.num_blocks;
        if (k >= pages)
            continue;
        rkv_lease l = {0};
        rkv_swa_lease sl = {0};
        st = hybrid ? rkv_tree_swa_lock(tree, m.node, &sl)
                    : rkv_tree_lock(tree, m.node, &l);
        if (st != RKV_OK)
            die("lock", st);
        uint32_t need = pages - k;
        st = rkv_tree_alloc_blocks(tree, need, blocks + k);
        if (st == RKV_ERR_NO_SPACE) { /* cache what fits beside the lock */
            rkv_tree_stats ts;
            (void)rkv_tree_get_stats(tree, &ts);
            uint64_t avail = rkv_pool_num_free(pool) + ts.evictable_blocks;
            need = avail < need ? (uint32_t)avail : need;
            st = need ? rkv_tree_alloc_blocks(tree, need, blocks + k) : RKV_OK;
        }
        if (st != RKV_OK)
            die("alloc", st);
        uint32_t nswa = 0;
        if (hybrid && need > 0) {
            rkv_swa_stats ss;
            (void)rkv_tree_swa_get_stats(tree, &ss);
            uint64_t avail = rkv_pool_num_free(spool) + ss.attached_pages -
                             ss.kept_pages;
            nswa = keep ? need : (need < wp ? need : wp);
            if (nswa > avail)
                nswa = (uint32_t)avail;
            if (rkv_tree_swa_alloc(tree, nswa, sa) != RKV_OK)
                nswa = 0; /* every SWA page is some lease's window */
            for (uint32_t j = 0; j < k + need; j++)
                swab[j] = j >= k + need - nswa ? sa[j - (k + need - nswa)]
                                               : RKV_NO_BLOCK;
        }
        if (need > 0) {
            size_t n = (size_t)(k + need) * P;
            st = hybrid ? rkv_tree_swa_insert(tree, 0, tok, n, blocks, swab,
                                              NULL, NULL)
                        : rkv_tree_insert(tree, 0, tok, n, blocks, NULL, NULL);
            if (st != RKV_OK)
                die("insert", st);
            if ((st = rkv_pool_unref_n(pool, need, blocks + k)) != RKV_OK ||
                (nswa > 0 && (st = rkv_pool_unref_n(spool, nswa, sa)) != RKV_OK))
                die("unref", st);
        }
        st = hybrid ? rkv_tree_swa_unlock(tree, &sl) : rkv_tree_unlock(tree, &l);
        if (st != RKV_OK)
            die("unlock", st);
    }
    if (hybrid) {
        rkv_swa_stats ss;
        (void)rkv_tree_swa_get_stats(tree, &ss);
        r.truncated = ss.truncated_tokens;
    }
    if ((st = rkv_tree_check(tree)) != RKV_OK)
        die("check", st);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(spool);
    rkv_pool_destroy(pool);
    free(tok);
    free(blocks);
    free(swab);
    free(sa);
    return r;
}

static void table(const char *title, const rkv_workload *wl, uint32_t P,
                  const rkv_cost_model *cm, uint64_t cap_tokens)
{
    double all = rkv_cost_kv_bytes_per_token(cm);
    double sl = rkv_cost_kv_sliding_bytes_per_token(cm), full = all - sl;
    double bytes = (double)cap_tokens * all;
    uint32_t wp = (cm->sliding_window + P - 1) / P;
    printf("\n%s, page %u tokens, window %u tokens (%u page%s)\n", title, P,
           cm->sliding_window, wp, wp == 1 ? "" : "s");
    printf("KV memory %.2f GB: %.0f bytes a token, %.0f of them sliding\n",
           bytes / 1e9, all, sl);
    printf("%-24s %12s %12s %9s %12s\n", "cache", "full tokens", "SWA tokens",
           "hit rate", "cut tokens");
    uint32_t base_pages = (uint32_t)(cap_tokens / P);
    run_result b = run(wl, P, base_pages, 0, cm->sliding_window, 0);
    printf("%-24s %12llu %12s %8.2f%% %12s\n", "every layer per page",
           (unsigned long long)b.full_pages * P, "(same)",
           100.0 * (double)b.hit / (double)b.queried, "-");
    static const double ratios[] = {1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125};
    for (size_t i = 0; i < sizeof ratios / sizeof ratios[0]; i++) {
        double per_page = (full + ratios[i] * sl) * P;
        uint32_t fp = (uint32_t)(bytes / per_page);
        uint32_t sp = (uint32_t)(fp * ratios[i]);
        if (sp < 2 * wp)
            continue;
        for (int keep = 1; keep >= 0; keep--) {
            run_result h = run(wl, P, fp, sp, cm->sliding_window, keep);
            char name[40];
            snprintf(name, sizeof name, "hybrid %s, r = %g",
                     keep ? "keep" : "window", ratios[i]);
            printf("%-24s %12llu %12llu %8.2f%% %12llu\n", name,
                   (unsigned long long)h.full_pages * P,
                   (unsigned long long)h.swa_pages * P,
                   100.0 * (double)h.hit / (double)h.queried,
                   (unsigned long long)h.truncated);
        }
    }
}

int main(int argc, char **argv)
{
    const char *model = "gpt-oss-120b";
    uint64_t cap = 0, apage = 16;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(argv[i], "--capacity") == 0 && i + 1 < argc) {
            if (!rkv_bench_parse_u64(argv[++i], &cap) || cap == 0)
                return fprintf(stderr, "swa_bench: bad --capacity\n"), 2;
        } else if (strcmp(argv[i], "--agentic-page") == 0 && i + 1 < argc) {
            if (!rkv_bench_parse_u64(argv[++i], &apage) || apage == 0 ||
                apage > RKV_MAX_PAGE_SIZE)
                return fprintf(stderr, "swa_bench: bad --agentic-page\n"), 2;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else {
            fprintf(stderr, "usage: swa_bench [--model NAME] [--capacity "
                            "TOKENS] [--agentic-page P] [--quick]\n");
            return 2;
        }
    }
    rkv_cost_model cm;
    rkv_cost_model_init(&cm);
    rkv_status st = rkv_cost_model_preset(&cm, model);
    if (st != RKV_OK)
        die("--model", st);
    if (cm.sliding_layers == 0) {
        fprintf(stderr, "swa_bench: %s has no sliding-window layers\n", model);
        return 2;
    }
    if (cap == 0)
        cap = rkv_cost_default_capacity_tokens(&cm);
    printf("model %s: %u layers, %u sliding (window %u); capacity %llu tokens "
           "of every layer's KV\n", model, cm.layers, cm.sliding_layers,
           cm.sliding_window, (unsigned long long)cap);

    rkv_workload wl;
    rkv_workload_init(&wl);
    rkv_trace_reader *rd = NULL;
    if ((st = rkv_trace_reader_open_embedded(&rd)) != RKV_OK ||
        (st = rkv_workload_load_trace(&wl, rd, quick ? 3000 : 0)) != RKV_OK)
        die("trace", st);
    uint32_t tp = rkv_trace_reader_block_tokens(rd);
    rkv_trace_reader_close(rd);
    table("Mooncake conversation trace", &wl, tp, &cm, cap);
    rkv_workload_free(&wl);

    rkv_agentic_config ac;
    rkv_agentic_config_init(&ac);
    if (quick)
        ac.sessions = 16;
    if ((st = rkv_workload_agentic(&wl, &ac, 1)) != RKV_OK)
        die("agentic", st);
    char title[96];
    snprintf(title, sizeof title, "agentic workload (seed 1, %u sessions)",
             ac.sessions);
    table(title, &wl, (uint32_t)apage, &cm, cap);
    rkv_workload_free(&wl);
    return 0;
}
