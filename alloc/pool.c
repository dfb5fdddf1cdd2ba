/*
 * alloc/pool.c -- the KV block pool: KV memory for num_blocks pages (its
 * own, or a server's buffers addressed by per-layer bases and strides:
 * rkv_pool_create_external), O(1) alloc/free from a free stack, per-block
 * ref counts and chained hashes.
 * Block copies (rkv_pool_copy_*) live in alloc/pool_copy.c.
 *
 * Invariants: see alloc/pool_internal.h. Every failing call changes nothing:
 * alloc_n checks the count before popping, unref_n decrements in order and
 * undoes its decrements if an id turns out to be free or listed more often
 * than it is referenced (so multiplicity is counted without an extra
 * allocation); only then are the blocks that reached 0 pushed on the free
 * stack.
 *
 * Metadata is one host allocation of 12 bytes per block (hash or free-list
 * link 8, refcount 4): 0.75 byte per token at page size 16, plus one base
 * pointer per layer's K and V.
 *
 * Block hash: h = XXH3_64bits_withSeed(tokens, P*4, XXH3_64bits({parent,
 * ns}, 16)). The 16-byte seed record makes (parent, ns) an exact pair: no
 * (parent, ns) value can be forged from another by choosing tokens.
 */
#include "alloc/pool_internal.h"

#include <stdlib.h>
#include <string.h>

/* Inline: most hashed inputs are one 64-byte page, where the library
 * call costs as much as the hash. Same algorithm, same values. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/cuda_loader.h"
#include "common/dtype.h"
#include "common/status.h"

void rkv_pool_config_init(rkv_pool_config *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->page_size = 16;
    cfg->dtype = RKV_DTYPE_F16;
    cfg->device = RKV_DEVICE_HOST;
    cfg->quant_group = 32;
    cfg->act_dtype = RKV_DTYPE_BF16;
}

/* Bytes of one element of an unquantized dtype; 0 otherwise. */
size_t rkv_pool_dtype_size(rkv_dtype d)
{
    switch (d) {
    case RKV_DTYPE_F16: return 2;
    case RKV_DTYPE_BF16: return 2;
    case RKV_DTYPE_F32: return 4;
    default: return 0;
    }
}

/* The dtype's part of a config check (KV geometry given): a quantized
 * row's scales must stay 4-byte aligned and its groups whole. */
static rkv_status rkv_pool_check_dtype(const char *fn, const rkv_pool_config *cfg)
{
    if (rkv_pool_dtype_size(cfg->dtype) != 0)
        return RKV_OK;
    if (!rkv_dtype_quantized(cfg->dtype))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: dtype %d", fn, (int)cfg->dtype);
    if (cfg->num_layers == 0 || cfg->layout == RKV_LAYOUT_MLA)
        return RKV_OK; /* an MLA pool refuses quantized dtypes (check_layout) */
    if (rkv_pool_dtype_size(cfg->act_dtype) == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: act_dtype %d of a quantized pool must be F16, BF16 "
                             "or F32", fn, (int)cfg->act_dtype);
    if (cfg->dtype != RKV_DTYPE_INT4) {
        if (cfg->head_dim % 4 != 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: head_dim %u of an 8-bit quantized pool must be "
                                 "a multiple of 4 (keeps the f32 scales aligned)",
                                 fn, cfg->head_dim);
        return RKV_OK;
    }
    if (cfg->head_dim % 8 != 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: head_dim %u of an INT4 pool must be a multiple of 8 "
                             "(two codes a byte, f32 scales aligned)", fn,
                             cfg->head_dim);
    if (cfg->quant_group == 0 || cfg->quant_group % 2 != 0 ||
        cfg->head_dim % cfg->quant_group != 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: INT4 quant_group %u must be even and divide "
                             "head_dim %u", fn, cfg->quant_group, cfg->head_dim);
    return RKV_OK;
}

