/*
 * tests/test_pool_external.c -- pools over server-owned KV memory
 * (rkv_pool_create_external): block copies, the host tier and the CPU
 * attention reference work on the caller's buffers through their bases
 * and strides.
 *
 * Every check addresses the caller's buffers with the test's own
 * arithmetic (base + b * block_stride + t * token_stride + h * head_stride),
 * never through the library, and every byte outside the pool's blocks
 * (padding between heads, tokens and blocks) must keep the value the test
 * put there. Layouts: SGLang's per-layer [slots][H][D] (dense), vLLM's
 * FlashInfer HND with K and V interleaved per block, and one padded at
 * every level (a run per (token, head)).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/host_tier.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

enum { LAY_SGLANG, LAY_HND, LAY_PADDED, LAY_COUNT };
static const char *lay_name[LAY_COUNT] = {"sglang", "hnd", "padded"};

/* The caller's buffers: one allocation per layer (K and V inside it). */
typedef struct xkv {
    rkv_pool_config cfg;
    uint32_t layout;
    size_t es, bs, ts, hs, layer_bytes;
    uint8_t **mem;        /* [L] the caller's allocations                 */
    void **k, **v;        /* [L]                                          */
    uint8_t **owned;      /* [L] 1 where a byte belongs to some K/V head  */
} xkv;

static void xkv_open(xkv *x, const rkv_pool_config *cfg, uint32_t layout)
{
    memset(x, 0, sizeof *x);
    x->cfg = *cfg;
    x->layout = layout;
    x->es = cfg->dtype == RKV_DTYPE_F32 ? 4 : 2;
    const size_t P = cfg->page_size, H = cfg->num_kv_heads, D = cfg->head_dim;
    const size_t NB = cfg->num_blocks, row = D * x->es;
    size_t vofs = 0; /* V's offset from K in the layer's allocation */
    switch (layout) {
    case LAY_SGLANG: /* [2][NB * P][H][D] */
        x->hs = row;
        x->ts = H * row;
        x->bs = P * x->ts;
        vofs = NB * x->bs;
        x->layer_bytes = 2 * vofs;
        break;
    case LAY_HND: /* [NB][2][H][P][D] */
        x->ts = row;
        x->hs = P * row;
        x->bs = 2 * H * x->hs;
        vofs = H * x->hs;
        x->layer_bytes = NB * x->bs;
        break;
    default: /* padded at every level, K and V apart */
        x->hs = row + 2 * x->es;
        x->ts = H * x->hs + 4 * x->es;
        x->bs = P * x->ts + 8 * x->es;
        vofs = NB * x->bs + 16 * x->es;
        x->layer_bytes = 2 * vofs;
        break;
    }
    uint32_t L = cfg->num_layers;
    x->mem = calloc(L, sizeof *x->mem);
    x->owned = calloc(L, sizeof *x->owned);
    x->k = calloc(L, sizeof *x->k);
    x->v = calloc(L, sizeof *x->v);
    for (uint32_t l = 0; l < L; l++) {
        x->mem[l] = malloc(x->layer_bytes);
        x->owned[l] = calloc(x->layer_bytes, 1);
        memset(x->mem[l], 0xAB, x->layer_bytes);
        x->k[l] = x->mem[l];
        x->v[l] = x->mem[l] + vofs;
        for (size_t s = 0; s < 2; s++)
            for (size_t b = 0; b < NB; b++)
                for (size_t t = 0; t < P; t++)
                    for (size_t h = 0; h < H; h++)
                        memset(x->owned[l] + s * vofs + b * x->bs + t * x->ts +
                                   h * x->hs, 1, row);
    }
}

static void xkv_close(xkv *x)
{
    for (uint32_t l = 0; l < x->cfg.num_layers; l++) {
        free(x->mem[l]);
        free(x->owned[l]);
    }
    free(x->mem);
    free(x->owned);
    free(x->k);
    free(x->v);
}

