/*
 * bench/evict_bench.c -- hit rate of the eviction policies (rkv_evict_policy)
 * against LRU and Belady, on the Mooncake conversation trace and on the
 * synthetic agentic workload, in one run.
 *
 * Conventions (bench/traces/README.md, "Reference hit rates"): requests in
 * file order; each one matches its prompt, then its full pages are inserted
 * (no output tokens are cached; a partial last page is never cached); every
 * cached page takes one page of capacity; eviction removes leaves only, page
 * by page from a leaf's tail, and never a page of the request being served.
 * Hit rate = prompt tokens served from cache / all prompt tokens.
 *
 * The library policies run through the real tree (sim/replay.h
 * rkv_replay_file_order with cfg.evict_policy, selected by name through
 * rkv_evict_policy_from_name). Two page-level models run beside them on the
 * same page sequence (pages identified by a chained hash of their tokens):
 *   ref-lru  leaf LRU, to show the tree's LRU and the reference conventions
 *            agree (it must equal the library's lru column);
 *   belady   farthest next use among evictable leaves (future knowledge,
 *            offline; an indexed heap, O(log n) per step) -- the bound the
 *            reference table calls "farthest-next-use (Belady, leaves only)";
 *   ever-lru leaves whose pages are never used again go first, then LRU:
 *            future knowledge of WHETHER a page comes back but not WHEN --
 *            what a perfect return classifier could give an LRU-ordered
 *            cache (it bounds what better prediction of returns can add;
 *            the rest of Belady's lead is timing).
 * "gap closed" = (policy - lru) / (belady - lru), measured in this run;
 * us/req = the tree's match + alloc/evict + insert time per request (mean,
 * clock around each call), to compare the policies' costs in one run.
 *
 * --explain adds, per capacity, where each page model's hits come from:
 * the first page (a shared root of the whole trace), shared pages (a page
 * that ever has two or more distinct next pages: a common prefix), and
 * chain pages (the rest: one conversation's own turns); and, per workload,
 * how well the learned policy's classes rank leaf ends by whether they
 * come back within 600 requests (AUC).
 *
 * --bound (conversation trace only, first two capacities) measures what
 * prediction quality the learned policy's target (half the LRU ->
 * Belady gap) needs, with imperfect oracles on the page model: (a) Belady
 * on next-use times with lognormal noise, (b) a "used again within H requests"
 * classifier of a given ROC AUC, LRU inside its two classes, and (c) the
 * AUC that the learned policy's classes and simple online tree features
 * reach for that label, and those features replayed as the classifier of
 * (b) (see bench/evict_bound.c). The synthetic scores of (b) err
 * independently per access; the replays show what correlated errors of
 * real features give at the same AUC.
 *
 * Usage: evict_bench [--trace FILE] [--policies a,b,...] [--quick] [--explain]
 *                    [--bound] [--capacity-tokens N]...
 *                    [--agentic-capacity-tokens N]... [--sessions N]
 *                    [--tool-pct P] [--tool-median-ms T] [--seed S]
 * Defaults: policies lru,priority,learned; trace capacities 1,000,000 and
 * 3,000,000 tokens; the agentic workload's defaults (128 sessions, 75 %
 * with tool calls, seed 1); agentic capacities 1/4 and 1/2 of its distinct pages
 * (what an unbounded cache would hold); page 512 everywhere. --quick: the first 3,000
 * requests of the trace and 16 agentic sessions. The trace is found from
 * --trace, $RKV_TRACE, bench/traces/ walking up, else the embedded copy.
 *
 * This file owns the arguments, the main table and main. The page sequence,
 * the page models and the library replay are bench/evict_pages.c, the
 * learned-classes AUC bench/evict_explain.c, --bound bench/evict_bound.c;
 * bench/evict_bench.h is what they share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "bench/evict_bench.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "radixkv.h"

#define MAX_CAPS 8
#define MAX_POLICIES 8

/* ---- one table ------------------------------------------------------------------ */