/* Row bytes of a checked config with KV (see radixkv/pool.h). */
static size_t rkv_row_bytes(const rkv_pool_config *cfg)
{
    size_t esz = rkv_pool_dtype_size(cfg->dtype), D = cfg->head_dim;
    if (cfg->layout == RKV_LAYOUT_MLA) /* one latent row: c_kv then k_pe */
        return ((size_t)cfg->kv_lora_rank + cfg->qk_rope_dim) * esz;
    if (esz != 0)
        return D * esz;
    if (cfg->dtype == RKV_DTYPE_INT4)
        return D / 2 + 4 * (D / cfg->quant_group);
    return D + 4;
}

/* Code bytes of a row (the head stride of a pool-owned layout). */
static size_t rkv_code_bytes(const rkv_pool_config *cfg)
{
    size_t esz = rkv_pool_dtype_size(cfg->dtype), D = cfg->head_dim;
    if (cfg->layout == RKV_LAYOUT_MLA)
        return rkv_row_bytes(cfg);
    if (esz != 0)
        return D * esz;
    return cfg->dtype == RKV_DTYPE_INT4 ? D / 2 : D;
}

/* Allocates the KV memory (none for a metadata-only pool). A CUDA pool
 * loads the CUDA backend first (common/cuda_loader.c): the device memory
 * is the backend's, and the pool keeps the backend loaded until destroyed.
 * A server-owned pool (p->external) allocates nothing: it only loads the
 * backend of a CUDA pool, for its copies and kernels. */
static rkv_status rkv_pool_alloc_kv(rkv_pool *p)
{
    p->kv = NULL;
    if (p->cfg.device == RKV_DEVICE_CUDA) {
        rkv_cuda_lib lib;
        rkv_status st = rkv_cuda_load(p->external ? "rkv_pool_create_external"
                                                  : "rkv_pool_create", &lib);
        if (st != RKV_OK)
            return st;
        if (!p->external) {
            st = rkv_cuda_status(lib.be, lib.be->mem_alloc(p->cfg.cuda_device,
                                                            p->kv_bytes, &p->kv));
            if (st != RKV_OK) {
                p->kv = NULL;
                rkv_cuda_unload(&lib);
                return st;
            }
        }
        p->cuda = lib;
        return RKV_OK;
    }
    if (p->kv_bytes == 0 || p->external)
        return RKV_OK;
    void *mem = NULL;
    if (posix_memalign(&mem, 256, p->kv_bytes) != 0 || mem == NULL)
        return rkv_set_error(RKV_ERR_NOMEM,
                             "rkv_pool_create: %zu bytes of host KV memory",
                             p->kv_bytes);
    memset(mem, 0, p->kv_bytes);
    p->kv = mem;
    return RKV_OK;
}

/* Frees what the pool owns; a server's KV buffers are never freed. */
static void rkv_pool_free_kv(rkv_pool *p)
{
    if (p->cuda.be != NULL) {
        if (p->kv != NULL)
            p->cuda.be->mem_free(p->cfg.cuda_device, p->kv);
        rkv_cuda_unload(&p->cuda);
    } else {
        free(p->kv);
    }
    p->kv = NULL;
}

const rkv_cuda_backend *rkv_pool_cuda_backend(const rkv_pool *pool)
{
    return pool != NULL ? pool->cuda.be : NULL;
}

static rkv_status rkv_pool_check_config(const char *fn, const rkv_pool_config *cfg,
                                        size_t *bpb_out, size_t *kv_bytes_out);

/* The layout fields: an MLA pool needs both widths (their sum is its row,
 * kept far from overflow) and a dtype its kernels read. */
static rkv_status rkv_pool_check_layout(const char *fn, const rkv_pool_config *cfg)
{
    if (cfg->layout == RKV_LAYOUT_MHA)
        return RKV_OK;
    if (cfg->layout != RKV_LAYOUT_MLA)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: layout %d (MHA 0 or MLA 1)",
                             fn, (int)cfg->layout);
    if (cfg->kv_lora_rank == 0 || cfg->qk_rope_dim == 0 ||
        cfg->kv_lora_rank > 65536 || cfg->qk_rope_dim > 65536)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: MLA kv_lora_rank %u, qk_rope_dim %u (each 1..65536)",
                             fn, cfg->kv_lora_rank, cfg->qk_rope_dim);
    if (cfg->dtype != RKV_DTYPE_F16 && cfg->dtype != RKV_DTYPE_BF16 &&
        cfg->dtype != RKV_DTYPE_F32)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: the MLA layout stores f16, bf16 or f32 only (dtype %d)",
                             fn, (int)cfg->dtype);
    return RKV_OK;
}