static rkv_kv_buffers xkv_buffers(const xkv *x)
{
    rkv_kv_buffers kb = {(void *const *)x->k, (void *const *)x->v, x->bs, x->ts,
                         x->hs};
    return kb;
}

/* The caller's address of element 0 of (layer, K/V, block, token, head). */
static uint8_t *at(const xkv *x, uint32_t l, int isv, uint32_t b, uint32_t t,
                   uint32_t h)
{
    return (uint8_t *)(isv ? x->v[l] : x->k[l]) + b * x->bs + t * x->ts + h * x->hs;
}

/* The byte the test puts at byte i of the head (l, isv, t, h) of the page
 * with content id c. */
static uint8_t pat(uint32_t c, uint32_t l, int isv, uint32_t t, uint32_t h,
                   size_t i)
{
    uint64_t z = ((((uint64_t)c * 131 + l) * 7 + (uint64_t)isv) * 1031 + t) * 61 + h;
    z = z * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
    return (uint8_t)(z >> 56);
}

/* Writes content c into block b with the caller's own arithmetic. */
static void put_page(const xkv *x, uint32_t b, uint32_t c)
{
    size_t row = x->cfg.head_dim * x->es;
    for (uint32_t l = 0; l < x->cfg.num_layers; l++)
        for (int s = 0; s < 2; s++)
            for (uint32_t t = 0; t < x->cfg.page_size; t++)
                for (uint32_t h = 0; h < x->cfg.num_kv_heads; h++) {
                    uint8_t *p = at(x, l, s, b, t, h);
                    for (size_t i = 0; i < row; i++)
                        p[i] = pat(c, l, s, t, h, i);
                }
}

/* want[b]: the content block b must hold (UINT32_MAX: don't care, but
 * inside the pool's blocks); every byte outside them must be 0xAB. */
static void check_bytes(const xkv *x, const uint32_t *want)
{
    size_t row = x->cfg.head_dim * x->es;
    for (uint32_t l = 0; l < x->cfg.num_layers; l++) {
        for (size_t i = 0; i < x->layer_bytes; i++)
            if (!x->owned[l][i])
                cr_assert_eq(x->mem[l][i], 0xAB, "%s: layer %u byte %zu outside "
                             "every block was written", lay_name[x->layout], l, i);
        for (uint32_t b = 0; b < x->cfg.num_blocks; b++) {
            if (want[b] == UINT32_MAX)
                continue;
            for (int s = 0; s < 2; s++)
                for (uint32_t t = 0; t < x->cfg.page_size; t++)
                    for (uint32_t h = 0; h < x->cfg.num_kv_heads; h++) {
                        const uint8_t *p = at(x, l, s, b, t, h);
                        for (size_t i = 0; i < row; i++)
                            cr_assert_eq(p[i], pat(want[b], l, s, t, h, i),
                                         "%s: block %u (content %u) layer %u %c "
                                         "token %u head %u byte %zu",
                                         lay_name[x->layout], b, want[b], l,
                                         s ? 'V' : 'K', t, h, i);
                    }
        }
    }
}

static void base_cfg(rkv_pool_config *c, rkv_dtype dt)
{
    rkv_pool_config_init(c);
    c->num_blocks = 12;
    c->page_size = 4;
    c->num_layers = 3;
    c->num_kv_heads = 2;
    c->head_dim = 8;
    c->dtype = dt;
}

/* The caller's buffers in layout lay for the base shape of type dt (in
 * x->cfg), and a pool over them. */
static rkv_pool *xkv_pool(xkv *x, rkv_dtype dt, uint32_t lay)
{
    rkv_pool_config cfg;
    base_cfg(&cfg, dt);
    xkv_open(x, &cfg, lay);
    rkv_kv_buffers kb = xkv_buffers(x);
    rkv_pool *pool;
    OK(rkv_pool_create_external(&cfg, &kb, &pool));
    return pool;
}

/* ---- accessors, copies ------------------------------------------------------- */