static void table(const char *title, const rkv_workload *wl,
                  const uint64_t *caps, int ncaps, const int *pol, int npol,
                  int explain)
{
    pages pg;
    pages_build(&pg, wl);
    printf("\n%s: %zu requests, %llu prompt tokens, page %d, file order\n",
           title, pg.nreq, (unsigned long long)pg.prompt_tokens, PAGE);
    if (explain)
        explain_classes(&pg);
    printf("%14s %9s %9s %9s", "capacity", "ref-lru", "belady", "ever-lru");
    for (int p = 0; p < npol; p++)
        printf(" %9s", rkv_evict_policy_name(pol[p]));
    for (int p = 0; p < npol; p++)
        if (pol[p] != RKV_EVICT_LRU)
            printf("  gap(%s)", rkv_evict_policy_name(pol[p]));
    for (int p = 0; p < npol; p++)
        printf(" us/req(%s)", rkv_evict_policy_name(pol[p]));
    printf("\n");
    for (int c = 0; c < ncaps; c++) {
        uint64_t cp = caps[c] / PAGE;
        uint64_t kinds[3][KINDS] = {{0}};
        double lru_ref = (double)model_run(&pg, cp, M_LRU, kinds[0]) /
                         (double)pg.prompt_tokens;
        double bel = (double)model_run(&pg, cp, M_BELADY, kinds[1]) /
                     (double)pg.prompt_tokens;
        double ever = (double)model_run(&pg, cp, M_EVER, kinds[2]) /
                      (double)pg.prompt_tokens;
        double hr[MAX_POLICIES], us[MAX_POLICIES], lru = lru_ref;
        int fb[MAX_POLICIES];
        for (int p = 0; p < npol; p++) {
            hr[p] = library_run(wl, caps[c], pol[p], &us[p], &fb[p]);
            if (pol[p] == RKV_EVICT_LRU)
                lru = hr[p];
        }
        printf("%14llu %8.2f%% %8.2f%% %8.2f%%", (unsigned long long)caps[c],
               100 * lru_ref, 100 * bel, 100 * ever);
        for (int p = 0; p < npol; p++) /* *: its guard took LRU victims */
            printf(" %8.2f%%%s", 100 * hr[p], fb[p] ? "*" : " ");
        for (int p = 0; p < npol; p++)
            if (pol[p] != RKV_EVICT_LRU)
                printf("  %7.1f%%", bel > lru ? 100 * (hr[p] - lru) / (bel - lru) : 0.0);
        for (int p = 0; p < npol; p++)
            printf(" %*.2f", (int)strlen(rkv_evict_policy_name(pol[p])) + 8, us[p]);
        printf("\n");
        static const char *const mname[3] = {"ref-lru", "belady", "ever-lru"};
        for (int m = 0; explain && m < 3; m++) {
            printf("%14s %9s", "", mname[m]);
            for (int k = 0; k < KINDS; k++)
                printf("  %s %6.2f%%", kind_name[k],
                       100.0 * (double)kinds[m][k] / (double)pg.prompt_tokens);
            printf("\n");
        }
    }
    pages_free(&pg);
}

