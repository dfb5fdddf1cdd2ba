/*
 * attention/attn.c -- the rkv_attn context and the front end of every
 * attention operation: full validation, lowering to rows (see
 * attn_internal.h), and dispatch to the CPU reference (host pool) or the
 * CUDA backend (CUDA pool), reached through the pool's backend table
 * (common/cuda_backend.h): this file has no CUDA dependency.
 *
 * Invariants: a call validates everything (params, block tables, qo
 * lengths, slots) and allocates its host temporaries before it writes a
 * byte of output or KV, so a failing call changes nothing. The CUDA
 * backend's context is created on first use on a CUDA pool and never on a
 * host pool.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "attention/attn_internal.h"
#include "attention/lse_merge.h"
#include "common/cuda_backend.h"
#include "common/status.h"

struct rkv_attn {
    rkv_pool *pool;
    rkv_pool_config cfg;
    void *stream;
    const rkv_cuda_backend *be; /* the pool's backend (CUDA pool only) */
    rkv_attn_cuda *cuda;        /* the backend's context, made on first use */
    size_t cascade_budget;      /* 0: the backend's default */
    rkv_mla_cuda *mla;          /* the backend's MLA context (mla.c), or NULL */
};

rkv_status rkv_attn_create(rkv_pool *pool, rkv_attn **out)
{
    if (pool == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_attn_create: NULL argument");
    rkv_pool_config cfg;
    rkv_status st = rkv_pool_get_config(pool, &cfg);
    if (st != RKV_OK)
        return st;
    if (cfg.num_layers == 0)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_attn_create: pool is metadata-only (num_layers 0)");
    rkv_dtype act = rkv_dtype_quantized(cfg.dtype) ? cfg.act_dtype : cfg.dtype;
    if (rkv_pool_dtype_size(act) == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_attn_create: bad dtype %d",
                             (int)act);
    rkv_attn *a = calloc(1, sizeof *a);
    if (a == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_attn_create: out of memory");
    a->pool = pool;
    a->cfg = cfg;
    a->be = rkv_pool_cuda_backend(pool);
    *out = a;
    return RKV_OK;
}

void rkv_attn_destroy(rkv_attn *attn)
{
    if (attn == NULL)
        return;
    if (attn->cuda != NULL)
        attn->be->attn_destroy(attn->cuda);
    if (attn->mla != NULL)
        attn->be->mla_destroy(attn->mla);
    free(attn);
}

static int on_cuda(const rkv_attn *a)
{
    return a->cfg.device == RKV_DEVICE_CUDA;
}

/* Creates the backend's context on first use (a CUDA pool always has a
 * backend: rkv_pool_create loaded it). */
static rkv_status need_cuda(rkv_attn *a, rkv_attn_cuda **out)
{
    if (a->cuda == NULL) {
        const rkv_cuda_backend *be = a->be;
        rkv_attn_cuda *c = NULL;
        rkv_status st = rkv_cuda_status(be, be->attn_create(a->cfg.cuda_device, &c));
        if (st != RKV_OK)
            return st;
        st = rkv_cuda_status(be, be->attn_set_stream(c, a->stream));
        if (st != RKV_OK) {
            be->attn_destroy(c);
            return st;
        }
        be->attn_set_cascade_budget(c, a->cascade_budget);
        a->cuda = c;
    }
    *out = a->cuda;
    return RKV_OK;
}

rkv_status rkv_attn_set_stream(rkv_attn *attn, void *cuda_stream)
{
    if (attn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_attn_set_stream: NULL attn");
    if (!on_cuda(attn)) {
        if (cuda_stream != NULL)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "rkv_attn_set_stream: a host pool takes no stream");
        return RKV_OK;
    }
    if (attn->cuda != NULL) {
        rkv_status st = rkv_cuda_status(attn->be,
                                        attn->be->attn_set_stream(attn->cuda, cuda_stream));
        if (st != RKV_OK)
            return st;
    }
    attn->stream = cuda_stream;
    return RKV_OK;
}

void rkv_attn_set_cascade_budget(rkv_attn *attn, size_t bytes)
{
    attn->cascade_budget = bytes;
    if (attn->cuda != NULL)
        attn->be->attn_set_cascade_budget(attn->cuda, bytes);
}

rkv_status rkv_attn_sync(rkv_attn *attn)
{
    if (attn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_attn_sync: NULL attn");
    if (attn->cuda != NULL)
        return rkv_cuda_status(attn->be, attn->be->attn_sync(attn->cuda));
    return RKV_OK;
}

rkv_status rkv_attn_check(const rkv_attn *attn)
{
    if (attn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_attn_check: NULL attn");
    rkv_pool_config cfg;
    if (rkv_pool_get_config(attn->pool, &cfg) != RKV_OK ||
        memcmp(&cfg, &attn->cfg, sizeof cfg) != 0)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_attn_check: pool configuration changed");
    if (!on_cuda(attn) && attn->stream != NULL)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_attn_check: host pool with a stream");
    if (!on_cuda(attn) && (attn->cuda != NULL || attn->be != NULL))
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_attn_check: CUDA backend on a host pool");
    if (on_cuda(attn) && attn->be != rkv_pool_cuda_backend(attn->pool))
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_attn_check: CUDA backend differs from the pool's");
    return RKV_OK;
}

/* ---- validation ----------------------------------------------------------- */

static rkv_attn_geom geom_of(const rkv_attn *a, uint32_t num_qo_heads)
{
    rkv_attn_geom g;
    g.num_blocks = a->cfg.num_blocks;
    g.page_size = a->cfg.page_size;
    g.num_kv_heads = a->cfg.num_kv_heads;
    g.head_dim = a->cfg.head_dim;
    g.num_qo_heads = num_qo_heads;
    g.kv_dtype = a->cfg.dtype;
    g.dtype = rkv_dtype_quantized(g.kv_dtype) ? a->cfg.act_dtype : g.kv_dtype;
    g.elem_size = rkv_pool_dtype_size(g.dtype);
    g.quant_group = g.kv_dtype == RKV_DTYPE_INT4 ? a->cfg.quant_group : a->cfg.head_dim;
    g.nsc = g.head_dim / g.quant_group;
    size_t code = g.kv_dtype == RKV_DTYPE_INT4 ? g.head_dim / 2 : g.head_dim;
    g.scale_off = (size_t)g.page_size * g.num_kv_heads * code;
    g.window = 0;
    g.sinks = 0;
    return g;
}

static rkv_status check_block(const rkv_attn *a, const char *fn, uint32_t id)
{
    if (id >= a->cfg.num_blocks)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %u out of range (%u blocks)",
                             fn, id, a->cfg.num_blocks);
    if (rkv_pool_refcount(a->pool, id) == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %u is not allocated", fn, id);
    return RKV_OK;
}

/* The K/V calls read K and V planes: an MLA pool has neither. */
static rkv_status mha_only(const rkv_attn *a, const char *fn)
{
    if (a->cfg.layout == RKV_LAYOUT_MLA)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: the pool has the MLA layout (no K/V planes): use "
                             "the rkv_attn_mla_* calls", fn);
    return RKV_OK;
}

static rkv_status check_params(const rkv_attn *a, const char *fn,
                               const rkv_attn_params *p, float *scale)
{
    rkv_status st = mha_only(a, fn);
    if (st != RKV_OK)
        return st;
    if (p == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL params", fn);
    if (p->layer >= a->cfg.num_layers)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: layer %u of %u", fn, p->layer,
                             a->cfg.num_layers);
    if (p->num_qo_heads == 0 || p->num_qo_heads % a->cfg.num_kv_heads != 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: num_qo_heads %u is not a positive multiple of %u kv heads",
                             fn, p->num_qo_heads, a->cfg.num_kv_heads);
    float s = p->sm_scale;
    if (s == 0.0f)
        s = 1.0f / sqrtf((float)a->cfg.head_dim);
    if (!(s > 0.0f) || !isfinite(s))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: sm_scale %g must be > 0", fn,
                             (double)p->sm_scale);
    *scale = s;
    return RKV_OK;
}

/* Validates a block table; kv_len[r] gets each request's KV length. */
static rkv_status check_table(const rkv_attn *a, const char *fn,
                              const rkv_paged_kv *kv, uint32_t *kv_len)
{
    if (kv == NULL || kv->indptr == NULL || kv->last_page_len == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL block table", fn);
    if (kv->num_reqs == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: num_reqs is 0", fn);
    if (kv->indptr[0] != 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: kv_indptr[0] = %u", fn, kv->indptr[0]);
    const uint32_t P = a->cfg.page_size;
    for (uint32_t r = 0; r < kv->num_reqs; r++) {
        uint32_t lo = kv->indptr[r], hi = kv->indptr[r + 1];
        if (hi <= lo)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: request %u has no pages (kv_indptr %u..%u)", fn, r,
                                 lo, hi);
        uint32_t last = kv->last_page_len[r];
        if (last < 1 || last > P)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: kv_last_page_len[%u] = %u not in 1..%u", fn, r, last,
                                 P);
        uint64_t len = (uint64_t)(hi - lo - 1) * P + last;
        if (len > UINT32_MAX / 2)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: request %u too long", fn, r);
        kv_len[r] = (uint32_t)len;
    }
    uint32_t total = kv->indptr[kv->num_reqs];
    if (total > 0 && kv->indices == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL kv_indices", fn);
    for (uint32_t i = 0; i < total; i++) {
        rkv_status st = check_block(a, fn, kv->indices[i]);
        if (st != RKV_OK)
            return st;
    }
    return RKV_OK;
}

/* ---- rows ----------------------------------------------------------------- */

typedef struct rows_buf {
    rkv_attn_rows rows;
    uint32_t *mem;   /* row_req, row_len, kv_len */
    uint32_t *kv_len;
} rows_buf;

static rkv_status rows_alloc(const char *fn, rows_buf *rb, uint32_t num_reqs,
                             uint32_t num_rows)
{
    size_t n = (size_t)num_reqs + 2 * (size_t)num_rows + 1;
    rb->mem = malloc(n * sizeof(uint32_t));
    if (rb->mem == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    rb->kv_len = rb->mem;
    memset(&rb->rows, 0, sizeof rb->rows);
    rb->rows.row_req = rb->mem + num_reqs;
    rb->rows.row_len = rb->mem + num_reqs + num_rows;
    return RKV_OK;
}

/* Validates the table and qo_indptr (NULL: decode, one row per request) and
 * fills the rows. */
static rkv_status build_rows(const rkv_attn *a, const char *fn,
                             const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                             rows_buf *rb)
{
    rb->mem = NULL;
    if (kv == NULL || kv->indptr == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL block table", fn);
    if (kv->num_reqs == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: num_reqs is 0", fn);
    uint32_t num_rows = kv->num_reqs;
    if (qo_indptr != NULL) {
        if (qo_indptr[0] != 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: qo_indptr[0] = %u", fn,
                                 qo_indptr[0]);
        for (uint32_t r = 0; r < kv->num_reqs; r++)
            if (qo_indptr[r + 1] < qo_indptr[r])
                return rkv_set_error(RKV_ERR_INVALID_ARG,
                                     "%s: qo_indptr decreases at request %u", fn, r);
        num_rows = qo_indptr[kv->num_reqs];
        if (num_rows == 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: no query rows", fn);
    }
    rkv_status st = rows_alloc(fn, rb, kv->num_reqs, num_rows);
    if (st != RKV_OK)
        return st;
    st = check_table(a, fn, kv, rb->kv_len);
    if (st != RKV_OK)
        goto fail;
    uint32_t *row_req = (uint32_t *)rb->rows.row_req;
    uint32_t *row_len = (uint32_t *)rb->rows.row_len;
    uint32_t max_len = 0;
    for (uint32_t r = 0; r < kv->num_reqs; r++) {
        uint32_t L = rb->kv_len[r];
        uint32_t lo = qo_indptr ? qo_indptr[r] : r;
        uint32_t qn = qo_indptr ? qo_indptr[r + 1] - lo : 1;
        if (qn > L) {
            st = rkv_set_error(RKV_ERR_INVALID_ARG,
                               "%s: request %u has %u query rows but %u KV tokens", fn, r,
                               qn, L);
            goto fail;
        }
        for (uint32_t i = 0; i < qn; i++) {
            row_req[lo + i] = r;
            row_len[lo + i] = L - qn + i + 1; /* causal: up to its own position */
        }
        max_len = L > max_len ? L : max_len;
    }
    rb->rows.num_rows = num_rows;
    rb->rows.num_reqs = kv->num_reqs;
    rb->rows.kv_indptr = kv->indptr;
    rb->rows.kv_indices = kv->indices;
    rb->rows.max_len = max_len;
    return RKV_OK;
fail:
    free(rb->mem);
    rb->mem = NULL;
    return st;
}

static rkv_status check_ptrs(const char *fn, const void *q, const void *out)
{
    if (q == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL q or out", fn);
    return RKV_OK;
}

/* The GPU's cascade dequantizes a shared prefix in 16-bit tiles only: not
 * with f32 activations (decode, prefill and plan/run dequantize). */
static rkv_status check_cuda_kv(const rkv_attn *a, const char *fn,
                                const rkv_attn_shared *shared)
{
    if (shared != NULL && rkv_dtype_quantized(a->cfg.dtype) &&
        a->cfg.act_dtype == RKV_DTYPE_F32)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: a shared prefix over quantized KV (dtype %d) with f32 "
                             "activations on the GPU is not implemented yet (host pools "
                             "run it)", fn, (int)a->cfg.dtype);
    return RKV_OK;
}

static rkv_status check_cuda_geom(const rkv_attn *a, const char *fn)
{
    if (a->cfg.head_dim != 64 && a->cfg.head_dim != 128)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: head_dim %u on the GPU (64 and 128 are supported)", fn,
                             a->cfg.head_dim);
    return RKV_OK;
}

/* ---- CPU execution ---------------------------------------------------------- */

/* Merges state b into a (fp32), in place, with the weights rkv_attn_merge
 * uses (an empty state is skipped, not multiplied). */
static void merge_f32(uint32_t D, float *oa, float *la, const float *ob, float lb)
{
    float wa, wb;
    *la = rkv_lse_merge_weights(*la, lb, &wa, &wb);
    for (uint32_t d = 0; d < D; d++) {
        float x = 0.0f;
        if (wa != 0.0f)
            x += oa[d] * wa;
        if (wb != 0.0f)
            x += ob[d] * wb;
        oa[d] = x;
    }
}

/* Runs rows (and an optional shared prefix) on the CPU into out / lse. */
static rkv_status cpu_run(const rkv_attn *a, const char *fn, const rkv_attn_geom *g,
                          const rkv_attn_params *p, const rkv_attn_rows *rows,
                          const rkv_attn_shared *shared, const void *q, float scale,
                          void *out, float *lse)
{
    void *kb, *vb;
    rkv_status st = rkv_pool_layer_kv(a->pool, p->layer, &kb, &vb);
    rkv_attn_strides kst;
    if (st == RKV_OK)
        st = rkv_pool_kv_strides(a->pool, &kst.block, &kst.token, &kst.head);
    if (st != RKV_OK)
        return st;
    const size_t D = g->head_dim, Hq = g->num_qo_heads;
    uint32_t S = shared ? shared->num_pages * g->page_size : 0;
    uint32_t ml = rows->max_len > S ? rows->max_len : S;
    size_t nstate = (size_t)rows->num_rows * Hq;
    size_t nfl = rkv_attn_cpu_scratch(g, ml) + nstate * (D + 1) * (shared ? 2 : 1);
    uint32_t *srows = NULL;
    if (S > 0)
        srows = malloc(((size_t)rows->num_rows * 3 + 2) * sizeof(uint32_t));
    float *mem = malloc(nfl * sizeof(float));
    if (mem == NULL || (S > 0 && srows == NULL)) {
        free(mem);
        free(srows);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    }
    float *o32 = mem, *l32 = o32 + nstate * D, *scratch = l32 + nstate;
    /* the rows' own keys follow the shared prefix: positions start at S */
    rkv_attn_mask own = {p->window_left, p->num_sink_tokens, S, NULL};
    rkv_attn_cpu_rows(g, kb, vb, &kst, rows, &own, q, scale, scratch, o32, l32);
    if (S > 0) {
        float *so = scratch + rkv_attn_cpu_scratch(g, ml), *sl = so + nstate * D;
        rkv_attn_rows sr = {0};
        uint32_t *sreq = srows, *slen = srows + rows->num_rows;
        uint32_t *sqpos = slen + rows->num_rows, *sptr = sqpos + rows->num_rows;
        for (uint32_t i = 0; i < rows->num_rows; i++) {
            sreq[i] = 0;
            slen[i] = S;
            sqpos[i] = S + rows->row_len[i] - 1;
        }
        sptr[0] = 0;
        sptr[1] = shared->num_pages;
        sr.num_rows = rows->num_rows;
        sr.num_reqs = 1;
        sr.row_req = sreq;
        sr.row_len = slen;
        sr.kv_indptr = sptr;
        sr.kv_indices = shared->pages;
        sr.max_len = S;
        rkv_attn_mask pre = {p->window_left, p->num_sink_tokens, 0, sqpos};
        rkv_attn_cpu_rows(g, kb, vb, &kst, &sr, &pre, q, scale, scratch, so, sl);
        for (size_t i = 0; i < nstate; i++)
            merge_f32((uint32_t)D, o32 + i * D, l32 + i, so + i * D, sl[i]);
    }
    for (size_t i = 0; i < nstate * D; i++)
        rkv_attn_cpu_store(g->dtype, out, i, o32[i]);
    if (lse != NULL)
        memcpy(lse, l32, nstate * sizeof(float));
    free(mem);
    free(srows);
    return RKV_OK;
}

/* Common path of decode / prefill / cascade once validated. */
static rkv_status run_rows(rkv_attn *a, const char *fn, const rkv_attn_params *p,
                           float scale, const rkv_attn_rows *rows,
                           const rkv_attn_shared *shared, const void *q, void *out,
                           float *lse)
{
    rkv_attn_geom g = geom_of(a, p->num_qo_heads);
    if (!on_cuda(a))
        return cpu_run(a, fn, &g, p, rows, shared, q, scale, out, lse);
    rkv_status st = check_cuda_kv(a, fn, shared);
    if (st == RKV_OK)
        st = check_cuda_geom(a, fn);
    if (st == RKV_OK && p->window_left != 0 && shared != NULL)
        st = rkv_set_error(RKV_ERR_UNSUPPORTED,
                           "%s: a sliding window over a shared prefix on the GPU is not "
                           "implemented yet (host pools run it)", fn);
    g.window = p->window_left;
    g.sinks = p->num_sink_tokens;
    if (st != RKV_OK)
        return st;
    rkv_attn_cuda *c;
    if ((st = need_cuda(a, &c)) != RKV_OK)
        return st;
    void *kb, *vb;
    if ((st = rkv_pool_layer_kv(a->pool, p->layer, &kb, &vb)) != RKV_OK)
        return st;
    return rkv_cuda_status(a->be, a->be->attn_rows(c, &g, kb, vb, rows, shared, q,
                                                   scale, out, lse));
}

/* ---- what the MLA front end (mla.c) borrows ------------------------------- */

rkv_status rkv_attn_lower_rows(const rkv_attn *a, const char *fn,
                               const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                               rkv_attn_rows *rows, uint32_t **mem)
{
    rows_buf rb;
    rkv_status st = build_rows(a, fn, qo_indptr, kv, &rb);
    if (st == RKV_OK) {
        *rows = rb.rows;
        *mem = rb.mem;
    }
    return st;
}

const rkv_pool_config *rkv_attn_pool_config(const rkv_attn *a)
{
    return &a->cfg;
}

rkv_pool *rkv_attn_pool(const rkv_attn *a)
{
    return a->pool;
}

rkv_status rkv_attn_check_params(const rkv_attn *a, const char *fn,
                                 const rkv_attn_params *p, float *scale)
{
    return check_params(a, fn, p, scale);
}

rkv_attn_geom rkv_attn_geom_for(const rkv_attn *a, uint32_t num_qo_heads)
{
    return geom_of(a, num_qo_heads);
}

int rkv_attn_is_cuda(const rkv_attn *a)
{
    return on_cuda(a);
}

rkv_status rkv_attn_mla_backend(rkv_attn *a, const rkv_cuda_backend **be,
                                rkv_mla_cuda **c, void **stream)
{
    /* The K/V context too: rkv_attn_sync waits on its stream, the same one. */
    rkv_attn_cuda *kv;
    rkv_status st = need_cuda(a, &kv);
    if (st != RKV_OK)
        return st;
    if (a->mla == NULL &&
        (st = rkv_cuda_status(a->be, a->be->mla_create(a->cfg.cuda_device, &a->mla))) != RKV_OK)
        return st;
    *be = a->be;
    *c = a->mla;
    *stream = a->stream;
    return RKV_OK;
}

/* ---- public operations ---------------------------------------------------- */

/* What decode, prefill and cascade share: validation, row building, the run.
 * qo_indptr NULL with !needs_qo: one query token per request (decode).
 * shared NULL: no shared prefix. */
static rkv_status attend(rkv_attn *attn, const char *fn, const rkv_attn_params *p,
                         int needs_qo, const uint32_t *qo_indptr,
                         const rkv_paged_kv *kv, const rkv_attn_shared *shared,
                         const void *q, void *out, float *lse)
{
    float scale = 0.0f;
    if (attn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL attn", fn);
    rkv_status st = check_params(attn, fn, p, &scale);
    if (st == RKV_OK)
        st = check_ptrs(fn, q, out);
    if (st == RKV_OK && needs_qo && qo_indptr == NULL)
        st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL qo_indptr", fn);
    if (st == RKV_OK && shared != NULL && shared->pages == NULL)
        st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL shared_pages", fn);
    if (st == RKV_OK && shared != NULL &&
        (uint64_t)shared->num_pages * attn->cfg.page_size > UINT32_MAX / 2)
        st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: shared prefix too long", fn);
    for (uint32_t i = 0; st == RKV_OK && shared != NULL && i < shared->num_pages; i++)
        st = check_block(attn, fn, shared->pages[i]);
    if (st != RKV_OK)
        return st;
    rows_buf rb;
    if ((st = build_rows(attn, fn, qo_indptr, kv, &rb)) != RKV_OK)
        return st;
    st = run_rows(attn, fn, p, scale, &rb.rows, shared, q, out, lse);
    free(rb.mem);
    return st;
}

rkv_status rkv_attn_decode(rkv_attn *attn, const rkv_attn_params *p,
                           const rkv_paged_kv *kv, const void *q, void *out,
                           float *lse)
{
    return attend(attn, "rkv_attn_decode", p, 0, NULL, kv, NULL, q, out, lse);
}

rkv_status rkv_attn_prefill(rkv_attn *attn, const rkv_attn_params *p,
                            const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                            const void *q, void *out, float *lse)
{
    return attend(attn, "rkv_attn_prefill", p, 1, qo_indptr, kv, NULL, q, out, lse);
}

rkv_status rkv_attn_cascade(rkv_attn *attn, const rkv_attn_params *p,
                            uint32_t num_shared_pages, const uint32_t *shared_pages,
                            const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                            const void *q, void *out, float *lse)
{
    rkv_attn_shared sh = {num_shared_pages, shared_pages};
    return attend(attn, "rkv_attn_cascade", p, 1, qo_indptr, kv,
                  num_shared_pages ? &sh : NULL, q, out, lse);
}

/* Append into a quantized host pool: each (token, head) row of k and v
 * (act dtype) is converted to f32 and quantized into its codes and scales. */
static rkv_status append_quant(const rkv_attn_geom *g, const rkv_attn_strides *kst,
                               void *kb, void *vb, uint32_t n, const uint32_t *slots,
                               const void *k, const void *v)
{
    const uint32_t P = g->page_size, H = g->num_kv_heads, D = g->head_dim;
    float *x = malloc((size_t)D * sizeof(float));
    if (x == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_attn_append: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        size_t at = (size_t)(slots[i] / P) * kst->block;
        uint32_t t = slots[i] % P;
        for (uint32_t h = 0; h < H; h++) {
            size_t src = ((size_t)i * H + h) * D;
            size_t code = at + t * kst->token + h * kst->head;
            size_t sc = at + g->scale_off + ((size_t)t * H + h) * g->nsc * sizeof(float);
            for (int s = 0; s < 2; s++) {
                const void *in = s ? v : k;
                char *base = s ? vb : kb;
                for (uint32_t d = 0; d < D; d++)
                    x[d] = rkv_attn_cpu_load(g->dtype, in, src + d);
                rkv_attn_cpu_quant_row(g, x, base + code, base + sc);
            }
        }
    }
    free(x);
    return RKV_OK;
}

rkv_status rkv_attn_check_slots(const rkv_attn *attn, const char *fn, uint32_t n,
                                const uint32_t *slots)
{
    const uint32_t P = attn->cfg.page_size;
    uint64_t nslots = (uint64_t)attn->cfg.num_blocks * P;
    uint8_t *seen = calloc((size_t)((nslots + 7) / 8), 1);
    if (seen == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    rkv_status st = RKV_OK;
    for (uint32_t i = 0; i < n && st == RKV_OK; i++) {
        uint32_t s = slots[i];
        if (s >= nslots) {
            st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: slot %u out of range", fn, s);
            break;
        }
        if ((st = check_block(attn, fn, s / P)) != RKV_OK)
            break;
        if (seen[s / 8] & (1u << (s % 8)))
            st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: slot %u listed twice", fn, s);
        seen[s / 8] |= (uint8_t)(1u << (s % 8));
    }
    free(seen);
    return st;
}

rkv_status rkv_attn_append(rkv_attn *attn, uint32_t layer, uint32_t num_tokens,
                           const uint32_t *slots, const void *k, const void *v)
{
    static const char fn[] = "rkv_attn_append";
    if (attn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL attn", fn);
    if (layer >= attn->cfg.num_layers)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: layer %u of %u", fn, layer,
                             attn->cfg.num_layers);
    rkv_status st = mha_only(attn, fn);
    if (st != RKV_OK)
        return st;
    if (num_tokens == 0)
        return RKV_OK;
    if (slots == NULL || k == NULL || v == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL slots, k or v", fn);
    if ((st = rkv_attn_check_slots(attn, fn, num_tokens, slots)) != RKV_OK)
        return st;
    const uint32_t P = attn->cfg.page_size;
    void *kb, *vb;
    if ((st = rkv_pool_layer_kv(attn->pool, layer, &kb, &vb)) != RKV_OK)
        return st;
    rkv_attn_geom g = geom_of(attn, 0);
    if (on_cuda(attn)) {
        rkv_attn_cuda *c;
        if (g.kv_dtype != g.dtype && (st = check_cuda_geom(attn, fn)) != RKV_OK)
            return st; /* the quantizing kernel holds a row of up to 128 */
        if ((st = need_cuda(attn, &c)) != RKV_OK)
            return st;
        return rkv_cuda_status(attn->be, attn->be->attn_append(c, &g, kb, vb, num_tokens,
                                                               slots, k, v));
    }
    rkv_attn_strides kst;
    if ((st = rkv_pool_kv_strides(attn->pool, &kst.block, &kst.token,
                                  &kst.head)) != RKV_OK)
        return st;
    const size_t head = (size_t)g.head_dim * g.elem_size;
    const size_t row = (size_t)g.num_kv_heads * head;
    if (g.kv_dtype != g.dtype)
        return append_quant(&g, &kst, kb, vb, num_tokens, slots, k, v);
    const int tok_run = kst.head == head; /* a token's heads are adjacent */
    for (uint32_t i = 0; i < num_tokens; i++) {
        size_t at = (size_t)(slots[i] / P) * kst.block + (slots[i] % P) * kst.token;
        for (uint32_t h = 0; h < (tok_run ? 1u : g.num_kv_heads); h++) {
            size_t len = tok_run ? row : head;
            memcpy((char *)kb + at + h * kst.head, (const char *)k + i * row + h * head,
                   len);
            memcpy((char *)vb + at + h * kst.head, (const char *)v + i * row + h * head,
                   len);
        }
    }
    return RKV_OK;
}

rkv_status rkv_attn_merge(rkv_attn *attn, uint32_t n, const void *v_a,
                          const float *lse_a, const void *v_b, const float *lse_b,
                          void *v_out, float *lse_out)
{
    static const char fn[] = "rkv_attn_merge";
    if (attn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL attn", fn);
    rkv_status mst = mha_only(attn, fn);
    if (mst != RKV_OK)
        return mst;
    if (n == 0)
        return RKV_OK;
    if (v_a == NULL || lse_a == NULL || v_b == NULL || lse_b == NULL || v_out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL state", fn);
    rkv_attn_geom g = geom_of(attn, 0);
    if (on_cuda(attn)) {
        rkv_status st = check_cuda_geom(attn, fn);
        rkv_attn_cuda *c;
        if (st == RKV_OK)
            st = need_cuda(attn, &c);
        if (st != RKV_OK)
            return st;
        return rkv_cuda_status(attn->be, attn->be->attn_merge(c, &g, n, v_a, lse_a, v_b,
                                                              lse_b, v_out, lse_out));
    }
    const uint32_t D = g.head_dim;
    for (uint32_t i = 0; i < n; i++) {
        float wa, wb;
        float ls = rkv_lse_merge_weights(lse_a[i], lse_b[i], &wa, &wb);
        for (uint32_t d = 0; d < D; d++) {
            size_t e = (size_t)i * D + d;
            float x = 0.0f;
            if (wa != 0.0f)
                x += rkv_attn_cpu_load(g.dtype, v_a, e) * wa;
            if (wb != 0.0f)
                x += rkv_attn_cpu_load(g.dtype, v_b, e) * wb;
            rkv_attn_cpu_store(g.dtype, v_out, e, x);
        }
        if (lse_out != NULL)
            lse_out[i] = ls;
    }
    return RKV_OK;
}

/* ---- plan / run ------------------------------------------------------------
 * A plan owns host copies of its rows and block table (the CPU path runs
 * from them), and for a CUDA pool the backend's partition of the caller's
 * workspace. Run re-checks only what may differ per layer. */

struct rkv_attn_plan {
    const rkv_attn *attn;
    uint32_t num_qo_heads;
    rows_buf rb;
    uint32_t *table; /* copies of kv_indptr and kv_indices */
    void *ws;
    rkv_attn_plan_layout cp;
};

/* Validation and lowering shared by the size query and plan_create. */
static rkv_status plan_lower(rkv_attn *attn, const char *fn, uint32_t num_qo_heads,
                             const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                             rows_buf *rb)
{
    rb->mem = NULL;
    if (attn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL attn", fn);
    rkv_attn_params p = {0, num_qo_heads, 0.0f, 0, 0};
    float scale = 0.0f;
    rkv_status st = check_params(attn, fn, &p, &scale);
    if (st == RKV_OK && on_cuda(attn))
        st = check_cuda_geom(attn, fn);
    if (st == RKV_OK)
        st = build_rows(attn, fn, qo_indptr, kv, rb);
    return st;
}

rkv_status rkv_attn_plan_workspace_size(rkv_attn *attn, uint32_t num_qo_heads,
                                        const uint32_t *qo_indptr,
                                        const rkv_paged_kv *kv, size_t *bytes)
{
    static const char fn[] = "rkv_attn_plan_workspace_size";
    if (bytes == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL bytes", fn);
    rows_buf rb;
    rkv_status st = plan_lower(attn, fn, num_qo_heads, qo_indptr, kv, &rb);
    if (st != RKV_OK)
        return st;
    size_t need = 0;
    if (on_cuda(attn)) {
        rkv_attn_cuda *c;
        rkv_attn_geom g = geom_of(attn, num_qo_heads);
        rkv_attn_plan_layout cp;
        memset(&cp, 0, sizeof cp);
        st = need_cuda(attn, &c);
        if (st == RKV_OK)
            st = rkv_cuda_status(attn->be, attn->be->attn_plan(c, &g, &rb.rows, NULL, 0, &cp));
        need = cp.ws_bytes;
    }
    free(rb.mem);
    if (st == RKV_OK)
        *bytes = need;
    return st;
}

rkv_status rkv_attn_plan_create(rkv_attn *attn, uint32_t num_qo_heads,
                                const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                                void *workspace, size_t workspace_bytes,
                                rkv_attn_plan **out)
{
    static const char fn[] = "rkv_attn_plan_create";
    if (out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL out", fn);
    rkv_attn_plan *pl = calloc(1, sizeof *pl);
    if (pl == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    rkv_status st = plan_lower(attn, fn, num_qo_heads, qo_indptr, kv, &pl->rb);
    if (st == RKV_OK && on_cuda(attn) && workspace == NULL)
        st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL workspace on a CUDA pool", fn);
    if (st == RKV_OK) {
        const size_t ni = (size_t)kv->num_reqs + 1, np = kv->indptr[kv->num_reqs];
        pl->table = malloc((ni + np) * sizeof(uint32_t));
        if (pl->table == NULL) {
            st = rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
        } else {
            memcpy(pl->table, kv->indptr, ni * sizeof(uint32_t));
            if (np > 0)
                memcpy(pl->table + ni, kv->indices, np * sizeof(uint32_t));
            pl->rb.rows.kv_indptr = pl->table;
            pl->rb.rows.kv_indices = pl->table + ni;
        }
    }
    if (st == RKV_OK && on_cuda(attn)) {
        rkv_attn_cuda *c;
        rkv_attn_geom g = geom_of(attn, num_qo_heads);
        st = need_cuda(attn, &c);
        if (st == RKV_OK)
            st = rkv_cuda_status(attn->be, attn->be->attn_plan(c, &g, &pl->rb.rows, workspace,
                                                               workspace_bytes, &pl->cp));
    }
    if (st != RKV_OK) {
        rkv_attn_plan_destroy(pl);
        return st;
    }
    pl->attn = attn;
    pl->num_qo_heads = num_qo_heads;
    pl->ws = workspace;
    *out = pl;
    return RKV_OK;
}

static rkv_status run_plan(rkv_attn *attn, const char *fn, const rkv_attn_plan *plan,
                           const rkv_attn_params *pp, const void *q, void *out,
                           float *lse);

rkv_status rkv_attn_run(rkv_attn *attn, const rkv_attn_plan *plan, uint32_t layer,
                        float sm_scale, const void *q, void *out, float *lse)
{
    rkv_attn_params p = {layer, plan != NULL ? plan->num_qo_heads : 0, sm_scale, 0, 0};
    return run_plan(attn, "rkv_attn_run", plan, &p, q, out, lse);
}

rkv_status rkv_attn_run_params(rkv_attn *attn, const rkv_attn_plan *plan,
                               const rkv_attn_params *p, const void *q, void *out,
                               float *lse)
{
    static const char fn[] = "rkv_attn_run_params";
    if (p == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL params", fn);
    if (plan != NULL && p->num_qo_heads != plan->num_qo_heads)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: num_qo_heads %u, the plan's is %u", fn, p->num_qo_heads,
                             plan->num_qo_heads);
    return run_plan(attn, fn, plan, p, q, out, lse);
}

static rkv_status run_plan(rkv_attn *attn, const char *fn, const rkv_attn_plan *plan,
                           const rkv_attn_params *pp, const void *q, void *out,
                           float *lse)
{
    if (attn == NULL || plan == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL attn or plan", fn);
    if (plan->attn != attn)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: the plan is another context's", fn);
    const uint32_t layer = pp->layer;
    float scale = 0.0f;
    rkv_status st = check_params(attn, fn, pp, &scale);
    if (st == RKV_OK)
        st = check_ptrs(fn, q, out);
    if (st != RKV_OK)
        return st;
    rkv_attn_geom g = geom_of(attn, plan->num_qo_heads);
    if (!on_cuda(attn))
        return cpu_run(attn, fn, &g, pp, &plan->rb.rows, NULL, q, scale, out, lse);
    g.window = pp->window_left;
    g.sinks = pp->num_sink_tokens;
    void *kb, *vb;
    if ((st = rkv_pool_layer_kv(attn->pool, layer, &kb, &vb)) != RKV_OK)
        return st;
    return rkv_cuda_status(attn->be, attn->be->attn_run(attn->cuda, &g, &plan->cp, plan->ws,
                                                        kb, vb, q, scale, out, lse));
}

void rkv_attn_plan_destroy(rkv_attn_plan *plan)
{
    if (plan == NULL)
        return;
    free(plan->rb.mem);
    free(plan->table);
    free(plan);
}