size_t rkv_pool_config_bytes_per_token(const rkv_pool_config *cfg)
{
    size_t bpb = 0, kv_bytes = 0;
    if (cfg == NULL || cfg->page_size == 0)
        return 0;
    rkv_pool_config one = *cfg;
    one.num_blocks = 1; /* the block, not the pool, is what must not overflow */
    rkv_status st = rkv_pool_check_config("rkv_pool_config_bytes_per_token", &one,
                                          &bpb, &kv_bytes);
    return st == RKV_OK ? bpb / cfg->page_size : 0;
}

/* Checks cfg; *bpb and *kv_bytes get the block and pool sizes. */
static rkv_status rkv_pool_check_config(const char *fn, const rkv_pool_config *cfg,
                                        size_t *bpb_out, size_t *kv_bytes_out)
{
    if (cfg->num_blocks == 0 || cfg->num_blocks == UINT32_MAX)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: num_blocks %u (1..%u)", fn,
                             cfg->num_blocks, UINT32_MAX - 1);
    if (cfg->page_size == 0 || cfg->page_size > RKV_MAX_PAGE_SIZE)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: page_size %u (1..%u)", fn,
                             cfg->page_size, (unsigned)RKV_MAX_PAGE_SIZE);
    rkv_status dst = rkv_pool_check_dtype(fn, cfg);
    if (dst != RKV_OK)
        return dst;
    if (cfg->device != RKV_DEVICE_HOST && cfg->device != RKV_DEVICE_CUDA)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: device %d", fn,
                             (int)cfg->device);
    size_t bpb = 0, kv_bytes = 0;
    rkv_status st = rkv_pool_check_layout(fn, cfg);
    if (st != RKV_OK)
        return st;
    if (cfg->num_layers > 0) {
        const int mla = cfg->layout == RKV_LAYOUT_MLA;
        if (!mla && (cfg->num_kv_heads == 0 || cfg->head_dim == 0))
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: num_kv_heads %u, head_dim %u", fn,
                                 cfg->num_kv_heads, cfg->head_dim);
        if (cfg->head_dim > UINT32_MAX / 8)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: head_dim %u too large",
                                 fn, cfg->head_dim);
        /* MLA: one latent plane per layer, one "head" of rank + rope */
        size_t f[4] = {cfg->num_layers, mla ? 1 : 2, cfg->page_size,
                       mla ? 1 : cfg->num_kv_heads};
        bpb = rkv_row_bytes(cfg);
        for (int i = 0; i < 4; i++)
            if (__builtin_mul_overflow(bpb, f[i], &bpb))
                return rkv_set_error(RKV_ERR_INVALID_ARG,
                                     "%s: block size overflows", fn);
        if (__builtin_mul_overflow(bpb, (size_t)cfg->num_blocks, &kv_bytes))
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: pool size overflows", fn);
    }
    *bpb_out = bpb;
    *kv_bytes_out = kv_bytes;
    return RKV_OK;
}

/* The pool and its metadata (free stack, ref counts, segment table), KV
 * memory not yet set. */