int main(int argc, char **argv)
{
    const char *trace_arg = NULL, *pols = "lru,priority,learned";
    uint64_t caps[MAX_CAPS] = {1000000, 3000000}, acaps[MAX_CAPS];
    int ncaps = 0, nacaps = 0, quick = 0, explain = 0, bound = 0;
    uint64_t sessions = 0, tool_pct = 75, seed = 1, tool_median = 0;
    for (int i = 1; i < argc; i++) {
        uint64_t v;
        if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
            trace_arg = argv[++i];
        } else if (!strcmp(argv[i], "--policies") && i + 1 < argc) {
            pols = argv[++i];
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--explain")) {
            explain = 1;
        } else if (!strcmp(argv[i], "--bound")) {
            bound = 1;
        } else if (!strcmp(argv[i], "--capacity-tokens") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v) && v >= PAGE &&
                   ncaps < MAX_CAPS) {
            caps[ncaps++] = v;
            i++;
        } else if (!strcmp(argv[i], "--sessions") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v) && v >= 1 &&
                   v <= 100000) {
            sessions = v;
            i++;
        } else if (!strcmp(argv[i], "--tool-pct") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v) && v <= 100) {
            tool_pct = v;
            i++;
        } else if (!strcmp(argv[i], "--tool-median-ms") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v) && v >= 1 &&
                   v <= 600000) {
            tool_median = v;
            i++;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v)) {
            seed = v;
            i++;
        } else if (!strcmp(argv[i], "--agentic-capacity-tokens") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v) && v >= PAGE &&
                   nacaps < MAX_CAPS) {
            acaps[nacaps++] = v;
            i++;
        } else {
            fprintf(stderr, "usage: evict_bench [--trace FILE] [--policies "
                            "a,b,...] [--quick] [--explain] [--bound] "
                            "[--capacity-tokens N]... "
                            "[--agentic-capacity-tokens N]... "
                            "[--sessions N] [--tool-pct P] "
                            "[--tool-median-ms T] [--seed S]\n");
            return 2;
        }
    }
    if (ncaps == 0)
        ncaps = 2;
    int pol[MAX_POLICIES], npol = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", pols);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (npol == MAX_POLICIES) {
            fprintf(stderr, "evict_bench: at most %d policies\n", MAX_POLICIES);
            return 2;
        }
        rkv_status st = rkv_evict_policy_from_name(tok, &pol[npol]);
        if (st != RKV_OK) {
            fprintf(stderr, "evict_bench: %s\n", rkv_last_error());
            return 2;
        }
        npol++;
    }

    rkv_workload wl;
    rkv_workload_init(&wl);
    char *path = rkv_bench_find_trace(trace_arg);
    rkv_trace_reader *rd = NULL;
    rkv_status st = path ? rkv_trace_reader_open_path(path, &rd)
                         : rkv_trace_reader_open_embedded(&rd);
    if (st != RKV_OK)
        evict_die("trace", st);
    if ((st = rkv_workload_load_trace(&wl, rd, quick ? 3000 : 0)) != RKV_OK)
        evict_die("trace", st);
    rkv_trace_reader_close(rd);
    char title[512];
    snprintf(title, sizeof title, "conversation trace %s",
             path ? path : "<embedded>");
    free(path);
    if (bound) {
        /* the conversation trace only: the target is set there */
        bound_tables(&wl, caps, ncaps);
        rkv_workload_free(&wl);
        return 0;
    }
    table(title, &wl, caps, ncaps, pol, npol, explain);
    rkv_workload_free(&wl);

    rkv_agentic_config ac;
    rkv_agentic_config_init(&ac);
    if (quick)
        ac.sessions = 16;
    if (sessions != 0)
        ac.sessions = (uint32_t)sessions;
    ac.chat_share = 1.0 - (double)tool_pct / 100.0;
    if (tool_median != 0)
        ac.tool_median_ms = (double)tool_median;
    if ((st = rkv_workload_agentic(&wl, &ac, seed)) != RKV_OK)
        evict_die("agentic", st);
    if (nacaps == 0) {
        pages pg;
        pages_build(&pg, &wl);
        acaps[0] = pg.distinct / 4 * PAGE;
        acaps[1] = pg.distinct / 2 * PAGE;
        nacaps = 2;
        pages_free(&pg);
    }
    snprintf(title, sizeof title, "agentic workload (seed %llu, %u sessions, "
             "%llu %% tool sessions)", (unsigned long long)seed, ac.sessions,
             (unsigned long long)tool_pct);
    table(title, &wl, acaps, nacaps, pol, npol, explain);
    rkv_workload_free(&wl);
    return 0;
}
