/*
 * tests/test_pool_external_cuda.c -- a CUDA pool over server-owned device
 * buffers (rkv_pool_create_external with RKV_DEVICE_CUDA): one cudaMalloc
 * per layer, laid out as SGLang's token pool ([2][slots][H][D]: K then V),
 * which is the layout the kernels read. Block copies (synchronous, and
 * the tier's asynchronous ones, one per layer's K and V) move the
 * server's bytes: checked by reading the device buffers back with
 * cudaMemcpy and comparing every byte, padding between layers included;
 * attention over them gives the bits of a pool-owned CUDA pool holding the
 * same KV.
 *
 * Built in every configuration; it runs where a CUDA pool can be created
 * (the simulator build, -DRKV_CUDA=SIM, or a GPU). Elsewhere every test
 * reports itself skipped ("no CUDA device: external CUDA pool tests
 * skipped").
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/host_tier.h"

#ifdef RKV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define SKIP_MSG "no CUDA device: external CUDA pool tests skipped"

#ifdef RKV_HAVE_CUDA

#define NB 10u
#define P 4u
#define L 2u
#define H 2u
#define D 64u
#define ES 2u
#define SEG ((size_t)NB * P * H * D * ES) /* one layer's K (or V)          */
#define GAP 256u                           /* bytes after V, never written */

typedef struct dev {
    rkv_pool_config cfg;
    uint8_t *mem[L]; /* device: K, V, GAP bytes                           */
    void *k[L], *v[L];
    uint8_t *img[L]; /* host image of what each layer's memory must hold */
} dev;

static uint8_t mix(uint64_t i, uint64_t l)
{
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ (l + 1) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    return (uint8_t)((z * 0x94D049BB133111EBull) >> 56);
}

static size_t layer_bytes(void)
{
    return 2 * SEG + GAP;
}

/* Skips without a CUDA device; else device buffers filled with a pattern. */
static void dev_open(dev *d)
{
    memset(d, 0, sizeof *d);
    rkv_pool_config_init(&d->cfg);
    d->cfg.num_blocks = NB;
    d->cfg.page_size = P;
    d->cfg.num_layers = L;
    d->cfg.num_kv_heads = H;
    d->cfg.head_dim = D;
    d->cfg.dtype = RKV_DTYPE_F16;
    d->cfg.device = RKV_DEVICE_CUDA;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        cr_skip_test(SKIP_MSG);
    }
    for (uint32_t l = 0; l < L; l++) {
        void *p = NULL;
        cr_assert_eq(cudaMalloc(&p, layer_bytes()), cudaSuccess);
        d->mem[l] = p;
        d->k[l] = d->mem[l];
        d->v[l] = d->mem[l] + SEG;
        d->img[l] = malloc(layer_bytes());
        for (size_t i = 0; i < layer_bytes(); i++)
            d->img[l][i] = mix(i, l); /* no period: every segment differs */
        cr_assert_eq(cudaMemcpy(d->mem[l], d->img[l], layer_bytes(),
                                cudaMemcpyHostToDevice), cudaSuccess);
    }
}

static void dev_close(dev *d)
{
    for (uint32_t l = 0; l < L; l++) {
        (void)cudaFree(d->mem[l]);
        free(d->img[l]);
    }
}

static rkv_kv_buffers dev_buffers(const dev *d)
{
    rkv_kv_buffers kb = {(void *const *)d->k, (void *const *)d->v,
                         (size_t)P * H * D * ES, (size_t)H * D * ES,
                         (size_t)D * ES};
    return kb;
}

/* Every byte of the device buffers equals the image. */
static void dev_check(const dev *d)
{
    uint8_t *got = malloc(layer_bytes());
    for (uint32_t l = 0; l < L; l++) {
        cr_assert_eq(cudaMemcpy(got, d->mem[l], layer_bytes(),
                                cudaMemcpyDeviceToHost), cudaSuccess);
        for (size_t i = 0; i < layer_bytes(); i++)
            cr_assert_eq(got[i], d->img[l][i], "layer %u byte %zu", l, i);
    }
    free(got);
}

/* The image's bytes of block b, packed as rkv_pool_copy_to_host writes. */
static void img_block(const dev *d, uint32_t b, uint8_t *out)
{
    size_t seg = (size_t)P * H * D * ES;
    for (uint32_t s = 0; s < 2 * L; s++)
        memcpy(out + s * seg, d->img[s / 2] + (s % 2) * SEG + b * seg, seg);
}

static void img_put_block(dev *d, uint32_t b, const uint8_t *in)
{
    size_t seg = (size_t)P * H * D * ES;
    for (uint32_t s = 0; s < 2 * L; s++)
        memcpy(d->img[s / 2] + (s % 2) * SEG + b * seg, in + s * seg, seg);
}