Test(pool_external, accessors_and_copies)
{
    for (uint32_t lay = 0; lay < LAY_COUNT; lay++) {
        xkv x;
        rkv_pool *pool = xkv_pool(&x, RKV_DTYPE_BF16, lay);
        cr_assert_eq(rkv_pool_kv_external(pool), 1);
        size_t bs, ts, hs;
        OK(rkv_pool_kv_strides(pool, &bs, &ts, &hs));
        cr_assert(bs == x.bs && ts == x.ts && hs == x.hs);
        for (uint32_t l = 0; l < x.cfg.num_layers; l++) {
            void *k, *v;
            OK(rkv_pool_layer_kv(pool, l, &k, &v));
            cr_assert(k == x.k[l] && v == x.v[l]);
        }
        cr_assert_eq(rkv_pool_bytes_per_block(pool),
                     (size_t)3 * 2 * 4 * 2 * 8 * 2);
        rkv_block_id ids[12];
        OK(rkv_pool_alloc_n(pool, 12, ids));
        uint32_t want[12];
        for (uint32_t b = 0; b < 12; b++) {
            put_page(&x, b, 100 + b);
            want[b] = 100 + b;
        }
        check_bytes(&x, want);
        /* to host: the packed format, whatever the layout */
        size_t bpb = rkv_pool_bytes_per_block(pool);
        uint8_t *host = malloc(2 * bpb);
        rkv_block_id two[2] = {7, 2};
        OK(rkv_pool_copy_to_host(pool, 2, two, host));
        size_t row = x.cfg.head_dim * x.es, seg = 4 * 2 * row;
        for (uint32_t i = 0; i < 2; i++)
            for (uint32_t l = 0; l < 3; l++)
                for (int s = 0; s < 2; s++)
                    for (uint32_t t = 0; t < 4; t++)
                        for (uint32_t h = 0; h < 2; h++)
                            for (size_t j = 0; j < row; j++)
                                cr_assert_eq(host[i * bpb + (2 * l + s) * seg +
                                                  (t * 2 + h) * row + j],
                                             pat(100 + two[i], l, s, t, h, j));
        /* from host: block 7's bytes into 3 and 2's into 4 */
        rkv_block_id dst[2] = {3, 4};
        OK(rkv_pool_copy_from_host(pool, 2, dst, host));
        want[3] = 107;
        want[4] = 102;
        check_bytes(&x, want);
        /* within the pool */
        rkv_block_id src2[3] = {0, 1, 5}, dst2[3] = {8, 9, 5};
        OK(rkv_pool_copy_blocks(pool, 3, src2, dst2));
        want[8] = 100;
        want[9] = 101;
        check_bytes(&x, want);
        OK(rkv_pool_check(pool));
        free(host);
        rkv_pool_destroy(pool); /* never frees the caller's buffers */
        check_bytes(&x, want);   /* still the caller's (ASan: not freed) */
        xkv_close(&x);
    }
}