static rkv_status rkv_pool_new(const char *fn, const rkv_pool_config *cfg,
                               size_t bpb, size_t kv_bytes, rkv_pool **out)
{
    rkv_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: pool struct", fn);
    p->cfg = *cfg;
    if (cfg->layout == RKV_LAYOUT_MLA) {
        /* the latent row reads as one head (pool.h) */
        p->cfg.num_kv_heads = 1;
        p->cfg.head_dim = cfg->kv_lora_rank + cfg->qk_rope_dim;
    } else {
        p->cfg.kv_lora_rank = 0;
        p->cfg.qk_rope_dim = 0;
    }
    p->bytes_per_block = bpb;
    p->kv_bytes = kv_bytes;
    size_t n = cfg->num_blocks;
    size_t nseg = kv_bytes != 0 ? rkv_pool_segs_per_layer(&p->cfg) *
                                      (size_t)cfg->num_layers : 0;
    p->meta_bytes = n * (sizeof(uint64_t) + sizeof(uint32_t)) +
                    nseg * sizeof(char *);
    p->meta = malloc(p->meta_bytes);
    if (p->meta == NULL) {
        size_t want = p->meta_bytes;
        free(p);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: %zu bytes of block metadata",
                             fn, want);
    }
    /* pointers and hashes first: 8-byte aligned */
    p->seg = nseg != 0 ? (char **)p->meta : NULL;
    p->hash = (uint64_t *)((char *)p->meta + nseg * sizeof(char *));
    p->refcount = (uint32_t *)(p->hash + n);
    memset(p->refcount, 0, n * sizeof *p->refcount);
    /* block 0 on top: allocation order is 0, 1, 2 ... on a fresh pool */
    for (size_t i = 0; i < n; i++)
        p->hash[i] = i + 1 < n ? (uint64_t)(i + 1) : RKV_POOL_END;
    p->free_head = 0;
    p->num_free = (uint32_t)n;
    *out = p;
    return RKV_OK;
}

rkv_status rkv_pool_create(const rkv_pool_config *cfg, rkv_pool **out)
{
    static const char fn[] = "rkv_pool_create";
    if (out == NULL || cfg == NULL)
        return rkv_null_arg(fn, cfg, "cfg", "out");
    size_t bpb = 0, kv_bytes = 0;
    rkv_status st = rkv_pool_check_config(fn, cfg, &bpb, &kv_bytes);
    rkv_pool *p = NULL;
    if (st == RKV_OK)
        st = rkv_pool_new(fn, cfg, bpb, kv_bytes, &p);
    if (st != RKV_OK)
        return st;
    st = rkv_pool_alloc_kv(p);
    if (st != RKV_OK) {
        free(p->meta);
        free(p);
        return st;
    }
    if (p->seg != NULL) {
        /* the layout pool.h documents: K[l], V[l] planes in turn (MLA: the
         * latent plane of each layer) */
        size_t nseg = rkv_pool_segs_per_layer(&p->cfg) * (size_t)cfg->num_layers;
        size_t plane = kv_bytes / nseg;
        for (size_t s = 0; s < nseg; s++)
            p->seg[s] = (char *)p->kv + s * plane;
        /* a quantized segment's scales follow its codes (radixkv/pool.h) */
        p->head_stride = rkv_code_bytes(&p->cfg);
        p->tok_stride = p->head_stride * p->cfg.num_kv_heads;
        p->blk_stride = rkv_row_bytes(&p->cfg) * p->cfg.num_kv_heads * cfg->page_size;
        p->dense = 1;
    }
    *out = p;
    return RKV_OK;
}

/* The dims of one segment buffer, checked to address distinct elements:
 * taken by increasing stride, each stride must clear the extent of the
 * dims inside it (head_dim contiguous elements innermost). *extent: bytes
 * from a segment's base to one past its last element. */
