/*
 * attention/kv_evict.c -- a request's own KV made smaller
 * (include/radixkv/kv_evict.h): StreamingLLM's page release, the per-key
 * attention weights H2O and SnapKV select by (the CPU reference), and the
 * compaction that drops unselected tokens.
 *
 * Invariant of every call: a page whose pool reference count is not 1 is
 * shared (the tree caches it, another request may read it) and is never
 * released, rewritten or shortened; every check runs before anything
 * changes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "attention/attn_internal.h"
#include "attention/cpu_softmax.h"
#include "common/status.h"

static rkv_status check_pages(const rkv_pool *pool, const char *fn,
                              const uint32_t *pages, uint32_t num_pages,
                              uint32_t kv_len)
{
    uint32_t P = pool->cfg.page_size;
    if (pages == NULL && num_pages > 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL pages", fn);
    if (kv_len > (uint64_t)num_pages * P || (uint64_t)kv_len + P <= (uint64_t)num_pages * P)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: kv_len %u does not end in the last of %u "
                             "pages of %u tokens", fn, kv_len, num_pages, P);
    for (uint32_t i = 0; i < num_pages; i++)
        if (pages[i] >= pool->cfg.num_blocks || pool->refcount[pages[i]] == 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: page %u (block %u) is not allocated", fn,
                                 i, pages[i]);
    return RKV_OK;
}

rkv_status rkv_kv_streaming_release(rkv_pool *pool, uint32_t *pages,
                                    uint32_t num_pages, uint32_t kv_len,
                                    uint32_t sink_tokens, uint32_t window_left,
                                    rkv_block_id filler, uint32_t *released_out)
{
    static const char fn[] = "rkv_kv_streaming_release";
    if (released_out != NULL)
        *released_out = 0;
    if (pool == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL pool", fn);
    rkv_status st = check_pages(pool, fn, pages, num_pages, kv_len);
    if (st != RKV_OK)
        return st;
    if (window_left == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: window_left 0 is full attention", fn);
    if (filler >= pool->cfg.num_blocks || pool->refcount[filler] == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: filler block %u is not allocated", fn, filler);
    const uint64_t P = pool->cfg.page_size;
    /* the query at kv_len - 1 and every later one see >= kv_len - 1 - W */
    uint64_t live = (uint64_t)kv_len > 1 + (uint64_t)window_left
                        ? kv_len - 1 - (uint64_t)window_left : 0;
    uint32_t released = 0;
    for (uint32_t i = 0; i < num_pages; i++) {
        uint64_t a = i * P, b = a + P; /* tokens [a, b) */
        if (a < sink_tokens || b > live || pages[i] == filler ||
            pool->refcount[pages[i]] != 1)
            continue;
        (void)rkv_pool_drop_ref(pool, pages[i]);
        pages[i] = filler;
        released++;
    }
    if (released_out != NULL)
        *released_out = released;
    return RKV_OK;
}