Test(pool_external, refused_layouts)
{
    rkv_pool_config cfg;
    base_cfg(&cfg, RKV_DTYPE_F16);
    xkv x;
    xkv_open(&x, &cfg, LAY_SGLANG);
    rkv_pool *pool = NULL;
    rkv_kv_buffers kb = xkv_buffers(&x);
    cr_assert_eq(rkv_pool_create_external(&cfg, NULL, &pool), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_pool_create_external(NULL, &kb, &pool), RKV_ERR_INVALID_ARG);
    /* heads alias: the head stride is smaller than a head */
    kb.head_stride = cfg.head_dim * x.es - 2;
    cr_assert_eq(rkv_pool_create_external(&cfg, &kb, &pool), RKV_ERR_INVALID_ARG);
    /* tokens alias heads */
    kb = xkv_buffers(&x);
    kb.token_stride = x.hs;
    cr_assert_eq(rkv_pool_create_external(&cfg, &kb, &pool), RKV_ERR_INVALID_ARG);
    /* blocks alias tokens */
    kb = xkv_buffers(&x);
    kb.block_stride = x.bs - x.ts;
    cr_assert_eq(rkv_pool_create_external(&cfg, &kb, &pool), RKV_ERR_INVALID_ARG);
    /* not a multiple of the element size */
    kb = xkv_buffers(&x);
    kb.block_stride = x.bs + 1;
    cr_assert_eq(rkv_pool_create_external(&cfg, &kb, &pool), RKV_ERR_INVALID_ARG);
    /* the buffer's extent overflows */
    kb = xkv_buffers(&x);
    kb.block_stride = SIZE_MAX / 4;
    cr_assert_eq(rkv_pool_create_external(&cfg, &kb, &pool), RKV_ERR_INVALID_ARG);
    /* a NULL or misaligned base */
    kb = xkv_buffers(&x);
    void *saved = x.v[1];
    x.v[1] = NULL;
    cr_assert_eq(rkv_pool_create_external(&cfg, &kb, &pool), RKV_ERR_INVALID_ARG);
    x.v[1] = (uint8_t *)saved + 1;
    cr_assert_eq(rkv_pool_create_external(&cfg, &kb, &pool), RKV_ERR_INVALID_ARG);
    x.v[1] = saved;
    /* metadata-only has no buffers */
    rkv_pool_config c0 = cfg;
    c0.num_layers = 0;
    cr_assert_eq(rkv_pool_create_external(&c0, &kb, &pool), RKV_ERR_INVALID_ARG);
    /* device buffers in a layout the kernels cannot read: refused before
     * the CUDA backend is even looked for */
    xkv y;
    xkv_open(&y, &cfg, LAY_HND);
    rkv_kv_buffers kh = xkv_buffers(&y);
    rkv_pool_config cc = cfg;
    cc.device = RKV_DEVICE_CUDA;
    cr_assert_eq(rkv_pool_create_external(&cc, &kh, &pool), RKV_ERR_UNSUPPORTED);
    cr_assert(strstr(rkv_last_error(), "host pools") != NULL, "%s", rkv_last_error());
    cr_assert_null(pool);
    /* a dim of one: its stride is never stepped, any value goes */
    rkv_pool_config c1 = cfg;
    c1.num_kv_heads = 1;
    kb = xkv_buffers(&x);
    kb.head_stride = 0;
    OK(rkv_pool_create_external(&c1, &kb, &pool));
    size_t hs;
    OK(rkv_pool_kv_strides(pool, NULL, NULL, &hs));
    cr_assert_eq(hs, cfg.head_dim * x.es);
    rkv_pool_destroy(pool);
    /* a pool-owned pool reports its own (dense) strides */
    OK(rkv_pool_create(&cfg, &pool));
    size_t bs, ts;
    OK(rkv_pool_kv_strides(pool, &bs, &ts, &hs));
    cr_assert(hs == 16 && ts == 32 && bs == 128 && !rkv_pool_kv_external(pool));
    rkv_pool_destroy(pool);
    xkv_close(&y);
    xkv_close(&x);
}

/* ---- the host tier over caller-owned buffers ---------------------------------- */

/* Fills pages, demotes them all to the host tier (freeing every device
 * block), scribbles over the whole buffers as a server reusing its slots
 * would, loads them back and compares every byte. */