static rkv_status rkv_kv_shape_ok(const char *fn, const rkv_pool_config *cfg,
                                  const rkv_kv_buffers *kv, size_t esz,
                                  size_t *extent)
{
    struct { size_t stride, count; const char *name; } d[3] = {
        {kv->head_stride, cfg->num_kv_heads, "head_stride"},
        {kv->token_stride, cfg->page_size, "token_stride"},
        {kv->block_stride, cfg->num_blocks, "block_stride"},
    };
    for (int i = 0; i < 3; i++)
        if (d[i].count > 1 && (d[i].stride == 0 || d[i].stride % esz != 0))
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: %s %zu is not a positive multiple of the "
                                 "element size %zu", fn, d[i].name, d[i].stride,
                                 esz);
    /* insertion sort of three by stride */
    for (int i = 1; i < 3; i++)
        for (int j = i; j > 0 && d[j].stride < d[j - 1].stride; j--) {
            __typeof__(d[0]) tmp = d[j];
            d[j] = d[j - 1];
            d[j - 1] = tmp;
        }
    size_t ext = (size_t)cfg->head_dim * esz;
    for (int i = 0; i < 3; i++) {
        if (d[i].count <= 1)
            continue;
        if (d[i].stride < ext)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: %s %zu overlaps the %zu bytes it steps "
                                 "over (elements would alias)", fn, d[i].name,
                                 d[i].stride, ext);
        size_t span;
        if (__builtin_mul_overflow(d[i].stride, d[i].count - 1, &span) ||
            __builtin_add_overflow(span, ext, &ext))
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: a layer's buffer size overflows", fn);
    }
    *extent = ext;
    return RKV_OK;
}

rkv_status rkv_pool_create_external(const rkv_pool_config *cfg,
                                    const rkv_kv_buffers *kv, rkv_pool **out)
{
    static const char fn[] = "rkv_pool_create_external";
    if (out == NULL || cfg == NULL || kv == NULL || kv->k == NULL ||
        kv->v == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             cfg == NULL ? "cfg" : kv == NULL ? "kv"
                             : out == NULL ? "out" : "kv->k or kv->v");
    size_t bpb = 0, kv_bytes = 0;
    rkv_status st = rkv_pool_check_config(fn, cfg, &bpb, &kv_bytes);
    if (st != RKV_OK)
        return st;
    if (cfg->num_layers == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: num_layers 0 (a metadata-only pool has no KV "
                             "buffers: use rkv_pool_create)", fn);
    if (cfg->layout == RKV_LAYOUT_MLA)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: server-owned buffers of the MLA layout are not "
                             "supported (use rkv_pool_create)", fn);
    const size_t esz = rkv_pool_dtype_size(cfg->dtype);
    if (esz == 0)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: dtype %d: server-owned KV buffers are F16, BF16 "
                             "or F32 (quantized KV lives in pool-owned memory)",
                             fn, (int)cfg->dtype);
    size_t extent = 0;
    if ((st = rkv_kv_shape_ok(fn, cfg, kv, esz, &extent)) != RKV_OK)
        return st;
    for (uint32_t l = 0; l < cfg->num_layers; l++) {
        const void *b[2] = {kv->k[l], kv->v[l]};
        for (int s = 0; s < 2; s++) {
            if (b[s] == NULL || (uintptr_t)b[s] % esz != 0)
                return rkv_set_error(RKV_ERR_INVALID_ARG,
                                     "%s: %s[%u] is %s", fn, s ? "v" : "k", l,
                                     b[s] == NULL ? "NULL"
                                                  : "not aligned to its element size");
            if ((uintptr_t)b[s] > UINTPTR_MAX - extent)
                return rkv_set_error(RKV_ERR_INVALID_ARG,
                                     "%s: %s[%u] + %zu bytes wraps around", fn,
                                     s ? "v" : "k", l, extent);
        }
    }
    const size_t hs = (size_t)cfg->head_dim * esz;
    int dense = (cfg->num_kv_heads == 1 || kv->head_stride == hs) &&
                (cfg->page_size == 1 || kv->token_stride == hs * cfg->num_kv_heads) &&
                (cfg->num_blocks == 1 ||
                 kv->block_stride == hs * cfg->num_kv_heads * cfg->page_size);
    if (cfg->device == RKV_DEVICE_CUDA && !dense)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: device buffers must each be a contiguous "
                             "[num_blocks][page_size][num_kv_heads][head_dim] "
                             "array (strides %zu, %zu, %zu bytes; given %zu, "
                             "%zu, %zu): the CUDA kernels and copies read no "
                             "other layout; other strides work on host pools",
                             fn, hs * cfg->num_kv_heads * cfg->page_size,
                             hs * cfg->num_kv_heads, hs, kv->block_stride,
                             kv->token_stride, kv->head_stride);
    rkv_pool *p = NULL;
    if ((st = rkv_pool_new(fn, cfg, bpb, kv_bytes, &p)) != RKV_OK)
        return st;
    p->external = 1;
    if ((st = rkv_pool_alloc_kv(p)) != RKV_OK) {
        free(p->meta);
        free(p);
        return st;
    }
    for (uint32_t l = 0; l < cfg->num_layers; l++) {
        p->seg[2 * (size_t)l] = kv->k[l];
        p->seg[2 * (size_t)l + 1] = kv->v[l];
    }
    /* a dim of one is never stepped: the dense stride stands for it */
    p->head_stride = cfg->num_kv_heads > 1 ? kv->head_stride : hs;
    p->tok_stride = cfg->page_size > 1 ? kv->token_stride : hs * cfg->num_kv_heads;
    p->blk_stride = cfg->num_blocks > 1 ? kv->block_stride
                                        : hs * cfg->num_kv_heads * cfg->page_size;
    p->dense = dense;
    *out = p;
    return RKV_OK;
}

