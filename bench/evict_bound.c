/*
 * bench/evict_bound.c -- evict_bench --bound: what prediction quality the
 * learned policy's target (half the LRU -> Belady gap) needs, measured with
 * imperfect oracles on the page model (bench/evict_bench.h) rather than
 * guessed from an AUC. Prints, for the conversation trace at the first
 * BOUND_CAPS capacities: (a) Belady on noisy next-use times, (b) a "used
 * again within H requests" classifier of a given ROC AUC, LRU inside its
 * two classes, (c) the AUC that the learned policy's classes and simple
 * online tree features reach for that label, and those features replayed
 * as the classifier of (b).
 *
 * Invariants: the oracles only reorder the page model's evictions (through
 * model_run_keyed), so every hit rate here is comparable with the lru and
 * belady columns; all noise is a pure function of (BOUND_SEED, page access
 * index), so runs are deterministic and every noise level sees the same
 * draws; features use only the past of each access, labels only its next
 * use.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/evict_bench.h"

/* Imperfect oracles on the page model, to measure how good a prediction
 * must be before it pays, rather than guess it from an AUC:
 *   M_NOISY      Belady on a noisy next-use time: now + (next - now) *
 *                exp(sigma * Z). A page never used again counts as used one
 *                trace length (nreq requests) later, so sigma 0 is Belady
 *                exactly and noise blurs "never" like any other time;
 *   M_NOISY_INF  the same, but "never" stays exact (whether is known, only
 *                when is noisy), to separate the two kinds of knowledge;
 *   M_CLASS      a return classifier: label = used again within H requests,
 *                score = label + s * Z, predicted "returns" iff score > thr;
 *                pages predicted not to return go first, LRU inside each
 *                class. thr 0.5 is the midpoint (equal error rates on both
 *                classes); a higher thr trades missed returns for fewer
 *                false "returns", which matters because a small cache holds
 *                few pages against many that never come back (the tables
 *                show the midpoint and the best of a false-positive-rate
 *                grid). (Letting a "returns" prediction lapse H requests
 *                after the use measured the same as never lapsing, on the
 *                first 3,000 requests: the cache turns over faster than H.)
 *                With equal-variance gaussians AUC = Phi(1 / (s sqrt 2)),
 *                so s is set from the AUC asked for; the AUC of the scores
 *                actually drawn is measured and printed beside it.
 * Z ~ N(0, 1) is drawn per page access from a counter-based generator
 * (splitmix64 of seed and access index), so a run is deterministic and
 * every sigma / AUC sees the same draws (common random numbers: the rows
 * differ by the noise level only, which the bisections rely on). */
#define BOUND_SEED 13u
#define H_INF UINT32_MAX

/* the oracles' orders (after the page model's own: M_LRU .. M_EVER) */
enum { M_NOISY = M_EVER + 1, M_NOISY_INF, M_CLASS };

typedef struct bound_params {
    double sigma;  /* M_NOISY*: lognormal sigma of the next-use distance */
    double s;      /* M_CLASS: score noise                                */
    double thr;    /* M_CLASS: score threshold for "returns"              */
    uint32_t h;    /* M_CLASS: horizon in requests (H_INF: ever)          */
    const double *score; /* M_CLASS: per-access scores instead of label + s Z */
} bound_params;

