/*
 * bench/warm_bench.c -- the disk tier's warm restart, as a hit rate: a
 * multi-turn workload (conversations over shared system prompts) runs
 * through a tree with a small device pool over a real disk store; its
 * first half, a stop (rkv_tree_tier_flush, everything destroyed), then its
 * second half on a new pool, tree and store over the same file. Printed:
 * the second half's hit rate (pages found on the device or the disk /
 * pages asked) for
 *   nostop -- the same tree runs both halves (no restart),
 *   warm   -- restart with warm_restart = 1,
 *   cold   -- restart with warm_restart = 0 (the file started afresh),
 * and the warm store's re-index counts. Every page's bytes are a function
 * of its chained hash, written when computed and compared on every load
 * (a mismatch aborts the bench), so the disk path -- O_DIRECT or buffered,
 * io_uring or pread, records verified -- is the real one.
 *
 *   ./build/warm_bench [--requests N] [--dir DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "radixkv.h"

#define P 16u
#define PROMPTS 8u       /* shared system prompts                        */
#define PROMPT_PAGES 6u
#define CONVS 96u        /* conversations, each on one prompt            */
#define TURN_PAGES 2u    /* pages a turn appends                         */
#define MAX_TURNS 12u
#define MAX_PAGES (PROMPT_PAGES + MAX_TURNS * TURN_PAGES)
#define POOL_BLOCKS 192u
#define DISK_BLOCKS 8192u
#define NS 1u

typedef struct run {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_store *disk;
    size_t bb;
    unsigned char *buf, *want;
    uint64_t asked, hit;
} run;

static void die(const char *what)
{
    fprintf(stderr, "warm_bench: %s: %s\n", what, rkv_last_error());
    exit(1);
}

#define CK(expr)                 \
    do {                         \
        if ((expr) != RKV_OK)    \
            die(#expr);          \
    } while (0)

static void tokens_of(uint32_t conv, uint32_t pages, int32_t *tok)
{
    uint32_t prompt = conv % PROMPTS;
    for (uint32_t j = 0; j < pages * P; j++)
        tok[j] = j < PROMPT_PAGES * P ? (int32_t)(prompt * 100000u + j)
                                      : (int32_t)(1000000u + conv * 10000u + j);
}

static void bytes_of(uint64_t h, size_t bb, unsigned char *out)
{
    for (size_t i = 0; i < bb; i++)
        out[i] = (unsigned char)(h >> (8 * (i % 8))) ^ (unsigned char)(i * 31u);
}

static void open_run(run *r, const char *dir, int warm)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = POOL_BLOCKS;
    pc.page_size = P;
    pc.num_layers = 2;
    pc.num_kv_heads = 2;
    pc.head_dim = 64;
    CK(rkv_pool_create(&pc, &r->pool));
    CK(rkv_tree_create(r->pool, NULL, &r->tree));
    r->bb = rkv_pool_bytes_per_block(r->pool);
    rkv_store_config sc;
    rkv_store_config_init(&sc, RKV_MEDIUM_DISK);
    sc.capacity_blocks = DISK_BLOCKS;
    sc.block_bytes = r->bb;
    sc.path = dir;
    sc.warm_restart = warm;
    sc.page_tokens = P;
    sc.layout_id = rkv_pool_layout_id(r->pool);
    sc.model_id = 1;
    CK(rkv_store_create(&sc, &r->disk));
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.disk = r->disk;
    CK(rkv_tree_attach_tiers(r->tree, &tc));
    r->buf = malloc(r->bb);
    r->want = malloc(r->bb);
}

static void close_run(run *r)
{
    CK(rkv_tree_check(r->tree));
    rkv_tree_destroy(r->tree);
    rkv_store_destroy(r->disk);
    rkv_pool_destroy(r->pool);
    free(r->buf);
    free(r->want);
    r->tree = NULL;
}

/* One request: conversation conv's first `pages` pages. Counts the pages
 * found (device + disk), loads the disk part (verifying its bytes),
 * computes the rest and caches the whole path. */