void rkv_pool_destroy(rkv_pool *pool)
{
    if (pool == NULL)
        return;
    rkv_pool_free_kv(pool);
    free(pool->meta);
    free(pool);
}

rkv_status rkv_pool_get_config(const rkv_pool *pool, rkv_pool_config *out)
{
    if (pool == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_pool_get_config: NULL");
    *out = pool->cfg;
    return RKV_OK;
}

uint32_t rkv_pool_num_blocks(const rkv_pool *pool)
{
    return pool ? pool->cfg.num_blocks : 0;
}

uint32_t rkv_pool_num_free(const rkv_pool *pool)
{
    return pool ? pool->num_free : 0;
}

uint32_t rkv_pool_page_size(const rkv_pool *pool)
{
    return pool ? pool->cfg.page_size : 0;
}

size_t rkv_pool_bytes_per_block(const rkv_pool *pool)
{
    return pool ? pool->bytes_per_block : 0;
}

size_t rkv_pool_config_row_bytes(const rkv_pool_config *cfg)
{
    size_t bpb = 0, kv = 0;
    if (cfg == NULL || cfg->num_layers == 0)
        return 0;
    rkv_pool_config c = *cfg;
    c.num_blocks = 1; /* only the geometry matters here */
    if (rkv_pool_check_config("rkv_pool_config_row_bytes", &c, &bpb, &kv) != RKV_OK)
        return 0;
    return rkv_row_bytes(&c);
}

size_t rkv_pool_host_metadata_bytes(const rkv_pool *pool)
{
    return pool ? sizeof *pool + pool->meta_bytes : 0;
}

rkv_status rkv_pool_layer_kv(const rkv_pool *pool, uint32_t layer, void **k,
                             void **v)
{
    if (pool == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_pool_layer_kv: NULL pool");
    if (pool->seg == NULL)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_pool_layer_kv: metadata-only pool has no KV memory");
    if (layer >= pool->cfg.num_layers)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_pool_layer_kv: layer %u of %u", layer,
                             pool->cfg.num_layers);
    const size_t n = rkv_pool_segs_per_layer(&pool->cfg);
    if (k != NULL)
        *k = pool->seg[n * layer];
    if (v != NULL)
        *v = n == 2 ? pool->seg[2 * (size_t)layer + 1] : NULL;
    return RKV_OK;
}

rkv_status rkv_pool_kv_strides(const rkv_pool *pool, size_t *block_stride,
                               size_t *token_stride, size_t *head_stride)
{
    if (pool == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_pool_kv_strides: NULL pool");
    if (pool->seg == NULL)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_pool_kv_strides: metadata-only pool has no KV memory");
    if (block_stride != NULL)
        *block_stride = pool->blk_stride;
    if (token_stride != NULL)
        *token_stride = pool->tok_stride;
    if (head_stride != NULL)
        *head_stride = pool->head_stride;
    return RKV_OK;
}

int rkv_pool_kv_external(const rkv_pool *pool)
{
    return pool != NULL && pool->external;
}

rkv_status rkv_pool_alloc(rkv_pool *pool, rkv_block_id *out)
{
    return rkv_pool_alloc_n(pool, 1, out);
}

rkv_status rkv_pool_alloc_n(rkv_pool *pool, uint32_t n, rkv_block_id *out)
{
    if (pool == NULL || (out == NULL && n > 0))
        return rkv_null_arg("rkv_pool_alloc_n", pool, "pool", "out");
    if (n > pool->num_free)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "rkv_pool_alloc_n: %u blocks asked, %u free", n,
                             pool->num_free);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = pool->free_head;
        pool->free_head = (uint32_t)pool->hash[id];
        pool->num_free--;
        pool->refcount[id] = 1;
        pool->hash[id] = RKV_HASH_ROOT;
        out[i] = id;
    }
    return RKV_OK;
}