/* model_run_keyed's context for bound_key: an oracle and its parameters */
typedef struct bound_ctx {
    int mode;
    const bound_params *bp;
} bound_ctx;

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* N(0, 1) for access g (Box-Muller on two 53-bit uniforms in (0, 1)) */
static double gauss_of(uint64_t g)
{
    uint64_t a = splitmix64(g * 2 + ((uint64_t)BOUND_SEED << 40));
    uint64_t b = splitmix64(g * 2 + 1 + ((uint64_t)BOUND_SEED << 40));
    double u1 = ((double)(a >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(b >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int bound_label(const pages *pg, uint64_t g, size_t req, uint32_t h)
{
    uint32_t nx = pg->next[g];
    return nx != UINT32_MAX && (h == H_INF || nx - req < h);
}

static uint64_t bound_key(const pages *pg, uint64_t g, size_t req,
                          uint64_t clock, const void *ctx)
{
    int mode = ((const bound_ctx *)ctx)->mode;
    const bound_params *bp = ((const bound_ctx *)ctx)->bp;
    double z = gauss_of(g);
    if (mode == M_CLASS) {
        double score = bp->score != NULL ? bp->score[g]
                                         : bound_label(pg, g, req, bp->h) + bp->s * z;
        return (uint64_t)(score > bp->thr) << 62 | clock;
    }
    uint32_t nx = pg->next[g];
    if (nx == UINT32_MAX && mode == M_NOISY_INF)
        return 0; /* known never to come back: first out, as in Belady */
    double d = nx == UINT32_MAX ? (double)pg->nreq : (double)(nx - req);
    double pred = ((double)req + d * exp(bp->sigma * z)) * 256.0;
    /* farther predicted use = smaller key = evicted first (cap: no overflow) */
    return UINT64_MAX - (uint64_t)(pred < 1e18 ? pred : 1e18);
}

static double bound_hit(const pages *pg, uint64_t cap_pages, int mode,
                        const bound_params *bp)
{
    bound_ctx bc = {mode, bp};
    return (double)model_run_keyed(pg, cap_pages, bound_key, &bc) /
           (double)pg->prompt_tokens;
}

/* Phi^-1 by bisection on erfc: 60 halvings of [-10, 10] are exact enough
 * for a noise scale and keep the bench free of a numerical library. */
static double probit(double p)
{
    double lo = -10, hi = 10;
    for (int k = 0; k < 60; k++) {
        double mid = (lo + hi) / 2;
        if (0.5 * erfc(-mid / sqrt(2.0)) < p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

static double noise_for_auc(double auc)
{
    return auc >= 1.0 ? 0.0 : 1.0 / (sqrt(2.0) * probit(auc));
}

typedef struct scored {
    double v;
    uint8_t y;
} scored;

static int scored_cmp(const void *a, const void *b)
{
    double x = ((const scored *)a)->v, y = ((const scored *)b)->v;
    return (x > y) - (x < y);
}

/* Rank-sum AUC of n scored samples (ties count half); sorts sc. tpr (may
 * be NULL) gets the true-positive rate at false-positive rates 0.1 % and
 * 1 %: cutting from the top score down, whole tie groups only (a bin is
 * protected or not), the last cut within the rate -- the low-FPR corner
 * is what a small cache's protection lives on (table (b)). */
static const double tpr_fpr[2] = {0.001, 0.01};
static double auc_of(scored *sc, size_t n, double *tpr)
{
    qsort(sc, n, sizeof *sc, scored_cmp);
    double P = 0, N = 0, negs = 0, sum = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double p = 0, q = 0;
        while (j < n && sc[j].v == sc[i].v) {
            p += sc[j].y;
            q += !sc[j].y;
            j++;
        }
        sum += p * (negs + q / 2);
        negs += q;
        P += p;
        N += q;
        i = j;
    }
    for (int f = 0; tpr != NULL && f < 2; f++) {
        double tp = 0, fp = 0;
        tpr[f] = 0;
        for (size_t j = n; j > 0;) {
            size_t i = j;
            double p = 0, q = 0;
            while (i > 0 && sc[i - 1].v == sc[j - 1].v) {
                p += sc[i - 1].y;
                q += !sc[i - 1].y;
                i--;
            }
            if (fp + q > tpr_fpr[f] * N)
                break;
            tp += p;
            fp += q;
            j = i;
        }
        tpr[f] = P > 0 ? tp / P : 0;
    }
    return P > 0 && N > 0 ? sum / (P * N) : 0.5;
}

/* The AUC of the classifier scores M_CLASS draws, over every page access. */
static double class_scores_auc(const pages *pg, uint32_t h, double s)
{
    uint64_t n = pg->off[pg->nreq];
    scored *sc = evict_xmalloc(n * sizeof *sc);
    for (size_t i = 0; i < pg->nreq; i++)
        for (uint64_t g = pg->off[i]; g < pg->off[i + 1]; g++) {
            sc[g].y = (uint8_t)bound_label(pg, g, i, h);
            sc[g].v = sc[g].y + s * gauss_of(g);
        }
    double a = auc_of(sc, n, NULL);
    free(sc);
    return a;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint32_t log2_bin(uint64_t v, uint32_t max)
{
    uint32_t b = 0;
    while (v > 0 && b < max) {
        v >>= 1;
        b++;
    }
    return b;
}

/* Online features of page access g (no future): what a tree policy could
 * see at that moment. All are measured before the access updates them. */
enum { F_CLASS, F_CLASS_AGE, F_DEPTH, F_CONT, F_NEW, F_HITS, F_AGE, F_TREE,
       F_TREE_AGE, NFEAT };
static const char *const feat_name[NFEAT] = {
    "learned classes (continuation depth x new pages, 20)",
    "learned classes x age (what the learned policy ranks by)",
    "page depth (log2 bins)",
    "continuation count: distinct next pages seen (log2)",
    "node pages: pages the request added (log2)",
    "subtree hits: earlier requests through the page (log2)",
    "age: requests since the page's last use (log2; LRU's signal)",
    "tree: depth x continuations x node pages x subtree hits",
    "tree x age",
};
#define FEAT_BINS 65536u

/* Per feature, the AUC of ranking samples by their bin's return share on
 * this same trace (in-sample: an optimistic figure for a lookup table or
 * tree on that feature, the best such a table can rank). all: every page
 * access; ends: last pages of requests with two pages or more (the leaf
 * ends the learned policy classifies; at H = 600 its class AUC is the one
 * --explain prints); rest: every access but those of a request's first
 * page (one shared system prompt here, used by every request, which every
 * policy keeps: its easy positives would otherwise fill the low-FPR
 * corner). The TPRs are over the rest. */
static void feature_aucs(const pages *pg, uint32_t h, double (*auc)[3],
                         double (*tpr)[2], double *const *score_out)
{
    uint64_t total = pg->off[pg->nreq], cap = 1;
    while (cap < 2 * total + 2)
        cap <<= 1;
    uint64_t *key = calloc(cap, sizeof *key);
    uint32_t *hits = calloc(cap, sizeof *hits), *kids = calloc(cap, sizeof *kids);
    uint32_t *last = calloc(cap, sizeof *last);
    /* ends: id -> continuation depth of the request that ended there */
    uint64_t *ekey = calloc(cap, sizeof *ekey);
    uint8_t *edepth = calloc(cap, 1);
    uint32_t *bin = evict_xmalloc(total * NFEAT * sizeof *bin);
    uint8_t *lab = evict_xmalloc(total ? total : 1), *isend = calloc(total + 1, 1);
    if (!key || !hits || !kids || !last || !ekey || !edepth || !isend) {
        fprintf(stderr, "evict_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < pg->nreq; i++) {
        uint64_t o = pg->off[i], n = pg->off[i + 1] - o, base = 1, seen = 0;
        uint32_t depth = 0;
        /* the learned policy's class, as explain_classes computes it */
        for (uint64_t j = n; n >= 2 && j-- > 1;) {
            uint64_t s = slot_of(ekey, cap, pg->ids[o + j]);
            if (ekey[s] == pg->ids[o + j]) {
                depth = edepth[s] + 1u;
                base = j + 1;
                break;
            }
        }
        uint64_t np = n - base;
        uint32_t sz = np <= 1 ? 0 : np <= 2 ? 1 : np <= 4 ? 2 : np <= 8 ? 3 : 4;
        uint32_t cls = (depth < 3 ? depth : 3) * 5 + sz;
        for (uint64_t j = 0; j < n; j++)
            seen += key[slot_of(key, cap, pg->ids[o + j])] == pg->ids[o + j];
        uint64_t added = n - seen;
        for (uint64_t j = 0; j < n; j++) {
            uint64_t g = o + j, s = slot_of(key, cap, pg->ids[g]);
            int known = key[s] == pg->ids[g];
            uint32_t *b = bin + g * NFEAT;
            b[F_CLASS] = cls;
            b[F_DEPTH] = log2_bin(j + 1, 15);
            b[F_CONT] = log2_bin(known ? kids[s] : 0, 15);
            b[F_NEW] = log2_bin(added, 15);
            b[F_HITS] = log2_bin(known ? hits[s] : 0, 15);
            b[F_AGE] = known ? log2_bin(i - last[s], 15) + 1 : 0;
            b[F_CLASS_AGE] = cls << 5 | b[F_AGE];
            /* bins cut to 4 bits each so the product stays a small table */
            b[F_TREE] = (b[F_DEPTH] < 15 ? b[F_DEPTH] : 15) << 12 |
                        (b[F_CONT] < 15 ? b[F_CONT] : 15) << 8 |
                        (b[F_NEW] < 15 ? b[F_NEW] : 15) << 4 |
                        (b[F_HITS] < 15 ? b[F_HITS] : 15);
            b[F_TREE_AGE] = ((b[F_DEPTH] < 7 ? b[F_DEPTH] : 7) << 13 |
                             (b[F_CONT] < 3 ? b[F_CONT] : 3) << 11 |
                             (b[F_NEW] < 7 ? b[F_NEW] : 7) << 8 |
                             (b[F_HITS] < 15 ? b[F_HITS] : 15) << 4 |
                             (b[F_AGE] < 15 ? b[F_AGE] : 15)) % FEAT_BINS;
            lab[g] = (uint8_t)bound_label(pg, g, i, h);
            /* update after recording: a new page is a new continuation of
             * the page before it (chained ids have one parent) */
            if (!known && j > 0)
                kids[slot_of(key, cap, pg->ids[g - 1])]++;
            key[s] = pg->ids[g];
            hits[s]++;
            last[s] = (uint32_t)i;
        }
        if (n >= 2) {
            isend[o + n - 1] = 1;
            uint64_t s = slot_of(ekey, cap, pg->ids[o + n - 1]);
            ekey[s] = pg->ids[o + n - 1];
            edepth[s] = (uint8_t)(depth < 255 ? depth : 255);
        }
    }
    double *tot = evict_xmalloc(FEAT_BINS * sizeof *tot);
    double *pos = evict_xmalloc(FEAT_BINS * sizeof *pos);
    scored *sc = evict_xmalloc((total ? total : 1) * sizeof *sc);
    for (int f = 0; f < NFEAT; f++)
        for (int e = 0; e < 3; e++) {
            memset(tot, 0, FEAT_BINS * sizeof *tot);
            memset(pos, 0, FEAT_BINS * sizeof *pos);
            for (uint64_t g = 0; g < total; g++)
                if (e == 0 || (e == 1 && isend[g]) ||
                    (e == 2 && pg->kind[g] != KIND_FIRST)) {
                    tot[bin[g * NFEAT + f]] += 1;
                    pos[bin[g * NFEAT + f]] += lab[g];
                }
            size_t n = 0;
            for (uint64_t g = 0; g < total; g++)
                if (e == 0 || (e == 1 && isend[g]) ||
                    (e == 2 && pg->kind[g] != KIND_FIRST)) {
                    uint32_t b = bin[g * NFEAT + f];
                    /* share, then bin: equal shares of different bins
                     * stay distinct values only through the share */
                    sc[n].v = pos[b] / tot[b];
                    sc[n++].y = lab[g];
                }
            auc[f][e] = auc_of(sc, n, e == 2 ? tpr[f] : NULL);
            /* every access's bin share: the in-sample classifier that
             * the page model replays for the last rows of table (c) */
            for (uint64_t g = 0; e == 0 && score_out[f] != NULL && g < total; g++) {
                uint32_t b = bin[g * NFEAT + f];
                score_out[f][g] = pos[b] / tot[b];
            }
        }
    free(sc);
    free(tot);
    free(pos);
    free(bin);
    free(lab);
    free(isend);
    free(key);
    free(hits);
    free(kids);
    free(last);
    free(ekey);
    free(edepth);
}

/* Best hit rate of M_CLASS over a grid of thresholds: the midpoint and the
 * thresholds that give false-positive rates 10 % .. 0.01 % on the negatives'
 * N(0, s^2) scores. *fpr gets the best one's rate (0.5 marks the
 * midpoint, whose rate is Phi(-0.5 / s)). */
static const double fprs[] = {0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4};
static double class_best(const pages *pg, uint64_t cap_pages, uint32_t h,
                         double s, double *fpr)
{
    bound_params bp = {0, s, 0.5, h, NULL};
    double best = bound_hit(pg, cap_pages, M_CLASS, &bp);
    *fpr = 0.5;
    for (size_t k = 0; s > 0 && k < sizeof fprs / sizeof fprs[0]; k++) {
        bp.thr = s * probit(1 - fprs[k]);
        double hr = bound_hit(pg, cap_pages, M_CLASS, &bp);
        if (hr > best) {
            best = hr;
            *fpr = fprs[k];
        }
    }
    return best;
}

static void ratio_cols(double hit, double lru, double bel)
{
    printf(" %7.2f%% %6.2fx %6.2fx %6.1f%%", 100 * hit, lru > 0 ? hit / lru : 0.0,
           bel > 0 ? hit / bel : 0.0,
           bel > lru ? 100 * (hit - lru) / (bel - lru) : 0.0);
}

#define BOUND_CAPS 2
static const double sigmas[] = {0, 0.5, 1, 1.5, 2, 4};
static const double aucs[] = {1.0, 0.99, 0.95, 0.90, 0.80, 0.70};
static const uint32_t horizons[] = {100, 200, 400, 600, 800, 1600, 3200, H_INF};
#define NSIG (sizeof sigmas / sizeof sigmas[0])
#define NAUC (sizeof aucs / sizeof aucs[0])
#define NH (sizeof horizons / sizeof horizons[0])

/* A horizon as the tables name it: "ever" or its number of requests. */
static const char *h_name(char *buf, size_t cap, uint32_t h)
{
    if (h == H_INF)
        return "ever";
    snprintf(buf, cap, "%u", h);
    return buf;
}

static void hdr_caps(const uint64_t *caps, int ncaps, const char *lead)
{
    printf("%s", lead);
    for (int c = 0; c < ncaps; c++) {
        char t[64];
        snprintf(t, sizeof t, "---- %llu tokens ----", (unsigned long long)caps[c]);
        printf("  %-31s", t);
    }
    printf("\n");
}

/* Runs parts (a), (b), (c) on the trace; prints one table per part. */
void bound_tables(const rkv_workload *wl, const uint64_t *caps, int ncaps)
{
    pages pg;
    pages_build(&pg, wl);
    if (ncaps > BOUND_CAPS)
        ncaps = BOUND_CAPS;
    double lru[BOUND_CAPS], bel[BOUND_CAPS], ever[BOUND_CAPS], learned[BOUND_CAPS],
        target[BOUND_CAPS];
    uint64_t cp[BOUND_CAPS];
    printf("\n--bound: conversation trace, %zu requests, %llu page accesses, "
           "page %d, file order\n", pg.nreq,
           (unsigned long long)pg.off[pg.nreq], PAGE);
    printf("%14s %9s %9s %9s %9s %9s\n", "capacity", "lru", "belady",
           "ever-lru", "learned", "target");
    for (int c = 0; c < ncaps; c++) {
        double us;
        cp[c] = caps[c] / PAGE;
        lru[c] = (double)model_run(&pg, cp[c], M_LRU, NULL) / (double)pg.prompt_tokens;
        bel[c] = (double)model_run(&pg, cp[c], M_BELADY, NULL) / (double)pg.prompt_tokens;
        ever[c] = (double)model_run(&pg, cp[c], M_EVER, NULL) / (double)pg.prompt_tokens;
        learned[c] = library_run(wl, caps[c], RKV_EVICT_LEARNED, &us, NULL);
        /* the target: half the LRU -> Belady gap, this run's figures */
        target[c] = lru[c] + (bel[c] - lru[c]) / 2;
        printf("%14llu %8.2f%% %8.2f%% %8.2f%% %8.2f%% %8.2f%%\n",
               (unsigned long long)caps[c], 100 * lru[c], 100 * bel[c],
               100 * ever[c], 100 * learned[c], 100 * target[c]);
    }
    printf("columns per capacity: hit rate, x LRU, x Belady, LRU->Belady gap closed\n");

    /* (a) */
    printf("\n(a) noisy Belady: predicted next use = now + (next - now) * "
           "exp(sigma Z), Z ~ N(0,1) per access, seed %u\n", BOUND_SEED);
    printf("    all: \"never used again\" = one trace length away, noisy like "
           "any time; whether: \"never\" kept exact, only return times noisy\n");
    hdr_caps(caps, ncaps, "                  ");
    for (int v = 0; v < 2; v++) {
        int mode = v ? M_NOISY_INF : M_NOISY;
        for (size_t k = 0; k < NSIG; k++) {
            bound_params bp = {sigmas[k], 0, 0, 0, NULL};
            printf("%-8s sigma %3.1f", v ? "whether" : "all", sigmas[k]);
            for (int c = 0; c < ncaps; c++)
                ratio_cols(bound_hit(&pg, cp[c], mode, &bp), lru[c], bel[c]);
            printf("\n");
        }
    }
    /* Largest sigma that still reaches the target (bisection; hit rate
     * falls with sigma on the rows above, checked by eye, not assumed). */
    for (int v = 0; v < 2; v++) {
        printf("%-8s largest sigma reaching the target:", v ? "whether" : "all");
        for (int c = 0; c < ncaps; c++) {
            double lo = 0, hi = 4;
            bound_params bp = {hi, 0, 0, 0, NULL};
            if (bound_hit(&pg, cp[c], v ? M_NOISY_INF : M_NOISY, &bp) >= target[c]) {
                printf("  %llu: > 4", (unsigned long long)caps[c]);
                continue;
            }
            for (int it = 0; it < 10; it++) {
                bp.sigma = (lo + hi) / 2;
                if (bound_hit(&pg, cp[c], v ? M_NOISY_INF : M_NOISY, &bp) >= target[c])
                    lo = bp.sigma;
                else
                    hi = bp.sigma;
            }
            printf("  %llu: %.2f", (unsigned long long)caps[c], lo);
        }
        printf("\n");
    }

    /* (b): first the horizon, with a perfect classifier (AUC 1) */
    printf("\n(b) classifier oracle: label \"used again within H requests\", "
           "score = label + s Z (s from the AUC), predicted-not-reused first, "
           "then LRU\n");
    hdr_caps(caps, ncaps, "                ");
    uint32_t best_h[BOUND_CAPS] = {0};
    double best_hit[BOUND_CAPS] = {0};
    for (size_t k = 0; k < NH; k++) {
        bound_params bp = {0, 0, 0.5, horizons[k], NULL};
        if (horizons[k] == H_INF)
            printf("AUC 1   H  ever ");
        else
            printf("AUC 1   H %5u ", horizons[k]);
        for (int c = 0; c < ncaps; c++) {
            double hr = bound_hit(&pg, cp[c], M_CLASS, &bp);
            ratio_cols(hr, lru[c], bel[c]);
            if (hr > best_hit[c]) {
                best_hit[c] = hr;
                best_h[c] = horizons[k];
            }
        }
        printf("\n");
    }
    for (int c = 0; c < ncaps; c++) {
        char hb[16];
        const char *t = h_name(hb, sizeof hb, best_h[c]);
        printf("\ncapacity %llu, best H %s: AUC asked [AUC of the scores drawn]; "
               "threshold: midpoint | best false-positive rate of the grid\n",
               (unsigned long long)caps[c], t);
        printf("%18s  %-31s  %-31s\n", "", "---- midpoint ----", "---- best threshold ----");
        for (size_t k = 0; k < NAUC; k++) {
            double s = noise_for_auc(aucs[k]), fpr;
            bound_params bp = {0, s, 0.5, best_h[c], NULL};
            printf("AUC %5.3f [%5.3f] ", aucs[k], class_scores_auc(&pg, best_h[c], s));
            ratio_cols(bound_hit(&pg, cp[c], M_CLASS, &bp), lru[c], bel[c]);
            ratio_cols(class_best(&pg, cp[c], best_h[c], s, &fpr), lru[c], bel[c]);
            if (fpr == 0.5)
                printf("  threshold: midpoint\n");
            else
                printf("  threshold: FPR %g\n", fpr);
        }
        /* Lowest AUC that reaches the target (bisection over [0.5, 1];
         * hit rate rises with AUC on the rows above, checked, not assumed) */
        for (int v = 0; v < 2; v++) {
            double fpr;
            printf("  %-14s lowest AUC reaching the target %.2f%%: ",
                   v ? "best threshold" : "midpoint", 100 * target[c]);
            if (best_hit[c] < target[c]) {
                printf("not reached at AUC 1\n");
                continue;
            }
            double lo = 0.5, hi = 1.0, hi_fpr = 0.5;
            for (int it = 0; it < 12; it++) {
                double s = noise_for_auc((lo + hi) / 2);
                bound_params bp = {0, s, 0.5, best_h[c], NULL};
                fpr = 0.5;
                double hr = v ? class_best(&pg, cp[c], best_h[c], s, &fpr)
                              : bound_hit(&pg, cp[c], M_CLASS, &bp);
                if (hr >= target[c]) {
                    hi = (lo + hi) / 2;
                    hi_fpr = fpr;
                } else {
                    lo = (lo + hi) / 2;
                }
            }
            /* the operating point: with scores label + s Z, a threshold
             * at false-positive rate f keeps a share Phi(1/s - Phi^-1(1-f))
             * of the returning pages */
            double s = noise_for_auc(hi);
            double thr = hi_fpr == 0.5 ? 0.5 : s * probit(1 - hi_fpr);
            double fp = s > 0 ? 0.5 * erfc(thr / s / sqrt(2.0)) : 0;
            double tpr = s > 0 ? 0.5 * erfc((thr - 1) / s / sqrt(2.0)) : 1;
            printf("%.4f (FPR %.4f, TPR %.3f)\n", hi, fp, tpr);
        }
    }

    /* (c) */
    uint32_t hs[BOUND_CAPS + 1];
    int nhs = 0;
    hs[nhs++] = 600;
    for (int c = 0; c < ncaps; c++) {
        int dup = 0;
        for (int k = 0; k < nhs; k++)
            dup |= hs[k] == best_h[c];
        if (!dup)
            hs[nhs++] = best_h[c];
    }
    printf("\n(c) AUC of online features for the same label (in-sample: bins "
           "ranked by their return share on this trace)\n");
    printf("%-64s", "feature");
    for (int k = 0; k < nhs; k++) {
        char hb[16], t[48];
        snprintf(t, sizeof t, "H %s: AUC all/ends/rest",
                 h_name(hb, sizeof hb, hs[k]));
        printf(" %-17s", t);
    }
    printf("    rest: TPR at FPR 0.1%%/1%%, same H order\n");
    double au[BOUND_CAPS + 1][NFEAT][3];
    double tp[BOUND_CAPS + 1][NFEAT][2];
    double *none[NFEAT] = {NULL};
    for (int k = 0; k < nhs; k++)
        feature_aucs(&pg, hs[k], au[k], tp[k], none);
    for (int f = 0; f < NFEAT; f++) {
        printf("%-64s", feat_name[f]);
        for (int k = 0; k < nhs; k++)
            printf(" %5.3f/%5.3f/%5.3f", au[k][f][0], au[k][f][1], au[k][f][2]);
        printf("   ");
        for (int k = 0; k < nhs; k++)
            printf(" %6.3f/%5.3f", tp[k][f][0], tp[k][f][1]);
        printf("\n");
    }

    /* The direct test: replay the in-sample feature classifiers at each
     * capacity's best H (bins' return share as the score, pages above a
     * threshold protected, LRU inside; the best of a protected-share grid).
     * In-sample, so optimistic: the shares are this trace's own labels. */
    static const int rf[] = {F_CLASS, F_CLASS_AGE, F_TREE, F_TREE_AGE};
    static const double qs[] = {0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7};
    uint64_t total = pg.off[pg.nreq];
    double *sc[NFEAT] = {NULL}, *sorted = evict_xmalloc(total * sizeof *sorted);
    for (size_t r = 0; r < sizeof rf / sizeof rf[0]; r++)
        sc[rf[r]] = evict_xmalloc(total * sizeof *sc[rf[r]]);
    printf("\nreplayed as classifiers at each capacity's best H (protected: "
           "bin share above the threshold; best protected share of accesses)\n");
    double hit[BOUND_CAPS][NFEAT], share[BOUND_CAPS][NFEAT];
    for (int c = 0; c < ncaps; c++) {
        double a2[NFEAT][3], t2[NFEAT][2];
        feature_aucs(&pg, best_h[c], a2, t2, sc);
        for (size_t r = 0; r < sizeof rf / sizeof rf[0]; r++) {
            int f = rf[r];
            memcpy(sorted, sc[f], total * sizeof *sorted);
            qsort(sorted, total, sizeof *sorted, dbl_cmp);
            hit[c][f] = -1;
            for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
                bound_params bp = {0, 0, sorted[(size_t)((1 - qs[k]) * (double)(total - 1))],
                                   best_h[c], sc[f]};
                double hr = bound_hit(&pg, cp[c], M_CLASS, &bp);
                if (hr > hit[c][f]) {
                    hit[c][f] = hr;
                    share[c][f] = qs[k];
                }
            }
        }
    }
    hdr_caps(caps, ncaps, "                                                                ");
    for (size_t r = 0; r < sizeof rf / sizeof rf[0]; r++) {
        int f = rf[r];
        printf("%-64s", feat_name[f]);
        for (int c = 0; c < ncaps; c++)
            ratio_cols(hit[c][f], lru[c], bel[c]);
        printf("   protected");
        for (int c = 0; c < ncaps; c++)
            printf(" %.3f", share[c][f]);
        printf("\n");
    }
    for (int f = 0; f < NFEAT; f++)
        free(sc[f]);
    free(sorted);
    pages_free(&pg);
}