/* The device buffers and an external pool over them; the test is skipped
 * (the buffers freed) where the backend finds no device. */
static rkv_pool *dev_pool(dev *d)
{
    dev_open(d);
    rkv_kv_buffers kb = dev_buffers(d);
    rkv_pool *pool;
    rkv_status st = rkv_pool_create_external(&d->cfg, &kb, &pool);
    if (st == RKV_ERR_NO_DEVICE) {
        dev_close(d);
        cr_skip_test(SKIP_MSG);
    }
    OK(st);
    return pool;
}

#endif

Test(pool_external_cuda, copies)
{
#ifndef RKV_HAVE_CUDA
    cr_skip_test(SKIP_MSG);
#else
    dev d;
    rkv_pool *pool = dev_pool(&d);
    cr_assert_eq(rkv_pool_kv_external(pool), 1);
    size_t bpb = rkv_pool_bytes_per_block(pool);
    rkv_block_id ids[NB];
    OK(rkv_pool_alloc_n(pool, NB, ids));
    uint8_t *h = malloc(3 * bpb), *want = malloc(bpb);
    rkv_block_id three[3] = {6, 1, 9};
    OK(rkv_pool_copy_to_host(pool, 3, three, h));
    for (uint32_t i = 0; i < 3; i++) {
        img_block(&d, three[i], want);
        cr_assert(memcmp(h + i * bpb, want, bpb) == 0, "block %u", three[i]);
    }
    rkv_block_id dst[3] = {0, 2, 3};
    OK(rkv_pool_copy_from_host(pool, 3, dst, h));
    for (uint32_t i = 0; i < 3; i++)
        img_put_block(&d, dst[i], h + i * bpb);
    dev_check(&d);
    rkv_block_id s2[2] = {4, 5}, d2[2] = {7, 8};
    OK(rkv_pool_copy_blocks(pool, 2, s2, d2));
    for (uint32_t i = 0; i < 2; i++) {
        img_block(&d, s2[i], want);
        img_put_block(&d, d2[i], want);
    }
    dev_check(&d);
    rkv_pool_destroy(pool);
    dev_check(&d); /* still the caller's, still allocated */
    free(h);
    free(want);
    dev_close(&d);
#endif
}

/* Pages demoted to the host tier, the device buffers overwritten, loaded
 * back by the tier's asynchronous copies: every byte as before. */
Test(pool_external_cuda, host_tier_roundtrip)
{
#ifndef RKV_HAVE_CUDA
    cr_skip_test(SKIP_MSG);
#else
    dev d;
    rkv_pool *pool = dev_pool(&d);
    size_t bpb = rkv_pool_bytes_per_block(pool);
    rkv_tree *tree;
    rkv_store *host;
    rkv_test_host_tier(pool, 16, &tree, &host);
    enum { NP = 6 };
    int32_t tok[NP * P];
    for (uint32_t i = 0; i < NP * P; i++)
        tok[i] = (int32_t)(3 * i + 1);
    rkv_block_id b[NP];
    OK(rkv_tree_alloc_blocks(tree, NP, b));
    uint8_t *page[NP];
    for (uint32_t i = 0; i < NP; i++) {
        page[i] = malloc(bpb);
        img_block(&d, b[i], page[i]); /* the pattern is each page's KV */
    }
    rkv_insert_result ir;
    OK(rkv_tree_insert(tree, 1, tok, NP * P, b, NULL, &ir));
    OK(rkv_pool_unref_n(pool, NP, b));
    rkv_block_id freed[NP];
    uint32_t nf;
    OK(rkv_tree_evict_ids(tree, NP, freed, NP, &nf));
    cr_assert_eq(nf, NP);
    /* the server reuses every slot */
    for (uint32_t l = 0; l < L; l++) {
        for (size_t i = 0; i < 2 * SEG; i++)
            d.img[l][i] = mix(i, l + 100);
        cr_assert_eq(cudaMemcpy(d.mem[l], d.img[l], 2 * SEG, cudaMemcpyHostToDevice),
                     cudaSuccess);
    }
    rkv_block_id dst[NP];
    rkv_load ld;
    OK(rkv_tree_load(tree, 1, tok, NP * P, NP, dst, &ld));
    cr_assert_eq(ld.num_pages, NP);
    rkv_transfer_done done[2];
    uint32_t nd = 0;
    for (int polls = 0; nd == 0 && polls < 100; polls++)
        OK(rkv_tree_tier_poll(tree, done, 2, &nd));
    cr_assert_eq(nd, 1);
    cr_assert_eq(done[0].status, RKV_OK);
    for (uint32_t i = 0; i < NP; i++)
        img_put_block(&d, dst[i], page[i]);
    dev_check(&d);
    OK(rkv_tree_unlock(tree, &ld.lease));
    OK(rkv_tree_check(tree));
    rkv_tree_destroy(tree);
    rkv_store_destroy(host);
    rkv_pool_destroy(pool);
    for (uint32_t i = 0; i < NP; i++)
        free(page[i]);
    dev_close(&d);
#endif
}