rkv_status rkv_pool_ref(rkv_pool *pool, rkv_block_id id)
{
    if (pool == NULL || id >= pool->cfg.num_blocks)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_pool_ref: block %u of %u",
                             id, pool ? pool->cfg.num_blocks : 0);
    if (pool->refcount[id] == 0)
        return rkv_set_error(RKV_ERR_STATE, "rkv_pool_ref: block %u is free", id);
    if (pool->refcount[id] == UINT32_MAX)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_pool_ref: block %u ref count would overflow", id);
    pool->refcount[id]++;
    return RKV_OK;
}

rkv_status rkv_pool_unref(rkv_pool *pool, rkv_block_id id)
{
    if (pool == NULL || id >= pool->cfg.num_blocks)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_pool_unref: block %u of %u", id,
                             pool ? pool->cfg.num_blocks : 0);
    if (pool->refcount[id] == 0)
        return rkv_set_error(RKV_ERR_STATE, "rkv_pool_unref: block %u is free", id);
    (void)rkv_pool_drop_ref(pool, id);
    return RKV_OK;
}

rkv_status rkv_pool_unref_n(rkv_pool *pool, uint32_t n, const rkv_block_id *ids)
{
    if (pool == NULL || (ids == NULL && n > 0))
        return rkv_null_arg("rkv_pool_unref_n", pool, "pool", "ids");
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= pool->cfg.num_blocks)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "rkv_pool_unref_n: ids[%u] = %u of %u blocks", i,
                                 ids[i], pool->cfg.num_blocks);
    /* Decrement in order; on a free id (or one listed more often than it
     * is referenced) undo the decrements made so far. */
    uint32_t i;
    for (i = 0; i < n; i++) {
        if (pool->refcount[ids[i]] == 0)
            break;
        pool->refcount[ids[i]]--;
    }
    if (i < n) {
        uint32_t bad = ids[i];
        while (i-- > 0)
            pool->refcount[ids[i]]++;
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_pool_unref_n: block %u is free or listed more "
                             "times than it is referenced", bad);
    }
    /* Push each block that reached 0 once: a pushed block is marked with
     * UINT32_MAX (no count can be that high after a decrement), then the
     * marks are cleared. */
    for (i = 0; i < n; i++) {
        if (pool->refcount[ids[i]] == 0) {
            rkv_pool_push_free(pool, ids[i]);
            pool->refcount[ids[i]] = UINT32_MAX;
        }
    }
    for (i = 0; i < n; i++)
        if (pool->refcount[ids[i]] == UINT32_MAX)
            pool->refcount[ids[i]] = 0;
    return RKV_OK;
}

uint32_t rkv_pool_refcount(const rkv_pool *pool, rkv_block_id id)
{
    if (pool == NULL || id >= pool->cfg.num_blocks)
        return 0;
    return pool->refcount[id];
}

