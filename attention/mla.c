/*
 * attention/mla.c -- the front end of multi-head latent attention
 * (rkv_attn_mla_*, radixkv/attention.h): validation, lowering to rows
 * (attn.c's, so block tables mean the same as for the K/V calls), and
 * dispatch to the CPU reference (mla_cpu.c) or the CUDA backend's MLA
 * kernels (mla_cuda.cu, through the pool's backend table).
 *
 * Invariants: as attn.c's -- a call validates everything and allocates its
 * host temporaries before it writes a byte of output or KV, so a failing
 * call changes nothing. Only a pool of the MLA layout is accepted.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "attention/attn_internal.h"
#include "common/cuda_backend.h"
#include "common/status.h"

/* The CUDA kernel's static shared memory holds 8-token tiles of latent
 * rows of up to 576 elements and each thread owns up to 4 of 512 output
 * dims (mla_cuda.cu). */
#define RKV_MLA_CUDA_MAX_ROW 576u
#define RKV_MLA_CUDA_MAX_RANK 512u

static rkv_status mla_pool(const rkv_attn *a, const char *fn, rkv_mla_geom *g)
{
    if (a == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL attn", fn);
    const rkv_pool_config *cfg = rkv_attn_pool_config(a);
    if (cfg->layout != RKV_LAYOUT_MLA)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: the pool has the K/V (MHA) layout; MLA needs a pool "
                             "made with layout RKV_LAYOUT_MLA", fn);
    memset(g, 0, sizeof *g);
    g->num_blocks = cfg->num_blocks;
    g->page_size = cfg->page_size;
    g->rank = cfg->kv_lora_rank;
    g->rope = cfg->qk_rope_dim;
    g->dtype = cfg->dtype;
    g->elem_size = rkv_pool_dtype_size(cfg->dtype);
    if (cfg->device == RKV_DEVICE_CUDA &&
        (g->rank > RKV_MLA_CUDA_MAX_RANK || g->rank + g->rope > RKV_MLA_CUDA_MAX_ROW))
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: kv_lora_rank %u + qk_rope_dim %u on the GPU (rank <= "
                             "%u, rank + rope <= %u: DeepSeek-V2/V3's 512 + 64 fits)",
                             fn, g->rank, g->rope, RKV_MLA_CUDA_MAX_RANK,
                             RKV_MLA_CUDA_MAX_ROW);
    return RKV_OK;
}

rkv_status rkv_attn_mla_append(rkv_attn *attn, uint32_t layer, uint32_t num_tokens,
                               const uint32_t *slots, const void *c_kv,
                               const void *k_pe)
{
    static const char fn[] = "rkv_attn_mla_append";
    rkv_mla_geom g;
    rkv_status st = mla_pool(attn, fn, &g);
    if (st != RKV_OK)
        return st;
    const rkv_pool_config *cfg = rkv_attn_pool_config(attn);
    if (layer >= cfg->num_layers)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: layer %u of %u", fn, layer,
                             cfg->num_layers);
    if (num_tokens == 0)
        return RKV_OK;
    if (slots == NULL || c_kv == NULL || k_pe == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL slots, c_kv or k_pe", fn);
    if ((st = rkv_attn_check_slots(attn, fn, num_tokens, slots)) != RKV_OK)
        return st;
    void *base;
    if ((st = rkv_pool_layer_kv(rkv_attn_pool(attn), layer, &base, NULL)) != RKV_OK)
        return st;
    if (cfg->device == RKV_DEVICE_CUDA) {
        const rkv_cuda_backend *be;
        rkv_mla_cuda *c;
        void *stream;
        if ((st = rkv_attn_mla_backend(attn, &be, &c, &stream)) != RKV_OK)
            return st;
        return rkv_cuda_status(be, be->mla_append(c, stream, &g, base, num_tokens, slots,
                                                  c_kv, k_pe));
    }
    const size_t es = g.elem_size, lat = (size_t)g.rank * es, pe = (size_t)g.rope * es;
    for (uint32_t i = 0; i < num_tokens; i++) {
        char *row = (char *)base + (size_t)slots[i] * (lat + pe);
        memcpy(row, (const char *)c_kv + i * lat, lat);
        memcpy(row + lat, (const char *)k_pe + i * pe, pe);
    }
    return RKV_OK;
}

