/*
 * bench/evict_explain.c -- --explain's measure of the learned policy's
 * classes: how well they rank leaf ends by whether they come back (AUC),
 * on a workload's page sequence (bench/evict_bench.h). The per-kind hit
 * split --explain also prints belongs to the main table (evict_bench.c).
 *
 * Invariants: the classes are retain/evict_learned.c's (continuation depth
 * 0..3 x five sizes of new pages); only the past is used to classify an
 * end, and only the label (its next use) looks ahead; one pass over the
 * requests in file order, so the figure is deterministic.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/evict_bench.h"

/* Each request with two or more pages leaves an end (its last page); it
 * "returns" when a request within RETURN_WINDOW requests has that page.
 * Classes as retain/evict_learned.c's: continuation depth (a request whose
 * path holds an earlier request's end, not counting the first page, is one
 * deeper) x new pages beyond that end. Prints the AUC of ranking ends by
 * their class's return share (0.5: no information, 1: perfect) -- what a
 * policy ranking leaves by class can know at best. */
#define RETURN_WINDOW 600
#define NCLASS 20

void explain_classes(const pages *pg)
{
    uint64_t cap = 1;
    while (cap < 2 * (uint64_t)pg->nreq + 2)
        cap <<= 1;
    uint64_t *key = calloc(cap, sizeof *key);
    uint32_t *val = evict_xmalloc(cap * sizeof *val);
    uint8_t *depth = evict_xmalloc(pg->nreq ? pg->nreq : 1);
    if (key == NULL) {
        fprintf(stderr, "evict_bench: out of memory\n");
        exit(1);
    }
    double tot[NCLASS] = {0}, pos[NCLASS] = {0};
    for (size_t i = 0; i < pg->nreq; i++) {
        uint64_t o = pg->off[i], n = pg->off[i + 1] - o, base = 1;
        depth[i] = 0;
        if (n < 2)
            continue;
        for (uint64_t j = n - 1; j >= 1; j--) {
            uint64_t s = slot_of(key, cap, pg->ids[o + j]);
            if (key[s] == pg->ids[o + j]) {
                uint32_t d = depth[val[s]] + 1u;
                depth[i] = (uint8_t)(d < 3 ? d : 3);
                base = j + 1;
                break;
            }
        }
        uint64_t np = n - base;
        int sz = np <= 1 ? 0 : np <= 2 ? 1 : np <= 4 ? 2 : np <= 8 ? 3 : 4;
        int c = depth[i] * 5 + sz;
        uint32_t nx = pg->next[o + n - 1];
        tot[c] += 1;
        pos[c] += nx != UINT32_MAX && nx - i < RETURN_WINDOW;
        uint64_t s = slot_of(key, cap, pg->ids[o + n - 1]);
        key[s] = pg->ids[o + n - 1];
        val[s] = (uint32_t)i;
    }
    /* AUC: classes in rising return share; ties inside a class count half */
    int ord[NCLASS];
    for (int c = 0; c < NCLASS; c++)
        ord[c] = c;
    for (int a = 1; a < NCLASS; a++)
        for (int b = a; b > 0; b--) {
            int x = ord[b - 1], y = ord[b];
            double rx = tot[x] > 0 ? pos[x] / tot[x] : 0;
            double ry = tot[y] > 0 ? pos[y] / tot[y] : 0;
            if (rx <= ry)
                break;
            ord[b - 1] = y;
            ord[b] = x;
        }
    double P = 0, N = 0, auc = 0, negs = 0;
    for (int k = 0; k < NCLASS; k++) {
        int c = ord[k];
        double ng = tot[c] - pos[c];
        auc += pos[c] * (negs + ng / 2);
        negs += ng;
        P += pos[c];
        N += ng;
    }
    printf("  learned classes vs \"end used again within %d requests\": "
           "%.0f ends, %.1f%% return, AUC %.3f\n", RETURN_WINDOW, P + N,
           P + N > 0 ? 100 * P / (P + N) : 0.0,
           P > 0 && N > 0 ? auc / (P * N) : 0.5);
    free(key);
    free(val);
    free(depth);
}