uint64_t rkv_block_hash(uint64_t parent_hash, uint64_t ns,
                        const int32_t *page_tokens, uint32_t page_size)
{
    uint64_t rec[2] = {parent_hash, ns};
    uint64_t seed = XXH3_64bits(rec, sizeof rec);
    if (page_tokens == NULL)
        page_size = 0;
    return XXH3_64bits_withSeed(page_tokens, (size_t)page_size * sizeof(int32_t),
                                seed);
}

uint64_t rkv_pool_block_hash(const rkv_pool *pool, rkv_block_id id)
{
    if (pool == NULL || id >= pool->cfg.num_blocks || pool->refcount[id] == 0)
        return RKV_HASH_ROOT;
    if (pool->tree_hash != NULL)
        return pool->tree_hash(pool->tree, id, 0);
    return pool->hash[id];
}

rkv_status rkv_pool_set_block_hash(rkv_pool *pool, rkv_block_id id,
                                   uint64_t hash)
{
    if (pool == NULL || id >= pool->cfg.num_blocks)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_pool_set_block_hash: block %u of %u", id,
                             pool ? pool->cfg.num_blocks : 0);
    if (pool->refcount[id] == 0)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_pool_set_block_hash: block %u is free", id);
    if (pool->tree_hash != NULL) /* the tree's lazy pages get their
                                    hashes first (tree_hash.c) */
        (void)pool->tree_hash(pool->tree, id, 1);
    pool->hash[id] = hash;
    return RKV_OK;
}

rkv_status rkv_pool_check(const rkv_pool *pool)
{
    if (pool == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_pool_check: NULL pool");
    uint32_t n = pool->cfg.num_blocks;
    if (pool->num_free > n)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_pool_check: %u free of %u",
                             pool->num_free, n);
    if ((pool->kv == NULL && !pool->external) != (pool->kv_bytes == 0) ||
        (pool->external && pool->kv != NULL) ||
        (pool->seg == NULL) != (pool->kv_bytes == 0))
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_pool_check: KV memory and size disagree");
    if ((pool->cuda.be != NULL) != (pool->cfg.device == RKV_DEVICE_CUDA))
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_pool_check: CUDA backend and device disagree");
    uint8_t *seen = calloc((size_t)n / 8 + 1, 1);
    if (seen == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_pool_check: scratch bitmap");
    rkv_status st = RKV_OK;
    uint32_t id = pool->free_head;
    for (uint32_t i = 0; i < pool->num_free && st == RKV_OK; i++) {
        if (id >= n)
            st = rkv_set_error(RKV_ERR_CORRUPT,
                               "rkv_pool_check: free list entry %u is %u, out "
                               "of range", i, id);
        else if (seen[id / 8] & (1u << (id % 8)))
            st = rkv_set_error(RKV_ERR_CORRUPT,
                               "rkv_pool_check: block %u twice on the free list",
                               id);
        else if (pool->refcount[id] != 0)
            st = rkv_set_error(RKV_ERR_CORRUPT,
                               "rkv_pool_check: block %u free with ref count %u",
                               id, pool->refcount[id]);
        else {
            seen[id / 8] |= (uint8_t)(1u << (id % 8));
            uint64_t next = pool->hash[id];
            id = next > RKV_POOL_END ? n : (uint32_t)next;
        }
    }
    if (st == RKV_OK && id != RKV_POOL_END)
        st = rkv_set_error(RKV_ERR_CORRUPT,
                           "rkv_pool_check: free list does not end after %u "
                           "blocks", pool->num_free);
    uint32_t used = 0;
    for (uint32_t b = 0; b < n && st == RKV_OK; b++) {
        if (pool->refcount[b] > 0)
            used++;
        else if (!(seen[b / 8] & (1u << (b % 8))))
            st = rkv_set_error(RKV_ERR_CORRUPT,
                               "rkv_pool_check: block %u has ref count 0 but "
                               "is not on the free list", b);
    }
    if (st == RKV_OK && used + pool->num_free != n)
        st = rkv_set_error(RKV_ERR_CORRUPT,
                           "rkv_pool_check: %u used + %u free != %u blocks", used,
                           pool->num_free, n);
    free(seen);
    return st;
}