/* Decode (qo_indptr NULL) and prefill: validation, rows, the run. */
static rkv_status mla_attend(rkv_attn *attn, const char *fn, const rkv_mla_params *p,
                             int needs_qo, const uint32_t *qo_indptr,
                             const rkv_paged_kv *kv, const void *q_latent,
                             const void *q_pe, void *out, float *lse)
{
    rkv_mla_geom g;
    rkv_status st = mla_pool(attn, fn, &g);
    if (st != RKV_OK)
        return st;
    const rkv_pool_config *cfg = rkv_attn_pool_config(attn);
    if (p == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL params", fn);
    if (p->layer >= cfg->num_layers)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: layer %u of %u", fn, p->layer,
                             cfg->num_layers);
    if (p->num_heads == 0 || p->num_heads > 65536)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: num_heads %u (1..65536)", fn,
                             p->num_heads);
    if (!(p->sm_scale > 0.0f) || !isfinite(p->sm_scale))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: sm_scale %g must be > 0 (MLA has no default: it is "
                             "1/sqrt of the model's query head width before absorption)",
                             fn, (double)p->sm_scale);
    if (q_latent == NULL || q_pe == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL q_latent, q_pe or out", fn);
    if (needs_qo && qo_indptr == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL qo_indptr", fn);
    g.num_heads = p->num_heads;
    rkv_attn_rows rows;
    uint32_t *mem = NULL;
    if ((st = rkv_attn_lower_rows(attn, fn, qo_indptr, kv, &rows, &mem)) != RKV_OK)
        return st;
    void *base;
    st = rkv_pool_layer_kv(rkv_attn_pool(attn), p->layer, &base, NULL);
    if (st == RKV_OK && cfg->device == RKV_DEVICE_CUDA) {
        const rkv_cuda_backend *be;
        rkv_mla_cuda *c;
        void *stream;
        st = rkv_attn_mla_backend(attn, &be, &c, &stream);
        if (st == RKV_OK)
            st = rkv_cuda_status(be, be->mla_rows(c, stream, &g, base, &rows, q_latent,
                                                  q_pe, p->sm_scale, out, lse));
    } else if (st == RKV_OK) {
        const size_t nstate = (size_t)rows.num_rows * g.num_heads;
        size_t nfl = rkv_mla_cpu_scratch(&g, rows.max_len) + nstate * ((size_t)g.rank + 1);
        float *f = malloc(nfl * sizeof(float));
        if (f == NULL) {
            st = rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
        } else {
            float *o32 = f, *l32 = o32 + nstate * g.rank, *scratch = l32 + nstate;
            rkv_mla_cpu_rows(&g, base, &rows, q_latent, q_pe, p->sm_scale, scratch, o32,
                             l32);
            for (size_t i = 0; i < nstate * g.rank; i++)
                rkv_attn_cpu_store(g.dtype, out, i, o32[i]);
            if (lse != NULL)
                memcpy(lse, l32, nstate * sizeof(float));
            free(f);
        }
    }
    free(mem);
    return st;
}

rkv_status rkv_attn_mla_decode(rkv_attn *attn, const rkv_mla_params *p,
                               const rkv_paged_kv *kv, const void *q_latent,
                               const void *q_pe, void *out, float *lse)
{
    return mla_attend(attn, "rkv_attn_mla_decode", p, 0, NULL, kv, q_latent, q_pe, out,
                      lse);
}

rkv_status rkv_attn_mla_prefill(rkv_attn *attn, const rkv_mla_params *p,
                                const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                                const void *q_latent, const void *q_pe, void *out,
                                float *lse)
{
    return mla_attend(attn, "rkv_attn_mla_prefill", p, 1, qo_indptr, kv, q_latent, q_pe,
                      out, lse);
}