Test(pool_external, host_tier_roundtrip_every_byte)
{
    for (uint32_t lay = 0; lay < LAY_COUNT; lay++) {
        xkv x;
        rkv_pool *pool = xkv_pool(&x, RKV_DTYPE_F16, lay);
        rkv_tree *tree;
        rkv_store *host;
        rkv_test_host_tier(pool, 32, &tree, &host);

        enum { NP = 10 };
        int32_t tok[NP * 4];
        for (uint32_t i = 0; i < NP * 4; i++)
            tok[i] = (int32_t)(7 * i + lay);
        rkv_block_id b[NP];
        OK(rkv_tree_alloc_blocks(tree, NP, b));
        uint32_t want[12];
        for (uint32_t i = 0; i < 12; i++)
            want[i] = UINT32_MAX;
        for (uint32_t i = 0; i < NP; i++) {
            put_page(&x, b[i], 500 + i); /* page i's content */
            want[b[i]] = 500 + i;
        }
        check_bytes(&x, want);
        rkv_insert_result ir;
        OK(rkv_tree_insert(tree, 3, tok, NP * 4, b, NULL, &ir));
        OK(rkv_pool_unref_n(pool, NP, b));
        /* demote everything: each freed block's bytes went to the host */
        rkv_block_id freed[NP];
        uint32_t nf;
        OK(rkv_tree_evict_ids(tree, NP, freed, NP, &nf));
        cr_assert_eq(nf, NP);
        cr_assert_eq(rkv_pool_num_free(pool), 12);
        rkv_tier_stats ts;
        OK(rkv_tree_tier_stats(tree, &ts));
        cr_assert_eq(ts.resident_pages[RKV_MEDIUM_HOST], NP);
        /* the server reuses its memory: every block's bytes change */
        for (uint32_t bb = 0; bb < 12; bb++) {
            put_page(&x, bb, 900 + bb);
            want[bb] = 900 + bb;
        }
        /* reload */
        rkv_block_id dst[NP];
        rkv_load ld;
        OK(rkv_tree_load(tree, 3, tok, NP * 4, NP, dst, &ld));
        cr_assert_eq(ld.num_pages, NP);
        rkv_transfer_done done[2];
        uint32_t nd = 0;
        OK(rkv_tree_tier_poll(tree, done, 2, &nd));
        cr_assert_eq(nd, 1);
        cr_assert_eq(done[0].status, RKV_OK);
        for (uint32_t i = 0; i < NP; i++)
            want[dst[i]] = 500 + i; /* page i is back, in its new block */
        check_bytes(&x, want);
        rkv_match m;
        rkv_block_id mb[NP];
        OK(rkv_tree_match(tree, 3, tok, NP * 4, mb, RKV_MATCH_PEEK, &m));
        cr_assert_eq(m.matched_tokens, NP * 4);
        cr_assert_arr_eq(mb, dst, sizeof dst);
        OK(rkv_tree_unlock(tree, &ld.lease));
        OK(rkv_tree_check(tree));
        rkv_tree_destroy(tree);
        rkv_store_destroy(host);
        rkv_pool_destroy(pool);
        check_bytes(&x, want);
        xkv_close(&x);
    }
}

/* ---- attention over caller-owned KV ------------------------------------------- */

static float frand(rkv_rng *r)
{
    return (float)rkv_rng_unit(r) * 2.0f - 1.0f;
}

static void fill_elems(rkv_dtype dt, void *buf, size_t n, rkv_rng *r)
{
    for (size_t i = 0; i < n; i++) {
        float f = frand(r);
        if (dt == RKV_DTYPE_F32)
            ((float *)buf)[i] = f;
        else if (dt == RKV_DTYPE_F16)
            ((uint16_t *)buf)[i] = rkv_f32_to_f16(f);
        else
            ((uint16_t *)buf)[i] = rkv_f32_to_bf16(f);
    }
}

/* The same KV appended to a pool-owned pool and to caller-owned buffers
 * (each layout, each dtype): decode, prefill and cascade give the same
 * bits, and append put each row where the caller's layout says. */