static void request(run *r, uint32_t conv, uint32_t pages, int count)
{
    int32_t tok[MAX_PAGES * P];
    tokens_of(conv, pages, tok);
    size_t n = (size_t)pages * P;
    rkv_match m;
    rkv_tier_match tm;
    CK(rkv_tree_match_tiers(r->tree, NS, tok, n, NULL, RKV_MATCH_PEEK, &m, &tm));
    if (count) {
        r->asked += pages;
        r->hit += (m.matched_tokens + tm.lower_tokens) / P;
    }
    rkv_block_id blocks[MAX_PAGES];
    if (tm.lower_tokens > 0) {
        rkv_load ld;
        CK(rkv_tree_load(r->tree, NS, tok, n, MAX_PAGES, NULL, &ld));
        rkv_transfer_done done[4];
        uint32_t got = 0;
        while (ld.ticket != 0 && got == 0)
            CK(rkv_tree_tier_poll(r->tree, done, 4, &got));
        if (ld.ticket != 0 && done[0].status != RKV_OK)
            die("load");
        if (ld.ticket != 0)
            CK(rkv_tree_unlock(r->tree, &ld.lease));
    }
    CK(rkv_tree_match(r->tree, NS, tok, n, blocks, 0, &m));
    /* every page that came back is the page its hash names */
    uint64_t h = RKV_HASH_ROOT;
    for (uint32_t j = 0; j < m.num_blocks; j++) {
        h = rkv_block_hash(h, NS, tok + j * P, P);
        CK(rkv_pool_copy_to_host(r->pool, 1, &blocks[j], r->buf));
        bytes_of(h, r->bb, r->want);
        if (memcmp(r->buf, r->want, r->bb) != 0) {
            fprintf(stderr, "warm_bench: conv %u page %u: wrong bytes\n", conv, j);
            exit(1);
        }
    }
    uint32_t have = m.num_blocks;
    if (have == pages)
        return;
    rkv_lease lease;
    CK(rkv_tree_lock(r->tree, m.node, &lease));
    CK(rkv_tree_alloc_blocks(r->tree, pages - have, blocks + have));
    for (uint32_t j = have; j < pages; j++) {
        h = rkv_block_hash(h, NS, tok + j * P, P);
        bytes_of(h, r->bb, r->buf);
        CK(rkv_pool_copy_from_host(r->pool, 1, &blocks[j], r->buf));
    }
    rkv_block_id dups[MAX_PAGES];
    rkv_insert_result ir;
    CK(rkv_tree_insert(r->tree, NS, tok, n, blocks, dups, &ir));
    CK(rkv_pool_unref_n(r->pool, pages - have, blocks + have));
    CK(rkv_pool_unref_n(r->pool, ir.num_dups, dups));
    CK(rkv_tree_unlock(r->tree, &lease));
}

/* The workload: request i is a turn of a conversation drawn by a fixed
 * generator; each conversation's turns come in order. */
typedef struct wl {
    uint32_t turn[CONVS];
    uint64_t rng;
} wl;

static void next_req(wl *w, uint32_t *conv, uint32_t *pages)
{
    for (;;) {
        w->rng ^= w->rng << 13;
        w->rng ^= w->rng >> 7;
        w->rng ^= w->rng << 17;
        uint32_t c = (uint32_t)(w->rng % CONVS);
        if (w->turn[c] >= MAX_TURNS)
            w->turn[c] = 0; /* a new conversation in its place */
        *conv = c;
        *pages = PROMPT_PAGES + ++w->turn[c] * TURN_PAGES;
        if (w->turn[c] == 1)
            *pages = PROMPT_PAGES + TURN_PAGES;
        return;
    }
}

/* Second-half hit rate in percent; restart: 0 none, 1 warm, 2 cold. */
static double second_half(const char *dir, uint32_t requests, int restart,
                          rkv_store_info *info)
{
    run r;
    memset(&r, 0, sizeof r);
    wl w;
    memset(&w, 0, sizeof w);
    w.rng = 0x9e3779b97f4a7c15ull;
    open_run(&r, dir, restart == 1);
    for (uint32_t i = 0; i < requests; i++) {
        if (i == requests / 2 && restart != 0) {
            CK(rkv_tree_tier_flush(r.tree));
            close_run(&r);
            open_run(&r, dir, restart == 1);
            CK(rkv_store_get_info(r.disk, info));
        }
        uint32_t conv, pages;
        next_req(&w, &conv, &pages);
        request(&r, conv, pages, i >= requests / 2);
    }
    double rate = 100.0 * (double)r.hit / (double)r.asked;
    /* warm: the file stays for the next start; remove it here */
    char path[512];
    snprintf(path, sizeof path, "%s/radixkv-tier.blocks", dir);
    close_run(&r);
    (void)unlink(path);
    return rate;
}

int main(int argc, char **argv)
{
    uint32_t requests = 4000;
    const char *dir = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--requests") == 0)
            requests = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
    }
    char tmp[64] = "/tmp/rkv-warm-bench-XXXXXX";
    if (dir == NULL) {
        if (mkdtemp(tmp) == NULL) {
            perror("mkdtemp");
            return 1;
        }
        dir = tmp;
    }
    rkv_store_info none, warm, cold;
    memset(&none, 0, sizeof none);
    double a = second_half(dir, requests, 0, &none);
    double b = second_half(dir, requests, 1, &warm);
    double c = second_half(dir, requests, 2, &cold);
    printf("warm_bench: %u requests, %u conversations on %u prompts, page %u, "
           "device %u blocks, disk %u blocks (%s, %s)\n",
           requests, CONVS, PROMPTS, P, POOL_BLOCKS, DISK_BLOCKS,
           warm.direct_io ? "O_DIRECT" : "buffered", warm.io_uring ? "io_uring" : "pread");
    printf("second-half hit rate: nostop %.2f %%  warm restart %.2f %%  cold restart "
           "%.2f %%\n",
           a, b, c);
    printf("warm restart re-indexed %llu records (skipped %llu, dropped %llu)\n",
           (unsigned long long)warm.warm_records, (unsigned long long)warm.warm_skipped,
           (unsigned long long)warm.warm_dropped);
    if (dir == tmp)
        (void)rmdir(tmp);
    return 0;
}