/* The same KV appended to a pool-owned CUDA pool and to the server's
 * buffers: decode and prefill give the same bits. */
Test(pool_external_cuda, attention_matches_pool_owned)
{
#ifndef RKV_HAVE_CUDA
    cr_skip_test(SKIP_MSG);
#else
    dev d;
    rkv_pool *ext = dev_pool(&d), *own;
    OK(rkv_pool_create(&d.cfg, &own));
    rkv_attn *ae, *ao;
    OK(rkv_attn_create(ext, &ae));
    OK(rkv_attn_create(own, &ao));
    rkv_block_id ids[NB];
    OK(rkv_pool_alloc_n(ext, NB, ids));
    OK(rkv_pool_alloc_n(own, NB, ids));
    const uint32_t nt = 12, Hq = 4;
    uint32_t slots[12];
    for (uint32_t i = 0; i < nt; i++)
        slots[i] = (i < 6 ? 8 : 2) * P + i % 6; /* blocks 8, 9 then 2, 3 */
    size_t kvrow = (size_t)H * D * ES, qrow = (size_t)Hq * D * ES;
    uint16_t *hk = malloc(nt * kvrow), *hq = malloc(2 * qrow);
    for (size_t i = 0; i < nt * kvrow / 2; i++)
        hk[i] = rkv_f32_to_f16((float)((i * 37) % 101) / 101.0f - 0.5f);
    for (size_t i = 0; i < 2 * qrow / 2; i++)
        hq[i] = rkv_f32_to_f16((float)((i * 53) % 97) / 97.0f - 0.5f);
    void *k, *q, *o1, *o2;
    cr_assert_eq(cudaMalloc(&k, nt * kvrow), cudaSuccess);
    cr_assert_eq(cudaMalloc(&q, 2 * qrow), cudaSuccess);
    cr_assert_eq(cudaMalloc(&o1, 2 * qrow), cudaSuccess);
    cr_assert_eq(cudaMalloc(&o2, 2 * qrow), cudaSuccess);
    cr_assert_eq(cudaMemcpy(k, hk, nt * kvrow, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(cudaMemcpy(q, hq, 2 * qrow, cudaMemcpyHostToDevice), cudaSuccess);
    const uint32_t indptr[3] = {0, 2, 4}, indices[4] = {8, 9, 2, 3};
    const uint32_t last[2] = {2, 2};
    rkv_paged_kv pkv = {2, indptr, indices, last};
    uint8_t *r1 = malloc(2 * qrow), *r2 = malloc(2 * qrow);
    for (uint32_t l = 0; l < L; l++) {
        OK(rkv_attn_append(ae, l, nt, slots, k, k));
        OK(rkv_attn_append(ao, l, nt, slots, k, k));
        rkv_attn_params p = {l, Hq, 0.0f, 0, 0};
        OK(rkv_attn_decode(ae, &p, &pkv, q, o1, NULL));
        OK(rkv_attn_decode(ao, &p, &pkv, q, o2, NULL));
        OK(rkv_attn_sync(ae));
        OK(rkv_attn_sync(ao));
        cr_assert_eq(cudaMemcpy(r1, o1, 2 * qrow, cudaMemcpyDeviceToHost), cudaSuccess);
        cr_assert_eq(cudaMemcpy(r2, o2, 2 * qrow, cudaMemcpyDeviceToHost), cudaSuccess);
        cr_assert(memcmp(r1, r2, 2 * qrow) == 0, "layer %u: decode differs", l);
    }
    /* append wrote the server's buffers where its layout says */
    uint8_t *got = malloc(kvrow);
    for (uint32_t i = 0; i < nt; i++) {
        cr_assert_eq(cudaMemcpy(got, (uint8_t *)d.k[1] + (size_t)slots[i] * kvrow,
                                kvrow, cudaMemcpyDeviceToHost), cudaSuccess);
        cr_assert(memcmp(got, (uint8_t *)hk + i * kvrow, kvrow) == 0, "token %u", i);
    }
    free(got);
    free(r1);
    free(r2);
    (void)cudaFree(k);
    (void)cudaFree(q);
    (void)cudaFree(o1);
    (void)cudaFree(o2);
    free(hk);
    free(hq);
    rkv_attn_destroy(ae);
    rkv_attn_destroy(ao);
    rkv_pool_destroy(ext);
    rkv_pool_destroy(own);
    dev_close(&d);
#endif
}