Test(pool_external, attention_matches_pool_owned)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("pool_external.attention"));
    const rkv_dtype dts[3] = {RKV_DTYPE_F16, RKV_DTYPE_BF16, RKV_DTYPE_F32};
    for (uint32_t lay = 0; lay < LAY_COUNT; lay++)
        for (int di = 0; di < 3; di++) {
            xkv x;
            rkv_pool *ext = xkv_pool(&x, dts[di], lay), *own;
            OK(rkv_pool_create(&x.cfg, &own));
            rkv_attn *ao, *ae;
            OK(rkv_attn_create(own, &ao));
            OK(rkv_attn_create(ext, &ae));
            /* two requests: blocks {5, 0, 9} (10 tokens) and {3, 11} (7);
             * shared prefix: blocks {7, 2} */
            rkv_block_id ids[12];
            OK(rkv_pool_alloc_n(own, 12, ids));
            OK(rkv_pool_alloc_n(ext, 12, ids));
            const uint32_t indptr[3] = {0, 3, 5}, indices[5] = {5, 0, 9, 3, 11};
            const uint32_t last[2] = {2, 3}, shared[2] = {7, 2};
            const uint32_t P = 4, H = 2, Hq = 4, D = 8;
            size_t es = x.es, row = (size_t)H * D * es;
            uint32_t slots[48];
            uint32_t ns = 0;
            for (uint32_t b = 0; b < 12; b++)
                for (uint32_t t = 0; t < P; t++)
                    slots[ns++] = b * P + t;
            uint8_t *k = malloc(ns * row), *v = malloc(ns * row);
            for (uint32_t l = 0; l < x.cfg.num_layers; l++) {
                fill_elems(dts[di], k, (size_t)ns * H * D, &rng);
                fill_elems(dts[di], v, (size_t)ns * H * D, &rng);
                OK(rkv_attn_append(ao, l, ns, slots, k, v));
                OK(rkv_attn_append(ae, l, ns, slots, k, v));
                for (uint32_t i = 0; i < ns; i++)
                    for (uint32_t h = 0; h < H; h++) {
                        uint32_t b = slots[i] / P, t = slots[i] % P;
                        cr_assert(memcmp(at(&x, l, 0, b, t, h),
                                         k + i * row + h * D * es, D * es) == 0);
                        cr_assert(memcmp(at(&x, l, 1, b, t, h),
                                         v + i * row + h * D * es, D * es) == 0);
                    }
            }
            rkv_paged_kv pkv = {2, indptr, indices, last};
            const uint32_t qo[3] = {0, 4, 7};
            size_t qrow = (size_t)Hq * D * es;
            uint8_t *q = malloc(7 * qrow), *o1 = malloc(7 * qrow), *o2 = malloc(7 * qrow);
            float l1[7 * 4], l2[7 * 4];
            fill_elems(dts[di], q, (size_t)7 * Hq * D, &rng);
            for (uint32_t l = 0; l < x.cfg.num_layers; l++) {
                rkv_attn_params p = {l, Hq, 0.0f, 0, 0};
                OK(rkv_attn_decode(ao, &p, &pkv, q, o1, l1));
                OK(rkv_attn_decode(ae, &p, &pkv, q, o2, l2));
                cr_assert(memcmp(o1, o2, 2 * qrow) == 0, "decode differs");
                cr_assert(memcmp(l1, l2, 2 * 4 * sizeof(float)) == 0);
                OK(rkv_attn_prefill(ao, &p, qo, &pkv, q, o1, l1));
                OK(rkv_attn_prefill(ae, &p, qo, &pkv, q, o2, l2));
                cr_assert(memcmp(o1, o2, 7 * qrow) == 0, "prefill differs");
                cr_assert(memcmp(l1, l2, sizeof l1) == 0);
                OK(rkv_attn_cascade(ao, &p, 2, shared, qo, &pkv, q, o1, l1));
                OK(rkv_attn_cascade(ae, &p, 2, shared, qo, &pkv, q, o2, l2));
                cr_assert(memcmp(o1, o2, 7 * qrow) == 0, "cascade differs");
                cr_assert(memcmp(l1, l2, sizeof l1) == 0);
            }
            uint32_t want[12];
            for (uint32_t b = 0; b < 12; b++)
                want[b] = UINT32_MAX;
            check_bytes(&x, want); /* nothing written outside the blocks */
            free(q);
            free(o1);
            free(o2);
            free(k);
            free(v);
            rkv_attn_destroy(ao);
            rkv_attn_destroy(ae);
            rkv_pool_destroy(own);
            rkv_pool_destroy(ext);
            xkv_close(&x);
        }
}
