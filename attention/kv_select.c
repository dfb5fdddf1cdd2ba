/*
 * attention/kv_select.c -- which tokens H2O and SnapKV keep
 * (include/radixkv/kv_evict.h): pure functions over a score array.
 *
 * Both keep the protected prefix (the shared pages' tokens: never evicted)
 * and a recent / observation window, and pick the rest by score; ties go
 * to the earlier token, so a selection is deterministic. O(n log n): the
 * candidates are sorted by (score desc, index asc) -- a selection runs
 * once per eviction, not per step.
 */
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"

typedef struct cand {
    float s;
    uint32_t j;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

/* keep: [0, lo) and [hi, n) kept; the best `take` of [lo, hi) by score
 * (NaN counts as -inf). Returns the tokens kept; 0 on no memory (then
 * keep is all 1: keeping everything is always safe). */
static uint32_t select_top(const float *score, uint32_t n, uint32_t lo,
                           uint32_t hi, uint32_t take, uint8_t *keep)
{
    memset(keep, 1, n);
    if (hi <= lo || take >= hi - lo)
        return n;
    cand *c = malloc((size_t)(hi - lo) * sizeof *c);
    if (c == NULL)
        return n;
    for (uint32_t j = lo; j < hi; j++) {
        float s = score[j];
        c[j - lo].s = s == s ? s : -__builtin_inff();
        c[j - lo].j = j;
        keep[j] = 0;
    }
    qsort(c, hi - lo, sizeof *c, cand_cmp);
    for (uint32_t i = 0; i < take; i++)
        keep[c[i].j] = 1;
    free(c);
    return n - (hi - lo) + take;
}

uint32_t rkv_kv_select_h2o(const float *score, uint32_t n, uint32_t protect,
                           uint32_t heavy, uint32_t recent, uint8_t *keep)
{
    if (score == NULL || keep == NULL)
        return 0;
    uint32_t lo = protect < n ? protect : n;
    uint32_t hi = recent < n - lo ? n - recent : lo;
    return select_top(score, n, lo, hi, heavy, keep);
}

uint32_t rkv_kv_select_snapkv(const float *score, uint32_t n, uint32_t protect,
                              uint32_t budget, uint32_t obs, uint32_t kernel,
                              uint8_t *keep)
{
    if (score == NULL || keep == NULL)
        return 0;
    uint32_t lo = protect < n ? protect : n;
    uint32_t hi = obs < n - lo ? n - obs : lo;
    uint32_t half = kernel / 2;
    float *pooled = malloc((size_t)(n ? n : 1) * sizeof *pooled);
    if (pooled == NULL) {
        memset(keep, 1, n);
        return n;
    }
    /* max-pool over [j - half, j + half] within the candidates, so an
     * observation-window token's own score never leaks in */
    for (uint32_t j = lo; j < hi; j++) {
        uint32_t a = j - lo > half ? j - half : lo;
        uint32_t b = hi - 1 - j > half ? j + half : hi - 1;
        float m = -__builtin_inff();
        for (uint32_t i = a; i <= b; i++)
            m = score[i] > m ? score[i] : m;
        pooled[j] = m;
    }
    uint32_t kept = select_top(pooled, n, lo, hi, budget, keep);
    free(pooled);
    return kept;
}