/* Adds the softmax probabilities of every (row, query head) to w. */
static rkv_status key_weights_cpu(const rkv_attn *a, const rkv_attn_geom *g,
                                  const rkv_attn_params *p, float scale,
                                  const rkv_attn_rows *rows, const void *q,
                                  float *w, const char *fn)
{
    void *kb, *vb;
    rkv_attn_strides kst;
    rkv_status st = rkv_pool_layer_kv(rkv_attn_pool(a), p->layer, &kb, &vb);
    if (st == RKV_OK)
        st = rkv_pool_kv_strides(rkv_attn_pool(a), &kst.block, &kst.token,
                                 &kst.head);
    if (st != RKV_OK)
        return st;
    const uint32_t P = g->page_size, Hkv = g->num_kv_heads, D = g->head_dim;
    const uint32_t Hq = g->num_qo_heads, G = Hq / Hkv;
    float *mem = malloc(((size_t)rows->max_len + 2 * D) * sizeof(float));
    if (mem == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    float *sc = mem, *kv = sc + rows->max_len, *qf = kv + D;
    const uint32_t *pages = rows->kv_indices; /* one request */
    for (uint32_t r = 0; r < rows->num_rows; r++) {
        const uint32_t len = rows->row_len[r], qpos = len - 1;
        for (uint32_t hq = 0; hq < Hq; hq++) {
            const uint32_t h = hq / G;
            for (uint32_t d = 0; d < D; d++)
                qf[d] = rkv_attn_cpu_load(g->dtype, q, ((size_t)r * Hq + hq) * D + d);
            for (uint32_t t = 0; t < len; t++) {
                int vis = p->window_left == 0 || t < p->num_sink_tokens ||
                          (uint64_t)t + p->window_left >= qpos;
                if (!vis) {
                    sc[t] = -INFINITY;
                    continue;
                }
                rkv_attn_cpu_load_kv(g, kb, pages[t / P] * kst.block, &kst,
                                     t % P, h, kv);
                float s = 0.0f;
                for (uint32_t d = 0; d < D; d++)
                    s += qf[d] * kv[d];
                sc[t] = s * scale;
            }
            (void)rkv_attn_cpu_softmax(sc, len);
            for (uint32_t t = 0; t < len; t++)
                w[t] += sc[t];
        }
    }
    free(mem);
    return RKV_OK;
}

rkv_status rkv_attn_key_weights(rkv_attn *attn, const rkv_attn_params *p,
                                const rkv_paged_kv *kv, uint32_t num_rows,
                                const void *q, float *weights)
{
    static const char fn[] = "rkv_attn_key_weights";
    if (attn == NULL || q == NULL || weights == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             attn == NULL ? "attn" : q == NULL ? "q" : "weights");
    float scale;
    rkv_status st = rkv_attn_check_params(attn, fn, p, &scale);
    if (st != RKV_OK)
        return st;
    if (kv == NULL || kv->num_reqs != 1)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: one request's table", fn);
    if (num_rows == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: num_rows 0", fn);
    if (rkv_attn_is_cuda(attn))
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: not on a CUDA pool yet (the device kernel is "
                             "not in the backend table)", fn);
    const uint32_t qo[2] = {0, num_rows};
    rkv_attn_rows rows;
    uint32_t *mem;
    if ((st = rkv_attn_lower_rows(attn, fn, qo, kv, &rows, &mem)) != RKV_OK)
        return st;
    rkv_attn_geom g = rkv_attn_geom_for(attn, p->num_qo_heads);
    st = key_weights_cpu(attn, &g, p, scale, &rows, q, weights, fn);
    free(mem);
    return st;
}

/* Moves token `from` to `to` (within the request's pages) in every layer's
 * K and V: each head's codes (and, quantized, its scales). */
static void move_token(const rkv_attn_geom *g, const rkv_attn_strides *kst,
                       char *const *seg, uint32_t nseg, const uint32_t *pages,
                       uint32_t from, uint32_t to)
{
    const uint32_t P = g->page_size;
    const int quant = rkv_dtype_quantized(g->kv_dtype);
    size_t code = g->kv_dtype == RKV_DTYPE_INT4 ? g->head_dim / 2
                  : quant ? g->head_dim
                          : g->head_dim * rkv_pool_dtype_size(g->kv_dtype);
    size_t sbytes = (size_t)g->num_kv_heads * g->nsc * sizeof(float);
    size_t fb = pages[from / P] * kst->block, tb = pages[to / P] * kst->block;
    uint32_t ft = from % P, tt = to % P;
    for (uint32_t s = 0; s < nseg; s++) {
        for (uint32_t h = 0; h < g->num_kv_heads; h++)
            memcpy(seg[s] + tb + tt * kst->token + h * kst->head,
                   seg[s] + fb + ft * kst->token + h * kst->head, code);
        if (quant)
            memcpy(seg[s] + tb + g->scale_off + tt * sbytes,
                   seg[s] + fb + g->scale_off + ft * sbytes, sbytes);
    }
}

rkv_status rkv_kv_compact(rkv_attn *attn, uint32_t *pages, uint32_t *num_pages,
                          uint32_t *kv_len, const uint8_t *keep, float *carry)
{
    static const char fn[] = "rkv_kv_compact";
    if (attn == NULL || num_pages == NULL || kv_len == NULL || keep == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    rkv_pool *pool = rkv_attn_pool(attn);
    const rkv_pool_config *cfg = rkv_attn_pool_config(attn);
    rkv_status st = check_pages(pool, fn, pages, *num_pages, *kv_len);
    if (st != RKV_OK)
        return st;
    if (cfg->layout == RKV_LAYOUT_MLA)
        return rkv_set_error(RKV_ERR_UNSUPPORTED, "%s: an MLA pool", fn);
    if (rkv_attn_is_cuda(attn))
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: not on a CUDA pool yet", fn);
    const uint32_t P = cfg->page_size, n = *kv_len, np = *num_pages;
    uint32_t first = n; /* first dropped token */
    for (uint32_t j = 0; j < n && first == n; j++)
        if (!keep[j])
            first = j;
    if (first == n)
        return RKV_OK;
    for (uint32_t i = 0; i < np; i++) {
        int own = pool->refcount[pages[i]] == 1;
        for (uint32_t j = i * P; !own && j < (i + 1) * P && j < n; j++)
            if (!keep[j])
                return rkv_set_error(RKV_ERR_INVALID_ARG,
                                     "%s: token %u of page %u is dropped, but "
                                     "the page is shared", fn, j, i);
        if (!own && i >= first / P)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: page %u is shared but follows the first "
                                 "dropped token %u", fn, i, first);
        for (uint32_t k = 0; k < i; k++)
            if (pages[k] == pages[i] && i >= first / P)
                return rkv_set_error(RKV_ERR_INVALID_ARG,
                                     "%s: block %u is listed twice", fn, pages[i]);
    }
    rkv_attn_geom g = rkv_attn_geom_for(attn, 0);
    rkv_attn_strides kst;
    char **seg = malloc(2 * (size_t)cfg->num_layers * sizeof *seg);
    if (seg == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    st = rkv_pool_kv_strides(pool, &kst.block, &kst.token, &kst.head);
    for (uint32_t l = 0; st == RKV_OK && l < cfg->num_layers; l++) {
        void *k, *v;
        st = rkv_pool_layer_kv(pool, l, &k, &v);
        seg[2 * l] = k;
        seg[2 * l + 1] = v;
    }
    if (st != RKV_OK) {
        free(seg);
        return st;
    }
    uint32_t d = first;
    for (uint32_t j = first + 1; j < n; j++) {
        if (!keep[j])
            continue;
        move_token(&g, &kst, seg, 2 * cfg->num_layers, pages, j, d);
        if (carry != NULL)
            carry[d] = carry[j];
        d++;
    }
    free(seg);
    uint32_t keep_pages = d == 0 ? 1 : (d + P - 1) / P; /* a table keeps one */
    for (uint32_t i = keep_pages; i < np; i++)
        (void)rkv_pool_drop_ref(pool, pages[i]);
    *num_pages = keep_pages;
    *kv_len = d;
    return RKV_OK;
}
